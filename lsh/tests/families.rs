//! Statistical and behavioural tests of the hash families.

mod common;

use common::*;
use proptest::prelude::*;
use slide_lsh::{
    CodeBuffer, DophMinHash, FamilyKind, HashFamily, LshError, LshFamily, LshParams, Projection,
    SimHash, Vector, Wta, WtaMode,
};

const PARAMS: LshParams = LshParams {
    k: 6,
    l: 50,
    range_pow: 18,
};

fn raw(family: &dyn HashFamily, x: Vector<'_>) -> Vec<u32> {
    let mut buffer = CodeBuffer::new();
    family.raw_hashes(x, &mut buffer).unwrap().to_vec()
}

fn codes(family: &dyn HashFamily, x: Vector<'_>) -> Vec<u32> {
    let mut buffer = CodeBuffer::new();
    family.hash(x, &mut buffer).unwrap().to_vec()
}

/// Mean per-sub-hash collision rate of `pairs` dense pairs at cosine `c`, in `dim` dims.
fn dense_collision_rate(family: &dyn HashFamily, cosine: f64, pairs: usize, seed: u64) -> f64 {
    let mut rng = rng(seed);
    let dim = family.dim();
    let mut total = 0.0;
    for _ in 0..pairs {
        let x = unit_vector(&mut rng, dim);
        let y = at_cosine(&mut rng, &x, cosine);
        total += agreement(
            &raw(family, Vector::Dense(&to_f32(&x))),
            &raw(family, Vector::Dense(&to_f32(&y))),
        );
    }
    total / pairs as f64
}

/// SimHash: each bit of `sign(<r, x>)` collides with probability `1 - theta / pi`.
/// 300 pairs x 300 bits per angle: the estimate's standard error is about 0.003; the largest
/// deviations measured were 0.0029 (Gaussian) and 0.0028 (sparse, density 1/3).
#[test]
fn simhash_bit_collision_rate_is_one_minus_angle_over_pi() {
    for projection in [
        Projection::Gaussian,
        Projection::Sparse { density: 1.0 / 3.0 },
    ] {
        let family = SimHash::new(128, PARAMS, projection, 11).unwrap();
        for fraction in [0.1, 0.25, 0.5, 0.75, 0.9] {
            let theta = fraction * std::f64::consts::PI;
            let rate = dense_collision_rate(&family, theta.cos(), 300, 5);
            let expected = 1.0 - fraction;
            eprintln!(
                "{projection:?} theta/pi = {fraction}: rate {rate:.4}, expected {expected:.4}"
            );
            assert!(
                (rate - expected).abs() < 0.02,
                "{projection:?} at theta = {fraction} pi: collision rate {rate:.4}, expected {expected:.4}"
            );
        }
    }
}

/// The same law for sparse directions over a 20,000-dimensional input (stored input-major,
/// as the directions are too many to expand into a dense matrix), on sparse vectors: pairs
/// share a support of 400 coordinates and have the given cosine there. Largest deviation
/// measured: 0.0022.
#[test]
fn simhash_bit_collision_law_holds_for_wide_sparse_inputs() {
    let dim = 20_000;
    let family = SimHash::new(dim, PARAMS, Projection::Sparse { density: 1.0 / 3.0 }, 12).unwrap();
    let mut rng = rng(6);
    for fraction in [0.1, 0.25, 0.5, 0.75, 0.9] {
        let theta = fraction * std::f64::consts::PI;
        let pairs = 200;
        let mut total = 0.0;
        for _ in 0..pairs {
            let support = distinct_indices(&mut rng, dim, 400, &[]);
            let x = unit_vector(&mut rng, 400);
            let y = at_cosine(&mut rng, &x, theta.cos());
            total += agreement(
                &raw(&family, Vector::sparse(&support, &to_f32(&x)).unwrap()),
                &raw(&family, Vector::sparse(&support, &to_f32(&y)).unwrap()),
            );
        }
        let rate = total / pairs as f64;
        let expected = 1.0 - fraction;
        eprintln!("wide sparse theta/pi = {fraction}: rate {rate:.4}, expected {expected:.4}");
        assert!(
            (rate - expected).abs() < 0.02,
            "theta = {fraction} pi: {rate:.4} vs {expected:.4}"
        );
    }
}

/// WTA and DWTA are rank-based: the more similar two vectors, the more often a bin's winner
/// is the same coordinate. Measured rates (dense 128-d, bins of 8, no empty bins, so WTA and
/// DWTA agree): 0.164, 0.237, 0.333, 0.461, 0.668 at cosine 0.1 to 0.9; each level must
/// beat the previous by 0.03.
#[test]
fn wta_and_dwta_collision_rate_increases_with_cosine() {
    for mode in [WtaMode::Plain, WtaMode::Densified] {
        let family = Wta::new(128, PARAMS, 8, mode, 3).unwrap();
        let rates: Vec<f64> = [0.1, 0.3, 0.5, 0.7, 0.9]
            .iter()
            .map(|&c| dense_collision_rate(&family, c, 200, 9))
            .collect();
        eprintln!("{mode:?} dense rates at cosine 0.1..0.9: {rates:.3?}");
        for pair in rates.windows(2) {
            assert!(
                pair[1] > pair[0] + 0.03,
                "{mode:?}: rates not increasing: {rates:?}"
            );
        }
    }
}

/// Sparse pairs in 20,000 dimensions sharing a fraction of 200 positive entries: DWTA's
/// collision rate must rise with their cosine; plain WTA, whose bins are about half empty
/// here (bins of 67 coordinates, 1% density), collides spuriously on every empty pair.
/// Measured: DWTA 0.063, 0.190, 0.338, 0.545, 0.822; WTA 0.319, 0.445, 0.578, 0.732, 0.906.
#[test]
fn dwta_tracks_similarity_of_sparse_vectors_where_wta_cannot() {
    let dim = 20_000;
    let nnz = 200;
    let dwta = Wta::new(dim, PARAMS, 8, WtaMode::Densified, 4).unwrap();
    let wta = Wta::new(dim, PARAMS, 8, WtaMode::Plain, 4).unwrap();
    let mut rng = rng(21);
    let mut dwta_rates = Vec::new();
    let mut wta_rates = Vec::new();
    for shared in [0.1, 0.3, 0.5, 0.7, 0.9] {
        let (mut d_total, mut w_total) = (0.0, 0.0);
        let pairs = 100;
        for _ in 0..pairs {
            let xi = distinct_indices(&mut rng, dim, nnz, &[]);
            let xv: Vec<f32> = (0..nnz)
                .map(|_| gaussian(&mut rng).abs() as f32 + 0.01)
                .collect();
            let keep = (shared * nnz as f64) as usize;
            let mut yi = xi[..keep].to_vec();
            yi.extend(distinct_indices(&mut rng, dim, nnz - keep, &xi));
            let mut yv = xv[..keep].to_vec();
            yv.extend((keep..nnz).map(|_| gaussian(&mut rng).abs() as f32 + 0.01));
            let x = Vector::sparse(&xi, &xv).unwrap();
            let y = Vector::sparse(&yi, &yv).unwrap();
            d_total += agreement(&raw(&dwta, x), &raw(&dwta, y));
            w_total += agreement(&raw(&wta, x), &raw(&wta, y));
        }
        dwta_rates.push(d_total / pairs as f64);
        wta_rates.push(w_total / pairs as f64);
    }
    for pair in dwta_rates.windows(2) {
        assert!(
            pair[1] > pair[0] + 0.03,
            "DWTA rates not increasing: {dwta_rates:?}"
        );
    }
    eprintln!("sparse DWTA {dwta_rates:?}\nsparse WTA {wta_rates:?}");
    assert!(
        wta_rates[0] > dwta_rates[0] + 0.1,
        "empty bins should inflate WTA: {wta_rates:?}"
    );
}

/// A vector with 3 nonzeros in 100,000 dimensions: 297 of DWTA's 300 bins are empty, yet
/// every sub-hash is copied from one of the non-empty bins: codes are in range, identical
/// for dense and sparse input and for any entry order, invariant to scaling (WTA ranks),
/// and different from a vector with another support. Plain WTA gives such a vector the
/// empty code almost everywhere.
#[test]
fn dwta_gives_a_valid_code_to_a_three_nonzero_vector_in_100k_dims() {
    let dim = 100_000;
    let dwta = Wta::new(dim, PARAMS, 8, WtaMode::Densified, 8).unwrap();
    let wta = Wta::new(dim, PARAMS, 8, WtaMode::Plain, 8).unwrap();
    let indices = [17u32, 40_001, 99_998];
    let values = [0.5f32, 2.0, 1.25];
    let x = Vector::sparse(&indices, &values).unwrap();
    let sparse_codes = codes(&dwta, x);
    assert_eq!(sparse_codes.len(), PARAMS.l);
    assert!(sparse_codes.iter().all(|&c| c < 1 << PARAMS.range_pow));

    let mut dense = vec![0.0f32; dim];
    for (&i, &v) in indices.iter().zip(&values) {
        dense[i as usize] = v;
    }
    assert_eq!(codes(&dwta, Vector::Dense(&dense)), sparse_codes);
    let shuffled = Vector::sparse(&[99_998, 17, 40_001], &[1.25, 0.5, 2.0]).unwrap();
    assert_eq!(codes(&dwta, shuffled), sparse_codes);
    let scaled = Vector::sparse(&indices, &[1.0, 4.0, 2.5]).unwrap();
    assert_eq!(codes(&dwta, scaled), sparse_codes);

    // Every bin reports a winner position; positions are spread, not stuck at the empty 0.
    let raw_codes = raw(&dwta, x);
    let zero_share = raw_codes.iter().filter(|&&c| c == 0).count() as f64 / raw_codes.len() as f64;
    assert!(zero_share < 0.7, "DWTA raw codes mostly 0: {zero_share}");
    let distinct: std::collections::BTreeSet<u32> = raw_codes.iter().copied().collect();
    assert!(
        (2..=3).contains(&distinct.len()),
        "3 nonzeros give at most 3 winners: {distinct:?}"
    );
    let wta_raw = raw(&wta, x);
    let wta_zero = wta_raw.iter().filter(|&&c| c == 0).count() as f64 / wta_raw.len() as f64;
    assert!(
        wta_zero > 0.95,
        "plain WTA should mostly see empty bins: {wta_zero}"
    );

    let other = Vector::sparse(&[5, 60_000, 77_777], &[1.0, 1.0, 3.0]).unwrap();
    let other_codes = codes(&dwta, other);
    let same = other_codes
        .iter()
        .zip(&sparse_codes)
        .filter(|(a, b)| a == b)
        .count();
    assert!(
        same < PARAMS.l / 5,
        "unrelated supports share {same} of {} tables",
        PARAMS.l
    );
}

/// Densified one-permutation MinHash: each sub-hash collides with probability equal to the
/// Jaccard similarity of the two sets. 100 pairs x 300 bins per level; the largest deviation
/// measured was 0.0046.
#[test]
fn minhash_collision_rate_matches_jaccard() {
    let dim = 100_000;
    let size = 300;
    let family = DophMinHash::new(dim, PARAMS, 3, 17).unwrap();
    let mut rng = rng(33);
    for jaccard in [0.1, 0.3, 0.5, 0.7, 0.9] {
        let shared = (2.0 * size as f64 * jaccard / (1.0 + jaccard)).round() as usize;
        let exact = shared as f64 / (2 * size - shared) as f64;
        let pairs = 100;
        let mut total = 0.0;
        for _ in 0..pairs {
            let a = distinct_indices(&mut rng, dim, size, &[]);
            let mut b = a[..shared].to_vec();
            b.extend(distinct_indices(&mut rng, dim, size - shared, &a));
            let ones = vec![1.0f32; size];
            total += agreement(
                &raw(&family, Vector::sparse(&a, &ones).unwrap()),
                &raw(&family, Vector::sparse(&b, &ones).unwrap()),
            );
        }
        let rate = total / pairs as f64;
        eprintln!("Jaccard {exact:.4}: rate {rate:.4}");
        assert!(
            (rate - exact).abs() < 0.03,
            "Jaccard {exact:.3}: collision rate {rate:.4}"
        );
    }
}

fn all_kinds() -> [FamilyKind; 5] {
    [
        FamilyKind::SimHash(Projection::Sparse { density: 1.0 / 3.0 }),
        FamilyKind::SimHash(Projection::Gaussian),
        FamilyKind::Wta { bin_size: 8 },
        FamilyKind::Dwta { bin_size: 8 },
        FamilyKind::MinHash { bits: 3 },
    ]
}

#[test]
fn same_seed_same_codes_and_other_seed_other_codes() {
    let mut rng = rng(2);
    // ReLU-like: about half the entries zero, so MinHash sees a proper subset (the full set
    // hashes alike under every permutation).
    let x: Vec<f32> = to_f32(&unit_vector(&mut rng, 300))
        .iter()
        .map(|v| v.max(0.0))
        .collect();
    for kind in all_kinds() {
        let a = LshFamily::new(kind, 300, PARAMS, 1).unwrap();
        let b = LshFamily::new(kind, 300, PARAMS, 1).unwrap();
        let c = LshFamily::new(kind, 300, PARAMS, 2).unwrap();
        let ca = codes(&a, Vector::Dense(&x));
        assert_eq!(ca, codes(&b, Vector::Dense(&x)), "{kind:?}");
        let differing = ca
            .iter()
            .zip(codes(&c, Vector::Dense(&x)))
            .filter(|(p, q)| **p != *q);
        assert!(
            differing.count() > PARAMS.l / 2,
            "{kind:?}: seed barely matters"
        );
    }
}

#[test]
fn codes_fit_range_pow_when_folded() {
    // K * bits = 8 * 3 = 24 > range_pow = 12: codes are folded into 12 bits, and equal
    // sub-hashes still give equal codes.
    let params = LshParams {
        k: 8,
        l: 20,
        range_pow: 12,
    };
    let family = Wta::new(64, params, 8, WtaMode::Densified, 5).unwrap();
    let mut rng = rng(4);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let x = to_f32(&unit_vector(&mut rng, 64));
        let c = codes(&family, Vector::Dense(&x));
        assert!(c.iter().all(|&code| code < 1 << 12));
        let scaled: Vec<f32> = x.iter().map(|v| v * 3.0).collect();
        assert_eq!(codes(&family, Vector::Dense(&scaled)), c);
        seen.extend(c);
    }
    assert!(
        seen.len() > 1000,
        "folded codes should spread over buckets: {}",
        seen.len()
    );
}

#[test]
fn hashing_rejects_bad_input_with_typed_errors() {
    let family = LshFamily::new(FamilyKind::Dwta { bin_size: 8 }, 10, PARAMS, 1).unwrap();
    let mut buffer = CodeBuffer::new();
    assert_eq!(
        family
            .hash(Vector::Dense(&[0.0; 9]), &mut buffer)
            .unwrap_err(),
        LshError::DimensionMismatch {
            expected: 10,
            actual: 9
        }
    );
    assert_eq!(
        family
            .hash(
                Vector::Sparse {
                    indices: &[3, 10],
                    values: &[1.0, 1.0]
                },
                &mut buffer
            )
            .unwrap_err(),
        LshError::IndexOutOfRange { index: 10, dim: 10 }
    );
    assert_eq!(
        family
            .hash(
                Vector::Sparse {
                    indices: &[3],
                    values: &[1.0, 1.0]
                },
                &mut buffer
            )
            .unwrap_err(),
        LshError::SparseLengthMismatch {
            indices: 1,
            values: 2
        }
    );
    let mut nan = [0.0f32; 10];
    nan[4] = f32::NAN;
    assert!(matches!(
        family.hash(Vector::Dense(&nan), &mut buffer).unwrap_err(),
        LshError::NonFiniteValue { index: 4, .. }
    ));
    assert!(Vector::sparse(&[1, 2], &[1.0]).is_err());
}

#[test]
fn construction_rejects_bad_parameters() {
    let bad = |kind, dim, params| LshFamily::new(kind, dim, params, 0).unwrap_err();
    let name = |e: LshError| match e {
        LshError::InvalidParameter { name, .. } => name,
        other => panic!("unexpected error {other}"),
    };
    let gauss = FamilyKind::SimHash(Projection::Gaussian);
    assert_eq!(name(bad(gauss, 10, LshParams { k: 0, ..PARAMS })), "k");
    assert_eq!(name(bad(gauss, 10, LshParams { l: 0, ..PARAMS })), "l");
    assert_eq!(
        name(bad(
            gauss,
            10,
            LshParams {
                range_pow: 31,
                ..PARAMS
            }
        )),
        "range_pow"
    );
    assert_eq!(name(bad(gauss, 0, PARAMS)), "dim");
    let sparse = |density| FamilyKind::SimHash(Projection::Sparse { density });
    assert_eq!(name(bad(sparse(0.0), 10, PARAMS)), "density");
    assert_eq!(name(bad(sparse(f32::NAN), 10, PARAMS)), "density");
    assert_eq!(name(bad(sparse(1.5), 10, PARAMS)), "density");
    assert_eq!(
        name(bad(FamilyKind::Wta { bin_size: 6 }, 10, PARAMS)),
        "bin_size"
    );
    assert_eq!(
        name(bad(FamilyKind::Dwta { bin_size: 1 }, 10, PARAMS)),
        "bin_size"
    );
    assert_eq!(
        name(bad(FamilyKind::MinHash { bits: 0 }, 10, PARAMS)),
        "bits"
    );
    let message = bad(FamilyKind::MinHash { bits: 17 }, 10, PARAMS).to_string();
    assert_eq!(
        message,
        "invalid LSH parameter `bits` = 17: must be between 1 and 16"
    );
}

#[test]
fn a_warm_code_buffer_serves_families_of_different_sizes() {
    let small = LshFamily::new(
        FamilyKind::Dwta { bin_size: 4 },
        20,
        LshParams {
            k: 2,
            l: 3,
            range_pow: 4,
        },
        1,
    )
    .unwrap();
    let big = LshFamily::new(FamilyKind::Dwta { bin_size: 4 }, 20, PARAMS, 1).unwrap();
    let x: Vec<f32> = (0..20).map(|i| (i as f32 * 0.37).sin()).collect();
    let mut shared = CodeBuffer::new();
    let big_first = big.hash(Vector::Dense(&x), &mut shared).unwrap().to_vec();
    let small_after = small.hash(Vector::Dense(&x), &mut shared).unwrap().to_vec();
    assert_eq!(small_after, codes(&small, Vector::Dense(&x)));
    assert_eq!(
        big.hash(Vector::Dense(&x), &mut shared).unwrap(),
        &big_first[..]
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any vector hashes to the same codes whether passed dense or as its nonzero entries in
    /// any order, for every family, with few and with many sub-hashes.
    #[test]
    fn dense_and_sparse_representations_hash_alike(
        entries in proptest::collection::btree_map(0u32..500, -4.0f32..4.0, 0..60),
        reverse in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let mut dense = vec![0.0f32; 500];
        for (&i, &v) in &entries {
            dense[i as usize] = v;
        }
        let (mut indices, mut values): (Vec<u32>, Vec<f32>) = entries.into_iter().unzip();
        if reverse {
            indices.reverse();
            values.reverse();
        }
        // 30 sub-hashes, and 65 (more than two AVX-512 vectors' worth of WTA bins, plus a
        // remainder).
        for params in [LshParams { k: 3, l: 10, range_pow: 9 }, LshParams { k: 5, l: 13, range_pow: 9 }] {
            for kind in all_kinds() {
                let family = LshFamily::new(kind, 500, params, seed).unwrap();
                let from_dense = codes(&family, Vector::Dense(&dense));
                let from_sparse = codes(&family, Vector::sparse(&indices, &values).unwrap());
                prop_assert_eq!(&from_dense, &from_sparse, "{:?} {:?}", kind, params);
                prop_assert!(from_dense.iter().all(|&c| c < 1 << 9));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// `hash_rows` (WTA's 16-lane batched path, the other families' row-by-row default) gives
    /// every row of a strided matrix the codes `hash` gives it alone: rows with zeros, equal
    /// values (ties), all-zero rows, bins wider than `bin_size`, and counts that leave a
    /// partial block of lanes.
    #[test]
    fn batched_rows_hash_like_single_rows(
        count in 1usize..40,
        dim in 1usize..70,
        pad in 0usize..3,
        levels in 1u8..6,
        zero_share in 0u8..4,
        all_zero_row in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let stride = dim + pad;
        let mut rng = rng(seed);
        // Few distinct values, so bins hold ties; about zero_share quarters of them zero.
        let mut matrix: Vec<f32> = (0..count * stride)
            .map(|_| {
                if rng.random_range(0..4u8) < zero_share {
                    0.0
                } else {
                    f32::from(rng.random_range(0..levels)) - 2.0
                }
            })
            .collect();
        if all_zero_row {
            let r = count / 2;
            matrix[r * stride..r * stride + dim].fill(0.0);
        }
        // Three bins: wider than bin_size once dim passes 24.
        for params in [LshParams { k: 1, l: 3, range_pow: 6 }, LshParams { k: 2, l: 5, range_pow: 6 }, LshParams { k: 3, l: 11, range_pow: 12 }] {
            for kind in all_kinds() {
                let family = LshFamily::new(kind, dim, params, seed).unwrap();
                let mut out = vec![u32::MAX; count * params.l + 3];
                let mut buffer = CodeBuffer::new();
                family.hash_rows(&matrix, stride, count, &mut buffer, &mut out).unwrap();
                for r in 0..count {
                    let single = codes(&family, Vector::Dense(&matrix[r * stride..][..dim]));
                    prop_assert_eq!(&out[r * params.l..(r + 1) * params.l], &single[..], "{:?} {:?} row {}", kind, params, r);
                }
                prop_assert_eq!(&out[count * params.l..], &[u32::MAX; 3][..]);
                // The buffer still serves single vectors afterwards.
                let first = &matrix[..dim];
                prop_assert_eq!(family.hash(Vector::Dense(first), &mut buffer).unwrap(), &codes(&family, Vector::Dense(first))[..]);
            }
        }
    }
}

/// `hash_rows` reports the first invalid row as `hash` would, and a matrix or output too
/// short for the rows asked for.
#[test]
fn batched_rows_reject_what_single_rows_reject() {
    let params = LshParams {
        k: 2,
        l: 4,
        range_pow: 8,
    };
    for kind in all_kinds() {
        let family = LshFamily::new(kind, 6, params, 3).unwrap();
        let mut matrix = vec![0.5f32; 20 * 6];
        matrix[17 * 6 + 4] = f32::NAN;
        matrix[18 * 6 + 1] = f32::INFINITY;
        let mut out = vec![0u32; 20 * 4];
        let mut buffer = CodeBuffer::new();
        assert!(
            matches!(
                family.hash_rows(&matrix, 6, 20, &mut buffer, &mut out),
                Err(LshError::NonFiniteValue { index: 4, value }) if value.is_nan()
            ),
            "{kind:?}"
        );
        // The 17 rows before the bad one are fine.
        family
            .hash_rows(&matrix, 6, 17, &mut buffer, &mut out)
            .unwrap();
        assert!(matches!(
            family.hash_rows(&matrix[..119], 6, 20, &mut buffer, &mut out),
            Err(LshError::DimensionMismatch {
                expected: 120,
                actual: 119
            })
        ));
        assert!(matches!(
            family.hash_rows(&matrix, 5, 2, &mut buffer, &mut out),
            Err(LshError::DimensionMismatch { .. })
        ));
        assert!(matches!(
            family.hash_rows(&matrix, 6, 17, &mut buffer, &mut out[..67]),
            Err(LshError::InvalidParameter { name: "out", .. })
        ));
    }
}

/// A family kind knows its bits per code before it is built (for tuning): the same as the
/// built family's, and an error for settings out of range.
#[test]
fn bits_per_code_is_known_before_building() {
    let params = LshParams {
        k: 3,
        l: 4,
        range_pow: 8,
    };
    for (kind, bits) in [
        (FamilyKind::SimHash(Projection::Sparse { density: 0.3 }), 1),
        (FamilyKind::SimHash(Projection::Gaussian), 1),
        (FamilyKind::Wta { bin_size: 8 }, 3),
        (FamilyKind::Dwta { bin_size: 16 }, 4),
        (FamilyKind::MinHash { bits: 5 }, 5),
    ] {
        assert_eq!(kind.bits_per_code().unwrap(), bits, "{kind:?}");
        let built = LshFamily::new(kind, 64, params, 1).unwrap();
        assert_eq!(built.bits_per_code(), bits, "{kind:?}");
    }
    for bad in [
        FamilyKind::Dwta { bin_size: 3 },
        FamilyKind::MinHash { bits: 0 },
        FamilyKind::SimHash(Projection::Sparse { density: 0.0 }),
    ] {
        assert!(bad.bits_per_code().is_err(), "{bad:?}");
        assert!(bad.validate(params).is_err(), "{bad:?}");
    }
}
