//! Adam's settings and its precomputed bias-correction constants.

use crate::error::{Result, config_error};
use crate::kernels::AdamStep;

/// Adam's hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
pub struct AdamConfig {
    /// Learning rate.
    pub lr: f32,
    /// First-moment decay.
    pub beta1: f32,
    /// Second-moment decay.
    pub beta2: f32,
    /// Denominator guard.
    pub eps: f32,
}

impl Default for AdamConfig {
    /// PyTorch's defaults except the learning rate, SLIDE's 1e-4.
    fn default() -> Self {
        AdamConfig {
            lr: 1e-4,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
        }
    }
}

impl AdamConfig {
    /// Checks the ranges: `lr` and `eps` positive and finite, `beta1` and `beta2` in [0, 1).
    pub fn validate(&self) -> Result<()> {
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(config_error(
                "adam",
                format!("lr must be positive, got {}", self.lr),
            ));
        }
        if !((0.0..1.0).contains(&self.beta1) && (0.0..1.0).contains(&self.beta2)) {
            return Err(config_error("adam", "beta1 and beta2 must be in [0, 1)"));
        }
        if !(self.eps.is_finite() && self.eps > 0.0) {
            return Err(config_error("adam", "eps must be positive"));
        }
        Ok(())
    }
}

/// Update counts whose Adam constants are precomputed.
const ADAM_TABLE: u32 = 4096;

/// Lazy sparse Adam ("lazy" as TensorFlow's LazyAdam): each stored row and each bias keeps
/// its own update count `t`, used for the bias correction, so a row skipped for many steps
/// resumes with the correction of its own history (its moments were not decayed meanwhile).
/// Holds the bias-correction constants of the first 4,096 updates, so rows do not recompute
/// two powers each (the values are exactly [`AdamStep::new`]'s).
#[derive(Debug, Clone)]
pub struct Adam {
    config: AdamConfig,
    steps: Vec<AdamStep>,
}

impl Adam {
    /// Validates `config` and precomputes its constants.
    pub fn new(config: AdamConfig) -> Result<Self> {
        config.validate()?;
        let mut adam = Adam {
            config,
            steps: Vec::with_capacity(ADAM_TABLE as usize),
        };
        adam.fill_table();
        Ok(adam)
    }

    fn fill_table(&mut self) {
        let a = self.config;
        self.steps.clear();
        self.steps
            .extend((1..=ADAM_TABLE).map(|t| AdamStep::new(a.lr, a.beta1, a.beta2, a.eps, t)));
    }

    /// The hyper-parameters.
    pub fn config(&self) -> AdamConfig {
        self.config
    }

    /// Sets the learning rate for the updates that follow (for a schedule such as cosine
    /// decay). Moments and update counts live in the layers and are kept.
    pub fn set_learning_rate(&mut self, lr: f32) -> Result<()> {
        AdamConfig { lr, ..self.config }.validate()?;
        if lr != self.config.lr {
            self.config.lr = lr;
            self.fill_table();
        }
        Ok(())
    }

    /// The constants of a row's `t`-th update (`t >= 1`).
    #[inline]
    pub(crate) fn step(&self, t: u32) -> AdamStep {
        match self.steps.get(t as usize - 1) {
            Some(s) => *s,
            None => {
                let a = self.config;
                AdamStep::new(a.lr, a.beta1, a.beta2, a.eps, t)
            }
        }
    }
}
