//! Where the run-time data of the product is found (today: the cube tosses of `cube_toss`).
//!
//! The data ships in the repository under `data/` (see `data/README.md`). A scene that reads
//! data and is given no folder of its own looks for `<root>/<sub>` (`sub` = `cube_toss`), the
//! root resolved **at run time** in this order:
//!
//! 1. the environment variable [`DATA_ENV`] (`CONTACTLAB_DATA`) when it is set and not empty:
//!    the folder that holds `cube_toss/` (the repository's `data/`); a relative value is taken
//!    from the working directory. When it is set, it is the only place looked at: a variable
//!    that points nowhere is an error, never silently replaced by the default.
//! 2. otherwise [`DEFAULT_DATA_DIR`] (`data/`) under the working directory, which is where the
//!    README's commands, run from the repository root, find it.
//!
//! When the folder is not there the error ([`DataDirError`]) names the path tried and how to
//! point at the data. Nothing is fixed at build time, so an installed binary or a clone in any
//! place works the same way.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// The environment variable naming the data root (the folder that holds `cube_toss/`).
pub const DATA_ENV: &str = "CONTACTLAB_DATA";

/// The data root, relative to the working directory, used when [`DATA_ENV`] is not set.
pub const DEFAULT_DATA_DIR: &str = "data";

/// A data folder could not be found.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DataDirError {
    /// [`DATA_ENV`] is set but `<its value>/<sub>` is not a folder.
    #[error(
        "no '{sub}' data folder: {DATA_ENV}={} is set but {} is not a folder; set {DATA_ENV} to the folder that holds {sub}/ (the repository's data/), or unset it to use data/ under the working directory",
        value.to_string_lossy(),
        tried.display()
    )]
    FromEnv {
        /// The sub-folder looked for (`cube_toss`).
        sub: String,
        /// The variable's value.
        value: OsString,
        /// The path tried, absolute.
        tried: PathBuf,
    },
    /// [`DATA_ENV`] is not set and `data/<sub>` is not a folder under the working directory.
    #[error(
        "no '{sub}' data folder: {DATA_ENV} is not set and {} (data/{sub} under the working directory) is not a folder; run from the repository root, set {DATA_ENV} to the repository's data/ folder, or give the folder explicitly",
        tried.display()
    )]
    FromWorkingDir {
        /// The sub-folder looked for (`cube_toss`).
        sub: String,
        /// The path tried, absolute.
        tried: PathBuf,
    },
}

/// The folder `<data root>/<sub>` for this process: [`DATA_ENV`] from the environment and
/// the current working directory, resolved as described in the module documentation.
///
/// # Errors
/// [`DataDirError`] naming the path tried when that folder does not exist.
pub fn data_subdir(sub: &str) -> Result<PathBuf, DataDirError> {
    let env = std::env::var_os(DATA_ENV);
    let cwd = std::env::current_dir().unwrap_or_default();
    resolve_data_subdir(sub, env.as_deref(), &cwd)
}

/// The folder `<data root>/<sub>` given the value of [`DATA_ENV`] (`None` or empty: not set)
/// and the working directory `cwd`. The result is absolute when `cwd` is.
///
/// # Errors
/// [`DataDirError::FromEnv`] when the variable is set and `<value>/<sub>` is not a folder;
/// [`DataDirError::FromWorkingDir`] when it is not set and `cwd/data/<sub>` is not a folder.
pub fn resolve_data_subdir(
    sub: &str,
    env: Option<&OsStr>,
    cwd: &Path,
) -> Result<PathBuf, DataDirError> {
    match env.filter(|v| !v.is_empty()) {
        Some(value) => {
            let tried = cwd.join(value).join(sub);
            if tried.is_dir() {
                Ok(tried)
            } else {
                Err(DataDirError::FromEnv {
                    sub: sub.to_string(),
                    value: value.to_os_string(),
                    tried,
                })
            }
        }
        None => {
            let tried = cwd.join(DEFAULT_DATA_DIR).join(sub);
            if tried.is_dir() {
                Ok(tried)
            } else {
                Err(DataDirError::FromWorkingDir {
                    sub: sub.to_string(),
                    tried,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A working directory holding `data/cube_toss/` and `elsewhere/cube_toss/`.
    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("data/cube_toss")).unwrap();
        std::fs::create_dir_all(t.path().join("elsewhere/cube_toss")).unwrap();
        t
    }

    #[test]
    fn unset_variable_finds_data_under_the_working_directory() {
        let t = tree();
        let cwd = t.path();
        let want = cwd.join("data/cube_toss");
        assert_eq!(resolve_data_subdir("cube_toss", None, cwd).unwrap(), want);
        // An empty value counts as not set.
        let empty = OsString::new();
        assert_eq!(
            resolve_data_subdir("cube_toss", Some(&empty), cwd).unwrap(),
            want
        );
    }

    #[test]
    fn the_variable_wins_over_the_working_directory() {
        let t = tree();
        let cwd = t.path();
        // Relative to the working directory ...
        let rel = OsString::from("elsewhere");
        assert_eq!(
            resolve_data_subdir("cube_toss", Some(&rel), cwd).unwrap(),
            cwd.join("elsewhere/cube_toss")
        );
        // ... or absolute, whatever the working directory.
        let abs = cwd.join("elsewhere").into_os_string();
        let other = tempfile::tempdir().unwrap();
        assert_eq!(
            resolve_data_subdir("cube_toss", Some(&abs), other.path()).unwrap(),
            cwd.join("elsewhere/cube_toss")
        );
    }

    /// A set variable that points at no data is an error even when `data/` would be found.
    #[test]
    fn a_wrong_variable_is_an_error_not_a_silent_fallback() {
        let t = tree();
        let cwd = t.path();
        let v = OsString::from("nowhere");
        let e = resolve_data_subdir("cube_toss", Some(&v), cwd).unwrap_err();
        let tried = cwd.join("nowhere/cube_toss");
        assert_eq!(
            e,
            DataDirError::FromEnv {
                sub: "cube_toss".into(),
                value: v,
                tried: tried.clone()
            }
        );
        let msg = e.to_string();
        assert!(msg.contains("CONTACTLAB_DATA=nowhere"), "{msg}");
        assert!(msg.contains(&tried.display().to_string()), "{msg}");
    }

    #[test]
    fn missing_data_names_the_path_tried_and_the_variable() {
        let t = tempfile::tempdir().unwrap();
        let e = resolve_data_subdir("cube_toss", None, t.path()).unwrap_err();
        let tried = t.path().join("data/cube_toss");
        assert_eq!(
            e,
            DataDirError::FromWorkingDir {
                sub: "cube_toss".into(),
                tried: tried.clone()
            }
        );
        let msg = e.to_string();
        assert!(msg.contains(&tried.display().to_string()), "{msg}");
        assert!(msg.contains("CONTACTLAB_DATA"), "{msg}");
        assert!(msg.contains("repository root"), "{msg}");
    }
}
