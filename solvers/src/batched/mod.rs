//! The batched engine on burn (issues 15 to 17): many worlds of one model as tensors, generic
//! over burn's backend, so that one code path runs on CPU (ndarray, f64) in tests and on GPUs
//! (wgpu, CUDA, f32) for throughput, and burn's autodiff gives reverse-mode gradients through
//! whole rollouts (DESIGN.md, "Two engines, one set of definitions").
//!
//! Scope: the `penalty`, `soft_convex`, `signorini` and `ncp_fb` ([`ncp`], forward only so
//! far) formulations on the class
//! [`crate::engine::batched_support`] admits (free bodies and hinge/slide chains; a plane
//! against spheres, capsules, boxes and wheels, a sphere against a box, a wheel against a box
//! ([`wheel`]) and against a static height field ([`height_field`]); no equality constraints). Each
//! step is the cpu formulation's arithmetic written per world with constants folded
//! ([`scalar`]); [`penalty::step`] and [`soft::step`] are pure functions of tensors, the soft
//! solvers' iterations masked per world ([`soft::solver`]).
//!
//! Pieces: [`scalar`] (per-world scalars and masks), [`spatial`] (3-vectors, quaternions,
//! spatial vectors), [`kinematics`], [`dynamics`], [`collision`] and [`plane_box`] (a box's
//! contacts as four slots, not eight corners), [`penalty`], [`reverse`] (forward plus backward
//! passes through whole rollouts, for measuring them), and [`BatchedPenalty`], the [`Stepper`]
//! that keeps the state on the device and moves f64 states to and from the host. f32 backends
//! round on upload and widen on readback; losses and metrics are reduced in f64 on the host.
//!
//! Cost (issue 15; box_drop, 4,096 worlds, burn-ndarray in the dev profile on 2 cores): a step
//! is about 900 world-sized tensor operations, each a pass over memory; on ndarray their time
//! is the elements they touch (an add of 4,096 f64 is ~2.4 µs, its fixed cost ~0.3 µs), so the
//! program is made shorter, not wider: constant branches of selects are `mask_fill`s (a
//! `mask_where` costs ~9 adds), constants fold, temporaries are computed in place, a box has
//! four contact slots, and the contact law is skipped in steps where no world has a candidate
//! ([`penalty::Batch::skip_idle_contacts`]). burn-ndarray runs each elementwise operation on
//! one thread, so the stepper splits the worlds into one shard per worker ([`cpu_shards`]).
//! Stacking corners into `[worlds, 8]` tensors was measured and does not pay on ndarray:
//! same-shape ops cost the same per element, broadcasting ones ~7× more, `stack` and
//! `gather` ~100× more.

pub mod carry;
pub mod collision;
pub mod dynamics;
pub mod height_field;
pub mod kinematics;
pub mod ncp;
pub mod penalty;
pub mod plane_box;
pub mod reverse;
pub mod scalar;
pub mod soft;
pub mod spatial;
pub mod wheel;

/// burn's wgpu backend at the pinned version.
#[cfg(feature = "wgpu")]
pub use burn_wgpu;
/// burn's tensor API and backends at the pinned version, for callers (tests, the harness)
/// that build tensors or read gradients without depending on burn themselves.
pub use {burn_autodiff, burn_ndarray, burn_tensor};

use burn_tensor::backend::Backend;
use burn_tensor::{Tensor, TensorData};
use nalgebra::DVector;

use crate::engine::{DeviceMemory, EngineError, Stepper};
use crate::features::IgnoredFeature;
use crate::formulation::{ContactRecord, Formulation, StepReport};
use crate::model::{Model, State, Vec3};
use crate::penalty::PenaltyParams;
use penalty::Batch;
use scalar::{M, S};

/// The ndarray backend in f64 (engine `burn-ndarray`).
pub type NdArrayF64 = burn_ndarray::NdArray<f64>;
/// Reverse mode over [`NdArrayF64`].
pub type AutodiffF64 = burn_autodiff::Autodiff<NdArrayF64>;
/// The wgpu backend in f32 (engine `burn-wgpu`).
#[cfg(feature = "wgpu")]
pub type WgpuF32 = burn_wgpu::Wgpu<f32, i32>;
/// The CUDA backend in f32 (engine `burn-cuda`).
#[cfg(feature = "cuda")]
pub type CudaF32 = burn_cuda::Cuda<f32, i32>;

/// Upload one value per world as a `(worlds)` tensor (rounded to the backend's float type).
pub fn upload<B: Backend>(values: Vec<f64>, device: &B::Device) -> Tensor<B, 1> {
    let n = values.len();
    Tensor::from_data(
        TensorData::new(values, [n]).convert::<B::FloatElem>(),
        device,
    )
}

/// Read a per-world scalar back as f64, `worlds` values (a constant is repeated).
pub fn download<B: Backend>(s: &S<B>, worlds: usize) -> Vec<f64> {
    match s {
        S::C(c) => vec![*c; worlds],
        S::T(t) => t
            .to_data()
            .convert::<f64>()
            .to_vec::<f64>()
            .expect("a float tensor reads back as f64"),
    }
}

/// A float tensor's values as f64 on the host (a readback on GPU backends).
pub fn read_f64<B: Backend, const D: usize>(t: &Tensor<B, D>) -> Vec<f64> {
    t.to_data()
        .convert::<f64>()
        .to_vec::<f64>()
        .expect("a float tensor reads back as f64")
}

/// The memory usage of engine `name`'s default device, after waiting for its queued work:
/// `Some` for `burn-wgpu` and `burn-cuda` in builds with their features, `None` otherwise
/// (ndarray's memory is the process heap, which the harness counts itself).
pub fn device_memory(name: &str) -> Option<DeviceMemory> {
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    use burn_cubecl::cubecl::Runtime;
    match name {
        #[cfg(feature = "wgpu")]
        "burn-wgpu" => {
            let device = burn_wgpu::WgpuDevice::default();
            let _ = <WgpuF32 as Backend>::sync(&device);
            let u = burn_wgpu::WgpuRuntime::client(&device)
                .memory_usage()
                .ok()?;
            Some(DeviceMemory {
                in_use: u.bytes_in_use,
                reserved: u.bytes_reserved,
            })
        }
        #[cfg(feature = "cuda")]
        "burn-cuda" => {
            let device = burn_cuda::CudaDevice::default();
            let _ = <CudaF32 as Backend>::sync(&device);
            let u = burn_cubecl::cubecl::cuda::CudaRuntime::client(&device)
                .memory_usage()
                .ok()?;
            Some(DeviceMemory {
                in_use: u.bytes_in_use,
                reserved: u.bytes_reserved,
            })
        }
        _ => None,
    }
}

/// The contiguous ranges `(start, len)` of `worlds` worlds split into `shards` shards of
/// near-equal size (clamped to 1..=worlds), the longer ones first.
pub(crate) fn shard_ranges(worlds: usize, shards: usize) -> Vec<(usize, usize)> {
    let n = shards.clamp(1, worlds.max(1));
    let (base, extra) = (worlds / n, worlds % n);
    let mut start = 0;
    (0..n)
        .map(|i| {
            let len = base + usize::from(i < extra);
            start += len;
            (start - len, len)
        })
        .collect()
}

/// The states of one shard's `len` worlds (positions `q` `(nq)`, velocities `v` `(nv)`) at time
/// `t`, read back to f64.
pub(crate) fn shard_states<B: Backend>(q: &[S<B>], v: &[S<B>], len: usize, t: f64) -> Vec<State> {
    let q: Vec<Vec<f64>> = q.iter().map(|s| download(s, len)).collect();
    let v: Vec<Vec<f64>> = v.iter().map(|s| download(s, len)).collect();
    (0..len)
        .map(|i| State {
            q: DVector::from_iterator(q.len(), q.iter().map(|c| c[i])),
            v: DVector::from_iterator(v.len(), v.iter().map(|c| c[i])),
            t,
        })
        .collect()
}

/// The controls of worlds `start..start + len` from the row-major `(worlds × nu)` `controls`,
/// one per-world scalar per actuator (a constant where every world has the same value).
pub(crate) fn shard_controls<B: Backend>(
    controls: &[f64],
    nu: usize,
    (start, len): (usize, usize),
    device: &B::Device,
) -> Vec<S<B>> {
    (0..nu)
        .map(|a| {
            let col: Vec<f64> = (start..start + len).map(|w| controls[w * nu + a]).collect();
            if col.iter().all(|&x| x == col[0]) {
                S::C(col[0])
            } else {
                S::T(upload(col, device))
            }
        })
        .collect()
}

/// Per world of a shard of `len` worlds: why it left the batched engine's class at this step
/// (the first flagged pair's [`collision::Outside::report`]), `None` where it did not. One
/// readback where any pair can leave it, none otherwise.
pub(crate) fn outside_reasons<B: Backend>(
    outside: &[collision::Outside<B>],
    model: &Model,
    compiled: &crate::compiled::CompiledModel,
    len: usize,
    t: f64,
) -> Vec<Option<String>> {
    outside_reasons_where(outside, model, compiled, len, t, &mut |_, _| true)
}

/// [`outside_reasons`] where a flag of pair `o` in world `i` counts only if `confirm(o, i)`
/// (ncp_fb asks the cpu engine's rules about the pairs it does not collide,
/// [`ncp::stepper`]).
pub(crate) fn outside_reasons_where<B: Backend>(
    outside: &[collision::Outside<B>],
    model: &Model,
    compiled: &crate::compiled::CompiledModel,
    len: usize,
    t: f64,
    confirm: &mut dyn FnMut(&collision::Outside<B>, usize) -> bool,
) -> Vec<Option<String>> {
    let mut reasons = vec![None; len];
    let any = outside.iter().fold(M::C(false), |acc, o| acc.or(&o.worlds));
    if !any.any_true() {
        return reasons;
    }
    for o in outside {
        let flagged = download_mask(&o.worlds, len);
        let pr = &compiled.pairs[o.pair];
        for (i, (r, f)) in reasons.iter_mut().zip(flagged).enumerate() {
            if f && r.is_none() && confirm(o, i) {
                *r = Some(o.report(model, (pr.geoms[0], pr.geoms[1]), t));
            }
        }
    }
    reasons
}

pub(crate) fn download_mask<B: Backend>(m: &M<B>, worlds: usize) -> Vec<bool> {
    match m {
        M::C(b) => vec![*b; worlds],
        M::T(t) => t.to_data().iter::<bool>().collect(),
    }
}

/// Per-world states as per-coordinate tensors: `(nq)` and `(nv)` scalars of shape `(worlds)`.
pub fn upload_states<B: Backend>(states: &[State], device: &B::Device) -> (Vec<S<B>>, Vec<S<B>>) {
    let nq = states[0].q.len();
    let nv = states[0].v.len();
    let q = (0..nq)
        .map(|i| S::T(upload(states.iter().map(|s| s.q[i]).collect(), device)))
        .collect();
    let v = (0..nv)
        .map(|i| S::T(upload(states.iter().map(|s| s.v[i]).collect(), device)))
        .collect();
    (q, v)
}

/// Fewest worlds per shard when a CPU backend splits a batch across threads
/// ([`BatchedPenalty::with_shards`]): below this the fixed cost of each tensor operation
/// outweighs the second core.
pub const MIN_WORLDS_PER_SHARD: usize = 256;

/// Shards for a CPU backend: one per thread of the current rayon pool, each of at least
/// [`MIN_WORLDS_PER_SHARD`] worlds (one shard for fewer).
pub fn cpu_shards(worlds: usize) -> usize {
    rayon::current_num_threads()
        .min(worlds / MIN_WORLDS_PER_SHARD)
        .max(1)
}

/// A contiguous range of worlds with its state: positions `(nq)` and velocities `(nv)`, each a
/// `(len)` per-world scalar.
struct Shard<B: Backend> {
    start: usize,
    len: usize,
    q: Vec<S<B>>,
    v: Vec<S<B>>,
}

/// The batched penalty as a [`Stepper`] on backend `B`.
///
/// The worlds are held in one or more shards ([`BatchedPenalty::with_shards`]), each stepped
/// as one tensor program; shards run in parallel on the caller's rayon pool. burn-ndarray
/// runs each elementwise operation on one thread, so on a CPU backend the batch is split into
/// one shard per core ([`cpu_shards`]); a GPU backend keeps one shard. Worlds never interact,
/// so the split changes no number.
pub struct BatchedPenalty<B: Backend> {
    engine: &'static str,
    batch: Batch<B>,
    device: B::Device,
    worlds: usize,
    shards: Vec<Shard<B>>,
    t: f64,
}

impl<B: Backend> BatchedPenalty<B> {
    /// `worlds` copies of `initial` on `model` with penalty parameters `params`, in one shard.
    pub fn new(
        engine: &'static str,
        model: &Model,
        params: PenaltyParams,
        initial: &State,
        worlds: usize,
        device: B::Device,
    ) -> Self {
        let worlds = worlds.max(1);
        let mut s = Self {
            engine,
            batch: Batch::new(model, params),
            device,
            worlds,
            shards: Vec::new(),
            t: initial.t,
        };
        s.split(1, &vec![initial.clone(); worlds]);
        s
    }

    /// The same worlds split into `shards` contiguous shards of near-equal size (clamped to
    /// 1..=worlds), stepped in parallel.
    pub fn with_shards(mut self, shards: usize) -> Self {
        let states = self.read_states();
        self.split(shards, &states);
        self
    }

    /// Skip the contact law in a step where no world of a shard has a contact candidate
    /// ([`Batch::skip_idle_contacts`]: one readback per step; for CPU backends).
    pub fn with_idle_contact_skip(mut self, on: bool) -> Self {
        self.batch.skip_idle_contacts = on;
        self
    }

    /// Number of shards.
    pub fn shards(&self) -> usize {
        self.shards.len()
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

    /// The compiled batch. Coefficients may be replaced per world (see
    /// [`penalty::PairCoefficients`]: a constant or a `(worlds)` tensor over all worlds; each
    /// shard steps with its slice).
    pub fn batch_mut(&mut self) -> &mut Batch<B> {
        &mut self.batch
    }

    /// The device.
    pub fn device(&self) -> &B::Device {
        &self.device
    }

    fn records(
        &self,
        sh: &Shard<B>,
        coef: &[penalty::PairCoefficients<B>],
        out: &penalty::StepOut<B>,
        h: f64,
    ) -> Vec<Vec<ContactRecord>> {
        let w = sh.len;
        let mut per_world = vec![Vec::new(); w];
        let (cvel, _) = dynamics::velocities(&self.batch.model, &out.kin, &out.v);
        for c in &out.contacts {
            let active = download_mask(&c.active, w);
            if !active.iter().any(|&a| a) {
                continue;
            }
            let pr = &self.batch.compiled.pairs[c.candidate.pair];
            let p = &c.candidate.point;
            let vrel = spatial::sub3(
                &dynamics::point_velocity(&cvel[pr.bodies[1]], p),
                &dynamics::point_velocity(&cvel[pr.bodies[0]], p),
            );
            let read3 = |v: &spatial::V3<B>| -> Vec<Vec3> {
                let [x, y, z] = [download(&v[0], w), download(&v[1], w), download(&v[2], w)];
                (0..w).map(|i| Vec3::new(x[i], y[i], z[i])).collect()
            };
            let (point, normal, force, vel) = (
                read3(p),
                read3(&c.candidate.normal),
                read3(&c.force),
                read3(&vrel),
            );
            let gap = download(&c.candidate.gap, w);
            let mu = download(&coef[c.candidate.pair].mu, w);
            for i in (0..w).filter(|&i| active[i]) {
                let frame = crate::collision::contact_frame(&normal[i]);
                per_world[i].push(ContactRecord {
                    geoms: pr.geoms,
                    point: point[i],
                    frame,
                    gap: gap[i],
                    mu: mu[i],
                    impulse: frame * force[i] * h,
                    velocity: frame * vel[i],
                });
            }
        }
        per_world
    }
}

/// The coefficients of worlds `start..start + len` (a constant stays one).
fn slice_coefficients<B: Backend>(
    coef: &[penalty::PairCoefficients<B>],
    start: usize,
    len: usize,
    worlds: usize,
) -> Vec<penalty::PairCoefficients<B>> {
    let cut = |s: &S<B>| match s {
        S::T(t) if len != worlds => S::T(t.clone().narrow(0, start, len)),
        other => other.clone(),
    };
    coef.iter()
        .map(|c| penalty::PairCoefficients {
            ke: cut(&c.ke),
            kd: cut(&c.kd),
            kf: cut(&c.kf),
            ka: cut(&c.ka),
            mu: cut(&c.mu),
        })
        .collect()
}

impl<B: Backend> Stepper for BatchedPenalty<B> {
    fn engine(&self) -> &'static str {
        self.engine
    }

    fn worlds(&self) -> usize {
        self.worlds
    }

    fn step(&mut self, controls: &[f64], h: f64, want_contacts: bool) -> Vec<StepReport> {
        use rayon::prelude::*;
        let nu = self.batch.compiled.nu;
        assert_eq!(
            controls.len(),
            nu * self.worlds,
            "controls must be (worlds x nu)"
        );
        let (batch, device, worlds) = (&self.batch, &self.device, self.worlds);
        let this = &*self;
        let stepped: Vec<_> = self
            .shards
            .par_iter()
            .map(|sh| {
                let u = shard_controls::<B>(controls, nu, (sh.start, sh.len), device);
                let coef = slice_coefficients(&batch.coef, sh.start, sh.len, worlds);
                let out = penalty::step_with(batch, &coef, &sh.q, &sh.v, &u, h);
                let records = want_contacts.then(|| this.records(sh, &coef, &out, h));
                let left = outside_reasons(
                    &out.outside,
                    &batch.model,
                    &batch.compiled,
                    sh.len,
                    this.t + h,
                );
                (out.q, out.v, records, left)
            })
            .collect();
        let mut all_records = Vec::new();
        let mut left_class = Vec::with_capacity(self.worlds);
        for (sh, (q, v, records, left)) in self.shards.iter_mut().zip(stepped) {
            sh.q = q;
            sh.v = v;
            if let Some(r) = records {
                all_records.extend(r);
            }
            left_class.extend(left);
        }
        self.t += h;
        let mut reports: Vec<StepReport> = left_class
            .into_iter()
            .map(|left| StepReport {
                diverged: left,
                ..StepReport::explicit(Vec::new())
            })
            .collect();
        if want_contacts {
            // Observed steps also check every world for divergence (one readback).
            for (r, (c, s)) in reports
                .iter_mut()
                .zip(all_records.into_iter().zip(self.read_states()))
            {
                r.contacts = c;
                *r = std::mem::take(r).check_divergence(&s);
            }
        }
        reports
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
        crate::penalty::Penalty::new(self.batch.params.clone())
            .map(|p| p.ignored_features(&self.batch.model))
            .unwrap_or_default()
    }
}

/// Build the batched stepper of engine `name` for formulation `formulation` with parameters
/// `params` (JSON, the formulation's own schema): `penalty` ([`BatchedPenalty`]), `soft_convex`
/// or `signorini` ([`soft::BatchedSoft`]).
///
/// # Errors
/// Bad parameters or a parameter the batched engine does not implement
/// ([`EngineError::Unsupported`] naming it), another formulation, or an engine this build lacks.
pub fn stepper(
    name: &str,
    formulation: &str,
    params: &serde_json::Value,
    model: &Model,
    initial: &State,
    worlds: usize,
) -> Result<Box<dyn Stepper>, EngineError> {
    // Refusals name the engine the cell asked for.
    let engine = crate::engine::find(name)?.name;
    let named = |e: EngineError| match e {
        EngineError::Unsupported { element, .. } => EngineError::Unsupported { engine, element },
        other => other,
    };
    if formulation == "penalty" {
        return penalty_stepper(name, params, model, initial, worlds).map_err(named);
    }
    if formulation == "ncp_fb" {
        return ncp_stepper(name, params, model, initial, worlds).map_err(named);
    }
    let (batch, reference) = soft_batch(formulation, params, model).map_err(named)?;
    match name {
        "burn-ndarray" => Ok(Box::new(
            soft::BatchedSoft::<NdArrayF64>::new(
                "burn-ndarray",
                batch,
                reference,
                initial,
                worlds,
                Default::default(),
            )
            .with_shards(cpu_shards(worlds)),
        )),
        #[cfg(feature = "wgpu")]
        "burn-wgpu" => Ok(Box::new(soft::BatchedSoft::<WgpuF32>::new(
            "burn-wgpu",
            batch,
            reference,
            initial,
            worlds,
            Default::default(),
        ))),
        #[cfg(feature = "cuda")]
        "burn-cuda" => Ok(Box::new(soft::BatchedSoft::<CudaF32>::new(
            "burn-cuda",
            batch,
            reference,
            initial,
            worlds,
            Default::default(),
        ))),
        other => Err(crate::engine::find(other)?.not_built()),
    }
}

/// The batched soft_convex or signorini of `formulation` with parameters `params` (JSON)
/// compiled for `model`, with the cpu formulation of the same parameters (for its list of
/// ignored features).
///
/// # Errors
/// Bad parameters, a parameter the batched soft solvers do not implement (an implicit
/// integrator, the physical contact mapping, signorini's latch), or another formulation, as
/// [`EngineError::Unsupported`] naming it.
pub fn soft_batch(
    formulation: &str,
    params: &serde_json::Value,
    model: &Model,
) -> Result<(soft::SoftBatch, Box<dyn Formulation>), EngineError> {
    let unsupported = |element: String| EngineError::Unsupported {
        engine: "burn",
        element,
    };
    Ok(match formulation {
        "soft_convex" => {
            let p: crate::soft_convex::SoftConvexParams =
                crate::formulation::parse_params("soft_convex", params)
                    .map_err(|e| unsupported(e.to_string()))?;
            let f = crate::soft_convex::SoftConvex::new(p.clone())
                .map_err(|e| unsupported(e.to_string()))?;
            let b = soft::SoftBatch::new(model, &p, false)
                .map_err(|e| unsupported(format!("soft_convex: {e}")))?;
            (b, Box::new(f) as Box<dyn Formulation>)
        }
        "signorini" => {
            let p: crate::signorini::SignoriniParams =
                crate::formulation::parse_params("signorini", params)
                    .map_err(|e| unsupported(e.to_string()))?;
            let f = crate::signorini::Signorini::new(p).map_err(|e| unsupported(e.to_string()))?;
            if f.latch() {
                return Err(unsupported(
                    "signorini: latch (Genesis PR #3381's per-contact latch) is not batched; run on the cpu engine".into(),
                ));
            }
            let b = soft::SoftBatch::new(model, f.inner_params(), true)
                .map_err(|e| unsupported(format!("signorini: {e}")))?;
            (b, Box::new(f) as Box<dyn Formulation>)
        }
        other => {
            return Err(unsupported(format!(
                "formulation '{other}' has no batched soft solver (soft_convex and signorini do)"
            )))
        }
    })
}

/// The batched penalty's stepper of engine `name` for the penalty parameters `params` (JSON).
///
/// # Errors
/// Bad parameters ([`EngineError::Unsupported`] naming them), or an engine this build lacks.
/// The batched `ncp_fb` ([`ncp::BatchedNcp`]) on engine `name`.
///
/// # Errors
/// Bad parameters, or one the batched ncp_fb does not implement ([`ncp::NcpBatch::new`]), as
/// [`EngineError::Unsupported`] naming it.
fn ncp_stepper(
    name: &str,
    params: &serde_json::Value,
    model: &Model,
    initial: &State,
    worlds: usize,
) -> Result<Box<dyn Stepper>, EngineError> {
    let unsupported = |element: String| EngineError::Unsupported {
        engine: "burn",
        element,
    };
    let p: crate::ncp_fb::NcpFbParams = crate::formulation::parse_params("ncp_fb", params)
        .map_err(|e| unsupported(e.to_string()))?;
    let reference = crate::ncp_fb::NcpFb::new(p.clone()).map_err(|e| unsupported(e.to_string()))?;
    let batch = ncp::NcpBatch::new(model, p).map_err(|e| unsupported(format!("ncp_fb: {e}")))?;
    let reference = Box::new(reference) as Box<dyn Formulation>;
    match name {
        "burn-ndarray" => Ok(Box::new(
            ncp::BatchedNcp::<NdArrayF64>::new(
                "burn-ndarray",
                batch,
                reference,
                initial,
                worlds,
                Default::default(),
            )
            .with_shards(cpu_shards(worlds)),
        )),
        #[cfg(feature = "wgpu")]
        "burn-wgpu" => Ok(Box::new(ncp::BatchedNcp::<WgpuF32>::new(
            "burn-wgpu",
            batch,
            reference,
            initial,
            worlds,
            Default::default(),
        ))),
        #[cfg(feature = "cuda")]
        "burn-cuda" => Ok(Box::new(ncp::BatchedNcp::<CudaF32>::new(
            "burn-cuda",
            batch,
            reference,
            initial,
            worlds,
            Default::default(),
        ))),
        other => Err(crate::engine::find(other)?.not_built()),
    }
}

fn penalty_stepper(
    name: &str,
    params: &serde_json::Value,
    model: &Model,
    initial: &State,
    worlds: usize,
) -> Result<Box<dyn Stepper>, EngineError> {
    let p: PenaltyParams = crate::formulation::parse_params("penalty", params).map_err(|e| {
        EngineError::Unsupported {
            engine: "burn",
            element: e.to_string(),
        }
    })?;
    crate::penalty::Penalty::new(p.clone()).map_err(|e| EngineError::Unsupported {
        engine: "burn",
        element: e.to_string(),
    })?;
    match name {
        "burn-ndarray" => Ok(Box::new(
            BatchedPenalty::<NdArrayF64>::new(
                "burn-ndarray",
                model,
                p,
                initial,
                worlds,
                Default::default(),
            )
            .with_shards(cpu_shards(worlds))
            .with_idle_contact_skip(true),
        )),
        #[cfg(feature = "wgpu")]
        "burn-wgpu" => Ok(Box::new(BatchedPenalty::<WgpuF32>::new(
            "burn-wgpu",
            model,
            p,
            initial,
            worlds,
            Default::default(),
        ))),
        #[cfg(feature = "cuda")]
        "burn-cuda" => Ok(Box::new(BatchedPenalty::<CudaF32>::new(
            "burn-cuda",
            model,
            p,
            initial,
            worlds,
            Default::default(),
        ))),
        other => Err(crate::engine::find(other)?.not_built()),
    }
}
