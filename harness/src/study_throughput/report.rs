//! The throughput study's `report.md` and figures: throughput against worlds, memory against
//! worlds (one series per formulation, engine and pass) and the tape's memory against the
//! horizon (one series per formulation and engine), one figure of each per scene.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::config::{ExperimentConfig, StudySpec};
use crate::figures::{draw_lines, file_part, Lines};
use crate::results::{write_atomic, Manifest, Row};

use super::COLUMNS;

/// The worlds at which issue 15 asks for the burn-ndarray / cpu forward ratio (box_drop,
/// penalty); the report states the ratio at every worlds count both engines ran.
pub const RATIO_WORLDS: u64 = 4096;

fn fmt(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x == 0.0 {
        "0".into()
    } else if x.abs() >= 1e4 || x.abs() < 1e-2 {
        format!("{x:.3e}")
    } else {
        format!("{x:.3}")
    }
}

fn bytes(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let mib = x / (1024.0 * 1024.0);
    if mib >= 1.0 {
        format!("{mib:.1} MiB")
    } else if x >= 1024.0 {
        format!("{:.1} KiB", x / 1024.0)
    } else {
        // Below a KiB (the cpu adjoint's tape per world-step): bytes, not "0.0 KiB".
        format!("{x:.0} B")
    }
}

/// A series: (scene label, formulation label, engine).
type Series = (String, String, String);

fn by_series<'a>(rows: &'a [Row], pass: &str) -> BTreeMap<Series, Vec<&'a Row>> {
    let mut g: BTreeMap<Series, Vec<&Row>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.str("pass") == pass) {
        g.entry((
            r.scene_label().to_string(),
            r.str("label").to_string(),
            r.str("engine").to_string(),
        ))
        .or_default()
        .push(r);
    }
    g
}

/// The value of `col` in a series' row at `worlds`, if that row is ok or diverged.
fn at(rs: &[&Row], worlds: u64, col: &str) -> f64 {
    rs.iter()
        .find(|r| r.u64("worlds") == worlds && matches!(r.str("status"), "ok" | "diverged"))
        .map_or(f64::NAN, |r| r.f64(col))
}

/// The burn-ndarray / cpu forward world-steps-per-second ratios: `(scene, formulation,
/// worlds, cpu, burn-ndarray, ratio)` for every worlds count both engines ran.
pub fn ratios(rows: &[Row]) -> Vec<(String, String, u64, f64, f64, f64)> {
    let g = by_series(rows, "forward");
    let mut out = Vec::new();
    for ((scene, label, engine), rs) in &g {
        if engine != "cpu" {
            continue;
        }
        let Some(burn) = g.get(&(scene.clone(), label.clone(), "burn-ndarray".into())) else {
            continue;
        };
        let worlds: BTreeSet<u64> = rs.iter().map(|r| r.u64("worlds")).collect();
        for w in worlds {
            let (c, b) = (
                at(rs, w, "world_steps_per_s"),
                at(burn, w, "world_steps_per_s"),
            );
            if c.is_finite() && b.is_finite() {
                out.push((scene.clone(), label.clone(), w, c, b, b / c));
            }
        }
    }
    out
}

/// A table of `col` against worlds, one line per (scene, formulation, engine) of `pass`.
fn worlds_table(rows: &[Row], pass: &str, col: &str, show: fn(f64) -> String) -> String {
    let g = by_series(rows, pass);
    let worlds: BTreeSet<u64> = rows
        .iter()
        .filter(|r| r.str("pass") == pass)
        .map(|r| r.u64("worlds"))
        .collect();
    let mut s = String::from("| scene | formulation | engine |");
    for w in &worlds {
        let _ = write!(s, " {w} |");
    }
    s += "\n|---|---|---|";
    for _ in &worlds {
        s += "---|";
    }
    s += "\n";
    for ((scene, label, engine), rs) in &g {
        if !rs
            .iter()
            .any(|r| matches!(r.str("status"), "ok" | "diverged"))
        {
            continue;
        }
        let _ = write!(s, "| {scene} | {label} | {engine} |");
        for &w in &worlds {
            let _ = write!(s, " {} |", show(at(rs, w, col)));
        }
        s += "\n";
    }
    s
}

/// The text of `report.md` for throughput rows.
pub fn render(
    rows: &[Row],
    cfg: &ExperimentConfig,
    manifest: &Manifest,
    figures: &[PathBuf],
) -> String {
    let mut s = format!("# {}\n\n{}\n\n", cfg.name, cfg.description);
    if let StudySpec::Throughput(spec) = &cfg.study {
        // A merge's cells ran in the shards' processes, possibly side by side on one machine.
        let machine = if manifest.merged.is_empty() {
            format!(
                "Every cell ran alone on {} worker thread(s) of a {}-core machine ({})",
                manifest.threads, manifest.cores, manifest.host
            )
        } else {
            "The cells ran in the shards' processes listed under \"Where the rows come from\" \
             (shards that shared a machine also shared its cores: compare speeds within one \
             shard)"
                .to_string()
        };
        let _ = writeln!(
            s,
            "Throughput and memory against the number of worlds (issues 15, 16). {}, revision {}. Forward cells: one untimed warm-up step, then at most {} timed steps (fewer once {} s had passed), the end state read back once. Forward+backward cells: at most {} iterations of {} steps forward and one backward pass (one world-iteration per world, the Ostrich paper's definition); the cpu engine's backward is ncp_fb's adjoint, the burn engines' burn's reverse mode. Memory is per backend: the process heap (counting allocator) on CPU backends, the CubeCL client's bytes in use on GPU backends. Speeds are measured, never asserted; on a shared machine they vary from run to run.\n",
            machine, manifest.revision, spec.steps, spec.budget_s, spec.iterations, spec.horizon_steps
        );
    }
    let r = ratios(rows);
    if !r.is_empty() {
        s += "## burn-ndarray against the cpu engine\n\n";
        let _ = writeln!(
            s,
            "Forward world-steps per second, measured in this run on the same cores (issue 15 asks for a ratio of at least 1 at {RATIO_WORLDS} worlds on box_drop with penalty):\n"
        );
        s += "| scene | formulation | worlds | cpu | burn-ndarray | burn-ndarray / cpu |\n|---|---|---|---|---|---|\n";
        for (scene, label, w, c, b, ratio) in &r {
            let mark = if *w == RATIO_WORLDS { "**" } else { "" };
            let _ = writeln!(
                s,
                "| {scene} | {label} | {mark}{w}{mark} | {} | {} | {mark}{ratio:.2}{mark} |",
                fmt(*c),
                fmt(*b)
            );
        }
        s += "\n";
    }
    s += "## Forward: world-steps per second\n\n";
    s += &worlds_table(rows, "forward", "world_steps_per_s", fmt);
    s += "\n## Forward: peak memory\n\n";
    s += &worlds_table(rows, "forward", "memory_bytes", bytes);
    s += "\n## Forward plus backward: world-iterations per second\n\n";
    s += &worlds_table(rows, "forward_backward", "world_iterations_per_s", fmt);
    s += "\n## Forward plus backward: peak memory\n\n";
    s += &worlds_table(rows, "forward_backward", "memory_bytes", bytes);
    s += "\n## Forward plus backward: tape\n\n";
    s += &worlds_table(rows, "forward_backward", "tape_bytes", bytes);
    let tape: Vec<&Row> = rows
        .iter()
        .filter(|r| {
            r.str("pass") == "tape"
                && r.u64("iteration_budget") == 0
                && matches!(r.str("status"), "ok" | "diverged")
        })
        .collect();
    let budget: Vec<&Row> = rows
        .iter()
        .filter(|r| {
            r.str("pass") == "tape"
                && r.u64("iteration_budget") > 0
                && matches!(r.str("status"), "ok" | "diverged")
        })
        .collect();
    if !budget.is_empty() {
        s += "\n## Tape against the solver's iteration budget\n\nThe soft solvers run exactly the budget's iterations in every step (converged worlds masked, MJX's static program), so reverse mode records every one; ncp_fb's adjoint (cpu) differentiates each converged step implicitly, whatever its Newton budget.\n\n| scene | formulation | engine | worlds | horizon (steps) | iteration budget | tape | tape per world-step | world-iterations/s | status |\n|---|---|---|---|---|---|---|---|---|---|\n";
        for r in &budget {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.scene_label(),
                r.str("label"),
                r.str("engine"),
                r.u64("worlds"),
                r.u64("horizon_steps"),
                r.u64("iteration_budget"),
                bytes(r.f64("tape_bytes")),
                bytes(r.f64("tape_per_world_step_bytes")),
                fmt(r.f64("world_iterations_per_s")),
                r.str("status"),
            );
        }
    }
    if !tape.is_empty() {
        s += "\n## Tape against the horizon\n\n| scene | formulation | engine | worlds | horizon (steps) | tape | tape per world-step | peak memory | status |\n|---|---|---|---|---|---|---|---|---|\n";
        for r in &tape {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.scene_label(),
                r.str("label"),
                r.str("engine"),
                r.u64("worlds"),
                r.u64("horizon_steps"),
                bytes(r.f64("tape_bytes")),
                bytes(r.f64("tape_per_world_step_bytes")),
                bytes(r.f64("memory_bytes")),
                r.str("status"),
            );
        }
    }
    if rows
        .iter()
        .any(|r| r.str("engine") == "cpu" && r.str("pass") != "forward" && r.str("status") == "ok")
    {
        s += "\nThe cpu engine's tape is the heap peak of its adjoint gradients, which run one per worker thread at a time: it grows with the horizon, not with the worlds. burn's is every world's tape at once.\n";
    }
    // Skipped and failed cells, one line per distinct reason.
    let mut why: BTreeMap<(String, String, String, String), (usize, String)> = BTreeMap::new();
    for r in rows.iter().filter(|r| !matches!(r.str("status"), "ok")) {
        let e = why
            .entry((
                r.str("status").to_string(),
                r.str("label").to_string(),
                r.str("engine").to_string(),
                r.str("reason").to_string(),
            ))
            .or_insert((0, String::new()));
        e.0 += 1;
        if !e.1.contains(r.str("pass")) {
            if !e.1.is_empty() {
                e.1 += ", ";
            }
            e.1 += r.str("pass");
        }
    }
    if !why.is_empty() {
        s += "\n## Cells not measured\n\n| status | formulation | engine | passes | cells | reason |\n|---|---|---|---|---|---|\n";
        for ((status, label, engine, reason), (n, passes)) in why {
            let _ = writeln!(
                s,
                "| {status} | {label} | {engine} | {passes} | {n} | {reason} |"
            );
        }
    }
    if !figures.is_empty() {
        s += "\n## Figures\n\n";
        for f in figures
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "svg"))
        {
            let name = f
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            let _ = writeln!(s, "![{name}](figures/{name})");
        }
    }
    s
}

/// Points `(x, y)` of `rows` (ok or diverged) for a figure, one series per `name(row)`.
fn lines(rows: &[&Row], x: &str, y: &str, name: impl Fn(&Row) -> String) -> Lines {
    let mut l = Lines::new();
    for r in rows {
        if !matches!(r.str("status"), "ok" | "diverged") {
            continue;
        }
        let (xv, yv) = (
            if x == "worlds" || x == "horizon_steps" {
                r.u64(x) as f64
            } else {
                r.f64(x)
            },
            r.f64(y),
        );
        if xv > 0.0 && yv.is_finite() && yv > 0.0 {
            l.entry(name(r)).or_default().push((xv, yv, false));
        }
    }
    for pts in l.values_mut() {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    l
}

/// Draw the three figures per scene (`throughput_vs_worlds__<scene>`,
/// `memory_vs_worlds__<scene>`, `memory_vs_horizon__<scene>`, each `.svg` and `.png`).
///
/// # Errors
/// A drawing or file error, as text.
pub fn draw(dir: &Path, rows: &[Row]) -> Result<Vec<PathBuf>, String> {
    let scenes: BTreeSet<&str> = rows.iter().map(|r| r.scene_label()).collect();
    let mut written = Vec::new();
    for scene in scenes {
        let part = file_part(scene);
        let of = |pass: &[&str]| -> Vec<&Row> {
            rows.iter()
                .filter(|r| r.scene_label() == scene && pass.contains(&r.str("pass")))
                .collect()
        };
        let speed = of(&["forward", "forward_backward"]);
        let name = |r: &Row| {
            let unit = if r.str("pass") == "forward" {
                "steps"
            } else {
                "iterations"
            };
            format!(
                "{} {} {} ({unit})",
                r.str("label"),
                r.str("engine"),
                r.str("pass")
            )
        };
        let mut t = lines(&speed, "worlds", "world_steps_per_s", name);
        t.extend(lines(&speed, "worlds", "world_iterations_per_s", name));
        if !t.is_empty() {
            written.extend(draw_lines(
                dir,
                &format!("throughput_vs_worlds__{part}"),
                &format!("{scene}: throughput against worlds"),
                "worlds",
                "world-steps or world-iterations per second",
                true,
                &t,
            )?);
        }
        let m = lines(&speed, "worlds", "memory_bytes", |r| {
            format!("{} {} {}", r.str("label"), r.str("engine"), r.str("pass"))
        });
        if !m.is_empty() {
            written.extend(draw_lines(
                dir,
                &format!("memory_vs_worlds__{part}"),
                &format!("{scene}: peak memory against worlds (heap on CPU, device on GPU)"),
                "worlds",
                "bytes",
                true,
                &m,
            )?);
        }
        let (tape, budget): (Vec<&Row>, Vec<&Row>) = of(&["tape"])
            .into_iter()
            .partition(|r| r.u64("iteration_budget") == 0);
        let b = lines(&budget, "iteration_budget", "tape_bytes", |r| {
            format!(
                "{} {} ({} worlds, {} steps)",
                r.str("label"),
                r.str("engine"),
                r.u64("worlds"),
                r.u64("horizon_steps")
            )
        });
        if !b.is_empty() {
            written.extend(draw_lines(
                dir,
                &format!("memory_vs_iteration_budget__{part}"),
                &format!("{scene}: reverse-mode tape against the solver's iteration budget"),
                "iterations per step",
                "tape bytes",
                true,
                &b,
            )?);
        }
        let h = lines(&tape, "horizon_steps", "tape_bytes", |r| {
            format!(
                "{} {} ({} worlds)",
                r.str("label"),
                r.str("engine"),
                r.u64("worlds")
            )
        });
        if !h.is_empty() {
            written.extend(draw_lines(
                dir,
                &format!("memory_vs_horizon__{part}"),
                &format!("{scene}: reverse-mode tape against the horizon"),
                "horizon (steps)",
                "tape bytes",
                true,
                &h,
            )?);
        }
    }
    Ok(written)
}

/// Draw the figures and write `report.md` for `rows`; returns the paths written.
///
/// # Errors
/// A drawing or file error, as text (the report is still written when only a figure fails).
pub fn write_outputs(
    dir: &Path,
    rows: &[Row],
    cfg: &ExperimentConfig,
) -> Result<Vec<PathBuf>, String> {
    let (mut written, fig_err) = match draw(dir, rows) {
        Ok(w) => (w, None),
        Err(e) => (Vec::new(), Some(format!("figures not drawn: {e}"))),
    };
    let manifest = Manifest::read(dir);
    let mut text = render(rows, cfg, &manifest, &written);
    text += &manifest.grid_section();
    if let Some(e) = &fig_err {
        let _ = writeln!(text, "\n**Figures are missing**: {e}");
    }
    let path = dir.join("report.md");
    write_atomic(&path, text.as_bytes()).map_err(|e| e.to_string())?;
    written.push(path);
    match fig_err {
        Some(e) => Err(e),
        None => Ok(written),
    }
}

/// `contactlab report DIR` for a throughput folder: rows from `runs.parquet`, or, when an
/// interrupted run left none, from the finished cells of the last run's grid.
///
/// # Errors
/// No rows, unreadable files, drawing or file errors, as text.
pub fn redraw(dir: &Path, cfg: &ExperimentConfig) -> Result<Vec<PathBuf>, String> {
    let rows = match crate::results::read_runs_with(dir, COLUMNS) {
        Ok(rows) => rows,
        Err(_) => {
            let ids: BTreeSet<String> = Manifest::read(dir).cell_ids.into_iter().collect();
            let mut rows = crate::report::cells_in(dir).map_err(|e| e.to_string())?;
            rows.retain(|r| ids.is_empty() || ids.contains(r.str("cell_id")));
            if rows.is_empty() {
                return Err(format!(
                    "{}: no runs.parquet and no finished cells",
                    dir.display()
                ));
            }
            crate::results::write_runs_with(dir, &rows, COLUMNS).map_err(|e| e.to_string())?;
            rows
        }
    };
    write_outputs(dir, &rows, cfg)
}
