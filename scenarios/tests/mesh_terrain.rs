//! The `mesh_terrain` scene: procedural and loaded terrain, TriMesh and HeightField colliders,
//! the robot driving on it under the formulations.

use contactlab_scenarios::benchmark::mesh_terrain::{face_count, START_CLEARANCE, TERRAIN_GEOM};
use contactlab_scenarios::benchmark::wheeled_robot::{chassis_up, WHEEL_GEOMS};
use contactlab_scenarios::{build, Scene};
use contactlab_solvers::collision::detect_with_margin;
use contactlab_solvers::formulation::{self, FORMULATIONS};
use contactlab_solvers::kinematics::forward_kinematics;
use contactlab_solvers::State;
use serde_json::{json, Value};

/// Run `scene` under formulation `f` (parameters `fp`) at step `h` for `duration` s with the
/// scene's control law; panics on divergence; returns the end state, the peak penetration (m)
/// and the smallest chassis "up" component.
fn run(scene: &Scene, f: &str, fp: Value, h: f64, duration: f64) -> (State, f64, f64) {
    let mut form = formulation::build(f, &fp).unwrap();
    let mut s = scene.initial.clone();
    let (mut pen, mut up) = (0.0f64, 1.0f64);
    for _ in 0..(duration / h).round() as usize {
        let u = scene.controls_at(s.t, &s);
        let r = form.step(&scene.model, &mut s, &u, h);
        assert!(
            r.diverged.is_none(),
            "{f}: diverged at t = {}: {:?}",
            s.t,
            r.diverged
        );
        for c in &r.contacts {
            pen = pen.max(-c.gap);
        }
        up = up.min(chassis_up(&s));
    }
    (s, pen, up)
}

fn terrain_faces(scene: &Scene) -> usize {
    let g = scene.model.geom_id(TERRAIN_GEOM).unwrap();
    face_count(&scene.model.geoms[g].shape)
}

/// Under the default constant forward command the robot advances >= 2 m in 6 s on the default
/// procedural terrain (>= 12,000 faces), staying upright.
fn advances(f: &str, fp: Value, h: f64, collider: &str) -> f64 {
    let scene = build("mesh_terrain", &json!({ "collider": collider })).unwrap();
    let faces = terrain_faces(&scene);
    assert!(faces >= 12_000, "{faces} faces");
    let (end, pen, up) = run(&scene, f, fp, h, 6.0);
    let d = (end.q[0] - scene.initial.q[0]).hypot(end.q[1] - scene.initial.q[1]);
    println!(
        "{f} h={h} {collider}: {faces} faces, advanced {d:.3} m in 6 s to ({:.3}, {:.3}, {:.3}), peak penetration {pen:.4} m, min up {up:.3}",
        end.q[0], end.q[1], end.q[2]
    );
    assert!(d >= 2.0, "{f}: advanced only {d} m");
    assert!(up > 0.7, "{f}: chassis tipped (min up {up})");
    d
}

#[test]
fn mesh_terrain_soft_convex_advances_2_m_in_6_s() {
    advances("soft_convex", json!({}), 2e-3, "trimesh");
}

#[test]
fn mesh_terrain_penalty_advances_2_m_in_6_s() {
    advances(
        "penalty",
        json!({"friction": "normalized"}),
        5e-4,
        "trimesh",
    );
}

#[test]
fn mesh_terrain_heightfield_soft_convex_advances_like_the_trimesh() {
    let tri = advances("soft_convex", json!({}), 2e-3, "trimesh");
    let hf = advances("soft_convex", json!({}), 2e-3, "heightfield");
    // Same triangles, so the same trajectory up to round-off amplified over 3000 steps.
    assert!(
        (tri - hf).abs() < 0.02,
        "trimesh {tri} m, heightfield {hf} m"
    );
}

/// The trimesh collider runs with every formulation in `benchmark_scenes.rs`
/// (`every_benchmark_scene_runs_with_every_formulation`); this runs the height field the same
/// way: h = 0.5 ms, 0.3 s, no divergence, the robot moves forward.
#[test]
fn mesh_terrain_heightfield_runs_with_every_formulation() {
    let scene = build("mesh_terrain", &json!({"collider": "heightfield"})).unwrap();
    assert_eq!(terrain_faces(&scene), 12_800);
    for fe in FORMULATIONS {
        let (end, pen, _) = run(&scene, fe.name, json!({}), 5e-4, 0.3);
        let dx = end.q[0] - scene.initial.q[0];
        println!(
            "heightfield / {}: x advanced {dx:.4} m in 0.3 s, peak penetration {pen:.4} m",
            fe.name
        );
        assert!(end.q.iter().chain(end.v.iter()).all(|x| x.is_finite()));
        assert!(dx > 0.01, "{}: did not drive forward ({dx} m)", fe.name);
        assert!(pen < 0.02, "{}: penetration {pen} m", fe.name);
    }
}

/// Smallest gap (m) between each wheel and the terrain at configuration `q`, contacts detected
/// up to 0.3 m apart (the wheels not touching the uneven terrain hover a few cm above it).
fn wheel_gaps(scene: &Scene, q: &nalgebra::DVector<f64>) -> Vec<f64> {
    let m = &scene.model;
    let kin = forward_kinematics(m, q);
    let contacts = detect_with_margin(m, &kin, 0.3);
    let terrain = m.geom_id(TERRAIN_GEOM).unwrap();
    WHEEL_GEOMS
        .iter()
        .map(|w| {
            let w = m.geom_id(w).unwrap();
            contacts
                .iter()
                .filter(|c| c.geoms.contains(&w) && c.geoms.contains(&terrain))
                .map(|c| c.gap)
                .fold(f64::INFINITY, f64::min)
        })
        .collect()
}

/// The TriMesh and HeightField colliders of one grid give the same wheel gaps, resting at the
/// start (the lowest wheel at START_CLEARANCE above the terrain) and pressed 5 mm lower.
#[test]
fn trimesh_and_heightfield_give_the_same_wheel_gaps() {
    let tri = build("mesh_terrain", &json!({"collider": "trimesh"})).unwrap();
    let hf = build("mesh_terrain", &json!({"collider": "heightfield"})).unwrap();
    assert!((tri.initial.q[2] - hf.initial.q[2]).abs() < 1e-9);
    for lower in [0.0, 0.005] {
        let mut q = tri.initial.q.clone();
        q[2] -= lower;
        let (gt, gh) = (wheel_gaps(&tri, &q), wheel_gaps(&hf, &q));
        println!("lowered {lower} m: trimesh gaps {gt:?}, heightfield gaps {gh:?}");
        let lowest = gt.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(
            // The shape cast stops within parry's tolerance (measured 1.5e-5 m short); lowering
            // by d closes a gap by d n_z (terrain slopes here below 0.2: n_z > 0.98).
            (lowest - (START_CLEARANCE - lower)).abs() < 2e-4,
            "lowest wheel gap {lowest} m, expected {} m",
            START_CLEARANCE - lower
        );
        for (a, b) in gt.iter().zip(&gh) {
            assert!(
                a.is_finite(),
                "a wheel has no terrain contact within 0.3 m: {gt:?}"
            );
            assert!((a - b).abs() < 1e-9, "trimesh {a} m vs heightfield {b} m");
        }
    }
}

/// Write the default procedural grid (coarsened to 20 x 20 cells) as an OBJ file, load it as
/// `mesh_file`, and find the same face count and the same start height as the procedural
/// trimesh; a malformed OBJ and a missing file are errors naming the file (and the line).
#[test]
fn obj_terrain_loads_and_bad_files_name_the_file() {
    use contactlab_scenarios::benchmark::MeshTerrainParams;
    use contactlab_solvers::geometry::GeomShape;
    use std::fmt::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let p = MeshTerrainParams {
        grid: 20,
        ..Default::default()
    };
    let GeomShape::TriangleMesh {
        vertices,
        triangles,
    } = p.procedural().sample().to_triangle_mesh()
    else {
        panic!("not a mesh")
    };
    let mut obj = String::from("# 20 x 20 cells over 24 m\no terrain\n");
    for v in &vertices {
        writeln!(obj, "v {} {} {}", v.x, v.y, v.z).unwrap();
    }
    for t in &triangles {
        writeln!(obj, "f {} {} {}", t[0] + 1, t[1] + 1, t[2] + 1).unwrap();
    }
    let path = dir.path().join("terrain.obj");
    std::fs::write(&path, &obj).unwrap();
    let loaded = build(
        "mesh_terrain",
        &json!({ "mesh_file": path.to_str().unwrap() }),
    )
    .unwrap();
    let procedural = build("mesh_terrain", &json!({ "grid": 20 })).unwrap();
    assert_eq!(terrain_faces(&loaded), 800);
    assert_eq!(terrain_faces(&procedural), 800);
    // The file holds f32 coordinates: start heights agree to f32 round-off of ~0.3 m.
    let dz = loaded.initial.q[2] - procedural.initial.q[2];
    assert!(dz.abs() < 1e-6, "start heights differ by {dz} m");
    // mesh_scale scales the file's coordinates: the 24 m grid spans 48 m.
    let scaled = build(
        "mesh_terrain",
        &json!({ "mesh_file": path.to_str().unwrap(), "mesh_scale": 2.0 }),
    )
    .unwrap();
    let g = scaled.model.geom_id(TERRAIN_GEOM).unwrap();
    let GeomShape::TriangleMesh { vertices, .. } = &scaled.model.geoms[g].shape else {
        panic!("not a mesh")
    };
    let xmax = vertices
        .iter()
        .map(|v| v.x)
        .fold(f64::NEG_INFINITY, f64::max);
    assert!(
        (xmax - 24.0).abs() < 1e-5,
        "scaled mesh reaches x = {xmax} m"
    );

    // A bad coordinate on line 4: the error names the file and the line.
    let bad = dir.path().join("bad.obj");
    std::fs::write(&bad, "# bad\nv 0 0 0\nv 1 0 0\nv 0 1 zero\nf 1 2 3\n").unwrap();
    let e = build(
        "mesh_terrain",
        &json!({ "mesh_file": bad.to_str().unwrap() }),
    )
    .unwrap_err()
    .to_string();
    println!("{e}");
    assert!(
        e.contains(bad.to_str().unwrap()) && e.contains("line 4"),
        "{e}"
    );
    // A face with a vertex index out of range.
    std::fs::write(&bad, "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 7\n").unwrap();
    let e = build(
        "mesh_terrain",
        &json!({ "mesh_file": bad.to_str().unwrap() }),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains(bad.to_str().unwrap()), "{e}");
    // A file without faces, a missing file, an unsupported format, a height field from a file.
    std::fs::write(&bad, "v 0 0 0\nv 1 0 0\nv 0 1 0\n").unwrap();
    let e = build(
        "mesh_terrain",
        &json!({ "mesh_file": bad.to_str().unwrap() }),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("bad.obj") && e.contains("no triangles"), "{e}");
    for (file, collider, needle) in [
        ("missing.stl", "trimesh", "missing.stl"),
        ("terrain.ply", "trimesh", ".ply"),
        ("terrain.obj", "heightfield", "heightfield"),
    ] {
        let f = dir.path().join(file);
        let e = build(
            "mesh_terrain",
            &json!({ "mesh_file": f.to_str().unwrap(), "collider": collider }),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains(needle) && e.contains(file), "{e}");
    }
}

/// A malformed ASCII STL names the file; a valid one loads with its face count.
#[test]
fn stl_terrain_loads_and_a_malformed_one_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("ramp.stl");
    let facet = |a: [f64; 3], b: [f64; 3], c: [f64; 3]| {
        format!(
            "facet normal 0 0 1\nouter loop\nvertex {} {} {}\nvertex {} {} {}\nvertex {} {} {}\nendloop\nendfacet\n",
            a[0], a[1], a[2], b[0], b[1], b[2], c[0], c[1], c[2]
        )
    };
    let stl = format!(
        "solid ramp\n{}{}endsolid ramp\n",
        facet([-10.0, -10.0, 0.0], [10.0, -10.0, 0.0], [10.0, 10.0, 0.0]),
        facet([-10.0, -10.0, 0.0], [10.0, 10.0, 0.0], [-10.0, 10.0, 0.0])
    );
    std::fs::write(&good, &stl).unwrap();
    let scene = build(
        "mesh_terrain",
        &json!({ "mesh_file": good.to_str().unwrap() }),
    )
    .unwrap();
    assert_eq!(terrain_faces(&scene), 2);
    // Flat ground at z = 0: the chassis starts at ride height + clearance.
    assert!((scene.initial.q[2] - (0.35 + START_CLEARANCE)).abs() < 1e-6);
    let bad = dir.path().join("broken.stl");
    std::fs::write(&bad, stl.replace("vertex 10 10 0", "vertex 10 ten 0")).unwrap();
    let e = build(
        "mesh_terrain",
        &json!({ "mesh_file": bad.to_str().unwrap() }),
    )
    .unwrap_err()
    .to_string();
    println!("{e}");
    assert!(e.contains(bad.to_str().unwrap()), "{e}");
}

#[test]
fn mesh_terrain_parameters_are_checked_and_the_loss_tracks_pose() {
    use contactlab_scenarios::benchmark::{
        mesh_terrain_loss, mesh_terrain_success, MeshTerrainParams,
    };
    for bad in [
        json!({"bogus": 1}),
        json!({"amplitude": -0.1}),
        json!({"grid": 0}),
        json!({"collider": "voxels"}),
        json!({"wheel_radius": 0.0}),
        json!({"start": [30.0, 0.0]}),
    ] {
        let e = build("mesh_terrain", &bad)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        println!("{bad} -> {e}");
        assert!(e.contains("mesh_terrain"), "{e}");
    }
    // The default horizon and a robot key beside the scene's keys.
    let scene = build("mesh_terrain", &json!({"wheel_radius": 0.4, "grid": 10})).unwrap();
    assert_eq!(scene.horizon, 10.0);
    assert_eq!(terrain_faces(&scene), 200);
    // Loss: 0.1 m short of the target, yaw off by 0.2 rad.
    let target = MeshTerrainParams::default().target_pose();
    let mut s = scene.initial.clone();
    s.q[0] = target.x - 0.1;
    s.q[1] = target.y;
    s.q[3] = 0.1f64.cos();
    s.q[4] = 0.0;
    s.q[5] = 0.0;
    s.q[6] = 0.1f64.sin();
    let loss = mesh_terrain_loss(&s, &target, 0.5);
    assert!((loss - (0.01 + 0.5 * 0.04)).abs() < 1e-12, "loss {loss}");
    assert!(mesh_terrain_success(&s, &target));
    s.q[1] += 0.3;
    assert!(!mesh_terrain_success(&s, &target));
}
