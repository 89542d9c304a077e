//! A sample's shared negatives from the layer's pool (see
//! [`Negatives::shared_pool`](crate::Negatives::shared_pool)): the pool's members scored for
//! the sample's input (or its largest entries, `shared_pool_inputs`), the best of them
//! forced into its active set.

use slide_lsh::Vector;

use super::trace::PoolScratch;
use super::{LshState, SparseLayer, rank_key};
use crate::kernels::{Values, kernels};

impl SparseLayer {
    /// Adds to `forced` the [`shared_negatives`](crate::Negatives::shared_negatives) of
    /// the pool that score highest for `input`, scored with its
    /// [`shared_pool_inputs`](crate::Negatives::shared_pool_inputs) largest entries when it
    /// has more nonzero ones (a dense input's chosen entries still by the pool's columns).
    pub(super) fn add_pool_negatives(
        &self,
        lsh: &LshState,
        input: Vector<'_>,
        scratch: &mut PoolScratch,
        forced: &mut Vec<u32>,
    ) {
        let most = lsh.config.negatives.shared_pool_inputs;
        let PoolScratch {
            logits,
            keys,
            input_keys,
            indices,
            values,
        } = scratch;
        let (query, by_columns) = if most > 0 && input.nnz() > most {
            largest_inputs(input, most, input_keys, indices, values);
            let dense = matches!(input, Vector::Dense(_));
            (Vector::Sparse { indices, values }, dense)
        } else {
            (input, false)
        };
        forced.extend(self.best_of_pool(lsh, query, by_columns, logits, keys));
    }

    /// The ids of the [`shared_negatives`](crate::Negatives::shared_negatives) members of
    /// the pool (see [`Negatives::shared_pool`](crate::Negatives::shared_pool)) that score
    /// highest for `input` (ties: the lower id), in no particular order, from the pool's
    /// copied weights (a dense input, or with `by_columns` the chosen entries of one) or the
    /// layer's own rows (a sparse one); `logits` and `keys` are scratch.
    fn best_of_pool<'s>(
        &self,
        lsh: &LshState,
        input: Vector<'_>,
        by_columns: bool,
        logits: &mut Vec<f32>,
        keys: &'s mut Vec<u64>,
    ) -> impl Iterator<Item = u32> + 's {
        let k = kernels();
        let len = lsh.shared.len();
        logits.clear();
        // Input `i`'s column of the pool's copy, times `v`, into the scores.
        let add_column = |logits: &mut Vec<f32>, i: usize, v: f32| {
            let at = i * len..(i + 1) * len;
            let column = if lsh.pool_cols_bf16.is_empty() {
                Values::F32(&lsh.pool_cols[at])
            } else {
                Values::Bf16(&lsh.pool_cols_bf16[at])
            };
            k.axpy_row(v, column, logits);
        };
        match input {
            // Zero inputs (often, after a ReLU) add nothing.
            Vector::Dense(_) => {
                logits.extend_from_slice(&lsh.pool_bias);
                input.for_each_nonzero(|i, v| add_column(logits, i, v));
            }
            // A dense input's largest entries (`shared_pool_inputs`): their columns, in
            // input order, as the whole input's would be added.
            Vector::Sparse { indices, values } if by_columns => {
                logits.extend_from_slice(&lsh.pool_bias);
                for (&i, &v) in indices.iter().zip(values) {
                    add_column(logits, i as usize, v);
                }
            }
            Vector::Sparse { .. } => logits.extend(
                lsh.shared
                    .iter()
                    .map(|&j| self.neuron_logit(k, j as usize, input)),
            ),
        }
        keys.clear();
        keys.extend(
            logits
                .iter()
                .zip(&lsh.shared)
                .map(|(&z, &j)| rank_key(z, j)),
        );
        let take = lsh.config.negatives.shared_negatives.min(keys.len());
        if take < keys.len() {
            keys.select_nth_unstable(take);
        }
        keys[..take].iter().map(|&key| key as u32)
    }
}

/// The `most` entries of `input` largest in magnitude (ties: the lower index), in index
/// order, into `indices` and `values`; `keys` is scratch. Zeros are never taken.
fn largest_inputs(
    input: Vector<'_>,
    most: usize,
    keys: &mut Vec<u64>,
    indices: &mut Vec<u32>,
    values: &mut Vec<f32>,
) {
    keys.clear();
    // The magnitude's bits order as the magnitude does; inverted, the largest sorts first,
    // and the index below them breaks ties towards the lower one.
    input.for_each_nonzero(|i, v| {
        keys.push((u64::from(!v.abs().to_bits()) << 32) | i as u64);
    });
    if most < keys.len() {
        keys.select_nth_unstable(most);
        keys.truncate(most);
    }
    keys.sort_unstable_by_key(|&key| key as u32);
    indices.clear();
    values.clear();
    for &key in keys.iter() {
        let i = key as u32;
        indices.push(i);
        values.push(match input {
            Vector::Dense(x) => x[i as usize],
            Vector::Sparse { indices, values } => values[indices.partition_point(|&j| j < i)],
        });
    }
}

impl LshState {
    /// Room for a sample's inputs in the scratch of a layer of `in_dim` inputs whose pool is
    /// scored with only its largest inputs (`Negatives::shared_pool_inputs`): every input
    /// may be nonzero. None otherwise.
    pub(super) fn pool_input_room(&self, in_dim: usize) -> usize {
        if self.config.negatives.shared_pool_inputs > 0 {
            in_dim
        } else {
            0
        }
    }
}
