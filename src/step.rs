//! The per-sample pipeline of a [`Network`]: each sample of a batch runs its forward pass
//! (selection, then the active neurons of each layer), the loss and its backward pass on
//! one of rayon's threads, drawing its random numbers from a stream of its own; then a
//! training step updates every layer with sparse Adam and rebuilds tables on schedule.

use std::ops::Range;
use std::time::Instant;

use rayon::prelude::*;
use slide_lsh::{LshError, Sampling, mix64};

use crate::data::Examples;
use crate::error::{Result, SlideError};
use crate::kernels::kernels;
use crate::layer::Activation;
use crate::layer::{Mode, SelectScratch, SparseLayer, sample_rng};
use crate::loss::output_loss;
use crate::network::Network;
use crate::optimizer::LayerGradients;
use crate::stats::{ActiveSources, PhaseTimes, StepStats};
use crate::top5::Top5;
use crate::workspace::{NetworkBatch, SampleState, Workspace, layer_input, worker_scratch};

/// How a batch's samples are run.
#[derive(Clone)]
pub(crate) struct Pass<'a> {
    pub(crate) layers: &'a [SparseLayer],
    pub(crate) data: &'a dyn Examples,
    pub(crate) mode: Mode,
    /// Stop before the output layer (exact evaluation scores it for a block at once).
    pub(crate) hidden_only: bool,
    /// The outputs this rank holds, as ids of the whole output layer.
    pub(crate) outputs: Range<usize>,
    /// Outputs of the whole layer (labels must be below).
    pub(crate) num_labels: usize,
    /// Whether the output layer is split between ranks.
    pub(crate) sharded: bool,
}

impl Pass<'_> {
    /// The forward pass of one sample; evaluation then ranks its active outputs (as ids of
    /// this rank's slice; by probability, or with several ranks by logit, which compares
    /// across them).
    fn run_forward(
        &self,
        sample: usize,
        seed: u64,
        scratch: &mut [SelectScratch],
        state: &mut SampleState,
    ) -> Result<()> {
        self.forward(sample, seed, scratch, state)?;
        if self.hidden_only || self.mode == Mode::Train {
            return Ok(());
        }
        let output = &state.traces[self.layers.len() - 1];
        let (max, sum) = output.softmax;
        // Sigmoid outputs compare across ranks as they are; a rank's softmax, by logit.
        let by_logit =
            self.sharded && self.layers[self.layers.len() - 1].activation() == Activation::Softmax;
        let mut top = Top5::EMPTY;
        for (p, &z) in output.outputs().iter().enumerate() {
            let score = if by_logit { max + (z * sum).ln() } else { z };
            top.offer(score, output.id(p));
        }
        state.top = top;
        Ok(())
    }

    /// Training, once `normaliser` (the largest logit and the sum of exponentials over
    /// every rank's active outputs) is known: the sample's loss on this rank's outputs and
    /// the output layer's part of the gradient on its input.
    fn run_output_backward(&self, sample: usize, normaliser: (f32, f32), state: &mut SampleState) {
        let started = Instant::now();
        let last = self.layers.len() - 1;
        let SampleState {
            traces,
            labels,
            loss,
            macs,
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
        *loss = output_loss(activation, output, labels, self.data.labels(sample).len());
        if last > 0 {
            let (below, here) = traces.split_at_mut(last);
            let prev = &mut below[last - 1];
            let mut delta = std::mem::take(&mut prev.delta);
            *macs += self.layers[last].input_gradient(&here[0], prev.as_input(), &mut delta);
            prev.delta = delta;
        }
        state.times.backward += started.elapsed();
    }

    /// Training, once the gradient on the output layer's input is summed over the ranks:
    /// the backward pass through the layers below it.
    fn run_hidden_backward(&self, state: &mut SampleState) {
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
    /// layer with `hidden_only`).
    fn forward(
        &self,
        sample: usize,
        seed: u64,
        scratch: &mut [SelectScratch],
        state: &mut SampleState,
    ) -> Result<()> {
        let input = self.data.input(sample);
        self.layers[0].check_input(sample, input)?;
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
            ..
        } = state;
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
        let run = if self.hidden_only { last } else { last + 1 };
        for (l, layer) in self.layers.iter().enumerate().take(run) {
            let (below, here) = traces.split_at_mut(l);
            let x = layer_input(below, l, self.data, sample);
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
            *macs += layer.forward_active(x, &mut here[0]);
            times.hashing += selected - started;
            times.forward += selected.elapsed();
        }
        Ok(())
    }
}

/// A selection error of layer `l` for `sample`: a non-finite input of a layer above the
/// first means that the network diverged.
fn diverged(e: SlideError, l: usize, sample: usize) -> SlideError {
    match e {
        SlideError::Lsh(LshError::NonFiniteValue { .. }) if l > 0 => SlideError::Diverged {
            layer: l - 1,
            sample,
        },
        other => other,
    }
}

/// Mixed into a sample's stream for the output layer's picks of a pooled evaluation.
const POOL_PICKS_STREAM: u64 = 0x706f_6f6c;

impl Network {
    /// The seed of the current step's sample streams: the sample at position `p` of a
    /// batch draws from `mix64(seed ^ p)`.
    fn step_seed(&self) -> u64 {
        mix64(self.config().seed ^ mix64(self.step() ^ 0x7374_6570))
    }

    /// LSH-mode evaluation with a batch pool (`pool`: the pool's output ids, sorted): the
    /// output layer's table picks for each sample of `batch` (whose hidden layers
    /// [`Self::run_batch`] has run into `ws`), without shared negatives and leaving out the
    /// pool's outputs (scored already), offered to the sample's `best` by logit. Samples
    /// draw from streams of their positions, `first_position` on.
    pub(crate) fn offer_table_picks(
        &self,
        ws: &mut Workspace,
        data: &dyn Examples,
        batch: &[usize],
        first_position: usize,
        pool: &[u32],
        best: &mut [Top5],
    ) -> Result<()> {
        let last = self.layers().len() - 1;
        let layer = &self.layers()[last];
        let step_seed = self.step_seed();
        let sampling = self.eval_picks.map(Sampling::top_k);
        let Workspace {
            states, threads, ..
        } = ws;
        states[..batch.len()]
            .par_iter_mut()
            .zip(batch)
            .zip(best)
            .enumerate()
            .try_for_each(|(position, ((state, &sample), best))| {
                let mut scratch = worker_scratch(threads);
                let position = (first_position + position) as u64;
                let mut rng = sample_rng(mix64(step_seed ^ position) ^ POOL_PICKS_STREAM);
                let (below, here) = state.traces.split_at_mut(last);
                let trace = &mut here[0];
                let x = layer_input(below, last, data, sample);
                layer
                    .table_picks(x, sampling.as_ref(), &mut rng, &mut scratch[last], trace)
                    .map_err(|e| diverged(e, last, sample))?;
                trace.active.retain(|id| pool.binary_search(id).is_err());
                let out = &mut trace.out;
                layer.each_logit(kernels(), &trace.active, x, |id, z| {
                    out.push(z);
                    best.offer(z, id);
                });
                Ok(())
            })
    }

    /// Runs `pass` on every sample of `batch`, in parallel, into `ws`. Sample `batch[p]`
    /// draws its random numbers from the stream of position `first_position + p`. A
    /// training pass of a sharded network runs in three phases, the ranks exchanging
    /// between them: the forward passes; with every sample's softmax normaliser combined
    /// over the ranks, the loss and the output layer's backward pass; with the gradient on
    /// its input summed over the ranks, the backward pass below it. With one rank the same
    /// three steps run one sample at a time.
    pub(crate) fn run_batch(
        &self,
        ws: &mut Workspace,
        data: &dyn Examples,
        batch: &[usize],
        mode: Mode,
        first_position: usize,
        hidden_only: bool,
    ) -> Result<()> {
        if batch.is_empty() {
            return Err(SlideError::EmptyBatch);
        }
        if let Some(&sample) = batch.iter().find(|&&s| s >= data.len()) {
            return Err(SlideError::SampleOutOfRange {
                sample,
                len: data.len(),
            });
        }
        ws.prepare(self, batch.len());
        let last = self.layers().len() - 1;
        let pass = Pass {
            layers: self.layers(),
            data,
            mode,
            hidden_only,
            outputs: self.output_range(),
            num_labels: self.config().layers[last].out_dim,
            sharded: self.comm.size() > 1,
        };
        let step_seed = self.step_seed();
        let threads = &ws.threads;
        let training = mode == Mode::Train && !hidden_only;
        // With nothing to exchange, a sample's backward pass follows its forward pass on
        // the same thread, while its active rows are still in cache (10% of a step's
        // time at the Amazon-670K shape).
        let fused = training && !pass.sharded;
        ws.states[..batch.len()]
            .par_iter_mut()
            .zip(batch)
            .enumerate()
            .try_for_each(|(position, (state, &sample))| {
                let mut scratch = worker_scratch(threads);
                let position = (first_position + position) as u64;
                pass.run_forward(sample, mix64(step_seed ^ position), &mut scratch, state)?;
                if fused {
                    pass.run_output_backward(sample, state.traces[last].softmax, state);
                    pass.run_hidden_backward(state);
                }
                Ok::<(), SlideError>(())
            })?;
        if !training || fused {
            return Ok(());
        }
        self.combine_normalisers(ws)?;
        let Workspace {
            states, softmax, ..
        } = ws;
        states[..batch.len()]
            .par_iter_mut()
            .zip(batch)
            .zip(softmax.par_iter())
            .for_each(|((state, &sample), &normaliser)| {
                pass.run_output_backward(sample, normaliser, state)
            });
        self.sum_input_gradients(ws)?;
        ws.states[..batch.len()]
            .par_iter_mut()
            .for_each(|state| pass.run_hidden_backward(state));
        Ok(())
    }

    /// Each sample's softmax normaliser over every rank's active outputs into
    /// `ws.softmax`: the largest logit `m` of the ranks' and the sum of their sums, each
    /// scaled by `exp(m_r - m)`.
    fn combine_normalisers(&self, ws: &mut Workspace) -> Result<()> {
        let last = self.layers().len() - 1;
        let n = ws.batch_len;
        ws.softmax.clear();
        ws.softmax
            .extend(ws.states[..n].iter().map(|s| s.traces[last].softmax));
        if self.comm.size() == 1 {
            return Ok(());
        }
        ws.exchange.clear();
        ws.exchange
            .extend(ws.softmax.iter().flat_map(|&(max, sum)| [max, sum]));
        self.comm.all_gather(&ws.exchange, &mut ws.received)?;
        for (i, normaliser) in ws.softmax.iter_mut().enumerate() {
            let ranks = ws
                .received
                .chunks_exact(2 * n)
                .map(|r| (r[2 * i], r[2 * i + 1]));
            let max = ranks.clone().fold(f32::NEG_INFINITY, |m, (r, _)| m.max(r));
            let sum = ranks.map(|(m, s)| s * (m - max).exp()).sum();
            *normaliser = (max, sum);
        }
        Ok(())
    }

    /// Sums over the ranks every sample's gradient on the output layer's input and its
    /// loss, so that each rank holds the gradient of the whole layer.
    fn sum_input_gradients(&self, ws: &mut Workspace) -> Result<()> {
        let last = self.layers().len() - 1;
        let n = ws.batch_len;
        let mut exchange = std::mem::take(&mut ws.exchange);
        exchange.clear();
        for state in &ws.states[..n] {
            if last > 0 {
                exchange.extend_from_slice(&state.traces[last - 1].delta);
            }
            exchange.push(state.loss as f32);
        }
        self.comm.all_reduce_sum(&mut exchange, &mut ws.received)?;
        let mut summed = exchange.iter();
        for state in &mut ws.states[..n] {
            if last > 0 {
                for d in state.traces[last - 1].delta.iter_mut() {
                    *d = *summed.next().unwrap_or(d);
                }
            }
            state.loss = f64::from(*summed.next().unwrap_or(&0.0));
        }
        ws.exchange = exchange;
        Ok(())
    }

    /// One training step on the samples `batch` of `data` (indices into it): the samples'
    /// forward and backward passes run in parallel, then every touched row gets one Adam
    /// update, in parallel over rows, then the tables are rebuilt if the schedule says so.
    /// The result is identical for any number of threads.
    pub fn train_step(
        &mut self,
        ws: &mut Workspace,
        data: &dyn Examples,
        batch: &[usize],
    ) -> Result<StepStats> {
        let mut stats = StepStats::default();
        self.train_step_with(ws, data, batch, &mut stats)?;
        Ok(stats)
    }

    /// [`train_step`](Self::train_step) writing its counters into `stats`, whose buffers are
    /// reused: once warm (buffers sized by earlier steps of similar batches), a step, table
    /// rebuilds included, allocates nothing on the heap, except the small buffers of a
    /// refresh of shared negatives or query centers (every 8 steps, where configured).
    pub fn train_step_with(
        &mut self,
        ws: &mut Workspace,
        data: &dyn Examples,
        batch: &[usize],
        stats: &mut StepStats,
    ) -> Result<()> {
        let sent = self.comm.bytes_sent();
        self.run_batch(ws, data, batch, Mode::Train, 0, false)?;
        stats.bytes_sent = self.comm.bytes_sent() - sent;
        fill_batch_stats(self.layers(), ws.batch(), stats);
        let scale = 1.0 / batch.len() as f32;
        let started = Instant::now();
        let taken = self.schedule.step + 1;
        let (layers, adam) = self.layers_and_adam();
        adam.set_steps(taken);
        let adam = &*adam;
        for (l, layer) in layers.iter_mut().enumerate() {
            let view = NetworkBatch {
                states: &ws.states[..ws.batch_len],
                layer: l,
                data,
                batch,
            };
            let counts = layer.apply_update(&view, scale, adam, &mut ws.update);
            stats.rows_touched.push(counts.rows);
            stats.multiply_adds += counts.multiply_adds;
        }
        stats.times.update = started.elapsed();
        let rebuild = self.advance_step();
        let started = Instant::now();
        self.refresh_mean_inputs(ws, data, batch, rebuild);
        stats.times.rebuild = started.elapsed();
        if rebuild {
            let started = Instant::now();
            self.rebuild_tables()?;
            stats.times.rebuild += started.elapsed();
            stats.rebuilt = true;
        }
        Ok(())
    }

    /// Counts a step taken; returns whether the tables are due for a rebuild (which moves
    /// the schedule on).
    fn advance_step(&mut self) -> bool {
        let step = self.schedule.step + 1;
        self.schedule.step = step;
        let (layers, _) = self.layers_and_adam();
        layers.iter_mut().for_each(|l| l.set_steps_taken(step));
        let rebuild =
            step >= self.schedule.next_rebuild && self.layers().iter().any(SparseLayer::is_sampled);
        if rebuild {
            self.schedule.advance(self.config().rebuild);
        }
        rebuild
    }

    /// Refreshes what each LSH layer derives from the mean of its inputs over the batch
    /// just trained on (its shared negatives and its query center, see
    /// [`LshConfig`](crate::LshConfig)) when a rebuild follows or its
    /// [`shared_refresh`](crate::LshConfig::shared_refresh) period has passed; the output
    /// layer's shared negatives are re-ranked instead otherwise.
    fn refresh_mean_inputs(
        &mut self,
        ws: &mut Workspace,
        data: &dyn Examples,
        batch: &[usize],
        rebuild: bool,
    ) {
        let (step, last) = (self.schedule.step, self.layers().len() - 1);
        for l in 0..self.layers().len() {
            let layer = &self.layers()[l];
            if !layer.uses_mean_input() {
                continue;
            }
            if rebuild || layer.mean_input_due(step) {
                self.batch_mean_input(ws, data, batch, l);
                self.layer_mut(l).refresh_mean_input(&ws.mean);
            } else if l == last {
                self.rescore_shared_negatives(ws, data, batch);
            }
        }
    }

    /// Between refreshes, re-ranks the output layer's shared negatives together with the
    /// labels of the batch just trained on (see [`SparseLayer::rescore_shared`]).
    fn rescore_shared_negatives(
        &mut self,
        ws: &mut Workspace,
        data: &dyn Examples,
        batch: &[usize],
    ) {
        let last = self.layers().len() - 1;
        if !self.layers()[last].has_shared_negatives() {
            return;
        }
        self.batch_mean_input(ws, data, batch, last);
        ws.candidates.clear();
        let outputs = self.output_range();
        for &sample in batch {
            let labels = data.labels(sample).iter().map(|&y| y as usize);
            ws.candidates.extend(
                labels
                    .filter(|y| outputs.contains(y))
                    .map(|y| (y - outputs.start) as u32),
            );
        }
        self.layer_mut(last)
            .rescore_shared(&ws.mean, &ws.candidates);
    }

    /// The mean of layer `l`'s inputs over `batch` (whose traces `ws` holds), into
    /// `ws.mean`.
    fn batch_mean_input(&self, ws: &mut Workspace, data: &dyn Examples, batch: &[usize], l: usize) {
        let mut mean = std::mem::take(&mut ws.mean);
        mean.clear();
        mean.resize(self.layers()[l].in_dim(), 0.0);
        let weight = 1.0 / batch.len() as f32;
        for (state, &sample) in ws.batch().iter().zip(batch) {
            layer_input(&state.traces, l, data, sample)
                .for_each_nonzero(|i, v| mean[i] += weight * v);
        }
        ws.mean = mean;
    }

    /// The gradients of the batch-mean loss, with the active sets the next
    /// [`train_step`](Self::train_step) on the same batch would use, without changing the
    /// network. For tests and the autodiff comparison; allocates its result.
    pub fn gradients(
        &self,
        ws: &mut Workspace,
        data: &dyn Examples,
        batch: &[usize],
    ) -> Result<Vec<LayerGradients>> {
        self.run_batch(ws, data, batch, Mode::Train, 0, false)?;
        let scale = 1.0 / batch.len() as f32;
        let mut result = Vec::with_capacity(self.layers().len());
        for (l, layer) in self.layers().iter().enumerate() {
            let view = NetworkBatch {
                states: &ws.states[..ws.batch_len],
                layer: l,
                data,
                batch,
            };
            result.push(layer.batch_gradients(&view, scale, &mut ws.update));
        }
        Ok(result)
    }
}

/// A training batch's loss, counters, active-set sources and phase times into `stats`.
fn fill_batch_stats(layers: &[SparseLayer], states: &[SampleState], stats: &mut StepStats) {
    let n = states.len();
    stats.loss = states.iter().map(|s| s.loss).sum::<f64>() / n as f64;
    stats.samples = n;
    stats.multiply_adds = states.iter().map(|s| s.macs).sum();
    stats.rows_touched.clear();
    stats.active_per_sample.clear();
    stats.active_sources.clear();
    stats
        .active_sources
        .extend(layers.iter().enumerate().map(|(l, layer)| {
            layer.is_sampled().then(|| {
                let mut sum = ActiveSources::default();
                for s in states {
                    let c = s.traces[l].sources;
                    sum.forced += (c.forced - s.traces[l].shared) as f64;
                    sum.shared += s.traces[l].shared as f64;
                    sum.from_tables += c.from_tables as f64;
                    sum.random_fill += c.random_fill as f64;
                    sum.candidates += c.candidates as f64;
                }
                let n = n as f64;
                ActiveSources {
                    forced: sum.forced / n,
                    shared: sum.shared / n,
                    from_tables: sum.from_tables / n,
                    random_fill: sum.random_fill / n,
                    candidates: sum.candidates / n,
                }
            })
        }));
    stats.active_per_sample.extend(
        (0..layers.len())
            .map(|l| states.iter().map(|s| s.traces[l].len()).sum::<usize>() as f64 / n as f64),
    );
    stats.rebuilt = false;
    stats.times = PhaseTimes::default();
    for state in states {
        stats.times += state.times;
    }
}
