//! Tests of the BF16 conversions, stochastic rounding and row kernels.

use super::*;

#[test]
fn conversions_round_as_documented() {
    let (tiny, huge) = (2f32.powi(-100), 1.5 * 2f32.powi(100));
    for x in [0.0f32, -0.0, 1.0, -2.5, tiny, huge, f32::INFINITY] {
        // Values with 8 significant bits are BF16 already.
        let b = from_f32_nearest(x);
        assert_eq!(to_f32(b).to_bits(), x.to_bits() & 0xffff_0000, "{x}");
    }
    // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even (1.0).
    assert_eq!(to_f32(from_f32_nearest(1.0 + 1.0 / 256.0)), 1.0);
    // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6: rounds up.
    assert_eq!(
        to_f32(from_f32_nearest(1.0 + 3.0 / 256.0)),
        1.0 + 1.0 / 64.0
    );
    assert_eq!(
        to_f32(from_f32_nearest(1.0 + 1.0 / 200.0)),
        1.0 + 1.0 / 128.0
    );
    assert!(to_f32(from_f32_nearest(f32::NAN)).is_nan());
    assert!(to_f32(from_f32_nearest(-f32::NAN)).is_nan());
    assert_eq!(to_f32(from_f32_nearest(f32::MAX)), f32::INFINITY);
    // Stochastic: exact values never move; others go to a neighbour.
    assert_eq!(to_f32(from_f32_stochastic(1.5, 0xffff)), 1.5);
    let x = 1.0 + 1.0 / 300.0;
    assert_eq!(to_f32(from_f32_stochastic(x, 0)), 1.0);
    assert_eq!(to_f32(from_f32_stochastic(x, 0xffff)), 1.0 + 1.0 / 128.0);
    assert_eq!(
        to_f32(from_f32_stochastic(-x, 0xffff)),
        -(1.0 + 1.0 / 128.0)
    );
    assert!(!to_f32(from_f32_stochastic(f32::NAN, 0xffff)).is_finite());
    assert_eq!(
        to_f32(from_f32_stochastic(f32::INFINITY, 0xffff)),
        f32::INFINITY
    );
}

/// Over many draws, stochastic rounding's mean is the value (within sampling error),
/// where rounding to nearest is off by a fixed fraction of a unit.
#[test]
fn stochastic_rounding_is_unbiased() {
    let x = 1.0f32 + 0.3 / 128.0; // 30% of a BF16 unit above 1
    let draws = 1 << 16;
    let mean: f64 = (0..draws)
        .map(|k| f64::from(to_f32(from_f32_stochastic(x, mix32(k) as u16))))
        .sum::<f64>()
        / f64::from(draws);
    let unit = 1.0 / 128.0;
    // The standard error of the mean is sqrt(0.3 * 0.7) / 256 units, about 0.002.
    assert!(
        (mean - f64::from(x)).abs() < 0.01 * unit,
        "mean {mean} vs {x}"
    );
    assert_eq!(to_f32(from_f32_nearest(x)), 1.0);
}

/// The BF16 update is the f32 update on the widened moments, the new moments rounded to
/// one of their BF16 neighbours; a long run of identical tiny gradients still moves the
/// first moment towards the gradient (rounding to nearest would freeze it).
#[test]
fn the_bf16_update_follows_the_f32_one() {
    let n = 37;
    let g: Vec<f32> = (0..n).map(|i| ((i * 7 % 13) as f32 - 6.0) * 1e-3).collect();
    let m0: Vec<u16> = g.iter().map(|x| from_f32_nearest(x * 0.5)).collect();
    let v0: Vec<u16> = g.iter().map(|x| from_f32_nearest(x * x)).collect();
    let s = AdamStep::new(1e-2, 0.9, 0.999, 1e-8, 7);
    let w0: Vec<f32> = (0..n).map(|i| i as f32 * 0.01).collect();
    let (mut w, mut m, mut v) = (w0.clone(), m0.clone(), v0.clone());
    adam(
        ValuesMut::F32(&mut w),
        &g,
        &mut m,
        &mut v,
        &s,
        12345,
        Ahead::NONE,
    );
    let mut fw = w0.clone();
    let mut fm: Vec<f32> = m0.iter().map(|&b| to_f32(b)).collect();
    let mut fv: Vec<f32> = v0.iter().map(|&b| to_f32(b)).collect();
    super::super::scalar::adam(&mut fw, &g, &mut fm, &mut fv, &s);
    assert_eq!(w, fw);
    for i in 0..n {
        let (lo, hi) = (fm[i].to_bits() >> 16, (fm[i].to_bits() >> 16) + 1);
        assert!((lo..=hi).contains(&u32::from(m[i])), "m[{i}]");
        let (lo, hi) = (fv[i].to_bits() >> 16, (fv[i].to_bits() >> 16) + 1);
        assert!((lo..=hi).contains(&u32::from(v[i])), "v[{i}]");
    }

    // m = 1.0; gradient 0.99 for 200 steps: m -> 0.99 (0.9^200 of the gap is left).
    // Rounded to nearest every step, m would stay at 1.0: the step 0.1 * 0.01 is an
    // eighth of a BF16 unit at 1.
    let (mut w, mut m, mut v) = (vec![0.0f32], vec![from_f32_nearest(1.0)], vec![0u16]);
    for t in 1..=200u32 {
        adam(
            ValuesMut::F32(&mut w),
            &[0.99],
            &mut m,
            &mut v,
            &s,
            row_seed(0, u64::from(t)),
            Ahead::NONE,
        );
    }
    assert!((to_f32(m[0]) - 0.99).abs() < 0.006, "m = {}", to_f32(m[0]));
}

/// With BF16 weights the update is the same f32 arithmetic on the widened weights, the
/// new weights rounded to one of their BF16 neighbours, unbiased over many seeds.
#[test]
fn bf16_weights_follow_the_f32_update() {
    let n = 37;
    let g: Vec<f32> = (0..n).map(|i| ((i * 5 % 11) as f32 - 5.0) * 1e-2).collect();
    let w0: Vec<u16> = (0..n)
        .map(|i| from_f32_nearest(0.1 - i as f32 * 0.007))
        .collect();
    let s = AdamStep::new(1e-3, 0.9, 0.999, 1e-8, 3);
    let (m0, v0) = (
        vec![from_f32_nearest(0.01); n],
        vec![from_f32_nearest(1e-4); n],
    );
    let mut fw: Vec<f32> = w0.iter().map(|&b| to_f32(b)).collect();
    let (mut fm, mut fv) = (m0.clone(), v0.clone());
    adam(
        ValuesMut::F32(&mut fw),
        &g,
        &mut fm,
        &mut fv,
        &s,
        mix32(99),
        Ahead::NONE,
    );
    let draws = 2000u32;
    let mut mean = vec![0.0f64; n];
    for seed in 0..draws {
        let (mut w, mut m, mut v) = (w0.clone(), m0.clone(), v0.clone());
        adam(
            ValuesMut::Bf16(&mut w),
            &g,
            &mut m,
            &mut v,
            &s,
            mix32(seed),
            Ahead::NONE,
        );
        if seed == 99 {
            // Moments: the first chunk draws the same bits as the f32-weight update of
            // the same seed (the weights' bits come after them); later chunks round
            // to a neighbour either way.
            assert_eq!((&m[..LANES], &v[..LANES]), (&fm[..LANES], &fv[..LANES]));
            for (a, b) in m.iter().chain(&v).zip(fm.iter().chain(&fv)) {
                assert!(a.abs_diff(*b) <= 1, "{a} vs {b}");
            }
        }
        for i in 0..n {
            let (lo, hi) = (fw[i].to_bits() >> 16, (fw[i].to_bits() >> 16) + 1);
            assert!((lo..=hi).contains(&u32::from(w[i])), "w[{i}]");
            mean[i] += f64::from(to_f32(w[i])) / f64::from(draws);
        }
    }
    for i in 0..n {
        // A BF16 unit near 0.1 is 2^-11; the mean of 2000 draws is within a few
        // tenth of it (standard error at most 0.5 / sqrt(2000) units, about 0.011).
        let unit = f64::from(to_f32(from_f32_nearest(fw[i]))).abs().max(1e-3) / 128.0;
        assert!(
            (mean[i] - f64::from(fw[i])).abs() < 0.1 * unit,
            "w[{i}]: mean {} vs {}",
            mean[i],
            fw[i]
        );
    }
}

/// The per-row update on BF16 first moments is the f32 one on the widened moments (to the
/// last bit with f32 weights), the new values rounded to one of their BF16 neighbours.
#[test]
fn the_row_update_follows_the_f32_one() {
    use super::super::scalar;
    let n = 37;
    let g: Vec<f32> = (0..n).map(|i| ((i * 7 % 13) as f32 - 6.0) * 1e-3).collect();
    let m0: Vec<u16> = g.iter().map(|x| from_f32_nearest(x * 0.5)).collect();
    let w0: Vec<f32> = (0..n).map(|i| 0.1 - i as f32 * 0.01).collect();
    let scale = 0.37;
    let (mut w, mut m) = (w0.clone(), m0.clone());
    adam_row(
        ValuesMut::F32(&mut w),
        &g,
        &mut m,
        0.9,
        scale,
        77,
        Ahead::NONE,
    );
    let mut fw = w0.clone();
    let mut fm: Vec<f32> = m0.iter().map(|&b| to_f32(b)).collect();
    scalar::adam_row(&mut fw, &g, &mut fm, 0.9, scale);
    assert_eq!(w, fw);
    let neighbours =
        |x: f32, b: u16| (x.to_bits() >> 16..=(x.to_bits() >> 16) + 1).contains(&u32::from(b));
    for i in 0..n {
        assert!(neighbours(fm[i], m[i]), "m[{i}]");
    }
    let mut bw: Vec<u16> = w0.iter().map(|&x| from_f32_nearest(x)).collect();
    let mut fw: Vec<f32> = bw.iter().map(|&b| to_f32(b)).collect();
    let (mut m, mut fm) = (
        m0.clone(),
        m0.iter().map(|&b| to_f32(b)).collect::<Vec<_>>(),
    );
    adam_row(
        ValuesMut::Bf16(&mut bw),
        &g,
        &mut m,
        0.9,
        scale,
        78,
        Ahead::NONE,
    );
    scalar::adam_row(&mut fw, &g, &mut fm, 0.9, scale);
    for i in 0..n {
        assert!(neighbours(fw[i], bw[i]) && neighbours(fm[i], m[i]), "[{i}]");
    }
}

/// Every kernel set's per-row update is the reference's, bit for bit, with f32 and BF16
/// weights, on full chunks and a tail.
#[test]
fn every_set_updates_a_row_as_the_reference() {
    let n = 45;
    let g: Vec<f32> = (0..n).map(|i| ((i * 5 % 11) as f32 - 5.0) * 1e-2).collect();
    let m0: Vec<u16> = g.iter().map(|x| from_f32_nearest(x * 0.3)).collect();
    let w0: Vec<f32> = (0..n).map(|i| 0.2 - i as f32 * 0.009).collect();
    let b0: Vec<u16> = w0.iter().map(|&x| from_f32_nearest(x)).collect();
    for set in crate::kernels::available() {
        for (bf16_weights, seed, beta1) in [(false, 5, 0.9), (true, 6, 0.9), (true, 7, 0.0)] {
            let run = |kernel: crate::kernels::AdamRowBf16Fn| {
                let (mut wf, mut wb, mut m) = (w0.clone(), b0.clone(), m0.clone());
                let w = if bf16_weights {
                    ValuesMut::Bf16(&mut wb)
                } else {
                    ValuesMut::F32(&mut wf)
                };
                kernel(w, &g, &mut m, beta1, 0.05, seed, Ahead::NONE);
                (wf, wb, m)
            };
            let (got, reference) = (run(set.adam_row_bf16), run(adam_row));
            assert_eq!(got, reference, "{} ({bf16_weights}, {beta1})", set.name);
        }
    }
}

/// Without a first moment (`beta1 = 0`) the row update leaves `m` as it was and gives the
/// weights the bits of the update that keeps it (`m = 0 m + 1 g`, element by element with
/// the same rounding streams), in every kernel set, on full chunks and a tail.
#[test]
fn without_a_first_moment_the_weights_are_those_of_the_full_update() {
    let n = 45;
    let g: Vec<f32> = (0..n).map(|i| ((i * 3 % 7) as f32 - 3.0) * 1e-2).collect();
    let m0: Vec<u16> = g.iter().map(|x| from_f32_nearest(x * 0.7 + 0.01)).collect();
    let b0: Vec<u16> = (0..n)
        .map(|i| from_f32_nearest(0.3 - i as f32 * 0.011))
        .collect();
    let (mut kept, mut m_kept, seed, scale) = (b0.clone(), m0.clone(), 9, 0.05);
    let mut streams = seed_streams(seed);
    for start in (0..n).step_by(LANES) {
        let bits = next(&mut streams);
        for i in start..(start + LANES).min(n) {
            let mut w = ValuesMut::Bf16(&mut kept);
            row_update(&mut w, i, g[i], &mut m_kept[i], 0.0, scale, bits[i - start]);
        }
    }
    assert_ne!(kept, b0);
    for set in crate::kernels::available() {
        let (mut w, mut m) = (b0.clone(), m0.clone());
        (set.adam_row_bf16)(
            ValuesMut::Bf16(&mut w),
            &g,
            &mut m,
            0.0,
            scale,
            seed,
            Ahead::NONE,
        );
        assert_eq!((&w, &m), (&kept, &m0), "{}", set.name);
    }
}

/// The row's mean square sums in a fixed order: exact on values whose squares and sums
/// are exact, within the rounding of 37 additions otherwise.
#[test]
fn mean_square_of_a_row() {
    use super::super::scalar::mean_square;
    assert_eq!(mean_square(&[]), 0.0);
    assert_eq!(mean_square(&[3.0, -4.0]), 12.5);
    let g: Vec<f32> = (0..37).map(|i| (i as f32 * 0.3).sin()).collect();
    let exact: f64 = g.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>() / 37.0;
    let got = f64::from(mean_square(&g));
    assert!(
        (got - exact).abs() < 40.0 * f64::from(f32::EPSILON) * exact,
        "{got} vs {exact}"
    );
}

#[test]
fn bf16_dot_and_axpy_use_the_widened_row() {
    let w: Vec<u16> = (0..21)
        .map(|i| from_f32_nearest(i as f32 * 0.37 - 3.0))
        .collect();
    let x: Vec<f32> = (0..21).map(|i| 1.0 / (i as f32 + 1.0)).collect();
    let wide: Vec<f32> = w.iter().map(|&b| to_f32(b)).collect();
    assert_eq!(dot(&w, &x), super::super::scalar::dot(&wide, &x));
    let (mut y, mut y_ref) = (x.clone(), x.clone());
    axpy(0.5, &w, &mut y);
    super::super::scalar::axpy(0.5, &wide, &mut y_ref);
    assert_eq!(y, y_ref);
}
