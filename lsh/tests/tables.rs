//! Hash tables: bucket policies, determinism across thread counts, compaction, errors.

mod common;

use std::collections::VecDeque;

use common::*;
use proptest::prelude::*;
use slide_lsh::{
    BucketPolicy, FamilyKind, HashTables, LshError, LshFamily, LshParams, TablesArray,
    TablesConfig, Vector,
};

fn config(
    l: usize,
    range_pow: u32,
    capacity: usize,
    policy: BucketPolicy,
    num_ids: usize,
) -> TablesConfig {
    TablesConfig {
        l,
        range_pow,
        bucket_capacity: capacity,
        policy,
        num_ids,
        seed: 99,
    }
}

fn sorted(ids: &[u32]) -> Vec<u32> {
    let mut v = ids.to_vec();
    v.sort_unstable();
    v
}

#[test]
fn fifo_keeps_the_newest_ids() {
    let mut tables = HashTables::new(config(3, 4, 16, BucketPolicy::Fifo, 1000)).unwrap();
    for id in 0..1000 {
        tables.insert(id, &[5, 5, (id % 2) * 7]).unwrap();
    }
    assert_eq!(sorted(tables.bucket(0, 5)), (984..1000).collect::<Vec<_>>());
    assert_eq!(sorted(tables.bucket(1, 5)), (984..1000).collect::<Vec<_>>());
    let evens: Vec<u32> = (968..1000).step_by(2).collect();
    assert_eq!(sorted(tables.bucket(2, 0)), evens);
    assert!(tables.bucket(0, 4).is_empty());
}

/// Reservoir sampling keeps each of the `n` ids offered to a full bucket with probability
/// `capacity / n`. 4,000 rounds of 100 ids into a bucket of 10: every id's retention count
/// should be Binomial(4000, 0.1). The chi-square statistic over the 100 ids (99 degrees of
/// freedom) stays below 148.2 with probability 0.999 under uniformity; FIFO's choice (always
/// the last 10) would score 36,000.
#[test]
fn reservoir_keeps_a_uniform_sample() {
    let n = 100u32;
    let rounds = 4000;
    let mut tables =
        HashTables::new(config(1, 1, 10, BucketPolicy::Reservoir, n as usize)).unwrap();
    let mut kept = vec![0u32; n as usize];
    for _ in 0..rounds {
        tables.clear();
        for id in 0..n {
            tables.insert(id, &[1]).unwrap();
        }
        let bucket = tables.bucket(0, 1);
        assert_eq!(bucket.len(), 10);
        assert_eq!(
            sorted(bucket).windows(2).filter(|w| w[0] == w[1]).count(),
            0
        );
        for &id in bucket {
            kept[id as usize] += 1;
        }
    }
    let expected = rounds as f64 * 10.0 / n as f64;
    let chi_square: f64 = kept
        .iter()
        .map(|&k| (k as f64 - expected).powi(2) / expected)
        .sum();
    eprintln!("reservoir chi-square over {n} ids: {chi_square:.1}");
    assert!(
        chi_square < 148.2,
        "chi-square {chi_square:.1}, kept {kept:?}"
    );
}

fn rebuilt_with_threads(threads: usize, policy: BucketPolicy) -> HashTables {
    let (n, dim) = (20_000usize, 64usize);
    let mut rng = rng(7);
    let rows: Vec<f32> = (0..n)
        .flat_map(|_| to_f32(&unit_vector(&mut rng, dim)))
        .collect();
    let params = LshParams {
        k: 4,
        l: 12,
        range_pow: 12,
    };
    let family = LshFamily::new(FamilyKind::Dwta { bin_size: 8 }, dim, params, 3).unwrap();
    // Capacity 4 against about 5 ids per bucket: the policy makes many choices.
    let mut tables = HashTables::new(TablesConfig::for_family(params, n, 4, policy, 17)).unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| {
        tables.rebuild_dense(&family, &rows, dim).unwrap();
        // A second rebuild reuses the buffers and draws new reservoir choices.
        tables.rebuild_dense(&family, &rows, dim).unwrap();
        // Parallel batch inserts on top: the first 5,000 rows once more, in reverse order.
        let mut buffer = slide_lsh::CodeBuffer::new();
        let ids: Vec<u32> = (0..5_000u32).rev().collect();
        let codes: Vec<u32> = ids
            .iter()
            .flat_map(|&id| {
                let row = Vector::Dense(&rows[id as usize * dim..][..dim]);
                slide_lsh::HashFamily::hash(&family, row, &mut buffer)
                    .unwrap()
                    .to_vec()
            })
            .collect();
        tables.insert_many(&ids, &codes).unwrap();
    });
    tables
}

#[test]
fn parallel_rebuild_and_batch_insert_are_identical_with_one_and_two_threads() {
    for policy in [BucketPolicy::Fifo, BucketPolicy::Reservoir] {
        let one = rebuilt_with_threads(1, policy);
        let two = rebuilt_with_threads(2, policy);
        let mut stored = 0;
        for t in 0..one.num_tables() {
            for code in 0..1 << 12 {
                assert_eq!(
                    one.bucket(t, code),
                    two.bucket(t, code),
                    "{policy:?} table {t} bucket {code}"
                );
                stored += one.bucket(t, code).len();
            }
        }
        assert_eq!(stored, one.stats().stored_ids);
        // 12 tables x 4,096 buckets x at most 4 ids, most buckets full.
        assert!(
            stored > 12 * 4096 * 3,
            "{policy:?}: only {stored} ids stored"
        );
    }
}

#[test]
fn rebuild_equals_inserting_every_row_in_id_order() {
    for policy in [BucketPolicy::Fifo, BucketPolicy::Reservoir] {
        rebuild_equals_inserting_in_id_order(policy);
    }
}

fn rebuild_equals_inserting_in_id_order(policy: BucketPolicy) {
    let (n, dim) = (3_000usize, 32usize);
    let mut rng = rng(8);
    let rows: Vec<f32> = (0..n)
        .flat_map(|_| to_f32(&unit_vector(&mut rng, dim)))
        .collect();
    let params = LshParams {
        k: 3,
        l: 6,
        range_pow: 9,
    };
    let family = LshFamily::new(FamilyKind::Wta { bin_size: 8 }, dim, params, 1).unwrap();
    let cfg = TablesConfig::for_family(params, n, 8, policy, 2);
    let mut rebuilt = HashTables::new(cfg).unwrap();
    rebuilt.rebuild_dense(&family, &rows, dim).unwrap();
    // A rebuild keeps a uniform sample of a full bucket whatever the policy, as reservoir
    // inserts do.
    let reservoir = TablesConfig {
        policy: BucketPolicy::Reservoir,
        ..cfg
    };
    let mut inserted = HashTables::new(reservoir).unwrap();
    // A rebuild starts with a clear, which moves the reservoir choices to the next generation.
    inserted.clear();
    let mut buffer = slide_lsh::CodeBuffer::new();
    let mut all_codes = Vec::new();
    for id in 0..n {
        let codes = slide_lsh::HashFamily::hash(
            &family,
            Vector::Dense(&rows[id * dim..][..dim]),
            &mut buffer,
        )
        .unwrap();
        all_codes.extend_from_slice(codes);
    }
    let ids: Vec<u32> = (0..n as u32).collect();
    inserted.insert_many(&ids, &all_codes).unwrap();
    for t in 0..params.l {
        for code in 0..1 << params.range_pow {
            assert_eq!(
                rebuilt.bucket(t, code),
                inserted.bucket(t, code),
                "{policy:?}"
            );
        }
    }
    // Rows the caller writes out (padded storage here, any format in general) give the
    // same tables; `fill` is asked for every row once, in whole rows.
    let stride = dim + 5;
    let padded: Vec<f32> = rows
        .chunks_exact(dim)
        .flat_map(|r| r.iter().copied().chain([9.0; 5]))
        .collect();
    let mut filled = HashTables::new(cfg).unwrap();
    let asked = std::sync::atomic::AtomicUsize::new(0);
    filled
        .rebuild_filled(&family, |first, out| {
            asked.fetch_add(out.len() / dim, std::sync::atomic::Ordering::Relaxed);
            for (r, out) in out.chunks_exact_mut(dim).enumerate() {
                out.copy_from_slice(&padded[(first + r) * stride..][..dim]);
            }
        })
        .unwrap();
    assert_eq!(asked.into_inner(), n);
    for t in 0..params.l {
        for code in 0..1 << params.range_pow {
            assert_eq!(filled.bucket(t, code), rebuilt.bucket(t, code));
        }
    }
}

/// Rows hashed again alone (the rest kept from the last rebuild) give exactly the tables of
/// a full rebuild over every row, with either policy (a small capacity, so that the
/// reservoir's choices count), and `fill` is asked for the changed rows only.
#[test]
fn rebuilding_the_changed_rows_equals_a_full_rebuild() {
    let (n, dim) = (3_000usize, 32usize);
    let params = LshParams {
        k: 2,
        l: 6,
        range_pow: 6,
    };
    let family = LshFamily::new(FamilyKind::Dwta { bin_size: 8 }, dim, params, 4).unwrap();
    for policy in [BucketPolicy::Fifo, BucketPolicy::Reservoir] {
        let mut rng = rng(12);
        let mut rows: Vec<f32> = (0..n)
            .flat_map(|_| to_f32(&unit_vector(&mut rng, dim)))
            .collect();
        let cfg = TablesConfig::for_family(params, n, 24, policy, 5);
        let (mut full, mut partial) =
            (HashTables::new(cfg).unwrap(), HashTables::new(cfg).unwrap());
        assert!(!partial.codes_kept());
        full.rebuild_dense(&family, &rows, dim).unwrap();
        partial.rebuild_dense(&family, &rows, dim).unwrap();
        assert!(partial.codes_kept());
        let mut first = HashTables::new(cfg).unwrap();
        first.rebuild_dense(&family, &rows, dim).unwrap();
        // Every 7th row, all of the fourth block of 256 ids, and the last id (in the last,
        // partial block) move.
        let changed: Vec<u32> = (0..n as u32)
            .filter(|&id| id % 7 == 0 || (768..1024).contains(&id) || id == n as u32 - 1)
            .collect();
        for &id in &changed {
            let row = to_f32(&unit_vector(&mut rng, dim));
            rows[id as usize * dim..][..dim].copy_from_slice(&row);
        }
        full.rebuild_dense(&family, &rows, dim).unwrap();
        let asked = std::sync::Mutex::new(Vec::new());
        partial
            .rebuild_changed_filled(&family, &changed, |ids, out| {
                asked.lock().unwrap().extend_from_slice(ids);
                for (&id, out) in ids.iter().zip(out.chunks_exact_mut(dim)) {
                    out.copy_from_slice(&rows[id as usize * dim..][..dim]);
                }
            })
            .unwrap();
        assert_eq!(sorted(&asked.into_inner().unwrap()), changed);
        assert_eq!(partial.export_state(), full.export_state(), "{policy:?}");
        // The changed rows did move buckets: the comparison above is not of unchanged tables.
        let moved = (0..params.l)
            .flat_map(|t| (0..1u32 << params.range_pow).map(move |c| (t, c)))
            .any(|(t, c)| partial.bucket(t, c) != first.bucket(t, c));
        assert!(moved);
        // With nothing changed, the kept codes alone make the tables.
        partial
            .rebuild_changed_filled(&family, &[], |_, _| unreachable!("nothing changed"))
            .unwrap();
        full.rebuild_dense(&family, &rows, dim).unwrap();
        assert_eq!(partial.export_state(), full.export_state());
    }
}

/// A partial rebuild needs a full one's codes, sorted ids in range and rows the family
/// accepts; a row it rejects leaves the tables as they were and no codes kept.
#[test]
fn rebuilding_changed_rows_checks_its_input() {
    let (n, dim) = (600usize, 16usize);
    let params = LshParams {
        k: 2,
        l: 3,
        range_pow: 5,
    };
    let family = LshFamily::new(FamilyKind::Dwta { bin_size: 4 }, dim, params, 1).unwrap();
    let mut rng = rng(3);
    let rows: Vec<f32> = (0..n)
        .flat_map(|_| to_f32(&unit_vector(&mut rng, dim)))
        .collect();
    let cfg = TablesConfig::for_family(params, n, 32, BucketPolicy::Fifo, 1);
    let mut tables = HashTables::new(cfg).unwrap();
    let copy = |ids: &[u32], out: &mut [f32]| {
        for (&id, out) in ids.iter().zip(out.chunks_exact_mut(dim)) {
            out.copy_from_slice(&rows[id as usize * dim..][..dim]);
        }
    };
    assert!(matches!(
        tables.rebuild_changed_filled(&family, &[1], copy),
        Err(LshError::InvalidParameter { .. })
    ));
    tables.rebuild_dense(&family, &rows, dim).unwrap();
    let built = tables.export_state();
    assert!(matches!(
        tables.rebuild_changed_filled(&family, &[5, 3], copy),
        Err(LshError::InvalidParameter { .. })
    ));
    assert!(matches!(
        tables.rebuild_changed_filled(&family, &[2, 2], copy),
        Err(LshError::InvalidParameter { .. })
    ));
    assert_eq!(
        tables.rebuild_changed_filled(&family, &[4, n as u32], copy),
        Err(LshError::IdOutOfRange {
            id: n as u32,
            num_ids: n
        })
    );
    assert!(matches!(
        tables.rebuild_changed_filled(&family, &[4, 300], |_, out| out.fill(f32::NAN)),
        Err(LshError::NonFiniteValue { .. })
    ));
    assert!(!tables.codes_kept());
    assert_eq!(tables.export_state(), built);
    tables.rebuild_dense(&family, &rows, dim).unwrap();
    // Restored tables did not come from kept codes.
    let mut restored = HashTables::new(cfg).unwrap();
    restored.import_state(&tables.export_state()).unwrap();
    assert!(!restored.codes_kept());
    assert!(tables.codes_kept());
}

#[test]
fn memory_follows_stored_ids_not_bucket_capacity() {
    // 8 tables of 2^16 buckets with capacity 128: fixed per-bucket arrays would take
    // 8 * 65536 * 128 * 4 bytes = 268 MB. 50,000 ids need 8 * 50,000 * 4 = 1.6 MB of ids plus
    // 8 * 65536 * 12 bytes = 6.3 MB of bucket headers.
    let (n, dim) = (50_000usize, 16usize);
    let rows = {
        let mut rng = rng(9);
        (0..n)
            .flat_map(|_| to_f32(&unit_vector(&mut rng, dim)))
            .collect::<Vec<_>>()
    };
    let params = LshParams {
        k: 16,
        l: 8,
        range_pow: 16,
    };
    let family = LshFamily::new(
        FamilyKind::SimHash(slide_lsh::Projection::Gaussian),
        dim,
        params,
        1,
    )
    .unwrap();
    let mut tables = HashTables::new(TablesConfig::for_family(
        params,
        n,
        128,
        BucketPolicy::Fifo,
        1,
    ))
    .unwrap();
    tables.rebuild_dense(&family, &rows, dim).unwrap();
    let stats = tables.stats();
    assert_eq!(stats.stored_ids, 8 * n);
    let headers = 8 * (1 << 16) * 12;
    // A rebuild leaves exact stores; the only extra is the codes of every id (8 per id, ids
    // rounded up to blocks of 256), kept for the next rebuild.
    let bound = headers + 8 * n * 4 + 8 * n.div_ceil(256) * 256 * 4;
    eprintln!("memory {} bytes, bound {bound}", stats.memory_bytes);
    assert!(stats.memory_bytes <= bound, "{stats:?}");
}

#[test]
fn bad_ids_codes_and_families_are_typed_errors() {
    let mut tables = HashTables::new(config(2, 4, 8, BucketPolicy::Fifo, 10)).unwrap();
    assert_eq!(
        tables.insert(10, &[0, 0]).unwrap_err(),
        LshError::IdOutOfRange {
            id: 10,
            num_ids: 10
        }
    );
    assert_eq!(
        tables.insert(1, &[0]).unwrap_err(),
        LshError::CodeCountMismatch {
            expected: 2,
            actual: 1
        }
    );
    assert_eq!(
        tables.insert(1, &[0, 16]).unwrap_err(),
        LshError::CodeOutOfRange {
            code: 16,
            table: 1,
            range_pow: 4
        }
    );
    assert_eq!(
        tables.insert_many(&[1, 2], &[0, 0, 0]).unwrap_err(),
        LshError::CodeCountMismatch {
            expected: 4,
            actual: 3
        }
    );
    let family = LshFamily::new(
        FamilyKind::Dwta { bin_size: 8 },
        4,
        LshParams {
            k: 1,
            l: 3,
            range_pow: 4,
        },
        0,
    )
    .unwrap();
    assert!(matches!(
        tables.rebuild_dense(&family, &[0.0; 40], 4).unwrap_err(),
        LshError::FamilyMismatch {
            family_tables: 3,
            tables: 2,
            ..
        }
    ));
    let family = LshFamily::new(
        FamilyKind::Dwta { bin_size: 8 },
        4,
        LshParams {
            k: 1,
            l: 2,
            range_pow: 4,
        },
        0,
    )
    .unwrap();
    assert!(matches!(
        tables.rebuild_dense(&family, &[0.0; 39], 4).unwrap_err(),
        LshError::DimensionMismatch {
            expected: 40,
            actual: 39
        }
    ));
    // Nothing was inserted by the failed calls.
    assert_eq!(tables.stats().stored_ids, 0);

    let bad = |c: TablesConfig| match HashTables::new(c).unwrap_err() {
        LshError::InvalidParameter { name, .. } => name,
        other => panic!("{other}"),
    };
    assert_eq!(bad(config(0, 4, 8, BucketPolicy::Fifo, 10)), "l");
    assert_eq!(bad(config(2, 0, 8, BucketPolicy::Fifo, 10)), "range_pow");
    assert_eq!(
        bad(config(2, 4, 0, BucketPolicy::Fifo, 10)),
        "bucket_capacity"
    );
    assert_eq!(
        bad(config(2, 4, 70_000, BucketPolicy::Fifo, 10)),
        "bucket_capacity"
    );
    assert_eq!(
        bad(config(2, 30, 128, BucketPolicy::Fifo, 10)),
        "bucket_capacity"
    );
    assert_eq!(bad(config(2, 4, 8, BucketPolicy::Fifo, 0)), "num_ids");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any sequence of single inserts, clears included, leaves each bucket holding exactly
    /// the last `capacity` ids it was offered (a model of FIFO buckets), through every
    /// segment move and compaction.
    #[test]
    fn fifo_tables_match_a_queue_model(
        capacity in 1usize..12,
        ops in proptest::collection::vec((0u32..400, 0u32..8, 0u32..8, 0u8..50), 1..3000),
    ) {
        let mut tables = HashTables::new(config(2, 3, capacity, BucketPolicy::Fifo, 400)).unwrap();
        let mut model = vec![vec![VecDeque::new(); 8]; 2];
        for (id, a, b, clear) in ops {
            if clear == 0 {
                tables.clear();
                model.iter_mut().flatten().for_each(VecDeque::clear);
                continue;
            }
            tables.insert(id, &[a, b]).unwrap();
            for (t, code) in [(0, a), (1, b)] {
                let q: &mut VecDeque<u32> = &mut model[t][code as usize];
                q.push_back(id);
                if q.len() > capacity {
                    q.pop_front();
                }
            }
        }
        for (t, buckets) in model.iter().enumerate() {
            for (code, queue) in buckets.iter().enumerate() {
                let expected: Vec<u32> = queue.iter().copied().collect();
                prop_assert_eq!(sorted(tables.bucket(t, code as u32)), sorted(&expected));
            }
        }
    }
}

/// Exported tables, imported into fresh ones, answer every bucket alike, and the next
/// rebuild (reservoir choices included) is the same for both.
#[test]
fn exported_state_restores_identical_tables() {
    let (n, dim) = (3_000usize, 16usize);
    let mut rng = rng(31);
    let rows: Vec<f32> = (0..n)
        .flat_map(|_| to_f32(&unit_vector(&mut rng, dim)))
        .collect();
    let params = LshParams {
        k: 2,
        l: 5,
        range_pow: 6,
    };
    let family = LshFamily::new(FamilyKind::Dwta { bin_size: 8 }, dim, params, 2).unwrap();
    let cfg = TablesConfig::for_family(params, n, 16, BucketPolicy::Reservoir, 3);
    let mut original = HashTables::new(cfg).unwrap();
    original.rebuild_dense(&family, &rows, dim).unwrap();
    original.insert(7, &[1, 2, 3, 4, 5]).unwrap();
    let state = original.export_state();
    let mut restored = HashTables::new(cfg).unwrap();
    restored.import_state(&state).unwrap();
    assert_eq!(restored.export_state(), state);
    for t in 0..5 {
        for code in 0..64 {
            assert_eq!(original.bucket(t, code), restored.bucket(t, code));
        }
    }
    original.rebuild_dense(&family, &rows, dim).unwrap();
    restored.rebuild_dense(&family, &rows, dim).unwrap();
    assert_eq!(original.export_state(), restored.export_state());

    let mut broken = state.clone();
    broken.store[0] = n as u32;
    assert_eq!(
        restored.import_state(&broken).unwrap_err(),
        LshError::IdOutOfRange {
            id: n as u32,
            num_ids: n
        }
    );
    let mut broken = state.clone();
    broken.buckets[2] = 17; // len above the capacity of 16
    assert!(matches!(
        restored.import_state(&broken),
        Err(LshError::InvalidParameter { .. })
    ));
    let mut broken = state;
    broken.buckets.pop();
    assert!(matches!(
        restored.import_state(&broken),
        Err(LshError::InvalidParameter { .. })
    ));
}

/// The streamed state is the exported state's bytes; reading it back in odd-sized pieces
/// restores the same tables; a store id out of range leaves the tables empty.
#[test]
fn streamed_state_matches_the_exported_arrays() {
    let (n, dim) = (2_000usize, 16usize);
    let mut rng = rng(32);
    let rows: Vec<f32> = (0..n)
        .flat_map(|_| to_f32(&unit_vector(&mut rng, dim)))
        .collect();
    let params = LshParams {
        k: 2,
        l: 4,
        range_pow: 6,
    };
    let family = LshFamily::new(FamilyKind::Dwta { bin_size: 8 }, dim, params, 2).unwrap();
    let cfg = TablesConfig::for_family(params, n, 16, BucketPolicy::Reservoir, 3);
    let mut original = HashTables::new(cfg).unwrap();
    original.rebuild_dense(&family, &rows, dim).unwrap();
    let state = original.export_state();
    let streamed: Vec<Vec<u8>> = TablesArray::ALL
        .iter()
        .map(|&array| {
            let mut bytes = Vec::new();
            original
                .write_state(array, &mut |piece: &[u8]| -> Result<(), ()> {
                    bytes.extend_from_slice(piece);
                    Ok(())
                })
                .unwrap();
            assert_eq!(bytes.len(), original.state_len(array) * array.elem_bytes());
            bytes
        })
        .collect();
    let le32 = |v: &[u32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    assert_eq!(streamed[0], le32(&state.buckets));
    assert_eq!(streamed[1], le32(&state.store));
    let offsets: Vec<u8> = state
        .store_offsets
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    assert_eq!(streamed[2], offsets);

    let lens = TablesArray::ALL.map(|a| original.state_len(a));
    let mut reads = 0;
    let mut restored = HashTables::new(cfg).unwrap();
    restored
        .read_state(
            state.generation,
            lens,
            &mut |array: TablesArray, first: usize, out: &mut [u8]| -> Result<(), LshError> {
                reads += 1;
                let from = first * array.elem_bytes();
                let index = TablesArray::ALL.iter().position(|&a| a == array).unwrap();
                out.copy_from_slice(&streamed[index][from..from + out.len()]);
                Ok(())
            },
        )
        .unwrap();
    // One read of the offsets, then a store and a bucket read per table.
    assert_eq!(reads, 1 + 2 * 4);
    assert_eq!(restored.export_state(), state);

    let mut broken = state.clone();
    broken.store[5] = n as u32;
    assert!(restored.import_state(&broken).is_err());
    assert_eq!(restored.state_len(TablesArray::Store), 0);
    assert!((0..64).all(|code| restored.bucket(0, code).is_empty()));
}

/// A rebuild into a crowded bucket keeps a uniform sample of its ids under either policy.
/// Before the fix, a FIFO rebuild replayed inserts in id order and kept only the highest
/// `capacity` ids (here 1,900..2,000), so the lower ids were never retrieved.
#[test]
fn rebuild_keeps_a_uniform_sample_of_a_crowded_bucket() {
    let (n, dim, capacity) = (2_000usize, 16usize, 100usize);
    // Identical rows share every code: one bucket per table is offered all 2,000 ids.
    let rows = vec![1.0f32; n * dim];
    let params = LshParams {
        k: 2,
        l: 4,
        range_pow: 6,
    };
    let family = LshFamily::new(FamilyKind::Wta { bin_size: 8 }, dim, params, 3).unwrap();
    for policy in [BucketPolicy::Fifo, BucketPolicy::Reservoir] {
        let cfg = TablesConfig::for_family(params, n, capacity, policy, 5);
        let mut tables = HashTables::new(cfg).unwrap();
        tables.rebuild_dense(&family, &rows, dim).unwrap();
        let mut buffer = slide_lsh::CodeBuffer::new();
        let codes = slide_lsh::HashFamily::hash(&family, Vector::Dense(&rows[..dim]), &mut buffer)
            .unwrap()
            .to_vec();
        let stats = tables.stats();
        assert_eq!(stats.dropped_ids, params.l * (n - capacity), "{policy:?}");
        for (t, &code) in codes.iter().enumerate() {
            let bucket = tables.bucket(t, code);
            assert_eq!(bucket.len(), capacity);
            // Hypergeometric: 50 expected below id 1,000, standard deviation 4.9.
            let low = bucket.iter().filter(|&&id| id < 1_000).count();
            assert!(
                (30..=70).contains(&low),
                "{policy:?} table {t}: {low} low ids"
            );
        }
    }
}
