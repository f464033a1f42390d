//! `signorini`: Genesis' contact resolution in which friction is bounded by the normal force
//! the contact has actually developed (spec `soft_convex_and_signorini.md` §B; Genesis
//! `genesis/engine/solvers/rigid/constraint/solver.py`, PRs #3126 and #3381; the fixed point is
//! the Coulomb complementarity problem, eq. (C.22) of A. Duburcq's 2022 thesis).
//!
//! It is soft_convex's pipeline ([`crate::soft_convex`]: the same rows, R, aref, impratio,
//! Newton solver and exact line search) with a different cost for each contact:
//!
//! * the normal row is a plain one-sided quadratic `½ D_n jar_n²` (no coupling to friction), so
//!   the convex model's lift-off (friction buying normal force) cannot happen;
//! * each friction block b (sliding {t1, t2}, torsional, rolling) is the Huber function of the
//!   disc of radius `ρ_b = μ_b f_n`, `f_n = max(−D_n jar_n, 0)` the current iterate's normal
//!   force: stick `½ D T²` while `D T ≤ ρ`, slip `ρ (T − ρ/(2D))` beyond, `T = ‖jar_b‖`;
//! * ρ is frozen during each line search and recomputed at every Newton iteration (successive
//!   approximation inside the Newton solve, no outer loop); optionally through the per-contact
//!   latch of PR #3381;
//! * the solve stops only when both the scaled gradient and the Newton decrement are below the
//!   tolerance (an improvement stall is not an exit), and warm-starts from the previous
//!   accelerations without MuJoCo's cost comparison.
//!
//! It requires the elliptic cone and the Newton solver (pyramid rows mix the normal into every
//! edge, and CG does not reach the successive approximation's fixed point, PR #3126); asking for
//! the pyramidal cone or CG is an error at build time. It always uses the elliptic cone, whatever
//! the model's `cone` option.

use serde::{Deserialize, Serialize};

use crate::formulation::{
    parse_params, Formulation, FormulationEntry, FormulationError, ParamDoc, StepReport,
};
use crate::model::{Cone, Integrator, Model, SolverKind, State};
use crate::soft_convex::{Resolution, SoftConvex, SoftConvexParams, StepDetail};

/// Parameters of `signorini`; solver options left unset take the model's values (as
/// soft_convex), except the cone (always elliptic) and the solver (always Newton).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SignoriniParams {
    /// Must be `elliptic` if given.
    pub cone: Option<Cone>,
    /// Must be `newton` if given.
    pub solver: Option<SolverKind>,
    /// Maximum Newton iterations.
    pub iterations: Option<usize>,
    /// Tolerance on the scaled gradient and Newton decrement.
    pub tolerance: Option<f64>,
    /// Maximum line-search evaluations.
    pub ls_iterations: Option<usize>,
    /// Line-search tolerance, relative to `tolerance`.
    pub ls_tolerance: Option<f64>,
    /// Ratio of frictional to normal impedance (Genesis' default with the elliptic cone is 100;
    /// unset takes the model's, MuJoCo's default 1).
    pub impratio: Option<f64>,
    /// Warm-start from the previous accelerations.
    pub warmstart: Option<bool>,
    /// Raise solref time constants to at least 2h.
    pub refsafe: Option<bool>,
    /// Use Genesis' per-contact normal-force latch (PR #3381) instead of the iterate's force.
    pub latch: bool,
    /// Integrator: `euler` (the default, whatever the model's option: the Genesis references
    /// were made with it), `implicitfast` or `implicit` (MuJoCo's velocity-implicit updates,
    /// [`crate::implicit`], on soft_convex's pipeline); `rk4` is not implemented.
    pub integrator: Option<Integrator>,
}

/// Parameter documentation, in the order of [`SignoriniParams`].
pub const PARAMS: &[ParamDoc] = &[
    ParamDoc {
        name: "cone",
        default: "elliptic",
        unit: "-",
        doc: "friction cone; only elliptic is valid",
    },
    ParamDoc {
        name: "solver",
        default: "newton",
        unit: "-",
        doc: "solver; only newton is valid",
    },
    ParamDoc {
        name: "iterations",
        default: "model",
        unit: "-",
        doc: "maximum Newton iterations (MuJoCo default 100)",
    },
    ParamDoc {
        name: "tolerance",
        default: "model",
        unit: "-",
        doc: "tolerance on scaled gradient and Newton decrement (1e-8)",
    },
    ParamDoc {
        name: "ls_iterations",
        default: "model",
        unit: "-",
        doc: "maximum line-search evaluations (50)",
    },
    ParamDoc {
        name: "ls_tolerance",
        default: "model",
        unit: "-",
        doc: "line-search tolerance relative to tolerance (0.01)",
    },
    ParamDoc {
        name: "impratio",
        default: "model",
        unit: "-",
        doc: "frictional-to-normal impedance ratio (1; Genesis uses 100)",
    },
    ParamDoc {
        name: "warmstart",
        default: "model",
        unit: "-",
        doc: "start from the previous accelerations (true)",
    },
    ParamDoc {
        name: "refsafe",
        default: "model",
        unit: "-",
        doc: "raise solref time constants to at least 2 h (true)",
    },
    ParamDoc {
        name: "latch",
        default: "false",
        unit: "-",
        doc: "per-contact normal-force latch of Genesis PR #3381",
    },
    ParamDoc {
        name: "integrator",
        default: "euler",
        unit: "-",
        doc: "integrator: euler, implicitfast or implicit (MuJoCo's velocity-implicit updates)",
    },
];

/// Registry entry.
pub const ENTRY: FormulationEntry = FormulationEntry {
    name: "signorini",
    description: "Genesis' signorini resolution: soft_convex rows, friction disc bounded by the developed normal force",
    params: PARAMS,
    build: |v| {
        let p: SignoriniParams = parse_params("signorini", v)?;
        Signorini::new(p).map(|f| Box::new(f) as Box<dyn Formulation>)
    },
};

/// The signorini formulation.
#[derive(Debug, Clone)]
pub struct Signorini {
    inner: SoftConvex,
    latch: bool,
}

impl Signorini {
    /// Build with validated parameters.
    ///
    /// # Errors
    /// The pyramidal cone or the CG solver (the resolution is defined only for the elliptic
    /// cone and Newton), or an out-of-domain value.
    pub fn new(p: SignoriniParams) -> Result<Self, FormulationError> {
        let bad = |m: &str| FormulationError::BadParams {
            name: "signorini".into(),
            message: m.to_string(),
        };
        if p.cone.is_some_and(|c| c != Cone::Elliptic) {
            return Err(bad("cone must be elliptic: a pyramid mixes the normal into every edge row, so it has no separate friction disc (Genesis refuses it too)"));
        }
        if p.solver.is_some_and(|s| s != SolverKind::Newton) {
            return Err(bad("solver must be newton: CG does not reach the fixed point of the successive approximation (Genesis PR #3126)"));
        }
        let inner = SoftConvex::new(SoftConvexParams {
            cone: Some(Cone::Elliptic),
            solver: Some(SolverKind::Newton),
            iterations: p.iterations,
            tolerance: p.tolerance,
            ls_iterations: p.ls_iterations,
            ls_tolerance: p.ls_tolerance,
            impratio: p.impratio,
            warmstart: p.warmstart,
            refsafe: p.refsafe,
            integrator: Some(p.integrator.unwrap_or(Integrator::Euler)),
            ..SoftConvexParams::default()
        })
        .map_err(|e| match e {
            FormulationError::BadParams { message, .. } => FormulationError::BadParams {
                name: "signorini".into(),
                message,
            },
            other => other,
        })?;
        Ok(Self {
            inner,
            latch: p.latch,
        })
    }

    /// The soft_convex parameters the resolution runs on (elliptic cone, Newton).
    pub fn inner_params(&self) -> &SoftConvexParams {
        &self.inner.params
    }

    /// Whether the per-contact normal-force latch (Genesis PR #3381) is on.
    pub fn latch(&self) -> bool {
        self.latch
    }

    /// One step with its rows and forces (for tests and diagnostics).
    pub fn step_detail(
        &mut self,
        model: &Model,
        state: &mut State,
        u: &[f64],
        h: f64,
    ) -> (StepReport, Option<StepDetail>) {
        self.inner.step_with(
            model,
            state,
            u,
            h,
            Resolution::Signorini { latch: self.latch },
        )
    }
}

impl Formulation for Signorini {
    fn name(&self) -> &'static str {
        "signorini"
    }

    fn step(&mut self, model: &Model, state: &mut State, u: &[f64], h: f64) -> StepReport {
        self.step_detail(model, state, u, h).0
    }

    /// soft_convex's list ([`crate::features::collision`]) plus the model options signorini
    /// overrides: a `solver` other than Newton and an `integrator` other than Euler. The
    /// model's `cone` is not listed: signorini is defined on the elliptic cone (module doc), and
    /// the option's default (pyramidal) cannot be told from an explicit request.
    fn ignored_features(&self, model: &Model) -> Vec<crate::features::IgnoredFeature> {
        let mut out = crate::features::collision(model);
        out.extend(crate::features::noslip(
            model,
            "Genesis' signorini resolution has no post-solver, it steps without one",
        ));
        if model.options.solver != SolverKind::Newton {
            out.push(crate::features::IgnoredFeature::new(
                "option.solver",
                format!(
                    "the model asks for solver {:?}: signorini always solves with Newton",
                    model.options.solver
                ),
            ));
        }
        if self.inner.params.integrator == Some(Integrator::Euler) {
            out.extend(crate::features::integrator(
                model,
                "signorini integrates with semi-implicit Euler unless its `integrator` parameter says otherwise",
            ));
        } else if model.options.integrator != Integrator::Euler
            && self.inner.params.integrator != Some(model.options.integrator)
        {
            out.push(crate::features::IgnoredFeature::new(
                "option.integrator",
                format!(
                    "the model asks for integrator {:?}: signorini integrates with its `integrator` parameter, {:?}",
                    model.options.integrator,
                    self.inner.params.integrator.unwrap_or_default()
                ),
            ));
        }
        out
    }
}
