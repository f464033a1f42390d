//! The batched `ncp_fb` adjoint (issue 17): gradients of a loss of a rollout's states with
//! respect to every world's initial state and controls, by an explicit reverse sweep over the
//! stored converged steps, with memory of the stored states only (nothing per Newton
//! iteration), the batched counterpart of [`crate::ncp_fb::adjoint`].
//!
//! # The step's derivative without its iterations
//!
//! A step maps `x = (q⁻, v⁻, ctrl)` to `(q⁺, u)` through the root `p*(x)` of the constraint
//! residual with the dynamics row eliminated, `r(x, p) = r_c(J(x) u(x, p), p; d(x))`,
//! `u(x, p) = u_free(x) + M⁻¹Jᵀ(x) p` (module doc of [`crate::ncp_fb`]). The implicit function
//! theorem gives `dp*/dx = −A⁺ ∂r/∂x`, `A = ∂r/∂p = R_v J M⁻¹Jᵀ + R_p` the Newton matrix at the
//! root without the Newton-only regularization (spec §2.6 with §7.6: the exact generalized
//! Jacobian, [`super::residual::Problem::linearize`] with [`Friction::Exact`]). The reverse
//! sweep re-assembles step k from its stored `(q_k, v_k, ctrl_k)` on an autodiff backend and
//! evaluates, at the stored impulses p*,
//!
//! `p̃ = p* − (δ − detach(δ))`,  `δ = A⁺ r(x, p*)` with A detached,
//!
//! whose value is p* and whose derivative is `−A⁺ ∂r/∂x`; then `u⁺ = u(x, p̃)` and
//! `q⁺ = integrate(q⁻, u⁺, h)`. One backward pass of that graph with the adjoints of
//! `(q⁺, u⁺)` as seeds is the step's vector–Jacobian product: the transposed system
//! `Aᵀ w = Bᵀ ḡ_u` of the cpu adjoint is the reverse of `A⁺`, and the assembly's derivatives
//! (mass matrix, bias forces, contact points, normals, gaps, lever arms) are burn's reverse
//! mode through the batched assembly instead of the cpu adjoint's central differences. The
//! graph of one step is dropped before the next: memory is the stored `(q, v, ctrl, p)` per
//! world-step plus one step's graph, flat in the Newton budget.
//!
//! `A⁺` is the minimum-norm least-squares inverse, as the cpu adjoint's (statically
//! indeterminate sticking contacts make A singular; module doc of [`crate::ncp_fb::adjoint`]):
//! formed per world on the host by nalgebra's SVD with the cpu adjoint's cut (singular values
//! below [`PINV_CUT`] σ_max dropped) and applied on the device, one readback of A per step of
//! the sweep. (Iterated Tikhonov regularization on the device was tried first: the normal
//! equations it factors square A's condition, so its damping cannot go below ~1e-7 σ_max,
//! and box_drop's resting steps have singular values at 2e-11 σ_max that the cpu adjoint
//! inverts: 3.9e-5 relative difference.)
//!
//! Quaternions: the stored q is renormalized in the graph (`q/‖q‖` on every free joint, a
//! no-op on the values to the last bit or two), so the derivative with respect to the raw
//! coordinates is that of the normalizing kinematics and integrator, as the cpu adjoint's
//! central differences see them (which step past the 1e-15 threshold below which the forward
//! code skips the normalization), and positions advance by
//! [`crate::batched::dynamics::integrate_positions_smooth`], whose rotation increment has the
//! right derivative in ω at |ω| < 1e-15 (the forward increment's fixed axis there does not:
//! a box at rest whose contact solve leaves |ω| ~ 1e-17 gave 2e-2 errors on box_slide).
//!
//! What the gradient cannot be trusted through is counted per world, never dropped silently:
//! unconverged and failed forward steps ([`Tape::unconverged_at`], [`Tape::failed_at`]; the sweep
//! differentiates a failed world's step as if it had moved) and steps whose Newton matrix had
//! no finite pseudo-inverse ([`Gradient::failed_solves`]).

use burn_tensor::backend::{AutodiffBackend, Backend};
use burn_tensor::Tensor;

use super::assemble::NcpBatch;
use super::residual::Problem;
use super::stepper::step;
use crate::batched::dynamics::integrate_positions_smooth;
use crate::batched::kinematics::quat_norm;
use crate::batched::scalar::S;
use crate::model::{JointKind, Model};
use crate::ncp_fb::residual::Friction;

/// One stored step per world.
struct Stored<B: Backend> {
    q: Vec<S<B>>,
    v: Vec<S<B>>,
    ctrl: Vec<S<B>>,
    p: Vec<S<B>>,
}

/// A batched rollout with its tape: per step the worlds' `q⁻`, `v⁻`, controls and converged
/// impulses (nothing per Newton iteration).
pub struct Tape<B: Backend> {
    /// Timestep (s).
    pub h: f64,
    /// Worlds.
    pub worlds: usize,
    steps: Vec<Stored<B>>,
    /// Positions after the last step (nq).
    pub q: Vec<S<B>>,
    /// Velocities after the last step (nv).
    pub v: Vec<S<B>>,
    /// Per world: the steps (indices) that ended unconverged (the gradient through them is not
    /// a derivative).
    pub unconverged_at: Vec<Vec<usize>>,
    /// Per world: the steps (indices) that failed (no iterate, or a mass matrix that was not
    /// positive definite; the state was held). The sweep's derivative through such a step is
    /// not that of the held state.
    pub failed_at: Vec<Vec<usize>>,
    /// Per world: why its rollout left the batched engine's scene class, the first step's
    /// reason (a pair the batched collision does not run came within reach and has contact
    /// rows by the cpu engine's rules; the stepper's `diverged` report), with the time measured
    /// from the rollout's start; `None` where it stayed inside. Such a world's rollout and
    /// gradient are not the cpu engine's.
    pub left: Vec<Option<String>>,
}

impl<B: Backend> Tape<B> {
    /// Steps stored.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// True if no step was stored.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The states `(q_k, v_k)` before step k (k < [`Self::len`]), or after the last (k = len).
    pub fn state(&self, k: usize) -> (&[S<B>], &[S<B>]) {
        match self.steps.get(k) {
            Some(s) => (&s.q, &s.v),
            None => (&self.q, &self.v),
        }
    }

    /// Bytes of the stored tensors (8 per f64 element), for memory measurements.
    pub fn stored_bytes(&self) -> usize {
        let n = |xs: &[S<B>]| xs.iter().filter(|s| matches!(s, S::T(_))).count();
        self.steps
            .iter()
            .map(|s| n(&s.q) + n(&s.v) + n(&s.ctrl) + n(&s.p))
            .sum::<usize>()
            * self.worlds
            * std::mem::size_of::<f64>()
    }
}

/// Run `controls.len()` steps of `h` (s) from `(q, v)` (per-coordinate tensors of the worlds),
/// `controls[k]` the step's controls (nu), keeping the tape.
pub fn rollout<B: Backend>(
    b: &NcpBatch,
    q: Vec<S<B>>,
    v: Vec<S<B>>,
    controls: &[Vec<S<B>>],
    h: f64,
    worlds: usize,
) -> Tape<B> {
    let mut tape = Tape {
        h,
        worlds,
        steps: Vec::with_capacity(controls.len()),
        q,
        v,
        unconverged_at: vec![Vec::new(); worlds],
        failed_at: vec![Vec::new(); worlds],
        left: vec![None; worlds],
    };
    for (k, ctrl) in controls.iter().enumerate() {
        let out = step(b, &tape.q, &tape.v, ctrl, h);
        let conv = crate::batched::download_mask(&out.solution.converged, worlds);
        let failed =
            crate::batched::download_mask(&out.solution.failed.or(&out.singular_mass), worlds);
        let left = super::stepper::left_reasons(
            b,
            &out.assembly.outside,
            (&tape.q, &tape.v),
            worlds,
            (k as f64 * h, h),
        );
        for w in 0..worlds {
            if failed[w] {
                tape.failed_at[w].push(k);
            } else if !conv[w] {
                tape.unconverged_at[w].push(k);
            }
            if tape.left[w].is_none() {
                tape.left[w].clone_from(&left[w]);
            }
        }
        let q = std::mem::replace(&mut tape.q, out.q);
        let v = std::mem::replace(&mut tape.v, out.v);
        tape.steps.push(Stored {
            q,
            v,
            ctrl: ctrl.clone(),
            p: out.solution.p,
        });
    }
    tape
}

/// Gradients per world, each a per-coordinate tensor of the worlds.
pub struct Gradient<B: Backend> {
    /// dL/dq₀ (nq; raw coordinates, quaternions included).
    pub q0: Vec<S<B>>,
    /// dL/dv₀ (nv).
    pub v0: Vec<S<B>>,
    /// dL/dctrl_k per step (N × nu).
    pub controls: Vec<Vec<S<B>>>,
    /// Per world: steps whose Newton matrix had no finite pseudo-inverse; their terms are
    /// missing and the gradient is not a derivative (the cpu adjoint's
    /// [`crate::ncp_fb::adjoint::Gradient::failed_solves`]). With [`Tape::unconverged_at`],
    /// [`Tape::failed_at`] and [`Tape::left`], what a caller must report beside the gradient.
    pub failed_solves: Vec<usize>,
}

/// The minimum-norm least-squares solution of `A x = r` per world (module doc): `a` the
/// detached Newton matrix (nλ × nλ), `r` tracked; x = A⁺ r is linear in r. A⁺ is formed on the
/// host per world (nalgebra's SVD, singular values below [`PINV_CUT`] σ_max dropped, the cpu
/// adjoint's cut) and applied on `device`. Also returns, per world, whether A⁺ could not be
/// formed (a non-finite A or SVD): x is then 0 there, and the caller counts the world's step
/// in [`Gradient::failed_solves`].
fn least_squares<B: Backend>(
    a: &[Vec<S<B>>],
    r: &[S<B>],
    worlds: usize,
    device: &B::Device,
) -> (Vec<S<B>>, Vec<bool>) {
    let n = r.len();
    let entries: Vec<Vec<Vec<f64>>> = a
        .iter()
        .map(|row| {
            row.iter()
                .map(|x| crate::batched::download(x, worlds))
                .collect()
        })
        .collect();
    let pinvs: Vec<Option<nalgebra::DMatrix<f64>>> = (0..worlds)
        .map(|w| pseudo_inverse(&nalgebra::DMatrix::from_fn(n, n, |i, j| entries[i][j][w])))
        .collect();
    let x = (0..n)
        .map(|i| {
            (0..n).fold(S::zero(), |acc: S<B>, j| {
                let col: Vec<f64> = pinvs
                    .iter()
                    .map(|p| p.as_ref().map_or(0.0, |p| p[(i, j)]))
                    .collect();
                if col.iter().all(|&x| x == 0.0) {
                    return acc;
                }
                acc + &r[j] * &S::T(crate::batched::upload(col, device))
            })
        })
        .collect();
    (x, pinvs.iter().map(Option::is_none).collect())
}

/// Singular values of the Newton matrix below this times the largest are dropped from its
/// pseudo-inverse (as the cpu adjoint's `solve_transposed`).
pub const PINV_CUT: f64 = 1e-12;

/// A⁺ with [`PINV_CUT`]; `None` where A or its SVD is not finite.
fn pseudo_inverse(a: &nalgebra::DMatrix<f64>) -> Option<nalgebra::DMatrix<f64>> {
    if !a.iter().all(|x| x.is_finite()) {
        return None;
    }
    let svd = a.clone().svd(true, true);
    let smax = svd.singular_values.max();
    svd.pseudo_inverse(PINV_CUT * smax)
        .ok()
        .filter(|p| p.iter().all(|x| x.is_finite()))
}

/// `x` with its tape cut (a constant of the graph with the same value).
fn detach<B: AutodiffBackend>(x: &S<B>) -> S<B> {
    match x {
        S::C(c) => S::C(*c),
        S::T(t) => S::T(t.clone().detach()),
    }
}

/// Every free joint's quaternion in `q` divided by its norm (module doc, "Quaternions").
fn normalized<B: Backend>(model: &Model, q: &[S<B>]) -> Vec<S<B>> {
    let mut q = q.to_vec();
    for j in &model.joints {
        if j.kind == JointKind::Free {
            let a = j.qpos_adr + 3;
            let quat = [
                q[a].clone(),
                q[a + 1].clone(),
                q[a + 2].clone(),
                q[a + 3].clone(),
            ];
            let n = quat_norm(&quat);
            for (i, c) in quat.iter().enumerate() {
                q[a + i] = c / &n;
            }
        }
    }
    q
}

/// A leaf per coordinate: the stored value on the autodiff backend, tracked.
fn leaves<A: AutodiffBackend>(
    xs: &[S<A::InnerBackend>],
    worlds: usize,
    device: &A::Device,
) -> Vec<Tensor<A, 1>> {
    xs.iter()
        .map(|s| {
            let inner = s.tensor(worlds, device);
            Tensor::<A, 1>::from_inner(inner).require_grad()
        })
        .collect()
}

/// A stored value on the autodiff backend, untracked.
fn constant<A: AutodiffBackend>(x: &S<A::InnerBackend>) -> S<A> {
    match x {
        S::C(c) => S::C(*c),
        S::T(t) => S::T(Tensor::from_inner(t.clone())),
    }
}

/// A loss's partials with respect to state k: `(k, q_k, v_k) ↦ (∂L/∂q_k, ∂L/∂v_k)`, each a
/// per-coordinate tensor over the worlds.
pub type StateGrad<'a, B> = dyn Fn(usize, &[S<B>], &[S<B>]) -> (Vec<S<B>>, Vec<S<B>>) + 'a;

/// One backward sweep over `tape` (recorded on `A`'s inner backend) for the loss whose
/// partials with respect to state k (k = 0…N) are `state_grad(k, q_k, v_k) = (∂L/∂q_k,
/// ∂L/∂v_k)`, per coordinate over the worlds (module doc).
pub fn backward<A: AutodiffBackend>(
    b: &NcpBatch,
    tape: &Tape<A::InnerBackend>,
    device: &A::Device,
    state_grad: &StateGrad<'_, A::InnerBackend>,
) -> Gradient<A::InnerBackend> {
    let (h, w, n) = (tape.h, tape.worlds, tape.len());
    let model = &b.model;
    let (fq, fv) = tape.state(n);
    let (mut gq, mut gv) = state_grad(n, fq, fv);
    let mut controls = vec![Vec::new(); n];
    let mut failed_solves = vec![0; w];
    for k in (0..n).rev() {
        let s = &tape.steps[k];
        let (lq, lv, lc) = (
            leaves::<A>(&s.q, w, device),
            leaves::<A>(&s.v, w, device),
            leaves::<A>(&s.ctrl, w, device),
        );
        let track =
            |ts: &[Tensor<A, 1>]| -> Vec<S<A>> { ts.iter().map(|t| S::T(t.clone())).collect() };
        let q = normalized(model, &track(&lq));
        let (v, ctrl) = (track(&lv), track(&lc));
        let asm = super::assemble::assemble(b, &q, &v, &ctrl, h);
        let pb: &Problem<A> = &asm.problem;
        // The same state gives the same slots (idle ones dropped alike) as in the rollout. A
        // backend whose autodiff re-assembly rounds a slot's detection test the other way
        // cannot pair the stored impulses with the rows: the step's terms are dropped and
        // counted in every world as a failed solve (the gradient is then not a derivative).
        if s.p.len() != pb.nl() {
            for count in &mut failed_solves {
                *count += 1;
            }
            controls[k] = vec![S::zero(); s.ctrl.len()];
            let (sq, sv) = state_grad(k, &s.q, &s.v);
            gq = gq.iter().zip(&sq).map(|(a, b)| a + b).collect();
            gv = gv.iter().zip(&sv).map(|(a, b)| a + b).collect();
            continue;
        }
        let p_star: Vec<S<A>> = s.p.iter().map(constant::<A>).collect();
        let p_tilde = if pb.nl() == 0 {
            p_star
        } else {
            let u_star = pb.velocity(&p_star);
            let r = pb.residual(&u_star, &p_star);
            let lin = pb.linearize(&u_star, &p_star, Friction::Exact);
            let zero = vec![S::zero(); pb.nl()];
            let a: Vec<Vec<S<A>>> = pb
                .newton_matrix(&lin, &pb.delassus(), &zero)
                .iter()
                .map(|row| row.iter().map(detach).collect())
                .collect();
            let (delta, failed) = least_squares(&a, &r, w, device);
            for (count, f) in failed_solves.iter_mut().zip(failed) {
                *count += usize::from(f);
            }
            p_star
                .iter()
                .zip(&delta)
                .map(|(p, d)| p - &(d - &detach(d)))
                .collect()
        };
        let u = pb.velocity(&p_tilde);
        let mut q_plus = q.clone();
        integrate_positions_smooth(model, &mut q_plus, &u, h);
        let seed = q_plus
            .iter()
            .zip(&gq)
            .chain(u.iter().zip(&gv))
            .fold(S::<A>::zero(), |acc, (x, g)| acc + x * &constant::<A>(g));
        let grads = seed.tensor(w, device).sum().backward();
        let read = |ts: &[Tensor<A, 1>]| -> Vec<S<A::InnerBackend>> {
            ts.iter()
                .map(|t| match t.grad(&grads) {
                    Some(g) => S::T(g),
                    None => S::C(0.0),
                })
                .collect()
        };
        let (dq, dv, dc) = (read(&lq), read(&lv), read(&lc));
        controls[k] = dc;
        let (sq, sv) = state_grad(k, &s.q, &s.v);
        gq = dq.iter().zip(&sq).map(|(a, b)| a + b).collect();
        gv = dv.iter().zip(&sv).map(|(a, b)| a + b).collect();
    }
    Gradient {
        q0: gq,
        v0: gv,
        controls,
        failed_solves,
    }
}
