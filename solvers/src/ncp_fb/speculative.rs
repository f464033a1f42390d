//! Speculative contacts: which contact candidates ncp_fb gives rows to at large timesteps.
//!
//! ncp_fb collides once per step, at q⁻ (module doc of [`super`]). A contact that is not
//! detected then has no row during the step, so nothing stops the bodies from passing through
//! each other until the next step's collision: at h = 0.1 s on box_traversal, a front wheel
//! leaving the box's far edge 0.12 m above the ground fell through the ground by 0.0997 m in
//! one step (the fixed 0.01 m `detection_margin` saw no ground contact), and the harness's
//! penetration rule stopped the run at t = 3.1 s; at 60–90 ms the same by 5.8–8 cm.
//!
//! The rows are complementarity rows on the gap at q⁺ (`c_n = gap⁻ + h J_n u`), so a row for a
//! contact that does not close carries no impulse: detecting farther is safe, and costs rows.
//! Per step:
//!
//! 1. **Broad widening per pair** ([`Bounds::pair`]): each geom's points move at most at
//!    `s_g = |v_g| + |ω_b| r_g` (speed of the geom's centre, angular speed of its body, radius
//!    of the geom's bounding sphere), so a pair closes by at most `h (s_0 + s_1)` at the start
//!    of the step's velocities; the semi-implicit update adds gravity's `h² |g|`. The pair's
//!    detection distance is widened by twice that sum (twice: other forces, contact impulses
//!    and servos, accelerate bodies too, and a missed contact costs a penetration).
//! 2. **Filter per contact** ([`closing_bound`]): a candidate farther than
//!    `detection_margin` keeps its rows only if `gap ≤ detection_margin +
//!    2 (h max(0, −ġ) + h² |g|)`, with `ġ = J_n v` its own gap rate at q⁻ (negative: closing).
//!    A front wheel on the box top (ġ ≈ 0, the ground 0.12 m below) is a candidate at
//!    h = 0.1 s (2 h² |g| = 0.196 m > 0.12 m), so the step in which it leaves the edge already
//!    has the ground row.
//!
//! Measured (box_traversal, 6 s): deepest penetration 1.4e-4 m at h = 0.1 s (0.0997 m
//! before), every step converged at 0.5 ms to 0.1 s; `contactlab simulate` passes the
//! harness's rules at 60–150 ms, where 60, 70, 90 and 100 ms failed before; mesh_terrain at
//! 50 ms 0 of 200 steps unconverged (2 before).
//!
//! This is the speculative-contact idea of game physics engines (E. Catto, "Continuous
//! Collision", GDC 2013; Box2D and Bullet), here as a candidate rule for complementarity rows.

use nalgebra::DVector;

use crate::dynamics::body_velocities;
use crate::kinematics::Kinematics;
use crate::model::Model;

/// Each geom's speed bound `s_g` (m/s) at the step's start.
#[derive(Debug, Clone)]
pub struct Bounds {
    speed: Vec<f64>,
    g_h2: f64,
    h: f64,
}

impl Bounds {
    /// The bounds at kinematics `kin` and velocities `v` for a step of `h` (s).
    pub fn new(model: &Model, kin: &Kinematics, v: &DVector<f64>, h: f64) -> Self {
        let vel = body_velocities(model, kin, v);
        let speed = model
            .geoms
            .iter()
            .enumerate()
            .map(|(gi, g)| {
                let sv = vel[g.body];
                let w = nalgebra::Vector3::new(sv[0], sv[1], sv[2]);
                let v_o = nalgebra::Vector3::new(sv[3], sv[4], sv[5]);
                if w.norm() == 0.0 && v_o.norm() == 0.0 {
                    return 0.0;
                }
                // Velocity of the geom's centre: v_O + ω × (p − O), O the world origin.
                let vc = v_o + w.cross(&kin.geom_xpos[gi]);
                let r = model.collision_shapes[gi]
                    .shape
                    .compute_local_bounding_sphere()
                    .radius;
                let r = if r.is_finite() { r } else { 0.0 };
                vc.norm() + w.norm() * r
            })
            .collect();
        let g_h2 = if model.options.disable.gravity {
            0.0
        } else {
            model.options.gravity.norm() * h * h
        };
        Self { speed, g_h2, h }
    }

    /// The widening (m) of pair `(g0, g1)`'s detection distance: `2 (h (s_0 + s_1) + h² |g|)`.
    pub fn pair(&self, g0: usize, g1: usize) -> f64 {
        2.0 * (self.h * (self.speed[g0] + self.speed[g1]) + self.g_h2)
    }
}

/// A candidate's closing bound (m) beyond the detection margin: `2 (h max(0, −ġ) + h² |g|)`,
/// `rate` = ġ = `J_n v` its gap rate (m/s, negative closing), `g_h2` = h² |g|.
pub fn closing_bound(rate: f64, h: f64, g_h2: f64) -> f64 {
    2.0 * (h * (-rate).max(0.0) + g_h2)
}
