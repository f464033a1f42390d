//! Diagnostic (issue 17): per step of a batched ncp_fb rollout of box_traversal's control
//! synthesis instances (seeds 1..=WORLDS, initial knots, h = 50 ms), the rows of the batched
//! problem, the most Newton iterations over the worlds, the worlds converged, and the step's
//! wall time.
//!
//! `cargo run --release --features burn -p contactlab-scenarios --example ncp_batch_steps -- WORLDS STEPS`
use contactlab_scenarios::control_synthesis::{ControlProblem, Parametrization};
use contactlab_solvers::batched::ncp::{stepper::step, NcpBatch};
use contactlab_solvers::batched::scalar::S;
use contactlab_solvers::batched::{download, upload, upload_states, NdArrayF64};
use contactlab_solvers::ncp_fb::NcpFbParams;
use serde_json::json;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap())
        .collect();
    let (worlds, steps) = (
        args.first().copied().unwrap_or(16),
        args.get(1).copied().unwrap_or(120),
    );
    let problems: Vec<ControlProblem> = (1..=worlds as u64)
        .map(|seed| {
            let mut p = ControlProblem::box_traversal(&json!({"seed": seed}), 0.05, 10).unwrap();
            p.parametrization = Parametrization::Drive;
            p
        })
        .collect();
    let b = NcpBatch::new(&problems[0].model, NcpFbParams::default()).unwrap();
    let device = Default::default();
    let initial: Vec<_> = problems.iter().map(|p| p.initial.clone()).collect();
    let (mut q, mut v) = upload_states::<NdArrayF64>(&initial, &device);
    let controls: Vec<Vec<Vec<f64>>> = problems
        .iter()
        .map(|p| p.controls(&p.initial_knots(0.35)))
        .collect();
    let mut total = 0.0;
    for k in 0..steps.min(problems[0].steps) {
        let u: Vec<S<NdArrayF64>> = (0..problems[0].nu())
            .map(|a| S::T(upload(controls.iter().map(|c| c[k][a]).collect(), &device)))
            .collect();
        let t = std::time::Instant::now();
        let out = step(&b, &q, &v, &u, 0.05);
        let it = download(&out.solution.iterations, worlds);
        let dt = t.elapsed().as_secs_f64();
        total += dt;
        let conv =
            contactlab_solvers::batched::download(&out.solution.converged.indicator(), worlds);
        println!(
            "step {k:3} rows {:3} slots {:2} max iterations {:3} mean {:5.1} converged {:3}/{worlds} {:.3} s",
            out.assembly.problem.nl(),
            out.assembly.contacts.len(),
            it.iter().fold(0.0f64, |m, x| m.max(*x)),
            it.iter().sum::<f64>() / worlds as f64,
            conv.iter().filter(|&&c| c > 0.5).count(),
            dt
        );
        q = out.q;
        v = out.v;
    }
    println!("total {total:.2} s");
}
