//! The width-scaling experiment: time per training step against layer width for slide
//! (LSH picks 256 neurons per sample) and for the same network with every neuron computed.
//!
//! ```text
//! cargo run --release -p slide-benches --bin scaling -- mnist [--widths 1024,2048,...]
//!     [--steps 20] [--dense-up-to 16384] [--accuracy-steps 469] [--out runs/scaling] [--quick]
//! cargo run --release -p slide-benches --bin scaling -- xmc [--widths 10000,50000,...] [...]
//! ```
//!
//! `mnist`: 784 -> H -> 10 on the shipped MNIST (`datasets/mnist`), H = 1K..128K by
//! default; `--accuracy-steps N` also trains each network N steps and reports its test
//! accuracy (one epoch is 469 steps). `xmc`: 135,909 sparse -> 128 -> N on synthetic
//! Amazon-shaped inputs, N = 10K..2M. Prints a line per width as it goes, then the log-log
//! slope of step time (and of multiply-adds and rows touched) against width for each
//! engine; writes `SWEEP.csv` and `SWEEP.png` (log-log, slopes in the legend) to `--out`.

use std::io::Write;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use slide::formats::idx::read_images;
use slide::{DenseExamples, Examples, Mode};
use slide_benches::scaling::{
    Engine, Measurement, Sweep, log_log_slope, measure, network, xmc_like,
};

const FONT: &[u8] = include_bytes!("../../../trainer/assets/DejaVuSans.ttf");

struct Options {
    sweep: Sweep,
    widths: Vec<usize>,
    steps: usize,
    dense_up_to: usize,
    accuracy_steps: usize,
    out: PathBuf,
}

fn parse() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let sweep = match args.next().as_deref() {
        Some("mnist") => Sweep::Mnist,
        Some("xmc") => Sweep::Xmc,
        _ => return Err("usage: scaling mnist|xmc [options] (see the file's header)".into()),
    };
    let mut o = Options {
        sweep,
        widths: match sweep {
            Sweep::Mnist => (10..=17).map(|p| 1usize << p).collect(),
            Sweep::Xmc => vec![10_000, 50_000, 100_000, 670_091, 2_000_000],
        },
        steps: 20,
        dense_up_to: match sweep {
            Sweep::Mnist => 16_384,
            Sweep::Xmc => 100_000,
        },
        accuracy_steps: 0,
        out: PathBuf::from("runs/scaling"),
    };
    while let Some(flag) = args.next() {
        if flag == "--quick" {
            o.widths = match sweep {
                Sweep::Mnist => vec![1024, 2048, 4096, 8192],
                Sweep::Xmc => vec![10_000, 20_000, 40_000],
            };
            o.steps = 5;
            o.dense_up_to = usize::MAX;
            continue;
        }
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let number = |v: &str| v.parse::<usize>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--widths" => {
                o.widths = value.split(',').map(number).collect::<Result<_, _>>()?;
            }
            "--steps" => o.steps = number(&value)?.max(1),
            "--dense-up-to" => o.dense_up_to = number(&value)?,
            "--accuracy-steps" => o.accuracy_steps = number(&value)?,
            "--out" => o.out = PathBuf::from(value),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if o.widths.is_empty() || o.widths.contains(&0) {
        return Err("--widths: give positive widths".into());
    }
    Ok(o)
}

/// One row of the results.
struct Row {
    engine: Engine,
    m: Measurement,
    accuracy: Option<f64>,
}

fn run(o: &Options) -> Result<Vec<Row>, String> {
    let mnist = if o.sweep == Sweep::Mnist {
        let dir = Path::new("datasets/mnist");
        let train = read_images(
            &dir.join("train-images-idx3-ubyte.gz"),
            &dir.join("train-labels-idx1-ubyte.gz"),
            10,
        )
        .map_err(|e| format!("{e} (run from the repository root)"))?;
        let test = read_images(
            &dir.join("t10k-images-idx3-ubyte.gz"),
            &dir.join("t10k-labels-idx1-ubyte.gz"),
            10,
        )
        .map_err(|e| e.to_string())?;
        Some((train, test))
    } else {
        None
    };
    let layer = match o.sweep {
        Sweep::Mnist => 0,
        Sweep::Xmc => 1,
    };
    let mut rows = Vec::new();
    for &width in &o.widths {
        let xmc = (o.sweep == Sweep::Xmc).then(|| xmc_like(4096, width, 5));
        let data: &dyn Examples = match (&mnist, &xmc) {
            (Some((train, _)), _) => train,
            (_, Some(x)) => x,
            _ => unreachable!("one data set per sweep"),
        };
        for engine in [Engine::Slide, Engine::Dense] {
            if engine == Engine::Dense && width > o.dense_up_to {
                continue;
            }
            let mut net = network(o.sweep, width, engine, 11).map_err(|e| e.to_string())?;
            let m =
                measure(&mut net, data, width, layer, o.steps, 128).map_err(|e| e.to_string())?;
            let accuracy = match &mnist {
                Some((train, test)) if o.accuracy_steps > 0 => {
                    Some(accuracy(&mut net, train, test, o.accuracy_steps)?)
                }
                _ => None,
            };
            println!(
                "{:>9} {:<12} {:>9.2} ms/step  {:>7.0} active/sample  {:>8.2} M multiply-adds/step  {:>8.0} rows/step{}",
                width,
                engine.name(),
                m.median_ms,
                m.active,
                m.multiply_adds / 1e6,
                m.rows_touched,
                accuracy.map_or(String::new(), |a| format!("  test accuracy {a:.4}"))
            );
            let _ = std::io::stdout().flush();
            rows.push(Row {
                engine,
                m,
                accuracy,
            });
        }
    }
    Ok(rows)
}

/// Trains `net` (already stepped by `measure`) to `steps` steps in all on `train`, then its
/// test accuracy with exact outputs.
fn accuracy(
    net: &mut slide::Network,
    train: &DenseExamples,
    test: &DenseExamples,
    steps: usize,
) -> Result<f64, String> {
    let n = train.len();
    while (net.step() as usize) < steps {
        let s = net.step() as usize;
        let batch: Vec<usize> = (0..128).map(|i| (s * 128 + i) % n).collect();
        net.train_step(train, &batch).map_err(|e| e.to_string())?;
    }
    let all: Vec<usize> = (0..test.len()).collect();
    net.evaluate(test, &all, Mode::EvalExact)
        .map(|e| e.precision_at_1)
        .map_err(|e| e.to_string())
}

fn series(rows: &[Row], engine: Engine, value: impl Fn(&Measurement) -> f64) -> Vec<(f64, f64)> {
    rows.iter()
        .filter(|r| r.engine == engine)
        .map(|r| (r.m.width as f64, value(&r.m)))
        .collect()
}

fn write_csv(path: &Path, sweep: &str, rows: &[Row]) -> std::io::Result<()> {
    let mut f = std::fs::File::create(path)?;
    writeln!(
        f,
        "sweep,engine,width,median_ms_per_step,active_per_sample,multiply_adds_per_step,rows_touched_per_step,test_accuracy"
    )?;
    for r in rows {
        writeln!(
            f,
            "{sweep},{},{},{:.4},{:.1},{:.0},{:.1},{}",
            r.engine.name(),
            r.m.width,
            r.m.median_ms,
            r.m.active,
            r.m.multiply_adds,
            r.m.rows_touched,
            r.accuracy.map_or(String::new(), |a| format!("{a:.4}"))
        )?;
    }
    Ok(())
}

fn plot(path: &Path, title: &str, rows: &[Row]) -> Result<(), String> {
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
        .map_err(|_| "the shipped font could not be loaded".to_string())?;
    let draw = |e: &dyn std::fmt::Display| format!("cannot draw {}: {e}", path.display());
    let root = BitMapBackend::new(path, (1000, 700)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw(&e))?;
    let all: Vec<(f64, f64)> = rows
        .iter()
        .map(|r| (r.m.width as f64, r.m.median_ms))
        .collect();
    let (x0, x1) = all
        .iter()
        .fold((f64::MAX, 0.0f64), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (y0, y1) = all
        .iter()
        .fold((f64::MAX, 0.0f64), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(
            (x0 * 0.8..x1 * 1.25).log_scale(),
            (y0 * 0.5..y1 * 2.0).log_scale(),
        )
        .map_err(|e| draw(&e))?;
    chart
        .configure_mesh()
        .x_desc("layer width")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_desc("median ms per training step (batch 128)")
        .draw()
        .map_err(|e| draw(&e))?;
    for (engine, color) in [(Engine::Slide, BLUE), (Engine::Dense, RED)] {
        let points = series(rows, engine, |m| m.median_ms);
        if points.is_empty() {
            continue;
        }
        let slope = log_log_slope(&points);
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| draw(&e))?
            .label(format!("{} (slope {slope:.2})", engine.name()))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(|e| draw(&e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| draw(&e))?;
    root.present().map_err(|e| draw(&e))
}

fn main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("scaling: {e}");
            std::process::exit(2);
        }
    };
    let name = match o.sweep {
        Sweep::Mnist => "mnist",
        Sweep::Xmc => "xmc",
    };
    println!(
        "{name} width sweep, {} threads, kernels {}, {} measured steps per width",
        rayon::current_num_threads(),
        slide::kernels::kernels().name,
        o.steps
    );
    let rows = match run(&o) {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("scaling: {e}");
            std::process::exit(1);
        }
    };
    for engine in [Engine::Slide, Engine::Dense] {
        let time = log_log_slope(&series(&rows, engine, |m| m.median_ms));
        let macs = log_log_slope(&series(&rows, engine, |m| m.multiply_adds));
        let touched = log_log_slope(&series(&rows, engine, |m| m.rows_touched));
        println!(
            "log-log slope against width, {}: step time {time:.3}, multiply-adds {macs:.3}, rows touched {touched:.3}",
            engine.name()
        );
    }
    if let Err(e) = std::fs::create_dir_all(&o.out) {
        eprintln!("scaling: cannot create {}: {e}", o.out.display());
        std::process::exit(1);
    }
    let csv = o.out.join(format!("{name}.csv"));
    let png = o.out.join(format!("{name}.png"));
    let title = match o.sweep {
        Sweep::Mnist => "MNIST 784 -> H -> 10: step time against hidden width",
        Sweep::Xmc => "135,909 -> 128 -> N: step time against output width",
    };
    if let Err(e) = write_csv(&csv, name, &rows) {
        eprintln!("scaling: cannot write {}: {e}", csv.display());
        std::process::exit(1);
    }
    if let Err(e) = plot(&png, title, &rows) {
        eprintln!("scaling: {e}");
        std::process::exit(1);
    }
    println!("wrote {} and {}", csv.display(), png.display());
}
