//! The sparse fully-connected layer: parameters in one contiguous allocation, LSH tables
//! over its neuron rows, and (in the submodules) how it is described ([`config`]), the
//! per-sample passes over active neurons ([`passes`]), the caller-owned trace of a sample
//! ([`trace`]) and its state in plain arrays ([`state`]). The sparse Adam update is in
//! [`crate::optimizer`].
//!
//! # Example
//!
//! A layer trained on its own, with a loss of the caller's (squared error on the active
//! outputs, pushing neuron 3 towards 1 for this one input):
//!
//! ```
//! use slide::lsh::Vector;
//! use slide::{
//!     Activation, Adam, AdamConfig, LayerConfig, LayerTrace, Mode, SparseLayer,
//!     UpdateScratch, sample_rng,
//! };
//!
//! let config = LayerConfig::new(8, Activation::Linear);
//! let mut layer = SparseLayer::new(4, &config, 1)?;
//! let mut adam = Adam::new(AdamConfig { lr: 0.05, ..AdamConfig::default() })?;
//! let (mut scratch, mut update) = (layer.select_scratch(), UpdateScratch::default());
//! let mut trace = LayerTrace::new();
//! let x = [1.0, 0.5, -0.5, 0.25];
//! for _ in 0..100 {
//!     let input = Vector::Dense(&x);
//!     layer.select_active(input, &[], Mode::Train, &mut sample_rng(0), &mut scratch, &mut trace)?;
//!     layer.forward(input, &mut trace)?;
//!     let out = trace.outputs().to_vec();
//!     for (p, g) in trace.gradient_mut().iter_mut().enumerate() {
//!         let target = if p == 3 { 1.0 } else { 0.0 };
//!         *g = out[p] - target;
//!     }
//!     let mut input_gradient = Vec::new();
//!     layer.backward(input, &mut trace, &mut input_gradient)?;
//!     adam.advance(); // one optimizer step per batch, before its updates
//!     layer.update(&[(input, &trace)][..], 1.0, &adam, &mut update)?;
//! }
//! layer.forward(Vector::Dense(&x), &mut trace)?;
//! assert!((trace.outputs()[3] - 1.0).abs() < 0.05, "{:?}", trace.outputs());
//! # Ok::<(), slide::SlideError>(())
//! ```

mod activation;
pub(crate) mod batched;
mod block;
mod changed_rows;
pub mod config;
#[cfg(feature = "ablations")]
mod exact_picks;
mod lsh;
mod lsh_config;
mod lsh_state;
mod negatives;
pub mod passes;
mod picks;
mod pool;
mod ranking;
mod retrieval;
pub mod state;
pub mod trace;
mod warmup;

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use slide_lsh::{CodeBuffer, QueryScratch};

use config::WEIGHTS;
pub use config::{
    Activation, DEFAULT_SHARED_REFRESH, Init, LayerConfig, LshConfig, Mode, Picks, Precision,
    SecondMoment, SoftmaxLoss, Warmup, WarmupLength, WeightLayout,
};
pub(crate) use config::{BlockLayout, M, V};
pub(crate) use lsh_state::LshState;
pub use negatives::Negatives;
pub(crate) use ranking::{rank_key, ranks_before};
pub use retrieval::Retrieval;
pub(crate) use state::MemorySource;
pub use state::{Elem, LayerState, StateSource, StateTensor, read_f32s, read_u32s, write_rows};
pub use trace::{LayerBatch, LayerTrace, SelectScratch};
use trace::{PoolScratch, QueryBuffers};

use crate::error::{Result, SlideError, config_error};
use crate::kernels::Values;

/// The random stream a layer's sampling draws from (random fill, random extra ids).
pub type SampleRng = Xoshiro256PlusPlus;

/// A [`SampleRng`] seeded from `seed`: seed each sample's stream from the step and the
/// sample's position for results that do not depend on the thread count.
pub fn sample_rng(seed: u64) -> SampleRng {
    SampleRng::seed_from_u64(seed)
}

/// A fully-connected layer `in_dim -> out_dim` whose weights live in one contiguous,
/// SIMD-padded allocation next to their Adam moments. See the [module documentation](self)
/// for a layer trained on its own, and the crate documentation for a [`Network`](crate::Network).
pub struct SparseLayer {
    pub(crate) in_dim: usize,
    pub(crate) out_dim: usize,
    pub(crate) activation: Activation,
    pub(crate) softmax_loss: SoftmaxLoss,
    pub(crate) lr_scale: f32,
    pub(crate) layout: WeightLayout,
    /// Floats per stored row: the row length rounded up to 16 (64 bytes).
    pub(crate) stride: usize,
    /// Row `r` of the weights, then its Adam moments: `[w | m | v]`, `stride` values each, f32
    /// or BF16 ([`Precision`], [`BlockLayout`]), one block of [`block`](Self::block) floats
    /// at `r * block`: an update of randomly chosen rows, bound by memory traffic, reads and
    /// writes one contiguous block (1.5 KB for a 128-wide f32 row) instead of three.
    pub(crate) params: Vec<f32>,
    pub(crate) moments: Precision,
    pub(crate) weights: Precision,
    /// Adam's second moment per weight, or per row (the first value of the row's `v`).
    pub(crate) second_moment: SecondMoment,
    pub(crate) bias: Vec<f32>,
    pub(crate) row_steps: Vec<u32>,
    pub(crate) bias_m: Vec<f32>,
    pub(crate) bias_v: Vec<f32>,
    pub(crate) bias_steps: Vec<u32>,
    pub(crate) lsh: Option<LshState>,
}

fn padded(len: usize) -> usize {
    len.div_ceil(16) * 16
}

impl SparseLayer {
    /// A layer with weights drawn from `seed` as `config.init` says, zero biases and zero
    /// Adam state. LSH tables are built from the initial weights.
    pub fn new(in_dim: usize, config: &LayerConfig, seed: u64) -> Result<Self> {
        let mut layer = Self::with_empty_tables(in_dim, config, seed)?;
        layer.rebuild_tables()?;
        Ok(layer)
    }

    /// [`new`](Self::new) with the LSH tables left empty (until
    /// [`rebuild_tables`](Self::rebuild_tables) or a restored state fills them): for a layer
    /// whose state is restored next, which saves hashing every neuron once.
    pub(crate) fn with_empty_tables(
        in_dim: usize,
        config: &LayerConfig,
        seed: u64,
    ) -> Result<Self> {
        Self::slice_with_empty_tables(in_dim, config, seed, 0..config.out_dim)
    }

    /// [`with_empty_tables`](Self::with_empty_tables) for the neurons `neurons` of the
    /// layer `config` describes: the weights are those the whole layer would draw for them
    /// (every neuron's draws are made, the others' dropped), so that the slices of a
    /// sharded layer together are the one-process layer. Only a neuron-major layer can be
    /// sliced.
    pub(crate) fn slice_with_empty_tables(
        in_dim: usize,
        config: &LayerConfig,
        seed: u64,
        neurons: std::ops::Range<usize>,
    ) -> Result<Self> {
        let what = || format!("layer {in_dim} -> {}", config.out_dim);
        let sliced = neurons != (0..config.out_dim);
        if sliced && (config.layout != WeightLayout::NeuronMajor || neurons.end > config.out_dim) {
            return Err(config_error(
                what(),
                "only a neuron-major layer can be split between ranks",
            ));
        }
        let out_dim = neurons.len();
        if in_dim == 0 {
            return Err(config_error(what(), "dimensions must be at least 1"));
        }
        if in_dim > u32::MAX as usize || config.out_dim > u32::MAX as usize {
            return Err(config_error(what(), "dimensions must be below 2^32"));
        }
        if let Some(warmup) = config.lsh.as_ref().and_then(|lsh| lsh.warmup) {
            warmup.check_in_steps()?;
        }
        config.validate().map_err(|e| match e {
            // The layer's own checks name the layer's shape; the LSH settings' name "lsh".
            SlideError::InvalidConfig { what: part, reason } if part == "layer" => {
                config_error(what(), reason)
            }
            other => other,
        })?;
        let (rows, row_len) = match config.layout {
            WeightLayout::NeuronMajor => (out_dim, in_dim),
            WeightLayout::InputMajor => (in_dim, out_dim),
        };
        let storage = BlockLayout {
            stride: padded(row_len),
            weights: config.weights,
            moments: config.moments,
        };
        let (stride, block) = (storage.stride, storage.block());
        let total = rows
            .checked_mul(block)
            .ok_or_else(|| config_error(what(), "weight matrix too large"))?;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut params = crate::kernels::zeroed_huge(total);
        let mut row = vec![0.0f32; row_len];
        let mut blocks = params.chunks_exact_mut(block);
        // Draw rows of the whole layer; keep this slice's (all of them unless sliced).
        let drawn = if sliced { config.out_dim } else { rows };
        for r in 0..drawn {
            for w in &mut row {
                *w = config.init.draw(in_dim, config.out_dim, &mut rng);
            }
            if !neurons.contains(&r) && sliced {
                continue;
            }
            if let Some(block) = blocks.next() {
                storage
                    .part_mut(block, WEIGHTS)
                    .first(row_len)
                    .store_nearest(&row);
            }
        }
        let mut layer = SparseLayer {
            in_dim,
            out_dim,
            activation: config.activation,
            softmax_loss: config.softmax_loss,
            lr_scale: config.lr_scale,
            layout: config.layout,
            stride,
            params,
            moments: config.moments,
            weights: config.weights,
            second_moment: config.second_moment,
            bias: vec![0.0; out_dim],
            row_steps: vec![0; rows],
            bias_m: vec![0.0; out_dim],
            bias_v: vec![0.0; out_dim],
            bias_steps: vec![0; out_dim],
            lsh: None,
        };
        if let Some(lsh) = &config.lsh {
            layer.lsh = Some(LshState::new(lsh, in_dim, out_dim, seed)?);
        }
        // A new layer stands at step 0, in the warm-up if there is one.
        layer.set_steps_taken(0);
        Ok(layer)
    }

    /// Input dimension.
    pub fn in_dim(&self) -> usize {
        self.in_dim
    }

    /// Number of neurons.
    pub fn out_dim(&self) -> usize {
        self.out_dim
    }

    /// The non-linearity.
    pub fn activation(&self) -> Activation {
        self.activation
    }

    /// The weight layout.
    pub fn layout(&self) -> WeightLayout {
        self.layout
    }

    /// Whether LSH picks this layer's active neurons.
    pub fn is_sampled(&self) -> bool {
        self.lsh.is_some()
    }

    /// Length of a stored row: `in_dim` (neuron-major) or `out_dim` (input-major).
    pub(crate) fn row_len(&self) -> usize {
        match self.layout {
            WeightLayout::NeuronMajor => self.in_dim,
            WeightLayout::InputMajor => self.out_dim,
        }
    }

    /// The stored row and position of the weight from `input` to `neuron`. Panics if
    /// either is out of range.
    fn position(&self, neuron: usize, input: usize) -> (usize, usize) {
        assert!(
            neuron < self.out_dim && input < self.in_dim,
            "weight index out of range"
        );
        match self.layout {
            WeightLayout::NeuronMajor => (neuron, input),
            WeightLayout::InputMajor => (input, neuron),
        }
    }

    /// Where the parts of a row block lie.
    #[inline]
    pub(crate) fn block_layout(&self) -> BlockLayout {
        BlockLayout {
            stride: self.stride,
            weights: self.weights,
            moments: self.moments,
        }
    }

    /// Stored row `r`'s weights (`stride` values, zero past the row length).
    #[inline]
    pub(crate) fn row(&self, r: usize) -> Values<'_> {
        let block = self.block();
        self.block_layout()
            .part(&self.params[r * block..][..block], WEIGHTS)
    }

    /// The stored rows' f32 weights and the distance between two rows' starts: row `r`'s
    /// weights are `rows[r * stride..][..row_len]` (Adam's moments sit in between). `None`
    /// for BF16 weights: see [`widen_rows`](Self::widen_rows).
    pub(crate) fn f32_rows(&self) -> Option<(&[f32], usize)> {
        (self.weights == Precision::F32).then_some((&self.params, self.block()))
    }

    /// The weights of the stored rows `rows` names, widened to f32, row after row without
    /// padding into `out` (`row_len` values a row; as many rows as `out` holds): a block
    /// `first..` for evaluation and full rebuilds, the moved rows' ids for a partial one.
    pub(crate) fn widen_rows(&self, rows: impl IntoIterator<Item = usize>, out: &mut [f32]) {
        let row_len = self.row_len();
        for (r, out) in rows.into_iter().zip(out.chunks_exact_mut(row_len.max(1))) {
            self.row(r).first(row_len).widen_into(out);
        }
    }

    /// Floats per stored row's block (weights and moments).
    #[inline]
    pub(crate) fn block(&self) -> usize {
        self.block_layout().block()
    }

    /// How the Adam moments of the weights are stored.
    pub fn moment_precision(&self) -> Precision {
        self.moments
    }

    /// How the weights are stored.
    pub fn weight_precision(&self) -> Precision {
        self.weights
    }

    /// Every neuron's bias.
    pub(crate) fn biases(&self) -> &[f32] {
        &self.bias
    }

    /// The weight from `input` to `neuron`. Panics if either is out of range.
    pub fn weight(&self, neuron: usize, input: usize) -> f32 {
        let (row, col) = self.position(neuron, input);
        self.row(row).get(col)
    }

    /// Sets the weight from `input` to `neuron`, rounded to nearest if the layer keeps BF16
    /// weights (the LSH tables are not rebuilt).
    pub fn set_weight(&mut self, neuron: usize, input: usize, value: f32) {
        let (row, col) = self.position(neuron, input);
        if let Some(lsh) = self.lsh.as_mut() {
            // Sampled layers are neuron-major: the row is the neuron's.
            lsh.changed.mark(&[row as u32]);
        }
        let (storage, block) = (self.block_layout(), self.block());
        storage
            .part_mut(&mut self.params[row * block..][..block], WEIGHTS)
            .set_nearest(col, value);
    }

    /// The bias of `neuron`.
    pub fn bias(&self, neuron: usize) -> f32 {
        self.bias[neuron]
    }

    /// Sets the bias of `neuron`.
    pub fn set_bias(&mut self, neuron: usize, value: f32) {
        self.bias[neuron] = value;
    }

    /// Adam's `(m, v)` for the weight from `input` to `neuron`, and the update count of the
    /// row holding it.
    pub fn adam_state(&self, neuron: usize, input: usize) -> (f32, f32, u32) {
        let (row, col) = self.position(neuron, input);
        let (m, v) = self.moments_at(row, col);
        (m, v, self.row_steps[row])
    }

    /// Heap bytes held by parameters, optimizer state, hash tables and a pool's copied rows.
    pub fn memory_bytes(&self) -> usize {
        let floats = self.params.len() + self.bias.len() * 3;
        let tables = self.lsh.as_ref().map_or(0, |l| {
            l.tables.stats().memory_bytes
                + (l.pool_cols.len() + l.pool_bias.len()) * 4
                + l.pool_cols_bf16.len() * 2
        });
        floats * 4 + (self.row_steps.len() + self.bias_steps.len()) * 4 + tables
    }

    /// Tells the layer how many training steps its model has taken, for settings that
    /// follow a schedule: the warm-up's random ids ([`LshConfig::warmup`]). A
    /// [`Network`](crate::Network) calls it after every step and when a state is restored;
    /// a model of your own calls it whenever its step count changes. A new layer stands at
    /// step 0.
    pub fn set_steps_taken(&mut self, steps: u64) {
        if let Some(lsh) = self.lsh.as_mut() {
            let warm = if steps < lsh.warmup_steps {
                lsh.warmup_random
            } else {
                0
            };
            lsh.sampling.random_extra = lsh.random_extra + warm;
        }
    }

    /// The most neurons one sample can activate when `forced` labels are forced in.
    pub(crate) fn max_active(&self, forced: usize) -> usize {
        match &self.lsh {
            Some(lsh) if !self.every_output_active() => lsh.tables.max_sampled(
                &lsh.sampling,
                forced + lsh.config.negatives.shared_negatives,
            ),
            _ => self.out_dim,
        }
    }

    /// Per-thread query scratch, sized up front so no query allocates.
    /// The scratch [`select_active`](Self::select_active) needs for this layer, one per
    /// thread (see [`SelectScratch`]).
    pub fn select_scratch(&self) -> SelectScratch {
        SelectScratch {
            buffers: self.lsh.as_ref().map(|lsh| {
                let room = lsh.pool_input_room(self.in_dim);
                QueryBuffers {
                    codes: CodeBuffer::for_family(&lsh.family),
                    query: QueryScratch::for_tables(&lsh.tables),
                    forced: Vec::with_capacity(1024 + lsh.config.negatives.shared_negatives),
                    pool: PoolScratch {
                        logits: Vec::with_capacity(lsh.shared_len),
                        keys: Vec::with_capacity(lsh.shared_len),
                        input_keys: Vec::with_capacity(room),
                        indices: Vec::with_capacity(room),
                        values: Vec::with_capacity(room),
                    },
                    centered: Vec::with_capacity(if lsh.config.retrieval.center_queries {
                        self.in_dim
                    } else {
                        0
                    }),
                }
            }),
            shape: (self.in_dim, self.out_dim),
        }
    }
}
