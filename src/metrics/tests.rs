use super::*;

/// Three samples over 5 labels whose training counts are `[6, 3, 1, 0, 2]` of 10 samples:
/// A ranks `[0, 2, 1, 4, 3]` with labels {0, 1} (hits at ranks 1 and 3), B ranks `[2, 0]`
/// (two predictions only) with label {2} (a hit at rank 1), C has no label.
fn three_samples(propensities: Option<&Propensities>) -> Metrics {
    let mut m = RankingMetrics::new(propensities);
    m.add(&[0, 2, 1, 4, 3], &[0, 1]);
    m.add(&[2, 0], &[2]);
    m.add(&[1, 2, 3, 4, 0], &[]);
    assert_eq!(m.samples(), 3);
    m.finish()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

/// `1 + C (N_l + B)^-A` with `C = (ln 10 - 1) 2.5^0.55`: a label with one sample weighs
/// exactly `ln N` (its `(N_l + B)^-A` cancels `(B + 1)^A`); the others as computed by hand
/// with Python's `math` (`C = 2.156120895719132`).
#[test]
fn propensities_follow_jain_et_al() {
    let p = Propensities::from_counts(&[6, 3, 1, 0, 2], 10, PropensityModel::default()).unwrap();
    let want = [
        1.7118515149465625,
        1.9427710237221416,
        10f64.ln(),
        2.7251343234120733,
        2.0825193899016696,
    ];
    for (l, &w) in want.iter().enumerate() {
        assert!(
            close(p.inverse(l as u32), w),
            "label {l}: {}",
            p.inverse(l as u32)
        );
    }
    // A label the training counts do not cover weighs as one with no sample.
    assert!(close(p.inverse(99), want[3]));
    // Rarer labels weigh more.
    assert!(p.all().windows(2).take(2).all(|w| w[0] < w[1]));
}

#[test]
fn precision_and_ndcg_by_hand() {
    let m = three_samples(None);
    // P@1: A and B hit, C cannot. P@3: A 2/3, B 1/3 (its missing third rank a miss).
    // P@5: 3 hits of 15 ranks. P@k divides whole hit counts, so these are exact.
    assert_eq!(m.precision, [2.0 / 3.0, 3.0 / 9.0, 3.0 / 15.0]);
    // nDCG@3 of A: (1 + 1/log2 4) / (1 + 1/log2 3), its best with two labels; B: 1; C: 0.
    let a = 1.5 / (1.0 + 1.0 / 3f64.log2());
    let want = (a + 1.0) / 3.0;
    assert!(close(m.ndcg[0], 2.0 / 3.0));
    assert!(close(m.ndcg[1], want), "{:?}", m.ndcg);
    assert!(close(m.ndcg[2], want), "{:?}", m.ndcg);
    assert_eq!((m.psp, m.psndcg), (None, None));
}

#[test]
fn propensity_scored_metrics_by_hand() {
    let p = Propensities::from_counts(&[6, 3, 1, 0, 2], 10, PropensityModel::default()).unwrap();
    let w = |l: u32| p.inverse(l);
    let m = three_samples(Some(&p));
    let (psp, psndcg) = (m.psp.unwrap(), m.psndcg.unwrap());
    // PSP@1: A's top is label 0 where label 1 (rarer) was best; B's is its only label.
    assert!(close(psp[0], (w(0) + w(2)) / (w(1) + w(2))), "{psp:?}");
    // At 3 and 5 both samples' top holds every label they have: the best possible.
    assert!(close(psp[1], 1.0) && close(psp[2], 1.0), "{psp:?}");
    // PSnDCG@3: A gains w0 at rank 1 and w1 at rank 3 where the best is w1 at 1, w0 at 2,
    // both over A's nDCG norm 1 + 1/log2 3; B gains w2 over 1.
    let norm = 1.0 + 1.0 / 3f64.log2();
    let got = (w(0) + w(1) / 2.0) / norm + w(2);
    let best = (w(1) + w(0) / 3f64.log2()) / norm + w(2);
    assert!(close(psndcg[1], got / best), "{psndcg:?}");
    assert!(close(psndcg[2], got / best), "{psndcg:?}");
    assert!(close(psndcg[0], psp[0]));
}

#[test]
fn no_samples_and_bad_models() {
    let m = RankingMetrics::new(None).finish();
    assert_eq!(m, Metrics::default());
    for model in [
        PropensityModel { a: 0.0, b: 1.5 },
        PropensityModel { a: 0.55, b: -1.0 },
        PropensityModel {
            a: f64::NAN,
            b: 1.5,
        },
    ] {
        let err = Propensities::from_counts(&[1], 1, model).unwrap_err();
        assert!(err.to_string().contains("propensity_"), "{err}");
    }
    assert!(Propensities::from_counts(&[1], 0, PropensityModel::default()).is_err());
}

/// A perfect ranking scores 1 on every metric; one whose hits sit at the bottom of the top
/// 5 scores less on nDCG than on P@5.
#[test]
fn perfect_and_late_rankings() {
    let p = Propensities::from_counts(&[5, 1, 2, 9, 4, 3], 20, PropensityModel::default()).unwrap();
    let mut perfect = RankingMetrics::new(Some(&p));
    let labels = [1u32, 2, 5];
    // The best order by propensity: 1 (count 1), 2 (2), 5 (3).
    perfect.add(&[1, 2, 5, 0, 3], &labels);
    let m = perfect.finish();
    assert!(close(m.psp.unwrap()[2], 1.0) && close(m.psndcg.unwrap()[2], 1.0));
    assert!(close(m.ndcg[2], 1.0) && close(m.precision[0], 1.0));
    let mut late = RankingMetrics::new(Some(&p));
    late.add(&[0, 3, 5, 2, 1], &labels);
    let m = late.finish();
    assert!(close(m.precision[2], 0.6));
    assert!(m.ndcg[2] < 0.7 && m.ndcg[2] > 0.4, "{:?}", m.ndcg);
}
