//! Positions and orientations of frames (MuJoCo "Coordinate frames and orientation",
//! `COrientation` in the XML reference): `pos`, and one of `quat`, `euler`, `axisangle`,
//! `xyaxes`, `zaxis`; angles in degrees unless `compiler angle="radian"`; Euler sequence from
//! `compiler eulerseq` (lowercase: axes move with the frame, intrinsic; uppercase: fixed axes).

use contactlab_solvers::model::{Quat, Vec3};
use nalgebra::{Matrix3, Rotation3, Unit, UnitQuaternion};
use roxmltree::Node;

use super::error::{MjcfError, MjcfErrorKind};
use super::Ctx;

/// `pos` of `node` (m, parent frame), zero if absent.
pub(crate) fn pos<'a, 'i>(
    ctx: &Ctx<'a, 'i>,
    node: Node<'a, 'i>,
    tag: &str,
) -> Result<Vec3, MjcfError> {
    Ok(ctx
        .exact::<3>(node, tag, "pos")?
        .map(Vec3::from)
        .unwrap_or_else(Vec3::zeros))
}

/// The rotation taking local +z to the unit vector along `v` by the smallest angle (MuJoCo
/// `mju_quatZ2Vec`); a rotation by π about x when `v` points along −z.
pub(crate) fn z_to(v: &Vec3) -> Quat {
    let n = v.normalize();
    let z = Vec3::z();
    let axis = z.cross(&n);
    let s = axis.norm();
    if s < 1e-10 {
        if n.z < 0.0 {
            return UnitQuaternion::from_axis_angle(&Vec3::x_axis(), std::f64::consts::PI);
        }
        return Quat::identity();
    }
    UnitQuaternion::from_axis_angle(&Unit::new_normalize(axis), s.atan2(z.dot(&n)))
}

/// The orientation of `node` (parent frame) from whichever orientation attribute it has;
/// `None` when it has none. More than one is an error, as in MuJoCo.
pub(crate) fn orientation<'a, 'i>(
    ctx: &Ctx<'a, 'i>,
    node: Node<'a, 'i>,
    tag: &str,
) -> Result<Option<Quat>, MjcfError> {
    let mut given = Vec::new();
    for attr in ["quat", "euler", "axisangle", "xyaxes", "zaxis"] {
        if ctx.raw(node, tag, attr)?.is_some() {
            given.push(attr);
        }
    }
    if given.len() > 1 {
        return Err(ctx.err(
            node,
            MjcfErrorKind::Invalid,
            format!(
                "more than one orientation given ({}); use one",
                given.join(", ")
            ),
        ));
    }
    let Some(&which) = given.first() else {
        return Ok(None);
    };
    let bad = |why: &str| {
        ctx.err(
            node,
            MjcfErrorKind::Invalid,
            format!("attribute '{which}': {why}"),
        )
    };
    let q = match which {
        "quat" => {
            let [w, x, y, z] = ctx.exact::<4>(node, tag, "quat")?.unwrap();
            let q = nalgebra::Quaternion::new(w, x, y, z);
            if !(q.norm() > 1e-12) || !q.norm().is_finite() {
                return Err(bad("zero or non-finite quaternion"));
            }
            UnitQuaternion::from_quaternion(q)
        }
        "euler" => {
            let e = ctx.exact::<3>(node, tag, "euler")?.unwrap();
            let seq = ctx.compiler.eulerseq;
            let mut q = Quat::identity();
            for (k, c) in seq.iter().enumerate() {
                let axis = match c.to_ascii_lowercase() {
                    b'x' => Vec3::x_axis(),
                    b'y' => Vec3::y_axis(),
                    _ => Vec3::z_axis(),
                };
                let r = UnitQuaternion::from_axis_angle(&axis, ctx.angle(e[k]));
                q = if c.is_ascii_lowercase() { q * r } else { r * q };
            }
            q
        }
        "axisangle" => {
            let [x, y, z, a] = ctx.exact::<4>(node, tag, "axisangle")?.unwrap();
            let axis = Vec3::new(x, y, z);
            if !(axis.norm() > 1e-12) {
                return Err(bad("zero axis"));
            }
            UnitQuaternion::from_axis_angle(&Unit::new_normalize(axis), ctx.angle(a))
        }
        "xyaxes" => {
            let v = ctx.exact::<6>(node, tag, "xyaxes")?.unwrap();
            let x = Vec3::new(v[0], v[1], v[2]);
            let y = Vec3::new(v[3], v[4], v[5]);
            if !(x.norm() > 1e-12) {
                return Err(bad("zero x axis"));
            }
            let x = x.normalize();
            let y = y - x * x.dot(&y);
            if !(y.norm() > 1e-12) {
                return Err(bad("y axis parallel to x"));
            }
            let y = y.normalize();
            let z = x.cross(&y);
            let m = Matrix3::from_columns(&[x, y, z]);
            UnitQuaternion::from_rotation_matrix(&Rotation3::from_matrix_unchecked(m))
        }
        _ => {
            let v = Vec3::from(ctx.exact::<3>(node, tag, "zaxis")?.unwrap());
            if !(v.norm() > 1e-12) {
                return Err(bad("zero axis"));
            }
            z_to(&v)
        }
    };
    Ok(Some(q))
}
