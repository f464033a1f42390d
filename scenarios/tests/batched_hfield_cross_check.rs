//! The batched engine (`burn-ndarray`, f64) against the cpu engine on the wheeled robot driving
//! over height-field terrain (issue 17's robot scene class): `mesh_terrain` with
//! `{"collider": "heightfield"}` (80 × 80 cells of 0.3 m, |h| ≤ 0.3 m), five worlds of one
//! terrain with their own start poses and headings, so that the wheels cross sloped
//! triangles, cell edges and triangle diagonals. Each wheel's contacts are the cpu engine's
//! (`solvers/src/batched/height_field.rs`: parry's cell window, each triangle's plane, the
//! point-over-triangle test, the duplicate test and the line-contact merge), so the states
//! agree to round-off: max |qpos difference| ≤ 1e-9 over the horizon, no world diverged or
//! left the class, and every robot travelled.
#![cfg(feature = "burn")]

use contactlab_scenarios::build;
use contactlab_solvers::engine::Stepper;
use contactlab_solvers::formulation;
use contactlab_solvers::kinematics::forward_kinematics;
use contactlab_solvers::State;
use serde_json::{json, Value};

/// Start positions (m) and headings (degrees) of the worlds, all on the default terrain.
const STARTS: [([f64; 2], f64); 5] = [
    ([0.0, 0.0], 0.0),
    ([-3.0, 2.0], 30.0),
    ([4.0, -5.0], 135.0),
    ([-6.0, -6.0], 250.0),
    ([2.0, 7.0], -60.0),
];

/// What one comparison measured.
struct Measured {
    /// Largest |qpos difference| between the engines over the run (m or rad).
    worst: f64,
    /// Smallest horizontal distance travelled by a world's chassis origin (m).
    travelled: f64,
    /// Steps × worlds where some wheel had two or more contacts on the field (cpu engine):
    /// the tread on two triangle planes, which the merge leaves as separate contacts.
    multi: usize,
}

/// Run `worlds` of STARTS for `horizon` s at timestep `h` with formulation `name`.
fn compare(name: &str, params: &Value, worlds: usize, h: f64, horizon: f64) -> Measured {
    let scenes: Vec<_> = STARTS[..worlds]
        .iter()
        .map(|(start, yaw)| {
            build(
                "mesh_terrain",
                &json!({"collider": "heightfield", "horizon": horizon, "start": start, "start_yaw": yaw}),
            )
            .unwrap()
        })
        .collect();
    let model = &scenes[0].model;
    for s in &scenes[1..] {
        assert!(
            s.model.geoms.len() == model.geoms.len(),
            "one terrain for every world"
        );
    }
    let terrain = model.geom_id("terrain").unwrap();
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
    let mut m = Measured {
        worst: 0.0,
        travelled: f64::INFINITY,
        multi: 0,
    };
    for step in 0..steps {
        let mut u = Vec::new();
        for (scene, (f, s)) in scenes.iter().zip(&mut cpu) {
            let c = scene.controls_at(s.t, s);
            u.extend_from_slice(&c);
            let kin = forward_kinematics(model, &s.q);
            let contacts = contactlab_solvers::collision::detect(model, &kin);
            let mut per_wheel = std::collections::HashMap::new();
            for c in contacts.iter().filter(|c| c.geoms[0] == terrain) {
                *per_wheel.entry(c.geoms[1]).or_insert(0) += 1;
            }
            if per_wheel.values().any(|&n| n >= 2) {
                m.multi += 1;
            }
            let r = f.step(model, s, &c, h);
            assert!(r.diverged.is_none(), "cpu diverged at step {step}");
        }
        let reports = batched.step(&u, h, true);
        for (w, r) in reports.iter().enumerate() {
            assert!(
                r.diverged.is_none(),
                "{name}: world {w}, step {step}: {:?}",
                r.diverged
            );
        }
        for ((_, s), b) in cpu.iter().zip(batched.read_states()) {
            let d = (&s.q - &b.q).amax();
            assert!(d.is_finite(), "non-finite difference at step {step}");
            m.worst = m.worst.max(d);
        }
    }
    for ((_, s), s0) in cpu.iter().zip(&initial) {
        let d = (s.q[0] - s0.q[0]).hypot(s.q[1] - s0.q[1]);
        m.travelled = m.travelled.min(d);
    }
    m
}

fn check(name: &str, m: &Measured, worlds: usize, h: f64, horizon: f64) {
    println!(
        "{name}, mesh_terrain (heightfield), {worlds} worlds, h = {} ms, {horizon} s: max |qpos difference| {:.3e}, least distance travelled {:.3} m, world-steps with a wheel on two or more contacts {}",
        h * 1e3,
        m.worst,
        m.travelled,
        m.multi
    );
    // 0.7 m/s nominal: at least half of it.
    assert!(
        m.travelled > 0.35 * horizon,
        "{name}: a robot travelled only {} m",
        m.travelled
    );
    assert!(m.worst <= 1e-9, "{name}: {:e}", m.worst);
}

#[test]
fn soft_convex_and_signorini_on_the_height_field_agree_with_the_cpu_engine() {
    let (h, horizon) = (0.02, 4.0);
    for name in ["soft_convex", "signorini"] {
        let m = compare(name, &json!({"integrator": "implicitfast"}), 5, h, horizon);
        check(name, &m, 5, h, horizon);
    }
}

/// The batched penalty at a timestep inside its stable plateau (0.5 ms), as on the box.
#[test]
fn penalty_on_the_height_field_agrees_with_the_cpu_engine() {
    let (h, horizon) = (5e-4, 2.0);
    let m = compare("penalty", &json!({}), 3, h, horizon);
    check("penalty", &m, 3, h, horizon);
}

/// The robot's chassis box is not collided with the field by the batched engine: a world
/// whose chassis reaches the terrain's cells ends with the pair named; the others go on.
#[test]
fn a_chassis_on_the_height_field_ends_its_world_with_the_pair_named() {
    let scene = build("mesh_terrain", &json!({"collider": "heightfield"})).unwrap();
    let model = &scene.model;
    let mut low = scene.initial.clone();
    // The robot sunk 0.5 m: its chassis box (bottom about 0.3 m above the ground at the
    // start) into the terrain.
    low.q[2] -= 0.5;
    let initial = [scene.initial.clone(), low];
    let mut b = contactlab_solvers::batched::stepper(
        "burn-ndarray",
        "soft_convex",
        &json!({"integrator": "implicitfast"}),
        model,
        &initial[0],
        2,
    )
    .unwrap();
    b.write_states(&initial);
    let r = b.step(&[2.0; 6], 0.02, false);
    assert!(r[0].diverged.is_none(), "{:?}", r[0].diverged);
    let sunk = r[1].diverged.as_deref().unwrap_or("");
    assert!(
        sunk.contains("'terrain'") && sunk.contains("box–height field"),
        "{sunk}"
    );
}
