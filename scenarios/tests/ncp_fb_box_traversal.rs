//! ncp_fb on box_traversal through the box crossing (issue 13): every converged step meets the
//! NCP criterion at 1e-6 (impulses), at most 1 % of the steps end unconverged at h = 1, 2, 5,
//! 10, 20, 50 and 100 ms (the target), the robot ends past the box's far edge, upright,
//! and at h = 5 ms its final x is within 1 cm of the h = 0.5 ms run; no contact penetrates by
//! more than 1 cm at any h. Measured with the closed-form wheel–box contact
//! (`collision::cylinder_box`), one point per wheel and surface, and speculative contacts
//! (`ncp_fb::speculative`): no unconverged step at any of these timesteps, worst converged NCP
//! 7.7e-9 J (1 ms), deepest penetration 1.4e-4 m (100 ms; before speculative contacts a front
//! wheel fell 0.0997 m into the ground there); final x 4.0513 m at 5 ms against 4.0483 m at
//! 0.5 ms.

use contactlab_scenarios::build;
use contactlab_solvers::ncp_fb::{NcpFb, NcpFbParams};
use serde_json::json;

/// Far edge of the default box (centre 1.37 m, length 0.74 m) plus the rear wheel's offset
/// (0.75 m) and radius (0.35 m): the chassis origin beyond this has the whole robot past the box.
const PAST_BOX_X: f64 = 1.37 + 0.37 + 0.75 + 0.35;

/// Largest penetration allowed at any h (m): 1 cm, a tenth of the wheel's width.
const PENETRATION_BOUND: f64 = 0.01;

struct Run {
    steps: usize,
    unconverged: usize,
    worst_converged_ncp: f64,
    final_x: f64,
    up: f64,
    /// Deepest penetration over the run (m): the largest −gap of any contact record, the
    /// quantity the harness's penetration rule reads.
    max_penetration: f64,
}

fn run(h: f64) -> Run {
    run_scene("box_traversal", h)
}

fn run_scene(name: &str, h: f64) -> Run {
    let scene = build(name, &json!({})).unwrap();
    let mut f = NcpFb::new(NcpFbParams::default()).unwrap();
    let mut s = scene.initial.clone();
    let steps = (scene.horizon / h).round() as usize;
    let (mut unconverged, mut worst, mut pen) = (0, 0.0f64, 0.0f64);
    for _ in 0..steps {
        let u = scene.controls_at(s.t, &s);
        let (r, det) = f.step_detail(&scene.model, &mut s, &u, h);
        assert!(r.diverged.is_none(), "diverged: {:?}", r.diverged);
        for c in &r.contacts {
            pen = pen.max(-c.gap);
        }
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
        max_penetration: pen,
    }
}

fn check(h: f64, max_unconverged: usize) -> Run {
    let r = run(h);
    println!(
        "h = {h}: {} of {} unconverged, worst converged NCP {:.3e} J, final x {:.4} m, up {:.4}, max penetration {:.2e} m",
        r.unconverged, r.steps, r.worst_converged_ncp, r.final_x, r.up, r.max_penetration
    );
    // No wheel sinks into the ground or the box (before speculative contacts a front wheel
    // leaving the box fell 0.0997 m into the ground in one step at h = 0.1 s).
    assert!(
        r.max_penetration <= PENETRATION_BOUND,
        "h = {h}: penetration {:.3e} m",
        r.max_penetration
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
    r
}

/// At most 1 % of the steps (rounded down; at least 0).
fn one_percent(h: f64) -> usize {
    (0.01 * (6.0 / h)).floor() as usize
}

#[test]
fn box_traversal_at_100_50_and_20_ms_converges_with_ncp_below_1e_6() {
    check(0.1, one_percent(0.1));
    check(0.05, one_percent(0.05));
    check(0.02, one_percent(0.02));
}

#[test]
fn box_traversal_at_10_and_2_ms_converges_with_ncp_below_1e_6() {
    check(0.01, one_percent(0.01));
    check(0.002, one_percent(0.002));
}

#[test]
fn box_traversal_at_1_ms_converges_with_ncp_below_1e_6() {
    check(0.001, one_percent(0.001));
}

/// The crossing keeps its physics: the final chassis x at 5 ms is within 1 cm of the 0.5 ms run
/// (measured 4.0513 vs 4.0483 m).
#[test]
fn box_traversal_at_5_ms_converges_and_ends_within_1_cm_of_the_0_5_ms_run() {
    let coarse = check(0.005, one_percent(0.005));
    let fine = run(0.0005);
    println!(
        "h = 0.5 ms: {} of {} unconverged, final x {:.4} m",
        fine.unconverged, fine.steps, fine.final_x
    );
    assert!(
        (coarse.final_x - fine.final_x).abs() <= 0.01,
        "final x {} at 5 ms vs {} at 0.5 ms",
        coarse.final_x,
        fine.final_x
    );
}

/// mesh_terrain (procedural, default seed, 10 s) at 5, 20 and 50 ms: at most 1 % unconverged
/// (measured 0 of 2000, 0 of 500, 0 of 200; 2 of 200 at 50 ms before speculative contacts) and every converged step's NCP criterion below
/// 1e-6 J; the robot stays upright.
#[test]
fn mesh_terrain_at_5_20_and_50_ms_converges_with_ncp_below_1e_6() {
    for h in [0.005, 0.02, 0.05] {
        let r = run_scene("mesh_terrain", h);
        println!(
            "mesh_terrain h = {h}: {} of {} unconverged, worst converged NCP {:.3e} J, final x {:.4} m, up {:.4}",
            r.unconverged, r.steps, r.worst_converged_ncp, r.final_x, r.up
        );
        assert!(
            r.worst_converged_ncp <= 1e-6,
            "h = {h}: NCP {:.3e}",
            r.worst_converged_ncp
        );
        assert!(
            r.unconverged as f64 <= 0.01 * r.steps as f64,
            "h = {h}: {} of {} unconverged",
            r.unconverged,
            r.steps
        );
        assert!(r.up > 0.9, "h = {h}: chassis up {}", r.up);
    }
}
