//! Closed-form scenes (placeholder while they are written).
/// Registry entries.
pub const ENTRIES: &[crate::SceneEntry] = &[];
