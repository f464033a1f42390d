//! Reverse mode through a batched soft_convex or signorini rollout by a per-step sweep: the
//! forward pass runs without a tape (burn-ndarray, f64) and keeps each step's input (state and
//! warm start); the backward pass differentiates each step, last first, from its stored input:
//! piece by piece, each solver iteration on its own small tape ([`super::pieces`]), the adjoints
//! of the step's output giving those of its input state, warm start and controls. The result
//! is the gradient of the computed map, every solver and line-search iteration included, the
//! same as one tape over the whole rollout (measured: the same knot gradients to the last
//! printed digit on box_traversal), at a cost linear in the steps and in each step's solver
//! iterations.
//!
//! Why not one tape: burn-autodiff 0.21's backward pass costs more than linear in the tape's
//! nodes ([`crate::batched::carry`]): the backward pass of 40 steps of box_traversal (one
//! world) took 209 s on one tape, 12.6 s with one tape per step ([`StepTape::Whole`]). One
//! tape per piece ([`StepTape::Pieces`]) matters where steps run many solver iterations:
//! box_traversal's control-synthesis gradient (10 worlds, 40 steps of 50 ms, release, 2 cores)
//! took 137.1 s with whole-step tapes and 24.8 s in pieces for signorini (up to ~30 iterations
//! a step), 8.6 s and 8.3 s for soft_convex (~3).
//!
//! Shapes: `w` worlds; per-coordinate host vectors `(coordinates × w)`, controls
//! `(steps × nu × w)`.

use burn_tensor::{Tensor, TensorData};

use super::pieces::{step_vjp, whole_step_vjp, StepInput as PieceInput};
use super::{step, SoftBatch};
use crate::batched::scalar::{M, S};
use crate::batched::{read_f64, upload_states, NdArrayF64};
use crate::model::State;

type Nd = NdArrayF64;

/// A step's input on the host: positions `(nq × w)`, velocities and warm start `(nv × w)`
/// (no warm start before the first step).
struct StepInput {
    q: Vec<Vec<f64>>,
    v: Vec<Vec<f64>>,
    warm: Option<Vec<Vec<f64>>>,
}

/// A forward pass without a tape, with what the backward sweep needs.
pub struct Forward {
    inputs: Vec<StepInput>,
    /// Final states, one per world.
    pub last: Vec<State>,
    /// Per world, the steps whose solver ended unconverged (indices; the state after step
    /// `i` is at `t₀ + (i + 1) h`).
    pub unconverged_at: Vec<Vec<usize>>,
    /// Per world, why its rollout is not a result: it left the batched engine's scene class
    /// (the pair and reason), or its final state is non-finite.
    pub stopped: Vec<Option<String>>,
}

/// The adjoints of a rollout's inputs.
pub struct Adjoints {
    /// `∂L/∂q₀` `(nq × w)`.
    pub q0: Vec<Vec<f64>>,
    /// `∂L/∂v₀` `(nv × w)`.
    pub v0: Vec<Vec<f64>>,
    /// `∂L/∂u_i` `(steps × nu × w)`.
    pub controls: Vec<Vec<Vec<f64>>>,
}

fn host<B: burn_tensor::backend::Backend>(x: &[S<B>], w: usize) -> Vec<Vec<f64>> {
    x.iter()
        .map(|s| match s {
            S::C(c) => vec![*c; w],
            S::T(t) => read_f64(t),
        })
        .collect()
}

fn mask(m: &M<Nd>, w: usize) -> Vec<bool> {
    match m {
        M::C(b) => vec![*b; w],
        M::T(t) => t.to_data().iter::<bool>().collect(),
    }
}

/// Roll `initial` (one state per world) out under `controls` `(steps × nu × w)` with timestep
/// `h`, keeping each step's input.
pub fn forward(
    batch: &SoftBatch,
    initial: &[State],
    controls: &[Vec<Vec<f64>>],
    h: f64,
) -> Forward {
    let w = initial.len();
    let device = Default::default();
    let (mut q, mut v) = upload_states::<Nd>(initial, &device);
    let mut warm: Option<Vec<S<Nd>>> = None;
    let mut inputs = Vec::with_capacity(controls.len());
    let mut unconverged_at: Vec<Vec<usize>> = vec![Vec::new(); w];
    let mut left: Vec<(M<Nd>, String)> = Vec::new();
    for u in controls {
        inputs.push(StepInput {
            q: host(&q, w),
            v: host(&v, w),
            warm: warm.as_deref().map(|x| host(x, w)),
        });
        let u: Vec<S<Nd>> = u
            .iter()
            .map(|c| S::T(Tensor::from_data(TensorData::new(c.clone(), [w]), &device)))
            .collect();
        let out = step(batch, &q, &v, &u, warm.as_deref(), h);
        // One readback per step, as the step's input above.
        for (k, c) in mask(&out.converged, w).into_iter().enumerate() {
            if !c {
                unconverged_at[k].push(inputs.len() - 1);
            }
        }
        for o in out.outside {
            if matches!(o.worlds, M::C(false)) {
                continue;
            }
            let pr = &batch.compiled.pairs[o.pair];
            let g = &batch.model.geoms;
            let why = format!(
                "left the batched engine's scene class: geoms '{}' and '{}': {}",
                g[pr.geoms[0]].name, g[pr.geoms[1]].name, o.reason
            );
            match left.iter_mut().find(|(_, r)| *r == why) {
                Some((m, _)) => *m = m.or(&o.worlds),
                None => left.push((o.worlds, why)),
            }
        }
        q = out.q;
        v = out.v;
        warm = Some(out.qacc);
        // Every world has left the scene class: the rest of the rollout is no result (and a
        // solver on non-physical states may run its whole budget in every step).
        if !left.is_empty() {
            let any = left.iter().fold(M::C(false), |a, (m, _)| a.or(m));
            if mask(&any, w).iter().all(|&b| b) {
                break;
            }
        }
    }
    let (qs, vs) = (host(&q, w), host(&v, w));
    let t = initial.first().map_or(0.0, |s| s.t) + inputs.len() as f64 * h;
    let last: Vec<State> = (0..w)
        .map(|k| State {
            q: nalgebra::DVector::from_iterator(qs.len(), qs.iter().map(|c| c[k])),
            v: nalgebra::DVector::from_iterator(vs.len(), vs.iter().map(|c| c[k])),
            t,
        })
        .collect();
    let mut stopped: Vec<Option<String>> = vec![None; w];
    for (m, why) in &left {
        for (s, f) in stopped.iter_mut().zip(mask(m, w)) {
            if f && s.is_none() {
                *s = Some(why.clone());
            }
        }
    }
    for (s, l) in stopped.iter_mut().zip(&last) {
        if s.is_none() && !l.is_finite() {
            *s = Some(format!(
                "the batched rollout ended with a non-finite state at t = {t:.6} s"
            ));
        }
    }
    Forward {
        inputs,
        last,
        unconverged_at,
        stopped,
    }
}

/// How [`backward`] differentiates each step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepTape {
    /// One tape per piece of the step ([`super::pieces`]): the default.
    Pieces,
    /// One tape over the whole step (the reference the pieces are tested against).
    Whole,
}

/// The adjoints of the inputs of the rollout `fwd` (which ran `controls` with timestep `h`)
/// for the final-state adjoints `seed_q` `(nq × w)` and `seed_v` `(nv × w)` (module doc).
pub fn backward(
    batch: &SoftBatch,
    fwd: &Forward,
    controls: &[Vec<Vec<f64>>],
    h: f64,
    seed_q: Vec<Vec<f64>>,
    seed_v: Vec<Vec<f64>>,
) -> Adjoints {
    backward_with(batch, fwd, controls, h, seed_q, seed_v, StepTape::Pieces)
}

/// [`backward`] with each step differentiated as `tape` says.
pub fn backward_with(
    batch: &SoftBatch,
    fwd: &Forward,
    controls: &[Vec<Vec<f64>>],
    h: f64,
    seed_q: Vec<Vec<f64>>,
    seed_v: Vec<Vec<f64>>,
    tape: StepTape,
) -> Adjoints {
    let w = fwd.last.len();
    let (nq, nv) = (seed_q.len(), seed_v.len());
    let nu = controls.first().map_or(0, Vec::len);
    let (mut lq, mut lv) = (seed_q, seed_v);
    let mut lw: Option<Vec<Vec<f64>>> = None;
    let mut du = vec![vec![vec![0.0; w]; nu]; controls.len()];
    for (i, inp) in fwd.inputs.iter().enumerate().rev() {
        let x = PieceInput::from_host(&inp.q, &inp.v, inp.warm.as_deref(), &controls[i]);
        let vjp = match tape {
            StepTape::Pieces => step_vjp,
            StepTape::Whole => whole_step_vjp,
        };
        let mut g = vjp(batch, &x, w, h, &lq, &lv, lw.as_deref()).into_iter();
        lq = g.by_ref().take(nq).collect();
        lv = g.by_ref().take(nv).collect();
        lw = inp.warm.as_ref().map(|_| g.by_ref().take(nv).collect());
        for d in du[i].iter_mut() {
            *d = g.next().expect("one adjoint per control");
        }
    }
    Adjoints {
        q0: lq,
        v0: lv,
        controls: du,
    }
}
