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
    out.fixed_view_mut::<3, 3>(0, 0)
        .copy_from(&(ic + m * cx * cx.transpose()));
    out.fixed_view_mut::<3, 3>(0, 3).copy_from(&(m * cx));
    out.fixed_view_mut::<3, 3>(3, 0)
        .copy_from(&(m * cx.transpose()));
    out.fixed_view_mut::<3, 3>(3, 3)
        .copy_from(&(Matrix3::identity() * m));
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

/// Body velocities and the time derivatives of the dof motion subspaces, as MuJoCo's
/// `mj_comVel`.
///
/// Within a body, each dof's `ṡ = v_before × s`, where `v_before` is the spatial velocity
/// accumulated **before** that joint (the parent's velocity plus the body's earlier joints; for
/// the rotational dofs of a free joint, after its translational dofs). Free translations are
/// fixed in the world (`ṡ = 0`). For a ball joint `v_before × s_i` differs from the exact
/// `ṡ_i` by terms that cancel in `Σ_i ṡ_i q̇_i` (antisymmetry of `s_j × s_i`), so the sum is
/// exact, as it is for every other joint.
///
/// (Fixed: the first version used the parent's velocity for hinge/slide dofs, ignoring earlier
/// joints of the same body, and the full body velocity for ball dofs; the former gave wrong bias
/// forces for bodies with more than one joint.)
fn velocities_and_cdof_dot(
    model: &Model,
    kin: &Kinematics,
    v: &DVector<f64>,
) -> (Vec<Spatial>, Vec<Spatial>) {
    let nb = model.bodies.len();
    let mut cvel = vec![Spatial::zeros(); nb];
    let mut cdof_dot = vec![Spatial::zeros(); model.nv];
    for b in 1..nb {
        let mut vb = cvel[model.bodies[b].parent];
        for &ji in &model.bodies[b].joints {
            let j = &model.joints[ji];
            let da = j.dof_adr;
            match j.kind {
                JointKind::Free => {
                    for d in da..da + 3 {
                        vb += kin.cdof[d] * v[d];
                    }
                    for d in da + 3..da + 6 {
                        cdof_dot[d] = cross_motion(&vb, &kin.cdof[d]);
                    }
                    for d in da + 3..da + 6 {
                        vb += kin.cdof[d] * v[d];
                    }
                }
                _ => {
                    for d in da..da + j.kind.nv() {
                        cdof_dot[d] = cross_motion(&vb, &kin.cdof[d]);
                    }
                    for d in da..da + j.kind.nv() {
                        vb += kin.cdof[d] * v[d];
                    }
                }
            }
        }
        cvel[b] = vb;
    }
    (cvel, cdof_dot)
}

/// Spatial velocity `(ω, v_O)` of every body (world frame, about the origin) for velocities `v`.
pub fn body_velocities(model: &Model, kin: &Kinematics, v: &DVector<f64>) -> Vec<Spatial> {
    velocities_and_cdof_dot(model, kin, v).0
}

/// Every body's spatial velocity `(ω, v_O)` and velocity-product acceleration
/// `c_b = Σ ṡ_i v_i` over the dofs of its chain (both world frame, about the origin): the body's
/// spatial acceleration at zero `qacc` and zero gravity (the velocity terms of RNE's forward
/// pass; MuJoCo's `cacc` less gravity).
pub fn bias_accelerations(
    model: &Model,
    kin: &Kinematics,
    v: &DVector<f64>,
) -> (Vec<Spatial>, Vec<Spatial>) {
    let (vel, cdof_dot) = velocities_and_cdof_dot(model, kin, v);
    let mut acc = vec![Spatial::zeros(); model.bodies.len()];
    for b in 1..model.bodies.len() {
        let mut a = acc[model.bodies[b].parent];
        for &ji in &model.bodies[b].joints {
            let j = &model.joints[ji];
            for d in j.dof_adr..j.dof_adr + j.kind.nv() {
                a += cdof_dot[d] * v[d];
            }
        }
        acc[b] = a;
    }
    (vel, acc)
}

/// Inverse dynamics by recursive Newton–Euler: the generalized force τ (length nv) that
/// produces acceleration `a` at velocity `v` under gravity, τ = M a + c, with M including the
/// armature as in [`mass_matrix`] (MuJoCo `mj_inverse`: `mj_rne` plus armature·qacc).
pub fn inverse_dynamics(
    model: &Model,
    kin: &Kinematics,
    v: &DVector<f64>,
    a: &DVector<f64>,
) -> DVector<f64> {
    let nb = model.bodies.len();
    let (cvel, cdof_dot) = velocities_and_cdof_dot(model, kin, v);
    let mut cacc = vec![Spatial::zeros(); nb];
    // The world accelerates upward at −g: gravity as a fictitious base acceleration.
    cacc[0] = spatial(Vec3::zeros(), -model.options.gravity);
    let mut f = vec![Spatial::zeros(); nb];
    for b in 1..nb {
        let mut ab = cacc[model.bodies[b].parent];
        for &ji in &model.bodies[b].joints {
            let j = &model.joints[ji];
            for d in j.dof_adr..j.dof_adr + j.kind.nv() {
                ab += cdof_dot[d] * v[d] + kin.cdof[d] * a[d];
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
                // Armature (rotor inertia) is in M (mass_matrix), so it belongs in τ = M a + c
                // too; MuJoCo's mj_inverse adds it after mj_rne the same way. (Fixed: the
                // first version left it out, so τ differed from M a + c by armature·a.)
                tau[d] = kin.cdof[d].dot(&f[b]) + j.armature * a[d];
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

/// Smooth generalized forces (length nv; N or N m): `passive − bias + actuation`, MuJoCo's
/// `qfrc_smooth` less the constraint forces (documentation, "Computation > Forward dynamics"),
/// with gravity's share of the bias removed when the model disables gravity
/// (`<flag gravity="disable"/>`: inverse dynamics at v = 0, a = 0 is gravity's generalized
/// force). `kin` must be the kinematics at `q`; `actuation` is the caller's actuator force.
pub fn smooth_forces(
    model: &Model,
    kin: &Kinematics,
    q: &DVector<f64>,
    v: &DVector<f64>,
    actuation: &DVector<f64>,
) -> DVector<f64> {
    let mut f = passive_forces(model, q, v) + actuation - bias_forces(model, kin, v);
    if model.options.disable.gravity {
        let zero = DVector::zeros(model.nv);
        f += inverse_dynamics(model, kin, &zero, &zero);
    }
    f
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
    let mut e: f64 = model
        .bodies
        .iter()
        .zip(&kin.xipos)
        .map(|(b, x)| -b.mass * g.dot(x))
        .sum();
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
    let cur = if (n - 1.0).abs() > 1e-15 {
        raw / n
    } else {
        raw
    };
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
pub fn differentiate_positions(
    model: &Model,
    q1: &DVector<f64>,
    q2: &DVector<f64>,
    h: f64,
) -> DVector<f64> {
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

/// Unconstrained forward dynamics: the acceleration `a = M⁻¹ (τ + passive − c)` (length nv) at
/// positions `q` and velocities `v` under the applied generalized force `tau` (length nv; N or
/// N m per dof), with passive forces from [`passive_forces`] and bias forces from
/// [`bias_forces`]. No contacts, limits or equality constraints.
///
/// Returns NaNs (never panics) if M is not positive definite or the inputs are not finite.
pub fn forward_dynamics(
    model: &Model,
    q: &DVector<f64>,
    v: &DVector<f64>,
    tau: &DVector<f64>,
) -> DVector<f64> {
    let kin = crate::kinematics::forward_kinematics(model, q);
    let m = mass_matrix(model, &kin);
    let rhs = tau + passive_forces(model, q, v) - bias_forces(model, &kin, v);
    match m.cholesky() {
        Some(ch) => ch.solve(&rhs),
        None => DVector::from_element(model.nv, f64::NAN),
    }
}

/// `dexp⁻¹_x(y)` for rotation vectors (so(3) ≅ R³): the inverse of the derivative of the
/// exponential map, `y − ½ x×y + (1 − (θ/2) cot(θ/2))/θ² · x×(x×y)`, θ = ‖x‖
/// (Iserles et al., *Lie-group methods*, Acta Numerica 2000, §2.3; series used for θ < 1e-4).
pub fn dexp_inv(x: &Vec3, y: &Vec3) -> Vec3 {
    let th = x.norm();
    let c = if th < 1e-4 {
        // 1/12 + θ²/720 + O(θ⁴)
        1.0 / 12.0 + th * th / 720.0
    } else {
        let half = 0.5 * th;
        (1.0 - half * half.cos() / half.sin()) / (th * th)
    };
    y - 0.5 * x.cross(y) + c * x.cross(&x.cross(y))
}

/// One step of the classical fourth-order Runge–Kutta method for the **unconstrained smooth**
/// dynamics `M(q) v̇ + c(q, v) = τ + passive(q, v)`, with positions on the configuration
/// manifold handled by Runge–Kutta–Munthe-Kaas (RKMK4; Munthe-Kaas, BIT 38, 1998).
///
/// Positions are tracked as a tangent vector θ (length nv) from the step's start `q`:
/// `q(θ) = integrate_positions(q, θ, 1)`. Hinge, slide and free-translation coordinates have
/// θ̇ = v; ball and free rotations (body-frame ω, `q ⊗ exp(θ)`) have θ̇ = dexp⁻¹_{−θ}(ω). The
/// method is fourth order in h on the group (quaternions stay unit up to round-off), so for
/// smooth motion it conserves energy and momentum far better than (semi-)implicit Euler.
///
/// This is a reference integrator for contact-free dynamics (free flight, closed-form tests,
/// tiny-timestep references); contact formulations use their own integrators (spec
/// soft_convex_and_signorini.md §A6, ncp_fb_and_penalty.md). `tau` (length nv) is held constant
/// over the step. Updates `q`, `v` in place; `h` in seconds.
pub fn rk4_step(
    model: &Model,
    q: &mut DVector<f64>,
    v: &mut DVector<f64>,
    tau: &DVector<f64>,
    h: f64,
) {
    let q0 = q.clone();
    let v0 = v.clone();
    // θ̇ for body-frame velocity w at tangent offset θ.
    let theta_dot = |theta: &DVector<f64>, w: &DVector<f64>| {
        let mut out = w.clone();
        for j in &model.joints {
            let rot = match j.kind {
                JointKind::Ball => Some(j.dof_adr),
                JointKind::Free => Some(j.dof_adr + 3),
                JointKind::Hinge | JointKind::Slide => None,
            };
            if let Some(d) = rot {
                let x = -Vec3::new(theta[d], theta[d + 1], theta[d + 2]);
                let y = Vec3::new(w[d], w[d + 1], w[d + 2]);
                out.fixed_rows_mut::<3>(d).copy_from(&dexp_inv(&x, &y));
            }
        }
        out
    };
    let at = |theta: &DVector<f64>| {
        let mut qs = q0.clone();
        integrate_positions(model, &mut qs, theta, 1.0);
        qs
    };
    let k1v = forward_dynamics(model, &q0, &v0, tau);
    let k1t = v0.clone();
    let t2 = &k1t * (0.5 * h);
    let v2 = &v0 + &k1v * (0.5 * h);
    let k2v = forward_dynamics(model, &at(&t2), &v2, tau);
    let k2t = theta_dot(&t2, &v2);
    let t3 = &k2t * (0.5 * h);
    let v3 = &v0 + &k2v * (0.5 * h);
    let k3v = forward_dynamics(model, &at(&t3), &v3, tau);
    let k3t = theta_dot(&t3, &v3);
    let t4 = &k3t * h;
    let v4 = &v0 + &k3v * h;
    let k4v = forward_dynamics(model, &at(&t4), &v4, tau);
    let k4t = theta_dot(&t4, &v4);
    let theta = (k1t + (k2t + k3t) * 2.0 + k4t) * (h / 6.0);
    *q = at(&theta);
    *v = v0 + (k1v + (k2v + k3v) * 2.0 + k4v) * (h / 6.0);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// dexp_x(y) = y + (1 − cos θ)/θ² x×y + (θ − sin θ)/θ³ x×(x×y), the inverse of dexp_inv.
    fn dexp(x: &Vec3, y: &Vec3) -> Vec3 {
        let th = x.norm();
        y + (1.0 - th.cos()) / (th * th) * x.cross(y)
            + (th - th.sin()) / (th * th * th) * x.cross(&x.cross(y))
    }

    #[test]
    fn dexp_inv_inverts_dexp() {
        let y = Vec3::new(0.3, -1.2, 0.7);
        for x in [
            Vec3::new(0.5, -0.2, 0.9),
            Vec3::new(2.0, 1.0, -0.5),
            Vec3::new(1e-3, 2e-3, -1e-3),
        ] {
            let err = (dexp_inv(&x, &dexp(&x, &y)) - y).amax();
            assert!(err < 1e-12, "dexp_inv error {err} at {x:?}");
        }
        // Series branch agrees with the closed form at the switch-over.
        let x = Vec3::new(0.0, 0.0, 0.9999e-4);
        let closed = {
            let th = x.norm();
            let half = 0.5 * th;
            y - 0.5 * x.cross(&y)
                + (1.0 - half * half.cos() / half.sin()) / (th * th) * x.cross(&x.cross(&y))
        };
        assert!((dexp_inv(&x, &y) - closed).amax() < 1e-14);
    }

    #[test]
    fn skew_is_cross_product() {
        let (a, b) = (Vec3::new(1.0, -2.0, 0.5), Vec3::new(0.3, 0.7, -1.1));
        assert!((skew(&a) * b - a.cross(&b)).amax() < 1e-15);
    }
}
