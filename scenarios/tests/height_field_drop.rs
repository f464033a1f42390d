//! Issue #12: a 2 cm sphere dropped from 0.5 m onto a flat 10 x 10 m height field fell through
//! it (to -7.5 m under soft_convex and signorini) while the same drop on a plane rests at
//! 0.0196 m. Height field triangles are solids now (`contactlab_solvers::collision::height_field`):
//! the drop must rest where the plane drop rests, under every formulation and timestep.

use std::path::PathBuf;

use contactlab_scenarios::build;
use serde_json::{json, Value};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mjcf")
        .join(name)
}

/// The sphere's height (m) after `duration` seconds at timestep `h`, and the lowest height on
/// the way.
fn drop(file: &str, key: Option<&str>, formulation: &str, h: f64, duration: f64) -> (f64, f64) {
    // penalty's material stiffness and damping are sized for bodies of about 1 kg; on this
    // 34 g sphere (default density) they are explicitly unstable (h kd / m > 2) and launch it,
    // on the plane as on the height field. ke 500 N/m, kd 2 N s/m: ω h ≤ 0.61, damping
    // ratio 0.24, rest penetration m g / ke = 0.66 mm.
    let fp = if formulation == "penalty" {
        json!({"ke": 500.0, "kd": 2.0})
    } else {
        json!(null)
    };
    let mut params = json!({"file": fixture(file)});
    if let Some(k) = key {
        params["key"] = Value::String(k.into());
    }
    let scene = build("mjcf", &params).unwrap();
    let mut f = contactlab_solvers::formulation::build(formulation, &fp).unwrap();
    let mut s = scene.initial.clone();
    let mut lowest = f64::INFINITY;
    for _ in 0..(duration / h).round() as usize {
        let u = scene.controls_at(s.t, &s);
        let r = f.step(&scene.model, &mut s, &u, h);
        assert!(r.diverged.is_none(), "{formulation} h {h} {file}: {r:?}");
        lowest = lowest.min(s.q[2]);
    }
    (s.q[2], lowest)
}

#[test]
fn sphere_dropped_on_a_flat_height_field_rests_as_on_a_plane_not_falling_through() {
    for formulation in ["soft_convex", "signorini", "ncp_fb", "penalty"] {
        for h in [1e-3, 5e-3] {
            let (plane, plane_lowest) = drop("plane_drop.xml", None, formulation, h, 2.0);
            for key in [None, Some("off_vertex")] {
                let (field, lowest) = drop(
                    "height_field_drop_falls_through.xml",
                    key,
                    formulation,
                    h,
                    2.0,
                );
                println!(
                    "{formulation:<12} h {h:.0e} {key:?}: rest z on plane {plane:.6} m, on height field {field:.6} m (lowest {plane_lowest:.6} and {lowest:.6} m)"
                );
                assert!(
                    (field - plane).abs() < 1e-3,
                    "{formulation} h {h} {key:?}: height field {field} m vs plane {plane} m"
                );
                // The impact sinks the centre as deep as on the plane (with soft contacts below
                // the surface, where parry's triangles flipped the normal), and it comes back.
                assert!(
                    (lowest - plane_lowest).abs() < 1e-3,
                    "{formulation} h {h} {key:?}: lowest {lowest} m vs {plane_lowest} m on the plane"
                );
                // At rest on the surface: centre within 1 mm of the radius (2 cm) above it.
                assert!((field - 0.02).abs() < 1e-3, "{formulation} h {h}: {field}");
            }
        }
    }
}
