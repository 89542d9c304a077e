//! A run's reports: the metrics file, the progress bar or lines, and the window of steps
//! each record averages over.

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use slide::{EvalStats, Network, PhaseTimes, StepStats};

use super::metrics::{
    EvalRecord, RecallRecord, Record, format_record, occupancy, resident_mib, sampling_summary,
    sources, traffic,
};
use crate::config::Config;
use crate::failure::Failure;

/// An evaluation as a record reports it: the result, its seconds and the LSH-mode P@1 of
/// the same samples, if measured.
pub(super) struct Evaluated {
    pub(super) result: EvalStats,
    pub(super) seconds: f64,
    pub(super) lsh: Option<f64>,
}

/// Where a run reports, and what it has done since it started and since the last record.
pub(super) struct Reporter {
    metrics: File,
    path: PathBuf,
    /// A live bar on a terminal; `None`: plain lines (output to a file or pipe, or quiet).
    bar: Option<ProgressBar>,
    quiet: bool,
    /// Print no records at all (a library caller's `verbose = false`); warnings still go
    /// to standard error.
    pub(super) silent: bool,
    multi_label: bool,
    started: Instant,
    /// Samples trained since the run (this process) started.
    pub(super) samples: usize,
    /// Seconds spent evaluating and probing recall, which the training throughput excludes.
    pub(super) outside_training: f64,
    phases: PhaseTimes,
    /// The window since the last record: summed loss, steps, rows touched per layer.
    loss: f64,
    /// Bytes sent to the other ranks since the last record.
    sent: u64,
    steps: usize,
    rows: Vec<usize>,
}

impl Reporter {
    /// Creates `out` and opens the metrics file in it (appended to when `resumed`) and, on a terminal
    /// unless `quiet`, a progress bar over `total_steps` standing at `step`.
    pub(super) fn open(
        config: &Config,
        out: &Path,
        resumed: bool,
        quiet: bool,
        multi_label: bool,
        (step, total_steps): (u64, u64),
    ) -> Result<Self, Failure> {
        std::fs::create_dir_all(out)
            .with_context(|| format!("cannot create {}", out.display()))
            .map_err(Failure::Input)?;
        let path = config.log.metrics_path(out);
        let metrics = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(resumed)
            .truncate(!resumed)
            .open(&path)
            .with_context(|| format!("cannot create {}", path.display()))
            .map_err(Failure::Input)?;
        let bar = (!quiet && std::io::stdout().is_terminal()).then(|| {
            let bar = ProgressBar::new(total_steps);
            bar.set_style(
                ProgressStyle::with_template("{bar:40} {pos}/{len} steps  {msg}  eta {eta}")
                    .expect("valid template"),
            );
            bar.set_position(step);
            bar
        });
        Ok(Reporter {
            metrics,
            path,
            bar,
            quiet,
            silent: false,
            multi_label,
            started: Instant::now(),
            samples: 0,
            outside_training: 0.0,
            phases: PhaseTimes::default(),
            loss: 0.0,
            sent: 0,
            steps: 0,
            rows: Vec::new(),
        })
    }

    /// The metrics file.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Seconds since the run started.
    pub(super) fn seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Counts a training step of `samples` samples.
    pub(super) fn add(&mut self, stats: &StepStats, samples: usize) {
        self.samples += samples;
        self.phases += stats.times;
        self.loss += stats.loss;
        self.sent += stats.bytes_sent;
        self.steps += 1;
        self.rows.resize(stats.rows_touched.len(), 0);
        for (sum, &rows) in self.rows.iter_mut().zip(&stats.rows_touched) {
            *sum += rows;
        }
    }

    /// Prints a warning above the bar, or on stderr.
    pub(super) fn warn(&self, message: &str) {
        match &self.bar {
            Some(bar) => bar.println(message),
            None => eprintln!("{message}"),
        }
    }

    /// Writes a record of the steps since the last one (with `eval` if the step evaluated,
    /// `recall` if it probed) and shows it; starts a new window.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record(
        &mut self,
        net: &Network,
        (step, epoch, lr): (u64, usize, f32),
        stats: &StepStats,
        eval: Option<&Evaluated>,
        recall: Option<Vec<Option<RecallRecord>>>,
        (checkpoints, checkpoint_seconds): (usize, f64),
    ) -> Result<(), Failure> {
        let seconds = self.seconds();
        let training = (seconds - self.outside_training).max(1e-9);
        let multi = self.multi_label;
        let record = Record {
            step,
            epoch,
            seconds,
            samples_per_second: self.samples as f64 / seconds,
            train_seconds: seconds - self.outside_training,
            train_samples_per_second: self.samples as f64 / training,
            loss: self.loss / self.steps as f64,
            lr,
            eval: eval.map(|e| EvalRecord {
                metrics: e.result.metrics,
                multi_label: multi,
            }),
            eval_seconds: eval.map(|e| e.seconds),
            p_at_1_lsh: eval.and_then(|e| e.lsh),
            top1_share: eval.map(|e| e.result.top1_share),
            top1_output: eval.map(|e| e.result.top1_output),
            label_share: eval.map(|e| e.result.label_share),
            active_per_sample: stats.active_per_sample.clone(),
            rows_touched: self
                .rows
                .iter()
                .map(|&sum| (sum as f64 / self.steps as f64).round() as usize)
                .collect(),
            active_sources: sources(stats),
            tables: occupancy(net),
            recall,
            rss_mib: resident_mib(),
            phase_seconds: self.phases.into(),
            checkpoints,
            checkpoint_seconds,
            sent_kib_per_step: (net.communicator().size() > 1)
                .then(|| self.sent as f64 / 1024.0 / self.steps.max(1) as f64),
        };
        let line = serde_json::to_string(&record).expect("records serialise");
        writeln!(self.metrics, "{line}")
            .with_context(|| format!("cannot write {}", self.path.display()))
            .map_err(Failure::Training)?;
        match &self.bar {
            _ if self.silent => {}
            Some(bar) if eval.is_some() => bar.println(format_record(&record, multi)),
            Some(bar) => bar.set_message(format!(
                "loss {:.4}  {:.0} samples/s{}{}",
                record.loss,
                record.samples_per_second,
                traffic(&record),
                sampling_summary(&record)
            )),
            None if !self.quiet || eval.is_some() => println!("{}", format_record(&record, multi)),
            None => {}
        }
        self.loss = 0.0;
        self.sent = 0;
        self.steps = 0;
        self.rows.fill(0);
        Ok(())
    }

    /// Moves the bar to `step`.
    pub(super) fn position(&self, step: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(step);
        }
    }

    /// Clears the bar.
    pub(super) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// The run's last line: steps, samples, time with and without evaluations, checkpoints,
/// peak memory and the last evaluation (none said when there was none).
pub(super) fn summary(
    net: &Network,
    report: &Reporter,
    saver: &super::saver::Saver,
    eval: Option<&EvalStats>,
    multi_label: bool,
) {
    let seconds = report.seconds();
    let (samples, training) = (report.samples, seconds - report.outside_training);
    let test = match eval {
        Some(e) => format!(
            "test {}",
            crate::evaluate::metrics_text(&e.metrics, multi_label, ", ")
        ),
        None => "no evaluation".to_string(),
    };
    let peak = super::metrics::peak_resident_mib()
        .map_or("unknown here".into(), |m| format!("{m:.0} MiB"));
    println!(
        "done: {} steps, {samples} samples in {seconds:.1} s ({:.0} samples/s; training alone {training:.1} s, {:.0} samples/s); {} checkpoints in {:.1} s; peak RSS {peak}; {test}; metrics in {}",
        net.step(),
        samples as f64 / seconds.max(1e-9),
        samples as f64 / training.max(1e-9),
        saver.count,
        saver.seconds,
        report.path().display()
    );
}
