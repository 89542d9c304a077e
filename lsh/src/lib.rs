//! Locality-sensitive hashing for SLIDE-style neuron sampling.
//!
//! This crate hashes vectors and stores ids; it knows nothing about neural networks. A layer
//! of `n` neurons builds a [`HashFamily`] over its input dimension, hashes every neuron's
//! weight row into [`HashTables`] over ids `0..n`, and for each input asks the tables for the
//! few ids likely to have a large inner product with it.
//!
//! * Families ([`family`]): [`SimHash`] (signed random projections, sparse `±1` or Gaussian),
//!   [`Wta`] (winner-take-all and densified WTA), [`DophMinHash`] (densified
//!   one-permutation MinHash), each a [`FamilyKind`] a layer can ask for; and
//!   [`WeightedMinHash`] (exponential races over weighted sparse inputs), for direct use
//!   (no layer hashes with it: a layer's signed weight rows are not weighted sets). Each
//!   maps a dense or sparse [`Vector`] to `L` bucket codes of `range_pow` bits.
//! * [`HashTables`]: `L` tables of bounded buckets with FIFO or reservoir replacement,
//!   parallel deterministic rebuilds, memory proportional to the ids stored.
//! * Sampling ([`Sampling`]): union of buckets, top-k by hit count, or a hit threshold, each
//!   with a budget, forced ids and random fill to a minimum.
//!
//! Everything is seeded: the same seed gives the same codes, tables and samples, whatever the
//! number of threads. Hashing and querying allocate nothing once their scratch buffers
//! ([`CodeBuffer`], [`QueryScratch`]) are warm.
//!
//! # Example
//!
//! ```
//! use rand::{SeedableRng, rngs::Xoshiro256PlusPlus};
//! use slide_lsh::{
//!     BucketPolicy, CodeBuffer, FamilyKind, HashFamily, HashTables, LshFamily, LshParams,
//!     Projection, QueryScratch, Sampling, TablesConfig, Vector,
//! };
//!
//! // Four "neurons" in 3 dimensions; hash their weight rows.
//! let weights = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.9, 0.1, 0.0f32];
//! let params = LshParams { k: 4, l: 16, range_pow: 4 };
//! let family = LshFamily::new(FamilyKind::SimHash(Projection::Gaussian), 3, params, 7)?;
//! let config = TablesConfig::for_family(params, 4, 64, BucketPolicy::Fifo, 7);
//! let mut tables = HashTables::new(config)?;
//! tables.rebuild_dense(&family, &weights, 3)?;
//!
//! // Which neurons does an input close to the x axis select? The ones found in at
//! // least 12 of the 16 tables.
//! let mut buffer = CodeBuffer::new();
//! let codes = family.hash(Vector::Dense(&[1.0, 0.05, 0.0]), &mut buffer)?;
//! let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
//! let (mut scratch, mut active) = (QueryScratch::new(4), Vec::new());
//! tables.sample(codes, &Sampling::threshold(12), &[], &mut rng, &mut scratch, &mut active)?;
//! active.sort();
//! assert_eq!(active, [0, 3]);
//! # Ok::<(), slide_lsh::LshError>(())
//! ```

pub mod autotune;
pub mod error;
pub mod family;
pub mod sampling;
pub mod tables;
pub mod vector;

pub use autotune::{Tuned, tune_for_budget};
pub use error::{LshError, Result};
pub use family::{
    CodeBuffer, DophMinHash, FamilyKind, FamilyShape, HashFamily, LshFamily, LshParams, Projection,
    SimHash, WeightedMinHash, Wta, WtaMode, mix64,
};
pub use sampling::{QueryScratch, SampleCounts, Sampling, Strategy};
pub use tables::{
    BucketPolicy, HashTables, ReadArray, TablesArray, TablesConfig, TablesState, TablesStats,
};
pub use vector::Vector;
