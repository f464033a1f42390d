//! # contactlab-scenarios
//!
//! Scene builders, registered by name in [`SCENES`]. A scene is a validated [`Model`], an
//! initial [`State`], a default horizon, an open-loop control law, and the bounds the harness
//! uses to judge stability (DESIGN.md, "Scene" and "Measurements").
//!
//! Parameters come from the experiment file as a JSON object (the harness converts YAML);
//! unknown keys are errors. Defaults reproduce the MuJoCo reference scenes
//! (`scenarios/tests/reference/README.md`) so the same scenes can be compared with MuJoCo's
//! trajectories. Run-time data (the cube tosses) is found through [`data_dir`].

#![deny(missing_docs)]

use contactlab_solvers::formulation::ParamDoc;
use std::path::PathBuf;
use std::sync::Arc;

use contactlab_solvers::{Model, ModelError, State, StepReport};

pub mod benchmark;
pub mod closed_form;
pub mod control_synthesis;
#[cfg(feature = "burn")]
pub mod control_synthesis_batched;
pub mod data_dir;
pub mod gradient;
pub mod input_file;
pub mod limits;
pub mod mesh_file;
pub mod mjcf;
pub mod recorded;
pub mod terrain;

/// Open-loop controls: `u(t, state)` returns one value per actuator (the actuators' own
/// units: N or N m for motors, m or rad for position targets, m/s or rad/s for velocity
/// targets). A closure, so that a law can carry data (an MJCF keyframe's `ctrl`, a control
/// schedule); plain functions wrap with [`ControlLaw::new`].
#[derive(Clone)]
pub struct ControlLaw(pub Arc<dyn Fn(f64, &State) -> Vec<f64> + Send + Sync>);

impl ControlLaw {
    /// Wrap a function or closure `u(t, state)`.
    pub fn new(f: impl Fn(f64, &State) -> Vec<f64> + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// The controls at time `t` (s) in `state`.
    pub fn at(&self, t: f64, state: &State) -> Vec<f64> {
        (self.0)(t, state)
    }
}

impl std::fmt::Debug for ControlLaw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ControlLaw(..)")
    }
}

/// Observes one run of a scene's task step by step and reports its outcomes (task loss,
/// success, slip, ...), so that every formulation is judged on the task the same way.
pub trait TaskMonitor: Send {
    /// Record the state after a step of length `h` (s) and that step's report.
    fn observe(&mut self, state: &State, report: &StepReport, h: f64);
    /// Named outcomes so far, SI units in the names' suffixes, booleans as 0 or 1.
    fn outcomes(&self) -> Vec<(&'static str, f64)>;
}

/// Makes a [`TaskMonitor`] for one run from the scene's model and initial state.
#[derive(Clone)]
pub struct TaskFactory(pub Arc<dyn Fn(&Model, &State) -> Box<dyn TaskMonitor> + Send + Sync>);

impl std::fmt::Debug for TaskFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TaskFactory(..)")
    }
}

impl TaskFactory {
    /// Wrap a constructor.
    pub fn new(f: impl Fn(&Model, &State) -> Box<dyn TaskMonitor> + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// A monitor for one run.
    pub fn monitor(&self, model: &Model, initial: &State) -> Box<dyn TaskMonitor> {
        (self.0)(model, initial)
    }
}

/// A scene ready to simulate.
#[derive(Debug, Clone)]
pub struct Scene {
    /// The model.
    pub model: Model,
    /// Initial state (t = 0).
    pub initial: State,
    /// Default horizon (s) when the experiment gives none.
    pub horizon: f64,
    /// Controls; `None` means zero controls.
    pub controls: Option<ControlLaw>,
    /// Allowed rise of total energy above its initial value before a run counts as diverged (J).
    pub energy_allowance: f64,
    /// Largest plausible speed of any body point (m/s); above it a run counts as diverged.
    pub speed_bound: f64,
    /// Closed-form expectations of this scene, if any, for tests and reports.
    pub analytic: Vec<AnalyticValue>,
    /// The scene's task outcomes (benchmark scenes), measured on every run.
    pub task: Option<TaskFactory>,
    /// Every file the builder read (an MJCF model and its mesh and height-field assets, a
    /// terrain mesh, a recorded toss, a control schedule), as the paths it opened. The harness
    /// hashes their bytes into the identity of each cell built from this scene, so editing one
    /// in place reruns exactly the cells that read it. Empty for scenes built from parameters
    /// alone. A builder that reads a file must list it here.
    pub inputs: Vec<PathBuf>,
}

/// A named closed-form value a scene should reproduce (e.g. box_slide's stop distance).
#[derive(Debug, Clone, PartialEq)]
pub struct AnalyticValue {
    /// Short key, e.g. `"stop_distance_m"`.
    pub name: &'static str,
    /// The value in SI units.
    pub value: f64,
    /// The formula, for reports (e.g. `"v0^2 / (2 mu g)"`).
    pub formula: &'static str,
}

impl Scene {
    /// Controls at time `t` (zeros when the scene has no control law).
    pub fn controls_at(&self, t: f64, state: &State) -> Vec<f64> {
        match &self.controls {
            Some(f) => f.at(t, state),
            None => vec![0.0; self.model.actuators.len()],
        }
    }
}

/// An error building a scene.
#[derive(Debug, thiserror::Error)]
pub enum SceneError {
    /// No scene with this name.
    #[error("unknown scene '{name}'; valid names: {valid}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The registered names, comma separated.
        valid: String,
    },
    /// Parameters did not parse (unknown key, wrong type).
    #[error("scene '{name}': {message}")]
    BadParams {
        /// The scene.
        name: String,
        /// What is wrong (names the key).
        message: String,
    },
    /// The parameters produce an invalid model.
    #[error("scene '{name}': {source}")]
    Model {
        /// The scene.
        name: String,
        /// The model error, naming the element.
        source: ModelError,
    },
}

/// A registered scene.
#[derive(Clone, Copy)]
pub struct SceneEntry {
    /// Registry name.
    pub name: &'static str,
    /// One-line description.
    pub description: &'static str,
    /// Parameters with defaults and units.
    pub params: &'static [ParamDoc],
    /// Build from a JSON object of parameters (`null` for defaults).
    pub build: fn(&serde_json::Value) -> Result<Scene, SceneError>,
}

/// Every scene contactlab knows, in display order: the closed-form scenes, the benchmark
/// scenes, then `mjcf`.
pub const SCENES: &[SceneEntry] = &{
    const N1: usize = closed_form::ENTRIES.len();
    const N2: usize = benchmark::ENTRIES.len();
    let mut all = [mjcf::MJCF; N1 + N2 + 1];
    let mut i = 0;
    while i < N1 {
        all[i] = closed_form::ENTRIES[i];
        i += 1;
    }
    while i < N1 + N2 {
        all[i] = benchmark::ENTRIES[i - N1];
        i += 1;
    }
    all
};

/// Look up a scene by name.
///
/// # Errors
/// [`SceneError::Unknown`] listing the valid names.
pub fn find(name: &str) -> Result<&'static SceneEntry, SceneError> {
    SCENES
        .iter()
        .find(|e| e.name == name)
        .ok_or_else(|| SceneError::Unknown {
            name: name.to_string(),
            valid: SCENES.iter().map(|e| e.name).collect::<Vec<_>>().join(", "),
        })
}

/// Build scene `name` from a JSON object of parameters.
///
/// # Errors
/// Unknown scene, bad parameters, or an invalid resulting model.
pub fn build(name: &str, params: &serde_json::Value) -> Result<Scene, SceneError> {
    (find(name)?.build)(params)
}

/// Expand a scene entry's parameters into the parameter objects of its cells: scenes that
/// enumerate a parameter themselves return one object per value (`cube_toss` with
/// `toss: all`: one per toss file, see [`benchmark::cube_toss::expand`]); every other scene
/// returns `params` unchanged, alone.
///
/// # Errors
/// The scene's own error (for `cube_toss`: unreadable toss folder, unknown toss).
pub fn expand(
    name: &str,
    params: &serde_json::Map<String, serde_json::Value>,
) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, SceneError> {
    match name {
        "cube_toss" => benchmark::cube_toss::expand(params),
        _ => Ok(vec![params.clone()]),
    }
}

/// Parse a parameter struct (`null` means defaults), naming the scene in errors.
///
/// # Errors
/// [`SceneError::BadParams`] naming the key ([`contactlab_solvers::formulation::deserialize_params`]).
pub fn parse_params<P: serde::de::DeserializeOwned + Default>(
    name: &str,
    v: &serde_json::Value,
) -> Result<P, SceneError> {
    contactlab_solvers::formulation::deserialize_params(v).map_err(|message| {
        SceneError::BadParams {
            name: name.to_string(),
            message,
        }
    })
}
