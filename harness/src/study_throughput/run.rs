//! Running the throughput study: one cell at a time on the whole worker pool, each measured
//! (module doc of [`super`]), written to `cells/<id>.json` the moment it finishes (a rerun
//! resumes), then merged into `runs.parquet` / `runs.csv` with the report and figures.

use std::path::Path;
use std::time::{Duration, Instant};

use contactlab_scenarios::gradient::methods::{self, Method};
use contactlab_scenarios::gradient::{FormulationRef, Input, Loss, Problem};
use contactlab_scenarios::Scene;
use contactlab_solvers::engine::Stepper;
use nalgebra::DVector;
use rayon::prelude::*;

use super::{Pass, ThroughputCell, ThroughputPlan, COLUMNS};
use crate::catalog::Catalog;
use crate::results::{
    lock_dir, read_cell, remove_stale_temps, write_atomic, write_cell, Kind, Manifest,
    ResultsError, Row,
};
use crate::runner::{catch_quietly, cell_stepper, CellError, RunOptions, RunSummary};

/// Where an engine computes, as the `backend` column says it.
pub fn backend(engine: &str) -> &'static str {
    match engine {
        "cpu" => "cpu (f64, rayon)",
        "burn-ndarray" => "ndarray (f64)",
        "burn-wgpu" => "wgpu (f32)",
        "burn-cuda" => "cuda (f32)",
        _ => "unknown",
    }
}

fn is_gpu(engine: &str) -> bool {
    matches!(engine, "burn-wgpu" | "burn-cuda")
}

/// Run the study into `opts.dir` (resumable, like [`crate::runner::run`]).
///
/// # Errors
/// The folder locked by another process, a bad cell file, or results that cannot be written.
pub fn run(
    plan: &ThroughputPlan,
    catalog: &Catalog,
    opts: &RunOptions,
) -> Result<RunSummary, ResultsError> {
    let dir = &opts.dir;
    let _lock = lock_dir(dir)?;
    remove_stale_temps(dir)?;
    let io = |p: &Path, source| ResultsError::Io {
        path: p.to_path_buf(),
        source,
    };
    if opts.fresh {
        for sub in ["cells", "figures"] {
            let p = dir.join(sub);
            if p.exists() {
                std::fs::remove_dir_all(&p).map_err(|e| io(&p, e))?;
            }
        }
        for f in ["runs.parquet", "runs.csv", "report.md", "manifest.json"] {
            let _ = std::fs::remove_file(dir.join(f));
        }
    }
    std::fs::create_dir_all(dir.join("cells")).map_err(|e| io(dir, e))?;
    let resolved = crate::config::to_yaml(&plan.config).unwrap_or_default();
    write_atomic(&dir.join("config.resolved.yaml"), resolved.as_bytes())?;
    let mut manifest = Manifest::describe(&plan.config.name, opts.jobs);
    let mine = shard_cells(plan, opts.shard.as_ref());
    let mut todo = Vec::new();
    for c in &mine {
        if read_cell(dir, &c.id)?.is_none() {
            todo.push(*c);
        }
    }
    let resumed = mine.len() - todo.len();
    manifest.cells_total = plan.cells.len();
    manifest.cells_resumed = resumed;
    manifest.cell_ids = plan.cells.iter().map(|c| c.id.clone()).collect();
    manifest.set_shard(opts.shard.as_ref(), mine.len());
    manifest.write(dir)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.jobs.max(1))
        .build()
        .expect("a rayon pool with a positive thread count builds");
    let started = Instant::now();
    let mut ran = 0;
    for (k, cell) in todo.iter().enumerate() {
        // One cell at a time, each on the whole pool: the cells measure speed.
        let mut row = pool.install(|| run_cell(plan, cell, catalog, opts.jobs));
        row.set_f64("peak_rss_mib", crate::metrics::peak_rss_mib());
        write_cell(dir, &cell.id, &row)?;
        ran += 1;
        if opts.progress {
            eprintln!(
                "{}/{} {} {} {} {} worlds {}: {} {} ({:.0} s)",
                k + 1,
                todo.len(),
                cell.grid.scene_label,
                cell.grid.label,
                cell.grid.engine,
                cell.grid.worlds,
                cell.pass.name(),
                row.str("status"),
                headline(&row),
                started.elapsed().as_secs_f64()
            );
        }
        if opts.stop_after.is_some_and(|n| ran >= n) {
            break;
        }
    }
    let mut rows = Vec::new();
    for c in &mine {
        rows.extend(read_cell(dir, &c.id)?);
    }
    crate::results::write_runs_with(dir, &rows, COLUMNS)?;
    manifest.end = crate::results::now_utc();
    manifest.write(dir)?;
    let outputs_error = super::report::write_outputs(dir, &rows, &plan.config).err();
    let count = |s: &str| rows.iter().filter(|r| r.str("status") == s).count();
    Ok(RunSummary {
        total: mine.len(),
        resumed,
        ran,
        ok: count("ok"),
        diverged: count("diverged"),
        failed: count("failed"),
        skipped: count("skipped"),
        remaining: mine.len() - rows.len(),
        outputs_error,
    })
}

/// The cells of `plan` that `shard` runs (all without one), in grid order: one unit per cell,
/// each measured alone ([`crate::shard`]).
pub fn shard_cells<'a>(
    plan: &'a ThroughputPlan,
    shard: Option<&crate::shard::Shard>,
) -> Vec<&'a ThroughputCell> {
    crate::shard::select(shard, plan.cells.iter().collect(), |c| c.id.as_str())
}

/// The progress line's number: the cell's throughput.
fn headline(r: &Row) -> String {
    let (x, unit) = match r.str("pass") {
        "forward" => (r.f64("world_steps_per_s"), "world-steps/s"),
        _ => (r.f64("world_iterations_per_s"), "world-iterations/s"),
    };
    if x.is_finite() {
        format!("{x:.3e} {unit}, {:.3e} B", r.f64("memory_bytes"))
    } else {
        r.str("reason").to_string()
    }
}

fn identity(plan: &ThroughputPlan, cell: &ThroughputCell, threads: usize) -> Row {
    let g = &cell.grid;
    let mut r = Row::default();
    r.set_str("cell_id", &cell.id);
    r.set_str("experiment", &plan.config.name);
    r.set_str("scene", &g.scene);
    r.set_str("scene_label", &g.scene_label);
    r.set_str("scene_params", g.scene_params.to_string());
    r.set_str("formulation", &g.formulation);
    r.set_str("label", &g.label);
    r.set_str("formulation_params", g.formulation_params.to_string());
    r.set_str("engine", &g.engine);
    r.set_str("backend", backend(&g.engine));
    r.set_u64("worlds", g.worlds as u64);
    r.set_f64("timestep_s", g.timestep_s);
    r.set_u64("seed", g.seed);
    r.set_u64("threads", threads as u64);
    r.set_str("pass", cell.pass.name());
    r.set_u64("horizon_steps", cell.horizon_steps as u64);
    r.set_u64(
        "iteration_budget",
        cell.iteration_budget.unwrap_or(0) as u64,
    );
    r
}

/// Run one cell to a row; never panics (a failure is a `failed` row).
pub fn run_cell(
    plan: &ThroughputPlan,
    cell: &ThroughputCell,
    catalog: &Catalog,
    threads: usize,
) -> Row {
    let mut row = identity(plan, cell, threads);
    let out = catch_quietly(|| measure(plan, cell, catalog, &mut row));
    let (status, reason) = match out {
        Ok(Ok(None)) => ("ok", String::new()),
        Ok(Ok(Some(why))) => ("diverged", why),
        Ok(Err(CellError::Skipped(why))) => ("skipped", why),
        Ok(Err(CellError::Failed(why))) => ("failed", why),
        Err(p) => (
            "failed",
            format!("panicked: {}", crate::runner::panic_text(&p)),
        ),
    };
    row.set_str("status", status);
    row.set_str("reason", reason);
    for c in COLUMNS {
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

/// Measure `cell` into `row`: `Ok(Some(why))` when a world's end state is not finite.
fn measure(
    plan: &ThroughputPlan,
    cell: &ThroughputCell,
    catalog: &Catalog,
    row: &mut Row,
) -> Result<Option<String>, CellError> {
    let scene = catalog.build_scene(&cell.grid.scene, &cell.grid.scene_params)?;
    // The engine's own refusal (a formulation or model element it lacks, a build without
    // its feature, no reverse mode) comes first, then the experiment's cap.
    contactlab_solvers::engine::check(&cell.grid.engine, &cell.grid.formulation, &scene.model)
        .map_err(|e| CellError::Skipped(e.to_string()))?;
    if cell.pass != Pass::Forward && cell.grid.engine == "cpu" {
        cpu_reverse_available(&cell.grid.formulation)?;
    }
    if let Some(cap) = &cell.over_cap {
        return Err(CellError::Skipped(format!(
            "over study.{cap} worlds (the experiment's cap for this engine and pass)"
        )));
    }
    match cell.pass {
        Pass::Forward => forward(plan, cell, catalog, &scene, row),
        Pass::ForwardBackward | Pass::Tape => {
            let iterations = if cell.pass == Pass::Tape {
                1
            } else {
                plan.spec.iterations
            };
            reverse(plan, cell, catalog, &scene, iterations, row)
        }
    }
}

/// Record the memory columns: `heap` (process heap peak above the start), and on GPU backends
/// the device's bytes in use and reserved.
fn set_memory(row: &mut Row, engine: &str, heap: Option<u64>, worlds: usize) {
    let heap = heap.map_or(f64::NAN, |b| b as f64);
    row.set_f64("host_heap_peak_bytes", heap);
    let (memory, source) = if is_gpu(engine) {
        match contactlab_solvers::engine::device_memory(engine) {
            Some(m) => {
                row.set_f64("device_reserved_bytes", m.reserved as f64);
                (
                    m.in_use as f64,
                    "device: bytes in use after the timed loop (CubeCL client)",
                )
            }
            None => (f64::NAN, "device: memory usage not available"),
        }
    } else if heap.is_finite() {
        (
            heap,
            "heap: process peak above the cell's start (counting allocator)",
        )
    } else {
        (
            f64::NAN,
            "heap: not measured (the counting allocator is installed by the contactlab binary only)",
        )
    };
    row.set_f64("memory_bytes", memory);
    row.set_str("memory_source", source);
    row.set_f64("memory_per_world_bytes", memory / worlds as f64);
}

/// The end states' non-finite worlds, as the diverged reason.
fn nonfinite(row: &mut Row, bad: usize, worlds: usize) -> Option<String> {
    row.set_u64("nonfinite_worlds", bad as u64);
    (bad > 0).then(|| format!("{bad} of {worlds} worlds end with a non-finite state"))
}

fn forward(
    plan: &ThroughputPlan,
    cell: &ThroughputCell,
    catalog: &Catalog,
    scene: &Scene,
    row: &mut Row,
) -> Result<Option<String>, CellError> {
    let (worlds, h) = (cell.grid.worlds, cell.grid.timestep_s);
    let budget = Duration::from_secs_f64(plan.spec.budget_s);
    let steps = plan.spec.steps;
    // The controls of every step, before timing: the scene's law at t_k on the initial state
    // (open loop; throughput cells never read states back mid-run), the same in every world.
    let controls: Vec<Vec<f64>> = (0..=steps)
        .map(|k| {
            let u = scene.controls_at(scene.initial.t + k as f64 * h, &scene.initial);
            u.iter().cycle().take(u.len() * worlds).copied().collect()
        })
        .collect();
    type Timed = (usize, Duration, usize, usize);
    let (out, heap) = crate::heap::measure_process(|| -> Result<Timed, CellError> {
        let mut stepper: Box<dyn Stepper> =
            cell_stepper(catalog, &cell.grid, scene, &scene.initial)?;
        // One untimed step: first-call costs (shader compilation on a GPU, pools).
        stepper.step(&controls[0], h, false);
        let t0 = Instant::now();
        let mut k = 0;
        while k < steps {
            stepper.step(&controls[k + 1], h, false);
            k += 1;
            if t0.elapsed() >= budget {
                break;
            }
        }
        let states = stepper.read_states();
        let wall = t0.elapsed();
        let bad = states.iter().filter(|s| !s.is_finite()).count();
        Ok((k, wall, bad, shards_of(stepper.as_ref())))
    });
    let (k, wall, bad, shards) = out?;
    row.set_u64("steps", k as u64);
    row.set_u64("shards", shards as u64);
    row.set_f64("wall_time_s", wall.as_secs_f64());
    row.set_f64(
        "world_steps_per_s",
        (worlds * k) as f64 / wall.as_secs_f64(),
    );
    set_memory(row, &cell.grid.engine, heap, worlds);
    Ok(nonfinite(row, bad, worlds))
}

/// Shards of a stepper (the cpu engine has none: 0).
fn shards_of(s: &dyn Stepper) -> usize {
    contactlab_solvers::engine::shards(s.engine(), s.worlds())
}

/// One forward+backward measurement: `iterations` iterations at most within the budget.
fn reverse(
    plan: &ThroughputPlan,
    cell: &ThroughputCell,
    catalog: &Catalog,
    scene: &Scene,
    iterations: usize,
    row: &mut Row,
) -> Result<Option<String>, CellError> {
    let g = &cell.grid;
    let (worlds, h, n) = (g.worlds, g.timestep_s, cell.horizon_steps);
    let budget = Duration::from_secs_f64(plan.spec.budget_s);
    let controls: Vec<Vec<f64>> = (0..n)
        .map(|k| scene.controls_at(scene.initial.t + k as f64 * h, &scene.initial))
        .collect();
    let live = || crate::heap::process_live();
    type One = ((f64, f64, usize, usize), Option<usize>);
    let one = |tape: &mut Option<f64>| -> Result<One, CellError> {
        if g.engine == "cpu" {
            return cpu_adjoint(catalog, scene, g, n, h, cell.iteration_budget, tape);
        }
        let initial = vec![scene.initial.clone(); worlds];
        let start = live();
        let mut after = None;
        let r = contactlab_solvers::engine::reverse_pass(
            &g.engine,
            &g.formulation,
            &g.formulation_params,
            cell.iteration_budget,
            &scene.model,
            &initial,
            &controls,
            h,
            &mut || after = live(),
        )
        .map_err(|e| CellError::Skipped(e.to_string()))?;
        *tape = match (r.device_tape_bytes, start, after) {
            (Some(d), _, _) => Some(d as f64),
            (None, Some(s), Some(a)) => Some((a - s).max(0) as f64),
            _ => None,
        };
        let bad = r
            .grad_v0
            .chunks(scene.model.nv.max(1))
            .filter(|g| !g.iter().all(|x| x.is_finite()))
            .count();
        Ok((
            (r.forward_s, r.backward_s, bad, r.shards),
            r.unconverged_steps,
        ))
    };
    type Timed = (usize, Duration, One, Option<f64>);
    let (out, heap) = crate::heap::measure_process(|| -> Result<Timed, CellError> {
        let mut tape = None;
        let t0 = Instant::now();
        let mut k = 0;
        let mut last = ((f64::NAN, f64::NAN, 0, 0), None);
        while k < iterations {
            last = one(&mut tape)?;
            k += 1;
            if t0.elapsed() >= budget {
                break;
            }
        }
        Ok((k, t0.elapsed(), last, tape))
    });
    let (k, wall, ((fwd, bwd, bad, shards), unconverged), tape) = out?;
    row.set_u64("iterations", k as u64);
    row.set_f64(
        "unconverged_steps",
        unconverged.map_or(f64::NAN, |u| u as f64),
    );
    row.set_u64("shards", shards as u64);
    row.set_f64("wall_time_s", wall.as_secs_f64());
    row.set_f64(
        "world_iterations_per_s",
        (worlds * k) as f64 / wall.as_secs_f64(),
    );
    row.set_f64("forward_s", fwd);
    row.set_f64("backward_s", bwd);
    let tape = tape.unwrap_or(f64::NAN);
    row.set_f64("tape_bytes", tape);
    row.set_f64("tape_per_world_step_bytes", tape / (worlds * n) as f64);
    set_memory(row, &g.engine, heap, worlds);
    row.0.remove("memory_source");
    let source = if is_gpu(&g.engine) {
        "device: bytes in use after the forward pass above those before it (CubeCL client)"
    } else if heap.is_some() {
        "heap: process peak above the cell's start (counting allocator)"
    } else {
        "heap: not measured (the counting allocator is installed by the contactlab binary only)"
    };
    if is_gpu(&g.engine) {
        // On a GPU the device memory of a reverse pass is its tape (plain reverse mode).
        row.set_f64("memory_bytes", tape);
        row.set_f64("memory_per_world_bytes", tape / worlds as f64);
    }
    row.set_str("memory_source", source);
    Ok(nonfinite(row, bad, worlds))
}

/// Whether the cpu engine has a reverse-mode gradient for `formulation` (ncp_fb's adjoint).
fn cpu_reverse_available(formulation: &str) -> Result<(), CellError> {
    methods::availability("adjoint", formulation).map_err(|why| {
        CellError::Skipped(format!(
            "the cpu engine has no reverse-mode gradient for {formulation} ({why}; finite differences are not a backward pass)"
        ))
    })
}

/// The cpu engine's forward+backward: ncp_fb's exact adjoint of the loss
/// `w · [q_N; v_N]` ([`contactlab_solvers::batched::reverse::loss_weights`]) with respect to
/// the initial velocities, one gradient per world, the worlds in parallel. Returns
/// `(NaN, NaN, non-finite gradients, 0 shards)`: the adjoint's forward and backward are timed
/// together (the cell's wall time).
fn cpu_adjoint(
    catalog: &Catalog,
    scene: &Scene,
    g: &crate::sweep::Cell,
    n: usize,
    h: f64,
    iteration_budget: Option<usize>,
    tape: &mut Option<f64>,
) -> Result<((f64, f64, usize, usize), Option<usize>), CellError> {
    cpu_reverse_available(&g.formulation)?;
    // An iteration budget is ncp_fb's Newton budget per solve.
    let mut params = g.formulation_params.clone();
    if let Some(b) = iteration_budget {
        if let Some(o) = params.as_object_mut() {
            o.insert("newton_iterations".into(), serde_json::json!(b));
        }
    }
    let m = &scene.model;
    let w = contactlab_solvers::engine::loss_weights(m.nq + m.nv);
    let loss = Loss::linear(
        "weighted final state",
        DVector::from_column_slice(&w[..m.nq]),
        DVector::from_column_slice(&w[m.nq..]),
    );
    let inputs = (0..m.nv).map(Input::Qvel).collect();
    let problem = Problem::from_scene("throughput", scene, n, h, loss, inputs);
    let build = || catalog.build_formulation(&g.formulation, &params);
    let f = FormulationRef {
        name: &g.formulation,
        params: &params,
        build: &build,
    };
    // One world's gradient runs on one thread: its tape is that thread's heap peak. The
    // process-wide peak would depend on how many worlds the pool happened to run at once.
    let results: Vec<_> = (0..g.worlds)
        .into_par_iter()
        .map(|_| crate::heap::measure(|| methods::compute(Method::Adjoint, &problem, f)))
        .collect();
    *tape = results
        .iter()
        .map(|(_, peak)| peak.map(|b| b as f64))
        .try_fold(0.0_f64, |acc, p| p.map(|p| acc.max(p)));
    let (mut bad, mut unconverged) = (0, 0);
    for (r, _) in results {
        let r = r.map_err(CellError::Failed)?;
        if !r.gradient.iter().all(|x| x.is_finite()) {
            bad += 1;
        }
        unconverged += r.unconverged;
    }
    Ok(((f64::NAN, f64::NAN, bad, 0), Some(unconverged)))
}
