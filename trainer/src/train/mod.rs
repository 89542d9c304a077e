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
use slide::{EvalStats, Network, StepStats};

use crate::checkpoint::{self, Position};
use crate::config::Config;
use crate::data::Loaded;

mod evaluation;
mod metrics;
mod prepare;

pub use evaluation::evaluate_checkpoint;
pub use metrics::peak_resident_mib;
use metrics::{Record, format_record, occupancy, resident_mib, sampling_summary, sources};
pub(crate) use prepare::{Log, restored};
use prepare::{Prepared, prepare};

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
    let schedule = t.schedule();
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
    let steps_per_epoch = t.steps_per_epoch(train.len());
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
            let lr = schedule.rate(this_step, schedule_steps, epoch);
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
                let started = Instant::now();
                let (result, lsh) = evaluation::periodic(
                    &net,
                    &mut ws,
                    test,
                    &mut eval_order,
                    t,
                    step,
                    eval_mode,
                    output_sampled,
                )?;
                last_lsh = lsh;
                last_eval = Some(result);
                eval_seconds = started.elapsed().as_secs_f64();
                outside_training += eval_seconds;
                if let Some(message) = evaluation::collapse_warning(step, &result) {
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
                evaluation::recall_probe(&net, &mut ws, test, t.seed, step)?
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
