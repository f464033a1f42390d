//! The residual of one `ncp_fb` step and its derivatives (module doc, equations (R1)–(R6)).
//!
//! Unknowns `x = (u, p)`: generalized velocity after the step `u` (nv) and the constraint
//! impulses `p` (N s, or N m s for rotational rows), one per row of [`Problem::j`]. Every
//! residual row is a velocity (m/s or rad/s).
//!
//! The constraint residual depends on `u` only through the row velocities `v = J u`, so
//! [`Problem::linearize`] returns `∂r/∂v` (block diagonal, nλ × nλ) and `∂r/∂u = ∂r/∂v · J`.
//! It also returns the partials with respect to each block's scalar data ([`Block::data`]:
//! gaps, inverse weights, μ, servo and compliance terms), which the adjoint
//! ([`super::adjoint`]) chains with the derivatives of the step's assembly.

use nalgebra::{DMatrix, DVector, Matrix2, Vector2};

/// What a group of constraint rows is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Block {
    /// A contact: normal row `row`, and if `friction`, tangent rows `row + 1`, `row + 2`.
    Contact {
        /// Index of the normal row.
        row: usize,
        /// Whether the contact has the two sliding-friction rows (condim ≥ 3).
        friction: bool,
        /// Sliding friction coefficient μ (-).
        mu: f64,
        /// Gap at q⁻ minus the contact margin (m), negative in penetration.
        gap: f64,
        /// Normal inverse weight w_n = (J_n M⁻¹ J_nᵀ) (m/s per N s).
        wn: f64,
        /// Tangential inverse weight w_t = ½(w_t1 + w_t2) (m/s per N s).
        wt: f64,
    },
    /// A joint-limit row: a complementarity row like a contact normal.
    Limit {
        /// Row index.
        row: usize,
        /// Distance to the limit at q⁻ (m or rad), positive inside the range.
        dist: f64,
        /// Inverse weight (J M⁻¹ Jᵀ) of the row.
        w: f64,
    },
    /// An implicit servo row (spec eq. (8) in impulses, module doc (R5)):
    /// `r = J u + alpha p + bias`.
    Servo {
        /// Row index.
        row: usize,
        /// Compliance in impulses (m/s or rad/s per N s or N m s): `gear/(h k_v)` for a
        /// velocity servo, `gear/(h (k_v + h k_p))` for a position servo (module doc (R5)).
        alpha: f64,
        /// Constant term (m/s or rad/s): `−gear ū` (velocity), `gear (q⁻ − ū)/h` (paper's
        /// position form) or `gear ERP (q⁻ − ū)/h` (implicit PD).
        bias: f64,
    },
    /// A compliant bilateral equality row (spec eq. (3), module doc (R6)):
    /// `r = c/h + J u + compliance p / h²`.
    Equality {
        /// Row index.
        row: usize,
        /// Constraint violation at q⁻ (m or rad).
        c: f64,
        /// Compliance E (m/N or rad/(N m)).
        compliance: f64,
    },
}

impl Block {
    /// The block's scalar data, whose derivatives the adjoint chains ([`Problem::linearize`]):
    /// Contact `[gap, w_n, w_t, μ]`, Limit `[dist, w]`, Servo `[alpha, bias]`,
    /// Equality `[c, compliance]`.
    pub fn data(&self) -> Vec<f64> {
        match *self {
            Block::Contact {
                gap, wn, wt, mu, ..
            } => vec![gap, wn, wt, mu],
            Block::Limit { dist, w, .. } => vec![dist, w],
            Block::Servo { alpha, bias, .. } => vec![alpha, bias],
            Block::Equality { c, compliance, .. } => vec![c, compliance],
        }
    }

    /// Number of data scalars of the block ([`Self::data`]), without allocating.
    pub fn data_len(&self) -> usize {
        match self {
            Block::Contact { .. } => 4,
            Block::Limit { .. } | Block::Servo { .. } | Block::Equality { .. } => 2,
        }
    }

    /// The first row of the block.
    pub fn row(&self) -> usize {
        match *self {
            Block::Contact { row, .. }
            | Block::Limit { row, .. }
            | Block::Servo { row, .. }
            | Block::Equality { row, .. } => row,
        }
    }

    /// Number of rows of the block.
    pub fn rows(&self) -> usize {
        match *self {
            Block::Contact { friction, .. } => {
                if friction {
                    3
                } else {
                    1
                }
            }
            _ => 1,
        }
    }

    /// Same kind and rows (the adjoint's finite differences of the assembly need the same
    /// contact set on both sides).
    pub fn same_structure(&self, other: &Block) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
            && self.row() == other.row()
            && self.rows() == other.rows()
    }
}

/// One step's problem, assembled at q⁻ (module doc).
#[derive(Debug, Clone)]
pub struct Problem {
    /// Time step h (s).
    pub h: f64,
    /// Constraint Jacobian, nλ × nv: row velocities `J u`.
    pub j: DMatrix<f64>,
    /// M⁻¹ Jᵀ, nv × nλ.
    pub minv_jt: DMatrix<f64>,
    /// Unconstrained velocity u⁻ + h M⁻¹ f_smooth.
    pub u_free: DVector<f64>,
    /// Row groups.
    pub blocks: Vec<Block>,
    /// FB smoothing ε (m).
    pub eps_fb: f64,
    /// Slip smoothing ε_v (m/s).
    pub eps_v: f64,
    /// Relative normal compliance ρ_n (-): contact normal rows read
    /// `φ_ε(gap + h (v_n + ρ_n w_n p_n), h w_n p_n) / h` (0: rigid).
    pub rho_n: f64,
    /// Relative friction compliance ρ_f (-): friction rows read
    /// `σ (J_f u + (W + ρ_f w_t) p_f)` (0: none); with the natural map, the tangential
    /// velocity inside the projection reads `J_f u + ρ_f w_t p_f`.
    pub rho_f: f64,
    /// Which complementarity function the friction rows use.
    pub friction_residual: FrictionResidual,
    /// Centre p̄ of the compliance terms (nλ, N s; empty: 0): the rows read ρ w (p − p̄) where
    /// the docs of [`Self::rho_n`] and [`Self::rho_f`] write ρ w p. With p̄ = 0 that is the
    /// Tikhonov regularization; with p̄ the previous iterate, the proximal-point
    /// regularization ([`super::solve`]), whose fixed point p = p̄ is a root of the rigid rows.
    pub center: DVector<f64>,
}

/// The complementarity function of the friction rows (R3); both have the same roots, the
/// Coulomb cone with maximal dissipation (module doc of [`super`], "Friction rows").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrictionResidual {
    /// The natural map of the friction disk (Alart & Curnier 1991, *Comput. Methods Appl.
    /// Mech. Eng.* 92, eq. (20); Facchinei & Pang 2003, §1.5.2 "natural map"), in velocity
    /// units: `r_f = w_t (p_f − Π_{D(μ p_n⁺)}(p_f − y/w_t))`, `y = J_f u + ρ_f w_t p_f`,
    /// Π the projection onto the disk of radius μ max(p_n, 0). Defined and semismooth on all of
    /// (u, p), so iterates need no projection onto the cone; sticking is exact (y = 0).
    #[default]
    NaturalMap,
    /// The maximal-dissipation weight of Macklin et al. 2019 (spec eq. (5)–(7), §7.2–7.3):
    /// `r_f = σ (J_f u + W p_f)` with W from the Fischer–Burmeister function of the cone
    /// margin and the smoothed slip speed; defined only inside (twice) the cone, so iterates
    /// are projected onto it.
    DissipationWeight,
}

impl FrictionResidual {
    /// The name used in experiment files.
    pub fn name(self) -> &'static str {
        match self {
            FrictionResidual::NaturalMap => "natural_map",
            FrictionResidual::DissipationWeight => "dissipation_weight",
        }
    }
}

/// How the friction rows are differentiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Friction {
    /// Exact: including ∂W/∂(v, p_n, p_f) and the row scale's derivatives (spec §7.6).
    Exact,
    /// W and the row scale σ frozen at their current values (spec §2.6, the "lagged" Jacobian):
    /// `∂r_f/∂v_f = σ I`, `∂r_f/∂p_f = σ W I`, `∂r_f/∂p_n = 0`.
    Lagged,
}

/// The residual's value and derivatives at one `(u, p)`.
#[derive(Debug, Clone)]
pub struct Linearization {
    /// Constraint residual, nλ (m/s).
    pub r: DVector<f64>,
    /// `∂r/∂v` with `v = J u` the row velocities, nλ × nλ, block diagonal.
    pub r_vel: DMatrix<f64>,
    /// `∂r/∂p`, nλ × nλ.
    pub r_p: DMatrix<f64>,
    /// `∂r/∂d`, nλ × n_d: the partials with respect to the blocks' scalar data, concatenated in
    /// block order ([`Block::data`]).
    pub r_data: DMatrix<f64>,
}

/// Smoothed Fischer–Burmeister function φ_ε(a, b) = a + b − √(a² + b² + ε²) (spec §1.1) and
/// its partial derivatives; at the origin with ε = 0 the generalized-Jacobian element (0, 1).
pub fn fb(a: f64, b: f64, eps: f64) -> (f64, f64, f64) {
    let rho = (a * a + b * b + eps * eps).sqrt();
    if rho < 1e-300 {
        return (0.0, 0.0, 1.0);
    }
    (a + b - rho, 1.0 - a / rho, 1.0 - b / rho)
}

/// Upper clamp of the friction weight W relative to w_t.
const W_MAX_RELATIVE: f64 = 1e12;

/// The maximal-dissipation weight W and its partial derivatives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrictionWeight {
    /// W (m/s per N s).
    pub w: f64,
    /// ∂W/∂v (v the smoothed slip speed).
    pub dv: f64,
    /// ∂W/∂P (P = μ p_n).
    pub dcap: f64,
    /// ∂W/∂m (m = ‖p_f‖).
    pub dm: f64,
    /// ∂W/∂k (k = w_t).
    pub dk: f64,
}

/// Maximal-dissipation weight W (spec §1.3 with §7.2: the unclamped margin g = P − m) and its
/// derivatives, with v the smoothed slip speed (m/s), P = μ p_n and m = ‖p_f‖ (N s),
/// k = w_t (m/s per N s):
///
/// `S = √(v² + k² g²)`, `W = k (S − k g) / (v + k P − S)`, clamped to [0, 1e12 k] (zero
/// derivatives where clamped).
pub fn friction_weight(v: f64, cap: f64, m: f64, k: f64) -> FrictionWeight {
    let zero = FrictionWeight {
        w: 0.0,
        dv: 0.0,
        dcap: 0.0,
        dm: 0.0,
        dk: 0.0,
    };
    let g = cap - m;
    let s = (v * v + k * k * g * g).sqrt();
    if s <= 0.0 {
        return zero;
    }
    // S − k g without cancellation when g ≥ 0.
    let s_minus = if g >= 0.0 {
        v * v / (s + k * g)
    } else {
        s - k * g
    };
    let num = k * s_minus;
    // D = v + k P − S = v + k m − (S − k g).
    let den = v + k * m - s_minus;
    if den.is_nan() || den <= 0.0 || !num.is_finite() {
        return zero;
    }
    let w = num / den;
    if w > W_MAX_RELATIVE * k {
        return FrictionWeight {
            w: W_MAX_RELATIVE * k,
            ..zero
        };
    }
    let (ds_dv, ds_dg, ds_dk) = (v / s, k * k * g / s, k * g * g / s);
    // N = k (S − k g), D = v + k m − (S − k g), with g = P − m.
    let (dn_dv, dn_dg, dn_dk) = (k * ds_dv, k * (ds_dg - k), s_minus + k * (ds_dk - g));
    let (dd_dv, dd_dg, dd_dk) = (1.0 - ds_dv, -(ds_dg - k), m - (ds_dk - g));
    let dw = |dn: f64, dd: f64| (dn - w * dd) / den;
    // ∂/∂P = ∂/∂g; ∂/∂m = −∂/∂g + the explicit k m in D.
    FrictionWeight {
        w,
        dv: dw(dn_dv, dd_dv),
        dcap: dw(dn_dg, dd_dg),
        dm: dw(-dn_dg, -dd_dg + k),
        dk: dw(dn_dk, dd_dk),
    }
}

impl Problem {
    /// Component i of the proximal centre ([`Self::center`]; 0 when empty).
    fn cen(&self, i: usize) -> f64 {
        self.center.get(i).copied().unwrap_or(0.0)
    }

    /// Number of constraint rows nλ.
    pub fn nl(&self) -> usize {
        self.j.nrows()
    }

    /// Number of dofs nv.
    pub fn nv(&self) -> usize {
        self.j.ncols()
    }

    /// Number of block data scalars (columns of [`Linearization::r_data`]).
    pub fn n_data(&self) -> usize {
        self.blocks.iter().map(Block::data_len).sum()
    }

    /// The blocks' scalar data concatenated in block order ([`Block::data`]).
    pub fn data(&self) -> DVector<f64> {
        DVector::from_vec(self.blocks.iter().flat_map(|b| b.data()).collect())
    }

    /// Velocity after the step for impulses `p`: `u = u_free + M⁻¹ Jᵀ p` (R1 eliminated).
    pub fn velocity(&self, p: &DVector<f64>) -> DVector<f64> {
        &self.u_free + &self.minv_jt * p
    }

    /// Project the impulses onto the admissible set (spec §2.5 safeguards): p_n ≥ 0, limits ≥ 0,
    /// ‖p_f‖ ≤ μ p_n (radial scaling); servo and equality impulses are free. Only with
    /// [`FrictionResidual::DissipationWeight`], whose W is undefined outside the cone: the
    /// natural map is defined everywhere and its iterates are left as Newton makes them
    /// (a projected iterate turns the Newton direction of a contact sliding on the cone
    /// boundary into an ascent direction of the merit function, module doc "Why Newton
    /// stalled").
    pub fn project(&self, p: &mut DVector<f64>) {
        if self.friction_residual == FrictionResidual::DissipationWeight {
            self.project_cone(p);
        }
    }

    /// Project the impulses onto the admissible set whatever the friction residual (the
    /// projection of [`Self::project`]).
    pub fn project_cone(&self, p: &mut DVector<f64>) {
        for b in &self.blocks {
            match *b {
                Block::Contact {
                    row, friction, mu, ..
                } => {
                    p[row] = p[row].max(0.0);
                    if friction {
                        let cap = mu * p[row];
                        let pf = Vector2::new(p[row + 1], p[row + 2]);
                        let m = pf.norm();
                        if m > cap {
                            let s = if m > 0.0 { cap / m } else { 0.0 };
                            p[row + 1] *= s;
                            p[row + 2] *= s;
                        }
                    }
                }
                Block::Limit { row, .. } => p[row] = p[row].max(0.0),
                Block::Servo { .. } | Block::Equality { .. } => {}
            }
        }
    }

    /// Full residual (R1)–(R6), length nv + nλ: first the dynamics `u − u_free − M⁻¹ Jᵀ p`,
    /// then the constraint rows in row order.
    pub fn residual(&self, u: &DVector<f64>, p: &DVector<f64>) -> DVector<f64> {
        let nv = self.nv();
        let mut r = DVector::zeros(nv + self.nl());
        r.rows_mut(0, nv)
            .copy_from(&(u - &self.u_free - &self.minv_jt * p));
        r.rows_mut(nv, self.nl())
            .copy_from(&self.constraint_residual(u, p));
        r
    }

    /// The constraint rows of the residual, nλ (m/s).
    pub fn constraint_residual(&self, u: &DVector<f64>, p: &DVector<f64>) -> DVector<f64> {
        self.evaluate(u, p, None).r
    }

    /// Residual and the constraint rows' Jacobian blocks `(∂r_c/∂u (nλ × nv), ∂r_c/∂p (nλ × nλ))`
    /// (exact friction derivatives), with the full residual first as in [`Self::residual`].
    pub fn residual_and_jacobian(
        &self,
        u: &DVector<f64>,
        p: &DVector<f64>,
    ) -> (DVector<f64>, DMatrix<f64>, DMatrix<f64>) {
        let lin = self.linearize(u, p, Friction::Exact);
        let ru = &lin.r_vel * &self.j;
        (self.residual(u, p), ru, lin.r_p)
    }

    /// The constraint residual with its derivatives with respect to the row velocities, the
    /// impulses and the block data.
    pub fn linearize(&self, u: &DVector<f64>, p: &DVector<f64>, mode: Friction) -> Linearization {
        self.evaluate(u, p, Some(mode))
    }

    fn evaluate(
        &self,
        u: &DVector<f64>,
        p: &DVector<f64>,
        mode: Option<Friction>,
    ) -> Linearization {
        let (nl, h) = (self.nl(), self.h);
        let nd = if mode.is_some() { self.n_data() } else { 0 };
        let dim = if mode.is_some() { nl } else { 0 };
        let mut lin = Linearization {
            r: DVector::zeros(nl),
            r_vel: DMatrix::zeros(dim, dim),
            r_p: DMatrix::zeros(dim, dim),
            r_data: DMatrix::zeros(dim, nd),
        };
        let jac = mode.is_some();
        let vel = &self.j * u;
        let mut col = 0; // first data column of the current block
                         // A complementarity row: r = φ_ε(gap + h v, h w p) / h; data columns (gap, w).
        let comp = |row: usize, gap: f64, w: f64, rho: f64, col: usize, lin: &mut Linearization| {
            let dp = p[row] - self.cen(row);
            let (phi, da, db) = fb(
                gap + h * (vel[row] + rho * w * dp),
                h * w * p[row],
                self.eps_fb,
            );
            lin.r[row] = phi / h;
            if jac {
                lin.r_vel[(row, row)] = da;
                lin.r_p[(row, row)] = (db + rho * da) * w;
                lin.r_data[(row, col)] = da / h;
                lin.r_data[(row, col + 1)] = db * p[row] + rho * da * dp;
            }
        };
        for b in &self.blocks {
            let ncol = b.data_len();
            match *b {
                Block::Limit { row, dist, w } => comp(row, dist, w, 0.0, col, &mut lin),
                Block::Servo { row, alpha, bias } => {
                    lin.r[row] = vel[row] + alpha * p[row] + bias;
                    if jac {
                        lin.r_vel[(row, row)] = 1.0;
                        lin.r_p[(row, row)] = alpha;
                        lin.r_data[(row, col)] = p[row];
                        lin.r_data[(row, col + 1)] = 1.0;
                    }
                }
                Block::Equality { row, c, compliance } => {
                    lin.r[row] = c / h + vel[row] + compliance * p[row] / (h * h);
                    if jac {
                        lin.r_vel[(row, row)] = 1.0;
                        lin.r_p[(row, row)] = compliance / (h * h);
                        lin.r_data[(row, col)] = 1.0 / h;
                        lin.r_data[(row, col + 1)] = p[row] / (h * h);
                    }
                }
                Block::Contact {
                    row,
                    friction,
                    mu,
                    gap,
                    wn,
                    wt,
                } => {
                    // Data columns: gap, wn, wt, mu.
                    comp(row, gap, wn, self.rho_n, col, &mut lin);
                    if friction {
                        self.friction_rows(row, mu, wt, &vel, p, col, mode, &mut lin);
                    }
                }
            }
            col += ncol;
        }
        lin
    }

    /// Friction rows (R3) of the contact whose normal row is `row`; data columns
    /// `col + 2` (w_t) and `col + 3` (μ).
    #[allow(clippy::too_many_arguments)]
    fn friction_rows(
        &self,
        row: usize,
        mu: f64,
        wt: f64,
        vel: &DVector<f64>,
        p: &DVector<f64>,
        col: usize,
        mode: Option<Friction>,
        lin: &mut Linearization,
    ) {
        if self.friction_residual == FrictionResidual::NaturalMap {
            return self.natural_map_rows(row, mu, wt, vel, p, col, mode, lin);
        }
        let (f1, f2) = (row + 1, row + 2);
        let (c_wt, c_mu) = (col + 2, col + 3);
        let pf = Vector2::new(p[f1], p[f2]);
        let cap = mu * p[row];
        if cap <= 0.0 {
            // Skipped friction row (spec §7.8), scaled like the active row below:
            // r_f = w_t p_f, the limit of σ (J_f u + W p_f) as μ p_n → 0⁺ (W → ∞).
            lin.r[f1] = wt * pf[0];
            lin.r[f2] = wt * pf[1];
            if mode.is_some() {
                lin.r_p[(f1, f1)] = wt;
                lin.r_p[(f2, f2)] = wt;
                lin.r_data[(f1, c_wt)] = pf[0];
                lin.r_data[(f2, c_wt)] = pf[1];
            }
            return;
        }
        let t = Vector2::new(vel[f1], vel[f2]);
        let v = (t.norm_squared() + self.eps_v * self.eps_v).sqrt();
        let m = pf.norm();
        let fw = friction_weight(v, cap, m, wt);
        let w = fw.w;
        // (R3) scaled by σ = w_t/(w_t + W) > 0 (same roots): r_f = σ (J_f u + W p_f).
        // σ keeps the row continuous as μ p_n → 0⁺ (W → ∞, r_f → w_t p_f, the skipped row)
        // and well scaled for the separated contacts whose smoothed FB root leaves
        // p_n ≈ ε²/(2 h w_n gap) > 0.
        let sigma = wt / (wt + w);
        let wr = w + self.rho_f * wt;
        let pf_c = Vector2::new(self.cen(f1), self.cen(f2));
        let raw = t + pf * w + (pf - pf_c) * (self.rho_f * wt);
        lin.r[f1] = sigma * raw[0];
        lin.r[f2] = sigma * raw[1];
        let Some(mode) = mode else { return };
        if mode == Friction::Lagged {
            lin.r_vel.view_mut((f1, f1), (2, 2)).fill_diagonal(sigma);
            lin.r_p.view_mut((f1, f1), (2, 2)).fill_diagonal(sigma * wr);
        } else {
            // ∂σ/∂W = −σ²/w_t; ∂r_f/∂W = σ p_f + (∂σ/∂W) raw =: g_w.
            let g_w = pf * sigma - raw * (sigma * sigma / wt);
            // ∂/∂t = σ I + g_w ∂W/∂v tᵀ / v  (∂v/∂t = tᵀ/v).
            let dt = Matrix2::identity() * sigma + g_w * t.transpose() * (fw.dv / v);
            lin.r_vel.view_mut((f1, f1), (2, 2)).copy_from(&dt);
            // ∂/∂p_n = μ ∂W/∂P g_w.
            let pn_col = g_w * (mu * fw.dcap);
            lin.r_p[(f1, row)] = pn_col[0];
            lin.r_p[(f2, row)] = pn_col[1];
            // ∂/∂p_f = σ W I + g_w ∂W/∂m p̂_fᵀ.
            let mut block = Matrix2::identity() * (sigma * wr);
            if m > 0.0 {
                block += g_w * pf.transpose() * (fw.dm / m);
            }
            lin.r_p.view_mut((f1, f1), (2, 2)).copy_from(&block);
        }
        // Data partials are exact in both modes: ∂/∂μ = p_n ∂W/∂P g_w;
        // ∂/∂w_t = (∂σ/∂w_t)|_W raw + g_w ∂W/∂k with (∂σ/∂w_t)|_W = W/(w_t + W)².
        let g_w = pf * sigma - raw * (sigma * sigma / wt);
        let d_mu = g_w * (p[row] * fw.dcap);
        let d_wt =
            raw * (w / ((wt + w) * (wt + w))) + (pf - pf_c) * (sigma * self.rho_f) + g_w * fw.dk;
        for (i, r) in [f1, f2].into_iter().enumerate() {
            lin.r_data[(r, c_mu)] = d_mu[i];
            lin.r_data[(r, c_wt)] = d_wt[i];
        }
    }

    /// Friction rows (R3) as the natural map of the friction disk
    /// ([`FrictionResidual::NaturalMap`]) of the contact whose normal row is `row`:
    ///
    /// `y = t + ρ_f w_t p_f` (t = J_f u), `z = p_f − y/w_t`, R = μ max(p_n, 0),
    /// `r_f = y` where ‖z‖ ≤ R (sticking: Π(z) = z) and `r_f = w_t (p_f − R ẑ)` otherwise
    /// (sliding: p_f = R ẑ at the root, antiparallel to t, the maximal-dissipation direction).
    /// Generalized Jacobian on the sliding side with s = R/‖z‖, P = I − ẑẑᵀ:
    /// `∂r/∂t = s P`, `∂r/∂p_f = w_t (I − (1 − ρ_f) s P)`, `∂r/∂p_n = −w_t μ ẑ` (p_n > 0),
    /// `∂r/∂μ = −w_t p_n⁺ ẑ`, `∂r/∂w_t = p_f − R ẑ − s P t / w_t` (the sticking side:
    /// `∂r/∂t = I`, `∂r/∂p_f = ρ_f w_t I`, `∂r/∂w_t = ρ_f p_f`). The lagged variant freezes s
    /// and keeps the diagonal part: `∂r/∂t = s I`, `∂r/∂p_f = w_t (1 − (1 − ρ_f) s) I`.
    #[allow(clippy::too_many_arguments)]
    fn natural_map_rows(
        &self,
        row: usize,
        mu: f64,
        wt: f64,
        vel: &DVector<f64>,
        p: &DVector<f64>,
        col: usize,
        mode: Option<Friction>,
        lin: &mut Linearization,
    ) {
        let (f1, f2) = (row + 1, row + 2);
        let (c_wt, c_mu) = (col + 2, col + 3);
        let pf = Vector2::new(p[f1], p[f2]);
        let t = Vector2::new(vel[f1], vel[f2]);
        let rho = self.rho_f;
        let pf_c = Vector2::new(self.cen(f1), self.cen(f2));
        let y = t + (pf - pf_c) * (rho * wt);
        let z = pf - y / wt;
        let pn = p[row].max(0.0);
        let radius = mu * pn;
        if radius <= 0.0 {
            // The disk is the point 0: r_f = w_t p_f (the dissipation weight's skipped row,
            // spec §7.8). At z = 0 this is the element of the generalized Jacobian taken, so a
            // contact at rest from p = 0 does not get the sticking rows J_f u, whose Delassus
            // rows are singular for redundant contacts.
            lin.r[f1] = wt * pf[0];
            lin.r[f2] = wt * pf[1];
            if mode.is_some() {
                lin.r_p.view_mut((f1, f1), (2, 2)).fill_diagonal(wt);
                lin.r_data[(f1, c_wt)] = pf[0];
                lin.r_data[(f2, c_wt)] = pf[1];
            }
            return;
        }
        let zn = z.norm();
        if zn <= radius {
            lin.r[f1] = y[0];
            lin.r[f2] = y[1];
            if mode.is_some() {
                lin.r_vel.view_mut((f1, f1), (2, 2)).fill_diagonal(1.0);
                lin.r_p.view_mut((f1, f1), (2, 2)).fill_diagonal(rho * wt);
                lin.r_data[(f1, c_wt)] = rho * (pf[0] - pf_c[0]);
                lin.r_data[(f2, c_wt)] = rho * (pf[1] - pf_c[1]);
            }
            return;
        }
        // Sliding (zn > radius > 0).
        let zh = z / zn;
        let s = radius / zn;
        let r = (pf - zh * radius) * wt;
        lin.r[f1] = r[0];
        lin.r[f2] = r[1];
        let Some(mode) = mode else { return };
        let proj = Matrix2::identity() - zh * zh.transpose();
        if mode == Friction::Lagged {
            lin.r_vel.view_mut((f1, f1), (2, 2)).fill_diagonal(s);
            lin.r_p
                .view_mut((f1, f1), (2, 2))
                .fill_diagonal(wt * (1.0 - (1.0 - rho) * s));
        } else {
            lin.r_vel.view_mut((f1, f1), (2, 2)).copy_from(&(proj * s));
            lin.r_p
                .view_mut((f1, f1), (2, 2))
                .copy_from(&((Matrix2::identity() - proj * ((1.0 - rho) * s)) * wt));
            if p[row] > 0.0 {
                let d_pn = zh * (-wt * mu);
                lin.r_p[(f1, row)] = d_pn[0];
                lin.r_p[(f2, row)] = d_pn[1];
            }
        }
        // Data partials (exact in both modes). ∂z/∂w_t = t/w_t² (ρ_f enters z as −ρ_f p_f).
        let d_mu = zh * (-wt * pn);
        let d_wt = pf - zh * radius - proj * t * (s / wt);
        for (i, rr) in [f1, f2].into_iter().enumerate() {
            lin.r_data[(rr, c_mu)] = d_mu[i];
            lin.r_data[(rr, c_wt)] = d_wt[i];
        }
    }

    /// The NCP criterion of DESIGN.md in impulses, in the position-level form this formulation
    /// solves: Σ over contacts of |p_n (c_n/h + μ‖v_t‖) + p_f · v_t| plus Σ over limits
    /// |p c/h|, with `c = gap⁻ + h J u` the linearized gap after the step and v = J u the row
    /// velocities after the step (N s · m/s). Where gap⁻ = 0 (resting, sliding) c/h is the normal
    /// velocity and this is DESIGN.md's criterion; a penetrating contact that the step pushes
    /// out (c = 0, v_n = −gap⁻/h > 0) is complementary here but not at the velocity level.
    /// Servo and equality rows are equations, not complementarity rows: they do not count.
    pub fn ncp_criterion(&self, u: &DVector<f64>, p: &DVector<f64>) -> f64 {
        self.ncp_terms(u, p, false)
    }

    /// The NCP criterion measured from the smoothed root (the stopping test's form): each
    /// complementarity row's term less the product the FB smoothing leaves at its exact root,
    /// `a b = ε²/2` with `a = c`, `b = h w p`, i.e. `p c / h = ε²/(2 h² w)` (J). Summed over the
    /// rows of a step this floor is Σ ε²/(2 h² w): 7e-9 J for box_traversal's six wheel
    /// contacts at h = 1 ms, above a 1e-9 J tolerance, so the raw criterion could never stop a
    /// small step however exact its solution.
    pub fn ncp_criterion_smoothed(&self, u: &DVector<f64>, p: &DVector<f64>) -> f64 {
        self.ncp_terms(u, p, true)
    }

    fn ncp_terms(&self, u: &DVector<f64>, p: &DVector<f64>, less_floor: bool) -> f64 {
        let vel = &self.j * u;
        let h = self.h;
        let floor = |w: f64| {
            if less_floor && w > 0.0 {
                self.eps_fb * self.eps_fb / (2.0 * h * h * w)
            } else {
                0.0
            }
        };
        self.blocks
            .iter()
            .map(|b| match *b {
                Block::Limit { row, dist, w } => (p[row] * (dist / h + vel[row]) - floor(w)).abs(),
                Block::Contact {
                    row,
                    friction,
                    mu,
                    gap,
                    wn,
                    ..
                } => {
                    let cn = gap / h + vel[row];
                    let normal = p[row] * cn - floor(wn);
                    if friction {
                        let vt = Vector2::new(vel[row + 1], vel[row + 2]);
                        (normal + p[row] * mu * vt.norm() + p[row + 1] * vt[0] + p[row + 2] * vt[1])
                            .abs()
                    } else {
                        normal.abs()
                    }
                }
                Block::Servo { .. } | Block::Equality { .. } => 0.0,
            })
            .sum()
    }

    /// The Newton-only regularization added to the Schur complement's diagonal (spec §1.5):
    /// `reg·(J M⁻¹ Jᵀ)_ii` with `reg = friction` on friction rows and `normal` on every other
    /// row (nλ).
    pub fn regularization(&self, normal: f64, friction: f64) -> DVector<f64> {
        let mut reg = DVector::from_element(self.nl(), normal);
        for b in &self.blocks {
            if let Block::Contact {
                row,
                friction: true,
                ..
            } = *b
            {
                reg[row + 1] = friction;
                reg[row + 2] = friction;
            }
        }
        for (i, r) in reg.iter_mut().enumerate() {
            *r *= self.j.row(i).dot(&self.minv_jt.column(i).transpose());
        }
        reg
    }

    /// Largest violation of the admissible set in velocity units (m/s): over contacts,
    /// `w_t max(0, ‖p_f‖ − μ max(p_n, 0))` and `w_n max(0, −p_n)`, over limits `w max(0, −p)`,
    /// i.e. the impulse outside the Coulomb cone (or pulling) times the row's inverse weight.
    /// The natural map's iterates are not projected, so the NCP-criterion stopping test checks
    /// this too: where the slip is tiny, |⟨p, v + Φ(v)⟩| cannot see a friction impulse outside
    /// the cone.
    pub fn cone_violation(&self, p: &DVector<f64>) -> f64 {
        self.blocks
            .iter()
            .map(|b| match *b {
                Block::Contact {
                    row,
                    friction,
                    mu,
                    wn,
                    wt,
                    ..
                } => {
                    let pull = wn * (-p[row]).max(0.0);
                    if friction {
                        let m = Vector2::new(p[row + 1], p[row + 2]).norm();
                        pull.max(wt * (m - mu * p[row].max(0.0)).max(0.0))
                    } else {
                        pull
                    }
                }
                Block::Limit { row, w, .. } => w * (-p[row]).max(0.0),
                Block::Servo { .. } | Block::Equality { .. } => 0.0,
            })
            .fold(0.0, f64::max)
    }

    /// Largest |r| over the equation rows (servo and equality rows), m/s: the NCP criterion
    /// does not see them, so the stopping test checks them separately.
    pub fn equation_residual(&self, r: &DVector<f64>) -> f64 {
        self.blocks
            .iter()
            .filter_map(|b| match *b {
                Block::Servo { row, .. } | Block::Equality { row, .. } => Some(r[row].abs()),
                _ => None,
            })
            .fold(0.0, f64::max)
    }

    /// Largest violation of the linearized position constraints after the step (m or rad):
    /// max over complementarity rows of max(0, −(gap + h J u)).
    /// With the relative normal compliance ρ_n the constraint is the compliant one,
    /// `gap + h (v_n + ρ_n w_n p_n) ≥ 0`.
    pub fn penetration(&self, u: &DVector<f64>, p: &DVector<f64>) -> f64 {
        let vel = &self.j * u;
        self.blocks
            .iter()
            .map(|b| match *b {
                Block::Limit { row, dist, .. } => -(dist + self.h * vel[row]),
                Block::Contact { row, gap, wn, .. } => {
                    -(gap + self.h * (vel[row] + self.rho_n * wn * (p[row] - self.cen(row))))
                }
                Block::Servo { .. } | Block::Equality { .. } => 0.0,
            })
            .fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 3-dof toy: one contact with friction acting on a point mass (n = y, t1 = x, t2 = z),
    /// plus a servo row and an equality row on the same dofs.
    fn toy(gap: f64) -> Problem {
        let j = DMatrix::from_row_slice(
            5,
            3,
            &[
                0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.5, 0.5,
            ],
        );
        let minv_jt = j.transpose() * 0.5;
        Problem {
            h: 0.01,
            j,
            minv_jt,
            u_free: DVector::from_vec(vec![1.0, -0.2, 0.1]),
            blocks: vec![
                Block::Contact {
                    row: 0,
                    friction: true,
                    mu: 0.3,
                    gap,
                    wn: 0.5,
                    wt: 0.5,
                },
                Block::Servo {
                    row: 3,
                    alpha: 0.7,
                    bias: -0.2,
                },
                Block::Equality {
                    row: 4,
                    c: 1e-3,
                    compliance: 1e-6,
                },
            ],
            eps_fb: 1e-8,
            eps_v: 1e-6,
            rho_n: 0.0,
            rho_f: 0.0,
            friction_residual: Default::default(),
            center: DVector::zeros(0),
        }
    }

    fn points() -> Vec<(DVector<f64>, DVector<f64>)> {
        vec![
            (
                DVector::from_vec(vec![0.7, -0.1, 0.2]),
                DVector::from_vec(vec![0.4, -0.05, 0.03, 0.2, -0.1]),
            ),
            (
                DVector::from_vec(vec![0.01, 0.3, -0.02]),
                DVector::from_vec(vec![0.2, 0.02, -0.01, -0.3, 0.05]),
            ),
            (
                DVector::from_vec(vec![0.002, 0.3, -0.001]),
                DVector::from_vec(vec![0.5, 0.02, -0.01, -0.3, 0.05]),
            ),
        ]
    }

    fn assert_close(fd: f64, an: f64, what: &str) {
        assert!(
            (fd - an).abs() < 1e-5 * (1.0 + an.abs()),
            "{what}: fd {fd} vs analytic {an}"
        );
    }

    /// The toy with the given friction residual.
    fn toys(gap: f64) -> Vec<Problem> {
        [
            FrictionResidual::NaturalMap,
            FrictionResidual::DissipationWeight,
        ]
        .into_iter()
        .map(|friction_residual| Problem {
            friction_residual,
            ..toy(gap)
        })
        .collect()
    }

    #[test]
    fn jacobian_matches_central_differences() {
        for pb in toys(-1e-3) {
            jacobian_check(&pb);
        }
    }

    /// The natural map's two branches are both exercised by [`points`]: the first point slides
    /// (‖z‖ > μ p_n), the third sticks (‖z‖ ≤ μ p_n, r_f = J_f u exactly).
    #[test]
    fn natural_map_points_cover_sliding_and_sticking() {
        let pb = toy(-1e-3);
        let pts = points();
        let z = |(u, p): &(DVector<f64>, DVector<f64>)| {
            let v = &pb.j * u;
            (Vector2::new(p[1], p[2]) - Vector2::new(v[1], v[2]) / 0.5).norm() - 0.3 * p[0]
        };
        assert!(z(&pts[0]) > 0.0 && z(&pts[2]) < 0.0);
        let r = pb.constraint_residual(&pts[2].0, &pts[2].1);
        let v = &pb.j * &pts[2].0;
        assert_eq!((r[1], r[2]), (v[1], v[2]));
    }

    /// The compliant rows of the continuation (ρ_n, ρ_f > 0) have exact Jacobian and data
    /// partials too.
    #[test]
    fn compliant_rows_match_central_differences() {
        for gap in [-1e-3, 2e-3] {
            for mut pb in toys(gap) {
                pb.rho_n = 0.3;
                pb.rho_f = 0.2;
                jacobian_check(&pb);
                data_check(&pb, gap);
            }
        }
    }

    fn jacobian_check(pb: &Problem) {
        let (nv, nl) = (3, 5);
        for (u, p) in points() {
            let (_, ru, rp) = pb.residual_and_jacobian(&u, &p);
            let d = 1e-7;
            for k in 0..nv {
                let (mut up, mut um) = (u.clone(), u.clone());
                up[k] += d;
                um[k] -= d;
                let fd = (pb.residual(&up, &p) - pb.residual(&um, &p)) / (2.0 * d);
                for i in 0..nl {
                    assert_close(fd[nv + i], ru[(i, k)], &format!("du {i} {k}"));
                }
            }
            for k in 0..nl {
                let (mut pp, mut pm) = (p.clone(), p.clone());
                pp[k] += d;
                pm[k] -= d;
                let fd = (pb.residual(&u, &pp) - pb.residual(&u, &pm)) / (2.0 * d);
                for i in 0..nl {
                    assert_close(fd[nv + i], rp[(i, k)], &format!("dp {i} {k}"));
                }
            }
        }
    }

    /// Rebuild `pb` with its block data replaced by `d`.
    fn with_data(pb: &Problem, d: &DVector<f64>) -> Problem {
        let mut out = pb.clone();
        let mut i = 0;
        for b in &mut out.blocks {
            match b {
                Block::Contact {
                    gap, wn, wt, mu, ..
                } => {
                    (*gap, *wn, *wt, *mu) = (d[i], d[i + 1], d[i + 2], d[i + 3]);
                    i += 4;
                }
                Block::Limit { dist, w, .. } => {
                    (*dist, *w) = (d[i], d[i + 1]);
                    i += 2;
                }
                Block::Servo { alpha, bias, .. } => {
                    (*alpha, *bias) = (d[i], d[i + 1]);
                    i += 2;
                }
                Block::Equality { c, compliance, .. } => {
                    (*c, *compliance) = (d[i], d[i + 1]);
                    i += 2;
                }
            }
        }
        out
    }

    #[test]
    fn data_partials_match_central_differences() {
        for gap in [-1e-3, 2e-3] {
            for pb in toys(gap) {
                data_check(&pb, gap);
            }
        }
    }

    fn data_check(pb: &Problem, gap: f64) {
        {
            for (u, p) in points() {
                let lin = pb.linearize(&u, &p, Friction::Exact);
                let lag = pb.linearize(&u, &p, Friction::Lagged);
                assert_eq!(
                    lin.r_data, lag.r_data,
                    "data partials do not depend on the mode"
                );
                let d0 = pb.data();
                for k in 0..d0.len() {
                    let h = 1e-7 * (1.0 + d0[k].abs());
                    let (mut dp, mut dm) = (d0.clone(), d0.clone());
                    dp[k] += h;
                    dm[k] -= h;
                    let fd = (with_data(pb, &dp).constraint_residual(&u, &p)
                        - with_data(pb, &dm).constraint_residual(&u, &p))
                        / (2.0 * h);
                    for i in 0..pb.nl() {
                        assert_close(
                            fd[i],
                            lin.r_data[(i, k)],
                            &format!("gap {gap} d{k} row {i}"),
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn friction_weight_limits_and_k_derivative() {
        // Sliding on the cone boundary: W = v / P.
        let fw = friction_weight(2.0, 0.1, 0.1, 4.0);
        assert!((fw.w - 20.0).abs() < 1e-12, "{}", fw.w);
        // Sticking well inside the cone at tiny slip: W ≈ 0.
        assert!(friction_weight(1e-6, 0.1, 0.05, 4.0).w < 1e-9);
        // ∂W/∂k against central differences.
        for (v, cap, m, k) in [(0.3, 0.1, 0.08, 2.0), (0.01, 0.05, 0.06, 0.7)] {
            let h = 1e-7;
            let fd = (friction_weight(v, cap, m, k + h).w - friction_weight(v, cap, m, k - h).w)
                / (2.0 * h);
            let an = friction_weight(v, cap, m, k).dk;
            assert!((fd - an).abs() < 1e-6 * (1.0 + an.abs()), "{fd} vs {an}");
        }
    }
}
