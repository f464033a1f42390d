//! The batched ncp_fb adjoint (burn-ndarray f64 forward, burn-autodiff for each step's
//! vector–Jacobian product; `batched::ncp::adjoint`) against the cpu engine's adjoint
//! (`ncp_fb::adjoint`, implicit differentiation with the assembly by central differences and a
//! minimum-norm SVD solve) on the cross-check scenes at h = 50 ms: every world's gradient of a
//! linear loss of the final state with respect to its initial state and every control, within
//! 1e-6 relative to the gradient's largest entry. Both sweeps differentiate the same stored
//! converged steps; they differ in how: reverse mode and iterated Tikhonov here, finite
//! differences and SVD there.
#![cfg(feature = "burn")]

use contactlab_scenarios::build;
use contactlab_solvers::batched::ncp::{adjoint, NcpBatch};
use contactlab_solvers::batched::scalar::S;
use contactlab_solvers::batched::{download, upload, upload_states, AutodiffF64, NdArrayF64};
use contactlab_solvers::ncp_fb::adjoint as cpu;
use contactlab_solvers::ncp_fb::{NcpFb, NcpFbParams};
use contactlab_solvers::State;
use nalgebra::DVector;
use serde_json::{json, Value};

type Nd = NdArrayF64;

/// Loss weights on the final (q, v): fixed, all coordinates, mixed signs.
fn weights(n: usize, salt: f64) -> DVector<f64> {
    DVector::from_fn(n, |i, _| ((i as f64 + 1.0) * 0.7 + salt).sin())
}

struct Compared {
    relative: f64,
    largest: f64,
    steps: usize,
    unconverged: usize,
}

/// One batch of `params` worlds of `scene` over `seconds` at h = 50 ms: the controls of each
/// world are its scene's control law along its cpu rollout, then fixed for both sweeps.
fn compare(scene: &str, params: &[Value], seconds: f64) -> Compared {
    let h = 0.05;
    let n = (seconds / h).round() as usize;
    let scenes: Vec<_> = params
        .iter()
        .map(|p| {
            let mut p = p.clone();
            p["horizon"] = json!(seconds);
            build(scene, &p).unwrap()
        })
        .collect();
    let model = &scenes[0].model;
    let worlds = scenes.len();
    let (nq, nv, nu) = (model.nq, model.nv, model.actuators.len());
    let (cq, cv) = (weights(nq, 0.3), weights(nv, 1.1));
    // Controls: each world's control law along its own cpu rollout.
    let mut controls: Vec<Vec<Vec<f64>>> = Vec::new();
    for sc in &scenes {
        let mut f = NcpFb::new(NcpFbParams::default()).unwrap();
        let mut s: State = sc.initial.clone();
        let mut cs = Vec::new();
        for _ in 0..n {
            let c = sc.controls_at(s.t, &s);
            contactlab_solvers::formulation::Formulation::step(&mut f, model, &mut s, &c, h);
            cs.push(c);
        }
        controls.push(cs);
    }
    // The cpu adjoint, world by world.
    let mut cpu_grads = Vec::new();
    let mut unconverged = 0;
    for (w, sc) in scenes.iter().enumerate() {
        let mut f = NcpFb::new(NcpFbParams::default()).unwrap();
        let ro = cpu::rollout(&mut f, model, &sc.initial, &controls[w], n, h);
        assert_eq!(
            ro.len(),
            n,
            "{scene} world {w}: the cpu rollout ended early"
        );
        unconverged += ro.unconverged();
        let g = cpu::backward(&f, model, &ro, &[], cpu::Mode::Exact, &|k, _| {
            if k == n {
                (cq.clone(), cv.clone())
            } else {
                (DVector::zeros(nq), DVector::zeros(nv))
            }
        });
        assert_eq!(g.failed_solves, 0, "{scene} world {w}");
        cpu_grads.push(g);
    }
    // The batched adjoint.
    let b = NcpBatch::new(model, NcpFbParams::default()).unwrap();
    let device = Default::default();
    let initial: Vec<State> = scenes.iter().map(|s| s.initial.clone()).collect();
    let (q, v) = upload_states::<Nd>(&initial, &device);
    let ctrl: Vec<Vec<S<Nd>>> = (0..n)
        .map(|k| {
            (0..nu)
                .map(|a| {
                    S::T(upload(
                        (0..worlds).map(|w| controls[w][k][a]).collect(),
                        &device,
                    ))
                })
                .collect()
        })
        .collect();
    let tape = adjoint::rollout(&b, q, v, &ctrl, h, worlds);
    assert!(tape.failed_at.iter().all(Vec::is_empty));
    assert!(tape.left.iter().all(Option::is_none), "{:?}", tape.left);
    let g = adjoint::backward::<AutodiffF64>(&b, &tape, &device, &|k, _, _| {
        if k == n {
            (
                cq.iter().map(|&x| S::C(x)).collect(),
                cv.iter().map(|&x| S::C(x)).collect(),
            )
        } else {
            (vec![S::C(0.0); nq], vec![S::C(0.0); nv])
        }
    });
    assert!(
        g.failed_solves.iter().all(|&f| f == 0),
        "{scene}: {:?}",
        g.failed_solves
    );
    let read = |xs: &[S<Nd>]| -> Vec<Vec<f64>> { xs.iter().map(|s| download(s, worlds)).collect() };
    let (gq0, gv0) = (read(&g.q0), read(&g.v0));
    let gc: Vec<Vec<Vec<f64>>> = g.controls.iter().map(|c| read(c)).collect();
    let (mut worst, mut largest) = (0.0f64, 0.0f64);
    for (w, c) in cpu_grads.iter().enumerate() {
        let mut cpu_all: Vec<f64> = c.q0.iter().chain(c.v0.iter()).copied().collect();
        let mut ours: Vec<f64> = (0..nq)
            .map(|i| gq0[i][w])
            .chain((0..nv).map(|i| gv0[i][w]))
            .collect();
        for k in 0..n {
            cpu_all.extend(c.controls[k].iter());
            ours.extend((0..nu).map(|a| gc[k][a][w]));
        }
        let scale = cpu_all.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let diff = cpu_all
            .iter()
            .zip(&ours)
            .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
        assert!(
            ours.iter().all(|x| x.is_finite()),
            "{scene} world {w}: {:?}",
            &ours[..nq + nv]
        );
        worst = worst.max(diff / scale);
        largest = largest.max(scale);
    }
    Compared {
        relative: worst,
        largest,
        steps: n,
        unconverged,
    }
}

fn check(scene: &str, params: &[Value], seconds: f64) {
    let c = compare(scene, params, seconds);
    println!(
        "{scene}: {} worlds x {} steps of 50 ms: batched adjoint vs cpu adjoint, max relative difference {:.3e} (largest gradient entry {:.3e}), cpu unconverged steps {}",
        params.len(),
        c.steps,
        c.relative,
        c.largest,
        c.unconverged
    );
    assert!(c.relative <= 1e-6, "{scene}: {:e}", c.relative);
}

#[test]
fn box_slide_and_box_drop_adjoints_agree_with_the_cpu_adjoint() {
    check(
        "box_slide",
        &[json!({}), json!({"v0": 3.0, "friction": 0.3})],
        6.0,
    );
    check(
        "box_drop",
        &[json!({}), json!({"height": 0.1, "friction": 0.2})],
        6.0,
    );
}

#[test]
fn cartpole_adjoint_agrees_with_the_cpu_adjoint() {
    check(
        "cartpole",
        &[
            json!({}),
            json!({"pole_angle": -0.3, "cart_velocity": -2.0}),
        ],
        6.0,
    );
}

/// The wheeled robot (issue 17): servo rows, speculative contacts and the wheels' merged line
/// contacts on the ground and the box, whose ties both adjoints differentiate as the ends' mean
/// (`collision::LineEnds`). Measured 8.6e-7 over 6 s (two worlds; 2.1e-4 before the tie
/// rules); what remains is the cpu's O(step) error of differences across ties whose ends' gaps
/// curve differently, and one-sided differences next to near-ties
/// (`scenarios/examples/ncp_adjoint_steps.rs` shows them step by step). About 150 s.
#[test]
fn box_traversal_adjoint_agrees_with_the_cpu_adjoint() {
    check("box_traversal", &[json!({}), json!({"seed": 1})], 6.0);
}
