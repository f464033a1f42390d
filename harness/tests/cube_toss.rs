//! The `cube_toss` scene against its `recorded` reference: the metric on a hand-made recording
//! with a closed-form answer, and a real toss simulated with soft_convex.

use contactlab_harness::catalog::Catalog;
use contactlab_harness::config;
use contactlab_harness::results::read_runs;
use contactlab_harness::runner::{recorded_toss, rollout, run, RunOptions};
use contactlab_harness::sweep::plan;
use contactlab_scenarios::benchmark::cube_toss::{CUBE_EDGE_M, SAMPLE_DT_S};
use contactlab_solvers::formulation::{Formulation, FormulationEntry};
use contactlab_solvers::{Model, State, StepReport};

/// A formulation that leaves the state where it is (only time advances): the simulated cube
/// stays at its initial pose, so its error against a recording is the recording's own motion.
struct Frozen;

impl Formulation for Frozen {
    fn name(&self) -> &'static str {
        "frozen"
    }
    fn step(&mut self, _: &Model, state: &mut State, _: &[f64], h: f64) -> StepReport {
        state.t += h;
        StepReport::explicit(Vec::new())
    }
}

static FROZEN: FormulationEntry = FormulationEntry {
    name: "frozen",
    description: "test: the state never moves",
    params: &[],
    build: |_| Ok(Box::new(Frozen) as Box<dyn Formulation>),
};

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("contactlab_{name}_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Two samples: at rest at 0.5 m, then 1/148 s later moved 0.0262 m along x (25 % of the
/// width) and turned 30 degrees about z. A frozen cube's error, averaged over the recorded
/// samples after the first (one sample), is exactly 25 % and 30 degrees, whatever the
/// substeps; comparing at every substep by interpolation would give less (13.75 % at 10).
#[test]
fn recorded_metric_on_a_two_sample_toss_has_the_closed_form_answer() {
    let dir = tmp("toss_metric");
    let tosses = dir.join("tosses");
    std::fs::create_dir_all(&tosses).unwrap();
    let (c, s) = (15f64.to_radians().cos(), 15f64.to_radians().sin());
    std::fs::write(
        tosses.join("toss_001.csv"),
        format!(
            "t,px,py,pz,qw,qx,qy,qz,vx,vy,vz,wx,wy,wz\n\
             0,0,0,0.5,1,0,0,0,0,0,0,0,0,0\n\
             {SAMPLE_DT_S},{},0,0.5,{c},0,0,{s},0,0,0,0,0,0\n",
            0.25 * CUBE_EDGE_M
        ),
    )
    .unwrap();
    let file = dir.join("toss.yaml");
    std::fs::write(
        &file,
        format!(
            "name: toss_metric\nscenes:\n  - name: cube_toss\n    dir: {}\n    toss: all\n\
             formulations:\n  - name: frozen\n\
             sweep:\n  timestep: [{SAMPLE_DT_S}, {}]\nreference: {{kind: recorded}}\n",
            tosses.display(),
            SAMPLE_DT_S / 10.0
        ),
    )
    .unwrap();
    let (cfg, text) = config::load(&file).unwrap();
    let mut catalog = Catalog::builtin();
    catalog.formulations.push(&FROZEN);
    let p = plan(&file, &text, cfg, &catalog).unwrap();
    assert_eq!(p.cells.len(), 2);
    let out = dir.join("results");
    let summary = run(
        &p,
        &catalog,
        &RunOptions {
            dir: out.clone(),
            jobs: 1,
            fresh: true,
            progress: false,
            stop_after: None,
            shard: None,
        },
    )
    .unwrap();
    assert_eq!(summary.ok, 2, "{summary:?}");
    let rows = read_runs(&out).unwrap();
    for r in &rows {
        assert_eq!(r.str("toss"), "toss_001");
        let pos = r.f64("traj_pos_error_mean_pct_width");
        let rot = r.f64("traj_rot_error_mean_deg");
        assert!(
            (pos - 25.0).abs() < 1e-9,
            "h {}: {pos} %",
            r.f64("timestep_s")
        );
        assert!(
            (rot - 30.0).abs() < 1e-9,
            "h {}: {rot} deg",
            r.f64("timestep_s")
        );
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("## Recorded tosses"), "{report}");
    assert!(
        report.contains("| cube_toss | frozen | 0.000675675675675675"),
        "{report}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// toss_001 with soft_convex (elliptic cone, nominal friction 0.18) at 1/148 s with 10
/// substeps. Measured: 15.85 % of the width and 12.8 degrees (mean over its 98 samples after the first);
/// the bounds leave about 25 % of room for changes in the solver.
#[test]
fn a_real_toss_with_soft_convex_stays_within_its_measured_error() {
    let catalog = Catalog::builtin();
    let tosses = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/cube_toss");
    let params = serde_json::json!({"toss": 1, "dir": tosses});
    let scene = catalog.build_scene("cube_toss", &params).unwrap();
    let reference = recorded_toss(&params, None).unwrap();
    let mut f = catalog
        .build_formulation("soft_convex", &serde_json::json!({"cone": "elliptic"}))
        .unwrap();
    let h = SAMPLE_DT_S / 10.0;
    let out = rollout(
        &scene,
        f.as_mut(),
        h,
        scene.horizon,
        Some(&reference),
        false,
    );
    assert!(out.diverged.is_none(), "{:?}", out.diverged);
    let mut row = contactlab_harness::results::Row::default();
    out.acc.finish(&mut row);
    let pct = 100.0 * row.f64("traj_pos_error_mean_m") / CUBE_EDGE_M;
    let deg = row.f64("traj_rot_error_mean_rad").to_degrees();
    eprintln!("toss_001 soft_convex 10 substeps: {pct:.3} % width, {deg:.3} deg");
    assert!(pct.is_finite() && deg.is_finite());
    assert!(pct < 20.0, "{pct} % width (measured 15.85)");
    assert!(deg < 16.0, "{deg} deg (measured 12.8)");
}
