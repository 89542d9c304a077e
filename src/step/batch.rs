//! Running a batch's samples on a [`Network`]: each sample's [`Pass`] in parallel on rayon's
//! threads, from a random stream of its position, with the ranks of a sharded network
//! exchanging softmax normalisers and input gradients between the phases; and the output
//! layer's table picks of a pooled evaluation.

use std::time::Instant;

use rayon::prelude::*;
use slide_lsh::{Sampling, mix64};

use crate::data::Examples;
use crate::error::{Result, SlideError};
use crate::kernels::kernels;
use crate::layer::{Mode, sample_rng};
use crate::network::Network;
use crate::top::TopN;
use crate::workspace::{Workspace, layer_input, worker_scratch};

use super::pass::{Pass, Reach, diverged};

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
    /// pool's outputs (scored already), offered to the sample's `best` by logit; `picks`
    /// (`None`: the layer's own sampling) of each sample's table picks, those found in the
    /// most buckets. Samples draw from streams of their positions, `first_position` on.
    pub(crate) fn offer_table_picks(
        &self,
        ws: &mut Workspace,
        data: &dyn Examples,
        batch: &[usize],
        (first_position, picks): (usize, Option<usize>),
        pool: &[u32],
        best: &mut [TopN],
    ) -> Result<()> {
        let last = self.layers().len() - 1;
        let layer = &self.layers()[last];
        let step_seed = self.step_seed();
        let sampling = picks.map(Sampling::top_k);
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
                let x = layer_input(below, last, state.input.get(data, sample));
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

    /// Runs every sample of `batch` in `mode` as far as `reach` says, in parallel, into
    /// `ws`. Sample `batch[p]`
    /// draws its random numbers from the stream of position `first_position + p`. A
    /// training pass of a sharded network runs in three phases, the ranks exchanging
    /// between them: the forward passes; with every sample's softmax normaliser combined
    /// over the ranks, the loss and the output layer's backward pass; with the gradient on
    /// its input summed over the ranks, the backward pass below it. With one rank, every
    /// sample's forward pass up to its output layer's selection, then each sample's output
    /// layer, loss and backward pass on one thread.
    pub(crate) fn run_batch(
        &self,
        ws: &mut Workspace,
        data: &dyn Examples,
        batch: &[usize],
        mode: Mode,
        first_position: usize,
        reach: Reach,
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
            reach,
            outputs: self.output_range(),
            num_labels: self.config().layers[last].out_dim,
            sharded: self.comm.size() > 1,
            heads: &self.heads,
            input_power: self.config().input_power,
        };
        let step_seed = self.step_seed();
        let threads = &ws.threads;
        let training = mode == Mode::Train && reach == Reach::Backward;
        // With nothing to exchange, a sample's backward pass follows its forward pass on
        // the same thread, while its active rows are still in cache (10% of a step's time
        // at the Amazon-670K shape). Every sample of the batch selects its active outputs
        // before any computes them: the selection phase takes about half the time with
        // the tables and the pool left in cache (docs/notebook/performance.md).
        let fused = pass.split();
        ws.states[..batch.len()]
            .par_iter_mut()
            .zip(batch)
            .enumerate()
            .try_for_each(|(position, (state, &sample))| {
                let mut scratch = worker_scratch(threads);
                let position = (first_position + position) as u64;
                pass.run_forward(sample, mix64(step_seed ^ position), &mut scratch, state)?;
                Ok::<(), SlideError>(())
            })?;
        if fused {
            self.run_outputs(ws, data, batch, &pass);
        }
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

    /// The second pass of a [`split`](Pass::split) training batch: each sample's output
    /// layer, loss and backward pass. Where the output layer computes every output for
    /// every sample ([`SparseLayer::batches_logits`]), its pre-activations come from one
    /// product for the batch first (the product's thread-seconds counted as the first
    /// sample's forward time).
    fn run_outputs(&self, ws: &mut Workspace, data: &dyn Examples, batch: &[usize], pass: &Pass) {
        let last = self.layers().len() - 1;
        let layer = &self.layers()[last];
        let Workspace { states, logits, .. } = ws;
        let states = &mut states[..batch.len()];
        // Batched where every sample computes every output from a dense input (a sparse
        // one, such as a sampled hidden layer's, is cheaper a sample at a time).
        let batched = last > 0
            && layer.batches_logits(batch.len())
            && states
                .iter()
                .all(|s| s.traces[last].dense && s.traces[last - 1].dense);
        if !batched {
            states
                .par_iter_mut()
                .zip(batch)
                .for_each(|(state, &sample)| pass.run_output_rest(sample, state));
            return;
        }
        let threads = rayon::current_num_threads() as u32;
        let started = Instant::now();
        let shared: &[_] = states;
        layer.batch_logits(
            batch.len(),
            |i| layer_input(&shared[i].traces, last, shared[i].input.get(data, batch[i])),
            logits,
        );
        let forward = started.elapsed() * threads;
        states
            .par_iter_mut()
            .zip(batch)
            .zip(logits.rows())
            .for_each(|((state, &sample), z)| pass.run_output_loss(sample, Some(z), state));
        // The gradient on the input as one product too.
        let started = Instant::now();
        let shared: &[_] = states;
        layer.batch_input_gradients(|i| &shared[i].traces[last].delta, logits);
        let macs = (layer.in_dim() * layer.out_dim()) as u64;
        states
            .par_iter_mut()
            .zip(logits.input_gradients())
            .for_each(|(state, g)| {
                let prev = &mut state.traces[last - 1];
                prev.delta.clear();
                prev.delta.extend_from_slice(g);
                state.macs += macs;
            });
        let backward = started.elapsed() * threads;
        states
            .par_iter_mut()
            .for_each(|state| pass.run_hidden_backward(state));
        states[0].times.forward += forward;
        states[0].times.backward += backward;
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
}
