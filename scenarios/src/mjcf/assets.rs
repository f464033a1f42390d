//! `<asset>`: meshes (`<mesh file>` in STL or OBJ, or inline `vertex`/`face`) and height fields
//! (`<hfield>` from MuJoCo's binary format or `elevation`). Textures, materials and skins are
//! visual and skipped.
//!
//! Files resolve against `compiler meshdir` (else `assetdir`), itself relative to the model's
//! directory, as MuJoCo does. Mesh vertices are rounded to `f32` as MuJoCo stores them.
//! Height-field data is normalized to [0, 1] (in `f32`, as MuJoCo) and scaled by `size[2]`;
//! Sizes are bounded before allocation ([`crate::limits`]: `nrow * ncol`, also as claimed by
//! a file's header, mesh vertex and face counts); numbers must be finite.
//! `elevation` is written top row first (+y), the binary file bottom row first (−y), as in
//! MuJoCo (`xml_native_reader.cc`, `mjCHField::LoadCustom`).

use std::collections::HashMap;
use std::path::PathBuf;

use nalgebra::{DMatrix, Point3};
use roxmltree::Node;

use super::error::{MjcfError, MjcfErrorKind};
use super::inertia::{mesh_mass, MeshInertia, MeshMass};
use super::{schema, Ctx};
use crate::limits::{MAX_HFIELD_FILE_BYTES, MAX_HFIELD_SAMPLES, MAX_MESH_FACES, MAX_MESH_VERTICES};
use crate::mesh_file::MeshFileErrorKind;

/// A loaded mesh asset.
#[derive(Debug, Clone)]
pub(crate) struct MeshAsset {
    /// Vertices in the mesh frame, scaled (m).
    pub vertices: Vec<Point3<f64>>,
    /// Mass properties per unit density, or the reason they cannot be computed (an error only
    /// when a body infers its inertia from this mesh).
    pub mass: Result<MeshMass, String>,
}

/// A loaded height-field asset.
#[derive(Debug, Clone)]
pub(crate) struct HfieldAsset {
    /// Heights (m), row i at y = −ry + 2 ry i / (nrow − 1), column j at x likewise.
    pub heights: DMatrix<f64>,
    /// (radius_x, radius_y, elevation_z, base_z) (m).
    pub size: [f64; 4],
}

/// All assets by name.
#[derive(Debug, Default)]
pub(crate) struct Assets {
    pub meshes: HashMap<String, MeshAsset>,
    pub hfields: HashMap<String, HfieldAsset>,
    /// The asset files read, in document order (for `MjcfModel::files`).
    pub files: Vec<PathBuf>,
}

fn stem(file: &str) -> String {
    PathBuf::from(file)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl Assets {
    pub fn parse<'a, 'i>(ctx: &Ctx<'a, 'i>, root: Node<'a, 'i>) -> Result<Self, MjcfError> {
        let mut out = Assets::default();
        for asset in root.children().filter(|n| n.has_tag_name("asset")) {
            ctx.check_attrs(asset, &schema::NONE)?;
            for el in asset.children().filter(Node::is_element) {
                match el.tag_name().name() {
                    "mesh" => {
                        ctx.check_attrs(el, &schema::MESH)?;
                        let file = el.attribute("file");
                        let name = match (el.attribute("name"), file) {
                            (Some(n), _) => n.to_string(),
                            (None, Some(f)) => stem(f),
                            (None, None) => {
                                return Err(ctx.err(
                                    el,
                                    MjcfErrorKind::Invalid,
                                    "a mesh needs a 'name' or a 'file'",
                                ))
                            }
                        };
                        let mesh = mesh(ctx, el)?;
                        out.files.extend(file.map(|f| asset_path(ctx, f)));
                        if out.meshes.insert(name.clone(), mesh).is_some() {
                            return Err(ctx.err(
                                el,
                                MjcfErrorKind::Invalid,
                                format!("mesh name '{name}' is used twice"),
                            ));
                        }
                    }
                    "hfield" => {
                        ctx.check_attrs(el, &schema::HFIELD)?;
                        let name = match (el.attribute("name"), el.attribute("file")) {
                            (Some(n), _) => n.to_string(),
                            (None, Some(f)) => stem(f),
                            (None, None) => {
                                return Err(ctx.err(
                                    el,
                                    MjcfErrorKind::Invalid,
                                    "an hfield needs a 'name' or a 'file'",
                                ))
                            }
                        };
                        let h = hfield(ctx, el)?;
                        out.files
                            .extend(el.attribute("file").map(|f| asset_path(ctx, f)));
                        if out.hfields.insert(name.clone(), h).is_some() {
                            return Err(ctx.err(
                                el,
                                MjcfErrorKind::Invalid,
                                format!("hfield name '{name}' is used twice"),
                            ));
                        }
                    }
                    t if schema::SKIPPED_ELEMENTS.contains(&t) => {}
                    _ => return Err(ctx.unsupported_element(el, &["mesh", "hfield"])),
                }
            }
        }
        Ok(out)
    }
}

/// Path of an asset file: absolute as is; else under meshdir (or assetdir), relative to the model.
fn asset_path(ctx: &Ctx<'_, '_>, file: &str) -> PathBuf {
    let f = PathBuf::from(file);
    if f.is_absolute() {
        return f;
    }
    let dir = ctx
        .compiler
        .meshdir
        .clone()
        .or_else(|| ctx.compiler.assetdir.clone())
        .unwrap_or_default();
    ctx.dir.join(dir).join(f)
}

fn mesh<'a, 'i>(ctx: &Ctx<'a, 'i>, el: Node<'a, 'i>) -> Result<MeshAsset, MjcfError> {
    let scale = ctx.merged(el, "mesh", "scale", &[1.0, 1.0, 1.0])?;
    let mode = match ctx.choice(
        el,
        "mesh",
        "inertia",
        &["legacy", "exact", "convex", "shell"],
    )? {
        None | Some("legacy") => MeshInertia::Legacy,
        Some("exact") => MeshInertia::Exact,
        Some("convex") => MeshInertia::Convex,
        Some(_) => {
            return Err(ctx.err(
                el,
                MjcfErrorKind::Unsupported,
                "mesh inertia=\"shell\" is not supported; supported: legacy, exact, convex",
            ))
        }
    };
    let (raw, faces): (Vec<[f32; 3]>, Vec<[u32; 3]>) = match el.attribute("file") {
        Some(file) => {
            if el.has_attribute("vertex") || el.has_attribute("face") {
                return Err(ctx.err(
                    el,
                    MjcfErrorKind::Invalid,
                    "a mesh takes either 'file' or 'vertex'/'face', not both",
                ));
            }
            let path = asset_path(ctx, file);
            let data = crate::mesh_file::load_mesh_file(&path).map_err(|e| {
                let kind = match e.kind {
                    MeshFileErrorKind::Io => MjcfErrorKind::Io,
                    MeshFileErrorKind::Malformed => MjcfErrorKind::Io,
                    MeshFileErrorKind::Unsupported => MjcfErrorKind::Unsupported,
                };
                ctx.err(el, kind, e.to_string())
            })?;
            (data.vertices, data.triangles)
        }
        None => {
            let v = ctx.nums(el, "mesh", "vertex")?.unwrap_or_default();
            let f = ctx.nums(el, "mesh", "face")?.unwrap_or_default();
            if v.len() % 3 != 0 || f.len() % 3 != 0 {
                return Err(ctx.err(
                    el,
                    MjcfErrorKind::Invalid,
                    "'vertex' and 'face' need multiples of 3 numbers",
                ));
            }
            if v.len() / 3 > MAX_MESH_VERTICES || f.len() / 3 > MAX_MESH_FACES {
                return Err(ctx.err(
                    el,
                    MjcfErrorKind::Invalid,
                    format!("a mesh takes at most {MAX_MESH_VERTICES} vertices and {MAX_MESH_FACES} faces"),
                ));
            }
            if let Some(i) = f
                .iter()
                .find(|i| !(i.fract() == 0.0 && **i >= 0.0 && **i <= u32::MAX as f64))
            {
                return Err(ctx.err(
                    el,
                    MjcfErrorKind::Invalid,
                    format!("'face' index {i} is not a vertex index (an integer >= 0)"),
                ));
            }
            let verts = v
                .chunks_exact(3)
                .map(|c| [c[0] as f32, c[1] as f32, c[2] as f32])
                .collect();
            let faces = f
                .chunks_exact(3)
                .map(|c| [c[0] as u32, c[1] as u32, c[2] as u32])
                .collect();
            (verts, faces)
        }
    };
    if raw.len() < 4 {
        return Err(ctx.err(
            el,
            MjcfErrorKind::Invalid,
            format!("a mesh needs at least 4 vertices, got {}", raw.len()),
        ));
    }
    if let Some(f) = faces
        .iter()
        .find(|f| f.iter().any(|&i| i as usize >= raw.len()))
    {
        return Err(ctx.err(
            el,
            MjcfErrorKind::Invalid,
            format!(
                "face {f:?} refers to a missing vertex (there are {})",
                raw.len()
            ),
        ));
    }
    let vertices: Vec<Point3<f64>> = raw
        .iter()
        .map(|v| {
            Point3::new(
                v[0] as f64 * scale[0],
                v[1] as f64 * scale[1],
                v[2] as f64 * scale[2],
            )
        })
        .collect();
    let mass = if faces.is_empty() {
        // MuJoCo makes the faces of a face-less mesh from its convex hull.
        mesh_mass(&vertices, &[], MeshInertia::Convex)
    } else {
        mesh_mass(&vertices, &faces, mode)
    };
    Ok(MeshAsset { vertices, mass })
}

fn hfield<'a, 'i>(ctx: &Ctx<'a, 'i>, el: Node<'a, 'i>) -> Result<HfieldAsset, MjcfError> {
    let Some(size) = ctx.exact::<4>(el, "hfield", "size")? else {
        return Err(ctx.err(
            el,
            MjcfErrorKind::Invalid,
            "an hfield needs 'size' (radius_x radius_y elevation_z base_z)",
        ));
    };
    if size.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
        return Err(ctx.err(
            el,
            MjcfErrorKind::Invalid,
            format!("hfield size {size:?} must be positive"),
        ));
    }
    let nrow = ctx.int(el, "hfield", "nrow")?.unwrap_or(0);
    let ncol = ctx.int(el, "hfield", "ncol")?.unwrap_or(0);
    let (nrow, ncol, data): (usize, usize, Vec<f32>) = if let Some(file) = el.attribute("file") {
        if nrow != 0 || ncol != 0 || el.has_attribute("elevation") {
            return Err(ctx.err(
                el,
                MjcfErrorKind::Invalid,
                "an hfield from a file takes no nrow, ncol or elevation",
            ));
        }
        let path = asset_path(ctx, file);
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("png"))
        {
            return Err(ctx.err(
                el,
                MjcfErrorKind::Unsupported,
                "PNG height fields are not supported; supported: MuJoCo's binary format (int32 nrow, int32 ncol, float32 data) or 'elevation'",
            ));
        }
        let bytes = crate::input_file::read_bytes(&path, MAX_HFIELD_FILE_BYTES)
            .map_err(|e| ctx.err(el, MjcfErrorKind::Io, format!("hfield file {e}")))?;
        let bad = |why: &str| {
            ctx.err(
                el,
                MjcfErrorKind::Invalid,
                format!("hfield file '{}': {why}", path.display()),
            )
        };
        if bytes.len() < 8 {
            return Err(bad("missing header"));
        }
        let r = i32::from_le_bytes(bytes[0..4].try_into().unwrap());
        let c = i32::from_le_bytes(bytes[4..8].try_into().unwrap());
        if r < 1 || c < 1 {
            return Err(bad("non-positive dimensions"));
        }
        let (r, c) = (r as usize, c as usize);
        let n = samples(r, c).map_err(|why| bad(&why))?;
        if bytes.len() != 8 + 4 * n {
            return Err(bad(&format!(
                "unexpected file size: {} bytes, the header's {r}x{c} samples need {}",
                bytes.len(),
                8 + 4 * n
            )));
        }
        let data = bytes[8..]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        (r, c, data)
    } else {
        if nrow < 1 || ncol < 1 {
            return Err(ctx.err(
                el,
                MjcfErrorKind::Invalid,
                "an hfield needs a 'file' or positive 'nrow' and 'ncol'",
            ));
        }
        let (r, c) = (nrow as usize, ncol as usize);
        samples(r, c).map_err(|why| ctx.err(el, MjcfErrorKind::Invalid, why))?;
        let data: Vec<f32> = match ctx.nums(el, "hfield", "elevation")? {
            None => vec![0.0; r * c],
            Some(e) => {
                if e.len() != r * c {
                    return Err(ctx.err(
                        el,
                        MjcfErrorKind::Invalid,
                        format!("elevation has {} numbers, nrow*ncol = {}", e.len(), r * c),
                    ));
                }
                // XML rows are written top to bottom; stored bottom to top.
                let mut flipped = vec![0.0f32; r * c];
                for i in 0..r {
                    for j in 0..c {
                        flipped[(r - 1 - i) * c + j] = e[i * c + j] as f32;
                    }
                }
                flipped
            }
        };
        (r, c, data)
    };
    if nrow_ncol_too_small(nrow, ncol) {
        return Err(ctx.err(
            el,
            MjcfErrorKind::Invalid,
            format!("a height field needs at least 2x2 samples, got {nrow}x{ncol}"),
        ));
    }
    let (mut lo, mut hi) = (1e10f32, -1e10f32);
    for &d in &data {
        lo = lo.min(d);
        hi = hi.max(d);
    }
    let norm: Vec<f32> = data
        .iter()
        .map(|&d| {
            if hi - lo > 1e-14 {
                (d - lo) / (hi - lo)
            } else {
                d - lo
            }
        })
        .collect();
    let heights = DMatrix::from_fn(nrow, ncol, |i, j| size[2] * norm[i * ncol + j] as f64);
    Ok(HfieldAsset { heights, size })
}

/// `r * c` when it is within [`MAX_HFIELD_SAMPLES`] (checked without overflow), else why not.
fn samples(r: usize, c: usize) -> Result<usize, String> {
    match r.checked_mul(c) {
        Some(n) if n <= MAX_HFIELD_SAMPLES => Ok(n),
        _ => Err(format!(
            "{r}x{c} samples exceed the limit of {MAX_HFIELD_SAMPLES} (nrow * ncol)"
        )),
    }
}

fn nrow_ncol_too_small(r: usize, c: usize) -> bool {
    r < 2 || c < 2
}
