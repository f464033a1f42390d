//! Per-world 3-vectors, quaternions, rotation matrices and spatial vectors built from [`S`],
//! mirroring the host algebra of [`crate::kinematics`] and [`crate::dynamics`]: spatial vectors
//! are `(angular; linear)` in world-frame Plücker coordinates about the world origin,
//! quaternions scalar first `(w, x, y, z)`, matrices row-major.

use burn_tensor::backend::Backend;

use super::scalar::S;
use crate::model::{Quat, Vec3};

/// A per-world 3-vector.
pub type V3<B> = [S<B>; 3];
/// A per-world quaternion `(w, x, y, z)`.
pub type Q4<B> = [S<B>; 4];
/// A per-world 3 × 3 matrix, rows.
pub type M3<B> = [[S<B>; 3]; 3];
/// A per-world spatial vector `(ω or n; v_O or f)`.
pub type Sv<B> = [S<B>; 6];
/// A per-world 6 × 6 matrix, rows (a spatial inertia, [`crate::dynamics::spatial_inertia`]).
pub type M6<B> = [[S<B>; 6]; 6];

/// A constant 3-vector.
pub fn v3c<B: Backend>(v: &Vec3) -> V3<B> {
    [S::C(v.x), S::C(v.y), S::C(v.z)]
}

/// A constant quaternion.
pub fn q4c<B: Backend>(q: &Quat) -> Q4<B> {
    [S::C(q.w), S::C(q.i), S::C(q.j), S::C(q.k)]
}

/// The zero 3-vector.
pub fn zero3<B: Backend>() -> V3<B> {
    [S::zero(), S::zero(), S::zero()]
}

/// The zero spatial vector.
pub fn zero6<B: Backend>() -> Sv<B> {
    [
        S::zero(),
        S::zero(),
        S::zero(),
        S::zero(),
        S::zero(),
        S::zero(),
    ]
}

/// a + b.
pub fn add3<B: Backend>(a: &V3<B>, b: &V3<B>) -> V3<B> {
    [&a[0] + &b[0], &a[1] + &b[1], &a[2] + &b[2]]
}

/// a − b.
pub fn sub3<B: Backend>(a: &V3<B>, b: &V3<B>) -> V3<B> {
    [&a[0] - &b[0], &a[1] - &b[1], &a[2] - &b[2]]
}

/// a · s.
pub fn scale3<B: Backend>(a: &V3<B>, s: &S<B>) -> V3<B> {
    [&a[0] * s, &a[1] * s, &a[2] * s]
}

/// a · b, left to right (MuJoCo's `mju_dot3`).
pub fn dot3<B: Backend>(a: &V3<B>, b: &V3<B>) -> S<B> {
    &a[0] * &b[0] + &a[1] * &b[1] + &a[2] * &b[2]
}

/// a × b.
pub fn cross3<B: Backend>(a: &V3<B>, b: &V3<B>) -> V3<B> {
    [
        &a[1] * &b[2] - &a[2] * &b[1],
        &a[2] * &b[0] - &a[0] * &b[2],
        &a[0] * &b[1] - &a[1] * &b[0],
    ]
}

/// Hamilton product a ⊗ b.
pub fn qmul<B: Backend>(a: &Q4<B>, b: &Q4<B>) -> Q4<B> {
    let [w1, x1, y1, z1] = a;
    let [w2, x2, y2, z2] = b;
    [
        w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
    ]
}

/// Rotate v by the unit quaternion q: with u = (x, y, z), t = 2 u × v, v + w t + u × t (the
/// form nalgebra's `UnitQuaternion * Vector3` evaluates).
pub fn qrot<B: Backend>(q: &Q4<B>, v: &V3<B>) -> V3<B> {
    let u: V3<B> = [q[1].clone(), q[2].clone(), q[3].clone()];
    let t = scale3(&cross3(&u, v), &S::C(2.0));
    add3(&add3(&scale3(&t, &q[0]), &cross3(&u, &t)), v)
}

/// `mju_quat2Mat`: the rotation matrix of a unit quaternion (rows), as
/// [`crate::collision::plane_primitives::quat_to_mat`].
pub fn qmat<B: Backend>(q: &Q4<B>) -> M3<B> {
    let [w, x, y, z] = q;
    let (q00, q01, q02, q03) = (w * w, w * x, w * y, w * z);
    let (q11, q12, q13) = (x * x, x * y, x * z);
    let (q22, q23, q33) = (y * y, y * z, z * z);
    let two = S::C(2.0);
    [
        [
            &q00 + &q11 - &q22 - &q33,
            &two * (&q12 - &q03),
            &two * (&q13 + &q02),
        ],
        [
            &two * (&q12 + &q03),
            &q00 - &q11 + &q22 - &q33,
            &two * (&q23 - &q01),
        ],
        [
            &two * (&q13 - &q02),
            &two * (&q23 + &q01),
            &q00 - &q11 - &q22 + &q33,
        ],
    ]
}

/// m v, row by row (MuJoCo's `mju_mulMatVec3`).
pub fn mat_vec<B: Backend>(m: &M3<B>, v: &V3<B>) -> V3<B> {
    [dot3(&m[0], v), dot3(&m[1], v), dot3(&m[2], v)]
}

/// mᵀ v.
pub fn mat_t_vec<B: Backend>(m: &M3<B>, v: &V3<B>) -> V3<B> {
    let col = |j: usize| [m[0][j].clone(), m[1][j].clone(), m[2][j].clone()];
    [dot3(&col(0), v), dot3(&col(1), v), dot3(&col(2), v)]
}

/// Column j of m.
pub fn column<B: Backend>(m: &M3<B>, j: usize) -> V3<B> {
    [m[0][j].clone(), m[1][j].clone(), m[2][j].clone()]
}

/// The spatial vector `(a; l)`.
pub fn sv<B: Backend>(a: &V3<B>, l: &V3<B>) -> Sv<B> {
    [
        a[0].clone(),
        a[1].clone(),
        a[2].clone(),
        l[0].clone(),
        l[1].clone(),
        l[2].clone(),
    ]
}

/// Angular (first) part.
pub fn ang<B: Backend>(s: &Sv<B>) -> V3<B> {
    [s[0].clone(), s[1].clone(), s[2].clone()]
}

/// Linear (second) part.
pub fn lin<B: Backend>(s: &Sv<B>) -> V3<B> {
    [s[3].clone(), s[4].clone(), s[5].clone()]
}

/// a + b.
pub fn add6<B: Backend>(a: &Sv<B>, b: &Sv<B>) -> Sv<B> {
    std::array::from_fn(|i| &a[i] + &b[i])
}

/// a · s.
pub fn scale6<B: Backend>(a: &Sv<B>, s: &S<B>) -> Sv<B> {
    std::array::from_fn(|i| &a[i] * s)
}

/// a · b, left to right over the six components (nalgebra's `Vector6::dot`, which
/// [`crate::dynamics`] uses).
pub fn dot6<B: Backend>(a: &Sv<B>, b: &Sv<B>) -> S<B> {
    a.iter().zip(b).fold(S::zero(), |acc, (x, y)| acc + x * y)
}

/// m v for a 6 × 6 matrix: each row's products summed left to right (nalgebra's `gemv`, the
/// order of `Matrix6 * Vector6` in [`crate::dynamics`]).
pub fn mat6_vec<B: Backend>(m: &M6<B>, v: &Sv<B>) -> Sv<B> {
    std::array::from_fn(|i| dot6(&m[i], v))
}

/// Motion cross product `v ×m m` ([`crate::kinematics::cross_motion`]).
pub fn cross_motion<B: Backend>(v: &Sv<B>, m: &Sv<B>) -> Sv<B> {
    let (w, vo, mw, mv) = (ang(v), lin(v), ang(m), lin(m));
    sv(&cross3(&w, &mw), &add3(&cross3(&w, &mv), &cross3(&vo, &mw)))
}

/// Force cross product `v ×f f` ([`crate::kinematics::cross_force`]).
pub fn cross_force<B: Backend>(v: &Sv<B>, f: &Sv<B>) -> Sv<B> {
    let (w, vo, n, fl) = (ang(v), lin(v), ang(f), lin(f));
    sv(&add3(&cross3(&w, &n), &cross3(&vo, &fl)), &cross3(&w, &fl))
}
