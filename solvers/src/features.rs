//! Model features a formulation steps a model without ([`IgnoredFeature`]), and the queries
//! the formulations share to list them ([`Formulation::ignored_features`]).
//!
//! A formulation that does not model something the model carries (an equality constraint, a
//! joint's dry friction, torsional friction, an explicit contact pair) still steps the model,
//! without it; it must say so, so that a results row never reads "ok" for physics that was
//! silently left out (DESIGN.md, "The contracts"). Every query here honours the model's
//! `<flag>` options: a feature the model itself disables (`equality="disable"`, ...) is not
//! ignored by anyone.
//!
//! [`Formulation::ignored_features`]: crate::formulation::Formulation::ignored_features

use serde::Serialize;

use crate::geometry::GeomShape;
use crate::model::{Equality, Integrator, JointKind, Model};

/// One model feature a formulation does not model for a given model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IgnoredFeature {
    /// Stable short name of the feature: `equality`, `frictionloss`, `limit`, `condim`,
    /// `pair`, `exclude`, `collision_pair`, `option.integrator`, `option.solver`,
    /// `option.noslip_iterations`.
    pub feature: &'static str,
    /// One line: which elements carry it and what the formulation does instead. Never holds
    /// `;` (the separator of [`joined`]).
    pub detail: String,
}

impl IgnoredFeature {
    /// A feature with its detail (`;` in the detail are replaced by `,`).
    pub fn new(feature: &'static str, detail: impl Into<String>) -> Self {
        Self {
            feature,
            detail: detail.into().replace(';', ","),
        }
    }
}

impl std::fmt::Display for IgnoredFeature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.feature, self.detail)
    }
}

/// The features as one line, `"; "`-separated (the results column `ignored_features`); empty
/// when there are none.
pub fn joined(features: &[IgnoredFeature]) -> String {
    features
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// `n` `noun`s and up to three of `names`, quoted: `1 joint ('a')`, `5 joints ('a', 'b', 'c',
/// ...)`.
fn count_names<'a>(noun: &str, names: impl Iterator<Item = &'a str>) -> String {
    let all: Vec<&str> = names.collect();
    let shown: Vec<String> = all.iter().take(3).map(|n| format!("'{n}'")).collect();
    let more = if all.len() > 3 { ", ..." } else { "" };
    let s = if all.len() == 1 { "" } else { "s" };
    format!("{} {noun}{s} ({}{more})", all.len(), shown.join(", "))
}

/// What no formulation's collision detection handles yet (shared by all four): explicit contact
/// pairs (`<pair>`) are not detected and excluded body pairs (`<exclude>`) still collide
/// ([`crate::collision::detect`] runs the contype/conaffinity filter only). Nothing when the
/// model disables contacts.
pub fn collision(model: &Model) -> Vec<IgnoredFeature> {
    let mut out = Vec::new();
    if model.options.disable.contact {
        return out;
    }
    if !model.pairs.is_empty() {
        out.push(IgnoredFeature::new(
            "pair",
            format!(
                "{} explicit contact pairs (<pair>) are not detected: only contype/conaffinity pairs collide",
                model.pairs.len()
            ),
        ));
    }
    // Pairs the narrow phase has no contact routine for (crate::collision::height_field: a
    // height field against a triangle mesh or another height field) collide with nothing.
    let no_routine = |g: usize| {
        matches!(
            model.geoms[g].shape,
            GeomShape::TriangleMesh { .. } | GeomShape::HeightField { .. }
        )
    };
    let unsupported: Vec<(usize, usize)> = crate::collision::broad_phase::filtered_pairs(model)
        .into_iter()
        .filter(|&(a, b)| {
            no_routine(a)
                && no_routine(b)
                && [a, b]
                    .iter()
                    .any(|&g| matches!(model.geoms[g].shape, GeomShape::HeightField { .. }))
        })
        .collect();
    if !unsupported.is_empty() {
        let names = unsupported
            .iter()
            .map(|&(a, b)| format!("{}-{}", model.geoms[a].name, model.geoms[b].name));
        out.push(IgnoredFeature::new(
            "collision_pair",
            format!(
                "{} never collide (no height field against triangle mesh or height field contacts)",
                count_names(
                    "geom pair",
                    names.collect::<Vec<_>>().iter().map(String::as_str)
                )
            ),
        ));
    }
    if !model.excludes.is_empty() {
        out.push(IgnoredFeature::new(
            "exclude",
            format!(
                "{} excluded body pairs (<exclude>) still collide",
                model.excludes.len()
            ),
        ));
    }
    out
}

/// The model's equality constraints, if it has any and does not disable them: `instead` says
/// what the formulation does (e.g. "stepped without them").
pub fn equalities(model: &Model, instead: &str) -> Option<IgnoredFeature> {
    if model.options.disable.equality || model.equalities.is_empty() {
        return None;
    }
    let kind = |e: &Equality| match e {
        Equality::Connect { .. } => "connect",
        Equality::Weld { .. } => "weld",
        Equality::Joint { .. } => "joint",
    };
    let mut kinds: Vec<&str> = model.equalities.iter().map(kind).collect();
    kinds.sort_unstable();
    kinds.dedup();
    Some(IgnoredFeature::new(
        "equality",
        format!(
            "{} of kinds {}: {instead}",
            count_names(
                "equality constraint",
                model.equalities.iter().map(Equality::name)
            ),
            kinds.join(", ")
        ),
    ))
}

/// Joints of kinds `kinds` with friction loss > 0, if any and the model does not disable
/// friction loss.
pub fn friction_loss(model: &Model, kinds: &[JointKind], instead: &str) -> Option<IgnoredFeature> {
    if model.options.disable.frictionloss {
        return None;
    }
    let joints: Vec<&str> = model
        .joints
        .iter()
        .filter(|j| j.frictionloss > 0.0 && kinds.contains(&j.kind))
        .map(|j| j.name.as_str())
        .collect();
    (!joints.is_empty()).then(|| {
        IgnoredFeature::new(
            "frictionloss",
            format!(
                "joint friction loss on {}: {instead}",
                count_names("joint", joints.into_iter())
            ),
        )
    })
}

/// Limited joints of kinds `kinds`, if any and the model does not disable limits.
pub fn limits(model: &Model, kinds: &[JointKind], instead: &str) -> Option<IgnoredFeature> {
    if model.options.disable.limit {
        return None;
    }
    let joints: Vec<&str> = model
        .joints
        .iter()
        .filter(|j| j.range.is_some() && kinds.contains(&j.kind))
        .map(|j| j.name.as_str())
        .collect();
    (!joints.is_empty()).then(|| {
        IgnoredFeature::new(
            "limit",
            format!(
                "limits of {}: {instead}",
                count_names("joint", joints.into_iter())
            ),
        )
    })
}

/// Geoms whose contact dimensionality is one of `condims`, if any and the model does not
/// disable contacts (a contact's condim is the larger of its geoms', or the higher-priority
/// geom's, so a geom listed here gives such contacts with most partners).
pub fn condims(model: &Model, condims: &[u8], instead: &str) -> Option<IgnoredFeature> {
    if model.options.disable.contact {
        return None;
    }
    let geoms: Vec<&str> = model
        .geoms
        .iter()
        .filter(|g| condims.contains(&g.material.condim))
        .map(|g| g.name.as_str())
        .collect();
    (!geoms.is_empty()).then(|| {
        let dims: Vec<String> = condims.iter().map(u8::to_string).collect();
        IgnoredFeature::new(
            "condim",
            format!(
                "condim {} on {}: {instead}",
                dims.join("/"),
                count_names("geom", geoms.into_iter())
            ),
        )
    })
}

/// The model's `noslip_iterations` option, if it asks for MuJoCo's no-slip post-solver (a
/// soft_convex stage, [`crate::soft_convex::noslip`]): the formulation steps without it,
/// described by `instead`.
pub fn noslip(model: &Model, instead: &str) -> Option<IgnoredFeature> {
    let n = model.options.noslip_iterations;
    (n > 0).then(|| {
        IgnoredFeature::new(
            "option.noslip_iterations",
            format!("the model asks for {n} no-slip iterations: {instead}"),
        )
    })
}

/// The model's `integrator` option, if it is not Euler: the formulation integrates its own
/// way, described by `instead`.
pub fn integrator(model: &Model, instead: &str) -> Option<IgnoredFeature> {
    let i = model.options.integrator;
    (i != Integrator::Euler).then(|| {
        IgnoredFeature::new(
            "option.integrator",
            format!("the model asks for integrator {i:?}: {instead}"),
        )
    })
}
