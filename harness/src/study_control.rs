//! The `control_synthesis` study (issue 13): gradient-based control synthesis on box_traversal's
//! seeded random instances, run, written, reported and drawn like a stability experiment.
//!
//! ```yaml
//! study:
//!   kind: control_synthesis
//!   instances: 50          # seeds first_seed.. (box_traversal's random instances)
//!   first_seed: 1          # the first instance's seed (>= 1); 51 with 50 instances: a held-out set
//!   methods: [adjoint, adjoint_lagged]
//!   iterations: 50         # Adam updates at most; stops early at success
//!   step_size: 0.1         # Adam's alpha of the first update (rad/s)
//!   step_decay: 1.0        # alpha's factor per update, (0, 1]; 1: constant
//!   yaw_weight: 1.0        # objective's yaw weight (m^2/rad^2); default the task loss's
//!   speed_weight: 0.0      # objective's weight of the squared final speed (s^2)
//!   knots: 10              # spline knots per wheel
//!   parametrizations: [wheels]  # coordinates Adam moves: wheels (per wheel), drive (forward, turn, rear)
//! scenes: [{name: box_traversal}]
//! formulations: [{name: ncp_fb}]
//! sweep: {timestep: [0.05]}   # default 0.05 s
//! ```
//!
//! The mathematics (spline, loss, gradient methods and their cost, Adam) is in
//! [`contactlab_scenarios::control_synthesis`]. Cells are scene × formulation × method ×
//! parametrization × timestep × instance; one row per cell ([`COLUMNS`]), written to `cells/<id>.json` the moment
//! the cell finishes (a rerun skips finished cells), merged into `runs.parquet`/`runs.csv`.
//! The per-iteration losses are the row's `loss_curve` (JSON array). `report.md` holds the
//! success rate per (scene, formulation, method, timestep) and the wall time per iteration;
//! `figures/loss_curves__<scene>.svg/.png` the median loss against the iteration.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use contactlab_scenarios::control_synthesis::{
    self as cs, ControlProblem, FormulationChoice, GradientMethod, Parametrization,
};
use plotters::prelude::*;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::catalog::Catalog;
use crate::config::{locate, ConfigError, ExperimentConfig, StudySpec};
use crate::results::{
    commit_temp, lock_dir, read_cell, remove_stale_temps, temp_path, write_atomic, write_cell,
    ColumnDef, Kind, Manifest, ResultsError, Row,
};
use crate::runner::{catch_quietly, RunOptions, RunSummary};

/// The `control_synthesis` study's settings (`study:` with `kind: control_synthesis`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlSynthesisSpec {
    /// Number of seeded random instances; the seeds are `first_seed..first_seed + instances`. Default 50.
    #[serde(default = "default_instances")]
    pub instances: u64,
    /// The first instance's seed (≥ 1; box_traversal's seed 0 is the nominal, unperturbed
    /// instance); the seeds are `first_seed..first_seed + instances`. Default 1.
    #[serde(default = "default_first_seed")]
    pub first_seed: u64,
    /// Gradient methods: `adjoint`, `adjoint_lagged` (ncp_fb only), `fd_central` (any). Default
    /// `[adjoint]`.
    #[serde(default = "default_methods")]
    pub methods: Vec<String>,
    /// Most Adam updates per synthesis (≥ 1). Default 50.
    #[serde(default = "default_iterations")]
    pub iterations: usize,
    /// Adam's step size α (rad/s, > 0). Default [`cs::DEFAULT_STEP_SIZE`].
    #[serde(default = "default_step_size")]
    pub step_size: f64,
    /// Spline knots per wheel (≥ 2). Default 10.
    #[serde(default = "default_knots")]
    pub knots: usize,
    /// Yaw weight of the task loss (m²/rad², ≥ 0). Default the scene's task loss weight,
    /// [`contactlab_scenarios::benchmark::wheeled_robot::TASK_YAW_WEIGHT`] (1); 0 optimizes
    /// the position alone, which is all that success asks for.
    #[serde(default = "default_yaw_weight")]
    pub yaw_weight: f64,
    /// Weight of the squared final chassis speed in the synthesis objective (s², ≥ 0).
    /// Default 0. The rows still record the scene's task loss and success.
    #[serde(default)]
    pub speed_weight: f64,
    /// Factor (0, 1] applied to Adam's step size after every update. Default 1 (constant).
    #[serde(default = "default_step_decay")]
    pub step_decay: f64,
    /// The coordinates Adam moves, one series each: `wheels` (one per wheel and knot) or
    /// `drive` (forward speed, turn rate and rear offset per knot;
    /// [`cs::Parametrization`]). Default `[wheels]`.
    #[serde(default = "default_parametrizations")]
    pub parametrizations: Vec<String>,
}

fn default_parametrizations() -> Vec<String> {
    vec!["wheels".into()]
}

fn default_step_decay() -> f64 {
    1.0
}

fn default_first_seed() -> u64 {
    1
}

fn default_instances() -> u64 {
    50
}
fn default_methods() -> Vec<String> {
    vec!["adjoint".into()]
}
fn default_iterations() -> usize {
    cs::DEFAULT_ITERATIONS
}
fn default_step_size() -> f64 {
    cs::DEFAULT_STEP_SIZE
}
fn default_knots() -> usize {
    cs::DEFAULT_KNOTS
}
fn default_yaw_weight() -> f64 {
    contactlab_scenarios::benchmark::wheeled_robot::TASK_YAW_WEIGHT
}

/// Default timestep of the study's cells (s) when `sweep.timestep` is absent.
pub const DEFAULT_TIMESTEP_S: f64 = 0.05;

/// Scenes the study knows the control problem of.
pub const SCENES: [&str; 1] = ["box_traversal"];

/// One cell: a synthesis of one instance by one method with one formulation at one timestep.
#[derive(Debug, Clone, PartialEq)]
pub struct ControlCell {
    /// Stable id (16 hex digits) of everything that determines the row.
    pub id: String,
    /// Scene registry name and label.
    pub scene: String,
    /// Scene label.
    pub scene_label: String,
    /// Scene parameters with the instance's `seed`.
    pub scene_params: Value,
    /// The formulation.
    pub formulation: FormulationChoice,
    /// Formulation label.
    pub label: String,
    /// Gradient method.
    pub method: GradientMethod,
    /// The coordinates Adam moves.
    pub parametrization: Parametrization,
    /// Timestep (s).
    pub timestep_s: f64,
    /// Instance (the scene's seed).
    pub seed: u64,
}

/// A validated control-synthesis experiment.
#[derive(Debug, Clone)]
pub struct ControlPlan {
    /// The experiment file.
    pub file: PathBuf,
    /// The parsed configuration.
    pub config: ExperimentConfig,
    /// The study's settings.
    pub spec: ControlSynthesisSpec,
    /// Cells in display order.
    pub cells: Vec<ControlCell>,
}

/// Top-level experiment keys that a control-synthesis study does not read, with what to use
/// instead: given, they would silently do nothing.
const IGNORED_TOP_LEVEL: &[(&str, &str)] = &[
    ("horizon", "the horizon is the scene's `horizon` parameter"),
    (
        "reference",
        "the study scores task success, not trajectories",
    ),
    (
        "metrics",
        "the rows carry the synthesis metrics; the report's tables are fixed",
    ),
    ("figures", "the loss-curve figure is always drawn"),
    ("log_steps", "synthesis rollouts write no per-step logs"),
    (
        "accuracy_threshold",
        "the study scores task success, not trajectories",
    ),
    (
        "reanchor_window",
        "the study scores task success, not trajectories",
    ),
];

/// Most spline knots per wheel (a knot per step is the finest control; 10,000 is far above any
/// horizon / timestep a synthesis can afford).
pub const MAX_KNOTS: usize = 10_000;

/// Validate a `control_synthesis` experiment and expand its cells.
///
/// # Errors
/// The first problem, naming the key and its line: a scene without a control problem, an
/// unknown formulation or method, a method the formulation lacks, a non-positive `instances`,
/// `iterations`, `step_size` or a `knots` below 2, a sweep axis other than `timestep`.
pub fn plan(
    file: &Path,
    text: &str,
    cfg: ExperimentConfig,
    catalog: &Catalog,
) -> Result<ControlPlan, ConfigError> {
    let err = |key: &str, message: String| ConfigError {
        file: file.to_path_buf(),
        line: locate_nearest(text, key),
        key: key.to_string(),
        message,
    };
    let StudySpec::ControlSynthesis(spec) = &cfg.study else {
        return Err(err("study", "is not a control_synthesis study".into()));
    };
    crate::yaml_checks::unread_top_level_key(file, text, IGNORED_TOP_LEVEL, "control_synthesis")?;
    let spec = spec.clone();
    if spec.instances == 0 {
        return Err(err("study.instances", "must be at least 1".into()));
    }
    if spec.first_seed == 0 || spec.first_seed.checked_add(spec.instances).is_none() {
        return Err(err(
            "study.first_seed",
            format!(
                "must be at least 1 (seed 0 is the nominal instance) and leave room for {} instances; got {}",
                spec.instances, spec.first_seed
            ),
        ));
    }
    if spec.iterations == 0 {
        return Err(err("study.iterations", "must be at least 1".into()));
    }
    if !(spec.step_size.is_finite() && spec.step_size > 0.0) {
        return Err(err(
            "study.step_size",
            format!(
                "must be a finite number > 0 (rad/s); got {}",
                spec.step_size
            ),
        ));
    }
    if !(spec.yaw_weight.is_finite() && spec.yaw_weight >= 0.0) {
        return Err(err(
            "study.yaw_weight",
            format!(
                "must be a finite number >= 0 (m^2/rad^2); got {}",
                spec.yaw_weight
            ),
        ));
    }
    if !(spec.speed_weight.is_finite() && spec.speed_weight >= 0.0) {
        return Err(err(
            "study.speed_weight",
            format!(
                "must be a finite number >= 0 (s^2); got {}",
                spec.speed_weight
            ),
        ));
    }
    if !(spec.step_decay.is_finite() && spec.step_decay > 0.0 && spec.step_decay <= 1.0) {
        return Err(err(
            "study.step_decay",
            format!(
                "must be a number in (0, 1] (factor per Adam update); got {}",
                spec.step_decay
            ),
        ));
    }
    if spec.knots < 2 || spec.knots > MAX_KNOTS {
        return Err(err(
            "study.knots",
            format!(
                "must be at least 2 and at most {MAX_KNOTS}; got {}",
                spec.knots
            ),
        ));
    }
    if spec.methods.is_empty() {
        return Err(err("study.methods", "is empty; list at least one".into()));
    }
    let mut methods = Vec::new();
    for (i, m) in spec.methods.iter().enumerate() {
        let key = format!("study.methods[{i}]");
        let method = GradientMethod::parse(m).map_err(|e| err(&key, e))?;
        if methods.contains(&method) {
            return Err(err(&key, format!("'{m}' is listed twice")));
        }
        methods.push(method);
    }
    if spec.parametrizations.is_empty() {
        return Err(err(
            "study.parametrizations",
            "is empty; list at least one".into(),
        ));
    }
    let mut parametrizations: Vec<Parametrization> = Vec::new();
    for (i, m) in spec.parametrizations.iter().enumerate() {
        let key = format!("study.parametrizations[{i}]");
        let par = Parametrization::parse(m).map_err(|e| err(&key, e))?;
        if parametrizations.contains(&par) {
            return Err(err(&key, format!("'{m}' is listed twice")));
        }
        parametrizations.push(par);
    }
    if cfg.scenes.is_empty() {
        return Err(err("scenes", "is empty; list at least one scene".into()));
    }
    if cfg.formulations.is_empty() {
        return Err(err("formulations", "is empty; list at least one".into()));
    }
    for (list, labels) in [
        (
            "scenes",
            cfg.scenes.iter().map(|e| e.label()).collect::<Vec<_>>(),
        ),
        (
            "formulations",
            cfg.formulations.iter().map(|e| e.label()).collect(),
        ),
    ] {
        for (i, l) in labels.iter().enumerate() {
            if let Some(j) = labels[..i].iter().position(|m| m == l) {
                return Err(err(
                    &format!("{list}[{i}]"),
                    format!("duplicate label '{l}' (also {list}[{j}]); give each entry a distinct `label` so their results are not merged"),
                ));
            }
        }
    }
    let mut timesteps = vec![DEFAULT_TIMESTEP_S];
    for (axis, values) in &cfg.sweep {
        let key = format!("sweep.{axis}");
        if axis != "timestep" {
            return Err(err(
                &key,
                "a control_synthesis study sweeps only `timestep` (instances come from study.instances)".into(),
            ));
        }
        timesteps = values
            .iter()
            .map(|v| {
                v.as_f64()
                    .filter(|h| h.is_finite() && *h > 0.0)
                    .ok_or_else(|| {
                        err(
                            &key,
                            format!("timesteps must be finite numbers > 0 (s); got {v}"),
                        )
                    })
            })
            .collect::<Result<_, _>>()?;
        if timesteps.is_empty() {
            return Err(err(&key, "is empty; give at least one value".into()));
        }
    }
    let n = [
        cfg.formulations.len() as u64,
        methods.len() as u64,
        parametrizations.len() as u64,
        timesteps.len() as u64,
        spec.instances,
    ]
    .iter()
    .fold(cfg.scenes.len() as u64, |a, &b| a.saturating_mul(b));
    if n > contactlab_scenarios::limits::MAX_CELLS as u64 {
        return Err(err(
            "study.instances",
            format!(
                "the study has {n} cells, over the limit of {}",
                contactlab_scenarios::limits::MAX_CELLS
            ),
        ));
    }
    let max_steps = cfg
        .max_steps
        .unwrap_or(contactlab_scenarios::limits::DEFAULT_MAX_STEPS);
    let mut cells = Vec::new();
    for (si, s) in cfg.scenes.iter().enumerate() {
        if !SCENES.contains(&s.name.as_str()) {
            return Err(err(
                &format!("scenes[{si}].name"),
                format!(
                    "a control_synthesis study has a control problem for {} only, not '{}'",
                    SCENES.join(", "),
                    s.name
                ),
            ));
        }
        if s.params.contains_key("seed") {
            return Err(err(
                &format!("scenes[{si}].seed"),
                "the instances' seeds are study.first_seed.. (study.instances of them); remove `seed`".into(),
            ));
        }
        // Each formulation runs the methods it offers; a method no formulation offers, or a
        // formulation offered none, is an error.
        for (mi, &m) in methods.iter().enumerate() {
            if !cfg.formulations.iter().any(|f| m.available_for(&f.name)) {
                let names: Vec<&str> = cfg.formulations.iter().map(|f| f.name.as_str()).collect();
                return Err(err(
                    &format!("study.methods[{mi}]"),
                    format!(
                        "gradient method '{}' needs formulation {}, and the formulations are {}",
                        m.name(),
                        m.formulation().unwrap_or("any"),
                        names.join(", ")
                    ),
                ));
            }
        }
        for (fi, f) in cfg.formulations.iter().enumerate() {
            let fkey = format!("formulations[{fi}]");
            catalog
                .formulation(&f.name)
                .map_err(|m| err(&format!("{fkey}.name"), m))?;
            let params = Value::Object(f.params.clone());
            if let Ok(Err(m)) = catch_quietly(|| catalog.build_formulation(&f.name, &params)) {
                return Err(err(&fkey, m));
            }
            if !methods.iter().any(|m| m.available_for(&f.name)) {
                let names: Vec<&str> = methods.iter().map(|m| m.name()).collect();
                return Err(err(
                    &fkey,
                    format!(
                        "'{}' offers none of the study's methods ({})",
                        f.name,
                        names.join(", ")
                    ),
                ));
            }
            for &m in &methods {
                if !m.available_for(&f.name) {
                    continue;
                }
                for &par in &parametrizations {
                    for &h in &timesteps {
                        for seed in spec.first_seed..spec.first_seed + spec.instances {
                            let mut sp = s.params.clone();
                            sp.insert("seed".into(), json!(seed));
                            let scene_params = Value::Object(sp);
                            if seed == spec.first_seed {
                                let p = ControlProblem::box_traversal(&scene_params, h, spec.knots)
                                    .map_err(|e| err(&format!("scenes[{si}]"), e.to_string()))?;
                                if h > p.horizon {
                                    return Err(err(
                                        "sweep.timestep",
                                        format!(
                                            "timestep {h} s is longer than the scene's horizon {} s",
                                            p.horizon
                                        ),
                                    ));
                                }
                                if p.steps as u64 > max_steps {
                                    return Err(err(
                                        "sweep.timestep",
                                        format!(
                                            "timestep {h} s gives {} steps per rollout, over the limit of {max_steps} (raise it with `max_steps:`)",
                                            p.steps
                                        ),
                                    ));
                                }
                                par.check(p.nu())
                                    .map_err(|e| err("study.parametrizations", e))?;
                            }
                            let mut key = json!({
                                "study": "control_synthesis", "scene": s.name, "scene_params": scene_params,
                                "formulation": f.name, "formulation_params": params, "label": f.label(),
                                "method": m.name(), "timestep": h, "iterations": spec.iterations,
                                "step_size": spec.step_size, "knots": spec.knots, "yaw_weight": spec.yaw_weight,
                                "speed_weight": spec.speed_weight, "step_decay": spec.step_decay,
                            });
                            // The default parametrization leaves the id as it was before the key
                            // existed, so earlier results stay resumable.
                            if par != Parametrization::Wheels {
                                key["parametrization"] = json!(par.name());
                            }
                            let id = crate::sweep::hash_hex(&key);
                            cells.push(ControlCell {
                                id,
                                scene: s.name.clone(),
                                scene_label: s.label().to_string(),
                                scene_params,
                                formulation: FormulationChoice {
                                    name: f.name.clone(),
                                    params: params.clone(),
                                },
                                label: f.label().to_string(),
                                method: m,
                                parametrization: par,
                                timestep_s: h,
                                seed,
                            });
                        }
                    }
                }
            }
        }
    }
    Ok(ControlPlan {
        file: file.to_path_buf(),
        config: cfg,
        spec,
        cells,
    })
}

/// The line of `key`, or of its nearest enclosing key that [`locate`] finds (an item of a flow
/// sequence such as `methods: [a, b]` is on its key's line).
fn locate_nearest(text: &str, key: &str) -> Option<usize> {
    let mut k = key.to_string();
    loop {
        if let Some(l) = locate(text, &k) {
            return Some(l);
        }
        let cut = k.rfind(['.', '['])?;
        k.truncate(cut);
    }
}

const fn c(name: &'static str, kind: Kind, doc: &'static str) -> ColumnDef {
    ColumnDef { name, kind, doc }
}

/// The columns of a control-synthesis row (identity columns as in [`crate::results::COLUMNS`]).
pub const COLUMNS: &[ColumnDef] = &[
    c(
        "cell_id",
        Kind::Str,
        "stable hash of everything that determines the row",
    ),
    c("experiment", Kind::Str, "experiment name"),
    c("scene", Kind::Str, "scene registry name"),
    c("scene_label", Kind::Str, "scene entry label"),
    c(
        "scene_params",
        Kind::Str,
        "scene parameters with the instance's seed (JSON)",
    ),
    c("formulation", Kind::Str, "formulation registry name"),
    c("label", Kind::Str, "formulation entry label"),
    c(
        "formulation_params",
        Kind::Str,
        "formulation parameters (JSON)",
    ),
    c(
        "method",
        Kind::Str,
        "gradient method: adjoint, adjoint_lagged, fd_central",
    ),
    c(
        "parametrization",
        Kind::Str,
        "coordinates Adam moves: wheels (one per wheel and knot) or drive (forward, turn, rear per knot)",
    ),
    c("timestep_s", Kind::F64, "timestep h"),
    c("seed", Kind::U64, "instance (box_traversal's seed)"),
    c("horizon_s", Kind::F64, "simulated time of each rollout"),
    c("threads", Kind::U64, "worker threads of the run"),
    c(
        "status",
        Kind::Str,
        "ok (the synthesis ran; success says whether it succeeded) or failed",
    ),
    c(
        "reason",
        Kind::Str,
        "why the synthesis failed or stopped before its budget (empty otherwise)",
    ),
    c("knots", Kind::U64, "spline knots per wheel"),
    c("iteration_budget", Kind::U64, "most Adam updates"),
    c("step_size", Kind::F64, "Adam step size alpha of the first update (rad/s)"),
    c(
        "step_decay",
        Kind::F64,
        "factor applied to alpha after every Adam update (1: constant)",
    ),
    c(
        "yaw_weight",
        Kind::F64,
        "yaw weight of the synthesis objective (m^2/rad^2)",
    ),
    c(
        "speed_weight",
        Kind::F64,
        "weight of the squared final speed in the synthesis objective (s^2)",
    ),
    c(
        "success",
        Kind::U64,
        "1 if an iterate's final state is within 0.2 m of the target and below 0.3 m/s, and its rollout breaks none of the harness's divergence rules",
    ),
    c(
        "physical_violation",
        Kind::Str,
        "the harness's divergence rule (non-finite state, energy rise, deep penetration, speed bound) that the last iterate's rollout breaks; empty if none",
    ),
    c(
        "iterations_to_success",
        Kind::F64,
        "Adam updates before the first successful iterate (NaN: none)",
    ),
    c("iterations_run", Kind::U64, "Adam updates taken"),
    c(
        "initial_loss_m2",
        Kind::F64,
        "task loss of the starting knots",
    ),
    c(
        "final_loss_m2",
        Kind::F64,
        "task loss of the last evaluated iterate",
    ),
    c(
        "final_position_error_m",
        Kind::F64,
        "last iterate's final horizontal distance to the target",
    ),
    c(
        "final_speed_m_s",
        Kind::F64,
        "last iterate's final chassis speed",
    ),
    c(
        "gradient_norm_initial",
        Kind::F64,
        "norm of the gradient at the starting knots (m^2 per rad/s)",
    ),
    c(
        "gradient_norm_final",
        Kind::F64,
        "norm of the last gradient taken (m^2 per rad/s)",
    ),
    c(
        "unconverged_steps",
        Kind::U64,
        "unconverged forward steps summed over the evaluated iterates' rollouts",
    ),
    c(
        "unconverged_steps_max",
        Kind::U64,
        "most unconverged forward steps in one rollout",
    ),
    c("steps", Kind::U64, "steps per rollout"),
    c(
        "wall_time_s",
        Kind::F64,
        "wall time of the whole synthesis (a batched method: the whole batch's, over the iterations this instance ran)",
    ),
    c(
        "wall_time_per_iteration_s",
        Kind::F64,
        "wall time per evaluated iterate (forward and gradient; a batched method: of the whole batch, every running instance at once)",
    ),
    c(
        "batch_worlds",
        Kind::U64,
        "instances run as one batch (methods autodiff and adjoint_batched; 0: one synthesis per cell)",
    ),
    c(
        "batch_resumed_at",
        Kind::U64,
        "a batched method: the iteration its batch last resumed from, stored progress of an interrupted run (0: ran from the start in one process)",
    ),
    c(
        "loss_curve",
        Kind::Str,
        "task loss of every evaluated iterate, iterate 0 first (JSON array, m^2)",
    ),
    c(
        "objective_curve",
        Kind::Str,
        "synthesis objective (task loss with yaw_weight, plus speed_weight x final speed^2) of every evaluated iterate (JSON array, m^2)",
    ),
    c(
        "peak_rss_mib",
        Kind::F64,
        "process peak resident memory when the cell finished (MiB; process-wide)",
    ),
];

/// The definition of control-synthesis column `name`.
pub fn column(name: &str) -> Option<&'static ColumnDef> {
    COLUMNS.iter().find(|c| c.name == name)
}

fn identity(plan: &ControlPlan, cell: &ControlCell, threads: usize) -> Row {
    let mut r = Row::default();
    r.set_str("cell_id", &cell.id);
    r.set_str("experiment", &plan.config.name);
    r.set_str("scene", &cell.scene);
    r.set_str("scene_label", &cell.scene_label);
    r.set_str("scene_params", cell.scene_params.to_string());
    r.set_str("formulation", &cell.formulation.name);
    r.set_str("label", &cell.label);
    r.set_str("formulation_params", cell.formulation.params.to_string());
    r.set_str("method", cell.method.name());
    r.set_str("parametrization", cell.parametrization.name());
    r.set_f64("timestep_s", cell.timestep_s);
    r.set_u64("seed", cell.seed);
    r.set_u64("threads", threads as u64);
    r.set_u64("knots", plan.spec.knots as u64);
    r.set_u64("iteration_budget", plan.spec.iterations as u64);
    r.set_f64("step_size", plan.spec.step_size);
    r.set_f64("step_decay", plan.spec.step_decay);
    r.set_f64("yaw_weight", plan.spec.yaw_weight);
    r.set_f64("speed_weight", plan.spec.speed_weight);
    r
}

/// Run one cell to a row; never panics (a failure is a `failed` row).
pub fn run_cell(plan: &ControlPlan, cell: &ControlCell, threads: usize) -> Row {
    let mut row = identity(plan, cell, threads);
    let out = catch_quietly(|| synthesize_cell(plan, cell, &mut row));
    finish(&mut row, out);
    row
}

/// The harness's divergence rules ([`crate::metrics::Accumulator`]) on the rollout of knots `z`
/// of problem `p`: the first rule that fires, or the formulation's own divergence.
///
/// # Errors
/// The scene or formulation does not build.
fn physical_check(
    cell: &ControlCell,
    p: &ControlProblem,
    z: &[f64],
) -> Result<Option<String>, String> {
    let scene =
        contactlab_scenarios::build(&cell.scene, &cell.scene_params).map_err(|e| e.to_string())?;
    let mut f = cell.formulation.build()?;
    let mut state = p.initial.clone();
    let mut acc = crate::metrics::Accumulator::new(&scene, &state);
    for u in p.controls(z) {
        let r = f.step(&p.model, &mut state, &u, p.h);
        if let Some(why) = r.diverged.clone() {
            return Ok(Some(why));
        }
        if let Some(why) = acc.observe(&p.model, &state, &r) {
            return Ok(Some(why));
        }
    }
    Ok(None)
}

/// The cell's problem and starting knots.
fn cell_problem(
    plan: &ControlPlan,
    cell: &ControlCell,
) -> Result<(ControlProblem, Vec<f64>), String> {
    let mut p = ControlProblem::box_traversal(&cell.scene_params, cell.timestep_s, plan.spec.knots)
        .map_err(|e| e.to_string())?;
    p.yaw_weight = plan.spec.yaw_weight;
    p.speed_weight = plan.spec.speed_weight;
    p.parametrization = cell.parametrization;
    let radius = cell
        .scene_params
        .get("wheel_radius")
        .and_then(Value::as_f64)
        .unwrap_or(
            contactlab_scenarios::benchmark::wheeled_robot::WheeledRobot::default().wheel_radius,
        );
    let z0 = p.initial_knots(radius);
    Ok((p, z0))
}

fn schedule(plan: &ControlPlan) -> cs::Schedule {
    cs::Schedule {
        step_size: plan.spec.step_size,
        step_decay: plan.spec.step_decay,
    }
}

fn synthesize_cell(
    plan: &ControlPlan,
    cell: &ControlCell,
    row: &mut Row,
) -> Result<Option<String>, String> {
    let (p, z0) = cell_problem(plan, cell)?;
    row.set_f64("horizon_s", p.horizon);
    row.set_u64("steps", p.steps as u64);
    let s = cs::synthesize(
        &p,
        &cell.formulation,
        cell.method,
        &z0,
        plan.spec.iterations,
        schedule(plan),
    )?;
    record(cell, &p, &s, row)
}

/// The rows of a batched method's cells (the same formulation, method, parametrization and
/// timestep; one seed each), run as one batch ([`cs::synthesize_batched`]); a failure of the
/// batch fails every row with its reason.
pub fn run_batch(
    plan: &ControlPlan,
    cells: &[&ControlCell],
    threads: usize,
    resume: Option<cs::BatchProgress>,
    progress: bool,
    after_iteration: &mut dyn FnMut(&cs::BatchProgress),
) -> Vec<Row> {
    let mut rows: Vec<Row> = cells.iter().map(|c| identity(plan, c, threads)).collect();
    let problems: Result<Vec<(ControlProblem, Vec<f64>)>, String> =
        cells.iter().map(|c| cell_problem(plan, c)).collect();
    let what = format!(
        "batch of {} {} {} {}",
        cells.len(),
        cells[0].label,
        cells[0].method.name(),
        cells[0].parametrization.name()
    );
    // Stored progress that does not fit this batch (another shape, an inconsistent record,
    // [`cs::BatchProgress::check`]) is said and the batch starts over: it is never applied, and
    // never fails the batch. (A cell whose problem cannot be built fails the batch below.)
    let resume = match (&problems, resume) {
        (Ok(ps), Some(r)) => {
            let dims: Vec<usize> = ps.iter().map(|(_, z)| z.len()).collect();
            match r.check(cells.len(), plan.spec.iterations, &dims) {
                Ok(()) => Some(r),
                Err(why) => {
                    eprintln!("warning: {what}: the stored progress does not fit it ({why}); the batch starts over");
                    None
                }
            }
        }
        (_, r) => r,
    };
    if let (Some(r), true) = (&resume, progress) {
        eprintln!(
            "{what}: resuming at iteration {} (stored progress)",
            r.next_iteration
        );
    }
    let resumed_at = resume.as_ref().map_or(0, |r| r.next_iteration);
    let outcome = problems.and_then(|ps| {
        let (problems, z0): (Vec<_>, Vec<_>) = ps.into_iter().unzip();
        let s = catch_quietly(|| {
            cs::synthesize_batched(
                &problems,
                &cells[0].formulation,
                &z0,
                plan.spec.iterations,
                schedule(plan),
                resume,
                after_iteration,
            )
        })
        .map_err(|_| "panicked".to_string())??;
        Ok((problems, s))
    });
    match outcome {
        Ok((problems, s)) => {
            for (((row, cell), p), s) in rows.iter_mut().zip(cells).zip(&problems).zip(&s) {
                row.set_f64("horizon_s", p.horizon);
                row.set_u64("steps", p.steps as u64);
                row.set_u64("batch_worlds", cells.len() as u64);
                row.set_u64("batch_resumed_at", resumed_at as u64);
                let out = catch_quietly(|| record(cell, p, s, row));
                finish(row, out);
            }
        }
        Err(why) => {
            for row in &mut rows {
                finish(row, Ok(Err(why.clone())));
            }
        }
    }
    rows
}

/// A batch's progress as stored between its iterations ([`progress_path`]): the executable
/// that computed it ([`build_identity`]), the worker threads it split the batch over (the
/// shards' sums round differently) and the batch's cells, so that a resumed batch is the same
/// computation. `revision` (the results folder's git revision at run time) and `version` are
/// kept for the reader, not compared: a commit in the working tree does not change the running
/// executable, and another version is another executable.
#[derive(Serialize, Deserialize)]
struct StoredProgress {
    revision: String,
    version: String,
    build: String,
    threads: usize,
    cells: Vec<String>,
    progress: cs::BatchProgress,
}

/// The running executable's identity: its size and modification time and the features it was
/// built with, so that progress stored by another build (another commit, uncommitted changes,
/// a build without `burn`) is never resumed by this one. `None` where the executable cannot be
/// read (then nothing is resumed).
fn build_identity() -> Option<String> {
    let meta = std::fs::metadata(std::env::current_exe().ok()?).ok()?;
    let mtime = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_nanos();
    let features: Vec<&str> = [
        ("burn", cfg!(feature = "burn")),
        ("wgpu", cfg!(feature = "wgpu")),
        ("cuda", cfg!(feature = "cuda")),
    ]
    .iter()
    .filter(|f| f.1)
    .map(|f| f.0)
    .collect();
    Some(format!(
        "{} bytes, modified {mtime} ns after the epoch, features [{}]",
        meta.len(),
        features.join(", ")
    ))
}

/// Where a batch's progress is stored between iterations: `progress/<hash of its cells>.cbor`
/// in the results folder (CBOR: losses may be NaN or infinite, which JSON cannot hold).
pub fn progress_path(dir: &Path, cells: &[&ControlCell]) -> PathBuf {
    let ids: Vec<&str> = cells.iter().map(|c| c.id.as_str()).collect();
    dir.join("progress")
        .join(format!("{}.cbor", crate::sweep::hash_hex(&json!(ids))))
}

/// The stored progress of the batch `cells` at `path`, if it was computed by this revision
/// and version for exactly these cells; anything else is said on standard error and the batch
/// starts over (its result would not be one computation).
fn load_progress(path: &Path, cells: &[&ControlCell], threads: usize) -> Option<cs::BatchProgress> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            eprintln!(
                "warning: {}: cannot read the batch's stored progress ({e}); the batch starts over",
                path.display()
            );
            return None;
        }
    };
    let stored: StoredProgress = match ciborium::from_reader(std::io::BufReader::new(file)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "warning: {}: not a batch's stored progress ({e}); the batch starts over",
                path.display()
            );
            return None;
        }
    };
    let ids: Vec<String> = cells.iter().map(|c| c.id.clone()).collect();
    let build = build_identity();
    let why = if stored.cells != ids {
        Some("other cells".to_string())
    } else if build.as_deref() != Some(stored.build.as_str()) {
        Some(format!(
            "another build (version {}, {}), this run is {}",
            stored.version,
            stored.build,
            build
                .as_deref()
                .unwrap_or("an executable that cannot be read")
        ))
    } else if stored.threads != threads {
        Some(format!(
            "{} worker threads, this run has {threads} (the batch's sums would round differently)",
            stored.threads
        ))
    } else {
        None
    };
    if let Some(why) = why {
        eprintln!(
            "warning: {}: stored progress of {why}; the batch starts over",
            path.display()
        );
        return None;
    }
    Some(stored.progress)
}

/// Store a batch's progress at `path` (atomically). A failure is returned in words; the
/// caller says it (once per batch) and the batch goes on (only an interruption would then cost
/// its iterations). An executable whose identity cannot be read stores nothing.
fn store_progress(
    path: &Path,
    cells: &[&ControlCell],
    manifest: &Manifest,
    threads: usize,
    progress: &cs::BatchProgress,
) -> Result<(), String> {
    let build = build_identity().ok_or("the executable's identity cannot be read")?;
    let stored = StoredProgress {
        revision: manifest.revision.clone(),
        version: manifest.version.clone(),
        build,
        threads,
        cells: cells.iter().map(|c| c.id.clone()).collect(),
        progress: progress.clone(),
    };
    let mut bytes = Vec::new();
    ciborium::into_writer(&stored, &mut bytes)
        .map_err(|e| e.to_string())
        .and_then(|()| write_atomic(path, &bytes).map_err(|e| e.to_string()))
}

/// Set a row's status and reason from a cell's outcome and fill the columns it left empty.
fn finish(
    row: &mut Row,
    out: Result<Result<Option<String>, String>, Box<dyn std::any::Any + Send>>,
) {
    let (status, reason) = match out {
        Ok(Ok(stopped)) => ("ok", stopped.unwrap_or_default()),
        Ok(Err(why)) => ("failed", why),
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
}

/// The row's outcome columns of synthesis `s` of cell `cell` (problem `p`), after checking the
/// last iterate's rollout under the harness's divergence rules.
fn record(
    cell: &ControlCell,
    p: &ControlProblem,
    s: &cs::Synthesis,
    row: &mut Row,
) -> Result<Option<String>, String> {
    if !s.losses.first().is_some_and(|l| l.is_finite()) {
        // Not even the starting iterate has a result (a rollout that diverged or left the
        // engine's scene class at once): a failed cell, not an ok one with NaN losses.
        return Err(s
            .stopped
            .clone()
            .unwrap_or_else(|| "the starting iterate's loss is not finite".into()));
    }
    // The last iterate's rollout (the successful one, if any) under the harness's divergence
    // rules, which the synthesis's own rollouts do not apply: a success that sinks a wheel
    // into the ground is not one.
    let violation = physical_check(cell, p, &s.knots)?;
    let success = s.success() && violation.is_none();
    row.set_str("physical_violation", violation.clone().unwrap_or_default());
    row.set_u64("success", u64::from(success));
    row.set_f64(
        "iterations_to_success",
        s.iterations_to_success
            .filter(|_| success)
            .map_or(f64::NAN, |i| i as f64),
    );
    row.set_u64("iterations_run", s.losses.len().saturating_sub(1) as u64);
    row.set_f64(
        "initial_loss_m2",
        s.losses.first().copied().unwrap_or(f64::NAN),
    );
    row.set_f64("final_loss_m2", s.final_loss());
    if let Some(last) = &s.last {
        row.set_f64(
            "final_position_error_m",
            (last.q[0] - p.target.x).hypot(last.q[1] - p.target.y),
        );
        row.set_f64(
            "final_speed_m_s",
            (last.v[0].powi(2) + last.v[1].powi(2) + last.v[2].powi(2)).sqrt(),
        );
    }
    let nan = f64::NAN;
    row.set_f64(
        "gradient_norm_initial",
        s.gradient_norms.first().copied().unwrap_or(nan),
    );
    row.set_f64(
        "gradient_norm_final",
        s.gradient_norms.last().copied().unwrap_or(nan),
    );
    row.set_u64(
        "unconverged_steps",
        s.unconverged.iter().sum::<usize>() as u64,
    );
    row.set_u64(
        "unconverged_steps_max",
        s.unconverged.iter().copied().max().unwrap_or(0) as u64,
    );
    row.set_f64("wall_time_s", s.wall_s);
    row.set_f64("wall_time_per_iteration_s", s.wall_per_iteration_s());
    let curve: Vec<Value> = s.losses.iter().map(|&l| json!(l)).collect();
    row.set_str("loss_curve", Value::Array(curve).to_string());
    let objective: Vec<Value> = s.objectives.iter().map(|&l| json!(l)).collect();
    row.set_str("objective_curve", Value::Array(objective).to_string());
    let succeeded = s.success();
    Ok(match (s.stopped.clone(), &violation) {
        (Some(why), _) => Some(why),
        (None, Some(rule)) if succeeded => Some(format!(
            "the successful iterate's rollout breaks the harness's rule ({rule}): not counted as a success"
        )),
        (None, _) => None,
    })
}

/// The cells of `plan` that `shard` runs (all of them without one), in grid order; a batched
/// method's batch of worlds is never split ([`crate::shard`]).
pub fn shard_cells<'a>(
    plan: &'a ControlPlan,
    shard: Option<&crate::shard::Shard>,
) -> Vec<&'a ControlCell> {
    crate::shard::select(shard, plan.cells.iter().collect(), |c| shard_unit(c))
}

/// The shard unit of a cell (`--shard`, [`crate::shard`]): a batched method's cells of one
/// (formulation, method, parametrization, timestep) are one batch of worlds, so one unit;
/// every other cell is its own.
fn shard_unit(c: &ControlCell) -> String {
    if c.method.batched() {
        format!(
            "batch {} {} {} {}",
            c.label,
            c.method.name(),
            c.parametrization.name(),
            c.timestep_s
        )
    } else {
        c.id.clone()
    }
}

/// Run the study into `opts.dir` (resumable, like [`crate::runner::run`]).
///
/// # Errors
/// The folder locked by another process, a bad cell file, or results that cannot be written.
pub fn run(plan: &ControlPlan, opts: &RunOptions) -> Result<RunSummary, ResultsError> {
    let dir = &opts.dir;
    let _lock = lock_dir(dir)?;
    remove_stale_temps(dir)?;
    let io = |p: &Path, source| ResultsError::Io {
        path: p.to_path_buf(),
        source,
    };
    if opts.fresh {
        for sub in ["cells", "figures", "progress"] {
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
    let finished = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let first_error: Mutex<Option<ResultsError>> = Mutex::new(None);
    // Batched methods: one batch per (formulation, method, parametrization, timestep) of the
    // cells left to run.
    let total = todo.len();
    let (batched, single): (Vec<&ControlCell>, Vec<&ControlCell>) =
        todo.iter().partition(|c| c.method.batched());
    let mut batches: Vec<Vec<&ControlCell>> = Vec::new();
    for c in batched {
        let same = |b: &&ControlCell| {
            b.label == c.label
                && b.method == c.method
                && b.parametrization == c.parametrization
                && b.timestep_s == c.timestep_s
        };
        match batches.iter_mut().find(|g| same(&g[0])) {
            Some(g) => g.push(c),
            None => batches.push(vec![c]),
        }
    }
    let todo = single;
    pool.install(|| {
        for cells in &batches {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            let t0 = std::time::Instant::now();
            let path = progress_path(dir, cells);
            let resume = load_progress(&path, cells, opts.jobs);
            // Whether this run stored progress, and whether it said it could not.
            let (mut stored, mut said) = (false, false);
            let mut keep = |p: &cs::BatchProgress| {
                match store_progress(&path, cells, &manifest, opts.jobs, p) {
                    Ok(()) => stored = true,
                    Err(e) if !said => {
                        said = true;
                        eprintln!(
                            "warning: {}: cannot store the batch's progress ({e}); an interruption would restart it",
                            path.display()
                        );
                    }
                    Err(_) => {}
                }
            };
            let rows = run_batch(plan, cells, opts.jobs, resume, opts.progress, &mut keep);
            // Resumed: the rows say from which iteration (progress is stored after one at least).
            let resumed = rows.iter().any(|r| r.u64("batch_resumed_at") > 0);
            for (cell, mut row) in cells.iter().zip(rows) {
                row.set_f64("peak_rss_mib", crate::metrics::peak_rss_mib());
                if let Err(e) = write_cell(dir, &cell.id, &row) {
                    first_error.lock().expect("not poisoned").get_or_insert(e);
                    stop.store(true, Ordering::SeqCst);
                    return;
                }
                finished.fetch_add(1, Ordering::SeqCst);
            }
            // The batch's cells hold its result: the progress it resumed from or stored has
            // served. Progress this run neither used nor wrote (another build's, which this one
            // did not resume) is left alone.
            if stored || resumed {
                match std::fs::remove_file(&path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => eprintln!(
                        "warning: {}: cannot remove the finished batch's progress ({e})",
                        path.display()
                    ),
                    _ => {}
                }
            }
            if opts.progress {
                eprintln!(
                    "batch of {} {} {} {}: {} successes, {:.1} s",
                    cells.len(),
                    cells[0].label,
                    cells[0].method.name(),
                    cells[0].parametrization.name(),
                    cells
                        .iter()
                        .filter_map(|c| read_cell(dir, &c.id).ok().flatten())
                        .filter(|r| r.u64("success") == 1)
                        .count(),
                    t0.elapsed().as_secs_f64()
                );
            }
        }
        todo.par_iter().for_each(|cell| {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let mut row = run_cell(plan, cell, opts.jobs);
            row.set_f64("peak_rss_mib", crate::metrics::peak_rss_mib());
            if let Err(e) = write_cell(dir, &cell.id, &row) {
                first_error.lock().expect("not poisoned").get_or_insert(e);
                stop.store(true, Ordering::SeqCst);
                return;
            }
            let n = finished.fetch_add(1, Ordering::SeqCst) + 1;
            if opts.progress {
                eprintln!(
                    "{n}/{total} {} {} {} seed {}: success {} final loss {:.4} m^2, {:.2} s/iteration",
                    cell.label,
                    cell.method.name(),
                    cell.parametrization.name(),
                    cell.seed,
                    row.u64("success"),
                    row.f64("final_loss_m2"),
                    row.f64("wall_time_per_iteration_s")
                );
            }
            if opts.stop_after.is_some_and(|k| n >= k) {
                stop.store(true, Ordering::SeqCst);
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
    crate::results::write_runs_with(dir, &rows, COLUMNS)?;
    manifest.end = crate::results::now_utc();
    manifest.write(dir)?;
    let outputs_error = write_outputs(dir, &rows, &plan.config).err();
    let count = |s: &str| rows.iter().filter(|r| r.str("status") == s).count();
    Ok(RunSummary {
        total: mine.len(),
        resumed,
        ran: finished.load(Ordering::SeqCst),
        ok: count("ok"),
        diverged: 0,
        failed: count("failed"),
        skipped: 0,
        remaining: mine.len() - rows.len(),
        outputs_error,
    })
}

/// The rows of a series: (scene label, formulation label, method, parametrization, timestep
/// bits).
type Key = (String, String, String, String, u64);

fn groups(rows: &[Row]) -> BTreeMap<Key, Vec<&Row>> {
    let mut g: BTreeMap<Key, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        g.entry((
            r.scene_label().to_string(),
            r.str("label").to_string(),
            r.str("method").to_string(),
            parametrization_of(r).to_string(),
            r.f64("timestep_s").to_bits(),
        ))
        .or_default()
        .push(r);
    }
    g
}

/// A row's parametrization; rows written before the column existed are `wheels`.
fn parametrization_of(r: &Row) -> &str {
    match r.str("parametrization") {
        "" => "wheels",
        p => p,
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.retain(|x| x.is_finite());
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

fn mean(xs: &[f64]) -> f64 {
    let v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn fmt(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x != 0.0 && (x.abs() < 1e-2 || x.abs() >= 1e4) {
        format!("{x:.2e}")
    } else {
        format!("{x:.3}")
    }
}

/// The text of `report.md` for control-synthesis rows.
pub fn render(rows: &[Row], cfg: &ExperimentConfig, figures: &[PathBuf]) -> String {
    let mut s = format!("# {}\n\n{}\n\n", cfg.name, cfg.description);
    if let StudySpec::ControlSynthesis(spec) = &cfg.study {
        let _ = writeln!(
            s,
            "Control synthesis: Adam (Kingma & Ba 2015) on the objective (task loss with yaw weight {} m^2/rad^2, plus {} s^2 x final speed^2), at most {} updates, step size {} rad/s times {} per update, {} knots per wheel; success: within 0.2 m of the target and below 0.3 m/s. Losses below are the scene's task loss (yaw weight 1).\n",
            spec.yaw_weight, spec.speed_weight, spec.iterations, spec.step_size, spec.step_decay, spec.knots
        );
    }
    s += "## Success rate\n\n";
    s += "| scene | formulation | method | controls | h (s) | instances | success | rate | of them at the start (iterate 0) | median iterations to success | the same, of those not successful at the start | median final loss (m^2) | wall time per iteration (s) | median initial gradient norm | unconverged steps per rollout | failed |\n";
    s += "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for ((scene, label, method, par, hb), rs) in groups(rows) {
        let ok: Vec<&&Row> = rs.iter().filter(|r| r.str("status") == "ok").collect();
        let succ = ok.iter().filter(|r| r.u64("success") == 1).count();
        let at_start = ok
            .iter()
            .filter(|r| r.f64("iterations_to_success") == 0.0)
            .count();
        let rollouts: f64 = ok
            .iter()
            .map(|r| {
                let curve: Vec<f64> = serde_json::from_str(r.str("loss_curve")).unwrap_or_default();
                curve.len() as f64
            })
            .sum();
        let unconv: f64 = ok.iter().map(|r| r.u64("unconverged_steps") as f64).sum();
        let _ = writeln!(
            s,
            "| {scene} | {label} | {method} | {par} | {} | {} | {succ} | {:.0} % | {at_start} | {} | {} | {} | {} | {} | {} | {} |",
            f64::from_bits(hb),
            rs.len(),
            100.0 * succ as f64 / rs.len().max(1) as f64,
            fmt(median(ok.iter().map(|r| r.f64("iterations_to_success")).collect())),
            fmt(median(
                ok.iter()
                    .map(|r| r.f64("iterations_to_success"))
                    .filter(|&i| i > 0.0)
                    .collect()
            )),
            fmt(median(ok.iter().map(|r| r.f64("final_loss_m2")).collect())),
            fmt(mean(&ok.iter().map(|r| r.f64("wall_time_per_iteration_s")).collect::<Vec<_>>())),
            fmt(median(ok.iter().map(|r| r.f64("gradient_norm_initial")).collect())),
            fmt(if rollouts > 0.0 { unconv / rollouts } else { f64::NAN }),
            rs.len() - ok.len(),
        );
    }
    if rows.iter().any(|r| r.u64("batch_worlds") > 0) {
        s += "\nA batched method's (`autodiff`, `adjoint_batched`) wall time per iteration is the whole batch's: every instance still running, rolled out and differentiated at once (the batch's size is the column `batch_worlds`; it shrinks as instances succeed). The other methods' is one instance's. An iteration is one evaluated iterate (forward and gradient); the time per iteration is the synthesis's wall time over its evaluated iterates.\n";
    }
    s += "\n## Cells\n\n| scene | formulation | method | controls | h (s) | seed | success | iterations to success | initial loss | final loss | position error (m) | speed (m/s) | unconverged (max per rollout) | s/iteration | reason |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for r in rows.iter().take(crate::report::MAX_CELL_ROWS) {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} ({}) | {} | {} |",
            r.scene_label(),
            r.str("label"),
            r.str("method"),
            parametrization_of(r),
            r.f64("timestep_s"),
            r.u64("seed"),
            r.u64("success"),
            fmt(r.f64("iterations_to_success")),
            fmt(r.f64("initial_loss_m2")),
            fmt(r.f64("final_loss_m2")),
            fmt(r.f64("final_position_error_m")),
            fmt(r.f64("final_speed_m_s")),
            r.u64("unconverged_steps"),
            r.u64("unconverged_steps_max"),
            fmt(r.f64("wall_time_per_iteration_s")),
            r.str("reason"),
        );
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

/// The median loss at each iterate over a series' instances that took at least one Adam update
/// (those successful at the start have one point and would flatten the median); an instance
/// that stopped (success) keeps its last loss. All instances when none took an update.
fn median_curve(rs: &[&Row]) -> Vec<f64> {
    let all: Vec<Vec<f64>> = rs
        .iter()
        .map(|r| serde_json::from_str(r.str("loss_curve")).unwrap_or_default())
        .filter(|c: &Vec<f64>| !c.is_empty())
        .collect();
    let updated: Vec<Vec<f64>> = all.iter().filter(|c| c.len() > 1).cloned().collect();
    let curves = if updated.is_empty() { all } else { updated };
    let n = curves.iter().map(Vec::len).max().unwrap_or(0);
    (0..n)
        .map(|i| median(curves.iter().map(|c| c[i.min(c.len() - 1)]).collect()))
        .collect()
}

/// Draw `figures/loss_curves__<scene>.svg` and `.png`: the median task loss over the instances
/// that took an Adam update ([`median_curve`]) against the Adam iteration, one line per
/// (formulation, method, parametrization, timestep), log y.
///
/// # Errors
/// A drawing or file error, as text.
pub fn draw_loss_curves(dir: &Path, rows: &[Row]) -> Result<Vec<PathBuf>, String> {
    crate::figures::register_font();
    let fig_dir = dir.join("figures");
    std::fs::create_dir_all(&fig_dir).map_err(|e| format!("{}: {e}", fig_dir.display()))?;
    let mut by_scene: BTreeMap<String, Vec<(String, Vec<f64>)>> = BTreeMap::new();
    for ((scene, label, method, par, hb), rs) in groups(rows) {
        let name = format!("{label} {method} {par} h={}", f64::from_bits(hb));
        by_scene
            .entry(scene)
            .or_default()
            .push((name, median_curve(&rs)));
    }
    let mut written = Vec::new();
    for (scene, series) in by_scene {
        let stem = format!("loss_curves__{}", crate::figures::file_part(&scene));
        let svg = fig_dir.join(format!("{stem}.svg"));
        let png = fig_dir.join(format!("{stem}.png"));
        let title = format!("{scene}: median task loss (instances not solved at the start)");
        let mut text = String::new();
        {
            let root = SVGBackend::with_string(&mut text, (525, 375)).into_drawing_area();
            draw(&root, &title, &series, 1.0)?;
            root.present()
                .map_err(|e| format!("{}: {e}", svg.display()))?;
        }
        write_atomic(&svg, text.as_bytes()).map_err(|e| e.to_string())?;
        let tmp = temp_path(&png, ".png");
        let drawn = (|| {
            let root = BitMapBackend::new(&tmp, (1050, 750)).into_drawing_area();
            draw(&root, &title, &series, 2.0)?;
            root.present()
                .map_err(|e| format!("{}: {e}", png.display()))
        })();
        if let Err(e) = drawn {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        commit_temp(&tmp, &png).map_err(|e| e.to_string())?;
        written.push(svg);
        written.push(png);
    }
    Ok(written)
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    series: &[(String, Vec<f64>)],
    k: f64,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let px = |v: f64| (v * k) as i32;
    let logs: Vec<f64> = series
        .iter()
        .flat_map(|(_, c)| c.iter())
        .filter(|v| **v > 0.0 && v.is_finite())
        .map(|v| v.log10())
        .collect();
    let (mut y0, mut y1) = logs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    if !y0.is_finite() {
        (y0, y1) = (-3.0, 0.0);
    }
    if y1 - y0 < 0.5 {
        y0 -= 0.25;
        y1 += 0.25;
    }
    let x1 = series
        .iter()
        .map(|(_, c)| c.len())
        .max()
        .unwrap_or(1)
        .max(2) as f64
        - 1.0;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", px(15.0)))
        .margin(px(8.0))
        .x_label_area_size(px(38.0))
        .y_label_area_size(px(62.0))
        .build_cartesian_2d(0.0..x1, (y0 - 0.1)..(y1 + 0.1))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("Adam iteration")
        .y_desc("median task loss (m^2)")
        .y_label_formatter(&|v| format!("{:.2e}", 10f64.powf(*v)))
        .label_style(("sans-serif", px(11.0)))
        .axis_desc_style(("sans-serif", px(12.0)))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(err)?;
    for (i, (name, curve)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let style = ShapeStyle::from(&color).stroke_width(px(1.5) as u32);
        let pts: Vec<(f64, f64)> = curve
            .iter()
            .enumerate()
            .filter(|(_, v)| **v > 0.0 && v.is_finite())
            .map(|(i, v)| (i as f64, v.log10()))
            .collect();
        chart
            .draw_series(LineSeries::new(pts, style))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", px(10.0)))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err)?;
    Ok(())
}

/// Draw the loss curves and write `report.md` for `rows`; returns the paths written.
///
/// # Errors
/// A drawing or file error, as text (the report is still written when only a figure fails).
pub fn write_outputs(
    dir: &Path,
    rows: &[Row],
    cfg: &ExperimentConfig,
) -> Result<Vec<PathBuf>, String> {
    let (mut written, fig_err) = match draw_loss_curves(dir, rows) {
        Ok(w) => (w, None),
        Err(e) => (Vec::new(), Some(format!("figures not drawn: {e}"))),
    };
    let mut text = render(rows, cfg, &written);
    text += &crate::results::Manifest::read(dir).grid_section();
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

/// `contactlab report DIR` for a control-synthesis folder: rows from `runs.parquet`, or, when
/// an interrupted run left none, from the finished cells of the last run's grid (then
/// `runs.parquet` and `runs.csv` are written from them first).
///
/// # Errors
/// No rows, unreadable files, drawing or file errors, as text.
pub fn redraw(dir: &Path, cfg: &ExperimentConfig) -> Result<Vec<PathBuf>, String> {
    let rows = match crate::results::read_runs_with(dir, COLUMNS) {
        Ok(rows) => rows,
        Err(_) => {
            let ids: std::collections::BTreeSet<String> =
                Manifest::read(dir).cell_ids.into_iter().collect();
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

/// A plain-text table of the study's cells for `contactlab check`.
pub fn grid_table(plan: &ControlPlan) -> String {
    let mut out = format!("{} cells\n", plan.cells.len());
    out += &format!(
        "{:>5}  {:<18} {:<16} {:<16} {:<8} {:>10} {:>5}  id\n",
        "#", "scene", "formulation", "method", "controls", "timestep_s", "seed"
    );
    for (i, c) in plan.cells.iter().enumerate() {
        out += &format!(
            "{:>5}  {:<18} {:<16} {:<16} {:<8} {:>10} {:>5}  {}\n",
            i,
            c.scene_label,
            c.label,
            c.method.name(),
            c.parametrization.name(),
            c.timestep_s,
            c.seed,
            c.id
        );
    }
    out
}

/// Where a `control_synthesis` study's value in `text` fails to parse, as a [`ConfigError`]
/// naming `study.<key>` and its line: the YAML parser loses both inside the `kind`-tagged
/// `study:` mapping (serde buffers it), so each known key is parsed on its own here.
pub fn study_error(file: &Path, text: &str) -> Option<ConfigError> {
    let raw: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).ok()?;
    let study = raw.get("study")?.as_mapping()?;
    if study.get("kind").and_then(|k| k.as_str()) != Some("control_synthesis") {
        return None;
    }
    let known = [
        "kind",
        "instances",
        "first_seed",
        "methods",
        "iterations",
        "step_size",
        "knots",
        "yaw_weight",
        "speed_weight",
        "step_decay",
        "parametrizations",
    ];
    for (k, v) in study {
        let Some(k) = k.as_str() else { continue };
        let v = v.clone();
        let text_of = |e: serde_yaml_ng::Error| e.to_string();
        let e = match k {
            // A key written without a value is null, which `from_value` would take as an empty
            // list (methods) or fail on without naming the key; say so here.
            _ if v.is_null() && known.contains(&k) => Some("the key has no value".to_string()),
            "instances" | "first_seed" => serde_yaml_ng::from_value::<u64>(v).err().map(text_of),
            "iterations" | "knots" => serde_yaml_ng::from_value::<usize>(v).err().map(text_of),
            "step_size" | "yaw_weight" | "speed_weight" | "step_decay" => {
                serde_yaml_ng::from_value::<f64>(v).err().map(text_of)
            }
            "methods" | "parametrizations" => serde_yaml_ng::from_value::<Vec<String>>(v)
                .err()
                .map(text_of),
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
                line: locate_nearest(text, &key),
                key,
                message,
            });
        }
    }
    None
}
