//! MJCF (MuJoCo XML) loader: an MJCF file to a validated [`Model`] and an initial [`State`].
//!
//! Semantics follow MuJoCo's XML reference (`doc/XMLreference.rst`) and compiler
//! (`src/user/user_objects.cc`, `user_mesh.cc`, `src/xml/xml_native_reader.cc`), so that the
//! model quantities equal those MuJoCo compiles (checked against MuJoCo 4.0.1 in
//! `tests/mjcf_reference.rs`).
//!
//! # Supported
//! * `<mujoco model>`; `<compiler angle eulerseq inertiafromgeom autolimits meshdir assetdir>`;
//!   `<option timestep gravity integrator cone impratio solver iterations tolerance
//!   ls_iterations ls_tolerance noslip_iterations noslip_tolerance>` (the no-slip post-solver
//!   is soft_convex's; the other formulations list it as ignored) and `<flag warmstart refsafe contact gravity
//!   limit equality frictionloss island>` ([`contactlab_solvers::model::DisableFlags`]).
//! * `<default>` classes, nested, with `class` and `childclass` ([`defaults`]).
//! * `<worldbody>`, `<body name pos quat euler axisangle xyaxes zaxis childclass>`,
//!   `<inertial>` (`diaginertia` or `fullinertia`), `<joint>` (free, ball, hinge, slide),
//!   `<freejoint>`, `<geom>` of types plane, hfield, sphere, capsule, ellipsoid, cylinder, box
//!   and mesh, with `fromto`, `mass`/`density` and all contact attributes.
//! * `<asset>`: `<mesh file|vertex/face scale inertia>` (STL, OBJ) and `<hfield file|elevation>`.
//! * `<actuator>`: `<motor>`, `<position>`, `<velocity>` on joints.
//! * `<equality>`: `<connect>`, `<weld>` (with `anchor`, `relpose`, `torquescale`), `<joint>`; `<contact>`: `<pair>`, `<exclude>`.
//! * `<keyframe><key name time qpos qvel ctrl>`: the initial state and controls, chosen by name
//!   (the `mjcf` scene holds `ctrl` as constant controls, [`MjcfParams`]); the `mjcf` scene's
//!   control schedules (CSV or a list in the experiment) are in [`schedule`].
//!
//! Body inertia inferred from geoms follows MuJoCo exactly ([`inertia`]).
//!
//! # Limits
//! File size, element nesting depth, mesh vertex and face counts and height-field sizes are
//! bounded ([`crate::limits`]); every number in an attribute must be finite.
//!
//! # Not supported (an error naming the element or attribute, its line and the alternatives)
//! Tendons, sites as constraint anchors, `<frame>`, `<include>`, composites, flexes, plugins,
//! `<general>` and other actuators, mocap bodies, fluid forces, any attribute that changes
//! physics and is not listed above (unless it holds MuJoCo's default value, see [`schema`]).
//! Visual and informational elements and attributes (`site`, `camera`, `light`, `material`,
//! `texture`, `visual`, `sensor`, `rgba`, `group`, ...) are accepted and skipped.
//!
//! # Differences in representation (not in physics)
//! * Mesh geoms keep the mesh's own vertex frame (MuJoCo recentres a mesh at its centre of
//!   mass and principal axes and moves the geom frame by the inverse); the collision shape is
//!   the convex hull of the vertices ([`GeomShape::ConvexMesh`]), as MuJoCo collides meshes.
//! * Unnamed bodies, joints, geoms and actuators get generated unique names.
//! * A height field's `base` depth (size\[3\]) has no counterpart in [`GeomShape::HeightField`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[allow(unused_imports)]
use contactlab_solvers::geometry::GeomShape;
use contactlab_solvers::{Model, State};
use roxmltree::{Document, Node};

mod assets;
mod bodies;
pub mod defaults;
mod elements;
mod error;
mod frames;
pub mod inertia;
mod scene;
pub mod schedule;
pub mod schema;

pub use error::{MjcfError, MjcfErrorKind};
pub use scene::{MjcfParams, MJCF};

/// A loaded MJCF file: the model and the initial state.
#[derive(Debug, Clone)]
pub struct MjcfModel {
    /// The validated model.
    pub model: Model,
    /// Initial state: the chosen keyframe's `qpos`, `qvel`, `time`, or `qpos0` at rest.
    pub initial: State,
    /// Controls of the chosen keyframe (one per actuator; zeros without a key).
    pub ctrl: Vec<f64>,
    /// Names of the keyframes in the file, in order (unnamed ones as `key{i}`).
    pub keys: Vec<String>,
    /// Every file the loader read, as opened: the model file ([`load_file`] only), then the
    /// mesh and height-field asset files in document order. Content hashes of these make up
    /// the harness's cell identity (`contactlab_scenarios::Scene::inputs`).
    pub files: Vec<PathBuf>,
}

/// The XML element a model validation error names (by tag and `name` attribute), so that the
/// error carries its line; the root when the element cannot be found (e.g. an unnamed one).
fn offending_node<'a, 'i>(root: Node<'a, 'i>, e: &contactlab_solvers::ModelError) -> Node<'a, 'i> {
    use contactlab_solvers::ModelError as E;
    let (tags, name): (&[&str], String) = match e {
        E::BadMass { body, .. } | E::BadInertia { body, .. } | E::BadParent { body, .. } => {
            (&["body"], body.clone())
        }
        E::ZeroAxis { joint, .. } | E::BadRange { joint, .. } | E::BadFreeJoint { joint } => {
            (&["joint", "freejoint"], joint.clone())
        }
        E::BadSize { geom, .. } | E::BadMesh { geom, .. } => (&["geom"], geom.clone()),
        E::BadParameter { element, .. } | E::BadIndex { element, .. } => {
            if element == "option" {
                return root
                    .descendants()
                    .find(|n| n.has_tag_name("option"))
                    .unwrap_or(root);
            }
            match element.split_once(" '") {
                Some((kind, rest)) => {
                    let tags: &[&str] = match kind {
                        "geom" => &["geom"],
                        "body" => &["body"],
                        "joint" => &["joint", "freejoint"],
                        "actuator" => &["motor", "position", "velocity"],
                        "equality" => &["connect", "weld", "joint"],
                        _ => &[],
                    };
                    (tags, rest.trim_end_matches('\'').to_string())
                }
                None => (&[], String::new()),
            }
        }
        E::DuplicateName { kind, name } => match *kind {
            "body" => (&["body"], name.clone()),
            "joint" => (&["joint", "freejoint"], name.clone()),
            "geom" => (&["geom"], name.clone()),
            _ => (&[], String::new()),
        },
    };
    root.descendants()
        .find(|n| {
            n.is_element()
                && tags.contains(&n.tag_name().name())
                && n.attribute("name") == Some(name.as_str())
        })
        .unwrap_or(root)
}

/// Load the MJCF file at `path`; `key` names the keyframe giving the initial state (`None`:
/// `qpos0` at rest, as MuJoCo's `mj_resetData`). Relative asset paths resolve against the
/// file's directory (and `compiler meshdir`/`assetdir`).
///
/// # Errors
/// [`MjcfError`] naming the file, line, element and problem.
pub fn load_file(path: impl AsRef<Path>, key: Option<&str>) -> Result<MjcfModel, MjcfError> {
    let path = path.as_ref();
    let text = crate::input_file::read_text(path, crate::limits::MAX_MJCF_BYTES).map_err(|e| {
        MjcfError {
            kind: MjcfErrorKind::Io,
            file: path.to_path_buf(),
            line: 0,
            column: 0,
            element: "mujoco".into(),
            message: format!("cannot read the file: {}", e.message),
        }
    })?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut loaded = load_str(&text, path, &dir, key)?;
    loaded.files.insert(0, path.to_path_buf());
    Ok(loaded)
}

/// Load MJCF from `text`; `file` names it in errors and `dir` is where relative asset paths
/// resolve.
///
/// # Errors
/// [`MjcfError`] naming the file, line, element and problem.
pub fn load_str(
    text: &str,
    file: &Path,
    dir: &Path,
    key: Option<&str>,
) -> Result<MjcfModel, MjcfError> {
    let doc = Document::parse(text).map_err(|e| {
        let pos = e.pos();
        MjcfError {
            kind: MjcfErrorKind::Xml,
            file: file.to_path_buf(),
            line: pos.row,
            column: pos.col,
            element: "mujoco".into(),
            message: format!("malformed XML: {e}"),
        }
    })?;
    let mut ctx = Ctx {
        file: file.to_path_buf(),
        dir: dir.to_path_buf(),
        doc: &doc,
        compiler: elements::Compiler::default(),
        defaults: defaults::Defaults::empty(),
    };
    let root = doc.root_element();
    ctx.check_depth(root)?;
    if root.tag_name().name() != "mujoco" {
        return Err(ctx.err(
            root,
            MjcfErrorKind::Invalid,
            format!(
                "the root element must be <mujoco>, not <{}>",
                root.tag_name().name()
            ),
        ));
    }
    ctx.check_attrs(root, &schema::MUJOCO)?;
    for child in root.children().filter(Node::is_element) {
        let tag = child.tag_name().name();
        if !schema::TOP_LEVEL.contains(&tag) && !schema::SKIPPED_ELEMENTS.contains(&tag) {
            return Err(ctx.unsupported_element(child, schema::TOP_LEVEL));
        }
    }
    for c in root.children().filter(|n| n.has_tag_name("compiler")) {
        let mut compiler = ctx.compiler.clone();
        compiler.read(&ctx, c)?;
        ctx.compiler = compiler;
    }
    ctx.defaults = defaults::Defaults::parse(&ctx, root)?;
    let options = elements::options(&ctx, root)?;
    let assets = assets::Assets::parse(&ctx, root)?;
    let mut built = bodies::build(&ctx, root, &assets)?;
    let mut parts = contactlab_solvers::ModelParts {
        name: root
            .attribute("model")
            .unwrap_or("MuJoCo Model")
            .to_string(),
        options,
        ..Default::default()
    };
    parts.actuators = elements::actuators(&ctx, root, &built)?;
    let (eqs, soft, eq_nodes) = elements::equalities(&ctx, root, &built)?;
    parts.equalities = eqs;
    parts.equality_soft = soft;
    let (pairs, excludes) = elements::contacts(&ctx, root, &built)?;
    parts.pairs = pairs;
    parts.excludes = excludes;
    parts.bodies = std::mem::take(&mut built.bodies);
    parts.joints = std::mem::take(&mut built.joints);
    parts.geoms = std::mem::take(&mut built.geoms);
    let mut model = Model::new(parts).map_err(|e| {
        ctx.err(
            offending_node(root, &e),
            MjcfErrorKind::Model,
            e.to_string(),
        )
    })?;
    elements::resolve_welds(&ctx, &mut model, &eq_nodes)?;
    let (initial, ctrl, keys) = elements::keyframe(&ctx, root, &model, key)?;
    Ok(MjcfModel {
        model,
        initial,
        ctrl,
        keys,
        files: assets.files,
    })
}

/// Loader context: the file, the parsed document, compiler settings and default classes.
pub(crate) struct Ctx<'a, 'i> {
    pub file: PathBuf,
    pub dir: PathBuf,
    pub doc: &'a Document<'i>,
    pub compiler: elements::Compiler,
    pub defaults: defaults::Defaults<'a, 'i>,
}

type N<'a, 'i> = Node<'a, 'i>;

impl<'a, 'i> Ctx<'a, 'i> {
    /// An error at `node`.
    pub fn err(
        &self,
        node: N<'a, 'i>,
        kind: MjcfErrorKind,
        message: impl Into<String>,
    ) -> MjcfError {
        let pos = self.doc.text_pos_at(node.range().start);
        MjcfError {
            kind,
            file: self.file.clone(),
            line: pos.row,
            column: pos.col,
            element: node.tag_name().name().to_string(),
            message: message.into(),
        }
    }

    /// An "unsupported element" error listing what is supported at this place.
    pub fn unsupported_element(&self, node: N<'a, 'i>, supported: &[&str]) -> MjcfError {
        self.err(
            node,
            MjcfErrorKind::Unsupported,
            format!(
                "element <{}> is not supported here; supported: <{}> (visual-only elements skipped: {})",
                node.tag_name().name(),
                supported.join(">, <"),
                schema::SKIPPED_ELEMENTS.join(", ")
            ),
        )
    }

    /// Check every attribute of `node` against `spec` (see [`schema`]).
    pub fn check_attrs(&self, node: N<'a, 'i>, spec: &schema::Spec) -> Result<(), MjcfError> {
        for a in node.attributes() {
            let name = a.name();
            if spec.supported.contains(&name) || spec.ignored.contains(&name) {
                continue;
            }
            if let Some((_, def)) = spec.defaulted.iter().find(|(n, _)| *n == name) {
                if same_value(a.value(), def) {
                    continue;
                }
                return Err(self.err(
                    node,
                    MjcfErrorKind::Unsupported,
                    format!(
                        "attribute {name}=\"{}\" is not supported (only MuJoCo's default \"{def}\" is accepted); supported attributes: {}",
                        a.value(),
                        spec.supported.join(", ")
                    ),
                ));
            }
            return Err(self.err(
                node,
                MjcfErrorKind::Unsupported,
                format!(
                    "attribute '{name}' is not supported on <{}>; supported attributes: {}",
                    spec.tag,
                    spec.supported.join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// The default class of `node`: its `class`, else the nearest ancestor's `childclass`, else
    /// `main`.
    pub fn class_of(&self, node: N<'a, 'i>) -> Result<usize, MjcfError> {
        let lookup = |name: &str| {
            self.defaults.by_name.get(name).copied().ok_or_else(|| {
                self.err(
                    node,
                    MjcfErrorKind::Invalid,
                    format!("unknown default class '{name}'"),
                )
            })
        };
        if let Some(c) = node.attribute("class") {
            return lookup(c);
        }
        for anc in node.ancestors().filter(Node::is_element) {
            if let Some(c) = anc.attribute("childclass") {
                return lookup(c);
            }
        }
        Ok(0)
    }

    /// The raw value of `attr` for `node` (its own, else from its default class for `tag`),
    /// with the node it came from.
    pub fn raw(
        &self,
        node: N<'a, 'i>,
        tag: &str,
        attr: &str,
    ) -> Result<Option<(&'a str, N<'a, 'i>)>, MjcfError> {
        if let Some(v) = node.attribute(attr) {
            return Ok(Some((v, node)));
        }
        let class = self.class_of(node)?;
        Ok(self
            .defaults
            .chain(class, tag, attr)
            .last()
            .and_then(|n| n.attribute(attr).map(|v| (v, *n))))
    }

    /// `attr` as a string.
    pub fn str(
        &self,
        node: N<'a, 'i>,
        tag: &str,
        attr: &str,
    ) -> Result<Option<&'a str>, MjcfError> {
        Ok(self.raw(node, tag, attr)?.map(|(v, _)| v))
    }

    /// `attr` as a list of numbers (any length).
    pub fn nums(
        &self,
        node: N<'a, 'i>,
        tag: &str,
        attr: &str,
    ) -> Result<Option<Vec<f64>>, MjcfError> {
        match self.raw(node, tag, attr)? {
            None => Ok(None),
            Some((v, src)) => self.parse_nums(src, attr, v).map(Some),
        }
    }

    /// `attr` as exactly `n` numbers.
    pub fn exact<const K: usize>(
        &self,
        node: N<'a, 'i>,
        tag: &str,
        attr: &str,
    ) -> Result<Option<[f64; K]>, MjcfError> {
        match self.raw(node, tag, attr)? {
            None => Ok(None),
            Some((v, src)) => {
                let x = self.parse_nums(src, attr, v)?;
                <[f64; K]>::try_from(x.as_slice()).map(Some).map_err(|_| {
                    self.err(
                        src,
                        MjcfErrorKind::Invalid,
                        format!(
                            "attribute '{attr}' needs {K} numbers, got {} (\"{v}\")",
                            x.len()
                        ),
                    )
                })
            }
        }
    }

    /// `attr` as one number.
    pub fn f64(&self, node: N<'a, 'i>, tag: &str, attr: &str) -> Result<Option<f64>, MjcfError> {
        Ok(self.exact::<1>(node, tag, attr)?.map(|[x]| x))
    }

    /// `attr` as a non-negative integer.
    pub fn int(&self, node: N<'a, 'i>, tag: &str, attr: &str) -> Result<Option<i64>, MjcfError> {
        match self.raw(node, tag, attr)? {
            None => Ok(None),
            Some((v, src)) => v.trim().parse::<i64>().map(Some).map_err(|_| {
                self.err(
                    src,
                    MjcfErrorKind::Invalid,
                    format!("attribute '{attr}' must be an integer, got \"{v}\""),
                )
            }),
        }
    }

    /// `attr` as `true`/`false`.
    pub fn bool(&self, node: N<'a, 'i>, tag: &str, attr: &str) -> Result<Option<bool>, MjcfError> {
        match self.raw(node, tag, attr)? {
            None => Ok(None),
            Some((v, src)) => match v.trim() {
                "true" => Ok(Some(true)),
                "false" => Ok(Some(false)),
                _ => Err(self.err(
                    src,
                    MjcfErrorKind::Invalid,
                    format!("attribute '{attr}' must be true or false, got \"{v}\""),
                )),
            },
        }
    }

    /// `attr` as one of `choices` (case-sensitive as in MuJoCo, except where the caller lowercases).
    pub fn choice(
        &self,
        node: N<'a, 'i>,
        tag: &str,
        attr: &str,
        choices: &[&str],
    ) -> Result<Option<&'a str>, MjcfError> {
        match self.raw(node, tag, attr)? {
            None => Ok(None),
            Some((v, src)) => {
                if choices.contains(&v) {
                    Ok(Some(v))
                } else {
                    Err(self.err(
                        src,
                        MjcfErrorKind::Invalid,
                        format!(
                            "attribute {attr}=\"{v}\" is invalid; valid values: {}",
                            choices.join(", ")
                        ),
                    ))
                }
            }
        }
    }

    /// An array attribute of full length `base.len()`, starting from `base` (MuJoCo's default),
    /// each default class from the root down and then the element overriding a prefix.
    pub fn merged(
        &self,
        node: N<'a, 'i>,
        tag: &str,
        attr: &str,
        base: &[f64],
    ) -> Result<Vec<f64>, MjcfError> {
        let mut out = base.to_vec();
        let class = self.class_of(node)?;
        let mut sources = self.defaults.chain(class, tag, attr);
        if node.has_attribute(attr) {
            sources.push(node);
        }
        for src in sources {
            let v = src.attribute(attr).unwrap_or_default();
            let x = self.parse_nums(src, attr, v)?;
            if x.len() > base.len() {
                return Err(self.err(
                    src,
                    MjcfErrorKind::Invalid,
                    format!(
                        "attribute '{attr}' takes at most {} numbers, got {}",
                        base.len(),
                        x.len()
                    ),
                ));
            }
            out[..x.len()].copy_from_slice(&x);
        }
        Ok(out)
    }

    /// Parse a whitespace-separated list of finite numbers (NaN and ±inf are errors, so no
    /// non-finite size, vertex or elevation reaches the model or parry).
    pub fn parse_nums(&self, src: N<'a, 'i>, attr: &str, v: &str) -> Result<Vec<f64>, MjcfError> {
        v.split_whitespace()
            .map(|t| match t.parse::<f64>() {
                Ok(x) if x.is_finite() => Ok(x),
                Ok(_) => Err(self.err(
                    src,
                    MjcfErrorKind::Invalid,
                    format!("attribute '{attr}': '{t}' is not a finite number"),
                )),
                Err(_) => Err(self.err(
                    src,
                    MjcfErrorKind::Invalid,
                    format!("attribute '{attr}': '{t}' is not a number"),
                )),
            })
            .collect()
    }

    /// Refuse element nesting deeper than [`crate::limits::MAX_XML_DEPTH`] (the root is depth
    /// 1), naming the first element past the limit; walks the tree without recursion, so the
    /// recursive walks of `<body>` and `<default>` that follow stay within the limit.
    pub fn check_depth(&self, root: N<'a, 'i>) -> Result<(), MjcfError> {
        let max = crate::limits::MAX_XML_DEPTH;
        let mut stack = vec![(root, 1usize)];
        while let Some((node, depth)) = stack.pop() {
            if depth > max {
                return Err(self.err(
                    node,
                    MjcfErrorKind::Invalid,
                    format!("elements are nested deeper than the limit of {max} levels"),
                ));
            }
            stack.extend(
                node.children()
                    .rev()
                    .filter(Node::is_element)
                    .map(|c| (c, depth + 1)),
            );
        }
        Ok(())
    }

    /// Degrees to radians when `compiler angle="degree"` (MuJoCo's default).
    pub fn angle(&self, a: f64) -> f64 {
        if self.compiler.degree {
            a * std::f64::consts::PI / 180.0
        } else {
            a
        }
    }
}

/// Whether two attribute values are the same (numerically when both are number lists).
fn same_value(a: &str, b: &str) -> bool {
    let pa: Option<Vec<f64>> = a.split_whitespace().map(|t| t.parse().ok()).collect();
    let pb: Option<Vec<f64>> = b.split_whitespace().map(|t| t.parse().ok()).collect();
    match (pa, pb) {
        (Some(x), Some(y)) => x == y,
        _ => a.trim() == b.trim(),
    }
}

/// Make `name` unique among `taken` by appending `_1`, `_2`, ...
pub(crate) fn unique_name(
    taken: &mut HashMap<String, usize>,
    name: String,
    index: usize,
) -> String {
    let mut n = name.clone();
    let mut k = 1;
    while taken.contains_key(&n) {
        n = format!("{name}_{k}");
        k += 1;
    }
    taken.insert(n.clone(), index);
    n
}
