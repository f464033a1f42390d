//! The residual of one `ncp_fb` step and its Jacobian (module doc, equations (R1)–(R4)).
//!
//! Unknowns `x = (u, p)`: generalized velocity after the step `u` (nv) and the constraint
//! impulses `p` (N s, or N m s for rotational limit rows), one per row of [`Problem::j`]. Every
//! residual row is a velocity (m/s or rad/s).

use nalgebra::{DMatrix, DVector, Vector2};

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

/// Maximal-dissipation weight W (spec §1.3 with §7.2: the unclamped margin g = P − m) and its
/// derivatives `(W, ∂W/∂v, ∂W/∂P, ∂W/∂m)`, with v the smoothed slip speed (m/s), P = μ p_n and
/// m = ‖p_f‖ (N s), k = w_t (m/s per N s):
///
/// `S = √(v² + k² g²)`, `W = k (S − k g) / (v + k P − S)`, clamped to [0, 1e12 k].
pub fn friction_weight(v: f64, cap: f64, m: f64, k: f64) -> (f64, f64, f64, f64) {
    let g = cap - m;
    let s = (v * v + k * k * g * g).sqrt();
    if s <= 0.0 {
        return (0.0, 0.0, 0.0, 0.0);
    }
    // S − k g without cancellation when g ≥ 0.
    let s_minus = if g >= 0.0 {
        v * v / (s + k * g)
    } else {
        s - k * g
    };
    let num = k * s_minus;
    let den = v + k * m - s_minus;
    if den.is_nan() || den <= 0.0 || !num.is_finite() {
        return (0.0, 0.0, 0.0, 0.0);
    }
    let w = num / den;
    if w > W_MAX_RELATIVE * k {
        return (W_MAX_RELATIVE * k, 0.0, 0.0, 0.0);
    }
    let (ds_dv, ds_dg) = (v / s, k * k * g / s);
    let (dn_dv, dn_dg) = (k * ds_dv, k * (ds_dg - k));
    let (dd_dv, dd_dg) = (1.0 - ds_dv, -ds_dg);
    let dw = |dn: f64, dd: f64| (dn - w * dd) / den;
    // g = P − m; D = v + k P − S also depends on P explicitly.
    (
        w,
        dw(dn_dv, dd_dv),
        dw(dn_dg, k + dd_dg),
        dw(-dn_dg, -dd_dg),
    )
}

impl Problem {
    /// Number of constraint rows nλ.
    pub fn nl(&self) -> usize {
        self.j.nrows()
    }

    /// Number of dofs nv.
    pub fn nv(&self) -> usize {
        self.j.ncols()
    }

    /// Project the impulses onto the admissible set (spec §2.5 safeguards): p_n ≥ 0, limits ≥ 0,
    /// ‖p_f‖ ≤ μ p_n (radial scaling).
    pub fn project(&self, p: &mut DVector<f64>) {
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
            }
        }
    }

    /// Residual (R1)–(R4), length nv + nλ: first the dynamics `u − u_free − M⁻¹ Jᵀ p`, then the
    /// constraint rows in row order.
    pub fn residual(&self, u: &DVector<f64>, p: &DVector<f64>) -> DVector<f64> {
        self.evaluate(u, p, false).0
    }

    /// Residual and the constraint rows' Jacobian blocks `(∂r_c/∂u (nλ × nv), ∂r_c/∂p (nλ × nλ))`.
    pub fn residual_and_jacobian(
        &self,
        u: &DVector<f64>,
        p: &DVector<f64>,
    ) -> (DVector<f64>, DMatrix<f64>, DMatrix<f64>) {
        let (r, ju, jp) = self.evaluate(u, p, true);
        (r, ju.unwrap(), jp.unwrap())
    }

    #[allow(clippy::type_complexity)]
    fn evaluate(
        &self,
        u: &DVector<f64>,
        p: &DVector<f64>,
        jac: bool,
    ) -> (DVector<f64>, Option<DMatrix<f64>>, Option<DMatrix<f64>>) {
        let (nv, nl, h) = (self.nv(), self.nl(), self.h);
        let mut r = DVector::zeros(nv + nl);
        r.rows_mut(0, nv)
            .copy_from(&(u - &self.u_free - &self.minv_jt * p));
        let vel = &self.j * u;
        let (mut ru, mut rp) = if jac {
            (Some(DMatrix::zeros(nl, nv)), Some(DMatrix::zeros(nl, nl)))
        } else {
            (None, None)
        };
        // A complementarity row: r = φ_ε(gap + h J u, h w p) / h.
        let comp = |row: usize,
                    gap: f64,
                    w: f64,
                    r: &mut DVector<f64>,
                    ru: &mut Option<DMatrix<f64>>,
                    rp: &mut Option<DMatrix<f64>>| {
            let (phi, da, db) = fb(gap + h * vel[row], h * w * p[row], self.eps_fb);
            r[nv + row] = phi / h;
            if let (Some(ru), Some(rp)) = (ru.as_mut(), rp.as_mut()) {
                ru.row_mut(row).copy_from(&(self.j.row(row) * da));
                rp[(row, row)] = db * w;
            }
        };
        for b in &self.blocks {
            match *b {
                Block::Limit { row, dist, w } => comp(row, dist, w, &mut r, &mut ru, &mut rp),
                Block::Contact {
                    row,
                    friction,
                    mu,
                    gap,
                    wn,
                    wt,
                } => {
                    comp(row, gap, wn, &mut r, &mut ru, &mut rp);
                    if !friction {
                        continue;
                    }
                    let (f1, f2) = (row + 1, row + 2);
                    let pf = Vector2::new(p[f1], p[f2]);
                    let cap = mu * p[row];
                    if cap <= 0.0 {
                        // Skipped friction row (spec §7.8), scaled like the active row below:
                        // r_f = w_t p_f, the limit of σ (J_f u + W p_f) as μ p_n → 0⁺ (W → ∞).
                        r[nv + f1] = wt * pf[0];
                        r[nv + f2] = wt * pf[1];
                        if let Some(rp) = rp.as_mut() {
                            rp[(f1, f1)] = wt;
                            rp[(f2, f2)] = wt;
                        }
                        continue;
                    }
                    let t = Vector2::new(vel[f1], vel[f2]);
                    let v = (t.norm_squared() + self.eps_v * self.eps_v).sqrt();
                    let m = pf.norm();
                    let (w, dw_dv, dw_dcap, dw_dm) = friction_weight(v, cap, m, wt);
                    // (R3) scaled by σ = w_t/(w_t + W) > 0 (same roots): r_f = σ (J_f u + W p_f).
                    // σ keeps the row continuous as μ p_n → 0⁺ (W → ∞, r_f → w_t p_f, the
                    // skipped row) and well scaled for the separated contacts whose smoothed FB
                    // root leaves p_n ≈ ε²/(2 h w_n gap) > 0.
                    let sigma = wt / (wt + w);
                    let raw = t + pf * w;
                    r[nv + f1] = sigma * raw[0];
                    r[nv + f2] = sigma * raw[1];
                    if let (Some(ru), Some(rp)) = (ru.as_mut(), rp.as_mut()) {
                        let jf = self.j.rows(f1, 2).into_owned();
                        // ∂σ/∂x = −σ²/w_t ∂W/∂x;  ∂r_f = σ ∂raw + raw ∂σ.
                        let ds = -sigma * sigma / wt;
                        // ∂raw/∂u = (I + p_f ∂W/∂v tᵀ / v) J_f ; ∂v/∂u = tᵀ J_f / v.
                        let du = (nalgebra::Matrix2::identity() * sigma
                            + (pf * sigma + raw * ds) * t.transpose() * (dw_dv / v))
                            * jf;
                        ru.rows_mut(f1, 2).copy_from(&du);
                        // ∂/∂p_n = μ ∂W/∂P (σ p_f + ds raw).
                        let pn_col = (pf * sigma + raw * ds) * (mu * dw_dcap);
                        rp[(f1, row)] = pn_col[0];
                        rp[(f2, row)] = pn_col[1];
                        // ∂/∂p_f = σ W I + (σ p_f + ds raw) ∂W/∂m p̂_fᵀ.
                        let mut block = nalgebra::Matrix2::identity() * (sigma * w);
                        if m > 0.0 {
                            block += (pf * sigma + raw * ds) * pf.transpose() * (dw_dm / m);
                        }
                        rp.view_mut((f1, f1), (2, 2)).copy_from(&block);
                    }
                }
            }
        }
        (r, ru, rp)
    }

    /// The NCP criterion of DESIGN.md in impulses, in the position-level form this formulation
    /// solves: Σ over contacts of |p_n (c_n/h + μ‖v_t‖) + p_f · v_t| plus Σ over limits
    /// |p c/h|, with `c = gap⁻ + h J u` the linearized gap after the step and v = J u the row
    /// velocities after the step (N s · m/s). Where gap⁻ = 0 (resting, sliding) c/h is the normal
    /// velocity and this is DESIGN.md's criterion; a penetrating contact that the step pushes
    /// out (c = 0, v_n = −gap⁻/h > 0) is complementary here but not at the velocity level.
    pub fn ncp_criterion(&self, u: &DVector<f64>, p: &DVector<f64>) -> f64 {
        let vel = &self.j * u;
        let h = self.h;
        self.blocks
            .iter()
            .map(|b| match *b {
                Block::Limit { row, dist, .. } => (p[row] * (dist / h + vel[row])).abs(),
                Block::Contact {
                    row,
                    friction,
                    mu,
                    gap,
                    ..
                } => {
                    let cn = gap / h + vel[row];
                    if friction {
                        let vt = Vector2::new(vel[row + 1], vel[row + 2]);
                        (p[row] * (cn + mu * vt.norm()) + p[row + 1] * vt[0] + p[row + 2] * vt[1])
                            .abs()
                    } else {
                        (p[row] * cn).abs()
                    }
                }
            })
            .sum()
    }

    /// Largest violation of the linearized position constraints after the step (m or rad):
    /// max over complementarity rows of max(0, −(gap + h J u)).
    pub fn penetration(&self, u: &DVector<f64>) -> f64 {
        let vel = &self.j * u;
        self.blocks
            .iter()
            .map(|b| match *b {
                Block::Limit { row, dist, .. } => -(dist + self.h * vel[row]),
                Block::Contact { row, gap, .. } => -(gap + self.h * vel[row]),
            })
            .fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2-dof toy: one contact with friction acting on a point mass in the plane (n = y, t = x)
    /// plus a dummy third dof for t2.
    fn toy(gap: f64) -> Problem {
        let j = DMatrix::from_row_slice(3, 3, &[0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
        let minv_jt = j.transpose() * 0.5;
        Problem {
            h: 0.01,
            j,
            minv_jt,
            u_free: DVector::from_vec(vec![1.0, -0.2, 0.1]),
            blocks: vec![Block::Contact {
                row: 0,
                friction: true,
                mu: 0.3,
                gap,
                wn: 0.5,
                wt: 0.5,
            }],
            eps_fb: 1e-8,
            eps_v: 1e-6,
        }
    }

    #[test]
    fn jacobian_matches_central_differences() {
        let pb = toy(-1e-3);
        for (u, p) in [
            (
                DVector::from_vec(vec![0.7, -0.1, 0.2]),
                DVector::from_vec(vec![0.4, -0.05, 0.03]),
            ),
            (
                DVector::from_vec(vec![0.01, 0.3, -0.02]),
                DVector::from_vec(vec![0.2, 0.02, -0.01]),
            ),
        ] {
            let (_, ru, rp) = pb.residual_and_jacobian(&u, &p);
            let nv = 3;
            let d = 1e-7;
            for k in 0..3 {
                let (mut up, mut um) = (u.clone(), u.clone());
                up[k] += d;
                um[k] -= d;
                let fd = (pb.residual(&up, &p) - pb.residual(&um, &p)) / (2.0 * d);
                for i in 0..3 {
                    assert!(
                        (fd[nv + i] - ru[(i, k)]).abs() < 1e-5 * (1.0 + ru[(i, k)].abs()),
                        "du {i} {k}: {} vs {}",
                        fd[nv + i],
                        ru[(i, k)]
                    );
                }
                let (mut pp, mut pm) = (p.clone(), p.clone());
                pp[k] += d;
                pm[k] -= d;
                let fd = (pb.residual(&u, &pp) - pb.residual(&u, &pm)) / (2.0 * d);
                for i in 0..3 {
                    assert!(
                        (fd[nv + i] - rp[(i, k)]).abs() < 1e-5 * (1.0 + rp[(i, k)].abs()),
                        "dp {i} {k}: {} vs {}",
                        fd[nv + i],
                        rp[(i, k)]
                    );
                }
            }
        }
    }

    #[test]
    fn friction_weight_limits() {
        // Sliding on the cone boundary: W = v / P.
        let (w, ..) = friction_weight(2.0, 0.1, 0.1, 4.0);
        assert!((w - 20.0).abs() < 1e-12, "{w}");
        // Sticking well inside the cone at tiny slip: W ≈ 0.
        let (w, ..) = friction_weight(1e-6, 0.1, 0.05, 4.0);
        assert!(w < 1e-9, "{w}");
    }
}
