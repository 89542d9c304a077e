//! The crate's typed error.

use thiserror::Error;

/// Everything that can go wrong when building a hash family or tables, hashing a vector or
/// querying tables. Every variant carries the offending values so the caller can report them.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LshError {
    /// A construction parameter is out of its valid range.
    #[error("invalid LSH parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// The parameter's name as it appears in the API (and in configs).
        name: &'static str,
        /// The rejected value, rendered as text.
        value: String,
        /// What the valid range is.
        reason: &'static str,
    },
    /// A dense input's length differs from the family's input dimension.
    #[error("input has {actual} dimensions but the hash family was built for {expected}")]
    DimensionMismatch {
        /// The family's input dimension.
        expected: usize,
        /// The length of the vector that was passed.
        actual: usize,
    },
    /// A sparse input has a different number of indices and values.
    #[error("sparse input has {indices} indices but {values} values")]
    SparseLengthMismatch {
        /// Number of indices.
        indices: usize,
        /// Number of values.
        values: usize,
    },
    /// A sparse input's index is not below the family's input dimension.
    #[error("sparse input index {index} is out of range for dimension {dim}")]
    IndexOutOfRange {
        /// The offending index.
        index: u32,
        /// The family's input dimension.
        dim: usize,
    },
    /// An input value is NaN or infinite.
    #[error("input value at index {index} is not finite ({value})")]
    NonFiniteValue {
        /// Position of the value in the (dense or sparse) input.
        index: u32,
        /// The value itself.
        value: f32,
    },
    /// An id passed to the tables is not below the number of ids they were built for.
    #[error("id {id} is out of range: these tables hold ids below {num_ids}")]
    IdOutOfRange {
        /// The offending id.
        id: u32,
        /// The tables' id range.
        num_ids: usize,
    },
    /// A bucket code is not below `2^range_pow`.
    #[error("bucket code {code} for table {table} is out of range for range_pow {range_pow}")]
    CodeOutOfRange {
        /// The offending code.
        code: u32,
        /// Which table it was meant for.
        table: usize,
        /// The tables' range_pow.
        range_pow: u32,
    },
    /// A slice of codes has the wrong length.
    #[error("expected {expected} bucket codes, got {actual}")]
    CodeCountMismatch {
        /// `L` (times the number of ids, for batch inserts).
        expected: usize,
        /// The length that was passed.
        actual: usize,
    },
    /// The tables and the hash family disagree about `L` or `range_pow`.
    #[error(
        "hash family produces {family_tables} tables of 2^{family_range_pow} buckets, \
         but the tables have {tables} of 2^{range_pow}"
    )]
    FamilyMismatch {
        /// `L` of the family.
        family_tables: usize,
        /// `range_pow` of the family.
        family_range_pow: u32,
        /// `L` of the tables.
        tables: usize,
        /// `range_pow` of the tables.
        range_pow: u32,
    },
}

/// Shorthand for results of this crate.
pub type Result<T, E = LshError> = std::result::Result<T, E>;

pub(crate) fn invalid(name: &'static str, value: impl ToString, reason: &'static str) -> LshError {
    LshError::InvalidParameter {
        name,
        value: value.to_string(),
        reason,
    }
}
