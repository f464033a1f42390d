//! What each registered formulation says it steps a model without
//! (`Formulation::ignored_features`), on a model that carries every feature one of them does
//! not model, on the same model with those stages disabled by its `<flag>` options, and on a
//! plain model. Each formulation's list is the one its module doc states.

mod common;

use contactlab_solvers::features::joined;
use contactlab_solvers::formulation::{build, FORMULATIONS};
use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::model::{
    Body, ContactPair, Equality, Geom, Integrator, Joint, JointKind, Model, ModelParts, Quat,
    SolverKind, Vec3,
};

/// Bodies a (hinge `ja`, limited, friction loss), b (ball `jb`, limited, friction loss),
/// c (free `jc`, friction loss), d (slide `jd`); geoms: a floor, `ga` of condim 4 and `gc` of
/// condim 6; a connect, a weld and a joint coupling; one explicit pair, one exclude; options
/// `integrator = implicitfast`, `solver = CG`.
fn everything() -> ModelParts {
    let body =
        |name: &str, z: f64| Body::new(name, 0, Vec3::new(0.0, 0.0, z), 1.0, Vec3::repeat(0.01));
    let mut ja = Joint::new("ja", JointKind::Hinge, 1);
    ja.range = Some((-1.0, 1.0));
    ja.frictionloss = 0.1;
    let mut jb = Joint::new("jb", JointKind::Ball, 2);
    jb.range = Some((0.0, 0.5));
    jb.frictionloss = 0.2;
    let mut jc = Joint::new("jc", JointKind::Free, 3);
    jc.frictionloss = 0.3;
    let jd = Joint::new("jd", JointKind::Slide, 4);
    let mut ga = Geom::new("ga", 1, GeomShape::Sphere { radius: 0.1 });
    ga.material.condim = 4;
    let mut gc = Geom::new("gc", 3, GeomShape::Sphere { radius: 0.1 });
    gc.material.condim = 6;
    let mut parts = ModelParts {
        bodies: vec![
            body("a", 1.0),
            body("b", 2.0),
            body("c", 3.0),
            body("d", 4.0),
        ],
        joints: vec![ja, jb, jc, jd],
        geoms: vec![Geom::new("floor", 0, GeomShape::Plane), ga, gc],
        equalities: vec![
            Equality::Connect {
                name: "con".into(),
                body1: 1,
                body2: 2,
                anchor: Vec3::zeros(),
            },
            Equality::Weld {
                name: "wel".into(),
                body1: 3,
                body2: 0,
                anchor: Vec3::zeros(),
                relpos: Vec3::new(0.0, 0.0, 3.0),
                relquat: Quat::identity(),
                torquescale: 1.0,
            },
            Equality::Joint {
                name: "cpl".into(),
                joint1: 0,
                joint2: 3,
                polycoef: [0.0, 1.0, 0.0, 0.0, 0.0],
            },
        ],
        pairs: vec![ContactPair::new([0, 1])],
        excludes: vec![(1, 3)],
        ..Default::default()
    };
    parts.options.integrator = Integrator::ImplicitFast;
    parts.options.solver = SolverKind::Cg;
    parts
}

fn features(name: &str, model: &Model) -> Vec<&'static str> {
    let f = build(name, &serde_json::Value::Null).unwrap();
    f.ignored_features(model)
        .iter()
        .map(|x| x.feature)
        .collect()
}

#[test]
fn every_formulation_lists_the_features_it_does_not_model() {
    let model = Model::new(everything()).unwrap();
    let expected: &[(&str, &[&str])] = &[
        ("soft_convex", &["pair", "exclude"]),
        (
            "signorini",
            &["pair", "exclude", "option.solver", "option.integrator"],
        ),
        (
            "ncp_fb",
            &[
                "pair",
                "exclude",
                "frictionloss",
                "condim",
                "option.integrator",
            ],
        ),
        (
            "penalty",
            &[
                "pair",
                "exclude",
                "equality",
                "limit",
                "frictionloss",
                "condim",
                "option.integrator",
            ],
        ),
    ];
    assert_eq!(
        expected.len(),
        FORMULATIONS.len(),
        "a formulation without an expectation"
    );
    for (name, want) in expected {
        assert_eq!(features(name, &model), *want, "{name}");
    }
    // The details name the elements: ncp_fb drops every joint's friction loss, penalty only
    // that of the ball and free joints (its springs act on hinge and slide joints).
    let text = |name: &str| {
        joined(
            &build(name, &serde_json::Value::Null)
                .unwrap()
                .ignored_features(&model),
        )
    };
    let ncp = text("ncp_fb");
    assert!(
        ncp.contains("frictionloss: joint friction loss on 3 joints ('ja', 'jb', 'jc')"),
        "{ncp}"
    );
    assert!(ncp.contains("condim 4/6 on 2 geoms ('ga', 'gc')"), "{ncp}");
    let pen = text("penalty");
    assert!(
        pen.contains(
            "equality: 3 equality constraints ('con', 'wel', 'cpl') of kinds connect, joint, weld"
        ),
        "{pen}"
    );
    assert!(
        pen.contains("frictionloss: joint friction loss on 2 joints ('jb', 'jc')"),
        "{pen}"
    );
    assert!(pen.contains("limit: limits of 1 joint ('jb')"), "{pen}");
    assert!(
        pen.contains("option.integrator: the model asks for integrator ImplicitFast"),
        "{pen}"
    );
    assert!(!pen.contains(";;") && pen.split("; ").count() == 7, "{pen}");
}

#[test]
fn features_the_model_disables_are_not_ignored() {
    let mut parts = everything();
    let d = &mut parts.options.disable;
    (d.equality, d.frictionloss, d.limit, d.contact) = (true, true, true, true);
    let model = Model::new(parts).unwrap();
    assert!(features("soft_convex", &model).is_empty());
    assert_eq!(
        features("signorini", &model),
        ["option.solver", "option.integrator"]
    );
    assert_eq!(features("ncp_fb", &model), ["option.integrator"]);
    assert_eq!(features("penalty", &model), ["option.integrator"]);
}

#[test]
fn a_plain_model_is_modelled_in_full_by_every_formulation() {
    let model = common::box_on_floor(0.1, 1.0, 0.01);
    for e in FORMULATIONS {
        assert_eq!(features(e.name, &model), Vec::<&str>::new(), "{}", e.name);
    }
}

/// A height field has no contact routine against a triangle mesh (module doc of
/// `collision::height_field`): every formulation records the pair instead of reading "ok"
/// while the mesh falls through; a convex box on the same field is not listed.
#[test]
fn height_field_against_a_triangle_mesh_is_recorded_as_never_colliding() {
    use nalgebra::{DMatrix, Point3};
    let mesh = GeomShape::TriangleMesh {
        vertices: vec![
            Point3::new(0.0, 0.0, 0.0),
            Point3::new(0.1, 0.0, 0.0),
            Point3::new(0.0, 0.1, 0.0),
            Point3::new(0.0, 0.0, 0.1),
        ],
        triangles: vec![[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]],
    };
    let field = GeomShape::HeightField {
        heights: DMatrix::zeros(3, 3),
        size_x: 2.0,
        size_y: 2.0,
    };
    let parts = |shape: GeomShape| ModelParts {
        bodies: vec![Body::new(
            "b",
            0,
            Vec3::new(0.0, 0.0, 0.2),
            1.0,
            Vec3::repeat(0.01),
        )],
        joints: vec![Joint::new("free", JointKind::Free, 1)],
        geoms: vec![
            Geom::new("field", 0, field.clone()),
            Geom::new("m", 1, shape),
        ],
        ..Default::default()
    };
    let with_mesh = Model::new(parts(mesh)).unwrap();
    let with_box = Model::new(parts(GeomShape::Box {
        half: Vec3::repeat(0.05),
    }))
    .unwrap();
    for e in FORMULATIONS {
        assert!(
            features(e.name, &with_mesh).contains(&"collision_pair"),
            "{}: {:?}",
            e.name,
            features(e.name, &with_mesh)
        );
        assert!(!features(e.name, &with_box).contains(&"collision_pair"));
    }
}
