//! A layer's trainable state in plain arrays, for checkpoints.

use super::SparseLayer;
use crate::error::{Result, config_error};

/// A layer's trainable state in plain arrays (for checkpoints): rows of the stored layout
/// without padding.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerState {
    /// Stored rows: neurons (neuron-major) or inputs (input-major).
    pub rows: usize,
    /// Floats per row: `in_dim` (neuron-major) or `out_dim` (input-major).
    pub row_len: usize,
    /// `rows * row_len` weights.
    pub weights: Vec<f32>,
    /// Adam's first moments of the weights.
    pub m: Vec<f32>,
    /// Adam's second moments of the weights.
    pub v: Vec<f32>,
    /// Updates each row has received.
    pub row_steps: Vec<u32>,
    /// One bias per neuron.
    pub bias: Vec<f32>,
    /// Adam's first moments of the biases.
    pub bias_m: Vec<f32>,
    /// Adam's second moments of the biases.
    pub bias_v: Vec<f32>,
    /// Updates each bias has received.
    pub bias_steps: Vec<u32>,
    /// The LSH tables' contents, for sampled layers.
    pub tables: Option<slide_lsh::TablesState>,
    /// The shared negatives in force (see [`LshConfig::shared_negatives`](super::LshConfig::shared_negatives); empty if none).
    pub shared: Vec<u32>,
    /// The query center in force (see [`LshConfig::center_queries`](super::LshConfig::center_queries); empty if none).
    pub center: Vec<f32>,
}

impl SparseLayer {
    fn rows(&self) -> usize {
        self.row_steps.len()
    }

    /// A copy of the layer's trainable state.
    pub fn export_state(&self) -> LayerState {
        let (rows, row_len, stride) = (self.rows(), self.row_len(), self.stride);
        let part = |offset: usize| -> Vec<f32> {
            self.params
                .chunks_exact(3 * stride)
                .flat_map(|block| &block[offset..offset + row_len])
                .copied()
                .collect()
        };
        LayerState {
            rows,
            row_len,
            weights: part(0),
            m: part(stride),
            v: part(2 * stride),
            row_steps: self.row_steps.clone(),
            bias: self.bias.clone(),
            bias_m: self.bias_m.clone(),
            bias_v: self.bias_v.clone(),
            bias_steps: self.bias_steps.clone(),
            tables: self.lsh.as_ref().map(|l| l.tables.export_state()),
            shared: self.lsh.as_ref().map_or(Vec::new(), |l| l.shared.clone()),
            center: self.lsh.as_ref().map_or(Vec::new(), |l| l.center.clone()),
        }
    }

    /// Replaces the layer's trainable state with `state`, after checking every size.
    pub fn import_state(&mut self, state: &LayerState) -> Result<()> {
        let (rows, row_len, stride) = (self.rows(), self.row_len(), self.stride);
        let what = || format!("layer {} -> {} state", self.in_dim, self.out_dim);
        if state.rows != rows || state.row_len != row_len {
            return Err(config_error(
                what(),
                format!(
                    "has {} rows of {}, the layer {rows} of {row_len}",
                    state.rows, state.row_len
                ),
            ));
        }
        let n = rows * row_len;
        if [state.weights.len(), state.m.len(), state.v.len()] != [n; 3]
            || state.row_steps.len() != rows
            || [
                state.bias.len(),
                state.bias_m.len(),
                state.bias_v.len(),
                state.bias_steps.len(),
            ] != [self.out_dim; 4]
        {
            return Err(config_error(what(), "array sizes do not match the layer"));
        }
        if state.shared.iter().any(|&id| id as usize >= self.out_dim)
            || !(state.center.is_empty() || state.center.len() == self.in_dim)
        {
            return Err(config_error(
                what(),
                "shared negatives or query center do not fit the layer",
            ));
        }
        match (&mut self.lsh, &state.tables) {
            (Some(lsh), Some(tables)) => {
                lsh.tables.import_state(tables)?;
                lsh.stats = lsh.tables.stats();
                lsh.shared.clone_from(&state.shared);
                lsh.center.clone_from(&state.center);
            }
            (None, None) => {}
            _ => {
                return Err(config_error(
                    what(),
                    "LSH sampling differs between state and layer",
                ));
            }
        }
        for (r, block) in self.params.chunks_exact_mut(3 * stride).enumerate() {
            let row = r * row_len..(r + 1) * row_len;
            block[..row_len].copy_from_slice(&state.weights[row.clone()]);
            block[stride..stride + row_len].copy_from_slice(&state.m[row.clone()]);
            block[2 * stride..2 * stride + row_len].copy_from_slice(&state.v[row]);
        }
        self.row_steps.copy_from_slice(&state.row_steps);
        self.bias.copy_from_slice(&state.bias);
        self.bias_m.copy_from_slice(&state.bias_m);
        self.bias_v.copy_from_slice(&state.bias_v);
        self.bias_steps.copy_from_slice(&state.bias_steps);
        Ok(())
    }
}
