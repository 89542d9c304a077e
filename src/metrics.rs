//! The extreme-classification metrics, as the Extreme Classification Repository's tables
//! report them: precision (P@k), normalised discounted cumulative gain (nDCG@k) and their
//! propensity-scored forms (PSP@k, PSnDCG@k, Jain, Prabhu and Varma, KDD 2016), for
//! k = 1, 3 and 5, from each sample's ranked predictions and its true labels.
//!
//! The propensity-scored metrics weigh a correct label `l` by its inverse propensity
//! `1 + C (N_l + B)^-A`, `C = (ln N - 1) (B + 1)^A`, with `N` the training samples and `N_l`
//! those that carry `l` ([`Propensities`]): a hit on a tail label counts more than one on a
//! head label. PSP@k and PSnDCG@k are then normalised as the repository's evaluation tools
//! (pyxclib's `xc_metrics`) do: the mean over samples of the predictions' weighted gain,
//! divided by the same mean for the best possible top k (each sample's labels ranked by
//! inverse propensity), so that 1 is the best any ranking can do.
//!
//! Conventions, the repository's: a sample with fewer than `k` predictions misses the rest;
//! a sample without labels scores 0 and counts in every mean. nDCG@1 equals P@1 and
//! PSnDCG@1 equals PSP@1; they are kept for the tables' regularity.
//!
//! ```
//! use slide::metrics::{Propensities, PropensityModel, RankingMetrics};
//! // Training label counts of 3 labels over 10 training samples.
//! let propensities = Propensities::from_counts(&[6, 3, 1], 10, PropensityModel::default())?;
//! let mut metrics = RankingMetrics::new(Some(&propensities));
//! metrics.add(&[0, 2, 1], &[0, 1]); // hit, miss, hit
//! metrics.add(&[2, 0, 1], &[2]); // hit
//! let m = metrics.finish();
//! assert_eq!(m.precision[..2], [1.0, 0.5]); // P@3: 2 of 3, then 1 of 3
//! assert!(m.psp.unwrap()[0] < 1.0); // sample 0 ranked a head label above its tail label
//! # Ok::<(), slide::SlideError>(())
//! ```

use crate::data::Examples;
use crate::error::{Result, config_error};

/// The `k` of every metric, in the order of [`Metrics`]' arrays.
pub const AT_K: [usize; 3] = [1, 3, 5];

/// The deepest rank any metric reads: predictions beyond it are not looked at.
pub const MAX_K: usize = 5;

/// The propensity model's two constants (Jain et al. 2016): `A` and `B` of
/// `1 / (1 + C (N_l + B)^-A)`. With the `serde` feature a config file's `[train]` reads them
/// as `propensity_a` and `propensity_b`.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default)
)]
pub struct PropensityModel {
    /// `A` (`propensity_a`, default 0.55, the repository's choice for most sets; its
    /// Amazon sets use 0.6 and Wikipedia's 0.5). Finite and above 0.
    #[cfg_attr(feature = "serde", serde(rename = "propensity_a"))]
    pub a: f64,
    /// `B` (`propensity_b`, default 1.5; Amazon sets 2.6, Wikipedia 0.4). Finite and above 0.
    #[cfg_attr(feature = "serde", serde(rename = "propensity_b"))]
    pub b: f64,
}

impl Default for PropensityModel {
    fn default() -> Self {
        PropensityModel { a: 0.55, b: 1.5 }
    }
}

impl PropensityModel {
    /// Checks that `A` and `B` are finite and above 0.
    pub fn validate(&self) -> Result<()> {
        for (key, value) in [("propensity_a", self.a), ("propensity_b", self.b)] {
            if !(value.is_finite() && value > 0.0) {
                return Err(config_error(
                    key,
                    format!("must be a finite number above 0, got {value}"),
                ));
            }
        }
        Ok(())
    }
}

/// Each label's inverse propensity, from the training set's label counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Propensities {
    inverse: Vec<f64>,
    /// What a label outside `inverse` weighs: one no training sample carries.
    unseen: f64,
}

impl Propensities {
    /// The inverse propensities of labels whose training counts are `counts` (label `l`
    /// carried by `counts[l]` of `samples` training samples), under `model`.
    pub fn from_counts(counts: &[u64], samples: usize, model: PropensityModel) -> Result<Self> {
        model.validate()?;
        if samples == 0 {
            return Err(config_error(
                "propensities",
                "need at least one training sample",
            ));
        }
        let PropensityModel { a, b } = model;
        let c = ((samples as f64).ln() - 1.0) * (b + 1.0).powf(a);
        let weight = |count: f64| 1.0 + c * (count + b).powf(-a);
        Ok(Propensities {
            inverse: counts.iter().map(|&n| weight(n as f64)).collect(),
            unseen: weight(0.0),
        })
    }

    /// The inverse propensities of `labels` labels from the training set `train`'s label
    /// counts (ids at or above `labels` are not counted).
    pub fn from_examples(
        train: &dyn Examples,
        labels: usize,
        model: PropensityModel,
    ) -> Result<Self> {
        Self::from_counts(&Self::label_counts(train, labels), train.len(), model)
    }

    /// How many samples of `train` carry each of `labels` labels (ids at or above `labels`
    /// are not counted): the counts the propensities come from.
    pub fn label_counts(train: &dyn Examples, labels: usize) -> Vec<u64> {
        let mut counts = vec![0u64; labels];
        for i in 0..train.len() {
            for &l in train.labels(i) {
                if let Some(count) = counts.get_mut(l as usize) {
                    *count += 1;
                }
            }
        }
        counts
    }

    /// Label `label`'s inverse propensity (a label the training set never counted weighs as
    /// one with no sample).
    #[inline]
    pub fn inverse(&self, label: u32) -> f64 {
        self.inverse
            .get(label as usize)
            .copied()
            .unwrap_or(self.unseen)
    }

    /// Every counted label's inverse propensity, by id.
    pub fn all(&self) -> &[f64] {
        &self.inverse
    }
}

/// The metrics of an evaluation, each at k = 1, 3, 5 ([`AT_K`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Metrics {
    /// P@k: the mean over samples of the share of the top k that are labels.
    pub precision: [f64; 3],
    /// nDCG@k: the mean over samples of the top k's DCG (a label at rank `r`, from 1, gains
    /// `1 / log2(r + 1)`) over the best DCG the sample's label count allows in k ranks.
    pub ndcg: [f64; 3],
    /// PSP@k (`None` without propensities): P@k with each hit weighed by its label's
    /// inverse propensity, over the same for the best possible top k.
    pub psp: Option<[f64; 3]>,
    /// PSnDCG@k (`None` without propensities): nDCG@k's gains weighed likewise, over the
    /// same for the best possible top k.
    pub psndcg: Option<[f64; 3]>,
}

impl Metrics {
    /// Every figure as `(metric, k, value)`, metric by metric (`"p"`, `"ndcg"`, then, with
    /// propensities, `"psp"` and `"psndcg"`), k = 1, 3, 5 each: what a metrics file or a
    /// dict names `p_at_1` or `p@1`.
    pub fn entries(&self) -> impl Iterator<Item = (&'static str, usize, f64)> + '_ {
        let named = [
            Some(("p", self.precision)),
            Some(("ndcg", self.ndcg)),
            self.psp.map(|v| ("psp", v)),
            self.psndcg.map(|v| ("psndcg", v)),
        ];
        named
            .into_iter()
            .flatten()
            .flat_map(|(name, values)| AT_K.into_iter().zip(values).map(move |(k, v)| (name, k, v)))
    }
}

/// Sums over samples, turned into [`Metrics`] by [`RankingMetrics::finish`].
#[derive(Debug, Clone)]
pub struct RankingMetrics<'a> {
    propensities: Option<&'a Propensities>,
    samples: usize,
    /// Hits in the top k, summed (P@k is their share of `k` times the samples, as exact as
    /// a division gets).
    hits: [u64; 3],
    ndcg: [f64; 3],
    /// Weighted gains of the predictions and of the best possible rankings: PSP's
    /// numerator and denominator, then PSnDCG's.
    psp: [[f64; 3]; 2],
    psndcg: [[f64; 3]; 2],
    /// Scratch: a sample's labels' inverse propensities, best first.
    ideal: Vec<f64>,
}

/// The gain of rank `r` (0-based): `1 / log2(r + 2)`.
#[inline]
fn discount(rank: usize) -> f64 {
    1.0 / ((rank + 2) as f64).log2()
}

impl<'a> RankingMetrics<'a> {
    /// An empty sum; the propensity-scored metrics are computed when `propensities` are
    /// given.
    pub fn new(propensities: Option<&'a Propensities>) -> Self {
        RankingMetrics {
            propensities,
            samples: 0,
            hits: [0; 3],
            ndcg: [0.0; 3],
            psp: [[0.0; 3]; 2],
            psndcg: [[0.0; 3]; 2],
            ideal: Vec::new(),
        }
    }

    /// Adds a sample: its predictions `ranked`, best first (only the first [`MAX_K`] are
    /// read), and its true `labels`.
    pub fn add(&mut self, ranked: &[u32], labels: &[u32]) {
        self.samples += 1;
        let ranked = &ranked[..ranked.len().min(MAX_K)];
        let mut hits = [false; MAX_K];
        for (hit, id) in hits.iter_mut().zip(ranked) {
            *hit = labels.contains(id);
        }
        let hit = &hits[..ranked.len()];
        let best_dcg = |k: usize| (0..labels.len().min(k)).map(discount).sum::<f64>();
        for (j, &k) in AT_K.iter().enumerate() {
            self.hits[j] += hit.iter().take(k).filter(|&&h| h).count() as u64;
            if !labels.is_empty() {
                let dcg: f64 = (0..hit.len().min(k))
                    .filter(|&r| hit[r])
                    .map(discount)
                    .sum();
                self.ndcg[j] += dcg / best_dcg(k);
            }
        }
        let Some(propensities) = self.propensities else {
            return;
        };
        self.ideal.clear();
        self.ideal
            .extend(labels.iter().map(|&l| propensities.inverse(l)));
        self.ideal.sort_unstable_by(|a, b| b.total_cmp(a));
        for (j, &k) in AT_K.iter().enumerate() {
            let depth = hit.len().min(k);
            let gain = |r: usize| f64::from(u8::from(hit[r])) * propensities.inverse(ranked[r]);
            let best = &self.ideal[..self.ideal.len().min(k)];
            self.psp[0][j] += (0..depth).map(gain).sum::<f64>() / k as f64;
            self.psp[1][j] += best.iter().sum::<f64>() / k as f64;
            if !labels.is_empty() {
                let norm = best_dcg(k);
                let dcg: f64 = (0..depth).map(|r| gain(r) * discount(r)).sum();
                let best_dcg: f64 = best.iter().enumerate().map(|(r, w)| w * discount(r)).sum();
                self.psndcg[0][j] += dcg / norm;
                self.psndcg[1][j] += best_dcg / norm;
            }
        }
    }

    /// Samples added so far.
    pub fn samples(&self) -> usize {
        self.samples
    }

    /// The metrics of the samples added (zeros for none).
    pub fn finish(&self) -> Metrics {
        let n = self.samples.max(1) as f64;
        let ratio = |sums: &[[f64; 3]; 2]| {
            std::array::from_fn(|j| {
                if sums[1][j] > 0.0 {
                    sums[0][j] / sums[1][j]
                } else {
                    0.0
                }
            })
        };
        Metrics {
            precision: std::array::from_fn(|j| self.hits[j] as f64 / (AT_K[j] as f64 * n)),
            ndcg: self.ndcg.map(|s| s / n),
            psp: self.propensities.map(|_| ratio(&self.psp)),
            psndcg: self.propensities.map(|_| ratio(&self.psndcg)),
        }
    }
}

#[cfg(test)]
mod tests;
