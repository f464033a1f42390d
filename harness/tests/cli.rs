//! The `contactlab` binary: bad experiment files (exit 2, one message naming file, line and
//! key, nothing in the results folder touched), `check`, `list`, `simulate`, `report`, `run`,
//! and a real kill-and-resume. Uses the test fakes (`CONTACTLAB_TESTKIT=1`).

mod common;
use common::{assert_bad, contactlab, spawn_contactlab, stderr, GOOD};

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[test]
fn bad_config_unknown_key() {
    assert_bad(&GOOD.replace("horizon: 0.2", "horizn: 0.2"), 9, &["horizn"]);
}

#[test]
fn bad_config_unknown_scene_parameter() {
    assert_bad(
        &GOOD.replace(
            "  - name: falling_point\nform",
            "  - name: falling_point\n    hieght: 1\nform",
        ),
        4,
        &["scenes[0].hieght", "unknown field"],
    );
}

#[test]
fn bad_config_wrong_type() {
    assert_bad(
        &GOOD.replace("horizon: 0.2", "horizon: soon"),
        9,
        &["horizon", "invalid type"],
    );
}

#[test]
fn bad_config_negative_timestep() {
    assert_bad(
        &GOOD.replace("[0.01, 0.02]", "[0.01, -0.02]"),
        7,
        &["sweep.timestep", "> 0"],
    );
}

#[test]
fn bad_config_zero_timestep() {
    assert_bad(
        &GOOD.replace("[0.01, 0.02]", "[0]"),
        7,
        &["sweep.timestep", "> 0"],
    );
}

#[test]
fn bad_config_unknown_scene_lists_valid_names() {
    assert_bad(
        &GOOD.replacen("- name: falling_point", "- name: box_slid", 1),
        3,
        &["scenes[0].name", "box_slid", "valid names", "falling_point"],
    );
}

#[test]
fn bad_config_unknown_formulation_lists_valid_names() {
    let text = GOOD.replace(
        "formulations:\n  - name: falling_point",
        "formulations:\n  - name: penalti",
    );
    assert_bad(
        &text,
        5,
        &[
            "formulations[0].name",
            "penalti",
            "valid names",
            "penalty",
            "falling_point",
        ],
    );
}

#[test]
fn bad_config_empty_sweep() {
    assert_bad(
        &GOOD.replace("seed: [0, 1]", "seed: []"),
        8,
        &["sweep.seed", "empty"],
    );
}

#[test]
fn bad_config_duplicate_labels() {
    let text = GOOD.replace(
        "formulations:\n  - name: falling_point\n",
        "formulations:\n  - name: falling_point\n    label: a\n  - name: falling_point\n    stiffness: 1.0e5\n    label: a\n",
    );
    assert_bad(&text, 9, &["formulations[1].label", "duplicate label 'a'"]);
}

/// Two entries of one scene without labels would share every table row and figure: an error
/// that names the second entry and asks for labels.
#[test]
fn bad_config_duplicate_scene_entries_need_labels() {
    let text = GOOD.replace(
        "scenes:\n  - name: falling_point\n",
        "scenes:\n  - name: falling_point\n  - name: falling_point\n    height: 0.5\n",
    );
    assert_bad(
        &text,
        4,
        &[
            "scenes[1]",
            "duplicate scene label 'falling_point'",
            "label",
        ],
    );
}

/// An empty label would merge entries just like a missing one.
#[test]
fn bad_config_empty_scene_label() {
    let text = GOOD.replace(
        "scenes:\n  - name: falling_point\n",
        "scenes:\n  - name: falling_point\n  - name: falling_point\n    label: \"\"\n",
    );
    assert_bad(&text, 5, &["scenes[1].label", "empty label"]);
}

#[test]
fn bad_config_horizon_shorter_than_one_step() {
    assert_bad(
        &GOOD.replace("horizon: 0.2", "horizon: 0.015"),
        9,
        &["horizon", "shorter than one step"],
    );
}

#[test]
fn bad_config_unreadable_file() {
    let tmp = tempfile::tempdir().unwrap();
    let o = contactlab(&["run", "missing.yaml"], tmp.path());
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("missing.yaml") && err.contains("cannot read"),
        "{err}"
    );
    assert!(!tmp.path().join("results").exists());
}

#[test]
fn check_prints_the_grid() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("good.yaml"), GOOD).unwrap();
    let o = contactlab(&["check", "good.yaml"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("4 cells"), "{out}");
    assert!(!tmp.path().join("results").exists(), "check runs nothing");
}

#[test]
fn list_shows_formulations_scenes_metrics_figures() {
    let o = contactlab(&["list"], Path::new("."));
    let out = String::from_utf8_lossy(&o.stdout);
    for n in [
        "FORMULATIONS",
        "penalty",
        "falling_point",
        "stiffness",
        "N/m",
        "SCENES",
        "METRICS",
        "max_penetration_m",
        "FIGURES",
        "error_vs_timestep",
    ] {
        assert!(out.contains(n), "{n} in {out}");
    }
}

#[test]
fn help_teaches_the_commands() {
    let o = contactlab(&["--help"], Path::new("."));
    let out = String::from_utf8_lossy(&o.stdout);
    for n in ["run", "check", "simulate", "report", "list", "quickstart"] {
        assert!(out.contains(n), "{n} in {out}");
    }
}

#[test]
fn simulate_writes_the_trajectory_columns() {
    let tmp = tempfile::tempdir().unwrap();
    let o = contactlab(
        &[
            "simulate",
            "--scene",
            "falling_point",
            "--scene-param",
            "height=2",
            "--formulation",
            "falling_point",
            "--param",
            "stiffness=1e5",
            "--timestep",
            "0.01",
            "--horizon",
            "0.1",
            "--out",
            "t.csv",
        ],
        tmp.path(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(tmp.path().join("t.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "t,qpos_0,qvel_0,n_contacts,iterations,best_iterate,residual,converged,diverged"
    );
    assert_eq!(lines.count(), 11);
    let p = contactlab(
        &[
            "simulate",
            "--scene",
            "falling_point",
            "--formulation",
            "falling_point",
            "--out",
            "t.parquet",
        ],
        tmp.path(),
    );
    assert!(p.status.success(), "{}", stderr(&p));
    let m = contactlab(
        &[
            "simulate",
            "--mjcf",
            "m.xml",
            "--formulation",
            "falling_point",
            "--out",
            "t.csv",
        ],
        tmp.path(),
    );
    // Exit 2 either way: before the MJCF loader is registered it says so; after, the loader
    // reports the missing file.
    assert_eq!(m.status.code(), Some(2), "{}", stderr(&m));
    assert!(
        stderr(&m).contains("MJCF loader") || stderr(&m).contains("m.xml"),
        "{}",
        stderr(&m)
    );
    let b = contactlab(
        &[
            "simulate",
            "--scene",
            "falling_point",
            "--formulation",
            "falling_point",
            "--param",
            "stifness=1",
            "--out",
            "t.csv",
        ],
        tmp.path(),
    );
    assert_eq!(b.status.code(), Some(2));
    assert!(stderr(&b).contains("stifness"));
}

#[test]
fn run_then_report_redraws_from_rows() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("good.yaml"), GOOD).unwrap();
    let o = contactlab(&["run", "good.yaml", "--jobs", "2"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = tmp.path().join("results/clitest");
    std::fs::remove_dir_all(dir.join("figures")).unwrap();
    std::fs::remove_file(dir.join("report.md")).unwrap();
    let r = contactlab(&["report", "results/clitest"], tmp.path());
    assert!(r.status.success(), "{}", stderr(&r));
    assert!(dir.join("report.md").exists());
    assert!(dir
        .join("figures/penetration_vs_timestep__falling_point.svg")
        .exists());
}

#[test]
fn killed_run_resumes_and_keeps_finished_cells() {
    let tmp = tempfile::tempdir().unwrap();
    // Slow cells: 0.1 ms steps over 20 s, 8 cells, one thread.
    let text = GOOD
        .replace("[0.01, 0.02]", "[0.0001, 0.0002]")
        .replace("seed: [0, 1]", "seed: [0, 1, 2, 3]")
        .replace("horizon: 0.2", "horizon: 20.0")
        .replace("reference: {kind: same_formulation, timestep: 0.005}\n", "");
    std::fs::write(tmp.path().join("slow.yaml"), text).unwrap();
    let cells: PathBuf = tmp.path().join("results/clitest/cells");
    let mut child = spawn_contactlab(&["run", "slow.yaml", "--jobs", "1"], tmp.path());
    let count = |d: &Path| {
        std::fs::read_dir(d)
            .map(|r| {
                r.filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .path()
                        .extension()
                        .is_some_and(|x| x == "json")
                })
                .count()
            })
            .unwrap_or(0)
    };
    let start = Instant::now();
    while count(&cells) < 2 && start.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let kept: Vec<(PathBuf, String)> = std::fs::read_dir(&cells)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let t = std::fs::read_to_string(&p).unwrap();
            (p, t)
        })
        .collect();
    assert!(kept.len() >= 2);
    let o = contactlab(&["run", "slow.yaml", "--jobs", "1"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains(&format!("{} resumed", kept.len())), "{out}");
    assert!(out.contains("8 cells"), "{out}");
    for (p, t) in kept {
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            t,
            "{} recomputed",
            p.display()
        );
    }
}

#[test]
fn ncp_fb_step_without_a_finite_newton_direction_is_reported_diverged_not_ok() {
    // Two identical joint couplings with zero compliance and no regularization: the 2 x 2
    // Schur complement is singular, so ncp_fb has no Newton direction on the first step. That
    // step must end the run as diverged with its reason (it once returned zero impulses and
    // the summary said "ok").
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("twice.xml"),
        r#"<mujoco model="twice">
  <worldbody>
    <body name="a">
      <joint name="slide_a" type="slide" axis="1 0 0"/>
      <geom type="box" size="0.1 0.1 0.1" mass="1" contype="0" conaffinity="0"/>
    </body>
    <body name="b" pos="1 0 0">
      <joint name="slide_b" type="slide" axis="1 0 0"/>
      <geom type="box" size="0.1 0.1 0.1" mass="1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <equality>
    <joint joint1="slide_a" joint2="slide_b"/>
    <joint joint1="slide_a" joint2="slide_b"/>
  </equality>
</mujoco>
"#,
    )
    .unwrap();
    let o = contactlab(
        &[
            "simulate",
            "--mjcf",
            "twice.xml",
            "--formulation",
            "ncp_fb",
            "--param",
            "compliance=0",
            "--param",
            "regularization=0",
            "--timestep",
            "0.001",
            "--horizon",
            "0.01",
            "--out",
            "t.csv",
        ],
        tmp.path(),
    );
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    println!("{out}");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        out.contains("1 steps (1 of them unconverged; the log's `converged` column says which), diverged: ncp_fb step failed at t = 0.000000 s: no finite Newton direction at iteration 1"),
        "{out}"
    );
    assert!(!out.contains("ok"), "{out}");
    let text = std::fs::read_to_string(tmp.path().join("t.csv")).unwrap();
    let last = text.lines().last().unwrap();
    assert!(
        last.ends_with(",0,1"),
        "iterations 0 .. converged 0, diverged 1: {last}"
    );
}
