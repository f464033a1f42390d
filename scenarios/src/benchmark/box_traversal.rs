//! `box_traversal`: a three-wheeled ground robot drives over a rigid box obstacle on a plane.
//!
//! Defaults follow the box-crossing setup of the Ostrich paper: chassis 90 kg (robot 106.5 kg
//! in all); three driven cylinder wheels, radius 0.35 m, width 0.10 m, 5.5 kg, at
//! (0, ±0.365, 0) m and (−0.75, 0, 0) m in the chassis frame, each on a hinge about its axle
//! (chassis y) with a MuJoCo-style velocity servo, kv = 250 N m s/rad; a static box of full
//! sizes 0.74 (x) × 1.15 (y) × 0.12 (z) m resting on the ground, centred 1.37 m ahead of the
//! chassis origin; friction 0.8 on box and ground; target (3, 0) m; horizon 6 s.
//!
//! The robot is [`super::wheeled_robot::WheeledRobot`] (shared with `mesh_terrain`).
//!
//! **Frames.** World: z up, the robot starts at the origin facing +x, axles at the wheel
//! radius above the ground (wheels touch it). The chassis has a free joint: `q[0..3]` is the
//! chassis origin (the front axle midpoint) in the world (m), `q[3..7]` its orientation
//! (w, x, y, z); `v[0..3]` its linear velocity (world, m/s), `v[3..6]` its angular velocity
//! (chassis frame, rad/s). Then one hinge angle (rad) / rate (rad/s) per wheel in the order
//! left front, right front, rear. Positive wheel rates drive the robot towards +x.
//!
//! **Controls.** One velocity command per wheel (rad/s), clamped to ±`wheel_speed`. For
//! gradient studies the commands are a piecewise-linear [`Spline`] over the horizon with
//! `knots` knots per wheel. Because a scene's control law is a plain function, the default
//! law commands a saturating forward speed ([`FULL_FORWARD`]) that the control clamp reduces
//! to +`wheel_speed` on every wheel: the robot drives straight over the box at about
//! `wheel_speed × wheel_radius` (0.7 m/s by default, 4 m in 6 s).
//!
//! **Task.** Reach the target position with the target heading and stop there:
//! [`box_traversal_loss`] and [`box_traversal_success`] (within 0.2 m, below 0.3 m/s).
//!
//! **Random instances.** `seed` = 0 is the nominal instance. A non-zero seed draws, from
//! `ChaCha8Rng::seed_from_u64(seed)` in this order, uniform offsets of the start position
//! (x, y each within ±0.1 m), start yaw (±5°), target position (x, y each within ±0.3 m) and
//! target yaw (±15°), added to the nominal start (0, 0, 0°) and target (`target`,
//! `target_yaw`). [`BoxTraversalParams::instance`] returns them.
//!
//! **Penalty materials.** ke = 1e6 N/m, kd = 2000 N s/m, kf = 1000 N s/m. The normal spring
//! carries ~350 N per wheel, so ke = 1e6 keeps a single-point sinkage below 0.4 mm (1e5
//! would let the wheels sink up to ~3.5 mm, 3 % of the 0.12 m step). Semi-implicit Euler treats springs and
//! dampers explicitly: stable for `h ω < 2` and `h c / m_eff < 2` (spec ncp_fb §4.5). The
//! smallest effective mass a wheel contact sees is tangential, through the wheel's spin:
//! I/r² = 0.337/0.35² = 2.75 kg; a wheel's manifold held up to 7 contact points in the test
//! runs (rim on ground and box edge), so `h Σ kf / m_eff` = 0.0005 × 7 × 1000 / 2.75 = 1.3 at
//! h = 0.5 ms (kf = 2000 would reach 2.5: unstable). Normally the contacts move the ≥ 30 kg
//! share of the robot a wheel carries: `h sqrt(Σ ke / m)` = 0.0005 × sqrt(7e6 / 30) = 0.24 and
//! `h Σ kd / m` = 0.23. The wheel servo is explicit too: `h kv / I` = 0.37 at 0.5 ms (1.5 at
//! 2 ms, still below 2). Measured peak penetration over the default run: 2.5 mm (penalty,
//! 0.5 ms), 6.4 mm (soft_convex, 2 ms).

use contactlab_solvers::formulation::ParamDoc;
use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::model::{Geom, ModelParts, Vec3};
use contactlab_solvers::State;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

pub use super::wheeled_robot::{chassis_up, chassis_yaw, Pose2, FULL_FORWARD};
use super::wheeled_robot::{parse_with_robot, with_robot_params, WheeledRobot};
use super::{bad, material, model, non_negative, positive};
use crate::SceneEntry;

/// Parameters of `box_traversal` (SI units; frames in the module documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BoxTraversalParams {
    /// Simulated duration (s).
    pub horizon: f64,
    /// Knots per wheel of the control [`Spline`] (≥ 2), evenly spaced over the horizon.
    pub knots: usize,
    /// Obstacle full sizes along x, y, z (m).
    pub obstacle_size: [f64; 3],
    /// Obstacle centre's x in the world (m); it rests on the ground, centred on y = 0.
    pub obstacle_x: f64,
    /// Sliding friction of ground, obstacle and wheels (-).
    pub friction: f64,
    /// Nominal target position (x, y) in the world (m).
    pub target: [f64; 2],
    /// Nominal target yaw (degrees).
    pub target_yaw: f64,
    /// Random instance: 0 is nominal; otherwise start and target are perturbed (module doc).
    pub seed: u64,
    /// Penalty contact stiffness (N/m).
    pub ke: f64,
    /// Penalty contact damping (N s/m).
    pub kd: f64,
    /// Penalty viscous friction (N s/m).
    pub kf: f64,
    /// The robot; its keys sit flat beside the scene's in an experiment file (parsed by the
    /// scene's builder, not by serde on this struct).
    #[serde(skip)]
    pub robot: WheeledRobot,
}

impl Default for BoxTraversalParams {
    fn default() -> Self {
        Self {
            horizon: 6.0,
            knots: 10,
            obstacle_size: [0.74, 1.15, 0.12],
            obstacle_x: 1.37,
            friction: 0.8,
            target: [3.0, 0.0],
            target_yaw: 0.0,
            seed: 0,
            ke: 1.0e6,
            kd: 2000.0,
            kf: 1000.0,
            robot: WheeledRobot::default(),
        }
    }
}

impl BoxTraversalParams {
    /// The instance's start pose of the chassis origin and its target pose (module doc).
    pub fn instance(&self) -> (Pose2, Pose2) {
        let mut start = Pose2 {
            x: 0.0,
            y: 0.0,
            yaw: 0.0,
        };
        let mut target = Pose2 {
            x: self.target[0],
            y: self.target[1],
            yaw: self.target_yaw.to_radians(),
        };
        if self.seed != 0 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.seed);
            start.x += rng.random_range(-0.1..=0.1);
            start.y += rng.random_range(-0.1..=0.1);
            start.yaw += rng.random_range(-5f64..=5.0).to_radians();
            target.x += rng.random_range(-0.3..=0.3);
            target.y += rng.random_range(-0.3..=0.3);
            target.yaw += rng.random_range(-15f64..=15.0).to_radians();
        }
        (start, target)
    }

    /// A spline of `knots` knots over the horizon holding `speeds` (rad/s, one per wheel).
    pub fn constant_spline(&self, speeds: [f64; 3]) -> Spline {
        Spline::new(self.horizon, vec![speeds.to_vec(); self.knots.max(2)])
    }
}

/// Piecewise-linear controls: `values[k]` (one entry per actuator) at `t_k = k T / (K − 1)`,
/// linear in between, held constant outside `[0, T]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Spline {
    /// Time span T (s) covered by the knots.
    pub horizon: f64,
    /// K ≥ 2 knot values, each with one entry per actuator (the actuator's unit).
    pub values: Vec<Vec<f64>>,
}

impl Spline {
    /// A spline over `[0, horizon]` with the given knot values.
    ///
    /// # Panics
    /// If fewer than 2 knots, knots of different lengths, or a non-positive horizon.
    pub fn new(horizon: f64, values: Vec<Vec<f64>>) -> Self {
        assert!(values.len() >= 2, "a spline needs at least 2 knots");
        assert!(
            values.iter().all(|v| v.len() == values[0].len()),
            "knots of different lengths"
        );
        assert!(horizon > 0.0, "horizon must be > 0");
        Self { horizon, values }
    }

    /// The controls at time `t` (s).
    pub fn at(&self, t: f64) -> Vec<f64> {
        let k = self.values.len() - 1;
        let s = (t / self.horizon).clamp(0.0, 1.0) * k as f64;
        let i = (s.floor() as usize).min(k - 1);
        let w = s - i as f64;
        self.values[i]
            .iter()
            .zip(&self.values[i + 1])
            .map(|(a, b)| a + w * (b - a))
            .collect()
    }

    /// `d u_j(t) / d values[k][j]` (the same for every actuator j): the hat-function weight of
    /// knot `k` at time `t`, for chaining gradients to the knots.
    pub fn weight(&self, k: usize, t: f64) -> f64 {
        let n = self.values.len() - 1;
        let s = (t / self.horizon).clamp(0.0, 1.0) * n as f64;
        (1.0 - (s - k as f64).abs()).max(0.0)
    }
}

/// Task loss of a `box_traversal` state (m²): squared distance of the chassis origin to the
/// target position plus `yaw_weight` (m²/rad²) times the squared yaw error, wrapped to (−π, π].
pub fn box_traversal_loss(state: &State, target: &Pose2, yaw_weight: f64) -> f64 {
    super::wheeled_robot::pose_loss(state, target, yaw_weight)
}

/// Success of a `box_traversal` run: the chassis origin ends within 0.2 m of the target
/// position (in the ground plane) and its linear speed is below 0.3 m/s.
pub fn box_traversal_success(state: &State, target: &Pose2) -> bool {
    super::wheeled_robot::pose_success(state, target)
}

/// `box_traversal`'s own parameters followed by the robot's.
const PARAMS: [ParamDoc; 20] = with_robot_params([
    ParamDoc { name: "horizon", default: "6.0", unit: "s", doc: "simulated duration" },
    ParamDoc { name: "knots", default: "10", unit: "-", doc: "knots per wheel of the control spline (gradient studies)" },
    ParamDoc { name: "obstacle_size", default: "[0.74, 1.15, 0.12]", unit: "m", doc: "obstacle full sizes x, y, z" },
    ParamDoc { name: "obstacle_x", default: "1.37", unit: "m", doc: "obstacle centre x (on the ground, y = 0)" },
    ParamDoc { name: "friction", default: "0.8", unit: "-", doc: "sliding friction of ground, obstacle, wheels" },
    ParamDoc { name: "target", default: "[3.0, 0.0]", unit: "m", doc: "nominal target position" },
    ParamDoc { name: "target_yaw", default: "0.0", unit: "deg", doc: "nominal target yaw" },
    ParamDoc { name: "seed", default: "0", unit: "-", doc: "random instance (0: nominal); perturbs start +-0.1 m, +-5 deg and target +-0.3 m, +-15 deg" },
    ParamDoc { name: "ke", default: "1000000.0", unit: "N/m", doc: "penalty contact stiffness" },
    ParamDoc { name: "kd", default: "2000.0", unit: "N s/m", doc: "penalty contact damping" },
    ParamDoc { name: "kf", default: "1000.0", unit: "N s/m", doc: "penalty viscous friction" },
]);

/// `box_traversal` (module documentation).
pub const BOX_TRAVERSAL: SceneEntry = SceneEntry {
    name: "box_traversal",
    description: "106 kg three-wheeled robot (velocity-servo wheels r 0.35 m) drives over a 0.12 m box to (3, 0) m in 6 s (Ostrich)",
    params: &PARAMS,
    build: |v| {
        let name = "box_traversal";
        let (mut p, robot): (BoxTraversalParams, WheeledRobot) = parse_with_robot(name, v)?;
        p.robot = robot;
        let robot = &p.robot;
        robot.validate(name)?;
        let [ox, oy, oz] = p.obstacle_size;
        positive(name, &[
            ("horizon", p.horizon), ("obstacle_size[0]", ox), ("obstacle_size[1]", oy), ("obstacle_size[2]", oz), ("ke", p.ke),
        ])?;
        non_negative(name, &[("friction", p.friction), ("kd", p.kd), ("kf", p.kf)])?;
        if p.knots < 2 {
            return Err(bad(name, format!("knots = {} must be >= 2", p.knots)));
        }
        let mat = material(p.friction, p.ke, p.kd, p.kf);
        let mut parts = ModelParts { name: name.into(), ..ModelParts::default() };

        let mut ground = Geom::new("ground", 0, GeomShape::Plane);
        ground.material = mat;
        let mut obstacle = Geom::new("obstacle", 0, GeomShape::Box { half: Vec3::new(ox / 2.0, oy / 2.0, oz / 2.0) });
        obstacle.pos = Vec3::new(p.obstacle_x, 0.0, oz / 2.0);
        obstacle.material = mat;
        parts.geoms.extend([ground, obstacle]);
        robot.add_to(&mut parts, mat);
        let m = model(name, parts)?;

        let (start, target) = p.instance();
        let initial = robot.initial_state(&m, &start, robot.ride_height());
        // The robot climbs the obstacle's height and must end past its far face.
        Ok(robot.scene(m, initial, p.horizon, target, oz, Some(p.obstacle_x + ox / 2.0)))
    },
};
