//! The training step of a [`Network`]: a batch's passes, then one sparse Adam update per
//! touched row, the step counted, the layers' mean-input derivations refreshed and the tables
//! rebuilt on schedule; and the gradients such a step would apply, for tests.

use std::time::Instant;

use rayon::prelude::*;

use crate::data::Examples;
use crate::error::Result;
use crate::head::{HeadBatch, HeadSample};
use crate::layer::{Mode, SparseLayer};
use crate::network::Network;
use crate::optimizer::LayerGradients;
use crate::stats::{ActiveSources, PhaseTimes, StepStats};
use crate::workspace::{NetworkBatch, SampleState, Workspace, layer_input};

use super::Reach;

impl Network {
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
        // At the first step: what the heads build from the training data.
        self.heads.prepare(data);
        self.run_batch(ws, data, batch, Mode::Train, 0, Reach::Backward)?;
        stats.bytes_sent = self.comm.bytes_sent() - sent;
        fill_batch_stats(self.layers(), ws.batch(), stats);
        let scale = 1.0 / batch.len() as f32;
        let started = Instant::now();
        let taken = self.schedule.step + 1;
        let earlier = self.schedule.earlier;
        let head_rate = self.head_rate();
        let (layers, adam, heads) = self.trainable();
        // Adam's bias correction counts the steps of the runs this one continues.
        adam.set_steps(earlier + taken);
        let adam = &*adam;
        let states = &ws.states[..ws.batch_len];
        let (update, head_scratch) = (&mut ws.update[..layers.len()], &mut ws.heads);
        let sample = |i: usize| head_sample(&states[i], data, batch[i]);
        let head_batch = HeadBatch {
            len: batch.len(),
            sample: &sample,
        };
        // The heads learn on one thread beside the layers' updates, and the layers update
        // side by side (disjoint state, each deterministic on its own): one layer's serial
        // grouping runs while the other threads update another's rows, and the heads'
        // thread joins them when it is done.
        let heads_time = &mut stats.times.heads;
        rayon::join(
            || {
                layers
                    .par_iter_mut()
                    .zip(update.par_iter_mut())
                    .enumerate()
                    .for_each(|(l, (layer, (update, counts)))| {
                        let view = NetworkBatch {
                            states,
                            layer: l,
                            data,
                            batch,
                        };
                        *counts = layer.apply_update(&view, scale, adam, update);
                    });
            },
            || {
                if heads.learn() {
                    let started = Instant::now();
                    heads.train(&head_batch, head_scratch, head_rate);
                    *heads_time = started.elapsed();
                }
            },
        );
        stats.times.update = started.elapsed();
        for (_, counts) in &ws.update[..self.layers().len()] {
            stats.rows_touched.push(counts.rows);
            stats.multiply_adds += counts.multiply_adds;
        }
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

    /// A step of the heads alone, head-only step `step` of `steps` (from 0; each head
    /// takes its rate from them), the network left as it is: each sample of `batch` runs
    /// its forward pass as in training (the tables pick its active outputs, its labels
    /// forced in), and the heads learn on its shortlist as in
    /// [`train_step`](Self::train_step). The step is counted; the tables are not rebuilt.
    /// The stats' loss is the heads': the mean over the samples of their summed losses.
    /// Without a head that learns, an error.
    pub fn train_heads_step(
        &mut self,
        ws: &mut Workspace,
        data: &dyn Examples,
        batch: &[usize],
        (step, steps): (u64, u64),
    ) -> Result<StepStats> {
        if !self.heads.learn() {
            return Err(crate::error::config_error(
                "network.heads",
                "a head-only step needs a head that learns".to_string(),
            ));
        }
        self.heads.prepare(data);
        self.run_batch(ws, data, batch, Mode::Train, 0, Reach::Output)?;
        let mut stats = StepStats::default();
        fill_batch_stats(self.layers(), ws.batch(), &mut stats);
        let started = Instant::now();
        let states = &ws.states[..ws.batch_len];
        let sample = |i: usize| head_sample(&states[i], data, batch[i]);
        let head_batch = HeadBatch {
            len: batch.len(),
            sample: &sample,
        };
        let rate = crate::head::HeadRate::Alone { step, steps };
        let loss = self.heads.train(&head_batch, &mut ws.heads, rate);
        stats.loss = loss / batch.len() as f64;
        stats.times.update = started.elapsed();
        stats.times.heads = stats.times.update;
        self.schedule.step += 1;
        Ok(stats)
    }

    /// Counts a step taken; returns whether the tables are due for a rebuild (which moves
    /// the schedule on).
    fn advance_step(&mut self) -> bool {
        let step = self.schedule.step + 1;
        self.schedule.step = step;
        let (layers, _, _) = self.trainable();
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
    /// [`shared_refresh`](crate::Negatives::shared_refresh) period has passed; the output
    /// layer's shared negatives are re-ranked instead otherwise, every
    /// [`shared_rescore`](crate::Negatives::shared_rescore) steps.
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
            } else if l == last && layer.rescore_due(step) {
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
            layer_input(&state.traces, l, state.input.get(data, sample))
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
        self.run_batch(ws, data, batch, Mode::Train, 0, Reach::Backward)?;
        let scale = 1.0 / batch.len() as f32;
        let mut result = Vec::with_capacity(self.layers().len());
        for (l, layer) in self.layers().iter().enumerate() {
            let view = NetworkBatch {
                states: &ws.states[..ws.batch_len],
                layer: l,
                data,
                batch,
            };
            result.push(layer.batch_gradients(&view, scale, &mut ws.update[l].0));
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

/// What the heads see of training sample `sample` of `data`, whose pass left `state`.
fn head_sample<'a>(
    state: &'a SampleState,
    data: &'a dyn Examples,
    sample: usize,
) -> HeadSample<'a> {
    HeadSample {
        input: state.input.get(data, sample),
        shortlist: &state.shortlist,
        labels: data.labels(sample),
    }
}
