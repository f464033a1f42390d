//! Conversion of [`GeomShape`] (MuJoCo conventions) to parry3d-f64 shapes, done once per model.
//!
//! MuJoCo and parry disagree on two local frames:
//! * capsules and cylinders lie along the geom's **z** axis in MuJoCo (`doc/XMLreference.rst`,
//!   `geom/type`) but along **y** in parry;
//! * a MuJoCo height field is a surface z = h(x, y) over the geom's xy plane, while parry's
//!   [`HeightField`] is y = h(x, z).
//!
//! Both are fixed by one rotation `offset` = +90° about x, which maps parry's +y to the geom's
//! +z and parry's +z to the geom's −y; the shape's pose in the world is then
//! `geom pose ∘ offset`. Every other shape has `offset` = identity.

use nalgebra::{UnitQuaternion, Vector3};
use parry3d_f64::math::Vector as PVec;
use parry3d_f64::shape::{
    Ball, Capsule, ConvexPolyhedron, Cuboid, Cylinder, HalfSpace, HeightField, Shape as _,
    SharedShape, TriMesh,
};
use parry3d_f64::utils::Array2;

use crate::geometry::GeomShape;
use crate::model::{ModelError, Quat};

/// A geom's parry shape together with the fixed rotation from the parry shape's frame to the
/// geom frame (see the module doc). Built by [`collision_shape`], stored per geom in
/// [`crate::model::Model::collision_shapes`].
#[derive(Debug, Clone)]
pub struct CollisionShape {
    /// The parry3d-f64 shape, sizes in m, in its own (parry) local frame.
    pub shape: SharedShape,
    /// Rotation taking vectors in the parry shape frame to the geom frame: identity, or +90°
    /// about x for capsules, cylinders and height fields.
    pub offset: Quat,
}

/// MuJoCo's geom type number (`mjtGeom`: plane 0, hfield 1, sphere 2, capsule 3, ellipsoid 4,
/// cylinder 5, box 6, mesh 7), which orders the two geoms of a contact: the lower type is
/// `geoms[0]` (`engine_collision_driver.c`, `mj_collideGeoms`). Both mesh kinds are 7.
pub fn type_rank(shape: &GeomShape) -> u8 {
    match shape {
        GeomShape::Plane => 0,
        GeomShape::HeightField { .. } => 1,
        GeomShape::Sphere { .. } => 2,
        GeomShape::Capsule { .. } => 3,
        GeomShape::Ellipsoid { .. } => 4,
        GeomShape::Cylinder { .. } => 5,
        GeomShape::Box { .. } => 6,
        GeomShape::ConvexMesh { .. } | GeomShape::TriangleMesh { .. } => 7,
    }
}

/// The rotation (+90° about x) from parry's y-up frame to MuJoCo's z-up geom frame.
pub fn y_to_z() -> Quat {
    UnitQuaternion::from_axis_angle(&Vector3::x_axis(), std::f64::consts::FRAC_PI_2)
}

fn pv(x: f64, y: f64, z: f64) -> PVec {
    PVec::new(x, y, z)
}

/// Build the parry shape of geom `geom` (its name is only used in errors).
///
/// * plane → [`HalfSpace`] with outward normal +z;
/// * box → [`Cuboid`] (half-extents); sphere → [`Ball`];
/// * capsule, cylinder → [`Capsule`] / [`Cylinder`] along parry's y, with `offset` = +90° about x;
/// * ellipsoid → [`ConvexPolyhedron`] hull of 24 × 48 surface samples (parry has no ellipsoid;
///   an inscribed approximation within 0.86 % of the largest radius), used against everything
///   but a plane (plane–ellipsoid is exact, [`super::primitive_pairs::plane_ellipsoid`]);
/// * convex mesh → [`ConvexPolyhedron`] of the vertices' convex hull;
/// * triangle mesh → [`TriMesh`];
/// * height field → [`HeightField`] (rows flipped so that parry's z = −y), `offset` as above.
///
/// # Errors
/// [`ModelError::BadSize`] for a non-positive or non-finite size, [`ModelError::BadMesh`] for a
/// hull or mesh parry cannot build, both naming `geom`. Never panics.
pub fn collision_shape(geom: &str, shape: &GeomShape) -> Result<CollisionShape, ModelError> {
    // Sizes and mesh data are checked first so that no parry constructor can assert.
    shape.validate(geom)?;
    let bad_mesh = |why: String| ModelError::BadMesh {
        geom: geom.to_string(),
        why,
    };
    let ident = Quat::identity();
    let (shape, offset) = match shape {
        GeomShape::Plane => (SharedShape::new(HalfSpace::new(PVec::Z)), ident),
        GeomShape::Sphere { radius } => (SharedShape::new(Ball::new(*radius)), ident),
        GeomShape::Box { half } => (
            SharedShape::new(Cuboid::new(pv(half.x, half.y, half.z))),
            ident,
        ),
        GeomShape::Capsule {
            radius,
            half_length,
        } => (
            SharedShape::new(Capsule::new_y(*half_length, *radius)),
            y_to_z(),
        ),
        GeomShape::Cylinder {
            radius,
            half_length,
        } => (
            SharedShape::new(Cylinder::new(*half_length, *radius)),
            y_to_z(),
        ),
        GeomShape::Ellipsoid { radii } => {
            // parry has no ellipsoid: use the convex hull of 24 x 48 latitude-longitude samples
            // of its surface (an inscribed polytope; the surface is under-estimated by at most
            // r (1 - cos(pi/24)) = 0.86 % of the largest radius).
            let (nlat, nlon) = (24, 48);
            let mut pts = vec![pv(0.0, 0.0, radii.z), pv(0.0, 0.0, -radii.z)];
            for i in 1..nlat {
                let th = std::f64::consts::PI * i as f64 / nlat as f64;
                for j in 0..nlon {
                    let ph = 2.0 * std::f64::consts::PI * j as f64 / nlon as f64;
                    pts.push(pv(
                        radii.x * th.sin() * ph.cos(),
                        radii.y * th.sin() * ph.sin(),
                        radii.z * th.cos(),
                    ));
                }
            }
            let hull = ConvexPolyhedron::from_convex_hull(&pts)
                .ok_or_else(|| bad_mesh("parry could not build the ellipsoid's hull".into()))?;
            (SharedShape::new(hull), ident)
        }
        GeomShape::ConvexMesh { vertices } => {
            let pts: Vec<PVec> = vertices.iter().map(|p| pv(p.x, p.y, p.z)).collect();
            let hull = ConvexPolyhedron::from_convex_hull(&pts).ok_or_else(|| {
                bad_mesh("parry could not build the convex hull of the vertices".into())
            })?;
            // parry returns a two-sided flat polygon for coplanar points: reject zero volume.
            let extent = hull.local_aabb().extents().max_element();
            let volume = hull.mass_properties(1.0).mass();
            if !(volume > 1e-12 * extent * extent * extent) {
                return Err(bad_mesh(format!(
                    "the convex hull has (near) zero volume {volume:e} m^3"
                )));
            }
            (SharedShape::new(hull), ident)
        }
        GeomShape::TriangleMesh {
            vertices,
            triangles,
        } => {
            let pts: Vec<PVec> = vertices.iter().map(|p| pv(p.x, p.y, p.z)).collect();
            let mesh = TriMesh::new(pts, triangles.clone())
                .map_err(|e| bad_mesh(format!("parry rejected the triangle mesh: {e:?}")))?;
            (SharedShape::new(mesh), ident)
        }
        GeomShape::HeightField {
            heights,
            size_x,
            size_y,
        } => {
            let (nr, nc) = (heights.nrows(), heights.ncols());
            // parry: heights[(i, j)] at x = -sx/2 + j dx, z = -sy/2 + i dz; with the +90° x
            // rotation, z_parry = -y_geom, so parry row i is our row nr - 1 - i.
            let mut data = Vec::with_capacity(nr * nc);
            for j in 0..nc {
                for i in 0..nr {
                    data.push(heights[(nr - 1 - i, j)]);
                }
            }
            let hf = HeightField::new(Array2::new(nr, nc, data), pv(*size_x, 1.0, *size_y));
            (SharedShape::new(hf), y_to_z())
        }
    };
    Ok(CollisionShape { shape, offset })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::Point3;

    #[test]
    fn offset_maps_parry_y_to_geom_z_and_parry_z_to_minus_y() {
        let r = y_to_z();
        assert!((r * Vector3::y() - Vector3::z()).norm() < 1e-15);
        assert!((r * Vector3::z() + Vector3::y()).norm() < 1e-15);
        assert!((r * Vector3::x() - Vector3::x()).norm() < 1e-15);
    }

    #[test]
    fn flat_hull_is_a_bad_mesh_naming_the_geom() {
        // Four coplanar points on a tilted plane: non-zero bounding box, zero volume.
        let vertices = vec![
            Point3::new(0.0, 0.0, 0.0),
            Point3::new(1.0, 0.0, 1.0),
            Point3::new(0.0, 1.0, 0.0),
            Point3::new(1.0, 1.0, 1.0),
        ];
        match collision_shape("hull", &GeomShape::ConvexMesh { vertices }) {
            Err(ModelError::BadMesh { geom, .. }) => assert_eq!(geom, "hull"),
            other => panic!("expected BadMesh, got {other:?}"),
        }
    }

    #[test]
    fn bad_sizes_are_errors_not_panics() {
        let e = collision_shape(
            "c",
            &GeomShape::Cylinder {
                radius: 0.1,
                half_length: -1.0,
            },
        );
        assert!(matches!(e, Err(ModelError::BadSize { ref geom, .. }) if geom == "c"));
        let hf = GeomShape::HeightField {
            heights: nalgebra::DMatrix::zeros(1, 3),
            size_x: 1.0,
            size_y: 1.0,
        };
        assert!(matches!(
            collision_shape("h", &hf),
            Err(ModelError::BadMesh { .. })
        ));
    }

    #[test]
    fn type_rank_is_mujocos_order() {
        let plane = GeomShape::Plane;
        let sphere = GeomShape::Sphere { radius: 1.0 };
        let cap = GeomShape::Capsule {
            radius: 1.0,
            half_length: 1.0,
        };
        let cyl = GeomShape::Cylinder {
            radius: 1.0,
            half_length: 1.0,
        };
        let bx = GeomShape::Box {
            half: Vector3::new(1.0, 1.0, 1.0),
        };
        let ranks: Vec<u8> = [&plane, &sphere, &cap, &cyl, &bx]
            .iter()
            .map(|s| type_rank(s))
            .collect();
        assert_eq!(ranks, vec![0, 2, 3, 5, 6]);
    }
}
