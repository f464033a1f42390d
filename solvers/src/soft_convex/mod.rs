//! `soft_convex`: MuJoCo's soft convex constraint model, reproduced to round-off (spec
//! `soft_convex_and_signorini.md` §A; E. Todorov, "Convex and analytically-invertible dynamics
//! with contacts and constraints", ICRA 2014; MuJoCo documentation "Computation").
//!
//! Each step (MuJoCo's `mj_step` with the Euler integrator, §A0):
//!
//! 1. Kinematics, mass matrix M, collision, constraint rows J with impedance d, regularizer
//!    R = (1 − d)/d · Â and reference acceleration `aref = −B J v − K d (pos − margin)`
//!    ([`rows`], [`impedance`], [`invweight`]).
//! 2. Smooth dynamics: `f_s = passive − bias + actuation`, `a0 = M⁻¹ f_s`.
//! 3. Solve the convex primal problem
//!    `min_a ½ (a − a0)ᵀ M (a − a0) + Σ_i s_i(J_i a − aref_i)` ([`cost`]) with Newton or CG
//!    and the exact line search ([`solver`], [`linesearch`]), warm-started from the previous
//!    step's solution when that is cheaper than a0.
//! 4. Semi-implicit Euler: `v += h a` (with `(M + h B)⁻¹` when joints are damped, MuJoCo's
//!    eulerdamp), then positions from the new velocities; or, with `integrator: implicitfast`
//!    or `implicit` (the model's option or the parameter), MuJoCo's velocity-implicit update
//!    `(M − h D) a = qfrc_smooth + Jᵀ f` ([`crate::implicit`]).
//!
//! Constraint islands are solved one by one as MuJoCo does ([`islands`]; merged into one
//! problem with `<flag island="disable"/>` or when the no-slip post-solver runs). With
//! `noslip_iterations` > 0 MuJoCo's no-slip sweeps follow the solve ([`noslip`]), and the warm
//! start of the next step is the accelerations after them (as MuJoCo 4.0.1's
//! `qacc_warmstart`, measured on the pinched capsule). The reference acceleration of connect and weld rows
//! carries their velocity-product term, `aref −= J̇ v` (MuJoCo's `mj_Jdotv`;
//! [`crate::constraint::point_jdotv`] and the weld rotation's product rule; checked against
//! MuJoCo 4.0.1 on a closed chain and a free box connected or welded to an arm,
//! `scenarios/tests/soft_convex_general.rs`).

pub mod cost;
pub mod impedance;
pub mod invweight;
pub mod islands;
pub mod linesearch;
pub mod noslip;
pub mod rows;
pub mod solver;

use nalgebra::{DMatrix, DVector, Vector3};
use serde::{Deserialize, Serialize};

use crate::actuation::actuator_forces;
use crate::collision::detect;
use crate::dynamics::{integrate_positions, mass_matrix, smooth_forces};
use crate::formulation::{
    parse_params, ContactRecord, Formulation, FormulationEntry, FormulationError, ParamDoc,
    StepReport,
};
use crate::kinematics::forward_kinematics;
use crate::model::{Cone, Integrator, Model, SolverKind, State};
use invweight::InvWeights;
use rows::{assemble, RowSettings, Rows};
use solver::{solve, DiscBlock, Problem, Signorini, SolverSettings};

/// Parameters of `soft_convex`. Every solver option left unset (`null`, the default) takes the
/// model's own value (MuJoCo `<option>`, e.g. from an MJCF file; MuJoCo's defaults for built-in
/// scenes, spec §A8), so an MJCF model runs exactly as MuJoCo would run it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SoftConvexParams {
    /// Friction cone: `pyramidal` or `elliptic`.
    pub cone: Option<Cone>,
    /// Primal solver: `newton` or `cg` (`pgs` is not implemented).
    pub solver: Option<SolverKind>,
    /// Maximum solver iterations.
    pub iterations: Option<usize>,
    /// Solver tolerance (dimensionless, on scaled cost improvement and gradient).
    pub tolerance: Option<f64>,
    /// Maximum line-search evaluations per iteration.
    pub ls_iterations: Option<usize>,
    /// Line-search tolerance, relative to `tolerance`.
    pub ls_tolerance: Option<f64>,
    /// Ratio of frictional to normal constraint impedance (> 0).
    pub impratio: Option<f64>,
    /// Warm-start from the previous step's accelerations.
    pub warmstart: Option<bool>,
    /// Raise solref time constants to at least 2h.
    pub refsafe: Option<bool>,
    /// Integrator: `euler` (semi-implicit, implicit joint damping), `implicitfast` or `implicit`
    /// (MuJoCo's velocity-implicit updates, [`crate::implicit`]); `rk4` is not implemented.
    pub integrator: Option<Integrator>,
    /// Replace every contact's solref by the direct-format solref that realizes a physical
    /// spring-damper along the normal ([`rows::physical_solref`]), with the geoms' penalty
    /// material `ke`, `kd` (the penalty formulation's contact) unless overridden below.
    /// `None` (the default) means off unless `ke` or `kd` is given; `false` together with `ke`
    /// or `kd` is an error (they would have no effect).
    pub physical_contact: Option<bool>,
    /// Override of the physical contact stiffness (N/m); implies `physical_contact`.
    pub ke: Option<f64>,
    /// Override of the physical contact damping (N s/m); implies `physical_contact`.
    pub kd: Option<f64>,
}

/// Parameters resolved against a model's options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Resolved {
    pub(crate) cone: Cone,
    pub(crate) solver: SolverKind,
    pub(crate) iterations: usize,
    pub(crate) tolerance: f64,
    pub(crate) ls_iterations: usize,
    pub(crate) ls_tolerance: f64,
    pub(crate) impratio: f64,
    pub(crate) warmstart: bool,
    pub(crate) refsafe: bool,
    pub(crate) integrator: Integrator,
}

impl SoftConvexParams {
    pub(crate) fn resolve(&self, o: &crate::model::Options) -> Resolved {
        Resolved {
            cone: self.cone.unwrap_or(o.cone),
            solver: self.solver.unwrap_or(o.solver),
            iterations: self.iterations.unwrap_or(o.iterations),
            tolerance: self.tolerance.unwrap_or(o.tolerance),
            ls_iterations: self.ls_iterations.unwrap_or(o.ls_iterations),
            ls_tolerance: self.ls_tolerance.unwrap_or(o.ls_tolerance),
            impratio: self.impratio.unwrap_or(o.impratio),
            warmstart: self.warmstart.unwrap_or(!o.disable.warmstart),
            refsafe: self.refsafe.unwrap_or(!o.disable.refsafe),
            integrator: self.integrator.unwrap_or(o.integrator),
        }
    }
}

/// Parameter documentation, in the order of [`SoftConvexParams`].
pub const PARAMS: &[ParamDoc] = &[
    ParamDoc {
        name: "cone",
        default: "model",
        unit: "-",
        doc: "friction cone: pyramidal or elliptic (default: the model's option, pyramidal)",
    },
    ParamDoc {
        name: "solver",
        default: "model",
        unit: "-",
        doc: "primal solver: newton or cg (default: the model's option, newton)",
    },
    ParamDoc {
        name: "iterations",
        default: "model",
        unit: "-",
        doc: "maximum solver iterations (MuJoCo default 100)",
    },
    ParamDoc {
        name: "tolerance",
        default: "model",
        unit: "-",
        doc: "solver tolerance on scaled improvement and gradient (1e-8)",
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
        doc: "frictional-to-normal impedance ratio (1)",
    },
    ParamDoc {
        name: "warmstart",
        default: "model",
        unit: "-",
        doc: "warm-start from the previous accelerations (true)",
    },
    ParamDoc {
        name: "refsafe",
        default: "model",
        unit: "-",
        doc: "raise solref time constants to at least 2 h (true)",
    },
    ParamDoc {
        name: "integrator",
        default: "model",
        unit: "-",
        doc: "integrator: euler (semi-implicit, implicit joint damping), implicitfast or implicit (MuJoCo's velocity-implicit updates)",
    },
    ParamDoc {
        name: "physical_contact",
        default: "false",
        unit: "-",
        doc: "map the geoms' penalty ke/kd to a direct-format solref per contact",
    },
    ParamDoc {
        name: "ke",
        default: "material",
        unit: "N/m",
        doc: "physical contact stiffness (implies physical_contact)",
    },
    ParamDoc {
        name: "kd",
        default: "material",
        unit: "N s/m",
        doc: "physical contact damping (implies physical_contact)",
    },
];

/// Registry entry.
pub const ENTRY: FormulationEntry = FormulationEntry {
    name: "soft_convex",
    description: "MuJoCo's soft convex contact model (solref/solimp, pyramidal or elliptic cone, Newton or CG)",
    params: PARAMS,
    build: |v| {
        let p: SoftConvexParams = parse_params("soft_convex", v)?;
        SoftConvex::new(p).map(|f| Box::new(f) as Box<dyn Formulation>)
    },
};

/// The soft_convex formulation. Holds the warm start and the inverse weights of the model it
/// was last stepped with, with the model data they were computed from.
#[derive(Debug, Clone)]
pub struct SoftConvex {
    /// Parameters.
    pub params: SoftConvexParams,
    warm: Option<DVector<f64>>,
    inv: Option<(WeightsKey, InvWeights)>,
}

/// Everything [`InvWeights::new`] reads from a model: the bodies (tree, placement, mass, COM,
/// inertia), the joints (kind, anchor, axis, armature, reference) and `qpos0`. Two models with
/// equal keys have equal inverse weights; a model that differs in any of them (a mass, say)
/// gets its own. (Fixed: the cache was keyed by `nq` and the body count, so a formulation
/// stepped alternately on two models that differ only in a mass reused the first model's
/// weights for the second.)
#[derive(Debug, Clone, PartialEq)]
struct WeightsKey {
    bodies: Vec<crate::model::Body>,
    joints: Vec<crate::model::Joint>,
    qpos0: DVector<f64>,
}

impl WeightsKey {
    fn matches(&self, model: &Model) -> bool {
        self.bodies == model.bodies && self.joints == model.joints && self.qpos0 == model.qpos0
    }
}

/// Diagnostics of the last step, for tests and per-step logs.
#[derive(Debug, Clone)]
pub struct StepDetail {
    /// The rows of the step.
    pub rows: Rows,
    /// Solver accelerations.
    pub qacc: DVector<f64>,
    /// Row forces.
    pub force: DVector<f64>,
}

impl SoftConvex {
    /// Build with validated parameters.
    ///
    /// # Errors
    /// Non-positive tolerance, impratio or iteration counts; `ke` or `kd` with
    /// `physical_contact: false`.
    pub fn new(params: SoftConvexParams) -> Result<Self, FormulationError> {
        let bad = |m: String| FormulationError::BadParams {
            name: "soft_convex".into(),
            message: m,
        };
        let positive = [
            ("impratio", params.impratio),
            ("ls_tolerance", params.ls_tolerance),
        ];
        for (what, v) in positive {
            if let Some(v) = v {
                if !(v.is_finite() && v > 0.0) {
                    return Err(bad(format!("{what} = {v} must be finite and > 0")));
                }
            }
        }
        for (what, v) in [
            ("tolerance", params.tolerance),
            ("ke", params.ke),
            ("kd", params.kd),
        ] {
            if let Some(v) = v {
                if !(v.is_finite() && v >= 0.0) {
                    return Err(bad(format!("{what} = {v} must be finite and >= 0")));
                }
            }
        }
        if params.physical_contact == Some(false) {
            for (key, given) in [("ke", params.ke.is_some()), ("kd", params.kd.is_some())] {
                if given {
                    return Err(bad(format!(
                        "{key}: acts only with physical_contact (it implies it), but physical_contact is false; remove {key} or physical_contact: false"
                    )));
                }
            }
        }
        if params.ls_iterations == Some(0) {
            return Err(bad("ls_iterations must be >= 1".into()));
        }
        if params.solver == Some(SolverKind::Pgs) {
            return Err(bad("solver pgs is not implemented; use newton or cg".into()));
        }
        if params.integrator == Some(Integrator::Rk4) {
            return Err(bad(
                "integrator rk4 is not implemented; use euler, implicitfast or implicit".into(),
            ));
        }
        Ok(Self {
            params,
            warm: None,
            inv: None,
        })
    }

    /// Forget the warm start (MuJoCo's `mj_resetData` sets qacc_warmstart = 0).
    pub fn reset(&mut self) {
        self.warm = None;
    }

    /// Compute the inverse weights at qpos0 once per model: recomputed whenever any quantity
    /// they depend on differs from the last model's ([`WeightsKey`]); the step then borrows
    /// them without copying.
    fn ensure_inv_weights(&mut self, model: &Model) {
        let fresh = matches!(&self.inv, Some((key, _)) if key.matches(model));
        if !fresh {
            let key = WeightsKey {
                bodies: model.bodies.clone(),
                joints: model.joints.clone(),
                qpos0: model.qpos0.clone(),
            };
            self.inv = Some((key, InvWeights::new(model)));
        }
    }

    /// One step, returning the report and the step's rows and forces.
    pub fn step_detail(
        &mut self,
        model: &Model,
        state: &mut State,
        u: &[f64],
        h: f64,
    ) -> (StepReport, Option<StepDetail>) {
        self.step_with(model, state, u, h, Resolution::Convex)
    }

    /// One step under the given contact resolution: MuJoCo's convex model, or Genesis'
    /// signorini resolution (spec §B), which [`crate::signorini`] builds on this pipeline.
    pub fn step_with(
        &mut self,
        model: &Model,
        state: &mut State,
        u: &[f64],
        h: f64,
        resolution: Resolution,
    ) -> (StepReport, Option<StepDetail>) {
        if !state.is_finite() {
            return (
                StepReport::explicit(Vec::new()).check_divergence(state),
                None,
            );
        }
        let p = self.params.resolve(&model.options);
        if p.solver == SolverKind::Pgs || p.integrator == Integrator::Rk4 {
            // The model asks for what this formulation does not implement: say so in every
            // report rather than silently substituting another method.
            let what = if p.solver == SolverKind::Pgs {
                "solver pgs"
            } else {
                "integrator rk4"
            };
            let r = StepReport { diverged: Some(format!("soft_convex: the model's options ask for {what}, which is not implemented; set it in the formulation's parameters")), ..StepReport::default() };
            return (r, None);
        }
        let kin = forward_kinematics(model, &state.q);
        let m = mass_matrix(model, &kin);
        let f_s = smooth_forces(
            model,
            &kin,
            &state.q,
            &state.v,
            &actuator_forces(model, &state.q, &state.v, u),
        );
        let Some(mchol) = m.clone().cholesky() else {
            let r = StepReport {
                diverged: Some(format!(
                    "mass matrix not positive definite at t = {:.6} s",
                    state.t
                )),
                ..StepReport::default()
            };
            return (r, None);
        };
        let a0 = mchol.solve(&f_s);
        let contacts = if model.options.disable.contact {
            Vec::new()
        } else {
            detect(model, &kin)
        };
        self.ensure_inv_weights(model);
        let inv = &self.inv.as_ref().expect("set just above").1;
        let sp = &self.params;
        let physical = (sp.physical_contact == Some(true) || sp.ke.is_some() || sp.kd.is_some())
            .then_some((sp.ke, sp.kd));
        let settings = RowSettings {
            cone: p.cone,
            impratio: p.impratio,
            h,
            refsafe: p.refsafe,
            physical,
            disable: model.options.disable,
        };
        let mut rows = assemble(model, &kin, &state.q, &state.v, &contacts, inv, &settings);
        let signorini = match resolution {
            Resolution::Convex => None,
            Resolution::Signorini { latch } => Some(signorini_blocks(&mut rows, p.impratio, latch)),
        };

        let (qacc, force, iterations, gradient, converged) = if rows.kinds.is_empty() {
            (a0.clone(), DVector::zeros(0), 0, 0.0, true)
        } else {
            // Genesis' signorini solves one problem; MuJoCo one per island unless disabled or
            // the no-slip post-solver runs (MuJoCo 4.0.1 solves monolithically then).
            let noslip = model.options.noslip_iterations > 0 && signorini.is_none();
            let per_island = signorini.is_none() && !model.options.disable.island && !noslip;
            // Per island each sub-problem gets its own scale (`solve_islands`); the whole
            // problem's is then read by nothing (the warm-start cost does not use it).
            let scale = if per_island {
                f64::NAN
            } else if signorini.is_some() {
                island_scale(model, &m, &rows.j)
            } else {
                monolithic_scale(model, inv)
            };
            let problem = Problem {
                m: &m,
                f_s: &f_s,
                a0: &a0,
                rows: &rows,
                scale,
                signorini: signorini.as_ref(),
            };
            // The warm start is chosen on the whole system (spec §A5 "Warmstart").
            let start = match (&self.warm, p.warmstart) {
                // Genesis' signorini always starts from the previous accelerations (spec §B).
                (Some(w), true)
                    if w.len() == model.nv
                        && w.iter().all(|x| x.is_finite())
                        && signorini.is_some() =>
                {
                    w.clone()
                }
                (Some(w), true) if w.len() == model.nv && w.iter().all(|x| x.is_finite()) => {
                    if problem.cost(w) > problem.cost(&a0) {
                        a0.clone()
                    } else {
                        w.clone()
                    }
                }
                _ => a0.clone(),
            };
            let settings = SolverSettings {
                kind: p.solver,
                iterations: p.iterations,
                tolerance: p.tolerance,
                ls_iterations: p.ls_iterations,
                ls_tolerance: p.ls_tolerance,
            };
            if per_island {
                solve_islands(model, &problem, &start, &settings)
            } else {
                let sol = solve(&problem, start, &settings);
                let (mut qacc, mut force) = (sol.qacc, sol.force);
                if noslip {
                    // The no-slip sweeps on the friction forces; a = a₀ + M⁻¹ Jᵀ f.
                    let minv_jt = mchol.solve(&rows.j.transpose());
                    noslip::solve(
                        &rows,
                        &minv_jt,
                        &a0,
                        &mut force,
                        &noslip::NoSlip {
                            iterations: model.options.noslip_iterations,
                            tolerance: model.options.noslip_tolerance,
                            scale,
                        },
                    );
                    qacc = &a0 + &minv_jt * &force;
                }
                (qacc, force, sol.iterations, sol.gradient, sol.converged)
            }
        };

        // Semi-implicit Euler; implicit joint damping when any joint is damped (eulerdamp). Or
        // MuJoCo's velocity-implicit update (mj_implicitSkip).
        let damping = DVector::from_iterator(
            model.nv,
            (0..model.nv).map(|d| model.joints[model.dof_joint[d]].damping),
        );
        let a_int = if p.integrator != Integrator::Euler {
            let qfrc = &f_s + rows.j.transpose() * &force;
            let mh = crate::implicit::update_matrix(
                model,
                &kin,
                &m,
                &state.q,
                &state.v,
                u,
                h,
                p.integrator,
            );
            match crate::implicit::update_accelerations(mh, &qfrc) {
                Some(a) => a,
                None => {
                    let r = StepReport {
                        diverged: Some(format!(
                            "soft_convex: the {:?} update matrix M - h D is singular at t = {:.6} s",
                            p.integrator, state.t
                        )),
                        ..StepReport::default()
                    };
                    return (r, None);
                }
            }
        } else if damping.iter().any(|&b| b > 0.0) {
            let qfrc_constraint = rows.j.transpose() * &force;
            let mh = &m + DMatrix::from_diagonal(&(damping * h));
            mh.cholesky()
                .map_or_else(|| qacc.clone(), |c| c.solve(&(&f_s + qfrc_constraint)))
        } else {
            qacc.clone()
        };
        state.v += &a_int * h;
        let v_new = state.v.clone();
        integrate_positions(model, &mut state.q, &v_new, h);
        state.t += h;
        self.warm = Some(qacc.clone());

        let records = contact_records(&rows, &force, &v_new, h);
        let report = StepReport {
            iterations,
            residual: gradient,
            converged,
            best_iterate: iterations,
            diverged: None,
            contacts: records,
        }
        .check_divergence(state);
        (report, Some(StepDetail { rows, qacc, force }))
    }
}

/// How contacts are resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// MuJoCo's soft convex model (§A).
    Convex,
    /// Genesis' signorini resolution (§B); `latch` selects the per-contact latch of PR #3381.
    Signorini {
        /// Use the per-contact normal-force latch.
        latch: bool,
    },
}

/// Turn every elliptic contact block into Genesis' signorini rows (spec §B): the normal row a
/// plain one-sided quadratic, each friction block (sliding {t1, t2}, torsional {spin}, rolling
/// {roll1, roll2}) a Huber disc whose radius is set per iterate by the solver. Friction rows all
/// get `R = R_normal / impratio` (no μ²/μ_k² rescaling in this mode).
fn signorini_blocks(rows: &mut Rows, impratio: f64, latch: bool) -> Signorini {
    let mut blocks = Vec::new();
    for b in &rows.contacts {
        let n = b.first;
        rows.kinds[n] = cost::RowCost::Inequality;
        let r1 = rows.r[n] / impratio.max(impedance::MINVAL);
        for k in 1..b.dim {
            rows.r[n + k] = r1;
            rows.d[n + k] = 1.0 / r1;
        }
        // Blocks: (first row offset, size, coefficient).
        let spans: &[(usize, usize, f64)] = &[
            (1, 2, b.friction[0]),
            (3, 1, b.friction[2]),
            (4, 2, b.friction[3]),
        ];
        for &(off, dim, mu) in spans {
            if off + dim <= b.dim {
                rows.kinds[n + off] = cost::RowCost::Disc { dim, radius: 0.0 };
                for j in 1..dim {
                    rows.kinds[n + off + j] = cost::RowCost::BlockMember;
                }
                blocks.push(DiscBlock {
                    normal: n,
                    first: n + off,
                    mu,
                });
            }
        }
    }
    Signorini { blocks, latch }
}

/// MuJoCo's scale of one problem for all constrained dofs (`<flag island="disable"/>`, or
/// with the no-slip post-solver): `1/(meaninertia · max(1, nv))` with
/// `meaninertia = trace(M(qpos0))/nv` (spec §A5), from the trace cached with the model's
/// inverse weights.
fn monolithic_scale(model: &Model, inv: &InvWeights) -> f64 {
    let nv = model.nv.max(1) as f64;
    let meaninertia = inv.mass_trace / nv;
    1.0 / (meaninertia * nv).max(impedance::MINVAL)
}

/// Solve `problem` island by island ([`islands`]; spec §A5 "Islands"): each island's dofs and
/// rows as a problem of its own, from `start`'s entries on its dofs, with the scale
/// `1/Σ M_ii` over its dofs; dofs in no island keep `a0`. Returns (qacc, row forces, the most
/// iterations of any island, the largest final scaled gradient, whether every island converged).
fn solve_islands(
    model: &Model,
    problem: &Problem<'_>,
    start: &DVector<f64>,
    settings: &SolverSettings,
) -> (DVector<f64>, DVector<f64>, usize, f64, bool) {
    let mut qacc = problem.a0.clone();
    let mut force = DVector::zeros(problem.rows.kinds.len());
    let (mut iterations, mut gradient, mut converged) = (0, 0.0f64, true);
    for island in islands::islands(model, &problem.rows.j) {
        let (dofs, rows) = (&island.dofs, &island.rows);
        let pick =
            |v: &DVector<f64>| DVector::from_iterator(dofs.len(), dofs.iter().map(|&d| v[d]));
        let m = DMatrix::from_fn(dofs.len(), dofs.len(), |a, b| problem.m[(dofs[a], dofs[b])]);
        let (f_s, a0) = (pick(problem.f_s), pick(problem.a0));
        let sub_rows = problem.rows.select(rows, dofs);
        let scale = 1.0
            / dofs
                .iter()
                .map(|&d| problem.m[(d, d)])
                .sum::<f64>()
                .max(impedance::MINVAL);
        let sub = Problem {
            m: &m,
            f_s: &f_s,
            a0: &a0,
            rows: &sub_rows,
            scale,
            signorini: None,
        };
        let sol = solve(&sub, pick(start), settings);
        for (k, &d) in dofs.iter().enumerate() {
            qacc[d] = sol.qacc[k];
        }
        for (k, &r) in rows.iter().enumerate() {
            force[r] = sol.force[k];
        }
        iterations = iterations.max(sol.iterations);
        gradient = gradient.max(sol.gradient);
        converged &= sol.converged;
    }
    (qacc, force, iterations, gradient, converged)
}

/// MuJoCo's island scale `1/Σ M_ii` over the dofs of the kinematic trees that the rows touch.
fn island_scale(model: &Model, m: &DMatrix<f64>, j: &DMatrix<f64>) -> f64 {
    let tree = islands::dof_trees(model);
    let mut touched = vec![false; model.bodies.len()];
    for d in 0..model.nv {
        if j.column(d).iter().any(|&x| x != 0.0) {
            touched[tree[d]] = true;
        }
    }
    let sum: f64 = (0..model.nv)
        .filter(|&d| touched[tree[d]])
        .map(|d| m[(d, d)])
        .sum();
    1.0 / sum.max(impedance::MINVAL)
}

/// Contact records: forces in the contact frame (pyramid edges combined as MuJoCo's
/// `mj_contactForce`), impulse = h·force, velocity after the step.
fn contact_records(
    rows: &Rows,
    force: &DVector<f64>,
    v: &DVector<f64>,
    h: f64,
) -> Vec<ContactRecord> {
    rows.contacts
        .iter()
        .map(|b| {
            let mut f = Vector3::zeros();
            if b.pyramidal {
                for k in 1..b.dim {
                    let (fp, fm) = (
                        force[b.first + 2 * (k - 1)],
                        force[b.first + 2 * (k - 1) + 1],
                    );
                    f[0] += fp + fm;
                    if k < 3 {
                        f[k] = b.friction[k - 1] * (fp - fm);
                    }
                }
            } else {
                for k in 0..b.dim.min(3) {
                    f[k] = force[b.first + k];
                }
            }
            let vel = b.frame_jacobian.rows(0, b.dim.min(3)) * v;
            let mut velocity = Vector3::zeros();
            velocity.rows_mut(0, vel.len()).copy_from(&vel);
            ContactRecord {
                geoms: b.contact.geoms,
                point: b.contact.point,
                frame: b.contact.frame,
                gap: b.contact.gap,
                mu: b.friction[0],
                impulse: f * h,
                velocity,
            }
        })
        .collect()
}

impl Formulation for SoftConvex {
    fn name(&self) -> &'static str {
        "soft_convex"
    }

    fn step(&mut self, model: &Model, state: &mut State, u: &[f64], h: f64) -> StepReport {
        self.step_detail(model, state, u, h).0
    }

    /// Only what collision detection does not handle ([`crate::features::collision`]): every
    /// constraint kind, condim and flag is modelled, and a solver or integrator option it does
    /// not implement makes every step's report say so (`diverged`).
    fn ignored_features(&self, model: &Model) -> Vec<crate::features::IgnoredFeature> {
        crate::features::collision(model)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// `ke`/`kd` imply `physical_contact`; given with an explicit `physical_contact: false`
    /// they would do nothing: an error naming the key. Without `physical_contact`, or with
    /// `true`, they are accepted.
    #[test]
    fn physical_contact_overrides_with_physical_contact_off_are_errors_naming_the_key() {
        for key in ["ke", "kd"] {
            let p = json!({"physical_contact": false, key: 1e5});
            let err = crate::formulation::build("soft_convex", &p)
                .err()
                .unwrap()
                .to_string();
            assert!(
                err.starts_with(&format!(
                    "formulation 'soft_convex': {key}: acts only with physical_contact"
                )),
                "{err}"
            );
            for ok in [
                json!({key: 1e5}),
                json!({"physical_contact": true, key: 1e5}),
            ] {
                assert!(
                    crate::formulation::build("soft_convex", &ok).is_ok(),
                    "{ok}"
                );
            }
        }
        assert!(
            crate::formulation::build("soft_convex", &json!({"physical_contact": false})).is_ok()
        );
    }
}
