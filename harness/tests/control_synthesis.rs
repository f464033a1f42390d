//! The `control_synthesis` study end to end (issue 13): a tiny synthesis on box_traversal with
//! the box moved away (2 instances, 2 Adam updates, 3 s horizon at h = 50 ms) by the exact
//! adjoint, the lagged adjoint and central differences, and bad study specs, each an error
//! naming file, line and key.

mod common;
use common::{assert_bad, contactlab, stderr};

const TINY: &str = "\
name: clitest
study:
  kind: control_synthesis
  instances: 2
  methods: [adjoint, adjoint_lagged, fd_central]
  iterations: 2
  step_size: 0.02
scenes:
  - name: box_traversal
    obstacle_x: 50.0
    horizon: 3.0
    target: [1.6, 0.3]
formulations:
  - name: ncp_fb
sweep:
  timestep: [0.05]
";

fn curve(row: &serde_json::Value) -> Vec<f64> {
    serde_json::from_str(row["loss_curve"].as_str().unwrap()).unwrap()
}

#[test]
fn tiny_synthesis_writes_one_row_per_instance_and_method() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("tiny.yaml"), TINY).unwrap();
    let o = contactlab(&["check", "tiny.yaml"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("6 cells"));
    let o = contactlab(&["run", "tiny.yaml", "--jobs", "2"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = tmp.path().join("results/clitest");
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("## Success rate"), "{report}");
    assert!(dir.join("figures/loss_curves__box_traversal.svg").is_file());
    assert!(dir.join("runs.parquet").is_file());
    let rows: Vec<serde_json::Value> = std::fs::read_dir(dir.join("cells"))
        .unwrap()
        .map(|e| {
            serde_json::from_str(&std::fs::read_to_string(e.unwrap().path()).unwrap()).unwrap()
        })
        .collect();
    assert_eq!(rows.len(), 6);
    let get = |method: &str, seed: u64| {
        rows.iter()
            .find(|r| r["method"] == method && r["seed"] == seed)
            .unwrap_or_else(|| panic!("{method} seed {seed}"))
    };
    for r in &rows {
        assert_eq!(r["status"], "ok", "{r}");
        // Flat ground: every forward step converges.
        assert_eq!(r["unconverged_steps"], 0, "{r}");
        // Flat ground at 0.05 s: the last iterate's rollout breaks none of the harness's rules.
        assert_eq!(r["physical_violation"], "", "{r}");
        assert_eq!(r["steps"], 60);
        let c = curve(r);
        let updates = r["iterations_run"].as_u64().unwrap() as usize;
        assert!(updates <= 2, "{r}");
        assert_eq!(c.len(), updates + 1, "{r}");
        assert_eq!(c[0], r["initial_loss_m2"].as_f64().unwrap());
        assert_eq!(*c.last().unwrap(), r["final_loss_m2"].as_f64().unwrap());
    }
    for seed in [1, 2] {
        let (adj, fd) = (get("adjoint", seed), get("fd_central", seed));
        // Same start, same instance: the same loss, and the exact adjoint's gradient is the
        // finite differences' (all steps converged).
        assert_eq!(adj["initial_loss_m2"], fd["initial_loss_m2"]);
        let (ga, gf) = (
            adj["gradient_norm_initial"].as_f64().unwrap(),
            fd["gradient_norm_initial"].as_f64().unwrap(),
        );
        assert!(
            (ga - gf).abs() <= 1e-3 * gf,
            "seed {seed}: adjoint {ga} vs fd {gf}"
        );
        if adj["success"] == 0 {
            // Two Adam updates along the exact gradient lower the loss.
            let c = curve(adj);
            assert!(c[1] < c[0] && c[2] < c[0], "seed {seed}: {c:?}");
        }
    }
    // A rerun resumes every cell.
    let o = contactlab(&["run", "tiny.yaml"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("6 resumed, 0 run"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // `report` redraws from the stored rows.
    std::fs::remove_file(dir.join("report.md")).unwrap();
    let o = contactlab(&["report", "results/clitest"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.join("report.md").is_file());
}

#[test]
fn unknown_method_is_an_error_at_its_line() {
    let text = TINY.replace("fd_central]", "autodif]");
    assert_bad(&text, 5, &["study.methods[2]", "autodif", "fd_central"]);
}

#[test]
fn a_method_the_formulation_lacks_is_an_error() {
    let text = TINY.replace("  - name: ncp_fb\n", "  - name: penalty\n");
    assert_bad(
        &text,
        5,
        &["study.methods[0]", "needs formulation ncp_fb", "penalty"],
    );
}

#[test]
fn non_positive_step_size_and_iterations_are_errors() {
    assert_bad(
        &TINY.replace("step_size: 0.02", "step_size: 0.0"),
        7,
        &["study.step_size", "> 0"],
    );
    assert_bad(
        &TINY.replace("iterations: 2", "iterations: 0"),
        6,
        &["study.iterations", "at least 1"],
    );
    assert_bad(
        &TINY.replace("iterations: 2", "iterations: -3"),
        6,
        &["study.iterations"],
    );
}

#[test]
fn unknown_study_key_is_an_error() {
    assert_bad(
        &TINY.replace("step_size: 0.02", "step_size: 0.02\n  stepsize: 0.2"),
        8,
        &["stepsize"],
    );
}

#[test]
fn objective_weights_change_the_objective_not_the_recorded_task_loss() {
    // yaw_weight 0 and speed_weight 2 s^2: the objective of the last iterate is its squared
    // position error plus 2 x its squared final speed, while loss_curve keeps the scene's task
    // loss (yaw weight 1).
    let text = TINY
        .replace("instances: 2", "instances: 1")
        .replace("[adjoint, adjoint_lagged, fd_central]", "[adjoint]")
        .replace(
            "step_size: 0.02",
            "step_size: 0.02\n  step_decay: 0.5\n  yaw_weight: 0.0\n  speed_weight: 2.0",
        );
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("w.yaml"), text).unwrap();
    let o = contactlab(&["run", "w.yaml", "--jobs", "1"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let cells = tmp.path().join("results/clitest/cells");
    let entry = std::fs::read_dir(cells).unwrap().next().unwrap().unwrap();
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(entry.path()).unwrap()).unwrap();
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!(r["step_decay"], 0.5);
    assert_eq!(r["speed_weight"], 2.0);
    assert_eq!(r["yaw_weight"], 0.0);
    let task = curve(&r);
    let objective: Vec<f64> = serde_json::from_str(r["objective_curve"].as_str().unwrap()).unwrap();
    assert_eq!(task.len(), objective.len());
    let (e, v) = (
        r["final_position_error_m"].as_f64().unwrap(),
        r["final_speed_m_s"].as_f64().unwrap(),
    );
    let want = e * e + 2.0 * v * v;
    let got = *objective.last().unwrap();
    assert!((got - want).abs() <= 1e-9 * want, "{got} vs {want}");
    assert_eq!(*task.last().unwrap(), r["final_loss_m2"].as_f64().unwrap());
    assert!(*task.last().unwrap() >= e * e, "{r}");
}

#[test]
fn bad_speed_weight_and_step_decay_are_errors() {
    let with =
        |extra: &str| TINY.replace("step_size: 0.02", &format!("step_size: 0.02\n  {extra}"));
    assert_bad(
        &with("speed_weight: -0.5"),
        8,
        &["study.speed_weight", ">= 0", "s^2"],
    );
    assert_bad(&with("speed_weight: fast"), 8, &["study.speed_weight"]);
    assert_bad(&with("step_decay: 0.0"), 8, &["study.step_decay", "(0, 1]"]);
    assert_bad(&with("step_decay: 1.5"), 8, &["study.step_decay", "(0, 1]"]);
    assert_bad(&with("step_decay: [0.9]"), 8, &["study.step_decay"]);
    // A key without a value, and a key the study does not know, name `study.<key>` and their
    // own line (both used to report the `study:` line without the key).
    assert_bad(
        &with("parametrizations:"),
        8,
        &["study.parametrizations", "no value"],
    );
    assert_bad(
        &with("step_decy: 0.9"),
        8,
        &["study.step_decy", "unknown key", "step_decay"],
    );
}

#[test]
fn parametrizations_and_first_seed_are_cell_axes_and_wheels_keeps_earlier_ids() {
    // One method, seeds 5 and 6; first run with the default parametrization (wheels), then with
    // both: the wheels cells resume (their ids did not change), the drive cells run.
    let base = TINY
        .replace(
            "[adjoint, adjoint_lagged, fd_central]",
            "[adjoint]\n  first_seed: 5",
        )
        .replace("iterations: 2", "iterations: 1");
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("p.yaml"), &base).unwrap();
    let o = contactlab(&["run", "p.yaml", "--jobs", "2"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let both = base.replace(
        "first_seed: 5",
        "first_seed: 5\n  parametrizations: [wheels, drive]",
    );
    std::fs::write(tmp.path().join("p.yaml"), &both).unwrap();
    let o = contactlab(&["run", "p.yaml", "--jobs", "2"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("2 resumed, 2 run"), "{out}");
    let dir = tmp.path().join("results/clitest");
    let rows: Vec<serde_json::Value> = std::fs::read_dir(dir.join("cells"))
        .unwrap()
        .map(|e| {
            serde_json::from_str(&std::fs::read_to_string(e.unwrap().path()).unwrap()).unwrap()
        })
        .collect();
    assert_eq!(rows.len(), 4);
    for seed in [5, 6] {
        let get = |par: &str| {
            rows.iter()
                .find(|r| r["parametrization"] == par && r["seed"] == seed)
                .unwrap_or_else(|| panic!("{par} seed {seed}"))
        };
        let (w, d) = (get("wheels"), get("drive"));
        // Same starting knots: the same first loss and, the gradient being the same vector in
        // other coordinates, a different first update unless the synthesis stopped at once.
        assert_eq!(w["initial_loss_m2"], d["initial_loss_m2"]);
        assert_eq!(w["status"], "ok");
        assert_eq!(d["status"], "ok");
        if w["success"] == 0 {
            assert_ne!(w["final_loss_m2"], d["final_loss_m2"], "seed {seed}");
        }
    }
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("| adjoint | drive |"), "{report}");
    assert!(report.contains("| adjoint | wheels |"), "{report}");
}

#[test]
fn bad_parametrizations_and_first_seed_are_errors() {
    let with =
        |extra: &str| TINY.replace("step_size: 0.02", &format!("step_size: 0.02\n  {extra}"));
    assert_bad(
        &with("parametrizations: [polar]"),
        8,
        &["study.parametrizations[0]", "polar", "wheels, drive"],
    );
    assert_bad(
        &with("parametrizations: [drive, drive]"),
        8,
        &["study.parametrizations[1]", "twice"],
    );
    assert_bad(
        &with("parametrizations: []"),
        8,
        &["study.parametrizations", "empty"],
    );
    assert_bad(
        &with("parametrizations: drive"),
        8,
        &["study.parametrizations"],
    );
    assert_bad(
        &with("first_seed: 0"),
        8,
        &["study.first_seed", "at least 1"],
    );
    assert_bad(&with("first_seed: -2"), 8, &["study.first_seed"]);
}

#[test]
fn duplicates_unread_keys_and_oversized_studies_are_errors() {
    assert_bad(
        &TINY.replace(
            "[adjoint, adjoint_lagged, fd_central]",
            "[adjoint, adjoint]",
        ),
        5,
        &["study.methods[1]", "twice"],
    );
    assert_bad(
        &TINY.replace("  - name: ncp_fb\n", "  - name: ncp_fb\n  - name: ncp_fb\n"),
        15,
        &["formulations[1]", "duplicate label"],
    );
    assert_bad(
        &format!("{TINY}horizon: 3.0\n"),
        17,
        &["horizon", "no effect", "scene's `horizon`"],
    );
    assert_bad(
        &format!("{TINY}log_steps: true\n"),
        17,
        &["log_steps", "no effect"],
    );
    assert_bad(
        &TINY.replace("iterations: 2", "iterations: 2\n  knots: 100000000"),
        7,
        &["study.knots", "at most 10000"],
    );
    assert_bad(
        &TINY.replace("instances: 2", "instances: 4611686018427387904"),
        4,
        &["study.instances", "over the limit"],
    );
    // The box moved away, horizon 3 s: a 5 s step is longer than the horizon; a 1e-9 s step
    // gives 3e9 steps, over the 1e7 limit.
    assert_bad(
        &TINY.replace("timestep: [0.05]", "timestep: [5.0]"),
        16,
        &["sweep.timestep", "longer than the scene's horizon"],
    );
    assert_bad(
        &TINY.replace("timestep: [0.05]", "timestep: [1.0e-9]"),
        16,
        &["sweep.timestep", "over the limit"],
    );
}
