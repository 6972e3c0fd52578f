//! The backend view's plot (seed 002 Fig 7 as numbers): each decode call's time split
//! into compute per backend, copies between backends, the CPU's waits for the accel
//! and KV-cache I/O, as stacked bars.

use std::path::Path;

use plotters::prelude::*;

use super::{LABEL, Mark, PlotResult, SERIES, SIZE, err, frame, legend};
use crate::{backends::TokenSplit, export::eng, stats::ProfStat};

/// One stacked part of a bar.
enum Part {
    /// Compute on the named backend.
    Compute(String),
    Copies,
    SyncWaits,
    KvIo,
}

impl Part {
    fn label(&self) -> String {
        match self {
            Part::Compute(b) => format!("{b} compute"),
            Part::Copies => "copies".to_owned(),
            Part::SyncWaits => "sync waits".to_owned(),
            Part::KvIo => "KV I/O".to_owned(),
        }
    }

    fn color(&self, i: usize) -> RGBAColor {
        match self {
            Part::Compute(_) => SERIES[[0, 3, 4, 5][i % 4]].to_rgba(),
            Part::Copies => SERIES[1].to_rgba(),
            Part::SyncWaits => SERIES[2].to_rgba(),
            Part::KvIo => SERIES[6].to_rgba(),
        }
    }

    fn ns(&self, t: &TokenSplit) -> u64 {
        match self {
            Part::Compute(b) => t.compute_ns.get(b).copied().unwrap_or(0),
            Part::Copies => t.copy_ns,
            Part::SyncWaits => t.sync_ns,
            Part::KvIo => t.kv_io_ns,
        }
    }
}

/// Stacked bars per decode call: compute per backend, copies, sync waits, KV I/O.
///
/// # Errors
/// The plotting library's message, or a trace without splits or KV I/O.
pub fn split(s: &ProfStat, path: &Path) -> PlotResult {
    let b = s
        .backends
        .as_ref()
        .ok_or("no second backend or KV budget in the trace")?;
    let calls: Vec<&TokenSplit> = b.tokens.iter().filter(|t| !t.splits.is_empty()).collect();
    let parts: Vec<Part> = b
        .backends
        .iter()
        .map(|n| Part::Compute(n.clone()))
        .chain([Part::Copies, Part::SyncWaits, Part::KvIo])
        .collect();
    let top = calls
        .iter()
        .map(|t| parts.iter().map(|p| p.ns(t)).sum::<u64>())
        .max()
        .unwrap_or(1)
        .max(1) as f64
        * 1e-9
        * 1.05;
    let (plot, strip) = frame(
        SVGBackend::new(path, SIZE),
        "Time per decode call by backend, copies, waits and KV I/O",
    )?;
    let n = calls.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&plot)
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..n - 0.5, 0f64..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("decode call")
        .y_desc("time")
        .x_label_formatter(&|v| format!("{:.0}", v))
        .y_label_formatter(&|v| eng(*v, "s"))
        .label_style(LABEL)
        .disable_x_mesh()
        .draw()
        .map_err(err)?;
    let half = if calls.len() > 200 { 0.5 } else { 0.4 };
    for (x, t) in calls.iter().enumerate() {
        let mut base = 0.0;
        for (i, part) in parts.iter().enumerate() {
            let h = part.ns(t) as f64 * 1e-9;
            if h <= 0.0 {
                continue;
            }
            let x = x as f64;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x - half, base), (x + half, base + h)],
                    part.color(i).filled(),
                )))
                .map_err(err)?;
            base += h;
        }
    }
    let total = &b.total;
    let mut entries: Vec<(String, RGBAColor, Mark)> = parts
        .iter()
        .enumerate()
        .filter(|(_, p)| p.ns(total) > 0)
        .map(|(i, p)| {
            (
                format!("{} {}", p.label(), eng(p.ns(total) as f64 * 1e-9, "s")),
                p.color(i),
                Mark::Bar,
            )
        })
        .collect();
    entries.push((
        format!("{} calls, totals", calls.len()),
        BLACK.to_rgba(),
        Mark::None,
    ));
    legend(&strip, &entries)?;
    plot.present().map_err(err)
}

/// One decode step by backend and thread (seed 002 Fig 7): graph splits as light bands,
/// operators, copies, the CPU's waits for the accel and KV I/O as bars.
///
/// # Errors
/// The plotting library's message, or no split or KV I/O in a decode step.
pub fn timeline(s: &ProfStat, path: &Path) -> PlotResult {
    use crate::backends::BarKind;
    let call = s
        .backends
        .as_ref()
        .and_then(|b| b.call.as_ref())
        .ok_or("no decode step with a split or KV I/O in the trace")?;
    let (plot, strip) = frame(
        SVGBackend::new(path, SIZE),
        &format!("Decode call {} by backend and thread", call.token),
    )?;
    let n = call.lanes.len().max(1);
    let end = call.dur_ns.max(1) as f64 * 1e-9;
    let mut chart = ChartBuilder::on(&plot)
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(230)
        .build_cartesian_2d(0f64..end, 0f64..n as f64)
        .map_err(err)?;
    let lanes = call.lanes.clone();
    chart
        .configure_mesh()
        .x_desc("time in the decode call")
        .x_label_formatter(&|v| eng(*v, "s"))
        .y_labels(n * 2 + 1)
        .y_label_formatter(&|v| {
            // Lane i spans [n-1-i, n-i): label its middle.
            let f = n as f64 - v;
            let i = f.floor() as usize;
            if (f - f.floor() - 0.5).abs() < 0.26 && i < lanes.len() {
                format!("{}: {}", lanes[i].1, lanes[i].0)
            } else {
                String::new()
            }
        })
        .label_style(LABEL)
        .disable_y_mesh()
        .draw()
        .map_err(err)?;
    let color = |k: BarKind, backend: &str| -> RGBAColor {
        match k {
            BarKind::Split => RGBColor(0xe8, 0xe8, 0xe8).to_rgba(),
            BarKind::Compute if backend == "cpu" => SERIES[0].to_rgba(),
            BarKind::Compute => SERIES[3].to_rgba(),
            BarKind::Copy => SERIES[1].to_rgba(),
            BarKind::Sync => SERIES[2].to_rgba(),
            BarKind::Kv => SERIES[6].to_rgba(),
        }
    };
    for pass in [true, false] {
        for b in call
            .bars
            .iter()
            .filter(|b| (b.kind == BarKind::Split) == pass)
        {
            let top = (n - b.lane) as f64;
            let (y0, y1) = if pass {
                (top - 0.95, top - 0.05)
            } else {
                (top - 0.8, top - 0.2)
            };
            let backend = &call.lanes[b.lane].1;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [
                        (b.start_ns as f64 * 1e-9, y0),
                        (b.end_ns.max(b.start_ns + 1) as f64 * 1e-9, y1),
                    ],
                    color(b.kind, backend).filled(),
                )))
                .map_err(err)?;
        }
    }
    // The other backends by name (`accel`, `vulkan`): what the CPU waits for.
    let mut others: Vec<&str> = call
        .lanes
        .iter()
        .map(|(_, b)| b.as_str())
        .filter(|b| *b != "cpu")
        .collect();
    others.dedup();
    let mut entries = vec![
        (
            "graph split".to_owned(),
            color(BarKind::Split, "cpu"),
            Mark::Bar,
        ),
        (
            "cpu operator".to_owned(),
            color(BarKind::Compute, "cpu"),
            Mark::Bar,
        ),
    ];
    if others.contains(&"accel") {
        entries.push((
            "accel operator".to_owned(),
            color(BarKind::Compute, "accel"),
            Mark::Bar,
        ));
    }
    entries.extend([
        (
            "copy between backends".to_owned(),
            color(BarKind::Copy, "cpu"),
            Mark::Bar,
        ),
        (
            format!(
                "CPU waits for {}",
                if others.is_empty() {
                    "a backend".to_owned()
                } else {
                    others.join(", ")
                }
            ),
            color(BarKind::Sync, "cpu"),
            Mark::Bar,
        ),
        ("KV I/O".to_owned(), color(BarKind::Kv, "cpu"), Mark::Bar),
    ]);
    legend(&strip, &entries)?;
    plot.present().map_err(err)
}
