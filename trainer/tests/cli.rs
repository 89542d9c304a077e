//! The real `slide-train` binary: end-to-end runs and one-line errors with exit status 2.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::*;

/// The quickstart config on the shipped MNIST, cut to 150 steps: the sparse hidden layer
/// learns. Measured: test accuracy 0.91 on all 10,000 test images after 150 steps.
#[test]
fn quickstart_config_learns_mnist() {
    let out = scratch("quickstart");
    let run = slide_train(&[
        "--config",
        "quickstart.toml",
        "--set",
        "train.max_steps=150",
        "--set",
        "train.eval_every=0",
        "--threads",
        "2",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = succeeded(&run);
    let accuracy = final_metric(&stdout, "test accuracy");
    eprintln!("quickstart, 150 steps: accuracy {accuracy}");
    assert!(accuracy > 0.85, "accuracy {accuracy}\n{stdout}");
    let metrics = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();
    assert!(metrics.lines().count() >= 3, "{metrics}");
    assert!(
        metrics
            .lines()
            .all(|l| l.starts_with("{\"step\":") && l.contains("\"loss\":"))
    );
}

/// Learnable multi-label data in the XMC text format: each of 50 labels owns 4 of 300
/// features.
fn xmc_config(dir: &Path) -> PathBuf {
    XmcRun {
        hidden: 32,
        labels: 50,
        range_pow: 6,
        lsh: "budget = 10\nmin_active = 10",
        epochs: 10,
    }
    .write(dir, "xmc.toml")
}

/// Multi-label XMC text data, input-major hidden layer, LSH output: P@1 and P@5 are
/// reported and P@1 is high. Measured: P@1 1.000, P@5 0.292 (at most 0.3: 1.5 labels on average).
#[test]
fn xmc_text_data_trains_to_a_high_precision() {
    let dir = scratch("xmc");
    let config = xmc_config(&dir);
    let out = dir.join("out");
    let run = slide_train(&[
        "--config",
        config.to_str().unwrap(),
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = succeeded(&run);
    let p1 = final_metric(&stdout, "P@1");
    let p5 = final_metric(&stdout, "P@5");
    eprintln!("xmc: P@1 {p1}, P@5 {p5}");
    assert!(p1 > 0.8, "P@1 {p1}\n{stdout}");
    assert!(
        p5 > 0.2 && p5 <= 0.4,
        "P@5 {p5} (at most 2 labels of 5)\n{stdout}"
    );
}

/// `init = { centroids = ... }` on the output layer: a new run starts from its labels'
/// centroids, so one step at a negligible rate already ranks far above the default start.
#[test]
fn a_new_run_starts_from_label_centroids() {
    let dir = scratch("centroids");
    let config = xmc_config(&dir);
    let p1 = |name: &str, init: &str| {
        let out = dir.join(name);
        let mut args = vec!["--config", config.to_str().unwrap(), "--quiet"];
        for set in ["train.max_steps=1", "train.lr=0.000001", init] {
            args.extend(["--set", set]);
        }
        args.extend(["--out", out.to_str().unwrap()]);
        final_metric(&succeeded(&slide_train(&args)), "P@1")
    };
    let warm = p1(
        "warm",
        "network.layers.1.init={centroids={norm=3.0,shrink=3.0}}",
    );
    let cold = p1("cold", "network.layers.1.init=\"glorot\"");
    assert!(
        warm > 0.5 && cold < 0.2,
        "P@1 after one step: {warm} warm, {cold} cold"
    );
}

/// One quiet epoch of the XMC config in `dir` with `sets` (`section.key=value`) into
/// `dir/out`: the config's path, the output folder and the run's stdout (it succeeded).
fn one_epoch(dir: &Path, sets: &[&str]) -> (PathBuf, PathBuf, String) {
    let config = xmc_config(dir);
    let out = dir.join("out");
    let mut args = vec!["--config", config.to_str().unwrap(), "--quiet"];
    for set in ["train.epochs=1"].iter().chain(sets) {
        args.extend(["--set", set]);
    }
    args.extend(["--out", out.to_str().unwrap()]);
    let stdout = succeeded(&slide_train(&args));
    (config, out, stdout)
}

/// The number right after the first `marker` in `text` (up to the next space).
fn number_after(text: &str, marker: &str) -> u64 {
    text.split(marker)
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no number after `{marker}` in `{text}`"))
}

/// `checkpoint.at_end = false` trains without writing the final checkpoint (the default
/// writes one: the other tests load it).
#[test]
fn a_run_without_the_final_checkpoint_writes_none() {
    let dir = scratch("no-final-checkpoint");
    let (_, out, stdout) = one_epoch(&dir, &["checkpoint.at_end=false"]);
    assert!(stdout.contains("0 checkpoints"), "{stdout}");
    let written = std::fs::read_dir(out.join("checkpoints"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(written, 0);
}

/// Periodic checkpoints are synced and renamed beside the next steps: when the run ends on
/// one, it is still in place, complete and the newest, before the run reports, with no
/// temporary file left, and only `keep_last` of them are kept.
#[test]
fn a_run_ending_on_a_periodic_checkpoint_leaves_it_complete() {
    let dir = scratch("periodic-checkpoints");
    let sets = ["checkpoint.every=1", "checkpoint.keep_last=2"];
    let (config, out, stdout) = one_epoch(&dir, &sets);
    let steps = number_after(&stdout, "done: ");
    assert!(stdout.contains(&format!("{steps} checkpoints")), "{stdout}");
    let checkpoints = out.join("checkpoints");
    let complete = slide_trainer::checkpoint::list(&checkpoints).unwrap();
    assert_eq!(complete.len(), 2);
    let newest = checkpoints.join(format!("checkpoint-{steps:010}.safetensors"));
    assert_eq!(complete.last(), Some(&newest));
    let leftovers: Vec<_> = std::fs::read_dir(&checkpoints)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let eval = slide_train(&[
        "eval",
        "--config",
        config.to_str().unwrap(),
        "--checkpoint",
        newest.to_str().unwrap(),
    ]);
    succeeded(&eval);
}

/// `predict` writes one line per test sample, its best outputs as `output:logit` pairs in
/// falling order, to standard output (nothing else there) or a file, with the same P@1 as
/// `eval` on stderr; a top-k of 0 is refused with exit status 2 and one line, before any
/// work.
#[test]
fn predict_writes_each_samples_best_outputs() {
    let dir = scratch("predict");
    let (config, out, _) = one_epoch(&dir, &[]);
    let checkpoint = slide_trainer::checkpoint::list(&out.join("checkpoints")).unwrap();
    let checkpoint = checkpoint.last().unwrap().to_str().unwrap();
    let config = config.to_str().unwrap();
    let eval = succeeded(&slide_train(&[
        "eval",
        "--config",
        config,
        "--checkpoint",
        checkpoint,
    ]));
    // `CKPT: step S, N test samples, exact mode: P@1 ...`
    let scored = eval
        .lines()
        .find(|l| l.contains(" test samples, exact mode: P@1"))
        .unwrap();
    let samples = number_after(scored, ", ") as usize;
    let args = [
        "predict",
        "--config",
        config,
        "--checkpoint",
        checkpoint,
        "--top-k",
        "3",
    ];
    let run = slide_train(&args);
    let printed = succeeded(&run);
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), samples, "{printed}");
    for line in &lines {
        let logits: Vec<f32> = line
            .split(' ')
            .map(|pair| {
                let (id, logit) = pair.split_once(':').expect("output:logit");
                assert!(id.parse::<u32>().is_ok(), "{line}");
                logit.parse().unwrap()
            })
            .collect();
        assert_eq!(logits.len(), 3, "{line}");
        assert!(logits.windows(2).all(|w| w[0] >= w[1]), "{line}");
    }
    let p1 = |stats: &str, marker: &str| -> String {
        let rest = &stats[stats.find(marker).unwrap_or_else(|| panic!("{stats}")) + marker.len()..];
        rest.split([',', ' ']).next().unwrap().to_string()
    };
    assert_eq!(p1(&text(&run.stderr), "P@1 "), p1(scored, "P@1 "));
    let file = dir.join("predictions.txt");
    let to_file = [&args[..], &["--out", file.to_str().unwrap()]].concat();
    assert!(succeeded(&slide_train(&to_file)).is_empty());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), printed);
    // LSH mode with a batch pool as wide as the output layer scores every output: the
    // exact answers (the pool's logits come from another summation order, so only the ids
    // are compared).
    let pooled = [&args[..], &["--mode", "lsh", "--set", "train.eval_pool=50"]].concat();
    let ids = |text: &str| -> Vec<String> {
        text.lines()
            .map(|l| l.split(' ').map(|p| p.split(':').next().unwrap()).collect())
            .collect()
    };
    let pooled = succeeded(&slide_train(&pooled));
    assert_eq!(ids(&pooled)[..], ids(&printed)[..]);
    let refused = slide_train(&[&args[..5], &["--top-k", "0"]].concat());
    assert_eq!(refused.status.code(), Some(2));
    assert_eq!(
        text(&refused.stderr).lines().count(),
        1,
        "{}",
        text(&refused.stderr)
    );
}

/// Bad configs, data and flags: exit status 2 and one line on stderr saying what and where.
#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = scratch("errors");
    let config = xmc_config(&dir);
    let config = config.to_str().unwrap();
    let bad_data = dir.join("bad.txt");
    std::fs::write(&bad_data, "2 300 50\n0 1:1\n1 999:1\n").unwrap();
    let unlabeled = dir.join("unlabeled.txt");
    std::fs::write(&unlabeled, "3 300 50\n0 1:1\n 2:1\n4 3:1\n").unwrap();
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec!["--set".into(), "train.bogus=1".into()],
            "unknown field `bogus`".into(),
        ),
        (
            vec!["--set".into(), "train.batch_size=0".into()],
            "train.batch_size must be at least 1".into(),
        ),
        (
            vec!["--set".into(), "train.lr=\"fast\"".into()],
            "invalid type".into(),
        ),
        (
            vec!["--set".into(), "train.eval_picks=0".into()],
            "train.eval_picks: must be at least 1".into(),
        ),
        (
            vec!["--set".into(), "train.eval_mode=\"fast\"".into()],
            "unknown variant `fast`".into(),
        ),
        (
            vec!["--set".into(), "network.layers=[]".into()],
            "at least one layer is needed".into(),
        ),
        (
            vec!["--threads".into(), "0".into()],
            "--threads must be at least 1".into(),
        ),
        (
            vec![
                "--set".into(),
                format!("data.train=\"{}\"", bad_data.display()),
            ],
            format!(
                "{}:3: feature 999 is out of range: features are below 300",
                bad_data.display()
            ),
        ),
        (
            vec!["--set".into(), "data.test=\"/nonexistent/test.txt\"".into()],
            "/nonexistent/test.txt: no such file. The data files go where data.train and data.test say".into(),
        ),
        (
            vec!["--set".into(), "data.test=\"/nonexistent/test.txt\"".into()],
            "slide-train gen-data --preset amazon670k --out DIR".into(),
        ),
        (
            vec![
                "--set".into(),
                format!("data.train=\"{}\"", unlabeled.display()),
            ],
            format!(
                "{}, line 3: training sample 1 has no labels (1 of 3 training samples have none)",
                unlabeled.display()
            ),
        ),
        (
            vec!["--set".into(), "data.labels=49".into()],
            "data.labels = 49 but the data has 50".into(),
        ),
        (
            vec!["--set".into(), "train.lr=-1.0".into()],
            "train.lr: must be positive".into(),
        ),
        (
            vec!["--set".into(), "network.layers.1.lsh.family.dwta.bin_size=3".into()],
            "network.layers[1].lsh: invalid LSH parameter `bin_size` = 3: must be a power of two".into(),
        ),
        (
            vec!["--set".into(), "train.lr_min=1.0".into()],
            "train.lr_min: must be between 0 and lr".into(),
        ),
        // 300 inputs x 2e9 hidden neurons with Adam state: terabytes, refused before any
        // allocation with the estimate.
        (
            vec!["--set".into(), "network.layers.0.size=2000000000".into()],
            "GB of memory is available".into(),
        ),
    ];
    for (extra, expected) in cases {
        let mut args = vec![
            "--config".to_string(),
            config.to_string(),
            "--out".into(),
            dir.join("o").display().to_string(),
        ];
        args.extend(extra.iter().cloned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = slide_train(&args);
        let stderr = text(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{extra:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{extra:?}: {stderr}");
        assert!(
            stderr.contains(&expected),
            "{extra:?}: expected `{expected}` in `{stderr}`"
        );
    }
    let run = slide_train(&["--config", "no-such-config.toml"]);
    assert_eq!(run.status.code(), Some(2));
    assert!(text(&run.stderr).contains("no-such-config.toml: No such file or directory"));
}

fn checksum_of(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    let header = String::from_utf8_lossy(&bytes[..bytes.len().min(1 << 16)]).into_owned();
    let at = header
        .find("\"checksum\":\"")
        .expect("checksum in the header")
        + 12;
    header[at..at + 16].to_string()
}

/// A run stopped at step 39 and resumed from its checkpoint ends with exactly the weights,
/// Adam state and tables of an uninterrupted run (the checkpoints' checksums cover every
/// tensor), and writes the same metrics after the resume point (wall-clock fields aside).
/// One thread gives the same weights as two. Corrupt, truncated and foreign checkpoints are
/// refused with exit status 2.
#[test]
fn a_resumed_run_ends_bit_identical_to_an_uninterrupted_one() {
    let dir = scratch("resume");
    let config = xmc_config(&dir);
    let config = config.to_str().unwrap();
    let (a, b) = (dir.join("a"), dir.join("b"));
    let common = [
        "--config",
        config,
        "--quiet",
        "--threads",
        "2",
        "--set",
        "train.epochs=3",
        // The learning rate follows the step, so a resumed run takes the same rates.
        "--set",
        "train.lr_schedule=\"cosine\"",
        // A new run's output rows start at their labels' centroids; a resumed one keeps
        // the checkpoint's.
        "--set",
        "network.layers.1.init={centroids={norm=3.0,shrink=3.0}}",
    ];
    let run = |extra: &[&str]| {
        let mut args: Vec<&str> = common.to_vec();
        args.extend_from_slice(extra);
        let out = slide_train(&args);
        assert!(
            out.status.success(),
            "{}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    };
    run(&["--out", a.to_str().unwrap()]);
    run(&[
        "--out",
        b.to_str().unwrap(),
        "--set",
        "train.max_steps=39",
        "--set",
        "checkpoint.every=13",
    ]);
    let stopped = b.join("checkpoints/checkpoint-0000000039.safetensors");
    assert!(stopped.exists());
    let at_39 = checksum_of(&stopped);
    // The folder stands for its newest checkpoint.
    run(&[
        "--out",
        b.to_str().unwrap(),
        "--resume",
        b.join("checkpoints").to_str().unwrap(),
    ]);
    // 2,000 samples in batches of 64: 32 steps per epoch, 96 in all.
    let final_a = a.join("checkpoints/checkpoint-0000000096.safetensors");
    let final_b = b.join("checkpoints/checkpoint-0000000096.safetensors");
    assert_eq!(checksum_of(&final_a), checksum_of(&final_b));
    assert_ne!(
        checksum_of(&final_a),
        at_39,
        "training after step 39 changed nothing?"
    );
    // The metrics after step 39 match: losses, evaluations at the epoch ends (steps 64 and
    // 96), learning rates, active neurons, rows touched.
    let after_39 = |dir: &Path| -> Vec<String> {
        std::fs::read_to_string(dir.join("metrics.jsonl"))
            .unwrap()
            .lines()
            .map(|l| {
                let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                let fields = v.as_object_mut().unwrap();
                for clock in [
                    "seconds",
                    "samples_per_second",
                    "train_seconds",
                    "train_samples_per_second",
                    "eval_seconds",
                    "rss_mib",
                    "phase_seconds",
                    "checkpoint_seconds",
                    // Counts this process's checkpoints: differs in a resumed run.
                    "checkpoints",
                ] {
                    fields.remove(clock);
                }
                v
            })
            .filter(|v| v["step"].as_u64().unwrap() > 39)
            .map(|v| v.to_string())
            .collect()
    };
    let (metrics_a, metrics_b) = (after_39(&a), after_39(&b));
    assert!(metrics_a.len() > 10, "{metrics_a:?}");
    assert_eq!(metrics_a.iter().filter(|l| l.contains("p_at_1")).count(), 2);
    assert_eq!(metrics_a, metrics_b);

    // One thread: the same final weights as two.
    let one = dir.join("one");
    let mut args: Vec<&str> = common.to_vec();
    args[4] = "1";
    args.extend_from_slice(&["--out", one.to_str().unwrap()]);
    let out = slide_train(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        checksum_of(&one.join("checkpoints/checkpoint-0000000096.safetensors")),
        checksum_of(&final_a)
    );
    refuses_bad_checkpoints(&dir, &common, &final_a);
}

/// Corrupt, truncated and foreign checkpoints of `final_checkpoint`, written by a run of
/// `common`, are refused by `--resume` with exit status 2 and a line that says why.
fn refuses_bad_checkpoints(dir: &Path, common: &[&str], final_checkpoint: &Path) {
    let refused = |path: &Path, extra: &[&str], expected: &str| {
        let out_dir = dir.join("c");
        let mut args: Vec<&str> = common.to_vec();
        args.extend_from_slice(&[
            "--out",
            out_dir.to_str().unwrap(),
            "--resume",
            path.to_str().unwrap(),
        ]);
        args.extend_from_slice(extra);
        let out = slide_train(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(expected),
            "expected `{expected}` in `{stderr}`"
        );
    };
    let mut bytes = std::fs::read(final_checkpoint).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x5a;
    let flipped = dir.join("flipped.safetensors");
    std::fs::write(&flipped, &bytes).unwrap();
    refused(&flipped, &[], "checksum mismatch: the file is corrupt");
    let truncated = dir.join("truncated.safetensors");
    std::fs::write(&truncated, &bytes[..bytes.len() - 100]).unwrap();
    refused(&truncated, &[], "not a readable safetensors checkpoint");
    refused(
        final_checkpoint,
        &["--set", "train.lr=0.02"],
        "was written with other training settings (adam: checkpoint AdamConfig { lr: 0.01",
    );
    refused(
        final_checkpoint,
        &["--set", "network.layers.0.size=48"],
        "was written for a different network (layers.0.out_dim: checkpoint 32, config 48",
    );
}

/// `gen-data` writes files the XMC reader accepts, the same for the same seed; a model
/// trained on them learns (measured: test P@1 0.34 after 20 epochs of 2,452 points, where
/// always predicting the most frequent label gives about 0.015), and `eval` on the final
/// checkpoint reproduces the run's final metrics.
#[test]
fn generated_data_trains_and_eval_reproduces_the_final_metrics() {
    let dir = scratch("gen");
    let generate = |seed: &str, out: &Path| {
        let run = slide_train(&[
            "gen-data",
            "--preset",
            "amazon670k",
            "--scale",
            "0.005",
            "--seed",
            seed,
            "--out",
            out.to_str().unwrap(),
        ]);
        succeeded(&run)
    };
    let said = generate("3", &dir.join("a"));
    assert!(
        said.starts_with("wrote 2452 train and 765 test points (680 features, 3350 labels)"),
        "{said}"
    );
    generate("3", &dir.join("b"));
    generate("4", &dir.join("c"));
    let read = |p: &str| std::fs::read(dir.join(p)).unwrap();
    assert_eq!(read("a/train.txt"), read("b/train.txt"));
    assert_ne!(read("a/train.txt"), read("c/train.txt"));
    assert!(
        String::from_utf8(read("a/test.txt"))
            .unwrap()
            .starts_with("765 680 3350\n")
    );

    let config = dir.join("gen.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[data]
format = "xmc"
train = "{d}/a/train.txt"
test = "{d}/a/test.txt"
[[network.layers]]
size = 64
activation = "relu"
layout = "input-major"
[[network.layers]]
size = 3350
activation = "softmax"
[network.layers.lsh]
family = {{ dwta = {{ bin_size = 8 }} }}
k = 3
l = 20
range_pow = 9
strategy = "vanilla"
budget = 128
min_active = 128
[train]
epochs = 20
batch_size = 64
lr = 0.003
seed = 2
rebuild_every = 20
"#,
            d = dir.display()
        ),
    )
    .unwrap();
    let out = dir.join("out");
    let run = slide_train(&[
        "--config",
        config.to_str().unwrap(),
        "--quiet",
        "--threads",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = succeeded(&run);
    let p1 = final_metric(&stdout, "P@1");
    eprintln!("generated amazon670k x0.005: P@1 {p1}");
    assert!(p1 > 0.2, "{stdout}");
    let checkpoint = out.join("checkpoints/checkpoint-0000000780.safetensors");
    let eval = slide_train(&[
        "eval",
        "--config",
        config.to_str().unwrap(),
        "--checkpoint",
        checkpoint.to_str().unwrap(),
    ]);
    let said = text(&eval.stdout);
    assert!(eval.status.success(), "{said}{}", text(&eval.stderr));
    assert!(
        said.contains(&format!("P@1 {p1:.4}")),
        "eval says `{said}`, training ended at P@1 {p1:.4}"
    );
}

/// A learning rate of 1e37 blows the weights up within two steps: the run stops with exit
/// status 1 and a message naming the step, and the checkpoint it leaves is the last one
/// whose parameters were finite, which still loads.
#[test]
fn a_diverging_run_stops_and_keeps_the_last_good_checkpoint() {
    let dir = scratch("diverge");
    let config = xmc_config(&dir);
    let config = config.to_str().unwrap();
    let out = dir.join("out");
    let overrides = ["--set", "train.lr=1e37", "--set", "checkpoint.every=1"];
    let mut args = vec![
        "--config",
        config,
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(&overrides);
    let run = slide_train(&args);
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("slide-train: step "), "{stderr}");
    assert!(
        stderr.contains("training diverged")
            && stderr.contains("the last good checkpoint is the newest in"),
        "{stderr}"
    );
    let kept: Vec<_> = std::fs::read_dir(out.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let mut eval = vec![
        "eval",
        "--config",
        config,
        "--checkpoint",
        kept[0].to_str().unwrap(),
    ];
    eval.extend_from_slice(&overrides);
    let run = slide_train(&eval);
    succeeded(&run);
}

/// `plot` draws a PNG from a metrics file; a malformed line is reported with file and line.
#[test]
fn plot_draws_a_png_and_names_bad_lines() {
    let dir = scratch("plot");
    let metrics = dir.join("metrics.jsonl");
    let records: Vec<String> = (1..=20)
        .map(|s| {
            let p1 = if s % 5 == 0 {
                format!(",\"p_at_1\":{}", s as f64 / 40.0)
            } else {
                String::new()
            };
            format!(
                "{{\"step\":{s},\"epoch\":1,\"seconds\":{},\"loss\":{}{p1}}}",
                s as f64 * 0.1,
                5.0 / s as f64
            )
        })
        .collect();
    std::fs::write(&metrics, records.join("\n")).unwrap();
    let png = dir.join("curve.png");
    let run = slide_train(&[
        "plot",
        metrics.to_str().unwrap(),
        "--out",
        png.to_str().unwrap(),
    ]);
    succeeded(&run);
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(
        bytes.len() > 20_000,
        "a 1200x800 chart with text: {} bytes",
        bytes.len()
    );

    std::fs::write(&metrics, format!("{}\n{{\"step\":3}}\n", records[0])).unwrap();
    let run = slide_train(&[
        "plot",
        metrics.to_str().unwrap(),
        "--out",
        png.to_str().unwrap(),
    ]);
    assert_eq!(run.status.code(), Some(2));
    assert!(
        text(&run.stderr).contains(&format!("{}:2: no number `seconds`", metrics.display())),
        "{}",
        text(&run.stderr)
    );
}

/// Waits until the run writing `metrics` has logged a line, or fails after 60 s.
fn wait_for_metrics(metrics: &Path, child: &mut std::process::Child) {
    let started = std::time::Instant::now();
    while !std::fs::read_to_string(metrics).is_ok_and(|m| m.lines().count() >= 1) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before logging"
        );
        assert!(started.elapsed().as_secs() < 60, "no metrics after 60 s");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn spawn_training(config: &Path, out: &Path, extra: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_slide-train"))
        .args([
            "--config",
            config.to_str().unwrap(),
            "--quiet",
            "--threads",
            "2",
        ])
        .args(["--out", out.to_str().unwrap()])
        .args(extra)
        .current_dir(repo())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("slide-train starts")
}

/// Ctrl-C (SIGINT) stops training at the next step boundary: a checkpoint of that step is
/// written, the one-line message names it, the exit status is 130, and the run resumes
/// from it.
#[test]
fn sigint_writes_a_checkpoint_and_exits_130() {
    let dir = scratch("sigint");
    let config = xmc_config(&dir);
    let out = dir.join("run");
    let mut child = spawn_training(
        &config,
        &out,
        &["--set", "train.epochs=1000", "--set", "checkpoint.every=0"],
    );
    wait_for_metrics(&out.join("metrics.jsonl"), &mut child);
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let result = child.wait_with_output().unwrap();
    let stderr = text(&result.stderr);
    assert_eq!(result.status.code(), Some(130), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let step = number_after(&stderr, "interrupted at step ");
    let saved = out.join(format!("checkpoints/checkpoint-{step:010}.safetensors"));
    assert!(saved.exists(), "{stderr}");
    assert!(stderr.contains(&format!("--resume {}", saved.display())));
    let resumed = slide_train(&[
        "--config",
        config.to_str().unwrap(),
        "--quiet",
        "--out",
        out.to_str().unwrap(),
        "--resume",
        saved.to_str().unwrap(),
        "--set",
        &format!("train.max_steps={}", step + 5),
    ]);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    assert!(text(&resumed.stdout).contains(&format!("resumed from {}", saved.display())));
}

/// SIGKILL at random moments while a checkpoint is written every step, 25 rounds, each
/// resuming from the newest checkpoint the previous round left: every checkpoint file in
/// the folder always loads and evaluates (a half-written file is never taken for one), and
/// the rounds add up to progress.
#[test]
fn kill_9_during_checkpoint_writes_never_leaves_a_bad_checkpoint() {
    let dir = scratch("kill9");
    let config = xmc_config(&dir);
    let out = dir.join("run");
    let checkpoints = out.join("checkpoints");
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut last_step = 0;
    let mut temporaries_seen = 0;
    for round in 0..25 {
        let mut extra = vec![
            "--set",
            "train.epochs=1000",
            "--set",
            "checkpoint.every=1",
            "--set",
            "checkpoint.keep_last=3",
        ];
        let newest = checkpoints.to_str().unwrap().to_string();
        if round > 0 {
            extra.extend_from_slice(&["--resume", &newest]);
        }
        let mut child = spawn_training(&config, &out, &extra);
        wait_for_metrics(&out.join("metrics.jsonl"), &mut child);
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        std::thread::sleep(std::time::Duration::from_millis(state % 300));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        temporaries_seen += std::fs::read_dir(&checkpoints)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".tmp")
            })
            .count();
        let complete = slide_trainer::checkpoint::list(&checkpoints).unwrap();
        assert!(!complete.is_empty());
        for path in &complete {
            let eval = slide_train(&[
                "eval",
                "--config",
                config.to_str().unwrap(),
                "--checkpoint",
                path.to_str().unwrap(),
                "--samples",
                "10",
            ]);
            assert!(
                eval.status.success(),
                "round {round}: {} does not load: {}",
                path.display(),
                text(&eval.stderr)
            );
        }
        let newest = complete
            .last()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let step: u64 = newest["checkpoint-".len()..newest.len() - ".safetensors".len()]
            .parse()
            .unwrap();
        assert!(
            step >= last_step,
            "round {round}: went back from {last_step} to {step}"
        );
        last_step = step;
    }
    eprintln!(
        "25 kill -9 rounds: reached step {last_step}; {temporaries_seen} half-written files seen and ignored"
    );
    assert!(last_step > 25, "{last_step}");
}

/// A soak in CI size: 3,000 steps with a checkpoint every 25 steps and a table rebuild every
/// 10; resident memory, sampled in every metrics line, stays within 8 MiB of its value
/// after warm-up (the first 500 steps).
#[test]
fn memory_stays_flat_over_thousands_of_steps() {
    let dir = scratch("soak");
    let config = xmc_config(&dir);
    let out = dir.join("run");
    let run = slide_train(&[
        "--config",
        config.to_str().unwrap(),
        "--quiet",
        "--threads",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--set",
        "train.epochs=1000",
        "--set",
        "train.max_steps=3000",
        "--set",
        "train.rebuild_every=10",
        "--set",
        "checkpoint.every=25",
        "--set",
        "checkpoint.keep_last=2",
    ]);
    succeeded(&run);
    let samples: Vec<(u64, f64)> = std::fs::read_to_string(out.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["step"].as_u64().unwrap(), v["rss_mib"].as_f64().unwrap())
        })
        .collect();
    assert!(samples.len() > 500, "{}", samples.len());
    let warm = samples.iter().find(|s| s.0 >= 500).unwrap().1;
    let after: Vec<f64> = samples.iter().filter(|s| s.0 >= 500).map(|s| s.1).collect();
    let peak = after.iter().copied().fold(0.0, f64::max);
    let low = after.iter().copied().fold(f64::MAX, f64::min);
    eprintln!(
        "soak: {} samples of RSS, {warm:.1} MiB at step 500, {low:.1}..{peak:.1} MiB after",
        samples.len()
    );
    assert!(peak - warm < 8.0, "RSS grew from {warm} to {peak} MiB");
}

/// Checkpoints stream the state instead of copying it: a run of a 60,000-label model (about
/// 100 MB) that writes a checkpoint every 2 steps peaks less than a tenth of the model
/// above the resident memory its steps report, and under its up-front estimate; a memory
/// limit below the estimate is refused before any work (exit 2).
#[test]
fn checkpoints_hold_no_copy_of_the_model_and_the_estimate_bounds_the_run() {
    let dir = scratch("memory");
    for (name, samples, seed) in [("train.txt", 400, 1), ("test.txt", 100, 2)] {
        let path = dir.join(name);
        write_xmc(&path, samples, seed);
        let text = std::fs::read_to_string(&path).unwrap();
        let body = text.split_once('\n').unwrap().1;
        std::fs::write(&path, format!("{samples} 300 60000\n{body}")).unwrap();
    }
    let config = dir.join("wide.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[data]
format = "xmc"
train = "{dir}/train.txt"
test = "{dir}/test.txt"

[[network.layers]]
size = 128
activation = "relu"
layout = "input-major"

[[network.layers]]
size = 60000
activation = "softmax"
[network.layers.lsh]
family = {{ dwta = {{ bin_size = 8 }} }}
k = 4
l = 16
range_pow = 12
strategy = "top-k"
budget = 256
min_active = 256

[train]
epochs = 100
batch_size = 64
lr = 0.001
seed = 3
"#,
            dir = dir.display()
        ),
    )
    .unwrap();
    let out = dir.join("run");
    let args = |extra: &[&str]| {
        let mut args = vec![
            "--config",
            config.to_str().unwrap(),
            "--quiet",
            "--threads",
            "2",
            "--out",
            out.to_str().unwrap(),
            "--set",
            "train.max_steps=12",
            "--set",
            "train.eval_every=0",
            "--set",
            "checkpoint.every=2",
        ];
        args.extend_from_slice(extra);
        slide_train(&args)
    };
    let run = args(&[]);
    let stdout = succeeded(&run);
    let number_before = |key: &str| -> f64 {
        let at = stdout
            .find(key)
            .unwrap_or_else(|| panic!("{key} in {stdout}"));
        stdout[..at]
            .split_whitespace()
            .last()
            .unwrap()
            .parse()
            .unwrap()
    };
    let model_mb = number_before("MB, the run at most");
    let estimate_mb = number_before("MB\n");
    let peak_mb = final_metric(&stdout, "peak RSS") * 1.048_576;
    let steps_mb = std::fs::read_to_string(out.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["rss_mib"].as_f64().unwrap() * 1.048_576
        })
        .fold(0.0, f64::max);
    eprintln!(
        "model {model_mb} MB, estimate {estimate_mb} MB, steps {steps_mb:.1} MB, peak {peak_mb:.1} MB"
    );
    assert!(model_mb > 90.0, "{model_mb}");
    assert!(
        peak_mb - steps_mb < 0.1 * model_mb,
        "{steps_mb} -> {peak_mb}"
    );
    assert!(peak_mb <= estimate_mb, "{peak_mb} > {estimate_mb}");

    let limit = format!("train.memory_limit_mb={}", estimate_mb as u64 - 1);
    let refused = args(&["--set", &limit]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stdout));
    let message = text(&refused.stderr);
    assert!(
        message.contains("but train.memory_limit_mb is"),
        "{message}"
    );
}
