//! The backend view's plot (seed 002 Fig 7 as numbers): each decode call's time split
//! into compute per backend, copies between backends, the CPU's waits for the accel
//! and KV-cache I/O, as stacked bars.

use std::path::Path;

use plotters::prelude::*;

use super::{LABEL, Mark, PlotResult, SERIES, SIZE, err, frame, legend};
use crate::{backends::TokenSplit, export::eng, stats::ProfStat};

/// The stacked parts of a bar: (label, colour, ns of a call).
fn parts(backends: &[String]) -> Vec<(String, RGBAColor, Box<dyn Fn(&TokenSplit) -> u64 + '_>)> {
    let mut out: Vec<(String, RGBAColor, Box<dyn Fn(&TokenSplit) -> u64>)> = Vec::new();
    for (i, b) in backends.iter().enumerate() {
        let name = b.clone();
        out.push((
            format!("{b} compute"),
            SERIES[[0, 3, 4, 5][i % 4]].to_rgba(),
            Box::new(move |t: &TokenSplit| t.compute_ns.get(&name).copied().unwrap_or(0)),
        ));
    }
    out.push((
        "copies".to_owned(),
        SERIES[1].to_rgba(),
        Box::new(|t: &TokenSplit| t.copy_ns),
    ));
    out.push((
        "CPU waits for accel".to_owned(),
        SERIES[2].to_rgba(),
        Box::new(|t: &TokenSplit| t.sync_ns),
    ));
    out.push((
        "KV I/O".to_owned(),
        SERIES[6].to_rgba(),
        Box::new(|t: &TokenSplit| t.kv_io_ns),
    ));
    out
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
    let parts = parts(&b.backends);
    let top = calls
        .iter()
        .map(|t| parts.iter().map(|p| (p.2)(t)).sum::<u64>())
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
        for (_, color, f) in &parts {
            let h = f(t) as f64 * 1e-9;
            if h <= 0.0 {
                continue;
            }
            let x = x as f64;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x - half, base), (x + half, base + h)],
                    color.filled(),
                )))
                .map_err(err)?;
            base += h;
        }
    }
    let total = &b.total;
    let mut entries: Vec<(String, RGBAColor, Mark)> = parts
        .iter()
        .filter(|p| (p.2)(total) > 0)
        .map(|(label, color, f)| {
            (
                format!("{label} {}", eng(f(total) as f64 * 1e-9, "s")),
                *color,
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
