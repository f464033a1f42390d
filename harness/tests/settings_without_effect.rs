//! Settings and model features that would have no effect are never a quiet "ok":
//! * a formulation parameter that acts only under another setting, given while that setting is
//!   off, is a config error naming the key (exit 2);
//! * model features a formulation does not model are in the row (`ignored_features`), in
//!   report.md (one section per scene and formulation) and in `simulate`'s summary line.

use contactlab_harness::catalog::Catalog;
use contactlab_harness::config;
use contactlab_harness::results::read_runs;
use contactlab_harness::runner::{run, RunOptions};
use contactlab_harness::sweep::plan;

mod common;
use common::contactlab_builtin as contactlab;

/// Two hinged links joined by a connect equality (penalty does not model equalities; the
/// others do), the first hinge with friction loss (ncp_fb does not model it).
const LINKS: &str = r#"<mujoco model="links">
  <worldbody>
    <body name="a" pos="0 0 1">
      <joint name="ja" type="hinge" axis="0 1 0" frictionloss="0.1"/>
      <geom name="ga" type="capsule" fromto="0 0 0 0.5 0 0" size="0.05" contype="0" conaffinity="0"/>
    </body>
    <body name="b" pos="1 0 1">
      <joint name="jb" type="hinge" axis="0 1 0"/>
      <geom name="gb" type="capsule" fromto="0 0 0 -0.5 0 0" size="0.05" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <equality>
    <connect name="tie" body1="a" body2="b" anchor="0.5 0 0"/>
  </equality>
</mujoco>
"#;

const PENALTY_IGNORES: &str = "equality: 1 equality constraint ('tie') of kinds connect: not modelled, the model is stepped without them";
const NCP_FB_IGNORES: &str =
    "frictionloss: joint friction loss on 1 joint ('ja'): not modelled, the joints move without it";

#[test]
fn ignored_features_are_in_the_rows_and_the_report() {
    let tmp = tempfile::tempdir().unwrap();
    let xml = tmp.path().join("links.xml");
    std::fs::write(&xml, LINKS).unwrap();
    let yaml = format!(
        "name: ignored\nscenes:\n  - name: mjcf\n    file: {}\n    horizon: 0.01\nformulations:\n  - name: soft_convex\n  - name: penalty\n  - name: ncp_fb\nsweep:\n  timestep: [0.005]\nhorizon: 0.01\n",
        xml.display()
    );
    let file = tmp.path().join("ignored.yaml");
    std::fs::write(&file, &yaml).unwrap();
    let (cfg, text) = config::load(&file).unwrap();
    let catalog = Catalog::builtin();
    let p = plan(&file, &text, cfg, &catalog).unwrap();
    let out = tmp.path().join("results/ignored");
    let opts = RunOptions {
        dir: out.clone(),
        jobs: 1,
        fresh: false,
        progress: false,
        stop_after: None,
        shard: None,
    };
    let s = run(&p, &catalog, &opts).unwrap();
    assert_eq!((s.total, s.failed), (3, 0), "{s:?}");
    let rows = read_runs(&out).unwrap();
    let ignored = |f: &str| {
        rows.iter()
            .find(|r| r.str("formulation") == f)
            .unwrap()
            .str("ignored_features")
            .to_string()
    };
    assert_eq!(ignored("soft_convex"), "");
    assert_eq!(ignored("penalty"), PENALTY_IGNORES);
    assert_eq!(ignored("ncp_fb"), NCP_FB_IGNORES);
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    let section = report
        .split("## Model features the formulations ignore")
        .nth(1)
        .unwrap_or_else(|| panic!("no section in\n{report}"));
    let section = section.split("\n## ").next().unwrap();
    let lines: Vec<&str> = section
        .lines()
        .filter(|l| l.starts_with("| mjcf"))
        .collect();
    assert_eq!(
        lines,
        [
            format!("| mjcf | ncp_fb | {NCP_FB_IGNORES} |"),
            format!("| mjcf | penalty | {PENALTY_IGNORES} |"),
        ],
        "{section}"
    );
}

#[test]
fn simulate_summary_names_the_ignored_features() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("links.xml"), LINKS).unwrap();
    let args = |f: &'static str| {
        [
            "simulate",
            "--mjcf",
            "links.xml",
            "--formulation",
            f,
            "--timestep",
            "0.005",
            "--horizon",
            "0.01",
            "--out",
            "t.csv",
        ]
    };
    let o = contactlab(&args("penalty"), tmp.path());
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        stdout.trim_end(),
        format!("t.csv: 2 steps, ok; ignored features: {PENALTY_IGNORES}")
    );
    let o = contactlab(&args("soft_convex"), tmp.path());
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim_end(),
        "t.csv: 2 steps, ok"
    );
    // The column is defined among `list`'s metrics.
    let list = contactlab(&["list"], tmp.path());
    let text = String::from_utf8_lossy(&list.stdout).to_string();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("ignored_features "))
        .unwrap_or_else(|| panic!("no ignored_features in\n{text}"));
    assert!(line.contains("steps this scene without"), "{line}");
}

/// `contactlab check` on an experiment whose one formulation entry is `entry` (YAML lines):
/// exit 2 and the message names the key at its line.
fn assert_key_error(entry: &str, key: &str, line: usize) {
    let tmp = tempfile::tempdir().unwrap();
    let yaml = format!(
        "name: bad\nscenes:\n  - name: box_slide\nformulations:\n{entry}sweep:\n  timestep: [0.01]\nhorizon: 0.02\n"
    );
    std::fs::write(tmp.path().join("bad.yaml"), yaml).unwrap();
    let o = contactlab(&["check", "bad.yaml"], tmp.path());
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("bad.yaml:{line}:")),
        "line {line}: {err}"
    );
    assert!(
        err.contains(&format!("formulations[0].{key}")),
        "{key}: {err}"
    );
    assert!(err.contains("acts only with"), "{err}");
}

#[test]
fn parameters_without_effect_are_config_errors_naming_the_key() {
    assert_key_error(
        "  - name: ncp_fb\n    pcr_iterations: 8\n",
        "pcr_iterations",
        6,
    );
    assert_key_error(
        "  - name: ncp_fb\n    linear_solver: dense\n    preconditioner: jacobi\n",
        "preconditioner",
        7,
    );
    assert_key_error(
        "  - name: ncp_fb\n    pcr_tolerance: 1.0e-6\n",
        "pcr_tolerance",
        6,
    );
    assert_key_error(
        "  - name: penalty\n    friction_smoothing: 0.1\n",
        "friction_smoothing",
        6,
    );
    assert_key_error(
        "  - name: soft_convex\n    physical_contact: false\n    ke: 1.0e5\n",
        "ke",
        7,
    );
}
