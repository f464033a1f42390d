//! The matrix-free Newton system of the paper (spec `ncp_fb_and_penalty.md` §1.5–1.6): the
//! Schur complement applied without forming it, solved by preconditioned conjugate residuals.
//!
//! With W frozen within the iteration ([`Friction::Lagged`]) every block of the constraint
//! Jacobian is diagonal: `∂r/∂v = D_v` (the FB partial s_n on normal and limit rows, the row
//! scale σ on friction rows, 1 on servo and equality rows) and `∂r/∂p = D_p` (d_n w_n, σ W,
//! α, E/h²). Dividing each row by its `D_v` (guarded below by [`DV_FLOOR`]: a separating
//! contact has s_n → 0 and its row then decouples) gives the symmetric system
//!
//! `(J M⁻¹ Jᵀ + C) Δp = −D_v⁻¹ r`,  `C = D_v⁻¹ D_p + reg_i·(J M⁻¹ Jᵀ)_ii`,
//!
//! spec eq. (12) in impulses, whose operator is applied as `J (M⁻¹Jᵀ v) + C v` (two
//! matrix–vector products with the stored `J` and `M⁻¹Jᵀ`; the Schur complement is never
//! formed). Preconditioners: Jacobi `1/(diag(A) + 1e-12)`, or block-Jacobi over the rows that
//! share a body pair (all contacts between the same two bodies; limits, servos and equalities
//! alone), each dense block inverted.

use nalgebra::{DMatrix, DVector};

use super::residual::{Block, Friction, Problem};

/// Smallest `D_v` a row is divided by.
pub const DV_FLOOR: f64 = 1e-12;

/// Preconditioner of the PCR solve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Preconditioner {
    /// Inverse diagonal.
    Jacobi,
    /// Inverse of the diagonal blocks of rows sharing a body pair.
    BlockJacobi,
}

/// The symmetric Newton system at one iterate.
pub struct SchurSystem<'a> {
    pb: &'a Problem,
    /// Diagonal of C (nλ).
    c: DVector<f64>,
    /// Right-hand side −D_v⁻¹ r (nλ).
    pub rhs: DVector<f64>,
    /// Preconditioner blocks: (rows, inverse block).
    blocks: Vec<(Vec<usize>, DMatrix<f64>)>,
}

impl<'a> SchurSystem<'a> {
    /// Build at `(u, p)` with the Newton-only regularization `reg` added to the diagonal
    /// ([`Problem::regularization`]).
    /// `pair_of_block[b]` is the body pair of block b when it is a contact (for block-Jacobi).
    pub fn new(
        pb: &'a Problem,
        u: &DVector<f64>,
        p: &DVector<f64>,
        reg: &DVector<f64>,
        preconditioner: Preconditioner,
        pair_of_block: &[Option<[usize; 2]>],
    ) -> Self {
        let nl = pb.nl();
        let lin = pb.linearize(u, p, Friction::Lagged);
        let mut c = DVector::zeros(nl);
        let mut rhs = DVector::zeros(nl);
        for i in 0..nl {
            let dv = lin.r_vel[(i, i)].max(DV_FLOOR);
            c[i] = lin.r_p[(i, i)] / dv + reg[i];
            rhs[i] = -lin.r[i] / dv;
        }
        // Row groups of the preconditioner.
        let mut groups: Vec<(Option<[usize; 2]>, Vec<usize>)> = Vec::new();
        for (b, blk) in pb.blocks.iter().enumerate() {
            let rows: Vec<usize> = (blk.row()..blk.row() + blk.rows()).collect();
            match (preconditioner, pair_of_block.get(b).copied().flatten()) {
                (Preconditioner::Jacobi, _) => {
                    groups.extend(rows.into_iter().map(|r| (None, vec![r])))
                }
                (Preconditioner::BlockJacobi, Some(pair)) => {
                    if let Some(g) = groups.iter_mut().find(|g| g.0 == Some(pair)) {
                        g.1.extend(rows);
                    } else {
                        groups.push((Some(pair), rows));
                    }
                }
                (Preconditioner::BlockJacobi, None) => {
                    debug_assert!(!matches!(blk, Block::Contact { .. }));
                    groups.push((None, rows));
                }
            }
        }
        let blocks = groups
            .into_iter()
            .map(|(_, rows)| {
                let k = rows.len();
                let mut a = DMatrix::zeros(k, k);
                for (x, &i) in rows.iter().enumerate() {
                    for (y, &j) in rows.iter().enumerate() {
                        a[(x, y)] = pb.j.row(i).dot(&pb.minv_jt.column(j).transpose());
                    }
                    a[(x, x)] += c[i] + 1e-12;
                }
                let inv = a
                    .clone()
                    .try_inverse()
                    .unwrap_or_else(|| DMatrix::from_diagonal(&a.diagonal().map(|d| 1.0 / d)));
                (rows, inv)
            })
            .collect();
        Self { pb, c, rhs, blocks }
    }

    /// `A v = J (M⁻¹Jᵀ v) + C v`.
    pub fn apply(&self, v: &DVector<f64>) -> DVector<f64> {
        &self.pb.j * (&self.pb.minv_jt * v) + self.c.component_mul(v)
    }

    /// `P v` with the preconditioner.
    pub fn precondition(&self, v: &DVector<f64>) -> DVector<f64> {
        let mut out = DVector::zeros(v.len());
        for (rows, inv) in &self.blocks {
            let local = DVector::from_iterator(rows.len(), rows.iter().map(|&r| v[r]));
            let z = inv * local;
            for (k, &r) in rows.iter().enumerate() {
                out[r] = z[k];
            }
        }
        out
    }
}

/// Preconditioned conjugate residuals from x = 0 (spec §1.6): stops when
/// ‖r‖ ≤ max(atol, rtol ‖b‖) or after `iterations`; a non-positive denominator ends the loop
/// (step of 0). Returns the solution and the iterations run.
pub fn pcr(
    sys: &SchurSystem<'_>,
    b: &DVector<f64>,
    iterations: usize,
    rtol: f64,
    atol: f64,
) -> (DVector<f64>, usize) {
    let n = b.len();
    let mut x = DVector::zeros(n);
    let mut r = b.clone();
    let stop = atol.max(rtol * b.norm());
    if r.norm() <= stop {
        return (x, 0);
    }
    let mut z = sys.precondition(&r);
    let mut az = sys.apply(&z);
    let mut p = z.clone();
    let mut ap = az.clone();
    let mut zeta = z.dot(&az);
    let mut k = 0;
    while k < iterations {
        k += 1;
        let y = sys.precondition(&ap);
        let den = ap.dot(&y);
        if !(den > 0.0 && zeta.is_finite()) {
            break;
        }
        let alpha = zeta / den;
        x += &p * alpha;
        r -= &ap * alpha;
        if r.norm() <= stop {
            break;
        }
        z -= &y * alpha;
        az = sys.apply(&z);
        let zeta_new = z.dot(&az);
        if !(zeta.abs() > 0.0) {
            break;
        }
        let beta = zeta_new / zeta;
        zeta = zeta_new;
        p = &z + &p * beta;
        ap = &az + &ap * beta;
    }
    (x, k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ncp_fb::residual::Block;

    /// A point mass (3 dofs) with two contacts sharing one body pair and a servo row.
    fn problem() -> (Problem, Vec<Option<[usize; 2]>>) {
        let j = DMatrix::from_row_slice(
            7,
            3,
            &[
                0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.2, 1.0, 1.0, 0.0, 0.1, 0.0,
                1.0, 0.0, 0.3, 0.0, 0.0,
            ],
        );
        let minv = DMatrix::from_diagonal(&DVector::from_vec(vec![0.5, 0.25, 0.5]));
        let minv_jt = &minv * j.transpose();
        let w = |i: usize| j.row(i).dot(&minv_jt.column(i).transpose());
        let blocks = vec![
            Block::Contact {
                row: 0,
                friction: true,
                mu: 0.5,
                gap: -1e-4,
                wn: w(0),
                wt: 0.5 * (w(1) + w(2)),
            },
            Block::Contact {
                row: 3,
                friction: true,
                mu: 0.5,
                gap: 2e-4,
                wn: w(3),
                wt: 0.5 * (w(4) + w(5)),
            },
            Block::Servo {
                row: 6,
                alpha: 0.3,
                bias: -0.1,
            },
        ];
        let pb = Problem {
            h: 0.01,
            j,
            minv_jt,
            u_free: DVector::from_vec(vec![0.3, -0.1, -0.5]),
            blocks,
            eps_fb: 1e-8,
            eps_v: 1e-6,
            rho_n: 0.0,
            rho_f: 0.0,
            friction_residual: Default::default(),
            center: DVector::zeros(0),
        };
        (pb, vec![Some([0, 1]), Some([0, 1]), None])
    }

    #[test]
    fn pcr_solves_the_symmetric_schur_system() {
        let (pb, pairs) = problem();
        let p = DVector::from_vec(vec![0.2, 0.03, -0.02, 0.1, 0.01, 0.0, 0.05]);
        let u = pb.velocity(&p);
        for pre in [Preconditioner::Jacobi, Preconditioner::BlockJacobi] {
            let reg = pb.regularization(1e-8, 1e-6);
            let sys = SchurSystem::new(&pb, &u, &p, &reg, pre, &pairs);
            // Dense reference: (J M⁻¹ Jᵀ + C) x = rhs.
            let mut a = &pb.j * &pb.minv_jt;
            for i in 0..pb.nl() {
                a[(i, i)] += sys.c[i];
            }
            // The operator is symmetric.
            assert!((&a - a.transpose()).amax() < 1e-14);
            let exact = a.clone().lu().solve(&sys.rhs).unwrap();
            let (x, it) = pcr(&sys, &sys.rhs, 50, 1e-14, 0.0);
            let err = (&x - &exact).norm() / exact.norm();
            assert!(err < 1e-8, "{pre:?}: error {err} after {it} iterations");
            assert!(
                it <= pb.nl() + 2,
                "{pre:?}: {it} iterations for {} rows",
                pb.nl()
            );
            // apply() equals the dense operator.
            let v = DVector::from_fn(pb.nl(), |i, _| (i as f64 * 0.7).sin());
            assert!((sys.apply(&v) - &a * &v).amax() < 1e-14);
        }
    }
}
