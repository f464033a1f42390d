//! ncp_fb on box_traversal through the box crossing (issue 13): every converged step meets the
//! NCP criterion at 1e-6 (impulses), the share of unconverged steps stays below its measured
//! bound, and the robot ends past the box's far edge, upright. The target (at most 1 %
//! unconverged at every h) is not met yet; the bounds here are the measured values with a
//! small margin, so a regression of the solver shows (module doc of `ncp_fb`, "Known
//! limitations").

use contactlab_scenarios::build;
use contactlab_solvers::ncp_fb::{NcpFb, NcpFbParams};
use serde_json::json;

/// Far edge of the default box (centre 1.37 m, length 0.74 m) plus the rear wheel's offset
/// (0.75 m) and radius (0.35 m): the chassis origin beyond this has the whole robot past the box.
const PAST_BOX_X: f64 = 1.37 + 0.37 + 0.75 + 0.35;

struct Run {
    steps: usize,
    unconverged: usize,
    worst_converged_ncp: f64,
    final_x: f64,
    up: f64,
}

fn run(h: f64) -> Run {
    let scene = build("box_traversal", &json!({})).unwrap();
    let mut f = NcpFb::new(NcpFbParams::default()).unwrap();
    let mut s = scene.initial.clone();
    let steps = (scene.horizon / h).round() as usize;
    let (mut unconverged, mut worst) = (0, 0.0f64);
    for _ in 0..steps {
        let u = scene.controls_at(s.t, &s);
        let (r, det) = f.step_detail(&scene.model, &mut s, &u, h);
        assert!(r.diverged.is_none(), "diverged: {:?}", r.diverged);
        if r.converged {
            worst = worst.max(det.unwrap().solution.ncp);
        } else {
            unconverged += 1;
        }
    }
    Run {
        steps,
        unconverged,
        worst_converged_ncp: worst,
        final_x: s.q[0],
        up: 1.0 - 2.0 * (s.q[4] * s.q[4] + s.q[5] * s.q[5]),
    }
}

fn check(h: f64, max_unconverged: usize) {
    let r = run(h);
    println!(
        "h = {h}: {} of {} unconverged, worst converged NCP {:.3e} J, final x {:.4} m, up {:.4}",
        r.unconverged, r.steps, r.worst_converged_ncp, r.final_x, r.up
    );
    assert!(
        r.worst_converged_ncp <= 1e-6,
        "h = {h}: NCP {:.3e}",
        r.worst_converged_ncp
    );
    assert!(
        r.unconverged <= max_unconverged,
        "h = {h}: {} of {} steps unconverged (bound {max_unconverged})",
        r.unconverged,
        r.steps
    );
    assert!(r.final_x > PAST_BOX_X, "h = {h}: final x {}", r.final_x);
    assert!(r.up > 0.99, "h = {h}: chassis up {}", r.up);
}

#[test]
fn box_traversal_at_50_ms_converges_with_ncp_below_1e_6() {
    check(0.05, MAX_UNCONVERGED_50MS);
}

#[test]
fn box_traversal_at_5_ms_converges_with_ncp_below_1e_6() {
    check(0.005, MAX_UNCONVERGED_5MS);
}

/// Measured with the default parameters (16 Newton iterations per stage): see the module doc.
const MAX_UNCONVERGED_50MS: usize = 15;
const MAX_UNCONVERGED_5MS: usize = 60;
