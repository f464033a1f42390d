//! A compiled model: the per-model constants an engine needs, computed once from a validated
//! [`Model`] and annotated with their shapes and units, MuJoCo's `mjModel` style (DESIGN.md,
//! "The engine seam"). The batched engine reads its collision pairs and materials here instead
//! of rediscovering them every step.

use std::sync::Arc;

use crate::collision::broad_phase::filtered_pairs;
use crate::collision::height_field_table::FieldTable;
use crate::collision::{mix_materials, MixedMaterial};
use crate::model::Model;

/// One geom pair that may collide, in [`crate::collision::detect`]'s order.
#[derive(Debug, Clone, PartialEq)]
pub struct CompiledPair {
    /// The geoms in MuJoCo's order (lower shape type first).
    pub geoms: [usize; 2],
    /// Their bodies.
    pub bodies: [usize; 2],
    /// The mixed material ([`mix_materials`]).
    pub material: MixedMaterial,
}

/// Per-model constants, shape-annotated.
#[derive(Debug, Clone, PartialEq)]
pub struct CompiledModel {
    /// Generalized positions per world.
    pub nq: usize,
    /// Degrees of freedom per world.
    pub nv: usize,
    /// Actuators (controls per world).
    pub nu: usize,
    /// `(nbody)` kg: body masses (world: 0).
    pub body_mass: Vec<f64>,
    /// `(npair)`: the pairs that pass the contype/conaffinity, body and plane–plane filters.
    pub pairs: Vec<CompiledPair>,
    /// `(ngeom)`: each height field geom's triangle tables ([`FieldTable`]), `None` for the
    /// other geoms. Shared by reference count between clones.
    pub height_fields: Vec<Option<Arc<FieldTable>>>,
}

impl CompiledModel {
    /// Compile `model` (already validated by [`Model::new`]).
    pub fn new(model: &Model) -> Self {
        let pairs = filtered_pairs(model)
            .into_iter()
            .map(|(g0, g1)| CompiledPair {
                geoms: [g0, g1],
                bodies: [model.geoms[g0].body, model.geoms[g1].body],
                material: mix_materials(&model.geoms[g0].material, &model.geoms[g1].material),
            })
            .collect();
        Self {
            nq: model.nq,
            nv: model.nv,
            nu: model.actuators.len(),
            body_mass: model.bodies.iter().map(|b| b.mass).collect(),
            pairs,
            height_fields: (0..model.geoms.len())
                .map(|g| FieldTable::new(model, g).map(Arc::new))
                .collect(),
        }
    }
}
