//! How an evaluation or a prediction runs: [`EvalOptions`] (which neurons, at which
//! precision, with which LSH-mode pool), passed to [`Network::evaluate`] and
//! [`Network::predict`] rather than stored in the network. Each key's default and check is
//! here; a config file's `[train]` reads these keys under the same names.
//!
//! [`Network::evaluate`]: crate::Network::evaluate
//! [`Network::predict`]: crate::Network::predict

use crate::error::{Result, config_error};
use crate::layer::Mode;

/// How exact evaluation scores every output of the output layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(rename_all = "kebab-case")
)]
pub enum EvalPrecision {
    /// f32 products (matrixmultiply's sgemm).
    #[default]
    F32,
    /// Inputs and weights rounded to BF16, products summed in f32 by AVX512-BF16's
    /// `vdpbf16ps` (twice the multiply-adds per instruction); the weights are converted a
    /// block of rows at a time, so it needs no second copy of the layer. Scores differ from
    /// f32 ones by BF16's rounding of each factor (about 0.4%), which can swap near ties.
    Bf16,
}

impl EvalPrecision {
    /// Checks that this CPU can score in this precision ([`Bf16`](Self::Bf16) needs
    /// AVX512-BF16).
    pub fn validate(self) -> Result<()> {
        if self == EvalPrecision::Bf16 && !crate::kernels::has_bf16_dot() {
            return Err(config_error(
                "eval_precision",
                "BF16 scoring needs a CPU with AVX512-BF16",
            ));
        }
        Ok(())
    }
}

/// How [`Network::evaluate`](crate::Network::evaluate) and
/// [`Network::predict`](crate::Network::predict) score a sample. A [`Mode`] converts into
/// the options of that mode with every other setting at its default:
///
/// ```
/// use slide::{EvalOptions, Mode};
/// let lsh = EvalOptions { pool: 4096, ..EvalOptions::from(Mode::EvalLsh) };
/// assert!(lsh.validate().is_ok());
/// assert!(EvalOptions { picks: Some(0), ..lsh }.validate().is_err());
/// ```
///
/// With the `serde` feature it reads the keys of a config file's `[train]` that start with
/// `eval_` (`eval_mode`, `eval_precision`, `eval_pool`, `eval_picks`); each left out takes
/// its default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize, serde::Serialize),
    serde(default)
)]
pub struct EvalOptions {
    /// Which neurons are computed (`eval_mode`: `"exact"`, the default, every output;
    /// `"lsh"`, those the tables pick; `"dense"`, every neuron of every layer).
    /// [`Mode::Train`] is read as [`Mode::EvalLsh`].
    #[cfg_attr(feature = "serde", serde(rename = "eval_mode"))]
    pub mode: Mode,
    /// How an exact evaluation scores every output (`eval_precision`: `"f32"`, the default,
    /// or `"bf16"`, AVX512-BF16 products, about twice as fast at the Amazon-670K shape; see
    /// docs/notebook/performance.md, "BF16 scoring for exact evaluation").
    #[cfg_attr(feature = "serde", serde(rename = "eval_precision"))]
    pub precision: EvalPrecision,
    /// LSH mode, a sampled neuron-major output layer (`eval_pool`): beside each sample's
    /// table picks, score the `pool` outputs that score highest for the mean input of each
    /// group of [`POOL_GROUP`](crate::eval::POOL_GROUP) samples (one full scoring of the
    /// output layer per group). The tables are then queried without the shared negatives,
    /// and a pick in the pool is scored once. 0 (the default): the tables' picks only, with
    /// the shared negatives. A pool wider than the layer scores every output.
    #[cfg_attr(feature = "serde", serde(rename = "eval_pool"))]
    pub pool: usize,
    /// With a pool, how many table picks each sample scores (`eval_picks`): `Some(k)`, the
    /// `k` outputs found in the most of the sample's buckets; `None` (the default), the
    /// output layer's own sampling (its budget).
    #[cfg_attr(
        feature = "serde",
        serde(rename = "eval_picks", skip_serializing_if = "Option::is_none")
    )]
    pub picks: Option<usize>,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            mode: Mode::EvalExact,
            precision: EvalPrecision::F32,
            pool: 0,
            picks: None,
        }
    }
}

impl From<Mode> for EvalOptions {
    fn from(mode: Mode) -> Self {
        EvalOptions {
            mode,
            ..EvalOptions::default()
        }
    }
}

impl EvalOptions {
    /// Checks the options: a precision this CPU has, and at least one table pick when
    /// `picks` is set (leave it unset for the output layer's own budget).
    pub fn validate(&self) -> Result<()> {
        self.precision.validate()?;
        if self.picks == Some(0) {
            return Err(config_error(
                "eval_picks",
                "must be at least 1 (leave it out for the output layer's own budget)",
            ));
        }
        Ok(())
    }

    /// The pass these options run: [`Mode::Train`] read as [`Mode::EvalLsh`].
    pub(crate) fn pass(&self) -> Mode {
        match self.mode {
            Mode::Train => Mode::EvalLsh,
            mode => mode,
        }
    }
}
