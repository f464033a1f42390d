//! MuJoCo's constraint rows per world, as the cpu engine assembles them
//! ([`crate::soft_convex::rows::assemble`]; spec §A1–§A4; `mj_makeConstraint`,
//! `mj_makeImpedance`, `mj_referenceConstraint`), over the batched scene class: friction loss
//! and limits of hinge and slide joints, and contacts of a plane with spheres, capsules and
//! boxes and of a sphere with a box (no equality constraints:
//! [`crate::engine::batched_support`]).
//!
//! The row *slots* are fixed when the model is compiled, in MuJoCo's order (friction loss,
//! limits lower before upper, contacts in pair and candidate order); a slot's `active` mask says
//! in which worlds it is a row (a limit within its margin, a contact candidate found and with
//! `dist < margin`). Impedance, R, D and aref are the cpu engine's formulas in its order of
//! operations ([`crate::soft_convex::impedance`]); constants (solref, inverse weights at
//! qpos0, friction) stay on the host.

use burn_tensor::backend::Backend;

use super::cost::{Kind, Row};
use crate::batched::collision::Candidate;
use crate::batched::dynamics::dot_dynamic;
use crate::batched::kinematics::Kin;
use crate::batched::scalar::{M, S};
use crate::batched::spatial::{add3, ang, column, cross3, dot3, lin, qmat, sub3, V3};
use crate::compiled::CompiledModel;
use crate::geometry::GeomShape;
use crate::kinematics::body_dofs;
use crate::model::{Cone, JointKind, Model};
use crate::soft_convex::impedance::{clamp_solimp, reference_coefficients, MINMU, MINVAL};
use crate::soft_convex::invweight::InvWeights;

/// What the rows are built with (the cpu engine's `RowSettings` without the physical mapping,
/// which the batched engine refuses).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// Friction cone.
    pub cone: Cone,
    /// impratio.
    pub impratio: f64,
    /// Timestep (s).
    pub h: f64,
    /// Raise solref time constants to at least 2h.
    pub refsafe: bool,
    /// The model's disable flags.
    pub disable: crate::model::DisableFlags,
}

/// One contact's rows, per world, for contact records and the signorini blocks.
pub struct ContactSlot<B: Backend> {
    /// The pair's geoms.
    pub geoms: [usize; 2],
    /// First row.
    pub first: usize,
    /// condim.
    pub dim: usize,
    /// Whether its rows are pyramid edges.
    pub pyramidal: bool,
    /// Friction (clamped to MuJoCo's minimum).
    pub friction: [f64; 5],
    /// Whether it is a contact (with rows) in each world.
    pub active: M<B>,
    /// Contact point (m, world).
    pub point: V3<B>,
    /// Frame rows `(n, t1, t2)` (world).
    pub frame: [V3<B>; 3],
    /// Signed distance (m).
    pub gap: S<B>,
    /// The frame Jacobian rows `(dim × nv)`: relative velocity components at the point.
    pub frame_jacobian: Vec<Vec<S<B>>>,
}

/// The rows of one step.
pub struct Rows<B: Backend> {
    /// Row slots in MuJoCo's order.
    pub rows: Vec<Row<B>>,
    /// The contact slots.
    pub contacts: Vec<ContactSlot<B>>,
    /// Whether any row is active in each world.
    pub any: M<B>,
}

/// `mju_normalize3` per world: `v / ‖v‖` (as a product with the reciprocal), `(1, 0, 0)`
/// where ‖v‖ < 1e-15.
fn normalize3<B: Backend>(v: &V3<B>) -> V3<B> {
    // √ with a finite derivative at 0 (an upright capsule's axis hint is parallel to the
    // normal, so the hint's orthogonal part is exactly zero).
    let norm =
        super::cost::safe_sqrt(&(&(&(&v[0] * &v[0]) + &(&v[1] * &v[1])) + &(&v[2] * &v[2]))).0;
    let small = norm.lt(&S::C(1e-15));
    let inv = S::C(1.0) / &small.select(&S::C(1.0), &norm);
    std::array::from_fn(|i| small.select(&S::C(if i == 0 { 1.0 } else { 0.0 }), &(&v[i] * &inv)))
}

/// The contact frame of `normal` with an optional first-tangent hint, as
/// [`crate::collision::contact_frame_with_tangent`] (MuJoCo's `mju_makeFrame`) per world.
pub fn contact_frame<B: Backend>(normal: &V3<B>, hint: Option<&V3<B>>) -> [V3<B>; 3] {
    let x = normalize3(normal);
    let default_y = {
        let mid = x[1].lt(&S::C(0.5)).and(&x[1].gt(&S::C(-0.5)));
        [
            S::C(0.0),
            mid.select(&S::C(1.0), &S::C(0.0)),
            mid.select(&S::C(0.0), &S::C(1.0)),
        ]
    };
    let y0 = match hint {
        Some(t) => {
            let use_hint = dot3(t, t).ge(&S::C(0.25));
            std::array::from_fn(|i| use_hint.select(&t[i], &default_y[i]))
        }
        None => default_y,
    };
    let d = dot3(&x, &y0);
    let y = normalize3(&std::array::from_fn(|i| &y0[i] - &(&x[i] * &d)));
    let z = [
        &(&x[1] * &y[2]) - &(&x[2] * &y[1]),
        &(&x[2] * &y[0]) - &(&x[0] * &y[2]),
        &(&x[0] * &y[1]) - &(&x[1] * &y[0]),
    ];
    [x, y, z]
}

/// MuJoCo's impedance `d(pos − margin)` per world ([`crate::soft_convex::impedance::impedance`]).
pub fn impedance<B: Backend>(solimp: &[f64; 5], pos: &S<B>, margin: f64) -> S<B> {
    let [d0, dmax, width, mid, p] = clamp_solimp(solimp);
    if d0 == dmax || width <= MINVAL {
        return S::C(0.5 * (d0 + dmax));
    }
    let x = (pos - margin).abs() / width;
    let far = x.ge(&S::C(1.0));
    let at_zero = x.eq_c(0.0);
    if p == 1.0 {
        let y = x.clone();
        return far.select(
            &S::C(dmax),
            &at_zero.select(&S::C(d0), &(&(&y * (dmax - d0)) + d0)),
        );
    }
    // The branches' powers see x only where 0 < x < 1 (elsewhere `mid`, finite both ways).
    let xs = far.or(&at_zero).select(&S::C(mid), &x);
    let low = xs.powf_c(p) / mid.powf(p - 1.0);
    let high = S::C(1.0) - (S::C(1.0) - &xs).powf_c(p) / (1.0 - mid).powf(p - 1.0);
    let y = xs.le(&S::C(mid)).select(&low, &high);
    far.select(
        &S::C(dmax),
        &at_zero.select(&S::C(d0), &(&(&y * (dmax - d0)) + d0)),
    )
}

/// R = max((1 − d)/d · diag, MINVAL).
fn regularizer<B: Backend>(d: &S<B>, diag: f64) -> S<B> {
    (&(&(S::C(1.0) - d) / d) * diag).max_c(MINVAL)
}

/// A row before its impedance: Jacobian, velocity `J v`, position and margin of its reference
/// acceleration, where its impedance is evaluated, its parameters.
struct Raw<B: Backend> {
    jac: Vec<S<B>>,
    vel: S<B>,
    pos: S<B>,
    margin: f64,
    imp_at: (S<B>, f64),
    solref: [f64; 2],
    solimp: [f64; 5],
    no_stiffness: bool,
    diag: f64,
    r_override: Option<S<B>>,
    kind: Kind,
    mu: S<B>,
    active: M<B>,
}

/// Per dof, whether it moves each body `(nbody × nv)` (the dofs of the body's chain).
pub fn moved_by(model: &Model) -> Vec<Vec<bool>> {
    (0..model.bodies.len())
        .map(|body| {
            let mut m = vec![false; model.nv];
            for d in body_dofs(model, body) {
                m[d] = true;
            }
            m
        })
        .collect()
}

/// The contact Jacobian rows `(dim × nv)` at `point` (m, world) in the frame rows `frame`
/// `(n, t1, t2)` for bodies `(b0, b1)`, MuJoCo's `mj_contactJacobian` as the cpu engine's
/// [`crate::constraint::contact_rows`]: the point Jacobians of the two bodies
/// (`v_O + ω × p` per dof moving the body, `moved` from [`moved_by`]), second minus first;
/// rows 0–2 the frame rows on the linear part, rows 3–5 (torsional, rolling) on the angular
/// part, each `frame_row · column` summed left to right. Units: m/s (rad/s for rows 3–5) per
/// unit dof velocity.
pub fn frame_jacobian<B: Backend>(
    k: &Kin<B>,
    moved: &[Vec<bool>],
    (b0, b1): (usize, usize),
    point: &V3<B>,
    frame: &[V3<B>; 3],
    dim: usize,
) -> Vec<Vec<S<B>>> {
    let nv = moved[0].len();
    let point_jac = |body: usize, j: usize| -> (V3<B>, V3<B>) {
        if moved[body][j] {
            let sd = &k.cdof[j];
            (add3(&lin(sd), &cross3(&ang(sd), point)), ang(sd))
        } else {
            (
                [S::zero(), S::zero(), S::zero()],
                [S::zero(), S::zero(), S::zero()],
            )
        }
    };
    let cols: Vec<(V3<B>, V3<B>)> = (0..nv)
        .map(|j| {
            let (l1, a1) = point_jac(b0, j);
            let (l2, a2) = point_jac(b1, j);
            (sub3(&l2, &l1), sub3(&a2, &a1))
        })
        .collect();
    (0..dim)
        .map(|r| {
            let axis = &frame[r % 3];
            cols.iter()
                .map(|(l, a)| dot3(axis, if r < 3 { l } else { a }))
                .collect()
        })
        .collect()
}

/// Assemble the rows at placements `k`, velocities `v` `(nv)`, with the contact candidates
/// `cands` (from [`crate::batched::collision::pair_candidates`], in pair order).
#[allow(clippy::too_many_arguments)]
pub fn assemble<B: Backend>(
    model: &Model,
    compiled: &CompiledModel,
    k: &Kin<B>,
    q: &[S<B>],
    v: &[S<B>],
    cands: &[Candidate<B>],
    inv: &InvWeights,
    s: &Settings,
) -> Rows<B> {
    let nv = model.nv;
    let unit = |d: usize, sign: f64| -> Vec<S<B>> {
        (0..nv)
            .map(|i| S::C(if i == d { sign } else { 0.0 }))
            .collect()
    };
    let mut raw: Vec<Raw<B>> = Vec::new();
    let plain = |jac: Vec<S<B>>, pos: S<B>, margin: f64, diag: f64| {
        let vel = dot_dynamic(
            &jac.iter().collect::<Vec<_>>(),
            &v.iter().collect::<Vec<_>>(),
        );
        (jac, vel, pos, margin, diag)
    };
    if !s.disable.frictionloss {
        for d in 0..nv {
            let j = &model.joints[model.dof_joint[d]];
            if j.frictionloss <= 0.0 {
                continue;
            }
            let (jac, vel, pos, margin, diag) = plain(unit(d, 1.0), S::C(0.0), 0.0, inv.dof[d]);
            raw.push(Raw {
                jac,
                vel,
                imp_at: (pos.clone(), margin),
                pos,
                margin,
                solref: j.solref_friction,
                solimp: j.solimp_friction,
                no_stiffness: true,
                diag,
                r_override: None,
                kind: Kind::FrictionLoss {
                    eta: j.frictionloss,
                },
                mu: S::C(0.0),
                active: M::C(true),
            });
        }
    }
    if !s.disable.limit {
        for j in &model.joints {
            let Some((lo, hi)) = j.range else { continue };
            if !matches!(j.kind, JointKind::Hinge | JointKind::Slide) {
                continue;
            }
            let x = &q[j.qpos_adr];
            for (dist, sign) in [(x - lo, 1.0), (S::C(hi) - x, -1.0)] {
                let active = dist.lt(&S::C(j.margin));
                let (jac, vel, pos, margin, diag) =
                    plain(unit(j.dof_adr, sign), dist, j.margin, inv.dof[j.dof_adr]);
                raw.push(Raw {
                    jac,
                    vel,
                    imp_at: (pos.clone(), margin),
                    pos,
                    margin,
                    solref: j.solref_limit,
                    solimp: j.solimp_limit,
                    no_stiffness: false,
                    diag,
                    r_override: None,
                    kind: Kind::Inequality,
                    mu: S::C(0.0),
                    active,
                });
            }
        }
    }

    let moved = moved_by(model);
    let mut contacts = Vec::new();
    for c in cands {
        let pr = &compiled.pairs[c.pair];
        let m = &pr.material;
        let margin = m.margin;
        let active = c.found.and(&c.gap.lt(&S::C(margin)));
        let dim = m.condim as usize;
        let mut friction = m.friction;
        for f in &mut friction {
            *f = f.max(MINMU);
        }
        // mjc_PlaneCapsule gives the capsule's axis as the frame's first tangent.
        let hint = match model.geoms[pr.geoms[1]].shape {
            GeomShape::Capsule { .. } => Some(column(&qmat(&k.geom_xquat[pr.geoms[1]]), 2)),
            _ => None,
        };
        let frame = contact_frame(&c.normal, hint.as_ref());
        let (b0, b1) = (pr.bodies[0], pr.bodies[1]);
        let jf = frame_jacobian(k, &moved, (b0, b1), &c.point, &frame, dim);
        let tran = inv.body[b0][0] + inv.body[b1][0];
        let rot = inv.body[b0][1] + inv.body[b1][1];
        let d_normal = impedance(&m.solimp, &c.gap, margin);
        let first = raw.len();
        let pyramidal = s.cone == Cone::Pyramidal && dim > 1;
        let mk = |jac: Vec<S<B>>, pos: S<B>, margin: f64, diag: f64, kind: Kind| {
            let vel = dot_dynamic(
                &jac.iter().collect::<Vec<_>>(),
                &v.iter().collect::<Vec<_>>(),
            );
            Raw {
                jac,
                vel,
                pos,
                margin,
                imp_at: (c.gap.clone(), m.margin),
                solref: m.solref,
                solimp: m.solimp,
                no_stiffness: false,
                diag,
                r_override: None,
                kind,
                mu: S::C(0.0),
                active: active.clone(),
            }
        };
        if dim == 1 {
            raw.push(mk(
                jf[0].clone(),
                c.gap.clone(),
                margin,
                tran,
                Kind::Inequality,
            ));
        } else if pyramidal {
            let r0 = regularizer(&d_normal, tran * (1.0 + friction[0] * friction[0]));
            let mu_reg = friction[0] / s.impratio.max(MINVAL).sqrt();
            let r_edge = &r0 * (2.0 * mu_reg * mu_reg);
            for kf in 1..dim {
                let muk = friction[kf - 1];
                let da = tran + muk * muk * if kf < 3 { tran } else { rot };
                for sign in [1.0, -1.0] {
                    let jac = (0..nv)
                        .map(|j| &jf[0][j] + &(&jf[kf][j] * (sign * muk)))
                        .collect();
                    let mut row = mk(jac, c.gap.clone(), margin, da, Kind::Inequality);
                    row.r_override = Some(r_edge.clone());
                    raw.push(row);
                }
            }
        } else {
            let r0 = regularizer(&d_normal, tran);
            let r1 = &r0 / s.impratio.max(MINVAL);
            let mu_reg = (&r1 / &r0).sqrt() * friction[0];
            let mut mu_j = [0.0; 6];
            for j in 1..dim {
                mu_j[j] = friction[j - 1];
            }
            for j in 0..dim {
                let da = if j < 3 { tran } else { rot };
                let (kind, pos, mgn) = if j == 0 {
                    (Kind::Elliptic { dim, mu_j }, c.gap.clone(), margin)
                } else {
                    (Kind::Member, S::C(0.0), 0.0)
                };
                let mut row = mk(jf[j].clone(), pos, mgn, da, kind);
                if j == 0 {
                    row.mu = mu_reg.clone();
                } else {
                    row.no_stiffness = true;
                    let fj2 = friction[j - 1] * friction[j - 1];
                    row.r_override = Some(&(&(&r1 * friction[0]) * friction[0]) / fj2);
                }
                raw.push(row);
            }
        }
        contacts.push(ContactSlot {
            geoms: pr.geoms,
            first,
            dim,
            pyramidal,
            friction,
            active,
            point: c.point.clone(),
            frame,
            gap: c.gap.clone(),
            frame_jacobian: jf,
        });
    }

    let mut any = M::C(false);
    let rows = raw
        .into_iter()
        .map(|r| {
            let d = impedance(&r.solimp, &r.imp_at.0, r.imp_at.1);
            let (kk, b) = reference_coefficients(&r.solref, &r.solimp, s.h, s.refsafe);
            let kk = if r.no_stiffness { 0.0 } else { kk };
            let rr = r.r_override.unwrap_or_else(|| regularizer(&d, r.diag));
            let aref = &(&r.vel * -b) - &(&(&d * kk) * &(&r.pos - r.margin));
            any = any.or(&r.active);
            Row {
                jac: r.jac,
                d: S::C(1.0) / &rr,
                r: rr,
                aref,
                active: r.active,
                kind: r.kind,
                mu: r.mu,
            }
        })
        .collect();
    Rows {
        rows,
        contacts,
        any,
    }
}

/// MuJoCo's island scale per world: `1 / Σ M_ii` over the dofs of the kinematic trees that an
/// active row touches. The cpu engine's `island_scale` tests the Jacobian's columns numerically;
/// this tests them structurally (an entry that is not the constant 0), which differs only where
/// a row's every entry on a tree is exactly 0 in some world by coincidence.
///
/// One problem per world: where several kinematic trees are constrained apart from each other
/// (two free bodies resting side by side), the cpu engine solves each island as its own problem
/// ([`crate::soft_convex::islands`]), so the two engines then stop Newton at different points
/// within the solver tolerance (8.7e-8 m apart over 1 s on four bodies with rolling friction).
/// The scenes the batched engine is cross-checked on have one tree.
pub fn island_scale<B: Backend>(model: &Model, mass: &[Vec<S<B>>], rows: &[Row<B>]) -> S<B> {
    let root = |mut b: usize| {
        while model.bodies[b].parent != 0 {
            b = model.bodies[b].parent;
        }
        b
    };
    let mut touched = vec![M::C(false); model.bodies.len()];
    for r in rows {
        let mut seen = vec![false; model.bodies.len()];
        for (d, e) in r.jac.iter().enumerate() {
            let t = root(model.dof_body[d]);
            if e.constant() != Some(0.0) && !seen[t] {
                seen[t] = true;
                touched[t] = touched[t].or(&r.active);
            }
        }
    }
    let sum = (0..model.nv).fold(S::C(0.0), |acc, d| {
        acc + touched[root(model.dof_body[d])].select(&mass[d][d], &S::C(0.0))
    });
    S::C(1.0) / &sum.max_c(MINVAL)
}

/// Contact force in the contact frame `(normal, t1, t2)` (N) from the row forces, as the cpu
/// engine's records (pyramid edges combined as MuJoCo's `mj_contactForce`); zero where the
/// contact is inactive.
pub fn frame_force<B: Backend>(c: &ContactSlot<B>, force: &[S<B>]) -> V3<B> {
    let mut f: V3<B> = [S::zero(), S::zero(), S::zero()];
    if c.pyramidal {
        for k in 1..c.dim {
            let (fp, fm) = (
                &force[c.first + 2 * (k - 1)],
                &force[c.first + 2 * (k - 1) + 1],
            );
            f[0] = &f[0] + &(fp + fm);
            if k < 3 {
                f[k] = &(fp - fm) * c.friction[k - 1];
            }
        }
    } else {
        for (k, fk) in f.iter_mut().enumerate().take(c.dim.min(3)) {
            *fk = force[c.first + k].clone();
        }
    }
    std::array::from_fn(|i| c.active.select(&f[i], &S::C(0.0)))
}

/// The contact point's relative velocity in the contact frame (m/s) at velocities `v`.
pub fn frame_velocity<B: Backend>(c: &ContactSlot<B>, v: &[S<B>]) -> V3<B> {
    let vs: Vec<&S<B>> = v.iter().collect();
    std::array::from_fn(|i| {
        if i < c.dim.min(3) {
            dot_dynamic(&c.frame_jacobian[i].iter().collect::<Vec<_>>(), &vs)
        } else {
            S::zero()
        }
    })
}
