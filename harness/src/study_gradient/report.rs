//! `report.md` and figures of a gradient study, from stored rows alone.
//!
//! * Main table: per scene, formulation and method (the FD methods at the step closest to
//!   [`MAIN_FD_STEP`]), over the cells scored (`ok`): the worst and the median max relative
//!   error, the worst norm relative error, the lowest cosine and sign agreement, the cells by
//!   status, the nominal rollouts' unconverged steps, the median wall time and the largest peak
//!   heap.
//! * FD-step curves: per scene and formulation, at the longest horizon and smallest timestep,
//!   the central-difference estimates of the first input at every step of the reference sweep
//!   and the step the reference selected (the box_slide hop pattern shows here).
//! * Figures per scene (one series per formulation and method, x on a log axis, y the max
//!   relative error; `undefined_reference` and failed cells are left out):
//!   `grad_error_vs_horizon__<scene>` (smallest timestep), `grad_error_vs_timestep__<scene>`
//!   (longest horizon in steps), `grad_error_vs_fd_step__<scene>` (fd methods, longest horizon,
//!   smallest timestep: the V curve).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::GradientStudy;
use crate::config::ExperimentConfig;
use crate::figures::{draw_lines, file_part, Lines};
use crate::results::{write_atomic, Row};

/// The FD step shown in the main table (the swept step closest to it in log scale).
pub const MAIN_FD_STEP: f64 = 1e-6;

/// The per-cell table stops after this many rows (every row is in runs.csv).
pub const MAX_CELL_ROWS: usize = 400;

fn num(x: f64) -> String {
    if x.is_nan() {
        "–".into()
    } else if x == 0.0 {
        "0".into()
    } else if x.abs() >= 1e4 || x.abs() < 1e-3 {
        format!("{x:.2e}")
    } else {
        format!("{x:.4}")
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.retain(|x| !x.is_nan());
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        0.5 * (xs[n / 2 - 1] + xs[n / 2])
    }
}

/// The series of a row: formulation label (with sweep values) and method, with the FD step.
pub fn series(r: &Row) -> String {
    let s = r.f64("fd_step_rel");
    if s.is_nan() {
        format!("{} {}", r.series(), r.str("method"))
    } else {
        format!("{} {} {s:e}", r.series(), r.str("method"))
    }
}

/// The FD step of `rows` closest to [`MAIN_FD_STEP`] (log scale), if any row has one.
fn main_step(rows: &[&Row]) -> Option<f64> {
    rows.iter()
        .map(|r| r.f64("fd_step_rel"))
        .filter(|s| s.is_finite())
        .min_by(|a, b| {
            (a.log10() - MAIN_FD_STEP.log10())
                .abs()
                .total_cmp(&(b.log10() - MAIN_FD_STEP.log10()).abs())
        })
}

/// Rows of the main table: those of non-FD methods and FD rows at the main step.
fn main_rows<'a>(rows: &[&'a Row]) -> Vec<&'a Row> {
    let step = main_step(rows);
    rows.iter()
        .copied()
        .filter(|r| r.f64("fd_step_rel").is_nan() || Some(r.f64("fd_step_rel")) == step)
        .collect()
}

fn max_nan(xs: impl Iterator<Item = f64>) -> f64 {
    xs.fold(f64::NAN, |m, x| {
        if x.is_nan() {
            m
        } else if m.is_nan() {
            x
        } else {
            m.max(x)
        }
    })
}

fn min_nan(xs: impl Iterator<Item = f64>) -> f64 {
    xs.fold(f64::NAN, |m, x| {
        if x.is_nan() {
            m
        } else if m.is_nan() {
            x
        } else {
            m.min(x)
        }
    })
}

/// The main table (module doc), as Markdown.
pub fn main_table(rows: &[Row]) -> String {
    let all: Vec<&Row> = rows.iter().collect();
    let mut groups: BTreeMap<(String, String, String), Vec<&Row>> = BTreeMap::new();
    for r in main_rows(&all) {
        let m = match r.f64("fd_step_rel") {
            s if s.is_nan() => r.str("method").to_string(),
            s => format!("{} ({s:e})", r.str("method")),
        };
        groups
            .entry((r.scene_label().to_string(), r.series(), m))
            .or_default()
            .push(r);
    }
    let mut s = String::from("| scene | formulation | method | cells ok / undefined ref. / skipped / other | worst max rel. error | median max rel. error | worst norm rel. error | min cosine | min sign agreement | unconverged steps | median wall (ms) | max peak heap (KiB) |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for ((scene, label, method), rs) in groups {
        let ok: Vec<&&Row> = rs.iter().filter(|r| r.str("status") == "ok").collect();
        let n = |st: &str| rs.iter().filter(|r| r.str("status") == st).count();
        let other = rs.len() - n("ok") - n("undefined_reference") - n("skipped");
        if n("skipped") == rs.len() {
            let why = rs[0].str("reason");
            let _ = writeln!(
                s,
                "| {scene} | {label} | {method} | 0 / 0 / {} / 0 | skipped: {why} | | | | | | | |",
                rs.len()
            );
            continue;
        }
        let unconverged: u64 = rs
            .iter()
            .filter(|r| r.str("status") != "skipped")
            .map(|r| r.u64("grad_unconverged_steps"))
            .sum();
        let _ = writeln!(
            s,
            "| {scene} | {label} | {method} | {} / {} / {} / {other} | {} | {} | {} | {} | {} | {unconverged} | {} | {} |",
            n("ok"),
            n("undefined_reference"),
            n("skipped"),
            num(max_nan(ok.iter().map(|r| r.f64("grad_max_rel_error")))),
            num(median(ok.iter().map(|r| r.f64("grad_max_rel_error")).collect())),
            num(max_nan(ok.iter().map(|r| r.f64("grad_norm_rel_error")))),
            num(min_nan(ok.iter().map(|r| r.f64("grad_cosine")))),
            num(min_nan(ok.iter().map(|r| r.f64("grad_sign_agreement")))),
            num(1e3 * median(rs.iter().map(|r| r.f64("grad_wall_time_s")).collect())),
            num(max_nan(rs.iter().map(|r| r.f64("grad_peak_heap_bytes") / 1024.0))),
        );
    }
    s
}

/// The FD-step table (module doc), as Markdown.
fn fd_step_table(rows: &[Row]) -> String {
    let mut best: BTreeMap<(String, String), &Row> = BTreeMap::new();
    for r in rows.iter().filter(|r| !r.str("reference_sweep").is_empty()) {
        let key = (r.scene_label().to_string(), r.series());
        let better = |o: &Row| {
            (r.u64("horizon_steps"), -r.f64("timestep_s"))
                > (o.u64("horizon_steps"), -o.f64("timestep_s"))
        };
        if best.get(&key).is_none_or(|o| better(o)) {
            best.insert(key, r);
        }
    }
    let mut s = String::new();
    let mut header_steps: Option<Vec<f64>> = None;
    for ((scene, label), r) in best {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(r.str("reference_sweep")) else {
            continue;
        };
        let steps: Vec<f64> = v["steps"]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
            .unwrap_or_default();
        let est: Vec<f64> = v["estimates"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| e[0].as_f64().unwrap_or(f64::NAN))
                    .collect()
            })
            .unwrap_or_default();
        if header_steps.as_ref() != Some(&steps) {
            let cols: Vec<String> = steps.iter().map(|x| format!("{x:e}")).collect();
            let _ = writeln!(s, "\n| scene | formulation | h (s) | N | input | {} | selected step | uncertainty | status |\n|---|---|---|---|---|{}---|---|---|", cols.join(" | "), "---|".repeat(steps.len()));
            header_steps = Some(steps.clone());
        }
        let input = serde_json::from_str::<Vec<String>>(r.str("grad_inputs"))
            .ok()
            .and_then(|v| v.first().cloned())
            .unwrap_or_default();
        let sel = serde_json::from_str::<Vec<Option<f64>>>(r.str("reference_steps"))
            .ok()
            .and_then(|v| v.first().copied().flatten());
        let cells: Vec<String> = est
            .iter()
            .map(|&x| {
                if x.is_nan() {
                    "–".into()
                } else {
                    format!("{x:.8}")
                }
            })
            .collect();
        let status = if r.str("status") == "undefined_reference" {
            "undefined"
        } else {
            "defined"
        };
        let _ = writeln!(
            s,
            "| {scene} | {label} | {} | {} | {input} | {} | {} | {} | {status} |",
            r.f64("timestep_s"),
            r.u64("horizon_steps"),
            cells.join(" | "),
            sel.map_or("–".into(), |x| format!("{x:e}")),
            num(r.f64("reference_uncertainty_rel")),
        );
    }
    s
}

/// The `fd_central` method's estimate of the first input at each of its steps (the study's
/// and the case's `fd_steps`, e.g. box_slide's 5e-5), at the longest horizon and smallest
/// timestep of each scene and formulation, beside the reference's value: the FD-step curve as
/// values, where a step that lands on the wrong side of a non-smooth point shows its wrong
/// value.
fn fd_method_table(rows: &[Row]) -> String {
    type Key = (String, String);
    let mut groups: BTreeMap<Key, Vec<&Row>> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| r.str("method") == "fd_central" && r.str("status") == "ok")
    {
        groups
            .entry((r.scene_label().to_string(), r.series()))
            .or_default()
            .push(r);
    }
    let first = |r: &Row, col: &str| -> f64 {
        serde_json::from_str::<Vec<Option<f64>>>(r.str(col))
            .ok()
            .and_then(|v| v.first().copied().flatten())
            .unwrap_or(f64::NAN)
    };
    let mut s = String::from(
        "| scene | formulation | h (s) | N | input | reference | fd_central by relative step |\n|---|---|---|---|---|---|---|\n",
    );
    for ((scene, label), rs) in groups {
        let key = |r: &Row| (r.u64("horizon_steps"), -r.f64("timestep_s"));
        let Some(top) = rs
            .iter()
            .map(|r| key(r))
            .max_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal))
        else {
            continue;
        };
        let mut at: Vec<&Row> = rs.iter().copied().filter(|r| key(r) == top).collect();
        at.sort_by(|a, b| b.f64("fd_step_rel").total_cmp(&a.f64("fd_step_rel")));
        let input = serde_json::from_str::<Vec<String>>(at[0].str("grad_inputs"))
            .ok()
            .and_then(|v| v.first().cloned())
            .unwrap_or_default();
        let values: Vec<String> = at
            .iter()
            .map(|r| format!("{:e}: {:.8}", r.f64("fd_step_rel"), first(r, "gradient")))
            .collect();
        let _ = writeln!(
            s,
            "| {scene} | {label} | {} | {} | {input} | {:.8} | {} |",
            -top.1,
            top.0,
            first(at[0], "reference_gradient"),
            values.join(", ")
        );
    }
    s
}

fn cell_table(rows: &[Row]) -> String {
    let mut s = String::from("| scene | formulation | h (s) | N | method | FD step | status | max rel. error | norm rel. error | cosine | sign agr. | ref. uncertainty | grad norm | unconverged | wall (ms) | reason |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows.iter().take(MAX_CELL_ROWS) {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.scene_label(),
            r.series(),
            r.f64("timestep_s"),
            r.u64("horizon_steps"),
            r.str("method"),
            num(r.f64("fd_step_rel")),
            r.str("status"),
            num(r.f64("grad_max_rel_error")),
            num(r.f64("grad_norm_rel_error")),
            num(r.f64("grad_cosine")),
            num(r.f64("grad_sign_agreement")),
            num(r.f64("reference_uncertainty_rel")),
            num(r.f64("grad_norm")),
            r.u64("grad_unconverged_steps"),
            num(1e3 * r.f64("grad_wall_time_s")),
            r.str("reason").replace('|', "/"),
        );
    }
    if rows.len() > MAX_CELL_ROWS {
        let _ = writeln!(
            s,
            "\n({} more rows in runs.csv)",
            rows.len() - MAX_CELL_ROWS
        );
    }
    s
}

/// The text of `report.md`.
pub fn render(rows: &[Row], cfg: &ExperimentConfig, figures: &[PathBuf]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# {}\n\n{}\n", cfg.name, cfg.description);
    let statuses: BTreeSet<&str> = rows.iter().map(|r| r.str("status")).collect();
    let counts: Vec<String> = statuses
        .iter()
        .map(|st| {
            format!(
                "{} {st}",
                rows.iter().filter(|r| r.str("status") == *st).count()
            )
        })
        .collect();
    let _ = writeln!(
        s,
        "Gradient study: {} cells: {}.\n",
        rows.len(),
        counts.join(", ")
    );
    let _ = writeln!(s, "Errors are against the f64 central-difference reference (per input, the FD step whose estimate agrees best with its neighbour's; that disagreement is its uncertainty). max rel. error = max_i |g_i − r_i| / max(|r_i|, 1e-6 max|r|). FD methods at the step closest to {MAIN_FD_STEP:e} here; every step is in runs.csv, the FD-step figures and (values of the first input) the step-curve tables below. Unconverged: steps of the nominal rollouts whose solver did not meet its stopping test (there the adjoint is not a derivative).\n");
    let _ = writeln!(s, "## Main table\n\n{}", main_table(rows));
    let _ = writeln!(s, "## Finite-difference step curves\n\nCentral differences of the first input at each relative step of the reference sweep, at the longest horizon and smallest timestep of each scene and formulation.\n{}", fd_step_table(rows));
    let _ = writeln!(s, "The `fd_central` method at each of its steps (the study's and the case's `fd_steps`), same cells, beside the reference:\n\n{}", fd_method_table(rows));
    if !figures.is_empty() {
        let _ = writeln!(s, "## Figures\n");
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
        s.push('\n');
    }
    let _ = writeln!(s, "## Cells\n\n{}", cell_table(rows));
    s
}

/// One figure's lines from `rows`: x from `x_of`, y the max relative error of ok rows.
fn lines_of(rows: &[&Row], x_of: &dyn Fn(&Row) -> f64) -> Lines {
    let mut acc: BTreeMap<String, BTreeMap<u64, (f64, bool)>> = BTreeMap::new();
    for r in rows {
        let e = acc
            .entry(series(r))
            .or_default()
            .entry(x_of(r).to_bits())
            .or_insert((f64::NAN, false));
        match r.str("status") {
            "ok" => {
                let v = r.f64("grad_max_rel_error");
                e.0 = if e.0.is_nan() { v } else { e.0.max(v) };
            }
            "diverged" => e.1 = true,
            _ => {}
        }
    }
    acc.into_iter()
        .map(|(k, m)| {
            let mut pts: Vec<(f64, f64, bool)> = m
                .into_iter()
                .map(|(b, (v, d))| (f64::from_bits(b), v, d))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            (k, pts)
        })
        .collect()
}

/// Draw the figures (module doc) and write `report.md`; returns the paths written.
///
/// # Errors
/// A drawing or file error, as text (the report is still written, saying so).
pub fn write_outputs(
    dir: &Path,
    rows: &[Row],
    cfg: &ExperimentConfig,
    _study: &GradientStudy,
) -> Result<Vec<PathBuf>, String> {
    let mut written = Vec::new();
    let mut figure_error = None;
    let scenes: BTreeSet<&str> = rows.iter().map(|r| r.scene_label()).collect();
    for scene in scenes {
        let rs: Vec<&Row> = rows
            .iter()
            .filter(|r| r.scene_label() == scene && r.str("status") != "skipped")
            .collect();
        let h_min = rs
            .iter()
            .map(|r| r.f64("timestep_s"))
            .fold(f64::INFINITY, f64::min);
        let n_max = rs.iter().map(|r| r.u64("horizon_steps")).max().unwrap_or(0);
        let main = main_rows(&rs);
        let at_h: Vec<&Row> = main
            .iter()
            .copied()
            .filter(|r| r.f64("timestep_s") == h_min)
            .collect();
        let at_n: Vec<&Row> = main
            .iter()
            .copied()
            .filter(|r| r.u64("horizon_steps") == n_max)
            .collect();
        let fd: Vec<&Row> = rs
            .iter()
            .copied()
            .filter(|r| {
                r.f64("fd_step_rel").is_finite()
                    && r.f64("timestep_s") == h_min
                    && r.u64("horizon_steps") == n_max
            })
            .collect();
        let fd_lines: Lines = {
            let mut acc: Lines = BTreeMap::new();
            for (k, pts) in lines_of(&fd, &|r| r.f64("fd_step_rel")) {
                // One series per formulation and method: the step is the x axis here.
                let key = k.rsplit_once(' ').map_or(k.clone(), |(a, _)| a.to_string());
                acc.entry(key).or_default().extend(pts);
            }
            acc.values_mut()
                .for_each(|v| v.sort_by(|a, b| a.0.total_cmp(&b.0)));
            acc
        };
        let figs = [
            (
                "grad_error_vs_horizon",
                format!("{scene}: gradient error vs horizon (h = {h_min} s)"),
                "horizon (steps)",
                lines_of(&at_h, &|r| r.u64("horizon_steps") as f64),
            ),
            (
                "grad_error_vs_timestep",
                format!("{scene}: gradient error vs timestep (N = {n_max})"),
                "timestep (s)",
                lines_of(&at_n, &|r| r.f64("timestep_s")),
            ),
            (
                "grad_error_vs_fd_step",
                format!("{scene}: error vs FD step (N = {n_max}, h = {h_min} s)"),
                "relative FD step",
                fd_lines,
            ),
        ];
        for (kind, title, x_label, data) in figs {
            if data.is_empty() {
                continue;
            }
            let stem = format!("{kind}__{}", file_part(scene));
            match draw_lines(
                dir,
                &stem,
                &title,
                x_label,
                "max relative error vs reference",
                true,
                &data,
            ) {
                Ok(paths) => written.extend(paths),
                Err(e) => figure_error = Some(e),
            }
        }
    }
    let mut text = render(rows, cfg, &written);
    text += &crate::results::Manifest::read(dir).grid_section();
    if let Some(e) = &figure_error {
        let _ = writeln!(text, "\n**Figures are missing**: {e}");
    }
    let path = dir.join("report.md");
    if let Err(e) = write_atomic(&path, text.as_bytes()) {
        let _ = std::fs::remove_file(&path);
        return Err(format!("report not written: {e}"));
    }
    written.push(path);
    match figure_error {
        Some(e) => Err(format!("figures not drawn: {e}")),
        None => Ok(written),
    }
}
