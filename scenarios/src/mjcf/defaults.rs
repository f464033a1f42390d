//! `<default>` classes: nested classes, resolved as MuJoCo does (XML reference, "default"):
//! an element uses the class named by its `class` attribute, else the `childclass` of its
//! nearest enclosing body, else `main` (the top-level `<default>`). An attribute not given on
//! the element comes from that class, or from the nearest ancestor class that sets it. Array
//! attributes given with fewer numbers than their full length keep the remaining numbers from
//! the class (MuJoCo reads them into the class's copy).

use std::collections::HashMap;

use roxmltree::Node;

use super::error::{MjcfError, MjcfErrorKind};
use super::{schema, Ctx};

/// One default class: its parent and, per element tag, the `<tag>` element that sets defaults.
#[derive(Debug)]
pub(crate) struct Class<'a, 'i> {
    pub parent: Option<usize>,
    pub elems: HashMap<&'a str, Node<'a, 'i>>,
}

/// All default classes; index 0 is `main`.
#[derive(Debug, Default)]
pub(crate) struct Defaults<'a, 'i> {
    pub classes: Vec<Class<'a, 'i>>,
    pub by_name: HashMap<String, usize>,
}

impl<'a, 'i> Defaults<'a, 'i> {
    /// Only `main`, empty.
    pub fn empty() -> Self {
        let mut d = Defaults::default();
        d.classes.push(Class {
            parent: None,
            elems: HashMap::new(),
        });
        d.by_name.insert("main".into(), 0);
        d
    }

    /// Read the top-level `<default>` elements of `root` (at most one) and their nested classes.
    pub fn parse(ctx: &Ctx<'a, 'i>, root: Node<'a, 'i>) -> Result<Self, MjcfError> {
        let mut d = Defaults::empty();
        let tops: Vec<_> = root
            .children()
            .filter(|n| n.has_tag_name("default"))
            .collect();
        if tops.len() > 1 {
            return Err(ctx.err(
                tops[1],
                MjcfErrorKind::Invalid,
                "only one top-level <default> is allowed; nest classes inside it",
            ));
        }
        if let Some(top) = tops.first() {
            ctx.check_attrs(*top, &schema::DEFAULT)?;
            if let Some(c) = top.attribute("class") {
                if c != "main" {
                    return Err(ctx.err(
                        *top,
                        MjcfErrorKind::Invalid,
                        format!("the top-level default class must be 'main', not '{c}'"),
                    ));
                }
            }
            d.fill(ctx, *top, 0)?;
        }
        Ok(d)
    }

    fn fill(&mut self, ctx: &Ctx<'a, 'i>, node: Node<'a, 'i>, idx: usize) -> Result<(), MjcfError> {
        for child in node.children().filter(Node::is_element) {
            let tag = child.tag_name().name();
            if tag == "default" {
                ctx.check_attrs(child, &schema::DEFAULT)?;
                let Some(name) = child.attribute("class") else {
                    return Err(ctx.err(
                        child,
                        MjcfErrorKind::Invalid,
                        "a nested <default> needs a 'class' attribute",
                    ));
                };
                if self.by_name.contains_key(name) {
                    return Err(ctx.err(
                        child,
                        MjcfErrorKind::Invalid,
                        format!("default class '{name}' is defined twice"),
                    ));
                }
                let k = self.classes.len();
                self.classes.push(Class {
                    parent: Some(idx),
                    elems: HashMap::new(),
                });
                self.by_name.insert(name.to_string(), k);
                self.fill(ctx, child, k)?;
                continue;
            }
            if schema::SKIPPED_ELEMENTS.contains(&tag) {
                continue;
            }
            let spec = match tag {
                "joint" => &schema::JOINT,
                "geom" => &schema::GEOM,
                "mesh" => &schema::MESH,
                "motor" => &schema::MOTOR,
                "position" => &schema::POSITION,
                "velocity" => &schema::VELOCITY,
                "equality" => &schema::EQ_DEFAULT,
                "pair" => &schema::PAIR,
                _ => {
                    return Err(ctx.unsupported_element(child, schema::DEFAULT_CHILDREN));
                }
            };
            ctx.check_attrs(child, spec)?;
            for bad in ["name", "class"] {
                if child.has_attribute(bad) {
                    return Err(ctx.err(
                        child,
                        MjcfErrorKind::Invalid,
                        format!("attribute '{bad}' is not allowed in a default"),
                    ));
                }
            }
            if self.classes[idx].elems.insert(tag, child).is_some() {
                return Err(ctx.err(
                    child,
                    MjcfErrorKind::Invalid,
                    format!("<{tag}> appears twice in the same default class"),
                ));
            }
        }
        Ok(())
    }

    /// The default elements setting `attr` for `tag`, from the root class down to `class`.
    pub fn chain(&self, class: usize, tag: &str, attr: &str) -> Vec<Node<'a, 'i>> {
        let mut out = Vec::new();
        let mut c = Some(class);
        while let Some(k) = c {
            if let Some(n) = self.classes[k].elems.get(tag) {
                if n.has_attribute(attr) {
                    out.push(*n);
                }
            }
            c = self.classes[k].parent;
        }
        out.reverse();
        out
    }
}
