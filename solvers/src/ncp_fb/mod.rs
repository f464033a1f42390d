//! `ncp_fb`: hard contact as a nonlinear complementarity problem, solved by Newton's method on
//! Fischer–Burmeister residuals, with friction from maximal dissipation (Macklin et al. 2019 as
//! used by the Ostrich paper, Kučera & Zimmermann, arXiv:2609.08800; spec
//! `ncp_fb_and_penalty.md` §1–2, with the corrections of §7, which override §1–2).
//!
//! # Coordinates and integrator
//!
//! contactlab works in **generalized coordinates** (MuJoCo's), not the paper's maximal
//! coordinates: the unknown velocity is qvel `u` (nv), joints are exact (no bilateral joint
//! rows and no joint compliance: a hinge cannot drift apart, and the same model and state are
//! shared with every other formulation, so their trajectories compare coordinate by
//! coordinate), and positions follow `q⁺ = integrate(q⁻, u⁺, h)` (the generalized form of spec
//! eq. (1), quaternions renormalized). Gravity, Coriolis and passive forces are explicit at
//! (q⁻, u⁻) (spec §2.1); the constraint functions are evaluated at q⁺ through their
//! linearization with the rows held at q⁻ (contact points attached to their bodies at the start
//! of the step, so the gaps move with q⁺: `c = gap⁻ + h J u`, spec §2.3).
//!
//! Per step: collide **once** at q⁻ (spec §2.3), with the detection distance widened by
//! `detection_margin` (0.01 m) so that resting contacts (whose FB gap is slightly positive) get
//! rows, and by each pair's closing bound within the step so that contacts closing within it
//! get rows too ([`speculative`]); build the rows at q⁻ in this order: equality
//! rows, servo rows, every joint-limit row (all limited joints, so a limit cannot be stepped
//! over), and per contact the normal and, for condim ≥ 3, the two tangents of the frame
//! (n, t1, t2) (torsional and rolling rows are not modelled: condim 4 and 6 act as 3). Smooth
//! forces `f_s = passive − bias + motors` at (q⁻, u⁻) ([`NcpFb::assemble`]).
//!
//! # Degenerate rows
//!
//! A contact row whose Jacobian is zero (max-norm below [`ZERO_ROW`]) is one that no dof can
//! move: its inverse weight is 0, its impulse acts on nothing, and its residual row is constant
//! in `u` and (through w = 0) in `p`. Such rows made the Schur complement singular: two pads on
//! slide joints along x, 8 mm apart around a pinched capsule, are a contact within the 1 cm
//! detection margin whose normal is x and whose tangents (y, z) no slide can move: w_t = 0, the
//! friction rows are `w_t p_f = 0` at p = 0 (and σ = w_t/(w_t + W) = 0/0 once μ p_n > 0), so the
//! first Newton direction was non-finite on every step, Newton made 0 iterations, the zero
//! impulses let the capsule fall 44 m in 3 s (issue #12). So a contact's friction rows are
//! dropped when both tangent rows are zero (the contact is frictionless: no tangential impulse
//! could act), and a contact whose normal row is zero gets no rows at all (and no record: it
//! cannot exert force). This changes nothing physical.
//!
//! # Impulses
//!
//! The constraint unknowns are **impulses** `p = h λ` (N s, N m s for rotational limits). The
//! residual rows (all velocities, m/s or rad/s):
//!
//! * (R1) dynamics, spec eq. (2)/(10) divided by M: `u − u_free − M⁻¹ Jᵀ p = 0`,
//!   `u_free = u⁻ + h M⁻¹ f_s`. The solver eliminates it exactly: `u(p) = u_free + M⁻¹Jᵀp`.
//! * (R2) normal, spec eq. (4) with §1.2: `r_n = φ_ε(c_n, h w_n p_n) / h`, where
//!   `c_n = gap⁻ + h J_n u` is the gap at q⁺ linearized with the normal and lever arms held at
//!   q⁻ (§2.3; gap⁻ is the collision gap minus the contact margin), and `h w_n p_n = κ_n λ_n`
//!   with `κ_n = h² w_n`, `w_n = J_n M⁻¹ J_nᵀ`: both FB arguments are lengths.
//!   `φ_ε(a, b) = a + b − √(a² + b² + ε²)` (§1.1) with ε a **length** (`fb_smoothing`, 1e-8 m),
//!   so the resting gap `ε² / (2 h² w_n λ_n)` is dimensionally consistent and far below 1e-6 m
//!   at every h (§7.1): 5e-12 m for the 1 kg cube's corner at h = 1 ms.
//! * (R3) friction: the Coulomb cone with maximal dissipation (spec eq. (5)–(7)), by one of
//!   two complementarity functions with the same roots (`friction_residual`, section
//!   "Friction rows" below): the **natural map** of the friction disk (the default) or the
//!   paper's **maximal-dissipation weight** W.
//! * (R4) joint limits: complementarity rows like (R2), `φ_ε(dist⁻ + h J u, h w p) / h`.
//! * (R5) servos (spec eq. (8), §2.4), one row `J u + α p + b` per position or velocity servo
//!   (`J = gear·e_dof`, p the actuator impulse h F): velocity servo α = gear/(h k_v),
//!   b = −gear ū (so F = k_v (ū − q̇⁺)); position servo α = gear/(h (k_v + h k_p)) with
//!   b = gear e(q⁻)/h in the paper's form (F = −(k_p + k_v/h) e(q⁺): k_v damps the per-step
//!   position error) or b = gear k_p e(q⁻)/(k_v + h k_p) as the true implicit PD
//!   (F = −k_p e(q⁺) − k_v q̇⁺), `servo_form` chooses; e = q − ū. A servo with a force range
//!   stays an explicit force (a saturating row would be a box-constrained complementarity row).
//!   Motors are explicit forces.
//! * (R6) equality constraints (MuJoCo connect, weld, joint coupling), compliant bilateral
//!   rows (spec eq. (3)): `c⁻/h + J u + E p/h²`, i.e. `(c(q⁺) + E λ)/h` with E the
//!   `compliance` parameter (m/N, rad/(N m)); a static load λ sags the constraint by E λ.
//!
//! # Friction rows
//!
//! **Natural map** (`friction_residual: natural_map`, the default; Alart & Curnier 1991,
//! *Comput. Methods Appl. Mech. Eng.* 92, 353–375, eq. (20); the natural map of a variational
//! inequality, Facchinei & Pang 2003, §1.5.2): with t = J_f u the tangential velocity after the
//! step, `y = t + ρ_f w_t p_f` (ρ_f = 0 outside the continuation) and the disk
//! D = {‖x‖ ≤ μ max(p_n, 0)},
//!
//! `r_f = w_t (p_f − Π_D(p_f − y / w_t))`   (velocity units; w_t = ½(w_t1 + w_t2)).
//!
//! r_f = 0 iff either y = 0 with ‖p_f‖ ≤ μ p_n (sticking, exact: no creep) or
//! p_f = μ p_n ẑ with ẑ ∝ p_f − y/w_t, i.e. p_f on the cone boundary and antiparallel to the
//! slip (maximal dissipation). It is defined on all of (u, p) and semismooth (piecewise smooth,
//! kinked on ‖z‖ = μ p_n), so Newton's iterates are **not projected** onto the cone: its exact
//! generalized Jacobian ([`residual::Problem::linearize`]) gives a descent direction of ‖r‖²
//! wherever the residual is differentiable. This is the fix of issue 13's stall (section
//! "Why Newton stalled" below, cause 2).
//!
//! **Maximal-dissipation weight** (`friction_residual: dissipation_weight`, the paper's form):
//! `r_f = σ (J_f u + W p_f)` with `W = k (S − k g) / (v + k μ p_n − S)`, `S = √(v² + k² g²)`, the
//! **unclamped** cone margin `g = μ p_n − ‖p_f‖` (§7.2), `k = w_t` (so both arguments of the
//! friction FB are velocities, §7.8 in impulses), and the slip speed smoothed in velocity
//! units, `v = √(‖J_f u‖² + ε_v²)` with `ε_v = friction_smoothing` (1e-6 m/s, §7.3), W clamped
//! to [0, 1e12 k]. The row scale `σ = k/(k + W) > 0` does not move the roots (spec eq. (7) has
//! σ = 1); it keeps the row continuous and well scaled as μ p_n → 0⁺, where W → ∞ and the row
//! tends to `k p_f`, the skipped row used when μ p_n = 0 (§7.8). Without it, a contact whose
//! impulse is tiny (a separated contact's smoothed FB root p_n ≈ ε²/(2 h w_n gap), or the
//! first iterates of an impact) has W ≈ v_t/(μ p_n) up to 1e11 and the residual jumps where
//! the row switches on, which stalled Newton on the spinning drop. At a root, sliding gives
//! p_f = −μ p_n v̂_t, sticking W ≈ 0 with a creep ≈ ε_v²/(2 k g). W is defined only for
//! ‖p_f‖ < 2 μ p_n, so these iterates are projected onto p_n ≥ 0, ‖p_f‖ ≤ μ p_n.
//!
//! # Solve
//!
//! Newton on the constraint residual after eliminating (R1) ([`solve`]): the Jacobian is exact,
//! including ∂W/∂(u, p_n, p_f), so it is non-symmetric; the Schur complement
//! `A = ∂r/∂u M⁻¹Jᵀ + ∂r/∂p` (spec eq. (12)) plus the Newton-only regularization
//! `reg_i·(J M⁻¹ Jᵀ)_ii` on its diagonal (`regularization` on normal, limit, servo and
//! equality rows, `friction_regularization` on friction rows) (matrix only, never the residual, §1.5) is solved densely
//! (LU, nalgebra) with `linear_solver: dense` (the default: exact Newton, the most robust).
//! `linear_solver: pcr` is the paper's method (§1.5–1.6, [`pcr`]): W frozen within the
//! iteration, the rows divided by their ∂r/∂v so the Schur complement is symmetric, applied
//! matrix-free and solved by preconditioned conjugate residuals (`pcr_iterations`, Jacobi or
//! block-Jacobi per body pair): an inexact Newton method, cheaper per iteration and slower to
//! converge.
//! Iterates start at p = 0 (§2.5); with the dissipation weight they are projected onto
//! p_n ≥ 0, ‖p_f‖ ≤ μ p_n (so W ≥ 0 and the cone hold on every stored iterate), with the
//! natural map they are not projected at all; both are globalized by backtracking on ‖r‖² (§7.4);
//! where the exact direction stalls (step below 1/32) the frozen-W direction is tried too and
//! the better trial kept (on box_traversal this cut the worst residual from 0.15 to 9e-3 m/s). The
//! best iterate (smallest residual, k + 1 ≥ k_min) is returned; the loop stops when the
//! residual max-norm is below `tolerance` or the NCP criterion (DESIGN.md, impulses, in its
//! position-level form [`residual::Problem::ncp_criterion`]: the normal velocity replaced by
//! the linearized gap after the step over h, which is the same where gap⁻ = 0) is below
//! `ncp_tolerance` with no penetration of the linearized gaps beyond `tolerance·h`, the
//! servo and equality rows below `tolerance` and the impulses inside the cone to `tolerance`
//! in velocity units ([`residual::Problem::cone_violation`]: the natural map's iterates are
//! not projected, and where the slip is tiny the NCP criterion cannot see a friction impulse
//! outside the cone) (§7.5: with coplanar sticking contacts ‖r‖ can plateau while the state is
//! exact). The NCP criterion of the test is measured from the smoothed root
//! ([`residual::Problem::ncp_criterion_smoothed`]: each row less ε²/(2h²w), the product the FB
//! smoothing leaves at its exact root, 7e-9 J over box_traversal's wheels at h = 1 ms, which
//! no step could get below a 1e-9 J tolerance); the reported `ncp` is the raw criterion. The
//! returned iterate is projected onto the cone at the end (see [`solve::solve`]).
//!
//! **Redundant contact points** ([`reduce`]): contacts of one geom pair whose points lie within
//! `merge_distance` (1e-4 m) with the same normal are merged (the one with the smallest gap is
//! kept) before the rows are built.
//!
//! **Continuation** ([`solve::solve`]): where Newton from p = 0 ends unconverged, the step is
//! solved again as a sequence of compliant problems, the normal rows reading
//! `φ_ε(gap + h (v_n + ρ w_n p_n), h w_n p_n)/h` and the friction rows
//! `σ (J_f u + (W + ρ w_t) p_f)`, with ρ from 1e-2 (raised ×100 up to 1e2 while the first
//! stage fails) down by a factor 100 per converged stage (square-rooted after a failed one),
//! intermediate stages solved to a residual of 1e-3 ρ m/s, each warm-started from the last
//! converged one, ending with the
//! rigid problem (ρ = 0) whose stopping test alone decides convergence (Tikhonov
//! regularization of the NCP, Facchinei & Pang 2003, §12.2). A step that converges from p = 0
//! takes exactly the previous path.
//!
//! # Why Newton stalled on box_traversal (issue 13)
//!
//! Diagnosed with `scenarios/examples/ncp_fb_diag.rs` (dumps the worst unconverged steps'
//! rows, W = J M⁻¹ Jᵀ, the Newton matrix's singular values, per-contact cone ratio, slip and
//! direction, and the merit function along the direction with and without projection):
//!
//! 1. **Rank deficiency.** nλ = 21..30 rows on nv = 9 dofs: W has rank ≤ 9 and the contact
//!    impulses are statically indeterminate (three wheels, each a line contact of two points,
//!    on ground and box). The Newton matrix's smallest singular values are 1e-7..1e-8 (FB
//!    partials ∂φ/∂b ≈ ε²/(2b²) on the active rows add almost nothing), so Newton steps along
//!    the null directions are O(100) N s for impulses of O(1) N s, valid only for step lengths
//!    ≲ 1e-5. On top of that, parry reports **near-duplicate points** for a wheel on a box edge
//!    (two or three points of the same pair 0.3 to 20 µm apart, same normal and gap: the
//!    cylinder cap is a polygon), whose rows are identical.
//! 2. **Non-descent direction from the projection.** The exact Jacobian is right (the
//!    unprojected directional derivative of ‖r‖² along the Newton direction equals −2‖r‖² to 4
//!    digits at every dumped step), but the iterates are projected onto the friction cone and
//!    contacts sliding on the cone boundary (‖p_f‖ = μ p_n) with the direction pointing out
//!    turn it into an ascent direction of the projected path: the line search halves to 2⁻²¹
//!    and the iterate freezes (residual 5.6e-3 m/s held for 40 iterations at h = 5 ms, step
//!    502; 9.5e-3 at h = 50 ms, step 64, front wheels landing off the box).
//! 3. Not the cause: row scaling (the largest residual rows are the servo rows and the normal
//!    rows of the indeterminate contacts, all m/s) or a contact set changing inside the step
//!    (the set is fixed per step by construction).
//!
//! What was tried and not kept: a Levenberg–Marquardt direction sweep on stalls (no gain: the
//! projection defeats it as well), a relaxed-cone trial point (‖p_f‖ ≤ 1.5 μ p_n; mixed), more
//! iterations alone (214 → 84 of 1200 at 5 ms with 200), a residual-level regularization
//! kept in the final answer (converges, 4 of 1200 at ρ = 1e-2, but its NCP criterion in the
//! rigid sense is 1e-3 to 0.4 J: it softens the contact). Merging duplicates alone: 214 → 186;
//! with the continuation: 48 of 1200 (16 iterations per stage), 16 with 60.
//!
//! 4. **Kinks stop the line search (found after the natural map, issue 13).** With the
//!    natural map (no projection) the exact direction is a descent direction of ‖r‖² at every
//!    dumped stall, but only within a tiny step: the root lies across a kink (a contact
//!    switching between sticking and sliding, ‖z‖ = μ p_n, or a normal row changing sides of
//!    the FB corner), so Armijo backtracking accepts 2⁻⁵..2⁻²¹ of it and the iterate creeps
//!    (28 % of the steps unconverged at 50 ms, 16 % at 5 ms). Sticking line contacts add
//!    internal-force null directions (two points of a wheel pushing against each other along
//!    the axle: a zero singular value of W), along which the linear model of the sticking
//!    branch asks impulses of 10³ N s: the root is in another branch. Semismooth Newton is
//!    locally convergent **without** a line search (Qi & Sun 1993), and a full step jumps
//!    across the kinks to the right branch, where the merit function first rises.
//!
//! # Globalization
//!
//! Each solve ([`solve::solve`]) runs at most two passes, each Newton from p = 0 followed by the
//! Tikhonov continuation when unconverged:
//!
//! 1. **Full steps with a periodic line search** (`full_step_period` m = 4): every iteration
//!    takes the full Newton step (any finite trial), except every m-th, which runs the line
//!    search below: a watchdog-style scheme (Chamberlain, Powell, Lemaréchal & Pedersen 1982,
//!    *Math. Program. Study* 16) without the return to the anchor, whose best iterate is kept
//!    (returning to the anchor measured worse: 13 % unconverged at 50 ms).
//! 2. If pass 1 ends unconverged: **the non-monotone line search** at every iteration
//!    (Grippo, Lampariello & Lucidi 1986, *SIAM J. Numer. Anal.* 23: accept α when
//!    ‖r(α)‖² ≤ max of the last `nonmonotone_memory` = 8 merits − 2·10⁻⁴ α ‖r‖², halving α).
//!
//! The converged pass (or else the smaller residual) is returned with the iterations of both.
//! Measured on box_traversal (6 s) with the natural map and 40 iterations per solve, share of
//! steps unconverged at h = 100, 50, 20, 10, 5, 2, 1, 0.5 ms: 0, 0, 0, 0.33, 0, 0.33, 0.25,
//! 0.95 % (from 28, 10.8, 12.3, 7.3, 4.0, 3.1, 0.97 % for the dissipation weight with the
//! Armijo search and 16 iterations); mesh_terrain (10 s) at 50, 20, 5 ms: 0.5, 0, 0 %. Each
//! alone was not enough: pass 1 alone 1.7, 0, 1.3, 1.2, 1.7, 4.6, 4.1 %; pass 2 alone (16
//! iterations) 6.7 % at 50 ms and 8.7 % at 5 ms; both with 16 iterations 1.7, 0, 1.0, 1.2,
//! 0.7, 3.0, 2.0 %. With the closed-form wheel–box contact ([`crate::collision::cylinder_box`],
//! always two points per wheel on the box, where parry's manifold gave 1 to 3 that moved along
//! the tread under 1e-10 m pose changes) the same box_traversal runs have no unconverged step
//! at any of these timesteps, with 5.0–9.2 mean and 7–439 largest Newton iterations per step;
//! mesh_terrain (no box) is unchanged.
//!
//! Tried and not kept (same scene): Levenberg–Marquardt directions on stalls,
//! `(AᵀA + μ D²) d = −Aᵀr` with μ = ‖r‖∞ (Fan & Yuan 2005): 23 % at 50 ms; the proximal-point
//! regularization (compliant rows centred at the last iterate, so that its fixed point is a
//! rigid root, Rockafellar 1976): the centre drifts along the null directions at a constant
//! residual (1.0e-7 m/s for 40 outer iterations), 15 % at 50 ms; a larger FB smoothing
//! (1e-7 m, 1e-6 m): 17 % and 26 % at 50 ms; the natural map's tolerance loosened to 1e-8 m/s
//! and NCP to 1e-6 J with the Armijo search: still 7.5 % at 50 ms (the stall was not a
//! tolerance artefact).
//!
//! # Failed steps
//!
//! A step whose first iteration cannot produce a finite iterate (the Newton system is singular
//! or non-finite, PCR returns a non-finite direction, or every line-search trial is
//! non-finite) has no solution: the zero start impulses would let bodies fall through what
//! holds them. Such a step is reported as diverged (`StepReport::diverged` names the time and
//! the reason, [`solve::Solution::failure`]), with the state left at the start of the step;
//! the harness records the run as diverged with that reason. A failure at a later iteration
//! keeps the best iterate so far and is an unconverged step.
//!
//! # Adjoint
//!
//! [`adjoint`]: the exact derivative of the converged step map by implicit differentiation
//! (spec §2.6 with §7.6), one backward sweep over a rollout whose tape holds only the states,
//! controls, impulses and velocities; gradients with respect to the initial state, every
//! control and named parameters (friction, servo gains); the lagged variant as an option.
//!
//! # Known limitations
//!
//! * On the spinning drop a few impact steps (4 of 500 at h = 2 ms, 2 of 10 at 0.1 s) end
//!   unconverged at a residual plateau of ~1e-8 m/s, where the impulse of one of four contacts
//!   drifts along a nearly indeterminate direction; the best iterate is returned and the report
//!   says so (`scenarios/tests/ncp_fb_closed_form.rs`).
//! * On box_traversal (h = 0.5 ms to 0.1 s) no step ends unconverged (mean 5.0 to 8.1 Newton
//!   iterations per step, at most 143); on mesh_terrain (5, 20, 50 ms) none either, with mean
//!   53 to 83 and at most 366 iterations (measured with speculative contacts; section
//!   "Globalization" for how). Where a step does end unconverged it is reported; the adjoint
//!   through it is not a derivative of anything (the implicit function theorem needs the
//!   root) and can grow without bound.
//! * Not modelled, and listed by [`Formulation::ignored_features`] for a given model: joint
//!   friction loss, torsional and rolling friction (condim 4 and 6 act as 3), the model's
//!   `integrator` option (the step is the implicit one above), and what collision detection
//!   does not handle ([`crate::features::collision`]). Every equality kind (connect, weld,
//!   joint coupling) is a row (R6), every limited joint (hinge, slide, ball) a row (R4).
//!   Saturating servos stay explicit forces (R5).

pub mod adjoint;
pub mod params;
pub mod pcr;
pub mod reduce;
pub mod residual;
pub mod solve;
pub mod speculative;

use nalgebra::{DMatrix, DVector, Vector3};

use crate::actuation::{actuator_force, clamp_range};
use crate::collision::{detect_with_pair_margin, Contact};
use crate::constraint::{contact_rows, equality_rows, limit_rows};
use crate::dynamics::{integrate_positions, mass_matrix, smooth_forces};
use crate::formulation::{
    parse_params, ContactRecord, Formulation, FormulationEntry, FormulationError, StepReport,
};
use crate::kinematics::{forward_kinematics, Kinematics};
use crate::model::{ActuatorKind, Model, State};
pub use params::{NcpFbParams, ServoForm, PARAMS};
pub use pcr::Preconditioner;
use residual::{Block, Problem};
pub use solve::LinearSolver;
use solve::{Settings, Solution};

/// Registry entry.
pub const ENTRY: FormulationEntry = FormulationEntry {
    name: "ncp_fb",
    description: "hard contact NCP: Newton on Fischer-Burmeister residuals, maximal-dissipation friction (Macklin 2019 / Ostrich)",
    params: PARAMS,
    build: |v| {
        let p: NcpFbParams = parse_params("ncp_fb", v)?;
        NcpFb::new(p).map(|f| Box::new(f) as Box<dyn Formulation>)
    },
};

/// The `ncp_fb` formulation.
#[derive(Debug, Clone)]
pub struct NcpFb {
    /// Parameters.
    pub params: NcpFbParams,
}

/// Diagnostics of one step, for tests and logs.
#[derive(Debug, Clone)]
pub struct StepDetail {
    /// The step's problem (rows, gaps, inverse weights).
    pub problem: Problem,
    /// The returned iterate.
    pub solution: Solution,
}

impl NcpFb {
    /// Build with validated parameters.
    ///
    /// # Errors
    /// A parameter out of its domain.
    pub fn new(params: NcpFbParams) -> Result<Self, FormulationError> {
        params.validate()?;
        Ok(Self { params })
    }

    /// Assemble one step's problem at `(q, v)` with controls `ctrl` (module doc: rows at q⁻,
    /// collision once at q⁻, smooth forces explicit). Deterministic: the adjoint calls it again
    /// at the stored states and at perturbed inputs.
    ///
    /// # Errors
    /// A mass matrix that is not positive definite (the message names the time `t`).
    pub fn assemble(
        &self,
        model: &Model,
        q: &DVector<f64>,
        v: &DVector<f64>,
        ctrl: &[f64],
        h: f64,
        t: f64,
    ) -> Result<Assembly, String> {
        let kin = forward_kinematics(model, q);
        let m = mass_matrix(model, &kin);
        let servo = self.servo_rows(model);
        // Motors (and servos kept explicit) act as forces at (q⁻, u⁻); servo rows do not.
        let mut explicit = DVector::zeros(model.nv);
        for (i, a) in model.actuators.iter().enumerate() {
            if !servo[i] {
                explicit[model.joints[a.joint].dof_adr] +=
                    a.gear * actuator_force(model, i, q, v, ctrl);
            }
        }
        let f_s = smooth_forces(model, &kin, q, v, &explicit);
        let Some(chol) = m.cholesky() else {
            return Err(format!("mass matrix not positive definite at t = {t:.6} s"));
        };
        let u_free = v + chol.solve(&f_s) * h;

        // Rows at q⁻: equalities, servos, joint limits, then contacts (n, t1, t2).
        let mut rows = Vec::new();
        let mut pending = Vec::new(); // (block without weights, contact)
        if !model.options.disable.equality {
            for r in equality_rows(model, &kin, q, v) {
                let row = rows.len();
                let block = Block::Equality {
                    row,
                    c: r.pos,
                    compliance: self.params.compliance,
                };
                rows.push(r.jac);
                pending.push((block, None));
            }
        }
        for (i, a) in model.actuators.iter().enumerate() {
            if !servo[i] {
                continue;
            }
            let jnt = &model.joints[a.joint];
            let target = clamp_range(ctrl.get(i).copied().unwrap_or(0.0), a.ctrl_range);
            let err = q[jnt.qpos_adr] - target; // e⁻ = q⁻ − ū
            let (alpha, bias) = match a.kind {
                ActuatorKind::VelocityServo { kv } => (a.gear / (h * kv), -a.gear * target),
                ActuatorKind::PositionServo { kp, kv } => {
                    let alpha = a.gear / (h * (kv + h * kp));
                    match self.params.servo_form {
                        ServoForm::Paper => (alpha, a.gear * err / h),
                        _ => (alpha, a.gear * kp * err / (kv + h * kp)),
                    }
                }
                ActuatorKind::Motor => unreachable!("motors are explicit"),
            };
            let mut jac = DVector::zeros(model.nv);
            jac[jnt.dof_adr] = a.gear;
            let row = rows.len();
            rows.push(jac);
            pending.push((Block::Servo { row, alpha, bias }, None));
        }
        if !model.options.disable.limit {
            for r in limit_rows(model, q, v, f64::INFINITY) {
                let row = rows.len();
                pending.push((
                    Block::Limit {
                        row,
                        dist: r.pos,
                        w: 0.0,
                    },
                    None,
                ));
                rows.push(r.jac);
            }
        }
        let contacts = if model.options.disable.contact {
            Vec::new()
        } else {
            let spec = self
                .params
                .speculative
                .then(|| speculative::Bounds::new(model, &kin, v, h));
            let margin = self.params.detection_margin;
            reduce::merge_duplicates(
                detect_with_pair_margin(model, &kin, |g0, g1| {
                    margin + spec.as_ref().map_or(0.0, |b| b.pair(g0, g1))
                }),
                self.params.merge_distance,
            )
        };
        let g_h2 = if model.options.disable.gravity {
            0.0
        } else {
            model.options.gravity.norm() * h * h
        };
        for (ci, c) in contacts.iter().enumerate() {
            let Some(jac) = self.contact_jacobian(model, &kin, v, (ci, c), h, g_h2) else {
                continue;
            };
            let friction = jac.len() == 3;
            let row = rows.len();
            rows.extend(jac);
            let block = Block::Contact {
                row,
                friction,
                mu: c.material.friction[0],
                gap: c.gap - c.material.margin,
                wn: 0.0,
                wt: 0.0,
            };
            pending.push((block, Some(ci)));
        }
        let mut j = DMatrix::zeros(rows.len(), model.nv);
        for (i, r) in rows.iter().enumerate() {
            j.set_row(i, &r.transpose());
        }
        let minv_jt = chol.solve(&j.transpose());
        let w = |i: usize| j.row(i).dot(&minv_jt.column(i).transpose());
        let blocks: Vec<Block> = pending
            .iter()
            .map(|(b, _)| match *b {
                Block::Limit { row, dist, .. } => Block::Limit {
                    row,
                    dist,
                    w: w(row),
                },
                Block::Contact {
                    row,
                    friction,
                    mu,
                    gap,
                    ..
                } => Block::Contact {
                    row,
                    friction,
                    mu,
                    gap,
                    wn: w(row),
                    wt: if friction {
                        0.5 * (w(row + 1) + w(row + 2))
                    } else {
                        0.0
                    },
                },
                other => other,
            })
            .collect();
        let p = &self.params;
        Ok(Assembly {
            problem: Problem {
                h,
                j,
                minv_jt,
                u_free,
                blocks,
                eps_fb: p.fb_smoothing,
                eps_v: p
                    .friction_smoothing
                    .unwrap_or(NcpFbParams::FRICTION_SMOOTHING),
                rho_n: 0.0,
                rho_f: 0.0,
                friction_residual: p.friction_residual,
                center: DVector::zeros(0),
            },
            block_contact: pending.iter().map(|(_, c)| *c).collect(),
            contacts,
            kin,
        })
    }

    /// The Jacobian rows that contact `c` (the `ci`-th detected at kinematics `kin`) gets in a
    /// step of `h` (s) from velocities `v`, `g_h2` = h² |g| (m): its normal row and, for
    /// condim ≥ 3 unless both are zero, its two tangent rows; `None` where it gets none (a
    /// speculative candidate whose closing bound does not reach it, a zero normal row; module
    /// doc, "Degenerate rows", and [`speculative`]).
    fn contact_jacobian(
        &self,
        model: &Model,
        kin: &Kinematics,
        v: &DVector<f64>,
        (ci, c): (usize, &Contact),
        h: f64,
        g_h2: f64,
    ) -> Option<Vec<DVector<f64>>> {
        let condim = if c.material.condim >= 3 { 3 } else { 1 };
        let mut jac: Vec<DVector<f64>> = contact_rows(
            model, kin, v, ci, c.bodies, &c.point, &c.frame, c.gap, condim,
        )
        .into_iter()
        .map(|r| r.jac)
        .collect();
        // A speculative candidate beyond the detection margin keeps its rows only if its
        // own closing bound reaches it (module doc, "Speculative contacts").
        let gap = c.gap - c.material.margin;
        if self.params.speculative
            && gap > self.params.detection_margin
            && gap
                > self.params.detection_margin + speculative::closing_bound(jac[0].dot(v), h, g_h2)
        {
            return None;
        }
        // Rows no dof can move (module doc, "Degenerate rows"): a contact whose normal row
        // is zero gets no rows; friction rows that are both zero are dropped.
        if is_zero_row(&jac[0]) {
            return None;
        }
        let friction = condim == 3 && !(is_zero_row(&jac[1]) && is_zero_row(&jac[2]));
        jac.truncate(if friction { 3 } else { 1 });
        Some(jac)
    }

    /// Whether the step at `(q, v)` over `h` (s) gives geoms `(g0, g1)` (a filtered pair, lower
    /// index first) any contact row: [`Self::assemble`]'s detection, merge and row rules for that
    /// one pair. The batched engine asks it in the worlds where a pair it does not collide
    /// comes within its conservative reach ([`crate::batched::ncp`]).
    pub fn pair_has_rows(
        &self,
        model: &Model,
        q: &DVector<f64>,
        v: &DVector<f64>,
        h: f64,
        (g0, g1): (usize, usize),
    ) -> bool {
        if model.options.disable.contact {
            return false;
        }
        let kin = forward_kinematics(model, q);
        let extra = self.params.detection_margin
            + if self.params.speculative {
                speculative::Bounds::new(model, &kin, v, h).pair(g0, g1)
            } else {
                0.0
            };
        let mut found = Vec::new();
        crate::collision::detect_pair_with_margin(model, &kin, (g0, g1), extra, &mut found);
        let found = reduce::merge_duplicates(found, self.params.merge_distance);
        let g_h2 = if model.options.disable.gravity {
            0.0
        } else {
            model.options.gravity.norm() * h * h
        };
        found.iter().enumerate().any(|(ci, c)| {
            self.contact_jacobian(model, &kin, v, (ci, c), h, g_h2)
                .is_some()
        })
    }

    /// Which actuators become implicit servo rows (R5): servos with a positive velocity gain
    /// and no force range, unless `servo_form` is `explicit`.
    pub fn servo_rows(&self, model: &Model) -> Vec<bool> {
        model
            .actuators
            .iter()
            .map(|a| {
                self.params.servo_form != ServoForm::Explicit
                    && a.force_range.is_none()
                    && match a.kind {
                        ActuatorKind::Motor => false,
                        ActuatorKind::VelocityServo { kv } => kv > 0.0,
                        ActuatorKind::PositionServo { kp, kv } => kv + kp > 0.0,
                    }
            })
            .collect()
    }

    /// The solver settings of the parameters.
    pub fn settings(&self) -> Settings {
        let p = &self.params;
        Settings {
            iterations: p.newton_iterations,
            k_min: p.k_min,
            tolerance: p.tolerance,
            ncp_tolerance: p.ncp_tolerance,
            regularization: p.regularization,
            friction_regularization: p.friction_regularization,
            ls_iterations: p.ls_iterations,
            nonmonotone_memory: p.nonmonotone_memory,
            full_step_period: p.full_step_period,
            linear_solver: p.linear_solver,
            pcr_iterations: p.pcr_iterations.unwrap_or(NcpFbParams::PCR_ITERATIONS),
            pcr_tolerance: p.pcr_tolerance.unwrap_or(NcpFbParams::PCR_TOLERANCE),
            preconditioner: p.preconditioner.unwrap_or(NcpFbParams::PRECONDITIONER),
        }
    }

    /// One step, returning the report and the step's problem and solution.
    pub fn step_detail(
        &mut self,
        model: &Model,
        state: &mut State,
        u: &[f64],
        h: f64,
    ) -> (StepReport, Option<StepDetail>) {
        if !state.is_finite() {
            return (
                StepReport::explicit(Vec::new()).check_divergence(state),
                None,
            );
        }
        let asm = match self.assemble(model, &state.q, &state.v, u, h, state.t) {
            Ok(a) => a,
            Err(msg) => {
                let r = StepReport {
                    diverged: Some(msg),
                    ..StepReport::default()
                };
                return (r, None);
            }
        };
        let sol = solve::solve(&asm.problem, &self.settings(), &asm.pair_of_block());
        if let Some(why) = &sol.failure {
            // No iterate at all: the zero impulses are not a solution. A failed step, the state
            // left at the start of the step (module doc, "Failed steps").
            let report = StepReport {
                iterations: 0,
                residual: sol.residual,
                converged: false,
                best_iterate: 0,
                diverged: Some(format!("ncp_fb step failed at t = {:.6} s: {why}", state.t)),
                contacts: asm.records(model, &sol),
            };
            return (
                report,
                Some(StepDetail {
                    problem: asm.problem,
                    solution: sol,
                }),
            );
        }

        state.v.copy_from(&sol.u);
        integrate_positions(model, &mut state.q, &sol.u, h);
        state.t += h;

        let report = StepReport {
            iterations: sol.iterations,
            residual: sol.residual,
            converged: sol.converged,
            best_iterate: sol.best_iterate,
            diverged: None,
            contacts: asm.records(model, &sol),
        }
        .check_divergence(state);
        (
            report,
            Some(StepDetail {
                problem: asm.problem,
                solution: sol,
            }),
        )
    }
}

/// A constraint Jacobian row below this in max-norm (m/s per unit dof velocity: m/s per m/s or
/// per rad/s, a lever arm in m) counts as zero: no dof moves the contact along it.
pub const ZERO_ROW: f64 = 1e-12;

/// Whether a Jacobian row is zero in the sense of [`ZERO_ROW`].
fn is_zero_row(jac: &DVector<f64>) -> bool {
    jac.amax() <= ZERO_ROW
}

/// One step's assembled problem with the contacts its blocks came from.
#[derive(Debug, Clone)]
pub struct Assembly {
    /// The problem.
    pub problem: Problem,
    /// The contacts detected at q⁻.
    pub contacts: Vec<Contact>,
    /// For each block of the problem, the index of its contact in `contacts`, if a contact.
    pub block_contact: Vec<Option<usize>>,
    /// Kinematics at q⁻.
    pub kin: Kinematics,
}

impl Assembly {
    /// The body pair of each block that is a contact (for the block-Jacobi preconditioner).
    pub fn pair_of_block(&self) -> Vec<Option<[usize; 2]>> {
        self.block_contact
            .iter()
            .map(|c| c.map(|i| self.contacts[i].bodies))
            .collect()
    }

    /// Same rows, blocks and contact pairs as `reference`, and every merged line contact on
    /// the reference's deepest end unless the reference's ends tie
    /// ([`crate::collision::LineEnds::kept`]): the adjoint's finite differences of the
    /// assembly at perturbed poses (`self`) need the forward's (`reference`) contact set, and
    /// the same branch of every minimum in it.
    pub fn same_structure(&self, reference: &Assembly) -> bool {
        self.same_structure_apart_from_line_ends(reference)
            && reference
                .block_line_ends()
                .iter()
                .zip(self.block_line_ends())
                .all(|(r, s)| crate::collision::LineEnds::kept(*r, s))
    }

    /// Same rows, blocks and contact pairs as `reference` (merged line contacts' deepest ends
    /// aside: [`crate::collision::LineEnds::kept`]).
    pub fn same_structure_apart_from_line_ends(&self, reference: &Assembly) -> bool {
        self.problem.blocks.len() == reference.problem.blocks.len()
            && self.problem.nl() == reference.problem.nl()
            && self
                .problem
                .blocks
                .iter()
                .zip(&reference.problem.blocks)
                .all(|(a, b)| a.same_structure(b))
            && self.contacts.len() == reference.contacts.len()
            && self
                .contacts
                .iter()
                .zip(&reference.contacts)
                .all(|(a, b)| a.geoms == b.geoms)
    }

    /// `1 + blocks` entries (the layout of the adjoint's per-block terms): entry 0 (the
    /// unconstrained velocity) `None`, then per block its contact's merged line ends
    /// ([`crate::collision::Contact::line_ends`]; `None` for other blocks and contacts).
    pub fn block_line_ends(&self) -> Vec<Option<crate::collision::LineEnds>> {
        std::iter::once(None)
            .chain(
                self.block_contact
                    .iter()
                    .map(|c| c.and_then(|ci| self.contacts[ci].line_ends)),
            )
            .collect()
    }

    /// Contact records of a solution (impulses and velocities after the step in the contact
    /// frame).
    pub fn records(&self, model: &Model, sol: &Solution) -> Vec<ContactRecord> {
        let problem = &self.problem;
        let vel = &problem.j * &sol.u;
        self.block_contact
            .iter()
            .zip(&problem.blocks)
            .filter_map(|(ci, b)| {
                let (
                    c,
                    Block::Contact {
                        row, friction, mu, ..
                    },
                ) = (&self.contacts[(*ci)?], *b)
                else {
                    return None;
                };
                let k = if friction { 3 } else { 1 };
                let (mut impulse, mut velocity) = (Vector3::zeros(), Vector3::zeros());
                for a in 0..k {
                    impulse[a] = sol.p[row + a];
                    velocity[a] = vel[row + a];
                }
                if !friction {
                    // The tangential velocity is still reported (frame rows 1, 2).
                    let rel = crate::constraint::contact_rows(
                        model, &self.kin, &sol.u, 0, c.bodies, &c.point, &c.frame, c.gap, 3,
                    );
                    velocity[1] = rel[1].vel;
                    velocity[2] = rel[2].vel;
                }
                Some(ContactRecord {
                    geoms: c.geoms,
                    point: c.point,
                    frame: c.frame,
                    gap: c.gap,
                    mu,
                    impulse,
                    velocity,
                })
            })
            .collect()
    }
}

impl Formulation for NcpFb {
    fn name(&self) -> &'static str {
        "ncp_fb"
    }

    fn step(&mut self, model: &Model, state: &mut State, u: &[f64], h: f64) -> StepReport {
        self.step_detail(model, state, u, h).0
    }

    /// See the module doc, "Known limitations".
    fn ignored_features(&self, model: &Model) -> Vec<crate::features::IgnoredFeature> {
        use crate::model::JointKind::{Ball, Free, Hinge, Slide};
        let mut out = crate::features::collision(model);
        out.extend(crate::features::noslip(
            model,
            "ncp_fb's friction is hard (no creep to remove), it runs no post-solver",
        ));
        out.extend(crate::features::friction_loss(
            model,
            &[Free, Ball, Hinge, Slide],
            "not modelled, the joints move without it",
        ));
        out.extend(crate::features::condims(
            model,
            &[4, 6],
            "torsional and rolling friction are not modelled, contacts act as condim 3",
        ));
        out.extend(crate::features::integrator(
            model,
            "ncp_fb's step is implicit in the velocity (module doc)",
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn param_docs_match_defaults() {
        let v = serde_json::to_value(NcpFbParams::default()).unwrap();
        let obj = v.as_object().unwrap();
        assert_eq!(obj.len(), PARAMS.len());
        // Parameters that default to `None` take the documented value when resolved.
        let settings = NcpFb::new(NcpFbParams::default()).unwrap().settings();
        let resolved = serde_json::json!({
            "pcr_iterations": settings.pcr_iterations,
            "pcr_tolerance": settings.pcr_tolerance,
            "preconditioner": settings.preconditioner,
            "friction_smoothing": NcpFbParams::FRICTION_SMOOTHING,
        });
        for doc in PARAMS {
            let val = match &obj[doc.name] {
                serde_json::Value::Null => &resolved[doc.name],
                v => v,
            };
            match val {
                serde_json::Value::String(s) => assert_eq!(s, doc.default, "{}", doc.name),
                serde_json::Value::Bool(b) => {
                    assert_eq!(b.to_string(), doc.default, "{}", doc.name)
                }
                val => assert_eq!(
                    val.as_f64().unwrap(),
                    doc.default.parse::<f64>().unwrap(),
                    "parameter {}",
                    doc.name
                ),
            }
        }
    }

    #[test]
    fn unknown_and_bad_parameters_are_errors() {
        let err = crate::formulation::build("ncp_fb", &serde_json::json!({"newton_iteration": 3}))
            .err()
            .unwrap();
        assert!(err.to_string().contains("newton_iteration"), "{err}");
        let err = crate::formulation::build(
            "ncp_fb",
            &serde_json::json!({"friction_residual": "dissipation_weight", "friction_smoothing": 1e-3}),
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("eps_v^2 <= 1e-8"), "{err}");
        // A setting without effect: the natural map has no slip smoothing.
        let err =
            crate::formulation::build("ncp_fb", &serde_json::json!({"friction_smoothing": 1e-6}))
                .err()
                .unwrap();
        assert!(
            err.to_string().contains(
                "friction_smoothing: acts only with friction_residual: dissipation_weight"
            ),
            "{err}"
        );
        assert!(crate::formulation::build("ncp_fb", &serde_json::Value::Null).is_ok());
    }

    /// `pcr_iterations`, `pcr_tolerance` and `preconditioner` used to be accepted and to do
    /// nothing under `linear_solver: dense` (the default); given explicitly there, each is an
    /// error naming it, and accepted with `linear_solver: pcr`.
    #[test]
    fn pcr_parameters_under_dense_solver_are_errors_naming_the_key() {
        use serde_json::json;
        for (key, value) in [
            ("pcr_iterations", json!(8)),
            ("pcr_tolerance", json!(1e-6)),
            ("preconditioner", json!("jacobi")),
        ] {
            for solver in [None, Some("dense")] {
                let mut p = json!({ key: value.clone() });
                if let Some(s) = solver {
                    p["linear_solver"] = json!(s);
                }
                let err = crate::formulation::build("ncp_fb", &p).err().unwrap();
                let text = err.to_string();
                assert!(
                    text.starts_with(&format!(
                        "formulation 'ncp_fb': {key}: acts only with linear_solver: pcr"
                    )),
                    "{text}"
                );
            }
            let ok = crate::formulation::build(
                "ncp_fb",
                &json!({ key: value.clone(), "linear_solver": "pcr" }),
            );
            assert!(ok.is_ok(), "{key} with pcr: {:?}", ok.err());
        }
        // Through the struct as well: only a key that is set counts as given.
        let p = NcpFbParams {
            pcr_iterations: Some(4),
            ..NcpFbParams::default()
        };
        assert!(NcpFb::new(p).is_err());
        let f = NcpFb::new(NcpFbParams {
            linear_solver: LinearSolver::Pcr,
            pcr_iterations: Some(4),
            ..NcpFbParams::default()
        })
        .unwrap();
        assert_eq!(f.settings().pcr_iterations, 4);
        assert_eq!(
            NcpFb::new(NcpFbParams::default())
                .unwrap()
                .settings()
                .pcr_iterations,
            16
        );
    }
}
