//! Geom shapes, in MuJoCo's conventions (local frames and sizes), and their validation.
//!
//! Local frames follow MuJoCo: a plane is the local z = 0 plane with normal +z (infinite for
//! collision); capsules and cylinders are aligned with local z. The conversion to parry3d-f64
//! shapes (whose capsules and cylinders are along y) lives in [`crate::collision`].

use nalgebra::Point3;

use crate::model::{ModelError, Vec3};

/// The shape of a geom, with its sizes (m).
#[derive(Debug, Clone, PartialEq)]
pub enum GeomShape {
    /// Infinite plane z = 0 in the geom frame, normal +z (solid below).
    Plane,
    /// Sphere of radius `radius`.
    Sphere {
        /// Radius (m).
        radius: f64,
    },
    /// Box with half-extents `half` along the geom's x, y, z.
    Box {
        /// Half-extents along x, y, z (m).
        half: Vec3,
    },
    /// Capsule along local z: segment of half-length `half_length`, radius `radius`.
    Capsule {
        /// Radius (m).
        radius: f64,
        /// Half-length along the local z axis (m).
        half_length: f64,
    },
    /// Cylinder along local z with half-height `half_length` and radius `radius`.
    Cylinder {
        /// Radius (m).
        radius: f64,
        /// Half-length along the local z axis (m).
        half_length: f64,
    },
    /// Convex hull of the given vertices (geom frame).
    ConvexMesh {
        /// Vertices (m, geom frame).
        vertices: Vec<Point3<f64>>,
    },
    /// Triangle mesh (geom frame); triangles index `vertices`, wound counter-clockwise seen from
    /// outside.
    TriangleMesh {
        /// Vertices (m, geom frame).
        vertices: Vec<Point3<f64>>,
        /// Vertex indices of each triangle.
        triangles: Vec<[u32; 3]>,
    },
    /// Height field over the geom's xy plane: `heights[(i, j)]` is z (m) at
    /// x = −size_x/2 + j·size_x/(ncols − 1), y = −size_y/2 + i·size_y/(nrows − 1).
    HeightField {
        /// Heights (m), nrows × ncols.
        heights: nalgebra::DMatrix<f64>,
        /// Extent along x (m).
        size_x: f64,
        /// Extent along y (m).
        size_y: f64,
    },
    /// Ellipsoid with semi-axes `radii` along the geom's x, y, z (MuJoCo `ellipsoid`, size =
    /// radii).
    ///
    /// Against a plane collision is exact (MuJoCo's support point,
    /// [`crate::collision::primitive_pairs::plane_ellipsoid`]); against other geoms it uses an
    /// inscribed polytope (parry has no ellipsoid), see
    /// [`crate::collision::shapes::collision_shape`].
    Ellipsoid {
        /// Semi-axes along x, y, z (m).
        radii: Vec3,
    },
}

impl GeomShape {
    /// A short lowercase name of the shape kind (`"box"`, `"plane"`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            GeomShape::Plane => "plane",
            GeomShape::Sphere { .. } => "sphere",
            GeomShape::Box { .. } => "box",
            GeomShape::Capsule { .. } => "capsule",
            GeomShape::Cylinder { .. } => "cylinder",
            GeomShape::ConvexMesh { .. } => "convex_mesh",
            GeomShape::TriangleMesh { .. } => "triangle_mesh",
            GeomShape::HeightField { .. } => "height_field",
            GeomShape::Ellipsoid { .. } => "ellipsoid",
        }
    }

    /// The smallest characteristic extent (m): half the thinnest dimension of the shape, used
    /// by the stability test "penetration exceeds half the smallest geom extent".
    /// Infinite for planes, meshes and height fields (they are terrain, not bodies to pierce).
    pub fn min_extent(&self) -> f64 {
        match self {
            GeomShape::Sphere { radius } | GeomShape::Capsule { radius, .. } => *radius,
            GeomShape::Box { half } => half.min(),
            GeomShape::Ellipsoid { radii } => radii.min(),
            GeomShape::Cylinder {
                radius,
                half_length,
            } => radius.min(*half_length),
            GeomShape::ConvexMesh { vertices } => {
                let (lo, hi) = bounds(vertices);
                0.5 * (hi - lo).min()
            }
            GeomShape::Plane | GeomShape::TriangleMesh { .. } | GeomShape::HeightField { .. } => {
                f64::INFINITY
            }
        }
    }

    /// Check sizes and mesh data.
    ///
    /// # Errors
    /// [`ModelError::BadSize`] or [`ModelError::BadMesh`] naming `geom`.
    pub fn validate(&self, geom: &str) -> Result<(), ModelError> {
        let pos = |what: &'static str, value: f64| {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                Err(ModelError::BadSize {
                    geom: geom.to_string(),
                    what,
                    value,
                })
            }
        };
        let mesh = |why: String| {
            Err(ModelError::BadMesh {
                geom: geom.to_string(),
                why,
            })
        };
        match self {
            GeomShape::Plane => Ok(()),
            GeomShape::Sphere { radius } => pos("radius", *radius),
            GeomShape::Box { half } => {
                pos("half-size x", half.x)?;
                pos("half-size y", half.y)?;
                pos("half-size z", half.z)
            }
            GeomShape::Ellipsoid { radii } => {
                pos("radius x", radii.x)?;
                pos("radius y", radii.y)?;
                pos("radius z", radii.z)
            }
            GeomShape::Capsule {
                radius,
                half_length,
            } => {
                pos("radius", *radius)?;
                if half_length.is_finite() && *half_length >= 0.0 {
                    Ok(())
                } else {
                    Err(ModelError::BadSize {
                        geom: geom.to_string(),
                        what: "half-length",
                        value: *half_length,
                    })
                }
            }
            GeomShape::Cylinder {
                radius,
                half_length,
            } => {
                pos("radius", *radius)?;
                pos("half-length", *half_length)
            }
            GeomShape::ConvexMesh { vertices } => {
                if vertices.len() < 4 {
                    return mesh(format!(
                        "a convex mesh needs at least 4 vertices, got {}",
                        vertices.len()
                    ));
                }
                if let Some(i) = vertices
                    .iter()
                    .position(|p| !p.coords.iter().all(|x| x.is_finite()))
                {
                    return mesh(format!("vertex {i} is not finite"));
                }
                let (lo, hi) = bounds(vertices);
                if (hi - lo).min() <= 0.0 {
                    return mesh("the convex mesh is flat (zero volume)".into());
                }
                Ok(())
            }
            GeomShape::TriangleMesh {
                vertices,
                triangles,
            } => {
                if triangles.is_empty() {
                    return mesh("the triangle mesh has no triangles".into());
                }
                if let Some(i) = vertices
                    .iter()
                    .position(|p| !p.coords.iter().all(|x| x.is_finite()))
                {
                    return mesh(format!("vertex {i} is not finite"));
                }
                for (t, tri) in triangles.iter().enumerate() {
                    if let Some(&v) = tri.iter().find(|&&v| v as usize >= vertices.len()) {
                        return mesh(format!(
                            "triangle {t} refers to vertex {v}, but there are {}",
                            vertices.len()
                        ));
                    }
                    let [a, b, c] = tri.map(|v| vertices[v as usize]);
                    if (b - a).cross(&(c - a)).norm() <= 0.0 {
                        return mesh(format!("triangle {t} is degenerate (zero area)"));
                    }
                }
                Ok(())
            }
            GeomShape::HeightField {
                heights,
                size_x,
                size_y,
            } => {
                pos("height field size x", *size_x)?;
                pos("height field size y", *size_y)?;
                if heights.nrows() < 2 || heights.ncols() < 2 {
                    return mesh(format!(
                        "a height field needs at least 2x2 samples, got {}x{}",
                        heights.nrows(),
                        heights.ncols()
                    ));
                }
                if let Some(i) = heights.iter().position(|h| !h.is_finite()) {
                    return mesh(format!("height sample {i} is not finite"));
                }
                Ok(())
            }
        }
    }
}

fn bounds(vertices: &[Point3<f64>]) -> (Vec3, Vec3) {
    let mut lo = Vec3::repeat(f64::INFINITY);
    let mut hi = Vec3::repeat(f64::NEG_INFINITY);
    for p in vertices {
        lo = lo.inf(&p.coords);
        hi = hi.sup(&p.coords);
    }
    (lo, hi)
}
