//! # contactlab-solvers
//!
//! The physics of contactlab: a rigid-body model in generalized coordinates with MuJoCo's
//! conventions ([`model`]), forward kinematics and Jacobians ([`kinematics`]), the equations of
//! motion ([`dynamics`]), collision detection through parry3d-f64 ([`collision`]), the
//! constraint rows shared by formulations ([`constraint`]), and the interchangeable contact
//! formulations behind one trait ([`formulation`]), and the engines that step many worlds of
//! one model ([`engine`]; the batched burn engine in `batched`, behind the `burn` feature).
//!
//! Nothing here knows about files, YAML or plots (see DESIGN.md, "Layout").

#![deny(missing_docs)]

pub mod actuation;
#[cfg(feature = "burn")]
pub mod batched;
pub mod collision;
pub mod compiled;
pub mod constraint;
pub mod dynamics;
pub mod engine;
pub mod features;
pub mod formulation;
pub mod geometry;
pub mod implicit;
pub mod kinematics;
pub mod model;
pub mod ncp_fb;
pub mod penalty;
pub mod signorini;
pub mod soft_convex;

pub use formulation::{ContactRecord, Formulation, IgnoredFeature, StepReport, FORMULATIONS};
pub use model::{Model, ModelError, ModelParts, State};
