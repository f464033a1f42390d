//! The gradient study (`study: {kind: gradient, ...}`): for every cell of the experiment's grid
//! (scene × formulation × sweep axes × timestep × seed, [`crate::sweep`]), every horizon and
//! every method, how far the method's gradient is from the f64 finite-difference reference
//! (DESIGN.md, "Measurements": gradients; the library side is
//! [`contactlab_scenarios::gradient`]).
//!
//! ```yaml
//! study:
//!   kind: gradient
//!   loss: "qpos[0]"              # default loss: qpos[i], qvel[i], task, linear:<a>|<b>
//!   inputs: ["qvel[0]", friction] # default inputs (contactlab_scenarios::gradient::Input)
//!   cases:                        # per scene label: a named case, or its own loss / inputs
//!     cartpole_limit: {case: cartpole_limit}
//!     box_slide: {loss: "qpos[0]", inputs: ["qvel[0]"], horizons_s: [1.0]}
//!   horizons: [1, 10, 50, 200]    # steps; and/or horizons_s (s, rounded to steps)
//!   methods:                      # a name, or {name, steps, formulations}
//!     - fd_central
//!     - {name: fd_forward, steps: [1.0e-4, 1.0e-6]}
//!     - {name: adjoint, formulations: [ncp_fb]}
//!     - autodiff                  # penalty on the batched engine (`burn` feature)
//!   fd_steps: [1.0e-3, 1.0e-4, 1.0e-5, 1.0e-6, 1.0e-7, 1.0e-8]
//!   reference: {steps: [1.0e-2, ..., 1.0e-8], max_uncertainty: 1.0e-3}
//! ```
//!
//! A gradient cell is a grid cell × horizon × method × FD step; its id hashes the grid cell's
//! id and these, so runs resume like every other. A method listed without `formulations` runs
//! where it is offered and is a `skipped` row (with the reason) elsewhere; a method whose
//! `formulations` names a formulation that lacks it is an error, like an unknown input, a loss
//! the scene lacks or a step ≤ 0: each names the file, the line and the key.
//!
//! Rows ([`COLUMNS`]) go to `runs.parquet` beside the identity columns of the stability rows;
//! `status` is `ok`, `skipped`, `undefined_reference` (no FD step resolves the derivative:
//! nothing is scored), `diverged` (the nominal rollout) or `failed`. The report and figures are
//! [`report`]'s.

pub mod report;
pub mod run;

use std::collections::BTreeMap;
use std::path::Path;

use contactlab_scenarios::gradient::cases::{self, parse_loss};
use contactlab_scenarios::gradient::methods::{self, Method};
use contactlab_scenarios::gradient::reference::{MAX_UNCERTAINTY, METHOD_STEPS, REFERENCE_STEPS};
use contactlab_scenarios::gradient::{Input, Problem};
use contactlab_scenarios::Scene;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::catalog::Catalog;
use crate::config::{locate, ConfigError, ExperimentConfig};
use crate::results::{ColumnDef, Kind};
use crate::sweep::{hash_hex, Cell};

/// The `study` block of a gradient experiment (module doc).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GradientStudy {
    /// Default loss of scenes without their own (`cases`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<String>,
    /// Default inputs of scenes without their own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<String>,
    /// Per scene label: a named case or its own loss, inputs and extra horizons.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cases: BTreeMap<String, CaseSpec>,
    /// Horizons in steps (each ≥ 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub horizons: Vec<u64>,
    /// Horizons in seconds (each > 0), rounded to whole steps of the cell's timestep.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub horizons_s: Vec<f64>,
    /// Methods: a name, or `{name, steps, formulations}`.
    pub methods: Vec<Value>,
    /// Relative steps of the finite-difference methods when a method gives none (each > 0).
    #[serde(default = "default_fd_steps")]
    pub fd_steps: Vec<f64>,
    /// The reference's settings.
    #[serde(default)]
    pub reference: ReferenceSettings,
}

/// The FD methods' default steps: the issue's V curve, 1e-3 … 1e-8 relative.
fn default_fd_steps() -> Vec<f64> {
    METHOD_STEPS.to_vec()
}

fn default_reference_steps() -> Vec<f64> {
    REFERENCE_STEPS.to_vec()
}

/// A scene's loss and inputs in a gradient study.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    /// A named case ([`contactlab_scenarios::gradient::cases::CASES`]): its loss, inputs,
    /// controls and start, applied to this entry's scene.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case: Option<String>,
    /// The loss (overrides the case's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<String>,
    /// The inputs (override the case's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Vec<String>>,
    /// Extra horizons for this scene, in seconds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub horizons_s: Vec<f64>,
    /// Extra relative steps for this scene's finite-difference methods that give no `steps`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fd_steps: Vec<f64>,
}

/// The reference's FD steps and tolerance ([`contactlab_scenarios::gradient::reference`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceSettings {
    /// Relative steps, at least two, each > 0 (sorted descending when used).
    #[serde(default = "default_reference_steps")]
    pub steps: Vec<f64>,
    /// Largest relative disagreement of the best neighbouring pair for a defined reference.
    #[serde(default = "default_max_uncertainty")]
    pub max_uncertainty: f64,
}

fn default_max_uncertainty() -> f64 {
    MAX_UNCERTAINTY
}

impl Default for ReferenceSettings {
    fn default() -> Self {
        Self {
            steps: default_reference_steps(),
            max_uncertainty: MAX_UNCERTAINTY,
        }
    }
}

const fn col(name: &'static str, kind: Kind, doc: &'static str) -> ColumnDef {
    ColumnDef { name, kind, doc }
}

/// The gradient study's columns (written when the experiment is a gradient study).
pub const COLUMNS: &[ColumnDef] = &[
    col("study", Kind::Str, "the study kind: gradient"),
    col("method", Kind::Str, "gradient method (fd_central, fd_forward, adjoint, adjoint_lagged, autodiff)"),
    col("fd_step_rel", Kind::F64, "relative finite-difference step s of the fd methods (delta = s max(|input|, 1)); NaN for others"),
    col("horizon_steps", Kind::U64, "horizon N in steps (horizon_s = N timestep_s)"),
    col("loss", Kind::Str, "the loss of the final state"),
    col("grad_inputs", Kind::Str, "the inputs, JSON list of names in gradient order"),
    col("gradient", Kind::Str, "the method's gradient dL/d(input), JSON list (null: non-finite)"),
    col("reference_gradient", Kind::Str, "the f64 central-difference reference, JSON list"),
    col("reference_steps", Kind::Str, "the relative step the reference selected per input, JSON list"),
    col("reference_sweep", Kind::Str, "the reference's central differences, JSON {steps, estimates[step][input], rounding[step][input] (the estimate's rounding bound eps max|L| / (2 delta))}"),
    col("reference_uncertainty_rel", Kind::F64, "largest relative disagreement of the selected neighbouring FD steps over the inputs"),
    col("grad_max_rel_error", Kind::F64, "max_i |g_i - r_i| / max(|r_i|, 1e-6 max|r|)"),
    col("grad_norm_rel_error", Kind::F64, "||g - r|| / ||r||"),
    col("grad_cosine", Kind::F64, "cosine similarity of g and r"),
    col("grad_sign_agreement", Kind::F64, "share of entries with a resolved reference sign that g shares"),
    col("grad_norm", Kind::F64, "||g|| (2-norm, mixed units of the inputs)"),
    col("grad_nonfinite", Kind::U64, "non-finite entries of g"),
    col("grad_unconverged_steps", Kind::U64, "steps of the nominal rollout whose solver did not meet its stopping test"),
    col("grad_rollouts", Kind::U64, "rollouts of N steps the method ran"),
    col("grad_wall_time_s", Kind::F64, "wall time of the gradient computation, forward plus backward"),
    col("grad_peak_heap_bytes", Kind::F64, "peak heap bytes of the computation on its thread above its start (NaN where not measured)"),
    col("grad_note", Kind::Str, "method notes (adjoint: one-sided and dropped assembly derivatives)"),
];

/// One gradient cell: a grid cell, a horizon and a method.
#[derive(Debug, Clone, PartialEq)]
pub struct GradientCell {
    /// The grid cell (scene, formulation, timestep, seed; its `id` is replaced by this cell's).
    pub base: Cell,
    /// This cell's id (16 hex digits).
    pub id: String,
    /// Horizon N (steps).
    pub steps: usize,
    /// The method.
    pub method: Method,
    /// Why the formulation cannot offer the method (a `skipped` row).
    pub skipped: Option<String>,
    /// The loss as written.
    pub loss: String,
    /// The named case, if any.
    pub case: Option<String>,
    /// The inputs as written.
    pub inputs: Vec<String>,
    /// Key of the problem (scene, formulation, timestep, seed, horizon, loss, inputs): cells with
    /// one key share one reference.
    pub problem_key: String,
}

impl GradientCell {
    /// The problem of this cell on `scene` (the cell's scene, built).
    ///
    /// # Errors
    /// The loss or an input does not fit the scene, as text.
    pub fn problem(&self, scene: &Scene) -> Result<Problem, String> {
        build_problem(
            scene,
            self.case.as_deref(),
            &self.loss,
            &self.inputs,
            self.steps,
            self.base.timestep_s,
        )
        .map_err(|(_, m)| m)
    }
}

/// Which part of a case an error is about.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Part {
    Case,
    Loss,
    Input(usize),
}

fn build_problem(
    scene: &Scene,
    case: Option<&str>,
    loss: &str,
    inputs: &[String],
    steps: usize,
    h: f64,
) -> Result<Problem, (Part, String)> {
    let loss_v = parse_loss(scene, loss).map_err(|m| (Part::Loss, m))?;
    let inputs_v = inputs
        .iter()
        .enumerate()
        .map(|(j, i)| Input::parse(&scene.model, i, steps).map_err(|m| (Part::Input(j), m)))
        .collect::<Result<Vec<_>, _>>()?;
    let name = format!("{} {steps} steps", scene.model.name);
    match case {
        Some(c) => {
            let entry = cases::find(c).map_err(|m| (Part::Case, m))?;
            let mut p = entry
                .problem_on(scene, steps, h)
                .map_err(|m| (Part::Case, m))?;
            p.loss = loss_v;
            p.inputs = inputs_v;
            Ok(p)
        }
        None => Ok(Problem::from_scene(name, scene, steps, h, loss_v, inputs_v)),
    }
}

/// The line of `key`, or of the nearest enclosing key found (`study.inputs[1]` in a flow list
/// is on the line of `study.inputs`).
pub fn locate_near(text: &str, key: &str) -> Option<usize> {
    let mut k = key.to_string();
    loop {
        if let Some(l) = locate(text, &k) {
            return Some(l);
        }
        let cut = k.rfind(['.', '['])?;
        k.truncate(cut);
    }
}

/// A method entry of `study.methods`, parsed.
#[derive(PartialEq)]
struct MethodSpec {
    name: String,
    steps: Option<Vec<f64>>,
    formulations: Option<Vec<String>>,
}

fn parse_method(
    v: &Value,
    key: &str,
    err: &dyn Fn(&str, String) -> ConfigError,
) -> Result<MethodSpec, ConfigError> {
    let spec = match v {
        Value::String(s) => MethodSpec {
            name: s.clone(),
            steps: None,
            formulations: None,
        },
        Value::Object(m) => {
            for k in m.keys() {
                if !["name", "steps", "formulations"].contains(&k.as_str()) {
                    return Err(err(
                        &format!("{key}.{k}"),
                        format!(
                            "unknown field `{k}`, expected one of `name`, `steps`, `formulations`"
                        ),
                    ));
                }
            }
            let name = m
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| err(key, "a method needs a `name`".into()))?
                .to_string();
            let steps = match m.get("steps") {
                None => None,
                Some(Value::Array(a)) => Some(
                    a.iter()
                        .enumerate()
                        .map(|(j, x)| positive_step(x, &format!("{key}.steps[{j}]"), err))
                        .collect::<Result<Vec<_>, _>>()?,
                ),
                Some(_) => {
                    return Err(err(
                        &format!("{key}.steps"),
                        "must be a list of relative steps".into(),
                    ))
                }
            };
            let formulations = match m.get("formulations") {
                None => None,
                Some(Value::Array(a)) => Some(
                    a.iter()
                        .enumerate()
                        .map(|(j, x)| {
                            x.as_str().map(str::to_string).ok_or_else(|| {
                                err(
                                    &format!("{key}.formulations[{j}]"),
                                    "must be a formulation label".into(),
                                )
                            })
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                ),
                Some(_) => {
                    return Err(err(
                        &format!("{key}.formulations"),
                        "must be a list of formulation labels".into(),
                    ))
                }
            };
            MethodSpec {
                name,
                steps,
                formulations,
            }
        }
        _ => {
            return Err(err(
                key,
                "a method is a name or {name, steps, formulations}".into(),
            ))
        }
    };
    let entry = methods::find(&spec.name).map_err(|m| err(key, m))?;
    if spec.steps.is_some() && !entry.takes_step {
        return Err(err(
            &format!("{key}.steps"),
            format!("{} takes no finite-difference step", spec.name),
        ));
    }
    Ok(spec)
}

fn positive_step(
    x: &Value,
    key: &str,
    err: &dyn Fn(&str, String) -> ConfigError,
) -> Result<f64, ConfigError> {
    match x.as_f64() {
        Some(s) if s.is_finite() && s > 0.0 => Ok(s),
        _ => Err(err(
            key,
            format!("finite-difference steps must be finite numbers > 0 (relative); got {x}"),
        )),
    }
}

/// Top-level experiment keys that a gradient study does not read, with what to use instead.
const IGNORED_TOP_LEVEL: &[(&str, &str)] = &[
    (
        "horizon",
        "horizons come from `study.horizons` (steps) or `study.horizons_s` (s)",
    ),
    (
        "reference",
        "the reference is the study's own FD sweep, `study.reference`",
    ),
    (
        "metrics",
        "the rows carry the gradient metrics; the report's tables are fixed",
    ),
    (
        "figures",
        "the gradient figures (error against horizon, timestep and FD step) are always drawn",
    ),
    ("log_steps", "gradient rollouts write no per-step logs"),
    (
        "accuracy_threshold",
        "the study scores gradients, not trajectories",
    ),
    (
        "reanchor_window",
        "the study scores gradients, not trajectories",
    ),
];

/// Validate the study against the grid `cells` of `cfg` and expand it into gradient cells.
///
/// # Errors
/// The first problem, naming the file, the line and the key.
pub fn expand(
    file: &Path,
    text: &str,
    cfg: &ExperimentConfig,
    study: &GradientStudy,
    cells: &[Cell],
    catalog: &Catalog,
) -> Result<Vec<GradientCell>, ConfigError> {
    let err = |key: &str, message: String| ConfigError {
        file: file.to_path_buf(),
        line: locate_near(text, key),
        key: key.to_string(),
        message,
    };
    // Experiment keys a gradient study does not read: given, they would silently do nothing.
    crate::yaml_checks::unread_top_level_key(file, text, IGNORED_TOP_LEVEL, "gradient")?;
    if study.horizons.is_empty()
        && study.horizons_s.is_empty()
        && study.cases.values().all(|c| c.horizons_s.is_empty())
    {
        return Err(err(
            "study",
            "a gradient study needs `horizons` (steps) or `horizons_s` (s)".into(),
        ));
    }
    if let Some(j) = study.horizons.iter().position(|&n| n == 0) {
        return Err(err(
            &format!("study.horizons[{j}]"),
            "horizons must be at least 1 step".into(),
        ));
    }
    let seconds = |list: &[f64], key: &str| -> Result<(), ConfigError> {
        match list.iter().position(|s| !(s.is_finite() && *s > 0.0)) {
            Some(j) => Err(err(
                &format!("{key}[{j}]"),
                format!("horizons must be finite numbers > 0 (s); got {}", list[j]),
            )),
            None => Ok(()),
        }
    };
    seconds(&study.horizons_s, "study.horizons_s")?;
    for (j, s) in study.fd_steps.iter().enumerate() {
        positive_step(&json!(s), &format!("study.fd_steps[{j}]"), &err)?;
    }
    for (j, s) in study.reference.steps.iter().enumerate() {
        positive_step(&json!(s), &format!("study.reference.steps[{j}]"), &err)?;
    }
    if study.reference.steps.len() < 2 {
        return Err(err(
            "study.reference.steps",
            "the reference needs at least two steps to compare neighbours".into(),
        ));
    }
    // Two equal steps give equal estimates, which "agree" without measuring anything.
    for (j, s) in study.reference.steps.iter().enumerate() {
        if study.reference.steps[..j].contains(s) {
            return Err(err(
                &format!("study.reference.steps[{j}]"),
                format!("step {s:e} is listed twice; neighbouring steps must differ for their agreement to mean anything"),
            ));
        }
    }
    // Above 1 every disagreement would pass: an undefined reference could never be reported.
    if !(study.reference.max_uncertainty.is_finite()
        && study.reference.max_uncertainty > 0.0
        && study.reference.max_uncertainty <= 1.0)
    {
        return Err(err(
            "study.reference.max_uncertainty",
            format!(
                "must be a number in (0, 1] (a relative disagreement); got {}",
                study.reference.max_uncertainty
            ),
        ));
    }
    if study.methods.is_empty() {
        return Err(err(
            "study.methods",
            "is empty; list at least one method".into(),
        ));
    }
    let specs = study
        .methods
        .iter()
        .enumerate()
        .map(|(i, v)| parse_method(v, &format!("study.methods[{i}]"), &err))
        .collect::<Result<Vec<_>, _>>()?;
    // The same method twice would plan the same cells twice (equal ids, duplicate rows).
    for (i, s) in specs.iter().enumerate() {
        if specs[..i].contains(s) {
            return Err(err(
                &format!("study.methods[{i}]"),
                format!(
                    "method '{}' is listed twice with the same steps and formulations",
                    s.name
                ),
            ));
        }
    }
    // Explicit requests: each named formulation exists and offers the method.
    for (i, s) in specs.iter().enumerate() {
        for (j, label) in s.formulations.iter().flatten().enumerate() {
            let key = format!("study.methods[{i}].formulations[{j}]");
            let f = cfg
                .formulations
                .iter()
                .find(|f| f.label() == label.as_str())
                .ok_or_else(|| {
                    err(
                        &key,
                        format!("no formulation labelled '{label}' in this experiment"),
                    )
                })?;
            methods::availability(&s.name, &f.name)
                .map_err(|m| err(&key, format!("{m}; remove it from the list")))?;
        }
    }
    for (label, c) in &study.cases {
        let key = format!("study.cases.{label}");
        if !cfg.scenes.iter().any(|s| s.label() == label.as_str()) {
            return Err(err(
                &key,
                format!("no scene labelled '{label}' in this experiment"),
            ));
        }
        seconds(&c.horizons_s, &format!("{key}.horizons_s"))?;
        for (j, x) in c.fd_steps.iter().enumerate() {
            positive_step(&json!(x), &format!("{key}.fd_steps[{j}]"), &err)?;
        }
        if let Some(name) = &c.case {
            let entry = cases::find(name).map_err(|m| err(&format!("{key}.case"), m))?;
            let scene = cfg
                .scenes
                .iter()
                .find(|s| s.label() == label.as_str())
                .map(|s| s.name.as_str());
            if scene != Some(entry.scene) {
                return Err(err(
                    &format!("{key}.case"),
                    format!(
                        "case '{name}' is defined on scene '{}', not '{}'",
                        entry.scene,
                        scene.unwrap_or("?")
                    ),
                ));
            }
        }
    }
    let mut ref_steps = study.reference.steps.clone();
    ref_steps.sort_by(|a, b| b.total_cmp(a));

    let mut out = Vec::new();
    let mut scenes: BTreeMap<String, Scene> = BTreeMap::new();
    for cell in cells {
        let si = cfg
            .scenes
            .iter()
            .position(|s| s.label() == cell.scene_label)
            .unwrap_or(0);
        let spec = study
            .cases
            .get(&cell.scene_label)
            .cloned()
            .unwrap_or_default();
        let case_key = format!("study.cases.{}", cell.scene_label);
        let entry = spec.case.as_deref().and_then(|c| cases::find(c).ok());
        let (loss, loss_key) = match (&spec.loss, entry, &study.loss) {
            (Some(l), _, _) => (l.clone(), format!("{case_key}.loss")),
            (None, Some(e), _) => (e.loss.to_string(), format!("{case_key}.case")),
            (None, None, Some(l)) => (l.clone(), "study.loss".to_string()),
            (None, None, None) => {
                return Err(err(
                    &format!("scenes[{si}]"),
                    format!(
                        "scene '{}' has no loss: give `study.loss` or `study.cases.{}`",
                        cell.scene_label, cell.scene_label
                    ),
                ))
            }
        };
        let (inputs, inputs_key): (Vec<String>, String) = match (&spec.inputs, entry) {
            (Some(i), _) => (i.clone(), format!("{case_key}.inputs")),
            (None, Some(e)) => (
                e.inputs.iter().map(|s| s.to_string()).collect(),
                format!("{case_key}.case"),
            ),
            (None, None) => (study.inputs.clone(), "study.inputs".to_string()),
        };
        if inputs.is_empty() {
            return Err(err(
                &inputs_key,
                format!(
                    "scene '{}' has no inputs to differentiate with respect to",
                    cell.scene_label
                ),
            ));
        }
        let scene_id = format!("{}:{}", cell.scene, cell.scene_params);
        if !scenes.contains_key(&scene_id) {
            let scene = catalog
                .build_scene(&cell.scene, &cell.scene_params)
                .map_err(|m| err(&format!("scenes[{si}]"), m))?;
            scenes.insert(scene_id.clone(), scene);
        }
        let scene = &scenes[&scene_id];
        let h = cell.timestep_s;
        let mut horizons: Vec<usize> = study.horizons.iter().map(|&n| n as usize).collect();
        horizons.extend(
            study
                .horizons_s
                .iter()
                .chain(&spec.horizons_s)
                .map(|&t| ((t / h).round() as usize).max(1)),
        );
        horizons.sort_unstable();
        horizons.dedup();
        for &n in &horizons {
            let max_steps = cfg
                .max_steps
                .unwrap_or(contactlab_scenarios::limits::DEFAULT_MAX_STEPS);
            if n as u64 > max_steps {
                return Err(err("study", format!("a horizon of {n} steps is over the limit of {max_steps}; set `max_steps:` to raise it")));
            }
            let problem = build_problem(scene, spec.case.as_deref(), &loss, &inputs, n, h)
                .map_err(|(part, m)| match part {
                    Part::Case => err(&format!("{case_key}.case"), m),
                    Part::Loss => err(&loss_key, m),
                    Part::Input(_) if inputs_key.ends_with(".case") => err(&inputs_key, m),
                    Part::Input(j) => err(&format!("{inputs_key}[{j}]"), m),
                })?;
            let problem_key = hash_hex(&json!({
                "cell": cell.id, "steps": n, "loss": loss, "inputs": inputs, "case": spec.case,
                "reference": {"steps": ref_steps, "max_uncertainty": study.reference.max_uncertainty},
            }));
            for s in &specs {
                if let Some(list) = &s.formulations {
                    if !list.contains(&cell.label) {
                        continue;
                    }
                }
                let skipped = methods::availability_for(&s.name, &cell.formulation, &problem).err();
                let entry = methods::find(&s.name).map_err(|m| err("study.methods", m))?;
                let steps: Vec<Option<f64>> = if entry.takes_step {
                    let mut list = s.steps.clone().unwrap_or_else(|| {
                        let mut l = study.fd_steps.clone();
                        l.extend(&spec.fd_steps);
                        l
                    });
                    list.sort_by(|a, b| b.total_cmp(a));
                    list.dedup();
                    list.into_iter().map(Some).collect()
                } else {
                    vec![None]
                };
                for step in steps {
                    let method = Method::new(&s.name, step).map_err(|m| err("study.methods", m))?;
                    let id =
                        hash_hex(&json!({"problem": problem_key, "method": s.name, "step": step}));
                    out.push(GradientCell {
                        base: cell.clone(),
                        id,
                        steps: n,
                        method,
                        skipped: skipped.clone(),
                        loss: loss.clone(),
                        case: spec.case.clone(),
                        inputs: inputs.clone(),
                        problem_key: problem_key.clone(),
                    });
                }
            }
        }
    }
    Ok(out)
}

/// A plain-text table of the gradient cells for `contactlab check`.
pub fn grid_table(cells: &[GradientCell]) -> String {
    let mut out = format!("{} gradient cells\n", cells.len());
    out += &format!(
        "{:>5}  {:<18} {:<18} {:>10} {:>6}  {:<16} {:>8}  {:<16} note\n",
        "#", "scene", "formulation", "timestep_s", "steps", "method", "fd_step", "id"
    );
    for (i, c) in cells.iter().enumerate() {
        out += &format!(
            "{:>5}  {:<18} {:<18} {:>10} {:>6}  {:<16} {:>8}  {:<16} {}\n",
            i,
            c.base.scene_label,
            c.base.label,
            c.base.timestep_s,
            c.steps,
            c.method.name(),
            c.method.step().map_or("-".into(), |s| format!("{s:e}")),
            c.id,
            c.skipped
                .as_deref()
                .map_or(String::new(), |s| format!("skipped: {s}"))
        );
    }
    out
}
