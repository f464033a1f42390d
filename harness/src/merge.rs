//! `contactlab merge DIR... --out DIR` (issue 21): combine the results folders of an
//! experiment's shards (`contactlab run FILE --shard I/N`, [`crate::shard`]) into one results
//! folder, as if the experiment had run whole: the cell rows, the per-step logs, one manifest
//! with every shard's provenance, `runs.parquet` / `runs.csv` in grid order, the figures and the
//! report redrawn.
//!
//! # What may be merged
//!
//! Every input must be a finished run (its manifest has an end time) of the same experiment:
//! the same `config.resolved.yaml`, the same grid (cell ids) and the same revision. Shards must
//! be of one count N, each at most once; a single whole run may be "merged" alone (a copy). A
//! folder that differs is an error naming it and the first folder (which it was compared with)
//! and what differs; so is a cell with rows in two folders. The rows a folder contributes are
//! those of its own `runs.parquet` (a shard's folder may also hold older cells of other grids
//! in `cells/`, which the shard's rows leave out). Shards that are missing are reported, with
//! the number of grid cells that then have no row; the merge still writes what it has.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::config;
use crate::results::{
    cell_path, io, lock_dir, read_cell, read_frame, remove_stale_temps, write_atomic, write_cell,
    Manifest, MergedRun, ResultsError, Row,
};
use crate::shard::Shard;

/// Why folders cannot be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A folder that is not a finished results folder, or given twice (bad input: exit 2).
    #[error("{}: {message}", dir.display())]
    Input {
        /// The folder.
        dir: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// Two folders that are not shards of one run (bad input: exit 2).
    #[error("{} and {}: {what}", a.display(), b.display())]
    Conflict {
        /// The first folder.
        a: PathBuf,
        /// The folder that differs from it.
        b: PathBuf,
        /// What differs.
        what: String,
    },
    /// Reading or writing results.
    #[error(transparent)]
    Results(#[from] ResultsError),
}

/// What a merge did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MergeSummary {
    /// Cells in the experiment's grid.
    pub cells_total: usize,
    /// Rows written (grid cells with a row in some input).
    pub rows: usize,
    /// Shards of the count N that no input holds (`I/N`).
    pub missing_shards: Vec<String>,
    /// Per-step logs that `log_steps: true` asks for and no input holds (`<dir>/steps/<id>`).
    pub missing_logs: Vec<String>,
    /// Why figures or the report could not be drawn (the rows are written regardless).
    pub outputs_error: Option<String>,
}

/// One input folder, read.
struct Input {
    dir: PathBuf,
    manifest: Manifest,
    config_text: String,
    shard: Option<Shard>,
    /// Cell ids of its rows (`runs.parquet`).
    ids: Vec<String>,
}

fn input_error(dir: &Path, message: impl Into<String>) -> MergeError {
    MergeError::Input {
        dir: dir.to_path_buf(),
        message: message.into(),
    }
}

fn read_input(dir: &Path) -> Result<Input, MergeError> {
    if !dir.is_dir() {
        return Err(input_error(dir, "no such results folder"));
    }
    let text = std::fs::read_to_string(dir.join("manifest.json")).map_err(|e| {
        // A shard's `--out` folder holds the results folder `<name>/`: name it.
        let inner: Vec<String> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join("manifest.json").is_file())
            .map(|e| e.path().display().to_string())
            .collect();
        match inner.as_slice() {
            [one] => input_error(
                dir,
                format!("not a results folder (no manifest.json); did you mean {one}?"),
            ),
            _ => input_error(
                dir,
                format!("manifest.json: {e} (is this a results folder?)"),
            ),
        }
    })?;
    let manifest: Manifest =
        serde_json::from_str(&text).map_err(|e| input_error(dir, format!("manifest.json: {e}")))?;
    if manifest.end.is_empty() {
        return Err(input_error(
            dir,
            "the run has not finished (manifest.json has no end time): it is still running or \
             was stopped; run the same command again to finish it (it resumes), then merge",
        ));
    }
    if manifest.cell_ids.is_empty() {
        return Err(input_error(dir, "manifest.json lists no cell ids"));
    }
    if !manifest.merged.is_empty() {
        return Err(input_error(
            dir,
            format!(
                "is itself a merge of {} folders; merge the shard folders it lists in \
                 manifest.json together with the new ones",
                manifest.merged.len()
            ),
        ));
    }
    let config_text = std::fs::read_to_string(dir.join("config.resolved.yaml"))
        .map_err(|e| input_error(dir, format!("config.resolved.yaml: {e}")))?;
    let shard = match manifest.shard.as_str() {
        "" => None,
        s => Some(
            s.parse::<Shard>()
                .map_err(|e| input_error(dir, format!("manifest.json: shard: {e}")))?,
        ),
    };
    let df = read_frame(&dir.join("runs.parquet")).map_err(|e| {
        input_error(
            dir,
            format!(
                "runs.parquet cannot be read ({e}); `contactlab report {}` rebuilds it from \
                 the cell files",
                dir.display()
            ),
        )
    })?;
    let ids: Vec<String> = match df.column("cell_id") {
        Ok(c) => {
            let ca = c
                .str()
                .map_err(|e| input_error(dir, format!("runs.parquet: cell_id: {e}")))?;
            (0..ca.len())
                .map(|i| ca.get(i).unwrap_or_default().to_string())
                .collect()
        }
        Err(_) => return Err(input_error(dir, "runs.parquet has no cell_id column")),
    };
    Ok(Input {
        dir: dir.to_path_buf(),
        manifest,
        config_text,
        shard,
        ids,
    })
}

/// The first line where `a` and `b` differ (1-based) and the two lines.
fn first_difference(a: &str, b: &str) -> String {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    for i in 0..la.len().max(lb.len()) {
        let (x, y) = (la.get(i).copied(), lb.get(i).copied());
        if x != y {
            return format!(
                "line {}: '{}' against '{}'",
                i + 1,
                x.unwrap_or("(end of file)"),
                y.unwrap_or("(end of file)")
            );
        }
    }
    "identical".into()
}

/// Check `b` against `a` (module doc).
fn check_pair(a: &Input, b: &Input) -> Result<(), MergeError> {
    let conflict = |what: String| MergeError::Conflict {
        a: a.dir.clone(),
        b: b.dir.clone(),
        what,
    };
    let (ma, mb) = (&a.manifest, &b.manifest);
    if ma.experiment != mb.experiment {
        return Err(conflict(format!(
            "different experiments ('{}' against '{}'); only shards of one experiment, config and revision can be merged",
            ma.experiment, mb.experiment
        )));
    }
    if ma.revision != mb.revision {
        return Err(conflict(format!(
            "different revisions ({} against {}); only shards of one experiment, config and revision can be merged",
            ma.revision, mb.revision
        )));
    }
    if a.config_text != b.config_text {
        return Err(conflict(format!(
            "different configs (config.resolved.yaml {}); only shards of one experiment, config and revision can be merged",
            first_difference(&a.config_text, &b.config_text)
        )));
    }
    if ma.cell_ids != mb.cell_ids {
        return Err(conflict(format!(
            "different grids ({} against {} cells; an input file of the experiment changed \
             between the runs)",
            ma.cell_ids.len(),
            mb.cell_ids.len()
        )));
    }
    match (a.shard, b.shard) {
        (Some(x), Some(y)) if x.count != y.count => Err(conflict(format!(
            "shards of different counts ({x} against {y})"
        ))),
        (Some(x), Some(y)) if x == y => Err(conflict(format!("both are shard {x}"))),
        (None, _) | (_, None) => Err(conflict(
            "a whole run cannot be merged with other folders (it already holds every cell)".into(),
        )),
        _ => Ok(()),
    }
}

/// Merge the finished results folders `inputs` into `out` (module doc). `out` is replaced:
/// its rows, logs, figures and report are those of the inputs.
///
/// # Errors
/// [`MergeError::Input`] or [`MergeError::Conflict`] (nothing written), or an I/O error.
pub fn merge(inputs: &[PathBuf], out: &Path) -> Result<MergeSummary, MergeError> {
    let Some(first) = inputs.first() else {
        return Err(input_error(out, "merge needs at least one results folder"));
    };
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let out_canon = canon(out);
    let mut seen: BTreeMap<PathBuf, &PathBuf> = BTreeMap::new();
    for d in inputs {
        let c = canon(d);
        if c == out_canon {
            return Err(input_error(
                d,
                "is also the --out folder; merge into a new folder",
            ));
        }
        if let Some(prev) = seen.insert(c, d) {
            return Err(input_error(
                d,
                format!("given twice (also as {})", prev.display()),
            ));
        }
    }
    // Hold every input while reading it, so that no run writes it meanwhile.
    let mut locks = Vec::new();
    let mut read = Vec::new();
    for d in inputs {
        if !d.join("manifest.json").is_file() {
            // Not a results folder: say why without leaving a lock file in it.
            read_input(d)?;
        }
        locks.push(lock_dir(d)?);
        read.push(read_input(d)?);
    }
    for b in &read[1..] {
        check_pair(&read[0], b)?;
    }
    let a = &read[0];
    // Where each grid cell's row comes from.
    let grid: BTreeSet<&str> = a.manifest.cell_ids.iter().map(String::as_str).collect();
    let mut source: BTreeMap<&str, &Input> = BTreeMap::new();
    for inp in &read {
        for id in &inp.ids {
            if !grid.contains(id.as_str()) {
                return Err(input_error(
                    &inp.dir,
                    format!("runs.parquet has a row of cell {id}, which is not in the grid"),
                ));
            }
            if let Some(prev) = source.insert(id, inp) {
                return Err(MergeError::Conflict {
                    a: prev.dir.clone(),
                    b: inp.dir.clone(),
                    what: format!("both have a row of cell {id}"),
                });
            }
            if !cell_path(&inp.dir, id).is_file() {
                return Err(input_error(
                    &inp.dir,
                    format!(
                        "runs.parquet has cell {id}, but cells/{id}.json is missing; run the \
                         shard again (it recomputes the cell)"
                    ),
                ));
            }
        }
    }
    // Every row is read (and parses) before anything is written: a bad file is named where it
    // is.
    let mut rows: BTreeMap<&str, Row> = BTreeMap::new();
    for (id, inp) in &source {
        if let Some(r) = read_cell(&inp.dir, id)? {
            rows.insert(id, r);
        }
    }
    let cfg_path = out.join("config.resolved.yaml");
    let cfg = config::parse(&cfg_path, &a.config_text)
        .map_err(|e| input_error(first, format!("config.resolved.yaml does not parse: {e}")))?;
    check_out(out, Some((a.dir.as_path(), a.config_text.as_str())))?;
    let _out_lock = lock_dir(out)?;
    remove_stale_temps(out)?;
    for sub in ["cells", "steps", "figures"] {
        let p = out.join(sub);
        if p.exists() {
            std::fs::remove_dir_all(&p).map_err(io(&p))?;
        }
    }
    for f in ["runs.parquet", "runs.csv", "report.md"] {
        let _ = std::fs::remove_file(out.join(f));
    }
    std::fs::create_dir_all(out.join("cells")).map_err(io(out))?;
    let mut missing_logs = Vec::new();
    for (id, inp) in &source {
        if let Some(r) = rows.get(id) {
            write_cell(out, id, r)?;
        }
        let log = inp.dir.join("steps").join(format!("{id}.parquet"));
        if log.is_file() {
            let bytes = std::fs::read(&log).map_err(io(&log))?;
            write_atomic(&out.join("steps").join(format!("{id}.parquet")), &bytes)?;
        } else if cfg.log_steps {
            missing_logs.push(log.display().to_string());
        }
    }
    write_atomic(&cfg_path, a.config_text.as_bytes())?;
    let mut manifest = Manifest::describe(&a.manifest.experiment, 0);
    // The rows were computed at the shards' revision, not the merging checkout's.
    manifest.revision = a.manifest.revision.clone();
    manifest.version = a.manifest.version.clone();
    manifest.cells_total = a.manifest.cell_ids.len();
    manifest.cell_ids = a.manifest.cell_ids.clone();
    manifest.merged = read
        .iter()
        .map(|i| MergedRun {
            dir: i.dir.display().to_string(),
            cells: i.ids.len(),
            manifest: Manifest {
                cell_ids: Vec::new(),
                ..i.manifest.clone()
            },
        })
        .collect();
    manifest.end = crate::results::now_utc();
    manifest.write(out)?;
    // The rows in grid order.
    let ordered: Vec<Row> = manifest
        .cell_ids
        .iter()
        .filter_map(|id| rows.get(id.as_str()).cloned())
        .collect();
    let outputs = match crate::report::write_study_outputs(out, &cfg, &ordered) {
        Ok(o) => o,
        Err(e) => {
            // Not finished: the manifest says so.
            manifest.end.clear();
            manifest.write(out)?;
            return Err(e.into());
        }
    };
    let missing_shards = match a.shard {
        Some(s) => {
            let have: BTreeSet<usize> = read
                .iter()
                .filter_map(|i| i.shard.map(|s| s.index))
                .collect();
            (1..=s.count)
                .filter(|i| !have.contains(i))
                .map(|i| format!("{i}/{}", s.count))
                .collect()
        }
        None => Vec::new(),
    };
    drop(locks);
    Ok(MergeSummary {
        cells_total: manifest.cells_total,
        rows: ordered.len(),
        missing_shards,
        missing_logs,
        outputs_error: outputs.err(),
    })
}

/// Whether `out` may receive a merge: a new or empty folder, or an earlier merge (of the
/// config `config_text` of input folder `first`, when given). `contactlab slurm` asks before
/// any shard runs, without a config.
///
/// # Errors
/// [`MergeError::Input`] for a file, a folder that is not a results folder, or one that holds a
/// run or a shard; [`MergeError::Conflict`] for an earlier merge of another config.
pub fn check_out(out: &Path, first: Option<(&Path, &str)>) -> Result<(), MergeError> {
    if out.exists() && !out.is_dir() {
        return Err(input_error(out, "--out is a file, not a folder"));
    }
    if !out.is_dir() || std::fs::read_dir(out).map_err(io(out))?.next().is_none() {
        return Ok(());
    }
    let Ok(text) = std::fs::read_to_string(out.join("config.resolved.yaml")) else {
        return Err(input_error(
            out,
            "--out is a non-empty folder that is not a results folder",
        ));
    };
    let earlier = Manifest::read(out);
    if earlier.merged.is_empty() {
        return Err(input_error(
            out,
            format!(
                "--out holds {}, not an earlier merge; merge into a new folder (a merge replaces \
                 what --out holds)",
                if earlier.shard.is_empty() {
                    "a run".to_string()
                } else {
                    format!("shard {}", earlier.shard)
                }
            ),
        ));
    }
    match first {
        Some((dir, config)) if config != text => Err(MergeError::Conflict {
            a: dir.to_path_buf(),
            b: out.to_path_buf(),
            what: format!(
                "--out holds a merge of another config (config.resolved.yaml {}); choose \
                 another --out or delete it",
                first_difference(config, &text)
            ),
        }),
        _ => Ok(()),
    }
}
