//! `grasp`: a parallel-jaw gripper closes on a box resting on a table, lifts it 0.2 m and
//! holds it.
//!
//! **Model** (world z up, the table top is the plane z = 0). The object is a free box (full
//! sizes `object_size`, mass `object_mass`) resting on the table at the origin. The gripper is
//! a lift body (1 kg) on a vertical slide through the object's centre, driven by a velocity
//! servo (kv [`LIFT_KV`], commands clamped to ±`lift_speed`) and carried by a soft, long
//! gravity-compensation spring on the slide (stiffness [`GRAVCOMP_STIFFNESS`], rest length
//! chosen so that it pushes with the weight of lift, fingers and object at z = 0 and 86 % of it
//! at the lift height, as MuJoCo's `gravcomp` would; without it the velocity servo would lag
//! its command by m g / kv); two fingers (0.1 kg boxes, 4 × 2 × 8 cm, height scaled
//! to 80 % of the object's) hang from it on slides along y, each driven by a position servo.
//! Finger coordinates measure closing travel (m) from contact: at q = 0 a finger's inner face
//! touches the object; they start open at q = −[`OPEN_GAP`].
//!
//! **Grip force.** A finger servo's stiffness is kp = `grip_force` / [`GRIP_DEPTH`] (damping
//! ratio 1 with the finger's mass), and the control law commands q = +GRIP_DEPTH once closed,
//! so each finger squeezes the object with `grip_force` (N) at rest. This keeps the control
//! law, a plain function, independent of the parameters.
//!
//! **Coordinates.** `q = [lift z (m), left finger, right finger, object x y z (m), object
//! quaternion w x y z]`; `v = [lift, left, right, object linear (world, m/s), object angular
//! (body frame, rad/s)]`.
//!
//! **Phases** (control law [`grasp_controls`]): close 0–[`T_CLOSE`] s (finger commands ramp
//! from open to +GRIP_DEPTH over the first 0.3 s); lift from [`T_CLOSE`] s: the lift's
//! velocity command is [`LIFT_GAIN`] × ([`LIFT_HEIGHT`] − lift z), which the actuator's control
//! clamp caps at `lift_speed`, so the gripper rises at `lift_speed` and settles at
//! LIFT_HEIGHT (a plain-function control law cannot read parameters; the clamp carries
//! `lift_speed` to it); hold from `T_CLOSE + LIFT_HEIGHT / lift_speed` (1.5 s by default) to
//! the horizon (default: one second of hold, 2.5 s).
//!
//! **Measures** ([`GraspMonitor`]): slip of the object relative to the fingers during lift and
//! hold, held or dropped at the end, peak penetration, finger normal forces.
//!
//! **Penalty materials.** ke = 1e5 N/m, kd = 20 N s/m, kf = 100 N s/m. The lightest body in
//! contact is a 0.1 kg finger with up to four contact points: `h sqrt(Σ ke / m)` = 1.0 at
//! h = 0.5 ms (< 2) and `h Σ kd / m` = 0.4. Friction holds the 0.3 kg object through eight
//! finger contacts, 0.5 ms × 8 × 100 / 0.3 = 1.3 (< 2); viscous friction of 800 N s/m in all
//! lets the held object creep at m g / 800 ≈ 4 mm/s (spec ncp_fb §4.5 for the limits).

use contactlab_solvers::formulation::{ParamDoc, StepReport};
use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::model::{
    Actuator, ActuatorKind, Body, Geom, Joint, JointKind, Model, ModelParts, Vec3,
};
use contactlab_solvers::State;
use nalgebra::DVector;
use serde::{Deserialize, Serialize};

use super::{box_inertia, material, model, non_negative, positive};
use crate::{parse_params, Scene, SceneEntry};

/// Each finger's opening at t = 0 (m), measured from contact with the object.
pub const OPEN_GAP: f64 = 0.02;
/// Finger command once closed (m past contact): kp × GRIP_DEPTH is the grip force.
pub const GRIP_DEPTH: f64 = 0.01;
/// End of the close phase (s); the finger commands ramp over its first 0.3 s.
pub const T_CLOSE: f64 = 0.5;
/// Gain of the lift's height feedback (1/s): velocity command per metre below LIFT_HEIGHT.
///
/// The control is computed from the state at the start of a step, so through the velocity
/// servo it is an explicit position spring of stiffness k = LIFT_KV × LIFT_GAIN on the lift
/// (mass m ≈ 1.2 kg with the fingers), whatever the integrator: the servo's own damping
/// c = LIFT_KV is implicit under `implicitfast`, the spring is not. Semi-implicit Euler with
/// implicit damping, v⁺ = (v − h (k/m) x) / (1 + h c/m), x⁺ = x + h v⁺, is stable while
/// h² k/m < 4 + 2 h c/m (derived here: the Jury condition 1 + tr A + det A > 0 on the step's
/// 2×2 amplification matrix A, whose det = 1/(1 + h c/m) < 1). The earlier gain, 200 /s
/// (k = 80 kN/m), put that bound at h = 14.2 ms (measured: the lift's period-2 oscillation
/// decays at 13.5 ms and grows at 14.5 ms under signorini; soft_convex steps the free lift
/// identically), which capped every formulation on this scene (issue 18). At 20 /s
/// (k = 8 kN/m) the bound is about 0.1 s, and the lift follows its height command with a 50 ms
/// time constant and holds it to a fraction of a millimetre.
pub const LIFT_GAIN: f64 = 20.0;
/// Velocity-servo gain of the lift (N s/m).
pub const LIFT_KV: f64 = 400.0;
/// Stiffness of the lift's gravity-compensation spring (N/m) (module documentation).
pub const GRAVCOMP_STIFFNESS: f64 = 10.0;
/// Lift height (m).
pub const LIFT_HEIGHT: f64 = 0.2;
/// Finger mass (kg).
pub const FINGER_MASS: f64 = 0.1;
/// Lift body mass (kg).
pub const LIFT_MASS: f64 = 1.0;

/// Parameters of `grasp`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GraspParams {
    /// Object full sizes x, y, z (m); the fingers close along y.
    pub object_size: [f64; 3],
    /// Object mass (kg).
    pub object_mass: f64,
    /// Sliding friction of every geom (-).
    pub friction: f64,
    /// Squeeze of each finger on the object at rest (N).
    pub grip_force: f64,
    /// Lift speed (m/s).
    pub lift_speed: f64,
    /// Simulated duration (s); `None`: one second after the lift ends.
    pub horizon: Option<f64>,
    /// Penalty contact stiffness (N/m).
    pub ke: f64,
    /// Penalty contact damping (N s/m).
    pub kd: f64,
    /// Penalty viscous friction (N s/m).
    pub kf: f64,
}

impl Default for GraspParams {
    fn default() -> Self {
        Self {
            object_size: [0.06, 0.06, 0.10],
            object_mass: 0.3,
            friction: 0.8,
            grip_force: 10.0,
            lift_speed: 0.2,
            horizon: None,
            ke: 1e5,
            kd: 20.0,
            kf: 100.0,
        }
    }
}

/// The grasp control law: `[lift velocity command (m/s), left finger target, right finger target (m)]`
/// by phase (module documentation).
pub fn grasp_controls(t: f64, s: &State) -> Vec<f64> {
    let close = (t / 0.3).clamp(0.0, 1.0);
    let finger = -OPEN_GAP + close * (OPEN_GAP + GRIP_DEPTH);
    let height = if t < T_CLOSE { 0.0 } else { LIFT_HEIGHT };
    vec![LIFT_GAIN * (height - s.q[0]), finger, finger]
}

impl GraspParams {
    /// End of the lift phase (s): `T_CLOSE + LIFT_HEIGHT / lift_speed`.
    pub fn lift_end(&self) -> f64 {
        T_CLOSE + LIFT_HEIGHT / self.lift_speed
    }
}

/// What a grasp run measured ([`GraspMonitor::summary`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GraspSummary {
    /// Largest |change| of the object's height relative to the lift (and so the fingers)
    /// between the start of the lift phase and the end (m).
    pub slip_m: f64,
    /// Object's height relative to the lift at the end minus at lift start (m); negative
    /// when it slid down.
    pub final_slip_m: f64,
    /// Whether the object ends held: its centre at least `LIFT_HEIGHT / 2` above its start.
    pub held: bool,
    /// Object centre height rise from t = 0 to the end (m).
    pub rise_m: f64,
    /// Deepest penetration of any contact over the run (m, ≥ 0).
    pub peak_penetration_m: f64,
    /// Mean normal force of the left and right finger on the object over the hold phase (N).
    pub finger_force_n: [f64; 2],
}

/// Observes a `grasp` run step by step and summarizes it.
#[derive(Debug, Clone)]
pub struct GraspMonitor {
    fingers: [usize; 2],
    object: usize,
    z0: f64,
    rel_at_lift: Option<f64>,
    rel: f64,
    slip: f64,
    z: f64,
    peak_penetration: f64,
    force_sum: [f64; 2],
    hold_steps: usize,
    hold_start: f64,
}

/// Object height relative to the lift (m): object z minus lift coordinate.
fn relative_height(s: &State) -> f64 {
    s.q[5] - s.q[0]
}

impl GraspMonitor {
    /// A monitor for a `grasp` model and its initial state; the hold phase starts when the lift
    /// ends at the model's lift speed (the lift actuator's control clamp).
    ///
    /// # Panics
    /// If the model is not a `grasp` scene's.
    pub fn new(model: &Model, initial: &State) -> Self {
        let id = |n: &str| {
            model
                .geom_id(n)
                .unwrap_or_else(|| panic!("not a grasp model: no geom {n}"))
        };
        Self {
            fingers: [id("finger_left_geom"), id("finger_right_geom")],
            object: id("object_geom"),
            z0: initial.q[5],
            rel_at_lift: None,
            rel: relative_height(initial),
            slip: 0.0,
            z: initial.q[5],
            peak_penetration: 0.0,
            force_sum: [0.0; 2],
            hold_steps: 0,
            hold_start: T_CLOSE
                + LIFT_HEIGHT
                    / model.actuators[0]
                        .ctrl_range
                        .expect("grasp's lift has a control clamp")
                        .1,
        }
    }

    /// Record the state after a step of length `h` (s) and that step's report.
    pub fn observe(&mut self, s: &State, report: &StepReport, h: f64) {
        self.rel = relative_height(s);
        self.z = s.q[5];
        if s.t >= T_CLOSE {
            let r0 = *self.rel_at_lift.get_or_insert(self.rel);
            self.slip = self.slip.max((self.rel - r0).abs());
        }
        let hold = s.t > self.hold_start;
        if hold {
            self.hold_steps += 1;
        }
        for c in &report.contacts {
            self.peak_penetration = self.peak_penetration.max(-c.gap);
            if hold && c.geoms.contains(&self.object) {
                for (k, f) in self.fingers.iter().enumerate() {
                    if c.geoms.contains(f) {
                        self.force_sum[k] += c.impulse[0] / h;
                    }
                }
            }
        }
    }

    /// The measures so far.
    pub fn summary(&self) -> GraspSummary {
        let n = self.hold_steps.max(1) as f64;
        GraspSummary {
            slip_m: self.slip,
            final_slip_m: self.rel - self.rel_at_lift.unwrap_or(self.rel),
            held: self.z - self.z0 > LIFT_HEIGHT / 2.0,
            rise_m: self.z - self.z0,
            peak_penetration_m: self.peak_penetration,
            finger_force_n: [self.force_sum[0] / n, self.force_sum[1] / n],
        }
    }
}

impl crate::TaskMonitor for GraspMonitor {
    fn observe(&mut self, state: &State, report: &StepReport, h: f64) {
        GraspMonitor::observe(self, state, report, h);
    }

    fn outcomes(&self) -> Vec<(&'static str, f64)> {
        let g = self.summary();
        vec![
            ("held", f64::from(u8::from(g.held))),
            ("slip_m", g.slip_m),
            ("final_slip_m", g.final_slip_m),
            ("rise_m", g.rise_m),
            ("peak_penetration_m", g.peak_penetration_m),
            ("finger_force_left_n", g.finger_force_n[0]),
            ("finger_force_right_n", g.finger_force_n[1]),
        ]
    }
}

/// `grasp` (module documentation).
pub const GRASP: SceneEntry = SceneEntry {
    name: "grasp",
    description: "parallel-jaw gripper (position-servo fingers and lift) closes on a 0.3 kg box on a table, lifts it 0.2 m and holds",
    params: &[
        ParamDoc { name: "object_size", default: "[0.06, 0.06, 0.10]", unit: "m", doc: "object full sizes (fingers close along y)" },
        ParamDoc { name: "object_mass", default: "0.3", unit: "kg", doc: "object mass" },
        ParamDoc { name: "friction", default: "0.8", unit: "-", doc: "sliding friction of every geom" },
        ParamDoc { name: "grip_force", default: "10.0", unit: "N", doc: "squeeze of each finger at rest (finger kp = grip_force / 0.01 m)" },
        ParamDoc { name: "lift_speed", default: "0.2", unit: "m/s", doc: "lift speed (lift to 0.2 m from 0.5 s)" },
        ParamDoc { name: "horizon", default: "null", unit: "s", doc: "simulated duration (null: 1 s of hold after the lift, 2.5 s by default)" },
        ParamDoc { name: "ke", default: "100000.0", unit: "N/m", doc: "penalty contact stiffness" },
        ParamDoc { name: "kd", default: "20.0", unit: "N s/m", doc: "penalty contact damping" },
        ParamDoc { name: "kf", default: "100.0", unit: "N s/m", doc: "penalty viscous friction" },
    ],
    build: |v| {
        let name = "grasp";
        let p: GraspParams = parse_params(name, v)?;
        let [sx, sy, sz] = p.object_size;
        positive(name, &[
            ("object_size[0]", sx), ("object_size[1]", sy), ("object_size[2]", sz), ("object_mass", p.object_mass),
            ("grip_force", p.grip_force), ("lift_speed", p.lift_speed), ("horizon", p.horizon.unwrap_or(1.0)), ("ke", p.ke),
        ])?;
        non_negative(name, &[("friction", p.friction), ("kd", p.kd), ("kf", p.kf)])?;
        let mat = material(p.friction, p.ke, p.kd, p.kf);
        let half = [sx / 2.0, sy / 2.0, sz / 2.0];
        let mut parts = ModelParts { name: name.into(), ..ModelParts::default() };
        let mut table = Geom::new("table", 0, GeomShape::Plane);
        table.material = mat;
        parts.geoms.push(table);

        // Lift: body 1, slide along z through the object's centre.
        parts.bodies.push(Body::new("lift", 0, Vec3::new(0.0, 0.0, half[2]), LIFT_MASS, Vec3::repeat(0.01)));
        let lifted = LIFT_MASS + 2.0 * FINGER_MASS + p.object_mass;
        let mut slide = Joint::new("lift_slide", JointKind::Slide, 1);
        slide.axis = Vec3::z();
        slide.stiffness = GRAVCOMP_STIFFNESS;
        slide.springref = lifted * 9.81 / GRAVCOMP_STIFFNESS;
        parts.joints.push(slide);

        // Fingers: bodies 2 and 3, sliding along ∓y (closing is positive).
        let finger_half = [0.02, 0.01, 0.8 * half[2]];
        let kp = p.grip_force / GRIP_DEPTH;
        let kv = 2.0 * (kp * FINGER_MASS).sqrt();
        for (side, sign) in [("left", 1.0), ("right", -1.0)] {
            let body = parts.bodies.len() + 1;
            let pos = Vec3::new(0.0, sign * (half[1] + finger_half[1]), 0.0);
            parts.bodies.push(Body::new(format!("finger_{side}"), 1, pos, FINGER_MASS, Vec3::from(box_inertia(FINGER_MASS, finger_half))));
            let mut j = Joint::new(format!("finger_{side}_slide"), JointKind::Slide, body);
            j.axis = Vec3::new(0.0, -sign, 0.0);
            parts.joints.push(j);
            let mut g = Geom::new(format!("finger_{side}_geom"), body, GeomShape::Box { half: Vec3::from(finger_half) });
            g.material = mat;
            parts.geoms.push(g);
        }

        // Object: body 4, free.
        parts.bodies.push(Body::new("object", 0, Vec3::zeros(), p.object_mass, Vec3::from(box_inertia(p.object_mass, half))));
        parts.joints.push(Joint::new("object_free", JointKind::Free, 4));
        let mut og = Geom::new("object_geom", 4, GeomShape::Box { half: Vec3::from(half) });
        og.material = mat;
        parts.geoms.push(og);

        let clamp = Some((-p.lift_speed, p.lift_speed));
        parts.actuators.push(Actuator { name: "lift_servo".into(), joint: 0, kind: ActuatorKind::VelocityServo { kv: LIFT_KV }, gear: 1.0, ctrl_range: clamp, force_range: None });
        for (i, side) in ["left", "right"].iter().enumerate() {
            parts.actuators.push(Actuator { name: format!("finger_{side}_servo"), joint: 1 + i, kind: ActuatorKind::PositionServo { kp, kv }, gear: 1.0, ctrl_range: None, force_range: None });
        }
        let m = model(name, parts)?;
        let mut q = DVector::zeros(m.nq);
        q[1] = -OPEN_GAP;
        q[2] = -OPEN_GAP;
        q[5] = half[2];
        q[6] = 1.0;
        let initial = State { q, v: DVector::zeros(m.nv), t: 0.0 };
        Ok(Scene {
            model: m,
            initial,
            horizon: p.horizon.unwrap_or(p.lift_end() + 1.0),
            controls: Some(crate::ControlLaw::new(grasp_controls)),
            // The lift raises the gripper and object by LIFT_HEIGHT; servos store spring energy.
            energy_allowance: lifted * 9.81 * LIFT_HEIGHT * 1.5 + 2.0 * p.grip_force * GRIP_DEPTH + 1.0,
            speed_bound: 5.0,
            analytic: vec![],
            task: Some(crate::TaskFactory::new(|m, s| Box::new(GraspMonitor::new(m, s)))),
            inputs: Vec::new(),
        })
    },
};
