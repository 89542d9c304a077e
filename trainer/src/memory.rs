//! A `[memory]` config: the model is a layer of the training samples ([`slide::Memory`]),
//! built in one pass instead of trained. `slide-train` builds it, evaluates it on the test
//! file, writes the metrics record and saves it; `eval` and `predict` load the saved file.
//!
//! The file is safetensors (`memory.safetensors` in the checkpoint folder): the arrays of
//! [`slide::memory::MemoryArrays`] and metadata naming the format, its version, the
//! settings and the shape, written to a temporary name, synced and renamed, so a file under
//! the final name is always whole.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use safetensors::tensor::Dtype;
use slide::memory::MemoryArrays;
use slide::memory::{Search, Tried};
use slide::{EvalStats, Memory, MemoryConfig};

use crate::config::Config;
use crate::data::{self, Loaded};
use crate::predict::Answers;
use crate::train::{Failure, peak_resident_mib};

/// The `format` metadata of a saved memory.
const FORMAT: &str = "slide-memory";
/// The version of the saved layout; a file of another version is refused, naming both.
const VERSION: &str = "1";
/// How `eval` and `predict` in `mode` search a memory: `lsh` through its tables (a note
/// if it has none: then exactly), `exact` and `dense` exactly.
pub fn search_for(mode: slide::Mode, memory: &MemoryConfig) -> Search {
    match mode {
        slide::Mode::EvalLsh | slide::Mode::Train if memory.lsh.is_some() => Search::Tables,
        slide::Mode::EvalLsh | slide::Mode::Train => {
            eprintln!(
                "note: this [memory] has no [memory.lsh] tables: every unit that shares a feature with the query is computed"
            );
            Search::Exact
        }
        slide::Mode::EvalExact | slide::Mode::EvalDense => Search::Exact,
    }
}
/// The file a run saves, in the config's checkpoint folder.
pub const FILE_NAME: &str = "memory.safetensors";

/// `slide-train --config` with a `[memory]`: loads the data, builds the memory, evaluates
/// it on the test file (`train.eval_samples`, 0: all), writes a metrics record (like a
/// network's last evaluation, so tools that read metrics files read it) and, with
/// `checkpoint.at_end`, saves it.
pub fn run(config: &Config, memory: MemoryConfig, out: &Path, quiet: bool) -> Result<(), Failure> {
    let started = Instant::now();
    let loaded = load_data(config, &|line| println!("{line}"))?;
    let train = loaded.train.examples();
    let (chosen, tried) = Memory::tune(train, loaded.features, loaded.labels, memory)
        .map_err(|e| Failure::Input(e.into()))?;
    let built = Memory::build(train, loaded.features, loaded.labels, chosen)
        .map_err(|e| Failure::Input(e.into()))?;
    // Reading the files counts, as it does for Omikuji's `train_on_data`: there is no
    // other training.
    let build_seconds = started.elapsed().as_secs_f64();
    if !quiet {
        println!(
            "memory: {} training samples stored ({:.0} MB) in {build_seconds:.1} s, the files' reading included",
            built.len(),
            built.bytes() as f64 / 1e6
        );
        if let Some(chosen) = tuned_line(&tried, built.config()) {
            println!("{chosen}");
        }
        if let Some(p) = built.tables_params() {
            println!(
                "tables: {} of 2^{} buckets, {} sub-hash{} per code",
                p.l,
                p.range_pow,
                p.k,
                if p.k == 1 { "" } else { "es" }
            );
        }
    }
    let samples = config.train.eval_samples;
    let (stats, eval_seconds) = evaluate(&built, &loaded, samples, Search::Exact)?;
    println!("{}", describe(&stats, eval_seconds, loaded.multi_label));
    // With tables, their P@1 too (as a network's exact evaluation reports its LSH mode's).
    let mut through_tables = serde_json::Value::Null;
    if memory.lsh.is_some() {
        let (tables, seconds) = evaluate(&built, &loaded, samples, Search::Tables)?;
        println!(
            "through the tables: {}",
            describe(&tables, seconds, loaded.multi_label)
        );
        through_tables = serde_json::json!({"p_at_1": tables.precision_at_1,
            "p_at_3": tables.precision_at_3, "p_at_5": tables.precision_at_5,
            "eval_seconds": seconds});
    }
    std::fs::create_dir_all(out)
        .with_context(|| format!("{}: cannot create the output folder", out.display()))
        .map_err(Failure::Input)?;
    let metrics = config.log.metrics_path(out);
    let record = serde_json::json!({
        "step": 0, "epoch": 1, "seconds": build_seconds, "train_seconds": build_seconds,
        "p_at_1": stats.precision_at_1, "p_at_3": stats.precision_at_3,
        "p_at_5": stats.precision_at_5, "eval_seconds": eval_seconds,
        "active_outputs": stats.active_outputs, "top1_share": stats.top1_share,
        "top1_output": stats.top1_output, "label_share": stats.label_share,
        "rss_mib": peak_resident_mib(), "tables": through_tables,
        "tuned": tuned_record(&tried, built.config()),
    });
    std::fs::write(&metrics, format!("{record}\n"))
        .with_context(|| format!("{}: cannot write the metrics", metrics.display()))
        .map_err(Failure::Input)?;
    let mut saved = String::new();
    if config.checkpoint.at_end {
        let path = out.join(&config.checkpoint.dir).join(FILE_NAME);
        save(&built, &path).map_err(Failure::Input)?;
        saved = format!("; saved to {}", path.display());
    }
    println!(
        "done: memory of {} samples built in {build_seconds:.1} s (the files' reading included){saved}; peak RSS {:.0} MiB; test P@1 {:.4}, P@3 {:.4}, P@5 {:.4}; metrics in {}",
        built.len(),
        peak_resident_mib().unwrap_or(0.0),
        stats.precision_at_1,
        stats.precision_at_3,
        stats.precision_at_5,
        metrics.display()
    );
    Ok(())
}

/// What tuning chose, in one line (`None` when nothing was tried): the pair, its score by
/// the tuning metric on the held-out samples (as many as each pair answered), and the
/// first pair's for comparison.
fn tuned_line(tried: &[Tried], chosen: &MemoryConfig) -> Option<String> {
    let first = tried.first()?;
    let best = tried
        .iter()
        .find(|t| t.power == chosen.power && t.vote_weight == chosen.vote_weight)
        .unwrap_or(first);
    let metric = chosen.tune_metric;
    Some(format!(
        "tuned on {} held-out training samples: power {}, vote_weight {} ({} {:.4} there; power {}, vote_weight {}: {:.4})",
        first.stats.samples,
        best.power,
        best.vote_weight,
        metric.name(),
        metric.value(&best.stats),
        first.power,
        first.vote_weight,
        metric.value(&first.stats)
    ))
}

/// The metrics record's account of tuning: the pair chosen and every pair tried.
fn tuned_record(tried: &[Tried], chosen: &MemoryConfig) -> serde_json::Value {
    if tried.is_empty() {
        return serde_json::Value::Null;
    }
    let rows: Vec<serde_json::Value> = tried
        .iter()
        .map(|t| {
            serde_json::json!({"power": t.power, "vote_weight": t.vote_weight,
                "p_at_1": t.stats.precision_at_1, "p_at_3": t.stats.precision_at_3,
                "p_at_5": t.stats.precision_at_5, "samples": t.stats.samples})
        })
        .collect();
    serde_json::json!({"power": chosen.power, "vote_weight": chosen.vote_weight,
        "metric": chosen.tune_metric.name(), "tried": rows})
}

/// The config's data, with the label count checked; `say` gets the announcement.
pub fn load_data(config: &Config, say: &dyn Fn(String)) -> Result<Loaded, Failure> {
    let started = Instant::now();
    let loaded = data::load(&config.data).map_err(Failure::Input)?;
    say(format!(
        "data: {} train / {} test samples, {} features, {} labels (loaded in {:.1} s)",
        loaded.train.examples().len(),
        loaded.test.examples().len(),
        loaded.features,
        loaded.labels,
        started.elapsed().as_secs_f64()
    ));
    Ok(loaded)
}

/// P@k of `memory` on the first `samples` (0: all) of the test file, searched as `search`
/// says, and the seconds taken.
pub fn evaluate(
    memory: &Memory,
    loaded: &Loaded,
    samples: usize,
    search: Search,
) -> Result<(EvalStats, f64), Failure> {
    let test = loaded.test.examples();
    let n = if samples == 0 {
        test.len()
    } else {
        samples.min(test.len())
    };
    let batch: Vec<usize> = (0..n).collect();
    let started = Instant::now();
    let stats = memory
        .evaluate(test, &batch, search)
        .map_err(|e| Failure::Input(e.into()))?;
    Ok((stats, started.elapsed().as_secs_f64()))
}

/// One line on an evaluation's results.
pub fn describe(stats: &EvalStats, seconds: f64, multi_label: bool) -> String {
    let speed = stats.samples as f64 / seconds.max(1e-9);
    if multi_label {
        format!(
            "test P@1 {:.4}  P@3 {:.4}  P@5 {:.4}  ({} samples, {speed:.0} samples/s, {:.0} labels voted for per sample)",
            stats.precision_at_1,
            stats.precision_at_3,
            stats.precision_at_5,
            stats.samples,
            stats.active_outputs
        )
    } else {
        format!(
            "test accuracy {:.4}  ({} samples, {speed:.0} samples/s)",
            stats.precision_at_1, stats.samples
        )
    }
}

/// Writes `memory` to `path` atomically (a temporary name in the same folder, synced, then
/// renamed over `path`), streaming each array to the file: no copy of the memory is held.
pub fn save(memory: &Memory, path: &Path) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    let a = memory.arrays();
    // (name, dtype, elements, element bytes): the file's arrays, in order.
    let arrays: [(&str, &str, usize, usize); 6] = [
        ("feature_weights", "F32", a.feature_weights.len(), 4),
        ("unit_offsets", "U64", a.unit_offsets.len(), 8),
        ("unit_features", "U32", a.unit_features.len(), 4),
        ("unit_values", "F32", a.unit_values.len(), 4),
        ("label_offsets", "U64", a.label_offsets.len(), 8),
        ("labels", "U32", a.labels.len(), 4),
    ];
    let c = memory.config();
    let mut header = serde_json::Map::new();
    header.insert(
        "__metadata__".into(),
        serde_json::json!({
            "format": FORMAT, "version": VERSION, "neighbours": c.neighbours.to_string(),
            "power": c.power.to_string(), "idf": c.idf.to_string(),
            "vote_weight": c.vote_weight.to_string(), "tuned": (c.tune > 0).to_string(),
            "input_dim": memory.input_dim().to_string(),
            "num_labels": memory.num_labels().to_string(),
        }),
    );
    let mut offset = 0usize;
    for (name, dtype, len, size) in arrays {
        header.insert(
            name.into(),
            serde_json::json!({"dtype": dtype, "shape": [len], "data_offsets": [offset, offset + len * size]}),
        );
        offset += len * size;
    }
    let mut header = serde_json::to_vec(&header)?;
    // safetensors pads the header with spaces to a multiple of 8 bytes.
    header.resize(header.len().div_ceil(8) * 8, b' ');
    let temporary = temporary_name(path);
    let write = || -> std::io::Result<()> {
        let file = std::fs::File::create(&temporary)?;
        let mut out = std::io::BufWriter::with_capacity(4 << 20, file);
        out.write_all(&(header.len() as u64).to_le_bytes())?;
        out.write_all(&header)?;
        for &w in a.feature_weights {
            out.write_all(&w.to_le_bytes())?;
        }
        for &o in &a.unit_offsets {
            out.write_all(&o.to_le_bytes())?;
        }
        for &f in a.unit_features {
            out.write_all(&f.to_le_bytes())?;
        }
        for &v in a.unit_values {
            out.write_all(&v.to_le_bytes())?;
        }
        for &o in &a.label_offsets {
            out.write_all(&o.to_le_bytes())?;
        }
        for &l in a.labels {
            out.write_all(&l.to_le_bytes())?;
        }
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&temporary, path)
    };
    write().with_context(|| format!("{}: cannot write the memory", path.display()))
}

fn temporary_name(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Reads a memory saved by [`save`]. The settings are the file's (a memory's answers
/// depend on them); `neighbours`, `power` and `vote_weight` from `config` override the
/// file's, since they only change how it is queried, except that a memory tuned when it
/// was built keeps its tuned `power` and `vote_weight` while `config` tunes too. The shape
/// must match the data's.
pub fn load(path: &Path, config: MemoryConfig, features: usize, labels: usize) -> Result<Memory> {
    let context = || format!("{}", path.display());
    let raw = std::fs::read(path).with_context(context)?;
    let (_, header) = safetensors::SafeTensors::read_metadata(&raw).with_context(context)?;
    let meta = header.metadata().clone().unwrap_or_default();
    let get = |key: &str| {
        meta.get(key)
            .cloned()
            .ok_or_else(|| anyhow!("{}: not a saved memory (no `{key}`)", path.display()))
    };
    if get("format")? != FORMAT {
        bail!(
            "{}: not a saved memory (format {})",
            path.display(),
            get("format")?
        );
    }
    if get("version")? != VERSION {
        bail!(
            "{}: saved memory version {} (this build reads {VERSION})",
            path.display(),
            get("version")?
        );
    }
    let number = |key: &str| -> Result<usize> {
        get(key)?
            .parse()
            .map_err(|_| anyhow!("{}: `{key}` is not a number", path.display()))
    };
    let (input_dim, num_labels) = (number("input_dim")?, number("num_labels")?);
    if (input_dim, num_labels) != (features, labels) {
        bail!(
            "{}: the memory has {input_dim} features and {num_labels} labels, the data {features} and {labels}",
            path.display()
        );
    }
    let idf = get("idf")? == "true";
    let tensors = safetensors::SafeTensors::deserialize(&raw).with_context(context)?;
    let array = |name: &str, dtype: Dtype| -> Result<Vec<u8>> {
        let t = tensors
            .tensor(name)
            .map_err(|_| anyhow!("{}: no `{name}` array", path.display()))?;
        if t.dtype() != dtype {
            bail!(
                "{}: `{name}` is {:?}, not {dtype:?}",
                path.display(),
                t.dtype()
            );
        }
        Ok(t.data().to_vec())
    };
    let u32s = |b: Vec<u8>| -> Vec<u32> {
        b.chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect()
    };
    let f32s = |b: Vec<u8>| -> Vec<f32> {
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect()
    };
    let u64s = |b: Vec<u8>| -> Vec<u64> {
        b.chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect()
    };
    let arrays = MemoryArrays {
        feature_weights: f32s(array("feature_weights", Dtype::F32)?),
        unit_offsets: u64s(array("unit_offsets", Dtype::U64)?),
        unit_features: u32s(array("unit_features", Dtype::U32)?),
        unit_values: f32s(array("unit_values", Dtype::F32)?),
        label_offsets: u64s(array("label_offsets", Dtype::U64)?),
        labels: u32s(array("labels", Dtype::U32)?),
    };
    // A memory tuned when built answers with the pair tuning chose, unless the config
    // turns tuning off (then its own pair, as for an untuned memory).
    let mut settings = MemoryConfig { idf, ..config };
    if config.tune > 0 && meta.get("tuned").is_some_and(|t| t == "true") {
        let real = |key: &str| -> Result<f32> {
            get(key)?
                .parse()
                .map_err(|_| anyhow!("{}: `{key}` is not a number", path.display()))
        };
        settings.power = real("power")?;
        settings.vote_weight = real("vote_weight")?;
    }
    Memory::from_arrays(settings, input_dim, num_labels, arrays).with_context(context)
}

/// The saved memory a `--checkpoint` names: the file itself, or [`FILE_NAME`] in a folder.
pub fn checkpoint_file(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join(FILE_NAME)
    } else {
        path.to_path_buf()
    }
}

/// The config's data and the memory saved at `path` (a file, or the checkpoint folder
/// holding [`FILE_NAME`]), checked against the data's shape; `say` gets the data's
/// announcement: what `eval` and `predict` of a memory score.
pub fn restored(
    config: &Config,
    memory: MemoryConfig,
    path: &Path,
    say: &dyn Fn(String),
) -> Result<(Loaded, Memory), Failure> {
    let loaded = load_data(config, say)?;
    let built = load(
        &checkpoint_file(path),
        memory,
        loaded.features,
        loaded.labels,
    )
    .map_err(Failure::Input)?;
    Ok((loaded, built))
}

/// Each test sample's answers from the saved memory at `path` (see
/// [`crate::predict::predict_checkpoint`]).
pub(crate) fn predict(
    config: &Config,
    memory: MemoryConfig,
    path: &Path,
    samples: Option<usize>,
    search: Search,
) -> Result<Answers, Failure> {
    let (loaded, built) = restored(config, memory, path, &|line| eprintln!("{line}"))?;
    let test = loaded.test.examples();
    let batch: Vec<usize> = (0..samples.unwrap_or(usize::MAX).min(test.len())).collect();
    let started = Instant::now();
    let answers = built
        .predict(test, &batch, search)
        .map_err(|e| Failure::Input(e.into()))?;
    Ok(Answers {
        predictions: answers,
        seconds: started.elapsed().as_secs_f64(),
        loaded,
        batch,
    })
}
