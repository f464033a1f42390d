//! Reverse mode through whole rollouts of a batched formulation (penalty, soft_convex,
//! signorini; ncp_fb by its adjoint, below), for measuring its cost: one forward pass of `N` steps on burn's `Autodiff`
//! backend (the tape: every operation's saved inputs, for the soft solvers every solver and
//! line-search iteration), then one backward pass to the initial velocities, as the throughput
//! study's "forward plus backward" iteration (the Ostrich paper's world-iteration: one forward
//! and one backward pass over the horizon per world).
//!
//! With an iteration budget ([`Program::new`]), a soft solver runs exactly that many Newton (or
//! CG) iterations in every step (a budget of 0 counts as 1), converged worlds masked (MJX's
//! static program): the tape then holds every iteration of the budget, which is what the
//! tape-against-budget measurement shows. Each iteration's line search still ends when no world
//! is left in it, so the tape does not hold the whole `ls_iterations` budget.
//!
//! The loss is fixed and generic: `L = Σ_worlds w · [q_N; v_N]` with [`loss_weights`]; the
//! gradient is `∂L/∂v₀` of every world (its value is not the point here: the gradient study
//! scores gradients). Losses and gradients are read back and reduced in f64 on the host.
//!
//! ncp_fb is not taped: its forward pass keeps the converged steps and its backward pass is
//! the adjoint's sweep ([`super::ncp::adjoint`]), so its "tape" is the stored steps, flat in the
//! Newton budget (`newton_iterations` = the iteration budget).
//!
//! On a CPU backend the worlds are split into shards ([`super::cpu_shards`]) whose graphs are
//! independent, recorded and differentiated in parallel on the caller's rayon pool.

use std::time::Instant;

use burn_tensor::backend::AutodiffBackend;
use burn_tensor::Tensor;
use rayon::prelude::*;

use burn_tensor::backend::Backend;

use super::penalty::{step, Batch};
use super::scalar::S;
use super::soft::SoftBatch;
use super::{cpu_shards, upload_states};
use crate::engine::{loss_weights, EngineError, ReversePass};
use crate::model::{Model, State};
use crate::penalty::PenaltyParams;

/// What a reverse pass rolls out: a formulation's batched step, compiled.
#[derive(Debug, Clone)]
pub enum Program {
    /// The batched penalty with its parameters.
    Penalty(PenaltyParams),
    /// The batched soft_convex or signorini.
    Soft(SoftBatch),
    /// The batched ncp_fb, differentiated by its adjoint ([`super::ncp::adjoint`]): the
    /// forward pass keeps the converged steps (no tape of operations), the backward pass
    /// re-assembles one step at a time on the autodiff backend.
    Ncp(Box<super::ncp::NcpBatch>),
}

impl Program {
    /// Compile `formulation` with `params` (JSON) for `model`. `iteration_budget`: for the soft
    /// solvers, run exactly that many iterations per step (a static program; module doc); for
    /// ncp_fb, its `newton_iterations`; `None` keeps the formulation's own `iterations` and
    /// stops when every world has.
    ///
    /// # Errors
    /// Bad parameters, a formulation that is not batched, or a budget given to the penalty
    /// (it has no solver iterations), as [`EngineError::Unsupported`] naming them.
    pub fn new(
        formulation: &str,
        params: &serde_json::Value,
        model: &Model,
        iteration_budget: Option<usize>,
    ) -> Result<Self, EngineError> {
        let unsupported = |element: String| EngineError::Unsupported {
            engine: "burn",
            element,
        };
        crate::engine::batched_support(formulation, model).map_err(unsupported)?;
        if formulation == "ncp_fb" {
            let mut p: crate::ncp_fb::NcpFbParams =
                crate::formulation::parse_params("ncp_fb", params)
                    .map_err(|e| unsupported(e.to_string()))?;
            if let Some(b) = iteration_budget {
                p.newton_iterations = b.max(1);
            }
            let batch = super::ncp::NcpBatch::new(model, p)
                .map_err(|e| unsupported(format!("ncp_fb: {e}")))?;
            return Ok(Program::Ncp(Box::new(batch)));
        }
        if formulation == "penalty" {
            if iteration_budget.is_some() {
                return Err(unsupported(
                    "penalty has no solver iterations: an iteration budget does not apply".into(),
                ));
            }
            let p: PenaltyParams = crate::formulation::parse_params("penalty", params)
                .map_err(|e| unsupported(e.to_string()))?;
            crate::penalty::Penalty::new(p.clone()).map_err(|e| unsupported(e.to_string()))?;
            return Ok(Program::Penalty(p));
        }
        let (mut batch, _) = super::soft_batch(formulation, params, model)?;
        if let Some(b) = iteration_budget {
            batch.solver.iterations = b.max(1);
            batch.solver.static_iterations = true;
        }
        Ok(Program::Soft(batch))
    }

    /// The rollout over `controls` (one row per step, the same in every world) from `(q, v)`
    /// with timestep `h`: the final `(q, v)`.
    fn rollout<B: Backend>(
        &self,
        q: Vec<S<B>>,
        v: Vec<S<B>>,
        controls: &[Vec<f64>],
        h: f64,
        skip_idle: bool,
        model: &Model,
    ) -> (Vec<S<B>>, Vec<S<B>>) {
        let (mut q, mut v) = (q, v);
        match self {
            Program::Penalty(p) => {
                let mut batch = Batch::<B>::new(model, p.clone());
                batch.skip_idle_contacts = skip_idle;
                for u in controls {
                    let u: Vec<S<B>> = u.iter().map(|&x| S::C(x)).collect();
                    let out = step(&batch, &q, &v, &u, h);
                    q = out.q;
                    v = out.v;
                }
            }
            Program::Ncp(_) => {
                unreachable!("ncp_fb's reverse pass is its adjoint (ncp_pass)")
            }
            Program::Soft(batch) => {
                let mut warm: Option<Vec<S<B>>> = None;
                for u in controls {
                    let u: Vec<S<B>> = u.iter().map(|&x| S::C(x)).collect();
                    let out = super::soft::step(batch, &q, &v, &u, warm.as_deref(), h);
                    q = out.q;
                    v = out.v;
                    warm = Some(out.qacc);
                }
            }
        }
        (q, v)
    }
}

/// One forward-plus-backward pass of engine `name` over `controls.len()` steps of `h` (s) from
/// `initial` (one state per world), the controls of step k `controls[k]` (nu, the same for
/// every world). `between` runs after the forward pass and before the backward one (the
/// caller reads its heap counter there: the tape is alive).
///
/// # Errors
/// An engine this build lacks ([`EngineError::NotBuilt`]) or one that is not batched.
pub fn reverse_pass(
    name: &str,
    program: &Program,
    model: &Model,
    initial: &[State],
    controls: &[Vec<f64>],
    h: f64,
    between: &mut dyn FnMut(),
) -> Result<ReversePass, EngineError> {
    let worlds = initial.len();
    match name {
        "burn-ndarray" => Ok(pass::<super::AutodiffF64>(
            &Default::default(),
            cpu_shards(worlds),
            name,
            program,
            model,
            initial,
            controls,
            h,
            between,
        )),
        #[cfg(feature = "wgpu")]
        "burn-wgpu" => Ok(pass::<burn_autodiff::Autodiff<super::WgpuF32>>(
            &Default::default(),
            1,
            name,
            program,
            model,
            initial,
            controls,
            h,
            between,
        )),
        #[cfg(feature = "cuda")]
        "burn-cuda" => Ok(pass::<burn_autodiff::Autodiff<super::CudaF32>>(
            &Default::default(),
            1,
            name,
            program,
            model,
            initial,
            controls,
            h,
            between,
        )),
        other => {
            let e = crate::engine::find(other)?;
            Err(if e.name == "cpu" {
                EngineError::Unsupported {
                    engine: "cpu",
                    element: "the cpu engine has no reverse mode through burn".into(),
                }
            } else {
                e.not_built()
            })
        }
    }
}

/// The forward half of one shard: the loss tensor (a scalar) and the velocity leaves.
type Recorded<B> = (Tensor<B, 1>, Vec<Tensor<B, 1>>);

#[allow(clippy::too_many_arguments)]
fn pass<B: AutodiffBackend>(
    device: &B::Device,
    shards: usize,
    name: &str,
    program: &Program,
    model: &Model,
    initial: &[State],
    controls: &[Vec<f64>],
    h: f64,
    between: &mut dyn FnMut(),
) -> ReversePass {
    if let Program::Ncp(batch) = program {
        return ncp_pass::<B>(
            device, shards, name, batch, model, initial, controls, h, between,
        );
    }
    let worlds = initial.len();
    let ranges: Vec<std::ops::Range<usize>> = super::shard_ranges(worlds, shards)
        .into_iter()
        .map(|(start, len)| start..start + len)
        .collect();
    // A CPU backend reads back cheaply (burn-ndarray; the GPU backends run one shard).
    let skip_idle = shards > 1 || name == "burn-ndarray";
    let w = loss_weights(model.nq + model.nv);
    let before = super::device_memory(name);
    let t0 = Instant::now();
    let forward = |r: &std::ops::Range<usize>| -> Recorded<B> {
        let (q, v) = upload_states::<B>(&initial[r.clone()], device);
        let leaves: Vec<Tensor<B, 1>> = v
            .into_iter()
            .map(|s| s.tensor(r.len(), device).require_grad())
            .collect();
        let v: Vec<S<B>> = leaves.iter().map(|t| S::T(t.clone())).collect();
        let (q, v) = program.rollout(q, v, controls, h, skip_idle, model);
        let mut loss = S::C(0.0);
        for (x, w) in q.iter().chain(v.iter()).zip(&w) {
            loss = loss + x * *w;
        }
        (loss.tensor(r.len(), device).sum(), leaves)
    };
    let recorded: Vec<Recorded<B>> = per_shard(ranges.clone(), |r| forward(&r));
    let _ = B::sync(device);
    let forward_s = t0.elapsed().as_secs_f64();
    let after = super::device_memory(name);
    between();
    let t1 = Instant::now();
    let backward = |(loss, leaves): Recorded<B>| -> (f64, Vec<Vec<f64>>) {
        let value = super::read_f64(&loss.clone().inner())[0];
        let grads = loss.backward();
        let g = leaves
            .iter()
            .map(|t| {
                t.grad(&grads)
                    .map(|g| super::read_f64(&g))
                    .unwrap_or_else(|| vec![0.0; t.dims()[0]])
            })
            .collect();
        (value, g)
    };
    let parts = per_shard(recorded, backward);
    let backward_s = t1.elapsed().as_secs_f64();
    gathered(
        model.nv,
        &ranges,
        parts,
        (before, after),
        forward_s,
        backward_s,
    )
}

/// [`pass`] for ncp_fb: per shard the rollout on the inner backend keeping its converged steps
/// ([`super::ncp::adjoint::rollout`]: q, v, controls and impulses per world-step, nothing per
/// Newton iteration), `between` with those alive, then the adjoint's backward sweep
/// ([`super::ncp::adjoint::backward`]) seeded with the loss weights at the final state. The
/// device bytes after the forward pass above those before it are the stored steps' (no tape of
/// operations).
#[allow(clippy::too_many_arguments)]
fn ncp_pass<B: AutodiffBackend>(
    device: &B::Device,
    shards: usize,
    name: &str,
    batch: &super::ncp::NcpBatch,
    model: &Model,
    initial: &[State],
    controls: &[Vec<f64>],
    h: f64,
    between: &mut dyn FnMut(),
) -> ReversePass {
    use super::ncp::adjoint;
    type Inner<B> = <B as AutodiffBackend>::InnerBackend;
    let worlds = initial.len();
    let ranges: Vec<std::ops::Range<usize>> = super::shard_ranges(worlds, shards)
        .into_iter()
        .map(|(start, len)| start..start + len)
        .collect();
    let w = loss_weights(model.nq + model.nv);
    let (wq, wv) = w.split_at(model.nq);
    let ctrl: Vec<Vec<S<Inner<B>>>> = controls
        .iter()
        .map(|u| u.iter().map(|&x| S::C(x)).collect())
        .collect();
    let before = super::device_memory(name);
    let t0 = Instant::now();
    let forward = |r: &std::ops::Range<usize>| -> adjoint::Tape<Inner<B>> {
        let (q, v) = upload_states::<Inner<B>>(&initial[r.clone()], device);
        adjoint::rollout(batch, q, v, &ctrl, h, r.len())
    };
    let tapes: Vec<adjoint::Tape<Inner<B>>> = per_shard(ranges.clone(), |r| forward(&r));
    let _ = Inner::<B>::sync(device);
    let forward_s = t0.elapsed().as_secs_f64();
    let after = super::device_memory(name);
    between();
    let t1 = Instant::now();
    let steps = controls.len();
    let backward = |tape: adjoint::Tape<Inner<B>>| -> ((f64, Vec<Vec<f64>>), usize) {
        let size = tape.worlds;
        let (q, v) = tape.state(steps);
        let loss: f64 = q
            .iter()
            .zip(wq)
            .chain(v.iter().zip(wv))
            .map(|(x, w)| super::download(x, size).iter().sum::<f64>() * w)
            .sum();
        let seed = |k: usize, _: &[S<Inner<B>>], _: &[S<Inner<B>>]| {
            let at = |ws: &[f64]| -> Vec<S<Inner<B>>> {
                ws.iter()
                    .map(|&x| S::C(if k == steps { x } else { 0.0 }))
                    .collect()
            };
            (at(wq), at(wv))
        };
        let g = adjoint::backward::<B>(batch, &tape, device, &seed);
        let caveats = tape.unconverged_at.iter().map(Vec::len).sum::<usize>()
            + tape.failed_at.iter().map(Vec::len).sum::<usize>()
            + g.failed_solves.iter().sum::<usize>()
            + tape.left.iter().filter(|l| l.is_some()).count();
        (
            (
                loss,
                g.v0.iter().map(|x| super::download(x, size)).collect(),
            ),
            caveats,
        )
    };
    let (parts, caveats): (Vec<_>, Vec<usize>) = per_shard(tapes, backward).into_iter().unzip();
    let backward_s = t1.elapsed().as_secs_f64();
    ReversePass {
        unconverged_steps: Some(caveats.iter().sum()),
        ..gathered(
            model.nv,
            &ranges,
            parts,
            (before, after),
            forward_s,
            backward_s,
        )
    }
}

/// The pass's result from each shard's `(loss, ∂L/∂v₀ per coordinate)` (shard order, `ranges`
/// their worlds) and the device memory before and after the forward pass.
fn gathered(
    nv: usize,
    ranges: &[std::ops::Range<usize>],
    parts: Vec<(f64, Vec<Vec<f64>>)>,
    memory: (
        Option<crate::engine::DeviceMemory>,
        Option<crate::engine::DeviceMemory>,
    ),
    forward_s: f64,
    backward_s: f64,
) -> ReversePass {
    let worlds = ranges.last().map_or(0, |r| r.end);
    let mut grad_v0 = vec![0.0; worlds * nv];
    let mut loss = 0.0;
    for (r, (value, g)) in ranges.iter().zip(parts) {
        loss += value;
        for (d, col) in g.iter().enumerate() {
            for (i, x) in col.iter().enumerate() {
                grad_v0[(r.start + i) * nv + d] = *x;
            }
        }
    }
    let device_tape_bytes = match memory {
        (Some(b), Some(a)) => Some(a.in_use.saturating_sub(b.in_use)),
        _ => None,
    };
    ReversePass {
        loss,
        grad_v0,
        forward_s,
        backward_s,
        device_tape_bytes,
        shards: ranges.len(),
        unconverged_steps: None,
    }
}

/// `f` over the shards' items: on the caller's thread for one shard, on the rayon pool for
/// several.
fn per_shard<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync + Send) -> Vec<R> {
    if items.len() == 1 {
        items.into_iter().map(f).collect()
    } else {
        items.into_par_iter().map(f).collect()
    }
}
