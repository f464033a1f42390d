//! Checks on experiment text before it is deserialized: nesting depth ([`check_depth`]) and
//! duplicate keys ([`find_duplicate_key`]). [`crate::config::parse`] runs them in this order.
//! And, for the studies, top-level keys a study does not read ([`unread_top_level_key`]).
//!
//! **Nesting.** libyaml, under `serde_yaml_ng`, takes time quadratic in the nesting depth of
//! flow collections (`[[[[...]]]]`, 100,000 deep: minutes), before any depth limit of the
//! deserializer applies. [`check_depth`] scans the text once, in linear time, and refuses
//! nesting deeper than [`MAX_NESTING`] levels. It counts what opens a level: an indentation
//! deeper than the enclosing block's, a block list marker `- ` or complex-key marker `? ` (several
//! on one line nest), and a flow `[` or `{` that starts a node; quoted scalars, block scalars
//! (`|`, `>`) and comments are skipped. The count is an estimate of YAML's own depth that may
//! be low by a factor of two for compact nested lists, never unbounded.
//!
//! **Duplicate keys.** serde's derived structs reject a duplicate field only at the mapping's
//! first line, and maps that collect every other key (scene and formulation parameters, the
//! sweep) keep the last value silently. [`find_duplicate_key`] walks the whole document through
//! `serde_yaml_ng`'s deserializer with a visitor that fails on the second occurrence of a key
//! in any mapping at any depth; the deserializer reports the position of the key's own event,
//! so the error names the duplicate's line.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// Deepest nesting accepted in an experiment file (levels counted as in the module doc). An
/// experiment needs about 6 (top-level mapping, a list of entries, an entry's mapping, a
/// parameter's list of lists).
pub const MAX_NESTING: usize = 64;

/// A scan position: 1-based line and the depth reached there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooDeep {
    /// 1-based line where the nesting first exceeds [`MAX_NESTING`].
    pub line: usize,
}

/// Refuse nesting deeper than `max` levels (module doc), in time linear in `text`'s length.
///
/// # Errors
/// [`TooDeep`] with the line where the depth first exceeds `max`.
pub fn check_depth(text: &str, max: usize) -> Result<(), TooDeep> {
    let mut flow = 0usize; // open flow collections
    let mut indents: Vec<usize> = Vec::new(); // block nesting: indentation of each open level
    let mut quote: Option<u8> = None; // inside a quoted scalar spanning lines
    let mut block_scalar: Option<usize> = None; // indentation of a `|`/`>` scalar's parent
    for (i, line) in text.lines().enumerate() {
        let b = line.as_bytes();
        let ind = b.iter().take_while(|&&c| c == b' ').count();
        let rest = &b[ind..];
        let blank = rest.is_empty() || rest[0] == b'#';
        if let Some(p) = block_scalar {
            if blank || ind > p {
                continue;
            }
            block_scalar = None;
        }
        let mut j = ind;
        if quote.is_none() && flow == 0 {
            if blank || rest.starts_with(b"---") || rest.starts_with(b"...") || rest[0] == b'%' {
                continue;
            }
            while indents.last().is_some_and(|&c| c >= ind) {
                indents.pop();
            }
            indents.push(ind);
            // Block list and complex-key markers on this line each open a level.
            while j < b.len()
                && (b[j] == b'-' || b[j] == b'?')
                && b.get(j + 1).is_none_or(|&c| c == b' ')
            {
                j += 1;
                while j < b.len() && b[j] == b' ' {
                    j += 1;
                }
                indents.push(j);
            }
            if indents.len() > max {
                return Err(TooDeep { line: i + 1 });
            }
        }
        // Character scan: quotes, flow brackets, comments, block scalar indicators.
        // `node_start`: the next character may begin a node (a quote or bracket there opens).
        let mut node_start = true;
        while j < b.len() {
            let c = b[j];
            if let Some(q) = quote {
                if q == b'"' && c == b'\\' {
                    j += 2;
                    continue;
                }
                if c == q {
                    if q == b'\'' && b.get(j + 1) == Some(&b'\'') {
                        j += 2;
                        continue;
                    }
                    quote = None;
                    node_start = false;
                }
                j += 1;
                continue;
            }
            match c {
                b'#' if j == 0 || b[j - 1] == b' ' || b[j - 1] == b'\t' => break,
                b'"' | b'\'' if node_start => {
                    quote = Some(c);
                    node_start = false;
                }
                b'[' | b'{' if node_start || flow > 0 => {
                    flow += 1;
                    if indents.len() + flow > max {
                        return Err(TooDeep { line: i + 1 });
                    }
                    node_start = true;
                    j += 1;
                    continue;
                }
                b']' | b'}' if flow > 0 => {
                    flow -= 1;
                    node_start = false;
                }
                b' ' | b'\t' => {}
                b',' if flow > 0 => {
                    node_start = true;
                    j += 1;
                    continue;
                }
                b':' if b.get(j + 1).is_none_or(|&n| n == b' ' || n == b'\t') || flow > 0 => {
                    node_start = true;
                    j += 1;
                    continue;
                }
                b'-' | b'?' if node_start && b.get(j + 1).is_none_or(|&n| n == b' ') => {
                    j += 1;
                    continue;
                }
                // Tags and anchors precede a node: what follows still starts it.
                b'!' | b'&' if node_start => {
                    while j < b.len() && b[j] != b' ' && b[j] != b'\t' {
                        j += 1;
                    }
                    continue;
                }
                b'|' | b'>' if node_start && flow == 0 => {
                    block_scalar = Some(ind);
                    break;
                }
                // A plain scalar (or the rest of one) or a quote's start: no node starts here.
                _ => node_start = false,
            }
            j += 1;
        }
    }
    Ok(())
}

/// A key that appears twice in one mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey {
    /// Its key path, e.g. `scenes[0].friction` or `sweep.scene.friction`.
    pub path: String,
    /// The key itself (`friction`, `scene.friction`).
    pub key: String,
    /// 1-based line of the second occurrence.
    pub line: usize,
}

/// The first duplicate key in `text`, or `None`. Text that does not parse as YAML gives `None`
/// here (the typed parse reports it).
pub fn find_duplicate_key(text: &str) -> Option<DuplicateKey> {
    let found = RefCell::new(None);
    let de = serde_yaml_ng::Deserializer::from_str(text);
    let r = Node {
        path: String::new(),
        found: &found,
    }
    .deserialize(de);
    let (path, key) = found.into_inner()?;
    let line = r.err()?.location()?.line();
    Some(DuplicateKey { path, key, line })
}

/// One node of the document being walked, at key path `path`.
struct Node<'f> {
    path: String,
    found: &'f RefCell<Option<(String, String)>>,
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq
            .next_element_seed(Node {
                path: format!("{}[{i}]", self.path),
                found: self.found,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = BTreeSet::new();
        while let Some(key) = map.next_key_seed(Key {
            parent: &self.path,
            seen: &mut seen,
            found: self.found,
        })? {
            map.next_value_seed(Node {
                path: key,
                found: self.found,
            })?;
        }
        Ok(())
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        // A tagged value (`!tag x`): walk its content.
        let (_, v) = data.variant::<de::IgnoredAny>()?;
        de::VariantAccess::newtype_variant_seed(v, self)
    }
}

/// A mapping key: its text, failing on one already seen in the same mapping.
struct Key<'a, 'f> {
    parent: &'a str,
    seen: &'a mut BTreeSet<String>,
    found: &'f RefCell<Option<(String, String)>>,
}

impl<'de> DeserializeSeed<'de> for Key<'_, '_> {
    type Value = String;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_any(self)
    }
}

impl Key<'_, '_> {
    fn key<E: de::Error>(self, k: String) -> Result<String, E> {
        let path = if self.parent.is_empty() {
            k.clone()
        } else {
            format!("{}.{k}", self.parent)
        };
        if !self.seen.insert(k.clone()) {
            *self.found.borrow_mut() = Some((path, k.clone()));
            return Err(E::custom(format!("duplicate key '{k}'")));
        }
        Ok(path)
    }
}

impl<'de> Visitor<'de> for Key<'_, '_> {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        self.key(v.to_string())
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<String, E> {
        self.key(v.to_string())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<String, E> {
        self.key(v.to_string())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<String, E> {
        self.key(v.to_string())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<String, E> {
        self.key(v.to_string())
    }
    fn visit_unit<E: de::Error>(self) -> Result<String, E> {
        self.key("null".into())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<String, A::Error> {
        // A complex key: not an experiment key; walk it and give it a position-free name.
        while seq.next_element::<de::IgnoredAny>()?.is_some() {}
        Ok(format!("{}.<complex key>", self.parent))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<String, A::Error> {
        while map
            .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
            .is_some()
        {}
        Ok(format!("{}.<complex key>", self.parent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_flow_block_and_list_nesting() {
        let ok = "name: x\nscenes:\n  - name: a\n    controls: [[0, 1], [1, 2]]\n    note: 'a [[[ quoted'\n    text: |\n      [[[[[[\n        [[[[[\n";
        assert_eq!(check_depth(ok, 6), Ok(()));
        assert_eq!(check_depth(ok, 4), Err(TooDeep { line: 4 }));
        let flow = format!("a: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(check_depth(&flow, MAX_NESTING), Err(TooDeep { line: 1 }));
        let dashes = format!("{}x\n", "- ".repeat(100_000));
        assert_eq!(check_depth(&dashes, MAX_NESTING), Err(TooDeep { line: 1 }));
        let maps = format!("a: {}1{}\n", "{b: ".repeat(70), "}".repeat(70));
        assert_eq!(check_depth(&maps, MAX_NESTING), Err(TooDeep { line: 1 }));
        let mut block = String::new();
        for d in 0..70 {
            block += &format!("{}k:\n", " ".repeat(d));
        }
        assert_eq!(check_depth(&block, MAX_NESTING), Err(TooDeep { line: 65 }));
        // Brackets inside plain scalars do not open anything.
        assert_eq!(check_depth("a: x[[[[[[\nb: 1\n", 2), Ok(()));
    }

    #[test]
    fn duplicate_keys_are_found_at_their_own_line_at_any_depth() {
        let t = "name: x\nscenes:\n  - name: a\n    friction: 0.3\n    friction: 0.5\n";
        let d = find_duplicate_key(t).unwrap();
        assert_eq!(
            (d.path.as_str(), d.key.as_str(), d.line),
            ("scenes[0].friction", "friction", 5)
        );
        let t = "name: x\nsweep:\n  scene.mu: [0.1]\n  seed: [1]\n  scene.mu: [0.2]\n";
        let d = find_duplicate_key(t).unwrap();
        assert_eq!(
            (d.path.as_str(), d.key.as_str(), d.line),
            ("sweep.scene.mu", "scene.mu", 5)
        );
        let d = find_duplicate_key("name: x\nhorizon: 1\nname: y\n").unwrap();
        assert_eq!((d.path.as_str(), d.line), ("name", 3));
        let d = find_duplicate_key("a: {b: {c: 1, c: 2}}\n").unwrap();
        assert_eq!((d.path.as_str(), d.line), ("a.b.c", 1));
        assert_eq!(find_duplicate_key("a: 1\nb: {a: 1}\n"), None);
    }
}

/// The first top-level key of `text` among `keys` (name, what to use instead) that a study of
/// kind `study` does not read, as a [`crate::config::ConfigError`] naming `file` and the key's
/// line: given, it would silently do nothing. (A text scan of lines starting `key:`.)
pub fn unread_top_level_key(
    file: &std::path::Path,
    text: &str,
    keys: &[(&str, &str)],
    study: &str,
) -> Result<(), crate::config::ConfigError> {
    for (key, why) in keys {
        let prefix = format!("{key}:");
        if let Some(line) = text.lines().position(|l| l.starts_with(&prefix)) {
            return Err(crate::config::ConfigError {
                file: file.to_path_buf(),
                line: Some(line + 1),
                key: (*key).to_string(),
                message: format!("has no effect in a {study} study: {why}"),
            });
        }
    }
    Ok(())
}
