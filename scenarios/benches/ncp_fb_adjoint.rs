//! The `ncp_fb` adjoint: accuracy of the exact and lagged variants against the f64
//! central-difference reference (`contactlab_scenarios::gradient`) on the issue's gradient cases, and the peak resident memory of an adjoint
//! rollout at 8 and 64 Newton iterations (issue "ncp_fb", Done when).
//!
//! `cargo bench -p contactlab-scenarios --bench ncp_fb_adjoint`. The memory runs happen in
//! child processes (this binary re-run with `NCP_FB_MEMORY_CHILD=<iterations>`) so that each
//! peak (VmHWM of /proc/self/status, Linux) is its own.

use std::process::Command;

use contactlab_scenarios::build;
use contactlab_scenarios::gradient::cases::{issue_cases, TIGHT_NCP_FB};
use contactlab_scenarios::gradient::methods::{self, Method};
use contactlab_scenarios::gradient::reference::{self, score, MAX_UNCERTAINTY, REFERENCE_STEPS};
use contactlab_scenarios::gradient::FormulationRef;
use contactlab_solvers::ncp_fb::adjoint::{self, Mode};
use contactlab_solvers::ncp_fb::{NcpFb, NcpFbParams};
use nalgebra::DVector;
use serde_json::json;

const CHILD: &str = "NCP_FB_MEMORY_CHILD";

/// Peak resident set size of this process (KiB), Linux only.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// box_traversal with the box moved out of reach (obstacle_x = 50 m), all wheels commanded
/// forward from rest, 5 s at h = 1 ms (5000 steps on flat ground, where every step converges
/// and the adjoint is a derivative; the tape then dominates the resident memory), exactly
/// `iterations` Newton iterations per step (k_min = iterations, tolerances 0), then one exact
/// backward sweep for the final chassis x with respect to the start, controls and μ.
fn memory_child(iterations: usize) {
    let scene = build("box_traversal", &json!({"obstacle_x": 50.0})).expect("box_traversal builds");
    let mut f = NcpFb::new(NcpFbParams {
        newton_iterations: iterations,
        k_min: iterations,
        tolerance: 0.0,
        ncp_tolerance: 0.0,
        ..NcpFbParams::default()
    })
    .expect("valid parameters");
    let (h, n) = (0.001, 5000);
    let controls = vec![vec![2.0; scene.model.actuators.len()]; n];
    let r = adjoint::rollout(&mut f, &scene.model, &scene.initial, &controls, n, h);
    let iters: usize = r.iterations.iter().sum();
    let (nq, nv) = (scene.model.nq, scene.model.nv);
    let g = adjoint::backward(
        &f,
        &scene.model,
        &r,
        &[adjoint::Parameter::Friction],
        Mode::Exact,
        &|k, _| {
            let mut a = DVector::zeros(nq);
            if k == r.len() {
                a[0] = 1.0;
            }
            (a, DVector::zeros(nv))
        },
    );
    println!(
        "{} {} {} {} {:.6e}",
        peak_rss_kib().unwrap_or(0),
        r.len(),
        iters,
        r.final_state().q[0],
        g.params[0]
    );
}

fn main() {
    if let Ok(it) = std::env::var(CHILD) {
        memory_child(it.parse().expect("iterations"));
        return;
    }

    println!("ncp_fb adjoint vs the central-difference reference (relative FD steps 1e-3..1e-8)");
    println!(
        "{:<36} {:>12} {:>10} {:>12} {:>10}",
        "case", "exact rel", "exact cos", "lagged rel", "lagged cos"
    );
    let params: serde_json::Value = serde_json::from_str(TIGHT_NCP_FB).expect("valid JSON");
    let build =
        || contactlab_solvers::formulation::build("ncp_fb", &params).map_err(|e| e.to_string());
    let f = FormulationRef {
        name: "ncp_fb",
        params: &params,
        build: &build,
    };
    for case in issue_cases() {
        let exact = methods::compute(Method::Adjoint, &case, f).expect("adjoint");
        let lagged = methods::compute(Method::AdjointLagged, &case, f).expect("adjoint");
        let r =
            reference::reference(&case, f, &REFERENCE_STEPS, MAX_UNCERTAINTY).expect("reference");
        let (ce, cl) = (score(&exact.gradient, &r), score(&lagged.gradient, &r));
        println!(
            "{:<36} {:>12.3e} {:>10.7} {:>12.3e} {:>10.7}",
            case.name, ce.max_relative, ce.cosine, cl.max_relative, cl.cosine
        );
    }

    println!(
        "\npeak RSS of an adjoint rollout (box_traversal on flat ground, 5000 steps at 1 ms, forward + backward)"
    );
    let exe = std::env::current_exe().expect("own path");
    let mut peaks = Vec::new();
    for iterations in [8usize, 64] {
        let out = Command::new(&exe)
            .env(CHILD, iterations.to_string())
            .output()
            .expect("child runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let fields: Vec<&str> = text.split_whitespace().collect();
        if !out.status.success() || fields.len() < 5 {
            println!(
                "  {iterations} Newton iterations: child failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            continue;
        }
        let kib: f64 = fields[0].parse().unwrap_or(f64::NAN);
        println!(
            "  {iterations:>2} Newton iterations per step: peak RSS {:.1} MiB ({} steps, {} iterations in all, final x {} m, dx/dmu {})",
            kib / 1024.0,
            fields[1],
            fields[2],
            fields[3],
            fields[4]
        );
        peaks.push(kib);
    }
    if let [a, b] = peaks[..] {
        println!(
            "  ratio 64 / 8: {:.4} (within 5 %: {})",
            b / a,
            (b / a - 1.0).abs() <= 0.05
        );
    }
}
