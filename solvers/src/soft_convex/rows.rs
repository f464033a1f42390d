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
use crate::model::{Cone, Equality, Model};

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
    /// Physical contact stiffness mapping (see [`physical_solref`]): `None` keeps each
    /// contact's solref; `Some(overrides)` replaces it by the direct-format solref mapped from
    /// `(ke N/m, kd N s/m)`, each taken from `overrides` or else from the contact's mixed
    /// penalty material.
    pub physical: Option<(Option<f64>, Option<f64>)>,
    /// Stages disabled by the model's `<flag>` options (limits, equalities, friction loss).
    pub disable: crate::model::DisableFlags,
}

/// Direct-format solref `(−K dmax², −B dmax)` that makes a contact hold the static
/// penetration of a spring of stiffness `ke` (N/m) and, in motion, the force of a damper `kd`
/// (N s/m), for a contact whose share of its body pair has inverse effective mass `t` (1/kg).
///
/// Stiffness (spec §A2–§A3; scenarios/tests/reference/README.md, "Resting penetration follows
/// a closed form"): at rest a row with regularizer R and impedance d develops the force
/// `f = K d r / R` for penetration `r` (MuJoCo's `K d r = R f`). A contact's normal force is
/// `f_n = K d r / R_eff`, with `R_eff = R_0 = (1 − d)/d · t` for an elliptic or frictionless
/// contact and `R_eff = R_edge / (2(dim − 1))` for a pyramid of `2(dim − 1)` edges. Requiring
/// `f_n = ke·r` gives **`K = ke R_eff / d`**, exact at rest. The contact's solimp is made flat
/// at its dmax (d = dmax everywhere), so the mapped spring is linear: with MuJoCo's default
/// position-dependent d, `K d` would vary twofold over the 1 mm solimp width and the
/// pyramidal contact was measured to settle into a limit cycle ten times deeper than m g/(4 ke).
///
/// Damping: MuJoCo's soft row is not a spring-damper. Its force is
/// `f = (aref − a_u)/(A + R)` (a_u: the row's unconstrained acceleration, A its inverse mass),
/// so in motion the reference acceleration acts on the effective mass 1/(A + R); the mapping
/// makes the velocity term of aref a force `kd·v` there: **`B = kd (t + R_eff)`**, with `t` the
/// inverse effective mass of the contact's share of its body pair (MuJoCo's translational
/// inverse weights summed over the two bodies, times the number of contacts acting in parallel
/// on that pair), capped at the critical damping of the mapped row:
/// **`B = min(kd (t + R_eff), 2ω)`**, `ω = √(K d t / (t + R_eff))` the row's natural frequency
/// in motion. The cap matters because the mapped row is much softer in motion than the spring
/// (below): a pyramid (μ = 0.3, ke = 1e4 N/m on a 1 kg cube) uncapped is overdamped twentyfold
/// and measured 42 % short of its resting penetration after 10 s. Mapping kd through the static
/// relation instead (`B = kd R_eff`) leaves the row so underdamped that the cube hops off the
/// plane every cycle and never settles (measured: a limit cycle at 25 times the penetration).
///
/// What it cannot preserve: the dynamic stiffness and hence impact penetration and contact
/// duration (MuJoCo's regularized dynamics are softer than the spring for the same static
/// penetration), the exact damping force at impact, and coupling between contacts sharing a
/// body (t is MuJoCo's diagonal approximation at qpos0: exact for a free body's translation,
/// approximate for articulated chains). Friction and tangential compliance are unchanged.
pub fn physical_solref(ke: f64, kd: f64, d: f64, dmax: f64, r_eff: f64, t: f64) -> [f64; 2] {
    let k = ke * r_eff / d;
    let omega = (k * d * t / (t + r_eff)).sqrt();
    let b = (kd * (t + r_eff)).min(2.0 * omega);
    [-k * dmax * dmax, -b * dmax]
}

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

impl Rows {
    /// The rows `rows` restricted to the dofs `dofs` (an island, [`super::islands`]): the
    /// Jacobian's sub-block and the per-row data the solver reads; no contact blocks. `rows`
    /// must keep each cone's rows together and in order (an island does).
    pub fn select(&self, rows: &[usize], dofs: &[usize]) -> Rows {
        let pick =
            |v: &DVector<f64>| DVector::from_iterator(rows.len(), rows.iter().map(|&r| v[r]));
        Rows {
            j: DMatrix::from_fn(rows.len(), dofs.len(), |i, k| self.j[(rows[i], dofs[k])]),
            kinds: rows.iter().map(|&r| self.kinds[r].clone()).collect(),
            r: pick(&self.r),
            d: pick(&self.d),
            aref: pick(&self.aref),
            imp: pick(&self.imp),
            diag_approx: pick(&self.diag_approx),
            contacts: Vec::new(),
        }
    }
}

/// One row before stacking.
struct Row {
    jac: DVector<f64>,
    vel: f64,
    /// `J̇ v` of the residual (connect and weld rows; [`ConstraintRow::jdotv`]).
    jdotv: f64,
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
    fn plain(
        c: ConstraintRow,
        margin: f64,
        diag_approx: f64,
        kind: RowCost,
        solref: [f64; 2],
        solimp: [f64; 5],
    ) -> Self {
        Row {
            vel: c.vel,
            jdotv: c.jdotv,
            pos: c.pos,
            margin,
            imp_at: (c.pos, margin),
            jac: c.jac,
            solref,
            solimp,
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
pub fn assemble(
    model: &Model,
    kin: &Kinematics,
    q: &DVector<f64>,
    v: &DVector<f64>,
    contacts: &[Contact],
    inv: &InvWeights,
    s: &RowSettings,
) -> Rows {
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
        let disabled = match r.kind {
            RowKind::Equality { .. } => s.disable.equality,
            RowKind::FrictionLoss { .. } => s.disable.frictionloss,
            RowKind::JointLimit { .. } => s.disable.limit,
            RowKind::Contact { .. } => false,
        };
        if disabled {
            continue;
        }
        let row = match r.kind {
            RowKind::Equality { id, component } => {
                let da = equality_diag(model, inv, id, component);
                let soft = model.equality_soft.get(id).copied().unwrap_or_default();
                let mut row = Row::plain(r, 0.0, da, RowCost::Equality, soft.solref, soft.solimp);
                row.imp_at = (eq_norm[id].sqrt(), 0.0);
                row
            }
            RowKind::FrictionLoss { dof } => {
                let j = &model.joints[model.dof_joint[dof]];
                let mut row = Row::plain(
                    r,
                    0.0,
                    inv.dof[dof],
                    RowCost::FrictionLoss {
                        eta: j.frictionloss,
                    },
                    j.solref_friction,
                    j.solimp_friction,
                );
                row.no_stiffness = true;
                row
            }
            RowKind::JointLimit { joint, .. } => {
                let j = &model.joints[joint];
                Row::plain(
                    r,
                    j.margin,
                    inv.dof[j.dof_adr],
                    RowCost::Inequality,
                    j.solref_limit,
                    j.solimp_limit,
                )
            }
            RowKind::Contact { .. } => unreachable!("model_rows emits no contact rows"),
        };
        rows.push(row);
    }

    // Contacts (with rows) sharing each body pair: they act in parallel on the same effective
    // mass, which the physical mapping's damping ratio accounts for.
    let pair_count = |bodies: [usize; 2]| {
        contacts
            .iter()
            .filter(|o| {
                o.gap < o.material.margin
                    && (o.bodies == bodies || o.bodies == [bodies[1], bodies[0]])
            })
            .count()
            .max(1)
    };
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
        let frame_rows = contact_rows(
            model, kin, v, ci, c.bodies, &c.point, &c.frame, c.gap, m.condim,
        );
        let jf = DMatrix::from_fn(dim, model.nv, |i, k| frame_rows[i].jac[k]);
        let tran = inv.body[c.bodies[0]][0] + inv.body[c.bodies[1]][0];
        let rot = inv.body[c.bodies[0]][1] + inv.body[c.bodies[1]][1];
        let imp_at = (c.gap, include_margin);
        // A physically mapped contact uses a flat impedance at dmax, so that its spring is linear
        // (a position-dependent d makes the mapped stiffness K·d vary with penetration).
        let solimp = match s.physical {
            None => m.solimp,
            Some(_) => {
                let dmax = super::impedance::clamp_solimp(&m.solimp)[1];
                [dmax, dmax, m.solimp[2], m.solimp[3], m.solimp[4]]
            }
        };
        let (d_normal, _) = impedance(&solimp, c.gap, include_margin);
        let first = rows.len();
        let pyramidal = s.cone == Cone::Pyramidal && dim > 1;
        let solref = match s.physical {
            None => m.solref,
            Some((ke, kd)) => {
                let r_eff = if pyramidal {
                    let mu_reg2 = friction[0] * friction[0] / s.impratio.max(MINVAL);
                    2.0 * mu_reg2 * regularizer(d_normal, tran * (1.0 + friction[0] * friction[0]))
                        / (2.0 * (dim - 1) as f64)
                } else {
                    regularizer(d_normal, tran)
                };
                let dmax = solimp[1];
                physical_solref(
                    ke.unwrap_or(m.ke),
                    kd.unwrap_or(m.kd),
                    d_normal,
                    dmax,
                    r_eff,
                    tran * pair_count(c.bodies) as f64,
                )
            }
        };
        let mk = |jac: DVector<f64>, pos: f64, margin: f64, diag: f64, kind: RowCost| Row {
            vel: jac.dot(v),
            jdotv: 0.0,
            jac,
            pos,
            margin,
            imp_at,
            solref,
            solimp,
            no_stiffness: false,
            diag_approx: diag,
            kind,
            r_override: None,
        };
        if dim == 1 {
            rows.push(mk(
                jf.row(0).transpose(),
                c.gap,
                include_margin,
                tran,
                RowCost::Inequality,
            ));
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
                    (
                        RowCost::Elliptic {
                            dim,
                            mu: mu_reg,
                            mu_j,
                        },
                        c.gap,
                        include_margin,
                    )
                } else {
                    (RowCost::BlockMember, 0.0, 0.0)
                };
                let mut row = mk(jf.row(j).transpose(), pos, margin, da, kind);
                if j > 0 {
                    row.no_stiffness = true;
                    row.r_override =
                        Some(r1 * friction[0] * friction[0] / (friction[j - 1] * friction[j - 1]));
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
        let r = row
            .r_override
            .unwrap_or_else(|| regularizer(d, row.diag_approx));
        out.imp[i] = d;
        out.r[i] = r;
        out.d[i] = 1.0 / r;
        out.diag_approx[i] = row.diag_approx;
        // MuJoCo 4.0.1 subtracts the residual's velocity-product term from the reference
        // acceleration of connect and weld rows (`mj_Jdotv`).
        out.aref[i] = -b * row.vel - k * d * (row.pos - row.margin) - row.jdotv;
        out.kinds.push(row.kind);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinematics::forward_kinematics;
    use crate::model::{Body, Joint, JointKind, ModelParts, Vec3};

    /// A 2 kg slider with range [−0.1, 0.1] m pushed 5 mm past its upper limit at 0.3 m/s: one
    /// limit row whose d, R and aref follow the spec's formulas computed by hand.
    #[test]
    fn limit_row_impedance_regularizer_and_aref_by_hand() {
        let mut parts = ModelParts::default();
        parts.bodies.push(Body::new(
            "slider",
            0,
            Vec3::zeros(),
            2.0,
            Vec3::repeat(0.01),
        ));
        let mut j = Joint::new("x", JointKind::Slide, 1);
        j.axis = Vec3::x();
        j.range = Some((-0.1, 0.1));
        j.solimp_limit = [0.8, 0.95, 0.01, 0.5, 2.0];
        j.solref_limit = [0.05, 0.7];
        parts.joints.push(j);
        let model = Model::new(parts).unwrap();
        let q = DVector::from_element(1, 0.105);
        let v = DVector::from_element(1, 0.3);
        let kin = forward_kinematics(&model, &q);
        let inv = InvWeights::new(&model);
        let h = 0.002;
        let s = RowSettings {
            cone: Cone::Pyramidal,
            impratio: 1.0,
            h,
            refsafe: true,
            physical: None,
            disable: Default::default(),
        };
        let rows = assemble(&model, &kin, &q, &v, &[], &inv, &s);
        assert_eq!(rows.kinds.len(), 1);
        // Upper side: dist = hi − q = −0.005, J = −1, vel = −0.3.
        let (dist, vel) = (-0.005, -0.3);
        // x = |dist|/width = 0.5 = mid: y = x^2/mid = 0.5; d = 0.8 + 0.5·0.15 = 0.875.
        let d = 0.875;
        // body_simple slider: dof_invweight0 = 1/m = 0.5; R = (1 − d)/d · 0.5.
        let r = (1.0 - d) / d * 0.5;
        // K = 1/(dmax² tc² ζ²), B = 2/(dmax tc), tc = max(0.05, 2h) = 0.05.
        let (k, b) = (
            1.0 / (0.95f64.powi(2) * 0.05f64.powi(2) * 0.49),
            2.0 / (0.95 * 0.05),
        );
        let aref = -b * vel - k * d * dist;
        assert!((rows.imp[0] - d).abs() < 1e-15, "d {}", rows.imp[0]);
        assert!((rows.r[0] - r).abs() < 1e-15, "R {}", rows.r[0]);
        assert!(
            (rows.aref[0] - aref).abs() < 1e-10 * aref.abs(),
            "aref {} vs {aref}",
            rows.aref[0]
        );
        assert!((rows.j[(0, 0)] + 1.0).abs() < 1e-15);
    }
}
