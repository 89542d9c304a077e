//! The output layer's non-linearities over a sample's active logits, numerically stable
//! for any finite logit.

/// The logistic function `1 / (1 + e^-z)`, without overflow for any finite `z`.
pub(crate) fn sigmoid(z: f32) -> f32 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// Numerically stable softmax; returns the largest logit and the sum of `exp(z - largest)`.
pub(crate) fn softmax_in_place(z: &mut [f32]) -> (f32, f32) {
    let max = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    for x in z.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    let inv = 1.0 / sum;
    z.iter_mut().for_each(|x| *x *= inv);
    (max, sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sigmoid(0) = 1/2`, `sigmoid(-z) = 1 - sigmoid(z)`, and the extremes stay finite
    /// (0 and 1, no NaN from `e^z` overflowing); the softmax sums to 1 and reports the
    /// largest logit.
    #[test]
    fn activations_are_stable_at_the_extremes() {
        assert_eq!(sigmoid(0.0), 0.5);
        for z in [0.5f32, 3.0, 20.0] {
            assert!((sigmoid(-z) - (1.0 - sigmoid(z))).abs() < 1e-6, "{z}");
        }
        assert_eq!((sigmoid(-1000.0), sigmoid(1000.0)), (0.0, 1.0));
        let mut z = [1000.0f32, 999.0, -1000.0];
        let (max, _) = softmax_in_place(&mut z);
        assert_eq!(max, 1000.0);
        assert!((z.iter().sum::<f32>() - 1.0).abs() < 1e-6, "{z:?}");
        assert!((z[0] / z[1] - 1f32.exp()).abs() < 1e-4, "{z:?}");
    }
}
