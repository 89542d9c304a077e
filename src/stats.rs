//! What training steps and evaluations report: losses, counters, where the time went,
//! where active neurons came from, the evaluation's metrics and the collapse detector.

use std::time::Duration;

/// Where a step's time went. `hashing`, `forward` and `backward` are summed over the
/// batch's samples (thread time, larger than wall time on several threads); `update` and
/// `rebuild` are wall time of phases that are parallel inside; `heads` is the thread time
/// of the heads' training, which runs on one thread inside `update`'s wall time, beside
/// the rows' updates.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PhaseTimes {
    /// Hashing inputs and querying tables (LSH layers).
    pub hashing: Duration,
    /// Computing the active neurons' activations (hashing excluded).
    pub forward: Duration,
    /// Back-propagating deltas.
    pub backward: Duration,
    /// Gradient accumulation and Adam (with the heads' training beside them).
    pub update: Duration,
    /// The heads' training (one thread, within `update`).
    pub heads: Duration,
    /// Table rebuilds.
    pub rebuild: Duration,
}

impl std::ops::AddAssign for PhaseTimes {
    fn add_assign(&mut self, other: Self) {
        self.hashing += other.hashing;
        self.forward += other.forward;
        self.backward += other.backward;
        self.update += other.update;
        self.heads += other.heads;
        self.rebuild += other.rebuild;
    }
}

/// Counters of one training step, for tests and reports.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StepStats {
    /// Mean cross-entropy over the batch.
    pub loss: f64,
    /// Samples in the batch.
    pub samples: usize,
    /// Multiply-adds of the forward, backward and update work.
    pub multiply_adds: u64,
    /// Stored weight rows updated, per layer (neurons for neuron-major layers, inputs for
    /// input-major ones).
    pub rows_touched: Vec<usize>,
    /// Mean active neurons per sample, per layer.
    pub active_per_sample: Vec<f64>,
    /// Per layer, where a sample's active neurons came from (means over the batch); `None`
    /// for layers without LSH.
    pub active_sources: Vec<Option<ActiveSources>>,
    /// Whether the LSH tables were rebuilt after this step.
    pub rebuilt: bool,
    /// Bytes this rank sent to the others during the step (0 with one rank; see
    /// [`Network::sharded`](crate::Network::sharded)).
    pub bytes_sent: u64,
    /// Where the time went.
    pub times: PhaseTimes,
}

/// Where the active neurons of an LSH layer came from, as means per sample.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ActiveSources {
    /// Forced ids (the sample's labels in the output layer).
    pub forced: f64,
    /// Shared negatives: the neurons that score highest for the mean input, active for
    /// every sample.
    pub shared: f64,
    /// Ids the sampling strategy took from the tables' buckets.
    pub from_tables: f64,
    /// Uniformly random ids: the fill up to `min_active` and the `random_extra` ids.
    pub random_fill: f64,
    /// Distinct candidates the visited buckets held, before the strategy's cut.
    pub candidates: f64,
}

impl ActiveSources {
    /// Share of the non-label active ids that came from the tables (1 when there are none).
    pub fn table_share(&self) -> f64 {
        let total = self.shared + self.from_tables + self.random_fill;
        if total > 0.0 {
            self.from_tables / total
        } else {
            1.0
        }
    }
}

/// Results of an evaluation pass.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct EvalStats {
    /// Samples evaluated.
    pub samples: usize,
    /// P@k, nDCG@k and, where propensities were given, PSP@k and PSnDCG@k, for k = 1, 3, 5
    /// (`metrics.precision[0]`, P@1, is the accuracy for single-label data).
    pub metrics: crate::metrics::Metrics,
    /// Mean active output neurons per sample.
    pub active_outputs: f64,
    /// The output that is the top-1 prediction of the most samples (ties: the lower id).
    pub top1_output: u32,
    /// Share of samples whose top-1 prediction is [`top1_output`](Self::top1_output): a
    /// collapse detector. A healthy model stays near [`label_share`](Self::label_share);
    /// a collapsed one predicts one output for most inputs.
    pub top1_share: f64,
    /// Share of samples that carry the most frequent label among them: what predicting that
    /// one label everywhere would score as P@1.
    pub label_share: f64,
}

/// How much of each sample's exact top outputs its active set held, for one LSH layer (see
/// [`Network::retrieval_recall`](crate::Network::retrieval_recall)).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Recall {
    /// Mean share of a sample's `top` highest-scoring neurons (by exact pre-activation over
    /// every neuron) that were in its active set.
    pub recall: f64,
    /// What a uniformly random active set of the same size would hold on average: mean
    /// active neurons over the layer's width.
    pub random: f64,
    /// Samples probed.
    pub samples: usize,
}
