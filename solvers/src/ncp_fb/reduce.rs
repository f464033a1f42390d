//! Contact-point reduction for `ncp_fb` (module doc, "Redundant contact points"): parry's
//! manifolds for a cylinder wheel on a box edge (the cap is a polygon) report two or three
//! points of the same geom pair at the same place, a few µm apart with the same normal and gap.
//! Their rows are identical to rounding, so the Delassus operator `J M⁻¹ Jᵀ` is singular on
//! them and the split of the impulse among them is indeterminate; with maximal-dissipation
//! friction each copy carries its own cone and its own weight W(p_n, p_f), so the residual is
//! not even constant along that null direction and Newton wanders in it (issue 13 diagnosis).
//!
//! Merging them is exact up to the merge distance: with identical rows and gaps, any solution
//! of the merged problem (the whole impulse on one copy) solves the original, and any
//! solution of the original sums (the friction cone is convex) to one of the merged problem.
//! This is the duplicate-point elimination of contact-manifold reduction (e.g. Bullet's and
//! MuJoCo's manifold pruning; Erleben, "Velocity-based shock propagation for multibody dynamics
//! animation", ACM TOG 2007, §4: redundant contact points make the LCP degenerate).

use crate::collision::Contact;

/// Cosine above which two contact normals count as the same direction (angle ≲ 1.4 mrad).
const SAME_NORMAL_COS: f64 = 1.0 - 1e-6;

/// Drop every contact that duplicates an earlier kept contact of the same geom pair: points
/// within `distance` (m) and normals within ~1.4 mrad. Of a group of duplicates the one with
/// the smallest gap is kept (the one that would load first), at its own point, frame and
/// gap. Deterministic (input order), so the adjoint's re-assembly sees the same reduction.
/// `distance = 0` disables the reduction.
pub fn merge_duplicates(contacts: Vec<Contact>, distance: f64) -> Vec<Contact> {
    if distance <= 0.0 {
        return contacts;
    }
    let dup = |a: &Contact, b: &Contact| {
        a.geoms == b.geoms
            && (a.point - b.point).norm() <= distance
            && a.normal().dot(&b.normal()) >= SAME_NORMAL_COS
    };
    let mut kept: Vec<Contact> = Vec::with_capacity(contacts.len());
    for c in contacts {
        match kept.iter_mut().find(|k| dup(k, &c)) {
            Some(k) => {
                if c.gap < k.gap {
                    *k = c;
                }
            }
            None => kept.push(c),
        }
    }
    kept
}
