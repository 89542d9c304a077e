//! Choosing a memory's query settings on held-out training samples ([`Memory::tune`]).

use slide_lsh::Vector;

use super::{Memory, MemoryConfig, Search};
use crate::data::Examples;
use crate::error::Result;
use crate::stats::EvalStats;

/// The powers [`Memory::tune`] tries.
pub const TUNED_POWERS: [f32; 3] = [1.0, 2.0, 3.0];
/// The vote weights [`Memory::tune`] tries (with centroids; without them the weight is
/// unused).
pub const TUNED_VOTE_WEIGHTS: [f32; 5] = [0.5, 0.125, 0.25, 1.0, 2.0];

/// Mixed into the sample ids that choose the held-out samples.
const HELD_OUT_SEED: u64 = 0x7475_6e65;

/// The precision [`Memory::tune`] chooses by ([`MemoryConfig::tune_metric`]); ties go to
/// the other two, the better first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "lowercase")
)]
pub enum TuneMetric {
    /// P@1: the best label first (ties: P@3, then P@5).
    #[default]
    P1,
    /// P@3: the best three labels (ties: P@1, then P@5), for users who show several.
    P3,
    /// P@5 (ties: P@3, then P@1).
    P5,
}

impl TuneMetric {
    /// The precision this metric names, from `stats`.
    pub fn value(self, stats: &EvalStats) -> f64 {
        self.key(stats).0
    }

    /// Its name as the trainer prints it: `P@1`, `P@3` or `P@5`.
    pub fn name(self) -> &'static str {
        match self {
            TuneMetric::P1 => "P@1",
            TuneMetric::P3 => "P@3",
            TuneMetric::P5 => "P@5",
        }
    }

    /// The order of `stats` under this metric: larger is better.
    pub(super) fn key(self, stats: &EvalStats) -> (f64, f64, f64) {
        let (p1, p3, p5) = (
            stats.precision_at_1,
            stats.precision_at_3,
            stats.precision_at_5,
        );
        match self {
            TuneMetric::P1 => (p1, p3, p5),
            TuneMetric::P3 => (p3, p1, p5),
            TuneMetric::P5 => (p5, p3, p1),
        }
    }
}

/// A setting [`Memory::tune`] tried, and how it answered the held-out samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tried {
    /// [`MemoryConfig::power`].
    pub power: f32,
    /// [`MemoryConfig::vote_weight`].
    pub vote_weight: f32,
    /// P@1, P@3 and P@5 on the held-out samples.
    pub stats: EvalStats,
}

/// Some samples of a set, by index.
struct Subset<'a> {
    data: &'a dyn Examples,
    ids: Vec<usize>,
}

impl Examples for Subset<'_> {
    fn len(&self) -> usize {
        self.ids.len()
    }

    fn input(&self, i: usize) -> Vector<'_> {
        self.data.input(self.ids[i])
    }

    fn labels(&self, i: usize) -> &[u32] {
        self.data.labels(self.ids[i])
    }
}

impl Memory {
    /// Chooses [`power`](MemoryConfig::power) and [`vote_weight`](MemoryConfig::vote_weight)
    /// for a memory of `train` on held-out training samples, before it is built: a memory
    /// of the other samples answers [`config.tune`](MemoryConfig::tune) of them (a fixed
    /// pseudo-random choice, at most a fifth of the set) with every pair of
    /// [`TUNED_POWERS`] and [`TUNED_VOTE_WEIGHTS`], and the pair with the best
    /// [`tune_metric`](MemoryConfig::tune_metric), P@1 unless set (ties: see
    /// [`TuneMetric`], then the earlier pair; the first is the default) replaces `config`'s.
    /// Both settings only change how a query's neighbours vote, and their best values move
    /// with the size of the training set (the neighbours' cosines grow with it), which is
    /// why they are chosen per training set. Returns the config to build with and every
    /// pair tried, in order; `config` unchanged and nothing tried when `tune = 0` or fewer
    /// than 5 samples leave none to hold out. The memory of the held-out split is dropped
    /// before this returns, so building the chosen one afterwards needs no more memory
    /// than building it alone.
    ///
    /// Errors: those of [`Memory::build`] on `train`.
    pub fn tune(
        train: &dyn Examples,
        input_dim: usize,
        num_labels: usize,
        config: MemoryConfig,
    ) -> Result<(MemoryConfig, Vec<Tried>)> {
        config.validate()?;
        let n = train.len();
        let held_out = config.tune.min(n / 5);
        if held_out == 0 {
            return Ok((config, Vec::new()));
        }
        // A fixed pseudo-random choice (a file's order, by label or by date, says nothing).
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_unstable_by_key(|&s| slide_lsh::mix64(s as u64 ^ HELD_OUT_SEED));
        let mut asked = order[..held_out].to_vec();
        let mut kept = order[held_out..].to_vec();
        asked.sort_unstable();
        kept.sort_unstable();
        let rest = Subset {
            data: train,
            ids: kept,
        };
        let probing = MemoryConfig {
            lsh: None,
            ..config
        };
        let mut probe = match Memory::build(&rest, input_dim, num_labels, probing) {
            Ok(probe) => probe,
            // The error names a sample by its place in `rest`: the whole set's build finds
            // the same fault and names it by its place in `train`.
            Err(e) => {
                return Err(Memory::build(train, input_dim, num_labels, probing)
                    .err()
                    .unwrap_or(e));
            }
        };
        let weights: &[f32] = if config.centroids {
            &TUNED_VOTE_WEIGHTS
        } else {
            &TUNED_VOTE_WEIGHTS[..1]
        };
        let mut tried = Vec::with_capacity(TUNED_POWERS.len() * weights.len());
        for &power in &TUNED_POWERS {
            for &vote_weight in weights {
                probe.config.power = power;
                probe.config.vote_weight = vote_weight;
                let stats = probe.evaluate(train, &asked, Search::Exact)?;
                tried.push(Tried {
                    power,
                    vote_weight,
                    stats,
                });
            }
        }
        let key = |t: &Tried| config.tune_metric.key(&t.stats);
        let mut best = tried[0];
        for t in &tried[1..] {
            if key(t) > key(&best) {
                best = *t;
            }
        }
        let mut chosen = MemoryConfig {
            power: best.power,
            ..config
        };
        if config.centroids {
            chosen.vote_weight = best.vote_weight;
        }
        Ok((chosen, tried))
    }
}
