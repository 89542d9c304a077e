//! What a sampled layer keeps beside its parameters ([`LshState`]): its hash family and
//! tables, its settings, the sampling it runs, and the shared negatives (or their pool)
//! and query center it derives from the mean input. Built from an [`LshConfig`]; the
//! layer's upkeep of it (rebuilds, refreshes) is in `lsh.rs`.

use slide_lsh::{HashTables, LshFamily, Sampling, TablesStats};

use super::changed_rows::ChangedRows;
use super::lsh_config::LshConfig;
use crate::error::Result;

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
    /// [`Negatives::shared_pool`](crate::Negatives::shared_pool)).
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
    /// The neurons whose rows were written since the last rebuild: the next one hashes
    /// them alone where it can.
    pub(crate) changed: ChangedRows,
}

impl LshState {
    /// Whether each sample picks its shared negatives from a larger pool.
    pub(crate) fn pooled(&self) -> bool {
        self.shared.len() > self.config.negatives.shared_negatives
    }

    /// The LSH state of a layer `in_dim -> out_dim` as `lsh` describes it, hashing with
    /// functions and tables drawn from `seed`; its tables are empty. `lsh` has passed
    /// [`LshConfig::validate`] (in [`LayerConfig::validate`](crate::LayerConfig::validate),
    /// which the layer runs first); what it checks is not checked again here.
    pub(crate) fn new(lsh: &LshConfig, in_dim: usize, out_dim: usize, seed: u64) -> Result<Self> {
        let family = LshFamily::new(
            lsh.retrieval.family,
            in_dim,
            lsh.retrieval.params,
            seed ^ 0x6c73_6800,
        )?;
        let tables = HashTables::new(lsh.retrieval.tables(out_dim, seed ^ 0x7462_6c00))?;
        let stats = tables.stats();
        let sampling = lsh.effective_sampling();
        let (warmup_random, warmup_steps) = lsh.warmup_random_and_steps();
        Ok(LshState {
            family,
            tables,
            config: *lsh,
            sampling,
            shared_len: lsh.negatives.shared_len(),
            shared: Vec::with_capacity(lsh.negatives.shared_len()),
            pool_cols: Vec::new(),
            pool_cols_bf16: Vec::new(),
            pool_bias: Vec::new(),
            rescored: Vec::new(),
            random_extra: sampling.random_extra,
            warmup_random,
            warmup_steps,
            center: Vec::new(),
            stats,
            changed: ChangedRows::all(out_dim),
        })
    }
}
