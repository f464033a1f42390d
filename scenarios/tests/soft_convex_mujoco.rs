//! soft_convex against MuJoCo 4.0.1's own trajectories (`scenarios/tests/reference/refs/*.csv`), on the
//! scenes built by the scene builders with the reference defaults.

use std::path::PathBuf;

use contactlab_scenarios::build;
use contactlab_solvers::formulation;
use serde_json::{json, Value};

/// A reference trajectory: rows of `t, qpos.., qvel.., extra..` and the column names.
struct Reference {
    columns: Vec<String>,
    rows: Vec<Vec<f64>>,
}

fn reference(name: &str) -> Reference {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/reference/refs")
        .join(format!("{name}.csv"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut lines = text.lines();
    let columns = lines
        .next()
        .unwrap()
        .split(',')
        .map(|s| s.trim().to_string())
        .collect();
    let rows = lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split(',').map(|x| x.trim().parse().unwrap()).collect())
        .collect();
    Reference { columns, rows }
}

/// Run `scene` under soft_convex with `params` at MuJoCo's h = 2 ms for `duration` seconds and
/// return (max |qpos error|, max |qvel error|, steps with a different active-contact count,
/// max |total normal force error| (N)).
fn compare(
    scene: &str,
    scene_params: Value,
    reference_name: &str,
    params: Value,
    duration: f64,
) -> (f64, f64, usize, f64) {
    let s = build(scene, &scene_params).unwrap();
    compare_model(&s.model, &s.initial, reference_name, params, duration)
}

/// As [`compare`], for a given model and initial state.
fn compare_model(
    model: &contactlab_solvers::Model,
    initial: &contactlab_solvers::State,
    reference_name: &str,
    params: Value,
    duration: f64,
) -> (f64, f64, usize, f64) {
    let r = reference(reference_name);
    let (nq, nv) = (model.nq, model.nv);
    let ncon = r.columns.iter().position(|c| c == "ncon");
    let mut f = formulation::build("soft_convex", &params).unwrap();
    // Start from MuJoCo's stored initial state (row 0), bit for bit; the builders' own initial
    // state agrees with it to 1e-12 (mujoco_model_quantities.rs).
    let mut state = initial.clone();
    for i in 0..nq {
        state.q[i] = r.rows[0][1 + i];
    }
    for i in 0..nv {
        state.v[i] = r.rows[0][1 + nq + i];
    }
    let u = vec![0.0; model.actuators.len()];
    let (mut eq, mut ev, mut econ, mut efn) = (0.0f64, 0.0f64, 0usize, 0.0f64);
    let h = 0.002;
    for (k, row) in r.rows.iter().enumerate() {
        if row[0] > duration + 1e-9 {
            break;
        }
        for i in 0..nq {
            eq = eq.max((state.q[i] - row[1 + i]).abs());
        }
        for i in 0..nv {
            ev = ev.max((state.v[i] - row[1 + nq + i]).abs());
        }
        let report = f.step(model, &mut state, &u, h);
        assert!(
            report.diverged.is_none(),
            "{reference_name}: diverged at step {k}"
        );
        if let (Some(_), Some(ia), Some(ifn)) = (ncon, col(&r, "nactive"), col(&r, "fn_total")) {
            // Row k holds what MuJoCo computed during step k: contacts with positive normal
            // force and the sum of normal forces (N).
            let normal: Vec<f64> = report.contacts.iter().map(|c| c.impulse[0] / h).collect();
            let nactive = normal.iter().filter(|&&f| f > 0.0).count();
            let fn_total: f64 = normal.iter().sum();
            efn = efn.max((fn_total - row[ifn]).abs());
            if nactive != row[ia] as usize {
                econ += 1;
            }
        }
    }
    (eq, ev, econ, efn)
}

fn col(r: &Reference, name: &str) -> Option<usize> {
    r.columns.iter().position(|c| c == name)
}

fn check(scene: &str, scene_params: Value, reference_name: &str, cone: &str, duration: f64) {
    let (eq, ev, econ, efn) = compare(
        scene,
        scene_params,
        reference_name,
        json!({"cone": cone}),
        duration,
    );
    println!("{reference_name}: max |qpos error| {eq:.3e}, max |qvel error| {ev:.3e}, max |fn_total error| {efn:.3e} N, steps with a different active-contact count {econ}");
    assert!(
        efn <= 1e-6,
        "{reference_name}: normal force error {efn:e} N"
    );
    assert!(eq <= 1e-6, "{reference_name}: qpos error {eq:e}");
    assert_eq!(econ, 0, "{reference_name}: contact counts differ");
}

#[test]
fn box_slide_matches_mujoco() {
    check("box_slide", json!({}), "box_slide", "pyramidal", 1.0);
    check(
        "box_slide",
        json!({}),
        "box_slide_elliptic",
        "elliptic",
        1.0,
    );
}

#[test]
fn box_incline_sliding_matches_mujoco() {
    check(
        "box_incline",
        json!({"friction": 0.3}),
        "box_incline_mu0p30",
        "pyramidal",
        1.0,
    );
}

#[test]
fn box_incline_creeping_matches_mujoco() {
    check(
        "box_incline",
        json!({"friction": 0.4}),
        "box_incline_mu0p40_elliptic",
        "elliptic",
        1.0,
    );
    check(
        "box_incline",
        json!({"friction": 0.4}),
        "box_incline_mu0p40",
        "pyramidal",
        1.0,
    );
}

#[test]
fn sphere_roll_matches_mujoco() {
    check("sphere_roll", json!({}), "sphere_roll", "pyramidal", 1.0);
}

#[test]
fn cartpole_matches_mujoco() {
    check("cartpole", json!({}), "cartpole", "pyramidal", 3.0);
}

#[test]
fn box_drop_matches_mujoco_for_half_a_second() {
    check("box_drop", json!({}), "box_drop", "pyramidal", 0.5);
    check("box_drop", json!({}), "box_drop_elliptic", "elliptic", 0.5);
}

/// Newton and CG solve the same convex problem: at every state along each trajectory, both,
/// run to convergence (tolerance 1e-24) from the same state and warm start, reach the same
/// accelerations. (At MuJoCo's default tolerance Newton may stop on the Newton decrement with a
/// scaled gradient of 1e-5, exactly as MuJoCo does, so the comparison is made converged.)
#[test]
fn newton_and_cg_reach_the_same_accelerations() {
    use contactlab_solvers::model::SolverKind;
    use contactlab_solvers::soft_convex::{SoftConvex, SoftConvexParams};
    for (scene, params, cone) in [
        ("box_slide", json!({}), "pyramidal"),
        ("box_slide", json!({}), "elliptic"),
        ("box_drop", json!({}), "pyramidal"),
        ("box_drop", json!({}), "elliptic"),
        ("box_incline", json!({"friction": 0.4}), "pyramidal"),
        ("box_incline", json!({"friction": 0.3}), "elliptic"),
        ("sphere_roll", json!({}), "pyramidal"),
        ("cartpole", json!({}), "pyramidal"),
    ] {
        let s = build(scene, &params).unwrap();
        let cone_p: SoftConvexParams = serde_json::from_value(json!({"cone": cone})).unwrap();
        let mut newton = SoftConvex::new(SoftConvexParams {
            tolerance: Some(1e-24),
            ..cone_p.clone()
        })
        .unwrap();
        let mut state = s.initial.clone();
        let mut worst = 0.0f64;
        for _ in 0..500 {
            let mut cg = newton.clone();
            cg.params.solver = Some(SolverKind::Cg);
            cg.params.iterations = Some(5000);
            let mut st_cg = state.clone();
            let (_, detail_cg) = cg.step_detail(&s.model, &mut st_cg, &[], 0.002);
            let (_, detail_n) = newton.step_detail(&s.model, &mut state, &[], 0.002);
            let (a_n, a_cg) = (detail_n.unwrap().qacc, detail_cg.unwrap().qacc);
            worst = worst.max((a_n - a_cg).abs().max());
        }
        println!("{scene} ({cone}): max |qacc_newton - qacc_cg| = {worst:.3e}");
        assert!(worst < 1e-8, "{scene} {cone}: {worst:e}");
    }
}

/// Issue "soft_convex", Done when: every reference case, **loaded from its XML** with the
/// model's own options (cone, solver, tolerances), reproduces MuJoCo's trajectory.
#[test]
fn every_reference_xml_reproduces_mujoco() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference/scenes");
    for (name, duration) in [
        ("box_slide", 1.0),
        ("box_slide_elliptic", 1.0),
        ("box_incline_mu0p30", 1.0),
        ("box_incline_mu0p40", 1.0),
        ("box_incline_mu0p40_elliptic", 1.0),
        ("sphere_roll", 1.0),
        ("cartpole", 3.0),
        ("box_drop", 0.5),
        ("box_drop_elliptic", 0.5),
    ] {
        let m =
            contactlab_scenarios::mjcf::load_file(dir.join(format!("{name}.xml")), None).unwrap();
        let (eq, ev, econ, efn) = compare_model(&m.model, &m.initial, name, json!({}), duration);
        println!("{name} (from XML): max |qpos error| {eq:.3e}, max |qvel error| {ev:.3e}, max |fn_total error| {efn:.3e} N, steps with a different active-contact count {econ}");
        assert!(eq <= 1e-6 && efn <= 1e-6 && econ == 0, "{name}");
    }
}
