//! # slide
//!
//! Sub-linear deep learning on CPUs: fully-connected layers whose active neurons are chosen
//! per sample by locality-sensitive hashing, with hand-derived sparse passes and a sparse
//! Adam optimizer.
//!
//! The hashing layer is the [`lsh`] crate (`slide-lsh`), re-exported here. The sparse layer,
//! network and optimizer are being built on top of it.

pub use slide_lsh as lsh;
