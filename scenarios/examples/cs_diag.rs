//! Control-synthesis diagnostics (issue 13): for each seed given, the instance's start and
//! target, the final pose of the starting knots, and the objective along the exact adjoint's
//! steepest-descent direction, beside a central-difference check of the directional derivative.
//! `cargo run --example cs_diag -- YAW_WEIGHT SPEED_WEIGHT SEED...`
use contactlab_scenarios::benchmark::wheeled_robot::chassis_yaw;
use contactlab_scenarios::control_synthesis::*;

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 3 || (a[0] == "turn" && a.len() < 4) {
        eprintln!("usage: cs_diag YAW_WEIGHT SPEED_WEIGHT SEED... | cs_diag turn LEFT RIGHT REAR");
        std::process::exit(2);
    }
    if a[0] == "turn" {
        // Constant wheel commands (left front, right front, rear) over the whole horizon on
        // the nominal instance: how far the robot turns and moves sideways.
        let w: Vec<f64> = a[1..4].iter().map(|x| x.parse().unwrap()).collect();
        let p = ControlProblem::box_traversal(&serde_json::json!({"seed": 0}), 0.05, 10).unwrap();
        let z: Vec<f64> = (0..p.len()).map(|i| w[i % 3]).collect();
        let f = FormulationChoice {
            name: "ncp_fb".into(),
            params: serde_json::Value::Null,
        };
        let mut fm = f.build().unwrap();
        let o = simulate(fm.as_mut(), &p, &z);
        println!(
            "turn {w:?}: final ({:.3},{:.3},{:.1}deg) unconverged {}",
            o.last.q[0],
            o.last.q[1],
            chassis_yaw(&o.last).to_degrees(),
            o.unconverged_at.len()
        );
        return;
    }
    let yw: f64 = a[0].parse().unwrap();
    let sw: f64 = a[1].parse().unwrap();
    let f = FormulationChoice {
        name: "ncp_fb".into(),
        params: serde_json::Value::Null,
    };
    for s in &a[2..] {
        let seed: u64 = s.parse().unwrap();
        let mut p =
            ControlProblem::box_traversal(&serde_json::json!({"seed": seed}), 0.05, 10).unwrap();
        p.yaw_weight = yw;
        p.speed_weight = sw;
        let z = p.initial_knots(0.35);
        let g = gradient(&p, &f, GradientMethod::Adjoint, &z).unwrap();
        let l = &g.last;
        println!(
            "seed {seed}: start ({:.3},{:.3},{:.1}deg) target ({:.3},{:.3},{:.1}deg) final ({:.3},{:.3},{:.1}deg) v {:.3} obj {:.4} |g| {:.4}",
            p.initial.q[0], p.initial.q[1], chassis_yaw(&p.initial).to_degrees(),
            p.target.x, p.target.y, p.target.yaw.to_degrees(),
            l.q[0], l.q[1], chassis_yaw(l).to_degrees(), final_speed(l), g.loss, g.norm()
        );
        let n = g.norm();
        let d: Vec<f64> = g.gradient.iter().map(|x| -x / n).collect();
        let eval = |t: f64| {
            let zt: Vec<f64> = z
                .iter()
                .zip(&d)
                .map(|(a, b)| (a + t * b).clamp(-p.bound(), p.bound()))
                .collect();
            let mut fm = f.build().unwrap();
            let o = simulate(fm.as_mut(), &p, &zt);
            (p.loss(&o.last), o.last)
        };
        let e = 1e-4;
        let fd = (eval(e).0 - eval(-e).0) / (2.0 * e);
        println!("  directional derivative: adjoint {:.5} fd {:.5}", -n, fd);
        for t in [0.03, 0.1, 0.3, 0.6, 1.0, 2.0, 3.0] {
            let (o, last) = eval(t);
            println!(
                "  t {t}: obj {o:.4} final ({:.3},{:.3},{:.1}deg) v {:.3}",
                last.q[0],
                last.q[1],
                chassis_yaw(&last).to_degrees(),
                final_speed(&last)
            );
        }
    }
}
