//! The results set the notebooks in `notebooks/` are executed on (issue 21): the four small
//! experiments of `notebooks/testdata/` run through the `contactlab` binary into
//! `$CONTACTLAB_NOTEBOOK_RESULTS` (default `<workspace>/target/notebook-results`), each into
//! `<name>/` with the name of the full experiment in `configs/` whose rows it imitates, so that
//! a notebook reads either unchanged. `.ci/run` then executes every notebook on this folder
//! (`CONTACTLAB_RESULTS`).
//!
//! Each test checks the rows the notebooks rely on: counts, statuses (with the rows that are
//! not `ok` that the test data contains on purpose, so that the notebooks' accounting of them
//! runs), the columns each notebook reads present with their types and finite where the
//! notebook plots them, and the per-step logs. The notebooks themselves are checked to be clean
//! nbformat 4 (no outputs committed) and to name the columns listed here.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use contactlab_harness::results::read_frame;
use polars::prelude::{DataFrame, DataType};

/// The workspace root (the repository), from this crate's manifest folder.
fn workspace() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// Where the results set goes: `$CONTACTLAB_NOTEBOOK_RESULTS`, else `target/notebook-results`
/// of the workspace.
fn out_root() -> PathBuf {
    match std::env::var_os("CONTACTLAB_NOTEBOOK_RESULTS") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => workspace().join("target").join("notebook-results"),
    }
}

/// Run `notebooks/testdata/<file>` with the binary (from the workspace root, where the cube
/// toss data is found at run time) into the results set; returns the experiment's folder and
/// its `runs.parquet` as a frame.
fn run(file: &str, name: &str) -> (PathBuf, DataFrame) {
    let root = workspace();
    let out = out_root();
    std::fs::create_dir_all(&out).unwrap();
    let experiment = root.join("notebooks").join("testdata").join(file);
    let o = Command::new(env!("CARGO_BIN_EXE_contactlab"))
        .arg("run")
        .arg(&experiment)
        .arg("--out")
        .arg(&out)
        .args(["--jobs", "2", "--fresh"])
        .current_dir(&root)
        .env_remove("CONTACTLAB_DATA")
        .env_remove("CONTACTLAB_TESTKIT")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}: {}\n{}",
        experiment.display(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let dir = out.join(name);
    for f in [
        "runs.csv",
        "manifest.json",
        "config.resolved.yaml",
        "report.md",
    ] {
        assert!(dir.join(f).is_file(), "{} written", dir.join(f).display());
    }
    let df = read_frame(&dir.join("runs.parquet")).unwrap();
    (dir, df)
}

/// The text column `name` as strings.
fn strs(df: &DataFrame, name: &str) -> Vec<String> {
    let col = df.column(name).unwrap_or_else(|_| panic!("column {name}"));
    let ca = col.str().unwrap_or_else(|_| panic!("{name} is text"));
    (0..ca.len())
        .map(|i| ca.get(i).unwrap_or("").to_string())
        .collect()
}

/// The numeric column `name` as f64 (NaN for nulls).
fn nums(df: &DataFrame, name: &str) -> Vec<f64> {
    let col = df
        .column(name)
        .unwrap_or_else(|_| panic!("column {name}"))
        .cast(&DataType::Float64)
        .unwrap();
    let ca = col.f64().unwrap();
    (0..ca.len())
        .map(|i| ca.get(i).unwrap_or(f64::NAN))
        .collect()
}

/// Every column of `text` and `numeric` is in the frame with that type, and named in the
/// notebook's source (so that these lists and the notebook stay in step).
fn assert_columns(df: &DataFrame, notebook: &str, text: &[&str], numeric: &[&str]) {
    let source = notebook_source(notebook);
    for c in text {
        let col = df
            .column(c)
            .unwrap_or_else(|_| panic!("{notebook}: column {c} missing"));
        assert_eq!(col.dtype(), &DataType::String, "{notebook}: {c} is text");
        assert!(names(&source, c), "{notebook} reads {c}");
    }
    for c in numeric {
        let col = df
            .column(c)
            .unwrap_or_else(|_| panic!("{notebook}: column {c} missing"));
        assert!(
            col.dtype().is_primitive_numeric(),
            "{notebook}: {c} is numeric, not {}",
            col.dtype()
        );
        assert!(names(&source, c), "{notebook} reads {c}");
    }
}

/// Whether Python `source` names `column` as a string literal ("column" or 'column').
fn names(source: &str, column: &str) -> bool {
    source.contains(&format!("\"{column}\"")) || source.contains(&format!("'{column}'"))
}

/// The concatenated code of `notebooks/<name>.ipynb`, after checking that the file is clean
/// nbformat 4: every code cell without outputs and without an execution count.
fn notebook_source(name: &str) -> String {
    let path = workspace().join("notebooks").join(name);
    let nb: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(nb["nbformat"], 4, "{name}: nbformat 4");
    let cells = nb["cells"].as_array().expect("cells");
    assert_eq!(
        cells[0]["cell_type"], "markdown",
        "{name} starts with its explanation"
    );
    let mut code = String::new();
    for c in cells {
        let text = match &c["source"] {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(lines) => lines
                .iter()
                .map(|l| l.as_str().unwrap_or(""))
                .collect::<String>(),
            _ => String::new(),
        };
        if c["cell_type"] == "code" {
            assert_eq!(
                c["outputs"],
                serde_json::json!([]),
                "{name}: outputs committed"
            );
            assert!(
                c["execution_count"].is_null(),
                "{name}: execution count committed"
            );
            code.push_str(&text);
            code.push('\n');
        }
    }
    assert!(
        code.contains("CONTACTLAB_RESULTS"),
        "{name} reads its results folder from CONTACTLAB_RESULTS"
    );
    code
}

fn count(v: &[String], what: &str) -> usize {
    v.iter().filter(|s| *s == what).count()
}

/// box_drop, soft_convex and penalty at 1, 5 and 20 ms with per-step logs: soft_convex is
/// stable at every timestep; the explicit penalty (ke 1e5 N/m under the 1 kg box: h sqrt(ke/m)
/// = 6.3 at 20 ms, far past explicit stability) diverges at 20 ms and is stable at 1 ms.
#[test]
fn timestep_stability_rows() {
    let (dir, df) = run("timestep_stability.yaml", "timestep_stability");
    assert_eq!(df.height(), 2 * 3, "2 formulations x 3 timesteps");
    assert_columns(
        &df,
        "timestep_stability.ipynb",
        &[
            "cell_id",
            "scene_label",
            "label",
            "sweep",
            "status",
            "reason",
        ],
        &[
            "timestep_s",
            "traj_error_mean",
            "max_penetration_m",
            "steps",
            "nonconverged_steps",
            "iterations_mean",
        ],
    );
    let (label, status, reason) = (strs(&df, "label"), strs(&df, "status"), strs(&df, "reason"));
    let h = nums(&df, "timestep_s");
    for i in 0..df.height() {
        assert!(
            status[i] == "ok" || status[i] == "diverged",
            "{} at {} s: {} {}",
            label[i],
            h[i],
            status[i],
            reason[i]
        );
        assert_eq!(
            status[i] == "ok",
            reason[i].is_empty(),
            "a reason iff not ok"
        );
        if label[i] == "soft_convex" || h[i] == 0.001 {
            assert_eq!(status[i], "ok", "{} at {} s: {}", label[i], h[i], reason[i]);
        }
        if label[i] == "penalty" && h[i] == 0.02 {
            assert_eq!(status[i], "diverged", "penalty at 20 ms");
        }
    }
    // What the notebook draws for ok rows is finite; the error and penetration positive (the
    // box lands within 0.5 s, errors are against a finer timestep).
    let (err, pen, it) = (
        nums(&df, "traj_error_mean"),
        nums(&df, "max_penetration_m"),
        nums(&df, "iterations_mean"),
    );
    let steps = nums(&df, "steps");
    for i in (0..df.height()).filter(|&i| status[i] == "ok") {
        assert!(
            err[i].is_finite() && err[i] > 0.0,
            "{} error {}",
            label[i],
            err[i]
        );
        assert!(
            pen[i].is_finite() && pen[i] > 0.0,
            "{} penetration {}",
            label[i],
            pen[i]
        );
        assert!(it[i].is_finite(), "{} iterations {}", label[i], it[i]);
        assert_eq!(
            steps[i],
            (0.5 / h[i]).round(),
            "{} steps at {} s",
            label[i],
            h[i]
        );
    }
    // One per-step log per cell, with the columns the notebook draws; a diverged cell's log
    // ends at the step that diverged.
    for (i, id) in strs(&df, "cell_id").iter().enumerate() {
        let log = read_frame(&dir.join("steps").join(format!("{id}.parquet"))).unwrap();
        assert_columns(
            &log,
            "timestep_stability.ipynb",
            &[],
            &["t", "qpos_2", "iterations"],
        );
        assert_eq!(
            log.height() as f64,
            steps[i] + 1.0,
            "initial state and every step"
        );
        let last = nums(&log, "diverged").last().copied().unwrap();
        assert_eq!(
            last == 1.0,
            status[i] == "diverged",
            "{} at {} s",
            label[i],
            h[i]
        );
        let z = nums(&log, "qpos_2");
        if status[i] == "ok" {
            assert!(
                z.iter().all(|z| z.is_finite() && *z > 0.0 && *z < 0.35),
                "box height"
            );
        }
    }
}

/// box_slide and cartpole_free, soft_convex and ncp_fb, two timesteps, three horizons, FD at
/// two steps, forward FD and the adjoint: every row scored except soft_convex's adjoint rows,
/// which are `skipped` saying why.
#[test]
fn gradient_accuracy_rows() {
    let (_dir, df) = run("gradient_accuracy.yaml", "gradient_accuracy");
    // 2 scenes x 2 formulations x 2 timesteps x 3 horizons x 4 methods (fd_central at two
    // steps, fd_forward, adjoint).
    assert_eq!(df.height(), 2 * 2 * 2 * 3 * 4);
    assert_columns(
        &df,
        "gradient_accuracy.ipynb",
        &[
            "scene_label",
            "label",
            "sweep",
            "status",
            "reason",
            "method",
        ],
        &[
            "timestep_s",
            "horizon_steps",
            "fd_step_rel",
            "grad_max_rel_error",
            "grad_cosine",
            "grad_nonfinite",
            "grad_unconverged_steps",
            "grad_wall_time_s",
        ],
    );
    let (label, status, reason, method) = (
        strs(&df, "label"),
        strs(&df, "status"),
        strs(&df, "reason"),
        strs(&df, "method"),
    );
    let (err, cos, wall, step) = (
        nums(&df, "grad_max_rel_error"),
        nums(&df, "grad_cosine"),
        nums(&df, "grad_wall_time_s"),
        nums(&df, "fd_step_rel"),
    );
    let horizons: BTreeSet<u64> = nums(&df, "horizon_steps")
        .iter()
        .map(|n| *n as u64)
        .collect();
    assert_eq!(horizons, BTreeSet::from([1, 10, 50]));
    for i in 0..df.height() {
        if label[i] == "soft_convex" && method[i] == "adjoint" {
            assert_eq!(status[i], "skipped");
            assert!(reason[i].contains("no adjoint"), "{}", reason[i]);
            continue;
        }
        let what = format!("{} {} step {}", label[i], method[i], step[i]);
        assert_eq!(status[i], "ok", "{what}: {}", reason[i]);
        assert!(
            err[i].is_finite() && err[i] >= 0.0,
            "{what}: error {}",
            err[i]
        );
        assert!(cos[i].is_finite(), "{what}: cosine {}", cos[i]);
        assert!(
            wall[i].is_finite() && wall[i] > 0.0,
            "{what}: wall {}",
            wall[i]
        );
        assert_eq!(step[i].is_finite(), method[i].starts_with("fd_"), "{what}");
        // The exact adjoint meets the reference (gradient_study.rs checks it closely).
        if method[i] == "adjoint" {
            assert!(err[i] < 1e-3, "{what}: {}", err[i]);
        }
    }
    assert_eq!(count(&status, "skipped"), 2 * 2 * 3);
}

/// Three recorded tosses (a sweep over `scene.toss`), soft_convex, penalty and ncp_fb at
/// 1/148 s with 1 and 10 substeps: the rows carry their toss and both errors.
#[test]
fn cube_toss_rows() {
    let (_dir, df) = run("cube_toss.yaml", "cube_toss");
    assert_eq!(
        df.height(),
        3 * 3 * 2,
        "3 tosses x 3 formulations x 2 timesteps"
    );
    assert_columns(
        &df,
        "cube_toss.ipynb",
        &["scene", "label", "sweep", "status", "reason", "toss"],
        &[
            "timestep_s",
            "traj_pos_error_mean_pct_width",
            "traj_rot_error_mean_deg",
        ],
    );
    let (label, status, reason, toss) = (
        strs(&df, "label"),
        strs(&df, "status"),
        strs(&df, "reason"),
        strs(&df, "toss"),
    );
    let tosses: BTreeSet<&str> = toss.iter().map(String::as_str).collect();
    assert_eq!(tosses, BTreeSet::from(["toss_001", "toss_002", "toss_005"]));
    let (h, pos, rot) = (
        nums(&df, "timestep_s"),
        nums(&df, "traj_pos_error_mean_pct_width"),
        nums(&df, "traj_rot_error_mean_deg"),
    );
    let substeps: BTreeSet<u64> = h
        .iter()
        .map(|h| ((1.0 / 148.0) / h).round() as u64)
        .collect();
    assert_eq!(substeps, BTreeSet::from([1, 10]));
    for i in 0..df.height() {
        let what = format!("{} {} h {}", label[i], toss[i], h[i]);
        // The explicit penalty may diverge at the recording's own 1/148 s (it does on these
        // three: an energy rise); everything else finishes.
        if label[i] == "penalty" && h[i] > 0.001 {
            assert!(
                status[i] == "ok" || (status[i] == "diverged" && !reason[i].is_empty()),
                "{what}: {} {}",
                status[i],
                reason[i]
            );
        } else {
            assert_eq!(status[i], "ok", "{what}: {}", reason[i]);
        }
        if status[i] == "ok" {
            // Errors in % of the 0.1048 m width and in degrees: positive, and far from absurd
            // for a cube that stays on the table (measured 5 to 53 % and 4.7 to 72 deg).
            assert!(
                pos[i].is_finite() && pos[i] > 0.0 && pos[i] < 500.0,
                "{what}: {}",
                pos[i]
            );
            assert!(
                rot[i].is_finite() && rot[i] > 0.0 && rot[i] <= 180.0,
                "{what}: {}",
                rot[i]
            );
        }
    }
    assert!(count(&status, "ok") >= 15);
}

/// The cpu engine, box_drop resting on the plane, 1 to 64 worlds: forward cells for every
/// formulation; forward_backward and tape cells for ncp_fb (its adjoint), `skipped` for the
/// others.
#[test]
fn throughput_rows() {
    let (_dir, df) = run("throughput.yaml", "throughput");
    // 3 formulations x 4 worlds x 2 passes, plus 3 x (3 horizons + 2 iteration budgets) tape
    // cells.
    assert_eq!(df.height(), 3 * 4 * 2 + 3 * 5);
    assert_columns(
        &df,
        "throughput.ipynb",
        &[
            "experiment",
            "scene_label",
            "label",
            "engine",
            "backend",
            "pass",
            "status",
            "reason",
            "memory_source",
        ],
        &[
            "worlds",
            "horizon_steps",
            "iteration_budget",
            "world_steps_per_s",
            "world_iterations_per_s",
            "memory_bytes",
            "tape_bytes",
        ],
    );
    let (label, engine, pass, status, reason) = (
        strs(&df, "label"),
        strs(&df, "engine"),
        strs(&df, "pass"),
        strs(&df, "status"),
        strs(&df, "reason"),
    );
    let (wsps, wips, mem, tape) = (
        nums(&df, "world_steps_per_s"),
        nums(&df, "world_iterations_per_s"),
        nums(&df, "memory_bytes"),
        nums(&df, "tape_bytes"),
    );
    for i in 0..df.height() {
        let what = format!("{} {} {}", label[i], engine[i], pass[i]);
        assert_eq!(engine[i], "cpu");
        if pass[i] != "forward" && label[i] != "ncp_fb" {
            assert_eq!(status[i], "skipped", "{what}");
            assert!(
                reason[i].contains("no reverse-mode gradient"),
                "{what}: {}",
                reason[i]
            );
            continue;
        }
        assert_eq!(status[i], "ok", "{what}: {}", reason[i]);
        // The binary's counting allocator measures the heap.
        assert!(
            mem[i].is_finite() && mem[i] > 0.0,
            "{what}: memory {}",
            mem[i]
        );
        if pass[i] == "forward" {
            assert!(wsps[i].is_finite() && wsps[i] > 0.0, "{what}: {}", wsps[i]);
        } else {
            assert!(wips[i].is_finite() && wips[i] > 0.0, "{what}: {}", wips[i]);
            assert!(
                tape[i].is_finite() && tape[i] > 0.0,
                "{what}: tape {}",
                tape[i]
            );
        }
    }
    assert_eq!(count(&status, "ok"), 3 * 4 + 4 + 5);
}

/// The notebooks' requirements are pinned, and every notebook has its test data.
#[test]
fn notebooks_are_clean_and_pinned() {
    let dir = workspace().join("notebooks");
    let reqs = std::fs::read_to_string(dir.join("requirements.txt")).unwrap();
    for line in reqs.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        assert!(
            line.contains("=="),
            "requirements.txt: '{line}' is not pinned"
        );
    }
    for nb in [
        "timestep_stability",
        "gradient_accuracy",
        "cube_toss",
        "throughput",
    ] {
        notebook_source(&format!("{nb}.ipynb"));
        assert!(
            dir.join("testdata").join(format!("{nb}.yaml")).is_file(),
            "testdata/{nb}.yaml"
        );
    }
}
