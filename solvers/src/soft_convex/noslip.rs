//! MuJoCo's no-slip post-solver (`mj_solNoSlip`, `engine_solver.c`; option
//! `noslip_iterations`, `noslip_tolerance`): after the main solve, projected Gauss–Seidel sweeps
//! over the friction forces alone with the constraint regularization removed, so that a contact
//! that can stick does not creep (the soft model's creep under a held load, mujoco#3328).
//!
//! # The problem
//!
//! With the normal forces of the main solve held fixed, minimize over the friction forces the
//! dual cost `½ fᵀ A f + fᵀ b` with `A = J M⁻¹ Jᵀ` (the Delassus operator, **without** the
//! regularizer R that makes the main problem soft) and `b = J a₀ − aref` (`efc_b`), so that the
//! residual of a row is `r = b + A f = J a(f) − aref`; subject to each row's set:
//!
//! * joint friction loss (dry friction) rows: `|f| ≤ η`, by one Gauss–Seidel step and a clamp;
//! * pyramidal contacts: each pair of opposing edges `(f⁺, f⁻)` with its sum `2m` fixed,
//!   `f^± = m ± y`, `y ∈ [−m, m]`, minimized exactly in `y` (a 1-D quadratic);
//! * elliptic contacts: the friction components `x` within the ellipse
//!   `Σ (x_j/μ_j)² ≤ f_n²`, by the QCQP below, with `f_n` the normal force.
//!
//! Each block's update is kept only when it lowers the cost (a change above 1e-10 is undone).
//! A sweep's improvement (the first one plus `½ Σ R f²`, the regularization cost dropped) is
//! scaled by the monolithic scale `1/(meaninertia · nv)`; the sweeps stop below
//! `noslip_tolerance` or after `noslip_iterations`. The accelerations are then
//! `a = a₀ + M⁻¹ Jᵀ f` (MuJoCo's `dualFinish`).
//!
//! The QCQP `min ½ xᵀ A x + xᵀ b` s.t. `Σ (x_j/d_j)² ≤ r²` (MuJoCo's `mju_QCQP2`, `mju_QCQP3`,
//! `mju_QCQP`): scaled to `y = x/d`, `A' = D A D`, `b' = D b`, Newton's method from λ = 0 on the
//! secular equation `‖y(λ)‖² = r²`, `(A' + λ I) y = −b'`, with `d/dλ ‖y‖² = −2 yᵀ (A' + λI)⁻¹ y`;
//! it stops when `‖y‖² − r² < 1e-10` (inside: the unconstrained minimum at λ = 0) or the step
//! is below 1e-10, at most 20 steps; `det(A' + λI) < 1e-10` (or a matrix that is not positive
//! definite) gives `x = 0`. These are `mju_QCQP2`'s steps and thresholds
//! (`engine_util_solve.c`, read for condim 3); the same iteration serves condim 4 and 6, where
//! MuJoCo's `mju_QCQP3` and `mju_QCQP` were not read and the references have none. On the
//! boundary the result is put exactly on the ellipse.

use nalgebra::{DMatrix, DVector};

use super::cost::RowCost;
use super::impedance::MINVAL;
use super::rows::Rows;

/// The no-slip sweeps' settings: at most `iterations` sweeps, stop when the scaled
/// improvement is below `tolerance`; `scale` = `1/(meaninertia · nv)`.
#[derive(Debug, Clone, Copy)]
pub struct NoSlip {
    /// Maximum sweeps (`noslip_iterations`).
    pub iterations: usize,
    /// Tolerance on the scaled improvement (`noslip_tolerance`).
    pub tolerance: f64,
    /// Improvement scale.
    pub scale: f64,
}

/// Run the sweeps (module doc) on `force` (the main solve's row forces, updated in place) for
/// rows `rows`, with `minv_jt` = `M⁻¹ Jᵀ` (nv × nefc) and `a0` the unconstrained
/// accelerations. Returns the sweeps made.
pub fn solve(
    rows: &Rows,
    minv_jt: &DMatrix<f64>,
    a0: &DVector<f64>,
    force: &mut DVector<f64>,
    s: &NoSlip,
) -> usize {
    let n = rows.kinds.len();
    if n == 0 || s.iterations == 0 {
        return 0;
    }
    let a = &rows.j * minv_jt;
    let b = &rows.j * a0 - &rows.aref;
    let residual = |f: &DVector<f64>, i: usize| b[i] + a.row(i).dot(&f.transpose());
    let block = |first: usize, dim: usize| {
        let mut m = DMatrix::from_fn(dim, dim, |r, c| a[(first + r, first + c)]);
        for k in 0..dim {
            m[(k, k)] = m[(k, k)].max(1e-10);
        }
        m
    };
    let mut iter = 0;
    while iter < s.iterations {
        let mut improvement = 0.0;
        if iter == 0 {
            improvement += (0..n)
                .map(|i| 0.5 * force[i] * force[i] * rows.r[i])
                .sum::<f64>();
        }
        // Dry friction rows.
        for i in 0..n {
            let RowCost::FrictionLoss { eta } = rows.kinds[i] else {
                continue;
            };
            let res = residual(force, i);
            let old = force[i];
            let aii = a[(i, i)].max(MINVAL);
            force[i] = (force[i] - res / aii).clamp(-eta, eta);
            let delta = force[i] - old;
            improvement -= 0.5 * delta * delta * aii + delta * res;
        }
        // Contacts.
        for c in &rows.contacts {
            if c.dim < 2 {
                continue;
            }
            if c.pyramidal {
                for j in (c.first..c.first + c.rows).step_by(2) {
                    let res = [residual(force, j), residual(force, j + 1)];
                    let old = [force[j], force[j + 1]];
                    let ac = block(j, 2);
                    let bc = [
                        res[0] - (ac[(0, 0)] * old[0] + ac[(0, 1)] * old[1]),
                        res[1] - (ac[(1, 0)] * old[0] + ac[(1, 1)] * old[1]),
                    ];
                    let mid = 0.5 * (force[j] + force[j + 1]);
                    let k1 = ac[(0, 0)] + ac[(1, 1)] - ac[(0, 1)] - ac[(1, 0)];
                    let k0 = mid * (ac[(0, 0)] - ac[(1, 1)]) + bc[0] - bc[1];
                    if k1 < MINVAL {
                        force[j] = mid;
                        force[j + 1] = mid;
                    } else {
                        let y = -k0 / k1;
                        if y < -mid {
                            force[j] = 0.0;
                            force[j + 1] = 2.0 * mid;
                        } else if y > mid {
                            force[j] = 2.0 * mid;
                            force[j + 1] = 0.0;
                        } else {
                            force[j] = mid + y;
                            force[j + 1] = mid - y;
                        }
                    }
                    improvement -= cost_change(&ac, force, j, &old, &res);
                }
            } else {
                let (first, m) = (c.first + 1, c.dim - 1);
                let res: Vec<f64> = (0..m).map(|k| residual(force, first + k)).collect();
                let old: Vec<f64> = (0..m).map(|k| force[first + k]).collect();
                let ac = block(first, m);
                let bc: Vec<f64> = (0..m)
                    .map(|r| res[r] - (0..m).map(|k| ac[(r, k)] * old[k]).sum::<f64>())
                    .collect();
                let fnormal = force[c.first];
                if fnormal < MINVAL {
                    for k in 0..m {
                        force[first + k] = 0.0;
                    }
                } else {
                    let mu = &c.friction[..m];
                    let (mut v, active) = qcqp(&ac, &bc, mu, fnormal);
                    if active {
                        let s2: f64 = (0..m).map(|k| v[k] * v[k] / (mu[k] * mu[k])).sum();
                        let sc = (fnormal * fnormal / s2.max(MINVAL)).sqrt();
                        for x in &mut v {
                            *x *= sc;
                        }
                    }
                    for k in 0..m {
                        force[first + k] = v[k];
                    }
                }
                improvement -= cost_change(&ac, force, first, &old, &res);
            }
        }
        improvement *= s.scale;
        iter += 1;
        if improvement < s.tolerance {
            break;
        }
    }
    iter
}

/// The cost change of block `force[first..first + old.len()]` from `old` with residuals `res`
/// at `old`: `½ δᵀ A δ + δᵀ res`; a rise above 1e-10 restores `old` and counts 0.
fn cost_change(
    ac: &DMatrix<f64>,
    force: &mut DVector<f64>,
    first: usize,
    old: &[f64],
    res: &[f64],
) -> f64 {
    let m = old.len();
    let delta: Vec<f64> = (0..m).map(|k| force[first + k] - old[k]).collect();
    let quad: f64 = (0..m)
        .map(|r| delta[r] * (0..m).map(|k| ac[(r, k)] * delta[k]).sum::<f64>())
        .sum();
    let change = 0.5 * quad + (0..m).map(|k| delta[k] * res[k]).sum::<f64>();
    if change > 1e-10 {
        for k in 0..m {
            force[first + k] = old[k];
        }
        0.0
    } else {
        change
    }
}

/// `min ½ xᵀ A x + xᵀ b` s.t. `Σ (x_j/d_j)² ≤ r²` (module doc); returns `(x, on the boundary)`.
pub fn qcqp(a: &DMatrix<f64>, b: &[f64], d: &[f64], r: f64) -> (Vec<f64>, bool) {
    let m = b.len();
    let ascaled = DMatrix::from_fn(m, m, |i, j| a[(i, j)] * d[i] * d[j]);
    let bscaled = DVector::from_iterator(m, (0..m).map(|i| b[i] * d[i]));
    let mut la = 0.0;
    let mut y = DVector::zeros(m);
    for _ in 0..20 {
        let mut h = ascaled.clone();
        for i in 0..m {
            h[(i, i)] += la;
        }
        let Some(ch) = h
            .cholesky()
            .filter(|c| c.l().diagonal().iter().all(|&p| p * p >= 1e-10))
        else {
            return (vec![0.0; m], false);
        };
        y = -ch.solve(&bscaled);
        let val = y.dot(&y) - r * r;
        if val < 1e-10 {
            break;
        }
        let deriv = -2.0 * y.dot(&ch.solve(&y));
        let delta = -val / deriv;
        if delta < 1e-10 {
            break;
        }
        la += delta;
    }
    ((0..m).map(|i| y[i] * d[i]).collect(), la != 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qcqp_inside_is_the_unconstrained_minimum_and_outside_lands_on_the_ellipse() {
        let a = DMatrix::from_row_slice(2, 2, &[2.0, 0.5, 0.5, 1.0]);
        // Unconstrained minimum x = −A⁻¹ b = (0.1, 0.2) for b = −A (0.1, 0.2).
        let b = [-(2.0 * 0.1 + 0.5 * 0.2), -(0.5 * 0.1 + 0.2)];
        let (x, active) = qcqp(&a, &b, &[1.0, 1.0], 1.0);
        assert!(!active && (x[0] - 0.1).abs() < 1e-12 && (x[1] - 0.2).abs() < 1e-12);
        // The same minimum outside a small ellipse: on it, and the KKT condition holds:
        // A x + b = −λ D⁻² x with λ ≥ 0.
        let d = [0.05, 0.1];
        let (x, active) = qcqp(&a, &b, &d, 1.0);
        assert!(active);
        let s: f64 = (0..2).map(|k| (x[k] / d[k]).powi(2)).sum();
        assert!((s - 1.0).abs() < 1e-8, "{s}");
        let g = [
            a[(0, 0)] * x[0] + a[(0, 1)] * x[1] + b[0],
            a[(1, 0)] * x[0] + a[(1, 1)] * x[1] + b[1],
        ];
        let l0 = -g[0] * d[0] * d[0] / x[0];
        let l1 = -g[1] * d[1] * d[1] / x[1];
        assert!(l0 > 0.0 && ((l0 - l1) / l0).abs() < 1e-6, "{l0} {l1}");
    }
}
