//! The penalty contact force law for one contact (spec `ncp_fb_and_penalty.md` §4.1, Newton's
//! `SolverSemiImplicit` / warp.sim `eval_rigid_contacts`), in contactlab's sign conventions.
//!
//! Conventions: the normal `n` points from geom 1 to geom 2, `d` is the signed distance (m,
//! negative in penetration), `v` is the velocity of geom 2's contact point relative to geom 1's
//! (m/s), and the returned force acts **on geom 2** (the opposite force on geom 1).
//!
//! * In penetration (d < 0): normal force `N = −ke·d − kd·min(v_n, 0)` along n (the damping
//!   acts only while approaching, warp's `step(d)` convention).
//! * Friction, in penetration only:
//!   - `Huber` (the reference law): with `H = Huber_δ(‖v_t‖)`, `f_t = −(v_t/H)·min(kf·H, μN)`.
//!     Viscous `kf·v_t` until `kf·H` reaches `μN`; beyond, the Huber norm is not
//!     1-homogeneous and the cap is not exactly `μN` (it peaks near `2μN` at ‖v_t‖ = δ).
//!   - `Normalized`: `f_t = −v̂_t·min(kf·‖v_t‖, μN)`, a viscous-regularized Coulomb law with the
//!     exact cap `μN`.
//! * Adhesion band (0 ≤ d < ka): an attractive spring `−ke·d` along n, no damping or friction.
//! * No force for d ≥ max(ka, 0).

use serde::{Deserialize, Serialize};

use crate::model::Vec3;

/// How the penalty law caps friction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrictionLaw {
    /// The reference law with the Huber-smoothed slip norm (Newton/warp.sim parity).
    Huber,
    /// Viscous-regularized Coulomb friction capped at exactly μN.
    Normalized,
}

/// Coefficients of the law for one contact (mean of the two geoms' materials).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PenaltyCoefficients {
    /// Normal stiffness (N/m).
    pub ke: f64,
    /// Normal damping (N s/m).
    pub kd: f64,
    /// Viscous friction coefficient (N s/m).
    pub kf: f64,
    /// Adhesion distance (m).
    pub ka: f64,
    /// Sliding friction coefficient (-).
    pub mu: f64,
}

/// Huber norm of a slip speed `s ≥ 0` (m/s) with smoothing `delta` (m/s):
/// `½s²` for `s ≤ δ`, else `δ(s − δ/2)`.
pub fn huber(s: f64, delta: f64) -> f64 {
    if s <= delta {
        0.5 * s * s
    } else {
        delta * (s - 0.5 * delta)
    }
}

/// The force on geom 2 (N, world frame) from one contact with normal `n` (unit, geom 1 → 2),
/// signed distance `d` (m) and relative velocity `v` (m/s).
///
/// Returns `(normal, tangential)`: the normal component along n (positive = repulsive) and the
/// tangential force vector (perpendicular to n).
pub fn contact_force(
    c: &PenaltyCoefficients,
    law: FrictionLaw,
    delta: f64,
    n: &Vec3,
    d: f64,
    v: &Vec3,
) -> (f64, Vec3) {
    if d >= 0.0 {
        if d < c.ka {
            return (-c.ke * d, Vec3::zeros());
        }
        return (0.0, Vec3::zeros());
    }
    let vn = n.dot(v);
    let normal = -c.ke * d - c.kd * vn.min(0.0);
    let vt = v - n * vn;
    let s = vt.norm();
    if s == 0.0 {
        return (normal, Vec3::zeros());
    }
    // The cap uses the normal force actually developed; a net attractive normal force (strong
    // separating damping is excluded by min(v_n, 0), so normal ≥ 0 here) gives no friction.
    let cap = c.mu * normal.max(0.0);
    let tangential = match law {
        FrictionLaw::Huber => {
            let h = huber(s, delta);
            -vt * ((c.kf * h).min(cap) / h)
        }
        FrictionLaw::Normalized => -vt * ((c.kf * s).min(cap) / s),
    };
    (normal, tangential)
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: PenaltyCoefficients = PenaltyCoefficients {
        ke: 1e5,
        kd: 1e3,
        kf: 1e3,
        ka: 0.0,
        mu: 0.5,
    };

    #[test]
    fn normal_spring_and_damping_only_when_approaching() {
        let n = Vec3::z();
        let (fn_, ft) = contact_force(
            &C,
            FrictionLaw::Normalized,
            1.0,
            &n,
            -1e-3,
            &Vec3::new(0.0, 0.0, -0.1),
        );
        assert!((fn_ - (1e5 * 1e-3 + 1e3 * 0.1)).abs() < 1e-12);
        assert_eq!(ft, Vec3::zeros());
        let (fn_sep, _) = contact_force(
            &C,
            FrictionLaw::Normalized,
            1.0,
            &n,
            -1e-3,
            &Vec3::new(0.0, 0.0, 0.1),
        );
        assert!((fn_sep - 100.0).abs() < 1e-12);
        assert_eq!(
            contact_force(&C, FrictionLaw::Huber, 1.0, &n, 1e-6, &Vec3::zeros()).0,
            0.0
        );
    }

    #[test]
    fn normalized_friction_caps_at_mu_n_and_opposes_slip() {
        let n = Vec3::z();
        let v = Vec3::new(2.0, 0.0, 0.0);
        let (fn_, ft) = contact_force(&C, FrictionLaw::Normalized, 1.0, &n, -1e-4, &v);
        assert!((ft.x + 0.5 * fn_).abs() < 1e-12 && ft.y == 0.0 && ft.z == 0.0);
        // Viscous below the cap: kf·v.
        let slow = Vec3::new(0.0, 1e-5, 0.0);
        let (_, ft) = contact_force(&C, FrictionLaw::Normalized, 1.0, &n, -1e-4, &slow);
        assert!((ft.y + 1e3 * 1e-5).abs() < 1e-15);
    }

    #[test]
    fn huber_law_exceeds_coulomb_near_delta() {
        // At s = δ = 1 m/s the Huber law's magnitude is μN·s/H = μN·1/0.5 = 2μN.
        let n = Vec3::z();
        let (fn_, ft) = contact_force(
            &C,
            FrictionLaw::Huber,
            1.0,
            &n,
            -1e-4,
            &Vec3::new(1.0, 0.0, 0.0),
        );
        assert!((ft.norm() - 2.0 * 0.5 * fn_).abs() < 1e-9);
        assert!((huber(3.0, 1.0) - 2.5).abs() < 1e-15);
    }

    #[test]
    fn adhesion_band_attracts_without_friction() {
        let c = PenaltyCoefficients { ka: 1e-3, ..C };
        let (fn_, ft) = contact_force(
            &c,
            FrictionLaw::Huber,
            1.0,
            &Vec3::z(),
            5e-4,
            &Vec3::new(1.0, 0.0, -1.0),
        );
        assert!((fn_ + 50.0).abs() < 1e-12);
        assert_eq!(ft, Vec3::zeros());
    }
}
