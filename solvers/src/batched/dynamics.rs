//! Batched equations of motion, the formulas of [`crate::dynamics`] per world: body velocities
//! and the motion subspaces' derivatives (`mj_comVel`), bias forces by recursive Newton–Euler
//! with the base accelerating at −g (`mj_rne`), the mass matrix by the composite rigid body
//! algorithm (`mj_crb`, armature on the diagonal), its Cholesky solve, and position
//! integration (`mj_integratePos`). Spatial conventions as [`crate::kinematics`].
//!
//! Each sum is taken in the order nalgebra evaluates the cpu engine's expression (spatial
//! inertias as 6 × 6 matrices, `gemv` row sums left to right, `Vector6::dot`, nalgebra's
//! Cholesky), so that f64 results agree with the cpu engine to the last bit: on a tumbling cube
//! (`cube_toss`) any last-bit difference is amplified by the impacts to millimetres.

use burn_tensor::backend::Backend;

use super::kinematics::Kin;
use super::scalar::{M, S};
use super::spatial::{
    add3, add6, ang, cross3, cross_force, cross_motion, dot3, dot6, lin, mat6_vec, scale6, sv, v3c,
    zero6, Sv, M3, M6, Q4, V3,
};
use crate::model::{JointKind, Model, Vec3};

/// Spatial inertia `(6 × 6)` of body `b` about the world origin (kg, kg m, kg m²): the cpu
/// engine's [`crate::dynamics::spatial_inertia`] with nalgebra's order of operations,
/// `[[R diag(I) Rᵀ + (m [c]×) [c]×ᵀ, m [c]×], [m [c]×ᵀ, m 1]]` with R the principal axes and c
/// the centre of mass (world), each matrix product's terms summed left to right.
pub fn spatial_inertia<B: Backend>(model: &Model, k: &Kin<B>, b: usize) -> M6<B> {
    let body = &model.bodies[b];
    let m = body.mass;
    let r = &k.ximat[b];
    let diag = [body.inertia.x, body.inertia.y, body.inertia.z];
    let rd: M3<B> = std::array::from_fn(|i| std::array::from_fn(|j| &r[i][j] * diag[j]));
    let times_t = |a: &M3<B>, c: &M3<B>| -> M3<B> {
        std::array::from_fn(|i| {
            std::array::from_fn(|j| (0..3).fold(S::zero(), |acc, l| acc + &a[i][l] * &c[j][l]))
        })
    };
    let ic = times_t(&rd, r);
    let p = &k.xipos[b];
    let cx: M3<B> = [
        [S::zero(), -&p[2], p[1].clone()],
        [p[2].clone(), S::zero(), -&p[0]],
        [-&p[1], p[0].clone(), S::zero()],
    ];
    let mcx: M3<B> = std::array::from_fn(|i| std::array::from_fn(|j| &cx[i][j] * m));
    let mcc = times_t(&mcx, &cx);
    std::array::from_fn(|i| {
        std::array::from_fn(|j| match (i < 3, j < 3) {
            (true, true) => &ic[i][j] + &mcc[i][j],
            (true, false) => mcx[i][j - 3].clone(),
            (false, true) => mcx[j][i - 3].clone(),
            (false, false) => S::C(if i == j { m } else { 0.0 }),
        })
    })
}

/// [`spatial_inertia`] of every body `(nbody)`, the world's included (constant).
pub fn spatial_inertias<B: Backend>(model: &Model, k: &Kin<B>) -> Vec<M6<B>> {
    (0..model.bodies.len())
        .map(|b| spatial_inertia(model, k, b))
        .collect()
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
/// (MuJoCo `qfrc_bias`; [`crate::dynamics::bias_forces`]). `inertia` from
/// [`spatial_inertias`], `cvel`, `cdof_dot` from [`velocities`].
pub fn bias<B: Backend>(
    model: &Model,
    k: &Kin<B>,
    inertia: &[M6<B>],
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
        let iv = mat6_vec(&inertia[b], &cvel[b]);
        f[b] = add6(&mat6_vec(&inertia[b], &ab), &cross_force(&cvel[b], &iv));
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

/// The smooth part of a step at `(q, v)` with controls `u`: placements, spatial inertias and
/// `passive + actuation − bias` `(nv)` (MuJoCo's `qfrc_smooth` less constraint forces; gravity
/// left out of the bias when the model disables it), as the cpu engine's `smooth_forces`.
pub fn smooth<B: Backend>(
    model: &Model,
    q: &[S<B>],
    v: &[S<B>],
    u: &[S<B>],
) -> (super::kinematics::Kin<B>, Vec<M6<B>>, Vec<S<B>>) {
    let k = super::kinematics::forward(model, q);
    let (cvel, cdof_dot) = velocities(model, &k, v);
    let gravity = if model.options.disable.gravity {
        Vec3::zeros()
    } else {
        model.options.gravity
    };
    let inertia = spatial_inertias(model, &k);
    let c = bias(model, &k, &inertia, v, &cvel, &cdof_dot, &gravity);
    let pa = super::penalty::passive_and_actuation(model, q, v, u);
    let f = pa.iter().zip(&c).map(|(p, c)| p - c).collect();
    (k, inertia, f)
}

/// Velocity (m/s, world) of the point `p` (world) fixed to a body moving at `cvel`.
pub fn point_velocity<B: Backend>(cvel: &Sv<B>, p: &V3<B>) -> V3<B> {
    add3(&lin(cvel), &cross3(&ang(cvel), p))
}

/// Joint-space mass matrix `(nv × nv)` by the composite rigid body algorithm
/// ([`crate::dynamics::mass_matrix`], its order of operations): composite inertias summed from
/// the leaves, `M_ij = s_jᵀ (I^c s_i)`, armature on the diagonal; symmetric, both halves set.
/// `inertia` from [`spatial_inertias`].
pub fn mass_matrix<B: Backend>(model: &Model, k: &Kin<B>, inertia: &[M6<B>]) -> Vec<Vec<S<B>>> {
    let nv = model.nv;
    let mut ic = inertia.to_vec();
    for b in (1..model.bodies.len()).rev() {
        let p = model.bodies[b].parent;
        if p != 0 {
            let sum: M6<B> =
                std::array::from_fn(|i| std::array::from_fn(|j| &ic[p][i][j] + &ic[b][i][j]));
            ic[p] = sum;
        }
    }
    let mut m = vec![vec![S::zero(); nv]; nv];
    for i in 0..nv {
        let f = mat6_vec(&ic[model.dof_body[i]], &k.cdof[i]);
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

/// `Σ a_k b_k` in nalgebra's order for a dynamically sized vector (`Matrix::dot`): eight
/// running sums over blocks of eight, combined `(s0 + s4) + (s1 + s5) + …`, then the remaining
/// products one by one.
pub fn dot_dynamic<B: Backend>(a: &[&S<B>], b: &[&S<B>]) -> S<B> {
    let n = a.len();
    let mut acc: [S<B>; 8] = std::array::from_fn(|_| S::zero());
    let mut i = 0;
    while n - i >= 8 {
        for (t, s) in acc.iter_mut().enumerate() {
            *s = &*s + &(a[i + t] * b[i + t]);
        }
        i += 8;
    }
    let mut res = S::zero();
    for t in 0..4 {
        res = res + (&acc[t] + &acc[t + 4]);
    }
    for k in i..n {
        res = res + a[k] * b[k];
    }
    res
}

/// Solve `M x = r` per world by Cholesky (`M = L Lᵀ`, M symmetric positive definite), in
/// nalgebra's order of operations (`Cholesky::new`, `solve`: the back substitution subtracts a
/// whole dot product, [`dot_dynamic`]). A matrix that is not positive definite gives NaN (a
/// square root of a negative number), which the stepper reports as divergence.
pub fn cholesky_solve<B: Backend>(m: &[Vec<S<B>>], r: &[S<B>]) -> Vec<S<B>> {
    cholesky_apply(&cholesky_factor(m), r)
}

/// The Cholesky factor L (lower triangle, `n × n`; the upper triangle is zero) of a symmetric
/// positive definite `m`, reading its lower triangle, in nalgebra's order (`Cholesky::new`).
pub fn cholesky_factor<B: Backend>(m: &[Vec<S<B>>]) -> Vec<Vec<S<B>>> {
    cholesky_factor_checked(m).0
}

/// [`cholesky_factor`] with, per world, whether every pivot was positive (nalgebra's
/// `cholesky()` returns `None` otherwise); where it was not, L holds NaN.
pub fn cholesky_factor_checked<B: Backend>(m: &[Vec<S<B>>]) -> (Vec<Vec<S<B>>>, M<B>) {
    let n = m.len();
    let mut l = vec![vec![S::zero(); n]; n];
    let mut ok = M::C(true);
    for j in 0..n {
        let mut d = m[j][j].clone();
        for k in 0..j {
            d = d - &l[j][k] * &l[j][k];
        }
        ok = ok.and(&d.gt(&S::C(0.0)));
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
    (l, ok)
}

/// Solve `L Lᵀ x = r` with the factor from [`cholesky_factor`] (nalgebra's `Cholesky::solve`).
pub fn cholesky_apply<B: Backend>(l: &[Vec<S<B>>], r: &[S<B>]) -> Vec<S<B>> {
    let n = r.len();
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
        let col: Vec<&S<B>> = (i + 1..n).map(|k| &l[k][i]).collect();
        let xs: Vec<&S<B>> = x[i + 1..].iter().collect();
        let dot = dot_dynamic(&col, &xs);
        x[i] = (&y[i] - &dot) / &l[i][i];
    }
    x
}

/// Rotate the quaternion at `q[adr..adr + 4]` by the body-frame angular velocity `w` (rad/s)
/// over `h` s as [`crate::dynamics::integrate_quat`], in its order of operations: divided by
/// its norm unless |‖q‖ − 1| ≤ 1e-15, then ⊗ (cos(θ/2), ŵ sin(θ/2)) with θ/2 = (h/2)‖w‖ and
/// ŵ = w/‖w‖ (x when ‖w‖ < 1e-15). Where w = 0 exactly the cpu engine keeps the quaternion;
/// here ⊗ (1, w h/2) gives that value and the true derivative h/2 (reverse mode at rest).
pub fn integrate_quat<B: Backend>(q: &mut [S<B>], adr: usize, w: &V3<B>, h: f64) {
    let raw: Q4<B> = std::array::from_fn(|i| q[adr + i].clone());
    let norm = super::kinematics::quat_norm(&raw);
    let off = (&norm - 1.0).abs().gt(&S::C(1e-15));
    let cur: Q4<B> = std::array::from_fn(|i| off.select(&(&raw[i] / &norm), &raw[i]));
    let n2 = dot3(w, w);
    let moving = n2.gt(&S::C(0.0));
    let wn = moving.select(&n2, &S::C(1.0)).sqrt();
    let tiny = wn.lt(&S::C(1e-15));
    let half = &wn * (0.5 * h);
    let (s, c) = (half.sin(), half.cos());
    let r: Q4<B> = std::array::from_fn(|i| {
        if i == 0 {
            return moving.select(&c, &S::C(1.0));
        }
        let axis = tiny.select(&S::C(if i == 1 { 1.0 } else { 0.0 }), &(&w[i - 1] / &wn));
        moving.select(&(&axis * &s), &(&w[i - 1] * (0.5 * h)))
    });
    let out = super::spatial::qmul(&cur, &r);
    q[adr..adr + 4].clone_from_slice(&out);
}

/// Advance positions `q` `(nq)` by velocities `v` `(nv)` over `h` s (MuJoCo
/// `mj_integratePos`; [`crate::dynamics::integrate_positions`]).
pub fn integrate_positions<B: Backend>(model: &Model, q: &mut [S<B>], v: &[S<B>], h: f64) {
    integrate_with(model, q, v, h, integrate_quat);
}

/// [`integrate_positions`] with [`integrate_quat_smooth`] for free joints' rotations: the same
/// values to rounding, a derivative in ω that is right everywhere (for reverse sweeps that use
/// only this map's derivatives, [`crate::batched::ncp::adjoint`]).
pub fn integrate_positions_smooth<B: Backend>(model: &Model, q: &mut [S<B>], v: &[S<B>], h: f64) {
    integrate_with(model, q, v, h, integrate_quat_smooth);
}

/// The joint loop of [`integrate_positions`], a free joint's rotation by `quat`.
fn integrate_with<B: Backend>(
    model: &Model,
    q: &mut [S<B>],
    v: &[S<B>],
    h: f64,
    quat: fn(&mut [S<B>], usize, &V3<B>, f64),
) {
    for j in &model.joints {
        let (qa, da) = (j.qpos_adr, j.dof_adr);
        match j.kind {
            JointKind::Hinge | JointKind::Slide => q[qa] = &q[qa] + &(&v[da] * h),
            JointKind::Free => {
                for i in 0..3 {
                    q[qa + i] = &q[qa + i] + &(&v[da + i] * h);
                }
                let w = [v[da + 3].clone(), v[da + 4].clone(), v[da + 5].clone()];
                quat(q, qa + 3, &w, h);
            }
            JointKind::Ball => unreachable!("engine::batched_support refuses ball joints"),
        }
    }
}

/// The quaternion at `q[adr..adr + 4]` times `(cos(|ω| h/2), ω sin(|ω| h/2)/|ω|)` (the exact
/// rotation by the body-frame ω over h, as [`integrate_quat`] without its normalization), by
/// the Taylor series of cos x and sin x / x (to x⁴) where `x = |ω| h/2 < 1e-4`, so that the
/// map is smooth in ω everywhere. [`integrate_quat`] takes a fixed axis below |ω| = 1e-15, to
/// the cpu engine's last bit; its value there is right and its derivative in ω is not (a box at
/// rest whose contact solve leaves |ω| ~ 1e-17 passes a wrong one). The two agree to rounding.
/// The caller normalizes the quaternion if it needs to.
pub fn integrate_quat_smooth<B: Backend>(q: &mut [S<B>], adr: usize, w: &V3<B>, h: f64) {
    // x² = (|ω| h/2)², smooth in ω.
    let x2 = &dot3(w, w) * (h * h / 4.0);
    let small = x2.lt(&S::C(1e-8));
    let x = small.select(&S::C(1.0), &x2).sqrt();
    let (c_big, s_big) = (x.cos(), &(x.sin() / &x) * (h / 2.0));
    let c_small = &(S::C(1.0) - &(&x2 / 2.0)) + &(&(&x2 * &x2) / 24.0);
    let s_small = &(&(S::C(1.0) - &(&x2 / 6.0)) + &(&(&x2 * &x2) / 120.0)) * (h / 2.0);
    let c = small.select(&c_small, &c_big);
    let s = small.select(&s_small, &s_big);
    let r: Q4<B> = [c, &w[0] * &s, &w[1] * &s, &w[2] * &s];
    let cur: Q4<B> = std::array::from_fn(|i| q[adr + i].clone());
    let out = super::spatial::qmul(&cur, &r);
    q[adr..adr + 4].clone_from_slice(&out);
}
