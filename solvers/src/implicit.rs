//! MuJoCo's velocity-implicit integrators, `implicitfast` and `implicit` (MuJoCo documentation,
//! "Computation > Numerical integration"; `mj_implicitSkip` in `engine_forward.c`,
//! `mjd_smooth_vel`, `mjd_actuator_vel`, `mjd_passive_vel` and `mjd_freeMhat` in
//! `engine_derivative.c`).
//!
//! # The update
//!
//! The constraint solver runs on the plain mass matrix M as with Euler, giving the constraint
//! forces `qfrc_constraint = Jᵀ f`. The velocity update then solves
//!
//! ```text
//! (M − h D) a = qfrc_smooth + qfrc_constraint,    v⁺ = v + h a,    q⁺ = q ⊕ h v⁺
//! ```
//!
//! with D the derivative of the smooth forces with respect to the velocity at the step's start:
//!
//! - `implicit`: `D = ∂(qfrc_passive + qfrc_actuator − qfrc_bias)/∂v` (MuJoCo's `qDeriv` with
//!   `flg_bias = 1`), factorized by LU (D is not symmetric: the Coriolis part).
//! - `implicitfast`: `D = ∂(qfrc_passive + qfrc_actuator)/∂v` (`flg_bias = 0`, the bias
//!   derivative dropped), its lower triangle mirrored so that `M − h D` is symmetric and
//!   Cholesky-factorized; except on each *standalone free body* (a body whose only joint is
//!   free, with no child bodies), whose 6 × 6 block MuJoCo solves on its own with the bias
//!   derivative included (`mjd_freeMhat`; checked against MuJoCo 4.0.1: a spinning free box
//!   under `implicitfast` follows `implicit`, and not Euler, to the last digit). The block is
//!   decoupled from the rest of the system (its own tree), so one LU solve of the whole matrix
//!   with those blocks gives the same accelerations.
//!
//! # The derivatives here
//!
//! - Passive: joint damping, `∂(−b v_i)/∂v_i = −b` on the diagonal (joint springs do not depend
//!   on v).
//! - Actuators ([`crate::actuation`]): a velocity servo `kv (u − q̇)` and a position servo's
//!   `−kv q̇` give `−kv gear²` on the joint's diagonal (servos have gear 1 in this model; a
//!   motor gives 0); skipped, as `mjd_actuator_vel` does, when the actuator force is at or
//!   beyond its `force_range` (the clamp cuts the derivative).
//! - Bias: `qfrc_bias(v)` (recursive Newton–Euler at zero acceleration) is gravity, which does
//!   not depend on v, plus Coriolis and centrifugal forces, a homogeneous quadratic form in v.
//!   For a quadratic form the central difference is exact at any step δ (polarization:
//!   `b(v + δe) − b(v − δe) = 2δ B(v) e`), so each column of `∂b/∂v` is one central difference
//!   with δ = max(1, |v|∞) (chosen for round-off), exact but for round-off. Cost: 2 nv (or 12 per
//!   standalone free body) bias evaluations per step.

use nalgebra::{DMatrix, DVector};

use crate::actuation::actuator_force;
use crate::dynamics::bias_forces;
use crate::kinematics::Kinematics;
use crate::model::{ActuatorKind, Integrator, JointKind, Model};

/// `∂(qfrc_passive + qfrc_actuator)/∂v` at `(q, v)` under controls `u` (nv × nv; N s/m or
/// N m s/rad): MuJoCo's `qDeriv` with `flg_bias = 0` for this model's passive forces and
/// actuators (module doc).
pub fn passive_actuator_velocity_derivative(
    model: &Model,
    q: &DVector<f64>,
    v: &DVector<f64>,
    u: &[f64],
) -> DMatrix<f64> {
    let mut d = DMatrix::zeros(model.nv, model.nv);
    for j in &model.joints {
        for i in 0..j.kind.nv() {
            d[(j.dof_adr + i, j.dof_adr + i)] -= j.damping;
        }
    }
    for (i, a) in model.actuators.iter().enumerate() {
        let kv = match a.kind {
            ActuatorKind::Motor => continue,
            ActuatorKind::PositionServo { kv, .. } | ActuatorKind::VelocityServo { kv } => kv,
        };
        if let Some((lo, hi)) = a.force_range {
            let f = actuator_force(model, i, q, v, u);
            if f <= lo || f >= hi {
                continue;
            }
        }
        let dof = model.joints[a.joint].dof_adr;
        d[(dof, dof)] -= kv * a.gear * a.gear;
    }
    d
}

/// Columns `dofs` of `∂qfrc_bias/∂v` at `v` (nv × dofs.len()), exact for the quadratic bias by
/// central differences (module doc). `kin` is the kinematics at the step's q.
pub fn bias_velocity_jacobian(
    model: &Model,
    kin: &Kinematics,
    v: &DVector<f64>,
    dofs: std::ops::Range<usize>,
) -> DMatrix<f64> {
    let delta = v.amax().max(1.0);
    let mut out = DMatrix::zeros(model.nv, dofs.len());
    for (c, k) in dofs.enumerate() {
        let (mut vp, mut vm) = (v.clone(), v.clone());
        vp[k] += delta;
        vm[k] -= delta;
        let col = (bias_forces(model, kin, &vp) - bias_forces(model, kin, &vm)) / (2.0 * delta);
        out.set_column(c, &col);
    }
    out
}

/// The free joints of standalone free bodies: a body whose only joint is free and that no
/// other body has as its parent (MuJoCo's `mj_isFreeBody`; a massless child would not count
/// there, and counts here).
pub fn standalone_free_joints(model: &Model) -> Vec<usize> {
    model
        .joints
        .iter()
        .enumerate()
        .filter(|(_, j)| j.kind == JointKind::Free)
        .filter(|(_, j)| {
            let b = j.body;
            model.bodies[b].joints.len() == 1
                && !model
                    .bodies
                    .iter()
                    .enumerate()
                    .any(|(c, body)| c != b && body.parent == b)
        })
        .map(|(i, _)| i)
        .collect()
}

/// The velocity-update matrix `M − h D` of `integrator` (module doc) at the step's start.
///
/// # Panics
/// If `integrator` is not `ImplicitFast` or `Implicit`.
#[allow(clippy::too_many_arguments)]
pub fn update_matrix(
    model: &Model,
    kin: &Kinematics,
    mass: &DMatrix<f64>,
    q: &DVector<f64>,
    v: &DVector<f64>,
    u: &[f64],
    h: f64,
    integrator: Integrator,
) -> DMatrix<f64> {
    let mut d = passive_actuator_velocity_derivative(model, q, v, u);
    match integrator {
        Integrator::Implicit => {
            d -= bias_velocity_jacobian(model, kin, v, 0..model.nv);
        }
        Integrator::ImplicitFast => {
            // Symmetric from the lower triangle (`mju_gather` of qDeriv into M's pattern).
            for r in 0..model.nv {
                for c in r + 1..model.nv {
                    d[(r, c)] = d[(c, r)];
                }
            }
            for j in standalone_free_joints(model) {
                let a = model.joints[j].dof_adr;
                let b = bias_velocity_jacobian(model, kin, v, a..a + 6);
                for c in 0..6 {
                    for r in 0..6 {
                        d[(a + r, a + c)] -= b[(a + r, c)];
                    }
                }
            }
        }
        other => panic!("update_matrix: {other:?} is not a velocity-implicit integrator"),
    }
    mass - d * h
}

/// The accelerations `a = (M − h D)⁻¹ qfrc` of the velocity update (module doc), or `None` when
/// the matrix is singular.
pub fn update_accelerations(matrix: DMatrix<f64>, qfrc: &DVector<f64>) -> Option<DVector<f64>> {
    matrix.lu().solve(qfrc)
}
