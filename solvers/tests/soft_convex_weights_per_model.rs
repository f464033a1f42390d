//! soft_convex's inverse weights (the diagonal approximation Â of J M⁻¹ Jᵀ at qpos0, spec §A3)
//! belong to the model they were computed for. (Fixed: the formulation cached them keyed by
//! `nq` and the body count, so one instance stepped alternately on two models that differ
//! only in a mass reused the first model's weights for the second, whose soft contacts then
//! had the wrong regularizer R = (1 − d)/d · Â.)

mod common;

use contactlab_solvers::formulation::{build, Formulation};
use contactlab_solvers::model::Model;
use contactlab_solvers::soft_convex::invweight::InvWeights;
use contactlab_solvers::State;

const H: f64 = 2e-3;
const STEPS: usize = 150;

/// A box of `mass` kg (inertia fixed) dropped from 5 cm onto a floor.
fn dropped_box(mass: f64) -> Model {
    common::box_on_floor(0.15, mass, 0.02 / 3.0)
}

/// soft_convex without warm start, so that a step depends only on the model and the state.
fn formulation() -> Box<dyn Formulation> {
    build("soft_convex", &serde_json::json!({"warmstart": false})).unwrap()
}

fn alone(model: &Model) -> Vec<State> {
    let mut f = formulation();
    let mut s = model.default_state();
    (0..STEPS)
        .map(|_| {
            f.step(model, &mut s, &[], H);
            s.clone()
        })
        .collect()
}

#[test]
fn inverse_weights_follow_a_mass_change_between_models() {
    let (light, heavy) = (dropped_box(1.0), dropped_box(5.0));
    assert_eq!(
        (light.nq, light.bodies.len()),
        (heavy.nq, heavy.bodies.len())
    );
    let (ref_light, ref_heavy) = (alone(&light), alone(&heavy));
    // The translational inverse weight of the box is 1/m: 1 and 0.2 (1/kg).
    let w = |m: &Model| InvWeights::new(m).body[1][0];
    assert!((w(&light) - 1.0).abs() < 1e-12 && (w(&heavy) - 0.2).abs() < 1e-12);
    // One instance, stepping the two models alternately (light first).
    let mut f = formulation();
    let (mut sl, mut sh) = (light.default_state(), heavy.default_state());
    for k in 0..STEPS {
        f.step(&light, &mut sl, &[], H);
        f.step(&heavy, &mut sh, &[], H);
        assert_eq!(sl, ref_light[k], "light model, step {k}");
        assert_eq!(sh, ref_heavy[k], "heavy model, step {k}");
    }
}
