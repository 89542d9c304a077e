//! The per-label linear head (`kind = "label-linear"`): per-label linear classifiers on the
//! network's input features, beside the network, that re-rank its shortlist.
//!
//! On real extreme-classification data the network fits its own training samples no better
//! than its test samples (deb-deps: training P@1 0.70 where label trees reach 0.91), and the
//! labels it misses are tail labels that a few rare words give away. Label trees (Parabel,
//! Omikuji) and one-vs-all linear models (DiSMEC) keep a linear classifier per label on the
//! sparse features for exactly that. This head is such a set of classifiers in one table of
//! at most `2^bits` floats: one weight per `(feature, label)` pair where they all fit (Bibtex,
//! deb-tags), each pair hashed into the table otherwise (the hashing trick), so its size does
//! not grow with features x labels. It never selects outputs: it scores the
//! network's best few (the *shortlist*), as the shortlist-then-classifier networks of the
//! DeepXML line do, and is trained on the same shortlist with the sample's labels, by plain
//! SGD on a squared hinge loss (one-vs-all: a label's classifier says yes or no on its own).
//! docs/notebook/real-data.md has the measurements that led here.

use slide_lsh::Vector;

use super::interface::{Head, HeadBatch, HeadRate, HeadScratch, HeadSettings, HeadShape};
use crate::error::{Result, SlideError, config_error};
use crate::layer::{Elem, StateSource, StateTensor};

mod config;
mod layout;
pub use config::LabelLinearConfig;
use layout::{BIAS_FEATURE, Layout};

/// The head's tensor in a network's state (its name from when the head was called the
/// wide head: checkpoints keep it).
pub const TABLE: &str = "wide.table";

/// One `(label, coefficient)` update a training sample asks of the head: the
/// label's weights move by `-coefficient * x_j` for each of the sample's features `j`.
pub type LinearUpdate = (u32, f32);

/// Per-label linear classifiers on the input features in one table (see the module's
/// documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct LabelLinearHead {
    config: LabelLinearConfig,
    shape: HeadShape,
    layout: Layout,
    table: Vec<f32>,
}

impl LabelLinearHead {
    /// A head of `config`'s settings for a network of `shape`, every weight zero (every
    /// head score 0, so an untrained head leaves the network's ranking as it is): one
    /// weight per `(feature, label)` pair where `outputs x (inputs + 1)` fit in `2^bits`,
    /// a hashed table of `2^bits` otherwise.
    pub fn new(config: LabelLinearConfig, shape: HeadShape) -> Result<Self> {
        config.validate()?;
        let layout = Layout::new(config.bits, shape);
        // Random reads over tens of megabytes: huge pages spare most TLB misses. Written
        // once, so that the pages are backed as huge ones (see `zeroed_huge`).
        let mut table = crate::kernels::zeroed_huge(layout.len(shape.outputs));
        table.fill(0.0);
        Ok(LabelLinearHead {
            config,
            shape,
            layout,
            table,
        })
    }

    /// Whether the table holds one weight per `(feature, label)` pair (not hashed).
    pub fn is_dense(&self) -> bool {
        matches!(self.layout, Layout::Dense { .. })
    }

    /// The settings.
    pub fn config(&self) -> &LabelLinearConfig {
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

    /// Where the weight of `feature` in `label`'s classifier lives.
    #[inline]
    fn slot(&self, feature: usize, label: u32) -> usize {
        self.layout.slot(feature, label)
    }

    /// `f(j, x_j)` for each nonzero feature of `input`, then for the bias feature.
    #[inline]
    fn for_each_feature(&self, input: Vector<'_>, f: impl FnMut(usize, f32)) {
        for_each_feature(input, self.config.bias, f);
    }

    /// `label`'s head score for `input`: the sum over its nonzero features `j` of
    /// `x_j * w(j, label)`, plus `bias * w(bias, label)`.
    pub fn score(&self, input: Vector<'_>, label: u32) -> f32 {
        let mut sum = 0.0f32;
        self.for_each_feature(input, |j, x| sum += x * self.table[self.slot(j, label)]);
        sum
    }

    /// The derivative of the squared hinge loss `max(0, 1 - y s)^2` at head score `s`,
    /// `y = +1` for a label of the sample and `-1` otherwise: `-2 y max(0, 1 - y s)`
    /// (0 once the margin is met).
    pub fn hinge_gradient(score: f32, positive: bool) -> f32 {
        let y = if positive { 1.0 } else { -1.0 };
        -2.0 * y * (1.0 - y * score).max(0.0)
    }

    /// The sample's updates: for each output in `shortlist` (deduplicated, with every label
    /// among them), its head score's loss derivative, pushed onto `updates`. Returns the
    /// sum of the squared hinge losses.
    pub fn gradients(
        &self,
        input: Vector<'_>,
        shortlist: &[u32],
        labels: &[u32],
        updates: &mut Vec<LinearUpdate>,
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
    pub fn apply(&mut self, input: Vector<'_>, updates: &[LinearUpdate], lr: f32) {
        let mut norm2 = 0.0f32;
        self.for_each_feature(input, |_, x| norm2 += x * x);
        if norm2 == 0.0 {
            return;
        }
        for &(label, gradient) in updates {
            let step = lr * gradient / norm2;
            let table = &mut self.table;
            let (layout, bias) = (self.layout, self.config.bias);
            for_each_feature(input, bias, |j, x| {
                table[layout.slot(j, label)] -= step * x;
            });
        }
    }

    /// One training sample's SGD on its `shortlist` (with its `labels` among them), as
    /// [`Self::gradients`] then [`Self::apply`] would do it, from the sample's nonzero
    /// feature values `x` and the slots [`Self::slots`] gave for it, while the lines of the
    /// slots `ahead` (the next sample's few thousand scattered floats) are asked for, a
    /// part with each shortlisted output (all at once, they waited on each other rather
    /// than on this sample's work). `updates` is scratch. Returns the sum of the squared
    /// hinge losses before the step.
    pub(crate) fn train_sample(
        &mut self,
        (x, slots): (&[f32], &[u32]),
        shortlist: &[u32],
        labels: &[u32],
        lr: f32,
        updates: &mut Vec<LinearUpdate>,
        ahead: &[u32],
    ) -> f32 {
        let norm2: f32 = x.iter().map(|v| v * v).sum();
        if norm2 == 0.0 {
            self.prefetch(ahead);
            return 0.0;
        }
        updates.clear();
        let mut loss = 0.0;
        let part = ahead.len().div_ceil(shortlist.len().max(1)).max(1);
        let mut ahead = ahead.chunks(part);
        for (k, (&id, slots)) in shortlist
            .iter()
            .zip(slots.chunks_exact(x.len()))
            .enumerate()
        {
            if let Some(part) = ahead.next() {
                self.prefetch(part);
            }
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

    /// A stored table of `len` weights this head reads: its layout and label count.
    fn stored_layout(&self, len: usize) -> Option<(Layout, usize)> {
        layout::stored(len, self.table.len(), self.config.bits, self.shape)
    }

    /// Whether every weight is finite.
    pub fn is_finite(&self) -> bool {
        self.table.iter().all(|w| w.is_finite())
    }

    /// The head's rate at `rate`: beside the network, its `lr` times the network's rate
    /// over the network's first; alone, `lr` falling linearly to 0 over the head-only steps
    /// ([`LabelLinearConfig::head_only_lr`]).
    pub fn rate(&self, rate: HeadRate) -> f32 {
        match rate {
            HeadRate::WithNetwork { lr, peak } => self.config.lr * lr / peak,
            HeadRate::Alone { step, steps } => self.config.head_only_lr(step, steps),
        }
    }
}

impl Head for LabelLinearHead {
    fn shortlist(&self) -> usize {
        self.config.shortlist
    }

    /// Adds `weight` times each candidate's head score to its score.
    fn rescore(&self, input: Vector<'_>, candidates: &mut [(f32, u32)]) {
        for (z, id) in candidates.iter_mut() {
            *z += self.config.weight * self.score(input, *id);
        }
    }

    fn learns(&self) -> bool {
        true
    }

    fn alone_epochs(&self) -> usize {
        self.config.epochs
    }

    /// Each sample of the batch in turn scores its shortlist with the weights as the samples
    /// before it left them and takes one SGD step on it (plain per-sample SGD, as a linear
    /// model is trained; one thread, in batch order, so the result does not depend on the
    /// thread count). Returns the sum of the samples' squared hinge losses before their
    /// steps.
    fn train(&mut self, batch: &HeadBatch<'_>, scratch: &mut HeadScratch, rate: HeadRate) -> f64 {
        let lr = self.rate(rate);
        let scratch = scratch.get::<Scratch>();
        let mut loss = 0.0f64;
        // Each sample's slots are computed, and their lines fetched, as the one before trains.
        let (mut x, mut slots) = (
            std::mem::take(&mut scratch.x),
            std::mem::take(&mut scratch.slots),
        );
        if !batch.is_empty() {
            let first = batch.sample(0);
            self.slots(first.input, first.shortlist, &mut x, &mut slots);
        }
        for i in 0..batch.len() {
            if i + 1 < batch.len() {
                let next = batch.sample(i + 1);
                let (next_x, next_slots) = (&mut scratch.next_x, &mut scratch.next_slots);
                self.slots(next.input, next.shortlist, next_x, next_slots);
            } else {
                scratch.next_slots.clear();
            }
            let sample = batch.sample(i);
            loss += f64::from(self.train_sample(
                (&x, &slots),
                sample.shortlist,
                sample.labels,
                lr,
                &mut scratch.updates,
                &scratch.next_slots,
            ));
            std::mem::swap(&mut x, &mut scratch.next_x);
            std::mem::swap(&mut slots, &mut scratch.next_slots);
        }
        (scratch.x, scratch.slots) = (x, slots);
        loss
    }

    fn is_finite(&self) -> bool {
        LabelLinearHead::is_finite(self)
    }

    fn memory_bytes(&self) -> usize {
        self.table.len() * 4
    }

    fn state_tensors(&self) -> Vec<StateTensor> {
        vec![StateTensor {
            name: TABLE.to_string(),
            elem: Elem::F32,
            shape: vec![self.table.len()],
        }]
    }

    fn write_state_tensor<E: From<SlideError>>(
        &self,
        name: &str,
        sink: &mut dyn FnMut(&[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        if name != TABLE {
            return Err(
                config_error("label-linear head", format!("has no tensor `{name}`")).into(),
            );
        }
        crate::layer::write_rows(std::iter::once(&self.table[..]), f32::to_le_bytes, sink)
    }

    /// The head's own table; a hashed table of `2^bits` (as heads wrote before tables were
    /// dense where they fit); or a dense one of fewer labels (a network with fewer outputs).
    fn carries(&self, trained: &StateTensor) -> bool {
        trained.name == TABLE
            && trained.elem == Elem::F32
            && matches!(trained.shape[..], [len] if self.stored_layout(len).is_some())
    }

    /// Reads a table [`Self::carries`] takes; one of another layout or fewer labels is
    /// converted pair by pair (the same scores; a dense table's new labels start at 0).
    fn read_state<S: StateSource + ?Sized>(
        &mut self,
        _step: u64,
        _outputs: usize,
        source: &mut S,
    ) -> std::result::Result<(), S::Error> {
        let len = self.table.len();
        let stored = match source.tensor(TABLE) {
            Some((Elem::F32, shape)) => match shape[..] {
                [n] => self
                    .stored_layout(n)
                    .map(|(layout, labels)| (n, layout, labels)),
                _ => None,
            },
            _ => None,
        };
        let Some((n, layout, labels)) = stored else {
            return Err(config_error(
                "network state",
                format!("needs the label-linear head's {TABLE} of {len} f32"),
            )
            .into());
        };
        if n == len {
            return crate::layer::read_f32s(source, TABLE, &mut self.table);
        }
        let mut from = vec![0.0f32; n];
        crate::layer::read_f32s(source, TABLE, &mut from)?;
        self.table.fill(0.0);
        layout::convert(
            (layout, &from),
            (self.layout, &mut self.table),
            labels.min(self.shape.outputs),
            self.shape.inputs,
        );
        Ok(())
    }
}

impl HeadSettings for LabelLinearConfig {
    type Head = LabelLinearHead;

    fn validate(&self) -> Result<()> {
        LabelLinearConfig::validate(self)
    }

    /// The table's size as `wide.bits` (its name in checkpoints written before heads had
    /// kinds, so that they still load), then every setting.
    fn describe(&self, out: &mut Vec<(String, String)>) {
        out.push(("wide.bits".to_string(), self.bits.to_string()));
        out.push(("heads.label-linear".to_string(), format!("{self:?}")));
    }

    fn architecture(name: &str) -> bool {
        name == "wide.bits"
    }

    fn estimated_bytes(&self, shape: HeadShape) -> u64 {
        self.table_bytes(shape) as u64
    }

    fn build(&self, shape: HeadShape) -> Result<LabelLinearHead> {
        LabelLinearHead::new(*self, shape)
    }
}

/// The buffers of a training step: a sample's feature values and slots, the next sample's
/// (fetched ahead), and a sample's updates.
#[derive(Debug, Default)]
struct Scratch {
    x: Vec<f32>,
    slots: Vec<u32>,
    next_x: Vec<f32>,
    next_slots: Vec<u32>,
    updates: Vec<LinearUpdate>,
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
