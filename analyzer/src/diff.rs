//! `profinfer diff A B`: what changed between two runs — per op type, node name or layer,
//! time per decode call with its absolute and relative change, and whether the change is
//! larger than the variation between calls; token timings side by side; counters per call;
//! what appears in one run only. Runs of different lengths compare per call; runs of
//! different models compare what can be matched and say what cannot.
//!
//! Pure: two models (with their summaries) in, one [`Diff`] out; rendered by
//! [`crate::export::terminal::write_diff`] or as JSON.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::{
    AnalyzeError,
    export::summary::{self, Summary},
    ingest::{self, NoProgress},
    model::{Retention, TokenPhase, TraceModel},
    op_groups::{self, GroupBy, GroupTable, OpGroup},
};

/// Which decode calls are compared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffPhase {
    /// Decode steps (one token each): the steady state, comparable across prompt lengths.
    #[default]
    Decode,
    /// Prefill calls.
    Prefill,
    /// Every node span.
    All,
}

impl DiffPhase {
    /// What one compared call is, for headings (`decode step`, `prefill call`).
    pub fn call_name(self) -> &'static str {
        match self {
            DiffPhase::Decode => "decode step",
            DiffPhase::Prefill => "prefill call",
            DiffPhase::All => "call",
        }
    }

    fn token_phase(self) -> Option<TokenPhase> {
        match self {
            DiffPhase::Decode => Some(TokenPhase::Decode),
            DiffPhase::Prefill => Some(TokenPhase::Prefill),
            DiffPhase::All => None,
        }
    }
}

/// One run of the two.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiffRun {
    /// The trace file.
    pub trace: String,
    /// Command line of the target (empty when attached with `--pid`).
    pub command: Vec<String>,
    /// Summary (without the per-type table).
    pub summary: Summary,
    /// Decode calls of the compared phase.
    pub calls: usize,
    /// Operator time per call of the compared phase, ms.
    pub op_ms_per_call: f64,
    /// Time per output token of every decode step, ms, in run order (the distribution
    /// the HTML diff overlays).
    pub tpot_ms: Vec<f64>,
}

/// One group's numbers in one run, per call of the compared phase.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiffSide {
    /// Time per call, ms (group total / calls of the phase).
    pub ms_per_call: f64,
    /// Standard deviation of the time per call, ms.
    pub sd_ms: f64,
    /// Calls it ran in.
    pub calls: usize,
    /// Node executions per call.
    pub count_per_call: f64,
    /// Counter sums per call.
    pub counters_per_call: BTreeMap<String, f64>,
}

/// Whether a change stands out from the variation between calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Significance {
    /// The change is more than twice its standard error: a real change.
    Changed,
    /// The change is within twice its standard error: noise between calls.
    WithinNoise,
    /// In one run only.
    OneRun,
}

/// One row: a group in A, B or both.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiffRow {
    /// Group key.
    pub key: String,
    /// In run A.
    pub a: Option<DiffSide>,
    /// In run B.
    pub b: Option<DiffSide>,
    /// B − A, ms per call (absent side counts as 0).
    pub delta_ms: f64,
    /// (B − A) / A; `None` when A is absent or 0.
    pub relative: Option<f64>,
    /// Whether the change is larger than the variation between calls.
    pub significance: Significance,
}

/// The comparison of two runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diff {
    /// Run A (the baseline).
    pub a: DiffRun,
    /// Run B.
    pub b: DiffRun,
    /// Grouping.
    pub by: GroupBy,
    /// Compared decode calls.
    pub phase: DiffPhase,
    /// Rows by descending |Δ|.
    pub rows: Vec<DiffRow>,
    /// Groups present in A only.
    pub only_a: Vec<String>,
    /// Groups present in B only.
    pub only_b: Vec<String>,
    /// What cannot be compared, and why.
    pub notes: Vec<String>,
}

/// Reads two traces and compares them.
///
/// # Errors
/// [`AnalyzeError::Trace`] if either file is not a readable trace.
pub fn diff_traces(
    a: &Path,
    b: &Path,
    by: GroupBy,
    phase: DiffPhase,
) -> Result<Diff, AnalyzeError> {
    // Each run's groups are summed graph by graph as graphs close and the operators
    // dropped: runs of any length compare in bounded memory.
    let load = |p: &Path| -> Result<(DiffRun, Vec<OpGroup>), AnalyzeError> {
        let mut table = GroupTable::new(by, phase.token_phase());
        let (model, reader, info) =
            ingest::load_with(p, &NoProgress, Retention::Aggregates, &mut |m, g| {
                table.add_graph(m, g);
            })?;
        let s = summary::summarize(&model, reader.header(), reader.footer(), &info, Vec::new());
        let command = reader.header().target.args.clone();
        let groups = table.finish(&model);
        Ok(side(
            &model,
            s,
            p.display().to_string(),
            command,
            phase,
            groups,
        ))
    };
    Ok(compare(load(a)?, load(b)?, by, phase))
}

/// One run's side of a diff, from its groups.
fn side(
    m: &TraceModel,
    summary: Summary,
    trace: String,
    command: Vec<String>,
    phase: DiffPhase,
    groups: Vec<OpGroup>,
) -> (DiffRun, Vec<OpGroup>) {
    let calls = m
        .tokens()
        .iter()
        .filter(|t| phase.token_phase().is_none_or(|p| t.phase == p))
        .count();
    let op_ms: f64 = groups.iter().map(|g| g.total_ms).sum();
    let run = DiffRun {
        trace,
        command,
        summary,
        calls,
        op_ms_per_call: per(op_ms, calls),
        tpot_ms: summary::tpot_values(m),
    };
    (run, groups)
}

/// Compares two runs: each is its model, summary, trace name and command line.
pub fn diff(
    a: (&TraceModel, Summary, String, Vec<String>),
    b: (&TraceModel, Summary, String, Vec<String>),
    by: GroupBy,
    phase: DiffPhase,
) -> Diff {
    let run = |(m, s, trace, command): (&TraceModel, Summary, String, Vec<String>)| {
        let groups = op_groups::group_in(m, by, phase.token_phase());
        side(m, s, trace, command, phase, groups)
    };
    compare(run(a), run(b), by, phase)
}

/// Compares two runs' sides.
fn compare(
    (ra, ga): (DiffRun, Vec<OpGroup>),
    (rb, gb): (DiffRun, Vec<OpGroup>),
    by: GroupBy,
    phase: DiffPhase,
) -> Diff {
    let mut keys: Vec<&str> = ga.iter().chain(&gb).map(|g| g.key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    let find = |gs: &[OpGroup], calls: usize, k: &str| {
        gs.iter().find(|g| g.key == k).map(|g| to_side(g, calls))
    };
    let mut rows: Vec<DiffRow> = keys
        .iter()
        .map(|&k| {
            let sa = find(&ga, ra.calls, k);
            let sb = find(&gb, rb.calls, k);
            row(k, sa, sb)
        })
        .collect();
    rows.sort_by(|x, y| {
        y.delta_ms
            .abs()
            .total_cmp(&x.delta_ms.abs())
            .then_with(|| x.key.cmp(&y.key))
    });
    let only_a: Vec<String> = rows
        .iter()
        .filter(|r| r.b.is_none())
        .map(|r| r.key.clone())
        .collect();
    let only_b: Vec<String> = rows
        .iter()
        .filter(|r| r.a.is_none())
        .map(|r| r.key.clone())
        .collect();
    let mut notes = Vec::new();
    for (name, run) in [("A", &ra), ("B", &rb)] {
        if run.calls == 0 {
            notes.push(format!(
                "run {name} has no {} calls: nothing to compare per call",
                phase_name(phase)
            ));
        }
    }
    let shared = keys.len() - only_a.len() - only_b.len();
    if !keys.is_empty() && shared * 2 < keys.len() {
        notes.push(format!(
            "the runs share only {shared} of {} {} groups: different models or engines? \
             only the shared groups are compared; the rest are listed as in one run only",
            keys.len(),
            by.name()
        ));
    }
    if ra.summary.trace.counters != rb.summary.trace.counters {
        notes.push(format!(
            "different counters (A: {}; B: {}): only counters in both are compared",
            ra.summary.trace.counters.join(", "),
            rb.summary.trace.counters.join(", ")
        ));
    }
    Diff {
        a: ra,
        b: rb,
        by,
        phase,
        rows,
        only_a,
        only_b,
        notes,
    }
}

impl DiffRow {
    /// Counter `c` per call in A and in B (0 where a side is absent or lacks it).
    pub fn counter(&self, c: &str) -> (f64, f64) {
        let v = |s: &Option<DiffSide>| {
            s.as_ref()
                .and_then(|s| s.counters_per_call.get(c))
                .copied()
                .unwrap_or(0.0)
        };
        (v(&self.a), v(&self.b))
    }
}

impl Diff {
    /// Counters recorded in both runs, in run A's order: the ones whose per-call
    /// values can be compared.
    pub fn shared_counters(&self) -> Vec<&str> {
        let b = &self.b.summary.trace.counters;
        self.a
            .summary
            .trace
            .counters
            .iter()
            .filter(|c| b.contains(c))
            .map(String::as_str)
            .collect()
    }
}

fn phase_name(p: DiffPhase) -> &'static str {
    match p {
        DiffPhase::Decode => "decode",
        DiffPhase::Prefill => "prefill",
        DiffPhase::All => "decode or prefill",
    }
}

fn per(v: f64, n: usize) -> f64 {
    if n == 0 { 0.0 } else { v / n as f64 }
}

fn to_side(g: &OpGroup, calls: usize) -> DiffSide {
    DiffSide {
        ms_per_call: per(g.total_ms, calls),
        sd_ms: g.per_token_sd_ms,
        calls: g.tokens,
        count_per_call: per(g.count as f64, calls),
        counters_per_call: g
            .counters
            .iter()
            .map(|(k, &v)| (k.clone(), per(v as f64, calls)))
            .collect(),
    }
}

/// The row of one key: Δ, relative change, and the significance test (|Δ| against twice
/// the standard error of the difference of the two per-call means).
fn row(key: &str, a: Option<DiffSide>, b: Option<DiffSide>) -> DiffRow {
    let ms = |s: &Option<DiffSide>| s.as_ref().map_or(0.0, |s| s.ms_per_call);
    let delta_ms = ms(&b) - ms(&a);
    let relative = a
        .as_ref()
        .filter(|s| s.ms_per_call > 0.0)
        .map(|s| delta_ms / s.ms_per_call);
    let significance = match (&a, &b) {
        (Some(x), Some(y)) => {
            let se2 = |s: &DiffSide| {
                if s.calls == 0 {
                    0.0
                } else {
                    s.sd_ms * s.sd_ms / s.calls as f64
                }
            };
            let se = (se2(x) + se2(y)).sqrt();
            if delta_ms.abs() > 2.0 * se && delta_ms != 0.0 {
                Significance::Changed
            } else {
                Significance::WithinNoise
            }
        }
        _ => Significance::OneRun,
    };
    DiffRow {
        key: key.to_owned(),
        a,
        b,
        delta_ms,
        relative,
        significance,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{self, SynthSpec};

    fn run(spec: &SynthSpec) -> (TraceModel, Summary) {
        let m = synthetic::model(spec, None);
        let s = summary::summarize(
            &m,
            &synthetic::synth_header(),
            None,
            &ingest::IngestInfo::default(),
            Vec::new(),
        );
        (m, s)
    }

    #[test]
    fn traces_read_graph_by_graph_diff_as_their_whole_models_do() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (pa, pb) = (dir.path().join("a.pftrace"), dir.path().join("b.pftrace"));
        synthetic::write_trace(&pa, &SynthSpec::sized(6, 12, 2)).expect("a");
        synthetic::write_trace(&pb, &SynthSpec::sized(9, 10, 2)).expect("b");
        let full = |p: &Path| {
            let (m, files, info) = ingest::load(p, &NoProgress).expect("load");
            let s = summary::summarize(&m, files.header(), files.footer(), &info, Vec::new());
            (m, s, files.header().target.args.clone())
        };
        let ((ma, sa, ca), (mb, sb, cb)) = (full(&pa), full(&pb));
        for phase in [DiffPhase::All, DiffPhase::Decode, DiffPhase::Prefill] {
            let streamed = diff_traces(&pa, &pb, GroupBy::Node, phase).expect("diff");
            let whole = diff(
                (&ma, sa.clone(), pa.display().to_string(), ca.clone()),
                (&mb, sb.clone(), pb.display().to_string(), cb.clone()),
                GroupBy::Node,
                phase,
            );
            assert_eq!(streamed, whole, "{phase:?}");
            assert!(!streamed.rows.is_empty());
        }
    }

    #[test]
    fn a_run_against_itself_changes_nothing() {
        let (m, s) = run(&SynthSpec::sized(6, 10, 2));
        let d = diff(
            (&m, s.clone(), "a".into(), vec![]),
            (&m, s, "a".into(), vec![]),
            GroupBy::Node,
            DiffPhase::Decode,
        );
        assert!(!d.rows.is_empty());
        assert!(d.only_a.is_empty() && d.only_b.is_empty() && d.notes.is_empty());
        for r in &d.rows {
            assert_eq!(r.delta_ms, 0.0, "{r:?}");
            assert_eq!(r.relative, Some(0.0));
            assert_eq!(r.significance, Significance::WithinNoise);
        }
    }

    #[test]
    fn slower_operators_and_missing_groups_are_found() {
        let (ma, sa) = run(&SynthSpec::sized(6, 10, 2));
        let mut slow = SynthSpec::sized(9, 12, 2);
        slow.op_ns *= 2;
        let (mb, sb) = run(&slow);
        let d = diff(
            (&ma, sa, "a".into(), vec![]),
            (&mb, sb, "b".into(), vec![]),
            GroupBy::Node,
            DiffPhase::Decode,
        );
        // Nodes 10 and 11 exist in B only; every shared node takes twice as long per call
        // although B has more calls (per-call normalisation).
        assert_eq!(d.only_b.len(), 2, "{:?}", d.only_b);
        assert!(d.only_a.is_empty());
        for r in d.rows.iter().filter(|r| r.a.is_some() && r.b.is_some()) {
            let rel = r.relative.expect("relative");
            assert!((rel - 1.0).abs() < 0.05, "{}: {rel}", r.key);
            assert_eq!(r.significance, Significance::Changed, "{}", r.key);
        }
        assert_eq!((d.a.calls, d.b.calls), (5, 8));
    }
}
