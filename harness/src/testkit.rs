//! A fake formulation and a fake scene with closed forms, so the harness can be tested end to
//! end without the real physics: a point mass on a vertical slide joint falling onto a plane.
//!
//! Scene `falling_point`: body of mass 1 kg on a slide joint along z (qpos = height of the
//! centre, m), a sphere of radius `radius` on it, a ground plane z = 0. Gravity g = 9.81 m/s².
//!
//! Formulation `falling_point`: semi-implicit (symplectic) Euler with an explicit spring contact
//! `f = stiffness · max(0, −gap)` on the sphere,
//!
//! ```text
//! v ← v + h (−g + f/m),   z ← z + h v,    gap = z − radius
//! ```
//!
//! Closed forms in free flight from rest at z0 after n steps (t = n h):
//! `z_n = z0 − g h² n (n + 1) / 2 = z0 − g (t² + t h) / 2`, and the energy
//! `E = ½ m v² + m g z` falls by `½ m g² h²` per step: drift `−½ m g² h t`. So the error against
//! the same formulation at timestep `h_ref` is `g t (h − h_ref) / 2`.
//! The contact spring is stable for `h < 2 / sqrt(stiffness / m)`; above it energy grows and the
//! harness reports divergence.
//!
//! Not physics to measure: only the harness's own tests use these (and the CLI when
//! `CONTACTLAB_TESTKIT=1`).

use contactlab_scenarios::{AnalyticValue, Scene, SceneEntry, SceneError};
use contactlab_solvers::formulation::{
    parse_params, ContactRecord, Formulation, FormulationEntry, FormulationError, ParamDoc,
    StepReport,
};
use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::model::{Body, Geom, Joint, JointKind, Vec3};
use contactlab_solvers::{Model, ModelParts, State};
use nalgebra::{DVector, Matrix3};
use serde::Deserialize;

/// Gravity used by the fake scene (m/s²).
pub const G: f64 = 9.81;

/// Parameters of the fake formulation.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FallingPointParams {
    /// Contact spring stiffness (N/m).
    pub stiffness: f64,
    /// Panic inside `step` once t reaches this time (s); for testing cell isolation.
    pub panic_at: Option<f64>,
    /// Solver iterations to report per step (a constant, for the iteration metrics).
    pub iterations: usize,
}

impl Default for FallingPointParams {
    fn default() -> Self {
        Self {
            stiffness: 1e4,
            panic_at: None,
            iterations: 1,
        }
    }
}

const FORMULATION_PARAMS: &[ParamDoc] = &[
    ParamDoc {
        name: "stiffness",
        default: "1.0e4",
        unit: "N/m",
        doc: "contact spring stiffness",
    },
    ParamDoc {
        name: "panic_at",
        default: "null",
        unit: "s",
        doc: "panic once t reaches this (tests)",
    },
    ParamDoc {
        name: "iterations",
        default: "1",
        unit: "-",
        doc: "iterations reported per step",
    },
];

/// The fake formulation's registry entry.
pub static FALLING_POINT_FORMULATION: FormulationEntry = FormulationEntry {
    name: "falling_point",
    description: "test fake: symplectic Euler point mass with a spring ground contact",
    params: FORMULATION_PARAMS,
    build: build_formulation,
};

fn build_formulation(v: &serde_json::Value) -> Result<Box<dyn Formulation>, FormulationError> {
    let p: FallingPointParams = parse_params("falling_point", v)?;
    Ok(Box::new(FallingPoint { p }))
}

/// The fake formulation.
pub struct FallingPoint {
    p: FallingPointParams,
}

impl Formulation for FallingPoint {
    fn name(&self) -> &'static str {
        "falling_point"
    }

    fn step(&mut self, model: &Model, state: &mut State, _u: &[f64], h: f64) -> StepReport {
        if let Some(tp) = self.p.panic_at {
            assert!(state.t < tp, "falling_point: asked to panic at t = {tp} s");
        }
        let radius = match model.geoms[1].shape {
            GeomShape::Sphere { radius } => radius,
            _ => 0.0,
        };
        let m = model.bodies[1].mass;
        let gap = state.q[0] - radius;
        let f = self.p.stiffness * (-gap).max(0.0);
        state.v[0] += h * (-G + f / m);
        state.q[0] += h * state.v[0];
        state.t += h;
        let mut contacts = Vec::new();
        if gap < 0.0 {
            contacts.push(ContactRecord {
                geoms: [0, 1],
                point: Vec3::new(0.0, 0.0, gap / 2.0),
                frame: Matrix3::identity(),
                gap,
                mu: 0.5,
                impulse: Vec3::new(f * h, 0.0, 0.0),
                velocity: Vec3::new(state.v[0], 0.0, 0.0),
            });
        }
        let mut r = StepReport::explicit(contacts);
        r.iterations = self.p.iterations;
        r.check_divergence(state)
    }
}

/// Parameters of the fake scene.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FallingPointSceneParams {
    /// Initial height of the centre (m).
    pub height: f64,
    /// Sphere radius (m).
    pub radius: f64,
    /// Height jitter amplitude (m), drawn from the seed.
    pub jitter: f64,
    /// Seed of the jitter (the harness passes each cell's seed).
    pub seed: u64,
    /// Horizon (s).
    pub horizon: f64,
}

impl Default for FallingPointSceneParams {
    fn default() -> Self {
        Self {
            height: 1.0,
            radius: 0.05,
            jitter: 0.0,
            seed: 0,
            horizon: 0.2,
        }
    }
}

const SCENE_PARAMS: &[ParamDoc] = &[
    ParamDoc {
        name: "height",
        default: "1.0",
        unit: "m",
        doc: "initial height of the centre",
    },
    ParamDoc {
        name: "radius",
        default: "0.05",
        unit: "m",
        doc: "sphere radius",
    },
    ParamDoc {
        name: "jitter",
        default: "0.0",
        unit: "m",
        doc: "seeded height jitter amplitude",
    },
    ParamDoc {
        name: "seed",
        default: "0",
        unit: "-",
        doc: "seed of the jitter",
    },
    ParamDoc {
        name: "horizon",
        default: "0.2",
        unit: "s",
        doc: "default horizon",
    },
];

/// The fake scene's registry entry.
pub static FALLING_POINT_SCENE: SceneEntry = SceneEntry {
    name: "falling_point",
    description: "test fake: a 1 kg ball on a vertical slide above a plane",
    params: SCENE_PARAMS,
    build: build_scene,
};

fn build_scene(v: &serde_json::Value) -> Result<Scene, SceneError> {
    let p: FallingPointSceneParams = contactlab_scenarios::parse_params("falling_point", v)?;
    let mut joint = Joint::new("z", JointKind::Slide, 1);
    joint.axis = Vec3::z();
    let parts = ModelParts {
        name: "falling_point".into(),
        bodies: vec![Body::new("ball", 0, Vec3::zeros(), 1.0, Vec3::repeat(1e-3))],
        joints: vec![joint],
        geoms: vec![
            Geom::new("ground", 0, GeomShape::Plane),
            Geom::new("ball", 1, GeomShape::Sphere { radius: p.radius }),
        ],
        ..Default::default()
    };
    let model = Model::new(parts).map_err(|source| SceneError::Model {
        name: "falling_point".into(),
        source,
    })?;
    // A tiny deterministic generator: enough to show the seed reaches the scene.
    let u = (p
        .seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407)
        >> 11) as f64
        / (1u64 << 53) as f64;
    let z0 = p.height + p.jitter * (2.0 * u - 1.0);
    let initial = State {
        q: DVector::from_vec(vec![z0]),
        v: DVector::zeros(1),
        t: 0.0,
    };
    Ok(Scene {
        task: None,
        inputs: Vec::new(),
        model,
        initial,
        horizon: p.horizon,
        controls: None,
        energy_allowance: 0.5,
        speed_bound: 100.0,
        analytic: vec![AnalyticValue {
            name: "impact_time_s",
            value: (2.0 * (z0 - p.radius).max(0.0) / G).sqrt(),
            formula: "sqrt(2 (z0 - r) / g)",
        }],
    })
}
