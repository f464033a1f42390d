//! Reverse mode through the batched penalty (burn's `Autodiff` over ndarray, f64) against
//! central finite differences of the cpu penalty in f64 (issue 15): the gradient of a fixed
//! weighting of the final state (qpos and qvel) with respect to the initial velocity, the
//! friction coefficient and the contact stiffness, within 1e-6 relative error for one step and
//! 1e-4 over 50 steps, on box_slide and cartpole (cartpole has no contacts: velocity only).
#![cfg(feature = "burn")]

use contactlab_scenarios::{build, Scene};
use contactlab_solvers::batched::burn_tensor::{Tensor, TensorData};
use contactlab_solvers::batched::penalty::{step, Batch};
use contactlab_solvers::batched::scalar::S;
use contactlab_solvers::batched::AutodiffF64;
use contactlab_solvers::formulation::Formulation;
use contactlab_solvers::penalty::{Penalty, PenaltyParams};
use serde_json::json;

type Ad = AutodiffF64;

const H: f64 = 5e-4;
const MU: f64 = 0.3;
const KE: f64 = 1e5;

fn params(mu: f64, ke: f64) -> PenaltyParams {
    PenaltyParams {
        mu: Some(mu),
        ke: Some(ke),
        ..PenaltyParams::default()
    }
}

/// Fixed weights of the final state `[q; v]`.
fn weights(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| 1.0 + 0.37 * i as f64 - 0.05 * (i * i) as f64)
        .collect()
}

/// The loss on the cpu engine: weights · [q_T; v_T] after `steps` steps from velocity `v0`.
fn cpu_loss(scene: &Scene, v0: &[f64], mu: f64, ke: f64, steps: usize) -> f64 {
    let mut f = Penalty::new(params(mu, ke)).unwrap();
    let mut s = scene.initial.clone();
    s.v.copy_from_slice(v0);
    let u = vec![0.0; scene.model.actuators.len()];
    for _ in 0..steps {
        f.step(&scene.model, &mut s, &u, h_of());
    }
    let w = weights(s.q.len() + s.v.len());
    s.q.iter()
        .chain(s.v.iter())
        .zip(&w)
        .map(|(x, w)| x * w)
        .sum()
}

fn h_of() -> f64 {
    H
}

fn leaf(x: f64) -> Tensor<Ad, 1> {
    Tensor::from_data(TensorData::new(vec![x], [1]), &Default::default()).require_grad()
}

fn value(t: &Tensor<contactlab_solvers::batched::NdArrayF64, 1>) -> f64 {
    t.to_data().to_vec::<f64>().unwrap()[0]
}

/// Reverse-mode gradient of the loss: `(d/dv0 (nv), d/dμ, d/dke)`.
fn autodiff_gradient(scene: &Scene, steps: usize) -> (Vec<f64>, f64, f64) {
    let model = &scene.model;
    let mut batch = Batch::<Ad>::new(model, params(MU, KE));
    let (mu, ke) = (leaf(MU), leaf(KE));
    for c in &mut batch.coef {
        c.mu = S::T(mu.clone());
        c.ke = S::T(ke.clone());
    }
    let dev = Default::default();
    let mut q: Vec<S<Ad>> = scene
        .initial
        .q
        .iter()
        .map(|&x| S::T(Tensor::from_data(TensorData::new(vec![x], [1]), &dev)))
        .collect();
    let v0: Vec<Tensor<Ad, 1>> = scene.initial.v.iter().map(|&x| leaf(x)).collect();
    let mut v: Vec<S<Ad>> = v0.iter().map(|t| S::T(t.clone())).collect();
    let u = vec![S::C(0.0); model.actuators.len()];
    for _ in 0..steps {
        let out = step(&batch, &q, &v, &u, H);
        q = out.q;
        v = out.v;
    }
    let w = weights(q.len() + v.len());
    let mut loss = S::C(0.0);
    for (x, w) in q.iter().chain(v.iter()).zip(&w) {
        loss = loss + x * *w;
    }
    let S::T(loss) = loss else {
        panic!("the loss depends on the inputs")
    };
    let grads = loss.sum().backward();
    let g = |t: &Tensor<Ad, 1>| t.grad(&grads).map_or(0.0, |g| value(&g));
    (v0.iter().map(g).collect(), g(&mu), g(&ke))
}

/// Central differences of [`cpu_loss`] with relative steps `eps`.
fn fd_gradient(scene: &Scene, steps: usize, contacts: bool) -> (Vec<f64>, f64, f64) {
    let v0: Vec<f64> = scene.initial.v.iter().copied().collect();
    let central = |f: &dyn Fn(f64) -> f64, x: f64| {
        let e = 1e-6 * x.abs().max(1.0);
        (f(x + e) - f(x - e)) / (2.0 * e)
    };
    let dv = (0..v0.len())
        .map(|i| {
            central(
                &|x| {
                    let mut v = v0.clone();
                    v[i] = x;
                    cpu_loss(scene, &v, MU, KE, steps)
                },
                v0[i],
            )
        })
        .collect();
    if !contacts {
        return (dv, 0.0, 0.0);
    }
    let dmu = central(&|m| cpu_loss(scene, &v0, m, KE, steps), MU);
    let dke = central(&|k| cpu_loss(scene, &v0, MU, k, steps), KE);
    (dv, dmu, dke)
}

fn relative_error(a: &[f64], b: &[f64]) -> f64 {
    let diff: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).powi(2))
        .sum::<f64>()
        .sqrt();
    let norm: f64 = b.iter().map(|y| y * y).sum::<f64>().sqrt();
    if norm == 0.0 && diff == 0.0 {
        // Both exactly zero (no contact force yet on the first step).
        return 0.0;
    }
    diff / norm
}

fn check(name: &str, scene_params: serde_json::Value, contacts: bool) {
    let scene = build(name, &scene_params).unwrap();
    for (steps, bound) in [(1usize, 1e-6), (50, 1e-4)] {
        let (av, amu, ake) = autodiff_gradient(&scene, steps);
        let (fv, fmu, fke) = fd_gradient(&scene, steps, contacts);
        let ev = relative_error(&av, &fv);
        println!("{name}, {steps} steps: d/dv0 relative error {ev:.2e}");
        assert!(
            ev <= bound,
            "{name} d/dv0 over {steps} steps: {ev:e} ({av:?} vs {fv:?})"
        );
        if contacts {
            let emu = relative_error(&[amu], &[fmu]);
            let eke = relative_error(&[ake], &[fke]);
            println!("{name}, {steps} steps: d/dmu {amu:.6e} (FD {fmu:.6e}, rel {emu:.2e}), d/dke {ake:.6e} (FD {fke:.6e}, rel {eke:.2e})");
            assert!(emu <= bound, "{name} d/dmu over {steps} steps: {emu:e}");
            assert!(eke <= bound, "{name} d/dke over {steps} steps: {eke:e}");
        }
    }
}

#[test]
fn box_slide_gradients_match_finite_differences() {
    // The box starts resting on the floor, sliding: every step has contacts.
    check("box_slide", json!({}), true);
}

#[test]
fn cartpole_gradients_match_finite_differences() {
    check("cartpole", json!({}), false);
}
