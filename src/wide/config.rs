//! The wide head's settings (`[network.wide]`).

use crate::error::{Result, config_error};

/// The wide head's settings. With the `serde` feature it reads a config file's
/// `[network.wide]` table; each key left out takes its default.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default, deny_unknown_fields)
)]
pub struct WideConfig {
    /// The table holds `2^bits` weights (default 24: 64 MiB of f32), between 10 and 32.
    pub bits: u32,
    /// SGD's learning rate at the start of training (default 0.5), in (0, 1]; it follows
    /// the network's schedule (the same fraction of its peak). A step moves the sample's
    /// margin `m = 1 - y s` to `m (1 - 2 lr)`: 0.5 meets the margin exactly, 1 overshoots
    /// to `-m`, more diverges (measured on deb-deps: 2 ends at P@1 0.4465; 0.5 and 1 at
    /// 0.6888 and 0.6885).
    pub lr: f32,
    /// A shortlisted output's final score is its logit plus `weight` times its wide score
    /// (default 3). With the intercept (`bias = 1`), weights 1 / 2 / 3 / 4 / 6 gave P@1
    /// 0.6852 / 0.6906 / 0.6908 / 0.6873 / 0.6826 on deb-deps and 0.8299 / 0.8396 /
    /// 0.8435 / 0.8440 / 0.8450 on deb-tags (P@5 0.3612 / 0.3663 / 0.3668 / 0.3646 /
    /// 0.3615 and 0.4457 / 0.4524 / 0.4552 / 0.4568 / 0.4571); without it, 1 was best on
    /// deb-deps (0.6888).
    pub weight: f32,
    /// How many of a sample's best outputs (by the network's logit) the wide head scores
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
    /// How many labels from the sample's rare features join the head's shortlist besides
    /// the network's best (default 0: none), at most [`MAX_SHORTLIST`]: the labels of the
    /// training samples that share its features seen in at most `rare_df` training samples,
    /// the most frequent first ([`RareIndex`]). In training they are among the outputs the
    /// head learns on; in prediction each enters with the logit of the network's last
    /// shortlisted output, so that the head's score decides. The index is built from the
    /// training data at the first step and saved with the head.
    pub rare_labels: usize,
    /// A feature is rare when at most this many training samples have it (default 20, at
    /// least 1).
    pub rare_df: u32,
}

impl Default for WideConfig {
    fn default() -> Self {
        WideConfig {
            bits: 24,
            lr: 0.5,
            weight: 3.0,
            shortlist: 32,
            epochs: 0,
            bias: 1.0,
            rare_labels: 0,
            rare_df: 20,
        }
    }
}

/// The largest shortlist: what the evaluation's per-sample candidate list holds.
pub const MAX_SHORTLIST: usize = 64;

impl WideConfig {
    /// Checks the ranges: `bits` in 10..=32, `lr` in (0, 1], `weight` positive and finite,
    /// `shortlist` in 5..=[`MAX_SHORTLIST`], `epochs` at most 100, `bias` finite and at least 0,
    /// `rare_labels` at most [`MAX_SHORTLIST`], `rare_df` at least 1.
    pub fn validate(&self) -> Result<()> {
        let fail = |key: &str, reason: String| Err(config_error(key, reason));
        if !(10..=32).contains(&self.bits) {
            return fail(
                "wide.bits",
                format!("must be between 10 and 32, got {}", self.bits),
            );
        }
        check_lr(self.lr)?;
        if !(self.weight.is_finite() && self.weight > 0.0) {
            return fail(
                "wide.weight",
                format!("must be positive, got {}", self.weight),
            );
        }
        if !(5..=MAX_SHORTLIST).contains(&self.shortlist) {
            return fail(
                "wide.shortlist",
                format!(
                    "must be between 5 and {MAX_SHORTLIST}, got {}",
                    self.shortlist
                ),
            );
        }
        if !(self.bias.is_finite() && self.bias >= 0.0) {
            return fail("wide.bias", format!("must be 0 or more, got {}", self.bias));
        }
        if self.epochs > 100 {
            return fail(
                "wide.epochs",
                format!("must be at most 100, got {}", self.epochs),
            );
        }
        if self.rare_labels > MAX_SHORTLIST {
            return fail(
                "wide.rare_labels",
                format!("must be at most {MAX_SHORTLIST}, got {}", self.rare_labels),
            );
        }
        if self.rare_df == 0 {
            return fail("wide.rare_df", "must be at least 1, got 0".to_string());
        }
        Ok(())
    }

    /// The head's learning rate for head-only step `k` of `steps` (counted from 0): `lr`
    /// falling linearly to 0, `lr / steps` at the last step.
    pub fn head_only_lr(&self, k: u64, steps: u64) -> f32 {
        let left = steps.saturating_sub(k).max(1) as f64;
        (f64::from(self.lr) * left / steps.max(1) as f64) as f32
    }

    /// Bytes the table takes.
    pub fn table_bytes(&self) -> usize {
        4usize << self.bits
    }
}

/// Checks a learning rate of the head: in (0, 1] (above 1 SGD diverges), or an error
/// naming `wide.lr`.
pub(crate) fn check_lr(lr: f32) -> Result<()> {
    if lr > 0.0 && lr <= 1.0 {
        return Ok(());
    }
    Err(config_error(
        "wide.lr",
        format!("must be in (0, 1] (above 1 SGD diverges), got {lr}"),
    ))
}
