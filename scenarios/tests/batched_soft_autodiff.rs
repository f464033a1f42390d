//! Reverse mode through the batched soft_convex and signorini (issue 16): the gradient study's
//! `autodiff` method (burn's `Autodiff` over ndarray, f64; every solver and line-search
//! iteration on the tape) against MuJoCo's anchor d x(1 s)/d vx0 = 0.67530147 on box_slide
//! (within 1e-5 relative) and against the study's f64 central-difference reference of the cpu
//! engine over 50 steps on cartpole at its limit and the bouncing sphere (at most 1e-4
//! relative), finite at every horizon of a sweep across the contact's activation and release
//! (steps 5 and 101 at 2 ms) and the limit's activation (MJX reports NaN there: mujoco#1517,
//! #2841).
#![cfg(feature = "burn")]

use contactlab_scenarios::build;
use contactlab_scenarios::gradient::cases::{self, parse_loss};
use contactlab_scenarios::gradient::methods::{availability_for, compute, Method};
use contactlab_scenarios::gradient::reference::{
    reference, score, MAX_UNCERTAINTY, REFERENCE_STEPS,
};
use contactlab_scenarios::gradient::{FormulationRef, Input, Problem};
use contactlab_solvers::formulation::{self, Formulation};
use serde_json::{json, Value};

fn gradient(p: &Problem, name: &str, params: &Value) -> Vec<f64> {
    let build_f = || -> Result<Box<dyn Formulation>, String> {
        formulation::build(name, params).map_err(|e| e.to_string())
    };
    let f = FormulationRef {
        name,
        params,
        build: &build_f,
    };
    availability_for("autodiff", name, p).unwrap();
    compute(Method::Autodiff, p, f).unwrap().gradient
}

#[test]
fn box_slide_dx_dvx0_matches_mujocos_anchor() {
    let scene = build("box_slide", &json!({})).unwrap();
    let steps = 500;
    let loss = parse_loss(&scene, "qpos[0]").unwrap();
    let inputs = vec![Input::parse(&scene.model, "qvel[0]", steps).unwrap()];
    let p = Problem::from_scene("box_slide", &scene, steps, 0.002, loss, inputs);
    for name in ["soft_convex"] {
        let g = gradient(&p, name, &json!({}))[0];
        let rel = (g / 0.67530147 - 1.0).abs();
        println!("{name}: d x(1 s)/d vx0 = {g:.10} (MuJoCo 0.67530147, rel. {rel:.2e})");
        assert!(rel <= 1e-5, "{name}: {g} vs 0.67530147 ({rel:e})");
    }
}

/// The gradient is finite at every horizon of `horizons`, and at 50 steps within 1e-4
/// relative of the central-difference reference.
fn sweep_and_check(case: &str, name: &str, params: Value, horizons: &[usize]) {
    for &steps in horizons {
        let p = cases::find(case).unwrap().problem(steps, None).unwrap();
        let g = gradient(&p, name, &params);
        assert!(
            g.iter().all(|x| x.is_finite()),
            "{case}, {name}, {steps} steps: {g:?}"
        );
        if steps != 50 {
            continue;
        }
        let build_f = || -> Result<Box<dyn Formulation>, String> {
            formulation::build(name, &params).map_err(|e| e.to_string())
        };
        let f = FormulationRef {
            name,
            params: &params,
            build: &build_f,
        };
        let r = reference(&p, f, &REFERENCE_STEPS, MAX_UNCERTAINTY).unwrap();
        assert!(r.undefined.is_none(), "{case}: {:?}", r.undefined);
        let s = score(&g, &r);
        println!(
            "{case}, {name}, 50 steps: autodiff {g:?}\n  reference {:?} (uncertainty {:.1e})\n  max rel. error {:.2e}",
            r.gradient,
            r.max_uncertainty(),
            s.max_relative
        );
        assert!(s.max_relative <= 1e-4, "{case}, {name}: {s:?}");
    }
}

#[test]
fn cartpole_at_its_limit() {
    // h = 10 ms: the slider reaches its limit at step ~34.
    let horizons: Vec<usize> = (1..=10)
        .chain((15..=30).step_by(5))
        .chain(31..=50)
        .collect();
    sweep_and_check("cartpole_limit", "soft_convex", json!({}), &horizons);
    sweep_and_check("cartpole_limit", "signorini", json!({}), &horizons);
}

#[test]
fn bouncing_sphere_across_activation_and_release() {
    // h = 2 ms: the contact activates inside step 5 and releases inside step 101.
    let horizons: Vec<usize> = vec![1, 4, 5, 6, 50, 101, 102, 120];
    sweep_and_check("sphere_bounce", "soft_convex", json!({}), &horizons);
    sweep_and_check("sphere_bounce", "signorini", json!({}), &horizons);
}
