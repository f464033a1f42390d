//! End-to-end runs of small experiments through the library, with the fake falling-point
//! formulation and scene of `contactlab_harness::testkit` (closed forms in its module doc).

use std::path::Path;

use contactlab_harness::catalog::Catalog;
use contactlab_harness::config;
use contactlab_harness::results::{read_frame, Row};
use contactlab_harness::runner::{run, RunOptions, RunSummary};
use contactlab_harness::sweep::{plan, Plan};
use contactlab_harness::testkit::G;

const TINY: &str = "\
name: tiny
description: a falling point, three timesteps, two seeds
scenes:
  - name: falling_point
    label: high
    height: 1.0
  - name: falling_point
    label: low
    height: 0.06
formulations:
  - name: falling_point
  - name: falling_point
    label: panicky
    panic_at: 0.01
sweep:
  timestep: [0.001, 0.002, 0.05]
  seed: [0, 1]
horizon: 0.2
reference: {kind: same_formulation, timestep: 0.0005}
";

fn plan_of(dir: &Path, text: &str) -> Plan {
    let file = dir.join("tiny.yaml");
    std::fs::write(&file, text).unwrap();
    let (cfg, text) = config::load(&file).unwrap();
    plan(&file, &text, cfg, &Catalog::with_testkit()).unwrap()
}

fn run_into(plan: &Plan, dir: &Path, stop_after: Option<usize>) -> RunSummary {
    let opts = RunOptions {
        dir: dir.to_path_buf(),
        jobs: 2,
        fresh: false,
        progress: false,
        stop_after,
        shard: None,
    };
    run(plan, &Catalog::with_testkit(), &opts).unwrap()
}

fn find<'a>(rows: &'a [Row], height: &str, label: &str, h: f64, seed: u64) -> &'a Row {
    rows.iter()
        .find(|r| {
            r.str("label") == label
                && r.f64("timestep_s") == h
                && r.u64("seed") == seed
                && r.str("scene_params")
                    .contains(&format!("\"height\":{height}"))
        })
        .unwrap_or_else(|| panic!("no row for {height} {label} {h} {seed}"))
}

#[test]
fn tiny_experiment_rows_statuses_and_closed_forms() {
    let tmp = tempfile::tempdir().unwrap();
    let p = plan_of(tmp.path(), TINY);
    assert_eq!(p.cells.len(), 2 * 2 * 3 * 2);
    let out = tmp.path().join("results/tiny");
    let s = run_into(&p, &out, None);
    assert_eq!((s.total, s.ran, s.resumed, s.remaining), (24, 24, 0, 0));
    assert!(s.outputs_error.is_none(), "{:?}", s.outputs_error);

    let rows = contactlab_harness::results::read_runs(&out).unwrap();
    assert_eq!(rows.len(), 24);
    // Every panicking cell is recorded as failed with its reason.
    for r in rows.iter().filter(|r| r.str("label") == "panicky") {
        assert_eq!(r.str("status"), "failed");
        assert!(r.str("reason").contains("panicked"), "{}", r.str("reason"));
    }
    // Free fall from 1 m: no contact within 0.2 s; error and energy drift have closed forms.
    let (h, h_ref, t) = (0.002, 0.0005, 0.2);
    let r = find(&rows, "1.0", "falling_point", h, 0);
    assert_eq!(r.str("status"), "ok");
    assert_eq!(r.u64("steps"), 100);
    let err_final = G * t * (h - h_ref) / 2.0;
    assert!(
        (r.f64("traj_error_final") - err_final).abs() < 1e-9,
        "{} vs {err_final}",
        r.f64("traj_error_final")
    );
    let err_mean = G * h * (h - h_ref) / 2.0 * (100.0 + 1.0) / 2.0;
    assert!((r.f64("traj_error_mean") - err_mean).abs() < 1e-9);
    let drift = -0.5 * G * G * h * t;
    assert!(
        (r.f64("energy_drift_j") - drift).abs() < 1e-9,
        "{} vs {drift}",
        r.f64("energy_drift_j")
    );
    assert_eq!(r.f64("max_penetration_m"), 0.0);
    assert_eq!(r.f64("iterations_mean"), 1.0);
    assert!(r.f64("reanchored_error_mean") >= 0.0);
    // Resting on a stiff spring: stable at 1 ms, diverges at 50 ms (h * omega = 5 > 2).
    let r = find(&rows, "0.06", "falling_point", 0.001, 1);
    assert_eq!(r.str("status"), "ok");
    assert!(r.f64("max_penetration_m") > 0.0);
    let r = find(&rows, "0.06", "falling_point", 0.05, 0);
    assert_eq!(r.str("status"), "diverged");
    assert!(!r.str("reason").is_empty());
    // Outputs.
    for f in [
        "runs.csv",
        "manifest.json",
        "config.resolved.yaml",
        "report.md",
    ] {
        assert!(out.join(f).exists(), "{f}");
    }
    assert!(out.join("figures/error_vs_timestep__high.png").exists());
    assert!(out.join("figures/error_vs_timestep__high.svg").exists());
    // The two entries of one scene keep their own figures and rows.
    assert!(out.join("figures/error_vs_timestep__low.png").exists());
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("Largest stable"));
}

#[test]
fn runs_parquet_reads_back_with_polars() {
    let tmp = tempfile::tempdir().unwrap();
    let p = plan_of(
        tmp.path(),
        &TINY.replace("timestep: [0.001, 0.002, 0.05]", "timestep: [0.01]"),
    );
    let out = tmp.path().join("r");
    run_into(&p, &out, None);
    let df = read_frame(&out.join("runs.parquet")).unwrap();
    assert_eq!(df.height(), 8);
    let status = df.column("status").unwrap().str().unwrap();
    assert!((0..status.len()).all(|i| matches!(status.get(i), Some("ok" | "diverged" | "failed"))));
    let pen = df.column("max_penetration_m").unwrap().f64().unwrap();
    assert_eq!(pen.len(), 8);
    assert!(df.column("wall_time_s").is_ok());
    assert!(df.column("seed").unwrap().u64().is_ok());
}

#[test]
fn interrupted_run_resumes_without_recomputing_finished_cells() {
    let tmp = tempfile::tempdir().unwrap();
    let p = plan_of(tmp.path(), TINY);
    let out = tmp.path().join("r");
    let opts = RunOptions {
        dir: out.clone(),
        jobs: 1,
        fresh: false,
        progress: false,
        stop_after: Some(5),
        shard: None,
    };
    let first = run(&p, &Catalog::with_testkit(), &opts).unwrap();
    assert_eq!(first.ran, 5);
    assert_eq!(first.remaining, 19);
    let files: Vec<_> = std::fs::read_dir(out.join("cells"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 5);
    let before: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();

    let second = run_into(&p, &out, None);
    assert_eq!((second.resumed, second.ran, second.remaining), (5, 19, 0));
    for (f, text) in files.iter().zip(&before) {
        assert_eq!(
            &std::fs::read_to_string(f).unwrap(),
            text,
            "{} was recomputed",
            f.display()
        );
    }
    assert_eq!(
        contactlab_harness::results::read_runs(&out).unwrap().len(),
        24
    );

    // --fresh starts over.
    let opts = RunOptions {
        dir: out.clone(),
        jobs: 2,
        fresh: true,
        progress: false,
        stop_after: None,
        shard: None,
    };
    let third = run(&p, &Catalog::with_testkit(), &opts).unwrap();
    assert_eq!((third.resumed, third.ran), (0, 24));
}

#[test]
fn per_step_logs_are_written_when_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let text = TINY
        .replace("timestep: [0.001, 0.002, 0.05]", "timestep: [0.01]")
        .replace("horizon: 0.2", "horizon: 0.2\nlog_steps: true");
    let p = plan_of(tmp.path(), &text);
    let out = tmp.path().join("r");
    run_into(&p, &out, None);
    let id = &p.cells[0].id;
    let df = read_frame(&out.join(format!("steps/{id}.parquet"))).unwrap();
    assert_eq!(df.height(), 21);
    let names: Vec<String> = df
        .get_column_names()
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        names,
        [
            "t",
            "qpos_0",
            "qvel_0",
            "n_contacts",
            "iterations",
            "best_iterate",
            "residual",
            "converged",
            "diverged"
        ]
    );
}

#[test]
fn a_seed_reaches_scenes_with_a_seed_parameter() {
    let tmp = tempfile::tempdir().unwrap();
    let p = plan_of(tmp.path(), TINY);
    assert!(p
        .cells
        .iter()
        .all(|c| c.scene_params["seed"].as_u64() == Some(c.seed)));
}

#[test]
fn the_scene_closed_form_values_are_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let p = plan_of(
        tmp.path(),
        &TINY.replace("timestep: [0.001, 0.002, 0.05]", "timestep: [0.01]"),
    );
    let out = tmp.path().join("r");
    run_into(&p, &out, None);
    let rows = contactlab_harness::results::read_runs(&out).unwrap();
    let r = find(&rows, "1.0", "falling_point", 0.01, 0);
    let a: serde_json::Value = serde_json::from_str(r.str("analytic")).unwrap();
    let impact = a["impact_time_s"][0].as_f64().unwrap();
    assert!((impact - (2.0 * 0.95 / G).sqrt()).abs() < 1e-12);
    assert!(std::fs::read_to_string(out.join("report.md"))
        .unwrap()
        .contains("impact_time_s"));
}

#[test]
fn a_trajectory_file_serves_as_reference() {
    use contactlab_harness::runner::rollout;
    let tmp = tempfile::tempdir().unwrap();
    let catalog = Catalog::with_testkit();
    let scene = catalog
        .build_scene("falling_point", &serde_json::json!({}))
        .unwrap();
    let mut f = catalog
        .build_formulation("falling_point", &serde_json::json!({}))
        .unwrap();
    let r = rollout(&scene, f.as_mut(), 0.0005, 0.2, None, true);
    r.log.unwrap().write(&tmp.path().join("ref.csv")).unwrap();
    let text = "name: traj\nscenes:\n  - name: falling_point\nformulations:\n  - name: falling_point\nsweep:\n  timestep: [0.002]\nhorizon: 0.2\nreference: {kind: trajectory, file: ref.csv}\n";
    let p = plan_of(tmp.path(), text);
    let out = tmp.path().join("r");
    run_into(&p, &out, None);
    let rows = contactlab_harness::results::read_runs(&out).unwrap();
    let expected = G * 0.2 * (0.002 - 0.0005) / 2.0;
    assert!(
        (rows[0].f64("traj_error_final") - expected).abs() < 1e-9,
        "{}",
        rows[0].f64("traj_error_final")
    );
}

/// A benchmark scene's task outcomes reach the rows and the report: the grasp holds the box at
/// its default friction and drops it at friction 0.05 (soft_convex, 2 ms), as the scene's own
/// test finds, now through `contactlab run`.
#[test]
fn grasp_task_outcomes_reach_rows_and_report() {
    let text = "\
name: grasp_task
scenes:
  - name: grasp
    label: grasp_default
  - name: grasp
    label: grasp_slippery
    friction: 0.05
formulations:
  - name: soft_convex
sweep:
  timestep: [0.002]
";
    let tmp = tempfile::tempdir().unwrap();
    let p = plan_of(tmp.path(), text);
    let out = tmp.path().join("results/grasp_task");
    run_into(&p, &out, None);
    let rows = contactlab_harness::results::read_runs(&out).unwrap();
    let held = |label: &str| {
        let r = rows.iter().find(|r| r.scene_label() == label).unwrap();
        assert_eq!(r.str("status"), "ok", "{}", r.str("reason"));
        let task: serde_json::Value = serde_json::from_str(r.str("task")).unwrap();
        task["held"].as_f64().unwrap()
    };
    assert_eq!(held("grasp_default"), 1.0);
    assert_eq!(held("grasp_slippery"), 0.0);
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("## Task outcomes"), "{report}");
    assert!(
        report.contains("| grasp_default | soft_convex | 0.002 | 1 / 1 |"),
        "{report}"
    );
    assert!(report.contains("| held |"), "{report}");
}
