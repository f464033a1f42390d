//! The constraint part of MuJoCo's primal cost per world, row by row: the cpu engine's
//! [`crate::soft_convex::cost::evaluate`] (forces, cost, row states, cone Hessians) and
//! [`crate::soft_convex::linesearch::LineCost`] (cost and its first two derivatives along a
//! line) with every branch a per-world mask (spec `soft_convex_and_signorini.md` §A4, §A5, §B;
//! MuJoCo `mj_constraintUpdate_impl`, `PrimalEval`).
//!
//! Rows are slots: a slot that is not a constraint in some world (a contact candidate out of
//! reach, a limit not reached) has `active` false there and adds exact zeros to every sum, so
//! the sums keep the cpu engine's order and last bit. Each term is written in the cpu code's
//! order of operations. Denominators of branches a world does not take are kept finite
//! (a norm of zero becomes one before it divides), so that reverse mode, which multiplies the
//! unselected branch's derivatives by zero, never meets `0 · ∞`.

use burn_tensor::backend::Backend;

use super::line_packed::Packed;
use crate::batched::scalar::{M, S};

/// The cost a row slot carries (static: the same in every world).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// Huber cost with threshold `R η` (joint friction loss; η in N or N m).
    FrictionLoss {
        /// η.
        eta: f64,
    },
    /// One-sided quadratic `½ D jar²` for `jar < 0` (limits, frictionless contacts, pyramid
    /// edges).
    Inequality,
    /// First row of an elliptic cone of `dim` rows; `mu_j[j]` the friction of row j (index 0
    /// unused). Its regularized μ is the row's [`Row::mu`] (per world).
    Elliptic {
        /// condim.
        dim: usize,
        /// Friction of each friction row.
        mu_j: [f64; 6],
    },
    /// First row of a signorini friction disc of `dim` rows (spec §B): radius `mu · f_n` with
    /// `f_n` the normal force of row `normal` at the solver's current iterate.
    Disc {
        /// Rows in the block.
        dim: usize,
        /// The contact's normal row.
        normal: usize,
        /// Friction coefficient of the block.
        mu: f64,
    },
    /// A row of an elliptic cone or disc handled by its block's first row.
    Member,
}

/// One row slot, per world (MuJoCo's `efc_*` arrays, documentation "Computation > Constraint
/// model"). Units follow the row: a translational contact row's velocity `J v` is m/s and its
/// acceleration m/s², a rotational row's rad/s and rad/s².
#[derive(Debug, Clone)]
pub struct Row<B: Backend> {
    /// Jacobian row `(nv)`: `J v` is the row's velocity (structural zeros are constants). For a
    /// contact normal, positive when the bodies separate (second geom minus first).
    pub jac: Vec<S<B>>,
    /// D = 1/R: the row force per unit of (J a − aref) (kg for a translational row).
    pub d: S<B>,
    /// Regularizer R = (1 − d)/d · diag_approx (spec §A3; 1/kg for a translational row).
    pub r: S<B>,
    /// Reference acceleration `aref = −B J v − K d (pos − margin)` (spec §A2; m/s² or rad/s²).
    pub aref: S<B>,
    /// Whether the row exists in each world.
    pub active: M<B>,
    /// Cost kind.
    pub kind: Kind,
    /// Regularized friction μ0·√(R1/R0) of an elliptic cone's first row (else 0).
    pub mu: S<B>,
}

impl<B: Backend> crate::batched::carry::Carry<B> for Row<B> {
    type On<C: Backend> = Row<C>;
    fn map<C: Backend>(&self, f: &mut dyn crate::batched::carry::Mapper<B, C>) -> Row<C> {
        Row {
            jac: self.jac.iter().map(|x| f.s(x)).collect(),
            d: f.s(&self.d),
            r: f.s(&self.r),
            aref: f.s(&self.aref),
            active: f.m(&self.active),
            kind: self.kind,
            mu: f.s(&self.mu),
        }
    }
}

/// The constraint cost at one `jar`, per world.
#[derive(Clone)]
pub struct Eval<B: Backend> {
    /// Row forces `f = −∂s/∂jar` (nrow).
    pub force: Vec<S<B>>,
    /// Rows in the quadratic state (contributing D to the Hessian).
    pub quad: Vec<M<B>>,
    /// Σ s.
    pub cost: S<B>,
    /// Middle-zone cone (or slipping disc) Hessians `(first row, dim × dim)`, zero in worlds
    /// outside that zone.
    pub cones: Vec<(usize, Vec<Vec<S<B>>>)>,
}

fn zero<B: Backend>() -> S<B> {
    S::C(0.0)
}

/// `√x` for x ≥ 0 with a finite derivative: 0 where x = 0 (the derivative's branch uses √1).
pub fn safe_sqrt<B: Backend>(x: &S<B>) -> (S<B>, M<B>) {
    let pos = x.gt(&zero());
    (pos.select(&pos.select(x, &S::C(1.0)).sqrt(), &zero()), pos)
}

/// The elliptic cone's zones at normal `nn` and tangential norm `t` (regularized μ `mu`):
/// `(top, bottom, middle)`, each within `active`.
fn cone_zones<B: Backend>(
    active: &M<B>,
    mu: &S<B>,
    nn: &S<B>,
    t: &S<B>,
    t_pos: &M<B>,
) -> (M<B>, M<B>, M<B>) {
    let t_zero = t_pos.not();
    let top = t_pos
        .and(&nn.ge(&(mu * t)))
        .or(&t_zero.and(&nn.ge(&zero())));
    let bottom = top.not().and(
        &t_pos
            .and(&(mu * nn + t).le(&zero()))
            .or(&t_zero.and(&nn.lt(&zero()))),
    );
    let middle = top.or(&bottom).not().and(active);
    (top.and(active), bottom.and(active), middle)
}

/// Evaluate forces, cost, states and (with `want_hessian`) cone Hessians at `jar` (nrow);
/// `radius[i]` is the disc radius of a [`Kind::Disc`] row (ignored elsewhere).
pub fn evaluate<B: Backend>(
    rows: &[Row<B>],
    radius: &[S<B>],
    jar: &[S<B>],
    want_hessian: bool,
) -> Eval<B> {
    let n = rows.len();
    let mut force = vec![zero(); n];
    let mut quad = vec![M::C(false); n];
    let mut cost = zero();
    let mut cones = Vec::new();
    let mut i = 0;
    while i < n {
        let row = &rows[i];
        let (d, x) = (&row.d, &jar[i]);
        match row.kind {
            Kind::FrictionLoss { eta } => {
                let t = &row.r * eta;
                let neg = x.le(&-&t).and(&row.active);
                let pos = x.ge(&t).and(&row.active).and(&neg.not());
                let q = neg.or(&pos).not().and(&row.active);
                let half_r_eta2 = &(&row.r * 0.5) * eta * eta;
                force[i] = neg.select(
                    &S::C(eta),
                    &pos.select(&S::C(-eta), &q.select(&(-d * x), &zero())),
                );
                let c = neg.select(
                    &(x * -eta - &half_r_eta2),
                    &pos.select(
                        &(x * eta - &half_r_eta2),
                        &q.select(&(&(d * 0.5) * x * x), &zero()),
                    ),
                );
                cost = cost + c;
                quad[i] = q;
            }
            Kind::Inequality => {
                let q = x.lt(&zero()).and(&row.active);
                force[i] = q.select(&(-d * x), &zero());
                cost = cost + q.select(&(&(d * 0.5) * x * x), &zero());
                quad[i] = q;
            }
            Kind::Elliptic { dim, mu_j } => {
                let mu = &row.mu;
                let nn = mu * x;
                let u: Vec<S<B>> = (1..dim).map(|j| &jar[i + j] * mu_j[j]).collect();
                let t2 = u.iter().fold(zero(), |acc, uj| acc + uj * uj);
                let (t, t_pos) = safe_sqrt(&t2);
                let (_, bottom, middle) = cone_zones(&row.active, mu, &nn, &t, &t_pos);
                for j in 0..dim {
                    let (dj, xj) = (&rows[i + j].d, &jar[i + j]);
                    force[i + j] = bottom.select(&(-dj * xj), &zero());
                    cost = cost + bottom.select(&(&(dj * 0.5) * xj * xj), &zero());
                    quad[i + j] = bottom.clone();
                }
                // Middle zone (t > 0 there; elsewhere t is replaced by 1 before dividing).
                let ts = t_pos.select(&t, &S::C(1.0));
                let mu2 = mu * mu;
                let dm = d / &(&mu2 * &(&mu2 + 1.0));
                let nmt = &nn - &(mu * &ts);
                cost = cost + middle.select(&(&(&dm * 0.5) * &nmt * &nmt), &zero());
                let f0 = &(&(-&dm) * &nmt) * mu;
                force[i] = middle.select(&f0, &force[i]);
                for j in 1..dim {
                    let fj = &(&(-&f0) * &u[j - 1]) * mu_j[j] / &ts;
                    force[i + j] = middle.select(&fj, &force[i + j]);
                }
                if want_hessian {
                    let h = cone_hessian(dim, mu, &mu_j, &nn, &u, &ts, &dm);
                    let h = h
                        .into_iter()
                        .map(|r| r.iter().map(|e| middle.select(e, &zero())).collect())
                        .collect();
                    cones.push((i, h));
                }
                i += dim;
                continue;
            }
            Kind::Disc { dim, .. } => {
                let rho = &radius[i];
                let on = rho.gt(&zero()).and(&row.active);
                let xx = (0..dim).fold(zero(), |acc, j| acc + &jar[i + j] * &jar[i + j]);
                let (t, t_pos) = safe_sqrt(&xx);
                let stick = (d * &t).le(rho).and(&on);
                let slip = stick.not().and(&on);
                // Slip needs d t > ρ > 0, so t > 0 there.
                let ts = t_pos.select(&t, &S::C(1.0));
                let ratio = &(-rho) / &ts;
                for j in 0..dim {
                    let xj = &jar[i + j];
                    force[i + j] = stick.select(&(-d * xj), &slip.select(&(&ratio * xj), &zero()));
                    quad[i + j] = stick.clone();
                }
                let c_stick = &(&(d * 0.5) * &t) * &t;
                let c_slip = rho * &(&ts - &(rho / &(d * 2.0)));
                cost = cost + stick.select(&c_stick, &slip.select(&c_slip, &zero()));
                if want_hessian {
                    let h = (0..dim)
                        .map(|j| {
                            (0..dim)
                                .map(|k| {
                                    let delta = S::C(if j == k { 1.0 } else { 0.0 });
                                    let e = &(rho / &ts)
                                        * &(delta - &(&jar[i + j] * &jar[i + k]) / &(&ts * &ts));
                                    slip.select(&e, &zero())
                                })
                                .collect()
                        })
                        .collect();
                    cones.push((i, h));
                }
                i += dim;
                continue;
            }
            Kind::Member => {}
        }
        i += 1;
    }
    Eval {
        force,
        quad,
        cost,
        cones,
    }
}

/// Middle-zone cone Hessian `H_c = Dm·G·A·G` as the cpu engine's `cone_hessian`: G = diag(μ,
/// μ_1 .. μ_{dim−1}), `A = [[1, −μUᵀ/T], [−μU/T, (μN/T³)UUᵀ + (μ² − μN/T) I]]`.
fn cone_hessian<B: Backend>(
    dim: usize,
    mu: &S<B>,
    mu_j: &[f64; 6],
    nn: &S<B>,
    u: &[S<B>],
    t: &S<B>,
    dm: &S<B>,
) -> Vec<Vec<S<B>>> {
    let mut a = vec![vec![zero::<B>(); dim]; dim];
    a[0][0] = S::C(1.0);
    let t3 = &(t * t) * t;
    let c = &(mu * nn) / &t3;
    let diag = &(mu * mu) - &(&(mu * nn) / t);
    for j in 1..dim {
        a[0][j] = &(-mu * &u[j - 1]) / t;
        a[j][0] = a[0][j].clone();
        for k in 1..dim {
            a[j][k] = &(&c * &u[j - 1]) * &u[k - 1];
        }
        a[j][j] = &a[j][j] + &diag;
    }
    let g = |j: usize| if j == 0 { mu.clone() } else { S::C(mu_j[j]) };
    (0..dim)
        .map(|j| {
            (0..dim)
                .map(|k| &(&(dm * &g(j)) * &a[j][k]) * &g(k))
                .collect()
        })
        .collect()
}

/// One point of a line search, per world: step α, Δcost = cost(α) − cost(0), c′, c″.
#[derive(Debug, Clone)]
pub struct LinePoint<B: Backend> {
    /// α.
    pub alpha: S<B>,
    /// cost(α) − cost(0).
    pub dcost: S<B>,
    /// d cost / dα.
    pub d1: S<B>,
    /// d² cost / dα² (1e-15 where not positive).
    pub d2: S<B>,
}

impl<B: Backend> LinePoint<B> {
    /// Per world: `a` where `m`, else `b`.
    pub fn select(m: &M<B>, a: &Self, b: &Self) -> Self {
        Self {
            alpha: m.select(&a.alpha, &b.alpha),
            dcost: m.select(&a.dcost, &b.dcost),
            d1: m.select(&a.d1, &b.d1),
            d2: m.select(&a.d2, &b.d2),
        }
    }

    /// The Newton step on c′ from this point: `α − c′/c″`.
    pub fn newton(&self) -> S<B> {
        &self.alpha - &(&self.d1 / &self.d2)
    }
}

/// The primal cost along `a + α s`, per world.
pub struct LineCost<'a, B: Backend> {
    /// The rows.
    pub rows: &'a [Row<B>],
    /// Disc radii of this iterate (signorini).
    pub radius: &'a [S<B>],
    /// jar at α = 0.
    pub jar: &'a [S<B>],
    /// J s.
    pub js: &'a [S<B>],
    /// Gauss linear coefficient sᵀ(M a − f_s).
    pub q1: S<B>,
    /// Gauss quadratic coefficient ½ sᵀ M s.
    pub q2: S<B>,
    /// The packable blocks stacked ([`super::line_packed`]); `None`: every row scalar by
    /// scalar.
    pub packed: Option<Packed<B>>,
}

impl<'a, B: Backend> LineCost<'a, B> {
    /// The line cost with its one-sided rows, elliptic cones and discs stacked for evaluation
    /// ([`super::line_packed`]; agrees with the scalar path to round-off).
    pub fn new(
        rows: &'a [Row<B>],
        radius: &'a [S<B>],
        jar: &'a [S<B>],
        js: &'a [S<B>],
        q1: S<B>,
        q2: S<B>,
    ) -> Self {
        Self {
            packed: Packed::new(rows, radius, jar, js),
            rows,
            radius,
            jar,
            js,
            q1,
            q2,
        }
    }

    /// A friction-loss row's Huber cost and its first two derivatives at α.
    fn friction_loss(&self, i: usize, eta: f64, alpha: &S<B>) -> [S<B>; 3] {
        let row = &self.rows[i];
        let (d, js) = (&row.d, &self.js[i]);
        let x = &self.jar[i] + &(alpha * js);
        let t = &row.r * eta;
        let neg = x.le(&-&t).and(&row.active);
        let pos = x.ge(&t).and(&row.active).and(&neg.not());
        let q = neg.or(&pos).not().and(&row.active);
        let half_r_eta2 = &(&row.r * 0.5) * eta * eta;
        let c = neg.select(
            &(&x * -eta - &half_r_eta2),
            &pos.select(
                &(&x * eta - &half_r_eta2),
                &q.select(&(&(d * 0.5) * &x * &x), &zero()),
            ),
        );
        let c1 = neg.select(
            &(js * -eta),
            &pos.select(&(js * eta), &q.select(&(&(d * &x) * js), &zero())),
        );
        let c2 = q.select(&(&(d * js) * js), &zero());
        [c, c1, c2]
    }

    /// Constraint cost and its first two derivatives at α (the cpu `LineCost::rows`), summed
    /// in the rows' order: with [`Self::packed`], the packed rows' terms from its tensors and
    /// the others' scalar by scalar.
    fn rows(&self, alpha: &S<B>) -> (S<B>, S<B>, S<B>) {
        if let Some(p) = &self.packed {
            let scalar = p
                .scalar_rows()
                .iter()
                .map(|&i| match self.rows[i].kind {
                    Kind::FrictionLoss { eta } => self.friction_loss(i, eta, alpha),
                    _ => unreachable!("only friction-loss rows are left scalar"),
                })
                .collect();
            return p.total(p.terms(alpha), scalar);
        }
        let (mut c, mut c1, mut c2) = (zero::<B>(), zero::<B>(), zero::<B>());
        let n = self.rows.len();
        let at = |i: usize| &self.jar[i] + &(alpha * &self.js[i]);
        let mut i = 0;
        while i < n {
            let row = &self.rows[i];
            let (d, js) = (&row.d, &self.js[i]);
            match row.kind {
                Kind::FrictionLoss { eta } => {
                    let [tc, tc1, tc2] = self.friction_loss(i, eta, alpha);
                    c = c + tc;
                    c1 = c1 + tc1;
                    c2 = c2 + tc2;
                }
                Kind::Inequality => {
                    let x = at(i);
                    let q = x.lt(&zero()).and(&row.active);
                    c = c + q.select(&(&(d * 0.5) * &x * &x), &zero());
                    c1 = c1 + q.select(&(&(d * &x) * js), &zero());
                    c2 = c2 + q.select(&(&(d * js) * js), &zero());
                }
                Kind::Elliptic { dim, mu_j } => {
                    let mu = &row.mu;
                    let (u0, v0) = (mu * &self.jar[i], mu * js);
                    let (mut uu, mut uv, mut vv) = (zero::<B>(), zero::<B>(), zero::<B>());
                    for j in 1..dim {
                        let u = &self.jar[i + j] * mu_j[j];
                        let v = &self.js[i + j] * mu_j[j];
                        uu = uu + &u * &u;
                        uv = uv + &u * &v;
                        vv = vv + &v * &v;
                    }
                    let nn = &u0 + &(alpha * &v0);
                    let t2 = &(&uu + &(&(alpha * 2.0) * &uv)) + &(&(alpha * alpha) * &vv);
                    let (t, t_pos) = safe_sqrt(&t2.max_c(0.0));
                    let (_, bottom, middle) = cone_zones(&row.active, mu, &nn, &t, &t_pos);
                    for j in 0..dim {
                        let (dj, jsj) = (&self.rows[i + j].d, &self.js[i + j]);
                        let xj = at(i + j);
                        c = c + bottom.select(&(&(dj * 0.5) * &xj * &xj), &zero());
                        c1 = c1 + bottom.select(&(&(dj * &xj) * jsj), &zero());
                        c2 = c2 + bottom.select(&(&(dj * jsj) * jsj), &zero());
                    }
                    let ts = t_pos.select(&t, &S::C(1.0));
                    let mu2 = mu * mu;
                    let dm = d / &(&mu2 * &(&mu2 + 1.0));
                    let uva = &uv + &(alpha * &vv);
                    let tp = &uva / &ts;
                    let tpp = &(&vv / &ts) - &(&(&uva * &tp) / &(&ts * &ts));
                    let nmt = &nn - &(mu * &ts);
                    let slope = &v0 - &(mu * &tp);
                    c = c + middle.select(&(&(&dm * 0.5) * &nmt * &nmt), &zero());
                    c1 = c1 + middle.select(&(&(&dm * &nmt) * &slope), &zero());
                    c2 = c2
                        + middle.select(
                            &(&dm * &(&(&slope * &slope) - &(&(mu * &nmt) * &tpp))),
                            &zero(),
                        );
                    i += dim;
                    continue;
                }
                Kind::Disc { dim, .. } => {
                    let rho = &self.radius[i];
                    let on = rho.gt(&zero()).and(&row.active);
                    let (mut xx, mut xs, mut ss) = (zero::<B>(), zero::<B>(), zero::<B>());
                    for j in 0..dim {
                        let (x, sj) = (at(i + j), &self.js[i + j]);
                        xx = xx + &x * &x;
                        xs = xs + &x * sj;
                        ss = ss + sj * sj;
                    }
                    let (t, t_pos) = safe_sqrt(&xx);
                    let stick = (d * &t).le(rho).and(&on);
                    let slip = stick.not().and(&on);
                    let ts = t_pos.select(&t, &S::C(1.0));
                    c = c + stick.select(
                        &(&(d * 0.5) * &xx),
                        &slip.select(&(rho * &(&ts - &(rho / &(d * 2.0)))), &zero()),
                    );
                    c1 =
                        c1 + stick.select(&(d * &xs), &slip.select(&(&(rho * &xs) / &ts), &zero()));
                    let t3 = &(&ts * &ts) * &ts;
                    c2 = c2
                        + stick.select(
                            &(d * &ss),
                            &slip.select(&(rho * &(&(&ss / &ts) - &(&(&xs * &xs) / &t3))), &zero()),
                        );
                    i += dim;
                    continue;
                }
                Kind::Member => {}
            }
            i += 1;
        }
        (c, c1, c2)
    }

    /// Δcost, c′, c″ at α given the constraint cost at 0 (the cpu `LineCost::eval`).
    pub fn eval(&self, alpha: &S<B>, cost0: &S<B>) -> LinePoint<B> {
        let (c, c1, c2) = self.rows(alpha);
        let d2 = &(&self.q2 * 2.0) + &c2;
        let dcost = &(&(&(alpha * &self.q1) + &(&(alpha * alpha) * &self.q2)) + &c) - cost0;
        let d1 = &(&self.q1 + &(&(alpha * 2.0) * &self.q2)) + &c1;
        LinePoint {
            alpha: alpha.clone(),
            dcost,
            d1,
            d2: d2.le(&zero()).select(&S::C(1e-15), &d2),
        }
    }

    /// The constraint cost at α = 0.
    pub fn cost0(&self) -> S<B> {
        self.rows(&zero()).0
    }
}
