//! What the loader supports, element by element: the attributes it reads, the attributes it
//! accepts and skips because they do not change physics (names, rendering, user data), and the
//! physics attributes it does not implement but accepts when they hold MuJoCo's default value
//! (so that exported files that spell defaults out still load). Any other attribute is an
//! [`MjcfErrorKind::Unsupported`](super::MjcfErrorKind) error naming the supported ones.
//!
//! Defaults are from MuJoCo's XML reference (`doc/XMLreference.rst`, MuJoCo 3.x/4.0).

/// The attribute table of one element.
pub(crate) struct Spec {
    /// Tag name.
    pub tag: &'static str,
    /// Attributes the loader reads.
    pub supported: &'static [&'static str],
    /// Attributes accepted and skipped (visual, bookkeeping, user data).
    pub ignored: &'static [&'static str],
    /// Unimplemented physics attributes accepted only at MuJoCo's default value `(name, value)`.
    pub defaulted: &'static [(&'static str, &'static str)],
}

const ORIENT: [&str; 6] = ["pos", "quat", "euler", "axisangle", "xyaxes", "zaxis"];

macro_rules! list {
    ($($x:expr),* $(,)?) => { &[$($x),*] };
}

pub(crate) const COMPILER: Spec = Spec {
    tag: "compiler",
    supported: list![
        "angle",
        "eulerseq",
        "inertiafromgeom",
        "autolimits",
        "meshdir",
        "assetdir"
    ],
    ignored: list!["texturedir", "usethread", "saveinertial", "discardvisual"],
    defaulted: list![
        ("boundmass", "0"),
        ("boundinertia", "0"),
        ("settotalmass", "-1"),
        ("balanceinertia", "false"),
        ("strippath", "false"),
        ("coordinate", "local"),
        ("fitaabb", "false"),
        ("fusestatic", "false"),
        ("alignfree", "false"),
        ("inertiagrouprange", "0 5"),
        ("exactmeshinertia", "false"),
    ],
};

pub(crate) const OPTION: Spec = Spec {
    tag: "option",
    supported: list![
        "timestep",
        "gravity",
        "integrator",
        "cone",
        "impratio",
        "solver",
        "iterations",
        "tolerance",
        "ls_iterations",
        "ls_tolerance",
        "noslip_iterations",
        "noslip_tolerance"
    ],
    ignored: list!["jacobian", "magnetic", "apirate"],
    defaulted: list![
        ("wind", "0 0 0"),
        ("density", "0"),
        ("viscosity", "0"),
        ("o_margin", "0"),
        ("o_solref", "0.02 1"),
        ("o_solimp", "0.9 0.95 0.001 0.5 2"),
        ("o_friction", "1 1 0.005 0.0001 0.0001"),
        ("ccd_iterations", "50"),
        ("ccd_tolerance", "1e-6"),
        ("mpr_iterations", "50"),
        ("mpr_tolerance", "1e-6"),
        ("sleep_tolerance", "1e-3"),
        ("sdf_iterations", "10"),
        ("sdf_initpoints", "40"),
    ],
};

/// `<flag>`: the supported ones map to [`contactlab_solvers::model::DisableFlags`].
pub(crate) const FLAG: Spec = Spec {
    tag: "flag",
    supported: list![
        "warmstart",
        "refsafe",
        "contact",
        "gravity",
        "limit",
        "equality",
        "frictionloss",
        "island"
    ],
    // Flags that do not change the trajectory: sensors, energy reports, the interactive
    // simulator's auto reset, the broad phase's acceleration structure.
    ignored: list![
        "sensor",
        "energy",
        "fwdinv",
        "invdiscrete",
        "autoreset",
        "midphase"
    ],
    defaulted: list![
        ("constraint", "enable"),
        ("spring", "enable"),
        ("damper", "enable"),
        ("passive", "enable"),
        ("clampctrl", "enable"),
        ("filterparent", "enable"),
        ("actuation", "enable"),
        ("nativeccd", "enable"),
        ("eulerdamp", "enable"),
        ("override", "disable"),
        ("multiccd", "disable"),
        ("sleep", "disable"),
        ("diagexact", "disable"),
    ],
};

pub(crate) const BODY: Spec = Spec {
    tag: "body",
    supported: &[
        "name",
        "childclass",
        ORIENT[0],
        ORIENT[1],
        ORIENT[2],
        ORIENT[3],
        ORIENT[4],
        ORIENT[5],
    ],
    ignored: list!["user"],
    defaulted: list![("mocap", "false"), ("gravcomp", "0")],
};

pub(crate) const WORLDBODY: Spec = Spec {
    tag: "worldbody",
    supported: list![],
    ignored: list!["name"],
    defaulted: list![],
};

pub(crate) const INERTIAL: Spec = Spec {
    tag: "inertial",
    supported: &[
        ORIENT[0],
        ORIENT[1],
        ORIENT[2],
        ORIENT[3],
        ORIENT[4],
        ORIENT[5],
        "mass",
        "diaginertia",
        "fullinertia",
    ],
    ignored: list![],
    defaulted: list![],
};

pub(crate) const JOINT: Spec = Spec {
    tag: "joint",
    supported: list![
        "name",
        "class",
        "type",
        "pos",
        "axis",
        "range",
        "limited",
        "damping",
        "armature",
        "frictionloss",
        "stiffness",
        "springref",
        "ref",
        "margin",
        "solreflimit",
        "solimplimit",
        "solreffriction",
        "solimpfriction"
    ],
    ignored: list!["group", "user"],
    defaulted: list![
        ("springdamper", "0 0"),
        ("actuatorfrclimited", "auto"),
        ("actuatorfrcrange", "0 0"),
        ("actuatorgravcomp", "false"),
    ],
};

pub(crate) const FREEJOINT: Spec = Spec {
    tag: "freejoint",
    supported: list!["name"],
    ignored: list!["group"],
    defaulted: list![("align", "false")],
};

pub(crate) const GEOM: Spec = Spec {
    tag: "geom",
    supported: list![
        "name",
        "class",
        "type",
        "size",
        "fromto",
        "pos",
        "quat",
        "euler",
        "axisangle",
        "xyaxes",
        "zaxis",
        "mass",
        "density",
        "friction",
        "condim",
        "solref",
        "solimp",
        "solmix",
        "margin",
        "gap",
        "contype",
        "conaffinity",
        "priority",
        "mesh",
        "hfield"
    ],
    ignored: list!["group", "material", "rgba", "user"],
    defaulted: list![
        ("shellinertia", "false"),
        ("fitscale", "1"),
        ("fluidshape", "none"),
        ("fluidcoef", "0.5 0.25 1.5 1.0 1.0"),
    ],
};

pub(crate) const MESH: Spec = Spec {
    tag: "mesh",
    supported: list!["name", "class", "file", "scale", "vertex", "face", "inertia"],
    ignored: list!["content_type", "smoothnormal", "normal", "texcoord"],
    defaulted: list![
        ("refpos", "0 0 0"),
        ("refquat", "1 0 0 0"),
        ("maxhullvert", "-1"),
        ("builtin", "none")
    ],
};

pub(crate) const HFIELD: Spec = Spec {
    tag: "hfield",
    supported: list!["name", "file", "size", "nrow", "ncol", "elevation"],
    ignored: list!["content_type"],
    defaulted: list![],
};

const ACT_COMMON_DEFAULTED: [(&str, &str); 6] = [
    ("lengthrange", "0 0"),
    ("actlimited", "auto"),
    ("actrange", "0 0"),
    ("actearly", "false"),
    ("cranklength", "0"),
    ("actdim", "-1"),
];

pub(crate) const MOTOR: Spec = Spec {
    tag: "motor",
    supported: list![
        "name",
        "class",
        "joint",
        "gear",
        "ctrlrange",
        "ctrllimited",
        "forcerange",
        "forcelimited"
    ],
    ignored: list!["group", "user"],
    defaulted: &ACT_COMMON_DEFAULTED,
};

pub(crate) const POSITION: Spec = Spec {
    tag: "position",
    supported: list![
        "name",
        "class",
        "joint",
        "gear",
        "ctrlrange",
        "ctrllimited",
        "forcerange",
        "forcelimited",
        "kp",
        "kv"
    ],
    ignored: list!["group", "user"],
    defaulted: &[
        ACT_COMMON_DEFAULTED[0],
        ACT_COMMON_DEFAULTED[1],
        ACT_COMMON_DEFAULTED[2],
        ACT_COMMON_DEFAULTED[3],
        ACT_COMMON_DEFAULTED[4],
        ACT_COMMON_DEFAULTED[5],
        ("dampratio", "0"),
        ("timeconst", "0"),
        ("inheritrange", "0"),
    ],
};

pub(crate) const VELOCITY: Spec = Spec {
    tag: "velocity",
    supported: list![
        "name",
        "class",
        "joint",
        "gear",
        "ctrlrange",
        "ctrllimited",
        "forcerange",
        "forcelimited",
        "kv"
    ],
    ignored: list!["group", "user"],
    defaulted: &ACT_COMMON_DEFAULTED,
};

pub(crate) const CONNECT: Spec = Spec {
    tag: "connect",
    supported: list!["name", "class", "body1", "body2", "anchor", "solref", "solimp", "active"],
    ignored: list![],
    defaulted: list![],
};

pub(crate) const WELD: Spec = Spec {
    tag: "weld",
    supported: list![
        "name",
        "class",
        "body1",
        "body2",
        "relpose",
        "anchor",
        "torquescale",
        "solref",
        "solimp",
        "active"
    ],
    ignored: list![],
    defaulted: list![],
};

pub(crate) const EQ_JOINT: Spec = Spec {
    tag: "joint",
    supported: list!["name", "class", "joint1", "joint2", "polycoef", "solref", "solimp", "active"],
    ignored: list![],
    defaulted: list![],
};

/// Attributes of an `<equality>` child inside `<default>` (MuJoCo's `equality` default).
pub(crate) const EQ_DEFAULT: Spec = Spec {
    tag: "equality",
    supported: list!["solref", "solimp", "active"],
    ignored: list![],
    defaulted: list![],
};

pub(crate) const PAIR: Spec = Spec {
    tag: "pair",
    supported: list![
        "name",
        "class",
        "geom1",
        "geom2",
        "condim",
        "friction",
        "solref",
        "solreffriction",
        "solimp",
        "margin",
        "gap"
    ],
    ignored: list![],
    defaulted: list![],
};

pub(crate) const EXCLUDE: Spec = Spec {
    tag: "exclude",
    supported: list!["name", "body1", "body2"],
    ignored: list![],
    defaulted: list![],
};

pub(crate) const KEY: Spec = Spec {
    tag: "key",
    supported: list!["name", "time", "qpos", "qvel", "ctrl"],
    ignored: list![],
    defaulted: list![("act", ""), ("mpos", ""), ("mquat", "")],
};

pub(crate) const DEFAULT: Spec = Spec {
    tag: "default",
    supported: list!["class"],
    ignored: list![],
    defaulted: list![],
};
pub(crate) const MUJOCO: Spec = Spec {
    tag: "mujoco",
    supported: list!["model"],
    ignored: list![],
    defaulted: list![],
};
pub(crate) const NONE: Spec = Spec {
    tag: "",
    supported: list![],
    ignored: list![],
    defaulted: list![],
};

/// Elements that are visual or informational only: accepted anywhere they are valid MJCF and
/// skipped with their whole subtree.
pub(crate) const SKIPPED_ELEMENTS: &[&str] = &[
    "site",
    "camera",
    "light",
    "texture",
    "material",
    "skin",
    "visual",
    "size",
    "statistic",
    "custom",
    "sensor",
];

/// Top-level children of `<mujoco>` the loader reads.
pub(crate) const TOP_LEVEL: &[&str] = &[
    "compiler",
    "option",
    "default",
    "asset",
    "worldbody",
    "actuator",
    "equality",
    "contact",
    "keyframe",
];
/// Children of `<body>` the loader reads.
pub(crate) const BODY_CHILDREN: &[&str] = &["inertial", "joint", "freejoint", "geom", "body"];
/// Children of `<default>` the loader reads.
pub(crate) const DEFAULT_CHILDREN: &[&str] = &[
    "joint", "geom", "mesh", "motor", "position", "velocity", "equality", "pair", "default",
];
/// Supported actuator elements.
pub(crate) const ACTUATORS: &[&str] = &["motor", "position", "velocity"];
/// Supported equality elements.
pub(crate) const EQUALITIES: &[&str] = &["connect", "weld", "joint"];
/// Supported geom types.
pub(crate) const GEOM_TYPES: &[&str] = &[
    "plane",
    "hfield",
    "sphere",
    "capsule",
    "ellipsoid",
    "cylinder",
    "box",
    "mesh",
];
