//! Constraint rows shared by the formulations: equality constraints, dry friction loss, joint
//! limits and contacts, as rows `(J, pos, J·v)` in MuJoCo's order **equality, frictionloss,
//! limits, contacts** (spec `soft_convex_and_signorini.md` §A0; MuJoCo
//! `engine_core_constraint.c: mj_makeConstraint`, `mj_instantiateEquality`,
//! `mj_instantiateFriction`, `mj_instantiateLimit`, `mj_instantiateContact`).
//!
//! Every row is a linear functional of the generalized velocity: `vel = J·v` (length-nv row `J`,
//! `v` = qvel in the conventions of [`crate::model`]), and is the exact time derivative of the
//! row's position residual `pos` along the motion `q(t) = integrate_positions(q, v, t)` — except
//! where stated (friction loss and contact friction rows have no position residual, pos = 0).
//!
//! Units: translational rows in m and m/s, rotational rows in rad and rad/s (the weld's
//! rotational residual is the vector part of a quaternion, ≈ half the rotation angle, as in
//! MuJoCo). Signs: a limit or contact residual is positive when satisfied (inside the range,
//! separated) and negative when violated; `vel > 0` moves away from violation.
//!
//! What each formulation does with the rows (impedance, reference acceleration, cones, penalty
//! forces) lives in its own module; this module only builds the geometry of the constraints.

use nalgebra::{DMatrix, DVector, Matrix3, Quaternion, UnitQuaternion};

use crate::kinematics::{point_jacobian, Kinematics};
use crate::model::{Equality, JointKind, Model, Vec3};

/// Which side of a joint range a limit row guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitSide {
    /// `dist = q − lo`, `J = +e_dof` (hinge, slide).
    Lower,
    /// `dist = hi − q`, `J = −e_dof` (hinge, slide); for a ball joint `dist = max(range) − θ`
    /// with `J = −axis` on its 3 dofs (θ, axis: the angle and unit axis of its quaternion).
    Upper,
}

/// The component of a contact a contact row constrains (rows of the contact frame `(n, t1, t2)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContactComponent {
    /// Relative translational velocity along the normal n (first geom → second geom).
    Normal,
    /// Relative translational velocity along t1.
    Tangent1,
    /// Relative translational velocity along t2.
    Tangent2,
    /// Relative angular velocity about n (condim 4 and 6).
    Torsional,
    /// Relative angular velocity about t1 (condim 6).
    Rolling1,
    /// Relative angular velocity about t2 (condim 6).
    Rolling2,
}

impl ContactComponent {
    /// The components of a contact of dimensionality `condim` (1, 3, 4 or 6), in MuJoCo's row
    /// order. Any other value gives the frictionless normal only.
    pub fn for_condim(condim: u8) -> &'static [ContactComponent] {
        use ContactComponent::*;
        const ALL: [ContactComponent; 6] =
            [Normal, Tangent1, Tangent2, Torsional, Rolling1, Rolling2];
        match condim {
            3 => &ALL[..3],
            4 => &ALL[..4],
            6 => &ALL[..6],
            _ => &ALL[..1],
        }
    }
}

/// What a row constrains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    /// Component `component` of equality constraint `id` (index into [`Model::equalities`]):
    /// connect 0..3 (world x, y, z); weld 0..3 translation, 3..6 rotation; joint coupling 0.
    Equality {
        /// Index into [`Model::equalities`].
        id: usize,
        /// Row within the constraint.
        component: usize,
    },
    /// Dry friction on dof `dof` (joint `frictionloss` > 0).
    FrictionLoss {
        /// The dof (index into qvel).
        dof: usize,
    },
    /// A side of the range of joint `joint` (index into [`Model::joints`]).
    JointLimit {
        /// Index into [`Model::joints`].
        joint: usize,
        /// Lower or upper side.
        side: LimitSide,
    },
    /// A component of the contact with index `contact` in the caller's contact list.
    Contact {
        /// Index in the caller's contact list.
        contact: usize,
        /// Which component of the contact frame.
        component: ContactComponent,
    },
}

/// One constraint row.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstraintRow {
    /// What the row constrains.
    pub kind: RowKind,
    /// The Jacobian row (length nv): `vel = jac · qvel`.
    pub jac: DVector<f64>,
    /// Position residual (m or rad): equality residual component; limit distance (positive
    /// inside the range); contact gap on the normal row (negative in penetration); 0 for
    /// friction loss and contact friction rows (MuJoCo stores 0 there for elliptic cones).
    pub pos: f64,
    /// Velocity `jac · v` (m/s or rad/s) at the velocities the rows were built with.
    pub vel: f64,
    /// The velocity-product term `J̇ v` of the row's residual (m/s² or rad/s²): the residual's
    /// acceleration at zero `qacc`, so that `r̈ = jac · qacc + jdotv`. Set on the rows of connect
    /// and weld equalities (MuJoCo's `mj_Jdotv`, `engine_core_constraint.c`, which subtracts it
    /// from their reference acceleration); 0 on every other row.
    pub jdotv: f64,
}

impl ConstraintRow {
    fn new(kind: RowKind, jac: DVector<f64>, pos: f64, v: &DVector<f64>) -> Self {
        let vel = jac.dot(v);
        Self {
            kind,
            jac,
            pos,
            vel,
            jdotv: 0.0,
        }
    }
}

/// `J̇ v` of a weld's rotation rows (body semantic, torque scale 1): the time derivative, at
/// fixed `v`, of `½ vec(q̄₂ ⊗ (0, ω₁ − ω₂) ⊗ q₁ r)` (r = relquat, q̄ the conjugate), by the
/// product rule: `½ vec(q̄̇₂ ⊗ (0, Δω) ⊗ q₁ r + q̄₂ ⊗ (0, Δc) ⊗ q₁ r + q̄₂ ⊗ (0, Δω) ⊗ q̇₁ r)`
/// with `q̇ = ½ (0, ω) ⊗ q` (world-frame ω) and `Δc` the bodies' angular velocity-product
/// accelerations. MuJoCo's `mj_Jdotv`, weld branch (`engine_core_constraint.c`).
fn weld_rotation_jdotv(
    kin: &Kinematics,
    vel: &[crate::kinematics::Spatial],
    bias: &[crate::kinematics::Spatial],
    b1: usize,
    b2: usize,
    relquat: &crate::model::Quat,
) -> crate::model::Vec3 {
    use nalgebra::Quaternion;
    let ang = |s: &crate::kinematics::Spatial| Quaternion::new(0.0, s[0], s[1], s[2]);
    let (w1, w2) = (ang(&vel[b1]), ang(&vel[b2]));
    let dw = w1 - w2;
    let dc = ang(&bias[b1]) - ang(&bias[b2]);
    let (q1, q2, r) = (
        *kin.xquat[b1].quaternion(),
        *kin.xquat[b2].quaternion(),
        *relquat.quaternion(),
    );
    let q1r = q1 * r;
    let q2dot = w2 * q2 * 0.5;
    let q1dot_r = w1 * q1 * 0.5 * r;
    let t =
        q2dot.conjugate() * dw * q1r + q2.conjugate() * dc * q1r + q2.conjugate() * dw * q1dot_r;
    t.imag() * 0.5
}

/// `J̇ v` of the world point fixed on body `b` that is at `p` now: its acceleration at zero
/// `qacc`, `c_lin + c_ang × p + ω × (v_O + ω × p)`, with `(ω, v_O)` the body's spatial velocity
/// and `(c_ang, c_lin)` its velocity-product acceleration (both about the world origin;
/// [`crate::dynamics::bias_accelerations`]). MuJoCo's `mj_jacDot` times `qvel`.
pub fn point_jdotv(
    vel: &[crate::kinematics::Spatial],
    bias: &[crate::kinematics::Spatial],
    b: usize,
    p: &crate::model::Vec3,
) -> crate::model::Vec3 {
    use crate::model::Vec3;
    let (w, vo) = (
        Vec3::new(vel[b][0], vel[b][1], vel[b][2]),
        Vec3::new(vel[b][3], vel[b][4], vel[b][5]),
    );
    let (ca, cl) = (
        Vec3::new(bias[b][0], bias[b][1], bias[b][2]),
        Vec3::new(bias[b][3], bias[b][4], bias[b][5]),
    );
    cl + ca.cross(p) + w.cross(&(vo + w.cross(p)))
}

/// Stack the rows' Jacobians into an `nrows × nv` matrix (row order preserved).
pub fn stack_jacobian(rows: &[ConstraintRow], nv: usize) -> DMatrix<f64> {
    let mut j = DMatrix::zeros(rows.len(), nv);
    for (i, r) in rows.iter().enumerate() {
        j.set_row(i, &r.jac.transpose());
    }
    j
}

fn unit(nv: usize, d: usize, s: f64) -> DVector<f64> {
    let mut e = DVector::zeros(nv);
    e[d] = s;
    e
}

/// Equality rows for all of the model's equality constraints, in model order.
///
/// * Connect (3 rows): `pos = p1 − p2` (world, m) with `p1 = x1 + R1·anchor` and
///   `p2 = x2 + R2·eq_anchor2`; `J = J_p(body1, p1) − J_p(body2, p2)` (MuJoCo's sign,
///   "opposite of contact").
/// * Weld (6 rows): translation `pos = x1 − (x2 + R2·relpos)` with
///   `J = J_p(body1, x1) − J_p(body2, x2 + R2·relpos)`; rotation `pos = vec(e)`,
///   `e = q2⁻¹ ⊗ q1 ⊗ relquat⁻¹` (identity when satisfied), with the exact derivative
///   `J = ½ (e_w·1 − [e_v]×) R2ᵀ (J_ω1 − J_ω2)` (MuJoCo's weld, torquescale 1, writes the
///   same with its relpose convention).
/// * Joint coupling (1 row): `pos = (q1 − ref1) − Σ_k c_k (q2 − ref2)^k`,
///   `J = e_dof1 − (Σ_k k c_k (q2 − ref2)^(k−1)) e_dof2`.
///
/// `kin` must be the kinematics at `q`; `v` gives `vel`.
pub fn equality_rows(
    model: &Model,
    kin: &Kinematics,
    q: &DVector<f64>,
    v: &DVector<f64>,
) -> Vec<ConstraintRow> {
    let nv = model.nv;
    let mut rows = Vec::new();
    let (vel, bias) = if model
        .equalities
        .iter()
        .any(|e| matches!(e, Equality::Connect { .. } | Equality::Weld { .. }))
    {
        crate::dynamics::bias_accelerations(model, kin, v)
    } else {
        (Vec::new(), Vec::new())
    };
    for (id, eq) in model.equalities.iter().enumerate() {
        let kind = |component| RowKind::Equality { id, component };
        match eq {
            Equality::Connect {
                body1,
                body2,
                anchor,
                ..
            } => {
                let p1 = kin.xpos[*body1] + kin.xquat[*body1] * anchor;
                let p2 = kin.xpos[*body2] + kin.xquat[*body2] * model.eq_anchor2[id];
                let j = point_jacobian(model, kin, *body1, &p1).0
                    - point_jacobian(model, kin, *body2, &p2).0;
                let r = p1 - p2;
                let jdv =
                    point_jdotv(&vel, &bias, *body1, &p1) - point_jdotv(&vel, &bias, *body2, &p2);
                for c in 0..3 {
                    let mut row = ConstraintRow::new(kind(c), j.row(c).transpose(), r[c], v);
                    row.jdotv = jdv[c];
                    rows.push(row);
                }
            }
            Equality::Weld {
                body1,
                body2,
                anchor,
                relpos,
                relquat,
                torquescale,
                ..
            } => {
                // MuJoCo's weld (`mj_instantiateEquality`, body semantic): body1's point
                // `relpos` stays on body2's point `anchor`.
                let p1 = kin.xpos[*body1] + kin.xquat[*body1] * relpos;
                let p2 = kin.xpos[*body2] + kin.xquat[*body2] * anchor;
                let (jl1, ja1) = point_jacobian(model, kin, *body1, &p1);
                let (jl2, ja2) = point_jacobian(model, kin, *body2, &p2);
                let jt = jl1 - jl2;
                let r = p1 - p2;
                let jdv =
                    point_jdotv(&vel, &bias, *body1, &p1) - point_jdotv(&vel, &bias, *body2, &p2);
                for c in 0..3 {
                    let mut row = ConstraintRow::new(kind(c), jt.row(c).transpose(), r[c], v);
                    row.jdotv = jdv[c];
                    rows.push(row);
                }
                // Orientation error conj(q2) q1 relquat (identity when q2 = q1 relquat).
                let e = kin.xquat[*body2].inverse() * kin.xquat[*body1] * relquat;
                let (ew, ev) = (e.w, e.imag());
                let r2t = kin.xquat[*body2]
                    .to_rotation_matrix()
                    .into_inner()
                    .transpose();
                let jr = 0.5
                    * *torquescale
                    * (Matrix3::identity() * ew - crate::dynamics::skew(&ev))
                    * r2t
                    * (ja1 - ja2);
                let jrdv = weld_rotation_jdotv(kin, &vel, &bias, *body1, *body2, relquat);
                for c in 0..3 {
                    let mut row = ConstraintRow::new(
                        kind(3 + c),
                        jr.row(c).transpose(),
                        torquescale * ev[c],
                        v,
                    );
                    row.jdotv = torquescale * jrdv[c];
                    rows.push(row);
                }
            }
            Equality::Joint {
                joint1,
                joint2,
                polycoef,
                ..
            } => {
                let (j1, j2) = (&model.joints[*joint1], &model.joints[*joint2]);
                let x = q[j2.qpos_adr] - model.qpos0[j2.qpos_adr];
                let (mut poly, mut dpoly, mut xk) = (0.0, 0.0, 1.0);
                for (k, c) in polycoef.iter().enumerate() {
                    poly += c * xk;
                    if k + 1 < polycoef.len() {
                        dpoly += (k + 1) as f64 * polycoef[k + 1] * xk;
                    }
                    xk *= x;
                }
                let r = q[j1.qpos_adr] - model.qpos0[j1.qpos_adr] - poly;
                let mut jac = unit(nv, j1.dof_adr, 1.0);
                jac[j2.dof_adr] -= dpoly;
                rows.push(ConstraintRow::new(kind(0), jac, r, v));
            }
        }
    }
    rows
}

/// Friction-loss rows: one per dof whose joint has `frictionloss > 0`, in dof order, with
/// `J = e_dof`, `pos = 0` (MuJoCo `mj_instantiateFriction`; the friction bound η is the joint's
/// `frictionloss`, N or N m).
pub fn friction_loss_rows(model: &Model, v: &DVector<f64>) -> Vec<ConstraintRow> {
    (0..model.nv)
        .filter(|&d| model.joints[model.dof_joint[d]].frictionloss > 0.0)
        .map(|d| {
            ConstraintRow::new(
                RowKind::FrictionLoss { dof: d },
                unit(model.nv, d, 1.0),
                0.0,
                v,
            )
        })
        .collect()
}

/// The rotation angle θ ∈ [0, π] (rad) and unit axis of the scalar-first quaternion at
/// `q[adr..adr + 4]` (MuJoCo `mju_quat2Vel` with h = 1). The axis is x for θ = 0.
pub fn quat_angle_axis(q: &DVector<f64>, adr: usize) -> (f64, Vec3) {
    let quat = UnitQuaternion::from_quaternion(Quaternion::new(
        q[adr],
        q[adr + 1],
        q[adr + 2],
        q[adr + 3],
    ));
    match quat.axis_angle() {
        Some((axis, angle)) => (angle, axis.into_inner()),
        None => (0.0, Vec3::x()),
    }
}

/// Joint-limit rows for every limited joint, in joint order, lower before upper (MuJoCo
/// `mj_instantiateLimit`, spec §A4):
///
/// * hinge/slide: lower `dist = q − lo`, `J = +e_dof`; upper `dist = hi − q`, `J = −e_dof`
///   (rad or m);
/// * ball: one [`LimitSide::Upper`] row, `dist = max(range) − θ`, `J = −axis` on the joint's 3
///   dofs, θ and axis from [`quat_angle_axis`] (θ̇ = axis·ω in the body frame);
/// * free joints have no limits.
///
/// A row exists only where `dist < jnt.margin + extra_margin` (m or rad; MuJoCo's `jnt_margin`,
/// 0 by default; `extra_margin` widens the activation for tests and diagnostics, 0 in a step).
pub fn limit_rows(
    model: &Model,
    q: &DVector<f64>,
    v: &DVector<f64>,
    extra_margin: f64,
) -> Vec<ConstraintRow> {
    let nv = model.nv;
    let mut rows = Vec::new();
    for (ji, j) in model.joints.iter().enumerate() {
        let Some((lo, hi)) = j.range else { continue };
        let margin = j.margin + extra_margin;
        match j.kind {
            JointKind::Hinge | JointKind::Slide => {
                let x = q[j.qpos_adr];
                for (side, dist, sign) in [
                    (LimitSide::Lower, x - lo, 1.0),
                    (LimitSide::Upper, hi - x, -1.0),
                ] {
                    if dist < margin {
                        let kind = RowKind::JointLimit { joint: ji, side };
                        rows.push(ConstraintRow::new(kind, unit(nv, j.dof_adr, sign), dist, v));
                    }
                }
            }
            JointKind::Ball => {
                let (theta, axis) = quat_angle_axis(q, j.qpos_adr);
                let dist = lo.max(hi) - theta;
                if dist < margin {
                    let mut jac = DVector::zeros(nv);
                    for i in 0..3 {
                        jac[j.dof_adr + i] = -axis[i];
                    }
                    let kind = RowKind::JointLimit {
                        joint: ji,
                        side: LimitSide::Upper,
                    };
                    rows.push(ConstraintRow::new(kind, jac, dist, v));
                }
            }
            JointKind::Free => {}
        }
    }
    rows
}

/// The rows of one contact, in the order of [`ContactComponent::for_condim`].
///
/// * `contact`: the contact's index in the caller's list (recorded in [`RowKind::Contact`]).
/// * `bodies`: the bodies of the contact's first and second geom (n points from the first to
///   the second, as in MuJoCo); body 0 is the world.
/// * `point`: the contact point (world, m); `frame`: rows `(n, t1, t2)` (orthonormal, world).
/// * `gap`: the signed distance (m, negative in penetration), the normal row's `pos`.
/// * `condim`: 1, 3, 4 or 6.
///
/// Translational rows: `frame_k · (J_p(body2, point) − J_p(body1, point))`, the relative
/// velocity of the two bodies' material points at `point` (second minus first, so the normal
/// velocity is positive when separating); torsional `n · (J_ω2 − J_ω1)`; rolling
/// `t1 · (J_ω2 − J_ω1)`, `t2 · (J_ω2 − J_ω1)` (MuJoCo `mj_contactJacobian`). Friction rows
/// have `pos = 0`.
#[allow(clippy::too_many_arguments)]
pub fn contact_rows(
    model: &Model,
    kin: &Kinematics,
    v: &DVector<f64>,
    contact: usize,
    bodies: [usize; 2],
    point: &Vec3,
    frame: &Matrix3<f64>,
    gap: f64,
    condim: u8,
) -> Vec<ConstraintRow> {
    let (jl1, ja1) = point_jacobian(model, kin, bodies[0], point);
    let (jl2, ja2) = point_jacobian(model, kin, bodies[1], point);
    let (jl, ja) = (jl2 - jl1, ja2 - ja1);
    ContactComponent::for_condim(condim)
        .iter()
        .map(|&component| {
            use ContactComponent::*;
            let (axis, jac, pos) = match component {
                Normal => (0, &jl, gap),
                Tangent1 => (1, &jl, 0.0),
                Tangent2 => (2, &jl, 0.0),
                Torsional => (0, &ja, 0.0),
                Rolling1 => (1, &ja, 0.0),
                Rolling2 => (2, &ja, 0.0),
            };
            let row = (frame.row(axis) * jac).transpose();
            ConstraintRow::new(RowKind::Contact { contact, component }, row, pos, v)
        })
        .collect()
}

/// The model's non-contact rows in MuJoCo's order: equality, friction loss, limits (with limit
/// activation widened by `limit_margin`, m or rad, see [`limit_rows`]). Contact rows ([`contact_rows`]) go after these.
pub fn model_rows(
    model: &Model,
    kin: &Kinematics,
    q: &DVector<f64>,
    v: &DVector<f64>,
    limit_margin: f64,
) -> Vec<ConstraintRow> {
    let mut rows = equality_rows(model, kin, q, v);
    rows.extend(friction_loss_rows(model, v));
    rows.extend(limit_rows(model, q, v, limit_margin));
    rows
}
