//! Sub-linear scaling, counted rather than timed: over MNIST-shaped networks 784 -> H -> 10
//! with H = 1K..16K, slide's multiply-adds per step stay nearly flat (log-log slope below
//! 0.5) while computing every neuron grows linearly (slope at least 0.95), and the rows the
//! optimizer updates are bounded by the samples' active sets, not by H.

use slide_benches::scaling::{BUDGET, Engine, Sweep, log_log_slope, measure, mnist_like, network};

#[test]
fn multiply_adds_grow_sub_linearly_with_lsh_and_linearly_without() {
    let data = mnist_like(256, 3);
    let batch = 16;
    let widths = [1024, 2048, 4096, 8192, 16384];
    let mut slide = Vec::new();
    let mut dense = Vec::new();
    for &width in &widths {
        for engine in [Engine::Slide, Engine::Dense] {
            let mut net = network(Sweep::Mnist, width, engine, 5).unwrap();
            let m = measure(&mut net, &data, width, 0, 2, batch).unwrap();
            match engine {
                Engine::Slide => {
                    assert_eq!(m.active, BUDGET as f64, "{m:?}");
                    // Hidden rows touched: at most the batch's active sets; plus 10 outputs.
                    assert!(m.rows_touched <= (batch * BUDGET + 10) as f64, "{m:?}");
                    slide.push(m);
                }
                Engine::Dense => dense.push(m),
            }
        }
    }
    let points = |ms: &[slide_benches::scaling::Measurement],
                  f: fn(&slide_benches::scaling::Measurement) -> f64| {
        ms.iter()
            .map(|m| (m.width as f64, f(m)))
            .collect::<Vec<_>>()
    };
    let slide_macs = log_log_slope(&points(&slide, |m| m.multiply_adds));
    let dense_macs = log_log_slope(&points(&dense, |m| m.multiply_adds));
    let dense_rows = log_log_slope(&points(&dense, |m| m.rows_touched));
    eprintln!(
        "slopes: slide multiply-adds {slide_macs:.3}; every neuron: multiply-adds {dense_macs:.3}, rows {dense_rows:.3}; slide rows at 16K: {:.0}",
        slide.last().unwrap().rows_touched
    );
    assert!(slide_macs < 0.5, "slide multiply-adds slope {slide_macs}");
    assert!(
        dense_macs >= 0.95,
        "every-neuron multiply-adds slope {dense_macs}"
    );
    assert!(dense_rows >= 0.95, "every-neuron rows slope {dense_rows}");
    // At 16K the optimizer touches a quarter of the hidden rows or fewer.
    assert!(slide.last().unwrap().rows_touched < 16384.0 / 4.0);
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
