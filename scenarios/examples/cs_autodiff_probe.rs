//! Time the batched control-synthesis gradient on box_traversal (issues 16, 17): `autodiff`
//! (soft_convex, signorini) or `adjoint_batched` (`CS_FORMULATION=ncp_fb`):
//! `cargo run --release --features burn --example cs_autodiff_probe -- WORLDS STEPS`.
use contactlab_scenarios::control_synthesis::{ControlProblem, FormulationChoice, Parametrization};
use contactlab_scenarios::control_synthesis_batched::knot_gradients;
use serde_json::json;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap())
        .collect();
    let (worlds, steps) = (
        args.first().copied().unwrap_or(1),
        args.get(1).copied().unwrap_or(10),
    );
    let name = std::env::var("CS_FORMULATION").unwrap_or_else(|_| "soft_convex".into());
    let problems: Vec<ControlProblem> = (1..=worlds as u64)
        .map(|seed| {
            let mut p = ControlProblem::box_traversal(&json!({"seed": seed}), 0.05, 10).unwrap();
            p.steps = steps;
            p.parametrization = Parametrization::Drive;
            p
        })
        .collect();
    let z: Vec<Vec<f64>> = problems.iter().map(|p| p.initial_knots(0.35)).collect();
    // ncp_fb (method adjoint_batched) integrates its servos implicitly: no integrator setting.
    let params = if name == "ncp_fb" {
        serde_json::Value::Null
    } else {
        json!({"integrator": "implicitfast"})
    };
    let f = FormulationChoice { name, params };
    let t = std::time::Instant::now();
    knot_gradients(&problems, &f, &z, false).unwrap();
    println!("forward only: {:.3} s", t.elapsed().as_secs_f64());
    let t = std::time::Instant::now();
    let g = knot_gradients(&problems, &f, &z, true).unwrap();
    let s = t.elapsed().as_secs_f64();
    println!(
        "{worlds} worlds, {steps} steps: {s:.3} s ({:.4} s per step), |g| of world 0 {:.6e}",
        s / steps as f64,
        g[0].gradient
            .as_ref()
            .map_or(f64::NAN, |g| g.iter().map(|x| x * x).sum::<f64>().sqrt())
    );
}
