//! MuJoCo's primal Newton and conjugate-gradient solvers with the exact line search (spec §A5;
//! `engine_solver.c: mj_solPrimal`; MuJoCo documentation "Computation > Solver").
//!
//! Minimizes `cost(a) = ½ (M a − f_s)ᵀ (a − a0) + Σ s(J a − aref)` over the accelerations `a`.

use nalgebra::{DMatrix, DVector};

use super::cost::{evaluate, CostEval, RowCost, RowState};
use super::impedance::MINVAL;
use super::linesearch::{line_search, LineCost};
use super::rows::Rows;
use crate::model::SolverKind;

/// Solver settings (MuJoCo `<option>`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SolverSettings {
    /// Newton or CG (PGS is rejected before solving).
    pub kind: SolverKind,
    /// Maximum iterations.
    pub iterations: usize,
    /// Tolerance on the scaled improvement, gradient and Newton decrement.
    pub tolerance: f64,
    /// Maximum line-search evaluations.
    pub ls_iterations: usize,
    /// Line-search tolerance (relative to `tolerance`).
    pub ls_tolerance: f64,
}

/// What the solver returns.
#[derive(Debug, Clone)]
pub struct Solution {
    /// Constrained accelerations (nv).
    pub qacc: DVector<f64>,
    /// Row forces (nefc).
    pub force: DVector<f64>,
    /// Iterations used (0 when the start point was certified optimal).
    pub iterations: usize,
    /// Final scaled gradient norm `scale·‖g‖`.
    pub gradient: f64,
    /// Whether a stopping test was met before the iteration budget.
    pub converged: bool,
}

/// The problem data for one step.
pub struct Problem<'a> {
    /// Mass matrix (nv × nv).
    pub m: &'a DMatrix<f64>,
    /// Smooth force f_s = passive − bias + actuation (nv).
    pub f_s: &'a DVector<f64>,
    /// Unconstrained acceleration a0 = M⁻¹ f_s (nv).
    pub a0: &'a DVector<f64>,
    /// The rows.
    pub rows: &'a Rows,
    /// Convergence scale: 1 / Σ M_ii over the constrained dofs (MuJoCo's island scale).
    pub scale: f64,
    /// Genesis' signorini friction discs (spec §B), or `None` for MuJoCo's convex model.
    pub signorini: Option<&'a Signorini>,
}

/// A friction block of the signorini resolution: rows `first..first + dim` form a Huber disc of
/// radius `mu`·f_n, f_n the normal force of row `normal`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiscBlock {
    /// The contact's normal row.
    pub normal: usize,
    /// First row of the block (its kind is [`RowCost::Disc`]).
    pub first: usize,
    /// Friction coefficient of the block (sliding μ, torsional m, rolling m).
    pub mu: f64,
}

/// The successive approximation of the signorini resolution (spec §B "Normal-force latch").
#[derive(Debug, Clone, PartialEq)]
pub struct Signorini {
    /// The friction blocks.
    pub blocks: Vec<DiscBlock>,
    /// Use Genesis' per-contact latch (PR #3381): the normal force that sets the disc radius
    /// moves once per iteration towards the iterate's normal force, by the whole gap, or by
    /// half of it when the gap changed sign without shrinking. Off: the radius is the current
    /// iterate's normal force (Genesis 1.4.5, the reference trajectories).
    pub latch: bool,
}

struct Iterate {
    /// Row kinds with the disc radii this iterate's line search uses (signorini), else the rows'.
    kinds: Vec<RowCost>,
    a: DVector<f64>,
    ma: DVector<f64>,
    jar: DVector<f64>,
    eval: CostEval,
    cost: f64,
    grad: DVector<f64>,
}

impl Problem<'_> {
    fn gauss(&self, a: &DVector<f64>, ma: &DVector<f64>) -> f64 {
        0.5 * (ma - self.f_s).dot(&(a - self.a0))
    }

    fn iterate(
        &self,
        a: DVector<f64>,
        want_hessian: bool,
        latch: &mut Option<Vec<(f64, f64)>>,
    ) -> Iterate {
        let ma = self.m * &a;
        let jar = &self.rows.j * &a - &self.rows.aref;
        let kinds = match self.signorini {
            None => self.rows.kinds.clone(),
            Some(sig) => {
                let mut kinds = self.rows.kinds.clone();
                for (k, b) in sig.blocks.iter().enumerate() {
                    // The plain unilateral normal force of this iterate.
                    let f_n = (-self.rows.d[b.normal] * jar[b.normal]).max(0.0);
                    let f_used = match latch {
                        Some(state) if sig.latch => {
                            let (value, prev_gap) = state[k];
                            let gap = f_n - value;
                            let step = if gap * prev_gap < 0.0 && gap.abs() >= prev_gap.abs() {
                                0.5 * gap
                            } else {
                                gap
                            };
                            state[k] = (value + step, gap);
                            value + step
                        }
                        _ => f_n,
                    };
                    if let RowCost::Disc { dim, .. } = kinds[b.first] {
                        kinds[b.first] = RowCost::Disc {
                            dim,
                            radius: b.mu * f_used,
                        };
                    }
                }
                if sig.latch && latch.is_none() {
                    *latch = Some(
                        sig.blocks
                            .iter()
                            .map(|b| ((-self.rows.d[b.normal] * jar[b.normal]).max(0.0), 0.0))
                            .collect(),
                    );
                }
                kinds
            }
        };
        let eval = evaluate(&kinds, &self.rows.d, &self.rows.r, &jar, want_hessian);
        let cost = self.gauss(&a, &ma) + eval.cost;
        let grad = &ma - self.f_s - self.rows.j.transpose() * &eval.force;
        Iterate {
            kinds,
            a,
            ma,
            jar,
            eval,
            cost,
            grad,
        }
    }

    /// Total cost at `a` (used by the warm-start comparison).
    pub fn cost(&self, a: &DVector<f64>) -> f64 {
        self.iterate(a.clone(), false, &mut None).cost
    }

    /// Newton Hessian H = M + Jᵀ diag(D·[quadratic]) J + Σ J_cᵀ H_c J_c.
    fn hessian(&self, it: &Iterate) -> DMatrix<f64> {
        let rows = self.rows;
        let mut h = self.m.clone();
        let nv = self.m.nrows();
        for (i, st) in it.eval.state.iter().enumerate() {
            if *st == RowState::Quadratic {
                let ji = rows.j.row(i);
                h += rows.d[i] * ji.transpose() * ji;
            }
        }
        for (first, hc) in &it.eval.cone_hessians {
            let dim = hc.nrows();
            let jc = rows.j.rows(*first, dim);
            h += jc.transpose() * hc * jc;
        }
        debug_assert_eq!(h.nrows(), nv);
        h
    }
}

/// Solve with `start` as the initial acceleration (after MuJoCo's warm-start choice).
pub fn solve(p: &Problem<'_>, start: DVector<f64>, s: &SolverSettings) -> Solution {
    let newton = s.kind == SolverKind::Newton;
    let mchol = p.m.clone().cholesky();
    let minv_apply = |g: &DVector<f64>| match &mchol {
        Some(c) => c.solve(g),
        None => g.map(|_| f64::NAN),
    };
    let mut latch = None;
    let mut it = p.iterate(start, newton, &mut latch);
    let gnorm = |it: &Iterate| p.scale * it.grad.norm();
    let signorini = p.signorini.is_some();

    // Certificate (3.11+): the start point is already optimal. (Signorini: its own exit test.)
    let mg = minv_apply(&it.grad);
    if !signorini
        && (0.5 * p.scale * it.grad.dot(&mg)).max(0.0) < s.tolerance
        && (!newton || gnorm(&it) < s.tolerance)
    {
        return finish(it, 0, gnorm, true);
    }
    let precond = |it: &Iterate| -> DVector<f64> {
        if newton {
            match p.hessian(it).cholesky() {
                Some(c) => c.solve(&it.grad),
                None => minv_apply(&it.grad),
            }
        } else {
            minv_apply(&it.grad)
        }
    };
    let mut mgrad = precond(&it);
    if newton && gnorm(&it) < s.tolerance && 0.5 * p.scale * it.grad.dot(&mgrad) < s.tolerance {
        return finish(it, 0, gnorm, true);
    }
    let mut search = -&mgrad;
    let mut iter = 0;
    let mut converged = false;
    while iter < s.iterations {
        let snorm = search.norm();
        if snorm < MINVAL {
            break;
        }
        let ms = p.m * &search;
        let js = &p.rows.j * &search;
        let line = LineCost {
            kinds: &it.kinds,
            d: &p.rows.d,
            r: &p.rows.r,
            jar: &it.jar,
            js: &js,
            q1: search.dot(&(&it.ma - p.f_s)),
            q2: 0.5 * search.dot(&ms),
        };
        let gtol = s.tolerance * s.ls_tolerance * snorm / p.scale;
        let alpha = line_search(&line, gtol, s.ls_iterations).alpha;
        if alpha == 0.0 {
            break;
        }
        let old_cost = it.cost;
        let (old_grad, old_mgrad) = (it.grad.clone(), mgrad.clone());
        it = p.iterate(&it.a + alpha * &search, newton, &mut latch);
        mgrad = precond(&it);
        iter += 1;
        let improvement = p.scale * (old_cost - it.cost);
        let gradient = gnorm(&it);
        let decrement = (0.5 * p.scale * it.grad.dot(&mgrad)).max(0.0);
        let stop = if signorini {
            // Genesis (`func_exit_decision`): both the gradient and the Newton decrement, scaled by
            // the island's mass trace, below the tolerance; a stalled improvement is not an exit.
            gradient < s.tolerance && decrement < s.tolerance
        } else {
            (improvement > 0.0 && improvement < s.tolerance)
                || gradient < s.tolerance
                || (newton && decrement < s.tolerance)
        };
        if stop {
            converged = true;
            break;
        }
        if newton {
            search = -&mgrad;
        } else {
            // Hager–Zhang β with the previous direction s (MuJoCo ≥ 3.10).
            let y = &it.grad - &old_grad;
            let my = &mgrad - &old_mgrad;
            let sy = search.dot(&y);
            let beta = if sy < MINVAL {
                0.0
            } else {
                let hz = (y.dot(&mgrad) - 2.0 * (y.dot(&my) / sy) * search.dot(&it.grad)) / sy;
                let eta = -1.0 / (search.norm() * 0.01f64.min(it.grad.norm())).max(MINVAL);
                hz.max(eta)
            };
            search = -&mgrad + beta * &search;
        }
    }
    finish(it, iter, gnorm, converged)
}

fn finish(
    it: Iterate,
    iterations: usize,
    gnorm: impl Fn(&Iterate) -> f64,
    converged: bool,
) -> Solution {
    let gradient = gnorm(&it);
    Solution {
        qacc: it.a,
        force: it.eval.force,
        iterations,
        gradient,
        converged,
    }
}
