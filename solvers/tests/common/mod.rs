//! Shared test fixtures: seeded random configurations and a chain model with hinge, slide and
//! ball joints (non-trivial offsets, COM offsets, rotated inertia frames, armature).
#![allow(dead_code)]

use contactlab_solvers::model::{Body, Equality, Joint, JointKind, Model, ModelParts, Quat, Vec3};
use nalgebra::{DVector, UnitQuaternion};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

pub fn quat(axis: [f64; 3], angle: f64) -> Quat {
    UnitQuaternion::from_scaled_axis(Vec3::from(axis).normalize() * angle)
}

pub fn random_quat(r: &mut ChaCha8Rng) -> Quat {
    // Uniform on SO(3) is not needed; a random axis and angle in [0, π] is enough.
    let axis = Vec3::new(
        r.random_range(-1.0..1.0),
        r.random_range(-1.0..1.0),
        r.random_range(-1.0..1.0),
    );
    let axis = if axis.norm() < 1e-3 {
        Vec3::x()
    } else {
        axis.normalize()
    };
    UnitQuaternion::from_scaled_axis(axis * r.random_range(0.0..std::f64::consts::PI))
}

fn body(name: &str, parent: usize, pos: [f64; 3], mass: f64, inertia: [f64; 3]) -> Body {
    Body::new(name, parent, Vec3::from(pos), mass, Vec3::from(inertia))
}

/// A 3-link chain (hinge → slide → ball) plus a branch body with two joints (slide, then hinge)
/// hanging from link 1; with `free_base` the chain hangs from a free-floating base body.
/// Joints are deliberately listed out of body order (Model::new sorts them).
pub fn chain(free_base: bool) -> Model {
    let mut parts = ModelParts {
        name: "chain".into(),
        ..Default::default()
    };
    let off = usize::from(free_base);
    if free_base {
        let mut b = body("base", 0, [0.1, -0.2, 0.8], 2.0, [0.05, 0.07, 0.09]);
        b.quat = quat([0.2, 1.0, -0.3], 0.4);
        b.com = Vec3::new(0.03, -0.02, 0.05);
        b.inertia_frame = quat([1.0, 0.3, 0.2], 0.7);
        parts.bodies.push(b);
    }
    let mut l1 = body("link1", off, [0.1, -0.2, 0.3], 1.3, [0.02, 0.03, 0.04]);
    l1.quat = quat([1.0, 2.0, 3.0], 0.5);
    l1.com = Vec3::new(0.05, 0.02, -0.1);
    l1.inertia_frame = quat([0.0, 1.0, 1.0], 0.9);
    let mut l2 = body(
        "link2",
        1 + off,
        [0.0, 0.05, -0.4],
        0.7,
        [0.01, 0.015, 0.02],
    );
    l2.quat = quat([-1.0, 0.5, 0.2], 1.1);
    l2.com = Vec3::new(-0.03, 0.1, 0.02);
    l2.inertia_frame = quat([0.3, -0.2, 1.0], 0.3);
    let mut l3 = body(
        "link3",
        2 + off,
        [0.1, 0.3, -0.2],
        0.9,
        [0.012, 0.02, 0.025],
    );
    l3.quat = quat([0.0, 0.0, 1.0], -0.6);
    l3.com = Vec3::new(0.1, -0.05, 0.2);
    l3.inertia_frame = quat([1.0, -1.0, 0.5], 1.3);
    let mut l4 = body(
        "branch",
        1 + off,
        [-0.2, 0.1, 0.05],
        0.5,
        [0.004, 0.006, 0.008],
    );
    l4.com = Vec3::new(0.0, 0.07, -0.04);
    l4.inertia_frame = quat([0.4, 0.4, 1.0], 0.8);
    parts.bodies.extend([l1, l2, l3, l4]);

    let mut h1 = Joint::new("hinge1", JointKind::Hinge, 1 + off);
    h1.pos = Vec3::new(0.02, 0.01, 0.03);
    h1.axis = Vec3::new(0.3, 0.5, 0.8);
    h1.armature = 0.01;
    h1.reference = 0.2;
    h1.range = Some((-1.0, 1.2));
    h1.frictionloss = 0.3;
    let mut s2 = Joint::new("slide2", JointKind::Slide, 2 + off);
    s2.pos = Vec3::new(0.01, -0.02, 0.0);
    s2.axis = Vec3::new(1.0, 0.2, -0.3);
    s2.armature = 0.05;
    s2.reference = -0.1;
    s2.range = Some((-0.3, 0.4));
    let mut b3 = Joint::new("ball3", JointKind::Ball, 3 + off);
    b3.pos = Vec3::new(0.0, 0.05, 0.1);
    b3.armature = 0.02;
    b3.range = Some((0.0, 1.0));
    b3.frictionloss = 0.1;
    let mut s4 = Joint::new("slide4", JointKind::Slide, 4 + off);
    s4.axis = Vec3::new(0.0, 1.0, 1.0);
    s4.armature = 0.003;
    let mut h4 = Joint::new("hinge4", JointKind::Hinge, 4 + off);
    h4.pos = Vec3::new(0.05, 0.0, -0.02);
    h4.axis = Vec3::new(1.0, 0.0, 0.2);
    h4.armature = 0.004;
    h4.range = Some((-0.5, 0.5));
    // Out of body order on purpose.
    parts.joints = vec![b3, s4, h4, h1, s2];
    if free_base {
        parts.joints.push(Joint::new("free", JointKind::Free, 1));
    }
    parts.equalities = vec![
        Equality::Connect {
            name: "connect".into(),
            body1: 3 + off,
            body2: 4 + off,
            anchor: Vec3::new(0.05, -0.1, 0.02),
        },
        Equality::Weld {
            name: "weld".into(),
            body1: 4 + off,
            body2: 2 + off,
            anchor: Vec3::new(-0.05, 0.02, 0.1),
            relpos: Vec3::new(0.1, 0.2, -0.3),
            relquat: quat([1.0, 1.0, 0.0], 0.4),
            torquescale: 0.7,
        },
        // joint indices as listed in parts.joints: hinge4 (2) coupled to slide2 (4).
        Equality::Joint {
            name: "couple".into(),
            joint1: 2,
            joint2: 4,
            polycoef: [0.1, -0.5, 0.3, 0.2, -0.1],
        },
    ];
    Model::new(parts).expect("valid chain model")
}

/// A random configuration: hinge/slide in [−1.2, 1.2], random ball/free quaternions, free
/// positions in a unit box around the default.
pub fn random_q(model: &Model, r: &mut ChaCha8Rng) -> DVector<f64> {
    let mut q = model.qpos0.clone();
    for j in &model.joints {
        let a = j.qpos_adr;
        match j.kind {
            JointKind::Hinge | JointKind::Slide => q[a] = r.random_range(-1.2..1.2),
            JointKind::Ball => put_quat(&mut q, a, &random_quat(r)),
            JointKind::Free => {
                for i in 0..3 {
                    q[a + i] += r.random_range(-0.5..0.5);
                }
                put_quat(&mut q, a + 3, &random_quat(r));
            }
        }
    }
    q
}

pub fn random_v(model: &Model, r: &mut ChaCha8Rng, scale: f64) -> DVector<f64> {
    DVector::from_fn(model.nv, |_, _| r.random_range(-scale..scale))
}

pub fn put_quat(q: &mut DVector<f64>, a: usize, quat: &Quat) {
    q[a] = quat.w;
    q[a + 1] = quat.i;
    q[a + 2] = quat.j;
    q[a + 3] = quat.k;
}

/// Positions reached from `q` by moving with velocity `v` for time `t` (may be negative).
pub fn advance(model: &Model, q: &DVector<f64>, v: &DVector<f64>, t: f64) -> DVector<f64> {
    let mut out = q.clone();
    contactlab_solvers::dynamics::integrate_positions(model, &mut out, v, t);
    out
}

pub fn max_abs(v: impl IntoIterator<Item = f64>) -> f64 {
    v.into_iter().fold(0.0, |m: f64, x| m.max(x.abs()))
}

/// A free cube of half-size 0.1 m at height `z` (m) above a floor plane through the origin,
/// of `mass` kg and diagonal inertia `inertia` (kg m²) about its centre.
pub fn box_on_floor(z: f64, mass: f64, inertia: f64) -> Model {
    use contactlab_solvers::geometry::GeomShape;
    use contactlab_solvers::model::Geom;
    Model::new(ModelParts {
        bodies: vec![Body::new(
            "box",
            0,
            Vec3::new(0.0, 0.0, z),
            mass,
            Vec3::repeat(inertia),
        )],
        joints: vec![Joint::new("free", JointKind::Free, 1)],
        geoms: vec![
            Geom::new("floor", 0, GeomShape::Plane),
            Geom::new(
                "box",
                1,
                GeomShape::Box {
                    half: Vec3::repeat(0.1),
                },
            ),
        ],
        ..Default::default()
    })
    .unwrap()
}
