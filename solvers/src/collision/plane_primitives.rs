//! Plane–sphere and plane–box contacts computed with MuJoCo's own arithmetic
//! (`engine_collision_primitive.c`: `mjc_PlaneSphere`, `mjc_PlaneBox`; spec
//! `soft_convex_and_signorini.md` §A7 "Box on plane", "Sphere on plane", "Arithmetic").
//!
//! Why not parry for these two pairs: parry's manifolds give the same points up to round-off,
//! but a box resting *exactly* on a plane (the reference `box_incline` scenes start with corners
//! at ±1e-17 m) makes rows or not depending on the last bit, and MuJoCo's trajectory follows
//! its own bits: with a different rounding an otherwise exact implementation leaves MuJoCo's
//! trajectory by millimetres (spec §A7). So these pairs evaluate MuJoCo's formulas in its order
//! of operations: rotation matrices from quaternions as `mju_quat2Mat`, 3-vector dot products
//! left to right (`mju_dot3`), matrix–vector products row by row (`mju_mulMatVec3`).
//! Every other pair goes through parry.

use crate::model::{Quat, Vec3};

/// A contact candidate in world coordinates: point, normal (plane +z, from the plane into the
/// other geom) and signed distance (m).
pub type Candidate = (Vec3, Vec3, f64);

/// `mju_quat2Mat`: the row-major rotation matrix of a unit quaternion (identity shortcut as
/// MuJoCo takes it).
pub fn quat_to_mat(q: &Quat) -> [f64; 9] {
    let (w, x, y, z) = (q.w, q.i, q.j, q.k);
    if w == 1.0 && x == 0.0 && y == 0.0 && z == 0.0 {
        return [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
    }
    let (q00, q01, q02, q03) = (w * w, w * x, w * y, w * z);
    let (q11, q12, q13) = (x * x, x * y, x * z);
    let (q22, q23, q33) = (y * y, y * z, z * z);
    [
        q00 + q11 - q22 - q33,
        2.0 * (q12 - q03),
        2.0 * (q13 + q02),
        2.0 * (q12 + q03),
        q00 - q11 + q22 - q33,
        2.0 * (q23 - q01),
        2.0 * (q13 - q02),
        2.0 * (q23 + q01),
        q00 - q11 - q22 + q33,
    ]
}

/// `mju_dot3`, left to right.
pub(crate) fn dot3(a: &[f64; 3], b: &[f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

/// `mju_mulMatVec3` (row-major), row by row.
pub(crate) fn mul_mat_vec3(m: &[f64; 9], v: &[f64; 3]) -> [f64; 3] {
    [
        m[0] * v[0] + m[1] * v[1] + m[2] * v[2],
        m[3] * v[0] + m[4] * v[1] + m[5] * v[2],
        m[6] * v[0] + m[7] * v[1] + m[8] * v[2],
    ]
}

fn plane_normal(plane_quat: &Quat) -> [f64; 3] {
    let m = quat_to_mat(plane_quat);
    [m[2], m[5], m[8]]
}

/// `mjc_PlaneCapsule`: a plane–sphere test at each end of the capsule's segment (centre ± the
/// geom's z axis × `half_length`), end +z first; returns the candidates and the capsule's axis,
/// which MuJoCo sets as each contact frame's first tangent.
pub fn plane_capsule(
    plane_pos: &Vec3,
    plane_quat: &Quat,
    center: &Vec3,
    quat: &Quat,
    radius: f64,
    half_length: f64,
    margin: f64,
) -> (Vec<Candidate>, Vec3) {
    let m = quat_to_mat(quat);
    let axis = Vec3::new(m[2], m[5], m[8]);
    let seg = axis * half_length;
    let out = [center + seg, center - seg]
        .iter()
        .filter_map(|end| plane_sphere(plane_pos, plane_quat, end, radius, margin))
        .collect();
    (out, axis)
}

/// `mjc_PlaneSphere`: at most one contact if the sphere's centre is within `r + margin` of the
/// plane. dist = (p_s − p_p)·n − r, point = p_s + n·(−dist/2 − r).
pub fn plane_sphere(
    plane_pos: &Vec3,
    plane_quat: &Quat,
    center: &Vec3,
    radius: f64,
    margin: f64,
) -> Option<Candidate> {
    let n = plane_normal(plane_quat);
    let dif = [
        center.x - plane_pos.x,
        center.y - plane_pos.y,
        center.z - plane_pos.z,
    ];
    let cdist = dot3(&dif, &n);
    if cdist > margin + radius {
        return None;
    }
    let dist = cdist - radius;
    let s = -dist / 2.0 - radius;
    let point = Vec3::new(
        center.x + n[0] * s,
        center.y + n[1] * s,
        center.z + n[2] * s,
    );
    Some((point, Vec3::from(n), dist))
}

/// `mjc_PlaneBox`: the corners `i = 0..8` (sign of x, y, z positive when bit 0, 1, 2 of i is
/// set) whose distance `d_c + ℓ_i` is at most `margin` and with `ℓ_i ≤ 0`, up to 4, where
/// `d_c = (p_box − p_plane)·n` and `ℓ_i = n·(R_box c_i)`; point = corner − n·dist/2.
pub fn plane_box(
    plane_pos: &Vec3,
    plane_quat: &Quat,
    box_pos: &Vec3,
    box_quat: &Quat,
    half: &Vec3,
    margin: f64,
) -> Vec<Candidate> {
    let n = plane_normal(plane_quat);
    let rot = quat_to_mat(box_quat);
    let dif = [
        box_pos.x - plane_pos.x,
        box_pos.y - plane_pos.y,
        box_pos.z - plane_pos.z,
    ];
    let cdist = dot3(&dif, &n);
    let mut out = Vec::new();
    for i in 0..8 {
        let c = [
            if i & 1 != 0 { half.x } else { -half.x },
            if i & 2 != 0 { half.y } else { -half.y },
            if i & 4 != 0 { half.z } else { -half.z },
        ];
        let v = mul_mat_vec3(&rot, &c);
        let ldist = dot3(&n, &v);
        if cdist + ldist > margin || ldist > 0.0 {
            continue;
        }
        let dist = cdist + ldist;
        let corner = [v[0] + box_pos.x, v[1] + box_pos.y, v[2] + box_pos.z];
        let s = -dist / 2.0;
        out.push((
            Vec3::new(
                corner[0] + n[0] * s,
                corner[1] + n[1] * s,
                corner[2] + n[2] * s,
            ),
            Vec3::from(n),
            dist,
        ));
        if out.len() >= 4 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quat_to_mat_is_the_rotation_matrix() {
        let q = Quat::from_euler_angles(0.3, -0.7, 1.1);
        let m = quat_to_mat(&q);
        let r = q.to_rotation_matrix();
        for i in 0..3 {
            for j in 0..3 {
                assert!((m[3 * i + j] - r[(i, j)]).abs() < 1e-15);
            }
        }
    }

    #[test]
    fn flat_box_gives_its_four_lowest_corners() {
        let c = plane_box(
            &Vec3::zeros(),
            &Quat::identity(),
            &Vec3::new(0.0, 0.0, 0.04),
            &Quat::identity(),
            &Vec3::repeat(0.05),
            0.0,
        );
        assert_eq!(c.len(), 4);
        for (p, n, d) in &c {
            assert!((d + 0.01).abs() < 1e-15 && *n == Vec3::z() && (p.z + 0.005).abs() < 1e-15);
            assert!((p.x.abs() - 0.05).abs() < 1e-15 && (p.y.abs() - 0.05).abs() < 1e-15);
        }
        // Corner order: bit 0 is x, bit 1 is y (the four with z negative: i = 0, 1, 2, 3).
        assert!(c[0].0.x < 0.0 && c[0].0.y < 0.0 && c[1].0.x > 0.0 && c[2].0.y > 0.0);
    }

    #[test]
    fn sphere_on_tilted_plane() {
        let q = Quat::from_axis_angle(&Vec3::y_axis(), 0.3);
        let n = q * Vec3::z();
        let center = n * 0.099;
        let (p, nn, d) = plane_sphere(&Vec3::zeros(), &q, &center, 0.1, 0.0).unwrap();
        assert!((d + 0.001).abs() < 1e-15 && (nn - n).norm() < 1e-15);
        assert!((p - n * (-0.0005)).norm() < 1e-15);
        assert!(plane_sphere(&Vec3::zeros(), &q, &(n * 0.2), 0.1, 0.0).is_none());
    }
}
