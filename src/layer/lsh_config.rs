//! How a layer is sampled: [`LshConfig`] (family, tables, sampling, the corrections and
//! shared negatives), its settings' names in a config file and a checkpoint's description,
//! and their checks: what a new setting touches in the core, in one file. Where its picks
//! come from is in `picks.rs`, its warm-up in `warmup.rs`, what the layer's LSH state
//! derives from it (the tables' config, the shared negatives' length) in `lsh.rs`.

#[cfg(feature = "serde")]
use slide_lsh::Strategy;
use slide_lsh::{BucketPolicy, FamilyKind, LshParams, Sampling};

use super::picks::Picks;
use super::warmup::{Warmup, WarmupLength};
use crate::error::Result;

/// LSH sampling settings of a layer.
///
/// With the `serde` feature it reads and writes the form of a config file's
/// `[network.layers.lsh]` (its serde form, `LshSpec`, is below): flat keys, the strategy
/// by name (`strategy = "vanilla"`, `"top-k"` or `"threshold"`) with `budget` and `min_hits`
/// beside it, and `k`, `l`, `range_pow` and `bucket_capacity` that may be left out to be
/// tuned from the budget and the layer's width, which a [`LayerConfig`](crate::LayerConfig)
/// knows (read alone, an `LshConfig` needs them given).
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(try_from = "LshSpec", into = "LshSpec")
)]
pub struct LshConfig {
    /// Hash family.
    pub family: FamilyKind,
    /// `K`, `L`, `range_pow`.
    pub params: LshParams,
    /// Most neurons per bucket.
    pub bucket_capacity: usize,
    /// What a full bucket does.
    pub policy: BucketPolicy,
    /// How candidates become the active set (budget, minimum with random fill).
    pub sampling: Sampling,
    /// Output layer only: the sampled-softmax (log-Q) correction in training. Each
    /// non-label active output's logit is raised by `ln((n - f) / (a - f))` before the
    /// softmax (`n` outputs, `a` active, `f` of them forced labels), as if the `a - f`
    /// negatives had been drawn uniformly from the `n - f`: each stands for `(n - f) /
    /// (a - f)` outputs, and the loss estimates the full softmax's instead of the loss over
    /// the active set alone. Without it every output that is rarely sampled as a negative is
    /// rarely pushed down, and under exact scoring such outputs outrank the labels.
    ///
    /// When the sampling also draws `random_extra` uniformly random ids, the tables' picks
    /// count as certain, like the forced ids: they are scored as themselves, and only the
    /// random ids are shifted, by `ln((n - f - t) / r)` for `t` table picks and `r` random
    /// ids, so that the random ids estimate what the forced and retrieved ones leave out.
    pub log_q: bool,
    /// This many neurons that score highest for the mean input of the latest training
    /// batch join every sample's active set, in training and in LSH-mode evaluation. A
    /// [`Network`](crate::Network) scores every neuron for them every
    /// [`shared_refresh`](Self::shared_refresh) steps and at every table rebuild, and in between re-ranks them with the labels of the batch it just
    /// trained (an output layer; see [`SparseLayer::rescore_shared`](crate::SparseLayer::rescore_shared)).
    /// In an output layer fed by ReLU units every input shares a positive mean direction,
    /// and outputs aligned with it ("hubs") score high for every input; dense training
    /// pushes them down at every step, sampled training only when it happens to draw
    /// them. Sampled with certainty, they get no log-Q shift unless
    /// [`shared_shift`](Self::shared_shift) says otherwise. 0 turns this off.
    pub shared_negatives: usize,
    /// With `log_q`, the fraction (0 to 1) of the sample's log-Q shift that the shared
    /// negatives' logits get too. At 0 they are scored as themselves, exactly as a full
    /// softmax would score them, while every table pick is scored as `(n - f) / (a - f)`
    /// outputs: the picks are pushed down that much harder than the shared negatives, which
    /// then outrank the labels of the samples the model cannot place (one output the top-1
    /// of 2-2.6 times the share of the most frequent label at the Amazon-670K shape). At 1
    /// they are pushed as hard as the picks, and the model learns half as much. Between
    /// (0.25 at the Amazon-670K shape; 0.5 with a [`shared_pool`](Self::shared_pool), whose
    /// per-sample picks are harder) each shared negative counts for `e^(x s)` outputs like it
    /// at a fraction `x` of a shift `s`: docs/accuracy.md, "The shared negatives' share of
    /// the log-Q shift".
    pub shared_shift: f32,
    /// Per-sample shared negatives: when larger than
    /// [`shared_negatives`](Self::shared_negatives), the layer keeps this many outputs
    /// that score highest for the mean input (the pool, refreshed and re-ranked as the
    /// shared negatives are), and each sample takes the `shared_negatives` of them that
    /// score highest for its own input, in training and in LSH-mode evaluation: the
    /// hard negatives of a sample are mostly among the few thousand outputs that score
    /// high for every input, but which of them differs from sample to sample. A sample
    /// scores the pool with one `axpy` per nonzero input over a copy of the pool's weights
    /// taken at each refresh and re-ranking. 0 (or at most `shared_negatives`): every
    /// sample gets the same shared negatives. At the Amazon-670K shape 2,048 (with
    /// `shared_shift` 0.5) raised exact P@1 after 3 epochs by 2.35 / 3.15 points (seeds 1 /
    /// 2) and LSH-mode P@1 from about 0.19 to 0.43: docs/accuracy.md, "Per-sample shared
    /// negatives from a pool". Read from a config file with the layer's width, a pool
    /// wider than the layer is the whole layer, so one recipe serves any label count.
    pub shared_pool: usize,
    /// Training steps between two scorings of every neuron for the batch's mean input,
    /// which choose the shared negatives (or their pool) anew; in between they are
    /// re-ranked with the latest batch's labels. One scoring reads the whole weight
    /// matrix, about as many bytes as one step of 128 samples reads and writes with a
    /// 1,024-wide input and 387 active outputs per sample, so wide layers with small active sets
    /// refresh less often: 32 steps there train 13% faster than 8 at the same P@1
    /// (docs/label-trees.md, "A wide hidden layer"). Default 8.
    pub shared_refresh: u64,
    /// Hash each input minus the mean input of a recent training batch (refreshed with the
    /// shared negatives) instead of the input itself. Rank-based families (WTA, DWTA) then
    /// see which coordinates are high for this input rather than which are high for every
    /// input (with ReLU inputs the same few coordinates win most bins for every sample).
    pub center_queries: bool,
    /// Where the picks come from: the tables, or (ablations) uniformly random ids or every
    /// neuron scored.
    pub picks: Picks,
    /// A warm-up of uniformly random ids (see [`Warmup`]); `None`: no warm-up.
    pub warmup: Option<Warmup>,
}

/// [`LshConfig::shared_refresh`]'s default.
pub const DEFAULT_SHARED_REFRESH: u64 = 8;

/// [`LshConfig::bucket_capacity`]'s default when `K`, `L` and `range_pow` are given.
const DEFAULT_BUCKET_CAPACITY: usize = 128;

impl Default for LshConfig {
    /// DWTA with bins of 8, `K` 4, `L` 16, `range_pow` 12 (4,096 buckets), 128 ids per
    /// bucket (FIFO), vanilla sampling (the union of the buckets), and every correction,
    /// shared negative and warm-up off. Set what differs:
    ///
    /// ```
    /// use slide::LshConfig;
    /// use slide::lsh::Sampling;
    /// let lsh = LshConfig { sampling: Sampling::top_k(256), log_q: true, ..Default::default() };
    /// assert_eq!(lsh.shared_refresh, 8);
    /// ```
    fn default() -> Self {
        LshConfig {
            family: FamilyKind::Dwta { bin_size: 8 },
            params: LshParams {
                k: 4,
                l: 16,
                range_pow: 12,
            },
            bucket_capacity: DEFAULT_BUCKET_CAPACITY,
            policy: BucketPolicy::Fifo,
            sampling: Sampling::vanilla(),
            log_q: false,
            shared_negatives: 0,
            shared_shift: 0.0,
            shared_pool: 0,
            shared_refresh: DEFAULT_SHARED_REFRESH,
            center_queries: false,
            picks: Picks::Tables,
            warmup: None,
        }
    }
}

impl LshConfig {
    /// The settings' names in [`describe`](Self::describe) that only shape training: the
    /// [architecture hash](crate::NetworkConfig::architecture_hash) leaves them out.
    pub(crate) const TRAINING_ONLY: [&str; 5] = [
        "shared_shift",
        "shared_refresh",
        "exact_picks",
        "warmup_random",
        "warmup_steps",
    ];

    /// Every setting as `put(name, value)` for
    /// [`NetworkConfig::describe`](crate::NetworkConfig::describe), in a fixed order: `family`, `params`,
    /// `bucket_capacity`, `policy`, `sampling`, `log_q`, `shared_negatives`,
    /// `center_queries`, then, each only when not its default so that checkpoints from
    /// before it existed keep their identity, `shared_pool` (if above `shared_negatives`),
    /// `shared_shift`, `shared_refresh`, `exact_picks` and the warm-up's `warmup_random`
    /// and `warmup_steps`. A new setting a resume must compare is put here (and in
    /// [`TRAINING_ONLY`](Self::TRAINING_ONLY) if it only shapes training).
    pub(crate) fn describe(&self, put: &mut dyn FnMut(&str, String)) {
        put("family", format!("{:?}", self.family));
        put("params", format!("{:?}", self.params));
        put("bucket_capacity", self.bucket_capacity.to_string());
        put("policy", format!("{:?}", self.policy));
        // The sampling the layer runs (uniform picks rewrite it), as before the ablation
        // had a name of its own.
        put("sampling", format!("{:?}", self.effective_sampling()));
        put("log_q", self.log_q.to_string());
        put("shared_negatives", self.shared_negatives.to_string());
        put("center_queries", self.center_queries.to_string());
        if self.pooled() {
            put("shared_pool", self.shared_pool.to_string());
        }
        if self.shared_shift != 0.0 {
            put("shared_shift", self.shared_shift.to_string());
        }
        if self.shared_refresh != DEFAULT_SHARED_REFRESH {
            put("shared_refresh", self.shared_refresh.to_string());
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

    /// Checks everything the lsh crate can check before the input dimension is known: the
    /// family's settings and `K`, `L`, `range_pow`, the tables' limits for `out_dim`
    /// neurons, and the sampling's settings.
    pub fn validate(&self, out_dim: usize) -> Result<()> {
        if !(0.0..=1.0).contains(&self.shared_shift) {
            return Err(crate::error::config_error(
                "lsh",
                format!("shared_shift must be in [0, 1], got {}", self.shared_shift),
            ));
        }
        if self.shared_pool > out_dim {
            return Err(crate::error::config_error(
                "lsh",
                format!(
                    "shared_pool ({}) must be at most the layer's {out_dim} neurons",
                    self.shared_pool
                ),
            ));
        }
        if let Some(warmup) = self.warmup {
            warmup.validate()?;
        }
        if self.picks == Picks::Uniform && self.budget() == 0 {
            return Err(crate::error::config_error(
                "lsh",
                "uniform picks need a budget: it is how many random ids replace the tables' picks"
                    .to_string(),
            ));
        }
        if self.shared_refresh == 0 {
            return Err(crate::error::config_error(
                "lsh",
                "shared_refresh must be at least 1 step".to_string(),
            ));
        }
        if self.shared_pool > 0 && self.shared_negatives == 0 {
            return Err(crate::error::config_error(
                "lsh",
                "shared_pool needs shared_negatives: it is what each sample picks them from"
                    .to_string(),
            ));
        }
        if self.family == FamilyKind::WeightedMinHash {
            return Err(crate::error::config_error(
                "lsh",
                "family \"weighted_minhash\" hashes a memory's sparse units ([memory.lsh]); a \
                 layer's signed weight rows need simhash, wta, dwta or minhash"
                    .to_string(),
            ));
        }
        self.family.validate(self.params)?;
        self.tables(out_dim, 0).validate()?;
        self.effective_sampling().validate(self.params.l)?;
        Ok(())
    }
}

/// [`LshConfig`] as a config file writes it (`[network.layers.lsh]`; see [`LshConfig`]),
/// every key known (an unknown one is an error naming it). [`resolve`](Self::resolve) makes
/// the config from it, once: a new setting is a field here and a line there.
#[cfg(feature = "serde")]
#[derive(serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LshSpec {
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
    log_q: bool,
    #[serde(default)]
    shared_negatives: usize,
    #[serde(default)]
    shared_shift: f32,
    #[serde(default)]
    shared_pool: usize,
    #[serde(default = "default_shared_refresh")]
    shared_refresh: u64,
    #[serde(default)]
    center_queries: bool,
    #[serde(default)]
    picks: Picks,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    warmup: Option<Warmup>,
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
fn default_shared_refresh() -> u64 {
    DEFAULT_SHARED_REFRESH
}

#[cfg(feature = "serde")]
impl LshSpec {
    /// The config of a layer of `width` neurons (`None`: not known, so `k`, `l` and
    /// `range_pow` must be given): the one place they are tuned from the budget
    /// ([`slide_lsh::tune_for_budget`]).
    pub(crate) fn resolve(self, width: Option<usize>) -> Result<LshConfig> {
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
        Ok(LshConfig {
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
            log_q: spec.log_q,
            shared_negatives: spec.shared_negatives,
            shared_shift: spec.shared_shift,
            // A pool at least as wide as the layer is every output (a recipe made for
            // 670K labels runs on 591).
            shared_pool: width.map_or(spec.shared_pool, |w| spec.shared_pool.min(w)),
            shared_refresh: spec.shared_refresh,
            center_queries: spec.center_queries,
            picks: spec.picks,
            warmup: spec.warmup,
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

/// Every size given. Top-k's `k` is written as the budget: a `Sampling::budget` beside it,
/// which top-k ignores, is not kept.
#[cfg(feature = "serde")]
impl From<LshConfig> for LshSpec {
    fn from(config: LshConfig) -> Self {
        let sampling = config.sampling;
        let (strategy, budget, min_hits) = match sampling.strategy {
            Strategy::Vanilla => (StrategyName::Vanilla, sampling.budget, None),
            Strategy::TopK { k } => (StrategyName::TopK, Some(k), None),
            Strategy::Threshold { min_hits } => {
                (StrategyName::Threshold, sampling.budget, Some(min_hits))
            }
        };
        LshSpec {
            family: config.family,
            k: Some(config.params.k),
            l: Some(config.params.l),
            range_pow: Some(config.params.range_pow),
            bucket_capacity: Some(config.bucket_capacity),
            policy: config.policy,
            strategy,
            budget,
            min_hits,
            min_active: sampling.min_active,
            random_extra: sampling.random_extra,
            log_q: config.log_q,
            shared_negatives: config.shared_negatives,
            shared_shift: config.shared_shift,
            shared_pool: config.shared_pool,
            shared_refresh: config.shared_refresh,
            center_queries: config.center_queries,
            picks: config.picks,
            warmup: config.warmup,
        }
    }
}
