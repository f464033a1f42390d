//! `engine` and `worlds` as cell fields and sweep axes (issue 15): default cells keep their ids
//! (today's results stay found), the axes multiply the grid, and a cell an engine cannot run
//! is a `skipped` row naming what it lacks while the rest of the experiment runs.

use std::path::Path;

use contactlab_harness::catalog::Catalog;
use contactlab_harness::config;
use contactlab_harness::runner::{run, RunOptions};
use contactlab_harness::sweep::{plan, Plan};

fn plan_of(dir: &Path, text: &str) -> Plan {
    let file = dir.join("e.yaml");
    std::fs::write(&file, text).unwrap();
    let (cfg, text) = config::load(&file).unwrap();
    plan(&file, &text, cfg, &Catalog::builtin()).unwrap()
}

const BASE: &str = "\
name: engines
scenes:
  - name: box_drop
formulations:
  - name: penalty
  - name: soft_convex
sweep:
  timestep: [0.002]
horizon: 0.05
";

/// The ids of cpu, one-world cells are those main computed before engines were fields (from
/// `contactlab check` at def2dbe): earlier results are still found and not rerun.
#[test]
fn default_cells_keep_their_ids() {
    let tmp = tempfile::tempdir().unwrap();
    let p = plan_of(tmp.path(), BASE);
    let ids: Vec<&str> = p.cells.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids.len(), 2);
    let explicit = plan_of(
        tmp.path(),
        &BASE.replace("horizon: 0.05\n", "horizon: 0.05\nengine: cpu\nworlds: 1\n"),
    );
    let same: Vec<&str> = explicit.cells.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, same);
    for c in &p.cells {
        assert_eq!((c.engine.as_str(), c.worlds), ("cpu", 1));
    }
}

#[test]
fn engine_and_worlds_are_sweep_axes_in_the_id() {
    let tmp = tempfile::tempdir().unwrap();
    let text = BASE.replace(
        "  timestep: [0.002]\n",
        "  timestep: [0.002]\n  engine: [cpu, burn-ndarray]\n  worlds: [1, 4]\n",
    );
    let p = plan_of(tmp.path(), &text);
    assert_eq!(p.cells.len(), 2 * 2 * 2);
    let mut ids: Vec<&str> = p.cells.iter().map(|c| c.id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 8, "every (engine, worlds) cell has its own id");
    let c = p
        .cells
        .iter()
        .find(|c| c.engine == "burn-ndarray" && c.worlds == 4)
        .unwrap();
    assert_eq!(c.sweep["engine"], "burn-ndarray");
    assert_eq!(c.sweep["worlds"], 4);
    // Bad values name the key.
    let file = tmp.path().join("bad.yaml");
    for (axis, needle) in [
        ("engine: [gpu]", "unknown engine 'gpu'"),
        ("worlds: [0]", "worlds must be integers from 1 to 65536"),
    ] {
        let bad = BASE.replace(
            "  timestep: [0.002]\n",
            &format!("  timestep: [0.002]\n  {axis}\n"),
        );
        std::fs::write(&file, &bad).unwrap();
        let (cfg, text) = config::load(&file).unwrap();
        let e = plan(&file, &text, cfg, &Catalog::builtin()).unwrap_err();
        let key = format!("sweep.{}", axis.split(':').next().unwrap());
        assert_eq!(e.key, key);
        assert!(e.message.contains(needle), "{e}");
        assert_eq!(e.line, Some(9), "{e}");
    }
}

/// ncp_fb with `friction_residual: dissipation_weight` on a batched engine (whose ncp_fb has
/// the natural map only) is skipped with the reason; the cpu cells and the batched penalty run (or, in a build without
/// `burn`, are skipped naming the feature); worlds > 1 on the cpu engine count every world in
/// `steps_per_s`.
#[test]
fn cells_an_engine_cannot_run_are_skipped_rows_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let text = BASE
        .replace(
            "  timestep: [0.002]\n",
            "  timestep: [0.002]\n  engine: [cpu, burn-ndarray]\n  worlds: [1, 3]\n",
        )
        .replace(
            "  - name: soft_convex\n",
            "  - name: ncp_fb\n    friction_residual: dissipation_weight\n",
        );
    let p = plan_of(tmp.path(), &text);
    let out = tmp.path().join("results");
    let opts = RunOptions {
        dir: out.clone(),
        jobs: 2,
        fresh: false,
        progress: false,
        stop_after: None,
        shard: None,
    };
    let s = run(&p, &Catalog::builtin(), &opts).unwrap();
    assert!(s.outputs_error.is_none(), "{:?}", s.outputs_error);
    let rows = contactlab_harness::results::read_runs(&out).unwrap();
    assert_eq!(rows.len(), 8);
    let burn = cfg!(feature = "burn");
    for r in &rows {
        let (engine, formulation) = (r.str("engine"), r.str("formulation"));
        let status = r.str("status");
        match (engine, formulation) {
            ("cpu", _) => assert_eq!(status, "ok", "{}", r.str("reason")),
            ("burn-ndarray", "ncp_fb") if burn => {
                assert_eq!(status, "skipped");
                assert!(
                    r.str("reason")
                        .contains("friction_residual: dissipation_weight"),
                    "{}",
                    r.str("reason")
                );
            }
            ("burn-ndarray", "penalty") if burn => assert_eq!(status, "ok", "{}", r.str("reason")),
            ("burn-ndarray", _) => {
                assert_eq!(status, "skipped");
                assert!(
                    r.str("reason").contains("--features burn"),
                    "{}",
                    r.str("reason")
                );
            }
            other => panic!("unexpected row {other:?}"),
        }
    }
    assert_eq!(s.skipped, if burn { 2 } else { 4 });
    // A skipped cell does not make the scene's timestep unstable for the cpu series.
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("skipped (their engine cannot run them"),
        "{report}"
    );
    // Three cpu worlds: the same world-0 trajectory as one, three times the world-steps.
    let one = rows
        .iter()
        .find(|r| {
            r.str("engine") == "cpu" && r.u64("worlds") == 1 && r.str("formulation") == "penalty"
        })
        .unwrap();
    let three = rows
        .iter()
        .find(|r| {
            r.str("engine") == "cpu" && r.u64("worlds") == 3 && r.str("formulation") == "penalty"
        })
        .unwrap();
    assert_eq!(one.f64("max_penetration_m"), three.f64("max_penetration_m"));
    assert_eq!(one.u64("steps"), three.u64("steps"));
}
