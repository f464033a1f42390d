//! MuJoCo's primal Newton and CG solvers with the exact line search, per world with
//! convergence masks: the cpu engine's [`crate::soft_convex::solver::solve`] and
//! [`crate::soft_convex::linesearch::line_search`] (spec §A5; `mj_solPrimal`, `PrimalSearch`)
//! with every data-dependent branch a mask.
//!
//! Each world follows exactly the cpu solver's path: its own start, its own stopping tests,
//! its own line-search phases (one-sided Newton steps, then the bracketed search) and its own
//! evaluation count. A world that has stopped keeps its iterate (each update is a select), so
//! the iteration budget (`iterations`, `ls_iterations`) bounds a fixed, static program, as MJX
//! runs it. With `early_exit` the host reads back, after each iteration and line-search phase
//! tick, whether any world is still running and stops when none is: the same numbers with a
//! shorter program (on a GPU each readback is a synchronization).
//!
//! Sums are taken in the order nalgebra evaluates the cpu solver's expressions (matrix–vector
//! products column by column, `dot` as [`dot_dynamic`], the Hessian's rank-one and cone terms
//! row by row), so f64 iterates agree with the cpu engine to round-off.

use burn_tensor::backend::Backend;

use super::cost::{evaluate, safe_sqrt, Eval, Kind, LineCost, LinePoint, Row};
use crate::batched::carry::{Carry, Mapper};
use crate::batched::dynamics::{cholesky_apply, cholesky_factor_checked, dot_dynamic};
use crate::batched::scalar::{M, S};
use crate::soft_convex::impedance::MINVAL;

/// Solver settings (MuJoCo `<option>`) and the batched program's shape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// Newton (else CG).
    pub newton: bool,
    /// Iteration budget.
    pub iterations: usize,
    /// Tolerance on the scaled improvement, gradient and Newton decrement.
    pub tolerance: f64,
    /// Line-search evaluation budget.
    pub ls_iterations: usize,
    /// Line-search tolerance relative to `tolerance`.
    pub ls_tolerance: f64,
    /// Stop a loop when no world is still in it (a readback per loop turn).
    pub early_exit: bool,
    /// Run every one of the `iterations` (converged worlds masked) even when `early_exit`
    /// stops the line searches: the static program whose tape grows with the budget.
    pub static_iterations: bool,
}

/// One step's problem, per world.
pub struct Problem<'a, B: Backend> {
    /// Mass matrix `(nv × nv)`, both halves.
    pub mass: &'a [Vec<S<B>>],
    /// Its Cholesky factor.
    pub mass_l: &'a [Vec<S<B>>],
    /// Smooth force f_s `(nv)`.
    pub f_s: &'a [S<B>],
    /// Unconstrained acceleration a0 `(nv)`.
    pub a0: &'a [S<B>],
    /// The row slots.
    pub rows: &'a [Row<B>],
    /// Island scale 1/Σ M_ii.
    pub scale: S<B>,
    /// Genesis' signorini resolution (disc radii per iterate, its exit test).
    pub signorini: bool,
}

/// What the solver returns, per world.
pub struct Solution<B: Backend> {
    /// Accelerations `(nv)`.
    pub qacc: Vec<S<B>>,
    /// Row forces `(nrow)`.
    pub force: Vec<S<B>>,
    /// Iterations used.
    pub iterations: S<B>,
    /// Final scaled gradient norm.
    pub gradient: S<B>,
    /// Whether a stopping test was met.
    pub converged: M<B>,
}

/// `Σ a_k b_k` left to right (a column of nalgebra's small `gemv`/`gemm`).
pub fn seq_dot<'x, B: Backend + 'x>(
    a: impl IntoIterator<Item = &'x S<B>>,
    b: impl IntoIterator<Item = &'x S<B>>,
) -> S<B> {
    a.into_iter()
        .zip(b)
        .fold(S::zero(), |acc, (x, y)| acc + x * y)
}

fn dot<B: Backend>(a: &[S<B>], b: &[S<B>]) -> S<B> {
    dot_dynamic(&a.iter().collect::<Vec<_>>(), &b.iter().collect::<Vec<_>>())
}

fn sel_vec<B: Backend>(m: &M<B>, a: &[S<B>], b: &[S<B>]) -> Vec<S<B>> {
    a.iter().zip(b).map(|(x, y)| m.select(x, y)).collect()
}

#[derive(Clone)]
struct Iterate<B: Backend> {
    radius: Vec<S<B>>,
    a: Vec<S<B>>,
    ma: Vec<S<B>>,
    jar: Vec<S<B>>,
    eval: Eval<B>,
    cost: S<B>,
    grad: Vec<S<B>>,
}

impl<B: Backend> Problem<'_, B> {
    fn mat_vec(&self, x: &[S<B>]) -> Vec<S<B>> {
        self.mass.iter().map(|row| seq_dot(row, x)).collect()
    }

    fn iterate(&self, a: Vec<S<B>>, want_hessian: bool) -> Iterate<B> {
        let ma = self.mat_vec(&a);
        let jar: Vec<S<B>> = self
            .rows
            .iter()
            .map(|r| seq_dot(&r.jac, &a) - &r.aref)
            .collect();
        let radius: Vec<S<B>> = self
            .rows
            .iter()
            .map(|r| match r.kind {
                Kind::Disc { normal, mu, .. } => {
                    (&(-&self.rows[normal].d) * &jar[normal]).max_c(0.0) * mu
                }
                _ => S::zero(),
            })
            .collect();
        let eval = evaluate(self.rows, &radius, &jar, want_hessian);
        let resid: Vec<S<B>> = ma.iter().zip(self.f_s).map(|(x, f)| x - f).collect();
        let da: Vec<S<B>> = a.iter().zip(self.a0).map(|(x, y)| x - y).collect();
        let cost = &(dot(&resid, &da) * 0.5) + &eval.cost;
        let grad = resid
            .iter()
            .enumerate()
            .map(|(k, rk)| rk - &seq_dot(self.rows.iter().map(|r| &r.jac[k]), eval.force.iter()))
            .collect();
        Iterate {
            radius,
            a,
            ma,
            jar,
            eval,
            cost,
            grad,
        }
    }

    /// The total cost at `a` (the warm-start comparison).
    pub fn cost(&self, a: &[S<B>]) -> S<B> {
        self.iterate(a.to_vec(), false).cost
    }

    /// Newton Hessian `M + Σ_quadratic D J_iᵀ J_i + Σ J_cᵀ H_c J_c`, lower triangle.
    fn hessian(&self, it: &Iterate<B>) -> Vec<Vec<S<B>>> {
        let nv = self.mass.len();
        let mut h: Vec<Vec<S<B>>> = (0..nv)
            .map(|a| {
                (0..nv)
                    .map(|b| {
                        if b <= a {
                            self.mass[a][b].clone()
                        } else {
                            S::zero()
                        }
                    })
                    .collect()
            })
            .collect();
        for (row, q) in self.rows.iter().zip(&it.eval.quad) {
            if matches!(q, M::C(false)) {
                continue;
            }
            let dq = q.select(&row.d, &S::zero());
            let dj: Vec<S<B>> = row.jac.iter().map(|j| &dq * j).collect();
            for a in 0..nv {
                for b in 0..=a {
                    h[a][b] = &h[a][b] + &(&dj[a] * &row.jac[b]);
                }
            }
        }
        for (first, hc) in &it.eval.cones {
            let dim = hc.len();
            let jc = &self.rows[*first..*first + dim];
            let x: Vec<Vec<S<B>>> = (0..nv)
                .map(|a| {
                    (0..dim)
                        .map(|l| seq_dot(jc.iter().map(|r| &r.jac[a]), hc.iter().map(|hr| &hr[l])))
                        .collect()
                })
                .collect();
            for a in 0..nv {
                for b in 0..=a {
                    let y = seq_dot(&x[a], jc.iter().map(|r| &r.jac[b]));
                    h[a][b] = &h[a][b] + &y;
                }
            }
        }
        h
    }

    fn gnorm(&self, it: &Iterate<B>) -> S<B> {
        &self.scale * &dot(&it.grad, &it.grad).sqrt()
    }

    /// `M⁻¹ g`.
    fn minv(&self, g: &[S<B>]) -> Vec<S<B>> {
        cholesky_apply(self.mass_l, g)
    }

    /// The preconditioned gradient: Newton's `H⁻¹ g` (where the Hessian's Cholesky fails, a
    /// pivot ≤ 0 or NaN through round-off, `M⁻¹ g`, as the cpu solver), CG's `M⁻¹ g`.
    fn precond(&self, it: &Iterate<B>, newton: bool) -> Vec<S<B>> {
        if newton {
            let h = self.hessian(it);
            let (l, ok) = cholesky_factor_checked(&h);
            let x = cholesky_apply(&l, &it.grad);
            // One readback: the fallback's operations only in a step where some world needs it.
            if !ok.not().any_true() {
                x
            } else {
                sel_vec(&ok, &x, &self.minv(&it.grad))
            }
        } else {
            self.minv(&it.grad)
        }
    }
}

/// Per-world selection of a whole iterate.
fn select_iterate<B: Backend>(m: &M<B>, a: Iterate<B>, b: Iterate<B>) -> Iterate<B> {
    if let M::C(c) = m {
        return if *c { a } else { b };
    }
    let sv = |x: &[S<B>], y: &[S<B>]| sel_vec(m, x, y);
    Iterate {
        radius: sv(&a.radius, &b.radius),
        a: sv(&a.a, &b.a),
        ma: sv(&a.ma, &b.ma),
        jar: sv(&a.jar, &b.jar),
        eval: Eval {
            force: sv(&a.eval.force, &b.eval.force),
            quad: a
                .eval
                .quad
                .iter()
                .zip(&b.eval.quad)
                .map(|(x, y)| x.and(m).or(&y.and(&m.not())))
                .collect(),
            cost: m.select(&a.eval.cost, &b.eval.cost),
            cones: Vec::new(),
        },
        cost: m.select(&a.cost, &b.cost),
        grad: sv(&a.grad, &b.grad),
    }
}

/// The solver between two iterations: what one [`advance`] reads and returns. The batched
/// reverse sweep cuts each step's tape here ([`super::pieces`]), so every field that carries a
/// derivative is visited by its [`Carry`] impl.
#[derive(Clone)]
pub struct SolverState<B: Backend> {
    it: Iterate<B>,
    mgrad: Vec<S<B>>,
    search: Vec<S<B>>,
    active: M<B>,
    converged: M<B>,
    iterations: S<B>,
}

impl<B: Backend> Carry<B> for SolverState<B> {
    type On<C: Backend> = SolverState<C>;
    fn map<C: Backend>(&self, f: &mut dyn Mapper<B, C>) -> SolverState<C> {
        let e = &self.it.eval;
        let it = Iterate {
            radius: self.it.radius.map(f),
            a: self.it.a.map(f),
            ma: self.it.ma.map(f),
            jar: self.it.jar.map(f),
            eval: Eval {
                force: e.force.map(f),
                quad: e.quad.map(f),
                cost: f.s(&e.cost),
                cones: e
                    .cones
                    .iter()
                    .map(|(first, h)| (*first, h.map(f)))
                    .collect(),
            },
            cost: f.s(&self.it.cost),
            grad: self.it.grad.map(f),
        };
        SolverState {
            it,
            mgrad: self.mgrad.map(f),
            search: self.search.map(f),
            active: f.m(&self.active),
            converged: f.m(&self.converged),
            iterations: f.s(&self.iterations),
        }
    }
}

/// What one [`advance`] did.
pub enum Advance<B: Backend> {
    /// No world was left to iterate (early exit): the state is unchanged and the loop ends.
    Stopped(SolverState<B>),
    /// The line search found no step in any world still running: masks updated, the loop ends.
    Last(SolverState<B>),
    /// One iteration done.
    Next(SolverState<B>),
}

/// The state before the first iteration from `start` (after the warm-start choice), in the
/// worlds `live` (the others keep their start and count as converged): MuJoCo 3.11's
/// certificate test at the start, the first preconditioned gradient and search direction.
pub fn begin<B: Backend>(
    p: &Problem<'_, B>,
    start: Vec<S<B>>,
    live: &M<B>,
    s: &Settings,
) -> SolverState<B> {
    let newton = s.newton;
    let tol = S::C(s.tolerance);
    let mut it = p.iterate(start, newton);
    // Certificate (MuJoCo 3.11+): the start is already optimal. (Signorini: its own exit test.)
    let mut converged = live.not();
    if !p.signorini {
        let mg = p.minv(&it.grad);
        let dec = (&(&p.scale * 0.5) * &dot(&it.grad, &mg)).max_c(0.0);
        let mut ok = dec.lt(&tol);
        if newton {
            ok = ok.and(&p.gnorm(&it).lt(&tol));
        }
        converged = converged.or(&ok);
    }
    let mgrad = p.precond(&it, newton);
    if newton {
        let dec = &(&p.scale * 0.5) * &dot(&it.grad, &mgrad);
        converged = converged.or(&p.gnorm(&it).lt(&tol).and(&dec.lt(&tol)));
    }
    // The cone Hessians served the preconditioner; no later iteration reads them.
    it.eval.cones.clear();
    let active = converged.not();
    let search: Vec<S<B>> = mgrad.iter().map(|x| -x).collect();
    SolverState {
        it,
        mgrad,
        search,
        active,
        converged,
        iterations: S::zero(),
    }
}

/// One iteration of MuJoCo's primal solver (`mj_solPrimal`'s loop body): the exact line search
/// along the current direction, the new iterate, the stopping tests and the next direction
/// (Newton's, or CG's Hager–Zhang update), each world masked.
pub fn advance<B: Backend>(p: &Problem<'_, B>, st: SolverState<B>, s: &Settings) -> Advance<B> {
    let newton = s.newton;
    let tol = S::C(s.tolerance);
    let exit = s.early_exit && !s.static_iterations;
    let SolverState {
        it,
        mgrad,
        search,
        mut active,
        mut converged,
        mut iterations,
    } = st;
    if exit && !active.any_true() {
        return Advance::Stopped(SolverState {
            it,
            mgrad,
            search,
            active,
            converged,
            iterations,
        });
    }
    let snorm = dot(&search, &search).sqrt();
    active = active.and(&snorm.ge(&S::C(MINVAL)));
    let ms = p.mat_vec(&search);
    let js: Vec<S<B>> = p.rows.iter().map(|r| seq_dot(&r.jac, &search)).collect();
    let resid: Vec<S<B>> = it.ma.iter().zip(p.f_s).map(|(x, f)| x - f).collect();
    let line = LineCost::new(
        p.rows,
        &it.radius,
        &it.jar,
        &js,
        dot(&search, &resid),
        dot(&search, &ms) * 0.5,
    );
    let gtol = &(&snorm * (s.tolerance * s.ls_tolerance)) / &p.scale;
    let alpha = line_search(&line, &gtol, s.ls_iterations, &active, s.early_exit);
    active = active.and(&alpha.eq_c(0.0).not());
    if exit && !active.any_true() {
        return Advance::Last(SolverState {
            it,
            mgrad,
            search,
            active,
            converged,
            iterations,
        });
    }
    let old_cost = it.cost.clone();
    let old_grad = it.grad.clone();
    let old_mgrad = mgrad.clone();
    let a_new: Vec<S<B>> =
        it.a.iter()
            .zip(&search)
            .map(|(a, d)| a + &(&alpha * d))
            .collect();
    let next = p.iterate(a_new, newton);
    let mgrad_next = p.precond(&next, newton);
    let improvement = &p.scale * &(&old_cost - &next.cost);
    let gradient = p.gnorm(&next);
    let decrement = (&(&p.scale * 0.5) * &dot(&next.grad, &mgrad_next)).max_c(0.0);
    let stop = if p.signorini {
        gradient.lt(&tol).and(&decrement.lt(&tol))
    } else {
        let mut stop = improvement
            .gt(&S::zero())
            .and(&improvement.lt(&tol))
            .or(&gradient.lt(&tol));
        if newton {
            stop = stop.or(&decrement.lt(&tol));
        }
        stop
    };
    let it = select_iterate(&active, next, it);
    let mgrad = sel_vec(&active, &mgrad_next, &mgrad);
    iterations = iterations + active.indicator();
    converged = converged.or(&active.and(&stop));
    active = active.and(&stop.not());
    let search = if newton {
        mgrad.iter().map(|x| -x).collect()
    } else {
        // Hager–Zhang β with the previous direction (MuJoCo ≥ 3.10).
        let y: Vec<S<B>> = it.grad.iter().zip(&old_grad).map(|(a, b)| a - b).collect();
        let my: Vec<S<B>> = mgrad.iter().zip(&old_mgrad).map(|(a, b)| a - b).collect();
        let sy = dot(&search, &y);
        let small = sy.lt(&S::C(MINVAL));
        let sy_s = small.select(&S::C(1.0), &sy);
        let hz = &(&dot(&y, &mgrad)
            - &(&(&(&dot(&y, &my) / &sy_s) * 2.0) * &dot(&search, &it.grad)))
            / &sy_s;
        // Norms that carry derivatives: √ with a finite derivative at 0 (a world without
        // rows can have an exactly zero gradient).
        let gn = safe_sqrt(&dot(&it.grad, &it.grad)).0;
        let sn = safe_sqrt(&dot(&search, &search)).0;
        let eta = S::C(-1.0) / &(&sn * &gn.min_c(0.01)).max_c(MINVAL);
        let beta = small.select(&S::zero(), &hz.max(&eta));
        mgrad
            .iter()
            .zip(&search)
            .map(|(g, d)| &(-g) + &(&beta * d))
            .collect()
    };
    Advance::Next(SolverState {
        it,
        mgrad,
        search,
        active,
        converged,
        iterations,
    })
}

/// The solution at the state the iterations left.
pub fn conclude<B: Backend>(p: &Problem<'_, B>, st: SolverState<B>) -> Solution<B> {
    let gradient = p.gnorm(&st.it);
    Solution {
        qacc: st.it.a,
        force: st.it.eval.force,
        iterations: st.iterations,
        gradient,
        converged: st.converged,
    }
}

/// Solve from `start` (after the warm-start choice) in the worlds `live` (the others return
/// their start untouched and count as converged): [`begin`], at most `s.iterations` times
/// [`advance`], [`conclude`].
pub fn solve<B: Backend>(
    p: &Problem<'_, B>,
    start: Vec<S<B>>,
    live: &M<B>,
    s: &Settings,
) -> Solution<B> {
    let mut st = begin(p, start, live, s);
    for _ in 0..s.iterations {
        match advance(p, st, s) {
            Advance::Next(n) => st = n,
            Advance::Stopped(n) | Advance::Last(n) => {
                st = n;
                break;
            }
        }
    }
    conclude(p, st)
}

/// `max(x, y)` per world (x where x ≥ y, as `f64::max` for numbers).
trait MaxS<B: Backend> {
    fn max(&self, y: &S<B>) -> S<B>;
}

impl<B: Backend> MaxS<B> for S<B> {
    fn max(&self, y: &S<B>) -> S<B> {
        self.lt(y).select(y, self)
    }
}

/// MuJoCo's exact line search per world (the cpu engine's `line_search`, its phases and
/// evaluation count per world) in the worlds `live`; returns α (0 where no decrease was found
/// and in worlds not live). `gtol` per world, `max_evals` = ls_iterations.
pub fn line_search<B: Backend>(
    line: &LineCost<'_, B>,
    gtol: &S<B>,
    max_evals: usize,
    live: &M<B>,
    early_exit: bool,
) -> S<B> {
    let max = S::C(max_evals as f64);
    let cost0 = line.cost0();
    let eval = |alpha: &S<B>| line.eval(alpha, &cost0);
    let small = |p: &LinePoint<B>| p.d1.abs().lt(gtol);
    let p0 = eval(&S::zero());
    let mut p1 = eval(&p0.newton());
    let mut evals = S::C(2.0);
    let mut result = S::zero();
    // Phase A: the first Newton step is already good.
    let a_done = live.and(&small(&p1).and(&p1.alpha.eq_c(0.0).or(&p1.dcost.lt(&S::zero()))));
    result = a_done.select(&p1.alpha, &result);
    let mut done = live.not().or(&a_done);
    // Phase B: one-sided Newton steps until the derivative changes sign.
    let dir_pos = p1.d1.lt(&S::zero());
    let mut p2 = p0.clone();
    let mut in_b = done.not();
    for _ in 0..max_evals {
        let signed = dir_pos.select(&p1.d1, &(-&p1.d1));
        in_b = in_b.and(&signed.le(&(-gtol))).and(&evals.lt(&max));
        if early_exit && !in_b.any_true() {
            break;
        }
        p2 = LinePoint::select(&in_b, &p1, &p2);
        let next = eval(&p1.newton());
        p1 = LinePoint::select(&in_b, &next, &p1);
        evals = evals + in_b.indicator();
        let good = in_b.and(&small(&p1)).and(&p1.dcost.lt(&S::zero()));
        result = good.select(&p1.alpha, &result);
        done = done.or(&good);
        in_b = in_b.and(&good.not());
    }
    // Out of evaluations after phase B: the last point.
    let spent = done.not().and(&evals.ge(&max));
    result = spent.select(&p1.alpha, &result);
    done = done.or(&spent);
    // Phase C: the bracketed search between p1 and p2.
    let in_c = done.not();
    if early_exit && !in_c.any_true() {
        return result;
    }
    let mut p1next = eval(&p1.newton());
    evals = evals + in_c.indicator();
    let mut p2next = p1.clone();
    let mut running = in_c.clone();
    // Worlds whose evaluation budget ran out inside the bracketed search.
    let mut exhausted = M::C(false);
    for _ in 0..max_evals {
        let out = running.and(&evals.ge(&max));
        exhausted = exhausted.or(&out);
        running = running.and(&out.not());
        if early_exit && !running.any_true() {
            break;
        }
        let pmid = eval(&(&(&p1.alpha + &p2.alpha) * 0.5));
        evals = evals + running.indicator();
        let cands = [p1next.clone(), p2next.clone(), pmid.clone()];
        // The candidate with |c'| < gtol and the lowest Δcost, the first on ties.
        let mut found = M::C(false);
        let mut best = cands[0].clone();
        for c in &cands {
            let ok = small(c);
            let better = ok.and(&found.not().or(&c.dcost.lt(&best.dcost)));
            best = LinePoint::select(&better, c, &best);
            found = found.or(&ok);
        }
        let hit = running.and(&found);
        result = hit.select(&best.alpha, &result);
        let go = running.and(&found.not());
        let (np1, changed1) = update_bracket(&p1, &cands);
        let (np2, changed2) = update_bracket(&p2, &cands);
        let ch1 = go.and(&changed1);
        let ch2 = go.and(&changed2);
        p1 = LinePoint::select(&ch1, &np1, &p1);
        p2 = LinePoint::select(&ch2, &np2, &p2);
        if !early_exit || ch1.any_true() {
            p1next = LinePoint::select(&ch1, &eval(&p1.newton()), &p1next);
            evals = evals + ch1.indicator();
        }
        if !early_exit || ch2.any_true() {
            p2next = LinePoint::select(&ch2, &eval(&p2.newton()), &p2next);
            evals = evals + ch2.indicator();
        }
        let stuck = go.and(&ch1.or(&ch2).not());
        result = stuck.select(&pmid.alpha, &result);
        running = go.and(&stuck.not());
    }
    // Budget exhausted: the bracket end with the lower negative Δcost, else no step.
    let neg1 = p1.dcost.lt(&S::zero());
    let neg2 = p2.dcost.lt(&S::zero());
    let take2 = neg2.and(&neg1.not().or(&p2.dcost.lt(&p1.dcost)));
    let fallback = take2.select(&p2.alpha, &neg1.select(&p1.alpha, &S::zero()));
    // Every tick evaluates at least once, so a world still running after the last has spent
    // its budget too.
    exhausted.or(&running).select(&fallback, &result)
}

/// Narrow a bracket end towards the minimum (the cpu `update_bracket`, candidates in order):
/// the new end and whether it changed, per world.
fn update_bracket<B: Backend>(p: &LinePoint<B>, cands: &[LinePoint<B>; 3]) -> (LinePoint<B>, M<B>) {
    let mut p = p.clone();
    let mut changed = M::C(false);
    let zero = S::zero();
    for c in cands {
        let lower = p.d1.lt(&zero).and(&c.d1.lt(&zero)).and(&p.d1.lt(&c.d1));
        let upper = p.d1.gt(&zero).and(&c.d1.gt(&zero)).and(&p.d1.gt(&c.d1));
        let take = lower.or(&upper);
        p = LinePoint::select(&take, c, &p);
        changed = changed.or(&take);
    }
    (p, changed)
}
