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
//!     Activation, Adam, AdamConfig, Init, LayerConfig, LayerTrace, Mode, Precision,
//!     SparseLayer, UpdateScratch, WeightLayout, sample_rng,
//! };
//!
//! let config = LayerConfig {
//!     out_dim: 8,
//!     activation: Activation::Linear,
//!     layout: WeightLayout::NeuronMajor,
//!     init: Init::Glorot,
//!     lsh: None,
//!     moments: Precision::F32,
//!     weights: Precision::F32,
//! };
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

pub mod config;
pub mod passes;
pub mod state;
pub mod trace;

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use slide_lsh::{CodeBuffer, HashTables, LshFamily, QueryScratch, Sampling, TablesStats, Vector};

pub(crate) use config::BlockLayout;
use config::WEIGHTS;
pub use config::{
    Activation, DEFAULT_SHARED_REFRESH, Init, LayerConfig, LshConfig, Mode, Precision, WeightLayout,
};
pub(crate) use passes::{rank_key, ranks_before};
pub(crate) use state::MemorySource;
pub use state::{Elem, LayerState, StateSource, StateTensor};
use trace::QueryBuffers;
pub use trace::{LayerBatch, LayerTrace, SelectScratch};

use crate::error::{Result, config_error};
use crate::kernels::{Values, kernels};

/// The random stream a layer's sampling draws from (random fill, random extra ids).
pub type SampleRng = Xoshiro256PlusPlus;

/// A [`SampleRng`] seeded from `seed`: seed each sample's stream from the step and the
/// sample's position for results that do not depend on the thread count.
pub fn sample_rng(seed: u64) -> SampleRng {
    SampleRng::seed_from_u64(seed)
}

pub(crate) struct LshState {
    pub(crate) family: LshFamily,
    pub(crate) tables: HashTables,
    pub(crate) sampling: Sampling,
    pub(crate) log_q: bool,
    pub(crate) shared_negatives: usize,
    /// See [`LshConfig::shared_shift`].
    pub(crate) shared_shift: f32,
    /// How many ids `shared` holds once refreshed: the pool, or the shared negatives (see
    /// [`LshConfig::shared_pool`]).
    pub(crate) shared_len: usize,
    /// The neurons that scored highest for the mean input at the last refresh, best first:
    /// the shared negatives, or with a pool the pool they are picked from per sample.
    pub(crate) shared: Vec<u32>,
    /// With a pool (`shared` longer than `shared_negatives`): a copy of its weights input
    /// by input (`pool_cols[i * len + p]` is input `i`'s weight in pool member `p`, `len`
    /// the pool's length) in the layer's precision (`pool_cols` f32 or `pool_cols_bf16`),
    /// and of its biases, in `shared`'s order, taken whenever `shared` changes (the
    /// weights do not change between two steps, where samples read it).
    pub(crate) pool_cols: Vec<f32>,
    pub(crate) pool_cols_bf16: Vec<u16>,
    pub(crate) pool_bias: Vec<f32>,
    /// Scratch of [`SparseLayer::rescore_shared`]: the scored union's keys (see
    /// `rank_key`), kept for its capacity.
    pub(crate) rescored: Vec<u64>,
    pub(crate) center_queries: bool,
    /// See [`LshConfig::shared_refresh`].
    pub(crate) shared_refresh: u64,
    /// See [`LshConfig::exact_picks`].
    pub(crate) exact_picks: bool,
    /// The configured `sampling.random_extra` and the warm-up's (see
    /// [`LshConfig::warmup_random`]): `sampling.random_extra` is `random_extra`, plus
    /// `warmup_random` in the first `warmup_steps` steps.
    pub(crate) random_extra: usize,
    pub(crate) warmup_random: usize,
    pub(crate) warmup_steps: u64,
    /// The mean input subtracted from queries (empty until the first refresh).
    pub(crate) center: Vec<f32>,
    /// What the tables held after the last rebuild.
    pub(crate) stats: TablesStats,
}

impl LshState {
    /// Whether each sample picks its shared negatives from a larger pool.
    pub(crate) fn pooled(&self) -> bool {
        self.shared.len() > self.shared_negatives
    }
}

/// A fully-connected layer `in_dim -> out_dim` whose weights live in one contiguous,
/// SIMD-padded allocation next to their Adam moments. See the [module documentation](self)
/// for a layer trained on its own, and the crate documentation for a [`Network`](crate::Network).
pub struct SparseLayer {
    pub(crate) in_dim: usize,
    pub(crate) out_dim: usize,
    pub(crate) activation: Activation,
    pub(crate) layout: WeightLayout,
    /// Floats per stored row: the row length rounded up to 16 (64 bytes).
    pub(crate) stride: usize,
    /// Row `r` of the weights, then its Adam moments: `[w | m | v]`, `stride` values each,
    /// f32 or BF16 (see [`Precision`] and [`BlockLayout`]), in one block of
    /// [`block`](Self::block) floats at `r * block`. An update reads and writes one
    /// contiguous 1.5 KB block (1 KB with BF16 moments, 768 bytes with BF16 weights too)
    /// for a 128-wide row instead of three scattered ones; the update of randomly chosen
    /// rows is bound by memory traffic, so this is what it costs.
    pub(crate) params: Vec<f32>,
    pub(crate) moments: Precision,
    pub(crate) weights: Precision,
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
    /// Adam state. LSH tables are built from the initial
    /// weights.
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
        let what = || format!("layer {in_dim} -> {}", config.out_dim);
        if in_dim == 0 || config.out_dim == 0 {
            return Err(config_error(what(), "dimensions must be at least 1"));
        }
        if in_dim > u32::MAX as usize || config.out_dim > u32::MAX as usize {
            return Err(config_error(what(), "dimensions must be below 2^32"));
        }
        if config.layout == WeightLayout::InputMajor && config.lsh.is_some() {
            return Err(config_error(
                what(),
                "LSH sampling hashes neuron rows and needs the neuron-major layout",
            ));
        }
        let (rows, row_len) = match config.layout {
            WeightLayout::NeuronMajor => (config.out_dim, in_dim),
            WeightLayout::InputMajor => (in_dim, config.out_dim),
        };
        if config.weights == Precision::Bf16 && config.moments != Precision::Bf16 {
            return Err(config_error(what(), "BF16 weights need BF16 moments"));
        }
        let storage = BlockLayout {
            stride: padded(row_len),
            weights: config.weights,
            moments: config.moments,
        };
        let (stride, block) = (storage.stride, storage.block());
        let total = rows
            .checked_mul(block)
            .ok_or_else(|| config_error(what(), "weight matrix too large"))?;
        config
            .init
            .validate()
            .map_err(|e| config_error(what(), e))?;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut params = crate::kernels::zeroed_huge(total);
        let mut row = vec![0.0f32; row_len];
        for block in params.chunks_exact_mut(block) {
            for w in &mut row {
                *w = config.init.draw(in_dim, config.out_dim, &mut rng);
            }
            storage
                .part_mut(block, WEIGHTS)
                .first(row_len)
                .store_nearest(&row);
        }
        let mut layer = SparseLayer {
            in_dim,
            out_dim: config.out_dim,
            activation: config.activation,
            layout: config.layout,
            stride,
            params,
            moments: config.moments,
            weights: config.weights,
            bias: vec![0.0; config.out_dim],
            row_steps: vec![0; rows],
            bias_m: vec![0.0; config.out_dim],
            bias_v: vec![0.0; config.out_dim],
            bias_steps: vec![0; config.out_dim],
            lsh: None,
        };
        if let Some(lsh) = &config.lsh {
            lsh.validate(config.out_dim)?;
            let family = LshFamily::new(lsh.family, in_dim, lsh.params, seed ^ 0x6c73_6800)?;
            let tables = HashTables::new(lsh.tables(config.out_dim, seed ^ 0x7462_6c00))?;
            let stats = tables.stats();
            layer.lsh = Some(LshState {
                family,
                tables,
                sampling: lsh.sampling,
                log_q: lsh.log_q,
                shared_negatives: lsh.shared_negatives,
                shared_shift: lsh.shared_shift,
                shared_len: lsh.shared_len(),
                shared: Vec::with_capacity(lsh.shared_len()),
                pool_cols: Vec::new(),
                pool_cols_bf16: Vec::new(),
                pool_bias: Vec::new(),
                rescored: Vec::new(),
                center_queries: lsh.center_queries,
                shared_refresh: lsh.shared_refresh,
                exact_picks: lsh.exact_picks,
                random_extra: lsh.sampling.random_extra,
                warmup_random: lsh.warmup_random,
                warmup_steps: lsh.warmup_steps,
                center: Vec::new(),
                stats,
            });
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

    /// The weights of stored rows `first..first + count`, widened to f32, row after row
    /// without padding into `out` (`count * row_len` values).
    pub(crate) fn widen_rows(&self, first: usize, out: &mut [f32]) {
        let row_len = self.row_len();
        for (r, out) in out.chunks_exact_mut(row_len.max(1)).enumerate() {
            self.row(first + r).first(row_len).widen_into(out);
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
    /// follow a schedule: the warm-up's random ids ([`LshConfig::warmup_random`]). A
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

    /// Re-hashes every neuron's weight row into the layer's tables (no-op for dense layers
    /// and for a sampling that takes nothing from the tables: uniform sampling).
    pub fn rebuild_tables(&mut self) -> Result<()> {
        // Out of the layer while its rows are read.
        let Some(mut lsh) = self.lsh.take_if(|l| l.sampling.uses_tables()) else {
            return Ok(());
        };
        let rebuilt = match self.f32_rows() {
            Some((rows, block)) => lsh.tables.rebuild_dense(&lsh.family, rows, block),
            None => lsh
                .tables
                .rebuild_filled(&lsh.family, |first, out| self.widen_rows(first, out)),
        };
        lsh.stats = lsh.tables.stats();
        self.lsh = Some(lsh);
        Ok(rebuilt?)
    }

    /// What the LSH tables held after the last rebuild (bucket occupancy, ids dropped by
    /// full buckets); `None` for a layer without LSH.
    pub fn table_stats(&self) -> Option<TablesStats> {
        self.lsh.as_ref().map(|l| l.stats)
    }

    /// The most neurons one sample can activate when `forced` labels are forced in.
    pub(crate) fn max_active(&self, forced: usize) -> usize {
        match &self.lsh {
            Some(lsh) => lsh
                .tables
                .max_sampled(&lsh.sampling, forced + lsh.shared_negatives),
            None => self.out_dim,
        }
    }

    /// Per-thread query scratch, sized up front so no query allocates.
    /// The scratch [`select_active`](Self::select_active) needs for this layer, one per
    /// thread (see [`SelectScratch`]).
    pub fn select_scratch(&self) -> SelectScratch {
        SelectScratch {
            buffers: self.lsh.as_ref().map(|lsh| QueryBuffers {
                codes: CodeBuffer::for_family(&lsh.family),
                query: QueryScratch::for_tables(&lsh.tables),
                forced: Vec::with_capacity(1024 + lsh.shared_negatives),
                pool_logits: Vec::with_capacity(lsh.shared_len),
                pool_keys: Vec::with_capacity(lsh.shared_len),
                centered: Vec::with_capacity(if lsh.center_queries { self.in_dim } else { 0 }),
            }),
            shape: (self.in_dim, self.out_dim),
        }
    }

    /// Refreshes what the layer derives from the mean input of a recent training batch:
    /// the shared negatives (see [`LshConfig::shared_negatives`]) or their pool (see
    /// [`LshConfig::shared_pool`]), the neurons with the highest pre-activation for
    /// `mean_input`, and the query center (see
    /// [`LshConfig::center_queries`]).
    ///
    /// A [`Network`](crate::Network) calls this every 8 steps and at every rebuild, and
    /// [`rescore_shared`](Self::rescore_shared) in between; a caller training the layer on
    /// its own calls either as often as it likes (no-op for a layer without LSH). Panics if
    /// `mean_input` is not `in_dim` long.
    pub fn refresh_mean_input(&mut self, mean_input: &[f32]) {
        assert_eq!(mean_input.len(), self.in_dim, "mean input length");
        let Some(count) = self.lsh.as_ref().map(|l| l.shared_len) else {
            return;
        };
        let best = if count > 0 {
            self.top_neurons(Vector::Dense(mean_input), count)
        } else {
            Vec::new()
        };
        // Out of the layer while the pool's rows are copied.
        let Some(mut lsh) = self.lsh.take() else {
            return;
        };
        lsh.shared.clear();
        lsh.shared.extend_from_slice(&best);
        self.copy_pool_rows(&mut lsh);
        if lsh.center_queries {
            lsh.center.clear();
            lsh.center.extend_from_slice(mean_input);
        }
        self.lsh = Some(lsh);
    }

    /// Re-ranks the shared negatives between two refreshes: scores them and `candidates`
    /// for `mean_input` and keeps the best [`shared_negatives`](LshConfig::shared_negatives)
    /// (with a pool, [`shared_pool`](LshConfig::shared_pool)) of that union, best first
    /// (ties: the lower id). A [`Network`](crate::Network) calls
    /// this after every training step of its output layer that does not refresh, with the
    /// mean input of the batch and the batch's labels as candidates: the step has just
    /// pulled those rows up, so they are the ones that can have risen into the top, and a
    /// label of many recent samples becomes a shared negative within a step instead of up
    /// to 8 (exact P@1 after 3 epochs at the Amazon-670K shape: docs/accuracy.md,
    /// "Re-ranking the shared negatives after every step"). One dot product per id; once
    /// its scratch has grown, allocates nothing.
    ///
    /// No-op for a layer without shared negatives and before the first
    /// [`refresh_mean_input`](Self::refresh_mean_input). Panics if `mean_input` is not
    /// `in_dim` long or a candidate is not a neuron of the layer.
    pub fn rescore_shared(&mut self, mean_input: &[f32], candidates: &[u32]) {
        assert_eq!(mean_input.len(), self.in_dim, "mean input length");
        assert!(
            candidates.iter().all(|&j| (j as usize) < self.out_dim),
            "a candidate is not a neuron of the layer"
        );
        // Out of the layer while its rows are scored.
        let Some(mut lsh) = self.lsh.take() else {
            return;
        };
        if !lsh.shared.is_empty() {
            let (k, input) = (kernels(), Vector::Dense(mean_input));
            let scored = &mut lsh.rescored;
            scored.clear();
            scored.extend(
                lsh.shared
                    .iter()
                    .chain(candidates)
                    .map(|&j| rank_key(self.neuron_logit(k, j as usize, input), j)),
            );
            // An id listed twice has the same key both times, so its copies end up adjacent.
            scored.sort_unstable();
            scored.dedup();
            lsh.shared.clear();
            lsh.shared
                .extend(scored.iter().take(lsh.shared_len).map(|&key| key as u32));
            self.copy_pool_rows(&mut lsh);
        }
        self.lsh = Some(lsh);
    }

    /// With a pool (see [`LshConfig::shared_pool`]), copies its weights input by input
    /// (as stored: BF16 takes half the bytes) and its biases into `lsh`, so that a sample
    /// scores the whole pool with one `axpy` per nonzero input (a dot product per member
    /// cost about 30 ns, most of it the reduction); otherwise nothing. Allocates only to
    /// grow.
    pub(crate) fn copy_pool_rows(&self, lsh: &mut LshState) {
        lsh.pool_cols.clear();
        lsh.pool_cols_bf16.clear();
        lsh.pool_bias.clear();
        if !lsh.pooled() {
            return;
        }
        let (len, in_dim) = (lsh.shared.len(), self.in_dim);
        if self.weights == Precision::Bf16 {
            lsh.pool_cols_bf16.resize(len * in_dim, 0);
            let row = |j: u32| match self.row(j as usize).first(in_dim) {
                Values::Bf16(row) => row,
                Values::F32(_) => unreachable!("a BF16 layer's row"),
            };
            transpose_rows(&lsh.shared, row, in_dim, &mut lsh.pool_cols_bf16);
        } else {
            lsh.pool_cols.resize(len * in_dim, 0.0);
            let row = |j: u32| match self.row(j as usize).first(in_dim) {
                Values::F32(row) => row,
                Values::Bf16(_) => unreachable!("an f32 layer's row"),
            };
            transpose_rows(&lsh.shared, row, in_dim, &mut lsh.pool_cols);
        }
        lsh.pool_bias
            .extend(lsh.shared.iter().map(|&j| self.bias[j as usize]));
    }

    /// Whether the layer keeps shared negatives (and has had its first refresh).
    pub(crate) fn has_shared_negatives(&self) -> bool {
        self.lsh.as_ref().is_some_and(|l| !l.shared.is_empty())
    }

    /// Whether the layer uses the mean input (shared negatives or centered queries).
    pub(crate) fn uses_mean_input(&self) -> bool {
        self.lsh
            .as_ref()
            .is_some_and(|l| l.shared_negatives > 0 || l.center_queries)
    }

    /// Whether what the layer derives from the mean input is due for a refresh after
    /// `step` training steps (see [`LshConfig::shared_refresh`]).
    pub(crate) fn mean_input_due(&self, step: u64) -> bool {
        self.lsh
            .as_ref()
            .is_some_and(|l| step.is_multiple_of(l.shared_refresh))
    }
}

/// Writes the rows of `ids` (each `in_dim` long, from `row`) input by input into `cols`:
/// `cols[i * ids.len() + p] = row(ids[p])[i]`. Sixteen rows at a time, so that each input's
/// writes fill runs of 16 values instead of touching a cache line each (one row at a time,
/// a pool of 2,048 took about 1 ms per copy).
fn transpose_rows<'a, T: Copy + 'a>(
    ids: &[u32],
    row: impl Fn(u32) -> &'a [T],
    in_dim: usize,
    cols: &mut [T],
) {
    const RUN: usize = 16;
    let len = ids.len();
    for (chunk, block) in ids.chunks(RUN).enumerate() {
        let mut rows: [&[T]; RUN] = [&[]; RUN];
        for (r, &j) in rows.iter_mut().zip(block) {
            *r = &row(j)[..in_dim];
        }
        let (first, rows) = (chunk * RUN, &rows[..block.len()]);
        for i in 0..in_dim {
            let out = &mut cols[i * len + first..i * len + first + block.len()];
            for (o, r) in out.iter_mut().zip(rows) {
                *o = r[i];
            }
        }
    }
}
