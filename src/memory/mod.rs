//! A layer of stored training samples: [`Memory`] keeps one unit per training sample, whose
//! weights are the sample's input (IDF-weighted and scaled to unit length) and whose
//! outgoing connections are the sample's labels. A query activates the
//! [`neighbours`](MemoryConfig::neighbours) units with the largest inner product (the
//! cosine of the two inputs), and each active unit adds `cosine^power` to each of its
//! labels: the labels of the nearest training samples, by vote. With
//! [`centroids`](MemoryConfig::centroids) each voted label is then scored by the cosine of
//! the query with the label's centroid (the sum of its samples' units, at unit length) plus
//! [`vote_weight`](MemoryConfig::vote_weight) times its votes: the neighbours say which
//! labels to consider, the centroids how well the query matches each of them.
//!
//! The layer is as wide as the training set, and it is cheap because a query computes only
//! the units that share a feature with it: [`Memory::neighbours`] walks the feature-major
//! copy of the weights (an inverted index), so a query costs the summed length of its
//! features' columns, not the width, and only the voted labels' centroids.
//!
//! Built in one pass over the training set ([`Memory::build`]), it needs no gradient
//! steps. On `gen-data` data, whose labels each have a prototype of features, it is the
//! most accurate model slide has: docs/label-trees.md, "A layer of training samples".

mod arrays;
mod centroids;
mod compressed;
mod search;
mod tables;
mod tune;

pub use arrays::{MemoryArrays, MemoryArraysOwned, MemoryArraysRef};
pub use search::{MemoryScratch, Search};
pub use tables::MemoryLsh;
pub use tune::{TUNED_POWERS, TUNED_VOTE_WEIGHTS, Tried, TuneMetric};

use tables::UnitTables;

use centroids::label_centroids;
use compressed::{Compressed, normalise};

use rayon::prelude::*;
use slide_lsh::Vector;

use crate::data::Examples;
use crate::error::{Result, SlideError, config_error, input_error};

/// Settings of a [`Memory`]. In TOML (`[memory]`): `neighbours = 50`, `power = 1.0`,
/// `idf = true`, `centroids = true`, `vote_weight = 0.5`, `centroid_features = 128`,
/// `centroid_labels = 0`, `tune = 0`, `tune_metric = "p1"`; each key left out takes the
/// default.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default, deny_unknown_fields)
)]
pub struct MemoryConfig {
    /// Units (training samples) a query activates: the most similar ones.
    pub neighbours: usize,
    /// Each active unit votes `cosine^power` for each of its labels: larger powers trust
    /// the nearest samples more.
    pub power: f32,
    /// Weight each feature by its inverse document frequency `ln((1 + n) / (1 + df))`
    /// (`n` training samples, `df` of them with the feature) before scaling to unit length:
    /// rare features, which say more about the labels, count for more.
    pub idf: bool,
    /// Score each voted label by the cosine of the query with the label's centroid plus
    /// [`vote_weight`](Self::vote_weight) times its votes (`false`: by its votes alone).
    pub centroids: bool,
    /// With [`centroids`](Self::centroids), what a label's votes count for beside its
    /// centroid's cosine.
    pub vote_weight: f32,
    /// Each centroid keeps only its this many largest weights (0: all), as label trees
    /// prune their classifiers' small weights: a frequent label's centroid otherwise holds
    /// every feature of every one of its samples, and scoring it costs as much.
    pub centroid_features: usize,
    /// With [`centroids`](Self::centroids), score only this many voted labels, those with
    /// the most votes (0: every voted label). A query's 50 neighbours vote for 130-250
    /// labels, and each scored centroid is a row read from main memory at random.
    pub centroid_labels: usize,
    /// Training samples to hold out for choosing [`power`](Self::power) and
    /// [`vote_weight`](Self::vote_weight) ([`Memory::tune`], which `slide-train` calls
    /// before building when this is above 0; at most a fifth of the set is held out): the
    /// pair chosen replaces the two set here.
    pub tune: usize,
    /// What [`tune`](Self::tune) chooses by: P@1 (the default), P@3 or P@5 on the held-out
    /// samples (`tune_metric = "p1" | "p3" | "p5"`).
    pub tune_metric: TuneMetric,
    /// Hash tables over the units ([`MemoryLsh`]), for [`Search::Tables`]; `None` (the
    /// default): exact search only.
    pub lsh: Option<MemoryLsh>,
}

impl Default for MemoryConfig {
    /// 50 neighbours, power 1, IDF, centroids of 128 features with votes at half weight, no
    /// tuning: ahead of label trees in P@1, P@3 and P@5 at three of the four sizes measured
    /// on `gen-data` data without topics (docs/label-trees.md, "A layer of training
    /// samples").
    fn default() -> Self {
        MemoryConfig {
            neighbours: 50,
            power: 1.0,
            idf: true,
            centroids: true,
            vote_weight: 0.5,
            centroid_features: 128,
            centroid_labels: 0,
            tune: 0,
            tune_metric: TuneMetric::P1,
            lsh: None,
        }
    }
}

impl MemoryConfig {
    /// Checks the settings: at least one neighbour, a finite power in `[0, 16]`, a finite
    /// vote weight of at least 0, and with tables a budget and a rescore of at least 1.
    pub fn validate(&self) -> Result<()> {
        let invalid = |reason: String| config_error("memory", reason);
        if self.neighbours == 0 {
            return Err(invalid("neighbours must be at least 1".into()));
        }
        if !(self.power.is_finite() && (0.0..=16.0).contains(&self.power)) {
            return Err(invalid(format!(
                "power must be between 0 and 16, not {}",
                self.power
            )));
        }
        if !(self.vote_weight.is_finite() && self.vote_weight >= 0.0) {
            return Err(invalid(format!(
                "vote_weight must be a number of at least 0, not {}",
                self.vote_weight
            )));
        }
        if self.lsh.is_some_and(|lsh| lsh.budget == 0) {
            return Err(invalid("lsh.budget must be at least 1".into()));
        }
        if self.lsh.is_some_and(|lsh| lsh.rescore == Some(0)) {
            return Err(invalid(
                "lsh.rescore must be at least 1 (leave it out to compute every candidate)".into(),
            ));
        }
        Ok(())
    }
}

/// The stored training samples: see the [module documentation](self).
///
/// ```
/// use slide::lsh::Vector;
/// use slide::memory::Search;
/// use slide::{Memory, MemoryConfig, MemoryScratch, SparseExamples};
///
/// // Two labels, each with its own features; the third sample has both.
/// let mut train = SparseExamples::new();
/// train.push(&[0, 1, 2], &[1.0, 1.0, 1.0], &[0]);
/// train.push(&[3, 4, 5], &[1.0, 1.0, 1.0], &[1]);
/// train.push(&[1, 4], &[1.0, 1.0], &[0, 1]);
/// let memory = Memory::build(&train, 6, 2, MemoryConfig::default()).unwrap();
/// // A query with features of label 1 only: sample 1 is its nearest, sample 2 next.
/// let query = Vector::sparse(&[3, 5], &[1.0, 1.0]).unwrap();
/// let answer = memory
///     .predict_one(query, 0, &mut MemoryScratch::new(), Search::Exact)
///     .unwrap();
/// assert_eq!(answer[0].0, 1);
/// assert_eq!(answer.len(), 1, "sample 2 shares no feature with the query");
/// ```
#[derive(Debug, PartialEq)]
pub struct Memory {
    config: MemoryConfig,
    input_dim: usize,
    num_labels: usize,
    /// Per feature: the factor a value is multiplied by before the row is scaled to unit
    /// length (the IDF, or 1).
    feature_weights: Vec<f32>,
    /// Unit-major weights: one row per training sample, unit length.
    units: Compressed,
    /// Feature-major weights: per feature, the units that have it.
    columns: Compressed,
    /// Per unit, its labels (the outgoing connections).
    labels: Compressed,
    /// Per label, the sum of its units' weights at unit length (empty without
    /// [`MemoryConfig::centroids`]; rebuilt, not saved).
    centroids: Compressed,
    /// Hash tables over the units, with [`MemoryConfig::lsh`] (rebuilt, not saved).
    tables: Option<UnitTables>,
}

impl Memory {
    /// Stores every sample of `train` (inputs of `input_dim` features, labels below
    /// `num_labels`). Fails on an invalid config, an empty set, an input of another
    /// dimension, a non-finite value or a label out of range (naming the sample).
    pub fn build(
        train: &dyn Examples,
        input_dim: usize,
        num_labels: usize,
        config: MemoryConfig,
    ) -> Result<Memory> {
        config.validate()?;
        if train.is_empty() {
            return Err(config_error("memory", "the training set is empty"));
        }
        let mut raw = Compressed {
            offsets: vec![0],
            ..Default::default()
        };
        let mut labels = raw.clone();
        for s in 0..train.len() {
            for_each_nonzero(train.input(s), input_dim, s, |i, v| {
                raw.ids.push(i);
                raw.values.push(v);
            })?;
            raw.offsets.push(raw.ids.len());
            for &label in train.labels(s) {
                if label as usize >= num_labels {
                    return Err(SlideError::LabelOutOfRange {
                        sample: s,
                        label,
                        num_labels,
                    });
                }
                labels.ids.push(label);
                labels.values.push(1.0);
            }
            labels.offsets.push(labels.ids.len());
        }
        let feature_weights = if config.idf {
            inverse_document_frequency(&raw, input_dim)
        } else {
            vec![1.0; input_dim]
        };
        let Compressed {
            offsets,
            ids,
            mut values,
        } = raw;
        let mut rows: Vec<&mut [f32]> = Vec::with_capacity(offsets.len() - 1);
        let mut rest = values.as_mut_slice();
        for w in offsets.windows(2) {
            let (row, tail) = rest.split_at_mut(w[1] - w[0]);
            rows.push(row);
            rest = tail;
        }
        rows.into_par_iter()
            .zip(offsets.par_windows(2))
            .for_each(|(row, w)| weigh_and_normalise(row, &ids[w[0]..w[1]], &feature_weights));
        let units = Compressed {
            offsets,
            ids,
            values,
        };
        Memory::assemble(
            config,
            (input_dim, num_labels),
            feature_weights,
            units,
            labels,
        )
    }

    /// A memory of `units` and their `labels`, with the copies derived from them (the
    /// feature-major weights, the label centroids, the hash tables).
    fn assemble(
        config: MemoryConfig,
        (input_dim, num_labels): (usize, usize),
        feature_weights: Vec<f32>,
        units: Compressed,
        labels: Compressed,
    ) -> Result<Memory> {
        let columns = units.transposed(input_dim);
        let centroids = label_centroids(&units, &labels, num_labels, input_dim, config);
        let tables = config
            .lsh
            .map(|lsh| UnitTables::build(&units, input_dim, lsh))
            .transpose()?;
        Ok(Memory {
            config,
            input_dim,
            num_labels,
            feature_weights,
            units,
            columns,
            labels,
            centroids,
            tables,
        })
    }

    /// The settings it was built with.
    pub fn config(&self) -> &MemoryConfig {
        &self.config
    }

    /// Units: the training samples stored.
    pub fn len(&self) -> usize {
        self.units.rows()
    }

    /// Whether no sample is stored (never, for a built memory).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Input dimension.
    pub fn input_dim(&self) -> usize {
        self.input_dim
    }

    /// Number of labels (outputs).
    pub fn num_labels(&self) -> usize {
        self.num_labels
    }

    /// `K`, `L` and `range_pow` of the hash tables, when the memory has them (tuned from
    /// [`MemoryLsh::budget`] and the units).
    pub fn tables_params(&self) -> Option<slide_lsh::LshParams> {
        self.tables.as_ref().map(UnitTables::params)
    }

    /// Bytes the weights, the inverted index, the labels and the centroids take (the hash
    /// tables, when there are any, not counted).
    pub fn bytes(&self) -> usize {
        let part = |c: &Compressed| c.offsets.len() * 8 + c.ids.len() * 4 + c.values.len() * 4;
        part(&self.units)
            + part(&self.columns)
            + part(&self.labels)
            + part(&self.centroids)
            + self.input_dim * 4
    }
}

/// Calls `f` with each nonzero entry `(feature, value)` of `x`, once `x` has passed the
/// check a layer's input passes ([`Vector::validate`]: length, index range, finite values);
/// `sample` names `x` in the error.
fn for_each_nonzero(
    x: Vector<'_>,
    input_dim: usize,
    sample: usize,
    mut f: impl FnMut(u32, f32),
) -> Result<()> {
    x.validate(input_dim).map_err(|e| input_error(sample, e))?;
    match x {
        Vector::Dense(values) => (0u32..).zip(values).for_each(|(i, &v)| {
            if v != 0.0 {
                f(i, v);
            }
        }),
        Vector::Sparse { indices, values } => indices.iter().zip(values).for_each(|(&i, &v)| {
            if v != 0.0 {
                f(i, v);
            }
        }),
    }
    Ok(())
}

/// `ln((1 + n) / (1 + df))` per feature, `n` rows, `df` of them with the feature.
fn inverse_document_frequency(rows: &Compressed, input_dim: usize) -> Vec<f32> {
    let mut df = vec![0u32; input_dim];
    for &f in &rows.ids {
        df[f as usize] += 1;
    }
    let n = rows.rows() as f64;
    df.iter()
        .map(|&d| ((1.0 + n) / (1.0 + d as f64)).ln() as f32)
        .collect()
}

/// Multiplies each entry by its feature's weight, then scales the row to unit length (a
/// row of zeros stays zero).
fn weigh_and_normalise(values: &mut [f32], ids: &[u32], feature_weights: &[f32]) {
    for (v, &f) in values.iter_mut().zip(ids) {
        *v *= feature_weights[f as usize];
    }
    normalise(values);
}

#[cfg(test)]
mod tests;
