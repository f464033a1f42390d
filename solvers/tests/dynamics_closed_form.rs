//! Closed-form and independent checks of the equations of motion (kinematics.rs, dynamics.rs).
//!
//! Run with `cargo test -p contactlab-solvers --test dynamics_closed_form -- --nocapture` to see
//! the measured errors.

mod common;

use common::*;
use contactlab_solvers::dynamics::{
    bias_forces, differentiate_positions, forward_dynamics, integrate_positions, inverse_dynamics,
    kinetic_energy, mass_matrix, momentum, potential_energy, rk4_step,
};
use contactlab_solvers::kinematics::{forward_kinematics, point_jacobian};
use contactlab_solvers::model::{Body, Joint, JointKind, Model, ModelParts, Vec3};
use nalgebra::{DMatrix, DVector, Matrix3};

/// A single free body with COM at its origin, distinct principal inertias in a rotated frame.
fn free_body(gravity: Vec3) -> Model {
    let mut parts = ModelParts {
        name: "free".into(),
        ..Default::default()
    };
    parts.options.gravity = gravity;
    let mut b = Body::new(
        "box",
        0,
        Vec3::new(0.1, -0.2, 1.0),
        2.0,
        Vec3::new(0.1, 0.2, 0.25),
    );
    b.quat = quat([0.3, -0.4, 1.0], 0.7);
    b.inertia_frame = quat([1.0, 2.0, -1.0], 0.5);
    parts.bodies.push(b);
    parts.joints.push(Joint::new("free", JointKind::Free, 1));
    Model::new(parts).unwrap()
}

/// Semi-implicit Euler without constraints: v += h M⁻¹(−c); q = integrate(q, v_new, h).
fn semi_implicit_step(model: &Model, q: &mut DVector<f64>, v: &mut DVector<f64>, h: f64) {
    let a = forward_dynamics(model, q, v, &DVector::zeros(model.nv));
    *v += a * h;
    integrate_positions(model, q, v, h);
}

#[test]
fn free_fall_matches_discrete_closed_form() {
    let g = 9.81;
    let model = free_body(Vec3::new(0.0, 0.0, -g));
    let mut q = model.qpos0.clone();
    // Horizontal drift and a tumbling spin: neither may leak into the vertical motion.
    let mut v = DVector::from_vec(vec![0.3, -0.4, 2.0, 1.0, 2.0, 0.5]);
    let (x0, v0) = (
        q.fixed_rows::<3>(0).into_owned(),
        v.fixed_rows::<3>(0).into_owned(),
    );
    let (h, n) = (1e-3, 1000usize);
    for _ in 0..n {
        semi_implicit_step(&model, &mut q, &mut v, h);
    }
    let t = h * n as f64;
    let nf = n as f64;
    // Semi-implicit Euler: v_k = v0 − g h k, z_N = z0 + h Σ_{k=1..N} v_k = z0 + v0 t − g h² N(N+1)/2.
    let expect = Vec3::new(
        x0.x + v0.x * t,
        x0.y + v0.y * t,
        x0.z + v0.z * t - g * h * h * nf * (nf + 1.0) / 2.0,
    );
    let err_pos = (q.fixed_rows::<3>(0) - expect).amax();
    let err_vel = (v.fixed_rows::<3>(0) - Vec3::new(v0.x, v0.y, v0.z - g * t)).amax();
    let continuous = (x0.z + v0.z * t - 0.5 * g * t * t - q[2]).abs();
    println!("free fall 1 s, h = 1 ms: |pos − discrete closed form| = {err_pos:.3e} m, |vel − closed form| = {err_vel:.3e} m/s (vs continuous parabola: {continuous:.3e} m, the O(h) method error)");
    assert!(err_pos < 1e-9 && err_vel < 1e-9);
    let qn = (q[3] * q[3] + q[4] * q[4] + q[5] * q[5] + q[6] * q[6]).sqrt();
    assert!((qn - 1.0).abs() < 1e-12, "quaternion norm {qn}");
}

fn energy_and_world_momentum(model: &Model, q: &DVector<f64>, v: &DVector<f64>) -> (f64, Vec3) {
    let kin = forward_kinematics(model, q);
    let e = kinetic_energy(&mass_matrix(model, &kin), v) + potential_energy(model, &kin, q);
    (e, momentum(model, &kin, v).1)
}

#[test]
fn spinning_free_body_conserves_energy_and_angular_momentum() {
    let model = free_body(Vec3::zeros());
    let q0 = model.qpos0.clone();
    // Spin with components on all three principal axes (including the unstable middle axis),
    // plus a drift, so L about the world origin has an orbital part too.
    let v0 = DVector::from_vec(vec![0.1, 0.2, -0.1, 1.0, 2.0, 3.0]);
    let (h, n) = (1e-3, 2000usize);
    let (e0, l0) = energy_and_world_momentum(&model, &q0, &v0);
    let run = |step: &dyn Fn(&mut DVector<f64>, &mut DVector<f64>)| {
        let (mut q, mut v) = (q0.clone(), v0.clone());
        let (mut de, mut dl) = (0.0f64, 0.0f64);
        for _ in 0..n {
            step(&mut q, &mut v);
            let (e, l) = energy_and_world_momentum(&model, &q, &v);
            de = de.max((e - e0).abs() / e0.abs());
            dl = dl.max((l - l0).norm() / l0.norm());
        }
        (de, dl)
    };
    let (de_euler, dl_euler) = run(&|q, v| semi_implicit_step(&model, q, v, h));
    let (de_rk4, dl_rk4) = run(&|q, v| rk4_step(&model, q, v, &DVector::zeros(6), h));
    println!("spinning free body, 2 s at h = 1 ms, max relative drift:");
    println!("  semi-implicit Euler: energy {de_euler:.3e}, world angular momentum {dl_euler:.3e}");
    println!("  rk4_step (RKMK4):    energy {de_rk4:.3e}, world angular momentum {dl_rk4:.3e}");
    // Semi-implicit Euler cannot meet 1e-6 (explicit gyroscopic term); the test uses the
    // fourth-order Munthe-Kaas integrator dynamics::rk4_step for smooth, contact-free motion.
    assert!(de_rk4 < 1e-6 && dl_rk4 < 1e-6);
}

/// Body Jacobian at the COM (6 × nv: linear, then angular) and world rotational inertia.
fn com_jacobian_and_inertia(
    model: &Model,
    q: &DVector<f64>,
    b: usize,
) -> (DMatrix<f64>, Matrix3<f64>) {
    let kin = forward_kinematics(model, q);
    let (jl, ja) = point_jacobian(model, &kin, b, &kin.xipos[b]);
    let mut j = DMatrix::zeros(6, model.nv);
    j.rows_mut(0, 3).copy_from(&jl);
    j.rows_mut(3, 3).copy_from(&ja);
    let r = kin.ximat[b];
    (
        j,
        r * Matrix3::from_diagonal(&model.bodies[b].inertia) * r.transpose(),
    )
}

#[test]
fn mass_matrix_equals_sum_of_body_jacobian_products() {
    for free_base in [false, true] {
        let model = chain(free_base);
        let mut r = rng(3);
        let mut worst = 0.0f64;
        for _ in 0..20 {
            let q = random_q(&model, &mut r);
            let mut m_ind = DMatrix::zeros(model.nv, model.nv);
            for b in 1..model.bodies.len() {
                let (j, i_world) = com_jacobian_and_inertia(&model, &q, b);
                let mut mb = DMatrix::zeros(6, 6);
                mb.view_mut((0, 0), (3, 3))
                    .copy_from(&(Matrix3::identity() * model.bodies[b].mass));
                mb.view_mut((3, 3), (3, 3)).copy_from(&i_world);
                m_ind += j.transpose() * mb * j;
            }
            for d in 0..model.nv {
                m_ind[(d, d)] += model.joints[model.dof_joint[d]].armature;
            }
            let m = mass_matrix(&model, &forward_kinematics(&model, &q));
            worst = worst.max((m - m_ind).amax());
        }
        println!(
            "mass matrix vs Σ JᵀMJ (free_base = {free_base}, 20 configs): max |ΔM| = {worst:.3e}"
        );
        assert!(worst < 1e-10);
    }
}

/// `dexp_{−ε}(y)` for a rotation vector ε: the body angular velocity of `q0 ⊗ exp(ε(t))` is
/// `dexp_{−ε}(ε̇)` (closed form; checked against differentiate_positions below).
fn dexp_neg(eps: &Vec3, y: &Vec3) -> Vec3 {
    let th = eps.norm();
    let (c1, c2) = if th < 1e-3 {
        (0.5 - th * th / 24.0, 1.0 / 6.0 - th * th / 120.0)
    } else {
        (
            (1.0 - th.cos()) / (th * th),
            (th - th.sin()) / (th * th * th),
        )
    };
    y - c1 * eps.cross(y) + c2 * eps.cross(&eps.cross(y))
}

/// The velocity v (qvel) when moving through the chart q(ε) = integrate_positions(q0, ε, 1)
/// with rate ε̇: v = A(ε) ε̇, A = dexp_{−ε} on rotational blocks, identity elsewhere.
fn chart_velocity(model: &Model, eps: &DVector<f64>, epsdot: &DVector<f64>) -> DVector<f64> {
    let mut v = epsdot.clone();
    for j in &model.joints {
        let d = match j.kind {
            JointKind::Ball => j.dof_adr,
            JointKind::Free => j.dof_adr + 3,
            _ => continue,
        };
        let e = Vec3::new(eps[d], eps[d + 1], eps[d + 2]);
        let y = Vec3::new(epsdot[d], epsdot[d + 1], epsdot[d + 2]);
        v.fixed_rows_mut::<3>(d).copy_from(&dexp_neg(&e, &y));
    }
    v
}

fn chart_matrix(model: &Model, eps: &DVector<f64>) -> DMatrix<f64> {
    let mut a = DMatrix::zeros(model.nv, model.nv);
    for k in 0..model.nv {
        let mut e = DVector::zeros(model.nv);
        e[k] = 1.0;
        a.set_column(k, &chart_velocity(model, eps, &e));
    }
    a
}

/// Lagrangian L(ε, ε̇) = ½ vᵀ M(q(ε)) v − V(q(ε)) and momentum ∂L/∂ε̇ = Aᵀ M A ε̇.
fn lagrangian(
    model: &Model,
    q0: &DVector<f64>,
    eps: &DVector<f64>,
    epsdot: &DVector<f64>,
) -> (f64, DVector<f64>) {
    let q = advance(model, q0, eps, 1.0);
    let kin = forward_kinematics(model, &q);
    let m = mass_matrix(model, &kin);
    let a = chart_matrix(model, eps);
    let v = &a * epsdot;
    (
        kinetic_energy(&m, &v) - potential_energy(model, &kin, &q),
        a.transpose() * (&m * &v),
    )
}

/// τ from the Euler–Lagrange equations in the chart around q0 (where A(0) = I, so τ_ε = τ),
/// along ε(t) = v0 t + a t²/2 (then v(0) = v0 and v̇(0) = a), by central differences.
fn lagrange_tau(
    model: &Model,
    q0: &DVector<f64>,
    v0: &DVector<f64>,
    acc: &DVector<f64>,
    d: f64,
) -> DVector<f64> {
    let traj = |t: f64| (v0 * t + acc * (0.5 * t * t), v0 + acc * t);
    let (ep, edp) = traj(d);
    let (em, edm) = traj(-d);
    let dpdt =
        (lagrangian(model, q0, &ep, &edp).1 - lagrangian(model, q0, &em, &edm).1) / (2.0 * d);
    let mut grad = DVector::zeros(model.nv);
    for k in 0..model.nv {
        let mut e = DVector::zeros(model.nv);
        e[k] = d;
        grad[k] =
            (lagrangian(model, q0, &e, v0).0 - lagrangian(model, q0, &(-&e), v0).0) / (2.0 * d);
    }
    dpdt - grad
}

#[test]
fn chart_velocity_matches_differentiate_positions() {
    let model = chain(true);
    let mut r = rng(11);
    let mut worst = 0.0f64;
    for _ in 0..5 {
        let q0 = random_q(&model, &mut r);
        let eps = random_v(&model, &mut r, 0.8);
        let epsdot = random_v(&model, &mut r, 1.0);
        let s = 1e-6;
        let q1 = advance(&model, &q0, &(&eps - &epsdot * s), 1.0);
        let q2 = advance(&model, &q0, &(&eps + &epsdot * s), 1.0);
        // differentiate_positions gives the body-frame velocity at q1; the midpoint velocity
        // differs by O(s) on rotations, hence the loose tolerance of this sanity check.
        let fd = differentiate_positions(&model, &q1, &q2, 2.0 * s);
        worst = worst.max((fd - chart_velocity(&model, &eps, &epsdot)).amax());
    }
    println!("chart velocity A(ε)ε̇ vs differentiate_positions: max error {worst:.3e}");
    assert!(worst < 1e-6);
}

#[test]
fn bias_and_inverse_dynamics_match_lagrangian_finite_differences() {
    for free_base in [false, true] {
        let model = chain(free_base);
        let mut r = rng(5);
        let (mut worst_bias, mut worst_id, mut scale) = (0.0f64, 0.0f64, 0.0f64);
        for _ in 0..10 {
            let q0 = random_q(&model, &mut r);
            let v0 = random_v(&model, &mut r, 2.0);
            let acc = random_v(&model, &mut r, 3.0);
            let kin = forward_kinematics(&model, &q0);
            let c = bias_forces(&model, &kin, &v0);
            let c_fd = lagrange_tau(&model, &q0, &v0, &DVector::zeros(model.nv), 1e-5);
            worst_bias = worst_bias.max((&c - c_fd).amax());
            scale = scale.max(c.amax());
            let tau = inverse_dynamics(&model, &kin, &v0, &acc);
            let tau_fd = lagrange_tau(&model, &q0, &v0, &acc, 1e-5);
            worst_id = worst_id.max((tau - tau_fd).amax());
        }
        println!(
            "RNEA vs Lagrangian finite differences (free_base = {free_base}, 10 states, |c| up to {scale:.2}): bias {worst_bias:.3e}, inverse dynamics {worst_id:.3e}"
        );
        assert!(worst_bias < 1e-6 && worst_id < 1e-6);
    }
}

#[test]
fn pendulum_semi_implicit_euler_energy_drift() {
    let (g, len, m) = (9.81, 1.0, 1.0);
    let mut parts = ModelParts {
        name: "pendulum".into(),
        ..Default::default()
    };
    let mut b = Body::new(
        "bob",
        0,
        Vec3::new(0.0, 0.0, 2.0),
        m,
        Vec3::new(1e-3, 1e-3, 1e-3),
    );
    b.com = Vec3::new(0.0, 0.0, -len);
    parts.bodies.push(b);
    let mut j = Joint::new("hinge", JointKind::Hinge, 1);
    j.axis = Vec3::y();
    parts.joints.push(j);
    let model = Model::new(parts).unwrap();
    let energy = |q: &DVector<f64>, v: &DVector<f64>| {
        let kin = forward_kinematics(&model, q);
        kinetic_energy(&mass_matrix(&model, &kin), v) + potential_energy(&model, &kin, q)
    };
    let theta0: f64 = 1.0;
    let mut q = DVector::from_vec(vec![theta0]);
    let mut v = DVector::zeros(1);
    let e0 = energy(&q, &v);
    // Relative to the swing energy m g L (1 − cos θ0): the energy datum is arbitrary.
    let swing = m * g * len * (1.0 - theta0.cos());
    let (h, n) = (1e-3, 10_000usize);
    let mut es = Vec::with_capacity(n);
    for _ in 0..n {
        let a = forward_dynamics(&model, &q, &v, &DVector::zeros(1));
        v += a * h; // v += h a
        q += &v * h; // q += h v_new
        es.push(energy(&q, &v));
    }
    let max_dev = max_abs(es.iter().map(|e| (e - e0) / swing));
    // Secular drift: mean energy over the first and the last second (several periods).
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    let drift = ((mean(&es[n - 1000..]) - mean(&es[..1000])) / swing).abs();
    println!("pendulum 10 s, h = 1 ms, semi-implicit Euler: max |E − E0|/swing = {max_dev:.3e}, drift of 1-s means = {drift:.3e}");
    // Semi-implicit (symplectic) Euler conserves a modified energy H + O(h): E itself
    // oscillates with relative amplitude ≈ hω/2 (ω = √(g/L) = 3.13 rad/s → 1.57e-3) but does
    // not drift. The drift (change of the 1-s mean) is what must stay below 1e-3.
    let omega = (g / len).sqrt();
    assert!(drift < 1e-3, "energy drift {drift}");
    assert!(
        max_dev < 0.5 * h * omega * 1.05,
        "energy oscillation {max_dev} above hω/2"
    );
}

#[test]
fn point_jacobian_matches_finite_difference_of_positions() {
    for free_base in [false, true] {
        let model = chain(free_base);
        let mut r = rng(7);
        let (mut worst_lin, mut worst_ang) = (0.0f64, 0.0f64);
        for _ in 0..10 {
            let q = random_q(&model, &mut r);
            let v = random_v(&model, &mut r, 2.0);
            let kin = forward_kinematics(&model, &q);
            let d = 1e-6;
            let (kp, km) = (
                forward_kinematics(&model, &advance(&model, &q, &v, d)),
                forward_kinematics(&model, &advance(&model, &q, &v, -d)),
            );
            for b in 1..model.bodies.len() {
                // A point fixed to body b, given in its frame.
                let local = Vec3::new(0.1, -0.2, 0.15);
                let p = kin.xpos[b] + kin.xquat[b] * local;
                let (jl, ja) = point_jacobian(&model, &kin, b, &p);
                let at =
                    |k: &contactlab_solvers::kinematics::Kinematics| k.xpos[b] + k.xquat[b] * local;
                let v_fd = (at(&kp) - at(&km)) / (2.0 * d);
                worst_lin = worst_lin.max((jl * &v - v_fd).amax());
                let w_fd = (kp.xquat[b] * km.xquat[b].inverse()).scaled_axis() / (2.0 * d);
                worst_ang = worst_ang.max((ja * &v - w_fd).amax());
            }
        }
        println!("point Jacobian vs finite differences (free_base = {free_base}): linear {worst_lin:.3e} m/s, angular {worst_ang:.3e} rad/s");
        assert!(worst_lin < 1e-8 && worst_ang < 1e-8);
    }
}

#[test]
fn differentiate_positions_inverts_integrate_positions() {
    let model = chain(true);
    let mut r = rng(13);
    let mut worst = 0.0f64;
    for _ in 0..10 {
        let q = random_q(&model, &mut r);
        let v = random_v(&model, &mut r, 2.0);
        let h = 0.37;
        let v2 = differentiate_positions(&model, &q, &advance(&model, &q, &v, h), h);
        worst = worst.max((v2 - v).amax());
    }
    println!("differentiate(integrate(q, v, h)) − v: {worst:.3e}");
    assert!(worst < 1e-12);
}

#[test]
fn rk4_step_is_fourth_order_on_a_floating_chain() {
    // One-second rollouts of the free-base chain under gravity at h, h/2 against a reference at
    // h/16: the error ratio of a fourth-order method is ≈ 16.
    let model = chain(true);
    let mut r = rng(17);
    let q0 = random_q(&model, &mut r);
    let v0 = random_v(&model, &mut r, 1.0);
    let tau = DVector::zeros(model.nv);
    let roll = |h: f64, n: usize| {
        let (mut q, mut v) = (q0.clone(), v0.clone());
        for _ in 0..n {
            rk4_step(&model, &mut q, &mut v, &tau, h);
        }
        (q, v)
    };
    let (qr, vr) = roll(0.2 / 256.0, 256);
    let err = |h: f64, n: usize| {
        let (q, v) = roll(h, n);
        differentiate_positions(&model, &qr, &q, 1.0)
            .amax()
            .max((v - &vr).amax())
    };
    let (e1, e2) = (err(0.2 / 16.0, 16), err(0.2 / 32.0, 32));
    println!("rk4_step order check, 0.2 s: error at h = 12.5 ms {e1:.3e}, at 6.25 ms {e2:.3e}, ratio {:.2}", e1 / e2);
    assert!(e1 / e2 > 12.0 && e1 / e2 < 20.0);
}
