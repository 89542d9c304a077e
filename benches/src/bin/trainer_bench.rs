//! What users run, measured: the trainer's own loop (`slide_trainer::train::run`, the code
//! behind `slide-train`) on `gen-data` data of the full Amazon-670K shape, long enough for
//! the tables to follow trained weights, then exact and LSH-mode evaluation of its final
//! checkpoint. Appends one CSV row: training samples/s (evaluation excluded, rebuilds and
//! checkpoints included), P@1 exact and LSH-mode, evaluation samples/s, phase shares, the
//! steps' resident memory and the run's peak, and each checkpoint's seconds beside writing
//! and fsyncing a file of the same size in the same folder, and the kernel set and CPU
//! features it ran with (`SLIDE_KERNELS=portable` measures the portable set on an AVX-512
//! machine).
//!
//! ```text
//! cargo run --release -p slide-benches --bin trainer_bench -- \
//!     [--config amazon670k-synthetic.toml] [--data datasets/generated/a670k-20k] \
//!     [--epochs 2] [--eval-samples 2000] [--checkpoints 2] [--threads 2] \
//!     [--csv benches/results/trainer.csv] [--label NAME] [--set SECTION.KEY=VALUE]...
//! ```
//!
//! A `--data` folder without `train.txt` is first filled by the generator (the
//! `amazon670k` preset: 135,909 features, 670,091 labels, 20,000 training and 6,400 test
//! samples, seed 1), as `slide-train gen-data --preset amazon670k --train 20000 --test 6400`
//! would. One run per process: the peak resident memory is the process's own.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

use slide::Mode;
use slide_trainer::{checkpoint, config, evaluate::evaluate_checkpoint, generate, train};

struct Options {
    config: PathBuf,
    data: PathBuf,
    epochs: usize,
    eval_samples: usize,
    checkpoints: u64,
    threads: usize,
    csv: PathBuf,
    label: String,
    sets: Vec<String>,
}

fn parse() -> Result<Options, String> {
    let mut o = Options {
        config: PathBuf::from("amazon670k-synthetic.toml"),
        data: PathBuf::from("datasets/generated/a670k-20k"),
        epochs: 2,
        eval_samples: 2000,
        checkpoints: 2,
        threads: 2,
        csv: PathBuf::from("benches/results/trainer.csv"),
        label: String::from("shipped"),
        sets: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        let number = |v: String| {
            v.parse::<u64>()
                .map_err(|_| format!("{flag}: not a number"))
        };
        match flag.as_str() {
            "--config" => o.config = value()?.into(),
            "--data" => o.data = value()?.into(),
            "--epochs" => o.epochs = number(value()?)? as usize,
            "--eval-samples" => o.eval_samples = number(value()?)? as usize,
            "--checkpoints" => o.checkpoints = number(value()?)?,
            "--threads" => o.threads = number(value()?)? as usize,
            "--csv" => o.csv = value()?.into(),
            "--label" => o.label = value()?,
            "--set" => o.sets.push(value()?),
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    if o.epochs == 0 || o.threads == 0 || o.eval_samples == 0 {
        return Err("--epochs, --threads and --eval-samples must be at least 1".into());
    }
    Ok(o)
}

fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("model name"))?.to_owned();
            Some(line.split_once(':')?.1.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// An XMC file's header: samples and features.
fn xmc_header(path: &Path) -> Result<(u64, usize), String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(file), &mut line)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut fields = line.split_whitespace().map(str::parse::<u64>);
    match (fields.next(), fields.next()) {
        (Some(Ok(samples)), Some(Ok(features))) => Ok((samples, features as usize)),
        _ => Err(format!("{}: no XMC header", path.display())),
    }
}

/// Seconds to write `bytes` in 512 KiB pieces into a new file in `dir` and fsync it.
fn disk_write_seconds(dir: &Path, bytes: u64) -> std::io::Result<f64> {
    let path = dir.join(".disk-write-reference.tmp");
    let piece = vec![0x5au8; 1 << 19];
    let started = Instant::now();
    let mut file = std::fs::File::create(&path)?;
    let mut left = bytes;
    while left > 0 {
        let n = left.min(piece.len() as u64) as usize;
        file.write_all(&piece[..n])?;
        left -= n as u64;
    }
    file.sync_all()?;
    let seconds = started.elapsed().as_secs_f64();
    drop(file);
    std::fs::remove_file(&path)?;
    Ok(seconds)
}

/// Brings a CSV written with fewer columns up to `header`: a new header line, and each older
/// row padded with empty fields (columns are only ever appended). Nothing to do for a
/// missing file or one whose header is `header`.
fn pad_to_header(csv: &Path, header: &str) -> std::io::Result<()> {
    let Ok(text) = std::fs::read_to_string(csv) else {
        return Ok(());
    };
    let mut lines = text.lines();
    let old = lines.next().unwrap_or("");
    if old == header {
        return Ok(());
    }
    if !header.starts_with(old) {
        return Err(std::io::Error::other(format!(
            "its header is not a prefix of this benchmark's: {old}"
        )));
    }
    let missing = header.split(',').count() - old.split(',').count();
    let mut padded = format!("{header}\n");
    for line in lines {
        padded.push_str(line);
        padded.push_str(&",".repeat(missing));
        padded.push('\n');
    }
    std::fs::write(csv, padded)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("trainer_bench: {e}");
        std::process::exit(2);
    }
}

/// The phases of a training step, in the order of the CSV's share columns.
const PHASES: [&str; 5] = ["hashing", "forward", "backward", "update", "rebuild"];

/// The CSV's columns (appended to only: [`pad_to_header`] brings older files up to date).
const HEADER: &str = "cpu,label,labels,train_samples,epochs,threads,train_samples_per_s,p_at_1_exact,p_at_1_lsh,eval_exact_samples_per_s,eval_lsh_samples_per_s,hashing_share,forward_share,backward_share,update_share,rebuild_share,steps_rss_mib,peak_rss_mib,checkpoints,checkpoint_s,file_mb,checkpoint_alone_s,disk_write_s,steps_samples_per_s,p_at_1_exact_bf16,eval_exact_bf16_samples_per_s,kernels,cpu_features";

fn run() -> Result<(), String> {
    let o = parse()?;
    let (train_file, test_file) = (o.data.join("train.txt"), o.data.join("test.txt"));
    if !train_file.exists() {
        generate_data(&o.data)?;
    }
    // Train samples decide the checkpoint period: `--checkpoints` spread over the run.
    let (train_samples, features) = xmc_header(&train_file)?;
    let cfg = bench_config(&o, &train_file, &test_file, train_samples)?;
    let out = std::env::temp_dir().join(format!("slide-trainer-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(o.threads)
        .build()
        .map_err(|e| e.to_string())?;
    pool.install(|| train::run(&cfg, &out, true, train::Start::New, &AtomicUsize::new(0)))
        .map_err(|e| format!("training failed: {e:?}"))?;
    let peak_mib = train::peak_resident_mib().unwrap_or(0.0);
    let samples_trained = train_samples * o.epochs as u64;
    let record = RunRecord::read(&out.join("metrics.jsonl"), samples_trained)?;

    let dir = out.join(&cfg.checkpoint.dir);
    let newest = checkpoint::list(&dir)
        .map_err(|e| format!("{e:#}"))?
        .pop()
        .ok_or("no checkpoint written")?;
    let file_bytes = std::fs::metadata(&newest).map_err(|e| e.to_string())?.len();
    let writes = time_checkpoint_writes(&cfg, features, train_samples, &dir, &newest, file_bytes)?;
    let evals = evaluate(&pool, &cfg, &newest, o.eval_samples)?;

    let measured = Measured {
        options: &o,
        labels: cfg.network.layers.last().map_or(0, |l| l.out_dim),
        train_samples,
        record,
        peak_mib,
        file_bytes,
        writes,
        evals,
    };
    let row = measured.csv_row();
    append_row(&o.csv, &row)?;
    println!("{HEADER}\n{row}");
    println!(
        "kernels {} (CPU: {})",
        slide::kernels::kernels().name,
        slide::kernels::cpu_features().join(" ")
    );
    println!("{}", measured.summary());
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}

/// Fills `data` with the `amazon670k` preset's shape at 20,000 training and 6,400 test
/// samples, seed 1.
fn generate_data(data: &Path) -> Result<(), String> {
    let mut shape = generate::preset("amazon670k").map_err(|e| e.to_string())?;
    (shape.train, shape.test) = (20_000, 6_400);
    println!("generating {} ...", data.display());
    generate::generate(shape, 1, data).map_err(|e| format!("{e:#}"))?;
    Ok(())
}

/// The trainer's configuration for this run: `--config` with the data files, the epochs
/// and the evaluation samples set, then the user's `--set`s, and `--checkpoints`
/// checkpoints spread evenly over the run's steps.
fn bench_config(
    o: &Options,
    train_file: &Path,
    test_file: &Path,
    train_samples: u64,
) -> Result<config::Config, String> {
    let quote = |p: &Path| format!("\"{}\"", p.display());
    let mut sets = vec![
        format!("data.train={}", quote(train_file)),
        format!("data.test={}", quote(test_file)),
        format!("train.epochs={}", o.epochs),
        "train.eval_every=0".into(),
        format!("train.eval_samples={}", o.eval_samples),
        "checkpoint.keep_last=1".into(),
    ];
    sets.extend(o.sets.iter().cloned());
    let path = config::locate(&o.config);
    let mut cfg = config::load(&path, &sets).map_err(|e| format!("{e:#}"))?;
    let steps = cfg.train.steps_per_epoch(train_samples as usize) * o.epochs as u64;
    cfg.checkpoint.every = steps
        .checked_div(o.checkpoints)
        .map_or(0, |every| every.max(1));
    Ok(cfg)
}

/// A number in a metrics record, NaN where it is missing.
fn field(record: &serde_json::Value, key: &str) -> f64 {
    record[key].as_f64().unwrap_or(f64::NAN)
}

/// What the training run's `metrics.jsonl` says, in the row's terms.
struct RunRecord {
    /// Training samples/s over the whole run, rebuilds and checkpoints included.
    train_samples_per_s: f64,
    /// The issue's "training alone": samples/s of the steps and rebuilds, without the
    /// checkpoints' time.
    steps_samples_per_s: f64,
    /// Each phase's share of the phases' time, in [`PHASES`] order.
    phase_shares: Vec<f64>,
    /// The largest resident memory any record reports, MiB.
    steps_mib: f64,
    /// Checkpoints written during the run.
    checkpoints: u64,
    /// Seconds per checkpoint within the run.
    checkpoint_each_s: f64,
}

impl RunRecord {
    /// Reads the records of a run that trained on `samples_trained` samples in all.
    fn read(metrics: &Path, samples_trained: u64) -> Result<Self, String> {
        let text = std::fs::read_to_string(metrics).map_err(|e| e.to_string())?;
        let records: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        let last = records.last().ok_or("no metrics")?;
        let steps_mib = records
            .iter()
            .map(|r| field(r, "rss_mib"))
            .fold(0.0, f64::max);
        let phases = &last["phase_seconds"];
        let phase: Vec<f64> = PHASES.iter().map(|n| field(phases, n)).collect();
        let phase_total: f64 = phase.iter().sum::<f64>().max(1e-9);
        let checkpoints = last["checkpoints"].as_u64().unwrap_or(0);
        let checkpoint_s = field(last, "checkpoint_seconds");
        Ok(RunRecord {
            train_samples_per_s: field(last, "train_samples_per_second"),
            steps_samples_per_s: samples_trained as f64
                / (field(last, "train_seconds") - checkpoint_s).max(1e-9),
            phase_shares: phase.iter().map(|p| p / phase_total).collect(),
            steps_mib,
            checkpoints,
            checkpoint_each_s: checkpoint_s / checkpoints.max(1) as f64,
        })
    }
}

/// A checkpoint's write alone against a plain file's of the same size: seconds each,
/// averaged over the rounds.
struct CheckpointWrites {
    save_s: f64,
    disk_s: f64,
}

/// The trained network loaded from its newest checkpoint again, then a checkpoint of it
/// and a plain file of its size (`file_bytes`) written and synced in turns, four times
/// each, into the checkpoints' folder `dir`.
fn time_checkpoint_writes(
    cfg: &config::Config,
    features: usize,
    train_samples: u64,
    dir: &Path,
    newest: &Path,
    file_bytes: u64,
) -> Result<CheckpointWrites, String> {
    let network = cfg.network(features, train_samples as usize);
    let identity = checkpoint::Identity::of(&network, cfg.train.batch(train_samples as usize));
    let mut net = slide::Network::with_empty_tables(network).map_err(|e| e.to_string())?;
    checkpoint::load(newest, &mut net, &identity, checkpoint::Require::Network)
        .map_err(|e| format!("{e:#}"))?;
    let rounds = 4;
    let (mut save_s, mut disk_s) = (0.0, 0.0);
    for round in 0..rounds {
        // Each goes first in half of the rounds: a write right after another one's fsync
        // or file removal finds the page cache in another state.
        for first in [round % 2 == 0, round % 2 == 1] {
            if first {
                let started = Instant::now();
                let position = checkpoint::Position { epoch: 1, batch: 0 };
                checkpoint::save(dir, &net, position, &identity, 1)
                    .map_err(|e| format!("{e:#}"))?;
                save_s += started.elapsed().as_secs_f64() / rounds as f64;
            } else {
                disk_s +=
                    disk_write_seconds(dir, file_bytes).map_err(|e| e.to_string())? / rounds as f64;
            }
        }
    }
    Ok(CheckpointWrites { save_s, disk_s })
}

/// The final checkpoint's evaluations: P@1 and samples/s.
struct Evaluations {
    exact: (f64, f64),
    lsh: (f64, f64),
    /// Exact with BF16 products, as the CSV's two fields; both empty where the CPU lacks
    /// AVX512-BF16.
    bf16: String,
}

/// Evaluates the checkpoint at `newest` on `samples` test samples in exact and LSH mode,
/// and exactly with BF16 products where the CPU has AVX512-BF16.
fn evaluate(
    pool: &rayon::ThreadPool,
    cfg: &config::Config,
    newest: &Path,
    samples: usize,
) -> Result<Evaluations, String> {
    let mut evals = Vec::new();
    for mode in [Mode::EvalExact, Mode::EvalLsh] {
        let (e, seconds) = pool
            .install(|| evaluate_checkpoint(cfg, newest, Some(mode), Some(samples)))
            .map_err(|e| format!("evaluation failed: {e:?}"))?;
        evals.push((e.metrics.precision[0], e.samples as f64 / seconds.max(1e-9)));
    }
    let bf16 = if slide::kernels::has_bf16_dot() {
        let mut bf16 = cfg.clone();
        bf16.train.eval.precision = slide::EvalPrecision::Bf16;
        let (e, seconds) = pool
            .install(|| evaluate_checkpoint(&bf16, newest, Some(Mode::EvalExact), Some(samples)))
            .map_err(|e| format!("evaluation failed: {e:?}"))?;
        format!(
            "{:.4},{:.0}",
            e.metrics.precision[0],
            e.samples as f64 / seconds.max(1e-9)
        )
    } else {
        ",".to_string()
    };
    Ok(Evaluations {
        exact: evals[0],
        lsh: evals[1],
        bf16,
    })
}

/// Everything one run measured: its CSV row and the summary printed after it.
struct Measured<'a> {
    options: &'a Options,
    /// The output layer's width.
    labels: usize,
    train_samples: u64,
    record: RunRecord,
    /// The process's peak resident memory after training, MiB.
    peak_mib: f64,
    /// The newest checkpoint's size.
    file_bytes: u64,
    writes: CheckpointWrites,
    evals: Evaluations,
}

impl Measured<'_> {
    /// The row under [`HEADER`].
    fn csv_row(&self) -> String {
        let (o, r, w, e) = (self.options, &self.record, &self.writes, &self.evals);
        format!(
            "\"{}\",{},{},{},{},{},{:.0},{:.4},{:.4},{:.0},{:.0},{},{:.0},{:.0},{},{:.2},{:.0},{:.2},{:.2},{:.0},{},{},{}",
            cpu_name(),
            o.label,
            self.labels,
            self.train_samples,
            o.epochs,
            o.threads,
            r.train_samples_per_s,
            e.exact.0,
            e.lsh.0,
            e.exact.1,
            e.lsh.1,
            r.phase_shares
                .iter()
                .map(|share| format!("{share:.3}"))
                .collect::<Vec<_>>()
                .join(","),
            r.steps_mib,
            self.peak_mib,
            r.checkpoints,
            r.checkpoint_each_s,
            self.file_bytes as f64 / 1e6,
            w.save_s,
            w.disk_s,
            r.steps_samples_per_s,
            e.bf16,
            slide::kernels::kernels().name,
            slide::kernels::cpu_features().join(" "),
        )
    }

    /// One line for a reader: throughput, accuracy, memory and the checkpoints' cost.
    fn summary(&self) -> String {
        let (r, w, e) = (&self.record, &self.writes, &self.evals);
        let (peak_mib, steps_mib, bf16_eval) = (self.peak_mib, r.steps_mib, &e.bf16);
        let (steps_per_s, checkpoint_each) = (r.steps_samples_per_s, r.checkpoint_each_s);
        let (save_s, disk_s) = (w.save_s, w.disk_s);
        format!(
            "training {:.0} samples/s, {steps_per_s:.0} without the checkpoints (P@1 exact {:.4}, LSH-mode {:.4}); exact evaluation {:.0} samples/s (BF16: P@1 and samples/s {bf16_eval}); peak RSS {peak_mib:.0} MiB against the steps' {steps_mib:.0} MiB ({:+.1}%); a checkpoint {checkpoint_each:.2} s in the run, {save_s:.2} s alone against {disk_s:.2} s to write and fsync {:.0} MB ({:.2}x); row appended to {}",
            r.train_samples_per_s,
            e.exact.0,
            e.lsh.0,
            e.exact.1,
            100.0 * (peak_mib / steps_mib.max(1e-9) - 1.0),
            self.file_bytes as f64 / 1e6,
            save_s / disk_s.max(1e-9),
            self.options.csv.display()
        )
    }
}

/// Appends `row` to the CSV at `csv`, written with [`HEADER`] first if new (its folder
/// made) and brought up to [`HEADER`] if older.
fn append_row(csv: &Path, row: &str) -> Result<(), String> {
    if let Some(parent) = csv.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    pad_to_header(csv, HEADER).map_err(|e| format!("{}: {e}", csv.display()))?;
    let fresh = !csv.exists();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(csv)
        .map_err(|e| format!("{}: {e}", csv.display()))?;
    if fresh {
        writeln!(file, "{HEADER}").map_err(|e| e.to_string())?;
    }
    writeln!(file, "{row}").map_err(|e| e.to_string())
}
