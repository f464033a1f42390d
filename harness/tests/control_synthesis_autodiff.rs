//! The control-synthesis study with the `autodiff` method (issue 16): soft_convex's instances
//! run as one batch through the batched engine's reverse mode, beside ncp_fb's adjoint in the
//! same experiment; each formulation runs the methods it offers.
#![cfg(feature = "burn")]

mod common;

use ciborium::Value;
use common::{contactlab, spawn_contactlab, stderr};

const TINY: &str = "\
name: clitest
study:
  kind: control_synthesis
  instances: 2
  methods: [adjoint, autodiff]
  iterations: 2
  step_size: 0.02
scenes:
  - name: box_traversal
    obstacle_x: 50.0
    horizon: 3.0
    target: [1.6, 0.3]
formulations:
  - name: ncp_fb
  - name: soft_convex
    integrator: implicitfast
sweep:
  timestep: [0.05]
";

#[test]
fn autodiff_instances_run_as_one_batch_beside_the_adjoint() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("tiny.yaml"), TINY).unwrap();
    let o = contactlab(&["run", "tiny.yaml", "--jobs", "2"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = tmp.path().join("results/clitest");
    let rows: Vec<serde_json::Value> = std::fs::read_dir(dir.join("cells"))
        .unwrap()
        .map(|e| {
            serde_json::from_str(&std::fs::read_to_string(e.unwrap().path()).unwrap()).unwrap()
        })
        .collect();
    assert_eq!(
        rows.len(),
        4,
        "ncp_fb × adjoint and soft_convex × autodiff, 2 instances each"
    );
    for r in &rows {
        let (f, m) = (
            r["formulation"].as_str().unwrap(),
            r["method"].as_str().unwrap(),
        );
        assert_eq!(r["status"], "ok", "{f} {m}: {}", r["reason"]);
        let curve: Vec<f64> = serde_json::from_str(r["loss_curve"].as_str().unwrap()).unwrap();
        assert!(
            !curve.is_empty() && curve.iter().all(|l| l.is_finite()),
            "{curve:?}"
        );
        match (f, m) {
            ("ncp_fb", "adjoint") => assert_eq!(r["batch_worlds"], 0),
            ("soft_convex", "autodiff") => {
                assert_eq!(r["batch_worlds"], 2);
                assert_eq!(r["batch_resumed_at"], 0);
                assert!(r["gradient_norm_initial"].as_f64().unwrap() > 0.0);
            }
            other => panic!("unexpected cell {other:?}"),
        }
    }
    // The batch's stored progress is gone once its cells hold the result.
    let left = std::fs::read_dir(dir.join("progress")).map_or(0, |d| d.count());
    assert_eq!(left, 0, "progress files left after the batch");
}

/// The curves and knots that determine an autodiff row, by seed.
fn autodiff_results(dir: &std::path::Path) -> Vec<(u64, String, String, String)> {
    let mut out: Vec<(u64, String, String, String)> = std::fs::read_dir(dir.join("cells"))
        .unwrap()
        .map(|e| {
            let r: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(e.unwrap().path()).unwrap()).unwrap();
            r
        })
        .filter(|r| r["method"] == "autodiff")
        .map(|r| {
            (
                r["seed"].as_u64().unwrap(),
                r["loss_curve"].as_str().unwrap().to_string(),
                r["objective_curve"].as_str().unwrap().to_string(),
                format!("{} {}", r["final_loss_m2"], r["gradient_norm_final"]),
            )
        })
        .collect();
    out.sort();
    out
}

/// A run killed in the middle of an autodiff batch resumes the batch from its last finished
/// iteration (its stored progress) and ends with the rows of an uninterrupted run.
#[test]
fn an_interrupted_batch_resumes_from_its_last_iteration() {
    let config = TINY
        .replace("methods: [adjoint, autodiff]", "methods: [autodiff]")
        .replace("  - name: ncp_fb\n", "");
    let whole = tempfile::tempdir().unwrap();
    std::fs::write(whole.path().join("tiny.yaml"), &config).unwrap();
    let o = contactlab(&["run", "tiny.yaml", "--jobs", "2"], whole.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let expected = autodiff_results(&whole.path().join("results/clitest"));
    assert_eq!(expected.len(), 2);

    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("tiny.yaml"), &config).unwrap();
    let progress = tmp.path().join("results/clitest/progress");
    let mut child = spawn_contactlab(&["run", "tiny.yaml", "--jobs", "2"], tmp.path());
    // Kill the run as soon as the batch has stored its first iteration.
    let stored = loop {
        let n = std::fs::read_dir(&progress).map_or(0, |d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".cbor"))
                .count()
        });
        if n > 0 {
            child.kill().unwrap();
            break true;
        }
        if child.try_wait().unwrap().is_some() {
            break false;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    child.wait().unwrap();
    assert!(stored, "the run ended before storing any progress");
    let saved: Vec<(std::ffi::OsString, Vec<u8>)> = std::fs::read_dir(&progress)
        .unwrap()
        .flatten()
        .map(|e| (e.file_name(), std::fs::read(e.path()).unwrap()))
        .collect();
    assert_eq!(
        std::fs::read_dir(tmp.path().join("results/clitest/cells")).map_or(0, |d| d.count()),
        0,
        "the batch wrote cells before it ended"
    );
    let o = contactlab(&["run", "tiny.yaml", "--jobs", "2"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("resuming at iteration"),
        "{}",
        stderr(&o)
    );
    let dir = tmp.path().join("results/clitest");
    assert_eq!(autodiff_results(&dir), expected);
    for e in std::fs::read_dir(dir.join("cells")).unwrap() {
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(e.unwrap().path()).unwrap()).unwrap();
        assert!(r["batch_resumed_at"].as_u64().unwrap() >= 1, "{r}");
    }
    assert_eq!(std::fs::read_dir(&progress).map_or(0, |d| d.count()), 0);

    // The same progress as another build stored it, or edited so that it no longer fits the
    // batch: said, never applied, never a failed row; the batch starts over and ends as the
    // uninterrupted run.
    let cases: [(&str, &dyn Fn(&mut Vec<(Value, Value)>)); 2] = [
        ("another build", &|m| {
            set(m, "build", Value::Text("another binary".into()))
        }),
        ("does not fit it", &|m| {
            let Some((_, Value::Map(p))) =
                m.iter_mut().find(|(k, _)| k.as_text() == Some("progress"))
            else {
                panic!("no progress in the stored file")
            };
            set(p, "next_iteration", Value::Integer(99.into()));
        }),
    ];
    for (said, edit) in cases {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("tiny.yaml"), &config).unwrap();
        let progress = tmp.path().join("results/clitest/progress");
        std::fs::create_dir_all(&progress).unwrap();
        for (name, bytes) in &saved {
            let mut v: Value = ciborium::from_reader(bytes.as_slice()).unwrap();
            let Value::Map(m) = &mut v else {
                panic!("not a map")
            };
            edit(m);
            let mut out = Vec::new();
            ciborium::into_writer(&v, &mut out).unwrap();
            std::fs::write(progress.join(name), out).unwrap();
        }
        let o = contactlab(&["run", "tiny.yaml", "--jobs", "2"], tmp.path());
        assert!(o.status.success(), "{}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains(said) && err.contains("the batch starts over"),
            "{said}: {err}"
        );
        assert!(!err.contains("resuming at iteration"), "{err}");
        assert_eq!(
            autodiff_results(&tmp.path().join("results/clitest")),
            expected,
            "{said}"
        );
    }
}

/// Set `key` of a CBOR map to `value`.
fn set(m: &mut [(Value, Value)], key: &str, value: Value) {
    let (_, v) = m
        .iter_mut()
        .find(|(k, _)| k.as_text() == Some(key))
        .unwrap_or_else(|| panic!("no {key}"));
    *v = value;
}
