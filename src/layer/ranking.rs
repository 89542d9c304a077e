//! The exact scoring of every neuron that evaluation, the shared negatives and the
//! exact-picks ablation (`exact_picks.rs`) use, and the rank keys every ranking of neurons
//! follows.

use rayon::prelude::*;
use slide_lsh::Vector;

use super::SparseLayer;
use crate::kernels::{PREFETCH_AHEAD, kernels, prefetch_values};

impl SparseLayer {
    /// The ids of the `top` neurons with the highest pre-activation for `input` (every
    /// neuron scored, in parallel over blocks of neurons; ties: the lower id, see
    /// [`rank_key`]), best first. Neuron-major layers only.
    pub(crate) fn top_neurons(&self, input: Vector<'_>, top: usize) -> Vec<u32> {
        const BLOCK: usize = 4096;
        if top == 0 {
            return Vec::new();
        }
        let k = kernels();
        // The best `top` keys (see `rank_key`) of `keys`, in no order: linear in their
        // number whatever `top` (a sorted insertion per candidate cost a pool of 1,024
        // about 1,000 moves each).
        let keep_best = |mut keys: Vec<u64>| {
            if keys.len() > top {
                keys.select_nth_unstable(top);
                keys.truncate(top);
            }
            keys
        };
        let mut best = (0..self.out_dim.div_ceil(BLOCK))
            .into_par_iter()
            .map(|b| {
                let end = ((b + 1) * BLOCK).min(self.out_dim);
                let mut keys = Vec::with_capacity(end - b * BLOCK);
                for j in b * BLOCK..end {
                    // Rows are read in order, but a row's weights are a third of its block
                    // (its moments sit in between), a gap the hardware prefetcher does not
                    // bridge: asking 4 rows ahead took a scan of 670,091 BF16 rows from
                    // 29 to 21 ms (8 and 16 ahead: 21 and 23 ms).
                    if j + PREFETCH_AHEAD < end {
                        prefetch_values(self.row(j + PREFETCH_AHEAD).first(self.in_dim));
                    }
                    keys.push(rank_key(self.neuron_logit(k, j, input), j as u32));
                }
                keep_best(keys)
            })
            .reduce(Vec::new, |mut a, b| {
                a.extend(b);
                keep_best(a)
            });
        best.sort_unstable();
        best.into_iter().map(|key| key as u32).collect()
    }
}

/// Whether the scored neuron `a = (logit, id)` ranks before `b`: the higher logit, and on
/// a tie the lower id, so a ranking does not depend on the order neurons are offered in.
#[inline]
pub(crate) fn ranks_before(a: (f32, u32), b: (f32, u32)) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 < b.1)
}

/// `(z, id)` as one integer that is smaller for the better of two (see [`ranks_before`],
/// which it follows, except that -0.0 ranks below 0.0): integer keys sort and select
/// without branches, where a comparison closure over `(score, id)` pairs mispredicts at
/// every other step. The id is the key's low 32 bits.
pub(crate) fn rank_key(z: f32, id: u32) -> u64 {
    let bits = z.to_bits();
    // An integer that orders as `z` does.
    let ordered = if bits >> 31 == 1 {
        !bits
    } else {
        bits | 1 << 31
    };
    (u64::from(!ordered) << 32) | u64::from(id)
}
