//! The core crate's typed error.

use slide_lsh::LshError;
use thiserror::Error;

/// Everything the public API of `slide` can reject. Bad input never panics.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SlideError {
    /// A collective operation between the ranks of a sharded network failed.
    #[error("communication between ranks failed: {0}")]
    Communication(String),
    /// An LSH family, table or query rejected its arguments.
    #[error(transparent)]
    Lsh(#[from] LshError),
    /// A network or layer configuration is inconsistent.
    #[error("invalid configuration of {what}: {reason}")]
    InvalidConfig {
        /// The part of the configuration, e.g. `layer 2`.
        what: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A sample's input does not match the network's input dimension.
    #[error("sample {sample}: input has {actual} dimensions, the network expects {expected}")]
    InputDimension {
        /// Position of the sample in the dataset.
        sample: usize,
        /// The network's input dimension.
        expected: usize,
        /// The input's length (dense) or largest index + 1 (sparse).
        actual: usize,
    },
    /// A sample's input contains a NaN, an infinity, or mismatched sparse slices.
    #[error("sample {sample}: {reason}")]
    BadInput {
        /// Position of the sample in the dataset.
        sample: usize,
        /// What is wrong.
        reason: String,
    },
    /// A label is not below the number of outputs.
    #[error("sample {sample}: label {label} is out of range for {num_labels} outputs")]
    LabelOutOfRange {
        /// Position of the sample in the dataset.
        sample: usize,
        /// The offending label.
        label: u32,
        /// The output layer's width.
        num_labels: usize,
    },
    /// A training sample has no label.
    #[error("sample {sample} has no label; training needs at least one")]
    NoLabels {
        /// Position of the sample in the dataset.
        sample: usize,
    },
    /// A batch refers to a sample the dataset does not have.
    #[error("batch refers to sample {sample}, but the dataset has {len}")]
    SampleOutOfRange {
        /// The offending sample index.
        sample: usize,
        /// Number of samples in the dataset.
        len: usize,
    },
    /// Activations became NaN or infinite: the weights have diverged (learning rate too
    /// high, or inputs too large).
    #[error(
        "training diverged: layer {layer}'s activations for sample {sample} are not finite \
         (NaN or infinity)"
    )]
    Diverged {
        /// The layer whose outputs are not finite.
        layer: usize,
        /// Position of the sample in the dataset.
        sample: usize,
    },
    /// A step was asked to train on no samples.
    #[error("empty batch")]
    EmptyBatch,
}

/// Shorthand for results of this crate.
pub type Result<T, E = SlideError> = std::result::Result<T, E>;

pub(crate) fn config_error(what: impl Into<String>, reason: impl Into<String>) -> SlideError {
    SlideError::InvalidConfig {
        what: what.into(),
        reason: reason.into(),
    }
}

/// The error for sample `sample`'s input that the lsh crate found unfit (wrong length,
/// index out of range, non-finite value).
pub(crate) fn input_error(sample: usize, e: LshError) -> SlideError {
    match e {
        LshError::DimensionMismatch { expected, actual } => SlideError::InputDimension {
            sample,
            expected,
            actual,
        },
        LshError::IndexOutOfRange { index, dim } => SlideError::InputDimension {
            sample,
            expected: dim,
            actual: index as usize + 1,
        },
        other => SlideError::BadInput {
            sample,
            reason: other.to_string(),
        },
    }
}
