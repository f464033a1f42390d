//! Actuator forces in joint space, shared by formulations that treat actuators explicitly.
//!
//! MuJoCo's actuator models (documentation, "Modeling > Actuators"): a motor applies
//! `gear · u`; a position servo `gear · (kp (u − q) − kv q̇)`; a velocity servo
//! `gear · kv (u − q̇)`. Controls are clamped to `ctrl_range` first and actuator forces to
//! `force_range` after, as MuJoCo's `ctrlrange`/`forcerange`.

use nalgebra::DVector;

use crate::model::{ActuatorKind, Model};

/// Clamp `x` to an optional `(min, max)` range.
pub fn clamp_range(x: f64, range: Option<(f64, f64)>) -> f64 {
    match range {
        Some((lo, hi)) => x.clamp(lo, hi),
        None => x,
    }
}

/// Generalized actuator forces (length nv; N or N m) for controls `u` (one per actuator),
/// evaluated explicitly at `(q, v)`. Missing controls count as zero.
pub fn actuator_forces(
    model: &Model,
    q: &DVector<f64>,
    v: &DVector<f64>,
    u: &[f64],
) -> DVector<f64> {
    let mut f = DVector::zeros(model.nv);
    for (i, a) in model.actuators.iter().enumerate() {
        f[model.joints[a.joint].dof_adr] += a.gear * actuator_force(model, i, q, v, u);
    }
    f
}

/// The force of actuator `i` (N or N m, before the gear; clamped to `force_range`) for controls
/// `u` at `(q, v)`, explicitly as in [`actuator_forces`].
pub fn actuator_force(
    model: &Model,
    i: usize,
    q: &DVector<f64>,
    v: &DVector<f64>,
    u: &[f64],
) -> f64 {
    let a = &model.actuators[i];
    let j = &model.joints[a.joint];
    let ctrl = clamp_range(u.get(i).copied().unwrap_or(0.0), a.ctrl_range);
    let (qj, vj) = (q[j.qpos_adr], v[j.dof_adr]);
    let force = match a.kind {
        ActuatorKind::Motor => ctrl,
        ActuatorKind::PositionServo { kp, kv } => kp * (ctrl - qj) - kv * vj,
        ActuatorKind::VelocityServo { kv } => kv * (ctrl - vj),
    };
    clamp_range(force, a.force_range)
}
