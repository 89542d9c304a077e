//! A batch's gradient grouped by stored row: each sample's contributions to a layer are
//! listed, sorted by (row, sample), and summed row by row in sample order.

use std::sync::Mutex;

use rayon::prelude::*;
use slide_lsh::Vector;

use crate::kernels::kernels;
use crate::layer::{LayerBatch, SparseLayer, WeightLayout};

use super::dense::DenseGradient;
use super::radix::sort_by_row;

/// One sample's share of one stored row's gradient: `(row, sample)` orders the sum, and
/// `value` is the sample's scalar (its delta for a neuron-major row, its input value for an
/// input-major row), copied while the sample's trace is read in order, so that the update
/// does not go back to the batch's traces (about 660 KB of deltas at the Amazon-670K shape)
/// for one value at a time.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Contribution {
    row: u32,
    pub(super) sample: u32,
    pub(super) value: f32,
}

/// One thread's gradient row, its lock on cache lines of its own: with the rows and locks
/// of two threads side by side, every write to one invalidated the other's line, which cost
/// about 8% of a training step at the Amazon-670K shape.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(super) struct GradientRow(pub(super) Mutex<Vec<f32>>);

/// The buffers of an update, reused from step to step (warm updates do not allocate): the
/// batch's contributions grouped by row, and one gradient row per thread.
#[derive(Debug, Default)]
pub struct UpdateScratch {
    pub(super) contributions: Vec<Contribution>,
    /// The radix sort's second buffer.
    spare: Vec<Contribution>,
    /// The rows touched, increasing, and where each one's contributions start.
    pub(super) touched: Vec<u32>,
    group_starts: Vec<u32>,
    pub(super) bias_gradient: Vec<f32>,
    pub(super) gradient_rows: Vec<GradientRow>,
    /// The touched rows' gradients when computed as one matrix product.
    pub(super) dense: DenseGradient,
}

impl UpdateScratch {
    /// The contributions of touched row `k` (in `touched` order), in sample order.
    pub(super) fn group(&self, k: usize) -> &[Contribution] {
        &self.contributions[self.group_starts[k] as usize..self.group_starts[k + 1] as usize]
    }

    /// Lists `layer`'s contributions from `batch`, sorted by (row, sample), and the row
    /// groups; a neuron-major layer's outputs whose delta is below its
    /// [`min_gradient`](crate::Negatives::min_gradient) contribute nothing.
    pub(super) fn group_rows<B: LayerBatch + ?Sized>(&mut self, layer: &SparseLayer, batch: &B) {
        let (layout, min_gradient) = (layer.layout, layer.min_gradient());
        // Reserve for the most contributions the batch could produce, so that steps whose
        // active sets grow do not reallocate: every neuron a sample could activate (with its
        // forced labels) for a neuron-major layer, the samples' nonzero inputs otherwise.
        let most: usize = (0..batch.samples())
            .map(|s| match layout {
                WeightLayout::NeuronMajor => {
                    let t = batch.trace(s);
                    layer.max_active(t.sources.forced.saturating_sub(t.shared))
                }
                WeightLayout::InputMajor => batch.input(s).nnz(),
            })
            .sum();
        for v in [&mut self.touched, &mut self.group_starts] {
            if v.capacity() < most + 1 {
                v.reserve(most + 1 - v.len());
            }
        }
        let contributions = &mut self.contributions;
        contributions.clear();
        if contributions.capacity() < most {
            contributions.reserve(most);
        }
        // The sort swaps the two buffers: both need the room.
        self.spare.clear();
        if self.spare.capacity() < most {
            self.spare.reserve(most);
        }
        for s in 0..batch.samples() {
            let sample = s as u32;
            match layout {
                WeightLayout::NeuronMajor => {
                    let trace = batch.trace(s);
                    // An output whose gradient is below `min_gradient` (0: none) trains not.
                    contributions.extend(
                        (0..trace.len())
                            .filter(|&p| trace.delta[p].abs() >= min_gradient)
                            .map(|p| Contribution {
                                row: trace.id(p),
                                sample,
                                value: trace.delta[p],
                            }),
                    );
                }
                WeightLayout::InputMajor => match batch.input(s) {
                    Vector::Dense(x) => {
                        contributions.extend(x.iter().enumerate().filter(|(_, v)| **v != 0.0).map(
                            |(i, &value)| Contribution {
                                row: i as u32,
                                sample,
                                value,
                            },
                        ));
                    }
                    Vector::Sparse { indices, values } => {
                        contributions.extend(
                            indices.iter().zip(values).filter(|(_, v)| **v != 0.0).map(
                                |(&i, &value)| Contribution {
                                    row: i,
                                    sample,
                                    value,
                                },
                            ),
                        );
                    }
                },
            }
        }
        // Listed in sample order, so a stable sort by row orders them by (row, sample).
        sort_by_row(contributions, &mut self.spare, |c| c.row);
        self.touched.clear();
        self.group_starts.clear();
        for (k, c) in contributions.iter().enumerate() {
            if self.touched.last() != Some(&c.row) {
                self.touched.push(c.row);
                self.group_starts.push(k as u32);
            }
        }
        self.group_starts.push(contributions.len() as u32);
    }

    /// The gradient of touched row `k` (`row_len` values): the product's row if
    /// [`dense_gradient`](Self::dense_gradient) computed one, else the sum of the row's
    /// contributions ([`accumulate_row`]) in `g`.
    pub(super) fn row_gradient<'g, B: LayerBatch + ?Sized>(
        &'g self,
        (layout, row_len): (WeightLayout, usize),
        batch: &B,
        k: usize,
        scale: f32,
        g: &'g mut Vec<f32>,
    ) -> &'g [f32] {
        if let Some(row) = self.dense.row(k, row_len) {
            return row;
        }
        g.resize(row_len, 0.0);
        accumulate_row(layout, batch, self.group(k), scale, g);
        g
    }

    /// After [`group_rows`](Self::group_rows), the touched rows' gradients as one matrix
    /// product where [`DenseGradient::compute`] finds it pays.
    pub(super) fn dense_gradient<B: LayerBatch + ?Sized>(
        &mut self,
        layer: &SparseLayer,
        batch: &B,
        scale: f32,
    ) {
        let (rows, contributions) = (self.touched.len(), self.contributions.len());
        let (listed, starts) = (&self.contributions, &self.group_starts);
        let deltas = |k: usize, row: &mut [f32]| {
            for c in &listed[starts[k] as usize..starts[k + 1] as usize] {
                row[c.sample as usize] = scale * c.value;
            }
        };
        self.dense
            .compute(layer, batch, (rows, contributions), deltas);
    }

    /// One gradient row per thread, with room for `row_len` floats.
    pub(super) fn size_rows(&mut self, row_len: usize) {
        let threads = rayon::current_num_threads();
        while self.gradient_rows.len() < threads {
            // 32 floats (128 bytes) of slack: the rows of two threads, allocated one after
            // the other, never share a cache line.
            self.gradient_rows
                .push(GradientRow(Mutex::new(Vec::with_capacity(row_len + 32))));
        }
        for row in &mut self.gradient_rows {
            let row = row.0.get_mut().unwrap_or_else(|e| e.into_inner());
            if row.capacity() < row_len + 32 {
                *row = Vec::with_capacity(row_len + 32);
            }
        }
    }
}

/// The gradient of one stored row: the sum, in sample order, of `scale * c_s * vec_s` over
/// the row's contributions, where `(c_s, vec_s)` is (the sample's delta for the neuron, the
/// layer's input) for a neuron-major row and (the sample's input value, the layer's delta
/// vector) for an input-major row.
pub(super) fn accumulate_row<B: LayerBatch + ?Sized>(
    layout: WeightLayout,
    batch: &B,
    group: &[Contribution],
    scale: f32,
    g: &mut [f32],
) {
    let k = kernels();
    // The vector a contribution adds times its value: the sample's input (neuron-major) or
    // its gradient on the layer's output (input-major), if dense.
    let dense = |c: &Contribution| match layout {
        WeightLayout::NeuronMajor => match batch.input(c.sample as usize) {
            Vector::Dense(x) => Some(x),
            Vector::Sparse { .. } => None,
        },
        WeightLayout::InputMajor => Some(&batch.trace(c.sample as usize).delta[..]),
    };
    // A first dense contribution over the whole row is stored rather than added to zeros
    // (the same values: `0 + a x` rounds as `a x`), which saves the row a pass.
    let mut rest = group;
    let first = group
        .split_first()
        .and_then(|(c, after)| Some((c, dense(c).filter(|x| x.len() >= g.len())?, after)));
    match first {
        Some((c, x, after)) => {
            let a = scale * c.value;
            for (gi, &xi) in g.iter_mut().zip(x) {
                *gi = a * xi;
            }
            rest = after;
        }
        None => g.fill(0.0),
    }
    for c in rest {
        let input = batch.input(c.sample as usize);
        match layout {
            WeightLayout::NeuronMajor => {
                let d = scale * c.value;
                match input {
                    Vector::Dense(x) => (k.axpy)(d, x, g),
                    Vector::Sparse { indices, values } => {
                        for (&i, &v) in indices.iter().zip(values) {
                            g[i as usize] += d * v;
                        }
                    }
                }
            }
            WeightLayout::InputMajor => {
                let delta = &batch.trace(c.sample as usize).delta;
                (k.axpy)(scale * c.value, delta, g);
            }
        }
    }
}

/// Bias gradients into `scratch.bias_gradient`, each summed in sample order: one per row
/// group (touched neuron) for a neuron-major layer, one per neuron for an input-major layer,
/// all of whose neurons are active.
pub(super) fn bias_gradients<B: LayerBatch + ?Sized>(
    layer: &SparseLayer,
    batch: &B,
    scale: f32,
    scratch: &mut UpdateScratch,
) {
    let mut out = std::mem::take(&mut scratch.bias_gradient);
    out.clear();
    match layer.layout {
        WeightLayout::NeuronMajor => {
            // In parallel over neurons, each sum still in sample order.
            let scratch = &*scratch;
            out.par_extend((0..scratch.touched.len()).into_par_iter().map(|k| {
                scratch
                    .group(k)
                    .iter()
                    .map(|c| scale * c.value)
                    .fold(0.0, |sum, x| sum + x)
            }));
        }
        WeightLayout::InputMajor => {
            out.resize(layer.out_dim, 0.0);
            for s in 0..batch.samples() {
                (kernels().axpy)(scale, &batch.trace(s).delta, &mut out);
            }
        }
    }
    scratch.bias_gradient = out;
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::layer::{Activation, LayerConfig, LayerTrace};

    /// A linear layer without LSH.
    pub(in crate::optimizer) fn layer(
        in_dim: usize,
        out_dim: usize,
        layout: WeightLayout,
    ) -> SparseLayer {
        let config = LayerConfig {
            layout,
            ..LayerConfig::new(out_dim, Activation::Linear)
        };
        SparseLayer::new(in_dim, &config, 5).unwrap()
    }

    /// A sparse trace over `active` with gradient `delta`, selected by a layer of `shape`.
    pub(in crate::optimizer) fn trace(
        active: &[u32],
        delta: &[f32],
        shape: (usize, usize),
    ) -> LayerTrace {
        LayerTrace {
            dense: false,
            active: active.to_vec(),
            out: vec![0.0; active.len()],
            delta: delta.to_vec(),
            shape,
            ..LayerTrace::default()
        }
    }

    /// Neuron-major rows are the active neurons: grouped by row, samples in order within a
    /// row, whatever order the samples listed them in.
    #[test]
    fn neuron_major_contributions_group_by_neuron_then_sample() {
        let l = layer(3, 6, WeightLayout::NeuronMajor);
        let x = [1.0, 0.0, 2.0];
        let (a, b) = (
            trace(&[4, 1], &[0.5, -1.0], (3, 6)),
            trace(&[1, 5, 4], &[2.0, 3.0, 4.0], (3, 6)),
        );
        let batch = [(Vector::Dense(&x), &a), (Vector::Dense(&x), &b)];
        let mut scratch = UpdateScratch::default();
        scratch.group_rows(&l, &batch[..]);
        assert_eq!(scratch.touched, [1, 4, 5]);
        let groups: Vec<Vec<(u32, f32)>> = (0..3)
            .map(|k| {
                scratch
                    .group(k)
                    .iter()
                    .map(|c| (c.sample, c.value))
                    .collect()
            })
            .collect();
        assert_eq!(
            groups,
            [
                vec![(0, -1.0), (1, 2.0)],
                vec![(0, 0.5), (1, 4.0)],
                vec![(1, 3.0)]
            ]
        );
        // Row 4's gradient: 0.5 * x + 4.0 * x, summed in sample order.
        let mut g = vec![0.0; 3];
        accumulate_row(
            WeightLayout::NeuronMajor,
            &batch[..],
            scratch.group(1),
            1.0,
            &mut g,
        );
        assert_eq!(g, [4.5, 0.0, 9.0]);
        bias_gradients(&l, &batch[..], 0.5, &mut scratch);
        assert_eq!(scratch.bias_gradient, [0.5, 2.25, 1.5]);
    }

    /// Input-major rows are the nonzero inputs: a zero value contributes nothing.
    #[test]
    fn input_major_contributions_group_by_nonzero_input() {
        let l = layer(5, 2, WeightLayout::InputMajor);
        let dense = trace(&[], &[1.0, -2.0], (5, 2));
        let dense = LayerTrace {
            dense: true,
            out: vec![0.0; 2],
            ..dense
        };
        let (i0, v0) = ([3u32, 0], [2.0f32, 0.0]);
        let (i1, v1) = ([1u32, 3], [1.0f32, 0.5]);
        let batch = [
            (
                Vector::Sparse {
                    indices: &i0,
                    values: &v0,
                },
                &dense,
            ),
            (
                Vector::Sparse {
                    indices: &i1,
                    values: &v1,
                },
                &dense,
            ),
        ];
        let mut scratch = UpdateScratch::default();
        scratch.group_rows(&l, &batch[..]);
        assert_eq!(scratch.touched, [1, 3]);
        let mut g = vec![0.0; 2];
        accumulate_row(
            WeightLayout::InputMajor,
            &batch[..],
            scratch.group(1),
            1.0,
            &mut g,
        );
        // Input 3: 2.0 * delta + 0.5 * delta.
        assert_eq!(g, [2.5, -5.0]);
    }
}
