//! Mixing the contact materials of two geoms into one [`MixedMaterial`].
//!
//! MuJoCo's rules for contacts without a `<pair>` (`engine_collision_driver.c`:
//! `mj_contactParam`; spec `soft_convex_and_signorini.md` §A7 "Mixing"):
//! * **priority**: if the geoms' priorities differ, the higher one's condim, friction, solref
//!   and solimp are used unchanged;
//! * otherwise condim = max, friction = element-wise max, and with the solmix weight
//!   `w = s1/(s1 + s2)` (both below 1e-15: 0.5; only s1: 0; only s2: 1)
//!   solref = `w·solref1 + (1 − w)·solref2` if both are in standard format (`solref[0] > 0`,
//!   MuJoCo's test) else the element-wise min (direct format), and solimp = `w·solimp1 +
//!   (1 − w)·solimp2`;
//! * friction (sliding, torsional, rolling) is expanded to 5 entries
//!   `[slide, slide, torsion, roll, roll]`;
//! * margin and gap are the **sums** of the geoms' values (MuJoCo ≥ 3.9, spec §A7), whatever
//!   the priorities.
//!
//! The penalty law (spec `ncp_fb_and_penalty.md` §4.1) instead takes the arithmetic mean of
//! `ke, kd, kf, ka` and of the sliding friction (`penalty_mu`), whatever the priorities.

use super::MixedMaterial;
use crate::model::ContactMaterial;

/// MuJoCo's `mjMINVAL`.
const MIN_VAL: f64 = 1e-15;

/// The solmix weight of the first geom: `s1/(s1 + s2)`, 0.5 if both are below 1e-15, 0 if only
/// `s1` is, 1 if only `s2` is (MuJoCo `mj_contactParam`). Dimensionless, in [0, 1].
pub fn solmix_weight(s1: f64, s2: f64) -> f64 {
    match (s1 >= MIN_VAL, s2 >= MIN_VAL) {
        (true, true) => s1 / (s1 + s2),
        (false, false) => 0.5,
        (false, true) => 0.0,
        (true, false) => 1.0,
    }
}

/// Mix the materials `m1` (of `geoms[0]`) and `m2` (of `geoms[1]`) of a contact (see the module
/// doc for the rules and their sources). Pure; never fails.
pub fn mix_materials(m1: &ContactMaterial, m2: &ContactMaterial) -> MixedMaterial {
    let (condim, fr, solref, solimp) = if m1.priority != m2.priority {
        let m = if m1.priority > m2.priority { m1 } else { m2 };
        (m.condim, m.friction, m.solref, m.solimp)
    } else {
        let w = solmix_weight(m1.solmix, m2.solmix);
        let fr = [
            m1.friction[0].max(m2.friction[0]),
            m1.friction[1].max(m2.friction[1]),
            m1.friction[2].max(m2.friction[2]),
        ];
        let solref = if m1.solref[0] > 0.0 && m2.solref[0] > 0.0 {
            [
                w * m1.solref[0] + (1.0 - w) * m2.solref[0],
                w * m1.solref[1] + (1.0 - w) * m2.solref[1],
            ]
        } else {
            [
                m1.solref[0].min(m2.solref[0]),
                m1.solref[1].min(m2.solref[1]),
            ]
        };
        let mut solimp = [0.0; 5];
        for (k, s) in solimp.iter_mut().enumerate() {
            *s = w * m1.solimp[k] + (1.0 - w) * m2.solimp[k];
        }
        (m1.condim.max(m2.condim), fr, solref, solimp)
    };
    MixedMaterial {
        friction: [fr[0], fr[0], fr[1], fr[2], fr[2]],
        condim,
        solref,
        solimp,
        margin: m1.margin + m2.margin,
        gap: m1.gap + m2.gap,
        ke: 0.5 * (m1.ke + m2.ke),
        kd: 0.5 * (m1.kd + m2.kd),
        kf: 0.5 * (m1.kf + m2.kf),
        ka: 0.5 * (m1.ka + m2.ka),
        penalty_mu: 0.5 * (m1.friction[0] + m2.friction[0]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mat() -> ContactMaterial {
        ContactMaterial::default()
    }

    #[test]
    fn weights() {
        assert_eq!(solmix_weight(1.0, 3.0), 0.25);
        assert_eq!(solmix_weight(0.0, 0.0), 0.5);
        assert_eq!(solmix_weight(1e-16, 1e-17), 0.5);
        assert_eq!(solmix_weight(0.0, 2.0), 0.0);
        assert_eq!(solmix_weight(2.0, 0.0), 1.0);
    }

    #[test]
    fn equal_priority_mixes() {
        let mut a = mat();
        let mut b = mat();
        a.friction = [0.5, 0.01, 0.002];
        b.friction = [0.8, 0.003, 0.004];
        a.condim = 6;
        b.condim = 3;
        a.solmix = 1.0;
        b.solmix = 3.0; // w = 0.25
        a.solref = [0.04, 2.0];
        b.solref = [0.02, 1.0];
        a.solimp = [0.8, 0.9, 0.01, 0.4, 1.0];
        b.solimp = [0.9, 0.95, 0.002, 0.6, 3.0];
        a.margin = 0.01;
        b.margin = 0.02;
        a.gap = 0.001;
        b.gap = 0.003;
        a.ke = 100.0;
        b.ke = 300.0;
        a.kd = 1.0;
        b.kd = 2.0;
        a.kf = 10.0;
        b.kf = 30.0;
        a.ka = 0.0;
        b.ka = 0.02;
        let m = mix_materials(&a, &b);
        assert_eq!(m.condim, 6);
        assert_eq!(m.friction, [0.8, 0.8, 0.01, 0.004, 0.004]);
        let close = |x: f64, y: f64| assert!((x - y).abs() < 1e-15, "{x} vs {y}");
        close(m.solref[0], 0.25 * 0.04 + 0.75 * 0.02);
        close(m.solref[1], 0.25 * 2.0 + 0.75 * 1.0);
        let want_imp = [0.875, 0.9375, 0.004, 0.55, 2.5];
        for k in 0..5 {
            close(m.solimp[k], want_imp[k]);
        }
        close(m.margin, 0.03);
        close(m.gap, 0.004);
        close(m.ke, 200.0);
        close(m.kd, 1.5);
        close(m.kf, 20.0);
        close(m.ka, 0.01);
        close(m.penalty_mu, 0.65);
    }

    #[test]
    fn direct_solref_takes_elementwise_min() {
        let mut a = mat();
        let mut b = mat();
        a.solref = [-1000.0, -10.0];
        b.solref = [0.02, 1.0];
        assert_eq!(mix_materials(&a, &b).solref, [-1000.0, -10.0]);
        a.solref = [-1000.0, -50.0];
        b.solref = [-2000.0, -10.0];
        assert_eq!(mix_materials(&a, &b).solref, [-2000.0, -50.0]);
    }

    #[test]
    fn priority_wins_except_for_margin_gap_and_penalty() {
        let mut a = mat();
        let mut b = mat();
        a.priority = 1;
        a.friction = [0.2, 0.001, 0.0001];
        b.friction = [0.9, 0.01, 0.001];
        a.condim = 1;
        b.condim = 6;
        a.solref = [0.05, 0.5];
        a.solimp = [0.5, 0.6, 0.1, 0.2, 4.0];
        a.margin = 0.1;
        b.margin = 0.2;
        a.ke = 10.0;
        b.ke = 30.0;
        for (m, lo_first) in [
            (mix_materials(&a, &b), true),
            (mix_materials(&b, &a), false),
        ] {
            assert_eq!(m.condim, 1, "{lo_first}");
            assert_eq!(m.friction, [0.2, 0.2, 0.001, 0.0001, 0.0001]);
            assert_eq!(m.solref, [0.05, 0.5]);
            assert_eq!(m.solimp, [0.5, 0.6, 0.1, 0.2, 4.0]);
            assert!((m.margin - 0.3).abs() < 1e-15);
            assert_eq!(m.ke, 20.0);
            assert!((m.penalty_mu - 0.55).abs() < 1e-15);
        }
    }
}
