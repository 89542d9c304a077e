//! Where a sampled layer's picks come from: the tables, or uniformly random ids
//! ([`Picks`]), and the sampling the layer then runs.

use slide_lsh::{Sampling, Strategy};

use super::lsh_config::LshConfig;

/// Where a sampled layer's per-sample picks (the active ids beyond the forced labels, the
/// shared negatives and the random ones) come from. [`Tables`](Self::Tables) is the
/// product; [`Uniform`](Self::Uniform) measures what the tables add. The ablation that
/// measures what better tables could add, `Exact`, is built only with the `ablations`
/// feature (the benchmarks' crate turns it on): a program built without it cannot ask for
/// it, and the training pass then carries no branch for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "kebab-case")
)]
pub enum Picks {
    /// The hash tables, queried with [`LshConfig::sampling`].
    #[default]
    Tables,
    /// Uniform negative sampling: nothing from the tables; the sampling's budget (top-k's
    /// `k`) in uniformly random ids instead, on top of its `random_extra`, the baseline
    /// that measures what LSH adds at the same budget. The layer then neither builds its
    /// tables nor hashes queries, so its time is a uniform sampler's (the shared negatives
    /// are still picked). Needs a budget.
    Uniform,
    /// Ablation, slow, built only with the `ablations` feature: in training, the tables'
    /// picks are replaced by the same number of the sample's highest-scoring neurons outside
    /// the forced ids (every neuron scored for every sample): the picks perfect retrieval
    /// would make, to measure what better tables could buy. Sources, log-Q and everything
    /// else stay as the tables left them.
    #[cfg(feature = "ablations")]
    Exact,
}

impl LshConfig {
    /// The sampling's budget: top-k's `k`, or [`Sampling::budget`] (0 when unset).
    pub(crate) fn budget(&self) -> usize {
        match self.sampling.strategy {
            Strategy::TopK { k } => k,
            _ => self.sampling.budget.unwrap_or(0),
        }
    }

    /// The sampling the layer runs: [`sampling`](Self::sampling), or with
    /// [`Picks::Uniform`] one that takes nothing from the tables (top-k becomes vanilla,
    /// the budget 0) and draws the budget's worth of random ids on top of `random_extra`.
    pub fn effective_sampling(&self) -> Sampling {
        match self.picks {
            Picks::Uniform => Sampling {
                strategy: match self.sampling.strategy {
                    Strategy::TopK { .. } => Strategy::Vanilla,
                    other => other,
                },
                budget: Some(0),
                random_extra: self.sampling.random_extra + self.budget(),
                ..self.sampling
            },
            Picks::Tables => self.sampling,
            #[cfg(feature = "ablations")]
            Picks::Exact => self.sampling,
        }
    }
}

impl LshConfig {
    /// The part of this sampling that rank `rank` of `ranks` runs over its slice of a
    /// sharded output layer (see [`Network::sharded`](crate::Network::sharded)): the
    /// budget, the minimum active set, the random ids (the warm-up's too), the shared
    /// negatives and their pool split between the ranks as the outputs are (each part at
    /// least 1 where the whole is; the parts add up to the whole when it is at least
    /// `ranks`), so that the active set of all ranks together is one process's. Tables, family and corrections are unchanged.
    pub fn rank_share(&self, rank: usize, ranks: usize) -> LshConfig {
        let part = |n: usize| {
            if n == 0 {
                0
            } else {
                crate::comm::shard_range(n, rank, ranks).len().max(1)
            }
        };
        let mut shared = *self;
        let sampling = &mut shared.sampling;
        if let Strategy::TopK { k } = &mut sampling.strategy {
            *k = part(*k);
        }
        sampling.budget = sampling.budget.map(part);
        sampling.min_active = part(sampling.min_active);
        sampling.random_extra = part(sampling.random_extra);
        shared.shared_negatives = part(self.shared_negatives);
        shared.shared_pool = part(self.shared_pool);
        if let Some(warmup) = &mut shared.warmup {
            warmup.random = part(warmup.random);
        }
        shared
    }
}
