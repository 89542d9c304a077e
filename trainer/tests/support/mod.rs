//! What the trainer's integration tests share: the repository, scratch folders, running the
//! real binary, and generated XMC text data.
#![allow(dead_code)]

#[path = "../../../tests/common/scratch.rs"]
mod scratch;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub use scratch::Scratch;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

pub fn scratch(test: &str) -> Scratch {
    Scratch::new("train", test)
}

pub fn slide_train(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_slide-train"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("slide-train runs")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts that `run` exited successfully (showing its output if not); returns its stdout.
pub fn succeeded(run: &Output) -> String {
    let stdout = text(&run.stdout);
    assert!(run.status.success(), "{stdout}\n{}", text(&run.stderr));
    stdout
}

/// The number after `key ` in the final `done:` line.
pub fn final_metric(stdout: &str, key: &str) -> f64 {
    let done = stdout
        .lines()
        .find(|l| l.starts_with("done:"))
        .expect("a done line");
    let rest = &done[done.find(key).unwrap_or_else(|| panic!("{key} in {done}")) + key.len()..];
    rest.trim_start()
        .split([',', ';', ' '])
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// [`write_xmc_labels`] with 50 labels.
pub fn write_xmc(path: &Path, samples: usize, seed: u64) {
    write_xmc_labels(path, samples, 50, seed);
}

/// Writes `samples` samples of XMC text data (300 features, `labels` labels: 1 or 2 per
/// sample, each with 4 features of its own and one random one) to `path`.
pub fn write_xmc_labels(path: &Path, samples: usize, labels: u64, seed: u64) {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % n
    };
    let mut lines = vec![format!("{samples} 300 {labels}")];
    for _ in 0..samples {
        let a = next(labels);
        let b = (a + 1 + next(labels - 1)) % labels;
        let labels: Vec<u64> = if next(2) == 0 {
            vec![a]
        } else {
            vec![a.min(b), a.max(b)]
        };
        let mut features: Vec<u64> = labels
            .iter()
            .flat_map(|&y| (0..4).map(move |j| (y * 6 + j) % 300))
            .collect();
        features.push(next(300));
        features.sort_unstable();
        features.dedup();
        let pairs: Vec<String> = features.iter().map(|f| format!("{f}:1")).collect();
        let labels: Vec<String> = labels.iter().map(u64::to_string).collect();
        lines.push(format!("{} {}", labels.join(","), pairs.join(" ")));
    }
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// The shape of an XMC test run: 2,000 training and 400 test samples of
/// [`write_xmc_labels`] data over `labels` labels, 300 features -> `hidden` ReLU
/// (input-major) -> `labels` softmax sampled by DWTA tables (K = 2, L = 20, 2^`range_pow`
/// buckets, top-k), batches of 64 at lr 0.01, seed 3, rebuilds every 20 steps.
pub struct XmcRun<'a> {
    pub hidden: usize,
    pub labels: u64,
    pub range_pow: u32,
    /// Further `[network.layers.lsh]` lines (the budget at least).
    pub lsh: &'a str,
    pub epochs: usize,
}

impl XmcRun<'_> {
    /// Writes the data and the config `name` into `dir`; returns the config's path.
    pub fn write(&self, dir: &Path, name: &str) -> PathBuf {
        write_xmc_labels(&dir.join("train.txt"), 2000, self.labels, 1);
        write_xmc_labels(&dir.join("test.txt"), 400, self.labels, 2);
        let config = format!(
            r#"
[data]
format = "xmc"
train = "{dir}/train.txt"
test = "{dir}/test.txt"

[[network.layers]]
size = {hidden}
activation = "relu"
layout = "input-major"

[[network.layers]]
size = {labels}
activation = "softmax"
[network.layers.lsh]
family = {{ dwta = {{ bin_size = 8 }} }}
k = 2
l = 20
range_pow = {range_pow}
strategy = "top-k"
{lsh}

[train]
epochs = {epochs}
batch_size = 64
lr = 0.01
seed = 3
rebuild_every = 20
"#,
            dir = dir.display(),
            hidden = self.hidden,
            labels = self.labels,
            range_pow = self.range_pow,
            lsh = self.lsh,
            epochs = self.epochs,
        );
        let path = dir.join(name);
        std::fs::write(&path, config).unwrap();
        path
    }
}
