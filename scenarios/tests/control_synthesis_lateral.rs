//! Control synthesis on box_traversal's widest lateral reaches (issue 13): with ncp_fb's exact
//! adjoint at h = 50 ms and the settings of `configs/control_synthesis.yaml` (Adam α 0.1 rad/s
//! decaying 0.97 per update, speed weight 0.5 s², 10 knots, at most 50 updates), seeds 18 and
//! 19 (targets 0.29 m to the side, 0.34 m from the start's line) succeed in drive coordinates,
//! and seed 18 does not in wheel coordinates, whose Adam steps leave the left–right
//! differential below the skid-steering breakaway (module doc of
//! `contactlab_scenarios::control_synthesis`, "Parametrization").
use contactlab_scenarios::control_synthesis::*;

fn synthesis(seed: u64, par: Parametrization) -> Synthesis {
    let mut p =
        ControlProblem::box_traversal(&serde_json::json!({"seed": seed}), 0.05, 10).unwrap();
    p.speed_weight = 0.5;
    p.parametrization = par;
    let f = FormulationChoice {
        name: "ncp_fb".into(),
        params: serde_json::Value::Null,
    };
    let z0 = p.initial_knots(0.35);
    let schedule = Schedule {
        step_size: 0.1,
        step_decay: 0.97,
    };
    synthesize(&p, &f, GradientMethod::Adjoint, &z0, 50, schedule).unwrap()
}

#[test]
fn widest_lateral_targets_succeed_in_drive_coordinates() {
    for seed in [18, 19] {
        let s = synthesis(seed, Parametrization::Drive);
        println!(
            "seed {seed}: success at update {:?}, losses {:.3?}",
            s.iterations_to_success, s.losses
        );
        // Not at the start: the starting knots drive straight and miss by more than 0.2 m.
        assert!(s.losses[0] > 0.1, "seed {seed}: {:?}", s.losses);
        assert!(s.success(), "seed {seed}: last loss {}", s.final_loss());
        let last = s.last.as_ref().unwrap();
        assert!(last.is_finite());
    }
}

#[test]
fn wheel_coordinates_leave_the_lateral_offset() {
    let s = synthesis(18, Parametrization::Wheels);
    let last = s.last.as_ref().unwrap();
    println!(
        "seed 18 in wheel coordinates: last loss {:.4}, final y {:.3} m",
        s.final_loss(),
        last.q[1]
    );
    // The whole budget spent without success, and the final y still more than 0.2 m short of
    // the target's 0.29 m.
    assert!(!s.success() && s.losses.len() == 51, "{:?}", s.losses);
    assert!(last.q[1] < 0.09, "final y {}", last.q[1]);
}
