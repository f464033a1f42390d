//! `report.md` and the per-experiment derived quantities, from stored rows alone.
//!
//! * Largest stable timestep of a (scene, formulation label): the largest swept timestep `h`
//!   such that every cell at every timestep ≤ `h` finished with status `ok` (DESIGN.md).
//! * Largest accurate timestep: the largest swept timestep whose cells are all `ok` with
//!   `traj_error_mean` ≤ the experiment's `accuracy_threshold`.
//! * Beside each, the share of steps whose solver did not meet its stopping test there
//!   (`nonconverged_steps / steps`): non-convergence is data, not divergence (DESIGN.md), so a
//!   "stable" verdict is read together with it; a stable timestep that is the largest swept
//!   one is marked, since the limit may lie beyond the sweep.
//! * Largest usable timestep (box traversal): the Ostrich paper's usability test as a second
//!   accuracy threshold ([`crate::usability`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use contactlab_scenarios::benchmark::cube_toss::SAMPLE_DT_S;

use crate::config::{self, ExperimentConfig, FigureKind};
use crate::results::{
    column, lock_dir, read_cell, read_runs, remove_stale_temps, write_atomic, write_runs, Manifest,
    ResultsError, Row,
};

/// Largest stable and accurate timesteps (s) of one (scene, label); `None`: no such timestep.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Scene name.
    pub scene: String,
    /// Formulation label.
    pub label: String,
    /// Largest stable timestep (s).
    pub stable_s: Option<f64>,
    /// Largest accurate timestep (s); `None` also when no error was measured.
    pub accurate_s: Option<f64>,
    /// Whether any trajectory error was measured.
    pub has_error: bool,
    /// The largest timestep swept (s).
    pub largest_swept_s: f64,
    /// Share of non-converged steps over the cells at the largest stable timestep.
    pub nonconverged_at_stable: f64,
    /// Share of non-converged steps over the cells at the largest accurate timestep.
    pub nonconverged_at_accurate: f64,
}

/// Share of steps whose solver did not converge over `rows` (NaN without steps).
fn nonconverged_share(rows: &[&Row]) -> f64 {
    let steps: u64 = rows.iter().map(|r| r.u64("steps")).sum();
    let bad: u64 = rows.iter().map(|r| r.u64("nonconverged_steps")).sum();
    if steps == 0 {
        f64::NAN
    } else {
        bad as f64 / steps as f64
    }
}

/// Derive [`Limits`] for every (scene, label) in `rows`.
pub fn limits(rows: &[Row], threshold: f64) -> Vec<Limits> {
    let mut groups: BTreeMap<(String, String), BTreeMap<u64, Vec<&Row>>> = BTreeMap::new();
    // A skipped cell (its engine cannot run it) says nothing about stability or accuracy.
    for r in rows.iter().filter(|r| r.str("status") != "skipped") {
        groups
            .entry((r.scene_label().to_string(), r.series()))
            .or_default()
            .entry(r.f64("timestep_s").to_bits())
            .or_default()
            .push(r);
    }
    groups
        .into_iter()
        .map(|((scene, label), by_h)| {
            let mut hs: Vec<(f64, Vec<&Row>)> = by_h
                .into_iter()
                .map(|(b, v)| (f64::from_bits(b), v))
                .collect();
            hs.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut stable_s = None;
            for (h, rs) in &hs {
                if rs.iter().all(|r| r.str("status") == "ok") {
                    stable_s = Some(*h);
                } else {
                    break;
                }
            }
            let has_error = rows_have_error(&hs);
            let accurate_s = hs
                .iter()
                .filter(|(_, rs)| {
                    rs.iter()
                        .all(|r| r.str("status") == "ok" && r.f64("traj_error_mean") <= threshold)
                })
                .map(|(h, _)| *h)
                .fold(None, |m: Option<f64>, h| Some(m.map_or(h, |m| m.max(h))));
            let share_at = |h: Option<f64>| {
                h.and_then(|h| hs.iter().find(|(x, _)| *x == h))
                    .map_or(f64::NAN, |(_, rs)| nonconverged_share(rs))
            };
            Limits {
                scene,
                label,
                stable_s,
                accurate_s,
                has_error,
                largest_swept_s: hs.last().map_or(f64::NAN, |(h, _)| *h),
                nonconverged_at_stable: share_at(stable_s),
                nonconverged_at_accurate: share_at(accurate_s),
            }
        })
        .collect()
}

fn rows_have_error(hs: &[(f64, Vec<&Row>)]) -> bool {
    hs.iter()
        .flat_map(|(_, rs)| rs.iter())
        .any(|r| r.f64("traj_error_mean").is_finite())
}

/// The per-cell table of report.md stops after this many rows (every row is in runs.csv).
pub const MAX_CELL_ROWS: usize = 300;

/// Columns of the per-cell table when the experiment lists no `metrics`.
pub const DEFAULT_REPORT_METRICS: &[&str] = &[
    "max_penetration_m",
    "energy_drift_j",
    "traj_error_mean",
    "traj_error_final",
    "cone_excess_max_ns",
    "ncp_max_j",
    "iterations_mean",
    "steps_per_s",
];

fn fmt_num(x: f64) -> String {
    if x.is_nan() {
        "–".into()
    } else if x == 0.0 {
        "0".into()
    } else if x.abs() >= 1e4 || x.abs() < 1e-3 {
        format!("{x:.3e}")
    } else {
        format!("{x:.4}")
    }
}

fn fmt_h(h: Option<f64>) -> String {
    h.map_or("none".into(), |h| format!("{h}"))
}

/// The text of `report.md`.
pub fn render(
    rows: &[Row],
    cfg: &ExperimentConfig,
    manifest: &Manifest,
    figures: &[PathBuf],
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# {}\n\n{}\n", cfg.name, cfg.description);
    let count = |st: &str| rows.iter().filter(|r| r.str("status") == st).count();
    let skipped = match count("skipped") {
        0 => String::new(),
        n => format!(", {n} skipped (their engine cannot run them; see the reasons below)"),
    };
    let _ = writeln!(
        s,
        "{} cells: {} ok, {} diverged, {} failed{skipped}.\n",
        rows.len(),
        count("ok"),
        count("diverged"),
        count("failed")
    );
    let _ = writeln!(s, "## Largest stable and accurate timestep\n");
    let _ = writeln!(
        s,
        "Stable: every timestep up to it ran without divergence (non-finite state, energy rise, deep penetration, speed bound); \"(largest swept)\": the limit may lie beyond the sweep. Accurate: mean trajectory error ≤ {} (accuracy_threshold). Non-converged: share of the steps at that timestep whose solver did not meet its stopping test (data, not divergence).\n",
        cfg.accuracy_threshold
    );
    let _ = writeln!(s, "| scene | formulation | largest stable timestep (s) | non-converged there | largest accurate timestep (s) | non-converged there |\n|---|---|---|---|---|---|");
    let pct = |x: f64| {
        if x.is_nan() {
            "–".to_string()
        } else {
            format!("{:.1} %", 100.0 * x)
        }
    };
    for l in limits(rows, cfg.accuracy_threshold) {
        let acc = if l.has_error {
            fmt_h(l.accurate_s)
        } else {
            "n/a (no reference)".into()
        };
        let mut stable = fmt_h(l.stable_s);
        if l.stable_s == Some(l.largest_swept_s) {
            stable += " (largest swept)";
        }
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            l.scene,
            l.label,
            stable,
            pct(l.nonconverged_at_stable),
            acc,
            if l.has_error {
                pct(l.nonconverged_at_accurate)
            } else {
                "–".into()
            }
        );
    }
    crate::usability::write_table(&mut s, rows);
    toss_table(&mut s, rows);
    task_table(&mut s, rows);
    ignored_table(&mut s, rows);
    let metrics: Vec<&str> = if cfg.metrics.is_empty() {
        DEFAULT_REPORT_METRICS.to_vec()
    } else {
        cfg.metrics.iter().map(String::as_str).collect()
    };
    let _ = writeln!(s, "\n## Metrics per cell\n");
    let with_toss = rows.iter().any(|r| !r.str("toss").is_empty());
    let mut metrics = metrics;
    if with_toss && !metrics.contains(&"toss") {
        metrics.insert(0, "toss");
    }
    let _ = writeln!(
        s,
        "Units are in the column names; definitions: `contactlab list`.\n"
    );
    let _ = write!(s, "| scene | formulation | timestep_s | seed | status |");
    for m in &metrics {
        let _ = write!(s, " {m} |");
    }
    let _ = write!(s, "\n|---|---|---|---|---|");
    for _ in &metrics {
        let _ = write!(s, "---|");
    }
    s.push('\n');
    for r in rows.iter().take(MAX_CELL_ROWS) {
        let _ = write!(
            s,
            "| {} | {} | {} | {} | {} |",
            r.scene_label(),
            r.series(),
            r.f64("timestep_s"),
            r.u64("seed"),
            r.str("status")
        );
        for m in &metrics {
            let v = match column(m).map(|c| c.kind) {
                Some(crate::results::Kind::Str) => r.str(m).to_string(),
                _ => fmt_num(r.f64(m)),
            };
            let _ = write!(s, " {v} |");
        }
        s.push('\n');
    }
    if rows.len() > MAX_CELL_ROWS {
        let _ = writeln!(
            s,
            "\n{} more cells are in runs.csv and runs.parquet (the table stops at {MAX_CELL_ROWS} rows).",
            rows.len() - MAX_CELL_ROWS
        );
    }
    let mut analytic: BTreeMap<(String, String), String> = BTreeMap::new();
    for r in rows {
        if let Ok(serde_json::Value::Object(m)) =
            serde_json::from_str::<serde_json::Value>(r.str("analytic"))
        {
            for (name, v) in m {
                analytic
                    .entry((
                        r.scene_label().to_string(),
                        r.str("scene_params").to_string() + " " + &name,
                    ))
                    .or_insert_with(|| {
                        format!(
                            "| {} | {} | {} | {} | {} |",
                            r.scene_label(),
                            r.str("scene_params"),
                            name,
                            fmt_num(v[0].as_f64().unwrap_or(f64::NAN)),
                            v[1].as_str().unwrap_or("")
                        )
                    });
            }
        }
    }
    if !analytic.is_empty() {
        let _ = writeln!(s, "\n### Closed-form values of the scenes\n\n| scene | parameters | quantity | value | formula |\n|---|---|---|---|---|");
        for line in analytic.values() {
            let _ = writeln!(s, "{line}");
        }
    }
    let bad: Vec<&Row> = rows.iter().filter(|r| r.str("status") != "ok").collect();
    if !bad.is_empty() {
        let _ = writeln!(s, "\n### Diverged, failed and skipped cells\n\n| scene | formulation | timestep_s | seed | toss | status | reason |\n|---|---|---|---|---|---|---|");
        let n_bad = bad.len();
        for r in bad.into_iter().take(MAX_CELL_ROWS) {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.scene_label(),
                r.series(),
                r.f64("timestep_s"),
                r.u64("seed"),
                r.str("toss"),
                r.str("status"),
                r.str("reason").replace('|', "\\|")
            );
        }
        if n_bad > MAX_CELL_ROWS {
            let _ = writeln!(
                s,
                "\n{} more are in runs.csv (`status`, `reason`).",
                n_bad - MAX_CELL_ROWS
            );
        }
    }
    if !figures.is_empty() {
        let _ = writeln!(s, "\n## Figures\n");
        for f in figures
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "svg"))
        {
            let name = f
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            let _ = writeln!(s, "![{name}](figures/{})", name.replace(' ', "%20"));
        }
    }
    let _ = writeln!(s, "\n## Provenance\n");
    let _ = writeln!(
        s,
        "- revision: {}\n- contactlab-harness version: {}\n- host: {} ({} cores, {} threads)\n- start: {}\n- end: {}\n- command: `{}`\n- cells resumed from an earlier run: {}",
        manifest.revision,
        manifest.version,
        manifest.host,
        manifest.cores,
        manifest.threads,
        manifest.start,
        manifest.end,
        manifest.command_line,
        manifest.cells_resumed
    );
    s += &manifest.grid_note();
    let _ = writeln!(
        s,
        "- configuration: `config.resolved.yaml`; rows: `runs.parquet`, `runs.csv`"
    );
    s
}

/// Aggregates over recorded tosses of one (scene, formulation series, timestep).
#[derive(Debug, Clone, PartialEq)]
pub struct TossAggregate {
    /// Scene name.
    pub scene: String,
    /// Formulation series (label and sweep point).
    pub label: String,
    /// Timestep (s).
    pub timestep_s: f64,
    /// Cells (tosses) in the group.
    pub tosses: usize,
    /// Cells that finished `ok`; the statistics are over these.
    pub ok: usize,
    /// Mean and median over ok tosses of `traj_pos_error_mean_pct_width` (% of cube width).
    pub pos_pct: [f64; 2],
    /// Mean and median over ok tosses of `traj_rot_error_mean_deg` (deg).
    pub rot_deg: [f64; 2],
}

/// Mean and median of `xs` (NaN when empty); NaN entries are skipped.
fn mean_median(mut xs: Vec<f64>) -> [f64; 2] {
    xs.retain(|x| !x.is_nan());
    if xs.is_empty() {
        return [f64::NAN; 2];
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    let median = if n % 2 == 1 {
        xs[n / 2]
    } else {
        0.5 * (xs[n / 2 - 1] + xs[n / 2])
    };
    [xs.iter().sum::<f64>() / n as f64, median]
}

/// Aggregate the rows that carry a `toss` per (scene, series, timestep): mean and median over
/// the tosses whose cells finished `ok`.
pub fn toss_aggregates(rows: &[Row]) -> Vec<TossAggregate> {
    let mut groups: BTreeMap<(String, String, u64), Vec<&Row>> = BTreeMap::new();
    for r in rows.iter().filter(|r| !r.str("toss").is_empty()) {
        groups
            .entry((
                r.scene_label().to_string(),
                r.series(),
                r.f64("timestep_s").to_bits(),
            ))
            .or_default()
            .push(r);
    }
    let mut out: Vec<TossAggregate> = groups
        .into_iter()
        .map(|((scene, label, h), rs)| {
            let ok: Vec<&&Row> = rs.iter().filter(|r| r.str("status") == "ok").collect();
            TossAggregate {
                scene,
                label,
                timestep_s: f64::from_bits(h),
                tosses: rs.len(),
                ok: ok.len(),
                pos_pct: mean_median(
                    ok.iter()
                        .map(|r| r.f64("traj_pos_error_mean_pct_width"))
                        .collect(),
                ),
                rot_deg: mean_median(
                    ok.iter()
                        .map(|r| r.f64("traj_rot_error_mean_deg"))
                        .collect(),
                ),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        (a.scene.as_str(), a.label.as_str())
            .cmp(&(b.scene.as_str(), b.label.as_str()))
            .then(b.timestep_s.total_cmp(&a.timestep_s))
    });
    out
}

/// Two decimals, or "–" for NaN (no ok toss).
fn fmt2(x: f64) -> String {
    if x.is_nan() {
        "–".into()
    } else {
        format!("{x:.2}")
    }
}

/// The "Recorded tosses" section of the report (nothing when no row has a toss).
/// Task outcomes of the benchmark scenes (the `task` column): per (scene, series, timestep) the
/// mean of each outcome over the cells that finished ok (0/1 outcomes become success rates).
fn task_table(s: &mut String, rows: &[Row]) {
    type Key = (String, String, u64);
    let mut groups: BTreeMap<Key, (usize, usize, BTreeMap<String, (f64, usize)>)> = BTreeMap::new();
    let mut names_by_scene: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in rows {
        let Ok(serde_json::Value::Object(m)) =
            serde_json::from_str::<serde_json::Value>(r.str("task"))
        else {
            continue;
        };
        if m.is_empty() {
            continue;
        }
        let names = names_by_scene
            .entry(r.scene_label().to_string())
            .or_default();
        for k in m.keys() {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
        let g = groups
            .entry((
                r.scene_label().to_string(),
                r.series(),
                r.f64("timestep_s").to_bits(),
            ))
            .or_default();
        g.1 += 1;
        if r.str("status") != "ok" {
            continue;
        }
        g.0 += 1;
        for (k, v) in m {
            if let Some(x) = v.as_f64().filter(|x| x.is_finite()) {
                let e = g.2.entry(k).or_insert((0.0, 0));
                e.0 += x;
                e.1 += 1;
            }
        }
    }
    if groups.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Task outcomes\n");
    let _ = writeln!(
        s,
        "Each benchmark scene's own task measures at the end of the run (`task` column; `contactlab list` documents it), averaged over the cells that finished ok; a 0/1 outcome (success, held) becomes a rate.\n"
    );
    for (scene, names) in &names_by_scene {
        let _ = write!(s, "| scene | formulation | timestep_s | cells ok / run |");
        for n in names {
            let _ = write!(s, " {n} |");
        }
        let _ = write!(s, "\n|---|---|---|---|");
        for _ in names {
            let _ = write!(s, "---|");
        }
        s.push('\n');
        for ((sc, series, hb), (ok, run, sums)) in &groups {
            if sc != scene {
                continue;
            }
            let _ = write!(
                s,
                "| {sc} | {series} | {} | {ok} / {run} |",
                f64::from_bits(*hb)
            );
            for n in names {
                let v = sums.get(n).map_or(f64::NAN, |(t, c)| t / *c as f64);
                let _ = write!(s, " {} |", fmt_num(v));
            }
            s.push('\n');
        }
        s.push('\n');
    }
}

/// The section listing, per scene and formulation label, the model features the formulation
/// stepped the scene without (column `ignored_features`); nothing when no cell ignored any.
fn ignored_table(s: &mut String, rows: &[Row]) {
    // One line per distinct list (scene parameters can change what a model carries).
    let seen: std::collections::BTreeSet<(String, String, String)> = rows
        .iter()
        .filter(|r| !r.str("ignored_features").is_empty())
        .map(|r| {
            (
                r.scene_label().to_string(),
                r.series(),
                r.str("ignored_features").to_string(),
            )
        })
        .collect();
    if seen.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Model features the formulations ignore\n");
    let _ = writeln!(
        s,
        "These cells ran without the listed features of their model (column `ignored_features`; definitions: `contactlab list`): their results describe the model without them.\n"
    );
    let _ = writeln!(
        s,
        "| scene | formulation | ignored features |\n|---|---|---|"
    );
    for (scene, label, ignored) in seen {
        let _ = writeln!(s, "| {scene} | {label} | {} |", ignored.replace('|', "\\|"));
    }
}

fn toss_table(s: &mut String, rows: &[Row]) {
    let aggs = toss_aggregates(rows);
    if aggs.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Recorded tosses\n");
    let _ = writeln!(
        s,
        "Error of each simulated toss against its recording, at the recorded samples: position as % of the cube width (0.1048 m), rotation as the angle of q_sim⁻¹ q_data (deg), each averaged over the samples of a toss; then the mean and median over the tosses whose cells finished ok. Substeps = (1/148 s) / timestep.\n"
    );
    let _ = writeln!(s, "| scene | formulation | timestep_s | substeps | tosses ok / run | position error mean (% width) | median (% width) | rotation error mean (deg) | median (deg) |\n|---|---|---|---|---|---|---|---|---|");
    for a in aggs {
        let substeps = SAMPLE_DT_S / a.timestep_s;
        let substeps = if (substeps - substeps.round()).abs() < 1e-6 {
            format!("{}", substeps.round())
        } else {
            format!("{substeps:.3}")
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} / {} | {} | {} | {} | {} |",
            a.scene,
            a.label,
            a.timestep_s,
            substeps,
            a.ok,
            a.tosses,
            fmt2(a.pos_pct[0]),
            fmt2(a.pos_pct[1]),
            fmt2(a.rot_deg[0]),
            fmt2(a.rot_deg[1])
        );
    }
}

/// Redraw the figures and `report.md` of the results folder `dir` from stored rows alone:
/// `runs.parquet` if present, otherwise the finished cells in `cells/` of the last run's grid
/// (`manifest.json`'s `cell_ids`; then `runs.parquet` and `runs.csv` are written from them
/// first). Holds the folder's lock meanwhile (a run writing
/// into it is refused, and so is this while one runs). Returns the paths written.
///
/// # Errors
/// The folder in use by another process, no rows, unreadable files, a drawing or write error,
/// as text.
pub fn redraw(dir: &Path) -> Result<Vec<PathBuf>, String> {
    if !dir.is_dir() {
        return Err(format!("{}: no such results folder", dir.display()));
    }
    let _lock = lock_dir(dir).map_err(|e| e.to_string())?;
    remove_stale_temps(dir).map_err(|e| e.to_string())?;
    let cfg_path = dir.join("config.resolved.yaml");
    let cfg = std::fs::read_to_string(&cfg_path)
        .map_err(|e| format!("{}: {e} (is this a results folder?)", cfg_path.display()))
        .and_then(|t| config::parse(&cfg_path, &t).map_err(|e| e.to_string()))?;
    if cfg.study.is_control_synthesis() {
        return crate::study_control::redraw(dir, &cfg);
    }
    if cfg.study.is_throughput() {
        return crate::study_throughput::report::redraw(dir, &cfg);
    }
    let rows = match read_runs(dir) {
        Ok(rows) => rows,
        Err(_) => {
            // Only the rows of the last run's grid: `cells/` keeps those of earlier grids too.
            let ids = Manifest::read(dir).cell_ids;
            let mut rows = cells_in(dir).map_err(|e| e.to_string())?;
            if !ids.is_empty() {
                let ids: std::collections::BTreeSet<&str> =
                    ids.iter().map(String::as_str).collect();
                rows.retain(|r| ids.contains(r.str("cell_id")));
            }
            if rows.is_empty() {
                return Err(format!(
                    "{}: no runs.parquet and no finished cells",
                    dir.display()
                ));
            }
            write_runs(dir, &rows).map_err(|e| e.to_string())?;
            rows
        }
    };
    write_outputs(dir, &rows, &cfg)
}

/// Write `runs.parquet` / `runs.csv` of `dir` from `rows` with the schema of `cfg`'s study,
/// then draw the figures and write `report.md` as that study does (`contactlab merge`).
///
/// # Errors
/// A table that cannot be written; a figure or report that cannot be drawn is the returned
/// value's error (the rows are written regardless).
pub fn write_study_outputs(
    dir: &Path,
    cfg: &ExperimentConfig,
    rows: &[Row],
) -> Result<Result<Vec<PathBuf>, String>, crate::results::ResultsError> {
    Ok(if cfg.study.is_control_synthesis() {
        crate::results::write_runs_with(dir, rows, crate::study_control::COLUMNS)?;
        crate::study_control::write_outputs(dir, rows, cfg)
    } else if cfg.study.is_throughput() {
        crate::results::write_runs_with(dir, rows, crate::study_throughput::COLUMNS)?;
        crate::study_throughput::report::write_outputs(dir, rows, cfg)
    } else {
        write_runs(dir, rows)?;
        write_outputs(dir, rows, cfg)
    })
}

/// Draw figures and write `report.md` for `rows`; returns the paths written.
///
/// A figure that cannot be drawn does not leave an old report behind: `report.md` is still
/// written from `rows`, saying which figures are missing and why, and the error is returned.
/// A `report.md` that cannot be written is removed, so that no stale one stays.
///
/// # Errors
/// A drawing or file error, as text.
pub fn write_outputs(
    dir: &Path,
    rows: &[Row],
    cfg: &ExperimentConfig,
) -> Result<Vec<PathBuf>, String> {
    if let config::Study::Gradient(study) = &cfg.study {
        return crate::study_gradient::report::write_outputs(dir, rows, cfg, study);
    }
    let kinds: Vec<FigureKind> = cfg.figures.clone();
    let (mut written, figure_error) = match crate::figures::draw_all(dir, rows, &kinds) {
        Ok(w) => (w, None),
        Err(e) => (Vec::new(), Some(format!("figures not drawn: {e}"))),
    };
    let manifest = Manifest::read(dir);
    let mut text = render(rows, cfg, &manifest, &written);
    if let Some(e) = &figure_error {
        let _ = writeln!(
            text,
            "
**Figures are missing**: {e}"
        );
    }
    let path = dir.join("report.md");
    if let Err(e) = write_atomic(&path, text.as_bytes()) {
        let _ = std::fs::remove_file(&path);
        return Err(match figure_error {
            Some(f) => format!("{f}; report not written: {e}"),
            None => format!("report not written: {e}"),
        });
    }
    written.push(path);
    match figure_error {
        Some(e) => Err(e),
        None => Ok(written),
    }
}

/// Rows of every finished cell file in `dir/cells`, sorted by scene, label, timestep, seed.
///
/// # Errors
/// A cell file that is not the row of the cell it is named for ([`read_cell`]).
pub fn cells_in(dir: &Path) -> Result<Vec<Row>, ResultsError> {
    let Ok(rd) = std::fs::read_dir(dir.join("cells")) else {
        return Ok(Vec::new());
    };
    let mut rows: Vec<Row> = Vec::new();
    for e in rd.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().to_string();
        if let Some(id) = name
            .strip_suffix(".json")
            .filter(|_| !name.starts_with('.'))
        {
            rows.extend(read_cell(dir, id)?);
        }
    }
    rows.sort_by(|a, b| {
        (
            a.scene_label(),
            a.str("label"),
            a.f64("timestep_s"),
            a.u64("seed"),
        )
            .partial_cmp(&(
                b.scene_label(),
                b.str("label"),
                b.f64("timestep_s"),
                b.u64("seed"),
            ))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(h: f64, status: &str, err: f64) -> Row {
        let mut r = Row::default();
        r.set_str("scene", "s");
        r.set_str("label", "f");
        r.set_f64("timestep_s", h);
        r.set_str("status", status);
        r.set_f64("traj_error_mean", err);
        r
    }

    #[test]
    fn toss_errors_aggregate_per_label_and_timestep_over_ok_cells() {
        let toss = |id: &str, h: f64, status: &str, pos: f64, rot: f64| {
            let mut r = row(h, status, pos);
            r.set_str("toss", id);
            r.set_f64("traj_pos_error_mean_pct_width", pos);
            r.set_f64("traj_rot_error_mean_deg", rot);
            r
        };
        let rows = vec![
            toss("toss_001", 0.01, "ok", 1.0, 10.0),
            toss("toss_002", 0.01, "ok", 2.0, 20.0),
            toss("toss_005", 0.01, "ok", 6.0, 60.0),
            toss("toss_007", 0.01, "diverged", 100.0, 100.0),
            toss("toss_001", 0.001, "ok", 3.0, 5.0),
            toss("toss_002", 0.001, "ok", 5.0, 7.0),
            row(0.01, "ok", 1.0),
        ];
        let a = toss_aggregates(&rows);
        assert_eq!(a.len(), 2);
        assert_eq!((a[0].timestep_s, a[0].tosses, a[0].ok), (0.01, 4, 3));
        assert_eq!(a[0].pos_pct, [3.0, 2.0]);
        assert_eq!(a[0].rot_deg, [30.0, 20.0]);
        assert_eq!(a[1].pos_pct, [4.0, 4.0]);
        assert_eq!(a[1].rot_deg, [6.0, 6.0]);
    }

    #[test]
    fn largest_stable_is_below_the_first_divergence() {
        let rows = vec![
            row(0.001, "ok", 1e-4),
            row(0.002, "ok", 1e-3),
            row(0.005, "diverged", f64::NAN),
            row(0.01, "ok", 0.5),
        ];
        let l = &limits(&rows, 2e-3)[0];
        assert_eq!(l.stable_s, Some(0.002));
        assert_eq!(l.accurate_s, Some(0.002));
        let l = &limits(&rows, 1.0)[0];
        assert_eq!(
            l.accurate_s,
            Some(0.01),
            "accurate is the largest accurate timestep, not a prefix"
        );
    }
}
