//! `slide-train plot`: loss and P@1 (or accuracy) against steps and wall time, from a
//! metrics file, as a PNG.

use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use plotters::prelude::*;

/// DejaVu Sans, shipped so plots have text on any machine (license beside it).
const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

struct Point {
    step: f64,
    seconds: f64,
    loss: f64,
    p_at_1: Option<f64>,
}

fn read(path: &Path) -> Result<Vec<Point>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    let mut points = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let bad = |problem: String| anyhow!("{}:{}: {problem}", path.display(), i + 1);
        let record: serde_json::Value =
            serde_json::from_str(line).map_err(|e| bad(format!("not a JSON record ({e})")))?;
        let number = |key: &str| record.get(key).and_then(serde_json::Value::as_f64);
        let field = |key: &str| number(key).ok_or_else(|| bad(format!("no number `{key}`")));
        points.push(Point {
            step: field("step")?,
            seconds: field("seconds")?,
            loss: field("loss")?,
            p_at_1: number("p_at_1"),
        });
    }
    if points.is_empty() {
        bail!("{}: no metrics records", path.display());
    }
    Ok(points)
}

fn range(values: impl Iterator<Item = f64> + Clone) -> std::ops::Range<f64> {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    if hi > lo { lo..hi } else { lo - 0.5..hi + 0.5 }
}

/// Draws loss and test P@1 against steps and seconds from the JSON-lines file `metrics` into the PNG `out`.
pub fn plot(metrics: &Path, out: &Path) -> Result<()> {
    let points = read(metrics)?;
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
        .map_err(|_| anyhow!("the shipped font could not be loaded"))?;
    let root = BitMapBackend::new(out, (1200, 800)).into_drawing_area();
    let draw_err = |e: &dyn std::fmt::Display| anyhow!("cannot draw {}: {e}", out.display());
    root.fill(&WHITE).map_err(|e| draw_err(&e))?;
    let title = metrics.display().to_string();
    let root = root
        .titled(&title, ("sans-serif", 22))
        .map_err(|e| draw_err(&e))?;
    let panels = root.split_evenly((2, 2));
    let has_p1 = points.iter().any(|p| p.p_at_1.is_some());
    for (i, panel) in panels.iter().enumerate() {
        let by_time = i % 2 == 1;
        let x = |p: &Point| if by_time { p.seconds } else { p.step };
        let (name, series): (&str, Vec<(f64, f64)>) = if i < 2 {
            (
                "training loss",
                points.iter().map(|p| (x(p), p.loss)).collect(),
            )
        } else {
            (
                if has_p1 {
                    "test P@1 / accuracy"
                } else {
                    "test P@1 (none recorded)"
                },
                points
                    .iter()
                    .filter_map(|p| p.p_at_1.map(|v| (x(p), v)))
                    .collect(),
            )
        };
        let x_range = range(points.iter().map(x));
        let y_range = if series.is_empty() {
            0.0..1.0
        } else {
            range(series.iter().map(|s| s.1))
        };
        let mut chart = ChartBuilder::on(panel)
            .caption(name, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(x_range, y_range)
            .map_err(|e| draw_err(&e))?;
        chart
            .configure_mesh()
            .x_desc(if by_time { "seconds" } else { "step" })
            .draw()
            .map_err(|e| draw_err(&e))?;
        let color = if i < 2 { BLUE } else { RED };
        chart
            .draw_series(LineSeries::new(
                series.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| draw_err(&e))?;
        chart
            .draw_series(
                series
                    .iter()
                    .map(|&(a, b)| Circle::new((a, b), 3, color.filled())),
            )
            .map_err(|e| draw_err(&e))?;
    }
    root.present().map_err(|e| draw_err(&e))?;
    Ok(())
}
