//! The checks a config passes before any work starts (those that need no data).

use anyhow::{Result, anyhow, bail};
use slide::SlideError;

use super::{Config, DataFormat};

impl Config {
    /// Every check that can be made without reading the data.
    pub fn validate(&self) -> Result<()> {
        let t = &self.train;
        t.check_keys().map_err(|e| anyhow!("train: {e}"))?;
        if t.batch_size == 0 {
            bail!("train.batch_size must be at least 1");
        }
        if t.min_steps_per_epoch == 0 {
            bail!("train.min_steps_per_epoch must be at least 1");
        }
        if t.epochs == 0 {
            bail!("train.epochs must be at least 1");
        }
        // The core's settings, each checked where it is defined.
        t.adam.validate().map_err(in_train)?;
        t.schedule.validate(t.adam.lr).map_err(in_train)?;
        t.rebuild.validate().map_err(in_train)?;
        t.eval.validate().map_err(in_train)?;
        t.propensity.validate().map_err(in_train)?;
        if self.checkpoint.keep_last == 0 {
            bail!("checkpoint.keep_last must be at least 1");
        }
        // The model's rules (layers, input power, heads), checked by the core's one check;
        // the input size is not known before the data, and counts for none of them.
        self.network(1, 1).validate_model().map_err(|e| match e {
            SlideError::InvalidConfig { what, reason } => anyhow!("network.{what}: {reason}"),
            e => anyhow::Error::new(e),
        })?;
        match self.data.format {
            DataFormat::Xmc | DataFormat::Libsvm => {
                if self.data.train.is_none() || self.data.test.is_none() {
                    bail!("data.train and data.test are needed for text formats");
                }
            }
            DataFormat::Idx => {
                if self.data.dir.is_none() {
                    bail!("data.dir is needed for the idx format");
                }
            }
        }
        let share = self.data.replay_share;
        if !(share > 0.0 && share <= 1.0) {
            bail!("data.replay_share must be in (0, 1], got {share}");
        }
        if self.data.replay.is_some() && self.data.format == DataFormat::Idx {
            bail!("data.replay takes an xmc or libsvm file");
        }
        if matches!(self.data.format, DataFormat::Libsvm)
            && (self.data.features.is_none() || self.data.labels.is_none())
        {
            bail!("data.features and data.labels are needed for the libsvm format");
        }
        // The core's checks, once, without the data (a warm-up may still be in epochs):
        // `LayerConfig::validate` checks the LSH settings too, and what they reject (the
        // lsh crate's errors, or the core's named "lsh") is placed at their sub-table.
        for (i, layer) in self.network.layers.iter().enumerate() {
            layer.validate().map_err(|e| {
                let place = match &e {
                    SlideError::Lsh(_) => format!("network.layers[{i}].lsh"),
                    SlideError::InvalidConfig { what, .. } if what == "lsh" => {
                        format!("network.layers[{i}].lsh")
                    }
                    _ => format!("network.layers[{i}]"),
                };
                anyhow::Error::new(e).context(place)
            })?;
        }
        Ok(())
    }
}

/// A core check's error on a key of `[train]`, named as the config file spells it
/// (`train.lr_min: must be ...`).
fn in_train(e: SlideError) -> anyhow::Error {
    match e {
        SlideError::InvalidConfig { what, reason } => anyhow!("train.{what}: {reason}"),
        e => anyhow::Error::new(e).context("train"),
    }
}
