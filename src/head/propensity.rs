//! The propensity head (`kind = "propensity"`): a tail-label prior in prediction. It adds
//! `weight * ln(1 / p_l)` to each shortlisted label's score, `p_l` the label's propensity
//! (Jain et al. 2016, the model PSP@k weighs hits by) from its count in the training data.
//! Ranking by `log P(l | x) + ln(1 / p_l)` is what maximises PSP@k's expectation (Wydmuch
//! et al. 2021, propensity-scored label trees); a `weight` below 1 leans that way only as far
//! as P@k holds (docs/notebook/accuracy.md, "A tail-label prior in prediction"). It learns
//! nothing and adds no candidates; training is unchanged. The counts are taken from the
//! training data before the first step and saved with the model.

use slide_lsh::Vector;

use super::interface::{Head, HeadSettings, HeadShape, MAX_SHORTLIST};
use crate::data::Examples;
use crate::error::{Result, SlideError, config_error};
use crate::layer::{StateSource, StateTensor};
use crate::metrics::{Propensities, PropensityModel};

#[cfg(test)]
mod tests;

/// Each label's training count in a network's state, one u32 per output.
pub const COUNTS: &str = "propensity.counts";
/// The training samples the counts were taken from, one u32.
pub const SAMPLES: &str = "propensity.samples";

/// The propensity head's settings. With the `serde` feature a config file's
/// `[[network.heads]]` entry of `kind = "propensity"` reads as one.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default, deny_unknown_fields)
)]
pub struct PropensityConfig {
    /// How far the ranking leans to rare labels: a shortlisted label's score gains
    /// `weight * ln(1 / p_l)` (default 0.5), finite and at least 0 (0: no change; 1: the
    /// ranking PSP@k asks for, were scores log-probabilities).
    pub weight: f32,
    /// How many of a sample's best outputs (by the network's logit) prediction re-ranks at
    /// least (default 16), between 1 and [`MAX_SHORTLIST`]: a rare label further down cannot
    /// rise into the top. With other heads the shortlist is the most any head asks for.
    pub shortlist: usize,
}

impl Default for PropensityConfig {
    fn default() -> Self {
        PropensityConfig {
            weight: 0.5,
            shortlist: 16,
        }
    }
}

impl HeadSettings for PropensityConfig {
    type Head = PropensityHead;

    fn validate(&self) -> Result<()> {
        if !(self.weight.is_finite() && self.weight >= 0.0) {
            return Err(config_error(
                "heads.propensity.weight",
                format!("must be a finite number of at least 0, got {}", self.weight),
            ));
        }
        if !(1..=MAX_SHORTLIST).contains(&self.shortlist) {
            return Err(config_error(
                "heads.propensity.shortlist",
                format!(
                    "must be between 1 and {MAX_SHORTLIST}, got {}",
                    self.shortlist
                ),
            ));
        }
        Ok(())
    }

    fn describe(&self, out: &mut Vec<(String, String)>) {
        out.push(("heads.propensity".to_string(), format!("{self:?}")));
    }

    /// None: the weight shapes predictions, not what a state holds.
    fn architecture(_name: &str) -> bool {
        false
    }

    fn estimated_bytes(&self, shape: HeadShape) -> u64 {
        // The counts and the log-inverse propensities.
        8 * shape.outputs as u64
    }

    fn build(&self, shape: HeadShape) -> Result<PropensityHead> {
        self.validate()?;
        Ok(PropensityHead {
            config: *self,
            outputs: shape.outputs,
            prior: None,
        })
    }
}

/// The labels' training counts and what they make of a score.
#[derive(Debug, Clone, PartialEq)]
struct Prior {
    counts: Vec<u32>,
    /// The training samples, as the state's one-value tensor holds them.
    samples: [u32; 1],
    /// `ln(1 / p_l)` per label.
    log_inverse: Vec<f32>,
}

impl Prior {
    /// From each label's count among `samples` training samples (at least one).
    fn new(counts: Vec<u32>, samples: u32) -> Result<Prior> {
        let wide: Vec<u64> = counts.iter().map(|&c| u64::from(c)).collect();
        let p = Propensities::from_counts(&wide, samples as usize, PropensityModel::default())?;
        let log_inverse = (0..counts.len())
            // Below e samples the model's constant turns negative and so would the log: a
            // set that small has no tail to lift.
            .map(|l| p.inverse(l as u32).max(1.0).ln() as f32)
            .collect();
        Ok(Prior {
            counts,
            samples: [samples],
            log_inverse,
        })
    }
}

/// A tail-label prior (see the module's documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct PropensityHead {
    config: PropensityConfig,
    outputs: usize,
    /// The counts, once taken or read back.
    prior: Option<Prior>,
}

impl PropensityHead {
    /// The settings.
    pub fn config(&self) -> &PropensityConfig {
        &self.config
    }

    /// The state's two tensors, once the counts are known.
    fn parts(&self) -> Option<[(&'static str, &[u32]); 2]> {
        let prior = self.prior.as_ref()?;
        Some([(COUNTS, &prior.counts), (SAMPLES, &prior.samples)])
    }

    /// `ln(1 / p_l)` of label `label`, once the counts are known (a label beyond them, or
    /// none known: `None`).
    pub fn log_inverse(&self, label: u32) -> Option<f32> {
        self.prior
            .as_ref()?
            .log_inverse
            .get(label as usize)
            .copied()
    }
}

impl Head for PropensityHead {
    /// Counts each label's training samples, unless the counts are known.
    fn prepare(&mut self, train: &dyn Examples) {
        if self.prior.is_some() || train.is_empty() {
            return;
        }
        let counts = Propensities::label_counts(train, self.outputs)
            .into_iter()
            .map(|c| u32::try_from(c).unwrap_or(u32::MAX))
            .collect();
        let samples = u32::try_from(train.len()).unwrap_or(u32::MAX);
        // The model's constants are valid and the set is not empty: this cannot fail.
        self.prior = Prior::new(counts, samples).ok();
    }

    fn shortlist(&self) -> usize {
        self.config.shortlist
    }

    fn rescore(&self, _input: Vector<'_>, candidates: &mut [(f32, u32)]) {
        let Some(prior) = &self.prior else {
            return;
        };
        for (score, id) in candidates {
            if let Some(&w) = prior.log_inverse.get(*id as usize) {
                *score += self.config.weight * w;
            }
        }
    }

    /// Nothing: a continued run counts its own training data again.
    fn carries(&self, _trained: &StateTensor) -> bool {
        false
    }

    fn memory_bytes(&self) -> usize {
        self.prior.as_ref().map_or(0, |p| 8 * p.counts.len())
    }

    fn state_tensors(&self) -> Vec<StateTensor> {
        super::state::u32_tensors(self.parts())
    }

    fn write_state_tensor<E: From<SlideError>>(
        &self,
        name: &str,
        sink: &mut dyn FnMut(&[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        super::state::write_u32_tensor("propensity head", self.parts(), name, sink)
    }

    /// Reads the counts where the state has them, refusing counts of another label count
    /// than the network's `outputs`. A state written after training began (`step` above 0)
    /// must have them: the predictions depend on them.
    fn read_state<S: StateSource + ?Sized>(
        &mut self,
        step: u64,
        outputs: usize,
        source: &mut S,
    ) -> std::result::Result<(), S::Error> {
        let fail = |reason: String| S::Error::from(config_error("network state", reason));
        let names = [COUNTS, SAMPLES];
        let Some([counts, samples]) =
            super::state::read_u32_tensors(source, step, "propensity", names)?
        else {
            return Ok(());
        };
        if counts.len() != outputs || samples.len() != 1 {
            return Err(fail(format!(
                "{COUNTS} holds {} labels and {SAMPLES} {} values, not {outputs} and 1",
                counts.len(),
                samples.len()
            )));
        }
        if samples[0] == 0 || counts.iter().any(|&c| c > samples[0]) {
            return Err(fail(format!(
                "{COUNTS} are not counts among {SAMPLES} = {} samples",
                samples[0]
            )));
        }
        let prior = Prior::new(counts, samples[0]).map_err(S::Error::from)?;
        self.prior = Some(prior);
        self.outputs = outputs;
        Ok(())
    }
}
