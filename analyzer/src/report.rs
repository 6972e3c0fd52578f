//! `profinfer report TRACE`: the terminal report a user reads first after recording —
//! the run's summary, the top operators grouped by type, node or layer, per-thread busy
//! and scheduler time, and losses. Built from the same [`TraceModel`] as every view;
//! rendered as text by [`crate::export::terminal`] or as JSON.

use std::path::Path;

use serde::Serialize;

use crate::{
    AnalyzeError,
    backends::BackendTable,
    export::summary::{self, Summary},
    ingest::{self, Progress},
    model::{GraphSpan, Retention, TraceModel},
    op_groups::{GroupBy, GroupTable, OpGroup},
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
    /// Operator shares from CPU-clock samples, when the recording was sampled
    /// (`--sample`).
    pub sampled: Option<crate::model::SampledReport>,
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
    // Operators are summed graph by graph as graphs close, and their detail dropped:
    // the report reads a recording of any length in bounded memory.
    let mut tables = ReportTables::new(by, BackendTable::totals_only());
    let (model, reader, info) =
        ingest::load_with(trace, progress, Retention::Aggregates, &mut |m, g| {
            tables.add_graph(m, g);
        })?;
    // The per-type table is the report's own (`top`), so the summary goes without it.
    let summary = summary::summarize(&model, reader.header(), reader.footer(), &info, Vec::new());
    Ok(tables.finish(&model, summary, trace.display().to_string(), top))
}

/// The report of a model already built (pure: the summary comes from the caller).
pub fn build(
    model: &TraceModel,
    summary: Summary,
    trace: String,
    by: GroupBy,
    top: usize,
) -> Report {
    let mut tables = ReportTables::new(by, BackendTable::default());
    for g in model.graphs() {
        tables.add_graph(model, g);
    }
    tables.finish(model, summary, trace, top)
}

/// What the report sums graph by graph: its operator groups and the backend view.
struct ReportTables {
    by: GroupBy,
    groups: GroupTable,
    backends: BackendTable,
}

impl ReportTables {
    fn new(by: GroupBy, backends: BackendTable) -> ReportTables {
        ReportTables {
            by,
            groups: GroupTable::new(by, None),
            backends,
        }
    }

    fn add_graph(&mut self, model: &TraceModel, g: &GraphSpan) {
        self.groups.add_graph(model, g);
        self.backends.add_graph(model, g);
    }

    fn finish(self, model: &TraceModel, summary: Summary, trace: String, top: usize) -> Report {
        let backends = self.backends.finish(model);
        assemble(
            model,
            summary,
            trace,
            self.by,
            top,
            self.groups.finish(model),
            backends,
        )
    }
}

/// The report from its parts.
fn assemble(
    model: &TraceModel,
    summary: Summary,
    trace: String,
    by: GroupBy,
    top: usize,
    mut groups: Vec<OpGroup>,
    backends: crate::backends::BackendStats,
) -> Report {
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
        backends: Some(backends).filter(|b| b.is_interesting()),
        windows: crate::windows::window_stats(model),
        sampled: model.cpu_samples().report(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::{self, BackendStats};
    use crate::ingest::NoProgress;
    use crate::synthetic::{SynthSpec, split_model, split_model_with, write_trace};

    #[test]
    fn a_report_read_graph_by_graph_equals_one_built_from_every_span() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.pftrace");
        write_trace(&path, &SynthSpec::sized(40, 12, 2)).expect("trace");
        let (full, files, info) = ingest::load(&path, &NoProgress).expect("load");
        assert!(!full.node_spans().is_empty());
        for by in [GroupBy::OpType, GroupBy::Node, GroupBy::Layer] {
            let streamed = report(&path, by, 5, &NoProgress).expect("report");
            let summary = summary::summarize(&full, files.header(), files.footer(), &info, vec![]);
            let built = build(&full, summary, path.display().to_string(), by, 5);
            assert_eq!(streamed, built, "{by:?}");
            assert!(
                streamed
                    .top
                    .iter()
                    .all(|g| g.quantiles_exact && g.count > 0)
            );
        }
    }

    #[test]
    fn a_model_that_keeps_aggregates_drops_every_closed_graphs_operators() {
        let mut graphs = 0;
        let mut spans = 0;
        let m = split_model_with(6, Retention::Aggregates, &mut |m, g| {
            graphs += 1;
            spans += m.graph_node_spans(g).len();
        });
        let full = split_model(6);
        assert_eq!(graphs, full.graphs().len());
        assert_eq!(spans, full.node_spans().len());
        assert!(spans > 0);
        assert!(m.node_spans().is_empty() && m.slices().is_empty());
        assert!(m.graphs().iter().all(|g| m.graph_node_spans(g).is_empty()));
        assert_eq!(m.op_type_aggregates(), full.op_type_aggregates());
        assert_eq!(m.tokens(), full.tokens());
    }

    #[test]
    fn the_backend_view_sums_the_same_whether_calls_are_kept_or_not() {
        let full = backends::compute(&split_model(6));
        assert!(full.is_interesting() && full.call.is_some());
        let streamed = |table: BackendTable| -> BackendStats {
            let mut table = Some(table);
            let mut t = table.take().expect("table");
            let m = split_model_with(6, Retention::Aggregates, &mut |m, g| t.add_graph(m, g));
            t.finish(&m)
        };
        assert_eq!(streamed(BackendTable::default()), full);
        let totals = streamed(BackendTable::totals_only());
        assert!(totals.tokens.is_empty());
        assert_eq!(
            BackendStats {
                tokens: full.tokens.clone(),
                ..totals
            },
            full
        );
    }
}
