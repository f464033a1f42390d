//! The `autodiff` gradient method: reverse mode through the batched rollout of `penalty`,
//! `soft_convex` or `signorini` (burn's `Autodiff` backend over ndarray in f64,
//! [`contactlab_solvers::batched`]; DESIGN.md, "Two engines" and "Gradients are a capability
//! with methods").
//!
//! For soft_convex and signorini the tape holds every solver iteration and every line-search
//! evaluation of every step ([`contactlab_solvers::batched::soft`], with the warm start carried
//! from step to step), so the gradient is that of the computed map, solver truncation
//! included, as a finite difference of the cpu engine sees it; it is recorded one step at a
//! time over the stored step inputs ([`sweep`]: one tape over the whole rollout costs time
//! quadratic in its length in burn-autodiff 0.21). Only states and controls are
//! leaves there: the soft model's parameters are host constants
//! ([`super::methods::availability_for`] refuses them as inputs).
//!
//! One world is rolled out for the problem's N steps with [`penalty::step`], the inputs as
//! leaves of the tape: q₀ and v₀ components, single controls `u_k[a]`, and the contact-material
//! parameters (`friction`, `ke`, `kd`, `solref[0]`, `solref[1]`). The loss's state gradient
//! `(∂L/∂q_N, ∂L/∂v_N)` at the batched final state ([`super::Loss::state_gradient`]: exact for
//! a linear loss) seeds one backward pass, so the result is `dL/dθ` of the batched rollout,
//! whose f64 arithmetic is the cpu penalty's ([`contactlab_solvers::batched::dynamics`]).
//!
//! A material parameter enters the batched step through each pair's coefficients
//! ([`penalty::PairCoefficients`]: ke, kd, kf, ka, μ, the pair's mixed material unless the
//! penalty parameters override it). As the finite-difference reference does, the parameter is
//! first set on every geom ([`super::ModelParam::set`]); each coefficient is then
//! `c₀ + (θ − θ₀) dc/dθ` with θ the leaf and `dc/dθ` the slope of the host's mixing, measured by
//! a central difference of [`Batch::new`] with step `1e-3 max(|θ₀|, 1)` (the mixing is linear:
//! the slope is 1 for a mean of equal values, 0 for an overridden or unread coefficient, to
//! about 1e-13). Masses and servo gains are constants of the batched model, not tensors: such an
//! input is refused by [`super::methods::availability_for`].

use contactlab_solvers::batched::burn_tensor::{Tensor, TensorData};
use contactlab_solvers::batched::penalty::{step, Batch, PairCoefficients};
use contactlab_solvers::batched::scalar::S;
use contactlab_solvers::batched::soft::{sweep, SoftBatch};
use contactlab_solvers::batched::{AutodiffF64, NdArrayF64};
use contactlab_solvers::formulation::parse_params;
use contactlab_solvers::penalty::{Penalty, PenaltyParams};
use contactlab_solvers::State;
use nalgebra::DVector;

use super::methods::Gradient;
use super::{FormulationRef, Input, Problem};

type Ad = AutodiffF64;

fn tensor(x: f64) -> Tensor<Ad, 1> {
    Tensor::from_data(TensorData::new(vec![x], [1]), &Default::default())
}

fn read(s: &S<Ad>) -> f64 {
    match s {
        S::C(c) => *c,
        S::T(t) => t.to_data().to_vec::<f64>().expect("an f64 tensor")[0],
    }
}

/// The coefficients of a pair as `[ke, kd, kf, ka, μ]` constants.
fn constants(c: &PairCoefficients<NdArrayF64>) -> [f64; 5] {
    [&c.ke, &c.kd, &c.kf, &c.ka, &c.mu].map(|s| s.constant().unwrap_or(f64::NAN))
}

fn fields(c: &mut PairCoefficients<Ad>) -> [&mut S<Ad>; 5] {
    [&mut c.ke, &mut c.kd, &mut c.kf, &mut c.ka, &mut c.mu]
}

/// `dL/dθ` of `problem` by reverse mode through the batched penalty (module doc). The
/// formulation must be `penalty` ([`super::methods::availability_for`] checks it, the scene
/// and the inputs).
///
/// # Errors
/// Bad penalty parameters (the registry's message), or a batched rollout that ends with a
/// non-finite state.
pub fn gradient(problem: &Problem, formulation: FormulationRef<'_>) -> Result<Gradient, String> {
    if formulation.name != "penalty" {
        return soft_gradient(problem, formulation);
    }
    let params: PenaltyParams =
        parse_params("penalty", formulation.params).map_err(|e| e.to_string())?;
    Penalty::new(params.clone()).map_err(|e| e.to_string())?;
    // The model the reference differentiates: each parameter input set on every geom.
    let mut model = problem.model.clone();
    for i in &problem.inputs {
        if let Input::Param(p) = i {
            let v = p.get(&model);
            p.set(&mut model, v);
        }
    }
    let mut batch = Batch::<Ad>::new(&model, params.clone());
    let Rollout {
        mut q,
        mut v,
        controls,
        leaves,
    } = leaves(problem, |p, leaf| {
        let theta = p.get(&model);
        let delta = 1e-3 * theta.abs().max(1.0);
        let at = |x: f64| {
            let mut m = model.clone();
            p.set(&mut m, x);
            Batch::<NdArrayF64>::new(&m, params.clone()).coef
        };
        let (plus, minus) = (at(theta + delta), at(theta - delta));
        let offset = S::T(leaf.clone()) - theta;
        for ((c, cp), cm) in batch.coef.iter_mut().zip(&plus).zip(&minus) {
            let slopes = constants(cp)
                .iter()
                .zip(constants(cm))
                .map(|(a, b)| (a - b) / (2.0 * delta))
                .collect::<Vec<_>>();
            for (field, slope) in fields(c).into_iter().zip(slopes) {
                if slope != 0.0 {
                    *field = &*field + &(&offset * slope);
                }
            }
        }
        Ok(())
    })?;
    for u in &controls {
        let out = step(&batch, &q, &v, u, problem.h);
        q = out.q;
        v = out.v;
    }
    backward(
        problem,
        &q,
        &v,
        &leaves,
        "burn-ndarray f64 reverse mode through the batched penalty",
    )
}

/// `dL/dθ` by reverse mode through the batched soft_convex or signorini rollout (module doc):
/// states and controls as leaves.
fn soft_gradient(problem: &Problem, formulation: FormulationRef<'_>) -> Result<Gradient, String> {
    let name = formulation.name;
    // The registry's validation and messages first.
    contactlab_solvers::formulation::build(name, formulation.params).map_err(|e| e.to_string())?;
    let (params, signorini) = match name {
        "soft_convex" => (
            parse_params::<contactlab_solvers::soft_convex::SoftConvexParams>(
                name,
                formulation.params,
            )
            .map_err(|e| e.to_string())?,
            false,
        ),
        "signorini" => {
            let p = parse_params::<contactlab_solvers::signorini::SignoriniParams>(
                name,
                formulation.params,
            )
            .map_err(|e| e.to_string())?;
            let s = contactlab_solvers::signorini::Signorini::new(p).map_err(|e| e.to_string())?;
            if s.latch() {
                return Err("autodiff: signorini's latch is not batched".into());
            }
            (s.inner_params().clone(), true)
        }
        other => return Err(format!("autodiff: formulation '{other}' is not batched")),
    };
    let mut batch = SoftBatch::new(&problem.model, &params, signorini)?;
    // Candidates no world has are dropped per step (the same numbers, a shorter tape).
    batch.skip_idle_candidates = true;
    if problem.inputs.iter().any(|i| matches!(i, Input::Param(_))) {
        return Err(format!(
            "autodiff: a model parameter is a constant of the batched {name} model"
        ));
    }
    let nu = problem.model.actuators.len();
    // (steps × nu × 1)
    let controls: Vec<Vec<Vec<f64>>> = (0..problem.steps)
        .map(|k| {
            let mut u = vec![0.0; nu];
            super::control_into(&problem.controls, k, &mut u);
            u.into_iter().map(|x| vec![x]).collect()
        })
        .collect();
    let fwd = sweep::forward(
        &batch,
        std::slice::from_ref(&problem.initial),
        &controls,
        problem.h,
    );
    if let Some(why) = &fwd.stopped[0] {
        return Err(format!("{why} (after {} steps)", problem.steps));
    }
    let (gq, gv) = problem.loss.state_gradient(&fwd.last[0]);
    let col = |g: &DVector<f64>| g.iter().map(|x| vec![*x]).collect::<Vec<_>>();
    let adj = sweep::backward(&batch, &fwd, &controls, problem.h, col(&gq), col(&gv));
    let gradient = problem
        .inputs
        .iter()
        .map(|input| match input {
            Input::Qpos(k) => adj.q0[*k][0],
            Input::Qvel(k) => adj.v0[*k][0],
            Input::Control { step, actuator } => adj
                .controls
                .get(*step)
                .and_then(|u| u.get(*actuator))
                .map_or(0.0, |a| a[0]),
            Input::Param(_) => unreachable!("refused above"),
        })
        .collect();
    Ok(Gradient {
        gradient,
        wall_s: 0.0,
        rollouts: 1,
        unconverged: fwd.unconverged_at[0].len(),
        note: format!("burn-ndarray f64 reverse mode through the batched {name} (every solver and line-search iteration), by a per-step sweep over the stored step inputs"),
    })
}

/// The leaves and initial tensors of a rollout: positions, velocities and controls as
/// per-world scalars, each input a leaf of the tape (an input named twice, `ctrl[0][0]` and
/// `ctrl[mid][0]` of a one-step horizon, is one leaf: each entry is the whole derivative, as
/// each central difference is); `param` attaches a model-parameter leaf.
struct Rollout {
    q: Vec<S<Ad>>,
    v: Vec<S<Ad>>,
    controls: Vec<Vec<S<Ad>>>,
    leaves: Vec<Option<Tensor<Ad, 1>>>,
}

fn leaves(
    problem: &Problem,
    mut param: impl FnMut(&super::ModelParam, &Tensor<Ad, 1>) -> Result<(), String>,
) -> Result<Rollout, String> {
    let mut q: Vec<S<Ad>> = problem.initial.q.iter().map(|&x| S::T(tensor(x))).collect();
    let mut v: Vec<S<Ad>> = problem.initial.v.iter().map(|&x| S::T(tensor(x))).collect();
    let nu = problem.model.actuators.len();
    let mut controls: Vec<Vec<S<Ad>>> = (0..problem.steps)
        .map(|k| {
            let mut u = vec![0.0; nu];
            super::control_into(&problem.controls, k, &mut u);
            u.into_iter().map(S::C).collect()
        })
        .collect();
    let mut leaves: Vec<Option<Tensor<Ad, 1>>> = vec![None; problem.inputs.len()];
    for (i, input) in problem.inputs.iter().enumerate() {
        if let Some(j) =
            (0..i).find(|&j| problem.inputs[j] == *input && !matches!(input, Input::Param(_)))
        {
            leaves[i] = leaves[j].clone();
            continue;
        }
        let leaf = tensor(problem.input_value(i)).require_grad();
        match input {
            Input::Qpos(k) => q[*k] = S::T(leaf.clone()),
            Input::Qvel(k) => v[*k] = S::T(leaf.clone()),
            Input::Control { step, actuator } => {
                if let Some(u) = controls.get_mut(*step).and_then(|u| u.get_mut(*actuator)) {
                    *u = S::T(leaf.clone());
                }
            }
            Input::Param(p) => param(p, &leaf)?,
        }
        leaves[i] = Some(leaf);
    }
    Ok(Rollout {
        q,
        v,
        controls,
        leaves,
    })
}

/// Seed the backward pass with the loss's state gradient at the rollout's final state `(q, v)`
/// and read `dL/dθ` off the leaves.
fn backward(
    problem: &Problem,
    q: &[S<Ad>],
    v: &[S<Ad>],
    leaves: &[Option<Tensor<Ad, 1>>],
    note: &str,
) -> Result<Gradient, String> {
    let last = State {
        q: DVector::from_iterator(q.len(), q.iter().map(read)),
        v: DVector::from_iterator(v.len(), v.iter().map(read)),
        t: problem.steps as f64 * problem.h,
    };
    if !last.is_finite() {
        return Err(format!(
            "the batched rollout ended with a non-finite state after {} steps",
            problem.steps
        ));
    }
    let (gq, gv) = problem.loss.state_gradient(&last);
    let mut surrogate = S::<Ad>::C(0.0);
    for (x, g) in q.iter().zip(gq.iter()).chain(v.iter().zip(gv.iter())) {
        surrogate = surrogate + x * *g;
    }
    let gradient = match surrogate {
        S::T(t) => {
            let grads = t.sum().backward();
            leaves
                .iter()
                .map(|l| {
                    l.as_ref()
                        .and_then(|l| l.grad(&grads))
                        .map_or(0.0, |g| g.to_data().to_vec::<f64>().expect("f64")[0])
                })
                .collect()
        }
        // The loss does not depend on the state at all.
        S::C(_) => vec![0.0; problem.inputs.len()],
    };
    Ok(Gradient {
        gradient,
        wall_s: 0.0,
        rollouts: 1,
        unconverged: 0,
        note: note.into(),
    })
}
