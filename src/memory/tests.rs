use super::*;
use crate::data::SparseExamples;
use crate::stats::EvalStats;

/// Three training samples over 6 features and 4 labels.
fn three_samples() -> SparseExamples {
    let mut train = SparseExamples::new();
    train.push(&[0, 1, 2], &[1.0, 1.0, 1.0], &[0]);
    train.push(&[2, 3], &[1.0, 2.0], &[1, 2]);
    train.push(&[4, 5], &[3.0, 4.0], &[3]);
    train
}

fn plain(neighbours: usize) -> MemoryConfig {
    MemoryConfig {
        neighbours,
        power: 1.0,
        idf: false,
        centroids: false,
        ..MemoryConfig::default()
    }
}

/// Without IDF a unit is its sample's input over its length: the query (1, 1, 0, ...) has
/// cosine 2 / (sqrt(2) sqrt(3)) = 0.8165 with sample 0, 1 / (sqrt(2) sqrt(5)) = 0.3162 with
/// sample 1 (feature 2 only) and 0 with sample 2, which shares no feature and is not active.
#[test]
fn neighbours_are_the_samples_with_the_largest_cosine() {
    let memory = Memory::build(&three_samples(), 6, 4, plain(3)).unwrap();
    let query = Vector::Sparse {
        indices: &[1, 2],
        values: &[5.0, 5.0],
    };
    let found = memory
        .neighbours(query, 0, &mut MemoryScratch::new())
        .unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].0, 0);
    assert!((found[0].1 - 2.0 / (2f32.sqrt() * 3f32.sqrt())).abs() < 1e-6);
    assert_eq!(found[1].0, 1);
    assert!((found[1].1 - 1.0 / (2f32.sqrt() * 5f32.sqrt())).abs() < 1e-6);
}

/// Each active unit adds cosine^power to each of its labels; with 1 neighbour only the
/// nearest sample's label is voted for.
#[test]
fn labels_are_ranked_by_the_votes_of_the_active_units() {
    let train = three_samples();
    let query = Vector::Sparse {
        indices: &[2, 3],
        values: &[1.0, 1.0],
    };
    // Cosines: sample 1: (1 + 2) / (sqrt(2) sqrt(5)) = 0.9487; sample 0: 1 / (sqrt(2) sqrt(3)) = 0.4082.
    let memory = Memory::build(&train, 6, 4, plain(2)).unwrap();
    let top = memory
        .predict_one(query, 0, &mut MemoryScratch::new(), Search::Exact)
        .unwrap();
    let ids: Vec<u32> = top.iter().map(|p| p.0).collect();
    assert_eq!(ids, [1, 2, 0], "labels 1 and 2 tie and go lower id first");
    assert!((top[0].1 - 3.0 / 10f32.sqrt()).abs() < 1e-6);
    assert!((top[2].1 - 1.0 / 6f32.sqrt()).abs() < 1e-6);
    let squared = MemoryConfig {
        power: 2.0,
        ..plain(2)
    };
    let memory = Memory::build(&train, 6, 4, squared).unwrap();
    let top = memory
        .predict_one(query, 0, &mut MemoryScratch::new(), Search::Exact)
        .unwrap();
    assert!((top[0].1 - 0.9).abs() < 1e-6, "0.9487^2 = 9 / 10");
    let nearest_only = Memory::build(&train, 6, 4, plain(1)).unwrap();
    let top = nearest_only
        .predict_one(query, 0, &mut MemoryScratch::new(), Search::Exact)
        .unwrap();
    assert_eq!(top.len(), 2);
}

/// IDF: a feature in every sample weighs ln(4 / 4) = 0 and cannot make two samples alike;
/// one in a single sample weighs ln(4 / 2) = ln 2.
#[test]
fn idf_ignores_a_feature_every_sample_has() {
    let mut train = SparseExamples::new();
    train.push(&[0, 1], &[1.0, 1.0], &[0]);
    train.push(&[0, 2], &[1.0, 1.0], &[1]);
    train.push(&[0, 3], &[1.0, 1.0], &[2]);
    let memory = Memory::build(&train, 4, 3, MemoryConfig::default()).unwrap();
    let mut scratch = MemoryScratch::new();
    let only_common = Vector::Sparse {
        indices: &[0],
        values: &[1.0],
    };
    assert!(
        memory
            .neighbours(only_common, 0, &mut scratch)
            .unwrap()
            .is_empty()
    );
    let common_and_rare = Vector::Sparse {
        indices: &[0, 2],
        values: &[1.0, 1.0],
    };
    let found = memory.neighbours(common_and_rare, 0, &mut scratch).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, 1);
    assert!(
        (found[0].1 - 1.0).abs() < 1e-6,
        "only the rare feature counts"
    );
}

/// A batch's answers and P@k match the one-sample answers; the scratch is reused across
/// queries without leaking one query's scores into the next.
#[test]
fn evaluation_counts_hits_like_the_single_answers() {
    let train = three_samples();
    let memory = Memory::build(&train, 6, 4, plain(1)).unwrap();
    let stats = memory.evaluate(&train, &[0, 1, 2], Search::Exact).unwrap();
    assert_eq!(stats.samples, 3);
    assert!(
        (stats.precision_at_1 - 1.0).abs() < 1e-12,
        "each sample finds itself"
    );
    // Samples 0 and 2 have 1 label among their 5 answers, sample 1 has 2: (1 + 2 + 1) / 15.
    assert!((stats.precision_at_5 - 4.0 / 15.0).abs() < 1e-12);
    let batch = memory.predict(&train, &[2, 0, 1], Search::Exact).unwrap();
    let mut scratch = MemoryScratch::new();
    for (answer, s) in batch.iter().zip([2, 0, 1]) {
        assert_eq!(
            *answer,
            memory
                .predict_one(train.input(s), s, &mut scratch, Search::Exact)
                .unwrap()
        );
    }
}

#[test]
fn bad_input_and_settings_are_named() {
    let train = three_samples();
    let err = Memory::build(&train, 5, 4, plain(1))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sample 2") && err.contains("expects 5"),
        "{err}"
    );
    let err = Memory::build(&train, 6, 3, plain(1))
        .unwrap_err()
        .to_string();
    assert!(err.contains("label 3"), "{err}");
    let err = Memory::build(&train, 6, 4, plain(0))
        .unwrap_err()
        .to_string();
    assert!(err.contains("neighbours"), "{err}");
    let nan = MemoryConfig {
        power: f32::NAN,
        ..plain(1)
    };
    assert!(Memory::build(&train, 6, 4, nan).is_err());
    for (budget, rescore, named) in [(0, None, "lsh.budget"), (8, Some(0), "lsh.rescore")] {
        let lsh = MemoryConfig {
            lsh: Some(MemoryLsh {
                family: slide_lsh::FamilyKind::WeightedMinHash,
                budget,
                rescore,
            }),
            ..plain(1)
        };
        let err = Memory::build(&train, 6, 4, lsh).unwrap_err().to_string();
        assert!(err.contains(named), "{err}");
    }
    let memory = Memory::build(&train, 6, 4, plain(1)).unwrap();
    let wide = Vector::Sparse {
        indices: &[9],
        values: &[1.0],
    };
    let err = memory
        .predict_one(wide, 7, &mut MemoryScratch::new(), Search::Exact)
        .unwrap_err()
        .to_string();
    assert!(err.contains("sample 7"), "{err}");
    let empty = SparseExamples::new();
    assert!(Memory::build(&empty, 6, 4, plain(1)).is_err());
}

/// Saved arrays load into the same memory; a damaged array is an error, not a panic.
#[test]
fn arrays_round_trip_and_damage_is_refused() {
    let memory = Memory::build(&three_samples(), 6, 4, MemoryConfig::default()).unwrap();
    let a = memory.arrays();
    let owned = MemoryArrays {
        feature_weights: a.feature_weights.to_vec(),
        unit_offsets: a.unit_offsets.clone(),
        unit_features: a.unit_features.to_vec(),
        unit_values: a.unit_values.to_vec(),
        label_offsets: a.label_offsets.clone(),
        labels: a.labels.to_vec(),
    };
    let loaded = Memory::from_arrays(MemoryConfig::default(), 6, 4, owned.clone()).unwrap();
    assert_eq!(loaded, memory);
    let mut wrong_label = owned.clone();
    wrong_label.labels[0] = 4;
    let err = Memory::from_arrays(MemoryConfig::default(), 6, 4, wrong_label).unwrap_err();
    assert!(err.to_string().contains("labels"), "{err}");
    let mut short = owned;
    short.unit_offsets.pop();
    assert!(Memory::from_arrays(MemoryConfig::default(), 6, 4, short).is_err());
}

/// With centroids a voted label scores the cosine of the query with its centroid plus
/// `vote_weight` times its votes. Label 0 is carried by samples 0 and 2, whose unit rows are
/// (1, 1, 0, 0) / sqrt(2) and (0, 1, 1, 0) / sqrt(2): their sum (1, 2, 1, 0) / sqrt(2) at unit
/// length is (1, 2, 1, 0) / sqrt(6). The query (0, 1, 0, 0) has cosine 1 / sqrt(2) with both
/// samples, so label 0 gets votes 2 / sqrt(2) and scores 2 / sqrt(6) + 0.5 * sqrt(2); label 1
/// (sample 2 only) gets 1 / sqrt(2) and scores 1 / sqrt(2) + 0.5 / sqrt(2). A cap of 1 feature
/// keeps only the centroid's 2 / sqrt(6).
#[test]
fn centroids_score_the_voted_labels() {
    let mut train = SparseExamples::new();
    train.push(&[0, 1], &[1.0, 1.0], &[0]);
    train.push(&[3], &[1.0], &[2]);
    train.push(&[1, 2], &[1.0, 1.0], &[0, 1]);
    let with_centroids = |cap| MemoryConfig {
        neighbours: 3,
        idf: false,
        centroids: true,
        vote_weight: 0.5,
        centroid_features: cap,
        ..MemoryConfig::default()
    };
    let query = Vector::Sparse {
        indices: &[1],
        values: &[1.0],
    };
    let memory = Memory::build(&train, 4, 3, with_centroids(0)).unwrap();
    let top = memory
        .predict_one(query, 0, &mut MemoryScratch::new(), Search::Exact)
        .unwrap();
    let (r2, r6) = (2f32.sqrt(), 6f32.sqrt());
    assert_eq!(top.len(), 2, "label 2's sample shares no feature");
    assert_eq!(top[0].0, 0);
    assert!((top[0].1 - (2.0 / r6 + 0.5 * r2)).abs() < 1e-6, "{top:?}");
    assert_eq!(top[1].0, 1);
    assert!((top[1].1 - 1.5 / r2).abs() < 1e-6, "{top:?}");
    let capped = Memory::build(&train, 4, 3, with_centroids(1)).unwrap();
    let top = capped
        .predict_one(query, 0, &mut MemoryScratch::new(), Search::Exact)
        .unwrap();
    assert!(
        (top[0].1 - (2.0 / r6 + 0.5 * r2)).abs() < 1e-6,
        "feature 1 is the largest"
    );
    // Label 1's centroid is sample 2's row; capped to 1 feature it keeps feature 1 (the
    // lower of two equal weights), so its score is unchanged too.
    assert!((top[1].1 - 1.5 / r2).abs() < 1e-6, "{top:?}");
    // Feature 0 is cut from label 0's capped centroid: the query (1, 0, 0, 0) (cosine
    // 1 / sqrt(2) with sample 0) scores 1 / sqrt(6) + 0.5 / sqrt(2) in full, 0.5 / sqrt(2) capped.
    let first = Vector::Sparse {
        indices: &[0],
        values: &[1.0],
    };
    let full = memory
        .predict_one(first, 0, &mut MemoryScratch::new(), Search::Exact)
        .unwrap();
    assert!((full[0].1 - (1.0 / r6 + 0.5 / r2)).abs() < 1e-6, "{full:?}");
    let cut = capped
        .predict_one(first, 0, &mut MemoryScratch::new(), Search::Exact)
        .unwrap();
    assert!((cut[0].1 - 0.5 / r2).abs() < 1e-6, "{cut:?}");
}

/// `centroid_labels` scores only the labels with the most votes. Samples (1, 1, 0, 0),
/// (0, 0, 0, 1), (0, 1, 1, 0) and (0, 0, 1, 0) carry labels 0, 2, {0, 1} and 1. The query
/// (0, 1, 0, 0) votes 2 / sqrt(2) for label 0 and 1 / sqrt(2) for label 1: with a cap of 1
/// only label 0 is scored, its centroid (1, 2, 1, 0) / sqrt(6) giving 2 / sqrt(6) plus half
/// its votes. The next query through the same scratch, (0, 0, 1, 0), votes 1 / sqrt(2) for
/// label 0 and 1 + 1 / sqrt(2) for label 1, which alone is scored: its centroid
/// (0, 1 / sqrt(2), 1 + 1 / sqrt(2), 0) at unit length gives 0.92388, plus half its votes,
/// none of them left over from the first query (where it was voted for but not scored).
#[test]
fn centroid_labels_caps_the_scored_labels() {
    let mut train = SparseExamples::new();
    train.push(&[0, 1], &[1.0, 1.0], &[0]);
    train.push(&[3], &[1.0], &[2]);
    train.push(&[1, 2], &[1.0, 1.0], &[0, 1]);
    train.push(&[2], &[1.0], &[1]);
    let config = MemoryConfig {
        neighbours: 4,
        idf: false,
        centroid_features: 0,
        centroid_labels: 1,
        ..MemoryConfig::default()
    };
    let memory = Memory::build(&train, 4, 3, config).unwrap();
    let mut scratch = MemoryScratch::new();
    let (r2, r6) = (2f32.sqrt(), 6f32.sqrt());
    let ask = |feature: u32, scratch: &mut MemoryScratch| {
        let query = Vector::Sparse {
            indices: &[feature],
            values: &[1.0],
        };
        memory
            .predict_one(query, 0, scratch, Search::Exact)
            .unwrap()
    };
    let top = ask(1, &mut scratch);
    assert_eq!(top.len(), 1, "{top:?}");
    assert_eq!(top[0].0, 0);
    assert!((top[0].1 - (2.0 / r6 + 0.5 * r2)).abs() < 1e-6, "{top:?}");
    let top = ask(2, &mut scratch);
    assert_eq!(top.len(), 1, "{top:?}");
    assert_eq!(top[0].0, 1);
    let centroid = (1.0 + 1.0 / r2) / (0.5 + (1.0 + 1.0 / r2).powi(2)).sqrt();
    assert!((centroid - 0.92388).abs() < 1e-5);
    assert!(
        (top[0].1 - (centroid + 0.5 * (1.0 + 1.0 / r2))).abs() < 1e-6,
        "{top:?}"
    );
}

/// Through the tables a query finds the units in its buckets: a training sample's own unit
/// is always in them (the same vector hashes to the same codes), so each of 300 random
/// samples, queried with its own input, has itself as its nearest unit and its label on
/// top, as the exact search has (measured: P@1 1 both ways). A memory without tables
/// searches exactly whatever is asked.
#[test]
fn the_tables_find_a_samples_own_unit() {
    let mut train = SparseExamples::new();
    let mut state = 7u64;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) % 1000) as f32 / 1000.0
    };
    let features: Vec<u32> = (0..32).collect();
    for s in 0..300u32 {
        let values: Vec<f32> = (0..32).map(|_| next() - 0.5).collect();
        train.push(&features, &values, &[s % 50]);
    }
    let lsh = MemoryLsh {
        family: slide_lsh::FamilyKind::SimHash(slide_lsh::Projection::Gaussian),
        budget: 20,
        rescore: None,
    };
    let config = MemoryConfig {
        neighbours: 1,
        idf: false,
        centroids: false,
        lsh: Some(lsh),
        ..MemoryConfig::default()
    };
    let memory = Memory::build(&train, 32, 50, config).unwrap();
    let all: Vec<usize> = (0..300).collect();
    let tables = memory.evaluate(&train, &all, Search::Tables).unwrap();
    assert_eq!(tables.precision_at_1, 1.0);
    let exact = memory.evaluate(&train, &all, Search::Exact).unwrap();
    assert_eq!(exact.precision_at_1, 1.0);
    let mut scratch = MemoryScratch::new();
    let found = memory
        .predict_one(train.input(17), 17, &mut scratch, Search::Tables)
        .unwrap();
    assert_eq!(found[0].0, 17);
    let without = Memory::build(
        &train,
        32,
        50,
        MemoryConfig {
            lsh: None,
            ..config
        },
    )
    .unwrap();
    assert_eq!(
        without.evaluate(&train, &all, Search::Tables).unwrap(),
        without.evaluate(&train, &all, Search::Exact).unwrap()
    );
}

/// Weighted MinHash tables over sparse units take one sub-hash per table and a code per
/// feature (`K = 1`, `range_pow` = log2 of 1,024 features = 10), as many tables as the
/// budget buys. Each sample has four features of its own and two of ten common ones; a
/// query with a training sample's input lands in its own unit's bucket in every table
/// (equal inputs race alike), which holds the unit unless it is a common feature's bucket
/// that has overflowed its 8 places, so the unit is among the most found candidates (when
/// a full bucket dropped it, another unit can be found as often), and computing only the
/// two most found (`rescore = 2`) still answers every sample's label.
#[test]
fn weighted_minhash_tables_find_a_samples_own_unit() {
    let mut train = SparseExamples::new();
    for s in 0..200u32 {
        let features = [
            s % 10,
            (s + 3) % 10,
            24 + 5 * s,
            25 + 5 * s,
            26 + 5 * s,
            27 + 5 * s,
        ];
        let mut sorted = features.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let values = vec![1.0; sorted.len()];
        train.push(&sorted, &values, &[s % 40]);
    }
    let config = |rescore| MemoryConfig {
        neighbours: 1,
        centroids: false,
        lsh: Some(MemoryLsh {
            family: slide_lsh::FamilyKind::WeightedMinHash,
            budget: 8,
            rescore,
        }),
        ..MemoryConfig::default()
    };
    let all: Vec<usize> = (0..200).collect();
    for rescore in [None, Some(2)] {
        let memory = Memory::build(&train, 1024, 40, config(rescore)).unwrap();
        let params = memory.tables_params().unwrap();
        assert_eq!((params.k, params.range_pow), (1, 10));
        // A unit mostly wins one of its own features (IDF: a common feature weighs
        // ln(201 / 41) = 1.59 against ln(201 / 2) = 4.61: it wins a race with probability
        // 2 * 1.59^2 / (2 * 1.59^2 + 4 * 4.61^2) = 0.056 on average, but a common feature
        // whose draw is small wins most of its 40 units in that table), so a query meets
        // about 2 units per table (measured over the 8 probe tables): 4 tables for a
        // budget of 8.
        assert_eq!(params.l, 4, "{params:?}");
        let stats = memory.evaluate(&train, &all, Search::Tables).unwrap();
        assert_eq!(stats.precision_at_1, 1.0, "rescore {rescore:?}");
    }
}

/// 400 samples of 40 labels: each label owns 6 features (a prototype), and a sample keeps
/// 4 of its label's 6 plus 6 of 200 noise features. `unique` gives each sample a label of
/// its own instead, which no other sample carries.
fn prototypes(unique: bool) -> SparseExamples {
    let mut train = SparseExamples::new();
    let mut state = 11u64;
    let mut next = |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % n
    };
    for s in 0..400u32 {
        let label = s % 40;
        let mut features: Vec<u32> = (0..6).map(|i| label * 6 + i).collect();
        while features.len() > 4 {
            features.remove(next(features.len() as u64) as usize);
        }
        features.extend((0..6).map(|_| 240 + next(200) as u32));
        features.sort_unstable();
        features.dedup();
        let values = vec![1.0; features.len()];
        train.push(&features, &values, &[if unique { s } else { label }]);
    }
    train
}

/// Tuning answers held-out samples with a memory of the others, tries every pair of the
/// grid in order (the first is the default pair), and returns the config with the pair of
/// the best P@1 (ties: P@3, P@5, the earlier pair); a sample is never its own neighbour
/// there. On the prototype data the held-out P@1 is high (above 0.8); with a label of its
/// own per sample no held-out sample can be answered, so P@1 is 0 for every pair and the
/// first pair stays (a memory that kept the held-out samples' units would answer every one
/// of them). Too few samples or `tune = 0` tune nothing; a fault in the data is named by
/// its place in the whole set.
#[test]
fn tuning_chooses_the_best_pair_on_held_out_samples() {
    let train = prototypes(false);
    let config = MemoryConfig {
        neighbours: 10,
        centroid_features: 0,
        tune: 50,
        ..MemoryConfig::default()
    };
    let (chosen, tried) = Memory::tune(&train, 440, 40, config).unwrap();
    assert_eq!(tried.len(), TUNED_POWERS.len() * TUNED_VOTE_WEIGHTS.len());
    assert_eq!((tried[0].power, tried[0].vote_weight), (1.0, 0.5));
    assert!(tried.iter().all(|t| t.stats.samples == 50));
    let key = |t: &Tried| {
        let s = t.stats;
        (s.precision_at_1, s.precision_at_3, s.precision_at_5)
    };
    let best = tried
        .iter()
        .fold(tried[0], |b, t| if key(t) > key(&b) { *t } else { b });
    assert!(best.stats.precision_at_1 > 0.8, "{best:?}");
    assert_eq!(
        (chosen.power, chosen.vote_weight),
        (best.power, best.vote_weight)
    );
    assert_eq!(
        MemoryConfig {
            power: 1.0,
            vote_weight: 0.5,
            ..chosen
        },
        config
    );
    assert!(tried.iter().all(|t| key(t) <= key(&best)));

    // By P@3 or P@5 the same pairs answer the same; the best by that precision is chosen
    // (here every pair has the same P@3 and P@5: one label per sample).
    let at_3: fn(&EvalStats) -> f64 = |s| s.precision_at_3;
    let at_5: fn(&EvalStats) -> f64 = |s| s.precision_at_5;
    for (metric, of) in [(TuneMetric::P3, at_3), (TuneMetric::P5, at_5)] {
        let by = MemoryConfig {
            tune_metric: metric,
            ..config
        };
        let (chosen, again) = Memory::tune(&train, 440, 40, by).unwrap();
        assert_eq!(again, tried);
        let top = tried.iter().map(|t| of(&t.stats)).fold(0.0, f64::max);
        let pick = tried
            .iter()
            .find(|t| (t.power, t.vote_weight) == (chosen.power, chosen.vote_weight))
            .unwrap();
        assert_eq!(of(&pick.stats), top, "{metric:?}: {tried:?}");
    }

    let alone = prototypes(true);
    let (chosen, tried) = Memory::tune(&alone, 440, 400, config).unwrap();
    assert!(
        tried.iter().all(|t| t.stats.precision_at_1 == 0.0),
        "{tried:?}"
    );
    assert_eq!(chosen, config);

    let off = MemoryConfig { tune: 0, ..config };
    assert!(Memory::tune(&alone, 440, 400, off).unwrap().1.is_empty());
    let small = MemoryConfig {
        tune: 10,
        ..plain(1)
    };
    assert!(
        Memory::tune(&three_samples(), 6, 4, small)
            .unwrap()
            .1
            .is_empty()
    );
    // Samples 390-399 carry labels out of range for 390 labels: the first is named by its
    // place in the whole set, not in the held-out split's other part.
    let err = Memory::tune(&alone, 440, 390, config)
        .unwrap_err()
        .to_string();
    assert!(err.contains("sample 390:"), "{err}");
}

/// `tune_metric` orders answers by its precision, then by the other two: of two answers,
/// one better at P@1 and one at P@3 and P@5, P@1 prefers the first, P@3 and P@5 the
/// second; on equal P@3 and P@5, P@1 decides.
#[test]
fn a_tune_metric_orders_by_its_precision_then_the_others() {
    let stats = |p1, p3, p5| EvalStats {
        precision_at_1: p1,
        precision_at_3: p3,
        precision_at_5: p5,
        ..EvalStats::default()
    };
    let (first, rest) = (stats(0.9, 0.3, 0.2), stats(0.8, 0.4, 0.3));
    assert!(TuneMetric::P1.key(&first) > TuneMetric::P1.key(&rest));
    assert!(TuneMetric::P3.key(&first) < TuneMetric::P3.key(&rest));
    assert!(TuneMetric::P5.key(&first) < TuneMetric::P5.key(&rest));
    let level = stats(0.7, 0.3, 0.2);
    for metric in [TuneMetric::P3, TuneMetric::P5] {
        assert!(metric.key(&first) > metric.key(&level), "{metric:?}");
    }
    assert_eq!(TuneMetric::P3.value(&rest), 0.4);
    assert_eq!(TuneMetric::default(), TuneMetric::P1);
    assert_eq!(MemoryConfig::default().tune_metric, TuneMetric::P1);
}
