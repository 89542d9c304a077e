//! `NetworkConfig::input_power`: a network with the power reads every input through it, in
//! training (the layers and the heads) and in every evaluation mode, so that it learns
//! and predicts exactly what a network without it does on inputs transformed beforehand;
//! a power that is not a positive number is refused, naming the setting.

mod common;

use common::*;
use slide::head::label_linear::LabelLinearConfig;
use slide::head::rare_labels::RareLabelsConfig;
use slide::{
    Activation, EvalOptions, Examples, HeadConfig, Mode, Network, NetworkConfig, SparseExamples,
    Workspace,
};

const INPUTS: usize = 80;
const LABELS: u32 = 60;

/// Input -> 16 ReLU (input-major) -> 60 softmax outputs sampled by LSH (at least 12 active),
/// with a per-label linear head of 4,096 weights and rare-feature labels, at `power`.
fn config(power: f32) -> NetworkConfig {
    NetworkConfig {
        adam: slide::AdamConfig {
            lr: 0.01,
            ..Default::default()
        },
        seed: 3,
        heads: vec![
            HeadConfig::LabelLinear(LabelLinearConfig {
                bits: 12,
                lr: 0.5,
                shortlist: 8,
                ..LabelLinearConfig::default()
            }),
            HeadConfig::RareLabels(RareLabelsConfig {
                labels: 4,
                ..RareLabelsConfig::default()
            }),
        ],
        input_power: power,
        ..NetworkConfig::new(
            INPUTS,
            vec![
                input_major(16, Activation::Relu),
                sampled(LABELS as usize, Activation::Softmax, 12),
            ],
        )
    }
}

/// `data` with each value `v` replaced by `sign(v) |v|^power`, each row scaled back to its
/// L2 norm (sums of squares in f64, the scale rounded to f32 once), as the network does.
fn transformed(data: &SparseExamples, power: f32) -> SparseExamples {
    let mut out = SparseExamples::new();
    for i in 0..data.len() {
        let slide::lsh::Vector::Sparse { indices, values } = data.input(i) else {
            unreachable!("sparse data");
        };
        let mut moved: Vec<f32> = values
            .iter()
            .map(|&v| v.signum() * v.abs().powf(power))
            .collect();
        let square = |v: &[f32]| v.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>();
        let scale = (square(values) / square(&moved)).sqrt() as f32;
        moved.iter_mut().for_each(|v| *v *= scale);
        out.push(indices, &moved, data.labels(i));
    }
    out
}

/// Two epochs of batches of 32, then every sample's best 5 (ids and score bits) in exact,
/// LSH-mode and pooled evaluation, and the head's weights' bits.
fn trained(power: f32, data: &SparseExamples) -> (Vec<Vec<(u32, u32)>>, Vec<u32>) {
    let mut net = Network::new(config(power)).unwrap();
    let mut ws = Workspace::new();
    let all: Vec<usize> = (0..data.len()).collect();
    for _ in 0..2 {
        for chunk in all.chunks(32) {
            net.train_step(&mut ws, data, chunk).unwrap();
        }
    }
    let pooled = EvalOptions {
        pool: 16,
        ..EvalOptions::from(Mode::EvalLsh)
    };
    let mut best = Vec::new();
    for options in [Mode::EvalExact.into(), Mode::EvalLsh.into(), pooled] {
        let predictions = net.predict(&mut ws, data, &all, options, 5).unwrap();
        best.extend(predictions.into_iter().map(|top| {
            top.into_iter()
                .map(|(id, score)| (id, score.to_bits()))
                .collect()
        }));
    }
    (best, head_bits(&net))
}

#[test]
fn a_network_reads_its_inputs_through_the_power_everywhere() {
    let data = sparse_data(192, INPUTS, LABELS, 21);
    let with_power = trained(0.5, &data);
    let beforehand = trained(1.0, &transformed(&data, 0.5));
    assert_eq!(with_power, beforehand);
    // The power changes what the network learns: the stored inputs give another network.
    assert_ne!(with_power, trained(1.0, &data));
}

#[test]
fn a_power_that_is_not_a_positive_number_is_refused() {
    for power in [0.0, -0.5, f32::NAN, f32::INFINITY] {
        let message = Network::new(config(power)).err().unwrap().to_string();
        assert!(message.contains("input_power"), "{power}: {message}");
    }
}
