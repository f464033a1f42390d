//! Diagnostic (issue 17): the one-step vector–Jacobian product of the batched ncp_fb adjoint
//! (burn-autodiff through the batched assembly) against the cpu adjoint's (central differences of
//! the cpu assembly) at every state of a box_traversal rollout, h = 50 ms, for the loss
//! `c · [q₁; v₁]` with all-coordinate weights. Prints per step the largest relative difference
//! of `dL/d(q₀, v₀, ctrl)`, the coordinate where it occurs, and the cpu adjoint's one-sided
//! and dropped differences; with `FULL=1` the state and the whole difference where it exceeds
//! 1e-6 (before the step's line).
//!
//! `cargo run --release --features burn -p contactlab-scenarios --example ncp_adjoint_steps [seed] [steps]`
use contactlab_scenarios::build;
use contactlab_solvers::batched::ncp::{adjoint, NcpBatch};
use contactlab_solvers::batched::scalar::S;
use contactlab_solvers::batched::{download, upload_states, AutodiffF64, NdArrayF64};
use contactlab_solvers::ncp_fb::adjoint as cpu;
use contactlab_solvers::ncp_fb::{NcpFb, NcpFbParams};
use contactlab_solvers::State;
use nalgebra::DVector;
use serde_json::json;

fn main() {
    let seed: u64 = std::env::args().nth(1).map_or(0, |s| s.parse().unwrap());
    let steps: usize = std::env::args().nth(2).map_or(60, |s| s.parse().unwrap());
    let h = 0.05;
    let sc = build("box_traversal", &json!({"seed": seed, "horizon": 6.0})).unwrap();
    let model = &sc.model;
    let (nq, nv) = (model.nq, model.nv);
    let cq = DVector::from_fn(nq, |i, _| ((i as f64 + 1.0) * 0.7 + 0.3).sin());
    let cv = DVector::from_fn(nv, |i, _| ((i as f64 + 1.0) * 0.7 + 1.1).sin());
    let b = NcpBatch::new(model, NcpFbParams::default()).unwrap();
    let mut f = NcpFb::new(NcpFbParams::default()).unwrap();
    let mut s: State = sc.initial.clone();
    let device = Default::default();
    for k in 0..steps {
        let c = sc.controls_at(s.t, &s);
        let ro = cpu::rollout(&mut f, model, &s, &[c.clone()], 1, h);
        let g = cpu::backward(&f, model, &ro, &[], cpu::Mode::Exact, &|k, _| {
            if k == 1 {
                (cq.clone(), cv.clone())
            } else {
                (DVector::zeros(nq), DVector::zeros(nv))
            }
        });
        let (q, v) = upload_states::<NdArrayF64>(&[s.clone()], &device);
        // Controls as tensors so that their gradient is tracked.
        let ctrl: Vec<Vec<S<NdArrayF64>>> = vec![c
            .iter()
            .map(|&x| S::T(contactlab_solvers::batched::upload(vec![x], &device)))
            .collect()];
        let tape = adjoint::rollout(&b, q, v, &ctrl, h, 1);
        let gb = adjoint::backward::<AutodiffF64>(&b, &tape, &device, &|k, _, _| {
            if k == 1 {
                (
                    cq.iter().map(|&x| S::C(x)).collect(),
                    cv.iter().map(|&x| S::C(x)).collect(),
                )
            } else {
                (vec![S::C(0.0); nq], vec![S::C(0.0); nv])
            }
        });
        let ours: Vec<f64> = gb
            .q0
            .iter()
            .chain(gb.v0.iter())
            .chain(gb.controls[0].iter())
            .map(|x| download(x, 1)[0])
            .collect();
        let theirs: Vec<f64> =
            g.q0.iter()
                .chain(g.v0.iter())
                .chain(g.controls[0].iter())
                .copied()
                .collect();
        let scale = theirs.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let (mut worst, mut at) = (0.0f64, 0);
        for (i, (a, b)) in theirs.iter().zip(&ours).enumerate() {
            if (a - b).abs() > worst {
                worst = (a - b).abs();
                at = i;
            }
        }
        let p = ro.step(0).p.len();
        if std::env::var("FULL").is_ok() && worst / scale > 1e-6 {
            let d: Vec<f64> = theirs.iter().zip(&ours).map(|(a, b)| b - a).collect();
            println!("  q {:?}\n  diff {:?}", s.q.as_slice(), d);
        }
        println!(
            "step {k:3} t {:.2} rows {p:2} rel {:.2e} at {at} (cpu {:.6e} ours {:.6e}) one-sided {} dropped {}",
            s.t,
            worst / scale,
            theirs[at],
            ours[at],
            g.one_sided,
            g.dropped
        );
        contactlab_solvers::formulation::Formulation::step(&mut f, model, &mut s, &c, h);
    }
}
