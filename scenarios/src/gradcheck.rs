//! Gradient checks of the `ncp_fb` adjoint against central finite differences, on the cases of
//! the issue "ncp_fb" (cartpole free and at its slider limit, box_slide, box_incline sticking).
//!
//! A [`Case`] is a scene, a start, per-step controls, a horizon and a linear loss of the final
//! state `L = a · q_N + b · v_N`; [`Case::adjoint`] runs the forward rollout and one backward
//! sweep ([`contactlab_solvers::ncp_fb::adjoint`]), [`Case::finite_differences`] takes central
//! differences of the whole rollout with the step swept from 1e-3 to 1e-7 and the best step per
//! input (spec `ncp_fb_and_penalty.md` §2.7, §7.6), and [`compare`] scores the two. Used by the
//! test suite and by the `ncp_fb_adjoint` benchmark, which prints the lagged variant's error.

use contactlab_solvers::ncp_fb::adjoint::{self, Mode, Parameter};
use contactlab_solvers::ncp_fb::{NcpFb, NcpFbParams};
use contactlab_solvers::{Model, State};
use nalgebra::DVector;
use serde_json::json;

use crate::build;

/// FD steps swept (absolute, in the input's unit).
pub const FD_STEPS: [f64; 5] = [1e-3, 1e-4, 1e-5, 1e-6, 1e-7];

/// `ncp_fb` with tight forward solves (60 Newton iterations, residual tolerance 1e-14 m/s), so
/// that finite differences resolve the step map.
pub fn tight_solver() -> NcpFb {
    NcpFb::new(NcpFbParams {
        newton_iterations: 60,
        tolerance: 1e-14,
        ncp_tolerance: 0.0,
        ..NcpFbParams::default()
    })
    .expect("valid parameters")
}

/// One input the gradient is checked for.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// Initial position coordinate k.
    Q0(usize),
    /// Initial velocity coordinate k.
    V0(usize),
    /// Control of `actuator` at step `step`.
    Control {
        /// Step index.
        step: usize,
        /// Actuator index.
        actuator: usize,
    },
    /// Every contact's friction coefficient ([`Parameter::Friction`]).
    Friction,
    /// A model parameter ([`Parameter`]: friction, servo gains).
    Param(Parameter),
}

/// A gradient case.
#[derive(Debug, Clone)]
pub struct Case {
    /// Name for reports.
    pub name: String,
    /// The model.
    pub model: Model,
    /// The start.
    pub initial: State,
    /// Controls per step (missing steps: zeros).
    pub controls: Vec<Vec<f64>>,
    /// Number of steps N.
    pub steps: usize,
    /// Time step (s).
    pub h: f64,
    /// Loss weights on q_N (nq).
    pub a: DVector<f64>,
    /// Loss weights on v_N (nv).
    pub b: DVector<f64>,
    /// The inputs checked.
    pub inputs: Vec<Input>,
}

/// The adjoint's result for a case.
#[derive(Debug, Clone, PartialEq)]
pub struct AdjointResult {
    /// dL/d(input), in the order of [`Case::inputs`].
    pub gradient: Vec<f64>,
    /// Forward steps that ended unconverged.
    pub unconverged: usize,
    /// Assembly derivatives taken one-sided or dropped (contact set changes).
    pub one_sided: usize,
    /// Assembly derivatives dropped.
    pub dropped: usize,
}

impl Case {
    /// The loss with `input` moved by `delta` (None: the nominal loss).
    ///
    /// # Panics
    /// If the rollout ends early (diverges).
    pub fn loss_with(&self, input: Option<(Input, f64)>) -> f64 {
        let (mut model, mut initial, mut controls) = (
            self.model.clone(),
            self.initial.clone(),
            self.controls.clone(),
        );
        if let Some((i, d)) = input {
            match i {
                Input::Q0(k) => initial.q[k] += d,
                Input::V0(k) => initial.v[k] += d,
                Input::Control { step, actuator } => controls[step][actuator] += d,
                Input::Friction | Input::Param(_) => {
                    let p = match i {
                        Input::Param(p) => p,
                        _ => Parameter::Friction,
                    };
                    let v = p.get(&model);
                    p.set(&mut model, v + d);
                }
            }
        }
        let mut f = tight_solver();
        let r = adjoint::rollout(&mut f, &model, &initial, &controls, self.steps, self.h);
        assert_eq!(r.len(), self.steps, "{}: rollout ended early", self.name);
        let last = r.final_state();
        self.a.dot(&last.q) + self.b.dot(&last.v)
    }

    /// The gradient by one forward rollout and one backward sweep in `mode`.
    pub fn adjoint(&self, mode: Mode) -> AdjointResult {
        let mut f = tight_solver();
        let r = adjoint::rollout(
            &mut f,
            &self.model,
            &self.initial,
            &self.controls,
            self.steps,
            self.h,
        );
        let unconverged = r.unconverged();
        let n = r.len();
        let (nq, nv) = (self.model.nq, self.model.nv);
        // Friction first, then the inputs' own parameters, in order.
        let mut params = vec![Parameter::Friction];
        params.extend(self.inputs.iter().filter_map(|i| match i {
            Input::Param(p) => Some(p.clone()),
            _ => None,
        }));
        let g = adjoint::backward(&f, &self.model, &r, &params, mode, &|k, _| {
            if k == n {
                (self.a.clone(), self.b.clone())
            } else {
                (DVector::zeros(nq), DVector::zeros(nv))
            }
        });
        let mut next_param = 1;
        let gradient = self
            .inputs
            .iter()
            .map(|i| match *i {
                Input::Q0(k) => g.q0[k],
                Input::V0(k) => g.v0[k],
                Input::Control { step, actuator } => g.controls[step][actuator],
                Input::Friction => g.params[0],
                Input::Param(_) => {
                    next_param += 1;
                    g.params[next_param - 1]
                }
            })
            .collect();
        AdjointResult {
            gradient,
            unconverged,
            one_sided: g.one_sided,
            dropped: g.dropped,
        }
    }

    /// Central differences with the step swept over [`FD_STEPS`]; per input, the value closest
    /// to `reference` (the best step).
    pub fn finite_differences(&self, reference: &[f64]) -> Vec<f64> {
        self.inputs
            .iter()
            .zip(reference)
            .map(|(i, &r)| {
                FD_STEPS
                    .iter()
                    .map(|&d| {
                        (self.loss_with(Some((i.clone(), d)))
                            - self.loss_with(Some((i.clone(), -d))))
                            / (2.0 * d)
                    })
                    .min_by(|x, y| (x - r).abs().total_cmp(&(y - r).abs()))
                    .expect("FD_STEPS is not empty")
            })
            .collect()
    }

    /// The relative tolerance of the issue: 1e-4 for one step, 1e-3 over more.
    pub fn relative_tolerance(&self) -> f64 {
        if self.steps == 1 {
            1e-4
        } else {
            1e-3
        }
    }
}

/// How an adjoint gradient compares with finite differences.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    /// Largest relative error |a − f| / max(|a|, |f|) over the inputs whose derivative is at
    /// least 1e-6.
    pub max_relative: f64,
    /// Largest absolute error over the inputs whose derivative is below 1e-6.
    pub max_absolute_small: f64,
    /// Cosine similarity of the two gradient vectors.
    pub cosine: f64,
}

impl Comparison {
    /// Passes the issue's test: relative error ≤ `rel_tol` (absolute ≤ 1e-9 where the
    /// derivative is below 1e-6) and cosine ≥ 0.999.
    pub fn passes(&self, rel_tol: f64) -> bool {
        self.max_relative <= rel_tol && self.max_absolute_small <= 1e-9 && self.cosine >= 0.999
    }
}

/// Compare an adjoint gradient with finite differences.
pub fn compare(adj: &[f64], fd: &[f64]) -> Comparison {
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

/// cartpole (h = 10 ms) with a sinusoidal motor command: `limit_hit` false starts the cart at
/// 0.2 m/s (the pole swings freely); true keeps the scene's 3 m/s, which reaches the slider
/// limit at step ~30, or for one step starts 1 cm from the limit. Loss on all of q_N and v_N;
/// inputs q₀, v₀ and the controls of steps 0 and N/2.
///
/// # Panics
/// If the registered scene fails to build (a bug).
pub fn cartpole(limit_hit: bool, steps: usize) -> Case {
    let scene = build("cartpole", &json!({})).expect("cartpole builds");
    let mut initial = scene.initial.clone();
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
        inputs.push(Input::Control {
            step: 0,
            actuator: 0,
        });
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

/// box_slide (v₀ = 2 m/s, μ = 0.3): final x with respect to the initial velocity and μ.
///
/// # Panics
/// If the registered scene fails to build (a bug).
pub fn box_slide(h: f64, steps: usize) -> Case {
    let scene = build("box_slide", &json!({})).expect("box_slide builds");
    let (nq, nv) = (scene.model.nq, scene.model.nv);
    let mut a = DVector::zeros(nq);
    a[0] = 1.0;
    Case {
        name: format!("box_slide h = {h} s, {steps} steps"),
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

/// box_incline at 20° with μ = 0.4 (sticking), h = 10 ms: loss x_N + 0.5 z_N + 0.3 ẋ_N with
/// respect to ẋ₀, ż₀, x₀ and μ (the velocity and μ derivatives are tiny: the box sticks).
///
/// # Panics
/// If the registered scene fails to build (a bug).
pub fn box_incline_sticking(steps: usize) -> Case {
    let scene = build("box_incline", &json!({"friction": 0.4, "angle_deg": 20.0}))
        .expect("box_incline builds");
    let (nq, nv) = (scene.model.nq, scene.model.nv);
    let mut a = DVector::zeros(nq);
    a[0] = 1.0;
    a[2] = 0.5;
    let mut b = DVector::zeros(nv);
    b[0] = 0.3;
    Case {
        name: format!("box_incline sticking {steps} steps"),
        model: scene.model,
        initial: scene.initial,
        controls: Vec::new(),
        steps,
        h: 0.01,
        a,
        b,
        inputs: vec![Input::V0(0), Input::V0(2), Input::Q0(0), Input::Friction],
    }
}

/// box_traversal on flat ground (the box moved out of reach), h = 5 ms, wheels commanded at
/// 1.5 rad/s from rest: final chassis x with respect to the front-left wheel servo's k_v, its
/// first control and μ. Servo rows are implicit, so k_v enters the rows' α and b.
///
/// # Panics
/// If the registered scene fails to build (a bug).
pub fn robot_servo_gain(steps: usize) -> Case {
    let scene = build("box_traversal", &json!({"obstacle_x": 50.0})).expect("box_traversal builds");
    let (nq, nv) = (scene.model.nq, scene.model.nv);
    let mut a = DVector::zeros(nq);
    a[0] = 1.0;
    Case {
        name: format!("box_traversal servo gain {steps} steps"),
        controls: vec![vec![1.5; scene.model.actuators.len()]; steps],
        initial: scene.initial.clone(),
        model: scene.model,
        steps,
        h: 0.005,
        a,
        b: DVector::zeros(nv),
        inputs: vec![
            Input::Param(Parameter::ServoKv(0)),
            Input::Control {
                step: 0,
                actuator: 0,
            },
            Input::Friction,
        ],
    }
}

/// Every case of the issue, one step and 50 steps each.
pub fn issue_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for steps in [1, 50] {
        cases.push(cartpole(false, steps));
        cases.push(cartpole(true, steps));
        cases.push(box_slide(0.002, steps));
        cases.push(box_slide(0.01, steps));
        cases.push(box_incline_sticking(steps));
    }
    cases
}
