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
    /// (default 1; on deb-deps 0.25 / 0.5 / 1 / 2 gave P@1 0.6787 / 0.6856 / 0.6885 /
    /// 0.6779).
    pub weight: f32,
    /// How many of a sample's best outputs (by the network's logit) the wide head scores
    /// and trains on, besides the sample's labels (default 32), between 5 and 64.
    pub shortlist: usize,
}

impl Default for WideConfig {
    fn default() -> Self {
        WideConfig {
            bits: 24,
            lr: 0.5,
            weight: 1.0,
            shortlist: 32,
        }
    }
}

/// The largest shortlist: what the evaluation's per-sample candidate list holds.
pub const MAX_SHORTLIST: usize = 64;

impl WideConfig {
    /// Checks the ranges: `bits` in 10..=32, `lr` in (0, 1], `weight` positive and finite,
    /// `shortlist` in 5..=[`MAX_SHORTLIST`].
    pub fn validate(&self) -> Result<()> {
        let fail = |key: &str, reason: String| Err(config_error(key, reason));
        if !(10..=32).contains(&self.bits) {
            return fail(
                "wide.bits",
                format!("must be between 10 and 32, got {}", self.bits),
            );
        }
        if !(self.lr > 0.0 && self.lr <= 1.0) {
            return fail(
                "wide.lr",
                format!("must be in (0, 1] (above 1 SGD diverges), got {}", self.lr),
            );
        }
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
        Ok(())
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
        let key = (feature as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ u64::from(label).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
        (key.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> (64 - self.config.bits)) as usize
    }

    /// `label`'s wide score for `input`: the sum over its nonzero features `j` of
    /// `x_j * w(j, label)`.
    pub fn score(&self, input: Vector<'_>, label: u32) -> f32 {
        let mut sum = 0.0f32;
        input.for_each_nonzero(|j, x| sum += x * self.table[self.slot(j, label)]);
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
    /// `lr`: each label's weights of `input`'s features move by
    /// `-lr * gradient * x_j / |x|^2`. Dividing by the input's squared norm (1 for the
    /// unit-length tf-idf rows of extreme classification) moves a score by
    /// `-lr * gradient` whatever the input's scale, so one rate serves any data.
    pub fn apply(&mut self, input: Vector<'_>, updates: &[WideUpdate], lr: f32) {
        let mut norm2 = 0.0f32;
        input.for_each_nonzero(|_, x| norm2 += x * x);
        if norm2 == 0.0 {
            return;
        }
        for &(label, gradient) in updates {
            let step = lr * gradient / norm2;
            input.for_each_nonzero(|j, x| {
                let slot = self.slot(j, label);
                self.table[slot] -= step * x;
            });
        }
    }

    /// One training sample's SGD on its `shortlist` (with its `labels` among them), as
    /// [`Self::gradients`] then [`Self::apply`] would do it, from the sample's nonzero
    /// feature values `x` and the slots [`Self::slots`] gave for it (the slots can be
    /// computed, and their lines fetched, ahead of time: a sample's reads are a few
    /// thousand scattered floats). `updates` is scratch.
    pub(crate) fn train_sample(
        &mut self,
        x: &[f32],
        shortlist: &[u32],
        labels: &[u32],
        slots: &[u32],
        lr: f32,
        updates: &mut Vec<WideUpdate>,
    ) {
        let norm2: f32 = x.iter().map(|v| v * v).sum();
        if norm2 == 0.0 {
            return;
        }
        updates.clear();
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
        input.for_each_nonzero(|_, v| x.push(v));
        for &id in shortlist {
            input.for_each_nonzero(|j, _| slots.push(self.slot(j, id) as u32));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sparse<'a>(indices: &'a [u32], values: &'a [f32]) -> Vector<'a> {
        Vector::Sparse { indices, values }
    }

    fn small() -> WideHead {
        WideHead::new(WideConfig {
            bits: 12,
            ..WideConfig::default()
        })
        .unwrap()
    }

    #[test]
    fn hinge_gradient_matches_central_differences() {
        // d/ds max(0, 1 - y s)^2 = -2 y max(0, 1 - y s): checked on both sides of the
        // margin for both signs of y, away from the kink at y s = 1.
        let loss = |s: f32, y: f32| (1.0f32 - y * s).max(0.0).powi(2);
        for &(s, positive) in &[(0.3f32, true), (-1.5, true), (0.2, false), (-0.4, false)] {
            let y = if positive { 1.0 } else { -1.0 };
            let h = 1e-3f32;
            let numeric = (loss(s + h, y) - loss(s - h, y)) / (2.0 * h);
            let analytic = WideHead::hinge_gradient(s, positive);
            assert!(
                (numeric - analytic).abs() < 1e-3,
                "s {s} y {y}: {numeric} vs {analytic}"
            );
        }
        assert_eq!(WideHead::hinge_gradient(1.5, true), 0.0);
        assert_eq!(WideHead::hinge_gradient(-1.5, false), 0.0);
    }

    #[test]
    fn an_sgd_step_lowers_the_loss_by_the_gradient_times_the_step() {
        // For one label and lr small, the loss falls by about lr * g^2 (the step is
        // -lr * g * x / |x|^2 in its weights, barring hash collisions, absent here, so the
        // score moves by -lr * g).
        let mut head = small();
        let (indices, values) = ([3u32, 17, 40], [0.5f32, 0.25, 0.8]);
        let x = sparse(&indices, &values);
        let mut updates = Vec::new();
        let before = head.gradients(x, &[7], &[7], &mut updates);
        assert_eq!(before, 1.0, "zero weights: the margin is missed by 1");
        assert_eq!(updates, vec![(7, -2.0)]);
        let lr = 1e-3;
        head.apply(x, &updates, lr);
        assert!((head.score(x, 7) - lr * 2.0).abs() < 1e-6);
        let after = head.gradients(x, &[7], &[7], &mut Vec::new());
        let predicted = before - lr * 4.0;
        assert!((after - predicted).abs() < 1e-5, "{after} vs {predicted}");
    }

    #[test]
    fn training_separates_a_label_from_a_negative() {
        // Two classifiers on the same features: the label's score rises above 1 and the
        // negative's falls below -1 within a few dozen steps, and nothing else moves.
        let mut head = small();
        let (indices, values) = ([1u32, 2, 9], [0.6f32, 0.6, 0.5]);
        let x = sparse(&indices, &values);
        for _ in 0..50 {
            let mut updates = Vec::new();
            head.gradients(x, &[4, 5], &[4], &mut updates);
            head.apply(x, &updates, 0.2);
        }
        assert!(head.score(x, 4) > 0.99 && head.score(x, 5) < -0.99);
        let other = sparse(&[100], &[1.0]);
        assert_eq!(head.score(other, 4), 0.0);
        let moved = head.table().iter().filter(|&&w| w != 0.0).count();
        assert_eq!(moved, 6, "3 features x 2 labels");
    }

    #[test]
    fn rerank_orders_by_logit_plus_weighted_wide_score_ties_low_id_first() {
        let mut head = small();
        let (indices, values) = ([0u32], [1.0f32]);
        let x = sparse(&indices, &values);
        // Give output 9 a wide score of 2: with the default weight 1 it gains 2.
        head.apply(x, &[(9, -2.0)], 1.0);
        let mut candidates = [(3.0, 1), (2.5, 9), (2.0, 4), (2.0, 2)];
        head.rerank(x, &mut candidates);
        assert_eq!(candidates, [(4.5, 9), (3.0, 1), (2.0, 2), (2.0, 4)]);
    }

    #[test]
    fn slots_spread_over_the_table() {
        // 200 features x 50 labels into 4,096 slots: a uniform hash fills about
        // 4096 * (1 - exp(-10000 / 4096)) = 3,742 of them; far fewer means clustering.
        let head = small();
        let mut used = vec![false; 1 << 12];
        for j in 0..200 {
            for l in 0..50 {
                used[head.slot(j, l)] = true;
            }
        }
        let filled = used.iter().filter(|&&u| u).count();
        assert!((3600..=3900).contains(&filled), "{filled} slots");
    }

    #[test]
    fn settings_out_of_range_are_refused_by_key() {
        let bad = [
            WideConfig {
                bits: 9,
                ..Default::default()
            },
            WideConfig {
                lr: 0.0,
                ..Default::default()
            },
            WideConfig {
                lr: 1.5,
                ..Default::default()
            },
            WideConfig {
                weight: f32::NAN,
                ..Default::default()
            },
            WideConfig {
                shortlist: 65,
                ..Default::default()
            },
        ];
        let keys = [
            "wide.bits",
            "wide.lr",
            "wide.lr",
            "wide.weight",
            "wide.shortlist",
        ];
        for (config, key) in bad.iter().zip(keys) {
            let message = config.validate().unwrap_err().to_string();
            assert!(message.contains(key), "{message}");
        }
        assert!(WideConfig::default().validate().is_ok());
        assert_eq!(WideConfig::default().table_bytes(), 64 << 20);
    }
}
