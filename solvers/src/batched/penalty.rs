//! Batched penalty: the cpu `penalty` formulation ([`crate::penalty`], spec
//! `ncp_fb_and_penalty.md` §4) for many worlds at once, as one pure function of tensors
//! ([`step`]) so that burn's autodiff differentiates whole rollouts through it.
//!
//! The same step as the cpu module, in the same order: collide at `q_n`
//! ([`super::collision`]); forces at `(q_n, v_n)`: the contact law of
//! [`crate::penalty::law::contact_force`] per candidate with the pair's mean material or the
//! parameters' overrides, joint-limit springs and friction loss on hinge and slide joints,
//! passive springs and damping, actuators (motors and servos, explicit), minus the bias forces;
//! `v_{n+1} = v_n + h M(q_n)⁻¹ τ`; angular damping of free joints; `q_{n+1}` from `v_{n+1}`.
//!
//! Per-world parameters are tensors: each pair's `ke, kd, kf, ka, μ` ([`PairCoefficients`],
//! shape `(worlds)` each, or one constant for all worlds), the state, and the controls.

use burn_tensor::backend::Backend;

use super::collision::{all_candidates, Candidate, Outside};
use super::dynamics::{
    cholesky_solve, integrate_positions, mass_matrix, point_velocity, smooth, velocities,
};
use super::kinematics::Kin;
use super::scalar::{M, S};
use super::spatial::{add3, ang, cross3, dot3, lin, scale3, sub3, zero3, V3};
use crate::compiled::CompiledModel;
use crate::kinematics::body_dofs;
use crate::model::{ActuatorKind, JointKind, Model};
use crate::penalty::law::FrictionLaw;
use crate::penalty::PenaltyParams;

/// Contact-law coefficients of one pair, per world (each `(worlds)` or a constant).
#[derive(Debug, Clone)]
pub struct PairCoefficients<B: Backend> {
    /// Normal stiffness ke (N/m).
    pub ke: S<B>,
    /// Normal damping kd (N s/m).
    pub kd: S<B>,
    /// Viscous friction kf (N s/m).
    pub kf: S<B>,
    /// Adhesion distance ka (m).
    pub ka: S<B>,
    /// Sliding friction μ (-).
    pub mu: S<B>,
}

/// A model compiled for the batched penalty: the model, its constants, the parameters and the
/// per-pair coefficients.
#[derive(Debug, Clone)]
pub struct Batch<B: Backend> {
    /// The model.
    pub model: Model,
    /// Its compiled constants (pairs and materials).
    pub compiled: CompiledModel,
    /// The formulation's parameters (engine-neutral, [`PenaltyParams`]).
    pub params: PenaltyParams,
    /// `(npair)` coefficients, in [`CompiledModel::pairs`] order.
    pub coef: Vec<PairCoefficients<B>>,
    /// Read back, each step, whether any world has a contact candidate, and skip the contact
    /// law and Jacobians when none has (their forces would all be zero): a broad phase for
    /// the whole batch. One readback per step, cheap on a CPU backend (burn-ndarray sets
    /// it) and a device synchronization on a GPU (off there). Default off.
    pub skip_idle_contacts: bool,
}

impl<B: Backend> Batch<B> {
    /// Compile `model` with `params`: each pair's coefficients are the parameters' overrides or
    /// the mixed material's means, μ = 0 for condim 1 (as the cpu penalty's `coefficients`).
    pub fn new(model: &Model, params: PenaltyParams) -> Self {
        let compiled = CompiledModel::new(model);
        let coef = compiled
            .pairs
            .iter()
            .map(|pr| {
                let m = &pr.material;
                PairCoefficients {
                    ke: S::C(params.ke.unwrap_or(m.ke)),
                    kd: S::C(params.kd.unwrap_or(m.kd)),
                    kf: S::C(params.kf.unwrap_or(m.kf)),
                    ka: S::C(params.ka.unwrap_or(m.ka)),
                    mu: S::C(if m.condim == 1 {
                        0.0
                    } else {
                        params.mu.unwrap_or(m.penalty_mu)
                    }),
                }
            })
            .collect();
        Self {
            model: model.clone(),
            compiled,
            params,
            coef,
            skip_idle_contacts: false,
        }
    }
}

/// One contact candidate after a step, per world.
pub struct ContactOut<B: Backend> {
    /// The candidate (pair, mask, point, normal, gap).
    pub candidate: Candidate<B>,
    /// Whether it exerted force (found and `gap − margin < max(ka, 0)`).
    pub active: M<B>,
    /// Force on `geoms[1]` (N, world); zero where inactive.
    pub force: V3<B>,
}

/// The result of [`step`].
pub struct StepOut<B: Backend> {
    /// Positions after the step `(nq)`.
    pub q: Vec<S<B>>,
    /// Velocities after the step `(nv)`.
    pub v: Vec<S<B>>,
    /// Every candidate with its force.
    pub contacts: Vec<ContactOut<B>>,
    /// Placements at the start of the step (for contact velocities after it).
    pub kin: Kin<B>,
    /// The worlds where a pair left the batched closed forms ([`Outside`]).
    pub outside: Vec<Outside<B>>,
}

/// The penalty law ([`crate::penalty::law::contact_force`]) per world: `(normal, tangential)`
/// force on geom 2 for normal `n`, signed distance `d` (m), relative velocity `vrel` (m/s).
///
/// Lanes where `active` is false get zero force (the masks below include it, so that the
/// caller needs no select of the force).
fn law<B: Backend>(
    c: &PairCoefficients<B>,
    params: &PenaltyParams,
    n: &V3<B>,
    d: &S<B>,
    vrel: &V3<B>,
    active: &M<B>,
) -> (S<B>, V3<B>) {
    let pen = d.lt(&S::C(0.0));
    let adh = pen.not().and(&d.lt(&c.ka));
    let vn = dot3(n, vrel);
    let spring = -(&c.ke * d);
    // pen: spring − kd min(vn, 0); adhesion: spring − 0 = spring; else 0 − 0 (exact, and
    // two constant-branch selects instead of a select of two tensors).
    let pushing = active.and(&pen);
    let damping = pushing.select(&(&c.kd * &vn.min_c(0.0)), &S::C(0.0));
    let normal = active.and(&pen.or(&adh)).select(&spring, &S::C(0.0)) - damping;
    let vt = sub3(vrel, &scale3(n, &vn));
    let s2 = dot3(&vt, &vt);
    let slipping = pushing.and(&s2.gt(&S::C(0.0)));
    // Inactive lanes get a slip of 1 so that no derivative divides by zero.
    let s = slipping.select(&s2, &S::C(1.0)).sqrt();
    let cap = &c.mu * &normal.max_c(0.0);
    let ratio = match params.friction {
        FrictionLaw::Normalized => (&c.kf * &s).min(&cap) / &s,
        FrictionLaw::Huber => {
            let delta = params.smoothing();
            let quad = &(&s * &s) * 0.5;
            let lin = (&s - 0.5 * delta) * delta;
            let h = s.le(&S::C(delta)).select(&quad, &lin);
            (&c.kf * &h).min(&cap) / &h
        }
    };
    let k = -slipping.select(&ratio, &S::C(0.0));
    (normal, scale3(&vt, &k))
}

/// Joint-limit springs and friction loss on hinge and slide joints `(nv)`, as the cpu
/// penalty's `joint_forces`.
fn joint_forces<B: Backend>(model: &Model, p: &PenaltyParams, q: &[S<B>], v: &[S<B>]) -> Vec<S<B>> {
    let off = model.options.disable;
    let mut f = vec![S::zero(); model.nv];
    for j in &model.joints {
        if !matches!(j.kind, JointKind::Hinge | JointKind::Slide) {
            continue;
        }
        let (qj, vj, d) = (&q[j.qpos_adr], &v[j.dof_adr], j.dof_adr);
        if let Some((lo, hi)) = j.range.filter(|_| !off.limit) {
            let below = (S::C(lo) - qj) * p.limit_ke - vj.min_c(0.0) * p.limit_kd;
            let above = (S::C(hi) - qj) * p.limit_ke - vj.max_c(0.0) * p.limit_kd;
            let spring = qj
                .lt(&S::C(lo))
                .select(&below, &qj.gt(&S::C(hi)).select(&above, &S::C(0.0)));
            f[d] = &f[d] + &spring;
        }
        if j.frictionloss > 0.0 && !off.frictionloss {
            let pos = (vj * p.frictionloss_kv).min_c(j.frictionloss);
            let neg = -((-vj) * p.frictionloss_kv).min_c(j.frictionloss);
            let loss = vj
                .gt(&S::C(0.0))
                .select(&pos, &vj.lt(&S::C(0.0)).select(&neg, &S::C(0.0)));
            f[d] = &f[d] - &loss;
        }
    }
    f
}

/// Passive springs and damping plus actuator forces `(nv)` ([`crate::dynamics::passive_forces`],
/// [`crate::actuation::actuator_forces`]); `u` has one per-world scalar per actuator.
pub(crate) fn passive_and_actuation<B: Backend>(
    model: &Model,
    q: &[S<B>],
    v: &[S<B>],
    u: &[S<B>],
) -> Vec<S<B>> {
    let mut f = vec![S::zero(); model.nv];
    for j in &model.joints {
        for i in 0..j.kind.nv() {
            let d = j.dof_adr + i;
            f[d] = &f[d] - &(&v[d] * j.damping);
        }
        if matches!(j.kind, JointKind::Hinge | JointKind::Slide) && j.stiffness > 0.0 {
            let d = j.dof_adr;
            f[d] = &f[d] - &((&q[j.qpos_adr] - j.springref) * j.stiffness);
        }
    }
    let clamp = |x: S<B>, r: Option<(f64, f64)>| match r {
        Some((lo, hi)) => x.max_c(lo).min_c(hi),
        None => x,
    };
    for (i, a) in model.actuators.iter().enumerate() {
        let j = &model.joints[a.joint];
        let ctrl = clamp(u[i].clone(), a.ctrl_range);
        let (qj, vj) = (&q[j.qpos_adr], &v[j.dof_adr]);
        let force = match a.kind {
            ActuatorKind::Motor => ctrl,
            ActuatorKind::PositionServo { kp, kv } => (ctrl - qj) * kp - vj * kv,
            ActuatorKind::VelocityServo { kv } => (ctrl - vj) * kv,
        };
        let d = j.dof_adr;
        f[d] = &f[d] + &(clamp(force, a.force_range) * a.gear);
    }
    f
}

/// One penalty step of every world: positions `q` `(nq)`, velocities `v` `(nv)`, controls `u`
/// `(nu)`, timestep `h` (s). Pure: differentiable end to end on an autodiff backend.
pub fn step<B: Backend>(b: &Batch<B>, q: &[S<B>], v: &[S<B>], u: &[S<B>], h: f64) -> StepOut<B> {
    step_with(b, &b.coef, q, v, u, h)
}

/// [`step`] with the pair coefficients `coef` `(npair)` in place of `b.coef` (a shard of the
/// worlds steps with its slice of them).
pub fn step_with<B: Backend>(
    b: &Batch<B>,
    coef: &[PairCoefficients<B>],
    q: &[S<B>],
    v: &[S<B>],
    u: &[S<B>],
    h: f64,
) -> StepOut<B> {
    let model = &b.model;
    let (k, inertia, f_s) = smooth(model, q, v, u);
    let jf = joint_forces(model, &b.params, q, v);
    let mut tau: Vec<S<B>> = f_s.iter().zip(&jf).map(|(f, j)| f + j).collect();

    let mut contacts = Vec::new();
    let mut outside = Vec::new();
    if !model.options.disable.contact {
        let (mut cands, out) = all_candidates(model, &b.compiled, &k);
        outside = out;
        if b.skip_idle_contacts
            && !cands
                .iter()
                .fold(M::C(false), |any, c| any.or(&c.found))
                .any_true()
        {
            // No world has a candidate: every contact force would be zero.
            cands.clear();
        }
        // The dofs moving each body, for the contact Jacobians.
        let moved: Vec<Vec<bool>> = (0..model.bodies.len())
            .map(|body| {
                let mut m = vec![false; model.nv];
                for d in body_dofs(model, body) {
                    m[d] = true;
                }
                m
            })
            .collect();
        for cand in cands {
            let pr = &b.compiled.pairs[cand.pair];
            let coef = &coef[cand.pair];
            let d = &cand.gap - pr.material.margin;
            let active = cand.found.and(&d.lt(&coef.ka.max_c(0.0)));
            // The cpu penalty's relative Jacobian (3 × nv) column by column: the velocity of the
            // point fixed to geom 2's body minus geom 1's per unit velocity of dof j
            // (`point_jacobian`); vrel = J v and τ += Jᵀ F in nalgebra's order (`gemv`: the
            // columns' terms summed left to right), so that the sums have the cpu's last bit.
            let column = |body: usize, j: usize| -> V3<B> {
                if moved[body][j] {
                    add3(&lin(&k.cdof[j]), &cross3(&ang(&k.cdof[j]), &cand.point))
                } else {
                    zero3()
                }
            };
            let (b0, b1) = (pr.bodies[0], pr.bodies[1]);
            let jac: Vec<V3<B>> = (0..model.nv)
                .map(|j| sub3(&column(b1, j), &column(b0, j)))
                .collect();
            let vrel: V3<B> = std::array::from_fn(|r| {
                jac.iter()
                    .zip(v)
                    .fold(S::zero(), |acc, (col, vj)| acc + &col[r] * vj)
            });
            let (fnormal, ft) = law(coef, &b.params, &cand.normal, &d, &vrel, &active);
            // Zero (±0) where inactive: the law's masks include `active`.
            let force = add3(&scale3(&cand.normal, &fnormal), &ft);
            for (t, col) in tau.iter_mut().zip(&jac) {
                *t = &*t + &dot3(col, &force);
            }
            contacts.push(ContactOut {
                candidate: cand,
                active,
                force,
            });
        }
    }

    let mass = mass_matrix(model, &k, &inertia);
    let acc = cholesky_solve(&mass, &tau);
    let mut v_new: Vec<S<B>> = v.iter().zip(&acc).map(|(v, a)| v + &(a * h)).collect();
    if b.params.angular_damping > 0.0 {
        let scale = 1.0 - b.params.angular_damping * h;
        for j in &model.joints {
            if j.kind == JointKind::Free {
                for d in j.dof_adr + 3..j.dof_adr + 6 {
                    v_new[d] = &v_new[d] * scale;
                }
            }
        }
    }
    let mut q_new = q.to_vec();
    integrate_positions(model, &mut q_new, &v_new, h);
    StepOut {
        q: q_new,
        v: v_new,
        contacts,
        kin: k,
        outside,
    }
}

/// The velocity of geom 2's contact point relative to geom 1's (m/s, world) at velocities `v`
/// with the placements `kin` of the step's start (what the cpu penalty records as the contact
/// velocity after the step).
pub fn relative_velocity<B: Backend>(
    b: &Batch<B>,
    kin: &Kin<B>,
    v: &[S<B>],
    c: &ContactOut<B>,
) -> V3<B> {
    let (cvel, _) = velocities(&b.model, kin, v);
    let pr = &b.compiled.pairs[c.candidate.pair];
    let p = &c.candidate.point;
    if pr.bodies[0] == pr.bodies[1] {
        return zero3();
    }
    sub3(
        &point_velocity(&cvel[pr.bodies[1]], p),
        &point_velocity(&cvel[pr.bodies[0]], p),
    )
}
