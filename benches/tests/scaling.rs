//! Sub-linear scaling, counted rather than timed: over MNIST-shaped networks 784 -> H -> 10
//! with H = 1K..64K and the recommended LSH settings, slide's multiply-adds and rows touched
//! per step grow with log-log slopes below 0.5, while computing every neuron (slide's dense
//! path and the autodiff baseline alike) grows linearly (slope at least 0.95); the rows the
//! optimizer updates are bounded by the samples' active sets, not by H.

use slide_benches::baseline::Baseline;
use slide_benches::scaling::{
    BUDGET, Engine, Measurement, Recipe, Sweep, log_log_slope, measure, mnist_like, network,
};

fn slope(ms: &[Measurement], f: fn(&Measurement) -> f64) -> f64 {
    let points: Vec<(f64, f64)> = ms.iter().map(|m| (m.width as f64, f(m))).collect();
    log_log_slope(&points)
}

#[test]
fn work_per_step_grows_sub_linearly_with_lsh_and_linearly_without() {
    let data = mnist_like(256, 3);
    let batch = 16;
    let widths = [1024, 2048, 4096, 8192, 16384, 32768, 65536];
    let mut slide = Vec::new();
    let mut dense = Vec::new();
    let mut autodiff = Vec::new();
    for &width in &widths {
        let mut net = network(
            Sweep::Mnist,
            width,
            Engine::Slide,
            &Recipe::recommended(Sweep::Mnist),
            5,
        )
        .unwrap();
        let m = measure(&mut net, &data, width, 0, 2, batch).unwrap();
        assert_eq!(m.active, BUDGET as f64, "{m:?}");
        // Hidden rows touched: at most the batch's active sets; plus the 10 outputs.
        assert!(m.rows_touched <= (batch * BUDGET + 10) as f64, "{m:?}");
        slide.push(m);
        drop(net);

        let mut net = network(
            Sweep::Mnist,
            width,
            Engine::Dense,
            &Recipe::recommended(Sweep::Mnist),
            5,
        )
        .unwrap();
        dense.push(measure(&mut net, &data, width, 0, 1, batch).unwrap());
        // The baseline's work is counted from its shapes; one batch is enough.
        let baseline = Baseline::from_network(&net);
        let samples: Vec<usize> = (0..batch).collect();
        autodiff.push(Measurement {
            width,
            median_ms: f64::NAN,
            mean_ms: f64::NAN,
            active: width as f64,
            multiply_adds: baseline.multiply_adds(&data, &samples) as f64,
            rows_touched: baseline.rows() as f64,
        });
    }
    let slopes = [
        slope(&slide, |m| m.multiply_adds),
        slope(&slide, |m| m.rows_touched),
        slope(&dense, |m| m.multiply_adds),
        slope(&dense, |m| m.rows_touched),
        slope(&autodiff, |m| m.multiply_adds),
        slope(&autodiff, |m| m.rows_touched),
    ];
    eprintln!(
        "slopes (multiply-adds, rows): slide {:.3} {:.3}; every neuron {:.3} {:.3}; autodiff {:.3} {:.3}; slide rows at 64K: {:.0}",
        slopes[0],
        slopes[1],
        slopes[2],
        slopes[3],
        slopes[4],
        slopes[5],
        slide.last().unwrap().rows_touched
    );
    assert!(slopes[0] < 0.5, "slide multiply-adds slope {}", slopes[0]);
    assert!(slopes[1] < 0.5, "slide rows-touched slope {}", slopes[1]);
    for (name, s) in [
        ("every-neuron multiply-adds", slopes[2]),
        ("every-neuron rows", slopes[3]),
        ("autodiff multiply-adds", slopes[4]),
        ("autodiff rows", slopes[5]),
    ] {
        assert!(s >= 0.95, "{name} slope {s}");
    }
    // Where every neuron is computed, slide's counts (the passes as they ran) equal the
    // baseline's (from its shapes): the same work.
    for (d, a) in dense.iter().zip(&autodiff) {
        assert_eq!(d.multiply_adds, a.multiply_adds, "H = {}", d.width);
    }
    // At 64K the optimizer touches a sixteenth of the hidden rows or fewer.
    assert!(slide.last().unwrap().rows_touched < 65536.0 / 16.0);
}

#[test]
fn log_log_slope_fits_powers() {
    let cube: Vec<(f64, f64)> = (1..6)
        .map(|i| (i as f64, (i as f64).powi(3) * 2.0))
        .collect();
    assert!((log_log_slope(&cube) - 3.0).abs() < 1e-12);
    let flat: Vec<(f64, f64)> = (1..6).map(|i| (i as f64, 7.0)).collect();
    assert!(log_log_slope(&flat).abs() < 1e-12);
    assert!(log_log_slope(&[(1.0, 1.0)]).is_nan());
}
