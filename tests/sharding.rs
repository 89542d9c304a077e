//! A network whose output layer is split between ranks ([`Network::sharded`]), the ranks
//! run as threads of this process ([`InProcess`]): the same model as one process, hidden
//! layers identical on every rank, and the traffic the design promises.

mod common;

use std::sync::Arc;

use common::*;
use slide::comm::{Communicator, InProcess, Local, shard_range};
use slide::{
    Activation, Examples, LayerConfig, Mode, Network, NetworkConfig, SparseExamples, Workspace,
};

const INPUTS: usize = 60;
const HIDDEN: usize = 24;
const LABELS: usize = 41;
const BATCH: usize = 32;
const STEPS: usize = 12;

/// Input -> 24 ReLU -> 41 softmax outputs, every output computed.
fn config() -> NetworkConfig {
    with_output(LayerConfig::new(LABELS, Activation::Softmax))
}

fn with_output(output: LayerConfig) -> NetworkConfig {
    NetworkConfig {
        seed: 7,
        ..NetworkConfig::new(INPUTS, vec![input_major(HIDDEN, Activation::Relu), output])
    }
}

/// The output layer sampled by its tables (8 per sample beside the labels), with log-Q
/// and shared negatives from a pool: what each rank selects is its own.
fn sampled_config() -> NetworkConfig {
    let mut output = sampled(LABELS, Activation::Softmax, 8);
    if let Some(lsh) = output.lsh.as_mut() {
        lsh.negatives.log_q = true;
        lsh.negatives.shared_negatives = 2;
        lsh.negatives.shared_pool = 6;
    }
    with_output(output)
}

/// What a rank ends with: its network, per step the batch loss, its exact predictions
/// (top 5 of 64 samples) and the bytes it sent.
struct Run {
    net: Network,
    losses: Vec<f64>,
    predictions: Vec<Vec<(u32, f32)>>,
    sent: u64,
}

fn train(data: &SparseExamples, config: NetworkConfig, comm: Arc<dyn Communicator>) -> Run {
    let mut net = Network::sharded(config, comm).unwrap();
    let mut ws = Workspace::new();
    let losses = (0..STEPS)
        .map(|s| {
            let batch: Vec<usize> = (0..BATCH).map(|i| (s * BATCH + i) % data.len()).collect();
            net.train_step(&mut ws, data, &batch).unwrap().loss
        })
        .collect();
    let test: Vec<usize> = (0..64).collect();
    let predictions = net
        .predict(&mut ws, data, &test, Mode::EvalExact, 5)
        .unwrap();
    let sent = net.communicator().bytes_sent();
    Run {
        net,
        losses,
        predictions,
        sent,
    }
}

fn train_ranks(data: &SparseExamples, config: NetworkConfig, size: usize) -> Vec<Run> {
    std::thread::scope(|s| {
        let handles: Vec<_> = InProcess::group(size)
            .into_iter()
            .map(|comm| {
                let config = config.clone();
                s.spawn(move || train(data, config, Arc::new(comm)))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn hidden_bits(net: &Network) -> Vec<u32> {
    let layer = &net.layers()[0];
    let mut bits = Vec::new();
    for j in 0..layer.out_dim() {
        bits.push(layer.bias(j).to_bits());
        bits.extend((0..layer.in_dim()).map(|i| layer.weight(j, i).to_bits()));
    }
    bits
}

/// The decoupled softmax needs every output's probability in one place: two ranks refuse
/// it with a message naming the setting, one rank takes it.
#[test]
fn a_sharded_output_refuses_decoupled_targets() {
    let output = LayerConfig {
        softmax_loss: slide::SoftmaxLoss::Decoupled,
        ..LayerConfig::new(LABELS, Activation::Softmax)
    };
    let config = with_output(output);
    let comm = InProcess::group(2).into_iter().next().unwrap();
    let message = Network::sharded(config.clone(), Arc::new(comm))
        .err()
        .unwrap()
        .to_string();
    assert!(message.contains("softmax_loss"), "{message}");
    Network::sharded(config, Arc::new(Local)).unwrap();
}

/// Two ranks train the model one process trains. They differ only in rounding: a rank
/// sums its half of the hidden gradient and the halves are then added, where one process
/// sums all the outputs in one run, and the softmax's sum is regrouped the same way; each
/// regrouping moves a sum by a few f32 roundings (relative 1e-7). Measured after 12 steps:
/// 1.5e-8 at most in any weight, 2e-8 relative in the losses, the same predictions. A
/// normaliser or gradient left uncombined moves weights by whole Adam steps (1e-4 here)
/// and fails this test; the bounds below leave 60x the measured rounding.
#[test]
fn two_ranks_train_the_model_of_one_process() {
    let data = sparse_data(256, INPUTS, LABELS as u32, 3);
    let one = train(&data, config(), Arc::new(Local));
    let ranks = train_ranks(&data, config(), 2);
    let (max_weight_gap, max_loss_gap) = (1e-6f32, 1e-6f64);
    for rank in &ranks {
        for (a, b) in rank.losses.iter().zip(&one.losses) {
            assert!((a - b).abs() <= max_loss_gap * b.abs(), "loss {a} vs {b}");
        }
        let hidden = &rank.net.layers()[0];
        for j in 0..HIDDEN {
            for i in 0..INPUTS {
                let (a, b) = (hidden.weight(j, i), one.net.layers()[0].weight(j, i));
                assert!(
                    (a - b).abs() <= max_weight_gap,
                    "hidden ({j}, {i}): {a} vs {b}"
                );
            }
        }
        let output = &rank.net.layers()[1];
        let range = rank.net.output_range();
        assert_eq!(output.out_dim(), range.len());
        for (j, global) in range.clone().enumerate() {
            let (a, b) = (output.bias(j), one.net.layers()[1].bias(global));
            assert!((a - b).abs() <= max_weight_gap, "bias {global}: {a} vs {b}");
            for i in 0..HIDDEN {
                let (a, b) = (output.weight(j, i), one.net.layers()[1].weight(global, i));
                assert!(
                    (a - b).abs() <= max_weight_gap,
                    "output ({global}, {i}): {a} vs {b}"
                );
            }
        }
        let ids = |p: &[Vec<(u32, f32)>]| -> Vec<Vec<u32>> {
            p.iter()
                .map(|t| t.iter().map(|&(id, _)| id).collect())
                .collect()
        };
        assert_eq!(ids(&rank.predictions), ids(&one.predictions));
    }
    assert_eq!(ranks[0].net.output_range(), shard_range(LABELS, 0, 2));
    assert_eq!(ranks[1].net.output_range(), 21..LABELS);
}

/// The copies of the hidden layer never drift: bit-identical on every rank after training,
/// whether every output is computed or each rank's tables pick its active outputs. The
/// hidden layer does move (it is not the initial one).
#[test]
fn the_ranks_hidden_layers_stay_identical() {
    let data = sparse_data(256, INPUTS, LABELS as u32, 4);
    for config in [config(), sampled_config()] {
        let initial = hidden_bits(&Network::new(config.clone()).unwrap());
        let ranks = train_ranks(&data, config, 3);
        let first = hidden_bits(&ranks[0].net);
        assert!(first != initial, "the hidden layer did not train");
        for rank in &ranks[1..] {
            assert!(
                hidden_bits(&rank.net) == first,
                "a rank's hidden layer drifted"
            );
            assert!(rank.losses.iter().all(|l| l.is_finite() && *l > 0.0));
        }
    }
}

/// Per training step a rank sends, to each other rank, each sample's softmax maximum and
/// sum (2 floats), its gradient on the hidden layer (24) and its loss (1); an exact
/// evaluation sends 5 (logit, id) pairs per sample. Nothing for one rank.
#[test]
fn traffic_per_step_is_the_hidden_gradient_and_two_floats_per_sample() {
    let data = sparse_data(256, INPUTS, LABELS as u32, 5);
    let ranks = train_ranks(&data, config(), 2);
    let per_step = BATCH * (2 + HIDDEN + 1) * 4;
    let evaluation = 64 * 10 * 4;
    for rank in &ranks {
        assert_eq!(rank.sent, (STEPS * per_step + evaluation) as u64);
    }
    assert_eq!(train(&data, config(), Arc::new(Local)).sent, 0);
}

/// Each rank samples its share of the budget, the shared negatives, their pool and the
/// random ids, so that all ranks together activate what one process does: the parts add
/// up to the whole for 1 to 5 ranks, none of them 0.
#[test]
fn the_ranks_share_the_sampling_budget() {
    let lsh = sampled_config().layers[1].lsh.unwrap();
    let lsh = slide::LshConfig {
        negatives: slide::Negatives {
            shared_negatives: 7,
            shared_pool: 31,
            ..lsh.negatives
        },
        warmup: Some(slide::Warmup {
            random: 5,
            length: slide::WarmupLength::Steps(3),
        }),
        ..lsh
    };
    for ranks in 1..=5 {
        let parts: Vec<_> = (0..ranks).map(|r| lsh.rank_share(r, ranks)).collect();
        let total = |f: &dyn Fn(&slide::LshConfig) -> usize| parts.iter().map(f).sum::<usize>();
        assert_eq!(total(&|p| p.retrieval.sampling.budget.unwrap()), 8);
        assert_eq!(total(&|p| p.retrieval.sampling.min_active), 8);
        assert_eq!(total(&|p| p.negatives.shared_negatives), 7);
        assert_eq!(total(&|p| p.negatives.shared_pool), 31);
        assert_eq!(total(&|p| p.warmup.unwrap().random), 5);
        assert!(
            parts
                .iter()
                .all(|p| p.retrieval.sampling.min_active >= 1 && p.negatives.shared_negatives >= 1)
        );
    }
}

/// An LSH output layer whose `min_active` covers all its outputs runs dense on every rank
/// (each rank's share of `min_active` covers its share of the outputs): two ranks train the
/// model of one process, and every sample's pass computes all of a rank's outputs.
#[test]
fn a_dense_lsh_output_layer_trains_the_same_on_two_ranks() {
    let dense_lsh = || with_output(sampled(LABELS, Activation::Softmax, LABELS));
    let data = sparse_data(256, INPUTS, LABELS as u32, 3);
    let one = train(&data, dense_lsh(), Arc::new(Local));
    assert!(one.net.layers()[1].every_output_active());
    for rank in train_ranks(&data, dense_lsh(), 2) {
        assert!(rank.net.layers()[1].every_output_active());
        for (a, b) in rank.losses.iter().zip(&one.losses) {
            assert!((a - b).abs() <= 1e-6 * b.abs(), "loss {a} vs {b}");
        }
        let ids = |p: &[Vec<(u32, f32)>]| -> Vec<Vec<u32>> {
            p.iter()
                .map(|t| t.iter().map(|&(id, _)| id).collect())
                .collect()
        };
        assert_eq!(ids(&rank.predictions), ids(&one.predictions));
        let hidden = |net: &Network| -> Vec<f32> {
            let layer = &net.layers()[0];
            (0..HIDDEN)
                .flat_map(|j| (0..INPUTS).map(move |i| layer.weight(j, i)))
                .collect()
        };
        for (a, b) in hidden(&rank.net).iter().zip(hidden(&one.net)) {
            assert!((a - b).abs() <= 1e-6, "hidden weight {a} vs {b}");
        }
    }
}
