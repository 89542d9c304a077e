//! Adam's settings and its precomputed bias-correction constants.

use crate::error::{Result, config_error};
use crate::kernels::AdamStep;

/// Which update count Adam's bias correction uses for a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum BiasCorrection {
    /// The optimizer's own step count, the same for every row (PyTorch's `Adam` and
    /// `SparseAdam`, TensorFlow's `LazyAdam`): a row first touched late in training takes a
    /// step of `lr * (1 - b1) / sqrt((1 - b2) / (1 - b2^t))`, up to about `3.2 * lr`, so rare
    /// inputs and outputs learn from few occurrences. Needs [`Adam::advance`] once per batch.
    #[default]
    Global,
    /// Each row's own update count: every row's first update is a step of `lr` whatever the
    /// step it comes at (slide before November 2026; 4.5 points of P@1 lower at the
    /// Amazon-670K shape, see docs/notebook/accuracy.md, "Adam's bias correction by the optimizer's
    /// step count").
    PerRow,
}

/// Adam's hyper-parameters. With the `serde` feature it reads a config file's `[train]`
/// keys `lr`, `beta1`, `beta2`, `eps` and `bias_correction` (`"global"` or `"per-row"`);
/// each left out takes its default.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default)
)]
pub struct AdamConfig {
    /// Learning rate; the peak of a [`LrSchedule`](crate::LrSchedule) (default 0.001).
    pub lr: f32,
    /// First-moment decay (default 0.9). At 0 the first moment is the step's gradient: the
    /// row updates of layers with a second moment per row
    /// ([`SecondMoment::Row`](crate::SecondMoment::Row)) then neither read nor write the
    /// stored first moments, which stay as they were (the same weights, bit for bit, with
    /// less memory traffic).
    pub beta1: f32,
    /// Second-moment decay (default 0.999).
    pub beta2: f32,
    /// Denominator guard (default 1e-8).
    pub eps: f32,
    /// Which update count the bias correction uses (default global).
    pub bias_correction: BiasCorrection,
}

impl Default for AdamConfig {
    /// PyTorch's defaults.
    fn default() -> Self {
        AdamConfig {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            bias_correction: BiasCorrection::Global,
        }
    }
}

impl AdamConfig {
    /// The bias-corrected constants of an update at count `t` (see [`AdamStep::new`]).
    fn constants(&self, t: u32) -> AdamStep {
        AdamStep::new(self.lr, self.beta1, self.beta2, self.eps, t)
    }

    /// Checks the ranges: `lr` and `eps` positive and finite, `beta1` and `beta2` in [0, 1).
    pub fn validate(&self) -> Result<()> {
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(config_error(
                "lr",
                format!("must be positive, got {}", self.lr),
            ));
        }
        if !((0.0..1.0).contains(&self.beta1) && (0.0..1.0).contains(&self.beta2)) {
            return Err(config_error("beta1 and beta2", "must be in [0, 1)"));
        }
        if !(self.eps.is_finite() && self.eps > 0.0) {
            return Err(config_error("eps", "must be positive"));
        }
        Ok(())
    }
}

/// Update counts whose Adam constants are precomputed.
const ADAM_TABLE: u32 = 4096;

/// Lazy sparse Adam ("lazy" as TensorFlow's LazyAdam and PyTorch's SparseAdam): only rows
/// with a gradient are read and updated, and a row skipped for many steps keeps its moments
/// undecayed. The bias correction counts the optimizer's steps ([`BiasCorrection::Global`],
/// advanced by [`advance`](Self::advance) once per batch) or each row's own updates
/// ([`BiasCorrection::PerRow`], whose constants for the first 4,096 updates are precomputed,
/// exactly [`AdamStep::new`]'s).
#[derive(Debug, Clone)]
pub struct Adam {
    config: AdamConfig,
    table: Vec<AdamStep>,
    /// Steps taken (batches), for the global bias correction.
    taken: u64,
    /// The global correction's constants at `taken`.
    current: AdamStep,
}

impl Adam {
    /// Validates `config` and precomputes its constants.
    pub fn new(config: AdamConfig) -> Result<Self> {
        config.validate()?;
        let mut adam = Adam {
            config,
            table: Vec::new(),
            taken: 0,
            current: config.constants(1),
        };
        adam.fill_table();
        Ok(adam)
    }

    fn fill_table(&mut self) {
        let a = self.config;
        self.table.clear();
        if a.bias_correction == BiasCorrection::PerRow {
            self.table.extend((1..=ADAM_TABLE).map(|t| a.constants(t)));
        }
        self.current = a.constants(clamp_steps(self.taken));
    }

    /// Counts one optimizer step: call it once per batch, before updating that batch's
    /// layers ([`Network`](crate::Network)'s training step does).
    pub fn advance(&mut self) {
        self.set_steps(self.taken + 1);
    }

    /// Sets the steps taken (to resume: the batches trained so far).
    pub fn set_steps(&mut self, taken: u64) {
        if taken != self.taken {
            self.taken = taken;
            self.current = self.config.constants(clamp_steps(taken));
        }
    }

    /// Steps taken ([`advance`](Self::advance) calls, or the last [`set_steps`](Self::set_steps)).
    pub fn steps(&self) -> u64 {
        self.taken
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

    /// The constants every row's update uses in this step, if they do not depend on the row
    /// (the global correction).
    #[inline]
    pub(crate) fn shared_step(&self) -> Option<AdamStep> {
        (self.config.bias_correction == BiasCorrection::Global).then_some(self.current)
    }

    /// The constants of an update that is the row's `t`-th (`t >= 1`): the shared ones
    /// under the global correction, the row's own under the per-row one.
    #[inline]
    pub(crate) fn step(&self, t: u32) -> AdamStep {
        if let Some(s) = self.shared_step() {
            return s;
        }
        match self.table.get(t as usize - 1) {
            Some(s) => *s,
            None => self.config.constants(t),
        }
    }
}

/// A step count as [`AdamStep::new`] takes it (past `u32::MAX` the correction is 1 anyway).
fn clamp_steps(taken: u64) -> u32 {
    taken.clamp(1, u64::from(u32::MAX)) as u32
}
