//! Control-synthesis parametrization probe (issue 13): runs the synthesis of
//! `configs/control_synthesis.yaml` (ncp_fb, h = 50 ms, 10 knots, Adam α 0.1 decaying 0.97,
//! speed weight 0.5, 50 updates) on the given seeds with a chosen gradient method and
//! parametrization, and prints each outcome and the success count.
//! `cargo run --example cs_param -- METHOD PARAMETRIZATION SEED...` (`all` for seeds 1..=50).
use contactlab_scenarios::benchmark::wheeled_robot::chassis_yaw;
use contactlab_scenarios::control_synthesis::*;

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let method = GradientMethod::parse(&a[0]).unwrap();
    let par = Parametrization::parse(&a[1]).unwrap();
    let seeds: Vec<u64> = if a[2] == "all" {
        (1..=50).collect()
    } else {
        a[2..].iter().map(|s| s.parse().unwrap()).collect()
    };
    let f = FormulationChoice {
        name: "ncp_fb".into(),
        params: serde_json::Value::Null,
    };
    let mut ok = 0;
    for seed in &seeds {
        let mut p =
            ControlProblem::box_traversal(&serde_json::json!({"seed": seed}), 0.05, 10).unwrap();
        let env = |k: &str, d: f64| std::env::var(k).map_or(d, |v| v.parse().unwrap());
        p.speed_weight = env("CS_SPEED", 0.5);
        p.yaw_weight = env("CS_YAW", 1.0);
        p.parametrization = par;
        let z0 = p.initial_knots(0.35);
        let s = synthesize(
            &p,
            &f,
            method,
            &z0,
            50,
            Schedule {
                step_size: env("CS_STEP", 0.1),
                step_decay: env("CS_DECAY", 0.97),
            },
        )
        .unwrap();
        let l = s.last.as_ref().unwrap();
        if std::env::var("CS_VERBOSE").is_ok() {
            let y = par.coordinates(&s.knots);
            println!("  losses {:.3?}", s.losses);
            println!("  objectives {:.3?}", s.objectives);
            println!("  final coordinates {:.2?}", y);
        }
        ok += s.success() as usize;
        println!(
            "seed {seed}: success {} at {:?} loss {:.4} -> {:.4} target ({:.2},{:.2},{:.0}) final ({:.2},{:.2},{:.0}) v {:.2} {:.1}s",
            s.success(),
            s.iterations_to_success,
            s.losses[0],
            s.final_loss(),
            p.target.x,
            p.target.y,
            p.target.yaw.to_degrees(),
            l.q[0],
            l.q[1],
            chassis_yaw(l).to_degrees(),
            final_speed(l),
            s.wall_s
        );
    }
    println!("{} {}: {ok}/{}", method.name(), par.name(), seeds.len());
}
