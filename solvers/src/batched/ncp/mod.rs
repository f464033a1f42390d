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
//! * [`dense`]: the per-world dense solve of the Newton system.
//!
//! Not batched (refused by the builder of a batched step, naming the parameter): the
//! `dissipation_weight` friction residual (the natural map is the default and the only one whose
//! iterates need no projection), equality rows (the batched scene class has none).

pub mod dense;
pub mod residual;
pub mod solve;
