//! The Ostrich paper's usability test of a box-traversal run, applied to stored rows as a second
//! accuracy threshold beside `accuracy_threshold` (report.md, "Largest usable timestep (Ostrich's
//! definition)").
//!
//! Definition (the Ostrich paper's box-traversal usability test as issue 13 states it; the
//! paper excerpt in the project's background documents does not carry it): a run is usable when
//! 1. no state is non-finite,
//! 2. the chassis origin's height stays within [[`Z_MIN_M`], [`Z_MAX_M`]] = [0.05, 2] m over the
//!    whole run (task outcomes `chassis_z_min_m`, `chassis_z_max_m`),
//! 3. the chassis origin ends at least [`PAST_OBSTACLE_M`] = 0.5 m past the box's far face
//!    (`past_obstacle_m`), and
//! 4. its final position is within [`FINAL_ERROR_M`] = 0.2 m of the finest-timestep run
//!    (`traj_pos_error_final_m`, the free-body position error at the end against the
//!    experiment's reference, which for `timestep_stability.yaml` is the same formulation at
//!    0.125 ms).
//!
//! The harness's own stability rule is stricter than (1): it also stops a run whose energy
//! rises, whose penetration exceeds half the smallest geom extent or whose speed exceeds the
//! scene's bound, and a stopped run never reaches the final state that (3) and (4) judge. So a
//! row is usable only with status `ok`; a row whose task outcomes lack (2)–(3) (a scene without
//! an obstacle to cross) or whose reference error is missing is not judged at all, and the
//! (scene, formulation) gets no usable timestep rather than a guessed one.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::results::Row;

/// Lowest admissible chassis origin height (m).
pub const Z_MIN_M: f64 = 0.05;
/// Highest admissible chassis origin height (m).
pub const Z_MAX_M: f64 = 2.0;
/// How far past the box's far face the chassis origin must end (m).
pub const PAST_OBSTACLE_M: f64 = 0.5;
/// Largest final position error against the finest-timestep run (m).
pub const FINAL_ERROR_M: f64 = 0.2;

/// The usability verdict of one row: `None` when the row cannot be judged (no obstacle
/// outcomes, no reference error), else whether it is usable (module doc).
pub fn usable(row: &Row) -> Option<bool> {
    let Ok(serde_json::Value::Object(task)) =
        serde_json::from_str::<serde_json::Value>(row.str("task"))
    else {
        return None;
    };
    let get = |k: &str| task.get(k).and_then(serde_json::Value::as_f64);
    let (z_min, z_max, past) = (
        get("chassis_z_min_m")?,
        get("chassis_z_max_m")?,
        get("past_obstacle_m")?,
    );
    let err = row.f64("traj_pos_error_final_m");
    if !err.is_finite() {
        return None;
    }
    Some(
        row.str("status") == "ok"
            && z_min >= Z_MIN_M
            && z_max <= Z_MAX_M
            && past >= PAST_OBSTACLE_M
            && err <= FINAL_ERROR_M,
    )
}

/// Largest usable timestep of one (scene, formulation label).
#[derive(Debug, Clone, PartialEq)]
pub struct UsableLimit {
    /// Scene label.
    pub scene: String,
    /// Formulation label.
    pub label: String,
    /// Largest swept timestep (s) whose cells are all usable; `None`: none is.
    pub usable_s: Option<f64>,
    /// Share of non-converged steps over the cells at that timestep (NaN without one).
    pub nonconverged_at_usable: f64,
    /// Per swept timestep (s): usable cells and judged cells.
    pub counts: Vec<(f64, usize, usize)>,
}

/// [`UsableLimit`] for every (scene, label) with at least one judged row.
pub fn limits(rows: &[Row]) -> Vec<UsableLimit> {
    type ByH<'a> = BTreeMap<u64, Vec<(&'a Row, bool)>>;
    let mut groups: BTreeMap<(String, String), ByH<'_>> = BTreeMap::new();
    for r in rows {
        if let Some(ok) = usable(r) {
            groups
                .entry((r.scene_label().to_string(), r.series()))
                .or_default()
                .entry(r.f64("timestep_s").to_bits())
                .or_default()
                .push((r, ok));
        }
    }
    groups
        .into_iter()
        .map(|((scene, label), by_h)| {
            let mut usable_s: Option<(f64, f64)> = None;
            let mut counts = Vec::new();
            for (b, cells) in &by_h {
                let h = f64::from_bits(*b);
                let n_ok = cells.iter().filter(|(_, ok)| *ok).count();
                counts.push((h, n_ok, cells.len()));
                if n_ok == cells.len() && usable_s.is_none_or(|(u, _)| h > u) {
                    let steps: u64 = cells.iter().map(|(r, _)| r.u64("steps")).sum();
                    let bad: u64 = cells.iter().map(|(r, _)| r.u64("nonconverged_steps")).sum();
                    let share = if steps == 0 {
                        f64::NAN
                    } else {
                        bad as f64 / steps as f64
                    };
                    usable_s = Some((h, share));
                }
            }
            counts.sort_by(|a, b| a.0.total_cmp(&b.0));
            UsableLimit {
                scene,
                label,
                usable_s: usable_s.map(|(h, _)| h),
                nonconverged_at_usable: usable_s.map_or(f64::NAN, |(_, s)| s),
                counts,
            }
        })
        .collect()
}

/// Append report.md's "Usable timestep (Ostrich)" section when any row can be judged.
pub fn write_table(s: &mut String, rows: &[Row]) {
    let limits = limits(rows);
    if limits.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n## Largest usable timestep (Ostrich's definition)\n\nA second accuracy threshold: a run is usable when it finished without divergence, the chassis origin stayed within [{Z_MIN_M}, {Z_MAX_M}] m high, ended at least {PAST_OBSTACLE_M} m past the box's far face, and ended within {FINAL_ERROR_M} m of the reference run (the finest timestep). Largest usable: the largest swept timestep whose cells are all usable. Usable cells per timestep follow.\n"
    );
    let _ = writeln!(
        s,
        "| scene | formulation | largest usable timestep (s) | non-converged there | usable / judged cells per timestep (s) |\n|---|---|---|---|---|"
    );
    for l in limits {
        let per_h: Vec<String> = l
            .counts
            .iter()
            .map(|(h, ok, n)| format!("{h}: {ok}/{n}"))
            .collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            l.scene,
            l.label,
            l.usable_s.map_or("none".to_string(), |h| h.to_string()),
            if l.nonconverged_at_usable.is_nan() {
                "–".to_string()
            } else {
                format!("{:.1} %", 100.0 * l.nonconverged_at_usable)
            },
            per_h.join(", ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(h: f64, status: &str, z: (f64, f64), past: f64, err: f64) -> Row {
        let mut r = Row::default();
        r.set_str("scene", "box_traversal");
        r.set_str("label", "ncp_fb");
        r.set_str("status", status);
        r.set_f64("timestep_s", h);
        r.set_u64("steps", 100);
        r.set_u64("nonconverged_steps", 1);
        r.set_f64("traj_pos_error_final_m", err);
        r.set_str(
            "task",
            serde_json::json!({"chassis_z_min_m": z.0, "chassis_z_max_m": z.1, "past_obstacle_m": past})
                .to_string(),
        );
        r
    }

    #[test]
    fn each_condition_of_the_definition_decides() {
        let good = ((0.35, 0.5), 1.2, 0.05);
        assert_eq!(usable(&row(0.01, "ok", good.0, good.1, good.2)), Some(true));
        assert_eq!(
            usable(&row(0.01, "diverged", good.0, good.1, good.2)),
            Some(false)
        );
        assert_eq!(
            usable(&row(0.01, "ok", (0.04, 0.5), good.1, good.2)),
            Some(false)
        );
        assert_eq!(
            usable(&row(0.01, "ok", (0.35, 2.1), good.1, good.2)),
            Some(false)
        );
        assert_eq!(usable(&row(0.01, "ok", good.0, 0.49, good.2)), Some(false));
        assert_eq!(usable(&row(0.01, "ok", good.0, good.1, 0.21)), Some(false));
        assert_eq!(
            usable(&row(0.01, "ok", good.0, good.1, f64::NAN)),
            None,
            "no reference"
        );
        let mut flat = row(0.01, "ok", good.0, good.1, good.2);
        flat.set_str(
            "task",
            r#"{"chassis_z_min_m": 0.35, "chassis_z_max_m": 0.4}"#,
        );
        assert_eq!(usable(&flat), None, "no obstacle to cross");
    }

    #[test]
    fn largest_usable_is_the_largest_all_usable_timestep() {
        let g = (0.35, 0.5);
        let rows = vec![
            row(0.001, "ok", g, 1.0, 0.01),
            row(0.01, "ok", g, 1.0, 0.1),
            row(0.02, "ok", g, 1.0, 0.3),
            row(0.05, "ok", g, 1.0, 0.15),
            row(0.1, "diverged", g, 1.0, 0.1),
        ];
        let l = &limits(&rows)[0];
        assert_eq!(
            l.usable_s,
            Some(0.05),
            "not a prefix, like the accurate timestep"
        );
        assert!((l.nonconverged_at_usable - 0.01).abs() < 1e-15);
        assert_eq!(l.counts[2], (0.02, 0, 1));
        let mut s = String::new();
        write_table(&mut s, &rows);
        assert!(
            s.contains("| box_traversal | ncp_fb | 0.05 | 1.0 % |"),
            "{s}"
        );
    }
}
