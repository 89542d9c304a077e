//! The output layer's rows started at their labels' centroids (`Init::Centroids`,
//! `Network::warm_start`): the rows are the centred, shrunk means the documentation gives,
//! a label without samples keeps its row, the untrained network already ranks well, and the
//! setting is refused where it means nothing.

mod common;

use common::*;
use slide::{
    Activation, Examples, Init, LayerConfig, Mode, Network, NetworkConfig, SparseExamples,
    Workspace,
};

const INPUTS: usize = 64;
const HIDDEN: usize = 24;
const LABELS: u32 = 30;

fn centroids(norm: f32, shrink: f32) -> Init {
    Init::Centroids { norm, shrink }
}

/// Input -> 24 ReLU (input-major) -> 30 sampled softmax outputs started as `init` says.
fn net_with(init: Init, seed: u64) -> Network {
    let output = LayerConfig {
        init,
        ..sampled(LABELS as usize, Activation::Softmax, 8)
    };
    network(
        INPUTS,
        vec![input_major(HIDDEN, Activation::Relu), output],
        0.01,
        seed,
    )
}

/// The hidden layer's output for `sample`, in f64, as the network computes it.
fn hidden(net: &Network, data: &SparseExamples, sample: usize) -> Vec<f64> {
    let layer = &net.layers()[0];
    let x = dense_input(data.input(sample), INPUTS);
    (0..HIDDEN)
        .map(|n| {
            let z = f64::from(layer.bias(n))
                + (0..INPUTS)
                    .map(|i| f64::from(layer.weight(n, i)) * x[i])
                    .sum::<f64>();
            z.max(0.0)
        })
        .collect()
}

fn unit(v: &[f64]) -> Vec<f64> {
    let length = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    v.iter().map(|x| x / length).collect()
}

/// Each label's row is the unit-length mean of its samples' unit hidden vectors less its
/// part along the unit mean of all samples, times norm * n / (n + shrink); label 29, which
/// no sample has, keeps its initial row; the biases stay at zero; from a first label on,
/// the rows below it stay as they were.
#[test]
fn rows_start_at_centred_shrunk_label_centroids() {
    let mut data = sparse_data(300, INPUTS, LABELS - 1, 5);
    assert!((0..data.len()).all(|i| !data.labels(i).contains(&(LABELS - 1))));
    let (norm, shrink) = (3.0, 2.0);
    let mut net = net_with(centroids(norm, shrink), 11);
    let before: Vec<f32> = (0..HIDDEN)
        .map(|i| net.layers()[1].weight(LABELS as usize - 1, i))
        .collect();
    assert!(net.warm_start(&mut Workspace::new(), &data, 0).unwrap());

    let units: Vec<Vec<f64>> = (0..data.len())
        .map(|s| unit(&hidden(&net, &data, s)))
        .collect();
    let mut mean = vec![0.0; HIDDEN];
    for u in &units {
        mean.iter_mut().zip(u).for_each(|(m, x)| *m += x);
    }
    let mean = unit(&mean);
    let mut checked = 0;
    for label in 0..LABELS - 1 {
        let samples: Vec<usize> = (0..data.len())
            .filter(|&s| data.labels(s).contains(&label))
            .collect();
        let mut sum = vec![0.0; HIDDEN];
        for &s in &samples {
            sum.iter_mut().zip(&units[s]).for_each(|(a, x)| *a += x);
        }
        let centroid = unit(&sum);
        let along: f64 = centroid.iter().zip(&mean).map(|(c, m)| c * m).sum();
        let n = samples.len() as f64;
        let scale = f64::from(norm) * n / (n + f64::from(shrink));
        for i in 0..HIDDEN {
            let want = scale * (centroid[i] - along * mean[i]);
            let got = f64::from(net.layers()[1].weight(label as usize, i));
            assert!(
                (got - want).abs() < 1e-5,
                "label {label} input {i}: {got} vs {want}"
            );
        }
        assert_eq!(net.layers()[1].bias(label as usize), 0.0);
        checked += 1;
    }
    assert_eq!(checked, LABELS - 1);
    let after: Vec<f32> = (0..HIDDEN)
        .map(|i| net.layers()[1].weight(LABELS as usize - 1, i))
        .collect();
    assert_eq!(before, after, "a label without samples keeps its row");

    // From label 10 on (a grown network's new labels): the rows below keep their values,
    // the others are the same as above.
    let mut grown = net_with(centroids(norm, shrink), 11);
    let row = |net: &Network, label: usize| -> Vec<f32> {
        (0..HIDDEN)
            .map(|i| net.layers()[1].weight(label, i))
            .collect()
    };
    let initial: Vec<Vec<f32>> = (0..10).map(|l| row(&grown, l)).collect();
    assert!(grown.warm_start(&mut Workspace::new(), &data, 10).unwrap());
    for (label, kept) in initial.iter().enumerate() {
        assert_eq!(&row(&grown, label), kept, "label {label}");
    }
    for label in 10..LABELS as usize - 1 {
        assert_eq!(row(&grown, label), row(&net, label), "label {label}");
    }

    // Any other init: nothing happens.
    let mut glorot = net_with_glorot();
    let kept = row(&glorot, 0);
    assert!(!glorot.warm_start(&mut Workspace::new(), &data, 0).unwrap());
    assert_eq!(row(&glorot, 0), kept);
    data = SparseExamples::new();
    assert!(
        !net.warm_start(&mut Workspace::new(), &data, 0).unwrap(),
        "no data, no change"
    );
}

fn net_with_glorot() -> Network {
    net_with(Init::Glorot, 11)
}

/// Before any step, a warm-started network ranks the training set's labels far above
/// chance (a nearest-centroid classifier on the hidden layer's random features), where a
/// Glorot-initialised one is at chance; its LSH tables pick by the new rows.
#[test]
fn an_untrained_warm_started_network_already_ranks() {
    let data = sparse_data(400, INPUTS, LABELS, 7);
    let all: Vec<usize> = (0..data.len()).collect();
    let p1 = |net: &Network, mode: Mode| {
        net.evaluate(&mut Workspace::new(), &data, &all, mode)
            .unwrap()
            .metrics
            .precision[0]
    };
    let mut warm = net_with(centroids(3.0, 1.0), 3);
    warm.warm_start(&mut Workspace::new(), &data, 0).unwrap();
    let cold = net_with_glorot();
    let (warm_exact, cold_exact) = (p1(&warm, Mode::EvalExact), p1(&cold, Mode::EvalExact));
    assert!(warm_exact > 0.7, "warm-started P@1 {warm_exact}");
    assert!(cold_exact < 0.25, "Glorot P@1 {cold_exact}");
    let warm_lsh = p1(&warm, Mode::EvalLsh);
    assert!(
        warm_lsh > 0.5,
        "warm-started LSH-mode P@1 {warm_lsh} (tables rebuilt)"
    );
}

/// Centroids only on the output layer, with a positive norm and a shrink of 0 or more.
#[test]
fn centroids_are_refused_where_they_mean_nothing() {
    let hidden = LayerConfig {
        init: centroids(3.0, 1.0),
        ..input_major(HIDDEN, Activation::Relu)
    };
    let config = NetworkConfig::new(INPUTS, vec![hidden, dense(10, Activation::Softmax)]);
    let error = Network::new(config).err().expect("refused").to_string();
    assert!(
        error.contains("layers[0]") && error.contains("output layer"),
        "{error}"
    );
    for (init, says) in [
        (centroids(0.0, 1.0), "positive"),
        (centroids(f32::NAN, 1.0), "positive"),
        (centroids(3.0, -1.0), "shrink"),
    ] {
        let output = LayerConfig {
            init,
            ..dense(10, Activation::Softmax)
        };
        let config = NetworkConfig::new(INPUTS, vec![output]);
        let error = Network::new(config).err().expect("refused").to_string();
        assert!(error.contains(says), "{init:?}: {error}");
    }
}
