//! Narrow phase: parry3d-f64 contact manifolds turned into [`Contact`] points.
//!
//! For an ordered pair `(g0, g1)` (see [`super::broad_phase`]) parry's
//! `DefaultQueryDispatcher::contact_manifolds` is called with shape 1 = `g0`, shape 2 = `g1`,
//! `pos12` = pose(g0)⁻¹ · pose(g1) and `prediction` = max(0, margin + gap) of the mixed
//! material. Each manifold point gives one contact:
//! * normal `n` = parry's `local_n1` taken to the world: the outward normal of `g0`, i.e. from
//!   `geoms[0]` into `geoms[1]`;
//! * `gap` = parry's `dist`, the signed distance between the two witness points along `n`
//!   (m, negative in penetration);
//! * `point` = midpoint of the two witness points (world, m), MuJoCo's `con.pos`;
//! * kept when `gap ≤ margin + gap_mixed` (inclusive, MuJoCo ≥ 3.9, spec §A7).
//!
//! What parry's manifolds give for the cases this harness relies on (and MuJoCo's result where
//! they differ, `engine_collision_primitive.c`, `engine_collision_box.c`):
//! * plane–box: the vertices of the box face most anti-parallel to the plane normal that lie
//!   within the prediction distance: 4 for a flat box, 2 for a box on an edge, 1 on a corner
//!   (MuJoCo: the up-to-4 lowest of the 8 corners; the same points in these cases).
//! * plane–sphere: 1 point, as MuJoCo.
//! * plane–capsule: the two segment end-spheres, each kept if within the prediction: lying
//!   flat 2 points, standing 1 (MuJoCo: the same two candidates).
//! * plane–cylinder: parry approximates a cap by an inscribed square with a vertex at the
//!   azimuth of the steepest descent (or at the cylinder's local +x when the axis is exactly
//!   along the normal), and the side by one generator segment. Standing on a cap: the four rim
//!   points at ±r along the geom's local x and y; lying: the 2 ends of the bottom generator.
//!   MuJoCo's `mjc_PlaneCylinder` instead reports the deepest rim point, two more rim points at
//!   ±120° and the opposite point (up to 4); the support polygon and the gaps of a standing or
//!   lying cylinder agree, the point locations on the cap do not.
//! * sphere–mesh: parry's composite manifolds (one per triangle in reach); a triangle mesh is a
//!   surface, so a body whose centre passes below it is pushed through (height fields are not,
//!   [`super::height_field`]).
//!
//! A point within [`DUPLICATE_DISTANCE`] of a point already reported for the same pair, with
//! the same normal, is dropped (the deeper one is kept): parry's polygon clipping can emit a
//! vertex twice (a cylinder lying across a box edge gives the same rim point two times at many
//! spin angles), and a duplicated point would count one contact twice (twice the stiffness of
//! a soft contact, a singular Delassus block for hard contact).
//!
//! MuJoCo's analytic pairs are the exception: plane with sphere, capsule and box
//! ([`super::plane_primitives`] explains why) and plane–cylinder, plane–ellipsoid, sphere with sphere, capsule,
//! cylinder and box, capsule–capsule and capsule–box ([`super::primitive_pairs`]) use MuJoCo's own formulas
//! and order of operations, so the parry descriptions above apply to those pairs only where a
//! geom keeps the harness's own rule (`line_contact_as_point`, the robot's wheels). Height fields are the other
//! exception: each triangle is a solid, collided as a plane over its prism
//! ([`super::height_field`]), since parry's two-sided triangles flip the normal of a body that
//! sinks past the surface.
//! Cylinder–box is the third: where the box lies against the cylinder's lateral surface the
//! pair is collided in closed form ([`super::cylinder_box`]: two points at the ends of the
//! tread), since parry's GJK-based manifold for it changes its point count and moves its
//! points along the tread under pose perturbations of 1e-10 m (issue 13); outside that domain
//! (a cap facing the box, deep penetration) parry's manifold is used.
//!
//! A pair parry does not support (e.g. height field–height field) gives no contacts; it is not
//! an error.

use parry3d_f64::math::Vector as PVec;
use parry3d_f64::query::{ContactManifold, DefaultQueryDispatcher, PersistentQueryDispatcher};

use super::broad_phase::shape_pose;
use super::frame::contact_frame;
use super::plane_primitives::{plane_box, plane_sphere};
use super::{Contact, MixedMaterial};
use crate::kinematics::Kinematics;
use crate::model::{Model, Vec3};

/// Contact points of one pair closer than this (m) with parallel normals are one contact.
pub const DUPLICATE_DISTANCE: f64 = 1e-9;

fn to_na(v: PVec) -> Vec3 {
    Vec3::new(v.x, v.y, v.z)
}

/// Append to `out` the contacts between geoms `g0` and `g1` (already in MuJoCo's order) with
/// mixed material `material`, in parry's generation order (see the module doc).
pub fn collide_pair(
    model: &Model,
    kin: &Kinematics,
    g0: usize,
    g1: usize,
    material: &MixedMaterial,
    out: &mut Vec<Contact>,
) {
    let start = out.len();
    collide_pair_points(model, kin, g0, g1, material, out);
    if model.geoms[g0].line_contact_as_point || model.geoms[g1].line_contact_as_point {
        merge_line_contact(out, start);
    }
}

/// Normals closer than this (1 − cos) count as one line contact's.
const SAME_NORMAL: f64 = 1e-9;

/// Replace the contacts `out[start..]` of one pair by one at their mean point with their
/// smallest gap and their mean normal (normalized; its frame MuJoCo's `mju_makeFrame`, as the
/// wheels' contacts have), when there are several and they share one normal (a line contact: a wheel's
/// tread on a face or along an edge). Why (issue 13): two or more points per wheel make the
/// sticking contacts of the three-wheeled robot statically indeterminate, and then the hard
/// contact's step map is not single-valued (two converged NCP solutions for the same data were
/// measured at one step of the box crossing, `scenarios/examples/crossing_branch.rs`); one
/// point per wheel makes the robot a tripod. For a level wheel the merged point is the middle
/// of the tread's span at the exact gap; a wheel tilted by θ about its ground line has its
/// contact moved by up to half the width towards the middle, with the lower end's gap. The
/// normal is the mean rather than the deepest end's so that it is continuous where the deepest
/// end changes (the ends' normals differ slightly on a box edge: within `SAME_NORMAL`), which
/// the adjoint's differences need (issue 17).
fn merge_line_contact(out: &mut Vec<Contact>, start: usize) {
    let group = &out[start..];
    if group.len() < 2 {
        return;
    }
    let n0 = group[0].normal();
    if group
        .iter()
        .any(|c| 1.0 - c.normal().dot(&n0) > SAME_NORMAL)
    {
        return;
    }
    let count = group.len() as f64;
    let point = group.iter().map(|c| c.point).sum::<Vec3>() / count;
    let deepest = group
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.gap.total_cmp(&b.1.gap))
        .map_or(0, |(i, _)| i);
    let spread = group
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != deepest)
        .map(|(_, c)| c.gap - group[deepest].gap)
        .fold(f64::INFINITY, f64::min);
    let normal = group.iter().map(|c| c.normal()).sum::<Vec3>().normalize();
    let mut merged = group[deepest];
    merged.point = point;
    merged.frame = super::frame::contact_frame(&normal);
    merged.line_ends = Some(super::LineEnds { deepest, spread });
    out.truncate(start);
    out.push(merged);
}

/// The contacts of the pair before any line-contact reduction.
fn collide_pair_points(
    model: &Model,
    kin: &Kinematics,
    g0: usize,
    g1: usize,
    material: &MixedMaterial,
    out: &mut Vec<Contact>,
) {
    if let Some(c) =
        super::primitive_pairs::collide(model, kin, g0, g1, material.margin + material.gap)
    {
        push_candidates(model, g0, g1, material, c, out);
        return;
    }
    if mujoco_plane_pair(model, kin, g0, g1, material, out)
        || super::height_field::height_field_pair(model, kin, g0, g1, material, out)
        || cylinder_box_pair(model, kin, g0, g1, material, out)
    {
        return;
    }
    let (s0, s1) = (&model.collision_shapes[g0], &model.collision_shapes[g1]);
    let (pose0, pose1) = (shape_pose(kin, s0, g0), shape_pose(kin, s1, g1));
    if !(pose0.is_finite() && pose1.is_finite()) {
        return;
    }
    let detect = material.margin + material.gap;
    let pos12 = pose0.inv_mul(&pose1);
    let mut manifolds: Vec<ContactManifold<(), ()>> = Vec::new();
    let mut workspace = None;
    let dispatcher = DefaultQueryDispatcher;
    if dispatcher
        .contact_manifolds(
            &pos12,
            &*s0.shape.0,
            &*s1.shape.0,
            detect.max(0.0),
            &mut manifolds,
            &mut workspace,
        )
        .is_err()
    {
        return;
    }
    let bodies = [model.geoms[g0].body, model.geoms[g1].body];
    let first = out.len();
    for m in &manifolds {
        // Composite shapes may report the points in a sub-shape's frame.
        let sub0 = m.subshape_pos1().map_or(pose0, |p| pose0 * *p);
        let sub1 = m.subshape_pos2().map_or(pose1, |p| pose1 * *p);
        let n = to_na(sub0.rotation * m.local_n1);
        let frame = contact_frame(&n);
        for pt in &m.points {
            if !(pt.dist <= detect) {
                continue;
            }
            let p0 = to_na(sub0 * pt.local_p1);
            let p1 = to_na(sub1 * pt.local_p2);
            let point = (p0 + p1) * 0.5;
            let same = out[first..].iter().position(|c| {
                (c.point - point).norm() <= DUPLICATE_DISTANCE && c.normal().dot(&n) > 1.0 - 1e-12
            });
            if let Some(i) = same {
                if pt.dist < out[first + i].gap {
                    out[first + i].gap = pt.dist;
                }
                continue;
            }
            out.push(Contact {
                geoms: [g0, g1],
                bodies,
                point,
                frame,
                gap: pt.dist,
                material: *material,
                line_ends: None,
            });
        }
    }
}

/// Cylinder–box in closed form ([`super::cylinder_box`]) where the closed form applies.
/// Returns false (parry decides) for every other pair and outside the closed form's domain.
fn cylinder_box_pair(
    model: &Model,
    kin: &Kinematics,
    g0: usize,
    g1: usize,
    material: &MixedMaterial,
    out: &mut Vec<Contact>,
) -> bool {
    use super::cylinder_box::{cylinder_box, Cuboid, Cylinder};
    use crate::geometry::GeomShape;
    let (
        GeomShape::Cylinder {
            radius,
            half_length,
        },
        GeomShape::Box { half },
    ) = (&model.geoms[g0].shape, &model.geoms[g1].shape)
    else {
        return false;
    };
    let cyl = Cylinder {
        center: kin.geom_xpos[g0],
        quat: kin.geom_xquat[g0],
        radius: *radius,
        half_length: *half_length,
    };
    let cub = Cuboid {
        center: kin.geom_xpos[g1],
        quat: kin.geom_xquat[g1],
        half: *half,
    };
    let finite =
        |v: &Vec3, q: &crate::model::Quat| v.iter().chain(q.coords.iter()).all(|x| x.is_finite());
    if !(finite(&cyl.center, &cyl.quat) && finite(&cub.center, &cub.quat)) {
        return true;
    }
    let Some(candidates) = cylinder_box(&cyl, &cub, material.margin + material.gap) else {
        return false;
    };
    push_candidates(model, g0, g1, material, candidates, out);
    true
}

/// Plane–sphere and plane–box with MuJoCo's arithmetic ([`super::plane_primitives`]).
/// Returns false for every other pair.
fn mujoco_plane_pair(
    model: &Model,
    kin: &Kinematics,
    g0: usize,
    g1: usize,
    material: &MixedMaterial,
    out: &mut Vec<Contact>,
) -> bool {
    use crate::geometry::GeomShape;
    if model.geoms[g0].shape != GeomShape::Plane {
        return false;
    }
    // A non-finite placement gives no contacts (the formulas would give a NaN contact).
    // (Fixed: a plane–sphere pair with a NaN body position gave one contact of NaN gap.)
    let finite = |g: usize| {
        kin.geom_xpos[g]
            .iter()
            .chain(kin.geom_xquat[g].coords.iter())
            .all(|x| x.is_finite())
    };
    if !(finite(g0) && finite(g1)) {
        return true;
    }
    let detect = material.margin + material.gap;
    let (pp, pq) = (kin.geom_xpos[g0], kin.geom_xquat[g0]);
    let candidates = match &model.geoms[g1].shape {
        GeomShape::Sphere { radius } => plane_sphere(&pp, &pq, &kin.geom_xpos[g1], *radius, detect)
            .into_iter()
            .collect(),
        GeomShape::Capsule {
            radius,
            half_length,
        } => {
            let (c, axis) = super::plane_primitives::plane_capsule(
                &pp,
                &pq,
                &kin.geom_xpos[g1],
                &kin.geom_xquat[g1],
                *radius,
                *half_length,
                detect,
            );
            push_candidates_with_tangent(model, g0, g1, material, c, &axis, out);
            return true;
        }
        GeomShape::Box { half } => plane_box(
            &pp,
            &pq,
            &kin.geom_xpos[g1],
            &kin.geom_xquat[g1],
            half,
            detect,
        ),
        _ => return false,
    };
    push_candidates(model, g0, g1, material, candidates, out);
    true
}

/// [`push_candidates`] with every contact frame's first tangent along `tangent`
/// ([`super::frame::contact_frame_with_tangent`]).
fn push_candidates_with_tangent(
    model: &Model,
    g0: usize,
    g1: usize,
    material: &MixedMaterial,
    candidates: Vec<super::plane_primitives::Candidate>,
    tangent: &Vec3,
    out: &mut Vec<Contact>,
) {
    let bodies = [model.geoms[g0].body, model.geoms[g1].body];
    for (point, n, gap) in candidates {
        out.push(Contact {
            geoms: [g0, g1],
            bodies,
            point,
            frame: super::frame::contact_frame_with_tangent(&n, tangent),
            gap,
            material: *material,
            line_ends: None,
        });
    }
}

/// Append closed-form candidates `(point, normal from g0 into g1, gap)` as contacts of the
/// pair `(g0, g1)` with material `material` (frames without a tangent hint).
fn push_candidates(
    model: &Model,
    g0: usize,
    g1: usize,
    material: &MixedMaterial,
    candidates: Vec<super::plane_primitives::Candidate>,
    out: &mut Vec<Contact>,
) {
    push_candidates_with_tangent(model, g0, g1, material, candidates, &Vec3::zeros(), out);
}
