//! soft_convex on general MJCF models against MuJoCo 4.0.1 (issue 18;
//! `scenarios/tests/reference/general/`, made by `gen_general.py` there): each model loaded from
//! its own XML with its own options, constant controls applied at every step; max |qpos error|
//! and |qvel error| at most 1e-6 over the whole horizon and the same number of contacts carrying
//! normal force on every step.
//!
//! The cases: MuJoCo's velocity-implicit integrators (`implicitfast`, `implicit`;
//! `contactlab_solvers::implicit`) on a damped double pendulum driven by a velocity servo and a
//! position servo (the actuators' and the damping's velocity derivatives; with `implicit` also
//! the Coriolis derivative), a free box spinning about an unstable axis without gravity (MuJoCo's
//! `implicitfast` solves a standalone free body's block with its gyroscopic derivative:
//! `mjd_freeMhat`), and a skid-steered cart on a plane whose wheel servos saturate at their
//! force range at the start (the clamp cuts the servo's derivative, `mjd_actuator_vel`); and
//! `connect` and `weld` equalities, whose reference acceleration carries the velocity-product
//! term `J̇ v` (`mj_Jdotv`): a double pendulum closed to the world, a free box connected to a
//! hinged arm, the same box welded to it (MuJoCo's `relpose`: body2 in body1's frame), with and
//! without `anchor` and `torquescale`; a `<joint>` coupling polynomial; and MuJoCo's analytic
//! collision pairs (`contactlab_solvers::collision::primitive_pairs`): a tilted capsule dropped
//! on a plane (`mjc_PlaneCapsule`), three spheres dropped onto each other (`mjc_SphereSphere`),
//! capsules dropped crossed and parallel onto a lying one and a ball onto it
//! (`mjc_CapsuleCapsule`'s two branches, `mjc_SphereCapsule`), a spinning tilted disc on the
//! floor and a ball rolling over a standing cylinder's cap and rim (`mjc_PlaneCylinder`,
//! `mjc_SphereCylinder`), balls thrown at a box's face and edge (`mjc_SphereBox`), and
//! ellipsoids on the floor and on an incline (`mjc_PlaneConvex`'s support point).

use std::path::PathBuf;

use contactlab_solvers::formulation;
use serde_json::{json, Value};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference/general")
}

/// Run case `name` under soft_convex with `params` and return (max |qpos error|, max |qvel
/// error|, steps whose count of contacts with a positive normal force differs from MuJoCo's),
/// or the step's report's divergence message. `GENERAL_TRACE=<name>` prints the qpos error
/// every 10 steps, `GENERAL_CONTACTS=<name>` every step's contacts.
fn compare(name: &str, params: Value) -> Result<(f64, f64, usize), String> {
    compare_over(name, params, f64::INFINITY)
}

/// [`compare`] over the first `seconds` of the reference.
fn compare_over(name: &str, params: Value, seconds: f64) -> Result<(f64, f64, usize), String> {
    let loaded = contactlab_scenarios::mjcf::load_file(dir().join(format!("{name}.xml")), None)
        .unwrap_or_else(|e| panic!("{name}.xml: {e}"));
    let (model, mut s) = (loaded.model, loaded.initial);
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join(format!("{name}.json"))).unwrap())
            .unwrap();
    let ctrl: Vec<f64> = serde_json::from_value(meta["ctrl"].clone()).unwrap();
    if let Some(v0) = meta["qvel0"].as_array() {
        for (i, x) in v0.iter().enumerate() {
            s.v[i] = x.as_f64().unwrap();
        }
    }
    let rows: Vec<Vec<f64>> = reference_rows(&format!("{name}.csv"))
        .into_iter()
        .take_while(|r| r[0] <= seconds + 1e-9)
        .collect();
    let (nq, nv) = (model.nq, model.nv);
    let h = meta["timestep"].as_f64().unwrap();
    let mut f = formulation::build("soft_convex", &params).unwrap();
    let (mut eq, mut ev, mut econ) = (0.0f64, 0.0f64, 0);
    for (k, row) in rows.iter().enumerate() {
        for i in 0..nq {
            eq = eq.max((s.q[i] - row[1 + i]).abs());
        }
        for i in 0..nv {
            ev = ev.max((s.v[i] - row[1 + nq + i]).abs());
        }
        if std::env::var("GENERAL_TRACE").is_ok_and(|v| v == name)
            && (k % 10 == 0 || std::env::var("GENERAL_EVERY").is_ok())
        {
            let (i, e) = (0..nq)
                .map(|i| (i, (s.q[i] - row[1 + i]).abs()))
                .fold((0, 0.0), |a, b| if b.1 > a.1 { b } else { a });
            let (j, ev) = (0..nv)
                .map(|j| (j, (s.v[j] - row[1 + nq + j]).abs()))
                .fold((0, 0.0), |a, b| if b.1 > a.1 { b } else { a });
            println!(
                "  step {k}: |qpos error| {e:.3e} (qpos[{i}]), |qvel error| {ev:.3e} (qvel[{j}])"
            );
        }
        if k + 1 == rows.len() {
            break;
        }
        let r = f.step(&model, &mut s, &ctrl, h);
        if let Some(why) = r.diverged {
            return Err(format!("step {k}: {why}"));
        }
        // Contacts with a positive normal force in the step leaving row k (`nactive`).
        let active = r.contacts.iter().filter(|c| c.impulse[0] > 0.0).count();
        if std::env::var("GENERAL_CONTACTS").is_ok_and(|v| v == name) {
            let c: Vec<_> = r
                .contacts
                .iter()
                .map(|c| (c.geoms, c.gap, c.impulse[0]))
                .collect();
            println!(
                "  step {k}: {} solver iterations (converged {}), (geoms, gap, normal impulse) {c:?}",
                r.iterations, r.converged
            );
        }
        if active as f64 != row[2 + nq + nv] {
            econ += 1;
        }
    }
    Ok((eq, ev, econ))
}

fn check(name: &str) {
    check_over(name, f64::INFINITY);
}

/// [`check`] over the first `seconds` of a chaotic reference (issue 18: chaotic ones over the
/// first 0.5 s).
fn check_over(name: &str, seconds: f64) {
    let (eq, ev, econ) =
        compare_over(name, json!({}), seconds).unwrap_or_else(|e| panic!("{name}: {e}"));
    println!("{name}: max |qpos error| {eq:.3e}, max |qvel error| {ev:.3e}, contact-count mismatches {econ}");
    assert!(eq <= 1e-6 && ev <= 1e-6 && econ == 0, "{name}");
}

#[test]
fn servo_double_pendulum_matches_mujoco_under_implicitfast_and_implicit() {
    check("pendulum_implicitfast");
    check("pendulum_implicit");
}

#[test]
fn spinning_free_box_matches_mujoco_under_implicitfast_and_implicit() {
    check("free_spin_implicitfast");
    check("free_spin_implicit");
}

#[test]
fn skid_steered_cart_with_saturating_servos_matches_mujoco() {
    check("cart_implicitfast");
    check("cart_implicit");
}

#[test]
fn the_integrator_parameter_overrides_the_model_option_and_euler_differs() {
    // The implicitfast model stepped with `integrator: euler`: the position servo (kp 50) is
    // explicit at h = 10 ms and the run blows up (the reason for the implicit integrators).
    let euler = compare("pendulum_implicitfast", json!({"integrator": "euler"}));
    println!("pendulum under euler: {euler:?}");
    match euler {
        Err(why) => assert!(why.contains("t = "), "{why}"),
        Ok((eq, _, _)) => assert!(eq > 1e-3, "{eq}"),
    }
    let (eq, _, _) = compare("pendulum_implicit", json!({"integrator": "implicitfast"})).unwrap();
    println!("pendulum under implicitfast against MuJoCo's implicit: {eq:.3e}");
    assert!(eq > 1e-6, "{eq}");
    match formulation::build("soft_convex", &json!({"integrator": "rk4"})) {
        Err(e) => assert!(e.to_string().contains("rk4"), "{e}"),
        Ok(_) => panic!("rk4 is not implemented and must be an error"),
    }
}

#[test]
fn connect_closed_chain_matches_mujoco() {
    check("connect_chain_euler");
    check("connect_free_euler");
}

#[test]
fn weld_free_box_to_arm_matches_mujoco() {
    check("weld_free_euler");
    check("weld_anchor_euler");
}

#[test]
fn joint_coupling_polynomial_matches_mujoco() {
    check("joint_coupling_euler");
}

#[test]
fn tilted_capsule_drop_matches_mujoco() {
    check("capsule_drop_euler");
}

#[test]
fn sphere_stack_matches_mujoco() {
    check("sphere_stack_euler");
}

#[test]
fn capsule_pile_matches_mujoco() {
    check("capsule_pile_euler");
}

/// Chaotic: the disc lands on its rim and settles towards its cap while spinning, and as its
/// tilt goes to zero `mjc_PlaneCylinder` takes the deepest rim point's direction from the
/// difference of two nearly equal unit vectors, so a last-bit difference of the state becomes
/// a different contact point. The qpos error grows from 7e-15 at 0.3 s to 1.6e-6 at 0.7 s, as
/// MuJoCo's own trajectory does when the disc's initial spin is changed by one ulp (9.0e-15 at
/// 0.3 s, 7.9e-11 at 0.5 s, 1.7e-6 at 0.7 s). Compared over the first 0.5 s (1.3e-10).
#[test]
fn cylinders_on_the_floor_and_under_a_ball_match_mujoco() {
    check_over("cylinders_euler", 0.5);
}

#[test]
fn spheres_thrown_at_a_box_match_mujoco() {
    check("sphere_box_euler");
}

/// `mjc_PlaneConvex` with the ellipsoid's support point (`plane_ellipsoid`): a tilted, spinning
/// ellipsoid rocking and rolling on the floor beside one thrown so that it tumbles, and one
/// sliding and rolling down a 20° plane (a plane normal that is not the world's z).
#[test]
fn ellipsoids_on_planes_match_mujoco() {
    check("ellipsoids_euler");
    check("ellipsoid_incline_euler");
}

/// `mjc_CapsuleBox` ([`contactlab_solvers::collision::capsule_box`]): capsules dropped on a
/// fixed block, nearly flat on its top face (an end lands first, then both), hanging over an
/// edge until they slide off it, tilted onto a corner, and one rolled across the face and off
/// an edge, then on the floor.
#[test]
fn capsules_on_a_block_match_mujoco() {
    check("capsule_box_euler");
}

/// Torsional and rolling friction (condim 4 and 6) under both friction cones: a ball and a box
/// spinning about the vertical on the floor until the torsional rows stop them, a ball launched
/// sliding that rolls until the rolling rows stop it, a capsule launched rolling sideways. Four
/// bodies, up to four constraint islands: solved as one problem, the pyramidal case left MuJoCo
/// by 8.7e-8 m (1.2e-6 m/s) at the step where Newton's stopping test fell differently; per
/// island, as MuJoCo solves them (`contactlab_solvers::soft_convex::islands`), 4.7e-15.
#[test]
fn torsional_and_rolling_friction_match_mujoco_under_both_cones() {
    check("condim_elliptic_euler");
    check("condim_pyramidal_euler");
}

/// `<flag island="disable"/>`: one problem for every constrained dof, with MuJoCo's
/// monolithic scale `1/(meaninertia · nv)`, against MuJoCo run the same way.
#[test]
fn one_problem_without_islands_matches_mujoco() {
    check("condim_noisland_euler");
}

/// A 45 g capsule pinched between two position-servoed pads (the grasp creep of mujoco#3328):
/// two `mjc_CapsuleBox` contacts per pad (parry's manifold gave three), and the soft contact's
/// creep under both cones and at impratio 1 and 10 (impratio scales the friction rows'
/// regularization, so the slip falls tenfold: 4.8, 2.4, 0.24 mm/s), each within 1 % of
/// MuJoCo's: the capsule's mean vertical speed over the second half second (qpos[4], its z).
/// No noslip here (next test).
#[test]
fn pinched_capsule_slip_rate_matches_mujoco_under_both_cones_and_impratios() {
    for name in [
        "pinched_capsule_euler",
        "pinched_elliptic_euler",
        "pinched_elliptic_impratio10_euler",
    ] {
        check(name);
        let (ours, theirs) = slip_rate(name);
        println!("{name}: slip {ours:.6e} m/s, MuJoCo {theirs:.6e} m/s");
        assert!(
            theirs < -1e-4 && ((ours - theirs) / theirs).abs() < 0.01,
            "{name}"
        );
    }
}

/// The `grasp` benchmark scene against MuJoCo 4.0.1 running the same model
/// (`reference/general/grasp.xml`, `gen_grasp.py`) under implicitfast with the scene's control
/// law: the same trajectory at h = 10 ms over the whole 2.5 s, and at h = 20 ms the same
/// failure. At 20 ms MuJoCo's refsafe doubles the contact time constant to 2h = 0.04 s (four
/// times softer), the fingers, servoed 1 cm past contact, sink into the object when the lift
/// starts, and at t = 0.56 s the deepest contact passes 1 cm (half the object's smallest
/// extent, the harness's divergence rule) in MuJoCo as here. So issue 18's "grasp stable at
/// 20 ms" is not reachable by soft_convex while it is MuJoCo's model; signorini holds the
/// grasp at 20 ms.
#[test]
fn grasp_scene_matches_mujoco_at_10_ms_and_fails_with_it_at_20_ms() {
    for (ms, states) in [(10, 251), (20, 29)] {
        let rows = reference_rows(&format!("grasp_{ms}ms.csv"));
        assert_eq!(rows.len(), states);
        let scene = contactlab_scenarios::build("grasp", &json!({})).unwrap();
        let (model, mut s) = (&scene.model, scene.initial.clone());
        let h = ms as f64 / 1000.0;
        let mut f =
            formulation::build("soft_convex", &json!({"integrator": "implicitfast"})).unwrap();
        let (mut eq, mut pen) = (0.0f64, 0.0);
        for row in &rows {
            for i in 0..model.nq {
                eq = eq.max((s.q[i] - row[1 + i]).abs());
            }
            let u = scene.controls_at(s.t, &s);
            let r = f.step(model, &mut s, &u, h);
            // The deepest penetration among the contacts detected at this state.
            pen = r.contacts.iter().map(|c| -c.gap).fold(0.0, f64::max);
        }
        let theirs = rows.last().unwrap()[1 + model.nq];
        println!("grasp at {ms} ms: max |qpos error| {eq:.3e} over {states} states, last penetration {pen:.4e} m (MuJoCo {theirs:.4e} m)");
        assert!(eq <= 1e-6, "{ms} ms: {eq}");
        assert!((pen - theirs).abs() <= 1e-6 * theirs.max(1e-3));
        assert_eq!(pen > 0.01, ms == 20);
    }
}

/// MuJoCo's no-slip post-solver (`noslip_iterations="10"`,
/// `contactlab_solvers::soft_convex::noslip`) on the pinched capsule, under both cones: the
/// creep of 4.8 and 2.4 mm/s stops. The pyramidal case's residual drift (5.7e-10 m/s in
/// MuJoCo) within 10 % of MuJoCo's; the elliptic one's is round-off (6e-16 m/s), so both are
/// held below 1e-9 m/s.
#[test]
fn noslip_stops_the_pinched_capsule_creep_as_in_mujoco() {
    for name in ["pinched_noslip_euler", "pinched_noslip_elliptic_euler"] {
        check(name);
        let (ours, theirs) = slip_rate(name);
        println!("{name}: slip {ours:.6e} m/s, MuJoCo {theirs:.6e} m/s");
        assert!(ours.abs() < 1e-9 && theirs.abs() < 1e-9, "{name}");
        if name == "pinched_noslip_euler" {
            assert!(((ours - theirs) / theirs).abs() < 0.1, "{name}");
        }
    }
    // The other formulations step without it and say so; soft_convex does not list it.
    let model = contactlab_scenarios::mjcf::load_file(dir().join("pinched_noslip_euler.xml"), None)
        .unwrap()
        .model;
    for (formulation, ignores) in [
        ("soft_convex", false),
        ("signorini", true),
        ("ncp_fb", true),
        ("penalty", true),
    ] {
        let f = formulation::build(formulation, &json!({})).unwrap();
        let listed = f
            .ignored_features(&model)
            .iter()
            .any(|x| x.feature == "option.noslip_iterations");
        assert_eq!(listed, ignores, "{formulation}");
    }
    let refused = contactlab_solvers::engine::batched_support("soft_convex", &model).unwrap_err();
    assert!(refused.contains("noslip"), "{refused}");
}

/// The pinched capsule's mean vertical speed over the second half of its reference (qpos[4],
/// its z; column 5 of the CSV), ours under soft_convex with the case's own options and
/// controls, and MuJoCo's (m/s).
fn slip_rate(name: &str) -> (f64, f64) {
    let loaded =
        contactlab_scenarios::mjcf::load_file(dir().join(format!("{name}.xml")), None).unwrap();
    let (model, mut s) = (loaded.model, loaded.initial);
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join(format!("{name}.json"))).unwrap())
            .unwrap();
    let ctrl: Vec<f64> = serde_json::from_value(meta["ctrl"].clone()).unwrap();
    let rows = reference_rows(&format!("{name}.csv"));
    let (last, mid) = (rows.len() - 1, (rows.len() - 1) / 2);
    let span = rows[last][0] - rows[mid][0];
    let mut f = formulation::build("soft_convex", &json!({})).unwrap();
    let h = model.options.timestep;
    let mut z = Vec::new();
    for _ in 0..=last {
        z.push(s.q[4]);
        f.step(&model, &mut s, &ctrl, h);
    }
    let theirs = (rows[last][5] - rows[mid][5]) / span;
    ((z[last] - z[mid]) / span, theirs)
}

/// Every data row of reference CSV `file` in `general/` (the header skipped), as numbers.
fn reference_rows(file: &str) -> Vec<Vec<f64>> {
    std::fs::read_to_string(dir().join(file))
        .unwrap_or_else(|e| panic!("{file}: {e}"))
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|x| x.parse::<f64>().unwrap()).collect())
        .collect()
}
