//! Triangle meshes from OBJ and STL files, shared by the MJCF loader (`<mesh file>`) and the
//! `mesh_terrain` scene.
//!
//! * `.obj` (case-insensitive) through `tobj` with `triangulate` and `single_index` (polygons
//!   fan-triangulated, one index per vertex); every object of the file is appended, indices
//!   offset accordingly. tobj reports no line numbers, so for a position or face parse error
//!   this module finds the first offending `v` / `f` line itself and names it.
//! * `.stl` (ASCII or binary) through `stl_io` (vertices deduplicated by stl_io); its errors
//!   quote the offending ASCII line's tokens, not its number.
//!
//! The file is read at most [`MAX_MESH_FILE_BYTES`] from a regular file
//! ([`crate::input_file`]); a mesh with more than [`MAX_MESH_VERTICES`] vertices or
//! [`MAX_MESH_FACES`] triangles, or with a non-finite coordinate (named by its OBJ line), is an
//! error ([`crate::limits`]).
//!
//! Vertices stay `f32` as both parsers give them (MuJoCo stores mesh vertices in `f32` too);
//! units are those of the file (callers scale).

use std::path::{Path, PathBuf};

use crate::input_file;
use crate::limits::{MAX_MESH_FACES, MAX_MESH_FILE_BYTES, MAX_MESH_VERTICES};

/// A triangle mesh as read from a file.
#[derive(Debug, Clone, PartialEq)]
pub struct MeshData {
    /// Vertex positions (the file's units, usually m), in the file's frame.
    pub vertices: Vec<[f32; 3]>,
    /// Triangles as indices into `vertices`, in the file's winding order.
    pub triangles: Vec<[u32; 3]>,
}

/// What went wrong reading a mesh file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeshFileErrorKind {
    /// The file is missing or unreadable.
    Io,
    /// The file's contents do not parse as its format.
    Malformed,
    /// The extension is neither `.obj` nor `.stl`.
    Unsupported,
}

/// An error reading a mesh file: names the file, and the line when it is known.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("mesh file '{}'{}: {message}", path.display(), line.map(|l| format!(", line {l}")).unwrap_or_default())]
pub struct MeshFileError {
    /// The kind of failure.
    pub kind: MeshFileErrorKind,
    /// The file.
    pub path: PathBuf,
    /// 1-based line of the offending statement, when known (OBJ parse errors).
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

/// Read the triangle mesh in `path` (`.obj` or `.stl`, see the module doc).
///
/// A file that parses but holds no triangles is returned as is (the MJCF loader builds the
/// faces of such a mesh from its convex hull); callers that need triangles check.
///
/// # Errors
/// [`MeshFileError`] naming `path`: missing or unreadable file, not a regular file, over the
/// size limit, parse error (with the line for OBJ position and face errors), unsupported
/// extension, too many vertices or triangles, a non-finite coordinate (with its OBJ line).
pub fn load_mesh_file(path: &Path) -> Result<MeshData, MeshFileError> {
    let err = |kind, line, message: String| MeshFileError {
        kind,
        path: path.to_path_buf(),
        line,
        message,
    };
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "stl" => {
            let bytes = read(path)?;
            let m = stl_io::read_stl(&mut std::io::Cursor::new(bytes))
                .map_err(|e| err(MeshFileErrorKind::Malformed, None, e.to_string()))?;
            let vertices: Vec<[f32; 3]> = m.vertices.iter().map(|v| [v[0], v[1], v[2]]).collect();
            let triangles = m
                .faces
                .iter()
                .map(|t| t.vertices.map(|i| i as u32))
                .collect();
            checked(path, || None, vertices, triangles)
        }
        "obj" => {
            let bytes = read(path)?;
            let text = String::from_utf8_lossy(&bytes);
            for (i, line) in text.lines().enumerate() {
                let mut tok = line.split_whitespace();
                if tok.next() == Some("f") {
                    let n = tok.count();
                    if n < 3 {
                        return Err(err(
                            MeshFileErrorKind::Malformed,
                            Some(i + 1),
                            format!("face with {n} vertices (a face needs at least 3)"),
                        ));
                    }
                }
            }
            let opts = tobj::LoadOptions {
                triangulate: true,
                single_index: true,
                ..Default::default()
            };
            // Materials are visual: `mtllib` files are never opened.
            let (models, _) = tobj::load_obj_buf(&mut bytes.as_slice(), &opts, |_: &Path| {
                Err(tobj::LoadError::OpenFileFailed)
            })
            .map_err(|e| {
                let line = obj_error_line(&text, e);
                let kind = match e {
                    tobj::LoadError::OpenFileFailed | tobj::LoadError::ReadError => {
                        MeshFileErrorKind::Io
                    }
                    _ => MeshFileErrorKind::Malformed,
                };
                err(kind, line, e.to_string())
            })?;
            let (mut vertices, mut triangles) = (Vec::new(), Vec::new());
            for m in models {
                let base = vertices.len() as u32;
                vertices.extend(m.mesh.positions.chunks_exact(3).map(|c| [c[0], c[1], c[2]]));
                triangles.extend(
                    m.mesh
                        .indices
                        .chunks_exact(3)
                        .map(|c| [base + c[0], base + c[1], base + c[2]]),
                );
                if vertices.len() > MAX_MESH_VERTICES || triangles.len() > MAX_MESH_FACES {
                    break;
                }
            }
            // The first `v` line with a non-finite coordinate, for the error.
            let bad_line = || {
                text.lines()
                    .position(|l| {
                        let mut tok = l.split_whitespace();
                        tok.next() == Some("v")
                            && tok
                                .take(3)
                                .any(|x| x.parse::<f32>().is_ok_and(|x| !x.is_finite()))
                    })
                    .map(|i| i + 1)
            };
            checked(path, bad_line, vertices, triangles)
        }
        _ => Err(err(
            MeshFileErrorKind::Unsupported,
            None,
            format!("format '.{ext}' is not supported; supported: .stl (ASCII or binary), .obj"),
        )),
    }
}

/// The file's bytes, at most [`MAX_MESH_FILE_BYTES`] from a regular file.
fn read(path: &Path) -> Result<Vec<u8>, MeshFileError> {
    input_file::read_bytes(path, MAX_MESH_FILE_BYTES).map_err(|e| MeshFileError {
        kind: MeshFileErrorKind::Io,
        path: path.to_path_buf(),
        line: None,
        message: e.message,
    })
}

/// The mesh, once its counts are within [`MAX_MESH_VERTICES`] and [`MAX_MESH_FACES`] and
/// every coordinate is finite (`nan_line`: the OBJ line of the first non-finite vertex, looked
/// up only on error).
fn checked(
    path: &Path,
    nan_line: impl FnOnce() -> Option<usize>,
    vertices: Vec<[f32; 3]>,
    triangles: Vec<[u32; 3]>,
) -> Result<MeshData, MeshFileError> {
    let err = |line, message: String| MeshFileError {
        kind: MeshFileErrorKind::Malformed,
        path: path.to_path_buf(),
        line,
        message,
    };
    if vertices.len() > MAX_MESH_VERTICES {
        return Err(err(
            None,
            format!("more than the limit of {MAX_MESH_VERTICES} vertices"),
        ));
    }
    if triangles.len() > MAX_MESH_FACES {
        return Err(err(
            None,
            format!("more than the limit of {MAX_MESH_FACES} triangles"),
        ));
    }
    if let Some(k) = vertices
        .iter()
        .position(|v| v.iter().any(|x| !x.is_finite()))
    {
        return Err(err(
            nan_line(),
            format!(
                "vertex {k} is {:?}; coordinates must be finite numbers",
                vertices[k]
            ),
        ));
    }
    Ok(MeshData {
        vertices,
        triangles,
    })
}

/// The 1-based line of the first OBJ statement that explains tobj's error `e`, if found: a
/// `v` line whose coordinates do not parse (position error) or an `f` line with fewer than 3
/// vertices or an index that is not a non-zero integer (face error).
fn obj_error_line(text: &str, e: tobj::LoadError) -> Option<usize> {
    if e == tobj::LoadError::FaceVertexOutOfBounds {
        // The first face that refers to a vertex not defined before it (OBJ indices are
        // 1-based; negative ones count back from the last vertex so far).
        let mut seen = 0i64;
        return text
            .lines()
            .position(|line| {
                let mut tok = line.split_whitespace();
                match tok.next() {
                    Some("v") => {
                        seen += 1;
                        false
                    }
                    Some("f") => tok.any(|x| {
                        let first = x.split('/').next().unwrap_or("");
                        matches!(first.parse::<i64>(), Ok(i) if i == 0 || i > seen || -i > seen)
                    }),
                    _ => false,
                }
            })
            .map(|i| i + 1);
    }
    let bad = |line: &str| -> bool {
        let mut tok = line.split_whitespace();
        match (tok.next(), e) {
            (Some("v"), tobj::LoadError::PositionParseError) => {
                let xs: Vec<&str> = tok.collect();
                xs.len() < 3 || xs.iter().any(|x| x.parse::<f32>().is_err())
            }
            (Some("f"), tobj::LoadError::FaceParseError | tobj::LoadError::InvalidPolygon) => {
                let xs: Vec<&str> = tok.collect();
                xs.len() < 3
                    || xs.iter().any(|x| {
                        let first = x.split('/').next().unwrap_or("");
                        !matches!(first.parse::<i64>(), Ok(i) if i != 0)
                    })
            }
            _ => false,
        }
    };
    text.lines().position(bad).map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_extension_names_the_file() {
        let e = load_mesh_file(Path::new("terrain.ply")).unwrap_err();
        assert_eq!(e.kind, MeshFileErrorKind::Unsupported);
        assert!(e.to_string().contains("terrain.ply") && e.to_string().contains(".obj"));
    }

    /// Face errors name their line: an index past the vertices defined so far, and a face of
    /// two vertices.
    #[test]
    fn obj_face_errors_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            (
                "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n# c\nf 1 2 99999\n",
                6,
                "out of bounds",
            ),
            (
                "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\nf 1 2\n",
                5,
                "2 vertices",
            ),
        ];
        for (k, (text, line, what)) in cases.into_iter().enumerate() {
            let path = dir.path().join(format!("t{k}.obj"));
            std::fs::write(&path, text).unwrap();
            let e = load_mesh_file(&path).unwrap_err();
            assert_eq!(e.line, Some(line), "{e}");
            assert!(
                e.to_string().contains(what) && e.to_string().contains(&format!("t{k}.obj")),
                "{e}"
            );
        }
    }
}
