//! Figures from results rows alone (plotters): one figure per (kind, scene), one line per
//! formulation label, x = timestep on a log axis, divergence marked with a cross at the top.
//!
//! Written as `figures/<kind>__<scene>.svg` (525 × 375 px, 14 px text: a paper column) and
//! `.png` (twice the size and text, for about 300 dpi at column width), each atomically (a
//! temporary file renamed into place). Scene labels whose file names coincide are an error.
//!
//! Fonts: plotters' default text stack (font-kit) needs fontconfig and system fonts, which a
//! fresh Debian machine may lack. We build plotters with its `ab_glyph` feature instead and
//! register DejaVu Sans, shipped in `harness/assets/fonts/` (Bitstream Vera license, which
//! permits redistribution; see the LICENSE beside it), so PNG rendering needs nothing from the
//! system. SVG text names the family `sans-serif` and is laid out with the same font metrics.
//!
//! Values: the mean over seeds (and other sweep values) of the cells with status `ok`; on log
//! axes non-positive values are left out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::config::FigureKind;
use crate::results::{commit_temp, temp_path, write_atomic, Row};

static FONT: &[u8] = include_bytes!("../assets/fonts/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

/// Register the shipped font once (module doc); for every figure writer of the harness.
pub(crate) fn register_font() {
    REGISTER.call_once(|| {
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// What a figure kind plots.
struct Spec {
    column: &'static str,
    x_label: &'static str,
    y_label: &'static str,
    log_y: bool,
}

fn spec(kind: FigureKind) -> Spec {
    match kind {
        FigureKind::ErrorVsTimestep => Spec {
            x_label: "timestep (s)",
            column: "traj_error_mean",
            y_label: "mean trajectory error (m or q units)",
            log_y: true,
        },
        FigureKind::PenetrationVsTimestep => Spec {
            x_label: "timestep (s)",
            column: "max_penetration_m",
            y_label: "max penetration (m)",
            log_y: true,
        },
        FigureKind::IterationsVsTimestep => Spec {
            x_label: "timestep (s)",
            column: "iterations_mean",
            y_label: "solver iterations per step",
            log_y: false,
        },
        FigureKind::ThroughputVsTimestep => Spec {
            x_label: "timestep (s)",
            column: "steps_per_s",
            y_label: "throughput (world-steps/s)",
            log_y: true,
        },
    }
}

/// One line: label → sorted (timestep, mean value over the cells that finished ok (NaN if
/// none), any diverged). A timestep where some cells diverged and others finished (e.g. some
/// of many seeds or tosses) gets both a point and a cross.
pub type Lines = BTreeMap<String, Vec<(f64, f64, bool)>>;

fn lines(rows: &[&Row], column: &str) -> Lines {
    let mut acc: BTreeMap<String, BTreeMap<u64, (f64, usize, bool)>> = BTreeMap::new();
    for r in rows {
        let e = acc
            .entry(r.series())
            .or_default()
            .entry(r.f64("timestep_s").to_bits())
            .or_insert((0.0, 0, false));
        match r.str("status") {
            "ok" => {
                let v = r.f64(column);
                if v.is_finite() {
                    e.0 += v;
                    e.1 += 1;
                }
            }
            "diverged" => e.2 = true,
            _ => {}
        }
    }
    acc.into_iter()
        .map(|(label, m)| {
            let mut pts: Vec<(f64, f64, bool)> = m
                .into_iter()
                .map(|(bits, (s, n, d))| {
                    (
                        f64::from_bits(bits),
                        if n > 0 { s / n as f64 } else { f64::NAN },
                        d,
                    )
                })
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            (label, pts)
        })
        .collect()
}

/// Draw every requested figure for `rows` into `dir/figures/`; returns the files written.
///
/// # Errors
/// A drawing or file error, as text.
pub fn draw_all(dir: &Path, rows: &[Row], kinds: &[FigureKind]) -> Result<Vec<PathBuf>, String> {
    register_font();
    let fig_dir = dir.join("figures");
    std::fs::create_dir_all(&fig_dir).map_err(|e| format!("{}: {e}", fig_dir.display()))?;
    let kinds: Vec<FigureKind> = if kinds.is_empty() {
        FigureKind::ALL.to_vec()
    } else {
        kinds.to_vec()
    };
    let mut scenes: Vec<&str> = rows.iter().map(|r| r.scene_label()).collect();
    scenes.sort_unstable();
    scenes.dedup();
    // Two labels with one file name would overwrite each other's figures.
    let mut stems: BTreeMap<String, &str> = BTreeMap::new();
    for &scene in &scenes {
        if let Some(other) = stems.insert(file_part(scene), scene) {
            return Err(format!(
                "scene labels '{other}' and '{scene}' give the same figure file name '{}'; relabel one",
                file_part(scene)
            ));
        }
    }
    let mut written = Vec::new();
    for scene in scenes {
        let scene_rows: Vec<&Row> = rows.iter().filter(|r| r.scene_label() == scene).collect();
        for &kind in &kinds {
            let s = spec(kind);
            let data = lines(&scene_rows, s.column);
            let title = format!("{scene}: {}", kind.name().replace('_', " "));
            let stem = format!("{}__{}", kind.name(), file_part(scene));
            written.extend(write_figure(&fig_dir, &stem, &title, &s, &data)?);
        }
    }
    Ok(written)
}

/// Draw one figure of `data` (x on a log axis) as `fig_dir/<stem>.svg` and `.png`, each
/// atomically; returns both paths.
fn write_figure(
    fig_dir: &Path,
    stem: &str,
    title: &str,
    s: &Spec,
    data: &Lines,
) -> Result<[PathBuf; 2], String> {
    let svg = fig_dir.join(format!("{stem}.svg"));
    let png = fig_dir.join(format!("{stem}.png"));
    // Both drawn to memory or a temporary file, then renamed into place: a killed run
    // leaves the old figure or the new one, never a partial one.
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (525, 375)).into_drawing_area();
        draw(&root, &title, &s, &data, 1.0)?;
        root.present()
            .map_err(|e| format!("{}: {e}", svg.display()))?;
    }
    write_atomic(&svg, text.as_bytes()).map_err(|e| e.to_string())?;
    // The bitmap backend picks the encoder from the extension: keep `.png` last.
    let tmp = temp_path(&png, ".png");
    let drawn = (|| {
        let root = BitMapBackend::new(&tmp, (1050, 750)).into_drawing_area();
        draw(&root, &title, &s, &data, 2.0)?;
        root.present()
            .map_err(|e| format!("{}: {e}", png.display()))
    })();
    if let Err(e) = drawn {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    commit_temp(&tmp, &png).map_err(|e| e.to_string())?;
    Ok([svg, png])
}

/// Draw a figure of other studies: `data` is one series per label of (x, y, marked) points, x
/// on a log axis labelled `x_label`, y labelled `y_label` (log when `log_y`); marked points get a
/// cross at the top (e.g. cells without a value). Written as `dir/figures/<stem>.svg` and `.png`
/// like every figure; returns both paths.
///
/// # Errors
/// A drawing or file error, as text.
pub fn draw_lines(
    dir: &Path,
    stem: &str,
    title: &str,
    x_label: &'static str,
    y_label: &'static str,
    log_y: bool,
    data: &Lines,
) -> Result<[PathBuf; 2], String> {
    register_font();
    let fig_dir = dir.join("figures");
    std::fs::create_dir_all(&fig_dir).map_err(|e| format!("{}: {e}", fig_dir.display()))?;
    let s = Spec {
        column: "",
        x_label,
        y_label,
        log_y,
    };
    write_figure(&fig_dir, stem, title, &s, data)
}

fn tr(log: bool, v: f64) -> Option<f64> {
    if log {
        (v > 0.0 && v.is_finite()).then(|| v.log10())
    } else {
        v.is_finite().then_some(v)
    }
}

fn fmt_axis(log: bool, v: f64) -> String {
    let x = if log { 10f64.powf(v) } else { v };
    // (Fixed: a tick at exactly 0 took log10(0) = -inf below and overflowed the digit count.)
    if x == 0.0 {
        return "0".into();
    }
    // Two significant digits: log-axis ticks fall between round values (1.58e-3 is not 2e-3).
    if x != 0.0 && (x.abs() < 1e-2 || x.abs() >= 1e4) {
        format!("{x:.1e}")
    } else {
        let digits = (1 - x.abs().log10().floor() as i32).clamp(0, 6) as usize;
        format!("{x:.digits$}")
    }
}

/// A scene label as a file-name part: characters other than ASCII letters, digits, `-`, `_`
/// and `.` become `_` (a label may hold `/` or spaces).
pub fn file_part(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    s: &Spec,
    data: &Lines,
    k: f64,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let px = |v: f64| (v * k) as i32;
    let pts: Vec<(f64, f64)> = data
        .values()
        .flatten()
        .filter_map(|&(h, v, _)| Some((tr(true, h)?, tr(s.log_y, v).unwrap_or(f64::NAN))))
        .collect();
    let (mut x0, mut x1) = pts
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.0), b.max(p.0))
        });
    let (mut y0, mut y1) = pts
        .iter()
        .filter(|p| p.1.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.1), b.max(p.1))
        });
    if !x0.is_finite() {
        (x0, x1) = (-3.0, -1.0);
    }
    if !y0.is_finite() {
        (y0, y1) = (0.0, 1.0);
    }
    let pad = |a: f64, b: f64| {
        if b - a < 1e-12 {
            (a - 0.5, b + 0.5)
        } else {
            (a - 0.08 * (b - a), b + 0.15 * (b - a))
        }
    };
    let ((x0, x1), (y0, y1)) = (pad(x0, x1), pad(y0, y1));
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", px(15.0)))
        .margin(px(8.0))
        .x_label_area_size(px(38.0))
        .y_label_area_size(px(62.0))
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(err)?;
    let log_y = s.log_y;
    chart
        .configure_mesh()
        .x_desc(s.x_label)
        .y_desc(s.y_label)
        .x_labels(6)
        .y_labels(6)
        .x_label_formatter(&|v| fmt_axis(true, *v))
        .y_label_formatter(&|v| fmt_axis(log_y, *v))
        .label_style(("sans-serif", px(11.0)))
        .axis_desc_style(("sans-serif", px(12.0)))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(err)?;
    for (i, (label, pts)) in data.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let line: Vec<(f64, f64)> = pts
            .iter()
            .filter_map(|&(h, v, _)| Some((tr(true, h)?, tr(log_y, v)?)))
            .collect();
        let style = ShapeStyle::from(&color).stroke_width(px(1.5) as u32);
        chart
            .draw_series(LineSeries::new(line.clone(), style))
            .map_err(err)?
            .label(label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        chart
            .draw_series(
                line.iter()
                    .map(|&p| Circle::new(p, px(2.5), style.filled())),
            )
            .map_err(err)?;
        // Crosses of different labels are staggered so they do not hide each other.
        let top = y1 - (0.03 + 0.035 * i as f64) * (y1 - y0);
        let crosses: Vec<(f64, f64)> = pts
            .iter()
            .filter(|p| p.2)
            .filter_map(|&(h, _, _)| Some((tr(true, h)?, top)))
            .collect();
        chart
            .draw_series(crosses.into_iter().map(|p| Cross::new(p, px(4.0), style)))
            .map_err(err)?;
    }
    if data.values().flatten().any(|p| p.2) {
        chart
            .draw_series(std::iter::once(Cross::new((x0, y0), 0, BLACK)))
            .map_err(err)?
            .label("x at top: cells diverged")
            .legend(move |(x, y)| Cross::new((x + 10, y), 4, BLACK));
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", px(10.0)))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_and_axis_labels() {
        assert_eq!(file_part("../../evil/x y"), ".._.._evil_x_y");
        assert_eq!(file_part("mt_hf-2.5"), "mt_hf-2.5");
        // Log-axis ticks between round values keep two significant digits.
        assert_eq!(fmt_axis(true, 1.58e-3f64.log10()), "1.6e-3");
        assert_eq!(fmt_axis(true, 2.51e-3f64.log10()), "2.5e-3");
        assert_eq!(fmt_axis(false, 0.25), "0.25");
    }
}
