//! The `contactlab` binary on unbounded input (issue #12): a device or FIFO as the experiment
//! file, a grid of a billion cells, runs of unbounded step counts, more threads than cores,
//! oversized terrain. Each is exit status 2 with one message naming the file, line and key, or
//! runs bounded. Uses the test fakes (`CONTACTLAB_TESTKIT=1`).

#![cfg(unix)]

mod common;
use common::{assert_bad, contactlab, stderr};

use std::path::Path;
use std::process::Command;

const GOOD: &str = "\
name: limits
scenes:
  - name: falling_point
formulations:
  - name: falling_point
sweep:
  timestep: [0.01]
horizon: 0.2
";

/// Regression: `/dev/zero` as the experiment file was read until memory ran out.
#[test]
fn config_that_is_dev_zero_is_refused() {
    let o = contactlab(&["check", "/dev/zero"], Path::new("."));
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("/dev/zero") && err.contains("character device"),
        "{err}"
    );
}

/// Regression: a FIFO as the experiment file blocked forever in `open`.
#[test]
fn config_that_is_a_fifo_is_refused_without_opening_it() {
    let tmp = tempfile::tempdir().unwrap();
    let st = Command::new("mkfifo")
        .arg(tmp.path().join("pipe.yaml"))
        .status()
        .unwrap();
    assert!(st.success());
    let o = contactlab(&["run", "pipe.yaml"], tmp.path());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("pipe.yaml") && err.contains("FIFO"), "{err}");
    assert!(!tmp.path().join("results").exists());
}

/// Regression: `check` expanded a 10^9-cell grid in memory before printing it.
#[test]
fn grid_of_a_billion_cells_is_refused_before_expansion() {
    let list = |f: &dyn Fn(usize) -> String| (1..=1000).map(f).collect::<Vec<_>>().join(", ");
    let text = format!(
        "name: limits\nscenes:\n  - name: falling_point\nformulations:\n  - name: falling_point\nsweep:\n  timestep: [{}]\n  seed: [{}]\n  scene.height: [{}]\nhorizon: 1\n",
        list(&|i| format!("{}", i as f64 * 1e-4)),
        list(&|i| i.to_string()),
        list(&|i| format!("{}", 1.0 + i as f64 * 1e-3)),
    );
    assert_bad(&text, 6, &["sweep", "1000000000 cells", "limit of 100000"]);
}

/// Regression: `timestep: 1e-300` ran (practically) forever.
#[test]
fn timestep_of_1e_300_exceeds_the_step_limit() {
    assert_bad(
        &GOOD.replace("[0.01]", "[1e-300]"),
        7,
        &["sweep.timestep", "limit of 10000000", "max_steps"],
    );
}

/// Regression: `horizon: 1e9` ran (practically) forever.
#[test]
fn horizon_of_1e9_exceeds_the_step_limit() {
    assert_bad(
        &GOOD.replace("horizon: 0.2", "horizon: 1e9"),
        8,
        &["horizon", "1.000e11 steps", "max_steps"],
    );
}

/// Regression: a reference timestep of 1e-12 ran (practically) forever.
#[test]
fn reference_timestep_of_1e_12_exceeds_the_step_limit() {
    assert_bad(
        &format!("{GOOD}reference:\n  kind: same_formulation\n  timestep: 1e-12\n"),
        11,
        &["reference.timestep", "2.000e11 steps", "max_steps"],
    );
}

#[test]
fn max_steps_raises_the_step_limit_explicitly() {
    let tmp = tempfile::tempdir().unwrap();
    // 2e7 steps: over the default limit, within the raised one (`check` runs nothing).
    let text = GOOD.replace("[0.01]", "[1e-8]");
    std::fs::write(
        tmp.path().join("a.yaml"),
        format!("{text}max_steps: 30000000\n"),
    )
    .unwrap();
    let o = contactlab(&["check", "a.yaml"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::write(tmp.path().join("b.yaml"), format!("{text}max_steps: 0\n")).unwrap();
    let o = contactlab(&["check", "b.yaml"], tmp.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("b.yaml:9:") && stderr(&o).contains("max_steps"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn simulate_refuses_an_unbounded_step_count() {
    let tmp = tempfile::tempdir().unwrap();
    let base = [
        "simulate",
        "--scene",
        "falling_point",
        "--formulation",
        "falling_point",
        "--out",
        "t.csv",
    ];
    for (extra, needle) in [
        (vec!["--timestep", "1e-300"], "--max-steps"),
        (vec!["--horizon", "1e9"], "--max-steps"),
        (vec!["--timestep", "NaN"], "--timestep NaN"),
        (vec!["--horizon", "inf"], "--horizon inf"),
    ] {
        let args: Vec<&str> = base.iter().copied().chain(extra.iter().copied()).collect();
        let o = contactlab(&args, tmp.path());
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{extra:?}: {}", stderr(&o));
    }
    assert!(!tmp.path().join("t.csv").exists());
}

/// Regression: `jobs: 100000` and `--jobs 1000000` started that many threads. Now clamped to
/// the cores, with a note.
#[test]
fn jobs_beyond_the_cores_are_clamped_with_a_note() {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("j.yaml"), format!("{GOOD}jobs: 100000\n")).unwrap();
    for args in [
        vec!["run", "j.yaml"],
        vec!["run", "j.yaml", "--fresh", "--jobs", "1000000"],
    ] {
        let o = contactlab(&args, tmp.path());
        let err = stderr(&o);
        assert!(o.status.success(), "{args:?}: {err}");
        let n = if args.len() > 2 { "1000000" } else { "100000" };
        assert!(
            err.contains(&format!("note: jobs = {n} is more than this machine's {cores} cores; running {cores} threads")),
            "{args:?}: {err}"
        );
    }
    let o = contactlab(&["run", "j.yaml", "--jobs", "0"], tmp.path());
    assert_eq!(o.status.code(), Some(2));
}

/// Regression: mesh_terrain `grid: 100000` asked for 80 GB; `layers: 1000000000` likewise.
#[test]
fn mesh_terrain_beyond_its_limits_names_the_key() {
    let text = "name: limits\nscenes:\n  - name: mesh_terrain\n    grid: 100000\nformulations:\n  - name: falling_point\n";
    assert_bad(text, 4, &["scenes[0].grid", "limit of 262144"]);
    let text = "name: limits\nscenes:\n  - name: mesh_terrain\n    layers: 1000000000\nformulations:\n  - name: falling_point\n";
    assert_bad(text, 4, &["scenes[0].layers", "limit of 64"]);
}

/// Regression: an `mjcf` scene whose model file is a FIFO blocked forever.
#[test]
fn mjcf_model_that_is_a_fifo_names_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let st = Command::new("mkfifo")
        .arg(tmp.path().join("m.xml"))
        .status()
        .unwrap();
    assert!(st.success());
    let text = format!(
        "name: limits\nscenes:\n  - name: mjcf\n    file: {}\nformulations:\n  - name: falling_point\n",
        tmp.path().join("m.xml").display()
    );
    assert_bad(&text, 3, &["m.xml", "FIFO"]);
}
