//! [`MjcfError`]: every loader failure names the file, the line and column (roxmltree's text
//! position of the offending element), the element and what is wrong.

use std::fmt;
use std::path::PathBuf;

/// What kind of failure an [`MjcfError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MjcfErrorKind {
    /// The file could not be read (I/O), or a referenced asset file is missing or unreadable.
    Io,
    /// The XML is not well formed.
    Xml,
    /// An element or attribute that changes physics and that this loader does not support
    /// (the message lists the supported alternatives).
    Unsupported,
    /// A supported element or attribute has a bad value (unknown geom type, a `size` with too
    /// few numbers, a reference to a missing body, ...).
    Invalid,
    /// The assembled model failed [`contactlab_solvers::Model::new`]'s validation.
    Model,
}

/// An error loading an MJCF file.
#[derive(Debug, Clone, PartialEq)]
pub struct MjcfError {
    /// What kind of failure.
    pub kind: MjcfErrorKind,
    /// The MJCF file (or the asset file for asset read errors' context, the MJCF is still named
    /// in `message`).
    pub file: PathBuf,
    /// 1-based line of the element in `file` (0 when no element applies, e.g. unreadable file).
    pub line: u32,
    /// 1-based column of the element's start.
    pub column: u32,
    /// The element's tag (e.g. `geom`), or `mujoco` for file-level problems.
    pub element: String,
    /// What is wrong, with the attribute name and supported alternatives where relevant.
    pub message: String,
}

impl fmt::Display for MjcfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: <{}>: {}",
            self.file.display(),
            self.line,
            self.column,
            self.element,
            self.message
        )
    }
}

impl std::error::Error for MjcfError {}
