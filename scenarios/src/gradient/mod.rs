//! Gradients of rollouts: the problem a gradient is taken of ([`Problem`]), the registry of
//! ways to compute it ([`methods`]), the f64 finite-difference reference and the scores of a
//! gradient against it ([`reference`]), and the named cases the tests and the experiments share
//! ([`cases`]).
//!
//! # The problem
//!
//! A [`Problem`] is a model, an initial state `x₀ = (q₀, v₀)`, an open-loop control schedule
//! `u_k` (steps × actuators, in the actuators' units), a horizon of `N` steps of length `h` (s),
//! a scalar loss of the final state `L(x_N)` ([`Loss`]) and the inputs `θ` the gradient is taken
//! with respect to ([`Input`]: components of q₀ and v₀, single controls `u_k[a]`, and model
//! parameters). Its rollout is `x_{k+1} = step(x_k, u_k; θ)` with any
//! [`Formulation`]'s step, each rollout on a freshly built formulation (warm starts never carry
//! from one rollout to the next). The gradient is `dL/dθ` (one entry per input, in the loss's
//! unit per the input's unit), and every method returns it in the order of
//! [`Problem::inputs`].
//!
//! Sign and coordinate conventions are the model's: `qpos` raw (a free joint's quaternion
//! components are perturbed as coordinates, without renormalization), `qvel` with the linear
//! velocity of a free joint in the world frame and its angular velocity in the body frame
//! (DESIGN.md, "Model and State").
//!
//! # Methods and the reference
//!
//! [`methods::METHODS`] lists the methods: `fd_central` and `fd_forward` run on any formulation
//! (they need only its step); `adjoint` and `adjoint_lagged` are `ncp_fb`'s backward sweep
//! ([`contactlab_solvers::ncp_fb::adjoint`]); `autodiff` is reverse mode through the batched
//! penalty (`autodiff`, with the `burn` feature). A method a formulation or problem lacks is
//! reported by [`methods::availability_for`] with the reason; the harness writes a `skipped`
//! row for it.
//!
//! The reference ([`reference::reference`], DESIGN.md "Gradients are a capability ... central
//! finite differences in f64 are always available from the harness as the reference"):
//! central differences over a sweep of relative steps (1e-2 … 1e-8 by default), per input the
//! step whose estimate agrees best with its neighbour's, that disagreement recorded as the
//! reference's uncertainty; where no neighbouring pair agrees within the tolerance the
//! reference is undefined and nothing is scored against it. Finite-difference steps are
//! relative: `δ = s · max(|θ|, 1)` in the input's unit.

#[cfg(feature = "burn")]
pub mod autodiff;
pub mod cases;
pub mod methods;
pub mod reference;

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use contactlab_solvers::model::ActuatorKind;
use contactlab_solvers::{Formulation, Model, State, StepReport};
use nalgebra::DVector;

use crate::Scene;

/// Builds a fresh formulation for one rollout (the cell's formulation with its parameters).
pub type Factory<'a> = &'a (dyn Fn() -> Result<Box<dyn Formulation>, String> + Sync);

/// The formulation a gradient is computed for: its registry name, its parameters (a JSON
/// object, as the registry takes them; the adjoint methods parse them into `NcpFbParams`) and
/// a factory of fresh instances.
#[derive(Clone, Copy)]
pub struct FormulationRef<'a> {
    /// Registry name (`ncp_fb`, `soft_convex`, ...).
    pub name: &'a str,
    /// Parameters as a JSON object (`null`: defaults).
    pub params: &'a serde_json::Value,
    /// A fresh instance per rollout.
    pub build: Factory<'a>,
}

/// A model parameter an input may name. Each applies to the whole model, so that every
/// contact of the scene sees the same value.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelParam {
    /// Sliding friction `friction[0]` of every geom and explicit pair (-): every contact's
    /// mixed μ equals it (MuJoCo mixes with max).
    Friction,
    /// `solref[0]` of every geom and pair: the time constant (s) of `soft_convex` and
    /// `signorini` contacts (MuJoCo "Solver parameters"); read by no other formulation.
    SolrefTimeconst,
    /// `solref[1]` of every geom and pair: the damping ratio (-).
    SolrefDampratio,
    /// Penalty contact stiffness `ke` of every geom (N/m); read by `penalty` only.
    Stiffness,
    /// Penalty contact damping `kd` of every geom (N s/m); read by `penalty` only.
    Damping,
    /// Position gain k_p of a position servo, by actuator index (N/m or N m/rad).
    ServoKp(usize),
    /// Velocity gain k_v of a position or velocity servo, by actuator index (N s/m or N m s/rad).
    ServoKv(usize),
    /// Mass of a body, by body index (kg); its inertia is left unchanged.
    Mass(usize),
}

impl ModelParam {
    /// The parameter's value in `model` (for the material parameters, the first geom's).
    pub fn get(&self, model: &Model) -> f64 {
        let first = model.geoms.first().map(|g| &g.material);
        match *self {
            ModelParam::Friction => first.map_or(0.0, |m| m.friction[0]),
            ModelParam::SolrefTimeconst => first.map_or(0.0, |m| m.solref[0]),
            ModelParam::SolrefDampratio => first.map_or(0.0, |m| m.solref[1]),
            ModelParam::Stiffness => first.map_or(0.0, |m| m.ke),
            ModelParam::Damping => first.map_or(0.0, |m| m.kd),
            ModelParam::ServoKp(i) => match model.actuators[i].kind {
                ActuatorKind::PositionServo { kp, .. } => kp,
                _ => 0.0,
            },
            ModelParam::ServoKv(i) => match model.actuators[i].kind {
                ActuatorKind::PositionServo { kv, .. } | ActuatorKind::VelocityServo { kv } => kv,
                ActuatorKind::Motor => 0.0,
            },
            ModelParam::Mass(b) => model.bodies[b].mass,
        }
    }

    /// Set the parameter in `model` (every geom and pair for the material parameters).
    pub fn set(&self, model: &mut Model, value: f64) {
        match *self {
            ModelParam::Friction => {
                for g in &mut model.geoms {
                    g.material.friction[0] = value;
                }
                for p in &mut model.pairs {
                    p.friction[0] = value;
                    p.friction[1] = value;
                }
            }
            ModelParam::SolrefTimeconst | ModelParam::SolrefDampratio => {
                let i = usize::from(*self == ModelParam::SolrefDampratio);
                for g in &mut model.geoms {
                    g.material.solref[i] = value;
                }
                for p in &mut model.pairs {
                    p.solref[i] = value;
                }
            }
            ModelParam::Stiffness => model.geoms.iter_mut().for_each(|g| g.material.ke = value),
            ModelParam::Damping => model.geoms.iter_mut().for_each(|g| g.material.kd = value),
            ModelParam::ServoKp(i) => {
                if let ActuatorKind::PositionServo { kp, .. } = &mut model.actuators[i].kind {
                    *kp = value;
                }
            }
            ModelParam::ServoKv(i) => match &mut model.actuators[i].kind {
                ActuatorKind::PositionServo { kv, .. } | ActuatorKind::VelocityServo { kv } => {
                    *kv = value
                }
                ActuatorKind::Motor => {}
            },
            ModelParam::Mass(b) => model.bodies[b].mass = value,
        }
    }
}

/// One input of the gradient.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// Initial position coordinate `q₀[i]` (m, rad, or quaternion component).
    Qpos(usize),
    /// Initial velocity coordinate `v₀[i]` (m/s or rad/s).
    Qvel(usize),
    /// The control of actuator `actuator` during step `step` (0-based).
    Control {
        /// Step index k (0 ≤ k < N).
        step: usize,
        /// Actuator index.
        actuator: usize,
    },
    /// A model parameter.
    Param(ModelParam),
}

/// Where a control input's step lies, as written in an input name (`ctrl[mid][0]`).
#[derive(Debug, Clone, Copy, PartialEq)]
enum StepRef {
    At(usize),
    Mid,
    Last,
}

impl Input {
    /// Parse an input name against `model` for a horizon of `steps` steps:
    /// `qpos[i]`, `qvel[i]`, `ctrl[k][a]` (k an index, `mid` = N/2 or `last` = N − 1; a an
    /// index or an actuator name), `friction`, `solref[0]`, `solref[1]`, `ke`, `kd`,
    /// `kp:<actuator>`, `kv:<actuator>`, `mass:<body>`.
    ///
    /// # Errors
    /// An unknown form, an index out of range, an unknown actuator or body, or a parameter the
    /// model does not have (a servo gain of a motor, a material parameter without geoms), each
    /// naming the valid choices.
    pub fn parse(model: &Model, text: &str, steps: usize) -> Result<Self, String> {
        let index = |s: &str, n: usize, what: &str| -> Result<usize, String> {
            let i: usize = s
                .trim()
                .parse()
                .map_err(|_| format!("'{s}' in '{text}' is not an index"))?;
            if i >= n {
                return Err(format!(
                    "'{text}': {what} index {i} is out of range (the scene has {n})"
                ));
            }
            Ok(i)
        };
        let actuator = |s: &str| -> Result<usize, String> {
            if let Some(i) = model.actuators.iter().position(|a| a.name == s) {
                return Ok(i);
            }
            if model.actuators.is_empty() {
                return Err(format!("'{text}': the scene has no actuators"));
            }
            index(s, model.actuators.len(), "actuator").map_err(|_| {
                let names: Vec<_> = model.actuators.iter().map(|a| a.name.as_str()).collect();
                format!(
                    "'{text}': no actuator '{s}' (actuators: {})",
                    names.join(", ")
                )
            })
        };
        let bracket = |prefix: &str| -> Option<Vec<&str>> {
            let rest = text.strip_prefix(prefix)?;
            let rest = rest.strip_prefix('[')?.strip_suffix(']')?;
            Some(rest.split("][").collect())
        };
        let needs_geoms = |p: ModelParam| {
            if model.geoms.is_empty() {
                Err(format!(
                    "'{text}': the scene has no geoms, so no contact material"
                ))
            } else {
                Ok(Input::Param(p))
            }
        };
        if let Some([i]) = bracket("qpos").as_deref() {
            return Ok(Input::Qpos(index(i, model.nq, "qpos")?));
        }
        if let Some([i]) = bracket("qvel").as_deref() {
            return Ok(Input::Qvel(index(i, model.nv, "qvel")?));
        }
        if let Some([k, a]) = bracket("ctrl").as_deref() {
            let at =
                match *k {
                    "mid" => StepRef::Mid,
                    "last" => StepRef::Last,
                    k => StepRef::At(k.trim().parse().map_err(|_| {
                        format!("'{text}': step '{k}' is not an index, mid or last")
                    })?),
                };
            let step = match at {
                StepRef::At(k) if k >= steps => {
                    return Err(format!(
                        "'{text}': step {k} is beyond the horizon of {steps} steps"
                    ))
                }
                StepRef::At(k) => k,
                StepRef::Mid => steps / 2,
                StepRef::Last => steps.saturating_sub(1),
            };
            return Ok(Input::Control {
                step,
                actuator: actuator(a)?,
            });
        }
        match text {
            "friction" => return needs_geoms(ModelParam::Friction),
            "solref[0]" => return needs_geoms(ModelParam::SolrefTimeconst),
            "solref[1]" => return needs_geoms(ModelParam::SolrefDampratio),
            "ke" => return needs_geoms(ModelParam::Stiffness),
            "kd" => return needs_geoms(ModelParam::Damping),
            _ => {}
        }
        if let Some((kind, name)) = text.split_once(':') {
            match kind {
                "kp" => {
                    let i = actuator(name)?;
                    return match model.actuators[i].kind {
                        ActuatorKind::PositionServo { .. } => {
                            Ok(Input::Param(ModelParam::ServoKp(i)))
                        }
                        _ => Err(format!(
                            "'{text}': actuator '{name}' is not a position servo"
                        )),
                    };
                }
                "kv" => {
                    let i = actuator(name)?;
                    return match model.actuators[i].kind {
                        ActuatorKind::Motor => Err(format!(
                            "'{text}': actuator '{name}' is a motor, not a servo"
                        )),
                        _ => Ok(Input::Param(ModelParam::ServoKv(i))),
                    };
                }
                "mass" => {
                    return match model.bodies.iter().skip(1).position(|b| b.name == name) {
                        Some(i) => Ok(Input::Param(ModelParam::Mass(i + 1))),
                        None => {
                            let names: Vec<_> = model
                                .bodies
                                .iter()
                                .skip(1)
                                .map(|b| b.name.as_str())
                                .collect();
                            Err(format!(
                                "'{text}': no body '{name}' (bodies: {})",
                                names.join(", ")
                            ))
                        }
                    };
                }
                _ => {}
            }
        }
        Err(format!(
            "unknown input '{text}'; use qpos[i], qvel[i], ctrl[k][a], friction, solref[0], solref[1], ke, kd, kp:<actuator>, kv:<actuator> or mass:<body>"
        ))
    }

    /// A short name for reports (`qvel[0]`, `ctrl[3][0]`, `kv:1`, `mass:2`).
    pub fn name(&self) -> String {
        match self {
            Input::Qpos(i) => format!("qpos[{i}]"),
            Input::Qvel(i) => format!("qvel[{i}]"),
            Input::Control { step, actuator } => format!("ctrl[{step}][{actuator}]"),
            Input::Param(p) => match p {
                ModelParam::Friction => "friction".into(),
                ModelParam::SolrefTimeconst => "solref[0]".into(),
                ModelParam::SolrefDampratio => "solref[1]".into(),
                ModelParam::Stiffness => "ke".into(),
                ModelParam::Damping => "kd".into(),
                ModelParam::ServoKp(i) => format!("kp:{i}"),
                ModelParam::ServoKv(i) => format!("kv:{i}"),
                ModelParam::Mass(b) => format!("mass:{b}"),
            },
        }
    }
}

/// The loss's function of the final state.
type StateFn = Arc<dyn Fn(&State) -> f64 + Send + Sync>;

/// A scalar loss of the final state `L(x_N)`, in the unit its name states.
#[derive(Clone)]
pub struct Loss {
    /// Name for reports (`qpos[0]`, `task`, `linear`).
    pub name: String,
    kind: LossKind,
}

#[derive(Clone)]
enum LossKind {
    /// `a · q_N + b · v_N`.
    Linear(DVector<f64>, DVector<f64>),
    /// Any smooth function of the final state.
    Function(StateFn),
}

impl fmt::Debug for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Loss({})", self.name)
    }
}

/// Relative step of the central differences that differentiate a non-linear loss of the final
/// state ([`Loss::state_gradient`]); the loss is smooth, so the error is ~1e-10 relative.
pub const LOSS_STEP: f64 = 1e-6;

impl Loss {
    /// `L = a · q_N + b · v_N` (a: nq weights, b: nv weights).
    pub fn linear(name: impl Into<String>, a: DVector<f64>, b: DVector<f64>) -> Self {
        Self {
            name: name.into(),
            kind: LossKind::Linear(a, b),
        }
    }

    /// Any smooth function of the final state.
    pub fn function(
        name: impl Into<String>,
        f: impl Fn(&State) -> f64 + Send + Sync + 'static,
    ) -> Self {
        Self {
            name: name.into(),
            kind: LossKind::Function(Arc::new(f)),
        }
    }

    /// Parse a loss name for `scene`: `qpos[i]` or `qvel[i]` (that coordinate of the final
    /// state), or `task` (the scene's task loss: the first outcome of its task monitor whose
    /// name starts with `task_loss`, evaluated on the final state alone; box_traversal and
    /// mesh_terrain have `task_loss_m2`).
    ///
    /// # Errors
    /// An unknown form, an index out of range, or `task` on a scene without a task loss.
    pub fn parse(scene: &Scene, text: &str) -> Result<Self, String> {
        let (nq, nv) = (scene.model.nq, scene.model.nv);
        let coord = |prefix: &str, n: usize| -> Option<Result<usize, String>> {
            let i = text
                .strip_prefix(prefix)?
                .strip_prefix('[')?
                .strip_suffix(']')?;
            Some(match i.trim().parse::<usize>() {
                Ok(i) if i < n => Ok(i),
                Ok(i) => Err(format!(
                    "loss '{text}': index {i} is out of range (the scene has {n})"
                )),
                Err(_) => Err(format!("loss '{text}': '{i}' is not an index")),
            })
        };
        if let Some(i) = coord("qpos", nq) {
            let mut a = DVector::zeros(nq);
            a[i?] = 1.0;
            return Ok(Self::linear(text, a, DVector::zeros(nv)));
        }
        if let Some(i) = coord("qvel", nv) {
            let mut b = DVector::zeros(nv);
            b[i?] = 1.0;
            return Ok(Self::linear(text, DVector::zeros(nq), b));
        }
        if text == "task" {
            let Some(task) = scene.task.clone() else {
                return Err(format!(
                    "loss 'task': scene '{}' has no task",
                    scene.model.name
                ));
            };
            let (model, initial) = (scene.model.clone(), scene.initial.clone());
            let probe = task.monitor(&model, &initial);
            let Some(key) = probe
                .outcomes()
                .iter()
                .map(|o| o.0)
                .find(|k| k.starts_with("task_loss"))
            else {
                return Err(format!(
                    "loss 'task': scene '{}' has a task but no task_loss outcome",
                    scene.model.name
                ));
            };
            return Ok(Self::function(format!("task ({key})"), move |s: &State| {
                let mut m = task.monitor(&model, &initial);
                m.observe(s, &StepReport::default(), 0.0);
                m.outcomes()
                    .iter()
                    .find(|o| o.0 == key)
                    .map_or(f64::NAN, |o| o.1)
            }));
        }
        Err(format!(
            "unknown loss '{text}'; use qpos[i], qvel[i] or task"
        ))
    }

    /// The loss at state `s`.
    pub fn value(&self, s: &State) -> f64 {
        match &self.kind {
            LossKind::Linear(a, b) => a.dot(&s.q) + b.dot(&s.v),
            LossKind::Function(f) => f(s),
        }
    }

    /// `(∂L/∂q, ∂L/∂v)` at `s`: exact for a linear loss, else central differences with relative
    /// step [`LOSS_STEP`].
    pub fn state_gradient(&self, s: &State) -> (DVector<f64>, DVector<f64>) {
        match &self.kind {
            LossKind::Linear(a, b) => (a.clone(), b.clone()),
            LossKind::Function(f) => {
                let diff = |x: &mut State, get: fn(&mut State) -> &mut DVector<f64>, i: usize| {
                    let x0 = get(x)[i];
                    let d = LOSS_STEP * x0.abs().max(1.0);
                    get(x)[i] = x0 + d;
                    let lp = f(x);
                    get(x)[i] = x0 - d;
                    let lm = f(x);
                    get(x)[i] = x0;
                    (lp - lm) / (2.0 * d)
                };
                let mut x = s.clone();
                let gq = DVector::from_fn(s.q.len(), |i, _| diff(&mut x, |s| &mut s.q, i));
                let gv = DVector::from_fn(s.v.len(), |i, _| diff(&mut x, |s| &mut s.v, i));
                (gq, gv)
            }
        }
    }
}

/// A gradient problem (module doc).
#[derive(Debug, Clone)]
pub struct Problem {
    /// Name for reports.
    pub name: String,
    /// The model.
    pub model: Model,
    /// The initial state x₀ (t = 0).
    pub initial: State,
    /// Controls per step (steps × actuators; a missing step or entry is 0).
    pub controls: Vec<Vec<f64>>,
    /// Number of steps N ≥ 1.
    pub steps: usize,
    /// Timestep h (s).
    pub h: f64,
    /// The loss of the final state.
    pub loss: Loss,
    /// The inputs, in the order of every gradient.
    pub inputs: Vec<Input>,
}

/// What one rollout of a problem produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// L(x_N) (NaN if the rollout diverged).
    pub loss: f64,
    /// Steps taken (N unless it diverged).
    pub steps: usize,
    /// Steps whose solver did not meet its stopping test.
    pub unconverged: usize,
    /// Why the rollout stopped early, if it did.
    pub diverged: Option<String>,
}

impl Problem {
    /// A problem on `scene`: its model and initial state, its control law sampled at the step
    /// starts `t_k = k h` on the initial state (so open-loop laws are exact; a state feedback
    /// law becomes the schedule it gives at x₀, which the study treats as open-loop).
    pub fn from_scene(
        name: impl Into<String>,
        scene: &Scene,
        steps: usize,
        h: f64,
        loss: Loss,
        inputs: Vec<Input>,
    ) -> Self {
        let controls = (0..steps)
            .map(|k| scene.controls_at(k as f64 * h, &scene.initial))
            .collect();
        Self {
            name: name.into(),
            model: scene.model.clone(),
            initial: scene.initial.clone(),
            controls,
            steps,
            h,
            loss,
            inputs,
        }
    }

    /// Current value of input `i` (in its unit).
    pub fn input_value(&self, i: usize) -> f64 {
        match &self.inputs[i] {
            Input::Qpos(k) => self.initial.q[*k],
            Input::Qvel(k) => self.initial.v[*k],
            Input::Control { step, actuator } => self
                .controls
                .get(*step)
                .and_then(|u| u.get(*actuator))
                .copied()
                .unwrap_or(0.0),
            Input::Param(p) => p.get(&self.model),
        }
    }

    /// The absolute finite-difference step of input `i` for relative step `s`:
    /// `s · max(|θ_i|, 1)`.
    pub fn absolute_step(&self, i: usize, s: f64) -> f64 {
        s * self.input_value(i).abs().max(1.0)
    }

    /// Roll the problem out on a fresh formulation from `build`, with input `i` moved by
    /// `delta` when `perturb` is `Some((i, delta))`.
    ///
    /// # Errors
    /// The formulation cannot be built (its registry message).
    pub fn simulate(
        &self,
        build: Factory<'_>,
        perturb: Option<(usize, f64)>,
    ) -> Result<Outcome, String> {
        self.simulate_observed(build, perturb, &mut |_, _, _| None)
    }

    /// [`Problem::simulate`], calling `observe(model, state after the step, its report)` after
    /// every step: a `Some(reason)` stops the rollout as diverged with that reason (the harness
    /// applies its stability rules this way, on the same rollout).
    ///
    /// # Errors
    /// The formulation cannot be built (its registry message).
    pub fn simulate_observed(
        &self,
        build: Factory<'_>,
        perturb: Option<(usize, f64)>,
        observe: &mut dyn FnMut(&Model, &State, &StepReport) -> Option<String>,
    ) -> Result<Outcome, String> {
        let mut f = build()?;
        let mut model = Cow::Borrowed(&self.model);
        let mut state = self.initial.clone();
        let mut controls = Cow::Borrowed(&self.controls);
        if let Some((i, d)) = perturb {
            match &self.inputs[i] {
                Input::Qpos(k) => state.q[*k] += d,
                Input::Qvel(k) => state.v[*k] += d,
                Input::Control { step, actuator } => {
                    let c = controls.to_mut();
                    if c.len() <= *step {
                        c.resize(*step + 1, Vec::new());
                    }
                    let n = (*actuator + 1).max(self.model.actuators.len());
                    if c[*step].len() < n {
                        c[*step].resize(n, 0.0);
                    }
                    c[*step][*actuator] += d;
                }
                Input::Param(p) => {
                    let v = p.get(&model);
                    p.set(model.to_mut(), v + d);
                }
            }
        }
        let nu = model.actuators.len();
        let mut u = vec![0.0; nu];
        let mut out = Outcome {
            loss: f64::NAN,
            steps: 0,
            unconverged: 0,
            diverged: None,
        };
        for k in 0..self.steps {
            control_into(&controls, k, &mut u);
            let r = f.step(&model, &mut state, &u, self.h);
            out.steps += 1;
            out.unconverged += usize::from(!r.converged);
            if let Some(why) = r.diverged.clone().or_else(|| observe(&model, &state, &r)) {
                out.diverged = Some(why);
                return Ok(out);
            }
        }
        out.loss = self.loss.value(&state);
        Ok(out)
    }
}

/// The controls of step `k` of `schedule` into `u` (one per actuator; missing entries 0).
pub fn control_into(schedule: &[Vec<f64>], k: usize, u: &mut [f64]) {
    u.fill(0.0);
    if let Some(c) = schedule.get(k) {
        for (x, &c) in u.iter_mut().zip(c) {
            *x = c;
        }
    }
}
