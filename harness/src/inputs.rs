//! Input files of a cell and their content digests, which are part of the cell's identity.
//!
//! A cell's row depends on the bytes of every file it reads, not only on their paths: the MJCF
//! model and its mesh and height-field assets, a terrain mesh, a recorded toss, a control
//! schedule (all reported by the scene builder in `contactlab_scenarios::Scene::inputs`), and
//! its reference's trajectory or recorded files ([`reference_files`]). [`crate::sweep::plan`]
//! hashes each of them with SHA-256 ([`Digests`]) and folds the map `{path: digest}` into the
//! cell id, so that editing one of them in place reruns exactly the cells that read it. A cell
//! that reads no file keeps the id it had before digests existed (the map is left out of the
//! id when it is empty). The row records the map in its `inputs` column; the digests are the
//! ones `sha256sum` prints.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::config::ReferenceSpec;

/// The scene whose recorded reference is a toss file of real data.
const TOSS_SCENE: &str = "cube_toss";

/// SHA-256 of a file's bytes as 64 lowercase hex digits, read in 64 KiB blocks.
///
/// # Errors
/// The file cannot be opened or read.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Digests of the files of one plan, each file hashed once however many cells read it.
#[derive(Debug, Default)]
pub struct Digests {
    cache: BTreeMap<PathBuf, String>,
}

impl Digests {
    /// `{path: sha256}` of `files` (paths as displayed; duplicates merged).
    ///
    /// # Errors
    /// A file that cannot be read: `'<path>': <why>`.
    pub fn of(&mut self, files: &[PathBuf]) -> Result<BTreeMap<String, String>, String> {
        let mut out = BTreeMap::new();
        for f in files {
            let d = match self.cache.get(f) {
                Some(d) => d.clone(),
                None => {
                    let d = sha256_file(f)
                        .map_err(|e| format!("cannot read input file '{}': {e}", f.display()))?;
                    self.cache.insert(f.clone(), d.clone());
                    d
                }
            };
            out.insert(f.display().to_string(), d);
        }
        Ok(out)
    }
}

/// The files the reference of a cell of scene `scene` with parameters `scene_params` reads,
/// beyond the scene's own inputs, as the runner opens them: the `trajectory` file; for a
/// `recorded` reference with a `dir`, `<dir>/<scene>.csv`, or for `cube_toss` the toss file in
/// `dir`. Files that do not exist are left out: the cell's row then records why its reference
/// is missing, and the id changes once the file appears.
pub fn reference_files(
    reference: &ReferenceSpec,
    scene: &str,
    scene_params: &serde_json::Map<String, serde_json::Value>,
) -> Vec<PathBuf> {
    let path = match reference {
        ReferenceSpec::Trajectory { file } => Some(file.clone()),
        ReferenceSpec::Recorded { dir: Some(dir) } if scene == TOSS_SCENE => {
            let toss = scene_params
                .get("toss")
                .cloned()
                .unwrap_or(serde_json::json!(1));
            contactlab_scenarios::recorded::toss_path(dir, &toss).ok()
        }
        ReferenceSpec::Recorded { dir: Some(dir) } => Some(dir.join(format!("{scene}.csv"))),
        _ => None,
    };
    path.into_iter().filter(|p| p.is_file()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_the_fips_180_2_test_vector() {
        // FIPS 180-2, appendix B.1: SHA-256("abc").
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("abc.txt");
        std::fs::write(&p, "abc").unwrap();
        assert_eq!(
            sha256_file(&p).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let mut d = Digests::default();
        let m = d.of(&[p.clone(), p.clone()]).unwrap();
        assert_eq!(m.len(), 1);
        let e = d.of(&[dir.path().join("missing")]).unwrap_err();
        assert!(e.contains("missing"), "{e}");
    }

    #[test]
    fn reference_files_are_the_files_the_runner_reads() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for f in ["ref.csv", "box_slide.csv", "toss_003.csv"] {
            std::fs::write(d.join(f), "t\n0\n").unwrap();
        }
        let none = serde_json::Map::new();
        let toss: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(r#"{"toss": "toss_003"}"#).unwrap();
        let traj = ReferenceSpec::Trajectory {
            file: d.join("ref.csv"),
        };
        assert_eq!(
            reference_files(&traj, "box_slide", &none),
            [d.join("ref.csv")]
        );
        let rec = ReferenceSpec::Recorded {
            dir: Some(d.to_path_buf()),
        };
        assert_eq!(
            reference_files(&rec, "box_slide", &none),
            [d.join("box_slide.csv")]
        );
        assert_eq!(
            reference_files(&rec, "cube_toss", &toss),
            [d.join("toss_003.csv")]
        );
        // Missing files are left out (the row says why the reference is missing).
        assert!(reference_files(&rec, "box_drop", &none).is_empty());
        // The scene's own toss file is among the scene's inputs already.
        let own = ReferenceSpec::Recorded { dir: None };
        assert!(reference_files(&own, "cube_toss", &toss).is_empty());
        let same = ReferenceSpec::SameFormulation { timestep: 1e-4 };
        assert!(reference_files(&same, "box_slide", &none).is_empty());
    }
}
