//! Batched `ncp_fb` (issue 17): the cpu formulation's Newton on Fischer–Burmeister residuals
//! ([`crate::ncp_fb`]; spec `ncp_fb_and_penalty.md` §1–2 with the corrections of §7) for many
//! worlds at once, written per world with the batched engine's scalars ([`crate::batched::scalar`]),
//! so that one program runs on burn-ndarray (f64, cross-checked against the cpu engine) and on
//! the GPU backends.
//!
//! # Row slots
//!
//! The cpu engine builds a fresh list of rows every step (only the contacts found); a static
//! tensor program cannot. Here the rows are **slots** fixed when the model is compiled, in the
//! cpu engine's order (servo rows, every limited joint's row, then per contact candidate its
//! normal row and, for condim ≥ 3, its two tangent rows), and each contact slot carries an
//! `active` mask: whether, in each world, the cpu engine would have that contact. An inactive
//! slot's rows are made **inert**: its Jacobian rows are zero (so it couples with nothing
//! through the Delassus matrix `J M⁻¹ Jᵀ`), its residual rows are `r = p` with `∂r/∂p = I`, so
//! from p = 0 Newton keeps its impulses at exactly 0 and the active rows' iterates are those of
//! the cpu engine's smaller problem ([`residual`] tests this world by world).
//!
//! # Pieces
//!
//! * [`residual`]: the constraint residual (R2)–(R5) with the natural map of the friction disk,
//!   its exact and lagged generalized Jacobians, the Delassus matrix, the Newton matrix (Schur
//!   complement, spec eq. (12)) with its regularization, and the stopping test's measures.
//! * [`dense`]: the per-world dense solve of the Newton system, packed into `(worlds, nλ, nλ)`
//!   tensors (O(nλ) tensor operations per solve, not O(nλ³)).
//! * [`pcr`]: `linear_solver: pcr`, the matrix-free Newton system by preconditioned conjugate
//!   residuals.
//! * [`adjoint`]: the exact adjoint of a rollout, from its stored converged steps.
//! * [`solve`]: the cpu engine's whole solve per world with masks.
//! * [`assemble`]: one step's problem from the batched collision (the cpu engine's
//!   [`crate::ncp_fb::NcpFb::assemble`]: explicit and servo actuators, limit rows, contact
//!   slots with the speculative detection distance per world, merged duplicates).
//! * [`stepper`]: [`BatchedNcp`], the [`crate::engine::Stepper`]; a world where a pair the
//!   batched engine does not collide comes within reach is decided by the cpu engine's rules
//!   ([`crate::ncp_fb::NcpFb::pair_has_rows`]).
//!
//! Cross-checked against the cpu engine over 6 s at h = 50 ms
//! (`scenarios/tests/batched_ncp_cross_check.rs`, three worlds each): box_slide 1.1e-16 m,
//! box_drop 9.9e-10 m, cartpole 4.7e-13, box_traversal 6.3e-15 m in the final position;
//! mesh_terrain on its height field 1.6e-15 m over 2 s (two worlds).
//!
//! Not batched (refused by [`NcpBatch::new`], naming the parameter): the `dissipation_weight`
//! friction residual (the natural map is the default and the only one whose iterates need no
//! projection), equality rows (the batched scene class has none).
//!
//! # Cost
//!
//! The program is overhead-bound on CPU backends: each tensor operation on a few dozen worlds
//! costs microseconds of dispatch whatever its size. Three measures keep the operation count
//! down (measured on box_traversal's 50 control-synthesis instances, 120 steps at 50 ms,
//! forward only, one thread: 200 s before them, 117 s after; the adjoint's sweep on 1 world ×
//! 10 steps: 7.6 s before, 1.1 s after):
//! * slots that are a contact in no world of the batch are dropped in each step
//!   ([`NcpBatch::skip_idle_slots`], exact);
//! * the Newton system is built and solved packed ([`dense`], "Packed");
//! * `J u` and `M⁻¹Jᵀ p` are packed products ([`residual::Problem::packed`]).
//!
//! What remains is the batch's slowest world: every world runs the iterations of the one that
//! needs most (at 50 worlds, steps where one world needs 370 Newton iterations and the mean is
//! 61), the price of a static program; and the scalar residual rows (the natural map's
//! branches per contact).

pub mod adjoint;
pub mod assemble;
pub mod dense;
pub mod pcr;
pub mod residual;
pub mod solve;
pub mod stepper;

pub use assemble::NcpBatch;
pub use stepper::BatchedNcp;
