//! Control synthesis on the batched engine (issues 16 and 17): Adam on box_traversal's knots for
//! many instances at once, on burn-ndarray in f64, each gradient either
//!
//! * `autodiff`: reverse mode through the batched soft_convex or signorini
//!   ([`contactlab_solvers::batched::soft`]), every solver and line-search iteration on the tape
//!   (the Ostrich paper's "tape" baseline, MJX's way of differentiating the soft model); or
//! * `adjoint_batched`: ncp_fb's exact adjoint on the batched engine
//!   ([`contactlab_solvers::batched::ncp::adjoint`]): the rollout stores each world-step's
//!   state, controls and converged impulses, and a reverse sweep takes each step's
//!   vector–Jacobian product by the implicit function theorem at its root (nothing per Newton
//!   iteration), the batched counterpart of the cpu engine's `adjoint`.
//!
//! # One batch, many instances
//!
//! The instances share the model, timestep, horizon and knot count; each has its own start
//! state, target and knots. An Adam iteration rolls out every instance still running as one
//! batch of worlds, then sweeps back over the steps on burn's tape
//! ([`contactlab_solvers::batched::soft::sweep`]), seeded with the objective's state gradient
//! at each world's final state ([`ControlProblem::loss_partials`]); `∂L/∂u_i` per world gives the
//! knot gradient by the spline's transpose ([`ControlProblem::knot_gradient`]). (ncp_fb: the
//! adjoint's sweep [`contactlab_solvers::batched::ncp::adjoint::backward`] with the same seeds.)
//! For the soft formulations, contact candidates that no world has are dropped in each step (`SoftBatch::skip_idle_candidates`:
//! the same numbers, 5–6× fewer operations on box_traversal, where most wheel–box and chassis
//! slots are idle). Worlds never
//! interact, so one world's gradient is that of its own rollout. On CPU backends the batch is
//! split into one shard per worker of the rayon pool, each its own tape.
//!
//! Each instance then follows [`super::control_synthesis::synthesize`]'s rules: stop at the
//! first successful iterate, evaluate the iterate after the last update without a gradient,
//! stop on a non-finite loss or gradient, on a rollout that diverged, or on one that left the
//! batched engine's scene class (a wheel collided by a rule the batched engine lacks,
//! [`contactlab_solvers::batched::collision::Outside`]), with the reason.
//!
//! # What the wall time means
//!
//! Every instance running in an iteration shares its wall time: [`Synthesis::wall_s`] of an
//! instance is the sum of the batch's iteration times while it ran, so
//! [`Synthesis::wall_per_iteration_s`] is the wall time per iteration *of the whole batch*
//! (which the closing note of issue 16 compares with the cpu engine's per-instance time).

use contactlab_solvers::batched::ncp::{adjoint, NcpBatch};
use contactlab_solvers::batched::scalar::S;
use contactlab_solvers::batched::soft::{sweep, SoftBatch};
use contactlab_solvers::batched::{download, upload, upload_states, AutodiffF64, NdArrayF64};
use contactlab_solvers::State;
use nalgebra::DVector;
use rayon::prelude::*;

use crate::control_synthesis::{Adam, BatchProgress};
use crate::control_synthesis::{ControlProblem, FormulationChoice, Schedule, Synthesis};

/// One world's rollout result in an iteration.
struct WorldResult {
    last: State,
    /// `∂L/∂u_i` (N × nu), `None` for an evaluation without a gradient.
    per_step: Option<Vec<DVector<f64>>>,
    /// Steps whose solver ended unconverged (indices).
    unconverged_at: Vec<usize>,
    /// Why the world's rollout is not a result: it left the class, a step failed (ncp_fb),
    /// or its state became non-finite.
    stopped: Option<String>,
    /// Why the world's gradient is not a derivative although its rollout is a result (ncp_fb:
    /// the adjoint's Newton matrix had no pseudo-inverse in some step); its success is still
    /// judged on the rollout.
    caveat: Option<String>,
}

/// The batched soft_convex or signorini of `f` for `model`.
///
/// # Errors
/// Another formulation, bad parameters, or a setting the batched engine refuses (named).
pub fn soft_batch(
    f: &FormulationChoice,
    model: &contactlab_solvers::Model,
) -> Result<SoftBatch, String> {
    if !matches!(f.name.as_str(), "soft_convex" | "signorini") {
        return Err(format!(
            "gradient method 'autodiff' needs soft_convex or signorini (the batched soft solvers), not '{}'",
            f.name
        ));
    }
    contactlab_solvers::engine::batched_support(&f.name, model)?;
    let (mut b, _) = contactlab_solvers::batched::soft_batch(&f.name, &f.params, model)
        .map_err(|e| e.to_string())?;
    // Idle wheel–box and chassis slots dropped per step (exact; the tape is the shorter).
    b.skip_idle_candidates = true;
    Ok(b)
}

/// A batched program of the instances' formulation: the batched soft_convex or signorini
/// (gradient by reverse mode through every solver iteration, method `autodiff`), or the batched
/// ncp_fb (gradient by its adjoint over the stored converged steps, method `adjoint_batched`).
pub enum Batch {
    /// soft_convex or signorini ([`soft_batch`]).
    Soft(SoftBatch),
    /// ncp_fb ([`ncp_batch`]).
    Ncp(Box<NcpBatch>),
}

/// The batched ncp_fb of `f` for `model`, for the exact adjoint on many worlds
/// ([`contactlab_solvers::batched::ncp::adjoint`]).
///
/// # Errors
/// Another formulation, bad parameters, or a setting the batched ncp_fb refuses (named: the
/// `dissipation_weight` friction residual, equality rows).
pub fn ncp_batch(
    f: &FormulationChoice,
    model: &contactlab_solvers::Model,
) -> Result<NcpBatch, String> {
    if f.name != "ncp_fb" {
        return Err(format!(
            "gradient method 'adjoint_batched' needs ncp_fb (the batched adjoint), not '{}'",
            f.name
        ));
    }
    contactlab_solvers::engine::batched_support(&f.name, model)?;
    let p: contactlab_solvers::ncp_fb::NcpFbParams =
        contactlab_solvers::formulation::parse_params("ncp_fb", &f.params)
            .map_err(|e| e.to_string())?;
    NcpBatch::new(model, p).map_err(|e| format!("batched ncp_fb: {e}"))
}

/// The batch of `f`: ncp_fb's ([`ncp_batch`]) or a soft formulation's ([`soft_batch`]).
///
/// # Errors
/// As [`ncp_batch`] and [`soft_batch`].
pub fn batch(f: &FormulationChoice, model: &contactlab_solvers::Model) -> Result<Batch, String> {
    if f.name == "ncp_fb" {
        Ok(Batch::Ncp(Box::new(ncp_batch(f, model)?)))
    } else {
        Ok(Batch::Soft(soft_batch(f, model)?))
    }
}

/// The per-step controls of the worlds (steps × nu × worlds) under their knots.
fn batch_controls(problems: &[&ControlProblem], z: &[&[f64]]) -> Vec<Vec<Vec<f64>>> {
    let p0 = problems[0];
    let per_world: Vec<Vec<Vec<f64>>> =
        problems.iter().zip(z).map(|(p, z)| p.controls(z)).collect();
    (0..p0.steps)
        .map(|i| {
            (0..p0.nu())
                .map(|a| per_world.iter().map(|c| c[i][a]).collect())
                .collect()
        })
        .collect()
}

/// The reverse sweeps' seeds: the objective's state gradient `(∂L/∂q, ∂L/∂v)` at each world's
/// final state `last`, per coordinate over the worlds (nq × w, nv × w), zero for a world that
/// cannot be trusted (`stopped`).
fn loss_seeds(
    problems: &[&ControlProblem],
    last: &[State],
    stopped: &[Option<String>],
) -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
    let w = problems.len();
    let (nq, nv) = (problems[0].model.nq, problems[0].model.nv);
    let mut lq = vec![vec![0.0; w]; nq];
    let mut lv = vec![vec![0.0; w]; nv];
    for k in (0..w).filter(|&k| stopped[k].is_none()) {
        let (gq, gv) = problems[k].loss_partials(&last[k]);
        for (j, g) in gq.iter().enumerate() {
            lq[j][k] = *g;
        }
        for (j, g) in gv.iter().enumerate() {
            lv[j][k] = *g;
        }
    }
    (lq, lv)
}

/// [`rollout_shard`] for ncp_fb: the batched rollout keeping its converged steps
/// ([`adjoint::rollout`], burn-ndarray f64), then, with `grad`, the adjoint's backward sweep
/// ([`adjoint::backward`]) seeded per world with the objective's state gradient at its final
/// state. A world is stopped where it left the batched engine's class, where its state became
/// non-finite, or where a step failed (the state was held: not the cpu engine's rollout); steps
/// whose Newton matrix had no pseudo-inverse make its gradient not a derivative (its `caveat`,
/// with the count: Adam does not step on it, its rollout still counts).
fn rollout_shard_ncp(
    batch: &NcpBatch,
    problems: &[&ControlProblem],
    z: &[&[f64]],
    grad: bool,
) -> Vec<WorldResult> {
    let w = problems.len();
    let p0 = problems[0];
    let (nq, nv, h) = (p0.model.nq, p0.model.nv, p0.h);
    let device = Default::default();
    let initial: Vec<State> = problems.iter().map(|p| p.initial.clone()).collect();
    let (q, v) = upload_states::<NdArrayF64>(&initial, &device);
    let controls: Vec<Vec<S<NdArrayF64>>> = batch_controls(problems, z)
        .into_iter()
        .map(|u| {
            u.into_iter()
                .map(|col| S::T(upload(col, &device)))
                .collect()
        })
        .collect();
    let tape = adjoint::rollout(batch, q, v, &controls, h, w);
    let t_end = p0.steps as f64 * h + initial[0].t;
    let qs: Vec<Vec<f64>> = tape.q.iter().map(|s| download(s, w)).collect();
    let vs: Vec<Vec<f64>> = tape.v.iter().map(|s| download(s, w)).collect();
    let last: Vec<State> = (0..w)
        .map(|k| State {
            q: DVector::from_iterator(nq, qs.iter().map(|c| c[k])),
            v: DVector::from_iterator(nv, vs.iter().map(|c| c[k])),
            t: t_end,
        })
        .collect();
    let mut stopped: Vec<Option<String>> = (0..w)
        .map(|k| {
            if let Some(why) = &tape.left[k] {
                Some(why.clone())
            } else if let Some(&i) = tape.failed_at[k].first() {
                Some(format!(
                    "ncp_fb step {i} failed (no finite Newton iterate, or a mass matrix not positive definite); the state was held"
                ))
            } else if !last[k].q.iter().chain(last[k].v.iter()).all(|x| x.is_finite()) {
                Some("the state became non-finite".to_string())
            } else {
                None
            }
        })
        .collect();
    let mut caveats: Vec<Option<String>> = vec![None; w];
    let per_step = grad.then(|| {
        let (lq, lv) = loss_seeds(problems, &last, &stopped);
        let n = tape.len();
        let tensors = |xs: &[Vec<f64>]| -> Vec<S<NdArrayF64>> {
            xs.iter().map(|x| S::T(upload(x.clone(), &device))).collect()
        };
        let (sq, sv) = (tensors(&lq), tensors(&lv));
        let g = adjoint::backward::<AutodiffF64>(batch, &tape, &device, &|k, _, _| {
            if k == n {
                (sq.clone(), sv.clone())
            } else {
                (vec![S::C(0.0); nq], vec![S::C(0.0); nv])
            }
        });
        for (k, &f) in g.failed_solves.iter().enumerate() {
            if f > 0 && stopped[k].is_none() {
                caveats[k] = Some(format!(
                    "the adjoint's Newton matrix had no finite pseudo-inverse in {f} steps: the gradient is not a derivative"
                ));
            }
        }
        let per_control: Vec<Vec<Vec<f64>>> = g
            .controls
            .iter()
            .map(|u| u.iter().map(|a| download(a, w)).collect())
            .collect();
        (0..w)
            .map(|k| {
                per_control
                    .iter()
                    .map(|u| DVector::from_iterator(u.len(), u.iter().map(|a| a[k])))
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
    });
    let mut per_step = per_step.map(|p| p.into_iter().map(Some).collect::<Vec<_>>());
    last.into_iter()
        .enumerate()
        .map(|(k, last)| WorldResult {
            last,
            per_step: per_step.as_mut().and_then(|p| p[k].take()),
            unconverged_at: tape.unconverged_at[k].clone(),
            stopped: stopped[k].take(),
            caveat: caveats[k].take(),
        })
        .collect()
}

/// Roll out `problems[i]` under knots `z[i]` (one shard of worlds) and, with `grad`, `∂L/∂u`
/// by the per-step reverse sweep ([`sweep`]).
fn rollout_shard(
    batch: &SoftBatch,
    problems: &[&ControlProblem],
    z: &[&[f64]],
    grad: bool,
) -> Vec<WorldResult> {
    let w = problems.len();
    let p0 = problems[0];
    let (nu, h) = (p0.nu(), p0.h);
    let initial: Vec<State> = problems.iter().map(|p| p.initial.clone()).collect();
    // (steps × nu × w)
    let controls = batch_controls(problems, z);
    let fwd = sweep::forward(batch, &initial, &controls, h);
    let per_step = grad.then(|| {
        let (lq, lv) = loss_seeds(problems, &fwd.last, &fwd.stopped);
        let adj = sweep::backward(batch, &fwd, &controls, h, lq, lv);
        (0..w)
            .map(|k| {
                adj.controls
                    .iter()
                    .map(|u| DVector::from_iterator(nu, u.iter().map(|a| a[k])))
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
    });
    let mut per_step = per_step.map(|p| p.into_iter().map(Some).collect::<Vec<_>>());
    (0..w)
        .map(|k| WorldResult {
            last: fwd.last[k].clone(),
            per_step: per_step.as_mut().and_then(|p| p[k].take()),
            unconverged_at: fwd.unconverged_at[k].clone(),
            stopped: fwd.stopped[k].clone(),
            caveat: None,
        })
        .collect()
}

/// Roll out the worlds `idx` of `problems` under their knots, in one shard per worker.
fn rollout(
    batch: &Batch,
    problems: &[ControlProblem],
    z: &[Vec<f64>],
    idx: &[usize],
    grad: bool,
) -> Vec<WorldResult> {
    let shards = rayon::current_num_threads().clamp(1, idx.len().max(1));
    let chunk = idx.len().div_ceil(shards).max(1);
    idx.par_chunks(chunk)
        .flat_map_iter(|c| {
            let ps: Vec<&ControlProblem> = c.iter().map(|&i| &problems[i]).collect();
            let zs: Vec<&[f64]> = c.iter().map(|&i| z[i].as_slice()).collect();
            match batch {
                Batch::Soft(b) => rollout_shard(b, &ps, &zs, grad),
                Batch::Ncp(b) => rollout_shard_ncp(b, &ps, &zs, grad),
            }
        })
        .collect()
}

/// One instance's loss and knot gradient from a batched rollout.
#[derive(Debug, Clone)]
pub struct BatchGradient {
    /// The final state.
    pub last: State,
    /// `dL/dz` (K nu, m²/(rad/s)) of the objective [`ControlProblem::loss`]; `None` for an
    /// evaluation without a gradient. Where `stopped` or `caveat` is set it is not a
    /// derivative (zero for a stopped world, whose seed is zero).
    pub gradient: Option<Vec<f64>>,
    /// Steps whose solver ended unconverged (indices; t = (i + 1) h after step i).
    pub unconverged_at: Vec<usize>,
    /// Why the world's rollout is not a result: it left the batched engine's scene class, a
    /// step failed (ncp_fb), or its state became non-finite.
    pub stopped: Option<String>,
    /// Why the gradient is not a derivative although the rollout is a result (ncp_fb: the
    /// adjoint's Newton matrix had no pseudo-inverse in some step).
    pub caveat: Option<String>,
}

/// The rollouts of `problems` under knots `z` as one batch (module doc) and, with `grad`, each
/// objective's knot gradient by reverse mode.
///
/// # Errors
/// A formulation the batched engine does not run with a gradient (soft_convex, signorini and
/// ncp_fb do), a setting it refuses (named), or problems that do not share their shape.
pub fn knot_gradients(
    problems: &[ControlProblem],
    f: &FormulationChoice,
    z: &[Vec<f64>],
    grad: bool,
) -> Result<Vec<BatchGradient>, String> {
    let Some(p0) = problems.first() else {
        return Ok(Vec::new());
    };
    check_shapes(problems, z)?;
    let batch = batch(f, &p0.model)?;
    let idx: Vec<usize> = (0..problems.len()).collect();
    Ok(rollout(&batch, problems, z, &idx, grad)
        .into_iter()
        .zip(problems)
        .map(|(r, p)| BatchGradient {
            gradient: r.per_step.map(|s| p.knot_gradient(&s)),
            last: r.last,
            unconverged_at: r.unconverged_at,
            stopped: r.stopped,
            caveat: r.caveat,
        })
        .collect())
}

fn check_shapes(problems: &[ControlProblem], z: &[Vec<f64>]) -> Result<(), String> {
    let p0 = &problems[0];
    if z.len() != problems.len() || z.iter().zip(problems).any(|(z, p)| z.len() != p.len()) {
        return Err("batched synthesis: one knot vector of K nu entries per instance".into());
    }
    if problems.iter().any(|p| {
        p.steps != p0.steps
            || p.h != p0.h
            || p.knots != p0.knots
            || p.nu() != p0.nu()
            || p.parametrization != p0.parametrization
    }) {
        return Err("batched synthesis: the instances of one batch must share timestep, horizon, knots and parametrization".into());
    }
    Ok(())
}

/// Adam on every problem's knots at once (module doc): `z0[i]` are problem i's starting knots;
/// at most `iterations` updates with step sizes `schedule`. The problems must share the model,
/// timestep, horizon, knots and parametrization.
///
/// # Errors
/// A formulation the batched engine does not run with a gradient, a setting it refuses, or
/// problems that do not share their shape.
pub fn synthesize_batch(
    problems: &[ControlProblem],
    f: &FormulationChoice,
    z0: &[Vec<f64>],
    iterations: usize,
    schedule: Schedule,
) -> Result<Vec<Synthesis>, String> {
    synthesize_batch_resumable(problems, f, z0, iterations, schedule, None, &mut |_| {})
}

/// [`synthesize_batch`] from `resume` (the progress a previous run of the same batch stored;
/// `None`: from `z0`), calling `after_iteration` with the progress after every iteration.
/// Iterations are deterministic, so a resumed batch ends where an uninterrupted one would.
///
/// # Errors
/// As [`synthesize_batch`], and a `resume` whose shape is not this batch's.
pub fn synthesize_batch_resumable(
    problems: &[ControlProblem],
    f: &FormulationChoice,
    z0: &[Vec<f64>],
    iterations: usize,
    schedule: Schedule,
    resume: Option<BatchProgress>,
    after_iteration: &mut dyn FnMut(&BatchProgress),
) -> Result<Vec<Synthesis>, String> {
    let Some(p0) = problems.first() else {
        return Ok(Vec::new());
    };
    check_shapes(problems, z0)?;
    let batch = batch(f, &p0.model)?;
    let par = p0.parametrization;
    par.check(p0.nu())?;
    let n = problems.len();
    let mut pr = match resume {
        Some(r) => {
            let dims: Vec<usize> = z0.iter().map(Vec::len).collect();
            if let Err(why) = r.check(n, iterations, &dims) {
                return Err(format!(
                    "batched synthesis: the stored progress is not this batch's ({why})"
                ));
            }
            r
        }
        None => BatchProgress {
            next_iteration: 0,
            z: z0.to_vec(),
            adam: z0
                .iter()
                .map(|z| Adam::new(z.len(), schedule.step_size))
                .collect(),
            out: vec![Synthesis::default(); n],
            running: (0..n).collect(),
        },
    };
    // Adam's coordinates of the current knots (each update re-derives them from the clamped
    // knots, so they are a function of the knots).
    let mut y: Vec<Vec<f64>> = pr.z.iter().map(|z| par.coordinates(z)).collect();
    for it in pr.next_iteration..=iterations {
        if pr.running.is_empty() {
            break;
        }
        let t0 = std::time::Instant::now();
        let grad = it < iterations;
        let results = rollout(&batch, problems, &pr.z, &pr.running, grad);
        let wall = t0.elapsed().as_secs_f64();
        let mut next = Vec::with_capacity(pr.running.len());
        for (&i, r) in pr.running.iter().zip(results) {
            let p = &problems[i];
            let o = &mut pr.out[i];
            o.wall_s += wall;
            let success = r.stopped.is_none() && p.success(&r.last);
            o.losses.push(p.task_loss(&r.last));
            o.objectives.push(p.loss(&r.last));
            o.unconverged.push(r.unconverged_at.len());
            o.last = Some(r.last);
            let g = r.per_step.map(|s| p.knot_gradient(&s));
            // A stopped world's gradient is the zero of its zeroed seed, not a gradient: no norm;
            // one that is not a derivative (a caveat) is recorded as NaN.
            match (&g, &r.stopped, &r.caveat) {
                (Some(g), None, None) => o
                    .gradient_norms
                    .push(g.iter().map(|x| x * x).sum::<f64>().sqrt()),
                (Some(_), None, Some(_)) => o.gradient_norms.push(f64::NAN),
                _ => {}
            }
            if success {
                o.iterations_to_success = Some(it);
                continue;
            }
            if let Some(why) = r.stopped.or(r.caveat) {
                o.stopped = Some(format!("iterate {it}: {why}"));
                continue;
            }
            let Some(g) = g else { continue };
            if !(o.objectives[it].is_finite() && g.iter().all(|x| x.is_finite())) {
                o.stopped = Some(format!("iterate {it}: non-finite loss or gradient"));
                continue;
            }
            pr.adam[i].step_size = schedule.at(it + 1);
            pr.adam[i].step(&mut y[i], &par.gradient(&g));
            let bound = p.bound();
            pr.z[i] = par
                .knots(&y[i])
                .into_iter()
                .map(|x| x.clamp(-bound, bound))
                .collect();
            y[i] = par.coordinates(&pr.z[i]);
            next.push(i);
        }
        pr.running = next;
        pr.next_iteration = it + 1;
        after_iteration(&pr);
    }
    let mut out = pr.out;
    for (o, z) in out.iter_mut().zip(pr.z) {
        o.knots = z;
    }
    Ok(out)
}
