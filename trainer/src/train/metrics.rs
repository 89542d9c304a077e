//! What a run reports: the metrics file's records, the progress line, resident memory.

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use slide::{EvalStats, Metrics, Network, StepStats};

/// An evaluation's metrics in the metrics file, each at k = 1, 3, 5 (`p_at_1`, ...,
/// `psndcg_at_5`; see [`slide::metrics`]): P@1 (the accuracy of single-label data), and for
/// multi-label data P@3, P@5, nDCG@k and, with the training set's propensities, PSP@k and
/// PSnDCG@k.
pub(super) struct EvalRecord {
    pub(super) metrics: Metrics,
    pub(super) multi_label: bool,
}

impl Serialize for EvalRecord {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let m = &self.metrics;
        let mut map = serializer.serialize_map(None)?;
        if !self.multi_label {
            map.serialize_entry("p_at_1", &m.precision[0])?;
            return map.end();
        }
        for (name, k, value) in m.entries() {
            map.serialize_entry(&format!("{name}_at_{k}"), &value)?;
        }
        map.end()
    }
}

/// One line of the metrics file.
#[derive(Serialize)]
pub(super) struct Record {
    pub(super) step: u64,
    pub(super) epoch: usize,
    pub(super) seconds: f64,
    pub(super) samples_per_second: f64,
    /// Seconds of training alone (evaluations and recall probes excluded).
    pub(super) train_seconds: f64,
    /// Samples per second of training alone.
    pub(super) train_samples_per_second: f64,
    pub(super) loss: f64,
    pub(super) lr: f32,
    /// The evaluation's metrics, if the step evaluated (single-label data: `p_at_1`, the
    /// accuracy, only).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub(super) eval: Option<EvalRecord>,
    /// Seconds the evaluation took (included in `seconds`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) eval_seconds: Option<f64>,
    /// P@1 with the output layer sampled by LSH, on the same test samples as `p_at_1`
    /// (when the evaluation scores every output and the output layer has LSH).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) p_at_1_lsh: Option<f64>,
    /// Collapse detector: share of the evaluated samples whose top-1 output is the single
    /// most frequent top-1 output, that output, and the share of the most frequent label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) top1_share: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) top1_output: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) label_share: Option<f64>,
    /// Per layer: mean active neurons per sample in the last step.
    pub(super) active_per_sample: Vec<f64>,
    /// Per layer: stored rows the update touched, mean per step since the previous record
    /// (the last step alone would be the epoch's partial batch at the end of an epoch).
    pub(super) rows_touched: Vec<usize>,
    /// Per layer (null without LSH): mean active ids per sample from forced labels, from
    /// the tables and from random fill, and the candidates the buckets held.
    pub(super) active_sources: Vec<Option<Sources>>,
    /// Per layer (null without LSH): bucket occupancy after the last rebuild.
    pub(super) tables: Vec<Option<Occupancy>>,
    /// Per layer (null without LSH): share of a few samples' exact top-10 neurons that
    /// their active sets held, and what random sets of the same size would hold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) recall: Option<Vec<Option<RecallRecord>>>,
    /// Resident memory of the process, MiB (Linux; absent elsewhere).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) rss_mib: Option<f64>,
    /// Seconds in each phase of the steps so far (see [`slide::PhaseTimes`]; hashing,
    /// forward and backward are thread time summed over samples; heads is the heads'
    /// training, one thread's time within update's).
    pub(super) phase_seconds: Phases,
    /// Checkpoints written so far and the seconds they took.
    pub(super) checkpoints: usize,
    pub(super) checkpoint_seconds: f64,
    /// KiB this rank sent to the others per training step since the last record (a run on
    /// several ranks; absent for one process).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) sent_kib_per_step: Option<f64>,
}

/// [`slide::PhaseTimes`] in seconds.
#[derive(Serialize, Clone, Copy, Default)]
pub(super) struct Phases {
    pub(super) hashing: f64,
    pub(super) forward: f64,
    pub(super) backward: f64,
    pub(super) update: f64,
    pub(super) heads: f64,
    pub(super) rebuild: f64,
}

impl From<slide::PhaseTimes> for Phases {
    fn from(t: slide::PhaseTimes) -> Self {
        Phases {
            hashing: t.hashing.as_secs_f64(),
            forward: t.forward.as_secs_f64(),
            backward: t.backward.as_secs_f64(),
            update: t.update.as_secs_f64(),
            heads: t.heads.as_secs_f64(),
            rebuild: t.rebuild.as_secs_f64(),
        }
    }
}

#[derive(Serialize, Clone, Copy)]
pub(super) struct Sources {
    pub(super) forced: f64,
    pub(super) shared: f64,
    pub(super) tables: f64,
    pub(super) random: f64,
    pub(super) candidates: f64,
    /// Share of the non-label active ids that came from the tables.
    pub(super) table_share: f64,
}

#[derive(Serialize, Clone, Copy)]
pub(super) struct Occupancy {
    /// Mean ids per non-empty bucket.
    pub(super) mean: f64,
    /// Largest bucket.
    pub(super) max: usize,
    /// Share of the non-empty buckets that are full.
    pub(super) full_share: f64,
    /// Share of all buckets that hold an id.
    pub(super) used_share: f64,
    /// Ids full buckets dropped at the last rebuild, summed over tables.
    pub(super) dropped: usize,
    /// Share of the ids whose rows the last rebuild hashed (the others' rows had not moved
    /// since the rebuild before it).
    pub(super) rehashed_share: f64,
}

#[derive(Serialize, Clone, Copy)]
pub(super) struct RecallRecord {
    pub(super) top10: f64,
    pub(super) random: f64,
    pub(super) samples: usize,
}

pub(super) fn sources(stats: &StepStats) -> Vec<Option<Sources>> {
    stats
        .active_sources
        .iter()
        .map(|s| {
            s.map(|s| Sources {
                forced: s.forced,
                shared: s.shared,
                tables: s.from_tables,
                random: s.random_fill,
                candidates: s.candidates,
                table_share: s.table_share(),
            })
        })
        .collect()
}

pub(super) fn occupancy(net: &Network) -> Vec<Option<Occupancy>> {
    net.table_stats()
        .iter()
        .map(|t| {
            t.map(|t| Occupancy {
                mean: t.mean_non_empty_len,
                max: t.max_bucket_len,
                full_share: t.full_buckets as f64 / t.non_empty_buckets.max(1) as f64,
                used_share: t.non_empty_buckets as f64 / t.buckets.max(1) as f64,
                dropped: t.dropped_ids,
                rehashed_share: t.rehashed_ids as f64 / t.ids.max(1) as f64,
            })
        })
        .collect()
}

/// The process's resident set size in MiB, from `/proc/self/status` (Linux only).
pub(super) fn resident_mib() -> Option<f64> {
    status_mib("VmRSS:")
}

/// The process's peak resident memory so far, MiB (Linux; absent elsewhere).
pub fn peak_resident_mib() -> Option<f64> {
    status_mib("VmHWM:")
}

/// A `/proc/self/status` field in kB, as MiB.
pub(super) fn status_mib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Whether an evaluation shows a collapsed model: one output is the top-1 prediction of
/// more than twice the share of samples that the most frequent label is in (and of more
/// than 2% of them, so small test sets of rare labels do not raise it).
pub(super) fn collapsed(e: &EvalStats) -> bool {
    e.samples > 0 && e.top1_share > 0.02 && e.top1_share > 2.0 * e.label_share
}

/// The last sampled layer's sources, occupancy and recall, for the progress line: e.g.
/// `  lsh: 96% from tables, 4% fill, buckets 41.2/164, recall@10 0.62 (random 0.002)`.
/// What a rank of a sharded run sent per step (nothing for one process).
pub(super) fn traffic(r: &Record) -> String {
    r.sent_kib_per_step
        .map_or_else(String::new, |kib| format!("  sent {kib:.1} KiB/step"))
}

pub(super) fn sampling_summary(r: &Record) -> String {
    let Some(l) = r.active_sources.iter().rposition(Option::is_some) else {
        return String::new();
    };
    let s = r.active_sources[l].expect("found above");
    let picked = (s.shared + s.tables + s.random).max(1e-9);
    let mut text = format!(
        "  lsh: {:.0}% from tables, {:.0}% shared, {:.0}% fill",
        100.0 * s.table_share,
        100.0 * s.shared / picked,
        100.0 * s.random / picked
    );
    if let Some(t) = r.tables[l] {
        text += &format!(
            ", buckets {:.1} mean / {} max, {:.0}% full, {:.0}% rehashed",
            t.mean,
            t.max,
            100.0 * t.full_share,
            100.0 * t.rehashed_share
        );
    }
    if let Some(Some(recall)) = r.recall.as_ref().and_then(|v| v.get(l)) {
        text += &format!(
            ", recall@10 {:.2} (random {:.4})",
            recall.top10, recall.random
        );
    }
    text
}

pub(super) fn format_record(r: &Record, multi_label: bool) -> String {
    let mut line = format!(
        "step {:>6}  epoch {:>3}  {:>7.1} s  {:>7.0} samples/s (training {:.0})  loss {:.4}",
        r.step, r.epoch, r.seconds, r.samples_per_second, r.train_samples_per_second, r.loss
    );
    if let Some(eval) = &r.eval {
        line += "  test ";
        line += &crate::evaluate::metrics_text(&eval.metrics, multi_label, "  ");
    }
    if let Some(p) = r.p_at_1_lsh {
        line += &format!("  (P@1 with LSH outputs {p:.4})");
    }
    if let Some(seconds) = r.eval_seconds {
        line += &format!("  (eval {seconds:.1} s)");
    }
    if let (Some(share), Some(output)) = (r.top1_share, r.top1_output) {
        line += &format!("  top-1 {:.1}% on output {output}", 100.0 * share);
    }
    line + &traffic(r) + &sampling_summary(r)
}
