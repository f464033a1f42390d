//! The formulations and scenes an experiment may name ([`Catalog`]).
//!
//! The built-in catalog is the two registries, `contactlab_solvers::formulation::FORMULATIONS`
//! and `contactlab_scenarios::SCENES`. Tests extend it with the fakes of [`crate::testkit`], so
//! the runner can be exercised end to end without any real formulation.

use contactlab_scenarios::{Scene, SceneEntry};
use contactlab_solvers::formulation::{Formulation, FormulationEntry};

/// Registry entries the harness looks names up in.
#[derive(Clone)]
pub struct Catalog {
    /// Formulations, in display order.
    pub formulations: Vec<&'static FormulationEntry>,
    /// Scenes, in display order.
    pub scenes: Vec<&'static SceneEntry>,
}

impl Catalog {
    /// The registries of `contactlab-solvers` and `contactlab-scenarios`.
    pub fn builtin() -> Self {
        Self {
            formulations: contactlab_solvers::formulation::FORMULATIONS
                .iter()
                .collect(),
            scenes: contactlab_scenarios::SCENES.iter().collect(),
        }
    }

    /// The built-in catalog plus the test fakes ([`crate::testkit`]).
    pub fn with_testkit() -> Self {
        let mut c = Self::builtin();
        c.formulations
            .push(&crate::testkit::FALLING_POINT_FORMULATION);
        c.scenes.push(&crate::testkit::FALLING_POINT_SCENE);
        c
    }

    /// The catalog the binary uses: built-in, plus the test fakes when the environment variable
    /// `CONTACTLAB_TESTKIT=1` is set (for the CLI's own tests).
    pub fn for_cli() -> Self {
        if std::env::var("CONTACTLAB_TESTKIT").is_ok_and(|v| v == "1") {
            Self::with_testkit()
        } else {
            Self::builtin()
        }
    }

    /// Look up a formulation.
    ///
    /// # Errors
    /// A message listing the valid names.
    pub fn formulation(&self, name: &str) -> Result<&'static FormulationEntry, String> {
        self.formulations
            .iter()
            .copied()
            .find(|e| e.name == name)
            .ok_or_else(|| {
                let valid: Vec<_> = self.formulations.iter().map(|e| e.name).collect();
                format!(
                    "unknown formulation '{name}'; valid names: {}",
                    valid.join(", ")
                )
            })
    }

    /// Look up a scene.
    ///
    /// # Errors
    /// A message listing the valid names.
    pub fn scene(&self, name: &str) -> Result<&'static SceneEntry, String> {
        self.scenes
            .iter()
            .copied()
            .find(|e| e.name == name)
            .ok_or_else(|| {
                let valid: Vec<_> = self.scenes.iter().map(|e| e.name).collect();
                let valid = if valid.is_empty() {
                    "(none registered yet)".to_string()
                } else {
                    valid.join(", ")
                };
                format!("unknown scene '{name}'; valid names: {valid}")
            })
    }

    /// Build a formulation from a JSON object of parameters.
    ///
    /// # Errors
    /// Unknown name or the registry's message about the parameters.
    pub fn build_formulation(
        &self,
        name: &str,
        params: &serde_json::Value,
    ) -> Result<Box<dyn Formulation>, String> {
        (self.formulation(name)?.build)(params).map_err(|e| e.to_string())
    }

    /// Build a scene from a JSON object of parameters.
    ///
    /// # Errors
    /// Unknown name, the registry's message about the parameters, or an invalid model.
    pub fn build_scene(&self, name: &str, params: &serde_json::Value) -> Result<Scene, String> {
        (self.scene(name)?.build)(params).map_err(|e| e.to_string())
    }
}
