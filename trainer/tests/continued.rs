//! `slide-train --init-from`: a trained model continued on new data with new labels grows
//! its output layer and predicts labels it never saw; continuations that cannot work are
//! refused with one line, before any work, and write nothing.

mod support;

use std::path::{Path, PathBuf};

use support::*;

/// A config whose output layer takes the label count of `train`'s header (no `size`).
fn config(dir: &Path, name: &str, train: &Path, test: &Path) -> PathBuf {
    let text = format!(
        r#"
[data]
format = "xmc"
train = "{train}"
test = "{test}"

[[network.layers]]
size = 32
activation = "relu"
layout = "input-major"

[[network.layers]]
activation = "softmax"
[network.layers.lsh]
family = {{ dwta = {{ bin_size = 8 }} }}
k = 2
l = 20
range_pow = 6
strategy = "top-k"
budget = 10
min_active = 10

[[network.heads]]
kind = "label-linear"
bits = 12

[train]
epochs = 10
batch_size = 64
lr = 0.01
seed = 3
rebuild_every = 20
"#,
        train = train.display(),
        test = test.display()
    );
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// The lines of the XMC file `from` whose labels `keep` accepts, under a header of
/// `features` and `labels`, into `to`.
fn filter(from: &Path, to: &Path, features: usize, labels: usize, keep: impl Fn(&[u32]) -> bool) {
    let text = std::fs::read_to_string(from).unwrap();
    let rows: Vec<&str> = text
        .lines()
        .skip(1)
        .filter(|l| {
            let ids: Vec<u32> = l
                .split(' ')
                .next()
                .unwrap()
                .split(',')
                .map(|y| y.parse().unwrap())
                .collect();
            keep(&ids)
        })
        .collect();
    let mut out = format!("{} {features} {labels}\n", rows.len());
    for row in rows {
        out.push_str(row);
        out.push('\n');
    }
    std::fs::write(to, out).unwrap();
}

/// Old data (labels below 40 of 48), the model trained on it, and the new data: `(dir,
/// config, checkpoint)`. Files: `old-train.txt`, `old-test.txt` (40 labels), `new-train.txt`
/// (the samples with a label of 40-47), `test.txt` (48 labels), `new-test.txt` (the test
/// samples with a new label).
fn trained(test: &str) -> (Scratch, PathBuf, PathBuf) {
    let dir = scratch(test);
    write_xmc_labels(&dir.join("all-train.txt"), 3000, 48, 1);
    write_xmc_labels(&dir.join("test.txt"), 600, 48, 2);
    let old = |ys: &[u32]| ys.iter().all(|&y| y < 40);
    for (from, to, labels, new) in [
        ("all-train.txt", "old-train.txt", 40, false),
        ("test.txt", "old-test.txt", 40, false),
        ("all-train.txt", "new-train.txt", 48, true),
        ("test.txt", "new-test.txt", 48, true),
    ] {
        filter(&dir.join(from), &dir.join(to), 300, labels, |ys| {
            old(ys) != new
        });
    }
    let config = config(
        &dir,
        "xmc.toml",
        &dir.join("old-train.txt"),
        &dir.join("old-test.txt"),
    );
    let out = dir.join("old");
    succeeded(&slide_train(&[
        "--config",
        config.to_str().unwrap(),
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]));
    let checkpoint = final_checkpoint(&out);
    (dir, config, checkpoint)
}

/// The newest checkpoint of the run in `out`.
fn final_checkpoint(out: &Path) -> PathBuf {
    let mut all = slide_trainer::checkpoint::list(&out.join("checkpoints")).unwrap();
    all.pop().expect("a final checkpoint")
}

/// `--config CONFIG --out OUT --init-from FROM`: a continuation's command line.
fn init_from(config: &Path, out: &Path, from: &Path) -> Vec<String> {
    [("--config", config), ("--out", out), ("--init-from", from)]
        .into_iter()
        .flat_map(|(flag, path)| [flag.to_string(), path.display().to_string()])
        .collect()
}

/// `--set data.train=...`-style flags for the files of `dir`.
fn data(dir: &Path, train: &str, test: &str) -> Vec<String> {
    vec![
        "--set".into(),
        format!("data.train=\"{}\"", dir.join(train).display()),
        "--set".into(),
        format!("data.test=\"{}\"", dir.join(test).display()),
    ]
}

#[test]
fn a_continued_run_grows_the_output_layer_and_predicts_new_labels() {
    let (dir, config, checkpoint) = trained("continued");
    let out = dir.join("continued");
    let mut args = init_from(&config, &out, &checkpoint);
    args.extend([
        "--set".into(),
        format!("data.replay=\"{}\"", dir.join("old-train.txt").display()),
        "--set".into(),
        "data.replay_share=0.4".into(),
        "--set".into(),
        "train.epochs=6".into(),
    ]);
    args.extend(data(&dir, "new-train.txt", "test.txt"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let stdout = succeeded(&slide_train(&args));
    assert!(stdout.contains("48 labels, 8 of them new"), "{stdout}");
    let p1 = final_metric(&stdout, "P@1");
    eprintln!("continued: P@1 {p1} on every test sample");
    assert!(p1 > 0.8, "P@1 {p1}\n{stdout}");
    // On the test samples with a new label, the continued model answers right: those labels
    // did not exist before it.
    let grown = final_checkpoint(&out);
    let mut eval: Vec<String> = vec![
        "eval".into(),
        "--config".into(),
        config.display().to_string(),
        "--checkpoint".into(),
        grown.display().to_string(),
    ];
    eval.extend(data(&dir, "new-train.txt", "new-test.txt"));
    let eval: Vec<&str> = eval.iter().map(String::as_str).collect();
    let printed = succeeded(&slide_train(&eval));
    let p1: f64 = printed
        .split("P@1 ")
        .nth(1)
        .and_then(|r| r.split([',', ' ']).next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no P@1 in {printed}"));
    eprintln!("continued: P@1 {p1} on the test samples with a new label");
    assert!(p1 > 0.7, "{printed}");
}

#[test]
fn refused_continuations_say_why_and_write_nothing() {
    let (dir, config, checkpoint) = trained("continued-refused");
    // More features than the model read; fewer labels than it has; a broken checkpoint.
    let new = std::fs::read_to_string(dir.join("new-train.txt")).unwrap();
    let (header, rows) = new.split_once('\n').unwrap();
    let count = header.split(' ').next().unwrap();
    std::fs::write(dir.join("wide.txt"), format!("{count} 400 48\n{rows}")).unwrap();
    std::fs::write(dir.join("wide-test.txt"), format!("{count} 400 48\n{rows}")).unwrap();
    write_xmc_labels(&dir.join("few.txt"), 200, 30, 4);
    write_xmc_labels(&dir.join("few-test.txt"), 50, 30, 5);
    let broken = dir.join("broken.safetensors");
    let bytes = std::fs::read(&checkpoint).unwrap();
    std::fs::write(&broken, &bytes[..bytes.len() / 2]).unwrap();
    let cases: Vec<(Vec<String>, &Path, &str)> = vec![
        (
            vec!["--set".into(), "network.layers.0.size=16".into()],
            &checkpoint,
            "was written for a different network (layers.0.out_dim: checkpoint 32, config 16",
        ),
        (
            data(&dir, "wide.txt", "wide-test.txt"),
            &checkpoint,
            "cannot add input features",
        ),
        (
            data(&dir, "few.txt", "few-test.txt"),
            &checkpoint,
            "may add labels, not remove them",
        ),
        (vec![], &broken, "not a readable safetensors checkpoint"),
    ];
    for (i, (extra, from, says)) in cases.into_iter().enumerate() {
        let out = dir.join(format!("refused-{i}"));
        let mut args = init_from(&config, &out, from);
        if extra.is_empty() || !extra[1].starts_with("data.") {
            args.extend(data(&dir, "new-train.txt", "test.txt"));
        }
        args.extend(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = slide_train(&args);
        let stderr = text(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "case {i}: {stderr}");
        assert!(stderr.contains(says), "case {i}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "case {i}: {stderr}");
        assert!(!out.exists(), "case {i} wrote {}", out.display());
    }
    // --init-from and --resume are one or the other.
    let run = slide_train(&[
        "--config",
        config.to_str().unwrap(),
        "--init-from",
        checkpoint.to_str().unwrap(),
        "--resume",
        checkpoint.to_str().unwrap(),
    ]);
    assert_eq!(run.status.code(), Some(2));
    assert!(
        text(&run.stderr).contains("cannot be used with"),
        "{}",
        text(&run.stderr)
    );
}
