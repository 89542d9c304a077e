//! Where a sampled layer's picks come from ([`Picks`]) and the sampling a layer then runs.
//! The product has one answer, the tables; the others are ablations, built only with the
//! `ablations` feature, and so is the `picks` key of a config file's
//! `[network.layers.lsh]`. One of the concepts a layer's LSH settings are made of; it knows
//! nothing of them.

use slide_lsh::Sampling;
#[cfg(feature = "ablations")]
use slide_lsh::Strategy;

#[cfg(feature = "ablations")]
use crate::error::Result;

/// Where a sampled layer's per-sample picks (the active ids beyond the forced labels, the
/// shared negatives and the random ones) come from. [`Tables`](Self::Tables) is the
/// product and, without the `ablations` feature, the only variant. The ablations, built
/// only with that feature (the benchmarks' crate turns it on) so that a program built
/// without it cannot ask for them and its training pass carries no branch for them:
/// `Uniform` measures what the tables add, `Exact` what better tables could add.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "kebab-case")
)]
pub enum Picks {
    /// The hash tables, queried with the layer's sampling.
    #[default]
    Tables,
    /// Ablation, built only with the `ablations` feature. Uniform negative sampling:
    /// nothing from the tables; the sampling's budget (top-k's `k`) in uniformly random ids
    /// instead, on top of its `random_extra`, the baseline that measures what LSH adds at
    /// the same budget. The layer then neither builds its tables nor hashes queries, so its
    /// time is a uniform sampler's (the shared negatives are still picked). Needs a budget.
    #[cfg(feature = "ablations")]
    Uniform,
    /// Ablation, slow, built only with the `ablations` feature: in training, the tables'
    /// picks are replaced by the same number of the sample's highest-scoring neurons outside
    /// the forced ids (every neuron scored for every sample): the picks perfect retrieval
    /// would make, to measure what better tables could buy. Sources, log-Q and everything
    /// else stay as the tables left them.
    #[cfg(feature = "ablations")]
    Exact,
}

impl Picks {
    /// The sampling a layer with these picks runs for the configured `sampling`: the same,
    /// or with `Uniform` (an ablation) one that takes nothing from the tables (top-k
    /// becomes vanilla, the budget 0) and draws the budget's worth of random ids on top of
    /// `random_extra`.
    pub fn sampling(self, sampling: Sampling) -> Sampling {
        match self {
            Picks::Tables => sampling,
            #[cfg(feature = "ablations")]
            Picks::Uniform => Sampling {
                strategy: match sampling.strategy {
                    Strategy::TopK { .. } => Strategy::Vanilla,
                    other => other,
                },
                budget: Some(0),
                random_extra: sampling.random_extra + budget(&sampling),
                ..sampling
            },
            #[cfg(feature = "ablations")]
            Picks::Exact => sampling,
        }
    }

    /// Checks that uniform picks have a budget to replace the tables' picks with.
    #[cfg(feature = "ablations")]
    pub fn validate(self, sampling: &Sampling) -> Result<()> {
        if self == Picks::Uniform && budget(sampling) == 0 {
            return Err(crate::error::config_error(
                "lsh",
                "uniform picks need a budget: it is how many random ids replace the tables' picks",
            ));
        }
        Ok(())
    }

    /// Whether these are the product's picks, which a config file leaves out.
    #[cfg(all(feature = "serde", feature = "ablations"))]
    pub(crate) fn is_tables(&self) -> bool {
        *self == Picks::Tables
    }
}

/// A sampling's budget: top-k's `k`, or [`Sampling::budget`] (0 when unset).
#[cfg(feature = "ablations")]
fn budget(sampling: &Sampling) -> usize {
    match sampling.strategy {
        Strategy::TopK { k } => k,
        _ => sampling.budget.unwrap_or(0),
    }
}
