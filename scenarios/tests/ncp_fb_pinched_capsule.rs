//! Issue #12: ncp_fb on a 45 g capsule pinched between two position-servoed pads on slide
//! joints (mu 0.7, pads squeezed 2 mm past contact by the model's own keyframe `ctrl`, default
//! detection margin 1 cm) made 0 Newton iterations on every step, returned zero impulses and
//! let the capsule fall 44 m while `simulate` printed "ok". The capsule must be held.

use std::path::PathBuf;

use contactlab_scenarios::build;
use contactlab_solvers::ncp_fb::{NcpFb, NcpFbParams};
use serde_json::json;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mjcf")
        .join(name)
}

#[test]
fn ncp_fb_pinched_capsule_iterates_every_step_and_is_held() {
    let file = fixture("pinched_capsule_ncp_fb_no_iterations.xml");
    let scene = build("mjcf", &json!({"file": file, "key": "pinch"})).unwrap();
    assert_eq!(scene.controls_at(0.0, &scene.initial), vec![0.002, -0.002]);
    let model = &scene.model;
    let capsule = model
        .bodies
        .iter()
        .position(|b| b.name == "capsule")
        .unwrap();
    let mut f = NcpFb::new(NcpFbParams::default()).unwrap();
    let h = model.options.timestep;
    let mut s = scene.initial.clone();
    let (mut slip_max, mut fewest_iterations, mut unconverged) = (0.0f64, usize::MAX, 0);
    let mut z_at_1 = f64::NAN;
    for k in 0..3000 {
        let u = scene.controls_at(s.t, &s);
        let (r, detail) = f.step_detail(model, &mut s, &u, h);
        assert!(r.diverged.is_none(), "step {k}: {:?}", r.diverged);
        fewest_iterations = fewest_iterations.min(r.iterations);
        unconverged += usize::from(!r.converged);
        let detail = detail.unwrap();
        assert!(detail.solution.failure.is_none());
        if s.t >= 1.0 - 1e-9 {
            if z_at_1.is_nan() {
                z_at_1 = s.q[model.joints[model.bodies[capsule].joints[0]].qpos_adr + 2];
            }
            // Slip: the tangential velocity after the step of every loaded pad-capsule contact,
            // relative between the bodies, in the contact frame.
            for c in r.contacts.iter().filter(|c| c.impulse[0] > 0.0) {
                slip_max = slip_max.max(c.velocity[1].hypot(c.velocity[2]));
            }
        }
    }
    let z = s.q[model.joints[model.bodies[capsule].joints[0]].qpos_adr + 2];
    println!(
        "fewest iterations {fewest_iterations}, unconverged steps {unconverged}, max slip over [1, 3] s {slip_max:.3e} m/s, capsule z {z_at_1:.3e} -> {z:.3e} m"
    );
    assert!(fewest_iterations >= 1);
    assert!(slip_max < 1e-6, "slip {slip_max} m/s");
    assert!(
        (z - z_at_1).abs() < 2e-6,
        "capsule moved {} m over [1, 3] s",
        z - z_at_1
    );
    // Held where it started, not fallen (a free fall covers 44 m in 3 s).
    assert!(z.abs() < 1e-2, "capsule at z = {z} m");
}
