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
use slide_trainer::{checkpoint, config, generate, train};

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

fn run() -> Result<(), String> {
    let o = parse()?;
    let (train_file, test_file) = (o.data.join("train.txt"), o.data.join("test.txt"));
    if !train_file.exists() {
        let mut shape = generate::preset("amazon670k").map_err(|e| e.to_string())?;
        (shape.train, shape.test) = (20_000, 6_400);
        println!("generating {} ...", o.data.display());
        generate::generate(shape, 1, &o.data).map_err(|e| format!("{e:#}"))?;
    }
    // Train samples decide the checkpoint period: `--checkpoints` spread over the run.
    let (train_samples, features) = xmc_header(&train_file)?;
    let quote = |p: &Path| format!("\"{}\"", p.display());
    let mut sets = vec![
        format!("data.train={}", quote(&train_file)),
        format!("data.test={}", quote(&test_file)),
        format!("train.epochs={}", o.epochs),
        "train.eval_every=0".into(),
        format!("train.eval_samples={}", o.eval_samples),
        "checkpoint.keep_last=1".into(),
    ];
    sets.extend(o.sets.iter().cloned());
    let path = config::locate(&o.config);
    let mut cfg = config::load(&path, &sets).map_err(|e| format!("{e:#}"))?;
    let steps = train_samples.div_ceil(cfg.train.batch_size as u64) * o.epochs as u64;
    cfg.checkpoint.every = steps
        .checked_div(o.checkpoints)
        .map_or(0, |every| every.max(1));
    let out = std::env::temp_dir().join(format!("slide-trainer-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(o.threads)
        .build()
        .map_err(|e| e.to_string())?;
    pool.install(|| train::run(&cfg, &out, true, None, &AtomicUsize::new(0)))
        .map_err(|e| format!("training failed: {e:?}"))?;
    let peak_mib = train::peak_resident_mib().unwrap_or(0.0);

    let metrics = std::fs::read_to_string(out.join("metrics.jsonl")).map_err(|e| e.to_string())?;
    let records: Vec<serde_json::Value> = metrics
        .lines()
        .map(|l| serde_json::from_str(l).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let last = records.last().ok_or("no metrics")?;
    let f = |v: &serde_json::Value, key: &str| v[key].as_f64().unwrap_or(f64::NAN);
    let steps_mib = records.iter().map(|r| f(r, "rss_mib")).fold(0.0, f64::max);
    let phases = &last["phase_seconds"];
    let names = ["hashing", "forward", "backward", "update", "rebuild"];
    let phase: Vec<f64> = names.iter().map(|n| f(phases, n)).collect();
    let phase_total: f64 = phase.iter().sum::<f64>().max(1e-9);
    let checkpoints = last["checkpoints"].as_u64().unwrap_or(0);
    let checkpoint_each = f(last, "checkpoint_seconds") / checkpoints.max(1) as f64;
    let dir = out.join(&cfg.checkpoint.dir);
    let newest = checkpoint::list(&dir)
        .map_err(|e| format!("{e:#}"))?
        .pop()
        .ok_or("no checkpoint written")?;
    let file_bytes = std::fs::metadata(&newest).map_err(|e| e.to_string())?.len();
    // The trained network again, its checkpoint written and a plain file of the same size
    // written and synced in turns, four times each, into the same folder.
    let network = cfg.network(features, train_samples as usize);
    let identity = checkpoint::Identity::of(&network, cfg.train.batch_size);
    let mut net = slide::Network::with_empty_tables(network).map_err(|e| e.to_string())?;
    checkpoint::load(&newest, &mut net, &identity, checkpoint::Require::Network)
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
                checkpoint::save(&dir, &net, position, &identity, 1)
                    .map_err(|e| format!("{e:#}"))?;
                save_s += started.elapsed().as_secs_f64() / rounds as f64;
            } else {
                disk_s += disk_write_seconds(&dir, file_bytes).map_err(|e| e.to_string())?
                    / rounds as f64;
            }
        }
    }
    drop(net);

    let mut evals = Vec::new();
    for mode in [Mode::EvalExact, Mode::EvalLsh] {
        let (e, seconds) = pool
            .install(|| train::evaluate_checkpoint(&cfg, &newest, mode, Some(o.eval_samples)))
            .map_err(|e| format!("evaluation failed: {e:?}"))?;
        evals.push((e.precision_at_1, e.samples as f64 / seconds.max(1e-9)));
    }
    // Exact evaluation with BF16 products too, where the CPU has AVX512-BF16.
    let bf16_eval = if slide::kernels::has_bf16_dot() {
        let mut bf16 = cfg.clone();
        bf16.train.eval_precision = slide::EvalPrecision::Bf16;
        let (e, seconds) = pool
            .install(|| {
                train::evaluate_checkpoint(&bf16, &newest, Mode::EvalExact, Some(o.eval_samples))
            })
            .map_err(|e| format!("evaluation failed: {e:?}"))?;
        format!(
            "{:.4},{:.0}",
            e.precision_at_1,
            e.samples as f64 / seconds.max(1e-9)
        )
    } else {
        ",".to_string()
    };

    let header = "cpu,label,labels,train_samples,epochs,threads,train_samples_per_s,p_at_1_exact,p_at_1_lsh,eval_exact_samples_per_s,eval_lsh_samples_per_s,hashing_share,forward_share,backward_share,update_share,rebuild_share,steps_rss_mib,peak_rss_mib,checkpoints,checkpoint_s,file_mb,checkpoint_alone_s,disk_write_s,steps_samples_per_s,p_at_1_exact_bf16,eval_exact_bf16_samples_per_s,kernels,cpu_features";
    // The issue's "training alone": the steps and rebuilds, without the checkpoints' time.
    let steps_per_s = (train_samples * o.epochs as u64) as f64
        / (f(last, "train_seconds") - f(last, "checkpoint_seconds")).max(1e-9);
    let row = format!(
        "\"{}\",{},{},{},{},{},{:.0},{:.4},{:.4},{:.0},{:.0},{},{:.0},{:.0},{},{:.2},{:.0},{:.2},{:.2},{:.0},{},{},{}",
        cpu_name(),
        o.label,
        cfg.network.layers.last().map_or(0, |l| l.out_dim),
        train_samples,
        o.epochs,
        o.threads,
        f(last, "train_samples_per_second"),
        evals[0].0,
        evals[1].0,
        evals[0].1,
        evals[1].1,
        phase
            .iter()
            .map(|p| format!("{:.3}", p / phase_total))
            .collect::<Vec<_>>()
            .join(","),
        steps_mib,
        peak_mib,
        checkpoints,
        checkpoint_each,
        file_bytes as f64 / 1e6,
        save_s,
        disk_s,
        steps_per_s,
        bf16_eval,
        slide::kernels::kernels().name,
        slide::kernels::cpu_features().join(" "),
    );
    if let Some(parent) = o.csv.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    pad_to_header(&o.csv, header).map_err(|e| format!("{}: {e}", o.csv.display()))?;
    let fresh = !o.csv.exists();
    let mut csv = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&o.csv)
        .map_err(|e| format!("{}: {e}", o.csv.display()))?;
    if fresh {
        writeln!(csv, "{header}").map_err(|e| e.to_string())?;
    }
    writeln!(csv, "{row}").map_err(|e| e.to_string())?;
    println!("{header}\n{row}");
    println!(
        "kernels {} (CPU: {})",
        slide::kernels::kernels().name,
        slide::kernels::cpu_features().join(" ")
    );
    println!(
        "training {:.0} samples/s, {steps_per_s:.0} without the checkpoints (P@1 exact {:.4}, LSH-mode {:.4}); exact evaluation {:.0} samples/s (BF16: P@1 and samples/s {bf16_eval}); peak RSS {peak_mib:.0} MiB against the steps' {steps_mib:.0} MiB ({:+.1}%); a checkpoint {checkpoint_each:.2} s in the run, {save_s:.2} s alone against {disk_s:.2} s to write and fsync {:.0} MB ({:.2}x); row appended to {}",
        f(last, "train_samples_per_second"),
        evals[0].0,
        evals[1].0,
        evals[0].1,
        100.0 * (peak_mib / steps_mib.max(1e-9) - 1.0),
        file_bytes as f64 / 1e6,
        save_s / disk_s.max(1e-9),
        o.csv.display()
    );
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}
