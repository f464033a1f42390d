//! Host tables of a static height field's triangles, computed once per model for the batched
//! engine (`batched::height_field`), which gathers from them per world instead of asking
//! parry for the triangles under each wheel every step.
//!
//! One row per triangle, indexed by parry's triangle id (`HeightField::triangle_id`: cell
//! `(i, j)` — row `i` along parry's z, column `j` along parry's x — has its first triangle at
//! `j · rows + i` and its second at that plus `rows · cols`). Each row holds what
//! [`super::height_field::height_field_pair`] derives from the triangle, with the same
//! arithmetic (the vertices come from parry's own `map_elements_in_local_aabb`, the plane from
//! [`super::height_field::triangle_plane`]), so that the batched engine's contacts are the cpu
//! engine's to the last bit.

use parry3d_f64::bounding_volume::Aabb;
use parry3d_f64::math::Vector as PVec;

use super::height_field::{parry_to_geom, triangle_plane, OVER_TRIANGLE_TOL};
use crate::geometry::GeomShape;
use crate::model::{Model, Quat, Vec3};

/// Columns of one triangle's row in [`FieldTable::data`].
pub mod col {
    /// The triangle's plane orientation `(w, x, y, z)` in the world (`plane_quat`).
    pub const QUAT: usize = 0;
    /// A point of the plane, the first vertex, in the world (m, `plane_pos`).
    pub const POS: usize = 4;
    /// The plane's unit normal `plane_quat · z` (world, nalgebra's rotation, as
    /// `plane_candidates` computes it).
    pub const NORMAL: usize = 7;
    /// The vertices' `(x, y)` in the field's geom frame (m), vertex 0, 1, 2.
    pub const VERT: usize = 10;
    /// The edges' `(x, y)` (m): vertex `k + 1` minus vertex `k` (indices mod 3), `k` = 0, 1, 2.
    pub const EDGE: usize = 16;
    /// The sign of twice the signed xy area (`f64::signum`, ±1).
    pub const SIGN: usize = 22;
    /// `over_triangle`'s tolerance, `−OVER_TRIANGLE_TOL · |2 area|` (m²).
    pub const TOL: usize = 23;
    /// 1 where the cpu engine collides with the triangle (a non-degenerate normal and xy
    /// area), else 0.
    pub const VALID: usize = 24;
    /// The highest of the cell's four heights (parry units, the field's y before scale): parry
    /// skips a cell whose four heights are all below the query box.
    pub const CELL_MAX: usize = 25;
}

/// Number of columns of a row.
pub const COLUMNS: usize = 26;

/// A height field geom's triangles as tables (module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldTable {
    /// The geom.
    pub geom: usize,
    /// Cells along parry's z (the geom's −y): parry's `nrows`.
    pub rows: usize,
    /// Cells along parry's x (the geom's x): parry's `ncols`.
    pub cols: usize,
    /// parry's scale `(x, y, z)` (m per unit).
    pub scale: [f64; 3],
    /// parry's unit cell width (x) and height (z): `1 / cols`, `1 / rows` as parry computes them.
    pub unit_cell: [f64; 2],
    /// The smaller side of a cell (m).
    pub cell: f64,
    /// The geom's position (m, world) and orientation: static, it is on the world body.
    pub gpos: Vec3,
    /// See `gpos`.
    pub gquat: Quat,
    /// The parry shape's offset from the geom frame ([`super::CollisionShape::offset`]).
    pub offset: Quat,
    /// `(2 rows cols) × COLUMNS`, row-major, one row per parry triangle id.
    pub data: Vec<f64>,
    /// Whether two triangles sharing a vertex have normals within the cpu engine's duplicate
    /// test (`cos > 1 − 1e-12`, with a factor 2 of slack): only then can one wheel's contacts
    /// on two triangles be duplicates (`DUPLICATE_DISTANCE`), so the batched engine runs the
    /// duplicate test only where this holds (a flat patch).
    pub may_duplicate: bool,
}

impl FieldTable {
    /// The table of height field geom `g` of `model` (`None` for another shape). The geom must
    /// be on the world body (its placement is taken at `qpos0`).
    pub fn new(model: &Model, g: usize) -> Option<Self> {
        if !matches!(model.geoms[g].shape, GeomShape::HeightField { .. }) {
            return None;
        }
        let s = &model.collision_shapes[g];
        let hf = s.shape.as_heightfield()?;
        let kin = crate::kinematics::forward_kinematics(model, &model.qpos0);
        let (gpos, gquat) = (kin.geom_xpos[g], kin.geom_xquat[g]);
        let (rows, cols) = (hf.nrows(), hf.ncols());
        let half = rows * cols;
        let mut data = vec![0.0; 2 * half * COLUMNS];
        let sc = hf.scale();
        let big = f64::MAX / 4.0;
        // Every cell: the query box covers the whole field, unbounded in y.
        let all = Aabb::new(PVec::new(-sc.x, -big, -sc.z), PVec::new(sc.x, big, sc.z));
        let heights = hf.heights();
        hf.map_elements_in_local_aabb(&all, &mut |tid, tri| {
            let t = [
                parry_to_geom(tri.a),
                parry_to_geom(tri.b),
                parry_to_geom(tri.c),
            ];
            let row = &mut data[tid as usize * COLUMNS..(tid as usize + 1) * COLUMNS];
            let cross = |a: &Vec3, b: &Vec3, c: &Vec3| {
                (b.x - a.x) * (c.y - a.y) - (b.y - a.y) * (c.x - a.x)
            };
            let area = cross(&t[0], &t[1], &t[2]);
            let plane = triangle_plane(&t, &gpos, &gquat);
            let (pos, quat) = plane.unwrap_or((Vec3::zeros(), Quat::identity()));
            let n = quat * Vec3::z();
            row[col::QUAT..col::QUAT + 4].copy_from_slice(&[quat.w, quat.i, quat.j, quat.k]);
            row[col::POS..col::POS + 3].copy_from_slice(pos.as_slice());
            row[col::NORMAL..col::NORMAL + 3].copy_from_slice(n.as_slice());
            for k in 0..3 {
                let (a, b) = (t[k], t[(k + 1) % 3]);
                row[col::VERT + 2 * k] = a.x;
                row[col::VERT + 2 * k + 1] = a.y;
                row[col::EDGE + 2 * k] = b.x - a.x;
                row[col::EDGE + 2 * k + 1] = b.y - a.y;
            }
            row[col::SIGN] = area.signum();
            row[col::TOL] = -OVER_TRIANGLE_TOL * area.abs();
            row[col::VALID] = if plane.is_some() && area != 0.0 {
                1.0
            } else {
                0.0
            };
            let c = tid as usize % half;
            let (j, i) = (c / rows, c % rows);
            row[col::CELL_MAX] = heights[(i, j)]
                .max(heights[(i + 1, j)])
                .max(heights[(i, j + 1)])
                .max(heights[(i + 1, j + 1)]);
        });
        let normal = |tid: usize| {
            let r = &data[tid * COLUMNS + col::NORMAL..tid * COLUMNS + col::NORMAL + 3];
            Vec3::new(r[0], r[1], r[2])
        };
        let mut may_duplicate = false;
        'cells: for j in 0..cols {
            for i in 0..rows {
                for side in [0, half] {
                    let a = j * rows + i + side;
                    for (di, dj) in (-1..=1).flat_map(|di| (-1..=1).map(move |dj| (di, dj))) {
                        let (ii, jj) = (i as isize + di, j as isize + dj);
                        if ii < 0 || jj < 0 || ii >= rows as isize || jj >= cols as isize {
                            continue;
                        }
                        for side_b in [0, half] {
                            let b = jj as usize * rows + ii as usize + side_b;
                            if b != a && normal(a).dot(&normal(b)) > 1.0 - 2e-12 {
                                may_duplicate = true;
                                break 'cells;
                            }
                        }
                    }
                }
            }
        }
        let unit_cell = [hf.unit_cell_width(), hf.unit_cell_height()];
        Some(Self {
            geom: g,
            rows,
            cols,
            scale: [sc.x, sc.y, sc.z],
            unit_cell,
            cell: (unit_cell[0] * sc.x).min(unit_cell[1] * sc.z),
            gpos,
            gquat,
            offset: s.offset,
            data,
            may_duplicate,
        })
    }
}
