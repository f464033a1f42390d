//! Gradient-based control synthesis on `box_traversal` (issue 13): the wheel-velocity spline,
//! the task loss of the final state, its gradient with respect to every knot by a chosen
//! [`GradientMethod`], and Adam.
//!
//! # The problem
//!
//! Controls are the scene's piecewise-linear [`Spline`] with `K` knots per wheel (default 10),
//! evenly spaced over the horizon T; the decision vector is the knot values `z` (rad/s), flat and
//! knot-major: `z[k · nu + j]` is wheel j (left front, right front, rear) at `t_k = k T/(K − 1)`.
//! Step i (of N = ⌈T/h⌉) applies `u_i = Σ_k w_k(i h) z_k` ([`Spline::weight`], hat functions),
//! so the map is linear and `∂L/∂z_k = Σ_i w_k(i h) ∂L/∂u_i` ([`ControlProblem::knot_gradient`]).
//! Knots are kept within ±(`wheel_speed` − [`CLAMP_MARGIN`]): inside the actuators' control
//! clamp, so the clamp never cuts a derivative to zero.
//!
//! The synthesis objective ([`ControlProblem::loss`], m²) is the pose loss of the final state,
//! [`box_traversal_loss`] with the problem's `yaw_weight` (default the task loss's
//! [`TASK_YAW_WEIGHT`]), plus `speed_weight` (s², default 0) times the squared final chassis
//! speed: success, [`box_traversal_success`], asks for a final position within 0.2 m of the
//! target *and* a speed below 0.3 m/s, and the pose loss says nothing about the speed. What is
//! recorded per iterate is the scene's own task loss ([`ControlProblem::task_loss`]: the pose
//! loss with [`TASK_YAW_WEIGHT`]) and success, whatever the objective's weights.
//!
//! # Parametrization
//!
//! Adam moves coordinates `y` of the knots, `z = P y` ([`Parametrization`]), and descends along
//! `Pᵀ ∂L/∂z`; the loss, the gradient methods and the knot bounds are those of `z` (after an
//! update, `z` is clamped to the bounds and `y` recomputed from it).
//!
//! - `wheels`: `y = z`, one coordinate per wheel and knot.
//! - `drive`: per knot, the forward speed s, the turn rate d and the rear wheel's offset c,
//!   `z_left = s − d`, `z_right = s + d`, `z_rear = s + c` (box_traversal's wheel order; the
//!   differential-drive coordinates of a skid-steered base).
//!
//! The choice matters because Adam is not invariant to rotations of its coordinates: while a
//! coordinate's gradient keeps its sign, each update moves it by about α whatever the
//! gradient's size (Kingma & Ba 2015, §2.1, "the effective step ... is approximately bounded
//! by α"). box_traversal turns only by skidding, and below a breakaway differential of about
//! ±0.5 rad/s (left against right, measured: constant commands (1.0, 0.5, 0.75) rad/s end at yaw
//! 0.0°, (1.5, 0.5, 1.0) at −8.6°) static friction holds the heading, so the final lateral
//! position depends weakly on the knots near straight driving. In `wheels` coordinates a
//! wheel's gradient is the forward part (shared by both sides) plus or minus the turning part;
//! while the forward error dominates, both sides' gradients have the forward part's sign and
//! Adam moves both by about α: the differential, the only thing that turns the robot, stays
//! where it started. In `drive` coordinates the turn rate's gradient is the turning part
//! alone, so Adam moves it by about α per update however small it is and crosses the
//! breakaway differential within a few updates. The exact gradient is the same in both; only
//! the steps differ (harness/README.md, "Control synthesis study", has the success rates).
//!
//! # Gradient methods (names shared with the gradient-accuracy study of issue 14)
//!
//! | method | needs | cost per gradient |
//! |---|---|---|
//! | `adjoint` | `ncp_fb` | one forward rollout with tape + one backward sweep, exact adjoint ([`Mode::Exact`]) |
//! | `adjoint_lagged` | `ncp_fb` | the same, lagged adjoint ([`Mode::Lagged`], an approximation) |
//! | `fd_central` | any formulation | 1 + 2 K nu forward rollouts (61 for K = 10, 3 wheels), step [`FD_STEP`] |
//! | `autodiff` | `soft_convex`, `signorini` (feature `burn`) | one batched rollout of every instance + a reverse sweep on burn's tape ([`crate::control_synthesis_batched`]) |
//! | `adjoint_batched` | `ncp_fb` (feature `burn`) | one batched rollout of every instance storing its converged steps + the batched exact adjoint's sweep ([`crate::control_synthesis_batched`]) |
//!
//! `fd_central` is affordable only for small budgets: at h = 50 ms (120 steps) a rollout of
//! `ncp_fb` takes ~0.1–0.3 s on one core, so one gradient is 6–20 s and 50 Adam iterations
//! 5–15 minutes per instance.
//!
//! A gradient always reports the forward steps of its nominal rollout that ended unconverged
//! (count and step indices, [`KnotGradient::unconverged_at`]): there the implicit function
//! theorem does not hold and the adjoint is not a derivative. A rollout that diverged or a
//! gradient with a non-finite entry is reported as such ([`KnotGradient::is_finite`]); the
//! optimizer stops there instead of stepping on it.
//!
//! # Adam
//!
//! [`Adam`] is Algorithm 1 of D. P. Kingma and J. Ba, "Adam: A Method for Stochastic
//! Optimization", ICLR 2015 (β₁ = 0.9, β₂ = 0.999, ε = 1e-8), followed by the projection onto
//! the knot bounds. The default step size [`DEFAULT_STEP_SIZE`] = 0.1 rad/s is Adam's largest
//! move of one knot per iteration (≈ α while the gradient's sign is steady): 5 % of the
//! ±2 rad/s range, so 50 iterations can move a knot by its whole range while the final
//! position, ~0.023 m per 0.1 rad/s of one knot's 0.67 s span at r = 0.35 m, moves by a
//! fraction of the 0.2 m success radius per iteration.

use contactlab_solvers::formulation::{self, Formulation};
use contactlab_solvers::ncp_fb::adjoint::{self, Mode, Parameter};
use contactlab_solvers::ncp_fb::{NcpFb, NcpFbParams};
use contactlab_solvers::{Model, State};
use nalgebra::DVector;

use crate::benchmark::wheeled_robot::{chassis_yaw, parse_with_robot, TASK_YAW_WEIGHT};
use crate::benchmark::{box_traversal_loss, box_traversal_success, BoxTraversalParams, Pose2};
use crate::benchmark::{wheeled_robot::WheeledRobot, Spline};
use crate::SceneError;

/// Default knots per wheel.
pub const DEFAULT_KNOTS: usize = 10;
/// Default Adam iterations (updates).
pub const DEFAULT_ITERATIONS: usize = 50;
/// Default Adam step size α (rad/s); see the module doc.
pub const DEFAULT_STEP_SIZE: f64 = 0.1;
/// Knots stay this far (rad/s) inside the control clamp ±`wheel_speed` (module doc).
pub const CLAMP_MARGIN: f64 = 1e-3;
/// Step (rad/s) of the `fd_central` method's central differences of the whole rollout.
pub const FD_STEP: f64 = 1e-4;

/// How the gradient of the loss with respect to the knots is computed (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GradientMethod {
    /// `ncp_fb`'s exact adjoint.
    Adjoint,
    /// `ncp_fb`'s lagged adjoint (an approximation).
    AdjointLagged,
    /// Central finite differences of whole rollouts, any formulation.
    FdCentral,
    /// Reverse mode through the batched soft_convex or signorini, every solver iteration on
    /// the tape, the instances of a study as one batch ([`crate::control_synthesis_batched`],
    /// builds with the `burn` feature).
    Autodiff,
    /// `ncp_fb`'s exact adjoint on the batched engine (burn-ndarray, f64): the instances of a
    /// study as one batch of worlds, the gradient by the batched adjoint's reverse sweep over
    /// the stored converged steps ([`crate::control_synthesis_batched`], builds with the `burn`
    /// feature). The same derivative as [`GradientMethod::Adjoint`] (knot gradients within
    /// 1e-6 relative, `control_synthesis_autodiff.rs`; every step's, `batched_ncp_adjoint.rs`).
    AdjointBatched,
}

impl GradientMethod {
    /// Every method, in display order.
    pub const ALL: [GradientMethod; 5] = [
        GradientMethod::Adjoint,
        GradientMethod::AdjointLagged,
        GradientMethod::FdCentral,
        GradientMethod::Autodiff,
        GradientMethod::AdjointBatched,
    ];

    /// The name used in experiment files and results.
    pub fn name(self) -> &'static str {
        match self {
            GradientMethod::Adjoint => "adjoint",
            GradientMethod::AdjointLagged => "adjoint_lagged",
            GradientMethod::FdCentral => "fd_central",
            GradientMethod::Autodiff => "autodiff",
            GradientMethod::AdjointBatched => "adjoint_batched",
        }
    }

    /// Parse a method name.
    ///
    /// # Errors
    /// An unknown name, listing the valid ones.
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|m| m.name()).collect();
                format!("unknown gradient method '{s}'; valid: {}", names.join(", "))
            })
    }

    /// The formulations the method works with, in words (`None`: any).
    pub fn formulation(self) -> Option<&'static str> {
        match self {
            GradientMethod::Adjoint
            | GradientMethod::AdjointLagged
            | GradientMethod::AdjointBatched => Some("ncp_fb"),
            GradientMethod::Autodiff => Some("soft_convex or signorini"),
            GradientMethod::FdCentral => None,
        }
    }

    /// Whether formulation `name` offers this method.
    pub fn available_for(self, name: &str) -> bool {
        match self {
            GradientMethod::Autodiff => matches!(name, "soft_convex" | "signorini"),
            _ => self.formulation().is_none_or(|f| f == name),
        }
    }

    /// Whether the method runs the instances of a study as one batch
    /// ([`synthesize_batched`]) rather than one synthesis per instance ([`synthesize`]).
    pub fn batched(self) -> bool {
        matches!(
            self,
            GradientMethod::Autodiff | GradientMethod::AdjointBatched
        )
    }
}

/// A formulation by registry name and parameters (JSON object; `null`: defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct FormulationChoice {
    /// Registry name.
    pub name: String,
    /// Parameters.
    pub params: serde_json::Value,
}

impl FormulationChoice {
    /// Build the formulation.
    ///
    /// # Errors
    /// Unknown name or bad parameters, as text.
    pub fn build(&self) -> Result<Box<dyn Formulation>, String> {
        formulation::build(&self.name, &self.params).map_err(|e| e.to_string())
    }

    /// Build it as `ncp_fb` (for the adjoint methods).
    ///
    /// # Errors
    /// Another formulation, or bad parameters, as text.
    pub fn ncp_fb(&self) -> Result<NcpFb, String> {
        if self.name != "ncp_fb" {
            return Err(format!("the adjoint needs ncp_fb, not '{}'", self.name));
        }
        let p: NcpFbParams =
            formulation::parse_params("ncp_fb", &self.params).map_err(|e| e.to_string())?;
        NcpFb::new(p).map_err(|e| e.to_string())
    }
}

/// One box_traversal control problem: a seeded instance at one timestep.
#[derive(Debug, Clone)]
pub struct ControlProblem {
    /// The scene's model.
    pub model: Model,
    /// The instance's start state.
    pub initial: State,
    /// The instance's target pose.
    pub target: Pose2,
    /// Horizon T (s).
    pub horizon: f64,
    /// Timestep h (s).
    pub h: f64,
    /// Steps N = ⌈T/h⌉.
    pub steps: usize,
    /// Knots K per wheel.
    pub knots: usize,
    /// The control clamp (rad/s).
    pub wheel_speed: f64,
    /// Yaw weight of the synthesis objective (m²/rad²); default the task loss's
    /// [`TASK_YAW_WEIGHT`].
    pub yaw_weight: f64,
    /// Weight of the squared final chassis speed in the synthesis objective (s², so that the
    /// term is in m²); default 0 (the objective is the task loss).
    pub speed_weight: f64,
    /// The coordinates Adam moves (module doc, "Parametrization"); default
    /// [`Parametrization::Wheels`].
    pub parametrization: Parametrization,
}

/// The coordinates of the knot vector that Adam moves (module doc, "Parametrization").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Parametrization {
    /// One coordinate per wheel and knot: `y = z` (rad/s).
    #[default]
    Wheels,
    /// Per knot: forward speed s, turn rate d and rear offset c (rad/s), with
    /// `z_left = s − d`, `z_right = s + d`, `z_rear = s + c` (box_traversal's wheel order
    /// left front, right front, rear).
    Drive,
}

impl Parametrization {
    /// Every parametrization, in display order.
    pub const ALL: [Parametrization; 2] = [Parametrization::Wheels, Parametrization::Drive];

    /// The name used in experiment files and results.
    pub fn name(self) -> &'static str {
        match self {
            Parametrization::Wheels => "wheels",
            Parametrization::Drive => "drive",
        }
    }

    /// Parse a name.
    ///
    /// # Errors
    /// An unknown name, listing the valid ones.
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|m| m.name()).collect();
                format!("unknown parametrization '{s}'; valid: {}", names.join(", "))
            })
    }

    /// The knot vector `z` (K nu, rad/s) of coordinates `y`: `z = P y`.
    pub fn knots(self, y: &[f64]) -> Vec<f64> {
        match self {
            Parametrization::Wheels => y.to_vec(),
            Parametrization::Drive => y
                .chunks(3)
                .flat_map(|c| [c[0] - c[1], c[0] + c[1], c[0] + c[2]])
                .collect(),
        }
    }

    /// The coordinates `y = P⁻¹ z` of knot vector `z`.
    pub fn coordinates(self, z: &[f64]) -> Vec<f64> {
        match self {
            Parametrization::Wheels => z.to_vec(),
            Parametrization::Drive => z
                .chunks(3)
                .flat_map(|u| {
                    let s = 0.5 * (u[0] + u[1]);
                    [s, 0.5 * (u[1] - u[0]), u[2] - s]
                })
                .collect(),
        }
    }

    /// The gradient with respect to the coordinates, `Pᵀ g`, of a knot gradient `g`.
    pub fn gradient(self, g: &[f64]) -> Vec<f64> {
        match self {
            Parametrization::Wheels => g.to_vec(),
            Parametrization::Drive => g
                .chunks(3)
                .flat_map(|g| [g[0] + g[1] + g[2], g[1] - g[0], g[2]])
                .collect(),
        }
    }

    /// Whether the problem's controls fit this parametrization (`Drive` needs 3 wheels).
    ///
    /// # Errors
    /// `Drive` on a problem whose actuators are not 3 wheels.
    pub fn check(self, nu: usize) -> Result<(), String> {
        match self {
            Parametrization::Drive if nu != 3 => Err(format!(
                "parametrization 'drive' needs box_traversal's 3 wheels, not {nu} actuators"
            )),
            _ => Ok(()),
        }
    }
}

/// Steps of length `h` covering `horizon` (a last partial step counts as one).
fn step_count(horizon: f64, h: f64) -> usize {
    ((horizon / h) - 1e-9).ceil().max(1.0) as usize
}

impl ControlProblem {
    /// The problem of `box_traversal` with parameters `scene_params` (a JSON object; its `seed`
    /// picks the instance) at timestep `h` (s) with `knots` knots per wheel.
    ///
    /// # Errors
    /// Bad scene parameters; `knots` < 2; `h` not finite and > 0.
    pub fn box_traversal(
        scene_params: &serde_json::Value,
        h: f64,
        knots: usize,
    ) -> Result<Self, SceneError> {
        let bad = |m: String| SceneError::BadParams {
            name: "box_traversal".into(),
            message: m,
        };
        if knots < 2 {
            return Err(bad(format!("knots = {knots} must be >= 2")));
        }
        if !(h.is_finite() && h > 0.0) {
            return Err(bad(format!("timestep {h} must be finite and > 0")));
        }
        let scene = crate::build("box_traversal", scene_params)?;
        let (p, robot): (BoxTraversalParams, WheeledRobot) =
            parse_with_robot("box_traversal", scene_params)?;
        let (_, target) = p.instance();
        Ok(Self {
            steps: step_count(scene.horizon, h),
            model: scene.model,
            initial: scene.initial,
            target,
            horizon: scene.horizon,
            h,
            knots,
            wheel_speed: robot.wheel_speed,
            yaw_weight: TASK_YAW_WEIGHT,
            speed_weight: 0.0,
            parametrization: Parametrization::Wheels,
        })
    }

    /// Actuators (wheels).
    pub fn nu(&self) -> usize {
        self.model.actuators.len()
    }

    /// Length of the knot vector, K nu.
    pub fn len(&self) -> usize {
        self.knots * self.nu()
    }

    /// True if there are no knots (never for a built problem).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bound of every knot (rad/s): `wheel_speed − CLAMP_MARGIN`.
    pub fn bound(&self) -> f64 {
        self.wheel_speed - CLAMP_MARGIN
    }

    /// The spline of knot vector `z` (module doc for the layout).
    pub fn spline(&self, z: &[f64]) -> Spline {
        let nu = self.nu();
        Spline::new(
            self.horizon,
            (0..self.knots)
                .map(|k| z[k * nu..(k + 1) * nu].to_vec())
                .collect(),
        )
    }

    /// Per-step controls (N × nu, rad/s) of knot vector `z`: step i gets the spline at `i h`.
    pub fn controls(&self, z: &[f64]) -> Vec<Vec<f64>> {
        let s = self.spline(z);
        (0..self.steps).map(|i| s.at(i as f64 * self.h)).collect()
    }

    /// The knot gradient (K nu) from per-step control gradients (N × nu): the transpose of
    /// [`ControlProblem::controls`]' linear map.
    pub fn knot_gradient(&self, per_step: &[DVector<f64>]) -> Vec<f64> {
        let nu = self.nu();
        let s = self.spline(&vec![0.0; self.len()]);
        let mut g = vec![0.0; self.len()];
        for (i, gi) in per_step.iter().enumerate() {
            let t = i as f64 * self.h;
            for k in 0..self.knots {
                let w = s.weight(k, t);
                if w != 0.0 {
                    for j in 0..nu {
                        g[k * nu + j] += w * gi[j];
                    }
                }
            }
        }
        g
    }

    /// The starting knots: every wheel at the constant speed that covers the start-to-target
    /// distance d in the horizon with the last knot at 0 (a ramp down over the last knot
    /// interval Δ): `ω = d / (r (T − Δ/2))`, within the bounds.
    pub fn initial_knots(&self, wheel_radius: f64) -> Vec<f64> {
        let d = (self.target.x - self.initial.q[0]).hypot(self.target.y - self.initial.q[1]);
        let dt = self.horizon / (self.knots - 1) as f64;
        let w = (d / (wheel_radius * (self.horizon - 0.5 * dt))).clamp(0.0, self.bound());
        let nu = self.nu();
        let mut z = vec![w; self.len()];
        for j in 0..nu {
            z[(self.knots - 1) * nu + j] = 0.0;
        }
        z
    }

    /// The synthesis objective of a final state (m², module doc): the pose loss with
    /// `yaw_weight` plus `speed_weight` times the squared chassis speed `|v[0..3]|²`.
    pub fn loss(&self, s: &State) -> f64 {
        box_traversal_loss(s, &self.target, self.yaw_weight)
            + self.speed_weight * final_speed(s).powi(2)
    }

    /// The scene's task loss of a final state (m²): [`box_traversal_loss`] with
    /// [`TASK_YAW_WEIGHT`], whatever the objective's weights.
    pub fn task_loss(&self, s: &State) -> f64 {
        box_traversal_loss(s, &self.target, TASK_YAW_WEIGHT)
    }

    /// Success of a final state (module doc).
    pub fn success(&self, s: &State) -> bool {
        box_traversal_success(s, &self.target)
    }

    /// `(∂L/∂q, ∂L/∂v)` of [`ControlProblem::loss`] at `s` (raw coordinates: the yaw's
    /// derivative through the quaternion `q[3..7]`, unnormalized).
    pub fn loss_partials(&self, s: &State) -> (DVector<f64>, DVector<f64>) {
        let mut gq = DVector::zeros(s.q.len());
        gq[0] = 2.0 * (s.q[0] - self.target.x);
        gq[1] = 2.0 * (s.q[1] - self.target.y);
        let d = chassis_yaw(s) - self.target.yaw;
        let dyaw = d.sin().atan2(d.cos());
        // yaw = atan2(a, b), a = 2 (w z + x y), b = 1 − 2 (y² + z²).
        let (w, x, y, z) = (s.q[3], s.q[4], s.q[5], s.q[6]);
        let (a, b) = (2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z));
        let n = a * a + b * b;
        let da = [2.0 * z, 2.0 * y, 2.0 * x, 2.0 * w];
        let db = [0.0, 0.0, -4.0 * y, -4.0 * z];
        for i in 0..4 {
            gq[3 + i] = 2.0 * self.yaw_weight * dyaw * (b * da[i] - a * db[i]) / n;
        }
        let mut gv = DVector::zeros(s.v.len());
        for i in 0..3 {
            gv[i] = 2.0 * self.speed_weight * s.v[i];
        }
        (gq, gv)
    }
}

/// The chassis speed of a state (m/s): the norm of its linear velocity `v[0..3]`, the speed
/// that [`box_traversal_success`] tests.
pub fn final_speed(s: &State) -> f64 {
    (s.v[0].powi(2) + s.v[1].powi(2) + s.v[2].powi(2)).sqrt()
}

/// A forward rollout's outcome.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The last state reached.
    pub last: State,
    /// Indices of the steps that ended unconverged.
    pub unconverged_at: Vec<usize>,
    /// Why the rollout stopped early (a non-finite state), if it did.
    pub diverged: Option<String>,
}

/// Roll `f` out over the problem's N steps under knot vector `z`.
pub fn simulate(f: &mut dyn Formulation, p: &ControlProblem, z: &[f64]) -> Outcome {
    let mut s = p.initial.clone();
    let mut out = Outcome {
        last: s.clone(),
        unconverged_at: Vec::new(),
        diverged: None,
    };
    for (i, u) in p.controls(z).iter().enumerate() {
        let r = f.step(&p.model, &mut s, u, p.h);
        if !r.converged {
            out.unconverged_at.push(i);
        }
        if let Some(why) = r.diverged {
            out.diverged = Some(why);
            break;
        }
    }
    out.last = s;
    out
}

/// A loss and its gradient with respect to the knots.
#[derive(Debug, Clone)]
pub struct KnotGradient {
    /// Objective of the nominal rollout (m², [`ControlProblem::loss`]).
    pub loss: f64,
    /// The scene's task loss of the nominal rollout (m², [`ControlProblem::task_loss`]).
    pub task_loss: f64,
    /// dL/dz (K nu, m²/(rad/s)); NaN entries when the rollout diverged.
    pub gradient: Vec<f64>,
    /// Final state of the nominal rollout.
    pub last: State,
    /// Whether the nominal rollout's final state is a success.
    pub success: bool,
    /// Steps of the nominal rollout that ended unconverged (indices; t = i h).
    pub unconverged_at: Vec<usize>,
    /// Why the nominal rollout stopped early, if it did.
    pub diverged: Option<String>,
    /// Forward rollouts spent.
    pub rollouts: usize,
}

impl KnotGradient {
    /// Number of unconverged forward steps of the nominal rollout.
    pub fn unconverged_steps(&self) -> usize {
        self.unconverged_at.len()
    }

    /// Whether the rollout completed and the loss and every gradient entry are finite.
    pub fn is_finite(&self) -> bool {
        self.diverged.is_none()
            && self.loss.is_finite()
            && self.gradient.iter().all(|g| g.is_finite())
    }

    /// Euclidean norm of the gradient.
    pub fn norm(&self) -> f64 {
        self.gradient.iter().map(|g| g * g).sum::<f64>().sqrt()
    }
}

/// The loss at `z` and its gradient by `method` with formulation `f`.
///
/// # Errors
/// A method the formulation does not offer, or a formulation that does not build, as text.
pub fn gradient(
    p: &ControlProblem,
    f: &FormulationChoice,
    method: GradientMethod,
    z: &[f64],
) -> Result<KnotGradient, String> {
    if !method.available_for(&f.name) {
        return Err(format!(
            "gradient method '{}' needs {}, not '{}'",
            method.name(),
            method.formulation().unwrap_or("any"),
            f.name
        ));
    }
    match method {
        GradientMethod::Autodiff | GradientMethod::AdjointBatched => batched_gradient(p, f, z),
        GradientMethod::Adjoint | GradientMethod::AdjointLagged => {
            let mode = if method == GradientMethod::Adjoint {
                Mode::Exact
            } else {
                Mode::Lagged
            };
            let mut solver = f.ncp_fb()?;
            let r = adjoint::rollout(
                &mut solver,
                &p.model,
                &p.initial,
                &p.controls(z),
                p.steps,
                p.h,
            );
            let last = r.final_state().clone();
            let unconverged_at = (0..r.len()).filter(|&k| !r.converged[k]).collect();
            let loss = p.loss(&last);
            let base = KnotGradient {
                loss,
                task_loss: p.task_loss(&last),
                gradient: vec![f64::NAN; p.len()],
                success: p.success(&last),
                last,
                unconverged_at,
                diverged: None,
                rollouts: 1,
            };
            if r.len() < p.steps || !base.last.is_finite() {
                return Ok(KnotGradient {
                    diverged: Some(format!(
                        "rollout stopped at step {} of {} (non-finite state)",
                        r.len(),
                        p.steps
                    )),
                    ..base
                });
            }
            let n = r.len();
            let (nq, nv) = (p.model.nq, p.model.nv);
            let g = adjoint::backward(&solver, &p.model, &r, &[], mode, &|k, s| {
                if k == n {
                    p.loss_partials(s)
                } else {
                    (DVector::zeros(nq), DVector::zeros(nv))
                }
            });
            Ok(KnotGradient {
                gradient: p.knot_gradient(&g.controls),
                ..base
            })
        }
        GradientMethod::FdCentral => {
            let run = |z: &[f64]| -> Result<Outcome, String> {
                let mut fm = f.build()?;
                Ok(simulate(fm.as_mut(), p, z))
            };
            let nominal = run(z)?;
            let mut gradient = vec![f64::NAN; p.len()];
            let mut rollouts = 1;
            if nominal.diverged.is_none() {
                for (i, gi) in gradient.iter_mut().enumerate() {
                    let mut zp = z.to_vec();
                    let mut zm = z.to_vec();
                    zp[i] += FD_STEP;
                    zm[i] -= FD_STEP;
                    let (a, b) = (run(&zp)?, run(&zm)?);
                    rollouts += 2;
                    *gi = (p.loss(&a.last) - p.loss(&b.last)) / (2.0 * FD_STEP);
                }
            }
            Ok(KnotGradient {
                loss: p.loss(&nominal.last),
                task_loss: p.task_loss(&nominal.last),
                success: p.success(&nominal.last),
                gradient,
                last: nominal.last,
                unconverged_at: nominal.unconverged_at,
                diverged: nominal.diverged,
                rollouts,
            })
        }
    }
}

/// One instance's [`GradientMethod::Autodiff`] or [`GradientMethod::AdjointBatched`] gradient
/// (a batch of one).
#[cfg(feature = "burn")]
fn batched_gradient(
    p: &ControlProblem,
    f: &FormulationChoice,
    z: &[f64],
) -> Result<KnotGradient, String> {
    let g = crate::control_synthesis_batched::knot_gradients(
        std::slice::from_ref(p),
        f,
        &[z.to_vec()],
        true,
    )?
    .remove(0);
    Ok(KnotGradient {
        loss: p.loss(&g.last),
        task_loss: p.task_loss(&g.last),
        // A gradient that is not a derivative (the batched adjoint's caveat) is NaN: never
        // stepped on.
        gradient: match (&g.caveat, g.gradient) {
            (None, Some(x)) => x,
            _ => vec![f64::NAN; p.len()],
        },
        success: g.stopped.is_none() && p.success(&g.last),
        last: g.last,
        unconverged_at: g.unconverged_at,
        diverged: g.stopped,
        rollouts: 2,
    })
}

#[cfg(not(feature = "burn"))]
fn batched_gradient(
    _: &ControlProblem,
    _: &FormulationChoice,
    _: &[f64],
) -> Result<KnotGradient, String> {
    Err(BATCHED_NOT_BUILT.into())
}

/// Why [`GradientMethod::Autodiff`] and [`GradientMethod::AdjointBatched`] fail in a build
/// without the batched engine.
pub const BATCHED_NOT_BUILT: &str =
    "gradient methods 'autodiff' and 'adjoint_batched' need the batched engine: build with --features burn";

/// Where a batch's synthesis stands after an iteration: everything that resumes it (the
/// knots, Adam's moments, each instance's record so far, which instances still run). The
/// harness stores it after every iteration, so a batch longer than a job's time limit (or a
/// session) goes on from its last finished iteration ([`synthesize_batch_resumable`]).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct BatchProgress {
    /// The next iteration to run (the number finished).
    pub next_iteration: usize,
    /// Each instance's knots (rad/s); Adam's coordinates are derived from them
    /// ([`Parametrization::coordinates`]).
    pub z: Vec<Vec<f64>>,
    /// Each instance's Adam state.
    pub adam: Vec<Adam>,
    /// Each instance's record so far (its wall time: the iterations it ran, in whichever
    /// process ran them).
    pub out: Vec<Synthesis>,
    /// The instances still running.
    pub running: Vec<usize>,
}

impl BatchProgress {
    /// Whether this progress can resume a batch of `n` instances with knot vectors of lengths
    /// `dims` and an `iterations` budget: every per-instance list has `n` entries with the
    /// right lengths, the running instances are distinct valid indices, the next iteration is
    /// within the budget, and each record holds exactly the iterations it ran (a running
    /// instance one loss per finished iteration, a stopped one at most that many).
    ///
    /// # Errors
    /// What does not fit, in words.
    pub fn check(&self, n: usize, iterations: usize, dims: &[usize]) -> Result<(), String> {
        let it = self.next_iteration;
        if self.z.len() != n || self.adam.len() != n || self.out.len() != n {
            return Err(format!(
                "{} instances stored, the batch has {n}",
                self.z.len()
            ));
        }
        if it > iterations + 1 {
            return Err(format!(
                "stored at iteration {it}, the batch has {iterations} iterations"
            ));
        }
        if let Some(i) = (0..n).find(|&i| self.z[i].len() != dims[i]) {
            return Err(format!(
                "instance {i} has {} knots stored, the batch {}",
                self.z[i].len(),
                dims[i]
            ));
        }
        let sorted = self.running.windows(2).all(|w| w[0] < w[1]);
        if !sorted || self.running.iter().any(|&i| i >= n) {
            return Err("the running instances are not distinct indices of the batch".into());
        }
        for (i, o) in self.out.iter().enumerate() {
            let runs = self.running.binary_search(&i).is_ok();
            let k = o.losses.len();
            if (runs && k != it) || k > it || o.objectives.len() != k || o.unconverged.len() != k {
                return Err(format!(
                    "instance {i}'s record holds {k} evaluated iterates at iteration {it}"
                ));
            }
        }
        Ok(())
    }
}

/// [`synthesize`] for every problem at once with a batched method ([`GradientMethod::Autodiff`]
/// for soft_convex and signorini, [`GradientMethod::AdjointBatched`] for ncp_fb), the problems
/// one batch of worlds ([`crate::control_synthesis_batched::synthesize_batch_resumable`]; each
/// [`Synthesis::wall_s`] is then the whole batch's time over the iterations the instance ran),
/// from `resume` (a previous run's stored progress of the same batch; `None`: from `z0`),
/// calling `after_iteration` with the progress after every iteration.
///
/// # Errors
/// A build without the `burn` feature, a formulation the batched engine does not run with a
/// gradient, a setting it refuses, problems that do not share their shape, a `resume` that is not this
/// batch's.
pub fn synthesize_batched(
    problems: &[ControlProblem],
    f: &FormulationChoice,
    z0: &[Vec<f64>],
    iterations: usize,
    schedule: Schedule,
    resume: Option<BatchProgress>,
    after_iteration: &mut dyn FnMut(&BatchProgress),
) -> Result<Vec<Synthesis>, String> {
    #[cfg(feature = "burn")]
    {
        crate::control_synthesis_batched::synthesize_batch_resumable(
            problems,
            f,
            z0,
            iterations,
            schedule,
            resume,
            after_iteration,
        )
    }
    #[cfg(not(feature = "burn"))]
    {
        let _ = (
            problems,
            f,
            z0,
            iterations,
            schedule,
            resume,
            after_iteration,
        );
        Err(BATCHED_NOT_BUILT.into())
    }
}

/// Adam (Kingma & Ba 2015, Algorithm 1) on a parameter vector, with its moment estimates.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Adam {
    /// Step size α (the parameters' unit).
    pub step_size: f64,
    /// Decay of the first moment, β₁.
    pub beta1: f64,
    /// Decay of the second moment, β₂.
    pub beta2: f64,
    /// ε of the denominator (the gradient's unit).
    pub epsilon: f64,
    m: Vec<f64>,
    v: Vec<f64>,
    t: i32,
}

impl Adam {
    /// Adam for `n` parameters with step size α and the paper's β₁ = 0.9, β₂ = 0.999, ε = 1e-8.
    pub fn new(n: usize, step_size: f64) -> Self {
        Self {
            step_size,
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
            m: vec![0.0; n],
            v: vec![0.0; n],
            t: 0,
        }
    }

    /// One update of `x` by gradient `g` (Algorithm 1's loop body).
    pub fn step(&mut self, x: &mut [f64], g: &[f64]) {
        self.t += 1;
        let (b1, b2) = (self.beta1, self.beta2);
        let (c1, c2) = (1.0 - b1.powi(self.t), 1.0 - b2.powi(self.t));
        for i in 0..x.len() {
            self.m[i] = b1 * self.m[i] + (1.0 - b1) * g[i];
            self.v[i] = b2 * self.v[i] + (1.0 - b2) * g[i] * g[i];
            let (m_hat, v_hat) = (self.m[i] / c1, self.v[i] / c2);
            x[i] -= self.step_size * m_hat / (v_hat.sqrt() + self.epsilon);
        }
    }
}

/// One synthesis's record, one entry per evaluated iterate (iterate 0 is the start).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Synthesis {
    /// The scene's task loss of each evaluated iterate (m², [`ControlProblem::task_loss`]).
    pub losses: Vec<f64>,
    /// The objective of each evaluated iterate (m², [`ControlProblem::loss`]).
    pub objectives: Vec<f64>,
    /// Gradient norm at each iterate where a gradient was taken (every one but an unsuccessful
    /// last; m²/(rad/s)).
    pub gradient_norms: Vec<f64>,
    /// Unconverged forward steps of each evaluated iterate's rollout.
    pub unconverged: Vec<usize>,
    /// Adam updates before the first successful iterate (`None`: no success).
    pub iterations_to_success: Option<usize>,
    /// Why the synthesis stopped before its budget without success (a diverged rollout, a
    /// non-finite gradient), if it did.
    pub stopped: Option<String>,
    /// The last iterate's knots (rad/s).
    pub knots: Vec<f64>,
    /// The last iterate's final state.
    pub last: Option<State>,
    /// Wall time of the whole synthesis (s).
    pub wall_s: f64,
}

impl Synthesis {
    /// Whether an iterate succeeded.
    pub fn success(&self) -> bool {
        self.iterations_to_success.is_some()
    }

    /// Task loss of the last evaluated iterate.
    pub fn final_loss(&self) -> f64 {
        self.losses.last().copied().unwrap_or(f64::NAN)
    }

    /// Wall time per evaluated iterate (s).
    pub fn wall_per_iteration_s(&self) -> f64 {
        self.wall_s / self.losses.len().max(1) as f64
    }
}

/// Adam's step-size schedule: update t (1-based) uses `step_size · step_decay^(t−1)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    /// Step size α of the first update (rad/s).
    pub step_size: f64,
    /// Factor (0, 1] applied to α after every update; 1 keeps α constant.
    pub step_decay: f64,
}

impl Schedule {
    /// A constant step size α.
    pub fn constant(step_size: f64) -> Self {
        Self {
            step_size,
            step_decay: 1.0,
        }
    }

    /// The step size of update `t` (1-based).
    pub fn at(&self, t: usize) -> f64 {
        self.step_size * self.step_decay.powi(t.saturating_sub(1) as i32)
    }
}

/// Adam on the knots from `z0` for at most `iterations` updates with step sizes `schedule`,
/// stopping at the first iterate whose rollout succeeds. Each iterate costs one
/// [`gradient`]; the iterate after the last update is only evaluated.
///
/// # Errors
/// A method the formulation lacks, or a formulation that does not build.
pub fn synthesize(
    p: &ControlProblem,
    f: &FormulationChoice,
    method: GradientMethod,
    z0: &[f64],
    iterations: usize,
    schedule: Schedule,
) -> Result<Synthesis, String> {
    let t0 = std::time::Instant::now();
    let par = p.parametrization;
    par.check(p.nu())?;
    let mut z = z0.to_vec();
    let mut y = par.coordinates(&z);
    let mut adam = Adam::new(z.len(), schedule.step_size);
    let mut out = Synthesis::default();
    let bound = p.bound();
    for it in 0..=iterations {
        let (loss, task_loss, success, unconverged, last, g) = if it < iterations {
            let g = gradient(p, f, method, &z)?;
            (
                g.loss,
                g.task_loss,
                g.success,
                g.unconverged_steps(),
                g.last.clone(),
                Some(g),
            )
        } else {
            let mut fm = f.build()?;
            let o = simulate(fm.as_mut(), p, &z);
            (
                p.loss(&o.last),
                p.task_loss(&o.last),
                p.success(&o.last) && o.diverged.is_none(),
                o.unconverged_at.len(),
                o.last,
                None,
            )
        };
        out.losses.push(task_loss);
        out.objectives.push(loss);
        out.unconverged.push(unconverged);
        out.last = Some(last);
        if let Some(g) = &g {
            out.gradient_norms.push(g.norm());
        }
        if success {
            out.iterations_to_success = Some(it);
            break;
        }
        let Some(g) = g else { break };
        if !g.is_finite() {
            out.stopped = Some(match &g.diverged {
                Some(why) => format!("iterate {it}: {why}"),
                None => format!("iterate {it}: non-finite loss or gradient"),
            });
            break;
        }
        adam.step_size = schedule.at(it + 1);
        adam.step(&mut y, &par.gradient(&g.gradient));
        z = par.knots(&y);
        for x in &mut z {
            *x = x.clamp(-bound, bound);
        }
        y = par.coordinates(&z);
    }
    out.knots = z;
    out.wall_s = t0.elapsed().as_secs_f64();
    Ok(out)
}

/// Derivatives of the final chassis x and y with respect to every knot and to μ (the
/// gradient check of issue 13): `(d(x_N, y_N)/dz` (2 × K nu), `d(x_N, y_N)/dμ`, unconverged
/// forward step indices) by `ncp_fb`'s adjoint in `mode` with `solver`.
pub fn final_xy_adjoint(
    p: &ControlProblem,
    solver: &NcpFb,
    z: &[f64],
    mode: Mode,
) -> ([Vec<f64>; 2], [f64; 2], Vec<usize>) {
    let mut f = solver.clone();
    let r = adjoint::rollout(&mut f, &p.model, &p.initial, &p.controls(z), p.steps, p.h);
    let n = r.len();
    let (nq, nv) = (p.model.nq, p.model.nv);
    let mut grads = [Vec::new(), Vec::new()];
    let mut mu = [0.0; 2];
    for c in 0..2 {
        let g = adjoint::backward(&f, &p.model, &r, &[Parameter::Friction], mode, &|k, _| {
            let mut a = DVector::zeros(nq);
            if k == n {
                a[c] = 1.0;
            }
            (a, DVector::zeros(nv))
        });
        grads[c] = p.knot_gradient(&g.controls);
        mu[c] = g.params[0];
    }
    let unconverged = (0..n).filter(|&k| !r.converged[k]).collect();
    (grads, mu, unconverged)
}

/// One input of [`final_xy_with`]: knot index into z, or μ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XyInput {
    /// Knot `z[i]`.
    Knot(usize),
    /// The friction coefficient of every geom ([`Parameter::Friction`]).
    Friction,
}

/// Final chassis (x, y) (m) of an `ncp_fb` rollout with `solver` and input moved by `delta`.
pub fn final_xy_with(
    p: &ControlProblem,
    solver: &NcpFb,
    z: &[f64],
    input: XyInput,
    delta: f64,
) -> [f64; 2] {
    let mut model = p.model.clone();
    let mut z = z.to_vec();
    match input {
        XyInput::Knot(i) => z[i] += delta,
        XyInput::Friction => {
            let mu = Parameter::Friction.get(&model);
            Parameter::Friction.set(&mut model, mu + delta);
        }
    }
    let q = ControlProblem { model, ..p.clone() };
    let mut f = solver.clone();
    let o = simulate(&mut f, &q, &z);
    [o.last.q[0], o.last.q[1]]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem() -> ControlProblem {
        ControlProblem::box_traversal(&serde_json::json!({"seed": 3}), 0.05, 10).unwrap()
    }

    #[test]
    fn knot_gradient_is_the_transpose_of_the_control_map() {
        let p = problem();
        let z: Vec<f64> = (0..p.len()).map(|i| (i as f64 * 0.37).sin()).collect();
        let g: Vec<DVector<f64>> = (0..p.steps)
            .map(|i| DVector::from_fn(p.nu(), |j, _| ((i * 3 + j) as f64 * 0.11).cos()))
            .collect();
        // <controls(z), g> = <z, knot_gradient(g)> for the linear map.
        let lhs: f64 = p
            .controls(&z)
            .iter()
            .zip(&g)
            .map(|(u, gi)| u.iter().zip(gi.iter()).map(|(a, b)| a * b).sum::<f64>())
            .sum();
        let kg = p.knot_gradient(&g);
        let rhs: f64 = z.iter().zip(&kg).map(|(a, b)| a * b).sum();
        assert!(
            (lhs - rhs).abs() < 1e-9 * lhs.abs().max(1.0),
            "{lhs} vs {rhs}"
        );
    }

    #[test]
    fn loss_partials_match_finite_differences() {
        let mut p = problem();
        p.speed_weight = 0.7;
        p.yaw_weight = 0.4;
        let mut s = p.initial.clone();
        s.v[0] = 0.3;
        s.v[1] = -0.2;
        s.v[2] = 0.05;
        s.q[0] = 1.3;
        s.q[1] = -0.4;
        let yaw: f64 = 0.7;
        let (c, sn) = ((yaw / 2.0).cos(), (yaw / 2.0).sin());
        s.q[3] = c * 0.99;
        s.q[4] = 0.05;
        s.q[5] = -0.03;
        s.q[6] = sn;
        let (gq, gv) = p.loss_partials(&s);
        for i in 0..7 {
            let d = 1e-6;
            let (mut a, mut b) = (s.clone(), s.clone());
            a.q[i] += d;
            b.q[i] -= d;
            let fd = (p.loss(&a) - p.loss(&b)) / (2.0 * d);
            assert!((fd - gq[i]).abs() < 1e-7, "q[{i}]: {} vs {fd}", gq[i]);
        }
        for i in 0..s.v.len() {
            let d = 1e-6;
            let (mut a, mut b) = (s.clone(), s.clone());
            a.v[i] += d;
            b.v[i] -= d;
            let fd = (p.loss(&a) - p.loss(&b)) / (2.0 * d);
            assert!((fd - gv[i]).abs() < 1e-7, "v[{i}]: {} vs {fd}", gv[i]);
        }
        // The task loss ignores both weights.
        let task = box_traversal_loss(&s, &p.target, TASK_YAW_WEIGHT);
        assert_eq!(p.task_loss(&s), task);
    }

    #[test]
    fn drive_coordinates_invert_and_their_gradient_is_the_transpose() {
        let par = Parametrization::Drive;
        let z: Vec<f64> = (0..30).map(|i| (i as f64 * 0.53).sin()).collect();
        let y = par.coordinates(&z);
        for (a, b) in par.knots(&y).iter().zip(&z) {
            assert!((a - b).abs() < 1e-15, "z = P P^-1 z");
        }
        // Knot 0 of z: left 0, right sin(0.53), rear sin(1.06).
        let (l, r, b) = (z[0], z[1], z[2]);
        assert!((y[0] - 0.5 * (l + r)).abs() < 1e-15 && (y[1] - 0.5 * (r - l)).abs() < 1e-15);
        assert!((y[2] - (b - 0.5 * (l + r))).abs() < 1e-15);
        // <g, P y> = <P^T g, y> for the linear map.
        let g: Vec<f64> = (0..30).map(|i| (i as f64 * 0.29).cos()).collect();
        let lhs: f64 = g.iter().zip(par.knots(&y)).map(|(a, b)| a * b).sum();
        let rhs: f64 = par.gradient(&g).iter().zip(&y).map(|(a, b)| a * b).sum();
        assert!((lhs - rhs).abs() < 1e-12, "{lhs} vs {rhs}");
        // A pure turn slows the left wheel and speeds the right one (positive yaw rate).
        let turn = par.knots(&[1.0, 0.25, 0.0]);
        assert_eq!(turn, vec![0.75, 1.25, 1.0]);
        assert!(par.check(3).is_ok() && par.check(4).is_err());
        assert_eq!(Parametrization::Wheels.knots(&z), z);
        assert_eq!(Parametrization::parse("drive"), Ok(Parametrization::Drive));
        assert!(Parametrization::parse("polar")
            .unwrap_err()
            .contains("wheels, drive"));
    }

    #[test]
    fn adam_first_step_moves_each_parameter_by_the_step_size() {
        // With bias correction, m̂ = g and v̂ = g² at t = 1: each x moves by α sign(g).
        let mut adam = Adam::new(3, 0.1);
        let mut x = [1.0, 2.0, 3.0];
        adam.step(&mut x, &[4.0, -0.5, 1e3]);
        for (xi, want) in x.iter().zip([0.9, 2.1, 2.9]) {
            assert!((xi - want).abs() < 1e-8, "{x:?}");
        }
    }

    #[test]
    fn methods_parse_and_say_what_they_need() {
        assert_eq!(
            GradientMethod::parse("adjoint_lagged"),
            Ok(GradientMethod::AdjointLagged)
        );
        let e = GradientMethod::parse("autodif").unwrap_err();
        assert!(e.contains("fd_central") && e.contains("autodiff"), "{e}");
        assert!(!GradientMethod::Adjoint.available_for("penalty"));
        assert!(GradientMethod::FdCentral.available_for("penalty"));
        assert!(GradientMethod::Autodiff.available_for("signorini"));
        assert!(!GradientMethod::Autodiff.available_for("ncp_fb"));
        assert!(GradientMethod::Autodiff.batched() && !GradientMethod::Adjoint.batched());
        assert!(GradientMethod::AdjointBatched.batched());
        assert!(GradientMethod::AdjointBatched.available_for("ncp_fb"));
        assert!(!GradientMethod::AdjointBatched.available_for("soft_convex"));
    }
}
