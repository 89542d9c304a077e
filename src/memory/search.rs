//! Queries of a [`Memory`]: the active units (nearest training samples) of an input, their
//! votes, and the labels they rank highest, for one sample or a batch in parallel.

use rayon::prelude::*;
use slide_lsh::Vector;

use super::{Memory, UnitTables};
use crate::data::Examples;
use crate::error::Result;
use crate::eval::mode_share;
use crate::layer::rank_key;
use crate::stats::EvalStats;
use crate::top5::Top5;

/// Rows prefetched ahead of the one computed, where rows are read in random order (a
/// query's candidates, its voted labels' centroids).
const AHEAD: usize = 8;

/// How a query finds its active units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Search {
    /// Every unit that shares a feature with the query is computed (the feature-major
    /// walk): the exact nearest samples.
    #[default]
    Exact,
    /// The units in the query's buckets of the hash tables ([`MemoryLsh`](super::MemoryLsh))
    /// are computed, and the nearest of them are active. A memory without tables searches
    /// exactly.
    Tables,
}

/// One thread's buffers for queries of one [`Memory`]: reused from query to query, so a
/// query allocates nothing once they have grown.
#[derive(Debug, Clone, Default)]
pub struct MemoryScratch {
    /// The query's features, and their values weighted and scaled like the units'.
    query_features: Vec<u32>,
    query_values: Vec<f32>,
    /// Per unit, its inner product with the query (zero where untouched); through the
    /// tables, first the number of tables that found it.
    unit_scores: Vec<f32>,
    /// The units that share a feature with the query.
    touched: Vec<u32>,
    /// Per unit, whether it is in `touched`.
    is_touched: Vec<bool>,
    /// The active units, `(cosine, unit)`, best first.
    active: Vec<(f32, u32)>,
    /// Per label, the votes it got (zero where none).
    votes: Vec<f32>,
    /// The labels with a vote.
    voted: Vec<u32>,
    /// Per label, whether it is in `voted`.
    is_voted: Vec<bool>,
    /// The query as a dense vector (zero outside its features), for the centroids and
    /// the tables' candidates; written by each query, cleared by the next.
    dense_query: Vec<f32>,
    /// Hash codes of the query, for the tables.
    codes: slide_lsh::CodeBuffer,
}

impl MemoryScratch {
    /// Empty buffers; they grow to the memory's sizes at the first query.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Memory {
    /// The [`neighbours`](super::MemoryConfig::neighbours) units with the largest inner
    /// product with `x`, as `(unit, cosine)` pairs, best first (ties: the lower unit).
    /// Every unit that shares a feature with `x` is computed (the exact answer), by walking
    /// the columns of `x`'s features. `sample` names `x` in errors.
    pub fn neighbours(
        &self,
        x: Vector<'_>,
        sample: usize,
        scratch: &mut MemoryScratch,
    ) -> Result<Vec<(u32, f32)>> {
        self.activate(x, sample, scratch, Search::Exact)?;
        Ok(scratch.active.iter().map(|&(z, u)| (u, z)).collect())
    }

    /// The 5 best-scoring labels of those `x`'s active units vote for (ties: the lower
    /// label), as `(label, score)` pairs, best first: what a deployed memory answers. The
    /// score is the votes, or with [`centroids`](super::MemoryConfig::centroids) the cosine
    /// with the label's centroid plus `vote_weight` times the votes.
    pub fn predict_one(
        &self,
        x: Vector<'_>,
        sample: usize,
        scratch: &mut MemoryScratch,
        search: Search,
    ) -> Result<Vec<(u32, f32)>> {
        Ok(self.top5(x, sample, scratch, search)?.ranked().collect())
    }

    /// [`predict_one`](Self::predict_one) for each sample of `batch` in `data`, on the
    /// rayon pool; the samples' labels are not read.
    pub fn predict(
        &self,
        data: &dyn Examples,
        batch: &[usize],
        search: Search,
    ) -> Result<Vec<Vec<(u32, f32)>>> {
        let answers: Vec<Vec<Vec<(u32, f32)>>> = in_chunks(batch, |chunk| {
            let mut scratch = MemoryScratch::new();
            chunk
                .iter()
                .map(|&s| self.predict_one(data.input(s), s, &mut scratch, search))
                .collect()
        })?;
        Ok(answers.into_iter().flatten().collect())
    }

    /// P@1, P@3 and P@5 of the memory's answers over `batch` of `data`, with the collapse
    /// statistics of [`EvalStats`]; `active_outputs` counts the labels that got a vote.
    pub fn evaluate(
        &self,
        data: &dyn Examples,
        batch: &[usize],
        search: Search,
    ) -> Result<EvalStats> {
        let answers: Vec<(Top5, usize)> = in_chunks(batch, |chunk| {
            let mut scratch = MemoryScratch::new();
            chunk
                .iter()
                .map(|&s| {
                    let top = self.top5(data.input(s), s, &mut scratch, search)?;
                    Ok((top, scratch.voted.len()))
                })
                .collect()
        })?
        .into_iter()
        .flatten()
        .collect();
        let mut stats = EvalStats {
            samples: batch.len(),
            ..Default::default()
        };
        if batch.is_empty() {
            return Ok(stats);
        }
        let mut hits = [0f64; 3];
        let mut voted = 0usize;
        let mut top1s = Vec::with_capacity(batch.len());
        for ((top, labels_voted), &s) in answers.iter().zip(batch) {
            for (h, f) in hits.iter_mut().zip(top.hits(data.labels(s))) {
                *h += f64::from(f);
            }
            voted += labels_voted;
            if top.first() != u32::MAX {
                top1s.push(top.first());
            }
        }
        let n = batch.len() as f64;
        stats.precision_at_1 = hits[0] / n;
        stats.precision_at_3 = hits[1] / (3.0 * n);
        stats.precision_at_5 = hits[2] / (5.0 * n);
        stats.active_outputs = voted as f64 / n;
        (stats.top1_output, stats.top1_share) = mode_share(&mut top1s, batch.len());
        let mut labels: Vec<u32> = batch
            .iter()
            .flat_map(|&s| data.labels(s))
            .copied()
            .collect();
        stats.label_share = mode_share(&mut labels, batch.len()).1;
        Ok(stats)
    }

    /// Scores the labels the active units vote for and keeps the 5 best.
    fn top5(
        &self,
        x: Vector<'_>,
        sample: usize,
        scratch: &mut MemoryScratch,
        search: Search,
    ) -> Result<Top5> {
        self.activate(x, sample, scratch, search)?;
        let MemoryScratch {
            active,
            votes,
            voted,
            is_voted,
            ..
        } = scratch;
        if votes.len() != self.num_labels {
            *votes = vec![0.0; self.num_labels];
            *is_voted = vec![false; self.num_labels];
        }
        for &l in voted.iter() {
            votes[l as usize] = 0.0;
            is_voted[l as usize] = false;
        }
        voted.clear();
        let power = self.config.power;
        for &(cosine, unit) in active.iter() {
            let vote = if power == 1.0 {
                cosine
            } else {
                cosine.max(0.0).powf(power)
            };
            for &label in self.labels.row(unit as usize).0 {
                if !is_voted[label as usize] {
                    is_voted[label as usize] = true;
                    voted.push(label);
                }
                votes[label as usize] += vote;
            }
        }
        let mut top = Top5::EMPTY;
        if !self.config.centroids {
            for &label in voted.iter() {
                top.offer(votes[label as usize], label);
            }
            return Ok(top);
        }
        let MemoryScratch {
            query_features,
            query_values,
            dense_query,
            ..
        } = scratch;
        // The labels with the most votes first (all of them stay listed, so that the next
        // query clears them).
        let cap = self.config.centroid_labels;
        let scored = if cap > 0 && scratch.voted.len() > cap {
            let votes = &scratch.votes;
            let key = |&l: &u32| rank_key(votes[l as usize], l);
            scratch.voted.select_nth_unstable_by_key(cap - 1, key);
            cap
        } else {
            scratch.voted.len()
        };
        let weight = self.config.vote_weight;
        let walked = 16 * query_features.len();
        let voted = &scratch.voted[..scored];
        for (i, &label) in voted.iter().enumerate() {
            // The rows ahead that will be walked (a long row is binary-searched instead,
            // and reads a few of its lines).
            if let Some(&ahead) = voted.get(i + AHEAD)
                && self.centroids.row_len(ahead as usize) <= walked
            {
                self.centroids.prefetch_row(ahead as usize);
            }
            let (features, values) = self.centroids.row(label as usize);
            // A frequent label's centroid has thousands of features: look the query's few
            // up in it (its features are sorted) instead of walking it.
            let cosine: f32 = if features.len() > 16 * query_features.len() {
                query_features
                    .iter()
                    .zip(query_values.iter())
                    .filter_map(|(f, &q)| features.binary_search(f).ok().map(|i| q * values[i]))
                    .sum()
            } else {
                features
                    .iter()
                    .zip(values)
                    .map(|(&f, &c)| c * dense_query[f as usize])
                    .sum()
            };
            top.offer(cosine + weight * scratch.votes[label as usize], label);
        }
        Ok(top)
    }

    /// Fills `scratch.active` with `x`'s active units, best first.
    fn activate(
        &self,
        x: Vector<'_>,
        sample: usize,
        scratch: &mut MemoryScratch,
        search: Search,
    ) -> Result<()> {
        self.weigh_query(x, sample, scratch)?;
        if let (Search::Tables, Some(tables)) = (search, &self.tables) {
            return self.activate_from_tables(tables, scratch);
        }
        let MemoryScratch {
            query_features,
            query_values,
            unit_scores,
            touched,
            is_touched,
            active,
            ..
        } = scratch;
        self.clear_units(unit_scores, touched, is_touched);
        for (&f, &q) in query_features.iter().zip(query_values.iter()) {
            let (units, values) = self.columns.row(f as usize);
            for (&u, &w) in units.iter().zip(values) {
                add_to_unit(unit_scores, touched, is_touched, u, q * w);
            }
        }
        active.clear();
        active.extend(touched.iter().map(|&u| (unit_scores[u as usize], u)));
        keep_best(active, self.config.neighbours);
        Ok(())
    }

    /// Sizes the per-unit buffers for this memory and clears what the last query (exact or
    /// through the tables) left in them.
    fn clear_units(&self, scores: &mut Vec<f32>, touched: &mut Vec<u32>, marks: &mut Vec<bool>) {
        if scores.len() != self.len() {
            *scores = vec![0.0; self.len()];
            *marks = vec![false; self.len()];
        }
        for &u in touched.iter() {
            scores[u as usize] = 0.0;
            marks[u as usize] = false;
        }
        touched.clear();
    }

    /// [`activate`](Self::activate) from the units in the query's buckets, each scored
    /// exactly against the query; with [`MemoryLsh::rescore`](super::MemoryLsh::rescore),
    /// only that many of them, those found in the most tables.
    fn activate_from_tables(&self, tables: &UnitTables, scratch: &mut MemoryScratch) -> Result<()> {
        let MemoryScratch {
            query_features,
            query_values,
            unit_scores,
            touched,
            is_touched,
            active,
            dense_query,
            codes,
            ..
        } = scratch;
        self.clear_units(unit_scores, touched, is_touched);
        active.clear();
        // A query without features has no neighbours (the exact walk finds none either).
        if query_features.is_empty() {
            return Ok(());
        }
        // A unit's score counts the tables whose bucket holds it, until it is computed.
        tables.candidates(query_features, query_values, codes, |u| {
            add_to_unit(unit_scores, touched, is_touched, u, 1.0);
        })?;
        // Counts are small integers that many candidates share: a hashed fraction below
        // one half breaks their ties at random instead of by the lower unit, which would
        // favour the first training samples.
        active.extend(touched.iter().map(|&u| {
            let fraction = (slide_lsh::mix64(u64::from(u)) >> 40) as f32 / (1u32 << 25) as f32;
            (unit_scores[u as usize] + fraction, u)
        }));
        if let Some(rescore) = tables.rescore() {
            keep_best(active, rescore);
        }
        for i in 0..active.len() {
            if let Some(&(_, ahead)) = active.get(i + AHEAD) {
                self.units.prefetch_row(ahead as usize);
            }
            let (score, u) = &mut active[i];
            let (features, weights) = self.units.row(*u as usize);
            *score = features
                .iter()
                .zip(weights)
                .map(|(&f, &w)| w * dense_query[f as usize])
                .sum();
        }
        active.retain(|&(score, _)| score != 0.0);
        keep_best(active, self.config.neighbours);
        Ok(())
    }

    /// `x`'s nonzero entries weighted like the units' (by the feature weights, then to unit
    /// length), checked against the input dimension, into the scratch's query (both as a
    /// list and as a dense vector, whose entries of the previous query are cleared first).
    fn weigh_query(&self, x: Vector<'_>, sample: usize, scratch: &mut MemoryScratch) -> Result<()> {
        let MemoryScratch {
            query_features: features,
            query_values: values,
            dense_query,
            ..
        } = scratch;
        if dense_query.len() != self.input_dim {
            *dense_query = vec![0.0; self.input_dim];
        }
        for &f in features.iter() {
            dense_query[f as usize] = 0.0;
        }
        features.clear();
        values.clear();
        super::for_each_nonzero(x, self.input_dim, sample, |i, v| {
            let weighted = v * self.feature_weights[i as usize];
            if weighted != 0.0 {
                features.push(i);
                values.push(weighted);
            }
        })?;
        super::normalise(values);
        for (&f, &v) in features.iter().zip(values.iter()) {
            dense_query[f as usize] = v;
        }
        Ok(())
    }
}

/// `work` over `batch` in chunks on the rayon pool, the results in `batch`'s order. A chunk
/// holds 256 samples, so the scratch each chunk allocates (a score per unit and per label,
/// megabytes at the Amazon-670K shape) is paid once per 256 queries, not once per query or
/// per rayon split.
fn in_chunks<T: Send>(
    batch: &[usize],
    work: impl Fn(&[usize]) -> Result<Vec<T>> + Sync + Send,
) -> Result<Vec<Vec<T>>> {
    batch.par_chunks(256).map(&work).collect()
}

/// Adds `amount` to unit `u`'s score, listing `u` in `touched` the first time (so that
/// [`Memory::clear_units`] resets exactly what a query wrote).
#[inline]
fn add_to_unit(
    scores: &mut [f32],
    touched: &mut Vec<u32>,
    marks: &mut [bool],
    u: u32,
    amount: f32,
) {
    if !marks[u as usize] {
        marks[u as usize] = true;
        touched.push(u);
    }
    scores[u as usize] += amount;
}

/// Keeps the `k` best `(score, id)` pairs of `pairs`, best first (ties: the lower id).
fn keep_best(pairs: &mut Vec<(f32, u32)>, k: usize) {
    let key = |&(z, id): &(f32, u32)| rank_key(z, id);
    if pairs.len() > k {
        pairs.select_nth_unstable_by_key(k - 1, key);
        pairs.truncate(k);
    }
    pairs.sort_unstable_by_key(key);
}
