//! The per-sample passes of a layer over its active neurons: selection (LSH or every
//! neuron), forward and backward. The exact scoring of every neuron that evaluation and
//! the shared negatives use is beside them, in `ranking.rs`.

use slide_lsh::{CodeBuffer, HashFamily, SampleCounts, Sampling, Vector};

use super::activation::{sigmoid, softmax_in_place};
use super::trace::SelectScratch;
use super::{Activation, LayerTrace, LshState, Mode, SampleRng, SparseLayer, WeightLayout};
use crate::error::{Result, SlideError};
use crate::kernels::{Kernels, PREFETCH_AHEAD, kernels, prefetch_values, sparse_dot_row};

impl SparseLayer {
    /// Picks one sample's active neurons for `input` into `trace`: in [`Mode::Train`] and
    /// [`Mode::EvalLsh`] an LSH layer queries its tables (with `forced` ids, e.g. the
    /// sample's labels, always in the set in training, and the layer's shared negatives);
    /// otherwise, or where its sampling takes every neuron anyway
    /// ([`every_output_active`](Self::every_output_active)), every neuron is active. `rng` draws the random ids the sampling adds;
    /// `scratch` comes from [`select_scratch`](Self::select_scratch) of this layer.
    ///
    /// Errors: an input that does not fit the layer (wrong length, an index out of range,
    /// a non-finite value), a forced id out of range, or a scratch made for another layer.
    pub fn select_active(
        &self,
        input: Vector<'_>,
        forced: &[u32],
        mode: Mode,
        rng: &mut SampleRng,
        scratch: &mut SelectScratch,
        trace: &mut LayerTrace,
    ) -> Result<()> {
        self.check_input(0, input)?;
        if let Some(&id) = forced.iter().find(|&&id| id as usize >= self.out_dim) {
            return Err(SlideError::LabelOutOfRange {
                sample: 0,
                label: id,
                num_labels: self.out_dim,
            });
        }
        if scratch.shape != (self.in_dim, self.out_dim)
            || scratch.buffers.is_some() != self.lsh.is_some()
        {
            return Err(self.misuse("the scratch was made for another layer"));
        }
        self.select(input, forced, mode, rng, scratch, trace)
    }

    /// [`select_active`](Self::select_active) without the checks: `input` fits the layer,
    /// `forced` ids are in range and `scratch` is this layer's.
    pub(crate) fn select(
        &self,
        input: Vector<'_>,
        forced: &[u32],
        mode: Mode,
        rng: &mut SampleRng,
        scratch: &mut SelectScratch,
        trace: &mut LayerTrace,
    ) -> Result<()> {
        trace.reserve(self.max_active(forced.len()));
        trace.shape = (self.in_dim, self.out_dim);
        trace.dense = true;
        trace.sources = SampleCounts::default();
        trace.shared = 0;
        trace.logit_shift = 0.0;
        trace.shift_from = 0;
        // Where the sampling takes every output anyway, the pass is dense (no query).
        let buffers = scratch
            .buffers
            .as_mut()
            .filter(|_| !self.every_output_active());
        if let (Some(lsh), Mode::Train | Mode::EvalLsh, Some(b)) = (&self.lsh, mode, buffers) {
            let codes = query_codes(lsh, &lsh.sampling, input, &mut b.codes, &mut b.centered)?;
            b.forced.clear();
            if mode == Mode::Train {
                b.forced.extend_from_slice(forced);
            }
            // The shared negatives are the outputs that score highest for the average
            // input: candidates for every sample, in training and in LSH-mode evaluation;
            // with a pool, the ones of it that score highest for this input.
            if lsh.pooled() {
                self.add_pool_negatives(lsh, input, &mut b.pool, &mut b.forced);
            } else {
                b.forced.extend_from_slice(&lsh.shared);
            }
            trace.sources = lsh.tables.sample(
                codes,
                &lsh.sampling,
                &b.forced,
                rng,
                &mut b.query,
                &mut trace.active,
            )?;
            // The exact-picks ablation: a build without the `ablations` feature has no such
            // picks and no branch for them.
            #[cfg(feature = "ablations")]
            if mode == Mode::Train && lsh.config.picks == super::config::Picks::Exact {
                self.replace_picks_with_exact(input, &mut trace.sources, &mut trace.active);
            }
            let labels = if mode == Mode::Train { forced.len() } else { 0 };
            trace.shared = trace.sources.forced.saturating_sub(labels);
            if mode == Mode::Train && lsh.config.negatives.log_q {
                (trace.shift_from, trace.logit_shift) =
                    log_q_shift(self.out_dim, &trace.sources, lsh.sampling.random_extra > 0);
            }
            trace.dense = false;
        }
        Ok(())
    }

    /// The table picks of an LSH-mode evaluation whose shared negatives come from elsewhere
    /// (a batch pool): the ids `sampling` takes from the tables for `input`, or the layer's
    /// own sampling's (`None`), without labels or shared negatives, into `trace`'s active
    /// set. A layer without tables picks nothing.
    pub(crate) fn table_picks(
        &self,
        input: Vector<'_>,
        sampling: Option<&Sampling>,
        rng: &mut SampleRng,
        scratch: &mut SelectScratch,
        trace: &mut LayerTrace,
    ) -> Result<()> {
        trace.shape = (self.in_dim, self.out_dim);
        trace.dense = false;
        trace.active.clear();
        trace.out.clear();
        let (Some(lsh), Some(b)) = (&self.lsh, scratch.buffers.as_mut()) else {
            return Ok(());
        };
        let sampling = sampling.unwrap_or(&lsh.sampling);
        let codes = query_codes(lsh, sampling, input, &mut b.codes, &mut b.centered)?;
        trace.sources =
            lsh.tables
                .sample(codes, sampling, &[], rng, &mut b.query, &mut trace.active)?;
        Ok(())
    }

    /// Forward pass of one sample over the active neurons
    /// [`select_active`](Self::select_active) chose: their activations into the trace's
    /// [`outputs`](LayerTrace::outputs). Returns the multiply-adds spent.
    ///
    /// Errors: an input that does not fit the layer, or a trace selected by another layer.
    pub fn forward(&self, input: Vector<'_>, trace: &mut LayerTrace) -> Result<u64> {
        self.check_input(0, input)?;
        self.check_trace(trace)?;
        Ok(self.forward_active(input, trace))
    }

    /// [`forward`](Self::forward) without the checks.
    pub(crate) fn forward_active(&self, input: Vector<'_>, trace: &mut LayerTrace) -> u64 {
        let k = kernels();
        let input_nnz = input.nnz();
        let sampled = !trace.dense;
        let active = if sampled {
            trace.active.len()
        } else {
            self.out_dim
        };
        trace.out.clear();
        match self.layout {
            WeightLayout::NeuronMajor if sampled => {
                let out = &mut trace.out;
                self.each_logit(k, &trace.active, input, |_, z| out.push(z));
            }
            WeightLayout::NeuronMajor => {
                for j in 0..active {
                    trace.out.push(self.neuron_logit(k, j, input));
                }
            }
            WeightLayout::InputMajor => {
                trace.out.extend_from_slice(&self.bias);
                // The rows of a sparse input's words are scattered over the matrix, as a
                // neuron-major layer's active rows are: a row a few nonzeros ahead is asked
                // for while this one is added.
                match input {
                    Vector::Sparse { indices, values } => {
                        for (p, (&i, &v)) in indices.iter().zip(values).enumerate() {
                            if let Some(&ahead) = indices.get(p + PREFETCH_AHEAD) {
                                prefetch_values(self.row(ahead as usize).first(self.out_dim));
                            }
                            if v != 0.0 {
                                let row = self.row(i as usize).first(self.out_dim);
                                k.axpy_row(v, row, &mut trace.out);
                            }
                        }
                    }
                    Vector::Dense(_) => input.for_each_nonzero(|i, v| {
                        k.axpy_row(v, self.row(i).first(self.out_dim), &mut trace.out);
                    }),
                }
            }
        }
        self.activate(trace);
        (active * input_nnz) as u64
    }

    /// The activation of the layer applied to the active pre-activations in `trace.out`
    /// (with a softmax's log-Q shift of a sampled trace, and its normaliser recorded).
    pub(crate) fn activate(&self, trace: &mut LayerTrace) {
        let sampled = !trace.dense;
        match self.activation {
            Activation::Relu => trace.out.iter_mut().for_each(|z| *z = z.max(0.0)),
            Activation::Linear => {}
            Activation::Softmax => {
                if sampled && trace.logit_shift != 0.0 {
                    let shift = trace.logit_shift;
                    trace.out[trace.shift_from..]
                        .iter_mut()
                        .for_each(|z| *z += shift);
                    // The shared negatives, right after the labels among the forced ids, get
                    // `shared_shift` of the shift (see `Negatives::shared_shift`).
                    let fraction = self
                        .lsh
                        .as_ref()
                        .map_or(0.0, |l| l.config.negatives.shared_shift);
                    let (shared, forced) = (fraction * shift, trace.sources.forced);
                    if shared != 0.0 {
                        trace.out[forced - trace.shared..forced]
                            .iter_mut()
                            .for_each(|z| *z += shared);
                    }
                }
                trace.softmax = softmax_in_place(&mut trace.out);
            }
            Activation::Sigmoid => trace.out.iter_mut().for_each(|z| *z = sigmoid(*z)),
        }
    }

    /// Backward pass of one sample: reads the gradient of the loss on the active outputs
    /// (written into [`LayerTrace::gradient_mut`]), replaces it with the gradient on their
    /// pre-activations (through the activation: ReLU's mask, or the softmax's Jacobian over
    /// the active set), and writes into `input_gradient` the gradient on the input's entries:
    /// `in_dim` values for a dense input, one per nonzero (in order) for a sparse one.
    /// Returns the multiply-adds spent.
    ///
    /// Errors: an input that does not fit the layer, a trace selected by another layer, or
    /// a gradient buffer not as long as the active set.
    pub fn backward(
        &self,
        input: Vector<'_>,
        trace: &mut LayerTrace,
        input_gradient: &mut Vec<f32>,
    ) -> Result<u64> {
        self.check_input(0, input)?;
        self.check_trace(trace)?;
        if trace.delta.len() != trace.out.len() {
            return Err(self.misuse("the gradient must have one value per active neuron"));
        }
        self.activation_gradient(trace);
        Ok(self.input_gradient(trace, input, input_gradient))
    }

    /// Turns the gradient on the active outputs in `trace` into the gradient on their
    /// pre-activations.
    pub(crate) fn activation_gradient(&self, trace: &mut LayerTrace) {
        match self.activation {
            Activation::Relu => {
                for (g, &a) in trace.delta.iter_mut().zip(&trace.out) {
                    if a <= 0.0 {
                        *g = 0.0;
                    }
                }
            }
            Activation::Linear => {}
            Activation::Softmax => {
                // d_j = p_j (g_j - sum_k p_k g_k)
                let mean: f32 = trace.delta.iter().zip(&trace.out).map(|(g, p)| g * p).sum();
                for (g, &p) in trace.delta.iter_mut().zip(&trace.out) {
                    *g = p * (*g - mean);
                }
            }
            Activation::Sigmoid => {
                // d_j = g_j p_j (1 - p_j)
                for (g, &p) in trace.delta.iter_mut().zip(&trace.out) {
                    *g *= p * (1.0 - p);
                }
            }
        }
    }

    /// Checks that `input` fits the layer (length or index range, finite values); errors
    /// name it as sample `sample`.
    pub(crate) fn check_input(&self, sample: usize, input: Vector<'_>) -> Result<()> {
        input
            .validate(self.in_dim)
            .map_err(|e| crate::error::input_error(sample, e))
    }

    fn check_trace(&self, trace: &LayerTrace) -> Result<()> {
        if trace.shape != (self.in_dim, self.out_dim) {
            return Err(self.misuse("the trace was not selected by this layer"));
        }
        Ok(())
    }

    fn misuse(&self, reason: &str) -> SlideError {
        crate::error::config_error(format!("layer {} -> {}", self.in_dim, self.out_dim), reason)
    }

    /// The pre-activations of the neurons `ids` (neuron-major layers) for `input`, handed to
    /// `each` in order. The rows are scattered over the matrix: a row a few positions ahead
    /// is asked for while this one is scored.
    #[inline]
    pub(crate) fn each_logit(
        &self,
        k: &Kernels,
        ids: &[u32],
        input: Vector<'_>,
        mut each: impl FnMut(u32, f32),
    ) {
        for (position, &j) in ids.iter().enumerate() {
            if let Some(&ahead) = ids.get(position + PREFETCH_AHEAD) {
                prefetch_values(self.row(ahead as usize).first(self.in_dim));
            }
            each(j, self.neuron_logit(k, j as usize, input));
        }
    }

    /// Neuron `j`'s pre-activation for `input`: its bias plus its row's dot product with
    /// the input. Neuron-major layers only (LSH layers always are); `k` is the kernel table,
    /// passed in so hot loops look it up once.
    #[inline]
    pub(crate) fn neuron_logit(&self, k: &Kernels, j: usize, input: Vector<'_>) -> f32 {
        debug_assert_eq!(self.layout, WeightLayout::NeuronMajor);
        let row = self.row(j).first(self.in_dim);
        self.bias[j]
            + match input {
                Vector::Dense(x) => k.dot_row(row, x),
                Vector::Sparse { indices, values } => sparse_dot_row(row, indices, values),
            }
    }

    /// The gradient on the input's entries from the gradient on the active pre-activations
    /// in `trace`: `out[p] = sum_j delta_j w[j][i_p]` over the active neurons `j`, for every
    /// entry `p` of `input` (each index of a dense input, each nonzero of a sparse one),
    /// less the neurons whose delta is below [`min_gradient`](crate::Negatives::min_gradient).
    /// Returns the multiply-adds spent.
    pub(crate) fn input_gradient(
        &self,
        trace: &LayerTrace,
        input: Vector<'_>,
        out: &mut Vec<f32>,
    ) -> u64 {
        let k = kernels();
        let n_in = input.nnz();
        out.clear();
        out.resize(n_in, 0.0);
        let min_gradient = self.min_gradient();
        let macs = match self.layout {
            WeightLayout::NeuronMajor => {
                for (position, &d) in trace.delta.iter().enumerate() {
                    // The forward pass read these rows, but a sample's active rows need not
                    // stay in cache until its backward pass: ask for one a few ahead (also
                    // past a row left out, so that the rows after it are still asked for).
                    if position + PREFETCH_AHEAD < trace.delta.len() {
                        let ahead = trace.id(position + PREFETCH_AHEAD) as usize;
                        prefetch_values(self.row(ahead).first(self.in_dim));
                    }
                    if d.abs() < min_gradient {
                        continue;
                    }
                    let row = self.row(trace.id(position) as usize);
                    match input {
                        Vector::Dense(_) => k.axpy_row(d, row.first(self.in_dim), out),
                        Vector::Sparse { indices, .. } => {
                            for (g, &i) in out.iter_mut().zip(indices) {
                                *g += d * row.get(i as usize);
                            }
                        }
                    }
                }
                trace.delta.len() * n_in
            }
            WeightLayout::InputMajor => {
                for (p, g) in out.iter_mut().enumerate() {
                    let i = match input {
                        Vector::Dense(_) => p,
                        Vector::Sparse { indices, .. } => indices[p] as usize,
                    };
                    *g = k.dot_row(self.row(i).first(self.out_dim), &trace.delta);
                }
                self.out_dim * n_in
            }
        };
        macs as u64
    }
}

/// The log-Q shift of a training pass (see [`Negatives::log_q`](crate::Negatives::log_q)): the
/// first active position it applies to and the amount. For `n` outputs, `f` forced ids, `t` picked
/// by the tables and `r` uniformly random ones: with `complement` (the sampling drew random ids on
/// purpose), the forced ids and the tables' picks are scored as themselves and each random id
/// stands for `(n - f - t) / r` of the outputs left out, so the shift is `ln((n - f - t) / r)` from
/// position `f + t`; otherwise every drawn id is taken for a uniform draw, `ln((n - f) / (t + r))`
/// from position `f`. No shift when no id was forced or none was drawn.
fn log_q_shift(out_dim: usize, sources: &SampleCounts, complement: bool) -> (usize, f32) {
    let (fixed, drawn) = if complement {
        (sources.forced + sources.from_tables, sources.random_fill)
    } else {
        (sources.forced, sources.from_tables + sources.random_fill)
    };
    if sources.forced == 0 || drawn == 0 {
        return (fixed, 0.0);
    }
    (fixed, ((out_dim - fixed) as f64 / drawn as f64).ln() as f32)
}

/// The hash codes of `input` for `lsh`'s tables (centred first if the layer centres its
/// queries), in `codes`; none when `sampling` takes nothing from the tables (uniform
/// sampling hashes nothing).
fn query_codes<'c>(
    lsh: &LshState,
    sampling: &Sampling,
    input: Vector<'_>,
    codes: &'c mut CodeBuffer,
    centered: &mut Vec<f32>,
) -> Result<&'c [u32]> {
    Ok(if !sampling.uses_tables() {
        &[]
    } else if lsh.center.is_empty() {
        lsh.family.hash(input, codes)?
    } else {
        centered.clear();
        centered.extend(lsh.center.iter().map(|c| -c));
        input.for_each_nonzero(|i, v| centered[i] += v);
        lsh.family.hash(Vector::Dense(centered), codes)?
    })
}
