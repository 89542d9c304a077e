//! The training loop: epochs of shuffled batches, periodic evaluation, metrics, checkpoints,
//! and a stop with a message when the loss diverges.

use slide::lsh::mix64;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, anyhow};
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use serde::Serialize;
use slide::{EvalStats, Mode, Network, StepStats};

use crate::checkpoint::{self, Position};
use crate::config::Config;
use crate::data::{self, Loaded};

/// Why a run stopped early: bad input (exit 2) or a failure while training (exit 1).
#[derive(Debug)]
pub enum Failure {
    /// Bad input: command line, config, data or checkpoint (exit code 2).
    Input(anyhow::Error),
    /// Training failed, e.g. the loss diverged (exit code 1).
    Training(anyhow::Error),
    /// A signal (SIGINT, SIGTERM) stopped the run at a step boundary after a checkpoint was
    /// written; the message says where (exit code 128 + the signal's number).
    Interrupted {
        /// The signal's number.
        signal: i32,
        /// Where the run stopped and how to resume it.
        message: String,
    },
}

/// One line of the metrics file.
#[derive(Serialize)]
struct Record {
    step: u64,
    epoch: usize,
    seconds: f64,
    samples_per_second: f64,
    /// Seconds of training alone (evaluations and recall probes excluded).
    train_seconds: f64,
    /// Samples per second of training alone.
    train_samples_per_second: f64,
    loss: f64,
    lr: f32,
    #[serde(skip_serializing_if = "Option::is_none")]
    p_at_1: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    p_at_3: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    p_at_5: Option<f64>,
    /// Seconds the evaluation took (included in `seconds`).
    #[serde(skip_serializing_if = "Option::is_none")]
    eval_seconds: Option<f64>,
    /// P@1 with the output layer sampled by LSH, on the same test samples as `p_at_1`
    /// (when the evaluation scores every output and the output layer has LSH).
    #[serde(skip_serializing_if = "Option::is_none")]
    p_at_1_lsh: Option<f64>,
    /// Collapse detector: share of the evaluated samples whose top-1 output is the single
    /// most frequent top-1 output, that output, and the share of the most frequent label.
    #[serde(skip_serializing_if = "Option::is_none")]
    top1_share: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top1_output: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    label_share: Option<f64>,
    /// Per layer: mean active neurons per sample in the last step.
    active_per_sample: Vec<f64>,
    /// Per layer: stored rows the update touched, mean per step since the previous record
    /// (the last step alone would be the epoch's partial batch at the end of an epoch).
    rows_touched: Vec<usize>,
    /// Per layer (null without LSH): mean active ids per sample from forced labels, from
    /// the tables and from random fill, and the candidates the buckets held.
    active_sources: Vec<Option<Sources>>,
    /// Per layer (null without LSH): bucket occupancy after the last rebuild.
    tables: Vec<Option<Occupancy>>,
    /// Per layer (null without LSH): share of a few samples' exact top-10 neurons that
    /// their active sets held, and what random sets of the same size would hold.
    #[serde(skip_serializing_if = "Option::is_none")]
    recall: Option<Vec<Option<RecallRecord>>>,
    /// Resident memory of the process, MiB (Linux; absent elsewhere).
    #[serde(skip_serializing_if = "Option::is_none")]
    rss_mib: Option<f64>,
    /// Seconds in each phase of the steps so far (see [`slide::PhaseTimes`]; hashing,
    /// forward and backward are thread time summed over samples).
    phase_seconds: Phases,
    /// Checkpoints written so far and the seconds they took.
    checkpoints: usize,
    checkpoint_seconds: f64,
}

/// [`slide::PhaseTimes`] in seconds.
#[derive(Serialize, Clone, Copy, Default)]
struct Phases {
    hashing: f64,
    forward: f64,
    backward: f64,
    update: f64,
    rebuild: f64,
}

impl From<slide::PhaseTimes> for Phases {
    fn from(t: slide::PhaseTimes) -> Self {
        Phases {
            hashing: t.hashing.as_secs_f64(),
            forward: t.forward.as_secs_f64(),
            backward: t.backward.as_secs_f64(),
            update: t.update.as_secs_f64(),
            rebuild: t.rebuild.as_secs_f64(),
        }
    }
}

#[derive(Serialize, Clone, Copy)]
struct Sources {
    forced: f64,
    shared: f64,
    tables: f64,
    random: f64,
    candidates: f64,
    /// Share of the non-label active ids that came from the tables.
    table_share: f64,
}

#[derive(Serialize, Clone, Copy)]
struct Occupancy {
    /// Mean ids per non-empty bucket.
    mean: f64,
    /// Largest bucket.
    max: usize,
    /// Share of the non-empty buckets that are full.
    full_share: f64,
    /// Share of all buckets that hold an id.
    used_share: f64,
    /// Ids full buckets dropped at the last rebuild, summed over tables.
    dropped: usize,
}

#[derive(Serialize, Clone, Copy)]
struct RecallRecord {
    top10: f64,
    random: f64,
    samples: usize,
}

fn sources(stats: &StepStats) -> Vec<Option<Sources>> {
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

fn occupancy(net: &Network) -> Vec<Option<Occupancy>> {
    net.table_stats()
        .iter()
        .map(|t| {
            t.map(|t| Occupancy {
                mean: t.mean_non_empty_len,
                max: t.max_bucket_len,
                full_share: t.full_buckets as f64 / t.non_empty_buckets.max(1) as f64,
                used_share: t.non_empty_buckets as f64 / t.buckets.max(1) as f64,
                dropped: t.dropped_ids,
            })
        })
        .collect()
}

/// Test samples probed for retrieval recall.
const RECALL_SAMPLES: usize = 16;

/// The process's resident set size in MiB, from `/proc/self/status` (Linux only).
fn resident_mib() -> Option<f64> {
    status_mib("VmRSS:")
}

/// The process's peak resident memory so far, MiB (Linux; absent elsewhere).
pub fn peak_resident_mib() -> Option<f64> {
    status_mib("VmHWM:")
}

/// A `/proc/self/status` field in kB, as MiB.
fn status_mib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Bytes a run holds beside its model and data, at most: the program and its thread
/// stacks, the per-batch workspaces, and a checkpoint's reading or writing (a 4 MiB write
/// buffer and 1 MiB pieces; one hash table's arrays while reading). Measured peak resident
/// memory exceeds model and data by 12-40 MB (`trainer/tests/cli.rs` checks a run against it).
const RUN_OVERHEAD: u64 = 96 << 20;

/// Bytes a run of `network` on data of `data_bytes` needs at its peak: the model (see
/// [`slide::NetworkConfig::estimated_bytes`]; checkpoints stream it and hold no copy), the
/// data, and [`RUN_OVERHEAD`]. Returns `(model, peak)`.
fn estimate_bytes(network: &slide::NetworkConfig, data_bytes: u64) -> (u64, u64) {
    let model = network.estimated_bytes().model();
    (model, model + data_bytes + RUN_OVERHEAD)
}

fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    line.split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()
        .map(|kb| kb * 1024)
}

/// Data, network and checkpoint identity for a config, everything checked.
pub(crate) struct Prepared {
    pub(crate) loaded: Loaded,
    pub(crate) net: Network,
    pub(crate) identity: checkpoint::Identity,
}

/// Where [`prepare`] says which kernels run and what it loaded.
pub(crate) enum Log {
    Stdout,
    Stderr,
}

/// Loads the data, checks the memory estimate and builds the network; `restoring` leaves
/// its LSH tables empty for a checkpoint (which carries them) to fill.
pub(crate) fn prepare(config: &Config, restoring: bool, log: Log) -> Result<Prepared, Failure> {
    let input = Failure::Input;
    let started = Instant::now();
    let loaded = data::load(&config.data).map_err(input)?;
    let (features, labels) = (loaded.features, loaded.labels);
    let last = config.network.layers.last().expect("validated").size;
    if last != labels {
        return Err(input(anyhow!(
            "the last layer has {last} neurons but the data has {labels} labels"
        )));
    }
    let network_config = config.network(features, loaded.train.examples().len());
    let data_bytes = loaded.train.memory_bytes() + loaded.test.memory_bytes();
    let (model, peak) = estimate_bytes(&network_config, data_bytes);
    let limit = config.train.memory_limit_mb * 1_000_000;
    if limit > 0 && peak > limit {
        return Err(input(anyhow!(
            "the run needs about {} MB (model {} MB, data {} MB) but train.memory_limit_mb is {}",
            peak / 1_000_000,
            model / 1_000_000,
            data_bytes / 1_000_000,
            config.train.memory_limit_mb
        )));
    }
    if let Some(available) = available_bytes()
        && peak > available
    {
        return Err(input(anyhow!(
            "the run needs about {:.1} GB (model {:.1} GB, data {:.1} GB) but only {:.1} GB of memory is available",
            peak as f64 / 1e9,
            model as f64 / 1e9,
            data_bytes as f64 / 1e9,
            available as f64 / 1e9
        )));
    }
    let announce = format!(
        "kernels: {} (CPU: {}; SLIDE_KERNELS=scalar|portable|avx512 overrides)\ndata: {} train / {} test samples, {features} features, {labels} labels (loaded in {:.1} s); model needs about {:.0} MB, the run at most {:.0} MB",
        slide::kernels::kernels().name,
        slide::kernels::cpu_features().join(" "),
        loaded.train.examples().len(),
        loaded.test.examples().len(),
        started.elapsed().as_secs_f64(),
        model as f64 / 1e6,
        peak as f64 / 1e6
    );
    // `predict` keeps standard output for its answers.
    match log {
        Log::Stdout => println!("{announce}"),
        Log::Stderr => eprintln!("{announce}"),
    }
    // What a checkpoint must match: the network to be evaluated, every setting to be resumed.
    let identity = checkpoint::Identity::of(&network_config, config.train.batch_size);
    let mut net = if restoring {
        Network::with_empty_tables(network_config)
    } else {
        Network::new(network_config)
    }
    .map_err(|e| input(e.into()))?;
    net.set_eval_precision(config.train.eval_precision)
        .map_err(|e| input(e.into()))?;
    Ok(Prepared {
        loaded,
        net,
        identity,
    })
}

/// A checkpoint being synced and renamed on its own thread (see
/// [`checkpoint::Unsynced::finish`]); dropping it waits for the thread, so that no way out
/// of the training loop leaves a checkpoint half finished.
struct Syncing(Option<std::thread::JoinHandle<anyhow::Result<std::path::PathBuf>>>);

impl Syncing {
    /// Waits for the checkpoint in flight, if any; its error, if it failed.
    fn wait(&mut self) -> anyhow::Result<()> {
        match self.0.take() {
            Some(thread) => thread
                .join()
                .map_err(|_| anyhow!("the thread finishing a checkpoint panicked"))?
                .map(drop),
            None => Ok(()),
        }
    }
}

impl Drop for Syncing {
    fn drop(&mut self) {
        if let Err(e) = self.wait() {
            eprintln!("warning: {e:#}");
        }
    }
}

/// `slide-train eval`: a checkpoint's metrics on the whole test set, or its first `samples`,
/// printed and returned with the seconds the evaluation took.
pub fn evaluate_checkpoint(
    config: &Config,
    path: &Path,
    mode: Mode,
    samples: Option<usize>,
) -> Result<(EvalStats, f64), Failure> {
    let Prepared {
        loaded,
        mut net,
        identity,
    } = prepare(config, true, Log::Stdout)?;
    checkpoint::load(path, &mut net, &identity, checkpoint::Require::Network)
        .map_err(Failure::Input)?;
    let test = loaded.test.examples();
    let all: Vec<usize> = (0..samples.unwrap_or(usize::MAX).min(test.len())).collect();
    let started = Instant::now();
    let mut ws = slide::Workspace::new();
    let e = net
        .evaluate(&mut ws, test, &all, mode)
        .map_err(|e| Failure::Training(e.into()))?;
    let seconds = started.elapsed().as_secs_f64();
    if loaded.multi_label {
        println!(
            "{}: step {}, {} test samples: P@1 {:.4}, P@3 {:.4}, P@5 {:.4} ({:.0} outputs scored per sample, {:.1} s)",
            path.display(),
            net.step(),
            e.samples,
            e.precision_at_1,
            e.precision_at_3,
            e.precision_at_5,
            e.active_outputs,
            seconds
        );
    } else {
        println!(
            "{}: step {}, {} test samples: accuracy {:.4} ({:.0} outputs scored per sample, {:.1} s)",
            path.display(),
            net.step(),
            e.samples,
            e.precision_at_1,
            e.active_outputs,
            seconds
        );
    }
    Ok((e, seconds))
}

/// Trains as `config` says, writing metrics and checkpoints under `out`; continues from the
/// checkpoint `resume` if given; `quiet` prints evaluations only. When `interrupt` becomes
/// non-zero (a signal handler stores the signal's number there), the run stops after the
/// step in progress, writes a checkpoint and returns [`Failure::Interrupted`].
pub fn run(
    config: &Config,
    out: &Path,
    quiet: bool,
    resume: Option<&Path>,
    interrupt: &AtomicUsize,
) -> Result<(), Failure> {
    let input = Failure::Input;
    let Prepared {
        loaded,
        mut net,
        identity,
    } = prepare(config, resume.is_some(), Log::Stdout)?;
    let Loaded {
        train,
        test,
        multi_label,
        ..
    } = loaded;
    let (train, test) = (train.examples(), test.examples());
    let mut start = Position { epoch: 1, batch: 0 };
    // A folder stands for the newest complete checkpoint in it.
    let newest;
    let resume = match resume {
        Some(dir) if dir.is_dir() => {
            newest = checkpoint::list(dir)
                .map_err(input)?
                .pop()
                .ok_or_else(|| input(anyhow!("{}: holds no checkpoint", dir.display())))?;
            Some(newest.as_path())
        }
        other => other,
    };
    if let Some(path) = resume {
        start = checkpoint::load(path, &mut net, &identity, checkpoint::Require::Everything)
            .map_err(input)?;
        println!(
            "resumed from {} at step {}, epoch {}",
            path.display(),
            net.step(),
            start.epoch
        );
    }
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create {}", out.display()))
        .map_err(input)?;
    let metrics_path = out.join(
        config
            .log
            .metrics
            .as_deref()
            .unwrap_or(Path::new("metrics.jsonl")),
    );
    let mut metrics = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(resume.is_some())
        .truncate(resume.is_none())
        .open(&metrics_path)
        .with_context(|| format!("cannot create {}", metrics_path.display()))
        .map_err(input)?;
    let checkpoint_dir = out.join(&config.checkpoint.dir);
    checkpoint::remove_stale_temporaries(&checkpoint_dir);
    // Checkpoints written and the seconds training waited for them.
    let checkpoint_time = std::cell::Cell::new((0usize, 0.0f64));
    // The latest checkpoint's sync and rename, running beside training (joined before the
    // next checkpoint is written, at the end, and on every way out of this function).
    let syncing = std::cell::RefCell::new(Syncing(None));
    // Writes a checkpoint; `durable`: waits until it is synced and in place (the run's last,
    // or one a message names) instead of finishing it beside the next steps.
    let save = |net: &Network,
                epoch: usize,
                batch: usize,
                durable: bool|
     -> Result<std::path::PathBuf, Failure> {
        // Never write a checkpoint that could not be trained on: it would replace a good one.
        if !net.is_finite() {
            return Err(Failure::Training(anyhow!(
                "step {}: parameters are no longer finite; training diverged (lower train.lr?); the last good checkpoint is the newest in {}",
                net.step(),
                checkpoint_dir.display()
            )));
        }
        let started = Instant::now();
        let mut syncing = syncing.borrow_mut();
        syncing.wait().map_err(Failure::Training)?;
        let written = checkpoint::write(&checkpoint_dir, net, Position { epoch, batch }, &identity)
            .map_err(Failure::Training)?;
        let path = written.path().to_path_buf();
        let keep_last = config.checkpoint.keep_last;
        if durable {
            written.finish(keep_last).map_err(Failure::Training)?;
        } else {
            syncing.0 = Some(std::thread::spawn(move || written.finish(keep_last)));
        }
        let (count, seconds) = checkpoint_time.get();
        checkpoint_time.set((count + 1, seconds + started.elapsed().as_secs_f64()));
        Ok(path)
    };

    let t = &config.train;
    let mut order: Vec<usize> = (0..train.len()).collect();
    let mut eval_order: Vec<usize> = (0..test.len()).collect();
    let eval_mode = t.eval_mode.mode();
    let mut stats = StepStats::default();
    let mut phases = slide::PhaseTimes::default();
    let training = Instant::now();
    let (mut samples, mut window_loss, mut window_steps) = (0usize, 0.0, 0usize);
    let mut window_rows: Vec<usize> = Vec::new();
    let mut last_eval: Option<EvalStats> = None;
    let mut last_lsh: Option<f64> = None;
    // Seconds spent evaluating and probing recall, which the training throughput excludes.
    let mut outside_training = 0.0;
    let sampled = net.layers().iter().any(|l| l.is_sampled());
    let output_sampled = net.layers().last().is_some_and(|l| l.is_sampled());
    let mut eval_seconds = 0.0;
    let report_every = (train.len() / t.batch_size / 10).max(1) as u64;
    let steps_per_epoch = train.len().div_ceil(t.batch_size) as u64;
    // The schedule spans the configured epochs; `max_steps` only stops the run early, so a
    // run stopped by it and resumed takes the same learning rates as one never stopped.
    let schedule_steps = steps_per_epoch * t.epochs as u64;
    let mut total_steps = schedule_steps;
    if t.max_steps > 0 {
        total_steps = total_steps.min(t.max_steps);
    }
    // A live bar on a terminal; plain lines when the output is a file or pipe, or --quiet.
    let bar = (!quiet && std::io::stdout().is_terminal()).then(|| {
        let bar = ProgressBar::new(total_steps);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} steps  {msg}  eta {eta}")
                .expect("valid template"),
        );
        bar.set_position(net.step());
        bar
    });
    let mut ws = slide::Workspace::new();
    let mut finished_at = (start.epoch, start.batch);
    let mut saved_at = net.step();
    'epochs: for epoch in start.epoch..=t.epochs {
        // Each epoch's order depends only on the seed and the epoch, so a resumed run replays
        // it exactly.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix64(t.seed ^ mix64(epoch as u64)));
        order.iter_mut().enumerate().for_each(|(i, o)| *o = i);
        for i in (1..order.len()).rev() {
            order.swap(i, rng.random_range(0..=i));
        }
        let batches = order.chunks(t.batch_size);
        let count = batches.len();
        let skip = if epoch == start.epoch { start.batch } else { 0 };
        for (b, batch) in batches.enumerate().skip(skip) {
            let this_step = net.step() + 1;
            let diverged = |what: String| {
                Failure::Training(anyhow!(
                    "step {this_step}: {what}; training stopped (lower train.lr?); the last good checkpoint is the newest in {}",
                    checkpoint_dir.display()
                ))
            };
            let lr = t.learning_rate(this_step, schedule_steps, epoch);
            net.set_learning_rate(lr)
                .map_err(|e| Failure::Training(e.into()))?;
            match net.train_step_with(&mut ws, train, batch, &mut stats) {
                Ok(()) => {}
                Err(e @ slide::SlideError::Diverged { .. }) => return Err(diverged(e.to_string())),
                Err(e) => return Err(Failure::Training(e.into())),
            }
            if !stats.loss.is_finite() {
                return Err(diverged(format!("the loss is {}", stats.loss)));
            }
            samples += batch.len();
            phases += stats.times;
            window_loss += stats.loss;
            window_steps += 1;
            window_rows.resize(stats.rows_touched.len(), 0);
            for (sum, &rows) in window_rows.iter_mut().zip(&stats.rows_touched) {
                *sum += rows;
            }
            let step = net.step();
            let end_of_epoch = b + 1 == count;
            let stopping = t.max_steps > 0 && step >= t.max_steps;
            let evaluate =
                end_of_epoch || stopping || (t.eval_every > 0 && step % t.eval_every == 0);
            if evaluate {
                let n = if t.eval_samples == 0 {
                    test.len()
                } else {
                    t.eval_samples.min(test.len())
                };
                // The evaluated sample depends only on the seed and the step (not on earlier
                // evaluations), so a resumed run evaluates the same samples.
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix64(t.seed ^ step));
                eval_order.iter_mut().enumerate().for_each(|(i, o)| *o = i);
                for i in 0..n.min(test.len().saturating_sub(1)) {
                    let j = rng.random_range(i..test.len());
                    eval_order.swap(i, j);
                }
                let started = Instant::now();
                let result = net
                    .evaluate(&mut ws, test, &eval_order[..n], eval_mode)
                    .map_err(|e| Failure::Training(e.into()))?;
                // The LSH-mode P@1 of the same samples beside the exact one: a model that
                // holds only under sampling shows here.
                last_lsh = if eval_mode != Mode::EvalLsh && output_sampled {
                    let lsh = net
                        .evaluate(&mut ws, test, &eval_order[..n], Mode::EvalLsh)
                        .map_err(|e| Failure::Training(e.into()))?;
                    Some(lsh.precision_at_1)
                } else {
                    None
                };
                last_eval = Some(result);
                eval_seconds = started.elapsed().as_secs_f64();
                outside_training += eval_seconds;
                if collapsed(&result) {
                    let message = format!(
                        "warning: step {step}: output {} is the top-1 prediction of {:.1}% of the test samples, more than twice the most frequent label's share ({:.1}%): the model is collapsing under exact scoring",
                        result.top1_output,
                        100.0 * result.top1_share,
                        100.0 * result.label_share
                    );
                    match &bar {
                        Some(bar) => bar.println(&message),
                        None => eprintln!("{message}"),
                    }
                }
            }
            // Retrieval recall on a few test samples (their labels forced in, as in
            // training) at every evaluation and every `recall_every` steps.
            let probe = sampled && (evaluate || (t.recall_every > 0 && step % t.recall_every == 0));
            let probe_started = Instant::now();
            let recall = if probe {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix64(t.seed ^ step ^ 0x7265));
                let probe: Vec<usize> = (0..RECALL_SAMPLES.min(test.len()))
                    .map(|_| rng.random_range(0..test.len()))
                    .filter(|&i| !test.labels(i).is_empty())
                    .collect();
                if probe.is_empty() {
                    None
                } else {
                    let r = net
                        .retrieval_recall(&mut ws, test, &probe, 10)
                        .map_err(|e| Failure::Training(e.into()))?;
                    Some(
                        r.iter()
                            .map(|r| {
                                r.map(|r| RecallRecord {
                                    top10: r.recall,
                                    random: r.random,
                                    samples: r.samples,
                                })
                            })
                            .collect::<Vec<_>>(),
                    )
                }
            } else {
                None
            };
            if probe {
                outside_training += probe_started.elapsed().as_secs_f64();
            }
            if evaluate || recall.is_some() || step % report_every == 0 {
                let seconds = training.elapsed().as_secs_f64();
                let eval = evaluate.then_some(last_eval).flatten();
                let record = Record {
                    step,
                    epoch,
                    seconds,
                    samples_per_second: samples as f64 / seconds,
                    train_seconds: seconds - outside_training,
                    train_samples_per_second: samples as f64
                        / (seconds - outside_training).max(1e-9),
                    loss: window_loss / window_steps as f64,
                    lr,
                    p_at_1: eval.map(|e| e.precision_at_1),
                    p_at_3: eval.filter(|_| multi_label).map(|e| e.precision_at_3),
                    p_at_5: eval.filter(|_| multi_label).map(|e| e.precision_at_5),
                    eval_seconds: eval.map(|_| eval_seconds),
                    p_at_1_lsh: eval.and(last_lsh),
                    top1_share: eval.map(|e| e.top1_share),
                    top1_output: eval.map(|e| e.top1_output),
                    label_share: eval.map(|e| e.label_share),
                    active_per_sample: stats.active_per_sample.clone(),
                    rows_touched: window_rows
                        .iter()
                        .map(|&sum| (sum as f64 / window_steps as f64).round() as usize)
                        .collect(),
                    active_sources: sources(&stats),
                    tables: occupancy(&net),
                    recall,
                    rss_mib: resident_mib(),
                    phase_seconds: phases.into(),
                    checkpoints: checkpoint_time.get().0,
                    checkpoint_seconds: checkpoint_time.get().1,
                };
                let line = serde_json::to_string(&record).expect("records serialise");
                writeln!(metrics, "{line}")
                    .with_context(|| format!("cannot write {}", metrics_path.display()))
                    .map_err(Failure::Training)?;
                match &bar {
                    Some(bar) if eval.is_some() => bar.println(format_record(&record, multi_label)),
                    Some(bar) => bar.set_message(format!(
                        "loss {:.4}  {:.0} samples/s{}",
                        record.loss,
                        record.samples_per_second,
                        sampling_summary(&record)
                    )),
                    None if !quiet || eval.is_some() => {
                        println!("{}", format_record(&record, multi_label))
                    }
                    None => {}
                }
                window_loss = 0.0;
                window_steps = 0;
                window_rows.fill(0);
            }
            if let Some(bar) = &bar {
                bar.set_position(step);
            }
            finished_at = (epoch, b + 1);
            if config.checkpoint.every > 0 && step % config.checkpoint.every == 0 {
                save(&net, epoch, b + 1, false)?;
                saved_at = step;
            }
            let signal = interrupt.load(Ordering::Relaxed);
            if signal != 0 {
                if let Some(bar) = &bar {
                    bar.finish_and_clear();
                }
                let path = save(&net, epoch, b + 1, true)?;
                return Err(Failure::Interrupted {
                    signal: signal as i32,
                    message: format!(
                        "interrupted at step {step} (epoch {epoch}); checkpoint {}; continue with --resume {}",
                        path.display(),
                        path.display()
                    ),
                });
            }
            if stopping {
                break 'epochs;
            }
        }
    }
    if config.checkpoint.at_end && (saved_at != net.step() || resume.is_none() && net.step() == 0) {
        save(&net, finished_at.0, finished_at.1, true)?;
    }
    // The last periodic checkpoint, if the run ended on one, is in place before the summary.
    let waited = Instant::now();
    syncing.borrow_mut().wait().map_err(Failure::Training)?;
    let (count, seconds) = checkpoint_time.get();
    checkpoint_time.set((count, seconds + waited.elapsed().as_secs_f64()));
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let seconds = training.elapsed().as_secs_f64();
    let eval = last_eval.unwrap_or_default();
    let (checkpoints, checkpoint_seconds) = checkpoint_time.get();
    println!(
        "done: {} steps, {samples} samples in {seconds:.1} s ({:.0} samples/s; training alone {:.1} s, {:.0} samples/s); {checkpoints} checkpoints in {checkpoint_seconds:.1} s; peak RSS {:.0} MiB; test {} {:.4}{}; metrics in {}",
        net.step(),
        samples as f64 / seconds.max(1e-9),
        seconds - outside_training,
        samples as f64 / (seconds - outside_training).max(1e-9),
        peak_resident_mib().unwrap_or(0.0),
        if multi_label { "P@1" } else { "accuracy" },
        eval.precision_at_1,
        if multi_label {
            format!(
                ", P@3 {:.4}, P@5 {:.4}",
                eval.precision_at_3, eval.precision_at_5
            )
        } else {
            String::new()
        },
        metrics_path.display()
    );
    Ok(())
}

/// Whether an evaluation shows a collapsed model: one output is the top-1 prediction of
/// more than twice the share of samples that the most frequent label is in (and of more
/// than 2% of them, so small test sets of rare labels do not raise it).
fn collapsed(e: &EvalStats) -> bool {
    e.samples > 0 && e.top1_share > 0.02 && e.top1_share > 2.0 * e.label_share
}

/// The last sampled layer's sources, occupancy and recall, for the progress line: e.g.
/// `  lsh: 96% from tables, 4% fill, buckets 41.2/164, recall@10 0.62 (random 0.002)`.
fn sampling_summary(r: &Record) -> String {
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
            ", buckets {:.1} mean / {} max, {:.0}% full",
            t.mean,
            t.max,
            100.0 * t.full_share
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

fn format_record(r: &Record, multi_label: bool) -> String {
    let mut line = format!(
        "step {:>6}  epoch {:>3}  {:>7.1} s  {:>7.0} samples/s (training {:.0})  loss {:.4}",
        r.step, r.epoch, r.seconds, r.samples_per_second, r.train_samples_per_second, r.loss
    );
    if let Some(p1) = r.p_at_1 {
        if multi_label {
            line += &format!(
                "  test P@1 {p1:.4}  P@3 {:.4}  P@5 {:.4}",
                r.p_at_3.unwrap_or(0.0),
                r.p_at_5.unwrap_or(0.0)
            );
        } else {
            line += &format!("  test accuracy {p1:.4}");
        }
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
    line + &sampling_summary(r)
}
