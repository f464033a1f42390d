//! # contactlab-harness
//!
//! The experiment side of contactlab: experiment files ([`config`]), their expansion into cells
//! ([`sweep`]), the names an experiment may use ([`catalog`]), parallel, resumable execution
//! ([`runner`]), the measurements ([`metrics`]), per-step trajectories ([`trajectory`]), results
//! files ([`results`]), figures ([`figures`]) and the report ([`report`]); the gradient study
//! ([`study_gradient`]), the control-synthesis study ([`study_control`]) and the throughput
//! study ([`study_throughput`]) run on the same machinery; an experiment can run as shards
//! ([`shard`]) merged afterwards ([`merge`]), on a SLURM cluster as a job array ([`slurm`]). The
//! binary `contactlab` drives them.

#![warn(missing_docs)]

pub mod catalog;
pub mod config;
pub mod figures;
pub mod heap;
pub mod inputs;
pub mod merge;
pub mod metrics;
pub mod report;
pub mod results;
pub mod runner;
pub mod shard;
pub mod slurm;
pub mod study_control;
pub mod study_gradient;
pub mod study_throughput;
pub mod sweep;
pub mod testkit;
pub mod trajectory;
pub mod usability;
pub mod yaml_checks;
