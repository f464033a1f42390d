//! One step's batched `ncp_fb` problem per world: the cpu engine's
//! [`crate::ncp_fb::NcpFb::assemble`] over row slots (module doc of [`super`]), in its order of
//! rows and of operations.
//!
//! Per world, at `(q⁻, u⁻)` with controls ū:
//!
//! 1. **Smooth forces and the free velocity.** `f_s = passive + motors − bias` with the
//!    actuators that stay explicit forces (motors, servos with a force range, every servo under
//!    `servo_form: explicit`), the mass matrix M by the composite rigid body algorithm, its
//!    Cholesky factor (a world whose M is not positive definite fails the step, as the cpu
//!    engine's), `u_free = u⁻ + h M⁻¹ f_s` (spec §2.1).
//! 2. **Servo rows** (R5), one per implicit servo: `J = gear e_dof`, `α`, `bias` of the module
//!    doc of [`crate::ncp_fb`], the bias per world from the clamped control.
//! 3. **Limit rows** (R4): both sides of every limited hinge and slide joint, in every world
//!    (the cpu engine's `limit_rows` with an infinite margin), `dist` per world.
//! 4. **Contact slots.** Each pair is collided with its detection distance widened per world
//!    as the cpu engine's `detect_with_pair_margin`: `(margin + e) + gap` with
//!    `e = detection_margin + 2 (h (s₀ + s₁) + h² |g|)` under `speculative`
//!    ([`crate::ncp_fb::speculative::Bounds`]: `s_g = |v_g| + |ω_b| r_g` from the body
//!    velocities at u⁻). Of the candidates found, duplicates of one pair (points within
//!    `merge_distance`, normals within ~1.4 mrad) merge into the earlier one, which takes the
//!    smaller gap's data ([`crate::ncp_fb::reduce::merge_duplicates`], per world with masks).
//!    A candidate beyond `detection_margin` whose own closing bound does not reach it, and one
//!    whose normal Jacobian row is zero ([`crate::ncp_fb::ZERO_ROW`]), is inactive. Each slot
//!    has the normal row and, for condim ≥ 3, the two tangent rows of the contact frame
//!    (MuJoCo's `mju_makeFrame`, [`crate::batched::soft::rows::contact_frame`]), the Jacobian
//!    of `mj_contactJacobian` ([`crate::batched::soft::rows::frame_jacobian`]).
//! 5. `M⁻¹ Jᵀ` column by column (nalgebra's `Cholesky::solve`), the inverse weights
//!    `w = J_i · (M⁻¹ Jᵀ)_i` (w_t the mean of the two tangent rows').
//!
//! An inactive slot's Jacobian rows are zero and its `gap`, `w_n`, `w_t` are 1 (finite; its
//! residual rows are `r = p` whatever they are).
//!
//! **Outside the class** ([`Outside`], the stepper ends the world with the reason): the
//! collision's own flags, and an active contact whose normal row some dof moves but whose
//! tangent rows none does (the cpu engine then drops the contact's friction rows per step; the
//! slots' row structure is fixed here).

use burn_tensor::backend::Backend;
use burn_tensor::ElementConversion;

use super::residual::{Block, Problem};
use crate::batched::collision::{all_candidates_within, Candidate, Outside};
use crate::batched::dynamics::{
    cholesky_apply, cholesky_factor_checked, dot_dynamic, mass_matrix, smooth, velocities,
};
use crate::batched::scalar::{M, S};
use crate::batched::soft::rows::{contact_frame, frame_jacobian, moved_by};
use crate::batched::spatial::{add3, ang, column, cross3, dot3, lin, qmat, sub3, V3};
use crate::compiled::CompiledModel;
use crate::geometry::GeomShape;
use crate::model::{ActuatorKind, JointKind, Model};
use crate::ncp_fb::residual::FrictionResidual;
use crate::ncp_fb::solve::Settings;
use crate::ncp_fb::{NcpFb, NcpFbParams, ServoForm, ZERO_ROW};

/// Cosine above which two contact normals count as the same direction (as
/// [`crate::ncp_fb::reduce`]).
const SAME_NORMAL_COS: f64 = 1.0 - 1e-6;

/// A model compiled for the batched `ncp_fb`.
#[derive(Debug, Clone)]
pub struct NcpBatch {
    /// The model.
    pub model: Model,
    /// Its pairs and materials.
    pub compiled: CompiledModel,
    /// The parameters (validated).
    pub params: NcpFbParams,
    /// The solver settings of the parameters.
    pub settings: Settings,
    /// Per actuator: an implicit servo row (R5) rather than an explicit force.
    pub servo: Vec<bool>,
    /// The cpu formulation with the same parameters (asked where an uncollided pair comes
    /// within reach, [`NcpFb::pair_has_rows`]).
    pub cpu: NcpFb,
    /// Drop the slot of a candidate that is a contact in no world of the batch (one readback
    /// of its mask per candidate and step). Exact: an inert slot's rows are zero in J, r = p,
    /// and change no other row's arithmetic (they only add operations on zeros, module doc of
    /// [`super`]); on box_traversal most wheel–box and chassis candidates are idle. Default
    /// true; off, every candidate found in some world keeps its slot.
    pub skip_idle_slots: bool,
    /// The model with only the explicit actuators (for the smooth forces).
    explicit: Model,
    /// Each geom's bounding-sphere radius (m; 0 where unbounded, a plane or height field).
    radius: Vec<f64>,
    /// Per dof, whether it moves each body.
    moved: Vec<Vec<bool>>,
}

impl NcpBatch {
    /// Compile `model` for `ncp_fb` with parameters `params`.
    ///
    /// # Errors
    /// Invalid parameters, or one the batched step does not implement, named:
    /// `friction_residual: dissipation_weight`, equality constraints.
    pub fn new(model: &Model, params: NcpFbParams) -> Result<Self, String> {
        let cpu = NcpFb::new(params.clone()).map_err(|e| e.to_string())?;
        if params.friction_residual == FrictionResidual::DissipationWeight {
            return Err(
                "friction_residual: dissipation_weight: the batched ncp_fb has the natural map only; run on the cpu engine"
                    .into(),
            );
        }
        if let Some(e) = model.equalities.first() {
            return Err(format!(
                "equality '{}': the batched ncp_fb has no equality rows",
                e.name()
            ));
        }
        let servo = cpu.servo_rows(model);
        let mut explicit = model.clone();
        explicit.actuators = model
            .actuators
            .iter()
            .zip(&servo)
            .filter(|(_, s)| !**s)
            .map(|(a, _)| a.clone())
            .collect();
        let radius = model
            .collision_shapes
            .iter()
            .map(|c| {
                let r = c.shape.compute_local_bounding_sphere().radius;
                if r.is_finite() {
                    r
                } else {
                    0.0
                }
            })
            .collect();
        Ok(Self {
            compiled: CompiledModel::new(model),
            settings: cpu.settings(),
            cpu,
            skip_idle_slots: true,
            params,
            servo,
            explicit,
            radius,
            moved: moved_by(model),
            model: model.clone(),
        })
    }
}

/// A contact slot of the assembled problem, for contact records.
pub struct ContactSlot<B: Backend> {
    /// The pair's geoms.
    pub geoms: [usize; 2],
    /// The block's normal row.
    pub row: usize,
    /// Whether the block has the two friction rows.
    pub friction: bool,
    /// Sliding friction μ.
    pub mu: f64,
    /// Whether the slot is a contact in each world.
    pub active: M<B>,
    /// Contact point (m, world).
    pub point: V3<B>,
    /// Frame rows `(n, t1, t2)` (world).
    pub frame: [V3<B>; 3],
    /// Signed distance at q⁻ (m; the record's `gap`, the contact margin not subtracted).
    pub gap: S<B>,
    /// The three frame Jacobian rows `(3 × nv)`, for the recorded velocities (zero where
    /// inactive).
    pub jacobian: Vec<Vec<S<B>>>,
}

/// One step's problem per world with its contact slots and class flags.
pub struct Assembly<B: Backend> {
    /// The problem.
    pub problem: Problem<B>,
    /// The contact slots in row order.
    pub contacts: Vec<ContactSlot<B>>,
    /// The worlds that left the batched class at this step, with reasons.
    pub outside: Vec<Outside<B>>,
    /// Per world: whether the mass matrix was positive definite (elsewhere the step fails).
    pub mass_ok: M<B>,
}

/// Per world `√(x·x)` (m or m/s).
fn norm3<B: Backend>(x: &V3<B>) -> S<B> {
    crate::batched::collision::safe_sqrt(&dot3(x, x))
}

/// Each geom's speed bound `s_g = |v_O + ω × p_g| + |ω| r_g` (m/s) at velocities `v`
/// ([`crate::ncp_fb::speculative::Bounds::new`]).
fn geom_speeds<B: Backend>(
    b: &NcpBatch,
    k: &crate::batched::kinematics::Kin<B>,
    v: &[S<B>],
) -> Vec<S<B>> {
    let (cvel, _) = velocities(&b.model, k, v);
    b.model
        .geoms
        .iter()
        .enumerate()
        .map(|(gi, g)| {
            if g.body == 0 {
                return S::C(0.0);
            }
            let sv = &cvel[g.body];
            let (w, v_o) = (ang(sv), lin(sv));
            let vc = add3(&v_o, &cross3(&w, &k.geom_xpos[gi]));
            norm3(&vc) + norm3(&w) * b.radius[gi]
        })
        .collect()
}

/// Duplicates of one pair's candidates merged per world, in place
/// ([`crate::ncp_fb::reduce::merge_duplicates`]): candidate j is dropped where it duplicates
/// an earlier kept candidate (the first such), which takes j's point, normal and gap where j's
/// gap is smaller.
fn merge_duplicates<B: Backend>(cands: &mut [Candidate<B>], distance: f64) {
    if distance <= 0.0 || cands.len() < 2 {
        return;
    }
    for j in 1..cands.len() {
        let mut matched = M::C(false);
        for i in 0..j {
            let (head, tail) = cands.split_at_mut(j);
            let (ci, cj) = (&mut head[i], &tail[0]);
            let d = sub3(&ci.point, &cj.point);
            let dup = ci
                .found
                .and(&cj.found)
                .and(&matched.not())
                .and(&dot3(&d, &d).gt(&S::C(distance * distance)).not())
                .and(&dot3(&ci.normal, &cj.normal).ge(&S::C(SAME_NORMAL_COS)));
            if matches!(dup, M::C(false)) {
                continue;
            }
            let take = dup.and(&cj.gap.lt(&ci.gap));
            ci.point = std::array::from_fn(|a| take.select(&cj.point[a], &ci.point[a]));
            ci.normal = std::array::from_fn(|a| take.select(&cj.normal[a], &ci.normal[a]));
            ci.gap = take.select(&cj.gap, &ci.gap);
            matched = matched.or(&dup);
        }
        cands[j].found = cands[j].found.and(&matched.not());
    }
}

/// Assemble one step's problem per world at positions `q` `(nq)`, velocities `v` `(nv)`,
/// controls `u` `(nu)`, timestep `h` (s) (module doc).
pub fn assemble<B: Backend>(
    b: &NcpBatch,
    q: &[S<B>],
    v: &[S<B>],
    u: &[S<B>],
    h: f64,
) -> Assembly<B> {
    let model = &b.model;
    let nv = model.nv;
    let p = &b.params;
    // 1. Smooth forces with the explicit actuators, M, u_free.
    let explicit_u: Vec<S<B>> = u
        .iter()
        .zip(&b.servo)
        .filter(|(_, s)| !**s)
        .map(|(x, _)| x.clone())
        .collect();
    let (k, inertia, f_s) = smooth(&b.explicit, q, v, &explicit_u);
    let mass = mass_matrix(model, &k, &inertia);
    let (chol, mass_ok) = cholesky_factor_checked(&mass);
    let a0 = cholesky_apply(&chol, &f_s);
    let u_free: Vec<S<B>> = v.iter().zip(&a0).map(|(v, a)| v + &(a * h)).collect();

    let unit = |d: usize, sign: f64| -> Vec<S<B>> {
        (0..nv)
            .map(|i| S::C(if i == d { sign } else { 0.0 }))
            .collect()
    };
    let mut rows: Vec<Vec<S<B>>> = Vec::new();
    let mut blocks: Vec<Block<B>> = Vec::new();
    // 2. Servo rows.
    for (i, a) in model.actuators.iter().enumerate() {
        if !b.servo[i] {
            continue;
        }
        let jnt = &model.joints[a.joint];
        let target = match a.ctrl_range {
            Some((lo, hi)) => u[i].max_c(lo).min_c(hi),
            None => u[i].clone(),
        };
        let err = &q[jnt.qpos_adr] - &target;
        let (alpha, bias) = match a.kind {
            ActuatorKind::VelocityServo { kv } => (a.gear / (h * kv), &target * -a.gear),
            ActuatorKind::PositionServo { kp, kv } => {
                let alpha = a.gear / (h * (kv + h * kp));
                match p.servo_form {
                    ServoForm::Paper => (alpha, &err * a.gear / h),
                    _ => (alpha, &err * (a.gear * kp) / (kv + h * kp)),
                }
            }
            ActuatorKind::Motor => unreachable!("motors are explicit"),
        };
        let mut jac = vec![S::C(0.0); nv];
        jac[jnt.dof_adr] = S::C(a.gear);
        blocks.push(Block::Servo {
            row: rows.len(),
            alpha: S::C(alpha),
            bias,
        });
        rows.push(jac);
    }
    // 3. Limit rows (w filled in below).
    if !model.options.disable.limit {
        for j in &model.joints {
            let Some((lo, hi)) = j.range else { continue };
            if !matches!(j.kind, JointKind::Hinge | JointKind::Slide) {
                continue;
            }
            let x = &q[j.qpos_adr];
            for (dist, sign) in [(x - lo, 1.0), (S::C(hi) - x, -1.0)] {
                blocks.push(Block::Limit {
                    row: rows.len(),
                    dist,
                    w: S::C(0.0),
                });
                rows.push(unit(j.dof_adr, sign));
            }
        }
    }
    // 4. Contact slots.
    let mut contacts = Vec::new();
    let mut outside = Vec::new();
    if !model.options.disable.contact {
        let g_h2 = if model.options.disable.gravity {
            0.0
        } else {
            model.options.gravity.norm() * h * h
        };
        let speeds = p.speculative.then(|| geom_speeds(b, &k, v));
        let detect: Vec<(S<B>, f64)> = b
            .compiled
            .pairs
            .iter()
            .map(|pr| {
                let m = &pr.material;
                let e = match &speeds {
                    Some(s) => {
                        let [g0, g1] = pr.geoms;
                        (&(&(&s[g0] + &s[g1]) * h) + g_h2) * 2.0 + p.detection_margin
                    }
                    None => S::C(p.detection_margin),
                };
                let d = &(e + m.margin) + m.gap;
                // The largest over the worlds bounds the height field's window (one readback).
                let field = b.compiled.height_fields[pr.geoms[0]].is_some();
                let max = match (&d, field) {
                    (S::T(t), true) => t.clone().max().into_scalar().elem::<f64>(),
                    (S::C(c), _) => *c,
                    // Not read: only a height field's window needs the bound.
                    (S::T(_), false) => f64::INFINITY,
                };
                (d, max)
            })
            .collect();
        let (mut cands, out) = all_candidates_within(model, &b.compiled, &k, &detect);
        outside = out;
        let mut start = 0;
        while start < cands.len() {
            let pair = cands[start].pair;
            let end = start + cands[start..].iter().take_while(|c| c.pair == pair).count();
            merge_duplicates(&mut cands[start..end], p.merge_distance);
            start = end;
        }
        let mut slots = Slots {
            rows: &mut rows,
            blocks: &mut blocks,
            contacts: &mut contacts,
            outside: &mut outside,
        };
        contact_slots(b, &k, v, &cands, (h, g_h2), &mut slots);
    }
    // 5. M⁻¹ Jᵀ and the inverse weights.
    let cols: Vec<Vec<S<B>>> = rows.iter().map(|r| cholesky_apply(&chol, r)).collect();
    let w = |i: usize| {
        dot_dynamic(
            &rows[i].iter().collect::<Vec<_>>(),
            &cols[i].iter().collect::<Vec<_>>(),
        )
    };
    for blk in &mut blocks {
        match blk {
            Block::Limit { row, w: wl, .. } => *wl = w(*row),
            Block::Contact {
                row,
                friction,
                wn,
                wt,
                active,
                ..
            } => {
                *wn = active.select(&w(*row), &S::C(1.0));
                *wt = if *friction {
                    active.select(&(&(w(*row + 1) + w(*row + 2)) * 0.5), &S::C(1.0))
                } else {
                    S::C(0.0)
                };
            }
            Block::Servo { .. } => {}
        }
    }
    let nl = rows.len();
    let minv_jt = (0..nv)
        .map(|d| (0..nl).map(|i| cols[i][d].clone()).collect())
        .collect();
    Assembly {
        problem: Problem {
            h,
            j: rows,
            minv_jt,
            u_free,
            blocks,
            eps_fb: p.fb_smoothing,
            rho_n: S::C(0.0),
            rho_f: S::C(0.0),
            packed: None,
        },
        contacts,
        outside,
        mass_ok,
    }
}

/// Where [`contact_slots`] appends.
struct Slots<'a, B: Backend> {
    rows: &'a mut Vec<Vec<S<B>>>,
    blocks: &'a mut Vec<Block<B>>,
    contacts: &'a mut Vec<ContactSlot<B>>,
    outside: &'a mut Vec<Outside<B>>,
}

/// Item 4 of the module doc after collision, for timestep `h` (s) and `g_h2` = h² |g| (m): each
/// candidate's slot, its rows, block and record data appended to `out`, and the worlds where an
/// active contact's tangent rows are both zero to `out.outside`. A candidate found in no world
/// gets no slot.
fn contact_slots<B: Backend>(
    b: &NcpBatch,
    k: &crate::batched::kinematics::Kin<B>,
    v: &[S<B>],
    cands: &[Candidate<B>],
    (h, g_h2): (f64, f64),
    out: &mut Slots<'_, B>,
) {
    let (model, p) = (&b.model, &b.params);
    for c in cands {
        if matches!(c.found, M::C(false)) {
            continue;
        }
        let pr = &b.compiled.pairs[c.pair];
        let m = &pr.material;
        let friction = m.condim >= 3;
        // mjc_PlaneCapsule gives the capsule's axis as the frame's first tangent.
        let hint = match model.geoms[pr.geoms[1]].shape {
            GeomShape::Capsule { .. } => Some(column(&qmat(&k.geom_xquat[pr.geoms[1]]), 2)),
            _ => None,
        };
        let frame = contact_frame(&c.normal, hint.as_ref());
        let jf = frame_jacobian(
            k,
            &b.moved,
            (pr.bodies[0], pr.bodies[1]),
            &c.point,
            &frame,
            3,
        );
        let gap = &c.gap - m.margin;
        let amax = |r: &[S<B>]| {
            r.iter()
                .fold(S::C(0.0), |acc, x| super::residual::max(&acc, &x.abs()))
        };
        let mut active = c.found.and(&amax(&jf[0]).gt(&S::C(ZERO_ROW)));
        if p.speculative {
            let rate = dot_dynamic(
                &jf[0].iter().collect::<Vec<_>>(),
                &v.iter().collect::<Vec<_>>(),
            );
            let bound = &(&(&rate * -1.0).max_c(0.0) * h + g_h2) * 2.0;
            let beyond = gap
                .gt(&S::C(p.detection_margin))
                .and(&gap.gt(&(bound + p.detection_margin)));
            active = active.and(&beyond.not());
        }
        if b.skip_idle_slots && !active.any_true() {
            continue;
        }
        if friction {
            let zero = amax(&jf[1])
                .gt(&S::C(ZERO_ROW))
                .or(&amax(&jf[2]).gt(&S::C(ZERO_ROW)))
                .not();
            out.outside.push(Outside {
                pair: c.pair,
                uncollided: false,
                worlds: active.and(&zero),
                reason: "a contact whose tangent rows no dof moves (ncp_fb drops its friction rows; the batched slots keep them)",
            });
        }
        let row = out.rows.len();
        let n_rows = if friction { 3 } else { 1 };
        let masked: Vec<Vec<S<B>>> = jf
            .iter()
            .map(|r| r.iter().map(|x| active.select(x, &S::C(0.0))).collect())
            .collect();
        out.rows.extend(masked.iter().take(n_rows).cloned());
        out.blocks.push(Block::Contact {
            row,
            friction,
            mu: S::C(m.friction[0]),
            gap: active.select(&gap, &S::C(1.0)),
            wn: S::C(1.0),
            wt: S::C(1.0),
            active: active.clone(),
            bodies: pr.bodies,
        });
        out.contacts.push(ContactSlot {
            geoms: pr.geoms,
            row,
            friction,
            mu: m.friction[0],
            active,
            point: c.point.clone(),
            frame,
            gap: c.gap.clone(),
            jacobian: masked,
        });
    }
}
