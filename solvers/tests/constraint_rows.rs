//! Every constraint row kind against finite differences: J·v equals d(residual)/dt along
//! q(t) = integrate_positions(q, v, t), at random configurations.

mod common;

use common::*;
use contactlab_solvers::constraint::{
    contact_rows, friction_loss_rows, limit_rows, model_rows, stack_jacobian, ConstraintRow,
    ContactComponent, LimitSide, RowKind,
};
use contactlab_solvers::dynamics::differentiate_positions;
use contactlab_solvers::kinematics::{forward_kinematics, Kinematics};
use contactlab_solvers::model::{Equality, Model, Vec3};
use nalgebra::{DVector, Matrix3};

const D: f64 = 1e-6;

/// Rows at q with every limit active (huge margin), so the same rows exist at q ± D.
fn rows_at(model: &Model, q: &DVector<f64>, v: &DVector<f64>) -> Vec<ConstraintRow> {
    model_rows(model, &forward_kinematics(model, q), q, v, 1e3)
}

#[test]
fn equality_and_limit_rows_match_finite_differences() {
    for free_base in [false, true] {
        let model = chain(free_base);
        let mut r = rng(21);
        let mut worst = std::collections::BTreeMap::<&str, f64>::new();
        for _ in 0..20 {
            let q = random_q(&model, &mut r);
            let v = random_v(&model, &mut r, 2.0);
            let rows = rows_at(&model, &q, &v);
            let (qp, qm) = (advance(&model, &q, &v, D), advance(&model, &q, &v, -D));
            let (rp, rm) = (rows_at(&model, &qp, &v), rows_at(&model, &qm, &v));
            assert_eq!(rows.len(), rp.len());
            let fd_v = differentiate_positions(&model, &qm, &qp, 2.0 * D);
            for ((row, p), m) in rows.iter().zip(&rp).zip(&rm) {
                assert_eq!(row.kind, p.kind);
                assert!((row.vel - row.jac.dot(&v)).abs() < 1e-14);
                let (label, err) = match row.kind {
                    RowKind::FrictionLoss { dof } => ("frictionloss", (row.vel - fd_v[dof]).abs()),
                    RowKind::Equality { id, .. } => (
                        match model.equalities[id] {
                            Equality::Connect { .. } => "connect",
                            Equality::Weld { .. } => "weld",
                            Equality::Joint { .. } => "joint coupling",
                        },
                        (row.vel - (p.pos - m.pos) / (2.0 * D)).abs(),
                    ),
                    RowKind::JointLimit { joint, .. } => (
                        if model.joints[joint].kind == contactlab_solvers::model::JointKind::Ball {
                            "ball limit"
                        } else {
                            "hinge/slide limit"
                        },
                        (row.vel - (p.pos - m.pos) / (2.0 * D)).abs(),
                    ),
                    RowKind::Contact { .. } => unreachable!(),
                };
                let w = worst.entry(label).or_insert(0.0);
                *w = w.max(err);
            }
        }
        let listed: Vec<String> = worst.iter().map(|(k, e)| format!("{k} {e:.3e}")).collect();
        println!(
            "J·v vs d(pos)/dt (free_base = {free_base}): {}",
            listed.join(", ")
        );
        assert_eq!(worst.len(), 6, "every row kind exercised: {worst:?}");
        assert!(worst.values().all(|&e| e < 1e-6));
    }
}

#[test]
fn limit_rows_follow_mujoco_signs_and_activation() {
    let model = chain(false);
    let h1 = model.joint_id("hinge1").unwrap();
    let j = &model.joints[h1];
    let mut q = model.qpos0.clone();
    let v = DVector::from_element(model.nv, 0.5);
    q[j.qpos_adr] = -1.05; // range (−1, 1.2): 0.05 below the lower bound
    let rows: Vec<_> = limit_rows(&model, &q, &v, 0.0)
        .into_iter()
        .filter(|r| matches!(r.kind, RowKind::JointLimit { joint, .. } if joint == h1))
        .collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].kind,
        RowKind::JointLimit {
            joint: h1,
            side: LimitSide::Lower
        }
    );
    assert!((rows[0].pos + 0.05).abs() < 1e-12);
    assert_eq!(rows[0].jac[j.dof_adr], 1.0);
    q[j.qpos_adr] = 1.25;
    let rows: Vec<_> = limit_rows(&model, &q, &v, 0.0)
        .into_iter()
        .filter(|r| matches!(r.kind, RowKind::JointLimit { joint, .. } if joint == h1))
        .collect();
    assert_eq!(
        rows[0].kind,
        RowKind::JointLimit {
            joint: h1,
            side: LimitSide::Upper
        }
    );
    assert!((rows[0].pos + 0.05).abs() < 1e-12);
    assert_eq!(rows[0].jac[j.dof_adr], -1.0);
    assert_eq!(rows[0].vel, -0.5);
    // Inside the range, beyond the margin: no row; within the margin: a row with dist > 0.
    q[j.qpos_adr] = 1.1;
    let count = |m: f64| {
        limit_rows(&model, &q, &v, m)
            .iter()
            .filter(|r| matches!(r.kind, RowKind::JointLimit { joint, .. } if joint == h1))
            .count()
    };
    assert_eq!((count(0.0), count(0.2)), (0, 1));
    // Friction loss: one row per dof with frictionloss > 0 (hinge1: 1 dof, ball3: 3 dofs).
    assert_eq!(friction_loss_rows(&model, &v).len(), 4);
}

/// World position of a point fixed to body b (given in its frame) and its orientation.
fn body_point(kin: &Kinematics, b: usize, local: &Vec3) -> Vec3 {
    kin.xpos[b] + kin.xquat[b] * local
}

#[test]
fn contact_rows_match_finite_differences() {
    for free_base in [false, true] {
        let model = chain(free_base);
        let nb = model.bodies.len();
        let mut r = rng(31);
        let (mut worst_t, mut worst_r) = (0.0f64, 0.0f64);
        for trial in 0..20 {
            let q = random_q(&model, &mut r);
            let v = random_v(&model, &mut r, 2.0);
            let kin = forward_kinematics(&model, &q);
            // Pairs including the world (static plane-like geom) and two moving bodies.
            let b1 = trial % nb;
            let b2 = 1 + (trial * 3 + 1) % (nb - 1);
            let point = kin.xpos[b2] + Vec3::new(0.1, -0.05, 0.2);
            let frame: Matrix3<f64> = random_quat(&mut r)
                .to_rotation_matrix()
                .into_inner()
                .transpose();
            let gap = -0.003;
            let rows = contact_rows(&model, &kin, &v, trial, [b1, b2], &point, &frame, gap, 6);
            assert_eq!(rows.len(), 6);
            assert_eq!(rows[0].pos, gap);
            // Material points of each body coinciding with `point` now, and the rotations.
            let local = |b: usize| kin.xquat[b].inverse() * (point - kin.xpos[b]);
            let (l1, l2) = (local(b1), local(b2));
            let (kp, km) = (
                forward_kinematics(&model, &advance(&model, &q, &v, D)),
                forward_kinematics(&model, &advance(&model, &q, &v, -D)),
            );
            let rel = |k: &Kinematics| body_point(k, b2, &l2) - body_point(k, b1, &l1);
            let dv = (rel(&kp) - rel(&km)) / (2.0 * D);
            let rot = |b: usize| (kp.xquat[b] * km.xquat[b].inverse()).scaled_axis() / (2.0 * D);
            let dw = rot(b2) - rot(b1);
            for (i, row) in rows.iter().enumerate() {
                let RowKind::Contact { contact, component } = row.kind else {
                    panic!()
                };
                assert_eq!(
                    (contact, component),
                    (trial, ContactComponent::for_condim(6)[i])
                );
                if i < 3 {
                    worst_t = worst_t.max((row.vel - frame.row(i).dot(&dv.transpose())).abs());
                } else {
                    worst_r = worst_r.max((row.vel - frame.row(i - 3).dot(&dw.transpose())).abs());
                }
            }
            for (condim, n) in [(1u8, 1usize), (3, 3), (4, 4)] {
                let sub = contact_rows(
                    &model,
                    &kin,
                    &v,
                    trial,
                    [b1, b2],
                    &point,
                    &frame,
                    gap,
                    condim,
                );
                assert_eq!(sub.len(), n);
                assert_eq!(sub, rows[..n].to_vec());
            }
        }
        println!("contact rows vs finite differences (free_base = {free_base}): translational {worst_t:.3e} m/s, torsional/rolling {worst_r:.3e} rad/s");
        assert!(worst_t < 1e-6 && worst_r < 1e-6);
    }
}

#[test]
fn stacked_jacobian_keeps_row_order() {
    let model = chain(true);
    let mut r = rng(41);
    let q = random_q(&model, &mut r);
    let v = random_v(&model, &mut r, 1.0);
    let rows = rows_at(&model, &q, &v);
    let j = stack_jacobian(&rows, model.nv);
    let jv = &j * &v;
    for (i, row) in rows.iter().enumerate() {
        assert!((jv[i] - row.vel).abs() < 1e-12);
    }
    // MuJoCo order: equality, then friction loss, then limits.
    let rank = |k: &RowKind| match k {
        RowKind::Equality { .. } => 0,
        RowKind::FrictionLoss { .. } => 1,
        RowKind::JointLimit { .. } => 2,
        RowKind::Contact { .. } => 3,
    };
    assert!(rows
        .windows(2)
        .all(|w| rank(&w[0].kind) <= rank(&w[1].kind)));
    assert_eq!(
        rows.iter()
            .filter(|r| matches!(r.kind, RowKind::Equality { .. }))
            .count(),
        3 + 6 + 1
    );
}
