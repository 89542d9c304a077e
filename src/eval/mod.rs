//! Evaluation: precision at 1, 3 and 5 with every output scored (blocked, so the output
//! weights are read once per block of samples) or over the LSH-selected set, the collapse
//! detector, a sample's outputs, and the tables' retrieval recall. One top-k with one tie
//! rule (`Top5`) ranks outputs everywhere.

use rayon::prelude::*;

mod options;
mod pool;
pub use options::{EvalOptions, EvalPrecision};
pub use pool::POOL_GROUP;

use crate::data::Examples;
use crate::error::Result;
use crate::kernels::kernels;
use crate::layer::{Mode, WeightLayout};
use crate::network::Network;
use crate::stats::{EvalStats, Recall};
use crate::step::Reach;
use crate::top5::{Top, Top5};
use crate::wide::MAX_SHORTLIST;
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
    /// [`Mode::EvalLsh`]): P@1, P@3, P@5 and the collapse detector.
    ///
    /// Samples go through in blocks of [`EVAL_BLOCK`], so memory does not grow with
    /// `batch`. When every output is scored ([`Mode::EvalExact`], [`Mode::EvalDense`]) and
    /// the output layer is neuron-major, each block reads the output weights once for all
    /// its samples and keeps only each sample's 5 best scores: at 670K outputs that is one
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
        let options = options.into();
        options.validate()?;
        if batch.is_empty() {
            return Ok(EvalStats::default());
        }
        let scores_all = self.scores_all(&options);
        let output = &self.layers()[self.layers().len() - 1];
        let mut hits = [0u64; 3];
        let mut active = 0usize;
        let mut top1s = Vec::with_capacity(batch.len());
        for (b, block) in batch.chunks(EVAL_BLOCK).enumerate() {
            let tops = self.block_tops(ws, data, block, &options, b * EVAL_BLOCK, scores_all)?;
            for (top, &sample) in tops.iter().zip(block) {
                if top.first() != u32::MAX {
                    top1s.push(top.first());
                }
                for (h, f) in hits.iter_mut().zip(top.hits(data.labels(sample))) {
                    *h += u64::from(f);
                }
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
            precision_at_1: hits[0] as f64 / n,
            precision_at_3: hits[1] as f64 / (3.0 * n),
            precision_at_5: hits[2] as f64 / (5.0 * n),
            active_outputs: active as f64 / n,
            top1_output,
            top1_share,
            label_share,
        })
    }

    /// Each sample's highest-scoring outputs, at most 5, as `(output, logit)` pairs, best
    /// first (ties: the lower output id): what a deployed model answers. `options` as for
    /// [`Self::evaluate`]: [`Mode::EvalExact`] scores every output, [`Mode::EvalLsh`] ranks
    /// the outputs the tables pick ([`Mode::Train`] is taken as `EvalLsh`). The samples'
    /// labels are not read.
    pub fn predict(
        &self,
        ws: &mut Workspace,
        data: &dyn Examples,
        batch: &[usize],
        options: impl Into<EvalOptions>,
    ) -> Result<Vec<Vec<(u32, f32)>>> {
        let options = options.into();
        options.validate()?;
        let scores_all = self.scores_all(&options);
        let mut predictions = Vec::with_capacity(batch.len());
        for (b, block) in batch.chunks(EVAL_BLOCK).enumerate() {
            let tops = self.block_tops(ws, data, block, &options, b * EVAL_BLOCK, scores_all)?;
            predictions.extend(tops.iter().map(|top| top.ranked().collect()));
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

    /// The 5 best outputs of each sample of `block` (re-ranked by the wide head, if any): every output scored
    /// ([`Self::best_outputs`]) when `scores_all`, else those of the sampled output layer.
    fn block_tops(
        &self,
        ws: &mut Workspace,
        data: &dyn Examples,
        block: &[usize],
        options: &EvalOptions,
        first: usize,
        scores_all: bool,
    ) -> Result<Vec<Top5>> {
        let pooled = self.pooled(options);
        // Both score the output layer for the block at once, after the hidden layers.
        let reach = if scores_all || pooled {
            Reach::Hidden
        } else {
            Reach::Output
        };
        self.run_batch(ws, data, block, options.pass(), first, reach)?;
        // A wide head re-ranks each sample's shortlist (the LSH pass did so per sample).
        let tops = match (&self.wide, scores_all, pooled) {
            (None, true, _) => self.best_outputs::<5>(ws, data, block, options.precision),
            (None, false, true) => self.pooled_tops::<5>(ws, data, block, first, options)?,
            (Some(_), true, _) => {
                let best = self.best_outputs::<MAX_SHORTLIST>(ws, data, block, options.precision);
                self.rerank(ws, data, block, &best)
            }
            (Some(_), false, true) => {
                let best = self.pooled_tops::<MAX_SHORTLIST>(ws, data, block, first, options)?;
                self.rerank(ws, data, block, &best)
            }
            (_, false, false) => ws.batch().iter().map(|state| state.top).collect(),
        };
        self.merge_ranks(ws, tops)
    }

    /// Each sample's 5 best after the wide head re-ranked the first
    /// [`shortlist`](crate::WideConfig::shortlist) of its candidates (`best`, by logit).
    fn rerank<const K: usize>(
        &self,
        ws: &Workspace,
        data: &dyn Examples,
        block: &[usize],
        best: &[Top<K>],
    ) -> Vec<Top5> {
        let Some(wide) = &self.wide else {
            return best.iter().map(|b| Top5::from_ranked(b.pairs())).collect();
        };
        best.par_iter()
            .zip(ws.batch())
            .zip(block)
            .map(|((best, state), &sample)| {
                let input = state.input.get(data, sample);
                let mut candidates = wide.candidates(input, best.pairs());
                wide.rerank(input, &mut candidates);
                Top5::from_ranked(&candidates)
            })
            .collect()
    }

    /// Each sample's best outputs over every rank, from each rank's best of its slice (as
    /// ids of the slice, ranked by logit): this rank's, unchanged, with one rank.
    fn merge_ranks(&self, ws: &mut Workspace, tops: Vec<Top5>) -> Result<Vec<Top5>> {
        if self.comm.size() == 1 {
            return Ok(tops);
        }
        // Five (logit, id) pairs per sample, an id sent as the bits of an f32.
        let first = self.output_range.start as u32;
        ws.exchange.clear();
        for top in &tops {
            let mut ranked = top.ranked();
            for _ in 0..5 {
                let (id, z) = ranked
                    .next()
                    .map_or((u32::MAX, f32::NEG_INFINITY), |(id, z)| (first + id, z));
                ws.exchange.extend([z, f32::from_bits(id)]);
            }
        }
        self.comm.all_gather(&ws.exchange, &mut ws.received)?;
        let per_rank = tops.len() * 10;
        let mut merged = vec![Top5::EMPTY; tops.len()];
        for rank in ws.received.chunks_exact(per_rank) {
            for (top, pairs) in merged.iter_mut().zip(rank.chunks_exact(10)) {
                for pair in pairs.chunks_exact(2) {
                    let id = pair[1].to_bits();
                    if id != u32::MAX {
                        top.offer(pair[0], id);
                    }
                }
            }
        }
        Ok(merged)
    }

    /// The `K` highest output logits of each sample of `block` (whose hidden layers
    /// [`Self::run_batch`] has run into `ws`), every output neuron scored: the block's
    /// inputs as a dense matrix times each block of output rows, as one matrix product per
    /// block of rows (each row read once for all samples while it sits in cache), in
    /// parallel over blocks of rows; a row's score joins a sample's top `K` only when it beats
    /// the sample's `K`th best, checked with one comparison.
    fn best_outputs<const K: usize>(
        &self,
        ws: &Workspace,
        data: &dyn Examples,
        block: &[usize],
        precision: EvalPrecision,
    ) -> Vec<Top<K>> {
        const ROWS: usize = 256;
        let last = self.layers().len() - 1;
        let layer = &self.layers()[last];
        let (n, dim, out_dim) = (block.len(), layer.in_dim(), layer.out_dim());
        let mut x = vec![0.0f32; n * dim];
        for ((row, state), &sample) in x.chunks_exact_mut(dim).zip(ws.batch()).zip(block) {
            layer_input(&state.traces, last, state.input.get(data, sample))
                .for_each_nonzero(|i, v| row[i] = v);
        }
        let f32_rows = layer.f32_rows();
        let bf16 = precision == EvalPrecision::Bf16;
        let (mut x_bf16, pairs) = (Vec::new(), dim.div_ceil(2));
        if bf16 {
            crate::kernels::pack_inputs_bf16(&x, n, dim, &mut x_bf16);
        }
        (0..out_dim.div_ceil(ROWS))
            .into_par_iter()
            .fold(
                || {
                    let wide = vec![0.0f32; if f32_rows.is_some() { 0 } else { ROWS * dim }];
                    (
                        vec![Top::<K>::EMPTY; n],
                        vec![0.0f32; n * ROWS],
                        Vec::new(),
                        wide,
                    )
                },
                |(mut best, mut scores, mut packed, mut wide), chunk| {
                    let first = chunk * ROWS;
                    let rows = ROWS.min(out_dim - first);
                    // BF16 weights are widened a block of rows at a time (exactly).
                    let (w, stride) = match f32_rows {
                        Some((weights, stride)) => (&weights[first * stride..], stride),
                        None => {
                            layer.widen_rows(first.., &mut wide[..rows * dim]);
                            (&wide[..], dim)
                        }
                    };
                    if bf16 {
                        crate::kernels::pack_rows_bf16(w, rows, stride, dim, &mut packed);
                        crate::kernels::scores_bf16(&x_bf16, n, pairs, &packed, rows, &mut scores);
                    } else {
                        (kernels().scores)(&x, n, dim, w, rows, stride, &mut scores);
                    }
                    let bias = &layer.biases()[first..first + rows];
                    for (best, z) in best.iter_mut().zip(scores.chunks_exact_mut(rows)) {
                        // Runs of 16: the biases added and each score compared with the
                        // 5th best without branching (an OR of comparisons vectorises; a
                        // running maximum would not), then a run is looked into only if a
                        // score would enter the top `K` (rare once it has filled).
                        for (run, (z, b)) in z.chunks_mut(16).zip(bias.chunks(16)).enumerate() {
                            let fifth = best.last();
                            let mut enters = false;
                            for (z, &b) in z.iter_mut().zip(b) {
                                *z += b;
                                enters |= *z >= fifth;
                            }
                            if !enters {
                                continue;
                            }
                            for (j, &z) in z.iter().enumerate() {
                                if z >= best.last() {
                                    best.offer(z, (first + run * 16 + j) as u32);
                                }
                            }
                        }
                    }
                    (best, scores, packed, wide)
                },
            )
            .map(|(best, _, _, _)| best)
            .reduce(
                || vec![Top::<K>::EMPTY; n],
                |mut a, b| {
                    for (a, b) in a.iter_mut().zip(&b) {
                        a.merge(b);
                    }
                    a
                },
            )
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
