//! The `contactlab` binary finds the repository's cube toss data at run time, never through a
//! path fixed at build time: from the repository root (`data/cube_toss` under the working
//! directory, the README's way), from any folder through `CONTACTLAB_DATA`, and otherwise it
//! stops with exit status 2 and an error naming the path tried.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// 1/148 s, the recording's sampling interval, as the shortest decimal that round-trips.
const H: &str = "0.006756756756756757";
/// Two sampling intervals (s).
const TWO_SAMPLES: &str = "0.013513513513513514";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

/// Run the binary in `cwd` with `CONTACTLAB_DATA` set to `data` (or removed when `None`).
fn contactlab(args: &[&str], cwd: &Path, data: Option<&Path>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_contactlab"));
    c.args(args).current_dir(cwd);
    match data {
        Some(d) => c.env("CONTACTLAB_DATA", d),
        None => c.env_remove("CONTACTLAB_DATA"),
    };
    c.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// `simulate` one toss (toss_001, soft_convex, two samples) with its output in `out`.
fn simulate_toss(cwd: &Path, data: Option<&Path>, out: &Path) -> Output {
    let file = out.display().to_string();
    contactlab(
        &[
            "simulate",
            "--scene",
            "cube_toss",
            "--scene-param",
            "toss=1",
            "--formulation",
            "soft_convex",
            "--timestep",
            H,
            "--horizon",
            TWO_SAMPLES,
            "--out",
            &file,
        ],
        cwd,
        data,
    )
}

/// The simulated trajectory starts at toss_001's first recorded sample: the position as
/// recorded, the quaternion normalized, and its second row is one step later.
fn assert_starts_at_toss_001(csv: &Path) {
    let rec = std::fs::read_to_string(repo().join("data/cube_toss/toss_001.csv")).unwrap();
    let first: Vec<f64> = rec
        .lines()
        .nth(1)
        .unwrap()
        .split(',')
        .map(|x| x.parse().unwrap())
        .collect();
    let sim = std::fs::read_to_string(csv).unwrap();
    let mut lines = sim.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let row0: Vec<f64> = lines
        .next()
        .unwrap()
        .split(',')
        .map(|x| x.parse().unwrap())
        .collect();
    let row1: Vec<f64> = lines
        .next()
        .unwrap()
        .split(',')
        .map(|x| x.parse().unwrap())
        .collect();
    let norm = first[4..8].iter().map(|x| x * x).sum::<f64>().sqrt();
    for k in 0..3 {
        let (got, want) = (row0[col(&format!("qpos_{k}"))], first[1 + k]);
        assert!((got - want).abs() < 1e-12, "qpos_{k}: {got} against {want}");
    }
    for k in 0..4 {
        let (got, want) = (row0[col(&format!("qpos_{}", 3 + k))], first[4 + k] / norm);
        assert!(
            (got - want).abs() < 1e-12,
            "qpos_{}: {got} against {want}",
            3 + k
        );
    }
    assert_eq!(row0[col("t")], 0.0);
    assert!(
        (row1[col("t")] - 1.0 / 148.0).abs() < 1e-12,
        "{}",
        row1[col("t")]
    );
}

/// The README runs from the repository root, with nothing set: `data/cube_toss` is found
/// under the working directory.
#[test]
fn cube_toss_finds_data_under_the_working_directory_without_a_build_time_path() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("toss.csv");
    let o = simulate_toss(&repo(), None, &out);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_starts_at_toss_001(&out);
}

/// From any other folder, CONTACTLAB_DATA names the data root (absolute or relative to the
/// working directory).
#[test]
fn cube_toss_finds_data_through_contactlab_data_from_another_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("toss.csv");
    let o = simulate_toss(tmp.path(), Some(&repo().join("data")), &out);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_starts_at_toss_001(&out);

    let rel = tmp.path().join("rel.csv");
    let o = simulate_toss(&repo().join("configs"), Some(Path::new("../data")), &rel);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_starts_at_toss_001(&rel);
}

/// Elsewhere with nothing set, or with CONTACTLAB_DATA pointing nowhere: exit 2, one message
/// naming the path tried and the variable, and no output file.
#[test]
fn cube_toss_without_data_is_exit_2_naming_the_path_tried() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path().canonicalize().unwrap();
    let out = cwd.join("toss.csv");

    let o = simulate_toss(&cwd, None, &out);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "one message: {err}");
    let tried = cwd.join("data").join("cube_toss");
    assert!(err.contains(&tried.display().to_string()), "{err}");
    assert!(err.contains("CONTACTLAB_DATA is not set"), "{err}");
    assert!(!out.exists());

    let nowhere = cwd.join("nowhere");
    let o = simulate_toss(&cwd, Some(&nowhere), &out);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&nowhere.join("cube_toss").display().to_string()),
        "{err}"
    );
    assert!(err.contains("CONTACTLAB_DATA="), "{err}");
    assert!(!out.exists());
}

/// `check configs/cube_toss.yaml` from the repository root expands `toss: all` into the 450
/// tosses of `data/cube_toss`; from an empty folder the same file fails on its scene entry
/// (file, line 11, key scenes[0]) and names the path tried.
#[test]
fn cube_toss_config_plans_from_the_repository_root_and_names_its_line_elsewhere() {
    let o = contactlab(&["check", "configs/cube_toss.yaml"], &repo(), None);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{}", stderr(&o));
    // 450 tosses x 5 formulations x 2 timesteps.
    assert!(out.contains("4500"), "{out}");

    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path().canonicalize().unwrap();
    let file = repo().join("configs/cube_toss.yaml").display().to_string();
    let o = contactlab(&["check", &file], &cwd, None);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("cube_toss.yaml:11:"), "{err}");
    assert!(err.contains("scenes[0]"), "{err}");
    assert!(
        err.contains(&cwd.join("data").join("cube_toss").display().to_string()),
        "{err}"
    );
}
