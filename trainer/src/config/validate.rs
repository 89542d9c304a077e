//! The checks a config passes before any work starts (those that need no data).

use anyhow::{Context, Result, bail};
use slide::SlideError;

use super::{Config, DataFormat};

impl Config {
    /// Every check that can be made without reading the data.
    pub fn validate(&self) -> Result<()> {
        let t = &self.train;
        t.eval_precision
            .validate()
            .context("train.eval_precision = \"bf16\"")?;
        if t.eval_picks == Some(0) {
            bail!(
                "train.eval_picks must be at least 1 (leave it out for the output layer's budget)"
            );
        }
        if t.batch_size == 0 {
            bail!("train.batch_size must be at least 1");
        }
        if t.epochs == 0 {
            bail!("train.epochs must be at least 1");
        }
        if !(t.lr.is_finite() && t.lr > 0.0) {
            bail!("train.lr must be positive, got {}", t.lr);
        }
        if !(t.lr_min.is_finite() && t.lr_min >= 0.0 && t.lr_min <= t.lr) {
            bail!(
                "train.lr_min must be between 0 and train.lr ({}), got {}",
                t.lr,
                t.lr_min
            );
        }
        if !(t.lr_gamma > 0.0 && t.lr_gamma <= 1.0) {
            bail!("train.lr_gamma must be in (0, 1], got {}", t.lr_gamma);
        }
        if self.checkpoint.keep_last == 0 {
            bail!("checkpoint.keep_last must be at least 1");
        }
        if let Some(memory) = &self.memory {
            if !self.network.layers.is_empty() {
                bail!("a config builds a [memory] or trains [network] layers, not both");
            }
            memory.validate()?;
        } else if self.network.layers.is_empty() {
            bail!("network.layers: at least one layer is needed");
        }
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
