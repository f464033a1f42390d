//! The ncp_fb adjoint through the whole box crossing (issue 13, Done when): the final chassis
//! x and y of box_traversal (nominal instance, default 6 s, robot past the box) with respect
//! to every knot of every wheel (K = 10, 30 knots) and to μ, against central finite
//! differences in f64 with the step swept from 1e-3 to 1e-7 and the best taken per entry
//! ([`FD_STEPS`]): relative error at most 1e-3 (absolute 1e-9 below 1e-6) and
//! cosine similarity at least 0.999, at h = 20 ms and 50 ms, with the default solver. The
//! lagged adjoint's error is printed beside it. Measured with one contact point per wheel and
//! surface (`Geom::line_contact_as_point`): 3.6e-5 / cosine 0.99999999989 at 50 ms, 4.0e-6 /
//! 0.99999999999996 at 20 ms (lagged 1.70 / 0.44 and 1.54 / 0.91). With two points per wheel
//! the sticking contacts were statically indeterminate and one step of the crossing had two
//! converged solutions (`scenarios/examples/crossing_branch.rs`): 0.83 / 0.900 and 0.40 / 0.9986.
//!
//! Cost: 31 inputs × 5 steps × 2 rollouts = 310 rollouts per timestep (run across threads).
//!
//! `CROSSING_SOLVER=tight` runs the same check with `TIGHT_NCP_FB` (forward rollout and FD),
//! `CROSSING_DUMP=1` prints every third input's adjoint, lagged adjoint and FD at each step.
//! Why the tests still fail is measured in `ncp_fb::adjoint`'s module doc ("Through
//! box_traversal's box crossing").

use contactlab_scenarios::control_synthesis::{
    final_xy_adjoint, final_xy_with, ControlProblem, XyInput,
};
use contactlab_solvers::ncp_fb::adjoint::Mode;
use contactlab_solvers::ncp_fb::{NcpFb, NcpFbParams};
use rayon::prelude::*;
use serde_json::json;

/// FD steps swept (absolute; knots in rad/s, μ dimensionless).
const FD_STEPS: [f64; 5] = [1e-3, 1e-4, 1e-5, 1e-6, 1e-7];

/// How an adjoint gradient compares with finite differences.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Comparison {
    /// Largest |a − f| / max(|a|, |f|) over entries whose derivative is at least 1e-6.
    max_relative: f64,
    /// Largest |a − f| over entries whose derivative is below 1e-6.
    max_absolute_small: f64,
    /// Cosine similarity of the two gradients.
    cosine: f64,
}

impl Comparison {
    fn passes(&self, rel_tol: f64) -> bool {
        self.max_relative <= rel_tol && self.max_absolute_small <= 1e-9 && self.cosine >= 0.999
    }
}

fn compare(adj: &[f64], fd: &[f64]) -> Comparison {
    let mut c = Comparison {
        max_relative: 0.0,
        max_absolute_small: 0.0,
        cosine: 1.0,
    };
    for (&a, &f) in adj.iter().zip(fd) {
        let scale = a.abs().max(f.abs());
        if scale < 1e-6 {
            c.max_absolute_small = c.max_absolute_small.max((a - f).abs());
        } else {
            c.max_relative = c.max_relative.max((a - f).abs() / scale);
        }
    }
    let dot: f64 = adj.iter().zip(fd).map(|(a, f)| a * f).sum();
    let na = adj.iter().map(|a| a * a).sum::<f64>().sqrt();
    let nf = fd.iter().map(|f| f * f).sum::<f64>().sqrt();
    if na > 0.0 || nf > 0.0 {
        c.cosine = dot / (na * nf);
    }
    c
}

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
    // CROSSING_DUMP=1: every third input's adjoint, lagged adjoint and FD at each step.
    if std::env::var_os("CROSSING_DUMP").is_some() {
        for i in (0..n).step_by(3) {
            let fx: Vec<String> = fd_all[i].iter().map(|v| format!("{:.4e}", v[0])).collect();
            println!(
                "  input {i}: adjoint dx {:.4e} lagged {:.4e} fd {}",
                adj[i],
                lag[i],
                fx.join(" ")
            );
        }
    }
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
    if std::env::var("CROSSING_SOLVER").as_deref() == Ok("tight") {
        let p: NcpFbParams =
            serde_json::from_str(contactlab_scenarios::gradient::cases::TIGHT_NCP_FB).unwrap();
        return NcpFb::new(p).unwrap();
    }
    NcpFb::new(NcpFbParams::default()).unwrap()
}

#[test]
fn final_xy_wrt_knots_and_mu_at_20_ms() {
    check(0.02, &default_solver());
}

#[test]
fn final_xy_wrt_knots_and_mu_at_50_ms() {
    check(0.05, &default_solver());
}
