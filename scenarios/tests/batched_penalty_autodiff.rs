//! The gradient study's `autodiff` method (reverse mode through the batched penalty: burn's
//! `Autodiff` over ndarray, f64) against the study's f64 central-difference reference of the cpu
//! penalty (issue 15): the largest relative error per entry (the study's `grad_max_rel_error`)
//! at most 1e-6 for one step and 1e-4 over 50 steps, on box_slide and cartpole, for a fixed
//! weighting of the whole final state (qpos and qvel) with respect to the initial velocity,
//! the friction coefficient and the contact stiffness (cartpole's geoms do not collide, so its
//! friction and stiffness derivatives are exactly 0 on both sides; it adds its control, named
//! twice at one step: `ctrl[mid][0]` is `ctrl[0][0]` there); and on box_traversal and on
//! mesh_terrain's height field, the wheeled robot on its merged line contacts, with respect to
//! its velocity and wheel command.
#![cfg(feature = "burn")]

use contactlab_scenarios::gradient::cases::parse_loss;
use contactlab_scenarios::gradient::methods::{availability_for, compute, Method};
use contactlab_scenarios::gradient::reference::{
    reference, score, MAX_UNCERTAINTY, REFERENCE_STEPS,
};
use contactlab_scenarios::gradient::{FormulationRef, Input, Problem};
use contactlab_scenarios::{build, Scene};
use contactlab_solvers::formulation::{Formulation, FormulationError};
use contactlab_solvers::penalty::{Penalty, PenaltyParams};
use serde_json::json;

/// Inside the penalty's stable plateau (spec `ncp_fb_and_penalty.md` §4.5).
const H: f64 = 5e-4;

/// `linear:<nq weights>|<nv weights>`, weights 1 + 0.37 i − 0.05 i² over `[q; v]`.
fn loss_text(nq: usize, nv: usize) -> String {
    let w = |i: usize| format!("{}", 1.0 + 0.37 * i as f64 - 0.05 * (i * i) as f64);
    let a: Vec<String> = (0..nq).map(w).collect();
    let b: Vec<String> = (nq..nq + nv).map(w).collect();
    format!("linear:{}|{}", a.join(","), b.join(","))
}

fn problem(scene: &Scene, steps: usize, inputs: &[&str], settle: usize) -> Problem {
    let (nq, nv) = (scene.model.nq, scene.model.nv);
    let loss = parse_loss(scene, &loss_text(nq, nv)).unwrap();
    let inputs = inputs
        .iter()
        .map(|i| Input::parse(&scene.model, i, steps).unwrap())
        .collect();
    let mut p = Problem::from_scene(scene.model.name.clone(), scene, steps, H, loss, inputs);
    // Start inside the contact phase, so that one step already has contact forces.
    let mut f = Penalty::new(PenaltyParams::default()).unwrap();
    let u = vec![0.0; scene.model.actuators.len()];
    for _ in 0..settle {
        f.step(&scene.model, &mut p.initial, &u, H);
    }
    p.initial.t = 0.0;
    p
}

/// `prepare` adjusts each problem after settling (its controls, its initial state).
fn check(name: &str, inputs: &[&str], settle: usize, prepare: &dyn Fn(&mut Problem)) {
    let scene = build(name, &json!({})).unwrap();
    check_scene(name, &scene, inputs, settle, prepare);
}

/// [`check`] on a built scene (`name` labels the output).
fn check_scene(
    name: &str,
    scene: &Scene,
    inputs: &[&str],
    settle: usize,
    prepare: &dyn Fn(&mut Problem),
) {
    let params = json!({});
    let build_f = || -> Result<Box<dyn Formulation>, String> {
        Penalty::new(PenaltyParams::default())
            .map(|f| Box::new(f) as Box<dyn Formulation>)
            .map_err(|e: FormulationError| e.to_string())
    };
    let f = FormulationRef {
        name: "penalty",
        params: &params,
        build: &build_f,
    };
    for (steps, bound) in [(1usize, 1e-6), (50, 1e-4)] {
        let mut p = problem(scene, steps, inputs, settle);
        prepare(&mut p);
        availability_for("autodiff", "penalty", &p).unwrap();
        let g = compute(Method::Autodiff, &p, f).unwrap();
        let r = reference(&p, f, &REFERENCE_STEPS, MAX_UNCERTAINTY).unwrap();
        assert!(r.undefined.is_none(), "{name}: {:?}", r.undefined);
        let s = score(&g.gradient, &r);
        println!(
            "{name}, {steps} steps: autodiff {:?}\n  reference {:?} (uncertainty {:.1e})\n  max rel. error {:.2e}, norm rel. error {:.2e}",
            g.gradient,
            r.gradient,
            r.max_uncertainty(),
            s.max_relative,
            s.norm_relative
        );
        assert!(
            s.max_relative <= bound,
            "{name}, {steps} steps: max relative error {:e} > {bound:e}",
            s.max_relative
        );
    }
}

#[test]
fn box_slide_autodiff_matches_the_finite_difference_reference() {
    // 40 steps (20 ms) from the scene's start: the box rests on its four corners in
    // penetration and slides, so friction and stiffness act from the first step.
    let inputs = [
        "qvel[0]", "qvel[1]", "qvel[2]", "qvel[3]", "qvel[4]", "qvel[5]", "friction", "ke",
    ];
    check("box_slide", &inputs, 40, &|_| {});
}

#[test]
fn cartpole_autodiff_matches_the_finite_difference_reference() {
    check(
        "cartpole",
        &[
            "qvel[0]",
            "qvel[1]",
            "ctrl[0][0]",
            "ctrl[mid][0]",
            "friction",
            "ke",
        ],
        0,
        &|_| {},
    );
}

/// The wheeled robot's inputs: forward and roll velocity, the left front wheel's spin, its
/// command at the first step, friction and stiffness.
const ROBOT_INPUTS: [&str; 6] = [
    "qvel[0]",
    "qvel[3]",
    "qvel[6]",
    "ctrl[0][0]",
    "friction",
    "ke",
];

/// The robot's rollout off the model's kinks (see the box_traversal test): a roll rate of
/// 0.2 rad/s, and every command at 1.5 rad/s, inside the control clamp.
fn off_the_kinks(p: &mut Problem) {
    p.controls.iter_mut().flatten().for_each(|u| *u = 1.5);
    p.initial.v[3] = 0.2;
}

#[test]
fn box_traversal_autodiff_matches_the_finite_difference_reference() {
    // The wheeled robot (issue 17's robot class: plane–wheel line contacts merged per wheel)
    // after 0.1 s of settling on its wheels, so that the wheels' contacts, their friction and
    // the ground's stiffness act from the first step.
    //
    // Two adjustments keep the rollout off the model's kinks, where central differences
    // average two one-sided slopes and reverse mode takes one of them:
    // - The merged line contact takes the deeper end's gap (`narrow_phase::merge_line_contact`,
    //   the min of the two ends' gaps). On level ground both ends are equally deep, and a roll
    //   in either direction makes the other end the deeper: measured, central differences
    //   (0.5 × the sum of the slopes) and reverse mode (the first end's slope) differ by 57 %
    //   in d loss / d roll rate over 5 steps. A roll rate of 0.2 rad/s from the start makes one
    //   end deeper; where the ends trade places later the force is continuous, so the flow
    //   stays differentiable there.
    // - The scene's own command saturates at the control clamp (±2 rad/s), where its
    //   derivative is 0; 1.5 rad/s lies inside it, so the wheel servo's control enters.
    check("box_traversal", &ROBOT_INPUTS, 200, &off_the_kinks);
}

#[test]
fn height_field_robot_autodiff_matches_the_finite_difference_reference() {
    // The wheeled robot on height-field terrain (issue 17: each wheel's contacts on the
    // triangles' planes, batched::height_field), settled 0.1 s on its wheels at the default
    // start, with box_traversal's adjustments off the merge's kinks (a roll rate, so that one
    // tread end is the deeper; a command inside the control clamp).
    let scene = build("mesh_terrain", &json!({"collider": "heightfield"})).unwrap();
    check_scene(
        "mesh_terrain (heightfield)",
        &scene,
        &ROBOT_INPUTS,
        200,
        &off_the_kinks,
    );
}

/// Where autodiff cannot apply, the reason names what is missing.
#[test]
fn autodiff_names_what_it_lacks() {
    let scene = build("cartpole", &json!({})).unwrap();
    let p = problem(&scene, 1, &["qvel[0]"], 0);
    let e = availability_for("autodiff", "ncp_fb", &p).unwrap_err();
    assert!(e.contains("ncp_fb offers no autodiff"), "{e}");
    // The soft model's parameters are host constants of its batched step.
    let p = problem(&scene, 1, &["friction"], 0);
    let e = availability_for("autodiff", "soft_convex", &p).unwrap_err();
    assert!(
        e.contains("'friction' is a constant of the batched soft_convex model"),
        "{e}"
    );
    let p = problem(&scene, 1, &["mass:pole"], 0);
    let e = availability_for("autodiff", "penalty", &p).unwrap_err();
    assert!(e.contains("'mass:2' is a constant"), "{e}");
    // Triangle-mesh terrain is outside the batched collision class (the height-field
    // collider is in it, issue 17).
    let scene = build("mesh_terrain", &json!({"collider": "trimesh"})).unwrap();
    let p = problem(&scene, 1, &["qvel[0]"], 0);
    let e = availability_for("autodiff", "penalty", &p).unwrap_err();
    assert!(e.contains("cannot run this scene"), "{e}");
}
