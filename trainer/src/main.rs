//! `slide-train`: trains a slide network from a TOML config.
//!
//! ```text
//! slide-train --config configs/quickstart.toml [--set train.epochs=2] [--threads 2]
//!             [--out runs/quickstart] [--quiet] [--resume CKPT]
//! ```
//!
//! Exit status: 0 on success, 2 for a bad command line, config or data file (one line on
//! stderr says what and where), 1 when training itself fails (e.g. the loss diverges).

mod checkpoint;
mod config;
mod data;
mod train;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Train a SLIDE network (LSH-sampled sparse layers) from a TOML config.
#[derive(Debug, Parser)]
#[command(name = "slide-train", version, about, long_about = None)]
struct Cli {
    /// The config file; a bare name such as `quickstart.toml` is also looked up in `configs/`.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Override a config value, e.g. `--set train.lr=0.001` (repeatable; values are TOML).
    #[arg(long = "set", value_name = "SECTION.KEY=VALUE")]
    overrides: Vec<String>,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Folder for the metrics file and other outputs (created if missing).
    #[arg(long, value_name = "DIR", default_value = "runs/latest")]
    out: PathBuf,
    /// Print only the summary lines (evaluations and the final result).
    #[arg(long)]
    quiet: bool,
    /// Continue from this checkpoint (written by a run of the same config).
    #[arg(long, value_name = "CKPT")]
    resume: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(train::Failure::Input(e)) => {
            eprintln!("slide-train: {e:#}");
            ExitCode::from(2)
        }
        Err(train::Failure::Training(e)) => {
            eprintln!("slide-train: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: &Cli) -> Result<(), train::Failure> {
    use train::Failure::Input;
    if cli.threads == Some(0) {
        return Err(Input(anyhow::anyhow!("--threads must be at least 1")));
    }
    let path = config::locate(&cli.config);
    let config = config::load(&path, &cli.overrides).map_err(Input)?;
    let threads = cli.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Input(anyhow::anyhow!("cannot start {threads} threads: {e}")))?;
    pool.install(|| train::run(&config, &cli.out, cli.quiet, cli.resume.as_deref()))
}
