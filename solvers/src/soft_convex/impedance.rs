//! Impedance d(r), reference-acceleration coefficients (K, B) and the regularizer R of MuJoCo's
//! soft constraints (spec `soft_convex_and_signorini.md` §A1–§A3; MuJoCo documentation,
//! "Modeling > Solver parameters"; `engine_core_constraint.c`: `getimpedance`, `mj_makeImpedance`).

/// MuJoCo's `mjMINVAL`.
pub const MINVAL: f64 = 1e-15;
/// MuJoCo's `mjMINIMP`: the smallest impedance.
pub const MINIMP: f64 = 1e-4;
/// MuJoCo's `mjMAXIMP`: the largest impedance.
pub const MAXIMP: f64 = 0.9999;
/// MuJoCo's `mjMINMU`: the smallest friction coefficient in a contact row.
pub const MINMU: f64 = 1e-5;

/// solimp `(d0, dmax, width m, midpoint, power)` clamped to its domain (§A1): d0, dmax, mid in
/// [1e-4, 0.9999], width ≥ 0, power ≥ 1.
pub fn clamp_solimp(s: &[f64; 5]) -> [f64; 5] {
    [
        s[0].clamp(MINIMP, MAXIMP),
        s[1].clamp(MINIMP, MAXIMP),
        s[2].max(0.0),
        s[3].clamp(MINIMP, MAXIMP),
        s[4].max(1.0),
    ]
}

/// Impedance `d` (dimensionless, in (0, 1)) of a row whose position is `pos` with margin
/// `margin` (m or rad), and its derivative `d′` with respect to `pos` (§A1).
///
/// Flat when d0 == dmax or width ≤ 1e-15 (d = (d0 + dmax)/2). Otherwise, with
/// x = |pos − margin| / width: d = dmax for x ≥ 1, d0 for x = 0, and in between
/// d = d0 + y(x)(dmax − d0) with the two-piece power sigmoid y of midpoint `mid` and power `p`.
pub fn impedance(solimp: &[f64; 5], pos: f64, margin: f64) -> (f64, f64) {
    let [d0, dmax, width, mid, p] = clamp_solimp(solimp);
    if d0 == dmax || width <= MINVAL {
        return (0.5 * (d0 + dmax), 0.0);
    }
    let r = pos - margin;
    let x = r.abs() / width;
    if x >= 1.0 {
        return (dmax, 0.0);
    }
    if x == 0.0 {
        return (d0, 0.0);
    }
    let (y, dy) = if p == 1.0 {
        (x, 1.0)
    } else if x <= mid {
        (
            x.powf(p) / mid.powf(p - 1.0),
            p * x.powf(p - 1.0) / mid.powf(p - 1.0),
        )
    } else {
        (
            1.0 - (1.0 - x).powf(p) / (1.0 - mid).powf(p - 1.0),
            p * (1.0 - x).powf(p - 1.0) / (1.0 - mid).powf(p - 1.0),
        )
    };
    let sign = if r >= 0.0 { 1.0 } else { -1.0 };
    (d0 + y * (dmax - d0), dy * sign * (dmax - d0) / width)
}

/// Stiffness K (1/s²) and damping B (1/s) of the reference acceleration
/// `aref = −B·v − K·d·(pos − margin)` (§A2).
///
/// * Standard format (both solref entries > 0): `tc = solref[0]` (s), raised to 2h unless
///   `refsafe` is off, ζ = `solref[1]`; `K = 1/(dmax² tc² ζ²)`, `B = 2/(dmax tc)`.
/// * Direct format (both ≤ 0): `K = −solref[0]/dmax²`, `B = −solref[1]/dmax`.
/// * Mixed signs: MuJoCo warns and uses the default (0.02, 1); so does this function.
///
/// `dmax = solimp[1]` (clamped), never the current d.
pub fn reference_coefficients(
    solref: &[f64; 2],
    solimp: &[f64; 5],
    h: f64,
    refsafe: bool,
) -> (f64, f64) {
    let dmax = clamp_solimp(solimp)[1];
    let standard = solref[0] > 0.0 && solref[1] > 0.0;
    let direct = solref[0] <= 0.0 && solref[1] <= 0.0;
    let solref = if standard || direct {
        *solref
    } else {
        [0.02, 1.0]
    };
    if solref[0] > 0.0 {
        let tc = if refsafe {
            solref[0].max(2.0 * h)
        } else {
            solref[0]
        };
        let zeta = solref[1];
        (
            1.0 / (dmax * dmax * tc * tc * zeta * zeta).max(MINVAL),
            2.0 / (dmax * tc).max(MINVAL),
        )
    } else {
        (
            -solref[0] / (dmax * dmax).max(MINVAL),
            -solref[1] / dmax.max(MINVAL),
        )
    }
}

/// Regularizer `R = max(1e-15, (1 − d)/d · Â)` from impedance `d` and the diagonal
/// approximation `Â` of the row's inverse inertia (§A3).
pub fn regularizer(d: f64, diag_approx: f64) -> f64 {
    ((1.0 - d) / d * diag_approx).max(MINVAL)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT: [f64; 5] = [0.9, 0.95, 0.001, 0.5, 2.0];

    #[test]
    fn impedance_follows_the_power_sigmoid() {
        // x = 0.25 <= mid: y = x^2 / mid = 0.125; d = 0.9 + 0.125 * 0.05.
        let (d, dp) = impedance(&DEFAULT, -0.00025, 0.0);
        assert!((d - (0.9 + 0.125 * 0.05)).abs() < 1e-15);
        // y' = 2x/mid = 1; d' = 1 * sign(-) * 0.05 / 0.001 = -50.
        assert!((dp + 50.0).abs() < 1e-9);
        // x = 0.75 > mid: y = 1 - (0.25)^2 / 0.5 = 0.875.
        let (d, _) = impedance(&DEFAULT, 0.00075, 0.0);
        assert!((d - (0.9 + 0.875 * 0.05)).abs() < 1e-15);
        // Midpoint edge x == mid: both pieces give y = mid.
        let (d, _) = impedance(&DEFAULT, 0.0005, 0.0);
        assert!((d - (0.9 + 0.5 * 0.05)).abs() < 1e-15);
        // Beyond the width and at zero.
        assert_eq!(impedance(&DEFAULT, -0.01, 0.0), (0.95, 0.0));
        assert_eq!(impedance(&DEFAULT, 0.0, 0.0), (0.9, 0.0));
        // The margin shifts the argument.
        assert_eq!(impedance(&DEFAULT, 0.002, 0.002), (0.9, 0.0));
    }

    #[test]
    fn impedance_special_cases() {
        // Flat: d0 == dmax.
        assert_eq!(
            impedance(&[0.8, 0.8, 0.01, 0.5, 2.0], -1.0, 0.0),
            (0.8, 0.0)
        );
        // Width 0: the mean of d0 and dmax.
        assert_eq!(impedance(&[0.5, 0.9, 0.0, 0.5, 2.0], -1.0, 0.0).0, 0.7);
        // Power 1: linear in x.
        let (d, dp) = impedance(&[0.5, 0.9, 0.01, 0.3, 1.0], -0.004, 0.0);
        assert!((d - (0.5 + 0.4 * 0.4)).abs() < 1e-15 && (dp + 40.0).abs() < 1e-12);
        // Clamping: d0 = 0 becomes 1e-4, dmax = 1 becomes 0.9999.
        assert_eq!(
            impedance(&[0.0, 1.0, 0.0, 0.5, 2.0], 0.0, 0.0).0,
            0.5 * (MINIMP + MAXIMP)
        );
    }

    #[test]
    fn reference_coefficients_standard_direct_refsafe() {
        let (k, b) = reference_coefficients(&[0.02, 1.0], &DEFAULT, 0.002, true);
        assert!((k - 1.0 / (0.95f64.powi(2) * 0.02f64.powi(2))).abs() < 1e-9);
        assert!((b - 2.0 / (0.95 * 0.02)).abs() < 1e-12);
        // refsafe raises tc to 2h = 0.05 s.
        let (k, b) = reference_coefficients(&[0.02, 1.0], &DEFAULT, 0.025, true);
        assert!(
            (k - 1.0 / (0.95f64.powi(2) * 0.05f64.powi(2))).abs() < 1e-9
                && (b - 2.0 / (0.95 * 0.05)).abs() < 1e-12
        );
        let (k_off, _) = reference_coefficients(&[0.02, 1.0], &DEFAULT, 0.025, false);
        assert!((k_off - 1.0 / (0.95f64.powi(2) * 0.02f64.powi(2))).abs() < 1e-9);
        // Direct format: K = 1000 / dmax^2, B = 10 / dmax.
        let (k, b) = reference_coefficients(&[-1000.0, -10.0], &DEFAULT, 0.002, true);
        assert!((k - 1000.0 / 0.9025).abs() < 1e-9 && (b - 10.0 / 0.95).abs() < 1e-12);
        // Mixed signs fall back to (0.02, 1).
        assert_eq!(
            reference_coefficients(&[0.02, -1.0], &DEFAULT, 0.002, true),
            reference_coefficients(&[0.02, 1.0], &DEFAULT, 0.002, true)
        );
    }

    #[test]
    fn regularizer_formula() {
        assert!((regularizer(0.9, 2.0) - 0.1 / 0.9 * 2.0).abs() < 1e-15);
        assert_eq!(regularizer(0.9999, 0.0), MINVAL);
    }
}
