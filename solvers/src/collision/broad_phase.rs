//! Broad phase: which geom pairs may touch, in MuJoCo's order.
//!
//! Filters, as MuJoCo's `mj_collision` / `mj_contactFilter` (`engine_collision_driver.c`) with
//! the default `filterparent` on, applied to **weld bodies** (`body_weldid`: the nearest body on
//! the path to the world, itself included, that has joints; the world for bodies welded to it):
//! * contype/conaffinity: `(ct1 & ca2) | (ct2 & ca1) != 0`;
//! * same weld body: never (so geoms of one body, and two world/static geoms, never collide);
//! * parent-child: if neither weld body is the world, a weld body and its parent's weld body
//!   do not collide (a body does collide with the world);
//! * plane-plane: MuJoCo has no collision function for it;
//! * bounding boxes (parry's world AABBs) more than `margin + gap` of the mixed material apart
//!   do not collide; a plane (infinite) is tested against the other geom's AABB instead, and a
//!   height field's box reaches [`super::height_field::SOLID_DEPTH`] below it (it is a solid).
//!
//! Each pair is ordered MuJoCo's way: lower [`type_rank`] first, ties by geom index. Pairs are
//! listed by increasing (lower index, higher index), so contacts come out in a fixed order.

use parry3d_f64::bounding_volume::Aabb;
use parry3d_f64::math::{Pose, Rot3, Vector as PVec};

use super::shapes::{type_rank, CollisionShape};
use crate::geometry::GeomShape;
use crate::kinematics::Kinematics;
use crate::model::{Model, Quat, Vec3};

/// MuJoCo's `body_weldid` for every body (index 0, the world, maps to 0): the body itself if it
/// has joints, else its parent's weld body.
pub fn weld_ids(model: &Model) -> Vec<usize> {
    let mut weld = vec![0; model.bodies.len()];
    for b in 1..model.bodies.len() {
        weld[b] = if model.bodies[b].joints.is_empty() {
            weld[model.bodies[b].parent]
        } else {
            b
        };
    }
    weld
}

/// True if geoms `g1` and `g2` pass the contype/conaffinity, body and plane-plane filters
/// (see the module doc); `weld` is [`weld_ids`]. Indices must be valid geom indices.
pub fn filters_allow(model: &Model, weld: &[usize], g1: usize, g2: usize) -> bool {
    let (a, b) = (&model.geoms[g1], &model.geoms[g2]);
    if (a.contype & b.conaffinity) | (b.contype & a.conaffinity) == 0 {
        return false;
    }
    if matches!(a.shape, GeomShape::Plane) && matches!(b.shape, GeomShape::Plane) {
        return false;
    }
    let (w1, w2) = (weld[a.body], weld[b.body]);
    if w1 == w2 {
        return false;
    }
    let (p1, p2) = (weld[model.bodies[w1].parent], weld[model.bodies[w2].parent]);
    if w1 != 0 && w2 != 0 && (w1 == p2 || w2 == p1) {
        return false;
    }
    true
}

/// The pair `(g1, g2)` in MuJoCo's order: lower shape type first, ties by lower index.
pub fn order_pair(model: &Model, g1: usize, g2: usize) -> (usize, usize) {
    let key = |g: usize| (type_rank(&model.geoms[g].shape), g);
    if key(g1) <= key(g2) {
        (g1, g2)
    } else {
        (g2, g1)
    }
}

/// The parry pose (world frame) of geom `g`'s collision shape: the geom pose composed with the
/// shape's `offset`.
pub fn shape_pose(kin: &Kinematics, shape: &CollisionShape, g: usize) -> Pose {
    let p = kin.geom_xpos[g];
    let q: Quat = kin.geom_xquat[g] * shape.offset;
    Pose::from_parts(
        PVec::new(p.x, p.y, p.z),
        Rot3::from_xyzw(q.i, q.j, q.k, q.w),
    )
}

/// The world AABB of geom `g`: parry's for its collision shape, except an ellipsoid's, which is
/// exact (its collision shape is an inscribed polytope, [`super::shapes::collision_shape`],
/// whose box can miss a plane that the ellipsoid itself reaches, and against a plane the
/// ellipsoid is collided exactly, [`super::primitive_pairs::plane_ellipsoid`]). The half-extent
/// of an ellipsoid with semi-axes `a` and rotation `R` along world axis k is
/// `√(Σ_j (R_kj a_j)²)`: the support function `max_x e_k·x = |diag(a) Rᵀ e_k|`.
pub fn geom_aabb(model: &Model, kin: &Kinematics, g: usize) -> Aabb {
    if let GeomShape::Ellipsoid { radii } = &model.geoms[g].shape {
        let r = kin.geom_xquat[g].to_rotation_matrix();
        let m = r.matrix();
        let c = kin.geom_xpos[g];
        let half: [f64; 3] = std::array::from_fn(|k| {
            (0..3)
                .map(|j| (m[(k, j)] * radii[j]).powi(2))
                .sum::<f64>()
                .sqrt()
        });
        return Aabb::new(
            PVec::new(c.x - half[0], c.y - half[1], c.z - half[2]),
            PVec::new(c.x + half[0], c.y + half[1], c.z + half[2]),
        );
    }
    let s = &model.collision_shapes[g];
    s.shape.compute_aabb(&shape_pose(kin, s, g))
}

/// True unless the world AABBs of the two shapes (or a plane and the other AABB) are farther
/// apart than `dist` (m, the pair's `margin + gap`; negative values shrink the test to 0).
pub fn bounds_overlap(model: &Model, kin: &Kinematics, g1: usize, g2: usize, dist: f64) -> bool {
    let d = dist.max(0.0);
    let plane1 = matches!(model.geoms[g1].shape, GeomShape::Plane);
    let plane2 = matches!(model.geoms[g2].shape, GeomShape::Plane);
    match (plane1, plane2) {
        (true, true) => false,
        (true, false) | (false, true) => {
            let (gp, go) = if plane1 { (g1, g2) } else { (g2, g1) };
            let aabb = geom_aabb(model, kin, go);
            let n: Vec3 = kin.geom_xquat[gp] * Vec3::z();
            let p = kin.geom_xpos[gp];
            // Lowest AABB corner along n.
            let lo = |k: usize| {
                if n[k] >= 0.0 {
                    aabb.mins[k]
                } else {
                    aabb.maxs[k]
                }
            };
            let h = (0..3).map(|k| n[k] * (lo(k) - p[k])).sum::<f64>();
            // Non-finite placements are passed on (the narrow phase propagates NaN).
            !(h > d)
        }
        (false, false) => {
            // A height field is a solid below its surface (super::height_field).
            let a = super::height_field::solid_aabb(model, kin, g1);
            let b = super::height_field::solid_aabb(model, kin, g2);
            (0..3).all(|k| !(a.mins[k] - d > b.maxs[k] || b.mins[k] - d > a.maxs[k]))
        }
    }
}

/// All geom pairs that pass the filters (not the bounding-box test, which needs the mixed
/// margin), each ordered by [`order_pair`], listed by increasing (min index, max index).
pub fn filtered_pairs(model: &Model) -> Vec<(usize, usize)> {
    let weld = weld_ids(model);
    let n = model.geoms.len();
    let mut pairs = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            if filters_allow(model, &weld, i, j) {
                pairs.push(order_pair(model, i, j));
            }
        }
    }
    pairs
}
