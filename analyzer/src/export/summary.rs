//! `summary.json`: the machine-readable headline numbers of a run.

use std::io::Write;

use serde::Serialize;
use trace_format::{TraceFooter, TraceHeader};

use crate::{
    ingest::IngestInfo,
    model::{PhaseKind, TokenPhase, TraceModel, Unpaired},
    run_timings::{self, RequestTimings, RunGroup, RunTimings},
    stats::{OpTypeRow, percentile},
};

/// Mean and percentiles of a sample, ms.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Distribution {
    /// Mean.
    pub mean: f64,
    /// Median (nearest rank).
    pub p50: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Number of samples.
    pub n: usize,
}

impl Distribution {
    /// Of a sample of ms values; `None` if empty.
    pub fn of(mut v: Vec<f64>) -> Option<Distribution> {
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(Distribution {
            mean: v.iter().sum::<f64>() / v.len() as f64,
            p50: percentile(&v, 50.0)?,
            p99: percentile(&v, 99.0)?,
            n: v.len(),
        })
    }
}

/// Token counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TokenCounts {
    /// Prompt tokens processed by prefill calls.
    pub prefill: u64,
    /// Decode tokens: one per decode call of a trace of one sequence; a decode call of
    /// several sequences (llama-server's slots stepping together) gives each one.
    pub decode: u64,
    /// Prefill calls (chunks).
    pub prefill_calls: u64,
    /// Sampled tokens (sample phases), if the phase level was recorded.
    pub sampled: Option<u64>,
}

/// Event totals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct EventTotals {
    /// Records read from the file.
    pub read: u64,
    /// Probe records written (footer), or records read if the footer is missing.
    pub written: u64,
    /// Records lost (footer, else the loss records).
    pub lost: u64,
    /// Records that arrived later than the reordering window.
    pub late: u64,
    /// Records of unknown kinds.
    pub unknown: u64,
}

/// The trace file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TraceSection {
    /// Target executable.
    pub target: String,
    /// Target pid.
    pub pid: u32,
    /// Whether the footer is present (recording ended cleanly).
    pub complete: bool,
    /// Why recording ended (footer).
    pub end_reason: Option<String>,
    /// Byte offset of the first broken chunk.
    pub truncated_at: Option<u64>,
    /// Files of the recording: 1, or the members of a `--switch-output` series read as
    /// one.
    pub files: usize,
    /// Counters recorded.
    pub counters: Vec<String>,
    /// What the recording gives (span bounds, sampled windows, counters).
    pub recording: crate::recording_mode::RecordingMode,
}

/// Decode calls of one sequence count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CallsWithSeqs {
    /// Sequences per call (0 = not recorded).
    pub sequences: u8,
    /// Decode calls carrying that many.
    pub calls: u32,
}

/// How many sequences the decode calls carried (`docs/views.md#sequences`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SequenceCounts {
    /// Most sequences one decode call carried.
    pub max_per_call: u8,
    /// Calls whose count is a lower bound (a batch longer than the probe reads, ids
    /// it does not tell apart).
    pub lower_bound_calls: u32,
    /// Decode calls by sequences carried, fewest first.
    pub calls: Vec<CallsWithSeqs>,
}

/// `summary.json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// About the file.
    pub trace: TraceSection,
    /// Token counts.
    pub tokens: TokenCounts,
    /// Time to first token: first prefill entry to the first token's sampling, ms (of
    /// the run after a warm-up, `runs[].warm_up`). `None` when the trace holds several
    /// runs (each has its own, in `runs`) or calls of several sequences (each request
    /// has its own, in `requests`).
    pub ttft_ms: Option<f64>,
    /// Time per output token: interval between consecutive tokens' availability within
    /// each run, ms.
    pub tpot_ms: Option<Distribution>,
    /// Decode-step latency (entry to exit), ms.
    pub decode_latency_ms: Option<Distribution>,
    /// Each run's token timings, when the trace holds more than one run (sequences
    /// started at position 0, `docs/views.md#runs`); left out of the JSON otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<RunTimings>,
    /// The runs grouped by shape, with their medians (with `runs`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub run_groups: Vec<RunGroup>,
    /// Sequences per decode call, when the probes recorded them (left out for traces
    /// from before).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequences: Option<SequenceCounts>,
    /// Each request's token timings, when some call carried several sequences
    /// (llama-server's slots: `docs/views.md#sequences`); left out otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<RequestTimings>,
    /// Event totals.
    pub events: EventTotals,
    /// Unpaired enter/exit records.
    pub unpaired: Unpaired,
    /// Target threads.
    pub threads: usize,
    /// Graph computations.
    pub graphs: usize,
    /// Graphs per decode call.
    pub graphs_per_token: f64,
    /// Node spans (computed nodes with operator events) per graph.
    pub nodes_per_graph: f64,
    /// Computed nodes per graph as the engine announced them.
    pub announced_nodes_per_graph: f64,
    /// QoS switches.
    pub qos_switches: usize,
    /// Per op type (left out of the JSON when empty, as in `profinfer report`'s, which
    /// has its own table).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub op_types: Vec<OpTypeRow>,
    /// Operator shares from CPU-clock samples (`record --sample`; left out when the
    /// recording was not sampled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled: Option<crate::model::SampledReport>,
    /// Things the reader should know (truncation, losses, unpaired records...).
    pub warnings: Vec<String>,
}

/// Time per output token of every decode step, ms, in run order: from the previous
/// token's production (its run's last prefill call's for a run's first step) to this
/// step's ([`TraceModel::token_intervals_ns`]).
pub fn tpot_values(model: &TraceModel) -> Vec<f64> {
    model
        .token_intervals_ns()
        .into_iter()
        .map(|(_, ns)| ns as f64 / 1e6)
        .collect()
}

/// Builds the summary.
pub fn summarize(
    model: &TraceModel,
    header: &TraceHeader,
    footer: Option<&TraceFooter>,
    ingest: &IngestInfo,
    op_types: Vec<OpTypeRow>,
) -> Summary {
    let tokens = model.tokens();
    let prefill: Vec<_> = tokens
        .iter()
        .filter(|t| t.phase == TokenPhase::Prefill)
        .collect();
    let sampled = model
        .phases()
        .iter()
        .filter(|p| p.kind == PhaseKind::Sample)
        .count() as u64;
    let mut runs = run_timings::run_timings(model);
    let requests = run_timings::request_timings(model);
    let ttft_ms = run_timings::generation_ttft_ms(&runs);
    let by_seqs = run_timings::calls_by_sequences(model);
    let sequences = by_seqs.iter().any(|&(n, _)| n > 0).then(|| SequenceCounts {
        max_per_call: by_seqs.iter().map(|&(n, _)| n).max().unwrap_or(0),
        lower_bound_calls: tokens.iter().filter(|t| t.seqs.lower_bound).count() as u32,
        calls: by_seqs
            .iter()
            .map(|&(sequences, calls)| CallsWithSeqs { sequences, calls })
            .collect(),
    });
    if runs.len() < 2 {
        runs.clear();
    }
    let run_groups = run_timings::group(&runs);
    let tpot = tpot_values(model);
    let decode_lat: Vec<f64> = tokens
        .iter()
        .filter(|t| t.phase == TokenPhase::Decode && t.end_ns.is_some())
        .map(|t| t.dur_ns() as f64 / 1e6)
        .collect();
    let graphs = model.graphs();
    let finished_graphs: Vec<_> = graphs.iter().filter(|g| g.end_ns.is_some()).collect();
    let mean = |num: f64, den: usize| if den == 0 { 0.0 } else { num / den as f64 };
    let lost = footer.map_or_else(|| model.lost_from_records(), |f| f.events_lost);
    let mut warnings = Vec::new();
    if let Some(off) = ingest.truncated_at {
        warnings.push(match &ingest.truncated_file {
            Some(file) => {
                format!("{file} is truncated at byte {off}: analyzed its complete prefix")
            }
            None => format!("trace is truncated at byte {off}: analyzed the complete prefix"),
        });
    }
    if footer.is_none() {
        warnings.push("trace has no footer: recording did not end cleanly".to_owned());
    }
    if let Some(e) = &ingest.read_error {
        warnings.push(format!("reading stopped early: {e}"));
    }
    if lost > 0 {
        warnings.push(format!("{lost} events were lost while recording"));
    }
    if let Some(f) = footer.filter(|f| f.samples_lost > 0) {
        warnings.push(format!(
            "{} of {} CPU samples were lost (ring buffer full): sampled shares are of the \
             samples kept",
            f.samples_lost, f.samples_taken
        ));
    }
    let u = model.unpaired();
    if u.total() > 0 {
        warnings.push(format!(
            "{} unpaired enter/exit records (op {}+{}, graph {}+{}, token {}+{}, phase {}+{})",
            u.total(),
            u.op_enter,
            u.op_exit,
            u.graph_enter,
            u.graph_exit,
            u.token_enter,
            u.token_exit,
            u.phase_enter,
            u.phase_exit
        ));
    }
    if ingest.late_events > 0 {
        warnings.push(format!(
            "{} events arrived later than the reordering window",
            ingest.late_events
        ));
    }
    let c = model.counts();
    if c.over_limit > 0 {
        warnings.push(format!("{} records ignored over limits", c.over_limit));
    }
    Summary {
        trace: TraceSection {
            target: header.target.path.clone(),
            pid: model.target_pid(),
            complete: footer.is_some(),
            end_reason: footer.map(|f| f.end_reason.clone()),
            truncated_at: ingest.truncated_at,
            files: ingest.files.max(1),
            counters: model.counter_names().to_vec(),
            recording: crate::recording_mode::recording_mode(&header.recording_settings(), model),
        },
        tokens: TokenCounts {
            prefill: prefill.iter().map(|t| u64::from(t.n_tokens)).sum(),
            decode: tokens
                .iter()
                .filter(|t| t.phase == TokenPhase::Decode)
                .map(|t| u64::from(t.n_tokens))
                .sum(),
            prefill_calls: prefill.len() as u64,
            sampled: (sampled > 0).then_some(sampled),
        },
        ttft_ms,
        tpot_ms: Distribution::of(tpot),
        decode_latency_ms: Distribution::of(decode_lat),
        runs,
        run_groups,
        sequences,
        requests,
        events: EventTotals {
            read: ingest.events_read,
            written: footer.map_or(ingest.events_read, |f| f.events_written),
            lost,
            late: ingest.late_events,
            unknown: c.unknown,
        },
        unpaired: *u,
        threads: model.target_threads().len(),
        graphs: graphs.len(),
        graphs_per_token: mean(graphs.len() as f64, tokens.len()),
        nodes_per_graph: mean(
            finished_graphs.iter().map(|g| g.nodes.len() as f64).sum(),
            finished_graphs.len(),
        ),
        announced_nodes_per_graph: mean(
            finished_graphs.iter().map(|g| f64::from(g.n_nodes)).sum(),
            finished_graphs.len(),
        ),
        qos_switches: model.qos_switches().len(),
        op_types,
        sampled: model.cpu_samples().report(),
        warnings,
    }
}

/// Writes the summary as pretty JSON.
pub fn write(summary: &Summary, mut w: impl Write) -> serde_json::Result<()> {
    serde_json::to_writer_pretty(&mut w, summary)?;
    w.write_all(b"\n").map_err(serde_json::Error::io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distribution_of_hand_values() {
        let d = Distribution::of(vec![4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(d.mean, 2.5);
        assert_eq!(d.p50, 2.0);
        assert_eq!(d.p99, 4.0);
        assert_eq!(d.n, 4);
        assert!(Distribution::of(vec![]).is_none());
    }
}
