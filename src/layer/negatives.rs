//! The negatives a sampled output layer trains against beside its tables' picks, and how
//! their logits are corrected ([`Negatives`]): the log-Q correction and the shared
//! negatives (their number, share of the shift, pool, refresh and re-ranking periods);
//! their defaults, checks, part of a config file's `[network.layers.lsh]` (flat keys, each
//! with its default) and share on one rank of a sharded layer. One of the concepts a layer's LSH
//! settings are made of; it knows nothing of them.

use crate::error::Result;

/// The negatives of a sampled output layer beyond its tables' picks, and their correction.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default)
)]
pub struct Negatives {
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
    /// [`shared_refresh`](Self::shared_refresh) steps and at every table rebuild, and in
    /// between re-ranks them with the labels of the batch it just trained (an output
    /// layer; see [`SparseLayer::rescore_shared`](crate::SparseLayer::rescore_shared)).
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
    /// at a fraction `x` of a shift `s`: docs/notebook/accuracy.md, "The shared negatives' share of
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
    /// 2) and LSH-mode P@1 from about 0.19 to 0.43: docs/notebook/accuracy.md, "Per-sample shared
    /// negatives from a pool". Read from a config file with the layer's width, a pool
    /// wider than the layer is the whole layer, so one recipe serves any label count.
    pub shared_pool: usize,
    /// With a pool, a sample scores it with only this many of its inputs, those largest in
    /// magnitude (ties: the lower index), when it has more nonzero ones; 0: with all of
    /// them. The pool's scores only choose a sample's hard negatives among the pool, and a
    /// ReLU layer's largest outputs carry most of each score: at 512 hidden units on the
    /// Debian sets (docs/notebook/real-data.md) 64 of about 250 nonzero inputs choose as well as all
    /// of them, at a fifth of the multiply-adds. Needs a pool.
    pub shared_pool_inputs: usize,
    /// Training steps between two scorings of every neuron for the batch's mean input,
    /// which choose the shared negatives (or their pool) anew; in between they are
    /// re-ranked with the latest batch's labels. One scoring reads the whole weight
    /// matrix, about as many bytes as one step of 128 samples reads and writes with a
    /// 1,024-wide input and 387 active outputs per sample, so wide layers with small active
    /// sets refresh less often: 32 steps there train 13% faster than 8 at the same P@1
    /// (docs/notebook/label-trees.md, "A wide hidden layer"). Default
    /// [`DEFAULT_SHARED_REFRESH`].
    pub shared_refresh: u64,
    /// Training steps between two re-rankings of the shared negatives (or their pool) with
    /// a batch's labels, between [`shared_refresh`](Self::shared_refresh)es (an output
    /// layer; see [`SparseLayer::rescore_shared`](crate::SparseLayer::rescore_shared)). A
    /// re-ranking scores the pool and the batch's labels and, with a pool, copies its
    /// weights anew: on deb-deps with a pool of 2,048, 2.6 ms of a 57-ms step, and every 4
    /// steps trains 4% faster at the same P@1 and P@5 (docs/notebook/performance.md, "The
    /// pool re-ranked every 4 steps"). Default [`DEFAULT_SHARED_RESCORE`]: after every
    /// step.
    pub shared_rescore: u64,
    /// In a training step, an active output whose loss gradient on its logit (`p - y`,
    /// the sample's share of it) is smaller than this in magnitude is left out of the
    /// step's backward pass and update: its row, moments and bias stay as they are, as
    /// if the tables had not picked it, and its row is not read again for the gradient on
    /// the layer's input. Its logit still counts in the softmax. Adam takes a step of about
    /// the learning rate for any gradient, however small, so most of the update's rows are
    /// outputs the sample already scores near 0: on deb-deps (docs/notebook/real-data.md) a third
    /// of the rows at 0.001 train to the same precision. Not during a
    /// [`Warmup`](crate::Warmup): there the small gradients of its uniformly random ids are
    /// what pushes down the outputs the young tables do not pick yet (at the Amazon-670K
    /// shape, leaving them out cost 1.7 points of P@1 after the first epoch). 0 (the
    /// default): every active output trains.
    pub min_gradient: f32,
}

/// [`Negatives::shared_refresh`]'s default.
pub const DEFAULT_SHARED_REFRESH: u64 = 8;

/// [`Negatives::shared_rescore`]'s default.
pub const DEFAULT_SHARED_RESCORE: u64 = 1;

impl Default for Negatives {
    /// No correction and no shared negatives (refreshed every [`DEFAULT_SHARED_REFRESH`]
    /// steps once there are some).
    fn default() -> Self {
        Negatives {
            log_q: false,
            shared_negatives: 0,
            shared_shift: 0.0,
            shared_pool: 0,
            shared_pool_inputs: 0,
            shared_refresh: DEFAULT_SHARED_REFRESH,
            shared_rescore: DEFAULT_SHARED_RESCORE,
            min_gradient: 0.0,
        }
    }
}

impl Negatives {
    /// Checks the shift's fraction, the pool against the layer's `out_dim` neurons and the
    /// shared negatives it serves, the refresh and re-ranking periods and the smallest
    /// gradient trained.
    pub fn validate(&self, out_dim: usize) -> Result<()> {
        let fail = |reason: String| Err(crate::error::config_error("lsh", reason));
        if !(0.0..=1.0).contains(&self.shared_shift) {
            return fail(format!(
                "shared_shift must be in [0, 1], got {}",
                self.shared_shift
            ));
        }
        if self.shared_pool > out_dim {
            return fail(format!(
                "shared_pool ({}) must be at most the layer's {out_dim} neurons",
                self.shared_pool
            ));
        }
        if !(self.min_gradient.is_finite() && (0.0..1.0).contains(&self.min_gradient)) {
            return fail(format!(
                "min_gradient must be in [0, 1) (a gradient of a softmax or sigmoid output \
                 is at most 1 in magnitude), got {}",
                self.min_gradient
            ));
        }
        if self.shared_refresh == 0 {
            return fail("shared_refresh must be at least 1 step".to_string());
        }
        if self.shared_rescore == 0 {
            return fail("shared_rescore must be at least 1 step".to_string());
        }
        if self.shared_pool > 0 && self.shared_negatives == 0 {
            return fail(
                "shared_pool needs shared_negatives: it is what each sample picks them from"
                    .to_string(),
            );
        }
        if self.shared_pool_inputs > 0 && !self.pooled() {
            return fail(format!(
                "shared_pool_inputs needs a shared_pool larger than shared_negatives ({}): \
                 it is how a sample scores the pool",
                self.shared_negatives
            ));
        }
        Ok(())
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

    /// As read from a config file for a layer of `width` neurons (`None`: not known): a
    /// pool at least as wide as the layer is every output (a recipe made for 670K labels
    /// runs on 591), and a layer no wider than its shared negatives keeps no pool and no
    /// [`shared_pool_inputs`](Self::shared_pool_inputs) (the recipe runs on 100 labels).
    #[cfg(feature = "serde")]
    pub(crate) fn for_width(self, width: Option<usize>) -> Self {
        let shared_pool = width.map_or(self.shared_pool, |w| self.shared_pool.min(w));
        let fitted = Negatives {
            shared_pool,
            ..self
        };
        // A layer no wider than its shared negatives has no pool to score: how a sample
        // would score it goes with it.
        if self.pooled() && !fitted.pooled() {
            return Negatives {
                shared_pool_inputs: 0,
                ..fitted
            };
        }
        fitted
    }

    /// The shared negatives and their pool split by `part`, as one rank of a sharded layer
    /// keeps them; the correction and the refresh and re-ranking periods unchanged.
    pub(crate) fn rank_share(self, part: &impl Fn(usize) -> usize) -> Self {
        Negatives {
            shared_negatives: part(self.shared_negatives),
            shared_pool: part(self.shared_pool),
            ..self
        }
    }
}
