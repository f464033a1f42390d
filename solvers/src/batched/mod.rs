//! The batched engine on burn (issue 15, part 1): many worlds of one model as tensors, generic
//! over burn's backend, so that one code path runs on CPU (ndarray, f64) in tests and on GPUs
//! (wgpu, CUDA, f32) for throughput, and burn's autodiff gives reverse-mode gradients through
//! whole rollouts (DESIGN.md, "Two engines, one set of definitions").
//!
//! Scope: the `penalty` formulation on the class [`crate::engine::batched_support`] admits
//! (free bodies and hinge/slide chains; a plane against spheres, capsules and boxes; no
//! equality constraints). Each step is the cpu penalty's arithmetic written per world with
//! constants folded ([`scalar`]); [`penalty::step`] is a pure function of tensors.
//!
//! Pieces: [`scalar`] (per-world scalars and masks), [`spatial`] (3-vectors, quaternions,
//! spatial vectors), [`kinematics`], [`dynamics`], [`collision`], [`penalty`], and
//! [`BatchedPenalty`], the [`Stepper`] that keeps the state on the device and moves f64 states
//! to and from the host. f32 backends round on upload and widen on readback; losses and
//! metrics are reduced in f64 on the host.

pub mod collision;
pub mod dynamics;
pub mod kinematics;
pub mod penalty;
pub mod scalar;
pub mod spatial;

/// burn's wgpu backend at the pinned version.
#[cfg(feature = "wgpu")]
pub use burn_wgpu;
/// burn's tensor API and backends at the pinned version, for callers (tests, the harness)
/// that build tensors or read gradients without depending on burn themselves.
pub use {burn_autodiff, burn_ndarray, burn_tensor};

use burn_tensor::backend::Backend;
use burn_tensor::{Tensor, TensorData};
use nalgebra::DVector;

use crate::engine::{EngineError, Stepper};
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

fn download_mask<B: Backend>(m: &M<B>, worlds: usize) -> Vec<bool> {
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

/// The batched penalty as a [`Stepper`] on backend `B`.
pub struct BatchedPenalty<B: Backend> {
    engine: &'static str,
    batch: Batch<B>,
    device: B::Device,
    worlds: usize,
    q: Vec<S<B>>,
    v: Vec<S<B>>,
    t: f64,
}

impl<B: Backend> BatchedPenalty<B> {
    /// `worlds` copies of `initial` on `model` with penalty parameters `params`.
    pub fn new(
        engine: &'static str,
        model: &Model,
        params: PenaltyParams,
        initial: &State,
        worlds: usize,
        device: B::Device,
    ) -> Self {
        let worlds = worlds.max(1);
        let (q, v) = upload_states::<B>(&vec![initial.clone(); worlds], &device);
        Self {
            engine,
            batch: Batch::new(model, params),
            device,
            worlds,
            q,
            v,
            t: initial.t,
        }
    }

    /// The compiled batch (coefficients may be replaced per world, see
    /// [`penalty::PairCoefficients`]).
    pub fn batch_mut(&mut self) -> &mut Batch<B> {
        &mut self.batch
    }

    /// The device.
    pub fn device(&self) -> &B::Device {
        &self.device
    }

    fn records(&self, out: &penalty::StepOut<B>, h: f64) -> Vec<Vec<ContactRecord>> {
        let w = self.worlds;
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
            let mu = download(&self.batch.coef[c.candidate.pair].mu, w);
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

impl<B: Backend> Stepper for BatchedPenalty<B> {
    fn engine(&self) -> &'static str {
        self.engine
    }

    fn worlds(&self) -> usize {
        self.worlds
    }

    fn step(&mut self, controls: &[f64], h: f64, want_contacts: bool) -> Vec<StepReport> {
        let nu = self.batch.compiled.nu;
        assert_eq!(
            controls.len(),
            nu * self.worlds,
            "controls must be (worlds x nu)"
        );
        let u: Vec<S<B>> = (0..nu)
            .map(|a| {
                let col: Vec<f64> = (0..self.worlds).map(|w| controls[w * nu + a]).collect();
                if col.iter().all(|&x| x == col[0]) {
                    S::C(col[0])
                } else {
                    S::T(upload(col, &self.device))
                }
            })
            .collect();
        let out = penalty::step(&self.batch, &self.q, &self.v, &u, h);
        let records = want_contacts.then(|| self.records(&out, h));
        self.q = out.q;
        self.v = out.v;
        self.t += h;
        let mut reports = vec![StepReport::explicit(Vec::new()); self.worlds];
        if let Some(records) = records {
            // Observed steps also check every world for divergence (one readback).
            for (r, (c, s)) in reports
                .iter_mut()
                .zip(records.into_iter().zip(self.read_states()))
            {
                r.contacts = c;
                *r = std::mem::take(r).check_divergence(&s);
            }
        }
        reports
    }

    fn read_states(&self) -> Vec<State> {
        let w = self.worlds;
        let q: Vec<Vec<f64>> = self.q.iter().map(|s| download(s, w)).collect();
        let v: Vec<Vec<f64>> = self.v.iter().map(|s| download(s, w)).collect();
        (0..w)
            .map(|i| State {
                q: DVector::from_iterator(q.len(), q.iter().map(|c| c[i])),
                v: DVector::from_iterator(v.len(), v.iter().map(|c| c[i])),
                t: self.t,
            })
            .collect()
    }

    fn write_states(&mut self, states: &[State]) {
        assert_eq!(states.len(), self.worlds, "one state per world");
        let (q, v) = upload_states::<B>(states, &self.device);
        self.q = q;
        self.v = v;
        self.t = states[0].t;
    }

    fn ignored_features(&self) -> Vec<IgnoredFeature> {
        crate::penalty::Penalty::new(self.batch.params.clone())
            .map(|p| p.ignored_features(&self.batch.model))
            .unwrap_or_default()
    }
}

/// Build the batched stepper of engine `name` for the penalty parameters `params` (JSON).
///
/// # Errors
/// Bad parameters ([`EngineError::Unsupported`] naming them), or an engine this build lacks.
pub fn stepper(
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
        "burn-ndarray" => Ok(Box::new(BatchedPenalty::<NdArrayF64>::new(
            "burn-ndarray",
            model,
            p,
            initial,
            worlds,
            Default::default(),
        ))),
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
