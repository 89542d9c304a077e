//! Heads in a network ([`slide::head`]): the per-label linear head leaves the ranking alone
//! until it is trained, learns what a narrow network cannot, trains the same for any thread
//! count; the rare-labels head reaches what the shortlist misses; both travel with the
//! network's state, and heads are refused where they are not supported.

mod common;

use std::sync::Arc;

use common::*;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use slide::comm::InProcess;
use slide::head::label_linear::LabelLinearConfig;
use slide::head::rare_labels::RareLabelsConfig;
use slide::{
    Activation, EvalOptions, Examples, HeadConfig, Mode, Network, NetworkConfig, SparseExamples,
    Workspace,
};

const INPUTS: usize = 80;
const LABELS: u32 = 60;

/// Input -> `hidden` ReLU (input-major) -> 60 softmax outputs, every output computed,
/// with `heads`.
fn config(hidden: usize, heads: Vec<HeadConfig>, seed: u64) -> NetworkConfig {
    NetworkConfig {
        adam: slide::AdamConfig {
            lr: 0.01,
            ..Default::default()
        },
        seed,
        heads,
        ..NetworkConfig::new(
            INPUTS,
            vec![
                input_major(hidden, Activation::Relu),
                dense(LABELS as usize, Activation::Softmax),
            ],
        )
    }
}

/// A per-label linear head of 12 bits (4,096 weights) on the best 8.
fn small_linear() -> LabelLinearConfig {
    LabelLinearConfig {
        bits: 12,
        lr: 0.5,
        shortlist: 8,
        ..LabelLinearConfig::default()
    }
}

fn linear(config: LabelLinearConfig) -> Vec<HeadConfig> {
    vec![HeadConfig::LabelLinear(config)]
}

fn train_epochs(net: &mut Network, data: &SparseExamples, epochs: usize, batch: usize) {
    let mut ws = Workspace::new();
    let all: Vec<usize> = (0..data.len()).collect();
    for _ in 0..epochs {
        for chunk in all.chunks(batch) {
            net.train_step(&mut ws, data, chunk).unwrap();
        }
    }
}

fn precision_at_1(net: &Network, data: &SparseExamples, mode: Mode) -> f64 {
    let all: Vec<usize> = (0..data.len()).collect();
    net.evaluate(&mut Workspace::new(), data, &all, mode)
        .unwrap()
        .metrics
        .precision[0]
}

fn predicted_ids(net: &Network, data: &SparseExamples, mode: Mode) -> Vec<Vec<u32>> {
    let all: Vec<usize> = (0..data.len()).collect();
    net.predict(
        &mut Workspace::new(),
        data,
        &all,
        EvalOptions::from(mode),
        5,
    )
    .unwrap()
    .into_iter()
    .map(|top| top.into_iter().map(|(id, _)| id).collect())
    .collect()
}

/// Every weight zero, every wide score 0: the re-ranking keeps the network's order, in
/// exact and in LSH-mode evaluation, and the network is the one built without a head
/// (the head draws nothing from the seed).
#[test]
fn an_untrained_wide_head_leaves_the_ranking_as_it_is() {
    let data = sparse_data(200, INPUTS, LABELS, 3);
    let plain = Network::new(config(16, vec![], 5)).unwrap();
    let with = Network::new(config(16, linear(small_linear()), 5)).unwrap();
    for mode in [Mode::EvalExact, Mode::EvalLsh] {
        assert_eq!(
            predicted_ids(&plain, &data, mode),
            predicted_ids(&with, &data, mode)
        );
    }
}

/// A hidden layer of 2 units cannot tell 60 labels apart; per-label linear classifiers on
/// the features, re-ranking its best 8, can. On the training samples, 6 epochs: P@1 0.135
/// without the head and 0.673 with it (measured; 0.672 before the bias feature); the
/// bounds leave room for rounding across kernel sets.
#[test]
fn the_wide_head_learns_what_a_narrow_network_cannot() {
    let data = sparse_data(600, INPUTS, LABELS, 7);
    let mut plain = Network::new(config(2, vec![], 1)).unwrap();
    let mut with = Network::new(config(2, linear(small_linear()), 1)).unwrap();
    train_epochs(&mut plain, &data, 6, 32);
    train_epochs(&mut with, &data, 6, 32);
    let (p_plain, p_with) = (
        precision_at_1(&plain, &data, Mode::EvalExact),
        precision_at_1(&with, &data, Mode::EvalExact),
    );
    eprintln!("P@1 on the training samples: {p_plain} without the head, {p_with} with it");
    assert!(p_plain < 0.3, "without the head: P@1 {p_plain}");
    assert!(p_with > 0.55, "with the head: P@1 {p_with}");
    // The head has learned: its table is not all zero.
    assert!(head_bits(&with).iter().any(|&w| w != 0));
}

/// One and two threads give the same head, bit for bit, and the same predictions.
#[test]
fn wide_training_is_bit_identical_with_one_and_two_threads() {
    let data = sparse_data(256, INPUTS, LABELS, 11);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut net = Network::new(config(16, linear(small_linear()), 2)).unwrap();
            train_epochs(&mut net, &data, 2, 32);
            (head_bits(&net), predicted_ids(&net, &data, Mode::EvalExact))
        })
    };
    let (one, two) = (run(1), run(2));
    assert!(one.0.iter().any(|&b| b != 0));
    assert_eq!(one, two);
}

/// The head's weights travel with the network's state (`wide.table`, its name from when it
/// was the wide head): a network built
/// afresh and given the state predicts what the trained one predicts; a state without the
/// table is refused with a message naming it.
#[test]
fn the_linear_head_travels_with_the_state() {
    let data = sparse_data(200, INPUTS, LABELS, 13);
    let mut trained = Network::new(config(16, linear(small_linear()), 4)).unwrap();
    train_epochs(&mut trained, &data, 2, 32);
    let names: Vec<String> = trained
        .state_tensors()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(names.contains(&"wide.table".to_string()), "{names:?}");
    let state = trained.export_state();
    assert_eq!(state.heads[0].shape, [4096]);
    let mut restored = Network::with_empty_tables(config(16, linear(small_linear()), 9)).unwrap();
    restored.import_state(&state).unwrap();
    assert_eq!(head_bits(&restored), head_bits(&trained));
    assert_eq!(
        predicted_ids(&restored, &data, Mode::EvalExact),
        predicted_ids(&trained, &data, Mode::EvalExact)
    );
    let without = Network::new(config(16, vec![], 4)).unwrap().export_state();
    let message = restored.import_state(&without).unwrap_err().to_string();
    assert!(message.contains("wide.table"), "{message}");
}

/// The head re-ranks a whole rank's view of the outputs; split between ranks it is refused
/// at construction, naming the setting.
#[test]
fn a_head_on_a_split_output_layer_is_refused() {
    let comm = InProcess::group(2).into_iter().next().unwrap();
    let error = Network::sharded(config(16, linear(small_linear()), 1), Arc::new(comm))
        .err()
        .expect("refused")
        .to_string();
    assert!(error.contains("network.heads"), "{error}");
}

/// Settings out of range are refused when the network is built, naming the key.
#[test]
fn head_settings_are_checked_when_the_network_is_built() {
    let bad = LabelLinearConfig {
        shortlist: 2,
        ..small_linear()
    };
    let error = Network::new(config(16, linear(bad), 1))
        .err()
        .expect("refused")
        .to_string();
    assert!(error.contains("heads.label-linear.shortlist"), "{error}");
    let twice = [linear(small_linear()), linear(small_linear())].concat();
    let error = Network::new(config(16, twice, 1))
        .err()
        .expect("refused")
        .to_string();
    assert!(error.contains("listed twice"), "{error}");
}

/// Head-only steps (`Network::train_heads_step`, what a head's `epochs` runs after the
/// network's epochs) move the head and nothing else: the layers' weights, moments and
/// tables stay bit for bit (no step reports rows updated), each step is counted, and the
/// head's loss falls over its epochs (measured: mean shortlist loss 0.526 in the first
/// head-only epoch, 0.160 in the fourth). Without a head that learns, the step is refused
/// naming the setting.
#[test]
fn head_only_steps_train_the_head_and_leave_the_network_alone() {
    let data = sparse_data(400, INPUTS, LABELS, 17);
    let mut net = Network::new(config(8, linear(small_linear()), 3)).unwrap();
    train_epochs(&mut net, &data, 2, 32);
    let before = net.export_state();
    let mut ws = Workspace::new();
    let all: Vec<usize> = (0..data.len()).collect();
    let mut epoch_loss = Vec::new();
    for _ in 0..4 {
        let mut sum = 0.0;
        for chunk in all.chunks(32) {
            let stats = net.train_heads_step(&mut ws, &data, chunk, (0, 1)).unwrap();
            assert!(stats.rows_touched.is_empty(), "{:?}", stats.rows_touched);
            sum += stats.loss;
        }
        epoch_loss.push(sum / all.chunks(32).len() as f64);
    }
    eprintln!("head-only epochs' mean loss: {epoch_loss:?}");
    let after = net.export_state();
    assert_eq!(after.step, before.step + 4 * 13);
    assert!(after.layers == before.layers, "the layers moved");
    assert!(after.heads != before.heads, "the head did not move");
    assert!(
        epoch_loss[3] < 0.5 * epoch_loss[0],
        "the head's loss: {epoch_loss:?}"
    );

    let mut plain = Network::new(config(8, vec![], 3)).unwrap();
    let error = plain
        .train_heads_step(&mut ws, &data, &all[..32], (0, 1))
        .unwrap_err()
        .to_string();
    assert!(error.contains("network.heads"), "{error}");
}

/// Samples of label `l` (of 60) share one word that no other label's samples have (feature
/// `100 + l`, in three training samples: rare) among three of 20 common words. A hidden
/// layer of 2 units cannot tell the labels apart and the head re-ranks only its best 5,
/// so without rare labels it rarely sees the right one; with 4 rare labels the word names
/// it and the head learns it. P@1 on 60 held-out samples, 8 epochs: 0.067 without, 0.950
/// with them (measured); the bounds leave room for rounding across kernel sets. The index
/// travels with the state (`wide.rare.*`), and a state saved without it is refused.
#[test]
fn rare_labels_reach_what_the_shortlist_misses() {
    let family = |copies: usize, seed: u64| {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut data = SparseExamples::new();
        for _ in 0..copies {
            for label in 0..LABELS {
                let mut features: Vec<u32> = (0..3).map(|_| rng.random_range(0..20u32)).collect();
                features.push(100 + label);
                features.sort_unstable();
                features.dedup();
                let values = vec![1.0; features.len()];
                data.push(&features, &values, &[label]);
            }
        }
        data
    };
    let (train, test) = (family(3, 1), family(1, 2));
    let config = |rare_labels: usize| NetworkConfig {
        heads: [
            linear(LabelLinearConfig {
                shortlist: 5,
                ..small_linear()
            }),
            (rare_labels > 0)
                .then(|| {
                    HeadConfig::RareLabels(RareLabelsConfig {
                        labels: rare_labels,
                        ..RareLabelsConfig::default()
                    })
                })
                .into_iter()
                .collect(),
        ]
        .concat(),
        ..NetworkConfig::new(
            160,
            vec![
                input_major(2, Activation::Relu),
                dense(LABELS as usize, Activation::Softmax),
            ],
        )
    };
    let mut plain = Network::new(config(0)).unwrap();
    let mut with = Network::new(config(4)).unwrap();
    train_epochs(&mut plain, &train, 8, 20);
    train_epochs(&mut with, &train, 8, 20);
    let (p_plain, p_with) = (
        precision_at_1(&plain, &test, Mode::EvalExact),
        precision_at_1(&with, &test, Mode::EvalExact),
    );
    eprintln!("held-out P@1: {p_plain} without rare labels, {p_with} with them");
    assert!(p_plain < 0.2, "without: {p_plain}");
    assert!(p_with > 0.8, "with: {p_with}");
    let names: Vec<String> = with.state_tensors().into_iter().map(|t| t.name).collect();
    assert!(names.contains(&"wide.rare.starts".to_string()), "{names:?}");
    let mut restored = Network::with_empty_tables(config(4)).unwrap();
    restored.import_state(&with.export_state()).unwrap();
    assert_eq!(restored.export_state().heads, with.export_state().heads);
    assert_eq!(
        predicted_ids(&restored, &test, Mode::EvalExact),
        predicted_ids(&with, &test, Mode::EvalExact)
    );
    let message = restored
        .import_state(&plain.export_state())
        .unwrap_err()
        .to_string();
    assert!(message.contains("wide.rare.starts"), "{message}");
    // An index naming a label beyond the output layer is refused, naming it.
    let mut bad = with.export_state();
    let entries = bad.heads.iter_mut().find(|t| t.name == "wide.rare.entries");
    entries.unwrap().bytes[..4].copy_from_slice(&999u32.to_le_bytes());
    let message = restored.import_state(&bad).unwrap_err().to_string();
    assert!(message.contains("label 999"), "{message}");
}

/// A step reports the heads' training time apart (within the update's wall time), and none
/// without a head that learns.
#[test]
fn a_step_reports_the_heads_training_time() {
    let data = sparse_data(256, INPUTS, LABELS, 9);
    let batch: Vec<usize> = (0..256).collect();
    let mut with = Network::new(config(16, linear(small_linear()), 1)).unwrap();
    let mut plain = Network::new(config(16, vec![], 1)).unwrap();
    let mut ws = Workspace::new();
    let stats = with.train_step(&mut ws, &data, &batch).unwrap();
    let times = stats.times;
    assert!(times.heads > std::time::Duration::ZERO, "{times:?}");
    assert!(times.heads <= times.update, "{times:?}");
    let stats = plain
        .train_step(&mut Workspace::new(), &data, &batch)
        .unwrap();
    assert_eq!(stats.times.heads, std::time::Duration::ZERO);
}
