//! Plots as SVG (plotters). ProfStat's: latency per iteration (Fig. 9), node classes'
//! time against context length, matrix products' time against complexity with the
//! linear fit (Fig. 10), and idle share per op type (Fig. 6). The diff's: the two runs'
//! time-per-token distributions overlaid, and the groups' time side by side.
//!
//! Made to be read at a glance: ticks in engineering notation (`250 M`, `4.5 ms`), axes
//! that start where the data does, legends in a strip right of the plot so they never
//! cover data, and the matrix products on log-log axes (their complexity spans decades
//! in any transformer, from attention's `kq` to the output projection).

pub mod backends;
pub mod experts;

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::{
    diff::{Diff, DiffRun, DiffSide},
    export::eng,
    model::TokenPhase,
    stats::{IterationRow, ProfStat},
};

/// Picture size in pixels (plot and legend strip).
const SIZE: (u32, u32) = (960, 540);
/// Width of the legend strip on the right.
const LEGEND_W: u32 = 210;
/// Decode steps up to which the latency plot marks each step.
const MARKED_STEPS: usize = 60;
/// Classes drawn in the growth plot.
const GROWTH_CLASSES: usize = 6;
/// Series colours: Tableau 10, distinguishable on white (plotters' palette has yellows
/// that vanish).
const SERIES: [RGBColor; 8] = [
    RGBColor(0x4e, 0x79, 0xa7),
    RGBColor(0xf2, 0x8e, 0x2b),
    RGBColor(0xe1, 0x57, 0x59),
    RGBColor(0x59, 0xa1, 0x4f),
    RGBColor(0xb0, 0x7a, 0xa1),
    RGBColor(0x76, 0xb7, 0xb2),
    RGBColor(0x9c, 0x75, 0x5f),
    RGBColor(0xba, 0xb0, 0xac),
];
/// Title and tick fonts.
const TITLE: (&str, u32) = ("sans-serif", 22);
const LABEL: (&str, u32) = ("sans-serif", 15);

type PlotResult = Result<(), String>;
type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Smallest and largest finite value, if any.
fn span(vals: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    vals.filter(|v| v.is_finite())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
}

/// The data's range with a little room on both sides (an empty or flat range gets a
/// unit or ±5 % around its value).
fn padded(s: Option<(f64, f64)>) -> (f64, f64) {
    match s {
        None => (0.0, 1.0),
        Some((lo, hi)) if hi <= lo => {
            let d = if lo == 0.0 { 1.0 } else { lo.abs() * 0.05 };
            (lo - d, hi + d)
        }
        Some((lo, hi)) => {
            let d = (hi - lo) * 0.05;
            (lo - d, hi + d)
        }
    }
}

/// An integer axis over the data (decode calls, positions): whole-number ticks only.
fn int_range(s: Option<(f64, f64)>) -> std::ops::Range<i64> {
    match s {
        Some((lo, hi)) if hi > lo => lo.floor() as i64..hi.ceil() as i64,
        Some((lo, _)) => lo.floor() as i64 - 1..lo.floor() as i64 + 1,
        None => 0..1,
    }
}

/// Ticks of a log axis over `lo..hi`: the 1-2-5 sequence, or every 1..9 multiple of
/// the powers of ten when the data spans too little for three of those (plotters'
/// own log axis labels powers of ten only, so a narrow range would have none).
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let ticks = |mantissas: &[f64]| -> Vec<f64> {
        let mut out = Vec::new();
        let mut decade = 10f64.powf(lo.log10().floor());
        while decade <= hi {
            for m in mantissas {
                let v = m * decade;
                if v >= lo && v <= hi {
                    out.push(v);
                }
            }
            decade *= 10.0;
        }
        out
    };
    let coarse = ticks(&[1.0, 2.0, 5.0]);
    if coarse.len() >= 3 {
        coarse
    } else {
        ticks(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    }
}

/// How a series shows in the legend.
#[derive(Clone, Copy)]
enum Mark {
    Line,
    Dot,
    /// A filled square (a bar's colour).
    Bar,
    /// No swatch: a note.
    None,
}

/// The picture: white background, a title, and (plot area, legend strip).
fn frame<'a>(backend: SVGBackend<'a>, title: &str) -> Result<(Area<'a>, Area<'a>), String> {
    let root = backend.into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let body = root.titled(title, TITLE).map_err(err)?;
    Ok(body.split_horizontally(SIZE.0 - LEGEND_W))
}

/// Draws the legend entries top-down in the strip (never over the data).
fn legend(area: &Area<'_>, entries: &[(String, RGBAColor, Mark)]) -> PlotResult {
    for (i, (label, color, mark)) in entries.iter().enumerate() {
        let y = 30 + i as i32 * 24;
        match mark {
            Mark::Line => area
                .draw(&PathElement::new(
                    vec![(6, y), (30, y)],
                    color.stroke_width(3),
                ))
                .map_err(err)?,
            Mark::Dot => area
                .draw(&Circle::new((18, y), 5, color.filled()))
                .map_err(err)?,
            Mark::Bar => area
                .draw(&Rectangle::new([(10, y - 6), (26, y + 6)], color.filled()))
                .map_err(err)?,
            Mark::None => {}
        }
        let mut text: String = label.chars().take(24).collect();
        if label.chars().count() > 24 {
            text.push('…');
        }
        area.draw(&Text::new(text, (38, y - 8), LABEL.into_font()))
            .map_err(err)?;
    }
    Ok(())
}

/// Latency of every decode call over the run: a log time axis when the calls span a
/// decade or more (a few stalls or a long prefill would flatten the decode steps).
///
/// # Errors
/// The plotting library's message.
pub fn latency(s: &ProfStat, path: &Path) -> PlotResult {
    let (plot, strip) = frame(SVGBackend::new(path, SIZE), "Latency per decode call")?;
    let x = int_range(span(s.iterations.iter().map(|r| f64::from(r.index))));
    let times = span(
        s.iterations
            .iter()
            .map(|r| r.latency_ms * 1e-3)
            .filter(|&v| v > 0.0),
    );
    let pts = |ph: TokenPhase| {
        s.iterations
            .iter()
            .filter(move |r| r.phase == ph && r.latency_ms > 0.0)
            .map(|r| (i64::from(r.index), r.latency_ms * 1e-3))
    };
    // One line per run: none joins the last step of a run to the first of the next.
    let decode: Vec<&IterationRow> = s
        .iterations
        .iter()
        .filter(|r| r.phase == TokenPhase::Decode && r.latency_ms > 0.0)
        .collect();
    let lines: Vec<Vec<(i64, f64)>> = by_run(&decode)
        .map(|run| {
            run.iter()
                .map(|r| (i64::from(r.index), r.latency_ms * 1e-3))
                .collect()
        })
        .collect();
    // The same drawing on a linear or a log time axis (different coordinate types).
    macro_rules! draw {
        ($y:expr, $desc:expr) => {{
            let mut chart = ChartBuilder::on(&plot)
                .margin(12)
                .x_label_area_size(45)
                .y_label_area_size(75)
                .build_cartesian_2d(x, $y)
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_desc("decode call (prefill chunks, then one per token)")
                .y_desc($desc)
                .x_label_formatter(&|v| eng(*v as f64, ""))
                .y_label_formatter(&|v| eng(*v, "s"))
                .label_style(LABEL)
                .draw()
                .map_err(err)?;
            for line in &lines {
                chart
                    .draw_series(LineSeries::new(line.iter().copied(), BLUE.stroke_width(2)))
                    .map_err(err)?;
            }
            chart
                .draw_series(pts(TokenPhase::Prefill).map(|p| Circle::new(p, 5, RED.filled())))
                .map_err(err)?;
            // Few steps: mark each, a line between two points hides where they are.
            if pts(TokenPhase::Decode).count() <= MARKED_STEPS {
                chart
                    .draw_series(pts(TokenPhase::Decode).map(|p| Circle::new(p, 3, BLUE.filled())))
                    .map_err(err)?;
            }
        }};
    }
    match times {
        Some((lo, hi)) if hi >= 10.0 * lo => {
            let (lo, hi) = (lo / 1.2, hi * 1.2);
            draw!(
                (lo..hi).log_scale().with_key_points(log_ticks(lo, hi)),
                "latency (log)"
            );
        }
        other => {
            let (lo, hi) = padded(other);
            draw!(lo.max(0.0)..hi, "latency");
        }
    }
    let mut entries = vec![
        ("decode step".to_owned(), BLUE.to_rgba(), Mark::Line),
        ("prefill chunk".to_owned(), RED.to_rgba(), Mark::Dot),
    ];
    let all_runs = s
        .iterations
        .last()
        .map_or(0, |last| last.run + 1 - s.iterations[0].run);
    if all_runs > 1 {
        entries.push((
            format!("{all_runs} runs (from pos 0)"),
            BLACK.to_rgba(),
            Mark::None,
        ));
    }
    legend(&strip, &entries)?;
    plot.present().map_err(err)
}

/// Decode calls (in call order) cut where their run changes.
fn by_run<'a, 'b>(
    rows: &'b [&'a IterationRow],
) -> impl Iterator<Item = &'b [&'a IterationRow]> + 'b {
    rows.chunk_by(|a, b| a.run == b.run)
}

/// Time of the fastest-growing node classes over the decode steps, against position.
///
/// # Errors
/// The plotting library's message.
pub fn growth(s: &ProfStat, path: &Path) -> PlotResult {
    let (plot, strip) = frame(
        SVGBackend::new(path, SIZE),
        "Node classes' time per decode step over context length",
    )?;
    let classes: Vec<&str> = s
        .growth
        .iter()
        .take(GROWTH_CLASSES)
        .map(|g| g.class.as_str())
        .collect();
    let decode: Vec<_> = s
        .iterations
        .iter()
        .filter(|r| r.phase == TokenPhase::Decode)
        .collect();
    let secs =
        |r: &crate::stats::IterationRow, c: &str| r.class_ms.get(c).copied().unwrap_or(0.0) * 1e-3;
    let x = int_range(span(decode.iter().map(|r| f64::from(r.pos))));
    let (ylo, yhi) = padded(span(
        decode
            .iter()
            .flat_map(|r| classes.iter().map(move |c| secs(r, c))),
    ));
    let mut chart = ChartBuilder::on(&plot)
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(75)
        .build_cartesian_2d(x, ylo.max(0.0)..yhi)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("position (tokens in context)")
        .y_desc("time per step")
        .x_label_formatter(&|v| eng(*v as f64, ""))
        .y_label_formatter(&|v| eng(*v, "s"))
        .label_style(LABEL)
        .draw()
        .map_err(err)?;
    let mut entries = Vec::new();
    // One line per run and class: runs of one process start again at position 0.
    for (i, c) in classes.iter().enumerate() {
        let color = SERIES[i % SERIES.len()].to_rgba();
        for run in by_run(&decode) {
            chart
                .draw_series(LineSeries::new(
                    run.iter().map(|r| (i64::from(r.pos), secs(r, c))),
                    color.stroke_width(2),
                ))
                .map_err(err)?;
        }
        entries.push((c.to_string(), color, Mark::Line));
    }
    legend(&strip, &entries)?;
    plot.present().map_err(err)
}

/// Matrix products' time against `K·N·M·H` on log-log axes, with the linear fit over
/// the dense products drawn on the same axes (a curve where the intercept matters).
///
/// # Errors
/// The plotting library's message.
pub fn matmul(s: &ProfStat, path: &Path) -> PlotResult {
    let caption = match s.matmul_fit_dense {
        Some(f) => format!("MUL_MAT time vs complexity (dense fit R² = {:.3})", f.r2),
        None => "MUL_MAT time vs complexity".to_owned(),
    };
    let (plot, strip) = frame(SVGBackend::new(path, SIZE), &caption)?;
    let rows: Vec<_> = s
        .matmul
        .iter()
        .filter(|r| r.complexity > 0 && r.time_ns > 0)
        .map(|r| (r.complexity as f64, r.time_ns as f64 * 1e-9, r.attention))
        .collect();
    // Log axes: a quarter of a decade of room on each side.
    let log_range = |s: Option<(f64, f64)>| match s {
        Some((lo, hi)) => (lo / 1.5, hi * 1.5),
        None => (1.0, 10.0),
    };
    let (xlo, xhi) = log_range(span(rows.iter().map(|r| r.0)));
    let (ylo, yhi) = log_range(span(rows.iter().map(|r| r.1)));
    let mut chart = ChartBuilder::on(&plot)
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(75)
        .build_cartesian_2d(
            (xlo..xhi).log_scale().with_key_points(log_ticks(xlo, xhi)),
            (ylo..yhi).log_scale().with_key_points(log_ticks(ylo, yhi)),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("multiply-adds K·N·M·H (log)")
        .y_desc("time (log)")
        .x_label_formatter(&|v| eng(*v, ""))
        .y_label_formatter(&|v| eng(*v, "s"))
        .label_style(LABEL)
        .draw()
        .map_err(err)?;
    let mut entries = Vec::new();
    for (attention, color, label) in [(false, BLUE, "dense"), (true, RED, "attention kq/kqv")] {
        chart
            .draw_series(
                rows.iter()
                    .filter(|r| r.2 == attention)
                    .map(|r| Circle::new((r.0, r.1), 4, color.mix(0.7).filled())),
            )
            .map_err(err)?;
        entries.push((label.to_owned(), color.to_rgba(), Mark::Dot));
    }
    if let Some(f) = s.matmul_fit_dense {
        // Sampled evenly in log x so the (affine) fit is drawn faithfully on log axes.
        let steps = 64;
        let pts: Vec<(f64, f64)> = (0..=steps)
            .map(|i| xlo * (xhi / xlo).powf(f64::from(i) / f64::from(steps)))
            .map(|x| (x, (f.slope * x + f.intercept) * 1e-9))
            .filter(|&(_, y)| y >= ylo && y <= yhi)
            .collect();
        chart
            .draw_series(LineSeries::new(pts, BLACK.stroke_width(2)))
            .map_err(err)?;
        entries.push(("linear fit (dense)".to_owned(), BLACK.to_rgba(), Mark::Line));
    }
    legend(&strip, &entries)?;
    plot.present().map_err(err)
}

/// Idle share of the threads inside each op type (load imbalance), as horizontal bars
/// in the op types' order (largest time first, at the top).
///
/// # Errors
/// The plotting library's message.
pub fn load_balance(s: &ProfStat, path: &Path) -> PlotResult {
    if s.op_types.is_empty() {
        // A recording without operators (token and graph levels, `--sample`).
        return Err("no operator spans to draw".to_owned());
    }
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let plot = root
        .titled("Thread idle share inside each op type", TITLE)
        .map_err(err)?;
    let mut ops: Vec<_> = s.op_types.iter().collect();
    ops.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms));
    let n = ops.len().max(1);
    let names: Vec<String> = ops.iter().map(|r| r.op.clone()).collect();
    // One segment per op type: `(0..k).into_segmented()` has k+1 segments (its end
    // is a value too). Row 0 is at the bottom, so the first op type goes to the top.
    let rows = n.saturating_sub(1).max(1);
    let xhi = ops.iter().map(|r| r.idle_share).fold(0.0f64, f64::max);
    let xhi = (xhi * 1.15).clamp(0.05, 1.0);
    let row = |i: usize| n - 1 - i;
    let mut chart = ChartBuilder::on(&plot)
        .margin(12)
        .margin_right(40)
        .x_label_area_size(45)
        .y_label_area_size(150)
        .build_cartesian_2d(0f64..xhi, (0..rows).into_segmented())
        .map_err(err)?;
    chart
        .configure_mesh()
        .y_labels(rows + 1)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(r) if *r < n => names[n - 1 - r].clone(),
            _ => String::new(),
        })
        .x_label_formatter(&|v| format!("{:.0}%", v * 100.0))
        .x_desc("share of the threads' time in the op spent waiting for the slowest thread")
        .disable_y_mesh()
        .label_style(LABEL)
        .draw()
        .map_err(err)?;
    chart
        .draw_series(ops.iter().enumerate().map(|(i, r)| {
            let mut bar = Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(row(i))),
                    (r.idle_share, SegmentValue::Exact(row(i) + 1)),
                ],
                BLUE.mix(0.6).filled(),
            );
            bar.set_margin(3, 3, 0, 0);
            bar
        }))
        .map_err(err)?;
    root.present().map_err(err)
}

/// Run A's and run B's colours in the diff plots.
const RUN_COLORS: [RGBColor; 2] = [SERIES[0], SERIES[1]];

/// The two runs' time per output token as empirical distribution functions on one axis
/// (log when they span a decade or more): where a curve sits further left, that run's
/// tokens were faster; a step shows a cluster of equal times, a long tail slow outliers.
/// The legend carries each run's TTFT (one value per run).
///
/// # Errors
/// The plotting library's message.
pub fn tpot_overlay(d: &Diff, out: &mut String) -> PlotResult {
    let (plot, strip) = frame(
        SVGBackend::with_string(out, SIZE),
        "Time per output token, A and B (distribution)",
    )?;
    let sorted = |v: &[f64]| {
        let mut v: Vec<f64> = v.iter().map(|ms| ms * 1e-3).filter(|s| *s > 0.0).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let runs = [sorted(&d.a.tpot_ms), sorted(&d.b.tpot_ms)];
    // Each sorted sample as the steps of its distribution function.
    let steps = |v: &[f64]| -> Vec<(f64, f64)> {
        let n = v.len() as f64;
        v.iter()
            .enumerate()
            .flat_map(|(i, &x)| [(x, i as f64 / n), (x, (i + 1) as f64 / n)])
            .collect()
    };
    let range = span(runs.iter().flatten().copied());
    macro_rules! draw {
        ($x:expr, $desc:expr) => {{
            let mut chart = ChartBuilder::on(&plot)
                .margin(12)
                .x_label_area_size(45)
                .y_label_area_size(75)
                .build_cartesian_2d($x, 0f64..1.0)
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_desc($desc)
                .y_desc("share of tokens at most this slow")
                .x_label_formatter(&|v| eng(*v, "s"))
                .y_label_formatter(&|v| format!("{:.0}%", v * 100.0))
                .label_style(LABEL)
                .draw()
                .map_err(err)?;
            for (run, color) in runs.iter().zip(RUN_COLORS) {
                chart
                    .draw_series(LineSeries::new(steps(run), color.stroke_width(3)))
                    .map_err(err)?;
            }
        }};
    }
    match range {
        Some((lo, hi)) if hi >= 10.0 * lo => {
            let (lo, hi) = (lo / 1.2, hi * 1.2);
            draw!(
                (lo..hi).log_scale().with_key_points(log_ticks(lo, hi)),
                "time per output token (log)"
            );
        }
        other => {
            let (lo, hi) = padded(other);
            draw!(lo.max(0.0)..hi, "time per output token");
        }
    }
    let label = |name: &str, r: &DiffRun| {
        let ttft = r
            .summary
            .ttft_ms
            .map_or_else(|| "–".to_owned(), |v| eng(v * 1e-3, "s"));
        format!("{name}: TTFT {ttft}")
    };
    legend(
        &strip,
        &[
            (label("A", &d.a), RUN_COLORS[0].to_rgba(), Mark::Line),
            (label("B", &d.b), RUN_COLORS[1].to_rgba(), Mark::Line),
        ],
    )?;
    plot.present().map_err(err)
}

/// The `top` groups that changed most (in both runs), A's and B's time per call as
/// bars side by side, largest change at the top.
///
/// # Errors
/// The plotting library's message.
pub fn diff_groups(d: &Diff, top: usize, out: &mut String) -> PlotResult {
    let phase = d.phase.call_name();
    let title = format!("Time per {phase} by {}, A and B", d.by.name());
    let (plot, strip) = frame(SVGBackend::with_string(out, SIZE), &title)?;
    let rows: Vec<_> = d
        .rows
        .iter()
        .filter(|r| r.a.is_some() && r.b.is_some())
        .take(top)
        .collect();
    let n = rows.len().max(1);
    let value = |s: &Option<DiffSide>| s.as_ref().map_or(0.0, |s| s.ms_per_call * 1e-3);
    let xhi = rows
        .iter()
        .flat_map(|r| [value(&r.a), value(&r.b)])
        .fold(0.0f64, f64::max);
    let xhi = if xhi > 0.0 { xhi * 1.08 } else { 1e-3 };
    // Two segments per group, A's above B's; group 0 (the largest change) at the top.
    // `(0..k).into_segmented()` has k+1 segments (its end is a value too).
    let segments = 2 * n - 1;
    let group_at = |seg: usize| n - 1 - seg / 2;
    let keys: Vec<String> = rows.iter().map(|r| r.key.clone()).collect();
    let mut chart = ChartBuilder::on(&plot)
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(170)
        .build_cartesian_2d(0f64..xhi, (0..segments).into_segmented())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(format!("time per {phase}"))
        .x_label_formatter(&|v| eng(*v, "s"))
        .y_labels(segments + 1)
        .y_label_formatter(&|v| match v {
            // The label sits at the A bar of the group.
            SegmentValue::CenterOf(seg) if seg % 2 == 1 && *seg < 2 * n => {
                let k = &keys[group_at(*seg)];
                let mut short: String = k.chars().take(22).collect();
                if k.chars().count() > 22 {
                    short.push('…');
                }
                short
            }
            _ => String::new(),
        })
        .disable_y_mesh()
        .label_style(LABEL)
        .draw()
        .map_err(err)?;
    for (i, r) in rows.iter().enumerate() {
        let b_seg = 2 * (n - 1 - i);
        for (side, seg, color, (top, bottom)) in [
            (&r.a, b_seg + 1, RUN_COLORS[0], (5, 0)),
            (&r.b, b_seg, RUN_COLORS[1], (0, 5)),
        ] {
            let mut bar = Rectangle::new(
                [
                    (0.0, SegmentValue::Exact(seg)),
                    (value(side), SegmentValue::Exact(seg + 1)),
                ],
                color.filled(),
            );
            bar.set_margin(top, bottom, 0, 0);
            chart.draw_series(std::iter::once(bar)).map_err(err)?;
        }
    }
    legend(
        &strip,
        &[
            ("A".to_owned(), RUN_COLORS[0].to_rgba(), Mark::Line),
            ("B".to_owned(), RUN_COLORS[1].to_rgba(), Mark::Line),
        ],
    )?;
    plot.present().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_start_where_the_data_does() {
        let (lo, hi) = padded(Some((10.0, 20.0)));
        assert!((lo - 9.5).abs() < 1e-12 && (hi - 20.5).abs() < 1e-12);
        assert_eq!(padded(None), (0.0, 1.0));
        let (lo, hi) = padded(Some((4.0, 4.0)));
        assert!(lo < 4.0 && hi > 4.0);
        assert_eq!(span([3.0, f64::NAN, -1.0].into_iter()), Some((-1.0, 3.0)));
        assert_eq!(int_range(Some((5.0, 37.0))), 5..37);
    }

    #[test]
    fn log_axes_always_get_ticks() {
        assert_eq!(
            log_ticks(0.8e3, 1.2e5),
            vec![1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5]
        );
        // Less than a decade: every multiple.
        let t = log_ticks(1.1e-4, 3.5e-4);
        assert_eq!(t.len(), 2);
        assert!((t[0] - 2e-4).abs() < 1e-12 && (t[1] - 3e-4).abs() < 1e-12);
    }
}
