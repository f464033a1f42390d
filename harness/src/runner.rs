//! Running an experiment: cells in parallel on a local rayon pool, each isolated (a failed,
//! diverged or panicking cell is recorded and the experiment goes on), each written durably the
//! moment it finishes, so a killed run loses only the cells in flight and a rerun resumes.
//!
//! Order of work: references first (one run per distinct scene/formulation/seed for
//! `same_formulation` references, only for cells still to do), then the cells, then the merge
//! into `runs.parquet` / `runs.csv`, the figures and the report.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use contactlab_scenarios::benchmark::cube_toss::CUBE_EDGE_M;
use contactlab_scenarios::benchmark::CubeTossParams;
use contactlab_scenarios::Scene;
use contactlab_solvers::engine::{CpuStepper, EngineError, Stepper};
use contactlab_solvers::Formulation;
use indicatif::{ProgressBar, ProgressStyle};
use rayon::prelude::*;

use crate::catalog::Catalog;
use crate::config::{to_yaml, ReferenceSpec};
use crate::metrics::{peak_rss_mib, Accumulator};
use crate::results::{
    lock_dir, read_cell, remove_stale_temps, write_atomic, write_cell, write_runs, Manifest,
    ResultsError, Row,
};
use crate::shard::{self, Shard};
use crate::sweep::{Cell, Plan};
use crate::trajectory::{state_error, StepLog, Trajectory};

/// How to run an experiment.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The experiment's results folder (`results/<name>`).
    pub dir: PathBuf,
    /// Worker threads (the local rayon pool's size), ≥ 1.
    pub jobs: usize,
    /// Delete earlier results of this experiment first instead of resuming.
    pub fresh: bool,
    /// Show a progress bar on stderr (hidden anyway when stderr is not a terminal).
    pub progress: bool,
    /// Stop starting new cells once this many have finished in this run (cells in flight still
    /// finish). For tests of resumption; `None` runs everything.
    pub stop_after: Option<usize>,
    /// Run only this shard's cells (`--shard I/N`, [`crate::shard`]); `None` runs them all.
    pub shard: Option<Shard>,
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunSummary {
    /// Cells of this run: the grid, or the shard's part of it.
    pub total: usize,
    /// Cells found finished by an earlier run and not recomputed.
    pub resumed: usize,
    /// Cells computed by this run.
    pub ran: usize,
    /// Rows by status, over all finished cells.
    pub ok: usize,
    /// Diverged cells.
    pub diverged: usize,
    /// Failed cells.
    pub failed: usize,
    /// Cells their engine cannot run (rows with the reason).
    pub skipped: usize,
    /// Cells still unfinished (only with `stop_after`).
    pub remaining: usize,
    /// Why figures or the report could not be drawn (the rows are written regardless).
    pub outputs_error: Option<String>,
}

/// Run `plan` into `opts.dir`, holding the folder's lock ([`lock_dir`]) throughout; leftover
/// temporary files of killed runs are removed first.
///
/// # Errors
/// Another process holds the folder ([`ResultsError::Locked`]); a cell file that is not this
/// cell's row ([`ResultsError::BadCell`]); results that cannot be written. Cell failures are
/// rows, not errors; figures or a report that cannot be drawn are in
/// [`RunSummary::outputs_error`] (the rows are written regardless).
pub fn run(plan: &Plan, catalog: &Catalog, opts: &RunOptions) -> Result<RunSummary, ResultsError> {
    if let crate::config::Study::Gradient(study) = &plan.config.study {
        return crate::study_gradient::run::run(plan, study, catalog, opts);
    }
    let dir = &opts.dir;
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |source| ResultsError::Io { path: p, source }
    };
    // One writer per folder: a second run would mix its config and rows with ours.
    let _lock = lock_dir(dir)?;
    remove_stale_temps(dir)?;
    if opts.fresh {
        for sub in ["cells", "steps", "figures"] {
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
    let resolved = to_yaml(&plan.config).unwrap_or_default();
    write_atomic(&dir.join("config.resolved.yaml"), resolved.as_bytes())?;
    let mut manifest = Manifest::describe(&plan.config.name, opts.jobs);
    let mine = shard_cells(plan, opts.shard.as_ref());

    let mut done: BTreeSet<&str> = BTreeSet::new();
    for c in &mine {
        if read_cell(dir, &c.id)?.is_some() {
            done.insert(c.id.as_str());
        }
    }
    let todo: Vec<&Cell> = mine
        .iter()
        .copied()
        .filter(|c| !done.contains(c.id.as_str()))
        .collect();
    manifest.cells_total = plan.cells.len();
    manifest.cells_resumed = done.len();
    manifest.cell_ids = plan.cells.iter().map(|c| c.id.clone()).collect();
    manifest.set_shard(opts.shard.as_ref(), mine.len());
    manifest.write(dir)?;

    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.jobs.max(1))
        .build()
        .expect("a rayon pool with a positive thread count builds");
    let bar = if opts.progress {
        ProgressBar::new(mine.len() as u64)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:30} {pos}/{len} cells  elapsed {elapsed_precise}  eta {eta_precise}  {msg}",
        )
        .expect("valid template"),
    );
    bar.set_position(done.len() as u64);
    bar.enable_steady_tick(Duration::from_millis(200));

    let references = pool.install(|| references_for(plan, catalog, &todo));
    let diverged = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let first_error: Mutex<Option<ResultsError>> = Mutex::new(None);
    bar.set_message("diverged: 0");
    pool.install(|| {
        todo.par_iter().for_each(|cell| {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let reference = reference_for(plan, cell, &references);
            let mut row = run_cell(plan, cell, catalog, reference, opts.jobs, dir);
            row.set_f64("peak_rss_mib", peak_rss_mib());
            if let Err(e) = write_cell(dir, &cell.id, &row) {
                first_error.lock().expect("not poisoned").get_or_insert(e);
                stop.store(true, Ordering::SeqCst);
                return;
            }
            if row.str("status") == "diverged" {
                let d = diverged.fetch_add(1, Ordering::SeqCst) + 1;
                bar.set_message(format!("diverged: {d}"));
            }
            bar.inc(1);
            let n = finished.fetch_add(1, Ordering::SeqCst) + 1;
            if opts.stop_after.is_some_and(|k| n >= k) {
                stop.store(true, Ordering::SeqCst);
            }
        });
    });
    bar.finish_and_clear();
    if let Some(e) = first_error.into_inner().expect("not poisoned") {
        return Err(e);
    }

    let mut rows: Vec<Row> = Vec::new();
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

/// The cells of `plan` that `shard` runs (all without one), in grid order: one unit per cell
/// ([`crate::shard`]).
pub fn shard_cells<'a>(plan: &'a Plan, shard: Option<&Shard>) -> Vec<&'a Cell> {
    shard::select(shard, plan.cells.iter().collect(), |c| c.id.as_str())
}

/// A reference trajectory, or why there is none.
pub type RefResult = Result<Trajectory, String>;

/// Compute or load the references the cells still to do need.
fn references_for(plan: &Plan, catalog: &Catalog, todo: &[&Cell]) -> BTreeMap<String, RefResult> {
    match &plan.reference {
        ReferenceSpec::SameFormulation { timestep } => {
            let mut wanted: BTreeMap<String, &Cell> = BTreeMap::new();
            for c in todo {
                if let Some(id) = &c.reference_id {
                    wanted.entry(id.clone()).or_insert(c);
                }
            }
            let list: Vec<(String, &Cell)> = wanted.into_iter().collect();
            list.par_iter()
                .map(|(id, cell)| {
                    let r = catch_quietly(|| reference_run(catalog, cell, *timestep))
                        .unwrap_or_else(|p| Err(format!("reference panicked: {}", panic_text(&p))));
                    (id.clone(), r)
                })
                .collect()
        }
        ReferenceSpec::Recorded { dir } => {
            let mut out = BTreeMap::new();
            for c in todo {
                let key = recorded_key(c);
                if out.contains_key(&key) {
                    continue;
                }
                let r = if c.scene == TOSS_SCENE {
                    toss_reference(c, dir.as_deref())
                } else {
                    match dir {
                        Some(d) => Trajectory::read(&d.join(format!("{}.csv", c.scene)))
                            .map_err(|e| e.to_string()),
                        None => Err("the recorded reference has no `dir`".to_string()),
                    }
                };
                out.insert(key, r);
            }
            out
        }
        ReferenceSpec::Trajectory { file } => BTreeMap::from([(
            "file".to_string(),
            Trajectory::read(file).map_err(|e| e.to_string()),
        )]),
        ReferenceSpec::None | ReferenceSpec::Analytic => BTreeMap::new(),
    }
}

fn reference_for<'a>(
    plan: &Plan,
    cell: &Cell,
    refs: &'a BTreeMap<String, RefResult>,
) -> Option<&'a RefResult> {
    match &plan.reference {
        ReferenceSpec::SameFormulation { .. } => {
            cell.reference_id.as_ref().and_then(|id| refs.get(id))
        }
        ReferenceSpec::Recorded { .. } => refs.get(&recorded_key(cell)),
        ReferenceSpec::Trajectory { .. } => refs.get("file"),
        _ => None,
    }
}

/// The scene whose recorded reference is a toss file of real data.
const TOSS_SCENE: &str = "cube_toss";

/// The key of a cell's recorded reference: its toss (folder and id) for `cube_toss`, else its
/// scene.
fn recorded_key(cell: &Cell) -> String {
    if cell.scene == TOSS_SCENE {
        let p = &cell.scene_params;
        format!(
            "toss:{}:{}",
            p.get("dir").unwrap_or(&serde_json::Value::Null),
            p.get("toss").unwrap_or(&serde_json::Value::Null)
        )
    } else {
        format!("scene:{}", cell.scene)
    }
}

fn toss_reference(cell: &Cell, dir: Option<&Path>) -> RefResult {
    recorded_toss(&cell.scene_params, dir)
}

/// The recording of the toss of `cube_toss` parameters `params` as a reference compared at
/// its sample times (`samples_only`): free-joint states (position m, quaternion; table-frame
/// linear m/s, body-frame angular rad/s velocity), times shifted so that the first sample is
/// at t = 0 like the scene's initial state. `dir` overrides the scene's toss folder.
///
/// # Errors
/// Bad parameters, unknown toss, or a malformed file (file and line), as text.
pub fn recorded_toss(params: &serde_json::Value, dir: Option<&Path>) -> RefResult {
    let p: CubeTossParams = if params.is_null() {
        CubeTossParams::default()
    } else {
        serde_json::from_value(params.clone()).map_err(|e| e.to_string())?
    };
    let rec = p.recording(dir).map_err(|e| e.to_string())?;
    let t0 = rec.samples[0].t;
    let mut traj = Trajectory {
        samples_only: true,
        ..Trajectory::default()
    };
    for s in &rec.samples {
        let mut state = s.state([0.0; 3]);
        state.t -= t0;
        traj.push(&state);
    }
    Ok(traj)
}

/// Run the cell's scene and formulation at the reference timestep, keeping every state.
fn reference_run(catalog: &Catalog, cell: &Cell, h: f64) -> RefResult {
    let scene = catalog.build_scene(&cell.scene, &cell.scene_params)?;
    let mut f = catalog.build_formulation(&cell.formulation, &cell.formulation_params)?;
    let mut state = scene.initial.clone();
    let mut traj = Trajectory::default();
    traj.push(&state);
    for _ in 0..step_count(cell.horizon_s, h) {
        let u = scene.controls_at(state.t, &state);
        let r = f.step(&scene.model, &mut state, &u, h);
        if let Some(why) = r.diverged {
            return Err(format!("reference diverged: {why}"));
        }
        traj.push(&state);
    }
    Ok(traj)
}

thread_local! {
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `f`, catching a panic; while it runs, the hook of [`install_quiet_panic_hook`] prints
/// nothing for panics on this thread (they become `failed` rows with their message).
pub fn catch_quietly<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
    let was = QUIET.with(|q| q.replace(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(was));
    r
}

/// Wrap the panic hook so that panics caught by [`catch_quietly`] print nothing (keeps the
/// progress bar clean); every other panic is reported as before. For binaries, once at start.
pub fn install_quiet_panic_hook() {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !QUIET.with(|q| q.get()) {
            prev(info);
        }
    }));
}

/// Number of steps of length `h` to cover `horizon` (a last partial step counts as one).
pub fn step_count(horizon: f64, h: f64) -> usize {
    ((horizon / h) - 1e-9).ceil().max(1.0) as usize
}

pub(crate) fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// The identity columns of a cell's row.
pub(crate) fn identity(plan: &Plan, cell: &Cell, threads: usize) -> Row {
    let mut row = Row::default();
    row.set_str("cell_id", &cell.id);
    row.set_str("experiment", &plan.config.name);
    row.set_str("scene", &cell.scene);
    row.set_str("scene_label", &cell.scene_label);
    row.set_str("scene_params", cell.scene_params.to_string());
    row.set_str("formulation", &cell.formulation);
    row.set_str("label", &cell.label);
    row.set_str("formulation_params", cell.formulation_params.to_string());
    row.set_str(
        "sweep",
        serde_json::to_string(&cell.sweep).unwrap_or_default(),
    );
    row.set_str("engine", &cell.engine);
    row.set_u64("worlds", cell.worlds as u64);
    row.set_f64("timestep_s", cell.timestep_s);
    row.set_u64("seed", cell.seed);
    row.set_f64("horizon_s", cell.horizon_s);
    row.set_u64("threads", threads as u64);
    let toss = match cell.scene_params.get("toss") {
        Some(serde_json::Value::String(t)) => t.clone(),
        Some(v) => v.to_string(),
        None => String::new(),
    };
    row.set_str("toss", toss);
    row.set_str(
        "inputs",
        serde_json::to_string(&cell.inputs).unwrap_or_default(),
    );
    row
}

/// Run one cell to a row: never panics, never returns an error (failures are rows).
pub fn run_cell(
    plan: &Plan,
    cell: &Cell,
    catalog: &Catalog,
    reference: Option<&RefResult>,
    threads: usize,
    dir: &Path,
) -> Row {
    let mut row = identity(plan, cell, threads);
    let outcome = catch_quietly(|| simulate_cell(plan, cell, catalog, reference, dir, &mut row));
    let (status, reason) = match outcome {
        Ok(Ok(None)) => ("ok", row.str("reason").to_string()),
        Ok(Ok(Some(why))) => ("diverged", why),
        Ok(Err(CellError::Skipped(why))) => ("skipped", why),
        Ok(Err(CellError::Failed(why))) => ("failed", why),
        Err(p) => ("failed", format!("panicked: {}", panic_text(&p))),
    };
    row.set_str("status", status);
    row.set_str("reason", reason);
    // Columns a failed cell never reached are NaN / 0.
    for c in crate::results::COLUMNS {
        if !row.0.contains_key(c.name) {
            match c.kind {
                crate::results::Kind::F64 => row.set_f64(c.name, f64::NAN),
                crate::results::Kind::U64 => row.set_u64(c.name, 0),
                crate::results::Kind::Str => row.set_str(c.name, ""),
            }
        }
    }
    row
}

/// Why a cell did not finish: its engine cannot run it (a `skipped` row naming what the engine
/// lacks), or it failed.
#[derive(Debug, Clone, PartialEq)]
pub enum CellError {
    /// The engine cannot run this cell (`contactlab_solvers::engine::EngineError`).
    Skipped(String),
    /// Anything else (bad scene, reference mismatch, I/O).
    Failed(String),
}

impl From<String> for CellError {
    fn from(s: String) -> Self {
        CellError::Failed(s)
    }
}

/// The stepper of a cell: `cell.worlds` copies of the scene on `cell.engine`. The cpu engine
/// builds its formulations through the catalog (test fakes included); a batched engine that
/// cannot run the cell gives [`CellError::Skipped`] naming what it lacks.
///
/// # Errors
/// As above; bad formulation parameters are [`CellError::Failed`].
pub fn cell_stepper(
    catalog: &Catalog,
    cell: &Cell,
    scene: &Scene,
    initial: &contactlab_solvers::State,
) -> Result<Box<dyn Stepper>, CellError> {
    if cell.engine == "cpu" {
        let s = CpuStepper::new(&scene.model, initial, cell.worlds, || {
            catalog.build_formulation(&cell.formulation, &cell.formulation_params)
        })?;
        return Ok(Box::new(s));
    }
    // The parameters are validated by the formulation's own schema first (same messages as
    // on the cpu engine).
    catalog.build_formulation(&cell.formulation, &cell.formulation_params)?;
    contactlab_solvers::engine::batched_stepper(
        &cell.engine,
        &cell.formulation,
        &cell.formulation_params,
        &scene.model,
        initial,
        cell.worlds,
    )
    .map_err(|e| match e {
        EngineError::Unknown { .. } => CellError::Failed(e.to_string()),
        other => CellError::Skipped(other.to_string()),
    })
}

/// Simulate one cell, filling `row`; `Ok(Some(reason))` if it diverged, `Err` if it was
/// skipped or failed.
fn simulate_cell(
    plan: &Plan,
    cell: &Cell,
    catalog: &Catalog,
    reference: Option<&RefResult>,
    dir: &Path,
    row: &mut Row,
) -> Result<Option<String>, CellError> {
    let scene = catalog.build_scene(&cell.scene, &cell.scene_params)?;
    let analytic: serde_json::Map<String, serde_json::Value> = scene
        .analytic
        .iter()
        .map(|a| (a.name.to_string(), serde_json::json!([a.value, a.formula])))
        .collect();
    row.set_str("analytic", serde_json::Value::Object(analytic).to_string());
    let mut stepper = cell_stepper(catalog, cell, &scene, &scene.initial)?;
    row.set_str(
        "ignored_features",
        contactlab_solvers::features::joined(&stepper.ignored_features()),
    );
    let h = cell.timestep_s;
    let reference = match reference {
        Some(Ok(t)) => {
            // A reference recorded for another model cannot be compared coordinate by
            // coordinate: say so instead of indexing out of bounds.
            let (nq, nv) = (
                t.q.first().map_or(0, |q| q.len()),
                t.v.first().map_or(0, |v| v.len()),
            );
            if (nq, nv) != (scene.model.nq, scene.model.nv) {
                return Err(CellError::Failed(format!(
                    "the reference trajectory has {nq} qpos and {nv} qvel columns, but scene '{}' has nq = {} and nv = {}",
                    cell.scene, scene.model.nq, scene.model.nv
                )));
            }
            Some(t)
        }
        Some(Err(why)) => {
            row.set_str("reason", why.clone());
            None
        }
        None => None,
    };
    let out = rollout_worlds(
        &scene,
        stepper.as_mut(),
        h,
        cell.horizon_s,
        reference,
        plan.config.log_steps,
    );
    out.acc.finish(row);
    let task: serde_json::Map<String, serde_json::Value> = out
        .task
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
        .collect();
    row.set_str("task", serde_json::Value::Object(task).to_string());
    row.set_f64(
        "traj_rot_error_mean_deg",
        row.f64("traj_rot_error_mean_rad").to_degrees(),
    );
    if cell.scene == TOSS_SCENE && reference.is_some() {
        row.set_f64(
            "traj_pos_error_mean_pct_width",
            100.0 * row.f64("traj_pos_error_mean_m") / CUBE_EDGE_M,
        );
    }
    let wall = out.wall.as_secs_f64();
    row.set_f64("wall_time_s", wall);
    row.set_f64(
        "steps_per_s",
        out.acc.steps() as f64 * stepper.worlds() as f64 / wall,
    );
    row.set_f64("real_time_factor", out.acc.steps() as f64 * h / wall);
    if let Some(log) = &out.log {
        log.write(&dir.join("steps").join(format!("{}.parquet", cell.id)))
            .map_err(|e| e.to_string())?;
    }
    let reanchored = match (reference, &out.diverged) {
        (Some(r), None) => {
            let mut fresh = cell_stepper(catalog, cell, &scene, &scene.initial)?;
            reanchored_error(
                &scene,
                fresh.as_mut(),
                h,
                cell.horizon_s,
                plan.config.reanchor_window,
                r,
            )
        }
        _ => f64::NAN,
    };
    row.set_f64("reanchored_error_mean", reanchored);
    Ok(out.diverged)
}

/// What a rollout measured.
pub struct Rollout {
    /// Measurements.
    pub acc: Accumulator,
    /// Wall time inside the steps (`Stepper::step`).
    pub wall: Duration,
    /// Divergence reason, if a rule fired (the rollout stops there).
    pub diverged: Option<String>,
    /// Per-step log, when asked for.
    pub log: Option<StepLog>,
    /// The scene's task outcomes at the end of the rollout (empty without a task).
    pub task: Vec<(&'static str, f64)>,
}

/// Step `f` on `scene` for `horizon` seconds at timestep `h`, measuring as it goes: one world
/// on the cpu engine ([`rollout_worlds`] with a [`CpuStepper`] of one world).
pub fn rollout(
    scene: &Scene,
    f: &mut dyn Formulation,
    h: f64,
    horizon: f64,
    reference: Option<&Trajectory>,
    log_steps: bool,
) -> Rollout {
    let mut one = OneWorld {
        model: &scene.model,
        f,
        state: scene.initial.clone(),
    };
    rollout_worlds(scene, &mut one, h, horizon, reference, log_steps)
}

/// A borrowed single-world formulation as a [`Stepper`] (what [`rollout`] steps).
struct OneWorld<'a> {
    model: &'a contactlab_solvers::Model,
    f: &'a mut dyn Formulation,
    state: contactlab_solvers::State,
}

impl Stepper for OneWorld<'_> {
    fn engine(&self) -> &'static str {
        "cpu"
    }
    fn worlds(&self) -> usize {
        1
    }
    fn step(
        &mut self,
        controls: &[f64],
        h: f64,
        _want_contacts: bool,
    ) -> Vec<contactlab_solvers::StepReport> {
        vec![self.f.step(self.model, &mut self.state, controls, h)]
    }
    fn read_states(&self) -> Vec<contactlab_solvers::State> {
        vec![self.state.clone()]
    }
    fn write_states(&mut self, states: &[contactlab_solvers::State]) {
        self.state = states[0].clone();
    }
    fn ignored_features(&self) -> Vec<contactlab_solvers::IgnoredFeature> {
        self.f.ignored_features(self.model)
    }
}

/// The controls of every world, row-major `(worlds × nu)`: the scene's control law at each
/// world's state (zeros without one, and then no state is read back).
fn world_controls(
    scene: &Scene,
    stepper: &dyn Stepper,
    world0: &contactlab_solvers::State,
) -> Vec<f64> {
    let w = stepper.worlds();
    match &scene.controls {
        None => vec![0.0; w * scene.model.actuators.len()],
        Some(_) if w == 1 => scene.controls_at(world0.t, world0),
        Some(_) => stepper
            .read_states()
            .iter()
            .flat_map(|s| scene.controls_at(s.t, s))
            .collect(),
    }
}

/// Step `stepper` (any engine, any number of worlds, all starting from `scene.initial`) for
/// `horizon` seconds at timestep `h`, measuring world 0 as it goes.
///
/// Errors against `reference` are taken after every step at the step's time (the reference
/// interpolated), or, when `reference.samples_only`, only at the reference's sample times
/// after the initial one: a step whose time is within `h / 2` of the next sample is compared
/// with that sample (with `h` dividing the sampling interval, exactly at the samples).
pub fn rollout_worlds(
    scene: &Scene,
    stepper: &mut dyn Stepper,
    h: f64,
    horizon: f64,
    reference: Option<&Trajectory>,
    log_steps: bool,
) -> Rollout {
    let model = &scene.model;
    let mut state = stepper.read_state(0);
    let mut acc = Accumulator::new(scene, &state);
    let mut log = log_steps.then(|| StepLog::new(&state));
    let mut wall = Duration::ZERO;
    let mut diverged = None;
    // Next reference sample to compare with (samples-only references).
    let mut next = reference.map_or(0, |r| r.t.partition_point(|&t| t <= state.t + 0.5 * h));
    let mut task = scene.task.as_ref().map(|t| t.monitor(model, &state));
    for _ in 0..step_count(horizon, h) {
        let u = world_controls(scene, stepper, &state);
        let t0 = Instant::now();
        let report = stepper.step(&u, h, true).swap_remove(0);
        wall += t0.elapsed();
        state = stepper.read_state(0);
        let why = acc.observe(model, &state, &report);
        if let Some(t) = task.as_mut() {
            t.observe(&state, &report, h);
        }
        if let Some(l) = log.as_mut() {
            l.push(&state, &report, why.is_some());
        }
        match reference {
            Some(r) if r.samples_only => {
                while next < r.t.len() && r.t[next] < state.t - 0.5 * h {
                    next += 1;
                }
                if next < r.t.len() && (r.t[next] - state.t).abs() <= 0.5 * h {
                    if state.is_finite() {
                        acc.observe_error(state_error(model, &state.q, &r.q[next]));
                    }
                    next += 1;
                }
            }
            Some(r) => {
                if let Some(rs) = r.at(state.t) {
                    if state.is_finite() {
                        acc.observe_error(state_error(model, &state.q, &rs.q));
                    }
                }
            }
            None => {}
        }
        if why.is_some() {
            diverged = why;
            break;
        }
    }
    Rollout {
        acc,
        wall,
        diverged,
        log,
        task: task.map(|t| t.outcomes()).unwrap_or_default(),
    }
}

/// Mean end-of-window error (world 0) restarting every world from the reference state every
/// `window` seconds.
fn reanchored_error(
    scene: &Scene,
    f: &mut dyn Stepper,
    h: f64,
    horizon: f64,
    window: f64,
    r: &Trajectory,
) -> f64 {
    let per_window = step_count(window.min(horizon), h);
    let (mut sum, mut n) = (0.0, 0usize);
    let mut t0 = 0.0;
    while t0 + per_window as f64 * h <= horizon + 1e-9 {
        let Some(start) = r.at(t0) else { break };
        f.write_states(&vec![start.clone(); f.worlds()]);
        let mut state = start;
        for _ in 0..per_window {
            let u = world_controls(scene, f, &state);
            f.step(&u, h, false);
            state = f.read_state(0);
        }
        match r.at(state.t) {
            Some(rs) if state.is_finite() => {
                sum += state_error(&scene.model, &state.q, &rs.q).scalar;
                n += 1;
            }
            _ => break,
        }
        t0 += per_window as f64 * h;
    }
    if n == 0 {
        f64::NAN
    } else {
        sum / n as f64
    }
}
