//! Newton's method on the step residual (module doc, "Solve"): the dynamics are eliminated
//! exactly, `u(p) = u_free + M⁻¹ Jᵀ p`, so each iteration solves the dense Schur complement
//! `A Δp = −r_c` with `A = ∂r_c/∂u · M⁻¹Jᵀ + ∂r_c/∂p + reg` (spec eq. (12) with the exact,
//! non-symmetric friction Jacobian), then globalizes it (module doc, "Globalization": a
//! full-step pass with a periodic line search, then a non-monotone line-search pass, each with
//! the Tikhonov continuation), keeps the best iterate (spec §2.5) and stops on the residual or
//! on the NCP criterion with feasibility (spec §7.5).

use nalgebra::DVector;

use super::pcr::{pcr, Preconditioner, SchurSystem};
use super::residual::{Friction, Problem};

/// A line-search step below this counts as a stall of the exact Newton direction.
pub const STALL_STEP: f64 = 1.0 / 32.0;

/// Solver settings (from [`super::NcpFbParams`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// Maximum Newton iterations.
    pub iterations: usize,
    /// Minimum iterations before stopping (counted from 1).
    pub k_min: usize,
    /// Residual max-norm tolerance (m/s).
    pub tolerance: f64,
    /// NCP criterion tolerance (J).
    pub ncp_tolerance: f64,
    /// Relative Newton-only regularization of the normal, limit, servo and equality rows.
    pub regularization: f64,
    /// Relative Newton-only regularization of the friction rows.
    pub friction_regularization: f64,
    /// Maximum line-search halvings.
    pub ls_iterations: usize,
    /// Memory of the non-monotone line search (1: monotone Armijo).
    pub nonmonotone_memory: usize,
    /// Full-step period m of the first pass: full Newton steps except every m-th iteration,
    /// which searches; 0: no full-step pass (a line search at every iteration).
    pub full_step_period: usize,
    /// How each Newton system is solved.
    pub linear_solver: LinearSolver,
    /// PCR iteration cap per Newton iteration.
    pub pcr_iterations: usize,
    /// PCR relative tolerance.
    pub pcr_tolerance: f64,
    /// PCR preconditioner.
    pub preconditioner: Preconditioner,
}

/// How each Newton system is solved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinearSolver {
    /// The exact (non-symmetric) Jacobian, Schur complement formed and factorized (LU).
    Dense,
    /// The paper's system: W frozen within the iteration, symmetrized, matrix-free PCR
    /// ([`super::pcr`]); an inexact Newton method.
    Pcr,
}

/// The returned iterate.
#[derive(Debug, Clone, PartialEq)]
pub struct Solution {
    /// Generalized velocity after the step.
    pub u: DVector<f64>,
    /// Constraint impulses (N s), admissible (projected onto p_n ≥ 0, ‖p_f‖ ≤ μ p_n).
    pub p: DVector<f64>,
    /// Newton iterations run.
    pub iterations: usize,
    /// The iteration (1-based) whose iterate is returned (best-iterate selection, spec §2.5).
    pub best_iterate: usize,
    /// Max-norm of the constraint residual at the returned iterate (m/s).
    pub residual: f64,
    /// NCP criterion at the returned iterate (J).
    pub ncp: f64,
    /// Whether the stopping test was met.
    pub converged: bool,
    /// Why no iterate could be produced, when the first iteration already failed (no finite
    /// Newton direction, or no finite trial point in the line search): the returned `p` is
    /// then the start p = 0 and carries no solution. `None` whenever `iterations ≥ 1` or the
    /// problem has no rows. [`super::NcpFb`]'s `step` turns it into a failed step.
    pub failure: Option<String>,
}

/// Solve one step's problem from p = 0 (spec §2.5: λ₀ = 0). `pair_of_block[b]` is the body
/// pair of block b when it is a contact (block-Jacobi groups; may be empty for Jacobi or dense).
///
/// If Newton from p = 0 ends unconverged, the step is solved again by **Tikhonov continuation**
/// ([`RHO_START`] down to 0): the rows are made compliant by the relative regularization
/// (ρ_n, ρ_f) of [`Problem::rho_n`], [`Problem::rho_f`], whose root is isolated even where the
/// rigid problem's is not (redundant, statically indeterminate contacts), and each stage starts
/// from the previous stage's iterate, down to the rigid problem (ρ = 0). Only a converged
/// rigid stage counts as converged, so the returned root is a root of the unregularized step
/// and the adjoint differentiates the same residual. Source: the Tikhonov-regularization
/// scheme for monotone NCPs (Facchinei & Pang, *Finite-Dimensional Variational Inequalities
/// and Complementarity Problems*, 2003, §12.2: the regularized solutions tend to the
/// least-norm solution as ρ → 0) with warm-started continuation in ρ.
///
/// The whole of this runs twice at most (module doc, "Globalization"): first with full Newton
/// steps and a line search every `full_step_period`-th iteration; if that ends unconverged,
/// again from p = 0 with the non-monotone line search at every iteration. The converged (or
/// else the smaller-residual) result is returned, with the iterations of both passes.
///
/// The returned impulses are admissible: with the natural map (unprojected iterates) the
/// returned iterate is projected onto p_n ≥ 0, ‖p_f‖ ≤ μ p_n at the end (a move of at most
/// `tolerance / w` for a converged step, by the stopping test), and its residual and NCP
/// criterion are those of the projected iterate.
pub fn solve(pb: &Problem, s: &Settings, pair_of_block: &[Option<[usize; 2]>]) -> Solution {
    let mut sol = solve_passes(pb, s, pair_of_block);
    if sol.failure.is_none() && pb.cone_violation(&sol.p) > 0.0 {
        pb.project_cone(&mut sol.p);
        sol.u = pb.velocity(&sol.p);
        sol.residual = pb.constraint_residual(&sol.u, &sol.p).amax();
        sol.ncp = pb.ncp_criterion(&sol.u, &sol.p);
    }
    sol
}

fn solve_passes(pb: &Problem, s: &Settings, pair_of_block: &[Option<[usize; 2]>]) -> Solution {
    if s.full_step_period == 0 {
        return solve_pass(pb, s, pair_of_block);
    }
    let a = solve_pass(pb, s, pair_of_block);
    if a.converged || a.failure.is_some() {
        return a;
    }
    let searched = Settings {
        full_step_period: 0,
        ..*s
    };
    let b = solve_pass(pb, &searched, pair_of_block);
    let mut iterations = a.iterations + b.iterations;
    let mut best = if b.failure.is_none() && (b.converged || b.residual < a.residual) {
        b
    } else {
        a
    };
    if !best.converged && best.failure.is_none() {
        // Polish: the rigid problem once more from the best iterate, with full steps (the
        // passes can end next to a root, out of stages or of iterations).
        let polish = Settings {
            full_step_period: usize::MAX,
            ..*s
        };
        let c = solve_from(pb, &polish, pair_of_block, best.p.clone());
        iterations += c.iterations;
        if c.failure.is_none() && (c.converged || c.residual < best.residual) {
            best = c;
        }
    }
    Solution { iterations, ..best }
}

/// One pass of [`solve`]: Newton from p = 0, then the Tikhonov continuation if unconverged.
fn solve_pass(pb: &Problem, s: &Settings, pair_of_block: &[Option<[usize; 2]>]) -> Solution {
    let first = solve_from(pb, s, pair_of_block, DVector::zeros(pb.nl()));
    // A failed step (no finite first iterate, module doc "Failed steps") is not continued.
    if first.converged || first.failure.is_some() {
        return first;
    }
    let mut iterations = first.iterations;
    // Adaptive continuation: ρ_n divided by `factor` after each converged stage (ρ_f =
    // FRICTION_RHO_RATIO ρ_n), the factor square-rooted after a failed stage (restarting from
    // the last converged stage), ρ = 0 once ρ_n < RHO_MIN.
    let (mut rho, mut factor) = (RHO_START, RHO_FACTOR);
    let mut p0 = DVector::zeros(pb.nl());
    let mut from_converged: Option<f64> = None; // ρ of the last converged stage
    let mut last: Option<Solution> = None;
    for _ in 0..MAX_STAGES {
        let mut stage = pb.clone();
        stage.rho_n = rho;
        stage.rho_f = FRICTION_RHO_RATIO * rho;
        // Intermediate stages are solved inexactly (residual ≤ STAGE_TOLERANCE ρ_n m/s): they
        // only carry the iterate towards the rigid root.
        let mut ss = *s;
        if rho > 0.0 {
            ss.tolerance = s.tolerance.max(STAGE_TOLERANCE * rho);
        }
        let sol = solve_from(&stage, &ss, pair_of_block, p0.clone());
        iterations += sol.iterations;
        if rho == 0.0 {
            last = Some(sol.clone());
        }
        if sol.converged {
            if rho == 0.0 {
                break;
            }
            from_converged = Some(rho);
            p0 = sol.p.clone();
            rho = if rho / factor < RHO_MIN {
                0.0
            } else {
                rho / factor
            };
        } else {
            let Some(prev) = from_converged else {
                // Not even the first stage converged: more compliance, from p = 0.
                if rho >= RHO_MAX {
                    break;
                }
                rho *= RHO_FACTOR;
                continue;
            };
            factor = factor.sqrt();
            if factor < 1.2 {
                break;
            }
            rho = if prev / factor < RHO_MIN {
                0.0
            } else {
                prev / factor
            };
        }
    }
    if last.is_none() && from_converged.is_some() {
        // Out of stages or of factor: finish with the rigid problem from the last converged stage.
        let sol = solve_from(pb, s, pair_of_block, p0);
        iterations += sol.iterations;
        last = Some(sol);
    }
    let best = match last {
        Some(l) if l.failure.is_none() && (l.converged || l.residual < first.residual) => l,
        _ => first,
    };
    Solution { iterations, ..best }
}

/// The stopping test (module doc, "Solve"): the residual max-norm below `tolerance`, or the NCP
/// criterion measured from the smoothed root ([`Problem::ncp_criterion_smoothed`]) below
/// `ncp_tolerance` with no penetration of the linearized gaps beyond
/// `tolerance·h`, the equation rows below `tolerance` and the impulses inside the cone to
/// `tolerance` ([`Problem::cone_violation`]).
fn stop_test(
    pb: &Problem,
    s: &Settings,
    u: &DVector<f64>,
    p: &DVector<f64>,
    r: &DVector<f64>,
) -> bool {
    r.amax() <= s.tolerance
        || (pb.ncp_criterion_smoothed(u, p) <= s.ncp_tolerance
            && pb.penetration(u, p) <= s.tolerance * pb.h
            && pb.equation_residual(r) <= s.tolerance
            && pb.cone_violation(p) <= s.tolerance)
}

/// First relative regularization ρ_n of the continuation in [`solve`].
pub const RHO_START: f64 = 1e-2;
/// Largest ρ_n tried when the first stage does not converge (×RHO_FACTOR per retry).
pub const RHO_MAX: f64 = 1e2;
/// Initial reduction factor of ρ per converged stage.
pub const RHO_FACTOR: f64 = 100.0;
/// Below this ρ_n the next stage is the rigid problem (ρ = 0).
pub const RHO_MIN: f64 = 1e-12;
/// ρ_f / ρ_n.
pub const FRICTION_RHO_RATIO: f64 = 1.0;
/// Residual tolerance of an intermediate stage relative to its ρ_n (m/s).
pub const STAGE_TOLERANCE: f64 = 1e-3;
/// Most continuation stages per step.
pub const MAX_STAGES: usize = 40;

/// Newton from the impulses `p0` (projected first).
fn solve_from(
    pb: &Problem,
    s: &Settings,
    pair_of_block: &[Option<[usize; 2]>],
    p0: DVector<f64>,
) -> Solution {
    let nl = pb.nl();
    let velocity = |p: &DVector<f64>| pb.velocity(p);
    let constraint_residual = |u: &DVector<f64>, p: &DVector<f64>| pb.constraint_residual(u, p);
    let mut p = p0;
    pb.project(&mut p);
    let mut u = velocity(&p);
    if nl == 0 {
        return Solution {
            u,
            p,
            iterations: 0,
            best_iterate: 0,
            residual: 0.0,
            ncp: 0.0,
            converged: true,
            failure: None,
        };
    }
    let reg = pb.regularization(s.regularization, s.friction_regularization);
    let mut best: Option<Solution> = None;
    let mut iterations = 0;
    // Merits of the last iterates (the non-monotone line search's memory).
    let mut history: Vec<f64> = Vec::with_capacity(s.nonmonotone_memory.max(1));
    // Why the loop stopped early, if it did (kept for the report when no iteration ran).
    let mut stop: Option<String> = None;
    for k in 0..s.iterations {
        let fp = s.full_step_period;
        // A full step (any finite trial is taken) except every fp-th iteration.
        let full_step = fp > 0 && k % fp != fp - 1;
        let dense_direction = |mode: Friction| -> Option<(DVector<f64>, f64)> {
            let lin = pb.linearize(&u, &p, mode);
            let rc = lin.r;
            let mut a = &lin.r_vel * (&pb.j * &pb.minv_jt) + lin.r_p;
            for i in 0..nl {
                a[(i, i)] += reg[i];
            }
            let dp = match a.clone().lu().solve(&-&rc) {
                Some(d) if d.iter().all(|x| x.is_finite()) => d,
                _ => a
                    .full_piv_lu()
                    .solve(&-&rc)
                    .filter(|d| d.iter().all(|x| x.is_finite()))?,
            };
            Some((dp, rc.norm_squared()))
        };
        let (dp, theta0) = match s.linear_solver {
            LinearSolver::Dense => match dense_direction(Friction::Exact) {
                Some(d) => d,
                None => {
                    stop = Some(format!(
                        "no finite Newton direction at iteration {} (the {nl} x {nl} Schur complement is singular or non-finite)",
                        k + 1
                    ));
                    break;
                }
            },
            LinearSolver::Pcr => {
                let sys = SchurSystem::new(pb, &u, &p, &reg, s.preconditioner, pair_of_block);
                let (dp, _) = pcr(&sys, &sys.rhs, s.pcr_iterations, s.pcr_tolerance, 0.0);
                if !dp.iter().all(|x| x.is_finite()) {
                    stop = Some(format!(
                        "PCR gave a non-finite Newton direction at iteration {}",
                        k + 1
                    ));
                    break;
                }
                (dp, constraint_residual(&u, &p).norm_squared())
            }
        };
        // Non-monotone reference (Grippo, Lampariello & Lucidi 1986): the largest merit of the
        // last NONMONOTONE_MEMORY iterates, so that a full step may cross the kinks of the
        // natural map (a change of the stick/slip or active set) even when it raises ‖r‖².
        let theta_ref = if full_step {
            f64::INFINITY
        } else {
            history.iter().copied().fold(theta0, f64::max)
        };
        // Backtracking on ‖r_c‖² over projected trial points: (last step length, best trial).
        let search = |dp: &DVector<f64>| {
            let mut alpha = 1.0;
            let mut chosen: Option<(f64, DVector<f64>)> = None;
            for _ in 0..=s.ls_iterations {
                let mut pt = &p + dp * alpha;
                pb.project(&mut pt);
                let th = constraint_residual(&velocity(&pt), &pt).norm_squared();
                let better = chosen.as_ref().is_none_or(|(b, _)| th < *b);
                if th.is_finite() && better {
                    chosen = Some((th, pt));
                }
                if th.is_finite() && th <= theta_ref - 2e-4 * alpha * theta0 {
                    break;
                }
                alpha *= 0.5;
            }
            (alpha, chosen)
        };
        let (alpha, mut chosen) = search(&dp);
        // Where the exact direction stalls (a short step: the iterate sits in a kink of W or of
        // the projection), also try the frozen-W direction and keep the better trial.
        if s.linear_solver == LinearSolver::Dense && alpha < STALL_STEP {
            if let Some((dp2, _)) = dense_direction(Friction::Lagged) {
                if let (_, Some((th2, pt2))) = search(&dp2) {
                    if chosen.as_ref().is_none_or(|(th, _)| th2 < *th) {
                        chosen = Some((th2, pt2));
                    }
                }
            }
        }
        let Some((_, pt)) = chosen else {
            stop = Some(format!(
                "no finite trial point in the line search at iteration {}",
                k + 1
            ));
            break;
        };
        p = pt;
        u = velocity(&p);
        iterations = k + 1;
        let r = constraint_residual(&u, &p);
        if history.len() == s.nonmonotone_memory.max(1) {
            history.remove(0);
        }
        history.push(r.norm_squared());

        let residual = r.amax();

        let ncp = pb.ncp_criterion(&u, &p);
        if k + 1 < s.k_min {
            continue;
        }
        let converged = stop_test(pb, s, &u, &p, &r);
        let current = Solution {
            u: u.clone(),
            p: p.clone(),
            iterations,
            best_iterate: iterations,
            residual,
            ncp,
            converged,
            failure: None,
        };
        if converged {
            return current;
        }
        if best.as_ref().is_none_or(|b| residual < b.residual) {
            best = Some(current);
        }
    }
    match best {
        Some(mut b) => {
            b.iterations = iterations;
            b
        }
        None => {
            let residual = constraint_residual(&u, &p).amax();
            let ncp = pb.ncp_criterion(&u, &p);
            Solution {
                u,
                p,
                iterations,
                best_iterate: iterations,
                residual,
                ncp,
                converged: false,
                failure: if iterations == 0 { stop } else { None },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ncp_fb::residual::Block;
    use nalgebra::DMatrix;

    fn settings() -> Settings {
        crate::ncp_fb::NcpFb::new(Default::default())
            .unwrap()
            .settings()
    }

    /// One dof (unit mass) and one frictionless contact row `J = [jn]`, gap −1 mm, the body
    /// approaching at 1 m/s.
    fn one_contact(jn: f64, u_free: f64) -> Problem {
        let j = DMatrix::from_element(1, 1, jn);
        Problem {
            h: 1e-3,
            minv_jt: j.transpose(),
            j,
            u_free: DVector::from_element(1, u_free),
            blocks: vec![Block::Contact {
                row: 0,
                friction: false,
                mu: 0.0,
                gap: -1e-3,
                wn: jn * jn,
                wt: 0.0,
            }],
            eps_fb: 1e-8,
            eps_v: 1e-6,
            rho_n: 0.0,
            rho_f: 0.0,
            friction_residual: Default::default(),
            center: DVector::zeros(0),
        }
    }

    #[test]
    fn non_finite_newton_direction_is_reported_not_swallowed() {
        // A contact row no dof can move (J = 0): the Schur complement is the 1 x 1 zero
        // matrix, so there is no Newton direction at all.
        let sol = solve(&one_contact(0.0, -1.0), &settings(), &[]);
        println!("{:?}", sol.failure);
        assert_eq!((sol.iterations, sol.converged), (0, false));
        let why = sol
            .failure
            .expect("a singular first system must be reported");
        assert!(
            why.contains("no finite Newton direction at iteration 1"),
            "{why}"
        );
        // A non-finite free velocity: the right-hand side is NaN.
        let sol = solve(&one_contact(1.0, f64::NAN), &settings(), &[]);
        assert!(sol.failure.is_some() && sol.iterations == 0, "{sol:?}");
        // The same contact with J = 1 solves: the impulse stops the approach and pushes the
        // 1 mm penetration out within the step (u = +1 mm / h = 1 m/s), p = 2 N s.
        let sol = solve(&one_contact(1.0, -1.0), &settings(), &[]);
        assert!(sol.failure.is_none() && sol.converged, "{sol:?}");
        assert!(
            (sol.u[0] - 1.0).abs() < 1e-6 && (sol.p[0] - 2.0).abs() < 1e-6,
            "{sol:?}"
        );
    }
}
