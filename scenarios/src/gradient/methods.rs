//! The registry of gradient methods ([`METHODS`]) and [`compute`].
//!
//! | method | formulations | formula | cost (rollouts of N steps) |
//! |---|---|---|---|
//! | `fd_central` | any | `(L(θ + δ e_i) − L(θ − δ e_i)) / (2δ)`, error O(δ²) + O(ε_L/δ) | 2 per input |
//! | `fd_forward` | any | `(L(θ + δ e_i) − L(θ)) / δ`, error O(δ) + O(ε_L/δ) | 1 per input + 1 |
//! | `adjoint` | `ncp_fb` | exact implicit-function adjoint of the converged step map (spec `ncp_fb_and_penalty.md` §2.6 with §7.6) | 1 forward with tape + 1 backward sweep |
//! | `adjoint_lagged` | `ncp_fb` | the same sweep with W and the friction scale frozen and the Newton-only regularization kept (spec §2.6): an approximation | the same |
//! | `autodiff` | `penalty`, `soft_convex`, `signorini` | reverse mode through the batched rollout, every solver and line-search iteration on the tape (burn's `Autodiff` over ndarray, f64; module `gradient::autodiff`, with the `burn` feature) | 1 forward with tape + 1 backward pass |
//!
//! `δ = s · max(|θ_i|, 1)` for the relative step `s` ([`super::Problem::absolute_step`]);
//! `ε_L` is the rounding and solver-tolerance noise of the loss.
//!
//! `autodiff` runs on the batched engine, so beyond the formulation it needs a build with the
//! `burn` feature, a scene the batched engine runs
//! ([`contactlab_solvers::engine::batched_support`]) and inputs that are tensors there (not
//! masses or servo gains): [`availability_for`] names what is missing (a `skipped` row).
//!
//! Inputs the `ncp_fb` adjoint reads through its assembly: q₀, v₀, controls, friction, servo
//! gains and body masses. `ncp_fb` does not read `solref`, `ke` or `kd` (its contacts are hard),
//! so the derivative with respect to them is exactly 0, which the adjoint methods return.

use std::time::Instant;

use contactlab_solvers::formulation::parse_params;
use contactlab_solvers::ncp_fb::adjoint::{self, Mode, Parameter};
use contactlab_solvers::ncp_fb::{NcpFb, NcpFbParams};
use nalgebra::DVector;

use super::{control_into, FormulationRef, Input, ModelParam, Problem};

/// A registered gradient method.
#[derive(Debug, Clone, Copy)]
pub struct MethodEntry {
    /// Registry name, as written in experiment files.
    pub name: &'static str,
    /// One line: what it computes.
    pub description: &'static str,
    /// Whether it takes a finite-difference step (a sweep axis of the study).
    pub takes_step: bool,
    /// The formulations that offer it; `None`: every formulation.
    pub formulations: Option<&'static [&'static str]>,
}

/// Every gradient method, in display order.
pub const METHODS: &[MethodEntry] = &[
    MethodEntry {
        name: "fd_central",
        description: "central finite differences of whole rollouts, 2 rollouts per input",
        takes_step: true,
        formulations: None,
    },
    MethodEntry {
        name: "fd_forward",
        description: "forward finite differences of whole rollouts, 1 rollout per input plus the nominal one",
        takes_step: true,
        formulations: None,
    },
    MethodEntry {
        name: "adjoint",
        description: "ncp_fb's exact adjoint: implicit differentiation of each converged step, one backward sweep",
        takes_step: false,
        formulations: Some(&["ncp_fb"]),
    },
    MethodEntry {
        name: "adjoint_lagged",
        description: "ncp_fb's lagged adjoint (W frozen, regularization kept): an approximation, reported beside the exact one",
        takes_step: false,
        formulations: Some(&["ncp_fb"]),
    },
    MethodEntry {
        name: "autodiff",
        description: "reverse mode through the batched rollout, every solver and line-search iteration on the tape (burn Autodiff over ndarray, f64)",
        takes_step: false,
        formulations: Some(&["penalty", "soft_convex", "signorini"]),
    },
];

/// Look up a method by name.
///
/// # Errors
/// An unknown name, listing the valid ones.
pub fn find(name: &str) -> Result<&'static MethodEntry, String> {
    METHODS.iter().find(|m| m.name == name).ok_or_else(|| {
        let valid: Vec<_> = METHODS.iter().map(|m| m.name).collect();
        format!(
            "unknown gradient method '{name}'; valid: {}",
            valid.join(", ")
        )
    })
}

/// Whether `formulation` offers method `method`: `Err(reason)` when it does not (the harness
/// writes a `skipped` row with the reason).
///
/// # Errors
/// The reason, or an unknown method name.
pub fn availability(method: &str, formulation: &str) -> Result<(), String> {
    let m = find(method)?;
    match m.formulations {
        Some(list) if !list.contains(&formulation) => Err(format!(
            "{formulation} offers no {method} (only {})",
            list.join(", ")
        )),
        _ => Ok(()),
    }
}

/// [`availability`] for the problem at hand: also, for `autodiff`, whether this build has the
/// batched engine (the `burn` feature), whether the batched engine runs the problem's model and
/// whether every input is a tensor of its rollout.
///
/// # Errors
/// The reason (the harness writes a `skipped` row with it).
pub fn availability_for(method: &str, formulation: &str, problem: &Problem) -> Result<(), String> {
    availability(method, formulation)?;
    if method != "autodiff" {
        return Ok(());
    }
    if !cfg!(feature = "burn") {
        return Err("autodiff runs on the batched engine, which this build lacks (build with `--features burn`)".into());
    }
    contactlab_solvers::engine::batched_support(formulation, &problem.model).map_err(|e| {
        format!("autodiff runs on the batched engine, which cannot run this scene: {e}")
    })?;
    for i in &problem.inputs {
        if formulation != "penalty" {
            if let Input::Param(_) = i {
                return Err(format!(
                    "autodiff: input '{}' is a constant of the batched {formulation} model, not a tensor (model parameters are differentiable only through the batched penalty yet)",
                    i.name()
                ));
            }
        }
        if let Input::Param(ModelParam::Mass(_) | ModelParam::ServoKp(_) | ModelParam::ServoKv(_)) =
            i
        {
            return Err(format!(
                "autodiff: input '{}' is a constant of the batched engine's model, not a tensor (masses and servo gains are not differentiable there yet)",
                i.name()
            ));
        }
    }
    Ok(())
}

/// A method with its settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Method {
    /// Central differences with relative step `s` (> 0).
    FdCentral(f64),
    /// Forward differences with relative step `s` (> 0).
    FdForward(f64),
    /// The exact `ncp_fb` adjoint.
    Adjoint,
    /// The lagged `ncp_fb` adjoint.
    AdjointLagged,
    /// Reverse mode through the batched penalty (module `gradient::autodiff`, `burn` feature).
    Autodiff,
}

impl Method {
    /// Build from a registry name and, for the finite-difference methods, a relative step.
    ///
    /// # Errors
    /// Unknown name, a missing step, or a step that is not a finite number > 0.
    pub fn new(name: &str, step: Option<f64>) -> Result<Self, String> {
        let m = find(name)?;
        let step = if m.takes_step {
            match step {
                Some(s) if s.is_finite() && s > 0.0 => Some(s),
                Some(s) => {
                    return Err(format!(
                        "{name}: the step must be a finite number > 0; got {s}"
                    ))
                }
                None => return Err(format!("{name} needs a step")),
            }
        } else {
            None
        };
        Ok(match (name, step) {
            ("fd_central", Some(s)) => Method::FdCentral(s),
            ("fd_forward", Some(s)) => Method::FdForward(s),
            ("adjoint", _) => Method::Adjoint,
            ("autodiff", _) => Method::Autodiff,
            _ => Method::AdjointLagged,
        })
    }

    /// The registry name.
    pub fn name(&self) -> &'static str {
        match self {
            Method::FdCentral(_) => "fd_central",
            Method::FdForward(_) => "fd_forward",
            Method::Adjoint => "adjoint",
            Method::AdjointLagged => "adjoint_lagged",
            Method::Autodiff => "autodiff",
        }
    }

    /// The relative finite-difference step, if the method has one.
    pub fn step(&self) -> Option<f64> {
        match self {
            Method::FdCentral(s) | Method::FdForward(s) => Some(*s),
            _ => None,
        }
    }
}

/// A computed gradient and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Gradient {
    /// dL/dθ, in the order of [`Problem::inputs`] (NaN where a rollout diverged).
    pub gradient: Vec<f64>,
    /// Wall time of the computation, forward plus backward (s).
    pub wall_s: f64,
    /// Rollouts of N steps it ran.
    pub rollouts: usize,
    /// Steps of its own forward rollouts that ended unconverged (all rollouts together).
    pub unconverged: usize,
    /// Method-specific notes (the adjoint's one-sided and dropped assembly derivatives).
    pub note: String,
}

/// Compute the gradient of `problem` with `method` for `formulation`.
///
/// # Errors
/// The method is not available for the formulation and problem ([`availability_for`]), the
/// formulation's parameters do not build, or the method's forward rollout ended early
/// (diverged).
pub fn compute(
    method: Method,
    problem: &Problem,
    formulation: FormulationRef<'_>,
) -> Result<Gradient, String> {
    availability_for(method.name(), formulation.name, problem)?;
    let t0 = Instant::now();
    let mut g = match method {
        Method::FdCentral(s) => {
            let mut unconverged = 0;
            let mut gradient = Vec::with_capacity(problem.inputs.len());
            for i in 0..problem.inputs.len() {
                let d = problem.absolute_step(i, s);
                let p = problem.simulate(formulation.build, Some((i, d)))?;
                let m = problem.simulate(formulation.build, Some((i, -d)))?;
                unconverged += p.unconverged + m.unconverged;
                gradient.push((p.loss - m.loss) / (2.0 * d));
            }
            Gradient {
                gradient,
                wall_s: 0.0,
                rollouts: 2 * problem.inputs.len(),
                unconverged,
                note: String::new(),
            }
        }
        Method::FdForward(s) => {
            let nominal = problem.simulate(formulation.build, None)?;
            let mut unconverged = nominal.unconverged;
            let mut gradient = Vec::with_capacity(problem.inputs.len());
            for i in 0..problem.inputs.len() {
                let d = problem.absolute_step(i, s);
                let p = problem.simulate(formulation.build, Some((i, d)))?;
                unconverged += p.unconverged;
                gradient.push((p.loss - nominal.loss) / d);
            }
            Gradient {
                gradient,
                wall_s: 0.0,
                rollouts: problem.inputs.len() + 1,
                unconverged,
                note: String::new(),
            }
        }
        Method::Adjoint => ncp_fb_adjoint(problem, formulation, Mode::Exact)?,
        Method::AdjointLagged => ncp_fb_adjoint(problem, formulation, Mode::Lagged)?,
        #[cfg(feature = "burn")]
        Method::Autodiff => super::autodiff::gradient(problem, formulation)?,
        #[cfg(not(feature = "burn"))]
        Method::Autodiff => unreachable!("availability_for refuses autodiff without `burn`"),
    };
    g.wall_s = t0.elapsed().as_secs_f64();
    Ok(g)
}

/// The `ncp_fb` adjoint parameter of a model parameter; `None` for those `ncp_fb` does not
/// read (solref, ke, kd), whose derivative is 0.
fn adjoint_parameter(p: &ModelParam) -> Option<Parameter> {
    match *p {
        ModelParam::Friction => Some(Parameter::Friction),
        ModelParam::ServoKp(i) => Some(Parameter::ServoKp(i)),
        ModelParam::ServoKv(i) => Some(Parameter::ServoKv(i)),
        ModelParam::Mass(b) => Some(Parameter::Mass(b)),
        ModelParam::SolrefTimeconst
        | ModelParam::SolrefDampratio
        | ModelParam::Stiffness
        | ModelParam::Damping => None,
    }
}

/// One forward rollout with tape and one backward sweep ([`adjoint::backward`]) whose only
/// loss term is `L(x_N)` ([`super::Loss::state_gradient`] at the final state).
fn ncp_fb_adjoint(
    problem: &Problem,
    formulation: FormulationRef<'_>,
    mode: Mode,
) -> Result<Gradient, String> {
    let params: NcpFbParams =
        parse_params("ncp_fb", formulation.params).map_err(|e| e.to_string())?;
    let mut f = NcpFb::new(params).map_err(|e| e.to_string())?;
    let model = &problem.model;
    let nu = model.actuators.len();
    let controls: Vec<Vec<f64>> = (0..problem.steps)
        .map(|k| {
            let mut u = vec![0.0; nu];
            control_into(&problem.controls, k, &mut u);
            u
        })
        .collect();
    let r = adjoint::rollout(
        &mut f,
        model,
        &problem.initial,
        &controls,
        problem.steps,
        problem.h,
    );
    if r.len() < problem.steps {
        return Err(format!(
            "the adjoint's forward rollout ended after {} of {} steps (diverged)",
            r.len(),
            problem.steps
        ));
    }
    let params: Vec<Parameter> = problem
        .inputs
        .iter()
        .filter_map(|i| match i {
            Input::Param(p) => adjoint_parameter(p),
            _ => None,
        })
        .collect();
    let n = r.len();
    let (nq, nv) = (model.nq, model.nv);
    let loss = &problem.loss;
    let g = adjoint::backward(&f, model, &r, &params, mode, &|k, s| {
        if k == n {
            loss.state_gradient(s)
        } else {
            (DVector::zeros(nq), DVector::zeros(nv))
        }
    });
    let mut next = 0;
    let gradient = problem
        .inputs
        .iter()
        .map(|i| match i {
            Input::Qpos(k) => g.q0[*k],
            Input::Qvel(k) => g.v0[*k],
            Input::Control { step, actuator } => {
                g.controls.get(*step).map_or(0.0, |c| c[*actuator])
            }
            Input::Param(p) => match adjoint_parameter(p) {
                Some(_) => {
                    next += 1;
                    g.params[next - 1]
                }
                None => 0.0,
            },
        })
        .collect();
    Ok(Gradient {
        gradient,
        wall_s: 0.0,
        rollouts: 1,
        unconverged: r.unconverged(),
        note: format!("one_sided={} dropped={}", g.one_sided, g.dropped),
    })
}
