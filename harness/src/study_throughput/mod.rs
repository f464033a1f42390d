//! The throughput and memory study (`study: {kind: throughput, ...}`, issue 15): world-steps
//! per second and peak memory against the number of worlds for every engine and formulation
//! of the grid, forward only and forward plus backward, and the reverse-mode tape's memory
//! against the horizon (DESIGN.md, "Measurements": cost).
//!
//! ```yaml
//! study:
//!   kind: throughput
//!   passes: [forward, forward_backward]  # default both
//!   steps: 20          # most timed steps of a forward cell (after one untimed warm-up step)
//!   budget_s: 1.0      # a cell stops timing after the step (iteration) that crosses this
//!   horizon_steps: 10  # steps of one forward+backward iteration
//!   iterations: 3      # most timed iterations of a forward_backward cell
//!   max_worlds:        # per pass, per engine: larger cells are `skipped` rows naming this key
//!     forward: {cpu: 16384}
//!   tape: {worlds: 64, horizons: [1, 4, 16, 64]}  # memory against the horizon (steps)
//!   # and against the solver's iteration budget (soft solvers: a static program of exactly
//!   # that many iterations per step; ncp_fb: its adjoint at newton_iterations = budget):
//!   #   tape: {..., iteration_budgets: [8, 16, 32, 64], budget_horizon_steps: 4}
//! scenes: [{name: box_drop}]
//! formulations: [{name: penalty}, {name: ncp_fb}]
//! sweep:
//!   engine: [cpu, burn-ndarray, burn-wgpu, burn-cuda]
//!   worlds: [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536]
//!   timestep: [5.0e-4]
//! ```
//!
//! The grid (scene × formulation × engine × worlds × timestep × seed) is the sweep's
//! ([`crate::sweep::plan`]); each grid cell gives one cell per pass, and each distinct
//! (scene, formulation, engine, timestep, seed) one `tape` cell per horizon at `tape.worlds`
//! worlds. Cells run one at a time, each on the whole worker pool (`--jobs`): the cpu engine
//! steps its worlds with rayon, burn-ndarray steps one shard of worlds per worker.
//!
//! Definitions ([`COLUMNS`]):
//! * forward: `worlds` copies of the scene's initial state stepped `steps` times (fewer when
//!   `budget_s` runs out, at least one) without observation, then read back once (the end
//!   state; no per-step readback); `world_steps_per_s = worlds · steps / wall`.
//! * forward_backward: one *world-iteration* is one forward pass over `horizon_steps` steps and
//!   one backward pass for one world (the Ostrich paper's definition, §IV-C: "end-to-end
//!   optimization throughput (forward + backward, in world-iterations per second)");
//!   `world_iterations_per_s = worlds · iterations / wall`. The backward pass is burn's
//!   reverse mode on the burn engines ([`contactlab_solvers::batched::reverse`]) and the ncp_fb
//!   adjoint on the cpu engine (one gradient per world, worlds in parallel); a formulation
//!   without a reverse-mode method on an engine is a `skipped` row saying so.
//! * memory, per backend: on CPU backends (cpu, burn-ndarray) the process heap's peak above
//!   its live bytes at the cell's start, from the counting global allocator
//!   ([`crate::heap::measure_process`]); on GPU backends the CubeCL client's bytes in use on
//!   the device ([`contactlab_solvers::batched::device_memory`]). The tape: the bytes alive
//!   after the forward pass above those at its start (burn), or the largest heap peak of one
//!   world's adjoint on its own thread (cpu).
//!
//! Speed is measured, never asserted: rows carry the numbers and the report shows them.

pub mod report;
pub mod run;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::catalog::Catalog;
use crate::config::{ConfigError, ExperimentConfig, StudySpec};
use crate::results::{ColumnDef, Kind};
use crate::study_gradient::locate_near;
use crate::sweep::{hash_hex, Cell, MAX_WORLDS};

/// The `study` block of a throughput experiment (module doc).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThroughputSpec {
    /// Passes measured for every grid cell: `forward`, `forward_backward`. Default both.
    #[serde(default = "default_passes")]
    pub passes: Vec<String>,
    /// Most timed steps of a forward cell (≥ 1). Default 20.
    #[serde(default = "default_steps")]
    pub steps: usize,
    /// Wall-time budget of a cell's timed loop (s, > 0): timing stops after the step or
    /// iteration that crosses it, at least one. Default 1.
    #[serde(default = "default_budget")]
    pub budget_s: f64,
    /// Steps of one forward+backward iteration (≥ 1). Default 10.
    #[serde(default = "default_horizon")]
    pub horizon_steps: usize,
    /// Most timed iterations of a forward_backward cell (≥ 1). Default 3.
    #[serde(default = "default_iterations")]
    pub iterations: usize,
    /// Per pass (`forward`, `forward_backward`, `tape`), per engine: the most worlds a cell of
    /// that pass may step; larger cells are `skipped` rows naming this key. Default none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub max_worlds: BTreeMap<String, BTreeMap<String, usize>>,
    /// The tape's memory against the horizon; absent: no tape cells.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tape: Option<TapeSpec>,
}

/// The tape cells' settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TapeSpec {
    /// Worlds of every tape cell (1 to 65,536). Default 64.
    #[serde(default = "default_tape_worlds")]
    pub worlds: usize,
    /// Horizons in steps (each ≥ 1). Default 1, 4, 16, 64.
    #[serde(default = "default_tape_horizons")]
    pub horizons: Vec<usize>,
    /// Solver iteration budgets (each ≥ 1): one tape cell per budget, at
    /// `budget_horizon_steps`, in which a soft solver runs exactly that many iterations per
    /// step (MJX's static program) and ncp_fb's adjoint gets `newton_iterations` = budget.
    /// Default none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub iteration_budgets: Vec<usize>,
    /// Horizon (steps, ≥ 1) of the iteration-budget cells. Default 4.
    #[serde(default = "default_budget_horizon")]
    pub budget_horizon_steps: usize,
}

fn default_budget_horizon() -> usize {
    4
}

fn default_passes() -> Vec<String> {
    vec!["forward".into(), "forward_backward".into()]
}
fn default_steps() -> usize {
    20
}
fn default_budget() -> f64 {
    1.0
}
fn default_horizon() -> usize {
    10
}
fn default_iterations() -> usize {
    3
}
fn default_tape_worlds() -> usize {
    64
}
fn default_tape_horizons() -> Vec<usize> {
    vec![1, 4, 16, 64]
}

/// What a cell measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pass {
    /// Steps without observation, one readback at the end.
    Forward,
    /// Forward over the horizon plus one backward pass, per world.
    ForwardBackward,
    /// One forward+backward iteration at the tape's worlds and horizon: its memory.
    Tape,
}

impl Pass {
    /// The name in experiment files and rows.
    pub fn name(self) -> &'static str {
        match self {
            Pass::Forward => "forward",
            Pass::ForwardBackward => "forward_backward",
            Pass::Tape => "tape",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "forward" => Some(Pass::Forward),
            "forward_backward" => Some(Pass::ForwardBackward),
            "tape" => Some(Pass::Tape),
            _ => None,
        }
    }
}

/// One cell of the study: a grid cell (its engine, worlds, scene, formulation, timestep) and
/// a pass.
#[derive(Debug, Clone, PartialEq)]
pub struct ThroughputCell {
    /// Stable id (16 hex digits) of everything that determines the row.
    pub id: String,
    /// The grid cell (for tape cells, with `worlds` set to `tape.worlds`).
    pub grid: Cell,
    /// What is measured.
    pub pass: Pass,
    /// Steps of one forward+backward iteration (forward_backward, tape); 0 for forward.
    pub horizon_steps: usize,
    /// A tape cell's solver iteration budget (`tape.iteration_budgets`), else `None`.
    pub iteration_budget: Option<usize>,
    /// The `max_worlds` entry this cell exceeds, as `max_worlds.<pass>.<engine> = n`.
    pub over_cap: Option<String>,
}

/// A validated throughput experiment.
#[derive(Debug, Clone)]
pub struct ThroughputPlan {
    /// The experiment file.
    pub file: PathBuf,
    /// The parsed configuration.
    pub config: ExperimentConfig,
    /// The study's settings.
    pub spec: ThroughputSpec,
    /// Cells in run order: forward, forward_backward, tape.
    pub cells: Vec<ThroughputCell>,
}

/// Validate a throughput experiment and expand its cells.
///
/// # Errors
/// The first problem, naming the key and its line: the grid's ([`crate::sweep::plan`]), an
/// unknown pass, a zero `steps`, `horizon_steps`, `iterations` or `tape.worlds`, a
/// `budget_s` that is not a finite number > 0, a `max_worlds` entry naming an unknown pass or
/// engine, a `tape.horizons` that is empty or holds 0.
pub fn plan(
    file: &Path,
    text: &str,
    cfg: ExperimentConfig,
    catalog: &Catalog,
) -> Result<ThroughputPlan, ConfigError> {
    let StudySpec::Throughput(spec) = cfg.study.clone() else {
        panic!("study_throughput::plan called for another study");
    };
    let err = |key: &str, message: String| ConfigError {
        file: file.to_path_buf(),
        line: locate_near(text, key),
        key: key.to_string(),
        message,
    };
    let mut passes = Vec::new();
    if spec.passes.is_empty() {
        return Err(err(
            "study.passes",
            "is empty; list forward and/or forward_backward".into(),
        ));
    }
    for (i, p) in spec.passes.iter().enumerate() {
        match Pass::parse(p) {
            Some(pass @ (Pass::Forward | Pass::ForwardBackward)) if !passes.contains(&pass) => {
                passes.push(pass)
            }
            Some(Pass::Forward | Pass::ForwardBackward) => {
                return Err(err(&format!("study.passes[{i}]"), format!("'{p}' is listed twice")))
            }
            _ => {
                return Err(err(
                    &format!("study.passes[{i}]"),
                    format!("unknown pass '{p}'; valid: forward, forward_backward (the tape cells come from `tape:`)"),
                ))
            }
        }
    }
    let max_steps = cfg
        .max_steps
        .unwrap_or(contactlab_scenarios::limits::DEFAULT_MAX_STEPS);
    // Step counts are checked before anything is allocated: a forward pass keeps its controls
    // per step, a reverse pass its tape (README, "Limits").
    for (key, v, is_steps) in [
        ("study.steps", spec.steps, true),
        ("study.horizon_steps", spec.horizon_steps, true),
        ("study.iterations", spec.iterations, false),
    ] {
        if v == 0 {
            return Err(err(key, "must be at least 1".into()));
        }
        if is_steps && v as u64 > max_steps {
            return Err(err(
                key,
                format!("{v} steps is over the limit of {max_steps} steps per run (raise it with `max_steps:`)"),
            ));
        }
    }
    if !(spec.budget_s.is_finite() && spec.budget_s > 0.0) {
        return Err(err(
            "study.budget_s",
            format!("must be a finite number > 0 (s); got {}", spec.budget_s),
        ));
    }
    for (pass, engines) in &spec.max_worlds {
        let key = format!("study.max_worlds.{pass}");
        if Pass::parse(pass).is_none() {
            return Err(err(
                &key,
                format!("unknown pass '{pass}'; valid: forward, forward_backward, tape"),
            ));
        }
        for (engine, &n) in engines {
            let key = format!("{key}.{engine}");
            if let Err(e) = contactlab_solvers::engine::find(engine) {
                return Err(err(&key, e.to_string()));
            }
            if n == 0 {
                return Err(err(&key, "must be at least 1".into()));
            }
        }
    }
    if let Some(t) = &spec.tape {
        if !(1..=MAX_WORLDS).contains(&t.worlds) {
            return Err(err(
                "study.tape.worlds",
                format!(
                    "must be an integer from 1 to {MAX_WORLDS}; got {}",
                    t.worlds
                ),
            ));
        }
        if t.horizons.is_empty() {
            return Err(err(
                "study.tape.horizons",
                "is empty; give at least one horizon (steps)".into(),
            ));
        }
        if let Some(i) = t.horizons.iter().position(|&h| h == 0) {
            return Err(err(
                &format!("study.tape.horizons[{i}]"),
                "horizons are steps, at least 1".into(),
            ));
        }
        if let Some(i) = t.horizons.iter().position(|&h| h as u64 > max_steps) {
            return Err(err(
                &format!("study.tape.horizons[{i}]"),
                format!(
                    "{} steps is over the limit of {max_steps} steps per run (raise it with `max_steps:`)",
                    t.horizons[i]
                ),
            ));
        }
        if let Some(i) = t.iteration_budgets.iter().position(|&b| b == 0) {
            return Err(err(
                &format!("study.tape.iteration_budgets[{i}]"),
                "an iteration budget is at least 1".into(),
            ));
        }
        if let Some(i) = (1..t.iteration_budgets.len())
            .find(|&i| t.iteration_budgets[..i].contains(&t.iteration_budgets[i]))
        {
            return Err(err(
                &format!("study.tape.iteration_budgets[{i}]"),
                format!(
                    "budget {} is listed twice; each gives one tape cell",
                    t.iteration_budgets[i]
                ),
            ));
        }
        if t.budget_horizon_steps == 0 || t.budget_horizon_steps as u64 > max_steps {
            return Err(err(
                "study.tape.budget_horizon_steps",
                format!(
                    "must be from 1 to the limit of {max_steps} steps per run; got {}",
                    t.budget_horizon_steps
                ),
            ));
        }
        if let Some(i) = (1..t.horizons.len()).find(|&i| t.horizons[..i].contains(&t.horizons[i])) {
            return Err(err(
                &format!("study.tape.horizons[{i}]"),
                format!(
                    "horizon {} is listed twice; each gives one tape cell",
                    t.horizons[i]
                ),
            ));
        }
    }
    let grid = crate::sweep::plan(file, text, cfg.clone(), catalog)?;
    let cap = |pass: Pass, c: &Cell| -> Option<String> {
        let n = *spec.max_worlds.get(pass.name())?.get(&c.engine)?;
        (c.worlds > n).then(|| format!("max_worlds.{}.{} = {n}", pass.name(), c.engine))
    };
    let settings = json!({
        "steps": spec.steps, "budget_s": spec.budget_s, "iterations": spec.iterations,
    });
    let mut cells = Vec::new();
    for &pass in &passes {
        for c in &grid.cells {
            let horizon_steps = if pass == Pass::Forward {
                0
            } else {
                spec.horizon_steps
            };
            let over_cap = cap(pass, c);
            let id = hash_hex(&json!({
                "grid": c.id, "pass": pass.name(), "horizon_steps": horizon_steps,
                "settings": settings, "over_cap": over_cap,
            }));
            cells.push(ThroughputCell {
                id,
                grid: c.clone(),
                pass,
                horizon_steps,
                iteration_budget: None,
                over_cap,
            });
        }
    }
    if let Some(t) = &spec.tape {
        let mut seen = BTreeSet::new();
        for c in &grid.cells {
            let key = (
                c.scene_label.clone(),
                c.label.clone(),
                c.engine.clone(),
                c.timestep_s.to_bits(),
                c.seed,
            );
            if !seen.insert(key) {
                continue;
            }
            for &h in &t.horizons {
                let mut g = c.clone();
                g.worlds = t.worlds;
                let over_cap = cap(Pass::Tape, &g);
                let id = hash_hex(&json!({
                    "grid": c.id, "pass": "tape", "worlds": t.worlds, "horizon_steps": h,
                    "over_cap": over_cap,
                }));
                cells.push(ThroughputCell {
                    id,
                    grid: g,
                    pass: Pass::Tape,
                    horizon_steps: h,
                    iteration_budget: None,
                    over_cap,
                });
            }
            for &b in &t.iteration_budgets {
                let mut g = c.clone();
                g.worlds = t.worlds;
                let over_cap = cap(Pass::Tape, &g);
                let h = t.budget_horizon_steps;
                let id = hash_hex(&json!({
                    "grid": c.id, "pass": "tape", "worlds": t.worlds, "horizon_steps": h,
                    "iteration_budget": b, "over_cap": over_cap,
                }));
                cells.push(ThroughputCell {
                    id,
                    grid: g,
                    pass: Pass::Tape,
                    horizon_steps: h,
                    iteration_budget: Some(b),
                    over_cap,
                });
            }
        }
    }
    Ok(ThroughputPlan {
        file: file.to_path_buf(),
        config: cfg,
        spec,
        cells,
    })
}

const fn c(name: &'static str, kind: Kind, doc: &'static str) -> ColumnDef {
    ColumnDef { name, kind, doc }
}

/// The columns of a throughput row (identity columns as in [`crate::results::COLUMNS`]).
pub const COLUMNS: &[ColumnDef] = &[
    c("cell_id", Kind::Str, "stable hash of everything that determines the row"),
    c("experiment", Kind::Str, "experiment name"),
    c("scene", Kind::Str, "scene registry name"),
    c("scene_label", Kind::Str, "scene entry label"),
    c("scene_params", Kind::Str, "scene parameters (JSON)"),
    c("formulation", Kind::Str, "formulation registry name"),
    c("label", Kind::Str, "formulation entry label"),
    c("formulation_params", Kind::Str, "formulation parameters (JSON)"),
    c("engine", Kind::Str, "engine: cpu, burn-ndarray, burn-wgpu or burn-cuda"),
    c("backend", Kind::Str, "where the engine computed: cpu (f64, rayon), ndarray (f64), wgpu (f32), cuda (f32)"),
    c("worlds", Kind::U64, "worlds stepped together (copies of the scene's initial state)"),
    c("timestep_s", Kind::F64, "timestep h"),
    c("seed", Kind::U64, "seed (given to scenes with a seed parameter)"),
    c("threads", Kind::U64, "worker threads of the run (the pool every cell runs on, one cell at a time)"),
    c("pass", Kind::Str, "forward (steps, one readback at the end), forward_backward (forward over horizon_steps plus one backward pass per world), tape (one forward_backward iteration, for its memory)"),
    c("status", Kind::Str, "ok, diverged (a world's end state is not finite; the numbers are kept), skipped (the engine cannot run the cell, or it is over a max_worlds cap: the reason says which), failed"),
    c("reason", Kind::Str, "why a cell was skipped, diverged or failed (empty when ok)"),
    c("horizon_steps", Kind::U64, "steps of one forward+backward iteration (0 for forward cells)"),
    c("steps", Kind::U64, "timed steps of a forward cell (after one untimed warm-up step)"),
    c("iterations", Kind::U64, "timed forward+backward iterations (each over all worlds)"),
    c("shards", Kind::U64, "shards the burn engine split the worlds into (one per worker on CPU backends; 0 on the cpu engine)"),
    c("wall_time_s", Kind::F64, "wall time of the timed loop, the end-state (or gradient) readback included"),
    c("world_steps_per_s", Kind::F64, "forward: worlds x steps / wall_time_s"),
    c("world_iterations_per_s", Kind::F64, "forward_backward, tape: worlds x iterations / wall_time_s (one iteration: forward over horizon_steps and backward, per world)"),
    c("iteration_budget", Kind::U64, "tape cells of study.tape.iteration_budgets: the solver iterations of every step (soft solvers: a static program of exactly that many; ncp_fb: newton_iterations); 0 elsewhere (the formulation's own iterations, stopping at convergence)"),
    c("forward_s", Kind::F64, "forward_backward, tape: wall time of the last iteration's forward pass (tape recording); NaN on the cpu engine, whose adjoint is timed as a whole"),
    c("backward_s", Kind::F64, "forward_backward, tape: wall time of the last iteration's backward pass and gradient readback; NaN on the cpu engine"),
    c("memory_bytes", Kind::F64, "the backend's peak memory of the cell: process heap peak above the cell's start on CPU backends (cpu, burn-ndarray; counting allocator), device bytes in use after the timed loop on GPU backends (CubeCL client); NaN where not measurable"),
    c("memory_source", Kind::Str, "what memory_bytes counts (heap or device), in words"),
    c("memory_per_world_bytes", Kind::F64, "memory_bytes / worlds"),
    c("tape_bytes", Kind::F64, "forward_backward, tape: bytes the backward pass needs from the forward one: burn, bytes alive after the forward pass above those at its start (heap on ndarray, device on GPUs); cpu adjoint, the largest heap peak of one world's gradient above its start, on the thread that computed it (the worlds' gradients are independent; the process peak counts however many ran at once)"),
    c("tape_per_world_step_bytes", Kind::F64, "tape_bytes / (worlds x horizon_steps)"),
    c("host_heap_peak_bytes", Kind::F64, "process heap peak above the cell's start, on every backend (host side of a GPU cell)"),
    c("device_reserved_bytes", Kind::F64, "GPU backends: bytes the CubeCL client reserved from the device (pools)"),
    c("nonfinite_worlds", Kind::U64, "worlds whose end state is not finite"),
    c("unconverged_steps", Kind::F64, "forward_backward, tape: ncp_fb's adjoint (cpu and batched) in the last iteration: forward steps that ended unconverged or failed (and, batched, backward steps without a pseudo-inverse and worlds that left the batched scene class), summed over worlds; through them the gradient is not a derivative. NaN where not counted (forward cells; formulations differentiated through their iterations)"),
    c("peak_rss_mib", Kind::F64, "process peak resident memory when the cell finished (MiB; process-wide, monotone over the run)"),
];

/// The definition of throughput column `name`.
pub fn column(name: &str) -> Option<&'static ColumnDef> {
    COLUMNS.iter().find(|c| c.name == name)
}

/// A plain-text table of the study's cells for `contactlab check`.
pub fn grid_table(plan: &ThroughputPlan) -> String {
    let mut out = format!("{} cells\n", plan.cells.len());
    out += &format!(
        "{:>5}  {:<16} {:<14} {:<13} {:>7} {:<17} {:>8}  id\n",
        "#", "scene", "formulation", "engine", "worlds", "pass", "horizon"
    );
    for (i, c) in plan.cells.iter().enumerate() {
        out += &format!(
            "{:>5}  {:<16} {:<14} {:<13} {:>7} {:<17} {:>8}  {}{}\n",
            i,
            c.grid.scene_label,
            c.grid.label,
            c.grid.engine,
            c.grid.worlds,
            c.pass.name(),
            c.horizon_steps,
            c.id,
            c.over_cap
                .as_ref()
                .map(|k| format!("  (over {k})"))
                .unwrap_or_default()
        );
    }
    out
}

/// Where a `throughput` study's value in `text` fails to parse, as a [`ConfigError`] naming
/// `study.<key>` and its line (the YAML parser loses both inside the `kind`-tagged `study:`
/// mapping, as [`crate::study_control::study_error`] explains).
pub fn study_error(file: &Path, text: &str) -> Option<ConfigError> {
    let raw: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).ok()?;
    let study = raw.get("study")?.as_mapping()?;
    if study.get("kind").and_then(|k| k.as_str()) != Some("throughput") {
        return None;
    }
    let known = [
        "kind",
        "passes",
        "steps",
        "budget_s",
        "horizon_steps",
        "iterations",
        "max_worlds",
        "tape",
    ];
    for (k, v) in study {
        let Some(k) = k.as_str() else { continue };
        let v = v.clone();
        let e = match k {
            "steps" | "horizon_steps" | "iterations" => serde_yaml_ng::from_value::<usize>(v)
                .err()
                .map(|e| e.to_string()),
            "budget_s" => serde_yaml_ng::from_value::<f64>(v)
                .err()
                .map(|e| e.to_string()),
            "passes" => serde_yaml_ng::from_value::<Vec<String>>(v)
                .err()
                .map(|e| e.to_string()),
            "max_worlds" => {
                serde_yaml_ng::from_value::<BTreeMap<String, BTreeMap<String, usize>>>(v)
                    .err()
                    .map(|e| e.to_string())
            }
            "tape" => serde_yaml_ng::from_value::<TapeSpec>(v)
                .err()
                .map(|e| e.to_string()),
            _ if !known.contains(&k) => {
                Some(format!("unknown key; valid: {}", known[1..].join(", ")))
            }
            _ => None,
        };
        if let Some(mut message) = e {
            let key = format!("study.{k}");
            if let Some(i) = message.rfind(" at line ") {
                message.truncate(i);
            }
            return Some(ConfigError {
                file: file.to_path_buf(),
                line: locate_near(text, &key),
                key,
                message,
            });
        }
    }
    None
}
