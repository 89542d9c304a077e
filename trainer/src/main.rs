//! `slide-train`: trains a slide network from a TOML config, evaluates checkpoints, and
//! generates extreme-classification data.
//!
//! ```text
//! slide-train --config configs/quickstart.toml [--set train.epochs=2] [--threads 2]
//!             [--out runs/quickstart] [--quiet] [--resume CKPT | --init-from CKPT]
//! slide-train eval --config FILE --checkpoint CKPT [--mode exact|lsh|dense]
//! slide-train predict --config FILE --checkpoint CKPT [--top-k K] [--out FILE] [--mode exact|lsh|dense]
//! slide-train gen-data --preset amazon670k --out DIR [--scale 0.05] [--seed 1] [--train N] [--test N] [--labels N]
//! slide-train plot runs/latest/metrics.jsonl --out curve.png
//! ```
//!
//! Exit status: 0 on success, 2 for a bad command line, config, data file or checkpoint
//! (one line on stderr says what and where), 1 when training itself fails (e.g. the loss
//! diverges).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize};

use clap::{Args, Parser, Subcommand};
use slide_trainer::failure::Failure;
use slide_trainer::{config, evaluate, generate, plot, predict, train};

/// Train SLIDE networks (LSH-sampled sparse layers) from TOML configs.
#[derive(Debug, Parser)]
#[command(
    name = "slide-train",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    train: TrainArgs,
}

#[derive(Debug, Args)]
struct TrainArgs {
    /// The config file; a bare name such as `quickstart.toml` is also looked up in `configs/`.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Override a config value, e.g. `--set train.lr=0.001` (repeatable; values are TOML).
    #[arg(long = "set", value_name = "SECTION.KEY=VALUE")]
    overrides: Vec<String>,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Folder for the metrics file and checkpoints (created if missing).
    #[arg(long, value_name = "DIR", default_value = "runs/latest")]
    out: PathBuf,
    /// Print only the evaluation lines and the final result.
    #[arg(long)]
    quiet: bool,
    /// Continue from this checkpoint (written by a run of the same config), or from the
    /// newest complete checkpoint in this folder.
    #[arg(long, value_name = "CKPT|DIR")]
    resume: Option<PathBuf>,
    /// Start a new run (this config's data, epochs and schedule) from a trained model's
    /// checkpoint; labels the training data adds grow the output layer.
    #[arg(long, value_name = "CKPT", conflicts_with = "resume")]
    init_from: Option<PathBuf>,
}

/// What `eval` and `predict` score: a checkpoint, the config it was trained with, and how.
#[derive(Debug, Args)]
struct ScoringArgs {
    /// The config the checkpoint was trained with.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Override a config value (as for training).
    #[arg(long = "set", value_name = "SECTION.KEY=VALUE")]
    overrides: Vec<String>,
    /// The checkpoint file.
    #[arg(long, value_name = "CKPT")]
    checkpoint: PathBuf,
    /// Which neurons to compute: every output (exact), the outputs the LSH tables pick
    /// (lsh), or every neuron of every layer (dense). Default: the config's
    /// `train.eval_mode` (itself `exact` unless set).
    #[arg(long, value_parser = eval_mode)]
    mode: Option<slide::Mode>,
    /// Only the first N test samples (default: all).
    #[arg(long, value_name = "N")]
    samples: Option<usize>,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
}

/// `--mode`: an evaluation mode by name (exact, lsh or dense).
fn eval_mode(name: &str) -> Result<slide::Mode, String> {
    name.parse().map_err(|e: slide::SlideError| e.to_string())
}

impl ScoringArgs {
    /// The config with its overrides, read and checked.
    fn load(&self) -> Result<config::Config, Failure> {
        config::load(&config::locate(&self.config), &self.overrides).map_err(Failure::Input)
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Evaluate a checkpoint on the config's test set.
    Eval {
        #[command(flatten)]
        scoring: ScoringArgs,
    },
    /// Write a checkpoint's best outputs for every sample of the config's test file: one
    /// line per sample, `output:logit` pairs best first (point `data.test` at the file to
    /// predict with `--set`).
    Predict {
        #[command(flatten)]
        scoring: ScoringArgs,
        /// Outputs per sample (at least 1, at most the label count): 5 for P@k, tens to
        /// hundreds for a re-ranker's shortlist.
        #[arg(long, value_name = "K", default_value_t = 5)]
        top_k: usize,
        /// The file to write (default: standard output).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Draw training loss and test P@1 against steps and time from a metrics file (PNG).
    Plot {
        /// A metrics file written by a training run (JSON lines).
        metrics: PathBuf,
        /// The PNG to write.
        #[arg(long, value_name = "PNG", default_value = "curve.png")]
        out: PathBuf,
    },
    /// Generate extreme-classification data shaped like a published dataset, as
    /// `train.txt` and `test.txt` in the repository text format.
    GenData {
        /// Which dataset's statistics to follow: amazon670k or delicious200k.
        #[arg(long)]
        preset: String,
        /// Output folder.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Multiply points, labels and features by this (0 < F <= 1).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
        /// Random seed.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Training points (default: the preset's, times the scale).
        #[arg(long, value_name = "N")]
        train: Option<usize>,
        /// Test points (default: the preset's, times the scale).
        #[arg(long, value_name = "N")]
        test: Option<usize>,
        /// Number of labels (default: the preset's, times the scale).
        #[arg(long, value_name = "N")]
        labels: Option<usize>,
        /// Probability that a point keeps each of its labels' 20 prototype features (0 < P
        /// <= 1; default: the preset's, 0.7): lower is a weaker signal.
        #[arg(long, value_name = "P")]
        keep: Option<f64>,
        /// Fill features of Zipf-like popularity (a few in a large share of the points, as
        /// words in text) instead of uniformly random ones.
        #[arg(long)]
        zipf_noise: bool,
        /// Group the labels into N topics (0: none): labels of a topic share features and
        /// co-occur, so every label has confusable neighbours.
        #[arg(long, value_name = "N", default_value_t = 0)]
        topics: usize,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Input(e)) => {
            eprintln!("slide-train: {e:#}");
            ExitCode::from(2)
        }
        Err(Failure::Training(e)) => {
            eprintln!("slide-train: {e:#}");
            ExitCode::from(1)
        }
        Err(Failure::Interrupted { signal, message }) => {
            eprintln!("slide-train: {message}");
            ExitCode::from(128 + signal.clamp(0, 127) as u8)
        }
    }
}

/// The first SIGINT or SIGTERM asks the training loop to stop at the next step boundary
/// (it writes a checkpoint first); a second one ends the process at once.
fn stop_on_signals() -> Result<Arc<AtomicUsize>, Failure> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let received = Arc::new(AtomicUsize::new(0));
    for signal in [SIGINT, SIGTERM] {
        let flag = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register_conditional_shutdown(signal, 128 + signal, Arc::clone(&flag))
            .and_then(|_| signal_hook::flag::register(signal, flag))
            .and_then(|_| {
                signal_hook::flag::register_usize(signal, Arc::clone(&received), signal as usize)
            })
            .map_err(|e| Failure::Input(anyhow::anyhow!("cannot handle signal {signal}: {e}")))?;
    }
    Ok(received)
}

fn pool(threads: Option<usize>) -> Result<rayon::ThreadPool, Failure> {
    if threads == Some(0) {
        return Err(Failure::Input(anyhow::anyhow!(
            "--threads must be at least 1"
        )));
    }
    let threads = threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Failure::Input(anyhow::anyhow!("cannot start {threads} threads: {e}")))
}

fn run(cli: Cli) -> Result<(), Failure> {
    use Failure::Input;
    match cli.command {
        Some(Command::GenData {
            preset,
            out,
            scale,
            seed,
            train,
            test,
            labels,
            keep,
            zipf_noise,
            topics,
        }) => {
            let mut shape = generate::preset(&preset)
                .and_then(|p| generate::scaled(p, scale))
                .map_err(Input)?;
            if [train, test, labels].contains(&Some(0)) {
                return Err(Input(anyhow::anyhow!(
                    "--train, --test and --labels must be at least 1"
                )));
            }
            shape.labels = labels.unwrap_or(shape.labels);
            shape.train = train.unwrap_or(shape.train);
            shape.test = test.unwrap_or(shape.test);
            shape.keep = keep.unwrap_or(shape.keep);
            shape.zipf_noise = zipf_noise;
            shape.topics = topics;
            let started = std::time::Instant::now();
            generate::generate(shape, seed, &out).map_err(Input)?;
            println!(
                "wrote {} train and {} test points ({} features, {} labels) to {} in {:.1} s",
                shape.train,
                shape.test,
                shape.features,
                shape.labels,
                out.display(),
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
        Some(Command::Plot { metrics, out }) => {
            plot::plot(&metrics, &out).map_err(Input)?;
            println!("wrote {}", out.display());
            Ok(())
        }
        Some(Command::Eval { scoring: s }) => {
            let config = s.load()?;
            pool(s.threads)?
                .install(|| {
                    evaluate::evaluate_checkpoint(&config, &s.checkpoint, s.mode, s.samples)
                })
                .map(|_| ())
        }
        Some(Command::Predict {
            scoring: s,
            top_k,
            out,
        }) => {
            let config = s.load()?;
            let stats = pool(s.threads)?.install(|| {
                predict::predict_checkpoint(
                    &config,
                    &s.checkpoint,
                    s.mode,
                    s.samples,
                    top_k,
                    out.as_deref(),
                )
            })?;
            // The summary goes to stderr, so that standard output holds only predictions;
            // on the ranks of an MPI job, once.
            if !stats.wrote {
                return Ok(());
            }
            let against = match (stats.precision_at_1, stats.recall_at_k) {
                (Some(p1), Some(recall)) => {
                    format!("; P@1 {p1:.4}, Recall@{top_k} {recall:.4} against the file's labels")
                }
                _ => "; the file has no labels to score them against".to_string(),
            };
            eprintln!(
                "predicted {} samples in {:.1} s ({:.0} samples/s){against}",
                stats.samples,
                stats.seconds,
                stats.samples as f64 / stats.seconds.max(1e-9),
            );
            Ok(())
        }
        None => {
            let args = cli.train;
            let Some(path) = args.config.as_deref() else {
                return Err(Input(anyhow::anyhow!(
                    "--config FILE is required (see slide-train --help)"
                )));
            };
            let config = config::load(&config::locate(path), &args.overrides).map_err(Input)?;
            let pool = pool(args.threads)?;
            let interrupt = stop_on_signals()?;
            pool.install(|| {
                train::run(
                    &config,
                    &args.out,
                    args.quiet,
                    match (&args.resume, &args.init_from) {
                        (Some(path), _) => train::Start::Resume(path),
                        (None, Some(path)) => train::Start::InitFrom(path),
                        (None, None) => train::Start::New,
                    },
                    &interrupt,
                )
            })
        }
    }
}
