//! The width-scaling experiment: time per training step against layer width for slide
//! (LSH picks 256 neurons per sample) and for the same network with every neuron computed.
//!
//! ```text
//! cargo run --release -p slide-benches --bin scaling -- mnist [--widths 1024,2048,...]
//!     [--steps 60] [--engines slide,every-neuron,autodiff] [--dense-up-to 16384]
//!     [--autodiff-up-to 65536] [--accuracy-steps 469] [--accuracy-widths 65536]
//!     [--slide-accuracy-steps 4690] [--budget 256] [--k 3] [--l 50] [--lr 0.001]
//!     [--sampling top-k|vanilla] [--hash dwta|wta|simhash]
//!     [--out runs/scaling] [--quick]
//! cargo run --release -p slide-benches --bin scaling -- xmc [--widths 10000,50000,...] [...]
//! ```
//!
//! Each width and engine runs 2 warm-up steps and `--steps` measured ones (60 by default, so
//! slide's first hash-table rebuild, at step 50, falls in the window of the mean); the
//! median is the headline. Engines: `slide` (LSH on the widened layer), `every-neuron` (slide's hand-derived passes,
//! nothing sampled) and `autodiff` (the dense reverse-mode autodiff baseline in burn, from
//! the same initial weights, on the same batches). `mnist`: 784 -> H -> 10 on the shipped
//! MNIST (`datasets/mnist`), H = 1K..128K by default; `--accuracy-steps N` also trains each
//! network N steps in all (one epoch is 469 steps) and reports its test accuracy, at every
//! width or at `--accuracy-widths`; `--slide-accuracy-steps M` trains slide on to M steps
//! and reports that accuracy too, with the training seconds of each (slide's many cheap
//! steps against the baseline's few expensive ones). `xmc`: 135,909 sparse -> 128 -> N on synthetic
//! Amazon-shaped inputs, N = 10K..2M. Prints a line per width and engine as it goes, then
//! each engine's log-log slope of step time (and of multiply-adds and rows touched) against
//! width and slide's speed-up over the baseline; writes `SWEEP.csv` and `SWEEP.png`
//! (log-log, slopes in the legend) to `--out`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use plotters::prelude::*;
use slide::formats::idx::read_images;
use slide::lsh::{FamilyKind, Projection};
use slide::{DenseExamples, Examples, Mode};
use slide_benches::baseline::Baseline;
use slide_benches::scaling::{
    Engine, Measurement, Recipe, Sweep, batch_at, log_log_slope, measure, measure_autodiff,
    network, xmc_like,
};

const ENGINES: [Engine; 3] = [Engine::Slide, Engine::Dense, Engine::Autodiff];

const FONT: &[u8] = include_bytes!("../../../trainer/assets/DejaVuSans.ttf");

struct Options {
    sweep: Sweep,
    widths: Vec<usize>,
    steps: usize,
    engines: Vec<Engine>,
    dense_up_to: usize,
    autodiff_up_to: usize,
    accuracy_steps: usize,
    accuracy_widths: Option<Vec<usize>>,
    slide_accuracy_steps: usize,
    recipe: Recipe,
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
        steps: 60,
        engines: ENGINES.to_vec(),
        dense_up_to: match sweep {
            Sweep::Mnist => 16_384,
            Sweep::Xmc => 100_000,
        },
        autodiff_up_to: match sweep {
            Sweep::Mnist => 65_536,
            Sweep::Xmc => 670_091,
        },
        accuracy_steps: 0,
        accuracy_widths: None,
        slide_accuracy_steps: 0,
        recipe: Recipe::recommended(sweep),
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
            o.autodiff_up_to = usize::MAX;
            continue;
        }
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let number = |v: &str| v.parse::<usize>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--widths" => {
                o.widths = value.split(',').map(number).collect::<Result<_, _>>()?;
            }
            "--steps" => o.steps = number(&value)?.max(1),
            "--engines" => {
                o.engines = value
                    .split(',')
                    .map(|name| {
                        ENGINES
                            .into_iter()
                            .find(|e| e.name() == name)
                            .ok_or(format!("--engines: unknown engine {name}"))
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--dense-up-to" => o.dense_up_to = number(&value)?,
            "--autodiff-up-to" => o.autodiff_up_to = number(&value)?,
            "--accuracy-steps" => o.accuracy_steps = number(&value)?,
            "--slide-accuracy-steps" => o.slide_accuracy_steps = number(&value)?,
            "--accuracy-widths" => {
                o.accuracy_widths = Some(value.split(',').map(number).collect::<Result<_, _>>()?);
            }
            "--out" => o.out = PathBuf::from(value),
            "--budget" => o.recipe.budget = number(&value)?.max(1),
            "--k" => o.recipe.params.k = number(&value)?,
            "--l" => o.recipe.params.l = number(&value)?,
            "--lr" => {
                o.recipe.lr = value.parse().map_err(|e| format!("--lr {value}: {e}"))?;
            }
            "--sampling" => {
                o.recipe.top_k = match value.as_str() {
                    "vanilla" => false,
                    "top-k" => true,
                    _ => return Err(format!("--sampling {value}: vanilla or top-k")),
                };
            }
            "--hash" => {
                o.recipe.family = match value.as_str() {
                    "dwta" => FamilyKind::Dwta { bin_size: 8 },
                    "wta" => FamilyKind::Wta { bin_size: 8 },
                    "simhash" => FamilyKind::SimHash(Projection::Gaussian),
                    _ => return Err(format!("--hash {value}: dwta, wta or simhash")),
                };
            }
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
    /// Test accuracy after `--accuracy-steps` steps, and for slide also after
    /// `--slide-accuracy-steps`.
    accuracy: Vec<Trained>,
}

/// A network's test accuracy after some training.
#[derive(Clone, Copy)]
struct Trained {
    steps: usize,
    /// Wall time of all its training steps (the measured ones included), seconds.
    seconds: f64,
    accuracy: f64,
}

/// A network being trained by one of the engines.
enum Trainee {
    Slide(Box<(slide::Network, slide::Workspace)>),
    Autodiff(Baseline),
}

impl Trainee {
    /// Trains to `steps` steps in all (counting `done`) on `train` in the fixed batch order.
    fn train_to(&mut self, done: usize, steps: usize, train: &DenseExamples) -> Result<(), String> {
        for s in done..steps {
            let samples = batch_at(s, 128, train.len());
            match self {
                Trainee::Slide(slide) => {
                    let (net, ws) = &mut **slide;
                    net.train_step(ws, train, &samples)
                        .map_err(|e| e.to_string())?;
                }
                Trainee::Autodiff(baseline) => {
                    baseline.train_step(train, &samples);
                }
            }
        }
        Ok(())
    }

    /// Test accuracy, every output scored (hidden LSH layers sample as in training).
    fn accuracy(&mut self, test: &DenseExamples) -> Result<f64, String> {
        let all: Vec<usize> = (0..test.len()).collect();
        match self {
            Trainee::Slide(slide) => {
                let (net, ws) = &mut **slide;
                net.evaluate(ws, test, &all, Mode::EvalExact)
                    .map(|e| e.metrics.precision[0])
                    .map_err(|e| e.to_string())
            }
            Trainee::Autodiff(baseline) => Ok(baseline.precision_at_1(test, &all)),
        }
    }
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
        for &engine in &o.engines {
            let limit = match engine {
                Engine::Slide => usize::MAX,
                Engine::Dense => o.dense_up_to,
                Engine::Autodiff => o.autodiff_up_to,
            };
            if width > limit {
                continue;
            }
            let test = mnist.as_ref().filter(|_| {
                o.accuracy_steps > 0
                    && o.accuracy_widths
                        .as_ref()
                        .is_none_or(|widths| widths.contains(&width))
            });
            let net = network(o.sweep, width, engine, &o.recipe, 11).map_err(|e| e.to_string())?;
            let started = Instant::now();
            let (m, mut trainee) = if engine == Engine::Autodiff {
                let mut baseline = Baseline::from_network(&net);
                drop(net);
                let m = measure_autodiff(&mut baseline, data, width, o.steps, 128);
                (m, Trainee::Autodiff(baseline))
            } else {
                let mut net = net;
                let m = measure(&mut net, data, width, layer, o.steps, 128)
                    .map_err(|e| e.to_string())?;
                (m, Trainee::Slide(Box::new((net, slide::Workspace::new()))))
            };
            let mut seconds = started.elapsed().as_secs_f64();
            let mut accuracy = Vec::new();
            if let Some((train, test)) = test {
                let mut targets = vec![o.accuracy_steps];
                if engine == Engine::Slide && o.slide_accuracy_steps > o.accuracy_steps {
                    targets.push(o.slide_accuracy_steps);
                }
                let mut done = o.steps + 2;
                for steps in targets {
                    let started = Instant::now();
                    trainee.train_to(done, steps, train)?;
                    seconds += started.elapsed().as_secs_f64();
                    done = done.max(steps);
                    accuracy.push(Trained {
                        steps: done,
                        seconds,
                        accuracy: trainee.accuracy(test)?,
                    });
                }
            }
            println!(
                "{:>9} {:<12} {:>9.2} ms/step (mean {:>8.2})  {:>7.0} active/sample  {:>8.2} M multiply-adds/step  {:>8.0} rows/step{}",
                width,
                engine.name(),
                m.median_ms,
                m.mean_ms,
                m.active,
                m.multiply_adds / 1e6,
                m.rows_touched,
                accuracy
                    .iter()
                    .map(|t| format!(
                        "  test accuracy {:.4} after {} steps ({:.1} s)",
                        t.accuracy, t.steps, t.seconds
                    ))
                    .collect::<String>()
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
        "sweep,engine,width,median_ms_per_step,mean_ms_per_step,active_per_sample,multiply_adds_per_step,rows_touched_per_step,accuracy_steps,train_seconds,test_accuracy,longer_steps,longer_train_seconds,longer_test_accuracy"
    )?;
    for r in rows {
        writeln!(
            f,
            "{sweep},{},{},{:.4},{:.4},{:.1},{:.0},{:.1},{}",
            r.engine.name(),
            r.m.width,
            r.m.median_ms,
            r.m.mean_ms,
            r.m.active,
            r.m.multiply_adds,
            r.m.rows_touched,
            (0..2)
                .map(|i| r.accuracy.get(i).map_or(",,".to_string(), |t| format!(
                    "{},{:.1},{:.4}",
                    t.steps, t.seconds, t.accuracy
                )))
                .collect::<Vec<_>>()
                .join(",")
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
    for (engine, color) in [
        (Engine::Slide, BLUE),
        (Engine::Dense, RGBColor(230, 140, 0)),
        (Engine::Autodiff, RED),
    ] {
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
        "{name} width sweep, {} threads, kernels {}, {} measured steps per width; slide: {:?}",
        rayon::current_num_threads(),
        slide::kernels::kernels().name,
        o.steps,
        o.recipe
    );
    let rows = match run(&o) {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("scaling: {e}");
            std::process::exit(1);
        }
    };
    for engine in ENGINES {
        if !rows.iter().any(|r| r.engine == engine) {
            continue;
        }
        let time = log_log_slope(&series(&rows, engine, |m| m.median_ms));
        let macs = log_log_slope(&series(&rows, engine, |m| m.multiply_adds));
        let touched = log_log_slope(&series(&rows, engine, |m| m.rows_touched));
        println!(
            "log-log slope against width, {}: step time {time:.3}, multiply-adds {macs:.3}, rows touched {touched:.3}",
            engine.name()
        );
    }
    for slide in rows.iter().filter(|r| r.engine == Engine::Slide) {
        let other = |engine| {
            rows.iter()
                .find(|r| r.engine == engine && r.m.width == slide.m.width)
        };
        for engine in [Engine::Dense, Engine::Autodiff] {
            if let Some(r) = other(engine) {
                println!(
                    "width {:>9}: slide {:.1}x faster per step than {}{}",
                    slide.m.width,
                    r.m.median_ms / slide.m.median_ms,
                    engine.name(),
                    match (slide.accuracy.as_slice(), r.accuracy.first()) {
                        ([a, rest @ ..], Some(b)) => {
                            let mut text = format!(
                                "; test accuracy after {} steps {:.4} vs {:.4} ({:+.2} points)",
                                a.steps,
                                a.accuracy,
                                b.accuracy,
                                100.0 * (a.accuracy - b.accuracy)
                            );
                            for l in rest {
                                text += &format!(
                                    "; slide after {} steps ({:.1} s) {:.4} vs {} after {} steps ({:.1} s) {:.4}",
                                    l.steps,
                                    l.seconds,
                                    l.accuracy,
                                    engine.name(),
                                    b.steps,
                                    b.seconds,
                                    b.accuracy
                                );
                            }
                            text
                        }
                        _ => String::new(),
                    }
                );
            }
        }
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
