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
