//! Batched forward kinematics: body, joint and geom placements and dof motion subspaces for
//! every world, the formulas of [`crate::kinematics::forward_kinematics`] (MuJoCo's
//! `mj_kinematics`) unrolled over the model's bodies and joints (free, hinge, slide).

use burn_tensor::backend::Backend;

use super::scalar::S;
use super::spatial::{
    add3, column, cross3, q4c, qmat, qmul, qrot, scale3, sub3, sv, v3c, zero3, Sv, M3, Q4, V3,
};
use crate::model::{JointKind, Model};

/// Placements of one configuration, per world.
pub struct Kin<B: Backend> {
    /// Body origins (m, world), `(nbody)` × 3.
    pub xpos: Vec<V3<B>>,
    /// Body orientations, `(nbody)` quaternions.
    pub xquat: Vec<Q4<B>>,
    /// Centres of mass (m, world), `(nbody)` × 3.
    pub xipos: Vec<V3<B>>,
    /// Principal-axes rotation matrices (world), `(nbody)`.
    pub ximat: Vec<M3<B>>,
    /// Motion subspace of each dof, `(nv)` spatial vectors about the world origin.
    pub cdof: Vec<Sv<B>>,
    /// Geom positions (m, world), `(ngeom)` × 3.
    pub geom_xpos: Vec<V3<B>>,
    /// Geom orientations, `(ngeom)` quaternions.
    pub geom_xquat: Vec<Q4<B>>,
}

/// ‖q‖ of a quaternion `(w, x, y, z)` in nalgebra's order (`Quaternion::norm`: coordinates
/// stored `(x, y, z, w)`, a 4-vector's dot as `(x² + z²) + (y² + w²)`), so that it has the cpu
/// engine's last bit.
pub fn quat_norm<B: Backend>(q: &Q4<B>) -> S<B> {
    let [w, x, y, z] = q;
    ((x * x + z * z) + (y * y + w * w)).sqrt()
}

/// The quaternion at `q[adr..adr + 4]`, normalized as [`crate::kinematics::quat_at`]: left as
/// is when |‖q‖ − 1| ≤ 1e-15, else multiplied by 1/‖q‖.
pub fn quat_at<B: Backend>(q: &[S<B>], adr: usize) -> Q4<B> {
    let raw: Q4<B> = std::array::from_fn(|i| q[adr + i].clone());
    let norm = quat_norm(&raw);
    let keep = (&norm - 1.0).abs().le(&S::C(1e-15));
    // x · 1 = x exactly, so one select of the factor stands for four of the components.
    let inv = keep.select(&S::C(1.0), &(S::C(1.0) / &norm));
    std::array::from_fn(|i| &raw[i] * &inv)
}

/// Forward kinematics at positions `q` (`nq` per-world scalars).
pub fn forward<B: Backend>(model: &Model, q: &[S<B>]) -> Kin<B> {
    let nb = model.bodies.len();
    let one: Q4<B> = [S::C(1.0), S::zero(), S::zero(), S::zero()];
    let ident: M3<B> =
        std::array::from_fn(|i| std::array::from_fn(|j| S::C(if i == j { 1.0 } else { 0.0 })));
    let mut k = Kin {
        xpos: vec![zero3(); nb],
        xquat: vec![one.clone(); nb],
        xipos: vec![zero3(); nb],
        ximat: vec![ident; nb],
        cdof: Vec::with_capacity(model.nv),
        geom_xpos: Vec::new(),
        geom_xquat: Vec::new(),
    };
    let mut cdof: Vec<Option<Sv<B>>> = vec![None; model.nv];
    for b in 1..nb {
        let body = &model.bodies[b];
        let (ppos, pquat) = (k.xpos[body.parent].clone(), k.xquat[body.parent].clone());
        let mut pos = add3(&ppos, &qrot(&pquat, &v3c(&body.pos)));
        let mut quat = qmul(&pquat, &q4c(&body.quat));
        // (joint, anchor, world axis) for the motion subspaces below.
        let mut placed: Vec<(usize, V3<B>, V3<B>)> = Vec::new();
        for &ji in &body.joints {
            let j = &model.joints[ji];
            let qa = j.qpos_adr;
            match j.kind {
                JointKind::Free => {
                    pos = [q[qa].clone(), q[qa + 1].clone(), q[qa + 2].clone()];
                    quat = quat_at(q, qa + 3);
                    placed.push((ji, pos.clone(), zero3()));
                }
                JointKind::Hinge => {
                    let jpos = v3c(&j.pos);
                    let anchor = add3(&pos, &qrot(&quat, &jpos));
                    let axis = qrot(&quat, &v3c(&j.axis));
                    // UnitQuaternion::from_scaled_axis(a θ) for a unit local axis a.
                    let half = (&q[qa] - j.reference) * 0.5;
                    let (s, c) = (half.sin(), half.cos());
                    let an = j.axis.normalize();
                    let rot: Q4<B> = [c, &s * an.x, &s * an.y, &s * an.z];
                    quat = qmul(&quat, &rot);
                    pos = sub3(&anchor, &qrot(&quat, &jpos));
                    placed.push((ji, anchor, axis));
                }
                JointKind::Slide => {
                    let axis = qrot(&quat, &v3c(&j.axis));
                    let anchor = add3(&pos, &qrot(&quat, &v3c(&j.pos)));
                    pos = add3(&pos, &scale3(&axis, &(&q[qa] - j.reference)));
                    placed.push((ji, anchor, axis));
                }
                JointKind::Ball => unreachable!("engine::batched_support refuses ball joints"),
            }
        }
        k.xipos[b] = add3(&pos, &qrot(&quat, &v3c(&body.com)));
        k.ximat[b] = qmat(&qmul(&quat, &q4c(&body.inertia_frame)));
        let rot = qmat(&quat);
        for (ji, anchor, axis) in placed {
            let j = &model.joints[ji];
            let d = j.dof_adr;
            match j.kind {
                JointKind::Free => {
                    for i in 0..3 {
                        let mut e = zero3();
                        e[i] = S::C(1.0);
                        cdof[d + i] = Some(sv(&zero3(), &e));
                        let a = column(&rot, i);
                        cdof[d + 3 + i] = Some(sv(&a, &cross3(&anchor, &a)));
                    }
                }
                JointKind::Hinge => cdof[d] = Some(sv(&axis, &cross3(&anchor, &axis))),
                JointKind::Slide => cdof[d] = Some(sv(&zero3(), &axis)),
                JointKind::Ball => unreachable!(),
            }
        }
        k.xpos[b] = pos;
        k.xquat[b] = quat;
    }
    k.cdof = cdof
        .into_iter()
        .map(|c| c.expect("every dof belongs to a joint"))
        .collect();
    for g in &model.geoms {
        k.geom_xpos
            .push(add3(&k.xpos[g.body], &qrot(&k.xquat[g.body], &v3c(&g.pos))));
        k.geom_xquat.push(qmul(&k.xquat[g.body], &q4c(&g.quat)));
    }
    k
}
