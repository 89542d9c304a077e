//! Sampling strategies on hand-built tables whose hit counts are known.

mod common;

use common::rng;
use slide_lsh::{
    BucketPolicy, HashTables, LshError, QueryScratch, Sampling, Strategy, TablesConfig,
};

/// Four tables over ids 0..20. The query's buckets are code 1 in every table; id `i` sits in
/// bucket 1 of the first `hits[i]` tables and in bucket 0 of the others.
///   id:    0 1 2 3 4 5 6 7
///   hits:  4 3 3 2 2 1 1 0    (ids 8..20: 0)
const HITS: [u32; 8] = [4, 3, 3, 2, 2, 1, 1, 0];

fn tables() -> HashTables {
    let config = TablesConfig {
        l: 4,
        range_pow: 2,
        bucket_capacity: 64,
        policy: BucketPolicy::Fifo,
        num_ids: 20,
        seed: 1,
    };
    let mut tables = HashTables::new(config).unwrap();
    for (id, &h) in HITS.iter().enumerate() {
        let codes: Vec<u32> = (0..4).map(|t| u32::from(t < h)).collect();
        tables.insert(id as u32, &codes).unwrap();
    }
    tables
}

fn sample(
    tables: &HashTables,
    sampling: Sampling,
    forced: &[u32],
    scratch: &mut QueryScratch,
) -> Vec<u32> {
    let mut out = Vec::new();
    tables
        .sample(
            &[1, 1, 1, 1],
            &sampling,
            forced,
            &mut rng(3),
            scratch,
            &mut out,
        )
        .unwrap();
    out
}

#[test]
fn query_reports_every_candidate_with_its_hit_count() {
    let tables = tables();
    let mut out = Vec::new();
    tables
        .query(&[1, 1, 1, 1], &mut QueryScratch::new(20), &mut out)
        .unwrap();
    out.sort();
    assert_eq!(
        out,
        vec![(0, 4), (1, 3), (2, 3), (3, 2), (4, 2), (5, 1), (6, 1)]
    );
}

#[test]
fn strategies_select_by_hit_count() {
    let tables = tables();
    let mut scratch = QueryScratch::new(20);
    let mut s = |sampling| {
        let mut v = sample(&tables, sampling, &[], &mut scratch);
        v.sort();
        v
    };
    assert_eq!(s(Sampling::vanilla()), vec![0, 1, 2, 3, 4, 5, 6]);
    assert_eq!(s(Sampling::top_k(1)), vec![0]);
    assert_eq!(s(Sampling::top_k(3)), vec![0, 1, 2]);
    // Ties at the cut go to the first retrieved: ids 3 and 4 both have 2 hits, 3 was
    // inserted (and so retrieved) first.
    assert_eq!(s(Sampling::top_k(4)), vec![0, 1, 2, 3]);
    assert_eq!(s(Sampling::top_k(100)), vec![0, 1, 2, 3, 4, 5, 6]);
    assert_eq!(s(Sampling::threshold(3)), vec![0, 1, 2]);
    assert_eq!(s(Sampling::threshold(2)), vec![0, 1, 2, 3, 4]);
    assert_eq!(s(Sampling::threshold(2).with_budget(2)), vec![0, 1]);
    assert_eq!(s(Sampling::threshold(4)), vec![0]);
    // Vanilla with a budget stops early: exactly the budget, all of them candidates.
    let v = s(Sampling::vanilla().with_budget(3));
    assert_eq!(v.len(), 3);
    assert!(v.iter().all(|&id| HITS[id as usize] > 0));
}

#[test]
fn forced_ids_come_first_once_and_do_not_count_against_the_budget() {
    let tables = tables();
    let mut scratch = QueryScratch::new(20);
    let out = sample(&tables, Sampling::top_k(2), &[15, 1, 15], &mut scratch);
    assert_eq!(out, vec![15, 1, 0, 2]);
    let out = sample(&tables, Sampling::threshold(4), &[9], &mut scratch);
    assert_eq!(out, vec![9, 0]);
}

#[test]
fn random_fill_reaches_the_minimum_with_distinct_ids() {
    let tables = tables();
    let mut scratch = QueryScratch::new(20);
    let out = sample(
        &tables,
        Sampling::top_k(2).with_min_active(12),
        &[19],
        &mut scratch,
    );
    assert_eq!(out.len(), 12);
    assert_eq!(&out[..3], &[19, 0, 1]);
    let mut unique = out.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 12);
    // A minimum above the number of ids means every id.
    let out = sample(
        &tables,
        Sampling::top_k(2).with_min_active(50),
        &[],
        &mut scratch,
    );
    let mut all = out.clone();
    all.sort();
    assert_eq!(all, (0..20).collect::<Vec<_>>());
    // Random fill is uniform over the ids not selected: top-2 takes ids 0 and 1, and the 5
    // fill slots of each query are spread evenly over ids 2..20.
    let mut drawn = [0u32; 20];
    let mut rng = rng(11);
    let mut out = Vec::new();
    for _ in 0..9000 {
        let sampling = Sampling::top_k(2).with_min_active(7);
        tables
            .sample(
                &[1, 1, 1, 1],
                &sampling,
                &[],
                &mut rng,
                &mut scratch,
                &mut out,
            )
            .unwrap();
        for &id in &out[2..] {
            drawn[id as usize] += 1;
        }
    }
    // 9000 queries x 5 draws over 18 ids: 2,500 each; a 10% band is over 5 standard deviations.
    for &count in &drawn[2..] {
        assert!((2250..=2750).contains(&count), "{drawn:?}");
    }
}

#[test]
fn random_extra_comes_after_the_fill_and_avoids_every_chosen_id() {
    let tables = tables();
    let mut scratch = QueryScratch::new(20);
    // Forced 19, top-2 takes 0 and 1, the fill brings the set to 5, then 4 extra ids.
    let sampling = Sampling::top_k(2).with_min_active(5).with_random_extra(4);
    assert_eq!(tables.max_sampled(&sampling, 1), 9);
    let mut out = Vec::new();
    let counts = tables
        .sample(
            &[1, 1, 1, 1],
            &sampling,
            &[19],
            &mut rng(5),
            &mut scratch,
            &mut out,
        )
        .unwrap();
    assert_eq!(out.len(), 9);
    assert_eq!(&out[..3], &[19, 0, 1]);
    assert_eq!(
        (counts.forced, counts.from_tables, counts.random_fill),
        (1, 2, 6)
    );
    let mut unique = out.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 9);
    // Without a minimum the extra ids come straight after the selection; more extra ids
    // than are left means every id.
    let out = sample(
        &tables,
        Sampling::top_k(2).with_random_extra(3),
        &[],
        &mut scratch,
    );
    assert_eq!(out.len(), 5);
    assert_eq!(&out[..2], &[0, 1]);
    let out = sample(
        &tables,
        Sampling::top_k(2).with_random_extra(40),
        &[],
        &mut scratch,
    );
    let mut all = out.clone();
    all.sort();
    assert_eq!(all, (0..20).collect::<Vec<_>>());
}

/// A sampling that takes nothing from the tables (a budget of 0: uniform sampling) needs no
/// codes: the forced ids, then the fill and the extra ids, none of them a bucket's candidate;
/// any other sampling still needs one code per table.
#[test]
fn a_zero_budget_reads_no_codes_and_no_buckets() {
    let tables = tables();
    let mut scratch = QueryScratch::new(20);
    let uniform = Sampling::vanilla()
        .with_budget(0)
        .with_min_active(4)
        .with_random_extra(3);
    assert!(!uniform.uses_tables());
    assert!(!Sampling::threshold(2).with_budget(0).uses_tables());
    assert!(Sampling::top_k(1).with_budget(0).uses_tables());
    assert!(Sampling::vanilla().with_budget(1).uses_tables());
    let mut out = Vec::new();
    let counts = tables
        .sample(&[], &uniform, &[19], &mut rng(5), &mut scratch, &mut out)
        .unwrap();
    assert_eq!(
        (
            counts.forced,
            counts.from_tables,
            counts.random_fill,
            counts.candidates
        ),
        (1, 0, 6, 0)
    );
    assert_eq!((out.len(), out[0]), (7, 19));
    let mut unique = out.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 7);
    // Over many draws every id but the forced one comes up, the buckets' ids no more often.
    let mut drawn = [0u32; 20];
    let mut rng = rng(6);
    for _ in 0..2000 {
        tables
            .sample(&[], &uniform, &[19], &mut rng, &mut scratch, &mut out)
            .unwrap();
        out[1..].iter().for_each(|&id| drawn[id as usize] += 1);
    }
    // 2,000 x 6 draws over 19 ids: 632 each; a 20% band is over 5 standard deviations.
    assert_eq!(drawn[19], 0);
    assert!(
        drawn[..19].iter().all(|&c| (505..=758).contains(&c)),
        "{drawn:?}"
    );
    let tabled = Sampling::vanilla().with_budget(2);
    let error = tables.sample(&[], &tabled, &[], &mut rng, &mut scratch, &mut out);
    assert!(
        matches!(error, Err(LshError::CodeCountMismatch { .. })),
        "{error:?}"
    );
}

#[test]
fn scratch_is_clean_after_every_query() {
    let tables = tables();
    let mut scratch = QueryScratch::new(20);
    let strategies = [
        Sampling::vanilla(),
        Sampling::vanilla().with_budget(2),
        Sampling::top_k(3).with_min_active(10),
        Sampling::threshold(2).with_budget(1),
    ];
    let first: Vec<Vec<u32>> = strategies
        .iter()
        .map(|&s| sample(&tables, s, &[7], &mut scratch))
        .collect();
    let again: Vec<Vec<u32>> = strategies
        .iter()
        .map(|&s| sample(&tables, s, &[7], &mut scratch))
        .collect();
    let fresh: Vec<Vec<u32>> = strategies
        .iter()
        .map(|&s| sample(&tables, s, &[7], &mut QueryScratch::new(20)))
        .collect();
    assert_eq!(first, again);
    assert_eq!(first, fresh);
}

#[test]
fn bad_queries_are_typed_errors() {
    let tables = tables();
    let mut scratch = QueryScratch::new(20);
    let mut out = Vec::new();
    let mut r = rng(0);
    let err = tables
        .sample(
            &[1, 1, 1],
            &Sampling::vanilla(),
            &[],
            &mut r,
            &mut scratch,
            &mut out,
        )
        .unwrap_err();
    assert_eq!(
        err,
        LshError::CodeCountMismatch {
            expected: 4,
            actual: 3
        }
    );
    let err = tables
        .sample(
            &[1, 1, 1, 1],
            &Sampling::vanilla(),
            &[20],
            &mut r,
            &mut scratch,
            &mut out,
        )
        .unwrap_err();
    assert_eq!(
        err,
        LshError::IdOutOfRange {
            id: 20,
            num_ids: 20
        }
    );
    for strategy in [
        Strategy::TopK { k: 0 },
        Strategy::Threshold { min_hits: 0 },
        Strategy::Threshold { min_hits: 5 },
    ] {
        let sampling = Sampling {
            strategy,
            budget: None,
            min_active: 0,
            random_extra: 0,
        };
        assert!(matches!(
            tables.sample(
                &[1, 1, 1, 1],
                &sampling,
                &[],
                &mut r,
                &mut scratch,
                &mut out
            ),
            Err(LshError::InvalidParameter { .. })
        ));
    }
}
