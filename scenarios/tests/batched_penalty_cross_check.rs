//! The batched penalty (`burn-ndarray`, f64) against the cpu penalty on the same cells
//! (issue 15): the largest |qpos difference| over the horizon at most 1e-9 on box_slide,
//! box_incline, sphere_roll and cartpole, and over the first 0.5 s of box_drop; ten cube tosses
//! (the first ten files, one batch of ten worlds with their own initial states) over the whole
//! recording. The cells' timestep is [`H`]. With `wgpu`, the f32
//! `burn-wgpu` engine (lavapipe in CI) within 1e-4 m over 1 s on the non-chaotic scenes.
#![cfg(feature = "burn")]

use contactlab_scenarios::{build, Scene};
use contactlab_solvers::batched::{BatchedPenalty, NdArrayF64};
use contactlab_solvers::engine::Stepper;
use contactlab_solvers::formulation::Formulation;
use contactlab_solvers::penalty::{Penalty, PenaltyParams};
use contactlab_solvers::State;
use serde_json::json;

/// Step the cpu penalty from each initial state and the batched stepper from all of them at
/// once for `steps` steps of `h`; returns the largest |qpos difference| over every world and
/// step.
fn max_qpos_difference(
    scene: &Scene,
    initial: &[State],
    mut batched: Box<dyn Stepper>,
    h: f64,
    steps: usize,
) -> f64 {
    let model = &scene.model;
    let nu = model.actuators.len();
    let mut cpu: Vec<(Penalty, State)> = initial
        .iter()
        .map(|s| (Penalty::new(PenaltyParams::default()).unwrap(), s.clone()))
        .collect();
    batched.write_states(initial);
    let mut worst: f64 = 0.0;
    for step in 0..steps {
        let mut controls = Vec::with_capacity(nu * cpu.len());
        for (f, s) in &mut cpu {
            let u = scene.controls_at(s.t, s);
            controls.extend_from_slice(&u);
            let r = f.step(model, s, &u, h);
            assert!(r.diverged.is_none(), "cpu diverged at step {step}");
        }
        batched.step(&controls, h, false);
        for ((_, s), b) in cpu.iter().zip(batched.read_states()) {
            let d = (&s.q - &b.q).amax();
            assert!(d.is_finite(), "non-finite difference at step {step}");
            worst = worst.max(d);
        }
    }
    worst
}

fn ndarray(scene: &Scene, worlds: usize) -> Box<dyn Stepper> {
    Box::new(BatchedPenalty::<NdArrayF64>::new(
        "burn-ndarray",
        &scene.model,
        PenaltyParams::default(),
        &scene.initial,
        worlds,
        Default::default(),
    ))
}

/// The cells' timestep (s): inside the penalty's stable plateau (spec §4.5: it ends at 0.5 ms;
/// at the scenes' own 2 ms a box that has slid to rest starts rocking, and that instability
/// amplifies round-off on either engine).
const H: f64 = 5e-4;

fn steps(seconds: f64, h: f64) -> usize {
    (seconds / h).round() as usize
}

#[test]
fn closed_form_scenes_agree_to_1e_9() {
    for (name, seconds) in [
        ("box_slide", None),
        ("box_incline", None),
        ("sphere_roll", None),
        ("cartpole", None),
        ("box_drop", Some(0.5)),
    ] {
        let scene = build(name, &json!({})).unwrap();
        let n = steps(seconds.unwrap_or(scene.horizon), H);
        let h = H;
        let d = max_qpos_difference(&scene, &[scene.initial.clone()], ndarray(&scene, 1), h, n);
        println!("{name}: {n} steps of {h} s, max |qpos difference| {d:.3e}");
        assert!(d <= 1e-9, "{name}: max |qpos difference| {d:e}");
    }
}

/// Ten tosses as one batch of ten worlds, each with its own initial state, over the whole
/// recording. A tumbling cube's repeated edge and corner impacts amplify any round-off
/// difference between the engines exponentially (before the batched engine followed the cpu
/// engine's order of operations, a last-bit difference born in free flight at step 14 grew to
/// 1e-13 m by step 370 and 1.3e-3 m by the end), so the bound holds only because the batched
/// step evaluates the cpu step's arithmetic in the same order: measured, the two agree exactly
/// (difference 0) on every step of every toss.
#[test]
fn ten_cube_tosses_in_one_batch_agree_to_1e_9_over_the_whole_recording() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/cube_toss");
    let scenes: Vec<Scene> = [1, 2, 5, 7, 8, 10, 11, 13, 14, 15]
        .iter()
        .map(|t| build("cube_toss", &json!({"dir": dir, "toss": t})).unwrap())
        .collect();
    let first = &scenes[0];
    let initial: Vec<State> = scenes.iter().map(|s| s.initial.clone()).collect();
    // The longest recording; shorter ones are held to the bound past their end.
    let horizon = scenes.iter().map(|s| s.horizon).fold(0.0, f64::max);
    let n = steps(horizon, H);
    let d = max_qpos_difference(first, &initial, ndarray(first, 10), H, n);
    println!("10 cube tosses: max |qpos difference| {d:.3e} over {n} steps of {H} s");
    assert!(d <= 1e-9, "cube tosses, whole recording: {d:e}");
}

/// Not yet run to completion: on lavapipe (2 shared cores) the four scenes did not finish
/// within 8 minutes (thousands of small kernels per step plus a readback per step for the
/// comparison), so it is ignored and not in `.ci/run` until the per-step program is fused or
/// batched per world-step (issue 15, part 5).
#[cfg(feature = "wgpu")]
#[test]
#[ignore]
fn wgpu_f32_agrees_to_1e_4_m_over_one_second() {
    for name in ["box_slide", "box_incline", "sphere_roll", "cartpole"] {
        let scene = build(name, &json!({})).unwrap();
        let h = H;
        let wgpu: Box<dyn Stepper> =
            Box::new(BatchedPenalty::<contactlab_solvers::batched::WgpuF32>::new(
                "burn-wgpu",
                &scene.model,
                PenaltyParams::default(),
                &scene.initial,
                1,
                Default::default(),
            ));
        let d = max_qpos_difference(&scene, &[scene.initial.clone()], wgpu, h, steps(1.0, h));
        println!("{name} on burn-wgpu: max |qpos difference| {d:.3e}");
        assert!(
            d <= 1e-4,
            "{name}: max |qpos difference| {d:e} on burn-wgpu"
        );
    }
}
