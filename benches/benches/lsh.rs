//! LSH micro-benchmarks: hashing one vector with each family, and querying tables the size
//! of the Amazon-670K output layer.
//!
//! Run: `cargo bench -p slide-benches --bench lsh`

use divan::{Bencher, black_box};
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use slide_benches::{
    AMAZON_FEATURES, AMAZON_HIDDEN, AMAZON_LABELS, AMAZON_NNZ, dense_rows, relu_vector,
    sparse_vector,
};
use slide_lsh::{
    BucketPolicy, CodeBuffer, FamilyKind, HashFamily, HashTables, LshFamily, LshParams, Projection,
    QueryScratch, Sampling, TablesConfig, Vector,
};

fn main() {
    divan::main();
}

/// The families as configured in SLIDE: sparse SimHash with density 1/3, bins of 8.
const FAMILIES: [(&str, FamilyKind); 5] = [
    (
        "simhash_sparse",
        FamilyKind::SimHash(Projection::Sparse { density: 1.0 / 3.0 }),
    ),
    ("simhash_gauss", FamilyKind::SimHash(Projection::Gaussian)),
    ("wta", FamilyKind::Wta { bin_size: 8 }),
    ("dwta", FamilyKind::Dwta { bin_size: 8 }),
    ("minhash", FamilyKind::MinHash { bits: 3 }),
];

fn family(name: &str, dim: usize, k: usize, l: usize) -> LshFamily {
    let kind = FAMILIES
        .iter()
        .find(|(n, _)| *n == name)
        .expect("known family")
        .1;
    let range_pow = 18;
    LshFamily::new(kind, dim, LshParams { k, l, range_pow }, 42).expect("valid family")
}

const NAMES: [&str; 5] = ["simhash_sparse", "simhash_gauss", "wta", "dwta", "minhash"];

// `consts = [6, 9]` below is K, with L = 50: the reference code's K = 6 and SimHash's
// usual K = 9.

/// One 128-d dense ReLU activation (the Amazon-670K hidden layer's output).
#[divan::bench(args = NAMES, consts = [6, 9])]
fn hash_dense_128<const K: usize>(bencher: Bencher, name: &str) {
    let family = family(name, AMAZON_HIDDEN, K, 50);
    let x = relu_vector(AMAZON_HIDDEN, 1);
    let mut buffer = CodeBuffer::new();
    bencher
        .counter(divan::counter::ItemsCount::new(1usize))
        .bench_local(|| {
            family
                .hash(black_box(Vector::Dense(&x)), &mut buffer)
                .map(|c| c[0])
        });
}

/// One 75-nonzero sparse input in 135,909 dimensions (an Amazon-670K sample).
#[divan::bench(args = NAMES, consts = [6, 9])]
fn hash_sparse_135909<const K: usize>(bencher: Bencher, name: &str) {
    let family = family(name, AMAZON_FEATURES, K, 50);
    let (indices, values) = sparse_vector(AMAZON_FEATURES, AMAZON_NNZ, 2);
    let mut buffer = CodeBuffer::new();
    bencher
        .counter(divan::counter::ItemsCount::new(1usize))
        .bench_local(|| {
            let x = Vector::Sparse {
                indices: &indices,
                values: &values,
            };
            family.hash(black_box(x), &mut buffer).map(|c| c[0])
        });
}

/// The Amazon-670K output layer's hashing: DWTA (K=6, L=50, 2^18 buckets of at most 128
/// ids) over random 128-d weight rows, and empty tables for them.
fn amazon_output() -> (LshFamily, Vec<f32>, HashTables) {
    let params = LshParams {
        k: 6,
        l: 50,
        range_pow: 18,
    };
    let family = LshFamily::new(FamilyKind::Dwta { bin_size: 8 }, AMAZON_HIDDEN, params, 42)
        .expect("valid family");
    let weights = dense_rows(AMAZON_LABELS, AMAZON_HIDDEN, 3);
    let config = TablesConfig::for_family(params, AMAZON_LABELS, 128, BucketPolicy::Fifo, 42);
    (
        family,
        weights,
        HashTables::new(config).expect("valid tables"),
    )
}

/// Tables over the 670,091 output neurons of the Amazon-670K shape, filled from random
/// 128-d weight rows with DWTA (K=6, L=50, 2^18 buckets of at most 128 ids), queried with a
/// ReLU activation. Sampling: top-k (k = 4,096, about 0.6% of the layer) and plain union.
#[divan::bench(args = ["top_k_4096", "vanilla", "threshold_2"], sample_count = 200)]
fn query_amazon_output(bencher: Bencher, strategy: &str) {
    let (family, weights, mut tables) = amazon_output();
    tables
        .rebuild_dense(&family, &weights, AMAZON_HIDDEN)
        .expect("rebuild");
    let sampling = match strategy {
        "top_k_4096" => Sampling::top_k(4096),
        "vanilla" => Sampling::vanilla(),
        _ => Sampling::threshold(2),
    };
    let queries: Vec<Vec<f32>> = (0..64)
        .map(|i| relu_vector(AMAZON_HIDDEN, 100 + i))
        .collect();
    let mut buffer = CodeBuffer::new();
    let mut scratch = QueryScratch::new(AMAZON_LABELS);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let mut active = Vec::new();
    let mut next = 0;
    bencher
        .counter(divan::counter::ItemsCount::new(1usize))
        .bench_local(|| {
            let x = &queries[next % queries.len()];
            next += 1;
            let codes = family.hash(Vector::Dense(x), &mut buffer).expect("hash");
            tables
                .sample(codes, &sampling, &[], &mut rng, &mut scratch, &mut active)
                .expect("sample");
            active.len()
        });
}

/// A full rebuild of the Amazon-670K output tables (hash 670,091 rows, fill 50 tables).
#[divan::bench(sample_count = 3)]
fn rebuild_amazon_output(bencher: Bencher) {
    let (family, weights, mut tables) = amazon_output();
    bencher
        .counter(divan::counter::ItemsCount::new(AMAZON_LABELS))
        .bench_local(|| {
            tables
                .rebuild_dense(&family, &weights, AMAZON_HIDDEN)
                .expect("rebuild");
        });
}
