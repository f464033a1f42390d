//! The contact frame, built exactly as MuJoCo's `mju_makeFrame` (`engine_util_spatial.c`;
//! spec `soft_convex_and_signorini.md` §A7 "Frame").
//!
//! Rows `(n, t1, t2)`:
//! * `n = v · (1/‖v‖)` (MuJoCo's `mju_normalize3` multiplies by the reciprocal, which can differ
//!   from `v/‖v‖` in the last bit; a vector shorter than 1e-15 becomes `(1, 0, 0)`);
//! * `t1` starts as the collision function's tangent hint when it has one of squared length
//!   ≥ 0.25 (`mjc_PlaneCapsule` gives the capsule's axis), else as `(0, 1, 0)` if
//!   `|n_y| < 0.5`, else `(0, 0, 1)`; it is made orthogonal to `n` (Gram–Schmidt) and normalized;
//! * `t2 = n × t1`.
//!
//! Dots and crosses are evaluated in MuJoCo's order (`mju_dot3`: left to right) so that the
//! frame agrees with MuJoCo's bit for bit.

use nalgebra::Matrix3;

use super::plane_primitives::dot3;
use crate::model::Vec3;

/// MuJoCo's `mjMINVAL`.
pub(crate) const MIN_VAL: f64 = 1e-15;

/// `mju_normalize3`: scale by 1/‖v‖; `(1, 0, 0)` if ‖v‖ < 1e-15. Returns the original norm.
pub(crate) fn normalize3(v: &mut [f64; 3]) -> f64 {
    let norm = (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
    if norm < MIN_VAL {
        *v = [1.0, 0.0, 0.0];
    } else {
        let inv = 1.0 / norm;
        v[0] *= inv;
        v[1] *= inv;
        v[2] *= inv;
    }
    norm
}

/// The contact frame of normal `normal` (world frame, any non-zero length), as rows
/// `(n, t1, t2)` of a rotation matrix, following `mju_makeFrame` (see the module doc).
///
/// A zero normal gives the frame of `(1, 0, 0)` (MuJoCo raises an error there); a non-finite
/// normal gives a non-finite frame, so that divergence propagates rather than panicking.
pub fn contact_frame(normal: &Vec3) -> Matrix3<f64> {
    contact_frame_with_tangent(normal, &Vec3::zeros())
}

/// [`contact_frame`] with a first tangent hint (`mju_makeFrame` with `frame[3..6]` set, as
/// `mjc_PlaneCapsule` sets the capsule's axis): the hint made orthogonal to the normal and
/// normalized when its squared length is at least 0.25, else the default axis.
pub fn contact_frame_with_tangent(normal: &Vec3, tangent: &Vec3) -> Matrix3<f64> {
    let mut x = [normal.x, normal.y, normal.z];
    normalize3(&mut x);
    let hint = [tangent.x, tangent.y, tangent.z];
    let mut y = if dot3(&hint, &hint) >= 0.25 {
        hint
    } else if x[1] < 0.5 && x[1] > -0.5 {
        [0.0, 1.0, 0.0]
    } else {
        [0.0, 0.0, 1.0]
    };
    let d = dot3(&x, &y);
    let tmp = [x[0] * d, x[1] * d, x[2] * d];
    y = [y[0] - tmp[0], y[1] - tmp[1], y[2] - tmp[2]];
    normalize3(&mut y);
    // mju_cross
    let z = [
        x[1] * y[2] - x[2] * y[1],
        x[2] * y[0] - x[0] * y[2],
        x[0] * y[1] - x[1] * y[0],
    ];
    Matrix3::new(x[0], x[1], x[2], y[0], y[1], y[2], z[0], z[1], z[2])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_orthonormal_right_handed(f: &Matrix3<f64>) {
        let e = f * f.transpose() - Matrix3::identity();
        assert!(e.abs().max() < 1e-14, "not orthonormal: {f}");
        assert!(
            (f.determinant() - 1.0).abs() < 1e-14,
            "not right-handed: {f}"
        );
    }

    #[test]
    fn up_normal_gives_y_then_minus_x() {
        // n = +z: |n_y| < 0.5 so t1 = (0, 1, 0), t2 = z × y = (-1, 0, 0).
        let f = contact_frame(&Vec3::new(0.0, 0.0, 1.0));
        assert_eq!(
            f,
            Matrix3::new(0.0, 0.0, 1.0, 0.0, 1.0, 0.0, -1.0, 0.0, 0.0)
        );
    }

    #[test]
    fn y_normal_switches_to_z_tangent() {
        // n = +y: |n_y| >= 0.5 so t1 = (0, 0, 1), t2 = y × z = (1, 0, 0).
        let f = contact_frame(&Vec3::new(0.0, 1.0, 0.0));
        assert_eq!(f, Matrix3::new(0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0));
        // Exactly at the switch |n_y| = 0.5 the z tangent is used too.
        let n = Vec3::new(0.0, 0.5, 0.75f64.sqrt());
        let f = contact_frame(&n);
        // t1 = (e_z - (n.e_z) n)/|..| = (0, -n_z n_y, 1 - n_z^2)/(n_y) = (0, -sqrt(3)/2, 1/2)
        assert!((f.row(1).transpose() - Vec3::new(0.0, -0.75f64.sqrt(), 0.5)).norm() < 1e-15);
    }

    #[test]
    fn tilted_normal_closed_form_and_orthonormal() {
        // n = (sin a, 0, cos a): t1 = (0, 1, 0) (already orthogonal), t2 = n × t1 = (-cos a, 0, sin a).
        for k in 0..12 {
            let a = -1.2 + 0.2 * k as f64;
            let n = Vec3::new(a.sin(), 0.0, a.cos());
            let f = contact_frame(&(n * 3.0));
            assert!((f.row(0).transpose() - n).norm() < 1e-15);
            assert!((f.row(1).transpose() - Vec3::y()).norm() < 1e-15);
            assert!((f.row(2).transpose() - Vec3::new(-a.cos(), 0.0, a.sin())).norm() < 1e-15);
            assert_orthonormal_right_handed(&f);
        }
        // A generic direction with |n_y| < 0.5: t1 is e_y minus its n component, normalized.
        let n = Vec3::new(0.3, -0.2, 0.5).normalize();
        let f = contact_frame(&n);
        let t1 = (Vec3::y() - n * n.y).normalize();
        assert!((f.row(1).transpose() - t1).norm() < 1e-15);
        assert!((f.row(2).transpose() - n.cross(&t1)).norm() < 1e-15);
        assert_orthonormal_right_handed(&f);
        // |n_y| >= 0.5 (0.4/|(0.3, -0.4, 0.5)| = 0.566): t1 comes from e_z instead.
        let n = Vec3::new(0.3, -0.4, 0.5).normalize();
        let f = contact_frame(&n);
        let t1 = (Vec3::z() - n * n.z).normalize();
        assert!((f.row(1).transpose() - t1).norm() < 1e-15);
        assert_orthonormal_right_handed(&f);
    }

    #[test]
    fn zero_normal_falls_back_and_nan_propagates() {
        let f = contact_frame(&Vec3::zeros());
        assert_eq!(f.row(0).transpose(), Vec3::x());
        let f = contact_frame(&Vec3::new(f64::NAN, 0.0, 1.0));
        assert!(f.iter().any(|v| v.is_nan()));
    }
}
