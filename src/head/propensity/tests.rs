//! The propensity head's unit tests: its prior against the metric's propensities, its part
//! in the ranking and its state.
use super::*;
use crate::head::{HeadConfig, Heads};

/// A network of 8 input features and 10 outputs.
const SHAPE: HeadShape = HeadShape {
    inputs: 8,
    outputs: 10,
};

/// Four samples: label 1 on all four, label 2 on one, label 3 on none.
fn data() -> crate::SparseExamples {
    let mut data = crate::SparseExamples::new();
    data.push(&[0], &[1.0], &[1, 2]);
    data.push(&[1], &[1.0], &[1]);
    data.push(&[2], &[1.0], &[1]);
    data.push(&[3], &[1.0], &[1]);
    data
}

/// The prior is the log of the inverse propensity PSP@k weighs a hit by (Jain et al.'s
/// `1 + C (N_l + B)^-A`, `C = (ln N - 1) (B + 1)^A`), computed here by hand: N = 4,
/// A = 0.55, B = 1.5.
#[test]
fn the_prior_is_the_log_inverse_propensity() {
    let mut head = PropensityConfig::default().build(SHAPE).unwrap();
    assert_eq!(head.log_inverse(1), None, "no counts yet");
    head.prepare(&data());
    let c = (4f64.ln() - 1.0) * 2.5f64.powf(0.55);
    let expected = |n: f64| ((1.0 + c * (n + 1.5).powf(-0.55)).ln()) as f32;
    for (label, count) in [(1, 4.0), (2, 1.0), (3, 0.0)] {
        let got = head.log_inverse(label).unwrap();
        assert!((got - expected(count)).abs() < 1e-6, "{label}: {got}");
    }
    // A rarer label weighs more; a label beyond the network has none.
    assert!(head.log_inverse(3).unwrap() > head.log_inverse(2).unwrap());
    assert!(head.log_inverse(2).unwrap() > head.log_inverse(1).unwrap());
    assert_eq!(head.log_inverse(10), None);
}

/// Under e training samples Jain et al.'s constant is negative: the prior is 0, not the log
/// of a number below 1 (or NaN).
#[test]
fn a_tiny_training_set_lifts_nothing() {
    let mut data = crate::SparseExamples::new();
    data.push(&[0], &[1.0], &[1]);
    data.push(&[1], &[1.0], &[2]);
    let mut head = PropensityConfig::default().build(SHAPE).unwrap();
    head.prepare(&data);
    for label in 0..10 {
        assert_eq!(head.log_inverse(label), Some(0.0), "label {label}");
    }
}

/// Re-ranking adds `weight` times the prior to each candidate's score: labels a tenth of a
/// logit behind commoner ones pass them at weight 2; weight 0 changes nothing.
#[test]
fn the_prior_lifts_rare_labels_by_its_weight() {
    let x = Vector::Sparse {
        indices: &[0],
        values: &[1.0],
    };
    let best = [(5.0, 1), (4.9, 2), (4.8, 7)];
    let gap = |weight: f32| {
        let mut heads = Heads::new(
            &[HeadConfig::Propensity(PropensityConfig {
                weight,
                ..Default::default()
            })],
            SHAPE,
        )
        .unwrap();
        heads.prepare(&data());
        heads.rerank(x, &best)
    };
    assert_eq!(gap(0.0), best);
    // Alone, the head asks prediction for its shortlist of the network's best.
    let alone = Heads::new(
        &[HeadConfig::Propensity(PropensityConfig::default())],
        SHAPE,
    );
    assert_eq!(alone.unwrap().shortlist(), 16);
    let head = {
        let mut h = PropensityConfig::default().build(SHAPE).unwrap();
        h.prepare(&data());
        h
    };
    let (l1, l2, l7) = (
        head.log_inverse(1).unwrap(),
        head.log_inverse(2).unwrap(),
        head.log_inverse(7).unwrap(),
    );
    let ranked = gap(2.0);
    assert_eq!(ranked.iter().map(|p| p.1).collect::<Vec<_>>(), [7, 2, 1]);
    assert!((ranked[0].0 - (4.8 + 2.0 * l7)).abs() < 1e-5);
    assert!((ranked[2].0 - (5.0 + 2.0 * l1)).abs() < 1e-5);
    assert!(4.9 + 2.0 * l2 > 5.0 + 2.0 * l1, "label 2 passes label 1");
}

/// The counts go out as two tensors and come back; a state without them is refused once
/// training began, and counts of another label count or above the samples are refused.
#[test]
fn the_counts_round_trip_through_the_state_protocol() {
    let config = PropensityConfig::default();
    let mut head = config.build(SHAPE).unwrap();
    assert!(head.state_tensors().is_empty());
    head.prepare(&data());
    let names: Vec<String> = head.state_tensors().into_iter().map(|t| t.name).collect();
    assert_eq!(names, [COUNTS, SAMPLES]);
    let state = crate::NetworkState {
        heads: crate::head::HeadTensor::all(head.state_tensors(), |name, sink| {
            head.write_state_tensor(name, sink)
        })
        .unwrap(),
        ..Default::default()
    };
    let source = || crate::network_state::MemorySource(&state);
    let mut back = config.build(SHAPE).unwrap();
    back.read_state(5, 10, &mut source()).unwrap();
    assert_eq!(back, head);
    let err = back.read_state(5, 9, &mut source()).unwrap_err();
    assert!(err.to_string().contains("not 9 and 1"), "{err}");
    let empty = crate::NetworkState::default();
    let mut fresh = config.build(SHAPE).unwrap();
    let mut none = crate::network_state::MemorySource(&empty);
    assert!(fresh.read_state(0, 10, &mut none).is_ok());
    let err = fresh.read_state(1, 10, &mut none).unwrap_err();
    assert!(
        err.to_string().contains("remove the propensity head"),
        "{err}"
    );
    // A count above the samples is not a count.
    let mut bad = state.clone();
    for t in &mut bad.heads {
        if t.name == SAMPLES {
            t.bytes = 1u32.to_le_bytes().to_vec();
        }
    }
    let err = fresh
        .read_state(1, 10, &mut crate::network_state::MemorySource(&bad))
        .unwrap_err();
    assert!(err.to_string().contains("are not counts"), "{err}");
}

/// The weight must be finite and at least 0, the shortlist within 1..=64.
#[test]
fn the_weight_is_checked() {
    for weight in [-0.1, f32::NAN, f32::INFINITY] {
        let config = PropensityConfig {
            weight,
            ..Default::default()
        };
        let err = config.validate().unwrap_err();
        assert!(err.to_string().contains("heads.propensity.weight"), "{err}");
    }
    for shortlist in [0, MAX_SHORTLIST + 1] {
        let config = PropensityConfig {
            shortlist,
            ..Default::default()
        };
        let err = config.validate().unwrap_err();
        assert!(
            err.to_string().contains("heads.propensity.shortlist"),
            "{err}"
        );
    }
    let zero = PropensityConfig {
        weight: 0.0,
        ..Default::default()
    };
    assert!(zero.validate().is_ok());
}
