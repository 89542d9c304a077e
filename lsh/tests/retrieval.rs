//! End to end: store 10,000 random unit vectors in 128 dimensions in SimHash tables (K = 6,
//! L = 50) and query with noisy copies at cosine 0.9 and with unrelated random vectors.

mod common;

use common::*;
use slide_lsh::{
    BucketPolicy, CodeBuffer, FamilyKind, HashFamily, HashTables, LshFamily, LshParams, Projection,
    QueryScratch, Sampling, TablesConfig, Vector,
};

const N: usize = 10_000;
const DIM: usize = 128;

struct Outcome {
    recall: f64,
    random_fraction: f64,
}

fn run(sampling: Sampling, capacity: usize, policy: BucketPolicy) -> Outcome {
    let mut rng = rng(1234);
    let stored: Vec<Vec<f64>> = (0..N).map(|_| unit_vector(&mut rng, DIM)).collect();
    let matrix: Vec<f32> = stored.iter().flat_map(|v| to_f32(v)).collect();
    let params = LshParams {
        k: 6,
        l: 50,
        range_pow: 6,
    };
    let kind = FamilyKind::SimHash(Projection::Sparse { density: 1.0 / 3.0 });
    let family = LshFamily::new(kind, DIM, params, 77).unwrap();
    let mut tables =
        HashTables::new(TablesConfig::for_family(params, N, capacity, policy, 5)).unwrap();
    tables.rebuild_dense(&family, &matrix, DIM).unwrap();

    let (mut buffer, mut scratch, mut out) = (CodeBuffer::new(), QueryScratch::new(N), Vec::new());
    let queries = 400;
    let mut found = 0;
    for q in 0..queries {
        let target = (q * 25) % N;
        let noisy = to_f32(&at_cosine(&mut rng, &stored[target], 0.9));
        assert!(cosine(&noisy, &matrix[target * DIM..][..DIM]) >= 0.9 - 1e-6);
        let codes = family.hash(Vector::Dense(&noisy), &mut buffer).unwrap();
        tables
            .sample(codes, &sampling, &[], &mut rng, &mut scratch, &mut out)
            .unwrap();
        found += usize::from(out.contains(&(target as u32)));
    }
    let mut returned = 0;
    for _ in 0..queries {
        let random = to_f32(&unit_vector(&mut rng, DIM));
        let codes = family.hash(Vector::Dense(&random), &mut buffer).unwrap();
        tables
            .sample(codes, &sampling, &[], &mut rng, &mut scratch, &mut out)
            .unwrap();
        returned += out.len();
    }
    Outcome {
        recall: found as f64 / queries as f64,
        random_fraction: returned as f64 / (queries * N) as f64,
    }
}

/// The union of buckets, as in SLIDE, with buckets of 32 ids filled by reservoir sampling
/// (about 156 ids hash to each of the 64 buckets). A noisy copy shares a bucket with its
/// original in about 39% of tables (0.856^6) and survives the reservoir in about 1 of 5,
/// so 50 tables find it with probability ~0.985; a random query touches at most
/// 50 x 32 = 1,600 ids (16%). Measured: recall 0.985, random queries return 14.7%.
#[test]
fn union_of_bounded_buckets_finds_near_copies_and_few_random_ids() {
    let outcome = run(Sampling::vanilla(), 32, BucketPolicy::Reservoir);
    eprintln!(
        "vanilla/reservoir-32: recall {:.3}, random fraction {:.4}",
        outcome.recall, outcome.random_fraction
    );
    assert!(outcome.recall >= 0.95, "recall {}", outcome.recall);
    // At most 1,600 of 10,000 ids (0.16) can come back; overlapping buckets take the
    // measured 0.1468 below that. The bound is the measurement's (the run is seeded): a
    // change that stopped bounding buckets or stopped merging repeated ids fails it.
    assert!(
        (0.13..0.15).contains(&outcome.random_fraction),
        "random fraction {}",
        outcome.random_fraction
    );
}

/// Unbounded buckets with a hit threshold: a near copy is found in ~20 of 50 tables, a
/// random vector in ~0.8, so requiring 3 hits keeps nearly every near copy and about 4.5%
/// of ids for a random query. Measured: recall 1.000, random queries return 5.6%.
#[test]
fn hit_threshold_finds_near_copies_and_few_random_ids() {
    let outcome = run(Sampling::threshold(3), 4096, BucketPolicy::Fifo);
    eprintln!(
        "threshold-3: recall {:.3}, random fraction {:.4}",
        outcome.recall, outcome.random_fraction
    );
    assert!(outcome.recall >= 0.95, "recall {}", outcome.recall);
    // Measured 0.0558 (seeded); unbounded buckets without the threshold return far more.
    assert!(
        outcome.random_fraction < 0.07,
        "random fraction {}",
        outcome.random_fraction
    );
}
