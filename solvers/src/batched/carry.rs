//! Cutting a batched computation's tape into pieces: the values one piece hands to the next,
//! visited in a fixed order ([`Carry`]), and the vector–Jacobian product of one piece from its
//! stored input ([`piece_vjp`]).
//!
//! Why: burn-autodiff 0.21's backward pass costs more than linear in the size of the tape it
//! walks. `CheckpointerBuilder::build` finds each checkpointed node with a linear search and a
//! `Vec::remove` (quadratic in the tape's nodes), and after every backward pass the graph
//! cleaner walks and clones maps over every node still registered. One step of the batched
//! soft solvers holds tens of thousands of operations (every solver and line-search iteration),
//! so the reverse sweep ([`crate::batched::soft::sweep`]) records one piece of a step at a time
//! (the setup, each solver iteration, the integration; [`crate::batched::soft::pieces`]) and
//! chains the pieces' adjoints on the host. The result is the same gradient (the chain rule
//! taken piece by piece; measured against the whole-step tape in the tests), at a cost linear
//! in the pieces.
//!
//! A piece's input is rebuilt on the autodiff backend from the tape-free values of the same
//! computation: every per-world tensor scalar ([`S::T`]) becomes a row of a leaf, constants
//! ([`S::C`]) stay constants and masks are copied. Leaves hold at most [`LEAF_ROWS`] rows:
//! burn-autodiff's slice backward writes each slice's gradient into a zero tensor the size of
//! its leaf (quadratic in the rows of one leaf), while every separate leaf starts a graph that
//! burn merges into another by moving its maps (quadratic in the leaves); 16 rows keeps both
//! small.
//!
//! Requirement on a piece: the same code on the same values takes the same path on both
//! backends (every `S` operation chooses its variant from its operands' variants and constants,
//! never from tensor data, and every readback reads the same numbers), so a piece's output
//! has the same structure on both, and adjoints are matched to values by their position.

use burn_tensor::{Tensor, TensorData};

use super::scalar::{M, S};
use super::{read_f64, AutodiffF64, NdArrayF64};

type Ad = AutodiffF64;
type Nd = NdArrayF64;

/// Rows of one leaf tensor (module doc).
pub const LEAF_ROWS: usize = 16;

/// Maps each scalar and mask of a carried value from backend `B` to backend `C`, in visiting
/// order.
pub trait Mapper<B: burn_tensor::backend::Backend, C: burn_tensor::backend::Backend> {
    /// A per-world scalar.
    fn s(&mut self, x: &S<B>) -> S<C>;
    /// A per-world mask.
    fn m(&mut self, x: &M<B>) -> M<C>;
}

/// A value a piece of a step hands to the next: its per-world scalars and masks, visited in a
/// fixed order by [`Carry::map`] (the same structure on every backend).
pub trait Carry<B: burn_tensor::backend::Backend> {
    /// The same value on backend `C`.
    type On<C: burn_tensor::backend::Backend>;
    /// The same value with every scalar and mask mapped by `f`, in visiting order.
    fn map<C: burn_tensor::backend::Backend>(&self, f: &mut dyn Mapper<B, C>) -> Self::On<C>;
}

impl<B: burn_tensor::backend::Backend> Carry<B> for S<B> {
    type On<C: burn_tensor::backend::Backend> = S<C>;
    fn map<C: burn_tensor::backend::Backend>(&self, f: &mut dyn Mapper<B, C>) -> S<C> {
        f.s(self)
    }
}

impl<B: burn_tensor::backend::Backend> Carry<B> for M<B> {
    type On<C: burn_tensor::backend::Backend> = M<C>;
    fn map<C: burn_tensor::backend::Backend>(&self, f: &mut dyn Mapper<B, C>) -> M<C> {
        f.m(self)
    }
}

impl<B: burn_tensor::backend::Backend, T: Carry<B>> Carry<B> for Vec<T> {
    type On<C: burn_tensor::backend::Backend> = Vec<T::On<C>>;
    fn map<C: burn_tensor::backend::Backend>(&self, f: &mut dyn Mapper<B, C>) -> Self::On<C> {
        self.iter().map(|x| x.map(f)).collect()
    }
}

impl<B: burn_tensor::backend::Backend, T: Carry<B>> Carry<B> for Option<T> {
    type On<C: burn_tensor::backend::Backend> = Option<T::On<C>>;
    fn map<C: burn_tensor::backend::Backend>(&self, f: &mut dyn Mapper<B, C>) -> Self::On<C> {
        self.as_ref().map(|x| x.map(f))
    }
}

impl<B: burn_tensor::backend::Backend, T: Carry<B>, U: Carry<B>> Carry<B> for (T, U) {
    type On<C: burn_tensor::backend::Backend> = (T::On<C>, U::On<C>);
    fn map<C: burn_tensor::backend::Backend>(&self, f: &mut dyn Mapper<B, C>) -> Self::On<C> {
        let a = self.0.map(f);
        (a, self.1.map(f))
    }
}

impl<B: burn_tensor::backend::Backend, T: Carry<B>, U: Carry<B>, V: Carry<B>> Carry<B>
    for (T, U, V)
{
    type On<C: burn_tensor::backend::Backend> = (T::On<C>, U::On<C>, V::On<C>);
    fn map<C: burn_tensor::backend::Backend>(&self, f: &mut dyn Mapper<B, C>) -> Self::On<C> {
        let a = self.0.map(f);
        let b = self.1.map(f);
        (a, b, self.2.map(f))
    }
}

/// Reads every tensor scalar's values (one `(worlds)` vector each, in visiting order).
struct Values(Vec<Vec<f64>>);

impl<B: burn_tensor::backend::Backend> Mapper<B, B> for Values {
    fn s(&mut self, x: &S<B>) -> S<B> {
        if let S::T(t) = x {
            self.0.push(read_f64(t));
        }
        x.clone()
    }
    fn m(&mut self, x: &M<B>) -> M<B> {
        x.clone()
    }
}

/// The values of `x`'s tensor scalars, in visiting order: `(count × worlds)`.
pub fn values<B: burn_tensor::backend::Backend, X: Carry<B>>(x: &X) -> Vec<Vec<f64>> {
    let mut v = Values(Vec::new());
    let _ = x.map(&mut v);
    v.0
}

/// Rebuilds a tape-free value on the autodiff backend: tensor scalars become rows of the
/// leaves, in visiting order.
struct Rebuild<'a> {
    leaves: &'a [Tensor<Ad, 2>],
    next: usize,
    worlds: usize,
}

impl Mapper<Nd, Ad> for Rebuild<'_> {
    fn s(&mut self, x: &S<Nd>) -> S<Ad> {
        match x {
            S::C(c) => S::C(*c),
            S::T(_) => {
                let (leaf, row) = (self.next / LEAF_ROWS, self.next % LEAF_ROWS);
                self.next += 1;
                S::T(
                    self.leaves[leaf]
                        .clone()
                        .slice([row..row + 1, 0..self.worlds])
                        .reshape([self.worlds]),
                )
            }
        }
    }
    fn m(&mut self, x: &M<Nd>) -> M<Ad> {
        match x {
            M::C(b) => M::C(*b),
            M::T(t) => M::T(Tensor::from_data(t.to_data(), &Default::default())),
        }
    }
}

/// Contracts an output with its adjoints: `Σ_i y_i · λ_i` over the tensor scalars (with
/// `every_scalar`, over every scalar, constants taking their adjoint and adding nothing),
/// skipping adjoints that are zero in every world.
struct Contract<'a> {
    adjoints: &'a [Vec<f64>],
    every_scalar: bool,
    next: usize,
    sum: S<Ad>,
}

impl Mapper<Ad, Ad> for Contract<'_> {
    fn s(&mut self, x: &S<Ad>) -> S<Ad> {
        if self.every_scalar && matches!(x, S::C(_)) {
            self.next += 1;
        }
        if let S::T(t) = x {
            let l = &self.adjoints[self.next];
            self.next += 1;
            if l.iter().any(|&v| v != 0.0) {
                let lam = Tensor::<Ad, 1>::from_data(
                    TensorData::new(l.clone(), [l.len()]),
                    &Default::default(),
                );
                self.sum = std::mem::replace(&mut self.sum, S::C(0.0)) + S::T(t.clone() * lam);
            }
        }
        x.clone()
    }
    fn m(&mut self, x: &M<Ad>) -> M<Ad> {
        x.clone()
    }
}

/// The number of tensor scalars of `x` (the length of its adjoint).
pub fn count<B: burn_tensor::backend::Backend, X: Carry<B>>(x: &X) -> usize {
    struct Count(usize);
    impl<B: burn_tensor::backend::Backend> Mapper<B, B> for Count {
        fn s(&mut self, x: &S<B>) -> S<B> {
            if matches!(x, S::T(_)) {
                self.0 += 1;
            }
            x.clone()
        }
        fn m(&mut self, x: &M<B>) -> M<B> {
            x.clone()
        }
    }
    let mut c = Count(0);
    let _ = x.map(&mut c);
    c.0
}

/// The vector–Jacobian product of one piece `f` at its tape-free input `x` (`worlds` worlds):
/// `f` runs on the autodiff backend from `x` rebuilt on leaves, its output is contracted with
/// `adjoints` (one `(worlds)` vector per tensor scalar of the output, in visiting order; with
/// `every_scalar`, one per scalar, constants included), and one backward pass gives the adjoint
/// of each tensor scalar of `x`, in visiting order.
///
/// # Panics
/// If `adjoints` does not have one entry per (tensor) scalar of `f`'s output (a piece whose
/// output structure differs between the backends: module doc).
pub fn piece_vjp<X, Y>(
    x: &X,
    worlds: usize,
    adjoints: &[Vec<f64>],
    every_scalar: bool,
    f: impl FnOnce(X::On<Ad>) -> Y,
) -> Vec<Vec<f64>>
where
    X: Carry<Nd>,
    Y: Carry<Ad>,
{
    let vals = values(x);
    let n = vals.len();
    let device = Default::default();
    let leaves: Vec<Tensor<Ad, 2>> = vals
        .chunks(LEAF_ROWS)
        .map(|rows| {
            let flat: Vec<f64> = rows.iter().flat_map(|r| r.iter().copied()).collect();
            Tensor::<Ad, 2>::from_data(TensorData::new(flat, [rows.len(), worlds]), &device)
                .require_grad()
        })
        .collect();
    let input = x.map(&mut Rebuild {
        leaves: &leaves,
        next: 0,
        worlds,
    });
    let y = f(input);
    let mut c = Contract {
        adjoints,
        every_scalar,
        next: 0,
        sum: S::C(0.0),
    };
    let _ = y.map(&mut c);
    assert_eq!(
        c.next,
        adjoints.len(),
        "a piece's output has {} (tensor) scalars, its adjoint {}",
        c.next,
        adjoints.len()
    );
    let S::T(sum) = c.sum else {
        // The output does not depend on the input: nothing flows back.
        return vec![vec![0.0; worlds]; n];
    };
    // A term 0 · Σ leaf₀ keeps the root on the tape even where no contracted output depends on
    // the input (burn's backward pass needs a tracked root); it adds exact zeros.
    let root = match leaves.first() {
        Some(l) => sum.sum() + l.clone().sum().mul_scalar(0.0),
        None => return Vec::new(),
    };
    let grads = root.backward();
    let mut out = Vec::with_capacity(n);
    for leaf in &leaves {
        let rows = leaf.dims()[0];
        match leaf.grad(&grads) {
            Some(g) => {
                let g = read_f64(&g);
                out.extend((0..rows).map(|r| g[r * worlds..(r + 1) * worlds].to_vec()));
            }
            None => out.extend((0..rows).map(|_| vec![0.0; worlds])),
        }
    }
    out
}

/// Adds `b` into `a` entry by entry (adjoints of one value from two pieces).
pub fn accumulate(a: &mut [Vec<f64>], b: &[Vec<f64>]) {
    assert_eq!(a.len(), b.len(), "adjoints of one value have one length");
    for (x, y) in a.iter_mut().zip(b) {
        for (u, v) in x.iter_mut().zip(y) {
            *u += v;
        }
    }
}
