//! What a network takes in memory, from its config alone.

use super::NetworkConfig;
use crate::layer::{BlockLayout, Precision, WeightLayout};

/// What a network takes in memory, from its config alone (see
/// [`NetworkConfig::estimated_bytes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryEstimate {
    /// Weights, Adam moments and update counts (rows padded to 64 bytes), biases with
    /// theirs.
    pub parameters: u64,
    /// LSH tables at their largest: bucket index, id stores and the rebuild's codes.
    pub tables: u64,
    /// One exported [`NetworkState`](crate::NetworkState): unpadded weights, moments and
    /// counts, biases and table contents, the payload of a checkpoint (a writer that holds
    /// copies of it adds this once per copy).
    pub state: u64,
}

impl MemoryEstimate {
    /// Parameters and tables: what a built network holds.
    pub fn model(&self) -> u64 {
        self.parameters + self.tables
    }
}

impl NetworkConfig {
    /// What one rank of `ranks` holds when the output layer is split between them (see
    /// [`Network::sharded`](crate::Network::sharded)): the layers before it whole, and the
    /// largest slice of the output layer (rank 0's), its tables tuned for that slice.
    pub fn estimated_bytes_per_rank(&self, ranks: usize) -> MemoryEstimate {
        let mut rank_zero = self.clone();
        if let Some(last) = rank_zero.layers.last_mut() {
            last.out_dim = crate::comm::shard_range(last.out_dim, 0, ranks.max(1)).len();
        }
        rank_zero.estimated_bytes()
    }

    /// The memory the network needs, computed from the config without allocating (checked
    /// against the allocations of built networks in the tests).
    pub fn estimated_bytes(&self) -> MemoryEstimate {
        let mut estimate = MemoryEstimate::default();
        let mut in_dim = self.input_dim as u64;
        for layer in &self.layers {
            let out = layer.out_dim as u64;
            let (rows, row_len) = match layer.layout {
                WeightLayout::NeuronMajor => (out, in_dim),
                WeightLayout::InputMajor => (in_dim, out),
            };
            let stride = row_len.div_ceil(16) * 16;
            // [w | m | v] rows, one u32 count per row; bias, its moments and count.
            let block = BlockLayout {
                stride: stride as usize,
                weights: layer.weights,
                moments: layer.moments,
            }
            .block() as u64;
            estimate.parameters += rows * (block * 4 + 4) + out * 16;
            estimate.state += rows * (3 * row_len * 4 + 4) + out * 16;
            if let Some(lsh) = &layer.lsh {
                let tables = lsh.retrieval.tables(layer.out_dim, 0);
                estimate.tables += tables.estimated_bytes();
                // Saved: 4 u32 per bucket and the stored ids; shared negatives, center.
                let buckets = (lsh.retrieval.params.l as u64) << lsh.retrieval.params.range_pow;
                let stored = (lsh.retrieval.params.l as u64) * out;
                let shared = lsh.negatives.shared_len() as u64;
                estimate.state += buckets * 16 + stored * 4 + shared * 4;
                // The copy of a pool's weights (as stored) and biases (see
                // `Negatives::shared_pool`).
                if lsh.negatives.pooled() {
                    let bytes = if layer.weights == Precision::Bf16 {
                        2
                    } else {
                        4
                    };
                    estimate.tables += shared * (in_dim * bytes + 4);
                }
                estimate.state += if lsh.retrieval.center_queries {
                    in_dim * 4
                } else {
                    0
                };
            }
            in_dim = out;
        }
        for head in &self.heads {
            let bytes = head.estimated_bytes(self.head_shape());
            estimate.parameters += bytes;
            estimate.state += bytes;
        }
        estimate
    }
}
