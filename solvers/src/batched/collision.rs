//! Batched contact candidates of a plane against a sphere, capsule or box: every candidate a
//! model's pair can produce, each with a per-world mask, in the cpu engine's formulas
//! ([`crate::collision::plane_primitives`]: MuJoCo's `mjc_PlaneSphere` and `mjc_PlaneBox` with
//! their order of operations; plane–capsule as parry's two end spheres, see
//! [`crate::collision::narrow_phase`]).
//!
//! Conventions as [`crate::collision::Contact`]: the normal is the plane's +z, pointing from the
//! plane (`geoms[0]`) into the other geom; `gap` is the signed distance (m, negative in
//! penetration); `point` is midway between the surfaces (m, world).

use burn_tensor::backend::Backend;

use super::kinematics::Kin;
use super::scalar::{M, S};
use super::spatial::{add3, column, dot3, qmat, scale3, sub3, V3};
use crate::geometry::GeomShape;
use crate::model::Model;

/// One contact candidate of a pair, per world.
pub struct Candidate<B: Backend> {
    /// Index of the pair in [`super::compiled::CompiledModel::pairs`].
    pub pair: usize,
    /// Whether the candidate is a contact in each world (within the detection distance and, for
    /// boxes, among the first four corners that are).
    pub found: M<B>,
    /// Contact point (m, world).
    pub point: V3<B>,
    /// Unit normal (world), from the plane into the other geom.
    pub normal: V3<B>,
    /// Signed distance (m).
    pub gap: S<B>,
}

/// The candidates of pair `pair` = (plane `g0`, other `g1`) with detection distance `detect`
/// (m, the mixed `margin + gap`), appended to `out` in the cpu engine's order.
pub fn plane_pair<B: Backend>(
    model: &Model,
    k: &Kin<B>,
    pair: usize,
    (g0, g1): (usize, usize),
    detect: f64,
    out: &mut Vec<Candidate<B>>,
) {
    let n = column(&qmat(&k.geom_xquat[g0]), 2);
    let pp = &k.geom_xpos[g0];
    let gpos = &k.geom_xpos[g1];
    match &model.geoms[g1].shape {
        GeomShape::Sphere { radius } => {
            // mjc_PlaneSphere: dist = (c − p)·n − r, point = c + n (−dist/2 − r).
            let cdist = dot3(&sub3(gpos, pp), &n);
            let found = cdist.le(&S::C(detect + radius));
            let dist = &cdist - *radius;
            let s = -(&dist / 2.0) - *radius;
            out.push(Candidate {
                pair,
                found,
                point: add3(gpos, &scale3(&n, &s)),
                normal: n,
                gap: dist,
            });
        }
        GeomShape::Capsule {
            radius,
            half_length,
        } => {
            // The two end spheres (parry's plane–capsule manifold), each kept within reach.
            let rot = qmat(&k.geom_xquat[g1]);
            let axis = scale3(&column(&rot, 2), &S::C(*half_length));
            for end in [add3(gpos, &axis), sub3(gpos, &axis)] {
                let dist = dot3(&sub3(&end, pp), &n) - *radius;
                let found = dist.le(&S::C(detect));
                let s = -(&dist / 2.0) - *radius;
                out.push(Candidate {
                    pair,
                    found,
                    point: add3(&end, &scale3(&n, &s)),
                    normal: n.clone(),
                    gap: dist,
                });
            }
        }
        GeomShape::Box { half } => {
            let rot = qmat(&k.geom_xquat[g1]);
            super::plane_box::candidates(pair, &n, pp, gpos, &rot, half, detect, out);
        }
        _ => unreachable!("engine::batched_support refuses other pairs"),
    }
}
