//! The wide head: per-label linear classifiers on the network's raw input features, beside
//! the network, that re-rank its best outputs.
//!
//! On real extreme-classification data the network fits its own training samples no better
//! than its test samples (deb-deps: training P@1 0.70 where label trees reach 0.91), and the
//! labels it misses are tail labels that a few rare words give away. Label trees (Parabel,
//! Omikuji) and one-vs-all linear models (DiSMEC) keep a linear classifier per label on the
//! sparse features for exactly that. The wide head is such a set of classifiers, with every
//! `(feature, label)` weight hashed into one table of `2^bits` floats (the hashing trick), so
//! its size does not grow with features x labels. It never selects outputs: it scores the
//! network's best few (its *shortlist*), as the shortlist-then-classifier networks of the
//! DeepXML line do, and is trained on the same shortlist with the sample's labels, by plain
//! SGD on a squared hinge loss (one-vs-all: a label's classifier says yes or no on its own).
//! docs/real-data.md has the measurements that led here.

use slide_lsh::Vector;

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
        }
    }
}

/// The largest shortlist: what the evaluation's per-sample candidate list holds.
pub const MAX_SHORTLIST: usize = 64;

impl WideConfig {
    /// Checks the ranges: `bits` in 10..=32, `lr` in (0, 1], `weight` positive and finite,
    /// `shortlist` in 5..=[`MAX_SHORTLIST`], `epochs` at most 100, `bias` finite and at least 0.
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

/// One `(label, coefficient)` update a training sample asks of the wide head: the
/// label's weights move by `-coefficient * x_j` for each of the sample's features `j`.
pub type WideUpdate = (u32, f32);

/// Per-label linear classifiers on the input features, hashed into one table (see the
/// module's documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct WideHead {
    config: WideConfig,
    table: Vec<f32>,
}

impl WideHead {
    /// A head of `config`'s size with every weight zero (every wide score 0, so an
    /// untrained head leaves the network's ranking as it is).
    pub fn new(config: WideConfig) -> Result<Self> {
        config.validate()?;
        // Random reads over tens of megabytes: huge pages spare most TLB misses. Written
        // once, so that the pages are backed as huge ones (see `zeroed_huge`).
        let mut table = crate::kernels::zeroed_huge(1usize << config.bits);
        table.fill(0.0);
        Ok(WideHead { config, table })
    }

    /// The settings.
    pub fn config(&self) -> &WideConfig {
        &self.config
    }

    /// The hashed weights.
    pub fn table(&self) -> &[f32] {
        &self.table
    }

    /// The hashed weights, to restore them.
    pub fn table_mut(&mut self) -> &mut [f32] {
        &mut self.table
    }

    /// Where the weight of `feature` in `label`'s classifier lives: a multiplicative hash
    /// of the pair (odd 64-bit constants, the top `bits` bits of the product).
    #[inline]
    fn slot(&self, feature: usize, label: u32) -> usize {
        slot(self.config.bits, feature, label)
    }

    /// `f(j, x_j)` for each nonzero feature of `input`, then for the bias feature.
    #[inline]
    fn for_each_feature(&self, input: Vector<'_>, f: impl FnMut(usize, f32)) {
        for_each_feature(input, self.config.bias, f);
    }

    /// `label`'s wide score for `input`: the sum over its nonzero features `j` of
    /// `x_j * w(j, label)`, plus `bias * w(bias, label)`.
    pub fn score(&self, input: Vector<'_>, label: u32) -> f32 {
        let mut sum = 0.0f32;
        self.for_each_feature(input, |j, x| sum += x * self.table[self.slot(j, label)]);
        sum
    }

    /// The derivative of the squared hinge loss `max(0, 1 - y s)^2` at wide score `s`,
    /// `y = +1` for a label of the sample and `-1` otherwise: `-2 y max(0, 1 - y s)`
    /// (0 once the margin is met).
    pub fn hinge_gradient(score: f32, positive: bool) -> f32 {
        let y = if positive { 1.0 } else { -1.0 };
        -2.0 * y * (1.0 - y * score).max(0.0)
    }

    /// The sample's updates: for each output in `shortlist` (deduplicated, with every label
    /// among them), its wide score's loss derivative, pushed onto `updates`. Returns the
    /// sum of the squared hinge losses.
    pub fn gradients(
        &self,
        input: Vector<'_>,
        shortlist: &[u32],
        labels: &[u32],
        updates: &mut Vec<WideUpdate>,
    ) -> f32 {
        let mut loss = 0.0;
        for &id in shortlist {
            let positive = labels.contains(&id);
            let score = self.score(input, id);
            let y = if positive { 1.0 } else { -1.0 };
            let margin = (1.0 - y * score).max(0.0);
            loss += margin * margin;
            let gradient = Self::hinge_gradient(score, positive);
            if gradient != 0.0 {
                updates.push((id, gradient));
            }
        }
        loss
    }

    /// One SGD step for a sample's `updates` (from [`Self::gradients`]) at learning rate
    /// `lr`: each label's weights of `input`'s features (the bias feature among them) move
    /// by `-lr * gradient * x_j / |x|^2`. Dividing by the squared norm (the bias's square
    /// included) moves a score by `-lr * gradient` whatever the input's scale, so one rate
    /// serves any data.
    pub fn apply(&mut self, input: Vector<'_>, updates: &[WideUpdate], lr: f32) {
        let mut norm2 = 0.0f32;
        self.for_each_feature(input, |_, x| norm2 += x * x);
        if norm2 == 0.0 {
            return;
        }
        for &(label, gradient) in updates {
            let step = lr * gradient / norm2;
            let table = &mut self.table;
            let (bits, bias) = (self.config.bits, self.config.bias);
            for_each_feature(input, bias, |j, x| {
                table[slot(bits, j, label)] -= step * x;
            });
        }
    }

    /// One training sample's SGD on its `shortlist` (with its `labels` among them), as
    /// [`Self::gradients`] then [`Self::apply`] would do it, from the sample's nonzero
    /// feature values `x` and the slots [`Self::slots`] gave for it (the slots can be
    /// computed, and their lines fetched, ahead of time: a sample's reads are a few
    /// thousand scattered floats). `updates` is scratch. Returns the sum of the squared
    /// hinge losses before the step.
    pub(crate) fn train_sample(
        &mut self,
        x: &[f32],
        shortlist: &[u32],
        labels: &[u32],
        slots: &[u32],
        lr: f32,
        updates: &mut Vec<WideUpdate>,
    ) -> f32 {
        let norm2: f32 = x.iter().map(|v| v * v).sum();
        if norm2 == 0.0 {
            return 0.0;
        }
        updates.clear();
        let mut loss = 0.0;
        for (k, (&id, slots)) in shortlist
            .iter()
            .zip(slots.chunks_exact(x.len()))
            .enumerate()
        {
            let score: f32 = x
                .iter()
                .zip(slots)
                .map(|(v, &s)| v * self.table[s as usize])
                .sum();
            let gradient = Self::hinge_gradient(score, labels.contains(&id));
            if gradient != 0.0 {
                // The gradient is -2 y m for the missed margin m.
                loss += gradient * gradient / 4.0;
                updates.push((k as u32, gradient));
            }
        }
        for &(k, gradient) in updates.iter() {
            let step = lr * gradient / norm2;
            let slots = &slots[k as usize * x.len()..][..x.len()];
            for (v, &s) in x.iter().zip(slots) {
                self.table[s as usize] -= step * v;
            }
        }
        loss
    }

    /// The slots of `input`'s nonzero features for each output of `shortlist`, output by
    /// output, into `slots`, and the features' values into `x`.
    pub(crate) fn slots(
        &self,
        input: Vector<'_>,
        shortlist: &[u32],
        x: &mut Vec<f32>,
        slots: &mut Vec<u32>,
    ) {
        x.clear();
        slots.clear();
        self.for_each_feature(input, |_, v| x.push(v));
        for &id in shortlist {
            self.for_each_feature(input, |j, _| slots.push(self.slot(j, id) as u32));
        }
    }

    /// Asks for the cache lines of `slots` ahead of their use (a hint only).
    pub(crate) fn prefetch(&self, slots: &[u32]) {
        for &s in slots {
            let at = self.table[s as usize..].as_ptr().cast::<u8>();
            crate::kernels::prefetch_bytes(at, 4);
        }
    }

    /// Whether every weight is finite.
    pub fn is_finite(&self) -> bool {
        self.table.iter().all(|w| w.is_finite())
    }

    /// Re-ranks a sample's candidates, `(logit, output)` pairs, by `logit + weight * wide
    /// score`, writing them back best first (ties: the lower output id).
    pub fn rerank(&self, input: Vector<'_>, candidates: &mut [(f32, u32)]) {
        for (z, id) in candidates.iter_mut() {
            *z += self.config.weight * self.score(input, *id);
        }
        candidates.sort_by(|a, b| {
            b.0.partial_cmp(&a.0)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(a.1.cmp(&b.1))
        });
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

/// The bias feature's index: one no input has.
const BIAS_FEATURE: usize = usize::MAX;

/// Where the weight of `feature` in `label`'s classifier lives in a table of `2^bits`: a
/// multiplicative hash of the pair (odd 64-bit constants, the top `bits` bits of the
/// product).
#[inline]
fn slot(bits: u32, feature: usize, label: u32) -> usize {
    let key = (feature as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ u64::from(label).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    (key.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> (64 - bits)) as usize
}

/// `f(j, x_j)` for each nonzero feature of `input`, then `f(BIAS_FEATURE, bias)` unless
/// `bias` is 0.
#[inline]
fn for_each_feature(input: Vector<'_>, bias: f32, mut f: impl FnMut(usize, f32)) {
    input.for_each_nonzero(&mut f);
    if bias != 0.0 {
        f(BIAS_FEATURE, bias);
    }
}

#[cfg(test)]
mod tests;
