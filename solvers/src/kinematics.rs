//! Forward kinematics and Jacobians.
//!
//! Spatial vectors are 6-vectors in world-frame Plücker coordinates taken **about the world
//! origin**: a motion vector is `(ω, v_O)` (angular first, then the linear velocity of the body
//! point that momentarily coincides with the world origin) and a force vector is `(n_O, f)`
//! (moment about the origin, then force). With this choice every body's spatial quantities live
//! in one frame, so composite inertias are plain sums (Featherstone, *Rigid Body Dynamics
//! Algorithms*, 2008, §2.3–2.9 and §7.1).
//!
//! The motion subspace of each dof (MuJoCo's `cdof`, here about the origin) is
//! * hinge: `(a, p × a)` with world axis `a` through world anchor `p`;
//! * slide: `(0, a)`;
//! * ball and the rotational part of free joints: `(R e_i, p × R e_i)`, `R` the body
//!   orientation after the joint, `p` the anchor (qvel is in the body frame);
//! * the translational part of free joints: `(0, e_i)` (qvel is the world-frame velocity of
//!   the body origin).
//!
//! Body placement follows MuJoCo's `mj_kinematics` (engine_core_smooth.c): the body frame is the
//! parent frame composed with `(pos, quat)`, then each joint acts about its anchor in turn.

use nalgebra::{DMatrix, Matrix3, UnitQuaternion, Vector6};

use crate::model::{JointKind, Model, Quat, Vec3};

/// A spatial vector `(angular; linear)`, world frame, about the world origin.
pub type Spatial = Vector6<f64>;

/// Positions and motion subspaces of every body, joint and geom at one configuration.
#[derive(Debug, Clone)]
pub struct Kinematics {
    /// Body frame origins in the world (m), per body.
    pub xpos: Vec<Vec3>,
    /// Body frame orientations in the world, per body.
    pub xquat: Vec<Quat>,
    /// Centres of mass in the world (m), per body.
    pub xipos: Vec<Vec3>,
    /// Principal-axes orientation in the world, per body.
    pub ximat: Vec<Matrix3<f64>>,
    /// Joint anchors in the world (m), per joint.
    pub xanchor: Vec<Vec3>,
    /// Joint axes in the world (unit), per joint (hinge and slide; z otherwise).
    pub xaxis: Vec<Vec3>,
    /// Motion subspace of each dof, length nv (see the module doc).
    pub cdof: Vec<Spatial>,
    /// Geom positions in the world (m), per geom.
    pub geom_xpos: Vec<Vec3>,
    /// Geom orientations in the world, per geom.
    pub geom_xquat: Vec<Quat>,
}

/// Read the scalar-first quaternion at `q[adr..adr + 4]`, normalized as MuJoCo's
/// `mju_normalize4` does (spec §A0): left unchanged when |‖q‖ − 1| ≤ 1e-15, otherwise
/// multiplied by 1/‖q‖. The last bit matters for exactly resting contacts (spec §A7).
///
/// A zero or non-finite quaternion gives NaN so that divergence propagates and is detected,
/// rather than panicking.
pub fn quat_at(q: &nalgebra::DVector<f64>, adr: usize) -> Quat {
    let raw = nalgebra::Quaternion::new(q[adr], q[adr + 1], q[adr + 2], q[adr + 3]);
    let norm = raw.norm();
    if (norm - 1.0).abs() <= 1e-15 {
        UnitQuaternion::new_unchecked(raw)
    } else {
        UnitQuaternion::new_unchecked(raw * (1.0 / norm))
    }
}

/// Compute body, joint and geom placements and the dof motion subspaces at positions `q`.
///
/// `q` has length `model.nq`. Non-finite inputs propagate as NaN (never a panic).
pub fn forward_kinematics(model: &Model, q: &nalgebra::DVector<f64>) -> Kinematics {
    let nb = model.bodies.len();
    let mut k = Kinematics {
        xpos: vec![Vec3::zeros(); nb],
        xquat: vec![Quat::identity(); nb],
        xipos: vec![Vec3::zeros(); nb],
        ximat: vec![Matrix3::identity(); nb],
        xanchor: vec![Vec3::zeros(); model.joints.len()],
        xaxis: vec![Vec3::z(); model.joints.len()],
        cdof: vec![Spatial::zeros(); model.nv],
        geom_xpos: vec![Vec3::zeros(); model.geoms.len()],
        geom_xquat: vec![Quat::identity(); model.geoms.len()],
    };
    for b in 1..nb {
        let body = &model.bodies[b];
        let (ppos, pquat) = (k.xpos[body.parent], k.xquat[body.parent]);
        let mut pos = ppos + pquat * body.pos;
        let mut quat = pquat * body.quat;
        for &ji in &body.joints {
            let j = &model.joints[ji];
            let qa = j.qpos_adr;
            match j.kind {
                JointKind::Free => {
                    pos = Vec3::new(q[qa], q[qa + 1], q[qa + 2]);
                    quat = quat_at(q, qa + 3);
                    k.xanchor[ji] = pos;
                }
                JointKind::Ball => {
                    let anchor = pos + quat * j.pos;
                    quat *= quat_at(q, qa);
                    pos = anchor - quat * j.pos;
                    k.xanchor[ji] = anchor;
                }
                JointKind::Hinge => {
                    let anchor = pos + quat * j.pos;
                    let axis = quat * j.axis;
                    let rot = UnitQuaternion::from_scaled_axis(j.axis * (q[qa] - j.reference));
                    quat *= rot;
                    pos = anchor - quat * j.pos;
                    k.xanchor[ji] = anchor;
                    k.xaxis[ji] = axis;
                }
                JointKind::Slide => {
                    let axis = quat * j.axis;
                    k.xanchor[ji] = pos + quat * j.pos;
                    k.xaxis[ji] = axis;
                    pos += axis * (q[qa] - j.reference);
                }
            }
        }
        k.xpos[b] = pos;
        k.xquat[b] = quat;
        k.xipos[b] = pos + quat * body.com;
        k.ximat[b] = (quat * body.inertia_frame)
            .to_rotation_matrix()
            .into_inner();
        // Motion subspaces, with the final body frame (ball/free rotations are body-frame).
        let rot = quat.to_rotation_matrix().into_inner();
        for &ji in &body.joints {
            let j = &model.joints[ji];
            let d = j.dof_adr;
            match j.kind {
                JointKind::Free => {
                    let p = k.xanchor[ji];
                    for i in 0..3 {
                        let e = Vec3::ith(i, 1.0);
                        k.cdof[d + i] = spatial(Vec3::zeros(), e);
                        let a = rot.column(i).into_owned();
                        k.cdof[d + 3 + i] = spatial(a, p.cross(&a));
                    }
                }
                JointKind::Ball => {
                    let p = k.xanchor[ji];
                    for i in 0..3 {
                        let a = rot.column(i).into_owned();
                        k.cdof[d + i] = spatial(a, p.cross(&a));
                    }
                }
                JointKind::Hinge => {
                    let (a, p) = (k.xaxis[ji], k.xanchor[ji]);
                    k.cdof[d] = spatial(a, p.cross(&a));
                }
                JointKind::Slide => k.cdof[d] = spatial(Vec3::zeros(), k.xaxis[ji]),
            }
        }
    }
    for (gi, g) in model.geoms.iter().enumerate() {
        k.geom_xpos[gi] = k.xpos[g.body] + k.xquat[g.body] * g.pos;
        k.geom_xquat[gi] = k.xquat[g.body] * g.quat;
    }
    k
}

/// Build a spatial vector from its angular and linear parts.
pub fn spatial(ang: Vec3, lin: Vec3) -> Spatial {
    Spatial::new(ang.x, ang.y, ang.z, lin.x, lin.y, lin.z)
}

/// The angular part of a spatial vector.
pub fn ang(s: &Spatial) -> Vec3 {
    Vec3::new(s[0], s[1], s[2])
}

/// The linear part of a spatial vector.
pub fn lin(s: &Spatial) -> Vec3 {
    Vec3::new(s[3], s[4], s[5])
}

/// Motion cross product `v ×m m` (Featherstone eq. 2.31, world-origin Plücker form).
pub fn cross_motion(v: &Spatial, m: &Spatial) -> Spatial {
    let (w, vo) = (ang(v), lin(v));
    let (mw, mv) = (ang(m), lin(m));
    spatial(w.cross(&mw), w.cross(&mv) + vo.cross(&mw))
}

/// Force cross product `v ×f f` (Featherstone eq. 2.32).
pub fn cross_force(v: &Spatial, f: &Spatial) -> Spatial {
    let (w, vo) = (ang(v), lin(v));
    let (n, fl) = (ang(f), lin(f));
    spatial(w.cross(&n) + vo.cross(&fl), w.cross(&fl))
}

/// The dofs that move body `b`: all dofs of `b` and of its ancestors, in increasing order.
pub fn body_dofs(model: &Model, mut b: usize) -> Vec<usize> {
    let mut dofs = Vec::new();
    while b != 0 {
        for &ji in model.bodies[b].joints.iter().rev() {
            let j = &model.joints[ji];
            dofs.extend((j.dof_adr..j.dof_adr + j.kind.nv()).rev());
        }
        b = model.bodies[b].parent;
    }
    dofs.reverse();
    dofs
}

/// Jacobians of a point fixed to body `b`, at world position `point` (m).
///
/// Returns `(jac_lin, jac_ang)`, each 3 × nv: the world-frame linear velocity of the point is
/// `jac_lin · qvel` (m/s) and the body's world-frame angular velocity is `jac_ang · qvel` (rad/s).
/// The world body (b = 0) gives zeros.
pub fn point_jacobian(
    model: &Model,
    kin: &Kinematics,
    b: usize,
    point: &Vec3,
) -> (DMatrix<f64>, DMatrix<f64>) {
    let mut jl = DMatrix::zeros(3, model.nv);
    let mut ja = DMatrix::zeros(3, model.nv);
    for d in body_dofs(model, b) {
        let s = &kin.cdof[d];
        let (w, vo) = (ang(s), lin(s));
        // v_point = v_O + ω × p
        jl.set_column(d, &(vo + w.cross(point)));
        ja.set_column(d, &w);
    }
    (jl, ja)
}

/// The body's spatial Jacobian (6 × nv): spatial velocity `(ω, v_O) = J · qvel`.
pub fn body_jacobian(model: &Model, kin: &Kinematics, b: usize) -> DMatrix<f64> {
    let mut j = DMatrix::zeros(6, model.nv);
    for d in body_dofs(model, b) {
        j.set_column(d, &kin.cdof[d]);
    }
    j
}
