//! `mesh_terrain`: the `box_traversal` robot ([`WheeledRobot`]) drives on triangle-mesh
//! terrain.
//!
//! **Terrain.** Either procedural ([`crate::terrain`]: a seeded sum of `layers` sine-product
//! layers of amplitude `amplitude`, roughness `roughness`, first wavelength `wavelength`,
//! sampled on a `grid × grid`-cell grid over `extent × extent` m centred on the origin; by
//! default 80 × 80 cells over 24 × 24 m, 12,800 triangles, |h| ≤ 0.3 m), or loaded from an
//! OBJ / STL file (`mesh_file`, z up, coordinates times `mesh_scale` in m, placed as given in
//! the world). The terrain is one static geom, `terrain`, on the world body.
//!
//! **Collider** (`collider`): `trimesh` gives the geom a [`GeomShape::TriangleMesh`] (parry
//! `TriMesh`), `heightfield` a [`GeomShape::HeightField`] (parry `HeightField`; procedural
//! terrain only, as it needs a regular grid). Both hold the same triangles for a grid, but a
//! height field's triangles are solids (a wheel sunk past the surface is pushed up,
//! [`contactlab_solvers::collision::height_field`]) while the mesh's are surfaces. Either
//! way parry's shape, with its bounding-volume hierarchy, is built once, by
//! [`contactlab_solvers::Model::new`], and shared by reference count between clones of the
//! model's collision shapes; each step only queries it (a wheel's bounding box against the
//! BVH, then the triangles in reach, `solvers/src/collision/narrow_phase.rs`).
//!
//! **Start.** The chassis origin starts above `start` (m, world x, y) facing `start_yaw`
//! (degrees), set down on the terrain ([`start_pose`]): tilted to the plane of the three
//! wheels' touch-down points (parry shape casts of each wheel straight down against the
//! terrain), lowered until its first geom touches, then raised by [`START_CLEARANCE`]. The other
//! wheels are then within a few mm of the ground and the robot settles in the first steps.
//!
//! **Controls, state, task.** As `box_traversal` (frames in [`super::wheeled_robot`]): one
//! velocity command per wheel, clamped to ±`wheel_speed`; for gradient studies a
//! piecewise-linear [`super::Spline`] with `knots` knots per wheel over the horizon; the
//! default law drives every wheel at +`wheel_speed` (0.7 m/s over flat ground). The loss
//! tracks position and heading at the horizon: [`mesh_terrain_loss`] (squared distance to
//! `target` plus a weighted squared yaw error to `target_yaw`); success: [`mesh_terrain_success`]
//! (within 0.2 m, below 0.3 m/s). Default horizon 10 s, target (5, 0) m.
//!
//! **Materials.** As `box_traversal`: friction 0.8, penalty ke = 1e6 N/m, kd = 2000 N s/m,
//! kf = 1000 N s/m (see that module for the penalty stability limits).

use std::path::{Path, PathBuf};

use contactlab_solvers::collision::broad_phase::shape_pose;
use contactlab_solvers::formulation::ParamDoc;
use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::kinematics::forward_kinematics;
use contactlab_solvers::model::{Geom, ModelParts, Quat, Vec3};
use contactlab_solvers::{Model, State};
use nalgebra::UnitQuaternion;
use parry3d_f64::math::Vector as PVec;
use parry3d_f64::query::{cast_shapes, ShapeCastOptions};
use serde::{Deserialize, Serialize};

use super::wheeled_robot::{
    parse_with_robot, pose_loss, pose_success, with_robot_params, Pose2, WheeledRobot, WHEEL_GEOMS,
};
use super::{bad, material, model, non_negative, positive};
use crate::terrain::{load_terrain_mesh, ProceduralTerrain};
use crate::{Scene, SceneEntry, SceneError};

/// Height (m) of the robot's lowest point above the terrain at t = 0.
pub const START_CLEARANCE: f64 = 1e-3;

/// Name of the terrain geom.
pub const TERRAIN_GEOM: &str = "terrain";

/// Which parry shape collides with the terrain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Collider {
    /// parry `TriMesh` ([`GeomShape::TriangleMesh`]): any terrain.
    Trimesh,
    /// parry `HeightField` ([`GeomShape::HeightField`]), its triangles solids
    /// ([`contactlab_solvers::collision::height_field`]): procedural (grid) terrain only.
    Heightfield,
}

/// Parameters of `mesh_terrain` (SI units; the robot's keys sit flat beside these).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MeshTerrainParams {
    /// Simulated duration (s).
    pub horizon: f64,
    /// Knots per wheel of the control spline (≥ 2), evenly spaced over the horizon.
    pub knots: usize,
    /// Terrain file (`.obj` or `.stl`); empty for the procedural terrain.
    pub mesh_file: String,
    /// Scale of the file's coordinates to m.
    pub mesh_scale: f64,
    /// Collider of the terrain.
    pub collider: Collider,
    /// Procedural terrain amplitude A (m): |h| ≤ A.
    pub amplitude: f64,
    /// Procedural terrain roughness (-): amplitude ratio of successive layers.
    pub roughness: f64,
    /// Number of sine-product layers (≥ 1).
    pub layers: usize,
    /// Wavelength of the first layer (m); each further layer halves it.
    pub wavelength: f64,
    /// Cells per side of the procedural grid (≥ 1): 2 grid² triangles.
    pub grid: usize,
    /// Side length of the procedural grid (m), centred on the origin.
    pub extent: f64,
    /// Seed of the procedural terrain.
    pub seed: u64,
    /// Start position (x, y) of the chassis origin in the world (m).
    pub start: [f64; 2],
    /// Start yaw (degrees).
    pub start_yaw: f64,
    /// Target position (x, y) in the world (m).
    pub target: [f64; 2],
    /// Target yaw (degrees).
    pub target_yaw: f64,
    /// Sliding friction of terrain and robot (-).
    pub friction: f64,
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

impl Default for MeshTerrainParams {
    fn default() -> Self {
        Self {
            horizon: 10.0,
            knots: 10,
            mesh_file: String::new(),
            mesh_scale: 1.0,
            collider: Collider::Trimesh,
            amplitude: 0.3,
            roughness: 0.5,
            layers: 3,
            wavelength: 6.0,
            grid: 80,
            extent: 24.0,
            seed: 0,
            start: [0.0, 0.0],
            start_yaw: 0.0,
            target: [5.0, 0.0],
            target_yaw: 0.0,
            friction: 0.8,
            ke: 1.0e6,
            kd: 2000.0,
            kf: 1000.0,
            robot: WheeledRobot::default(),
        }
    }
}

impl MeshTerrainParams {
    /// The procedural terrain these parameters describe.
    pub fn procedural(&self) -> ProceduralTerrain {
        ProceduralTerrain {
            amplitude: self.amplitude,
            roughness: self.roughness,
            layers: self.layers,
            wavelength: self.wavelength,
            cells: self.grid,
            extent: self.extent,
            seed: self.seed,
        }
    }

    /// Start pose (x, y in m, yaw in rad) of the chassis origin.
    pub fn start_pose(&self) -> Pose2 {
        Pose2 {
            x: self.start[0],
            y: self.start[1],
            yaw: self.start_yaw.to_radians(),
        }
    }

    /// Target pose (x, y in m, yaw in rad) of the chassis origin.
    pub fn target_pose(&self) -> Pose2 {
        Pose2 {
            x: self.target[0],
            y: self.target[1],
            yaw: self.target_yaw.to_radians(),
        }
    }
}

/// Task loss of a `mesh_terrain` state (m²): squared horizontal distance of the chassis origin
/// to the target plus `yaw_weight` (m²/rad²) times the squared yaw error, wrapped to (−π, π].
pub fn mesh_terrain_loss(state: &State, target: &Pose2, yaw_weight: f64) -> f64 {
    pose_loss(state, target, yaw_weight)
}

/// Success of a `mesh_terrain` run: the chassis origin ends within 0.2 m of the target
/// (horizontally) and its linear speed is below 0.3 m/s.
pub fn mesh_terrain_success(state: &State, target: &Pose2) -> bool {
    pose_success(state, target)
}

/// The number of triangles of a terrain shape: a mesh's triangles, 2 per height-field cell,
/// 0 for other shapes.
pub fn face_count(shape: &GeomShape) -> usize {
    match shape {
        GeomShape::TriangleMesh { triangles, .. } => triangles.len(),
        GeomShape::HeightField { heights, .. } => {
            2 * (heights.nrows().saturating_sub(1)) * (heights.ncols().saturating_sub(1))
        }
        _ => 0,
    }
}

/// For each geom in `geoms` at configuration `q`: how far (m) it can move straight down
/// before touching the terrain geom `terrain` (parry shape cast, within `reach`), `None` if it
/// is not above the terrain.
fn drops(
    model: &Model,
    q: &nalgebra::DVector<f64>,
    terrain: usize,
    geoms: &[usize],
    reach: f64,
) -> Result<Vec<Option<f64>>, String> {
    let shapes = &model.collision_shapes;
    let kin = forward_kinematics(model, q);
    let t_pose = shape_pose(&kin, &shapes[terrain], terrain);
    let options = ShapeCastOptions {
        max_time_of_impact: reach,
        target_distance: 0.0,
        stop_at_penetration: true,
        compute_impact_geometry_on_penetration: false,
    };
    geoms
        .iter()
        .map(|&g| {
            cast_shapes(
                &shape_pose(&kin, &shapes[g], g),
                PVec::new(0.0, 0.0, -1.0),
                &*shapes[g].shape.0,
                &t_pose,
                PVec::new(0.0, 0.0, 0.0),
                &*shapes[terrain].shape.0,
                options,
            )
            .map(|hit| hit.map(|h| h.time_of_impact))
            .map_err(|_| {
                format!(
                    "parry cannot cast geom '{}' on the terrain",
                    model.geoms[g].name
                )
            })
        })
        .collect()
}

/// The chassis pose that sets the robot of `model` down on the terrain geom `terrain` at
/// `start` (module doc, "Start"): position (m, world) and orientation.
///
/// With the chassis level at yaw `start.yaw` and well above the terrain, each wheel is cast
/// straight down to the terrain; the chassis is then tilted so that its xy plane is parallel
/// to the plane through the three lowered wheel centres (the smallest rotation taking +z to
/// that plane's normal, applied after the yaw), and the tilted robot is lowered until its
/// first geom touches, then raised by [`START_CLEARANCE`].
///
/// # Errors
/// A message when a wheel is not above the terrain at `start`.
pub fn start_pose(
    model: &Model,
    robot: &WheeledRobot,
    start: &Pose2,
    terrain: usize,
) -> Result<(Vec3, Quat), String> {
    let shapes = &model.collision_shapes;
    let robot_geoms: Vec<usize> = (0..model.geoms.len())
        .filter(|&g| model.geoms[g].body != 0)
        .collect();
    let wheels: Vec<usize> = WHEEL_GEOMS
        .iter()
        .map(|w| model.geom_id(w).expect("the robot has its wheels"))
        .collect();
    let not_above = || {
        format!(
            "the robot at start ({}, {}) m is not above the terrain",
            start.x, start.y
        )
    };
    // Height at which every robot geom is 0.5 m above the terrain's top, for orientation `quat`.
    let above = |quat: &Quat| {
        let kin0 = forward_kinematics(
            model,
            &robot
                .state_at(model, &Vec3::new(start.x, start.y, 0.0), quat)
                .q,
        );
        let t_box =
            shapes[terrain]
                .shape
                .compute_aabb(&shape_pose(&kin0, &shapes[terrain], terrain));
        let lowest = robot_geoms
            .iter()
            .map(|&g| {
                shapes[g]
                    .shape
                    .compute_aabb(&shape_pose(&kin0, &shapes[g], g))
                    .mins
                    .z
            })
            .fold(f64::INFINITY, f64::min);
        (
            t_box.maxs.z - lowest + 0.5,
            t_box.maxs.z - t_box.mins.z + 1.0 - lowest.min(0.0),
        )
    };
    let level: Quat = UnitQuaternion::from_axis_angle(&Vec3::z_axis(), start.yaw);
    let (z0, reach) = above(&level);
    let q0 = robot
        .state_at(model, &Vec3::new(start.x, start.y, z0), &level)
        .q;
    let kin0 = forward_kinematics(model, &q0);
    let wheel_drops = drops(model, &q0, terrain, &wheels, reach)?;
    let mut p = Vec::with_capacity(3);
    for (&g, d) in wheels.iter().zip(&wheel_drops) {
        p.push(kin0.geom_xpos[g] - Vec3::z() * d.ok_or_else(not_above)?);
    }
    let mut n = (p[0] - p[2]).cross(&(p[1] - p[2]));
    if n.z < 0.0 {
        n = -n;
    }
    let tilt =
        UnitQuaternion::rotation_between(&Vec3::z(), &n).unwrap_or_else(UnitQuaternion::identity);
    let quat = tilt * level;
    let (z1, reach) = above(&quat);
    let q1 = robot
        .state_at(model, &Vec3::new(start.x, start.y, z1), &quat)
        .q;
    let drop = drops(model, &q1, terrain, &robot_geoms, reach)?
        .into_iter()
        .flatten()
        .fold(f64::INFINITY, f64::min);
    if !drop.is_finite() {
        return Err(not_above());
    }
    Ok((
        Vec3::new(start.x, start.y, z1 - drop + START_CLEARANCE),
        quat,
    ))
}

/// `mesh_terrain`'s own parameters followed by the robot's.
const PARAMS: [ParamDoc; 29] = with_robot_params([
    ParamDoc {
        name: "horizon",
        default: "10.0",
        unit: "s",
        doc: "simulated duration",
    },
    ParamDoc {
        name: "knots",
        default: "10",
        unit: "-",
        doc: "knots per wheel of the control spline (gradient studies)",
    },
    ParamDoc {
        name: "mesh_file",
        default: "\"\"",
        unit: "-",
        doc: "terrain .obj or .stl file (z up); empty: procedural terrain",
    },
    ParamDoc {
        name: "mesh_scale",
        default: "1.0",
        unit: "m/unit",
        doc: "scale of the file's coordinates",
    },
    ParamDoc {
        name: "collider",
        default: "trimesh",
        unit: "-",
        doc: "trimesh (parry TriMesh) or heightfield (parry HeightField, procedural terrain only)",
    },
    ParamDoc {
        name: "amplitude",
        default: "0.3",
        unit: "m",
        doc: "procedural terrain: bound on |height|",
    },
    ParamDoc {
        name: "roughness",
        default: "0.5",
        unit: "-",
        doc:
            "procedural terrain: amplitude ratio of successive layers (each of half the wavelength)",
    },
    ParamDoc {
        name: "layers",
        default: "3",
        unit: "-",
        doc: "procedural terrain: number of sine-product layers",
    },
    ParamDoc {
        name: "wavelength",
        default: "6.0",
        unit: "m",
        doc: "procedural terrain: wavelength of the first layer",
    },
    ParamDoc {
        name: "grid",
        default: "80",
        unit: "-",
        doc: "procedural terrain: cells per side (2 grid^2 triangles)",
    },
    ParamDoc {
        name: "extent",
        default: "24.0",
        unit: "m",
        doc: "procedural terrain: side of the square grid, centred on the origin",
    },
    ParamDoc {
        name: "seed",
        default: "0",
        unit: "-",
        doc: "procedural terrain: seed of layer angles and phases",
    },
    ParamDoc {
        name: "start",
        default: "[0.0, 0.0]",
        unit: "m",
        doc: "start position of the chassis origin (dropped onto the terrain)",
    },
    ParamDoc {
        name: "start_yaw",
        default: "0.0",
        unit: "deg",
        doc: "start yaw",
    },
    ParamDoc {
        name: "target",
        default: "[5.0, 0.0]",
        unit: "m",
        doc: "target position",
    },
    ParamDoc {
        name: "target_yaw",
        default: "0.0",
        unit: "deg",
        doc: "target yaw",
    },
    ParamDoc {
        name: "friction",
        default: "0.8",
        unit: "-",
        doc: "sliding friction of terrain and wheels",
    },
    ParamDoc {
        name: "ke",
        default: "1000000.0",
        unit: "N/m",
        doc: "penalty contact stiffness",
    },
    ParamDoc {
        name: "kd",
        default: "2000.0",
        unit: "N s/m",
        doc: "penalty contact damping",
    },
    ParamDoc {
        name: "kf",
        default: "1000.0",
        unit: "N s/m",
        doc: "penalty viscous friction",
    },
]);

fn build(v: &serde_json::Value) -> Result<Scene, SceneError> {
    use crate::limits::{MAX_TERRAIN_CELLS, MAX_TERRAIN_LAYERS};
    let name = "mesh_terrain";
    let (mut p, robot): (MeshTerrainParams, WheeledRobot) = parse_with_robot(name, v)?;
    p.robot = robot;
    let robot = &p.robot;
    robot.validate(name)?;
    positive(
        name,
        &[
            ("horizon", p.horizon),
            ("mesh_scale", p.mesh_scale),
            ("wavelength", p.wavelength),
            ("extent", p.extent),
            ("ke", p.ke),
        ],
    )?;
    non_negative(
        name,
        &[
            ("amplitude", p.amplitude),
            ("roughness", p.roughness),
            ("friction", p.friction),
            ("kd", p.kd),
            ("kf", p.kf),
        ],
    )?;
    let finite = p
        .start
        .iter()
        .chain(&p.target)
        .chain([&p.start_yaw, &p.target_yaw]);
    if let Some(x) = finite.into_iter().find(|x| !x.is_finite()) {
        return Err(bad(
            name,
            format!("start, target and yaws must be finite, got {x}"),
        ));
    }
    for (key, value, min) in [
        ("knots", p.knots, 2),
        ("layers", p.layers, 1),
        ("grid", p.grid, 1),
    ] {
        if value < min {
            return Err(bad(name, format!("{key} = {value} must be >= {min}")));
        }
    }
    // Sizes within the documented limits before anything is allocated from them.
    if p.layers > MAX_TERRAIN_LAYERS {
        return Err(bad(
            name,
            format!(
                "layers: {} exceeds the limit of {MAX_TERRAIN_LAYERS} layers",
                p.layers
            ),
        ));
    }
    if p.grid
        .checked_mul(p.grid)
        .is_none_or(|n| n > MAX_TERRAIN_CELLS)
    {
        return Err(bad(
            name,
            format!(
                "grid: {0} x {0} cells exceed the limit of {MAX_TERRAIN_CELLS} cells (grid <= 512)",
                p.grid
            ),
        ));
    }
    let shape = if p.mesh_file.is_empty() {
        let grid = p.procedural().sample();
        match p.collider {
            Collider::Trimesh => grid.to_triangle_mesh(),
            Collider::Heightfield => grid.to_height_field(),
        }
    } else {
        if p.collider == Collider::Heightfield {
            return Err(bad(
                name,
                format!(
                    "collider 'heightfield' needs the procedural (grid) terrain; use 'trimesh' for mesh_file '{}'",
                    p.mesh_file
                ),
            ));
        }
        load_terrain_mesh(Path::new(&p.mesh_file), p.mesh_scale)
            .map_err(|e| bad(name, e.to_string()))?
    };

    let mat = material(p.friction, p.ke, p.kd, p.kf);
    let mut parts = ModelParts {
        name: name.into(),
        ..ModelParts::default()
    };
    let mut terrain = Geom::new(TERRAIN_GEOM, 0, shape);
    terrain.material = mat;
    parts.geoms.push(terrain);
    robot.add_to(&mut parts, mat);
    let m = model(name, parts)?;

    let start = p.start_pose();
    let target = p.target_pose();
    let (pos, quat) = start_pose(&m, robot, &start, 0).map_err(|e| bad(name, e))?;
    let initial = robot.state_at(&m, &pos, &quat);
    let relief = {
        let s = &m.collision_shapes[0];
        let kin = forward_kinematics(&m, &initial.q);
        let b = s.shape.compute_aabb(&shape_pose(&kin, s, 0));
        b.maxs.z - b.mins.z
    };
    // The robot may climb the terrain's whole relief.
    let mut scene = robot.scene(m, initial, p.horizon, target, relief, None);
    if !p.mesh_file.is_empty() {
        scene.inputs.push(PathBuf::from(&p.mesh_file));
    }
    Ok(scene)
}

/// `mesh_terrain` (module documentation).
pub const MESH_TERRAIN: SceneEntry = SceneEntry {
    name: "mesh_terrain",
    description: "the box_traversal robot drives 10 s on triangle-mesh terrain (procedural 80 x 80 grid over 24 m, 12,800 triangles, or an OBJ/STL file); TriMesh or HeightField collider",
    params: &PARAMS,
    build,
};
