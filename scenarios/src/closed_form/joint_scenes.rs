//! The articulated closed-form scenes: `pendulum` and `cartpole`.

use contactlab_solvers::formulation::ParamDoc;
use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::model::{
    Actuator, ActuatorKind, Body, Geom, Joint, JointKind, ModelParts, Vec3,
};
use contactlab_solvers::State;
use nalgebra::DVector;
use serde::{Deserialize, Serialize};

use super::{model, positive, G};
use crate::{parse_params, AnalyticValue, Scene, SceneEntry};

/// Parameters of `pendulum`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PendulumParams {
    /// Initial angle from the downward vertical (rad).
    pub angle0: f64,
    /// Distance from the pivot to the bob's centre of mass (m).
    pub length: f64,
    /// Bob mass (kg).
    pub mass: f64,
    /// Joint damping (N m s/rad).
    pub damping: f64,
    /// Simulated duration (s).
    pub horizon: f64,
}

impl Default for PendulumParams {
    fn default() -> Self {
        Self {
            angle0: 0.5,
            length: 1.0,
            mass: 1.0,
            damping: 0.0,
            horizon: 10.0,
        }
    }
}

/// Principal inertia of the pendulum bob about its own centre (kg m²): a 5 cm sphere of 1 kg.
const BOB_INERTIA: f64 = 1e-3;

/// `pendulum`: a hinge pendulum with no contact.
pub const PENDULUM: SceneEntry = SceneEntry {
    name: "pendulum",
    description:
        "hinge pendulum (1 kg bob, 1 m), released from 0.5 rad; no contact; energy is conserved",
    params: &[
        ParamDoc {
            name: "angle0",
            default: "0.5",
            unit: "rad",
            doc: "initial angle from the downward vertical",
        },
        ParamDoc {
            name: "length",
            default: "1.0",
            unit: "m",
            doc: "pivot to bob centre of mass",
        },
        ParamDoc {
            name: "mass",
            default: "1.0",
            unit: "kg",
            doc: "bob mass",
        },
        ParamDoc {
            name: "damping",
            default: "0.0",
            unit: "N m s/rad",
            doc: "hinge damping",
        },
        ParamDoc {
            name: "horizon",
            default: "10.0",
            unit: "s",
            doc: "simulated duration",
        },
    ],
    build: |v| {
        let name = "pendulum";
        let p: PendulumParams = parse_params(name, v)?;
        positive(name, "length", p.length)?;
        positive(name, "horizon", p.horizon)?;
        let mut parts = ModelParts {
            name: name.into(),
            ..ModelParts::default()
        };
        let mut bob = Body::new(
            "bob",
            0,
            Vec3::new(0.0, 0.0, 2.0),
            p.mass,
            Vec3::repeat(BOB_INERTIA * p.mass),
        );
        bob.com = Vec3::new(0.0, 0.0, -p.length);
        parts.bodies.push(bob);
        let mut hinge = Joint::new("hinge", JointKind::Hinge, 1);
        hinge.axis = Vec3::y();
        hinge.damping = p.damping;
        parts.joints.push(hinge);
        let m = model(name, parts)?;
        let initial = State {
            q: DVector::from_element(1, p.angle0),
            v: DVector::zeros(1),
            t: 0.0,
        };
        let inertia = BOB_INERTIA * p.mass + p.mass * p.length * p.length;
        let period = 2.0 * std::f64::consts::PI * (inertia / (p.mass * G * p.length)).sqrt();
        let energy = p.mass * G * p.length * (1.0 - p.angle0.cos());
        Ok(Scene {
            task: None,
            inputs: Vec::new(),
            model: m,
            initial,
            horizon: p.horizon,
            controls: None,
            energy_allowance: 0.05 * energy.max(1e-3),
            speed_bound: 50.0,
            analytic: vec![AnalyticValue {
                name: "small_angle_period_s",
                value: period,
                formula: "2 pi sqrt(I / (m g l))",
            }],
        })
    },
};

/// Parameters of `cartpole`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CartpoleParams {
    /// Initial pole angle about +y, measured from upright (rad).
    pub pole_angle: f64,
    /// Initial cart velocity along +x (m/s).
    pub cart_velocity: f64,
    /// Slider limit (m): the cart moves in [−limit, limit].
    pub limit: f64,
    /// Simulated duration (s).
    pub horizon: f64,
}

impl Default for CartpoleParams {
    fn default() -> Self {
        Self {
            pole_angle: 0.5,
            cart_velocity: 3.0,
            limit: 1.0,
            horizon: 3.0,
        }
    }
}

/// `cartpole`: the reference MuJoCo cart-pole (scenarios/tests/reference/scenes/cartpole.xml) plus a
/// force motor on the cart (zero control by default, so it matches MuJoCo's trajectory).
pub const CARTPOLE: SceneEntry = SceneEntry {
    name: "cartpole",
    description: "cart (1 kg) on a +-1 m limited slider with a 1 m hinged pole; hits its limit at 3 m/s; motor on the cart",
    params: &[
        ParamDoc { name: "pole_angle", default: "0.5", unit: "rad", doc: "initial pole angle about +y from upright" },
        ParamDoc { name: "cart_velocity", default: "3.0", unit: "m/s", doc: "initial cart velocity" },
        ParamDoc { name: "limit", default: "1.0", unit: "m", doc: "slider range is [-limit, limit]" },
        ParamDoc { name: "horizon", default: "3.0", unit: "s", doc: "simulated duration" },
    ],
    build: |v| {
        let name = "cartpole";
        let p: CartpoleParams = parse_params(name, v)?;
        positive(name, "limit", p.limit)?;
        positive(name, "horizon", p.horizon)?;
        let mut parts = ModelParts { name: name.into(), ..ModelParts::default() };
        parts.bodies.push(Body::new("cart", 0, Vec3::new(0.0, 0.0, 1.0), 1.0, Vec3::new(0.004166666667, 0.01416666667, 0.01666666667)));
        let mut pole = Body::new("pole", 1, Vec3::zeros(), 0.1, Vec3::new(0.008333333333, 0.008333333333, 2e-5));
        pole.com = Vec3::new(0.0, 0.0, 0.5);
        parts.bodies.push(pole);
        let mut slider = Joint::new("slider", JointKind::Slide, 1);
        slider.axis = Vec3::x();
        slider.range = Some((-p.limit, p.limit));
        let mut hinge = Joint::new("hinge", JointKind::Hinge, 2);
        hinge.axis = Vec3::y();
        parts.joints.extend([slider, hinge]);
        let mut cart_geom = Geom::new("cart_geom", 1, GeomShape::Box { half: Vec3::new(0.2, 0.1, 0.05) });
        let mut pole_geom = Geom::new("pole_geom", 2, GeomShape::Capsule { radius: 0.02, half_length: 0.5 });
        pole_geom.pos = Vec3::new(0.0, 0.0, 0.5);
        for g in [&mut cart_geom, &mut pole_geom] {
            g.contype = 0;
            g.conaffinity = 0;
        }
        parts.geoms.extend([cart_geom, pole_geom]);
        parts.actuators.push(Actuator {
            name: "cart_motor".into(),
            joint: 0,
            kind: ActuatorKind::Motor,
            gear: 1.0,
            ctrl_range: None,
            force_range: None,
        });
        let m = model(name, parts)?;
        let initial = State { q: DVector::from_vec(vec![0.0, p.pole_angle]), v: DVector::from_vec(vec![p.cart_velocity, 0.0]), t: 0.0 };
        Ok(Scene {
            model: m,
            initial,
            horizon: p.horizon,
            controls: None,
            energy_allowance: 0.25,
            speed_bound: 50.0,
            analytic: vec![],
            task: None,
            inputs: Vec::new(),
        })
    },
};
