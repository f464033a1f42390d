//! One step's vector–Jacobian product piece by piece ([`step_vjp`]), for the reverse sweep
//! ([`super::sweep`]): the step is cut where the solver hands its state from one iteration to
//! the next ([`crate::batched::carry`] says why), into
//!
//! 1. the setup: input `x = (q, v, warm, u)` → the solve's problem `P` and start `a_s`
//!    ([`super::setup`]);
//! 2. the solver's start: `(P, a_s, live)` → state `σ₀` ([`solver::begin`]);
//! 3. each iteration k: `(P, σ_{k−1})` → `σ_k` ([`solver::advance`]);
//! 4. the end: `(x, P, live, σ_K)` → `(q', v', qacc)` ([`solver::conclude`], [`super::masked`],
//!    [`super::integrate`]).
//!
//! A tape-free pass on burn-ndarray (f64) records every piece's input; the pieces are then
//! differentiated last first, each on its own small tape. `P` feeds every piece after the
//! setup, so its adjoint is the sum of theirs (the chain rule through a shared input):
//!
//! `λ_x = ∂(4)ᵀ_x λ_out + ∂(1)ᵀ_x [λ_P; λ_{a_s}]`, `λ_P = Σ_pieces ∂ᵀ_P λ_piece`.
//!
//! A step where no world has a row is one piece (the whole [`super::step`]).

use burn_tensor::{Tensor, TensorData};

use super::solver::{self, Advance};
use super::{integrate, masked, setup, step, SoftBatch};
use crate::batched::carry::{accumulate, count, piece_vjp, Carry, Mapper};
use crate::batched::scalar::{M, S};
use crate::batched::{AutodiffF64, NdArrayF64};

type Nd = NdArrayF64;
type Ad = AutodiffF64;

/// A step's input, per world: positions `(nq)`, velocities `(nv)`, the previous step's
/// accelerations `(nv)` (none before the first step), controls `(nu)`.
#[derive(Clone)]
pub struct StepInput<B: burn_tensor::backend::Backend> {
    /// Positions.
    pub q: Vec<S<B>>,
    /// Velocities.
    pub v: Vec<S<B>>,
    /// Warm start.
    pub warm: Option<Vec<S<B>>>,
    /// Controls.
    pub u: Vec<S<B>>,
}

impl<B: burn_tensor::backend::Backend> Carry<B> for StepInput<B> {
    type On<C: burn_tensor::backend::Backend> = StepInput<C>;
    fn map<C: burn_tensor::backend::Backend>(&self, f: &mut dyn Mapper<B, C>) -> StepInput<C> {
        StepInput {
            q: self.q.map(f),
            v: self.v.map(f),
            warm: Carry::map(&self.warm, f),
            u: self.u.map(f),
        }
    }
}

impl StepInput<Nd> {
    /// The input from host vectors `(coordinates × worlds)`, every entry a tensor.
    pub fn from_host(
        q: &[Vec<f64>],
        v: &[Vec<f64>],
        warm: Option<&[Vec<f64>]>,
        u: &[Vec<f64>],
    ) -> Self {
        let device = Default::default();
        let up = |x: &[Vec<f64>]| -> Vec<S<Nd>> {
            x.iter()
                .map(|c| {
                    S::T(Tensor::from_data(
                        TensorData::new(c.clone(), [c.len()]),
                        &device,
                    ))
                })
                .collect()
        };
        Self {
            q: up(q),
            v: up(v),
            warm: warm.map(up),
            u: up(u),
        }
    }
}

/// The output adjoints of a step as one list per output scalar: `(q', v', qacc)`, zeros for
/// `qacc` without `lw`.
fn output_adjoints(
    lq: &[Vec<f64>],
    lv: &[Vec<f64>],
    lw: Option<&[Vec<f64>]>,
    nv: usize,
    w: usize,
) -> Vec<Vec<f64>> {
    let mut out: Vec<Vec<f64>> = lq.iter().chain(lv).cloned().collect();
    match lw {
        Some(lw) => out.extend(lw.iter().cloned()),
        None => out.extend((0..nv).map(|_| vec![0.0; w])),
    }
    out
}

/// The adjoint of a step's input `x` (`worlds` worlds), in [`StepInput`]'s visiting order
/// `(q, v, warm, u)` (every entry of `x` a tensor), for the adjoints `lq` `(nq × w)`, `lv`
/// `(nv × w)` of its positions and velocities after the step and `lw` `(nv × w)` of its
/// accelerations (the next step's warm start; `None`: zero). Piece by piece (module doc).
pub fn step_vjp(
    b: &SoftBatch,
    x: &StepInput<Nd>,
    worlds: usize,
    h: f64,
    lq: &[Vec<f64>],
    lv: &[Vec<f64>],
    lw: Option<&[Vec<f64>]>,
) -> Vec<Vec<f64>> {
    let w = worlds;
    let s = setup(b, &x.q, &x.v, &x.u, x.warm.as_deref(), h);
    if matches!(s.live, M::C(false)) {
        return whole_step_vjp(b, x, worlds, h, lq, lv, lw);
    }
    let (data, live, start) = (s.data, s.live, s.start);
    // The tape-free pass through the solver: every state between two iterations.
    let mut states = {
        let p = data.problem(b.signorini);
        let mut states = vec![solver::begin(&p, start.clone(), &live, &b.solver)];
        for _ in 0..b.solver.iterations {
            let last = states.last().expect("the start is a state").clone();
            match solver::advance(&p, last, &b.solver) {
                Advance::Next(n) => states.push(n),
                Advance::Last(n) => {
                    states.push(n);
                    break;
                }
                Advance::Stopped(_) => break,
            }
        }
        states
    };
    let (nx, nd) = (count(x), count(&data));
    let split = |g: Vec<Vec<f64>>, at: usize| -> (Vec<Vec<f64>>, Vec<Vec<f64>>) {
        let mut a = g;
        let b = a.split_off(at);
        (a, b)
    };

    // 4. The end.
    let last = states.pop().expect("the start is a state");
    let out = output_adjoints(lq, lv, lw, b.model.nv, w);
    let input = (x.clone(), (data.clone(), live.clone()), last);
    let g = piece_vjp(&input, w, &out, true, |(x, (d, live), st)| {
        let p = d.problem(b.signorini);
        let (qacc, force, ..) = masked(&live, solver::conclude(&p, st), &d.a0);
        let (q, v) = integrate(b, &x.q, &x.v, &d, &qacc, &force, h);
        (q, v, qacc)
    });
    let (mut lx, rest) = split(g, nx);
    let (mut ld, mut ls) = split(rest, nd);

    // 3. The iterations, last first.
    while let Some(prev) = states.pop() {
        let input = (data.clone(), prev);
        let g = piece_vjp(&input, w, &ls, false, |(d, st)| {
            let p = d.problem(b.signorini);
            match solver::advance(&p, st, &b.solver) {
                Advance::Next(n) | Advance::Last(n) | Advance::Stopped(n) => n,
            }
        });
        let (gd, gs) = split(g, nd);
        accumulate(&mut ld, &gd);
        ls = gs;
    }

    // 2. The solver's start.
    let input = (data, (start, live));
    let g = piece_vjp(&input, w, &ls, false, |(d, (start, live))| {
        solver::begin(&d.problem(b.signorini), start, &live, &b.solver)
    });
    let (gd, lstart) = split(g, nd);
    accumulate(&mut ld, &gd);

    // 1. The setup.
    ld.extend(lstart);
    let g = piece_vjp(x, w, &ld, false, |x| {
        let s = setup(b, &x.q, &x.v, &x.u, x.warm.as_deref(), h);
        (s.data, s.start)
    });
    accumulate(&mut lx, &g);
    lx
}

/// [`step_vjp`] on one tape over the whole step (the reference the pieces are tested against,
/// and the path of a step without rows).
pub fn whole_step_vjp(
    b: &SoftBatch,
    x: &StepInput<Nd>,
    worlds: usize,
    h: f64,
    lq: &[Vec<f64>],
    lv: &[Vec<f64>],
    lw: Option<&[Vec<f64>]>,
) -> Vec<Vec<f64>> {
    let out = output_adjoints(lq, lv, lw, b.model.nv, worlds);
    piece_vjp(x, worlds, &out, true, |x: StepInput<Ad>| {
        let o = step(b, &x.q, &x.v, &x.u, x.warm.as_deref(), h);
        (o.q, o.v, o.qacc)
    })
}
