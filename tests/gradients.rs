//! Hand-derived gradients against central differences of a plain f64 reference.
//!
//! The reference (`common::Reference`) recomputes the network's loss in f64 with straight
//! loops, from the network's own weights. Central differences of it with `h = 1e-6` are
//! exact to about 1e-9, so they serve as the reference gradient.

mod common;

use common::*;
use slide::{
    Activation, Examples, LayerConfig, LayerGradients, Mode, Network, SoftmaxLoss, WeightLayout,
};

/// The network's gradients for `batch`, checked against central differences of the
/// reference loss restricted to the active sets the network used: every weight and bias
/// gradient of every layer within a relative error of `bound`, `|g - fd| / max(|fd|, floor)`
/// with `floor = 1e-3 * max |fd|` of the layer (the worst printed under `what`). Returned
/// for the test's further checks.
fn checked_gradients(
    net: &Network,
    data: &dyn Examples,
    batch: &[usize],
    what: &str,
    bound: f64,
) -> Vec<LayerGradients> {
    let grads = net
        .gradients(&mut slide::Workspace::new(), data, batch)
        .unwrap();
    let mut reference = Reference::of(net);
    let output_lsh = net.config().layers.last().and_then(|l| l.lsh);
    reference.log_q = output_lsh.is_some_and(|l| l.negatives.log_q);
    if let Some(l) = output_lsh.filter(|l| l.negatives.shared_negatives > 0) {
        reference.shared = net.export_state().layers.last().unwrap().shared.clone();
        reference.shared_fraction = f64::from(l.negatives.shared_shift);
    }
    reference.random_tail = output_lsh
        .map(|l| l.retrieval.sampling.random_extra)
        .filter(|&r| r > 0);
    let h = 1e-6;
    let mut worst = 0.0f64;
    for (l, layer) in net.layers().iter().enumerate() {
        let mut pairs = Vec::new();
        for j in 0..layer.out_dim() {
            for i in 0..layer.in_dim() {
                let mut plus = reference.clone();
                plus.w[l][j][i] += h;
                let mut minus = reference.clone();
                minus.w[l][j][i] -= h;
                let fd = (plus.loss(data, batch, Some(&grads))
                    - minus.loss(data, batch, Some(&grads)))
                    / (2.0 * h);
                pairs.push((f64::from(grads[l].weight(layer.layout(), j, i)), fd));
            }
            let mut plus = reference.clone();
            plus.b[l][j] += h;
            let mut minus = reference.clone();
            minus.b[l][j] -= h;
            let fd = (plus.loss(data, batch, Some(&grads)) - minus.loss(data, batch, Some(&grads)))
                / (2.0 * h);
            pairs.push((f64::from(grads[l].bias[j]), fd));
        }
        let largest = pairs.iter().map(|p| p.1.abs()).fold(0.0, f64::max);
        assert!(largest > 0.0, "layer {l} has no gradient at all");
        let floor = 1e-3 * largest;
        for (g, fd) in pairs {
            worst = worst.max((g - fd).abs() / fd.abs().max(floor));
        }
    }
    eprintln!("{what}: worst relative error {worst:.2e}");
    assert!(worst < bound, "{what}: {worst}");
    grads
}

/// The same network's reference loss under two corrections, over the active sets of
/// `grads`: the corrections must differ measurably (what makes a gradient check of one
/// of them a check of that correction).
fn assert_losses_differ(
    a: &Reference,
    b: &Reference,
    data: &dyn Examples,
    batch: &[usize],
    grads: &[LayerGradients],
) {
    let (la, lb) = (
        a.loss(data, batch, Some(grads)),
        b.loss(data, batch, Some(grads)),
    );
    assert!((la - lb).abs() > 1e-3, "{la} against {lb}");
}

/// The output layer (layer 1 of `grads`) sampled fewer than its `width` outputs for every
/// sample of `batch`, its labels always among them.
fn assert_output_sampled_with_labels(
    grads: &[LayerGradients],
    data: &dyn Examples,
    batch: &[usize],
    width: usize,
) {
    for (s, &i) in batch.iter().enumerate() {
        assert!(grads[1].active[s].len() < width, "output layer not sampled");
        for y in data.labels(i) {
            assert!(grads[1].active[s].contains(y), "label {y} not active");
        }
    }
}

/// Dense input, ReLU and linear hidden layers, softmax output, every neuron active.
/// d loss / d w[j][i] = delta_j * a_i, delta = (p - y) at the output, propagated through
/// W^T and the activations' derivatives. Measured worst relative error 1.4e-6: the f32
/// network agrees with the f64 reference gradient within 1e-5 and with central
/// differences far inside the 1e-3 asked of it.
#[test]
fn dense_network_gradients_match_central_differences() {
    let data = dense_data(6, 6, 3, 1);
    let net = network(
        6,
        vec![
            dense(5, Activation::Relu),
            dense(4, Activation::Linear),
            dense(3, Activation::Softmax),
        ],
        1e-3,
        2,
    );
    checked_gradients(&net, &data, &[0, 1, 2, 3, 4, 5], "dense", 1e-5);
}

/// Sparse multi-label input through an input-major first layer (every neuron active):
/// d loss / d W[input i][neuron j] = x_i * delta_j. Measured worst relative error 1.2e-6.
#[test]
fn sparse_multilabel_gradients_match_central_differences() {
    let data = sparse_data(8, 30, 7, 3);
    let net = network(
        30,
        vec![
            input_major(6, Activation::Relu),
            dense(7, Activation::Softmax),
        ],
        1e-3,
        4,
    );
    let batch: Vec<usize> = (0..8).collect();
    checked_gradients(&net, &data, &batch, "sparse multi-label", 1e-5);
}

/// LSH on a hidden and on the output layer: each active row's gradient equals that of the
/// loss restricted to the active sets, and inactive rows get none. Measured worst relative
/// error 1.4e-5 (one small gradient near the layer's floor).
#[test]
fn lsh_gradients_equal_those_of_the_loss_restricted_to_the_active_set() {
    let data = sparse_data(6, 24, 20, 5);
    let net = network(
        24,
        vec![
            sampled(16, Activation::Relu, 6),
            sampled(20, Activation::Softmax, 5),
        ],
        1e-3,
        6,
    );
    let batch: Vec<usize> = (0..6).collect();
    let grads = checked_gradients(&net, &data, &batch, "LSH restricted", 1e-3);
    // The sampling really is sparse, and labels are always active.
    for s in 0..batch.len() {
        assert!(grads[0].active[s].len() < 16, "hidden layer not sampled");
    }
    assert_output_sampled_with_labels(&grads, &data, &batch, 20);
    let touched: std::collections::BTreeSet<u32> =
        grads[1].active.iter().flatten().copied().collect();
    assert_eq!(grads[1].rows, touched.into_iter().collect::<Vec<_>>());
}

/// One-vs-all binary cross-entropy on sigmoid outputs, every output active:
/// `loss = -sum_j [y_j ln p_j + (1 - y_j) ln(1 - p_j)]`, `p = sigmoid(z)`, so
/// d loss / d z_j = p_j - y_j with no coupling between outputs, propagated through W^T
/// and ReLU's mask as for a softmax. Measured worst relative error 7.6e-6 (f32 against
/// f64: the bound leaves the other kernel sets room).
#[test]
fn one_vs_all_gradients_match_central_differences() {
    let data = sparse_data(8, 30, 7, 3);
    let net = network(
        30,
        vec![
            input_major(6, Activation::Relu),
            dense(7, Activation::Sigmoid),
        ],
        1e-3,
        4,
    );
    let batch: Vec<usize> = (0..8).collect();
    checked_gradients(&net, &data, &batch, "one-vs-all", 5e-5);
}

/// One-vs-all on an LSH-sampled output layer: the gradient is that of the binary losses of
/// the active outputs alone (labels always among them); outputs left out get none.
/// Measured worst relative error 3.8e-6.
#[test]
fn sampled_one_vs_all_gradients_equal_those_of_the_active_outputs_losses() {
    let data = sparse_data(6, 24, 20, 5);
    let net = network(
        24,
        vec![
            sampled(16, Activation::Relu, 6),
            sampled(20, Activation::Sigmoid, 5),
        ],
        1e-3,
        6,
    );
    let batch: Vec<usize> = (0..6).collect();
    let grads = checked_gradients(&net, &data, &batch, "one-vs-all LSH", 1e-4);
    assert_output_sampled_with_labels(&grads, &data, &batch, 20);
}

/// A 24 -> 8 ReLU -> 20 sampled softmax network with `softmax_loss`, log-Q and 3 shared
/// negatives at half the shift, after eight steps of its data (which refresh the shared
/// negatives), and the data.
fn shared_shift_network(softmax_loss: SoftmaxLoss) -> (slide::SparseExamples, Network) {
    let data = sparse_data(16, 24, 20, 5);
    let mut output = sampled(20, Activation::Softmax, 5);
    output.softmax_loss = softmax_loss;
    output.lsh = output.lsh.map(|l| slide::LshConfig {
        negatives: slide::Negatives {
            log_q: true,
            shared_negatives: 3,
            shared_shift: 0.5,
            ..l.negatives
        },
        ..l
    });
    let mut net = network(24, vec![dense(8, Activation::Relu), output], 1e-3, 6);
    for b in 0..8 {
        let batch: Vec<usize> = (2 * b..2 * b + 2).collect();
        net.train_step(&mut slide::Workspace::new(), &data, &batch)
            .unwrap();
    }
    (data, net)
}

/// The decoupled softmax (`SoftmaxLoss::Decoupled`): each label `l` of a sample against the
/// active non-labels alone, `loss = -(1/|y|) sum_l ln(p_l / (p_l + N))` with `N` their summed
/// probability, so d loss / d z_l = (q_l - 1) / |y| and d loss / d z_n = p_n (1/|y|)
/// sum_l 1 / (p_l + N); every output active, multi-label samples. Measured worst relative
/// error 1.7e-5 (portable kernels): the f32 probabilities carry 6e-8 of relative rounding
/// each into `q` and `N`, and a weight's gradient sums them over the batch with terms of
/// both signs that cancel up to a hundredfold; 1e-4 leaves other kernel sets room. The
/// shared softmax's loss differs.
#[test]
fn decoupled_softmax_gradients_match_central_differences() {
    let data = sparse_data(8, 30, 7, 3);
    let output = LayerConfig {
        softmax_loss: SoftmaxLoss::Decoupled,
        ..dense(7, Activation::Softmax)
    };
    let net = network(30, vec![input_major(6, Activation::Relu), output], 1e-3, 4);
    let batch: Vec<usize> = (0..8).collect();
    assert!(batch.iter().any(|&i| data.labels(i).len() > 1));
    let grads = checked_gradients(&net, &data, &batch, "decoupled softmax", 1e-4);
    let decoupled = Reference::of(&net);
    assert!(decoupled.decoupled);
    let shared = Reference {
        decoupled: false,
        ..decoupled.clone()
    };
    assert_losses_differ(&decoupled, &shared, &data, &batch, &grads);
}

/// The decoupled softmax on an LSH-sampled output with the recipe's corrections (log-Q on
/// the sampled outputs, shared negatives at half the shift): the non-labels' mass `N` is
/// over the active set with its shifted logits, and the gradients equal central differences
/// of that loss. Measured worst relative error 3.7e-6 (portable kernels), 7.2e-6 (scalar).
#[test]
fn sampled_decoupled_softmax_gradients_equal_those_of_the_shifted_loss() {
    let (data, net) = shared_shift_network(SoftmaxLoss::Decoupled);
    let batch: Vec<usize> = (0..6).collect();
    let grads = checked_gradients(&net, &data, &batch, "decoupled, sampled", 1e-3);
    assert_output_sampled_with_labels(&grads, &data, &batch, 20);
}

/// The log-Q correction: each non-label active output's logit is raised by
/// `s = ln((n - f) / (a - f))` before the softmax, a constant, so d loss / d z_j is still
/// `p_j - y_j` with `p` the shifted softmax, and the gradients equal central differences of
/// the shifted loss restricted to the active sets. Measured worst relative error 2.3e-6.
#[test]
fn log_q_gradients_equal_those_of_the_shifted_loss() {
    let data = sparse_data(6, 24, 20, 5);
    let mut output = sampled(20, Activation::Softmax, 5);
    output.lsh = output.lsh.map(|l| slide::LshConfig {
        negatives: slide::Negatives {
            log_q: true,
            ..l.negatives
        },
        ..l
    });
    let net = network(24, vec![dense(8, Activation::Relu), output], 1e-3, 6);
    let batch: Vec<usize> = (0..6).collect();
    let grads = checked_gradients(&net, &data, &batch, "log-Q", 1e-3);
    // The shift is real: without it the reference loss differs.
    let mut plain = Reference::of(&net);
    plain.log_q = false;
    let mut shifted = plain.clone();
    shifted.log_q = true;
    assert_losses_differ(&shifted, &plain, &data, &batch, &grads);
}

/// Shared negatives with a fraction of the log-Q shift (`Negatives::shared_shift`): the
/// labels are scored as themselves, the shared negatives with `0.5 s` and the other active
/// outputs with `s = ln((n - f) / (a - f))`, `f` counting labels and shared negatives. Each
/// is a constant per sample, so the gradients equal central differences of that loss.
/// Measured worst relative error 6.6e-6 (2.6e-6 before the shared negatives were re-ranked
/// between refreshes, which changed the set the eight steps leave).
#[test]
fn shared_shift_gradients_equal_those_of_the_shifted_loss() {
    let (data, net) = shared_shift_network(SoftmaxLoss::Shared);
    let shared = net.export_state().layers[1].shared.clone();
    assert_eq!(shared.len(), 3);
    let batch: Vec<usize> = (0..6).collect();
    let grads = checked_gradients(&net, &data, &batch, "shared shift", 1e-3);
    // The shared negatives' shift is real: scoring them as themselves gives another loss.
    let mut reference = Reference::of(&net);
    (reference.log_q, reference.shared) = (true, shared);
    let unshifted = reference.clone();
    reference.shared_fraction = 0.5;
    assert_losses_differ(&reference, &unshifted, &data, &batch, &grads);
}

/// The log-Q correction with uniformly random negatives on top of the tables' picks
/// (`Sampling::random_extra`): the labels and the tables' picks are scored as themselves and
/// only the `r` random ids are shifted, by `s = ln((n - f - t) / r)`. The shift is again a
/// constant per sample, so d loss / d z_j = p_j - y_j of the shifted softmax, and the
/// gradients equal central differences of that loss. Measured worst relative error 2.6e-6.
#[test]
fn log_q_gradients_with_random_negatives_equal_those_of_the_shifted_loss() {
    let data = sparse_data(6, 24, 20, 5);
    let mut output = sampled(20, Activation::Softmax, 5);
    output.lsh = output.lsh.map(|l| slide::LshConfig {
        retrieval: slide::Retrieval {
            sampling: l.retrieval.sampling.with_min_active(0).with_random_extra(4),
            ..l.retrieval
        },
        negatives: slide::Negatives {
            log_q: true,
            ..l.negatives
        },
        ..l
    });
    let net = network(24, vec![dense(8, Activation::Relu), output], 1e-3, 6);
    let batch: Vec<usize> = (0..6).collect();
    let grads = checked_gradients(&net, &data, &batch, "log-Q with random negatives", 1e-3);
    // The tables' picks are spared: shifting every non-label id instead gives another loss.
    let mut tail = Reference::of(&net);
    tail.log_q = true;
    tail.random_tail = Some(4);
    let mut everything = tail.clone();
    everything.random_tail = None;
    assert_losses_differ(&tail, &everything, &data, &batch, &grads);
}

/// With every neuron active, the network's output probabilities equal the f64 reference's.
#[test]
fn forward_outputs_match_the_reference() {
    let data = sparse_data(5, 30, 7, 8);
    let net = network(
        30,
        vec![
            input_major(6, Activation::Relu),
            dense(5, Activation::Linear),
            dense(7, Activation::Softmax),
        ],
        1e-3,
        9,
    );
    let reference = Reference::of(&net);
    let mut worst = 0.0f64;
    for i in 0..5 {
        let outputs = net
            .outputs(&mut slide::Workspace::new(), &data, i, Mode::EvalExact)
            .unwrap();
        let expected = reference.forward(&dense_input(data.input(i), 30), None);
        assert_eq!(outputs.len(), 7);
        for (id, p) in outputs {
            worst = worst.max((f64::from(p) - expected[id as usize]).abs() / expected[id as usize]);
        }
    }
    eprintln!("forward: worst relative error {worst:.2e}");
    assert!(worst < 1e-5, "{worst}");
}

#[test]
fn layout_does_not_change_the_gradient() {
    // The same first layer stored both ways gives the same gradients.
    let data = sparse_data(6, 20, 5, 10);
    let a = network(
        20,
        vec![
            input_major(4, Activation::Relu),
            dense(5, Activation::Softmax),
        ],
        1e-3,
        11,
    );
    let mut b = network(
        20,
        vec![dense(4, Activation::Relu), dense(5, Activation::Softmax)],
        1e-3,
        11,
    );
    for j in 0..4 {
        for i in 0..20 {
            let w = a.layers()[0].weight(j, i);
            b.layer_mut(0).set_weight(j, i, w);
        }
    }
    for j in 0..5 {
        for i in 0..4 {
            let w = a.layers()[1].weight(j, i);
            b.layer_mut(1).set_weight(j, i, w);
        }
    }
    let batch: Vec<usize> = (0..6).collect();
    let ga = a
        .gradients(&mut slide::Workspace::new(), &data, &batch)
        .unwrap();
    let gb = b
        .gradients(&mut slide::Workspace::new(), &data, &batch)
        .unwrap();
    for j in 0..4 {
        for i in 0..20 {
            let x = ga[0].weight(WeightLayout::InputMajor, j, i);
            let y = gb[0].weight(WeightLayout::NeuronMajor, j, i);
            assert!(
                (x - y).abs() <= 1e-6 * x.abs().max(1e-3),
                "w[{j}][{i}]: {x} vs {y}"
            );
        }
    }
}

/// `Negatives::min_gradient`: an active output whose delta (`p - y`) is below the bound is
/// left out of the backward pass and the update. Against the same network without it (the
/// same active sets), one sample at a time: the output layer's touched rows are the
/// others, with the same gradients bit for bit, and the hidden layer's gradient is what the
/// kept outputs alone send back, `relu'(z_k) sum_kept delta_j w[j][k]` times the input,
/// computed here in f64 from the network's weights. The bound is the median delta, so that
/// both kinds occur. With 8 of 20 outputs active a sample, and with all 20 (a dense pass,
/// whose batch computes its outputs and its input gradients as matrix products).
#[test]
fn outputs_below_min_gradient_are_left_out_of_the_backward_pass_and_the_update() {
    left_out_below_min_gradient(8);
    left_out_below_min_gradient(20);
}

fn left_out_below_min_gradient(min_active: usize) {
    let data = sparse_data(6, 24, 20, 5);
    let with = |min_gradient: f32| {
        let mut output = sampled(20, Activation::Softmax, min_active);
        output.lsh = output.lsh.map(|l| slide::LshConfig {
            negatives: slide::Negatives {
                min_gradient,
                ..l.negatives
            },
            ..l
        });
        network(24, vec![dense(8, Activation::Relu), output], 1e-3, 6)
    };
    let all = with(0.0);
    let gradients = |net: &Network, s: usize| {
        net.gradients(&mut slide::Workspace::new(), &data, &[s])
            .unwrap()
    };
    // With one sample, an output's bias gradient is its delta.
    let mut deltas: Vec<f32> = (0..6)
        .flat_map(|s| {
            let g = gradients(&all, s);
            g[1].rows
                .iter()
                .map(|&j| g[1].bias[j as usize].abs())
                .collect::<Vec<_>>()
        })
        .collect();
    deltas.sort_by(f32::total_cmp);
    let bound = deltas[deltas.len() / 2];
    let cut = with(bound);
    let reference = Reference::of(&all);
    let (mut dropped, mut worst) = (0, 0.0f64);
    for s in 0..6 {
        let (g_all, g_cut) = (gradients(&all, s), gradients(&cut, s));
        assert_eq!(g_all[1].active, g_cut[1].active);
        let delta = |j: u32| g_all[1].bias[j as usize];
        let kept: Vec<u32> = g_all[1]
            .rows
            .iter()
            .copied()
            .filter(|&j| delta(j).abs() >= bound)
            .collect();
        assert_eq!(g_cut[1].rows, kept, "sample {s}");
        dropped += g_all[1].rows.len() - kept.len();
        for j in 0..20u32 {
            let expected = if kept.contains(&j) { delta(j) } else { 0.0 };
            assert_eq!(g_cut[1].bias[j as usize], expected, "bias {j}");
        }
        for &j in &kept {
            for i in 0..8 {
                let w =
                    |g: &[LayerGradients]| g[1].weight(WeightLayout::NeuronMajor, j as usize, i);
                assert_eq!(w(&g_cut).to_bits(), w(&g_all).to_bits(), "w[{j}][{i}]");
            }
        }
        let x = dense_input(data.input(s), 24);
        let largest = (0..8)
            .flat_map(|k| (0..24).map(move |i| (k, i)))
            .map(|(k, i)| f64::from(g_all[0].weight(WeightLayout::NeuronMajor, k, i)).abs())
            .fold(0.0, f64::max);
        for k in 0..8 {
            let z: f64 =
                reference.b[0][k] + (0..24).map(|i| reference.w[0][k][i] * x[i]).sum::<f64>();
            let back: f64 = kept
                .iter()
                .map(|&j| f64::from(delta(j)) * reference.w[1][j as usize][k])
                .sum();
            let back = if z > 0.0 { back } else { 0.0 };
            for (i, &xi) in x.iter().enumerate() {
                let got = f64::from(g_cut[0].weight(WeightLayout::NeuronMajor, k, i));
                let expected = back * xi;
                worst = worst.max((got - expected).abs() / expected.abs().max(1e-3 * largest));
            }
        }
    }
    eprintln!("min_gradient: {dropped} outputs left out, worst relative error {worst:.2e}");
    assert!(dropped > 0, "the bound left nothing out");
    assert!(worst < 1e-4, "{worst}");
    // During a warm-up every active output trains, the bound or not.
    let warming = |min_gradient: f32| {
        let mut config = with(min_gradient).config().clone();
        if let Some(lsh) = &mut config.layers[1].lsh {
            lsh.warmup = Some(slide::Warmup {
                random: 2,
                length: slide::WarmupLength::Steps(100),
            });
        }
        Network::new(config).unwrap()
    };
    let (warm_all, warm_cut) = (warming(0.0), warming(bound));
    let mut small = 0;
    for s in 0..6 {
        let (g_all, g_cut) = (gradients(&warm_all, s), gradients(&warm_cut, s));
        assert_eq!(g_cut[1].rows, g_all[1].rows, "sample {s}");
        small += g_all[1]
            .rows
            .iter()
            .filter(|&&j| g_all[1].bias[j as usize].abs() < bound)
            .count();
        for (a, c) in g_all.iter().zip(&g_cut) {
            let bits =
                |g: &LayerGradients| g.weights.iter().map(|w| w.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(c), bits(a), "sample {s}");
        }
    }
    assert!(small > 0, "no output below the bound during the warm-up");
}
