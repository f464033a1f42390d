//! `cartpole_task` and `cartpole_task_ostrich`: the cart-pole with a force motor on the cart
//! and a task, balance from an offset or swing-up, scored by [`cartpole_loss`] at the horizon.
//!
//! **Model.** A cart (box, mass `cart_mass`) on an x slider limited to ±`rail` m; a pole
//! (capsule of radius 0.02 m, length `pole_length`, mass `pole_mass`, uniform rod inertia
//! m L²/12) on a hinge about +y at the cart's origin. A motor applies force u (N) along the
//! slider, clamped to ±`max_force`. No contacts (as the reference `cartpole`).
//!
//! **Coordinates.** `q = [cart x (m), pole angle θ (rad)]`, `v = [ẋ, θ̇]`; θ = 0 is upright
//! and positive θ leans the pole towards +x; θ = π hangs down.
//!
//! **Tasks.** `balance`: start at θ = `angle0` (default 0.2 rad) and keep the pole up;
//! `swing_up`: start hanging (θ = π unless `angle0` is given) and bring it up. The loss at the
//! horizon is θ² (wrapped to (−π, π]) plus `position_weight` × x² (rad² and m²).
//!
//! **Controls.** The scene's own law is zero force (the harness's passive baseline). For
//! optimization, controls are per-step forces ([`PerStep`]) or a piecewise-linear spline
//! ([`crate::benchmark::Spline`], one channel). [`balance_feedback`] is a fixed linear
//! feedback that balances the default cart-pole from the default offset.
//!
//! **Presets.** `cartpole_task` keeps the reference `cartpole`'s bodies (cart 1 kg, box
//! half-extents 0.2 × 0.1 × 0.05 m; pole 0.1 kg, 1 m) and MuJoCo's h = 2 ms.
//! `cartpole_task_ostrich` matches the Ostrich gradient tests: cart half-extents
//! 0.3 × 0.5 × 0.2 m, 2 m pole, timestep 0.01 s (in the model's options); the source gives no
//! masses here, so they stay 1 kg and 0.1 kg (parameters).
//!
//! **Closed form.** With zero force and small θ, the pole falls as θ0 cosh(λ t) with
//! λ² = (M + m) m g l / ((M + m)(I + m l²) − m² l²) (l = L/2, I = m L²/12); the scene reports
//! λ as `fall_rate_per_s`.

use contactlab_solvers::formulation::ParamDoc;
use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::model::{
    Actuator, ActuatorKind, Body, Geom, Joint, JointKind, ModelParts, Vec3,
};
use contactlab_solvers::State;
use nalgebra::DVector;
use serde::{Deserialize, Serialize};

use super::{bad, box_inertia, model, positive};
use crate::{AnalyticValue, Scene, SceneEntry, SceneError};

/// The task of a cart-pole scene.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CartpoleTask {
    /// Keep the pole upright from an offset.
    Balance,
    /// Swing the pole up from hanging.
    SwingUp,
}

/// Parameters of `cartpole_task` (and, with other defaults, `cartpole_task_ostrich`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CartpoleTaskParams {
    /// The task.
    pub task: CartpoleTask,
    /// Initial pole angle from upright (rad); `None`: 0.2 for balance, π for swing-up.
    pub angle0: Option<f64>,
    /// Simulated duration (s).
    pub horizon: f64,
    /// Model timestep (s), stored in the model's options.
    pub timestep: f64,
    /// Cart mass (kg).
    pub cart_mass: f64,
    /// Cart box half-extents (m).
    pub cart_half: [f64; 3],
    /// Pole mass (kg).
    pub pole_mass: f64,
    /// Pole length (m), hinge to tip.
    pub pole_length: f64,
    /// Slider range is [−rail, rail] (m).
    pub rail: f64,
    /// Motor force clamp (N).
    pub max_force: f64,
    /// Weight of the cart position term of the loss (rad²/m²).
    pub position_weight: f64,
}

impl CartpoleTaskParams {
    /// `cartpole_task`'s defaults.
    pub fn standard() -> Self {
        Self {
            task: CartpoleTask::Balance,
            angle0: None,
            horizon: 3.0,
            timestep: 0.002,
            cart_mass: 1.0,
            cart_half: [0.2, 0.1, 0.05],
            pole_mass: 0.1,
            pole_length: 1.0,
            rail: 3.0,
            max_force: 30.0,
            position_weight: 0.1,
        }
    }

    /// `cartpole_task_ostrich`'s defaults (Ostrich gradient tests).
    pub fn ostrich() -> Self {
        Self {
            cart_half: [0.3, 0.5, 0.2],
            pole_length: 2.0,
            timestep: 0.01,
            ..Self::standard()
        }
    }

    /// The linearized fall rate λ (1/s) of the unforced pole near upright (module doc).
    pub fn fall_rate(&self) -> f64 {
        let (big_m, m, l) = (self.cart_mass, self.pole_mass, self.pole_length / 2.0);
        let i = m * self.pole_length * self.pole_length / 12.0;
        ((big_m + m) * m * G * l / ((big_m + m) * (i + m * l * l) - m * m * l * l)).sqrt()
    }
}

impl Default for CartpoleTaskParams {
    fn default() -> Self {
        Self::standard()
    }
}

const G: f64 = 9.81;

/// Per-step controls: `forces[k]` (N) during `[k h, (k + 1) h)`, the last value after.
#[derive(Debug, Clone, PartialEq)]
pub struct PerStep {
    /// Step length (s).
    pub h: f64,
    /// One force per step (N).
    pub forces: Vec<f64>,
}

impl PerStep {
    /// The control vector (one motor) at time `t` (s); zero if there are no forces.
    pub fn at(&self, t: f64) -> Vec<f64> {
        let k = ((t / self.h + 1e-9).floor().max(0.0) as usize)
            .min(self.forces.len().saturating_sub(1));
        vec![self.forces.get(k).copied().unwrap_or(0.0)]
    }
}

/// Task loss (rad² + weighted m²): θ² with θ wrapped to (−π, π], plus `position_weight` x².
pub fn cartpole_loss(state: &State, position_weight: f64) -> f64 {
    let th = state.q[1].sin().atan2(state.q[1].cos());
    th * th + position_weight * state.q[0] * state.q[0]
}

/// A linear balance feedback for `cartpole_task`'s default model (N):
/// u = 40 θ + 8 θ̇ + 3 x + 4 ẋ, pushing the cart under the leaning pole and back to x = 0.
pub fn balance_feedback(_t: f64, s: &State) -> Vec<f64> {
    let th = s.q[1].sin().atan2(s.q[1].cos());
    vec![40.0 * th + 8.0 * s.v[1] + 3.0 * s.q[0] + 4.0 * s.v[0]]
}

/// Parse `v` over `defaults` (keys in `v` override; unknown keys are errors).
fn parse_over(
    name: &str,
    v: &serde_json::Value,
    defaults: CartpoleTaskParams,
) -> Result<CartpoleTaskParams, SceneError> {
    let mut base = serde_json::to_value(defaults).expect("parameters serialize");
    match v {
        serde_json::Value::Null => {}
        serde_json::Value::Object(m) => {
            let obj = base.as_object_mut().expect("an object");
            for (k, x) in m {
                if !obj.contains_key(k) {
                    return Err(bad(
                        name,
                        format!(
                            "unknown field `{k}`, expected one of {}",
                            obj.keys().cloned().collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
                obj.insert(k.clone(), x.clone());
            }
        }
        other => {
            return Err(bad(
                name,
                format!("parameters must be an object, got {other}"),
            ))
        }
    }
    serde_json::from_value(base).map_err(|e| bad(name, e.to_string()))
}

fn build(name: &str, p: CartpoleTaskParams) -> Result<Scene, SceneError> {
    let [hx, hy, hz] = p.cart_half;
    positive(
        name,
        &[
            ("horizon", p.horizon),
            ("timestep", p.timestep),
            ("cart_mass", p.cart_mass),
            ("cart_half[0]", hx),
            ("cart_half[1]", hy),
            ("cart_half[2]", hz),
            ("pole_mass", p.pole_mass),
            ("pole_length", p.pole_length),
            ("rail", p.rail),
            ("max_force", p.max_force),
        ],
    )?;
    let mut parts = ModelParts {
        name: name.into(),
        ..ModelParts::default()
    };
    parts.options.timestep = p.timestep;
    parts.bodies.push(Body::new(
        "cart",
        0,
        Vec3::new(0.0, 0.0, 1.0),
        p.cart_mass,
        Vec3::from(box_inertia(p.cart_mass, p.cart_half)),
    ));
    let (m, len) = (p.pole_mass, p.pole_length);
    let rod = m * len * len / 12.0;
    let mut pole = Body::new(
        "pole",
        1,
        Vec3::zeros(),
        m,
        Vec3::new(rod, rod, 0.5 * m * 0.02 * 0.02),
    );
    pole.com = Vec3::new(0.0, 0.0, len / 2.0);
    parts.bodies.push(pole);
    let mut slider = Joint::new("slider", JointKind::Slide, 1);
    slider.axis = Vec3::x();
    slider.range = Some((-p.rail, p.rail));
    let mut hinge = Joint::new("hinge", JointKind::Hinge, 2);
    hinge.axis = Vec3::y();
    parts.joints.extend([slider, hinge]);
    let mut cart_geom = Geom::new(
        "cart_geom",
        1,
        GeomShape::Box {
            half: Vec3::new(hx, hy, hz),
        },
    );
    let mut pole_geom = Geom::new(
        "pole_geom",
        2,
        GeomShape::Capsule {
            radius: 0.02,
            half_length: len / 2.0,
        },
    );
    pole_geom.pos = Vec3::new(0.0, 0.0, len / 2.0);
    for g in [&mut cart_geom, &mut pole_geom] {
        g.contype = 0;
        g.conaffinity = 0;
    }
    parts.geoms.extend([cart_geom, pole_geom]);
    parts.actuators.push(Actuator {
        name: "cart_motor".into(),
        joint: 0,
        kind: ActuatorKind::Motor,
        gear: 1.0,
        ctrl_range: Some((-p.max_force, p.max_force)),
        force_range: None,
    });
    let model = model(name, parts)?;
    let angle0 = p.angle0.unwrap_or(match p.task {
        CartpoleTask::Balance => 0.2,
        CartpoleTask::SwingUp => std::f64::consts::PI,
    });
    if !angle0.is_finite() {
        return Err(bad(name, format!("angle0 = {angle0} must be finite")));
    }
    let initial = State {
        q: DVector::from_vec(vec![0.0, angle0]),
        v: DVector::zeros(2),
        t: 0.0,
    };
    // The motor can add at most max_force × (2 rail) of work per pass; allow the pole's full
    // potential-energy swing plus the cart's kinetic energy at 10 m/s.
    let allowance = 2.0 * m * G * len + 0.5 * (p.cart_mass + m) * 100.0;
    Ok(Scene {
        task: None,
        inputs: Vec::new(),
        model,
        initial,
        horizon: p.horizon,
        controls: None,
        energy_allowance: allowance,
        speed_bound: 50.0,
        analytic: vec![AnalyticValue {
            name: "fall_rate_per_s",
            value: p.fall_rate(),
            formula: "sqrt((M + m) m g l / ((M + m)(I + m l^2) - m^2 l^2))",
        }],
    })
}

const PARAMS: &[ParamDoc] = &[
    ParamDoc {
        name: "task",
        default: "balance",
        unit: "-",
        doc: "balance | swing_up",
    },
    ParamDoc {
        name: "angle0",
        default: "null",
        unit: "rad",
        doc: "initial pole angle from upright (null: 0.2 balance, pi swing-up)",
    },
    ParamDoc {
        name: "horizon",
        default: "3.0",
        unit: "s",
        doc: "simulated duration",
    },
    ParamDoc {
        name: "timestep",
        default: "0.002 (ostrich 0.01)",
        unit: "s",
        doc: "model timestep",
    },
    ParamDoc {
        name: "cart_mass",
        default: "1.0",
        unit: "kg",
        doc: "cart mass",
    },
    ParamDoc {
        name: "cart_half",
        default: "[0.2, 0.1, 0.05] (ostrich [0.3, 0.5, 0.2])",
        unit: "m",
        doc: "cart box half-extents",
    },
    ParamDoc {
        name: "pole_mass",
        default: "0.1",
        unit: "kg",
        doc: "pole mass",
    },
    ParamDoc {
        name: "pole_length",
        default: "1.0 (ostrich 2.0)",
        unit: "m",
        doc: "pole length",
    },
    ParamDoc {
        name: "rail",
        default: "3.0",
        unit: "m",
        doc: "slider range [-rail, rail]",
    },
    ParamDoc {
        name: "max_force",
        default: "30.0",
        unit: "N",
        doc: "motor force clamp",
    },
    ParamDoc {
        name: "position_weight",
        default: "0.1",
        unit: "rad^2/m^2",
        doc: "weight of x^2 in the loss",
    },
];

/// `cartpole_task` (module documentation).
pub const CARTPOLE_TASK: SceneEntry = SceneEntry {
    name: "cartpole_task",
    description: "cart-pole with a cart motor (+-30 N): balance from 0.2 rad or swing up; loss theta^2 + 0.1 x^2 at 3 s",
    params: PARAMS,
    build: |v| build("cartpole_task", parse_over("cartpole_task", v, CartpoleTaskParams::standard())?),
};

/// `cartpole_task_ostrich` (module documentation): the Ostrich gradient-test cart-pole.
pub const CARTPOLE_TASK_OSTRICH: SceneEntry = SceneEntry {
    name: "cartpole_task_ostrich",
    description: "cartpole_task with the Ostrich gradient-test sizes: cart half-extents 0.3 x 0.5 x 0.2 m, 2 m pole, h = 0.01 s",
    params: PARAMS,
    build: |v| build("cartpole_task_ostrich", parse_over("cartpole_task_ostrich", v, CartpoleTaskParams::ostrich())?),
};
