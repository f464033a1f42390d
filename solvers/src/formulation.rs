//! The [`Formulation`] trait, what a step reports ([`StepReport`], [`ContactRecord`]), and the
//! registry of formulations ([`FORMULATIONS`]).
//!
//! A formulation is a contact model together with the solver that resolves it (DESIGN.md,
//! "Words we use"). Every formulation reports the same quantities so the harness can judge them
//! alike: iterations, residual, convergence, divergence, and one [`ContactRecord`] per contact.

use nalgebra::Matrix3;
use serde::Serialize;

pub use crate::features::IgnoredFeature;
use crate::model::{Model, State, Vec3};

/// One contact point as seen by a step, in the frame conventions of DESIGN.md.
///
/// Sign conventions: the frame's first row `n` points from `geoms[0]` to `geoms[1]`; the gap is
/// negative in penetration; the impulse is the one applied **to `geoms[1]`** (equal and opposite
/// on `geoms[0]`), so a repulsive contact has `impulse[0] > 0`; the relative velocity is that of
/// `geoms[1]`'s material point minus `geoms[0]`'s, so separating contacts have `velocity[0] > 0`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ContactRecord {
    /// The two geoms, in MuJoCo's order (lower shape type first).
    pub geoms: [usize; 2],
    /// Contact point in the world (m), midway between the surfaces.
    pub point: Vec3,
    /// Contact frame, rows `(n, t1, t2)`, world frame, orthonormal.
    pub frame: Matrix3<f64>,
    /// Signed distance at the start of the step (m), negative in penetration.
    pub gap: f64,
    /// Sliding friction coefficient of the mixed material (dimensionless).
    pub mu: f64,
    /// Contact impulse over the step in the contact frame `(n, t1, t2)` (N s).
    pub impulse: Vec3,
    /// Relative contact velocity after the step in the contact frame (m/s).
    pub velocity: Vec3,
}

/// What one call of [`Formulation::step`] reports. Non-convergence and divergence are data.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StepReport {
    /// Solver iterations used (0 for explicit formulations).
    pub iterations: usize,
    /// Final solver residual in the formulation's own norm (0 for explicit formulations).
    pub residual: f64,
    /// Whether the solver met its tolerance (always true for explicit formulations).
    pub converged: bool,
    /// The iteration whose iterate the step returned (1-based): below `iterations` where the
    /// solver keeps its best iterate (`ncp_fb`, spec §2.5), equal to it otherwise, 0 when no
    /// iteration ran.
    pub best_iterate: usize,
    /// `Some(reason)` if the step produced a non-finite state, or (batched engines) if the
    /// world left the engine's scene class during the step: either way the world's run ends
    /// there, with the reason recorded.
    pub diverged: Option<String>,
    /// One record per contact that exerted (or could exert) force during the step.
    pub contacts: Vec<ContactRecord>,
}

impl StepReport {
    /// A report for an explicit step: no iterations, converged.
    pub fn explicit(contacts: Vec<ContactRecord>) -> Self {
        Self {
            iterations: 0,
            residual: 0.0,
            converged: true,
            best_iterate: 0,
            diverged: None,
            contacts,
        }
    }

    /// Set `diverged` if `state` holds a non-finite number; returns the report.
    pub fn check_divergence(mut self, state: &State) -> Self {
        if self.diverged.is_none() && !state.is_finite() {
            let what = if !state.q.iter().all(|x| x.is_finite()) {
                "qpos"
            } else {
                "qvel"
            };
            self.diverged = Some(format!("non-finite {what} at t = {:.6} s", state.t));
        }
        self
    }
}

/// A contact formulation: advances a state by one step.
pub trait Formulation: Send {
    /// The registry name (`"penalty"`, `"soft_convex"`, ...).
    fn name(&self) -> &'static str;

    /// Advance `state` by one step of length `h` (s) under controls `u` (one per actuator).
    ///
    /// Never panics on a diverging simulation: the report's `diverged` says so and the state
    /// may then hold non-finite numbers.
    fn step(&mut self, model: &Model, state: &mut State, u: &[f64], h: f64) -> StepReport;

    /// The features of `model` this formulation steps it without ([`crate::features`]):
    /// constraints, friction or options it does not model. Empty when it models all of them.
    /// The harness records the list in every row (`ignored_features`) and in report.md.
    ///
    /// The default (nothing ignored) is for formulations that model every feature; each
    /// built-in formulation overrides it, and `solvers/tests/ignored_features.rs` checks
    /// every registered one on a model that carries every feature.
    fn ignored_features(&self, model: &Model) -> Vec<IgnoredFeature> {
        let _ = model;
        Vec::new()
    }
}

/// Documentation of one formulation parameter, as listed by `contactlab list`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ParamDoc {
    /// Key in the experiment file.
    pub name: &'static str,
    /// Default value, as written in YAML.
    pub default: &'static str,
    /// Unit (SI), or "-" for dimensionless and enumerations.
    pub unit: &'static str,
    /// One line: what it does.
    pub doc: &'static str,
}

/// An error building a formulation from its parameters.
#[derive(Debug, thiserror::Error)]
pub enum FormulationError {
    /// No formulation with this name is registered.
    #[error("unknown formulation '{name}'; valid names: {valid}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The registered names, comma separated.
        valid: String,
    },
    /// The parameters did not parse (unknown key, wrong type, ...).
    #[error("formulation '{name}': {message}")]
    BadParams {
        /// The formulation.
        name: String,
        /// What is wrong (names the key).
        message: String,
    },
}

/// A registered formulation: its name, one line of description, its parameters, and how to build it.
pub struct FormulationEntry {
    /// Registry name.
    pub name: &'static str,
    /// One-line description.
    pub description: &'static str,
    /// Parameters with defaults and units.
    pub params: &'static [ParamDoc],
    /// Build from parameters given as a JSON object (unknown keys are errors).
    pub build: fn(&serde_json::Value) -> Result<Box<dyn Formulation>, FormulationError>,
}

/// Every formulation contactlab knows, in display order.
pub const FORMULATIONS: &[FormulationEntry] = &[
    crate::soft_convex::ENTRY,
    crate::signorini::ENTRY,
    crate::penalty::ENTRY,
    crate::ncp_fb::ENTRY,
];

/// Look up a formulation by name.
///
/// # Errors
/// [`FormulationError::Unknown`] listing the valid names.
pub fn find(name: &str) -> Result<&'static FormulationEntry, FormulationError> {
    FORMULATIONS
        .iter()
        .find(|e| e.name == name)
        .ok_or_else(|| FormulationError::Unknown {
            name: name.to_string(),
            valid: FORMULATIONS
                .iter()
                .map(|e| e.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Build formulation `name` from a JSON object of parameters (`null` or `{}` for defaults).
///
/// # Errors
/// Unknown name, unknown key, wrong type or an out-of-domain value.
pub fn build(
    name: &str,
    params: &serde_json::Value,
) -> Result<Box<dyn Formulation>, FormulationError> {
    (find(name)?.build)(params)
}

/// Deserialize a parameter struct from JSON (`null` means all defaults), for registry entries.
///
/// # Errors
/// [`FormulationError::BadParams`] whose message names the key ([`deserialize_params`]).
pub fn parse_params<P: serde::de::DeserializeOwned + Default>(
    name: &str,
    v: &serde_json::Value,
) -> Result<P, FormulationError> {
    deserialize_params(v).map_err(|message| FormulationError::BadParams {
        name: name.to_string(),
        message,
    })
}

/// Deserialize a parameter struct from JSON (`null`: all defaults), shared by the formulation
/// and scene registries.
///
/// # Errors
/// The message names the parameter whose value is wrong ("servo_form: unknown variant `foo`
/// ...", through serde_path_to_error; serde alone names only the value), or is serde's own for
/// an unknown or missing key (which names the key).
pub fn deserialize_params<P: serde::de::DeserializeOwned + Default>(
    v: &serde_json::Value,
) -> Result<P, String> {
    if v.is_null() {
        return Ok(P::default());
    }
    serde_path_to_error::deserialize(v.clone()).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if path.is_empty() || path == "." {
            inner
        } else {
            format!("{path}: {inner}")
        }
    })
}
