//! Control schedules of the `mjcf` scene: controls as a function of time, from a CSV file or
//! from a list in the experiment (scene parameter `controls`, [`super::MjcfParams`]).
//!
//! A schedule is a table of rows `(t_k, u_k)`, times strictly increasing (s), `u_k` one value
//! per actuator in the actuator's units (N or N m for a motor, m or rad for a position servo's
//! target, m/s or rad/s for a velocity servo's). Between rows it is
//! * `hold` (the default): **piecewise constant**, `u(t) = u_k` for `t_k ≤ t < t_{k+1}`
//!   (zero-order hold, what a controller sampled at the `t_k` sends);
//! * `linear`: piecewise linear between the rows.
//!
//! Before the first row the first row's values hold, after the last row the last row's.
//!
//! Forms:
//! * a CSV file: the header `time,<actuator names...>` (every actuator of the model exactly
//!   once, any order), then one row per time; blank lines are skipped;
//! * a list `[[t, u1, u2, ...], ...]`, the values in `<actuator>` order.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// How a schedule is interpolated between its rows (module doc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Interpolation {
    /// Piecewise constant: the row at or before t.
    #[default]
    Hold,
    /// Piecewise linear between the rows around t.
    Linear,
}

/// A validated control schedule (module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Row times (s), strictly increasing, at least one.
    pub times: Vec<f64>,
    /// Controls of each row, one value per actuator in `<actuator>` order.
    pub values: Vec<Vec<f64>>,
    /// Interpolation between rows.
    pub interpolation: Interpolation,
}

impl Schedule {
    /// The controls at time `t` (s).
    pub fn at(&self, t: f64) -> Vec<f64> {
        let k = self.times.partition_point(|&tk| tk <= t);
        if k == 0 {
            return self.values[0].clone();
        }
        if k == self.times.len() || self.interpolation == Interpolation::Hold {
            return self.values[k - 1].clone();
        }
        let (t0, t1) = (self.times[k - 1], self.times[k]);
        let s = (t - t0) / (t1 - t0);
        self.values[k - 1]
            .iter()
            .zip(&self.values[k])
            .map(|(a, b)| a + s * (b - a))
            .collect()
    }
}

/// Check rows `(t, u)` given as `(where, numbers)`: width `1 + actuators.len()`, finite
/// numbers, strictly increasing times. `where` names the row in errors (file and line, or the
/// key and index).
fn from_rows(
    rows: Vec<(String, Vec<f64>)>,
    actuators: &[String],
    interpolation: Interpolation,
    source: &str,
) -> Result<Schedule, String> {
    let width = 1 + actuators.len();
    let (mut times, mut values) = (Vec::new(), Vec::new());
    for (at, row) in rows {
        if row.len() != width {
            return Err(format!(
                "{at}: {} numbers, expected {width} (time and one control per actuator: {})",
                row.len(),
                actuators.join(", ")
            ));
        }
        if let Some(x) = row.iter().find(|x| !x.is_finite()) {
            return Err(format!("{at}: {x} is not a finite number"));
        }
        if let Some(&last) = times.last() {
            if !(row[0] > last) {
                return Err(format!(
                    "{at}: time {} s does not increase (previous row at {last} s)",
                    row[0]
                ));
            }
        }
        times.push(row[0]);
        values.push(row[1..].to_vec());
    }
    if times.is_empty() {
        return Err(format!("{source}: the control schedule has no rows"));
    }
    Ok(Schedule {
        times,
        values,
        interpolation,
    })
}

/// A schedule from the list form `[[t, u1, ...], ...]` (the JSON value of the `controls`
/// key); errors name `controls[i]`.
///
/// # Errors
/// Not a list of number lists, a row of the wrong width, a non-finite number, times not
/// strictly increasing, or no rows.
pub fn from_list(
    v: &serde_json::Value,
    actuators: &[String],
    interpolation: Interpolation,
) -> Result<Schedule, String> {
    let serde_json::Value::Array(list) = v else {
        return Err(format!(
            "controls: expected a CSV file path or a list of rows [t, u1, ...], got {v}"
        ));
    };
    let mut rows = Vec::new();
    for (i, r) in list.iter().enumerate() {
        let nums: Option<Vec<f64>> = r
            .as_array()
            .and_then(|a| a.iter().map(serde_json::Value::as_f64).collect());
        let nums = nums.ok_or_else(|| {
            format!("controls[{i}]: expected a list of numbers [t, u1, ...], got {r}")
        })?;
        rows.push((format!("controls[{i}]"), nums));
    }
    from_rows(rows, actuators, interpolation, "controls")
}

/// A schedule from the CSV file `path` (module doc); errors name `path:line`.
///
/// # Errors
/// An unreadable file, a header that is not `time` followed by every actuator name once, a row
/// of the wrong width, a value that is not a finite number, times not strictly increasing, or
/// no rows.
pub fn from_csv(
    path: &Path,
    actuators: &[String],
    interpolation: Interpolation,
) -> Result<Schedule, String> {
    let file = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("controls file {file}: cannot read it: {e}"))?;
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty());
    let Some((hl, header)) = lines.next() else {
        return Err(format!(
            "{file}: empty; expected the header time,{}",
            actuators.join(",")
        ));
    };
    let names: Vec<&str> = header.split(',').map(str::trim).collect();
    let expected = format!("time,{}", actuators.join(","));
    if names.first() != Some(&"time") || names.len() != 1 + actuators.len() {
        return Err(format!(
            "{file}:{hl}: header '{header}' has {} columns; expected 'time' and one column per actuator ({expected})",
            names.len()
        ));
    }
    // Column of each actuator in the file.
    let mut column = Vec::with_capacity(actuators.len());
    for a in actuators {
        match names[1..].iter().position(|n| n == a) {
            Some(c) => column.push(c + 1),
            None => {
                return Err(format!(
                    "{file}:{hl}: header '{header}' has no column '{a}'; expected {expected}"
                ))
            }
        }
    }
    let mut rows = Vec::new();
    for (ln, line) in lines {
        let at = format!("{file}:{ln}");
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        let mut nums = Vec::with_capacity(cells.len());
        for c in &cells {
            nums.push(
                c.parse::<f64>()
                    .map_err(|_| format!("{at}: '{c}' is not a number"))?,
            );
        }
        // Reorder to (time, actuators in model order) once the width is right.
        if nums.len() == names.len() {
            let mut ordered = vec![nums[0]];
            ordered.extend(column.iter().map(|&c| nums[c]));
            nums = ordered;
        }
        rows.push((at, nums));
    }
    from_rows(rows, actuators, interpolation, &file.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_and_linear_between_rows() {
        let names = vec!["a".to_string()];
        let v = serde_json::json!([[0.0, 1.0], [1.0, 3.0], [2.0, -1.0]]);
        let hold = from_list(&v, &names, Interpolation::Hold).unwrap();
        let lin = from_list(&v, &names, Interpolation::Linear).unwrap();
        assert_eq!(hold.at(-1.0), vec![1.0]);
        assert_eq!(hold.at(0.5), vec![1.0]);
        assert_eq!(hold.at(1.0), vec![3.0]);
        assert_eq!(hold.at(9.0), vec![-1.0]);
        assert_eq!(lin.at(0.25), vec![1.5]);
        assert_eq!(lin.at(1.5), vec![1.0]);
        assert_eq!(lin.at(9.0), vec![-1.0]);
    }
}
