//! slide's hand-derived gradients and Adam step against reverse-mode autodiff (burn) on the
//! same small networks: every neuron active, and with LSH picking the neurons (the baseline's
//! loss then masked to slide's active sets).

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use slide::lsh::{FamilyKind, LshParams, Projection, Sampling};
use slide::{
    Activation, AdamConfig, DenseExamples, Examples, LayerConfig, LayerGradients, LshConfig,
    Network, NetworkConfig, RebuildSchedule, Retrieval, SoftmaxLoss, SparseExamples, WeightLayout,
};
use slide_benches::baseline::{Baseline, Gradients};

fn layer(
    out_dim: usize,
    activation: Activation,
    layout: WeightLayout,
    budget: Option<usize>,
) -> LayerConfig {
    LayerConfig {
        layout,
        lsh: budget.map(|b| LshConfig {
            retrieval: Retrieval {
                family: FamilyKind::SimHash(Projection::Gaussian),
                params: LshParams {
                    k: 3,
                    l: 4,
                    range_pow: 3,
                },
                bucket_capacity: 8,
                sampling: Sampling::vanilla().with_budget(b).with_min_active(b),
                ..Default::default()
            },
            ..Default::default()
        }),
        ..LayerConfig::new(out_dim, activation)
    }
}

fn network(input_dim: usize, layers: Vec<LayerConfig>) -> Network {
    Network::new(NetworkConfig {
        adam: AdamConfig {
            lr: 0.01,
            ..AdamConfig::default()
        },
        rebuild: RebuildSchedule::Fixed { every: 100 },
        seed: 21,
        ..NetworkConfig::new(input_dim, layers)
    })
    .unwrap()
}

/// Multi-label sparse samples: 4-8 nonzeros of `dim`, 1-3 labels of `labels`.
fn sparse(n: usize, dim: u32, labels: u32) -> SparseExamples {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let mut data = SparseExamples::new();
    for _ in 0..n {
        let mut f: Vec<u32> = (0..rng.random_range(4..=8))
            .map(|_| rng.random_range(0..dim))
            .collect();
        f.sort_unstable();
        f.dedup();
        let v: Vec<f32> = f.iter().map(|_| rng.random_range(0.1..1.5)).collect();
        let mut y: Vec<u32> = (0..rng.random_range(1..=3))
            .map(|_| rng.random_range(0..labels))
            .collect();
        y.sort_unstable();
        y.dedup();
        data.push(&f, &v, &y);
    }
    data
}

fn dense(n: usize, dim: usize, classes: u32) -> DenseExamples {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(10);
    DenseExamples {
        dim,
        inputs: (0..n * dim).map(|_| rng.random_range(-1.0..1.0)).collect(),
        classes: (0..n).map(|_| rng.random_range(0..classes)).collect(),
    }
}

/// The largest difference between slide's and autodiff's gradients, relative to the largest
/// autodiff gradient of the layer; asserts it is at most 1e-4 for every layer.
fn assert_close(net: &Network, slide: &[LayerGradients], ad: &Gradients) {
    for (l, layer) in net.layers().iter().enumerate() {
        let (n_in, n_out) = (layer.in_dim(), layer.out_dim());
        let scale = ad.weights[l].iter().fold(0.0f32, |m, g| m.max(g.abs()));
        assert!(scale > 1e-4, "layer {l}: autodiff gradients are all ~0");
        let mut worst = 0.0f32;
        for i in 0..n_in {
            for j in 0..n_out {
                let a = slide[l].weight(layer.layout(), j, i);
                let b = ad.weights[l][i * n_out + j];
                worst = worst.max((a - b).abs() / scale);
            }
        }
        for j in 0..n_out {
            worst = worst.max((slide[l].bias[j] - ad.biases[l][j]).abs() / scale);
        }
        eprintln!("layer {l}: max relative difference {worst:.2e} (largest gradient {scale:.3e})");
        assert!(worst <= 1e-4, "layer {l}: {worst}");
    }
}

#[test]
fn every_neuron_active_gradients_equal_autodiff_sparse_input() {
    let data = sparse(12, 40, 16);
    let net = network(
        40,
        vec![
            layer(24, Activation::Relu, WeightLayout::InputMajor, None),
            layer(16, Activation::Softmax, WeightLayout::NeuronMajor, None),
        ],
    );
    let batch: Vec<usize> = (0..12).collect();
    let g = net
        .gradients(&mut slide::Workspace::new(), &data, &batch)
        .unwrap();
    let ad = Baseline::from_network(&net).gradients(&data, &batch, None);
    assert_close(&net, &g, &ad);
}

#[test]
fn every_neuron_active_gradients_equal_autodiff_dense_input() {
    let data = dense(10, 30, 10);
    let net = network(
        30,
        vec![
            layer(20, Activation::Relu, WeightLayout::NeuronMajor, None),
            layer(20, Activation::Relu, WeightLayout::InputMajor, None),
            layer(10, Activation::Softmax, WeightLayout::NeuronMajor, None),
        ],
    );
    let batch: Vec<usize> = (0..10).collect();
    let g = net
        .gradients(&mut slide::Workspace::new(), &data, &batch)
        .unwrap();
    let ad = Baseline::from_network(&net).gradients(&data, &batch, None);
    assert_close(&net, &g, &ad);
}

/// LSH on the hidden and the output layer: slide's gradients equal autodiff's of the loss
/// restricted to slide's active sets.
#[test]
fn sampled_gradients_equal_autodiff_of_the_masked_loss() {
    let data = sparse(12, 40, 24);
    let net = network(
        40,
        vec![
            layer(32, Activation::Relu, WeightLayout::NeuronMajor, Some(8)),
            layer(24, Activation::Softmax, WeightLayout::NeuronMajor, Some(6)),
        ],
    );
    let batch: Vec<usize> = (0..12).collect();
    let g = net
        .gradients(&mut slide::Workspace::new(), &data, &batch)
        .unwrap();
    let masks: Vec<Vec<Vec<u32>>> = g.iter().map(|l| l.active.clone()).collect();
    assert!(
        masks[0].iter().all(|a| a.len() < 32),
        "the hidden layer samples"
    );
    let base = Baseline::from_network(&net);
    let ad = base.gradients(&data, &batch, Some(&masks));
    assert_close(&net, &g, &ad);
    // Unmasked, the full network's gradients are different: the masks are what matches.
    let full = base.gradients(&data, &batch, None);
    let apart = full.weights[1]
        .iter()
        .zip(&ad.weights[1])
        .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
    assert!(apart > 1e-3, "masked and full gradients agree ({apart})");
}

/// The output loss of `output` (a 24-wide output layer, sampled by LSH with a budget when
/// given one), every output active, then on LSH picks of it: slide's gradients equal
/// autodiff's of the loss over the same outputs, and the loss values of a training step
/// agree.
fn output_loss_equals_autodiff(output: impl Fn(Option<usize>) -> LayerConfig) {
    let data = sparse(12, 40, 24);
    assert!((0..12).any(|i| data.labels(i).len() > 1));
    let hidden = layer(24, Activation::Relu, WeightLayout::InputMajor, None);
    let full = network(40, vec![hidden, output(None)]);
    let batch: Vec<usize> = (0..12).collect();
    let g = full
        .gradients(&mut slide::Workspace::new(), &data, &batch)
        .unwrap();
    assert_close(
        &full,
        &g,
        &Baseline::from_network(&full).gradients(&data, &batch, None),
    );

    let hidden = layer(32, Activation::Relu, WeightLayout::NeuronMajor, Some(8));
    let sampled = network(40, vec![hidden, output(Some(6))]);
    let g = sampled
        .gradients(&mut slide::Workspace::new(), &data, &batch)
        .unwrap();
    let masks: Vec<Vec<Vec<u32>>> = g.iter().map(|l| l.active.clone()).collect();
    assert!(
        masks[1].iter().all(|a| a.len() < 24),
        "the output layer samples"
    );
    let ad = Baseline::from_network(&sampled).gradients(&data, &batch, Some(&masks));
    assert_close(&sampled, &g, &ad);

    let mut net = full;
    let mut base = Baseline::from_network(&net);
    let loss_base = base.train_step(&data, &batch);
    let stats = net
        .train_step(&mut slide::Workspace::new(), &data, &batch)
        .unwrap();
    assert!(
        (stats.loss - loss_base).abs() < 1e-4 * loss_base,
        "{} vs {loss_base}",
        stats.loss
    );
}

/// One-vs-all binary cross-entropy on a sigmoid output.
#[test]
fn one_vs_all_gradients_equal_autodiff() {
    output_loss_equals_autodiff(|budget| {
        layer(24, Activation::Sigmoid, WeightLayout::NeuronMajor, budget)
    });
}

/// The decoupled softmax (each label against the active non-labels alone).
#[test]
fn decoupled_softmax_gradients_equal_autodiff() {
    output_loss_equals_autodiff(|budget| LayerConfig {
        softmax_loss: SoftmaxLoss::Decoupled,
        ..layer(24, Activation::Softmax, WeightLayout::NeuronMajor, budget)
    });
}

/// One Adam step from the same weights: every parameter moves by the same amount (within
/// 1e-4 of the learning rate) in slide and in the autodiff baseline.
#[test]
fn one_adam_step_equals_the_baseline_step() {
    let data = sparse(16, 40, 16);
    let mut net = network(
        40,
        vec![
            layer(24, Activation::Relu, WeightLayout::InputMajor, None),
            layer(16, Activation::Softmax, WeightLayout::NeuronMajor, None),
        ],
    );
    let batch: Vec<usize> = (0..16).collect();
    let mut base = Baseline::from_network(&net);
    let before: Vec<(Vec<f32>, Vec<f32>)> = (0..2).map(|l| base.parameters(l)).collect();
    let loss_base = base.train_step(&data, &batch);
    let stats = net
        .train_step(&mut slide::Workspace::new(), &data, &batch)
        .unwrap();
    assert!(
        (stats.loss - loss_base).abs() < 1e-4 * loss_base,
        "{} vs {loss_base}",
        stats.loss
    );
    let lr = 0.01;
    let mut moved = 0;
    for (l, layer) in net.layers().iter().enumerate() {
        let (w_after, b_after) = base.parameters(l);
        let n_out = layer.out_dim();
        for i in 0..layer.in_dim() {
            for j in 0..n_out {
                let k = i * n_out + j;
                let slide_delta = layer.weight(j, i) - before[l].0[k];
                let base_delta = w_after[k] - before[l].0[k];
                moved += usize::from(base_delta.abs() > 0.5 * lr);
                assert!(
                    (slide_delta - base_delta).abs() <= 1e-4 * lr + 1e-7,
                    "layer {l} w[{i},{j}]: {slide_delta} vs {base_delta}"
                );
            }
        }
        for (j, (&after, &was)) in b_after.iter().zip(&before[l].1).enumerate() {
            let slide_delta = layer.bias(j) - was;
            let base_delta = after - was;
            assert!(
                (slide_delta - base_delta).abs() <= 1e-4 * lr + 1e-7,
                "layer {l} b[{j}]"
            );
        }
    }
    assert!(moved > 100, "only {moved} weights moved by about lr");
}
