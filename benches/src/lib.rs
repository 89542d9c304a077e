//! Shared inputs for slide's benchmarks: seeded random vectors shaped like the workloads in
//! the SLIDE paper.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

/// The Amazon-670K input dimension (sparse bag-of-words features).
pub const AMAZON_FEATURES: usize = 135_909;
/// The Amazon-670K label count (output layer width).
pub const AMAZON_LABELS: usize = 670_091;
/// Hidden width of the paper's Amazon-670K network.
pub const AMAZON_HIDDEN: usize = 128;
/// Mean nonzeros per Amazon-670K sample (rounded).
pub const AMAZON_NNZ: usize = 75;

/// The paper's Amazon-670K hidden layer: [`AMAZON_HIDDEN`] ReLU units, input-major (a step
/// touches only the rows of a sample's nonzero features), every unit active.
pub fn amazon_hidden_layer() -> slide::LayerConfig {
    slide::LayerConfig {
        layout: slide::WeightLayout::InputMajor,
        ..slide::LayerConfig::new(AMAZON_HIDDEN, slide::Activation::Relu)
    }
}

/// `n` dense vectors of `dim` standard-uniform-in-[-1, 1] values, row-major.
pub fn dense_rows(n: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..n * dim).map(|_| rng.random_range(-1.0..1.0)).collect()
}

/// A sparse vector with `nnz` distinct sorted indices below `dim` and positive values, like a
/// tf-idf row.
pub fn sparse_vector(dim: usize, nnz: usize, seed: u64) -> (Vec<u32>, Vec<f32>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut indices: Vec<u32> = Vec::with_capacity(nnz);
    while indices.len() < nnz.min(dim) {
        let i = rng.random_range(0..dim as u32);
        if !indices.contains(&i) {
            indices.push(i);
        }
    }
    indices.sort_unstable();
    let values = indices
        .iter()
        .map(|_| rng.random_range(0.05..1.0))
        .collect();
    (indices, values)
}

/// A ReLU-like dense activation vector: about half the entries zero, the rest positive.
pub fn relu_vector(dim: usize, seed: u64) -> Vec<f32> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..dim)
        .map(|_| rng.random_range(-1.0f32..1.0).max(0.0))
        .collect()
}

pub mod baseline;
pub mod scaling;
