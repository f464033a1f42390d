//! Running a gradient study: cells grouped by problem (one reference per group), groups in
//! parallel on a local rayon pool, each cell's row written durably when it finishes, so a
//! killed run resumes where it stopped (the same folder layout and lock as
//! [`crate::runner::run`]).
//!
//! Per group: build the scene and the problem, roll it out once (the nominal rollout: its
//! unconverged steps go in every row, and a divergence makes every row `diverged`), compute the
//! reference ([`reference::reference`]) if some cell of the group is scored, then each cell's
//! method, its cost measured ([`crate::heap::measure`], wall time), scored against the
//! reference. A `fd_central` cell whose step is one of the reference's reuses the reference
//! sweep's estimate at that step (the same rollouts), with the sweep's wall time at that step.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use contactlab_scenarios::gradient::methods::{self, Method};
use contactlab_scenarios::gradient::reference::{self, score, Reference};
use contactlab_scenarios::gradient::FormulationRef;
use rayon::prelude::*;
use serde_json::json;

use super::{expand, GradientCell, GradientStudy};
use crate::catalog::Catalog;
use crate::config::to_yaml;
use crate::results::{
    lock_dir, read_cell, remove_stale_temps, write_atomic, write_cell, write_runs, Kind, Manifest,
    ResultsError, Row,
};
use crate::runner::{catch_quietly, identity, RunOptions, RunSummary};
use crate::sweep::Plan;

/// Run the gradient study of `plan` into `opts.dir` (module doc).
///
/// # Errors
/// As [`crate::runner::run`]: the folder locked by another process, a bad cell file, results
/// that cannot be written.
pub fn run(
    plan: &Plan,
    study: &GradientStudy,
    catalog: &Catalog,
    opts: &RunOptions,
) -> Result<RunSummary, ResultsError> {
    let dir = &opts.dir;
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |source| ResultsError::Io { path: p, source }
    };
    let _lock = lock_dir(dir)?;
    remove_stale_temps(dir)?;
    if opts.fresh {
        for sub in ["cells", "figures"] {
            let p = dir.join(sub);
            if p.exists() {
                std::fs::remove_dir_all(&p).map_err(io(&p))?;
            }
        }
        for f in [
            "runs.parquet",
            "runs.csv",
            "report.md",
            "manifest.json",
            "config.resolved.yaml",
        ] {
            let _ = std::fs::remove_file(dir.join(f));
        }
    }
    std::fs::create_dir_all(dir.join("cells")).map_err(io(dir))?;
    let text = std::fs::read_to_string(&plan.file).unwrap_or_default();
    let cells =
        expand(&plan.file, &text, &plan.config, study, &plan.cells, catalog).map_err(|e| {
            ResultsError::Table {
                path: plan.file.clone(),
                message: e.to_string(),
            }
        })?;
    write_atomic(
        &dir.join("config.resolved.yaml"),
        to_yaml(&plan.config).unwrap_or_default().as_bytes(),
    )?;
    let mut manifest = Manifest::describe(&plan.config.name, opts.jobs);
    let mine = shard_cells(&cells, opts.shard.as_ref());
    let mut done = std::collections::BTreeSet::new();
    for c in &mine {
        if read_cell(dir, &c.id)?.is_some() {
            done.insert(c.id.clone());
        }
    }
    manifest.cells_total = cells.len();
    manifest.cells_resumed = done.len();
    manifest.cell_ids = cells.iter().map(|c| c.id.clone()).collect();
    manifest.set_shard(opts.shard.as_ref(), mine.len());
    manifest.write(dir)?;

    let mut groups: BTreeMap<&str, Vec<&GradientCell>> = BTreeMap::new();
    for c in mine.iter().copied().filter(|c| !done.contains(&c.id)) {
        groups.entry(c.problem_key.as_str()).or_default().push(c);
    }
    // Longest problems first, so the pool does not end on one long group.
    let mut groups: Vec<Vec<&GradientCell>> = groups.into_values().collect();
    groups.sort_by_key(|g| std::cmp::Reverse(g[0].steps));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.jobs.max(1))
        .build()
        .expect("a rayon pool with a positive thread count builds");
    let finished = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let first_error: Mutex<Option<ResultsError>> = Mutex::new(None);
    pool.install(|| {
        groups.par_iter().for_each(|group| {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let rows = catch_quietly(|| run_group(plan, study, catalog, group, opts.jobs))
                .unwrap_or_else(|p| {
                    let why = p
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    group
                        .iter()
                        .map(|c| {
                            finish(
                                base_row(plan, c, opts.jobs),
                                "failed",
                                &format!("panicked: {why}"),
                            )
                        })
                        .collect()
                });
            for (c, row) in group.iter().zip(rows) {
                if let Err(e) = write_cell(dir, &c.id, &row) {
                    first_error.lock().expect("not poisoned").get_or_insert(e);
                    stop.store(true, Ordering::SeqCst);
                    return;
                }
                let n = finished.fetch_add(1, Ordering::SeqCst) + 1;
                if opts.stop_after.is_some_and(|k| n >= k) {
                    stop.store(true, Ordering::SeqCst);
                }
            }
        });
    });
    if let Some(e) = first_error.into_inner().expect("not poisoned") {
        return Err(e);
    }
    let mut rows = Vec::new();
    for c in &mine {
        rows.extend(read_cell(dir, &c.id)?);
    }
    write_runs(dir, &rows)?;
    manifest.end = crate::results::now_utc();
    manifest.write(dir)?;
    let outputs_error = crate::report::write_outputs(dir, &rows, &plan.config).err();
    let count = |s: &str| rows.iter().filter(|r| r.str("status") == s).count();
    Ok(RunSummary {
        total: mine.len(),
        resumed: done.len(),
        ran: finished.load(Ordering::SeqCst),
        ok: count("ok"),
        diverged: count("diverged"),
        failed: count("failed"),
        skipped: count("skipped"),
        remaining: mine.len() - rows.len(),
        outputs_error,
    })
}

/// The cells of `cells` that `shard` runs (all without one), in grid order: the cells of one
/// problem, which share its rollouts, are one unit ([`crate::shard`]).
pub fn shard_cells<'a>(
    cells: &'a [GradientCell],
    shard: Option<&crate::shard::Shard>,
) -> Vec<&'a GradientCell> {
    crate::shard::select(shard, cells.iter().collect(), |c| c.problem_key.as_str())
}

/// The identity and study columns of a cell's row.
fn base_row(plan: &Plan, c: &GradientCell, threads: usize) -> Row {
    let mut base = c.base.clone();
    base.id = c.id.clone();
    base.horizon_s = c.steps as f64 * c.base.timestep_s;
    let mut row = identity(plan, &base, threads);
    row.set_str("study", "gradient");
    row.set_str("method", c.method.name());
    row.set_f64("fd_step_rel", c.method.step().unwrap_or(f64::NAN));
    row.set_u64("horizon_steps", c.steps as u64);
    row.set_str("loss", &c.loss);
    row.set_str("grad_inputs", json!(c.inputs).to_string());
    row
}

/// Set status and reason and fill every column not yet set (NaN, 0, "").
fn finish(mut row: Row, status: &str, reason: &str) -> Row {
    row.set_str("status", status);
    row.set_str("reason", reason);
    for c in crate::results::COLUMNS.iter().chain(super::COLUMNS) {
        if !row.0.contains_key(c.name) {
            match c.kind {
                Kind::F64 => row.set_f64(c.name, f64::NAN),
                Kind::U64 => row.set_u64(c.name, 0),
                Kind::Str => row.set_str(c.name, ""),
            }
        }
    }
    row
}

fn json_list(xs: &[f64]) -> String {
    json!(xs
        .iter()
        .map(|x| if x.is_finite() {
            json!(x)
        } else {
            serde_json::Value::Null
        })
        .collect::<Vec<_>>())
    .to_string()
}

fn set_reference(row: &mut Row, r: &Reference) {
    row.set_str("reference_gradient", json_list(&r.gradient));
    row.set_str("reference_steps", json_list(&r.step));
    let est: Vec<serde_json::Value> = r
        .sweep
        .estimates
        .iter()
        .map(|e| serde_json::from_str(&json_list(e)).unwrap_or_default())
        .collect();
    row.set_str(
        "reference_sweep",
        json!({
            "steps": r.sweep.steps,
            "estimates": est,
            "rounding": r.sweep.rounding,
        })
        .to_string(),
    );
    row.set_f64("reference_uncertainty_rel", r.max_uncertainty());
}

/// Every row of one group (cells sharing a problem), in the group's order.
fn run_group(
    plan: &Plan,
    study: &GradientStudy,
    catalog: &Catalog,
    group: &[&GradientCell],
    threads: usize,
) -> Vec<Row> {
    let first = group[0];
    let rows = |status: &str, why: &str| {
        group
            .iter()
            .map(|c| finish(base_row(plan, c, threads), status, why))
            .collect::<Vec<_>>()
    };
    let scene = match catalog.build_scene(&first.base.scene, &first.base.scene_params) {
        Ok(s) => s,
        Err(e) => return rows("failed", &e),
    };
    let problem = match first.problem(&scene) {
        Ok(p) => p,
        Err(e) => return rows("failed", &e),
    };
    let fparams = &first.base.formulation_params;
    let build = || catalog.build_formulation(&first.base.formulation, fparams);
    let f = FormulationRef {
        name: &first.base.formulation,
        params: fparams,
        build: &build,
    };
    let ignored = catalog
        .build_formulation(&first.base.formulation, fparams)
        .map(|f| contactlab_solvers::features::joined(&f.ignored_features(&scene.model)))
        .unwrap_or_default();
    // The harness's divergence rules (DESIGN.md "Measurements": energy rise beyond the scene's
    // allowance, penetration beyond half the smallest geom extent, a speed beyond the scene's
    // bound, a non-finite state), applied to the nominal rollout as every stability cell
    // applies them: a gradient through a rollout that has blown up is not scored, its rows are
    // `diverged` with the rule that fired.
    let mut acc = crate::metrics::Accumulator::new(&scene, &problem.initial);
    let nominal = match problem.simulate_observed(&build, None, &mut |m, s, r| acc.observe(m, s, r))
    {
        Ok(n) => n,
        Err(e) => return rows("failed", &e),
    };
    let mut steps = study.reference.steps.clone();
    steps.sort_by(|a, b| b.total_cmp(a));
    let needs_reference = nominal.diverged.is_none() && group.iter().any(|c| c.skipped.is_none());
    let (reference, ref_heap) = if needs_reference {
        let (r, heap) = crate::heap::measure(|| {
            reference::reference(&problem, f, &steps, study.reference.max_uncertainty)
        });
        (Some(r), heap)
    } else {
        (None, None)
    };
    group
        .iter()
        .map(|c| {
            let mut row = base_row(plan, c, threads);
            row.set_str("ignored_features", &ignored);
            row.set_u64("steps", nominal.steps as u64);
            row.set_f64("simulated_time_s", nominal.steps as f64 * problem.h);
            row.set_u64("grad_unconverged_steps", nominal.unconverged as u64);
            row.set_u64("nonconverged_steps", nominal.unconverged as u64);
            if let Some(why) = &c.skipped {
                return finish(row, "skipped", why);
            }
            if let Some(why) = &nominal.diverged {
                return finish(row, "diverged", why);
            }
            let r = match &reference {
                Some(Ok(r)) => r,
                Some(Err(e)) => return finish(row, "failed", e),
                None => return finish(row, "failed", "no reference"),
            };
            set_reference(&mut row, r);
            let reused = match c.method {
                Method::FdCentral(s) => r.sweep.steps.iter().position(|&x| x == s).map(|j| {
                    (
                        methods::Gradient {
                            gradient: r.sweep.estimates[j].clone(),
                            wall_s: r.sweep.wall_s[j],
                            rollouts: 2 * problem.inputs.len(),
                            unconverged: r.sweep.unconverged[j],
                            note: "from the reference sweep".into(),
                        },
                        ref_heap,
                    )
                }),
                _ => None,
            };
            let (g, heap) = match reused {
                Some(x) => (Ok(x.0), x.1),
                None => crate::heap::measure(|| methods::compute(c.method, &problem, f)),
            };
            let g = match g {
                Ok(g) => g,
                Err(e) => return finish(row, "failed", &e),
            };
            row.set_str("gradient", json_list(&g.gradient));
            row.set_u64("grad_rollouts", g.rollouts as u64);
            row.set_f64("grad_wall_time_s", g.wall_s);
            row.set_f64("grad_peak_heap_bytes", heap.map_or(f64::NAN, |b| b as f64));
            row.set_str("grad_note", &g.note);
            let s = score(&g.gradient, r);
            row.set_f64("grad_norm", s.norm);
            row.set_u64("grad_nonfinite", s.nonfinite as u64);
            if let Some(why) = &r.undefined {
                return finish(row, "undefined_reference", why);
            }
            row.set_f64("grad_max_rel_error", s.max_relative);
            row.set_f64("grad_norm_rel_error", s.norm_relative);
            row.set_f64("grad_cosine", s.cosine);
            row.set_f64("grad_sign_agreement", s.sign_agreement);
            finish(row, "ok", "")
        })
        .collect()
}
