//! [`AdamStep`]: the bias-corrected constants of one Adam update, which every kernel set's
//! row update takes.

/// Bias-corrected Adam constants for one update of one row (see [`AdamStep::new`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamStep {
    /// `lr / (1 - beta1^t)`.
    pub step_size: f32,
    /// `1 / sqrt(1 - beta2^t)`.
    pub inv_sqrt_bias2: f32,
    /// First-moment decay.
    pub beta1: f32,
    /// Second-moment decay.
    pub beta2: f32,
    /// Denominator guard.
    pub eps: f32,
}

impl AdamStep {
    /// The constants for the `t`-th update (`t >= 1`) of a parameter, as in PyTorch's Adam:
    /// `w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)`.
    pub fn new(lr: f32, beta1: f32, beta2: f32, eps: f32, t: u32) -> Self {
        let t = t.max(1) as i32;
        let bias1 = 1.0 - f64::from(beta1).powi(t);
        let bias2 = 1.0 - f64::from(beta2).powi(t);
        AdamStep {
            step_size: (f64::from(lr) / bias1) as f32,
            inv_sqrt_bias2: (1.0 / bias2.sqrt()) as f32,
            beta1,
            beta2,
            eps,
        }
    }

    /// The same update with its step size times `factor` (a layer's `lr_scale`).
    #[inline]
    pub fn scaled(self, factor: f32) -> Self {
        AdamStep {
            step_size: self.step_size * factor,
            ..self
        }
    }
}
