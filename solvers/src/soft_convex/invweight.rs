//! Inverse weights at the reference configuration, from which MuJoCo's diagonal approximation
//! `Â` of each row's `J M⁻¹ Jᵀ` is built (spec §A3; `engine_setconst.c: set0`).
//!
//! * `body[b] = (tran, rot)`: means of the translational and rotational diagonal of the 6 × 6
//!   inverse spatial inertia `J_com M⁻¹ J_comᵀ` at the body's COM, at `qpos0`.
//! * `dof[d]`: hinge/slide `(M⁻¹)_dd`; ball: mean of its 3 diagonal entries; free: the mean of
//!   the translational 3 for those dofs and of the rotational 3 for those.
//! * Bodies with `body_simple == 2` (slide-only, axis-aligned, inertial frame = body frame, a
//!   root with no children) get `(1/m, 0)` and their dofs `1/m`, ignoring armature.

use nalgebra::DMatrix;

use super::impedance::MINVAL;
use crate::dynamics::mass_matrix;
use crate::kinematics::{forward_kinematics, point_jacobian};
use crate::model::{JointKind, Model};

/// Inverse weights of bodies and dofs at `qpos0`.
#[derive(Debug, Clone, PartialEq)]
pub struct InvWeights {
    /// Per body `(tran 1/kg, rot 1/(kg m²))`; `(0, 0)` for the world and dof-less bodies.
    pub body: Vec<[f64; 2]>,
    /// Per dof (1/kg or 1/(kg m²)).
    pub dof: Vec<f64>,
    /// `trace(M(qpos0))` (kg and kg m², summed over the dofs): MuJoCo's `meaninertia · nv`, the
    /// inverse of the one-problem solver scale (spec §A5; [`super::monolithic_scale`]).
    pub mass_trace: f64,
}

/// MuJoCo's `body_simple == 2` test (spec §A3, corrected reading).
fn is_simple_slider(model: &Model, b: usize) -> bool {
    let body = &model.bodies[b];
    let parent_ok = body.parent == 0 || {
        let p = &model.bodies[body.parent];
        p.parent == 0 && p.joints.is_empty()
    };
    let has_children = model
        .bodies
        .iter()
        .enumerate()
        .skip(1)
        .any(|(i, c)| i != b && c.parent == b);
    let axis_aligned = |a: &crate::model::Vec3| a.iter().filter(|x| **x != 0.0).count() == 1;
    parent_ok
        && !has_children
        && body.com == crate::model::Vec3::zeros()
        && body.inertia_frame == crate::model::Quat::identity()
        && !body.joints.is_empty()
        && body.joints.iter().all(|&j| {
            let jt = &model.joints[j];
            jt.kind == JointKind::Slide
                && jt.pos == crate::model::Vec3::zeros()
                && axis_aligned(&jt.axis)
        })
}

impl InvWeights {
    /// Compute the inverse weights at `model.qpos0`.
    pub fn new(model: &Model) -> Self {
        let nb = model.bodies.len();
        let kin = forward_kinematics(model, &model.qpos0);
        let m = mass_matrix(model, &kin);
        let minv = m
            .clone()
            .try_inverse()
            .unwrap_or_else(|| DMatrix::from_element(model.nv, model.nv, f64::NAN));
        let mut body = vec![[0.0, 0.0]; nb];
        let mut simple = vec![false; nb];
        for b in 1..nb {
            if crate::kinematics::body_dofs(model, b).is_empty() {
                continue;
            }
            if is_simple_slider(model, b) {
                simple[b] = true;
                body[b] = [1.0 / model.bodies[b].mass.max(MINVAL), 0.0];
                continue;
            }
            let (jl, ja) = point_jacobian(model, &kin, b, &kin.xipos[b]);
            let at = &jl * &minv * jl.transpose();
            let ar = &ja * &minv * ja.transpose();
            body[b] = [at.trace() / 3.0, ar.trace() / 3.0];
        }
        let mut dof = vec![0.0; model.nv];
        for j in &model.joints {
            let d = j.dof_adr;
            if simple[j.body] {
                for k in 0..j.kind.nv() {
                    dof[d + k] = 1.0 / model.bodies[j.body].mass.max(MINVAL);
                }
                continue;
            }
            let mean = |from: usize, n: usize| {
                (from..from + n).map(|k| minv[(k, k)]).sum::<f64>() / n as f64
            };
            match j.kind {
                JointKind::Hinge | JointKind::Slide => dof[d] = minv[(d, d)],
                JointKind::Ball => dof[d..d + 3].fill(mean(d, 3)),
                JointKind::Free => {
                    dof[d..d + 3].fill(mean(d, 3));
                    dof[d + 3..d + 6].fill(mean(d + 3, 3));
                }
            }
        }
        Self {
            body,
            dof,
            mass_trace: m.trace(),
        }
    }
}
