//! Model validation: each bad element gives the specific ModelError naming it; nothing panics.

use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::model::{
    Actuator, ActuatorKind, Body, Equality, Geom, Joint, JointKind, Model, ModelError, ModelParts,
    Vec3,
};

fn parts() -> ModelParts {
    let mut p = ModelParts {
        name: "v".into(),
        ..Default::default()
    };
    p.bodies.push(Body::new(
        "arm",
        0,
        Vec3::zeros(),
        1.0,
        Vec3::new(0.1, 0.1, 0.1),
    ));
    p.bodies.push(Body::new(
        "hand",
        1,
        Vec3::new(0.0, 0.0, -0.5),
        0.5,
        Vec3::new(0.01, 0.01, 0.01),
    ));
    p.joints.push(Joint::new("shoulder", JointKind::Hinge, 1));
    p.joints.push(Joint::new("wrist", JointKind::Slide, 2));
    p.geoms.push(Geom::new(
        "arm_box",
        1,
        GeomShape::Box {
            half: Vec3::new(0.1, 0.1, 0.2),
        },
    ));
    p
}

fn expect_err(p: ModelParts, name: &str) -> ModelError {
    let r = std::panic::catch_unwind(|| Model::new(p));
    let err = r
        .expect("Model::new panicked")
        .expect_err("invalid model accepted");
    let msg = err.to_string();
    println!("{msg}");
    assert!(msg.contains(name), "message '{msg}' does not name '{name}'");
    err
}

#[test]
fn valid_parts_build() {
    assert!(Model::new(parts()).is_ok());
}

#[test]
fn negative_mass() {
    let mut p = parts();
    p.bodies[1].mass = -1.0;
    assert!(
        matches!(expect_err(p, "hand"), ModelError::BadMass { ref body, mass } if body == "hand" && mass == -1.0)
    );
}

#[test]
fn zero_size_box() {
    let mut p = parts();
    p.geoms[0].shape = GeomShape::Box {
        half: Vec3::new(0.1, 0.0, 0.2),
    };
    assert!(
        matches!(expect_err(p, "arm_box"), ModelError::BadSize { ref geom, value, .. } if geom == "arm_box" && value == 0.0)
    );
}

#[test]
fn nan_inertia() {
    let mut p = parts();
    p.bodies[0].inertia = Vec3::new(0.1, f64::NAN, 0.1);
    assert!(
        matches!(expect_err(p, "arm"), ModelError::BadInertia { ref body, .. } if body == "arm")
    );
}

#[test]
fn zero_joint_axis() {
    let mut p = parts();
    p.joints[1].axis = Vec3::zeros();
    assert!(
        matches!(expect_err(p, "wrist"), ModelError::ZeroAxis { ref joint, .. } if joint == "wrist")
    );
}

#[test]
fn joint_range_min_above_max() {
    let mut p = parts();
    p.joints[0].range = Some((0.5, -0.5));
    assert!(
        matches!(expect_err(p, "shoulder"), ModelError::BadRange { ref joint, min, max } if joint == "shoulder" && min == 0.5 && max == -0.5)
    );
}

#[test]
fn free_joint_below_a_moving_body() {
    let mut p = parts();
    p.joints[1] = Joint::new("floating", JointKind::Free, 2);
    assert!(
        matches!(expect_err(p, "floating"), ModelError::BadFreeJoint { ref joint } if joint == "floating")
    );
}

#[test]
fn joint_equality_on_ball_joint() {
    let mut p = parts();
    p.joints[1] = Joint::new("wrist", JointKind::Ball, 2);
    p.equalities.push(Equality::Joint {
        name: "tie".into(),
        joint1: 0,
        joint2: 1,
        polycoef: [0.0, 1.0, 0.0, 0.0, 0.0],
    });
    assert!(matches!(
        expect_err(p, "tie"),
        ModelError::BadParameter { .. }
    ));
}

#[test]
fn actuator_and_equality_joint_indices_follow_joint_reordering() {
    // Joints listed out of body order: Model::new sorts them by body and must remap references.
    let mut p = parts();
    p.joints.swap(0, 1); // [wrist (body 2), shoulder (body 1)]
    p.actuators.push(Actuator {
        name: "motor".into(),
        joint: 1, // "shoulder" in the order given
        kind: ActuatorKind::Motor,
        gear: 1.0,
        ctrl_range: None,
        force_range: None,
    });
    p.equalities.push(Equality::Joint {
        name: "tie".into(),
        joint1: 0,
        joint2: 1,
        polycoef: [0.0, 1.0, 0.0, 0.0, 0.0],
    });
    let m = Model::new(p).unwrap();
    assert_eq!(m.joints[m.actuators[0].joint].name, "shoulder");
    let Equality::Joint { joint1, joint2, .. } = &m.equalities[0] else {
        panic!()
    };
    assert_eq!(
        (
            m.joints[*joint1].name.as_str(),
            m.joints[*joint2].name.as_str()
        ),
        ("wrist", "shoulder")
    );
}
