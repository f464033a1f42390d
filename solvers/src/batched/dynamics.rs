//! Batched equations of motion, the formulas of [`crate::dynamics`] per world: body velocities
//! and the motion subspaces' derivatives (`mj_comVel`), bias forces by recursive Newton–Euler
//! with the base accelerating at −g (`mj_rne`), the mass matrix by the composite rigid body
//! algorithm (`mj_crb`, armature on the diagonal), its Cholesky solve, and position
//! integration (`mj_integratePos`). Spatial conventions as [`crate::kinematics`].

use burn_tensor::backend::Backend;

use super::kinematics::Kin;
use super::scalar::S;
use super::spatial::{
    add3, add6, ang, cross3, cross_force, cross_motion, dot3, dot6, lin, mat_t_vec, mat_vec,
    scale3, scale6, sv, v3c, zero6, Sv, V3,
};
use crate::model::{JointKind, Model, Vec3};

/// Spatial inertia of body `b` applied to the motion `s = (ω, v_O)`: the momentum
/// `(I_c ω + c × p, p)` with `p = m (v_O + ω × c)`, c the COM and I_c the world-frame rotational
/// inertia about it; equal to [`crate::dynamics::spatial_inertia`] times s.
pub fn inertia_times<B: Backend>(model: &Model, k: &Kin<B>, b: usize, s: &Sv<B>) -> Sv<B> {
    let body = &model.bodies[b];
    let (w, vo) = (ang(s), lin(s));
    let c = &k.xipos[b];
    let r = &k.ximat[b];
    // I_c ω = R diag(I) Rᵀ ω
    let local = mat_t_vec(r, &w);
    let scaled = [
        &local[0] * body.inertia.x,
        &local[1] * body.inertia.y,
        &local[2] * body.inertia.z,
    ];
    let icw = mat_vec(r, &scaled);
    let p = scale3(&add3(&vo, &cross3(&w, c)), &S::C(body.mass));
    sv(&add3(&icw, &cross3(c, &p)), &p)
}

/// Body spatial velocities `(nbody)` and dof subspace derivatives `(nv)` at velocities `v`
/// ([`crate::dynamics::body_velocities`]'s recursion, free rotations after translations).
pub fn velocities<B: Backend>(model: &Model, k: &Kin<B>, v: &[S<B>]) -> (Vec<Sv<B>>, Vec<Sv<B>>) {
    let nb = model.bodies.len();
    let mut cvel = vec![zero6(); nb];
    let mut cdof_dot = vec![zero6(); model.nv];
    for b in 1..nb {
        let mut vb = cvel[model.bodies[b].parent].clone();
        for &ji in &model.bodies[b].joints {
            let j = &model.joints[ji];
            let da = j.dof_adr;
            let (moving, turning) = match j.kind {
                JointKind::Free => (da..da + 3, da + 3..da + 6),
                _ => (da..da, da..da + j.kind.nv()),
            };
            for d in moving {
                vb = add6(&vb, &scale6(&k.cdof[d], &v[d]));
            }
            for d in turning.clone() {
                cdof_dot[d] = cross_motion(&vb, &k.cdof[d]);
            }
            for d in turning {
                vb = add6(&vb, &scale6(&k.cdof[d], &v[d]));
            }
        }
        cvel[b] = vb;
    }
    (cvel, cdof_dot)
}

/// Bias forces c(q, v) `(nv)` (N or N m): Coriolis, centrifugal and, with `gravity`, gravity
/// (MuJoCo `qfrc_bias`; [`crate::dynamics::bias_forces`]). `cvel`, `cdof_dot` from
/// [`velocities`].
pub fn bias<B: Backend>(
    model: &Model,
    k: &Kin<B>,
    v: &[S<B>],
    cvel: &[Sv<B>],
    cdof_dot: &[Sv<B>],
    gravity: &Vec3,
) -> Vec<S<B>> {
    let nb = model.bodies.len();
    let mut cacc = vec![zero6(); nb];
    cacc[0] = sv(&[S::zero(), S::zero(), S::zero()], &v3c(&-gravity));
    let mut f = vec![zero6(); nb];
    for b in 1..nb {
        let mut ab = cacc[model.bodies[b].parent].clone();
        for &ji in &model.bodies[b].joints {
            let j = &model.joints[ji];
            for d in j.dof_adr..j.dof_adr + j.kind.nv() {
                ab = add6(&ab, &scale6(&cdof_dot[d], &v[d]));
            }
        }
        let iv = inertia_times(model, k, b, &cvel[b]);
        f[b] = add6(
            &inertia_times(model, k, b, &ab),
            &cross_force(&cvel[b], &iv),
        );
        cacc[b] = ab;
    }
    let mut tau = vec![S::zero(); model.nv];
    for b in (1..nb).rev() {
        for &ji in &model.bodies[b].joints {
            let j = &model.joints[ji];
            for d in j.dof_adr..j.dof_adr + j.kind.nv() {
                tau[d] = dot6(&k.cdof[d], &f[b]);
            }
        }
        let p = model.bodies[b].parent;
        f[p] = add6(&f[p], &f[b]);
    }
    tau
}

/// Generalized force `(nv)` of world-frame wrenches `(p × F, F)` about the origin applied to
/// bodies (`wrench[b]`, `(nbody)`): τ_d = cdof_d · Σ_{b in subtree(body(d))} wrench_b, i.e.
/// Jᵀ F of each force at its point.
pub fn wrench_forces<B: Backend>(model: &Model, k: &Kin<B>, mut wrench: Vec<Sv<B>>) -> Vec<S<B>> {
    let mut tau = vec![S::zero(); model.nv];
    for b in (1..model.bodies.len()).rev() {
        for &ji in &model.bodies[b].joints {
            let j = &model.joints[ji];
            for d in j.dof_adr..j.dof_adr + j.kind.nv() {
                tau[d] = dot6(&k.cdof[d], &wrench[b]);
            }
        }
        let p = model.bodies[b].parent;
        let wb = wrench[b].clone();
        wrench[p] = add6(&wrench[p], &wb);
    }
    tau
}

/// Velocity (m/s, world) of the point `p` (world) fixed to a body moving at `cvel`.
pub fn point_velocity<B: Backend>(cvel: &Sv<B>, p: &V3<B>) -> V3<B> {
    add3(&lin(cvel), &cross3(&ang(cvel), p))
}

/// Joint-space mass matrix `(nv × nv)` by the composite rigid body algorithm
/// ([`crate::dynamics::mass_matrix`]), armature on the diagonal; symmetric, both halves set.
pub fn mass_matrix<B: Backend>(model: &Model, k: &Kin<B>) -> Vec<Vec<S<B>>> {
    let nv = model.nv;
    let nb = model.bodies.len();
    let mut m = vec![vec![S::zero(); nv]; nv];
    for i in 0..nv {
        // Composite inertia of body(i)'s subtree times s_i.
        let root = model.dof_body[i];
        let mut f = zero6();
        for b in 1..nb {
            if model.is_ancestor(root, b) {
                f = add6(&f, &inertia_times(model, k, b, &k.cdof[i]));
            }
        }
        m[i][i] = dot6(&k.cdof[i], &f) + model.joints[model.dof_joint[i]].armature;
        let mut j = model.dof_parent[i];
        while let Some(jd) = j {
            let mij = dot6(&k.cdof[jd], &f);
            m[i][jd] = mij.clone();
            m[jd][i] = mij;
            j = model.dof_parent[jd];
        }
    }
    m
}

/// Solve `M x = r` per world by Cholesky (`M = L Lᵀ`, M symmetric positive definite). A matrix
/// that is not positive definite gives NaN (a square root of a negative number), which the
/// stepper reports as divergence.
pub fn cholesky_solve<B: Backend>(m: &[Vec<S<B>>], r: &[S<B>]) -> Vec<S<B>> {
    let n = r.len();
    let mut l = vec![vec![S::zero(); n]; n];
    for j in 0..n {
        let mut d = m[j][j].clone();
        for k in 0..j {
            d = d - &l[j][k] * &l[j][k];
        }
        let djj = d.sqrt();
        for i in j + 1..n {
            let mut s = m[i][j].clone();
            for k in 0..j {
                s = s - &l[i][k] * &l[j][k];
            }
            l[i][j] = s / &djj;
        }
        l[j][j] = djj;
    }
    let mut y = vec![S::zero(); n];
    for i in 0..n {
        let mut s = r[i].clone();
        for k in 0..i {
            s = s - &l[i][k] * &y[k];
        }
        y[i] = s / &l[i][i];
    }
    let mut x = vec![S::zero(); n];
    for i in (0..n).rev() {
        let mut s = y[i].clone();
        for k in i + 1..n {
            s = s - &l[k][i] * &x[k];
        }
        x[i] = s / &l[i][i];
    }
    x
}

/// Rotate the quaternion at `q[adr..adr + 4]` by the body-frame angular velocity `w` (rad/s)
/// over `h` s: normalized (as [`super::kinematics::quat_at`]), then ⊗ (cos(θ/2), ŵ sin(θ/2)),
/// θ = h‖w‖ ([`crate::dynamics::integrate_quat`]), written as (cos(θ/2), w (h/2) sinc(θ/2)) so
/// that the derivative at w = 0 (a body at rest) is the true h/2 (a series below θ/2 = 1e-4).
pub fn integrate_quat<B: Backend>(q: &mut [S<B>], adr: usize, w: &V3<B>, h: f64) {
    let cur = super::kinematics::quat_at(q, adr);
    let n2 = dot3(w, w);
    let moving = n2.gt(&S::C(0.0));
    let wn = moving.select(&n2, &S::C(1.0)).sqrt();
    let half = &wn * (0.5 * h);
    let small = half.lt(&S::C(1e-4));
    let series = S::C(1.0) - &(&half * &half) / 6.0;
    let safe = small.select(&S::C(1.0), &half);
    let sinc = small.select(&series, &(half.sin() / &safe));
    let c = moving.select(&half.cos(), &S::C(1.0));
    let k = moving.select(&sinc, &S::C(1.0)) * (0.5 * h);
    let r = [c, &w[0] * &k, &w[1] * &k, &w[2] * &k];
    let out = super::spatial::qmul(&cur, &r);
    q[adr..adr + 4].clone_from_slice(&out);
}

/// Advance positions `q` `(nq)` by velocities `v` `(nv)` over `h` s (MuJoCo
/// `mj_integratePos`; [`crate::dynamics::integrate_positions`]).
pub fn integrate_positions<B: Backend>(model: &Model, q: &mut [S<B>], v: &[S<B>], h: f64) {
    for j in &model.joints {
        let (qa, da) = (j.qpos_adr, j.dof_adr);
        match j.kind {
            JointKind::Hinge | JointKind::Slide => q[qa] = &q[qa] + &(&v[da] * h),
            JointKind::Free => {
                for i in 0..3 {
                    q[qa + i] = &q[qa + i] + &(&v[da + i] * h);
                }
                let w = [v[da + 3].clone(), v[da + 4].clone(), v[da + 5].clone()];
                integrate_quat(q, qa + 3, &w, h);
            }
            JointKind::Ball => unreachable!("engine::batched_support refuses ball joints"),
        }
    }
}
