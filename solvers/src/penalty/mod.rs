//! `penalty`: spring-damper contact integrated with semi-implicit (symplectic) Euler.
//!
//! The reference law is Newton's `SolverSemiImplicit` (≡ warp.sim's Euler integrator), spec
//! `ncp_fb_and_penalty.md` §4, carried over to generalized coordinates:
//!
//! 1. Collide at `q_n` (parry3d-f64, [`crate::collision::detect`]).
//! 2. Forces at `(q_n, v_n)`: contact forces by [`law::contact_force`] with the pair's mean
//!    material (§4.1), joint limits as one-sided springs with damping, joint friction loss as a
//!    viscous-regularized dry friction, passive joint springs and damping, actuators as explicit
//!    PD servos or motors (§4.2), minus the bias forces c(q, v) (gravity, Coriolis).
//! 3. `v_{n+1} = v_n + h M(q_n)⁻¹ τ`, then angular velocities of free and ball joints are scaled
//!    by `(1 − angular_damping·h)` (§4.3 step 5; warp applies it after the position update,
//!    which is equivalent for the next step's forces but not for this step's positions; we
//!    damp before integrating positions so the stored state is consistent).
//! 4. `q_{n+1} = integrate(q_n, v_{n+1}, h)` (positions from the **new** velocities).
//!
//! Divergence (a non-finite state or a mass matrix that is not positive definite) is reported
//! in the [`StepReport`], never a panic.
//!
//! The model's `<flag>` options are honoured as soft_convex honours them (MuJoCo
//! `mjtDisableBit`): `gravity` (no gravity in the bias forces, [`smooth_forces`]), `contact`
//! (no collision), `limit` (no joint-limit springs), `frictionloss` (no joint friction loss);
//! `equality` has nothing to switch off, and `warmstart`/`refsafe` concern solvers and solref,
//! which penalty has not. A contact of condim 1 is frictionless (MuJoCo's meaning), whatever
//! `mu`.
//!
//! Not modelled, and listed by [`Formulation::ignored_features`] for a given model: equality
//! constraints (Newton's attachment springs would be the analogue; the model is stepped
//! without them), limits and friction loss of ball and free joints (the springs above act on
//! hinge and slide joints), torsional and rolling friction (condim 4 and 6 act as 3), the
//! model's `integrator` option, and what collision detection does not handle
//! ([`crate::features::collision`]).
//!
//! Stability (§4.5): roughly `h < 2/√(k_eff/m_eff)` and `h < 2 m_eff / c_eff`, with k_eff and
//! c_eff summed over parallel contacts and m_eff including the rotational term r²/I.

pub mod law;

use nalgebra::{DMatrix, DVector, Matrix3};
use serde::{Deserialize, Serialize};

use crate::actuation::actuator_forces;
use crate::collision::{detect, Contact};
use crate::dynamics::{integrate_positions, mass_matrix, smooth_forces};
use crate::formulation::{
    parse_params, ContactRecord, Formulation, FormulationEntry, ParamDoc, StepReport,
};
use crate::kinematics::{forward_kinematics, point_jacobian};
use crate::model::{JointKind, Model, State, Vec3};
use law::{contact_force, FrictionLaw, PenaltyCoefficients};

/// Parameters of the penalty formulation. Contact stiffness, damping and friction come from the
/// geoms' materials (mean over the pair) unless overridden here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PenaltyParams {
    /// Friction law: `normalized` (default: viscous-regularized Coulomb, exact μN cap) or
    /// `huber` (Newton/warp.sim's law, for parity: its cap is not μN — about 2μN at a slip of δ
    /// and 1.33μN at 2 m/s with δ = 1 m/s — and its force falls with slip speed, which makes a
    /// sliding box hop and stop 45 % short on box_slide).
    pub friction: FrictionLaw,
    /// Huber smoothing δ of the slip speed (m/s); Newton's `friction_smoothing`. Acts only
    /// with `friction: huber` (an error with `normalized`); `None`: 1 m/s
    /// ([`PenaltyParams::FRICTION_SMOOTHING`]).
    pub friction_smoothing: Option<f64>,
    /// Angular velocity damping rate (1/s) on free and ball joints; warp.sim/Newton use 0.05.
    pub angular_damping: f64,
    /// Joint-limit spring stiffness (N/m or N m/rad).
    pub limit_ke: f64,
    /// Joint-limit damping (N s/m or N m s/rad), acting while moving further past the limit.
    pub limit_kd: f64,
    /// Viscosity regularizing joint friction loss (N s/m or N m s/rad).
    pub frictionloss_kv: f64,
    /// Override of the contact stiffness ke (N/m) for every pair.
    pub ke: Option<f64>,
    /// Override of the contact damping kd (N s/m).
    pub kd: Option<f64>,
    /// Override of the viscous friction coefficient kf (N s/m).
    pub kf: Option<f64>,
    /// Override of the adhesion distance ka (m).
    pub ka: Option<f64>,
    /// Override of the sliding friction coefficient μ (-) of every contact but those of condim
    /// 1, which stay frictionless.
    pub mu: Option<f64>,
}

impl Default for PenaltyParams {
    fn default() -> Self {
        Self {
            friction: FrictionLaw::Normalized,
            friction_smoothing: None,
            angular_damping: 0.0,
            limit_ke: 1e4,
            limit_kd: 10.0,
            frictionloss_kv: 1e3,
            ke: None,
            kd: None,
            kf: None,
            ka: None,
            mu: None,
        }
    }
}

/// Parameter documentation, in the order of [`PenaltyParams`]; a test checks it against the
/// struct's defaults.
pub const PARAMS: &[ParamDoc] = &[
    ParamDoc { name: "friction", default: "normalized", unit: "-", doc: "friction law: normalized (Coulomb, cap exactly mu*N) or huber (Newton's law, for parity; not Coulomb)" },
    ParamDoc { name: "friction_smoothing", default: "1.0", unit: "m/s", doc: "Huber smoothing of the slip speed (only with friction: huber; an error otherwise)" },
    ParamDoc { name: "angular_damping", default: "0.0", unit: "1/s", doc: "damping rate of free/ball angular velocity (warp.sim uses 0.05)" },
    ParamDoc { name: "limit_ke", default: "10000.0", unit: "N/m or N m/rad", doc: "joint-limit spring stiffness" },
    ParamDoc { name: "limit_kd", default: "10.0", unit: "N s/m or N m s/rad", doc: "joint-limit damping while moving past the limit" },
    ParamDoc { name: "frictionloss_kv", default: "1000.0", unit: "N s/m or N m s/rad", doc: "viscosity regularizing joint friction loss" },
    ParamDoc { name: "ke", default: "material", unit: "N/m", doc: "override contact stiffness (default: mean of the geoms' ke)" },
    ParamDoc { name: "kd", default: "material", unit: "N s/m", doc: "override contact damping" },
    ParamDoc { name: "kf", default: "material", unit: "N s/m", doc: "override viscous friction coefficient" },
    ParamDoc { name: "ka", default: "material", unit: "m", doc: "override adhesion distance" },
    ParamDoc { name: "mu", default: "material", unit: "-", doc: "override sliding friction coefficient (condim-1 contacts stay frictionless)" },
];

/// Registry entry.
pub const ENTRY: FormulationEntry = FormulationEntry {
    name: "penalty",
    description: "spring-damper contact (Newton/warp.sim law), semi-implicit Euler",
    params: PARAMS,
    build: |v| {
        let p: PenaltyParams = parse_params("penalty", v)?;
        Penalty::new(p).map(|f| Box::new(f) as Box<dyn Formulation>)
    },
};

impl PenaltyParams {
    /// The Huber smoothing δ (m/s) when `friction_smoothing` is not given.
    pub const FRICTION_SMOOTHING: f64 = 1.0;

    /// The Huber smoothing δ in effect (m/s).
    pub fn smoothing(&self) -> f64 {
        self.friction_smoothing.unwrap_or(Self::FRICTION_SMOOTHING)
    }
}

/// The penalty formulation.
#[derive(Debug, Clone)]
pub struct Penalty {
    /// Parameters.
    pub params: PenaltyParams,
}

impl Penalty {
    /// Build with validated parameters.
    ///
    /// # Errors
    /// A parameter out of its domain (negative stiffness, non-positive smoothing, ...), or
    /// `friction_smoothing` given with `friction: normalized` (which does not use it).
    pub fn new(params: PenaltyParams) -> Result<Self, crate::formulation::FormulationError> {
        let bad = |what: &str, v: f64| crate::formulation::FormulationError::BadParams {
            name: "penalty".into(),
            message: format!("{what} = {v} must be finite and >= 0"),
        };
        let checks = [
            ("friction_smoothing", params.friction_smoothing),
            ("angular_damping", Some(params.angular_damping)),
            ("limit_ke", Some(params.limit_ke)),
            ("limit_kd", Some(params.limit_kd)),
            ("frictionloss_kv", Some(params.frictionloss_kv)),
            ("ke", params.ke),
            ("kd", params.kd),
            ("kf", params.kf),
            ("ka", params.ka),
            ("mu", params.mu),
        ];
        for (what, v) in checks {
            if let Some(v) = v {
                if !(v.is_finite() && v >= 0.0) {
                    return Err(bad(what, v));
                }
            }
        }
        if params.smoothing() <= 0.0 {
            return Err(bad("friction_smoothing (must be > 0)", params.smoothing()));
        }
        if params.friction_smoothing.is_some() && params.friction != FrictionLaw::Huber {
            return Err(crate::formulation::FormulationError::BadParams {
                name: "penalty".into(),
                message: "friction_smoothing: acts only with friction: huber (the normalized law has no smoothing); remove friction_smoothing or set friction: huber".into(),
            });
        }
        Ok(Self { params })
    }

    fn coefficients(&self, c: &Contact) -> PenaltyCoefficients {
        let m = &c.material;
        let p = &self.params;
        PenaltyCoefficients {
            ke: p.ke.unwrap_or(m.ke),
            kd: p.kd.unwrap_or(m.kd),
            kf: p.kf.unwrap_or(m.kf),
            ka: p.ka.unwrap_or(m.ka),
            // condim 1: a frictionless contact (MuJoCo), whatever the override.
            mu: if m.condim == 1 {
                0.0
            } else {
                p.mu.unwrap_or(m.penalty_mu)
            },
        }
    }

    /// Joint-limit and friction-loss forces (length nv) on hinge and slide joints; none for
    /// the stages the model disables (`limit`, `frictionloss`).
    fn joint_forces(&self, model: &Model, q: &DVector<f64>, v: &DVector<f64>) -> DVector<f64> {
        let p = &self.params;
        let off = model.options.disable;
        let mut f = DVector::zeros(model.nv);
        for j in &model.joints {
            if !matches!(j.kind, JointKind::Hinge | JointKind::Slide) {
                continue;
            }
            let (qj, vj, d) = (q[j.qpos_adr], v[j.dof_adr], j.dof_adr);
            if let Some((lo, hi)) = j.range.filter(|_| !off.limit) {
                if qj < lo {
                    f[d] += p.limit_ke * (lo - qj) - p.limit_kd * vj.min(0.0);
                } else if qj > hi {
                    f[d] += p.limit_ke * (hi - qj) - p.limit_kd * vj.max(0.0);
                }
            }
            if j.frictionloss > 0.0 && vj != 0.0 && !off.frictionloss {
                f[d] -= vj.signum() * (p.frictionloss_kv * vj.abs()).min(j.frictionloss);
            }
        }
        f
    }
}

/// One contact's relative-velocity Jacobian (3 × nv): velocity of geom 2's point minus geom 1's.
fn relative_jacobian(
    model: &Model,
    kin: &crate::kinematics::Kinematics,
    c: &Contact,
) -> DMatrix<f64> {
    let (j2, _) = point_jacobian(model, kin, c.bodies[1], &c.point);
    let (j1, _) = point_jacobian(model, kin, c.bodies[0], &c.point);
    j2 - j1
}

impl Formulation for Penalty {
    fn name(&self) -> &'static str {
        "penalty"
    }

    fn step(&mut self, model: &Model, state: &mut State, u: &[f64], h: f64) -> StepReport {
        if !state.is_finite() {
            return StepReport::explicit(Vec::new()).check_divergence(state);
        }
        let kin = forward_kinematics(model, &state.q);
        let contacts = if model.options.disable.contact {
            Vec::new()
        } else {
            detect(model, &kin)
        };
        // passive − bias + actuation, gravity removed when the model disables it.
        let actuation = actuator_forces(model, &state.q, &state.v, u);
        let mut tau = smooth_forces(model, &kin, &state.q, &state.v, &actuation)
            + self.joint_forces(model, &state.q, &state.v);

        // Contact forces at (q_n, v_n).
        let mut active: Vec<(Contact, DMatrix<f64>, Vec3)> = Vec::new();
        for c in contacts {
            let coef = self.coefficients(&c);
            let d = c.gap - c.material.margin;
            if d >= coef.ka.max(0.0) {
                continue;
            }
            let jrel = relative_jacobian(model, &kin, &c);
            let vrel: Vec3 = (&jrel * &state.v).fixed_rows::<3>(0).into_owned();
            let n = c.normal();
            let (fnormal, ft) = contact_force(
                &coef,
                self.params.friction,
                self.params.smoothing(),
                &n,
                d,
                &vrel,
            );
            let force = n * fnormal + ft;
            tau += jrel.transpose() * force;
            active.push((c, jrel, force));
        }

        let mass = mass_matrix(model, &kin);
        let Some(chol) = mass.cholesky() else {
            return StepReport {
                diverged: Some(format!(
                    "mass matrix not positive definite at t = {:.6} s",
                    state.t
                )),
                ..StepReport::explicit(Vec::new())
            };
        };
        let acc = chol.solve(&tau);
        state.v += acc * h;
        if self.params.angular_damping > 0.0 {
            let scale = 1.0 - self.params.angular_damping * h;
            for j in &model.joints {
                let first = match j.kind {
                    JointKind::Free => j.dof_adr + 3,
                    JointKind::Ball => j.dof_adr,
                    _ => continue,
                };
                for d in first..first + 3 {
                    state.v[d] *= scale;
                }
            }
        }
        let v_new = state.v.clone();
        integrate_positions(model, &mut state.q, &v_new, h);
        state.t += h;

        let records = active
            .into_iter()
            .map(|(c, jrel, force)| {
                let frame: Matrix3<f64> = c.frame;
                let vrel: Vec3 = (&jrel * &v_new).fixed_rows::<3>(0).into_owned();
                ContactRecord {
                    geoms: c.geoms,
                    point: c.point,
                    frame,
                    gap: c.gap,
                    mu: self.coefficients(&c).mu,
                    impulse: frame * force * h,
                    velocity: frame * vrel,
                }
            })
            .collect();
        StepReport::explicit(records).check_divergence(state)
    }

    /// See the module doc.
    fn ignored_features(&self, model: &Model) -> Vec<crate::features::IgnoredFeature> {
        use crate::features as f;
        let mut out = f::collision(model);
        out.extend(f::noslip(
            model,
            "penalty's friction is a viscous spring, it runs no post-solver",
        ));
        out.extend(f::equalities(
            model,
            "not modelled, the model is stepped without them",
        ));
        out.extend(f::limits(
            model,
            &[JointKind::Ball],
            "penalty's limit springs act on hinge and slide joints only",
        ));
        out.extend(f::friction_loss(
            model,
            &[JointKind::Ball, JointKind::Free],
            "penalty's friction loss acts on hinge and slide joints only",
        ));
        out.extend(f::condims(
            model,
            &[4, 6],
            "torsional and rolling friction are not modelled, contacts act as condim 3",
        ));
        out.extend(f::integrator(
            model,
            "penalty integrates with semi-implicit Euler",
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn param_docs_match_defaults() {
        let v = serde_json::to_value(PenaltyParams::default()).unwrap();
        let obj = v.as_object().unwrap();
        assert_eq!(obj.len(), PARAMS.len());
        for doc in PARAMS {
            let val = &obj[doc.name];
            let shown = match val {
                serde_json::Value::Null if doc.name == "friction_smoothing" => {
                    format!("{:?}", PenaltyParams::FRICTION_SMOOTHING)
                }
                serde_json::Value::Null => "material".to_string(),
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => format!("{:?}", n.as_f64().unwrap()),
                other => other.to_string(),
            };
            assert_eq!(shown, doc.default, "parameter {}", doc.name);
        }
    }

    /// `friction_smoothing` used to be accepted and do nothing under `friction: normalized`
    /// (the default law, which has no smoothing): now an error naming it; with `huber` it acts.
    #[test]
    fn friction_smoothing_without_the_huber_law_is_an_error_naming_the_key() {
        use serde_json::json;
        for p in [
            json!({"friction_smoothing": 0.1}),
            json!({"friction_smoothing": 0.1, "friction": "normalized"}),
        ] {
            let err = crate::formulation::build("penalty", &p)
                .err()
                .unwrap()
                .to_string();
            assert!(
                err.starts_with(
                    "formulation 'penalty': friction_smoothing: acts only with friction: huber"
                ),
                "{err}"
            );
        }
        let p: PenaltyParams =
            serde_json::from_value(json!({"friction_smoothing": 0.1, "friction": "huber"}))
                .unwrap();
        assert_eq!(Penalty::new(p).unwrap().params.smoothing(), 0.1);
        assert_eq!(PenaltyParams::default().smoothing(), 1.0);
    }

    #[test]
    fn unknown_and_bad_parameters_are_errors() {
        let err = crate::formulation::build("penalty", &serde_json::json!({"kee": 1.0}))
            .err()
            .unwrap();
        assert!(err.to_string().contains("kee"), "{err}");
        let err = crate::formulation::build("penalty", &serde_json::json!({"ke": -1.0}))
            .err()
            .unwrap();
        assert!(err.to_string().contains("ke"), "{err}");
        let err = crate::formulation::build("nope", &serde_json::Value::Null)
            .err()
            .unwrap();
        assert!(err.to_string().contains("penalty"), "{err}");
    }
}
