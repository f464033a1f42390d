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
//! code skips the normalization).

use burn_tensor::backend::{AutodiffBackend, Backend};
use burn_tensor::Tensor;

use super::assemble::NcpBatch;
use super::residual::Problem;
use super::stepper::step;
use crate::batched::kinematics::quat_norm;
use crate::batched::scalar::S;
use crate::batched::spatial::{qmul, Q4};
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
    /// Per world: steps that ended unconverged (the gradient through them is not a
    /// derivative).
    pub unconverged: Vec<usize>,
    /// Per world: steps that failed (no iterate; the state was held).
    pub failed: Vec<usize>,
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
        unconverged: vec![0; worlds],
        failed: vec![0; worlds],
    };
    for ctrl in controls {
        let out = step(b, &tape.q, &tape.v, ctrl, h);
        let conv = crate::batched::download_mask(&out.solution.converged, worlds);
        let failed =
            crate::batched::download_mask(&out.solution.failed.or(&out.singular_mass), worlds);
        for w in 0..worlds {
            tape.unconverged[w] += usize::from(!conv[w] && !failed[w]);
            tape.failed[w] += usize::from(failed[w]);
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
}

/// The minimum-norm least-squares solution of `A x = r` per world (module doc): `a` the
/// detached Newton matrix (nλ × nλ), `r` tracked; x = A⁺ r is linear in r. A⁺ is formed on the
/// host per world (nalgebra's SVD, singular values below [`PINV_CUT`] σ_max dropped, the cpu
/// adjoint's cut) and applied on the device.
fn least_squares<B: Backend>(a: &[Vec<S<B>>], r: &[S<B>], worlds: usize) -> Vec<S<B>> {
    let n = r.len();
    let device = r.iter().chain(a.iter().flatten()).find_map(|s| match s {
        S::T(t) => Some(t.device()),
        S::C(_) => None,
    });
    let Some(device) = device else {
        // Every entry constant: the same matrix in every world.
        let m = nalgebra::DMatrix::from_fn(n, n, |i, j| a[i][j].constant().unwrap_or(0.0));
        let pinv = pseudo_inverse(&m);
        return (0..n)
            .map(|i| (0..n).fold(S::zero(), |acc: S<B>, j| acc + &r[j] * pinv[(i, j)]))
            .collect();
    };
    let entries: Vec<Vec<Vec<f64>>> = a
        .iter()
        .map(|row| {
            row.iter()
                .map(|x| crate::batched::download(x, worlds))
                .collect()
        })
        .collect();
    let pinvs: Vec<nalgebra::DMatrix<f64>> = (0..worlds)
        .map(|w| pseudo_inverse(&nalgebra::DMatrix::from_fn(n, n, |i, j| entries[i][j][w])))
        .collect();
    (0..n)
        .map(|i| {
            (0..n).fold(S::zero(), |acc: S<B>, j| {
                let col: Vec<f64> = pinvs.iter().map(|p| p[(i, j)]).collect();
                if col.iter().all(|&x| x == 0.0) {
                    return acc;
                }
                acc + &r[j] * &S::T(crate::batched::upload(col, &device))
            })
        })
        .collect()
}

/// Singular values of the Newton matrix below this times the largest are dropped from its
/// pseudo-inverse (as the cpu adjoint's `solve_transposed`).
pub const PINV_CUT: f64 = 1e-12;

/// A⁺ with [`PINV_CUT`]; zeros where the SVD fails or is not finite (the step's terms are then
/// missing, as the cpu adjoint's failed solves).
fn pseudo_inverse(a: &nalgebra::DMatrix<f64>) -> nalgebra::DMatrix<f64> {
    let n = a.nrows();
    if !a.iter().all(|x| x.is_finite()) {
        return nalgebra::DMatrix::zeros(n, n);
    }
    let svd = a.clone().svd(true, true);
    let smax = svd.singular_values.max();
    svd.pseudo_inverse(PINV_CUT * smax)
        .ok()
        .filter(|p| p.iter().all(|x| x.is_finite()))
        .unwrap_or_else(|| nalgebra::DMatrix::zeros(n, n))
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

/// `q⁺ = integrate(q, v, h)` (MuJoCo `mj_integratePos`, [`crate::dynamics::integrate_positions`])
/// with a rotation increment that is smooth in the angular velocity everywhere: a free joint's
/// quaternion times `(cos(|ω| h/2), ω sin(|ω| h/2)/|ω|)`, by its Taylor series where
/// `|ω| h/2 < 1e-4`. The forward step's increment takes a fixed axis below |ω| = 1e-15 (its value
/// is exact there, its derivative in ω is not: a box at rest whose contact solve leaves
/// |ω| ~ 1e-17 would pass a wrong derivative); the values agree to rounding, and only the
/// derivatives of this map are used.
fn integrate_smooth<B: Backend>(model: &Model, q: &[S<B>], v: &[S<B>], h: f64) -> Vec<S<B>> {
    let mut q = q.to_vec();
    for j in &model.joints {
        let (qa, da) = (j.qpos_adr, j.dof_adr);
        match j.kind {
            JointKind::Hinge | JointKind::Slide => q[qa] = &q[qa] + &(&v[da] * h),
            JointKind::Free => {
                for i in 0..3 {
                    q[qa + i] = &q[qa + i] + &(&v[da + i] * h);
                }
                let w = [&v[da + 3], &v[da + 4], &v[da + 5]];
                // x² = (|ω| h/2)², smooth in ω.
                let x2 = &(&(&(w[0] * w[0]) + &(w[1] * w[1])) + &(w[2] * w[2])) * (h * h / 4.0);
                let small = x2.lt(&S::C(1e-8));
                let x = small.select(&S::C(1.0), &x2).sqrt();
                let (c_big, s_big) = (x.cos(), &(x.sin() / &x) * (h / 2.0));
                let c_small = &(S::C(1.0) - &(&x2 / 2.0)) + &(&(&x2 * &x2) / 24.0);
                let s_small = &(&(S::C(1.0) - &(&x2 / 6.0)) + &(&(&x2 * &x2) / 120.0)) * (h / 2.0);
                let c = small.select(&c_small, &c_big);
                let s = small.select(&s_small, &s_big);
                let r: Q4<B> = [c, w[0] * &s, w[1] * &s, w[2] * &s];
                let cur: Q4<B> = std::array::from_fn(|i| q[qa + 3 + i].clone());
                let out = qmul(&cur, &r);
                q[qa + 3..qa + 7].clone_from_slice(&out);
            }
            JointKind::Ball => unreachable!("engine::batched_support refuses ball joints"),
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
            let delta = least_squares(&a, &r, w);
            p_star
                .iter()
                .zip(&delta)
                .map(|(p, d)| p - &(d - &detach(d)))
                .collect()
        };
        let u = pb.velocity(&p_tilde);
        let q_plus = integrate_smooth(model, &q, &u, h);
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
    }
}
