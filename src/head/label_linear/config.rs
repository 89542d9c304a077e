//! The per-label linear head's settings (`kind = "label-linear"` in `[[network.heads]]`).

use crate::error::{Result, config_error};
use crate::head::interface::MAX_SHORTLIST;

/// The per-label linear head's settings. With the `serde` feature a config file's
/// `[[network.heads]]` entry of `kind = "label-linear"` reads as one; each key left out takes
/// its default.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default, deny_unknown_fields)
)]
pub struct LabelLinearConfig {
    /// The table holds at most `2^bits` weights (default 24: 64 MiB of f32), between 10
    /// and 32: one per `(feature, label)` pair where `labels x (features + 1)` fit, the
    /// pairs hashed into `2^bits` otherwise.
    pub bits: u32,
    /// SGD's learning rate at the start of training (default 0.5), in (0, 1]; it follows
    /// the network's schedule (the same fraction of its peak). A step moves the sample's
    /// margin `m = 1 - y s` to `m (1 - 2 lr)`: 0.5 meets the margin exactly, 1 overshoots
    /// to `-m`, more diverges (measured on deb-deps: 2 ends at P@1 0.4465; 0.5 and 1 at
    /// 0.6888 and 0.6885).
    pub lr: f32,
    /// A shortlisted output's final score is its logit plus `weight` times its head score
    /// (default 3). With the intercept (`bias = 1`), weights 1 / 2 / 3 / 4 / 6 gave P@1
    /// 0.6852 / 0.6906 / 0.6908 / 0.6873 / 0.6826 on deb-deps and 0.8299 / 0.8396 /
    /// 0.8435 / 0.8440 / 0.8450 on deb-tags (P@5 0.3612 / 0.3663 / 0.3668 / 0.3646 /
    /// 0.3615 and 0.4457 / 0.4524 / 0.4552 / 0.4568 / 0.4571); without it, 1 was best on
    /// deb-deps (0.6888).
    pub weight: f32,
    /// How many of a sample's best outputs (by the network's logit) the head scores
    /// and trains on, besides the sample's labels (default 32), between 5 and 64.
    pub shortlist: usize,
    /// Epochs the head trains alone after the network's (`train.epochs`), the network and
    /// its tables left as they are (default 0), at most 100. Their learning rate falls
    /// linearly from `lr` to 0 over them. Each costs a forward pass per sample and the
    /// head's steps, a fraction of a network epoch.
    pub epochs: usize,
    /// The value of a constant feature that every sample has (default 1), so that each
    /// label's classifier has an intercept; 0: none. On deb-tags (2 head epochs, weight 4)
    /// P@1 / P@5 0.8367 / 0.4559 without, 0.8393 / 0.4568 at 0.3, 0.8440 / 0.4590 at 1;
    /// with it the head's scores bear a larger `weight`.
    pub bias: f32,
}

impl Default for LabelLinearConfig {
    fn default() -> Self {
        LabelLinearConfig {
            bits: 24,
            lr: 0.5,
            weight: 3.0,
            shortlist: 32,
            epochs: 0,
            bias: 1.0,
        }
    }
}

impl LabelLinearConfig {
    /// Checks the ranges: `bits` in 10..=32, `lr` in (0, 1], `weight` positive and finite,
    /// `shortlist` in 5..=[`MAX_SHORTLIST`], `epochs` at most 100, `bias` finite and at least 0.
    pub fn validate(&self) -> Result<()> {
        let fail = |key: &str, reason: String| Err(config_error(key, reason));
        if !(10..=32).contains(&self.bits) {
            return fail(
                "heads.label-linear.bits",
                format!("must be between 10 and 32, got {}", self.bits),
            );
        }
        check_lr(self.lr)?;
        if !(self.weight.is_finite() && self.weight > 0.0) {
            return fail(
                "heads.label-linear.weight",
                format!("must be positive, got {}", self.weight),
            );
        }
        if !(5..=MAX_SHORTLIST).contains(&self.shortlist) {
            return fail(
                "heads.label-linear.shortlist",
                format!(
                    "must be between 5 and {MAX_SHORTLIST}, got {}",
                    self.shortlist
                ),
            );
        }
        if !(self.bias.is_finite() && self.bias >= 0.0) {
            return fail(
                "heads.label-linear.bias",
                format!("must be 0 or more, got {}", self.bias),
            );
        }
        if self.epochs > 100 {
            return fail(
                "heads.label-linear.epochs",
                format!("must be at most 100, got {}", self.epochs),
            );
        }
        Ok(())
    }

    /// The head's learning rate for head-only step `k` of `steps` (counted from 0): `lr`
    /// falling linearly to 0, `lr / steps` at the last step.
    pub fn head_only_lr(&self, k: u64, steps: u64) -> f32 {
        let left = steps.saturating_sub(k).max(1) as f64;
        (f64::from(self.lr) * left / steps.max(1) as f64) as f32
    }

    /// Bytes the table takes in a network of `shape`: one f32 per `(feature, label)` pair
    /// (the bias among the features) where they fit in `2^bits`, `2^bits` f32 otherwise.
    pub fn table_bytes(&self, shape: crate::head::HeadShape) -> usize {
        4 * super::Layout::new(self.bits, shape).len(shape.outputs)
    }
}

/// Checks a learning rate of the head: in (0, 1] (above 1 SGD diverges), or an error
/// naming `heads.label-linear.lr`.
fn check_lr(lr: f32) -> Result<()> {
    if lr > 0.0 && lr <= 1.0 {
        return Ok(());
    }
    Err(config_error(
        "heads.label-linear.lr",
        format!("must be in (0, 1] (above 1 SGD diverges), got {lr}"),
    ))
}
