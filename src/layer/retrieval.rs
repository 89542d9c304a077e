//! How a sampled layer finds a sample's candidates ([`Retrieval`]): the hash family, the
//! tables' sizes and bucket policy, how candidates become the active set, and whether
//! queries are centered; its defaults, its checks, its part of a config file's
//! `[network.layers.lsh]` (`RetrievalSpec`, whose `resolve` is the one place `K`, `L`,
//! `range_pow` and the bucket capacity are tuned from the budget) and its share on one rank
//! of a sharded layer. One of the concepts a layer's LSH settings are made of; it knows
//! nothing of them.

use slide_lsh::{BucketPolicy, FamilyKind, LshParams, Sampling, Strategy, TablesConfig};

use crate::error::Result;

/// How a sampled layer retrieves a sample's candidates from its hash tables, and how they
/// become its active set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Retrieval {
    /// Hash family.
    pub family: FamilyKind,
    /// `K`, `L`, `range_pow`.
    pub params: LshParams,
    /// Most neurons per bucket.
    pub bucket_capacity: usize,
    /// What a full bucket does.
    pub policy: BucketPolicy,
    /// How candidates become the active set (budget, minimum with random fill, random ids
    /// on top).
    pub sampling: Sampling,
    /// Hash each input minus the mean input of a recent training batch (refreshed with the
    /// shared negatives) instead of the input itself. Rank-based families (WTA, DWTA) then
    /// see which coordinates are high for this input rather than which are high for every
    /// input (with ReLU inputs the same few coordinates win most bins for every sample).
    pub center_queries: bool,
    /// The layer computes every output, asking its tables nothing, where the sampling's
    /// `min_active` is at least this share of its outputs (default 1: where it covers them
    /// all, the same outputs either way), in (0, 1]: below 1, a layer whose active set
    /// would be most of it anyway skips the hashing, the queries and the shared negatives.
    pub dense_share: f32,
}

/// [`Retrieval::dense_share`]'s default: dense only where the sampling takes every output.
pub(crate) const DEFAULT_DENSE_SHARE: f32 = 1.0;

/// [`Retrieval::bucket_capacity`]'s default when `K`, `L` and `range_pow` are given.
const DEFAULT_BUCKET_CAPACITY: usize = 128;

impl Default for Retrieval {
    /// DWTA with bins of 8, `K` 4, `L` 16, `range_pow` 12 (4,096 buckets), 128 ids per
    /// bucket (FIFO), vanilla sampling (the union of the buckets), queries as they are.
    fn default() -> Self {
        Retrieval {
            family: FamilyKind::Dwta { bin_size: 8 },
            params: LshParams {
                k: 4,
                l: 16,
                range_pow: 12,
            },
            bucket_capacity: DEFAULT_BUCKET_CAPACITY,
            policy: BucketPolicy::Fifo,
            sampling: Sampling::vanilla(),
            center_queries: false,
            dense_share: DEFAULT_DENSE_SHARE,
        }
    }
}

impl Retrieval {
    /// Checks everything the lsh crate can check before the input dimension is known: the
    /// family's settings and `K`, `L`, `range_pow`, the tables' limits for `out_dim`
    /// neurons, and the sampling's settings.
    pub fn validate(&self, out_dim: usize) -> Result<()> {
        if !(self.dense_share > 0.0 && self.dense_share <= 1.0) {
            return Err(crate::error::config_error(
                "lsh",
                format!("dense_share must be in (0, 1], got {}", self.dense_share),
            ));
        }
        self.family.validate(self.params)?;
        self.tables(out_dim, 0).validate()?;
        self.sampling.validate(self.params.l)?;
        Ok(())
    }

    /// The tables' config for a layer of `out_dim` neurons, drawn from `seed`
    /// ([`NetworkConfig::estimated_bytes`](crate::NetworkConfig::estimated_bytes) reads it
    /// too, so the estimate and the built layer agree).
    pub(crate) fn tables(&self, out_dim: usize, seed: u64) -> TablesConfig {
        TablesConfig::for_family(
            self.params,
            out_dim,
            self.bucket_capacity,
            self.policy,
            seed,
        )
    }

    /// The sampling's sizes split by `part` (top-k's `k`, the budget, the minimum active
    /// set, the random ids), as one rank of a sharded layer runs it; the tables unchanged.
    pub(crate) fn rank_share(self, part: &impl Fn(usize) -> usize) -> Self {
        let mut sampling = self.sampling;
        if let Strategy::TopK { k } = &mut sampling.strategy {
            *k = part(*k);
        }
        sampling.budget = sampling.budget.map(part);
        sampling.min_active = part(sampling.min_active);
        sampling.random_extra = part(sampling.random_extra);
        Retrieval { sampling, ..self }
    }
}

/// [`Retrieval`] as a config file writes it, flat among `[network.layers.lsh]`'s keys: the
/// strategy by name (`strategy = "vanilla"`, `"top-k"` or `"threshold"`) with `budget` and
/// `min_hits` beside it, and `k`, `l`, `range_pow` and `bucket_capacity` that may be left
/// out to be tuned from the budget and the layer's width. Its keys are this struct's
/// fields; a new one is a field here and a line in [`resolve`](Self::resolve) and in the
/// `From` below.
#[cfg(feature = "serde")]
#[derive(serde::Deserialize, serde::Serialize)]
pub(crate) struct RetrievalSpec {
    family: FamilyKind,
    /// `K`, `L`, `range_pow`: all three, or none (tuned from `budget` and the width).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    k: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    l: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    range_pow: Option<u32>,
    /// [`DEFAULT_BUCKET_CAPACITY`] when left out, or tuned with `K`, `L`, `range_pow`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bucket_capacity: Option<usize>,
    #[serde(default)]
    policy: BucketPolicy,
    strategy: StrategyName,
    /// [`Sampling::budget`], and top-k's `k`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    budget: Option<usize>,
    /// The threshold strategy's `min_hits`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    min_hits: Option<u16>,
    #[serde(default)]
    min_active: usize,
    #[serde(default)]
    random_extra: usize,
    #[serde(default)]
    center_queries: bool,
    #[serde(default = "default_dense_share")]
    dense_share: f32,
}

#[cfg(feature = "serde")]
fn default_dense_share() -> f32 {
    DEFAULT_DENSE_SHARE
}

/// The name of a [`Strategy`] in a config file; its setting is `budget` or `min_hits`.
#[cfg(feature = "serde")]
#[derive(Clone, Copy, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
enum StrategyName {
    Vanilla,
    TopK,
    Threshold,
}

#[cfg(feature = "serde")]
impl RetrievalSpec {
    /// The retrieval of a layer of `width` neurons (`None`: not known, so `k`, `l` and
    /// `range_pow` must be given): the one place they are tuned from the budget
    /// ([`slide_lsh::tune_for_budget`]).
    pub(crate) fn resolve(self, width: Option<usize>) -> Result<Retrieval> {
        let fail = |reason: &str| Err(crate::error::config_error("lsh", reason.to_string()));
        let spec = self;
        let (k, l, range_pow, budget, family) =
            (spec.k, spec.l, spec.range_pow, spec.budget, spec.family);
        let (params, bucket_capacity) = match (k, l, range_pow, budget, width) {
            (Some(k), Some(l), Some(range_pow), _, _) => (
                LshParams { k, l, range_pow },
                spec.bucket_capacity.unwrap_or(DEFAULT_BUCKET_CAPACITY),
            ),
            (None, None, None, Some(budget), Some(width)) => {
                let tuned = slide_lsh::tune_for_budget(width, budget, family.bits_per_code()?)?;
                let capacity = spec.bucket_capacity.unwrap_or(tuned.bucket_capacity);
                (tuned.params, capacity)
            }
            (None, None, None, None, _) => {
                return fail("k, l and range_pow are tuned from budget, which is missing");
            }
            (None, None, None, Some(_), None) => {
                return fail(
                    "k, l and range_pow are tuned from budget and the layer's width: read \
                     the layer's config, or give them",
                );
            }
            _ => {
                return fail("give all of k, l and range_pow, or none of them (tuned from budget)");
            }
        };
        let strategy = match (spec.strategy, budget, spec.min_hits) {
            (StrategyName::Vanilla, _, _) => Strategy::Vanilla,
            (StrategyName::TopK, Some(k), _) => Strategy::TopK { k },
            (StrategyName::Threshold, _, Some(min_hits)) => Strategy::Threshold { min_hits },
            (StrategyName::TopK, None, _) => return fail("strategy top-k needs budget (k)"),
            (StrategyName::Threshold, _, None) => {
                return fail("strategy threshold needs min_hits");
            }
        };
        Ok(Retrieval {
            family,
            params,
            bucket_capacity,
            policy: spec.policy,
            sampling: Sampling {
                strategy,
                budget,
                min_active: spec.min_active,
                random_extra: spec.random_extra,
            },
            center_queries: spec.center_queries,
            dense_share: spec.dense_share,
        })
    }
}

/// Every size given. Top-k's `k` is written as the budget: a `Sampling::budget` beside it,
/// which top-k ignores, is not kept.
#[cfg(feature = "serde")]
impl From<Retrieval> for RetrievalSpec {
    fn from(retrieval: Retrieval) -> Self {
        let sampling = retrieval.sampling;
        let (strategy, budget, min_hits) = match sampling.strategy {
            Strategy::Vanilla => (StrategyName::Vanilla, sampling.budget, None),
            Strategy::TopK { k } => (StrategyName::TopK, Some(k), None),
            Strategy::Threshold { min_hits } => {
                (StrategyName::Threshold, sampling.budget, Some(min_hits))
            }
        };
        RetrievalSpec {
            family: retrieval.family,
            k: Some(retrieval.params.k),
            l: Some(retrieval.params.l),
            range_pow: Some(retrieval.params.range_pow),
            bucket_capacity: Some(retrieval.bucket_capacity),
            policy: retrieval.policy,
            strategy,
            budget,
            min_hits,
            min_active: sampling.min_active,
            random_extra: sampling.random_extra,
            center_queries: retrieval.center_queries,
            dense_share: retrieval.dense_share,
        }
    }
}
