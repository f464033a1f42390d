//! The `mjcf` scene: any MJCF file as a scene (`{name: mjcf, file: model.xml, key: name}`).

use std::path::PathBuf;

use contactlab_solvers::dynamics::{kinetic_energy, mass_matrix, potential_energy};
use contactlab_solvers::formulation::ParamDoc;
use contactlab_solvers::kinematics::forward_kinematics;
use serde::{Deserialize, Serialize};

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
/// Missing `file`, or loader errors (with file, line and element; among them a keyframe
/// `ctrl` whose width is not the number of actuators).
///
/// # Controls
/// With `key`, the keyframe's `ctrl` (one value per actuator, in `<actuator>` order, in the
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
    let p: MjcfParams = serde_json::from_value(v.clone()).map_err(|e| bad(e.to_string()))?;
    if !(p.horizon.is_finite() && p.horizon > 0.0) {
        return Err(bad(format!(
            "horizon = {} must be finite and > 0",
            p.horizon
        )));
    }
    let loaded = super::load_file(&p.file, p.key.as_deref()).map_err(|e| bad(e.to_string()))?;
    let controls = if loaded.ctrl.iter().any(|c| *c != 0.0) {
        let ctrl = loaded.ctrl.clone();
        Some(ControlLaw::new(move |_, _| ctrl.clone()))
    } else {
        None
    };
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
    ],
    build,
};
