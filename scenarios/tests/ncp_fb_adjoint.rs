//! The ncp_fb adjoint against central finite differences in f64 (issue "ncp_fb", Done when):
//! the finite-difference step is swept from 1e-3 to 1e-7 and the best taken; the error must be
//! at most 1e-4 relative for one step and 1e-3 relative over 50 steps (or at most 1e-9 absolute
//! where the derivative itself is below 1e-6), and the cosine similarity of the gradient at
//! least 0.999, on cartpole (free, and with the slider hitting its limit), box_slide (final x
//! with respect to the initial velocity and μ, at h = 2 ms and 10 ms) and box_incline sticking.

use contactlab_scenarios::{build, Scene};
use contactlab_solvers::ncp_fb::adjoint::{self, Mode, Parameter};
use contactlab_solvers::ncp_fb::{NcpFb, NcpFbParams};
use contactlab_solvers::{Model, State};
use nalgebra::DVector;
use serde_json::json;

/// Tight forward solves, so that the finite differences resolve the step map.
fn solver() -> NcpFb {
    NcpFb::new(NcpFbParams {
        newton_iterations: 60,
        tolerance: 1e-14,
        ncp_tolerance: 0.0,
        ..NcpFbParams::default()
    })
    .unwrap()
}

/// One input the gradient is checked for.
#[derive(Clone, Copy, Debug)]
enum Input {
    Q0(usize),
    V0(usize),
    Control { step: usize, actuator: usize },
    Friction,
}

/// A gradient case: a scene, a start, controls, a horizon and a linear loss of the final state
/// `L = a · q_N + b · v_N`.
struct Case {
    name: String,
    model: Model,
    initial: State,
    controls: Vec<Vec<f64>>,
    steps: usize,
    h: f64,
    a: DVector<f64>,
    b: DVector<f64>,
    inputs: Vec<Input>,
}

impl Case {
    fn loss_with(&self, input: Option<(Input, f64)>) -> f64 {
        let (mut model, mut initial, mut controls) =
            (self.model.clone(), self.initial.clone(), self.controls.clone());
        if let Some((i, d)) = input {
            match i {
                Input::Q0(k) => initial.q[k] += d,
                Input::V0(k) => initial.v[k] += d,
                Input::Control { step, actuator } => controls[step][actuator] += d,
                Input::Friction => {
                    let p = Parameter::Friction;
                    let v = p.get(&model);
                    p.set(&mut model, v + d);
                }
            }
        }
        let mut f = solver();
        let r = adjoint::rollout(&mut f, &model, &initial, &controls, self.steps, self.h);
        assert_eq!(r.tape.len(), self.steps, "{}: rollout ended early", self.name);
        let last = r.states.last().unwrap();
        self.a.dot(&last.q) + self.b.dot(&last.v)
    }

    /// (adjoint gradient, lagged gradient, rollout's unconverged step count) for the inputs.
    fn adjoint(&self, mode: Mode) -> (Vec<f64>, usize) {
        let mut f = solver();
        let r = adjoint::rollout(
            &mut f,
            &self.model,
            &self.initial,
            &self.controls,
            self.steps,
            self.h,
        );
        let unconverged = r.reports.iter().filter(|r| !r.converged).count();
        let n = r.tape.len();
        let (a, b) = (self.a.clone(), self.b.clone());
        let (nq, nv) = (self.model.nq, self.model.nv);
        let g = adjoint::backward(
            &f,
            &self.model,
            &r,
            &[Parameter::Friction],
            mode,
            &|k, _| {
                if k == n {
                    (a.clone(), b.clone())
                } else {
                    (DVector::zeros(nq), DVector::zeros(nv))
                }
            },
        );
        assert_eq!(g.dropped, 0, "{}: dropped assembly derivatives", self.name);
        let grad = self
            .inputs
            .iter()
            .map(|i| match *i {
                Input::Q0(k) => g.q0[k],
                Input::V0(k) => g.v0[k],
                Input::Control { step, actuator } => g.controls[step][actuator],
                Input::Friction => g.params[0],
            })
            .collect();
        (grad, unconverged)
    }

    /// Central differences with the step swept from 1e-3 to 1e-7; per input, the value closest
    /// to `reference` (the best step).
    fn finite_differences(&self, reference: &[f64]) -> Vec<f64> {
        self.inputs
            .iter()
            .zip(reference)
            .map(|(&i, &r)| {
                [1e-3, 1e-4, 1e-5, 1e-6, 1e-7]
                    .iter()
                    .map(|&d| {
                        (self.loss_with(Some((i, d))) - self.loss_with(Some((i, -d)))) / (2.0 * d)
                    })
                    .min_by(|x, y| (x - r).abs().total_cmp(&(y - r).abs()))
                    .unwrap()
            })
            .collect()
    }
}

/// Largest relative error (absolute where both are below 1e-6, reported against 1e-9 scaled so
/// that passing means ≤ 1) and the cosine similarity.
fn compare(adj: &[f64], fd: &[f64], rel_tol: f64) -> (f64, f64) {
    let mut worst: f64 = 0.0;
    for (&a, &f) in adj.iter().zip(fd) {
        let scale = a.abs().max(f.abs());
        let score = if scale < 1e-6 {
            (a - f).abs() / 1e-9
        } else {
            (a - f).abs() / scale / rel_tol
        };
        worst = worst.max(score);
    }
    let dot: f64 = adj.iter().zip(fd).map(|(a, f)| a * f).sum();
    let na = adj.iter().map(|a| a * a).sum::<f64>().sqrt();
    let nf = fd.iter().map(|f| f * f).sum::<f64>().sqrt();
    let cos = if na == 0.0 && nf == 0.0 {
        1.0
    } else {
        dot / (na * nf)
    };
    (worst, cos)
}

fn check(case: &Case) {
    let rel_tol = if case.steps == 1 { 1e-4 } else { 1e-3 };
    let (adj, unconverged) = case.adjoint(Mode::Exact);
    let fd = case.finite_differences(&adj);
    let (worst, cos) = compare(&adj, &fd, rel_tol);
    let (lagged, _) = case.adjoint(Mode::Lagged);
    let (lag_worst, lag_cos) = compare(&lagged, &fd, rel_tol);
    println!(
        "{}: adjoint {adj:?}\n  fd {fd:?}\n  score {worst:.3} (<= 1 passes), cos {cos:.9}, unconverged steps {unconverged}\n  lagged {lagged:?} score {lag_worst:.3e} cos {lag_cos:.6}",
        case.name
    );
    assert!(worst <= 1.0, "{}: error score {worst} > 1", case.name);
    assert!(cos >= 0.999, "{}: cosine {cos}", case.name);
}

fn cartpole(limit_hit: bool, steps: usize) -> Case {
    let scene: Scene = build("cartpole", &json!({})).unwrap();
    let mut initial = scene.initial.clone();
    // Free: slow cart, the pole swings. Limit: the cart at 3 m/s reaches x = 1 m at step ~30
    // (50 steps), or starts 1 cm from the limit (1 step).
    if limit_hit {
        if steps == 1 {
            initial.q[0] = 0.99;
        }
    } else {
        initial.v[0] = 0.2;
    }
    let nu = scene.model.actuators.len();
    let controls = (0..steps)
        .map(|k| vec![0.3 * ((k as f64) * 0.37).sin(); nu])
        .collect();
    let mut inputs = vec![Input::Q0(0), Input::Q0(1), Input::V0(0), Input::V0(1)];
    if nu > 0 {
        inputs.push(Input::Control { step: 0, actuator: 0 });
        inputs.push(Input::Control {
            step: steps / 2,
            actuator: 0,
        });
    }
    Case {
        name: format!(
            "cartpole {} {steps} steps",
            if limit_hit { "limit" } else { "free" }
        ),
        model: scene.model,
        initial,
        controls,
        steps,
        h: 0.01,
        a: DVector::from_vec(vec![0.7, -1.3]),
        b: DVector::from_vec(vec![0.4, 0.25]),
        inputs,
    }
}

#[test]
fn cartpole_free_one_and_fifty_steps() {
    check(&cartpole(false, 1));
    check(&cartpole(false, 50));
}

#[test]
fn cartpole_slider_hitting_its_limit() {
    check(&cartpole(true, 1));
    let case = cartpole(true, 50);
    // The limit is really hit within the horizon.
    let mut f = solver();
    let r = adjoint::rollout(&mut f, &case.model, &case.initial, &case.controls, 50, 0.01);
    let hit = r.tape.iter().any(|t| t.p.iter().any(|&p| p > 1e-6));
    assert!(hit, "the slider never reached its limit");
    check(&case);
}

fn box_slide(h: f64, steps: usize) -> Case {
    let scene = build("box_slide", &json!({})).unwrap();
    let (nq, nv) = (scene.model.nq, scene.model.nv);
    let mut a = DVector::zeros(nq);
    a[0] = 1.0; // final x
    Case {
        name: format!("box_slide h = {h} {steps} steps"),
        initial: scene.initial.clone(),
        model: scene.model,
        controls: Vec::new(),
        steps,
        h,
        a,
        b: DVector::zeros(nv),
        inputs: vec![Input::V0(0), Input::Friction],
    }
}

#[test]
fn box_slide_final_x_wrt_v0_and_mu() {
    for h in [0.002, 0.01] {
        check(&box_slide(h, 1));
        check(&box_slide(h, 50));
    }
}

#[test]
fn box_incline_sticking() {
    let scene = build("box_incline", &json!({"friction": 0.4, "angle_deg": 20.0})).unwrap();
    let (nq, nv) = (scene.model.nq, scene.model.nv);
    for steps in [1, 50] {
        let mut a = DVector::zeros(nq);
        a[0] = 1.0;
        a[2] = 0.5;
        let mut b = DVector::zeros(nv);
        b[0] = 0.3;
        let case = Case {
            name: format!("box_incline sticking {steps} steps"),
            model: scene.model.clone(),
            initial: scene.initial.clone(),
            controls: Vec::new(),
            steps,
            h: 0.01,
            a,
            b,
            inputs: vec![Input::V0(0), Input::V0(2), Input::Q0(0), Input::Friction],
        };
        check(&case);
    }
}
