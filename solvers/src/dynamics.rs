//! Equations of motion in generalized coordinates: M(q) v̇ + c(q, v) = τ.
//!
//! * Mass matrix by the composite rigid body algorithm (Featherstone 2008, §6.2, Table 6.2),
//!   armature added on the diagonal as MuJoCo does (`mj_crb`).
//! * Bias forces c = Coriolis + centrifugal + gravity by the recursive Newton–Euler algorithm
//!   with zero acceleration and the base accelerating at −g (Featherstone §5.3, Table 5.1),
//!   MuJoCo's `qfrc_bias` (`mj_rne` with flg_acc = 0).
//! * Passive forces: joint damping −b v and joint springs −k (q − springref) (MuJoCo
//!   `mj_passive`, hinge and slide springs).
//! * Position integration from velocities (MuJoCo `mj_integratePos`): q += h v for hinge and
//!   slide; for ball and free rotations q ← q ⊗ exp(h ω / 2) with ω in the body frame.
//!
//! All spatial quantities use the world-origin Plücker convention of [`crate::kinematics`].

use nalgebra::{DMatrix, DVector, Matrix3, Matrix6, Quaternion, UnitQuaternion};

use crate::kinematics::{ang, cross_force, cross_motion, lin, spatial, Kinematics, Spatial};
use crate::model::{JointKind, Model, Vec3};

/// Skew-symmetric cross-product matrix `[v]×` with `[v]× w = v × w`.
pub fn skew(v: &Vec3) -> Matrix3<f64> {
    Matrix3::new(0.0, -v.z, v.y, v.z, 0.0, -v.x, -v.y, v.x, 0.0)
}

/// Spatial inertia (6 × 6, kg, kg m, kg m²) of body `b` in the world frame about the origin.
///
/// With COM `c` and rotational inertia about the COM `I_c` (world frame):
/// `[[I_c + m [c]×[c]×ᵀ, m [c]×], [m [c]×ᵀ, m 1]]` (Featherstone eq. 2.63), mapping a motion
/// `(ω, v_O)` to the momentum `(L_O, p)`.
pub fn spatial_inertia(model: &Model, kin: &Kinematics, b: usize) -> Matrix6<f64> {
    let body = &model.bodies[b];
    let m = body.mass;
    let r = kin.ximat[b];
    let ic = r * Matrix3::from_diagonal(&body.inertia) * r.transpose();
    let cx = skew(&kin.xipos[b]);
    let mut out = Matrix6::zeros();
    out.fixed_view_mut::<3, 3>(0, 0).copy_from(&(ic + m * cx * cx.transpose()));
    out.fixed_view_mut::<3, 3>(0, 3).copy_from(&(m * cx));
    out.fixed_view_mut::<3, 3>(3, 0).copy_from(&(m * cx.transpose()));
    out.fixed_view_mut::<3, 3>(3, 3).copy_from(&(Matrix3::identity() * m));
    out
}

/// Joint-space mass matrix M(q) (nv × nv, SI mixed units), armature included.
///
/// Composite rigid body algorithm: `M_ij = s_iᵀ I^c_{body(j)} s_j` for dof i on the path of
/// dof j, where `I^c` is the composite (subtree) spatial inertia.
pub fn mass_matrix(model: &Model, kin: &Kinematics) -> DMatrix<f64> {
    let nb = model.bodies.len();
    let mut ic: Vec<Matrix6<f64>> = (0..nb).map(|b| spatial_inertia(model, kin, b)).collect();
    for b in (1..nb).rev() {
        let p = model.bodies[b].parent;
        if p != 0 {
            let child = ic[b];
            ic[p] += child;
        }
    }
    let mut m = DMatrix::zeros(model.nv, model.nv);
    for i in 0..model.nv {
        let f = ic[model.dof_body[i]] * kin.cdof[i];
        m[(i, i)] = kin.cdof[i].dot(&f) + model.joints[model.dof_joint[i]].armature;
        let mut j = model.dof_parent[i];
        while let Some(jd) = j {
            let mij = kin.cdof[jd].dot(&f);
            m[(i, jd)] = mij;
            m[(jd, i)] = mij;
            j = model.dof_parent[jd];
        }
    }
    m
}

/// Time derivative of dof d's motion subspace given the body velocities (see module doc of
/// [`crate::kinematics`]): hinge/slide move with the parent, ball and free rotations with the
/// body, free translations are fixed in the world.
fn cdof_dot(model: &Model, kin: &Kinematics, cvel: &[Spatial], d: usize) -> Spatial {
    let j = &model.joints[model.dof_joint[d]];
    let b = model.dof_body[d];
    match j.kind {
        JointKind::Hinge | JointKind::Slide => cross_motion(&cvel[model.bodies[b].parent], &kin.cdof[d]),
        JointKind::Ball => cross_motion(&cvel[b], &kin.cdof[d]),
        JointKind::Free => {
            if d - j.dof_adr < 3 {
                Spatial::zeros()
            } else {
                cross_motion(&cvel[b], &kin.cdof[d])
            }
        }
    }
}

/// Spatial velocity `(ω, v_O)` of every body (world frame, about the origin) for velocities `v`.
pub fn body_velocities(model: &Model, kin: &Kinematics, v: &DVector<f64>) -> Vec<Spatial> {
    let nb = model.bodies.len();
    let mut cvel = vec![Spatial::zeros(); nb];
    for b in 1..nb {
        let mut vb = cvel[model.bodies[b].parent];
        for &ji in &model.bodies[b].joints {
            let j = &model.joints[ji];
            for d in j.dof_adr..j.dof_adr + j.kind.nv() {
                vb += kin.cdof[d] * v[d];
            }
        }
        cvel[b] = vb;
    }
    cvel
}

/// Inverse dynamics by recursive Newton–Euler: the generalized force τ (length nv) that
/// produces acceleration `a` at velocity `v` under gravity, τ = M a + c.
pub fn inverse_dynamics(model: &Model, kin: &Kinematics, v: &DVector<f64>, a: &DVector<f64>) -> DVector<f64> {
    let nb = model.bodies.len();
    let cvel = body_velocities(model, kin, v);
    let mut cacc = vec![Spatial::zeros(); nb];
    // The world accelerates upward at −g: gravity as a fictitious base acceleration.
    cacc[0] = spatial(Vec3::zeros(), -model.options.gravity);
    let mut f = vec![Spatial::zeros(); nb];
    for b in 1..nb {
        let mut ab = cacc[model.bodies[b].parent];
        for &ji in &model.bodies[b].joints {
            let j = &model.joints[ji];
            for d in j.dof_adr..j.dof_adr + j.kind.nv() {
                ab += cdof_dot(model, kin, &cvel, d) * v[d] + kin.cdof[d] * a[d];
            }
        }
        cacc[b] = ab;
        let i = spatial_inertia(model, kin, b);
        f[b] = i * ab + cross_force(&cvel[b], &(i * cvel[b]));
    }
    let mut tau = DVector::zeros(model.nv);
    for b in (1..nb).rev() {
        for &ji in &model.bodies[b].joints {
            let j = &model.joints[ji];
            for d in j.dof_adr..j.dof_adr + j.kind.nv() {
                tau[d] = kin.cdof[d].dot(&f[b]);
            }
        }
        let p = model.bodies[b].parent;
        let fb = f[b];
        f[p] += fb;
    }
    tau
}

/// Bias forces c(q, v) (length nv): Coriolis, centrifugal and gravity, MuJoCo's `qfrc_bias`.
pub fn bias_forces(model: &Model, kin: &Kinematics, v: &DVector<f64>) -> DVector<f64> {
    inverse_dynamics(model, kin, v, &DVector::zeros(model.nv))
}

/// Passive joint forces (length nv): damping −b·v and springs −k·(q − springref) on hinge and
/// slide joints (N or N m), as in MuJoCo's `mj_passive`.
pub fn passive_forces(model: &Model, q: &DVector<f64>, v: &DVector<f64>) -> DVector<f64> {
    let mut f = DVector::zeros(model.nv);
    for j in &model.joints {
        for i in 0..j.kind.nv() {
            f[j.dof_adr + i] -= j.damping * v[j.dof_adr + i];
        }
        if matches!(j.kind, JointKind::Hinge | JointKind::Slide) && j.stiffness > 0.0 {
            f[j.dof_adr] -= j.stiffness * (q[j.qpos_adr] - j.springref);
        }
    }
    f
}

/// Kinetic energy ½ vᵀ M v (J).
pub fn kinetic_energy(mass: &DMatrix<f64>, v: &DVector<f64>) -> f64 {
    0.5 * v.dot(&(mass * v))
}

/// Potential energy (J): gravity −Σ m_b g·x_com,b plus joint springs ½ k (q − springref)².
pub fn potential_energy(model: &Model, kin: &Kinematics, q: &DVector<f64>) -> f64 {
    let g = model.options.gravity;
    let mut e: f64 = model.bodies.iter().zip(&kin.xipos).map(|(b, x)| -b.mass * g.dot(x)).sum();
    for j in &model.joints {
        if matches!(j.kind, JointKind::Hinge | JointKind::Slide) {
            let dq = q[j.qpos_adr] - j.springref;
            e += 0.5 * j.stiffness * dq * dq;
        }
    }
    e
}

/// Rotate the scalar-first quaternion at `q[adr..adr+4]` by the body-frame angular velocity
/// `w` (rad/s) over `h` seconds: q ← normalize(q) ⊗ (cos(θ/2), ŵ sin(θ/2)), θ = h‖w‖
/// (MuJoCo `mju_quatIntegrate`).
pub fn integrate_quat(q: &mut DVector<f64>, adr: usize, w: &Vec3, h: f64) {
    let raw = Quaternion::new(q[adr], q[adr + 1], q[adr + 2], q[adr + 3]);
    let n = raw.norm();
    let cur = if (n - 1.0).abs() > 1e-15 { raw / n } else { raw };
    let wn = w.norm();
    let out = if wn == 0.0 {
        cur
    } else {
        let axis = if wn < 1e-15 { Vec3::x() } else { w / wn };
        let half = 0.5 * h * wn;
        let (s, c) = half.sin_cos();
        cur * Quaternion::new(c, axis.x * s, axis.y * s, axis.z * s)
    };
    q[adr] = out.w;
    q[adr + 1] = out.i;
    q[adr + 2] = out.j;
    q[adr + 3] = out.k;
}

/// Advance positions `q` by velocities `v` over `h` seconds (MuJoCo `mj_integratePos`).
pub fn integrate_positions(model: &Model, q: &mut DVector<f64>, v: &DVector<f64>, h: f64) {
    for j in &model.joints {
        let (qa, da) = (j.qpos_adr, j.dof_adr);
        match j.kind {
            JointKind::Hinge | JointKind::Slide => q[qa] += h * v[da],
            JointKind::Ball => integrate_quat(q, qa, &Vec3::new(v[da], v[da + 1], v[da + 2]), h),
            JointKind::Free => {
                for i in 0..3 {
                    q[qa + i] += h * v[da + i];
                }
                integrate_quat(q, qa + 3, &Vec3::new(v[da + 3], v[da + 4], v[da + 5]), h);
            }
        }
    }
}

/// The velocity that takes `q1` to `q2` in time `h` (MuJoCo `mj_differentiatePos`), so that
/// `integrate_positions(q1, v, h) == q2`. Used for finite differences in qpos.
pub fn differentiate_positions(model: &Model, q1: &DVector<f64>, q2: &DVector<f64>, h: f64) -> DVector<f64> {
    let mut v = DVector::zeros(model.nv);
    let quat = |q: &DVector<f64>, a: usize| {
        UnitQuaternion::from_quaternion(Quaternion::new(q[a], q[a + 1], q[a + 2], q[a + 3]))
    };
    for j in &model.joints {
        let (qa, da) = (j.qpos_adr, j.dof_adr);
        let rot = |qa: usize| (quat(q1, qa).inverse() * quat(q2, qa)).scaled_axis() / h;
        match j.kind {
            JointKind::Hinge | JointKind::Slide => v[da] = (q2[qa] - q1[qa]) / h,
            JointKind::Ball => v.fixed_rows_mut::<3>(da).copy_from(&rot(qa)),
            JointKind::Free => {
                for i in 0..3 {
                    v[da + i] = (q2[qa + i] - q1[qa + i]) / h;
                }
                v.fixed_rows_mut::<3>(da + 3).copy_from(&rot(qa + 3));
            }
        }
    }
    v
}

/// World-frame linear and angular momentum `(p, L_O)` of all bodies (kg m/s, kg m²/s, about
/// the world origin).
pub fn momentum(model: &Model, kin: &Kinematics, v: &DVector<f64>) -> (Vec3, Vec3) {
    let cvel = body_velocities(model, kin, v);
    let mut h = Spatial::zeros();
    for b in 1..model.bodies.len() {
        h += spatial_inertia(model, kin, b) * cvel[b];
    }
    (lin(&h), ang(&h))
}
