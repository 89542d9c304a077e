//! The learning rate over a run: constant, cosine or exponential decay (as PyTorch's
//! `CosineAnnealingLR` and `ExponentialLR`), after an optional linear warm-up. Set each
//! step's rate with [`Network::set_learning_rate`](crate::Network::set_learning_rate).

use crate::error::{Result, config_error};

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

/// A learning-rate schedule around a base rate (Adam's [`lr`](crate::AdamConfig::lr), the
/// schedule's peak): `LrSchedule::default()` keeps it constant; set `decay` and its
/// parameter, and `warmup_steps`, for the others.
///
/// ```
/// use slide::{Decay, LrSchedule};
/// let cosine = LrSchedule { decay: Decay::Cosine, lr_min: 0.001, ..Default::default() };
/// assert_eq!(cosine.rate(0.01, 1, 1000, 1), 0.01);
/// assert!((cosine.rate(0.01, 1001, 1000, 1) - 0.001).abs() < 1e-7);
/// assert!(cosine.validate(0.0005).is_err()); // lr_min above the base rate
/// ```
///
/// With the `serde` feature it reads a config file's `[train]` keys `lr_schedule` (the
/// decay: `"constant"`, `"cosine"` or `"exponential"`), `lr_min`, `lr_gamma` and
/// `warmup_steps`; each left out takes its default.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default)
)]
pub struct LrSchedule {
    /// How the rate decays (`lr_schedule`; default constant).
    #[cfg_attr(feature = "serde", serde(rename = "lr_schedule"))]
    pub decay: Decay,
    /// The rate [`Decay::Cosine`] ends at (default 0).
    pub lr_min: f32,
    /// [`Decay::Exponential`]'s factor per epoch (default 1).
    pub lr_gamma: f32,
    /// Steps over which the rate first rises linearly from 0 (default 0: none; the sampled
    /// layers' `warmup` is another warm-up, of random outputs).
    pub warmup_steps: u64,
}

impl Default for LrSchedule {
    /// A constant rate.
    fn default() -> Self {
        LrSchedule {
            decay: Decay::Constant,
            lr_min: 0.0,
            lr_gamma: 1.0,
            warmup_steps: 0,
        }
    }
}

impl LrSchedule {
    /// The rate of step `step` (1-based) of `total`, in epoch `epoch` (1-based), around the
    /// base rate `lr`.
    pub fn rate(&self, lr: f32, step: u64, total: u64, epoch: usize) -> f32 {
        let base = match self.decay {
            Decay::Constant => f64::from(lr),
            Decay::Cosine => {
                let progress = (step.saturating_sub(1) as f64 / total.max(1) as f64).min(1.0);
                let (hi, lo) = (f64::from(lr), f64::from(self.lr_min));
                lo + 0.5 * (hi - lo) * (1.0 + (std::f64::consts::PI * progress).cos())
            }
            Decay::Exponential => f64::from(lr) * f64::from(self.lr_gamma).powi(epoch as i32 - 1),
        };
        let warm = if step <= self.warmup_steps {
            step as f64 / self.warmup_steps as f64
        } else {
            1.0
        };
        (base * warm).max(1e-12) as f32
    }

    /// Checks the schedule around the base rate `lr`: `lr_min` between 0 and `lr`,
    /// `lr_gamma` in (0, 1].
    pub fn validate(&self, lr: f32) -> Result<()> {
        if !(self.lr_min.is_finite() && self.lr_min >= 0.0 && self.lr_min <= lr) {
            return Err(config_error(
                "lr_min",
                format!("must be between 0 and lr ({lr}), got {}", self.lr_min),
            ));
        }
        if !(self.lr_gamma > 0.0 && self.lr_gamma <= 1.0) {
            return Err(config_error(
                "lr_gamma",
                format!("must be in (0, 1], got {}", self.lr_gamma),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each decay at its landmarks: cosine's start, middle (`lo + (hi - lo) / 2`) and end,
    /// exponential's third epoch (`lr gamma^2`), the warm-up's middle, and step 0 positive.
    #[test]
    fn rates_follow_each_decay_and_the_warm_up() {
        let mut s = LrSchedule::default();
        assert_eq!(s.rate(0.01, 500, 1000, 3), 0.01);
        s.decay = Decay::Cosine;
        s.lr_min = 0.001;
        assert_eq!(s.rate(0.01, 1, 1000, 1), 0.01);
        assert!((s.rate(0.01, 501, 1000, 1) - 0.0055).abs() < 1e-7);
        assert!((s.rate(0.01, 1001, 1000, 1) - 0.001).abs() < 1e-7);
        s.decay = Decay::Exponential;
        s.lr_gamma = 0.5;
        assert_eq!(s.rate(0.01, 7, 1000, 3), 0.0025);
        s.warmup_steps = 10;
        assert_eq!(s.rate(0.01, 5, 1000, 1), 0.005);
        assert!(s.rate(0.01, 0, 1000, 1) > 0.0);
    }

    /// `lr_min` must lie in [0, lr] and `lr_gamma` in (0, 1], each error naming its key.
    #[test]
    fn the_schedule_is_checked_against_the_base_rate() {
        let s = LrSchedule {
            lr_min: 0.001,
            ..LrSchedule::default()
        };
        assert!(s.validate(0.001).is_ok());
        assert!(
            s.validate(0.0009)
                .unwrap_err()
                .to_string()
                .contains("lr_min")
        );
        let negative = LrSchedule {
            lr_min: -0.1,
            ..LrSchedule::default()
        };
        assert!(negative.validate(0.01).is_err());
        for gamma in [0.0, 1.5, f32::NAN] {
            let s = LrSchedule {
                lr_gamma: gamma,
                ..LrSchedule::default()
            };
            assert!(
                s.validate(0.01)
                    .unwrap_err()
                    .to_string()
                    .contains("lr_gamma")
            );
        }
    }
}
