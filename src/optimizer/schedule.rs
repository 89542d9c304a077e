//! The learning rate over a run: constant, cosine or exponential decay (as PyTorch's
//! `CosineAnnealingLR` and `ExponentialLR`), after an optional linear warm-up. Set each
//! step's rate with [`Network::set_learning_rate`](crate::Network::set_learning_rate).

/// How the learning rate decays after the warm-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "kebab-case")
)]
pub enum Decay {
    /// The base rate throughout.
    #[default]
    Constant,
    /// From the base rate down to [`LrSchedule::lr_min`] along half a cosine over the run.
    Cosine,
    /// The base rate times [`LrSchedule::lr_gamma`] to the power `epoch - 1`.
    Exponential,
}

/// A learning-rate schedule: `LrSchedule { lr: 4e-3, ..Default::default() }` is a constant
/// rate; set `decay` and its parameter, and `warmup_steps`, for the others.
///
/// ```
/// use slide::{Decay, LrSchedule};
/// let cosine = LrSchedule { lr: 0.01, decay: Decay::Cosine, lr_min: 0.001, ..Default::default() };
/// assert_eq!(cosine.rate(1, 1000, 1), 0.01);
/// assert!((cosine.rate(1001, 1000, 1) - 0.001).abs() < 1e-7);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LrSchedule {
    /// The base rate.
    pub lr: f32,
    /// How the rate decays.
    pub decay: Decay,
    /// The rate [`Decay::Cosine`] ends at.
    pub lr_min: f32,
    /// [`Decay::Exponential`]'s factor per epoch.
    pub lr_gamma: f32,
    /// Steps over which the rate first rises linearly from 0 (0: none).
    pub warmup_steps: u64,
}

impl Default for LrSchedule {
    /// Adam's usual 1e-3, constant, no warm-up.
    fn default() -> Self {
        LrSchedule {
            lr: 1e-3,
            decay: Decay::Constant,
            lr_min: 0.0,
            lr_gamma: 1.0,
            warmup_steps: 0,
        }
    }
}

impl LrSchedule {
    /// The rate of step `step` (1-based) of a run of `total` steps, in epoch `epoch`
    /// (1-based); never exactly 0, since the optimizer takes positive rates only.
    pub fn rate(&self, step: u64, total: u64, epoch: usize) -> f32 {
        let base = match self.decay {
            Decay::Constant => f64::from(self.lr),
            Decay::Cosine => {
                let progress = (step.saturating_sub(1) as f64 / total.max(1) as f64).min(1.0);
                let (hi, lo) = (f64::from(self.lr), f64::from(self.lr_min));
                lo + 0.5 * (hi - lo) * (1.0 + (std::f64::consts::PI * progress).cos())
            }
            Decay::Exponential => {
                f64::from(self.lr) * f64::from(self.lr_gamma).powi(epoch as i32 - 1)
            }
        };
        let warm = if step <= self.warmup_steps {
            step as f64 / self.warmup_steps as f64
        } else {
            1.0
        };
        (base * warm).max(1e-12) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each decay at its landmarks: cosine's start, middle (`lo + (hi - lo) / 2`) and end,
    /// exponential's third epoch (`lr gamma^2`), the warm-up's middle, and step 0 positive.
    #[test]
    fn rates_follow_each_decay_and_the_warm_up() {
        let mut s = LrSchedule {
            lr: 0.01,
            ..LrSchedule::default()
        };
        assert_eq!(s.rate(500, 1000, 3), 0.01);
        s.decay = Decay::Cosine;
        s.lr_min = 0.001;
        assert_eq!(s.rate(1, 1000, 1), 0.01);
        assert!((s.rate(501, 1000, 1) - 0.0055).abs() < 1e-7);
        assert!((s.rate(1001, 1000, 1) - 0.001).abs() < 1e-7);
        s.decay = Decay::Exponential;
        s.lr_gamma = 0.5;
        assert_eq!(s.rate(7, 1000, 3), 0.0025);
        s.warmup_steps = 10;
        assert_eq!(s.rate(5, 1000, 1), 0.005);
        assert!(s.rate(0, 1000, 1) > 0.0);
    }
}
