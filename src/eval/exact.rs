//! Exact scoring of a block of samples: every output row read once for all of them, one
//! matrix product per block of rows, each sample's best kept.

use rayon::prelude::*;

use super::EvalPrecision;
use crate::data::Examples;
use crate::kernels::kernels;
use crate::network::Network;
use crate::top::TopN;
use crate::workspace::{Workspace, layer_input};

impl Network {
    /// The `k` highest output logits of each sample of `block` (whose hidden layers
    /// [`Self::run_batch`] has run into `ws`), every output neuron scored: the block's
    /// inputs as a dense matrix times each block of output rows, as one matrix product per
    /// block of rows (each row read once for all samples while it sits in cache), in
    /// parallel over blocks of rows; a row's score joins a sample's top `k` only when it beats
    /// the sample's `k`th best, checked with one comparison.
    pub(super) fn best_outputs(
        &self,
        ws: &Workspace,
        data: &dyn Examples,
        block: &[usize],
        precision: EvalPrecision,
        k: usize,
    ) -> Vec<TopN> {
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
                    let widened = vec![0.0f32; if f32_rows.is_some() { 0 } else { ROWS * dim }];
                    (
                        vec![TopN::new(k); n],
                        vec![0.0f32; n * ROWS],
                        Vec::new(),
                        widened,
                    )
                },
                |(mut best, mut scores, mut packed, mut widened), chunk| {
                    let first = chunk * ROWS;
                    let rows = ROWS.min(out_dim - first);
                    // BF16 weights are widened a block of rows at a time (exactly).
                    let (w, stride) = match f32_rows {
                        Some((weights, stride)) => (&weights[first * stride..], stride),
                        None => {
                            layer.widen_rows(first.., &mut widened[..rows * dim]);
                            (&widened[..], dim)
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
                        // `k`th best without branching (an OR of comparisons vectorises; a
                        // running maximum would not), then a run is looked into only if a
                        // score would enter the top `k` (rare once it has filled).
                        for (run, (z, b)) in z.chunks_mut(16).zip(bias.chunks(16)).enumerate() {
                            let kth = best.last();
                            let mut enters = false;
                            for (z, &b) in z.iter_mut().zip(b) {
                                *z += b;
                                enters |= *z >= kth;
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
                    (best, scores, packed, widened)
                },
            )
            .map(|(best, _, _, _)| best)
            .reduce(
                || vec![TopN::new(k); n],
                |mut a, b| {
                    for (a, b) in a.iter_mut().zip(&b) {
                        a.merge(b);
                    }
                    a
                },
            )
    }
}
