//! A sampled layer's upkeep of its LSH state ([`LshState`], in `lsh_state.rs`): its tables
//! rebuilt from the weights, and the shared negatives (or their pool) and query center it
//! derives from the mean input of a recent training batch, refreshed by scoring every
//! neuron and re-ranked in between.

use rayon::prelude::*;
use slide_lsh::{TablesStats, Vector};

use super::SparseLayer;
use super::block::Precision;
#[cfg(doc)]
use super::lsh_config::LshConfig;
use super::lsh_state::LshState;
use super::ranking::rank_key;
use crate::error::Result;
use crate::kernels::{Values, kernels};

impl SparseLayer {
    /// Re-hashes the neurons' weight rows into the layer's tables (no-op for dense layers
    /// and for a sampling that takes nothing from the tables: uniform sampling). Only the
    /// rows written since the last rebuild (by training steps or
    /// [`set_weight`](Self::set_weight)) are hashed again, the others' codes kept from it;
    /// every row is hashed at the first rebuild and after a restored state. The tables are
    /// the same either way.
    pub fn rebuild_tables(&mut self) -> Result<()> {
        // Out of the layer while its rows are read.
        let Some(mut lsh) = self.lsh.take_if(|l| l.sampling.uses_tables()) else {
            return Ok(());
        };
        let rebuilt = if lsh.changed.is_all() || !lsh.tables.codes_kept() {
            match self.f32_rows() {
                Some((rows, block)) => lsh.tables.rebuild_dense(&lsh.family, rows, block),
                None => lsh
                    .tables
                    .rebuild_filled(&lsh.family, |first, out| self.widen_rows(first.., out)),
            }
        } else {
            let changed = lsh.changed.ids();
            lsh.tables
                .rebuild_changed_filled(&lsh.family, changed, |ids, out| {
                    self.widen_rows(ids.iter().map(|&id| id as usize), out)
                })
        };
        match rebuilt {
            Ok(()) => lsh.changed.clear(),
            Err(_) => lsh.changed.mark_all(),
        }
        lsh.stats = lsh.tables.stats();
        self.lsh = Some(lsh);
        Ok(rebuilt?)
    }

    /// What the LSH tables held after the last rebuild (bucket occupancy, ids dropped by
    /// full buckets); `None` for a layer without LSH.
    pub fn table_stats(&self) -> Option<TablesStats> {
        self.lsh.as_ref().map(|l| l.stats)
    }
    /// Refreshes what the layer derives from the mean input of a recent training batch: the shared
    /// negatives (see [`Negatives::shared_negatives`](crate::Negatives::shared_negatives)) or their
    /// pool (see [`Negatives::shared_pool`](crate::Negatives::shared_pool)), the neurons with the
    /// highest pre-activation for `mean_input`, and the query center (see
    /// [`Retrieval::center_queries`](crate::Retrieval::center_queries)).
    ///
    /// A [`Network`](crate::Network) calls this every 8 steps and at every rebuild, and
    /// [`rescore_shared`](Self::rescore_shared) in between; a caller training the layer on
    /// its own calls either as often as it likes (no-op for a layer without LSH). Panics if
    /// `mean_input` is not `in_dim` long.
    pub fn refresh_mean_input(&mut self, mean_input: &[f32]) {
        assert_eq!(mean_input.len(), self.in_dim, "mean input length");
        let Some(count) = self.lsh.as_ref().map(|l| l.shared_len) else {
            return;
        };
        let best = if count > 0 {
            self.top_neurons(Vector::Dense(mean_input), count)
        } else {
            Vec::new()
        };
        // Out of the layer while the pool's rows are copied.
        let Some(mut lsh) = self.lsh.take() else {
            return;
        };
        lsh.shared.clear();
        lsh.shared.extend_from_slice(&best);
        self.copy_pool_rows(&mut lsh);
        if lsh.config.retrieval.center_queries {
            lsh.center.clear();
            lsh.center.extend_from_slice(mean_input);
        }
        self.lsh = Some(lsh);
    }

    /// Re-ranks the shared negatives between two refreshes: scores them and `candidates`
    /// for `mean_input` and keeps the best [`shared_negatives`](crate::Negatives::shared_negatives)
    /// (with a pool, [`shared_pool`](crate::Negatives::shared_pool)) of that union, best first
    /// (ties: the lower id). A [`Network`](crate::Network) calls
    /// this after every training step of its output layer that does not refresh, with the
    /// mean input of the batch and the batch's labels as candidates: the step has just
    /// pulled those rows up, so they are the ones that can have risen into the top, and a
    /// label of many recent samples becomes a shared negative within a step instead of up
    /// to 8 (exact P@1 after 3 epochs at the Amazon-670K shape: docs/notebook/accuracy.md,
    /// "Re-ranking the shared negatives after every step"). One dot product per id; once
    /// its scratch has grown, allocates nothing.
    ///
    /// No-op for a layer without shared negatives and before the first
    /// [`refresh_mean_input`](Self::refresh_mean_input). Panics if `mean_input` is not
    /// `in_dim` long or a candidate is not a neuron of the layer.
    pub fn rescore_shared(&mut self, mean_input: &[f32], candidates: &[u32]) {
        assert_eq!(mean_input.len(), self.in_dim, "mean input length");
        assert!(
            candidates.iter().all(|&j| (j as usize) < self.out_dim),
            "a candidate is not a neuron of the layer"
        );
        // Out of the layer while its rows are scored.
        let Some(mut lsh) = self.lsh.take() else {
            return;
        };
        if !lsh.shared.is_empty() {
            let (k, input) = (kernels(), Vector::Dense(mean_input));
            let scored = &mut lsh.rescored;
            scored.clear();
            // In parallel (each id's key on its own, in the union's order): the step's
            // threads would otherwise wait for one of them.
            scored.par_extend(
                lsh.shared
                    .par_iter()
                    .chain(candidates.par_iter())
                    .map(|&j| rank_key(self.neuron_logit(k, j as usize, input), j)),
            );
            // An id listed twice has the same key both times, so its copies end up adjacent.
            scored.sort_unstable();
            scored.dedup();
            lsh.shared.clear();
            lsh.shared
                .extend(scored.iter().take(lsh.shared_len).map(|&key| key as u32));
            self.copy_pool_rows(&mut lsh);
        }
        self.lsh = Some(lsh);
    }

    /// With a pool (see [`Negatives::shared_pool`](crate::Negatives::shared_pool)), copies its
    /// weights input by input (as stored: BF16 takes half the bytes) and its biases into `lsh`, so
    /// that a sample scores the whole pool with one `axpy` per nonzero input (a dot product per
    /// member cost about 30 ns, most of it the reduction); otherwise nothing. Allocates only to
    /// grow.
    pub(crate) fn copy_pool_rows(&self, lsh: &mut LshState) {
        lsh.pool_cols.clear();
        lsh.pool_cols_bf16.clear();
        lsh.pool_bias.clear();
        if !lsh.pooled() {
            return;
        }
        let (len, in_dim) = (lsh.shared.len(), self.in_dim);
        if self.weights == Precision::Bf16 {
            lsh.pool_cols_bf16.resize(len * in_dim, 0);
            let row = |j: u32| match self.row(j as usize).first(in_dim) {
                Values::Bf16(row) => row,
                Values::F32(_) => unreachable!("a BF16 layer's row"),
            };
            transpose_rows(&lsh.shared, row, in_dim, &mut lsh.pool_cols_bf16);
        } else {
            lsh.pool_cols.resize(len * in_dim, 0.0);
            let row = |j: u32| match self.row(j as usize).first(in_dim) {
                Values::F32(row) => row,
                Values::Bf16(_) => unreachable!("an f32 layer's row"),
            };
            transpose_rows(&lsh.shared, row, in_dim, &mut lsh.pool_cols);
        }
        lsh.pool_bias
            .extend(lsh.shared.iter().map(|&j| self.bias[j as usize]));
    }

    /// The smallest gradient on an active output that trains (see
    /// [`Negatives::min_gradient`](crate::Negatives::min_gradient)); 0 without LSH and
    /// during the warm-up, while its random ids are drawn.
    pub(crate) fn min_gradient(&self) -> f32 {
        self.lsh.as_ref().map_or(0.0, |l| {
            let warming_up = l.sampling.random_extra > l.random_extra;
            if warming_up {
                0.0
            } else {
                l.config.negatives.min_gradient
            }
        })
    }

    /// Whether the layer keeps shared negatives (and has had its first refresh).
    pub(crate) fn has_shared_negatives(&self) -> bool {
        self.lsh.as_ref().is_some_and(|l| !l.shared.is_empty())
    }

    /// Whether the layer uses the mean input (shared negatives or centered queries): not
    /// where every output is active anyway.
    pub(crate) fn uses_mean_input(&self) -> bool {
        !self.every_output_active()
            && self.lsh.as_ref().is_some_and(|l| {
                l.config.negatives.shared_negatives > 0 || l.config.retrieval.center_queries
            })
    }

    /// Whether an LSH layer computes every output, asking its tables nothing: where its
    /// sampling's `min_active` is at least [`dense_share`](crate::Retrieval::dense_share)
    /// of its outputs (by default: where it makes every output active anyway, as for a
    /// layer of 159 labels under a recipe for thousands). Its passes then skip the
    /// hashing, the tables' queries and the shared negatives, as a layer without LSH does.
    pub fn every_output_active(&self) -> bool {
        self.lsh.as_ref().is_some_and(|l| {
            l.sampling.min_active as f64
                >= f64::from(l.config.retrieval.dense_share) * self.out_dim as f64
        })
    }

    /// Whether what the layer derives from the mean input is due for a refresh after `step`
    /// training steps (see [`Negatives::shared_refresh`](crate::Negatives::shared_refresh)).
    pub(crate) fn mean_input_due(&self, step: u64) -> bool {
        self.lsh
            .as_ref()
            .is_some_and(|l| step.is_multiple_of(l.config.negatives.shared_refresh))
    }

    /// Whether the shared negatives are due for a re-ranking after `step` training steps
    /// (see [`Negatives::shared_rescore`](crate::Negatives::shared_rescore)).
    pub(crate) fn rescore_due(&self, step: u64) -> bool {
        self.lsh
            .as_ref()
            .is_some_and(|l| step.is_multiple_of(l.config.negatives.shared_rescore))
    }
}

/// Writes the rows of `ids` (each `in_dim` long, from `row`) input by input into `cols`:
/// `cols[i * ids.len() + p] = row(ids[p])[i]`. Sixteen rows at a time, so that each input's
/// writes fill runs of 16 values instead of touching a cache line each (one row at a time,
/// a pool of 2,048 took about 1 ms per copy); in parallel over blocks of [`INPUTS_PER_TASK`]
/// inputs, each a contiguous part of `cols` (the copy follows every training step, and
/// serially it took 3.9 ms of a 2-thread step at the Amazon-670K shape, and held 15 idle
/// threads of 16 for as long).
pub(super) fn transpose_rows<'a, T: Copy + Send + Sync + 'a>(
    ids: &[u32],
    row: impl Fn(u32) -> &'a [T] + Sync,
    in_dim: usize,
    cols: &mut [T],
) {
    const RUN: usize = 16;
    let len = ids.len();
    if len == 0 {
        return;
    }
    cols[..len * in_dim]
        .par_chunks_mut(len * INPUTS_PER_TASK)
        .enumerate()
        .for_each(|(task, part)| {
            let inputs = task * INPUTS_PER_TASK..(task * INPUTS_PER_TASK + part.len() / len);
            for (chunk, block) in ids.chunks(RUN).enumerate() {
                let mut rows: [&[T]; RUN] = [&[]; RUN];
                for (r, &j) in rows.iter_mut().zip(block) {
                    *r = &row(j)[inputs.clone()];
                }
                let (first, rows) = (chunk * RUN, &rows[..block.len()]);
                for (i, out) in part.chunks_exact_mut(len).enumerate() {
                    for (o, r) in out[first..first + block.len()].iter_mut().zip(rows) {
                        *o = r[i];
                    }
                }
            }
        });
}

/// Inputs per task of [`transpose_rows`]: 32 BF16 values are one cache line of a row.
const INPUTS_PER_TASK: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;

    /// Each row's input `i` lands at `cols[i * len + p]`, for pool lengths and widths that
    /// are not multiples of the 16-row run or the 32-input task, and for one of each.
    #[test]
    fn transpose_rows_puts_every_value_at_its_input_and_member() {
        let rows: Vec<Vec<u32>> = (0..50u32)
            .map(|j| (0..70u32).map(|i| j * 1000 + i).collect())
            .collect();
        for (len, in_dim) in [(1, 1), (17, 33), (40, 70), (16, 64)] {
            // Distinct, unordered members (7 and 50 are coprime).
            let ids: Vec<u32> = (0..len as u32).map(|p| (p * 7) % 50).collect();
            let mut cols = vec![u32::MAX; len * in_dim];
            transpose_rows(&ids, |j| &rows[j as usize][..in_dim], in_dim, &mut cols);
            for i in 0..in_dim {
                for (p, &j) in ids.iter().enumerate() {
                    assert_eq!(
                        cols[i * len + p],
                        j * 1000 + i as u32,
                        "input {i}, member {p}"
                    );
                }
            }
        }
    }
}
