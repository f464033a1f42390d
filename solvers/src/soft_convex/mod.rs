//! `soft_convex`: MuJoCo's soft convex contact model (spec `soft_convex_and_signorini.md` §A).
//!
//! Work in progress: the pieces below are complete and tested on their own; the formulation
//! itself is not yet registered.

pub mod cost;
pub mod impedance;
pub mod linesearch;
