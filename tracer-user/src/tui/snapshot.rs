//! What the live view shows, as plain data: a [`LiveSnapshot`] is built from the
//! analyzer's incremental [`TraceModel`] (no second aggregation path) plus the
//! collector's [`CollectorStatus`], and sent to the render thread.

use analyzer::{
    TraceModel,
    model::{OpAggregate, PhaseKind, SchedState, TokenPhase, op_name},
};

use crate::observe::CollectorStatus;

/// Tokens/s points kept for the sparkline (the latest decode steps).
pub const SPARK_POINTS: usize = 240;
/// Intervals averaged for the current tokens/s.
pub const RATE_WINDOW: usize = 8;
/// Cells of a thread state strip (the latest token's time split evenly).
pub const STRIP_CELLS: usize = 64;
/// Most threads shown in the state strip.
pub const MAX_STRIP_THREADS: usize = 16;

/// One row of the operator table.
#[derive(Clone, Debug, PartialEq)]
pub struct OpRow {
    /// Op type (`MUL_MAT`) or node class (`ffn_up`).
    pub name: String,
    /// Node executions.
    pub count: u64,
    /// Total time, ns.
    pub total_ns: u64,
    /// Mean time per execution, ns.
    pub mean_ns: f64,
    /// Share of the summed decode-call time, `[0, 1]` (more if calls are still open).
    pub share: f64,
    /// Counter sums per counter, `None` where no execution had that counter.
    pub counters: Vec<Option<u64>>,
    /// Expert-indexed products (`MUL_MAT_ID`, `ffn_moe_*` classes): the most used
    /// experts over all layers so far, as `(expert id, activations)`, most used first.
    pub top_experts: Vec<(i32, u64)>,
}

/// Experts shown per expert-indexed row of the operator table.
pub const TOP_EXPERTS: usize = 3;

/// The most used experts of every route so far (one activation per distinct expert of a
/// token), most used first, ties by id.
fn top_experts(model: &TraceModel) -> Vec<(i32, u64)> {
    let mut counts: std::collections::HashMap<i32, u64> = std::collections::HashMap::new();
    for r in model.expert_routes() {
        for t in 0..r.n_tokens as usize {
            let Some(ids) = r.token_ids(t) else { break };
            for (j, &e) in ids.iter().enumerate() {
                if !ids[..j].contains(&e) {
                    *counts.entry(e).or_default() += 1;
                }
            }
        }
    }
    let mut top: Vec<(i32, u64)> = counts.into_iter().collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    top.truncate(TOP_EXPERTS);
    top
}

/// Whether a row (op type or node class) is an expert-indexed product.
fn is_expert_row(name: &str) -> bool {
    name == "MUL_MAT_ID" || matches!(name, "ffn_moe_up" | "ffn_moe_gate" | "ffn_moe_down")
}

impl OpRow {
    fn of(name: String, agg: &OpAggregate, token_ns: u64, n_counters: usize) -> OpRow {
        OpRow {
            name,
            count: agg.count,
            total_ns: agg.total_ns,
            mean_ns: agg.mean_ns(),
            share: if token_ns == 0 {
                0.0
            } else {
                agg.total_ns as f64 / token_ns as f64
            },
            counters: (0..n_counters)
                .map(|i| {
                    (agg.pmc_nodes.get(i).copied().unwrap_or(0) > 0)
                        .then(|| agg.pmc.get(i).copied().unwrap_or(0))
                })
                .collect(),
            top_experts: Vec::new(),
        }
    }
}

/// The time of one decode call split by phase.
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseBreakdown {
    /// Decode call index.
    pub token: u32,
    /// Prefill chunk or decode step.
    pub phase: TokenPhase,
    /// `(label, ns)`: embedding, prefill or decode compute, logits copy, softmax,
    /// sampling.
    pub parts: Vec<(&'static str, u64)>,
}

/// One thread's scheduler states over the latest token.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadStrip {
    /// Thread id.
    pub tid: u32,
    /// Name (`comm`).
    pub comm: String,
    /// Dominant state per cell (`None`: no scheduler data for that cell).
    pub cells: Vec<Option<SchedState>>,
}

/// Everything one frame of the live view shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LiveSnapshot {
    /// Target pid.
    pub pid: u32,
    /// Target executable.
    pub target: String,
    /// Trace time covered, s (first to last event).
    pub trace_secs: f64,
    /// Events applied to the model.
    pub events: u64,
    /// Prompt tokens processed.
    pub prefill_tokens: u64,
    /// Decode steps.
    pub decode_steps: u64,
    /// Tokens/s of the latest decode steps (1 / interval), oldest first.
    pub tps_series: Vec<f64>,
    /// Tokens/s over the last [`RATE_WINDOW`] intervals.
    pub tps_now: Option<f64>,
    /// Time to first token, ms.
    pub ttft_ms: Option<f64>,
    /// Mean time per output token, ms.
    pub tpot_ms: Option<f64>,
    /// Phases of the latest complete token.
    pub latest: Option<PhaseBreakdown>,
    /// Operator rows per op type (unsorted).
    pub by_type: Vec<OpRow>,
    /// Operator rows per node class (unsorted).
    pub by_class: Vec<OpRow>,
    /// Counter names (columns of `OpRow::counters`).
    pub counter_names: Vec<String>,
    /// Thread states over the latest token.
    pub threads: Vec<ThreadStrip>,
    /// QoS switches recorded.
    pub qos_switches: usize,
    /// Unpaired enter/exit records.
    pub unpaired: u64,
    /// The collector's latest status.
    pub status: CollectorStatus,
    /// Records drained per second (between the last two snapshots).
    pub drained_per_s: f64,
    /// Events the live view skipped because it fell behind (all are in the trace).
    pub view_dropped: u64,
    /// Backends of the latest token's graph splits with the threads that computed
    /// them, when there is more than one (`accel` with its own threads).
    pub backends: Vec<(String, usize)>,
    /// KV budget traffic so far, when the engine swaps its KV cache.
    pub kv: Option<KvTraffic>,
    /// What the recording gives, in a few words (span bounds, sampled windows).
    pub recording: String,
}

/// What a KV budget moved so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KvTraffic {
    /// Chunks written out.
    pub chunks_out: u64,
    /// Bytes written out.
    pub bytes_out: u64,
    /// Chunks read back.
    pub chunks_in: u64,
    /// Bytes read back.
    pub bytes_in: u64,
}

/// The KV swap traffic so far (`None` if nothing was swapped).
fn kv_traffic(model: &TraceModel) -> Option<KvTraffic> {
    let mut kv = KvTraffic::default();
    for p in model.phases() {
        match p.kind {
            PhaseKind::KvSwapOut => {
                kv.chunks_out += 1;
                kv.bytes_out += u64::from(p.arg);
            }
            PhaseKind::KvSwapIn => {
                kv.chunks_in += 1;
                kv.bytes_in += u64::from(p.arg);
            }
            _ => {}
        }
    }
    (kv.chunks_out + kv.chunks_in > 0).then_some(kv)
}

/// The backends of decode call `token`'s graphs, with how many threads computed each
/// (empty unless there are several).
fn backend_threads(model: &TraceModel, token: u32) -> Vec<(String, usize)> {
    let mut by_backend: std::collections::BTreeMap<(u32, String), std::collections::HashSet<u32>> =
        Default::default();
    for g in model.token_graphs(token) {
        let threads = by_backend
            .entry((g.backend_kind, g.backend_name()))
            .or_default();
        for span in model.graph_node_spans(g) {
            threads.extend(model.span_slices(span).map(|s| s.thread));
        }
    }
    if by_backend.len() < 2 {
        return Vec::new();
    }
    by_backend
        .into_iter()
        .map(|((_, name), threads)| (name, threads.len()))
        .collect()
}

impl LiveSnapshot {
    /// Builds the frame from the model and the collector's status.
    pub fn build(model: &TraceModel, status: &CollectorStatus) -> LiveSnapshot {
        let tokens = model.tokens();
        let token_ns: u64 = tokens.iter().map(|t| t.dur_ns()).sum();
        let n_counters = model.counter_names().len();
        let by_type = model
            .op_type_aggregates()
            .iter()
            .enumerate()
            .filter(|(_, a)| a.count > 0)
            .map(|(slot, a)| OpRow::of(op_name(slot as u32), a, token_ns, n_counters))
            .collect();
        let by_class = model
            .class_aggregates()
            .iter()
            .zip(model.classes())
            .filter(|(a, _)| a.count > 0)
            .map(|(a, name)| OpRow::of(name.clone(), a, token_ns, n_counters))
            .collect();
        let (mut by_type, mut by_class): (Vec<OpRow>, Vec<OpRow>) = (by_type, by_class);
        if !model.expert_routes().is_empty() {
            let top = top_experts(model);
            for row in by_type.iter_mut().chain(by_class.iter_mut()) {
                if is_expert_row(&row.name) {
                    row.top_experts = top.clone();
                }
            }
        }
        let intervals = model.token_intervals_ns();
        let tps_series = intervals[intervals.len().saturating_sub(SPARK_POINTS)..]
            .iter()
            .map(|&(_, ns)| rate(1, ns))
            .collect();
        let recent = &intervals[intervals.len().saturating_sub(RATE_WINDOW)..];
        let tps_now = (!recent.is_empty())
            .then(|| rate(recent.len(), recent.iter().map(|&(_, ns)| ns).sum()));
        let tpot_ms = (!intervals.is_empty()).then(|| {
            intervals.iter().map(|&(_, ns)| ns as f64).sum::<f64>() / intervals.len() as f64 / 1e6
        });
        let latest = latest_breakdown(model);
        let backends = latest
            .as_ref()
            .map(|b| backend_threads(model, b.token))
            .unwrap_or_default();
        let threads = latest
            .as_ref()
            .and_then(|b| tokens.get(b.token as usize))
            .and_then(|t| Some((t.start_ns, t.end_ns?)))
            .map(|(from, to)| thread_strips(model, from, to))
            .unwrap_or_default();
        LiveSnapshot {
            pid: model.target_pid(),
            target: String::new(),
            trace_secs: model
                .first_ns()
                .map_or(0.0, |f| model.last_ns().saturating_sub(f) as f64 / 1e9),
            events: model.counts().total,
            prefill_tokens: tokens
                .iter()
                .filter(|t| t.phase == TokenPhase::Prefill)
                .map(|t| u64::from(t.n_tokens))
                .sum(),
            decode_steps: tokens
                .iter()
                .filter(|t| t.phase == TokenPhase::Decode)
                .count() as u64,
            tps_series,
            tps_now,
            ttft_ms: model.ttft_ns().map(|ns| ns as f64 / 1e6),
            tpot_ms,
            latest,
            by_type,
            by_class,
            counter_names: model.counter_names().to_vec(),
            threads,
            qos_switches: model.qos_switches().len(),
            unpaired: model.unpaired().total(),
            status: status.clone(),
            drained_per_s: 0.0,
            view_dropped: 0,
            backends,
            kv: kv_traffic(model),
            recording: analyzer::recording_mode::recording_mode(&Default::default(), model).short,
        }
    }
}

/// `n` events over `ns` nanoseconds, per second (0 for an empty interval).
pub fn rate(n: usize, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        n as f64 * 1e9 / ns as f64
    }
}

/// The latest decode call that has finished, preferring one whose token was sampled.
fn latest_breakdown(model: &TraceModel) -> Option<PhaseBreakdown> {
    let tokens = model.tokens();
    let tok = tokens
        .iter()
        .rev()
        .find(|t| t.sampled_ns.is_some())
        .or_else(|| tokens.iter().rev().find(|t| t.end_ns.is_some()))?;
    let mut by_kind = [0u64; PhaseKind::COUNT];
    // Phases are in exit order; the latest token's are at the end.
    for p in model.phases().iter().rev() {
        match p.token {
            Some(t) if t == tok.index => by_kind[p.kind as usize] += p.end_ns - p.start_ns,
            Some(t) if t < tok.index => break,
            _ => {}
        }
    }
    let embed = by_kind[PhaseKind::Embed as usize];
    let copy = by_kind[PhaseKind::CopyLogits as usize];
    // Embedding and the logits copy run inside the decode call; the rest is compute.
    let compute = tok.dur_ns().saturating_sub(embed + copy);
    let mut parts = vec![("embedding", embed), (tok.phase.name(), compute)];
    // A split pass or a KV budget: the compute part by backend, copies, waits, KV I/O
    // (the backends' parts overlap in time when they run at once).
    let split = analyzer::backends::token_split(model, tok.index);
    if split.splits.len() > 1 || split.kv_io_ns > 0 {
        parts.pop();
        // llama.cpp's GPU backends: the CPU's call for their splits.
        for (name, label) in [
            ("cpu", "cpu compute"),
            ("accel", "accel comp."),
            ("vulkan", "vulkan split"),
            ("opencl", "opencl split"),
            ("cuda", "cuda split"),
            ("metal", "metal split"),
        ] {
            if let Some(&ns) = split.compute_ns.get(name) {
                parts.push((label, ns));
            }
        }
        // What the GPU itself did, when it wrote timestamps (`GGML_VK_PERF_LOGGER`).
        if split.gpu_timed_nodes > 0 {
            parts.push(("GPU nodes", split.gpu_node_ns));
        }
        if split.splits.len() > 1 {
            parts.push(("copies", split.copy_ns));
            parts.push(("sync waits", split.sync_ns));
        }
        if split.kv_io_ns > 0 {
            parts.push(("KV I/O", split.kv_io_ns));
        }
    }
    parts.extend([
        ("copy logits", copy),
        ("softmax", by_kind[PhaseKind::Softmax as usize]),
        ("sampling", by_kind[PhaseKind::Sample as usize]),
    ]);
    Some(PhaseBreakdown {
        token: tok.index,
        phase: tok.phase,
        parts,
    })
}

/// The dominant state of each target thread in [`STRIP_CELLS`] equal cells of
/// `[from, to)`.
fn thread_strips(model: &TraceModel, from: u64, to: u64) -> Vec<ThreadStrip> {
    if to <= from {
        return Vec::new();
    }
    let span = to - from;
    let cell_of = |ts: u64| ((ts - from) as u128 * STRIP_CELLS as u128 / span as u128) as usize;
    let cell_start = |c: usize| from + (span as u128 * c as u128 / STRIP_CELLS as u128) as u64;
    model
        .target_threads()
        .into_iter()
        .filter(|th| !th.states.slices().is_empty() || th.states.current().is_some())
        .take(MAX_STRIP_THREADS)
        .map(|th| {
            let mut time = vec![[0u64; 3]; STRIP_CELLS];
            let open = th
                .states
                .current()
                .map(|(state, since, cpu)| analyzer::model::StateSlice {
                    start_ns: since,
                    end_ns: model.last_ns().max(since),
                    state,
                    cpu,
                });
            let slices = th.states.slices();
            let first = slices.partition_point(|s| s.end_ns <= from);
            for s in slices[first..].iter().chain(open.iter()) {
                if s.start_ns >= to {
                    break;
                }
                let (a, b) = (s.start_ns.max(from), s.end_ns.min(to));
                if b <= a {
                    continue;
                }
                let state = s.state as usize;
                for (c, cell) in time
                    .iter_mut()
                    .enumerate()
                    .take(cell_of(b - 1) + 1)
                    .skip(cell_of(a))
                {
                    let (ca, cb) = (cell_start(c), cell_start(c + 1));
                    cell[state] += b.min(cb).saturating_sub(a.max(ca));
                }
            }
            let cells = time
                .iter()
                .map(|t| {
                    let (i, &ns) = t.iter().enumerate().max_by_key(|&(_, ns)| *ns)?;
                    (ns > 0).then_some(
                        [
                            SchedState::Running,
                            SchedState::Runnable,
                            SchedState::Sleeping,
                        ][i],
                    )
                })
                .collect();
            ThreadStrip {
                tid: th.tid,
                comm: th.comm.clone(),
                cells,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use analyzer::synthetic::{SynthSpec, generate, synth_header};
    use common::event::{EventHeader, EventKind, SchedSwitchEvent};
    use trace_format::{Event, decode_record};

    use super::*;

    fn model_of(spec: &SynthSpec) -> TraceModel {
        let mut m = TraceModel::new(&synth_header());
        generate(spec, |rec| {
            let kind = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]);
            let ev = EventKind::from_u32(kind)
                .and_then(|k| decode_record(k, rec))
                .expect("decodes");
            m.apply(&ev);
        });
        m
    }

    #[test]
    fn op_rows_follow_the_model_aggregates() {
        let spec = SynthSpec::sized(3, 4, 2);
        let m = model_of(&spec);
        let s = LiveSnapshot::build(&m, &CollectorStatus::default());
        // 4 nodes alternate MUL_MAT / ADD: 2 of each per graph, 3 graphs.
        let mm = s.by_type.iter().find(|r| r.name == "MUL_MAT").expect("row");
        assert_eq!(mm.count, 6);
        // Each node: first entry (thread 0) to last exit (thread 0, op_ns): op_ns.
        assert_eq!(mm.total_ns, 6 * spec.op_ns);
        assert_eq!(mm.mean_ns, spec.op_ns as f64);
        let token_ns: u64 = m.tokens().iter().map(|t| t.dur_ns()).sum();
        assert!((mm.share - (6 * spec.op_ns) as f64 / token_ns as f64).abs() < 1e-12);
        assert_eq!(s.by_class.iter().map(|r| r.count).sum::<u64>(), 12);
        assert_eq!(s.decode_steps, 2);
        assert_eq!(s.prefill_tokens, 4);
    }

    #[test]
    fn expert_rows_are_the_expert_products() {
        assert!(is_expert_row("MUL_MAT_ID") && is_expert_row("ffn_moe_down"));
        assert!(!is_expert_row("MUL_MAT") && !is_expert_row("ffn_moe_topk"));
    }

    #[test]
    fn rates_are_inverse_intervals() {
        let spec = SynthSpec::sized(5, 2, 1);
        let m = model_of(&spec);
        let s = LiveSnapshot::build(&m, &CollectorStatus::default());
        let iv = m.token_intervals_ns();
        assert_eq!(s.tps_series.len(), iv.len());
        for (tps, (_, ns)) in s.tps_series.iter().zip(&iv) {
            assert!((tps * *ns as f64 / 1e9 - 1.0).abs() < 1e-12);
        }
        let total: u64 = iv.iter().map(|&(_, ns)| ns).sum();
        let now = s.tps_now.expect("rate");
        assert!((now - iv.len() as f64 * 1e9 / total as f64).abs() < 1e-9);
        assert_eq!(rate(3, 0), 0.0);
    }

    #[test]
    fn latest_token_parts_sum_to_call_plus_phases_after_it() {
        let spec = SynthSpec::sized(3, 2, 1);
        let m = model_of(&spec);
        let s = LiveSnapshot::build(&m, &CollectorStatus::default());
        let b = s.latest.expect("breakdown");
        assert_eq!(b.token, 2);
        assert_eq!(b.phase, TokenPhase::Decode);
        let tok = &m.tokens()[2];
        let inside: u64 = b.parts[..3].iter().map(|p| p.1).sum();
        assert_eq!(inside, tok.dur_ns());
        // The synthetic sample phase is 500 ns.
        assert_eq!(b.parts[4], ("sampling", 500));
    }

    fn switch(ts: u64, prev: u32, prev_state: u64, next: u32) -> Event {
        Event::SchedSwitch(SchedSwitchEvent {
            header: EventHeader {
                kind: EventKind::SchedSwitch as u32,
                ts_ns: ts,
                pid: 1000,
                tid: prev,
                ..EventHeader::default()
            },
            prev_tid: prev,
            prev_state,
            next_tid: next,
            ..SchedSwitchEvent::default()
        })
    }

    #[test]
    fn strip_cells_take_the_dominant_state() {
        let mut m = TraceModel::new(&synth_header());
        // Thread 7 is a target thread (pid 1000). Runs 0..250, sleeps 250..1000.
        m.apply(&switch(0, 0, 0, 7));
        m.apply(&switch(250, 7, 1, 0));
        m.apply(&switch(1000, 0, 0, 7));
        let strips = thread_strips(&m, 0, 1000);
        let t7 = strips.iter().find(|s| s.tid == 7).expect("thread 7");
        let running = t7
            .cells
            .iter()
            .filter(|c| **c == Some(SchedState::Running))
            .count();
        // 250/1000 of 64 cells = 16 cells running, the rest sleeping.
        assert_eq!(running, STRIP_CELLS / 4);
        assert!(
            t7.cells[STRIP_CELLS / 4..]
                .iter()
                .all(|c| *c == Some(SchedState::Sleeping))
        );
        assert!(thread_strips(&m, 5, 5).is_empty());
    }

    /// A split pass: the latest token's compute shows per backend with copies and sync
    /// waits (the split synthetic run's known times), and the title's backends.
    #[test]
    fn split_pass_shows_backends_and_waits() {
        use analyzer::synthetic::{SPLIT_COPY_NS, SPLIT_MATMUL_NS, SPLIT_SYNC_NS, split_model};
        let m = split_model(3);
        let snap = LiveSnapshot::build(&m, &CollectorStatus::default());
        assert_eq!(
            snap.backends,
            [("cpu".to_owned(), 1), ("accel".to_owned(), 1)]
        );
        let parts = snap.latest.expect("a finished token").parts;
        let get = |label: &str| parts.iter().find(|p| p.0 == label).map(|p| p.1);
        assert_eq!(get("cpu compute"), Some(SPLIT_MATMUL_NS));
        assert_eq!(get("accel comp."), Some(SPLIT_MATMUL_NS));
        assert_eq!(get("copies"), Some(2 * SPLIT_COPY_NS));
        assert_eq!(get("sync waits"), Some(SPLIT_SYNC_NS));
        assert_eq!(snap.kv, None);
    }
}
