//! The three-wheeled ground robot shared by `box_traversal` and `mesh_terrain`.
//!
//! Defaults follow the box-crossing setup of the Ostrich paper: chassis 90 kg (robot 106.5 kg
//! in all); three driven cylinder wheels, radius 0.35 m, width 0.10 m, 5.5 kg, at
//! (0, ±0.365, 0) m and (−0.75, 0, 0) m in the chassis frame, each on a hinge about its axle
//! (chassis y) with a MuJoCo-style velocity servo, kv = 250 N m s/rad, commands clamped to
//! ±`wheel_speed` (2 rad/s). Each wheel touches each surface at one point: a line contact
//! along its tread is reduced to its middle (`Geom::line_contact_as_point`), which makes the
//! robot a tripod whose sticking contacts are statically determinate (issue 13).
//!
//! **Frames and coordinates.** The chassis is the first jointed body, on a free joint:
//! `q[0..3]` is the chassis origin (the front axle midpoint) in the world (m), `q[3..7]` its
//! orientation (w, x, y, z); `v[0..3]` its linear velocity (world, m/s), `v[3..6]` its angular
//! velocity (chassis frame, rad/s). Then one hinge angle (rad) / rate (rad/s) per wheel in the
//! order left front, right front, rear. Positive wheel rates drive the robot towards the
//! chassis +x. The robot's parameter keys sit flat beside the scene's own keys in an experiment
//! file; the scenes' builders send the keys named in [`ROBOT_PARAMS`] to the robot.

use contactlab_solvers::formulation::ParamDoc;
use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::model::{
    Actuator, ActuatorKind, Body, ContactMaterial, Geom, Joint, JointKind, ModelParts, Quat, Vec3,
};
use contactlab_solvers::{Model, State};
use nalgebra::{DVector, UnitQuaternion};
use serde::{Deserialize, Serialize};

use super::{box_inertia, positive};
use crate::{parse_params, SceneError};

/// The default control law's command (rad/s), reduced by the control clamp to `wheel_speed`.
pub const FULL_FORWARD: f64 = 1.0e3;

/// Names of the wheel geoms, in actuator order (left front, right front, rear).
pub const WHEEL_GEOMS: [&str; 3] = ["wheel_left_geom", "wheel_right_geom", "wheel_rear_geom"];

/// The robot's parameters (SI units; frames in the module documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WheeledRobot {
    /// Wheel speed limit (rad/s): commands are clamped to ±wheel_speed.
    pub wheel_speed: f64,
    /// Chassis mass (kg).
    pub chassis_mass: f64,
    /// Chassis box half-extents (m), chassis frame.
    pub chassis_half: [f64; 3],
    /// Chassis box centre and centre of mass in the chassis frame (m).
    pub chassis_center: [f64; 3],
    /// Wheel radius (m).
    pub wheel_radius: f64,
    /// Wheel width (m).
    pub wheel_width: f64,
    /// Mass of each wheel (kg).
    pub wheel_mass: f64,
    /// Wheel centres in the chassis frame (m): left front, right front, rear.
    pub wheel_positions: [[f64; 3]; 3],
    /// Velocity-servo gain of each wheel (N m s/rad).
    pub kv: f64,
}

impl Default for WheeledRobot {
    fn default() -> Self {
        Self {
            wheel_speed: 2.0,
            chassis_mass: 90.0,
            chassis_half: [0.5, 0.22, 0.08],
            chassis_center: [-0.35, 0.0, 0.05],
            wheel_radius: 0.35,
            wheel_width: 0.10,
            wheel_mass: 5.5,
            wheel_positions: [[0.0, 0.365, 0.0], [0.0, -0.365, 0.0], [-0.75, 0.0, 0.0]],
            kv: 250.0,
        }
    }
}

/// Parameter documentation of [`WheeledRobot`], one entry per field (same names), listed by
/// `contactlab list` after each robot scene's own parameters.
pub const ROBOT_PARAMS: [ParamDoc; 9] = [
    ParamDoc {
        name: "wheel_speed",
        default: "2.0",
        unit: "rad/s",
        doc: "wheel command clamp; the default control law drives all wheels at +wheel_speed",
    },
    ParamDoc {
        name: "chassis_mass",
        default: "90.0",
        unit: "kg",
        doc: "chassis mass",
    },
    ParamDoc {
        name: "chassis_half",
        default: "[0.5, 0.22, 0.08]",
        unit: "m",
        doc: "chassis box half-extents",
    },
    ParamDoc {
        name: "chassis_center",
        default: "[-0.35, 0.0, 0.05]",
        unit: "m",
        doc: "chassis box centre and COM, chassis frame",
    },
    ParamDoc {
        name: "wheel_radius",
        default: "0.35",
        unit: "m",
        doc: "wheel radius",
    },
    ParamDoc {
        name: "wheel_width",
        default: "0.10",
        unit: "m",
        doc: "wheel width",
    },
    ParamDoc {
        name: "wheel_mass",
        default: "5.5",
        unit: "kg",
        doc: "mass of each wheel",
    },
    ParamDoc {
        name: "wheel_positions",
        default: "[[0, 0.365, 0], [0, -0.365, 0], [-0.75, 0, 0]]",
        unit: "m",
        doc: "wheel centres, chassis frame",
    },
    ParamDoc {
        name: "kv",
        default: "250.0",
        unit: "N m s/rad",
        doc: "wheel velocity-servo gain",
    },
];

/// `scene` followed by [`ROBOT_PARAMS`], for a robot scene's registry entry (`N` must be
/// `M + 9`; checked at compile time when used in a const).
pub(crate) const fn with_robot_params<const M: usize, const N: usize>(
    scene: [ParamDoc; M],
) -> [ParamDoc; N] {
    assert!(
        N == M + ROBOT_PARAMS.len(),
        "N must be M + ROBOT_PARAMS.len()"
    );
    let mut out = [ROBOT_PARAMS[0]; N];
    let mut i = 0;
    while i < M {
        out[i] = scene[i];
        i += 1;
    }
    while i < N {
        out[i] = ROBOT_PARAMS[i - M];
        i += 1;
    }
    out
}

/// Parse a robot scene's flat parameter object: the keys named in [`ROBOT_PARAMS`] go to the
/// [`WheeledRobot`], every other key to the scene's own parameters `P` (`null`: defaults).
///
/// # Errors
/// [`SceneError::BadParams`] naming the key when either part does not parse (an unknown key is
/// reported by `P`, whose fields deny unknown keys).
pub(crate) fn parse_with_robot<P: serde::de::DeserializeOwned + Default>(
    name: &str,
    v: &serde_json::Value,
) -> Result<(P, WheeledRobot), SceneError> {
    let serde_json::Value::Object(map) = v else {
        return Ok((parse_params(name, v)?, WheeledRobot::default()));
    };
    let (mut robot, mut own) = (serde_json::Map::new(), serde_json::Map::new());
    for (k, x) in map {
        let part = if ROBOT_PARAMS.iter().any(|d| d.name == k) {
            &mut robot
        } else {
            &mut own
        };
        part.insert(k.clone(), x.clone());
    }
    Ok((
        parse_params(name, &serde_json::Value::Object(own))?,
        parse_params(name, &serde_json::Value::Object(robot))?,
    ))
}

impl WheeledRobot {
    /// Err unless every size, mass, gain and the speed limit are finite and > 0.
    ///
    /// # Errors
    /// [`SceneError::BadParams`] naming scene `name` and the parameter.
    pub fn validate(&self, name: &str) -> Result<(), SceneError> {
        let [cx, cy, cz] = self.chassis_half;
        positive(
            name,
            &[
                ("wheel_speed", self.wheel_speed),
                ("chassis_mass", self.chassis_mass),
                ("chassis_half[0]", cx),
                ("chassis_half[1]", cy),
                ("chassis_half[2]", cz),
                ("wheel_radius", self.wheel_radius),
                ("wheel_width", self.wheel_width),
                ("wheel_mass", self.wheel_mass),
                ("kv", self.kv),
            ],
        )
    }

    /// Total mass (kg): chassis and three wheels.
    pub fn total_mass(&self) -> f64 {
        self.chassis_mass + 3.0 * self.wheel_mass
    }

    /// Ground speed (m/s) at the wheel speed limit: `wheel_speed × wheel_radius`.
    pub fn top_speed(&self) -> f64 {
        self.wheel_speed * self.wheel_radius
    }

    /// The scene of this robot on `model` from `initial`, driving towards `target` under the
    /// default law ([`full_forward`]) for `horizon` s, judged by [`PoseTaskMonitor`] (with
    /// `obstacle_far_x`, the far face of an obstacle to cross, m world x, if any).
    /// Divergence bounds: the motors add at most twice the kinetic energy at full speed (body
    /// and wheel spin) plus lifting the robot by `climb` m, plus 20 J; no body point faster than
    /// 10 × the top speed (at least 10 m/s).
    pub fn scene(
        &self,
        model: Model,
        initial: State,
        horizon: f64,
        target: Pose2,
        climb: f64,
        obstacle_far_x: Option<f64>,
    ) -> crate::Scene {
        let (total, speed) = (self.total_mass(), self.top_speed());
        crate::Scene {
            model,
            initial,
            horizon,
            controls: Some(crate::ControlLaw::new(full_forward)),
            energy_allowance: total * speed * speed + total * 9.81 * climb + 20.0,
            speed_bound: 10.0 * speed.max(1.0),
            analytic: vec![],
            task: Some(crate::TaskFactory::new(move |_, s| {
                Box::new(PoseTaskMonitor::new(target, s, obstacle_far_x))
            })),
            inputs: Vec::new(),
        }
    }

    /// Height (m) of the chassis origin above flat ground when the wheels touch it.
    pub fn ride_height(&self) -> f64 {
        self.wheel_radius
            - self
                .wheel_positions
                .iter()
                .map(|w| w[2])
                .fold(f64::INFINITY, f64::min)
    }

    /// Append the robot to `parts`: the chassis body on a free joint with its box geom, three
    /// wheel bodies on hinges about the chassis y axis with cylinder geoms (axis along the
    /// chassis y), and one velocity servo per wheel. Every geom gets `material`. The chassis
    /// must be the first jointed body (the state layout of the module doc assumes it).
    pub fn add_to(&self, parts: &mut ModelParts, material: ContactMaterial) {
        let centre = Vec3::from(self.chassis_center);
        let chassis_id = parts.bodies.len() + 1;
        let mut chassis = Body::new(
            "chassis",
            0,
            Vec3::zeros(),
            self.chassis_mass,
            Vec3::from(box_inertia(self.chassis_mass, self.chassis_half)),
        );
        chassis.com = centre;
        parts.bodies.push(chassis);
        parts
            .joints
            .push(Joint::new("chassis_free", JointKind::Free, chassis_id));
        let mut chassis_geom = Geom::new(
            "chassis_geom",
            chassis_id,
            GeomShape::Box {
                half: Vec3::from(self.chassis_half),
            },
        );
        chassis_geom.pos = centre;
        chassis_geom.material = material;
        parts.geoms.push(chassis_geom);

        let (r, w, m) = (self.wheel_radius, self.wheel_width, self.wheel_mass);
        // Solid cylinder: m r²/2 about the axle, m (3 r² + w²)/12 about a diameter.
        let axial = 0.5 * m * r * r;
        let transverse = m * (3.0 * r * r + w * w) / 12.0;
        let axle = UnitQuaternion::from_axis_angle(&Vec3::x_axis(), std::f64::consts::FRAC_PI_2);
        for ((label, geom), pos) in ["left", "right", "rear"]
            .iter()
            .zip(WHEEL_GEOMS)
            .zip(self.wheel_positions)
        {
            let body = parts.bodies.len() + 1;
            parts.bodies.push(Body::new(
                format!("wheel_{label}"),
                chassis_id,
                Vec3::from(pos),
                m,
                Vec3::new(transverse, axial, transverse),
            ));
            let mut hinge = Joint::new(format!("wheel_{label}_hinge"), JointKind::Hinge, body);
            hinge.axis = Vec3::y();
            let joint = parts.joints.len();
            parts.joints.push(hinge);
            let mut g = Geom::new(
                geom,
                body,
                GeomShape::Cylinder {
                    radius: r,
                    half_length: w / 2.0,
                },
            );
            g.quat = axle;
            g.material = material;
            // One contact point per wheel and surface (a thin disc): two points along the
            // tread make the three wheels' sticking contacts statically indeterminate, and
            // then the hard contact's step map is not single-valued (issue 13; measured in
            // `Geom::line_contact_as_point`'s narrow-phase doc).
            g.line_contact_as_point = true;
            parts.geoms.push(g);
            parts.actuators.push(Actuator {
                name: format!("wheel_{label}_servo"),
                joint,
                kind: ActuatorKind::VelocityServo { kv: self.kv },
                gear: 1.0,
                ctrl_range: Some((-self.wheel_speed, self.wheel_speed)),
                force_range: None,
            });
        }
    }

    /// The state at rest with the chassis origin at `(start.x, start.y, z)` (m, world), yawed by
    /// `start.yaw` about +z, wheels at angle 0.
    pub fn initial_state(&self, model: &Model, start: &Pose2, z: f64) -> State {
        let quat: Quat = UnitQuaternion::from_axis_angle(&Vec3::z_axis(), start.yaw);
        self.state_at(model, &Vec3::new(start.x, start.y, z), &quat)
    }

    /// The state at rest with the chassis origin at `pos` (m, world) and orientation `quat`
    /// (chassis to world), wheels at angle 0.
    pub fn state_at(&self, model: &Model, pos: &Vec3, quat: &Quat) -> State {
        let mut q = DVector::zeros(model.nq);
        q[0] = pos.x;
        q[1] = pos.y;
        q[2] = pos.z;
        q[3] = quat.w;
        q[4] = quat.i;
        q[5] = quat.j;
        q[6] = quat.k;
        State {
            q,
            v: DVector::zeros(model.nv),
            t: 0.0,
        }
    }
}

/// A planar pose: position (x, y) in the world (m) and yaw about +z (rad).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pose2 {
    /// x (m).
    pub x: f64,
    /// y (m).
    pub y: f64,
    /// Yaw (rad), counter-clockwise from +x.
    pub yaw: f64,
}

/// Chassis yaw (rad) of a robot state: heading of the chassis x axis about world z.
pub fn chassis_yaw(state: &State) -> f64 {
    let (w, x, y, z) = (state.q[3], state.q[4], state.q[5], state.q[6]);
    (2.0 * (w * z + x * y)).atan2(1.0 - 2.0 * (y * y + z * z))
}

/// World z component of the chassis z axis (1 upright, 0 on its side, −1 upside down).
pub fn chassis_up(state: &State) -> f64 {
    let (_, x, y, _) = (state.q[3], state.q[4], state.q[5], state.q[6]);
    1.0 - 2.0 * (x * x + y * y)
}

/// Task loss of a robot state (m²): squared horizontal distance of the chassis origin to the
/// target position plus `yaw_weight` (m²/rad²) times the squared yaw error, wrapped to (−π, π].
pub fn pose_loss(state: &State, target: &Pose2, yaw_weight: f64) -> f64 {
    let (dx, dy) = (state.q[0] - target.x, state.q[1] - target.y);
    let d = chassis_yaw(state) - target.yaw;
    let dyaw = d.sin().atan2(d.cos());
    dx * dx + dy * dy + yaw_weight * dyaw * dyaw
}

/// Success of a robot run: the chassis origin ends within 0.2 m of the target position
/// (horizontally) and its linear speed is below 0.3 m/s.
pub fn pose_success(state: &State, target: &Pose2) -> bool {
    let err = (state.q[0] - target.x).hypot(state.q[1] - target.y);
    let speed = (state.v[0].powi(2) + state.v[1].powi(2) + state.v[2].powi(2)).sqrt();
    err < 0.2 && speed < 0.3
}

/// Yaw weight of the task loss the harness records (m²/rad²): a 1 rad heading error costs as
/// much as 1 m of position error.
pub const TASK_YAW_WEIGHT: f64 = 1.0;

/// The robot scenes' task outcomes, from the final state and the whole run: the task loss
/// ([`pose_loss`] with [`TASK_YAW_WEIGHT`], m²), success (0/1, [`pose_success`]), the final
/// horizontal position error (m), the final speed (m/s), the lowest chassis "up" component
/// over the run ([`chassis_up`]; below 0 the robot turned over), the lowest and highest height
/// of the chassis origin over the run (m, world z) and, on a scene with an obstacle to cross,
/// how far the chassis origin ends past the obstacle's far face (m along +x; negative: short
/// of it). The last three are the inputs of the Ostrich paper's usability test (box
/// traversal: a run is usable when no state is non-finite, the chassis height stays within
/// [0.05, 2] m, the robot ends at least 0.5 m past the box, and its final position is within
/// 0.2 m of the finest-timestep run), which the harness's report applies.
#[derive(Debug, Clone)]
pub struct PoseTaskMonitor {
    target: Pose2,
    last: State,
    min_up: f64,
    z_range: (f64, f64),
    obstacle_far_x: Option<f64>,
}

impl PoseTaskMonitor {
    /// A monitor for a run towards `target` from `initial`; `obstacle_far_x` (m, world x) is the
    /// far face of an obstacle the run must cross, `None` without one.
    pub fn new(target: Pose2, initial: &State, obstacle_far_x: Option<f64>) -> Self {
        Self {
            target,
            last: initial.clone(),
            min_up: chassis_up(initial),
            z_range: (initial.q[2], initial.q[2]),
            obstacle_far_x,
        }
    }
}

impl crate::TaskMonitor for PoseTaskMonitor {
    fn observe(&mut self, state: &State, _report: &contactlab_solvers::StepReport, _h: f64) {
        self.last.clone_from(state);
        self.min_up = self.min_up.min(chassis_up(state));
        let z = state.q[2];
        self.z_range = (self.z_range.0.min(z), self.z_range.1.max(z));
    }

    fn outcomes(&self) -> Vec<(&'static str, f64)> {
        let s = &self.last;
        let err = (s.q[0] - self.target.x).hypot(s.q[1] - self.target.y);
        let speed = (s.v[0].powi(2) + s.v[1].powi(2) + s.v[2].powi(2)).sqrt();
        let mut out = vec![
            ("task_loss_m2", pose_loss(s, &self.target, TASK_YAW_WEIGHT)),
            (
                "success",
                f64::from(u8::from(pose_success(s, &self.target))),
            ),
            ("position_error_m", err),
            ("final_speed_m_s", speed),
            ("min_chassis_up", self.min_up),
            ("chassis_z_min_m", self.z_range.0),
            ("chassis_z_max_m", self.z_range.1),
        ];
        if let Some(far) = self.obstacle_far_x {
            out.push(("past_obstacle_m", s.q[0] - far));
        }
        out
    }
}

/// The default control law of the robot scenes: [`FULL_FORWARD`] on every wheel, which the
/// control clamp reduces to +`wheel_speed` (a plain-function law cannot read parameters).
pub fn full_forward(_t: f64, _s: &State) -> Vec<f64> {
    vec![FULL_FORWARD; 3]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Equal numbers (to 1e-12), or arrays of equal numbers.
    fn same_numbers(a: &serde_json::Value, b: &serde_json::Value) -> bool {
        match (a, b) {
            (serde_json::Value::Array(a), serde_json::Value::Array(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_numbers(x, y))
            }
            _ => matches!((a.as_f64(), b.as_f64()), (Some(x), Some(y)) if (x - y).abs() < 1e-12),
        }
    }

    #[test]
    fn robot_param_docs_name_every_field_with_its_default() {
        let v = serde_json::to_value(WheeledRobot::default()).unwrap();
        let obj = v.as_object().unwrap();
        assert_eq!(obj.len(), ROBOT_PARAMS.len());
        for d in ROBOT_PARAMS {
            let documented: serde_json::Value = serde_json::from_str(d.default).unwrap();
            let actual = &obj[d.name];
            let close = same_numbers(&documented, actual);
            assert!(close, "{}: doc {} vs {actual}", d.name, d.default);
        }
    }

    #[test]
    fn flat_keys_split_between_robot_and_scene() {
        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields, default)]
        struct Own {
            horizon: f64,
        }
        let v = serde_json::json!({"horizon": 3.0, "wheel_radius": 0.4});
        let (own, robot): (Own, WheeledRobot) = parse_with_robot("s", &v).unwrap();
        assert_eq!((own.horizon, robot.wheel_radius), (3.0, 0.4));
        let bad = serde_json::json!({"bogus": 1});
        let e = parse_with_robot::<Own>("s", &bad).unwrap_err().to_string();
        assert!(e.contains("bogus"), "{e}");
    }
}
