//! Evaluation and prediction: the extreme-classification metrics ([`crate::metrics`]) and
//! any number of best outputs, with every output scored (blocked, so the output weights are
//! read once per block of samples) or over the LSH-selected set; the collapse detector, a
//! sample's outputs, and the tables' retrieval recall. One top-k with one tie rule
//! ([`TopN`]) ranks outputs everywhere.

use rayon::prelude::*;

mod exact;
mod options;
mod pool;
pub use options::{EvalOptions, EvalPrecision};
pub use pool::POOL_GROUP;

use crate::data::Examples;
use crate::error::Result;
use crate::layer::{Activation, Mode, WeightLayout};
use crate::metrics::{MAX_K, Propensities, RankingMetrics};
use crate::network::Network;
use crate::stats::{EvalStats, Recall};
use crate::step::{Reach, logit_of};
use crate::top::TopN;
use crate::workspace::{Workspace, layer_input};

/// Samples an evaluation pass holds at once: the output weights are read once per block, so
/// larger blocks read them less often (at 670K outputs, 1,024 measured 10% faster than 256;
/// 2,048 as fast as 1,024 for exact scoring, and it halves a batch pool's full scorings).
pub const EVAL_BLOCK: usize = 2048;

/// Share of the most frequent value in `ids` over `samples` (0 for none), and that value
/// (ties: the lowest). Sorts `ids`.
pub(crate) fn mode_share(ids: &mut [u32], samples: usize) -> (u32, f64) {
    ids.sort_unstable();
    let (mut best, mut best_count) = (u32::MAX, 0usize);
    for run in ids.chunk_by(|a, b| a == b) {
        if run.len() > best_count {
            (best, best_count) = (run[0], run.len());
        }
    }
    (best, best_count as f64 / samples.max(1) as f64)
}

impl Network {
    /// Evaluates the samples `batch` of `data` as `options` say (a [`Mode`] alone is that
    /// mode with the other options' defaults; [`Mode::Train`] is read as
    /// [`Mode::EvalLsh`]): P@k and nDCG@k for k = 1, 3, 5 ([`crate::metrics`]) and the
    /// collapse detector. [`Self::evaluate_with`] adds the propensity-scored metrics.
    ///
    /// Samples go through in blocks of [`EVAL_BLOCK`], so memory does not grow with
    /// `batch`. When every output is scored ([`Mode::EvalExact`], [`Mode::EvalDense`]) and
    /// the output layer is neuron-major, each block reads the output weights once for all
    /// its samples and keeps only each sample's best scores: at 670K outputs that is one
    /// pass over 340 MB per block instead of one per sample, and no per-sample score vector;
    /// the scores are one matrix product per block of 256 output rows.
    /// The ranking is by logit (ties: lower neuron id first), which the softmax preserves.
    pub fn evaluate(
        &self,
        ws: &mut Workspace,
        data: &dyn Examples,
        batch: &[usize],
        options: impl Into<EvalOptions>,
    ) -> Result<EvalStats> {
        self.evaluate_with(ws, data, batch, options, None)
    }

    /// [`Self::evaluate`], with PSP@k and PSnDCG@k too when `propensities` are given (the
    /// training set's, see [`Propensities::from_examples`]).
    pub fn evaluate_with(
        &self,
        ws: &mut Workspace,
        data: &dyn Examples,
        batch: &[usize],
        options: impl Into<EvalOptions>,
        propensities: Option<&Propensities>,
    ) -> Result<EvalStats> {
        let options = options.into();
        options.validate()?;
        if batch.is_empty() {
            return Ok(EvalStats::default());
        }
        let scores_all = self.scores_all(&options);
        let output = &self.layers()[self.layers().len() - 1];
        let mut metrics = RankingMetrics::new(propensities);
        let mut active = 0usize;
        let mut top1s = Vec::with_capacity(batch.len());
        let mut ids = Vec::with_capacity(MAX_K);
        for (b, block) in batch.chunks(EVAL_BLOCK).enumerate() {
            let first = b * EVAL_BLOCK;
            let tops = self.block_tops(ws, data, block, &options, (first, MAX_K), scores_all)?;
            for (top, &sample) in tops.iter().zip(block) {
                ids.clear();
                ids.extend(top.iter().map(|&(_, id)| id));
                if let Some(&best) = ids.first() {
                    top1s.push(best);
                }
                metrics.add(&ids, data.labels(sample));
            }
            // A pooled evaluation's traces hold the table picks the pool did not score.
            let pool = if self.pooled(&options) {
                options.pool.min(output.out_dim())
            } else {
                0
            };
            active += if scores_all {
                output.out_dim() * block.len()
            } else {
                let last = self.layers().len() - 1;
                let picks: usize = ws.batch().iter().map(|s| s.traces[last].len()).sum();
                picks + pool * block.len()
            };
        }
        let n = batch.len() as f64;
        let (top1_output, top1_share) = mode_share(&mut top1s, batch.len());
        let mut labels: Vec<u32> = batch
            .iter()
            .flat_map(|&s| data.labels(s))
            .copied()
            .collect();
        let (_, label_share) = mode_share(&mut labels, batch.len());
        Ok(EvalStats {
            samples: batch.len(),
            metrics: metrics.finish(),
            active_outputs: active as f64 / n,
            top1_output,
            top1_share,
            label_share,
        })
    }

    /// Each sample's `k` highest-scoring outputs (at most the layer's width) as `(output,
    /// score)` pairs, best first (ties: the lower output id): what a deployed model answers,
    /// or a shortlist for a re-ranker. The score is the logit (with heads, the
    /// re-ranked score of its candidates; see below). `options` as for [`Self::evaluate`]:
    /// [`Mode::EvalExact`] scores every output, [`Mode::EvalLsh`] ranks the outputs the
    /// tables pick ([`Mode::Train`] is taken as `EvalLsh`; without heads and with one
    /// rank, LSH mode scores a softmax layer's outputs by their probability over the active
    /// set, which ranks as the logit does). The samples' labels are not read.
    ///
    /// Any `k` gives the same first outputs: with heads, the candidates they re-rank (the
    /// network's best [`Heads::shortlist`](crate::Heads::shortlist) and the heads' own
    /// candidates, see [`crate::head`]) come first, then the network's next best in its own
    /// order, each with its logit.
    pub fn predict(
        &self,
        ws: &mut Workspace,
        data: &dyn Examples,
        batch: &[usize],
        options: impl Into<EvalOptions>,
        k: usize,
    ) -> Result<Vec<Vec<(u32, f32)>>> {
        let options = options.into();
        options.validate()?;
        let scores_all = self.scores_all(&options);
        let mut predictions = Vec::with_capacity(batch.len());
        for (b, block) in batch.chunks(EVAL_BLOCK).enumerate() {
            let first = b * EVAL_BLOCK;
            let tops = self.block_tops(ws, data, block, &options, (first, k), scores_all)?;
            predictions.extend(
                tops.into_iter()
                    .map(|top| top.into_iter().map(|(z, id)| (id, z)).collect()),
            );
        }
        Ok(predictions)
    }

    /// Whether an evaluation with `options` scores every output in blocks
    /// ([`Self::best_outputs`]: exact or dense modes, neuron-major output layer).
    fn scores_all(&self, options: &EvalOptions) -> bool {
        let output = &self.layers()[self.layers().len() - 1];
        matches!(options.pass(), Mode::EvalExact | Mode::EvalDense)
            && output.layout() == WeightLayout::NeuronMajor
    }

    /// Whether an evaluation with `options` scores a batch pool beside the tables' picks
    /// ([`EvalOptions::pool`]; a sampled, neuron-major output layer in LSH mode).
    fn pooled(&self, options: &EvalOptions) -> bool {
        let output = &self.layers()[self.layers().len() - 1];
        options.pass() == Mode::EvalLsh
            && options.pool > 0
            && output.is_sampled()
            && output.layout() == WeightLayout::NeuronMajor
    }

    /// The `k` best outputs of each sample of `block` (re-ranked by the heads, if any),
    /// as `(score, output)` pairs, best first: every output scored ([`Self::best_outputs`])
    /// when `scores_all`, else those of the sampled output layer. Samples draw their random
    /// numbers from the streams of their positions, `first` on.
    fn block_tops(
        &self,
        ws: &mut Workspace,
        data: &dyn Examples,
        block: &[usize],
        options: &EvalOptions,
        (first, k): (usize, usize),
        scores_all: bool,
    ) -> Result<Vec<Vec<(f32, u32)>>> {
        let pooled = self.pooled(options);
        // Both score the output layer for the block at once, after the hidden layers.
        let reach = if scores_all || pooled {
            Reach::Hidden
        } else {
            Reach::Output
        };
        self.run_batch(ws, data, block, options.pass(), first, reach)?;
        // The heads re-rank each sample's shortlist of the network's best.
        let want = k.max(self.heads.shortlist());
        let best = if scores_all {
            self.best_outputs(ws, data, block, options.precision, want)
        } else if pooled {
            self.pooled_tops(ws, data, block, first, options, want)?
        } else {
            self.active_tops(ws, want)
        };
        let tops = self.rerank(ws, data, block, best, k);
        self.merge_ranks(ws, tops, k)
    }

    /// The `k` best of each sample's active outputs after an LSH-mode pass: by logit with
    /// heads (whose scores add to logits) or across ranks, by probability otherwise.
    fn active_tops(&self, ws: &Workspace, k: usize) -> Vec<TopN> {
        let layer = &self.layers()[self.layers().len() - 1];
        let activation = layer.activation();
        // Sigmoid outputs compare across ranks as they are; a rank's softmax, by logit.
        let by_logit = self.comm.size() > 1 && activation == Activation::Softmax;
        let head = !self.heads.is_empty();
        ws.batch()
            .par_iter()
            .map(|state| {
                let output = &state.traces[self.layers().len() - 1];
                let (max, sum) = output.softmax;
                let mut top = TopN::new(k);
                for (p, &z) in output.outputs().iter().enumerate() {
                    let score = if head {
                        logit_of(activation, z)
                    } else if by_logit {
                        max + (z * sum).ln()
                    } else {
                        z
                    };
                    top.offer(score, output.id(p));
                }
                top
            })
            .collect()
    }

    /// Each sample's `k` best, as `(score, output)` pairs best first, from the network's
    /// `best`: with heads, their candidates re-ranked (see [`Self::predict`]), then the
    /// network's next best.
    fn rerank(
        &self,
        ws: &Workspace,
        data: &dyn Examples,
        block: &[usize],
        best: Vec<TopN>,
        k: usize,
    ) -> Vec<Vec<(f32, u32)>> {
        let heads = &self.heads;
        if heads.is_empty() {
            return best.into_iter().map(TopN::into_ranked).collect();
        }
        best.into_par_iter()
            .zip(ws.batch())
            .zip(block)
            .map(|((best, state), &sample)| {
                let best = best.into_ranked();
                let input = state.input.get(data, sample);
                let mut ranked = heads.rerank(input, &best);
                let taken = ranked.len();
                for &pair in &best {
                    if ranked.len() >= k {
                        break;
                    }
                    if !ranked[..taken].iter().any(|&(_, id)| id == pair.1) {
                        ranked.push(pair);
                    }
                }
                ranked.truncate(k);
                ranked
            })
            .collect()
    }

    /// Each sample's `k` best outputs over every rank, from each rank's `k` best of its
    /// slice (as ids of the slice, ranked by score): this rank's, unchanged, with one rank.
    fn merge_ranks(
        &self,
        ws: &mut Workspace,
        tops: Vec<Vec<(f32, u32)>>,
        k: usize,
    ) -> Result<Vec<Vec<(f32, u32)>>> {
        if self.comm.size() == 1 {
            return Ok(tops);
        }
        // `k` (score, id) pairs per sample, an id sent as the bits of an f32.
        let first = self.output_range.start as u32;
        ws.exchange.clear();
        for top in &tops {
            for j in 0..k {
                let (z, id) = top
                    .get(j)
                    .map_or((f32::NEG_INFINITY, u32::MAX), |&(z, id)| (z, first + id));
                ws.exchange.extend([z, f32::from_bits(id)]);
            }
        }
        self.comm.all_gather(&ws.exchange, &mut ws.received)?;
        let per_rank = tops.len() * 2 * k;
        let mut merged = vec![TopN::new(k); tops.len()];
        for rank in ws.received.chunks_exact(per_rank.max(1)) {
            for (top, pairs) in merged.iter_mut().zip(rank.chunks_exact(2 * k)) {
                for pair in pairs.chunks_exact(2) {
                    let id = pair[1].to_bits();
                    if id != u32::MAX {
                        top.offer(pair[0], id);
                    }
                }
            }
        }
        Ok(merged.into_iter().map(TopN::into_ranked).collect())
    }

    /// The output layer's active neurons and their probabilities for sample `sample` of
    /// `data`, in `mode` ([`Mode::Train`] forces the sample's labels into the active set).
    pub fn outputs(
        &self,
        ws: &mut Workspace,
        data: &dyn Examples,
        sample: usize,
        mode: Mode,
    ) -> Result<Vec<(u32, f32)>> {
        self.run_batch(ws, data, &[sample], mode, 0, Reach::Output)?;
        let trace = &ws.batch()[0].traces[self.layers().len() - 1];
        Ok(trace.ids().zip(trace.outputs().iter().copied()).collect())
    }

    /// For each LSH layer, how many of a sample's `top` highest-scoring neurons (by exact
    /// pre-activation, every neuron scored) the active set of a training step holds, over
    /// the samples `batch` of `data` (which need labels: the output layer's active set is
    /// built as in training, labels forced in). `None` for layers without LSH. Costs a
    /// forward pass and a full scoring of each LSH layer per sample; changes nothing in the
    /// network.
    pub fn retrieval_recall(
        &self,
        ws: &mut Workspace,
        data: &dyn Examples,
        batch: &[usize],
        top: usize,
    ) -> Result<Vec<Option<Recall>>> {
        self.run_batch(ws, data, batch, Mode::Train, 0, Reach::Output)?;
        let states = ws.batch();
        let mut result = Vec::with_capacity(self.layers().len());
        for (l, layer) in self.layers().iter().enumerate() {
            if !layer.is_sampled() {
                result.push(None);
                continue;
            }
            let shares: Vec<(f64, f64)> = states
                .par_iter()
                .zip(batch)
                .map(|(state, &sample)| {
                    let input = layer_input(&state.traces, l, state.input.get(data, sample));
                    let mut active: Vec<u32> = state.traces[l].ids().collect();
                    active.sort_unstable();
                    let best = layer.top_neurons(input, top);
                    let found = best.iter().filter(|id| active.binary_search(id).is_ok());
                    let want = best.len().max(1) as f64;
                    (
                        found.count() as f64 / want,
                        active.len() as f64 / layer.out_dim() as f64,
                    )
                })
                .collect();
            let n = shares.len().max(1) as f64;
            result.push(Some(Recall {
                recall: shares.iter().map(|s| s.0).sum::<f64>() / n,
                random: shares.iter().map(|s| s.1).sum::<f64>() / n,
                samples: shares.len(),
            }));
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_share_counts_the_most_frequent_value_and_breaks_ties_low() {
        assert_eq!(mode_share(&mut [5, 3, 5, 3, 9], 10), (3, 0.2));
        assert_eq!(mode_share(&mut [], 4), (u32::MAX, 0.0));
    }
}
