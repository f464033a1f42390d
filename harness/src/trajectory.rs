//! Per-step trajectories: recording ([`StepLog`]), the per-step file format shared by
//! `contactlab simulate` and `steps/*.parquet`, reading it back as a reference
//! ([`Trajectory`]), and the state error against a reference ([`state_error`]).
//!
//! File columns, in order: `t` (s), `qpos_0 .. qpos_{nq-1}`, `qvel_0 .. qvel_{nv-1}`,
//! `n_contacts`, `iterations`, `best_iterate` (the iteration whose iterate the step returned),
//! `residual`, `converged` (0 or 1), `diverged` (0 or 1). CSV or Parquet by extension.

use std::path::Path;

use contactlab_solvers::kinematics::quat_at;
use contactlab_solvers::model::JointKind;
use contactlab_solvers::{Model, State, StepReport};
use nalgebra::DVector;
use polars::prelude::*;

use crate::results::{read_frame, write_frame, ResultsError};

/// States over time (a reference, or a recorded run).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trajectory {
    /// Times (s), increasing.
    pub t: Vec<f64>,
    /// Generalized positions at each time (length nq each).
    pub q: Vec<DVector<f64>>,
    /// Generalized velocities at each time (length nv each).
    pub v: Vec<DVector<f64>>,
    /// Compare a run with this reference only at its sample times (recorded data: the error
    /// is a mean over recorded samples), instead of at every step by interpolation.
    pub samples_only: bool,
}

impl Trajectory {
    /// Append a state.
    pub fn push(&mut self, s: &State) {
        self.t.push(s.t);
        self.q.push(s.q.clone());
        self.v.push(s.v.clone());
    }

    /// The state at time `t` by linear interpolation between samples (quaternions are
    /// re-normalized when read); `None` outside the recorded span (beyond half a step of
    /// tolerance).
    pub fn at(&self, t: f64) -> Option<State> {
        let n = self.t.len();
        if n == 0 {
            return None;
        }
        let span = if n > 1 {
            self.t[n - 1] - self.t[n - 2]
        } else {
            0.0
        };
        if t < self.t[0] - 1e-9 || t > self.t[n - 1] + 0.5 * span + 1e-9 {
            return None;
        }
        let i = self.t.partition_point(|&x| x <= t);
        if i == 0 {
            return Some(State {
                q: self.q[0].clone(),
                v: self.v[0].clone(),
                t,
            });
        }
        if i >= n {
            return Some(State {
                q: self.q[n - 1].clone(),
                v: self.v[n - 1].clone(),
                t,
            });
        }
        let (t0, t1) = (self.t[i - 1], self.t[i]);
        let a = if t1 > t0 { (t - t0) / (t1 - t0) } else { 0.0 };
        let q = &self.q[i - 1] * (1.0 - a) + &self.q[i] * a;
        let v = &self.v[i - 1] * (1.0 - a) + &self.v[i] * a;
        Some(State { q, v, t })
    }

    /// Read a trajectory file (see the module doc for columns).
    ///
    /// # Errors
    /// Unreadable file, not a regular file, over
    /// [`contactlab_scenarios::limits::MAX_TABLE_BYTES`], or missing columns.
    pub fn read(path: &Path) -> Result<Self, ResultsError> {
        contactlab_scenarios::input_file::check(
            path,
            contactlab_scenarios::limits::MAX_TABLE_BYTES,
        )
        .map_err(|e| ResultsError::Table {
            path: path.to_path_buf(),
            message: e.message,
        })?;
        let df = read_frame(path)?;
        let bad = |m: String| ResultsError::Table {
            path: path.to_path_buf(),
            message: m,
        };
        let get = |name: &str| -> Result<Vec<f64>, ResultsError> {
            let col = df.column(name).map_err(|e| bad(e.to_string()))?;
            let col = col
                .cast(&DataType::Float64)
                .map_err(|e| bad(e.to_string()))?;
            let ca = col.f64().map_err(|e| bad(e.to_string()))?;
            Ok((0..ca.len())
                .map(|i| ca.get(i).unwrap_or(f64::NAN))
                .collect())
        };
        let count = |prefix: &str| {
            df.get_column_names()
                .iter()
                .filter(|c| c.starts_with(prefix))
                .count()
        };
        let (nq, nv) = (count("qpos_"), count("qvel_"));
        let t = get("t")?;
        let qs: Vec<Vec<f64>> = (0..nq)
            .map(|i| get(&format!("qpos_{i}")))
            .collect::<Result<_, _>>()?;
        let vs: Vec<Vec<f64>> = (0..nv)
            .map(|i| get(&format!("qvel_{i}")))
            .collect::<Result<_, _>>()?;
        let n = t.len();
        Ok(Self {
            samples_only: false,
            q: (0..n)
                .map(|k| DVector::from_iterator(nq, qs.iter().map(|c| c[k])))
                .collect(),
            v: (0..n)
                .map(|k| DVector::from_iterator(nv, vs.iter().map(|c| c[k])))
                .collect(),
            t,
        })
    }
}

/// A per-step log: the state after each step and the solver's report, summarized.
#[derive(Debug, Clone, Default)]
pub struct StepLog {
    /// States, starting with the initial one.
    pub traj: Trajectory,
    /// Contact records per step (0 for the initial state).
    pub n_contacts: Vec<u64>,
    /// Solver iterations per step.
    pub iterations: Vec<u64>,
    /// The iteration whose iterate each step returned (best-iterate selection).
    pub best_iterate: Vec<u64>,
    /// Final residual per step.
    pub residual: Vec<f64>,
    /// 1 if the step's solver met its stopping test.
    pub converged: Vec<u64>,
    /// 1 if the step diverged.
    pub diverged: Vec<u64>,
}

impl StepLog {
    /// A log holding the initial state.
    pub fn new(initial: &State) -> Self {
        let mut log = Self::default();
        log.traj.push(initial);
        log.n_contacts.push(0);
        log.iterations.push(0);
        log.best_iterate.push(0);
        log.residual.push(0.0);
        log.converged.push(1);
        log.diverged.push(0);
        log
    }

    /// Record the state after a step and its report.
    pub fn push(&mut self, state: &State, report: &StepReport, diverged: bool) {
        self.traj.push(state);
        self.n_contacts.push(report.contacts.len() as u64);
        self.iterations.push(report.iterations as u64);
        self.best_iterate.push(report.best_iterate as u64);
        self.residual.push(report.residual);
        self.converged.push(u64::from(report.converged));
        self.diverged.push(u64::from(diverged));
    }

    /// The log as a DataFrame with the module's columns.
    ///
    /// # Errors
    /// Only if polars rejects the columns.
    pub fn to_frame(&self) -> PolarsResult<DataFrame> {
        let n = self.traj.t.len();
        let nq = self.traj.q.first().map_or(0, |q| q.len());
        let nv = self.traj.v.first().map_or(0, |v| v.len());
        let mut cols = vec![Column::new("t".into(), self.traj.t.clone())];
        for i in 0..nq {
            cols.push(Column::new(
                format!("qpos_{i}").into(),
                self.traj.q.iter().map(|q| q[i]).collect::<Vec<_>>(),
            ));
        }
        for i in 0..nv {
            cols.push(Column::new(
                format!("qvel_{i}").into(),
                self.traj.v.iter().map(|v| v[i]).collect::<Vec<_>>(),
            ));
        }
        cols.push(Column::new("n_contacts".into(), self.n_contacts.clone()));
        cols.push(Column::new("iterations".into(), self.iterations.clone()));
        cols.push(Column::new(
            "best_iterate".into(),
            self.best_iterate.clone(),
        ));
        cols.push(Column::new("residual".into(), self.residual.clone()));
        cols.push(Column::new("converged".into(), self.converged.clone()));
        cols.push(Column::new("diverged".into(), self.diverged.clone()));
        DataFrame::new(n, cols)
    }

    /// Write the log as CSV or Parquet (by extension), atomically.
    ///
    /// # Errors
    /// Encoding or I/O errors.
    pub fn write(&self, path: &Path) -> Result<(), ResultsError> {
        let mut df = self.to_frame().map_err(|e| ResultsError::Table {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        write_frame(path, &mut df)
    }
}

/// Error of positions `q` against reference positions `r`, split by kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StateError {
    /// Largest free-body position error (m); 0 without free joints.
    pub pos_m: f64,
    /// Largest free-body orientation error angle (rad); 0 without free joints.
    pub rot_rad: f64,
    /// Norm of the other joints' coordinate errors (hinge rad, slide m, ball angle rad).
    pub q: f64,
    /// The error used for accuracy: `pos_m` if the model has a free joint, else `q`.
    pub scalar: f64,
}

/// Compare positions `q` with reference positions `r` (both length nq).
pub fn state_error(model: &Model, q: &DVector<f64>, r: &DVector<f64>) -> StateError {
    let (mut pos_m, mut rot_rad, mut sq, mut free) = (0.0f64, 0.0f64, 0.0, false);
    let angle = |a: usize| {
        let (qa, qb) = (quat_at(q, a), quat_at(r, a));
        let d = qa.coords.dot(&qb.coords).abs().min(1.0);
        2.0 * d.acos()
    };
    for j in &model.joints {
        let a = j.qpos_adr;
        match j.kind {
            JointKind::Free => {
                free = true;
                let d = ((q[a] - r[a]).powi(2)
                    + (q[a + 1] - r[a + 1]).powi(2)
                    + (q[a + 2] - r[a + 2]).powi(2))
                .sqrt();
                pos_m = pos_m.max(d);
                rot_rad = rot_rad.max(angle(a + 3));
            }
            JointKind::Ball => sq += angle(a).powi(2),
            JointKind::Hinge | JointKind::Slide => sq += (q[a] - r[a]).powi(2),
        }
    }
    let qerr = sq.sqrt();
    StateError {
        pos_m,
        rot_rad,
        q: qerr,
        scalar: if free { pos_m } else { qerr },
    }
}
