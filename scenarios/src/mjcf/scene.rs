//! The `mjcf` scene: any MJCF file as a scene (`{name: mjcf, file: model.xml, key: name,
//! controls: schedule.csv}`).

use std::path::PathBuf;

use contactlab_solvers::dynamics::{kinetic_energy, mass_matrix, potential_energy};
use contactlab_solvers::formulation::ParamDoc;
use contactlab_solvers::kinematics::forward_kinematics;
use serde::{Deserialize, Serialize};

use super::schedule::{self, Interpolation};
use crate::{ControlLaw, Scene, SceneEntry, SceneError};

/// Parameters of the `mjcf` scene.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MjcfParams {
    /// The MJCF file (required); a relative path resolves against the working directory.
    pub file: PathBuf,
    /// Name of the keyframe giving the initial state; `None`: qpos0 at rest.
    #[serde(default)]
    pub key: Option<String>,
    /// Simulated duration (s). Default 1.
    #[serde(default = "default_horizon")]
    pub horizon: f64,
    /// Control schedule overriding the keyframe's `ctrl` ([`super::schedule`]): the path of a
    /// CSV file (header `time,<actuator names>`; a relative path resolves against the working
    /// directory, like `file`) or a list `[[t, u1, u2, ...], ...]` (values in `<actuator>`
    /// order). `None`: the keyframe's `ctrl` (or zeros) throughout.
    #[serde(default)]
    pub controls: Option<serde_json::Value>,
    /// How `controls` is interpolated between its rows: `hold` (piecewise constant, the
    /// default) or `linear`.
    #[serde(default)]
    pub interpolation: Interpolation,
}

fn default_horizon() -> f64 {
    1.0
}

/// Build the `mjcf` scene from its parameters.
///
/// The energy allowance is 10% of the initial mechanical energy's magnitude plus 1 J, or
/// unbounded when the model has actuators (they may add energy); the speed bound is 100 m/s.
///
/// # Errors
/// Missing `file`, loader errors (with file, line and element; among them a keyframe `ctrl`
/// whose width is not the number of actuators), `interpolation` without `controls`, or a bad
/// schedule (wrong width, non-increasing times: the CSV file and line, or `controls[i]`).
///
/// # Controls
/// With `controls`, the schedule ([`super::schedule`]), whatever the keyframe sets; else with
/// `key`, the keyframe's `ctrl` (one value per actuator, in `<actuator>` order, in the
/// actuator's units: N or N m for a motor, the target position for a position servo, the
/// target velocity for a velocity servo) holds as constant controls for the whole run, as
/// MuJoCo's `mj_resetDataKeyframe` leaves `data.ctrl`; without a key the controls are zero.
pub fn build(v: &serde_json::Value) -> Result<Scene, SceneError> {
    let name = "mjcf";
    let bad = |message: String| SceneError::BadParams {
        name: name.into(),
        message,
    };
    if v.is_null() {
        return Err(bad("parameter 'file' is required".into()));
    }
    // serde_path_to_error names the key of a wrong value ("interpolation: unknown variant").
    let p: MjcfParams = serde_path_to_error::deserialize(v.clone()).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        bad(if path.is_empty() || path == "." {
            inner
        } else {
            format!("{path}: {inner}")
        })
    })?;
    if !(p.horizon.is_finite() && p.horizon > 0.0) {
        return Err(bad(format!(
            "horizon = {} must be finite and > 0",
            p.horizon
        )));
    }
    let loaded = super::load_file(&p.file, p.key.as_deref()).map_err(|e| bad(e.to_string()))?;
    let names: Vec<String> = loaded
        .model
        .actuators
        .iter()
        .map(|a| a.name.clone())
        .collect();
    let schedule = match &p.controls {
        None => {
            if p.interpolation != Interpolation::default() {
                return Err(bad(
                    "interpolation is set but there is no 'controls' schedule for it to act on"
                        .into(),
                ));
            }
            None
        }
        Some(serde_json::Value::String(path)) => Some(
            schedule::from_csv(std::path::Path::new(path), &names, p.interpolation).map_err(bad)?,
        ),
        Some(v) => Some(schedule::from_list(v, &names, p.interpolation).map_err(bad)?),
    };
    let controls = if let Some(s) = schedule {
        Some(ControlLaw::new(move |t, _| s.at(t)))
    } else if loaded.ctrl.iter().any(|c| *c != 0.0) {
        let ctrl = loaded.ctrl.clone();
        Some(ControlLaw::new(move |_, _| ctrl.clone()))
    } else {
        None
    };
    // The schedule CSV is an input file of the cell like the model (its digest enters the id).
    let mut inputs = loaded.files;
    if let Some(serde_json::Value::String(path)) = &p.controls {
        inputs.push(std::path::PathBuf::from(path));
    }
    let model = loaded.model;
    let kin = forward_kinematics(&model, &loaded.initial.q);
    let energy = kinetic_energy(&mass_matrix(&model, &kin), &loaded.initial.v)
        + potential_energy(&model, &kin, &loaded.initial.q);
    let energy_allowance = if model.actuators.is_empty() {
        0.1 * energy.abs() + 1.0
    } else {
        f64::INFINITY
    };
    Ok(Scene {
        model,
        initial: loaded.initial,
        horizon: p.horizon,
        controls,
        energy_allowance,
        speed_bound: 100.0,
        analytic: vec![],
        task: None,
        inputs,
    })
}

/// Registry entry of the `mjcf` scene.
pub const MJCF: SceneEntry = SceneEntry {
    name: "mjcf",
    description: "any MuJoCo MJCF file (see contactlab_scenarios::mjcf for what is supported); initial state and constant controls from a keyframe",
    params: &[
        ParamDoc { name: "file", default: "(required)", unit: "-", doc: "path of the MJCF file" },
        ParamDoc { name: "key", default: "(none: qpos0 at rest)", unit: "-", doc: "keyframe name giving the initial state and constant controls (its ctrl)" },
        ParamDoc { name: "horizon", default: "1.0", unit: "s", doc: "simulated duration" },
        ParamDoc { name: "controls", default: "(none: the key's ctrl)", unit: "-", doc: "control schedule overriding the key's ctrl: a CSV file (header time,<actuator names>) or a list [[t, u1, ...], ...]" },
        ParamDoc { name: "interpolation", default: "hold", unit: "-", doc: "controls between rows: hold (piecewise constant) or linear" },
    ],
    build,
};
