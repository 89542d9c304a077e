//! The rare-labels head (`kind = "rare-labels"`): candidates from a sample's rare features.
//! It scores nothing and learns nothing; it adds to each sample's shortlist the labels of
//! the training samples that share its rarest words ([`RareIndex`]), which the heads that
//! score and learn then weigh (in prediction each enters at the logit of the network's last
//! shortlisted output, so that those heads' scores decide). The index is built from the
//! training data before the first step and saved with the model.

use slide_lsh::Vector;

use super::interface::{Head, HeadSettings, HeadShape, MAX_SHORTLIST};
use crate::data::Examples;
use crate::error::{Result, SlideError, config_error};
use crate::layer::{StateSource, StateTensor};

mod index;
pub use index::RareIndex;

#[cfg(test)]
mod tests;

/// The index's row starts in a network's state ([`RareIndex::starts`]; the names from when
/// this was part of the wide head: checkpoints keep them).
pub const STARTS: &str = "wide.rare.starts";
/// The index's `(label, count)` pairs in a network's state ([`RareIndex::entries`]).
pub const ENTRIES: &str = "wide.rare.entries";

/// The rare-labels head's settings. With the `serde` feature a config file's
/// `[[network.heads]]` entry of `kind = "rare-labels"` reads as one.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default, deny_unknown_fields)
)]
pub struct RareLabelsConfig {
    /// How many labels from a sample's rare features join its shortlist (default 16),
    /// between 1 and [`MAX_SHORTLIST`]: the most frequent first.
    pub labels: usize,
    /// A feature is rare when at most this many training samples have it (default 20, at
    /// least 1).
    pub max_df: u32,
}

impl Default for RareLabelsConfig {
    fn default() -> Self {
        RareLabelsConfig {
            labels: 16,
            max_df: 20,
        }
    }
}

impl HeadSettings for RareLabelsConfig {
    type Head = RareLabels;

    fn validate(&self) -> Result<()> {
        if !(1..=MAX_SHORTLIST).contains(&self.labels) {
            return Err(config_error(
                "heads.rare-labels.labels",
                format!("must be between 1 and {MAX_SHORTLIST}, got {}", self.labels),
            ));
        }
        if self.max_df == 0 {
            return Err(config_error(
                "heads.rare-labels.max_df",
                "must be at least 1, got 0",
            ));
        }
        Ok(())
    }

    fn describe(&self, out: &mut Vec<(String, String)>) {
        out.push(("heads.rare-labels".to_string(), format!("{self:?}")));
    }

    /// None: a state's index is read whatever these settings (they shape its building).
    fn architecture(_name: &str) -> bool {
        false
    }

    /// Nothing until the index is built from the training data.
    fn estimated_bytes(&self, _shape: HeadShape) -> u64 {
        0
    }

    fn build(&self, _shape: HeadShape) -> Result<RareLabels> {
        self.validate()?;
        Ok(RareLabels {
            config: *self,
            index: None,
        })
    }
}

/// Candidates from rare features (see the module's documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct RareLabels {
    config: RareLabelsConfig,
    /// The index, once built or read back.
    index: Option<RareIndex>,
}

impl RareLabels {
    /// The settings.
    pub fn config(&self) -> &RareLabelsConfig {
        &self.config
    }

    /// The rare features' index, once built or read back.
    pub fn index(&self) -> Option<&RareIndex> {
        self.index.as_ref()
    }

    /// The index's two tensors, once it is built.
    fn parts(&self) -> Option<[(&'static str, &[u32]); 2]> {
        let index = self.index.as_ref()?;
        Some([(STARTS, index.starts()), (ENTRIES, index.entries())])
    }
}

impl Head for RareLabels {
    /// Builds the index from the training samples, unless it has one.
    fn prepare(&mut self, train: &dyn Examples) {
        if self.index.is_none() {
            self.index = Some(RareIndex::build(train, self.config.max_df));
        }
    }

    /// Up to [`RareLabelsConfig::labels`] labels from `input`'s rare features that `out`
    /// does not hold, passing over `skip` (a training sample's own labels: its candidates
    /// are then those of the other samples).
    fn candidates(
        &self,
        input: Vector<'_>,
        skip: &[u32],
        scratch: &mut Vec<(u32, u32)>,
        out: &mut Vec<u32>,
    ) {
        if let Some(index) = &self.index {
            index.candidates(input, skip, self.config.labels, scratch, out);
        }
    }

    fn memory_bytes(&self) -> usize {
        self.index
            .as_ref()
            .map_or(0, |i| 4 * (i.starts().len() + i.entries().len()))
    }

    fn state_tensors(&self) -> Vec<StateTensor> {
        super::state::u32_tensors(self.parts())
    }

    fn write_state_tensor<E: From<SlideError>>(
        &self,
        name: &str,
        sink: &mut dyn FnMut(&[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        super::state::write_u32_tensor("rare-labels head", self.parts(), name, sink)
    }

    /// Reads the index where the state has one, refusing one that names a label beyond the
    /// network's `outputs`. A state written after training began (`step` above 0) must
    /// have it: the predictions depend on it.
    fn read_state<S: StateSource + ?Sized>(
        &mut self,
        step: u64,
        outputs: usize,
        source: &mut S,
    ) -> std::result::Result<(), S::Error> {
        let fail = |reason: String| S::Error::from(config_error("network state", reason));
        let names = [STARTS, ENTRIES];
        let Some([starts, entries]) =
            super::state::read_u32_tensors(source, step, "rare-labels", names)?
        else {
            return Ok(());
        };
        let index = RareIndex::from_parts(starts, entries)
            .ok_or_else(|| fail(format!("{STARTS} does not index {ENTRIES}")))?;
        if index.label_bound() > outputs {
            return Err(fail(format!(
                "{ENTRIES} names label {} of a layer of {outputs} outputs",
                index.label_bound() - 1
            )));
        }
        self.index = Some(index);
        Ok(())
    }
}
