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

use crate::data::Examples;
use crate::error::Result;

mod config;
mod rare;
pub(crate) use config::check_lr;
pub use config::{MAX_SHORTLIST, WideConfig};
pub use rare::RareIndex;

/// One `(label, coefficient)` update a training sample asks of the wide head: the
/// label's weights move by `-coefficient * x_j` for each of the sample's features `j`.
pub type WideUpdate = (u32, f32);

/// Per-label linear classifiers on the input features, hashed into one table (see the
/// module's documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct WideHead {
    config: WideConfig,
    table: Vec<f32>,
    /// The rare features' labels, once built (with `rare_labels` above 0).
    rare: Option<RareIndex>,
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
        Ok(WideHead {
            config,
            table,
            rare: None,
        })
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

    /// The rare features' index, once built or read back.
    pub fn rare_index(&self) -> Option<&RareIndex> {
        self.rare.as_ref()
    }

    /// Sets the rare features' index (one built from the training data, or read back).
    pub fn set_rare_index(&mut self, index: RareIndex) {
        self.rare = Some(index);
    }

    /// Builds the rare features' index from `data` (the training samples) unless there is
    /// one or the head takes no rare labels.
    pub fn ensure_rare_index(&mut self, data: &dyn Examples) {
        if self.config.rare_labels > 0 && self.rare.is_none() {
            self.rare = Some(RareIndex::build(data, self.config.rare_df));
        }
    }

    /// Appends to `shortlist` up to [`rare_labels`](WideConfig::rare_labels) labels from
    /// `input`'s rare features that it does not hold yet, passing over `skip` (a training
    /// sample's own labels: its candidates are then those of the other samples).
    pub(crate) fn add_rare_labels(
        &self,
        input: Vector<'_>,
        skip: &[u32],
        scratch: &mut Vec<(u32, u32)>,
        shortlist: &mut Vec<u32>,
    ) {
        if let Some(index) = &self.rare {
            index.candidates(input, skip, self.config.rare_labels, scratch, shortlist);
        }
    }

    /// A sample's candidates for [`Self::rerank`] from the network's `best` `(logit,
    /// output)` pairs (best first): its first [`shortlist`](WideConfig::shortlist), then the
    /// labels of `input`'s rare features not among them, each with the logit of the last
    /// shortlisted output.
    pub fn candidates(&self, input: Vector<'_>, best: &[(f32, u32)]) -> Vec<(f32, u32)> {
        let mut candidates = best[..self.config.shortlist.min(best.len())].to_vec();
        let Some(&(floor, _)) = candidates.last() else {
            return candidates;
        };
        if self.rare.is_some() {
            let mut ids: Vec<u32> = candidates.iter().map(|&(_, id)| id).collect();
            let shortlisted = ids.len();
            self.add_rare_labels(input, &[], &mut Vec::new(), &mut ids);
            candidates.extend(ids[shortlisted..].iter().map(|&id| (floor, id)));
        }
        candidates
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
