//! LSH-mode prediction with a batch pool: the outputs that score highest for the mean of a
//! block of samples' inputs to the output layer are scored for each sample of the block,
//! beside the outputs its tables pick ([`EvalOptions::pool`](super::EvalOptions::pool)).
//!
//! One full scoring of the output layer serves [`POOL_GROUP`] samples (an evaluation
//! block); each sample then scores only the pool and those of its tables' picks that the
//! pool lacks, found without the shared negatives (outputs of the kind the pool holds,
//! which cost each sample a scoring of the training pool: 28% of the time at 100K
//! outputs). The outputs that win for some sample are the ones whose rows and biases have
//! been trained up: the part of a logit that is common to every input (the bias and the
//! row against the mean input) decides most of the ranking, and the mean of a block's
//! inputs ranks it (docs/notebook/label-trees.md, "Prediction from a batch pool").

use rayon::prelude::*;

use crate::data::Examples;
use crate::error::Result;
use crate::kernels::kernels;
use crate::layer::SparseLayer;
use crate::network::Network;
use crate::top::TopN;
use crate::workspace::{Workspace, layer_input};
use slide_lsh::Vector;

/// Samples whose mean input chooses one pool: an evaluation block's
/// ([`EVAL_BLOCK`](super::EVAL_BLOCK)). At 670K outputs and 490,449 training samples, groups
/// of 1,024 lost nothing against groups of 512, 256 or 128 (P@1 0.8728, 0.8728, 0.8727,
/// 0.8730 with a pool of 98,304) and ran 29% faster than groups of 128 (fewer full scorings,
/// larger products); groups of 32 or 16 cost more than they gained. Groups of 2,048 lost
/// nothing against 1,024 at 100K outputs (0.7914 against 0.7916, pool 8,192) and spend half
/// as much on full scorings.
pub const POOL_GROUP: usize = super::EVAL_BLOCK;

/// Output rows scored at once (one matrix product each).
const ROWS: usize = 256;

impl Network {
    /// The `k` best outputs of each sample of `block` (at most [`POOL_GROUP`]), whose hidden
    /// layers [`Self::run_batch`] has run into `ws`: the best of the block's pool of
    /// `options.pool` outputs (see the module's doc) and of the outputs its tables pick, by logit. The
    /// samples' tables are queried without the shared negatives (the pool holds the
    /// outputs that score high for every input), and their picks in the pool are not scored
    /// twice; `options.picks` says how many picks each scores. Samples draw their random numbers from the streams of their positions,
    /// `first` on.
    pub(super) fn pooled_tops(
        &self,
        ws: &mut Workspace,
        data: &dyn Examples,
        block: &[usize],
        first: usize,
        options: &super::EvalOptions,
        k: usize,
    ) -> Result<Vec<TopN>> {
        debug_assert!(block.len() <= POOL_GROUP);
        let last = self.layers().len() - 1;
        let layer = &self.layers()[last];
        let dim = layer.in_dim();
        let mut x = vec![0.0f32; block.len() * dim];
        for ((row, state), &sample) in x.chunks_exact_mut(dim).zip(ws.batch()).zip(block) {
            layer_input(&state.traces, last, state.input.get(data, sample))
                .for_each_nonzero(|i, v| row[i] = v);
        }
        let mut mean = vec![0.0f32; dim];
        for row in x.chunks_exact(dim) {
            mean.iter_mut().zip(row).for_each(|(m, &v)| *m += v);
        }
        let scale = 1.0 / block.len().max(1) as f32;
        mean.iter_mut().for_each(|m| *m *= scale);
        let ids = best_for_mean(layer, &mean, options.pool);
        let mut best = score_rows(layer, &x, block.len(), &ids, k);
        self.offer_table_picks(ws, data, block, (first, options.picks), &ids, &mut best)?;
        Ok(best)
    }
}

/// The `pool` outputs of `layer` whose logits for `mean` are highest, in increasing order
/// of id (every output when `pool` is at least the layer's width).
fn best_for_mean(layer: &SparseLayer, mean: &[f32], pool: usize) -> Vec<u32> {
    let out_dim = layer.out_dim();
    if pool >= out_dim {
        return (0..out_dim as u32).collect();
    }
    let k = kernels();
    let mut logits = vec![0.0f32; out_dim];
    logits
        .par_chunks_mut(ROWS)
        .enumerate()
        .for_each(|(chunk, out)| {
            for (r, z) in out.iter_mut().enumerate() {
                *z = layer.neuron_logit(k, chunk * ROWS + r, Vector::Dense(mean));
            }
        });
    let mut order: Vec<u32> = (0..out_dim as u32).collect();
    // Ties: the lower id, as everywhere outputs are ranked.
    order.select_nth_unstable_by(pool - 1, |&a, &b| {
        logits[b as usize]
            .total_cmp(&logits[a as usize])
            .then(a.cmp(&b))
    });
    order.truncate(pool);
    order.sort_unstable();
    order
}

/// The `k` best of the rows `ids` of `layer` for each of the `n` samples of `x` (row-major,
/// `layer.in_dim()` values each), by logit.
fn score_rows(layer: &SparseLayer, x: &[f32], n: usize, ids: &[u32], k: usize) -> Vec<TopN> {
    let dim = layer.in_dim();
    ids.par_chunks(ROWS)
        .fold(
            || {
                (
                    vec![TopN::new(k); n],
                    vec![0.0f32; ROWS * dim],
                    vec![0.0f32; n * ROWS],
                )
            },
            |(mut best, mut widened, mut scores), chunk| {
                let rows = chunk.len();
                for (&id, out) in chunk.iter().zip(widened.chunks_exact_mut(dim)) {
                    layer.row(id as usize).first(dim).widen_into(out);
                }
                (kernels().scores)(x, n, dim, &widened, rows, dim, &mut scores[..n * rows]);
                for (best, z) in best.iter_mut().zip(scores.chunks_exact(rows)) {
                    for (&id, &z) in chunk.iter().zip(z) {
                        let z = z + layer.biases()[id as usize];
                        if z >= best.last() {
                            best.offer(z, id);
                        }
                    }
                }
                (best, widened, scores)
            },
        )
        .map(|(best, _, _)| best)
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
