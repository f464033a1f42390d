//! The closed-form scene builders against the model quantities MuJoCo 4.0.1 compiled for the
//! same scenes (`scenarios/tests/reference/refs/<scene>.model.json`): masses, inertias, the mass matrix
//! and the bias forces at the initial state and at the first constrained step.

use std::path::PathBuf;

use contactlab_scenarios::build;
use contactlab_solvers::dynamics::{bias_forces, mass_matrix};
use contactlab_solvers::kinematics::forward_kinematics;
use contactlab_solvers::{Model, State};
use nalgebra::{DMatrix, DVector};
use serde_json::{json, Value};

fn reference(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/reference/refs")
        .join(format!("{name}.model.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn vector(v: &Value) -> DVector<f64> {
    DVector::from_iterator(
        v.as_array().unwrap().len(),
        v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()),
    )
}

fn matrix(v: &Value) -> DMatrix<f64> {
    let rows: Vec<DVector<f64>> = v.as_array().unwrap().iter().map(vector).collect();
    DMatrix::from_fn(rows.len(), rows[0].len(), |i, j| rows[i][j])
}

/// Compare M(q) and c(q, v) with MuJoCo's at the state stored under `at` (top level or
/// `first_constrained_step`).
fn check_dynamics(
    model: &Model,
    at: &Value,
    reference_state: (&Value, &Value),
    tol: f64,
) -> (f64, f64) {
    let state = State {
        q: vector(reference_state.0),
        v: vector(reference_state.1),
        t: 0.0,
    };
    let kin = forward_kinematics(model, &state.q);
    let m = mass_matrix(model, &kin);
    let c = bias_forces(model, &kin, &state.v);
    let em = (&m - matrix(&at["M"])).abs().max();
    let ec = (&c - vector(&at["qfrc_bias"])).abs().max();
    assert!(
        em < tol && ec < tol,
        "M error {em:e}, bias error {ec:e}\nM = {m}\nbias = {c}"
    );
    (em, ec)
}

fn check_scene(scene_name: &str, reference_name: &str, params: Value) {
    let r = reference(reference_name);
    let scene = build(scene_name, &params).unwrap();
    let model = &scene.model;
    assert_eq!(
        (model.nq, model.nv),
        (
            r["nq"].as_u64().unwrap() as usize,
            r["nv"].as_u64().unwrap() as usize
        )
    );
    for (b, mass) in r["body_mass"].as_array().unwrap().iter().enumerate() {
        assert!((model.bodies[b].mass - mass.as_f64().unwrap()).abs() < 1e-12);
        let inertia = vector(&r["body_inertia"][b]);
        assert!(
            (model.bodies[b].inertia - inertia).abs().max() < 1e-12,
            "body {b} inertia"
        );
    }
    // The builders' initial state is MuJoCo's.
    let q0 = vector(&r["initial_qpos"]);
    let v0 = vector(&r["initial_qvel"]);
    assert!(
        (&scene.initial.q - &q0).abs().max() < 1e-12,
        "initial qpos {} vs {}",
        scene.initial.q,
        q0
    );
    assert!((&scene.initial.v - &v0).abs().max() < 1e-12, "initial qvel");
    let (em, ec) = check_dynamics(model, &r, (&r["initial_qpos"], &r["initial_qvel"]), 1e-10);
    println!("{reference_name}: initial M error {em:.2e}, bias error {ec:.2e}");
    let k = &r["first_constrained_step"];
    if k.get("M").is_some() {
        let (em, ec) = check_dynamics(model, k, (&k["qpos"], &k["qvel"]), 1e-10);
        println!(
            "{reference_name}: step {} M error {em:.2e}, bias error {ec:.2e}",
            k["step"]
        );
    }
}

#[test]
fn cartpole_mass_matrix_and_bias_match_mujoco() {
    check_scene("cartpole", "cartpole", json!({}));
}

#[test]
fn spinning_box_mass_matrix_and_bias_match_mujoco() {
    check_scene("box_drop", "box_drop", json!({}));
}

#[test]
fn sliding_box_and_rolling_sphere_match_mujoco() {
    check_scene("box_slide", "box_slide", json!({}));
    check_scene("sphere_roll", "sphere_roll", json!({}));
}
