//! Penalty contact (placeholder while it is written).
use crate::formulation::{FormulationEntry};
/// Registry entry.
pub const ENTRY: FormulationEntry = FormulationEntry { name: "penalty", description: "spring-damper contact, semi-implicit Euler", params: &[], build: |_| unimplemented!() };
