//! Reverse mode through a batched soft_convex or signorini rollout by a per-step sweep: the
//! forward pass runs without a tape (burn-ndarray, f64) and keeps each step's input (state and
//! warm start); the backward pass re-runs each step, last first, on burn's autodiff backend from
//! its stored input, contracts the step's output adjoints with its outputs, and one backward
//! pass gives the adjoints of the step's input state, warm start and controls. The result is
//! the gradient of the computed map, every solver and line-search iteration included, the same
//! as one tape over the whole rollout (measured: the same knot gradients to the last printed
//! digit on box_traversal), at a cost linear in the steps.
//!
//! Why not one tape: burn-autodiff 0.21 builds its checkpointer (`CheckpointerBuilder::build`)
//! with a linear search and a `Vec::remove` per checkpointed node, quadratic in the tape's
//! nodes: the backward pass of 40 steps of box_traversal (one world) took 209 s, against
//! 12.6 s with this sweep. Each step's leaves are one tensor, sliced: separate leaves would each
//! start a graph, which burn-autodiff merges by copying one into the other.
//!
//! Shapes: `w` worlds; per-coordinate host vectors `(coordinates × w)`, controls
//! `(steps × nu × w)`.

use burn_tensor::{Tensor, TensorData};

use super::{step, SoftBatch};
use crate::batched::scalar::{M, S};
use crate::batched::{read_f64, upload_states, AutodiffF64, NdArrayF64};
use crate::model::State;

type Ad = AutodiffF64;
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
    let w = fwd.last.len();
    let device = Default::default();
    let (nq, nv) = (seed_q.len(), seed_v.len());
    let nu = controls.first().map_or(0, Vec::len);
    let (mut lq, mut lv) = (seed_q, seed_v);
    let mut lw: Option<Vec<Vec<f64>>> = None;
    let mut du = vec![vec![vec![0.0; w]; nu]; controls.len()];
    for (i, inp) in fwd.inputs.iter().enumerate().rev() {
        let mut rows: Vec<&[f64]> = Vec::new();
        rows.extend(inp.q.iter().map(Vec::as_slice));
        rows.extend(inp.v.iter().map(Vec::as_slice));
        if let Some(wm) = &inp.warm {
            rows.extend(wm.iter().map(Vec::as_slice));
        }
        rows.extend(controls[i].iter().map(Vec::as_slice));
        let n = rows.len();
        let flat: Vec<f64> = rows.iter().flat_map(|r| r.iter().copied()).collect();
        let x = Tensor::<Ad, 2>::from_data(TensorData::new(flat, [n, w]), &device).require_grad();
        let row = |r: usize| S::T(x.clone().slice([r..r + 1, 0..w]).reshape([w]));
        let q: Vec<S<Ad>> = (0..nq).map(row).collect();
        let v: Vec<S<Ad>> = (nq..nq + nv).map(row).collect();
        let warm: Option<Vec<S<Ad>>> = inp
            .warm
            .as_ref()
            .map(|_| (nq + nv..nq + 2 * nv).map(row).collect());
        let u: Vec<S<Ad>> = (n - nu..n).map(row).collect();
        let o = step(batch, &q, &v, &u, warm.as_deref(), h);
        let lam =
            |x: &[f64]| S::<Ad>::T(Tensor::from_data(TensorData::new(x.to_vec(), [w]), &device));
        let mut surrogate = S::<Ad>::C(0.0);
        for (y, l) in o.q.iter().zip(&lq).chain(o.v.iter().zip(&lv)) {
            surrogate = surrogate + y * &lam(l);
        }
        if let Some(lw) = &lw {
            for (y, l) in o.qacc.iter().zip(lw) {
                surrogate = surrogate + y * &lam(l);
            }
        }
        let g = match surrogate {
            S::T(s) => {
                let grads = s.sum().backward();
                x.grad(&grads)
                    .map(|g| read_f64(&g))
                    .unwrap_or_else(|| vec![0.0; n * w])
            }
            // The step's outputs do not depend on its inputs: nothing flows back.
            S::C(_) => vec![0.0; n * w],
        };
        let at = |r: usize| g[r * w..(r + 1) * w].to_vec();
        lq = (0..nq).map(at).collect();
        lv = (nq..nq + nv).map(at).collect();
        lw = inp
            .warm
            .as_ref()
            .map(|_| (nq + nv..nq + 2 * nv).map(at).collect());
        for (a, d) in du[i].iter_mut().enumerate() {
            *d = at(n - nu + a);
        }
    }
    Adjoints {
        q0: lq,
        v0: lv,
        controls: du,
    }
}
