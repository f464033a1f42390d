//! `<worldbody>`, `<body>`, `<inertial>`, `<joint>`, `<freejoint>` and `<geom>`.
//!
//! Numbering follows MuJoCo: bodies in depth-first order of appearance (world = 0); a body's
//! joints and geoms in order of appearance, bodies in body order (so the world's geoms come
//! first even when written after child bodies).

use std::collections::HashMap;

use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::model::{
    Body, ContactMaterial, Geom, Joint, JointKind, Quat, Vec3, DEFAULT_SOLIMP, DEFAULT_SOLREF,
};
use roxmltree::Node;

use super::assets::Assets;
use super::error::{MjcfError, MjcfErrorKind};
use super::frames::{orientation, pos, z_to};
use super::inertia::{self, combine, GeomMass};
use super::{schema, unique_name, Ctx};

/// Bodies, joints and geoms with the name tables later elements refer to.
#[derive(Debug, Default)]
pub(crate) struct Built {
    /// Bodies without the world (body i + 1 of the model).
    pub bodies: Vec<Body>,
    pub joints: Vec<Joint>,
    pub geoms: Vec<Geom>,
    /// Names (as written in the file) to indices; body indices count the world as 0.
    pub body_names: HashMap<String, usize>,
    pub joint_names: HashMap<String, usize>,
    pub geom_names: HashMap<String, usize>,
    /// Model names already used (including generated ones), per kind.
    taken_body: HashMap<String, usize>,
    taken_joint: HashMap<String, usize>,
    taken_geom: HashMap<String, usize>,
}

/// Build the body tree from every `<worldbody>` of `root`.
pub(crate) fn build<'a, 'i>(
    ctx: &Ctx<'a, 'i>,
    root: Node<'a, 'i>,
    assets: &Assets,
) -> Result<Built, MjcfError> {
    let mut out = Built::default();
    out.body_names.insert("world".into(), 0);
    out.taken_body.insert("world".into(), 0);
    let worlds: Vec<_> = root
        .children()
        .filter(|n| n.has_tag_name("worldbody"))
        .collect();
    // World geoms first, then the bodies.
    for w in &worlds {
        ctx.check_attrs(*w, &schema::WORLDBODY)?;
        for c in w.children().filter(Node::is_element) {
            match c.tag_name().name() {
                "geom" => {
                    geom(ctx, c, 0, assets, &mut out)?;
                }
                "body" => {}
                t if schema::SKIPPED_ELEMENTS.contains(&t) => {}
                _ => return Err(ctx.unsupported_element(c, &["geom", "body"])),
            }
        }
    }
    for w in &worlds {
        for c in w.children().filter(|n| n.has_tag_name("body")) {
            body(ctx, c, 0, assets, &mut out)?;
        }
    }
    Ok(out)
}

fn body<'a, 'i>(
    ctx: &Ctx<'a, 'i>,
    node: Node<'a, 'i>,
    parent: usize,
    assets: &Assets,
    out: &mut Built,
) -> Result<(), MjcfError> {
    ctx.check_attrs(node, &schema::BODY)?;
    let idx = out.bodies.len() + 1;
    let name = match node.attribute("name") {
        Some(n) => {
            if out.body_names.insert(n.to_string(), idx).is_some() {
                return Err(ctx.err(
                    node,
                    MjcfErrorKind::Invalid,
                    format!("body name '{n}' is used twice"),
                ));
            }
            unique_name(&mut out.taken_body, n.to_string(), idx)
        }
        None => unique_name(&mut out.taken_body, format!("body{idx}"), idx),
    };
    let mut b = Body::new(name, parent, pos(ctx, node, "body")?, 0.0, Vec3::zeros());
    b.quat = orientation(ctx, node, "body")?.unwrap_or_else(Quat::identity);
    out.bodies.push(b);

    let mut inertial = None;
    let mut masses = Vec::new();
    for c in node.children().filter(Node::is_element) {
        match c.tag_name().name() {
            "inertial" => {
                if inertial.is_some() {
                    return Err(ctx.err(
                        c,
                        MjcfErrorKind::Invalid,
                        "a body has at most one <inertial>",
                    ));
                }
                inertial = Some(c);
            }
            "joint" => joint(ctx, c, idx, out)?,
            "freejoint" => freejoint(ctx, c, idx, out)?,
            "geom" => {
                if let Some(m) = geom(ctx, c, idx, assets, out)? {
                    masses.push(m);
                }
            }
            "body" => {}
            t if schema::SKIPPED_ELEMENTS.contains(&t) => {}
            _ => return Err(ctx.unsupported_element(c, schema::BODY_CHILDREN)),
        }
    }
    // Inertia: explicit <inertial> unless inertiafromgeom says otherwise.
    use super::elements::InertiaFromGeom as I;
    let from_geoms = match ctx.compiler.inertiafromgeom {
        I::True => true,
        I::False => false,
        I::Auto => inertial.is_none(),
    };
    let b = out.bodies.last_mut().unwrap();
    if from_geoms {
        if let Some((mass, com, frame, diag)) = combine(&masses) {
            b.mass = mass;
            b.com = com;
            b.inertia_frame = frame;
            b.inertia = diag;
        }
    } else if let Some(i) = inertial {
        ctx.check_attrs(i, &schema::INERTIAL)?;
        let Some(p) = ctx.exact::<3>(i, "inertial", "pos")? else {
            return Err(ctx.err(i, MjcfErrorKind::Invalid, "<inertial> needs 'pos'"));
        };
        let Some(mass) = ctx.f64(i, "inertial", "mass")? else {
            return Err(ctx.err(i, MjcfErrorKind::Invalid, "<inertial> needs 'mass'"));
        };
        b.com = Vec3::from(p);
        b.mass = mass;
        let q = orientation(ctx, i, "inertial")?;
        match (
            ctx.exact::<3>(i, "inertial", "diaginertia")?,
            ctx.exact::<6>(i, "inertial", "fullinertia")?,
        ) {
            (Some(d), None) => {
                b.inertia = Vec3::from(d);
                b.inertia_frame = q.unwrap_or_else(Quat::identity);
            }
            (None, Some(f)) => {
                if q.is_some() {
                    return Err(ctx.err(
                        i,
                        MjcfErrorKind::Invalid,
                        "fullinertia and an inertial orientation cannot both be given",
                    ));
                }
                let m =
                    nalgebra::Matrix3::new(f[0], f[3], f[4], f[3], f[1], f[5], f[4], f[5], f[2]);
                let (vals, frame) = inertia::principal(&m);
                if vals.z < inertia::MJ_EPS {
                    return Err(ctx.err(
                        i,
                        MjcfErrorKind::Invalid,
                        "fullinertia must have positive eigenvalues",
                    ));
                }
                b.inertia = vals;
                b.inertia_frame = frame;
            }
            (Some(_), Some(_)) => {
                return Err(ctx.err(
                    i,
                    MjcfErrorKind::Invalid,
                    "diaginertia and fullinertia cannot both be given",
                ))
            }
            (None, None) => {
                return Err(ctx.err(
                    i,
                    MjcfErrorKind::Invalid,
                    "<inertial> needs 'diaginertia' or 'fullinertia'",
                ))
            }
        }
    }
    for c in node.children().filter(|n| n.has_tag_name("body")) {
        body(ctx, c, idx, assets, out)?;
    }
    Ok(())
}

fn joint_name<'a, 'i>(
    ctx: &Ctx<'a, 'i>,
    node: Node<'a, 'i>,
    out: &mut Built,
) -> Result<String, MjcfError> {
    let idx = out.joints.len();
    Ok(match node.attribute("name") {
        Some(n) => {
            if out.joint_names.insert(n.to_string(), idx).is_some() {
                return Err(ctx.err(
                    node,
                    MjcfErrorKind::Invalid,
                    format!("joint name '{n}' is used twice"),
                ));
            }
            unique_name(&mut out.taken_joint, n.to_string(), idx)
        }
        None => unique_name(&mut out.taken_joint, format!("joint{idx}"), idx),
    })
}

fn freejoint<'a, 'i>(
    ctx: &Ctx<'a, 'i>,
    node: Node<'a, 'i>,
    body: usize,
    out: &mut Built,
) -> Result<(), MjcfError> {
    ctx.check_attrs(node, &schema::FREEJOINT)?;
    let name = joint_name(ctx, node, out)?;
    out.joints.push(Joint::new(name, JointKind::Free, body));
    Ok(())
}

fn joint<'a, 'i>(
    ctx: &Ctx<'a, 'i>,
    node: Node<'a, 'i>,
    body: usize,
    out: &mut Built,
) -> Result<(), MjcfError> {
    const T: &str = "joint";
    ctx.check_attrs(node, &schema::JOINT)?;
    let kind = match ctx
        .choice(node, T, "type", &["free", "ball", "slide", "hinge"])?
        .unwrap_or("hinge")
    {
        "free" => JointKind::Free,
        "ball" => JointKind::Ball,
        "slide" => JointKind::Slide,
        _ => JointKind::Hinge,
    };
    let name = joint_name(ctx, node, out)?;
    let mut j = Joint::new(name, kind, body);
    let angular = matches!(kind, JointKind::Hinge | JointKind::Ball);
    j.pos = pos(ctx, node, T)?;
    j.axis = ctx
        .exact::<3>(node, T, "axis")?
        .map(Vec3::from)
        .unwrap_or_else(Vec3::z);
    let f = |a: &str, d: f64| -> Result<f64, MjcfError> { Ok(ctx.f64(node, T, a)?.unwrap_or(d)) };
    j.damping = f("damping", 0.0)?;
    j.armature = f("armature", 0.0)?;
    j.frictionloss = f("frictionloss", 0.0)?;
    j.stiffness = f("stiffness", 0.0)?;
    j.margin = f("margin", 0.0)?;
    let conv = |x: f64| {
        if kind == JointKind::Hinge {
            ctx.angle(x)
        } else {
            x
        }
    };
    j.reference = conv(f("ref", 0.0)?);
    j.springref = conv(f("springref", 0.0)?);
    j.solref_limit = ctx
        .merged(node, T, "solreflimit", &DEFAULT_SOLREF)?
        .try_into()
        .unwrap();
    j.solimp_limit = ctx
        .merged(node, T, "solimplimit", &DEFAULT_SOLIMP)?
        .try_into()
        .unwrap();
    j.solref_friction = ctx
        .merged(node, T, "solreffriction", &DEFAULT_SOLREF)?
        .try_into()
        .unwrap();
    j.solimp_friction = ctx
        .merged(node, T, "solimpfriction", &DEFAULT_SOLIMP)?
        .try_into()
        .unwrap();
    if matches!(kind, JointKind::Free | JointKind::Ball) && j.stiffness != 0.0 {
        return Err(ctx.err(
            node,
            MjcfErrorKind::Unsupported,
            "joint stiffness is supported on hinge and slide joints only",
        ));
    }
    // Limits: `limited` true/false, or auto (limited iff a range is given, with autolimits).
    let range = ctx.exact::<2>(node, T, "range")?;
    let limited = match ctx
        .choice(node, T, "limited", &["true", "false", "auto"])?
        .unwrap_or("auto")
    {
        "true" => true,
        "false" => false,
        _ => ctx.compiler.autolimits && range.is_some(),
    };
    if limited {
        let Some([lo, hi]) = range else {
            return Err(ctx.err(
                node,
                MjcfErrorKind::Invalid,
                "limited=\"true\" needs a 'range'",
            ));
        };
        let (lo, hi) = if angular {
            (ctx.angle(lo), ctx.angle(hi))
        } else {
            (lo, hi)
        };
        j.range = Some(match kind {
            JointKind::Free => {
                return Err(ctx.err(
                    node,
                    MjcfErrorKind::Invalid,
                    "a free joint cannot be limited",
                ));
            }
            JointKind::Ball => {
                if lo != 0.0 {
                    return Err(ctx.err(
                        node,
                        MjcfErrorKind::Invalid,
                        "a ball joint's range must be \"0 max\"",
                    ));
                }
                (0.0, hi)
            }
            _ => {
                if lo >= hi {
                    return Err(ctx.err(
                        node,
                        MjcfErrorKind::Invalid,
                        format!("range [{lo}, {hi}] needs min < max"),
                    ));
                }
                (lo, hi)
            }
        });
    }
    out.joints.push(j);
    Ok(())
}

/// Read one geom into `out`; returns its mass properties (in its body's frame) when its body
/// infers inertia from geoms.
fn geom<'a, 'i>(
    ctx: &Ctx<'a, 'i>,
    node: Node<'a, 'i>,
    body: usize,
    assets: &Assets,
    out: &mut Built,
) -> Result<Option<GeomMass>, MjcfError> {
    const T: &str = "geom";
    ctx.check_attrs(node, &schema::GEOM)?;
    let idx = out.geoms.len();
    let name = match node.attribute("name") {
        Some(n) => {
            if out.geom_names.insert(n.to_string(), idx).is_some() {
                return Err(ctx.err(
                    node,
                    MjcfErrorKind::Invalid,
                    format!("geom name '{n}' is used twice"),
                ));
            }
            unique_name(&mut out.taken_geom, n.to_string(), idx)
        }
        None => unique_name(&mut out.taken_geom, format!("geom{idx}"), idx),
    };
    let ty = ctx.str(node, T, "type")?.unwrap_or("sphere");
    if !schema::GEOM_TYPES.contains(&ty) {
        let (_, src) = ctx.raw(node, T, "type")?.unwrap();
        return Err(ctx.err(
            src,
            MjcfErrorKind::Invalid,
            format!(
                "unknown geom type '{ty}'; supported: {}",
                schema::GEOM_TYPES.join(", ")
            ),
        ));
    }
    let fromto = ctx.exact::<6>(node, T, "fromto")?;
    let mut gpos = pos(ctx, node, T)?;
    let mut gquat = orientation(ctx, node, T)?.unwrap_or_else(Quat::identity);
    let mut half_from_fromto = None;
    if let Some(ft) = fromto {
        if !matches!(ty, "capsule" | "cylinder" | "box" | "ellipsoid") {
            return Err(ctx.err(
                node,
                MjcfErrorKind::Invalid,
                format!("'fromto' applies to capsule, cylinder, box and ellipsoid, not {ty}"),
            ));
        }
        let a = Vec3::new(ft[0], ft[1], ft[2]);
        let b = Vec3::new(ft[3], ft[4], ft[5]);
        let d = b - a;
        if !(d.norm() > 1e-12) {
            return Err(ctx.err(node, MjcfErrorKind::Invalid, "'fromto' has zero length"));
        }
        if node.has_attribute("pos")
            || ["quat", "euler", "axisangle", "xyaxes", "zaxis"]
                .iter()
                .any(|a| node.has_attribute(*a))
        {
            return Err(ctx.err(
                node,
                MjcfErrorKind::Invalid,
                "'fromto' replaces pos and orientation; give one or the other",
            ));
        }
        gpos = (a + b) / 2.0;
        gquat = z_to(&d);
        half_from_fromto = Some(d.norm() / 2.0);
    }
    // Sizes: how many numbers each type needs (fewer with fromto, which gives the length).
    let needed = match (ty, half_from_fromto.is_some()) {
        ("sphere", _) => 1,
        ("capsule" | "cylinder", false) => 2,
        ("capsule" | "cylinder", true) => 1,
        ("box" | "ellipsoid", false) => 3,
        ("box" | "ellipsoid", true) => 2,
        _ => 0,
    };
    let size = ctx.nums(node, T, "size")?.unwrap_or_default();
    // A partial size on the element keeps the remaining numbers of its default class.
    let size = {
        let class_size = ctx.merged(node, T, "size", &[f64::NAN; 3])?;
        let given = class_size
            .iter()
            .take_while(|x| !x.is_nan())
            .count()
            .max(size.len());
        class_size[..given.min(3)].to_vec()
    };
    if size.len() < needed {
        let src = ctx.raw(node, T, "size")?.map(|(_, s)| s).unwrap_or(node);
        return Err(ctx.err(
            src,
            MjcfErrorKind::Invalid,
            format!(
                "geom type {ty} needs {needed} size number(s){}, got {}",
                if fromto.is_some() { " with fromto" } else { "" },
                size.len()
            ),
        ));
    }
    let mut mesh_mass = None;
    let shape = match ty {
        "plane" => GeomShape::Plane,
        "sphere" => GeomShape::Sphere { radius: size[0] },
        "capsule" => GeomShape::Capsule {
            radius: size[0],
            half_length: half_from_fromto.unwrap_or_else(|| size[1]),
        },
        "cylinder" => GeomShape::Cylinder {
            radius: size[0],
            half_length: half_from_fromto.unwrap_or_else(|| size[1]),
        },
        "box" => GeomShape::Box {
            half: Vec3::new(
                size[0],
                size[1],
                half_from_fromto.unwrap_or_else(|| size[2]),
            ),
        },
        "ellipsoid" => GeomShape::Ellipsoid {
            radii: Vec3::new(
                size[0],
                size[1],
                half_from_fromto.unwrap_or_else(|| size[2]),
            ),
        },
        "mesh" => {
            let Some(m) = ctx.str(node, T, "mesh")? else {
                return Err(ctx.err(
                    node,
                    MjcfErrorKind::Invalid,
                    "a mesh geom needs a 'mesh' attribute",
                ));
            };
            let Some(asset) = assets.meshes.get(m) else {
                return Err(ctx.err(node, MjcfErrorKind::Invalid, format!("unknown mesh '{m}'")));
            };
            mesh_mass = Some(asset.mass.clone());
            GeomShape::ConvexMesh {
                vertices: asset.vertices.clone(),
            }
        }
        _ => {
            let Some(h) = ctx.str(node, T, "hfield")? else {
                return Err(ctx.err(
                    node,
                    MjcfErrorKind::Invalid,
                    "an hfield geom needs an 'hfield' attribute",
                ));
            };
            let Some(asset) = assets.hfields.get(h) else {
                return Err(ctx.err(
                    node,
                    MjcfErrorKind::Invalid,
                    format!("unknown hfield '{h}'"),
                ));
            };
            if body != 0 {
                return Err(ctx.err(
                    node,
                    MjcfErrorKind::Unsupported,
                    "height fields are supported on the world body only",
                ));
            }
            GeomShape::HeightField {
                heights: asset.heights.clone(),
                size_x: 2.0 * asset.size[0],
                size_y: 2.0 * asset.size[1],
            }
        }
    };
    if ty != "mesh" && node.has_attribute("mesh") || ty != "hfield" && node.has_attribute("hfield")
    {
        return Err(ctx.err(
            node,
            MjcfErrorKind::Invalid,
            format!("a {ty} geom takes no 'mesh' or 'hfield' attribute"),
        ));
    }
    let mut g = Geom::new(name, body, shape);
    g.pos = gpos;
    g.quat = gquat;
    let d = ContactMaterial::default();
    let u32_attr = |a: &str, d: u32| -> Result<u32, MjcfError> {
        match ctx.int(node, T, a)? {
            None => Ok(d),
            Some(v) if (0..=u32::MAX as i64).contains(&v) => Ok(v as u32),
            Some(v) => Err(ctx.err(
                node,
                MjcfErrorKind::Invalid,
                format!("'{a}' = {v} must be a non-negative 32-bit integer"),
            )),
        }
    };
    g.contype = u32_attr("contype", 1)?;
    g.conaffinity = u32_attr("conaffinity", 1)?;
    let condim = ctx.int(node, T, "condim")?.unwrap_or(3);
    if ![1, 3, 4, 6].contains(&condim) {
        return Err(ctx.err(
            node,
            MjcfErrorKind::Invalid,
            format!("condim = {condim}; valid: 1, 3, 4, 6"),
        ));
    }
    g.material = ContactMaterial {
        friction: ctx
            .merged(node, T, "friction", &d.friction)?
            .try_into()
            .unwrap(),
        condim: condim as u8,
        solref: ctx
            .merged(node, T, "solref", &d.solref)?
            .try_into()
            .unwrap(),
        solimp: ctx
            .merged(node, T, "solimp", &d.solimp)?
            .try_into()
            .unwrap(),
        margin: ctx.f64(node, T, "margin")?.unwrap_or(d.margin),
        gap: ctx.f64(node, T, "gap")?.unwrap_or(d.gap),
        priority: ctx.int(node, T, "priority")?.unwrap_or(0) as i32,
        solmix: ctx.f64(node, T, "solmix")?.unwrap_or(d.solmix),
        ..d
    };
    // Mass properties (MuJoCo: only for bodies other than the world that infer inertia).
    let mass_attr = ctx.f64(node, T, "mass")?;
    let density = ctx
        .f64(node, T, "density")?
        .unwrap_or(inertia::DEFAULT_DENSITY);
    let result = if body == 0 {
        None
    } else {
        let (volume, local_com, local_frame, unit_inertia) = match &mesh_mass {
            Some(Ok(m)) => (m.volume, m.com, m.frame, Some(m.inertia / m.volume)),
            Some(Err(why)) => {
                return Err(ctx.err(
                    node,
                    MjcfErrorKind::Invalid,
                    format!("cannot compute the mass of mesh '{}': {why}", g.name),
                ));
            }
            None => (
                inertia::primitive_volume(&g.shape),
                Vec3::zeros(),
                Quat::identity(),
                None,
            ),
        };
        let mass = match mass_attr {
            Some(m) => {
                if m != 0.0 && volume <= inertia::MJ_EPS {
                    0.0
                } else {
                    m
                }
            }
            None => density * volume,
        };
        if mass < 0.0 || density < 0.0 {
            return Err(ctx.err(
                node,
                MjcfErrorKind::Invalid,
                "mass and density must be >= 0",
            ));
        }
        let diag = match unit_inertia {
            Some(per_volume) => per_volume * mass,
            None => inertia::primitive_inertia(&g.shape, mass),
        };
        Some(GeomMass {
            mass,
            pos: g.pos + g.quat * local_com,
            quat: g.quat * local_frame,
            inertia: diag,
        })
    };
    out.geoms.push(g);
    Ok(result)
}
