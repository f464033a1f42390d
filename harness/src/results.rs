//! Results rows and files: the column definitions ([`COLUMNS`], units in the names), one
//! [`Row`] per cell, durable per-cell files, `runs.parquet` / `runs.csv`, and the manifest.
//!
//! Layout of `results/<experiment>/`:
//!
//! | path | content |
//! |---|---|
//! | `config.resolved.yaml` | the experiment as parsed, defaults filled in |
//! | `manifest.json` | revision, version, host, cores, start, end, command line |
//! | `cells/<id>.json` | one finished cell's row, written atomically (temp name, then rename) |
//! | `runs.parquet`, `runs.csv` | all rows, merged from `cells/` in grid order |
//! | `steps/<id>.parquet` | per-step logs when `log_steps: true` |
//! | `figures/*.svg`, `figures/*.png` | figures |
//! | `report.md` | tables for a paper |
//! | `.lock` | held (OS advisory lock) by the one process writing the folder ([`lock_dir`]) |
//!
//! Temporary files are `.<name>.tmp-<pid>` (and `.<name>.tmp-<pid>.png` for figures) beside
//! their target; a run or `report` removes leftovers of killed processes when it starts
//! ([`remove_stale_temps`]).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use polars::prelude::*;
use serde::{Deserialize, Serialize};

/// The type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// UTF-8 text.
    Str,
    /// 64-bit float (NaN where not measured).
    F64,
    /// Unsigned integer.
    U64,
}

/// One column of `runs.parquet`: name (with its unit as suffix), type, one-line definition.
#[derive(Debug, Clone, Copy)]
pub struct ColumnDef {
    /// Column name; the suffix is the unit (`_m`, `_s`, `_j`, `_ns` for N s, `_rad`).
    pub name: &'static str,
    /// Type.
    pub kind: Kind,
    /// Definition (DESIGN.md, "Measurements").
    pub doc: &'static str,
}

const fn c(name: &'static str, kind: Kind, doc: &'static str) -> ColumnDef {
    ColumnDef { name, kind, doc }
}

use Kind::{Str, F64, U64};

/// Every column of a results row, in order. Defined once; `contactlab list` prints them.
pub const COLUMNS: &[ColumnDef] = &[
    c("cell_id", Str, "stable hash of everything that determines the row"),
    c("experiment", Str, "experiment name"),
    c("scene", Str, "scene registry name"),
    c("scene_label", Str, "scene entry label (default: the name); tables and figures group by it"),
    c("scene_params", Str, "scene parameters (JSON)"),
    c("formulation", Str, "formulation registry name"),
    c("label", Str, "formulation entry label"),
    c("formulation_params", Str, "formulation parameters (JSON)"),
    c("sweep", Str, "values of scene.*/formulation.* sweep axes for this cell (JSON)"),
    c("engine", Str, "engine the cell ran on: cpu, burn-ndarray, burn-wgpu or burn-cuda"),
    c("worlds", U64, "worlds stepped together (copies of the scene; metrics are world 0's)"),
    c("timestep_s", F64, "timestep h"),
    c("seed", U64, "seed (given to scenes with a seed parameter)"),
    c("horizon_s", F64, "requested simulated time"),
    c("threads", U64, "worker threads of the run"),
    c("toss", Str, "recorded toss the cell starts from (cube_toss's `toss`, a file stem); empty otherwise"),
    c("inputs", Str, "files the cell read (scene model, assets, toss, schedule, reference) and their SHA-256, JSON {path: digest}; part of cell_id"),
    c("status", Str, "ok, diverged, failed, or skipped (the engine cannot run the cell: the reason names the formulation, model element or missing build feature); a gradient study also writes skipped (method not offered) and undefined_reference"),
    c("reason", Str, "why a cell diverged, failed or was skipped (empty when ok)"),
    c("ignored_features", Str, "model features the formulation steps this scene without, '; '-separated `feature: detail` (equality, frictionloss, limit, condim, pair, exclude, option.*); empty when it models all of them"),
    c("steps", U64, "steps taken"),
    c("simulated_time_s", F64, "simulated time reached"),
    c("max_penetration_m", F64, "largest max(0, -gap) over all contacts and steps"),
    c("mean_penetration_m", F64, "mean of max(0, -gap) over all contact records (0 without contacts)"),
    c("energy_initial_j", F64, "total energy (kinetic + potential) at t = 0"),
    c("energy_final_j", F64, "total energy at the last step"),
    c("energy_drift_j", F64, "final minus initial total energy"),
    c("energy_drift_rel", F64, "energy_drift_j / |energy_initial_j| (NaN when that is 0)"),
    c("energy_rise_max_j", F64, "largest rise of total energy above its start (0 if never above)"),
    c("traj_error_mean", F64, "mean error vs the reference over steps: traj_pos_error (m) with free bodies, else traj_q_error"),
    c("traj_error_final", F64, "the same error at the last step"),
    c("traj_pos_error_mean_m", F64, "mean over steps of the largest free-body position error"),
    c("traj_pos_error_final_m", F64, "free-body position error at the last step"),
    c("traj_rot_error_mean_rad", F64, "mean over steps of the largest free-body orientation error angle"),
    c("traj_rot_error_mean_deg", F64, "traj_rot_error_mean_rad in degrees (angle of q_sim^-1 q_ref)"),
    c("traj_pos_error_mean_pct_width", F64, "cube_toss vs its recording: traj_pos_error_mean_m as % of the cube width 0.1048 m (mean over recorded samples after the first)"),
    c("traj_rot_error_final_rad", F64, "free-body orientation error at the last step"),
    c("traj_q_error_mean", F64, "mean over steps of the norm of the hinge/slide/ball coordinate error (rad, m mixed)"),
    c("traj_q_error_final", F64, "that norm at the last step"),
    c("reanchored_error_mean", F64, "mean end-of-window error (unit of traj_error) restarting from the reference every reanchor_window"),
    c("signorini_complementarity_max_j", F64, "max over steps of max |impulse_n * velocity_n| over contacts"),
    c("signorini_complementarity_mean_j", F64, "mean over steps with contacts of the per-step max"),
    c("cone_excess_max_ns", F64, "max of max(0, |impulse_t| - mu impulse_n)"),
    c("cone_excess_mean_ns", F64, "mean over steps with contacts of the per-step max"),
    c("dissipation_violation_max_j", F64, "max of |mu impulse_n - |impulse_t|| * |velocity_t|"),
    c("dissipation_violation_mean_j", F64, "mean over steps with contacts of the per-step max"),
    c("ncp_max_j", F64, "max of |<impulse, velocity + (mu |velocity_t|, 0, 0)>| (De Saxce)"),
    c("ncp_mean_j", F64, "mean over steps with contacts of the per-step max"),
    c("contacts_max", U64, "largest number of contact records in one step"),
    c("iterations_mean", F64, "mean solver iterations per step"),
    c("iterations_max", U64, "largest solver iterations in one step"),
    c("residual_max", F64, "largest final residual (formulation's own norm)"),
    c("nonconverged_steps", U64, "steps whose solver did not meet its tolerance"),
    c("wall_time_s", F64, "wall time inside Formulation::step (metrics excluded)"),
    c("steps_per_s", F64, "world-steps per second of wall time"),
    c("real_time_factor", F64, "simulated time / wall time"),
    c("peak_rss_mib", F64, "process peak resident memory when the cell finished (MiB; process-wide)"),
    c("analytic", Str, "the scene's closed-form values, JSON {name: [value, formula]} (SI units)"),
    c("task", Str, "the scene's task outcomes at the end of the run, JSON {name: value}. grasp: held (0/1: object centre ends > 0.1 m above its start), slip_m (largest |change| of the object's height relative to the lift from lift start), final_slip_m (that change at the end; < 0: slid down), rise_m (object centre rise), peak_penetration_m, finger_force_left_n / _right_n (mean normal force over the hold). box_traversal, mesh_terrain: task_loss_m2 (squared position error + 1 m^2/rad^2 x squared yaw error), success (0/1: within 0.2 m, below 0.3 m/s), position_error_m, final_speed_m_s, min_chassis_up (lowest z of the chassis up axis; < 0: turned over), chassis_z_min_m / chassis_z_max_m (lowest and highest chassis origin height over the run), past_obstacle_m (box_traversal: final chassis x less the box's far face)"),
];

/// Column tables of the studies other than stability ([`crate::config::Study`]); a table's
/// columns are written only when some row has its first column.
pub const STUDY_COLUMNS: &[&[ColumnDef]] = &[crate::study_gradient::COLUMNS];

/// The definition of column `name` (of [`COLUMNS`] or a study's table).
pub fn column(name: &str) -> Option<&'static ColumnDef> {
    COLUMNS
        .iter()
        .chain(STUDY_COLUMNS.iter().flat_map(|t| t.iter()))
        .find(|c| c.name == name)
}

/// The columns of a frame of `rows`: [`COLUMNS`], then each study table some row uses.
fn frame_columns(rows: &[Row]) -> Vec<&'static ColumnDef> {
    let mut cols: Vec<&ColumnDef> = COLUMNS.iter().collect();
    for t in STUDY_COLUMNS {
        if rows.iter().any(|r| r.0.contains_key(t[0].name)) {
            cols.extend(t.iter());
        }
    }
    cols
}

/// One value of a row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Val {
    /// Text.
    Str(String),
    /// Unsigned integer.
    U64(u64),
    /// Float; NaN is stored as JSON `null`.
    F64(f64),
    /// Missing (JSON `null`): NaN for floats.
    Null,
}

/// One results row: column name → value. Missing floats read as NaN.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Row(pub BTreeMap<String, Val>);

impl Row {
    /// Set column `name`. Panics if the column is not in [`COLUMNS`] (a programmer error).
    pub fn set(&mut self, name: &str, v: Val) {
        assert!(
            column(name).is_some()
                || crate::study_control::column(name).is_some()
                || crate::study_throughput::column(name).is_some(),
            "results column '{name}' is not defined in COLUMNS"
        );
        self.0.insert(name.to_string(), v);
    }
    /// Set a float column.
    pub fn set_f64(&mut self, name: &str, v: f64) {
        self.set(name, Val::F64(v));
    }
    /// Set an integer column.
    pub fn set_u64(&mut self, name: &str, v: u64) {
        self.set(name, Val::U64(v));
    }
    /// Set a text column.
    pub fn set_str(&mut self, name: &str, v: impl Into<String>) {
        self.set(name, Val::Str(v.into()));
    }
    /// A float column (NaN when absent or not a number).
    pub fn f64(&self, name: &str) -> f64 {
        match self.0.get(name) {
            Some(Val::F64(x)) => *x,
            Some(Val::U64(x)) => *x as f64,
            _ => f64::NAN,
        }
    }
    /// An integer column (0 when absent).
    pub fn u64(&self, name: &str) -> u64 {
        match self.0.get(name) {
            Some(Val::U64(x)) => *x,
            Some(Val::F64(x)) if *x >= 0.0 => *x as u64,
            _ => 0,
        }
    }

    /// The series this row belongs to in tables and figures: its formulation label, plus the
    /// values of the scene.* / formulation.* sweep axes when there are any
    /// (`penalty [formulation.ke=10000]`), so that sweep points are never merged.
    pub fn series(&self) -> String {
        let label = self.str("label");
        match serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(self.str("sweep"))
        {
            Ok(m) if !m.is_empty() => {
                let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("{label} [{}]", parts.join(", "))
            }
            _ => label.to_string(),
        }
    }

    /// The scene entry's label (`scene_label`, or `scene` in rows written before labels).
    pub fn scene_label(&self) -> &str {
        match self.str("scene_label") {
            "" => self.str("scene"),
            l => l,
        }
    }

    /// A text column ("" when absent).
    pub fn str(&self, name: &str) -> &str {
        match self.0.get(name) {
            Some(Val::Str(s)) => s,
            _ => "",
        }
    }
}

/// An error writing or reading results.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// A file system error.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A table could not be written or read.
    #[error("{}: {message}", path.display())]
    Table {
        /// The file.
        path: PathBuf,
        /// What polars reported.
        message: String,
    },
    /// A cell file that is not a row this harness wrote: malformed JSON, or a `cell_id` that
    /// disagrees with its file name (bad input: exit status 2 in the CLI).
    #[error("{}: {message}; delete the file to recompute the cell", path.display())]
    BadCell {
        /// The cell file.
        path: PathBuf,
        /// What is wrong (with the JSON line where there is one).
        message: String,
    },
    /// Another process holds the results folder ([`lock_dir`]).
    #[error("{}: the results folder is in use by another contactlab process ({holder}); wait for it to finish or stop it, then run again", path.display())]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// The other process as it described itself: pid, host, start time, command line.
        holder: String,
    },
}

/// Map an I/O error on `path` to [`ResultsError::Io`] naming it.
pub(crate) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ResultsError + '_ {
    move |source| ResultsError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Write `bytes` to `path` durably: a temporary name in the same folder, fsync, then rename.
///
/// # Errors
/// I/O errors, naming the path.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ResultsError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io(dir))?;
    let tmp = temp_path(path, "");
    let mut f = fs::File::create(&tmp).map_err(io(&tmp))?;
    f.write_all(bytes).map_err(io(&tmp))?;
    drop(f);
    commit_temp(&tmp, path)
}

/// The temporary name of `path` for this process: `.<name>.tmp-<pid><suffix>` in the same
/// folder (`suffix` keeps an extension a writer needs, e.g. `.png`).
pub fn temp_path(path: &Path, suffix: &str) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    dir.join(format!(".{name}.tmp-{}{suffix}", std::process::id()))
}

/// Move a fully written temporary file `tmp` onto `path`: fsync, then rename (atomic on one
/// file system), so `path` is either its old or its new content, never a partial one. The
/// temporary file is removed if the rename fails.
///
/// # Errors
/// I/O errors, naming the path.
pub fn commit_temp(tmp: &Path, path: &Path) -> Result<(), ResultsError> {
    fs::File::open(tmp)
        .and_then(|f| f.sync_all())
        .map_err(io(tmp))?;
    fs::rename(tmp, path).map_err(|e| {
        let _ = fs::remove_file(tmp);
        ResultsError::Io {
            path: path.to_path_buf(),
            source: e,
        }
    })
}

/// Path of a cell's row file.
pub fn cell_path(dir: &Path, id: &str) -> PathBuf {
    dir.join("cells").join(format!("{id}.json"))
}

/// Write a finished cell's row durably.
///
/// # Errors
/// I/O errors.
pub fn write_cell(dir: &Path, id: &str, row: &Row) -> Result<(), ResultsError> {
    let text = serde_json::to_string_pretty(row).expect("rows serialize");
    write_atomic(&cell_path(dir, id), text.as_bytes())
}

/// Read a finished cell's row: `Ok(None)` if its file does not exist.
///
/// # Errors
/// [`ResultsError::BadCell`] for a file that is not valid JSON of a row, or whose `cell_id`
/// is not `id` (a hand-edited or copied file would otherwise stand for another cell);
/// [`ResultsError::Io`] for a file that exists but cannot be read.
pub fn read_cell(dir: &Path, id: &str) -> Result<Option<Row>, ResultsError> {
    let path = cell_path(dir, id);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ResultsError::Io { path, source: e }),
    };
    let row: Row = serde_json::from_str(&text).map_err(|e| ResultsError::BadCell {
        path: path.clone(),
        message: format!("not a results row: {e}"),
    })?;
    if row.str("cell_id") != id {
        return Err(ResultsError::BadCell {
            path,
            message: format!(
                "its cell_id '{}' disagrees with its file name '{id}'",
                row.str("cell_id")
            ),
        });
    }
    Ok(Some(row))
}

/// An exclusive hold on a results folder, released when dropped or when the process ends.
#[derive(Debug)]
pub struct DirLock {
    _file: fs::File,
}

/// Take the exclusive lock of results folder `dir` (created if missing): an OS advisory lock
/// (`flock` on Unix, `LockFileEx` on Windows, through `std::fs::File::try_lock`) on `dir/.lock`,
/// which then holds this process's pid, host, start time and command line so that a second
/// process can name it.
///
/// Stale locks cannot happen: the operating system releases the lock when its process ends,
/// however it ends (killed included), and a leftover `.lock` file of a dead process is simply
/// locked again; its old text is never trusted. On network file systems without lock support
/// the lock is not exclusive.
///
/// # Errors
/// [`ResultsError::Locked`] naming the other process; I/O errors naming the path.
pub fn lock_dir(dir: &Path) -> Result<DirLock, ResultsError> {
    fs::create_dir_all(dir).map_err(io(dir))?;
    let path = dir.join(".lock");
    let mut file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io(&path))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            let holder = fs::read_to_string(&path).unwrap_or_default();
            let holder = match holder.trim() {
                "" => "a process that has not written its name yet".to_string(),
                h => h.to_string(),
            };
            return Err(ResultsError::Locked { path, holder });
        }
        Err(fs::TryLockError::Error(e)) => return Err(ResultsError::Io { path, source: e }),
    }
    let me = format!(
        "pid {} on {}, since {}: {}",
        std::process::id(),
        host_name(),
        now_utc(),
        std::env::args().collect::<Vec<_>>().join(" ")
    );
    file.set_len(0).map_err(io(&path))?;
    file.write_all(me.as_bytes()).map_err(io(&path))?;
    file.sync_all().map_err(io(&path))?;
    Ok(DirLock { _file: file })
}

/// Whether `name` is a temporary file name of [`write_atomic`] or of the figures:
/// `.<name>.tmp-<pid>` or `.<name>.tmp-<pid>.<ext>`.
fn is_temp_name(name: &str) -> bool {
    name.starts_with('.')
        && name.rsplit_once(".tmp-").is_some_and(|(_, pid)| {
            let pid = pid.split('.').next().unwrap_or("");
            !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())
        })
}

/// Remove temporary files left by killed processes in `dir` and its `cells/`, `steps/` and
/// `figures/`. Call with the folder's lock held ([`lock_dir`]), so that no live writer owns
/// them. Returns how many were removed.
///
/// # Errors
/// A leftover that cannot be removed, naming it.
pub fn remove_stale_temps(dir: &Path) -> Result<usize, ResultsError> {
    let mut removed = 0;
    for sub in [
        dir.to_path_buf(),
        dir.join("cells"),
        dir.join("steps"),
        dir.join("figures"),
        dir.join("progress"),
    ] {
        let Ok(rd) = fs::read_dir(&sub) else { continue };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if is_temp_name(&name) && e.file_type().is_ok_and(|t| t.is_file()) {
                let p = e.path();
                fs::remove_file(&p).map_err(io(&p))?;
                removed += 1;
            }
        }
    }
    Ok(removed)
}

/// All rows as a polars DataFrame with the [`COLUMNS`] schema (and the study columns the rows
/// use).
///
/// # Errors
/// Only if polars rejects the columns (it does not for equal lengths).
pub fn to_frame(rows: &[Row]) -> PolarsResult<DataFrame> {
    frame_of(rows, frame_columns(rows))
}

/// All rows as a polars DataFrame with the schema `columns` (a study's own, e.g.
/// [`crate::study_control::COLUMNS`]).
///
/// # Errors
/// Only if polars rejects the columns (it does not for equal lengths).
pub fn to_frame_with(rows: &[Row], columns: &[ColumnDef]) -> PolarsResult<DataFrame> {
    frame_of(rows, columns.iter().collect())
}

fn frame_of(rows: &[Row], columns: Vec<&ColumnDef>) -> PolarsResult<DataFrame> {
    let cols: Vec<Column> = columns
        .into_iter()
        .map(|c| match c.kind {
            Str => Column::new(
                c.name.into(),
                rows.iter()
                    .map(|r| r.str(c.name).to_string())
                    .collect::<Vec<_>>(),
            ),
            F64 => Column::new(
                c.name.into(),
                rows.iter().map(|r| r.f64(c.name)).collect::<Vec<_>>(),
            ),
            U64 => Column::new(
                c.name.into(),
                rows.iter().map(|r| r.u64(c.name)).collect::<Vec<_>>(),
            ),
        })
        .collect();
    DataFrame::new(rows.len(), cols)
}

/// Rows back from a DataFrame with the [`COLUMNS`] schema (missing columns are left out).
///
/// # Errors
/// A column of the wrong type.
pub fn from_frame(df: &DataFrame) -> PolarsResult<Vec<Row>> {
    let all: Vec<ColumnDef> = COLUMNS
        .iter()
        .chain(STUDY_COLUMNS.iter().flat_map(|t| t.iter()))
        .cloned()
        .collect();
    from_frame_with(df, &all)
}

/// Rows back from a DataFrame with the schema `columns` (missing columns are left out).
///
/// # Errors
/// A column of the wrong type.
pub fn from_frame_with(df: &DataFrame, columns: &[ColumnDef]) -> PolarsResult<Vec<Row>> {
    let mut rows = vec![Row::default(); df.height()];
    for c in columns {
        let Ok(col) = df.column(c.name) else { continue };
        match c.kind {
            Str => {
                let ca = col.str()?;
                for (i, r) in rows.iter_mut().enumerate() {
                    r.set_str(c.name, ca.get(i).unwrap_or(""));
                }
            }
            F64 => {
                let col = col.cast(&DataType::Float64)?;
                let ca = col.f64()?;
                for (i, r) in rows.iter_mut().enumerate() {
                    r.set_f64(c.name, ca.get(i).unwrap_or(f64::NAN));
                }
            }
            U64 => {
                let col = col.cast(&DataType::UInt64)?;
                let ca = col.u64()?;
                for (i, r) in rows.iter_mut().enumerate() {
                    r.set_u64(c.name, ca.get(i).unwrap_or(0));
                }
            }
        }
    }
    Ok(rows)
}

/// Write a DataFrame as Parquet (`.parquet`) or CSV (any other extension), atomically.
///
/// # Errors
/// Encoding or I/O errors, naming the path.
pub fn write_frame(path: &Path, df: &mut DataFrame) -> Result<(), ResultsError> {
    let table = |e: PolarsError| ResultsError::Table {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let mut buf = Vec::new();
    if path.extension().is_some_and(|e| e == "parquet") {
        ParquetWriter::new(&mut buf).finish(df).map_err(table)?;
    } else {
        CsvWriter::new(&mut buf).finish(df).map_err(table)?;
    }
    write_atomic(path, &buf)
}

/// Read a Parquet or CSV file into a DataFrame.
///
/// # Errors
/// Unreadable or malformed file, naming the path.
pub fn read_frame(path: &Path) -> Result<DataFrame, ResultsError> {
    let table = |e: PolarsError| ResultsError::Table {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    if path.extension().is_some_and(|e| e == "parquet") {
        let f = fs::File::open(path).map_err(io(path))?;
        ParquetReader::new(f).finish().map_err(table)
    } else {
        fs::File::open(path).map_err(io(path))?;
        CsvReadOptions::default()
            .with_has_header(true)
            .try_into_reader_with_file_path(Some(path.to_path_buf()))
            .and_then(|r| r.finish())
            .map_err(table)
    }
}

/// Write `runs.parquet` and `runs.csv` in `dir` from `rows` ([`COLUMNS`] and the study
/// columns the rows use, [`to_frame`]).
///
/// # Errors
/// Encoding or I/O errors.
pub fn write_runs(dir: &Path, rows: &[Row]) -> Result<(), ResultsError> {
    let mut df = to_frame(rows).map_err(|e| ResultsError::Table {
        path: dir.join("runs.parquet"),
        message: e.to_string(),
    })?;
    write_frame(&dir.join("runs.parquet"), &mut df)?;
    write_frame(&dir.join("runs.csv"), &mut df)
}

/// Write `runs.parquet` and `runs.csv` in `dir` from `rows` with the schema `columns`.
///
/// # Errors
/// Encoding or I/O errors.
pub fn write_runs_with(
    dir: &Path,
    rows: &[Row],
    columns: &[ColumnDef],
) -> Result<(), ResultsError> {
    let mut df = to_frame_with(rows, columns).map_err(|e| ResultsError::Table {
        path: dir.join("runs.parquet"),
        message: e.to_string(),
    })?;
    write_frame(&dir.join("runs.parquet"), &mut df)?;
    write_frame(&dir.join("runs.csv"), &mut df)
}

/// Read `runs.parquet` in `dir` back into rows.
///
/// # Errors
/// Missing or malformed file.
pub fn read_runs(dir: &Path) -> Result<Vec<Row>, ResultsError> {
    let path = dir.join("runs.parquet");
    let df = read_frame(&path)?;
    from_frame(&df).map_err(|e| ResultsError::Table {
        path,
        message: e.to_string(),
    })
}

/// Read `runs.parquet` in `dir` back into rows with the schema `columns`.
///
/// # Errors
/// Missing or malformed file.
pub fn read_runs_with(dir: &Path, columns: &[ColumnDef]) -> Result<Vec<Row>, ResultsError> {
    let path = dir.join("runs.parquet");
    let df = read_frame(&path)?;
    from_frame_with(&df, columns).map_err(|e| ResultsError::Table {
        path,
        message: e.to_string(),
    })
}

/// Provenance of a run, written to `manifest.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Experiment name.
    pub experiment: String,
    /// Git revision of the working tree (`git rev-parse HEAD`), or "unknown".
    pub revision: String,
    /// contactlab-harness version.
    pub version: String,
    /// Host name.
    pub host: String,
    /// Logical cores of the machine.
    pub cores: usize,
    /// Worker threads used (0 in a merged folder's manifest: see each run in [`Self::merged`]).
    pub threads: usize,
    /// Start (UTC, ISO 8601).
    pub start: String,
    /// End (UTC, ISO 8601); empty while running.
    pub end: String,
    /// The command line.
    pub command_line: String,
    /// Cells in the grid, and how many were already finished when this run started.
    pub cells_total: usize,
    /// Cells skipped because an earlier run finished them.
    pub cells_resumed: usize,
    /// Ids of the cells of this run's grid, in grid order: `cells/` may also hold rows of
    /// earlier grids (other parameters, or input files since edited), which `report` leaves
    /// out. Empty in manifests written before it existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cell_ids: Vec<String>,
    /// The shard this run computed (`I/N`, `contactlab run --shard`); empty for the whole grid.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub shard: String,
    /// The batch scheduler's job this process ran as (`slurm job <array job>_<task>` or
    /// `slurm job <id>`, from SLURM's environment), empty outside one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scheduler_job: String,
    /// Cells of the grid that belong to [`Self::shard`] (0 for the whole grid).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shard_cells: usize,
    /// For results combined by `contactlab merge`: the provenance of every merged folder, in
    /// the order given (empty otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged: Vec<MergedRun>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One results folder combined by `contactlab merge`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MergedRun {
    /// The folder as given to `merge`.
    pub dir: String,
    /// Cells whose rows it contributed.
    pub cells: usize,
    /// Its manifest (its provenance: shard, revision, host, cores, threads, times, command
    /// line), without the grid's cell ids, which every merged folder shares.
    pub manifest: Manifest,
}

impl Manifest {
    /// Describe this process and machine.
    pub fn describe(experiment: &str, threads: usize) -> Self {
        let revision = std::process::Command::new("git")
            .args(["rev-parse", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        Self {
            experiment: experiment.into(),
            revision,
            version: env!("CARGO_PKG_VERSION").into(),
            host: host_name(),
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            threads,
            start: now_utc(),
            end: String::new(),
            command_line: std::env::args().collect::<Vec<_>>().join(" "),
            cells_total: 0,
            cells_resumed: 0,
            cell_ids: Vec::new(),
            shard: String::new(),
            scheduler_job: scheduler_job(),
            shard_cells: 0,
            merged: Vec::new(),
        }
    }

    /// Record that this run computes `shard` (`None`: the whole grid), `cells` cells of it.
    pub fn set_shard(&mut self, shard: Option<&crate::shard::Shard>, cells: usize) {
        match shard {
            Some(s) => {
                self.shard = s.to_string();
                self.shard_cells = cells;
            }
            None => {
                self.shard.clear();
                self.shard_cells = 0;
            }
        }
    }

    /// What a report must say about where its rows come from when they are not one whole run:
    /// a shard's part of the grid, or the folders a merge combined (one markdown list item
    /// each); empty for a whole run.
    pub fn grid_note(&self) -> String {
        let mut s = String::new();
        if !self.shard.is_empty() {
            s += &format!(
                "- **shard {} of the grid: {} of its {} cells**; figures and tables cover these \
                 cells only (`contactlab merge` the shards' folders for the whole experiment)\n",
                self.shard, self.shard_cells, self.cells_total
            );
        }
        if !self.merged.is_empty() {
            s += &format!(
                "- merged by `{}` on {} at {} from {} folder(s):\n",
                self.command_line,
                self.host,
                self.end,
                self.merged.len()
            );
            for m in &self.merged {
                let r = &m.manifest;
                s += &format!(
                    "  - `{}`{}: {} cells on {}{} ({} cores, {} threads), revision {}, {} to {}, `{}`\n",
                    m.dir,
                    if r.shard.is_empty() {
                        String::new()
                    } else {
                        format!(" (shard {})", r.shard)
                    },
                    m.cells,
                    r.host,
                    if r.scheduler_job.is_empty() {
                        String::new()
                    } else {
                        format!(", {}", r.scheduler_job)
                    },
                    r.cores,
                    r.threads,
                    r.revision,
                    r.start,
                    r.end,
                    r.command_line
                );
            }
        }
        s
    }

    /// [`Self::grid_note`] as a report section of its own, "Where the rows come from" (empty
    /// for a whole run): for the study reports that have no provenance list.
    pub fn grid_section(&self) -> String {
        match self.grid_note() {
            n if n.is_empty() => n,
            n => format!("\n## Where the rows come from\n\n{n}"),
        }
    }

    /// Write `manifest.json` in `dir`.
    ///
    /// # Errors
    /// I/O errors.
    pub fn write(&self, dir: &Path) -> Result<(), ResultsError> {
        write_atomic(
            &dir.join("manifest.json"),
            serde_json::to_string_pretty(self)
                .expect("serializes")
                .as_bytes(),
        )
    }

    /// Read `manifest.json` from `dir` (default if absent).
    pub fn read(dir: &Path) -> Self {
        fs::read_to_string(dir.join("manifest.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }
}

/// The SLURM job this process runs in, from the variables SLURM sets in a job's environment
/// (`SLURM_ARRAY_JOB_ID` and `SLURM_ARRAY_TASK_ID` in an array task, else `SLURM_JOB_ID`).
fn scheduler_job() -> String {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match (
        var("SLURM_ARRAY_JOB_ID"),
        var("SLURM_ARRAY_TASK_ID"),
        var("SLURM_JOB_ID"),
    ) {
        (Some(a), Some(t), _) => format!("slurm job {a}_{t}"),
        (_, _, Some(j)) => format!("slurm job {j}"),
        _ => String::new(),
    }
}

/// This machine's name (`/etc/hostname`, else `$HOSTNAME`), or "unknown".
fn host_name() -> String {
    fs::read_to_string("/etc/hostname")
        .map(|s| s.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "unknown".into())
}

/// The current time, UTC, as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn now_utc() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_through_parquet_and_json() {
        let mut r = Row::default();
        r.set_str("scene", "s");
        r.set_f64("timestep_s", 0.01);
        r.set_f64("max_penetration_m", f64::NAN);
        r.set_u64("seed", 3);
        let json = serde_json::to_string(&r).unwrap();
        let back: Row = serde_json::from_str(&json).unwrap();
        assert!(back.f64("max_penetration_m").is_nan());
        assert_eq!(back.u64("seed"), 3);
        let dir = tempfile::tempdir().unwrap();
        write_runs(dir.path(), &[r.clone(), back]).unwrap();
        let rows = read_runs(dir.path()).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].str("scene"), "s");
        assert_eq!(rows[1].f64("timestep_s"), 0.01);
        assert!(read_frame(&dir.path().join("runs.csv")).unwrap().height() == 2);
    }

    #[test]
    fn temp_names_are_recognized() {
        assert!(is_temp_name(".runs.parquet.tmp-1234"));
        assert!(is_temp_name(".error_vs_timestep__a.png.tmp-77.png"));
        assert!(!is_temp_name("runs.parquet"));
        assert!(!is_temp_name(".lock"));
        assert!(!is_temp_name(".x.tmp-"));
        assert!(!is_temp_name(".x.tmp-12a"));
    }

    #[test]
    fn utc_time_is_iso() {
        let t = now_utc();
        assert_eq!(t.len(), 20);
        assert!(t.ends_with('Z'));
    }
}
