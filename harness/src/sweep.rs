//! Validation of a parsed experiment and its expansion into cells ([`plan`] → [`Plan`]).
//!
//! A cell is one point of the grid: scene (with parameters) × formulation entry (with
//! parameters) × values of the `scene.*` and `formulation.*` sweep axes × timestep × seed.
//! A `scene.<p>` axis applies to the scenes that have parameter `p` (in their registry
//! documentation or in their entry), a `formulation.<p>` axis likewise; others do not multiply.
//!
//! Limits ([`contactlab_scenarios::limits`]): the grid is counted before it is expanded and
//! may hold at most [`MAX_CELLS`] cells; each run (a cell, and its `same_formulation`
//! reference run) may take at most `max_steps` steps (default [`DEFAULT_MAX_STEPS`]).
//!
//! Each cell has a stable id, a hash of everything that determines its row, including the
//! contents of the files it reads ([`crate::inputs`]), so a rerun finds the cells already
//! finished (see [`crate::runner`]) and reruns those whose inputs changed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::catalog::Catalog;
use crate::config::{locate, ConfigError, ExperimentConfig, ReferenceSpec};
use contactlab_scenarios::limits::{DEFAULT_MAX_STEPS, MAX_CELLS, MAX_TABLE_BYTES};

/// Most worlds one cell may step together (`worlds:`, `sweep.worlds`): 4^8, the throughput
/// study's largest batch.
pub const MAX_WORLDS: usize = 65_536;

/// One point of the experiment grid.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Position in the expanded grid (display order).
    pub index: usize,
    /// Stable id: 16 hex digits hashing everything that determines the cell's row.
    pub id: String,
    /// Scene registry name.
    pub scene: String,
    /// Label of the scene entry (default: the name).
    pub scene_label: String,
    /// Scene parameters as passed to the registry (JSON object).
    pub scene_params: Value,
    /// Formulation registry name.
    pub formulation: String,
    /// Label of the formulation entry.
    pub label: String,
    /// Formulation parameters as passed to the registry (JSON object).
    pub formulation_params: Value,
    /// Engine registry name (`cpu`, `burn-ndarray`, ...; `contactlab_solvers::engine`).
    pub engine: String,
    /// Worlds stepped together (≥ 1): copies of the scene, world 0 measured.
    pub worlds: usize,
    /// Timestep (s).
    pub timestep_s: f64,
    /// Seed (passed to scenes with a `seed` parameter; recorded always).
    pub seed: u64,
    /// Simulated time (s).
    pub horizon_s: f64,
    /// Values of the `scene.*` / `formulation.*` axes that apply to this cell, and of the
    /// `engine` and `worlds` axes when they are swept.
    pub sweep: BTreeMap<String, Value>,
    /// Id of the reference run this cell is compared with (same-formulation references).
    pub reference_id: Option<String>,
    /// Files the cell reads (its scene's and its reference's) and their SHA-256, `{path:
    /// digest}`; part of the id when not empty ([`crate::inputs`]).
    pub inputs: BTreeMap<String, String>,
}

/// A validated experiment ready to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The experiment file (or `<embedded quickstart.yaml>`).
    pub file: PathBuf,
    /// The parsed configuration.
    pub config: ExperimentConfig,
    /// Cells in display order.
    pub cells: Vec<Cell>,
    /// Reference with file paths resolved against the experiment file's folder.
    pub reference: ReferenceSpec,
}

/// Validate `cfg` (parsed from `text` in `file`) against `catalog` and expand its grid.
///
/// # Errors
/// The first problem found, as a [`ConfigError`] naming the key and its line.
pub fn plan(
    file: &Path,
    text: &str,
    cfg: ExperimentConfig,
    catalog: &Catalog,
) -> Result<Plan, ConfigError> {
    let err = |key: &str, message: String| ConfigError {
        file: file.to_path_buf(),
        line: locate(text, key),
        key: key.to_string(),
        message,
    };
    if cfg.name.is_empty()
        || cfg.name.starts_with('.')
        || !cfg
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
    {
        return Err(err(
            "name",
            format!(
                "'{}' is not usable as a folder name (letters, digits, _ - .)",
                cfg.name
            ),
        ));
    }
    if cfg.scenes.is_empty() {
        return Err(err("scenes", "is empty; list at least one scene".into()));
    }
    if cfg.formulations.is_empty() {
        return Err(err(
            "formulations",
            "is empty; list at least one formulation".into(),
        ));
    }

    // Sweep axes.
    let mut timesteps: Option<Vec<f64>> = None;
    let mut seeds = vec![0u64];
    let mut engines: Option<Vec<String>> = None;
    let mut worlds_axis: Option<Vec<usize>> = None;
    let mut scene_axes: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut formulation_axes: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (axis, values) in &cfg.sweep {
        let key = format!("sweep.{axis}");
        if values.is_empty() {
            return Err(err(&key, "is empty; give at least one value".into()));
        }
        if axis == "timestep" {
            let mut hs = Vec::new();
            for v in values {
                match v.as_f64() {
                    Some(h) if h.is_finite() && h > 0.0 => hs.push(h),
                    _ => {
                        return Err(err(
                            &key,
                            format!("timesteps must be finite numbers > 0 (s); got {v}"),
                        ))
                    }
                }
            }
            timesteps = Some(hs);
        } else if axis == "seed" {
            seeds = values
                .iter()
                .map(|v| {
                    v.as_u64()
                        .ok_or_else(|| err(&key, format!("seeds must be integers >= 0; got {v}")))
                })
                .collect::<Result<_, _>>()?;
        } else if axis == "engine" {
            let mut names = Vec::new();
            for v in values {
                match v.as_str().map(contactlab_solvers::engine::find) {
                    Some(Ok(e)) => names.push(e.name.to_string()),
                    Some(Err(e)) => return Err(err(&key, e.to_string())),
                    None => return Err(err(&key, format!("engines are names; got {v}"))),
                }
            }
            engines = Some(names);
        } else if axis == "worlds" {
            worlds_axis = Some(
                values
                    .iter()
                    .map(|v| match v.as_u64() {
                        Some(n) if (1..=MAX_WORLDS as u64).contains(&n) => Ok(n as usize),
                        _ => Err(err(
                            &key,
                            format!("worlds must be integers from 1 to {MAX_WORLDS}; got {v}"),
                        )),
                    })
                    .collect::<Result<_, _>>()?,
            );
        } else if let Some(p) = axis.strip_prefix("scene.") {
            let used = cfg.scenes.iter().any(|s| {
                s.params.contains_key(p)
                    || catalog
                        .scene(&s.name)
                        .is_ok_and(|e| e.params.iter().any(|d| d.name == p))
            });
            if !used {
                return Err(err(
                    &key,
                    format!("no scene of this experiment has a parameter '{p}'"),
                ));
            }
            scene_axes.insert(p.to_string(), values.clone());
        } else if let Some(p) = axis.strip_prefix("formulation.") {
            let used = cfg.formulations.iter().any(|f| {
                f.params.contains_key(p)
                    || catalog
                        .formulation(&f.name)
                        .is_ok_and(|e| e.params.iter().any(|d| d.name == p))
            });
            if !used {
                return Err(err(
                    &key,
                    format!("no formulation of this experiment has a parameter '{p}'"),
                ));
            }
            formulation_axes.insert(p.to_string(), values.clone());
        } else {
            return Err(err(
                &key,
                format!("unknown sweep axis '{axis}'; valid: timestep, seed, engine, worlds, scene.<parameter>, formulation.<parameter>"),
            ));
        }
    }
    if let Some(h) = cfg.horizon {
        if !(h.is_finite() && h > 0.0) {
            return Err(err(
                "horizon",
                format!("must be a finite number > 0 (s); got {h}"),
            ));
        }
    }
    if let Some(w) = cfg.worlds {
        if !(1..=MAX_WORLDS).contains(&w) {
            return Err(err(
                "worlds",
                format!("must be an integer from 1 to {MAX_WORLDS}; got {w}"),
            ));
        }
    }
    let engine_swept = engines.is_some();
    let worlds_swept = worlds_axis.is_some();
    let engines = engines.unwrap_or_else(|| vec![cfg.engine.as_str().to_string()]);
    let worlds_list = worlds_axis.unwrap_or_else(|| vec![cfg.worlds.unwrap_or(1)]);
    if cfg.jobs == Some(0) {
        return Err(err("jobs", "must be at least 1".into()));
    }
    if cfg.max_steps == Some(0) {
        return Err(err("max_steps", "must be at least 1".into()));
    }
    let max_steps = cfg.max_steps.unwrap_or(DEFAULT_MAX_STEPS);
    if !(cfg.accuracy_threshold.is_finite() && cfg.accuracy_threshold > 0.0) {
        return Err(err(
            "accuracy_threshold",
            "must be a finite number > 0".into(),
        ));
    }
    if !(cfg.reanchor_window.is_finite() && cfg.reanchor_window > 0.0) {
        return Err(err(
            "reanchor_window",
            "must be a finite number > 0 (s)".into(),
        ));
    }
    for (i, m) in cfg.metrics.iter().enumerate() {
        if crate::results::column(m).is_none() {
            return Err(err(
                &format!("metrics[{i}]"),
                format!("unknown metric '{m}'; `contactlab list` shows them"),
            ));
        }
    }
    let base = file.parent().unwrap_or(Path::new("."));
    let reference = match &cfg.reference {
        ReferenceSpec::SameFormulation { timestep } => {
            if !(timestep.is_finite() && *timestep > 0.0) {
                return Err(err(
                    "reference.timestep",
                    format!("must be a finite number > 0 (s); got {timestep}"),
                ));
            }
            cfg.reference.clone()
        }
        ReferenceSpec::Recorded { dir: Some(dir) } => {
            let dir = base.join(dir);
            if !dir.is_dir() {
                return Err(err(
                    "reference.dir",
                    format!("'{}' is not a readable directory", dir.display()),
                ));
            }
            ReferenceSpec::Recorded { dir: Some(dir) }
        }
        ReferenceSpec::Recorded { dir: None } => {
            if let Some(si) = cfg.scenes.iter().position(|s| s.name != "cube_toss") {
                return Err(err(
                    "reference",
                    format!(
                        "a recorded reference needs `dir` for scene '{}' (only cube_toss finds its recordings itself)",
                        cfg.scenes[si].name
                    ),
                ));
            }
            cfg.reference.clone()
        }
        ReferenceSpec::Trajectory { file: f } => {
            let f = base.join(f);
            if let Err(e) = contactlab_scenarios::input_file::check(&f, MAX_TABLE_BYTES) {
                return Err(err("reference.file", format!("cannot read {e}")));
            }
            ReferenceSpec::Trajectory { file: f }
        }
        other => other.clone(),
    };

    // Labels: unique among scene entries and among formulation entries.
    let scene_labels: Vec<(&str, bool)> = cfg
        .scenes
        .iter()
        .map(|e| (e.label(), e.label.is_some()))
        .collect();
    let formulation_labels: Vec<(&str, bool)> = cfg
        .formulations
        .iter()
        .map(|e| (e.label(), e.label.is_some()))
        .collect();
    for (list, labels, what) in [
        ("scenes", scene_labels, "scene label"),
        ("formulations", formulation_labels, "label"),
    ] {
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, (label, explicit)) in labels.into_iter().enumerate() {
            if label.trim().is_empty() {
                return Err(err(
                    &format!("{list}[{i}].label"),
                    "an empty label; give the entry a name".into(),
                ));
            }
            if let Some(j) = seen.insert(label, i) {
                let key = if explicit {
                    format!("{list}[{i}].label")
                } else {
                    format!("{list}[{i}]")
                };
                return Err(err(
                    &key,
                    format!("duplicate {what} '{label}' (also {list}[{j}]); give each entry a distinct `label` so their results are not merged"),
                ));
            }
        }
    }

    // Scene labels name figure files: two that give one file name would overwrite each other.
    let mut stems: BTreeMap<String, usize> = BTreeMap::new();
    for (i, s) in cfg.scenes.iter().enumerate() {
        let stem = crate::figures::file_part(s.label());
        if let Some(&j) = stems.get(&stem) {
            let key = if s.label.is_some() {
                format!("scenes[{i}].label")
            } else {
                format!("scenes[{i}]")
            };
            return Err(err(
                &key,
                format!(
                    "scene label '{}' and '{}' (scenes[{j}]) give the same figure file name '{stem}'; give them labels that differ in letters, digits, '-', '_' or '.'",
                    s.label(),
                    cfg.scenes[j].label()
                ),
            ));
        }
        stems.insert(stem, i);
    }

    // The grid's size, counted before anything is expanded.
    let n = grid_size(
        &cfg,
        catalog,
        timesteps.as_ref().map_or(1, Vec::len),
        seeds
            .len()
            .saturating_mul(engines.len())
            .saturating_mul(worlds_list.len()),
        &scene_axes,
        &formulation_axes,
    );
    if n > MAX_CELLS {
        let key = if cfg.sweep.is_empty() {
            "scenes"
        } else {
            "sweep"
        };
        return Err(err(
            key,
            format!("the grid has {n} cells (scenes x formulations x sweep values), over the limit of {MAX_CELLS}; split the experiment"),
        ));
    }

    // Registry names and parameters; expansion.
    let mut cells = Vec::new();
    let mut digests = crate::inputs::Digests::default();
    for (si, s) in cfg.scenes.iter().enumerate() {
        let entry = catalog
            .scene(&s.name)
            .map_err(|m| err(&format!("scenes[{si}].name"), m))?;
        let has_seed =
            entry.params.iter().any(|d| d.name == "seed") && !s.params.contains_key("seed");
        let s_axes: Vec<(String, Vec<Value>)> = scene_axes
            .iter()
            .filter(|(p, _)| {
                s.params.contains_key(p.as_str())
                    || entry.params.iter().any(|d| d.name == p.as_str())
            })
            .map(|(p, v)| (p.clone(), v.clone()))
            .collect();
        // A scene may enumerate a parameter itself (cube_toss `toss: all`): one variant each.
        let variants = contactlab_scenarios::expand(&s.name, &s.params)
            .map_err(|e| err(&format!("scenes[{si}]"), e.to_string()))?;
        for (base_params, s_combo) in variants
            .iter()
            .flat_map(|v| product(&s_axes).into_iter().map(move |c| (v, c)))
        {
            let mut sp = base_params.clone();
            for (k, v) in &s_combo {
                sp.insert(k.clone(), v.clone());
            }
            let scene = catalog
                .build_scene(&s.name, &Value::Object(sp.clone()))
                .map_err(|m| {
                    let key = param_key(&m, &format!("scenes[{si}]"), &s_combo, "scene");
                    err(&key, m)
                })?;
            let mut files = scene.inputs.clone();
            files.extend(crate::inputs::reference_files(&reference, &s.name, &sp));
            let inputs = digests
                .of(&files)
                .map_err(|m| err(&format!("scenes[{si}]"), m))?;
            let horizon = cfg.horizon.unwrap_or(scene.horizon);
            let hs = timesteps
                .clone()
                .unwrap_or_else(|| vec![scene.model.options.timestep]);
            let hmax = hs.iter().cloned().fold(0.0, f64::max);
            if horizon < hmax {
                let key = if cfg.horizon.is_some() {
                    "horizon".to_string()
                } else {
                    format!("scenes[{si}]")
                };
                return Err(err(
                    &key,
                    format!("horizon {horizon} s is shorter than one step of {hmax} s"),
                ));
            }
            // Steps per run, for the cell and for its reference run, within `max_steps`.
            let too_many = |h: f64| step_count_f64(horizon, h) > max_steps as f64;
            if let Some(&h) = hs.iter().find(|&&h| too_many(h)) {
                // Blame the experiment's horizon when the scene's own would fit, else the
                // timestep (the sweep's, or the scene model's).
                let key = if cfg.horizon.is_some()
                    && step_count_f64(scene.horizon, h) <= max_steps as f64
                {
                    "horizon".to_string()
                } else if timesteps.is_some() {
                    "sweep.timestep".to_string()
                } else {
                    format!("scenes[{si}]")
                };
                return Err(err(
                    &key,
                    format!(
                        "a cell needs {:.3e} steps (horizon {horizon:e} s / timestep {h:e} s), over the limit of {max_steps}; set `max_steps:` to raise it",
                        step_count_f64(horizon, h)
                    ),
                ));
            }
            if let ReferenceSpec::SameFormulation { timestep } = &reference {
                if too_many(*timestep) {
                    return Err(err(
                        "reference.timestep",
                        format!(
                            "the reference run needs {:.3e} steps (horizon {horizon:e} s / reference timestep {timestep:e} s), over the limit of {max_steps}; set `max_steps:` to raise it",
                            step_count_f64(horizon, *timestep)
                        ),
                    ));
                }
            }
            for (fi, f) in cfg.formulations.iter().enumerate() {
                let fentry = catalog
                    .formulation(&f.name)
                    .map_err(|m| err(&format!("formulations[{fi}].name"), m))?;
                let f_axes: Vec<(String, Vec<Value>)> = formulation_axes
                    .iter()
                    .filter(|(p, _)| {
                        f.params.contains_key(p.as_str())
                            || fentry.params.iter().any(|d| d.name == p.as_str())
                    })
                    .map(|(p, v)| (p.clone(), v.clone()))
                    .collect();
                for f_combo in product(&f_axes) {
                    let mut fp = f.params.clone();
                    for (k, v) in &f_combo {
                        fp.insert(k.clone(), v.clone());
                    }
                    let fpv = Value::Object(fp);
                    check_formulation(catalog, &f.name, &fpv).map_err(|m| {
                        let key =
                            param_key(&m, &format!("formulations[{fi}]"), &f_combo, "formulation");
                        err(&key, m)
                    })?;
                    let mut sweep: BTreeMap<String, Value> = BTreeMap::new();
                    sweep.extend(
                        s_combo
                            .iter()
                            .map(|(k, v)| (format!("scene.{k}"), v.clone())),
                    );
                    sweep.extend(
                        f_combo
                            .iter()
                            .map(|(k, v)| (format!("formulation.{k}"), v.clone())),
                    );
                    for (engine, worlds, &h, &seed) in engines
                        .iter()
                        .flat_map(|e| worlds_list.iter().map(move |&w| (e, w)))
                        .flat_map(|(e, w)| hs.iter().map(move |h| (e, w, h)))
                        .flat_map(|(e, w, h)| seeds.iter().map(move |s| (e, w, h, s)))
                    {
                        {
                            let mut scene_params = sp.clone();
                            if has_seed {
                                scene_params.insert("seed".into(), json!(seed));
                            }
                            let scene_params = Value::Object(scene_params);
                            let reference_id = match &reference {
                                ReferenceSpec::SameFormulation { timestep } => {
                                    Some(hash_hex(&json!({
                                        "scene": s.name, "scene_params": scene_params, "formulation": f.name,
                                        "formulation_params": fpv, "seed": seed, "horizon": horizon, "timestep": timestep,
                                    })))
                                }
                                _ => None,
                            };
                            let mut identity = json!({
                                "scene": s.name, "scene_params": scene_params, "formulation": f.name,
                                "formulation_params": fpv, "label": f.label(), "timestep": h, "seed": seed,
                                "scene_label": s.label,
                                "horizon": horizon, "reference": serde_json::to_value(&reference).unwrap_or(Value::Null),
                                "log_steps": cfg.log_steps, "reanchor_window": cfg.reanchor_window,
                            });
                            // Only cells that read files get the component: the ids of the
                            // others stay those of earlier results. Likewise engine and worlds
                            // enter the id only away from the defaults (cpu, one world).
                            if !inputs.is_empty() {
                                identity["inputs"] = json!(inputs);
                            }
                            if engine != "cpu" {
                                identity["engine"] = json!(engine);
                            }
                            if worlds != 1 {
                                identity["worlds"] = json!(worlds);
                            }
                            let mut sweep = sweep.clone();
                            if engine_swept {
                                sweep.insert("engine".into(), json!(engine));
                            }
                            if worlds_swept {
                                sweep.insert("worlds".into(), json!(worlds));
                            }
                            let id = hash_hex(&identity);
                            cells.push(Cell {
                                index: cells.len(),
                                id,
                                scene: s.name.clone(),
                                scene_label: s.label().to_string(),
                                scene_params,
                                formulation: f.name.clone(),
                                label: f.label().to_string(),
                                formulation_params: fpv.clone(),
                                engine: engine.clone(),
                                worlds,
                                timestep_s: h,
                                seed,
                                horizon_s: horizon,
                                sweep,
                                reference_id,
                                inputs: inputs.clone(),
                            });
                        }
                    }
                }
            }
        }
    }
    if let crate::config::Study::Gradient(study) = &cfg.study {
        crate::study_gradient::expand(file, text, &cfg, study, &cells, catalog)?;
    }
    Ok(Plan {
        file: file.to_path_buf(),
        config: cfg,
        cells,
        reference,
    })
}

/// Build a formulation only to validate its parameters. A panic while building (a placeholder
/// registry entry) is not a configuration error: the run records that cell as failed.
fn check_formulation(catalog: &Catalog, name: &str, params: &Value) -> Result<(), String> {
    match crate::runner::catch_quietly(|| catalog.build_formulation(name, params)) {
        Ok(Err(m)) => Err(m),
        _ => Ok(()),
    }
}

/// The key to blame for a registry message: `unknown field `x`` and known parameter names are
/// looked up beside the entry, or under `sweep` when a swept value is at fault.
fn param_key(message: &str, entry: &str, combo: &[(String, Value)], kind: &str) -> String {
    // "<registry>: <param>: <what>" (a bad value, named by its path) or serde's
    // "unknown field `<param>`" / "missing field `<param>`".
    let named = message
        .split(": ")
        .nth(1)
        .filter(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    let field = named.unwrap_or_else(|| message.split('`').nth(1).unwrap_or(""));
    if !field.is_empty() && combo.iter().any(|(k, _)| k == field) {
        return format!("sweep.{kind}.{field}");
    }
    if !field.is_empty() && !message.contains("missing field") {
        return format!("{entry}.{field}");
    }
    entry.to_string()
}

/// [`crate::runner::step_count`] in `f64`, without the cast that saturates for huge ratios.
pub fn step_count_f64(horizon: f64, h: f64) -> f64 {
    ((horizon / h) - 1e-9).ceil().max(1.0)
}

/// Number of cells the grid would expand to (saturating at `usize::MAX`), computed from the
/// list lengths alone: per scene entry its variants times its `scene.*` axes, times the sum
/// over formulation entries of their `formulation.*` axes, times timesteps and seeds. Entries
/// whose names or variants do not resolve count once (expansion reports them).
fn grid_size(
    cfg: &ExperimentConfig,
    catalog: &Catalog,
    n_timesteps: usize,
    n_seeds: usize,
    scene_axes: &BTreeMap<String, Vec<Value>>,
    formulation_axes: &BTreeMap<String, Vec<Value>>,
) -> usize {
    let axes = |axes: &BTreeMap<String, Vec<Value>>, has: &dyn Fn(&str) -> bool| {
        axes.iter()
            .filter(|(p, _)| has(p))
            .fold(1usize, |n, (_, v)| n.saturating_mul(v.len()))
    };
    let per_scene = cfg
        .formulations
        .iter()
        .map(|f| match catalog.formulation(&f.name) {
            Ok(e) => axes(formulation_axes, &|p| {
                f.params.contains_key(p) || e.params.iter().any(|d| d.name == p)
            }),
            Err(_) => 1,
        })
        .fold(0usize, usize::saturating_add)
        .saturating_mul(n_timesteps)
        .saturating_mul(n_seeds);
    cfg.scenes
        .iter()
        .map(|s| {
            let Ok(e) = catalog.scene(&s.name) else {
                return 1;
            };
            let variants = contactlab_scenarios::expand(&s.name, &s.params).map_or(1, |v| v.len());
            variants
                .saturating_mul(axes(scene_axes, &|p| {
                    s.params.contains_key(p) || e.params.iter().any(|d| d.name == p)
                }))
                .saturating_mul(per_scene)
        })
        .fold(0usize, usize::saturating_add)
}

/// Cartesian product of axes (one empty combination when there are none).
fn product(axes: &[(String, Vec<Value>)]) -> Vec<Vec<(String, Value)>> {
    let mut out: Vec<Vec<(String, Value)>> = vec![Vec::new()];
    for (k, vals) in axes {
        out = out
            .into_iter()
            .flat_map(|c| {
                vals.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((k.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    out
}

/// FNV-1a 64 of a JSON value's canonical text (object keys sorted), as 16 hex digits.
pub fn hash_hex(v: &Value) -> String {
    let text = v.to_string();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// A plain-text table of the grid for `contactlab check`.
pub fn grid_table(plan: &Plan) -> String {
    let mut out = format!("{} cells\n", plan.cells.len());
    out += &format!(
        "{:>5}  {:<18} {:<24} {:>10} {:>5} {:>8}  {:<16} sweep\n",
        "#", "scene", "formulation", "timestep_s", "seed", "horizon_s", "id"
    );
    for c in &plan.cells {
        let sweep: Vec<String> = c.sweep.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out += &format!(
            "{:>5}  {:<18} {:<24} {:>10} {:>5} {:>8}  {:<16} {}\n",
            c.index,
            c.scene_label,
            c.label,
            c.timestep_s,
            c.seed,
            c.horizon_s,
            c.id,
            sweep.join(" ")
        );
    }
    out
}

/// Parameters as a JSON object with the same keys, for display.
pub fn params_text(v: &Value) -> String {
    match v {
        Value::Object(m) if m.is_empty() => "{}".into(),
        other => other.to_string(),
    }
}
