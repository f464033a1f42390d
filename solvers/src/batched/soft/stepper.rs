//! [`BatchedSoft`]: the batched soft_convex and signorini as a [`Stepper`], holding the
//! worlds' states and warm starts on the device, in shards stepped in parallel (as
//! [`crate::batched::BatchedPenalty`]).

use burn_tensor::backend::Backend;
use nalgebra::Matrix3;

use super::rows::{frame_force, frame_velocity};
use super::{step, SoftBatch, StepOut};
use crate::batched::scalar::S;
use crate::batched::{
    download, download_mask, outside_reasons, shard_controls, shard_ranges, shard_states,
    upload_states,
};
use crate::engine::Stepper;
use crate::features::IgnoredFeature;
use crate::formulation::{ContactRecord, Formulation, StepReport};
use crate::model::{State, Vec3};

/// A contiguous range of worlds with its state and warm start.
struct Shard<B: Backend> {
    start: usize,
    len: usize,
    q: Vec<S<B>>,
    v: Vec<S<B>>,
    warm: Option<Vec<S<B>>>,
}

/// The batched soft_convex or signorini on backend `B`.
pub struct BatchedSoft<B: Backend> {
    engine: &'static str,
    batch: SoftBatch,
    /// The cpu formulation with the same parameters (for its list of ignored features).
    reference: Box<dyn Formulation>,
    device: B::Device,
    worlds: usize,
    shards: Vec<Shard<B>>,
    t: f64,
}

impl<B: Backend> BatchedSoft<B> {
    /// `worlds` copies of `initial` stepped by `batch`, in one shard; `reference` is the cpu
    /// formulation with the same parameters.
    pub fn new(
        engine: &'static str,
        batch: SoftBatch,
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

    /// The same worlds in `shards` contiguous shards (clamped to 1..=worlds); warm starts
    /// restart.
    pub fn with_shards(mut self, shards: usize) -> Self {
        let states = self.read_states();
        self.split(shards, &states);
        self
    }

    /// The compiled batch.
    pub fn batch(&self) -> &SoftBatch {
        &self.batch
    }

    fn split(&mut self, shards: usize, states: &[State]) {
        self.shards = shard_ranges(self.worlds, shards)
            .into_iter()
            .map(|(start, len)| {
                let (q, v) = upload_states::<B>(&states[start..start + len], &self.device);
                Shard {
                    start,
                    len,
                    q,
                    v,
                    warm: None,
                }
            })
            .collect();
    }
}

/// Per-world reports of one shard's step: solver statistics and, with `contacts`, the contact
/// records (impulse = h · force in the contact frame, velocity after the step).
fn reports<B: Backend>(out: &StepOut<B>, w: usize, h: f64, contacts: bool) -> Vec<StepReport> {
    let iterations = download(&out.iterations, w);
    let gradient = download(&out.gradient, w);
    let converged = download_mask(&out.converged, w);
    let mut reports: Vec<StepReport> = (0..w)
        .map(|i| {
            let n = iterations[i].round() as usize;
            StepReport {
                iterations: n,
                residual: gradient[i],
                converged: converged[i],
                best_iterate: n,
                diverged: None,
                contacts: Vec::new(),
            }
        })
        .collect();
    if !contacts {
        return reports;
    }
    for c in &out.rows.contacts {
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
        let force = read3(&frame_force(c, &out.force));
        let vel = read3(&frame_velocity(c, &out.v));
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
                mu: c.friction[0],
                impulse: force[i] * h,
                velocity: vel[i],
            });
        }
    }
    reports
}

impl<B: Backend> Stepper for BatchedSoft<B> {
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
                let out = step(batch, &sh.q, &sh.v, &u, sh.warm.as_deref(), h);
                let mut reports = reports(&out, sh.len, h, want_contacts);
                let left =
                    outside_reasons(&out.outside, &batch.model, &batch.compiled, sh.len, t + h);
                for (r, left) in reports.iter_mut().zip(left) {
                    r.diverged = left;
                }
                (out.q, out.v, out.qacc, reports)
            })
            .collect();
        let mut all = Vec::with_capacity(self.worlds);
        for (sh, (q, v, qacc, r)) in self.shards.iter_mut().zip(stepped) {
            sh.q = q;
            sh.v = v;
            sh.warm = Some(qacc);
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

    /// Overwrite the states; warm starts are kept (as the cpu formulations keep theirs).
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
