//! A training batch's pre-activations of a layer that computes every output for every
//! sample (no tables, or a `min_active` that covers `dense_share` of its outputs): one
//! matrix product for the batch, each weight row read once for all samples, where the
//! per-sample pass reads every row once a sample for a dot product.

use rayon::prelude::*;
use slide_lsh::Vector;

use super::{LayerTrace, SparseLayer, WeightLayout};
use crate::kernels::kernels;

/// The most weights (outputs times inputs) a batched layer has: its rows are widened to
/// f32 once a step (BF16 weights), a small cost beside a batch's products only where the
/// layer is small (deb-tags' 591 x 512 output layer: 0.3 M).
const MAX_WEIGHTS: usize = 1 << 22;

/// The most values (samples times outputs) of a batch's pre-activations: beyond, the batch
/// runs a sample at a time rather than hold two such matrices (32 MiB each at the bound).
const MAX_OUTPUTS: usize = 1 << 23;

/// Samples per product: a fixed split, so that every value is the same whatever the number
/// of threads; large enough that the weights, packed anew by each product, cost little.
const SAMPLES: usize = 128;

/// The buffers of [`SparseLayer::batch_logits`], kept across steps: the batch's inputs as
/// a dense matrix, the widened weights, and the pre-activations.
#[derive(Debug, Default)]
pub(crate) struct BatchLogits {
    x: Vec<f32>,
    w: Vec<f32>,
    z: Vec<f32>,
    /// The weights transposed (and the ids of their rows, `0..rows`), the gradients on the
    /// pre-activations, and on the inputs.
    wt: Vec<f32>,
    ids: Vec<u32>,
    d: Vec<f32>,
    g: Vec<f32>,
    rows: usize,
    dim: usize,
}

impl BatchLogits {
    /// Each sample's pre-activations, in the batch's order.
    pub(crate) fn rows(&self) -> rayon::slice::ChunksExact<'_, f32> {
        self.z.par_chunks_exact(self.rows.max(1))
    }

    /// Each sample's gradient on the layer's input ([`SparseLayer::batch_input_gradients`]).
    pub(crate) fn input_gradients(&self) -> rayon::slice::ChunksExact<'_, f32> {
        self.g.par_chunks_exact(self.dim.max(1))
    }
}

impl SparseLayer {
    /// Whether a training batch of `samples` computes this layer's pre-activations in one
    /// product ([`Self::batch_logits`]): a neuron-major layer whose every output is active
    /// for every sample, of at most [`MAX_WEIGHTS`] weights and [`MAX_OUTPUTS`] values a
    /// batch (which depends on the batch, never on the threads).
    pub(crate) fn batches_logits(&self, samples: usize) -> bool {
        self.layout == WeightLayout::NeuronMajor
            && self.out_dim * self.in_dim <= MAX_WEIGHTS
            && samples * self.out_dim <= MAX_OUTPUTS
            && (self.lsh.is_none() || self.every_output_active())
    }

    /// The pre-activations (bias included) of every output for the `n` inputs
    /// `input(0..n)`, into `buffers` ([`BatchLogits::rows`]): the inputs as a dense matrix
    /// times the weight rows, in products of [`SAMPLES`] samples, in parallel.
    pub(crate) fn batch_logits<'a>(
        &self,
        n: usize,
        input: impl Fn(usize) -> Vector<'a> + Sync,
        buffers: &mut BatchLogits,
    ) {
        let (dim, rows) = (self.in_dim, self.out_dim);
        let BatchLogits {
            x,
            w,
            z,
            rows: len,
            dim: width,
            ..
        } = buffers;
        (*len, *width) = (rows, dim);
        x.clear();
        x.resize(n * dim, 0.0);
        x.par_chunks_mut(dim.max(1))
            .enumerate()
            .for_each(|(i, row)| input(i).for_each_nonzero(|k, v| row[k] = v));
        let (weights, stride) = match self.f32_rows() {
            Some(rows) => rows,
            None => {
                w.resize(rows * dim, 0.0);
                const WIDEN: usize = 64;
                w.par_chunks_mut((WIDEN * dim).max(1))
                    .enumerate()
                    .for_each(|(c, out)| self.widen_rows(c * WIDEN.., out));
                (&w[..], dim)
            }
        };
        z.resize(n * rows, 0.0);
        let scores = kernels().scores;
        x.par_chunks((SAMPLES * dim).max(1))
            .zip(z.par_chunks_mut((SAMPLES * rows).max(1)))
            .for_each(|(x, z)| {
                scores(x, x.len() / dim.max(1), dim, weights, rows, stride, z);
                for z in z.chunks_exact_mut(rows.max(1)) {
                    z.iter_mut().zip(&self.bias).for_each(|(z, b)| *z += b);
                }
            });
    }

    /// The gradient on the inputs of the batch whose pre-activations
    /// [`Self::batch_logits`] computed into `buffers`, from `delta(i)`, sample `i`'s gradient
    /// on them (one value an output): the gradients as a matrix, those below
    /// [`min_gradient`](crate::Negatives::min_gradient) left out as in
    /// [`Self::input_gradient`], times the weights, in products of [`SAMPLES`] samples
    /// ([`BatchLogits::input_gradients`]). The weights must not have changed since.
    pub(crate) fn batch_input_gradients<'a>(
        &self,
        delta: impl Fn(usize) -> &'a [f32] + Sync,
        buffers: &mut BatchLogits,
    ) {
        let (dim, rows) = (self.in_dim, self.out_dim);
        let n = buffers.z.len() / rows.max(1);
        let BatchLogits {
            w, wt, ids, d, g, ..
        } = buffers;
        let (weights, stride) = self.f32_rows().unwrap_or((&w[..], dim));
        // The weights transposed: one row an input, one value an output.
        if ids.len() != rows {
            ids.clear();
            ids.extend(0..rows as u32);
        }
        wt.resize(dim * rows, 0.0);
        let row = |j: u32| &weights[j as usize * stride..][..dim];
        super::lsh::transpose_rows(ids, row, dim, wt);
        let min_gradient = self.min_gradient();
        d.resize(n * rows, 0.0);
        d.par_chunks_mut(rows.max(1))
            .enumerate()
            .for_each(|(i, row)| {
                for (out, &v) in row.iter_mut().zip(delta(i)) {
                    *out = if v.abs() < min_gradient { 0.0 } else { v };
                }
            });
        g.resize(n * dim, 0.0);
        let scores = kernels().scores;
        d.par_chunks((SAMPLES * rows).max(1))
            .zip(g.par_chunks_mut((SAMPLES * dim).max(1)))
            .for_each(|(d, g)| scores(d, d.len() / rows.max(1), rows, wt, dim, rows, g));
    }

    /// A dense trace's forward pass from its pre-activations `logits` (a row of
    /// [`BatchLogits`]): the activation applied, as [`Self::forward_active`] does; returns
    /// the multiply-adds the product spent on this sample.
    pub(crate) fn forward_from_logits(
        &self,
        logits: &[f32],
        input: Vector<'_>,
        trace: &mut LayerTrace,
    ) -> u64 {
        debug_assert!(trace.dense && logits.len() == self.out_dim);
        trace.out.clear();
        trace.out.extend_from_slice(logits);
        self.activate(trace);
        (self.out_dim * input.nnz()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::{Activation, LayerConfig, WeightLayout};

    /// A dense neuron-major layer batches up to the bounds on its weights and on a batch's
    /// pre-activations; an input-major one never does.
    #[test]
    fn batches_within_the_bounds_only() {
        let layer = |in_dim: usize, out_dim: usize, layout: WeightLayout| {
            let config = LayerConfig {
                layout,
                ..LayerConfig::new(out_dim, Activation::Softmax)
            };
            SparseLayer::new(in_dim, &config, 1).unwrap()
        };
        let small = layer(64, 1024, WeightLayout::NeuronMajor);
        assert!(small.batches_logits(512));
        assert!(small.batches_logits(MAX_OUTPUTS / 1024));
        assert!(!small.batches_logits(MAX_OUTPUTS / 1024 + 1));
        assert!(!layer(64, 1024, WeightLayout::InputMajor).batches_logits(512));
        assert!(!layer(MAX_WEIGHTS / 1024 + 1, 1024, WeightLayout::NeuronMajor).batches_logits(1));
    }
}
