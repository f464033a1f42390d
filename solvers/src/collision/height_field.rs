//! Height field contacts that push a body out however deep it is.
//!
//! # Why not parry's `HeightField` manifolds
//! parry collides a shape with a height field triangle by triangle, each triangle a thin
//! two-sided surface: once the body's centre passes below a triangle's plane the closest
//! feature is on the other side and the normal flips downward, so a fast or heavy body that
//! sinks a little is pulled *through* the field (issue #12: a 2 cm sphere dropped from 0.5 m
//! onto a flat field fell to -7.5 m under soft_convex and signorini while the same drop on a
//! plane rests at 0.0196 m).
//!
//! # What is done instead
//! MuJoCo decomposes a height field into one triangular **prism** per triangle, from the
//! triangle down to the field's base, and collides the body with each prism as a solid
//! (`mjc_ConvexHField`, `engine_collision_convex.c`), so the field is a solid and not a
//! surface. Here each triangle is a solid too, but a simpler one: the half-space below the
//! triangle's plane, restricted to the triangle's vertical prism (bottomless). For every
//! triangle whose cell lies under the body (the body's bounding box in the field's frame,
//! widened by the detection distance and unbounded upward), the body is collided with the
//! triangle's plane exactly as with a `plane` geom ([`super::plane_primitives`] for spheres
//! and boxes, MuJoCo's arithmetic; parry's half-space manifolds for every other convex shape),
//! and a contact is kept when its point lies over the triangle (in the field's xy plane).
//! Consequences:
//! * the normal is always the triangle's upward face normal, at any depth: a body anywhere
//!   below the surface (within the field's xy extent) is pushed up, never through;
//! * on a flat field every contact equals the plane's contact at the same height (a point on
//!   an edge shared by two triangles is reported once, [`super::narrow_phase::DUPLICATE_DISTANCE`]),
//!   so a body rests as on a plane;
//! * the field has no base and no side walls: MuJoCo's `base` depth (`size[3]`) and contacts
//!   through a prism's vertical faces (a body pressed against a step sideways) are not
//!   modelled; a step is felt through its sloped triangles only;
//! * triangle meshes and height fields colliding with a height field give no contacts (as
//!   parry does not support the pair); every formulation records such a pair in its
//!   ignored features (`collision_pair`, [`crate::features::collision`]).

use nalgebra::UnitQuaternion;
use parry3d_f64::math::{Pose, Rot3, Vector as PVec};
use parry3d_f64::query::{ContactManifold, DefaultQueryDispatcher, PersistentQueryDispatcher};
use parry3d_f64::shape::HalfSpace;

use super::broad_phase::shape_pose;
use super::narrow_phase::DUPLICATE_DISTANCE;
use super::plane_primitives::{plane_box, plane_sphere, Candidate};
use super::{contact_frame, Contact, MixedMaterial};
use crate::geometry::GeomShape;
use crate::kinematics::Kinematics;
use crate::model::{Model, Quat, Vec3};

/// How far below its lowest point a height field counts as solid for the broad phase (m):
/// a body down to this depth under the surface still gets contacts.
pub const SOLID_DEPTH: f64 = 1e4;

/// A vertex of parry's height field frame (y up) in the geom frame (z up): the exact
/// permutation of the +90° rotation about x of [`super::shapes::y_to_z`],
/// (x, y, z) ↦ (x, −z, y), without its round-off.
pub(crate) fn parry_to_geom(v: PVec) -> Vec3 {
    Vec3::new(v.x, -v.z, v.y)
}

/// The world AABB of geom `g` ([`super::broad_phase::geom_aabb`]), a height field's extended down by
/// [`SOLID_DEPTH`] below its lowest point (its solid, see the module doc).
pub fn solid_aabb(model: &Model, kin: &Kinematics, g: usize) -> parry3d_f64::bounding_volume::Aabb {
    if matches!(model.geoms[g].shape, GeomShape::HeightField { .. }) {
        let s = &model.collision_shapes[g];
        let mut local = s.shape.compute_local_aabb();
        local.mins.y -= SOLID_DEPTH;
        local.transform_by(&shape_pose(kin, s, g))
    } else {
        super::broad_phase::geom_aabb(model, kin, g)
    }
}

/// Plane contact candidates of geom `g` against the plane through `plane_pos` with normal
/// `plane_quat · z` (world), kept up to signed distance `detect` (m): MuJoCo's formulas for
/// spheres and boxes, parry's half-space manifold for other convex shapes, none for shapes
/// parry cannot collide with a half-space.
fn plane_candidates(
    model: &Model,
    kin: &Kinematics,
    g: usize,
    plane_pos: &Vec3,
    plane_quat: &Quat,
    detect: f64,
) -> Vec<Candidate> {
    match &model.geoms[g].shape {
        GeomShape::Sphere { radius } => {
            plane_sphere(plane_pos, plane_quat, &kin.geom_xpos[g], *radius, detect)
                .into_iter()
                .collect()
        }
        GeomShape::Box { half } => plane_box(
            plane_pos,
            plane_quat,
            &kin.geom_xpos[g],
            &kin.geom_xquat[g],
            half,
            detect,
        ),
        _ => {
            let s = &model.collision_shapes[g];
            let pose1 = shape_pose(kin, s, g);
            let q = plane_quat;
            let plane_pose = Pose::from_parts(
                PVec::new(plane_pos.x, plane_pos.y, plane_pos.z),
                Rot3::from_xyzw(q.i, q.j, q.k, q.w),
            );
            let mut manifolds: Vec<ContactManifold<(), ()>> = Vec::new();
            let mut workspace = None;
            let ok = DefaultQueryDispatcher.contact_manifolds(
                &plane_pose.inv_mul(&pose1),
                &HalfSpace::new(PVec::Z),
                &*s.shape.0,
                detect.max(0.0),
                &mut manifolds,
                &mut workspace,
            );
            if ok.is_err() {
                return Vec::new();
            }
            let n = plane_quat * Vec3::z();
            let mut out = Vec::new();
            for m in &manifolds {
                let sub1 = m.subshape_pos2().map_or(pose1, |p| pose1 * *p);
                for pt in m.points.iter().filter(|pt| pt.dist <= detect) {
                    let p0 = plane_pose * pt.local_p1;
                    let p1 = sub1 * pt.local_p2;
                    let mid = (p0 + p1) * 0.5;
                    out.push((Vec3::new(mid.x, mid.y, mid.z), n, pt.dist));
                }
            }
            out
        }
    }
}

/// Relative tolerance of [`over_triangle`]: a point counts as over the triangle down to
/// −`OVER_TRIANGLE_TOL` × (twice the triangle's signed xy area) on each edge's inner side.
pub(crate) const OVER_TRIANGLE_TOL: f64 = 1e-12;

/// Whether `p` (geom frame) lies over the triangle `t` (geom frame) in the xy plane, edges
/// included up to a relative tolerance ([`OVER_TRIANGLE_TOL`]).
fn over_triangle(p: &Vec3, t: &[Vec3; 3]) -> bool {
    let cross =
        |a: &Vec3, b: &Vec3, c: &Vec3| (b.x - a.x) * (c.y - a.y) - (b.y - a.y) * (c.x - a.x);
    let area = cross(&t[0], &t[1], &t[2]);
    if area == 0.0 {
        return false;
    }
    let tol = -OVER_TRIANGLE_TOL * area.abs();
    let s = area.signum();
    (0..3).all(|k| s * cross(&t[k], &t[(k + 1) % 3], p) >= tol)
}

/// The plane of triangle `t` (vertices in the field's geom frame, m) in the world, for a field
/// geom placed at `gpos`, `gquat`: `(plane_pos, plane_quat)`, the plane through the first
/// vertex with `plane_quat · z` the triangle's upward unit normal (the smallest rotation from
/// z, nalgebra's `rotation_between`, composed after the geom's orientation). `None` for a
/// degenerate triangle (a normal of zero or non-finite length). [`height_field_pair`] and the
/// batched engine's tables (`batched::height_field`) both take their planes from here.
// `!(len > 0.0)` on purpose: a NaN length is degenerate too.
#[allow(clippy::neg_cmp_op_on_partial_ord)]
pub(crate) fn triangle_plane(t: &[Vec3; 3], gpos: &Vec3, gquat: &Quat) -> Option<(Vec3, Quat)> {
    let mut n = (t[1] - t[0]).cross(&(t[2] - t[0]));
    let len = n.norm();
    if !(len > 0.0) {
        return None;
    }
    if n.z < 0.0 {
        n = -n;
    }
    n /= len;
    // The triangle's plane in the world: through its first vertex, z along n.
    let local = if n.x == 0.0 && n.y == 0.0 {
        Quat::identity()
    } else {
        UnitQuaternion::rotation_between(&Vec3::z(), &n).unwrap_or_else(Quat::identity)
    };
    Some((gpos + gquat * t[0], gquat * local))
}

/// Append the contacts between height field geom `g0` and geom `g1` (MuJoCo's order: the
/// field first) with mixed material `material` (see the module doc). Returns false if `g0` is
/// not a height field (nothing appended).
pub fn height_field_pair(
    model: &Model,
    kin: &Kinematics,
    g0: usize,
    g1: usize,
    material: &MixedMaterial,
    out: &mut Vec<Contact>,
) -> bool {
    if !matches!(model.geoms[g0].shape, GeomShape::HeightField { .. }) {
        return false;
    }
    let s0 = &model.collision_shapes[g0];
    let Some(hf) = s0.shape.as_heightfield() else {
        return true;
    };
    if matches!(
        model.geoms[g1].shape,
        GeomShape::HeightField { .. } | GeomShape::TriangleMesh { .. } | GeomShape::Plane
    ) {
        return true;
    }
    let s1 = &model.collision_shapes[g1];
    let (pose0, pose1) = (shape_pose(kin, s0, g0), shape_pose(kin, s1, g1));
    if !(pose0.is_finite() && pose1.is_finite()) {
        return true;
    }
    let detect = material.margin + material.gap;
    // The body's box in the field's (parry) frame, widened and unbounded upward, so that the
    // cells over which it lies are visited however deep it is.
    let mut query = s1.shape.compute_aabb(&pose0.inv_mul(&pose1));
    let d = detect.max(0.0);
    query.mins -= PVec::splat(d);
    query.maxs += PVec::splat(d);
    query.maxs.y = f64::MAX / 4.0;
    let (gpos, gquat) = (kin.geom_xpos[g0], kin.geom_xquat[g0]);
    let bodies = [model.geoms[g0].body, model.geoms[g1].body];
    let first = out.len();
    let mut triangles = Vec::new();
    hf.map_elements_in_local_aabb(&query, &mut |_, tri| {
        triangles.push([
            parry_to_geom(tri.a),
            parry_to_geom(tri.b),
            parry_to_geom(tri.c),
        ]);
    });
    for t in &triangles {
        let Some((plane_pos, plane_quat)) = triangle_plane(t, &gpos, &gquat) else {
            continue;
        };
        for (point, normal, gap) in
            plane_candidates(model, kin, g1, &plane_pos, &plane_quat, detect)
        {
            let in_geom = gquat.inverse() * (point - gpos);
            if !over_triangle(&in_geom, t) {
                continue;
            }
            let same = out[first..].iter().position(|c| {
                (c.point - point).norm() <= DUPLICATE_DISTANCE
                    && c.normal().dot(&normal) > 1.0 - 1e-12
            });
            if let Some(i) = same {
                if gap < out[first + i].gap {
                    out[first + i].gap = gap;
                }
                continue;
            }
            out.push(Contact {
                geoms: [g0, g1],
                bodies,
                point,
                frame: contact_frame(&normal),
                gap,
                material: *material,
                line_ends: None,
            });
        }
    }
    true
}
