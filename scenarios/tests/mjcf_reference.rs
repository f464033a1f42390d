//! Every MJCF in `scenarios/tests/reference/scenes` loads, and the model quantities MuJoCo 4.0.1
//! compiled for it (`scenarios/tests/reference/refs/<scene>.model.json`) match to 1e-10: body masses,
//! inertias and inertial frames, geom sizes and contact parameters, joint data, options, and
//! the mass matrix and bias forces at the reference's initial state and first constrained step.

use std::path::PathBuf;

use contactlab_scenarios::mjcf::load_file;
use contactlab_solvers::dynamics::{bias_forces, mass_matrix};
use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::kinematics::forward_kinematics;
use contactlab_solvers::model::{Cone, JointKind, SolverKind};
use contactlab_solvers::Model;
use nalgebra::{DMatrix, DVector};
use serde_json::Value;

const TOL: f64 = 1e-10;

fn reference_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference")
}

fn vector(v: &Value) -> DVector<f64> {
    let a = v.as_array().unwrap();
    DVector::from_iterator(a.len(), a.iter().map(|x| x.as_f64().unwrap()))
}

fn matrix(v: &Value) -> DMatrix<f64> {
    let rows: Vec<DVector<f64>> = v.as_array().unwrap().iter().map(vector).collect();
    DMatrix::from_fn(rows.len(), rows[0].len(), |i, j| rows[i][j])
}

fn close(what: &str, a: f64, b: f64) -> f64 {
    let e = (a - b).abs();
    assert!(e <= TOL, "{what}: loaded {a}, MuJoCo {b}");
    e
}

/// Largest M and bias errors at the state (q, v) against the stored `M`, `qfrc_bias`.
fn dynamics_error(model: &Model, at: &Value, q: &Value, v: &Value) -> (f64, f64) {
    let kin = forward_kinematics(model, &vector(q));
    let m = mass_matrix(model, &kin);
    let c = bias_forces(model, &kin, &vector(v));
    (
        (&m - matrix(&at["M"])).abs().max(),
        (&c - vector(&at["qfrc_bias"])).abs().max(),
    )
}

fn check(scene: &str) -> f64 {
    let dir = reference_dir();
    let r: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join(format!("refs/{scene}.model.json"))).unwrap(),
    )
    .unwrap();
    let loaded =
        load_file(dir.join(format!("scenes/{scene}.xml")), None).unwrap_or_else(|e| panic!("{e}"));
    let m = &loaded.model;
    let mut worst: f64 = 0.0;
    assert_eq!(m.name, scene);
    assert_eq!(
        (m.nq, m.nv),
        (
            r["nq"].as_u64().unwrap() as usize,
            r["nv"].as_u64().unwrap() as usize
        )
    );
    assert_eq!(m.bodies.len(), r["nbody"].as_u64().unwrap() as usize);
    assert_eq!(m.geoms.len(), r["ngeom"].as_u64().unwrap() as usize);
    assert_eq!(m.joints.len(), r["njnt"].as_u64().unwrap() as usize);
    // Options.
    let opt = &r["opt"];
    worst = worst.max(close(
        "timestep",
        m.options.timestep,
        opt["timestep"].as_f64().unwrap(),
    ));
    for k in 0..3 {
        worst = worst.max(close(
            "gravity",
            m.options.gravity[k],
            opt["gravity"][k].as_f64().unwrap(),
        ));
    }
    let cone = if opt["cone"] == "elliptic" {
        Cone::Elliptic
    } else {
        Cone::Pyramidal
    };
    assert_eq!(m.options.cone, cone);
    assert_eq!(m.options.solver, SolverKind::Newton);
    assert_eq!(
        m.options.iterations as u64,
        opt["iterations"].as_u64().unwrap()
    );
    assert_eq!(
        m.options.ls_iterations as u64,
        opt["ls_iterations"].as_u64().unwrap()
    );
    worst = worst.max(close(
        "tolerance",
        m.options.tolerance,
        opt["tolerance"].as_f64().unwrap(),
    ));
    worst = worst.max(close(
        "impratio",
        m.options.impratio,
        opt["impratio"].as_f64().unwrap(),
    ));
    // Bodies.
    for (b, name) in r["body_names"].as_array().unwrap().iter().enumerate() {
        let body = &m.bodies[b];
        assert_eq!(body.name, name.as_str().unwrap());
        if b > 0 {
            assert_eq!(body.parent as u64, r["body_parentid"][b].as_u64().unwrap());
        }
        worst = worst.max(close(
            "body mass",
            body.mass,
            r["body_mass"][b].as_f64().unwrap(),
        ));
        for k in 0..3 {
            worst = worst.max(close(
                "body inertia",
                body.inertia[k],
                r["body_inertia"][b][k].as_f64().unwrap(),
            ));
            worst = worst.max(close(
                "body ipos",
                body.com[k],
                r["body_ipos"][b][k].as_f64().unwrap(),
            ));
            worst = worst.max(close(
                "body pos",
                body.pos[k],
                r["body_pos"][b][k].as_f64().unwrap(),
            ));
        }
        let q = body.quat;
        let rq = vector(&r["body_quat"][b]);
        for (k, x) in [q.w, q.i, q.j, q.k].into_iter().enumerate() {
            worst = worst.max(close("body quat", x, rq[k]));
        }
    }
    // Geoms.
    for (g, name) in r["geom_names"].as_array().unwrap().iter().enumerate() {
        let geom = &m.geoms[g];
        assert_eq!(geom.name, name.as_str().unwrap());
        assert_eq!(geom.body as u64, r["geom_bodyid"][g].as_u64().unwrap());
        let size = vector(&r["geom_size"][g]);
        let ty = r["geom_type"][g].as_str().unwrap();
        let ours: Vec<f64> = match &geom.shape {
            GeomShape::Plane => vec![],
            GeomShape::Sphere { radius } => vec![*radius],
            GeomShape::Capsule {
                radius,
                half_length,
            }
            | GeomShape::Cylinder {
                radius,
                half_length,
            } => vec![*radius, *half_length],
            GeomShape::Box { half } => half.iter().copied().collect(),
            GeomShape::Ellipsoid { radii } => radii.iter().copied().collect(),
            other => panic!("unexpected shape {}", other.kind()),
        };
        assert_eq!(geom.shape.kind(), ty);
        for (k, x) in ours.iter().enumerate() {
            worst = worst.max(close("geom size", *x, size[k]));
        }
        for k in 0..3 {
            worst = worst.max(close(
                "geom friction",
                geom.material.friction[k],
                r["geom_friction"][g][k].as_f64().unwrap(),
            ));
            worst = worst.max(close(
                "geom pos",
                geom.pos[k],
                r["geom_pos"][g][k].as_f64().unwrap(),
            ));
        }
        // Orientation up to the sign of the quaternion and, for capsules along their axis,
        // a half turn (MuJoCo's fromto picks the other direction): compare the z axes.
        let rq = vector(&r["geom_quat"][g]);
        let rq = nalgebra::UnitQuaternion::from_quaternion(nalgebra::Quaternion::new(
            rq[0], rq[1], rq[2], rq[3],
        ));
        let (za, zb) = (
            geom.quat * nalgebra::Vector3::z(),
            rq * nalgebra::Vector3::z(),
        );
        worst = worst.max(close("geom z axis", za.cross(&zb).norm(), 0.0));
        if ty != "capsule" {
            worst = worst.max(close("geom quat", geom.quat.angle_to(&rq), 0.0));
        }
        assert_eq!(
            geom.material.condim as u64,
            r["geom_condim"][g].as_u64().unwrap()
        );
        assert_eq!(geom.contype as u64, r["geom_contype"][g].as_u64().unwrap());
        assert_eq!(
            geom.conaffinity as u64,
            r["geom_conaffinity"][g].as_u64().unwrap()
        );
        assert_eq!(
            geom.material.priority as i64,
            r["geom_priority"][g].as_i64().unwrap()
        );
        worst = worst.max(close(
            "solmix",
            geom.material.solmix,
            r["geom_solmix"][g].as_f64().unwrap(),
        ));
        worst = worst.max(close(
            "margin",
            geom.material.margin,
            r["geom_margin"][g].as_f64().unwrap(),
        ));
        worst = worst.max(close(
            "gap",
            geom.material.gap,
            r["geom_gap"][g].as_f64().unwrap(),
        ));
        for k in 0..2 {
            worst = worst.max(close(
                "solref",
                geom.material.solref[k],
                r["geom_solref"][g][k].as_f64().unwrap(),
            ));
        }
        for k in 0..5 {
            worst = worst.max(close(
                "solimp",
                geom.material.solimp[k],
                r["geom_solimp"][g][k].as_f64().unwrap(),
            ));
        }
    }
    // Joints.
    for (j, name) in r["jnt_names"].as_array().unwrap().iter().enumerate() {
        let joint = &m.joints[j];
        assert_eq!(joint.name, name.as_str().unwrap());
        let kind = match joint.kind {
            JointKind::Free => "free",
            JointKind::Ball => "ball",
            JointKind::Hinge => "hinge",
            JointKind::Slide => "slide",
        };
        assert_eq!(kind, r["jnt_type"][j].as_str().unwrap());
        assert_eq!(joint.qpos_adr as u64, r["jnt_qposadr"][j].as_u64().unwrap());
        assert_eq!(joint.dof_adr as u64, r["jnt_dofadr"][j].as_u64().unwrap());
        assert_eq!(
            joint.range.is_some(),
            r["jnt_limited"][j].as_bool().unwrap()
        );
        if let Some((lo, hi)) = joint.range {
            worst = worst.max(close("range", lo, r["jnt_range"][j][0].as_f64().unwrap()));
            worst = worst.max(close("range", hi, r["jnt_range"][j][1].as_f64().unwrap()));
        }
        if joint.kind != JointKind::Free {
            for k in 0..3 {
                worst = worst.max(close(
                    "jnt axis",
                    joint.axis[k],
                    r["jnt_axis"][j][k].as_f64().unwrap(),
                ));
                worst = worst.max(close(
                    "jnt pos",
                    joint.pos[k],
                    r["jnt_pos"][j][k].as_f64().unwrap(),
                ));
            }
        }
        worst = worst.max(close(
            "jnt margin",
            joint.margin,
            r["jnt_margin"][j].as_f64().unwrap(),
        ));
        for k in 0..2 {
            worst = worst.max(close(
                "solreflimit",
                joint.solref_limit[k],
                r["jnt_solref"][j][k].as_f64().unwrap(),
            ));
        }
        for k in 0..5 {
            worst = worst.max(close(
                "solimplimit",
                joint.solimp_limit[k],
                r["jnt_solimp"][j][k].as_f64().unwrap(),
            ));
        }
    }
    let q0 = vector(&r["qpos0"]);
    worst = worst.max((&m.qpos0 - &q0).abs().max());
    // Dynamics at the initial state and the first constrained step.
    let (em, ec) = dynamics_error(m, &r, &r["initial_qpos"], &r["initial_qvel"]);
    assert!(
        em <= TOL && ec <= TOL,
        "{scene}: initial M error {em:e}, bias error {ec:e}"
    );
    worst = worst.max(em).max(ec);
    let k = &r["first_constrained_step"];
    if k.get("M").is_some() {
        let (em, ec) = dynamics_error(m, k, &k["qpos"], &k["qvel"]);
        assert!(
            em <= TOL && ec <= TOL,
            "{scene}: step M error {em:e}, bias error {ec:e}"
        );
        worst = worst.max(em).max(ec);
    }
    println!("{scene}: largest difference from MuJoCo {worst:.3e}");
    worst
}

#[test]
fn every_reference_scene_matches_mujoco() {
    let dir = reference_dir().join("scenes");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            (p.extension()? == "xml").then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    assert!(
        names.len() >= 9,
        "expected the reference scenes, found {names:?}"
    );
    let mut worst: f64 = 0.0;
    for n in &names {
        worst = worst.max(check(n));
    }
    println!(
        "all {} reference scenes: largest difference {worst:.3e}",
        names.len()
    );
}
