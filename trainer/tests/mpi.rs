//! `slide-train` on two MPI ranks (`mpirun -n 2`, built with `--features mpi`): trains,
//! checkpoints and resumes, keeps the hidden layer identical on both ranks, and trains a
//! model that one process may not hold under a memory limit.
#![cfg(feature = "mpi")]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use safetensors::SafeTensors;
use support::*;

/// 2,000 samples over 40,000 labels, 256 hidden units: the output layer (123 MB with its
/// moments) is most of the model.
fn config(dir: &Path) -> PathBuf {
    XmcRun {
        hidden: 256,
        labels: 40_000,
        range_pow: 10,
        lsh: "budget = 64\nmin_active = 64\nlog_q = true\nshared_negatives = 16\nshared_pool = 64",
        epochs: 2,
    }
    .write(dir, "ranks.toml")
}

/// `slide-train args` on two ranks, one thread each (OpenMPI's switches let it run as
/// root, as CI does).
fn on_two_ranks(args: &[&str]) -> Output {
    Command::new("mpirun")
        .args(["-n", "2", "--oversubscribe", "-x", "RAYON_NUM_THREADS"])
        .arg(env!("CARGO_BIN_EXE_slide-train"))
        .args(args)
        .env("RAYON_NUM_THREADS", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .current_dir(repo())
        .output()
        .expect("mpirun runs (apt: openmpi-bin)")
}

fn train_args<'a>(config: &'a str, out: &'a str, sets: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--config", config, "--quiet", "--out", out];
    for set in sets {
        args.extend(["--set", set]);
    }
    args
}

/// The newest checkpoint in `dir`.
fn newest(dir: &Path) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    files.pop().expect("a checkpoint")
}

/// The bytes of every tensor of layer 0 (the hidden layer) in a checkpoint, by name.
fn hidden_layer(path: &Path) -> Vec<(String, Vec<u8>)> {
    let bytes = std::fs::read(path).unwrap();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors: Vec<(String, Vec<u8>)> = file
        .tensors()
        .into_iter()
        .filter(|(name, _)| name.starts_with("layers.0."))
        .map(|(name, view)| (name, view.data().to_vec()))
        .collect();
    tensors.sort();
    assert!(
        !tensors.is_empty(),
        "no layer-0 tensors in {}",
        path.display()
    );
    tensors
}

/// Two ranks train 40 steps and checkpoint; each rank's checkpoint holds the same hidden
/// layer, bit for bit, and half of the outputs; the run resumes on two ranks to the end,
/// reporting what it sent; `eval` and `predict` on two ranks read the folder; one process
/// refuses it, naming the two ranks it needs.
#[test]
fn two_ranks_train_checkpoint_resume_evaluate_and_hold_the_same_hidden_layer() {
    let dir = scratch("mpi-resume");
    let config = config(&dir);
    let out = dir.join("out");
    let (config, out_text) = (config.to_str().unwrap(), out.to_str().unwrap());
    let run = on_two_ranks(&train_args(config, out_text, &["train.max_steps=40"]));
    succeeded(&run);
    let checkpoints = out.join("checkpoints");
    let ranks = [
        newest(&checkpoints.join("rank-0-of-2")),
        newest(&checkpoints.join("rank-1-of-2")),
    ];
    assert!(
        hidden_layer(&ranks[0]) == hidden_layer(&ranks[1]),
        "the ranks' hidden layers differ"
    );
    for path in &ranks {
        let bytes = std::fs::read(path).unwrap();
        let file = SafeTensors::deserialize(&bytes).unwrap();
        assert_eq!(file.tensor("layers.1.bias").unwrap().shape(), &[20_000]);
    }

    let checkpoints_text = checkpoints.to_str().unwrap();
    let mut args = train_args(config, out_text, &[]);
    args.extend(["--resume", checkpoints_text]);
    let resumed = on_two_ranks(&args);
    let stdout = succeeded(&resumed);
    assert!(stdout.contains("resumed from"), "{stdout}");
    assert!(stdout.contains("KiB/step"), "{stdout}");
    let p1 = final_metric(&stdout, "P@1");

    // `eval` on two ranks reads each rank's newest checkpoint and merges their best outputs:
    // the run's last P@1 again, printed once; `predict` writes one line per test sample.
    let scoring = [
        "--config",
        config,
        "--checkpoint",
        checkpoints.to_str().unwrap(),
    ];
    let eval = succeeded(&on_two_ranks(&[&["eval"][..], &scoring[..]].concat()));
    assert_eq!(eval.matches(" P@1 ").count(), 1, "{eval}");
    assert!(
        eval.contains(&format!("P@1 {p1:.4}")),
        "eval says `{eval}`, the run ended at {p1:.4}"
    );
    let answers = dir.join("answers.txt");
    let predict = [
        &["predict"][..],
        &scoring[..],
        &["--out", answers.to_str().unwrap()][..],
    ];
    let predicted = on_two_ranks(&predict.concat());
    succeeded(&predicted);
    let summary = text(&predicted.stderr);
    assert_eq!(
        summary.matches("predicted 400 samples").count(),
        1,
        "{summary}"
    );
    let lines = std::fs::read_to_string(&answers).unwrap();
    assert_eq!(lines.lines().count(), 400, "{lines}");
    assert!(lines.lines().all(|l| l.split(' ').count() == 5), "{lines}");
    let done = newest(&checkpoints.join("rank-1-of-2"));
    assert!(
        done > ranks[1],
        "no later checkpoint after resuming: {}",
        done.display()
    );

    let alone = slide_train(&args);
    let stderr = text(&alone.stderr);
    assert_eq!(alone.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("a run on 2 ranks") && stderr.contains("mpirun -n 2"),
        "{stderr}"
    );
}

/// The number right after `marker` in `text`.
fn mb_after(text: &str, marker: &str) -> u64 {
    text.split(marker)
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after `{marker}` in `{text}`"))
}

/// A memory limit between one rank's estimate and the whole model's: one process refuses
/// to start, two ranks train under it, each rank's peak resident memory below it.
/// Measured: one process needs 235 MB, a rank 168 MB (limit 201 MB); rank 0 peaked at
/// 87 MiB.
#[test]
fn a_model_refused_in_one_process_trains_on_two_ranks_under_the_same_limit() {
    let dir = scratch("mpi-limit");
    let config = config(&dir);
    let out = dir.join("out");
    let (config, out_text) = (config.to_str().unwrap(), out.to_str().unwrap());
    // Each refuses a 1 MB limit, naming what it needs.
    let needs = |run: Output| {
        let stderr = text(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{stderr}");
        mb_after(&stderr, "the run needs about ")
    };
    let tiny = train_args(config, out_text, &["train.memory_limit_mb=1"]);
    let (whole, per_rank) = (needs(slide_train(&tiny)), needs(on_two_ranks(&tiny)));
    assert!(
        per_rank < whole,
        "a rank needs {per_rank} MB, one process {whole} MB"
    );
    let limit = format!("train.memory_limit_mb={}", (per_rank + whole) / 2);
    let args = train_args(config, out_text, &[limit.as_str(), "train.epochs=1"]);
    needs(slide_train(&args));
    let stdout = succeeded(&on_two_ranks(&args));
    let peak_mib = stdout
        .split("peak RSS ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no peak RSS in {stdout}"));
    let limit_mb = ((per_rank + whole) / 2) as f64;
    eprintln!(
        "one process needs {whole} MB, a rank {per_rank} MB; rank 0 peaked at {peak_mib} MiB"
    );
    assert!(
        peak_mib * 1.048_576 < limit_mb,
        "rank 0 peaked at {peak_mib} MiB, limit {limit_mb} MB"
    );
}
