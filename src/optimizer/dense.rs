//! A neuron-major layer's batch gradient as one matrix product, `deltas x inputs` (touched
//! rows by samples, times samples by inputs), where most of that grid holds a contribution:
//! a dense output layer whose deltas mostly pass `min_gradient`. The row-by-row sums of
//! [`accumulate_row`](super::grouping::accumulate_row) read a sample's input once per row
//! it touched; the product reads it once per block of rows and sums in registers.

use rayon::prelude::*;
use slide_lsh::Vector;

use crate::kernels::kernels;
use crate::layer::{LayerBatch, SparseLayer, WeightLayout};

/// The product replaces the row-by-row sums when the batch's contributions fill at least
/// this share of the touched rows by samples (it also pays for the grid's zeros). Bibtex's
/// 159 outputs fill about two thirds of it; deb-tags' 591, with `min_gradient` cutting most
/// deltas after the first steps, fill 6-20%, where the sums stay; deb-deps' sampled
/// outputs fill far less. Measured: docs/notebook/performance.md, "The output layer's
/// gradient as one product".
const DENSE_GRADIENT_SHARE: f64 = 0.25;

/// Touched rows per task of the product (and input values per task of its transposition):
/// a fixed cut, so that each row's sum, whatever the kernel, does not depend on the thread
/// count.
const BLOCK: usize = 32;

/// The touched rows' gradients computed as one product, and the product's factors, kept
/// from step to step (warm updates do not allocate).
#[derive(Debug, Default)]
pub struct DenseGradient {
    /// Every touched row's gradient (`touched` rows of the row length), or empty when the
    /// last [`compute`](Self::compute) left the sums to the rows.
    rows: Vec<f32>,
    /// The touched rows' scaled deltas by sample (zero where a sample did not touch the
    /// row), row-major.
    deltas: Vec<f32>,
    /// The samples' inputs, transposed: value `i` of sample `s` at `i * samples + s`.
    inputs: Vec<f32>,
}

impl DenseGradient {
    /// The gradient of touched row `k` (of `row_len` values), if the last
    /// [`compute`](Self::compute) computed the rows.
    pub(super) fn row(&self, k: usize, row_len: usize) -> Option<&[f32]> {
        self.rows.get(k * row_len..(k + 1) * row_len)
    }

    /// Computes the gradient of each of `rows` touched rows, the sum over samples of its
    /// scaled delta times the sample's input, as one product with the kernel set's
    /// [`scores`](crate::kernels::Kernels::scores), in parallel over blocks of rows, if
    /// `layer` is neuron-major, every input of `batch` is dense and the batch's
    /// `contributions` fill at least [`DENSE_GRADIENT_SHARE`] of the grid; otherwise
    /// leaves [`row`](Self::row) empty. `deltas(k, row)` writes touched row `k`'s scaled
    /// deltas by sample into `row` (zeros where no sample contributed). Each row's sum runs
    /// over the samples in order, as the row-by-row sums do, but in the kernel's blocks of
    /// samples, so the two agree to rounding, not bit for bit.
    pub(super) fn compute<B: LayerBatch + ?Sized>(
        &mut self,
        layer: &SparseLayer,
        batch: &B,
        (rows, contributions): (usize, usize),
        deltas: impl Fn(usize, &mut [f32]) + Sync,
    ) {
        self.rows.clear();
        let (n, row_len) = (batch.samples(), layer.row_len());
        let dense_input = |s| matches!(batch.input(s), Vector::Dense(x) if x.len() == row_len);
        if layer.layout != WeightLayout::NeuronMajor
            || rows * n * row_len == 0
            || (contributions as f64) < DENSE_GRADIENT_SHARE * (rows * n) as f64
            || !(0..n).all(dense_input)
        {
            return;
        }
        let input = |s: usize| match batch.input(s) {
            Vector::Dense(x) => x,
            Vector::Sparse { .. } => unreachable!("every input was found dense"),
        };
        // The inputs transposed, in parallel over blocks of 32 values (a block's lines,
        // 32 by the batch's samples, stay in the core's cache while its samples fill them).
        self.inputs.clear();
        self.inputs.resize(row_len * n, 0.0);
        self.inputs
            .par_chunks_mut(BLOCK * n)
            .enumerate()
            .for_each(|(block, out)| {
                let first_value = block * BLOCK;
                for s in 0..n {
                    let x = &input(s)[first_value..][..out.len() / n];
                    for (i, &v) in x.iter().enumerate() {
                        out[i * n + s] = v;
                    }
                }
            });
        self.deltas.clear();
        self.deltas.resize(rows * n, 0.0);
        self.rows.resize(rows * row_len, 0.0);
        let (scores, inputs) = (kernels().scores, &self.inputs);
        self.deltas
            .par_chunks_mut(BLOCK * n)
            .zip(self.rows.par_chunks_mut(BLOCK * row_len))
            .enumerate()
            .for_each(|(block, (grid, out))| {
                for (k, row) in grid.chunks_exact_mut(n).enumerate() {
                    deltas(block * BLOCK + k, row);
                }
                scores(grid, grid.len() / n, n, inputs, row_len, n, out);
            });
    }
}

#[cfg(test)]
mod tests {
    use rand::{RngExt, SeedableRng};

    use super::super::UpdateScratch;
    use super::super::grouping::accumulate_row;
    use super::super::grouping::tests::{layer, trace};
    use super::*;
    use crate::layer::LayerTrace;

    /// 37 samples of 40 dense inputs, and a 70-output layer's traces: every output active
    /// (`dense`) or, else, 3 outputs a sample; random deltas.
    fn parts(dense: bool) -> (SparseLayer, Vec<Vec<f32>>, Vec<LayerTrace>) {
        let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(9);
        let (n, inputs, outputs) = (37, 40, 70);
        let x = (0..n)
            .map(|_| (0..inputs).map(|_| rng.random_range(-1.0..1.0)).collect())
            .collect();
        let traces = (0..n)
            .map(|s| {
                let delta: Vec<f32> = (0..outputs).map(|_| rng.random_range(-1.0..1.0)).collect();
                if dense {
                    LayerTrace {
                        dense: true,
                        out: vec![0.0; outputs],
                        ..trace(&[], &delta, (inputs, outputs))
                    }
                } else {
                    let active = [s as u32 % 70, (s as u32 * 7 + 1) % 70, 69];
                    trace(&active, &delta[..3], (inputs, outputs))
                }
            })
            .collect();
        (layer(inputs, outputs, WeightLayout::NeuronMajor), x, traces)
    }

    /// Each sample's dense input beside its trace.
    fn dense_inputs<'a>(
        x: &'a [Vec<f32>],
        traces: &'a [LayerTrace],
    ) -> Vec<(Vector<'a>, &'a LayerTrace)> {
        x.iter()
            .zip(traces)
            .map(|(x, t)| (Vector::Dense(x), t))
            .collect()
    }

    fn grouped(l: &SparseLayer, batch: &[(Vector<'_>, &LayerTrace)]) -> UpdateScratch {
        let mut scratch = UpdateScratch::default();
        scratch.group_rows(l, batch);
        scratch.dense_gradient(l, batch, 0.25);
        scratch
    }

    /// Where every sample touches every row, the product computes each row's gradient
    /// (three blocks of rows, the last one short), and it agrees with the row's sum of
    /// contributions to rounding; the same bits on one thread and on three.
    #[test]
    fn a_full_grid_takes_the_product_and_matches_the_row_sums() {
        let (l, x, traces) = parts(true);
        let batch = dense_inputs(&x, &traces);
        let scratch = grouped(&l, &batch);
        assert_eq!(scratch.touched.len(), 70);
        let mut sums = vec![0.0; 40];
        for k in 0..70 {
            let product = scratch.dense.row(k, 40).expect("the product's row");
            accumulate_row(
                WeightLayout::NeuronMajor,
                &batch[..],
                scratch.group(k),
                0.25,
                &mut sums,
            );
            for (p, s) in product.iter().zip(&sums) {
                assert!(
                    (p - s).abs() <= 1e-5 * (1.0 + s.abs()),
                    "row {k}: {p} against {s}"
                );
            }
        }
        let on = |threads| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| grouped(&l, &batch).dense.rows)
        };
        assert_eq!(on(1), on(3));
    }

    /// A sparse grid (3 of 70 outputs a sample) or a sparse input leaves the sums to the
    /// rows.
    #[test]
    fn a_sparse_grid_or_input_keeps_the_row_sums() {
        let (l, x, traces) = parts(false);
        let batch = dense_inputs(&x, &traces);
        assert!(grouped(&l, &batch).dense.row(0, 40).is_none());
        let (l, x, traces) = parts(true);
        let (indices, values) = ([0u32, 5], [1.0f32, 2.0]);
        let mut batch = dense_inputs(&x, &traces);
        batch[0].0 = Vector::Sparse {
            indices: &indices,
            values: &values,
        };
        assert!(grouped(&l, &batch).dense.row(0, 40).is_none());
    }
}
