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

use burn_tensor::backend::Backend;

use crate::batched::scalar::{M, S};

/// Solve `a x = b` per world by LU without pivoting. Returns `x` (n) and, per world, whether
/// every pivot was finite and non-zero and every component of x finite (where not, x holds
/// NaN or infinities, never silently a number).
pub fn lu_solve<B: Backend>(a: &[Vec<S<B>>], b: &[S<B>]) -> (Vec<S<B>>, M<B>) {
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
