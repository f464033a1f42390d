//! Criterion benchmarks of `mesh_terrain` (issue 8, "the time a step spends in collision on
//! the mesh terrain is reported, so a per-step rebuild would show"): for each collider
//! (`trimesh`, `heightfield`) on the default 12,800-triangle procedural terrain,
//! * `collision/<collider>`: `collision::detect` alone (broad phase, parry BVH query, manifolds)
//!   at a state of the robot driving (soft_convex, h = 2 ms, after 1 s);
//! * `step/<collider>`: one full soft_convex step from that state (collision included);
//! * `rebuild/<collider>`: building the terrain's parry shape (BVH included) once, what every
//!   step would add if the acceleration structure were rebuilt per step.
//!
//! Run: `cargo bench -p contactlab-scenarios --bench mesh_terrain_collision` (add `-- --quick`
//! for a fast estimate).

use contactlab_scenarios::benchmark::mesh_terrain::TERRAIN_GEOM;
use contactlab_scenarios::{build, Scene};
use contactlab_solvers::collision::{collision_shape, detect};
use contactlab_solvers::formulation::Formulation;
use contactlab_solvers::kinematics::forward_kinematics;
use contactlab_solvers::soft_convex::{SoftConvex, SoftConvexParams};
use contactlab_solvers::State;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use serde_json::json;
use std::hint::black_box;

const H: f64 = 0.002;

/// The scene with `collider`, the warm-started formulation and the state after 1 s of driving.
fn driving(collider: &str) -> (Scene, SoftConvex, State) {
    let scene = build("mesh_terrain", &json!({ "collider": collider })).unwrap();
    let mut f = SoftConvex::new(SoftConvexParams::default()).unwrap();
    let mut s = scene.initial.clone();
    while s.t < 1.0 - 1e-9 {
        let u = scene.controls_at(s.t, &s);
        f.step(&scene.model, &mut s, &u, H);
    }
    (scene, f, s)
}

fn mesh_terrain(c: &mut Criterion) {
    let mut g = c.benchmark_group("mesh_terrain");
    for collider in ["trimesh", "heightfield"] {
        let (scene, f, s) = driving(collider);
        let kin = forward_kinematics(&scene.model, &s.q);
        let n = detect(&scene.model, &kin).len();
        println!("{collider}: {n} contacts at t = {:.3} s", s.t);
        g.bench_function(format!("collision/{collider}"), |b| {
            b.iter(|| detect(black_box(&scene.model), black_box(&kin)))
        });
        let u = scene.controls_at(s.t, &s);
        g.bench_function(format!("step/{collider}"), |b| {
            b.iter_batched(
                || (f.clone(), s.clone()),
                |(mut f, mut s)| f.step(&scene.model, &mut s, &u, H),
                BatchSize::SmallInput,
            )
        });
        let terrain = &scene.model.geoms[scene.model.geom_id(TERRAIN_GEOM).unwrap()];
        g.bench_function(format!("rebuild/{collider}"), |b| {
            b.iter(|| collision_shape(&terrain.name, black_box(&terrain.shape)).unwrap())
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = mesh_terrain
}
criterion_main!(benches);
