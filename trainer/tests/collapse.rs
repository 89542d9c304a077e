//! The model holds under exact inference: the collapse that the SLIDE-paper recipe shows on
//! extreme-classification data (one output becomes the top-1 prediction of every test
//! sample; exact P@1 falls below the P@1 scored over an LSH-selected set) reproduced at the
//! smallest shape found, and the shipped recipe's guard against it.
//!
//! Shape: 135,909 sparse features (the full Amazon-670K input, which is what starves the
//! hidden layer: each feature row is updated rarely), 20,000 labels, 4,000 training and
//! 1,000 test samples from `gen-data`'s generator, batch 128, 6 epochs (188 steps). Measured
//! (release build, 2 threads): the old recipe (Glorot init, no log-Q, no shared negatives,
//! DWTA K=6 L=50 2^18 buckets, lr 1e-3) ends with output 100% top-1, exact P@1 0.011 against
//! 0.016 with LSH outputs; the shipped recipe (N(0,1) first layer, fan-in output layer,
//! log-Q, 32 shared negatives per sample picked from a pool of 256 re-ranked after every
//! step, with half of the log-Q shift, K/L/range_pow tuned from the budget, lr 4e-3) ends
//! at exact P@1 0.531 against 0.210 with LSH outputs, its most frequent top-1 output on
//! 1.1% of the samples where the most frequent label is on 1.9% (0.58 times; tuned to 16
//! tables; with 50: P@1 0.533, LSH-mode 0.276, 0.68 times, and seeds 2 and 3 of the
//! training 0.63 and 0.84 times, P@1 0.506 and 0.525). Before the pool (the same
//! 32 for every sample, a quarter of the shift): P@1 0.488 / 0.466 / 0.480 and 0.89 /
//! 0.89 / 1.05 times; without any shift 2.26-2.32 times (seeds 1-3), above the detector's
//! bound of 2.

#[path = "../../tests/common/scratch.rs"]
mod scratch;

use std::path::Path;
use std::sync::atomic::AtomicUsize;

use scratch::Scratch;

use slide_trainer::{config, generate, train};

fn scratch(test: &str) -> Scratch {
    Scratch::new("collapse", test)
}

/// The last evaluation line of a metrics file.
fn last_eval(metrics: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(metrics).unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .rfind(|v| v["p_at_1"].is_f64())
        .expect("an evaluation")
}

const DATA: &str = r#"
[data]
format = "xmc"
train = "DIR/train.txt"
test = "DIR/test.txt"
"#;

const OLD: &str = r#"
[[network.layers]]
size = 128
activation = "relu"
layout = "input-major"
[[network.layers]]
size = 20000
activation = "softmax"
[network.layers.lsh]
family = { dwta = { bin_size = 8 } }
k = 6
l = 50
range_pow = 18
bucket_capacity = 128
strategy = "vanilla"
budget = 128
min_active = 128
[train]
epochs = 6
batch_size = 128
lr = 0.001
seed = 1
rebuild_every = 50
rebuild_growth = 1.1
"#;

const NEW: &str = r#"
[[network.layers]]
size = 128
activation = "relu"
layout = "input-major"
init = { normal = { std = 1.0 } }
[[network.layers]]
size = 20000
activation = "softmax"
init = "fan-in"
[network.layers.lsh]
family = { dwta = { bin_size = 8 } }
strategy = "vanilla"
budget = 128
min_active = 128
log_q = true
shared_negatives = 32
shared_pool = 256
shared_shift = 0.5
[train]
epochs = 6
batch_size = 128
lr = 0.004
seed = 1
rebuild_every = 50
rebuild_growth = 1.1
"#;

fn train(dir: &Path, name: &str, recipe: &str) -> serde_json::Value {
    let text = format!(
        "{}{recipe}",
        DATA.replace("DIR", &dir.display().to_string())
    );
    let config = config::parse(&text, Path::new(name), &[]).unwrap();
    let out = dir.join(name);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    pool.install(|| train::run(&config, &out, true, train::Start::New, &AtomicUsize::new(0)))
        .unwrap_or_else(|_| panic!("{name} trains"));
    last_eval(&out.join("metrics.jsonl"))
}

#[test]
fn exact_scoring_holds_where_the_old_recipe_collapses() {
    let dir = scratch("recipes");
    let shape = generate::Preset {
        labels: 20_000,
        train: 4_000,
        test: 1_000,
        ..generate::preset("amazon670k").unwrap()
    };
    generate::generate(shape, 3, &dir).unwrap();
    let f = |v: &serde_json::Value, key: &str| v[key].as_f64().unwrap();

    // The old recipe collapses: this is what the guard below must catch.
    let old = train(&dir, "old", OLD);
    assert!(
        f(&old, "top1_share") > 0.5,
        "old recipe top-1 share {}",
        f(&old, "top1_share")
    );
    assert!(f(&old, "p_at_1") < 0.9 * f(&old, "p_at_1_lsh"), "{old}");

    let new = train(&dir, "new", NEW);
    let (exact, lsh) = (f(&new, "p_at_1"), f(&new, "p_at_1_lsh"));
    assert!(exact >= 0.9 * lsh, "exact {exact} < 0.9 x LSH-mode {lsh}");
    assert!(exact >= 0.4, "exact P@1 {exact} (measured 0.533)");
    // The collapse detector's bound: no output the top-1 of more than twice the share of
    // the most frequent test label.
    let (top1, label) = (f(&new, "top1_share"), f(&new, "label_share"));
    assert!(
        top1 <= 2.0 * label,
        "top-1 share {top1} above 2x the most frequent label's {label}"
    );
    // Most of the non-label active set comes from the tables.
    let share = new["active_sources"][1]["table_share"].as_f64().unwrap();
    assert!(
        share >= 0.75,
        "tables gave {share} of the non-label outputs"
    );
}
