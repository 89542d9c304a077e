//! Sparse Adam: a batch's gradient is grouped by stored row, and each row a sample touched
//! gets one Adam update (in parallel over rows, each row summed in sample order, so the
//! result does not depend on the thread count). Rows nobody touched are not read.

mod adam;
mod dense;
mod grouping;
mod radix;
mod schedule;

pub use adam::{Adam, AdamConfig, BiasCorrection};
pub use grouping::UpdateScratch;
use grouping::bias_gradients;
pub use schedule::{Decay, LrSchedule};

use crate::error::{Result, config_error};
use crate::kernels::{AdamStep, Ahead, ValuesMut, bf16, kernels, scalar};
use crate::layer::{LayerBatch, M, SecondMoment, SparseLayer, V, WeightLayout};
use crate::rows::DisjointRows;

/// What one update did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UpdateCounts {
    /// Stored rows updated (neurons of a neuron-major layer, inputs of an input-major one).
    pub rows: usize,
    /// Multiply-adds of the gradient accumulation and the update.
    pub multiply_adds: u64,
}

/// Gradients of the batch loss for one layer, as computed by
/// [`Network::gradients`](crate::Network::gradients).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LayerGradients {
    /// Stored rows with a nonzero gradient, increasing (neurons or inputs, by layout).
    pub rows: Vec<u32>,
    /// `rows.len()` rows of the stored row length (`in_dim` or `out_dim`).
    pub weights: Vec<f32>,
    /// Gradient of every bias (zero for neurons inactive in the whole batch).
    pub bias: Vec<f32>,
    /// The active neurons of each sample of the batch (all neurons for dense layers).
    pub active: Vec<Vec<u32>>,
}

impl LayerGradients {
    /// The gradient of the weight from `input` to `neuron` (0 if its row was not touched).
    pub fn weight(&self, layout: WeightLayout, neuron: usize, input: usize) -> f32 {
        let (row, col) = match layout {
            WeightLayout::NeuronMajor => (neuron, input),
            WeightLayout::InputMajor => (input, neuron),
        };
        let len = self.weights.len() / self.rows.len().max(1);
        match self.rows.binary_search(&(row as u32)) {
            Ok(k) => self.weights[k * len + col],
            Err(_) => 0.0,
        }
    }
}

impl SparseLayer {
    /// One sparse Adam step on the gradient `scale * sum over samples` of `batch` (each
    /// sample's input to this layer and its trace after [`backward`](Self::backward)):
    /// every stored row some sample touched gets one update, in parallel over rows, and
    /// every touched bias one. Rows are summed in sample order, so the result does not
    /// depend on the thread count. Use `scale = 1 / samples` for a batch-mean loss; a
    /// single sample is a batch of one.
    ///
    /// The LSH tables are not rebuilt: call [`rebuild_tables`](Self::rebuild_tables) on a
    /// schedule of your own.
    ///
    /// With [`BiasCorrection::Global`] (the default), call [`Adam::advance`] once per batch
    /// before the batch's updates: the bias correction counts those calls.
    ///
    /// Errors: an empty batch, an input that does not fit the layer, a trace selected by
    /// another layer or without its gradient, an Adam that has not advanced.
    pub fn update<B: LayerBatch + ?Sized>(
        &mut self,
        batch: &B,
        scale: f32,
        adam: &Adam,
        scratch: &mut UpdateScratch,
    ) -> Result<UpdateCounts> {
        let what = || format!("layer {} -> {} update", self.in_dim, self.out_dim);
        if batch.samples() == 0 {
            return Err(config_error(what(), "the batch is empty"));
        }
        if adam.shared_step().is_some() && adam.steps() == 0 {
            return Err(config_error(
                what(),
                "Adam has taken no step: call Adam::advance once per batch before the updates",
            ));
        }
        for s in 0..batch.samples() {
            let trace = batch.trace(s);
            self.check_input(s, batch.input(s))?;
            if trace.shape != (self.in_dim, self.out_dim) || trace.delta.len() != trace.len() {
                return Err(config_error(
                    what(),
                    format!("sample {s}'s trace is not this layer's after a backward pass"),
                ));
            }
        }
        Ok(self.apply_update(batch, scale, adam, scratch))
    }

    /// [`update`](Self::update) without the checks.
    pub(crate) fn apply_update<B: LayerBatch + ?Sized>(
        &mut self,
        batch: &B,
        scale: f32,
        adam: &Adam,
        scratch: &mut UpdateScratch,
    ) -> UpdateCounts {
        scratch.group_rows(self, batch);
        scratch.dense_gradient(self, batch, scale);
        let (layout, row_len, stride) = (self.layout, self.row_len(), self.stride);
        scratch.size_rows(row_len);
        let (weights, moments, per_row) = (
            self.weights,
            self.moments,
            self.second_moment == SecondMoment::Row,
        );
        // With a second moment per row, the bytes of a block before its `v` part: what the
        // update reads besides one line. Without a first moment (`beta1 = 0`) it reads the
        // weights only, up to the `m` part.
        let before_v = 2 * self.block_layout().offset(V);
        let read = if adam.config().beta1 == 0.0 {
            2 * self.block_layout().offset(M)
        } else {
            before_v
        };
        let mut rows = DisjointRows::new(
            &mut self.params,
            &mut self.row_steps,
            stride,
            weights,
            moments,
        );
        let (taken, lr_scale) = (adam.steps(), self.lr_scale);
        let shared = &*scratch;
        rows.par_for_each_init(
            &shared.touched,
            || {
                // Each worker locks only its own gradient row, once per run of rows.
                let worker =
                    rayon::current_thread_index().unwrap_or(0) % shared.gradient_rows.len();
                shared.gradient_rows[worker]
                    .0
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
            },
            |g, k, mut row| {
                let g = shared.row_gradient((layout, row_len), batch, k, scale, g);
                *row.steps += 1;
                let step = adam.step(*row.steps).scaled(lr_scale);
                // Rounding bits of this row's update (BF16 only): the row, the optimizer's
                // step and the row's own count (for callers that never advance Adam).
                let when = taken.wrapping_add(u64::from(*row.steps) << 32);
                let seed = || bf16::row_seed(shared.touched[k], when);
                if per_row {
                    let ahead = row.ahead.keep_and_line(read, before_v);
                    update_per_row(row.w.first(row_len), g, row.m, row.v, &step, seed, ahead);
                    return;
                }
                match (row.w.first(row_len), row.m, row.v) {
                    (ValuesMut::F32(w), ValuesMut::F32(m), ValuesMut::F32(v)) => {
                        // The f32 kernel takes no `Ahead`: the next block is asked for at once.
                        let mut ahead = row.ahead;
                        ahead.finish();
                        (kernels().adam)(w, g, &mut m[..row_len], &mut v[..row_len], &step)
                    }
                    (w, ValuesMut::Bf16(m), ValuesMut::Bf16(v)) => {
                        (kernels().adam_bf16)(
                            w,
                            g,
                            &mut m[..row_len],
                            &mut v[..row_len],
                            &step,
                            seed(),
                            row.ahead,
                        );
                    }
                    _ => unreachable!("BF16 weights come with BF16 moments (DisjointRows::new)"),
                }
            },
        );
        if let Some(lsh) = self.lsh.as_mut() {
            // Sampled layers are neuron-major: the touched rows are the neurons that moved.
            lsh.changed.mark(&scratch.touched);
        }
        // Counted here rather than in the parallel loop, which would contend on one counter.
        let mut macs = (scratch.touched.len() * row_len) as u64;
        // A neuron-major layer lists every active neuron of a sample, each costing the
        // sample's input nonzeros; so sum per sample, not per contribution.
        macs += match layout {
            WeightLayout::NeuronMajor => (0..batch.samples())
                .map(|s| (batch.trace(s).len() * batch.input(s).nnz()) as u64)
                .sum(),
            WeightLayout::InputMajor => (scratch.contributions.len() * row_len) as u64,
        };
        // Biases: one per neuron. Neuron-major rows are neurons; an input-major layer has all
        // its neurons active, so all its biases move.
        bias_gradients(self, batch, scale, scratch);
        let gradients = &scratch.bias_gradient;
        let mut biases = BiasRows {
            bias: &mut self.bias,
            m: &mut self.bias_m,
            v: &mut self.bias_v,
            steps: &mut self.bias_steps,
            lr_scale: self.lr_scale,
        };
        match layout {
            WeightLayout::NeuronMajor => biases.update(0, &scratch.touched, gradients, adam),
            WeightLayout::InputMajor => {
                for (neuron, &g) in gradients.iter().enumerate() {
                    biases.update_one(neuron, g, adam);
                }
            }
        }
        UpdateCounts {
            rows: scratch.touched.len(),
            multiply_adds: macs,
        }
    }

    /// The gradient [`apply_update`](Self::apply_update) would apply, without applying it.
    pub(crate) fn batch_gradients<B: LayerBatch + ?Sized>(
        &self,
        batch: &B,
        scale: f32,
        scratch: &mut UpdateScratch,
    ) -> LayerGradients {
        scratch.group_rows(self, batch);
        scratch.dense_gradient(self, batch, scale);
        let row_len = self.row_len();
        let mut weights = vec![0.0f32; scratch.touched.len() * row_len];
        let mut g = Vec::new();
        for (k, out) in weights.chunks_exact_mut(row_len).enumerate() {
            out.copy_from_slice(scratch.row_gradient(
                (self.layout, row_len),
                batch,
                k,
                scale,
                &mut g,
            ));
        }
        bias_gradients(self, batch, scale, scratch);
        let bias = match self.layout {
            WeightLayout::InputMajor => scratch.bias_gradient.clone(),
            WeightLayout::NeuronMajor => {
                let mut dense = vec![0.0f32; self.out_dim];
                for (&neuron, &g) in scratch.touched.iter().zip(&scratch.bias_gradient) {
                    dense[neuron as usize] = g;
                }
                dense
            }
        };
        LayerGradients {
            rows: scratch.touched.clone(),
            weights,
            bias,
            active: (0..batch.samples())
                .map(|s| batch.trace(s).ids().collect())
                .collect(),
        }
    }
}

/// Adam with a second moment per row ([`SecondMoment::Row`]) on one row: the row's second
/// moment, the first value of `v` (the others are not read), moves to `beta2 v + (1 - beta2)
/// mean(g^2)`, then every weight takes its first moment times one step for the row
/// ([`scalar::row_scale`]). BF16 values are stored with stochastic rounding (the second
/// moment with the bits of `seed()` mixed once more, the rest as [`bf16::adam_row`] draws
/// them); `seed` is called for BF16 moments only.
fn update_per_row(
    w: ValuesMut<'_>,
    g: &[f32],
    m: ValuesMut<'_>,
    v: ValuesMut<'_>,
    step: &AdamStep,
    seed: impl FnOnce() -> u32,
    mut ahead: Ahead,
) {
    let moved = |old: f32| step.beta2 * old + (1.0 - step.beta2) * scalar::mean_square(g);
    match (w, m, v) {
        (ValuesMut::F32(w), ValuesMut::F32(m), ValuesMut::F32(v)) => {
            ahead.finish();
            v[0] = moved(v[0]);
            let scale = scalar::row_scale(step, v[0]);
            scalar::adam_row(w, g, &mut m[..g.len()], step.beta1, scale);
        }
        (w, ValuesMut::Bf16(m), ValuesMut::Bf16(v)) => {
            let (second, seed) = (moved(bf16::to_f32(v[0])), seed());
            v[0] = bf16::from_f32_stochastic(second, bf16::mix32(seed) as u16);
            let scale = scalar::row_scale(step, second);
            (kernels().adam_row_bf16)(w, g, &mut m[..g.len()], step.beta1, scale, seed, ahead);
        }
        _ => unreachable!("BF16 weights come with BF16 moments (DisjointRows::new)"),
    }
}

/// A layer's biases with their Adam state, or a range of them (whose first neuron
/// [`BiasRows::update`] is told).
struct BiasRows<'a> {
    bias: &'a mut [f32],
    m: &'a mut [f32],
    v: &'a mut [f32],
    steps: &'a mut [u32],
    /// The layer's [`lr_scale`](crate::LayerConfig::lr_scale).
    lr_scale: f32,
}

/// Touched neurons per task of [`BiasRows::update`].
const BIAS_TASK: usize = 4096;

impl BiasRows<'_> {
    /// One Adam update of bias `neuron`'s (relative to these rows) with gradient `g`.
    fn update_one(&mut self, neuron: usize, g: f32, adam: &Adam) {
        self.steps[neuron] += 1;
        let s = adam.step(self.steps[neuron]).scaled(self.lr_scale);
        // The scalar kernel, which every set's `adam` runs on a single value (as its tail).
        scalar::adam(
            std::slice::from_mut(&mut self.bias[neuron]),
            &[g],
            std::slice::from_mut(&mut self.m[neuron]),
            std::slice::from_mut(&mut self.v[neuron]),
            &s,
        );
    }

    /// Updates the biases of `touched` (increasing neuron ids, these rows starting at
    /// neuron `first`) with `gradients`, in parallel: the neurons are increasing, so halving
    /// the list at a neuron also halves the bias arrays there, and each half goes to its own
    /// task (rayon's join) without sharing a value. Same result as one loop in order.
    fn update(mut self, first: usize, touched: &[u32], gradients: &[f32], adam: &Adam) {
        if touched.len() <= BIAS_TASK {
            for (&neuron, &g) in touched.iter().zip(gradients) {
                self.update_one(neuron as usize - first, g, adam);
            }
            return;
        }
        let half = touched.len() / 2;
        let split = touched[half] as usize;
        let (left, right) = self.split_at(split - first);
        rayon::join(
            || left.update(first, &touched[..half], &gradients[..half], adam),
            || right.update(split, &touched[half..], &gradients[half..], adam),
        );
    }

    fn split_at(self, at: usize) -> (Self, Self) {
        let (bias, bias_right) = self.bias.split_at_mut(at);
        let (m, m_right) = self.m.split_at_mut(at);
        let (v, v_right) = self.v.split_at_mut(at);
        let (steps, steps_right) = self.steps.split_at_mut(at);
        (
            BiasRows {
                bias,
                m,
                v,
                steps,
                lr_scale: self.lr_scale,
            },
            BiasRows {
                bias: bias_right,
                m: m_right,
                v: v_right,
                steps: steps_right,
                lr_scale: self.lr_scale,
            },
        )
    }
}

#[cfg(test)]
mod tests;
