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

/// Run one world per start of `starts` for `horizon` s at timestep `h` with formulation `name`.
fn compare(
    name: &str,
    params: &Value,
    starts: &[([f64; 2], f64)],
    h: f64,
    horizon: f64,
) -> Measured {
    let scenes: Vec<_> = starts
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
        let m = compare(
            name,
            &json!({"integrator": "implicitfast"}),
            &STARTS,
            h,
            horizon,
        );
        check(name, &m, 5, h, horizon);
    }
}

/// The batched penalty at a timestep inside its stable plateau (0.5 ms), as on the box. Under
/// the penalty the robot started at STARTS[2] tips over on a side slope and its chassis hits
/// the terrain at t = 0.80 s (a box contact in the cpu engine, which the batched engine flags:
/// `a_chassis_on_the_height_field_ends_its_world_with_the_pair_named`), so three other starts.
///
/// Measured: 1.5e-10 over the 4,000 steps, against 1e-14 for the soft solvers. The contacts
/// are the cpu engine's bit for bit (`height_field_contacts_are_the_cpu_engines_state_by_state`);
/// the batched kinematics differs from the cpu engine's by an ulp here and there (2.2e-16 on
/// these states), and the robot of the first start bounces over the bumps (whole stretches
/// with no wheel on the ground) under the stiff penalty: its difference grows steadily, with
/// no jump, from 9e-18 at step 500 to 1.5e-10 at step 3,750 (the other two: 5e-15 and
/// 1.6e-12 there).
#[test]
fn penalty_on_the_height_field_agrees_with_the_cpu_engine() {
    let (h, horizon) = (5e-4, 2.0);
    let starts = [STARTS[0], STARTS[1], STARTS[4]];
    let m = compare("penalty", &json!({}), &starts, h, horizon);
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

/// The contacts themselves, state by state: the batched candidates of every pair (active ones
/// in order) against the cpu engine's `collision::detect` at the same positions — the states
/// of cpu runs over the terrain (soft_convex at 20 ms, 4 s, every start; penalty at 0.5 ms,
/// 2 s, every 4th step, including the start whose robot tips over and drops its chassis on the
/// terrain). With the geoms placed as the cpu engine places them, every unflagged pair has
/// the same contacts in the same order with the same points, frames and gaps, bit for bit; no
/// wheel is flagged, and the chassis is flagged only near the terrain (the flag is a
/// superset of the cpu engine's chassis contacts: an unflagged chassis with cpu contacts
/// fails the count).
#[test]
fn height_field_contacts_are_the_cpu_engines_state_by_state() {
    let mut states = Vec::new();
    let mut model = None;
    for (name, h, horizon, every) in [
        ("soft_convex", 0.02f64, 4.0f64, 1),
        ("penalty", 5e-4, 2.0, 4),
    ] {
        let params = if name == "penalty" {
            json!({})
        } else {
            json!({"integrator": "implicitfast"})
        };
        for (start, yaw) in STARTS {
            let scene = build(
                "mesh_terrain",
                &json!({"collider": "heightfield", "start": start, "start_yaw": yaw}),
            )
            .unwrap();
            let mut f = formulation::build(name, &params).unwrap();
            let mut s = scene.initial.clone();
            for step in 0..(horizon / h).round() as usize {
                let c = scene.controls_at(s.t, &s);
                f.step(&scene.model, &mut s, &c, h);
                if step % every == 0 {
                    states.push(s.clone());
                }
            }
            model.get_or_insert(scene.model);
        }
    }
    let model = model.unwrap();
    let c = compare_contacts(&model, &states);
    println!(
        "{} states: {} contacts compared, max |difference| point {:.3e} m, frame {:.3e}, gap {:.3e} m; flagged: {} (state, wheel) pairs, {} (state, chassis) pairs ({} with cpu contacts)",
        states.len(), c.compared, c.dp, c.df, c.dg, c.flagged_wheel, c.flagged_box, c.flagged_box_cpu
    );
    assert!(
        c.compared > states.len(),
        "too few contacts compared: {}",
        c.compared
    );
    assert_eq!(c.flagged_wheel, 0, "a wheel left the class");
    // The same arithmetic in the same order: the same bits.
    assert_eq!((c.dp, c.df, c.dg), (0.0, 0.0, 0.0));
}

/// What [`compare_contacts`] found.
struct ContactComparison {
    /// Contacts compared.
    compared: usize,
    /// Largest |difference| of a point (m), a frame entry, a gap (m).
    dp: f64,
    df: f64,
    dg: f64,
    /// Flagged (state, pair)s: wheel pairs, box pairs, box pairs where the cpu engine has
    /// contacts.
    flagged_wheel: usize,
    flagged_box: usize,
    flagged_box_cpu: usize,
}

/// The batched candidates of every pair of `model` (active ones, in order) against the cpu
/// engine's `collision::detect` at each of `states`, with the geoms placed by the cpu
/// engine's kinematics; panics where an unflagged pair's contact count differs.
fn compare_contacts(model: &contactlab_solvers::Model, states: &[State]) -> ContactComparison {
    use contactlab_solvers::batched::scalar::{M, S};
    use contactlab_solvers::batched::{collision::all_candidates, kinematics, upload_states};
    use contactlab_solvers::batched::{download, NdArrayF64};
    use contactlab_solvers::collision::{contact_frame, detect};
    use contactlab_solvers::compiled::CompiledModel;

    let worlds = states.len();
    let device = Default::default();
    let (q, _) = upload_states::<NdArrayF64>(&states, &device);
    // The batched kinematics differs from the cpu engine's by an ulp here and there (measured
    // 2.2e-16 on these states); the geoms' placements are the cpu engine's here, so that the
    // comparison is of the collision arithmetic alone.
    let mut k = kinematics::forward(&model, &q);
    let cpu_kin: Vec<_> = states
        .iter()
        .map(|s| forward_kinematics(&model, &s.q))
        .collect();
    for g in (0..model.geoms.len()).filter(|&g| model.geoms[g].body != 0) {
        let up = |f: &dyn Fn(&contactlab_solvers::kinematics::Kinematics) -> f64| {
            S::T(contactlab_solvers::batched::upload::<NdArrayF64>(
                cpu_kin.iter().map(f).collect(),
                &device,
            ))
        };
        k.geom_xpos[g] = std::array::from_fn(|i| up(&|kin| kin.geom_xpos[g][i]));
        k.geom_xquat[g] = [
            up(&|kin| kin.geom_xquat[g].w),
            up(&|kin| kin.geom_xquat[g].i),
            up(&|kin| kin.geom_xquat[g].j),
            up(&|kin| kin.geom_xquat[g].k),
        ];
    }
    let compiled = CompiledModel::new(&model);
    let (cands, outside) = all_candidates(&model, &compiled, &k);
    let mask = |m: &M<NdArrayF64>| match m {
        M::C(b) => vec![*b; worlds],
        M::T(t) => t.to_data().iter::<bool>().collect::<Vec<bool>>(),
    };
    let read = |s: &S<NdArrayF64>| download(s, worlds);
    let flagged: Vec<(usize, Vec<bool>)> =
        outside.iter().map(|o| (o.pair, mask(&o.worlds))).collect();
    struct Host {
        pair: usize,
        found: Vec<bool>,
        point: [Vec<f64>; 3],
        normal: [Vec<f64>; 3],
        gap: Vec<f64>,
    }
    let host: Vec<Host> = cands
        .iter()
        .map(|c| Host {
            pair: c.pair,
            found: mask(&c.found),
            point: std::array::from_fn(|i| read(&c.point[i])),
            normal: std::array::from_fn(|i| read(&c.normal[i])),
            gap: read(&c.gap),
        })
        .collect();
    let (mut compared, mut flagged_wheel, mut flagged_box_cpu, mut flagged_box) = (0, 0, 0, 0);
    let (mut dp, mut df, mut dg) = (0.0f64, 0.0f64, 0.0f64);
    for w in 0..worlds {
        let cpu = detect(&model, &cpu_kin[w]);
        for (p, pr) in compiled.pairs.iter().enumerate() {
            let cpu_pair: Vec<_> = cpu.iter().filter(|c| c.geoms == pr.geoms).collect();
            if flagged.iter().any(|(fp, f)| *fp == p && f[w]) {
                if model.geoms[pr.geoms[1]].line_contact_as_point {
                    flagged_wheel += 1;
                } else {
                    flagged_box += 1;
                    flagged_box_cpu += usize::from(!cpu_pair.is_empty());
                }
                continue;
            }
            let ours: Vec<&Host> = host.iter().filter(|c| c.pair == p && c.found[w]).collect();
            assert_eq!(
                cpu_pair.len(),
                ours.len(),
                "state {w}, pair {:?}: {} cpu contacts, {} batched",
                pr.geoms,
                cpu_pair.len(),
                ours.len()
            );
            for (c, b) in cpu_pair.iter().zip(&ours) {
                let n = nalgebra::Vector3::new(b.normal[0][w], b.normal[1][w], b.normal[2][w]);
                for i in 0..3 {
                    dp = dp.max((c.point[i] - b.point[i][w]).abs());
                }
                df = df.max((c.frame - contact_frame(&n)).amax());
                dg = dg.max((c.gap - b.gap[w]).abs());
                compared += 1;
            }
        }
    }
    ContactComparison {
        compared,
        dp,
        df,
        dg,
        flagged_wheel,
        flagged_box,
        flagged_box_cpu,
    }
}

/// A flat field (amplitude 0): every triangle's plane is the same, so a wheel's tread end on
/// a cell edge or a diagonal lies over two triangles and the cpu engine keeps it once (the
/// duplicate test, `DUPLICATE_DISTANCE`) before the merge; a batched engine without the test
/// would average the end in twice and move the merged point by a sixth of the tread (17 mm;
/// measured with the test switched off).
/// The robot level, its wheels 1 mm into the ground, with the left wheel's centre on grid
/// lines (its tread ends on cell edges, near vertices) or at a cell's centre, and off them by
/// 1e-13 m to 0.1 m; contacts bit for bit.
#[test]
fn duplicates_on_a_flat_field_are_dropped_as_the_cpu_engine_does() {
    use contactlab_solvers::compiled::CompiledModel;
    let scene = build(
        "mesh_terrain",
        &json!({"collider": "heightfield", "amplitude": 0.0}),
    )
    .unwrap();
    let model = &scene.model;
    assert!(
        CompiledModel::new(model).height_fields[0]
            .as_ref()
            .unwrap()
            .may_duplicate,
        "a flat field runs the duplicate test"
    );
    let kin = forward_kinematics(model, &scene.initial.q);
    let wheel = model.geom_id("wheel_left_geom").unwrap();
    let (wx, wy) = (kin.geom_xpos[wheel].x, kin.geom_xpos[wheel].y);
    // Grid lines as parry places them: (-0.5 + j / 80) 24 m.
    let line = |j: f64| (-0.5 + (1.0 / 80.0) * j) * 24.0;
    let mut states = Vec::new();
    for dx in [0.0, 1e-13, -1e-13, 1e-10, 1e-6, 0.1] {
        for (jx, jy) in [(40.0, 40.0), (41.0, 38.0), (45.0, 33.5), (40.5, 40.5)] {
            let mut s = scene.initial.clone();
            s.q[0] += line(jx) - wx + dx;
            s.q[1] += line(jy) - wy;
            // From 1 mm above the ground (the scene's start clearance) to 1 mm into it.
            s.q[2] -= 2e-3;
            states.push(s);
        }
    }
    let c = compare_contacts(model, &states);
    println!(
        "flat field, {} states: {} contacts compared, max |difference| point {:.3e} m, frame {:.3e}, gap {:.3e} m",
        states.len(),
        c.compared,
        c.dp,
        c.df,
        c.dg
    );
    assert!(c.compared >= states.len(), "{}", c.compared);
    assert_eq!((c.dp, c.df, c.dg), (0.0, 0.0, 0.0));
}
