//! Cylinder–box contacts in closed form: the cylinder's lateral surface against the box's
//! faces, edges and vertices, as two points at the ends of the cylinder's span over the box.
//!
//! # Why not parry for this pair
//!
//! parry collides a cylinder with a box through its generic polygonal-feature path
//! (`contact_manifold_pfm_pfm`): GJK for the closest points and normal, then the features
//! facing each other clipped (the cylinder's side is one generator segment, each cap an
//! inscribed square), plus the GJK point itself. For a wheel on a box's face or edge the
//! contact is a line, and GJK's closest point on a line contact is not unique: where it lands
//! along the line, and GJK's normal, carry the iterative solver's termination error, and the
//! extra point merges with a clipped one or not depending on where it lands. The contact set,
//! the points and the normals are then not smooth (not even continuous) functions of the
//! poses, which the `ncp_fb` adjoint (whose assembly derivative is a central difference with a
//! relative step of 1e-6) and any finite difference through the crossing cannot tolerate
//! (issue 13; the measurements are in `ncp_fb::adjoint`'s module doc).
//!
//! # Geometry
//!
//! Cylinder: centre `c`, unit axis `a` (its local z), radius `r`, half-length `l`. Box: centre
//! `b`, rotation `R` (columns: its axes in the world), half-extents `e`. In the box frame
//! `a' = Rᵀ a`, `c' = Rᵀ (c − b)`.
//!
//! 1. **Span.** `k` = the box axis most aligned with the cylinder's (largest `|a'_k|`). The
//!    cylinder's axis points `Q(s) = c + s a`, `|s| ≤ l`, are clipped to the box's slab along
//!    `k` (`|c'_k + s a'_k| ≤ e_k`): `[s₀, s₁]`. The two ends stand for the line contact of the
//!    lateral surface (the wheel's tread) with whatever part of the box is under it.
//! 2. **Per end** `Q = Q(sᵢ)`: the box's closest point `B` to `Q` (clamp `Q'` to `[−e, e]`,
//!    the exact projection onto a box), `δ = |Q − B|`, the box's outward direction
//!    `m = (Q − B)/δ` (the face normal when `B` lies inside a face, the direction from the
//!    edge or vertex otherwise: continuous across the regions, since the distance to a convex
//!    set is C¹ outside it). The cylinder's point deepest along `−m` at this end is the rim
//!    point `W = Q − r m⊥/|m⊥|`, `m⊥ = m − (m·a) a`, whose signed distance from the box along
//!    `m` is `gap = δ − r |m⊥|` (exact for a face: the rim point's distance to the face's
//!    plane; for an edge or vertex exact when `m ⊥ a`, the tread on a parallel edge).
//! 3. **Contact**: normal `n = −m` (from the cylinder, `geoms[0]` in MuJoCo's order, into the
//!    box), `point = W − (gap/2) m` (midway between the surfaces), `gap`; kept when
//!    `gap ≤ detect`.
//!
//! So a wheel on the box's top face, on its edge, or rolling from one onto the other has two
//! points whose gaps, normals and positions are continuous and piecewise smooth in the poses
//! (kinks only where `B` changes region or a span end is clipped), with no iterative solver.
//! Between the two points the tread of a cylinder skewed by ψ against an edge sinks at most
//! `(2 l sin ψ)² / (2 r)` (1.1e-4 m for the 0.1 m wide, 0.35 m wheel at ψ = 5°, 4.3e-4 m at
//! 10°).
//!
//! # Domain
//!
//! The closed form answers `None` (the caller uses parry) when the contact is not the
//! lateral surface's: the axes are more than [`MAX_SKEW`] apart from every box axis, the
//! clipped span is empty (the cylinder is beside the box along `k`: a cap may touch it), an
//! axis end lies inside the box (deep penetration), or `|m·a| > sin MAX_SKEW` at an end (the
//! box is off the cylinder's side: a cap or its rim faces it).
//!
//! Sources: the closest point on a box by clamping (Ericson, *Real-Time Collision Detection*,
//! 2005, §5.1.3); the deepest rim point of a cylinder toward a plane as in MuJoCo's
//! `mjc_PlaneCylinder` (`engine_collision_primitive.c`), which has no cylinder–box function
//! (MuJoCo sends that pair to its general convex path, libccd/nativeccd); the two-point line
//! contact as MuJoCo's `mjc_CapsuleBox` reports a capsule lying on a box face. Nothing here
//! is copied from either.

use super::plane_primitives::Candidate;
use crate::model::{Quat, Vec3};

/// Largest angle (rad) between the cylinder's axis and the nearest box axis, and largest tilt
/// of an end's normal out of the plane ⊥ the axis, for which the closed form applies (30°).
pub const MAX_SKEW: f64 = std::f64::consts::FRAC_PI_6;

/// A cylinder: centre (m, world), orientation (its local z is the axis), radius and
/// half-length (m).
#[derive(Debug, Clone, Copy)]
pub struct Cylinder {
    /// Centre (m, world).
    pub center: Vec3,
    /// Orientation; the axis is the local z.
    pub quat: Quat,
    /// Radius (m).
    pub radius: f64,
    /// Half-length along the axis (m).
    pub half_length: f64,
}

/// A box: centre (m, world), orientation and half-extents along its local x, y, z (m).
#[derive(Debug, Clone, Copy)]
pub struct Cuboid {
    /// Centre (m, world).
    pub center: Vec3,
    /// Orientation.
    pub quat: Quat,
    /// Half-extents (m).
    pub half: Vec3,
}

/// The contacts of the cylinder's lateral surface with the box (module doc): up to two
/// candidates `(point, normal from the cylinder into the box, gap)`, those with
/// `gap ≤ detect` (m); `None` outside the closed form's domain.
pub fn cylinder_box(cyl: &Cylinder, cub: &Cuboid, detect: f64) -> Option<Vec<Candidate>> {
    let rot = cub.quat.to_rotation_matrix();
    let a = cyl.quat * Vec3::z();
    let a_l = rot.inverse_transform_vector(&a);
    let c_l = rot.inverse_transform_vector(&(cyl.center - cub.center));
    let k = a_l.iamax();
    if a_l[k].abs() < MAX_SKEW.cos() {
        return None;
    }
    // Span of s with |c'_k + s a'_k| <= e_k, within [-l, l].
    let (t0, t1) = (
        (-cub.half[k] - c_l[k]) / a_l[k],
        (cub.half[k] - c_l[k]) / a_l[k],
    );
    let (s0, s1) = (
        t0.min(t1).max(-cyl.half_length),
        t0.max(t1).min(cyl.half_length),
    );
    if s0 > s1 {
        return None;
    }
    let ends: &[f64] = if s1 - s0 > super::narrow_phase::DUPLICATE_DISTANCE {
        &[s0, s1]
    } else {
        &[s0]
    };
    let mut out = Vec::with_capacity(2);
    for &s in ends {
        let q_l = c_l + a_l * s;
        let b_l = q_l.zip_map(&cub.half, |x, h| x.clamp(-h, h));
        let d_l = q_l - b_l;
        let delta = d_l.norm();
        if delta <= 0.0 {
            return None;
        }
        let m = rot * (d_l / delta);
        let along = m.dot(&a);
        if along.abs() > MAX_SKEW.sin() {
            return None;
        }
        let m_perp = m - a * along;
        let m_perp_norm = m_perp.norm();
        let gap = delta - cyl.radius * m_perp_norm;
        if !(gap <= detect) {
            continue;
        }
        let q = cyl.center + a * s;
        let w = q - m_perp * (cyl.radius / m_perp_norm);
        out.push((w - m * (0.5 * gap), -m, gap));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A wheel of radius 0.35 m, width 0.1 m, axle along world y at `center`.
    fn wheel(center: Vec3) -> Cylinder {
        Cylinder {
            center,
            quat: Quat::from_axis_angle(&Vec3::x_axis(), -std::f64::consts::FRAC_PI_2),
            radius: 0.35,
            half_length: 0.05,
        }
    }

    /// box_traversal's obstacle: 0.74 x 1.15 x 0.12 m on the ground at x = 1.37 m.
    fn obstacle() -> Cuboid {
        Cuboid {
            center: Vec3::new(1.37, 0.0, 0.06),
            quat: Quat::identity(),
            half: Vec3::new(0.37, 0.575, 0.06),
        }
    }

    #[test]
    fn wheel_on_the_top_face_gives_the_two_tread_ends_at_the_face_distance() {
        let c = wheel(Vec3::new(1.3, 0.2, 0.12 + 0.35 + 1e-3));
        let got = cylinder_box(&c, &obstacle(), 0.01).unwrap();
        assert_eq!(got.len(), 2);
        for (i, (p, n, gap)) in got.iter().enumerate() {
            assert!((gap - 1e-3).abs() < 1e-12, "{gap}");
            assert!((n - Vec3::new(0.0, 0.0, -1.0)).norm() < 1e-12, "{n}");
            let y = if i == 0 { 0.15 } else { 0.25 };
            let want = Vec3::new(1.3, y, 0.12 + 0.5e-3);
            assert!((p - want).norm() < 1e-12, "{p} vs {want}");
        }
    }

    #[test]
    fn wheel_on_the_front_edge_gets_the_normal_from_the_edge_to_the_axle() {
        // Axle 0.3 m before and 0.2 m above the front top edge (x = 1.0, z = 0.12): the
        // distance 0.36056 m, so the gap is 0.36056 - 0.35.
        let c = wheel(Vec3::new(0.7, 0.0, 0.32));
        let got = cylinder_box(&c, &obstacle(), 0.02).unwrap();
        assert_eq!(got.len(), 2);
        let dist = (0.3f64 * 0.3 + 0.2 * 0.2).sqrt();
        let m = Vec3::new(-0.3, 0.0, 0.2) / dist;
        for (p, n, gap) in &got {
            assert!((gap - (dist - 0.35)).abs() < 1e-12, "{gap}");
            assert!((n + m).norm() < 1e-12, "{n}");
            let edge = Vec3::new(1.0, p.y, 0.12);
            assert!((p - (edge + m * (0.5 * gap))).norm() < 1e-12, "{p}");
        }
    }

    #[test]
    fn contacts_are_continuous_from_the_edge_onto_the_face() {
        // Axle straight above the edge: edge and face regions give the same contact.
        let o = obstacle();
        let at = |x: f64| cylinder_box(&wheel(Vec3::new(x, 0.0, 0.47 + 1e-4)), &o, 0.01).unwrap();
        let (before, after) = (at(1.0 - 1e-9), at(1.0 + 1e-9));
        for (b, a) in before.iter().zip(&after) {
            assert!(
                (b.0 - a.0).norm() < 1e-8 && (b.1 - a.1).norm() < 1e-8,
                "{b:?} {a:?}"
            );
            assert!((b.2 - a.2).abs() < 1e-12);
        }
    }

    #[test]
    fn a_wheel_overhanging_the_side_is_clipped_to_the_box() {
        // Wheel spanning y in [0.55, 0.65]: the tread over the box is y in [0.55, 0.575].
        let c = wheel(Vec3::new(1.3, 0.6, 0.47));
        let got = cylinder_box(&c, &obstacle(), 0.01).unwrap();
        let ys: Vec<f64> = got.iter().map(|g| g.0.y).collect();
        assert!(
            (ys[0] - 0.55).abs() < 1e-12 && (ys[1] - 0.575).abs() < 1e-12,
            "{ys:?}"
        );
        assert!(got.iter().all(|g| g.2.abs() < 1e-12));
    }

    #[test]
    fn outside_the_domain_defers_to_parry() {
        let o = obstacle();
        // Standing on a cap.
        let mut c = wheel(Vec3::new(1.3, 0.0, 0.5));
        c.quat = Quat::identity();
        assert!(cylinder_box(&c, &o, 0.01).is_none());
        // Beside the box along its y.
        assert!(cylinder_box(&wheel(Vec3::new(1.3, 0.7, 0.3)), &o, 0.01).is_none());
    }
}
