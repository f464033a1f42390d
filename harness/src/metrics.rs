//! The measurements of one run (DESIGN.md, "Measurements"), accumulated step by step
//! ([`Accumulator`]) and written into a results row.
//!
//! Divergence rules, checked after every step, first match wins:
//! 1. the state is non-finite (or the formulation says it diverged);
//! 2. total energy (kinetic + potential) rises above its start by more than the scene's
//!    `energy_allowance` (J);
//! 3. a penetration `-gap` exceeds half the smallest extent of the two geoms in contact, i.e.
//!    the smaller `GeomShape::min_extent` of the pair (which is already half the thinnest
//!    dimension; planes and terrain are unbounded);
//! 4. the speed of a body's centre of mass exceeds the scene's `speed_bound` (m/s).
//!
//! Contact criteria, per contact record `(gap, impulse λ = (λn, λt1, λt2) N s, velocity
//! v = (vn, vt1, vt2) m/s, mu)`, reduced per step by the maximum over contacts, then over the run
//! by the maximum and the mean over steps that have contacts:
//! * Signorini: penetration `max(0, −gap)` (m) and complementarity `|λn · vn|` (J);
//! * Coulomb cone excess `max(0, ‖λt‖ − mu λn)` (N s);
//! * maximum dissipation `|mu λn − ‖λt‖| · ‖vt‖` (J);
//! * NCP criterion `|⟨λ, v + Φ(v)⟩|` with the De Saxcé correction `Φ(v) = (mu ‖vt‖, 0, 0)` (J).

use contactlab_scenarios::Scene;
use contactlab_solvers::dynamics::{
    body_velocities, kinetic_energy, mass_matrix, potential_energy,
};
use contactlab_solvers::kinematics::{ang, forward_kinematics, lin};
use contactlab_solvers::{Model, State, StepReport};

use crate::results::Row;
use crate::trajectory::StateError;

/// Total energy (J): kinetic ½ vᵀ M v plus potential (gravity and joint springs).
pub fn total_energy(model: &Model, state: &State) -> f64 {
    let kin = forward_kinematics(model, &state.q);
    let m = mass_matrix(model, &kin);
    kinetic_energy(&m, &state.v) + potential_energy(model, &kin, &state.q)
}

/// Largest centre-of-mass speed over bodies (m/s) and the body it belongs to.
pub fn max_com_speed(model: &Model, state: &State) -> (f64, usize) {
    let kin = forward_kinematics(model, &state.q);
    let cvel = body_velocities(model, &kin, &state.v);
    let mut best = (0.0, 0);
    for b in 1..model.bodies.len() {
        let v = lin(&cvel[b]) + ang(&cvel[b]).cross(&kin.xipos[b]);
        let s = v.norm();
        if !(s <= best.0) {
            best = (s, b);
        }
    }
    best
}

#[derive(Debug, Default, Clone, Copy)]
struct MaxMean {
    max: f64,
    sum: f64,
    n: usize,
}

impl MaxMean {
    fn add(&mut self, x: f64) {
        self.max = self.max.max(x);
        self.sum += x;
        self.n += 1;
    }
    fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum / self.n as f64
        }
    }
}

/// Everything measured during one run, step by step.
#[derive(Debug, Clone)]
pub struct Accumulator {
    energy_allowance: f64,
    speed_bound: f64,
    /// Per geom, `GeomShape::min_extent` (m).
    extent: Vec<f64>,
    energy0: f64,
    energy: f64,
    energy_rise_max: f64,
    steps: u64,
    t: f64,
    pen_records: MaxMean,
    signorini: MaxMean,
    cone: MaxMean,
    dissipation: MaxMean,
    ncp: MaxMean,
    contacts_max: u64,
    iter_sum: u64,
    iter_max: u64,
    residual_max: f64,
    nonconverged: u64,
    err_sum: [f64; 4],
    err_n: usize,
    err_last: Option<StateError>,
}

impl Accumulator {
    /// Start measuring a run of `scene` from `initial`.
    pub fn new(scene: &Scene, initial: &State) -> Self {
        let e0 = total_energy(&scene.model, initial);
        Self {
            energy_allowance: scene.energy_allowance,
            speed_bound: scene.speed_bound,
            extent: scene
                .model
                .geoms
                .iter()
                .map(|g| g.shape.min_extent())
                .collect(),
            energy0: e0,
            energy: e0,
            energy_rise_max: 0.0,
            steps: 0,
            t: initial.t,
            pen_records: MaxMean::default(),
            signorini: MaxMean::default(),
            cone: MaxMean::default(),
            dissipation: MaxMean::default(),
            ncp: MaxMean::default(),
            contacts_max: 0,
            iter_sum: 0,
            iter_max: 0,
            residual_max: 0.0,
            nonconverged: 0,
            err_sum: [0.0; 4],
            err_n: 0,
            err_last: None,
        }
    }

    /// Record one step (the state after it and its report); returns the divergence reason if a
    /// rule fired.
    pub fn observe(&mut self, model: &Model, state: &State, report: &StepReport) -> Option<String> {
        self.steps += 1;
        // Contact records describe the contacts detected at the step's start: a penetration
        // among them is one of the state at `t_start`, not of the state after the step.
        let t_start = self.t;
        self.t = state.t;
        self.iter_sum += report.iterations as u64;
        self.iter_max = self.iter_max.max(report.iterations as u64);
        if report.residual.is_finite() || report.residual.is_nan() {
            self.residual_max = self.residual_max.max(report.residual);
        }
        self.nonconverged += u64::from(!report.converged);
        self.contacts_max = self.contacts_max.max(report.contacts.len() as u64);
        if let Some(why) = &report.diverged {
            return Some(why.clone());
        }
        if !state.is_finite() {
            return Some(format!("non-finite state at t = {:.6} s", state.t));
        }
        let mut pen_reason = None;
        if !report.contacts.is_empty() {
            let (mut sig, mut cone, mut dis, mut ncp) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
            for c in &report.contacts {
                let pen = (-c.gap).max(0.0);
                self.pen_records.add(pen);
                let (ln, lt) = (
                    c.impulse[0],
                    (c.impulse[1].powi(2) + c.impulse[2].powi(2)).sqrt(),
                );
                let (vn, vt) = (
                    c.velocity[0],
                    (c.velocity[1].powi(2) + c.velocity[2].powi(2)).sqrt(),
                );
                sig = sig.max((ln * vn).abs());
                cone = cone.max((lt - c.mu * ln).max(0.0));
                dis = dis.max((c.mu * ln - lt).abs() * vt);
                ncp = ncp.max((c.impulse.dot(&c.velocity) + ln * c.mu * vt).abs());
                let limit = self
                    .extent
                    .get(c.geoms[0])
                    .copied()
                    .unwrap_or(f64::INFINITY)
                    .min(
                        self.extent
                            .get(c.geoms[1])
                            .copied()
                            .unwrap_or(f64::INFINITY),
                    );
                if pen > limit && pen_reason.is_none() {
                    let name = |g: usize| {
                        model
                            .geoms
                            .get(g)
                            .map_or("?", |g| g.name.as_str())
                            .to_string()
                    };
                    pen_reason = Some(format!(
                        "penetration {pen:.3e} m between geoms '{}' and '{}' exceeds half the smallest extent {limit:.3e} m at t = {t_start:.6} s (in the contacts of the step from there to {:.6} s)",
                        name(c.geoms[0]),
                        name(c.geoms[1]),
                        state.t
                    ));
                }
            }
            self.signorini.add(sig);
            self.cone.add(cone);
            self.dissipation.add(dis);
            self.ncp.add(ncp);
        }
        self.energy = total_energy(model, state);
        let rise = self.energy - self.energy0;
        self.energy_rise_max = self.energy_rise_max.max(rise);
        if rise > self.energy_allowance {
            return Some(format!(
                "total energy rose {rise:.3e} J above its start (allowance {:.3e} J) at t = {:.6} s",
                self.energy_allowance, state.t
            ));
        }
        if pen_reason.is_some() {
            return pen_reason;
        }
        let (speed, body) = max_com_speed(model, state);
        if speed > self.speed_bound {
            return Some(format!(
                "speed {speed:.3e} m/s of body '{}' exceeds the scene's bound {:.3e} m/s at t = {:.6} s",
                model.bodies[body].name, self.speed_bound, state.t
            ));
        }
        None
    }

    /// Record the error against the reference after a step.
    pub fn observe_error(&mut self, e: StateError) {
        for (s, x) in self
            .err_sum
            .iter_mut()
            .zip([e.scalar, e.pos_m, e.rot_rad, e.q])
        {
            *s += x;
        }
        self.err_n += 1;
        self.err_last = Some(e);
    }

    /// Steps recorded so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Steps whose solver did not converge so far.
    pub fn nonconverged(&self) -> u64 {
        self.nonconverged
    }

    /// Write the measured columns into `row`.
    pub fn finish(&self, row: &mut Row) {
        row.set_u64("steps", self.steps);
        row.set_f64("simulated_time_s", self.t);
        row.set_f64("max_penetration_m", self.pen_records.max);
        row.set_f64("mean_penetration_m", self.pen_records.mean());
        row.set_f64("energy_initial_j", self.energy0);
        row.set_f64("energy_final_j", self.energy);
        let drift = self.energy - self.energy0;
        row.set_f64("energy_drift_j", drift);
        row.set_f64(
            "energy_drift_rel",
            if self.energy0 != 0.0 {
                drift / self.energy0.abs()
            } else {
                f64::NAN
            },
        );
        row.set_f64("energy_rise_max_j", self.energy_rise_max);
        let n = self.err_n as f64;
        let (mean, last) = match self.err_last {
            Some(l) if self.err_n > 0 => (
                self.err_sum.map(|s| s / n),
                [l.scalar, l.pos_m, l.rot_rad, l.q],
            ),
            _ => ([f64::NAN; 4], [f64::NAN; 4]),
        };
        row.set_f64("traj_error_mean", mean[0]);
        row.set_f64("traj_error_final", last[0]);
        row.set_f64("traj_pos_error_mean_m", mean[1]);
        row.set_f64("traj_pos_error_final_m", last[1]);
        row.set_f64("traj_rot_error_mean_rad", mean[2]);
        row.set_f64("traj_rot_error_final_rad", last[2]);
        row.set_f64("traj_q_error_mean", mean[3]);
        row.set_f64("traj_q_error_final", last[3]);
        row.set_f64("signorini_complementarity_max_j", self.signorini.max);
        row.set_f64("signorini_complementarity_mean_j", self.signorini.mean());
        row.set_f64("cone_excess_max_ns", self.cone.max);
        row.set_f64("cone_excess_mean_ns", self.cone.mean());
        row.set_f64("dissipation_violation_max_j", self.dissipation.max);
        row.set_f64("dissipation_violation_mean_j", self.dissipation.mean());
        row.set_f64("ncp_max_j", self.ncp.max);
        row.set_f64("ncp_mean_j", self.ncp.mean());
        row.set_u64("contacts_max", self.contacts_max);
        row.set_f64(
            "iterations_mean",
            if self.steps > 0 {
                self.iter_sum as f64 / self.steps as f64
            } else {
                0.0
            },
        );
        row.set_u64("iterations_max", self.iter_max);
        row.set_f64("residual_max", self.residual_max);
        row.set_u64("nonconverged_steps", self.nonconverged);
    }
}

/// Process peak resident set size (MiB), from `/proc/self/status` (`VmHWM`); NaN elsewhere.
pub fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|kb| kb.parse::<f64>().ok())
            })
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}
