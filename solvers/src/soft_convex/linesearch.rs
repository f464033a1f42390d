//! MuJoCo's exact line search along a direction of the primal cost (spec §A5 "Exact line
//! search"; `engine_solver.c: PrimalSearch`, `PrimalEval`).
//!
//! The cost along `a + α s` is piecewise quadratic in α (and smooth in the elliptic middle
//! zone), so each evaluation returns `(Δcost, c′, c″)` and the search takes Newton steps on
//! c′, bracketing the minimum and bisecting when a step fails to improve the bracket.

use nalgebra::DVector;

use super::cost::RowCost;

/// One evaluated point: step α, Δcost = cost(α) − cost(0), first and second derivatives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinePoint {
    /// Step length.
    pub alpha: f64,
    /// cost(α) − cost(0).
    pub dcost: f64,
    /// d cost / dα.
    pub d1: f64,
    /// d² cost / dα² (≥ 1e-15).
    pub d2: f64,
}

/// The primal cost restricted to the line `a + α s`, with everything precomputed.
pub struct LineCost<'a> {
    /// Row kinds.
    pub kinds: &'a [RowCost],
    /// Row D (1/R).
    pub d: &'a DVector<f64>,
    /// Row R.
    pub r: &'a DVector<f64>,
    /// jar at α = 0.
    pub jar: &'a DVector<f64>,
    /// J s.
    pub js: &'a DVector<f64>,
    /// Gauss linear coefficient sᵀ(M a − f_s).
    pub q1: f64,
    /// Gauss quadratic coefficient ½ sᵀ M s.
    pub q2: f64,
}

impl LineCost<'_> {
    /// Constraint cost and its first two derivatives at α (absolute, not Δ).
    fn rows(&self, alpha: f64) -> (f64, f64, f64) {
        let (mut c, mut c1, mut c2) = (0.0, 0.0, 0.0);
        let n = self.kinds.len();
        let mut i = 0;
        while i < n {
            let x = self.jar[i] + alpha * self.js[i];
            let (d, js) = (self.d[i], self.js[i]);
            match self.kinds[i] {
                RowCost::Equality => {
                    c += 0.5 * d * x * x;
                    c1 += d * x * js;
                    c2 += d * js * js;
                }
                RowCost::FrictionLoss { eta } => {
                    let t = self.r[i] * eta;
                    if x <= -t {
                        c += -eta * x - 0.5 * self.r[i] * eta * eta;
                        c1 += -eta * js;
                    } else if x >= t {
                        c += eta * x - 0.5 * self.r[i] * eta * eta;
                        c1 += eta * js;
                    } else {
                        c += 0.5 * d * x * x;
                        c1 += d * x * js;
                        c2 += d * js * js;
                    }
                }
                RowCost::Inequality => {
                    if x < 0.0 {
                        c += 0.5 * d * x * x;
                        c1 += d * x * js;
                        c2 += d * js * js;
                    }
                }
                RowCost::Elliptic { dim, mu, mu_j } => {
                    let (u0, v0) = (mu * self.jar[i], mu * js);
                    let (mut uu, mut uv, mut vv) = (0.0, 0.0, 0.0);
                    for j in 1..dim {
                        let (u, v) = (mu_j[j] * self.jar[i + j], mu_j[j] * self.js[i + j]);
                        uu += u * u;
                        uv += u * v;
                        vv += v * v;
                    }
                    let nn = u0 + alpha * v0;
                    let t2 = uu + 2.0 * alpha * uv + alpha * alpha * vv;
                    let t = t2.max(0.0).sqrt();
                    if (t > 0.0 && nn >= mu * t) || (t == 0.0 && nn >= 0.0) {
                        // top zone
                    } else if (t > 0.0 && mu * nn + t <= 0.0) || (t == 0.0 && nn < 0.0) {
                        for j in 0..dim {
                            let (dj, jsj) = (self.d[i + j], self.js[i + j]);
                            let xj = self.jar[i + j] + alpha * jsj;
                            c += 0.5 * dj * xj * xj;
                            c1 += dj * xj * jsj;
                            c2 += dj * jsj * jsj;
                        }
                    } else {
                        let dm = d / (mu * mu * (1.0 + mu * mu));
                        let tp = (uv + alpha * vv) / t;
                        let tpp = vv / t - (uv + alpha * vv) * tp / (t * t);
                        let nmt = nn - mu * t;
                        c += 0.5 * dm * nmt * nmt;
                        c1 += dm * nmt * (v0 - mu * tp);
                        c2 += dm * ((v0 - mu * tp).powi(2) - mu * nmt * tpp);
                    }
                    i += dim;
                    continue;
                }
                RowCost::Disc { dim, radius } => {
                    if radius > 0.0 {
                        let (mut xx, mut xs, mut ss) = (0.0, 0.0, 0.0);
                        for j in 0..dim {
                            let (x, sj) =
                                (self.jar[i + j] + alpha * self.js[i + j], self.js[i + j]);
                            xx += x * x;
                            xs += x * sj;
                            ss += sj * sj;
                        }
                        let t = xx.sqrt();
                        if d * t <= radius {
                            c += 0.5 * d * xx;
                            c1 += d * xs;
                            c2 += d * ss;
                        } else {
                            c += radius * (t - radius / (2.0 * d));
                            c1 += radius * xs / t;
                            c2 += radius * (ss / t - xs * xs / (t * t * t));
                        }
                    }
                    i += dim;
                    continue;
                }
                RowCost::BlockMember => {}
            }
            i += 1;
        }
        (c, c1, c2)
    }

    /// Evaluate Δcost, c′, c″ at α given the constraint cost at 0.
    pub fn eval(&self, alpha: f64, cost0: f64) -> LinePoint {
        let (c, c1, c2) = self.rows(alpha);
        let d2 = 2.0 * self.q2 + c2;
        LinePoint {
            alpha,
            dcost: alpha * self.q1 + alpha * alpha * self.q2 + c - cost0,
            d1: self.q1 + 2.0 * alpha * self.q2 + c1,
            d2: if d2 <= 0.0 { 1e-15 } else { d2 },
        }
    }

    /// The constraint cost at α = 0.
    pub fn cost0(&self) -> f64 {
        self.rows(0.0).0
    }
}

/// Outcome of a line search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchResult {
    /// The step length (0 when no decrease was found).
    pub alpha: f64,
    /// Number of cost evaluations, α = 0 included.
    pub evals: usize,
}

/// Run MuJoCo's exact line search: `gtol` is the derivative tolerance
/// (tolerance·ls_tolerance·‖s‖/scale), `max_evals` = ls_iterations.
pub fn line_search(line: &LineCost<'_>, gtol: f64, max_evals: usize) -> SearchResult {
    let cost0 = line.cost0();
    let mut evals = 0;
    let eval = |alpha: f64, evals: &mut usize| {
        *evals += 1;
        line.eval(alpha, cost0)
    };
    let newton = |p: &LinePoint| p.alpha - p.d1 / p.d2;

    let p0 = eval(0.0, &mut evals);
    let mut p1 = eval(newton(&p0), &mut evals);
    if p1.d1.abs() < gtol && (p1.alpha == 0.0 || p1.dcost < 0.0) {
        return SearchResult {
            alpha: p1.alpha,
            evals,
        };
    }
    // One-sided Newton steps until the derivative changes sign.
    let dir = if p1.d1 < 0.0 { 1.0 } else { -1.0 };
    let mut p2 = p0;
    while p1.d1 * dir <= -gtol && evals < max_evals {
        p2 = p1;
        p1 = eval(newton(&p1), &mut evals);
        if p1.d1.abs() < gtol && p1.dcost < 0.0 {
            return SearchResult {
                alpha: p1.alpha,
                evals,
            };
        }
    }
    if evals >= max_evals {
        return SearchResult {
            alpha: p1.alpha,
            evals,
        };
    }
    // Bracketed search between p1 and p2.
    let mut p1next = eval(newton(&p1), &mut evals);
    let mut p2next = p1;
    while evals < max_evals {
        let pmid = eval(0.5 * (p1.alpha + p2.alpha), &mut evals);
        let candidates = [p1next, p2next, pmid];
        let best = candidates
            .iter()
            .filter(|c| c.d1.abs() < gtol)
            .min_by(|a, b| a.dcost.total_cmp(&b.dcost));
        if let Some(b) = best {
            return SearchResult {
                alpha: b.alpha,
                evals,
            };
        }
        let changed1 = update_bracket(&mut p1, &candidates);
        if changed1 {
            p1next = eval(newton(&p1), &mut evals);
        }
        let changed2 = update_bracket(&mut p2, &candidates);
        if changed2 {
            p2next = eval(newton(&p2), &mut evals);
        }
        if !changed1 && !changed2 {
            return SearchResult {
                alpha: pmid.alpha,
                evals,
            };
        }
    }
    // Budget exhausted: the bracket end with the lower negative Δcost, else no step.
    let best = [p1, p2]
        .into_iter()
        .filter(|p| p.dcost < 0.0)
        .min_by(|a, b| a.dcost.total_cmp(&b.dcost));
    SearchResult {
        alpha: best.map_or(0.0, |p| p.alpha),
        evals,
    }
}

/// Narrow a bracket end towards the minimum: replace `p` by a candidate on the same side of the
/// minimum with a derivative closer to zero. Returns whether `p` changed.
fn update_bracket(p: &mut LinePoint, candidates: &[LinePoint; 3]) -> bool {
    let mut changed = false;
    for c in candidates {
        if (p.d1 < 0.0 && c.d1 < 0.0 && p.d1 < c.d1) || (p.d1 > 0.0 && c.d1 > 0.0 && p.d1 > c.d1) {
            *p = *c;
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Dense 1-D minimization of Δcost by golden-section search on a bracket.
    fn dense_minimum(line: &LineCost<'_>, lo: f64, hi: f64) -> f64 {
        let c0 = line.cost0();
        let f = |a: f64| line.eval(a, c0).dcost;
        let (mut a, mut b) = (lo, hi);
        let g = (5f64.sqrt() - 1.0) / 2.0;
        for _ in 0..200 {
            let (x1, x2) = (b - g * (b - a), a + g * (b - a));
            if f(x1) < f(x2) {
                b = x2;
            } else {
                a = x1;
            }
        }
        0.5 * (a + b)
    }

    #[test]
    fn returns_the_exact_minimizer_on_random_piecewise_costs() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for trial in 0..200 {
            // Rows: 2 hinge rows, 1 friction loss, 1 equality, one elliptic cone of dim 3.
            let kinds = vec![
                RowCost::Inequality,
                RowCost::Inequality,
                RowCost::FrictionLoss {
                    eta: rng.random_range(0.05..1.0),
                },
                RowCost::Equality,
                RowCost::Elliptic {
                    dim: 3,
                    mu: rng.random_range(0.2..1.0),
                    mu_j: [
                        0.0,
                        rng.random_range(0.2..1.0),
                        rng.random_range(0.2..1.0),
                        0.0,
                        0.0,
                        0.0,
                    ],
                },
                RowCost::BlockMember,
                RowCost::BlockMember,
            ];
            let n = kinds.len();
            let mut d = DVector::from_fn(n, |_, _| rng.random_range(0.5..5.0));
            // An elliptic cone's rows satisfy R_j mu_j^2 = R_0 mu^2 (spec A3), which makes the
            // cost continuous across its zones.
            if let RowCost::Elliptic { dim, mu, mu_j } = kinds[4] {
                for j in 1..dim {
                    d[4 + j] = d[4] * mu_j[j] * mu_j[j] / (mu * mu);
                }
            }
            let r = d.map(|x| 1.0 / x);
            let jar = DVector::from_fn(n, |_, _| rng.random_range(-1.0..1.0));
            let js = DVector::from_fn(n, |_, _| rng.random_range(-1.0..1.0));
            let q2 = rng.random_range(0.1..2.0);
            let q1 = rng.random_range(-2.0..2.0);
            let line = LineCost {
                kinds: &kinds,
                d: &d,
                r: &r,
                jar: &jar,
                js: &js,
                q1,
                q2,
            };
            let res = line_search(&line, 1e-12, 100);
            let dense = dense_minimum(&line, -50.0, 50.0);
            let c0 = line.cost0();
            let (fa, fd) = (line.eval(res.alpha, c0).dcost, line.eval(dense, c0).dcost);
            assert!(
                (res.alpha - dense).abs() < 1e-6 * (1.0 + dense.abs()),
                "trial {trial}: alpha {} vs dense {dense} (cost {fa} vs {fd})",
                res.alpha
            );
            assert!(fa <= fd + 1e-12, "trial {trial}");
        }
    }
}
