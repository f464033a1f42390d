//! Closed-form scenes: small models whose answers are known analytically, with the defaults of
//! `scenarios/tests/reference/README.md` (and the MJCF in `scenarios/tests/reference/scenes/`)
//! so that the same scenes compare with MuJoCo's trajectories.
//!
//! | scene | setup (defaults) | closed form |
//! |---|---|---|
//! | `box_drop` | 0.1 m cube, 1 kg, dropped from z = 0.3 m spinning at (2, 1, 0) rad/s (body frame), μ 0.5 | rest: normal forces sum to m g |
//! | `box_slide` | cube resting on the plane (gap 0), v_x = 2 m/s, μ 0.3 | stop distance v0²/(2 μ g) |
//! | `box_incline` | cube at rest on a plane tilted 20° about y (downhill +x), μ 0.4 | sticks iff tan θ ≤ μ, else a = g (sin θ − μ cos θ) |
//! | `sphere_roll` | sphere r 0.1 m, 1 kg, I = 2/5 m r², on a 15° plane, μ 1 | rolls with a = 5/7 g sin θ |
//! | `sphere_bounce` | sphere r 0.1 m, 1 kg, thrown at (2, 0, −1) m/s onto a slab 1 cm below, μ 0 | lands at 9.55 ms, leaves the edge at 0.20165 s |
//! | `pendulum` | 1 kg point-like bob on a 1 m massless-like rod, hinge about y, from 0.5 rad | small-angle period 2π √(I/(m g l)) |
//! | `cartpole` | cart 1 kg on a ±1 m slider, 0.1 kg 1 m pole, pole at 0.5 rad, cart at 3 m/s; motor on the cart | hits the limit at 0.340 s (MuJoCo) |
//!
//! Penalty materials default to ke = 1e5 N/m (warp.sim's), kd = 100 N s/m and kf = 200 N s/m.
//! Both dampers are lowered from warp.sim's 1e3 because semi-implicit Euler treats them
//! explicitly: a damper c on effective mass m_eff is stable only for `h < 2 m_eff / c` (spec
//! ncp_fb §4.5). A 1 kg cube on four corners has `Σ kf = 4 kf` acting on 1 kg, which at kf = 1e3
//! puts h = 0.5 ms exactly on the limit (measured: the resting cube jitters and yaws); kf = 200
//! keeps `h Σ kf / m` = 0.4 at 0.5 ms. Each scene exposes `ke`, `kd`, `kf` as parameters.

use contactlab_solvers::formulation::ParamDoc;
use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::model::{
    Body, ContactMaterial, Geom, Joint, JointKind, Model, ModelParts, Quat, Vec3,
};
use contactlab_solvers::State;
use nalgebra::{DVector, UnitQuaternion};

use crate::{SceneEntry, SceneError};

/// Standard gravity used by every closed-form scene (m/s²), as in the MuJoCo references.
pub const G: f64 = 9.81;
/// The cube's principal inertia as written in the reference MJCF (kg m²) (1/600, rounded).
pub const CUBE_INERTIA: f64 = 0.001666666667;

/// Contact material parameters shared by the closed-form scenes.
#[derive(Debug, Clone, Copy)]
struct Material {
    friction: f64,
    ke: f64,
    kd: f64,
    kf: f64,
}

impl Material {
    fn contact(&self) -> ContactMaterial {
        ContactMaterial {
            friction: [self.friction, 0.005, 1e-4],
            ke: self.ke,
            kd: self.kd,
            kf: self.kf,
            ..ContactMaterial::default()
        }
    }
}

const MATERIAL_DOCS: [ParamDoc; 3] = [
    ParamDoc {
        name: "ke",
        default: "100000.0",
        unit: "N/m",
        doc: "penalty contact stiffness of both geoms",
    },
    ParamDoc {
        name: "kd",
        default: "100.0",
        unit: "N s/m",
        doc: "penalty contact damping of both geoms",
    },
    ParamDoc {
        name: "kf",
        default: "200.0",
        unit: "N s/m",
        doc: "penalty viscous friction of both geoms",
    },
];

fn model(name: &str, parts: ModelParts) -> Result<Model, SceneError> {
    Model::new(parts).map_err(|source| SceneError::Model {
        name: name.to_string(),
        source,
    })
}

fn bad(name: &str, message: String) -> SceneError {
    SceneError::BadParams {
        name: name.to_string(),
        message,
    }
}

/// The ground: a plane through the origin tilted by `angle` (rad) about y (downhill is +x).
fn floor(angle: f64, material: &Material) -> Geom {
    let mut g = Geom::new("floor", 0, GeomShape::Plane);
    g.quat = UnitQuaternion::from_axis_angle(&Vec3::y_axis(), angle);
    g.material = material.contact();
    g
}

/// A free body named `name` with a geom `geom_name` of `shape`, mass and principal inertia.
fn free_body(
    parts: &mut ModelParts,
    name: &str,
    shape: GeomShape,
    mass: f64,
    inertia: f64,
    material: &Material,
) {
    let body = parts.bodies.len() + 1;
    parts.bodies.push(Body::new(
        name,
        0,
        Vec3::zeros(),
        mass,
        Vec3::repeat(inertia),
    ));
    parts
        .joints
        .push(Joint::new(format!("{name}_free"), JointKind::Free, body));
    let mut g = Geom::new(format!("{name}_geom"), body, shape);
    g.material = material.contact();
    parts.geoms.push(g);
}

/// Initial state of a single free body: position, orientation, linear (world) and angular
/// (body frame) velocity.
fn free_state(model: &Model, pos: Vec3, quat: Quat, lin: Vec3, ang: Vec3) -> State {
    let q = DVector::from_vec(vec![pos.x, pos.y, pos.z, quat.w, quat.i, quat.j, quat.k]);
    let v = DVector::from_vec(vec![lin.x, lin.y, lin.z, ang.x, ang.y, ang.z]);
    debug_assert_eq!((model.nq, model.nv), (7, 6));
    State { q, v, t: 0.0 }
}

fn positive(name: &str, what: &str, v: f64) -> Result<(), SceneError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(bad(name, format!("{what} = {v} must be finite and > 0")))
    }
}

fn check_material(name: &str, m: &Material) -> Result<(), SceneError> {
    if !(m.friction.is_finite() && m.friction >= 0.0) {
        return Err(bad(
            name,
            format!("friction = {} must be finite and >= 0", m.friction),
        ));
    }
    positive(name, "ke", m.ke)?;
    for (what, v) in [("kd", m.kd), ("kf", m.kf)] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(bad(name, format!("{what} = {v} must be finite and >= 0")));
        }
    }
    Ok(())
}

mod cube_scenes;
mod joint_scenes;
mod sphere_bounce;

pub use cube_scenes::{BoxDropParams, BoxInclineParams, BoxSlideParams, SphereRollParams};
pub use joint_scenes::{CartpoleParams, PendulumParams};
pub use sphere_bounce::SphereBounceParams;

/// Registry entries of the closed-form scenes.
pub const ENTRIES: &[SceneEntry] = &[
    cube_scenes::BOX_DROP,
    cube_scenes::BOX_SLIDE,
    cube_scenes::BOX_INCLINE,
    cube_scenes::SPHERE_ROLL,
    sphere_bounce::SPHERE_BOUNCE,
    joint_scenes::PENDULUM,
    joint_scenes::CARTPOLE,
];
