//! Closed-form checks of collision detection: contact points, normals and gaps of primitive
//! pairs over enumerated poses (rotated and edge-on included), compared to 1e-9 with values
//! computed here from the geometry alone; plus the pair filters, pair order, normal direction,
//! frame and material mixing as seen through `detect`.

use contactlab_solvers::collision::{
    contact_frame, contact_frame_with_tangent, detect, mix_materials, Contact,
};
use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::kinematics::forward_kinematics;
use contactlab_solvers::model::{Body, Geom, Joint, JointKind, Model, ModelParts, Quat, Vec3};
use nalgebra::{Matrix3, Point3, Unit};

const TOL: f64 = 1e-9;

fn rot(axis: [f64; 3], angle: f64) -> Quat {
    Quat::from_axis_angle(&Unit::new_normalize(Vec3::from(axis)), angle)
}

/// Plane placements (orientation, position) enumerated by the tests: flat, tilted about x,
/// about a generic axis, nearly upside down, and shifted.
fn plane_poses() -> Vec<(Quat, Vec3)> {
    vec![
        (Quat::identity(), Vec3::zeros()),
        (rot([1.0, 0.0, 0.0], 0.3), Vec3::new(0.3, -0.2, 0.5)),
        (rot([1.0, 2.0, 3.0], 0.7), Vec3::new(-1.0, 0.4, 0.1)),
        (rot([0.0, 1.0, 0.0], 2.0), Vec3::new(0.0, 0.0, 2.0)),
    ]
}

fn free_body(name: &str, parent: usize, pos: Vec3, quat: Quat) -> Body {
    let mut b = Body::new(name, parent, pos, 1.0, Vec3::new(0.01, 0.01, 0.01));
    b.quat = quat;
    b
}

fn placed(mut g: Geom, quat: Quat, pos: Vec3) -> Geom {
    g.quat = quat;
    g.pos = pos;
    g
}

fn run(parts: ModelParts) -> (Model, Vec<Contact>) {
    let model = Model::new(parts).expect("valid model");
    let state = model.default_state();
    let kin = forward_kinematics(&model, &state.q);
    let contacts = detect(&model, &kin);
    (model, contacts)
}

/// World geoms `world`, and one free body at (`pos`, `quat`) carrying one geom `shape`.
fn one_body(world: Vec<Geom>, shape: GeomShape, pos: Vec3, quat: Quat) -> (Model, Vec<Contact>) {
    let mut geoms = world;
    geoms.push(Geom::new("obj", 1, shape));
    run(ModelParts {
        bodies: vec![free_body("b", 0, pos, quat)],
        joints: vec![Joint::new("free", JointKind::Free, 1)],
        geoms,
        ..Default::default()
    })
}

fn assert_frame(c: &Contact, tangent: Option<&Vec3>) {
    let f = c.frame;
    assert!(
        (f * f.transpose() - Matrix3::identity()).abs().max() < 1e-12,
        "frame not orthonormal"
    );
    assert!((f.determinant() - 1.0).abs() < 1e-12);
    // Re-normalizing the stored (unit) normal may move its last bit, hence the tolerance.
    // mju_makeFrame(n), or with the first tangent hint where MuJoCo sets one
    // (mjc_PlaneCapsule: the capsule's axis).
    let want = match tangent {
        None => contact_frame(&c.normal()),
        Some(t) => contact_frame_with_tangent(&c.normal(), t),
    };
    assert!(
        (f - want).abs().max() < 1e-15,
        "frame is not mju_makeFrame(n{})",
        if tangent.is_some() { ", hint" } else { "" }
    );
}

/// Every contact has normal `n`, and contacts match `expected` (point, gap) one to one.
fn assert_contacts(contacts: &[Contact], n: &Vec3, expected: &[(Vec3, f64)], what: &str) {
    assert_contacts_with_tangent(contacts, n, expected, what, None)
}

/// [`assert_contacts`], with every frame's first tangent hinted by `tangent`.
fn assert_contacts_with_tangent(
    contacts: &[Contact],
    n: &Vec3,
    expected: &[(Vec3, f64)],
    what: &str,
    tangent: Option<&Vec3>,
) {
    assert_eq!(
        contacts.len(),
        expected.len(),
        "{what}: contacts {contacts:#?}"
    );
    let mut used = vec![false; contacts.len()];
    for (p, gap) in expected {
        let k = contacts
            .iter()
            .enumerate()
            .position(|(k, c)| !used[k] && (c.point - p).norm() < TOL)
            .unwrap_or_else(|| panic!("{what}: no contact at {p:?}; got {contacts:#?}"));
        used[k] = true;
        let c = &contacts[k];
        assert!((c.gap - gap).abs() < TOL, "{what}: gap {} vs {gap}", c.gap);
        assert!(
            (c.normal() - n).norm() < TOL,
            "{what}: normal {:?} vs {n:?}",
            c.normal()
        );
        assert_frame(c, tangent);
    }
}

/// The midpoint between a point `p` of geom 1's surface at signed distance `gap` along `n`
/// from the opposite surface: `p - n gap/2` (p is on the upper surface).
fn mid(p: Vec3, n: &Vec3, gap: f64) -> Vec3 {
    p - n * (gap / 2.0)
}

#[test]
fn sphere_on_plane() {
    let r = 0.1;
    for (qp, pp) in plane_poses() {
        let n = qp * Vec3::z();
        for gap in [-0.01, -1e-4, 0.0] {
            // Sphere centre at height r + gap over the plane point pp + qp (0.2, -0.1, 0).
            let c = pp + qp * Vec3::new(0.2, -0.1, r + gap);
            let plane = placed(Geom::new("plane", 0, GeomShape::Plane), qp, pp);
            let (_, cs) = one_body(
                vec![plane],
                GeomShape::Sphere { radius: r },
                c,
                rot([0.3, 0.1, 1.0], 1.1),
            );
            // Sphere surface point c - n r; plane point c - n (r + gap).
            assert_contacts(&cs, &n, &[(mid(c - n * r, &n, gap), gap)], "sphere-plane");
            assert_eq!(cs[0].geoms, [0, 1]);
            assert_eq!(cs[0].bodies, [0, 1]);
        }
        // Separated by 1e-3: no contact without margin.
        let c = pp + qp * Vec3::new(0.0, 0.0, r + 1e-3);
        let plane = placed(Geom::new("plane", 0, GeomShape::Plane), qp, pp);
        let (_, cs) = one_body(
            vec![plane],
            GeomShape::Sphere { radius: r },
            c,
            Quat::identity(),
        );
        assert!(cs.is_empty());
    }
}

#[test]
fn margin_and_gap_extend_detection_inclusively() {
    // The last case sits exactly on the boundary dist = margin + gap, in exactly representable
    // numbers (centre height 0.75, radius 0.5): it is detected (inclusive test).
    for (r, sep, margin, gap, found) in [
        (0.1, 0.03, 0.05, 0.0, true),
        (0.1, 0.06, 0.05, 0.0, false),
        (0.1, 0.045, 0.04, 0.01, true),
        (0.1, 0.055, 0.04, 0.01, false),
        (0.5, 0.25, 0.125, 0.125, true),
    ] {
        let mut plane = Geom::new("plane", 0, GeomShape::Plane);
        plane.material.margin = margin;
        plane.material.gap = gap;
        let c = Vec3::new(0.0, 0.0, r + sep);
        let (_, cs) = one_body(
            vec![plane],
            GeomShape::Sphere { radius: r },
            c,
            Quat::identity(),
        );
        assert_eq!(
            cs.len(),
            usize::from(found),
            "sep {sep} margin {margin} gap {gap}"
        );
        if found {
            assert!((cs[0].gap - sep).abs() < TOL);
            assert_eq!(cs[0].material.margin, margin);
        }
    }
}

/// Box (half-extents h) corners in its frame, lowest (local z = -h.z) face.
fn bottom_corners(h: Vec3) -> Vec<Vec3> {
    vec![
        Vec3::new(h.x, h.y, -h.z),
        Vec3::new(-h.x, h.y, -h.z),
        Vec3::new(-h.x, -h.y, -h.z),
        Vec3::new(h.x, -h.y, -h.z),
    ]
}

#[test]
fn flat_box_on_plane_gives_four_corners() {
    let h = Vec3::new(0.3, 0.2, 0.1);
    for (qp, pp) in plane_poses() {
        let n = qp * Vec3::z();
        // (Exactly touching, gap = 0, is decided by round-off in rotated poses, as in MuJoCo;
        // "just touching" is tested at 1e-6.)
        for (yaw, gap) in [(0.0, -0.01), (0.4, -0.002), (-1.3, -1e-6)] {
            let qb = qp * rot([0.0, 0.0, 1.0], yaw);
            let c = pp + qp * Vec3::new(0.1, 0.2, h.z + gap);
            let plane = placed(Geom::new("plane", 0, GeomShape::Plane), qp, pp);
            let (_, cs) = one_body(vec![plane], GeomShape::Box { half: h }, c, qb);
            let expected: Vec<(Vec3, f64)> = bottom_corners(h)
                .into_iter()
                .map(|k| (mid(c + qb * k, &n, gap), gap))
                .collect();
            assert_contacts(&cs, &n, &expected, "flat box-plane");
        }
    }
}

#[test]
fn box_on_edge_gives_two_and_on_corner_gives_one() {
    let h = Vec3::new(0.3, 0.2, 0.1);
    let gap = -0.005;
    for (qp, pp) in plane_poses() {
        let n = qp * Vec3::z();
        // Tilted by t about the box x axis: corner (x, y, z) has height y sin t + z cos t above
        // the centre; the lowest edge is y = -h.y, z = -h.z (t in (0, pi/2)), both x = ±h.x.
        for t in [0.5, std::f64::consts::FRAC_PI_4, 1.2] {
            let ql = rot([1.0, 0.0, 0.0], t);
            let depth = h.y * t.sin() + h.z * t.cos();
            let qb = qp * ql;
            let c = pp + qp * Vec3::new(-0.2, 0.1, depth + gap);
            let plane = placed(Geom::new("plane", 0, GeomShape::Plane), qp, pp);
            let (_, cs) = one_body(vec![plane], GeomShape::Box { half: h }, c, qb);
            let expected: Vec<(Vec3, f64)> = [1.0, -1.0]
                .iter()
                .map(|sx| (mid(c + qb * Vec3::new(sx * h.x, -h.y, -h.z), &n, gap), gap))
                .collect();
            assert_contacts(&cs, &n, &expected, "box on edge");
        }
        // A cube with its diagonal (-1, -1, -1) turned onto -z: one corner at depth sqrt(3) a.
        let a = 0.15;
        let ql = Quat::rotation_between(&Vec3::new(-1.0, -1.0, -1.0), &Vec3::new(0.0, 0.0, -1.0))
            .unwrap();
        let qb = qp * ql;
        let c = pp + qp * Vec3::new(0.0, 0.3, 3f64.sqrt() * a + gap);
        let plane = placed(Geom::new("plane", 0, GeomShape::Plane), qp, pp);
        let (_, cs) = one_body(
            vec![plane],
            GeomShape::Box {
                half: Vec3::repeat(a),
            },
            c,
            qb,
        );
        let corner = c + qb * Vec3::repeat(-a);
        assert_contacts(&cs, &n, &[(mid(corner, &n, gap), gap)], "box on corner");
    }
}

#[test]
fn capsule_on_plane_lying_two_standing_one() {
    let (r, l) = (0.05, 0.2);
    let gap = -0.003;
    for (qp, pp) in plane_poses() {
        let n = qp * Vec3::z();
        let plane = || placed(Geom::new("plane", 0, GeomShape::Plane), qp, pp);
        // Lying: axis (local z) turned onto the plane's y, then yawed.
        let qb = qp * rot([0.0, 0.0, 1.0], 0.7) * rot([1.0, 0.0, 0.0], std::f64::consts::FRAC_PI_2);
        let c = pp + qp * Vec3::new(0.1, 0.1, r + gap);
        let (_, cs) = one_body(
            vec![plane()],
            GeomShape::Capsule {
                radius: r,
                half_length: l,
            },
            c,
            qb,
        );
        let expected: Vec<(Vec3, f64)> = [l, -l]
            .iter()
            .map(|s| {
                let e = c + qb * Vec3::new(0.0, 0.0, *s);
                (mid(e - n * r, &n, gap), gap)
            })
            .collect();
        // The frames' first tangent is the capsule's axis (mjc_PlaneCapsule).
        let axis = qb * Vec3::z();
        assert_contacts_with_tangent(&cs, &n, &expected, "lying capsule", Some(&axis));
        assert!((cs[0].frame.row(1).transpose() - axis).norm() < 1e-12);
        // Standing: lower end-sphere centre at height r + gap.
        let qb = qp * rot([0.0, 0.0, 1.0], 0.3);
        let c = pp + qp * Vec3::new(0.0, -0.1, l + r + gap);
        let (_, cs) = one_body(
            vec![plane()],
            GeomShape::Capsule {
                radius: r,
                half_length: l,
            },
            c,
            qb,
        );
        let e = c - n * l;
        // Standing, the axis along the normal: the hint made orthogonal to n vanishes, and
        // mju_makeFrame (so MuJoCo, and this frame) falls back to (1, 0, 0) for t1, which is
        // not orthogonal to a tilted plane's normal: only point and gap are checked here.
        assert_eq!(cs.len(), 1, "standing capsule: {cs:#?}");
        let p = mid(e - n * r, &n, gap);
        assert!((cs[0].point - p).norm() < TOL && (cs[0].gap - gap).abs() < TOL);
    }
}

#[test]
fn cylinder_on_plane_lying_and_standing() {
    let (r, l) = (0.1, 0.25);
    let gap = -0.004;
    for (qp, pp) in plane_poses() {
        let n = qp * Vec3::z();
        let plane = || placed(Geom::new("plane", 0, GeomShape::Plane), qp, pp);
        // Lying on its side: the two ends of the lowest generator.
        let qb =
            qp * rot([0.0, 0.0, 1.0], -0.4) * rot([0.0, 1.0, 0.0], std::f64::consts::FRAC_PI_2);
        let c = pp + qp * Vec3::new(0.2, 0.0, r + gap);
        let (_, cs) = one_body(
            vec![plane()],
            GeomShape::Cylinder {
                radius: r,
                half_length: l,
            },
            c,
            qb,
        );
        let expected: Vec<(Vec3, f64)> = [l, -l]
            .iter()
            .map(|s| (mid(c + qb * Vec3::new(0.0, 0.0, *s) - n * r, &n, gap), gap))
            .collect();
        assert_contacts(&cs, &n, &expected, "lying cylinder");

        // Standing on its cap: MuJoCo's `mjc_PlaneCylinder` takes the rim point in the
        // direction of the axis's tilt away from the normal (here round-off, so its azimuth is
        // arbitrary) and two more at ±120° on the same cap: 3 points, all at the gap, on the rim
        // circle (radius r about the cap centre), an equilateral triangle of side r√3 centred on
        // the cap.
        let qb = qp * rot([0.0, 0.0, 1.0], 0.9);
        let c = pp + qp * Vec3::new(-0.1, 0.2, l + gap);
        let (_, cs) = one_body(
            vec![plane()],
            GeomShape::Cylinder {
                radius: r,
                half_length: l,
            },
            c,
            qb,
        );
        assert_eq!(cs.len(), 3, "standing cylinder: {cs:#?}");
        let cap = c - n * l;
        let rim: Vec<Vec3> = cs.iter().map(|k| k.point + n * (gap / 2.0)).collect();
        for (k, p) in cs.iter().zip(&rim) {
            assert!((k.gap - gap).abs() < TOL);
            assert!((k.normal() - n).norm() < TOL);
            assert!(
                ((p - cap).dot(&n)).abs() < TOL,
                "rim point off the cap plane"
            );
            assert!(((p - cap).norm() - r).abs() < TOL, "rim point off the rim");
            assert_frame(k, None);
        }
        let sum: Vec3 = rim.iter().sum();
        assert!((sum / 3.0 - cap).norm() < TOL);
        for (i, j) in [(0, 1), (1, 2), (0, 2)] {
            assert!(((rim[i] - rim[j]).norm() - r * 3f64.sqrt()).abs() < TOL);
        }
    }
    let c = Vec3::new(0.0, 0.0, l + gap);
    let plane = Geom::new("plane", 0, GeomShape::Plane);
    let (_, cs) = one_body(
        vec![plane],
        GeomShape::Cylinder {
            radius: r,
            half_length: l,
        },
        c,
        Quat::identity(),
    );
    let n = Vec3::z();
    // Axis exactly along the normal: MuJoCo takes the rim point along the geom's local x, then
    // the triangle's other two at ±120° (mjc_PlaneCylinder's "disk parallel to plane").
    let h = r * 3f64.sqrt() / 2.0;
    let expected: Vec<(Vec3, f64)> = [(r, 0.0), (-r / 2.0, h), (-r / 2.0, -h)]
        .iter()
        .map(|(x, y)| (mid(Vec3::new(*x, *y, gap), &n, gap), gap))
        .collect();
    assert_contacts(&cs, &n, &expected, "standing cylinder, axis-aligned");
}

/// A big static box (world geom 0, half (1, 1, 0.5)) under a free small box (geom 1); the whole
/// scene placed by (qw, pw). Returns the contacts.
fn box_on_box(
    qw: Quat,
    pw: Vec3,
    small: Vec3,
    ql: Quat,
    offset: Vec3,
) -> (Vec<Contact>, Vec3, Quat) {
    let big = placed(
        Geom::new(
            "big",
            0,
            GeomShape::Box {
                half: Vec3::new(1.0, 1.0, 0.5),
            },
        ),
        qw,
        pw,
    );
    let c = pw + qw * offset;
    let qb = qw * ql;
    let (_, cs) = one_body(vec![big], GeomShape::Box { half: small }, c, qb);
    (cs, c, qb)
}

#[test]
fn box_face_down_on_larger_box_gives_four_corners() {
    let h = Vec3::new(0.2, 0.1, 0.05);
    let gap = -0.002;
    for (qw, pw) in plane_poses() {
        let n = qw * Vec3::z();
        for yaw in [0.0, 0.6] {
            let (cs, c, qb) = box_on_box(
                qw,
                pw,
                h,
                rot([0.0, 0.0, 1.0], yaw),
                Vec3::new(0.1, -0.2, 0.5 + h.z + gap),
            );
            let expected: Vec<(Vec3, f64)> = bottom_corners(h)
                .into_iter()
                .map(|k| (mid(c + qb * k, &n, gap), gap))
                .collect();
            assert_contacts(&cs, &n, &expected, "box face-down on box");
            assert_eq!(cs[0].geoms, [0, 1], "equal types: lower index first");
        }
    }
}

#[test]
fn box_edge_down_on_larger_box_gives_two() {
    let h = Vec3::new(0.2, 0.1, 0.05);
    let gap = -0.002;
    for (qw, pw) in plane_poses() {
        let n = qw * Vec3::z();
        let t = 0.5;
        let depth = h.y * f64::sin(t) + h.z * f64::cos(t);
        let (cs, c, qb) = box_on_box(
            qw,
            pw,
            h,
            rot([1.0, 0.0, 0.0], t),
            Vec3::new(0.0, 0.3, 0.5 + depth + gap),
        );
        let expected: Vec<(Vec3, f64)> = [1.0, -1.0]
            .iter()
            .map(|sx| (mid(c + qb * Vec3::new(sx * h.x, -h.y, -h.z), &n, gap), gap))
            .collect();
        assert_contacts(&cs, &n, &expected, "box edge-down on box");
    }
}

/// A flat square mesh (2 triangles, z = 0, normal +z) placed by (qm, pm) on the world, and a
/// sphere of radius r at (0.3, -0.5, height) in the mesh frame (away from the diagonal).
#[test]
fn sphere_above_triangle_mesh() {
    let r = 0.1;
    let vertices = vec![
        Point3::new(-1.0, -1.0, 0.0),
        Point3::new(1.0, -1.0, 0.0),
        Point3::new(1.0, 1.0, 0.0),
        Point3::new(-1.0, 1.0, 0.0),
    ];
    let triangles = vec![[0, 1, 2], [0, 2, 3]];
    let poses = [
        (Quat::identity(), Vec3::zeros()),
        (rot([1.0, 0.0, 0.0], 0.35), Vec3::new(0.0, 0.0, 0.2)),
        (rot([1.0, -2.0, 0.5], 0.8), Vec3::new(0.5, 0.2, -0.3)),
    ];
    for (qm, pm) in poses {
        let face_n = qm * Vec3::z();
        // (Exactly touching, gap = 0, is decided by round-off in rotated poses, as in MuJoCo;
        // "just touching" is tested at 1e-6.)
        for gap in [-0.01, -1e-6] {
            let mesh = placed(
                Geom::new(
                    "mesh",
                    0,
                    GeomShape::TriangleMesh {
                        vertices: vertices.clone(),
                        triangles: triangles.clone(),
                    },
                ),
                qm,
                pm,
            );
            let c = pm + qm * Vec3::new(0.3, -0.5, r + gap);
            let (model, cs) = one_body(
                vec![mesh],
                GeomShape::Sphere { radius: r },
                c,
                Quat::identity(),
            );
            // The sphere (type 2) comes before the mesh (type 7): geoms = [sphere, mesh] and the
            // normal points from the sphere into the mesh, i.e. minus the face normal.
            let n = -face_n;
            // Sphere surface point c - face_n r; mesh point c - face_n (r + gap).
            let expected = c - face_n * (r + gap / 2.0);
            assert_contacts(&cs, &n, &[(expected, gap)], "sphere-mesh");
            assert_eq!(
                cs[0].geoms,
                [
                    model.geom_id("obj").unwrap(),
                    model.geom_id("mesh").unwrap()
                ]
            );
        }
    }
}

#[test]
fn pair_order_puts_lower_type_first_and_normal_from_first_to_second() {
    // The plane is declared after the sphere, on the world: still geoms = [plane, sphere].
    let qp = rot([0.0, 1.0, 0.0], 0.2);
    let r = 0.1;
    let c = qp * Vec3::new(0.0, 0.0, r - 0.01);
    let (model, cs) = run(ModelParts {
        bodies: vec![free_body("b", 0, c, Quat::identity())],
        joints: vec![Joint::new("free", JointKind::Free, 1)],
        geoms: vec![
            Geom::new("ball", 1, GeomShape::Sphere { radius: r }),
            placed(Geom::new("plane", 0, GeomShape::Plane), qp, Vec3::zeros()),
        ],
        ..Default::default()
    });
    assert_eq!(cs.len(), 1);
    assert_eq!(
        cs[0].geoms,
        [
            model.geom_id("plane").unwrap(),
            model.geom_id("ball").unwrap()
        ]
    );
    assert_eq!(cs[0].bodies, [0, 1]);
    assert!((cs[0].normal() - qp * Vec3::z()).norm() < TOL);

    // Sphere on a box: the sphere (type 2) is first even though the box has the lower index;
    // the normal points from the sphere down into the box.
    let h = Vec3::new(0.5, 0.5, 0.2);
    let c = Vec3::new(0.1, 0.0, h.z + r - 0.02);
    let (_, cs) = one_body(
        vec![Geom::new("box", 0, GeomShape::Box { half: h })],
        GeomShape::Sphere { radius: r },
        c,
        Quat::identity(),
    );
    let n = -Vec3::z();
    assert_contacts(&cs, &n, &[(c + n * (r - 0.01), -0.02)], "sphere-box");
    assert_eq!(cs[0].geoms, [1, 0]);
    assert_eq!(cs[0].bodies, [1, 0]);
}

#[test]
fn contype_conaffinity_filter() {
    let r = 0.1;
    let c = Vec3::new(0.0, 0.0, r - 0.01);
    for (ct, ca, found) in [
        (1, 1, true),
        (2, 2, false),
        (2, 1, true),
        (0, 0, false),
        (1, 0, true),
        (4, 6, false),
    ] {
        let plane = Geom::new("plane", 0, GeomShape::Plane); // contype = conaffinity = 1
        let mut ball = Geom::new("ball", 1, GeomShape::Sphere { radius: r });
        ball.contype = ct;
        ball.conaffinity = ca;
        let (_, cs) = run(ModelParts {
            bodies: vec![free_body("b", 0, c, Quat::identity())],
            joints: vec![Joint::new("free", JointKind::Free, 1)],
            geoms: vec![plane, ball],
            ..Default::default()
        });
        // (ct & 1) | (1 & ca) != 0
        assert_eq!(!cs.is_empty(), found, "contype {ct} conaffinity {ca}");
    }
}

#[test]
fn body_filters_same_body_parent_child_world_and_static() {
    // Bodies: 1 = A (free, child of world); 2 = B (hinge, child of A); 3 = C (free, child of
    // world); 4 = W (no joints, child of A: welded to A); 5 = S (no joints, child of world:
    // static). All spheres overlap each other near the origin; a plane lies far below.
    let r = 0.1;
    let at = |x: f64| Vec3::new(x, 0.0, 1.0);
    let mut bodies = vec![
        free_body("A", 0, at(0.0), Quat::identity()),
        free_body("B", 1, Vec3::new(0.05, 0.0, 0.0), Quat::identity()),
        free_body("C", 0, at(-0.12), Quat::identity()),
        free_body("W", 1, Vec3::new(0.0, 0.05, 0.0), Quat::identity()),
        free_body("S", 0, at(0.15), Quat::identity()),
    ];
    bodies[3].mass = 0.5;
    let joints = vec![
        Joint::new("fa", JointKind::Free, 1),
        Joint::new("hb", JointKind::Hinge, 2),
        Joint::new("fc", JointKind::Free, 3),
    ];
    let sphere = |name: &str, body: usize| Geom::new(name, body, GeomShape::Sphere { radius: r });
    let geoms = vec![
        sphere("a1", 1),
        sphere("a2", 1),
        sphere("b", 2),
        sphere("c", 3),
        sphere("w", 4),
        sphere("s", 5),
        placed(
            Geom::new("world_ball", 0, GeomShape::Sphere { radius: 0.3 }),
            Quat::identity(),
            at(0.2),
        ),
        placed(
            Geom::new("plane", 0, GeomShape::Plane),
            Quat::identity(),
            Vec3::new(0.0, 0.0, -5.0),
        ),
    ];
    let (model, cs) = run(ModelParts {
        bodies,
        joints,
        geoms,
        ..Default::default()
    });
    let id = |n: &str| model.geom_id(n).unwrap();
    let mut got: Vec<(usize, usize)> = cs
        .iter()
        .map(|c| (c.geoms[0].min(c.geoms[1]), c.geoms[0].max(c.geoms[1])))
        .collect();
    got.dedup();
    let mut want = vec![
        // A's geoms with C (siblings under the world) and with the static S and world geoms.
        (id("a1"), id("c")),
        (id("a1"), id("s")),
        (id("a1"), id("world_ball")),
        (id("a2"), id("c")),
        (id("a2"), id("s")),
        (id("a2"), id("world_ball")),
        // B (child of A) collides with C, S and the world, not with A or W (welded to A).
        (id("b"), id("c")),
        (id("b"), id("s")),
        (id("b"), id("world_ball")),
        // C with W (W is part of A's weld body, C's sibling), S and the world.
        (id("c"), id("w")),
        (id("c"), id("s")),
        (id("c"), id("world_ball")),
        (id("w"), id("s")),
        (id("w"), id("world_ball")),
        // Never: a1-a2 (one body), a-b (parent-child), a-w and b-w (weld), s-world_ball
        // (both static).
    ];
    want.sort();
    got.sort();
    // Only keep pairs whose spheres actually overlap (closed form: centre distance < 2r or
    // r + 0.3 for the world ball) so the expectation does not depend on the filter alone.
    let kin = forward_kinematics(&model, &model.default_state().q);
    let radius = |g: usize| if g == id("world_ball") { 0.3 } else { r };
    want.retain(|&(i, j)| (kin.geom_xpos[i] - kin.geom_xpos[j]).norm() <= radius(i) + radius(j));
    assert!(want.len() >= 10, "test setup: too few overlapping pairs");
    assert_eq!(got, want);
}

#[test]
fn contact_material_is_mixed_in_pair_order() {
    let r = 0.1;
    let mut plane = Geom::new("plane", 0, GeomShape::Plane);
    plane.material.solmix = 1.0;
    plane.material.solref = [0.04, 2.0];
    plane.material.friction = [0.3, 0.01, 0.0];
    plane.material.ke = 1000.0;
    let mut ball = Geom::new("ball", 1, GeomShape::Sphere { radius: r });
    ball.material.solmix = 3.0;
    ball.material.solref = [0.02, 1.0];
    ball.material.friction = [0.7, 0.002, 0.001];
    ball.material.ke = 3000.0;
    let (model, cs) = run(ModelParts {
        bodies: vec![free_body(
            "b",
            0,
            Vec3::new(0.0, 0.0, r - 0.01),
            Quat::identity(),
        )],
        joints: vec![Joint::new("free", JointKind::Free, 1)],
        geoms: vec![ball.clone(), plane.clone()],
        ..Default::default()
    });
    assert_eq!(cs.len(), 1);
    let m = cs[0].material;
    // geoms[0] is the plane: w = 1/(1 + 3) = 0.25 weights the plane's solref.
    assert!((m.solref[0] - (0.25 * 0.04 + 0.75 * 0.02)).abs() < 1e-15);
    assert!((m.solref[1] - (0.25 * 2.0 + 0.75 * 1.0)).abs() < 1e-15);
    assert_eq!(m.friction, [0.7, 0.7, 0.01, 0.001, 0.001]);
    assert_eq!(m.ke, 2000.0);
    assert!((m.penalty_mu - 0.5).abs() < 1e-15);
    assert_eq!(
        m,
        mix_materials(&model.geoms[1].material, &model.geoms[0].material)
    );
}

/// A plane against a triangle mesh on a free body: the triangle lies flat 1 cm below the
/// plane, so each of its three vertices is a contact with the plane's normal +z, gap −0.01 m,
/// midway between the vertex and the plane. (This test used to assert nothing.)
#[test]
fn plane_against_a_triangle_mesh_gives_its_three_vertices() {
    let vertices = vec![
        Point3::new(0.0, 0.0, 0.0),
        Point3::new(1.0, 0.0, 0.0),
        Point3::new(0.0, 1.0, 0.0),
    ];
    let mesh = GeomShape::TriangleMesh {
        vertices,
        triangles: vec![[0, 1, 2]],
    };
    let depth = 0.01;
    let (_, cs) = one_body(
        vec![Geom::new("plane", 0, GeomShape::Plane)],
        mesh,
        Vec3::new(0.0, 0.0, -depth),
        Quat::identity(),
    );
    let expected: Vec<(Vec3, f64)> = [(0.0, 0.0), (1.0, 0.0), (0.0, 1.0)]
        .iter()
        .map(|&(x, y)| (Vec3::new(x, y, -depth / 2.0), -depth))
        .collect();
    assert_contacts(&cs, &Vec3::z(), &expected, "plane-triangle mesh");
    assert!(
        cs.iter().all(|c| c.geoms == [0, 1]),
        "the plane comes first"
    );
}

/// A non-finite placement gives no contacts for the geoms involved, never a panic: NaN or
/// infinite coordinates of a free body, through MuJoCo's formulas for plane–sphere
/// (`plane_primitives`) and sphere–box (`primitive_pairs`). The same sphere at a finite height in
/// contact gives its contacts,
/// so the empty results are the placement's doing.
#[test]
fn non_finite_placements_give_no_contacts() {
    let model = Model::new(ModelParts {
        bodies: vec![free_body("b", 0, Vec3::zeros(), Quat::identity())],
        joints: vec![Joint::new("free", JointKind::Free, 1)],
        geoms: vec![
            Geom::new("plane", 0, GeomShape::Plane),
            placed(
                Geom::new(
                    "block",
                    0,
                    GeomShape::Box {
                        half: Vec3::repeat(0.1),
                    },
                ),
                Quat::identity(),
                Vec3::new(0.0, 0.0, 0.25),
            ),
            Geom::new("ball", 1, GeomShape::Sphere { radius: 0.1 }),
        ],
        ..Default::default()
    })
    .unwrap();
    let mut q = model.default_state().q;
    // Finite: the ball at z = 0.095 touches the plane (gap −0.005) and the block above it
    // (bottom face at z = 0.15, gap −0.045); the sphere comes before the box in MuJoCo's order.
    q[2] = 0.095;
    let kin = forward_kinematics(&model, &q);
    let finite = detect(&model, &kin);
    let found: Vec<([usize; 2], f64)> = finite.iter().map(|c| (c.geoms, c.gap)).collect();
    assert_eq!(found.len(), 2, "{finite:#?}");
    assert_eq!(found[0].0, [0, 2]);
    assert!((found[0].1 + 0.005).abs() < TOL, "{found:?}");
    assert_eq!(found[1].0, [2, 1]);
    assert!((found[1].1 + 0.045).abs() < TOL, "{found:?}");
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        for k in [0, 2, 3] {
            let mut q = q.clone();
            q[k] = bad;
            let kin = forward_kinematics(&model, &q);
            let cs = detect(&model, &kin);
            assert!(cs.is_empty(), "qpos[{k}] = {bad}: {cs:#?}");
        }
    }
}

/// A height field sloped along y (z = s·y, so rows must map to y as documented) and along x
/// (z = s·x), under a sphere: one contact, normal = the slope's upward unit normal (the height
/// field, type 1, comes first), gap = (z_c − s·coord)/√(1 + s²) − r.
#[test]
fn sphere_above_sloped_height_field() {
    sphere_on_sloped_height_field(-0.004);
}

/// The same sphere sunk below the surface, its centre 0.25 m and 1 m under it: still one
/// contact with the slope's upward normal and gap = −(depth of the lowest point), so a body
/// that passed the surface is pushed out, not through (parry's two-sided triangles flipped
/// the normal there, issue #12).
#[test]
fn sphere_sunk_below_a_height_field_is_pushed_up_not_through() {
    sphere_on_sloped_height_field(-0.35);
    sphere_on_sloped_height_field(-1.1);
}

fn sphere_on_sloped_height_field(gap: f64) {
    let (nr, nc, sx, sy, s, r) = (5usize, 7usize, 2.0, 1.6, 0.25, 0.1);
    for along_y in [true, false] {
        let heights = nalgebra::DMatrix::from_fn(nr, nc, |i, j| {
            let x = -sx / 2.0 + j as f64 * sx / (nc - 1) as f64;
            let y = -sy / 2.0 + i as f64 * sy / (nr - 1) as f64;
            s * if along_y { y } else { x }
        });
        let slope = if along_y {
            Vec3::new(0.0, -s, 1.0)
        } else {
            Vec3::new(-s, 0.0, 1.0)
        };
        let n = slope / (1.0 + s * s).sqrt();
        // Sphere centre at distance r + gap from the surface point (0.13, 0.21, s·coord) along n,
        // inside a cell, away from the cell diagonals.
        let foot = Vec3::new(0.13, 0.21, s * if along_y { 0.21 } else { 0.13 });
        let c = foot + n * (r + gap);
        let hf = Geom::new(
            "hf",
            0,
            GeomShape::HeightField {
                heights,
                size_x: sx,
                size_y: sy,
            },
        );
        let (_, cs) = one_body(
            vec![hf],
            GeomShape::Sphere { radius: r },
            c,
            Quat::identity(),
        );
        assert_contacts(
            &cs,
            &n,
            &[(foot + n * (gap / 2.0), gap)],
            "sphere-height field",
        );
        assert_eq!(cs[0].geoms, [0, 1]);
    }
}

/// A wheel (cylinder, axis along world y) resting across the top edge of a box, at 720 spin
/// angles: every contact point of the pair is distinct (parry's clipping can emit the same
/// point twice, which would count one contact twice: double stiffness for soft models, a
/// singular Delassus block for hard ones), and the gaps are the closed-form ones (the wheel's
/// lowest generator 1 mm into the box top).
#[test]
fn cylinder_across_a_box_edge_gives_distinct_points() {
    let (r, half) = (0.35, 0.05);
    let box_half = Vec3::new(0.37, 0.575, 0.06);
    let mut seen_contacts = 0;
    for i in 0..720 {
        let spin = i as f64 * std::f64::consts::PI / 360.0;
        // Axis along y: rotate the cylinder's local z (its axis) onto y, then spin about y.
        let quat = rot([0.0, 1.0, 0.0], spin) * rot([1.0, 0.0, 0.0], -std::f64::consts::FRAC_PI_2);
        let world = vec![placed(
            Geom::new("block", 0, GeomShape::Box { half: box_half }),
            Quat::identity(),
            Vec3::new(1.37, 0.0, 0.06),
        )];
        let centre = Vec3::new(1.0324, 0.365, 0.12 + r - 1e-3);
        let (_, contacts) = one_body(
            world,
            GeomShape::Cylinder {
                radius: r,
                half_length: half,
            },
            centre,
            quat,
        );
        seen_contacts += contacts.len();
        for (a, ca) in contacts.iter().enumerate() {
            assert!((ca.gap + 1e-3).abs() < 1e-6, "spin {spin}: gap {}", ca.gap);
            for cb in &contacts[a + 1..] {
                assert!(
                    (ca.point - cb.point).norm() > 1e-6,
                    "spin {spin}: duplicate point {:?} in {:?}",
                    ca.point,
                    contacts.iter().map(|c| c.point).collect::<Vec<_>>()
                );
            }
        }
    }
    assert!(
        seen_contacts >= 2 * 720,
        "{seen_contacts} contacts over 720 poses"
    );
}
