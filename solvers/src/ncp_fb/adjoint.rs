//! The adjoint of an `ncp_fb` rollout: gradients of a scalar loss of the states with respect
//! to the initial state, every control and named model parameters, by one backward sweep
//! (spec `ncp_fb_and_penalty.md` §2.6, eqs. (14)–(19), with the corrections of §7.6).
//!
//! # The step map and its derivative
//!
//! One step maps `x = (q⁻, v⁻, ctrl, θ)` to `(q⁺, u)` through the converged solution of
//! `G(u, p; x) = 0`, with `G = [u − y(x, p); r_c(J(x) u, p; d(x))]`, `y = u_free + M⁻¹Jᵀp` the
//! dynamics row (R1) and `r_c` the constraint rows ([`super::residual`]) whose data
//! `d = (gaps, inverse weights, μ, servo terms, compliances)` come from the assembly at q⁻, and
//! `q⁺ = integrate(q⁻, u, h)`. Implicit differentiation (spec eq. (14)–(17)): with
//! `ḡ_u = ∂L/∂u + (∂q⁺/∂u)ᵀ ∂L/∂q⁺`, solve `G_zᵀ w = (ḡ_u, 0)`, which after eliminating the
//! dynamics rows (spec eq. (18)–(19)) is
//!
//! `Aᵀ w_p = Bᵀ ḡ_u`,  `A = R_v J B + R_p`,  `B = M⁻¹Jᵀ`,  `w_u = ḡ_u − Jᵀ R_vᵀ w_p`,
//!
//! and `dL/dx = (∂q⁺/∂q⁻)ᵀ ∂L/∂q⁺ − wᵀ ∂G/∂x`. [`Mode::Exact`] uses the exact Jacobian of the
//! converged residual, including ∂W/∂(v, p_n, p_f) and the FB partials, without the Newton-only
//! regularization (§7.6): it is non-symmetric, and is solved directly, which is exact where
//! per-contact block elimination or a Krylov method would be approximations of the same system.
//! Statically indeterminate contacts make A singular (sticking line contacts: the natural map's
//! sticking rows are the Delassus rows `J_f M⁻¹ Jᵀ`, whose internal-force directions are null;
//! impulses are not unique, the velocity is): the transposed system is then consistent (its
//! right-hand side `Bᵀ ḡ_u` is orthogonal to the internal-force directions, which move no dof)
//! and any solution gives the same `w_u`; the minimum-norm one (SVD, singular values below
//! 1e-12 σ_max dropped) also keeps the impulse multipliers `w_p` free of arbitrary
//! internal-force components, which the parameter terms `−R_vᵀ w_p`, `−R_dᵀ w_p` would carry.
//! Every step is solved so (backward stable, like LU, where A is regular). A step whose
//! system has no finite solution contributes nothing and is counted in
//! [`Gradient::failed_solves`]. [`Mode::Lagged`] is the
//! approximation of spec §2.6: W and the friction row scale frozen (`∂r_f/∂p_n = 0`), the
//! Newton-only regularization kept in A; it is offered so that its error can be reported.
//!
//! `∂G/∂x` is chained through the assembly: `−wᵀ ∂G/∂x = c · ∂S/∂x` with
//! `S = (y, J u, d)` at the fixed converged `(u, p)` and `c = (w_u, −R_vᵀ w_p, −R_dᵀ w_p)`,
//! where `R_v = ∂r_c/∂(Ju)` and `R_d = ∂r_c/∂d` are analytic ([`super::residual::Problem::linearize`]: every
//! non-smooth function of the formulation, FB and W, is differentiated analytically). The
//! assembly `S(x)` itself — mass matrix, bias forces, actuators, contact points, normals and
//! gaps from collision at q⁻, lever arms — is smooth for a fixed contact set, and its
//! directional derivatives along each input are taken by central differences (step
//! [`ASSEMBLY_STEP`] relative, error ~1e-10 relative), as is `∂q⁺/∂(q⁻, u)` of the position
//! integrator. The differences are taken per row block (`block_terms`). Where a perturbation
//! changes the contact set (a contact crossing the detection distance), or a merged line
//! contact's deepest end (the branch of its gap's minimum, [`crate::collision::LineEnds`]), the
//! one-sided difference on the side that keeps it is used and counted in
//! [`Gradient::one_sided`]; where neither side keeps it the term is dropped and counted in
//! [`Gradient::dropped`]. Across a tie both sides count, less the ends' gap offset
//! (`tie_offset`), which leaves the ends' mean slope. The active set is otherwise the forward
//! solution's (spec §2.6).
//!
//! # Through box_traversal's box crossing (issue 13): what the measurements show
//!
//! Measured with `scenarios/examples/crossing_diag.rs` on the nominal instance, h = 50 ms,
//! the knots of `scenarios/tests/ncp_fb_crossing_gradient.rs` (120 steps; the wheels meet the
//! box at step 27, the rear wheel leaves it at step 76).
//!
//! 1. **The wheel–box contact geometry was not a function of the pose (fixed).** parry's
//!    cylinder–box manifolds (GJK plus feature clipping, see [`crate::collision::cylinder_box`])
//!    changed under perturbations of the chassis x as small as 1e-10 m: the number of
//!    wheel–box points (1 to 3 per wheel, the GJK point merged or not) changed within
//!    δ ≤ 1e-4 m at 14 of the 77 steps with a wheel–box contact, points jumped along the tread
//!    (|Δpoint|/2δ up to 1e8, a jump of the whole 0.1 m tread), and the normals' difference
//!    quotients grew like 1/δ (|Δn|/2δ = 1.4e4 at δ = 1e-10: noise ~3e-6). The assembly's
//!    central differences ([`ASSEMBLY_STEP`]) then differentiated noise and dropped inputs
//!    whose perturbation changed the point count: exact adjoint entries of 1e7–1e8 for the
//!    knots before and during the crossing. With the closed-form cylinder–box contact (two
//!    points per wheel, [`crate::collision::cylinder_box`]) the same quotients agree to 5
//!    digits from δ = 1e-4 to 1e-10 at every step and the point count never changes; the
//!    crossing gradient's exact adjoint went from max relative error 1.00, cosine 0.15 to
//!    0.83, 0.90 against FD with the default solver, and 0.17, 0.9987 with the tight solver
//!    (`TIGHT_NCP_FB`: FD at δ = 1e-3 within 1–4 % of the adjoint on every knot).
//! 2. **The step map has kinks where sticking contacts are overdetermined (a property of the
//!    discrete dynamics, not of the adjoint).** With the three wheels' six points all
//!    sticking (steps 42–56: front wheels on the box top, rear on the ground), A has 10
//!    singular values below 2e-15 σ_max (internal forces: 4 exactly zero among the sticking
//!    friction rows, 6 from the normal rows, fixed only by the FB smoothing) and the others
//!    above 2e-3 σ_max. A perturbation of the chassis roll (q[4]) moves the linearized system's
//!    right-hand side out of the range of A: at step 56 the min-norm least-squares solution of
//!    the forward sensitivity `A dp = rhs` leaves a relative residual of 1.5e-2 (components
//!    up to 0.34 along left-null vectors): no sticking response exists, and the solver's
//!    answer lets contacts slide, differently for each sign. The one-sided derivatives of the
//!    step map differ and are stable from δ = 1e-5 to 1e-7: d(rear wheel rate)/dq[4] = −0.854
//!    forward, +0.468 backward (central FD −0.193; the adjoint's min-norm element 4e-9);
//!    d(left front wheel rate)/dq[4] = 5.59 vs 4.14 (adjoint 4.95). So the one-step Jacobian
//!    does not exist at those states, for the roll and yaw inputs; the exact adjoint returns
//!    one element of the generalized Jacobian (min-norm multipliers), central FD the average
//!    of the one-sided slopes.
//! 3. **Finite differences of the whole rollout still do not settle below δ ≈ 1e-4** (rad/s on a
//!    knot) for the knots before and during the crossing: with the tight solver the final x
//!    moves by ~1e-5 m under knot perturbations of 1e-7 (difference quotients of ±100), while
//!    knots after the crossing agree with the adjoint to 5 digits at every δ. The kinks of
//!    item 2 bound the quotients by the Lipschitz constant, so these jumps come from elsewhere:
//!    the forward solves that end unconverged in the perturbed rollouts (3 of 120 steps
//!    unconverged at the nominal knots with `TIGHT_NCP_FB`) were the remaining candidate.
//!    Measured since (`scenarios/examples/crossing_branch.rs`, default solver, every step of
//!    both perturbed rollouts converged): the jump comes from one step, 73 (t = 3.65 s), where
//!    the two rollouts, whose states differ by ~3e-7 going in, return two different converged
//!    solutions (knot 3 ± 1e-7: impulse norms 25.45 and 19.88 N s, residuals 1.9e-11 and
//!    1.3e-11 m/s, after 36 and 61 Newton iterations; the second from the best iterate of pass
//!    1, iteration 1), so the state quotient jumps from 2.2e-1 to 5.5e3 (velocity) at that
//!    step; knots 9 and 15 jump at the same step. The step map is therefore not single-valued
//!    there: the NCP has more than one solution near those data (several contacts with
//!    friction), and which one the solver returns depends on its path. No derivative, exact or
//!    finite-difference, describes such a step; making the forward solution unique (a
//!    selection such as the minimum-norm or maximal-dissipation impulse, or a strictly convex
//!    regularization the adjoint then differentiates) was the next step.
//! 4. **Resolved by one contact point per wheel and surface** (`Geom::line_contact_as_point`,
//!    set on the robot's wheels): the robot becomes a tripod, its sticking contacts are
//!    statically determinate, the step-73 jump is gone (state quotients stay below 2 at every
//!    step), and the crossing test (`scenarios/tests/ncp_fb_crossing_gradient.rs`) passes:
//!    exact adjoint against FD 3.6e-5 relative, cosine 0.99999999989 at 50 ms; 4.0e-6 at
//!    20 ms. Final x changes by less than 1 mm on the nominal run.
//!
//! # Memory
//!
//! The forward pass stores, per step, q⁻, v⁻, the controls, the converged impulses and
//! velocity and the solver's summary in flat arrays ([`Rollout`]): O(nq + nv + nu + nλ) per
//! step, nothing per Newton iteration, no per-step heap allocation. The backward
//! pass re-assembles each step at its stored state (deterministic, so the contact set is the
//! forward one).

use nalgebra::{DMatrix, DVector};

use super::residual::Friction;
use super::{Assembly, NcpFb};
use crate::dynamics::integrate_positions;
use crate::model::{ActuatorKind, Model, State};

/// Relative step of the central differences of the smooth assembly (see the module doc).
pub const ASSEMBLY_STEP: f64 = 1e-6;

/// Which transposed system the backward pass solves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The exact derivative of the converged step map (spec §7.6).
    Exact,
    /// W frozen and the Newton-only regularization kept (spec §2.6), an approximation.
    Lagged,
}

/// A model parameter the gradient is taken with respect to.
#[derive(Debug, Clone, PartialEq)]
pub enum Parameter {
    /// The sliding friction coefficient of every geom and explicit pair (so every contact's
    /// mixed μ equals it), `friction[0]` (-).
    Friction,
    /// The position gain k_p of a position servo, by actuator index (N/m or N m/rad).
    ServoKp(usize),
    /// The velocity gain k_v of a servo, by actuator index (N s/m or N m s/rad).
    ServoKv(usize),
    /// The mass of a body, by body index (kg); its inertia is left unchanged. It enters the
    /// assembly through the mass matrix, the bias forces and the inverse weights.
    Mass(usize),
}

impl Parameter {
    /// Parse `friction`, `kp:<actuator>`, `kv:<actuator>` (actuator by name) or `mass:<body>`.
    ///
    /// # Errors
    /// An unknown form or actuator name, naming the valid ones.
    pub fn parse(model: &Model, s: &str) -> Result<Self, String> {
        if s == "friction" {
            return Ok(Parameter::Friction);
        }
        let actuator = |name: &str| {
            model
                .actuators
                .iter()
                .position(|a| a.name == name)
                .ok_or_else(|| {
                    let names: Vec<_> = model.actuators.iter().map(|a| a.name.as_str()).collect();
                    format!("no actuator '{name}' (actuators: {})", names.join(", "))
                })
        };
        match s.split_once(':') {
            Some(("kp", name)) => Ok(Parameter::ServoKp(actuator(name)?)),
            Some(("kv", name)) => Ok(Parameter::ServoKv(actuator(name)?)),
            Some(("mass", name)) => model
                .bodies
                .iter()
                .position(|b| b.name == name)
                .filter(|&b| b > 0)
                .map(Parameter::Mass)
                .ok_or_else(|| format!("no body '{name}'")),
            _ => Err(format!(
                "unknown parameter '{s}': use friction, kp:<actuator>, kv:<actuator> or mass:<body>"
            )),
        }
    }

    /// The parameter's value in `model` (for `Friction`, the first geom's).
    pub fn get(&self, model: &Model) -> f64 {
        match *self {
            Parameter::Friction => model.geoms.first().map_or(0.0, |g| g.material.friction[0]),
            Parameter::ServoKp(i) => match model.actuators[i].kind {
                ActuatorKind::PositionServo { kp, .. } => kp,
                _ => 0.0,
            },
            Parameter::ServoKv(i) => match model.actuators[i].kind {
                ActuatorKind::PositionServo { kv, .. } | ActuatorKind::VelocityServo { kv } => kv,
                ActuatorKind::Motor => 0.0,
            },
            Parameter::Mass(b) => model.bodies[b].mass,
        }
    }

    /// Set the parameter in `model`.
    pub fn set(&self, model: &mut Model, value: f64) {
        match *self {
            Parameter::Friction => {
                for g in &mut model.geoms {
                    g.material.friction[0] = value;
                }
                for p in &mut model.pairs {
                    p.friction[0] = value;
                    p.friction[1] = value;
                }
            }
            Parameter::ServoKp(i) => {
                if let ActuatorKind::PositionServo { kp, .. } = &mut model.actuators[i].kind {
                    *kp = value;
                }
            }
            Parameter::ServoKv(i) => match &mut model.actuators[i].kind {
                ActuatorKind::PositionServo { kv, .. } | ActuatorKind::VelocityServo { kv } => {
                    *kv = value
                }
                ActuatorKind::Motor => {}
            },
            Parameter::Mass(b) => model.bodies[b].mass = value,
        }
    }
}

/// One step of the tape, unpacked ([`Rollout::step`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TapeStep {
    /// Positions before the step (nq).
    pub q: DVector<f64>,
    /// Velocities before the step (nv).
    pub v: DVector<f64>,
    /// Controls of the step (one per actuator).
    pub ctrl: Vec<f64>,
    /// Converged impulses (nλ, N s).
    pub p: DVector<f64>,
    /// Velocity after the step (nv).
    pub u: DVector<f64>,
}

/// A rollout with its tape: per step q⁻, v⁻, the controls, the converged impulses and
/// velocity, and the solver's summary, stored in flat arrays (no per-step allocation, nothing
/// per Newton iteration).
#[derive(Debug, Clone)]
pub struct Rollout {
    /// Time step (s).
    pub h: f64,
    nq: usize,
    nv: usize,
    nu: usize,
    q: Vec<f64>,
    v: Vec<f64>,
    ctrl: Vec<f64>,
    u: Vec<f64>,
    p: Vec<f64>,
    p_start: Vec<usize>,
    /// Newton iterations of each step.
    pub iterations: Vec<usize>,
    /// Residual max-norm of each step's returned iterate (m/s).
    pub residuals: Vec<f64>,
    /// Whether each step met its stopping test.
    pub converged: Vec<bool>,
    last: State,
}

impl Rollout {
    /// Number of steps N taken.
    pub fn len(&self) -> usize {
        self.p_start.len()
    }

    /// True if no step was taken.
    pub fn is_empty(&self) -> bool {
        self.p_start.is_empty()
    }

    /// Steps that ended unconverged.
    pub fn unconverged(&self) -> usize {
        self.converged.iter().filter(|c| !**c).count()
    }

    /// State k (0 ≤ k ≤ N; t = k h).
    pub fn state(&self, k: usize) -> State {
        if k == self.len() {
            return self.last.clone();
        }
        State {
            q: DVector::from_column_slice(&self.q[k * self.nq..(k + 1) * self.nq]),
            v: DVector::from_column_slice(&self.v[k * self.nv..(k + 1) * self.nv]),
            t: self.last.t - (self.len() - k) as f64 * self.h,
        }
    }

    /// The final state x_N.
    pub fn final_state(&self) -> &State {
        &self.last
    }

    /// Step k of the tape (0 ≤ k < N).
    pub fn step(&self, k: usize) -> TapeStep {
        let end = self.p_start.get(k + 1).copied().unwrap_or(self.p.len());
        TapeStep {
            q: DVector::from_column_slice(&self.q[k * self.nq..(k + 1) * self.nq]),
            v: DVector::from_column_slice(&self.v[k * self.nv..(k + 1) * self.nv]),
            ctrl: self.ctrl[k * self.nu..(k + 1) * self.nu].to_vec(),
            p: DVector::from_column_slice(&self.p[self.p_start[k]..end]),
            u: DVector::from_column_slice(&self.u[k * self.nv..(k + 1) * self.nv]),
        }
    }
}

/// Gradients of the loss.
#[derive(Debug, Clone, PartialEq)]
pub struct Gradient {
    /// dL/dq₀ (nq; raw coordinates, quaternions included).
    pub q0: DVector<f64>,
    /// dL/dv₀ (nv).
    pub v0: DVector<f64>,
    /// dL/dctrl_k for each step (N × n_actuators).
    pub controls: Vec<DVector<f64>>,
    /// dL/dθ for each requested parameter.
    pub params: Vec<f64>,
    /// Assembly derivatives, per (input, row block), taken one-sided because one perturbation
    /// changed the contact set or the block's line-contact branch.
    pub one_sided: usize,
    /// Assembly derivatives, per (input, row block), dropped because both perturbations did.
    pub dropped: usize,
    /// Forward steps the sweep went through that had not converged: there the implicit
    /// function theorem does not apply and the gradient is not a derivative.
    pub unconverged_steps: usize,
    /// Steps whose transposed system had no finite solution (module doc): their terms are
    /// missing and the gradient is not a derivative.
    pub failed_solves: usize,
}

/// Run `n` steps from `initial` with `controls[k]` at step k (missing steps: zero controls),
/// keeping the tape. A diverged step ends the rollout early.
pub fn rollout(
    f: &mut NcpFb,
    model: &Model,
    initial: &State,
    controls: &[Vec<f64>],
    n: usize,
    h: f64,
) -> Rollout {
    let (nq, nv, nu) = (model.nq, model.nv, model.actuators.len());
    let mut out = Rollout {
        h,
        nq,
        nv,
        nu,
        q: Vec::with_capacity(n * nq),
        v: Vec::with_capacity(n * nv),
        ctrl: Vec::with_capacity(n * nu),
        u: Vec::with_capacity(n * nv),
        p: Vec::new(),
        p_start: Vec::with_capacity(n),
        iterations: Vec::with_capacity(n),
        residuals: Vec::with_capacity(n),
        converged: Vec::with_capacity(n),
        last: initial.clone(),
    };
    let mut s = initial.clone();
    let zero = vec![0.0; nu];
    for k in 0..n {
        let ctrl = controls.get(k).unwrap_or(&zero);
        let (q, v) = (s.q.clone(), s.v.clone());
        let (report, detail) = f.step_detail(model, &mut s, ctrl, h);
        let Some(detail) = detail else { break };
        out.q.extend(q.iter());
        out.v.extend(v.iter());
        out.ctrl
            .extend((0..nu).map(|i| ctrl.get(i).copied().unwrap_or(0.0)));
        out.u.extend(detail.solution.u.iter());
        out.p_start.push(out.p.len());
        out.p.extend(detail.solution.p.iter());
        out.iterations.push(report.iterations);
        out.residuals.push(report.residual);
        out.converged.push(report.converged);
        out.last = s.clone();
        if report.diverged.is_some() {
            break;
        }
    }
    out
}

/// The inputs of one step, flattened: (q⁻, v⁻, ctrl, θ).
struct StepInputs<'a> {
    model: &'a Model,
    step: &'a TapeStep,
    params: &'a [Parameter],
}

impl StepInputs<'_> {
    fn len(&self) -> usize {
        self.model.nq + self.model.nv + self.step.ctrl.len() + self.params.len()
    }

    /// Value of input i and the assembly with input i moved by `delta`.
    fn value(&self, i: usize) -> f64 {
        let (nq, nv, nu) = (self.model.nq, self.model.nv, self.step.ctrl.len());
        if i < nq {
            self.step.q[i]
        } else if i < nq + nv {
            self.step.v[i - nq]
        } else if i < nq + nv + nu {
            self.step.ctrl[i - nq - nv]
        } else {
            self.params[i - nq - nv - nu].get(self.model)
        }
    }

    fn assemble(&self, f: &NcpFb, i: usize, delta: f64, h: f64) -> Result<Assembly, String> {
        let (nq, nv, nu) = (self.model.nq, self.model.nv, self.step.ctrl.len());
        let (mut q, mut v, mut ctrl) = (
            self.step.q.clone(),
            self.step.v.clone(),
            self.step.ctrl.clone(),
        );
        if i < nq {
            q[i] += delta;
        } else if i < nq + nv {
            v[i - nq] += delta;
        } else if i < nq + nv + nu {
            ctrl[i - nq - nv] += delta;
        } else {
            let par = &self.params[i - nq - nv - nu];
            let mut model = self.model.clone();
            par.set(&mut model, par.get(self.model) + delta);
            return f.assemble(&model, &q, &v, &ctrl, h, 0.0);
        }
        f.assemble(self.model, &q, &v, &ctrl, h, 0.0)
    }
}

/// One side of an input's difference: the block terms ([`block_terms`]) and the blocks' line
/// ends ([`Assembly::block_line_ends`]).
struct Side {
    terms: Vec<f64>,
    ends: Vec<Option<crate::collision::LineEnds>>,
}

/// The correction of a merged line contact's central difference across a tie: where the
/// forward's ends tie (`reference`, within [`crate::collision::LINE_TIE_GAP`]) and the two sides
/// take different ends, the difference of the merged gap (the ends' minimum) is
/// `(g_A(x + d) − g_B(x − d)) / 2d`, the mean of the two ends' slopes plus or minus
/// `spread / 2d`, `spread` the ends' gap difference at the forward (below the tie tolerance but
/// not zero). The returned term, `gap_c` (the cotangent of the gap) times that offset with the
/// opposite sign, leaves the ends' mean slope, the derivative the batched engine takes at ties
/// (`batched::wheel`); 0 where the sides take one end or the forward does not tie.
fn tie_offset(
    reference: Option<crate::collision::LineEnds>,
    plus: Option<crate::collision::LineEnds>,
    minus: Option<crate::collision::LineEnds>,
    gap_c: f64,
    d: f64,
) -> f64 {
    let (Some(r), Some(p), Some(m)) = (reference, plus, minus) else {
        return 0.0;
    };
    if !r.tied() || p.deepest == m.deepest {
        return 0.0;
    }
    let offset = gap_c * r.spread / (2.0 * d);
    if p.deepest == r.deepest {
        offset
    } else if m.deepest == r.deepest {
        -offset
    } else {
        0.0
    }
}

/// Per entry of [`block_terms`]: the cotangent of the block's gap (`c` at the contact's first
/// data entry), 0 for entry 0 and blocks that are not contacts.
fn gap_cotangents(asm: &Assembly, c: &DVector<f64>) -> Vec<f64> {
    let pb = &asm.problem;
    let mut data_at = pb.u_free.len() + pb.nl();
    let mut out = vec![0.0];
    for b in &pb.blocks {
        out.push(match b {
            super::residual::Block::Contact { .. } => c[data_at],
            _ => 0.0,
        });
        data_at += b.data_len();
    }
    out
}

/// The smooth outputs `S = (y, J u, d)` of an assembly at the fixed converged `(u, p)`,
/// contracted with the cotangent `c` (module doc) and split by what they depend on: entry 0
/// the unconstrained velocity's term `c_y · u_free`, then one entry per block `b`,
/// `c_y · (M⁻¹J_bᵀ p_b) + c_{J,b} · (J_b u) + c_{d,b} · d_b` (its rows and data). The split
/// lets the differences of each block keep to the side on which its contact keeps the forward's
/// branch ([`crate::collision::LineEnds`]), independently of the other blocks.
fn block_terms(asm: &Assembly, u: &DVector<f64>, p: &DVector<f64>, c: &DVector<f64>) -> Vec<f64> {
    let pb = &asm.problem;
    let nv = pb.u_free.len();
    let nl = pb.nl();
    let cy = c.rows(0, nv);
    let mut out = Vec::with_capacity(pb.blocks.len() + 1);
    out.push(cy.dot(&pb.u_free));
    let mut data_at = nv + nl;
    for b in &pb.blocks {
        let (r0, nr) = (b.row(), b.rows());
        let by = &pb.minv_jt.columns(r0, nr) * p.rows(r0, nr);
        let ju = pb.j.rows(r0, nr) * u;
        let data = b.data();
        let mut t = cy.dot(&by) + c.rows(nv + r0, nr).dot(&ju);
        t += data
            .iter()
            .enumerate()
            .map(|(k, x)| c[data_at + k] * x)
            .sum::<f64>();
        data_at += data.len();
        out.push(t);
    }
    out
}

/// VJP of `q⁺ = integrate(q⁻, u, h)` by central differences: `((∂q⁺/∂q⁻)ᵀ g, (∂q⁺/∂u)ᵀ g)`.
fn integrate_vjp(
    model: &Model,
    q: &DVector<f64>,
    u: &DVector<f64>,
    h: f64,
    g: &DVector<f64>,
) -> (DVector<f64>, DVector<f64>) {
    let integ = |q: &DVector<f64>, u: &DVector<f64>| {
        let mut out = q.clone();
        integrate_positions(model, &mut out, u, h);
        out
    };
    let dq = DVector::from_fn(model.nq, |i, _| {
        let d = ASSEMBLY_STEP * q[i].abs().max(1.0);
        let (mut qp, mut qm) = (q.clone(), q.clone());
        qp[i] += d;
        qm[i] -= d;
        g.dot(&(integ(&qp, u) - integ(&qm, u))) / (2.0 * d)
    });
    let du = DVector::from_fn(model.nv, |i, _| {
        let d = ASSEMBLY_STEP * u[i].abs().max(1.0);
        let (mut up, mut um) = (u.clone(), u.clone());
        up[i] += d;
        um[i] -= d;
        g.dot(&(integ(q, &up) - integ(q, &um))) / (2.0 * d)
    });
    (dq, du)
}

/// Solve `Aᵀ x = b` densely (LU, full pivoting as fallback).
/// Solve `Aᵀ x = b` (module doc): the minimum-norm least-squares solution by SVD (singular
/// values below 1e-12 σ_max dropped); `None` if it is not finite.
fn solve_transposed(a: &DMatrix<f64>, b: &DVector<f64>) -> Option<DVector<f64>> {
    let svd = a.transpose().svd(true, true);
    let smax = svd.singular_values.max();
    svd.solve(b, 1e-12 * smax)
        .ok()
        .filter(|x| x.iter().all(|v| v.is_finite()))
}

/// One backward sweep over `rollout` for the loss whose partials with respect to state k
/// (k = 0…N) are `state_grad(k, &states[k]) = (∂L/∂q_k, ∂L/∂v_k)`. A loss term on the
/// controls adds its own partials to [`Gradient::controls`]. `params` are the model parameters
/// to differentiate with respect to (values as in `model`).
pub fn backward(
    f: &NcpFb,
    model: &Model,
    rollout: &Rollout,
    params: &[Parameter],
    mode: Mode,
    state_grad: &dyn Fn(usize, &State) -> (DVector<f64>, DVector<f64>),
) -> Gradient {
    let h = rollout.h;
    let n = rollout.len();
    let (mut gq, mut gv) = state_grad(n, rollout.final_state());
    let mut out = Gradient {
        q0: DVector::zeros(model.nq),
        v0: DVector::zeros(model.nv),
        controls: vec![DVector::zeros(model.actuators.len()); n],
        params: vec![0.0; params.len()],
        one_sided: 0,
        dropped: 0,
        unconverged_steps: rollout.unconverged(),
        failed_solves: 0,
    };
    for k in (0..n).rev() {
        let step = &rollout.step(k);
        let (dq_direct, du) = integrate_vjp(model, &step.q, &step.u, h, &gq);
        let g_u = &gv + du;
        let Ok(asm) = f.assemble(model, &step.q, &step.v, &step.ctrl, h, 0.0) else {
            break;
        };
        let pb = &asm.problem;
        let (u, p) = (&step.u, &step.p);
        let (nv, nl) = (model.nv, pb.nl());
        // The transposed system (module doc).
        let (w_u, c) = if nl == 0 {
            (g_u.clone(), DVector::zeros(0))
        } else {
            let friction = match mode {
                Mode::Exact => Friction::Exact,
                Mode::Lagged => Friction::Lagged,
            };
            let lin = pb.linearize(u, p, friction);
            let jb = &pb.j * &pb.minv_jt;
            let mut a = &lin.r_vel * &jb + &lin.r_p;
            if mode == Mode::Lagged {
                let reg =
                    pb.regularization(f.params.regularization, f.params.friction_regularization);
                for i in 0..nl {
                    a[(i, i)] += reg[i];
                }
            }
            let w_p = match solve_transposed(&a, &(pb.minv_jt.transpose() * &g_u)) {
                Some(w) => w,
                None => {
                    out.failed_solves += 1;
                    DVector::zeros(nl)
                }
            };
            let rv_w = lin.r_vel.transpose() * &w_p;
            let w_u = &g_u - pb.j.transpose() * &rv_w;
            let rd_w = lin.r_data.transpose() * &w_p;
            let mut c = DVector::zeros(nv + nl + rd_w.len());
            c.rows_mut(0, nv).copy_from(&w_u);
            c.rows_mut(nv, nl).copy_from(&(-rv_w));
            c.rows_mut(nv + nl, rd_w.len()).copy_from(&(-rd_w));
            (w_u, c)
        };
        // dL/dx_i = direct + c · ∂S/∂x_i (S = (y, Ju, d)); with no rows S = y = u_free.
        let inputs = StepInputs {
            model,
            step,
            params,
        };
        let c_full = if nl == 0 { w_u.clone() } else { c };
        let t0 = block_terms(&asm, u, p, &c_full);
        let (ref_ends, gap_c) = (asm.block_line_ends(), gap_cotangents(&asm, &c_full));
        let mut grad = DVector::zeros(inputs.len());
        for i in 0..inputs.len() {
            let d = ASSEMBLY_STEP * inputs.value(i).abs().max(1.0);
            // Each side's terms and line ends; a block's side counts where it keeps the
            // forward's branch.
            let side = |sign: f64| {
                inputs
                    .assemble(f, i, sign * d, h)
                    .ok()
                    .filter(|a| a.same_structure_apart_from_line_ends(&asm))
                    .map(|a| Side {
                        terms: block_terms(&a, u, p, &c_full),
                        ends: a.block_line_ends(),
                    })
            };
            let (plus, minus) = (side(1.0), side(-1.0));
            let mut g = 0.0;
            for b in 0..t0.len() {
                let kept = |s: &Option<Side>| {
                    s.as_ref()
                        .filter(|s| crate::collision::LineEnds::kept(ref_ends[b], s.ends[b]))
                        .map(|s| s.terms[b])
                };
                g += match (kept(&plus), kept(&minus)) {
                    (Some(tp), Some(tm)) => {
                        let ends = |s: &Option<Side>| s.as_ref().and_then(|s| s.ends[b]);
                        (tp - tm) / (2.0 * d)
                            + tie_offset(ref_ends[b], ends(&plus), ends(&minus), gap_c[b], d)
                    }
                    (Some(tp), None) => {
                        out.one_sided += 1;
                        (tp - t0[b]) / d
                    }
                    (None, Some(tm)) => {
                        out.one_sided += 1;
                        (t0[b] - tm) / d
                    }
                    (None, None) => {
                        out.dropped += 1;
                        0.0
                    }
                };
            }
            grad[i] = g;
        }
        let (nq, nu) = (model.nq, step.ctrl.len());
        gq = dq_direct + grad.rows(0, nq);
        gv = grad.rows(nq, nv).into_owned();
        out.controls[k] = grad.rows(nq + nv, nu).into_owned();
        for (j, g) in out.params.iter_mut().enumerate() {
            *g += grad[nq + nv + nu + j];
        }
        let (lq, lv) = state_grad(k, &rollout.state(k));
        gq += lq;
        gv += lv;
    }
    out.q0 = gq;
    out.v0 = gv;
    out
}
