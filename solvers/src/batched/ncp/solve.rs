//! The batched `ncp_fb` solve: the cpu engine's [`crate::ncp_fb::solve::solve`] per world
//! (Newton on the Schur complement with the exact friction Jacobian, the full-step pass with a
//! periodic line search, the non-monotone pass, the Tikhonov continuation, the polish, the best
//! iterate and the stopping test; module doc of [`crate::ncp_fb`], "Solve" and
//! "Globalization"), with every decision taken per world by masks.
//!
//! Every world runs the same iteration at the same time; a world that has stopped (converged,
//! failed, out of stages) keeps its result while the others go on, and a phase that no world
//! needs (another line-search trial, the stalled worlds' lagged direction, a continuation
//! stage, the second pass, the polish) is skipped on the host after reading one mask back, as
//! the batched soft solvers skip idle iterations. The cost of a batch is that of its slowest
//! world. The Newton direction is the packed dense solve ([`super::dense`]) or, with
//! `linear_solver: pcr`, preconditioned conjugate residuals on the lagged symmetric system
//! ([`super::pcr`]), as the cpu engine's.

use burn_tensor::backend::Backend;

use super::dense::{finite, like, lu_solve, lu_solve_packed, pack};
use super::pcr::{pcr, SchurSystem};
use super::residual::{max, Problem};
use crate::batched::scalar::{M, S};
use crate::ncp_fb::residual::Friction;
use crate::ncp_fb::solve::LinearSolver;
use crate::ncp_fb::solve::{
    Settings, FRICTION_RHO_RATIO, MAX_STAGES, RHO_FACTOR, RHO_MAX, RHO_MIN, RHO_START,
    STAGE_TOLERANCE, STALL_STEP,
};

/// The returned iterate per world (the batched [`crate::ncp_fb::solve::Solution`]).
#[derive(Debug, Clone)]
pub struct Solution<B: Backend> {
    /// Generalized velocity after the step (nv).
    pub u: Vec<S<B>>,
    /// Constraint impulses (nλ, N s); 0 on inactive slots.
    pub p: Vec<S<B>>,
    /// Newton iterations run (an integer per world).
    pub iterations: S<B>,
    /// The iteration (1-based) whose iterate is returned.
    pub best_iterate: S<B>,
    /// Max-norm of the constraint residual at the returned iterate (m/s).
    pub residual: S<B>,
    /// NCP criterion at the returned iterate (J).
    pub ncp: S<B>,
    /// Whether the stopping test was met.
    pub converged: M<B>,
    /// Whether the first iteration could not produce an iterate (no finite Newton direction,
    /// or no finite trial point): the cpu engine's `failure`; `p` is then the start.
    pub failed: M<B>,
}

impl<B: Backend> Solution<B> {
    /// `a` where `m`, else `b`, field by field.
    pub fn select(m: &M<B>, a: &Self, b: &Self) -> Self {
        let v = |x: &[S<B>], y: &[S<B>]| -> Vec<S<B>> {
            x.iter().zip(y).map(|(x, y)| m.select(x, y)).collect()
        };
        let b_ = |x: &M<B>, y: &M<B>| m.and(x).or(&m.not().and(y));
        Solution {
            u: v(&a.u, &b.u),
            p: v(&a.p, &b.p),
            iterations: m.select(&a.iterations, &b.iterations),
            best_iterate: m.select(&a.best_iterate, &b.best_iterate),
            residual: m.select(&a.residual, &b.residual),
            ncp: m.select(&a.ncp, &b.ncp),
            converged: b_(&a.converged, &b.converged),
            failed: b_(&a.failed, &b.failed),
        }
    }
}

/// What a solve shares across its passes and stages: the Delassus matrix and the Newton
/// regularization (both fixed within a step).
struct Fixed<B: Backend> {
    delassus: Vec<Vec<S<B>>>,
    reg: Vec<S<B>>,
    /// The Delassus matrix packed `(worlds, nλ, nλ)` with a `(worlds)` tensor of the batch's
    /// shape ([`super::dense`], "Packed"); `None` where every entry is a host constant (then
    /// the Newton systems are solved unrolled).
    packed: Option<(burn_tensor::Tensor<B, 3>, burn_tensor::Tensor<B, 1>)>,
}

/// Solve one step's problem per world from p = 0 ([`crate::ncp_fb::solve::solve`]): the
/// passes, then, where the returned impulses leave the cone (the natural map's iterates are not
/// projected), their projection onto p_n ≥ 0, ‖p_f‖ ≤ μ p_n with the residual and NCP
/// criterion of the projected iterate.
pub fn solve<B: Backend>(pb: &Problem<B>, s: &Settings) -> Solution<B> {
    let with_packed = pb.clone().packed();
    let pb = &with_packed;
    let delassus = pb.delassus();
    let reg = pb.regularization(s.regularization, s.friction_regularization, &delassus);
    let packed = like(delassus.iter().flatten()).map(|l| (pack(&delassus, &l), l));
    let fixed = Fixed {
        delassus,
        reg,
        packed,
    };
    let mut sol = passes(pb, s, &fixed);
    let project = sol
        .failed
        .not()
        .and(&pb.cone_violation(&sol.p).gt(&S::C(0.0)));
    if project.any_true() {
        let p = project_cone(pb, &sol.p);
        let u = pb.velocity(&p);
        let r = pb.residual(&u, &p);
        let projected = Solution {
            residual: Problem::amax(&r),
            ncp: pb.ncp_criterion(&u, &p, false),
            u,
            p,
            ..sol.clone()
        };
        sol = Solution::select(&project, &projected, &sol);
    }
    sol
}

/// The impulses projected onto the admissible set: p_n ≥ 0, limits ≥ 0, ‖p_f‖ ≤ μ p_n by
/// radial scaling ([`crate::ncp_fb::residual::Problem::project_cone`]).
pub fn project_cone<B: Backend>(pb: &Problem<B>, p: &[S<B>]) -> Vec<S<B>> {
    use super::residual::Block;
    let mut p = p.to_vec();
    for b in &pb.blocks {
        match b {
            Block::Contact {
                row, friction, mu, ..
            } => {
                let row = *row;
                p[row] = p[row].max_c(0.0);
                if *friction {
                    let cap = mu * &p[row];
                    let (a, c) = (&p[row + 1], &p[row + 2]);
                    let m = (&(a * a) + &(c * c)).sqrt();
                    let out = m.gt(&cap);
                    let pos = m.gt(&S::C(0.0));
                    let scale = pos.select(&(&cap / &pos.select(&m, &S::C(1.0))), &S::C(0.0));
                    for k in [row + 1, row + 2] {
                        p[k] = out.select(&(&p[k] * &scale), &p[k]);
                    }
                }
            }
            Block::Limit { row, .. } => p[*row] = p[*row].max_c(0.0),
            Block::Servo { .. } => {}
        }
    }
    p
}

/// Worlds whose problem has no row at all (only inactive contact slots): the cpu engine's
/// `nl == 0`, solved with 0 iterations.
fn empty<B: Backend>(pb: &Problem<B>) -> M<B> {
    use super::residual::Block;
    let mut e = M::C(true);
    for b in &pb.blocks {
        e = match b {
            Block::Contact { active, .. } => e.and(&active.not()),
            _ => M::C(false),
        };
    }
    e
}

/// The passes of [`solve`] (the cpu engine's `solve_passes`).
fn passes<B: Backend>(pb: &Problem<B>, s: &Settings, fixed: &Fixed<B>) -> Solution<B> {
    let all = M::C(true);
    if s.full_step_period == 0 {
        return pass(pb, s, fixed, &all);
    }
    let a = pass(pb, s, fixed, &all);
    let again = a.converged.not().and(&a.failed.not());
    if !again.any_true() {
        return a;
    }
    let searched = Settings {
        full_step_period: 0,
        ..*s
    };
    let b = pass(pb, &searched, fixed, &again);
    let iterations = &a.iterations + &b.iterations;
    let take_b = again
        .and(&b.failed.not())
        .and(&b.converged.or(&b.residual.lt(&a.residual)));
    let mut best = Solution::select(&take_b, &b, &a);
    let mut iterations = again.select(&iterations, &a.iterations);
    let polish_m = again.and(&best.converged.not()).and(&best.failed.not());
    if polish_m.any_true() {
        let polish = Settings {
            full_step_period: usize::MAX,
            ..*s
        };
        let c = from(pb, &polish, fixed, &best.p, &S::C(s.tolerance), &polish_m);
        iterations = polish_m.select(&(&iterations + &c.iterations), &iterations);
        let take_c = polish_m
            .and(&c.failed.not())
            .and(&c.converged.or(&c.residual.lt(&best.residual)));
        best = Solution::select(&take_c, &c, &best);
    }
    best.iterations = again.select(&iterations, &a.iterations);
    best
}

/// One pass (the cpu engine's `solve_pass`) in the worlds `part`: Newton from p = 0, then the
/// Tikhonov continuation where unconverged.
fn pass<B: Backend>(pb: &Problem<B>, s: &Settings, fixed: &Fixed<B>, part: &M<B>) -> Solution<B> {
    let zeros = vec![S::zero(); pb.nl()];
    let first = from(pb, s, fixed, &zeros, &S::C(s.tolerance), part);
    let mut going = part.and(&first.converged.not()).and(&first.failed.not());
    if !going.any_true() {
        return first;
    }
    let mut iterations = first.iterations.clone();
    // Per-world continuation state: ρ, the reduction factor, the start impulses, ρ of the last
    // converged stage (where `have_prev`), the rigid stage's result (where `have_last`).
    let mut rho = S::C(RHO_START);
    let mut factor = S::C(RHO_FACTOR);
    let mut p0 = zeros.clone();
    let mut prev = S::C(0.0);
    let mut have_prev = M::C(false);
    let mut last = first.clone();
    let mut have_last = M::C(false);
    for _ in 0..MAX_STAGES {
        if !going.any_true() {
            break;
        }
        let stage = Problem {
            rho_n: rho.clone(),
            rho_f: &rho * FRICTION_RHO_RATIO,
            ..pb.clone()
        };
        let rigid = rho.eq_c(0.0);
        let tol = rigid.select(
            &S::C(s.tolerance),
            &(&rho * STAGE_TOLERANCE).max_c(s.tolerance),
        );
        let sol = from(&stage, s, fixed, &p0, &tol, &going);
        iterations = going.select(&(&iterations + &sol.iterations), &iterations);
        let rigid_now = going.and(&rigid);
        last = Solution::select(&rigid_now, &sol, &last);
        have_last = have_last.or(&rigid_now);
        let conv = going.and(&sol.converged);
        let fail = going.and(&sol.converged.not());
        // Converged: the rigid stage ends the loop; otherwise step ρ down.
        let next_down = {
            let r = &rho / &factor;
            r.lt(&S::C(RHO_MIN)).select(&S::C(0.0), &r)
        };
        let conv_soft = conv.and(&rigid.not());
        // Failed without a converged stage yet: more compliance from p = 0 (up to RHO_MAX).
        let fail_first = fail.and(&have_prev.not());
        let give_up_first = fail_first.and(&rho.ge(&S::C(RHO_MAX)));
        let raise = fail_first.and(&give_up_first.not());
        // Failed after a converged stage: a gentler factor from the last converged ρ.
        let fail_later = fail.and(&have_prev);
        let new_factor = factor.sqrt();
        let give_up_later = fail_later.and(&new_factor.lt(&S::C(1.2)));
        let retry = fail_later.and(&give_up_later.not());
        let from_prev = {
            let r = &prev / &new_factor;
            r.lt(&S::C(RHO_MIN)).select(&S::C(0.0), &r)
        };
        p0 = p0
            .iter()
            .zip(&sol.p)
            .map(|(a, b)| conv_soft.select(b, a))
            .collect();
        prev = conv_soft.select(&rho, &prev);
        have_prev = have_prev.or(&conv_soft);
        factor = fail_later.select(&new_factor, &factor);
        rho = conv_soft.select(
            &next_down,
            &raise.select(&(&rho * RHO_FACTOR), &retry.select(&from_prev, &rho)),
        );
        let stop = conv.and(&rigid).or(&give_up_first).or(&give_up_later);
        going = going.and(&stop.not());
    }
    // Out of stages or of factor: finish with the rigid problem from the last converged stage.
    let finish = part
        .and(&first.converged.not())
        .and(&first.failed.not())
        .and(&have_last.not())
        .and(&have_prev);
    if finish.any_true() {
        let sol = from(pb, s, fixed, &p0, &S::C(s.tolerance), &finish);
        iterations = finish.select(&(&iterations + &sol.iterations), &iterations);
        last = Solution::select(&finish, &sol, &last);
        have_last = have_last.or(&finish);
    }
    let continued = part.and(&first.converged.not()).and(&first.failed.not());
    let take_last = continued
        .and(&have_last)
        .and(&last.failed.not())
        .and(&last.converged.or(&last.residual.lt(&first.residual)));
    let mut best = Solution::select(&take_last, &last, &first);
    best.iterations = continued.select(&iterations, &first.iterations);
    best
}

/// The stopping test (the cpu engine's `stop_test`) with a per-world residual tolerance `tol`.
fn stop_test<B: Backend>(
    pb: &Problem<B>,
    s: &Settings,
    tol: &S<B>,
    u: &[S<B>],
    p: &[S<B>],
    r: &[S<B>],
) -> M<B> {
    let small = Problem::amax(r).le(tol);
    let ncp_ok = pb
        .ncp_criterion(u, p, true)
        .le(&S::C(s.ncp_tolerance))
        .and(&pb.penetration(u, p).le(&(tol * pb.h)))
        .and(&pb.equation_residual(r).le(tol))
        .and(&pb.cone_violation(p).le(tol));
    small.or(&ncp_ok)
}

/// Newton from the impulses `p0` in the worlds `part` (the cpu engine's `solve_from`), with
/// the per-world residual tolerance `tol`. Worlds outside `part` return their start unchanged
/// (their fields are not used by the callers).
fn from<B: Backend>(
    pb: &Problem<B>,
    s: &Settings,
    fixed: &Fixed<B>,
    p0: &[S<B>],
    tol: &S<B>,
    part: &M<B>,
) -> Solution<B> {
    let mut p = p0.to_vec();
    let mut u = pb.velocity(&p);
    let none = empty(pb);
    let zero = S::C(0.0);
    // Worlds without rows: converged with 0 iterations.
    let mut result = Solution {
        u: u.clone(),
        p: p.clone(),
        iterations: zero.clone(),
        best_iterate: zero.clone(),
        residual: zero.clone(),
        ncp: zero.clone(),
        converged: none.clone(),
        failed: M::C(false),
    };
    let mut running = part.and(&none.not());
    let mut done = none.clone();
    let mut best = result.clone();
    let mut have_best = M::C(false);
    let mut iterations = zero.clone();
    let mut failed = M::C(false);
    let mut history: Vec<S<B>> = Vec::new();
    let mem = s.nonmonotone_memory.max(1);
    let direction = |u: &[S<B>], p: &[S<B>], mode: Friction, part: &M<B>| {
        if s.linear_solver == LinearSolver::Pcr {
            let sys = SchurSystem::new(
                pb,
                (u, p),
                &fixed.reg,
                &fixed.delassus,
                s.preconditioner,
                fixed.packed.as_ref().map(|(_, l)| l),
            );
            let (dp, ok) = pcr(&sys, part, s.pcr_iterations, s.pcr_tolerance, 0.0);
            return (dp, ok, sys.theta0);
        }
        let lin = pb.linearize(u, p, mode);
        let rhs: Vec<S<B>> = lin.r.iter().map(|x| -x).collect();
        let (dp, ok) = match &fixed.packed {
            Some((d, like)) => {
                lu_solve_packed(pb.newton_matrix_packed(&lin, d, &fixed.reg, like), &rhs)
            }
            None => lu_solve(&pb.newton_matrix(&lin, &fixed.delassus, &fixed.reg), &rhs),
        };
        (dp, ok, Problem::norm_squared(&lin.r))
    };
    for k in 0..s.iterations {
        if !running.any_true() {
            break;
        }
        let fp = s.full_step_period;
        let full_step = fp > 0 && k % fp != fp - 1;
        let (dp, ok, theta0) = direction(&u, &p, Friction::Exact, &running);
        // No finite direction: the world stops (a failure if this was its first iteration).
        let no_dir = running.and(&ok.not());
        if k == 0 {
            failed = failed.or(&no_dir);
        }
        running = running.and(&ok);
        let theta_ref = if full_step {
            S::C(f64::INFINITY)
        } else {
            history.iter().fold(theta0.clone(), |m, h| max(&m, h))
        };
        // Backtracking on ‖r‖² in the worlds `mask`: (last step length, best trial's merit,
        // its impulses, whether it has one).
        let search = |dp: &[S<B>], mask: &M<B>| {
            let mut alpha = S::C(1.0);
            let mut searching = mask.clone();
            let mut th_best = S::C(f64::INFINITY);
            let mut p_best = p.clone();
            let mut have = M::C(false);
            for _ in 0..=s.ls_iterations {
                if !searching.any_true() {
                    break;
                }
                let pt: Vec<S<B>> = p.iter().zip(dp).map(|(x, d)| x + &(d * &alpha)).collect();
                let th = Problem::norm_squared(&pb.residual(&pb.velocity(&pt), &pt));
                let fin = finite(&th);
                let take = searching.and(&fin).and(&have.not().or(&th.lt(&th_best)));
                th_best = take.select(&th, &th_best);
                p_best = p_best
                    .iter()
                    .zip(&pt)
                    .map(|(b, t)| take.select(t, b))
                    .collect();
                have = have.or(&take);
                let bound = &theta_ref - &(&(&alpha * 2e-4) * &theta0);
                let accept = fin.and(&th.le(&bound));
                searching = searching.and(&accept.not());
                alpha = searching.select(&(&alpha * 0.5), &alpha);
            }
            // A world still searching after the last trial halved once more (the cpu loop's
            // α after its last trial).
            (alpha, th_best, p_best, have)
        };
        let (alpha, th, pt, have) = search(&dp, &running);
        // Stalled worlds (a short step) also try the lagged direction; the better trial is kept.
        let stalled = if s.linear_solver == LinearSolver::Dense {
            running.and(&alpha.lt(&S::C(STALL_STEP)))
        } else {
            M::C(false)
        };
        let (pt, have) = if stalled.any_true() {
            let (dp2, ok2, _) = direction(&u, &p, Friction::Lagged, &stalled);
            let (_, th2, pt2, have2) = search(&dp2, &stalled.and(&ok2));
            let better = have2.and(&have.not().or(&th2.lt(&th)));
            let pt: Vec<S<B>> = pt
                .iter()
                .zip(&pt2)
                .map(|(a, b)| better.select(b, a))
                .collect();
            (pt, have.or(&better))
        } else {
            (pt, have)
        };
        let no_trial = running.and(&have.not());
        if k == 0 {
            failed = failed.or(&no_trial);
        }
        running = running.and(&have);
        p = p
            .iter()
            .zip(&pt)
            .map(|(a, b)| running.select(b, a))
            .collect();
        u = pb.velocity(&p);
        iterations = running.select(&S::C((k + 1) as f64), &iterations);
        let r = pb.residual(&u, &p);
        if history.len() == mem {
            history.remove(0);
        }
        history.push(Problem::norm_squared(&r));
        if k + 1 < s.k_min {
            continue;
        }
        let residual = Problem::amax(&r);
        let ncp = pb.ncp_criterion(&u, &p, false);
        let converged = running.and(&stop_test(pb, s, tol, &u, &p, &r));
        let current = Solution {
            u: u.clone(),
            p: p.clone(),
            iterations: iterations.clone(),
            best_iterate: iterations.clone(),
            residual: residual.clone(),
            ncp,
            converged: converged.clone(),
            failed: M::C(false),
        };
        result = Solution::select(&converged, &current, &result);
        done = done.or(&converged);
        running = running.and(&converged.not());
        let improve = running.and(&have_best.not().or(&residual.lt(&best.residual)));
        best = Solution::select(&improve, &current, &best);
        have_best = have_best.or(&improve);
    }
    // Unconverged worlds: the best iterate with the iterations run, else the last iterate.
    let open = done.not();
    let with_best = open.and(&have_best);
    let mut b = best;
    b.iterations = iterations.clone();
    b.converged = M::C(false);
    let r = pb.residual(&u, &p);
    let last = Solution {
        residual: Problem::amax(&r),
        ncp: pb.ncp_criterion(&u, &p, false),
        u,
        p,
        iterations: iterations.clone(),
        best_iterate: iterations.clone(),
        converged: M::C(false),
        failed: failed.and(&iterations.eq_c(0.0)),
    };
    let unconverged = Solution::select(&with_best, &b, &last);
    Solution::select(&open, &unconverged, &result)
}
