//! Batched contacts of a static height field with a line-contact cylinder (the wheeled
//! robot's wheels on terrain, issue 17), in the cpu engine's rules, order and arithmetic
//! ([`crate::collision::height_field::height_field_pair`], then
//! `narrow_phase::merge_line_contact`):
//!
//! 1. **Window.** The cpu engine asks parry's `HeightField::map_elements_in_local_aabb` for
//!    the triangles of the cells under the wheel's AABB in the field's parry frame, widened by
//!    `max(detect, 0)` and unbounded upward. Per world the same query is made here: the AABB
//!    (parry's `support_map_aabb` of a cylinder: `r √(R_a0² + R_a2²) + l |R_a1|` about the
//!    centre along axis `a`, up to round-off), parry's out-of-bounds test, its
//!    `quantize_floor` / `quantize_ceil` cell range and its cull of cells whose four heights
//!    are all below the box. The range starts a fixed window of `W × W` cells (`W` from the
//!    wheel's bounding radius and the cell size, [`window_size`]); the window's cells outside
//!    the range (past the field's edge, or beyond the range) are masked, and a world whose
//!    range would exceed the window is flagged ([`Outside`]), never cut silently.
//! 2. **Triangles.** The window's `2 W²` triangles are gathered per world from the host tables
//!    ([`FieldTable`]: plane pose, normal, vertices, as the cpu engine computes them) in parry's
//!    visiting order (cells `j` outer, `i` inner; a cell's first triangle first), as one batch
//!    of `worlds × 2 W²` entries, and each triangle's plane is collided with the wheel by
//!    [`super::wheel::plane_cylinder_manifold`] (parry's half-space manifold of a cylinder, as
//!    `plane_candidates` asks for it: the tread's two ends, or the four vertices of parry's
//!    square on a cap facing the plane), with the triangle's normal as the cpu engine rotates
//!    it (nalgebra). An end is kept where its point lies over its triangle (`over_triangle`,
//!    the same tolerance), the triangle was visited, and it is within the detection distance.
//! 3. **Compaction.** Each world's kept ends, in the cpu engine's order (triangle by triangle,
//!    each triangle's ends in parry's order), are moved into [`SLOTS`] slots by their rank (a
//!    cumulative sum of the kept mask); a world with more kept ends is flagged.
//! 4. **Duplicates and merge.** An end within `DUPLICATE_DISTANCE` of an earlier kept one with
//!    a parallel normal (`cos > 1 − 1e-12`) is dropped and lowers the earlier one's gap to the
//!    smaller (the cpu engine's first match); this test runs only on fields where two
//!    triangles sharing a vertex are that parallel ([`FieldTable::may_duplicate`]), since
//!    elsewhere it can never fire. Then the line-contact merge: where two or more contacts are
//!    left and all share the first one's normal (`1 − cos ≤ 1e-9`), they become one contact
//!    at their mean point (summed in order) with the deepest one's gap and normal (the first of
//!    equals); otherwise all stay.
//!
//! **Outside the class** (the world is flagged, [`Outside`], and the stepper ends it with the
//! reason): more than [`SLOTS`] kept ends, a cell range larger than the window. A box against the field (the robot's chassis) is not collided: the worlds where
//! the cpu engine could find a box contact (a corner near a visited triangle's plane, over the
//! triangle; conservatively) are flagged ([`box_in_reach`]).
//!
//! **Broad phase.** The cpu engine collides the pair only where the wheel's AABB meets the
//! field's solid AABB (`broad_phase::bounds_overlap` with `height_field::solid_aabb`); every
//! world it skips is one where parry's query above visits no cell or finds no contact (outside
//! the field's xy bounds, or above its highest vertex), up to ties at the bounds.
//!
//! **Cost.** The tables (`2 · rows · cols × 26` values) are uploaded once per step
//! ([`Fields`]); each wheel costs about 500 tensor operations, most on `worlds × 2 W²` entries
//! (W = 4 for the robot on the 0.3 m cells of `mesh_terrain`).

use std::sync::Arc;

use burn_tensor::backend::Backend;
use burn_tensor::{Bool, Int, Tensor, TensorData};

use super::collision::{safe_sqrt, Candidate, Outside};
use super::kinematics::Kin;
use super::scalar::{M, S};
use super::spatial::{dot3, qmat, qrot, sub3, zero3, Q4, V3};
use super::wheel::{plane_cylinder_manifold, End, Pose, SAME_NORMAL};
use crate::collision::height_field_table::{col, FieldTable, COLUMNS};
use crate::collision::narrow_phase::DUPLICATE_DISTANCE;
use crate::compiled::CompiledModel;
use crate::model::{Quat, Vec3};

/// Contact slots per wheel on a height field: the cpu engine's kept ends (two per triangle
/// plane for the tread, four for a cap) are one per triangle plane under each end of the
/// tread in practice (two on a ridge, three near a vertex), four on a cap lying on one
/// triangle; more are flagged, not dropped.
pub const SLOTS: usize = 6;
const _: () = assert!(SLOTS == 6, "the reason string below says 6");

/// Two normals with `cos` above `1 − DUPLICATE_COS` are parallel for the duplicate test (the
/// cpu engine's `1 − 1e-12`).
const DUPLICATE_COS: f64 = 1e-12;

/// The height field tables of a model ([`CompiledModel::height_fields`]), each uploaded to the
/// device at most once per step (on first use by a pair).
pub struct Fields<'a, B: Backend> {
    tables: &'a [Option<Arc<FieldTable>>],
    uploaded: Vec<Option<Tensor<B, 2>>>,
}

impl<'a, B: Backend> Fields<'a, B> {
    /// The tables of `compiled`, none uploaded yet.
    pub fn new(compiled: &'a CompiledModel) -> Self {
        Self {
            tables: &compiled.height_fields,
            uploaded: vec![None; compiled.height_fields.len()],
        }
    }

    /// Height field geom `g`'s host table and its data as a `(2 rows cols, COLUMNS)` tensor.
    ///
    /// # Panics
    /// If `g` is not a height field (the dispatch only calls this for one).
    fn get(&mut self, g: usize, device: &B::Device) -> (&'a FieldTable, Tensor<B, 2>) {
        let t: &'a FieldTable = self.tables[g]
            .as_deref()
            .expect("a height field geom has its tables");
        let tensor = self.uploaded[g]
            .get_or_insert_with(|| {
                let n = t.data.len() / COLUMNS;
                Tensor::from_data(
                    TensorData::new(t.data.clone(), [n, COLUMNS]).convert::<B::FloatElem>(),
                    device,
                )
            })
            .clone();
        (t, tensor)
    }
}

/// The first per-world tensor among `xs` (a moving geom's placement always has one).
fn like<B: Backend>(xs: &[S<B>]) -> Tensor<B, 1> {
    xs.iter()
        .find_map(|s| match s {
            S::T(t) => Some(t.clone()),
            S::C(_) => None,
        })
        .expect("a geom on a moving body has a per-world placement")
}

/// Cells per side of a window that holds parry's cell range for any box of bounding radius
/// `bound` (m) widened by `max(detect, 0)`: the range spans fewer than `2 (bound + d) / cell
/// + 2` cells.
fn window_size(t: &FieldTable, bound: f64, detect: f64) -> usize {
    (2.0 * (bound + detect.max(0.0)) / t.cell).floor() as usize + 2
}

/// parry's cell range for one query box per world (`map_elements_in_local_aabb`).
struct Window<B: Backend> {
    /// First column (parry's x, `quantize_floor`).
    j0: S<B>,
    /// First row (parry's z).
    i0: S<B>,
    /// Columns in the range (`quantize_ceil − j0`; 0 outside the field's bounds).
    nj: S<B>,
    /// Rows in the range.
    ni: S<B>,
    /// The box's bottom in parry units (`ref_mins.y`): cells whose four heights are all below
    /// it are skipped.
    bottom: S<B>,
    /// Worlds whose range exceeds the window.
    overflow: M<B>,
}

/// parry's range for the box `centre ± half` (field's parry frame, m) widened by `d` (m, ≥ 0),
/// checked against a window of `size × size` cells.
fn window<B: Backend>(
    t: &FieldTable,
    centre: &V3<B>,
    half: &V3<B>,
    d: &S<B>,
    size: usize,
) -> Window<B> {
    let lo: V3<B> = std::array::from_fn(|a| &(&centre[a] - &half[a]) - d);
    let hi: V3<B> = std::array::from_fn(|a| &(&centre[a] + &half[a]) + d);
    let ref_lo: V3<B> = std::array::from_fn(|a| &lo[a] / t.scale[a]);
    let ref_hi: V3<B> = std::array::from_fn(|a| &hi[a] / t.scale[a]);
    let out_of_bounds = ref_hi[0]
        .le(&S::C(-0.5))
        .or(&ref_hi[2].le(&S::C(-0.5)))
        .or(&ref_lo[0].ge(&S::C(0.5)))
        .or(&ref_lo[2].ge(&S::C(0.5)));
    let floor =
        |v: &S<B>, cell: f64, n: usize| ((v + 0.5) / cell).floor().max_c(0.0).min_c((n - 1) as f64);
    let ceil = |v: &S<B>, cell: f64, n: usize| ((v + 0.5) / cell).ceil().max_c(0.0).min_c(n as f64);
    let j0 = floor(&ref_lo[0], t.unit_cell[0], t.cols);
    let i0 = floor(&ref_lo[2], t.unit_cell[1], t.rows);
    let nj = out_of_bounds.select(
        &S::C(0.0),
        &(ceil(&ref_hi[0], t.unit_cell[0], t.cols) - &j0).max_c(0.0),
    );
    let ni = out_of_bounds.select(
        &S::C(0.0),
        &(ceil(&ref_hi[2], t.unit_cell[1], t.rows) - &i0).max_c(0.0),
    );
    let cap = S::C(size as f64);
    let overflow = nj.gt(&cap).or(&ni.gt(&cap));
    Window {
        j0,
        i0,
        nj,
        ni,
        bottom: ref_lo[1].clone(),
        overflow,
    }
}

/// A window's triangles per world: `rows` `(w · slots, COLUMNS)`, entry `w_idx · slots + s`
/// for slot `s = (dj · size + di) · 2 + side` (parry's order), and `active` `(w · slots)`,
/// whether the slot's cell is in the world's range.
struct Gathered<B: Backend> {
    rows: Tensor<B, 2>,
    active: M<B>,
    worlds: usize,
    slots: usize,
}

impl<B: Backend> Gathered<B> {
    /// Column `c` of every entry.
    fn col(&self, c: usize) -> S<B> {
        S::T(
            self.rows
                .clone()
                .narrow(1, c, 1)
                .reshape([self.worlds * self.slots]),
        )
    }

    /// A per-world scalar repeated for each slot.
    fn rep(&self, s: &S<B>) -> S<B> {
        match s {
            S::C(c) => S::C(*c),
            S::T(x) => S::T(
                x.clone()
                    .reshape([self.worlds, 1])
                    .repeat_dim(1, self.slots)
                    .reshape([self.worlds * self.slots]),
            ),
        }
    }

    /// Per world: whether any slot of `m` `(w · slots)` is true.
    fn any(&self, m: &M<B>) -> M<B> {
        match m {
            M::C(b) => M::C(*b),
            M::T(x) => M::T(
                x.clone()
                    .reshape([self.worlds, self.slots])
                    .any_dim(1)
                    .reshape([self.worlds]),
            ),
        }
    }
}

/// Gather the window's triangles for `worlds` worlds (see [`Gathered`]).
fn gather<B: Backend>(
    t: &FieldTable,
    table: &Tensor<B, 2>,
    win: &Window<B>,
    size: usize,
    worlds: usize,
    device: &B::Device,
) -> Gathered<B> {
    let slots = 2 * size * size;
    let (mut di, mut dj, mut side) = (Vec::new(), Vec::new(), Vec::new());
    for a in 0..size {
        for b in 0..size {
            for s in 0..2 {
                dj.push(a as f64);
                di.push(b as f64);
                side.push(s as f64);
            }
        }
    }
    let constant = |v: Vec<f64>| {
        Tensor::<B, 2>::from_data(
            TensorData::new(v, [1, slots]).convert::<B::FloatElem>(),
            device,
        )
        .repeat_dim(0, worlds)
    };
    let per_world = |s: &S<B>| {
        s.tensor(worlds, device)
            .reshape([worlds, 1])
            .repeat_dim(1, slots)
    };
    let (di, dj, side) = (constant(di), constant(dj), constant(side));
    let i = per_world(&win.i0) + di.clone();
    let j = per_world(&win.j0) + dj.clone();
    let active = di
        .lower(per_world(&win.ni))
        .bool_and(dj.lower(per_world(&win.nj)));
    // parry's triangle id of the (clamped) cell: j rows + i, plus rows cols for the second.
    let idx = j.clamp_max((t.cols - 1) as f64) * (t.rows as f64)
        + i.clamp_max((t.rows - 1) as f64)
        + side * ((t.rows * t.cols) as f64);
    let idx: Tensor<B, 1, Int> = idx.reshape([worlds * slots]).int();
    Gathered {
        rows: table.clone().select(0, idx),
        active: M::T(active.reshape([worlds * slots])),
        worlds,
        slots,
    }
}

/// The field's parry pose ([`Pose::of_geom`] with the shape's offset).
fn field_pose<B: Backend>(k: &Kin<B>, t: &FieldTable, g0: usize) -> Pose<B> {
    Pose::of_geom(&k.geom_xpos[g0], &k.geom_xquat[g0], &t.offset)
}

/// The conjugate of a quaternion (its inverse for a unit one, exactly).
fn conj<B: Backend>(q: &Q4<B>) -> Q4<B> {
    [q[0].clone(), -&q[1], -&q[2], -&q[3]]
}

/// One contact slot per world.
struct Slot<B: Backend> {
    found: M<B>,
    point: V3<B>,
    normal: V3<B>,
    gap: S<B>,
}

/// The candidates of the pair `pair` = (height field `g0`, line-contact cylinder `g1` of
/// `radius`, `half_length`, m) with detection distance `detect` (m): [`SLOTS`] candidates
/// appended to `out` in the cpu engine's order, the flagged worlds to `outside` (module doc).
#[allow(clippy::too_many_arguments)]
pub fn wheel_candidates<B: Backend>(
    fields: &mut Fields<'_, B>,
    k: &Kin<B>,
    pair: usize,
    (g0, g1): (usize, usize),
    (radius, half_length): (f64, f64),
    (detect, detect_max): (&S<B>, f64),
    out: &mut Vec<Candidate<B>>,
    outside: &mut Vec<Outside<B>>,
) {
    let probe = like(&k.geom_xpos[g1]);
    let device = probe.device();
    let worlds = probe.dims()[0];
    let (t, table) = fields.get(g0, &device);
    let field = field_pose(k, t, g0);
    let cyl = Pose::of_geom(
        &k.geom_xpos[g1],
        &k.geom_xquat[g1],
        &crate::collision::shapes::y_to_z(),
    );
    // The wheel's AABB in the field's parry frame (the cylinder's axis is its local y).
    let pos12 = field.inv_mul(&cyl);
    let rot = qmat(&pos12.r);
    let half: V3<B> = std::array::from_fn(|a| {
        let across = safe_sqrt(&(&(&rot[a][0] * &rot[a][0]) + &(&rot[a][2] * &rot[a][2])));
        &(&across * radius) + &(rot[a][1].abs() * half_length)
    });
    let size = window_size(t, radius.hypot(half_length), detect_max);
    let win = window(t, &pos12.t, &half, &detect.max_c(0.0), size);
    let g = gather(t, &table, &win, size, worlds, &device);
    let visited = g
        .active
        .and(&g.col(col::CELL_MAX).ge(&g.rep(&win.bottom)))
        .and(&g.col(col::VALID).gt(&S::C(0.5)));
    let plane = Pose {
        t: std::array::from_fn(|a| g.col(col::POS + a)),
        r: std::array::from_fn(|a| g.col(col::QUAT + a)),
    };
    let normal: V3<B> = std::array::from_fn(|a| g.col(col::NORMAL + a));
    let cyl_rep = Pose {
        t: std::array::from_fn(|a| g.rep(&cyl.t[a])),
        r: std::array::from_fn(|a| g.rep(&cyl.r[a])),
    };
    let ends = plane_cylinder_manifold(
        &plane,
        &normal,
        &cyl_rep,
        (radius, half_length),
        &g.rep(detect),
    );
    let kept: Vec<M<B>> = ends
        .iter()
        .map(|e| {
            e.found
                .and(&over_triangle(&g, k, g0, &e.point, 0.0))
                .and(&visited)
        })
        .collect();
    outside.push(Outside {
        pair,
        uncollided: false,
        worlds: win.overflow.clone(),
        reason: "the height field cells under a wheel exceed the batched window",
    });
    let (slots, count) = compact(&g, &kept, &ends, &device);
    outside.push(Outside {
        pair,
        uncollided: false,
        worlds: count.gt(&S::C(SLOTS as f64)),
        reason: "a wheel has more than 6 contact points on the height field (the batched engine keeps 6)",
    });
    merge(pair, slots, t.may_duplicate, out);
}

/// The cpu engine's `over_triangle` per entry of `g`: whether `point` (m, world, one per
/// entry) lies over the entry's triangle in the field's geom frame (`gquat⁻¹ (point − gpos)`,
/// nalgebra's rotation), each edge's test `s · cross ≥ tol − slack` (`slack` in m², 0 for the
/// cpu engine's test).
fn over_triangle<B: Backend>(
    g: &Gathered<B>,
    k: &Kin<B>,
    g0: usize,
    point: &V3<B>,
    slack: f64,
) -> M<B> {
    let (gpos, gquat) = (&k.geom_xpos[g0], &k.geom_xquat[g0]);
    let p = qrot(&conj(gquat), &sub3(point, gpos));
    let sign = g.col(col::SIGN);
    let tol = g.col(col::TOL) - slack;
    (0..3).fold(M::C(true), |acc, kk| {
        let (ax, ay) = (g.col(col::VERT + 2 * kk), g.col(col::VERT + 2 * kk + 1));
        let (ex, ey) = (g.col(col::EDGE + 2 * kk), g.col(col::EDGE + 2 * kk + 1));
        let cross = &(&ex * &(&p[1] - &ay)) - &(&ey * &(&p[0] - &ax));
        acc.and(&(&sign * &cross).ge(&tol))
    })
}

/// A mask as a `(n)` bool tensor.
fn mask_tensor<B: Backend>(m: &M<B>, n: usize, device: &B::Device) -> Tensor<B, 1, Bool> {
    match m {
        M::T(x) => x.clone(),
        M::C(b) => Tensor::<B, 1, Int>::full([n], i64::from(*b), device).equal_elem(1),
    }
}

/// The first [`SLOTS`] kept ends per world (`kept[e]`: end `e` of each entry is kept), in the
/// cpu engine's order (slot by slot, each slot's ends in parry's order), and the number of
/// kept ends per world.
fn compact<B: Backend>(
    g: &Gathered<B>,
    kept: &[M<B>],
    ends: &[End<B>],
    device: &B::Device,
) -> (Vec<Slot<B>>, S<B>) {
    let (w, s, m) = (g.worlds, g.slots, ends.len());
    let n = w * s;
    let probe = Tensor::<B, 1>::zeros([n], device);
    let fields = |e: &End<B>| {
        let parts: Vec<Tensor<B, 2>> = e
            .point
            .iter()
            .chain(e.normal.iter())
            .chain(std::iter::once(&e.gap))
            .map(|x| x.tensor_like(&probe).reshape([w, s]))
            .collect();
        Tensor::stack::<3>(parts, 2)
    };
    // (w, s, m, 7) → (w, m s, 7): entry m slot + end.
    let all = Tensor::stack::<4>(ends.iter().map(fields).collect(), 2).reshape([w, m * s, 7]);
    let found = Tensor::stack::<3>(
        kept.iter()
            .map(|f| mask_tensor(f, n, device).reshape([w, s]))
            .collect(),
        2,
    )
    .reshape([w, m * s]);
    let rank = found.clone().int().cumsum(1);
    let count = rank.clone().narrow(1, m * s - 1, 1).reshape([w]).float();
    let slots = (0..SLOTS)
        .map(|k| {
            let sel = found
                .clone()
                .bool_and(rank.clone().equal_elem((k + 1) as i64));
            let keep_out = sel.bool_not().unsqueeze_dim::<3>(2).repeat_dim(2, 7);
            // One entry per world is selected: the sum of it and zeros is it, exactly.
            let picked = all
                .clone()
                .mask_fill(keep_out, 0.0)
                .sum_dim(1)
                .reshape([w, 7]);
            let get = |c: usize| S::T(picked.clone().narrow(1, c, 1).reshape([w]));
            Slot {
                found: M::T(count.clone().greater_elem(k as f64)),
                point: [get(0), get(1), get(2)],
                normal: [get(3), get(4), get(5)],
                gap: get(6),
            }
        })
        .collect();
    (slots, S::T(count))
}

/// The cpu engine's duplicate test (if `may_duplicate`) and line-contact merge over the slots
/// (module doc, step 4); [`SLOTS`] candidates of `pair` appended to `out`.
fn merge<B: Backend>(
    pair: usize,
    slots: Vec<Slot<B>>,
    may_duplicate: bool,
    out: &mut Vec<Candidate<B>>,
) {
    let mut gaps: Vec<S<B>> = slots.iter().map(|s| s.gap.clone()).collect();
    let mut kept: Vec<M<B>> = Vec::with_capacity(slots.len());
    for b in 0..slots.len() {
        let mut matched = M::C(false);
        if may_duplicate {
            for a in 0..b {
                let d = sub3(&slots[a].point, &slots[b].point);
                let close = safe_sqrt(&dot3(&d, &d)).le(&S::C(DUPLICATE_DISTANCE));
                let parallel =
                    dot3(&slots[a].normal, &slots[b].normal).gt(&S::C(1.0 - DUPLICATE_COS));
                // The first earlier kept contact that matches takes the smaller gap.
                let dup = kept[a]
                    .and(&matched.not())
                    .and(&slots[b].found)
                    .and(&close)
                    .and(&parallel);
                let lower = dup.and(&slots[b].gap.lt(&gaps[a]));
                gaps[a] = lower.select(&slots[b].gap, &gaps[a]);
                matched = matched.or(&dup);
            }
        }
        kept.push(slots[b].found.and(&matched.not()));
    }
    // The merge (`merge_line_contact`): slot 0 is the first kept contact where any is.
    let n0 = &slots[0].normal;
    let mut count = S::C(0.0);
    let mut sum: V3<B> = zero3();
    let mut same = M::C(true);
    let (mut best_gap, mut best_n) = (gaps[0].clone(), n0.clone());
    for (kk, s) in slots.iter().enumerate() {
        let on = &kept[kk];
        count = count + on.indicator();
        sum = std::array::from_fn(|i| &sum[i] + &on.select(&s.point[i], &S::C(0.0)));
        if kk > 0 {
            let differs = (S::C(1.0) - dot3(&s.normal, n0)).gt(&S::C(SAME_NORMAL));
            same = same.and(&on.and(&differs).not());
            // `min_by` on the gaps: the first of equals.
            let deeper = on.and(&gaps[kk].lt(&best_gap));
            best_gap = deeper.select(&gaps[kk], &best_gap);
            best_n = std::array::from_fn(|i| deeper.select(&s.normal[i], &best_n[i]));
        }
    }
    let merged = count.gt(&S::C(1.5)).and(&same);
    let divisor = merged.select(&count, &S::C(1.0));
    for (kk, s) in slots.into_iter().enumerate() {
        if kk == 0 {
            out.push(Candidate {
                pair,
                found: kept[0].clone(),
                point: std::array::from_fn(|i| merged.select(&(&sum[i] / &divisor), &s.point[i])),
                normal: std::array::from_fn(|i| merged.select(&best_n[i], &s.normal[i])),
                gap: merged.select(&best_gap, &gaps[0]),
            });
        } else {
            out.push(Candidate {
                pair,
                found: kept[kk].and(&merged.not()),
                point: s.point,
                normal: s.normal,
                gap: gaps[kk].clone(),
            });
        }
    }
}

/// The worlds where the cpu engine could find a contact between height field `g0` and box
/// `g1` (half-extents `half`, m) within `detect` (m), which the batched engine does not
/// collide: these worlds leave the class. The cpu engine collides the box with the plane of
/// every triangle parry visits for the box's AABB (MuJoCo's `mjc_PlaneBox`: a corner at
/// signed distance `dist ≤ detect` gives a contact at `corner − n dist / 2`, the first four of
/// them) and keeps the contacts over their triangle. The flag is a superset: parry's range
/// and cull for the box's AABB (parry's cuboid AABB `Σ_j |R_aj| h_j`, widened by 1e-9 m), and
/// any of the eight corners within `detect + 1e-9` m of a visited triangle's plane whose
/// contact point lies over the triangle with a slack of 1e-10 m² (so round-off cannot hide a
/// contact).
pub fn box_in_reach<B: Backend>(
    fields: &mut Fields<'_, B>,
    k: &Kin<B>,
    (g0, g1): (usize, usize),
    half: &Vec3,
    (detect, detect_max): (&S<B>, f64),
) -> M<B> {
    const WIDEN: f64 = 1e-9;
    let probe = like(&k.geom_xpos[g1]);
    let device = probe.device();
    let worlds = probe.dims()[0];
    let (t, table) = fields.get(g0, &device);
    let field = field_pose(k, t, g0);
    let bx = Pose::of_geom(&k.geom_xpos[g1], &k.geom_xquat[g1], &Quat::identity());
    let pos12 = field.inv_mul(&bx);
    let rot = qmat(&pos12.r);
    let h = [half.x, half.y, half.z];
    let ext: V3<B> =
        std::array::from_fn(|a| (0..3).fold(S::C(WIDEN), |acc, j| acc + rot[a][j].abs() * h[j]));
    let size = window_size(t, half.norm() + WIDEN, detect_max);
    let win = window(t, &pos12.t, &ext, &detect.max_c(0.0), size);
    let g = gather(t, &table, &win, size, worlds, &device);
    let visited = g
        .active
        .and(&g.col(col::CELL_MAX).ge(&g.rep(&win.bottom)))
        .and(&g.col(col::VALID).gt(&S::C(0.5)));
    let brot = qmat(&k.geom_xquat[g1]);
    let pos: V3<B> = std::array::from_fn(|a| g.col(col::POS + a));
    let n: V3<B> = std::array::from_fn(|a| g.col(col::NORMAL + a));
    let mut touch = M::C(false);
    for i in 0..8 {
        let c = [
            S::C(if i & 1 != 0 { h[0] } else { -h[0] }),
            S::C(if i & 2 != 0 { h[1] } else { -h[1] }),
            S::C(if i & 4 != 0 { h[2] } else { -h[2] }),
        ];
        let corner: V3<B> =
            std::array::from_fn(|a| g.rep(&(&k.geom_xpos[g1][a] + &dot3(&brot[a], &c))));
        let dist = dot3(&sub3(&corner, &pos), &n);
        let near = dist.le(&g.rep(&(detect + WIDEN)));
        let mid: V3<B> = std::array::from_fn(|a| &corner[a] - &(&n[a] * &(&dist * 0.5)));
        touch = touch.or(&near.and(&over_triangle(&g, k, g0, &mid, 1e-10)));
    }
    g.any(&touch.and(&visited)).or(&win.overflow)
}
