//! The batched soft_convex and signorini (`burn-ndarray`, f64) against the cpu engine on the
//! wheeled robot (issue 16's control synthesis, issue 17's robot scene class): box_traversal
//! with MuJoCo's `implicitfast` integrator (the wheels' velocity servos, kv = 250 N m s/rad,
//! are unstable explicitly at h = 50 ms: `h kv / I` = 37), its wheels' line contacts
//! (`line_contact_as_point`: parry's segment on the plane, the closed form on the box, one
//! merged point), at the control-synthesis timestep h = 50 ms over the whole 6 s crossing, the
//! nominal instance and four seeded ones in one batch with their own start poses.
#![cfg(feature = "burn")]

use contactlab_scenarios::build;
use contactlab_solvers::engine::Stepper;
use contactlab_solvers::formulation;
use contactlab_solvers::State;
use serde_json::{json, Value};

/// Largest |qpos difference| between the cpu engine and one batch of `seeds.len()` worlds over
/// `horizon` s of `h`, and the final chassis x of the first world (m).
fn robot_difference(name: &str, params: &Value, seeds: &[u64], h: f64, horizon: f64) -> (f64, f64) {
    let scenes: Vec<_> = seeds
        .iter()
        .map(|s| build("box_traversal", &json!({"seed": s, "horizon": horizon})).unwrap())
        .collect();
    let model = &scenes[0].model;
    let initial: Vec<State> = scenes.iter().map(|s| s.initial.clone()).collect();
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
    batched.write_states(&initial);
    let steps = (horizon / h).round() as usize;
    let mut worst: f64 = 0.0;
    for step in 0..steps {
        let mut u = Vec::new();
        for (scene, (f, s)) in scenes.iter().zip(&mut cpu) {
            let c = scene.controls_at(s.t, s);
            u.extend_from_slice(&c);
            let r = f.step(model, s, &c, h);
            assert!(r.diverged.is_none(), "cpu diverged at step {step}");
        }
        let reports = batched.step(&u, h, true);
        for (w, r) in reports.iter().enumerate() {
            assert!(
                r.diverged.is_none(),
                "world {w}, step {step}: {:?}",
                r.diverged
            );
        }
        for ((_, s), b) in cpu.iter().zip(batched.read_states()) {
            let d = (&s.q - &b.q).amax();
            assert!(d.is_finite(), "non-finite difference at step {step}");
            worst = worst.max(d);
        }
    }
    (worst, cpu[0].1.q[0])
}

#[test]
fn box_traversal_under_implicitfast_agrees_with_the_cpu_engine() {
    let seeds = [0, 1, 2, 3, 4];
    for name in ["soft_convex", "signorini"] {
        let params = json!({"integrator": "implicitfast"});
        let (d, x) = robot_difference(name, &params, &seeds, 0.05, 6.0);
        println!("{name}, box_traversal, 5 worlds, h = 50 ms, 6 s: max |qpos difference| {d:.3e}, final x {x:.4} m");
        // Crossed: at least 0.5 m past the box's far face (x = 1.74 m), the usability test's
        // distance.
        assert!(
            x > 2.24,
            "{name}: the nominal robot did not cross the box (x = {x})"
        );
        assert!(d <= 1e-9, "{name}: {d:e}");
    }
}

/// The batched penalty on the robot: its own semi-implicit Euler, so at a timestep inside its
/// stable plateau (0.5 ms; spec `ncp_fb_and_penalty.md` §4.5), with the same contact
/// candidates as the soft solvers (the wheels' merged line contacts, the wheel–box closed
/// form), over the whole crossing.
#[test]
fn box_traversal_penalty_agrees_with_the_cpu_engine() {
    let (d, x) = robot_difference("penalty", &json!({}), &[0, 1, 2], 5e-4, 6.0);
    println!("penalty, box_traversal, 3 worlds, h = 0.5 ms, 6 s: max |qpos difference| {d:.3e}, final x {x:.4} m");
    assert!(
        x > 2.24,
        "penalty: the nominal robot did not cross the box (x = {x})"
    );
    assert!(d <= 1e-9, "penalty: {d:e}");
}

/// A world where the cpu engine would collide by a rule the batched engine lacks ends with the
/// reason naming the pair: the robot rolled onto its side (a wheel's cap on the ground), and
/// its chassis box dropped onto the obstacle box (box–box). The other worlds go on.
#[test]
fn worlds_outside_the_class_end_with_the_pair_named() {
    use nalgebra::UnitQuaternion;
    let scene = build("box_traversal", &json!({})).unwrap();
    let model = &scene.model;
    let params = json!({"integrator": "implicitfast"});
    let mut on_side = scene.initial.clone();
    let roll = UnitQuaternion::from_axis_angle(&nalgebra::Vector3::x_axis(), 1.4);
    // The right wheel's centre 0.36 m below the chassis origin, 0.30 m above the ground.
    on_side.q[2] = 0.66;
    on_side.q[3] = roll.w;
    on_side.q[4] = roll.i;
    let mut on_box = scene.initial.clone();
    // Chassis box (centre 0.35 m behind the origin, 0.05 m above it, half-height 0.08 m) just
    // inside the obstacle's top (z = 0.12 m) over its middle (x = 1.37 m).
    on_box.q[0] = 1.37 + 0.35;
    on_box.q[2] = 0.12 + 0.08 - 0.05 - 1e-3;
    let initial = [scene.initial.clone(), on_side, on_box];
    let mut b = contactlab_solvers::batched::stepper(
        "burn-ndarray",
        "soft_convex",
        &params,
        model,
        &initial[0],
        3,
    )
    .unwrap();
    b.write_states(&initial);
    let r = b.step(&[2.0; 9], 0.05, false);
    assert!(r[0].diverged.is_none(), "{:?}", r[0].diverged);
    let side = r[1].diverged.as_deref().unwrap_or("");
    assert!(side.contains("'ground'") && side.contains("cap"), "{side}");
    let top = r[2].diverged.as_deref().unwrap_or("");
    assert!(
        top.contains("'chassis_geom'") && top.contains("box–box"),
        "{top}"
    );
}

/// implicitfast on a model with a standalone free body (its gyroscopic derivative, MuJoCo's
/// `mjd_freeMhat`, is not batched) is refused naming the joint.
#[test]
fn implicitfast_with_a_standalone_free_body_is_refused() {
    let scene = build("box_drop", &json!({})).unwrap();
    let e = contactlab_solvers::batched::stepper(
        "burn-ndarray",
        "soft_convex",
        &json!({"integrator": "implicitfast"}),
        &scene.model,
        &scene.initial,
        1,
    )
    .err()
    .expect("refused")
    .to_string();
    assert!(e.contains("implicitfast") && e.contains("free"), "{e}");
}
