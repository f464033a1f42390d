//! Criterion benchmarks of one soft_convex step (issue: soft_convex, "Speed"): box_drop in
//! flight, at impact and at rest, cartpole, and 64 box_drop worlds stepped on 2 threads.
//! Compare with MuJoCo's steps per second in `scenarios/tests/reference/perf/mujoco_perf.json`
//! (box_drop 271k one thread, 501k for 64 worlds on two threads; cartpole 572k).
//!
//! Run: `cargo bench -p contactlab-scenarios --bench soft_convex_step`.

use contactlab_scenarios::build;
use contactlab_solvers::formulation::Formulation;
use contactlab_solvers::soft_convex::{SoftConvex, SoftConvexParams};
use contactlab_solvers::State;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use rayon::prelude::*;
use serde_json::json;

const H: f64 = 0.002;

/// The box_drop state after `t` seconds of soft_convex, with the warm-started formulation.
fn box_drop_at(t: f64) -> (contactlab_scenarios::Scene, SoftConvex, State) {
    let scene = build("box_drop", &json!({})).unwrap();
    let mut f = SoftConvex::new(SoftConvexParams::default()).unwrap();
    let mut s = scene.initial.clone();
    while s.t < t - 1e-9 {
        f.step(&scene.model, &mut s, &[], H);
    }
    (scene, f, s)
}

fn single_steps(c: &mut Criterion) {
    let mut g = c.benchmark_group("soft_convex_step");
    g.throughput(Throughput::Elements(1));
    // In flight (t = 0.1 s), first contact steps (0.216 s), resting (1.5 s).
    for (label, t) in [
        ("box_drop_in_flight", 0.1),
        ("box_drop_at_impact", 0.216),
        ("box_drop_at_rest", 1.5),
    ] {
        let (scene, f, s) = box_drop_at(t);
        g.bench_function(label, |b| {
            b.iter_batched(
                || (f.clone(), s.clone()),
                |(mut f, mut s)| f.step(&scene.model, &mut s, &[], H),
                BatchSize::SmallInput,
            )
        });
    }
    let scene = build("cartpole", &json!({})).unwrap();
    let f = SoftConvex::new(SoftConvexParams::default()).unwrap();
    g.bench_function("cartpole", |b| {
        b.iter_batched(
            || (f.clone(), scene.initial.clone()),
            |(mut f, mut s)| f.step(&scene.model, &mut s, &[0.0], H),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn batch_64_worlds(c: &mut Criterion) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let scene = build("box_drop", &json!({})).unwrap();
    let mut g = c.benchmark_group("soft_convex_batch");
    // 64 worlds x 100 steps from the drop: world-steps per iteration.
    g.throughput(Throughput::Elements(64 * 100));
    g.bench_function("box_drop_64_worlds_2_threads_100_steps", |b| {
        b.iter_batched(
            || {
                (0..64)
                    .map(|_| {
                        (
                            SoftConvex::new(SoftConvexParams::default()).unwrap(),
                            scene.initial.clone(),
                        )
                    })
                    .collect::<Vec<_>>()
            },
            |mut worlds| {
                pool.install(|| {
                    worlds.par_iter_mut().for_each(|(f, s)| {
                        for _ in 0..100 {
                            f.step(&scene.model, s, &[], H);
                        }
                    })
                });
                worlds
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, single_steps, batch_64_worlds);
criterion_main!(benches);
