//! The dense per-world solve of the Newton system `A dp = b` (nλ × nλ, non-symmetric: the
//! friction rows' exact Jacobian), as tensor operations on the batched engine's scalars.
//!
//! Gaussian elimination **without pivoting** (Golub & Van Loan, *Matrix Computations*, 4th ed.,
//! Alg. 3.2.1, the outer-product LU, then forward and back substitution, Alg. 3.1.1–3.1.2).
//! The cpu engine's LU (nalgebra) pivots by rows; pivoting per world would need a data-dependent
//! row exchange in every world, i.e. a select over every candidate row for every element. The
//! Newton matrix here has a positive diagonal on every row kind (the FB partials satisfy
//! ∂φ/∂a + ∂φ/∂b ≥ 2 − √2, the natural map's sticking rows are those of J M⁻¹ Jᵀ, inert rows
//! are the identity) plus the Newton regularization, and on its symmetric part (sticking
//! contacts, resting normals, servos) elimination without pivoting is Cholesky's, which is
//! backward stable; the solutions agree with the pivoted ones to round-off, which the tests
//! check against nalgebra on the rows of real scenes. A world whose pivot is zero or not finite
//! is reported (`ok` false), as the cpu engine reports a singular system.
//!
//! # Packed
//!
//! Written scalar by scalar, the elimination is ~n³/3 tensor operations of one element per
//! world each, and at the nλ = 18–27 rows of box_traversal's wheels on boxes the fixed cost of
//! those operations was most of a Newton iteration (15 ms of tensor overhead per iteration at
//! 24 rows). [`lu_solve`] therefore packs the matrix into one `(worlds, n, n)` tensor and
//! eliminates a column per step (the rank-one update of the trailing block as one broadcast
//! product of the shrinking trailing block): O(n) tensor operations. Elimination and forward
//! substitution are the same arithmetic in the same order as [`lu_solve_unrolled`] (each entry
//! is updated by k = 0, 1, … in turn); back substitution takes each row's sum `Σ u_kj x_j` as
//! one reduction instead of subtracting term by term, so x agrees with the unrolled solve to
//! round-off only.

use burn_tensor::backend::Backend;
use burn_tensor::Tensor;

use crate::batched::scalar::{M, S};

/// Solve `a x = b` (`a` n × n, `b` n, per-world scalars) per world by LU without pivoting,
/// packed (module doc, "Packed"); where every entry is a host constant, unrolled
/// ([`lu_solve_unrolled`]). Returns `x` (n) and, per world, whether every pivot was finite and
/// non-zero and every component of x finite (where not, x holds NaN or infinities, never
/// silently a number).
pub fn lu_solve<B: Backend>(a: &[Vec<S<B>>], b: &[S<B>]) -> (Vec<S<B>>, M<B>) {
    match like(a.iter().flatten().chain(b)) {
        Some(like) => lu_solve_packed(pack(a, &like), b),
        None => lu_solve_unrolled(a, b),
    }
}

/// The first per-world tensor among `xs` (its shape and device), `None` if all are constants.
pub fn like<'a, B: Backend + 'a>(xs: impl IntoIterator<Item = &'a S<B>>) -> Option<Tensor<B, 1>> {
    xs.into_iter().find_map(|s| match s {
        S::T(t) => Some(t.clone()),
        S::C(_) => None,
    })
}

/// `a` (n × m per-world scalars) as one `(worlds, n, m)` tensor like `like`.
pub fn pack<B: Backend>(a: &[Vec<S<B>>], like: &Tensor<B, 1>) -> Tensor<B, 3> {
    let (n, m, w) = (a.len(), a.first().map_or(0, Vec::len), like.dims()[0]);
    let entries: Vec<Tensor<B, 1>> = a.iter().flatten().map(|s| s.tensor_like(like)).collect();
    Tensor::stack::<2>(entries, 1).reshape([w, n, m])
}

/// A block-diagonal n × n matrix per world as one `(worlds, n, n)` tensor like `like`: zero
/// outside the diagonal blocks `(first row, size)` of `blocks`, which tile `0..n`, and
/// `a[i][k]` inside them, plus `diag[i]` on the diagonal where given (`a` n × n; its entries
/// outside the blocks are not read).
pub fn pack_block_diagonal<B: Backend>(
    a: &[Vec<S<B>>],
    diag: Option<&[S<B>]>,
    blocks: &[(usize, usize)],
    like: &Tensor<B, 1>,
) -> Tensor<B, 3> {
    let (n, w) = (a.len(), like.dims()[0]);
    let mut m: Tensor<B, 3> = Tensor::zeros([w, n, n], &like.device());
    for &(r, k) in blocks {
        let entries: Vec<Tensor<B, 1>> = (r..r + k)
            .flat_map(|i| (r..r + k).map(move |j| (i, j)))
            .map(|(i, j)| match diag {
                Some(d) if i == j => (&a[i][j] + &d[i]).tensor_like(like),
                _ => a[i][j].tensor_like(like),
            })
            .collect();
        let block: Tensor<B, 3> = Tensor::stack::<2>(entries, 1).reshape([w, k, k]);
        m = m.slice_assign([0..w, r..r + k, r..r + k], block);
    }
    m
}

/// Solve `m x = b` per world, `m` packed `(worlds, n, n)` (module doc, "Packed"); as
/// [`lu_solve`].
pub fn lu_solve_packed<B: Backend>(m: Tensor<B, 3>, b: &[S<B>]) -> (Vec<S<B>>, M<B>) {
    let [w, n, _] = m.dims();
    if n == 0 {
        return (Vec::new(), M::C(true));
    }
    let like: Tensor<B, 1> = m.clone().slice([0..w, 0..1, 0..1]).reshape([w]);
    // The trailing block of the elimination, (worlds, n − k, n − k) at step k, and the
    // right-hand side's trailing part (worlds, n − k). Nothing is assigned in place: each step
    // keeps U's row k (right of the diagonal) and the next trailing block.
    let mut t = m;
    let mut y: Tensor<B, 2> = Tensor::stack(b.iter().map(|s| s.tensor_like(&like)).collect(), 1);
    let mut pivots = Vec::with_capacity(n);
    let mut u_rows: Vec<Tensor<B, 2>> = Vec::with_capacity(n);
    let mut y_heads: Vec<Tensor<B, 2>> = Vec::with_capacity(n);
    for k in 0..n {
        let r = n - k;
        let pivot = t.clone().slice([0..w, 0..1, 0..1]);
        pivots.push(pivot.clone().reshape([w, 1]));
        y_heads.push(y.clone().slice([0..w, 0..1]));
        if r == 1 {
            break;
        }
        // l = a_ik · (1/a_kk); a_ij − l a_kj; y_i − l y_k (forward substitution, fused).
        let l = t.clone().slice([0..w, 1..r, 0..1]) * pivot.recip();
        let row = t.clone().slice([0..w, 0..1, 1..r]);
        u_rows.push(row.clone().reshape([w, r - 1]));
        y = y.clone().slice([0..w, 1..r]) - l.clone().reshape([w, r - 1]) * y_heads[k].clone();
        t = t.slice([0..w, 1..r, 1..r]) - l * row;
    }
    // U x = y from the last row: x_k = (y_k − Σ_{j>k} u_kj x_j) / u_kk.
    let mut x_tail: Option<Tensor<B, 2>> = None;
    let mut x: Vec<S<B>> = vec![S::zero(); n];
    for k in (0..n).rev() {
        let num = match &x_tail {
            None => y_heads[k].clone(),
            Some(xt) => y_heads[k].clone() - (u_rows[k].clone() * xt.clone()).sum_dim(1),
        };
        let xk = num / pivots[k].clone();
        x[k] = S::T(xk.clone().reshape([w]));
        x_tail = Some(match x_tail {
            None => xk,
            Some(xt) => Tensor::cat(vec![xk, xt], 1),
        });
    }
    let pivots: Tensor<B, 2> = Tensor::cat(pivots, 1);
    let good = pivots
        .clone()
        .is_finite()
        .bool_and(pivots.not_equal_elem(0.0))
        .all_dim(1)
        .reshape([w]);
    let mut ok = M::T(good);
    for xi in &x {
        ok = ok.and(&finite(xi));
    }
    (x, ok)
}

/// [`lu_solve`] scalar by scalar (Golub & Van Loan Alg. 3.2.1 then 3.1.1–3.1.2), skipping
/// structural zeros (host constants): the reference the packed solve is tested against, and
/// the solve of an all-constant system.
pub fn lu_solve_unrolled<B: Backend>(a: &[Vec<S<B>>], b: &[S<B>]) -> (Vec<S<B>>, M<B>) {
    let n = b.len();
    let mut a: Vec<Vec<S<B>>> = a.to_vec();
    let mut ok = M::C(true);
    for k in 0..n {
        let pivot = a[k][k].clone();
        ok = ok.and(&finite_nonzero(&pivot));
        let inv = S::C(1.0) / &pivot;
        for i in k + 1..n {
            if matches!(a[i][k], S::C(c) if c == 0.0) {
                continue;
            }
            let l = &a[i][k] * &inv;
            for j in k + 1..n {
                if matches!(a[k][j], S::C(c) if c == 0.0) {
                    continue;
                }
                a[i][j] = &a[i][j] - &(&l * &a[k][j]);
            }
            a[i][k] = l;
        }
    }
    // L y = b (unit lower), U x = y.
    let mut y = b.to_vec();
    for i in 0..n {
        for k in 0..i {
            y[i] = &y[i] - &(&a[i][k] * &y[k]);
        }
    }
    let mut x = vec![S::zero(); n];
    for i in (0..n).rev() {
        let mut s = y[i].clone();
        for k in i + 1..n {
            s = s - &a[i][k] * &x[k];
        }
        x[i] = s / &a[i][i];
    }
    for xi in &x {
        ok = ok.and(&finite(xi));
    }
    (x, ok)
}

/// Per world: x finite (|x| < ∞, false for NaN).
pub fn finite<B: Backend>(x: &S<B>) -> M<B> {
    x.abs().lt(&S::C(f64::INFINITY))
}

/// Per world: x finite and non-zero.
fn finite_nonzero<B: Backend>(x: &S<B>) -> M<B> {
    finite(x).and(&x.eq_c(0.0).not())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batched::{download, upload, NdArrayF64};

    type B = NdArrayF64;

    /// A diagonally dominant, non-symmetric n × n system over `w` worlds, with structural zeros
    /// (host constants) off the diagonal blocks, like a Newton matrix's.
    fn system(n: usize, w: usize) -> (Vec<Vec<S<B>>>, Vec<S<B>>) {
        let device = Default::default();
        let val = |i: usize, j: usize, k: usize| ((i * 31 + j * 17 + k * 7) as f64 * 0.37).sin();
        let a = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        if i != j && (i / 3 + j) % 4 == 1 {
                            S::C(0.0)
                        } else {
                            let d = if i == j { 3.0 + n as f64 } else { 0.0 };
                            S::T(upload((0..w).map(|k| val(i, j, k) + d).collect(), &device))
                        }
                    })
                    .collect()
            })
            .collect();
        let b = (0..n)
            .map(|i| S::T(upload((0..w).map(|k| val(i, n, k)).collect(), &device)))
            .collect();
        (a, b)
    }

    /// The packed solve equals the unrolled one to round-off, and its residual is round-off.
    #[test]
    fn packed_lu_equals_the_unrolled_solve() {
        for n in [1, 2, 7, 24] {
            let w = 5;
            let (a, b) = system(n, w);
            let (x, ok) = lu_solve(&a, &b);
            let (xr, okr) = lu_solve_unrolled(&a, &b);
            assert!(ok.any_true() && download(&ok.indicator(), w).iter().all(|&o| o == 1.0));
            assert!(download(&okr.indicator(), w).iter().all(|&o| o == 1.0));
            for (xi, ri) in x.iter().zip(&xr) {
                for (p, q) in download(xi, w).iter().zip(download(ri, w)) {
                    assert!(
                        (p - q).abs() <= 1e-14 * (1.0 + q.abs()),
                        "n {n}: {p} vs {q}"
                    );
                }
            }
            // A x − b per world.
            for i in 0..n {
                let ax = (0..n).fold(S::zero(), |acc: S<B>, j| acc + &a[i][j] * &x[j]);
                for r in download(&(ax - &b[i]), w) {
                    assert!(r.abs() <= 1e-13, "n {n} row {i}: residual {r}");
                }
            }
        }
    }

    /// A world whose matrix has a zero pivot is reported, the others are solved.
    #[test]
    fn a_zero_pivot_is_reported_in_its_world_only() {
        let device = Default::default();
        let (w, n) = (3, 4);
        let (mut a, b) = system(n, w);
        // World 1: first row and column zero (pivot 0).
        for j in 0..n {
            for (i, k) in [(0, j), (j, 0)] {
                let mut v = download(&a[i][k], w);
                v[1] = 0.0;
                a[i][k] = S::T(upload(v, &device));
            }
        }
        let (x, ok) = lu_solve(&a, &b);
        assert_eq!(download(&ok.indicator(), w), vec![1.0, 0.0, 1.0]);
        assert!(download(&x[0], w)[0].is_finite());
    }
}
