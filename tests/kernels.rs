//! Every kernel variant the CPU supports against the scalar reference.

use proptest::prelude::*;
use slide::kernels::{AdamStep, Ahead, SCALAR, ValuesMut, available, bf16, kernels};

fn vectors() -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
    (0usize..300).prop_flat_map(|n| {
        (
            proptest::collection::vec(-10.0f32..10.0, n),
            proptest::collection::vec(-10.0f32..10.0, n),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    /// Dot products agree within the rounding of two summation orders (see [`dot_bound`]).
    #[test]
    fn dot_matches_scalar((a, b) in vectors()) {
        let reference = (SCALAR.dot)(&a, &b);
        for k in available() {
            let got = (k.dot)(&a, &b);
            prop_assert!(gap(got, reference) <= dot_bound(&a, &b), "{}: {got} vs {reference}", k.name);
        }
    }

    /// axpy touches every element once: fused and unfused results differ by the rounding of
    /// one product and one sum (see [`axpy_bound`]).
    #[test]
    fn axpy_matches_scalar((x, y) in vectors(), alpha in -3.0f32..3.0) {
        let mut reference = y.clone();
        (SCALAR.axpy)(alpha, &x, &mut reference);
        for k in available() {
            let mut got = y.clone();
            (k.axpy)(alpha, &x, &mut got);
            for ((g, r), (&xi, &yi)) in got.iter().zip(&reference).zip(x.iter().zip(&y)) {
                prop_assert!(gap(*g, *r) <= axpy_bound(alpha, xi, yi), "{}: {g} vs {r}", k.name);
            }
        }
    }

    /// A BF16 row computes exactly as its widened f32 row in every kernel set: each set's BF16
    /// kernels sum in its f32 kernels' order, and widening is exact. (Training relies on it:
    /// a network with BF16 weights scores and back-propagates as its f32 twin.)
    #[test]
    fn bf16_rows_compute_exactly_as_their_widened_rows((a, b) in vectors(), alpha in -3.0f32..3.0) {
        let w: Vec<u16> = a.iter().map(|&x| bf16::from_f32_nearest(x)).collect();
        let widened: Vec<f32> = w.iter().map(|&x| bf16::to_f32(x)).collect();
        for k in available() {
            prop_assert_eq!((k.dot_bf16)(&w, &b).to_bits(), (k.dot)(&widened, &b).to_bits(), "{} dot", k.name);
            let (mut y, mut y_wide) = (b.clone(), b.clone());
            (k.axpy_bf16)(alpha, &w, &mut y);
            (k.axpy)(alpha, &widened, &mut y_wide);
            let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits(&y), bits(&y_wide), "{} axpy", k.name);
        }
    }

    #[test]
    fn adam_matches_scalar(
        (g, w) in vectors(),
        t in 1u32..1000,
        lr in 1e-4f32..1e-1,
    ) {
        let m0: Vec<f32> = g.iter().map(|x| x * 0.3).collect();
        let v0: Vec<f32> = g.iter().map(|x| x * x * 0.7).collect();
        let step = AdamStep::new(lr, 0.9, 0.999, 1e-8, t);
        let (mut rw, mut rm, mut rv) = (w.clone(), m0.clone(), v0.clone());
        (SCALAR.adam)(&mut rw, &g, &mut rm, &mut rv, &step);
        // Every set computes the same correctly rounded operations in the same order (no
        // fused multiply-adds; IEEE `sqrt` and division), so the results are the same bits.
        let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        for k in available() {
            let (mut kw, mut km, mut kv) = (w.clone(), m0.clone(), v0.clone());
            (k.adam)(&mut kw, &g, &mut km, &mut kv, &step);
            prop_assert_eq!(bits(&km), bits(&rm), "{} m", k.name);
            prop_assert_eq!(bits(&kv), bits(&rv), "{} v", k.name);
            prop_assert_eq!(bits(&kw), bits(&rw), "{} w", k.name);
        }
    }

    /// The BF16-moment update is the same in every variant, to the bit (same operations in
    /// the same order, same rounding bits), for any length (full 16-lane blocks and tails),
    /// whether or not the kernel is given a block to fetch meanwhile (a hint only).
    #[test]
    fn adam_bf16_matches_scalar_bit_for_bit(
        (g, w) in vectors(),
        t in 1u32..1000,
        seed: u32,
    ) {
        let m0: Vec<u16> = g.iter().map(|x| bf16::from_f32_nearest(x * 0.3)).collect();
        let v0: Vec<u16> = g.iter().map(|x| bf16::from_f32_nearest(x * x * 0.7)).collect();
        let step = AdamStep::new(1e-2, 0.9, 0.999, 1e-8, t);
        let (mut rw, mut rm, mut rv) = (w.clone(), m0.clone(), v0.clone());
        (SCALAR.adam_bf16)(ValuesMut::F32(&mut rw), &g, &mut rm, &mut rv, &step, seed, Ahead::NONE);
        // BF16 weights too.
        let w16: Vec<u16> = w.iter().map(|&x| bf16::from_f32_nearest(x * 0.01)).collect();
        let (mut rw16, mut rm16, mut rv16) = (w16.clone(), m0.clone(), v0.clone());
        (SCALAR.adam_bf16)(ValuesMut::Bf16(&mut rw16), &g, &mut rm16, &mut rv16, &step, seed, Ahead::NONE);
        // Some other block for the kernels to fetch: 3 KB.
        let other = vec![0u8; 3072];
        let ahead = Ahead::new(other.as_ptr(), other.len());
        for k in available() {
            let (mut kw, mut km, mut kv) = (w.clone(), m0.clone(), v0.clone());
            (k.adam_bf16)(ValuesMut::F32(&mut kw), &g, &mut km, &mut kv, &step, seed, ahead);
            let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            prop_assert_eq!(bits(&kw), bits(&rw), "{} w", k.name);
            prop_assert_eq!(&km, &rm, "{} m", k.name);
            prop_assert_eq!(&kv, &rv, "{} v", k.name);
            let (mut kw, mut km, mut kv) = (w16.clone(), m0.clone(), v0.clone());
            (k.adam_bf16)(ValuesMut::Bf16(&mut kw), &g, &mut km, &mut kv, &step, seed, ahead);
            prop_assert_eq!(&kw, &rw16, "{} BF16 w", k.name);
            prop_assert_eq!(&km, &rm16, "{} BF16-weight m", k.name);
            prop_assert_eq!(&kv, &rv16, "{} BF16-weight v", k.name);
        }
    }

    /// The BF16-row dot product and axpy agree with the scalar reference within the rounding
    /// of two orders ([`dot_bound`], [`axpy_bound`] on the widened row).
    #[test]
    fn bf16_row_kernels_match_scalar((a, b) in vectors(), alpha in -3.0f32..3.0) {
        let w: Vec<u16> = a.iter().map(|&x| bf16::from_f32_nearest(x)).collect();
        let widened: Vec<f32> = w.iter().map(|&x| bf16::to_f32(x)).collect();
        let reference = (SCALAR.dot_bf16)(&w, &b);
        let mut axpy_reference = b.clone();
        (SCALAR.axpy_bf16)(alpha, &w, &mut axpy_reference);
        for k in available() {
            let got = (k.dot_bf16)(&w, &b);
            prop_assert!(gap(got, reference) <= dot_bound(&widened, &b), "{}: {got} vs {reference}", k.name);
            let mut y = b.clone();
            (k.axpy_bf16)(alpha, &w, &mut y);
            for ((g, r), (&wi, &yi)) in y.iter().zip(&axpy_reference).zip(widened.iter().zip(&b)) {
                prop_assert!(gap(*g, *r) <= axpy_bound(alpha, wi, yi), "{}: {g} vs {r}", k.name);
            }
        }
    }
}

/// f32's unit roundoff, 2^-24: a correctly rounded operation's relative error.
const U: f64 = f32::EPSILON as f64 / 2.0;

/// How far two f32 dot products of `a` and `b` may lie apart, whatever order each sums in
/// and whether it fuses: each is within `gamma_n * sum |a_i b_i|` of the exact value
/// (Higham, *Accuracy and Stability of Numerical Algorithms*, 3.1: `n` products and `n - 1`
/// additions on any path, `gamma_n = n u / (1 - n u)`), so they differ by at most twice
/// that (plus the smallest normal, for results that underflow).
fn dot_bound(a: &[f32], b: &[f32]) -> f64 {
    let magnitude: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (f64::from(x) * f64::from(y)).abs())
        .sum();
    2.0 * gamma(a.len().min(b.len())) * magnitude + f64::from(f32::MIN_POSITIVE)
}

/// `gamma_n = n u / (1 - n u)`: the relative bound of an f32 sum of `n` products.
fn gamma(n: usize) -> f64 {
    n as f64 * U / (1.0 - n as f64 * U)
}

/// How far a fused `y + alpha x` (one rounding) and an unfused one (the product rounded, then
/// the sum) may lie apart: within `u (|y| + |alpha x|)` and `2u (|y| + |alpha x|)` of the
/// exact value, so at most `3u (|y| + |alpha x|)` apart.
fn axpy_bound(alpha: f32, x: f32, y: f32) -> f64 {
    3.0 * U * (f64::from(y).abs() + (f64::from(alpha) * f64::from(x)).abs())
        + f64::from(f32::MIN_POSITIVE)
}

/// `|a - b|`, exactly (in f64).
fn gap(a: f32, b: f32) -> f64 {
    (f64::from(a) - f64::from(b)).abs()
}

#[test]
fn the_chosen_kernels_are_the_best_available_unless_overridden() {
    let names: Vec<&str> = available().iter().map(|k| k.name).collect();
    assert_eq!(&names[..2], &["scalar", "portable"]);
    if std::env::var("SLIDE_KERNELS").is_err() {
        assert_eq!(kernels().name, *names.last().unwrap());
    }
    eprintln!("kernels available: {names:?}, chosen: {}", kernels().name);
}

#[test]
fn adam_step_constants_follow_pytorch() {
    let s = AdamStep::new(0.1, 0.9, 0.999, 1e-8, 1);
    assert!((s.step_size - 1.0).abs() < 1e-6); // 0.1 / (1 - 0.9)
    assert!((s.inv_sqrt_bias2 - 1.0 / 0.001f32.sqrt()).abs() < 1e-3);
    let late = AdamStep::new(0.1, 0.9, 0.999, 1e-8, 100_000);
    assert!((late.step_size - 0.1).abs() < 1e-6 && (late.inv_sqrt_bias2 - 1.0).abs() < 1e-6);
}

/// `n` inputs of `dim` values and `rows` weight rows `stride` apart, of varied values in
/// [-2, 2] and [-1.5, 1.5].
fn inputs_and_rows(n: usize, dim: usize, rows: usize, stride: usize) -> (Vec<f32>, Vec<f32>) {
    let x = (0..n * dim)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
        .collect();
    let w = (0..rows * stride)
        .map(|i| ((i * 53 % 89) as f32 - 44.0) / 30.0)
        .collect();
    (x, w)
}

/// Every set's score product equals a plain triple loop within rounding, with rows further
/// apart than their length (as the layers store them, moments in between), for sample and
/// row counts that are not multiples of any tile, and writes nothing past `n * rows`.
#[test]
fn scores_match_a_plain_product() {
    for k in available() {
        for (n, dim, rows) in [(7, 37, 45), (13, 128, 33), (1, 5, 1), (6, 16, 16)] {
            check_scores(k, n, dim, rows, dim + 11);
        }
    }
}

fn check_scores(k: slide::kernels::Kernels, n: usize, dim: usize, rows: usize, stride: usize) {
    let (x, w) = inputs_and_rows(n, dim, rows, stride);
    let mut out = vec![f32::NAN; n * rows + 3];
    (k.scores)(&x, n, dim, &w, rows, stride, &mut out);
    assert!(
        out[n * rows..].iter().all(|v| v.is_nan()),
        "{}: wrote past the end",
        k.name
    );
    for s in 0..n {
        for j in 0..rows {
            let (mut want, mut magnitude) = (0.0f64, 0.0f64);
            for k in 0..dim {
                let p = f64::from(x[s * dim + k]) * f64::from(w[j * stride + k]);
                want += p;
                magnitude += p.abs();
            }
            let got = f64::from(out[s * rows + j]);
            // Within gamma_dim of the exact value, in any order ([`dot_bound`]).
            assert!(
                (got - want).abs() <= gamma(dim) * magnitude + f64::from(f32::MIN_POSITIVE),
                "{}: ({s}, {j}): {got} vs {want}",
                k.name
            );
        }
    }
}

/// The BF16 scores equal an f64 product of the BF16-rounded values (sums in f32 differ
/// only by rounding), for sample and row counts that are not multiples of the tiles, and
/// an odd dimension.
#[cfg(target_arch = "x86_64")]
#[test]
fn bf16_scores_match_a_product_of_rounded_values() {
    use slide::kernels::avx512_bf16::{
        has_bf16_dot, pack_inputs_bf16, pack_rows_bf16, scores_bf16,
    };
    if !has_bf16_dot() {
        eprintln!("no AVX512-BF16 on this CPU: not checked");
        return;
    }
    let (n, dim, rows, stride) = (13, 37, 45, 48);
    let (x, w) = inputs_and_rows(n, dim, rows, stride);
    let (mut px, mut pw) = (Vec::new(), Vec::new());
    pack_inputs_bf16(&x, n, dim, &mut px);
    pack_rows_bf16(&w, rows, stride, dim, &mut pw);
    let mut out = vec![f32::NAN; n * rows];
    scores_bf16(&px, n, dim.div_ceil(2), &pw, rows, &mut out);
    let round = |v: f32| f64::from(bf16::to_f32(bf16::from_f32_nearest(v)));
    for s in 0..n {
        for j in 0..rows {
            let (mut want, mut magnitude, mut exact) = (0.0f64, 0.0f64, 0.0f64);
            for k in 0..dim {
                let p = round(x[s * dim + k]) * round(w[j * stride + k]);
                want += p;
                magnitude += p.abs();
                exact += f64::from(x[s * dim + k]) * f64::from(w[j * stride + k]);
            }
            let got = f64::from(out[s * rows + j]);
            // Within gamma_dim of the exact value, in any order ([`dot_bound`]).
            assert!(
                (got - want).abs() <= gamma(dim) * magnitude + f64::from(f32::MIN_POSITIVE),
                "({s}, {j}): {got} vs {want}"
            );
            // Against the f32 values: within BF16's rounding of each factor.
            assert!((got - exact).abs() <= 2.0 / 256.0 * magnitude + 1e-6);
        }
    }
}
