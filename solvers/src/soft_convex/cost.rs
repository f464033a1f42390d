//! The constraint part of MuJoCo's primal cost, row by row (spec §A4; MuJoCo documentation
//! "Computation > Reduced primal problem"; `engine_core_constraint.c: mj_constraintUpdate_impl`).
//!
//! With `jar = J a − aref` (nefc), every row or elliptic cone contributes a convex cost
//! `s(jar)` whose negative gradient is the row force `f = −∂s/∂jar`. The total cost is
//! `½ (a − a0)ᵀ M (a − a0) + Σ s`.

use nalgebra::{DMatrix, DVector};

/// What kind of cost a row (or a block of rows) carries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RowCost {
    /// Always quadratic: `½ D jar²` (equality constraints).
    Equality,
    /// Huber cost with threshold `R·η`, `η` the friction loss (N or N m).
    FrictionLoss {
        /// Friction loss η (N or N m).
        eta: f64,
    },
    /// One-sided: `½ D jar²` if `jar < 0`, else 0 (limits, frictionless contacts, pyramid edges).
    Inequality,
    /// First row of an elliptic cone of `dim` rows: `mu` = regularized μ (μ0/√impratio),
    /// `mu_j` the friction of each friction row (index 0 unused).
    Elliptic {
        /// Rows in the cone (condim).
        dim: usize,
        /// Regularized friction μ0/√impratio.
        mu: f64,
        /// Friction of friction row j (index 0 unused).
        mu_j: [f64; 6],
    },
    /// First row of a friction disc of `dim` rows (Genesis' signorini friction, spec §B): the
    /// Huber function of the disc of radius `radius` = μ_b·f_n (N), with D of this row.
    Disc {
        /// Rows in the block (2 sliding, 1 torsional, 2 rolling).
        dim: usize,
        /// Disc radius ρ (N); ρ ≤ 0 means no friction force.
        radius: f64,
    },
    /// A row handled by the first row of its block (elliptic cone or disc).
    BlockMember,
}

/// The state of a row at the current jar (MuJoCo's `efc_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowState {
    /// No force.
    Satisfied,
    /// Quadratic: contributes `D` to the Hessian.
    Quadratic,
    /// Friction loss at `−η` (jar ≤ −Rη): force +η.
    LinearNeg,
    /// Friction loss at `+η` (jar ≥ Rη): force −η.
    LinearPos,
    /// Elliptic cone middle zone (cone Hessian).
    Cone,
}

/// Result of evaluating the constraint cost at one jar.
#[derive(Debug, Clone)]
pub struct CostEval {
    /// Row forces f = −∂s/∂jar (nefc).
    pub force: DVector<f64>,
    /// Row states (nefc).
    pub state: Vec<RowState>,
    /// Σ s (constraint part of the cost).
    pub cost: f64,
    /// Middle-zone cone Hessians (dim × dim) by first row, for Newton.
    pub cone_hessians: Vec<(usize, DMatrix<f64>)>,
}

/// Evaluate the constraint cost, forces and states at `jar` given row kinds, `D` and `R`.
pub fn evaluate(
    kinds: &[RowCost],
    d: &DVector<f64>,
    r: &DVector<f64>,
    jar: &DVector<f64>,
    want_hessian: bool,
) -> CostEval {
    let n = kinds.len();
    let mut force = DVector::zeros(n);
    let mut state = vec![RowState::Satisfied; n];
    let mut cost = 0.0;
    let mut cone_hessians = Vec::new();
    let mut i = 0;
    while i < n {
        match kinds[i] {
            RowCost::Equality => {
                force[i] = -d[i] * jar[i];
                cost += 0.5 * d[i] * jar[i] * jar[i];
                state[i] = RowState::Quadratic;
            }
            RowCost::FrictionLoss { eta } => {
                let t = r[i] * eta;
                if jar[i] <= -t {
                    force[i] = eta;
                    cost += -eta * jar[i] - 0.5 * r[i] * eta * eta;
                    state[i] = RowState::LinearNeg;
                } else if jar[i] >= t {
                    force[i] = -eta;
                    cost += eta * jar[i] - 0.5 * r[i] * eta * eta;
                    state[i] = RowState::LinearPos;
                } else {
                    force[i] = -d[i] * jar[i];
                    cost += 0.5 * d[i] * jar[i] * jar[i];
                    state[i] = RowState::Quadratic;
                }
            }
            RowCost::Inequality => {
                if jar[i] < 0.0 {
                    force[i] = -d[i] * jar[i];
                    cost += 0.5 * d[i] * jar[i] * jar[i];
                    state[i] = RowState::Quadratic;
                }
            }
            RowCost::Elliptic { dim, mu, mu_j } => {
                let nn = mu * jar[i];
                let mut u = [0.0; 6];
                let mut t2 = 0.0;
                for j in 1..dim {
                    u[j] = mu_j[j] * jar[i + j];
                    t2 += u[j] * u[j];
                }
                let t = t2.sqrt();
                if (t > 0.0 && nn >= mu * t) || (t == 0.0 && nn >= 0.0) {
                    // Top zone: no force.
                } else if (t > 0.0 && mu * nn + t <= 0.0) || (t == 0.0 && nn < 0.0) {
                    // Bottom zone: every row quadratic.
                    for j in 0..dim {
                        force[i + j] = -d[i + j] * jar[i + j];
                        cost += 0.5 * d[i + j] * jar[i + j] * jar[i + j];
                        state[i + j] = RowState::Quadratic;
                    }
                } else {
                    // Middle zone.
                    let dm = d[i] / (mu * mu * (1.0 + mu * mu));
                    let nmt = nn - mu * t;
                    cost += 0.5 * dm * nmt * nmt;
                    let f0 = -dm * nmt * mu;
                    force[i] = f0;
                    state[i] = RowState::Cone;
                    for j in 1..dim {
                        force[i + j] = -f0 * u[j] * mu_j[j] / t;
                        state[i + j] = RowState::Cone;
                    }
                    if want_hessian {
                        cone_hessians.push((i, cone_hessian(dim, mu, &mu_j, nn, &u, t, dm)));
                    }
                }
                i += dim;
                continue;
            }
            RowCost::Disc { dim, radius } => {
                let t = (0..dim)
                    .map(|j| jar[i + j] * jar[i + j])
                    .sum::<f64>()
                    .sqrt();
                let dd = d[i];
                if radius > 0.0 {
                    if dd * t <= radius {
                        // Stick: quadratic, Hessian D·I.
                        for j in 0..dim {
                            force[i + j] = -dd * jar[i + j];
                            state[i + j] = RowState::Quadratic;
                        }
                        cost += 0.5 * dd * t * t;
                    } else {
                        // Slip: s = ρ (T − ρ/(2D)), f = −(ρ/T) jar, H = (ρ/T)(I − jar jarᵀ/T²).
                        cost += radius * (t - radius / (2.0 * dd));
                        for j in 0..dim {
                            force[i + j] = -radius / t * jar[i + j];
                            state[i + j] = RowState::Cone;
                        }
                        if want_hessian {
                            let h = DMatrix::from_fn(dim, dim, |j, k| {
                                let delta = if j == k { 1.0 } else { 0.0 };
                                radius / t * (delta - jar[i + j] * jar[i + k] / (t * t))
                            });
                            cone_hessians.push((i, h));
                        }
                    }
                }
                i += dim;
                continue;
            }
            RowCost::BlockMember => {}
        }
        i += 1;
    }
    CostEval {
        force,
        state,
        cost,
        cone_hessians,
    }
}

/// Middle-zone cone Hessian `H_c = Dm·G·A·G` (§A4), G = diag(μ, μ_1 .. μ_{dim−1}),
/// `A = [[1, −μUᵀ/T], [−μU/T, (μN/T³)UUᵀ + (μ² − μN/T) I]]`.
fn cone_hessian(
    dim: usize,
    mu: f64,
    mu_j: &[f64; 6],
    nn: f64,
    u: &[f64; 6],
    t: f64,
    dm: f64,
) -> DMatrix<f64> {
    let mut a = DMatrix::zeros(dim, dim);
    a[(0, 0)] = 1.0;
    for j in 1..dim {
        a[(0, j)] = -mu * u[j] / t;
        a[(j, 0)] = a[(0, j)];
        for k in 1..dim {
            a[(j, k)] = mu * nn / (t * t * t) * u[j] * u[k];
        }
        a[(j, j)] += mu * mu - mu * nn / t;
    }
    let g = |j: usize| if j == 0 { mu } else { mu_j[j] };
    DMatrix::from_fn(dim, dim, |j, k| dm * g(j) * a[(j, k)] * g(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finite_difference_check(
        kinds: &[RowCost],
        d: &DVector<f64>,
        r: &DVector<f64>,
        jar: &DVector<f64>,
    ) {
        let e = evaluate(kinds, d, r, jar, true);
        let h = 1e-7;
        for k in 0..jar.len() {
            let mut jp = jar.clone();
            jp[k] += h;
            let mut jm = jar.clone();
            jm[k] -= h;
            let fd = (evaluate(kinds, d, r, &jp, false).cost
                - evaluate(kinds, d, r, &jm, false).cost)
                / (2.0 * h);
            assert!(
                (fd + e.force[k]).abs() < 1e-6 * (1.0 + fd.abs()),
                "row {k}: fd {fd} vs -force {}",
                -e.force[k]
            );
        }
    }

    #[test]
    fn forces_are_minus_the_cost_gradient_in_every_zone() {
        let d = DVector::from_vec(vec![2.0, 3.0, 1.5, 4.0, 5.0, 6.0, 7.0]);
        let r = d.map(|x| 1.0 / x);
        let kinds = [
            RowCost::Equality,
            RowCost::FrictionLoss { eta: 0.2 },
            RowCost::Inequality,
            RowCost::Inequality,
            RowCost::Elliptic {
                dim: 3,
                mu: 0.7,
                mu_j: [0.0, 0.5, 0.6, 0.0, 0.0, 0.0],
            },
            RowCost::BlockMember,
            RowCost::BlockMember,
        ];
        for jar in [
            vec![0.3, 0.01, -0.2, 0.4, -0.1, 0.3, -0.2], // middle zone
            vec![0.3, -0.9, -0.2, 0.4, -2.0, 0.1, 0.1],  // bottom zone, linear friction loss
            vec![0.3, 0.9, -0.2, 0.4, 3.0, 0.1, 0.1],    // top zone
        ] {
            finite_difference_check(&kinds, &d, &r, &DVector::from_vec(jar));
        }
    }

    #[test]
    fn cone_hessian_matches_finite_differences_of_forces() {
        let d = DVector::from_vec(vec![4.0, 5.0, 6.0, 7.0]);
        let r = d.map(|x| 1.0 / x);
        let kinds = [
            RowCost::Elliptic {
                dim: 4,
                mu: 0.8,
                mu_j: [0.0, 0.5, 0.6, 0.02, 0.0, 0.0],
            },
            RowCost::BlockMember,
            RowCost::BlockMember,
            RowCost::BlockMember,
        ];
        let jar = DVector::from_vec(vec![-0.1, 0.3, -0.2, 0.5]);
        let e = evaluate(&kinds, &d, &r, &jar, true);
        assert_eq!(e.state[0], RowState::Cone);
        let hc = &e.cone_hessians[0].1;
        let h = 1e-7;
        for k in 0..4 {
            let mut jp = jar.clone();
            jp[k] += h;
            let mut jm = jar.clone();
            jm[k] -= h;
            let dfp = evaluate(&kinds, &d, &r, &jp, false).force;
            let dfm = evaluate(&kinds, &d, &r, &jm, false).force;
            for j in 0..4 {
                let fd = -(dfp[j] - dfm[j]) / (2.0 * h);
                assert!(
                    (fd - hc[(j, k)]).abs() < 1e-5,
                    "H[{j},{k}] = {} vs fd {fd}",
                    hc[(j, k)]
                );
            }
        }
    }
}
