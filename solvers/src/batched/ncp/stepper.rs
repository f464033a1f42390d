//! [`BatchedNcp`]: the batched `ncp_fb` as a [`Stepper`], the worlds' states on the device in
//! shards stepped in parallel (as [`crate::batched::BatchedPenalty`]).
//!
//! One step per world ([`step`]): [`assemble`], [`solve`], then `u⁺` the solution's velocity
//! and `q⁺ = integrate(q⁻, u⁺, h)` (module doc of [`crate::ncp_fb`]). A world whose mass matrix
//! is not positive definite, or whose first Newton iteration produced no finite iterate, keeps
//! its state and is reported diverged with the reason, as the cpu engine's failed steps.

use burn_tensor::backend::Backend;
use nalgebra::Matrix3;

use super::assemble::{assemble, Assembly, NcpBatch};
use super::solve::{solve, Solution};
use crate::batched::collision::Outside;
use crate::batched::dynamics::{dot_dynamic, integrate_positions};
use crate::batched::scalar::{M, S};
use crate::batched::{
    download, download_mask, outside_reasons_where, shard_controls, shard_ranges, shard_states,
    upload_states,
};
use crate::engine::Stepper;
use crate::features::IgnoredFeature;
use crate::formulation::{ContactRecord, Formulation, StepReport};
use crate::model::{State, Vec3};

/// One step's result per world.
pub struct StepOut<B: Backend> {
    /// Positions after the step `(nq)` (the start where the step failed).
    pub q: Vec<S<B>>,
    /// Velocities after the step `(nv)` (the start where the step failed).
    pub v: Vec<S<B>>,
    /// The step's problem and contact slots.
    pub assembly: Assembly<B>,
    /// The solve's result.
    pub solution: Solution<B>,
    /// Per world: the mass matrix was not positive definite.
    pub singular_mass: M<B>,
}

/// One step of every world: positions `q` `(nq)`, velocities `v` `(nv)`, controls `u` `(nu)`,
/// timestep `h` (s).
pub fn step<B: Backend>(b: &NcpBatch, q: &[S<B>], v: &[S<B>], u: &[S<B>], h: f64) -> StepOut<B> {
    let assembly = assemble(b, q, v, u, h);
    let solution = solve(&assembly.problem, &b.settings);
    let singular_mass = assembly.mass_ok.not();
    let stay = solution.failed.or(&singular_mass);
    let mut q_new = q.to_vec();
    integrate_positions(&b.model, &mut q_new, &solution.u, h);
    let keep = |new: &[S<B>], old: &[S<B>]| -> Vec<S<B>> {
        if matches!(stay, M::C(false)) {
            return new.to_vec();
        }
        new.iter()
            .zip(old)
            .map(|(n, o)| stay.select(o, n))
            .collect()
    };
    StepOut {
        q: keep(&q_new, q),
        v: keep(&solution.u, v),
        assembly,
        solution,
        singular_mass,
    }
}

/// A contiguous range of worlds with its state.
struct Shard<B: Backend> {
    start: usize,
    len: usize,
    q: Vec<S<B>>,
    v: Vec<S<B>>,
}

/// The batched `ncp_fb` on backend `B`.
pub struct BatchedNcp<B: Backend> {
    engine: &'static str,
    batch: NcpBatch,
    /// The cpu formulation with the same parameters (for its list of ignored features).
    reference: Box<dyn Formulation>,
    device: B::Device,
    worlds: usize,
    shards: Vec<Shard<B>>,
    t: f64,
}

impl<B: Backend> BatchedNcp<B> {
    /// `worlds` copies of `initial` stepped by `batch`, in one shard; `reference` is the cpu
    /// formulation with the same parameters.
    pub fn new(
        engine: &'static str,
        batch: NcpBatch,
        reference: Box<dyn Formulation>,
        initial: &State,
        worlds: usize,
        device: B::Device,
    ) -> Self {
        let worlds = worlds.max(1);
        let mut s = Self {
            engine,
            batch,
            reference,
            device,
            worlds,
            shards: Vec::new(),
            t: initial.t,
        };
        s.split(1, &vec![initial.clone(); worlds]);
        s
    }

    /// The same worlds in `shards` contiguous shards (clamped to 1..=worlds).
    pub fn with_shards(mut self, shards: usize) -> Self {
        let states = self.read_states();
        self.split(shards, &states);
        self
    }

    /// The compiled batch.
    pub fn batch(&self) -> &NcpBatch {
        &self.batch
    }

    fn split(&mut self, shards: usize, states: &[State]) {
        self.shards = shard_ranges(self.worlds, shards)
            .into_iter()
            .map(|(start, len)| {
                let (q, v) = upload_states::<B>(&states[start..start + len], &self.device);
                Shard { start, len, q, v }
            })
            .collect();
    }
}

/// Per-world reports of one shard's step of `w` worlds from time `t` over `h` (s):
/// solver statistics, failures and, with `contacts`, the contact records (impulses in the
/// contact frame, velocities after the step).
fn reports<B: Backend>(
    b: &NcpBatch,
    out: &StepOut<B>,
    start: (&[S<B>], &[S<B>]),
    w: usize,
    (t, h): (f64, f64),
    contacts: bool,
) -> Vec<StepReport> {
    let sol = &out.solution;
    let iterations = download(&sol.iterations, w);
    let best = download(&sol.best_iterate, w);
    let residual = download(&sol.residual, w);
    let converged = download_mask(&sol.converged, w);
    let failed = download_mask(&sol.failed, w);
    let singular = download_mask(&out.singular_mass, w);
    let left = left_reasons(b, &out.assembly.outside, start, w, (t, h));
    let mut reports: Vec<StepReport> = (0..w)
        .map(|i| {
            let diverged = if singular[i] {
                Some(format!("mass matrix not positive definite at t = {t:.6} s"))
            } else if failed[i] {
                Some(format!(
                    "ncp_fb step failed at t = {t:.6} s: the first Newton iteration produced no finite iterate"
                ))
            } else {
                left[i].clone()
            };
            let fail = singular[i] || failed[i];
            StepReport {
                iterations: if fail { 0 } else { iterations[i].round() as usize },
                residual: residual[i],
                converged: converged[i] && !fail,
                best_iterate: if fail { 0 } else { best[i].round() as usize },
                diverged,
                contacts: Vec::new(),
            }
        })
        .collect();
    if contacts {
        records(out, w, &mut reports);
    }
    reports
}

/// Per world of a shard of `w` worlds whose step started at positions and velocities `start`
/// at time `t` (s): why it left the batched class in the step of `h` (s), the first flagged
/// pair's reason ([`Outside::report`]), `None` where it did not. A pair the batched engine does
/// not collide is flagged conservatively (within its widened detection distance); in the worlds
/// so flagged the cpu engine's rules decide ([`crate::ncp_fb::NcpFb::pair_has_rows`] on that
/// world's state): only a pair that has contact rows there takes the world out.
pub(super) fn left_reasons<B: Backend>(
    b: &NcpBatch,
    outside: &[Outside<B>],
    (q, v): (&[S<B>], &[S<B>]),
    w: usize,
    (t, h): (f64, f64),
) -> Vec<Option<String>> {
    let mut states: Option<Vec<State>> = None;
    let mut confirm = |o: &Outside<B>, i: usize| {
        if !o.uncollided {
            return true;
        }
        let st = states.get_or_insert_with(|| shard_states(q, v, w, t));
        let [g0, g1] = b.compiled.pairs[o.pair].geoms;
        let pair = (g0.min(g1), g0.max(g1));
        b.cpu.pair_has_rows(&b.model, &st[i].q, &st[i].v, h, pair)
    };
    outside_reasons_where(outside, &b.model, &b.compiled, w, t + h, &mut confirm)
}

/// Append each active contact slot's record to its world's report.
fn records<B: Backend>(out: &StepOut<B>, w: usize, reports: &mut [StepReport]) {
    let p = &out.solution.p;
    let u: Vec<&S<B>> = out.solution.u.iter().collect();
    for c in &out.assembly.contacts {
        let active = download_mask(&c.active, w);
        if !active.iter().any(|&a| a) {
            continue;
        }
        let read3 = |v: &[S<B>; 3]| -> Vec<Vec3> {
            let [x, y, z] = [download(&v[0], w), download(&v[1], w), download(&v[2], w)];
            (0..w).map(|i| Vec3::new(x[i], y[i], z[i])).collect()
        };
        let point = read3(&c.point);
        let rows: Vec<Vec<Vec3>> = c.frame.iter().map(read3).collect();
        let zero = S::C(0.0);
        let impulse = read3(&std::array::from_fn(|a| {
            if a == 0 || c.friction {
                p[c.row + a].clone()
            } else {
                zero.clone()
            }
        }));
        let velocity = read3(&std::array::from_fn(|a| {
            dot_dynamic(&c.jacobian[a].iter().collect::<Vec<_>>(), &u)
        }));
        let gap = download(&c.gap, w);
        for i in (0..w).filter(|&i| active[i]) {
            let frame = Matrix3::from_rows(&[
                rows[0][i].transpose(),
                rows[1][i].transpose(),
                rows[2][i].transpose(),
            ]);
            reports[i].contacts.push(ContactRecord {
                geoms: c.geoms,
                point: point[i],
                frame,
                gap: gap[i],
                mu: c.mu,
                impulse: impulse[i],
                velocity: velocity[i],
            });
        }
    }
}

impl<B: Backend> Stepper for BatchedNcp<B> {
    fn engine(&self) -> &'static str {
        self.engine
    }

    fn worlds(&self) -> usize {
        self.worlds
    }

    fn step(&mut self, controls: &[f64], h: f64, want_contacts: bool) -> Vec<StepReport> {
        use rayon::prelude::*;
        let nu = self.batch.model.actuators.len();
        assert_eq!(
            controls.len(),
            nu * self.worlds,
            "controls must be (worlds x nu)"
        );
        let (batch, device, t) = (&self.batch, &self.device, self.t);
        let stepped: Vec<_> = self
            .shards
            .par_iter()
            .map(|sh| {
                let u = shard_controls::<B>(controls, nu, (sh.start, sh.len), device);
                let out = step(batch, &sh.q, &sh.v, &u, h);
                let reports = reports(batch, &out, (&sh.q, &sh.v), sh.len, (t, h), want_contacts);
                (out.q, out.v, reports)
            })
            .collect();
        let mut all = Vec::with_capacity(self.worlds);
        for (sh, (q, v, r)) in self.shards.iter_mut().zip(stepped) {
            sh.q = q;
            sh.v = v;
            all.extend(r);
        }
        self.t += h;
        if want_contacts {
            // Observed steps check every world for divergence (one readback).
            for (r, s) in all.iter_mut().zip(self.read_states()) {
                *r = std::mem::take(r).check_divergence(&s);
            }
        }
        all
    }

    fn read_states(&self) -> Vec<State> {
        self.shards
            .iter()
            .flat_map(|sh| shard_states(&sh.q, &sh.v, sh.len, self.t))
            .collect()
    }

    fn write_states(&mut self, states: &[State]) {
        assert_eq!(states.len(), self.worlds, "one state per world");
        for sh in &mut self.shards {
            let (q, v) = upload_states::<B>(&states[sh.start..sh.start + sh.len], &self.device);
            sh.q = q;
            sh.v = v;
        }
        self.t = states[0].t;
    }

    fn ignored_features(&self) -> Vec<IgnoredFeature> {
        self.reference.ignored_features(&self.batch.model)
    }
}
