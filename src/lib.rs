//! # slide
//!
//! Sub-linear deep learning on CPUs: fully-connected layers whose active neurons are chosen
//! per sample by locality-sensitive hashing ([`lsh`], the `slide-lsh` crate), hand-derived
//! sparse forward and backward passes, a threaded per-sample pipeline and a sparse Adam
//! optimizer that touches only the rows a batch used.
//!
//! * [`SparseLayer`]: parameters in one contiguous, SIMD-padded allocation; neuron-major or
//!   input-major storage; dense or LSH sampling.
//! * [`Network`]: a stack of layers, softmax cross-entropy with multi-label soft targets,
//!   [`Network::train_step`] (parallel over samples, then one Adam update per touched row,
//!   identical for any thread count), table rebuilds on a [`RebuildSchedule`].
//! * [`kernels`]: dot, axpy and the Adam row update in scalar, `wide` and AVX-512 forms.
//!
//! # Example
//!
//! Two Gaussian blobs in 4 dimensions, a hidden layer sampled by LSH:
//!
//! ```
//! use slide::{
//!     Activation, AdamConfig, DenseExamples, LayerConfig, LshConfig, Mode, Network,
//!     NetworkConfig, RebuildSchedule, Retrieval, Workspace,
//! };
//! use slide::lsh::{FamilyKind, LshParams, Projection, Sampling};
//!
//! let mut data = DenseExamples { dim: 4, ..Default::default() };
//! for i in 0..64 {
//!     let class = (i % 2) as u32;
//!     let sign = if class == 0 { 1.0 } else { -1.0 };
//!     let wobble = (i as f32 * 0.37).sin() * 0.3;
//!     data.inputs.extend([sign + wobble, sign - wobble, 0.5 * sign, wobble]);
//!     data.classes.push(class);
//! }
//! // Set only what differs from the defaults.
//! let hidden = LayerConfig::new(64, Activation::Relu).sampled(LshConfig {
//!     retrieval: Retrieval {
//!         family: FamilyKind::SimHash(Projection::Gaussian),
//!         params: LshParams { k: 2, l: 8, range_pow: 2 },
//!         bucket_capacity: 64,
//!         sampling: Sampling::vanilla().with_min_active(16),
//!         ..Default::default()
//!     },
//!     ..Default::default()
//! });
//! let output = LayerConfig::new(2, Activation::Softmax);
//! let mut net = Network::new(NetworkConfig {
//!     adam: AdamConfig { lr: 0.01, ..AdamConfig::default() },
//!     rebuild: RebuildSchedule::Fixed { every: 10 },
//!     seed: 7,
//!     ..NetworkConfig::new(4, vec![hidden, output])
//! })?;
//! // The per-batch buffers, reused from step to step.
//! let mut ws = Workspace::new();
//! let all: Vec<usize> = (0..64).collect();
//! let first = net.train_step(&mut ws, &data, &all)?.loss;
//! for _ in 0..100 {
//!     net.train_step(&mut ws, &data, &all)?;
//! }
//! let last = net.train_step(&mut ws, &data, &all)?.loss;
//! assert!(last < 0.1 * first, "loss {first} -> {last}");
//! assert_eq!(net.evaluate(&mut ws, &data, &all, Mode::EvalExact)?.metrics.precision[0], 1.0);
//! # Ok::<(), slide::SlideError>(())
//! ```

pub mod comm;
pub mod config;
pub mod data;
pub mod error;
pub mod eval;
pub mod formats;
mod growth;
pub mod head;
mod input;
pub mod kernels;
pub mod layer;
mod loss;
pub mod metrics;
pub mod network;
mod network_state;
pub mod optimizer;
pub mod rows;
pub mod stats;
pub mod step;
mod top;
mod warm_start;
pub mod workspace;

pub use config::{NetworkConfig, RebuildSchedule};
pub use data::{DenseExamples, Examples, SparseExamples};
pub use error::{Result, SlideError};
pub use eval::{EVAL_BLOCK, EvalOptions, EvalPrecision};
pub use growth::Continued;
pub use head::{HeadConfig, Heads};
pub use kernels::describe as describe_kernels;
pub use layer::{
    Activation, Elem, Init, LayerBatch, LayerConfig, LayerState, LayerTrace, LshConfig, Mode,
    Negatives, Picks, Precision, Retrieval, SampleRng, SecondMoment, SelectScratch, SoftmaxLoss,
    SparseLayer, StateSource, StateTensor, Warmup, WarmupLength, WeightLayout, sample_rng,
};
pub use metrics::{Metrics, Propensities, PropensityModel};
pub use network::{Network, NetworkState, StateScalars};
pub use optimizer::{
    Adam, AdamConfig, BiasCorrection, Decay, LayerGradients, LrSchedule, UpdateCounts,
    UpdateScratch,
};
pub use slide_lsh as lsh;
pub use stats::{ActiveSources, EvalStats, PhaseTimes, Recall, StepStats};
pub use workspace::Workspace;
