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
//!    eulerdamp), then positions from the new velocities.
//!
//! Scope notes: islands are merged into one problem whose convergence scale is
//! `1/Σ M_ii` over the constrained kinematic trees (identical to MuJoCo when there is one
//! island, as in every reference scene); the `J̇ v` term of connect/weld rows is not applied.

pub mod cost;
pub mod impedance;
pub mod invweight;
pub mod linesearch;
pub mod rows;
pub mod solver;

use nalgebra::{DMatrix, DVector, Vector3};
use serde::{Deserialize, Serialize};

use crate::actuation::actuator_forces;
use crate::collision::detect;
use crate::dynamics::{bias_forces, integrate_positions, mass_matrix, passive_forces};
use crate::formulation::{parse_params, ContactRecord, Formulation, FormulationEntry, FormulationError, ParamDoc, StepReport};
use crate::kinematics::forward_kinematics;
use crate::model::{Model, State};
use invweight::InvWeights;
pub use rows::Cone;
use rows::{assemble, RowSettings, Rows};
pub use solver::SolverKind;
use solver::{solve, Problem, SolverSettings};

/// The integrator (MuJoCo `integrator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Integrator {
    /// Semi-implicit Euler, with implicit joint damping when any joint is damped.
    Euler,
}

/// Parameters of `soft_convex` (MuJoCo `<option>` names and defaults, spec §A8).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SoftConvexParams {
    /// Friction cone: `pyramidal` or `elliptic`.
    pub cone: Cone,
    /// Primal solver: `newton` or `cg`.
    pub solver: SolverKind,
    /// Maximum solver iterations.
    pub iterations: usize,
    /// Solver tolerance (dimensionless, on scaled cost improvement and gradient).
    pub tolerance: f64,
    /// Maximum line-search evaluations per iteration.
    pub ls_iterations: usize,
    /// Line-search tolerance, relative to `tolerance`.
    pub ls_tolerance: f64,
    /// Ratio of frictional to normal constraint impedance (> 0).
    pub impratio: f64,
    /// Warm-start from the previous step's accelerations.
    pub warmstart: bool,
    /// Raise solref time constants to at least 2h.
    pub refsafe: bool,
    /// Integrator.
    pub integrator: Integrator,
    /// Replace every contact's solref by the direct-format solref that realizes a physical
    /// spring-damper along the normal ([`rows::physical_solref`]), with the geoms' penalty
    /// material `ke`, `kd` (the penalty formulation's contact) unless overridden below.
    pub physical_contact: bool,
    /// Override of the physical contact stiffness (N/m); implies `physical_contact`.
    pub ke: Option<f64>,
    /// Override of the physical contact damping (N s/m); implies `physical_contact`.
    pub kd: Option<f64>,
}

impl Default for SoftConvexParams {
    fn default() -> Self {
        Self {
            cone: Cone::Pyramidal,
            solver: SolverKind::Newton,
            iterations: 100,
            tolerance: 1e-8,
            ls_iterations: 50,
            ls_tolerance: 0.01,
            impratio: 1.0,
            warmstart: true,
            refsafe: true,
            integrator: Integrator::Euler,
            physical_contact: false,
            ke: None,
            kd: None,
        }
    }
}

/// Parameter documentation, in the order of [`SoftConvexParams`].
pub const PARAMS: &[ParamDoc] = &[
    ParamDoc { name: "cone", default: "pyramidal", unit: "-", doc: "friction cone: pyramidal or elliptic" },
    ParamDoc { name: "solver", default: "newton", unit: "-", doc: "primal solver: newton or cg" },
    ParamDoc { name: "iterations", default: "100", unit: "-", doc: "maximum solver iterations" },
    ParamDoc { name: "tolerance", default: "1e-8", unit: "-", doc: "solver tolerance on scaled improvement and gradient" },
    ParamDoc { name: "ls_iterations", default: "50", unit: "-", doc: "maximum line-search evaluations" },
    ParamDoc { name: "ls_tolerance", default: "0.01", unit: "-", doc: "line-search tolerance relative to tolerance" },
    ParamDoc { name: "impratio", default: "1.0", unit: "-", doc: "frictional-to-normal impedance ratio" },
    ParamDoc { name: "warmstart", default: "true", unit: "-", doc: "warm-start from the previous accelerations" },
    ParamDoc { name: "refsafe", default: "true", unit: "-", doc: "raise solref time constants to at least 2 h" },
    ParamDoc { name: "integrator", default: "euler", unit: "-", doc: "integrator (euler: semi-implicit, implicit damping)" },
    ParamDoc { name: "physical_contact", default: "false", unit: "-", doc: "map the geoms' penalty ke/kd to a direct-format solref per contact" },
    ParamDoc { name: "ke", default: "material", unit: "N/m", doc: "physical contact stiffness (implies physical_contact)" },
    ParamDoc { name: "kd", default: "material", unit: "N s/m", doc: "physical contact damping (implies physical_contact)" },
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
/// was last stepped with.
#[derive(Debug, Clone)]
pub struct SoftConvex {
    /// Parameters.
    pub params: SoftConvexParams,
    warm: Option<DVector<f64>>,
    inv: Option<(usize, usize, InvWeights)>,
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
    /// Non-positive tolerance, impratio or iteration counts.
    pub fn new(params: SoftConvexParams) -> Result<Self, FormulationError> {
        let bad = |m: String| FormulationError::BadParams { name: "soft_convex".into(), message: m };
        if !(params.tolerance.is_finite() && params.tolerance >= 0.0) {
            return Err(bad(format!("tolerance = {} must be finite and >= 0", params.tolerance)));
        }
        if !(params.impratio.is_finite() && params.impratio > 0.0) {
            return Err(bad(format!("impratio = {} must be finite and > 0", params.impratio)));
        }
        if !(params.ls_tolerance.is_finite() && params.ls_tolerance > 0.0) {
            return Err(bad(format!("ls_tolerance = {} must be finite and > 0", params.ls_tolerance)));
        }
        for (what, v) in [("ke", params.ke), ("kd", params.kd)] {
            if let Some(v) = v {
                if !(v.is_finite() && v >= 0.0) {
                    return Err(bad(format!("{what} = {v} must be finite and >= 0")));
                }
            }
        }
        if params.ls_iterations == 0 {
            return Err(bad("ls_iterations must be >= 1".into()));
        }
        Ok(Self { params, warm: None, inv: None })
    }

    /// Forget the warm start (MuJoCo's `mj_resetData` sets qacc_warmstart = 0).
    pub fn reset(&mut self) {
        self.warm = None;
    }

    fn inv_weights(&mut self, model: &Model) -> InvWeights {
        match &self.inv {
            Some((nq, nb, w)) if *nq == model.nq && *nb == model.bodies.len() && w.dof.len() == model.nv => w.clone(),
            _ => {
                let w = InvWeights::new(model);
                self.inv = Some((model.nq, model.bodies.len(), w.clone()));
                w
            }
        }
    }

    /// One step, returning the report and the step's rows and forces.
    pub fn step_detail(&mut self, model: &Model, state: &mut State, u: &[f64], h: f64) -> (StepReport, Option<StepDetail>) {
        if !state.is_finite() {
            return (StepReport::explicit(Vec::new()).check_divergence(state), None);
        }
        let p = self.params.clone();
        let kin = forward_kinematics(model, &state.q);
        let m = mass_matrix(model, &kin);
        let f_s = passive_forces(model, &state.q, &state.v) + actuator_forces(model, &state.q, &state.v, u)
            - bias_forces(model, &kin, &state.v);
        let Some(mchol) = m.clone().cholesky() else {
            let r = StepReport { diverged: Some(format!("mass matrix not positive definite at t = {:.6} s", state.t)), ..StepReport::default() };
            return (r, None);
        };
        let a0 = mchol.solve(&f_s);
        let contacts = detect(model, &kin);
        let inv = self.inv_weights(model);
        let physical = (p.physical_contact || p.ke.is_some() || p.kd.is_some()).then_some((p.ke, p.kd));
        let settings = RowSettings { cone: p.cone, impratio: p.impratio, h, refsafe: p.refsafe, physical };
        let rows = assemble(model, &kin, &state.q, &state.v, &contacts, &inv, &settings);

        let (qacc, force, iterations, gradient, converged) = if rows.kinds.is_empty() {
            (a0.clone(), DVector::zeros(0), 0, 0.0, true)
        } else {
            let scale = island_scale(model, &m, &rows.j);
            let problem = Problem { m: &m, f_s: &f_s, a0: &a0, rows: &rows, scale };
            let start = match (&self.warm, p.warmstart) {
                (Some(w), true) if w.len() == model.nv && w.iter().all(|x| x.is_finite()) => {
                    if problem.cost(w) > problem.cost(&a0) { a0.clone() } else { w.clone() }
                }
                _ => a0.clone(),
            };
            let sol = solve(&problem, start, &SolverSettings {
                kind: p.solver,
                iterations: p.iterations,
                tolerance: p.tolerance,
                ls_iterations: p.ls_iterations,
                ls_tolerance: p.ls_tolerance,
            });
            (sol.qacc, sol.force, sol.iterations, sol.gradient, sol.converged)
        };

        // Semi-implicit Euler; implicit joint damping when any joint is damped (eulerdamp).
        let damping = DVector::from_iterator(model.nv, (0..model.nv).map(|d| model.joints[model.dof_joint[d]].damping));
        let a_int = if damping.iter().any(|&b| b > 0.0) {
            let qfrc_constraint = rows.j.transpose() * &force;
            let mh = &m + DMatrix::from_diagonal(&(damping * h));
            mh.cholesky().map_or_else(|| qacc.clone(), |c| c.solve(&(&f_s + qfrc_constraint)))
        } else {
            qacc.clone()
        };
        state.v += &a_int * h;
        let v_new = state.v.clone();
        integrate_positions(model, &mut state.q, &v_new, h);
        state.t += h;
        self.warm = Some(qacc.clone());

        let records = contact_records(&rows, &force, &v_new, h);
        let report = StepReport { iterations, residual: gradient, converged, diverged: None, contacts: records }.check_divergence(state);
        (report, Some(StepDetail { rows, qacc, force }))
    }
}

/// MuJoCo's island scale `1/Σ M_ii` over the dofs of the kinematic trees that the rows touch.
fn island_scale(model: &Model, m: &DMatrix<f64>, j: &DMatrix<f64>) -> f64 {
    let root = |mut b: usize| {
        while model.bodies[b].parent != 0 {
            b = model.bodies[b].parent;
        }
        b
    };
    let mut touched = vec![false; model.bodies.len()];
    for d in 0..model.nv {
        if j.column(d).iter().any(|&x| x != 0.0) {
            touched[root(model.dof_body[d])] = true;
        }
    }
    let sum: f64 = (0..model.nv).filter(|&d| touched[root(model.dof_body[d])]).map(|d| m[(d, d)]).sum();
    1.0 / sum.max(impedance::MINVAL)
}

/// Contact records: forces in the contact frame (pyramid edges combined as MuJoCo's
/// `mj_contactForce`), impulse = h·force, velocity after the step.
fn contact_records(rows: &Rows, force: &DVector<f64>, v: &DVector<f64>, h: f64) -> Vec<ContactRecord> {
    rows.contacts
        .iter()
        .map(|b| {
            let mut f = Vector3::zeros();
            if b.pyramidal {
                for k in 1..b.dim {
                    let (fp, fm) = (force[b.first + 2 * (k - 1)], force[b.first + 2 * (k - 1) + 1]);
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
}
