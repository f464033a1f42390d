//! Mass and inertia from geoms, as MuJoCo computes them (`src/user/user_objects.cc`:
//! `mjCGeom::GetVolume`, `mjCGeom::SetInertia`, `mjCBody::InertiaFromGeom`;
//! `src/user/user_mesh.cc`: `mjCMesh::ComputeVolume`, `ComputeInertia`, `Process`).
//!
//! * Geom mass = `density` (default 1000 kg/m³) × volume, or `mass` when given (then the
//!   density is mass / volume). Volumes: sphere 4/3 π r³; capsule π r² (2h) + 4/3 π r³ (h the
//!   half-length); cylinder π r² 2h; ellipsoid 4/3 π abc; box 8 abc (half-sizes); mesh as below;
//!   planes and height fields have none.
//! * Principal moments about the geom centre, along the geom axes (m the geom mass):
//!   sphere 2/5 m r²; box m (b² + c²)/3 (half-sizes); ellipsoid m (b² + c²)/5; cylinder
//!   m (3r² + H²)/12 and m r²/2 (H = 2h); capsule: a cylinder of mass m_c = m − m_s plus two
//!   hemispheres of total mass m_s = m · 4r/(4r + 3H), giving
//!   `I_xx = m_c (3r² + H²)/12 + 2/5 m_s r² + m_s H (3r + 2H)/8`, `I_zz = m_c r²/2 + 2/5 m_s r²`.
//! * Meshes: signed tetrahedra from the area-weighted face centroid give the volume and the
//!   centre of mass (`legacy`, MuJoCo's default, takes each tetrahedron's absolute volume;
//!   `exact` keeps signs; `convex` uses the convex hull), then the second moments of
//!   tetrahedra from the centre of mass, `V/20 (2 Σ D_a D_b + cross terms)`, give the inertia
//!   tensor per unit density, diagonalized into principal moments (largest first) and axes.
//! * A body's inertia: one massive geom: its mass, centre and principal frame; several: total
//!   mass, mass-weighted centre, and the sum of the rotated geom tensors plus the parallel-axis
//!   terms, diagonalized (geoms of mass ≤ 1e-14 kg are left out, as MuJoCo does).

use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::model::{Quat, Vec3};
use nalgebra::{Matrix3, Point3, Rotation3, UnitQuaternion};

/// MuJoCo's `mjEPS`.
pub const MJ_EPS: f64 = 1e-14;
/// MuJoCo's `mjMINVAL`.
pub const MJ_MINVAL: f64 = 1e-15;
/// MuJoCo's default geom density (kg/m³).
pub const DEFAULT_DENSITY: f64 = 1000.0;

/// Volume (m³) of a primitive shape; 0 for planes, height fields and meshes (see [`MeshMass`]).
pub fn primitive_volume(shape: &GeomShape) -> f64 {
    use std::f64::consts::PI;
    match shape {
        GeomShape::Sphere { radius: r } => 4.0 * PI * r * r * r / 3.0,
        GeomShape::Capsule {
            radius: r,
            half_length: h,
        } => PI * (r * r * (2.0 * h) + 4.0 * r * r * r / 3.0),
        GeomShape::Cylinder {
            radius: r,
            half_length: h,
        } => PI * r * r * (2.0 * h),
        GeomShape::Ellipsoid { radii } => 4.0 * PI * radii.x * radii.y * radii.z / 3.0,
        GeomShape::Box { half } => half.x * half.y * half.z * 8.0,
        _ => 0.0,
    }
}

/// Principal moments (kg m², geom axes, about the geom centre) of a primitive of mass `m`.
pub fn primitive_inertia(shape: &GeomShape, m: f64) -> Vec3 {
    match shape {
        GeomShape::Sphere { radius: r } => Vec3::repeat(2.0 * m * r * r / 5.0),
        GeomShape::Capsule {
            radius: r,
            half_length: h,
        } => {
            let height = 2.0 * h;
            let ms = m * 4.0 * r / (4.0 * r + 3.0 * height);
            let mc = m - ms;
            let mut i = Vec3::new(
                mc * (3.0 * r * r + height * height) / 12.0,
                mc * (3.0 * r * r + height * height) / 12.0,
                mc * r * r / 2.0,
            );
            let sphere = 2.0 * ms * r * r / 5.0;
            let offset = ms * height * (3.0 * r + 2.0 * height) / 8.0;
            i += Vec3::new(sphere + offset, sphere + offset, sphere);
            i
        }
        GeomShape::Cylinder {
            radius: r,
            half_length: h,
        } => {
            let height = 2.0 * h;
            let a = m * (3.0 * r * r + height * height) / 12.0;
            Vec3::new(a, a, m * r * r / 2.0)
        }
        GeomShape::Ellipsoid { radii: s } => Vec3::new(
            m * (s.y * s.y + s.z * s.z) / 5.0,
            m * (s.x * s.x + s.z * s.z) / 5.0,
            m * (s.x * s.x + s.y * s.y) / 5.0,
        ),
        GeomShape::Box { half: s } => Vec3::new(
            m * (s.y * s.y + s.z * s.z) / 3.0,
            m * (s.x * s.x + s.z * s.z) / 3.0,
            m * (s.x * s.x + s.y * s.y) / 3.0,
        ),
        _ => Vec3::zeros(),
    }
}

/// How a mesh's volume and inertia are computed (MJCF `mesh inertia`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeshInertia {
    /// MuJoCo's default: absolute tetrahedron volumes (over-counts non-convex meshes).
    Legacy,
    /// Signed tetrahedron volumes (needs a closed, consistently oriented mesh).
    Exact,
    /// The convex hull's volume and inertia.
    Convex,
}

/// Volume, centre of mass and principal inertia per unit density of a mesh (mesh frame).
#[derive(Debug, Clone, PartialEq)]
pub struct MeshMass {
    /// Volume (m³).
    pub volume: f64,
    /// Centre of mass in the mesh frame (m).
    pub com: Vec3,
    /// Principal axes in the mesh frame.
    pub frame: Quat,
    /// Principal moments per unit density (m⁵), largest first.
    pub inertia: Vec3,
}

fn triangle(a: &Vec3, b: &Vec3, c: &Vec3) -> (Vec3, Vec3, f64) {
    let n = (b - a).cross(&(c - a));
    let len = n.norm();
    let area = len / 2.0;
    let normal = if len > 0.0 { n / len } else { Vec3::zeros() };
    (normal, (a + b + c) / 3.0, area)
}

/// Mass properties of the mesh `vertices`/`faces` (faces counter-clockwise seen from outside).
///
/// # Errors
/// A message when the volume is not positive or the moments are not physical.
pub fn mesh_mass(
    vertices: &[Point3<f64>],
    faces: &[[u32; 3]],
    mode: MeshInertia,
) -> Result<MeshMass, String> {
    let (verts, faces): (Vec<Vec3>, Vec<[u32; 3]>) = if mode == MeshInertia::Convex {
        let pts: Vec<parry3d_f64::math::Vector3> = vertices
            .iter()
            .map(|p| parry3d_f64::math::Vector3::new(p.x, p.y, p.z))
            .collect();
        // A degenerate point set (all vertices at one point, or on one line) has no hull.
        let (hv, hf) = parry3d_f64::transformation::try_convex_hull(&pts).map_err(|e| {
            format!("the mesh has no convex hull ({e:?}): its vertices span no volume")
        })?;
        (hv.iter().map(|p| Vec3::new(p.x, p.y, p.z)).collect(), hf)
    } else {
        (vertices.iter().map(|p| p.coords).collect(), faces.to_vec())
    };
    let tri = |f: &[u32; 3]| {
        triangle(
            &verts[f[0] as usize],
            &verts[f[1] as usize],
            &verts[f[2] as usize],
        )
    };
    // Area-weighted face centroid.
    let (mut area_sum, mut facecen) = (0.0, Vec3::zeros());
    for f in &faces {
        let (_, c, a) = tri(f);
        area_sum += a;
        facecen += a * c;
    }
    if area_sum < MJ_MINVAL {
        return Err("mesh surface area is too small".into());
    }
    facecen /= area_sum;
    let signed = |v: f64| {
        if mode == MeshInertia::Legacy {
            v.abs()
        } else {
            v
        }
    };
    let (mut volume, mut com) = (0.0, Vec3::zeros());
    for f in &faces {
        let (n, c, a) = tri(f);
        let v = signed((c - facecen).dot(&n) * a / 3.0);
        volume += v;
        com += v * (c * 0.75 + facecen * 0.25);
    }
    if volume < MJ_MINVAL {
        return Err(if volume < 0.0 {
            "mesh volume is negative (misoriented triangles)".into()
        } else {
            "mesh volume is too small".into()
        });
    }
    com /= volume;
    // Second moments of tetrahedra with apex at the centre of mass.
    const K: [(usize, usize); 6] = [(0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2)];
    let mut p = [0.0; 6];
    let mut total = 0.0;
    for f in &faces {
        let [d, e, g] = f.map(|i| verts[i as usize] - com);
        let (n, c, a) = triangle(&d, &e, &g);
        let v = signed(c.dot(&n) * a / 3.0);
        total += v;
        for (j, &(x, y)) in K.iter().enumerate() {
            p[j] += v / 20.0
                * (2.0 * (d[x] * d[y] + e[x] * e[y] + g[x] * g[y])
                    + d[x] * e[y]
                    + d[y] * e[x]
                    + d[x] * g[y]
                    + d[y] * g[x]
                    + e[x] * g[y]
                    + e[y] * g[x]);
        }
    }
    let full = Matrix3::new(
        p[1] + p[2],
        -p[3],
        -p[4],
        -p[3],
        p[0] + p[2],
        -p[5],
        -p[4],
        -p[5],
        p[0] + p[1],
    );
    let (eig, frame) = principal(&full);
    if eig.z <= 0.0 {
        return Err("eigenvalue of mesh inertia must be positive".into());
    }
    let (atol, rtol) = (1e-9, 1e-6);
    if eig.x + eig.y < eig.z * (1.0 - rtol) - atol
        || eig.x + eig.z < eig.y * (1.0 - rtol) - atol
        || eig.y + eig.z < eig.x * (1.0 - rtol) - atol
    {
        return Err("eigenvalues of mesh inertia violate A + B >= C".into());
    }
    Ok(MeshMass {
        volume: total,
        com,
        frame,
        inertia: eig,
    })
}

/// Eigen-decomposition of a symmetric inertia tensor: principal moments, largest first, and
/// the rotation whose columns are the principal axes (right-handed).
pub fn principal(full: &Matrix3<f64>) -> (Vec3, Quat) {
    let eig = nalgebra::SymmetricEigen::new(*full);
    let mut idx = [0usize, 1, 2];
    idx.sort_by(|&a, &b| {
        eig.eigenvalues[b]
            .partial_cmp(&eig.eigenvalues[a])
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let vals = Vec3::new(
        eig.eigenvalues[idx[0]],
        eig.eigenvalues[idx[1]],
        eig.eigenvalues[idx[2]],
    );
    let mut m = Matrix3::from_columns(&[
        eig.eigenvectors.column(idx[0]).into_owned(),
        eig.eigenvectors.column(idx[1]).into_owned(),
        eig.eigenvectors.column(idx[2]).into_owned(),
    ]);
    if m.determinant() < 0.0 {
        m.set_column(2, &(-m.column(2)));
    }
    (
        vals,
        UnitQuaternion::from_rotation_matrix(&Rotation3::from_matrix_unchecked(m)),
    )
}

/// Mass properties of one geom in its body's frame.
#[derive(Debug, Clone, PartialEq)]
pub struct GeomMass {
    /// Mass (kg).
    pub mass: f64,
    /// Centre of mass (m, body frame).
    pub pos: Vec3,
    /// Principal axes (body frame).
    pub quat: Quat,
    /// Principal moments (kg m²).
    pub inertia: Vec3,
}

/// A body's (mass, centre of mass, principal frame, principal moments) from its geoms, as
/// MuJoCo's `mjCBody::InertiaFromGeom`; `None` when no geom has mass.
pub fn combine(geoms: &[GeomMass]) -> Option<(f64, Vec3, Quat, Vec3)> {
    let sel: Vec<&GeomMass> = geoms.iter().filter(|g| g.mass > MJ_EPS).collect();
    match sel.len() {
        0 => None,
        1 => Some((sel[0].mass, sel[0].pos, sel[0].quat, sel[0].inertia)),
        _ => {
            let mass: f64 = sel.iter().map(|g| g.mass).sum();
            let com = sel
                .iter()
                .fold(Vec3::zeros(), |acc, g| acc + g.pos * g.mass)
                / mass;
            let mut total = Matrix3::zeros();
            for g in &sel {
                let r = g.quat.to_rotation_matrix().into_inner();
                total += r * Matrix3::from_diagonal(&g.inertia) * r.transpose();
                let d = g.pos - com;
                total += g.mass * (Matrix3::identity() * d.dot(&d) - d * d.transpose());
            }
            let (vals, frame) = principal(&total);
            Some((mass, com, frame, vals))
        }
    }
}
