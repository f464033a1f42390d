//! Sphere, capsule, cylinder and box pairs computed with MuJoCo's own formulas and order of
//! operations (issue 18), as [`super::plane_primitives`] does for the plane pairs:
//!
//! | pair | MuJoCo function (file) | contacts |
//! |---|---|---|
//! | sphere–sphere | `mjc_SphereSphere` (`engine_collision_primitive.c`) | ≤ 1 |
//! | sphere–capsule | `mjc_SphereCapsule` (same) | ≤ 1 |
//! | sphere–cylinder | `mjc_SphereCylinder` (same) | ≤ 1 |
//! | capsule–capsule | `mjc_CapsuleCapsule` (same) | ≤ 2 |
//! | sphere–box | `mjc_SphereBox` (`engine_collision_box.c`) | ≤ 1 |
//! | plane–cylinder | `mjc_PlaneCylinder` (`engine_collision_primitive.c`) | ≤ 4 |
//! | capsule–box | `mjc_CapsuleBox` (`engine_collision_box.c`; [`super::capsule_box`]) | ≤ 2 |
//! | plane–ellipsoid | `mjc_PlaneConvex` with the ellipsoid's support (`engine_collision_convex.c`) | ≤ 1 |
//!
//! The arguments are MuJoCo's: `pos` the geom's centre (m, world), `mat` its rotation matrix,
//! row-major, from [`super::plane_primitives::quat_to_mat`] (`mju_quat2Mat` of `geom_xquat`),
//! sizes as MuJoCo's `geom_size` (radius; half-length), `margin` the pair's detection
//! distance (MuJoCo passes `margin`; the harness passes `margin + gap`, see
//! [`super::narrow_phase`]). Each candidate is `(point, normal, dist)`: the point midway
//! between the surfaces (m, world), the unit normal from the first geom into the second, the
//! signed distance (m, negative in penetration). None of these pairs sets a tangent hint, so
//! the frames are `mju_makeFrame`'s default ([`super::frame::contact_frame`]).
//!
//! Why MuJoCo's arithmetic and not parry's manifolds: parry's capsule–capsule manifold reports
//! the two ends of the overlap of parallel capsules where MuJoCo reports the segment ends it
//! tests (and it stops at two), its cylinder rims are polygons (a standing cylinder gives four
//! points at ±r where MuJoCo gives its deepest rim point and a triangle), and a sphere inside a
//! box gets parry's normal where MuJoCo pushes it out through the nearest face. Those differences
//! move a trajectory away from MuJoCo's at the first contact.
//!
//! Limits of the parity: the results are bit-identical to an x86-64 MuJoCo build, which does
//! not fuse multiply-adds (an aarch64 build may). MuJoCo's bounding-sphere prefilter
//! (`mj_filterSphere`) is not applied before these functions; it never rejects a pair they
//! accept, except by one rounding of its bound at exactly the detection distance, where the
//! contact lies in the gap and carries no constraint row.

use super::frame::{normalize3, MIN_VAL as MINVAL};
use super::plane_primitives::{dot3, mul_mat_vec3, Candidate};
use crate::model::Vec3;

pub(super) type V3 = [f64; 3];

pub(super) fn sub3(a: &V3, b: &V3) -> V3 {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

pub(super) fn add3(a: &V3, b: &V3) -> V3 {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

pub(super) fn scl3(a: &V3, s: f64) -> V3 {
    [a[0] * s, a[1] * s, a[2] * s]
}

fn cross3(a: &V3, b: &V3) -> V3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// `mju_clip`.
fn clip(x: f64, lo: f64, hi: f64) -> f64 {
    if x < lo {
        lo
    } else if x > hi {
        hi
    } else {
        x
    }
}

/// `mju_mulMatTVec3`: the transpose times `v`.
pub(super) fn mul_mat_t_vec3(m: &[f64; 9], v: &V3) -> V3 {
    [
        m[0] * v[0] + m[3] * v[1] + m[6] * v[2],
        m[1] * v[0] + m[4] * v[1] + m[7] * v[2],
        m[2] * v[0] + m[5] * v[1] + m[8] * v[2],
    ]
}

/// The geom's z axis (third column of `mat`).
pub(super) fn z_axis(m: &[f64; 9]) -> V3 {
    [m[2], m[5], m[8]]
}

fn candidate(point: V3, normal: V3, dist: f64) -> Candidate {
    (Vec3::from(point), Vec3::from(normal), dist)
}

/// A geom's placement as MuJoCo's collision functions read it: centre and row-major rotation.
#[derive(Debug, Clone, Copy)]
pub struct Placed {
    /// Centre (m, world).
    pub pos: V3,
    /// Rotation matrix, row-major (`geom_xmat`).
    pub mat: [f64; 9],
}

/// `mjraw_SphereSphere`: spheres of radii `r1`, `r2` at `p1`, `p2` (the matrices only give the
/// normal of concentric spheres: the cross product of their z axes). dist = |p1 − p2| − r1 − r2;
/// normal from p1 to p2; point p1 + n (r1 + dist/2).
fn sphere_sphere_raw(
    p1: &V3,
    m1: &[f64; 9],
    r1: f64,
    p2: &V3,
    m2: &[f64; 9],
    r2: f64,
    margin: f64,
) -> Option<Candidate> {
    let dif = sub3(p1, p2);
    let cdist_sqr = dot3(&dif, &dif);
    let min_dist = margin + r1 + r2;
    if cdist_sqr > min_dist * min_dist {
        return None;
    }
    let dist = cdist_sqr.sqrt() - r1 - r2;
    let mut normal = sub3(p2, p1);
    let len = normalize3(&mut normal);
    if len < MINVAL {
        normal = cross3(&z_axis(m1), &z_axis(m2));
        normalize3(&mut normal);
    }
    let point = add3(&scl3(&normal, r1 + dist / 2.0), p1);
    Some(candidate(point, normal, dist))
}

/// `mjc_SphereSphere`.
pub fn sphere_sphere(s1: &Placed, r1: f64, s2: &Placed, r2: f64, margin: f64) -> Option<Candidate> {
    sphere_sphere_raw(&s1.pos, &s1.mat, r1, &s2.pos, &s2.mat, r2, margin)
}

/// `mjc_SphereCapsule`: the sphere against the point of the capsule's segment nearest to its
/// centre (projection on the axis clipped to ±`half_length`), as two spheres.
pub fn sphere_capsule(
    s: &Placed,
    r: f64,
    c: &Placed,
    radius: f64,
    half_length: f64,
    margin: f64,
) -> Option<Candidate> {
    let axis = z_axis(&c.mat);
    let vec = sub3(&s.pos, &c.pos);
    let x = clip(dot3(&axis, &vec), -half_length, half_length);
    let near = add3(&scl3(&axis, x), &c.pos);
    sphere_sphere_raw(&s.pos, &s.mat, r, &near, &c.mat, radius, margin)
}

/// `mjc_SphereCylinder`: by where the sphere's centre projects, a side contact (sphere–sphere
/// against the axis point at the centre's height), a cap contact (the cap as a plane, normal
/// flipped to point from the sphere into the cylinder) or a rim contact (sphere–sphere against
/// the nearest rim point as a sphere of radius 0); a centre inside the cylinder takes the
/// nearer of side and cap.
pub fn sphere_cylinder(
    s: &Placed,
    r: f64,
    c: &Placed,
    radius: f64,
    half_length: f64,
    margin: f64,
) -> Option<Candidate> {
    let axis = z_axis(&c.mat);
    let vec = sub3(&s.pos, &c.pos);
    let x = dot3(&axis, &vec);
    let a_proj = scl3(&axis, x);
    let p_proj = sub3(&vec, &a_proj);
    let p_proj_sqr = dot3(&p_proj, &p_proj);
    let mut side = x.abs() < half_length;
    let mut cap = p_proj_sqr < radius * radius;
    if side && cap {
        let dist_cap = half_length - x.abs();
        let dist_radius = radius - p_proj_sqr.sqrt();
        if dist_cap < dist_radius {
            side = false;
        } else {
            cap = false;
        }
    }
    if side {
        let on_axis = add3(&a_proj, &c.pos);
        return sphere_sphere_raw(&s.pos, &s.mat, r, &on_axis, &c.mat, radius, margin);
    }
    if cap {
        let m = &c.mat;
        let (cap_pos, normal) = if x > 0.0 {
            (add3(&c.pos, &scl3(&axis, half_length)), [m[2], m[5], m[8]])
        } else {
            // `flipmat`: the x and z columns negated.
            (
                add3(&c.pos, &scl3(&axis, -half_length)),
                [-m[2], -m[5], -m[8]],
            )
        };
        // mjraw_PlaneSphere with the cap as the plane, then the normal flipped.
        let tmp = sub3(&s.pos, &cap_pos);
        let cdist = dot3(&tmp, &normal);
        if cdist > margin + r {
            return None;
        }
        let dist = cdist - r;
        let point = add3(&s.pos, &scl3(&normal, -dist / 2.0 - r));
        return Some(candidate(point, scl3(&normal, -1.0), dist));
    }
    // The rim: the nearest rim point as a sphere of radius 0 (p_proj ≠ 0 here).
    let rim = scl3(&p_proj, radius / p_proj_sqr.sqrt());
    let corner = add3(
        &add3(
            &scl3(&axis, if x > 0.0 { half_length } else { -half_length }),
            &rim,
        ),
        &c.pos,
    );
    sphere_sphere_raw(&s.pos, &s.mat, r, &corner, &c.mat, 0.0, margin)
}

/// `mjc_CapsuleCapsule`: the nearest points of the two segments (clipped to their ends) as two
/// spheres; for parallel axes (|det| < `mjMINVAL`) up to two of the four end-to-segment tests,
/// in MuJoCo's order (ends of the first capsule, then of the second).
pub fn capsule_capsule(
    c1: &Placed,
    radius1: f64,
    half1: f64,
    c2: &Placed,
    radius2: f64,
    half2: f64,
    margin: f64,
) -> Vec<Candidate> {
    let axis1 = scl3(&z_axis(&c1.mat), half1);
    let axis2 = scl3(&z_axis(&c2.mat), half2);
    let (p1, p2) = (&c1.pos, &c2.pos);
    let dif = sub3(p1, p2);
    let ma = dot3(&axis1, &axis1);
    let mb = -dot3(&axis1, &axis2);
    let mc = dot3(&axis2, &axis2);
    let u = -dot3(&axis1, &dif);
    let v = dot3(&axis2, &dif);
    let det = ma * mc - mb * mb;
    let pair = |x1: f64, x2: f64| {
        let v1 = add3(&scl3(&axis1, x1), p1);
        let v2 = add3(&scl3(&axis2, x2), p2);
        sphere_sphere_raw(&v1, &c1.mat, radius1, &v2, &c2.mat, radius2, margin)
    };
    if det.abs() >= MINVAL {
        let mut x1 = (mc * u - mb * v) / det;
        let mut x2 = (ma * v - mb * u) / det;
        if x1 > 1.0 {
            x1 = 1.0;
            x2 = (v - mb) / mc;
        } else if x1 < -1.0 {
            x1 = -1.0;
            x2 = (v + mb) / mc;
        }
        if x2 > 1.0 {
            x2 = 1.0;
            x1 = clip((u - mb) / ma, -1.0, 1.0);
        } else if x2 < -1.0 {
            x2 = -1.0;
            x1 = clip((u + mb) / ma, -1.0, 1.0);
        }
        return pair(x1, x2).into_iter().collect();
    }
    // Parallel axes: the segment ends, MuJoCo's evaluation (an end as pos ± axis exactly).
    let mut out = Vec::with_capacity(2);
    let end_vs_segment = |end: V3, other_axis: &V3, other_pos: &V3, x: f64, first_is_end: bool| {
        let on = add3(&scl3(other_axis, x), other_pos);
        if first_is_end {
            sphere_sphere_raw(&end, &c1.mat, radius1, &on, &c2.mat, radius2, margin)
        } else {
            sphere_sphere_raw(&on, &c1.mat, radius1, &end, &c2.mat, radius2, margin)
        }
    };
    out.extend(end_vs_segment(
        add3(p1, &axis1),
        &axis2,
        p2,
        clip((v - mb) / mc, -1.0, 1.0),
        true,
    ));
    out.extend(end_vs_segment(
        sub3(p1, &axis1),
        &axis2,
        p2,
        clip((v + mb) / mc, -1.0, 1.0),
        true,
    ));
    if out.len() >= 2 {
        return out;
    }
    out.extend(end_vs_segment(
        add3(p2, &axis2),
        &axis1,
        p1,
        clip((u - mb) / ma, -1.0, 1.0),
        false,
    ));
    if out.len() >= 2 {
        return out;
    }
    out.extend(end_vs_segment(
        sub3(p2, &axis2),
        &axis1,
        p1,
        clip((u + mb) / ma, -1.0, 1.0),
        false,
    ));
    out
}

/// `mjc_SphereBox`: the sphere's centre in the box frame clamped to the box; outside, the
/// contact is along the clamped point's direction; a centre inside the box is pushed out through
/// the nearest face (MuJoCo's face order −x, +x, −y, +y, −z, +z; the first of equals wins).
pub fn sphere_box(s: &Placed, r: f64, b: &Placed, half: &Vec3, margin: f64) -> Option<Candidate> {
    let size = [half.x, half.y, half.z];
    let center = mul_mat_t_vec3(&b.mat, &sub3(&s.pos, &b.pos));
    let mut clamped = center;
    for i in 0..3 {
        if size[i] > 0.0 {
            clamped[i] = clip(clamped[i], -size[i], size[i]);
        }
    }
    let mut tmp = sub3(&clamped, &center);
    let mut dist = normalize3(&mut tmp);
    if dist - r > margin {
        return None;
    }
    let (pos, normal) = if dist <= MINVAL {
        let mut closest = (size[0] + size[1] + size[2]) * 2.0;
        let mut k = 0;
        for i in 0..6 {
            let face = (if i % 2 == 1 { 1.0 } else { -1.0 }) * size[i / 2];
            if closest > (face - center[i / 2]).abs() {
                closest = (face - center[i / 2]).abs();
                k = i;
            }
        }
        let mut nearest = [0.0; 3];
        nearest[k / 2] = if k % 2 == 1 { -1.0 } else { 1.0 };
        let pos = add3(&center, &scl3(&nearest, (r - closest) / 2.0));
        dist = -closest;
        (pos, mul_mat_vec3(&b.mat, &nearest))
    } else {
        let deepest = add3(&center, &scl3(&tmp, r));
        // From zero, as MuJoCo accumulates it (the sign of a zero component agrees).
        let pos = add3(&add3(&[0.0; 3], &scl3(&clamped, 0.5)), &scl3(&deepest, 0.5));
        (pos, mul_mat_vec3(&b.mat, &tmp))
    };
    let point = add3(&mul_mat_vec3(&b.mat, &pos), &b.pos);
    Some(candidate(point, normal, dist - r))
}

/// `mjc_PlaneCylinder`: the rim point nearest the plane on the cap nearer to it; if that is
/// within `margin`, the same rim point on the other cap, and two more rim points on the near
/// cap at ±120° from the first (a triangle inscribed in the rim) when they are within `margin`.
/// A cylinder standing flat takes the rim point along its local x axis.
pub fn plane_cylinder(
    plane: &Placed,
    c: &Placed,
    radius: f64,
    half_length: f64,
    margin: f64,
) -> Vec<Candidate> {
    let normal = z_axis(&plane.mat);
    let mut axis = z_axis(&c.mat);
    let mut prjaxis = dot3(&normal, &axis);
    if prjaxis > 0.0 {
        axis = scl3(&axis, -1.0);
        prjaxis = -prjaxis;
    }
    let dist0 = dot3(&sub3(&c.pos, &plane.pos), &normal);
    let mut vec = sub3(&scl3(&axis, prjaxis), &normal);
    let len_sqr = dot3(&vec, &vec);
    if len_sqr >= MINVAL * MINVAL {
        let scl = radius / len_sqr.sqrt();
        vec = scl3(&vec, scl);
    } else {
        vec = [c.mat[0] * radius, c.mat[3] * radius, c.mat[6] * radius];
    }
    let prjvec = dot3(&vec, &normal);
    let axis = scl3(&axis, half_length);
    let prjaxis = prjaxis * half_length;
    let mut out = Vec::with_capacity(4);
    let push = |out: &mut Vec<Candidate>, base: V3, dist: f64| {
        out.push(candidate(
            add3(&base, &scl3(&normal, -dist * 0.5)),
            normal,
            dist,
        ));
    };
    let d = dist0 + prjaxis + prjvec;
    // MuJoCo adds the first point only if `d <= margin` (a NaN gives no contacts).
    if !(d <= margin) {
        return out;
    }
    push(&mut out, add3(&add3(&c.pos, &vec), &axis), d);
    let d = dist0 - prjaxis + prjvec;
    if d <= margin {
        push(&mut out, sub3(&add3(&c.pos, &vec), &axis), d);
    }
    let prjvec1 = -prjvec * 0.5;
    let d = dist0 + prjaxis + prjvec1;
    if d <= margin {
        let mut vec1 = cross3(&vec, &axis);
        normalize3(&mut vec1);
        let vec1 = scl3(&vec1, radius * 3.0_f64.sqrt() / 2.0);
        let side = |sign: f64| {
            let p = add3(&c.pos, &scl3(&vec1, sign));
            add3(&add3(&p, &axis), &scl3(&vec, -0.5))
        };
        push(&mut out, side(1.0), d);
        push(&mut out, side(-1.0), d);
    }
    out
}

/// The plane–ellipsoid contact of MuJoCo's `mjc_PlaneConvex` (`engine_collision_convex.c`),
/// which MuJoCo's collision table uses for this pair: the ellipsoid's support point `s` in the
/// direction `−n` (n the plane's normal, its z axis), the signed distance `dist = n·(s − p)` of
/// that point from the plane through `p`, and, when `dist ≤ margin`, one contact at
/// `s − (dist/2) n` with normal `n` (MuJoCo stops there for an ellipsoid: the extra vertices it
/// adds are a mesh's).
///
/// The support point of an ellipsoid with semi-axes `a = radii` (m, the geom's x, y, z) in the
/// world direction `d` (`mjc_ellipsoidSupport`): `d' = Rᵀ d` in the geom frame, `w = a ∘ d'`,
/// `s' = a ∘ w/|w|` (the point where the outward normal is `d`: the surface
/// `Σ (x_i/a_i)² = 1` has normal ∝ x_i/a_i², and `x = a ∘ w/|w|` gives x_i/a_i² = d'_i/|w|),
/// `s = p_e + R s'`. Where `|w| < 1e-15` (a zero direction) MuJoCo takes the end of the local
/// x semi-axis, as here.
pub fn plane_ellipsoid(plane: &Placed, e: &Placed, radii: &Vec3, margin: f64) -> Option<Candidate> {
    let normal = z_axis(&plane.mat);
    let dir = scl3(&normal, -1.0);
    let local = mul_mat_t_vec3(&e.mat, &dir);
    let w = [local[0] * radii.x, local[1] * radii.y, local[2] * radii.z];
    let norm = dot3(&w, &w).sqrt();
    let support_local = if norm < MINVAL {
        [radii.x, 0.0, 0.0]
    } else {
        [
            w[0] / norm * radii.x,
            w[1] / norm * radii.y,
            w[2] / norm * radii.z,
        ]
    };
    let support = add3(&mul_mat_vec3(&e.mat, &support_local), &e.pos);
    let dist = dot3(&normal, &sub3(&support, &plane.pos));
    // A NaN distance gives no contact (the harness judges divergence on the state).
    if !(dist <= margin) {
        return None;
    }
    Some(candidate(
        add3(&support, &scl3(&normal, -0.5 * dist)),
        normal,
        dist,
    ))
}

/// The pair `(g0, g1)` (MuJoCo's order: lower shape type first) if it is one of this module's,
/// as candidates with detection distance `margin` (m); `None` for every other pair, which the
/// caller collides otherwise. A geom with [`crate::model::Geom::line_contact_as_point`] (the
/// wheeled robot's wheels) keeps the harness's own rule and is not handled here. Geoms with a
/// non-finite placement give no candidates.
pub fn collide(
    model: &crate::model::Model,
    kin: &crate::kinematics::Kinematics,
    g0: usize,
    g1: usize,
    margin: f64,
) -> Option<Vec<Candidate>> {
    use crate::geometry::GeomShape as S;
    let (a, b) = (&model.geoms[g0], &model.geoms[g1]);
    if a.line_contact_as_point || b.line_contact_as_point {
        return None;
    }
    let handled = matches!(
        (&a.shape, &b.shape),
        (S::Plane, S::Cylinder { .. } | S::Ellipsoid { .. })
            | (
                S::Sphere { .. },
                S::Sphere { .. } | S::Capsule { .. } | S::Cylinder { .. } | S::Box { .. }
            )
            | (S::Capsule { .. }, S::Capsule { .. } | S::Box { .. })
    );
    if !handled {
        return None;
    }
    let place = |g: usize| {
        let (p, q) = (kin.geom_xpos[g], kin.geom_xquat[g]);
        p.iter()
            .chain(q.coords.iter())
            .all(|x| x.is_finite())
            .then(|| Placed {
                pos: [p.x, p.y, p.z],
                mat: super::plane_primitives::quat_to_mat(&q),
            })
    };
    let (Some(p0), Some(p1)) = (place(g0), place(g1)) else {
        return Some(Vec::new());
    };
    Some(match (&a.shape, &b.shape) {
        (
            S::Plane,
            S::Cylinder {
                radius,
                half_length,
            },
        ) => plane_cylinder(&p0, &p1, *radius, *half_length, margin),
        (S::Plane, S::Ellipsoid { radii }) => plane_ellipsoid(&p0, &p1, radii, margin)
            .into_iter()
            .collect(),
        (S::Sphere { radius: r }, S::Sphere { radius }) => {
            sphere_sphere(&p0, *r, &p1, *radius, margin)
                .into_iter()
                .collect()
        }
        (
            S::Sphere { radius: r },
            S::Capsule {
                radius,
                half_length,
            },
        ) => sphere_capsule(&p0, *r, &p1, *radius, *half_length, margin)
            .into_iter()
            .collect(),
        (
            S::Sphere { radius: r },
            S::Cylinder {
                radius,
                half_length,
            },
        ) => sphere_cylinder(&p0, *r, &p1, *radius, *half_length, margin)
            .into_iter()
            .collect(),
        (S::Sphere { radius: r }, S::Box { half }) => {
            sphere_box(&p0, *r, &p1, half, margin).into_iter().collect()
        }
        (
            S::Capsule {
                radius: r0,
                half_length: h0,
            },
            S::Capsule {
                radius: r1,
                half_length: h1,
            },
        ) => capsule_capsule(&p0, *r0, *h0, &p1, *r1, *h1, margin),
        (
            S::Capsule {
                radius,
                half_length,
            },
            S::Box { half },
        ) => super::capsule_box::capsule_box(&p0, *radius, *half_length, &p1, half, margin),
        _ => unreachable!("checked by `handled`"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const I: [f64; 9] = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];

    fn at(p: V3) -> Placed {
        Placed { pos: p, mat: I }
    }

    #[test]
    fn spheres_touching_along_x() {
        let (p, n, d) = sphere_sphere(&at([0.0; 3]), 0.1, &at([0.19, 0.0, 0.0]), 0.1, 0.0).unwrap();
        assert!((d + 0.01).abs() < 1e-15 && n == Vec3::x());
        assert!((p - Vec3::new(0.095, 0.0, 0.0)).norm() < 1e-15);
        assert!(sphere_sphere(&at([0.0; 3]), 0.1, &at([0.21, 0.0, 0.0]), 0.1, 0.0).is_none());
        assert!(sphere_sphere(&at([0.0; 3]), 0.1, &at([0.21, 0.0, 0.0]), 0.1, 0.02).is_some());
    }

    #[test]
    fn crossed_capsules_touch_at_their_centres_and_parallel_ones_at_two_ends() {
        // Capsule 1 along z, capsule 2 along x (rotated about y) 0.15 m away along y.
        let rot_y = [0.0, 0.0, 1.0, 0.0, 1.0, 0.0, -1.0, 0.0, 0.0];
        let c2 = Placed {
            pos: [0.0, 0.15, 0.0],
            mat: rot_y,
        };
        let c = capsule_capsule(&at([0.0; 3]), 0.1, 0.3, &c2, 0.1, 0.3, 0.0);
        assert_eq!(c.len(), 1);
        assert!((c[0].2 + 0.05).abs() < 1e-15 && (c[0].1 - Vec3::y()).norm() < 1e-15);
        // Parallel, offset along the axis by 0.2: both ends of the first capsule reach the
        // second's segment (the first two of MuJoCo's four tests).
        let c = capsule_capsule(
            &at([0.0; 3]),
            0.1,
            0.3,
            &at([0.15, 0.0, 0.2]),
            0.1,
            0.3,
            0.0,
        );
        assert_eq!(c.len(), 2);
        assert!(c.iter().all(|x| (x.2 + 0.05).abs() < 1e-15));
        assert!((c[0].0.z - 0.3).abs() < 1e-15 && (c[1].0.z - (-0.1)).abs() < 1e-15);
    }

    #[test]
    fn sphere_outside_and_inside_a_box() {
        let b = at([0.0; 3]);
        let half = Vec3::new(0.2, 0.3, 0.4);
        let (p, n, d) = sphere_box(&at([0.0, 0.0, 0.45]), 0.1, &b, &half, 0.0).unwrap();
        // Normal from the sphere into the box.
        assert!((d + 0.05).abs() < 1e-15 && (n + Vec3::z()).norm() < 1e-15);
        assert!((p - Vec3::new(0.0, 0.0, 0.375)).norm() < 1e-15);
        // Centre inside, nearest face +x (0.05 away): pushed out through it.
        let (_, n, d) = sphere_box(&at([0.15, 0.0, 0.0]), 0.1, &b, &half, 0.0).unwrap();
        assert!((d + 0.15).abs() < 1e-15 && (n + Vec3::x()).norm() < 1e-15);
    }

    #[test]
    fn standing_cylinder_gives_mujocos_rim_point_and_triangle() {
        // Cylinder standing on the plane, 1 mm into it: the rim point along local x, the same
        // point on the upper cap is far, and two more rim points at ±120°.
        let c = plane_cylinder(&at([0.0; 3]), &at([0.0, 0.0, 0.099]), 0.05, 0.1, 0.0);
        assert_eq!(c.len(), 3);
        for (p, n, d) in &c {
            assert!((d + 0.001).abs() < 1e-15 && *n == Vec3::z());
            assert!((p.xy().norm() - 0.05).abs() < 1e-15 && (p.z + 0.0005).abs() < 1e-15);
        }
        assert!((c[0].0.x - 0.05).abs() < 1e-15);
        // Lying on its side: the two ends of the lowest generator, no triangle.
        let lying = Placed {
            pos: [0.0, 0.0, 0.049],
            mat: [1.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 1.0, 0.0],
        };
        let c = plane_cylinder(&at([0.0; 3]), &lying, 0.05, 0.1, 0.0);
        assert_eq!(c.len(), 2);
        assert!(c.iter().all(|x| (x.2 + 0.001).abs() < 1e-15));
    }

    #[test]
    fn sphere_on_a_cylinder_cap_side_and_rim() {
        let c = at([0.0; 3]);
        // Above the top cap: normal from the sphere into the cylinder (−z).
        let (_, n, d) = sphere_cylinder(&at([0.0, 0.0, 0.18]), 0.1, &c, 0.05, 0.1, 0.0).unwrap();
        assert!((d + 0.02).abs() < 1e-15 && (n + Vec3::z()).norm() < 1e-15);
        // Beside: sphere–sphere against the axis point.
        let (_, n, d) = sphere_cylinder(&at([0.14, 0.0, 0.0]), 0.1, &c, 0.05, 0.1, 0.0).unwrap();
        assert!((d + 0.01).abs() < 1e-15 && (n + Vec3::x()).norm() < 1e-15);
        // Diagonally beyond the rim: against the rim point (0.05, 0, 0.1).
        let s = [0.05 + 0.06, 0.0, 0.1 + 0.06];
        let (_, _, d) = sphere_cylinder(&at(s), 0.1, &c, 0.05, 0.1, 0.0).unwrap();
        assert!((d - (0.06 * 2.0_f64.sqrt() - 0.1)).abs() < 1e-15);
    }

    #[test]
    fn tilted_ellipsoid_touches_the_plane_at_its_lowest_point() {
        // Semi-axes (a, b, c) = (0.2, 0.1, 0.05), turned by θ about y: the lowest point lies
        // sqrt(a² sin²θ + c² cos²θ) below the centre, x = (a² − c²) sinθ cosθ / that depth from it
        // (the point where the surface's normal is −z).
        let (a, c, th) = (0.2_f64, 0.05_f64, 0.4_f64);
        let (s, co) = th.sin_cos();
        let e = Placed {
            pos: [0.1, -0.2, 0.08],
            mat: [co, 0.0, s, 0.0, 1.0, 0.0, -s, 0.0, co],
        };
        let depth = (a * a * s * s + c * c * co * co).sqrt();
        let radii = Vec3::new(a, 0.1, c);
        let (p, n, d) = plane_ellipsoid(&at([0.0; 3]), &e, &radii, 0.0).unwrap();
        assert!((d - (0.08 - depth)).abs() < 1e-15, "dist {d}");
        assert_eq!(n, Vec3::z());
        let x = 0.1 + (a * a - c * c) * s * co / depth;
        assert!((p.x - x).abs() < 1e-15 && (p.y + 0.2).abs() < 1e-15);
        assert!((p.z - d / 2.0).abs() < 1e-15, "midway between the surfaces");
        // Lifted above the margin: no contact; within it: a contact with a positive distance.
        let high = Placed {
            pos: [0.1, -0.2, depth + 0.01],
            ..e
        };
        assert!(plane_ellipsoid(&at([0.0; 3]), &high, &radii, 0.005).is_none());
        let (_, _, d) = plane_ellipsoid(&at([0.0; 3]), &high, &radii, 0.02).unwrap();
        assert!((d - 0.01).abs() < 1e-15);
    }
}
