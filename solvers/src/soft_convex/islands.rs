//! Constraint islands (MuJoCo's `mj_island`, `engine_island.c`; spec
//! `soft_convex_and_signorini.md` §A5 "Islands"): the kinematic trees (the subtrees hanging from
//! the world) coupled by the step's constraint rows, each set solved as its own problem on its
//! own dofs and rows.
//!
//! Why it matters: the solver stops on tests scaled by the island's inertia
//! (`1/Σ M_ii` over its dofs) and counts iterations per island, so solving two islands as one
//! problem changes where Newton stops. Both answers are within the solver's tolerance of the
//! exact minimizer, but they are not the same answer: on four bodies with torsional and rolling
//! friction (`scenarios/tests/reference/general/condim_pyramidal_euler.xml`) one merged problem
//! left MuJoCo 4.0.1's trajectory by 1.2e-6 m/s at one step, per-island solves agree with it to
//! 1e-13. MuJoCo solves islands separately by default since 3.3.6 (`<flag island="disable"/>`
//! merges them, [`crate::model::DisableFlags::island`]).
//!
//! A tree joins an island through any row with a nonzero Jacobian entry on one of its dofs; a
//! row touching two trees (a contact between two free bodies, an equality) joins their islands.
//! Islands are listed by their smallest dof; each holds its dofs and rows in increasing order, so
//! a contact's rows stay contiguous and in order. Dofs in no island keep the unconstrained
//! acceleration (MuJoCo: `qacc_smooth`).

use nalgebra::DMatrix;

use crate::model::Model;

/// One island: its dofs and its rows (indices into the step's dofs and rows, increasing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Island {
    /// Dof indices.
    pub dofs: Vec<usize>,
    /// Row indices.
    pub rows: Vec<usize>,
}

/// The kinematic tree of every dof: the index of the body just below the world on the path from
/// the dof's body (MuJoCo's `dof_treeid`, as a body index).
pub fn dof_trees(model: &Model) -> Vec<usize> {
    let root = |mut b: usize| {
        while model.bodies[b].parent != 0 {
            b = model.bodies[b].parent;
        }
        b
    };
    (0..model.nv).map(|d| root(model.dof_body[d])).collect()
}

/// The islands of rows `j` (nrows × nv) on `model`'s trees (module doc). Rows with no nonzero
/// entry belong to no island (they cannot act on anything).
pub fn islands(model: &Model, j: &DMatrix<f64>) -> Vec<Island> {
    let tree = dof_trees(model);
    let nb = model.bodies.len();
    // Union–find over trees (body indices).
    let mut parent: Vec<usize> = (0..nb).collect();
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let mut constrained = vec![false; nb];
    let row_trees = |r: usize| -> Vec<usize> {
        let mut t: Vec<usize> = (0..model.nv)
            .filter(|&d| j[(r, d)] != 0.0)
            .map(|d| tree[d])
            .collect();
        t.sort_unstable();
        t.dedup();
        t
    };
    let per_row: Vec<Vec<usize>> = (0..j.nrows()).map(row_trees).collect();
    for t in &per_row {
        for &a in t {
            constrained[a] = true;
        }
        for w in t.windows(2) {
            let (a, b) = (find(&mut parent, w[0]), find(&mut parent, w[1]));
            if a != b {
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    // Islands keyed by their root tree, ordered by their first dof.
    let mut key_of_root: Vec<Option<usize>> = vec![None; nb];
    let mut out: Vec<Island> = Vec::new();
    for d in 0..model.nv {
        if !constrained[tree[d]] {
            continue;
        }
        let r = find(&mut parent, tree[d]);
        let k = *key_of_root[r].get_or_insert_with(|| {
            out.push(Island {
                dofs: Vec::new(),
                rows: Vec::new(),
            });
            out.len() - 1
        });
        out[k].dofs.push(d);
    }
    for (row, t) in per_row.iter().enumerate() {
        if let Some(&first) = t.first() {
            let r = find(&mut parent, first);
            if let Some(k) = key_of_root[r] {
                out[k].rows.push(row);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Body, Joint, JointKind, ModelParts, Vec3};

    /// Three free bodies (6 dofs each): trees 1, 2, 3.
    fn three_bodies() -> Model {
        let mut parts = ModelParts::default();
        for (i, name) in ["a", "b", "c"].iter().enumerate() {
            let pos = Vec3::new(i as f64, 0.0, 0.0);
            parts
                .bodies
                .push(Body::new(*name, 0, pos, 1.0, Vec3::repeat(0.01)));
            parts
                .joints
                .push(Joint::new(format!("{name}_free"), JointKind::Free, i + 1));
        }
        Model::new(parts).unwrap()
    }

    #[test]
    fn rows_couple_the_trees_they_touch() {
        let model = three_bodies();
        assert_eq!(model.nv, 18);
        // Row 0 on a (floor contact), row 1 on c, row 2 between a and b; nothing on c–a.
        let mut j = DMatrix::zeros(3, 18);
        j[(0, 2)] = 1.0;
        j[(1, 14)] = 1.0;
        j[(2, 0)] = 1.0;
        j[(2, 6)] = -1.0;
        let isl = islands(&model, &j);
        assert_eq!(isl.len(), 2);
        assert_eq!(isl[0].dofs, (0..12).collect::<Vec<_>>());
        assert_eq!(isl[0].rows, vec![0, 2]);
        assert_eq!(isl[1].dofs, (12..18).collect::<Vec<_>>());
        assert_eq!(isl[1].rows, vec![1]);
        // Without the a–b row, b is in no island and a, c are two.
        let isl = islands(&model, &j.rows(0, 2).into_owned());
        assert_eq!(isl.len(), 2);
        assert_eq!(isl[0].dofs, (0..6).collect::<Vec<_>>());
        assert_eq!(isl[1].rows, vec![1]);
    }
}
