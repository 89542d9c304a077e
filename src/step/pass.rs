//! One sample's pass through the layers of a network: its forward pass (selection, then the
//! active neurons of each layer), and in training the loss with the output layer's backward
//! pass, then the backward pass through the layers below it, into its [`SampleState`].

use std::ops::Range;
use std::time::Instant;

use slide_lsh::LshError;

use crate::data::Examples;
use crate::error::{Result, SlideError};
use crate::head::Heads;
use crate::layer::Activation;
use crate::layer::{Mode, SelectScratch, SparseLayer, sample_rng};
use crate::loss::output_loss;
use crate::stats::PhaseTimes;
use crate::workspace::{SampleState, layer_input};

/// How far a batch's passes go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reach {
    /// The forward pass up to the output layer (exact evaluation scores it for a block at
    /// once).
    Hidden,
    /// The whole forward pass; in training mode with a head that learns, also each sample's
    /// shortlist.
    Output,
    /// The forward pass, the loss and the backward pass (training mode only).
    Backward,
}

/// How a batch's samples are run.
#[derive(Clone)]
pub(crate) struct Pass<'a> {
    pub(crate) layers: &'a [SparseLayer],
    pub(crate) data: &'a dyn Examples,
    pub(crate) mode: Mode,
    /// How far each sample's pass goes.
    pub(crate) reach: Reach,
    /// The outputs this rank holds, as ids of the whole output layer.
    pub(crate) outputs: Range<usize>,
    /// Outputs of the whole layer (labels must be below).
    pub(crate) num_labels: usize,
    /// Whether the output layer is split between ranks.
    pub(crate) sharded: bool,
    /// The network's heads, which learn on each training sample's shortlist; none with
    /// `sharded`.
    pub(crate) heads: &'a Heads,
    /// [`NetworkConfig::input_power`](crate::NetworkConfig::input_power).
    pub(crate) input_power: f32,
}

impl Pass<'_> {
    /// Whether this is a training pass with one rank, run in two passes over the batch:
    /// each sample's forward pass stops after the output layer's selection, and
    /// [`Pass::run_output_rest`] does the rest once every sample of the batch has selected
    /// (the tables and the pool stay in cache while the samples select one after the
    /// other).
    pub(super) fn split(&self) -> bool {
        self.mode == Mode::Train && self.reach == Reach::Backward && !self.sharded
    }

    /// The forward pass of one sample; in training without [`split`](Self::split), its
    /// shortlist too (evaluation ranks the active outputs of a block's samples at once).
    pub(super) fn run_forward(
        &self,
        sample: usize,
        seed: u64,
        scratch: &mut [SelectScratch],
        state: &mut SampleState,
    ) -> Result<()> {
        self.forward(sample, seed, scratch, state)?;
        if self.mode == Mode::Train && self.reach != Reach::Hidden && !self.split() {
            self.fill_shortlist(sample, state);
        }
        Ok(())
    }

    /// Training with [`split`](Self::split) passes, once the sample's forward pass has
    /// selected the output layer's active outputs: their activations, the sample's
    /// shortlist, the loss and the backward pass, on one thread while its active rows are
    /// in cache.
    pub(super) fn run_output_rest(&self, sample: usize, state: &mut SampleState) {
        self.run_output_loss(sample, None, state);
        let started = Instant::now();
        self.output_input_gradient(state);
        state.times.backward += started.elapsed();
        self.run_hidden_backward(state);
    }

    /// Training, once `normaliser` (the largest logit and the sum of exponentials over
    /// every rank's active outputs) is known: the sample's loss on this rank's outputs and
    /// the output layer's part of the gradient on its input.
    pub(super) fn run_output_backward(
        &self,
        sample: usize,
        normaliser: (f32, f32),
        state: &mut SampleState,
    ) {
        let started = Instant::now();
        self.output_loss(sample, normaliser, state);
        self.output_input_gradient(state);
        state.times.backward += started.elapsed();
    }

    /// The output layer's part of the gradient on its input, from the gradient on its
    /// pre-activations (nothing for a network of one layer).
    fn output_input_gradient(&self, state: &mut SampleState) {
        let last = self.layers.len() - 1;
        if last > 0 {
            let (below, here) = state.traces.split_at_mut(last);
            let prev = &mut below[last - 1];
            let mut delta = std::mem::take(&mut prev.delta);
            state.macs += self.layers[last].input_gradient(&here[0], prev.as_input(), &mut delta);
            prev.delta = delta;
        }
    }

    /// Training with [`split`](Self::split) passes, once the sample's forward pass has
    /// selected the output layer's active outputs: their activations (from `logits`, the
    /// pre-activations computed for the batch at once by `SparseLayer::batch_logits`, if
    /// given), the sample's shortlist and loss, its gradient on the pre-activations left in
    /// the output layer's trace.
    pub(super) fn run_output_loss(
        &self,
        sample: usize,
        logits: Option<&[f32]>,
        state: &mut SampleState,
    ) {
        let started = Instant::now();
        let last = self.layers.len() - 1;
        let (below, here) = state.traces.split_at_mut(last);
        let (layer, x) = (
            &self.layers[last],
            layer_input(below, last, state.input.get(self.data, sample)),
        );
        state.macs += match logits {
            Some(z) => layer.forward_from_logits(z, x, &mut here[0]),
            None => layer.forward_active(x, &mut here[0]),
        };
        state.times.forward += started.elapsed();
        self.fill_shortlist(sample, state);
        let started = Instant::now();
        self.output_loss(sample, state.traces[last].softmax, state);
        state.times.backward += started.elapsed();
    }

    /// The sample's loss on this rank's outputs, once `normaliser` is known, and the
    /// gradient on their pre-activations in the output layer's trace.
    fn output_loss(&self, sample: usize, normaliser: (f32, f32), state: &mut SampleState) {
        let last = self.layers.len() - 1;
        let SampleState {
            traces,
            labels,
            loss,
            ..
        } = state;
        let output = &mut traces[last];
        let activation = self.layers[last].activation();
        if self.sharded && activation == Activation::Softmax {
            // This rank's probabilities were normalised over its own active outputs.
            let ((max, sum), (global_max, global_sum)) = (output.softmax, normaliser);
            let factor = sum * (max - global_max).exp() / global_sum;
            output.out.iter_mut().for_each(|p| *p *= factor);
        }
        let losses = (activation, self.layers[last].softmax_loss);
        *loss = output_loss(losses, output, labels, self.data.labels(sample).len());
    }

    /// With a head that learns, the outputs the heads learn on for a training sample: the
    /// best [`Heads::shortlist`] of its active outputs (by probability, which ranks as the
    /// logit does), its labels and the heads' candidates (passing over its labels), into the
    /// sample's shortlist (left empty otherwise).
    fn fill_shortlist(&self, sample: usize, state: &mut SampleState) {
        state.shortlist.clear();
        let heads = self.heads;
        if !heads.learn() {
            return;
        }
        let SampleState {
            traces,
            best,
            shortlist,
            ..
        } = state;
        let output = &traces[self.layers.len() - 1];
        best.reset(heads.shortlist());
        for (p, &value) in output.outputs().iter().enumerate() {
            best.offer(value, output.id(p));
        }
        best.drain_ranked(|_, id| shortlist.push(id));
        let labels = self.data.labels(sample);
        for &label in labels {
            if !shortlist.contains(&label) {
                shortlist.push(label);
            }
        }
        let input = state.input.get(self.data, sample);
        heads.candidates(input, labels, &mut state.rare_scratch, shortlist);
    }

    /// Training, once the gradient on the output layer's input is summed over the ranks:
    /// the backward pass through the layers below it.
    pub(super) fn run_hidden_backward(&self, state: &mut SampleState) {
        let started = Instant::now();
        let last = self.layers.len() - 1;
        for l in (1..=last).rev() {
            let (below, here) = state.traces.split_at_mut(l);
            let prev = &mut below[l - 1];
            if l < last {
                let mut delta = std::mem::take(&mut prev.delta);
                state.macs += self.layers[l].input_gradient(&here[0], prev.as_input(), &mut delta);
                prev.delta = delta;
            }
            self.layers[l - 1].activation_gradient(prev);
        }
        state.times.backward += started.elapsed();
    }

    /// Checks the sample and runs its forward pass through every layer (but the output
    /// layer with [`Reach::Hidden`]).
    fn forward(
        &self,
        sample: usize,
        seed: u64,
        scratch: &mut [SelectScratch],
        state: &mut SampleState,
    ) -> Result<()> {
        let input = self.data.input(sample);
        self.layers[0].check_input(sample, input)?;
        state.input.fill(input, self.input_power);
        let labels = self.data.labels(sample);
        let last = self.layers.len() - 1;
        let num_labels = self.num_labels;
        if let Some(&label) = labels.iter().find(|&&y| y as usize >= num_labels) {
            return Err(SlideError::LabelOutOfRange {
                sample,
                label,
                num_labels,
            });
        }
        if self.mode == Mode::Train && labels.is_empty() {
            return Err(SlideError::NoLabels { sample });
        }
        let mut rng = sample_rng(seed);
        let SampleState {
            traces,
            labels: local,
            macs,
            times,
            input,
            ..
        } = state;
        let input = input.get(self.data, sample);
        local.clear();
        let first = self.outputs.start as u32;
        local.extend(
            labels
                .iter()
                .filter(|&&y| self.outputs.contains(&(y as usize)))
                .map(|&y| y - first),
        );
        traces.resize_with(self.layers.len(), Default::default);
        *macs = 0;
        *times = PhaseTimes::default();
        let run = if self.reach == Reach::Hidden {
            last
        } else {
            last + 1
        };
        for (l, layer) in self.layers.iter().enumerate().take(run) {
            let (below, here) = traces.split_at_mut(l);
            let x = layer_input(below, l, input);
            let forced: &[u32] = if l == last { local } else { &[] };
            let started = Instant::now();
            // Exact evaluation computes every output but keeps the hidden layers' sampling,
            // which is part of how the network was trained to compute.
            let layer_mode = match self.mode {
                Mode::EvalExact if l == last => Mode::EvalDense,
                Mode::EvalExact => Mode::EvalLsh,
                other => other,
            };
            layer
                .select(
                    x,
                    forced,
                    layer_mode,
                    &mut rng,
                    &mut scratch[l],
                    &mut here[0],
                )
                .map_err(|e| diverged(e, l, sample))?;
            let selected = Instant::now();
            times.hashing += selected - started;
            if l == last && self.split() {
                break;
            }
            *macs += layer.forward_active(x, &mut here[0]);
            times.forward += selected.elapsed();
        }
        Ok(())
    }
}

/// The logit of an output of `activation` whose value is `p`, up to a constant per sample
/// (a softmax's `ln p`): what the heads add their scores to. Saturated values are clamped
/// (a sigmoid's logit to about +-16, a softmax's `ln p` to about -87).
pub(crate) fn logit_of(activation: Activation, p: f32) -> f32 {
    let p = p.max(f32::MIN_POSITIVE);
    if activation == Activation::Sigmoid {
        (p / (1.0 - p).max(1e-7)).ln()
    } else {
        p.ln()
    }
}

/// A selection error of layer `l` for `sample`: a non-finite input of a layer above the
/// first means that the network diverged.
pub(super) fn diverged(e: SlideError, l: usize, sample: usize) -> SlideError {
    match e {
        SlideError::Lsh(LshError::NonFiniteValue { .. }) if l > 0 => SlideError::Diverged {
            layer: l - 1,
            sample,
        },
        other => other,
    }
}
