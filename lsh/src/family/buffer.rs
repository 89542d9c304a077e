//! [`CodeBuffer`]: the per-thread scratch a family hashes into, and the results of its last
//! call.
//!
//! Its constructor for a given family, [`CodeBuffer::for_family`], sits beside the
//! [`HashFamily`](super::HashFamily) trait it calls, so that this file and the trait's do
//! not import each other.

/// Reusable per-thread scratch for hashing, plus the results of the last call.
///
/// Sized on first use; afterwards hashing with the same family allocates nothing.
#[derive(Debug, Clone, Default)]
pub struct CodeBuffer {
    pub(crate) raw: Vec<u32>,
    pub(crate) codes: Vec<u32>,
    pub(crate) acc: Vec<f32>,
    pub(crate) aux: Vec<u32>,
    /// Codes of a block of rows during a table rebuild.
    pub(crate) rows: Vec<u32>,
    /// A block of rows written out as f32 during a rebuild from another format.
    pub(crate) matrix: Vec<f32>,
}

impl CodeBuffer {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// The `L` bucket codes of the last [`HashFamily::hash`](super::HashFamily::hash) call.
    pub fn codes(&self) -> &[u32] {
        &self.codes
    }

    /// The `K * L` raw sub-hashes of the last call, table-major (`raw[t * K + j]`).
    pub fn raw(&self) -> &[u32] {
        &self.raw
    }
}
