//! `cube_toss`: the real cube of `data/cube_toss/` (450 recorded tosses onto a table,
//! ContactNets' processed set; see its README) as a free body on a plane, started from the
//! first recorded state of one toss. The recording is the reference trajectory (the harness's
//! `recorded` reference), so formulations are scored against reality.
//!
//! **Model** (table frame of the data: z up, gravity −9.81 m/s² along z). A cube of edge
//! [`CUBE_EDGE_M`] and mass [`CUBE_MASS_KG`] with principal inertia [`CUBE_INERTIA_KG_M2`]
//! about each axis (the data README's upstream value 0.29500029 in scaled units, times m and
//! the half-width squared; a uniform cube would have 0.667 instead of 0.295); a plane at
//! z = `table_height` (m, default 0). The data's resting centre height is about 0.0514 m, a
//! millimetre below the half-width 0.0524 m: `table_height: -0.001` puts the plane where the
//! recording rests. The model's timestep is the recording's [`SAMPLE_DT_S`] = 1/148 s.
//!
//! **Initial state.** The first sample of the toss, unchanged: the file's linear velocity is
//! in the table frame and its angular velocity in the body frame, which is exactly the free
//! joint's qvel convention (world linear, body-frame angular; `solvers/src/kinematics.rs`).
//!
//! **Parameters.** `dir` (folder of `toss_NNN.csv` files; default [`default_toss_dir`]:
//! `$CONTACTLAB_DATA/cube_toss` if that variable is set, else `data/cube_toss` under the
//! working directory, resolved at run time by [`crate::data_dir`]; a relative `dir` resolves
//! against the working directory, like the `mjcf` scene's `file`), `toss` (a number N for
//! `toss_NNN.csv` or a file stem; `all` is expanded by the harness into one cell per toss, see
//! [`expand`]), `friction` (sliding, nominal 0.18 from upstream), `table_height`, the penalty
//! material `ke`, `kd`, `kf`, and `horizon` (default: the recording's duration).
//!
//! **Penalty material.** ke = 1e5 N/m, kd = 100 N s/m, kf = 200 N s/m as in the closed-form
//! cube scenes. The 0.37 kg cube on four corners has `h sqrt(4 ke / m)` = 0.70 at
//! h = 1/1480 s (stable) but 7.0 at 1/148 s, where explicit penalty contact is unstable.

use std::path::{Path, PathBuf};

use contactlab_solvers::formulation::ParamDoc;
use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::model::{Body, Geom, Joint, JointKind, ModelParts, Vec3};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{bad, material, model, non_negative};
use crate::recorded::{list_tosses, read_toss, toss_path, TossRecording};
use crate::{parse_params, Scene, SceneEntry, SceneError};

/// Cube edge length (m): the width the position error is expressed in.
pub const CUBE_EDGE_M: f64 = 0.1048;
/// Cube mass (kg).
pub const CUBE_MASS_KG: f64 = 0.37;
/// Principal moment of inertia about each axis (kg m²): 0.29500029 · 0.37 · 0.0524²
/// (about 3.0e-4).
pub const CUBE_INERTIA_KG_M2: f64 = 0.295_000_29 * CUBE_MASS_KG * 0.0524 * 0.0524;
/// The recording's sampling interval (s): 148 Hz.
pub const SAMPLE_DT_S: f64 = 1.0 / 148.0;
/// Upstream's nominal sliding friction coefficient (-).
pub const NOMINAL_FRICTION: f64 = 0.18;
const SCENE: &str = "cube_toss";

/// The sub-folder of the data root that holds the tosses.
pub const TOSS_DATA_SUBDIR: &str = "cube_toss";

/// The default toss folder, resolved at run time ([`crate::data_dir::data_subdir`]):
/// `$CONTACTLAB_DATA/cube_toss` when `CONTACTLAB_DATA` is set (and then only there), else
/// `data/cube_toss` under the working directory (the repository's `data/cube_toss/` when run
/// from the repository root). Absolute.
///
/// # Errors
/// [`SceneError::BadParams`] naming the path tried, the variable and the `dir` parameter when
/// that folder does not exist.
pub fn default_toss_dir() -> Result<PathBuf, SceneError> {
    crate::data_dir::data_subdir(TOSS_DATA_SUBDIR)
        .map_err(|e| bad(SCENE, format!("{e} (the scene's `dir` parameter)")))
}

/// Parameters of `cube_toss`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CubeTossParams {
    /// Folder of `toss_NNN.csv` files; `None`: [`default_toss_dir`] (resolved at run time).
    /// Relative paths resolve against the working directory.
    pub dir: Option<PathBuf>,
    /// The toss: a number N (`toss_NNN.csv`) or a file stem (`"toss_001"`). The value `"all"`
    /// is only meaningful in an experiment file, where the harness expands it ([`expand`]).
    pub toss: Value,
    /// Sliding friction coefficient of cube and table (-).
    pub friction: f64,
    /// Height of the table plane (m) in the data's table frame.
    pub table_height: f64,
    /// Penalty contact stiffness (N/m).
    pub ke: f64,
    /// Penalty contact damping (N s/m).
    pub kd: f64,
    /// Penalty viscous friction (N s/m).
    pub kf: f64,
    /// Simulated duration (s); `None`: the recording's duration (time of its last sample).
    pub horizon: Option<f64>,
}

impl Default for CubeTossParams {
    fn default() -> Self {
        Self {
            dir: None,
            toss: Value::from(1),
            friction: NOMINAL_FRICTION,
            table_height: 0.0,
            ke: 1e5,
            kd: 100.0,
            kf: 200.0,
            horizon: None,
        }
    }
}

impl CubeTossParams {
    /// The toss folder: `dir` as given, or [`default_toss_dir`].
    ///
    /// # Errors
    /// [`SceneError::BadParams`] when `dir` is `None` and no default folder exists.
    pub fn toss_dir(&self) -> Result<PathBuf, SceneError> {
        match &self.dir {
            Some(d) => Ok(d.clone()),
            None => default_toss_dir(),
        }
    }

    /// Read this toss's recording from `dir` (or from [`CubeTossParams::toss_dir`] when
    /// `dir` is `None`).
    ///
    /// # Errors
    /// [`SceneError::BadParams`] naming the toss, the file and line of a malformed file, or
    /// the path tried when there is no default folder ([`default_toss_dir`]).
    pub fn recording(&self, dir: Option<&Path>) -> Result<TossRecording, SceneError> {
        if self.toss.as_str() == Some("all") {
            return Err(bad(
                SCENE,
                "toss 'all' is expanded into one cell per toss by the harness; a scene built directly needs one toss (a number or a file stem)".into(),
            ));
        }
        let dir = match dir {
            Some(d) => d.to_path_buf(),
            None => self.toss_dir()?,
        };
        let path = toss_path(&dir, &self.toss).map_err(|e| bad(SCENE, e.to_string()))?;
        read_toss(&path).map_err(|e| bad(SCENE, e.to_string()))
    }
}

/// Expand `toss: all` into one parameter object per toss file in the toss folder (sorted by
/// id, each with `toss` set to the file stem); any other toss value is normalized to its file
/// stem (one object). Other keys are kept as they are.
///
/// # Errors
/// [`SceneError::BadParams`]: no default folder (naming the path tried), unreadable folder,
/// no toss files, unknown toss, bad parameters.
pub fn expand(params: &Map<String, Value>) -> Result<Vec<Map<String, Value>>, SceneError> {
    let p: CubeTossParams = parse_params(SCENE, &Value::Object(params.clone()))?;
    let dir = p.toss_dir()?;
    let ids = if p.toss.as_str() == Some("all") {
        list_tosses(&dir).map_err(|e| bad(SCENE, e.to_string()))?
    } else {
        let path = toss_path(&dir, &p.toss).map_err(|e| bad(SCENE, e.to_string()))?;
        vec![path
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default()]
    };
    Ok(ids
        .into_iter()
        .map(|id| {
            let mut m = params.clone();
            m.insert("toss".into(), Value::String(id));
            m
        })
        .collect())
}

/// Build the scene from its parameters and the toss's recording.
fn build(v: &Value) -> Result<Scene, SceneError> {
    let p: CubeTossParams = parse_params(SCENE, v)?;
    positive_material(&p)?;
    non_negative(SCENE, &[("friction", p.friction)])?;
    if !p.table_height.is_finite() {
        return Err(bad(
            SCENE,
            format!("table_height = {} must be finite", p.table_height),
        ));
    }
    let rec = p.recording(None)?;
    let horizon = match p.horizon {
        Some(h) if h.is_finite() && h > 0.0 => h,
        Some(h) => return Err(bad(SCENE, format!("horizon = {h} must be finite and > 0"))),
        None if rec.duration() > 0.0 => rec.duration(),
        None => {
            return Err(bad(
                SCENE,
                format!(
                    "{} holds a single sample; give a horizon",
                    rec.path.display()
                ),
            ))
        }
    };
    let mat = material(p.friction, p.ke, p.kd, p.kf);
    let mut parts = ModelParts {
        name: SCENE.into(),
        ..ModelParts::default()
    };
    parts.options.timestep = SAMPLE_DT_S;
    let mut table = Geom::new("table", 0, GeomShape::Plane);
    table.pos = Vec3::new(0.0, 0.0, p.table_height);
    table.material = mat;
    parts.geoms.push(table);
    parts.bodies.push(Body::new(
        "cube",
        0,
        Vec3::zeros(),
        CUBE_MASS_KG,
        Vec3::repeat(CUBE_INERTIA_KG_M2),
    ));
    parts
        .joints
        .push(Joint::new("cube_free", JointKind::Free, 1));
    let mut g = Geom::new(
        "cube_geom",
        1,
        GeomShape::Box {
            half: Vec3::repeat(0.5 * CUBE_EDGE_M),
        },
    );
    g.material = mat;
    parts.geoms.push(g);
    let m = model(SCENE, parts)?;
    let mut initial = rec.samples[0].state([0.0; 3]);
    initial.t = 0.0;
    Ok(Scene {
        model: m,
        initial,
        horizon,
        controls: None,
        energy_allowance: 0.1,
        speed_bound: 20.0,
        analytic: vec![],
        task: None,
        inputs: vec![rec.path.clone()],
    })
}

fn positive_material(p: &CubeTossParams) -> Result<(), SceneError> {
    super::positive(SCENE, &[("ke", p.ke)])?;
    non_negative(SCENE, &[("kd", p.kd), ("kf", p.kf)])
}

/// Registry entry of `cube_toss`.
pub const CUBE_TOSS: SceneEntry = SceneEntry {
    name: SCENE,
    description: "real 0.1048 m, 0.37 kg cube tossed onto a table, from a recording's first state (data/cube_toss, 450 tosses); reference: the recording",
    params: &[
        ParamDoc { name: "dir", default: "data/cube_toss", unit: "-", doc: "folder of toss_NNN.csv files; default, found at run time: $CONTACTLAB_DATA/cube_toss if CONTACTLAB_DATA is set, else data/cube_toss under the working directory (the repository root); a relative path is taken from the working directory" },
        ParamDoc { name: "toss", default: "1", unit: "-", doc: "toss number N (toss_NNN.csv) or file stem; `all` in an experiment: one cell per toss" },
        ParamDoc { name: "friction", default: "0.18", unit: "-", doc: "sliding friction of cube and table (upstream nominal)" },
        ParamDoc { name: "table_height", default: "0.0", unit: "m", doc: "height of the table plane (data rests at -0.001)" },
        ParamDoc { name: "ke", default: "100000.0", unit: "N/m", doc: "penalty contact stiffness" },
        ParamDoc { name: "kd", default: "100.0", unit: "N s/m", doc: "penalty contact damping" },
        ParamDoc { name: "kf", default: "200.0", unit: "N s/m", doc: "penalty viscous friction" },
        ParamDoc { name: "horizon", default: "recording", unit: "s", doc: "simulated duration; default the recording's duration" },
    ],
    build,
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The repository's toss folder, found from this crate's sources (tests run in the
    /// crate folder, where `data/` under the working directory does not exist).
    fn repo_tosses() -> String {
        concat!(env!("CARGO_MANIFEST_DIR"), "/../data/cube_toss").to_string()
    }

    #[test]
    fn inertia_matches_the_data_readme() {
        assert!((CUBE_INERTIA_KG_M2 - 3.0e-4).abs() < 1e-5);
    }

    #[test]
    fn the_default_toss_builds_from_its_first_sample() {
        let s = build(&serde_json::json!({"dir": repo_tosses()})).unwrap();
        let rec = CubeTossParams {
            dir: Some(repo_tosses().into()),
            ..CubeTossParams::default()
        }
        .recording(None)
        .unwrap();
        assert_eq!(rec.id, "toss_001");
        assert_eq!((s.model.nq, s.model.nv), (7, 6));
        assert_eq!(s.initial.q, rec.samples[0].state([0.0; 3]).q);
        assert_eq!(s.initial.v, rec.samples[0].state([0.0; 3]).v);
        assert_eq!(s.horizon, rec.duration());
    }

    #[test]
    fn all_expands_to_every_toss() {
        let all = expand(
            &serde_json::json!({"toss": "all", "dir": repo_tosses()})
                .as_object()
                .unwrap()
                .clone(),
        )
        .unwrap();
        assert_eq!(all.len(), 450);
        assert_eq!(all[0]["toss"], "toss_001");
        let one = expand(
            &serde_json::json!({"toss": 5, "dir": repo_tosses()})
                .as_object()
                .unwrap()
                .clone(),
        )
        .unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0]["toss"], "toss_005");
        assert!(build(&serde_json::json!({"toss": "all", "dir": repo_tosses()})).is_err());
        assert!(
            build(&serde_json::json!({"toss": 3, "dir": repo_tosses()})).is_err(),
            "toss_003 is held back"
        );
    }
}
