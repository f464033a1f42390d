//! Named gradient cases ([`CASES`]): a scene with its parameters, a loss, the inputs, an
//! open-loop control schedule and, where the case needs one, a change of the start. The test
//! suite builds them with [`CaseEntry::problem`]; an experiment names them per scene
//! (`study.cases.<scene label>.case`), and the harness applies them to the cell's own scene
//! with [`CaseEntry::problem_on`], so tests and experiments share one definition.
//!
//! | case | scene | loss | inputs | what it exercises |
//! |---|---|---|---|---|
//! | `cartpole_free` | cartpole, cart at 0.2 m/s | 0.7 x − 1.3 θ + 0.4 ẋ + 0.25 θ̇ at N | q₀, v₀, ctrl[0], ctrl[mid] | smooth dynamics, motor controls |
//! | `cartpole_limit` | cartpole at 3 m/s (hits its ±1 m limit at step ~34 at 10 ms; for one step it starts at 0.99 m) | as above | as above | a joint-limit row switching on |
//! | `box_slide` | box_slide (2 m/s, μ 0.3) | x_N | v_x0, μ | sliding friction; MuJoCo's d x(1 s)/d v_x0 = 0.67530147 |
//! | `box_incline_sticking` | box_incline 20°, μ 0.4 | x + 0.5 z + 0.3 ẋ at N | v_x0, v_z0, x₀, μ | sticking friction (derivatives nearly 0) |
//! | `sphere_bounce` | sphere_bounce (μ 0) | x_N + z_N | x₀, z₀, v_x0, v_z0 (not μ: at μ = 0 it sits on the edge of its domain) | contact activating and releasing |
//! | `robot_servo_gain` | box_traversal, obstacle out of reach, wheels at 1.5 rad/s | chassis x_N | k_v of wheel 0, its ctrl[0], μ | implicit servo rows, a named gain |
//! | `robot_crossing` | box_traversal, the obstacle 0.25 m ahead of the front wheel | task loss | v_x0, ctrl[0][0], μ | wheels meeting the box |
//! | `cube_toss` | cube_toss (first recorded toss) | x_N + z_N | q₀ x, z, v₀ x, z, μ | a real toss: free flight then impact |
//!
//! The cartpole controls are `u_k = 0.3 sin(0.37 k)` N (every actuator); the robot's are the
//! constant wheel command; the others have no actuators.

use contactlab_solvers::State;
use nalgebra::DVector;
use serde_json::Value;

use super::{Input, Loss, Problem};
use crate::Scene;

/// A named case.
#[derive(Clone, Copy)]
pub struct CaseEntry {
    /// Registry name.
    pub name: &'static str,
    /// Scene registry name.
    pub scene: &'static str,
    /// The scene's parameters for [`CaseEntry::problem`] (JSON object text).
    pub scene_params: &'static str,
    /// Loss: an input to [`Loss::parse`], or `linear:<a...>|<b...>` weights on q_N and v_N.
    pub loss: &'static str,
    /// Input names ([`Input::parse`]).
    pub inputs: &'static [&'static str],
    /// Per-step controls `u(k, h, nu)`; `None`: the scene's own control law.
    pub controls: Option<fn(usize, f64, usize) -> Vec<f64>>,
    /// A change of the start for a horizon of N steps; `None`: the scene's.
    pub start: Option<fn(&mut State, usize)>,
    /// Timestep for [`CaseEntry::problem`] when none is given (s).
    pub h: f64,
}

fn sinusoid(k: usize, _h: f64, nu: usize) -> Vec<f64> {
    vec![0.3 * (k as f64 * 0.37).sin(); nu]
}

fn wheels(_k: usize, _h: f64, nu: usize) -> Vec<f64> {
    vec![1.5; nu]
}

fn near_limit(s: &mut State, steps: usize) {
    if steps == 1 {
        s.q[0] = 0.99;
    }
}

const CARTPOLE_INPUTS: &[&str] = &[
    "qpos[0]",
    "qpos[1]",
    "qvel[0]",
    "qvel[1]",
    "ctrl[0][0]",
    "ctrl[mid][0]",
];

/// Every named case (module doc).
pub const CASES: &[CaseEntry] = &[
    CaseEntry {
        name: "cartpole_free",
        scene: "cartpole",
        scene_params: r#"{"cart_velocity": 0.2}"#,
        loss: "linear:0.7,-1.3|0.4,0.25",
        inputs: CARTPOLE_INPUTS,
        controls: Some(sinusoid),
        start: None,
        h: 0.01,
    },
    CaseEntry {
        name: "cartpole_limit",
        scene: "cartpole",
        scene_params: "{}",
        loss: "linear:0.7,-1.3|0.4,0.25",
        inputs: CARTPOLE_INPUTS,
        controls: Some(sinusoid),
        start: Some(near_limit),
        h: 0.01,
    },
    CaseEntry {
        name: "box_slide",
        scene: "box_slide",
        scene_params: "{}",
        loss: "qpos[0]",
        inputs: &["qvel[0]", "friction"],
        controls: None,
        start: None,
        h: 0.002,
    },
    CaseEntry {
        name: "box_incline_sticking",
        scene: "box_incline",
        scene_params: r#"{"friction": 0.4, "angle_deg": 20.0}"#,
        loss: "linear:1,0,0.5,0,0,0,0|0.3,0,0,0,0,0",
        inputs: &["qvel[0]", "qvel[2]", "qpos[0]", "friction"],
        controls: None,
        start: None,
        h: 0.01,
    },
    CaseEntry {
        name: "sphere_bounce",
        scene: "sphere_bounce",
        scene_params: "{}",
        loss: "linear:1,0,1,0,0,0,0|0,0,0,0,0,0",
        inputs: &["qpos[0]", "qpos[2]", "qvel[0]", "qvel[2]"],
        controls: None,
        start: None,
        h: 0.002,
    },
    CaseEntry {
        name: "robot_servo_gain",
        scene: "box_traversal",
        scene_params: r#"{"obstacle_x": 50.0}"#,
        loss: "qpos[0]",
        inputs: &["kv:0", "ctrl[0][0]", "friction"],
        controls: Some(wheels),
        start: None,
        h: 0.005,
    },
    CaseEntry {
        name: "robot_crossing",
        scene: "box_traversal",
        scene_params: r#"{"obstacle_x": 1.0}"#,
        loss: "task",
        inputs: &["qvel[0]", "ctrl[0][0]", "friction"],
        controls: Some(wheels),
        start: None,
        h: 0.005,
    },
    CaseEntry {
        name: "cube_toss",
        scene: "cube_toss",
        scene_params: "{}",
        loss: "linear:1,0,1,0,0,0,0|0,0,0,0,0,0",
        inputs: &["qpos[0]", "qpos[2]", "qvel[0]", "qvel[2]", "friction"],
        controls: None,
        start: None,
        h: 1.0 / 148.0,
    },
];

/// Look up a case.
///
/// # Errors
/// An unknown name, listing the valid ones.
pub fn find(name: &str) -> Result<&'static CaseEntry, String> {
    CASES.iter().find(|c| c.name == name).ok_or_else(|| {
        let valid: Vec<_> = CASES.iter().map(|c| c.name).collect();
        format!(
            "unknown gradient case '{name}'; valid: {}",
            valid.join(", ")
        )
    })
}

/// Parse a loss for `scene`: [`Loss::parse`]'s forms, or `linear:<a>|<b>` with comma-separated
/// weights on q_N (nq of them) and v_N (nv).
///
/// # Errors
/// [`Loss::parse`]'s, or weights of the wrong count or not numbers.
pub fn parse_loss(scene: &Scene, text: &str) -> Result<Loss, String> {
    let Some(w) = text.strip_prefix("linear:") else {
        return Loss::parse(scene, text);
    };
    let (nq, nv) = (scene.model.nq, scene.model.nv);
    let (a, b) = w
        .split_once('|')
        .ok_or_else(|| format!("loss '{text}': write linear:<nq weights>|<nv weights>"))?;
    let nums = |s: &str, n: usize, what: &str| -> Result<DVector<f64>, String> {
        let v: Vec<f64> = s
            .split(',')
            .map(|x| {
                x.trim()
                    .parse::<f64>()
                    .map_err(|_| format!("loss '{text}': '{x}' is not a number"))
            })
            .collect::<Result<_, _>>()?;
        if v.len() != n {
            return Err(format!(
                "loss '{text}': {} weights on {what}, the scene has {n}",
                v.len()
            ));
        }
        Ok(DVector::from_vec(v))
    };
    Ok(Loss::linear(
        text,
        nums(a, nq, "qpos")?,
        nums(b, nv, "qvel")?,
    ))
}

impl CaseEntry {
    /// The case on its own scene (with [`CaseEntry::scene_params`]) for `steps` steps of `h`
    /// (s; `None`: the case's).
    ///
    /// # Errors
    /// The scene does not build (for `cube_toss`: its data folder is missing), or the case's
    /// loss or inputs do not fit it.
    pub fn problem(&self, steps: usize, h: Option<f64>) -> Result<Problem, String> {
        let params: Value = serde_json::from_str(self.scene_params).map_err(|e| e.to_string())?;
        let scene = crate::build(self.scene, &params).map_err(|e| e.to_string())?;
        self.problem_on(&scene, steps, h.unwrap_or(self.h))
    }

    /// The case applied to `scene` (the experiment's, with its own parameters).
    ///
    /// # Errors
    /// The case's loss or inputs do not fit the scene.
    pub fn problem_on(&self, scene: &Scene, steps: usize, h: f64) -> Result<Problem, String> {
        let loss = parse_loss(scene, self.loss)?;
        let inputs = self
            .inputs
            .iter()
            .map(|i| Input::parse(&scene.model, i, steps))
            .collect::<Result<Vec<_>, _>>()?;
        let mut p = Problem::from_scene(
            format!("{} {steps} steps h = {h} s", self.name),
            scene,
            steps,
            h,
            loss,
            inputs,
        );
        let nu = scene.model.actuators.len();
        if let Some(u) = self.controls {
            p.controls = (0..steps).map(|k| u(k, h, nu)).collect();
        }
        if let Some(start) = self.start {
            start(&mut p.initial, steps);
        }
        Ok(p)
    }
}

/// `ncp_fb` parameters with tight forward solves (60 Newton iterations per solve, residual
/// tolerance 1e-14 m/s, no NCP test), so that finite differences resolve the step map: the
/// setting of the adjoint's accuracy tests and of `configs/gradient_accuracy.yaml`.
pub const TIGHT_NCP_FB: &str =
    r#"{"newton_iterations": 60, "tolerance": 1e-14, "ncp_tolerance": 0.0}"#;

/// The cases of the `ncp_fb` adjoint tests at one and 50 steps (issue "ncp_fb"): cartpole free
/// and at its limit, box_slide at 2 and 10 ms, box_incline sticking.
///
/// # Panics
/// If a registered case does not build (a bug).
pub fn issue_cases() -> Vec<Problem> {
    let mut out = Vec::new();
    for steps in [1, 50] {
        for (name, h) in [
            ("cartpole_free", None),
            ("cartpole_limit", None),
            ("box_slide", Some(0.002)),
            ("box_slide", Some(0.01)),
            ("box_incline_sticking", None),
        ] {
            out.push(
                find(name)
                    .and_then(|c| c.problem(steps, h))
                    .expect("registered cases build"),
            );
        }
    }
    out
}
