//! `profinfer report TRACE`: the terminal report a user reads first after recording —
//! the run's summary, the top operators grouped by type, node or layer, per-thread busy
//! and scheduler time, and losses. Built from the same [`TraceModel`] as every view;
//! rendered as text by [`crate::export::terminal`] or as JSON.

use std::path::Path;

use serde::Serialize;

use crate::{
    AnalyzeError,
    export::summary::{self, Summary},
    ingest::{self, Progress},
    model::TraceModel,
    op_groups::{self, GroupBy, OpGroup},
};

/// One target thread's time.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ThreadRow {
    /// Thread id.
    pub tid: u32,
    /// Name (`comm`), empty if the scheduler level was off.
    pub name: String,
    /// Whether it is the engine's main thread (it called `engine_decode`).
    pub main: bool,
    /// Operator slices it ran.
    pub op_slices: u64,
    /// Time inside operators, ms.
    pub op_busy_ms: f64,
    /// Share of the traced time inside operators (0..1).
    pub op_busy_share: f64,
    /// Time on a CPU, ms (scheduler level; 0 without it).
    pub running_ms: f64,
    /// Time waiting for a CPU, ms.
    pub runnable_ms: f64,
    /// Time blocked, ms.
    pub sleeping_ms: f64,
}

/// The terminal report of one trace.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// The trace file.
    pub trace: String,
    /// Headline numbers (as in `summary.json`, without the per-type table).
    pub summary: Summary,
    /// How operators are grouped.
    pub by: GroupBy,
    /// All operator time, ms (the groups' shares are of this).
    pub op_total_ms: f64,
    /// Traced time from the first to the last event, ms.
    pub traced_ms: f64,
    /// The largest groups, largest first.
    pub top: Vec<OpGroup>,
    /// Groups not shown.
    pub omitted: usize,
    /// Target threads, by tid.
    pub threads: Vec<ThreadRow>,
    /// The split across backends and the KV budget's I/O, when the trace has either.
    pub backends: Option<crate::backends::BackendStats>,
    /// Traced against untraced decode steps, when operators were recorded in sampled
    /// windows.
    pub windows: Option<crate::windows::WindowStats>,
}

/// Reads `trace` and builds its report with the `top` largest groups by `by`.
///
/// # Errors
/// [`AnalyzeError::Trace`] for a file that is not a readable trace (a truncated trace is
/// reported up to its last complete chunk, with a warning).
pub fn report(
    trace: &Path,
    by: GroupBy,
    top: usize,
    progress: &dyn Progress,
) -> Result<Report, AnalyzeError> {
    let (model, reader, info) = ingest::load(trace, progress)?;
    // The per-type table is the report's own (`top`), so the summary goes without it.
    let summary = summary::summarize(&model, reader.header(), reader.footer(), &info, Vec::new());
    Ok(build(&model, summary, trace.display().to_string(), by, top))
}

/// The report of a model already built (pure: the summary comes from the caller).
pub fn build(
    model: &TraceModel,
    summary: Summary,
    trace: String,
    by: GroupBy,
    top: usize,
) -> Report {
    let mut groups = op_groups::group(model, by);
    let op_total_ms = groups.iter().map(|g| g.total_ms).sum();
    let omitted = groups.len().saturating_sub(top);
    groups.truncate(top);
    let traced_ns = model
        .first_ns()
        .map_or(0, |f| model.last_ns().saturating_sub(f));
    let threads = model
        .target_threads()
        .into_iter()
        .map(|t| {
            let by_state = t.states.time_by_state();
            ThreadRow {
                tid: t.tid,
                name: t.comm.clone(),
                main: Some(t.tid) == model.main_tid(),
                op_slices: t.op_slices,
                op_busy_ms: t.op_busy_ns as f64 / 1e6,
                op_busy_share: if traced_ns == 0 {
                    0.0
                } else {
                    t.op_busy_ns as f64 / traced_ns as f64
                },
                running_ms: by_state[0] as f64 / 1e6,
                runnable_ms: by_state[1] as f64 / 1e6,
                sleeping_ms: by_state[2] as f64 / 1e6,
            }
        })
        .collect();
    Report {
        backends: Some(crate::backends::compute(model)).filter(|b| b.is_interesting()),
        windows: crate::windows::window_stats(model),
        trace,
        summary,
        by,
        op_total_ms,
        traced_ms: traced_ns as f64 / 1e6,
        top: groups,
        omitted,
        threads,
    }
}
