//! Where does a tiny knot perturbation become a jump? (issue 13, crossing gradient.)
//! Rolls box_traversal (nominal knots of the crossing test, h from argv, default 0.05) with knot
//! `K` (argv 2, default 3) moved by ±δ (argv 3, default 1e-7) and prints, per step, the central
//! difference quotient of the state, ‖x⁺ − x⁻‖ / 2δ, with both solves' iterations, residuals
//! and impulse norms, so that a step where the quotient jumps by orders of magnitude shows.
use contactlab_scenarios::control_synthesis::ControlProblem;
use contactlab_solvers::ncp_fb::{NcpFb, NcpFbParams};
use serde_json::json;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let h: f64 = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(0.05);
    let k: usize = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    let d: f64 = a.get(3).and_then(|s| s.parse().ok()).unwrap_or(1e-7);
    let p = ControlProblem::box_traversal(&json!({}), h, 10).unwrap();
    let z: Vec<f64> = (0..p.len())
        .map(|i| 1.6 + 0.2 * (i as f64 * 0.7).sin())
        .collect();
    let (mut zp, mut zm) = (z.clone(), z.clone());
    zp[k] += d;
    zm[k] -= d;
    let (cp, cm) = (p.controls(&zp), p.controls(&zm));
    let mut f = NcpFb::new(NcpFbParams::default()).unwrap();
    let (mut sp, mut sm) = (p.initial.clone(), p.initial.clone());
    let mut last: f64 = 0.0;
    for i in 0..cp.len() {
        let (rp, dp) = f.step_detail(&p.model, &mut sp, &cp[i], p.h);
        let (rm, dm) = f.step_detail(&p.model, &mut sm, &cm[i], p.h);
        let dq = (&sp.q - &sm.q).norm() / (2.0 * d);
        let dv = (&sp.v - &sm.v).norm() / (2.0 * d);
        let q = dq.max(dv);
        let (ip, im) = (dp.map(|x| x.solution), dm.map(|x| x.solution));
        let info = |s: &Option<contactlab_solvers::ncp_fb::solve::Solution>| {
            s.as_ref().map_or("-".into(), |s| {
                format!(
                    "it {:3} res {:.1e} |p| {:.4e} best {}",
                    s.iterations,
                    s.residual,
                    s.p.norm(),
                    s.best_iterate
                )
            })
        };
        let flag = if q > 10.0 * last.max(1e-3) {
            "  <== jump"
        } else {
            ""
        };
        println!(
            "step {i:3}: dq/dz {dq:.3e} dv/dz {dv:.3e} conv {}/{} | + {} | - {}{flag}",
            rp.converged,
            rm.converged,
            info(&ip),
            info(&im)
        );
        last = q;
    }
}
