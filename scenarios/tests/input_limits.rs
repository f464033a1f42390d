//! Hostile inputs to the loaders (issue #12, "no unbounded input"): each is an error naming
//! the file, the element or key and the line, refused before anything is allocated from it,
//! never a panic, an abort, a hang or a huge allocation. Limits: `contactlab_scenarios::limits`.

#![cfg(unix)]

use std::path::Path;

use contactlab_scenarios::limits::{MAX_HFIELD_SAMPLES, MAX_XML_DEPTH};
use contactlab_scenarios::mesh_file::{load_mesh_file, MeshFileErrorKind};
use contactlab_scenarios::mjcf::{load_file, load_str, MjcfError, MjcfErrorKind};
use contactlab_scenarios::{build, recorded};
use serde_json::json;

fn load(text: &str) -> Result<(), MjcfError> {
    load_str(text, Path::new("hostile.xml"), Path::new("."), None).map(|_| ())
}

fn mkfifo(path: &Path) {
    let st = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success(), "mkfifo {}", path.display());
}

/// A free body with an inline mesh geom whose 4th vertex (a tetrahedron) is `last`.
fn inline_mesh(last: &str) -> String {
    format!(
        "<mujoco>\n<asset>\n<mesh name=\"t\" vertex=\"0 0 0  1 0 0  0 1 0  {last}\"/>\n</asset>\n<worldbody>\n<body><freejoint/><geom type=\"mesh\" mesh=\"t\"/></body>\n</worldbody>\n</mujoco>\n"
    )
}

/// Regression: a NaN inline mesh vertex reached parry's convex hull and panicked there.
#[test]
fn nan_inline_mesh_vertex_names_the_mesh_and_its_line() {
    assert!(load(&inline_mesh("0 0 1")).is_ok());
    for bad in ["nan 0 1", "0 inf 1", "0 0 -inf"] {
        let e = load(&inline_mesh(bad)).unwrap_err();
        assert_eq!(
            (e.kind, e.line, e.element.as_str()),
            (MjcfErrorKind::Invalid, 3, "mesh"),
            "{e}"
        );
        assert!(
            e.to_string().contains("'vertex'") && e.to_string().contains("finite"),
            "{e}"
        );
    }
}

#[test]
fn non_finite_size_attribute_names_the_geom_and_its_line() {
    let text = "<mujoco>\n<worldbody>\n<body><freejoint/>\n<geom type=\"sphere\" size=\"NaN\"/>\n</body>\n</worldbody>\n</mujoco>\n";
    let e = load(text).unwrap_err();
    assert_eq!((e.line, e.element.as_str()), (4, "geom"), "{e}");
    assert!(
        e.to_string().contains("'size'") && e.to_string().contains("finite"),
        "{e}"
    );
}

fn hfield(attrs: &str) -> String {
    format!("<mujoco>\n<asset>\n<hfield name=\"h\" size=\"1 1 0.1 0.1\" {attrs}/>\n</asset>\n<worldbody>\n<geom type=\"hfield\" hfield=\"h\"/>\n</worldbody>\n</mujoco>\n")
}

/// Regression: `nrow = ncol = 2^31 - 1` overflowed `nrow * ncol` (capacity overflow abort).
#[test]
fn hfield_of_2_31_squared_samples_is_refused_before_allocating() {
    let e = load(&hfield("nrow=\"2147483647\" ncol=\"2147483647\"")).unwrap_err();
    assert_eq!(
        (e.kind, e.line, e.element.as_str()),
        (MjcfErrorKind::Invalid, 3, "hfield"),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains(&format!("limit of {MAX_HFIELD_SAMPLES}")),
        "{e}"
    );
    // Just over the limit is refused too, and the elevation is never parsed.
    let e = load(&hfield("nrow=\"2049\" ncol=\"2048\"")).unwrap_err();
    assert!(e.to_string().contains("2049x2048"), "{e}");
}

#[test]
fn nan_hfield_elevation_names_the_hfield_and_its_line() {
    assert!(load(&hfield("nrow=\"2\" ncol=\"2\" elevation=\"0 1 2 3\"")).is_ok());
    let e = load(&hfield("nrow=\"2\" ncol=\"2\" elevation=\"0 1 nan 3\"")).unwrap_err();
    assert_eq!((e.line, e.element.as_str()), (3, "hfield"), "{e}");
    assert!(
        e.to_string().contains("'elevation'") && e.to_string().contains("finite"),
        "{e}"
    );
}

/// Regression: a height-field file whose header claims 23,000 x 23,000 samples.
#[test]
fn hfield_file_claiming_23000_squared_samples_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = Vec::new();
    bytes.extend(23_000i32.to_le_bytes());
    bytes.extend(23_000i32.to_le_bytes());
    bytes.extend([0u8; 16]);
    std::fs::write(dir.path().join("big.bin"), &bytes).unwrap();
    let xml = dir.path().join("m.xml");
    std::fs::write(&xml, hfield("file=\"big.bin\"")).unwrap();
    let e = load_file(&xml, None).unwrap_err();
    assert_eq!((e.line, e.element.as_str()), (3, "hfield"), "{e}");
    assert!(
        e.to_string().contains("big.bin") && e.to_string().contains("23000x23000"),
        "{e}"
    );
}

fn nested_bodies(depth: usize) -> String {
    let mut s = String::from("<mujoco>\n<worldbody>\n");
    for _ in 0..depth {
        s.push_str("<body><geom type=\"sphere\" size=\"0.1\"/>\n");
    }
    s.push_str(&"</body>".repeat(depth));
    s.push_str("\n</worldbody>\n</mujoco>\n");
    s
}

/// Regression: 8,000 nested `<body>` elements overflowed the stack of the recursive body walk.
#[test]
fn bodies_nested_8000_deep_are_refused_naming_the_first_too_deep() {
    let e = load(&nested_bodies(8000)).unwrap_err();
    // <mujoco> is depth 1, <worldbody> 2, body k is k + 2 on line k + 2, its geom k + 3: the
    // first element past the limit is the geom of body MAX_XML_DEPTH - 2.
    assert_eq!(
        (e.kind, e.line as usize, e.element.as_str()),
        (MjcfErrorKind::Invalid, MAX_XML_DEPTH, "geom"),
        "{e}"
    );
    assert!(
        e.to_string().contains(&format!("limit of {MAX_XML_DEPTH}")),
        "{e}"
    );
}

/// The deepest chain allowed loads (on a test thread's default 2 MiB stack), one body per level.
#[test]
fn bodies_nested_to_the_limit_load() {
    let m = load_str(
        &nested_bodies(MAX_XML_DEPTH - 3),
        Path::new("deep.xml"),
        Path::new("."),
        None,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.model.bodies.len(), MAX_XML_DEPTH - 2, "world + bodies");
    assert!(load(&nested_bodies(MAX_XML_DEPTH - 2)).is_err());
}

/// Regression: `/dev/zero` or a FIFO as the model or mesh file read forever (or blocked in
/// `open`).
#[test]
fn model_and_mesh_files_that_are_devices_or_fifos_are_refused() {
    let e = load_file("/dev/zero", None).unwrap_err();
    assert_eq!(e.kind, MjcfErrorKind::Io);
    assert!(
        e.to_string().contains("/dev/zero") && e.to_string().contains("character device"),
        "{e}"
    );

    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("model.xml");
    mkfifo(&fifo);
    let e = load_file(&fifo, None).unwrap_err();
    assert!(
        e.to_string().contains("model.xml") && e.to_string().contains("FIFO"),
        "{e}"
    );

    let mesh = dir.path().join("part.obj");
    mkfifo(&mesh);
    let e = load_mesh_file(&mesh).unwrap_err();
    assert_eq!(e.kind, MeshFileErrorKind::Io);
    assert!(
        e.to_string().contains("part.obj") && e.to_string().contains("FIFO"),
        "{e}"
    );
    let xml = dir.path().join("m.xml");
    std::fs::write(
        &xml,
        "<mujoco>\n<asset>\n<mesh file=\"part.obj\"/>\n</asset>\n</mujoco>\n",
    )
    .unwrap();
    let e = load_file(&xml, None).unwrap_err();
    assert_eq!((e.line, e.element.as_str()), (3, "mesh"), "{e}");
    assert!(e.to_string().contains("FIFO"), "{e}");

    let zero = dir.path().join("zero.stl");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let e = load_mesh_file(&zero).unwrap_err();
    assert_eq!(e.kind, MeshFileErrorKind::Io);
    assert!(
        e.to_string().contains("zero.stl") && e.to_string().contains("character device"),
        "{e}"
    );
}

#[test]
fn obj_with_a_nan_vertex_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("nan.obj");
    std::fs::write(
        &p,
        "v 0 0 0\nv 1 0 0\n# c\nv 0 nan 0\nv 0 0 1\nf 1 2 3\nf 1 2 4\n",
    )
    .unwrap();
    let e = load_mesh_file(&p).unwrap_err();
    assert_eq!(
        (e.kind, e.line),
        (MeshFileErrorKind::Malformed, Some(4)),
        "{e}"
    );
    assert!(
        e.to_string().contains("nan.obj") && e.to_string().contains("finite"),
        "{e}"
    );
}

#[test]
fn toss_file_that_is_a_fifo_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("toss_000.csv");
    mkfifo(&p);
    let e = recorded::read_toss(&p).unwrap_err();
    assert!(
        e.to_string().contains("toss_000.csv") && e.to_string().contains("FIFO"),
        "{e}"
    );
}

/// Regression: `grid: 100000` allocated 80 GB; `layers: 1e9` likewise.
#[test]
fn mesh_terrain_grid_and_layers_over_the_limits_are_refused() {
    for (params, key) in [
        (json!({"grid": 100_000}), "grid: 100000 x 100000"),
        (json!({"grid": 513}), "grid: 513"),
        (json!({"grid": usize::MAX}), "exceed the limit"),
        (json!({"layers": 1_000_000_000usize}), "layers: 1000000000"),
    ] {
        let e = build("mesh_terrain", &params).err().expect("refused");
        let m = e.to_string();
        assert!(
            m.contains("mesh_terrain") && m.contains(key) && m.contains("limit"),
            "{m}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let zero = dir.path().join("zero.obj");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let e = build("mesh_terrain", &json!({ "mesh_file": zero }))
        .err()
        .expect("refused");
    assert!(
        e.to_string().contains("zero.obj") && e.to_string().contains("character device"),
        "{e}"
    );
}

/// Regression (fresh-user review): a mesh whose vertices all sit at one point, or on one line,
/// panicked in parry's convex hull (`MissingSupportPoint`); it is an error naming the mesh.
#[test]
fn mesh_with_all_vertices_at_one_point_is_an_error_not_a_panic() {
    for verts in ["0 0 0  0 0 0  0 0 0  0 0 0", "0 0 0  1 0 0  2 0 0  3 0 0"] {
        let text = format!(
            "<mujoco>\n<asset>\n<mesh name=\"p\" vertex=\"{verts}\"/>\n</asset>\n<worldbody>\n<body><freejoint/><geom type=\"mesh\" mesh=\"p\"/></body>\n</worldbody>\n</mujoco>\n"
        );
        let e = load(&text).unwrap_err();
        assert_eq!(e.kind, MjcfErrorKind::Invalid, "{e}");
        assert!(e.line > 0, "{e}");
    }
}

/// Regression (fresh-user review): `margin="-1"` was accepted and the box fell through the
/// floor (its contacts dropped until 1 m deep); a negative or non-finite margin or gap is an
/// error naming the geom.
#[test]
fn negative_margin_or_gap_is_an_error_naming_the_geom() {
    let geom = |attr: &str| {
        format!("<mujoco>\n<worldbody>\n<geom type=\"plane\" size=\"5 5 0.1\"/>\n<body pos=\"0 0 0.5\"><freejoint/>\n<geom name=\"b\" type=\"box\" size=\"0.05 0.05 0.05\" {attr}/>\n</body>\n</worldbody>\n</mujoco>\n")
    };
    assert!(load(&geom("margin=\"0.01\" gap=\"0.005\"")).is_ok());
    for (attr, key) in [("margin=\"-1\"", "margin"), ("gap=\"-0.01\"", "gap")] {
        let e = load(&geom(attr)).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains(">= 0"), "{attr}: {e}");
    }
}
