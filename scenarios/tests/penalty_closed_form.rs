//! The penalty formulation against the closed forms of the closed-form scenes
//! (issue "Physics core", Done when: penalty with normalized friction at h = 0.5 ms).

use contactlab_scenarios::build;
use contactlab_solvers::collision::detect;
use contactlab_solvers::formulation::{self, Formulation};
use contactlab_solvers::kinematics::forward_kinematics;
use contactlab_solvers::{Model, State};
use serde_json::json;

const G: f64 = 9.81;
const H: f64 = 5e-4;

fn penalty_normalized() -> Box<dyn Formulation> {
    formulation::build("penalty", &json!({"friction": "normalized"})).unwrap()
}

/// Step `steps` times, calling `observe` after each step; panics on divergence.
fn run(
    f: &mut dyn Formulation,
    model: &Model,
    state: &mut State,
    steps: usize,
    mut observe: impl FnMut(&State),
) {
    let u = vec![0.0; model.actuators.len()];
    for _ in 0..steps {
        let r = f.step(model, state, &u, H);
        assert!(r.diverged.is_none(), "diverged: {:?}", r.diverged);
        observe(state);
    }
}

/// Least-squares slope of `ys` over `xs`.
fn slope(xs: &[f64], ys: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let sxy: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    sxy / sxx
}

#[test]
fn box_slide_stops_at_v0_squared_over_2_mu_g() {
    let scene = build("box_slide", &json!({})).unwrap();
    let mut s = scene.initial.clone();
    let mut f = penalty_normalized();
    run(f.as_mut(), &scene.model, &mut s, (1.0 / H) as usize, |_| {});
    let expected = 2.0f64.powi(2) / (2.0 * 0.3 * G);
    let rel = (s.q[0] - expected) / expected;
    println!(
        "box_slide stop distance {:.6} m, closed form {expected:.6} m, relative error {rel:.3e}",
        s.q[0]
    );
    assert!(s.v[0].abs() < 1e-3, "still sliding at {} m/s", s.v[0]);
    assert!(rel.abs() < 0.02);
}

/// Velocity along the slope (downhill +x in the plane) for a plane tilted by `th`.
fn downhill_speed(s: &State, th: f64) -> f64 {
    s.v[0] * th.cos() - s.v[2] * th.sin()
}

/// Steady creep speed down the 20 degree incline with mu = 0.4 > tan 20 (averaged over 0.5 to 1 s).
fn creep_speed(law: &str) -> f64 {
    let scene = build("box_incline", &json!({"friction": 0.4})).unwrap();
    let th = 20f64.to_radians();
    let mut s = scene.initial.clone();
    let mut f = formulation::build("penalty", &json!({"friction": law})).unwrap();
    let mut speeds = Vec::new();
    run(f.as_mut(), &scene.model, &mut s, (1.0 / H) as usize, |st| {
        if st.t > 0.5 {
            speeds.push(downhill_speed(st, th));
        }
    });
    speeds.iter().sum::<f64>() / speeds.len() as f64
}

/// The scenes' penalty viscous friction coefficient (N s/m).
const KF: f64 = 200.0;

#[test]
fn box_incline_creeps_at_the_viscous_speed_when_all_contacts_stay_viscous() {
    // Newton's reference (Huber) law keeps every contact viscous at creep speeds
    // (kf H << mu N), so the four contacts share m g sin(theta) equally: v = m g sin / (4 kf).
    let th = 20f64.to_radians();
    let expected = G * th.sin() / (4.0 * KF);
    let v = creep_speed("huber");
    let rel = (v - expected) / expected;
    println!("huber incline creep {v:.6e} m/s, closed form m g sin / (n kf) = {expected:.6e}, relative error {rel:.3e}");
    assert!(rel.abs() < 0.05);
}

#[test]
fn box_incline_creeps_with_the_uphill_contacts_at_the_coulomb_cap_under_normalized_friction() {
    // With the exact mu N cap, the friction acting at the base (h = a = 0.05 m below the COM)
    // unloads the uphill pair: moment balance gives N_up = (m g cos - m g sin h / a) / 2 for the
    // pair, whose friction saturates at mu N_up (0.59 N per contact < the 0.84 N an equal share
    // needs). The downhill pair stays viscous and carries the rest:
    // v = (m g sin - mu N_up) / (2 kf).
    let th = 20f64.to_radians();
    let (mu, half) = (0.4, 0.05);
    let n_up = (G * th.cos() - G * th.sin() * half / half) / 2.0;
    let expected = (G * th.sin() - mu * n_up) / (2.0 * KF);
    let v = creep_speed("normalized");
    let rel = (v - expected) / expected;
    println!("normalized incline creep {v:.6e} m/s, closed form (m g sin - mu N_up) / (2 kf) = {expected:.6e}, relative error {rel:.3e}");
    assert!(rel.abs() < 0.05);
}

#[test]
fn box_incline_slides_with_g_sin_minus_mu_cos_when_mu_below_tan() {
    let scene = build("box_incline", &json!({"friction": 0.3})).unwrap();
    let th = 20f64.to_radians();
    let expected = G * (th.sin() - 0.3 * th.cos());
    let mut s = scene.initial.clone();
    let mut f = penalty_normalized();
    let (mut ts, mut vs) = (Vec::new(), Vec::new());
    run(f.as_mut(), &scene.model, &mut s, (1.0 / H) as usize, |st| {
        if st.t > 0.2 {
            ts.push(st.t);
            vs.push(downhill_speed(st, th));
        }
    });
    let a = slope(&ts, &vs);
    let rel = (a - expected) / expected;
    println!(
        "incline acceleration {a:.6} m/s^2, closed form {expected:.6}, relative error {rel:.3e}"
    );
    assert!(rel.abs() < 0.02);
}

#[test]
fn sphere_rolls_with_five_sevenths_g_sin() {
    let scene = build("sphere_roll", &json!({})).unwrap();
    let th = 15f64.to_radians();
    let expected = 5.0 / 7.0 * G * th.sin();
    let mut s = scene.initial.clone();
    let mut f = penalty_normalized();
    let (mut ts, mut vs) = (Vec::new(), Vec::new());
    run(f.as_mut(), &scene.model, &mut s, (1.0 / H) as usize, |st| {
        if st.t > 0.2 {
            ts.push(st.t);
            vs.push(downhill_speed(st, th));
        }
    });
    let a = slope(&ts, &vs);
    let rel = (a - expected) / expected;
    println!("sphere_roll acceleration {a:.6} m/s^2, closed form {expected:.6}, relative error {rel:.3e}");
    assert!(rel.abs() < 0.02);
}

#[test]
fn box_drop_rests_with_corner_penetration_m_g_over_4_ke() {
    let scene = build("box_drop", &json!({})).unwrap();
    let mut s = scene.initial.clone();
    let mut f = penalty_normalized();
    run(f.as_mut(), &scene.model, &mut s, (2.5 / H) as usize, |_| {});
    let kin = forward_kinematics(&scene.model, &s.q);
    let contacts = detect(&scene.model, &kin);
    let expected = 1.0 * G / (4.0 * 1e5);
    println!(
        "box_drop at rest: {} contacts, gaps {:?}, closed form -{expected:.4e} m",
        contacts.len(),
        contacts.iter().map(|c| c.gap).collect::<Vec<_>>()
    );
    assert_eq!(contacts.len(), 4);
    for c in &contacts {
        let rel = (-c.gap - expected) / expected;
        assert!(
            rel.abs() < 0.10,
            "corner penetration {} vs {expected}",
            -c.gap
        );
    }
    assert!(s.v.norm() < 1e-3, "not at rest: |v| = {}", s.v.norm());
}

#[test]
fn non_finite_numbers_are_reported_as_divergence_without_panicking() {
    let scene = build("box_drop", &json!({})).unwrap();
    let mut f = formulation::build("penalty", &json!({})).unwrap();
    // Overflow during the step.
    let mut s = scene.initial.clone();
    s.v[0] = f64::MAX;
    s.v[3] = f64::MAX;
    let r = f.step(&scene.model, &mut s, &[], 0.01);
    assert!(
        r.diverged
            .as_deref()
            .is_some_and(|m| m.contains("non-finite")),
        "{:?}",
        r.diverged
    );
    // A non-finite state on entry.
    let mut s = scene.initial.clone();
    s.q[2] = f64::NAN;
    let r = f.step(&scene.model, &mut s, &[], 0.01);
    assert!(r.diverged.is_some());
}

/// The physical stiffness mapping: a cube resting on its four corners with a per-contact
/// stiffness ke settles at m g / (4 ke) under soft_convex (mapped solref) and under penalty
/// alike (both cones; see `soft_convex::rows::physical_solref` for the mapping).
#[test]
fn resting_penetration_is_m_g_over_4_ke_under_soft_convex_and_penalty() {
    for ke in [1e4, 1e5] {
        let expected = G / (4.0 * ke);
        let scene = build("box_slide", &json!({"v0": 0.0, "ke": ke, "kd": 100.0})).unwrap();
        let cases = [
            (
                "soft_convex",
                json!({"cone": "elliptic", "physical_contact": true}),
            ),
            (
                "soft_convex",
                json!({"cone": "pyramidal", "physical_contact": true}),
            ),
            ("penalty", json!({"friction": "normalized"})),
        ];
        for (name, params) in cases {
            let mut f = formulation::build(name, &params).unwrap();
            let mut s = scene.initial.clone();
            let h = if name == "penalty" { H } else { 0.002 };
            for _ in 0..(10.0 / h) as usize {
                let r = f.step(&scene.model, &mut s, &[], h);
                assert!(r.diverged.is_none());
            }
            let kin = forward_kinematics(&scene.model, &s.q);
            let contacts = detect(&scene.model, &kin);
            assert_eq!(contacts.len(), 4, "{name} {params}");
            for c in &contacts {
                let rel = (-c.gap - expected) / expected;
                println!("ke {ke:e}: {name} {params}: corner penetration {:.6e} m, closed form {expected:.6e}, relative error {rel:.2e}", -c.gap);
                assert!(rel.abs() < 0.02);
            }
        }
    }
}
