//! The timeline's tracks beside the thread tracks: scheduler states, GPU lanes, the
//! CPU's waits for an accel, counters and instants.

use std::io;

use crate::model::{TokenPhase, TraceModel};

use super::{Arg, Instant, Slice, SliceName, TimelineSink, TrackId, layout::Layout, slice_args};

/// Writes one slice that nothing nests in (a lane's slices follow each other).
fn flat_slice(
    sink: &mut impl TimelineSink,
    start_ns: u64,
    end_ns: u64,
    name: SliceName<'_>,
    category: &str,
    args: &[Arg<'_>],
) -> io::Result<()> {
    sink.begin(&Slice {
        start_ns,
        end_ns,
        name,
        category,
        args,
        flows: &[],
        terminating_flows: &[],
        node: None,
    })?;
    sink.end(end_ns)
}

/// Each target thread's scheduler states, on its `sched` track (when it has one).
///
/// # Errors
/// The sink's I/O errors.
pub fn write_states(
    model: &TraceModel,
    layout: &Layout<'_>,
    sink: &mut impl TimelineSink,
) -> io::Result<()> {
    let mut args = Vec::new();
    for th in &layout.threads {
        if layout.track(TrackId::Sched(th.tid)).is_none() {
            continue;
        }
        sink.sequence(TrackId::Sched(th.tid))?;
        for s in model.threads()[th.index as usize].states.slices() {
            args.clear();
            let name = slice_args::sched_state(s, &mut args);
            let end = s.end_ns.max(s.start_ns);
            flat_slice(
                sink,
                s.start_ns,
                end,
                SliceName::Shared(&name),
                "sched",
                &args,
            )?;
        }
    }
    Ok(())
}

/// Each GPU lane's node executions.
///
/// # Errors
/// The sink's I/O errors.
pub fn write_gpu(layout: &Layout<'_>, sink: &mut impl TimelineSink) -> io::Result<()> {
    let mut args = Vec::new();
    for &kind in &layout.gpu.kinds {
        sink.sequence(TrackId::GpuLane(kind))?;
        for g in layout.gpu.slices.iter().filter(|g| g.backend_kind == kind) {
            args.clear();
            let name = slice_args::gpu(g, &mut args);
            flat_slice(sink, g.start_ns, g.end_ns, name, "gpu", &args)?;
        }
    }
    Ok(())
}

/// The CPU's waits for an accel.
///
/// # Errors
/// The sink's I/O errors.
pub fn write_sync_waits(layout: &Layout<'_>, sink: &mut impl TimelineSink) -> io::Result<()> {
    if layout.waits.is_empty() {
        return Ok(());
    }
    sink.sequence(TrackId::SyncWaits)?;
    let mut args = Vec::new();
    for &(start, end, node) in &layout.waits {
        args.clear();
        let name = slice_args::sync_wait(node, &mut args);
        flat_slice(sink, start, end.max(start), name, "sync", &args)?;
    }
    Ok(())
}

/// Each counter's rate over each decode call (counter sums over the call's node spans /
/// the call's time, per second): `(call start ns, [rate or None per counter])` for the
/// calls that ended and took time. `None` where no span of the call has the counter.
pub fn counter_rates_per_call(
    model: &TraceModel,
) -> impl Iterator<Item = (u64, Vec<Option<f64>>)> + '_ {
    let n = model.counter_names().len();
    model.tokens().iter().filter_map(move |t| {
        let dur = t.end_ns?.saturating_sub(t.start_ns);
        if dur == 0 || n == 0 {
            return None;
        }
        let mut sums = vec![None::<u64>; n];
        for g in model.token_graphs(t.index) {
            for span in model.graph_node_spans(g) {
                for (sum, &v) in sums.iter_mut().zip(&span.pmc) {
                    if v != crate::model::PMC_MISSING {
                        *sum = Some(sum.unwrap_or(0).saturating_add(v));
                    }
                }
            }
        }
        let rates = sums
            .into_iter()
            .map(|s| s.map(|s| s as f64 * 1e9 / dur as f64))
            .collect();
        Some((t.start_ns, rates))
    })
}

/// Decode tokens per second (between consecutive tokens produced), and each counter's
/// rate per decode call.
///
/// # Errors
/// The sink's I/O errors.
pub fn write_counters(model: &TraceModel, sink: &mut impl TimelineSink) -> io::Result<()> {
    sink.sequence(TrackId::TokensPerSecond)?;
    let mut prev_produced: Option<u64> = None;
    for t in model.tokens() {
        let p = t.produced_ns();
        if t.phase == TokenPhase::Decode
            && let (Some(a), Some(b)) = (prev_produced, p)
            && b > a
        {
            sink.counter(TrackId::TokensPerSecond, b, 1e9 / (b - a) as f64)?;
        }
        prev_produced = p;
    }
    if !model.counter_names().is_empty() {
        sink.sequence(TrackId::Counter(0))?;
        for (start, rates) in counter_rates_per_call(model) {
            for (i, rate) in rates.into_iter().enumerate() {
                if let Some(rate) = rate {
                    sink.counter(TrackId::Counter(i), start, rate)?;
                }
            }
        }
    }
    Ok(())
}

/// QoS switches, loss records and the recording's marks.
///
/// # Errors
/// The sink's I/O errors.
pub fn write_instants(model: &TraceModel, sink: &mut impl TimelineSink) -> io::Result<()> {
    sink.sequence(TrackId::Instants)?;
    for q in model.qos_switches() {
        let args = [
            Arg::double("tps", q.tps_milli as f64 / 1e3),
            Arg::double("min_tps", q.min_tps_milli as f64 / 1e3),
        ];
        sink.instant(&Instant {
            ts_ns: q.ts_ns,
            name: format!("QoS levels {:#x} -> {:#x}", q.levels_before, q.levels_after),
            category: "qos",
            args: &args,
        })?;
    }
    for l in model.losses() {
        let args = [
            Arg::uint("cpu", u64::from(l.cpu)),
            Arg::uint("lost", l.lost),
        ];
        sink.instant(&Instant {
            ts_ns: l.ts_ns,
            name: format!("lost {} events on cpu {}", l.lost, l.cpu),
            category: "loss",
            args: &args,
        })?;
    }
    for (ts_ns, name) in crate::recording_mode::timeline_marks(model) {
        sink.instant(&Instant {
            ts_ns,
            name,
            category: "recording",
            args: &[],
        })?;
    }
    Ok(())
}
