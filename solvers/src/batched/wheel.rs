//! Batched contacts of a cylinder whose line contacts count as one point
//! ([`crate::model::Geom::line_contact_as_point`]: the wheeled robot's wheels, issue 13)
//! against a plane and against a box, in the cpu engine's rules:
//!
//! - **plane–cylinder**: the cpu engine sends this pair to parry's half-space manifold
//!   (`contact_manifold_halfspace_pfm`), whose cylinder feature toward the plane is, while the
//!   axis is within 60° of parallel to the plane (`|n·a| < 1/2`), the tread's generator
//!   segment: the two rim points `c ± l a + r d̂`, `d̂` the unit part of `−n` orthogonal to the
//!   axis `a`. Each end within the detection distance is a contact with `gap = (vᵢ − p)·n`
//!   at `vᵢ − n gap/2` (midway between the rim point and its projection on the plane).
//! - **cylinder–box**: [`crate::collision::cylinder_box`]'s closed form (the tread's two ends
//!   over the box, each with the box's outward direction at its closest point).
//!
//! Both then go through the cpu engine's line-contact merge (`narrow_phase::merge_line_contact`):
//! two found ends with the same normal (1 − cos ≤ 1e-9) become one contact at their mean point
//! with the smaller gap and that end's normal. As tensors each pair has two slots: slot A holds
//! end 0, or the merged contact where both ends merge; slot B holds end 1 where it is a contact
//! of its own. The active contacts and their order are the cpu engine's.
//!
//! **Outside the class.** Where the cpu engine would use another rule (parry's cap square when
//! the axis is within 60° of the plane's normal; parry's general manifold outside the
//! cylinder–box closed form's domain) and the pair is within reach (conservatively: the
//! cylinder's bounding sphere), the world is flagged ([`Outside`]): its steps from there on are
//! not the cpu engine's, and the steppers end it with the reason.

use burn_tensor::backend::Backend;

use super::collision::{safe_sqrt, Candidate, Outside};
use super::scalar::{M, S};
// `qmul`'s order of operations is the one nalgebra's `Quaternion` `Mul` and glam's
// `DQuat::mul_quat` share.
use super::spatial::{
    add3, column, dot3, mat_t_vec, mat_vec, qmat, qmul, scale3, sub3, M3, Q4, V3,
};
use crate::collision::cylinder_box::MAX_SKEW;
use crate::collision::narrow_phase::DUPLICATE_DISTANCE;
use crate::model::Vec3;

/// Normals closer than this (1 − cos) are one line contact's (the cpu engine's `SAME_NORMAL`).
pub(crate) const SAME_NORMAL: f64 = 1e-9;

/// A cylinder per world: centre (m, world), rotation (its columns are the local axes in the
/// world; the axis is the third), radius and half-length (m).
pub struct Cyl<'a, B: Backend> {
    /// Centre.
    pub center: &'a V3<B>,
    /// Rotation matrix (rows, as [`qmat`]).
    pub rot: M3<B>,
    /// Radius (m).
    pub radius: f64,
    /// Half-length (m).
    pub half_length: f64,
}

impl<B: Backend> Cyl<'_, B> {
    /// Radius of the bounding sphere (m).
    fn bound(&self) -> f64 {
        self.radius.hypot(self.half_length)
    }
}

/// One end of a line contact: found mask, point (m, world), normal (world, from the pair's
/// first geom into its second), gap (m).
pub(crate) struct End<B: Backend> {
    pub(crate) found: M<B>,
    pub(crate) point: V3<B>,
    pub(crate) normal: V3<B>,
    pub(crate) gap: S<B>,
}

/// Two line-contact ends whose gaps differ by at most this (m) tie ([`push_merged`]; the cpu
/// engine's [`crate::collision::LINE_TIE_GAP`]).
pub const TIE_GAP: f64 = crate::collision::LINE_TIE_GAP;

/// `x` with its autodiff tape cut (the same value).
fn detached<B: Backend>(x: &S<B>) -> S<B> {
    match x {
        S::C(c) => S::C(*c),
        S::T(t) => S::T(t.clone().detach()),
    }
}

/// Push the two slots of a line contact (module doc) for `pair`.
fn push_merged<B: Backend>(pair: usize, e0: End<B>, e1: End<B>, out: &mut Vec<Candidate<B>>) {
    let same = (S::C(1.0) - dot3(&e0.normal, &e1.normal))
        .gt(&S::C(SAME_NORMAL))
        .not();
    let both = e0.found.and(&e1.found).and(&same);
    // The deepest end, the first of equals (`min_by` on the gaps).
    let first_deeper = e1.gap.lt(&e0.gap).not();
    let mean: V3<B> = std::array::from_fn(|i| (&e0.point[i] + &e1.point[i]) / 2.0);
    let point = std::array::from_fn(|i| both.select(&mean[i], &e0.point[i]));
    // The merged normal is the ends' mean, normalized (a smooth function of the pose: the
    // deeper end's normal would jump where the ends' normals differ, on a box edge, as the
    // deeper end changes). The merged gap is the deeper end's (a min). Where the two ends tie
    // within TIE_GAP (a level wheel on a plane, a box top or a box edge parallel to its axis:
    // every step of box_traversal's straight drive and climb) the min has no derivative, and
    // its derivative is taken as the two ends' mean (the symmetric element of the Clarke
    // subdifferential, which central differences of the cpu engine's step return), with the
    // value unchanged to the last bit: `detach(deep) + (sym − detach(sym))`.
    let sum: V3<B> = std::array::from_fn(|i| &e0.normal[i] + &e1.normal[i]);
    let length = safe_sqrt(&dot3(&sum, &sum));
    let normal = std::array::from_fn(|i| both.select(&(&sum[i] / &length), &e0.normal[i]));
    let tie = (&e0.gap - &e1.gap).abs().le(&S::C(TIE_GAP));
    let symmetric = |a: &S<B>, b: &S<B>| -> S<B> {
        let deep = first_deeper.select(a, b);
        let sym = tie.select(&(&(a + b) * 0.5), &deep);
        &detached(&deep) + &(&sym - &detached(&sym))
    };
    let gap = both.select(&symmetric(&e0.gap, &e1.gap), &e0.gap);
    out.push(Candidate {
        pair,
        found: e0.found,
        point,
        normal,
        gap,
    });
    out.push(Candidate {
        pair,
        found: e1.found.and(&both.not()),
        point: e1.point,
        normal: e1.normal,
        gap: e1.gap,
    });
}

/// The conjugate (glam's inverse of a unit quaternion).
fn conj<B: Backend>(q: &Q4<B>) -> Q4<B> {
    [q[0].clone(), -&q[1], -&q[2], -&q[3]]
}

/// glam's rotation of `v` by a unit quaternion (`DQuat::mul_vec3`, its order of operations).
fn glam_rot<B: Backend>(q: &Q4<B>, v: &V3<B>) -> V3<B> {
    let w = &q[0];
    let b: V3<B> = [q[1].clone(), q[2].clone(), q[3].clone()];
    let b2 = dot3(&b, &b);
    let s = &(w * w) - &b2;
    let d = &dot3(v, &b) * 2.0;
    let c = glam_cross(&b, v);
    let w2 = w * 2.0;
    std::array::from_fn(|i| &(&(&v[i] * &s) + &(&b[i] * &d)) + &(&c[i] * &w2))
}

/// glam's cross product (`DVec3::cross`).
fn glam_cross<B: Backend>(a: &V3<B>, b: &V3<B>) -> V3<B> {
    [
        &(&a[1] * &b[2]) - &(&b[1] * &a[2]),
        &(&a[2] * &b[0]) - &(&b[2] * &a[0]),
        &(&a[0] * &b[1]) - &(&b[0] * &a[1]),
    ]
}

/// A pose as parry holds it: translation and rotation `[w, x, y, z]`.
pub struct Pose<B: Backend> {
    /// Translation (m, world).
    pub t: V3<B>,
    /// Rotation.
    pub r: Q4<B>,
}

impl<B: Backend> Pose<B> {
    /// The cpu engine's parry pose of a geom (`broad_phase::shape_pose`): placement `pos`,
    /// `quat` composed with the shape's `offset` by nalgebra's product.
    pub fn of_geom(pos: &V3<B>, quat: &Q4<B>, offset: &crate::model::Quat) -> Self {
        Self {
            t: pos.clone(),
            r: qmul(quat, &super::spatial::q4c(offset)),
        }
    }

    /// `self⁻¹ other` (glamx's `inv_mul`).
    pub(crate) fn inv_mul(&self, other: &Self) -> Self {
        let inv = conj(&self.r);
        Self {
            t: glam_rot(&inv, &sub3(&other.t, &self.t)),
            r: qmul(&inv, &other.r),
        }
    }

    /// `self · p` (glamx's `transform_point`).
    fn point(&self, p: &V3<B>) -> V3<B> {
        add3(&glam_rot(&self.r, p), &self.t)
    }
}

/// Plane (parry pose `plane`, +z its normal) against a line-contact cylinder (parry pose
/// `cyl`, its axis parry's y; `bound`: its bounding radius), in parry's arithmetic
/// (`contact_manifold_halfspace_pfm` with the cylinder's `support_feature_with_azimuth`; the
/// cpu engine's point midway between the two manifold points): two slots appended to `out`,
/// the worlds outside the segment rule to `outside`. The arithmetic is parry's so that a
/// wheel placed exactly on the plane gets parry's gap, 0, which MuJoCo's rule excludes
/// (rows only for `dist < margin`).
#[allow(clippy::too_many_arguments)]
pub fn plane_cylinder<B: Backend>(
    pair: usize,
    plane: &Pose<B>,
    cyl: &Pose<B>,
    (radius, half_length): (f64, f64),
    detect: &S<B>,
    out: &mut Vec<Candidate<B>>,
    outside: &mut Vec<Outside<B>>,
) {
    let z: V3<B> = [S::C(0.0), S::C(0.0), S::C(1.0)];
    // The cpu engine's normal of a plane geom: parry's `local_n1` rotated by glam.
    let normal = glam_rot(&plane.r, &z);
    let (e0, e1, cap) = plane_cylinder_ends(plane, &normal, cyl, (radius, half_length), detect);
    outside.push(Outside {
        pair,
        uncollided: false,
        worlds: cap,
        reason: "a wheel's cap faces the plane (the cpu engine uses parry's cap square there)",
    });
    push_merged(pair, e0, e1, out);
}

/// The two ends of [`plane_cylinder`] before the merge, per world (or per world and triangle:
/// any 1-D batch), with the contacts' normal `normal` given (the cpu engine computes it by
/// glam for a plane geom, by nalgebra for a height field's triangle): `(end 0, end 1, cap)`,
/// the ends at the cylinder's local `y = −l` and `+l` in parry's manifold order, each found
/// where `gap ≤ detect` and the segment rule holds; `cap`: the worlds where a cap faces the
/// plane (`|dir.y| ≥ 1/2`) and the cylinder's bounding sphere is within `detect` of it.
pub(crate) fn plane_cylinder_ends<B: Backend>(
    plane: &Pose<B>,
    normal: &V3<B>,
    cyl: &Pose<B>,
    (radius, half_length): (f64, f64),
    detect: &S<B>,
) -> (End<B>, End<B>, M<B>) {
    let z: V3<B> = [S::C(0.0), S::C(0.0), S::C(1.0)];
    let pos12 = plane.inv_mul(cyl);
    let n12 = glam_rot(&conj(&pos12.r), &z);
    let dir: V3<B> = std::array::from_fn(|i| -&n12[i]);
    // The generator segment while |dir.y| < 1/2, else a cap square.
    let cap = dir[1].abs().lt(&S::C(0.5)).not();
    let centre_dist = dot3(&sub3(&cyl.t, &plane.t), normal);
    let reach = (&centre_dist - radius.hypot(half_length)).gt(detect).not();
    // glam's `DVec2::try_normalize` of (dir.x, dir.z).
    let len = safe_sqrt(&(&(&dir[0] * &dir[0]) + &(&dir[2] * &dir[2])));
    let rcp = S::C(1.0) / &cap.select(&S::C(1.0), &len);
    let (d2x, d2y) = (&dir[0] * &rcp, &dir[2] * &rcp);
    let end = |y: f64| {
        let vtx: V3<B> = [&d2x * radius, S::C(y), &d2y * radius];
        let v21 = pos12.point(&vtx);
        let gap = v21[2].clone();
        let on_plane: V3<B> = [v21[0].clone(), v21[1].clone(), &v21[2] - &gap];
        let (p0, p1) = (plane.point(&on_plane), cyl.point(&vtx));
        End {
            found: gap.le(detect).and(&cap.not()),
            point: std::array::from_fn(|i| &(&p0[i] + &p1[i]) * 0.5),
            normal: normal.clone(),
            gap,
        }
    };
    let (e0, e1) = (end(-half_length), end(half_length));
    (e0, e1, cap.and(&reach))
}

/// parry's whole half-space manifold of a cylinder against a plane
/// (`contact_manifold_halfspace_pfm` with `Cylinder::support_feature_with_azimuth` and
/// `feature_azimuth` without a hint), per entry of any 1-D batch, with the contacts' normal
/// `normal` given: while `|dir.y| < 1/2` the generator segment's two ends (the arithmetic of
/// [`plane_cylinder_ends`]), else the cap's inscribed square, vertices `(dₓ r, y, d_z r)`,
/// `(−d_z r, y, dₓ r)`, `(−dₓ r, y, −d_z r)`, `(d_z r, y, −dₓ r)` at `y = copysign(l, dir.y)`,
/// `d` the unit `(dir.x, dir.z)` (glam's `try_normalize`, `(1, 0)` where it fails). Four ends
/// in parry's order, each found where `gap ≤ detect`; ends 2 and 3 exist on the cap only.
pub(crate) fn plane_cylinder_manifold<B: Backend>(
    plane: &Pose<B>,
    normal: &V3<B>,
    cyl: &Pose<B>,
    (radius, half_length): (f64, f64),
    detect: &S<B>,
) -> [End<B>; 4] {
    let z: V3<B> = [S::C(0.0), S::C(0.0), S::C(1.0)];
    let pos12 = plane.inv_mul(cyl);
    let n12 = glam_rot(&conj(&pos12.r), &z);
    let dir: V3<B> = std::array::from_fn(|i| -&n12[i]);
    let cap = dir[1].abs().lt(&S::C(0.5)).not();
    // glam's `DVec2::try_normalize` of (dir.x, dir.z): `self · (1 / length)`, none where the
    // reciprocal is not finite (a zero length); then parry's `Vector2::X`.
    let len = safe_sqrt(&(&(&dir[0] * &dir[0]) + &(&dir[2] * &dir[2])));
    let zero = len.gt(&S::C(0.0)).not();
    let rcp = S::C(1.0) / &zero.select(&S::C(1.0), &len);
    let d2x = zero.select(&S::C(1.0), &(&dir[0] * &rcp));
    let d2y = zero.select(&S::C(0.0), &(&dir[2] * &rcp));
    let y_cap = dir[1]
        .lt(&S::C(0.0))
        .select(&S::C(-half_length), &S::C(half_length));
    let (xr, zr) = (&d2x * radius, &d2y * radius);
    let vertices: [V3<B>; 4] = [
        [
            xr.clone(),
            cap.select(&y_cap, &S::C(-half_length)),
            zr.clone(),
        ],
        [
            cap.select(&(-&zr), &xr),
            cap.select(&y_cap, &S::C(half_length)),
            cap.select(&xr, &zr),
        ],
        [-&xr, y_cap.clone(), -&zr],
        [zr.clone(), y_cap, -&xr],
    ];
    let mut k = 0;
    vertices.map(|vtx| {
        let v21 = pos12.point(&vtx);
        let gap = v21[2].clone();
        let on_plane: V3<B> = [v21[0].clone(), v21[1].clone(), &v21[2] - &gap];
        let (p0, p1) = (plane.point(&on_plane), cyl.point(&vtx));
        let exists = if k < 2 { M::C(true) } else { cap.clone() };
        k += 1;
        End {
            found: gap.le(detect).and(&exists),
            point: std::array::from_fn(|i| &(&p0[i] + &p1[i]) * 0.5),
            normal: normal.clone(),
            gap,
        }
    })
}

/// A line-contact cylinder against a box (centre `bpos`, rotation `brot`, half-extents
/// `half`): [`crate::collision::cylinder_box::cylinder_box`] per world, merged (module doc).
pub fn cylinder_box<B: Backend>(
    pair: usize,
    cyl: &Cyl<'_, B>,
    bpos: &V3<B>,
    brot: &M3<B>,
    half: &Vec3,
    detect: &S<B>,
    out: &mut Vec<Candidate<B>>,
    outside: &mut Vec<Outside<B>>,
) {
    let e = [half.x, half.y, half.z];
    let a = column(&cyl.rot, 2);
    let a_l = mat_t_vec(brot, &a);
    let c_l = mat_t_vec(brot, &sub3(cyl.center, bpos));
    // k = the box axis most aligned with the cylinder's (nalgebra's iamax: the first largest).
    let abs: Vec<S<B>> = a_l.iter().map(S::abs).collect();
    let k0 = abs[0].ge(&abs[1]).and(&abs[0].ge(&abs[2]));
    let k1 = k0.not().and(&abs[1].ge(&abs[2]));
    let pick = |v: [S<B>; 3]| k0.select(&v[0], &k1.select(&v[1], &v[2]));
    let (ak, ck) = (pick(a_l.clone()), pick(c_l.clone()));
    let ek = pick([S::C(e[0]), S::C(e[1]), S::C(e[2])]);
    let mut off = ak.abs().lt(&S::C(MAX_SKEW.cos()));
    let ak_safe = off.select(&S::C(1.0), &ak);
    let t0 = &(&(-&ek) - &ck) / &ak_safe;
    let t1 = &(&ek - &ck) / &ak_safe;
    let s0 = t0.min(&t1).max_c(-cyl.half_length);
    let s1 = (-(&(-&t0).min(&(-&t1)))).min_c(cyl.half_length);
    off = off.or(&s0.gt(&s1));
    let two = (&s1 - &s0).gt(&S::C(DUPLICATE_DISTANCE));
    let mut end = |s: &S<B>, counts: &M<B>| {
        let q_l = add3(&c_l, &scale3(&a_l, s));
        let b_l: V3<B> = std::array::from_fn(|i| q_l[i].max_c(-e[i]).min_c(e[i]));
        let d_l = sub3(&q_l, &b_l);
        let delta = safe_sqrt(&dot3(&d_l, &d_l));
        let flat = delta.gt(&S::C(0.0)).not();
        let inv = S::C(1.0) / &flat.select(&S::C(1.0), &delta);
        let m = mat_vec(brot, &scale3(&d_l, &inv));
        let along = dot3(&m, &a);
        let skew = along.abs().gt(&S::C(MAX_SKEW.sin()));
        off = off.or(&counts.and(&flat.or(&skew)));
        let m_perp = sub3(&m, &scale3(&a, &along));
        let mpn = safe_sqrt(&dot3(&m_perp, &m_perp));
        let mpn_safe = mpn.gt(&S::C(0.0)).select(&mpn, &S::C(1.0));
        let gap = &delta - &(&mpn * cyl.radius);
        let q = add3(cyl.center, &scale3(&a, s));
        let w = sub3(&q, &scale3(&m_perp, &(S::C(cyl.radius) / &mpn_safe)));
        End {
            found: gap.le(detect).and(counts),
            point: sub3(&w, &scale3(&m, &(&gap * 0.5))),
            normal: std::array::from_fn(|i| -&m[i]),
            gap,
        }
    };
    let e0 = end(&s0, &M::C(true));
    let e1 = end(&s1, &two);
    // Within reach: the box's closest point to the cylinder's centre within its bounding
    // sphere.
    let clamped: V3<B> = std::array::from_fn(|i| c_l[i].max_c(-e[i]).min_c(e[i]));
    let d = sub3(&c_l, &clamped);
    let reach = (safe_sqrt(&dot3(&d, &d)) - cyl.bound()).gt(detect).not();
    let inside = off.and(&reach);
    outside.push(Outside {
        pair,
        uncollided: false,
        worlds: inside.clone(),
        reason: "a wheel meets the box outside the closed form's domain (a cap, a skewed or deep contact; the cpu engine uses parry there)",
    });
    let keep = off.not();
    let e0 = End {
        found: e0.found.and(&keep),
        ..e0
    };
    let e1 = End {
        found: e1.found.and(&keep),
        ..e1
    };
    push_merged(pair, e0, e1, out);
}

/// Whether two boxes (centres, rotations, half-extents) overlap within `detect` (m), by the
/// separating-axis test over their 15 axes (Gottschalk, Lin and Manocha, "OBBTree", SIGGRAPH
/// 1996, §4): exact for the boxes, so a flag on it fires only where they touch.
pub fn boxes_in_reach<B: Backend>(
    (pa, ra, ha): (&V3<B>, &M3<B>, &Vec3),
    (pb, rb, hb): (&V3<B>, &M3<B>, &Vec3),
    detect: &S<B>,
) -> M<B> {
    let t = sub3(pb, pa);
    let ax: [V3<B>; 3] = std::array::from_fn(|i| column(ra, i));
    let bx: [V3<B>; 3] = std::array::from_fn(|i| column(rb, i));
    let radius = |l: &V3<B>, axes: &[V3<B>; 3], h: &Vec3| {
        (0..3).fold(S::C(0.0), |acc, i| acc + dot3(&axes[i], l).abs() * h[i])
    };
    let mut separated = M::C(false);
    let mut test = |l: V3<B>| {
        let len = safe_sqrt(&dot3(&l, &l));
        let gap = dot3(&t, &l).abs() - radius(&l, &ax, ha) - radius(&l, &bx, hb);
        separated = separated.or(&gap.gt(&(&len * &detect.max_c(0.0))));
    };
    for l in ax.iter().chain(&bx) {
        test(l.clone());
    }
    for i in &ax {
        for j in &bx {
            test(super::spatial::cross3(i, j));
        }
    }
    separated.not()
}

/// Rotation matrix of a geom per world.
pub fn geom_rot<B: Backend>(k: &super::kinematics::Kin<B>, g: usize) -> M3<B> {
    qmat(&k.geom_xquat[g])
}
