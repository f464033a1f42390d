//! Capsule–box contacts as MuJoCo computes them (`mjc_CapsuleBox` / `mjraw_CapsuleBox`,
//! `engine_collision_box.c`, issue 18): at most two sphere–box contacts
//! ([`super::primitive_pairs::sphere_box`]) of spheres of the capsule's radius centred on its
//! segment, the first at the segment point closest to the box, the second where the segment
//! leaves the box's face or edge that the first point lies against.
//!
//! # The procedure
//!
//! Everything in the box's frame (centre at the origin, half-extents `e`): the capsule's centre
//! `c`, its half-axis `h = l a` (a the unit axis, l the half-length); segment points
//! `c + t h`, `t ∈ [−1, 1]`.
//!
//! 1. **Closest feature.** Candidates, the smallest squared distance winning (`best`, started
//!    at MuJoCo's `bestdistmax = margin + 2 (r + l + e₀ + e₁ + e₂)`, a length compared with
//!    squared distances, kept as MuJoCo has it):
//!    * each end `t = ∓1` against the box when at most one coordinate lies outside the slab
//!      (over a face, or inside): the distance to its clamp. Ties keep the first (`t = −1`).
//!    * each of the 12 edges (axis j, the 4 edges at the other two coordinates' signs), by the
//!      closest points of two segments: the edge `x₁ ∈ [−1, 1]` along `e_j`, the capsule
//!      `x₂ ∈ [−1, 1]`, from the unconstrained minimizer clamped first on the edge then on the
//!      capsule (re-projecting the other each time); parallel pairs (|det| < 1e-15) are
//!      skipped. An edge must beat the best by more than 1e-15 (MuJoCo's tolerance for an axis
//!      numerically parallel to the box).
//! 2. **Second point** `t₂ = t₁ + s` (none when the first point alone can touch):
//!    * *an end over a face* (axis f): `s` = the smallest positive parameter, from this end
//!      towards the other, at which the segment crosses a slab plane of the other two axes (2,
//!      the other end, if none): the farthest segment point still over the face.
//!    * *a box corner* (an edge's end closest): with the octant bits `d` of the half-axis and
//!      `k` of the corner, `d ⊕ k` = 0 or 7 (pointing at or away from the corner): none.
//!      Otherwise the one odd axis `ax` (bit pattern with one set bit, or its complement with
//!      the direction reversed): if `a_ax² > ½` the capsule runs along the edge on `ax`, and
//!      `s` = the distance to the segment's end on that side, at most the edge's length
//!      `2 e_ax / |h_ax|`; otherwise it lies over a face and `s` goes the other way, at most
//!      the face's extents along the other two axes.
//!    * *the middle of an edge* (axis `ax`): with `d ⊕ k` restricted to the other two axes,
//!      a pattern with one set bit is a crossing (X), else a T: none. The face the capsule is
//!      flatter against picks `ax2`; `s` = the distance to the segment's end on the crossing
//!      side, at most the face's width `2 e_ax2 / |h_ax2|` and the edge's remaining length
//!      `e_ax (1 ∓ x₁) / |h_ax|`.
//! 3. Sphere–box at `c + t₁ h`, then at `c + t₂ h`, each kept within `margin`.
//!
//! The arithmetic follows MuJoCo's order where it decides a branch or a value; the result is
//! checked against MuJoCo 4.0.1 trajectories (`scenarios/tests/soft_convex_general.rs`), not
//! bit for bit. Nothing is copied from MuJoCo's source.

use super::plane_primitives::{dot3, mul_mat_vec3, Candidate};
use super::primitive_pairs::{add3, mul_mat_t_vec3, scl3, sphere_box, sub3, z_axis, Placed, V3};
use crate::collision::frame::MIN_VAL as MINVAL;
use crate::model::Vec3;

/// Which feature of the box the capsule's segment is closest to (step 1 of the module doc).
#[derive(Debug, Clone, Copy)]
enum Closest {
    /// An end (`t` = ±1) over or inside the box; `face`: the axis whose slab it lies outside,
    /// `None` inside the box.
    End { t: f64, face: Option<usize> },
    /// Edge `edge` (its axis) at the corner bits `corner` of its closest end point, `on_edge`:
    /// 0 or 2 where the closest box point is an end of the edge (a corner), 1 in its middle;
    /// `x1` the parameter along the edge.
    Edge {
        edge: usize,
        corner: usize,
        on_edge: u8,
        x1: f64,
    },
}

/// `mjc_CapsuleBox` (module doc): capsule `c` (radius `r`, half-length `l`, axis its local z)
/// against box `b` (half-extents `half`), contacts within `margin` (m). Each candidate is
/// `(point midway between the surfaces (m, world), unit normal from the capsule into the box,
/// signed distance (m))`; 0, 1 or 2 of them.
pub fn capsule_box(
    c: &Placed,
    r: f64,
    l: f64,
    b: &Placed,
    half: &Vec3,
    margin: f64,
) -> Vec<Candidate> {
    let e = [half.x, half.y, half.z];
    let pos = mul_mat_t_vec3(&b.mat, &sub3(&c.pos, &b.pos));
    let axis = mul_mat_t_vec3(&b.mat, &z_axis(&c.mat));
    let ha = scl3(&axis, l);
    let octant = |v: &V3| {
        (0..3)
            .filter(|&k| v[k] > 0.0)
            .map(|k| 1usize << k)
            .sum::<usize>()
    };
    let axisdir = octant(&ha);

    let mut best = margin + 2.0 * (r + l + e[0] + e[1] + e[2]);
    let mut t1 = 0.0;
    let mut closest = None;
    // Ends over a face (or inside the box).
    for t in [-1.0, 1.0] {
        let p = add3(&pos, &scl3(&ha, t));
        let mut clamped = p;
        let (mut outside, mut face) = (0, None);
        for j in 0..3 {
            if p[j] < -e[j] {
                clamped[j] = -e[j];
            } else if p[j] > e[j] {
                clamped[j] = e[j];
            } else {
                continue;
            }
            outside += 1;
            face = Some(j);
        }
        if outside > 1 {
            continue;
        }
        let d = sub3(&clamped, &p);
        let d2 = dot3(&d, &d);
        if d2 < best {
            best = d2;
            t1 = t;
            closest = Some(Closest::End { t, face });
        }
    }
    // The twelve edges.
    for j in 0..3 {
        for corner in (0..8usize).filter(|i| i & (1 << j) == 0) {
            let mut mid: V3 =
                std::array::from_fn(|k| if corner & (1 << k) != 0 { e[k] } else { -e[k] });
            mid[j] = 0.0;
            let dif = sub3(&mid, &pos);
            let ma = e[j] * e[j];
            let mb = -e[j] * ha[j];
            let mc = l * l;
            let u = -e[j] * dif[j];
            let v = dot3(&ha, &dif);
            let det = ma * mc - mb * mb;
            if det.abs() < MINVAL {
                continue;
            }
            let idet = 1.0 / det;
            let mut x1 = (mc * u - mb * v) * idet;
            let mut x2 = (ma * v - mb * u) * idet;
            // s1: where on the edge the closest point lies (0, 2 an end, 1 inside); the
            // capsule's own clamp decides nothing further.
            let mut s1 = 1u8;
            if x1 > 1.0 {
                (x1, s1, x2) = (1.0, 2, (v - mb) * (1.0 / mc));
            } else if x1 < -1.0 {
                (x1, s1, x2) = (-1.0, 0, (v + mb) * (1.0 / mc));
            }
            // Re-projected onto the edge after the capsule's clamp: `s1` changes only where
            // the edge clamps again (MuJoCo keeps the first clamp's flag otherwise).
            let reclamp = |x1: f64, s1: u8| -> (f64, u8) {
                if x1 > 1.0 {
                    (1.0, 2)
                } else if x1 < -1.0 {
                    (-1.0, 0)
                } else {
                    (x1, s1)
                }
            };
            if x2 > 1.0 {
                x2 = 1.0;
                (x1, s1) = reclamp((u - mb) * (1.0 / ma), s1);
            } else if x2 < -1.0 {
                x2 = -1.0;
                (x1, s1) = reclamp((u + mb) * (1.0 / ma), s1);
            }
            let mut d = add3(&dif, &scl3(&ha, -x2));
            d[j] += e[j] * x1;
            let d2 = dot3(&d, &d);
            if d2 < best - MINVAL {
                best = d2;
                t1 = x2;
                closest = Some(Closest::Edge {
                    edge: j,
                    // The closest corner: the edge's upper end when the box point is clamped
                    // there.
                    corner: corner + (1 << j) * usize::from(s1 == 2),
                    on_edge: s1,
                    x1,
                });
            }
        }
    }
    let Some(closest) = closest else {
        return Vec::new();
    };
    let second = second_offset(closest, t1, &e, &axis, &ha, axisdir, &pos);
    let sphere_at = |t: f64| Placed {
        pos: add3(&mul_mat_vec3(&b.mat, &add3(&pos, &scl3(&ha, t))), &b.pos),
        mat: c.mat,
    };
    let mut out: Vec<Candidate> = sphere_box(&sphere_at(t1), r, b, half, margin)
        .into_iter()
        .collect();
    if let Some(s) = second {
        out.extend(sphere_box(&sphere_at(s + t1), r, b, half, margin));
    }
    out
}

/// `a ← b` where `b < a` (MuJoCo's `if (e1 < secondpos) secondpos = e1`: a NaN `b` is skipped).
fn lower(a: &mut f64, b: f64) {
    if b < *a {
        *a = b;
    }
}

/// The second sphere's offset `s` along the segment from the first (`t₁`), step 2 of the
/// module doc; `None` where the first point alone can touch.
fn second_offset(
    closest: Closest,
    t1: f64,
    e: &[f64; 3],
    axis: &V3,
    ha: &V3,
    axisdir: usize,
    pos: &V3,
) -> Option<f64> {
    match closest {
        Closest::Edge {
            corner, on_edge, ..
        } if on_edge != 1 => {
            let mut k = axisdir ^ corner;
            if k == 0 || k == 7 {
                return None;
            }
            let (mul, de, dp) = if matches!(k, 1 | 2 | 4) {
                (1.0, 1.0 - t1, 1.0 + t1)
            } else {
                k = 7 - k;
                (-1.0, 1.0 + t1, 1.0 - t1)
            };
            let ax = k.trailing_zeros() as usize;
            let (ax1, ax2) = ((ax + 1) % 3, (ax + 2) % 3);
            if axis[ax] * axis[ax] > 0.5 {
                // Along the edge on `ax`, at most to its other corner.
                let mut s = de;
                lower(&mut s, 2.0 * e[ax] / ha[ax].abs());
                Some(s * mul)
            } else {
                // Across the face, at most to its far sides.
                let mut s = dp;
                lower(&mut s, 2.0 * e[ax1] / ha[ax1].abs());
                lower(&mut s, 2.0 * e[ax2] / ha[ax2].abs());
                Some(-s * mul)
            }
        }
        Closest::Edge {
            edge, corner, x1, ..
        } => {
            let k = (axisdir ^ corner) & (7 - (1 << edge));
            if !matches!(k, 1 | 2 | 4) {
                return None;
            }
            let ax = edge;
            let (mut ax1, mut ax2) = ((ax + 1) % 3, (ax + 2) % 3);
            // The face the capsule is flatter against names the axes.
            if axis[ax1].abs() > axis[ax2].abs() {
                ax1 = ax2;
            }
            ax2 = 3 - ax - ax1;
            let (mul, mut s) = if k & (1 << ax2) != 0 {
                (1.0, 1.0 - t1)
            } else {
                (-1.0, 1.0 + t1)
            };
            lower(&mut s, 2.0 * e[ax2] / ha[ax2].abs());
            let rest = if (axisdir & (1 << ax) != 0) == (k & (1 << ax2) != 0) {
                1.0 - x1
            } else {
                1.0 + x1
            };
            lower(&mut s, e[ax] * rest / ha[ax].abs());
            Some(s * mul)
        }
        Closest::End { face: None, .. } => None,
        Closest::End { t, face: Some(f) } => {
            let mul = if t < 0.0 { 1.0 } else { -1.0 };
            let mut s = 2.0;
            // The closest end itself (t₁ = −mul), from which `s` runs towards the other.
            let start = add3(pos, &scl3(ha, -mul));
            for i in (0..3).filter(|&i| i != f) {
                for bound in [e[i], -e[i]] {
                    let x = (bound - start[i]) / ha[i] * mul;
                    if x > 0.0 && x < s {
                        s = x;
                    }
                }
            }
            Some(s * mul)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const I: [f64; 9] = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
    /// The capsule's axis (local z) along the world x: rotation +90° about y.
    const ALONG_X: [f64; 9] = [0.0, 0.0, 1.0, 0.0, 1.0, 0.0, -1.0, 0.0, 0.0];

    #[test]
    fn capsule_lying_on_a_face_touches_at_both_ends() {
        let b = Placed {
            pos: [0.0; 3],
            mat: I,
        };
        let half = Vec3::new(1.0, 1.0, 0.5);
        let c = Placed {
            pos: [0.2, -0.1, 0.59],
            mat: ALONG_X,
        };
        let out = capsule_box(&c, 0.1, 0.3, &b, &half, 0.0);
        assert_eq!(out.len(), 2, "{out:?}");
        for ((p, n, d), x) in out.iter().zip([-0.1, 0.5]) {
            assert!((d + 0.01).abs() < 1e-15 && (n + Vec3::z()).norm() < 1e-15);
            assert!((p - Vec3::new(x, -0.1, 0.495)).norm() < 1e-14, "{p}");
        }
    }

    #[test]
    fn capsule_over_a_face_edge_stops_at_the_edge() {
        // Lying along x on the top face, its +x end hanging 0.2 beyond the edge at x = 1:
        // the end over the face touches, and the second sphere sits on the edge (t where
        // x = 1), not at the hanging end.
        let b = Placed {
            pos: [0.0; 3],
            mat: I,
        };
        let half = Vec3::new(1.0, 1.0, 0.5);
        let c = Placed {
            pos: [0.9, 0.0, 0.59],
            mat: ALONG_X,
        };
        let mut out = capsule_box(&c, 0.1, 0.3, &b, &half, 0.0);
        assert_eq!(out.len(), 2, "{out:?}");
        // The end over the face and the edge are equally near (0.09 m): which is the first
        // contact depends on the last bit; the pair is the same.
        out.sort_by(|a, b| a.0.x.total_cmp(&b.0.x));
        assert!((out[0].0.x - 0.6).abs() < 1e-14 && (out[0].2 + 0.01).abs() < 1e-14);
        assert!((out[1].0.x - 1.0).abs() < 1e-14 && (out[1].2 + 0.01).abs() < 1e-14);
    }

    #[test]
    fn capsule_pointing_at_a_face_touches_once_and_far_away_never() {
        let b = Placed {
            pos: [0.0; 3],
            mat: I,
        };
        let half = Vec3::new(1.0, 1.0, 0.5);
        // Standing on the top face (axis z): its lower end, 5 mm deep.
        let c = Placed {
            pos: [0.1, 0.2, 0.5 + 0.3 + 0.095],
            mat: I,
        };
        let out = capsule_box(&c, 0.1, 0.3, &b, &half, 0.0);
        assert_eq!(out.len(), 1, "{out:?}");
        assert!((out[0].2 + 0.005).abs() < 1e-14);
        let far = Placed {
            pos: [0.0, 0.0, 3.0],
            mat: ALONG_X,
        };
        assert!(capsule_box(&far, 0.1, 0.3, &b, &half, 0.0).is_empty());
    }
}
