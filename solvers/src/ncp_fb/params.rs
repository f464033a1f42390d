//! Parameters of `ncp_fb` ([`NcpFbParams`]), their documentation ([`PARAMS`]) and validation.

use serde::{Deserialize, Serialize};

use super::pcr::Preconditioner;
use super::residual::FrictionResidual;
use super::solve::LinearSolver;
use crate::formulation::{FormulationError, ParamDoc};

/// Parameters of the `ncp_fb` formulation (unknown keys are errors). Units are in the field docs;
/// the residual rows are velocities (m/s, or rad/s for rotational rows), see the module doc.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NcpFbParams {
    /// Maximum Newton iterations per solve (the paper runs 16; 40 here, module doc "Globalization",
    /// measured on box_traversal, issue 13): the solve from p = 0 and, when
    /// that ends unconverged, each stage of the Tikhonov continuation
    /// ([`super::solve::solve`], at most [`super::solve::MAX_STAGES`] stages). A step's total
    /// (`StepReport` iterations) is their sum.
    pub newton_iterations: usize,
    /// Minimum Newton iterations before the stopping test may end the loop, counted from 1
    /// (spec §7.8: stop when k + 1 ≥ k_min); also the first iterate eligible as best iterate.
    pub k_min: usize,
    /// Tolerance on the max-norm of the residual (m/s).
    pub tolerance: f64,
    /// Tolerance on the NCP criterion Σ_contacts |⟨p, v + Φ(v)⟩| in impulses (N s · m/s = J),
    /// in its position-level form ([`super::residual::Problem::ncp_criterion`]): the stopping
    /// test of spec §7.5, used together with feasibility (see [`super::solve`]).
    pub ncp_tolerance: f64,
    /// Fischer–Burmeister smoothing ε (m): both FB arguments are lengths, so the resting gap of
    /// a loaded contact is ε²/(2 h² w_n λ_n) (spec §7.1): 5e-12 m for the cube at h = 1 ms.
    pub fb_smoothing: f64,
    /// The friction rows' complementarity function (module doc, "Friction rows"):
    /// `natural_map` (the default: Alart–Curnier's projection onto the friction disk, exact
    /// sticking, no projection of the iterates) or `dissipation_weight` (the paper's
    /// maximal-dissipation weight W, iterates projected onto the cone).
    pub friction_residual: FrictionResidual,
    /// Slip-speed smoothing ε_v (m/s) in the maximal-dissipation weight W, independent of h
    /// (spec §7.3 asks ε_v² ≤ 1e-8 m²/s²); a sticking contact creeps at ≈ ε_v²/(2 w_t g).
    /// `None`: [`NcpFbParams::FRICTION_SMOOTHING`]. Acts only with
    /// `friction_residual: dissipation_weight` (the natural map needs no smoothing): given
    /// with `natural_map` it is an error.
    pub friction_smoothing: Option<f64>,
    /// Newton-only regularization, relative to each row's inverse weight (J M⁻¹ Jᵀ)_ii, added to
    /// the Schur complement's diagonal only, never to the residual (spec §1.5): normal, limit,
    /// servo and equality rows.
    pub regularization: f64,
    /// The same for the friction rows.
    pub friction_regularization: f64,
    /// Maximum backtracking halvings of the line search on the residual norm (spec §7.4).
    pub ls_iterations: usize,
    /// Full-step period m of the first globalization pass (module doc, "Globalization"): full
    /// Newton steps, with a line search every m-th iteration; 0 skips that pass (a line search
    /// at every iteration).
    pub full_step_period: usize,
    /// Memory M of the non-monotone line search (Grippo, Lampariello & Lucidi 1986): a trial is
    /// accepted against the largest merit ‖r‖² of the last M iterates; 1 is monotone Armijo.
    pub nonmonotone_memory: usize,
    /// Extra collision detection distance (m): contacts up to this far apart at q⁻ get
    /// complementarity rows, so a resting contact (gap ≈ ε²/(2 h² w_n λ_n) > 0) and a contact
    /// that closes within the step are seen (a far one simply carries no impulse).
    pub detection_margin: f64,
    /// Speculative contacts ([`super::speculative`]): widen each pair's detection
    /// distance by the distance its geoms can close within the step, and keep a contact
    /// farther than `detection_margin` only if its own closing bound reaches it. Default true.
    pub speculative: bool,
    /// Contacts of the same geom pair whose points are within this distance (m) with the same
    /// normal are merged into one ([`super::reduce`]): redundant points make the Delassus
    /// operator singular and the maximal-dissipation friction indeterminate; 0 disables.
    pub merge_distance: f64,
    /// Compliance E of the equality rows (m/N, or rad/(N m) for rotational rows): spec eq. (3),
    /// `c(q⁺) + E λ = 0`.
    pub compliance: f64,
    /// How servo actuators enter the step (module doc (R5)); `paper` and `implicit_pd` differ
    /// for position servos only (a velocity servo has no position gain).
    pub servo_form: ServoForm,
    /// How each Newton system is solved: `dense` (exact Jacobian, LU) or `pcr` (the paper's
    /// matrix-free preconditioned conjugate residuals with W frozen per iteration).
    pub linear_solver: LinearSolver,
    /// PCR iterations per Newton iteration (the paper runs 16); `None`: 16
    /// ([`NcpFbParams::PCR_ITERATIONS`]). Acts only with `linear_solver: pcr`: given with
    /// `dense` it is an error ([`NcpFbParams::validate`]).
    pub pcr_iterations: Option<usize>,
    /// PCR relative tolerance on the preconditioned system's residual; `None`: 1e-10
    /// ([`NcpFbParams::PCR_TOLERANCE`]). Only with `linear_solver: pcr`.
    pub pcr_tolerance: Option<f64>,
    /// PCR preconditioner: `jacobi` or `block_jacobi` (rows sharing a body pair); `None`:
    /// `block_jacobi`. Only with `linear_solver: pcr`.
    pub preconditioner: Option<Preconditioner>,
}

/// How position and velocity servos enter an `ncp_fb` step (spec §2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServoForm {
    /// Implicit rows; a position servo in the paper's form α = (k_v + h k_p)⁻¹,
    /// b = e(q⁻)/h, which solves to λ = −(k_p + k_v/h) e(q⁺): k_v damps the per-step position
    /// error, not the joint velocity (spec §2.4 caution). Velocity servos: α = 1/k_v, b = −ū.
    Paper,
    /// Implicit rows; a position servo as the true implicit PD λ = −k_p e(q⁺) − k_v q̇⁺
    /// (ODE's ERP/CFM: b = ERP e(q⁻)/h, ERP = h k_p/(h k_p + k_v)). Velocity servos as `paper`.
    ImplicitPd,
    /// Servos as explicit forces at (q⁻, u⁻), like motors (unstable for h k_v / m > 2).
    Explicit,
}

impl ServoForm {
    /// The name used in experiment files.
    pub fn name(self) -> &'static str {
        match self {
            ServoForm::Paper => "paper",
            ServoForm::ImplicitPd => "implicit_pd",
            ServoForm::Explicit => "explicit",
        }
    }
}

impl Default for NcpFbParams {
    fn default() -> Self {
        Self {
            newton_iterations: 40,
            k_min: 1,
            tolerance: 1e-10,
            ncp_tolerance: 1e-9,
            fb_smoothing: 1e-8,
            friction_residual: FrictionResidual::NaturalMap,
            friction_smoothing: None,
            regularization: 1e-10,
            friction_regularization: 1e-10,
            ls_iterations: 20,
            full_step_period: 4,
            nonmonotone_memory: 8,
            detection_margin: 0.01,
            speculative: true,
            merge_distance: 1e-4,
            compliance: 1e-8,
            servo_form: ServoForm::Paper,
            linear_solver: LinearSolver::Dense,
            pcr_iterations: None,
            pcr_tolerance: None,
            preconditioner: None,
        }
    }
}

/// Parameter documentation, in the order of [`NcpFbParams`]; a test checks it against the defaults.
pub const PARAMS: &[ParamDoc] = &[
    ParamDoc { name: "newton_iterations", default: "40", unit: "-", doc: "maximum Newton iterations per solve: the solve from p = 0, and each continuation stage when that one ends unconverged (the step reports their sum)" },
    ParamDoc { name: "k_min", default: "1", unit: "-", doc: "minimum Newton iterations before stopping (counted from 1)" },
    ParamDoc { name: "tolerance", default: "1e-10", unit: "m/s", doc: "tolerance on the residual max-norm (velocity rows)" },
    ParamDoc { name: "ncp_tolerance", default: "1e-9", unit: "J", doc: "tolerance on the NCP criterion sum |<p, v + Phi(v)>| (impulses)" },
    ParamDoc { name: "fb_smoothing", default: "1e-8", unit: "m", doc: "Fischer-Burmeister smoothing length (resting gap eps^2/(2 h^2 w_n lambda_n))" },
    ParamDoc { name: "friction_residual", default: "natural_map", unit: "-", doc: "friction rows: natural_map (Alart-Curnier projection onto the friction disk, exact sticking) or dissipation_weight (the paper's maximal-dissipation weight W, iterates projected onto the cone)" },
    ParamDoc { name: "friction_smoothing", default: "1e-6", unit: "m/s", doc: "slip-speed smoothing in the maximal-dissipation weight W (only with friction_residual: dissipation_weight; an error otherwise)" },
    ParamDoc { name: "regularization", default: "1e-10", unit: "-", doc: "Newton-only diagonal regularization relative to (J M^-1 J^T)_ii: normal, limit, servo, equality rows" },
    ParamDoc { name: "friction_regularization", default: "1e-10", unit: "-", doc: "Newton-only diagonal regularization of the friction rows, relative to (J M^-1 J^T)_ii" },
    ParamDoc { name: "ls_iterations", default: "20", unit: "-", doc: "maximum halvings of the line search on the residual norm" },
    ParamDoc { name: "full_step_period", default: "4", unit: "-", doc: "first pass: full Newton steps with a line search every m-th iteration (0: no full-step pass)" },
    ParamDoc { name: "nonmonotone_memory", default: "8", unit: "-", doc: "non-monotone line search: accept against the largest merit of the last M iterates (1: monotone Armijo)" },
    ParamDoc { name: "detection_margin", default: "0.01", unit: "m", doc: "extra collision distance: contacts this far apart get rows (no impulse unless they close)" },
    ParamDoc { name: "speculative", default: "true", unit: "-", doc: "also give rows to contacts farther apart that can close within the step (bound: 2 (h max(0, -gap rate) + h^2 |g|))" },
    ParamDoc { name: "merge_distance", default: "1e-4", unit: "m", doc: "merge contacts of one geom pair closer than this with the same normal (redundant points); 0 disables" },
    ParamDoc { name: "compliance", default: "1e-8", unit: "m/N", doc: "compliance E of the equality rows, c(q+) + E lambda = 0" },
    ParamDoc { name: "servo_form", default: "paper", unit: "-", doc: "servos as implicit rows: paper (position servo alpha = (kv + h kp)^-1, b = e/h), implicit_pd (true implicit PD), or explicit forces; velocity servos are the same row in paper and implicit_pd" },
    ParamDoc { name: "linear_solver", default: "dense", unit: "-", doc: "Newton system: dense (exact Jacobian, LU) or pcr (W frozen, matrix-free PCR, spec 1.6)" },
    ParamDoc { name: "pcr_iterations", default: "16", unit: "-", doc: "PCR iterations per Newton iteration (only with linear_solver: pcr; an error otherwise)" },
    ParamDoc { name: "pcr_tolerance", default: "1e-10", unit: "-", doc: "PCR relative residual tolerance (only with linear_solver: pcr)" },
    ParamDoc { name: "preconditioner", default: "block_jacobi", unit: "-", doc: "PCR preconditioner: jacobi or block_jacobi (rows sharing a body pair) (only with linear_solver: pcr)" },
];

impl NcpFbParams {
    /// PCR iterations per Newton iteration when `pcr_iterations` is not given.
    pub const PCR_ITERATIONS: usize = 16;
    /// PCR relative tolerance when `pcr_tolerance` is not given.
    pub const PCR_TOLERANCE: f64 = 1e-10;
    /// PCR preconditioner when `preconditioner` is not given.
    pub const PRECONDITIONER: Preconditioner = Preconditioner::BlockJacobi;
    /// Slip-speed smoothing ε_v (m/s) when `friction_smoothing` is not given.
    pub const FRICTION_SMOOTHING: f64 = 1e-6;

    /// Check the domains, and that no parameter is given that the other settings leave without
    /// effect (`pcr_iterations`, `pcr_tolerance`, `preconditioner` with `linear_solver: dense`).
    ///
    /// # Errors
    /// [`FormulationError::BadParams`] naming the parameter.
    pub fn validate(&self) -> Result<(), FormulationError> {
        let bad = |m: String| {
            Err(FormulationError::BadParams {
                name: "ncp_fb".into(),
                message: m,
            })
        };
        if self.newton_iterations == 0 {
            return bad("newton_iterations must be >= 1".into());
        }
        if self.full_step_period == 1 {
            return bad("full_step_period: 1 searches at every iteration, which the second pass already does; use 0 (no full-step pass) or m >= 2".into());
        }
        if self.nonmonotone_memory == 0 {
            return bad("nonmonotone_memory must be >= 1 (1: monotone Armijo)".into());
        }
        if self.linear_solver != LinearSolver::Pcr {
            for (key, given) in [
                ("pcr_iterations", self.pcr_iterations.is_some()),
                ("pcr_tolerance", self.pcr_tolerance.is_some()),
                ("preconditioner", self.preconditioner.is_some()),
            ] {
                if given {
                    return bad(format!(
                        "{key}: acts only with linear_solver: pcr (linear_solver is dense, which solves each Newton system exactly); remove {key} or set linear_solver: pcr"
                    ));
                }
            }
        }
        if self.pcr_iterations == Some(0) {
            return bad("pcr_iterations must be >= 1 with linear_solver: pcr".into());
        }
        if self.k_min > self.newton_iterations {
            return bad(format!(
                "k_min = {} must be <= newton_iterations = {}",
                self.k_min, self.newton_iterations
            ));
        }
        for (what, v) in [
            ("tolerance", self.tolerance),
            ("ncp_tolerance", self.ncp_tolerance),
            ("fb_smoothing", self.fb_smoothing),
            ("regularization", self.regularization),
            ("friction_regularization", self.friction_regularization),
            ("detection_margin", self.detection_margin),
            ("merge_distance", self.merge_distance),
            ("compliance", self.compliance),
            (
                "pcr_tolerance",
                self.pcr_tolerance.unwrap_or(Self::PCR_TOLERANCE),
            ),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(format!("{what} = {v} must be finite and >= 0"));
            }
        }
        if self.friction_residual == FrictionResidual::NaturalMap
            && self.friction_smoothing.is_some()
        {
            return bad("friction_smoothing: acts only with friction_residual: dissipation_weight (the natural map has no slip-speed smoothing); remove friction_smoothing or set friction_residual: dissipation_weight".into());
        }
        let eps_v = self.friction_smoothing.unwrap_or(Self::FRICTION_SMOOTHING);
        if !(eps_v > 0.0 && eps_v * eps_v <= 1e-8) {
            return bad(format!(
                "friction_smoothing = {eps_v} must be > 0 with eps_v^2 <= 1e-8 m^2/s^2 (spec 7.3)"
            ));
        }
        Ok(())
    }
}
