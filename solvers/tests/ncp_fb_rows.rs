//! ncp_fb's implicit servo rows and compliant equality rows against per-step closed forms
//! (spec `ncp_fb_and_penalty.md` §1.4, §2.4): a rotor of inertia I about a vertical hinge
//! driven by a velocity or position servo, and a 1 kg body hanging from the world on a
//! `connect` equality.

use contactlab_solvers::formulation::Formulation;
use contactlab_solvers::model::{
    Actuator, ActuatorKind, Body, Equality, Joint, JointKind, Model, ModelParts, Vec3,
};
use contactlab_solvers::ncp_fb::{NcpFb, NcpFbParams, ServoForm};

const I: f64 = 0.2; // rotor inertia about its hinge (kg m²)

/// A rotor about the world z axis (gravity has no moment) with one servo.
fn rotor(kind: ActuatorKind) -> Model {
    let body = Body::new("rotor", 0, Vec3::zeros(), 1.0, Vec3::new(I, I, I));
    let mut hinge = Joint::new("hinge", JointKind::Hinge, 1);
    hinge.axis = Vec3::z();
    Model::new(ModelParts {
        bodies: vec![body],
        joints: vec![hinge],
        actuators: vec![Actuator {
            name: "servo".into(),
            joint: 0,
            kind,
            gear: 1.0,
            ctrl_range: None,
            force_range: None,
        }],
        ..Default::default()
    })
    .expect("valid rotor")
}

/// Tight solves (residual 1e-14), so the closed forms are met to round-off.
fn ncp(form: ServoForm) -> NcpFb {
    NcpFb::new(NcpFbParams {
        servo_form: form,
        tolerance: 1e-14,
        ncp_tolerance: 0.0,
        ..NcpFbParams::default()
    })
    .unwrap()
}

/// Velocity servo, backward Euler on I v̇ = k_v (ū − v): v⁺ = (I v⁻ + h k_v ū)/(I + h k_v),
/// stable at h k_v / I = 50 where the explicit servo diverges.
#[test]
fn velocity_servo_row_is_backward_euler() {
    let kv = 100.0;
    let model = rotor(ActuatorKind::VelocityServo { kv });
    let (h, target) = (0.1, 3.0);
    let mut f = ncp(ServoForm::Paper);
    let mut s = model.default_state();
    let mut v = 0.0;
    for _ in 0..20 {
        let r = f.step(&model, &mut s, &[target], h);
        assert!(r.converged);
        v = (I * v + h * kv * target) / (I + h * kv);
        assert!((s.v[0] - v).abs() < 1e-12, "{} vs {v}", s.v[0]);
    }
    assert!((s.v[0] - target).abs() < 1e-9);
    // The explicit form at the same h k_v / I = 50 blows up.
    let mut f = ncp(ServoForm::Explicit);
    let mut s = model.default_state();
    for _ in 0..20 {
        f.step(&model, &mut s, &[target], h);
    }
    assert!(s.v[0].abs() > 1e6 || !s.v[0].is_finite(), "{}", s.v[0]);
}

/// Position servo in the paper's form: F = −(k_p + k_v/h) e(q⁺), and as the true implicit PD:
/// F = −k_p e(q⁺) − k_v q̇⁺, with e = q − ū; per step
/// v⁺ = (I v⁻ − h K e(q⁻)) / (I + h² K + h D) with (K, D) = (k_p + k_v/h, 0) or (k_p, k_v).
#[test]
fn position_servo_rows_paper_and_implicit_pd() {
    let (kp, kv) = (400.0, 30.0);
    let model = rotor(ActuatorKind::PositionServo { kp, kv });
    let (h, target) = (0.02, 0.5);
    for (form, k, d) in [
        (ServoForm::Paper, kp + kv / h, 0.0),
        (ServoForm::ImplicitPd, kp, kv),
    ] {
        let mut f = ncp(form);
        let mut s = model.default_state();
        let (mut q, mut v) = (0.0, 0.0);
        for _ in 0..100 {
            f.step(&model, &mut s, &[target], h);
            v = (I * v - h * k * (q - target)) / (I + h * h * k + h * d);
            q += h * v;
            assert!((s.v[0] - v).abs() < 1e-10, "{form:?}: {} vs {v}", s.v[0]);
            assert!((s.q[0] - q).abs() < 1e-12, "{form:?}");
        }
        assert!(
            (s.q[0] - target).abs() < 1e-3,
            "{form:?} settles: {}",
            s.q[0]
        );
    }
}

/// A 1 kg body hanging from the world on a `connect` equality at its centre, with compliance E:
/// at rest the row solves c(q⁺) + E λ = 0 with λ = m g, so the body sags by E m g.
#[test]
fn equality_row_sags_by_compliance_times_load() {
    let mut body = Body::new(
        "bob",
        0,
        Vec3::new(0.0, 0.0, 1.0),
        1.0,
        Vec3::new(0.01, 0.01, 0.01),
    );
    body.quat = nalgebra::UnitQuaternion::identity();
    let model = Model::new(ModelParts {
        bodies: vec![body],
        joints: vec![Joint::new("free", JointKind::Free, 1)],
        equalities: vec![Equality::Connect {
            name: "hook".into(),
            body1: 1,
            body2: 0,
            anchor: Vec3::zeros(),
        }],
        ..Default::default()
    })
    .expect("valid model");
    for (e, h) in [(1e-6, 0.01), (1e-5, 0.002)] {
        let mut f = NcpFb::new(NcpFbParams {
            compliance: e,
            ..NcpFbParams::default()
        })
        .unwrap();
        let mut s = model.default_state();
        for _ in 0..400 {
            let r = f.step(&model, &mut s, &[], h);
            assert!(r.converged);
        }
        let sag = 1.0 - s.q[2];
        assert!(
            (sag - e * 9.81).abs() < 1e-3 * e * 9.81,
            "E = {e}: sag {sag} vs {}",
            e * 9.81
        );
        assert!(s.q[0].abs() < 1e-12 && s.q[1].abs() < 1e-12);
    }
}
