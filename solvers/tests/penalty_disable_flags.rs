//! penalty honours MuJoCo's `<flag>` options (`gravity`, `contact`, `limit`, `frictionloss`)
//! as soft_convex does, and a condim-1 contact is frictionless. (Fixed: penalty used to apply
//! gravity, contacts, limit springs and friction loss whatever the flags, and sliding friction
//! whatever the condim.) Each case against the closed form of semi-implicit Euler,
//! `v_{n+1} = v_n + h a_n`, `q_{n+1} = q_n + h v_{n+1}`, with and without the flag.

use contactlab_solvers::formulation::{build, Formulation};
use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::model::{Body, Geom, Joint, JointKind, Model, ModelParts, Vec3};
use contactlab_solvers::State;

const H: f64 = 1e-3;
const G: f64 = 9.81;

fn penalty() -> Box<dyn Formulation> {
    build("penalty", &serde_json::Value::Null).unwrap()
}

fn run(model: &Model, state: &mut State, steps: usize) {
    let mut f = penalty();
    for _ in 0..steps {
        let r = f.step(model, state, &[], H);
        assert!(r.diverged.is_none(), "{:?}", r.diverged);
    }
}

/// A 1 kg box of half-size 0.1 m on a free joint at height `z`, over a floor plane.
fn box_on_floor(z: f64, condim: u8) -> ModelParts {
    let mut floor = Geom::new("floor", 0, GeomShape::Plane);
    floor.material.condim = condim;
    let mut b = Geom::new(
        "box",
        1,
        GeomShape::Box {
            half: Vec3::repeat(0.1),
        },
    );
    b.material.condim = condim;
    ModelParts {
        bodies: vec![Body::new(
            "box",
            0,
            Vec3::new(0.0, 0.0, z),
            1.0,
            Vec3::repeat(1.0 / 150.0),
        )],
        joints: vec![Joint::new("free", JointKind::Free, 1)],
        geoms: vec![floor, b],
        ..Default::default()
    }
}

/// A 2 kg body on a slide joint along world x (gravity does not act along it).
fn slider(joint: Joint) -> Model {
    Model::new(ModelParts {
        bodies: vec![Body::new("s", 0, Vec3::zeros(), 2.0, Vec3::repeat(0.01))],
        joints: vec![joint],
        ..Default::default()
    })
    .unwrap()
}

fn slide_joint() -> Joint {
    let mut j = Joint::new("x", JointKind::Slide, 1);
    j.axis = Vec3::x();
    j
}

#[test]
fn gravity_disabled_a_free_body_keeps_its_velocity() {
    let n = 200;
    for disabled in [false, true] {
        let mut parts = box_on_floor(1.0, 3);
        parts.geoms.remove(0); // no floor: free flight
        parts.options.disable.gravity = disabled;
        let model = Model::new(parts).unwrap();
        let mut s = model.default_state();
        s.v[0] = 1.0;
        s.v[1] = -2.0;
        s.v[2] = 3.0;
        run(&model, &mut s, n);
        let g = if disabled { 0.0 } else { G };
        let t = n as f64 * H;
        let vz = 3.0 - g * t;
        let z = 1.0 + 3.0 * t - g * H * H * (n * (n + 1)) as f64 / 2.0;
        assert!(
            (s.v[2] - vz).abs() < 1e-12,
            "disabled {disabled}: vz {} vs {vz}",
            s.v[2]
        );
        assert!(
            (s.q[2] - z).abs() < 1e-12,
            "disabled {disabled}: z {} vs {z}",
            s.q[2]
        );
        assert!((s.v[0] - 1.0).abs() < 1e-12 && (s.v[1] + 2.0).abs() < 1e-12);
        assert!((s.q[0] - t).abs() < 1e-12 && (s.q[1] + 2.0 * t).abs() < 1e-12);
    }
}

#[test]
fn contact_disabled_the_box_falls_through_the_floor() {
    // 1 mm into the floor: with contacts, the four corner springs (4 x 1e5 N/m x 1 mm = 400 N)
    // throw the box up; without, it falls freely through the floor.
    let z0 = 0.099;
    let n = 100;
    for disabled in [false, true] {
        let mut parts = box_on_floor(z0, 3);
        parts.options.disable.contact = disabled;
        let model = Model::new(parts).unwrap();
        let mut s = model.default_state();
        let mut f = penalty();
        let first = f.step(&model, &mut s, &[], H);
        if disabled {
            assert!(first.contacts.is_empty());
            assert!((s.v[2] + G * H).abs() < 1e-12, "vz {}", s.v[2]);
        } else {
            assert_eq!(first.contacts.len(), 4);
            assert!((s.v[2] - (400.0 - G) * H).abs() < 1e-9, "vz {}", s.v[2]);
            continue;
        }
        for _ in 1..n {
            f.step(&model, &mut s, &[], H);
        }
        let z = z0 - G * H * H * (n * (n + 1)) as f64 / 2.0;
        assert!((s.q[2] - z).abs() < 1e-12, "z {} vs {z}", s.q[2]);
        assert!((s.v[2] + G * n as f64 * H).abs() < 1e-12);
    }
}

#[test]
fn limit_disabled_no_spring_past_the_range() {
    // Start 0.05 m past the upper limit 0.1 at rest: the limit spring (limit_ke = 1e4 N/m)
    // accelerates the 2 kg slider by 1e4 x (-0.05) / 2 = -250 m/s^2; disabled, it stays put.
    for disabled in [false, true] {
        let mut j = slide_joint();
        j.range = Some((-0.1, 0.1));
        let mut model = slider(j);
        model.options.disable.limit = disabled;
        let mut s = model.default_state();
        s.q[0] = 0.15;
        run(&model, &mut s, 1);
        let v = if disabled { 0.0 } else { -250.0 * H };
        assert!(
            (s.v[0] - v).abs() < 1e-12,
            "disabled {disabled}: v {} vs {v}",
            s.v[0]
        );
        assert!((s.q[0] - (0.15 + H * v)).abs() < 1e-12);
    }
}

#[test]
fn frictionloss_disabled_the_slider_keeps_its_speed() {
    // Friction loss 0.5 N on a 2 kg slider at 1 m/s: saturated (frictionloss_kv |v| = 1000 N >
    // 0.5 N), so it decelerates by 0.25 m/s^2; disabled, it keeps 1 m/s.
    let n = 400;
    for disabled in [false, true] {
        let mut j = slide_joint();
        j.frictionloss = 0.5;
        let mut model = slider(j);
        model.options.disable.frictionloss = disabled;
        let mut s = model.default_state();
        s.v[0] = 1.0;
        run(&model, &mut s, n);
        let v = if disabled {
            1.0
        } else {
            1.0 - 0.25 * n as f64 * H
        };
        assert!(
            (s.v[0] - v).abs() < 1e-12,
            "disabled {disabled}: v {} vs {v}",
            s.v[0]
        );
    }
}

#[test]
fn condim_one_contacts_are_frictionless() {
    // A box sliding at 1 m/s on the floor, at its static penetration m g / (4 ke): with condim
    // 1 no horizontal force acts (the normal forces are vertical), so vx stays 1 m/s; with
    // condim 3 friction (mu = 1) slows it.
    let z0 = 0.1 - G / 4e5;
    let mut vx = Vec::new();
    for condim in [1, 3] {
        let model = Model::new(box_on_floor(z0, condim)).unwrap();
        let mut s = model.default_state();
        s.v[0] = 1.0;
        run(&model, &mut s, 100);
        vx.push(s.v[0]);
    }
    assert!((vx[0] - 1.0).abs() < 1e-12, "condim 1: vx {}", vx[0]);
    // About mu g t = 0.98 m/s lost over 0.1 s while in contact.
    assert!(vx[1] < 0.5, "condim 3: vx {}", vx[1]);
}
