//! The batched soft_convex and signorini (`burn-ndarray`, f64) against the cpu engine on the
//! same cells (issue 16): the largest |qpos difference| over the horizon at most 1e-9 on every
//! shared MuJoCo reference scene of the batched class (box_slide, the first 0.5 s of box_drop,
//! both inclines, sphere_roll, cartpole; pyramidal and elliptic cones; Newton, and CG on two;
//! and sphere_bounce, a sphere–box contact that activates and releases),
//! on ten cube tosses (one batch of ten worlds with their own initial states), and signorini on
//! its Genesis reference scenes. Timestep: MuJoCo's 2 ms of the references.
#![cfg(feature = "burn")]

use std::path::PathBuf;

use contactlab_scenarios::mjcf::load_file;
use contactlab_scenarios::{build, Scene};
use contactlab_solvers::engine::Stepper;
use contactlab_solvers::formulation;
use contactlab_solvers::{Model, State};
use serde_json::{json, Value};

const H: f64 = 0.002;

/// Step the cpu formulation from each initial state and the batched stepper from all of them
/// at once for `steps` steps of `h` under the scene's controls; returns the largest |qpos
/// difference| over every world and step.
fn max_qpos_difference(
    model: &Model,
    controls: &dyn Fn(&State) -> Vec<f64>,
    initial: &[State],
    name: &str,
    params: &Value,
    steps: usize,
) -> f64 {
    let nu = model.actuators.len();
    let mut cpu: Vec<_> = initial
        .iter()
        .map(|s| (formulation::build(name, params).unwrap(), s.clone()))
        .collect();
    let mut batched: Box<dyn Stepper> = contactlab_solvers::batched::stepper(
        "burn-ndarray",
        name,
        params,
        model,
        &initial[0],
        initial.len(),
    )
    .unwrap();
    batched.write_states(initial);
    let mut worst: f64 = 0.0;
    for step in 0..steps {
        let mut u = Vec::with_capacity(nu * cpu.len());
        for (f, s) in &mut cpu {
            let c = controls(s);
            u.extend_from_slice(&c);
            let r = f.step(model, s, &c, H);
            assert!(r.diverged.is_none(), "cpu diverged at step {step}");
        }
        let reports = batched.step(&u, H, false);
        assert_eq!(reports.len(), cpu.len());
        for ((_, s), b) in cpu.iter().zip(batched.read_states()) {
            let d = (&s.q - &b.q).amax();
            assert!(d.is_finite(), "non-finite difference at step {step}");
            worst = worst.max(d);
        }
    }
    worst
}

fn scene_difference(scene: &Scene, name: &str, params: Value, seconds: f64) -> f64 {
    let steps = (seconds / H).round() as usize;
    let controls = |s: &State| scene.controls_at(s.t, s);
    max_qpos_difference(
        &scene.model,
        &controls,
        &[scene.initial.clone()],
        name,
        &params,
        steps,
    )
}

#[test]
fn soft_convex_agrees_to_1e_9_on_the_mujoco_reference_scenes() {
    let cases: &[(&str, Value, Value, f64)] = &[
        ("box_slide", json!({}), json!({"cone": "pyramidal"}), 1.0),
        ("box_slide", json!({}), json!({"cone": "elliptic"}), 1.0),
        ("box_drop", json!({}), json!({"cone": "pyramidal"}), 0.5),
        ("box_drop", json!({}), json!({"cone": "elliptic"}), 0.5),
        (
            "box_incline",
            json!({"friction": 0.4}),
            json!({"cone": "pyramidal"}),
            1.0,
        ),
        (
            "box_incline",
            json!({"friction": 0.4}),
            json!({"cone": "elliptic"}),
            1.0,
        ),
        (
            "box_incline",
            json!({"friction": 0.3}),
            json!({"cone": "pyramidal"}),
            1.0,
        ),
        (
            "box_incline",
            json!({"friction": 0.3}),
            json!({"cone": "elliptic"}),
            1.0,
        ),
        ("sphere_roll", json!({}), json!({"cone": "pyramidal"}), 1.0),
        ("sphere_roll", json!({}), json!({"cone": "elliptic"}), 1.0),
        ("cartpole", json!({}), json!({"cone": "pyramidal"}), 3.0),
        ("box_slide", json!({}), json!({"solver": "cg"}), 1.0),
        (
            "sphere_bounce",
            json!({}),
            json!({"cone": "pyramidal"}),
            0.4,
        ),
        (
            "sphere_bounce",
            json!({"friction": 0.5}),
            json!({"cone": "elliptic"}),
            0.4,
        ),
        (
            "box_drop",
            json!({}),
            json!({"solver": "cg", "cone": "elliptic"}),
            0.5,
        ),
    ];
    let mut failures = Vec::new();
    for (scene, sp, params, seconds) in cases {
        let s = build(scene, sp).unwrap();
        let d = scene_difference(&s, "soft_convex", params.clone(), *seconds);
        println!("{scene} {sp} {params}: max |qpos difference| {d:.3e} over {seconds} s");
        if d > 1e-9 {
            failures.push(format!("{scene} {sp} {params}: {d:e}"));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

fn cube_tosses() -> Vec<Scene> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/cube_toss");
    [1, 2, 5, 7, 8, 10, 11, 13, 14, 15]
        .iter()
        .map(|t| build("cube_toss", &json!({"dir": dir, "toss": t})).unwrap())
        .collect()
}

/// Ten tosses as one batch of ten worlds, each from its own initial state, over the longest
/// recording.
#[test]
fn ten_cube_tosses_in_one_batch_agree_to_1e_9() {
    let scenes = cube_tosses();
    let first = &scenes[0];
    let initial: Vec<State> = scenes.iter().map(|s| s.initial.clone()).collect();
    let horizon = scenes.iter().map(|s| s.horizon).fold(0.0, f64::max);
    let steps = (horizon / H).round() as usize;
    let controls = |s: &State| first.controls_at(s.t, s);
    for name in ["soft_convex", "signorini"] {
        let d = max_qpos_difference(&first.model, &controls, &initial, name, &json!({}), steps);
        println!("{name}, 10 cube tosses: max |qpos difference| {d:.3e} over {steps} steps");
        assert!(d <= 1e-9, "{name}, cube tosses: {d:e}");
    }
}

fn reference(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/reference")
        .join(rel)
}

/// signorini with Genesis' options on its reference scenes (`signorini_genesis.rs`), 1 s each.
#[test]
fn signorini_agrees_to_1e_9_on_the_genesis_reference_scenes() {
    let params = json!({"iterations": 100, "tolerance": 1e-10, "impratio": 1.0});
    for xml in [
        "scenes/box_slide_elliptic.xml",
        "genesis/scenes/box_incline_mu0p30_elliptic.xml",
        "scenes/box_incline_mu0p40_elliptic.xml",
        "genesis/scenes/sphere_roll_elliptic.xml",
    ] {
        let m = load_file(reference(xml), None).unwrap();
        let none = |_: &State| Vec::new();
        let d = max_qpos_difference(
            &m.model,
            &none,
            &[m.initial.clone()],
            "signorini",
            &params,
            500,
        );
        println!("signorini {xml}: max |qpos difference| {d:.3e}");
        assert!(d <= 1e-9, "signorini {xml}: {d:e}");
    }
}

/// Steps of the f64 engine before an f32 comparison starts (see [`wgpu_over_one_second`]).
#[cfg(feature = "wgpu")]
const SETTLE: usize = 10;

/// The f32 `burn-wgpu` engine (lavapipe in CI) against the cpu engine over 1 s of `scenes`
/// (name, scene parameters, formulation parameters), from the cpu state after [`SETTLE`]
/// steps, compared every 10 steps; the largest |qpos difference| (m) per scene.
#[cfg(feature = "wgpu")]
fn wgpu_over_one_second(name: &str, scenes: &[(&str, Value, Value)]) -> Vec<f64> {
    scenes
        .iter()
        .map(|(scene, sp, params)| {
            let s = build(scene, sp).unwrap();
            let t0 = std::time::Instant::now();
            let mut f = formulation::build(name, params).unwrap();
            // Start from the f64 state after SETTLE steps: the scenes begin with the body
            // exactly touching the plane (a gap of 0 or ±1e-17 m), where rounding the gap to
            // f32 decides whether the first step has contact rows, and a soft row holds the
            // body at once where f64 lets it fall for a step (3.4e-5 m on sphere_roll, which
            // stays as a 1.5e-4 m offset; with the contact established the two agree to
            // 1.4e-6 m, measured on f32 ndarray).
            let mut state = s.initial.clone();
            for _ in 0..SETTLE {
                let u = s.controls_at(state.t, &state);
                f.step(&s.model, &mut state, &u, H);
            }
            let mut gpu = contactlab_solvers::batched::stepper(
                "burn-wgpu",
                name,
                params,
                &s.model,
                &state,
                1,
            )
            .unwrap();
            let steps = (1.0 / H).round() as usize;
            let mut worst: f64 = 0.0;
            for k in 0..steps {
                let u = s.controls_at(state.t, &state);
                f.step(&s.model, &mut state, &u, H);
                gpu.step(&u, H, false);
                if (k + 1) % 10 == 0 {
                    let b = gpu.read_state(0);
                    worst = worst.max((&state.q - &b.q).amax());
                }
            }
            println!(
                "{name} {scene} {params} on burn-wgpu: {steps} steps, max |qpos difference| {worst:.3e} ({:.0} s)",
                t0.elapsed().as_secs_f64()
            );
            worst
        })
        .collect()
}

/// soft_convex in f32 on `burn-wgpu` within 1e-4 m of the cpu engine over 1 s on cartpole (its
/// limit) and sphere_roll (one rolling contact). Measured on lavapipe (2 cores): cartpole
/// 5.9e-6 m (38 s), sphere_roll 1.4e-6 m (164 s).
#[cfg(feature = "wgpu")]
#[test]
fn wgpu_f32_agrees_to_1e_4_m_over_one_second() {
    let scenes = [
        ("cartpole", json!({}), json!({})),
        ("sphere_roll", json!({}), json!({})),
    ];
    for ((scene, ..), d) in scenes
        .iter()
        .zip(wgpu_over_one_second("soft_convex", &scenes))
    {
        assert!(d <= 1e-4, "soft_convex {scene}: {d:e} on burn-wgpu");
    }
}

/// signorini in f32 on `burn-wgpu`, the same bound and scenes. Ignored in CI for its time:
/// signorini's exit test asks for both the scaled gradient and the Newton decrement below the
/// tolerance (no improvement test), which f32 arithmetic does not reach, so every step with a
/// row runs most of its 100-iteration budget and reports `converged: false`. Measured on
/// lavapipe: cartpole 5.9e-6 m in 182 s at tolerance 1e-8, 6.4e-6 m in 151 s at 1e-6
/// (soft_convex: 38 s).
#[cfg(feature = "wgpu")]
#[test]
#[ignore = "signorini in f32 runs its whole iteration budget: minutes per scene on lavapipe"]
fn wgpu_f32_signorini_agrees_to_1e_4_m_over_one_second() {
    let params = json!({"tolerance": 1e-6});
    let scenes = [
        ("cartpole", json!({}), params.clone()),
        ("sphere_roll", json!({}), params.clone()),
    ];
    for ((scene, ..), d) in scenes
        .iter()
        .zip(wgpu_over_one_second("signorini", &scenes))
    {
        assert!(d <= 1e-4, "signorini {scene}: {d:e} on burn-wgpu");
    }
}

/// The same bound on box_slide and box_incline (four contacts each). Ignored in CI for its
/// time on lavapipe (each box step is tens of thousands of small kernels); on f32 ndarray the
/// same comparison gives box_slide 1.3e-6 m and box_incline 1.1e-7 m.
#[cfg(feature = "wgpu")]
#[test]
#[ignore = "minutes per scene on lavapipe; run with --ignored on a GPU"]
fn wgpu_f32_boxes_agree_to_1e_4_m_over_one_second() {
    let scenes = [
        ("box_slide", json!({}), json!({})),
        ("box_incline", json!({"friction": 0.4}), json!({})),
    ];
    for ((scene, ..), d) in scenes
        .iter()
        .zip(wgpu_over_one_second("soft_convex", &scenes))
    {
        assert!(d <= 1e-4, "soft_convex {scene}: {d:e} on burn-wgpu");
    }
}
