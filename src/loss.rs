//! The network's loss: softmax cross-entropy with soft targets `1/|y|` on each of a
//! sample's labels, over the output layer's active neurons.

use crate::layer::LayerTrace;

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
    let position_of = |trace: &LayerTrace, label: u32| -> Option<usize> {
        if trace.dense {
            Some(label as usize)
        } else {
            trace.active.iter().position(|&id| id == label)
        }
    };
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
}
