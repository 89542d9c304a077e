//! A sampled layer's LSH state: its hash family and tables, how they are rebuilt, and the
//! shared negatives (or their pool) the layer derives from the mean input of a recent
//! training batch, refreshed by scoring every neuron and re-ranked in between.

use slide_lsh::{HashTables, LshFamily, Sampling, TablesConfig, TablesStats, Vector};

use super::{LshConfig, Precision, SparseLayer, rank_key};
use crate::error::Result;
use crate::kernels::{Values, kernels};

/// What the LSH state derives from the settings
/// ([`NetworkConfig::estimated_bytes`](crate::NetworkConfig::estimated_bytes) reads them
/// too, so the estimate and the built layer agree).
impl LshConfig {
    /// Whether each sample picks its shared negatives from a larger pool (see
    /// [`shared_pool`](Self::shared_pool)).
    pub(crate) fn pooled(&self) -> bool {
        self.shared_pool > self.shared_negatives
    }

    /// How many ids the layer keeps for the mean input: the pool, or the shared negatives.
    pub(crate) fn shared_len(&self) -> usize {
        self.shared_negatives.max(self.shared_pool)
    }

    /// The tables' config for a layer of `out_dim` neurons.
    pub(crate) fn tables(&self, out_dim: usize, seed: u64) -> TablesConfig {
        TablesConfig::for_family(
            self.params,
            out_dim,
            self.bucket_capacity,
            self.policy,
            seed,
        )
    }
}

/// What a layer sampled by LSH keeps beside its parameters (see the module documentation).
pub(crate) struct LshState {
    pub(crate) family: LshFamily,
    pub(crate) tables: HashTables,
    /// The settings as configured, read where they are used (not copied field by field:
    /// a new setting needs no line here).
    pub(crate) config: LshConfig,
    /// The sampling the layer runs ([`LshConfig::effective_sampling`]), whose
    /// `random_extra` a warm-up raises.
    pub(crate) sampling: Sampling,
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
    /// The configured `sampling.random_extra` and the warm-up's (see
    /// [`LshConfig::warmup`]): `sampling.random_extra` is `random_extra`, plus
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
        self.shared.len() > self.config.shared_negatives
    }

    /// The LSH state of a layer `in_dim -> out_dim` as `lsh` describes it, hashing with
    /// functions and tables drawn from `seed`; its tables are empty. `lsh` has passed
    /// [`LshConfig::validate`] (in [`LayerConfig::validate`](crate::LayerConfig::validate),
    /// which the layer runs first); what it checks is not checked again here.
    pub(crate) fn new(lsh: &LshConfig, in_dim: usize, out_dim: usize, seed: u64) -> Result<Self> {
        let family = LshFamily::new(lsh.family, in_dim, lsh.params, seed ^ 0x6c73_6800)?;
        let tables = HashTables::new(lsh.tables(out_dim, seed ^ 0x7462_6c00))?;
        let stats = tables.stats();
        let sampling = lsh.effective_sampling();
        let (warmup_random, warmup_steps) = lsh.warmup_random_and_steps();
        Ok(LshState {
            family,
            tables,
            config: *lsh,
            sampling,
            shared_len: lsh.shared_len(),
            shared: Vec::with_capacity(lsh.shared_len()),
            pool_cols: Vec::new(),
            pool_cols_bf16: Vec::new(),
            pool_bias: Vec::new(),
            rescored: Vec::new(),
            random_extra: sampling.random_extra,
            warmup_random,
            warmup_steps,
            center: Vec::new(),
            stats,
        })
    }
}

impl SparseLayer {
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
        if lsh.config.center_queries {
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
            .is_some_and(|l| l.config.shared_negatives > 0 || l.config.center_queries)
    }

    /// Whether what the layer derives from the mean input is due for a refresh after
    /// `step` training steps (see [`LshConfig::shared_refresh`]).
    pub(crate) fn mean_input_due(&self, step: u64) -> bool {
        self.lsh
            .as_ref()
            .is_some_and(|l| step.is_multiple_of(l.config.shared_refresh))
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
