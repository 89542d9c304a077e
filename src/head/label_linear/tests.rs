//! The per-label linear head's unit tests: its gradient, steps, re-ranking, hashing and settings.
use super::*;

fn sparse<'a>(indices: &'a [u32], values: &'a [f32]) -> Vector<'a> {
    Vector::Sparse { indices, values }
}

/// A hashed head: 50 labels x 201 weights do not fit in 2^12.
fn small() -> LabelLinearHead {
    let head = LabelLinearHead::new(
        LabelLinearConfig {
            bits: 12,
            ..LabelLinearConfig::default()
        },
        HeadShape {
            inputs: 200,
            outputs: 50,
        },
    )
    .unwrap();
    assert!(!head.is_dense());
    head
}

#[test]
fn hinge_gradient_matches_central_differences() {
    // d/ds max(0, 1 - y s)^2 = -2 y max(0, 1 - y s): checked on both sides of the
    // margin for both signs of y, away from the kink at y s = 1.
    let loss = |s: f32, y: f32| (1.0f32 - y * s).max(0.0).powi(2);
    for &(s, positive) in &[(0.3f32, true), (-1.5, true), (0.2, false), (-0.4, false)] {
        let y = if positive { 1.0 } else { -1.0 };
        let h = 1e-3f32;
        let numeric = (loss(s + h, y) - loss(s - h, y)) / (2.0 * h);
        let analytic = LabelLinearHead::hinge_gradient(s, positive);
        assert!(
            (numeric - analytic).abs() < 1e-3,
            "s {s} y {y}: {numeric} vs {analytic}"
        );
    }
    assert_eq!(LabelLinearHead::hinge_gradient(1.5, true), 0.0);
    assert_eq!(LabelLinearHead::hinge_gradient(-1.5, false), 0.0);
}

#[test]
fn an_sgd_step_lowers_the_loss_by_the_gradient_times_the_step() {
    // For one label and lr small, the loss falls by about lr * g^2 (the step is
    // -lr * g * x / |x|^2 in its weights, barring hash collisions, absent here, so the
    // score moves by -lr * g).
    let mut head = small();
    let (indices, values) = ([3u32, 17, 40], [0.5f32, 0.25, 0.8]);
    let x = sparse(&indices, &values);
    let mut updates = Vec::new();
    let before = head.gradients(x, &[7], &[7], &mut updates);
    assert_eq!(before, 1.0, "zero weights: the margin is missed by 1");
    assert_eq!(updates, vec![(7, -2.0)]);
    let lr = 1e-3;
    head.apply(x, &updates, lr);
    assert!((head.score(x, 7) - lr * 2.0).abs() < 1e-6);
    let after = head.gradients(x, &[7], &[7], &mut Vec::new());
    let predicted = before - lr * 4.0;
    assert!((after - predicted).abs() < 1e-5, "{after} vs {predicted}");
}

#[test]
fn training_separates_a_label_from_a_negative() {
    // Two classifiers on the same features: the label's score rises above 1 and the
    // negative's falls below -1 within a few dozen steps, and nothing else moves but the
    // two labels' intercepts (the bias feature, 1 by default).
    let mut head = small();
    let (indices, values) = ([1u32, 2, 9], [0.6f32, 0.6, 0.5]);
    let x = sparse(&indices, &values);
    for _ in 0..50 {
        let mut updates = Vec::new();
        head.gradients(x, &[4, 5], &[4], &mut updates);
        head.apply(x, &updates, 0.2);
    }
    assert!(head.score(x, 4) > 0.99 && head.score(x, 5) < -0.99);
    // An input with none of the features gets the label's intercept alone.
    let other = sparse(&[100], &[1.0]);
    let intercept = head.score(sparse(&[], &[]), 4);
    assert!(intercept > 0.0);
    assert_eq!(head.score(other, 4), intercept);
    let moved = head.table().iter().filter(|&&w| w != 0.0).count();
    assert_eq!(moved, 8, "3 features and the bias x 2 labels");
}

#[test]
fn rescoring_adds_the_weighted_head_score_and_heads_rank_ties_low_id_first() {
    let mut head = small();
    let (indices, values) = ([0u32], [1.0f32]);
    let x = sparse(&indices, &values);
    // Give output 9 a head score of 2: with the default weight 3 it gains 6.
    head.apply(x, &[(9, -2.0)], 1.0);
    let mut candidates = [(3.0, 1), (2.5, 9), (2.0, 4), (2.0, 2)];
    head.rescore(x, &mut candidates);
    assert_eq!(candidates, [(3.0, 1), (8.5, 9), (2.0, 4), (2.0, 2)]);
    let heads = crate::head::Heads::from_built(vec![crate::head::AnyHead::LabelLinear(head)]);
    let best = [(3.0, 1), (2.5, 9), (2.0, 4), (2.0, 2)];
    assert_eq!(
        heads.rerank(x, &best),
        [(8.5, 9), (3.0, 1), (2.0, 2), (2.0, 4)]
    );
}

#[test]
fn slots_spread_over_the_table() {
    // 200 features x 50 labels into 4,096 slots: a uniform hash fills about
    // 4096 * (1 - exp(-10000 / 4096)) = 3,742 of them; far fewer means clustering.
    let head = small();
    let mut used = vec![false; 1 << 12];
    for j in 0..200 {
        for l in 0..50 {
            used[head.slot(j, l)] = true;
        }
    }
    let filled = used.iter().filter(|&&u| u).count();
    assert!((3600..=3900).contains(&filled), "{filled} slots");
}

#[test]
fn settings_out_of_range_are_refused_by_key() {
    let bad = [
        LabelLinearConfig {
            bits: 9,
            ..Default::default()
        },
        LabelLinearConfig {
            lr: 0.0,
            ..Default::default()
        },
        LabelLinearConfig {
            lr: 1.5,
            ..Default::default()
        },
        LabelLinearConfig {
            weight: f32::NAN,
            ..Default::default()
        },
        LabelLinearConfig {
            shortlist: 65,
            ..Default::default()
        },
    ];
    let keys = [
        "heads.label-linear.bits",
        "heads.label-linear.lr",
        "heads.label-linear.lr",
        "heads.label-linear.weight",
        "heads.label-linear.shortlist",
    ];
    for (config, key) in bad.iter().zip(keys) {
        let message = config.validate().unwrap_err().to_string();
        assert!(message.contains(key), "{message}");
    }
    assert!(LabelLinearConfig::default().validate().is_ok());
    let shape = |inputs, outputs| HeadShape { inputs, outputs };
    let default = LabelLinearConfig::default();
    assert_eq!(default.table_bytes(shape(1_000_000, 1_000)), 64 << 20);
    assert_eq!(default.table_bytes(shape(1836, 159)), 4 * 1837 * 159);
}
