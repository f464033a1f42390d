//! Assembly of MuJoCo's constraint rows for one step (spec §A1–§A4; `mj_makeConstraint`,
//! `mj_diagApprox`, `mj_makeImpedance`, `mj_referenceConstraint`): Jacobian, impedance,
//! regularizer R and D, reference acceleration aref, and the cost kind of each row.
//!
//! Row order is MuJoCo's: equality, friction loss, limits, contacts. Contacts are emitted as
//! pyramid edge pairs (`J_n ± μ_k J_k`, k = 1..condim−1) or as an elliptic block
//! `(n, t1, t2, spin, roll1, roll2)` truncated to condim; a frictionless contact is one row.

use nalgebra::{DMatrix, DVector};

use super::cost::RowCost;
use super::impedance::{impedance, reference_coefficients, regularizer, MINMU, MINVAL};
use super::invweight::InvWeights;
use crate::collision::Contact;
use crate::constraint::{contact_rows, model_rows, ConstraintRow, RowKind};
use crate::kinematics::Kinematics;
use crate::model::{Equality, Model};

/// The friction cone approximation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cone {
    /// Pyramid with 2(condim − 1) edges.
    Pyramidal,
    /// Second-order cone with three cost zones.
    Elliptic,
}

/// Step-wide settings that shape the rows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowSettings {
    /// Friction cone.
    pub cone: Cone,
    /// Ratio of frictional to normal impedance (MuJoCo `impratio`), > 0.
    pub impratio: f64,
    /// Timestep (s), used by refsafe.
    pub h: f64,
    /// Raise solref time constants to at least 2h (MuJoCo's `refsafe` flag).
    pub refsafe: bool,
}

/// Default solver parameters of non-contact rows (MuJoCo defaults, spec §A8).
const SOLREF: [f64; 2] = [0.02, 1.0];
const SOLIMP: [f64; 5] = [0.9, 0.95, 0.001, 0.5, 2.0];

/// Where a contact's rows are in the row list.
#[derive(Debug, Clone, PartialEq)]
pub struct ContactBlock {
    /// The contact.
    pub contact: Contact,
    /// First row.
    pub first: usize,
    /// Number of rows (pyramid: 2(dim − 1), elliptic: dim, frictionless: 1).
    pub rows: usize,
    /// Contact dimensionality.
    pub dim: usize,
    /// Friction (slide, slide, spin, roll, roll), each ≥ 1e-5.
    pub friction: [f64; 5],
    /// Whether the block is a pyramid.
    pub pyramidal: bool,
    /// The contact-frame Jacobian rows (dim × nv): n, t1, t2, spin, roll1, roll2.
    pub frame_jacobian: DMatrix<f64>,
}

/// All rows of one step.
#[derive(Debug, Clone)]
pub struct Rows {
    /// Jacobian (nefc × nv).
    pub j: DMatrix<f64>,
    /// Cost kind per row.
    pub kinds: Vec<RowCost>,
    /// Regularizer R per row.
    pub r: DVector<f64>,
    /// D = 1/R per row.
    pub d: DVector<f64>,
    /// Reference acceleration per row.
    pub aref: DVector<f64>,
    /// Impedance per row.
    pub imp: DVector<f64>,
    /// Diagonal approximation Â per row.
    pub diag_approx: DVector<f64>,
    /// The contact blocks, in row order.
    pub contacts: Vec<ContactBlock>,
}

/// One row before stacking.
struct Row {
    jac: DVector<f64>,
    vel: f64,
    pos: f64,
    margin: f64,
    /// (pos, margin) that determine the impedance.
    imp_at: (f64, f64),
    solref: [f64; 2],
    solimp: [f64; 5],
    /// Use K = 0 (friction loss, elliptic friction rows).
    no_stiffness: bool,
    diag_approx: f64,
    kind: RowCost,
    /// Fixed R overriding (1 − d)/d·Â (contact friction adjustment).
    r_override: Option<f64>,
}

impl Row {
    fn plain(c: ConstraintRow, margin: f64, diag_approx: f64, kind: RowCost) -> Self {
        Row {
            vel: c.vel,
            pos: c.pos,
            margin,
            imp_at: (c.pos, margin),
            jac: c.jac,
            solref: SOLREF,
            solimp: SOLIMP,
            no_stiffness: false,
            diag_approx,
            kind,
            r_override: None,
        }
    }
}

fn equality_diag(model: &Model, inv: &InvWeights, id: usize, component: usize) -> f64 {
    match &model.equalities[id] {
        Equality::Connect { body1, body2, .. } => inv.body[*body1][0] + inv.body[*body2][0],
        Equality::Weld { body1, body2, .. } => {
            let k = usize::from(component >= 3);
            inv.body[*body1][k] + inv.body[*body2][k]
        }
        Equality::Joint { joint1, joint2, .. } => {
            inv.dof[model.joints[*joint1].dof_adr] + inv.dof[model.joints[*joint2].dof_adr]
        }
    }
}

/// Assemble every row at the kinematics `kin`, velocities `v`, with the contacts `contacts`.
pub fn assemble(model: &Model, kin: &Kinematics, q: &DVector<f64>, v: &DVector<f64>, contacts: &[Contact], inv: &InvWeights, s: &RowSettings) -> Rows {
    let mut rows: Vec<Row> = Vec::new();
    let base = model_rows(model, kin, q, v, 0.0);
    // Equality impedance uses the norm of the constraint's residual vector.
    let mut eq_norm = vec![0.0f64; model.equalities.len()];
    for r in &base {
        if let RowKind::Equality { id, .. } = r.kind {
            eq_norm[id] += r.pos * r.pos;
        }
    }
    for r in base {
        let row = match r.kind {
            RowKind::Equality { id, component } => {
                let da = equality_diag(model, inv, id, component);
                let mut row = Row::plain(r, 0.0, da, RowCost::Equality);
                row.imp_at = (eq_norm[id].sqrt(), 0.0);
                row
            }
            RowKind::FrictionLoss { dof } => {
                let eta = model.joints[model.dof_joint[dof]].frictionloss;
                let mut row = Row::plain(r, 0.0, inv.dof[dof], RowCost::FrictionLoss { eta });
                row.no_stiffness = true;
                row
            }
            RowKind::JointLimit { joint, .. } => {
                let da = inv.dof[model.joints[joint].dof_adr];
                Row::plain(r, 0.0, da, RowCost::Inequality)
            }
            RowKind::Contact { .. } => unreachable!("model_rows emits no contact rows"),
        };
        rows.push(row);
    }

    let mut blocks = Vec::new();
    for (ci, c) in contacts.iter().enumerate() {
        let m = &c.material;
        let include_margin = m.margin;
        if c.gap >= include_margin {
            continue; // MuJoCo: rows only if dist < includemargin (a contact at dist == 0 is excluded).
        }
        let dim = m.condim as usize;
        let mut friction = m.friction;
        for f in &mut friction {
            *f = f.max(MINMU);
        }
        let frame_rows = contact_rows(model, kin, v, ci, c.bodies, &c.point, &c.frame, c.gap, m.condim);
        let jf = DMatrix::from_fn(dim, model.nv, |i, k| frame_rows[i].jac[k]);
        let tran = inv.body[c.bodies[0]][0] + inv.body[c.bodies[1]][0];
        let rot = inv.body[c.bodies[0]][1] + inv.body[c.bodies[1]][1];
        let imp_at = (c.gap, include_margin);
        let (d_normal, _) = impedance(&m.solimp, c.gap, include_margin);
        let first = rows.len();
        let pyramidal = s.cone == Cone::Pyramidal && dim > 1;
        let mk = |jac: DVector<f64>, pos: f64, margin: f64, diag: f64, kind: RowCost| Row {
            vel: jac.dot(v),
            jac,
            pos,
            margin,
            imp_at,
            solref: m.solref,
            solimp: m.solimp,
            no_stiffness: false,
            diag_approx: diag,
            kind,
            r_override: None,
        };
        if dim == 1 {
            rows.push(mk(jf.row(0).transpose(), c.gap, include_margin, tran, RowCost::Inequality));
        } else if pyramidal {
            let r0 = regularizer(d_normal, tran * (1.0 + friction[0] * friction[0]));
            let mu_reg = friction[0] / s.impratio.max(MINVAL).sqrt();
            let r_edge = 2.0 * mu_reg * mu_reg * r0;
            for k in 1..dim {
                let muk = friction[k - 1];
                let da = tran + muk * muk * if k < 3 { tran } else { rot };
                for sign in [1.0, -1.0] {
                    let jac = (jf.row(0) + sign * muk * jf.row(k)).transpose();
                    let mut row = mk(jac, c.gap, include_margin, da, RowCost::Inequality);
                    row.r_override = Some(r_edge);
                    rows.push(row);
                }
            }
        } else {
            let r0 = regularizer(d_normal, tran);
            let r1 = r0 / s.impratio.max(MINVAL);
            let mu_reg = friction[0] * (r1 / r0).sqrt();
            let mut mu_j = [0.0; 6];
            for j in 1..dim {
                mu_j[j] = friction[j - 1];
            }
            for j in 0..dim {
                let da = if j < 3 { tran } else { rot };
                let (kind, pos, margin) = if j == 0 {
                    (RowCost::Elliptic { dim, mu: mu_reg, mu_j }, c.gap, include_margin)
                } else {
                    (RowCost::EllipticFriction, 0.0, 0.0)
                };
                let mut row = mk(jf.row(j).transpose(), pos, margin, da, kind);
                if j > 0 {
                    row.no_stiffness = true;
                    row.r_override = Some(r1 * friction[0] * friction[0] / (friction[j - 1] * friction[j - 1]));
                }
                rows.push(row);
            }
        }
        blocks.push(ContactBlock {
            contact: *c,
            first,
            rows: rows.len() - first,
            dim,
            friction,
            pyramidal,
            frame_jacobian: jf,
        });
    }

    let n = rows.len();
    let mut out = Rows {
        j: DMatrix::zeros(n, model.nv),
        kinds: Vec::with_capacity(n),
        r: DVector::zeros(n),
        d: DVector::zeros(n),
        aref: DVector::zeros(n),
        imp: DVector::zeros(n),
        diag_approx: DVector::zeros(n),
        contacts: blocks,
    };
    for (i, row) in rows.into_iter().enumerate() {
        out.j.set_row(i, &row.jac.transpose());
        let (d, _) = impedance(&row.solimp, row.imp_at.0, row.imp_at.1);
        let (k, b) = reference_coefficients(&row.solref, &row.solimp, s.h, s.refsafe);
        let k = if row.no_stiffness { 0.0 } else { k };
        let r = row.r_override.unwrap_or_else(|| regularizer(d, row.diag_approx));
        out.imp[i] = d;
        out.r[i] = r;
        out.d[i] = 1.0 / r;
        out.diag_approx[i] = row.diag_approx;
        out.aref[i] = -b * row.vel - k * d * (row.pos - row.margin);
        out.kinds.push(row.kind);
    }
    out
}
