//! The MJCF loader on the fixtures in `tests/mjcf/`: scenes that agree with the scene builders
//! or with hand-built models, default classes, meshes, height fields, keyframes, the `mjcf`
//! scene, and the errors for bad input (each naming file, line and element).

use std::f64::consts::PI;
use std::path::{Path, PathBuf};

use contactlab_scenarios::mjcf::{load_file, load_str, MjcfErrorKind, MjcfModel};
use contactlab_scenarios::{build, SceneError, SCENES};
use contactlab_solvers::dynamics::{bias_forces, mass_matrix};
use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::kinematics::forward_kinematics;
use contactlab_solvers::model::{
    ActuatorKind, Body, Cone, Equality, Geom, Integrator, Joint, JointKind, ModelParts, Quat,
    SolverKind, Vec3,
};
use contactlab_solvers::{Model, State};
use nalgebra::{DMatrix, DVector, UnitQuaternion};
use serde_json::json;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mjcf")
        .join(name)
}

fn load(name: &str, key: Option<&str>) -> MjcfModel {
    load_file(fixture(name), key).unwrap_or_else(|e| panic!("{e}"))
}

/// Largest differences of M and of the bias forces of two models at the same state.
fn dynamics_gap(a: &Model, b: &Model, s: &State) -> (f64, f64) {
    let (ka, kb) = (forward_kinematics(a, &s.q), forward_kinematics(b, &s.q));
    let dm = (mass_matrix(a, &ka) - mass_matrix(b, &kb)).abs().max();
    let dc = (bias_forces(a, &ka, &s.v) - bias_forces(b, &kb, &s.v))
        .abs()
        .max();
    (dm, dc)
}

fn full_inertia(b: &Body) -> DMatrix<f64> {
    let r = b.inertia_frame.to_rotation_matrix().into_inner();
    let m = r * nalgebra::Matrix3::from_diagonal(&b.inertia) * r.transpose();
    DMatrix::from_fn(3, 3, |i, j| m[(i, j)])
}

/// Bodies, joints and geoms (kinds, placements, inertia, limits, contact parameters) agree.
fn assert_same_structure(a: &Model, b: &Model, tol: f64) {
    assert_eq!(
        (a.nq, a.nv, a.bodies.len(), a.joints.len(), a.geoms.len()),
        (b.nq, b.nv, b.bodies.len(), b.joints.len(), b.geoms.len())
    );
    for (x, y) in a.bodies.iter().zip(&b.bodies) {
        assert_eq!((x.name.as_str(), x.parent), (y.name.as_str(), y.parent));
        assert!(
            (x.mass - y.mass).abs() < tol,
            "{} mass {} vs {}",
            x.name,
            x.mass,
            y.mass
        );
        assert!((x.com - y.com).abs().max() < tol, "{} com", x.name);
        // A free body's pos only sets qpos0 (the builders place it through the state).
        let free = x
            .joints
            .first()
            .is_some_and(|&j| a.joints[j].kind == JointKind::Free);
        assert!(free || (x.pos - y.pos).abs().max() < tol, "{} pos", x.name);
        assert!(x.quat.angle_to(&y.quat) < tol, "{} quat", x.name);
        assert!(
            (full_inertia(x) - full_inertia(y)).abs().max() < tol,
            "{} inertia {} vs {}",
            x.name,
            x.inertia,
            y.inertia
        );
    }
    for (x, y) in a.joints.iter().zip(&b.joints) {
        assert_eq!(
            (x.name.as_str(), x.kind, x.body),
            (y.name.as_str(), y.kind, y.body)
        );
        assert!(
            (x.axis - y.axis).abs().max() < tol && (x.pos - y.pos).abs().max() < tol,
            "{} axis/pos",
            x.name
        );
        match (x.range, y.range) {
            (None, None) => {}
            (Some(r), Some(s)) => assert!(
                (r.0 - s.0).abs() < tol && (r.1 - s.1).abs() < tol,
                "{} range {r:?} vs {s:?}",
                x.name
            ),
            (r, s) => panic!("{} range {r:?} vs {s:?}", x.name),
        }
        for (p, q) in [
            (x.damping, y.damping),
            (x.armature, y.armature),
            (x.frictionloss, y.frictionloss),
            (x.margin, y.margin),
        ] {
            assert!((p - q).abs() < tol, "{} joint parameters", x.name);
        }
    }
    for (x, y) in a.geoms.iter().zip(&b.geoms) {
        assert_eq!(
            (x.name.as_str(), x.body, x.contype, x.conaffinity),
            (y.name.as_str(), y.body, y.contype, y.conaffinity)
        );
        assert_eq!(x.shape.kind(), y.shape.kind(), "{}", x.name);
        assert!((x.pos - y.pos).abs().max() < tol, "{} pos", x.name);
        // Same z axis (capsules made from fromto may differ by a half turn about x).
        assert!(
            ((x.quat * Vec3::z()) - (y.quat * Vec3::z())).abs().max() < tol,
            "{} axis",
            x.name
        );
        let (m, n) = (&x.material, &y.material);
        assert_eq!((m.condim, m.priority), (n.condim, n.priority));
        for (p, q) in m
            .friction
            .iter()
            .chain(&m.solref)
            .chain(&m.solimp)
            .zip(n.friction.iter().chain(&n.solref).chain(&n.solimp))
        {
            assert!((p - q).abs() < tol, "{} material", x.name);
        }
    }
}

#[test]
fn cartpole_matches_the_cartpole_builder() {
    let loaded = load("cartpole.xml", Some("swing"));
    let scene = build("cartpole", &json!({})).unwrap();
    assert_same_structure(&loaded.model, &scene.model, 1e-12);
    match (&loaded.model.geoms[1].shape, &scene.model.geoms[1].shape) {
        (
            GeomShape::Capsule {
                radius: a,
                half_length: b,
            },
            GeomShape::Capsule {
                radius: c,
                half_length: d,
            },
        ) => {
            assert_eq!((a, b), (c, d))
        }
        other => panic!("{other:?}"),
    }
    let (x, y) = (&loaded.model.actuators[0], &scene.model.actuators[0]);
    assert_eq!(
        (x.name.as_str(), x.joint, x.kind, x.gear, x.ctrl_range),
        (y.name.as_str(), y.joint, y.kind, y.gear, y.ctrl_range)
    );
    assert_eq!(loaded.initial, scene.initial);
    assert_eq!(loaded.keys, vec!["rest", "swing"]);
    let (dm, dc) = dynamics_gap(&loaded.model, &scene.model, &scene.initial);
    println!("cartpole: M difference {dm:.2e}, bias difference {dc:.2e}");
    assert!(dm < 1e-12 && dc < 1e-12);
}

#[test]
fn free_box_with_inertia_from_its_geom_matches_box_drop() {
    let loaded = load("free_box.xml", Some("drop"));
    let scene = build("box_drop", &json!({})).unwrap();
    // 1/600 exactly from the geom, 0.001666666667 as written in the builder (3.3e-13 apart).
    assert!(
        (loaded.model.bodies[1].inertia - Vec3::repeat(1.0 / 600.0))
            .abs()
            .max()
            < 1e-16
    );
    assert_same_structure(&loaded.model, &scene.model, 1e-12);
    assert_eq!(loaded.model.geoms[0].material.friction, [0.5, 0.005, 1e-4]);
    assert_eq!(loaded.initial, scene.initial);
    let (dm, dc) = dynamics_gap(&loaded.model, &scene.model, &scene.initial);
    println!("free box: M difference {dm:.2e}, bias difference {dc:.2e}");
    assert!(dm < 1e-12 && dc < 1e-12);
}

/// Capsule inertia from an independent decomposition: a cylinder plus two hemispheres, each
/// hemisphere's COM at 3r/8 beyond the cylinder's end (parallel-axis theorem).
fn capsule_props(r: f64, half: f64, density: f64) -> (f64, Vec3) {
    let h = 2.0 * half;
    let m_cyl = density * PI * r * r * h;
    let m_hemi = density * 2.0 / 3.0 * PI * r * r * r;
    let d = h / 2.0 + 3.0 * r / 8.0;
    let i_hemi_own = 83.0 / 320.0 * m_hemi * r * r; // about its own COM, transverse
    let transverse = m_cyl * (h * h / 12.0 + r * r / 4.0) + 2.0 * (i_hemi_own + m_hemi * d * d);
    let axial = m_cyl * r * r / 2.0 + 2.0 * (2.0 / 5.0 * m_hemi * r * r);
    (
        m_cyl + 2.0 * m_hemi,
        Vec3::new(transverse, transverse, axial),
    )
}

#[test]
fn capsule_chain_with_ball_joints_and_limits_matches_a_hand_built_model() {
    let loaded = load("capsule_chain.xml", Some("bent"));
    let (mass, inertia) = capsule_props(0.05, 0.2, 1000.0);
    let mut parts = ModelParts {
        name: "capsule_chain".into(),
        ..Default::default()
    };
    let flip = UnitQuaternion::from_axis_angle(&Vec3::x_axis(), PI);
    for (i, (pos, frame)) in [
        (Vec3::new(0.0, 0.0, 2.0), flip),
        (Vec3::new(0.0, 0.0, -0.4), flip),
        (Vec3::new(0.0, 0.0, -0.4), Quat::identity()),
    ]
    .into_iter()
    .enumerate()
    {
        let mut b = Body::new(format!("link{}", i + 1), i, pos, mass, inertia);
        b.com = Vec3::new(0.0, 0.0, -0.2);
        b.inertia_frame = frame;
        parts.bodies.push(b);
        let mut g = Geom::new(
            format!("cap{}", i + 1),
            i + 1,
            GeomShape::Capsule {
                radius: 0.05,
                half_length: 0.2,
            },
        );
        g.pos = Vec3::new(0.0, 0.0, -0.2);
        g.quat = frame;
        parts.geoms.push(g);
    }
    parts
        .geoms
        .insert(0, Geom::new("floor", 0, GeomShape::Plane));
    let mut ball1 = Joint::new("ball1", JointKind::Ball, 1);
    ball1.range = Some((0.0, PI / 3.0));
    ball1.damping = 0.1;
    let mut ball2 = Joint::new("ball2", JointKind::Ball, 2);
    ball2.range = Some((0.0, PI / 3.0));
    ball2.armature = 0.01;
    let mut hinge3 = Joint::new("hinge3", JointKind::Hinge, 3);
    hinge3.axis = Vec3::y();
    hinge3.range = Some((-PI / 4.0, PI / 2.0));
    hinge3.margin = 0.01;
    parts.joints = vec![ball1, ball2, hinge3];
    let hand = Model::new(parts).unwrap();
    let b1 = &loaded.model.bodies[1];
    println!(
        "capsule: mass {} (hand {mass}), inertia {} (hand {inertia})",
        b1.mass, b1.inertia
    );
    assert!((b1.mass - mass).abs() < 1e-12);
    assert_same_structure(&loaded.model, &hand, 1e-12);
    assert_eq!((loaded.model.nq, loaded.model.nv), (9, 7));
    assert!((loaded.initial.q[8] - 0.3).abs() < 1e-15 && (loaded.initial.v[6] - 0.5).abs() < 1e-15);
    let (dm, dc) = dynamics_gap(&loaded.model, &hand, &loaded.initial);
    println!("capsule chain: M difference {dm:.2e}, bias difference {dc:.2e}");
    assert!(dm < 1e-12 && dc < 1e-12);
}

#[test]
fn default_classes_three_levels_deep_resolve_as_mujoco() {
    let m = load("defaults.xml", None).model;
    let geom = |n: &str| &m.geoms[m.geom_id(n).unwrap()];
    let joint = |n: &str| &m.joints[m.joint_id(n).unwrap()];
    // g1: childclass b (b < a < main).
    let g1 = geom("g1");
    assert_eq!(
        g1.shape,
        GeomShape::Box {
            half: Vec3::new(0.1, 0.2, 0.3)
        }
    );
    assert_eq!(g1.material.friction, [0.6, 0.01, 1e-4]);
    assert_eq!(g1.material.solref, [0.01, 0.9]);
    assert_eq!((g1.material.condim, g1.material.priority), (4, 2));
    // g2: class c overrides the first size number only.
    let g2 = geom("g2");
    assert_eq!(
        g2.shape,
        GeomShape::Box {
            half: Vec3::new(0.05, 0.2, 0.3)
        }
    );
    assert_eq!((g2.material.margin, g2.material.priority), (0.002, 2));
    // g3: class main inside a childclass body.
    let g3 = geom("g3");
    assert_eq!(g3.shape, GeomShape::Sphere { radius: 0.1 });
    assert_eq!(g3.material.friction, [0.8, 0.005, 1e-4]);
    assert_eq!(
        (g3.material.condim, g3.material.priority, g3.material.solref),
        (4, 0, [0.02, 1.0])
    );
    let j1 = joint("j1");
    assert_eq!(
        (j1.kind, j1.axis, j1.damping, j1.armature, j1.range),
        (JointKind::Slide, Vec3::y(), 1.0, 0.5, Some((-30.0, 30.0)))
    );
    let j2 = joint("j2");
    assert_eq!(
        (j2.kind, j2.damping, j2.armature, j2.range),
        (JointKind::Slide, 3.0, 0.5, Some((-0.2, 0.2)))
    );
    let j3 = joint("j3");
    assert_eq!(
        (j3.kind, j3.axis, j3.damping),
        (JointKind::Hinge, Vec3::z(), 1.0)
    );
    let (lo, hi) = j3.range.unwrap();
    assert!((lo + PI / 6.0).abs() < 1e-15 && (hi - PI / 6.0).abs() < 1e-15);
    let a = &m.actuators[0];
    assert_eq!(
        (a.kind, a.gear, a.ctrl_range, a.joint),
        (
            ActuatorKind::Motor,
            3.0,
            Some((-2.0, 2.0)),
            m.joint_id("j2").unwrap()
        )
    );
    // Density 500 from main: body b1 has g1 only, b2 has g2 and g3.
    assert!((m.bodies[1].mass - 500.0 * 8.0 * 0.1 * 0.2 * 0.3).abs() < 1e-12);
    let m2 = 500.0 * 8.0 * 0.05 * 0.2 * 0.3 + 500.0 * 4.0 / 3.0 * PI * 1e-3;
    assert!((m.bodies[2].mass - m2).abs() < 1e-12);
}

#[test]
fn mesh_geoms_from_stl_and_obj_match_boxes_of_the_same_size() {
    let loaded = load("mesh.xml", None);
    let m = &loaded.model;
    let GeomShape::ConvexMesh { vertices } = &m.geoms[2].shape else {
        panic!("{:?}", m.geoms[2].shape)
    };
    assert_eq!(vertices.len(), 8);
    assert!(
        vertices.iter().all(|p| (p.z.abs() - 0.125).abs() < 1e-15),
        "OBJ scaled by 2 along z"
    );
    // Hand-built: the inertia of boxes of the same size and mass.
    let mut parts = ModelParts {
        name: "mesh".into(),
        ..Default::default()
    };
    let (a, c) = (0.0625f64, 0.125f64);
    let m1 = 1000.0 * 8.0 * a * a * a;
    let mut stl = Body::new(
        "stl_body",
        0,
        Vec3::new(0.0, 0.0, 0.5),
        m1,
        Vec3::repeat(m1 * 2.0 * a * a / 3.0),
    );
    stl.com = Vec3::new(0.1, 0.0, 0.0);
    let mut obj = Body::new(
        "obj_body",
        0,
        Vec3::new(1.0, 0.0, 0.5),
        2.0,
        Vec3::new(
            2.0 * (a * a + c * c) / 3.0,
            2.0 * (a * a + c * c) / 3.0,
            2.0 * 2.0 * a * a / 3.0,
        ),
    );
    obj.quat = UnitQuaternion::from_axis_angle(&Vec3::z_axis(), PI / 2.0);
    obj.com = Vec3::new(0.0, 0.05, 0.0);
    parts.bodies = vec![stl, obj];
    parts.joints = vec![
        Joint::new("joint0", JointKind::Free, 1),
        Joint::new("joint1", JointKind::Free, 2),
    ];
    let mut g1 = Geom::new(
        "stl_geom",
        1,
        GeomShape::Box {
            half: Vec3::repeat(a),
        },
    );
    g1.pos = Vec3::new(0.1, 0.0, 0.0);
    let mut g2 = Geom::new(
        "obj_geom",
        2,
        GeomShape::Box {
            half: Vec3::new(a, a, c),
        },
    );
    g2.pos = Vec3::new(0.0, 0.05, 0.0);
    parts.geoms = vec![Geom::new("floor", 0, GeomShape::Plane), g1, g2];
    let hand = Model::new(parts).unwrap();
    for b in 1..3 {
        let (x, y) = (&m.bodies[b], &hand.bodies[b]);
        println!(
            "{}: mass {} com {} inertia {}",
            x.name,
            x.mass,
            x.com.transpose(),
            x.inertia.transpose()
        );
        assert!((x.mass - y.mass).abs() < 1e-12, "{} mass", x.name);
        assert!((x.com - y.com).abs().max() < 1e-12, "{} com", x.name);
        assert!(
            (full_inertia(x) - full_inertia(y)).abs().max() < 1e-12,
            "{} inertia",
            x.name
        );
    }
    let state = State {
        q: DVector::from_vec(vec![
            0.1, 0.2, 0.5, 0.9, 0.1, 0.3, 0.2, 1.0, 0.0, 0.4, 0.8, 0.0, 0.6, 0.0,
        ]),
        v: DVector::from_vec(vec![
            0.1, -0.2, 0.3, 1.0, 2.0, -1.0, 0.5, 0.5, 0.0, -2.0, 1.0, 3.0,
        ]),
        t: 0.0,
    };
    let mut state = state;
    for adr in [3, 10] {
        let n = state.q.rows(adr, 4).norm();
        state.q.rows_mut(adr, 4).unscale_mut(n);
    }
    let (dm, dc) = dynamics_gap(m, &hand, &state);
    println!("mesh: M difference {dm:.2e}, bias difference {dc:.2e}");
    assert!(dm < 1e-12 && dc < 1e-12);
}

#[test]
fn height_fields_from_elevation_and_a_binary_file() {
    let m = load("hfield.xml", None).model;
    let GeomShape::HeightField {
        heights,
        size_x,
        size_y,
    } = &m.geoms[0].shape
    else {
        panic!()
    };
    assert_eq!(
        (heights.nrows(), heights.ncols(), *size_x, *size_y),
        (3, 4, 4.0, 2.0)
    );
    // Top XML row is +y (the last row); normalized by the range 12 and scaled by 0.5 m.
    let expect = DMatrix::from_row_slice(
        3,
        4,
        &[8.0, 9.0, 10.0, 12.0, 4.0, 5.0, 6.0, 7.0, 0.0, 1.0, 2.0, 3.0],
    ) * (0.5 / 12.0);
    assert!((heights - &expect).abs().max() < 1e-7, "{heights}");
    assert_eq!(m.geoms[0].pos, Vec3::new(0.0, 0.0, -0.5));
    let GeomShape::HeightField {
        heights, size_x, ..
    } = &m.geoms[1].shape
    else {
        panic!()
    };
    let expect = DMatrix::from_row_slice(2, 3, &[0.0, 1.0, 2.0, 3.0, 4.0, 8.0]) * (2.0 / 8.0);
    assert_eq!(*size_x, 2.0);
    assert!((heights - &expect).abs().max() < 1e-7, "{heights}");
    assert!((m.bodies[1].mass - 1000.0 * 4.0 / 3.0 * PI * 1e-3).abs() < 1e-12);
}

#[test]
fn options_flags_equalities_pairs_and_excludes() {
    let xml = r#"
<mujoco model="misc">
  <compiler angle="radian" eulerseq="XYZ"/>
  <option timestep="0.005" gravity="0 0 -10" integrator="implicitfast" cone="elliptic" impratio="10"
          solver="CG" iterations="20" tolerance="1e-6" ls_iterations="7" ls_tolerance="0.1" noslip_iterations="0">
    <flag warmstart="disable" gravity="disable" island="enable" contact="enable"/>
  </option>
  <default><equality solref="0.05 1"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 0.1"/>
    <body name="a" pos="0 0 1" euler="0.1 0.2 0.3">
      <joint name="ja" type="hinge" axis="1 0 0"/>
      <geom name="ga" type="ellipsoid" size="0.1 0.2 0.3"/>
    </body>
    <body name="b" pos="0.5 0 1" axisangle="0 0 1 0.5">
      <joint name="jb" type="slide" ref="0.25"/>
      <geom name="gb" type="cylinder" size="0.1 0.2"/>
    </body>
  </worldbody>
  <equality>
    <connect name="c" body1="a" body2="b" anchor="0 0 0.1"/>
    <weld body1="a" body2="b" solimp="0.8 0.9"/>
    <joint joint1="ja" joint2="jb" polycoef="0 2"/>
    <connect body1="a" anchor="0 0 0" active="false"/>
  </equality>
  <contact>
    <pair geom1="ga" geom2="floor" condim="6" friction="0.3 0.3"/>
    <exclude body1="a" body2="b"/>
  </contact>
</mujoco>"#;
    let m = load_str(xml, Path::new("inline.xml"), Path::new("."), None)
        .unwrap_or_else(|e| panic!("{e}"))
        .model;
    let o = &m.options;
    assert_eq!(
        (o.timestep, o.gravity, o.integrator, o.cone, o.impratio),
        (
            0.005,
            Vec3::new(0.0, 0.0, -10.0),
            Integrator::ImplicitFast,
            Cone::Elliptic,
            10.0
        )
    );
    assert_eq!(
        (
            o.solver,
            o.iterations,
            o.tolerance,
            o.ls_iterations,
            o.ls_tolerance,
            o.noslip_iterations
        ),
        (SolverKind::Cg, 20, 1e-6, 7, 0.1, 0)
    );
    assert!(o.disable.warmstart && o.disable.gravity && !o.disable.contact && !o.disable.limit);
    // Extrinsic XYZ Euler angles: rotate about fixed x, then fixed y, then fixed z.
    let q = UnitQuaternion::from_axis_angle(&Vec3::z_axis(), 0.3)
        * UnitQuaternion::from_axis_angle(&Vec3::y_axis(), 0.2)
        * UnitQuaternion::from_axis_angle(&Vec3::x_axis(), 0.1);
    assert!(m.bodies[1].quat.angle_to(&q) < 1e-15);
    assert!(
        m.bodies[2]
            .quat
            .angle_to(&UnitQuaternion::from_axis_angle(&Vec3::z_axis(), 0.5))
            < 1e-15
    );
    assert_eq!(
        m.geoms[1].shape,
        GeomShape::Ellipsoid {
            radii: Vec3::new(0.1, 0.2, 0.3)
        }
    );
    let ell = 1000.0 * 4.0 / 3.0 * PI * 0.006;
    assert!((m.bodies[1].mass - ell).abs() < 1e-12);
    assert!(
        (m.bodies[1].inertia - Vec3::new(ell * 0.13 / 5.0, ell * 0.10 / 5.0, ell * 0.05 / 5.0))
            .abs()
            .max()
            < 1e-14
    );
    assert_eq!(m.qpos0[1], 0.25);
    assert_eq!(m.equalities.len(), 3);
    assert!(matches!(
        m.equalities[0],
        Equality::Connect {
            body1: 1,
            body2: 2,
            ..
        }
    ));
    assert_eq!(m.equality_soft[0].solref, [0.05, 1.0]);
    assert_eq!(m.equality_soft[1].solimp, [0.8, 0.9, 0.001, 0.5, 2.0]);
    // The weld's relative pose is the one at qpos0: body b in body a's frame.
    let Equality::Weld {
        relpos, relquat, ..
    } = &m.equalities[1]
    else {
        panic!()
    };
    let (qa, qb) = (m.bodies[1].quat, m.bodies[2].quat);
    assert!(
        (relpos - qa.inverse() * (m.bodies[2].pos - m.bodies[1].pos))
            .abs()
            .max()
            < 1e-15
    );
    assert!(relquat.angle_to(&(qa.inverse() * qb)) < 1e-12);
    assert!(matches!(
        m.equalities[2],
        Equality::Joint {
            joint1: 0,
            joint2: 1,
            polycoef: [0.0, 2.0, 0.0, 0.0, 0.0],
            ..
        }
    ));
    let p = &m.pairs[0];
    assert_eq!(
        (p.geoms, p.condim, p.friction),
        ([1, 0], 6, [0.3, 0.3, 0.005, 1e-4, 1e-4])
    );
    assert_eq!(m.excludes, vec![(1, 2)]);
}

#[test]
fn the_mjcf_scene_loads_a_file_and_a_key() {
    assert!(SCENES.iter().any(|e| e.name == "mjcf"));
    let file = fixture("cartpole.xml");
    let scene = build("mjcf", &json!({"file": file, "key": "swing"})).unwrap();
    assert_eq!(
        scene.initial,
        build("cartpole", &json!({})).unwrap().initial
    );
    assert_eq!(scene.horizon, 1.0);
    let rest = build("mjcf", &json!({"file": file})).unwrap();
    assert_eq!(rest.initial.q, rest.model.qpos0);
    for bad in [
        json!(null),
        json!({"key": "swing"}),
        json!({"file": file, "colour": 1}),
        json!({"file": file, "key": "nope"}),
    ] {
        let e = build("mjcf", &bad).unwrap_err();
        assert!(matches!(e, SceneError::BadParams { .. }), "{e}");
        println!("{e}");
    }
}

/// Load a bad fixture and check the error's kind, line and element; print it.
fn expect_error(name: &str, kind: MjcfErrorKind, line: u32, element: &str, needles: &[&str]) {
    let e = load_file(fixture(name), None).unwrap_err();
    println!("{e}");
    assert_eq!(e.kind, kind, "{e}");
    assert_eq!(e.file, fixture(name));
    assert_eq!((e.line, e.element.as_str()), (line, element), "{e}");
    let text = e.to_string();
    assert!(text.contains(&format!("{name}:{line}:")), "{text}");
    for n in needles {
        assert!(text.contains(n), "'{n}' not in: {text}");
    }
}

#[test]
fn malformed_xml_names_file_and_line() {
    expect_error(
        "bad_xml.xml",
        MjcfErrorKind::Xml,
        5,
        "mujoco",
        &["malformed XML"],
    );
}

#[test]
fn unknown_geom_type_names_the_geom() {
    expect_error(
        "bad_geom_type.xml",
        MjcfErrorKind::Invalid,
        5,
        "geom",
        &[
            "torus",
            "plane, hfield, sphere, capsule, ellipsoid, cylinder, box, mesh",
        ],
    );
}

#[test]
fn missing_mesh_file_names_the_mesh() {
    expect_error(
        "missing_mesh.xml",
        MjcfErrorKind::Io,
        3,
        "mesh",
        &["no_such_mesh.stl"],
    );
}

#[test]
fn size_with_too_few_numbers_names_the_geom() {
    expect_error(
        "short_size.xml",
        MjcfErrorKind::Invalid,
        5,
        "geom",
        &["box needs 3 size number(s), got 2"],
    );
}

#[test]
fn unsupported_physics_attribute_names_it_and_the_alternatives() {
    // option density="0" is MuJoCo's default and accepted; fluidshape="ellipsoid" is not.
    expect_error(
        "unsupported_attr.xml",
        MjcfErrorKind::Unsupported,
        6,
        "geom",
        &[
            "fluidshape=\"ellipsoid\"",
            "supported attributes: name, class, type",
        ],
    );
}

#[test]
fn unsupported_elements_and_values_are_errors_not_silently_ignored() {
    let cases = [
        ("<worldbody><body><freejoint/><geom size='0.1'/></body></worldbody><tendon/>", "tendon", "<compiler>"),
        ("<worldbody><body mocap='true'><geom size='0.1'/></body></worldbody>", "body", "mocap"),
        ("<option viscosity='0.1'/>", "option", "viscosity"),
        ("<option><flag override='enable'/></option>", "flag", "override"),
        ("<worldbody><body><frame/></body></worldbody>", "frame", "<inertial>"),
        ("<worldbody><body><joint name='j'/><geom size='0.1'/></body></worldbody><actuator><general joint='j'/></actuator>", "general", "<motor>"),
        ("<asset><mesh name='m' file='x.msh'/></asset>", "mesh", ".stl"),
    ];
    for (body, element, needle) in cases {
        let xml = format!("<mujoco>{body}</mujoco>");
        let e = load_str(&xml, Path::new("inline.xml"), Path::new("."), None).unwrap_err();
        println!("{e}");
        assert_eq!(e.kind, MjcfErrorKind::Unsupported, "{e}");
        assert_eq!(e.element, element, "{e}");
        assert!(e.to_string().contains(needle), "{e}");
    }
    // Visual-only content is accepted.
    let xml = "<mujoco><visual/><asset><texture name='t'/><material name='m' rgba='1 0 0 1'/></asset>\
               <worldbody><light/><body><site/><camera/><geom size='0.1' rgba='1 0 0 1' group='2' material='m'/></body></worldbody>\
               <sensor/></mujoco>";
    load_str(xml, Path::new("inline.xml"), Path::new("."), None).unwrap();
}

/// `noslip_iterations` and `noslip_tolerance` reach the model's options (soft_convex's
/// no-slip post-solver); a negative tolerance is an error naming the option.
#[test]
fn noslip_options_are_read_and_checked() {
    let xml = "<mujoco>\n  <option timestep=\"0.002\"\n          noslip_iterations=\"3\" noslip_tolerance=\"1e-5\"/>\n  <worldbody><body><freejoint/><geom size=\"0.1\"/></body></worldbody>\n</mujoco>";
    let m = load_str(xml, Path::new("noslip.xml"), Path::new("."), None)
        .unwrap_or_else(|e| panic!("{e}"))
        .model;
    assert_eq!(m.options.noslip_iterations, 3);
    assert_eq!(m.options.noslip_tolerance, 1e-5);
    let mut parts = ModelParts::default();
    parts.options.noslip_tolerance = -1.0;
    let err = Model::new(parts).unwrap_err().to_string();
    assert!(err.contains("noslip_tolerance"), "{err}");
}

/// A model that parses but fails validation points at the offending element's line.
#[test]
fn validation_errors_point_at_the_element_line() {
    let xml = "<mujoco>\n  <worldbody>\n    <body name=\"b\">\n      <freejoint/>\n      <geom name=\"g\" type=\"sphere\" size=\"0.1\" friction=\"-1 0 0\"/>\n    </body>\n  </worldbody>\n</mujoco>\n";
    let e = contactlab_scenarios::mjcf::load_str(
        xml,
        std::path::Path::new("neg.xml"),
        std::path::Path::new("."),
        None,
    )
    .unwrap_err();
    assert_eq!((e.line, e.element.as_str()), (5, "geom"), "{e}");
}

#[test]
fn keyframe_ctrl_drives_the_mjcf_scene_as_constant_controls() {
    // A 2 kg block on a slide, motor force ctrl = 3 N from key 'push': x(t) = F t² / (2 m).
    let file = fixture("slide_motor_key.xml");
    let scene = build("mjcf", &json!({"file": file, "key": "push"})).unwrap();
    assert_eq!(scene.controls_at(0.0, &scene.initial), vec![3.0]);
    assert_eq!(scene.controls_at(0.7, &scene.initial), vec![3.0]);
    let still = build("mjcf", &json!({"file": file})).unwrap();
    assert_eq!(still.controls_at(0.0, &still.initial), vec![0.0]);
    let mut f = contactlab_solvers::formulation::build("soft_convex", &json!(null)).unwrap();
    let (h, n) = (1e-3, 500);
    let mut s = scene.initial.clone();
    for _ in 0..n {
        let u = scene.controls_at(s.t, &s);
        let r = f.step(&scene.model, &mut s, &u, h);
        assert!(r.diverged.is_none(), "{r:?}");
    }
    let t = n as f64 * h;
    let exact = 3.0 * t * t / (2.0 * 2.0);
    println!("x({t}) = {} m, closed form {exact} m", s.q[0]);
    // Semi-implicit Euler is ahead by F h t / (2 m) = 0.2 % at t = 0.5 s.
    assert!(
        (s.q[0] - exact).abs() < 3e-3 * exact,
        "{} vs {exact}",
        s.q[0]
    );
}

#[test]
fn keyframe_ctrl_of_the_wrong_width_names_file_line_and_key() {
    let file = fixture("slide_motor_key.xml");
    let e = load_file(&file, Some("too_wide")).unwrap_err();
    println!("{e}");
    assert_eq!(e.kind, MjcfErrorKind::Invalid);
    assert_eq!((e.line, e.element.as_str()), (17, "key"), "{e}");
    let text = e.to_string();
    assert!(text.contains("slide_motor_key.xml:17:"), "{text}");
    assert!(
        text.contains("'ctrl' has 2 numbers, the model needs 1"),
        "{text}"
    );
    let e = build("mjcf", &json!({"file": file, "key": "too_wide"})).unwrap_err();
    assert!(e.to_string().contains("slide_motor_key.xml:17:"), "{e}");
}

/// The slide block of `slide_motor_key.xml` (2 kg, motor) run for `t_end` with soft_convex at
/// h = 1 ms under the scene `params`; returns x (m).
fn slide_block_x(params: serde_json::Value, t_end: f64) -> f64 {
    let scene = build("mjcf", &params).unwrap_or_else(|e| panic!("{e}"));
    let mut f = contactlab_solvers::formulation::build("soft_convex", &json!(null)).unwrap();
    let h = 1e-3;
    let mut s = scene.initial.clone();
    for _ in 0..(t_end / h).round() as usize {
        let u = scene.controls_at(s.t, &s);
        f.step(&scene.model, &mut s, &u, h);
    }
    s.q[0]
}

#[test]
fn control_schedule_from_csv_or_list_overrides_the_keyframe_ctrl() {
    let file = fixture("slide_motor_key.xml");
    // 3 N for 0.25 s, then nothing: x(0.5) = 3/4 0.25² + (3/2 0.25) 0.25 = 0.140625 m; the key
    // alone (3 N throughout) would give 0.1875 m. Semi-implicit Euler is ahead by O(h).
    let exact = 0.75 * 0.25 * 0.25 + 1.5 * 0.25 * 0.25;
    let csv = slide_block_x(
        json!({"file": file, "key": "push", "controls": fixture("slide_motor_schedule.csv")}),
        0.5,
    );
    let list = slide_block_x(
        json!({"file": file, "key": "push", "controls": [[0.0, 3.0], [0.25, 0.0]]}),
        0.5,
    );
    println!("hold: csv {csv} m, list {list} m, closed form {exact} m");
    assert_eq!(csv, list);
    assert!((csv - exact).abs() < 1e-2 * exact, "{csv} vs {exact}");
    // Linear: F = 6 t N, so x = t³/2: 0.0625 m at 0.5 s.
    let lin = slide_block_x(
        json!({"file": file, "controls": [[0.0, 0.0], [0.5, 3.0]], "interpolation": "linear"}),
        0.5,
    );
    println!("linear: {lin} m, closed form 0.0625 m");
    assert!((lin - 0.0625).abs() < 5e-3 * 0.0625, "{lin}");
}

#[test]
fn control_schedule_of_wrong_width_or_non_increasing_times_names_file_line_or_key() {
    let file = fixture("slide_motor_key.xml");
    let err = |controls: serde_json::Value, extra: &[(&str, &str)]| {
        let mut p = json!({"file": file, "controls": controls});
        for (k, v) in extra {
            p[*k] = json!(v);
        }
        let e = build("mjcf", &p).unwrap_err().to_string();
        println!("{e}");
        e
    };
    let path = |n: &str| fixture(n).display().to_string();
    let e = err(json!(path("schedule_wrong_width.csv")), &[]);
    assert!(
        e.contains(&format!(
            "{}:3: 3 numbers, expected 2",
            path("schedule_wrong_width.csv")
        )),
        "{e}"
    );
    let e = err(json!(path("schedule_time_repeats.csv")), &[]);
    assert!(
        e.contains(&format!(
            "{}:5: time 0.25 s does not increase",
            path("schedule_time_repeats.csv")
        )),
        "{e}"
    );
    let e = err(json!(path("schedule_unknown_actuator.csv")), &[]);
    assert!(
        e.contains(":1: header") && e.contains("no column 'push_motor'"),
        "{e}"
    );
    let e = err(json!(path("no_such_schedule.csv")), &[]);
    assert!(
        e.contains("no_such_schedule.csv") && e.contains("cannot read"),
        "{e}"
    );
    let e = err(json!([[0.0, 1.0], [0.5, 1.0, 2.0]]), &[]);
    assert!(e.contains("controls[1]: 3 numbers, expected 2"), "{e}");
    let e = err(json!([[0.0, 1.0], [0.0, 2.0]]), &[]);
    assert!(e.contains("controls[1]: time 0 s does not increase"), "{e}");
    let e = err(json!([[0.0, 1.0]]), &[("interpolation", "cubic")]);
    assert!(e.contains("interpolation") && e.contains("cubic"), "{e}");
    let e = build("mjcf", &json!({"file": file, "interpolation": "linear"})).unwrap_err();
    assert!(e.to_string().contains("no 'controls' schedule"), "{e}");
}
