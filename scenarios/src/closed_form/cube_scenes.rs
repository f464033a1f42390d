//! The free-body closed-form scenes: `box_drop`, `box_slide`, `box_incline`, `sphere_roll`.

use contactlab_solvers::formulation::ParamDoc;
use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::model::{ModelParts, Quat, Vec3};
use nalgebra::UnitQuaternion;
use serde::{Deserialize, Serialize};

use super::{
    check_material, floor, free_body, free_state, model, positive, Material, CUBE_INERTIA, G,
    MATERIAL_DOCS,
};
use crate::{parse_params, AnalyticValue, Scene, SceneEntry, SceneError};

/// Half-size of the reference cube (m).
pub const CUBE_HALF: f64 = 0.05;

macro_rules! material_fields {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* pub $f:ident : $t:ty = $d:expr,)* } friction = $mu:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct $name {
            $($(#[$fm])* pub $f: $t,)*
            /// Sliding friction coefficient of both geoms (-).
            pub friction: f64,
            /// Penalty contact stiffness of both geoms (N/m).
            pub ke: f64,
            /// Penalty contact damping of both geoms (N s/m).
            pub kd: f64,
            /// Penalty viscous friction of both geoms (N s/m).
            pub kf: f64,
        }
        impl Default for $name {
            fn default() -> Self {
                Self { $($f: $d,)* friction: $mu, ke: 1e5, kd: 100.0, kf: 200.0 }
            }
        }
        impl $name {
            fn material(&self) -> Material {
                Material { friction: self.friction, ke: self.ke, kd: self.kd, kf: self.kf }
            }
        }
    };
}

material_fields! {
    /// Parameters of `box_drop`.
    pub struct BoxDropParams {
        /// Initial height of the cube's centre (m).
        pub height: f64 = 0.3,
        /// Simulated duration (s).
        pub horizon: f64 = 1.5,
    }
    friction = 0.5
}

material_fields! {
    /// Parameters of `box_slide`.
    pub struct BoxSlideParams {
        /// Initial sliding speed along +x (m/s).
        pub v0: f64 = 2.0,
        /// Simulated duration (s).
        pub horizon: f64 = 1.0,
    }
    friction = 0.3
}

material_fields! {
    /// Parameters of `box_incline`.
    pub struct BoxInclineParams {
        /// Incline angle (degrees), tilted about y so that downhill is +x.
        pub angle_deg: f64 = 20.0,
        /// Simulated duration (s).
        pub horizon: f64 = 1.0,
    }
    friction = 0.4
}

material_fields! {
    /// Parameters of `sphere_roll`.
    pub struct SphereRollParams {
        /// Incline angle (degrees), downhill +x.
        pub angle_deg: f64 = 15.0,
        /// Sphere radius (m).
        pub radius: f64 = 0.1,
        /// Simulated duration (s).
        pub horizon: f64 = 1.0,
    }
    friction = 1.0
}

/// `box_drop`: a spinning cube dropped onto the plane.
pub const BOX_DROP: SceneEntry = SceneEntry {
    name: "box_drop",
    description: "0.1 m cube dropped from 0.3 m spinning at (2, 1, 0) rad/s onto a plane (mu 0.5)",
    params: &[
        ParamDoc {
            name: "height",
            default: "0.3",
            unit: "m",
            doc: "initial height of the cube centre",
        },
        ParamDoc {
            name: "horizon",
            default: "1.5",
            unit: "s",
            doc: "simulated duration",
        },
        ParamDoc {
            name: "friction",
            default: "0.5",
            unit: "-",
            doc: "sliding friction of both geoms",
        },
        MATERIAL_DOCS[0],
        MATERIAL_DOCS[1],
        MATERIAL_DOCS[2],
    ],
    build: |v| {
        let p: BoxDropParams = parse_params("box_drop", v)?;
        positive("box_drop", "height", p.height)?;
        positive("box_drop", "horizon", p.horizon)?;
        cube_on_plane(
            "box_drop",
            &p.material(),
            0.0,
            p.horizon,
            |m| {
                free_state(
                    m,
                    Vec3::new(0.0, 0.0, p.height),
                    Quat::identity(),
                    Vec3::zeros(),
                    Vec3::new(2.0, 1.0, 0.0),
                )
            },
            vec![AnalyticValue {
                name: "rest_normal_force_N",
                value: G,
                formula: "m g",
            }],
        )
    },
};

/// `box_slide`: a cube sliding on the plane until friction stops it.
pub const BOX_SLIDE: SceneEntry = SceneEntry {
    name: "box_slide",
    description:
        "0.1 m cube resting on a plane, launched along +x at 2 m/s; friction stops it (mu 0.3)",
    params: &[
        ParamDoc {
            name: "v0",
            default: "2.0",
            unit: "m/s",
            doc: "initial speed along +x",
        },
        ParamDoc {
            name: "horizon",
            default: "1.0",
            unit: "s",
            doc: "simulated duration",
        },
        ParamDoc {
            name: "friction",
            default: "0.3",
            unit: "-",
            doc: "sliding friction of both geoms",
        },
        MATERIAL_DOCS[0],
        MATERIAL_DOCS[1],
        MATERIAL_DOCS[2],
    ],
    build: |v| {
        let p: BoxSlideParams = parse_params("box_slide", v)?;
        positive("box_slide", "horizon", p.horizon)?;
        let stop = p.v0 * p.v0 / (2.0 * p.friction * G);
        cube_on_plane(
            "box_slide",
            &p.material(),
            0.0,
            p.horizon,
            |m| {
                free_state(
                    m,
                    Vec3::new(0.0, 0.0, CUBE_HALF),
                    Quat::identity(),
                    Vec3::new(p.v0, 0.0, 0.0),
                    Vec3::zeros(),
                )
            },
            vec![
                AnalyticValue {
                    name: "stop_distance_m",
                    value: stop,
                    formula: "v0^2 / (2 mu g)",
                },
                AnalyticValue {
                    name: "stop_time_s",
                    value: p.v0 / (p.friction * G),
                    formula: "v0 / (mu g)",
                },
            ],
        )
    },
};

/// `box_incline`: a cube at rest on an incline; it sticks iff tan θ ≤ μ.
pub const BOX_INCLINE: SceneEntry = SceneEntry {
    name: "box_incline",
    description: "0.1 m cube at rest on a plane tilted 20 degrees (downhill +x); sticks iff tan(theta) <= mu (mu 0.4)",
    params: &[
        ParamDoc { name: "angle_deg", default: "20.0", unit: "deg", doc: "incline angle about y" },
        ParamDoc { name: "horizon", default: "1.0", unit: "s", doc: "simulated duration" },
        ParamDoc { name: "friction", default: "0.4", unit: "-", doc: "sliding friction of both geoms" },
        MATERIAL_DOCS[0],
        MATERIAL_DOCS[1],
        MATERIAL_DOCS[2],
    ],
    build: |v| {
        let p: BoxInclineParams = parse_params("box_incline", v)?;
        positive("box_incline", "horizon", p.horizon)?;
        let th = p.angle_deg.to_radians();
        let accel = (G * (th.sin() - p.friction * th.cos())).max(0.0);
        let tilt: Quat = UnitQuaternion::from_axis_angle(&Vec3::y_axis(), th);
        let normal = tilt * Vec3::z();
        cube_on_plane("box_incline", &p.material(), th, p.horizon, |m| {
            free_state(m, normal * CUBE_HALF, tilt, Vec3::zeros(), Vec3::zeros())
        }, vec![AnalyticValue { name: "acceleration_m_s2", value: accel, formula: "max(0, g (sin theta - mu cos theta))" }])
    },
};

/// `sphere_roll`: a sphere rolling without slipping down an incline.
pub const SPHERE_ROLL: SceneEntry = SceneEntry {
    name: "sphere_roll",
    description: "sphere (r 0.1 m, 1 kg) rolling from rest down a 15 degree plane (mu 1): a = 5/7 g sin(theta)",
    params: &[
        ParamDoc { name: "angle_deg", default: "15.0", unit: "deg", doc: "incline angle about y" },
        ParamDoc { name: "radius", default: "0.1", unit: "m", doc: "sphere radius" },
        ParamDoc { name: "horizon", default: "1.0", unit: "s", doc: "simulated duration" },
        ParamDoc { name: "friction", default: "1.0", unit: "-", doc: "sliding friction of both geoms" },
        MATERIAL_DOCS[0],
        MATERIAL_DOCS[1],
        MATERIAL_DOCS[2],
    ],
    build: |v| {
        let p: SphereRollParams = parse_params("sphere_roll", v)?;
        let name = "sphere_roll";
        positive(name, "radius", p.radius)?;
        positive(name, "horizon", p.horizon)?;
        check_material(name, &p.material())?;
        let th = p.angle_deg.to_radians();
        let mut parts = ModelParts { name: name.into(), ..ModelParts::default() };
        parts.geoms.push(floor(th, &p.material()));
        let mass = 1.0;
        free_body(&mut parts, "ball", GeomShape::Sphere { radius: p.radius }, mass, 0.4 * mass * p.radius * p.radius, &p.material());
        let m = model(name, parts)?;
        let normal = UnitQuaternion::from_axis_angle(&Vec3::y_axis(), th) * Vec3::z();
        let initial = free_state(&m, normal * p.radius, Quat::identity(), Vec3::zeros(), Vec3::zeros());
        Ok(Scene {
            model: m,
            initial,
            horizon: p.horizon,
            controls: None,
            energy_allowance: 0.05,
            speed_bound: 50.0,
            analytic: vec![AnalyticValue { name: "acceleration_m_s2", value: 5.0 / 7.0 * G * th.sin(), formula: "5/7 g sin theta" }],
            task: None,
            inputs: Vec::new(),
        })
    },
};

/// A 1 kg cube of half-size [`CUBE_HALF`] above a plane tilted by `tilt` (rad).
fn cube_on_plane(
    name: &str,
    material: &Material,
    tilt: f64,
    horizon: f64,
    initial: impl FnOnce(&contactlab_solvers::Model) -> contactlab_solvers::State,
    analytic: Vec<AnalyticValue>,
) -> Result<Scene, SceneError> {
    check_material(name, material)?;
    let mut parts = ModelParts {
        name: name.into(),
        ..ModelParts::default()
    };
    parts.geoms.push(floor(tilt, material));
    free_body(
        &mut parts,
        "cube",
        GeomShape::Box {
            half: Vec3::repeat(CUBE_HALF),
        },
        1.0,
        CUBE_INERTIA,
        material,
    );
    let m = model(name, parts)?;
    let initial = initial(&m);
    Ok(Scene {
        task: None,
        inputs: Vec::new(),
        model: m,
        initial,
        horizon,
        controls: None,
        energy_allowance: 0.1,
        speed_bound: 50.0,
        analytic,
    })
}
