//! The engine seam (DESIGN.md, "The engine seam"): a [`Stepper`] advances many worlds of one
//! model, and the registry [`ENGINES`] says where a formulation can execute.
//!
//! A formulation is *what* is computed (its parameters are engine-neutral, parsed once by its
//! registry entry); an engine is *where* it runs:
//!
//! * `cpu` ([`CpuStepper`]): the f64 reference, one single-world [`Formulation`] per world,
//!   stepped in parallel with rayon. With one world it is exactly today's single-world step.
//! * `burn-ndarray`, `burn-wgpu`, `burn-cuda` ([`crate::batched`], behind the cargo features
//!   `burn`, `wgpu`, `cuda`): many worlds as tensors, one stepper per formulation, generic over
//!   the burn backend. They cover the scene class that batches well; [`batched_support`] names
//!   the element of a model or the formulation they lack, which the harness records as a
//!   `skipped` row.
//!
//! Controls are passed as one row-major `(worlds × nu)` slice; states move to and from the host
//! in f64 ([`Stepper::read_states`], [`Stepper::write_states`]).

use rayon::prelude::*;

use crate::features::IgnoredFeature;
use crate::formulation::{Formulation, StepReport};
use crate::model::{Model, State};

/// Many worlds of one model, stepped together.
pub trait Stepper: Send {
    /// The engine's registry name (`"cpu"`, `"burn-ndarray"`, ...).
    fn engine(&self) -> &'static str;

    /// Number of worlds in the batch.
    fn worlds(&self) -> usize;

    /// Advance every world by one step of length `h` (s) under `controls`, row-major
    /// `(worlds × nu)` (one row per world, one control per actuator). Returns one report per
    /// world (solver stats, divergence); contact records only when `want_contacts`.
    ///
    /// # Panics
    /// If `controls.len() != worlds · nu` (a programmer error).
    fn step(&mut self, controls: &[f64], h: f64, want_contacts: bool) -> Vec<StepReport>;

    /// The states of all worlds, in f64 on the host (a device readback on GPU engines).
    fn read_states(&self) -> Vec<State>;

    /// The state of world `w` (the default reads every world back).
    fn read_state(&self, w: usize) -> State {
        self.read_states().swap_remove(w)
    }

    /// Overwrite the states of all worlds (`states.len() == worlds`). Solver warm starts, where
    /// a formulation keeps them, are kept.
    fn write_states(&mut self, states: &[State]);

    /// The model features this stepper steps the model without (as
    /// [`Formulation::ignored_features`]).
    fn ignored_features(&self) -> Vec<IgnoredFeature>;
}

/// The cpu engine: one single-world formulation per world, stepped in parallel with rayon (on
/// the caller's pool).
pub struct CpuStepper {
    model: Model,
    formulations: Vec<Box<dyn Formulation>>,
    states: Vec<State>,
}

impl CpuStepper {
    /// `worlds` copies of `initial` on `model`, each with its own formulation built by
    /// `build` (so hidden per-world state such as warm starts stays per world).
    ///
    /// # Errors
    /// What `build` returns.
    pub fn new<E>(
        model: &Model,
        initial: &State,
        worlds: usize,
        build: impl Fn() -> Result<Box<dyn Formulation>, E>,
    ) -> Result<Self, E> {
        let formulations = (0..worlds.max(1))
            .map(|_| build())
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            model: model.clone(),
            states: vec![initial.clone(); formulations.len()],
            formulations,
        })
    }
}

impl Stepper for CpuStepper {
    fn engine(&self) -> &'static str {
        "cpu"
    }

    fn worlds(&self) -> usize {
        self.states.len()
    }

    fn step(&mut self, controls: &[f64], h: f64, want_contacts: bool) -> Vec<StepReport> {
        let nu = self.model.actuators.len();
        assert_eq!(
            controls.len(),
            nu * self.states.len(),
            "controls must be (worlds x nu)"
        );
        let model = &self.model;
        let run = |((f, s), u): ((&mut Box<dyn Formulation>, &mut State), &[f64])| {
            let mut r = f.step(model, s, u, h);
            if !want_contacts {
                r.contacts = Vec::new();
            }
            r
        };
        if self.states.len() == 1 {
            // One world: no pool hop, exactly the single-world step.
            let u = &controls[..nu];
            return vec![run(((&mut self.formulations[0], &mut self.states[0]), u))];
        }
        let chunk = nu.max(1);
        let rows: Vec<&[f64]> = if nu == 0 {
            vec![&[][..]; self.states.len()]
        } else {
            controls.chunks(chunk).collect()
        };
        self.formulations
            .par_iter_mut()
            .zip(self.states.par_iter_mut())
            .zip(rows.into_par_iter())
            .map(run)
            .collect()
    }

    fn read_states(&self) -> Vec<State> {
        self.states.clone()
    }

    fn read_state(&self, w: usize) -> State {
        self.states[w].clone()
    }

    fn write_states(&mut self, states: &[State]) {
        assert_eq!(states.len(), self.states.len(), "one state per world");
        self.states.clone_from_slice(states);
    }

    fn ignored_features(&self) -> Vec<IgnoredFeature> {
        self.formulations[0].ignored_features(&self.model)
    }
}

/// A registered engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineEntry {
    /// Registry name, as written in experiments (`engine: burn-ndarray`) and `simulate`.
    pub name: &'static str,
    /// One line: where it runs and in what precision.
    pub description: &'static str,
    /// The cargo feature of `contactlab-solvers` (and of the harness) that builds it; `None`
    /// for the always-built cpu engine.
    pub feature: Option<&'static str>,
    /// Whether this build includes it.
    pub built: bool,
}

/// Every engine contactlab knows, in display order.
pub const ENGINES: &[EngineEntry] = &[
    EngineEntry {
        name: "cpu",
        description: "f64 reference, one world per task, rayon across worlds",
        feature: None,
        built: true,
    },
    EngineEntry {
        name: "burn-ndarray",
        description:
            "batched tensors on burn's ndarray CPU backend, f64, reverse mode by burn-autodiff",
        feature: Some("burn"),
        built: cfg!(feature = "burn"),
    },
    EngineEntry {
        name: "burn-wgpu",
        description:
            "batched tensors on burn's wgpu backend (Vulkan/Metal; lavapipe on a CPU), f32",
        feature: Some("wgpu"),
        built: cfg!(feature = "wgpu"),
    },
    EngineEntry {
        name: "burn-cuda",
        description: "batched tensors on burn's CUDA backend, f32 (needs libcuda and NVRTC)",
        feature: Some("cuda"),
        built: cfg!(feature = "cuda"),
    },
];

/// Why an engine cannot run a cell. [`EngineError::Unknown`] is bad input; the others are
/// recorded as `skipped` rows that name what is missing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    /// No engine of this name.
    #[error("unknown engine '{name}'; valid names: {valid}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The registered names, comma separated.
        valid: String,
    },
    /// The engine exists but this build lacks its cargo feature.
    #[error("engine '{engine}' is not in this build (rebuild with `--features {feature}`)")]
    NotBuilt {
        /// The engine.
        engine: &'static str,
        /// The feature that builds it.
        feature: &'static str,
    },
    /// The engine cannot run this formulation or model; `element` names what it lacks.
    #[error("engine '{engine}' cannot run this cell: {element}")]
    Unsupported {
        /// The engine.
        engine: &'static str,
        /// The formulation, model element or option it lacks (e.g. "geom 'rock' (mesh)").
        element: String,
    },
}

/// Look up an engine by name.
///
/// # Errors
/// [`EngineError::Unknown`] listing the valid names.
pub fn find(name: &str) -> Result<&'static EngineEntry, EngineError> {
    ENGINES
        .iter()
        .find(|e| e.name == name)
        .ok_or_else(|| EngineError::Unknown {
            name: name.to_string(),
            valid: ENGINES
                .iter()
                .map(|e| e.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Whether engine `name` can run `formulation` on `model`: `Ok` for the cpu engine always;
/// for the batched engines, [`EngineError::Unsupported`] naming the first element they lack
/// ([`batched_support`]), then [`EngineError::NotBuilt`] without their feature.
///
/// # Errors
/// As above; [`EngineError::Unknown`] for a name not in [`ENGINES`].
pub fn check(name: &str, formulation: &str, model: &Model) -> Result<(), EngineError> {
    let e = find(name)?;
    if e.name == "cpu" {
        return Ok(());
    }
    // What the engine lacks in any build comes first: it is the more useful reason.
    batched_support(formulation, model).map_err(|element| EngineError::Unsupported {
        engine: e.name,
        element,
    })?;
    if !e.built {
        return Err(e.not_built());
    }
    Ok(())
}

impl EngineEntry {
    /// The error for this engine in a build without its feature.
    pub fn not_built(&self) -> EngineError {
        EngineError::NotBuilt {
            engine: self.name,
            feature: self.feature.unwrap_or(""),
        }
    }
}

/// The scene class the batched engines run (issues 15 to 17): the `penalty`, `soft_convex`,
/// `signorini` and `ncp_fb` formulations on fixed-topology models of free bodies and hinge/slide chains
/// whose colliding pairs are a plane against a sphere, capsule, box or line-contact cylinder
/// (the wheeled robot's wheels, [`crate::model::Geom::line_contact_as_point`]), a sphere
/// against a box, a wheel against a box, or a static height field (on the world body) against
/// a wheel (issue 17, `batched::height_field`), without equality constraints. Box–box,
/// wheel–wheel and height field–box pairs (the robot's chassis and an obstacle or the
/// terrain) are admitted without a collision rule: a world where they come within reach ends
/// with that reason (`batched::collision::Outside`; for ncp_fb, whose speculative detection
/// distance grows with speed, where the cpu engine's rules give the pair a contact row in that
/// world), as does one where a wheel leaves the closed forms.
/// `Err` names the first
/// formulation, joint, geom, pair or constraint outside it. Always compiled, so that a build
/// without the burn features explains the same cells the same way.
///
/// # Errors
/// A sentence naming the element (e.g. "geom 'terrain' (mesh): the batched engine collides
/// planes with spheres, capsules and boxes").
pub fn batched_support(formulation: &str, model: &Model) -> Result<(), String> {
    use crate::geometry::GeomShape;
    use crate::model::JointKind;
    if !matches!(
        formulation,
        "penalty" | "soft_convex" | "signorini" | "ncp_fb"
    ) {
        return Err(format!(
            "formulation '{formulation}' is not batched (penalty, soft_convex, signorini and ncp_fb are)"
        ));
    }
    for j in &model.joints {
        if j.kind == JointKind::Ball {
            return Err(format!(
                "joint '{}' (ball): the batched engine steps free, hinge and slide joints",
                j.name
            ));
        }
    }
    if model.options.noslip_iterations > 0 {
        return Err(format!(
            "noslip_iterations = {}: the batched engine has no no-slip post-solver",
            model.options.noslip_iterations
        ));
    }
    if let Some(e) = model.equalities.first() {
        return Err(format!(
            "equality '{}': the batched engine has no equality constraints",
            e.name()
        ));
    }
    if !model.pairs.is_empty() || !model.excludes.is_empty() {
        return Err(
            "explicit contact pairs or excludes: the batched engine uses the default filters only"
                .into(),
        );
    }
    for (g0, g1) in crate::collision::broad_phase::filtered_pairs(model) {
        let (a, b) = (&model.geoms[g0], &model.geoms[g1]);
        let wheel = |g: &crate::model::Geom| {
            matches!(g.shape, GeomShape::Cylinder { .. }) && g.line_contact_as_point
        };
        let ok = (matches!(a.shape, GeomShape::Plane)
            && (matches!(
                b.shape,
                GeomShape::Sphere { .. } | GeomShape::Capsule { .. } | GeomShape::Box { .. }
            ) || wheel(b)))
            || (matches!(a.shape, GeomShape::Sphere { .. })
                && matches!(b.shape, GeomShape::Box { .. }))
            || (wheel(a) && matches!(b.shape, GeomShape::Box { .. }))
            // A static height field against a wheel (`batched::height_field`); against a box
            // admitted without a rule, as box–box below.
            || (matches!(a.shape, GeomShape::HeightField { .. })
                && a.body == 0
                && (wheel(b) || matches!(b.shape, GeomShape::Box { .. })))
            // Admitted without a collision rule: the worlds where they come within reach end
            // with the reason (`batched::collision::Outside`).
            || (matches!(a.shape, GeomShape::Box { .. }) && matches!(b.shape, GeomShape::Box { .. }))
            || (wheel(a) && wheel(b));
        if !ok && matches!(a.shape, GeomShape::HeightField { .. }) && a.body != 0 {
            return Err(format!(
                "height field '{}' is on a moving body: the batched engine collides static height fields only",
                a.name
            ));
        }
        if !ok {
            let bad = if matches!(a.shape, GeomShape::Plane | GeomShape::HeightField { .. }) {
                b
            } else {
                a
            };
            return Err(format!(
                "geom '{}' ({}) colliding with geom '{}' ({}): the batched engine collides planes with spheres, capsules, boxes and line-contact cylinders (wheels), spheres with boxes, wheels with boxes, and static height fields with wheels",
                bad.name,
                shape_name(&bad.shape),
                if std::ptr::eq(bad, a) { &b.name } else { &a.name },
                shape_name(if std::ptr::eq(bad, a) { &b.shape } else { &a.shape }),
            ));
        }
    }
    Ok(())
}

/// MuJoCo's name of a geom type.
pub fn shape_name(s: &crate::geometry::GeomShape) -> &'static str {
    use crate::geometry::GeomShape as G;
    match s {
        G::Plane => "plane",
        G::Sphere { .. } => "sphere",
        G::Capsule { .. } => "capsule",
        G::Box { .. } => "box",
        G::Cylinder { .. } => "cylinder",
        G::Ellipsoid { .. } => "ellipsoid",
        G::ConvexMesh { .. } | G::TriangleMesh { .. } => "mesh",
        G::HeightField { .. } => "hfield",
    }
}

/// A batched stepper for engine `name` (not `cpu`): `worlds` copies of `initial` on `model`
/// stepping formulation `formulation` with parameters `params` (a JSON object, parsed by the
/// formulation's own schema).
///
/// # Errors
/// [`EngineError::NotBuilt`] without the engine's feature, [`EngineError::Unsupported`] for a
/// cell outside the batched class ([`batched_support`]) or bad parameters (the message names
/// the key).
pub fn batched_stepper(
    name: &str,
    formulation: &str,
    params: &serde_json::Value,
    model: &Model,
    initial: &State,
    worlds: usize,
) -> Result<Box<dyn Stepper>, EngineError> {
    check(name, formulation, model)?;
    #[cfg(feature = "burn")]
    {
        crate::batched::stepper(name, formulation, params, model, initial, worlds)
    }
    #[cfg(not(feature = "burn"))]
    {
        let _ = (params, initial, worlds);
        unreachable!("check() refuses the batched engines in a build without `burn`")
    }
}

/// Shards the stepper of engine `name` splits `worlds` into, run in parallel on the caller's
/// rayon pool: burn-ndarray one per worker ([`crate::batched::cpu_shards`]), a GPU engine one
/// program (1), the cpu engine none (0: each world is its own task).
pub fn shards(name: &str, worlds: usize) -> usize {
    match name {
        "cpu" => 0,
        #[cfg(feature = "burn")]
        "burn-ndarray" => crate::batched::cpu_shards(worlds),
        _ => {
            let _ = worlds;
            1
        }
    }
}

/// Memory of a GPU device as its CubeCL client counts it (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceMemory {
    /// Bytes in live allocations (without padding).
    pub in_use: u64,
    /// Bytes reserved from the device (pools included).
    pub reserved: u64,
}

/// The memory usage of engine `name`'s default device after its queued work: `Some` for
/// `burn-wgpu` and `burn-cuda` in builds with their features, `None` otherwise (the CPU
/// backends' memory is the process heap, which the harness counts itself).
pub fn device_memory(name: &str) -> Option<DeviceMemory> {
    #[cfg(feature = "burn")]
    {
        crate::batched::device_memory(name)
    }
    #[cfg(not(feature = "burn"))]
    {
        let _ = name;
        None
    }
}

/// What one forward-plus-backward pass of a batched engine gave
/// ([`crate::batched::reverse`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ReversePass {
    /// The loss summed over worlds (f64, reduced on the host).
    pub loss: f64,
    /// `∂L/∂v₀` of every world, row-major `(worlds × nv)` (f64).
    pub grad_v0: Vec<f64>,
    /// Wall time of the forward pass, recording the tape (s).
    pub forward_s: f64,
    /// Wall time of the backward pass and the gradients' readback (s).
    pub backward_s: f64,
    /// On a GPU backend, device bytes in use after the forward pass above those before it
    /// (the tape of plain reverse mode); `None` on ndarray.
    pub device_tape_bytes: Option<u64>,
    /// Shards the worlds were split into.
    pub shards: usize,
    /// ncp_fb (its adjoint): forward steps that ended unconverged or failed, backward steps
    /// whose Newton matrix had no pseudo-inverse, and worlds that left the batched scene class,
    /// summed over the worlds: through them the gradient is not a derivative ([`crate::batched::ncp::adjoint`]). `None` for the
    /// formulations differentiated through their solver iterations (the gradient of the map
    /// computed, converged or not).
    pub unconverged_steps: Option<usize>,
}

/// The loss weights `w_i = 1 + 0.37 i − 0.05 i²` of the state coordinates `[q; v]` (`n` of
/// them) of the reverse passes: fixed, unequal, of both signs, so that no coordinate's
/// derivative cancels.
pub fn loss_weights(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| 1.0 + 0.37 * i as f64 - 0.05 * (i * i) as f64)
        .collect()
}

/// One forward-plus-backward pass of batched `formulation` (parameters `params`, JSON) on
/// engine `name` over `controls.len()` steps of `h` (s) from `initial` (one state per world),
/// the loss `Σ_worlds w · [q_N; v_N]` ([`loss_weights`]) differentiated with respect to the
/// initial velocities; `between` runs after the forward pass and before the backward one
/// ([`crate::batched::reverse::reverse_pass`]; ncp_fb's backward is its batched adjoint,
/// [`crate::batched::ncp::adjoint`]). `iteration_budget`: the soft solvers run exactly that
/// many iterations per step, ncp_fb at most that many Newton iterations per solve
/// ([`crate::batched::reverse::Program::new`]).
///
/// # Errors
/// The cpu engine ([`EngineError::Unsupported`]: no reverse mode through burn), an engine this
/// build lacks ([`EngineError::NotBuilt`]), an unknown name, bad or unbatched parameters.
#[allow(clippy::too_many_arguments)]
pub fn reverse_pass(
    name: &str,
    formulation: &str,
    params: &serde_json::Value,
    iteration_budget: Option<usize>,
    model: &Model,
    initial: &[State],
    controls: &[Vec<f64>],
    h: f64,
    between: &mut dyn FnMut(),
) -> Result<ReversePass, EngineError> {
    #[cfg(feature = "burn")]
    {
        if find(name)?.name == "cpu" {
            return Err(EngineError::Unsupported {
                engine: "cpu",
                element: "the cpu engine has no reverse mode through burn".into(),
            });
        }
        let program =
            crate::batched::reverse::Program::new(formulation, params, model, iteration_budget)?;
        crate::batched::reverse::reverse_pass(name, &program, model, initial, controls, h, between)
    }
    #[cfg(not(feature = "burn"))]
    {
        let _ = (
            formulation,
            params,
            iteration_budget,
            model,
            initial,
            controls,
            h,
            between,
        );
        let e = find(name)?;
        Err(if e.name == "cpu" {
            EngineError::Unsupported {
                engine: "cpu",
                element: "the cpu engine has no reverse mode through burn".into(),
            }
        } else {
            e.not_built()
        })
    }
}
