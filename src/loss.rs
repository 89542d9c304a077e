//! The network's losses over the output layer's active neurons: softmax cross-entropy with
//! soft targets `1/|y|` on each of a sample's labels (a softmax output), or one-vs-all
//! binary cross-entropy (a sigmoid output).

use crate::layer::{Activation, LayerTrace};

/// The loss of one sample for an output layer of `activation` (see
/// [`softmax_cross_entropy`] and [`binary_cross_entropy`]), its gradient on the active
/// logits into the trace's gradient.
pub(crate) fn output_loss(
    activation: Activation,
    output: &mut LayerTrace,
    labels: &[u32],
    label_count: usize,
) -> f64 {
    if activation == Activation::Sigmoid {
        binary_cross_entropy(output, labels)
    } else {
        softmax_cross_entropy(output, labels, label_count)
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
        let loss = output_loss(Activation::Sigmoid, &mut trace, &[2, 9], 5);
        let expected = -(0.3f64.ln() + 0.2f64.ln() + 0.5f64.ln());
        assert!((loss - expected).abs() < 1e-6, "{loss} vs {expected}");
        let want = [0.5, 0.3 - 1.0, 0.2 - 1.0];
        for (g, w) in trace.gradient().iter().zip(want) {
            assert!((g - w).abs() < 1e-7, "{:?}", trace.gradient());
        }
    }
}
