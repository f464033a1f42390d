//! The batched `ncp_fb` residual and its derivatives: the cpu engine's
//! [`crate::ncp_fb::residual::Problem`] per world over row slots (module doc of [`super`]), in
//! its order of operations, with the natural map of the friction disk.
//!
//! Units as the cpu engine's: every residual row is a velocity (m/s or rad/s), impulses `p` are
//! N s (N m s for rotational rows), `u` is qvel (nv). Rows (module doc of [`crate::ncp_fb`]):
//!
//! * (R2) contact normal: `r_n = φ_ε(gap + h (v_n + ρ_n w_n p_n), h w_n p_n) / h`;
//! * (R3) friction, natural map (Alart & Curnier 1991, eq. (20)): `y = t + ρ_f w_t p_f`,
//!   `z = p_f − y/w_t`, R = μ max(p_n, 0): `r_f = w_t p_f` where R ≤ 0, `r_f = y` where
//!   ‖z‖ ≤ R (sticking), `r_f = w_t (p_f − R ẑ)` otherwise (sliding);
//! * (R4) joint limit: `φ_ε(dist + h v, h w p) / h`;
//! * (R5) servo: `v + α p + bias`;
//! * an inactive contact slot: `r = p` on each of its rows (inert, module doc of [`super`]).
//!
//! Each branch is computed in every world and chosen per world with masks (no arithmetic on the
//! unselected branch reaches the result); denominators of unselected branches are kept finite.

use burn_tensor::backend::Backend;

use crate::batched::scalar::{M, S};
use crate::ncp_fb::residual::Friction;

/// A group of rows per world (the batched [`crate::ncp_fb::residual::Block`]).
#[derive(Debug, Clone)]
pub enum Block<B: Backend> {
    /// A contact slot: normal row `row`, and if `friction`, tangent rows `row + 1`, `row + 2`.
    Contact {
        /// Index of the normal row.
        row: usize,
        /// Whether the slot has the two sliding-friction rows (condim ≥ 3).
        friction: bool,
        /// Sliding friction coefficient μ (-).
        mu: S<B>,
        /// Gap at q⁻ minus the contact margin (m), negative in penetration.
        gap: S<B>,
        /// Normal inverse weight w_n = J_n M⁻¹ J_nᵀ (m/s per N s).
        wn: S<B>,
        /// Tangential inverse weight w_t = ½(w_t1 + w_t2) (m/s per N s).
        wt: S<B>,
        /// In which worlds the slot is a contact (elsewhere its rows are inert).
        active: M<B>,
        /// The contact's two bodies (the block-Jacobi preconditioner of `linear_solver: pcr`
        /// groups the rows of contacts between the same bodies).
        bodies: [usize; 2],
    },
    /// A joint-limit row (complementarity, like a contact normal).
    Limit {
        /// Row index.
        row: usize,
        /// Distance to the limit at q⁻ (m or rad), positive inside the range.
        dist: S<B>,
        /// Inverse weight J M⁻¹ Jᵀ of the row.
        w: S<B>,
    },
    /// An implicit servo row: `r = J u + alpha p + bias`.
    Servo {
        /// Row index.
        row: usize,
        /// Compliance in impulses (m/s per N s, or rad/s per N m s).
        alpha: S<B>,
        /// Constant term (m/s or rad/s).
        bias: S<B>,
    },
}

impl<B: Backend> Block<B> {
    /// The first row.
    pub fn row(&self) -> usize {
        match self {
            Block::Contact { row, .. } | Block::Limit { row, .. } | Block::Servo { row, .. } => {
                *row
            }
        }
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        match self {
            Block::Contact { friction: true, .. } => 3,
            _ => 1,
        }
    }
}

/// One step's problem per world (the batched [`crate::ncp_fb::residual::Problem`], without
/// equality rows and the proximal centre, which the cpu solver does not use).
#[derive(Debug, Clone)]
pub struct Problem<B: Backend> {
    /// Timestep h (s).
    pub h: f64,
    /// Constraint Jacobian, nλ × nv (rows of inactive slots zero).
    pub j: Vec<Vec<S<B>>>,
    /// M⁻¹ Jᵀ, nv × nλ.
    pub minv_jt: Vec<Vec<S<B>>>,
    /// Unconstrained velocity u⁻ + h M⁻¹ f_smooth (nv).
    pub u_free: Vec<S<B>>,
    /// Row groups in row order.
    pub blocks: Vec<Block<B>>,
    /// FB smoothing ε (m).
    pub eps_fb: f64,
    /// Relative normal compliance ρ_n (-) of the continuation, per world (0: rigid).
    pub rho_n: S<B>,
    /// Relative friction compliance ρ_f (-), per world.
    pub rho_f: S<B>,
    /// `j` and `minv_jt` packed ([`Self::packed`]), for the solver's products `J u` and
    /// `M⁻¹Jᵀ p` as batched matrix products; `None`: unrolled, scalar by scalar.
    pub packed: Option<PackedJacobian<B>>,
}

/// The constraint Jacobian and `M⁻¹Jᵀ` as `(worlds, nλ, nv)` and `(worlds, nv, nλ)` tensors,
/// with a `(worlds)` tensor of the batch's shape ([`super::dense`], "Packed").
#[derive(Debug, Clone)]
pub struct PackedJacobian<B: Backend> {
    j: burn_tensor::Tensor<B, 3>,
    minv_jt: burn_tensor::Tensor<B, 3>,
    like: burn_tensor::Tensor<B, 1>,
}

/// The residual and its generalized Jacobian at one `(u, p)`, dense per world with structural
/// zeros as constants (they cost no tensor operation).
#[derive(Debug, Clone)]
pub struct Linearization<B: Backend> {
    /// Constraint residual, nλ (m/s).
    pub r: Vec<S<B>>,
    /// `∂r/∂v`, v = J u the row velocities, nλ × nλ (block diagonal).
    pub r_vel: Vec<Vec<S<B>>>,
    /// `∂r/∂p`, nλ × nλ.
    pub r_p: Vec<Vec<S<B>>>,
}

/// Smoothed Fischer–Burmeister function φ_ε(a, b) = a + b − √(a² + b² + ε²) (spec §1.1) and
/// its partials `(φ, ∂φ/∂a, ∂φ/∂b)`, as [`crate::ncp_fb::residual::fb`]; at the origin with
/// ε = 0 the generalized-Jacobian element (0, 1).
pub fn fb<B: Backend>(a: &S<B>, b: &S<B>, eps: f64) -> (S<B>, S<B>, S<B>) {
    let rho = (&(a * a) + &(b * b) + eps * eps).sqrt();
    let phi = &(a + b) - &rho;
    if eps > 0.0 {
        // ρ ≥ ε > 0.
        let da = S::C(1.0) - &(a / &rho);
        let db = S::C(1.0) - &(b / &rho);
        return (phi, da, db);
    }
    let tiny = rho.lt(&S::C(1e-300));
    let safe = tiny.select(&S::C(1.0), &rho);
    (
        tiny.select(&S::C(0.0), &phi),
        tiny.select(&S::C(0.0), &(S::C(1.0) - &(a / &safe))),
        tiny.select(&S::C(1.0), &(S::C(1.0) - &(b / &safe))),
    )
}

/// `Σ_k a_k b_k`, summed from k = 0 in order (nalgebra's gemv and gemm on these sizes).
pub(super) fn dot<B: Backend>(a: impl Iterator<Item = S<B>>) -> S<B> {
    a.fold(S::zero(), |acc, x| acc + x)
}

/// Per-world max(x, y): y where x < y, else x (`f64::max` for finite inputs, which these are).
pub fn max<B: Backend>(x: &S<B>, y: &S<B>) -> S<B> {
    x.lt(y).select(y, x)
}

fn zeros<B: Backend>(n: usize) -> Vec<Vec<S<B>>> {
    vec![vec![S::zero(); n]; n]
}

impl<B: Backend> Problem<B> {
    /// Number of rows nλ.
    pub fn nl(&self) -> usize {
        self.j.len()
    }

    /// Number of dofs nv.
    pub fn nv(&self) -> usize {
        self.u_free.len()
    }

    /// This problem with `j` and `minv_jt` packed (where any entry is a per-world tensor), so
    /// that [`Self::velocity`] and [`Self::row_velocities`] are one batched matrix product each
    /// instead of nλ·nv scalar operations. The same products to round-off (the matrix product
    /// sums in its own order).
    pub fn packed(mut self) -> Self {
        use super::dense::{like, pack};
        if self.nl() == 0 {
            return self;
        }
        if let Some(l) = like(self.j.iter().flatten().chain(self.minv_jt.iter().flatten())) {
            self.packed = Some(PackedJacobian {
                j: pack(&self.j, &l),
                minv_jt: pack(&self.minv_jt, &l),
                like: l,
            });
        }
        self
    }

    /// `m x` per world with `m` packed `(worlds, r, c)` and `x` c scalars: r scalars. A
    /// broadcast product and a sum over c (burn-ndarray's matrix product hands these small
    /// products to its thread pool, whose wake-ups cost more than the arithmetic).
    fn packed_product(
        m: &burn_tensor::Tensor<B, 3>,
        x: &[S<B>],
        like: &burn_tensor::Tensor<B, 1>,
    ) -> Vec<S<B>> {
        let [w, r, c] = m.dims();
        let x: burn_tensor::Tensor<B, 2> =
            burn_tensor::Tensor::stack(x.iter().map(|s| s.tensor_like(like)).collect(), 1);
        let y = (m.clone() * x.reshape([w, 1, c]))
            .sum_dim(2)
            .reshape([w, r]);
        y.chunk(r, 1)
            .into_iter()
            .map(|t| S::T(t.reshape([w])))
            .collect()
    }

    /// `M⁻¹ Jᵀ p` (nv).
    pub fn minv_jt_times(&self, p: &[S<B>]) -> Vec<S<B>> {
        if let Some(pk) = &self.packed {
            return Self::packed_product(&pk.minv_jt, p, &pk.like);
        }
        self.minv_jt
            .iter()
            .map(|row| dot(row.iter().zip(p).map(|(m, x)| m * x)))
            .collect()
    }

    /// Velocity after the step, `u = u_free + M⁻¹ Jᵀ p` (R1 eliminated), nv.
    pub fn velocity(&self, p: &[S<B>]) -> Vec<S<B>> {
        self.u_free
            .iter()
            .zip(self.minv_jt_times(p))
            .map(|(uf, x)| uf + &x)
            .collect()
    }

    /// Row velocities `v = J u`, nλ.
    pub fn row_velocities(&self, u: &[S<B>]) -> Vec<S<B>> {
        if let Some(pk) = &self.packed {
            return Self::packed_product(&pk.j, u, &pk.like);
        }
        self.j
            .iter()
            .map(|row| dot(row.iter().zip(u).map(|(a, x)| a * x)))
            .collect()
    }

    /// The Delassus matrix `J M⁻¹ Jᵀ` (nλ × nλ; m/s per N s), fixed within a step.
    pub fn delassus(&self) -> Vec<Vec<S<B>>> {
        let (nl, nv) = (self.nl(), self.nv());
        (0..nl)
            .map(|i| {
                (0..nl)
                    .map(|k| dot((0..nv).map(|d| &self.j[i][d] * &self.minv_jt[d][k])))
                    .collect()
            })
            .collect()
    }

    /// The Newton-only regularization of the Newton matrix's diagonal (spec §1.5):
    /// `reg·(J M⁻¹ Jᵀ)_ii`, `reg = friction` on friction rows and `normal` elsewhere (nλ);
    /// 0 on inactive slots (their Jacobian rows are zero).
    pub fn regularization(&self, normal: f64, friction: f64, delassus: &[Vec<S<B>>]) -> Vec<S<B>> {
        let mut base = vec![normal; self.nl()];
        for b in &self.blocks {
            if let Block::Contact {
                row,
                friction: true,
                ..
            } = b
            {
                base[row + 1] = friction;
                base[row + 2] = friction;
            }
        }
        base.iter()
            .enumerate()
            .map(|(i, c)| &delassus[i][i] * *c)
            .collect()
    }

    /// The constraint residual (nλ, m/s).
    pub fn residual(&self, u: &[S<B>], p: &[S<B>]) -> Vec<S<B>> {
        self.evaluate(u, p, None).r
    }

    /// The residual with its generalized Jacobian, exact or with the friction rows lagged
    /// ([`Friction`]; the cpu engine's [`crate::ncp_fb::residual::Problem::linearize`] without
    /// the data partials).
    pub fn linearize(&self, u: &[S<B>], p: &[S<B>], mode: Friction) -> Linearization<B> {
        self.evaluate(u, p, Some(mode))
    }

    fn evaluate(&self, u: &[S<B>], p: &[S<B>], mode: Option<Friction>) -> Linearization<B> {
        let (nl, h) = (self.nl(), self.h);
        let dim = if mode.is_some() { nl } else { 0 };
        let mut lin = Linearization {
            r: vec![S::zero(); nl],
            r_vel: zeros(dim),
            r_p: zeros(dim),
        };
        let jac = mode.is_some();
        let vel = self.row_velocities(u);
        // A complementarity row: r = φ_ε(gap + h (v + ρ w p), h w p) / h, written into `lin`
        // at `row - base` (a contact's rows go to a small block of their own first).
        let comp = |row: usize,
                    base: usize,
                    gap: &S<B>,
                    w: &S<B>,
                    rho: &S<B>,
                    lin: &mut Linearization<B>| {
            let a = gap + &(&(&vel[row] + &(&(rho * w) * &p[row])) * h);
            let b = &(w * h) * &p[row];
            let (phi, da, db) = fb(&a, &b, self.eps_fb);
            let at = row - base;
            lin.r[at] = phi / h;
            if jac {
                lin.r_p[at][at] = &(&db + &(rho * &da)) * w;
                lin.r_vel[at][at] = da;
            }
        };
        for b in &self.blocks {
            match b {
                Block::Limit { row, dist, w } => comp(*row, 0, dist, w, &S::C(0.0), &mut lin),
                Block::Servo { row, alpha, bias } => {
                    let row = *row;
                    lin.r[row] = &(&vel[row] + &(alpha * &p[row])) + bias;
                    if jac {
                        lin.r_vel[row][row] = S::C(1.0);
                        lin.r_p[row][row] = alpha.clone();
                    }
                }
                Block::Contact {
                    row,
                    friction,
                    mu,
                    gap,
                    wn,
                    wt,
                    active,
                    ..
                } => {
                    let row = *row;
                    let rows = if *friction { 3 } else { 1 };
                    // The contact's own rows × rows block (row `row` at 0), then chosen per
                    // world: inactive slots get r = p, ∂r/∂p = I, ∂r/∂v = 0.
                    let mut own = Linearization {
                        r: vec![S::zero(); rows],
                        r_vel: zeros(if jac { rows } else { 0 }),
                        r_p: zeros(if jac { rows } else { 0 }),
                    };
                    comp(row, row, gap, wn, &self.rho_n, &mut own);
                    if *friction {
                        self.natural_map_rows(row, mu, wt, &vel, p, mode, &mut own);
                    }
                    for i in 0..rows {
                        lin.r[row + i] = active.select(&own.r[i], &p[row + i]);
                        if jac {
                            for k in 0..rows {
                                let id = S::C(if i == k { 1.0 } else { 0.0 });
                                lin.r_p[row + i][row + k] = active.select(&own.r_p[i][k], &id);
                                lin.r_vel[row + i][row + k] =
                                    active.select(&own.r_vel[i][k], &S::zero());
                            }
                        }
                    }
                }
            }
        }
        lin
    }

    /// Friction rows (R3), the natural map of the friction disk, of the contact whose normal
    /// row is `row` ([`crate::ncp_fb::residual`]'s `natural_map_rows`, same operations),
    /// written into the contact's own 3 × 3 block `lin` (the normal row at 0).
    #[allow(clippy::too_many_arguments)]
    fn natural_map_rows(
        &self,
        row: usize,
        mu: &S<B>,
        wt: &S<B>,
        vel: &[S<B>],
        p: &[S<B>],
        mode: Option<Friction>,
        lin: &mut Linearization<B>,
    ) {
        // Global rows read, local rows (in the contact's block) written.
        let g = [row + 1, row + 2];
        let f = [1, 2];
        let pf = [p[g[0]].clone(), p[g[1]].clone()];
        let t = [vel[g[0]].clone(), vel[g[1]].clone()];
        let rho = &self.rho_f;
        let rw = rho * wt;
        let y: [S<B>; 2] = std::array::from_fn(|i| &t[i] + &(&pf[i] * &rw));
        let z: [S<B>; 2] = std::array::from_fn(|i| &pf[i] - &(&y[i] / wt));
        let pn = p[row].max_c(0.0);
        let radius = mu * &pn;
        // √ whose derivative stays finite at z = 0 (sticking worlds with zero impulses and slip,
        // inert slots): reverse mode through the unselected branch would give 0 · ∞.
        let zn = crate::batched::collision::safe_sqrt(&(&(&z[0] * &z[0]) + &(&z[1] * &z[1])));
        let point = radius.le(&S::C(0.0));
        let stick = point.not().and(&zn.le(&radius));
        let slide = point.not().and(&stick.not());
        let zn_safe = slide.select(&zn, &S::C(1.0));
        let zh: [S<B>; 2] = std::array::from_fn(|i| &z[i] / &zn_safe);
        let s = &radius / &zn_safe;
        // The three branches' residuals, chosen per world.
        for i in 0..2 {
            let r_point = wt * &pf[i];
            let r_slide = &(&pf[i] - &(&zh[i] * &radius)) * wt;
            lin.r[f[i]] = point.select(&r_point, &stick.select(&y[i], &r_slide));
        }
        let Some(mode) = mode else { return };
        let one_minus = &(S::C(1.0) - rho) * &s;
        for i in 0..2 {
            for k in 0..2 {
                let delta = if i == k { 1.0 } else { 0.0 };
                // Sliding branch.
                let (v_slide, p_slide) = if mode == Friction::Lagged {
                    if i == k {
                        (s.clone(), wt * &(S::C(1.0) - &one_minus))
                    } else {
                        (S::zero(), S::zero())
                    }
                } else {
                    let proj = S::C(delta) - &(&zh[i] * &zh[k]);
                    (&proj * &s, &(S::C(delta) - &(&proj * &one_minus)) * wt)
                };
                let (v_stick, p_stick) = if i == k {
                    (S::C(1.0), rho * wt)
                } else {
                    (S::zero(), S::zero())
                };
                let p_point = if i == k { wt.clone() } else { S::zero() };
                lin.r_vel[f[i]][f[k]] = point.select(&S::zero(), &stick.select(&v_stick, &v_slide));
                lin.r_p[f[i]][f[k]] = point.select(&p_point, &stick.select(&p_stick, &p_slide));
            }
            if mode == Friction::Exact {
                // ∂r_f/∂p_n = −w_t μ ẑ where sliding with p_n > 0.
                let d_pn = &zh[i] * &(&(-wt) * mu);
                let on = slide.and(&p[row].gt(&S::C(0.0)));
                lin.r_p[f[i]][0] = on.select(&d_pn, &S::zero());
            }
        }
    }

    /// The Newton matrix (spec eq. (12)): `A = ∂r/∂v · J M⁻¹ Jᵀ + ∂r/∂p + diag(reg)`, nλ × nλ.
    pub fn newton_matrix(
        &self,
        lin: &Linearization<B>,
        delassus: &[Vec<S<B>>],
        reg: &[S<B>],
    ) -> Vec<Vec<S<B>>> {
        let nl = self.nl();
        (0..nl)
            .map(|i| {
                (0..nl)
                    .map(|k| {
                        let a = dot((0..nl).map(|j| &lin.r_vel[i][j] * &delassus[j][k]))
                            + &lin.r_p[i][k];
                        if i == k {
                            a + &reg[i]
                        } else {
                            a
                        }
                    })
                    .collect()
            })
            .collect()
    }

    /// The row blocks `(first row, rows)` in row order; they tile `0..nλ` and hold every
    /// non-zero of `∂r/∂v` and `∂r/∂p` (both block diagonal).
    pub fn row_blocks(&self) -> Vec<(usize, usize)> {
        self.blocks.iter().map(|b| (b.row(), b.rows())).collect()
    }

    /// [`Self::newton_matrix`] packed (`(worlds, nλ, nλ)`, [`super::dense`], "Packed"):
    /// `∂r/∂v · D + (∂r/∂p + diag(reg))` with `delassus` D packed. `∂r/∂v` is block diagonal, so
    /// each block's rows of the product are its block times D's rows (a broadcast product and
    /// a sum per block). The same matrix as the unrolled one to round-off (the regularization
    /// is added to `∂r/∂p` first).
    pub fn newton_matrix_packed(
        &self,
        lin: &Linearization<B>,
        delassus: &burn_tensor::Tensor<B, 3>,
        reg: &[S<B>],
        like: &burn_tensor::Tensor<B, 1>,
    ) -> burn_tensor::Tensor<B, 3> {
        use super::dense::pack_block_diagonal;
        let blocks = self.row_blocks();
        let [w, n, _] = delassus.dims();
        let rows: Vec<burn_tensor::Tensor<B, 3>> = blocks
            .iter()
            .map(|&(r, k)| {
                let rv: Vec<Vec<S<B>>> = (r..r + k)
                    .map(|i| lin.r_vel[i][r..r + k].to_vec())
                    .collect();
                let d = delassus.clone().slice([0..w, r..r + k, 0..n]);
                if k == 1 {
                    return d * rv[0][0].tensor_like(like).reshape([w, 1, 1]);
                }
                let rv = super::dense::pack(&rv, like);
                (rv.reshape([w, k, k, 1]) * d.reshape([w, 1, k, n]))
                    .sum_dim(2)
                    .reshape([w, k, n])
            })
            .collect();
        burn_tensor::Tensor::cat(rows, 1) + pack_block_diagonal(&lin.r_p, Some(reg), &blocks, like)
    }

    /// `‖r‖²` per world.
    pub fn norm_squared(r: &[S<B>]) -> S<B> {
        dot(r.iter().map(|x| x * x))
    }

    /// `max_i |r_i|` per world.
    pub fn amax(r: &[S<B>]) -> S<B> {
        r.iter().fold(S::zero(), |m, x| max(&m, &x.abs()))
    }

    /// The NCP criterion ([`crate::ncp_fb::residual::Problem::ncp_criterion`]; with
    /// `less_floor`, measured from the smoothed root, `ncp_criterion_smoothed`), J. Inactive
    /// slots contribute 0 (their impulses are 0).
    pub fn ncp_criterion(&self, u: &[S<B>], p: &[S<B>], less_floor: bool) -> S<B> {
        let vel = self.row_velocities(u);
        let h = self.h;
        let eps2 = self.eps_fb * self.eps_fb;
        let floor = |w: &S<B>| -> S<B> {
            if !less_floor {
                return S::zero();
            }
            let pos = w.gt(&S::C(0.0));
            let safe = pos.select(w, &S::C(1.0));
            pos.select(&(S::C(eps2) / &(&S::C(2.0 * h * h) * &safe)), &S::zero())
        };
        let mut sum = S::zero();
        for b in &self.blocks {
            let term = match b {
                Block::Limit { row, dist, w } => {
                    (&(&p[*row] * &(&(dist / h) + &vel[*row])) - &floor(w)).abs()
                }
                Block::Contact {
                    row,
                    friction,
                    mu,
                    gap,
                    wn,
                    active,
                    ..
                } => {
                    let row = *row;
                    let cn = &(gap / h) + &vel[row];
                    let normal = &(&p[row] * &cn) - &floor(wn);
                    let t = if *friction {
                        let (v1, v2) = (&vel[row + 1], &vel[row + 2]);
                        let vt = (&(v1 * v1) + &(v2 * v2)).sqrt();
                        (&(&(&normal + &(&(&p[row] * mu) * &vt)) + &(&p[row + 1] * v1))
                            + &(&p[row + 2] * v2))
                            .abs()
                    } else {
                        normal.abs()
                    };
                    active.select(&t, &S::zero())
                }
                Block::Servo { .. } => S::zero(),
            };
            sum = sum + term;
        }
        sum
    }

    /// Largest violation of the admissible set in velocity units (m/s), as
    /// [`crate::ncp_fb::residual::Problem::cone_violation`]; 0 on inactive slots.
    pub fn cone_violation(&self, p: &[S<B>]) -> S<B> {
        let mut worst = S::zero();
        for b in &self.blocks {
            let v = match b {
                Block::Contact {
                    row,
                    friction,
                    mu,
                    wn,
                    wt,
                    active,
                    ..
                } => {
                    let row = *row;
                    let pull = wn * &(-&p[row]).max_c(0.0);
                    let v = if *friction {
                        let (a, c) = (&p[row + 1], &p[row + 2]);
                        let m = (&(a * a) + &(c * c)).sqrt();
                        max(&pull, &(wt * &(&m - &(mu * &p[row].max_c(0.0))).max_c(0.0)))
                    } else {
                        pull
                    };
                    active.select(&v, &S::zero())
                }
                Block::Limit { row, w, .. } => w * &(-&p[*row]).max_c(0.0),
                Block::Servo { .. } => S::zero(),
            };
            worst = max(&worst, &v);
        }
        worst
    }

    /// Largest |r| over the servo rows (m/s).
    pub fn equation_residual(&self, r: &[S<B>]) -> S<B> {
        self.blocks.iter().fold(S::zero(), |m, b| match b {
            Block::Servo { row, .. } => max(&m, &r[*row].abs()),
            _ => m,
        })
    }

    /// Largest violation of the linearized position constraints after the step (m or rad),
    /// as [`crate::ncp_fb::residual::Problem::penetration`]; 0 on inactive slots.
    pub fn penetration(&self, u: &[S<B>], p: &[S<B>]) -> S<B> {
        let vel = self.row_velocities(u);
        let h = self.h;
        let mut worst = S::zero();
        for b in &self.blocks {
            let v = match b {
                Block::Limit { row, dist, .. } => -&(dist + &(&vel[*row] * h)),
                Block::Contact {
                    row,
                    gap,
                    wn,
                    active,
                    ..
                } => {
                    let row = *row;
                    let c = gap + &(&(&vel[row] + &(&(&self.rho_n * wn) * &p[row])) * h);
                    active.select(&-&c, &S::zero())
                }
                Block::Servo { .. } => S::zero(),
            };
            worst = max(&worst, &v);
        }
        worst
    }
}

#[cfg(test)]
mod tests {
    //! World by world against the cpu engine's problem: each world's cpu problem holds only its
    //! active contacts (rows renumbered), as the cpu engine would build it; the batched problem
    //! holds every slot, the inactive ones inert.
    use burn_tensor::{Tensor, TensorData};
    use nalgebra::{DMatrix, DVector};
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::batched::ncp::dense::lu_solve;
    use crate::batched::NdArrayF64 as Nd;
    use crate::ncp_fb::residual as cpu;

    const W: usize = 96;
    const NV: usize = 4;
    const H: f64 = 0.01;
    /// Slots: servo (row 0), limit (1), contact with friction (2–4), contact with friction
    /// (5–7), frictionless contact (8).
    const NL: usize = 9;
    const CONTACTS: [(usize, bool); 3] = [(2, true), (5, true), (8, false)];

    fn t(x: Vec<f64>) -> S<Nd> {
        S::T(Tensor::from_data(
            TensorData::new(x, [W]),
            &Default::default(),
        ))
    }

    fn values(s: &S<Nd>) -> Vec<f64> {
        match s {
            S::C(c) => vec![*c; W],
            S::T(x) => x.to_data().to_vec::<f64>().unwrap(),
        }
    }

    fn mask(x: &[bool]) -> M<Nd> {
        M::T(Tensor::from_data(
            TensorData::new(x.to_vec(), [W]),
            &Default::default(),
        ))
    }

    /// One world's data.
    struct World {
        cpu: cpu::Problem,
        /// Slot row -> cpu row (None: inactive slot).
        map: Vec<Option<usize>>,
        active: [bool; 3],
        /// Full-size (every slot) J, M⁻¹Jᵀ, with inactive rows zero.
        j: DMatrix<f64>,
        minv_jt: DMatrix<f64>,
        data: Vec<[f64; 4]>, // per contact: gap, wn, wt, mu
        servo: [f64; 2],     // alpha, bias
        limit: [f64; 2],     // dist, w
        rho: [f64; 2],
        u: DVector<f64>,
        p: DVector<f64>,
    }

    fn world(rng: &mut impl Rng, w: usize) -> World {
        let mut r = |lo: f64, hi: f64| rng.random_range(lo..hi);
        let mut j = DMatrix::from_fn(NL, NV, |_, _| r(-1.0, 1.0));
        let l = DMatrix::from_fn(NV, NV, |_, _| r(-1.0, 1.0));
        let minv = &l * l.transpose() + DMatrix::identity(NV, NV) * 0.5;
        let active = [r(0.0, 1.0) < 0.75, r(0.0, 1.0) < 0.75, r(0.0, 1.0) < 0.75];
        for (c, &(row, fr)) in CONTACTS.iter().enumerate() {
            if !active[c] {
                for i in row..row + if fr { 3 } else { 1 } {
                    j.row_mut(i).fill(0.0);
                }
            }
        }
        let minv_jt = &minv * j.transpose();
        let d = &j * &minv_jt;
        // Half the worlds rigid, half with a continuation stage's compliance.
        let rho = if w % 2 == 0 {
            [0.0, 0.0]
        } else {
            [r(0.0, 0.1), r(0.0, 0.1)]
        };
        let data: Vec<[f64; 4]> = CONTACTS
            .iter()
            .map(|&(row, fr)| {
                let wt = if fr {
                    0.5 * (d[(row + 1, row + 1)] + d[(row + 2, row + 2)])
                } else {
                    0.0
                };
                [r(-0.01, 0.02), d[(row, row)], wt, r(0.2, 1.0)]
            })
            .collect();
        let servo = [r(0.1, 2.0), r(-0.5, 0.5)];
        let limit = [r(-0.01, 0.05), d[(1, 1)]];
        let u = DVector::from_fn(NV, |_, _| r(-1.0, 1.0));
        let mut p = DVector::from_fn(NL, |_, _| r(-0.3, 1.0));
        // Every third world: friction impulses near the sticking set (‖z‖ ≤ R/2).
        let vel = &j * &u;
        for (c, &(row, fr)) in CONTACTS.iter().enumerate() {
            if fr && w % 3 == 0 && p[row] > 0.0 {
                let [_, _, wt, mu] = data[c];
                let rad = mu * p[row];
                let (a, s) = (r(0.0, std::f64::consts::TAU), r(0.0, 0.5) * rad);
                for (k, dz) in [(1, s * a.cos()), (2, s * a.sin())] {
                    p[row + k] = (vel[row + k] / wt + dz) / (1.0 - rho[1]);
                }
            }
            if !active[c] {
                for i in row..row + if fr { 3 } else { 1 } {
                    p[i] = 0.0;
                }
            }
        }
        // The cpu problem: active rows only.
        let mut map = vec![None; NL];
        let mut next = 0;
        let mut blocks = vec![
            cpu::Block::Servo {
                row: 0,
                alpha: servo[0],
                bias: servo[1],
            },
            cpu::Block::Limit {
                row: 1,
                dist: limit[0],
                w: limit[1],
            },
        ];
        map[0] = Some(0);
        map[1] = Some(1);
        next += 2;
        for (c, &(row, fr)) in CONTACTS.iter().enumerate() {
            if !active[c] {
                continue;
            }
            let [gap, wn, wt, mu] = data[c];
            blocks.push(cpu::Block::Contact {
                row: next,
                friction: fr,
                mu,
                gap,
                wn,
                wt,
            });
            for i in 0..if fr { 3 } else { 1 } {
                map[row + i] = Some(next + i);
            }
            next += if fr { 3 } else { 1 };
        }
        let rows: Vec<usize> = (0..NL).filter(|&i| map[i].is_some()).collect();
        let cj = DMatrix::from_fn(rows.len(), NV, |i, k| j[(rows[i], k)]);
        let cpu = cpu::Problem {
            h: H,
            minv_jt: &minv * cj.transpose(),
            j: cj,
            u_free: DVector::from_fn(NV, |_, _| r(-1.0, 1.0)),
            blocks,
            eps_fb: 1e-8,
            eps_v: 1e-6,
            rho_n: rho[0],
            rho_f: rho[1],
            friction_residual: cpu::FrictionResidual::NaturalMap,
            center: DVector::zeros(0),
        };
        World {
            cpu,
            map,
            active,
            j,
            minv_jt,
            data,
            servo,
            limit,
            rho,
            u,
            p,
        }
    }

    fn batched(ws: &[World]) -> Problem<Nd> {
        let col = |f: &dyn Fn(&World) -> f64| t(ws.iter().map(f).collect());
        let mut blocks = vec![
            Block::Servo {
                row: 0,
                alpha: col(&|w| w.servo[0]),
                bias: col(&|w| w.servo[1]),
            },
            Block::Limit {
                row: 1,
                dist: col(&|w| w.limit[0]),
                w: col(&|w| w.limit[1]),
            },
        ];
        for (c, &(row, friction)) in CONTACTS.iter().enumerate() {
            blocks.push(Block::Contact {
                row,
                friction,
                gap: col(&|w| w.data[c][0]),
                wn: col(&|w| w.data[c][1]),
                wt: col(&|w| w.data[c][2]),
                mu: col(&|w| w.data[c][3]),
                active: mask(&ws.iter().map(|w| w.active[c]).collect::<Vec<_>>()),
                bodies: [0, 1],
            });
        }
        Problem {
            h: H,
            j: (0..NL)
                .map(|i| (0..NV).map(|k| col(&|w| w.j[(i, k)])).collect())
                .collect(),
            minv_jt: (0..NV)
                .map(|k| (0..NL).map(|i| col(&|w| w.minv_jt[(k, i)])).collect())
                .collect(),
            u_free: (0..NV).map(|k| col(&|w| w.cpu.u_free[k])).collect(),
            blocks,
            eps_fb: 1e-8,
            rho_n: col(&|w| w.rho[0]),
            rho_f: col(&|w| w.rho[1]),
            packed: None,
        }
    }

    fn close(a: f64, b: f64, what: &str) {
        assert!(
            (a - b).abs() <= 1e-12 * (1.0 + a.abs().max(b.abs())),
            "{what}: batched {a:e} vs cpu {b:e}"
        );
    }

    #[test]
    fn residual_jacobian_and_newton_direction_are_the_cpu_engines_world_by_world() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
        let ws: Vec<World> = (0..W).map(|w| world(&mut rng, w)).collect();
        let pb = batched(&ws);
        let u: Vec<S<Nd>> = (0..NV)
            .map(|k| t(ws.iter().map(|w| w.u[k]).collect()))
            .collect();
        let p: Vec<S<Nd>> = (0..NL)
            .map(|i| t(ws.iter().map(|w| w.p[i]).collect()))
            .collect();
        let vel = pb.velocity(&p);
        let d = pb.delassus();
        let reg = pb.regularization(1e-6, 1e-5, &d);
        let read = |m: &[Vec<S<Nd>>]| -> Vec<Vec<Vec<f64>>> {
            m.iter().map(|r| r.iter().map(values).collect()).collect()
        };
        let vecs = |v: &[S<Nd>]| -> Vec<Vec<f64>> { v.iter().map(values).collect() };
        let (ncp_raw, ncp_s, cone, pen) = (
            values(&pb.ncp_criterion(&u, &p, false)),
            values(&pb.ncp_criterion(&u, &p, true)),
            values(&pb.cone_violation(&p)),
            values(&pb.penetration(&u, &p)),
        );
        let vel = vecs(&vel);
        let mut branches = [0usize; 3]; // point, stick, slide among active friction rows
        for mode in [Friction::Exact, Friction::Lagged] {
            let lin = pb.linearize(&u, &p, mode);
            let a = pb.newton_matrix(&lin, &d, &reg);
            let rhs: Vec<S<Nd>> = lin.r.iter().map(|x| -x).collect();
            let (dp, ok) = lu_solve(&a, &rhs);
            let ok: Vec<bool> = match ok {
                M::T(m) => m.to_data().to_vec::<bool>().unwrap(),
                M::C(c) => vec![c; W],
            };
            let (r, rv, rp, aa, dp) = (
                vecs(&lin.r),
                read(&lin.r_vel),
                read(&lin.r_p),
                read(&a),
                vecs(&dp),
            );
            let eq = values(&Problem::equation_residual(&pb, &lin.r));
            for (w, wd) in ws.iter().enumerate() {
                let c = &wd.cpu;
                let cl = c.linearize(&wd.u, &wd.p_cpu(), mode);
                let pc = wd.p_cpu();
                for i in 0..NL {
                    match wd.map[i] {
                        Some(ci) => {
                            close(r[i][w], cl.r[ci], &format!("world {w} r[{i}]"));
                            for k in 0..NL {
                                let (cv, cp) = match wd.map[k] {
                                    Some(ck) => (cl.r_vel[(ci, ck)], cl.r_p[(ci, ck)]),
                                    None => (0.0, 0.0),
                                };
                                close(
                                    rv[i][k][w],
                                    cv,
                                    &format!("world {w} r_vel[{i}][{k}] {mode:?}"),
                                );
                                close(
                                    rp[i][k][w],
                                    cp,
                                    &format!("world {w} r_p[{i}][{k}] {mode:?}"),
                                );
                            }
                        }
                        None => {
                            assert_eq!(r[i][w], wd.p[i], "inert row {i} world {w}");
                            for k in 0..NL {
                                let id = if i == k { 1.0 } else { 0.0 };
                                assert_eq!(aa[i][k][w], id, "inert Newton row {i},{k} world {w}");
                                assert_eq!(
                                    aa[k][i][w], id,
                                    "inert Newton column {k},{i} world {w}"
                                );
                            }
                        }
                    }
                }
                // The Newton direction: the cpu engine's (A = r_vel D + r_p + reg, LU) to the
                // round-off its conditioning allows.
                let cd = &c.j * &c.minv_jt;
                let mut ca = &cl.r_vel * &cd + &cl.r_p;
                let base = |ci: usize| {
                    let fr = c.blocks.iter().any(|b| matches!(*b, cpu::Block::Contact { row, friction: true, .. } if ci == row + 1 || ci == row + 2));
                    if fr {
                        1e-5
                    } else {
                        1e-6
                    }
                };
                for ci in 0..c.nl() {
                    ca[(ci, ci)] += base(ci) * cd[(ci, ci)];
                }
                let cdp = ca.clone().lu().solve(&-&cl.r).unwrap();
                let sv = ca.singular_values();
                let cond = sv.max() / sv.min();
                assert!(
                    ok[w],
                    "world {w}: a pivot was zero or not finite (cond {cond:e})"
                );
                let scale = cdp.amax();
                for i in 0..NL {
                    let want = wd.map[i].map_or(-wd.p[i], |ci| cdp[ci]);
                    assert!(
                        (dp[i][w] - want).abs() <= 1e-13 * cond * (scale + 1e-300),
                        "world {w} dp[{i}] {mode:?}: {:e} vs cpu {want:e} (cond {cond:e})",
                        dp[i][w]
                    );
                }
                if mode == Friction::Exact {
                    close(eq[w], c.equation_residual(&cl.r), "equation residual");
                    close(
                        ncp_raw[w],
                        c.ncp_criterion(&wd.u, &pc),
                        &format!("world {w} ncp"),
                    );
                    close(
                        ncp_s[w],
                        c.ncp_criterion_smoothed(&wd.u, &pc),
                        &format!("world {w} ncp smoothed"),
                    );
                    close(
                        cone[w],
                        c.cone_violation(&pc),
                        &format!("world {w} cone violation"),
                    );
                    close(
                        pen[w],
                        c.penetration(&wd.u, &pc),
                        &format!("world {w} penetration"),
                    );
                    let cu = c.velocity(&pc);
                    for k in 0..NV {
                        close(vel[k][w], cu[k], &format!("world {w} u[{k}]"));
                    }
                    for (ci, &(row, fr)) in CONTACTS.iter().enumerate() {
                        if !fr || !wd.active[ci] {
                            continue;
                        }
                        let [_, _, wt, mu] = wd.data[ci];
                        let rad = mu * wd.p[row].max(0.0);
                        let vr = &wd.j * &wd.u;
                        let y: Vec<f64> = (1..3)
                            .map(|k| vr[row + k] + wd.rho[1] * wt * wd.p[row + k])
                            .collect();
                        let z = ((wd.p[row + 1] - y[0] / wt).powi(2)
                            + (wd.p[row + 2] - y[1] / wt).powi(2))
                        .sqrt();
                        branches[if rad <= 0.0 {
                            0
                        } else if z <= rad {
                            1
                        } else {
                            2
                        }] += 1;
                    }
                }
            }
        }
        // Every branch of the natural map was exercised, and inert slots too.
        assert!(
            branches.iter().all(|&n| n >= 10),
            "branches (point, stick, slide): {branches:?}"
        );
        let inert = ws.iter().filter(|w| w.active.iter().any(|a| !a)).count();
        assert!(inert >= 20, "{inert} worlds with an inactive slot");
    }

    impl World {
        /// The impulses of the active rows, in the cpu problem's order.
        fn p_cpu(&self) -> DVector<f64> {
            let rows: Vec<usize> = (0..NL).filter(|&i| self.map[i].is_some()).collect();
            DVector::from_fn(rows.len(), |i, _| self.p[rows[i]])
        }
    }
}
