//! `sphere_bounce`: a sphere thrown down onto a finite slab, with a contact that activates and
//! releases inside a short horizon (the gradient study's case for a changing contact set).
//!
//! Setup (defaults): a sphere of radius r = 0.1 m, 1 kg, I = 2/5 m r², starts at
//! (x₀, 0, top + r + d₀) = (0, 0, 0.11) m with velocity (v_x, 0, v_z) = (2, 0, −1) m/s above a
//! static slab (a box fixed to the world) whose top face is z = 0 and spans
//! x ∈ [−0.2, x_edge] = [−0.2, 0.4033] m. Friction defaults to 0 so that the motion has a
//! closed form for every formulation that is rigid in the limit:
//!
//! * free fall until the sphere touches: `t_a` solves `d₀ + v_z t − g t²/2 = 0`, i.e.
//!   `t_a = (v_z + √(v_z² + 2 g d₀)) / g` (v_z < 0 downward, d₀ = 0.01 m): 9.55 ms;
//! * the contact is inelastic (`ncp_fb`, `signorini`; `soft_convex` and `penalty` are soft and
//!   may rebound slightly), the frictionless sliding keeps v_x, so the contact releases when the
//!   centre passes the edge, `t_r = (x_edge − x₀) / v_x` = 0.20165 s; at 2 m/s the sphere's
//!   centripetal need v_x²/r = 40 m/s² exceeds g, so it leaves the edge at once instead of
//!   rolling around it.
//!
//! At h = 2 ms the activation falls inside step 5 and the release inside step 101 (t_r / h =
//! 100.8), so horizons of 1, 10, 50 and 200 steps lie before, just after, inside and after the
//! contact.
//!
//! # Why the edge is at 0.4033 m and not 0.4 m
//!
//! The sphere's distance to the slab is C¹ but not C² where its centre passes over the edge
//! (flat face on one side, the edge's circle on the other). With the edge at 0.4 m the centre
//! is exactly over it at the start of step 100 (h = 2 ms), 40 (5 ms) and 200 (1 ms): the
//! nominal rollout then sits on that kink, and every central difference of the rollout (the
//! f64 reference) and of the step's assembly (inside the adjoint) converges only at first
//! order in its step. Measured with `ncp_fb` (tight solves) at h = 5 ms, 50 steps, d L/d x₀
//! by central differences at relative steps 1e-3 … 1e-8: 0.48194, 0.50925, 0.51196, 0.512232,
//! 0.512259, 0.512262 (error falling ×10 per decade), so neither the reference nor the adjoint
//! (0.512237) is better than ~1e-5 and the 200-step horizon at 2 ms scored 1.2e-2. At 0.4033 m
//! the release lies inside a step for every timestep down to 0.1 ms, the estimates converge at
//! second order, and the adjoint agrees with the reference to 1e-8 through the release. The
//! degenerate placement stays available (`edge: 0.4`) to show the effect.

use contactlab_solvers::formulation::ParamDoc;
use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::model::{Geom, ModelParts, Quat, Vec3};
use serde::{Deserialize, Serialize};

use super::{check_material, free_body, free_state, model, positive, Material, G, MATERIAL_DOCS};
use crate::{parse_params, AnalyticValue, Scene, SceneEntry, SceneError};

/// Parameters of `sphere_bounce`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SphereBounceParams {
    /// Sphere radius (m).
    pub radius: f64,
    /// Initial clearance between the sphere's bottom and the slab's top (m).
    pub drop: f64,
    /// Initial velocity along +x (m/s).
    pub vx: f64,
    /// Initial velocity along z (m/s), negative downward.
    pub vz: f64,
    /// x of the slab's far edge (m); the slab's top spans x ∈ [−0.2, edge].
    pub edge: f64,
    /// Simulated duration (s).
    pub horizon: f64,
    /// Sliding friction coefficient of both geoms (-).
    pub friction: f64,
    /// Penalty contact stiffness of both geoms (N/m).
    pub ke: f64,
    /// Penalty contact damping of both geoms (N s/m).
    pub kd: f64,
    /// Penalty viscous friction of both geoms (N s/m).
    pub kf: f64,
}

impl Default for SphereBounceParams {
    fn default() -> Self {
        Self {
            radius: 0.1,
            drop: 0.01,
            vx: 2.0,
            vz: -1.0,
            edge: 0.4033,
            horizon: 0.4,
            friction: 0.0,
            ke: 1e5,
            kd: 100.0,
            kf: 200.0,
        }
    }
}

impl SphereBounceParams {
    /// Closed-form time of first contact (s): `(v_z + √(v_z² + 2 g d₀)) / g`.
    pub fn activation_time(&self) -> f64 {
        (self.vz + (self.vz * self.vz + 2.0 * G * self.drop).sqrt()) / G
    }

    /// Closed-form time of release at the slab's edge (s) without friction: `edge / v_x`.
    pub fn release_time(&self) -> f64 {
        self.edge / self.vx
    }
}

/// Half-thickness of the slab (m).
const SLAB_HALF_THICKNESS: f64 = 0.05;
/// Near end of the slab's top (m).
const SLAB_START_X: f64 = -0.2;

/// `sphere_bounce`: a sphere thrown onto a finite slab; contact activates, then releases.
pub const SPHERE_BOUNCE: SceneEntry = SceneEntry {
    name: "sphere_bounce",
    description: "0.1 m sphere thrown down (2, 0, -1) m/s onto a slab 1 cm below, frictionless: lands at 9.55 ms, slides off the edge at 0.20165 s",
    params: &[
        ParamDoc { name: "radius", default: "0.1", unit: "m", doc: "sphere radius" },
        ParamDoc { name: "drop", default: "0.01", unit: "m", doc: "initial clearance above the slab" },
        ParamDoc { name: "vx", default: "2.0", unit: "m/s", doc: "initial velocity along +x" },
        ParamDoc { name: "vz", default: "-1.0", unit: "m/s", doc: "initial velocity along z (negative: down)" },
        ParamDoc { name: "edge", default: "0.4033", unit: "m", doc: "x of the slab's far edge (release off every step boundary; module doc)" },
        ParamDoc { name: "horizon", default: "0.4", unit: "s", doc: "simulated duration" },
        ParamDoc { name: "friction", default: "0.0", unit: "-", doc: "sliding friction of both geoms" },
        MATERIAL_DOCS[0],
        MATERIAL_DOCS[1],
        MATERIAL_DOCS[2],
    ],
    build: |v| {
        let name = "sphere_bounce";
        let p: SphereBounceParams = parse_params(name, v)?;
        for (what, x) in [("radius", p.radius), ("horizon", p.horizon), ("vx", p.vx)] {
            positive(name, what, x)?;
        }
        if !(p.edge.is_finite() && p.edge > SLAB_START_X) {
            return Err(SceneError::BadParams {
                name: name.into(),
                message: format!("edge = {} must be finite and > {SLAB_START_X}", p.edge),
            });
        }
        if !(p.drop.is_finite() && p.drop >= 0.0 && p.vz.is_finite()) {
            return Err(SceneError::BadParams {
                name: name.into(),
                message: format!("drop = {} must be >= 0 and vz = {} finite", p.drop, p.vz),
            });
        }
        let material = Material { friction: p.friction, ke: p.ke, kd: p.kd, kf: p.kf };
        check_material(name, &material)?;
        let mut parts = ModelParts { name: name.into(), ..ModelParts::default() };
        let half_x = 0.5 * (p.edge - SLAB_START_X);
        let mut slab = Geom::new("slab", 0, GeomShape::Box { half: Vec3::new(half_x, 0.5, SLAB_HALF_THICKNESS) });
        slab.pos = Vec3::new(SLAB_START_X + half_x, 0.0, -SLAB_HALF_THICKNESS);
        slab.material = material.contact();
        parts.geoms.push(slab);
        let inertia = 0.4 * p.radius * p.radius;
        free_body(&mut parts, "sphere", GeomShape::Sphere { radius: p.radius }, 1.0, inertia, &material);
        let m = model(name, parts)?;
        let initial = free_state(
            &m,
            Vec3::new(0.0, 0.0, p.radius + p.drop),
            Quat::identity(),
            Vec3::new(p.vx, 0.0, p.vz),
            Vec3::zeros(),
        );
        Ok(Scene {
            model: m,
            initial,
            horizon: p.horizon,
            controls: None,
            energy_allowance: 0.1,
            speed_bound: 50.0,
            analytic: vec![
                AnalyticValue { name: "activation_time_s", value: p.activation_time(), formula: "(vz + sqrt(vz^2 + 2 g drop)) / g" },
                AnalyticValue { name: "release_time_s", value: p.release_time(), formula: "edge / vx (frictionless)" },
            ],
            task: None,
            inputs: Vec::new(),
        })
    },
};
