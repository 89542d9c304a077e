//! The network's losses over the output layer's active neurons: softmax cross-entropy with
//! soft targets `1/|y|` on each of a sample's labels or a decoupled softmax per label (a
//! softmax output), or one-vs-all binary cross-entropy (a sigmoid output).

use crate::layer::{Activation, LayerTrace, SoftmaxLoss};

/// The loss of one sample for an output layer of `activation` and `softmax_loss` (see
/// [`softmax_cross_entropy`], [`decoupled_softmax`] and [`binary_cross_entropy`]), its
/// gradient on the active logits into the trace's gradient.
pub(crate) fn output_loss(
    (activation, softmax_loss): (Activation, SoftmaxLoss),
    output: &mut LayerTrace,
    labels: &[u32],
    label_count: usize,
) -> f64 {
    match (activation, softmax_loss) {
        (Activation::Sigmoid, _) => binary_cross_entropy(output, labels),
        (_, SoftmaxLoss::Decoupled) => decoupled_softmax(output, labels),
        (_, SoftmaxLoss::Shared) => softmax_cross_entropy(output, labels, label_count),
    }
}

/// Where `label` is in the output's active set (its own index with every output active).
fn position_of(trace: &LayerTrace, label: u32) -> Option<usize> {
    if trace.dense {
        Some(label as usize)
    } else {
        trace.active.iter().position(|&id| id == label)
    }
}

/// The one-vs-all binary cross-entropy of one sample whose sigmoid outputs `p` are in
/// `output`, summed over its active outputs: `-sum_j [y_j ln p_j + (1 - y_j) ln(1 - p_j)]`
/// with `y_j = 1` on the sample's `labels` and 0 elsewhere; its gradient on the active
/// logits, `p - y`, into the trace's gradient. Each output is its own question, so the loss
/// of a slice of the outputs (one rank's) is its share of the whole. Logs are floored like
/// any underflow.
pub(crate) fn binary_cross_entropy(output: &mut LayerTrace, labels: &[u32]) -> f64 {
    output.delta.clear();
    output.delta.extend_from_slice(&output.out);
    let mut loss: f64 = output
        .out
        .iter()
        .map(|&p| -f64::from((1.0 - p).max(f32::MIN_POSITIVE)).ln())
        .sum();
    for &label in labels {
        if let Some(k) = position_of(output, label) {
            let p = output.out[k];
            loss += f64::from((1.0 - p).max(f32::MIN_POSITIVE)).ln()
                - f64::from(p.max(f32::MIN_POSITIVE)).ln();
            output.delta[k] -= 1.0;
        } else {
            // A label outside the active set (LSH evaluation only) has p = 0 there.
            loss -= f64::from(f32::MIN_POSITIVE).ln();
        }
    }
    loss
}

/// The loss of one sample whose output layer's softmax is in `output`, and its gradient
/// with respect to the active logits (`p - y`) into the trace's gradient. `labels` are the
/// sample's labels among the layer's outputs, `label_count` how many it has in all (more
/// when the layer is one rank's slice of a sharded layer: each label's target is
/// `1 / label_count`, and each rank adds its labels' part of the loss). A label outside
/// the active set (possible only when evaluating with LSH) has probability 0 there; its log
/// is floored like any underflow.
pub(crate) fn softmax_cross_entropy(
    output: &mut LayerTrace,
    labels: &[u32],
    label_count: usize,
) -> f64 {
    let target = 1.0 / label_count.max(1) as f32;
    let mut loss = 0.0;
    for &label in labels {
        let p = position_of(output, label).map_or(0.0, |k| output.out[k]);
        loss -= f64::from(target) * f64::from(p.max(f32::MIN_POSITIVE)).ln();
    }
    output.delta.clear();
    output.delta.extend_from_slice(&output.out);
    for &label in labels {
        if let Some(k) = position_of(output, label) {
            output.delta[k] -= target;
        }
    }
    loss
}

/// The decoupled softmax loss of one sample whose output layer's softmax `p` is in `output`
/// (one normaliser for every active output; a sharded layer is refused where the network
/// is built): each label `l` is scored against the active outputs that are not labels,
/// `q_l = p_l / (p_l + N)` with `N` their summed probability, and the loss is
/// `-(1/|y|) sum_l ln q_l` (the normaliser cancels in `q_l`, so it is the softmax of
/// `z_l` against the non-labels' logits). The gradient on the active logits, into the
/// trace's gradient: `(q_l - 1) / |y|` on a label (only its own term holds `z_l`), and
/// `p_n (1/|y|) sum_l 1 / (p_l + N)` on a non-label `n`, each term at most `1/|y|` since
/// `p_n <= N`. A label outside the active set (LSH evaluation only) has `q = 0` there, its
/// log floored like any underflow, as is that of a label whose `p_l + N` underflows.
pub(crate) fn decoupled_softmax(output: &mut LayerTrace, labels: &[u32]) -> f64 {
    let weight = 1.0 / labels.len().max(1) as f64;
    let floor = f64::from(f32::MIN_POSITIVE);
    output.delta.clear();
    output.delta.extend_from_slice(&output.out);
    // The labels' slots marked (no probability is negative), so that the rest sums to the
    // non-labels' mass: summed, not `1 - labels`, so that a small mass keeps its digits.
    let mut loss = 0.0;
    for &label in labels {
        match position_of(output, label) {
            Some(k) => output.delta[k] = f32::NEG_INFINITY,
            None => loss -= weight * floor.ln(),
        }
    }
    let negatives: f64 = output
        .delta
        .iter()
        .filter(|d| d.is_finite())
        .map(|&d| f64::from(d))
        .sum();
    // Each label's own term, once (a repeated label finds its slot already written).
    let mut pull = 0.0;
    for &label in labels {
        let Some(k) = position_of(output, label).filter(|&k| output.delta[k].is_infinite()) else {
            continue;
        };
        let whole = f64::from(output.out[k]) + negatives;
        let q = if whole > 0.0 {
            pull += weight / whole;
            f64::from(output.out[k]) / whole
        } else {
            0.0
        };
        loss -= weight * q.max(floor).ln();
        output.delta[k] = ((q - 1.0) * weight) as f32;
    }
    // The labels' gradients are at most 0, the non-labels' probabilities above it.
    for d in output.delta.iter_mut().filter(|d| **d > 0.0) {
        *d = (f64::from(*d) * pull) as f32;
    }
    loss
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two labels among three active outputs: the loss is the mean of their negative logs,
    /// the gradient `p - 1/2` on each label and `p` elsewhere.
    #[test]
    fn soft_targets_split_the_gradient_between_labels() {
        let mut trace = LayerTrace {
            active: vec![7, 2, 9],
            out: vec![0.5, 0.3, 0.2],
            ..LayerTrace::default()
        };
        let loss = softmax_cross_entropy(&mut trace, &[2, 9], 2);
        let expected = -0.5 * (0.3f64.ln() + 0.2f64.ln());
        assert!((loss - expected).abs() < 1e-6, "{loss} vs {expected}");
        let want = [0.5, 0.3 - 0.5, 0.2 - 0.5];
        for (g, w) in trace.gradient().iter().zip(want) {
            assert!((g - w).abs() < 1e-7, "{:?}", trace.gradient());
        }
    }

    /// Two labels among three active sigmoid outputs: the loss is each output's own
    /// log-loss, summed (`-ln 0.3 - ln 0.2 - ln(1 - 0.5)`), the gradient `p - 1` on each
    /// label and `p` on the other; the label count of a sharded layer does not enter.
    #[test]
    fn one_vs_all_scores_each_output_on_its_own() {
        let mut trace = LayerTrace {
            active: vec![7, 2, 9],
            out: vec![0.5, 0.3, 0.2],
            ..LayerTrace::default()
        };
        let loss = output_loss(
            (Activation::Sigmoid, SoftmaxLoss::Shared),
            &mut trace,
            &[2, 9],
            5,
        );
        let expected = -(0.3f64.ln() + 0.2f64.ln() + 0.5f64.ln());
        assert!((loss - expected).abs() < 1e-6, "{loss} vs {expected}");
        let want = [0.5, 0.3 - 1.0, 0.2 - 1.0];
        for (g, w) in trace.gradient().iter().zip(want) {
            assert!((g - w).abs() < 1e-7, "{:?}", trace.gradient());
        }
    }

    /// Two labels among three active outputs, decoupled: each label against the non-label's
    /// 0.5 alone, `q = 0.3 / 0.8` and `0.2 / 0.7`; the loss `-(ln q_2 + ln q_9) / 2`, the
    /// gradient `(q - 1) / 2` on each label and `0.5 * (1/0.8 + 1/0.7) / 2` on the other.
    #[test]
    fn decoupled_labels_do_not_compete() {
        let mut trace = LayerTrace {
            active: vec![7, 2, 9],
            out: vec![0.5, 0.3, 0.2],
            ..LayerTrace::default()
        };
        let losses = (Activation::Softmax, SoftmaxLoss::Decoupled);
        let loss = output_loss(losses, &mut trace, &[2, 9], 2);
        let (q2, q9) = (0.3 / 0.8, 0.2 / 0.7);
        let expected = -0.5 * (f64::ln(q2) + f64::ln(q9));
        assert!((loss - expected).abs() < 1e-6, "{loss} vs {expected}");
        let want = [
            0.25 * (1.0 / 0.8 + 1.0 / 0.7),
            (q2 - 1.0) / 2.0,
            (q9 - 1.0) / 2.0,
        ];
        for (&g, w) in trace.gradient().iter().zip(want) {
            assert!((f64::from(g) - w).abs() < 1e-6, "{:?}", trace.gradient());
        }
    }

    /// With one label the decoupled loss is the shared softmax's (`p + N = 1`), and a label
    /// outside the active set (LSH evaluation) adds the floored log like a shared softmax's.
    #[test]
    fn one_label_decoupled_is_the_shared_softmax() {
        let out = vec![0.6, 0.25, 0.15];
        let mut shared = LayerTrace {
            active: vec![4, 1, 8],
            out: out.clone(),
            ..LayerTrace::default()
        };
        let mut decoupled = LayerTrace {
            active: vec![4, 1, 8],
            out,
            ..LayerTrace::default()
        };
        let a = softmax_cross_entropy(&mut shared, &[1, 3], 2);
        let b = decoupled_softmax(&mut decoupled, &[1, 3]);
        // Label 1 against the non-labels' 0.75: q = 0.25, the shared softmax's p.
        let expected = -0.5 * f64::ln(0.25) - 0.5 * f64::from(f32::MIN_POSITIVE).ln();
        assert!(
            (a - expected).abs() < 1e-6 && (b - expected).abs() < 1e-6,
            "{a} {b}"
        );
        let mut single = LayerTrace {
            active: vec![4, 1, 8],
            out: vec![0.6, 0.25, 0.15],
            ..LayerTrace::default()
        };
        let loss = decoupled_softmax(&mut single, &[1]);
        assert!((loss + f64::ln(0.25)).abs() < 1e-6, "{loss}");
        let want = [0.6, 0.25 - 1.0, 0.15];
        for (g, w) in single.gradient().iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{:?}", single.gradient());
        }
    }
}
