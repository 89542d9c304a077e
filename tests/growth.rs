//! Continuing a trained network with more labels ([`Network::continue_from`]): the trained
//! rows are kept, the new ones take the new network's initialisation and enter the tables,
//! a grown network learns labels it never saw, and shapes that cannot continue are refused
//! without touching the network.

mod common;

use common::*;
use slide::head::label_linear::LabelLinearConfig;
use slide::{
    Activation, Examples, HeadConfig, Mode, Network, NetworkConfig, RebuildSchedule,
    SparseExamples, Workspace,
};

const INPUTS: usize = 120;
const OLD: u32 = 40;
const NEW: u32 = 48;

/// Input -> 24 ReLU (input-major) -> `labels` sampled softmax outputs, with a per-label
/// linear head.
fn config(inputs: usize, hidden: usize, labels: u32, seed: u64) -> NetworkConfig {
    NetworkConfig {
        adam: slide::AdamConfig {
            lr: 0.01,
            ..Default::default()
        },
        rebuild: RebuildSchedule::Fixed { every: 5 },
        seed,
        heads: vec![HeadConfig::LabelLinear(LabelLinearConfig {
            bits: 12,
            shortlist: 8,
            ..LabelLinearConfig::default()
        })],
        ..NetworkConfig::new(
            inputs,
            vec![
                input_major(hidden, Activation::Relu),
                sampled(labels as usize, Activation::Softmax, 16),
            ],
        )
    }
}

/// The samples of `data` whose labels `keep` accepts, every label.
fn only(data: &SparseExamples, keep: impl Fn(&[u32]) -> bool) -> SparseExamples {
    let mut out = SparseExamples::new();
    for s in 0..data.len() {
        let labels = data.labels(s);
        if keep(labels) {
            let (a, b) = (data.offsets[s], data.offsets[s + 1]);
            out.push(&data.indices[a..b], &data.values[a..b], labels);
        }
    }
    out
}

fn train(net: &mut Network, data: &dyn Examples, epochs: usize) {
    let mut ws = Workspace::new();
    let all: Vec<usize> = (0..data.len()).collect();
    for _ in 0..epochs {
        for chunk in all.chunks(32) {
            net.train_step(&mut ws, data, chunk).unwrap();
        }
    }
}

#[test]
fn a_grown_network_keeps_the_trained_rows_and_learns_new_labels() {
    let all = sparse_data(1200, INPUTS, NEW, 5);
    let old_data = only(&all, |ys| ys.iter().all(|&y| y < OLD));
    let new_data = only(&all, |ys| ys.iter().any(|&y| y >= OLD));
    assert!(new_data.len() > 100 && old_data.len() > 300);
    let mut trained = Network::new(config(INPUTS, 24, OLD, 1)).unwrap();
    train(&mut trained, &old_data, 3);
    let before = trained.export_state();

    let mut grown = Network::new(config(INPUTS, 24, NEW, 1)).unwrap();
    let fresh = grown.export_state();
    let continued = grown.continue_from(before.clone()).unwrap();
    assert_eq!(
        (continued.outputs_before, continued.outputs),
        (OLD as usize, NEW as usize)
    );
    assert_eq!(continued.earlier_steps, before.step);
    assert!(before.step > 0);
    assert_eq!(grown.step(), 0, "a continued run counts its own steps");
    let after = grown.export_state();
    assert_eq!(after.earlier_steps, before.step);
    // The hidden layer is the trained one; the output layer's first rows are the trained
    // ones, the others the new network's initialisation, with zero moments and counts.
    assert_eq!(after.layers[0].weights, before.layers[0].weights);
    let (old, new, init) = (&before.layers[1], &after.layers[1], &fresh.layers[1]);
    let cells = old.rows * old.row_len;
    assert_eq!(new.rows, NEW as usize);
    assert_eq!(new.weights[..cells], old.weights[..]);
    assert_eq!(new.weights[cells..], init.weights[cells..]);
    assert_eq!(new.v[..cells], old.v[..]);
    assert!(new.v[cells..].iter().all(|&v| v == 0.0));
    assert_eq!(new.row_steps[..old.rows], old.row_steps[..]);
    assert!(new.row_steps[old.rows..].iter().all(|&s| s == 0));
    assert_eq!(new.bias[..OLD as usize], old.bias[..]);
    // The head's table (its shape does not depend on the labels) is carried.
    assert_eq!(after.heads, before.heads);
    // The tables hold the new rows too.
    let ids = |net: &Network| net.table_stats()[1].unwrap().stored_ids;
    assert!(
        ids(&grown) > ids(&trained),
        "{} ids, {} before",
        ids(&grown),
        ids(&trained)
    );

    // Trained on the new labels' samples (with a share of the old ones), the grown network
    // predicts new labels, which the trained one could not name.
    let mixed = only(&all, |ys| ys.iter().any(|&y| y >= OLD) || ys[0] % 4 == 0);
    train(&mut grown, &mixed, 6);
    let samples: Vec<usize> = (0..new_data.len()).collect();
    let top = grown
        .predict(
            &mut Workspace::new(),
            &new_data,
            &samples,
            Mode::EvalExact,
            1,
        )
        .unwrap();
    let right = samples
        .iter()
        .filter(|&&s| new_data.labels(s).contains(&top[s][0].0))
        .count();
    let new_top = top.iter().filter(|t| t[0].0 >= OLD).count();
    eprintln!(
        "{right} of {} samples with a new label right at P@1; {new_top} predict a new label",
        samples.len()
    );
    assert!(
        new_top * 2 > samples.len(),
        "new labels predicted: {new_top}"
    );
    assert!(right * 2 > samples.len(), "right at P@1: {right}");
}

#[test]
fn shapes_that_cannot_continue_are_refused_and_change_nothing() {
    let data = sparse_data(200, INPUTS, OLD, 6);
    let mut trained = Network::new(config(INPUTS, 24, OLD, 1)).unwrap();
    train(&mut trained, &data, 1);
    let state = trained.export_state();
    let refused = |config: NetworkConfig, needle: &str| {
        let mut net = Network::new(config).unwrap();
        let before = net.export_state();
        let e = net.continue_from(state.clone()).unwrap_err().to_string();
        assert!(e.contains(needle), "{e}");
        assert!(
            net.export_state() == before,
            "a refusal changed the network"
        );
    };
    refused(
        config(INPUTS + 10, 24, NEW, 1),
        "reads 120 input features, this one 130",
    );
    refused(config(INPUTS, 32, NEW, 1), "layer 0 stores");
    refused(
        config(INPUTS, 24, OLD - 1, 1),
        "may add outputs, not remove them",
    );
    let three = NetworkConfig::new(
        INPUTS,
        vec![
            input_major(24, Activation::Relu),
            dense(8, Activation::Relu),
            sampled(NEW as usize, Activation::Softmax, 16),
        ],
    );
    refused(three, "has 2 layers, this one 3");
}
