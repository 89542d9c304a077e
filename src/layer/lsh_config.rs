//! How a layer is sampled: [`LshConfig`] (family, tables, sampling, the corrections and
//! shared negatives), where its picks come from ([`Picks`]) and its warm-up ([`Warmup`]).

use slide_lsh::{BucketPolicy, FamilyKind, LshParams, Sampling, Strategy, TablesConfig};

use crate::error::Result;

/// LSH sampling settings of a layer.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
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
    #[cfg_attr(feature = "serde", serde(default))]
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
    /// negatives from a pool".
    #[cfg_attr(feature = "serde", serde(default))]
    pub shared_pool: usize,
    /// Training steps between two scorings of every neuron for the batch's mean input,
    /// which choose the shared negatives (or their pool) anew; in between they are
    /// re-ranked with the latest batch's labels. One scoring reads the whole weight
    /// matrix, about as many bytes as one step of 128 samples reads and writes with a
    /// 1,024-wide input and 387 active outputs per sample, so wide layers with small active sets
    /// refresh less often: 32 steps there train 13% faster than 8 at the same P@1
    /// (docs/label-trees.md, "A wide hidden layer"). Default 8.
    #[cfg_attr(feature = "serde", serde(default = "default_shared_refresh"))]
    pub shared_refresh: u64,
    /// Hash each input minus the mean input of a recent training batch (refreshed with the
    /// shared negatives) instead of the input itself. Rank-based families (WTA, DWTA) then
    /// see which coordinates are high for this input rather than which are high for every
    /// input (with ReLU inputs the same few coordinates win most bins for every sample).
    pub center_queries: bool,
    /// Where the picks come from: the tables, or (ablations) uniformly random ids or every
    /// neuron scored.
    #[cfg_attr(feature = "serde", serde(default))]
    pub picks: Picks,
    /// A warm-up of uniformly random ids (see [`Warmup`]); `None`: no warm-up.
    #[cfg_attr(feature = "serde", serde(default))]
    pub warmup: Option<Warmup>,
}

/// Where a sampled layer's per-sample picks (the active ids beyond the forced labels, the
/// shared negatives and the random ones) come from. [`Tables`](Self::Tables) is the
/// product; the other two are ablations that measure what the tables add or could add.
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
    /// Ablation: nothing from the tables; the sampling's budget (top-k's `k`) in uniformly
    /// random ids instead, on top of its `random_extra`: uniform negative sampling at the same
    /// budget, to measure what LSH adds. The layer then neither builds its tables nor hashes
    /// queries, so its time is a uniform sampler's (the shared negatives are still picked).
    /// Needs a budget.
    Uniform,
    /// Ablation, slow: in training, the tables' picks are replaced by the same number of the
    /// sample's highest-scoring neurons outside the forced ids (every neuron scored for
    /// every sample): the picks perfect retrieval would make, to measure what better tables
    /// could buy. Sources, log-Q and everything else stay as the tables left them.
    Exact,
}

/// A warm-up: [`random`](Self::random) uniformly random ids join the sampling's
/// `random_extra` ones for the first [`length`](Self::length) of training. With `log_q` the
/// correction follows the random ids: while any are drawn the tables' picks count as
/// themselves and the random ids stand for the rest of the outputs; without them every
/// non-forced id is taken for a uniform draw. The layer learns the step count from
/// [`SparseLayer::set_steps_taken`](crate::SparseLayer::set_steps_taken), which a
/// [`Network`](crate::Network) calls. At the Amazon-670K shape 128 random ids for the first
/// half epoch (78 steps of 20,000 samples) put exact P@1 ahead of uniform sampling after
/// every epoch: docs/accuracy.md, "A warm-up of uniform negatives, 16 tables". In TOML:
/// `warmup = { random = 128, length = { epochs = 0.5 } }`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(deny_unknown_fields)
)]
pub struct Warmup {
    /// Uniformly random ids per training sample during the warm-up (at least 1).
    pub random: usize,
    /// How long it lasts.
    pub length: WarmupLength,
}

/// How long a [`Warmup`] lasts.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "lowercase", deny_unknown_fields)
)]
pub enum WarmupLength {
    /// This many training steps (at least 1).
    Steps(u64),
    /// This many epochs of the training set (a positive number), which a layer cannot count:
    /// [`NetworkConfig::with_epoch_length`](crate::NetworkConfig::with_epoch_length) turns
    /// it into steps before the network is built.
    Epochs(f64),
}

/// [`LshConfig::shared_refresh`]'s default.
pub const DEFAULT_SHARED_REFRESH: u64 = 8;

#[cfg(feature = "serde")]
fn default_shared_refresh() -> u64 {
    DEFAULT_SHARED_REFRESH
}

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
            bucket_capacity: 128,
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
    /// The sampling's budget: top-k's `k`, or [`Sampling::budget`] (0 when unset).
    fn budget(&self) -> usize {
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
            Picks::Tables | Picks::Exact => self.sampling,
        }
    }

    /// The warm-up's random ids and length in steps, `(0, 0)` without one (a length in
    /// epochs, which [`Warmup::check_in_steps`] refuses at construction, counts as none).
    pub(crate) fn warmup_random_and_steps(&self) -> (usize, u64) {
        match self.warmup {
            Some(Warmup {
                random,
                length: WarmupLength::Steps(steps),
            }) => (random, steps),
            _ => (0, 0),
        }
    }

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
        self.family.validate(self.params)?;
        self.tables(out_dim, 0).validate()?;
        self.effective_sampling().validate(self.params.l)?;
        Ok(())
    }
}

impl Warmup {
    /// Checks that the warm-up draws at least one id for at least one step (or a positive
    /// number of epochs).
    pub fn validate(&self) -> Result<()> {
        let fail = |reason: String| Err(crate::error::config_error("lsh", reason));
        if self.random == 0 {
            return fail("warmup.random must be at least 1 (no warm-up: leave it out)".into());
        }
        match self.length {
            WarmupLength::Steps(0) => fail("warmup.length: steps must be at least 1".into()),
            WarmupLength::Epochs(e) if !(e.is_finite() && e > 0.0) => fail(format!(
                "warmup.length: epochs must be a positive number, got {e}"
            )),
            _ => Ok(()),
        }
    }

    /// Refuses a length still in epochs: what a layer is built from counts steps.
    pub(crate) fn check_in_steps(&self) -> Result<()> {
        match self.length {
            WarmupLength::Steps(_) => Ok(()),
            WarmupLength::Epochs(_) => Err(crate::error::config_error(
                "lsh",
                "a warm-up in epochs needs the epoch's length in steps first \
                 (NetworkConfig::with_epoch_length)",
            )),
        }
    }

    /// The same warm-up with a length in epochs turned into steps: `epochs` times
    /// `steps_per_epoch`, rounded down, at least 1.
    pub fn in_steps(self, steps_per_epoch: u64) -> Self {
        let length = match self.length {
            WarmupLength::Epochs(epochs) => {
                WarmupLength::Steps(((epochs * steps_per_epoch as f64) as u64).max(1))
            }
            steps => steps,
        };
        Warmup { length, ..self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Activation, LayerConfig, Network, NetworkConfig, SlideError};

    /// A warm-up in epochs becomes `epochs * steps_per_epoch` steps, rounded down, at least
    /// 1 (the shipped half epoch of 157 steps is 78); a network is not built from one still
    /// in epochs.
    #[test]
    fn a_warm_up_in_epochs_is_turned_into_steps_before_the_network_is_built() {
        let warmup = |length| Warmup { random: 4, length };
        let in_epochs = warmup(WarmupLength::Epochs(0.5));
        assert_eq!(in_epochs.in_steps(157), warmup(WarmupLength::Steps(78)));
        assert_eq!(in_epochs.in_steps(1), warmup(WarmupLength::Steps(1)));
        assert_eq!(
            warmup(WarmupLength::Steps(9)).in_steps(157),
            warmup(WarmupLength::Steps(9))
        );
        let lsh = LshConfig {
            warmup: Some(in_epochs),
            ..Default::default()
        };
        let layers = vec![LayerConfig::new(40, Activation::Softmax).sampled(lsh)];
        let config = NetworkConfig::new(10, layers);
        assert!(config.layers[0].validate().is_ok());
        assert!(matches!(
            Network::new(config.clone()),
            Err(SlideError::InvalidConfig { .. })
        ));
        let resolved = config.with_epoch_length(157);
        let lsh = resolved.layers[0].lsh.unwrap();
        assert_eq!(lsh.warmup, Some(warmup(WarmupLength::Steps(78))));
        assert_eq!(lsh.warmup_random_and_steps(), (4, 78));
        Network::new(resolved).unwrap();
    }
}
