use super::grouping::tests::{layer, trace};
use super::*;
use slide_lsh::Vector;

/// A layer-level update checks what it is given before touching anything.
#[test]
fn update_refuses_a_trace_from_another_layer() {
    let mut l = layer(3, 6, WeightLayout::NeuronMajor);
    let x = [1.0, 0.0, 2.0];
    let foreign = trace(&[1], &[1.0], (3, 7));
    let mut adam = Adam::new(AdamConfig::default()).unwrap();
    adam.advance();
    let before = l.export_state();
    let batch = [(Vector::Dense(&x), &foreign)];
    let e = l.update(&batch[..], 1.0, &adam, &mut UpdateScratch::default());
    assert!(e.unwrap_err().to_string().contains("trace"));
    assert_eq!(l.export_state(), before);
}

/// Under the global bias correction an update before any `Adam::advance` is refused
/// (its correction would be undefined); the per-row correction needs no step count.
#[test]
fn update_refuses_an_adam_that_has_not_advanced() {
    let mut l = layer(3, 6, WeightLayout::NeuronMajor);
    let x = [1.0, 0.0, 2.0];
    let t = trace(&[1], &[1.0], (3, 6));
    let batch = [(Vector::Dense(&x), &t)];
    let mut adam = Adam::new(AdamConfig::default()).unwrap();
    let before = l.export_state();
    let e = l.update(&batch[..], 1.0, &adam, &mut UpdateScratch::default());
    assert!(e.unwrap_err().to_string().contains("Adam::advance"));
    assert_eq!(l.export_state(), before);
    adam.advance();
    assert_eq!(adam.steps(), 1);
    l.update(&batch[..], 1.0, &adam, &mut UpdateScratch::default())
        .unwrap();
    let per_row = AdamConfig {
        bias_correction: BiasCorrection::PerRow,
        ..AdamConfig::default()
    };
    l.update(
        &batch[..],
        1.0,
        &Adam::new(per_row).unwrap(),
        &mut UpdateScratch::default(),
    )
    .unwrap();
}

/// A 3 -> 6 linear layer of the given weight and moment precisions and second moment,
/// before and after one `adam` update from input `[1, 0, 2]` with deltas 0.5 on neuron 1
/// and -2 on neuron 4.
fn one_update(
    (weights, moments, second_moment): (
        crate::layer::Precision,
        crate::layer::Precision,
        SecondMoment,
    ),
    adam: &Adam,
) -> (crate::layer::LayerState, crate::layer::LayerState) {
    use crate::layer::{Activation, LayerConfig};
    let config = LayerConfig {
        weights,
        moments,
        second_moment,
        ..LayerConfig::new(6, Activation::Linear)
    };
    let mut l = SparseLayer::new(3, &config, 5).unwrap();
    let x = [1.0f32, 0.0, 2.0];
    let t = trace(&[1, 4], &[0.5, -2.0], (3, 6));
    let batch = [(Vector::Dense(&x), &t)];
    let before = l.export_state();
    l.update(&batch[..], 1.0, adam, &mut UpdateScratch::default())
        .unwrap();
    (before, l.export_state())
}

/// With a second moment per row, a row's first update (global correction) moves each
/// weight by `lr * g / rms(g)`, where Adam's first update moves it by `lr * sign(g)`:
/// with the gradient `delta * x`, by Adam's step times `|x_i| / rms(x)`. The row's
/// second moment, the first value of its `v`, is the mean of Adam's per-weight ones and
/// the row's other `v` values are not written; untouched rows keep their values. In
/// f32, with BF16 moments and with BF16 weights (there within two BF16 units, one
/// rounding in each update).
#[test]
fn a_second_moment_per_row_scales_the_row_by_its_rms() {
    use crate::layer::Precision;
    let x = [1.0f32, 0.0, 2.0];
    let rms = (5.0f32 / 3.0).sqrt();
    let (f32, bf16) = (Precision::F32, Precision::Bf16);
    for (weights, moments) in [(f32, f32), (f32, bf16), (bf16, bf16)] {
        let mut adam = Adam::new(AdamConfig {
            lr: 0.01,
            ..AdamConfig::default()
        })
        .unwrap();
        adam.advance();
        let updated = |second_moment| one_update((weights, moments, second_moment), &adam);
        let (before, element) = updated(SecondMoment::Element);
        let (same_start, row) = updated(SecondMoment::Row);
        assert_eq!(before, same_start);
        for r in 0..6 {
            for (c, xc) in x.iter().enumerate() {
                let i = r * 3 + c;
                let adam_step = element.weights[i] - before.weights[i];
                let expected = before.weights[i] + adam_step * xc.abs() / rms;
                let unit = if weights == bf16 {
                    before.weights[i].abs() / 64.0
                } else {
                    1e-6
                };
                let got = row.weights[i];
                assert!(
                    (got - expected).abs() <= unit,
                    "{weights:?} w[{r}][{c}]: {got} vs {expected}"
                );
                if ![1, 4].contains(&r) {
                    assert_eq!(got, before.weights[i]);
                }
            }
            let mean_v = element.v[r * 3..r * 3 + 3].iter().sum::<f32>() / 3.0;
            let tolerance = if moments == bf16 {
                mean_v / 64.0
            } else {
                mean_v * 1e-6
            };
            assert!(
                (row.v[r * 3] - mean_v).abs() <= tolerance,
                "{moments:?} v of row {r}"
            );
            assert_eq!(row.v[r * 3 + 1..r * 3 + 3], [0.0, 0.0]);
            assert_eq!(row.v[r * 3] > 0.0, [1, 4].contains(&r));
        }
    }
}

/// The biases of thousands of touched neurons are updated in parallel halves; the
/// result equals one loop in order, under both corrections (per-row: each neuron's own
/// step count, set unevenly here).
#[test]
fn biases_updated_in_parallel_equal_one_loop() {
    let n = 30_000;
    let touched: Vec<u32> = (0..n as u32).filter(|i| i % 3 != 1).collect();
    let gradients: Vec<f32> = touched.iter().map(|&i| ((i as f32) * 0.37).sin()).collect();
    for bias_correction in [BiasCorrection::Global, BiasCorrection::PerRow] {
        let mut adam = Adam::new(AdamConfig {
            bias_correction,
            ..AdamConfig::default()
        })
        .unwrap();
        adam.set_steps(5);
        let start = |i: usize| (i as f32 * 0.01).cos();
        let mut parallel: [Vec<f32>; 3] = [(0..n).map(start).collect(), vec![0.1; n], vec![0.2; n]];
        let mut steps: Vec<u32> = (0..n as u32).map(|i| i % 7).collect();
        let mut sequential = parallel.clone();
        let mut sequential_steps = steps.clone();
        let [bias, m, v] = &mut parallel;
        BiasRows {
            bias,
            m,
            v,
            steps: &mut steps,
            lr_scale: 1.0,
        }
        .update(0, &touched, &gradients, &adam);
        let [bias, m, v] = &mut sequential;
        let mut one = BiasRows {
            bias,
            m,
            v,
            steps: &mut sequential_steps,
            lr_scale: 1.0,
        };
        for (&neuron, &g) in touched.iter().zip(&gradients) {
            one.update_one(neuron as usize, g, &adam);
        }
        assert_eq!(parallel, sequential, "{bias_correction:?}");
        assert_eq!(steps, sequential_steps);
        // Untouched neurons kept their values; touched ones moved.
        assert_eq!(parallel[0][1], start(1));
        assert_ne!(parallel[0][2], start(2));
    }
}

/// `lr_scale` multiplies the layer's Adam steps: from the same weights and gradient, the
/// first update of a layer with `lr_scale = 2.5` moves every touched weight and bias 2.5
/// times as far as the plain layer's (Adam's first step is `lr * sign(g)` = 0.001 here;
/// 1e-6 allows the f32 roundings of weights near 1), in both layouts; the rest stays.
#[test]
fn lr_scale_multiplies_the_step() {
    use crate::layer::{Activation, LayerConfig};
    let x = [1.0f32, 0.0, 2.0];
    for layout in [WeightLayout::NeuronMajor, WeightLayout::InputMajor] {
        let t = trace(&[1, 4], &[0.5, -1.0], (3, 6));
        let batch = [(Vector::Dense(&x), &t)];
        let mut adam = Adam::new(AdamConfig::default()).unwrap();
        adam.advance();
        let moved = |lr_scale: f32| {
            let config = LayerConfig {
                layout,
                lr_scale,
                ..LayerConfig::new(6, Activation::Linear)
            };
            let mut l = SparseLayer::new(3, &config, 5).unwrap();
            let before = l.export_state();
            l.update(&batch[..], 1.0, &adam, &mut UpdateScratch::default())
                .unwrap();
            let after = l.export_state();
            let (b, a) = (&before.weights, &after.weights);
            let weights: Vec<f32> = a.iter().zip(b).map(|(a, b)| a - b).collect();
            let biases: Vec<f32> = (0..6).map(|j| l.bias(j) - before.bias[j]).collect();
            (weights, biases)
        };
        let (w1, b1) = moved(1.0);
        let (w2, b2) = moved(2.5);
        // Neurons 1 and 4 on inputs 0 and 2 (input 1 is zero), and their two biases.
        assert_eq!(w1.iter().filter(|d| d.abs() > 0.0).count(), 4, "{layout:?}");
        assert_eq!(b1.iter().filter(|d| d.abs() > 0.0).count(), 2, "{layout:?}");
        for (one, scaled) in w1.iter().chain(&b1).zip(w2.iter().chain(&b2)) {
            assert!(
                (scaled - 2.5 * one).abs() <= 1e-6,
                "{one} {scaled} ({layout:?})"
            );
        }
    }
}

/// Without a first moment (`beta1 = 0`, `xmc.toml`'s) a row first touched late in training
/// steps by its gradient over the root of its bias-corrected second moment: each weight by
/// `lr / sqrt((1 - b2) / (1 - b2^t))` (about 25 `lr` at step 1,000) with a second moment per
/// weight, by that times `|g_i| / rms(g)` with one per row; ten times (`1 / (1 - 0.9)`,
/// less the first moment's correction) the step of `beta1 = 0.9`. A second moment per
/// weight stores the gradient as the first moment; one per row leaves the stored first
/// moments as they were (it neither reads nor writes them). In f32, with BF16 moments and
/// with BF16 weights (there within a BF16 unit of the weights before and after: one
/// rounding in each).
#[test]
fn without_a_first_moment_a_late_first_step_is_the_gradient_over_its_root_mean_square() {
    use crate::layer::Precision;
    let x = [1.0f32, 0.0, 2.0];
    let rms = (5.0f32 / 3.0).sqrt();
    let (lr, b2, t) = (0.001f32, 0.999f64, 1000);
    let root = ((1.0 - b2) / (1.0 - b2.powi(t))).sqrt() as f32;
    let (f32, bf16) = (Precision::F32, Precision::Bf16);
    for (weights, moments) in [(f32, f32), (f32, bf16), (bf16, bf16)] {
        for second_moment in [SecondMoment::Element, SecondMoment::Row] {
            let updated = |beta1: f32| {
                let config = AdamConfig {
                    lr,
                    beta1,
                    ..AdamConfig::default()
                };
                let mut adam = Adam::new(config).unwrap();
                for _ in 0..t {
                    adam.advance();
                }
                one_update((weights, moments, second_moment), &adam)
            };
            let (before, plain) = updated(0.0);
            let (same_start, momentum) = updated(0.9);
            assert_eq!(before, same_start);
            let ratio = (1.0 - 0.9f64.powi(t)) as f32 / 0.1;
            let unit = |w: f32| {
                if weights == bf16 {
                    w.abs() / 128.0
                } else {
                    1e-6
                }
            };
            for (r, delta) in [(1, 0.5f32), (4, -2.0)] {
                for (c, &xc) in x.iter().enumerate() {
                    let i = r * 3 + c;
                    let g = delta * xc;
                    let step = match second_moment {
                        SecondMoment::Element => lr * g.signum() * f32::from(g != 0.0),
                        SecondMoment::Row => lr * (g / delta.abs()) / rms,
                    } / root;
                    let (w0, w) = (before.weights[i], plain.weights[i]);
                    let tolerance = unit(w0) + unit(w) + 1e-6;
                    let what = format!("{weights:?}/{moments:?}/{second_moment:?} w[{r}][{c}]");
                    assert!(
                        (w - w0 + step).abs() <= tolerance,
                        "{what}: {w} vs {}",
                        w0 - step
                    );
                    let with_momentum = momentum.weights[i] - w0;
                    let tolerance = tolerance + unit(momentum.weights[i]) * ratio;
                    assert!(
                        ((w - w0) - ratio * with_momentum).abs() <= tolerance,
                        "{what}: {} vs {ratio} x {with_momentum}",
                        w - w0
                    );
                    let m_unit = if moments == bf16 {
                        g.abs() / 128.0
                    } else {
                        0.0
                    };
                    let m = match second_moment {
                        SecondMoment::Element => g,
                        SecondMoment::Row => before.m[i],
                    };
                    assert!((plain.m[i] - m).abs() <= m_unit, "{what}: m {}", plain.m[i]);
                }
            }
        }
    }
}
