//! Benchmark scenes: robotics tasks with actuators, a horizon and (where they have one) a loss,
//! on which formulations are compared for task success and gradient studies.
//!
//! | scene | setup (defaults) | measures |
//! |---|---|---|
//! | `box_traversal` | 106 kg three-wheeled robot (velocity-servo wheels, r 0.35 m) drives over a 0.74 x 1.15 x 0.12 m box, μ 0.8, target (3, 0) m, 6 s | [`box_traversal_loss`], [`box_traversal_success`] |
//! | `mesh_terrain` | the same robot on procedural terrain (seeded sine-product layers, 80 x 80 cells over 24 x 24 m, 12,800 triangles, \|h\| ≤ 0.3 m) or an OBJ/STL mesh; parry TriMesh or HeightField collider; target (5, 0) m, 10 s | [`mesh_terrain_loss`], [`mesh_terrain_success`] |
//! | `grasp` | parallel-jaw gripper (position servos) closes on a 0.3 kg box on a table with 10 N per finger, lifts it 0.2 m at 0.2 m/s, holds to 2.5 s | [`GraspMonitor`]: slip, held, peak penetration, finger forces |
//! | `cube_toss` | the real 0.1048 m, 0.37 kg cube of `data/cube_toss` tossed onto a table from a recording's first state, μ 0.18 | error against the recording (harness `recorded` reference) |
//! | `cartpole_task`, `cartpole_task_ostrich` | cart-pole with a ±30 N cart motor; balance from 0.2 rad or swing up; Ostrich sizes (0.3 × 0.5 × 0.2 m cart, 2 m pole, h 0.01 s) | [`cartpole_loss`], fall rate λ (closed form) |
//!
//! The benchmark scenes' controls are plain `fn(t, &State)` wrapped in [`crate::ControlLaw`]
//! and carry no parameters; each scene documents how its parameters reach its control law.

use contactlab_solvers::model::{ContactMaterial, Model, ModelParts};

use crate::{SceneEntry, SceneError};

pub mod box_traversal;
pub mod cartpole_task;
pub mod cube_toss;
pub mod grasp;
pub mod mesh_terrain;
pub mod wheeled_robot;

pub use box_traversal::{
    box_traversal_loss, box_traversal_success, BoxTraversalParams, Pose2, Spline,
};
pub use cartpole_task::{cartpole_loss, CartpoleTask, CartpoleTaskParams, PerStep};
pub use cube_toss::CubeTossParams;
pub use grasp::{GraspMonitor, GraspParams, GraspSummary};
pub use mesh_terrain::{mesh_terrain_loss, mesh_terrain_success, Collider, MeshTerrainParams};

/// Registry entries of the benchmark scenes.
pub const ENTRIES: &[SceneEntry] = &[
    box_traversal::BOX_TRAVERSAL,
    mesh_terrain::MESH_TERRAIN,
    grasp::GRASP,
    cartpole_task::CARTPOLE_TASK,
    cartpole_task::CARTPOLE_TASK_OSTRICH,
    cube_toss::CUBE_TOSS,
];

/// Penalty and MuJoCo contact material with sliding friction `friction` (-) and penalty
/// stiffness `ke` (N/m), damping `kd` (N s/m), viscous friction `kf` (N s/m).
fn material(friction: f64, ke: f64, kd: f64, kf: f64) -> ContactMaterial {
    ContactMaterial {
        friction: [friction, 0.005, 1e-4],
        ke,
        kd,
        kf,
        ..ContactMaterial::default()
    }
}

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

/// Err unless every value is finite and > 0.
fn positive(name: &str, values: &[(&str, f64)]) -> Result<(), SceneError> {
    for &(what, v) in values {
        if !(v.is_finite() && v > 0.0) {
            return Err(bad(name, format!("{what} = {v} must be finite and > 0")));
        }
    }
    Ok(())
}

/// Err unless every value is finite and >= 0.
fn non_negative(name: &str, values: &[(&str, f64)]) -> Result<(), SceneError> {
    for &(what, v) in values {
        if !(v.is_finite() && v >= 0.0) {
            return Err(bad(name, format!("{what} = {v} must be finite and >= 0")));
        }
    }
    Ok(())
}

/// Principal inertia (kg m²) of a solid box of mass `m` (kg) and half-extents `h` (m).
fn box_inertia(m: f64, h: [f64; 3]) -> [f64; 3] {
    let [a, b, c] = h.map(|x| 4.0 * x * x);
    [m * (b + c) / 12.0, m * (a + c) / 12.0, m * (a + b) / 12.0]
}
