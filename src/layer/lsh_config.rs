//! A sampled layer's LSH settings, [`LshConfig`], composed of its concepts, each with its
//! own defaults, checks and part of the config file in its own file: retrieval
//! ([`Retrieval`], `retrieval.rs`), the negatives ([`Negatives`], `negatives.rs`), the
//! warm-up ([`Warmup`], `warmup.rs`) and, an ablation, the picks ([`Picks`], `picks.rs`).
//! The concepts know nothing of this file; it puts them together: the struct of the four,
//! the description a checkpoint records, the checks in order, the share of one rank of a
//! sharded layer, and the serde form of `[network.layers.lsh]` (`LshSpec`: the concepts'
//! keys side by side). docs/design.md, "Adding an LSH setting", walks a new key through.

use slide_lsh::Sampling;

use super::negatives::Negatives;
use super::picks::Picks;
use super::retrieval::Retrieval;
#[cfg(feature = "serde")]
use super::retrieval::RetrievalSpec;
use super::warmup::{Warmup, WarmupLength};
use crate::error::Result;

pub use super::negatives::{DEFAULT_SHARED_REFRESH, DEFAULT_SHARED_RESCORE};

/// LSH sampling settings of a layer: its [`Retrieval`], its [`Negatives`], its [`Picks`]
/// and its [`Warmup`], each a concept with its own defaults and checks.
///
/// With the `serde` feature it reads and writes the form of a config file's
/// `[network.layers.lsh]`: the concepts' flat keys (an unknown one is an error naming it),
/// with `k`, `l`, `range_pow` and `bucket_capacity` that may be left out to be tuned from
/// the budget and the layer's width, which a [`LayerConfig`](crate::LayerConfig) knows
/// (read alone, an `LshConfig` needs them given). The `picks` key is read only with the
/// `ablations` feature.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(try_from = "LshSpec", into = "LshSpec")
)]
pub struct LshConfig {
    /// How a sample's candidates are found and become its active set: hash family, `K`,
    /// `L`, `range_pow`, buckets, sampling, centered queries.
    pub retrieval: Retrieval,
    /// The negatives beyond the tables' picks and their correction: log-Q, the shared
    /// negatives, their shift, pool and refresh period.
    pub negatives: Negatives,
    /// Where the picks come from: the tables (see [`Picks`]; the other answers are
    /// ablations, built only with the `ablations` feature).
    pub picks: Picks,
    /// A warm-up of uniformly random ids (see [`Warmup`]); `None`: no warm-up.
    pub warmup: Option<Warmup>,
}

impl Default for LshConfig {
    /// [`Retrieval`]'s and [`Negatives`]' defaults (DWTA with bins of 8, `K` 4, `L` 16,
    /// `range_pow` 12, 128 ids per bucket, FIFO, vanilla sampling; every correction and
    /// shared negative off), the tables' picks and no warm-up. Set what differs:
    ///
    /// ```
    /// use slide::lsh::Sampling;
    /// use slide::{LshConfig, Negatives, Retrieval};
    /// let lsh = LshConfig {
    ///     retrieval: Retrieval { sampling: Sampling::top_k(256), ..Default::default() },
    ///     negatives: Negatives { log_q: true, ..Default::default() },
    ///     ..Default::default()
    /// };
    /// assert_eq!(lsh.negatives.shared_refresh, 8);
    /// ```
    fn default() -> Self {
        LshConfig {
            retrieval: Retrieval::default(),
            negatives: Negatives::default(),
            picks: Picks::Tables,
            warmup: None,
        }
    }
}

impl LshConfig {
    /// The settings' names in [`describe`](Self::describe) that only shape training: the
    /// [architecture hash](crate::NetworkConfig::architecture_hash) leaves them out.
    pub(crate) const TRAINING_ONLY: [&str; 9] = [
        "dense_share",
        "shared_shift",
        "shared_pool_inputs",
        "shared_refresh",
        "shared_rescore",
        "min_gradient",
        "exact_picks",
        "warmup_random",
        "warmup_steps",
    ];

    /// Every setting as `put(name, value)` for
    /// [`NetworkConfig::describe`](crate::NetworkConfig::describe), in a fixed order: `family`, `params`,
    /// `bucket_capacity`, `policy`, `sampling`, `log_q`, `shared_negatives`,
    /// `center_queries`, then, each only when not its default so that checkpoints from
    /// before it existed keep their identity, `shared_pool` (if above `shared_negatives`),
    /// `shared_shift`, `shared_pool_inputs`, `shared_refresh`, `shared_rescore`,
    /// `min_gradient`, `dense_share`, `exact_picks` and the
    /// warm-up's `warmup_random`
    /// and `warmup_steps`. A new setting a resume must compare is put here (and in
    /// [`TRAINING_ONLY`](Self::TRAINING_ONLY) if it only shapes training).
    pub(crate) fn describe(&self, put: &mut dyn FnMut(&str, String)) {
        put("family", format!("{:?}", self.retrieval.family));
        put("params", format!("{:?}", self.retrieval.params));
        put(
            "bucket_capacity",
            self.retrieval.bucket_capacity.to_string(),
        );
        put("policy", format!("{:?}", self.retrieval.policy));
        // The sampling the layer runs (uniform picks rewrite it), as before the ablation
        // had a name of its own.
        put("sampling", format!("{:?}", self.effective_sampling()));
        put("log_q", self.negatives.log_q.to_string());
        put(
            "shared_negatives",
            self.negatives.shared_negatives.to_string(),
        );
        put("center_queries", self.retrieval.center_queries.to_string());
        if self.negatives.pooled() {
            put("shared_pool", self.negatives.shared_pool.to_string());
        }
        if self.negatives.shared_shift != 0.0 {
            put("shared_shift", self.negatives.shared_shift.to_string());
        }
        if self.negatives.shared_pool_inputs != 0 {
            put(
                "shared_pool_inputs",
                self.negatives.shared_pool_inputs.to_string(),
            );
        }
        if self.negatives.shared_refresh != DEFAULT_SHARED_REFRESH {
            put("shared_refresh", self.negatives.shared_refresh.to_string());
        }
        if self.negatives.shared_rescore != DEFAULT_SHARED_RESCORE {
            put("shared_rescore", self.negatives.shared_rescore.to_string());
        }
        if self.negatives.min_gradient != 0.0 {
            put("min_gradient", self.negatives.min_gradient.to_string());
        }
        if self.retrieval.dense_share != super::retrieval::DEFAULT_DENSE_SHARE {
            put("dense_share", self.retrieval.dense_share.to_string());
        }
        // The names these settings had before `picks` and `warmup` grouped them, so
        // checkpoints written then compare equal.
        #[cfg(feature = "ablations")]
        if self.picks == Picks::Exact {
            put("exact_picks", "true".to_string());
        }
        if let Some(warmup) = self.warmup {
            put("warmup_random", warmup.random.to_string());
            put(
                "warmup_steps",
                match warmup.length {
                    WarmupLength::Steps(steps) => steps.to_string(),
                    WarmupLength::Epochs(e) => format!("{e} epochs"),
                },
            );
        }
    }

    /// Checks every concept's settings ([`Negatives::validate`], [`Warmup::validate`], the
    /// picks' and [`Retrieval::validate`], which checks everything the lsh crate can check
    /// before the input dimension is known) for a layer of `out_dim` neurons.
    pub fn validate(&self, out_dim: usize) -> Result<()> {
        self.negatives.validate(out_dim)?;
        if let Some(warmup) = self.warmup {
            warmup.validate()?;
        }
        #[cfg(feature = "ablations")]
        self.picks.validate(&self.retrieval.sampling)?;
        self.retrieval.validate(out_dim)
    }

    /// The sampling the layer runs: [`Retrieval::sampling`] as its
    /// [`picks`](Self::picks) rewrite it ([`Picks::sampling`]).
    pub fn effective_sampling(&self) -> Sampling {
        self.picks.sampling(self.retrieval.sampling)
    }

    /// The warm-up's random ids and length in steps, `(0, 0)` without one (a length in
    /// epochs, which [`Warmup::check_in_steps`] refuses at construction, counts as none).
    pub(crate) fn warmup_random_and_steps(&self) -> (usize, u64) {
        self.warmup.map_or((0, 0), |w| w.random_and_steps())
    }

    /// The part of this sampling that rank `rank` of `ranks` runs over its slice of a
    /// sharded output layer (see [`Network::sharded`](crate::Network::sharded)): the
    /// budget, the minimum active set, the random ids (the warm-up's too), the shared
    /// negatives and their pool split between the ranks as the outputs are (each part at
    /// least 1 where the whole is; the parts add up to the whole when it is at least
    /// `ranks`), so that the active set of all ranks together is one process's. Tables,
    /// family and corrections are unchanged.
    pub fn rank_share(&self, rank: usize, ranks: usize) -> LshConfig {
        let part = |n: usize| {
            if n == 0 {
                0
            } else {
                crate::comm::shard_range(n, rank, ranks).len().max(1)
            }
        };
        LshConfig {
            retrieval: self.retrieval.rank_share(&part),
            negatives: self.negatives.rank_share(&part),
            picks: self.picks,
            warmup: self.warmup.map(|w| w.rank_share(&part)),
        }
    }
}

/// [`LshConfig`] as a config file writes it (`[network.layers.lsh]`): each concept's keys,
/// flat side by side, every key known (an unknown one is an error naming it).
/// [`resolve`](Self::resolve) makes the config from it, once. A concept's new key is a
/// field of that concept's serde form, not of this one.
#[cfg(feature = "serde")]
#[derive(serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LshSpec {
    #[serde(flatten)]
    retrieval: RetrievalSpec,
    #[serde(flatten)]
    negatives: Negatives,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    warmup: Option<Warmup>,
    /// Read only with the `ablations` feature: without it `picks` is an unknown key.
    #[cfg(feature = "ablations")]
    #[serde(default, skip_serializing_if = "Picks::is_tables")]
    picks: Picks,
}

#[cfg(feature = "serde")]
impl LshSpec {
    /// The config of a layer of `width` neurons (`None`: not known, so `k`, `l` and
    /// `range_pow` must be given; see `RetrievalSpec::resolve`).
    pub(crate) fn resolve(self, width: Option<usize>) -> Result<LshConfig> {
        Ok(LshConfig {
            retrieval: self.retrieval.resolve(width)?,
            negatives: self.negatives.for_width(width),
            #[cfg(feature = "ablations")]
            picks: self.picks,
            #[cfg(not(feature = "ablations"))]
            picks: Picks::Tables,
            warmup: self.warmup,
        })
    }
}

#[cfg(feature = "serde")]
impl TryFrom<LshSpec> for LshConfig {
    type Error = crate::SlideError;
    fn try_from(spec: LshSpec) -> Result<Self> {
        spec.resolve(None)
    }
}

/// Every size given (see `From<Retrieval> for RetrievalSpec`).
#[cfg(feature = "serde")]
impl From<LshConfig> for LshSpec {
    fn from(config: LshConfig) -> Self {
        LshSpec {
            retrieval: config.retrieval.into(),
            negatives: config.negatives,
            warmup: config.warmup,
            #[cfg(feature = "ablations")]
            picks: config.picks,
        }
    }
}

#[cfg(test)]
mod tests;
