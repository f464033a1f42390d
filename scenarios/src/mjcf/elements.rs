//! `<compiler>`, `<option>`/`<flag>`, `<actuator>`, `<equality>`, `<contact>` and `<keyframe>`.

use std::path::PathBuf;

use contactlab_solvers::kinematics::forward_kinematics;
use contactlab_solvers::model::{
    Actuator, ActuatorKind, Cone, ContactPair, EqualitySoft, Integrator, Options, SolverKind, Vec3,
    DEFAULT_SOLIMP, DEFAULT_SOLREF,
};
use contactlab_solvers::model::{Equality, JointKind, Quat};
use contactlab_solvers::{Model, State};
use nalgebra::{DVector, UnitQuaternion};
use roxmltree::Node;

use super::bodies::Built;
use super::error::{MjcfError, MjcfErrorKind};
use super::{schema, Ctx};

/// `compiler inertiafromgeom`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InertiaFromGeom {
    False,
    True,
    Auto,
}

/// The `<compiler>` settings the loader uses (MuJoCo defaults).
#[derive(Debug, Clone)]
pub(crate) struct Compiler {
    /// Angles in degrees (default) or radians.
    pub degree: bool,
    /// Euler sequence, default `xyz`.
    pub eulerseq: [u8; 3],
    pub inertiafromgeom: InertiaFromGeom,
    /// Infer `limited` from the presence of `range` (default true).
    pub autolimits: bool,
    pub meshdir: Option<PathBuf>,
    pub assetdir: Option<PathBuf>,
}

impl Default for Compiler {
    fn default() -> Self {
        Self {
            degree: true,
            eulerseq: *b"xyz",
            inertiafromgeom: InertiaFromGeom::Auto,
            autolimits: true,
            meshdir: None,
            assetdir: None,
        }
    }
}

impl Compiler {
    pub fn read<'a, 'i>(&mut self, ctx: &Ctx<'a, 'i>, c: Node<'a, 'i>) -> Result<(), MjcfError> {
        ctx.check_attrs(c, &schema::COMPILER)?;
        const T: &str = "compiler";
        if let Some(a) = ctx.choice(c, T, "angle", &["degree", "radian"])? {
            self.degree = a == "degree";
        }
        if let Some(s) = ctx.str(c, T, "eulerseq")? {
            let b = s.as_bytes();
            if b.len() != 3 || !b.iter().all(|x| b"xyzXYZ".contains(x)) {
                return Err(ctx.err(
                    c,
                    MjcfErrorKind::Invalid,
                    format!("eulerseq \"{s}\" must be 3 characters from x, y, z, X, Y, Z"),
                ));
            }
            self.eulerseq = [b[0], b[1], b[2]];
        }
        if let Some(v) = ctx.choice(c, T, "inertiafromgeom", &["false", "true", "auto"])? {
            self.inertiafromgeom = match v {
                "false" => InertiaFromGeom::False,
                "true" => InertiaFromGeom::True,
                _ => InertiaFromGeom::Auto,
            };
        }
        if let Some(v) = ctx.bool(c, T, "autolimits")? {
            self.autolimits = v;
        }
        if let Some(v) = c.attribute("meshdir") {
            self.meshdir = Some(PathBuf::from(v));
        }
        if let Some(v) = c.attribute("assetdir") {
            self.assetdir = Some(PathBuf::from(v));
        }
        Ok(())
    }
}

/// `<option>` and its `<flag>` children (several `<option>` elements accumulate).
pub(crate) fn options<'a, 'i>(ctx: &Ctx<'a, 'i>, root: Node<'a, 'i>) -> Result<Options, MjcfError> {
    const T: &str = "option";
    let mut o = Options::default();
    for n in root.children().filter(|n| n.has_tag_name("option")) {
        ctx.check_attrs(n, &schema::OPTION)?;
        if let Some(v) = ctx.f64(n, T, "timestep")? {
            o.timestep = v;
        }
        if let Some(v) = ctx.exact::<3>(n, T, "gravity")? {
            o.gravity = Vec3::from(v);
        }
        if let Some(v) = ctx.choice(
            n,
            T,
            "integrator",
            &["Euler", "implicitfast", "implicit", "RK4"],
        )? {
            o.integrator = match v {
                "Euler" => Integrator::Euler,
                "implicitfast" => Integrator::ImplicitFast,
                "implicit" => Integrator::Implicit,
                _ => Integrator::Rk4,
            };
        }
        if let Some(v) = ctx.choice(n, T, "cone", &["pyramidal", "elliptic"])? {
            o.cone = if v == "elliptic" {
                Cone::Elliptic
            } else {
                Cone::Pyramidal
            };
        }
        if let Some(v) = ctx.choice(n, T, "solver", &["Newton", "CG", "PGS"])? {
            o.solver = match v {
                "Newton" => SolverKind::Newton,
                "CG" => SolverKind::Cg,
                _ => SolverKind::Pgs,
            };
        }
        if let Some(v) = ctx.f64(n, T, "impratio")? {
            o.impratio = v;
        }
        if let Some(v) = ctx.f64(n, T, "tolerance")? {
            o.tolerance = v;
        }
        if let Some(v) = ctx.f64(n, T, "ls_tolerance")? {
            o.ls_tolerance = v;
        }
        if let Some(v) = ctx.f64(n, T, "noslip_tolerance")? {
            o.noslip_tolerance = v;
        }
        let count = |a: &str| -> Result<Option<usize>, MjcfError> {
            match ctx.int(n, T, a)? {
                None => Ok(None),
                Some(v) if v >= 0 => Ok(Some(v as usize)),
                Some(v) => Err(ctx.err(
                    n,
                    MjcfErrorKind::Invalid,
                    format!("'{a}' = {v} must be >= 0"),
                )),
            }
        };
        if let Some(v) = count("iterations")? {
            o.iterations = v;
        }
        if let Some(v) = count("ls_iterations")? {
            o.ls_iterations = v;
        }
        if let Some(v) = count("noslip_iterations")? {
            o.noslip_iterations = v;
        }
        for c in n.children().filter(Node::is_element) {
            if c.tag_name().name() != "flag" {
                return Err(ctx.unsupported_element(c, &["flag"]));
            }
            ctx.check_attrs(c, &schema::FLAG)?;
            for a in c.attributes() {
                if !matches!(a.value(), "enable" | "disable") {
                    return Err(ctx.err(
                        c,
                        MjcfErrorKind::Invalid,
                        format!(
                            "flag {}=\"{}\" must be enable or disable",
                            a.name(),
                            a.value()
                        ),
                    ));
                }
                let off = a.value() == "disable";
                let d = &mut o.disable;
                match a.name() {
                    "warmstart" => d.warmstart = off,
                    "refsafe" => d.refsafe = off,
                    "contact" => d.contact = off,
                    "gravity" => d.gravity = off,
                    "limit" => d.limit = off,
                    "equality" => d.equality = off,
                    "frictionloss" => d.frictionloss = off,
                    "island" => d.island = off,
                    _ => {}
                }
            }
        }
    }
    Ok(o)
}

/// `<actuator>`: motor, position and velocity actuators on hinge or slide joints.
pub(crate) fn actuators<'a, 'i>(
    ctx: &Ctx<'a, 'i>,
    root: Node<'a, 'i>,
    built: &Built,
) -> Result<Vec<Actuator>, MjcfError> {
    let mut out: Vec<Actuator> = Vec::new();
    let mut names = std::collections::HashMap::new();
    for sec in root.children().filter(|n| n.has_tag_name("actuator")) {
        ctx.check_attrs(sec, &schema::NONE)?;
        for n in sec.children().filter(Node::is_element) {
            let tag = n.tag_name().name();
            let spec = match tag {
                "motor" => &schema::MOTOR,
                "position" => &schema::POSITION,
                "velocity" => &schema::VELOCITY,
                _ => return Err(ctx.unsupported_element(n, schema::ACTUATORS)),
            };
            ctx.check_attrs(n, spec)?;
            let Some(jn) = n.attribute("joint") else {
                return Err(ctx.err(
                    n,
                    MjcfErrorKind::Unsupported,
                    "only joint transmissions are supported: give 'joint' (tendon, site, body transmissions are not supported)",
                ));
            };
            let Some(&joint) = built.joint_names.get(jn) else {
                return Err(ctx.err(n, MjcfErrorKind::Invalid, format!("unknown joint '{jn}'")));
            };
            if !matches!(
                built.joints[joint].kind,
                JointKind::Hinge | JointKind::Slide
            ) {
                return Err(ctx.err(
                    n,
                    MjcfErrorKind::Unsupported,
                    format!("joint '{jn}': actuators drive hinge or slide joints only"),
                ));
            }
            let gear = ctx.merged(n, tag, "gear", &[1.0, 0.0, 0.0, 0.0, 0.0, 0.0])?;
            if gear[1..].iter().any(|g| *g != 0.0) {
                return Err(ctx.err(
                    n,
                    MjcfErrorKind::Unsupported,
                    "gear has 6 numbers; on a joint only the first may be non-zero",
                ));
            }
            let range = |lim: &str, rng: &str| -> Result<Option<(f64, f64)>, MjcfError> {
                let r = ctx.exact::<2>(n, tag, rng)?;
                let on = match ctx
                    .choice(n, tag, lim, &["true", "false", "auto"])?
                    .unwrap_or("auto")
                {
                    "true" => true,
                    "false" => false,
                    _ => ctx.compiler.autolimits && r.is_some(),
                };
                match (on, r) {
                    (false, _) => Ok(None),
                    (true, Some([lo, hi])) if lo < hi => Ok(Some((lo, hi))),
                    (true, Some([lo, hi])) => Err(ctx.err(
                        n,
                        MjcfErrorKind::Invalid,
                        format!("{rng} [{lo}, {hi}] needs min < max"),
                    )),
                    (true, None) => Err(ctx.err(
                        n,
                        MjcfErrorKind::Invalid,
                        format!("{lim}=\"true\" needs '{rng}'"),
                    )),
                }
            };
            let ctrl_range = range("ctrllimited", "ctrlrange")?;
            let force_range = range("forcelimited", "forcerange")?;
            let kind = match tag {
                "motor" => ActuatorKind::Motor,
                "position" => ActuatorKind::PositionServo {
                    kp: ctx.f64(n, tag, "kp")?.unwrap_or(1.0),
                    kv: ctx.f64(n, tag, "kv")?.unwrap_or(0.0),
                },
                _ => ActuatorKind::VelocityServo {
                    kv: ctx.f64(n, tag, "kv")?.unwrap_or(1.0),
                },
            };
            if tag != "motor" && gear[0] != 1.0 {
                return Err(ctx.err(
                    n,
                    MjcfErrorKind::Unsupported,
                    "servos with gear != 1 are not supported (the model's servo law acts on the joint coordinate); use gear=\"1\" or a motor",
                ));
            }
            let idx = out.len();
            let name = n
                .attribute("name")
                .map(str::to_string)
                .unwrap_or_else(|| format!("actuator{idx}"));
            let name = super::unique_name(&mut names, name, idx);
            out.push(Actuator {
                name,
                joint,
                kind,
                gear: gear[0],
                ctrl_range,
                force_range,
            });
        }
    }
    Ok(out)
}

/// `<equality>`: connect, weld, joint. Inactive ones (`active="false"`) are left out. Welds
/// without `relpose` get their relative pose at `qpos0` later ([`resolve_welds`]); the
/// returned flags say which (parallel to the equalities).
pub(crate) fn equalities<'a, 'i>(
    ctx: &Ctx<'a, 'i>,
    root: Node<'a, 'i>,
    built: &Built,
) -> Result<(Vec<Equality>, Vec<EqualitySoft>, Vec<bool>), MjcfError> {
    let (mut eqs, mut soft, mut pending) = (Vec::new(), Vec::new(), Vec::new());
    let mut names = std::collections::HashMap::new();
    for sec in root.children().filter(|n| n.has_tag_name("equality")) {
        ctx.check_attrs(sec, &schema::NONE)?;
        for n in sec.children().filter(Node::is_element) {
            let tag = n.tag_name().name();
            let spec = match tag {
                "connect" => &schema::CONNECT,
                "weld" => &schema::WELD,
                "joint" => &schema::EQ_JOINT,
                _ => return Err(ctx.unsupported_element(n, schema::EQUALITIES)),
            };
            ctx.check_attrs(n, spec)?;
            const D: &str = "equality";
            if !ctx.bool(n, D, "active")?.unwrap_or(true) {
                continue;
            }
            let idx = eqs.len();
            let name = n
                .attribute("name")
                .map(str::to_string)
                .unwrap_or_else(|| format!("equality{idx}"));
            let name = super::unique_name(&mut names, name, idx);
            let body = |a: &str, required: bool| -> Result<usize, MjcfError> {
                match n.attribute(a) {
                    None if required => Err(ctx.err(
                        n,
                        MjcfErrorKind::Invalid,
                        format!("<{tag}> needs '{a}' (sites are not supported)"),
                    )),
                    None => Ok(0),
                    Some(b) => built.body_names.get(b).copied().ok_or_else(|| {
                        ctx.err(n, MjcfErrorKind::Invalid, format!("unknown body '{b}'"))
                    }),
                }
            };
            let (e, relpose_missing) = match tag {
                "connect" => {
                    let Some(anchor) = ctx.exact::<3>(n, tag, "anchor")? else {
                        return Err(ctx.err(n, MjcfErrorKind::Invalid, "<connect> needs 'anchor'"));
                    };
                    (
                        Equality::Connect {
                            name,
                            body1: body("body1", true)?,
                            body2: body("body2", false)?,
                            anchor: Vec3::from(anchor),
                        },
                        false,
                    )
                }
                "weld" => {
                    let rp = ctx.exact::<7>(n, tag, "relpose")?;
                    let (relpos, relquat, missing) = match rp {
                        Some(r) if r[3..].iter().any(|x| *x != 0.0) => (
                            Vec3::new(r[0], r[1], r[2]),
                            UnitQuaternion::from_quaternion(nalgebra::Quaternion::new(
                                r[3], r[4], r[5], r[6],
                            )),
                            false,
                        ),
                        _ => (Vec3::zeros(), Quat::identity(), true),
                    };
                    let anchor = ctx.exact::<3>(n, tag, "anchor")?.unwrap_or([0.0; 3]);
                    let torquescale = ctx.exact::<1>(n, tag, "torquescale")?.map_or(1.0, |t| t[0]);
                    if !(torquescale.is_finite() && torquescale >= 0.0) {
                        return Err(ctx.err(
                            n,
                            MjcfErrorKind::Invalid,
                            format!("torquescale=\"{torquescale}\" must be a finite number >= 0"),
                        ));
                    }
                    (
                        Equality::Weld {
                            name,
                            body1: body("body1", true)?,
                            body2: body("body2", false)?,
                            anchor: Vec3::from(anchor),
                            relpos,
                            relquat,
                            torquescale,
                        },
                        missing,
                    )
                }
                _ => {
                    let joint = |a: &str| -> Result<usize, MjcfError> {
                        let Some(j) = n.attribute(a) else {
                            return Err(ctx.err(n, MjcfErrorKind::Unsupported, format!("joint equality needs '{a}' (a single-joint equality is not supported)")));
                        };
                        built.joint_names.get(j).copied().ok_or_else(|| {
                            ctx.err(n, MjcfErrorKind::Invalid, format!("unknown joint '{j}'"))
                        })
                    };
                    let polycoef = ctx
                        .merged(n, tag, "polycoef", &[0.0, 1.0, 0.0, 0.0, 0.0])?
                        .try_into()
                        .unwrap();
                    (
                        Equality::Joint {
                            name,
                            joint1: joint("joint1")?,
                            joint2: joint("joint2")?,
                            polycoef,
                        },
                        false,
                    )
                }
            };
            let solref = ctx
                .merged(n, D, "solref", &DEFAULT_SOLREF)?
                .try_into()
                .unwrap();
            let solimp = ctx
                .merged(n, D, "solimp", &DEFAULT_SOLIMP)?
                .try_into()
                .unwrap();
            eqs.push(e);
            soft.push(EqualitySoft { solref, solimp });
            pending.push(relpose_missing);
        }
    }
    Ok((eqs, soft, pending))
}

/// Welds without a `relpose`: the relative pose at `qpos0`, as MuJoCo's `mj_setConst`
/// (relpos = body2's anchor point in body1's frame, relquat = q1⁻¹ q2).
pub(crate) fn resolve_welds(
    _ctx: &Ctx<'_, '_>,
    model: &mut Model,
    pending: &[bool],
) -> Result<(), MjcfError> {
    if !pending.iter().any(|p| *p) {
        return Ok(());
    }
    let kin = forward_kinematics(model, &model.qpos0);
    for (e, &p) in model.equalities.iter_mut().zip(pending) {
        if let (
            Equality::Weld {
                body1,
                body2,
                anchor,
                relpos,
                relquat,
                ..
            },
            true,
        ) = (e, p)
        {
            let (q1, q2) = (kin.xquat[*body1], kin.xquat[*body2]);
            let a = kin.xpos[*body2] + q2 * *anchor;
            *relpos = q1.inverse() * (a - kin.xpos[*body1]);
            *relquat = q1.inverse() * q2;
        }
    }
    Ok(())
}

/// `<contact>`: explicit `<pair>`s and `<exclude>`d body pairs.
pub(crate) fn contacts<'a, 'i>(
    ctx: &Ctx<'a, 'i>,
    root: Node<'a, 'i>,
    built: &Built,
) -> Result<(Vec<ContactPair>, Vec<(usize, usize)>), MjcfError> {
    let (mut pairs, mut excludes) = (Vec::new(), Vec::new());
    for sec in root.children().filter(|n| n.has_tag_name("contact")) {
        ctx.check_attrs(sec, &schema::NONE)?;
        for n in sec.children().filter(Node::is_element) {
            match n.tag_name().name() {
                "pair" => {
                    ctx.check_attrs(n, &schema::PAIR)?;
                    const T: &str = "pair";
                    let geom = |a: &str| -> Result<usize, MjcfError> {
                        let Some(g) = n.attribute(a) else {
                            return Err(ctx.err(
                                n,
                                MjcfErrorKind::Invalid,
                                format!("<pair> needs '{a}'"),
                            ));
                        };
                        built.geom_names.get(g).copied().ok_or_else(|| {
                            ctx.err(n, MjcfErrorKind::Invalid, format!("unknown geom '{g}'"))
                        })
                    };
                    let mut p = ContactPair::new([geom("geom1")?, geom("geom2")?]);
                    let condim = ctx.int(n, T, "condim")?.unwrap_or(3);
                    if ![1, 3, 4, 6].contains(&condim) {
                        return Err(ctx.err(
                            n,
                            MjcfErrorKind::Invalid,
                            format!("condim = {condim}; valid: 1, 3, 4, 6"),
                        ));
                    }
                    p.condim = condim as u8;
                    p.friction = ctx
                        .merged(n, T, "friction", &p.friction)?
                        .try_into()
                        .unwrap();
                    p.solref = ctx.merged(n, T, "solref", &p.solref)?.try_into().unwrap();
                    p.solref_friction = ctx
                        .merged(n, T, "solreffriction", &p.solref_friction)?
                        .try_into()
                        .unwrap();
                    p.solimp = ctx.merged(n, T, "solimp", &p.solimp)?.try_into().unwrap();
                    p.margin = ctx.f64(n, T, "margin")?.unwrap_or(0.0);
                    p.gap = ctx.f64(n, T, "gap")?.unwrap_or(0.0);
                    pairs.push(p);
                }
                "exclude" => {
                    ctx.check_attrs(n, &schema::EXCLUDE)?;
                    let body = |a: &str| -> Result<usize, MjcfError> {
                        let Some(b) = n.attribute(a) else {
                            return Err(ctx.err(
                                n,
                                MjcfErrorKind::Invalid,
                                format!("<exclude> needs '{a}'"),
                            ));
                        };
                        built.body_names.get(b).copied().ok_or_else(|| {
                            ctx.err(n, MjcfErrorKind::Invalid, format!("unknown body '{b}'"))
                        })
                    };
                    excludes.push((body("body1")?, body("body2")?));
                }
                _ => return Err(ctx.unsupported_element(n, &["pair", "exclude"])),
            }
        }
    }
    Ok((pairs, excludes))
}

/// `<keyframe>`: the initial state from the key named `key` (`None`: qpos0 at rest).
pub(crate) fn keyframe<'a, 'i>(
    ctx: &Ctx<'a, 'i>,
    root: Node<'a, 'i>,
    model: &Model,
    key: Option<&str>,
) -> Result<(State, Vec<f64>, Vec<String>), MjcfError> {
    let mut keys = Vec::new();
    let mut chosen = None;
    for sec in root.children().filter(|n| n.has_tag_name("keyframe")) {
        ctx.check_attrs(sec, &schema::NONE)?;
        for n in sec.children().filter(Node::is_element) {
            if n.tag_name().name() != "key" {
                return Err(ctx.unsupported_element(n, &["key"]));
            }
            ctx.check_attrs(n, &schema::KEY)?;
            let name = n
                .attribute("name")
                .map(str::to_string)
                .unwrap_or_else(|| format!("key{}", keys.len()));
            if key == Some(name.as_str()) && chosen.is_none() {
                chosen = Some(n);
            }
            keys.push(name);
        }
    }
    let mut state = model.default_state();
    let mut ctrl = vec![0.0; model.actuators.len()];
    match (key, chosen) {
        (None, _) => {}
        (Some(k), None) => {
            return Err(ctx.err(
                root,
                MjcfErrorKind::Invalid,
                format!(
                    "no keyframe named '{k}'; keyframes: {}",
                    if keys.is_empty() {
                        "none".into()
                    } else {
                        keys.join(", ")
                    }
                ),
            ))
        }
        (Some(_), Some(n)) => {
            let read = |attr: &str, len: usize| -> Result<Option<Vec<f64>>, MjcfError> {
                match n.attribute(attr) {
                    None => Ok(None),
                    Some(v) => {
                        let x = ctx.parse_nums(n, attr, v)?;
                        if x.len() != len {
                            return Err(ctx.err(
                                n,
                                MjcfErrorKind::Invalid,
                                format!(
                                    "key '{attr}' has {} numbers, the model needs {len}",
                                    x.len()
                                ),
                            ));
                        }
                        Ok(Some(x))
                    }
                }
            };
            if let Some(q) = read("qpos", model.nq)? {
                state.q = DVector::from_vec(q);
            }
            if let Some(v) = read("qvel", model.nv)? {
                state.v = DVector::from_vec(v);
            }
            if let Some(c) = read("ctrl", model.actuators.len())? {
                ctrl = c;
            }
            if let Some(t) = n.attribute("time") {
                state.t = ctx
                    .parse_nums(n, "time", t)?
                    .first()
                    .copied()
                    .unwrap_or(0.0);
            }
        }
    }
    Ok((state, ctrl, keys))
}
