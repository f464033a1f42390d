//! The static description of a mechanical system ([`Model`]) and its dynamic state ([`State`]).
//!
//! Conventions follow MuJoCo (documentation, "Overview > Computation" and `mjmodel.h`) so that
//! trajectories compare number for number:
//!
//! * SI units throughout; gravity along −z by default.
//! * Quaternions are scalar first `(w, x, y, z)` in `qpos`.
//! * Bodies form a tree rooted at body 0, the world. A body's frame is placed relative to its
//!   parent by `pos`/`quat`, then moved by its joints in order.
//! * Joints and their coordinates:
//!
//!   | kind  | nq | nv | qpos                          | qvel                                          |
//!   |-------|----|----|-------------------------------|-----------------------------------------------|
//!   | free  | 7  | 6  | world position, quaternion    | world-frame linear velocity of the body origin, body-frame angular velocity |
//!   | ball  | 4  | 3  | quaternion (child rel. parent)| body-frame angular velocity                   |
//!   | hinge | 1  | 1  | angle (rad) from `reference`  | angular rate (rad/s)                          |
//!   | slide | 1  | 1  | displacement (m) from `reference` | rate (m/s)                                |
//!
//! A [`Model`] is only constructed through [`Model::new`], which validates every element and
//! returns a [`ModelError`] naming the first bad one; a model that exists is therefore valid.

use nalgebra::{DVector, UnitQuaternion, Vector3};
use serde::{Deserialize, Serialize};

use crate::geometry::GeomShape;

/// A 3-vector in metres, newtons, etc.; the frame is stated where it is used.
pub type Vec3 = Vector3<f64>;
/// A unit quaternion (rotation). Stored scalar first in `qpos`.
pub type Quat = UnitQuaternion<f64>;

/// Errors found while validating a model. Each variant names the element (by kind and name).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// A body's mass is negative, zero with a non-zero inertia, or not finite.
    #[error("body '{body}': mass {mass} is invalid (must be finite and >= 0)")]
    BadMass {
        /// Name of the body.
        body: String,
        /// The mass given (kg).
        mass: f64,
    },
    /// A principal inertia is negative, not finite, or violates the triangle inequality.
    #[error("body '{body}': inertia {inertia:?} is invalid ({why})")]
    BadInertia {
        /// Name of the body.
        body: String,
        /// The principal moments given (kg m²).
        inertia: [f64; 3],
        /// Why it is invalid.
        why: &'static str,
    },
    /// A body refers to a parent that does not come before it.
    #[error("body '{body}': parent index {parent} must refer to an earlier body")]
    BadParent {
        /// Name of the body.
        body: String,
        /// The parent index given.
        parent: usize,
    },
    /// A joint axis has (near) zero length or is not finite.
    #[error("joint '{joint}': axis {axis:?} has zero length or is not finite")]
    ZeroAxis {
        /// Name of the joint.
        joint: String,
        /// The axis given.
        axis: [f64; 3],
    },
    /// A joint range has min > max or non-finite bounds.
    #[error("joint '{joint}': range [{min}, {max}] is invalid (need finite min <= max)")]
    BadRange {
        /// Name of the joint.
        joint: String,
        /// Lower bound given (rad or m).
        min: f64,
        /// Upper bound given (rad or m).
        max: f64,
    },
    /// A free joint that is not the only joint of a body whose parent is the world.
    #[error(
        "joint '{joint}': a free joint must be the only joint of a body whose parent is the world"
    )]
    BadFreeJoint {
        /// Name of the joint.
        joint: String,
    },
    /// A geometric size is zero, negative or not finite.
    #[error("geom '{geom}': {what} {value} must be finite and > 0")]
    BadSize {
        /// Name of the geom.
        geom: String,
        /// Which quantity.
        what: &'static str,
        /// The value given.
        value: f64,
    },
    /// A mesh or height field is malformed.
    #[error("geom '{geom}': {why}")]
    BadMesh {
        /// Name of the geom.
        geom: String,
        /// Why it is invalid.
        why: String,
    },
    /// A material parameter is out of its domain.
    #[error("{element}: {what} = {value} is invalid ({why})")]
    BadParameter {
        /// The element, e.g. `geom 'floor'`.
        element: String,
        /// Which quantity.
        what: &'static str,
        /// The value given.
        value: f64,
        /// Why it is invalid.
        why: &'static str,
    },
    /// A reference to a body, joint or geom index that does not exist.
    #[error("{element}: refers to {what} index {index}, but there are only {count}")]
    BadIndex {
        /// The element, e.g. `geom 'floor'`.
        element: String,
        /// Which quantity.
        what: &'static str,
        /// The index given.
        index: usize,
        /// How many exist.
        count: usize,
    },
    /// Two elements of the same kind share a name.
    #[error("{kind} name '{name}' is used twice")]
    DuplicateName {
        /// Element kind (body, joint, geom).
        kind: &'static str,
        /// The name.
        name: String,
    },
}

/// Global simulation options (MuJoCo `<option>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Options {
    /// Default timestep h (s); formulations may be stepped with any h.
    pub timestep: f64,
    /// Gravitational acceleration (m/s², world frame). Default (0, 0, −9.81).
    pub gravity: Vec3,
    /// Time integrator (MuJoCo `integrator`). Default Euler.
    #[serde(default)]
    pub integrator: Integrator,
    /// Friction cone (MuJoCo `cone`). Default pyramidal.
    #[serde(default)]
    pub cone: Cone,
    /// Ratio of frictional to normal constraint impedance (MuJoCo `impratio`, -). Default 1.
    #[serde(default = "default_one")]
    pub impratio: f64,
    /// Constraint solver (MuJoCo `solver`). Default Newton.
    #[serde(default)]
    pub solver: SolverKind,
    /// Maximum main-solver iterations (MuJoCo `iterations`). Default 100.
    #[serde(default = "default_iterations")]
    pub iterations: usize,
    /// Main-solver tolerance on the scaled cost improvement / gradient (MuJoCo `tolerance`, -).
    /// Default 1e-8.
    #[serde(default = "default_tolerance")]
    pub tolerance: f64,
    /// Maximum line-search iterations per solver iteration (MuJoCo `ls_iterations`). Default 50.
    #[serde(default = "default_ls_iterations")]
    pub ls_iterations: usize,
    /// Line-search tolerance (MuJoCo `ls_tolerance`, -). Default 0.01.
    #[serde(default = "default_ls_tolerance")]
    pub ls_tolerance: f64,
    /// Iterations of the no-slip post-solver; 0 disables it (MuJoCo `noslip_iterations`;
    /// soft_convex, [`crate::soft_convex::noslip`]). Default 0.
    #[serde(default)]
    pub noslip_iterations: usize,
    /// Tolerance of the no-slip post-solver on its scaled cost improvement (MuJoCo
    /// `noslip_tolerance`, -). Default 1e-6.
    #[serde(default = "default_noslip_tolerance")]
    pub noslip_tolerance: f64,
    /// Pipeline stages switched off (MuJoCo `<flag>` entries of `disableflags`). Default: none.
    #[serde(default)]
    pub disable: DisableFlags,
}

fn default_noslip_tolerance() -> f64 {
    1e-6
}

fn default_one() -> f64 {
    1.0
}
fn default_iterations() -> usize {
    100
}
fn default_tolerance() -> f64 {
    1e-8
}
fn default_ls_iterations() -> usize {
    50
}
fn default_ls_tolerance() -> f64 {
    0.01
}

impl Default for Options {
    fn default() -> Self {
        Self {
            timestep: 0.002,
            gravity: Vec3::new(0.0, 0.0, -9.81),
            integrator: Integrator::default(),
            cone: Cone::default(),
            impratio: 1.0,
            solver: SolverKind::default(),
            iterations: 100,
            tolerance: 1e-8,
            ls_iterations: 50,
            ls_tolerance: 0.01,
            noslip_iterations: 0,
            noslip_tolerance: 1e-6,
            disable: DisableFlags::default(),
        }
    }
}

/// Time integrator (MuJoCo `mjtIntegrator`; spec soft_convex §A6). Default [`Integrator::Euler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Integrator {
    /// Semi-implicit Euler, with implicit joint damping (MuJoCo `Euler`, the default).
    #[default]
    Euler,
    /// Implicit in velocity, without the Coriolis derivatives (MuJoCo `implicitfast`; written
    /// `implicitfast` as in MJCF, `implicit_fast` also accepted).
    #[serde(rename = "implicitfast", alias = "implicit_fast")]
    ImplicitFast,
    /// Implicit in velocity (MuJoCo `implicit`).
    Implicit,
    /// Fourth-order Runge-Kutta (MuJoCo `RK4`).
    Rk4,
}

/// Friction cone (MuJoCo `mjtCone`). Default [`Cone::Pyramidal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cone {
    /// Pyramidal cone: 2 (condim − 1) edge rows per contact (MuJoCo's default).
    #[default]
    Pyramidal,
    /// Elliptic (second-order) cone.
    Elliptic,
}

/// Constraint solver (MuJoCo `mjtSolver`). Default [`SolverKind::Newton`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SolverKind {
    /// Newton's method on the primal problem (MuJoCo's default).
    #[default]
    Newton,
    /// Nonlinear conjugate gradient on the primal problem.
    Cg,
    /// Projected Gauss-Seidel on the dual problem.
    Pgs,
}

/// Pipeline stages that MuJoCo's `<option><flag .../></option>` can disable (`mjtDisableBit`).
/// `true` means the stage is **disabled**; the default (all `false`) is MuJoCo's default.
/// Formulations consult these flags; the model itself keeps its data (e.g. `gravity` is not
/// zeroed when `gravity` is disabled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DisableFlags {
    /// No warm start of the constraint solver (`warmstart="disable"`).
    pub warmstart: bool,
    /// No safety clamp of solref's time constant to 2h (`refsafe="disable"`).
    pub refsafe: bool,
    /// No contacts (collision detection off) (`contact="disable"`).
    pub contact: bool,
    /// No gravity (`gravity="disable"`).
    pub gravity: bool,
    /// No joint limits (`limit="disable"`).
    pub limit: bool,
    /// No equality constraints (`equality="disable"`).
    pub equality: bool,
    /// No joint friction loss (`frictionloss="disable"`).
    pub frictionloss: bool,
    /// One constraint problem for all constrained dofs instead of one per island
    /// (`island="disable"`; soft_convex, `crate::soft_convex::islands`).
    pub island: bool,
}

/// A rigid body: where it sits in the tree, its inertia, and the joints that move it.
#[derive(Debug, Clone, PartialEq)]
pub struct Body {
    /// Unique name.
    pub name: String,
    /// Index of the parent body; body 0 (the world) is its own parent.
    pub parent: usize,
    /// Position of the body frame in the parent frame (m), before joints act.
    pub pos: Vec3,
    /// Orientation of the body frame in the parent frame, before joints act.
    pub quat: Quat,
    /// Mass (kg), ≥ 0. Zero only for massless bodies with zero inertia.
    pub mass: f64,
    /// Centre of mass in the body frame (m) (MuJoCo `ipos`).
    pub com: Vec3,
    /// Orientation of the principal axes in the body frame (MuJoCo `iquat`).
    pub inertia_frame: Quat,
    /// Principal moments of inertia about the COM (kg m²) (MuJoCo `diaginertia`).
    pub inertia: Vec3,
    /// Indices into [`Model::joints`] of this body's joints, in order of application.
    pub joints: Vec<usize>,
}

/// The kind of a joint; see the module table for coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JointKind {
    /// Six degrees of freedom.
    Free,
    /// Three rotational degrees of freedom about `pos`.
    Ball,
    /// Rotation about `axis` through `pos`.
    Hinge,
    /// Translation along `axis`.
    Slide,
}

impl JointKind {
    /// Number of position coordinates.
    pub const fn nq(self) -> usize {
        match self {
            JointKind::Free => 7,
            JointKind::Ball => 4,
            JointKind::Hinge | JointKind::Slide => 1,
        }
    }
    /// Number of velocity coordinates (degrees of freedom).
    pub const fn nv(self) -> usize {
        match self {
            JointKind::Free => 6,
            JointKind::Ball => 3,
            JointKind::Hinge | JointKind::Slide => 1,
        }
    }
}

/// MuJoCo's default solref everywhere (time constant 0.02 s, damping ratio 1) (spec §A8).
pub const DEFAULT_SOLREF: [f64; 2] = [0.02, 1.0];
/// MuJoCo's default solimp everywhere (d0 0.9, dmax 0.95, width 0.001 m, midpoint 0.5, power 2)
/// (spec §A8).
pub const DEFAULT_SOLIMP: [f64; 5] = [0.9, 0.95, 0.001, 0.5, 2.0];

/// A joint between a body and its parent.
#[derive(Debug, Clone, PartialEq)]
pub struct Joint {
    /// Unique name.
    pub name: String,
    /// Kind (free, ball, hinge, slide).
    pub kind: JointKind,
    /// The body this joint moves.
    pub body: usize,
    /// Anchor in the body frame (m); ignored by free joints.
    pub pos: Vec3,
    /// Unit axis in the body frame (hinge, slide); normalized by [`Model::new`].
    pub axis: Vec3,
    /// Limits `(min, max)` in rad or m (hinge, slide), or the maximum rotation angle `(0, max)`
    /// in rad (ball). `None`: unlimited.
    pub range: Option<(f64, f64)>,
    /// Viscous damping per dof (N m s/rad or N s/m), ≥ 0.
    pub damping: f64,
    /// Armature (rotor inertia) added to the mass matrix diagonal (kg m² or kg), ≥ 0.
    pub armature: f64,
    /// Dry friction loss per dof (N m or N), ≥ 0.
    pub frictionloss: f64,
    /// Spring stiffness towards `springref` (N m/rad or N/m), ≥ 0; hinge and slide only.
    pub stiffness: f64,
    /// Spring rest position (rad or m); hinge and slide only.
    pub springref: f64,
    /// Reference position: the qpos at which the body sits at its `pos`/`quat` (MuJoCo `ref`).
    pub reference: f64,
    /// Address of the first coordinate in `qpos` (set by [`Model::new`]).
    pub qpos_adr: usize,
    /// Address of the first dof in `qvel` (set by [`Model::new`]).
    pub dof_adr: usize,
    /// Distance (rad or m) from a limit at which the limit constraint becomes active
    /// (MuJoCo `margin`). Default 0.
    pub margin: f64,
    /// solref of the limit constraint (MuJoCo `solreflimit`). Default (0.02, 1).
    pub solref_limit: [f64; 2],
    /// solimp of the limit constraint (MuJoCo `solimplimit`). Default (0.9, 0.95, 0.001, 0.5, 2).
    pub solimp_limit: [f64; 5],
    /// solref of the friction-loss constraint (MuJoCo `solreffriction`). Default (0.02, 1).
    pub solref_friction: [f64; 2],
    /// solimp of the friction-loss constraint (MuJoCo `solimpfriction`).
    /// Default (0.9, 0.95, 0.001, 0.5, 2).
    pub solimp_friction: [f64; 5],
}

impl Joint {
    /// A joint with MuJoCo's defaults: no limits, damping, armature, friction loss or spring.
    pub fn new(name: impl Into<String>, kind: JointKind, body: usize) -> Self {
        Self {
            name: name.into(),
            kind,
            body,
            pos: Vec3::zeros(),
            axis: Vec3::z(),
            range: None,
            damping: 0.0,
            armature: 0.0,
            frictionloss: 0.0,
            stiffness: 0.0,
            springref: 0.0,
            reference: 0.0,
            qpos_adr: 0,
            dof_adr: 0,
            margin: 0.0,
            solref_limit: DEFAULT_SOLREF,
            solimp_limit: DEFAULT_SOLIMP,
            solref_friction: DEFAULT_SOLREF,
            solimp_friction: DEFAULT_SOLIMP,
        }
    }
}

/// Contact material of one geom; two geoms' materials are mixed per contact
/// (see [`crate::collision::mix_materials`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContactMaterial {
    /// Friction coefficients (sliding μ \[-\], torsional \[m\], rolling \[m\]) (MuJoCo `friction`).
    pub friction: [f64; 3],
    /// Contact dimensionality: 1 (frictionless), 3 (sliding), 4 (+torsion), 6 (+rolling).
    pub condim: u8,
    /// Soft-constraint reference (time constant s, damping ratio) or direct (−stiffness, −damping).
    pub solref: [f64; 2],
    /// Impedance (d0, dmax, width m, midpoint, power).
    pub solimp: [f64; 5],
    /// Distance (m) below which contacts become active constraints (MuJoCo `margin`).
    pub margin: f64,
    /// Subtracted from margin for activation (MuJoCo `gap`, m).
    pub gap: f64,
    /// Mixing priority (higher wins).
    pub priority: i32,
    /// Mixing weight for solref/solimp.
    pub solmix: f64,
    /// Penalty normal stiffness (N/m).
    pub ke: f64,
    /// Penalty normal damping (N s/m).
    pub kd: f64,
    /// Penalty viscous friction coefficient (N s/m).
    pub kf: f64,
    /// Penalty adhesion distance (m): attraction for 0 ≤ gap < ka.
    pub ka: f64,
}

impl Default for ContactMaterial {
    /// MuJoCo's geom defaults (spec §A8) and warp.sim's penalty defaults (spec ncp_fb §4.4).
    fn default() -> Self {
        Self {
            friction: [1.0, 0.005, 1e-4],
            condim: 3,
            solref: [0.02, 1.0],
            solimp: [0.9, 0.95, 0.001, 0.5, 2.0],
            margin: 0.0,
            gap: 0.0,
            priority: 0,
            solmix: 1.0,
            ke: 1e5,
            kd: 1e3,
            kf: 1e3,
            ka: 0.0,
        }
    }
}

/// A collision geometry attached to a body.
#[derive(Debug, Clone)]
pub struct Geom {
    /// Unique name.
    pub name: String,
    /// Body it is attached to (0: the world).
    pub body: usize,
    /// Position in the body frame (m).
    pub pos: Vec3,
    /// Orientation in the body frame. A plane's normal is its local +z; capsules and
    /// cylinders lie along their local z, as in MuJoCo.
    pub quat: Quat,
    /// Shape and sizes.
    pub shape: GeomShape,
    /// Contact type bits (MuJoCo `contype`).
    pub contype: u32,
    /// Contact affinity bits (MuJoCo `conaffinity`). Two geoms may collide iff
    /// `(ct1 & ca2) | (ct2 & ca1) != 0`.
    pub conaffinity: u32,
    /// Contact material.
    pub material: ContactMaterial,
    /// Reduce a line contact of this geom to one point (a wheel as a thin disc): when a pair
    /// with this geom yields several contacts that share one normal (a cylinder's tread along
    /// a face), they become one contact at their mean point with their smallest gap
    /// ([`crate::collision::narrow_phase::collide_pair`]). Off by default; not an MJCF
    /// attribute (MuJoCo keeps every point).
    pub line_contact_as_point: bool,
}

impl Geom {
    /// A geom with default filters (contype = conaffinity = 1) and default material.
    pub fn new(name: impl Into<String>, body: usize, shape: GeomShape) -> Self {
        Self {
            name: name.into(),
            body,
            pos: Vec3::zeros(),
            quat: Quat::identity(),
            shape,
            contype: 1,
            conaffinity: 1,
            material: ContactMaterial::default(),
            line_contact_as_point: false,
        }
    }
}

/// How an actuator turns its control into a joint force.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActuatorKind {
    /// Force (or torque) = gear · u.
    Motor,
    /// Position servo: force = kp (u − q) − kv q̇ (MuJoCo `<position>`).
    PositionServo {
        /// Position gain (N/m or N m/rad).
        kp: f64,
        /// Velocity gain (N s/m or N m s/rad).
        kv: f64,
    },
    /// Velocity servo: force = kv (u − q̇) (MuJoCo `<velocity>`).
    VelocityServo {
        /// Velocity gain (N s/m or N m s/rad).
        kv: f64,
    },
}

/// An actuator acting on one hinge or slide joint.
#[derive(Debug, Clone, PartialEq)]
pub struct Actuator {
    /// Unique name.
    pub name: String,
    /// The (hinge or slide) joint it drives: an index into [`ModelParts::joints`], remapped by
    /// [`Model::new`] to the index in [`Model::joints`] (joints are reordered by body).
    pub joint: usize,
    /// Motor or servo, with gains.
    pub kind: ActuatorKind,
    /// Transmission ratio (force = gear · actuator force).
    pub gear: f64,
    /// Control clamp `(min, max)`; `None`: unclamped.
    pub ctrl_range: Option<(f64, f64)>,
    /// Actuator force clamp `(min, max)` (N or N m); `None`: unclamped.
    pub force_range: Option<(f64, f64)>,
}

/// An equality constraint.
#[derive(Debug, Clone, PartialEq)]
pub enum Equality {
    /// A point `anchor` on `body1` (its frame, m) stays at the point of `body2` that coincides
    /// with it at `qpos0` (stored as [`Model::eq_anchor2`]); MuJoCo's `<connect>`.
    Connect {
        /// The name.
        name: String,
        /// First body (index into `bodies`).
        body1: usize,
        /// Second body (index into `bodies`).
        body2: usize,
        /// Anchor point in body1's frame (m).
        anchor: Vec3,
    },
    /// `body2` keeps the pose relative to `body1` given by `relpos` and `relquat`: body2's point
    /// `anchor` (its frame) stays at body1's point `relpos` (its frame), x2 + R2·anchor =
    /// x1 + R1·relpos, and q2 = q1 ⊗ relquat. MuJoCo's `<weld>` with `anchor`, `relpose` and
    /// `torquescale` (body semantic; `mj_instantiateEquality`); `mj_setConst` sets relpose
    /// from qpos0 when the file omits it.
    /// (Fixed: the rows read relpos and relquat the other way round, body1 in body2's frame,
    /// while the MJCF loader stored MuJoCo's; a free box welded to an arm left MuJoCo's
    /// trajectory by 5.9 in its first second.)
    Weld {
        /// The name.
        name: String,
        /// First body (index into `bodies`).
        body1: usize,
        /// Second body (index into `bodies`).
        body2: usize,
        /// The weld point in body2's frame (m); MuJoCo's `anchor`, default 0.
        anchor: Vec3,
        /// The weld point in body1's frame (m).
        relpos: Vec3,
        /// Orientation of body2 in body1's frame.
        relquat: Quat,
        /// Scale of the rotation rows' residual and Jacobian (m/rad: it weighs torque against
        /// force); MuJoCo's `torquescale`, default 1.
        torquescale: f64,
    },
    /// Joint coupling (hinge/slide only), MuJoCo's `<equality joint>`: with offsets from the
    /// joints' references (qpos0), `q1 − ref1 = Σ_k polycoef[k] (q2 − ref2)^k`. `joint1` and
    /// `joint2` index [`ModelParts::joints`] (remapped by [`Model::new`] to [`Model::joints`]).
    Joint {
        /// The name.
        name: String,
        /// The constrained joint (index into `joints`).
        joint1: usize,
        /// The driving joint (index into `joints`).
        joint2: usize,
        /// Polynomial coefficients c0 .. c4 (see the variant).
        polycoef: [f64; 5],
    },
}

impl Equality {
    /// The constraint's name.
    pub fn name(&self) -> &str {
        match self {
            Equality::Connect { name, .. }
            | Equality::Weld { name, .. }
            | Equality::Joint { name, .. } => name,
        }
    }
}

/// Soft-constraint parameters of one equality constraint (MuJoCo `eq_solref`, `eq_solimp`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EqualitySoft {
    /// Reference (time constant s, damping ratio) or direct (−stiffness, −damping). Default (0.02, 1).
    pub solref: [f64; 2],
    /// Impedance (d0, dmax, width m, midpoint, power). Default (0.9, 0.95, 0.001, 0.5, 2).
    pub solimp: [f64; 5],
}

impl Default for EqualitySoft {
    fn default() -> Self {
        Self {
            solref: DEFAULT_SOLREF,
            solimp: DEFAULT_SOLIMP,
        }
    }
}

/// An explicit contact pair (MuJoCo `<contact><pair>`): the two geoms collide with these
/// parameters instead of the mixed geom materials, regardless of contype/conaffinity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContactPair {
    /// The two geoms (indices into [`Model::geoms`]).
    pub geoms: [usize; 2],
    /// Contact dimensionality: 1, 3, 4 or 6. Default 3.
    pub condim: u8,
    /// Friction (tangent1, tangent2 \[-\], torsional \[m\], rolling1, rolling2 \[m\]).
    /// Default (1, 1, 0.005, 1e-4, 1e-4).
    pub friction: [f64; 5],
    /// solref of the normal direction. Default (0.02, 1).
    pub solref: [f64; 2],
    /// solref of the friction directions (elliptic cones only); (0, 0) means "same as solref"
    /// (MuJoCo `solreffriction`). Default (0, 0).
    pub solref_friction: [f64; 2],
    /// solimp. Default (0.9, 0.95, 0.001, 0.5, 2).
    pub solimp: [f64; 5],
    /// Distance (m) below which the contact produces force (MuJoCo `margin`). Default 0.
    pub margin: f64,
    /// Extra detection distance beyond `margin` (m) (MuJoCo `gap`). Default 0.
    pub gap: f64,
}

impl ContactPair {
    /// A pair of `geoms` with MuJoCo's `<pair>` defaults.
    pub fn new(geoms: [usize; 2]) -> Self {
        Self {
            geoms,
            condim: 3,
            friction: [1.0, 1.0, 0.005, 1e-4, 1e-4],
            solref: DEFAULT_SOLREF,
            solref_friction: [0.0, 0.0],
            solimp: DEFAULT_SOLIMP,
            margin: 0.0,
            gap: 0.0,
        }
    }
}

/// A validated mechanical model. Build it with [`Model::new`].
#[derive(Debug, Clone)]
pub struct Model {
    /// Model name.
    pub name: String,
    /// Global options.
    pub options: Options,
    /// Bodies; index 0 is the world (no mass, no joints).
    pub bodies: Vec<Body>,
    /// Joints, ordered by body; addresses into qpos/qvel are assigned in this order.
    pub joints: Vec<Joint>,
    /// Collision geometries.
    pub geoms: Vec<Geom>,
    /// Actuators; the control vector `u` has one entry per actuator.
    pub actuators: Vec<Actuator>,
    /// Equality constraints.
    pub equalities: Vec<Equality>,
    /// Number of position coordinates.
    pub nq: usize,
    /// Number of degrees of freedom.
    pub nv: usize,
    /// Joint of each dof, length nv.
    pub dof_joint: Vec<usize>,
    /// Body moved by each dof, length nv.
    pub dof_body: Vec<usize>,
    /// The previous dof on the path to the world (MuJoCo `dof_parentid`), length nv.
    pub dof_parent: Vec<Option<usize>>,
    /// Default configuration (joint references, identity quaternions), length nq.
    pub qpos0: DVector<f64>,
    /// Per equality constraint: for a connect, the anchor expressed in `body2`'s frame (m), i.e.
    /// the point of body2 that coincides with the anchor of body1 at `qpos0` (MuJoCo's compiler
    /// stores it in `eq_data[3..6]`); zero for other kinds. Set by [`Model::new`].
    pub eq_anchor2: Vec<Vec3>,
    /// The parry3d-f64 collision shape of each geom (same order as `geoms`), built once by
    /// [`Model::new`] with [`crate::collision::collision_shape`]. If a geom's `shape` is changed
    /// afterwards, rebuild its entry with that function.
    pub collision_shapes: Vec<crate::collision::CollisionShape>,
    /// Soft-constraint parameters of each equality, parallel to `equalities` (same length).
    pub equality_soft: Vec<EqualitySoft>,
    /// Explicit contact pairs (MuJoCo `<pair>`), checked in addition to the filtered geom pairs.
    pub pairs: Vec<ContactPair>,
    /// Body pairs `(body1, body2)` whose geoms never collide (MuJoCo `<exclude>`), applied to
    /// the filtered geom pairs (not to explicit `pairs`).
    pub excludes: Vec<(usize, usize)>,
}

/// Unvalidated parts of a model, assembled by a scene builder or a model-file loader.
#[derive(Debug, Clone, Default)]
pub struct ModelParts {
    /// Model name.
    pub name: String,
    /// Global options.
    pub options: Options,
    /// Bodies excluding the world (the world is added as body 0; refer to it as parent 0).
    pub bodies: Vec<Body>,
    /// Joints; each lists its body. Body joint lists are rebuilt from these.
    pub joints: Vec<Joint>,
    /// Geoms.
    pub geoms: Vec<Geom>,
    /// Actuators.
    pub actuators: Vec<Actuator>,
    /// Equality constraints.
    pub equalities: Vec<Equality>,
    /// Soft-constraint parameters of the equalities, parallel to `equalities`; may be shorter
    /// (missing entries get MuJoCo's defaults, [`EqualitySoft::default`]), not longer.
    pub equality_soft: Vec<EqualitySoft>,
    /// Explicit contact pairs (MuJoCo `<pair>`).
    pub pairs: Vec<ContactPair>,
    /// Excluded body pairs (MuJoCo `<exclude>`), body indices as in the final model (world 0).
    pub excludes: Vec<(usize, usize)>,
}

impl Body {
    /// A body with the given parent, placed at `pos`, with mass `mass` (kg) and principal
    /// inertia `inertia` (kg m²) at its origin.
    pub fn new(
        name: impl Into<String>,
        parent: usize,
        pos: Vec3,
        mass: f64,
        inertia: Vec3,
    ) -> Self {
        Self {
            name: name.into(),
            parent,
            pos,
            quat: Quat::identity(),
            mass,
            com: Vec3::zeros(),
            inertia_frame: Quat::identity(),
            inertia,
            joints: Vec::new(),
        }
    }

    fn world() -> Self {
        Body::new("world", 0, Vec3::zeros(), 0.0, Vec3::zeros())
    }
}

fn finite3(v: &Vec3) -> bool {
    v.iter().all(|x| x.is_finite())
}

impl Model {
    /// Validate `parts` and assemble a model.
    ///
    /// Bodies in `parts` are numbered from 1 (body 0 is the world), and each must come after
    /// its parent. Joints are reordered by body (stable), and qpos/qvel addresses assigned.
    ///
    /// # Errors
    /// The first invalid element found, as a [`ModelError`] naming it.
    pub fn new(parts: ModelParts) -> Result<Self, ModelError> {
        let ModelParts {
            name,
            options,
            bodies: user_bodies,
            joints: user_joints,
            geoms,
            actuators,
            equalities,
            mut equality_soft,
            pairs,
            excludes,
        } = parts;
        validate_options(&options)?;
        if !finite3(&options.gravity) {
            return Err(bad_param("option", "gravity", f64::NAN, "must be finite"));
        }
        if !(options.timestep.is_finite() && options.timestep > 0.0) {
            return Err(bad_param(
                "option",
                "timestep",
                options.timestep,
                "must be finite and > 0",
            ));
        }
        let mut bodies = Vec::with_capacity(user_bodies.len() + 1);
        bodies.push(Body::world());
        bodies.extend(user_bodies);
        let nbody = bodies.len();
        let mut names = std::collections::HashSet::new();
        for (i, b) in bodies.iter_mut().enumerate().skip(1) {
            if !names.insert(b.name.clone()) {
                return Err(ModelError::DuplicateName {
                    kind: "body",
                    name: b.name.clone(),
                });
            }
            if b.parent >= i {
                return Err(ModelError::BadParent {
                    body: b.name.clone(),
                    parent: b.parent,
                });
            }
            validate_inertia(b)?;
            if !finite3(&b.pos) || !finite3(&b.com) || !b.quat.coords.iter().all(|x| x.is_finite())
            {
                return Err(bad_param(
                    &format!("body '{}'", b.name),
                    "pos/com/quat",
                    f64::NAN,
                    "must be finite",
                ));
            }
            b.joints.clear();
        }

        // Joints sorted by body (stable), addresses assigned. Actuators and joint equalities
        // refer to joints by their index in `parts.joints`; remap them to the sorted order.
        let njnt = user_joints.len();
        let mut order: Vec<usize> = (0..njnt).collect();
        order.sort_by_key(|&i| user_joints[i].body);
        let mut new_index = vec![0; njnt];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = new;
        }
        let remap = |i: usize| if i < njnt { new_index[i] } else { i };
        let mut slots: Vec<Option<Joint>> = user_joints.into_iter().map(Some).collect();
        let mut joints: Vec<Joint> = order
            .iter()
            .map(|&i| slots[i].take().expect("permutation"))
            .collect();
        let mut actuators = actuators;
        for a in &mut actuators {
            a.joint = remap(a.joint);
        }
        let mut equalities = equalities;
        for e in &mut equalities {
            if let Equality::Joint { joint1, joint2, .. } = e {
                *joint1 = remap(*joint1);
                *joint2 = remap(*joint2);
            }
        }
        let (mut nq, mut nv) = (0, 0);
        let mut dof_joint = Vec::new();
        let mut qpos0 = Vec::new();
        let mut jnames = std::collections::HashSet::new();
        for (ji, j) in joints.iter_mut().enumerate() {
            if !jnames.insert(j.name.clone()) {
                return Err(ModelError::DuplicateName {
                    kind: "joint",
                    name: j.name.clone(),
                });
            }
            let elem = format!("joint '{}'", j.name);
            if j.body == 0 || j.body >= nbody {
                return Err(ModelError::BadIndex {
                    element: elem,
                    what: "body",
                    index: j.body,
                    count: nbody,
                });
            }
            if matches!(j.kind, JointKind::Hinge | JointKind::Slide) {
                let n = j.axis.norm();
                if !(n.is_finite() && n > 1e-12) {
                    return Err(ModelError::ZeroAxis {
                        joint: j.name.clone(),
                        axis: j.axis.into(),
                    });
                }
                j.axis /= n;
            }
            if let Some((lo, hi)) = j.range {
                if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
                    return Err(ModelError::BadRange {
                        joint: j.name.clone(),
                        min: lo,
                        max: hi,
                    });
                }
            }
            for (what, v) in [
                ("damping", j.damping),
                ("armature", j.armature),
                ("frictionloss", j.frictionloss),
                ("stiffness", j.stiffness),
            ] {
                if !(v.is_finite() && v >= 0.0) {
                    return Err(bad_param(&elem, what, v, "must be finite and >= 0"));
                }
            }
            if !j.springref.is_finite() || !j.reference.is_finite() || !finite3(&j.pos) {
                return Err(bad_param(
                    &elem,
                    "pos/springref/ref",
                    f64::NAN,
                    "must be finite",
                ));
            }
            if !j.margin.is_finite()
                || j.solref_limit
                    .iter()
                    .chain(&j.solref_friction)
                    .chain(&j.solimp_limit)
                    .chain(&j.solimp_friction)
                    .any(|v| !v.is_finite())
            {
                return Err(bad_param(
                    &elem,
                    "margin/solref/solimp",
                    f64::NAN,
                    "must be finite",
                ));
            }
            j.qpos_adr = nq;
            j.dof_adr = nv;
            nq += j.kind.nq();
            nv += j.kind.nv();
            dof_joint.extend(std::iter::repeat_n(ji, j.kind.nv()));
            match j.kind {
                JointKind::Free => {
                    let b = &bodies[j.body];
                    qpos0.extend([
                        b.pos.x, b.pos.y, b.pos.z, b.quat.w, b.quat.i, b.quat.j, b.quat.k,
                    ]);
                }
                JointKind::Ball => qpos0.extend([1.0, 0.0, 0.0, 0.0]),
                JointKind::Hinge | JointKind::Slide => qpos0.push(j.reference),
            }
            bodies[j.body].joints.push(ji);
        }
        for j in &joints {
            if j.kind == JointKind::Free
                && (bodies[j.body].joints.len() != 1 || bodies[j.body].parent != 0)
            {
                return Err(ModelError::BadFreeJoint {
                    joint: j.name.clone(),
                });
            }
        }

        let mut gnames = std::collections::HashSet::new();
        let mut collision_shapes = Vec::with_capacity(geoms.len());
        for g in &geoms {
            if !gnames.insert(g.name.clone()) {
                return Err(ModelError::DuplicateName {
                    kind: "geom",
                    name: g.name.clone(),
                });
            }
            if g.body >= nbody {
                return Err(ModelError::BadIndex {
                    element: format!("geom '{}'", g.name),
                    what: "body",
                    index: g.body,
                    count: nbody,
                });
            }
            // Validates the shape (sizes, meshes) and builds its parry shape, once per model.
            collision_shapes.push(crate::collision::collision_shape(&g.name, &g.shape)?);
            validate_material(&g.name, &g.material)?;
        }
        for a in &actuators {
            let elem = format!("actuator '{}'", a.name);
            let Some(j) = joints.get(a.joint) else {
                return Err(ModelError::BadIndex {
                    element: elem,
                    what: "joint",
                    index: a.joint,
                    count: joints.len(),
                });
            };
            if !matches!(j.kind, JointKind::Hinge | JointKind::Slide) {
                return Err(bad_param(
                    &elem,
                    "joint",
                    a.joint as f64,
                    "actuators drive hinge or slide joints",
                ));
            }
            if !a.gear.is_finite() {
                return Err(bad_param(&elem, "gear", a.gear, "must be finite"));
            }
            for (what, r) in [("ctrlrange", a.ctrl_range), ("forcerange", a.force_range)] {
                if let Some((lo, hi)) = r {
                    if !(lo <= hi) {
                        return Err(bad_param(&elem, what, lo, "need min <= max"));
                    }
                }
            }
        }
        for e in &equalities {
            let elem = format!("equality '{}'", e.name());
            let (a, b, what, count) = match e {
                Equality::Connect { body1, body2, .. } | Equality::Weld { body1, body2, .. } => {
                    (*body1, *body2, "body", nbody)
                }
                Equality::Joint { joint1, joint2, .. } => (*joint1, *joint2, "joint", joints.len()),
            };
            for idx in [a, b] {
                if idx >= count {
                    return Err(ModelError::BadIndex {
                        element: elem.clone(),
                        what,
                        index: idx,
                        count,
                    });
                }
            }
            if let Equality::Joint { polycoef, .. } = e {
                for idx in [a, b] {
                    if !matches!(joints[idx].kind, JointKind::Hinge | JointKind::Slide) {
                        return Err(bad_param(
                            &elem,
                            "joint",
                            idx as f64,
                            "joint equalities couple hinge or slide joints",
                        ));
                    }
                }
                if polycoef.iter().any(|c| !c.is_finite()) {
                    return Err(bad_param(&elem, "polycoef", f64::NAN, "must be finite"));
                }
            }
        }
        if equality_soft.len() > equalities.len() {
            return Err(bad_param(
                "model",
                "equality_soft",
                equality_soft.len() as f64,
                "longer than equalities",
            ));
        }
        equality_soft.resize(equalities.len(), EqualitySoft::default());
        for (e, soft) in equalities.iter().zip(&equality_soft) {
            if soft
                .solref
                .iter()
                .chain(&soft.solimp)
                .any(|v| !v.is_finite())
            {
                return Err(bad_param(
                    &format!("equality '{}'", e.name()),
                    "solref/solimp",
                    f64::NAN,
                    "must be finite",
                ));
            }
        }
        for (i, p) in pairs.iter().enumerate() {
            let elem = format!("contact pair {i}");
            for g in p.geoms {
                if g >= geoms.len() {
                    return Err(ModelError::BadIndex {
                        element: elem,
                        what: "geom",
                        index: g,
                        count: geoms.len(),
                    });
                }
            }
            if ![1, 3, 4, 6].contains(&p.condim) {
                return Err(bad_param(
                    &elem,
                    "condim",
                    p.condim as f64,
                    "must be 1, 3, 4 or 6",
                ));
            }
            if let Some(&f) = p.friction.iter().find(|f| !(f.is_finite() && **f >= 0.0)) {
                return Err(bad_param(
                    &elem,
                    "friction",
                    f,
                    "friction must be finite and >= 0",
                ));
            }
            if !p.margin.is_finite()
                || !p.gap.is_finite()
                || p.solref
                    .iter()
                    .chain(&p.solref_friction)
                    .chain(&p.solimp)
                    .any(|v| !v.is_finite())
            {
                return Err(bad_param(
                    &elem,
                    "margin/gap/solref/solimp",
                    f64::NAN,
                    "must be finite",
                ));
            }
        }
        for &(a, b) in &excludes {
            for idx in [a, b] {
                if idx >= nbody {
                    return Err(ModelError::BadIndex {
                        element: "contact exclude".into(),
                        what: "body",
                        index: idx,
                        count: nbody,
                    });
                }
            }
        }
        let dof_body: Vec<usize> = dof_joint.iter().map(|&j| joints[j].body).collect();
        // Last dof of each body's chain (None for bodies welded to the world).
        let mut body_last_dof: Vec<Option<usize>> = vec![None; nbody];
        let mut dof_parent = vec![None; nv];
        for b in 1..nbody {
            let mut last = body_last_dof[bodies[b].parent];
            for &ji in &bodies[b].joints {
                let j = &joints[ji];
                for d in j.dof_adr..j.dof_adr + j.kind.nv() {
                    dof_parent[d] = last;
                    last = Some(d);
                }
            }
            body_last_dof[b] = last;
        }
        let mut model = Self {
            name,
            options,
            bodies,
            joints,
            geoms,
            actuators,
            equalities,
            nq,
            nv,
            dof_joint,
            dof_body,
            dof_parent,
            qpos0: DVector::from_vec(qpos0),
            eq_anchor2: Vec::new(),
            collision_shapes,
            equality_soft,
            pairs,
            excludes,
        };
        let kin = crate::kinematics::forward_kinematics(&model, &model.qpos0);
        model.eq_anchor2 = model
            .equalities
            .iter()
            .map(|e| match e {
                Equality::Connect {
                    body1,
                    body2,
                    anchor,
                    ..
                } => {
                    let p = kin.xpos[*body1] + kin.xquat[*body1] * anchor;
                    kin.xquat[*body2].inverse() * (p - kin.xpos[*body2])
                }
                _ => Vec3::zeros(),
            })
            .collect();
        Ok(model)
    }

    /// Index of the body called `name`.
    pub fn body_id(&self, name: &str) -> Option<usize> {
        self.bodies.iter().position(|b| b.name == name)
    }
    /// Index of the joint called `name`.
    pub fn joint_id(&self, name: &str) -> Option<usize> {
        self.joints.iter().position(|j| j.name == name)
    }
    /// Index of the geom called `name`.
    pub fn geom_id(&self, name: &str) -> Option<usize> {
        self.geoms.iter().position(|g| g.name == name)
    }
    /// The state at `qpos0`, at rest, t = 0.
    pub fn default_state(&self) -> State {
        State {
            q: self.qpos0.clone(),
            v: DVector::zeros(self.nv),
            t: 0.0,
        }
    }
    /// True if body `a` is `b` or an ancestor of `b`.
    pub fn is_ancestor(&self, a: usize, mut b: usize) -> bool {
        loop {
            if a == b {
                return true;
            }
            if b == 0 {
                return false;
            }
            b = self.bodies[b].parent;
        }
    }
}

fn bad_param(element: &str, what: &'static str, value: f64, why: &'static str) -> ModelError {
    ModelError::BadParameter {
        element: element.to_string(),
        what,
        value,
        why,
    }
}

fn validate_options(o: &Options) -> Result<(), ModelError> {
    for (what, v) in [
        ("impratio", o.impratio),
        ("tolerance", o.tolerance),
        ("ls_tolerance", o.ls_tolerance),
        ("noslip_tolerance", o.noslip_tolerance),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(bad_param("option", what, v, "must be finite and >= 0"));
        }
    }
    if o.impratio < 1e-10 {
        return Err(bad_param(
            "option",
            "impratio",
            o.impratio,
            "must be positive",
        ));
    }
    Ok(())
}

fn validate_inertia(b: &Body) -> Result<(), ModelError> {
    if !(b.mass.is_finite() && b.mass >= 0.0) {
        return Err(ModelError::BadMass {
            body: b.name.clone(),
            mass: b.mass,
        });
    }
    let i = b.inertia;
    let arr: [f64; 3] = i.into();
    if !finite3(&i) {
        return Err(ModelError::BadInertia {
            body: b.name.clone(),
            inertia: arr,
            why: "not finite",
        });
    }
    if i.iter().any(|&x| x < 0.0) {
        return Err(ModelError::BadInertia {
            body: b.name.clone(),
            inertia: arr,
            why: "negative moment",
        });
    }
    // Triangle inequality of principal moments (with a relative slack for round-off).
    let tol = 1e-9 * (i.x + i.y + i.z);
    if i.x + i.y < i.z - tol || i.y + i.z < i.x - tol || i.z + i.x < i.y - tol {
        return Err(ModelError::BadInertia {
            body: b.name.clone(),
            inertia: arr,
            why: "violates the triangle inequality",
        });
    }
    if b.mass == 0.0 && i.norm() > 0.0 {
        return Err(ModelError::BadMass {
            body: b.name.clone(),
            mass: b.mass,
        });
    }
    Ok(())
}

fn validate_material(geom: &str, m: &ContactMaterial) -> Result<(), ModelError> {
    let elem = format!("geom '{geom}'");
    for (what, v) in [
        ("friction[0]", m.friction[0]),
        ("friction[1]", m.friction[1]),
        ("friction[2]", m.friction[2]),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(bad_param(
                &elem,
                what,
                v,
                "friction must be finite and >= 0",
            ));
        }
    }
    // MuJoCo's margin and gap are distances (m) that widen detection and the active range
    // (XML reference, geom/@margin and @gap); a negative margin would drop contacts of bodies
    // already in penetration.
    for (what, v) in [("margin", m.margin), ("gap", m.gap)] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(bad_param(&elem, what, v, "must be finite and >= 0 (m)"));
        }
    }
    if ![1, 3, 4, 6].contains(&m.condim) {
        return Err(bad_param(
            &elem,
            "condim",
            m.condim as f64,
            "must be 1, 3, 4 or 6",
        ));
    }
    for (what, v) in [
        ("ke", m.ke),
        ("kd", m.kd),
        ("kf", m.kf),
        ("ka", m.ka),
        ("solmix", m.solmix),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(bad_param(&elem, what, v, "must be finite and >= 0"));
        }
    }
    for (what, v) in [("margin", m.margin), ("gap", m.gap)] {
        if !v.is_finite() {
            return Err(bad_param(&elem, what, v, "must be finite"));
        }
    }
    if m.solref
        .iter()
        .chain(m.solimp.iter())
        .any(|v| !v.is_finite())
    {
        return Err(bad_param(
            &elem,
            "solref/solimp",
            f64::NAN,
            "must be finite",
        ));
    }
    Ok(())
}

/// The dynamic state of a model: generalized positions, velocities and time.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct State {
    /// Generalized positions, length nq (see the module table).
    pub q: DVector<f64>,
    /// Generalized velocities, length nv.
    pub v: DVector<f64>,
    /// Simulated time (s).
    pub t: f64,
}

impl State {
    /// True if every coordinate and the time are finite.
    pub fn is_finite(&self) -> bool {
        self.t.is_finite()
            && self.q.iter().all(|x| x.is_finite())
            && self.v.iter().all(|x| x.is_finite())
    }
}
