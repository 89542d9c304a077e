//! The training loop: epochs of shuffled batches, periodic evaluation, metrics, checkpoints,
//! and a stop with a message when the loss diverges.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use slide::{EvalStats, Examples, Network, Propensities, StepStats, Workspace};

use crate::checkpoint::{self, Position};
use crate::config::Config;
use crate::data::Loaded;
use crate::failure::Failure;

mod continued;
pub use continued::Start;
mod evaluation;
mod metrics;
pub(crate) mod prepare;
mod ranks;
mod report;
mod saver;
mod steps;

pub use metrics::peak_resident_mib;
use prepare::{Log, Prepared};
use ranks::{newest_in, rank_folder, ranks_checkpoints};
use report::{Reporter, summary};
use saver::Saver;
use steps::{Rate, shuffle, train_step};

/// Trains as `config` says, writing metrics and checkpoints under `out`; continues from the
/// checkpoint `start` names (see [`Start`]); `quiet` prints evaluations only. When `interrupt` becomes
/// non-zero (a signal handler stores the signal's number there), the run stops after the
/// step in progress, writes a checkpoint and returns [`Failure::Interrupted`].
pub fn run(
    config: &Config,
    out: &Path,
    quiet: bool,
    start: Start<'_>,
    interrupt: &AtomicUsize,
) -> Result<(), Failure> {
    let started = std::time::Instant::now();
    let loaded = crate::data::load(&config.data).map_err(Failure::Input)?;
    let talk = if quiet { Talk::Evaluations } else { Talk::All };
    let trained = train((config, loaded, started), out, talk, start, interrupt)?;
    match trained.interrupted {
        Some(failure) => Err(failure),
        None => Ok(()),
    }
}

/// What a run prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Talk {
    /// The data and model announcement, progress and every metrics record, the summary.
    All,
    /// The announcement, the evaluations and the summary (`--quiet`).
    Evaluations,
    /// Nothing but warnings (a library caller that turned progress off).
    Nothing,
}

/// What [`train`] leaves: the network, its last evaluation, and, when a signal stopped the
/// run, the [`Failure::Interrupted`] that says where.
pub struct Trained {
    /// The trained network (this rank's part of it).
    pub net: Network,
    /// The last periodic evaluation (`None` when the run evaluated nothing, e.g. stopped
    /// before its first).
    pub last_eval: Option<EvalStats>,
    /// Set when a signal stopped the run after a step (a checkpoint was written).
    pub interrupted: Option<Failure>,
}

/// [`run`] on data already in memory (`loaded`, read since `started`, or built by a
/// program), returning the network: the loop of `slide-train`, for library callers such
/// as the Python package. `config`'s data section is not read.
pub fn train(
    (config, loaded, started): (&Config, Loaded, std::time::Instant),
    out: &Path,
    talk: Talk,
    start: Start<'_>,
    interrupt: &AtomicUsize,
) -> Result<Trained, Failure> {
    let resume = match start {
        Start::Resume(path) => Some(path),
        _ => None,
    };
    // One process, or the ranks of an MPI job: every rank but the first works silently
    // and writes its metrics into a folder of its own; each writes its own checkpoints.
    let comm = crate::world::connect().map_err(Failure::Input)?;
    let (rank, ranks) = (comm.rank(), comm.size());
    let log = if talk == Talk::Nothing {
        Log::Quiet
    } else {
        Log::Stdout
    };
    let (
        Prepared {
            loaded,
            mut net,
            identity,
        },
        untrained,
    ) = continued::prepare(
        config,
        (loaded, started),
        start,
        (log, talk != Talk::Nothing),
        comm,
    )?;
    let quiet = talk != Talk::All || rank > 0;
    let rank_out = out.join(format!("rank-{rank}"));
    let (out, checkpoints) = match ranks {
        1 => (out, out.join(&config.checkpoint.dir)),
        _ => (
            if rank == 0 { out } else { rank_out.as_path() },
            out.join(&config.checkpoint.dir)
                .join(rank_folder(rank, ranks)),
        ),
    };
    let propensities = loaded
        .propensities(config.train.propensity)
        .map_err(|e| Failure::Input(e.into()))?;
    let Loaded {
        train,
        test,
        multi_label,
        replay,
        ..
    } = loaded;
    if let Some((replay, own)) = &replay {
        net.prepare_heads(&crate::data::Joined(train.examples(), *own, replay));
    }
    let resume = resume
        .map(|path| newest_in(&ranks_checkpoints(path, rank, ranks)?))
        .transpose()?;
    let start = resumed(resume.as_deref(), &mut net, &identity)?;
    let t = &config.train;
    // The schedule spans the configured epochs; `max_steps` only stops the run early, so a
    // run stopped by it and resumed takes the same learning rates as one never stopped.
    let per_epoch = t.steps_per_epoch(train.examples().len());
    let schedule_steps = per_epoch * t.epochs as u64;
    let head_steps = per_epoch * net.heads().alone_epochs() as u64;
    let total_steps = match t.max_steps {
        0 => schedule_steps + head_steps,
        max => (schedule_steps + head_steps).min(max),
    };
    let steps = (net.step(), total_steps);
    let mut report = Reporter::open(config, out, resume.is_some(), quiet, multi_label, steps)?;
    report.silent = talk == Talk::Nothing;
    let saver = Saver::new(checkpoints, &identity, config.checkpoint.keep_last);
    let mut run = Loop::new(
        config,
        net,
        (train.examples(), test.examples()),
        report,
        saver,
    );
    run.schedule_steps = schedule_steps;
    run.head_steps = head_steps;
    run.propensities = propensities.as_ref();
    run.untrained = untrained;
    let (finished_at, interrupted) = run.epochs(start, interrupt)?;
    let Loop {
        net,
        report,
        mut saver,
        saved_at,
        last_eval,
        ..
    } = run;
    if interrupted.is_some() {
        return Ok(Trained {
            net,
            last_eval,
            interrupted,
        });
    }
    if config.checkpoint.at_end && (saved_at != net.step() || resume.is_none() && net.step() == 0) {
        saver.save(&net, finished_at.0, finished_at.1, true)?;
    }
    // The last periodic checkpoint, if the run ended on one, is in place before the summary.
    saver.wait()?;
    report.finish();
    if rank == 0 && talk != Talk::Nothing {
        summary(&net, &report, &saver, last_eval.as_ref(), multi_label);
    }
    Ok(Trained {
        net,
        last_eval,
        interrupted: None,
    })
}

/// What the training loop carries from step to step.
struct Loop<'a> {
    config: &'a Config,
    net: Network,
    ws: Workspace,
    train: &'a dyn Examples,
    test: &'a dyn Examples,
    /// The training set's label propensities (multi-label data), for PSP@k and PSnDCG@k.
    propensities: Option<&'a Propensities>,
    report: Reporter,
    saver: Saver<'a>,
    stats: StepStats,
    /// The test samples' order, the evaluated ones in front.
    eval_order: Vec<usize>,
    last_eval: Option<EvalStats>,
    /// The step of the latest checkpoint.
    saved_at: u64,
    /// Steps the learning-rate schedule spans: the network's epochs.
    schedule_steps: u64,
    /// Steps of the heads' own epochs, after the network's.
    head_steps: u64,
    /// A metrics record at least every this many steps.
    report_every: u64,
    /// The first output whose row nothing has trained (see `continued::prepare`).
    untrained: Option<usize>,
    /// Whether some layer samples by LSH (recall is probed), and whether the output layer
    /// does (an LSH-mode P@1 is reported beside the exact one).
    sampled: bool,
    output_sampled: bool,
}

impl<'a> Loop<'a> {
    fn new(
        config: &'a Config,
        net: Network,
        (train, test): (&'a dyn Examples, &'a dyn Examples),
        report: Reporter,
        saver: Saver<'a>,
    ) -> Self {
        let saved_at = net.step();
        let sampled = net.layers().iter().any(|l| l.is_sampled());
        let output_sampled = net.layers().last().is_some_and(|l| l.is_sampled());
        Loop {
            config,
            net,
            ws: Workspace::new(),
            train,
            test,
            propensities: None,
            report,
            saver,
            stats: StepStats::default(),
            eval_order: (0..test.len()).collect(),
            last_eval: None,
            saved_at,
            schedule_steps: 0,
            head_steps: 0,
            report_every: (config.train.steps_per_epoch(train.len()) / 10).max(1),
            untrained: None,
            sampled,
            output_sampled,
        }
    }

    /// Trains the epochs from `start` on; returns the epoch and batch it finished at, and
    /// the [`Failure::Interrupted`] of a signal that stopped it.
    fn epochs(
        &mut self,
        start: Position,
        interrupt: &AtomicUsize,
    ) -> Result<((usize, usize), Option<Failure>), Failure> {
        // Untrained output rows (a new network's, a grown one's new labels) start at their
        // labels' centroids where the config says so (`init = { centroids = ... }`), within
        // the training time.
        if let Some(first) = self.untrained {
            let (net, ws) = (&mut self.net, &mut self.ws);
            net.warm_start(ws, self.train, first)
                .map_err(|e| Failure::Training(e.into()))?;
        }
        let t = &self.config.train;
        let mut order: Vec<usize> = (0..self.train.len()).collect();
        let mut finished_at = (start.epoch, start.batch);
        let head_epochs = self.net.heads().alone_epochs();
        for epoch in start.epoch..=t.epochs + head_epochs {
            shuffle(&mut order, t.seed, epoch);
            let batches = order.chunks(t.batch(order.len()));
            let count = batches.len();
            let skip = if epoch == start.epoch { start.batch } else { 0 };
            for (b, batch) in batches.enumerate().skip(skip) {
                let (net, ws, stats) = (&mut self.net, &mut self.ws, &mut self.stats);
                // After the network's epochs, the heads' own (a head's `epochs`).
                let rate = match epoch > t.epochs {
                    true => Rate::Heads {
                        step: net.step().saturating_sub(self.schedule_steps),
                        steps: self.head_steps,
                    },
                    false => Rate::Network(t.schedule.rate(
                        t.adam.lr,
                        net.step() + 1,
                        self.schedule_steps,
                        epoch,
                    )),
                };
                train_step(net, ws, self.train, batch, rate, stats, self.saver.dir())?;
                // The network's rate in the metrics; 0 while the head trains alone.
                let lr = match rate {
                    Rate::Network(lr) => lr,
                    Rate::Heads { .. } => 0.0,
                };
                self.report.add(&self.stats, batch.len());
                finished_at = (epoch, b + 1);
                match self.after_step(finished_at, b + 1 == count, lr, interrupt)? {
                    Stop::No => {}
                    Stop::MaxSteps => return Ok((finished_at, None)),
                    Stop::Signal(failure) => return Ok((finished_at, Some(failure))),
                }
            }
        }
        Ok((finished_at, None))
    }

    /// After the step that finished batch `at.1` of epoch `at.0` (the epoch's last when
    /// `last_of_epoch`) at learning rate `lr`: the evaluation, recall probe and metrics
    /// record when due, a periodic checkpoint, and whether the run stops here.
    fn after_step(
        &mut self,
        at: (usize, usize),
        last_of_epoch: bool,
        lr: f32,
        interrupt: &AtomicUsize,
    ) -> Result<Stop, Failure> {
        let (t, net) = (&self.config.train, &self.net);
        let step = net.step();
        let stopping = t.max_steps > 0 && step >= t.max_steps;
        // Nothing to evaluate on (a library caller without validation data): no figures,
        // rather than zeros that read as a model that scores nothing.
        let due = last_of_epoch || stopping || (t.eval_every > 0 && step % t.eval_every == 0);
        let evaluate = due && !self.test.is_empty();
        let eval = if evaluate {
            let (ws, order) = (&mut self.ws, &mut self.eval_order);
            let at = (step, self.output_sampled);
            let test = (self.test, self.propensities);
            let result = evaluation::periodic(net, ws, test, order, t, at, &mut self.report)?;
            self.last_eval = Some(result.result);
            Some(result)
        } else {
            None
        };
        // Retrieval recall on a few test samples (their labels forced in, as in
        // training) at every evaluation and every `recall_every` steps.
        let probe =
            self.sampled && (evaluate || (t.recall_every > 0 && step % t.recall_every == 0));
        let recall = if probe {
            evaluation::recall_probe(net, &mut self.ws, self.test, t.seed, step, &mut self.report)?
        } else {
            None
        };
        if evaluate || recall.is_some() || step % self.report_every == 0 {
            let saved = (self.saver.count, self.saver.seconds);
            let at = (step, at.0, lr);
            self.report
                .record(net, at, &self.stats, eval.as_ref(), recall, saved)?;
        }
        self.report.position(step);
        let every = self.config.checkpoint.every;
        if every > 0 && step % every == 0 {
            self.saver.save(net, at.0, at.1, false)?;
            self.saved_at = step;
        }
        let signal = agreed_signal(net, interrupt)?;
        if signal != 0 {
            self.report.finish();
            let path = self.saver.save(net, at.0, at.1, true)?;
            return Ok(Stop::Signal(interrupted(signal, step, at.0, &path)));
        }
        Ok(if stopping { Stop::MaxSteps } else { Stop::No })
    }
}

/// Whether the loop stops after a step.
enum Stop {
    No,
    /// `train.max_steps` reached.
    MaxSteps,
    /// A signal arrived: the checkpoint is written; the failure says where.
    Signal(Failure),
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
