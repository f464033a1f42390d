//! Batched contact candidates of a plane against a sphere, capsule or box, and of a sphere
//! against a box: every candidate a model's pair can produce, each with a per-world mask, in
//! the cpu engine's formulas ([`crate::collision::plane_primitives`]: MuJoCo's
//! `mjc_PlaneSphere`, `mjc_PlaneCapsule` and `mjc_PlaneBox`;
//! [`crate::collision::primitive_pairs::sphere_box`]: `mjc_SphereBox`; each with its order of
//! operations).
//!
//! Conventions as [`crate::collision::Contact`]: the normal points from `geoms[0]` into
//! `geoms[1]` (a plane's +z; from a sphere into a box); `gap` is the signed distance (m, negative in
//! penetration); `point` is midway between the surfaces (m, world).

use burn_tensor::backend::Backend;

use super::kinematics::Kin;
use super::scalar::{M, S};
use super::spatial::{add3, column, dot3, qmat, scale3, sub3, M3, V3};
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
    /// Unit normal (world), from the pair's first geom into its second.
    pub normal: V3<B>,
    /// Signed distance (m).
    pub gap: S<B>,
}

/// The worlds where pair `pair` has left the batched engine's closed forms (the cpu engine
/// collides it by another rule there, or collides a pair the batched engine does not): the
/// steppers end those worlds with `reason` ([`Outside::report`]).
pub struct Outside<B: Backend> {
    /// Index of the pair in [`crate::compiled::CompiledModel::pairs`].
    pub pair: usize,
    /// Per world: outside the class at this step.
    pub worlds: M<B>,
    /// Whether the pair is one the batched engine does not collide (box–box,
    /// cylinder–cylinder, height field–box), flagged where it comes within a conservative
    /// reach; `false` for a closed form outside its domain. Only an uncollided pair's flag can
    /// be refined by asking the cpu engine whether the pair has a contact there
    /// ([`crate::ncp_fb::NcpFb::pair_has_rows`]).
    pub uncollided: bool,
    /// Why, for the step report.
    pub reason: &'static str,
}

impl<B: Backend> Outside<B> {
    /// The step report's reason for pair `(g0, g1)` of `model` at time `t` (s, after the step).
    pub fn report(&self, model: &Model, (g0, g1): (usize, usize), t: f64) -> String {
        format!(
            "left the batched engine's scene class at t = {t:.6} s: geoms '{}' and '{}': {}",
            model.geoms[g0].name, model.geoms[g1].name, self.reason
        )
    }
}

/// The candidates of pair `pair` = `(g0, g1)` in MuJoCo's order (lower geom type first) with
/// detection distance `detect` (m, per world; `detect_max` ≥ its largest value in any world, for
/// the height field's fixed window), appended to `out`: a plane against a sphere, capsule, box
/// or line-contact cylinder ([`plane_pair`]), a sphere against a box ([`sphere_box`]), a
/// line-contact cylinder against a box ([`super::wheel::cylinder_box`]), a static height field
/// against a line-contact cylinder ([`super::height_field::wheel_candidates`]; the field's
/// tables come from `fields`). Pairs the batched
/// engine admits without colliding them (box–box, cylinder–cylinder, height field–box: the
/// robot's chassis and an obstacle, two wheels, the chassis and the terrain) and the closed forms' edges push to `outside` the worlds where
/// they come within reach ([`Outside`]).
///
/// # Panics
/// On another pair ([`crate::engine::batched_support`] refuses such models).
#[allow(clippy::too_many_arguments)]
pub fn pair_candidates<B: Backend>(
    model: &Model,
    fields: &mut super::height_field::Fields<'_, B>,
    k: &Kin<B>,
    pair: usize,
    (g0, g1): (usize, usize),
    (detect, detect_max): (&S<B>, f64),
    out: &mut Vec<Candidate<B>>,
    outside: &mut Vec<Outside<B>>,
) {
    use super::wheel::{boxes_in_reach, cylinder_box, geom_rot, Cyl};
    match (&model.geoms[g0].shape, &model.geoms[g1].shape) {
        (
            GeomShape::Plane,
            GeomShape::Cylinder {
                radius,
                half_length,
            },
        ) => {
            use super::wheel::Pose;
            let ident = crate::model::Quat::identity();
            let plane = Pose::of_geom(&k.geom_xpos[g0], &k.geom_xquat[g0], &ident);
            let offset = crate::collision::shapes::y_to_z();
            let cyl = Pose::of_geom(&k.geom_xpos[g1], &k.geom_xquat[g1], &offset);
            super::wheel::plane_cylinder(
                pair,
                &plane,
                &cyl,
                (*radius, *half_length),
                detect,
                out,
                outside,
            );
        }
        (GeomShape::Plane, _) => plane_pair(model, k, pair, (g0, g1), detect, out),
        (
            GeomShape::HeightField { .. },
            GeomShape::Cylinder {
                radius,
                half_length,
            },
        ) => super::height_field::wheel_candidates(
            fields,
            k,
            pair,
            (g0, g1),
            (*radius, *half_length),
            (detect, detect_max),
            out,
            outside,
        ),
        (GeomShape::HeightField { .. }, GeomShape::Box { half }) => outside.push(Outside {
            pair,
            uncollided: true,
            worlds: super::height_field::box_in_reach(
                fields,
                k,
                (g0, g1),
                half,
                (detect, detect_max),
            ),
            reason:
                "a box corner reaches a height field triangle (box–height field is not batched)",
        }),
        (
            GeomShape::Cylinder {
                radius,
                half_length,
            },
            GeomShape::Box { half },
        ) => {
            let cyl = Cyl {
                center: &k.geom_xpos[g0],
                rot: geom_rot(k, g0),
                radius: *radius,
                half_length: *half_length,
            };
            let brot = geom_rot(k, g1);
            cylinder_box(
                pair,
                &cyl,
                &k.geom_xpos[g1],
                &brot,
                half,
                detect,
                out,
                outside,
            );
        }
        (GeomShape::Box { half: ha }, GeomShape::Box { half: hb }) => outside.push(Outside {
            pair,
            uncollided: true,
            worlds: boxes_in_reach(
                (&k.geom_xpos[g0], &geom_rot(k, g0), ha),
                (&k.geom_xpos[g1], &geom_rot(k, g1), hb),
                detect,
            ),
            reason: "two boxes touch (box–box is not batched)",
        }),
        (
            GeomShape::Cylinder {
                radius: r0,
                half_length: l0,
            },
            GeomShape::Cylinder {
                radius: r1,
                half_length: l1,
            },
        ) => {
            let d = sub3(&k.geom_xpos[g1], &k.geom_xpos[g0]);
            let reach = detect + (r0.hypot(*l0) + r1.hypot(*l1));
            outside.push(Outside {
                pair,
                uncollided: true,
                worlds: dot3(&d, &d).gt(&(&reach * &reach)).not(),
                reason: "two cylinders' bounding spheres meet (cylinder–cylinder is not batched)",
            });
        }
        (GeomShape::Sphere { radius }, GeomShape::Box { half }) => {
            let s = &k.geom_xpos[g0];
            let rot = qmat(&k.geom_xquat[g1]);
            out.push(sphere_box(
                pair,
                s,
                *radius,
                &k.geom_xpos[g1],
                &rot,
                half,
                detect,
            ));
        }
        _ => unreachable!("engine::batched_support refuses other pairs"),
    }
}

/// The candidates of every pair of `compiled` (in pair order) with each pair's detection
/// distance (its mixed `margin + gap`), and the worlds where a pair left the class
/// ([`pair_candidates`]).
pub fn all_candidates<B: Backend>(
    model: &Model,
    compiled: &crate::compiled::CompiledModel,
    k: &Kin<B>,
) -> (Vec<Candidate<B>>, Vec<Outside<B>>) {
    let detect: Vec<(S<B>, f64)> = compiled
        .pairs
        .iter()
        .map(|pr| {
            let d = pr.material.margin + pr.material.gap;
            (S::C(d), d)
        })
        .collect();
    all_candidates_within(model, compiled, k, &detect)
}

/// The candidates of every pair of `compiled` (in pair order), pair `i` with detection distance
/// `detect[i].0` (m, per world) of which `detect[i].1` bounds the largest (the cpu engine's
/// [`crate::collision::detect_with_pair_margin`], whose widening ncp_fb's speculative contacts
/// make per world), and the worlds where a pair left the class ([`pair_candidates`]).
pub fn all_candidates_within<B: Backend>(
    model: &Model,
    compiled: &crate::compiled::CompiledModel,
    k: &Kin<B>,
    detect: &[(S<B>, f64)],
) -> (Vec<Candidate<B>>, Vec<Outside<B>>) {
    let (mut cands, mut outside) = (Vec::new(), Vec::new());
    let mut fields = super::height_field::Fields::new(compiled);
    for (i, pr) in compiled.pairs.iter().enumerate() {
        pair_candidates(
            model,
            &mut fields,
            k,
            i,
            (pr.geoms[0], pr.geoms[1]),
            (&detect[i].0, detect[i].1),
            &mut cands,
            &mut outside,
        );
    }
    (cands, outside)
}

/// `√x` for x ≥ 0 whose derivative stays finite where x = 0 (its branch then uses √1).
pub(crate) fn safe_sqrt<B: Backend>(x: &S<B>) -> S<B> {
    let pos = x.gt(&S::C(0.0));
    pos.select(&pos.select(x, &S::C(1.0)).sqrt(), &S::C(0.0))
}

/// MuJoCo's `mjc_SphereBox` per world (as [`crate::collision::primitive_pairs::sphere_box`]):
/// the sphere's centre in the box frame clamped to the box; outside, the contact is along the
/// clamped point's direction; a centre inside the box is pushed out through the nearest face
/// (faces −x, +x, −y, +y, −z, +z, the first of equals). Normal from the sphere into the box;
/// `found` where `dist − r ≤ detect`.
pub fn sphere_box<B: Backend>(
    pair: usize,
    spos: &V3<B>,
    r: f64,
    bpos: &V3<B>,
    rot: &M3<B>,
    half: &crate::model::Vec3,
    detect: &S<B>,
) -> Candidate<B> {
    let size = [half.x, half.y, half.z];
    let d = sub3(spos, bpos);
    // mju_mulMatTVec3: column i of the row-major matrix dotted with d.
    let center: V3<B> = std::array::from_fn(|i| dot3(&column(rot, i), &d));
    let clamped: V3<B> = std::array::from_fn(|i| {
        if size[i] > 0.0 {
            let c = &center[i];
            c.lt(&S::C(-size[i])).select(
                &S::C(-size[i]),
                &c.gt(&S::C(size[i])).select(&S::C(size[i]), c),
            )
        } else {
            center[i].clone()
        }
    });
    let tmp0 = sub3(&clamped, &center);
    // mju_normalize3: the norm, and the unit vector ((1, 0, 0) below 1e-15).
    let dist = safe_sqrt(&dot3(&tmp0, &tmp0));
    let small = dist.lt(&S::C(1e-15));
    let inv = S::C(1.0) / &small.select(&S::C(1.0), &dist);
    let tmp: V3<B> = std::array::from_fn(|i| {
        small.select(&S::C(if i == 0 { 1.0 } else { 0.0 }), &(&tmp0[i] * &inv))
    });
    let found = (&dist - r).gt(detect).not();
    // Centre inside the box (dist ≤ 1e-15): the nearest face, the first of equals.
    let inside = dist.gt(&S::C(1e-15)).not();
    let mut closest = S::C((size[0] + size[1] + size[2]) * 2.0);
    let mut face_k: Vec<M<B>> = Vec::with_capacity(6);
    for i in 0..6 {
        let face = (if i % 2 == 1 { 1.0 } else { -1.0 }) * size[i / 2];
        let gap = (S::C(face) - &center[i / 2]).abs();
        let closer = closest.gt(&gap);
        closest = closer.select(&gap, &closest);
        for m in face_k.iter_mut() {
            *m = m.and(&closer.not());
        }
        face_k.push(closer);
    }
    let nearest: V3<B> = std::array::from_fn(|a| {
        let (neg, pos) = (&face_k[2 * a], &face_k[2 * a + 1]);
        // Face −a pushes along +a, face +a along −a.
        neg.select(&S::C(1.0), &pos.select(&S::C(-1.0), &S::C(0.0)))
    });
    let push = &(S::C(r) - &closest) / 2.0;
    let pos_in = add3(&center, &scale3(&nearest, &push));
    let deepest = add3(&center, &scale3(&tmp, &S::C(r)));
    let half_c = scale3(&clamped, &S::C(0.5));
    let pos_out = add3(&half_c, &scale3(&deepest, &S::C(0.5)));
    let pos: V3<B> = std::array::from_fn(|i| inside.select(&pos_in[i], &pos_out[i]));
    let dir: V3<B> = std::array::from_fn(|i| inside.select(&nearest[i], &tmp[i]));
    let normal: V3<B> = std::array::from_fn(|i| dot3(&rot[i], &dir));
    let point = add3(&std::array::from_fn(|i| dot3(&rot[i], &pos)), bpos);
    let dist = inside.select(&(-&closest), &dist);
    Candidate {
        pair,
        found,
        point,
        normal,
        gap: &dist - r,
    }
}

/// The candidates of pair `pair` = (plane `g0`, other `g1`) with detection distance `detect`
/// (m, the mixed `margin + gap`), appended to `out` in the cpu engine's order.
pub fn plane_pair<B: Backend>(
    model: &Model,
    k: &Kin<B>,
    pair: usize,
    (g0, g1): (usize, usize),
    detect: &S<B>,
    out: &mut Vec<Candidate<B>>,
) {
    let n = column(&qmat(&k.geom_xquat[g0]), 2);
    let pp = &k.geom_xpos[g0];
    let gpos = &k.geom_xpos[g1];
    match &model.geoms[g1].shape {
        GeomShape::Sphere { radius } => {
            // mjc_PlaneSphere: dist = (c − p)·n − r, point = c + n (−dist/2 − r).
            let cdist = dot3(&sub3(gpos, pp), &n);
            let found = cdist.le(&(detect + *radius));
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
                let found = dist.le(detect);
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
