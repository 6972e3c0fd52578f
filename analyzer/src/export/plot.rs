//! ProfStat plots as SVG (plotters): latency per iteration (Fig. 9), node classes'
//! time against context length, matrix products' time against complexity with the
//! linear fit (Fig. 10), and idle share per op type (Fig. 6).

use std::path::Path;

use plotters::prelude::*;

use crate::{model::TokenPhase, stats::ProfStat};

/// Plot size in pixels.
const SIZE: (u32, u32) = (900, 540);
/// Classes drawn in the growth plot.
const GROWTH_CLASSES: usize = 6;

type PlotResult = Result<(), String>;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn range(vals: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in vals {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if hi <= lo {
        hi = lo + 1.0;
    }
    (lo.min(0.0), hi * 1.05)
}

/// Latency of every decode call over the run.
///
/// # Errors
/// The plotting library's message.
pub fn latency(s: &ProfStat, path: &Path) -> PlotResult {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (_, ymax) = range(s.iterations.iter().map(|r| r.latency_ms));
    let xmax = s
        .iterations
        .iter()
        .map(|r| r.index)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption("Latency per iteration", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..xmax + 1.0, 0f64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("decode call")
        .y_desc("latency (ms)")
        .draw()
        .map_err(err)?;
    let pts = |ph: TokenPhase| {
        s.iterations
            .iter()
            .filter(move |r| r.phase == ph)
            .map(|r| (f64::from(r.index), r.latency_ms))
    };
    chart
        .draw_series(LineSeries::new(pts(TokenPhase::Decode), &BLUE))
        .map_err(err)?
        .label("decode")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLUE));
    chart
        .draw_series(pts(TokenPhase::Prefill).map(|p| Circle::new(p, 5, RED.filled())))
        .map_err(err)?
        .label("prefill")
        .legend(|(x, y)| Circle::new((x + 8, y), 4, RED.filled()));
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// Time of the fastest-growing node classes over the decode steps, against position.
///
/// # Errors
/// The plotting library's message.
pub fn growth(s: &ProfStat, path: &Path) -> PlotResult {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
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
    let (xlo, xhi) = range(decode.iter().map(|r| f64::from(r.pos)));
    let (_, yhi) = range(decode.iter().flat_map(|r| {
        classes
            .iter()
            .map(|c| r.class_ms.get(*c).copied().unwrap_or(0.0) * 1e3)
    }));
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Node classes over context length (decode)",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(xlo..xhi, 0f64..yhi)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("position (context length)")
        .y_desc("time per step (µs)")
        .draw()
        .map_err(err)?;
    for (i, c) in classes.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                decode.iter().map(|r| {
                    (
                        f64::from(r.pos),
                        r.class_ms.get(*c).copied().unwrap_or(0.0) * 1e3,
                    )
                }),
                color,
            ))
            .map_err(err)?
            .label(c.to_string())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// Matrix products' time against `K·N·M·H`, with the fit over the dense products.
///
/// # Errors
/// The plotting library's message.
pub fn matmul(s: &ProfStat, path: &Path) -> PlotResult {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (_, xhi) = range(s.matmul.iter().map(|r| r.complexity as f64));
    let (_, yhi) = range(s.matmul.iter().map(|r| r.time_ns as f64 / 1e3));
    let caption = match s.matmul_fit_dense {
        Some(f) => format!("MUL_MAT time vs complexity (dense fit R² = {:.3})", f.r2),
        None => "MUL_MAT time vs complexity".to_owned(),
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..xhi, 0f64..yhi)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("multiply-adds K·N·M·H")
        .y_desc("time (µs)")
        .draw()
        .map_err(err)?;
    for (attention, color, label) in [(false, BLUE, "dense"), (true, RED, "attention kq/kqv")] {
        chart
            .draw_series(
                s.matmul
                    .iter()
                    .filter(|r| r.attention == attention)
                    .map(|r| {
                        Circle::new(
                            (r.complexity as f64, r.time_ns as f64 / 1e3),
                            4,
                            color.filled(),
                        )
                    }),
            )
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| Circle::new((x + 8, y), 4, color.filled()));
    }
    if let Some(f) = s.matmul_fit_dense {
        chart
            .draw_series(LineSeries::new(
                [0.0, xhi].map(|x| (x, (f.slope * x + f.intercept) / 1e3)),
                BLACK,
            ))
            .map_err(err)?
            .label("linear fit (dense)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// Idle share of the threads inside each op type (load imbalance).
///
/// # Errors
/// The plotting library's message.
pub fn load_balance(s: &ProfStat, path: &Path) -> PlotResult {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let n = s.op_types.len().max(1);
    let names: Vec<String> = s.op_types.iter().map(|r| r.op.clone()).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption("Thread idle share inside each op type", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((0..n).into_segmented(), 0f64..1f64)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(n)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .y_desc("idle share")
        .draw()
        .map_err(err)?;
    chart
        .draw_series(s.op_types.iter().enumerate().map(|(i, r)| {
            Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), r.idle_share),
                ],
                BLUE.mix(0.6).filled(),
            )
        }))
        .map_err(err)?;
    root.present().map_err(err)
}
