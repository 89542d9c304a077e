//! The output layer's rows started at their labels' centroids ([`Init::Centroids`]): a
//! warm start of the layer and of its LSH tables from the training data, before the first
//! step.

use std::ops::Range;

use rayon::prelude::*;

use crate::data::Examples;
use crate::error::Result;
use crate::layer::{Init, Mode};
use crate::network::Network;
use crate::step::Reach;
use crate::workspace::{Workspace, layer_input};

impl Network {
    /// When the output layer's `init` is [`Init::Centroids`], sets the rows of its labels
    /// `first..` from `data` (the training set) and rebuilds the tables; returns whether it
    /// did (nothing happens for any other `init`). `first` is 0 for a new network, the first
    /// new label for one grown by [`continue_from`](Self::continue_from) (the trained rows
    /// stay as they are). A label's row becomes the unit-length mean
    /// of its samples' inputs to the output layer (each sample's taken at unit length; the
    /// hidden layers run as they are, every neuron active), less that mean's part along the
    /// unit-length mean of all samples, times `norm * n / (n + shrink)` for a label of `n`
    /// samples. Rows of labels without samples in `data`, and the biases, stay as they are.
    /// It replaces whatever those rows have learned.
    pub fn warm_start(
        &mut self,
        ws: &mut Workspace,
        data: &dyn Examples,
        first: usize,
    ) -> Result<bool> {
        let last = self.layers().len() - 1;
        let Init::Centroids { norm, shrink } = self.config().layers[last].init else {
            return Ok(false);
        };
        if data.is_empty() {
            return Ok(false);
        }
        // This process's labels from `first` on, as rows of its part of the layer.
        let outputs = self.output_range();
        let rows = first.clamp(outputs.start, outputs.end) - outputs.start..outputs.len();
        let (sums, counts, mean) = self.centroid_sums(ws, data, rows.clone())?;
        let dim = self.layers()[last].in_dim();
        let layer = self.layer_mut(last);
        for (row, (sum, &n)) in rows.zip(sums.chunks_exact(dim).zip(&counts)) {
            let length = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
            if n == 0 || length == 0.0 {
                continue;
            }
            let along = sum.iter().zip(&mean).map(|(x, m)| x * m).sum::<f32>() / length;
            let scale = norm * n as f32 / (n as f32 + shrink);
            for (input, (&x, &m)) in sum.iter().zip(&mean).enumerate() {
                layer.set_weight(row, input, scale * (x / length - along * m));
            }
        }
        self.rebuild_tables()?;
        Ok(true)
    }

    /// For each of the output layer's `rows` (this process's part of it), the sum of its
    /// label's samples' unit-length inputs to the layer and their count; and the unit-length
    /// mean of every sample's (zero when all are zero).
    fn centroid_sums(
        &self,
        ws: &mut Workspace,
        data: &dyn Examples,
        rows: Range<usize>,
    ) -> Result<(Vec<f32>, Vec<u32>, Vec<f32>)> {
        let last = self.layers().len() - 1;
        let dim = self.layers()[last].in_dim();
        let labels = self.output_range().start + rows.start..self.output_range().start + rows.end;
        let mut sums = vec![0.0f32; rows.len() * dim];
        let mut counts = vec![0u32; rows.len()];
        let mut mean = vec![0.0f32; dim];
        let mut units = Vec::new();
        let order: Vec<usize> = (0..data.len()).collect();
        for block in order.chunks(crate::EVAL_BLOCK) {
            self.run_batch(ws, data, block, Mode::EvalDense, 0, Reach::Hidden)?;
            units.clear();
            units.resize(block.len() * dim, 0.0f32);
            units
                .par_chunks_exact_mut(dim)
                .zip(ws.batch())
                .zip(block)
                .for_each(|((unit, state), &sample)| {
                    layer_input(&state.traces, last, state.input.get(data, sample))
                        .for_each_nonzero(|i, v| unit[i] = v);
                    let length = unit.iter().map(|x| x * x).sum::<f32>().sqrt();
                    if length > 0.0 {
                        unit.iter_mut().for_each(|x| *x /= length);
                    }
                });
            for (unit, &sample) in units.chunks_exact(dim).zip(block) {
                if unit.iter().all(|&x| x == 0.0) {
                    continue;
                }
                mean.iter_mut().zip(unit).for_each(|(m, x)| *m += x);
                for &label in data.labels(sample) {
                    if labels.contains(&(label as usize)) {
                        let at = label as usize - labels.start;
                        counts[at] += 1;
                        let sum = &mut sums[at * dim..][..dim];
                        sum.iter_mut().zip(unit).for_each(|(s, x)| *s += x);
                    }
                }
            }
        }
        let length = mean.iter().map(|x| x * x).sum::<f32>().sqrt();
        if length > 0.0 {
            mean.iter_mut().for_each(|m| *m /= length);
        }
        Ok((sums, counts, mean))
    }
}
