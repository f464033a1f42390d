//! `linear_solver: pcr` on the batched engine: the cpu engine's matrix-free Newton system
//! ([`crate::ncp_fb::pcr`]; spec `ncp_fb_and_penalty.md` §1.5–1.6, the Ostrich paper's choice
//! for GPUs) per world with masks.
//!
//! With the friction rows lagged ([`Friction::Lagged`]) `∂r/∂v = D_v` and `∂r/∂p = D_p` are
//! diagonal, and dividing each row by `max(D_v, DV_FLOOR)` gives the symmetric system
//! `(J M⁻¹ Jᵀ + C) Δp = −D_v⁻¹ r`, `C = D_v⁻¹ D_p + reg`, applied as `J (M⁻¹Jᵀ v) + C v`
//! (two products with the stored `J` and `M⁻¹Jᵀ`, packed where the problem is,
//! [`Problem::packed`]; the Schur complement is not formed for the products). Preconditioned
//! conjugate residuals from 0 with the cpu engine's stopping rule and breakdown tests, each
//! decided per world: a world whose residual is small enough, or whose denominator is not
//! positive, stops updating while the others go on; the loop ends when no world runs or after
//! `pcr_iterations`.
//!
//! Preconditioners as the cpu engine's: Jacobi (`1/(diag A + 1e-12)`), or block-Jacobi over
//! the rows of contacts between the same two bodies (limits and servos alone), each block
//! `(J M⁻¹ Jᵀ + C + 1e-12 I)` restricted to its rows. The cpu engine inverts each block
//! (nalgebra, with an inverse-diagonal fallback where it is singular); here each application
//! solves with the block by the packed LU ([`super::dense::lu_solve_packed`]; the block is
//! symmetric positive definite, so elimination without pivoting is Cholesky's), falling back to
//! the inverse diagonal in a world where that solve is not finite. Inert rows (inactive slots)
//! have `D_v = 0`, so `C = 1e12` there and a zero right-hand side: they stay 0 and add nothing
//! to the inner products.

use burn_tensor::backend::Backend;
use burn_tensor::Tensor;

use super::dense::{finite, lu_solve, lu_solve_packed, pack};
use super::residual::{Block, Problem};
use crate::batched::scalar::{M, S};
use crate::ncp_fb::pcr::DV_FLOOR;
use crate::ncp_fb::residual::Friction;
use crate::ncp_fb::Preconditioner;

/// One group of rows of the preconditioner: its rows, its diagonal (k) and, for more than one
/// row, the block (k × k), packed `(worlds, k, k)` where the batch has a tensor to shape it.
struct Group<B: Backend> {
    rows: Vec<usize>,
    diag: Vec<S<B>>,
    block: Option<(Vec<Vec<S<B>>>, Option<Tensor<B, 3>>)>,
}

/// The symmetric Newton system at one iterate (the batched
/// [`crate::ncp_fb::pcr::SchurSystem`]).
pub struct SchurSystem<'a, B: Backend> {
    pb: &'a Problem<B>,
    /// Diagonal of C (nλ).
    c: Vec<S<B>>,
    /// Right-hand side −D_v⁻¹ r (nλ).
    pub rhs: Vec<S<B>>,
    /// ‖r‖² of the residual at the iterate (the line search's θ₀).
    pub theta0: S<B>,
    groups: Vec<Group<B>>,
}

impl<'a, B: Backend> SchurSystem<'a, B> {
    /// Build at `(u, p)` with the Newton-only regularization `reg` (nλ) and the Delassus
    /// matrix `delassus` (nλ × nλ, for the preconditioner's blocks); `like` a `(worlds)` tensor
    /// of the batch (`None`: the blocks are solved unrolled).
    pub fn new(
        pb: &'a Problem<B>,
        (u, p): (&[S<B>], &[S<B>]),
        reg: &[S<B>],
        delassus: &[Vec<S<B>>],
        preconditioner: Preconditioner,
        like: Option<&Tensor<B, 1>>,
    ) -> Self {
        let nl = pb.nl();
        let lin = pb.linearize(u, p, Friction::Lagged);
        let mut c = Vec::with_capacity(nl);
        let mut rhs = Vec::with_capacity(nl);
        for i in 0..nl {
            let dv = lin.r_vel[i][i].max_c(DV_FLOOR);
            c.push(&(&lin.r_p[i][i] / &dv) + &reg[i]);
            rhs.push(-&(&lin.r[i] / &dv));
        }
        // Row groups: (body pair of a contact group, rows).
        let mut groups: Vec<(Option<[usize; 2]>, Vec<usize>)> = Vec::new();
        for blk in &pb.blocks {
            let rows: Vec<usize> = (blk.row()..blk.row() + blk.rows()).collect();
            match (preconditioner, blk) {
                (Preconditioner::Jacobi, _) => {
                    groups.extend(rows.into_iter().map(|r| (None, vec![r])));
                }
                (Preconditioner::BlockJacobi, Block::Contact { bodies, .. }) => {
                    let pair = Some(*bodies);
                    match groups.iter_mut().find(|g| g.0 == pair) {
                        Some(g) => g.1.extend(rows),
                        None => groups.push((pair, rows)),
                    }
                }
                (Preconditioner::BlockJacobi, _) => groups.push((None, rows)),
            }
        }
        let groups = groups
            .into_iter()
            .map(|(_, rows)| {
                let entry = |x: usize, y: usize| -> S<B> {
                    let (i, j) = (rows[x], rows[y]);
                    if i == j {
                        &(&delassus[i][i] + &c[i]) + 1e-12
                    } else {
                        delassus[i][j].clone()
                    }
                };
                let k = rows.len();
                let diag: Vec<S<B>> = (0..k).map(|x| entry(x, x)).collect();
                let block = (k > 1).then(|| {
                    let a: Vec<Vec<S<B>>> = (0..k)
                        .map(|x| (0..k).map(|y| entry(x, y)).collect())
                        .collect();
                    let packed = like.map(|l| pack(&a, l));
                    (a, packed)
                });
                Group { rows, diag, block }
            })
            .collect();
        Self {
            pb,
            c,
            rhs,
            theta0: Problem::norm_squared(&lin.r),
            groups,
        }
    }

    /// `A v = J (M⁻¹Jᵀ v) + C v` (nλ).
    pub fn apply(&self, v: &[S<B>]) -> Vec<S<B>> {
        let jv = self.pb.row_velocities(&self.pb.minv_jt_times(v));
        jv.iter()
            .zip(&self.c)
            .zip(v)
            .map(|((a, c), x)| a + &(c * x))
            .collect()
    }

    /// `P v` with the preconditioner (nλ).
    pub fn precondition(&self, v: &[S<B>]) -> Vec<S<B>> {
        let mut out = vec![S::zero(); v.len()];
        for g in &self.groups {
            let local: Vec<S<B>> = g.rows.iter().map(|&r| v[r].clone()).collect();
            let jacobi: Vec<S<B>> = local.iter().zip(&g.diag).map(|(x, d)| x / d).collect();
            let z = match &g.block {
                None => jacobi,
                Some((a, packed)) => {
                    let (z, ok) = match packed {
                        Some(t) => lu_solve_packed(t.clone(), &local),
                        None => lu_solve(a, &local),
                    };
                    z.iter()
                        .zip(&jacobi)
                        .map(|(z, j)| ok.select(z, j))
                        .collect()
                }
            };
            for (&r, z) in g.rows.iter().zip(z) {
                out[r] = z;
            }
        }
        out
    }
}

/// `Σ a_i b_i` per world, in order ([`super::residual::dot`]).
fn dot<B: Backend>(a: &[S<B>], b: &[S<B>]) -> S<B> {
    super::residual::dot(a.iter().zip(b).map(|(x, y)| x * y))
}

/// `a + s b` where `m`, else `a`.
fn axpy_where<B: Backend>(m: &M<B>, a: &[S<B>], s: &S<B>, b: &[S<B>]) -> Vec<S<B>> {
    a.iter()
        .zip(b)
        .map(|(x, y)| m.select(&(x + &(y * s)), x))
        .collect()
}

/// Preconditioned conjugate residuals from x = 0 per world in the worlds `part` (the cpu
/// engine's [`crate::ncp_fb::pcr::pcr`]): a world stops when ‖r‖ ≤ max(atol, rtol ‖b‖), when
/// its denominator `Ap·PAp` is not positive or its ζ not finite, or when ζ = 0; at most
/// `iterations`. Returns x (nλ) and, per world, whether x is finite.
pub fn pcr<B: Backend>(
    sys: &SchurSystem<'_, B>,
    part: &M<B>,
    iterations: usize,
    rtol: f64,
    atol: f64,
) -> (Vec<S<B>>, M<B>) {
    let b = &sys.rhs;
    let n = b.len();
    let mut x: Vec<S<B>> = vec![S::zero(); n];
    let mut r = b.clone();
    let stop = (Problem::norm_squared(b).sqrt() * rtol).max_c(atol);
    let norm = |r: &[S<B>]| Problem::norm_squared(r).sqrt();
    let mut running = part.and(&norm(&r).gt(&stop));
    if n == 0 || !running.any_true() {
        return (x, M::C(true));
    }
    let mut z = sys.precondition(&r);
    let mut az = sys.apply(&z);
    let mut p = z.clone();
    let mut ap = az.clone();
    let mut zeta = dot(&z, &az);
    for _ in 0..iterations {
        if !running.any_true() {
            break;
        }
        let y = sys.precondition(&ap);
        let den = dot(&ap, &y);
        running = running.and(&den.gt(&S::C(0.0))).and(&finite(&zeta));
        let alpha = &zeta / &running.select(&den, &S::C(1.0));
        x = axpy_where(&running, &x, &alpha, &p);
        r = axpy_where(&running, &r, &-&alpha, &ap);
        running = running.and(&norm(&r).gt(&stop));
        z = axpy_where(&running, &z, &-&alpha, &y);
        az = sys.apply(&z);
        let zeta_new = dot(&z, &az);
        running = running.and(&zeta.abs().gt(&S::C(0.0)));
        let beta = &zeta_new / &running.select(&zeta, &S::C(1.0));
        zeta = running.select(&zeta_new, &zeta);
        p = p
            .iter()
            .zip(&z)
            .map(|(pi, zi)| running.select(&(zi + &(pi * &beta)), pi))
            .collect();
        ap = ap
            .iter()
            .zip(&az)
            .map(|(a, b)| running.select(&(b + &(a * &beta)), a))
            .collect();
    }
    let ok = x.iter().fold(M::C(true), |m, xi| m.and(&finite(xi)));
    (x, ok)
}
