//! No stale result: cell identities include the contents of the files a cell reads, one
//! process at a time writes a results folder, figures and the report are written atomically
//! and their failure fails the run, leftover temporary files are removed, and a cell file that
//! is not its cell's row is refused. Uses the test fakes (`CONTACTLAB_TESTKIT=1`) and tiny
//! files written to temporary folders.

mod common;
use common::{contactlab, spawn_contactlab, stderr, GOOD};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use contactlab_harness::catalog::Catalog;
use contactlab_harness::config;
use contactlab_harness::inputs::sha256_file;
use contactlab_harness::results::{lock_dir, read_runs, ResultsError, Row};
use contactlab_harness::runner::{run, RunOptions, RunSummary};
use contactlab_harness::sweep::{plan, Plan};

fn plan_file(file: &Path) -> Plan {
    let (cfg, text) = config::load(file).unwrap();
    plan(file, &text, cfg, &Catalog::with_testkit()).unwrap()
}

fn run_into(plan: &Plan, dir: &Path) -> Result<RunSummary, ResultsError> {
    let opts = RunOptions {
        dir: dir.to_path_buf(),
        jobs: 2,
        fresh: false,
        progress: false,
        stop_after: None,
        shard: None,
    };
    run(plan, &Catalog::with_testkit(), &opts)
}

/// A row as JSON text (NaN as null), to compare rows with unmeasured columns.
fn json(r: &Row) -> String {
    serde_json::to_string(r).unwrap()
}

/// Rows by scene label and timestep.
fn rows_by_cell(dir: &Path) -> BTreeMap<(String, u64), Row> {
    read_runs(dir)
        .unwrap()
        .into_iter()
        .map(|r| {
            (
                (r.scene_label().to_string(), r.f64("timestep_s").to_bits()),
                r,
            )
        })
        .collect()
}

/// A point mass on a vertical slide above a plane (the testkit formulation's model: geom 1 is
/// the sphere, q\[0\] its height), starting at `height` from a keyframe; it also declares a
/// mesh asset, so the loader reads `cube.obj` too.
fn drop_xml(height: f64) -> String {
    format!(
        r#"<mujoco model="drop">
  <asset><mesh name="cube" file="cube.obj"/></asset>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 0.1"/>
    <body name="ball">
      <joint name="z" type="slide" axis="0 0 1"/>
      <geom name="ball" type="sphere" size="0.05" mass="1"/>
    </body>
  </worldbody>
  <keyframe><key name="up" qpos="{height}"/></keyframe>
</mujoco>
"#
    )
}

const CUBE_OBJ: &str = "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n";

/// Two MJCF models in their own folders, each with its own mesh file, and an experiment on
/// both at two timesteps (4 cells).
fn two_models(tmp: &Path) -> PathBuf {
    for m in ["a", "b"] {
        std::fs::create_dir_all(tmp.join(m)).unwrap();
        std::fs::write(tmp.join(m).join("drop.xml"), drop_xml(0.5)).unwrap();
        std::fs::write(tmp.join(m).join("cube.obj"), CUBE_OBJ).unwrap();
    }
    let text = format!(
        "name: models\nscenes:\n  - name: mjcf\n    label: a\n    file: {}\n    key: up\n  - name: mjcf\n    label: b\n    file: {}\n    key: up\nformulations:\n  - name: falling_point\nsweep:\n  timestep: [0.01, 0.02]\nhorizon: 0.2\n",
        tmp.join("a/drop.xml").display(),
        tmp.join("b/drop.xml").display()
    );
    let file = tmp.join("models.yaml");
    std::fs::write(&file, text).unwrap();
    file
}

#[test]
fn editing_an_mjcf_model_or_its_mesh_in_place_reruns_exactly_the_cells_that_read_it() {
    let tmp = tempfile::tempdir().unwrap();
    let file = two_models(tmp.path());
    let out = tmp.path().join("results");
    let s = run_into(&plan_file(&file), &out).unwrap();
    assert_eq!((s.total, s.ran, s.resumed), (4, 4, 0));
    let before = rows_by_cell(&out);
    // The row records every file the loader read, with its SHA-256.
    let a_row = &before[&("a".to_string(), 0.01f64.to_bits())];
    let inputs: BTreeMap<String, String> = serde_json::from_str(a_row.str("inputs")).unwrap();
    let xml = tmp.path().join("a/drop.xml");
    let obj = tmp.path().join("a/cube.obj");
    assert_eq!(
        inputs,
        BTreeMap::from([
            (xml.display().to_string(), sha256_file(&xml).unwrap()),
            (obj.display().to_string(), sha256_file(&obj).unwrap()),
        ])
    );

    // Edit model a in place (drop from 0.4 m instead of 0.5 m): only a's two cells rerun.
    std::fs::write(&xml, drop_xml(0.4)).unwrap();
    let s = run_into(&plan_file(&file), &out).unwrap();
    assert_eq!((s.total, s.ran, s.resumed), (4, 2, 2));
    let after = rows_by_cell(&out);
    for h in [0.01f64, 0.02] {
        let k = |l: &str| (l.to_string(), h.to_bits());
        assert_eq!(
            json(&after[&k("b")]),
            json(&before[&k("b")]),
            "b at {h} kept"
        );
        assert_ne!(
            after[&k("a")].str("cell_id"),
            before[&k("a")].str("cell_id")
        );
        // The new rows are of the new model: the energy at t = 0 is m g z0 (1 kg, 0.4 m).
        let e0 = after[&k("a")].f64("energy_initial_j");
        assert!((e0 - 9.81 * 0.4).abs() < 1e-9, "{e0}");
        assert!((before[&k("a")].f64("energy_initial_j") - 9.81 * 0.5).abs() < 1e-9);
    }

    // Edit b's mesh file in place (an asset, not the model file): only b's cells rerun.
    std::fs::write(
        tmp.path().join("b/cube.obj"),
        CUBE_OBJ.replace("v 1 0 0", "v 2 0 0"),
    )
    .unwrap();
    let s = run_into(&plan_file(&file), &out).unwrap();
    assert_eq!((s.total, s.ran, s.resumed), (4, 2, 2));
    let last = rows_by_cell(&out);
    for h in [0.01f64, 0.02] {
        let k = |l: &str| (l.to_string(), h.to_bits());
        assert_eq!(json(&last[&k("a")]), json(&after[&k("a")]));
        assert_ne!(last[&k("b")].str("cell_id"), after[&k("b")].str("cell_id"));
    }
    // Unchanged files: nothing reruns.
    let s = run_into(&plan_file(&file), &out).unwrap();
    assert_eq!((s.ran, s.resumed), (0, 4));
    // `report` from cells/ alone (no runs.parquet) leaves out the rows of the old contents.
    let cells = std::fs::read_dir(out.join("cells")).unwrap().count();
    assert_eq!(cells, 8);
    std::fs::remove_file(out.join("runs.parquet")).unwrap();
    contactlab_harness::report::redraw(&out).unwrap();
    let redrawn = rows_by_cell(&out);
    assert_eq!(redrawn.len(), 4);
    for (k, r) in &redrawn {
        assert_eq!(json(r), json(&last[k]));
    }
}

#[test]
fn editing_a_toss_csv_in_place_reruns_only_that_toss() {
    let tmp = tempfile::tempdir().unwrap();
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../data/cube_toss");
    let tosses = tmp.path().join("tosses");
    std::fs::create_dir_all(&tosses).unwrap();
    for t in ["toss_001.csv", "toss_002.csv"] {
        std::fs::copy(data.join(t), tosses.join(t)).unwrap();
    }
    let text = format!(
        "name: tosses\nscenes:\n  - name: cube_toss\n    dir: {}\n    toss: all\n    horizon: 0.05\nformulations:\n  - name: penalty\nreference: {{kind: recorded}}\n",
        tosses.display()
    );
    let file = tmp.path().join("tosses.yaml");
    std::fs::write(&file, text).unwrap();
    let out = tmp.path().join("results");
    let s = run_into(&plan_file(&file), &out).unwrap();
    assert_eq!((s.total, s.ran), (2, 2));
    let by_toss = |dir: &Path| -> BTreeMap<String, Row> {
        read_runs(dir)
            .unwrap()
            .into_iter()
            .map(|r| (r.str("toss").to_string(), r))
            .collect()
    };
    let before = by_toss(&out);
    assert_eq!(before["toss_002"].str("status"), "ok");

    // Move the third recorded sample of toss 2 up by 1 cm: its reference changes, toss 1's not.
    let path = tosses.join("toss_002.csv");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut cols: Vec<String> = lines[3].split(',').map(str::to_string).collect();
    cols[3] = format!("{}", cols[3].parse::<f64>().unwrap() + 0.01);
    lines[3] = cols.join(",");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();

    let s = run_into(&plan_file(&file), &out).unwrap();
    assert_eq!((s.total, s.ran, s.resumed), (2, 1, 1));
    let after = by_toss(&out);
    assert_eq!(json(&after["toss_001"]), json(&before["toss_001"]));
    assert_ne!(
        after["toss_002"].str("cell_id"),
        before["toss_002"].str("cell_id")
    );
    assert_ne!(
        after["toss_002"].f64("traj_pos_error_mean_m"),
        before["toss_002"].f64("traj_pos_error_mean_m"),
        "the rerun compared with the edited recording"
    );
}

#[test]
fn editing_a_reference_trajectory_in_place_reruns_the_cells_compared_with_it() {
    use contactlab_harness::runner::rollout;
    let tmp = tempfile::tempdir().unwrap();
    let catalog = Catalog::with_testkit();
    let write_reference = |h: f64| {
        let scene = catalog
            .build_scene("falling_point", &serde_json::json!({}))
            .unwrap();
        let mut f = catalog
            .build_formulation("falling_point", &serde_json::json!({}))
            .unwrap();
        let r = rollout(&scene, f.as_mut(), h, 0.2, None, true);
        r.log.unwrap().write(&tmp.path().join("ref.csv")).unwrap();
    };
    write_reference(0.0005);
    let text = "name: traj\nscenes:\n  - name: falling_point\nformulations:\n  - name: falling_point\nsweep:\n  timestep: [0.002]\nhorizon: 0.2\nreference: {kind: trajectory, file: ref.csv}\n";
    let file = tmp.path().join("traj.yaml");
    std::fs::write(&file, text).unwrap();
    let out = tmp.path().join("r");
    run_into(&plan_file(&file), &out).unwrap();
    // Closed form (testkit module doc): error at t against h_ref is g t (h - h_ref) / 2.
    let error = |dir: &Path| read_runs(dir).unwrap()[0].f64("traj_error_final");
    let g = contactlab_harness::testkit::G;
    assert!((error(&out) - g * 0.2 * (0.002 - 0.0005) / 2.0).abs() < 1e-9);

    write_reference(0.001);
    let s = run_into(&plan_file(&file), &out).unwrap();
    assert_eq!((s.ran, s.resumed), (1, 0));
    assert!((error(&out) - g * 0.2 * (0.002 - 0.001) / 2.0).abs() < 1e-9);
}

/// Recorded with revision 12bd72a (`contactlab check` of GOOD), before cell identities had an
/// input-file component: cells that read no file keep their ids, so earlier results resume.
#[test]
fn cell_ids_of_cells_without_input_files_are_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("good.yaml");
    std::fs::write(&file, GOOD).unwrap();
    let p = plan_file(&file);
    let ids: Vec<&str> = p.cells.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "5fed1dbf20620b57",
            "ff3b206b4b20b217",
            "5ff71dbf206a5fdc",
            "ff46206b4b2ab99c"
        ]
    );
    assert!(p.cells.iter().all(|c| c.inputs.is_empty()));
}

#[test]
fn a_run_into_a_locked_folder_is_refused_naming_the_holder() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("good.yaml");
    std::fs::write(&file, GOOD).unwrap();
    let out = tmp.path().join("results/clitest");
    let lock = lock_dir(&out).unwrap();
    match run_into(&plan_file(&file), &out) {
        Err(ResultsError::Locked { holder, .. }) => {
            assert!(
                holder.contains(&format!("pid {}", std::process::id())),
                "{holder}"
            );
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    assert!(
        !out.join("config.resolved.yaml").exists(),
        "nothing written"
    );
    // The binary: exit status 1, one message naming the other process.
    let o = contactlab(&["run", "good.yaml"], tmp.path());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("pid {}", std::process::id())),
        "{}",
        stderr(&o)
    );
    let r = contactlab(&["report", "results/clitest"], tmp.path());
    assert_eq!(r.status.code(), Some(1), "{}", stderr(&r));
    assert!(stderr(&r).contains("in use by another contactlab process"));
    // Released (as when the holder ends, however it ends): the leftover lock file is no
    // obstacle.
    drop(lock);
    assert!(out.join(".lock").exists());
    let o = contactlab(&["run", "good.yaml"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn two_concurrent_runs_into_one_folder_give_one_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    // Slow cells: 0.1 ms steps over 20 s, one thread, so the first run is still going.
    let text = GOOD
        .replace("[0.01, 0.02]", "[0.0001, 0.0002]")
        .replace("horizon: 0.2", "horizon: 20.0")
        .replace("reference: {kind: same_formulation, timestep: 0.005}\n", "");
    std::fs::write(tmp.path().join("slow.yaml"), text).unwrap();
    let mut first = spawn_contactlab(&["run", "slow.yaml", "--jobs", "1"], tmp.path());
    let manifest = tmp.path().join("results/clitest/manifest.json");
    let start = Instant::now();
    while !manifest.exists() && start.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = contactlab(&["run", "slow.yaml", "--jobs", "1"], tmp.path());
    let still_running = first.try_wait().unwrap().is_none();
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(
        still_running,
        "the first run ended before the second started"
    );
    let err = stderr(&second);
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "one message: {err}");
    assert!(err.contains(&format!("pid {}", first.id())), "{err}");
    assert!(err.contains("slow.yaml"), "names the other command: {err}");
}

#[test]
fn figures_that_cannot_be_written_fail_the_run_and_leave_no_stale_report() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("good.yaml"), GOOD).unwrap();
    let dir = tmp.path().join("results/clitest");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("report.md"), "stale").unwrap();
    // `figures` is a file, so the figures folder cannot be made.
    std::fs::write(dir.join("figures"), "in the way").unwrap();
    let o = contactlab(&["run", "good.yaml"], tmp.path());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("figures not drawn"), "{err}");
    // The rows are kept, and the report is today's, saying what is missing.
    assert_eq!(read_runs(&dir).unwrap().len(), 4);
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("Figures are missing"), "{report}");
    assert!(report.contains("clitest"), "{report}");
    // `report` fails the same way.
    let r = contactlab(&["report", "results/clitest"], tmp.path());
    assert_eq!(r.status.code(), Some(1), "{}", stderr(&r));
}

#[test]
fn a_report_that_cannot_be_written_fails_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("good.yaml"), GOOD).unwrap();
    let dir = tmp.path().join("results/clitest");
    // `report.md` is a non-empty folder: renaming the new report onto it fails.
    std::fs::create_dir_all(dir.join("report.md/x")).unwrap();
    let o = contactlab(&["run", "good.yaml"], tmp.path());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("report not written"), "{err}");
    assert!(err.contains("report.md"), "{err}");
    assert_eq!(read_runs(&dir).unwrap().len(), 4, "rows kept");
}

#[test]
fn leftover_temp_files_of_killed_runs_are_removed_on_start() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("good.yaml"), GOOD).unwrap();
    let dir = tmp.path().join("results/clitest");
    let leftovers = [
        dir.join(".runs.parquet.tmp-99999"),
        dir.join("cells/.0123456789abcdef.json.tmp-12"),
        dir.join("figures/.error_vs_timestep__x.png.tmp-34.png"),
    ];
    let kept = dir.join("figures/notes.tmp-1");
    for p in leftovers.iter().chain([&kept]) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "").unwrap();
    }
    let o = contactlab(&["run", "good.yaml"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    for p in &leftovers {
        assert!(!p.exists(), "{} left", p.display());
    }
    assert!(kept.exists(), "not a temporary file of ours");
}

#[test]
fn figures_are_whole_files_and_no_temporary_file_remains() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("good.yaml"), GOOD).unwrap();
    let o = contactlab(&["run", "good.yaml"], tmp.path());
    assert!(o.status.success(), "{}", stderr(&o));
    let figures = tmp.path().join("results/clitest/figures");
    let names: Vec<String> = std::fs::read_dir(&figures)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(names.len(), 8, "{names:?}");
    for n in &names {
        assert!(!n.starts_with('.'), "temporary file {n} left");
        let bytes = std::fs::read(figures.join(n)).unwrap();
        if n.ends_with(".png") {
            assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{n}");
            assert_eq!(
                &bytes[bytes.len() - 8..bytes.len() - 4],
                b"IEND",
                "{n} ends"
            );
        } else {
            assert!(String::from_utf8(bytes)
                .unwrap()
                .trim_end()
                .ends_with("</svg>"));
        }
    }
}

#[test]
fn a_cell_file_whose_cell_id_disagrees_with_its_name_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("good.yaml"), GOOD).unwrap();
    assert!(contactlab(&["run", "good.yaml"], tmp.path())
        .status
        .success());
    let cells = tmp.path().join("results/clitest/cells");
    let a = cells.join("5fed1dbf20620b57.json");
    let b = cells.join("ff3b206b4b20b217.json");
    // Copy one cell's row over another's file.
    std::fs::copy(&a, &b).unwrap();
    let o = contactlab(&["run", "good.yaml"], tmp.path());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("ff3b206b4b20b217.json"), "{err}");
    assert!(err.contains("cell_id '5fed1dbf20620b57'"), "{err}");
    // Malformed JSON: the line is named.
    std::fs::write(&b, "{\n  \"cell_id\": \"ff3b206b4b20b217\",\n  oops\n}").unwrap();
    let o = contactlab(&["run", "good.yaml"], tmp.path());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("ff3b206b4b20b217.json") && err.contains("line 3"),
        "{err}"
    );
}

/// The scene builders list every file they read, which the digests above are taken of.
#[test]
fn every_file_a_scene_reads_is_in_its_inputs() {
    use contactlab_scenarios::build;
    use serde_json::json;
    let models = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/tests/mjcf");
    let inputs = |name: &str, params: serde_json::Value| build(name, &params).unwrap().inputs;
    let hfield = models.join("hfield.xml");
    assert_eq!(
        inputs("mjcf", json!({ "file": hfield })),
        [hfield.clone(), models.join("terrain.bin")]
    );
    let mesh = models.join("mesh.xml");
    assert_eq!(
        inputs("mjcf", json!({ "file": mesh })),
        [
            mesh.clone(),
            models.join("cube.stl"),
            models.join("cube.obj")
        ]
    );
    let keyed = models.join("slide_motor_key.xml");
    let schedule = models.join("slide_motor_schedule.csv");
    assert_eq!(
        inputs(
            "mjcf",
            json!({ "file": keyed, "key": "push", "controls": schedule })
        ),
        [keyed.clone(), schedule.clone()]
    );
    let tosses = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../data/cube_toss");
    assert_eq!(
        inputs("cube_toss", json!({ "dir": tosses, "toss": 7 })),
        [tosses.join("toss_007.csv")]
    );
    let tmp = tempfile::tempdir().unwrap();
    let obj = tmp.path().join("flat.obj");
    std::fs::write(
        &obj,
        "v -15 -15 0\nv 15 -15 0\nv 15 15 0\nv -15 15 0\nf 1 2 3\nf 1 3 4\n",
    )
    .unwrap();
    assert_eq!(
        inputs("mesh_terrain", json!({ "mesh_file": obj })),
        [obj.clone()]
    );
    assert!(inputs("mesh_terrain", json!({ "grid": 4 })).is_empty());
    assert!(inputs("box_slide", json!({})).is_empty());
}
