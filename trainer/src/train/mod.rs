//! The training loop: epochs of shuffled batches, periodic evaluation, metrics, checkpoints,
//! and a stop with a message when the loss diverges.

use slide::lsh::mix64;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::anyhow;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use slide::{EvalStats, Network, StepStats};

use crate::checkpoint::{self, Position};
use crate::config::Config;
use crate::data::Loaded;

mod evaluation;
mod metrics;
mod prepare;
mod report;
mod saver;

pub use evaluation::evaluate_checkpoint;
pub use metrics::peak_resident_mib;
pub(crate) use prepare::{Log, restored};
use prepare::{Prepared, prepare};
use report::Reporter;
use saver::Saver;

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
    // One process, or the ranks of an MPI job: every rank but the first works silently
    // and writes its metrics into a folder of its own; each writes its own checkpoints.
    let comm = crate::world::connect().map_err(Failure::Input)?;
    let (rank, ranks) = (comm.rank(), comm.size());
    let Prepared {
        loaded,
        mut net,
        identity,
    } = prepare(config, resume.is_some(), Log::Stdout, comm)?;
    let quiet = quiet || rank > 0;
    let rank_out = out.join(format!("rank-{rank}"));
    let (out, checkpoints) = match ranks {
        1 => (out, out.join(&config.checkpoint.dir)),
        _ => (
            if rank == 0 { out } else { rank_out.as_path() },
            out.join(&config.checkpoint.dir)
                .join(rank_folder(rank, ranks)),
        ),
    };
    let Loaded {
        train,
        test,
        multi_label,
        ..
    } = loaded;
    let (train, test) = (train.examples(), test.examples());
    let resume = resume
        .map(|path| newest_in(&ranks_checkpoints(path, rank, ranks)?))
        .transpose()?;
    let start = resumed(resume.as_deref(), &mut net, &identity)?;
    let t = &config.train;
    let steps_per_epoch = t.steps_per_epoch(train.len());
    // The schedule spans the configured epochs; `max_steps` only stops the run early, so a
    // run stopped by it and resumed takes the same learning rates as one never stopped.
    let schedule_steps = steps_per_epoch * t.epochs as u64;
    let total_steps = match t.max_steps {
        0 => schedule_steps,
        max => schedule_steps.min(max),
    };
    let steps = (net.step(), total_steps);
    let mut report = Reporter::open(config, out, resume.is_some(), quiet, multi_label, steps)?;
    let mut saver = Saver::new(checkpoints, &identity, config.checkpoint.keep_last);
    let schedule = t.schedule();
    let mut order: Vec<usize> = (0..train.len()).collect();
    let mut eval_order: Vec<usize> = (0..test.len()).collect();
    let mut stats = StepStats::default();
    let mut last_eval: Option<EvalStats> = None;
    let sampled = net.layers().iter().any(|l| l.is_sampled());
    let output_sampled = net.layers().last().is_some_and(|l| l.is_sampled());
    let report_every = (train.len() / t.batch_size / 10).max(1) as u64;
    let mut ws = slide::Workspace::new();
    let (mut finished_at, mut saved_at) = ((start.epoch, start.batch), net.step());
    'epochs: for epoch in start.epoch..=t.epochs {
        shuffle(&mut order, t.seed, epoch);
        let batches = order.chunks(t.batch_size);
        let count = batches.len();
        let skip = if epoch == start.epoch { start.batch } else { 0 };
        for (b, batch) in batches.enumerate().skip(skip) {
            let lr = schedule.rate(net.step() + 1, schedule_steps, epoch);
            train_step(&mut net, &mut ws, train, batch, lr, &mut stats, saver.dir())?;
            report.add(&stats, batch.len());
            let step = net.step();
            let stopping = t.max_steps > 0 && step >= t.max_steps;
            let evaluate =
                b + 1 == count || stopping || (t.eval_every > 0 && step % t.eval_every == 0);
            let eval = if evaluate {
                let result = evaluation::periodic(
                    &net,
                    &mut ws,
                    test,
                    &mut eval_order,
                    t,
                    step,
                    output_sampled,
                    &mut report,
                )?;
                last_eval = Some(result.result);
                Some(result)
            } else {
                None
            };
            // Retrieval recall on a few test samples (their labels forced in, as in
            // training) at every evaluation and every `recall_every` steps.
            let probe = sampled && (evaluate || (t.recall_every > 0 && step % t.recall_every == 0));
            let recall = if probe {
                evaluation::recall_probe(&net, &mut ws, test, t.seed, step, &mut report)?
            } else {
                None
            };
            if evaluate || recall.is_some() || step % report_every == 0 {
                let at = (step, epoch, lr);
                let saved = (saver.count, saver.seconds);
                report.record(&net, at, &stats, eval.as_ref(), recall, saved)?;
            }
            report.position(step);
            finished_at = (epoch, b + 1);
            if config.checkpoint.every > 0 && step % config.checkpoint.every == 0 {
                saver.save(&net, epoch, b + 1, false)?;
                saved_at = step;
            }
            let signal = agreed_signal(&net, interrupt)?;
            if signal != 0 {
                report.finish();
                let path = saver.save(&net, epoch, b + 1, true)?;
                return Err(interrupted(signal, step, epoch, &path));
            }
            if stopping {
                break 'epochs;
            }
        }
    }
    if config.checkpoint.at_end && (saved_at != net.step() || resume.is_none() && net.step() == 0) {
        saver.save(&net, finished_at.0, finished_at.1, true)?;
    }
    // The last periodic checkpoint, if the run ended on one, is in place before the summary.
    saver.wait()?;
    report.finish();
    if rank > 0 {
        return Ok(());
    }
    summary(
        &net,
        &report,
        &saver,
        last_eval.unwrap_or_default(),
        multi_label,
    );
    Ok(())
}

/// The signal that stops the run after this step, if any: with several ranks the first
/// non-zero of every rank's (each gets the signal at its own moment, and all must stop
/// after the same step).
fn agreed_signal(net: &Network, interrupt: &AtomicUsize) -> Result<usize, Failure> {
    let signal = interrupt.load(Ordering::Relaxed);
    let comm = net.communicator();
    if comm.size() == 1 {
        return Ok(signal);
    }
    let mut every = Vec::new();
    comm.all_gather(&[signal as f32], &mut every)
        .map_err(|e| Failure::Training(e.into()))?;
    Ok(every
        .iter()
        .map(|&s| s as usize)
        .find(|&s| s != 0)
        .unwrap_or(0))
}

/// The folder of rank `rank` of `ranks` inside a run's checkpoint folder.
fn rank_folder(rank: usize, ranks: usize) -> String {
    format!("rank-{rank}-of-{ranks}")
}

/// Where rank `rank` of `ranks` reads its checkpoint, given `--resume path` or
/// `--checkpoint path`: with several ranks its own folder inside `path`; a folder that
/// holds another number of ranks' checkpoints is refused, naming how many.
pub(crate) fn ranks_checkpoints(
    path: &Path,
    rank: usize,
    ranks: usize,
) -> Result<PathBuf, Failure> {
    let written = |dir: &Path| -> Option<usize> {
        std::fs::read_dir(dir).ok()?.flatten().find_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            name.strip_prefix("rank-")?
                .split_once("-of-")?
                .1
                .parse()
                .ok()
        })
    };
    let mine = path.join(rank_folder(rank, ranks));
    if ranks > 1 && mine.is_dir() {
        return Ok(mine);
    }
    match written(path) {
        Some(other) if other != ranks => Err(Failure::Input(anyhow!(
            "{}: holds the checkpoints of a run on {other} ranks; this run has {ranks}: resume it with `mpirun -n {other}` (a build with --features mpi)",
            path.display()
        ))),
        _ if ranks > 1 => Err(Failure::Input(anyhow!(
            "{}: a run on {ranks} ranks reads its checkpoints from the run's checkpoint folder, which holds {}",
            path.display(),
            rank_folder(rank, ranks)
        ))),
        _ => Ok(path.to_path_buf()),
    }
}

/// How a run stopped by signal `signal` after step `step` of epoch `epoch` and the
/// checkpoint `path` ends.
fn interrupted(signal: usize, step: u64, epoch: usize, path: &Path) -> Failure {
    let path = path.display();
    Failure::Interrupted {
        signal: signal as i32,
        message: format!(
            "interrupted at step {step} (epoch {epoch}); checkpoint {path}; continue with --resume {path}"
        ),
    }
}

/// `path`, or the newest complete checkpoint in it when it is a folder.
/// Where the run starts: the beginning, or where the checkpoint `resume` (loaded into
/// `net`) left off.
fn resumed(
    resume: Option<&Path>,
    net: &mut Network,
    identity: &checkpoint::Identity,
) -> Result<Position, Failure> {
    let Some(path) = resume else {
        return Ok(Position { epoch: 1, batch: 0 });
    };
    let start = checkpoint::load(path, net, identity, checkpoint::Require::Everything)
        .map_err(Failure::Input)?;
    println!(
        "resumed from {} at step {}, epoch {}",
        path.display(),
        net.step(),
        start.epoch
    );
    Ok(start)
}

pub(crate) fn newest_in(path: &Path) -> Result<std::path::PathBuf, Failure> {
    if !path.is_dir() {
        return Ok(path.to_path_buf());
    }
    checkpoint::list(path)
        .map_err(Failure::Input)?
        .pop()
        .ok_or_else(|| Failure::Input(anyhow!("{}: holds no checkpoint", path.display())))
}

/// `order` as the permutation of epoch `epoch`: it depends only on the seed and the epoch,
/// so a resumed run replays it exactly.
fn shuffle(order: &mut [usize], seed: u64, epoch: usize) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix64(seed ^ mix64(epoch as u64)));
    order.iter_mut().enumerate().for_each(|(i, o)| *o = i);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
}

/// One training step of `batch` at learning rate `lr`; a diverging step stops the run with
/// a message naming the step and the checkpoint folder.
fn train_step(
    net: &mut Network,
    ws: &mut slide::Workspace,
    train: &dyn slide::Examples,
    batch: &[usize],
    lr: f32,
    stats: &mut StepStats,
    checkpoints: &Path,
) -> Result<(), Failure> {
    let this_step = net.step() + 1;
    let diverged = |what: String| {
        Failure::Training(anyhow!(
            "step {this_step}: {what}; training stopped (lower train.lr?); the last good checkpoint is the newest in {}",
            checkpoints.display()
        ))
    };
    net.set_learning_rate(lr)
        .map_err(|e| Failure::Training(e.into()))?;
    match net.train_step_with(ws, train, batch, stats) {
        Ok(()) => {}
        Err(e @ slide::SlideError::Diverged { .. }) => return Err(diverged(e.to_string())),
        Err(e) => return Err(Failure::Training(e.into())),
    }
    if !stats.loss.is_finite() {
        return Err(diverged(format!("the loss is {}", stats.loss)));
    }
    Ok(())
}

/// The run's last line: steps, samples, time with and without evaluations, checkpoints,
/// peak memory and the last evaluation.
fn summary(net: &Network, report: &Reporter, saver: &Saver, eval: EvalStats, multi_label: bool) {
    let seconds = report.seconds();
    let (samples, training) = (report.samples, seconds - report.outside_training);
    println!(
        "done: {} steps, {samples} samples in {seconds:.1} s ({:.0} samples/s; training alone {training:.1} s, {:.0} samples/s); {} checkpoints in {:.1} s; peak RSS {:.0} MiB; test {} {:.4}{}; metrics in {}",
        net.step(),
        samples as f64 / seconds.max(1e-9),
        samples as f64 / training.max(1e-9),
        saver.count,
        saver.seconds,
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
        report.path().display()
    );
}
