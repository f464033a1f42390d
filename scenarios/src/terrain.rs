//! Terrain for ground-robot scenes: seeded procedural height grids, their triangle meshes, and
//! terrain meshes loaded from OBJ / STL files.
//!
//! **Procedural terrain** (world frame, z up, grid centred on the origin). The height is a sum
//! of `L` sine-product layers, each rotated by a random angle θ_l with random phases φ_l, ψ_l:
//!
//! ```text
//! h(x, y) = Σ_{l=0}^{L-1} a_l sin(k_l u_l + φ_l) sin(k_l w_l + ψ_l),
//!     u_l = x cos θ_l + y sin θ_l,   w_l = −x sin θ_l + y cos θ_l,
//!     k_l = 2π 2^l / λ,   a_l = A r^l / Σ_m r^m,
//! ```
//!
//! with amplitude `A` (m), base wavelength `λ` (m), roughness `r` (the amplitude ratio of
//! successive layers, each of half the previous wavelength: a fractal-noise "persistence"),
//! so |h| ≤ A. θ_l ∈ [0, π) and φ_l, ψ_l ∈ [0, 2π) are drawn in that order, layer by layer, from
//! `ChaCha8Rng::seed_from_u64(seed)`. The surface is sampled on an `n × n`-cell grid over
//! `extent × extent` m: `(n + 1)²` samples, `2 n²` triangles (80 cells over 24 m: 6561
//! samples, 12,800 triangles, 0.3 m spacing).
//!
//! **Triangulation.** Cell (i, j) has corners a = (i, j), b = (i, j + 1), c = (i + 1, j + 1),
//! d = (i + 1, j) (row i along y, column j along x) and is split along a–c into (a, b, c) and
//! (a, c, d), counter-clockwise seen from +z. This is exactly the split parry3d's
//! `HeightField` makes for its default (non-zigzag) cells once mapped to the z-up geom frame
//! (`solvers/src/collision/shapes.rs` flips its rows), so the `trimesh` and `heightfield`
//! colliders of one grid hold the same triangles.

use std::path::Path;

use contactlab_solvers::geometry::GeomShape;
use nalgebra::{DMatrix, Point3};
use rand::{Rng, SeedableRng};

use crate::mesh_file::{load_mesh_file, MeshFileError, MeshFileErrorKind};

/// Parameters of a procedural terrain (module doc for the formula).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProceduralTerrain {
    /// Amplitude A (m): the largest possible |h|.
    pub amplitude: f64,
    /// Roughness r (-): amplitude ratio of successive layers (≥ 0).
    pub roughness: f64,
    /// Number of layers L (≥ 1).
    pub layers: usize,
    /// Wavelength λ of the first layer (m).
    pub wavelength: f64,
    /// Cells per side n (≥ 1).
    pub cells: usize,
    /// Side length of the square grid (m), centred on the origin.
    pub extent: f64,
    /// Seed of the layer angles and phases.
    pub seed: u64,
}

/// One sine-product layer: amplitude (m), wavenumber (rad/m), cos θ, sin θ, φ, ψ (rad).
#[derive(Debug, Clone, Copy)]
struct Layer {
    a: f64,
    k: f64,
    c: f64,
    s: f64,
    phi: f64,
    psi: f64,
}

/// A sampled height grid: `heights[(i, j)]` is z (m) at
/// x = −extent/2 + j extent/cells, y = −extent/2 + i extent/cells
/// (the layout of [`GeomShape::HeightField`]).
#[derive(Debug, Clone, PartialEq)]
pub struct HeightGrid {
    /// Heights (m), (cells + 1) × (cells + 1), row i along y, column j along x.
    pub heights: DMatrix<f64>,
    /// Side length (m) along x and y.
    pub extent: f64,
}

impl ProceduralTerrain {
    fn layers(&self) -> Vec<Layer> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(self.seed);
        let norm: f64 = (0..self.layers)
            .map(|l| self.roughness.powi(l as i32))
            .sum();
        (0..self.layers)
            .map(|l| {
                let theta: f64 = rng.random_range(0.0..std::f64::consts::PI);
                let phi = rng.random_range(0.0..std::f64::consts::TAU);
                let psi = rng.random_range(0.0..std::f64::consts::TAU);
                Layer {
                    a: self.amplitude * self.roughness.powi(l as i32) / norm,
                    k: std::f64::consts::TAU * 2f64.powi(l as i32) / self.wavelength,
                    c: theta.cos(),
                    s: theta.sin(),
                    phi,
                    psi,
                }
            })
            .collect()
    }

    /// The height h(x, y) (m) of the continuous surface (module doc), at world x, y (m).
    pub fn height(&self, x: f64, y: f64) -> f64 {
        Self::eval(&self.layers(), x, y)
    }

    fn eval(layers: &[Layer], x: f64, y: f64) -> f64 {
        layers
            .iter()
            .map(|l| {
                let u = x * l.c + y * l.s;
                let w = -x * l.s + y * l.c;
                l.a * (l.k * u + l.phi).sin() * (l.k * w + l.psi).sin()
            })
            .sum()
    }

    /// Sample the surface on the grid (module doc).
    pub fn sample(&self) -> HeightGrid {
        let layers = self.layers();
        let n = self.cells;
        let step = self.extent / n as f64;
        let half = self.extent / 2.0;
        let heights = DMatrix::from_fn(n + 1, n + 1, |i, j| {
            Self::eval(&layers, -half + j as f64 * step, -half + i as f64 * step)
        });
        HeightGrid {
            heights,
            extent: self.extent,
        }
    }
}

impl HeightGrid {
    /// World x (or y) (m) of grid column (or row) `j` of `n + 1`.
    fn coord(&self, j: usize) -> f64 {
        let n = self.heights.ncols() - 1;
        -self.extent / 2.0 + j as f64 * self.extent / n as f64
    }

    /// The grid as a [`GeomShape::HeightField`] (parry `HeightField` collider).
    pub fn to_height_field(&self) -> GeomShape {
        GeomShape::HeightField {
            heights: self.heights.clone(),
            size_x: self.extent,
            size_y: self.extent,
        }
    }

    /// The grid as a [`GeomShape::TriangleMesh`] (parry `TriMesh` collider), triangulated as the
    /// module doc says: vertex `i (n + 1) + j` is sample (i, j); `2 n²` triangles.
    pub fn to_triangle_mesh(&self) -> GeomShape {
        let (nr, nc) = (self.heights.nrows(), self.heights.ncols());
        let vertices = (0..nr)
            .flat_map(|i| (0..nc).map(move |j| (i, j)))
            .map(|(i, j)| Point3::new(self.coord(j), self.coord(i), self.heights[(i, j)]))
            .collect();
        let id = |i: usize, j: usize| (i * nc + j) as u32;
        let mut triangles = Vec::with_capacity(2 * (nr - 1) * (nc - 1));
        for i in 0..nr - 1 {
            for j in 0..nc - 1 {
                let (a, b, c, d) = (id(i, j), id(i, j + 1), id(i + 1, j + 1), id(i + 1, j));
                triangles.push([a, b, c]);
                triangles.push([a, c, d]);
            }
        }
        GeomShape::TriangleMesh {
            vertices,
            triangles,
        }
    }
}

/// A terrain mesh from an OBJ or STL file (z up, the file's units times `scale`, m), as a
/// [`GeomShape::TriangleMesh`].
///
/// # Errors
/// [`MeshFileError`] naming the file: unreadable or malformed file (with the line when known),
/// unsupported extension, or a file without triangles.
pub fn load_terrain_mesh(path: &Path, scale: f64) -> Result<GeomShape, MeshFileError> {
    let data = load_mesh_file(path)?;
    if data.triangles.is_empty() {
        return Err(MeshFileError {
            kind: MeshFileErrorKind::Malformed,
            path: path.to_path_buf(),
            line: None,
            message: "the file holds no triangles".into(),
        });
    }
    let vertices = data
        .vertices
        .iter()
        .map(|v| Point3::new(v[0] as f64, v[1] as f64, v[2] as f64) * scale)
        .collect();
    Ok(GeomShape::TriangleMesh {
        vertices,
        triangles: data.triangles,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terrain() -> ProceduralTerrain {
        ProceduralTerrain {
            amplitude: 0.2,
            roughness: 0.5,
            layers: 3,
            wavelength: 6.0,
            cells: 8,
            extent: 4.0,
            seed: 3,
        }
    }

    #[test]
    fn samples_are_the_surface_and_bounded_by_the_amplitude() {
        let t = terrain();
        let g = t.sample();
        assert_eq!(g.heights.shape(), (9, 9));
        // Sample (i = 2, j = 5) is at x = -2 + 5 * 0.5 = 0.5, y = -2 + 2 * 0.5 = -1.
        assert_eq!(g.heights[(2, 5)], t.height(0.5, -1.0));
        assert!(g.heights.iter().all(|h| h.abs() <= 0.2));
        assert!(g.heights.amax() > 0.02, "flat terrain");
        // Seeded: same seed, same grid; another seed, another grid.
        assert_eq!(g, t.sample());
        assert_ne!(g, ProceduralTerrain { seed: 4, ..t }.sample());
    }

    #[test]
    fn mesh_holds_the_samples_and_two_ccw_triangles_per_cell() {
        let g = terrain().sample();
        let GeomShape::TriangleMesh {
            vertices,
            triangles,
        } = g.to_triangle_mesh()
        else {
            panic!("not a mesh")
        };
        assert_eq!((vertices.len(), triangles.len()), (81, 128));
        assert_eq!(
            vertices[2 * 9 + 5],
            Point3::new(0.5, -1.0, g.heights[(2, 5)])
        );
        for t in &triangles {
            let [a, b, c] = t.map(|v| vertices[v as usize]);
            assert!(
                (b - a).cross(&(c - a)).z > 0.0,
                "triangle {t:?} is not CCW from +z"
            );
        }
    }
}
