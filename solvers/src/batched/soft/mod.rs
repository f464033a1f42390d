//! Batched `soft_convex` and `signorini` (issue 16): MuJoCo's soft convex model and Genesis'
//! signorini resolution for many worlds at once, the cpu engine's step
//! ([`crate::soft_convex::SoftConvex::step_with`]; spec `soft_convex_and_signorini.md` §A, §B)
//! as one pure function of tensors ([`step`]), so that burn's autodiff differentiates whole
//! rollouts through every solver and line-search iteration.
//!
//! One step, per world, in the cpu engine's order:
//!
//! 1. kinematics, mass matrix M and its Cholesky factor, smooth force
//!    `f_s = passive + actuation − bias`, `a0 = M⁻¹ f_s`;
//! 2. contact candidates of the plane pairs ([`crate::batched::collision`]) and the row slots
//!    ([`rows`]): J, impedance, R, D, aref, with both solref formats, solimp and impratio;
//!    pyramidal or elliptic cones; signorini turns each elliptic block into a one-sided normal
//!    row and friction discs ([`signorini_rows`]);
//! 3. the warm start (the previous step's accelerations where cheaper than a0; signorini
//!    always), then Newton (a dense per-world Cholesky of the small Hessian written as tensor
//!    operations, [`crate::batched::dynamics::cholesky_factor`]) or CG with MuJoCo's exact line
//!    search ([`solver`]), each world masked once it stops;
//! 4. semi-implicit Euler, with `(M + h B)⁻¹` when joints are damped (MuJoCo's eulerdamp), or
//!    `implicitfast`'s `(M − h D)⁻¹` where D is the servos' and dampers' diagonal
//!    ([`SoftBatch::update_damping`]).
//!
//! Worlds without any row take `a0` exactly, as the cpu engine skips the solve there. The
//! `implicit` integrator, `implicitfast` on a model with a standalone free body or a clamped
//! servo, the physical contact mapping and the signorini latch are not batched: [`SoftBatch::new`] and [`crate::batched::soft_batch`] refuse them
//! with a message naming the parameter.

pub mod cost;
pub mod line_packed;
pub mod pieces;
pub mod rows;
pub mod solver;
pub mod stepper;
pub mod sweep;

pub use stepper::BatchedSoft;

use burn_tensor::backend::Backend;

use super::carry::{Carry, Mapper};
use super::collision::{all_candidates, Candidate, Outside};
use super::dynamics::{
    cholesky_apply, cholesky_factor, cholesky_solve, integrate_positions, mass_matrix, smooth,
};
use super::scalar::{M, S};
use crate::compiled::CompiledModel;
use crate::model::Model;
use crate::soft_convex::impedance::MINVAL;
use crate::soft_convex::invweight::InvWeights;
use cost::Kind;
use rows::Rows;
use solver::{seq_dot, Problem};

/// A model compiled for the batched soft solvers: constants, resolved options, inverse
/// weights at qpos0.
#[derive(Debug, Clone)]
pub struct SoftBatch {
    /// The model.
    pub model: Model,
    /// Its pairs and materials.
    pub compiled: CompiledModel,
    /// Inverse weights at qpos0 (MuJoCo `body_invweight0`, `dof_invweight0`).
    pub inv: InvWeights,
    /// Row settings except the timestep.
    pub cone: crate::model::Cone,
    /// impratio.
    pub impratio: f64,
    /// refsafe.
    pub refsafe: bool,
    /// Warm start.
    pub warmstart: bool,
    /// Solver settings.
    pub solver: solver::Settings,
    /// Genesis' signorini resolution instead of MuJoCo's convex model.
    pub signorini: bool,
    /// Per dof, the diagonal `B` of the velocity update `(M + h B) a = f_s + Jᵀ f` (N s/m or
    /// N m s/rad): joint damping (MuJoCo's eulerdamp), plus `kv gear²` of every servo on the
    /// dof under `implicitfast` (`−D` of [`crate::implicit`]: on a model without standalone
    /// free bodies or clamped servos, which [`SoftBatch::new`] refuses, D is that diagonal).
    pub update_damping: Vec<f64>,
    /// Whether the velocity update solves with `M + h B` (`implicitfast`, or any damped joint).
    pub implicit_update: bool,
    /// Drop, in each step, the contact candidates that no world of the batch has (one
    /// readback per candidate): their rows would be masked out in every world, so the result
    /// is the same to the last bit, with fewer operations (and a shorter tape). Off by
    /// default: the program then has the same operations in every step (MJX's static graph,
    /// no readback on a GPU).
    pub skip_idle_candidates: bool,
}

impl SoftBatch {
    /// Compile `model` for soft_convex parameters `p` (resolved against the model's options);
    /// `signorini` selects Genesis' resolution (the parameters then come from
    /// [`crate::signorini::Signorini::inner_params`]).
    ///
    /// # Errors
    /// A setting the batched engine does not implement, named: the `implicit` integrator,
    /// `implicitfast` with a standalone free body or a servo with a force range, the physical
    /// contact mapping.
    pub fn new(
        model: &Model,
        p: &crate::soft_convex::SoftConvexParams,
        signorini: bool,
    ) -> Result<Self, String> {
        use crate::model::{ActuatorKind, Integrator};
        let r = p.resolve(&model.options);
        if r.integrator == Integrator::Implicit {
            return Err(
                "integrator implicit: the batched soft solvers integrate with euler or implicitfast (or run on the cpu engine)"
                    .into(),
            );
        }
        if r.integrator == Integrator::ImplicitFast {
            if let Some(&j) = crate::implicit::standalone_free_joints(model).first() {
                return Err(format!(
                    "integrator implicitfast with the standalone free body of joint '{}': its bias derivative (MuJoCo's mjd_freeMhat) is not batched; use euler or the cpu engine",
                    model.joints[j].name
                ));
            }
            let servo_clamped = model
                .actuators
                .iter()
                .find(|a| a.force_range.is_some() && !matches!(a.kind, ActuatorKind::Motor));
            if let Some(a) = servo_clamped {
                return Err(format!(
                    "integrator implicitfast with actuator '{}' (a servo with a force range, whose derivative the clamp cuts): not batched; use euler or the cpu engine",
                    a.name
                ));
            }
        }
        if p.physical_contact == Some(true) || p.ke.is_some() || p.kd.is_some() {
            return Err("physical_contact (ke, kd): not batched; run on the cpu engine".into());
        }
        let mut update_damping: Vec<f64> = (0..model.nv)
            .map(|d| model.joints[model.dof_joint[d]].damping)
            .collect();
        let fast = r.integrator == Integrator::ImplicitFast;
        if fast {
            for a in &model.actuators {
                let kv = match a.kind {
                    ActuatorKind::Motor => continue,
                    ActuatorKind::PositionServo { kv, .. } | ActuatorKind::VelocityServo { kv } => {
                        kv
                    }
                };
                update_damping[model.joints[a.joint].dof_adr] += kv * a.gear * a.gear;
            }
        }
        let implicit_update = fast || update_damping.iter().any(|&b| b > 0.0);
        Ok(Self {
            model: model.clone(),
            compiled: CompiledModel::new(model),
            inv: InvWeights::new(model),
            cone: r.cone,
            impratio: r.impratio,
            refsafe: r.refsafe,
            warmstart: r.warmstart,
            solver: solver::Settings {
                newton: r.solver == crate::model::SolverKind::Newton,
                iterations: r.iterations,
                tolerance: r.tolerance,
                ls_iterations: r.ls_iterations,
                ls_tolerance: r.ls_tolerance,
                early_exit: true,
                static_iterations: false,
            },
            signorini,
            update_damping,
            implicit_update,
            skip_idle_candidates: false,
        })
    }
}

/// The result of [`step`], per world.
pub struct StepOut<B: Backend> {
    /// Positions after the step `(nq)`.
    pub q: Vec<S<B>>,
    /// Velocities after the step `(nv)`.
    pub v: Vec<S<B>>,
    /// The solver's accelerations (the next step's warm start) `(nv)`.
    pub qacc: Vec<S<B>>,
    /// The rows of the step.
    pub rows: Rows<B>,
    /// Row forces `(nrow)`.
    pub force: Vec<S<B>>,
    /// Iterations used.
    pub iterations: S<B>,
    /// Final scaled gradient norm.
    pub gradient: S<B>,
    /// Whether the solver met a stopping test (worlds without rows: true).
    pub converged: M<B>,
    /// The worlds where a pair left the batched closed forms ([`Outside`]).
    pub outside: Vec<Outside<B>>,
}

/// Genesis' signorini rows (the cpu engine's `signorini_blocks`): each elliptic contact's
/// normal row becomes a plain one-sided quadratic, its friction rows get `R = R_n/impratio`,
/// and each friction block (sliding, torsional, rolling) becomes a disc of radius `μ_b f_n`.
fn signorini_rows<B: Backend>(rows: &mut Rows<B>, impratio: f64) {
    for c in &rows.contacts {
        let n = c.first;
        rows.rows[n].kind = Kind::Inequality;
        let r1 = &rows.rows[n].r / impratio.max(MINVAL);
        for k in 1..c.dim {
            rows.rows[n + k].r = r1.clone();
            rows.rows[n + k].d = S::C(1.0) / &r1;
        }
        for &(off, dim, mu) in &[
            (1, 2, c.friction[0]),
            (3, 1, c.friction[2]),
            (4, 2, c.friction[3]),
        ] {
            if off + dim <= c.dim {
                rows.rows[n + off].kind = Kind::Disc { dim, normal: n, mu };
                for j in 1..dim {
                    rows.rows[n + off + j].kind = Kind::Member;
                }
            }
        }
    }
}

/// The problem of one step's solve, owned ([`solver::Problem`] borrows it), per world.
#[derive(Clone)]
pub struct ProblemData<B: Backend> {
    /// Mass matrix `(nv × nv)`, both halves.
    pub mass: Vec<Vec<S<B>>>,
    /// Its Cholesky factor (lower).
    pub mass_l: Vec<Vec<S<B>>>,
    /// Smooth force f_s `(nv)`.
    pub f_s: Vec<S<B>>,
    /// Unconstrained acceleration a0 = M⁻¹ f_s `(nv)`.
    pub a0: Vec<S<B>>,
    /// The row slots.
    pub rows: Vec<cost::Row<B>>,
    /// Island scale 1/Σ M_ii (1 in a step where no world has a row: unused there).
    pub scale: S<B>,
}

impl<B: Backend> ProblemData<B> {
    /// The solver's view, with Genesis' signorini resolution or MuJoCo's convex model.
    pub fn problem(&self, signorini: bool) -> Problem<'_, B> {
        Problem {
            mass: &self.mass,
            mass_l: &self.mass_l,
            f_s: &self.f_s,
            a0: &self.a0,
            rows: &self.rows,
            scale: self.scale.clone(),
            signorini,
        }
    }
}

impl<B: Backend> Carry<B> for ProblemData<B> {
    type On<C: Backend> = ProblemData<C>;
    fn map<C: Backend>(&self, f: &mut dyn Mapper<B, C>) -> ProblemData<C> {
        ProblemData {
            mass: self.mass.map(f),
            mass_l: self.mass_l.map(f),
            f_s: self.f_s.map(f),
            a0: self.a0.map(f),
            rows: self.rows.map(f),
            scale: f.s(&self.scale),
        }
    }
}

/// A step up to its solve (items 1–3 of the module doc, before the iterations).
pub struct Setup<B: Backend> {
    /// The solve's problem.
    pub data: ProblemData<B>,
    /// The contact slots of the rows.
    pub contacts: Vec<rows::ContactSlot<B>>,
    /// Whether any row is active in each world (the worlds that solve).
    pub live: M<B>,
    /// The solver's start: the warm start where taken, else a0.
    pub start: Vec<S<B>>,
    /// The worlds where a pair left the batched closed forms ([`Outside`]).
    pub outside: Vec<Outside<B>>,
}

/// Items 1–3 of the module doc up to the solver's start, for positions `q` `(nq)`,
/// velocities `v` `(nv)`, controls `u` `(nu)`, the previous step's accelerations `warm`, timestep
/// `h` (s).
pub fn setup<B: Backend>(
    b: &SoftBatch,
    q: &[S<B>],
    v: &[S<B>],
    u: &[S<B>],
    warm: Option<&[S<B>]>,
    h: f64,
) -> Setup<B> {
    let model = &b.model;
    let (k, inertia, f_s) = smooth(model, q, v, u);
    let mass = mass_matrix(model, &k, &inertia);
    let mass_l = cholesky_factor(&mass);
    let a0 = cholesky_apply(&mass_l, &f_s);

    let (mut cands, outside): (Vec<Candidate<B>>, Vec<Outside<B>>) =
        if model.options.disable.contact {
            (Vec::new(), Vec::new())
        } else {
            all_candidates(model, &b.compiled, &k)
        };
    if b.skip_idle_candidates {
        cands.retain(|c| c.found.any_true());
    }
    let settings = rows::Settings {
        cone: if b.signorini {
            crate::model::Cone::Elliptic
        } else {
            b.cone
        },
        impratio: b.impratio,
        h,
        refsafe: b.refsafe,
        disable: model.options.disable,
    };
    let mut rows = rows::assemble(model, &b.compiled, &k, q, v, &cands, &b.inv, &settings);
    if b.signorini {
        signorini_rows(&mut rows, b.impratio);
    }
    let live = rows.any.clone();
    let Rows { rows, contacts, .. } = rows;
    if matches!(live, M::C(false)) {
        let start = a0.clone();
        return Setup {
            data: ProblemData {
                mass,
                mass_l,
                f_s,
                a0,
                rows,
                scale: S::C(1.0),
            },
            contacts,
            live,
            start,
            outside,
        };
    }
    let scale = rows::island_scale(model, &mass, &rows);
    let data = ProblemData {
        mass,
        mass_l,
        f_s,
        a0,
        rows,
        scale,
    };
    let problem = data.problem(b.signorini);
    let a0 = &data.a0;
    let start = match warm {
        Some(w) if b.warmstart => {
            // As the cpu engine: a warm start with a non-finite entry is not used
            // (x − x is 0 exactly for finite x, NaN for ±∞ and NaN).
            let finite = w
                .iter()
                .fold(M::C(true), |ok, x| ok.and(&(x - x).eq_c(0.0)));
            // Genesis' signorini always starts from it; MuJoCo where it is cheaper than a0.
            let take = if b.signorini {
                finite
            } else {
                finite.and(&problem.cost(w).gt(&problem.cost(a0)).not())
            };
            w.iter().zip(a0).map(|(w, a)| take.select(w, a)).collect()
        }
        _ => a0.clone(),
    };
    Setup {
        data,
        contacts,
        live,
        start,
        outside,
    }
}

/// A step's solver result, per world: accelerations `(nv)`, row forces `(nrow)`, iterations,
/// final scaled gradient norm, whether a stopping test was met.
pub type Solved<B> = (Vec<S<B>>, Vec<S<B>>, S<B>, S<B>, M<B>);

/// The solution in the worlds `live`; worlds without rows take `a0` with zero forces and count
/// as converged, as the cpu engine skips the solve there.
pub fn masked<B: Backend>(live: &M<B>, sol: solver::Solution<B>, a0: &[S<B>]) -> Solved<B> {
    let qacc: Vec<S<B>> = sol
        .qacc
        .iter()
        .zip(a0)
        .map(|(x, a)| live.select(x, a))
        .collect();
    let force = sol
        .force
        .iter()
        .map(|f| live.select(f, &S::zero()))
        .collect();
    (
        qacc,
        force,
        sol.iterations,
        live.select(&sol.gradient, &S::zero()),
        sol.converged.or(&live.not()),
    )
}

/// Item 4 of the module doc: the positions and velocities after the step from `(q, v)`, the
/// step's problem, its accelerations `qacc` and row forces `force`.
pub fn integrate<B: Backend>(
    b: &SoftBatch,
    q: &[S<B>],
    v: &[S<B>],
    data: &ProblemData<B>,
    qacc: &[S<B>],
    force: &[S<B>],
    h: f64,
) -> (Vec<S<B>>, Vec<S<B>>) {
    let nv = b.model.nv;
    // Semi-implicit Euler, with implicit joint damping when any joint is damped (eulerdamp)
    // and the servos' velocity derivative under implicitfast (`SoftBatch::update_damping`).
    let a_int = if b.implicit_update {
        let mut mh = data.mass.clone();
        for (d, row) in mh.iter_mut().enumerate() {
            row[d] = &row[d] + b.update_damping[d] * h;
        }
        let rhs: Vec<S<B>> = (0..nv)
            .map(|d| &data.f_s[d] + &seq_dot(data.rows.iter().map(|r| &r.jac[d]), force.iter()))
            .collect();
        cholesky_solve(&mh, &rhs)
    } else {
        qacc.to_vec()
    };
    let v_new: Vec<S<B>> = v.iter().zip(&a_int).map(|(v, a)| v + &(a * h)).collect();
    let mut q_new = q.to_vec();
    integrate_positions(&b.model, &mut q_new, &v_new, h);
    (q_new, v_new)
}

/// One step of every world: positions `q` `(nq)`, velocities `v` `(nv)`, controls `u` `(nu)`,
/// the previous step's accelerations `warm` (`None` on the first step), timestep `h` (s):
/// [`setup`], [`solver::solve`], [`integrate`]. Pure: differentiable end to end on an autodiff
/// backend.
pub fn step<B: Backend>(
    b: &SoftBatch,
    q: &[S<B>],
    v: &[S<B>],
    u: &[S<B>],
    warm: Option<&[S<B>]>,
    h: f64,
) -> StepOut<B> {
    let s = setup(b, q, v, u, warm, h);
    let (qacc, force, iterations, gradient, converged) = if matches!(s.live, M::C(false)) {
        let n = s.data.rows.len();
        (
            s.data.a0.clone(),
            vec![S::zero(); n],
            S::zero(),
            S::zero(),
            M::C(true),
        )
    } else {
        let problem = s.data.problem(b.signorini);
        let sol = solver::solve(&problem, s.start, &s.live, &b.solver);
        masked(&s.live, sol, &s.data.a0)
    };
    let (q_new, v_new) = integrate(b, q, v, &s.data, &qacc, &force, h);
    StepOut {
        q: q_new,
        v: v_new,
        qacc,
        rows: Rows {
            rows: s.data.rows,
            contacts: s.contacts,
            any: s.live,
        },
        force,
        iterations,
        gradient,
        converged,
        outside: s.outside,
    }
}
