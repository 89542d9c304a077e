//! What LSH sampling buys in learning: one config trained three ways on the same data, with
//! exact P@1 (every output scored) after each epoch, against epochs and training seconds.
//!
//! ```text
//! cargo run --release -p slide-benches --bin sampling -- --config CONFIG
//!     [--engines slide,uniform,dense] [--epochs 3] [--eval-samples 2000] [--eval-every 0]
//!     [--set section.key=value]... [--name NAME] [--out runs/sampling]
//! cargo run --release -p slide-benches --bin sampling -- --merge A.csv,B.csv --name NAME
//! ```
//!
//! Engines: `slide` (the config as written: LSH picks the output layer's active set),
//! `uniform` (the same, but the active set takes nothing from the tables: uniformly random
//! outputs at the same budget, plus the labels, shared negatives and any warm-up's random
//! ids, the ablation that shows what the tables add; no tables are built or queried, and
//! `min_active` is set to 0 so that no fill comes on top) and `dense` (every output computed: the full-softmax model, with
//! slide's own passes and the same Adam). Each runs `slide-train`'s loop on the config's data
//! (`--set` overrides apply to all three; by default no step limit and no checkpoint,
//! which `--set train.max_steps=N` or `--set checkpoint.at_end=true` change), evaluating
//! at every epoch's end (and every `--eval-every` steps, for a finer curve against time).
//! Writes
//! `NAME.csv` (one row per engine and epoch: training seconds without evaluation, exact and
//! LSH-mode P@1, P@3, P@5, the collapse detector, the share of the non-label active outputs
//! that came from the tables, retrieval recall, training samples/s) and `NAME.png` (P@1
//! against epochs and against training seconds) to `--out`, and keeps each run's metrics
//! under `--out/NAME-ENGINE/`. It then prints, for each pair of engines, the training
//! seconds each took to first reach the other's final P@1, and how the first engine stood
//! against the second at equal training time (the second's P@1 interpolated linearly
//! between its evaluations) at each of the first's evaluations: how often ahead, the mean
//! margin, the smallest. Within an epoch P@1 moves by a point or two from one evaluation
//! to the next, so the mean says more than the count. `--merge` trains nothing: it joins the rows of earlier CSVs
//! (e.g. a dense run made separately) into `NAME.csv` and `NAME.png`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;

use plotters::prelude::*;
use slide_trainer::config;
use slide_trainer::failure::Failure;
use slide_trainer::train;

const FONT: &[u8] = include_bytes!("../../../trainer/assets/DejaVuSans.ttf");
const ENGINES: [&str; 3] = ["slide", "uniform", "dense"];

struct Options {
    merge: Vec<PathBuf>,
    config: PathBuf,
    engines: Vec<String>,
    overrides: Vec<String>,
    name: String,
    out: PathBuf,
}

/// One evaluation of one engine.
#[derive(Debug, Clone)]
struct Row {
    engine: String,
    epoch: u64,
    step: u64,
    train_seconds: f64,
    p_at_1: f64,
    p_at_3: f64,
    p_at_5: f64,
    p_at_1_lsh: Option<f64>,
    top1_share: f64,
    label_share: f64,
    table_share: Option<f64>,
    recall: Option<f64>,
    recall_random: Option<f64>,
    train_samples_per_second: f64,
}

fn parse() -> Result<Options, String> {
    let mut o = Options {
        merge: Vec::new(),
        config: PathBuf::new(),
        engines: ENGINES.iter().map(|e| e.to_string()).collect(),
        overrides: Vec::new(),
        name: String::from("sampling"),
        out: PathBuf::from("runs/sampling"),
    };
    let mut epochs = String::from("3");
    let mut eval_samples = String::from("2000");
    let mut eval_every = String::from("0");
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--config" => o.config = PathBuf::from(value()?),
            "--merge" => o.merge = value()?.split(',').map(PathBuf::from).collect(),
            "--engines" => o.engines = value()?.split(',').map(str::to_string).collect(),
            "--epochs" => epochs = value()?,
            "--eval-samples" => eval_samples = value()?,
            "--eval-every" => eval_every = value()?,
            "--set" => o.overrides.push(value()?),
            "--name" => o.name = value()?,
            "--out" => o.out = PathBuf::from(value()?),
            other => return Err(format!("unknown option {other} (see the file's docs)")),
        }
    }
    if o.config.as_os_str().is_empty() && o.merge.is_empty() {
        return Err("--config FILE (or --merge CSVS) is required".into());
    }
    if let Some(bad) = o.engines.iter().find(|e| !ENGINES.contains(&e.as_str())) {
        return Err(format!(
            "unknown engine {bad}; known: slide, uniform, dense"
        ));
    }
    // Defaults a `--set` may change (the later of two settings wins): no step limit, and
    // no checkpoint (at 670K labels one is 2.8-5 GB). Then what the flags say.
    let defaults = [
        "train.max_steps=0",
        "checkpoint.every=0",
        "checkpoint.at_end=false",
    ];
    o.overrides.splice(0..0, defaults.map(String::from));
    o.overrides.extend([
        format!("train.epochs={epochs}"),
        format!("train.eval_samples={eval_samples}"),
        format!("train.eval_every={eval_every}"),
        "train.eval_mode=\"exact\"".into(),
    ]);
    Ok(o)
}

/// The config for `engine`: the output layer sampled as written, uniformly, or not at all.
fn engine_config(o: &Options, engine: &str) -> Result<config::Config, String> {
    let mut c =
        config::load(&config::locate(&o.config), &o.overrides).map_err(|e| format!("{e:#}"))?;
    let last = c
        .network
        .layers
        .last_mut()
        .ok_or("the config has no layers")?;
    match engine {
        "dense" => last.lsh = None,
        "uniform" => {
            let lsh = last
                .lsh
                .as_mut()
                .ok_or("the output layer has no LSH section to ablate")?;
            // The budget's worth of random ids in place of the tables' picks, and no fill
            // on top (`min_active` would add up to as many again): the same active-set size.
            lsh.picks = slide::Picks::Uniform;
            lsh.retrieval.sampling.min_active = 0;
        }
        _ => {}
    }
    c.validate().map_err(|e| format!("{e:#}"))?;
    Ok(c)
}

/// The evaluation lines of a metrics file.
fn read_rows(engine: &str, metrics: &Path) -> Result<Vec<Row>, String> {
    let text = std::fs::read_to_string(metrics)
        .map_err(|e| format!("cannot read {}: {e}", metrics.display()))?;
    let mut rows = Vec::new();
    for line in text.lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("{}: {e}", metrics.display()))?;
        let Some(p1) = v["p_at_1"].as_f64() else {
            continue;
        };
        let f = |key: &str| v[key].as_f64().unwrap_or(f64::NAN);
        let table_share = v["active_sources"]
            .as_array()
            .and_then(|a| a.iter().rev().find(|s| !s.is_null()))
            .and_then(|s| s["table_share"].as_f64());
        let recall = v["recall"]
            .as_array()
            .and_then(|a| a.iter().rev().find(|r| !r.is_null()).cloned());
        rows.push(Row {
            engine: engine.to_string(),
            epoch: v["epoch"].as_u64().unwrap_or(0),
            step: v["step"].as_u64().unwrap_or(0),
            train_seconds: f("train_seconds"),
            p_at_1: p1,
            p_at_3: f("p_at_3"),
            p_at_5: f("p_at_5"),
            p_at_1_lsh: v["p_at_1_lsh"].as_f64(),
            top1_share: f("top1_share"),
            label_share: f("label_share"),
            table_share,
            recall: recall.as_ref().and_then(|r| r["top10"].as_f64()),
            recall_random: recall.as_ref().and_then(|r| r["random"].as_f64()),
            train_samples_per_second: f("train_samples_per_second"),
        });
    }
    Ok(rows)
}

fn csv(path: &Path, rows: &[Row]) -> Result<(), String> {
    let opt = |x: Option<f64>| x.map_or(String::new(), |x| format!("{x:.4}"));
    let mut text = String::from(
        "engine,epoch,step,train_seconds,p_at_1,p_at_3,p_at_5,p_at_1_lsh,top1_share,label_share,table_share,recall_at_10,recall_random,train_samples_per_second\n",
    );
    for r in rows {
        text += &format!(
            "{},{},{},{:.1},{:.4},{:.4},{:.4},{},{:.4},{:.4},{},{},{},{:.0}\n",
            r.engine,
            r.epoch,
            r.step,
            r.train_seconds,
            r.p_at_1,
            r.p_at_3,
            r.p_at_5,
            opt(r.p_at_1_lsh),
            r.top1_share,
            r.label_share,
            opt(r.table_share),
            opt(r.recall),
            opt(r.recall_random),
            r.train_samples_per_second
        );
    }
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn color(engine: &str) -> RGBColor {
    match engine {
        "slide" => BLUE,
        "uniform" => RGBColor(0, 150, 60),
        _ => RGBColor(230, 140, 0),
    }
}

/// P@1 against epochs (left) and training seconds (right, log scale).
fn plot(path: &Path, title: &str, rows: &[Row], engines: &[String]) -> Result<(), String> {
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
        .map_err(|_| "the shipped font could not be loaded".to_string())?;
    let draw = |e: &dyn std::fmt::Display| format!("cannot draw {}: {e}", path.display());
    let root = BitMapBackend::new(path, (1200, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw(&e))?;
    let root = root
        .titled(title, ("sans-serif", 22))
        .map_err(|e| draw(&e))?;
    let (left, right) = root.split_horizontally(600);
    let top = rows.iter().map(|r| r.p_at_1).fold(0.05, f64::max) * 1.1;
    let epochs = rows.iter().map(|r| r.epoch).max().unwrap_or(1) as f64;
    let (t0, t1) = rows.iter().fold((f64::MAX, 1.0f64), |(a, b), r| {
        (a.min(r.train_seconds), b.max(r.train_seconds))
    });
    // Engines whose times differ by orders of magnitude (dense against sampled) on a log
    // axis, whole decades so that it has labelled ticks; otherwise a linear one.
    let finals: Vec<f64> = engines
        .iter()
        .filter_map(|e| curve(rows, e).last().map(|r| r.train_seconds))
        .collect();
    let spread = finals.iter().copied().fold(0.0, f64::max)
        / finals.iter().copied().fold(f64::MAX, f64::min).max(1e-9);
    let mut by_epoch = ChartBuilder::on(&left)
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..epochs + 0.2, 0.0..top)
        .map_err(|e| draw(&e))?;
    by_epoch
        .configure_mesh()
        .x_desc("epoch")
        .y_desc("exact test P@1")
        .draw()
        .map_err(|e| draw(&e))?;
    for engine in engines {
        let c = color(engine);
        let mine: Vec<&Row> = rows.iter().filter(|r| &r.engine == engine).collect();
        // Evaluations within an epoch (`--eval-every`) at their fraction of it.
        let last = mine.iter().max_by_key(|r| r.step);
        let steps_per_epoch = last.map_or(1.0, |r| r.step as f64 / r.epoch.max(1) as f64);
        let epoch_points: Vec<(f64, f64)> = std::iter::once((0.0, 0.0))
            .chain(
                mine.iter()
                    .map(|r| (r.step as f64 / steps_per_epoch, r.p_at_1)),
            )
            .collect();
        by_epoch
            .draw_series(LineSeries::new(epoch_points, c.stroke_width(2)))
            .map_err(|e| draw(&e))?
            .label(engine.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    let curves: Vec<(RGBColor, Vec<(f64, f64)>)> = engines
        .iter()
        .map(|e| {
            let points = curve(rows, e)
                .iter()
                .map(|r| (r.train_seconds, r.p_at_1))
                .collect();
            (color(e), points)
        })
        .collect();
    let mut right = ChartBuilder::on(&right);
    right.margin(16).x_label_area_size(44).y_label_area_size(56);
    if spread > 5.0 {
        let lo = 10f64.powf(t0.max(0.1).log10().floor());
        let hi = 10f64.powf(t1.log10().ceil()).max(lo * 10.0);
        let chart = right.build_cartesian_2d((lo..hi).log_scale(), 0.0..top);
        time_panel(chart.map_err(|e| draw(&e))?, &curves).map_err(|e| draw(&e))?;
    } else {
        let chart = right.build_cartesian_2d(0.0..t1 * 1.05, 0.0..top);
        time_panel(chart.map_err(|e| draw(&e))?, &curves).map_err(|e| draw(&e))?;
    }
    by_epoch
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| draw(&e))?;
    root.present().map_err(|e| draw(&e))
}

/// The right-hand panel: P@1 against training seconds, one line with dots per engine.
fn time_panel<'a, X>(
    mut chart: ChartContext<
        'a,
        BitMapBackend<'a>,
        Cartesian2d<X, plotters::coord::types::RangedCoordf64>,
    >,
    curves: &[(RGBColor, Vec<(f64, f64)>)],
) -> Result<(), Box<dyn std::error::Error + 'a>>
where
    X: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc("training seconds (evaluation excluded), 2 threads")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_desc("exact test P@1")
        .draw()?;
    for (c, points) in curves {
        chart.draw_series(LineSeries::new(points.clone(), c.stroke_width(2)))?;
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
    }
    Ok(())
}

/// The rows of a CSV written by [`csv`].
fn read_csv(path: &Path) -> Result<Vec<Row>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let bad = |line: usize| format!("{}:{line}: not a sampling CSV row", path.display());
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != 14 {
            return Err(bad(n + 1));
        }
        let num = |i: usize| f[i].parse::<f64>().map_err(|_| bad(n + 1));
        let opt = |i: usize| f[i].parse::<f64>().ok();
        rows.push(Row {
            engine: f[0].to_string(),
            epoch: num(1)? as u64,
            step: num(2)? as u64,
            train_seconds: num(3)?,
            p_at_1: num(4)?,
            p_at_3: num(5)?,
            p_at_5: num(6)?,
            p_at_1_lsh: opt(7),
            top1_share: num(8)?,
            label_share: num(9)?,
            table_share: opt(10),
            recall: opt(11),
            recall_random: opt(12),
            train_samples_per_second: num(13)?,
        });
    }
    Ok(rows)
}

fn run(o: &Options) -> Result<(), String> {
    std::fs::create_dir_all(&o.out)
        .map_err(|e| format!("cannot create {}: {e}", o.out.display()))?;
    let mut rows = Vec::new();
    for path in &o.merge {
        rows.extend(read_csv(path)?);
    }
    let mut merged: Vec<String> = Vec::new();
    for r in &rows {
        if !merged.contains(&r.engine) {
            merged.push(r.engine.clone());
        }
    }
    let engines = if o.merge.is_empty() {
        &o.engines
    } else {
        &merged
    };
    for engine in engines.iter().filter(|_| o.merge.is_empty()) {
        let c = engine_config(o, engine)?;
        let dir = o.out.join(format!("{}-{engine}", o.name));
        println!("== {engine}: {}", dir.display());
        std::io::stdout().flush().ok();
        let interrupt = AtomicUsize::new(0);
        train::run(&c, &dir, true, train::Start::New, &interrupt).map_err(|e| match e {
            Failure::Input(e) | Failure::Training(e) => format!("{engine}: {e:#}"),
            Failure::Interrupted { message, .. } => message,
        })?;
        let metrics = dir.join(
            c.log
                .metrics
                .as_deref()
                .unwrap_or(Path::new("metrics.jsonl")),
        );
        rows.extend(read_rows(engine, &metrics)?);
    }
    let csv_path = o.out.join(format!("{}.csv", o.name));
    csv(&csv_path, &rows)?;
    let png = o.out.join(format!("{}.png", o.name));
    let title = format!("{}: exact P@1 by epoch and by training time", o.name);
    plot(&png, &title, &rows, engines)?;
    println!("wrote {} and {}", csv_path.display(), png.display());
    for (i, a) in engines.iter().enumerate() {
        for b in &engines[i + 1..] {
            println!("{}", compare(&rows, a, b));
        }
    }
    Ok(())
}

/// `engine`'s evaluations in training order.
fn curve<'a>(rows: &'a [Row], engine: &str) -> Vec<&'a Row> {
    let mut mine: Vec<&Row> = rows.iter().filter(|r| r.engine == engine).collect();
    mine.sort_by(|x, y| x.train_seconds.total_cmp(&y.train_seconds));
    mine
}

/// `curve`'s P@1 at `seconds`, linear between its evaluations (from 0 at 0 s); `None`
/// past its last evaluation.
fn p1_at(curve: &[&Row], seconds: f64) -> Option<f64> {
    let mut before = (0.0, 0.0);
    for r in curve {
        if r.train_seconds >= seconds {
            let span = r.train_seconds - before.0;
            let w = if span > 0.0 {
                (seconds - before.0) / span
            } else {
                1.0
            };
            return Some(before.1 + w * (r.p_at_1 - before.1));
        }
        before = (r.train_seconds, r.p_at_1);
    }
    None
}

/// The first training second at which `curve` reached `p1` (at an evaluation).
fn time_to(curve: &[&Row], p1: f64) -> Option<f64> {
    curve
        .iter()
        .find(|r| r.p_at_1 >= p1)
        .map(|r| r.train_seconds)
}

/// Engines `a` and `b` against each other: time to each other's final P@1, and `a`'s margin
/// over `b` at equal training time at each of `a`'s evaluations within `b`'s run.
fn compare(rows: &[Row], a: &str, b: &str) -> String {
    let (ca, cb) = (curve(rows, a), curve(rows, b));
    let (Some(fa), Some(fb)) = (ca.last(), cb.last()) else {
        return format!("{a} / {b}: no evaluations to compare");
    };
    let secs = |t: Option<f64>| t.map_or("never".to_string(), |t| format!("{t:.1} s"));
    let margins: Vec<(f64, f64)> = ca
        .iter()
        .filter_map(|r| p1_at(&cb, r.train_seconds).map(|p| (r.train_seconds, r.p_at_1 - p)))
        .collect();
    let ahead = margins.iter().filter(|(_, m)| *m > 0.0).count();
    let mean = margins.iter().map(|(_, m)| m).sum::<f64>() / margins.len().max(1) as f64;
    let worst = margins.iter().copied().min_by(|x, y| x.1.total_cmp(&y.1));
    let worst = worst.map_or(String::new(), |(t, m)| {
        format!("; smallest margin {:+.2} points at {t:.1} s", 100.0 * m)
    });
    format!(
        "{a} / {b}: to {b}'s final P@1 {:.4}: {} / {}; to {a}'s final {:.4}: {} / {}; \
         {a} ahead at equal training time at {ahead} of {} evaluations, by {:+.2} points on \
         average{worst}",
        fb.p_at_1,
        secs(time_to(&ca, fb.p_at_1)),
        secs(time_to(&cb, fb.p_at_1)),
        fa.p_at_1,
        secs(time_to(&ca, fa.p_at_1)),
        secs(time_to(&cb, fa.p_at_1)),
        margins.len(),
        100.0 * mean,
    )
}

fn main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("sampling: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&o) {
        eprintln!("sampling: {e}");
        std::process::exit(1);
    }
}
