//! Batched plane–box contact: MuJoCo's `mjc_PlaneBox` (as [`crate::collision::plane_primitives`]
//! computes it) for every world, as four candidates instead of eight.
//!
//! `mjc_PlaneBox` walks the eight corners `i` (bit 0, 1, 2: the sign of x, y, z in the box
//! frame) and keeps those with `cdist + ldist ≤ detect` and `ldist ≤ 0` (`ldist = n · R c_i`),
//! the first four in index order. A contact then costs about a hundred tensor operations (the
//! Jacobian, the law, the generalized force), so the batch carries four *slots*, slot `j` the
//! `j`-th kept corner of each world, found or not, instead of eight corners of which at most
//! four are ever kept:
//!
//! 1. the eight `ldist` (only the rows of `R c_i` that `n` does not zero) decide, per world,
//!    which corners are kept, in boolean tensors (cheap on every backend);
//! 2. each slot's corner bits become signs `±1` per world, and the slot's corner is
//!    recomputed with them.
//!
//! Every number is the cpu engine's to the last bit: with `A = r₀ hx`, `B = r₁ hy`,
//! `C = r₂ hz` (one row of R), corner `i`'s component is `(±A ± B) ± C` in the cpu's order,
//! and negation (or a product with ±1) commutes with rounding. The slots come in the cpu's
//! contact order (index order), so sums over contacts keep its order too.

use burn_tensor::backend::Backend;

use super::collision::Candidate;
use super::scalar::{M, S};
use super::spatial::{add3, dot3, scale3, sub3, M3, V3};
use crate::model::Vec3;

/// Most corners `mjc_PlaneBox` keeps.
pub const MAX_CORNERS: usize = 4;

/// One row of `R diag(half)`: `(A, B, C) = (r₀ hx, r₁ hy, r₂ hz)`.
type Row<B> = [S<B>; 3];

/// The component of corner `i` for one row: `(sx A + sy B) + sz C` as `±(A ± B) ± C`.
fn corner_row<B: Backend>(r: &Row<B>, p: &S<B>, q: &S<B>, i: usize) -> S<B> {
    let (x, y, z) = (i & 1 != 0, i & 2 != 0, i & 4 != 0);
    // sx A + sy B: (+, +) p, (+, −) q, (−, +) −q, (−, −) −p.
    let (ab, negated) = match (x, y) {
        (true, true) => (p, false),
        (true, false) => (q, false),
        (false, true) => (q, true),
        (false, false) => (p, true),
    };
    // (−u) + c = −(u − c) and (−u) − c = −(u + c).
    match (negated, z) {
        (false, true) => ab + &r[2],
        (false, false) => ab - &r[2],
        (true, true) => -(ab - &r[2]),
        (true, false) => -(ab + &r[2]),
    }
}

/// The four slot candidates of a plane (normal `n`, a point `pp` on it) against a box (centre
/// `gpos`, rotation `rot`, half sizes `half`, m) with detection distance `detect` (m),
/// appended to `out` for pair `pair`.
#[allow(clippy::too_many_arguments)]
pub fn candidates<B: Backend>(
    pair: usize,
    n: &V3<B>,
    pp: &V3<B>,
    gpos: &V3<B>,
    rot: &M3<B>,
    half: &Vec3,
    detect: &S<B>,
    out: &mut Vec<Candidate<B>>,
) {
    let cdist = dot3(&sub3(gpos, pp), n);
    let rows: [Row<B>; 3] = std::array::from_fn(|k| {
        [
            &rot[k][0] * half.x,
            &rot[k][1] * half.y,
            &rot[k][2] * half.z,
        ]
    });
    // 1. Which corners are kept. Rows that n multiplies by a constant zero are never formed.
    let needed: [bool; 3] = std::array::from_fn(|k| n[k].constant() != Some(0.0));
    let pq: [(S<B>, S<B>); 3] = std::array::from_fn(|k| {
        if needed[k] {
            let r = &rows[k];
            (&r[0] + &r[1], &r[0] - &r[1])
        } else {
            (S::zero(), S::zero())
        }
    });
    // exactly[j]: exactly j corners kept so far (j < 4); room: fewer than four.
    let mut exactly: [M<B>; MAX_CORNERS] = std::array::from_fn(|j| M::C(j == 0));
    let mut room = M::C(true);
    // slot_of[j][i]: corner i is the j-th kept.
    let mut slot_of: Vec<Vec<M<B>>> = vec![Vec::new(); MAX_CORNERS];
    for i in 0..8 {
        let v: V3<B> = std::array::from_fn(|k| {
            if needed[k] {
                corner_row(&rows[k], &pq[k].0, &pq[k].1, i)
            } else {
                S::zero()
            }
        });
        let ldist = dot3(n, &v);
        let dist = &cdist + &ldist;
        let valid = dist.gt(detect).or(&ldist.gt(&S::C(0.0))).not();
        let kept = valid.and(&room);
        for (j, s) in slot_of.iter_mut().enumerate() {
            s.push(kept.and(&exactly[j]));
        }
        let skipped = kept.not();
        room = room.and(&exactly[MAX_CORNERS - 1].and(&kept).not());
        exactly = std::array::from_fn(|j| {
            let stay = exactly[j].and(&skipped);
            if j == 0 {
                stay
            } else {
                stay.or(&exactly[j - 1].and(&kept))
            }
        });
    }
    // 2. Each slot's corner, recomputed from its bits.
    for slot in &slot_of {
        let any = |bit: Option<usize>| {
            slot.iter()
                .enumerate()
                .filter(|(i, _)| bit.is_none_or(|b| i & (1 << b) != 0))
                .fold(M::C(false), |acc, (_, m)| acc.or(m))
        };
        let found = any(None);
        // ±1 per world: bit set → +1.
        let sign: [S<B>; 3] = std::array::from_fn(|b| any(Some(b)).indicator() * 2.0 - 1.0);
        let v: V3<B> = std::array::from_fn(|k| {
            let r = &rows[k];
            (&r[0] * &sign[0] + &r[1] * &sign[1]) + &r[2] * &sign[2]
        });
        let dist = &cdist + &dot3(n, &v);
        let corner = add3(&v, gpos);
        let s = -(&dist / 2.0);
        out.push(Candidate {
            pair,
            found,
            point: add3(&corner, &scale3(n, &s)),
            normal: n.clone(),
            gap: dist,
        });
    }
}
