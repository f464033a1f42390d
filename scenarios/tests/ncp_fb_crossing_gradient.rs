//! The ncp_fb adjoint through the whole box crossing (issue 13, Done when): the final chassis
//! x and y of box_traversal (nominal instance, default 6 s, robot past the box) with respect
//! to every knot of every wheel (K = 10, 30 knots) and to μ, against central finite
//! differences in f64 with the step swept from 1e-3 to 1e-7 and the best taken per entry
//! ([`gradcheck::FD_STEPS`]): relative error at most 1e-3 (absolute 1e-9 below 1e-6) and
//! cosine similarity at least 0.999, at h = 20 ms and 50 ms, with the default solver. The
//! lagged adjoint's error is printed beside it.
//!
//! Cost: 31 inputs × 5 steps × 2 rollouts = 310 rollouts per timestep (run across threads).

use contactlab_scenarios::control_synthesis::{
    final_xy_adjoint, final_xy_with, ControlProblem, XyInput,
};
use contactlab_scenarios::gradcheck::{compare, tight_solver, Comparison, FD_STEPS};
use contactlab_solvers::ncp_fb::adjoint::Mode;
use contactlab_solvers::ncp_fb::{NcpFb, NcpFbParams};
use rayon::prelude::*;
use serde_json::json;

/// Knots that cross the box at 0.5–0.63 m/s with some variation between knots and wheels.
fn knots(p: &ControlProblem) -> Vec<f64> {
    (0..p.len())
        .map(|i| 1.6 + 0.2 * (i as f64 * 0.7).sin())
        .collect()
}

struct Measured {
    exact: Comparison,
    lagged: Comparison,
    unconverged: usize,
    steps: usize,
    final_x: f64,
}

fn measure(h: f64, solver: &NcpFb) -> Measured {
    let p = ControlProblem::box_traversal(&json!({}), h, 10).unwrap();
    let z = knots(&p);
    let (exact, mu_e, unconverged) = final_xy_adjoint(&p, solver, &z, Mode::Exact);
    let (lagged, mu_l, _) = final_xy_adjoint(&p, solver, &z, Mode::Lagged);
    let inputs: Vec<XyInput> = (0..p.len())
        .map(XyInput::Knot)
        .chain([XyInput::Friction])
        .collect();
    let flat = |g: &[Vec<f64>; 2], mu: [f64; 2]| -> Vec<f64> {
        let mut v = g[0].clone();
        v.push(mu[0]);
        v.extend(&g[1]);
        v.push(mu[1]);
        v
    };
    let adj = flat(&exact, mu_e);
    let lag = flat(&lagged, mu_l);
    // Central differences at every step, for x and y (one rollout gives both).
    let fd_all: Vec<Vec<[f64; 2]>> = inputs
        .par_iter()
        .map(|&i| {
            FD_STEPS
                .iter()
                .map(|&d| {
                    let a = final_xy_with(&p, solver, &z, i, d);
                    let b = final_xy_with(&p, solver, &z, i, -d);
                    [(a[0] - b[0]) / (2.0 * d), (a[1] - b[1]) / (2.0 * d)]
                })
                .collect()
        })
        .collect();
    let n = inputs.len();
    let best = |reference: &[f64]| -> Vec<f64> {
        (0..2 * n)
            .map(|e| {
                let (c, i) = (e / n, e % n);
                fd_all[i]
                    .iter()
                    .map(|v| v[c])
                    .min_by(|x, y| {
                        (x - reference[e])
                            .abs()
                            .total_cmp(&(y - reference[e]).abs())
                    })
                    .unwrap()
            })
            .collect()
    };
    let final_x = final_xy_with(&p, solver, &z, XyInput::Knot(0), 0.0)[0];
    Measured {
        exact: compare(&adj, &best(&adj)),
        lagged: compare(&lag, &best(&lag)),
        unconverged: unconverged.len(),
        steps: p.steps,
        final_x,
    }
}

fn check(h: f64, solver: &NcpFb) {
    let m = measure(h, solver);
    println!(
        "h = {h}, newton_iterations {}: final x {:.3} m, {} of {} forward steps unconverged\n  exact  {:?}\n  lagged {:?}",
        solver.params.newton_iterations, m.final_x, m.unconverged, m.steps, m.exact, m.lagged
    );
    // The robot crosses the whole box (far edge 1.74 m + rear wheel offset and radius).
    assert!(
        m.final_x > 1.37 + 0.37 + 0.75 + 0.35,
        "final x {}",
        m.final_x
    );
    assert!(
        m.exact.passes(1e-3),
        "h = {h}: exact adjoint vs FD {:?} ({} of {} forward steps unconverged)",
        m.exact,
        m.unconverged,
        m.steps
    );
}

fn default_solver() -> NcpFb {
    NcpFb::new(NcpFbParams::default()).unwrap()
}

#[test]
#[ignore = "fails until ncp_fb converges through the crossing (issue 13): measured with 45 of 300 steps unconverged, max relative error 1.71, cosine -0.017 (lagged 1.91, 0.65)"]
fn final_xy_wrt_knots_and_mu_at_20_ms() {
    check(0.02, &default_solver());
}

#[test]
#[ignore = "fails until ncp_fb converges through the crossing (issue 13): measured with 29 of 120 steps unconverged, max relative error 1.00, cosine -0.026 (lagged 1.00, 0.38)"]
fn final_xy_wrt_knots_and_mu_at_50_ms() {
    check(0.05, &default_solver());
}

/// The same with tight forward solves (60 Newton iterations, tolerance 1e-14 m/s).
#[test]
#[ignore = "fails until ncp_fb converges through the crossing (issue 13); not measured yet (about 15 min of CPU)"]
fn final_xy_wrt_knots_and_mu_tight_solver_at_20_and_50_ms() {
    check(0.02, &tight_solver());
    check(0.05, &tight_solver());
}
