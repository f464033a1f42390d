//! The `autodiff` gradient of box_traversal's control synthesis (issue 16): reverse mode
//! through the batched soft_convex and signorini (burn-ndarray, f64, `implicitfast`) against
//! central differences of the cpu engine's rollouts (the same map in the same arithmetic to
//! ~1e-13, `batched_robot_cross_check.rs`), and Adam on a batch of instances lowering every
//! instance's objective.
#![cfg(feature = "burn")]

use contactlab_scenarios::control_synthesis::{
    simulate, ControlProblem, FormulationChoice, Parametrization, Schedule,
};
use contactlab_scenarios::control_synthesis_batched::{knot_gradients, synthesize_batch};
use serde_json::json;

fn problem(seed: u64) -> ControlProblem {
    let mut p = ControlProblem::box_traversal(&json!({"seed": seed}), 0.05, 10).unwrap();
    p.speed_weight = 0.5;
    p.parametrization = Parametrization::Drive;
    p
}

fn choice(name: &str) -> FormulationChoice {
    FormulationChoice {
        name: name.into(),
        params: json!({"integrator": "implicitfast"}),
    }
}

/// Central difference step (rad/s) of the reference. The rollouts at h = 50 ms switch contacts
/// and solver paths within 1e-4–1e-3 rad/s of a knot, where `fd_central`'s step 1e-4 then
/// straddles a kink (measured with `examples/cs_autodiff_fd.rs`, seed 1: the central
/// difference of knot 23 is 1.84 at 1e-4, −6.643800 at 1e-5, −6.643755 at 1e-6, −6.643818 at
/// 1e-7, and autodiff's −6.643818); 1e-6 is below those kinks and well above round-off.
const STEP: f64 = 1e-6;

/// The knot gradients of two instances by `autodiff` (one batch) against central differences
/// of the cpu engine's rollouts with step [`STEP`], every knot coordinate.
#[test]
fn autodiff_knot_gradient_matches_central_differences_of_the_cpu_engine() {
    let problems: Vec<ControlProblem> = [1, 3].into_iter().map(problem).collect();
    let z: Vec<Vec<f64>> = problems.iter().map(|p| p.initial_knots(0.35)).collect();
    for name in ["soft_convex", "signorini"] {
        let f = choice(name);
        let ad = knot_gradients(&problems, &f, &z, true).unwrap();
        for ((p, z), a) in problems.iter().zip(&z).zip(&ad) {
            assert!(a.stopped.is_none(), "{name}: {:?}", a.stopped);
            let loss = |z: &[f64]| {
                let mut fm = f.build().unwrap();
                let o = simulate(fm.as_mut(), p, z);
                assert!(o.diverged.is_none(), "{:?}", o.diverged);
                p.loss(&o.last)
            };
            assert!((p.loss(&a.last) - loss(z)).abs() <= 1e-9);
            // The batched solver follows the cpu solver's path: the same steps end unconverged.
            let mut fm = f.build().unwrap();
            let cpu = simulate(fm.as_mut(), p, z);
            assert_eq!(a.unconverged_at, cpu.unconverged_at, "{name}");
            let g = a.gradient.as_ref().unwrap();
            let scale = g.iter().map(|x| x * x).sum::<f64>().sqrt();
            let mut err: f64 = 0.0;
            for (i, gi) in g.iter().enumerate() {
                let (mut zp, mut zm) = (z.clone(), z.clone());
                zp[i] += STEP;
                zm[i] -= STEP;
                let fd = (loss(&zp) - loss(&zm)) / (2.0 * STEP);
                err = err.max((gi - fd).abs());
            }
            println!(
                "{name}: objective {:.6}, |g| {scale:.4e}, max |autodiff − central difference| {err:.3e} ({:.3e} of |g|)",
                p.loss(&a.last),
                err / scale
            );
            assert!(err <= 1e-4 * scale, "{name}: {err:e} of {scale:e}");
        }
    }
}

/// Adam on a batch of four instances: every instance's objective falls, or it succeeds.
#[test]
fn batched_adam_lowers_every_instance_objective() {
    let problems: Vec<ControlProblem> = [1, 2, 5, 9].into_iter().map(problem).collect();
    let z: Vec<Vec<f64>> = problems.iter().map(|p| p.initial_knots(0.35)).collect();
    let s = synthesize_batch(
        &problems,
        &choice("soft_convex"),
        &z,
        4,
        Schedule {
            step_size: 0.1,
            step_decay: 0.97,
        },
    )
    .unwrap();
    for (i, s) in s.iter().enumerate() {
        println!(
            "instance {i}: objectives {:?}, stopped {:?}",
            s.objectives, s.stopped
        );
        assert!(s.stopped.is_none(), "{:?}", s.stopped);
        let (first, last) = (s.objectives[0], *s.objectives.last().unwrap());
        assert!(
            s.success() || last < first,
            "instance {i}: {first} -> {last}"
        );
    }
}

/// The reverse sweep's pieces (one tape per solver iteration, `sweep::StepTape::Pieces`)
/// against one tape over each whole step (`StepTape::Whole`): the same chain rule taken in
/// pieces, so the same adjoints to round-off, for soft_convex (Newton, warm starts, wheel–box
/// contacts) and signorini (friction discs), with generic seeds on every final coordinate.
#[test]
fn per_iteration_pieces_equal_the_whole_step_tape() {
    use contactlab_scenarios::control_synthesis_batched::soft_batch;
    use contactlab_solvers::batched::soft::sweep::{backward_with, forward, StepTape};
    let problems: Vec<ControlProblem> = [1, 3, 7].into_iter().map(problem).collect();
    let w = problems.len();
    let (nu, h) = (problems[0].nu(), problems[0].h);
    // Wheel–ground rows in every step: every step runs the Newton solver.
    let steps = 30;
    let initial: Vec<_> = problems.iter().map(|p| p.initial.clone()).collect();
    let per_world: Vec<Vec<Vec<f64>>> = problems
        .iter()
        .map(|p| p.controls(&p.initial_knots(0.35)))
        .collect();
    let controls: Vec<Vec<Vec<f64>>> = (0..steps)
        .map(|i| {
            (0..nu)
                .map(|a| per_world.iter().map(|c| c[i][a]).collect())
                .collect()
        })
        .collect();
    for name in ["soft_convex", "signorini"] {
        let batch = soft_batch(&choice(name), &problems[0].model).unwrap();
        let fwd = forward(&batch, &initial, &controls, h);
        assert!(fwd.stopped.iter().all(Option::is_none), "{:?}", fwd.stopped);
        let (nq, nv) = (problems[0].model.nq, problems[0].model.nv);
        // Generic seeds: every coordinate of every world, different weights.
        let seed = |n: usize, o: f64| -> Vec<Vec<f64>> {
            (0..n)
                .map(|j| (0..w).map(|k| ((j * 7 + k * 3) as f64 + o).sin()).collect())
                .collect()
        };
        let run = |tape| {
            backward_with(
                &batch,
                &fwd,
                &controls,
                h,
                seed(nq, 0.3),
                seed(nv, 1.1),
                tape,
            )
        };
        let (a, b) = (run(StepTape::Pieces), run(StepTape::Whole));
        let flat = |x: &contactlab_solvers::batched::soft::sweep::Adjoints| -> Vec<f64> {
            x.q0.iter()
                .chain(&x.v0)
                .chain(x.controls.iter().flatten())
                .flatten()
                .copied()
                .collect()
        };
        let (fa, fb) = (flat(&a), flat(&b));
        assert!(fa.iter().all(|x| x.is_finite()));
        let scale = fb.iter().fold(0.0_f64, |m, x| m.max(x.abs()));
        let err = fa
            .iter()
            .zip(&fb)
            .fold(0.0_f64, |m, (x, y)| m.max((x - y).abs()));
        println!("{name}: max |pieces − whole step| {err:.3e} of max |adjoint| {scale:.3e}");
        assert!(scale > 1e-3, "{name}: the seeds reach the controls");
        assert!(err <= 1e-10 * scale, "{name}: {err:e} of {scale:e}");
    }
}

/// `adjoint_batched` (issue 17): ncp_fb's exact adjoint on the batched engine, two instances as
/// one batch, against the cpu engine's `adjoint` of each instance alone: the same final state
/// and loss, the same unconverged steps, and the same knot gradient within issue 17's 1e-6
/// relative (largest entry).
#[test]
fn batched_adjoint_knot_gradient_matches_the_cpu_adjoint() {
    use contactlab_scenarios::control_synthesis::{gradient, GradientMethod};
    let problems: Vec<ControlProblem> = [1, 3].into_iter().map(problem).collect();
    let z: Vec<Vec<f64>> = problems.iter().map(|p| p.initial_knots(0.35)).collect();
    let f = FormulationChoice {
        name: "ncp_fb".into(),
        params: serde_json::Value::Null,
    };
    let batched = knot_gradients(&problems, &f, &z, true).unwrap();
    for ((p, z), b) in problems.iter().zip(&z).zip(&batched) {
        assert!(b.stopped.is_none(), "{:?}", b.stopped);
        let cpu = gradient(p, &f, GradientMethod::Adjoint, z).unwrap();
        assert!(cpu.diverged.is_none(), "{:?}", cpu.diverged);
        let dx = (&b.last.q - &cpu.last.q).amax();
        assert!(dx <= 1e-6, "final q differs by {dx:e}");
        assert!((p.loss(&b.last) - cpu.loss).abs() <= 1e-6 * cpu.loss.max(1.0));
        assert_eq!(b.unconverged_at, cpu.unconverged_at);
        let g = b.gradient.as_ref().unwrap();
        let scale = cpu.gradient.iter().fold(0.0_f64, |m, x| m.max(x.abs()));
        let err = g
            .iter()
            .zip(&cpu.gradient)
            .fold(0.0_f64, |m, (a, c)| m.max((a - c).abs()));
        println!(
            "loss {:.6}: max |batched − cpu adjoint| {err:.3e} of max |g| {scale:.3e} ({:.2e})",
            cpu.loss,
            err / scale
        );
        assert!(scale > 1e-3);
        assert!(err <= 1e-6 * scale, "{:e} relative", err / scale);
    }
}
