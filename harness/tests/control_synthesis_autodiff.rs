//! The control-synthesis study with the `autodiff` method (issue 16): soft_convex's instances
//! run as one batch through the batched engine's reverse mode, beside ncp_fb's adjoint in the
//! same experiment; each formulation runs the methods it offers.
#![cfg(feature = "burn")]

mod common;
use common::{contactlab, stderr};

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
                assert!(r["gradient_norm_initial"].as_f64().unwrap() > 0.0);
            }
            other => panic!("unexpected cell {other:?}"),
        }
    }
}
