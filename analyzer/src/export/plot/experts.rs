//! The expert view's plots (seed 002 Fig 13): activated experts over decode iterations
//! with the expert products' time, activation frequency per layer and expert, and time
//! against mean reuse distance.

use std::path::Path;

use plotters::prelude::*;

use super::{LABEL, Mark, PlotResult, SERIES, SIZE, err, frame, legend, padded, span};
use crate::{experts::LayerExperts, export::eng, stats::ProfStat};

/// The layer Fig 13 shows: the first one (its `ffn_moe_up-0`).
fn shown_layer(s: &ProfStat) -> Option<&LayerExperts> {
    s.experts.as_ref()?.layers.first()
}

/// Dot colour of an activated expert by its reuse distance: first use black, then from
/// green (used in the last iterations) to red (not used for long).
fn distance_color(d: Option<u32>) -> RGBAColor {
    match d {
        None => BLACK.to_rgba(),
        Some(d) => {
            let t = (f64::from(d.min(32)) / 32.0).sqrt();
            HSLColor((1.0 - t) * 0.33, 0.8, 0.42).to_rgba()
        }
    }
}

/// Fig 13: for the first layer, every decode iteration's activated experts (dots,
/// coloured by reuse distance) and the layer's expert products' time (line, right axis).
///
/// # Errors
/// The plotting library's message, or no expert routing.
pub fn activations(s: &ProfStat, path: &Path) -> PlotResult {
    let l = shown_layer(s).ok_or("no expert routing in the trace")?;
    let n_expert = s.experts.as_ref().map_or(0, |x| x.n_expert).max(1);
    let decode: Vec<_> = l
        .iterations
        .iter()
        .filter(|i| i.decode_step.is_some())
        .collect();
    let title = format!(
        "Experts activated by layer {} per decode iteration",
        l.layer
    );
    let (plot, strip) = frame(SVGBackend::new(path, SIZE), &title)?;
    let steps = decode.len().max(1) as f64;
    let (_, t_hi) = padded(span(decode.iter().map(|i| i.time_ns as f64 * 1e-9)));
    let mut chart = ChartBuilder::on(&plot)
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .right_y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..steps - 0.5, -0.5f64..f64::from(n_expert) - 0.5)
        .map_err(err)?
        .set_secondary_coord(-0.5f64..steps - 0.5, 0f64..t_hi.max(1e-9));
    chart
        .configure_mesh()
        .x_desc("decode iteration")
        .y_desc("expert id")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style(LABEL)
        .draw()
        .map_err(err)?;
    chart
        .configure_secondary_axes()
        .y_desc("expert products' time")
        .y_label_formatter(&|v| eng(*v, "s"))
        .label_style(LABEL)
        .draw()
        .map_err(err)?;
    let dots = decode.iter().enumerate().flat_map(|(x, it)| {
        let mut seen = Vec::new();
        it.ids.iter().filter_map(move |&e| {
            if seen.contains(&e) {
                return None;
            }
            seen.push(e);
            let d = it.reuse_distance.get(seen.len() - 1).copied().flatten();
            Some(Circle::new(
                (x as f64, f64::from(e)),
                4,
                distance_color(d).filled(),
            ))
        })
    });
    chart.draw_series(dots).map_err(err)?;
    chart
        .draw_secondary_series(LineSeries::new(
            decode
                .iter()
                .enumerate()
                .map(|(x, it)| (x as f64, it.time_ns as f64 * 1e-9)),
            SERIES[0].stroke_width(2),
        ))
        .map_err(err)?;
    legend(
        &strip,
        &[
            (
                "time (right axis)".to_owned(),
                SERIES[0].to_rgba(),
                Mark::Line,
            ),
            ("expert, first use".to_owned(), BLACK.to_rgba(), Mark::Dot),
            (
                "reused after 1".to_owned(),
                distance_color(Some(1)),
                Mark::Dot,
            ),
            (
                "reused after 8".to_owned(),
                distance_color(Some(8)),
                Mark::Dot,
            ),
            (
                "reused after 32+".to_owned(),
                distance_color(Some(32)),
                Mark::Dot,
            ),
        ],
    )?;
    plot.present().map_err(err)
}

/// Activation frequency per layer (rows) and expert (columns) over the decode
/// iterations: a dark cell is an expert the layer uses often.
///
/// # Errors
/// The plotting library's message, or no expert routing.
pub fn frequency(s: &ProfStat, path: &Path) -> PlotResult {
    let x = s.experts.as_ref().ok_or("no expert routing in the trace")?;
    let (plot, strip) = frame(
        SVGBackend::new(path, SIZE),
        "Expert activations per layer over the decode iterations",
    )?;
    let n_layers = x.layers.len().max(1);
    // One segment per layer (`(0..k).into_segmented()` has k + 1 segments).
    let rows = n_layers.saturating_sub(1).max(1);
    let n_expert = f64::from(x.n_expert.max(1));
    let layer_names: Vec<i32> = x.layers.iter().map(|l| l.layer).collect();
    let max = x
        .layers
        .iter()
        .flat_map(|l| l.frequency.iter().copied())
        .max()
        .unwrap_or(1)
        .max(1);
    let mut chart = ChartBuilder::on(&plot)
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5..n_expert - 0.5, (0..rows).into_segmented())
        .map_err(err)?;
    // Columns centred on whole numbers, so each tick labels its expert.
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("expert id")
        .y_desc("layer")
        .y_labels(rows + 1)
        .x_label_formatter(&|v| {
            if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(r) => layer_names.get(*r).map_or(String::new(), i32::to_string),
            _ => String::new(),
        })
        .label_style(LABEL)
        .draw()
        .map_err(err)?;
    let cells = x.layers.iter().enumerate().flat_map(|(row, l)| {
        l.frequency.iter().enumerate().map(move |(e, &f)| {
            let t = f as f64 / max as f64;
            let color = HSLColor(0.62, 0.65, 0.97 - 0.65 * t);
            let x = e as f64;
            Rectangle::new(
                [
                    (x - 0.5, SegmentValue::Exact(row)),
                    (x + 0.5, SegmentValue::Exact(row + 1)),
                ],
                color.filled(),
            )
        })
    });
    chart.draw_series(cells).map_err(err)?;
    legend(
        &strip,
        &[
            (
                format!("used {max}×"),
                HSLColor(0.62, 0.65, 0.32).to_rgba(),
                Mark::Dot,
            ),
            (
                "never used".to_owned(),
                HSLColor(0.62, 0.65, 0.97).to_rgba(),
                Mark::Dot,
            ),
        ],
    )?;
    plot.present().map_err(err)
}

/// Every layer's decode iterations: the expert products' time against the mean reuse
/// distance of the experts they used, with Pearson's r in the title; red points had major
/// page faults.
///
/// # Errors
/// The plotting library's message, or no expert routing.
pub fn reuse(s: &ProfStat, path: &Path) -> PlotResult {
    let x = s.experts.as_ref().ok_or("no expert routing in the trace")?;
    let pts: Vec<(f64, f64, bool)> = x
        .layers
        .iter()
        .flat_map(|l| l.iterations.iter())
        .filter(|i| i.decode_step.is_some())
        .filter_map(|i| {
            Some((
                i.mean_distance?,
                i.time_ns as f64 * 1e-9,
                i.major_faults.unwrap_or(0) > 0,
            ))
        })
        .collect();
    let r = x
        .time_distance_r
        .map_or("r n/a".to_owned(), |r| format!("r = {r:.2}"));
    let title = format!("Expert products' time against mean reuse distance ({r})");
    let (plot, strip) = frame(SVGBackend::new(path, SIZE), &title)?;
    let (x_lo, x_hi) = padded(span(pts.iter().map(|p| p.0)));
    let (_, y_hi) = padded(span(pts.iter().map(|p| p.1)));
    let mut chart = ChartBuilder::on(&plot)
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(75)
        .build_cartesian_2d(x_lo.min(0.0)..x_hi, 0f64..y_hi.max(1e-9))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("mean iterations since the activated experts were last used")
        .y_desc("time of the layer's expert products")
        .y_label_formatter(&|v| eng(*v, "s"))
        .label_style(LABEL)
        .draw()
        .map_err(err)?;
    chart
        .draw_series(pts.iter().map(|&(d, t, faulted)| {
            let c = if faulted { SERIES[2] } else { SERIES[0] };
            Circle::new((d, t), 3, c.mix(0.7).filled())
        }))
        .map_err(err)?;
    legend(
        &strip,
        &[
            ("no major fault".to_owned(), SERIES[0].to_rgba(), Mark::Dot),
            (
                "major page faults".to_owned(),
                SERIES[2].to_rgba(),
                Mark::Dot,
            ),
        ],
    )?;
    plot.present().map_err(err)
}
