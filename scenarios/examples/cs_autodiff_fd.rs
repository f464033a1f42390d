//! Central differences of box_traversal's synthesis objective at several steps against the
//! `autodiff` knot gradient, for the coordinates where `fd_central` disagrees most (issue 16):
//! `cargo run --release --features burn --example cs_autodiff_fd -- FORMULATION SEED`.
use contactlab_scenarios::control_synthesis::{
    gradient, simulate, ControlProblem, FormulationChoice, GradientMethod, Parametrization,
};
use contactlab_scenarios::control_synthesis_batched::knot_gradients;
use serde_json::json;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = args
        .first()
        .cloned()
        .unwrap_or_else(|| "soft_convex".into());
    let seed: u64 = args.get(1).map_or(1, |s| s.parse().unwrap());
    let mut p = ControlProblem::box_traversal(&json!({"seed": seed}), 0.05, 10).unwrap();
    p.speed_weight = 0.5;
    p.parametrization = Parametrization::Drive;
    let f = FormulationChoice {
        name,
        params: json!({"integrator": "implicitfast"}),
    };
    let z = p.initial_knots(0.35);
    let ad = knot_gradients(std::slice::from_ref(&p), &f, std::slice::from_ref(&z), true).unwrap();
    let g = ad[0].gradient.clone().unwrap();
    let fd = gradient(&p, &f, GradientMethod::FdCentral, &z).unwrap();
    let mut order: Vec<usize> = (0..g.len()).collect();
    order.sort_by(|&a, &b| {
        (g[b] - fd.gradient[b])
            .abs()
            .total_cmp(&(g[a] - fd.gradient[a]).abs())
    });
    let loss = |z: &[f64]| {
        let mut fm = f.build().unwrap();
        p.loss(&simulate(fm.as_mut(), &p, z).last)
    };
    for &i in order.iter().take(3) {
        print!(
            "knot {i}: autodiff {:.6e}, fd_central {:.6e}; central differences:",
            g[i], fd.gradient[i]
        );
        for e in [1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7] {
            let (mut zp, mut zm) = (z.clone(), z.clone());
            zp[i] += e;
            zm[i] -= e;
            print!(" {e:e}: {:.6e}", (loss(&zp) - loss(&zm)) / (2.0 * e));
        }
        println!();
    }
}
