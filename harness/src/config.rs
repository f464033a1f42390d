//! Experiment files: the typed schema ([`ExperimentConfig`]), YAML parsing, and errors that name
//! the file, the line and the key ([`ConfigError`]).
//!
//! All YAML parsing of the harness sits in this module. The YAML library is `serde_yaml_ng`, a
//! maintained fork of `serde_yaml` (which its author deprecated in March 2024); it keeps
//! `serde_yaml`'s API and its error locations (line and column), which our errors rely on.
//! `serde_norway` was the other candidate; either would do.
//!
//! Unknown keys are errors everywhere: at the top level and in `reference` by serde
//! (`deny_unknown_fields`); beside a scene's or formulation's `name` by the registries, which
//! receive those keys as a JSON object and reject the ones they do not know.
//!
//! Semantic checks (timesteps, labels, registry names, ...) are in [`crate::sweep`]; they point
//! back into the file with [`locate`].

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Default accuracy threshold on `traj_error_mean` (m for scenes with a free body, otherwise the
/// generalized-coordinate norm): 1 cm. A timestep is "accurate" when the mean trajectory error
/// against the reference stays at or under it.
pub const DEFAULT_ACCURACY_THRESHOLD: f64 = 1e-2;

/// Default length of a re-anchored window (s): errors are measured after restarting from the
/// reference state every `reanchor_window` seconds.
pub const DEFAULT_REANCHOR_WINDOW_S: f64 = 0.1;

/// A bad experiment file: where it is bad and why. Exit status 2 in the CLI.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// The experiment file.
    pub file: PathBuf,
    /// 1-based line of the offending key, when known.
    pub line: Option<usize>,
    /// Path of the offending key, e.g. `sweep.timestep` or `scenes[1].friction`.
    pub key: String,
    /// What is wrong, in one sentence.
    pub message: String,
}

impl std::error::Error for ConfigError {}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if self.key.is_empty() {
            write!(f, ": {}", self.message)
        } else {
            write!(f, ": key '{}': {}", self.key, self.message)
        }
    }
}

/// One experiment file (see the crate docs and `configs/quickstart.yaml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentConfig {
    /// Experiment name; results go to `<out>/<name>/`. Letters, digits, `_`, `-`, `.`.
    pub name: String,
    /// One line for the report.
    #[serde(default)]
    pub description: String,
    /// Scenes, each a name with its parameters beside it.
    pub scenes: Vec<SceneSpec>,
    /// Formulations, each a name with its parameters beside it; the same formulation may appear
    /// several times with different parameters and distinct labels.
    pub formulations: Vec<FormulationSpec>,
    /// Sweep axes: `timestep` (s), `seed`, `engine`, `worlds`, `scene.<param>`,
    /// `formulation.<param>`; each a list.
    #[serde(default)]
    pub sweep: BTreeMap<String, Vec<serde_json::Value>>,
    /// Simulated time per cell (s); default: each scene's own horizon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizon: Option<f64>,
    /// What trajectory errors are measured against.
    #[serde(default)]
    pub reference: ReferenceSpec,
    /// Metric columns shown in the report's per-cell table (all are always recorded); empty:
    /// a default selection. Names as `contactlab list` prints them.
    #[serde(default)]
    pub metrics: Vec<String>,
    /// Figures to draw; empty: all kinds.
    #[serde(default)]
    pub figures: Vec<FigureKind>,
    /// Where formulations execute (default `cpu`); a sweep axis `engine: [...]` overrides it.
    #[serde(default)]
    pub engine: Engine,
    /// Independent copies of each cell's scene stepped together (default 1); a sweep axis
    /// `worlds: [...]` overrides it. Metrics are measured on world 0; `world_steps_per_s`
    /// counts every world.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worlds: Option<usize>,
    /// Worker threads; `--jobs` overrides; default: the number of cores. At least 1; more
    /// than the machine's cores are clamped to them with a note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<usize>,
    /// Most steps (`horizon / timestep`) one run may take, for each cell and its reference
    /// run; default [`contactlab_scenarios::limits::DEFAULT_MAX_STEPS`]. A cell over it is
    /// refused before anything runs; set this key to raise the limit on purpose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u64>,
    /// Write one per-step log per cell to `steps/<cell>.parquet`.
    #[serde(default)]
    pub log_steps: bool,
    /// Largest `traj_error_mean` that counts as accurate (see [`DEFAULT_ACCURACY_THRESHOLD`]).
    #[serde(default = "default_threshold")]
    pub accuracy_threshold: f64,
    /// Re-anchored error window (s) (see [`DEFAULT_REANCHOR_WINDOW_S`]).
    #[serde(default = "default_window")]
    pub reanchor_window: f64,
    /// What the experiment studies; absent: `stability` (the cells above, simulated and
    /// measured).
    #[serde(default, skip_serializing_if = "StudySpec::is_stability")]
    pub study: StudySpec,
}

/// The kind of study an experiment runs, tagged by `kind`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum StudySpec {
    /// One rollout per cell, measured (stability, accuracy, cost): the default.
    #[default]
    Stability,
    /// Gradient accuracy against the f64 finite-difference reference
    /// ([`crate::study_gradient`]).
    Gradient(crate::study_gradient::GradientStudy),
    /// Gradient-based control synthesis ([`crate::study_control`]).
    ControlSynthesis(crate::study_control::ControlSynthesisSpec),
    /// Throughput and memory against the number of worlds ([`crate::study_throughput`]).
    Throughput(crate::study_throughput::ThroughputSpec),
}

/// The name the gradient study uses for [`StudySpec`].
pub type Study = StudySpec;

impl StudySpec {
    /// Whether this is the default stability study (not written to `config.resolved.yaml`).
    pub fn is_stability(&self) -> bool {
        matches!(self, StudySpec::Stability)
    }

    /// Whether this is a control-synthesis study, which plans and runs on its own
    /// ([`crate::study_control`]); stability and gradient studies share the sweep's planner.
    pub fn is_control_synthesis(&self) -> bool {
        matches!(self, StudySpec::ControlSynthesis(_))
    }

    /// Whether this is a throughput study, which plans on the sweep's grid and runs on its own
    /// ([`crate::study_throughput`]).
    pub fn is_throughput(&self) -> bool {
        matches!(self, StudySpec::Throughput(_))
    }
}

fn default_threshold() -> f64 {
    DEFAULT_ACCURACY_THRESHOLD
}
fn default_window() -> f64 {
    DEFAULT_REANCHOR_WINDOW_S
}

/// A scene entry: its registry name, optional label and its parameters (every other key).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SceneSpec {
    /// Registry name.
    pub name: String,
    /// Label in results, tables and figures; default: the name. Labels must be unique, so two
    /// entries of the same scene (e.g. two terrains) need labels and are never merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Parameters, passed to the scene registry as a JSON object.
    #[serde(flatten)]
    pub params: serde_json::Map<String, serde_json::Value>,
}

impl SceneSpec {
    /// The label used in results: `label`, or the name.
    pub fn label(&self) -> &str {
        self.label.as_deref().unwrap_or(&self.name)
    }
}

/// A formulation entry: registry name, optional label, parameters (every other key).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FormulationSpec {
    /// Registry name.
    pub name: String,
    /// Label in results and figures; default: the name. Labels must be unique.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Parameters, passed to the formulation registry as a JSON object.
    #[serde(flatten)]
    pub params: serde_json::Map<String, serde_json::Value>,
}

impl FormulationSpec {
    /// The label used in results: `label`, or the name.
    pub fn label(&self) -> &str {
        self.label.as_deref().unwrap_or(&self.name)
    }
}

/// The reference trajectory errors are measured against.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ReferenceSpec {
    /// No reference: trajectory errors are not measured (NaN).
    #[default]
    None,
    /// The same formulation, parameters and seed run at a small `timestep` (s).
    SameFormulation {
        /// Reference timestep (s), > 0.
        timestep: f64,
    },
    /// Recorded trajectories. For `cube_toss` cells, the cell's toss file `<dir>/<toss>.csv`
    /// (real data, `contactlab_scenarios::recorded`), compared at the recorded sample times
    /// only; `dir` defaults to the scene's own `dir` parameter. For other scenes,
    /// `<dir>/<scene>.csv` in the format `contactlab simulate` writes (then `dir` is required).
    Recorded {
        /// Directory, relative to the experiment file's folder.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dir: Option<PathBuf>,
    },
    /// The scene's closed-form values (listed in the report); no trajectory error.
    Analytic,
    /// One trajectory file (CSV or Parquet, `contactlab simulate`'s columns) for every cell.
    Trajectory {
        /// File, relative to the experiment file.
        file: PathBuf,
    },
}

/// The kinds of figure `contactlab` draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FigureKind {
    /// Mean trajectory error vs timestep (log-log), divergence marked.
    ErrorVsTimestep,
    /// Maximum penetration vs timestep.
    PenetrationVsTimestep,
    /// Mean solver iterations vs timestep.
    IterationsVsTimestep,
    /// World-steps per second vs timestep.
    ThroughputVsTimestep,
}

impl FigureKind {
    /// Every kind, in drawing order.
    pub const ALL: [FigureKind; 4] = [
        FigureKind::ErrorVsTimestep,
        FigureKind::PenetrationVsTimestep,
        FigureKind::IterationsVsTimestep,
        FigureKind::ThroughputVsTimestep,
    ];

    /// The snake_case name (file stem of the figure).
    pub fn name(self) -> &'static str {
        match self {
            FigureKind::ErrorVsTimestep => "error_vs_timestep",
            FigureKind::PenetrationVsTimestep => "penetration_vs_timestep",
            FigureKind::IterationsVsTimestep => "iterations_vs_timestep",
            FigureKind::ThroughputVsTimestep => "throughput_vs_timestep",
        }
    }
}

/// Where formulations execute (`contactlab_solvers::engine::ENGINES`). Every name parses in
/// every build; a cell whose engine this build lacks (cargo features `burn`, `wgpu`, `cuda`)
/// is a `skipped` row that says which feature builds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// f64 reference engine, one world per task, rayon across worlds.
    #[default]
    Cpu,
    /// Batched tensors on burn's ndarray backend (f64).
    BurnNdarray,
    /// Batched tensors on burn's wgpu backend (f32).
    BurnWgpu,
    /// Batched tensors on burn's CUDA backend (f32).
    BurnCuda,
}

impl Engine {
    /// The registry name (`cpu`, `burn-ndarray`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Cpu => "cpu",
            Engine::BurnNdarray => "burn-ndarray",
            Engine::BurnWgpu => "burn-wgpu",
            Engine::BurnCuda => "burn-cuda",
        }
    }
}

/// The text of the default experiment, `configs/quickstart.yaml`, embedded in the binary.
pub const QUICKSTART_YAML: &str = include_str!("../../configs/quickstart.yaml");

/// Read and parse an experiment file. Returns the config and the file text (for [`locate`]).
///
/// # Errors
/// Unreadable file, YAML syntax, unknown key, wrong type: a [`ConfigError`] with the line.
pub fn load(path: &Path) -> Result<(ExperimentConfig, String), ConfigError> {
    let text = contactlab_scenarios::input_file::read_text(
        path,
        contactlab_scenarios::limits::MAX_CONFIG_BYTES,
    )
    .map_err(|e| ConfigError {
        file: path.to_path_buf(),
        line: None,
        key: String::new(),
        message: format!("cannot read the experiment file: {}", e.message),
    })?;
    let cfg = parse(path, &text)?;
    Ok((cfg, text))
}

/// Parse experiment text; `file` only names the source in errors. A leading UTF-8 byte-order
/// mark is skipped.
///
/// # Errors
/// Nesting deeper than [`crate::yaml_checks::MAX_NESTING`] (found in linear time, before the
/// YAML parser sees the text), a duplicate key in any mapping (at the duplicate's own line),
/// YAML syntax, unknown key, wrong type or missing key, as a [`ConfigError`].
pub fn parse(file: &Path, text: &str) -> Result<ExperimentConfig, ConfigError> {
    // A UTF-8 byte-order mark (some Windows editors write one) is not part of the first key.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let at = |line: usize, key: String, message: String| ConfigError {
        file: file.to_path_buf(),
        line: Some(line),
        key,
        message,
    };
    if let Err(e) = crate::yaml_checks::check_depth(text, crate::yaml_checks::MAX_NESTING) {
        return Err(at(
            e.line,
            String::new(),
            format!(
                "nesting deeper than {} levels; an experiment needs far fewer",
                crate::yaml_checks::MAX_NESTING
            ),
        ));
    }
    if let Some(d) = crate::yaml_checks::find_duplicate_key(text) {
        return Err(at(
            d.line,
            d.path,
            format!(
                "duplicate key '{}'; each key may appear once in a mapping",
                d.key
            ),
        ));
    }
    // A non-finite number (`.nan`, `.inf`) would silently become null (the default) on its way
    // into the JSON parameter values: reject it here, naming the key.
    if let Ok(raw) = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text) {
        if let Some(key) = non_finite_key(&raw, "") {
            return Err(ConfigError {
                file: file.to_path_buf(),
                line: locate(text, &key),
                key,
                message: "numbers must be finite (.nan and .inf are not accepted)".into(),
            });
        }
    }
    serde_yaml_ng::from_str(text).map_err(|e| {
        crate::study_control::study_error(file, text)
            .or_else(|| crate::study_throughput::study_error(file, text))
            .unwrap_or_else(|| yaml_error(file, text, &e))
    })
}

/// The key path of the first non-finite float in `v`, if any (`scenes[1].friction`).
fn non_finite_key(v: &serde_yaml_ng::Value, path: &str) -> Option<String> {
    use serde_yaml_ng::Value;
    match v {
        Value::Number(n) => n
            .as_f64()
            .filter(|x| !x.is_finite())
            .map(|_| path.to_string()),
        Value::Sequence(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, x)| non_finite_key(x, &format!("{path}[{i}]"))),
        Value::Mapping(m) => m.iter().find_map(|(k, x)| {
            let name = k.as_str().map_or_else(|| format!("{k:?}"), str::to_string);
            let sub = if path.is_empty() {
                name
            } else {
                format!("{path}.{name}")
            };
            non_finite_key(x, &sub)
        }),
        Value::Tagged(t) => non_finite_key(&t.value, path),
        _ => None,
    }
}

/// Turn serde_yaml_ng's error into a [`ConfigError`]: its message names the key path
/// (`scenes[0].name: ...`) and its location the line.
fn yaml_error(file: &Path, text: &str, e: &serde_yaml_ng::Error) -> ConfigError {
    let mut message = e.to_string();
    // serde_yaml_ng appends " at line L column C"; the line goes in its own field.
    if let Some(i) = message.rfind(" at line ") {
        message.truncate(i);
    }
    let (key, rest) = match message.split_once(": ") {
        Some((k, m)) if !k.contains(' ') => (k.to_string(), m.to_string()),
        _ => (String::new(), message.clone()),
    };
    // "unknown field `x`" names the key itself: report its full path and its own line.
    let mut line = e.location().map(|l| l.line());
    let mut key = key;
    if let Some(field) = rest
        .strip_prefix("unknown field `")
        .and_then(|r| r.split('`').next())
    {
        key = if key.is_empty() {
            field.to_string()
        } else {
            format!("{key}.{field}")
        };
        if let Some(l) = locate(text, &key) {
            line = Some(l);
        }
    }
    ConfigError {
        file: file.to_path_buf(),
        line,
        key,
        message: rest,
    }
}

/// Serialize a config back to YAML (for `config.resolved.yaml`).
///
/// # Errors
/// Only if serialization fails, which a parsed config never does.
pub fn to_yaml(cfg: &ExperimentConfig) -> Result<String, serde_yaml_ng::Error> {
    serde_yaml_ng::to_string(cfg)
}

/// Parse one `KEY=VALUE` value as a YAML scalar (`1e5` is a number, `true` a bool, `elliptic` a
/// string), for the CLI's `--param` flags.
pub fn parse_scalar(value: &str) -> serde_json::Value {
    // A non-finite float would become null (the default) in JSON: keep it as text instead, so
    // the registry rejects it as the wrong type, naming the key.
    if let Ok(serde_yaml_ng::Value::Number(n)) =
        serde_yaml_ng::from_str::<serde_yaml_ng::Value>(value)
    {
        if n.as_f64().is_some_and(|x| !x.is_finite()) {
            return serde_json::Value::String(value.to_string());
        }
    }
    serde_yaml_ng::from_str::<serde_json::Value>(value)
        .unwrap_or_else(|_| serde_json::Value::String(value.to_string()))
}

/// The 1-based line of a key path such as `sweep.timestep`, `scenes[1].friction` or `scenes[1]`
/// in block-style YAML text; `None` if not found. A best effort for error messages.
pub fn locate(text: &str, path: &str) -> Option<usize> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<&str> = text.lines().collect();
    let (mut lo, mut hi) = (0usize, lines.len());
    let mut scope_col: isize = -1;
    let mut found = None;
    for seg in split_path(path) {
        match seg {
            Seg::Key(k) => {
                let pat = format!("{k}:");
                let mut best: Option<(usize, usize)> = None;
                for (i, l) in lines.iter().enumerate().take(hi).skip(lo) {
                    let (col, content) = key_col(l);
                    if (col as isize) > scope_col
                        && (content.starts_with(&pat) || content.starts_with(&format!("\"{k}\":")))
                        && best.is_none_or(|(c, _)| col < c)
                    {
                        best = Some((col, i));
                    }
                }
                let (col, i) = best?;
                found = Some(i + 1);
                hi = block_end(&lines, i, col, hi);
                lo = i;
                scope_col = col as isize;
            }
            Seg::Index(n) => {
                let mut items = Vec::new();
                let mut dash_col = usize::MAX;
                for (i, l) in lines.iter().enumerate().take(hi).skip(lo + 1) {
                    let ind = l.len() - l.trim_start().len();
                    if l.trim_start().starts_with("- ") || l.trim() == "-" {
                        if ind < dash_col {
                            dash_col = ind;
                            items.clear();
                        }
                        if ind == dash_col {
                            items.push(i);
                        }
                    }
                }
                let &i = items.get(n)?;
                found = Some(i + 1);
                let end = items.get(n + 1).copied().unwrap_or(hi);
                lo = i;
                hi = end;
                scope_col = dash_col as isize;
            }
        }
    }
    found
}

enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

fn split_path(path: &str) -> Vec<Seg<'_>> {
    // Sweep axes contain dots (`scene.friction`): `sweep.<axis>` is two segments.
    if let Some(axis) = path.strip_prefix("sweep.") {
        return vec![Seg::Key("sweep"), Seg::Key(axis)];
    }
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            out.push(Seg::Key(key));
        }
        for idx in rest.split('[').filter(|s| !s.is_empty()) {
            if let Ok(n) = idx.trim_end_matches(']').parse() {
                out.push(Seg::Index(n));
            }
        }
    }
    out
}

/// Column of the key on a line (after any `- ` list markers) and the text from there.
fn key_col(line: &str) -> (usize, &str) {
    let mut col = line.len() - line.trim_start().len();
    let mut rest = line.trim_start();
    while let Some(r) = rest.strip_prefix("- ") {
        let r2 = r.trim_start();
        col += rest.len() - r2.len();
        rest = r2;
    }
    (col, rest)
}

/// End (exclusive) of the block opened by the key at line `i`, column `col`.
fn block_end(lines: &[&str], i: usize, col: usize, hi: usize) -> usize {
    for (j, l) in lines.iter().enumerate().take(hi).skip(i + 1) {
        let t = l.trim_start();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let ind = l.len() - t.len();
        if ind < col || (ind == col && !t.starts_with("- ")) {
            return j;
        }
    }
    hi
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "name: x\nscenes:\n  - name: a\n    friction: 0.3\n  - name: b\n    friction: 0.5\nsweep:\n  timestep: [0.1]\n  scene.friction: [1]\nhorizon: 1\n";

    #[test]
    fn locate_finds_nested_keys() {
        assert_eq!(locate(TEXT, "name"), Some(1));
        assert_eq!(locate(TEXT, "scenes[1]"), Some(5));
        assert_eq!(locate(TEXT, "scenes[1].friction"), Some(6));
        assert_eq!(locate(TEXT, "sweep.timestep"), Some(8));
        assert_eq!(locate(TEXT, "sweep.scene.friction"), Some(9));
        assert_eq!(locate(TEXT, "horizon"), Some(10));
        assert_eq!(locate(TEXT, "missing"), None);
    }

    #[test]
    fn non_finite_numbers_are_errors_naming_the_key() {
        let text = "name: x\nscenes:\n  - name: a\nformulations:\n  - name: penalty\n    ke: .nan\nsweep:\n  timestep: [0.1]\n";
        let e = parse(Path::new("x.yaml"), text).unwrap_err();
        assert_eq!(
            (e.key.as_str(), e.line),
            ("formulations[0].ke", Some(6)),
            "{e}"
        );
        let text = "name: x\nscenes:\n  - name: a\nsweep:\n  timestep: [0.1, .inf]\n";
        let e = parse(Path::new("x.yaml"), text).unwrap_err();
        assert_eq!(e.key, "sweep.timestep[1]", "{e}");
        assert_eq!(parse_scalar("nan"), serde_json::Value::String("nan".into()));
    }

    #[test]
    fn quickstart_parses() {
        let cfg = parse(Path::new("quickstart.yaml"), QUICKSTART_YAML).unwrap();
        assert_eq!(cfg.name, "quickstart");
        assert_eq!(cfg.sweep["timestep"].len(), 6);
        assert_eq!(cfg.sweep["seed"].len(), 2);
    }

    #[test]
    fn unknown_top_level_key_names_line_and_key() {
        let e = parse(
            Path::new("f.yaml"),
            "name: x\nscenes: []\nformulations: []\nhorizn: 1\n",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.key.contains("horizn"), "{e}");
    }

    #[test]
    fn scalars_parse_as_yaml() {
        assert_eq!(parse_scalar("1e5"), serde_json::json!(1e5));
        assert_eq!(parse_scalar("3"), serde_json::json!(3));
        assert_eq!(parse_scalar("elliptic"), serde_json::json!("elliptic"));
    }
}
