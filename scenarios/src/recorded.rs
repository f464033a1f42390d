//! Readers of recorded real data: the cube tosses of `data/cube_toss/` (see its
//! README; ContactNets' processed toss set, Pfrommer, Halm and Posa, CoRL 2020).
//!
//! One toss is one CSV file `toss_NNN.csv` with the header
//! `t,px,py,pz,qw,qx,qy,qz,vx,vy,vz,wx,wy,wz` and one sample per line (148 Hz):
//!
//! | columns | meaning | unit, frame |
//! |---|---|---|
//! | `t` | time since the first sample | s |
//! | `px py pz` | cube centre | m, table frame (table plane z = 0, z up) |
//! | `qw qx qy qz` | orientation, body to table, scalar first | - |
//! | `vx vy vz` | linear velocity of the centre | m/s, table frame |
//! | `wx wy wz` | angular velocity | rad/s, BODY frame |
//!
//! These are exactly the coordinates of a free joint (DESIGN.md, "Model and State": qpos =
//! position and quaternion, qvel = world-frame linear then body-frame angular velocity), so a
//! sample maps to a [`State`] with no conversion ([`TossSample::state`]).
//!
//! A malformed or truncated file is a [`RecordedError::Parse`] naming the file and the 1-based
//! line: missing or wrong header, wrong column count, a field that is not a number, a
//! non-finite number, a quaternion far from unit norm, a time that does not increase, or no
//! samples at all.

use std::path::{Path, PathBuf};

use contactlab_solvers::State;
use nalgebra::DVector;

/// The header line every toss file starts with.
pub const TOSS_HEADER: &str = "t,px,py,pz,qw,qx,qy,qz,vx,vy,vz,wx,wy,wz";

/// Largest accepted deviation of a recorded quaternion's norm from 1 (-); within it the
/// quaternion is re-normalized.
pub const QUAT_NORM_TOLERANCE: f64 = 1e-3;

/// One recorded sample of a toss.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TossSample {
    /// Time since the first sample (s).
    pub t: f64,
    /// Cube centre (m), table frame.
    pub pos: [f64; 3],
    /// Orientation, body to table frame, scalar first (w, x, y, z), unit norm.
    pub quat: [f64; 4],
    /// Linear velocity of the centre (m/s), table frame.
    pub lin_vel: [f64; 3],
    /// Angular velocity (rad/s), body frame.
    pub ang_vel: [f64; 3],
}

impl TossSample {
    /// The sample as the state of a model whose only joint is one free joint (nq = 7, nv = 6):
    /// `q = (pos, quat)`, `v = (lin_vel, ang_vel)` (world linear, body angular, as recorded),
    /// with the position shifted by `offset` (m, table frame) and `t` as recorded.
    pub fn state(&self, offset: [f64; 3]) -> State {
        let p = self.pos;
        let q = DVector::from_vec(vec![
            p[0] + offset[0],
            p[1] + offset[1],
            p[2] + offset[2],
            self.quat[0],
            self.quat[1],
            self.quat[2],
            self.quat[3],
        ]);
        let v = DVector::from_iterator(6, self.lin_vel.into_iter().chain(self.ang_vel));
        State { q, v, t: self.t }
    }
}

/// One recorded toss: its file, its stem (`toss_001`) and its samples, times increasing.
#[derive(Debug, Clone, PartialEq)]
pub struct TossRecording {
    /// The file it was read from.
    pub path: PathBuf,
    /// The file stem, the toss's id (`toss_001`).
    pub id: String,
    /// Samples, at least one, strictly increasing in time.
    pub samples: Vec<TossSample>,
}

impl TossRecording {
    /// Time of the last sample (s), the recording's duration.
    pub fn duration(&self) -> f64 {
        self.samples.last().map_or(0.0, |s| s.t)
    }
}

/// An error reading recorded data.
#[derive(Debug, thiserror::Error)]
pub enum RecordedError {
    /// The file or folder could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The file's content is malformed.
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The file is not a regular file or is over [`crate::limits::MAX_TABLE_BYTES`].
    #[error("{0}")]
    Input(#[from] crate::input_file::InputFileError),
    /// A toss named by a parameter does not exist.
    #[error("no toss '{toss}' in {}: {why}", dir.display())]
    NoSuchToss {
        /// The folder searched.
        dir: PathBuf,
        /// The toss asked for.
        toss: String,
        /// Why it was not found.
        why: String,
    },
}

/// Read one toss file.
///
/// # Errors
/// [`RecordedError::Input`] if missing, unreadable, not a regular file or over
/// [`crate::limits::MAX_TABLE_BYTES`]; [`RecordedError::Parse`] (file and line) if malformed.
pub fn read_toss(path: &Path) -> Result<TossRecording, RecordedError> {
    let text = crate::input_file::read_text(path, crate::limits::MAX_TABLE_BYTES)?;
    parse_toss(path, &text)
}

/// Parse the text of a toss file; `path` names the file in errors and gives the id (stem).
///
/// # Errors
/// [`RecordedError::Parse`] naming the file and the 1-based line (module documentation).
pub fn parse_toss(path: &Path, text: &str) -> Result<TossRecording, RecordedError> {
    let err = |line: usize, message: String| RecordedError::Parse {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, h)) if h.trim() == TOSS_HEADER => {}
        Some((_, h)) => {
            return Err(err(
                1,
                format!("expected the header '{TOSS_HEADER}', found '{}'", h.trim()),
            ))
        }
        None => {
            return Err(err(
                1,
                format!("empty file: missing the header '{TOSS_HEADER}'"),
            ))
        }
    }
    let ncol = TOSS_HEADER.split(',').count();
    let names: Vec<&str> = TOSS_HEADER.split(',').collect();
    let mut samples: Vec<TossSample> = Vec::new();
    for (i, raw) in lines {
        let line = i + 1;
        let l = raw.trim();
        if l.is_empty() {
            continue;
        }
        let fields: Vec<&str> = l.split(',').collect();
        if fields.len() != ncol {
            return Err(err(
                line,
                format!(
                    "expected {ncol} columns, found {} (truncated or malformed line)",
                    fields.len()
                ),
            ));
        }
        let mut x = [0.0; 14];
        for (k, f) in fields.iter().enumerate() {
            let v: f64 = f.trim().parse().map_err(|_| {
                err(
                    line,
                    format!("column '{}': '{}' is not a number", names[k], f.trim()),
                )
            })?;
            if !v.is_finite() {
                return Err(err(
                    line,
                    format!("column '{}': {v} is not finite", names[k]),
                ));
            }
            x[k] = v;
        }
        let n = (x[4] * x[4] + x[5] * x[5] + x[6] * x[6] + x[7] * x[7]).sqrt();
        if (n - 1.0).abs() > QUAT_NORM_TOLERANCE {
            return Err(err(
                line,
                format!("quaternion norm {n} is not 1 (tolerance {QUAT_NORM_TOLERANCE})"),
            ));
        }
        if let Some(prev) = samples.last() {
            if x[0] <= prev.t {
                return Err(err(
                    line,
                    format!("time {} s does not increase (previous {} s)", x[0], prev.t),
                ));
            }
        }
        samples.push(TossSample {
            t: x[0],
            pos: [x[1], x[2], x[3]],
            quat: [x[4] / n, x[5] / n, x[6] / n, x[7] / n],
            lin_vel: [x[8], x[9], x[10]],
            ang_vel: [x[11], x[12], x[13]],
        });
    }
    if samples.is_empty() {
        return Err(err(
            text.lines().count().max(1),
            "no samples after the header".into(),
        ));
    }
    Ok(TossRecording {
        path: path.to_path_buf(),
        id: path
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default(),
        samples,
    })
}

/// The ids (file stems) of the toss files `toss_*.csv` in `dir`, sorted.
///
/// # Errors
/// [`RecordedError::Io`] if the folder cannot be read; [`RecordedError::NoSuchToss`] if it
/// holds no toss file.
pub fn list_tosses(dir: &Path) -> Result<Vec<String>, RecordedError> {
    let rd = std::fs::read_dir(dir).map_err(|source| RecordedError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut ids: Vec<String> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            name.strip_suffix(".csv")
                .filter(|s| s.starts_with("toss_"))
                .map(str::to_string)
        })
        .collect();
    ids.sort();
    if ids.is_empty() {
        return Err(RecordedError::NoSuchToss {
            dir: dir.to_path_buf(),
            toss: "toss_*.csv".into(),
            why: "the folder holds no toss file".into(),
        });
    }
    Ok(ids)
}

/// The file of toss `toss` in `dir`: an integer N names `toss_NNN.csv` (zero-padded to three
/// digits, the number in the file name, not a position in the list), a string names the file
/// stem (`toss_001`) or the number as text.
///
/// # Errors
/// [`RecordedError::NoSuchToss`] if the value is neither, or the file does not exist.
pub fn toss_path(dir: &Path, toss: &serde_json::Value) -> Result<PathBuf, RecordedError> {
    let missing = |toss: String, why: String| RecordedError::NoSuchToss {
        dir: dir.to_path_buf(),
        toss,
        why,
    };
    let stem = match toss {
        serde_json::Value::Number(n) => match n.as_u64() {
            Some(k) => format!("toss_{k:03}"),
            None => {
                return Err(missing(
                    n.to_string(),
                    "a toss number is an integer >= 0".into(),
                ))
            }
        },
        serde_json::Value::String(s) => match s.parse::<u64>() {
            Ok(k) => format!("toss_{k:03}"),
            Err(_) => s.trim_end_matches(".csv").to_string(),
        },
        other => {
            return Err(missing(
                other.to_string(),
                "give a toss number (1 for toss_001.csv) or a file stem".into(),
            ))
        }
    };
    let path = dir.join(format!("{stem}.csv"));
    if path.is_file() {
        Ok(path)
    } else {
        Err(missing(stem, format!("{} does not exist", path.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "t,px,py,pz,qw,qx,qy,qz,vx,vy,vz,wx,wy,wz\n\
        0,0.1,0.2,0.3,1,0,0,0,1,2,3,4,5,6\n\
        0.00675675676,0.11,0.2,0.3,0,1,0,0,1,2,3,4,5,6\n";

    fn parse(text: &str) -> Result<TossRecording, RecordedError> {
        parse_toss(Path::new("/data/toss_042.csv"), text)
    }

    /// The error's file, line and message, or a panic if it parsed.
    fn failure(text: &str) -> (String, usize, String) {
        match parse(text) {
            Err(RecordedError::Parse {
                path,
                line,
                message,
            }) => (path.display().to_string(), line, message),
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn a_good_file_parses_to_free_joint_states() {
        let r = parse(GOOD).unwrap();
        assert_eq!(r.id, "toss_042");
        assert_eq!(r.samples.len(), 2);
        assert!((r.duration() - 1.0 / 148.0).abs() < 1e-10);
        let s = r.samples[0].state([0.0, 0.0, -0.001]);
        assert_eq!(s.q.as_slice(), &[0.1, 0.2, 0.299, 1.0, 0.0, 0.0, 0.0]);
        assert_eq!(s.v.as_slice(), &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(r.samples[1].quat, [0.0, 1.0, 0.0, 0.0]);
    }

    #[test]
    fn errors_name_the_file_and_the_line() {
        let (file, line, msg) = failure("");
        assert_eq!((file.as_str(), line), ("/data/toss_042.csv", 1));
        assert!(msg.contains("header"), "{msg}");

        let (_, line, msg) = failure("t,x,y\n0,1,2\n");
        assert_eq!(line, 1);
        assert!(msg.contains("header"), "{msg}");

        // A truncated last line.
        let (_, line, msg) = failure(&format!("{GOOD}0.0135,0.1,0.2"));
        assert_eq!(line, 4);
        assert!(msg.contains("expected 14 columns, found 3"), "{msg}");

        let bad = GOOD.replace("0.11,", "abc,");
        let (_, line, msg) = failure(&bad);
        assert_eq!(line, 3);
        assert!(msg.contains("'px'") && msg.contains("'abc'"), "{msg}");

        let bad = GOOD.replace("0.11,", "NaN,");
        let (_, line, msg) = failure(&bad);
        assert_eq!(line, 3);
        assert!(msg.contains("not finite"), "{msg}");

        let bad = GOOD.replace("0.00675675676,", "0,");
        let (_, line, msg) = failure(&bad);
        assert_eq!(line, 3);
        assert!(msg.contains("does not increase"), "{msg}");

        let bad = GOOD.replace("0,1,0,0,1,2", "0,2,0,0,1,2");
        let (_, line, msg) = failure(&bad);
        assert_eq!(line, 3);
        assert!(msg.contains("quaternion norm"), "{msg}");

        let (_, line, msg) = failure(&format!("{TOSS_HEADER}\n"));
        assert_eq!(line, 1);
        assert!(msg.contains("no samples"), "{msg}");

        // The Display form starts with file:line.
        let e = parse(&bad).unwrap_err().to_string();
        assert!(e.starts_with("/data/toss_042.csv:3: "), "{e}");
    }

    #[test]
    fn toss_names_resolve_to_files() {
        let dir = std::env::temp_dir().join(format!("contactlab_toss_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("toss_007.csv"), GOOD).unwrap();
        std::fs::write(dir.join("other.csv"), GOOD).unwrap();
        assert_eq!(list_tosses(&dir).unwrap(), vec!["toss_007".to_string()]);
        let want = dir.join("toss_007.csv");
        assert_eq!(toss_path(&dir, &serde_json::json!(7)).unwrap(), want);
        assert_eq!(toss_path(&dir, &serde_json::json!("7")).unwrap(), want);
        assert_eq!(
            toss_path(&dir, &serde_json::json!("toss_007")).unwrap(),
            want
        );
        assert!(toss_path(&dir, &serde_json::json!(8)).is_err());
        assert!(toss_path(&dir, &serde_json::json!(1.5)).is_err());
        assert_eq!(read_toss(&want).unwrap().samples.len(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
