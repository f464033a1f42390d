//! A throughput probe (ignored; speed is measured, never asserted): world-steps per second of
//! the penalty on box_drop at 4,096 worlds, cpu engine (rayon over the machine's cores) against
//! burn-ndarray as the engine registry builds it (one shard per thread), a quick check beside
//! the throughput study (`configs/throughput.yaml`, which records the number). Run with
//! `cargo test --locked -p contactlab-scenarios --features burn --test batched_throughput_probe
//! -- --ignored --nocapture`.
#![cfg(feature = "burn")]

use std::time::Instant;

use contactlab_scenarios::build;
use contactlab_solvers::engine::{batched_stepper, CpuStepper, Stepper};
use serde_json::json;

fn world_steps_per_s(s: &mut dyn Stepper, steps: usize) -> f64 {
    let u = vec![0.0; 0];
    s.step(&u, 5e-4, false); // warm-up
    let t = Instant::now();
    for _ in 0..steps {
        s.step(&u, 5e-4, false);
    }
    let states = s.read_states();
    assert!(states.iter().all(|x| x.is_finite()));
    (steps * s.worlds()) as f64 / t.elapsed().as_secs_f64()
}

#[test]
#[ignore]
fn box_drop_at_4096_worlds() {
    let scene = build("box_drop", &json!({})).unwrap();
    let w = 4096;
    let mut cpu = CpuStepper::new(&scene.model, &scene.initial, w, || {
        contactlab_solvers::formulation::build("penalty", &json!({}))
    })
    .unwrap();
    let mut burn = batched_stepper(
        "burn-ndarray",
        "penalty",
        &json!({}),
        &scene.model,
        &scene.initial,
        w,
    )
    .unwrap();
    let c = world_steps_per_s(&mut cpu, 20);
    let b = world_steps_per_s(burn.as_mut(), 20);
    println!(
        "box_drop, {w} worlds, {} threads: cpu {c:.3e} world-steps/s, burn-ndarray {b:.3e}, ratio {:.2}",
        rayon::current_num_threads(),
        b / c
    );
}
