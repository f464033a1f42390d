//! Collision detection: a broad phase over geom pairs honoring the filters, parry3d-f64 contact
//! manifolds for the narrow phase, and their conversion to [`Contact`] points in MuJoCo's
//! conventions (spec `soft_convex_and_signorini.md` §A7).
//!
//! Conventions of a [`Contact`]:
//! * `geoms[0]` has the lower shape type in MuJoCo's order (plane < hfield < sphere < capsule <
//!   ellipsoid < cylinder < box < mesh); the normal `n` points from `geoms[0]` into `geoms[1]`.
//! * `frame` rows are `(n, t1, t2)`, built as MuJoCo's `mju_makeFrame`.
//! * `gap` is the signed distance between the surfaces (m), negative in penetration.
//! * `point` is midway between the two surface points (m, world).
//!
//! Pieces, one file each: [`shapes`] (GeomShape → parry shapes, built once in
//! [`crate::model::Model::new`]), [`broad_phase`] (filters, pair order, bounding boxes),
//! [`narrow_phase`] (parry manifolds → contacts), [`height_field`] (height fields as solids),
//! [`cylinder_box`] (a cylinder's tread on a box, in closed form), [`plane_primitives`] and
//! [`primitive_pairs`] (MuJoCo's analytic pairs in its own arithmetic),
//! [`frame`] (`mju_makeFrame`), [`mixing`]
//! (material mixing).

use nalgebra::Matrix3;

pub mod broad_phase;
pub mod capsule_box;
pub mod cylinder_box;
pub mod frame;
pub mod height_field;
pub mod height_field_table;
pub mod mixing;
pub mod narrow_phase;
pub mod plane_primitives;
pub mod primitive_pairs;
pub mod shapes;

pub use frame::{contact_frame, contact_frame_with_tangent};
pub use mixing::{mix_materials, solmix_weight};
pub use shapes::{collision_shape, CollisionShape};

use crate::model::Vec3;

/// The material of a contact, mixed from its two geoms.
///
/// MuJoCo's rules (spec §A7 "Mixing") give `friction`, `condim`, `solref`, `solimp`; the
/// penalty law (spec ncp_fb §4.1) takes the arithmetic mean of `ke, kd, kf, ka` and of the
/// sliding friction, kept separately in `penalty_mu`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MixedMaterial {
    /// Friction (tangent1, tangent2, torsional m, rolling1 m, rolling2 m): element-wise max.
    pub friction: [f64; 5],
    /// Contact dimensionality: max of the two.
    pub condim: u8,
    /// solref mixed by solmix weight (or element-wise min in direct format).
    pub solref: [f64; 2],
    /// solimp mixed by solmix weight.
    pub solimp: [f64; 5],
    /// Sum of the geoms' margins (m).
    pub margin: f64,
    /// Sum of the geoms' gaps (m).
    pub gap: f64,
    /// Mean penalty stiffness (N/m).
    pub ke: f64,
    /// Mean penalty damping (N s/m).
    pub kd: f64,
    /// Mean penalty viscous friction (N s/m).
    pub kf: f64,
    /// Mean adhesion distance (m).
    pub ka: f64,
    /// Mean sliding friction coefficient (penalty law).
    pub penalty_mu: f64,
}

/// One contact point between two geoms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Contact {
    /// The two geoms (see the module doc for the order).
    pub geoms: [usize; 2],
    /// The bodies of the two geoms.
    pub bodies: [usize; 2],
    /// Contact point, midway between the surfaces (m, world).
    pub point: Vec3,
    /// Rows `(n, t1, t2)`, world frame; n from `geoms[0]` to `geoms[1]`.
    pub frame: Matrix3<f64>,
    /// Signed distance (m), negative in penetration.
    pub gap: f64,
    /// Mixed material.
    pub material: MixedMaterial,
    /// For a line contact merged into one point (a geom with
    /// [`crate::model::Geom::line_contact_as_point`]): which end gave the gap and frame, and
    /// how close the next one was. `None` for every other contact.
    pub line_ends: Option<LineEnds>,
}

/// Two line-contact ends whose gaps differ by at most this (m) tie: their merged contact's
/// gap (a minimum over the ends) has no derivative there, and the engines differentiate it as
/// the ends' mean ([`LineEnds`]). A level wheel's ends differ by rounding only (0 to 1.1e-16 m
/// measured on box_traversal). Larger tolerances call near-ties ties, where the cpu adjoint's
/// differences can stay on one end on both sides while the batched derivative takes the mean:
/// with 1e-9 m, ends 7e-11 m apart gave one-step differences of 3e-6 between the adjoints.
pub const LINE_TIE_GAP: f64 = 1e-12;

/// The ends of a merged line contact (`narrow_phase::merge_line_contact`): the merged gap and
/// frame are the deepest end's, a minimum over the ends, which is not differentiable where the
/// deepest end changes. Derivatives of the contact with respect to the pose hold on one side
/// of such a switch only; the cpu adjoint's differences keep to the forward's side
/// ([`crate::ncp_fb::Assembly::same_structure`], [`Self::kept`]), and where the ends tie within
/// [`LINE_TIE_GAP`] both sides are the forward's (the symmetric derivative, the ends' mean,
/// which the batched engine takes too: `batched::wheel`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LineEnds {
    /// Index of the deepest end among the pair's contacts in generation order (the first of
    /// equals).
    pub deepest: usize,
    /// The next-deepest end's gap minus the deepest's (m, ≥ 0).
    pub spread: f64,
}

impl LineEnds {
    /// Whether the deepest ends tie ([`LINE_TIE_GAP`]).
    pub fn tied(&self) -> bool {
        self.spread <= LINE_TIE_GAP
    }

    /// Whether `other` (the same contact at a perturbed pose) keeps the branch of `reference`
    /// (the forward's): both not merged line contacts, or both merged with the reference's
    /// deepest end kept or the reference's ends tied (either end is then its side).
    pub fn kept(reference: Option<LineEnds>, other: Option<LineEnds>) -> bool {
        match (reference, other) {
            (None, None) => true,
            (Some(r), Some(o)) => r.tied() || r.deepest == o.deepest,
            _ => false,
        }
    }
}

impl Contact {
    /// The contact normal (first frame row), pointing from `geoms[0]` to `geoms[1]`.
    pub fn normal(&self) -> Vec3 {
        self.frame.row(0).transpose()
    }
}

/// All contacts between geoms at the placement `kin` (see the module doc for conventions).
///
/// Pairs are filtered by contype/conaffinity, by body (no contact within a body or between a
/// body and its parent, unless the parent is the world), and reported when the signed distance
/// is at most `margin + gap` of the mixed material (MuJoCo ≥ 3.9, spec §A7).
///
/// Pairs come in increasing (lower geom index, higher geom index) order, and each pair's
/// contacts in parry's generation order. `kin` must come from
/// [`crate::kinematics::forward_kinematics`] on the same model. Non-finite placements give no
/// contacts for the geoms involved (never a panic).
pub fn detect(model: &crate::model::Model, kin: &crate::kinematics::Kinematics) -> Vec<Contact> {
    detect_with_margin(model, kin, 0.0)
}

/// [`detect`] with the detection distance of every pair widened by `extra` (m, ≥ 0): contacts
/// are reported when the signed distance is at most `margin + gap + extra`. The contacts'
/// materials are the pairs' own (the widening is not recorded in `material.margin`). Used by
/// formulations whose complementarity rows must see a contact before it closes within a step
/// (`ncp_fb`).
pub fn detect_with_margin(
    model: &crate::model::Model,
    kin: &crate::kinematics::Kinematics,
    extra: f64,
) -> Vec<Contact> {
    detect_with_pair_margin(model, kin, |_, _| extra)
}

/// [`detect`] with the detection distance of pair `(g0, g1)` widened by `extra(g0, g1)` (m;
/// negative values count as 0), as [`detect_with_margin`] with a margin per pair.
pub fn detect_with_pair_margin(
    model: &crate::model::Model,
    kin: &crate::kinematics::Kinematics,
    extra: impl Fn(usize, usize) -> f64,
) -> Vec<Contact> {
    let mut out = Vec::new();
    for (g0, g1) in broad_phase::filtered_pairs(model) {
        detect_pair_with_margin(model, kin, (g0, g1), extra(g0, g1), &mut out);
    }
    out
}

/// The contacts of one filtered pair `(g0, g1)` (lower geom index first, as
/// [`broad_phase::filtered_pairs`] gives them) with its detection distance widened by `extra`
/// (m; negative or non-finite values count as 0), appended to `out`: one pair of
/// [`detect_with_pair_margin`].
pub fn detect_pair_with_margin(
    model: &crate::model::Model,
    kin: &crate::kinematics::Kinematics,
    (g0, g1): (usize, usize),
    extra: f64,
    out: &mut Vec<Contact>,
) {
    let material = mix_materials(&model.geoms[g0].material, &model.geoms[g1].material);
    let mut wide = material;
    wide.margin += if extra.is_finite() {
        extra.max(0.0)
    } else {
        0.0
    };
    if !broad_phase::bounds_overlap(model, kin, g0, g1, wide.margin + wide.gap) {
        return;
    }
    let first = out.len();
    narrow_phase::collide_pair(model, kin, g0, g1, &wide, out);
    for c in &mut out[first..] {
        c.material = material;
    }
}
