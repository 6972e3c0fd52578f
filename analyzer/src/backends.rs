//! ProfStat across backends (seed 002 Fig 7 and 12): where each decode call's time went
//! when its graph was split between the CPU and the accel backend — compute per
//! backend, copies between them (`BACKEND_COPY`), the CPU's waits for the accel
//! (`BACKEND_SYNC`) and KV-cache I/O under a budget (the KV phases) — and the same op
//! type and shape on each backend side by side.
//!
//! Everything here is computed from the model's node spans, graphs and phases; a
//! single-backend trace gives one backend and no copies or waits.

use std::collections::{BTreeMap, HashMap};

use common::engine_abi::{BackendKind, MUL_MAT_ROW_BEGIN_PARAM, MUL_MAT_ROW_END_PARAM, OpType};
use serde::Serialize;

use common::event::BackendSpanKind;

use crate::model::{
    BackendCall, GraphSpan, NodeInfo, PhaseKind, TokenSpan, TraceModel, backend_name,
};

/// Where one decode call's time went.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TokenSplit {
    /// Decode call index.
    pub token: u32,
    /// Graph splits computed for it, per backend name.
    pub splits: BTreeMap<String, u32>,
    /// Node time (first entry to last exit) of computing nodes, per backend name, ns;
    /// for a GPU backend of llama.cpp (`is_recorded_for_device`), the CPU's time in its
    /// split calls (recording, submitting and the fence waits inside).
    pub compute_ns: BTreeMap<String, u64>,
    /// `BACKEND_COPY` node time, ns.
    pub copy_ns: u64,
    /// Copies made.
    pub copies: u32,
    /// `BACKEND_SYNC` node time: the CPU waiting for the accel, ns.
    pub sync_ns: u64,
    /// Syncs.
    pub syncs: u32,
    /// Bytes the copies moved, where recorded (llama.cpp's `ggml_backend_tensor_copy`).
    pub copy_bytes: u64,
    /// Command-buffer submissions to a GPU queue (`vkQueueSubmit`).
    pub gpu_submits: u32,
    /// Time in `vkQueueSubmit`, ns.
    pub gpu_submit_ns: u64,
    /// The CPU blocked on GPU fences (`vkWaitForFences`), ns; part of the syncs' time
    /// when a sync made them.
    pub fence_wait_ns: u64,
    /// Fence waits.
    pub fence_waits: u32,
    /// The CPU recording a GPU split's nodes into command buffers (llama.cpp's
    /// `ggml_vk_build_graph`, operator level), ns; part of the split's time.
    pub record_ns: u64,
    /// GPU nodes recorded.
    pub recorded_nodes: u32,
    /// The GPU's own time for its nodes, from the timestamps it wrote between them
    /// (`GGML_VK_PERF_LOGGER`), ns.
    pub gpu_node_ns: u64,
    /// GPU nodes with a GPU time.
    pub gpu_timed_nodes: u32,
    /// Graph inputs written into and results read from backend tensors
    /// (`ggml_backend_tensor_set`/`_get`), ns.
    pub host_io_ns: u64,
    /// Their bytes.
    pub host_io_bytes: u64,
    /// KV budget phases (swap out/in, (de)compression), ns.
    pub kv_io_ns: u64,
    /// Bytes written to KV swap files.
    pub kv_bytes_out: u64,
    /// Bytes read from KV swap files.
    pub kv_bytes_in: u64,
}

/// One op type and shape on one backend.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BackendOpRow {
    /// Op type name.
    pub op: String,
    /// Output shape; a band of a split product adds its row count (`576x1, 288 rows`).
    pub shape: String,
    /// Backend name.
    pub backend: String,
    /// Node executions.
    pub count: u64,
    /// Total node time on the backend, ns: the CPU's spans for the CPU (and the engine's
    /// accel); for a GPU, the GPU's own time of the `timed` executions.
    pub total_ns: u64,
    /// Executions with a time on the backend: `count` for the CPU; for a GPU, those whose
    /// GPU timestamps were read (none without `GGML_VK_PERF_LOGGER`).
    pub timed: u64,
    /// For a GPU, the CPU's time recording the nodes' commands, ns.
    pub record_ns: u64,
}

impl BackendOpRow {
    /// Mean node time on the backend over the timed executions, ns (`None`: untimed).
    pub fn mean_ns(&self) -> Option<f64> {
        (self.timed > 0).then(|| self.total_ns as f64 / self.timed as f64)
    }

    /// One cell of a side-by-side view: `vulkan 12.3 µs ×30`, or, for a GPU whose time
    /// was not read, its recording time (`vulkan ? (recorded in 4.1 µs) ×30`).
    pub fn cell(&self) -> String {
        match self.mean_ns() {
            Some(m) => format!("{} {:.1} µs ×{}", self.backend, m / 1e3, self.count),
            None => format!(
                "{} ? (recorded in {:.1} µs) ×{}",
                self.backend,
                self.record_ns as f64 / self.count.max(1) as f64 / 1e3,
                self.count
            ),
        }
    }
}

/// The backend view of a trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BackendStats {
    /// Backend names seen in graphs, in kind order.
    pub backends: Vec<String>,
    /// Per decode call, in order (empty from a [`BackendTable::totals_only`], as
    /// `profinfer report` builds it).
    pub tokens: Vec<TokenSplit>,
    /// Totals over the run.
    pub total: TokenSplit,
    /// Decode calls with at least one graph split.
    pub split_calls: usize,
    /// Per op type, shape and backend, sorted by op, shape, backend.
    pub ops: Vec<BackendOpRow>,
    /// The timeline of one decode step, for the picture (not in `stats.json`).
    #[serde(skip)]
    pub call: Option<CallTimeline>,
}

/// What a bar of a [`CallTimeline`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarKind {
    /// A graph split on its backend (the span of its `engine_graph_compute`).
    Split,
    /// An operator computing.
    Compute,
    /// A `BACKEND_COPY`.
    Copy,
    /// A `BACKEND_SYNC`: the CPU waiting for the accel.
    Sync,
    /// KV-budget work (`KV_FETCH`, swap phases).
    Kv,
}

/// One bar: a lane, a time range relative to the call's start, what it is.
#[derive(Clone, Debug, PartialEq)]
pub struct CallBar {
    /// Index into [`CallTimeline::lanes`].
    pub lane: usize,
    /// Start, ns after the call began.
    pub start_ns: u64,
    /// End, ns after the call began.
    pub end_ns: u64,
    /// What it is.
    pub kind: BarKind,
}

/// One decode step laid out by backend and thread (seed 002 Fig 7).
#[derive(Clone, Debug, PartialEq)]
pub struct CallTimeline {
    /// Decode call index.
    pub token: u32,
    /// Its duration, ns.
    pub dur_ns: u64,
    /// Lanes top to bottom: (label, backend name); the CPU's first.
    pub lanes: Vec<(String, String)>,
    /// Bars, splits first.
    pub bars: Vec<CallBar>,
}

/// Where a bar of a captured call goes: a thread's lane, or (a split the backend
/// computes asynchronously: llama.cpp's GPU splits, which have no node spans) a lane of
/// its own, though the decode thread records and submits it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LaneKey {
    Thread { kind: u32, tid: u32 },
    Async { kind: u32, tid: u32 },
}

/// A bar of a captured call, on the trace's clock.
#[derive(Clone, Copy, Debug)]
struct RawBar {
    /// The graph it belongs to (graphs close out of order: bars are drawn in graph
    /// order).
    graph: u32,
    lane: LaneKey,
    start_ns: u64,
    end_ns: u64,
    kind: BarKind,
}

/// The bars of one closed graph: its split and its operators' slices.
fn graph_bars(model: &TraceModel, g: &GraphSpan, out: &mut Vec<RawBar>) {
    let threads = model.threads();
    let nodes = model.nodes();
    let (kind, tid) = (g.backend_kind, g.tid);
    out.push(RawBar {
        graph: g.index,
        lane: if kind != 0 && g.nodes.is_empty() {
            LaneKey::Async { kind, tid }
        } else {
            LaneKey::Thread { kind, tid }
        },
        start_ns: g.start_ns,
        end_ns: g.end_ns.unwrap_or(u64::MAX),
        kind: BarKind::Split,
    });
    for span in model.graph_node_spans(g) {
        let bar = match OpType::from_u32(nodes[span.node as usize].op) {
            Some(OpType::BackendCopy) => BarKind::Copy,
            Some(OpType::BackendSync) => BarKind::Sync,
            Some(OpType::KvFetch) => BarKind::Kv,
            _ => BarKind::Compute,
        };
        for sl in model.span_slices(span) {
            out.push(RawBar {
                graph: g.index,
                lane: LaneKey::Thread {
                    kind,
                    tid: threads[sl.thread as usize].tid,
                },
                start_ns: sl.start_ns,
                end_ns: sl.end_ns,
                kind: bar,
            });
        }
    }
}

/// The graphs' bars of the decode step the call timeline may show: the first one that
/// was split or swapped KV, kept while graphs are read (the step is known to qualify
/// once the next one begins).
#[derive(Clone, Debug, Default)]
struct CallCapture {
    token: Option<u32>,
    bars: Vec<RawBar>,
    frozen: bool,
}

/// Whether decode call `t` was split or swapped KV (its KV phases are searched from
/// the end: they are recent when this is asked).
fn qualifies(model: &TraceModel, split: Option<&TokenSplit>, t: u32) -> bool {
    split.is_some_and(|s| s.splits.len() > 1)
        || model
            .phases()
            .iter()
            .rev()
            .take_while(|p| p.token.is_none_or(|x| x >= t))
            .any(|p| p.token == Some(t) && p.kind.is_kv())
}

/// The call timeline of captured decode step `tok`: its graphs' bars, then its KV
/// phases and backend calls, laid out per thread.
fn call_timeline(
    model: &TraceModel,
    tok: &TokenSpan,
    graph_bars: &[RawBar],
) -> Option<CallTimeline> {
    let (t0, t1) = (tok.start_ns, tok.end_ns?);
    let threads = model.threads();
    // (backend kind, tid) per lane, in order of first sight.
    let mut lanes: Vec<(u32, u32)> = Vec::new();
    let lane_of = |lanes: &mut Vec<(u32, u32)>, key: LaneKey| {
        let i = match key {
            LaneKey::Thread { tid, .. } => lanes.iter().position(|l| l.1 == tid),
            LaneKey::Async { kind, tid } => lanes.iter().position(|l| *l == (kind, tid)),
        };
        i.unwrap_or_else(|| {
            lanes.push(match key {
                LaneKey::Thread { kind, tid } | LaneKey::Async { kind, tid } => (kind, tid),
            });
            lanes.len() - 1
        })
    };
    let cpu = |tid| LaneKey::Thread { kind: 0, tid };
    let mut bars = Vec::new();
    let rel = |ns: u64| ns.clamp(t0, t1) - t0;
    let mut push = |lanes: &mut Vec<(u32, u32)>, b: RawBar| {
        let lane = lane_of(lanes, b.lane);
        bars.push(CallBar {
            lane,
            start_ns: rel(b.start_ns),
            end_ns: rel(b.end_ns),
            kind: b.kind,
        });
    };
    // The decode thread first.
    lane_of(&mut lanes, cpu(tok.tid));
    let mut graph_bars = graph_bars.to_vec();
    graph_bars.sort_by_key(|b| b.graph);
    for b in graph_bars {
        push(&mut lanes, b);
    }
    for p in model.phases() {
        if p.token == Some(tok.index) && p.kind.is_kv() {
            let (start_ns, end_ns) = (p.start_ns, p.end_ns);
            push(
                &mut lanes,
                RawBar {
                    graph: u32::MAX,
                    lane: cpu(p.tid),
                    start_ns,
                    end_ns,
                    kind: BarKind::Kv,
                },
            );
        }
    }
    for c in model.backend_calls() {
        if c.token != Some(tok.index) {
            continue;
        }
        let kind = match c.kind {
            k if k.is_wait() => BarKind::Sync,
            k if k.is_transfer() => BarKind::Copy,
            _ => continue,
        };
        let (start_ns, end_ns) = (c.start_ns, c.end_ns);
        push(
            &mut lanes,
            RawBar {
                graph: u32::MAX,
                lane: cpu(c.tid),
                start_ns,
                end_ns,
                kind,
            },
        );
    }
    // CPU lanes first (decode thread on top), then the other backends'.
    let mut order: Vec<usize> = (0..lanes.len()).collect();
    order.sort_by_key(|&i| (lanes[i].0, i));
    let mut new_index = vec![0; lanes.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    for b in &mut bars {
        b.lane = new_index[b.lane];
    }
    let label = |tid: u32| {
        threads
            .iter()
            .find(|t| t.tid == tid)
            .filter(|t| !t.comm.is_empty())
            .map_or_else(|| format!("tid {tid}"), |t| format!("{} {tid}", t.comm))
    };
    Some(CallTimeline {
        token: tok.index,
        dur_ns: t1 - t0,
        lanes: order
            .iter()
            .map(|&i| (label(lanes[i].1), backend_name(lanes[i].0)))
            .collect(),
        bars,
    })
}

impl BackendStats {
    /// Whether the trace has more than one backend, or KV-budget I/O: the views show
    /// the backend split only then.
    pub fn is_interesting(&self) -> bool {
        self.backends.len() > 1 || self.total.kv_io_ns > 0
    }

    /// The (op, shape) rows present on more than one backend, with each backend's row
    /// (Fig 12: the same operator on two processors).
    pub fn side_by_side(&self) -> Vec<(&str, &str, Vec<&BackendOpRow>)> {
        let mut out: Vec<(&str, &str, Vec<&BackendOpRow>)> = Vec::new();
        for r in &self.ops {
            match out.last_mut() {
                Some((op, shape, rows)) if *op == r.op && *shape == r.shape => rows.push(r),
                _ => out.push((&r.op, &r.shape, vec![r])),
            }
        }
        out.retain(|(_, _, rows)| rows.len() > 1);
        out
    }
}

/// The threads of backends other than the CPU, by tid, with their backend kind: those
/// that computed a graph split or an operator of one, and no CPU graph (llama.cpp's
/// main thread records its GPU splits and computes its CPU splits: it stays the CPU's).
/// Empty for a single-backend trace.
pub fn thread_backends(model: &TraceModel) -> HashMap<u32, u32> {
    let graphs = model.graphs();
    let cpu: std::collections::HashSet<u32> = graphs
        .iter()
        .filter(|g| g.backend_kind == 0)
        .map(|g| g.tid)
        .collect();
    let mut out: HashMap<u32, u32> = graphs
        .iter()
        .filter(|g| g.backend_kind != 0 && !cpu.contains(&g.tid))
        .map(|g| (g.tid, g.backend_kind))
        .collect();
    let threads = model.threads();
    for s in model.slices() {
        let tid = threads[s.thread as usize].tid;
        if let Some(g) = graphs.get(s.graph as usize)
            && g.backend_kind != 0
            && !cpu.contains(&tid)
        {
            out.insert(tid, g.backend_kind);
        }
    }
    out
}

/// One node's execution on a GPU, for a timeline's GPU lane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuSlice<'a> {
    /// The GPU's backend kind.
    pub backend_kind: u32,
    /// Node name (`ffn_up-17`).
    pub name: &'a str,
    /// Op name.
    pub op: String,
    /// On the trace's clock, ns.
    pub start_ns: u64,
    /// End, ns.
    pub end_ns: u64,
}

/// The GPU lanes of a timeline: every node execution a GPU timed, in trace order, and
/// the backend kinds that have one (sorted). Both timeline encoders draw them under the
/// GPU's track group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuLanes<'a> {
    /// Backend kinds with a lane.
    pub kinds: Vec<u32>,
    /// The executions.
    pub slices: Vec<GpuSlice<'a>>,
}

/// The GPU lanes of `model`'s timeline.
pub fn gpu_lanes(model: &TraceModel) -> GpuLanes<'_> {
    let graphs = model.graphs();
    let nodes = model.nodes();
    let slices: Vec<GpuSlice<'_>> = model
        .node_spans()
        .iter()
        .filter_map(|s| {
            let gpu = s.gpu?;
            let n = nodes.get(s.node as usize)?;
            Some(GpuSlice {
                backend_kind: graphs.get(s.graph as usize)?.backend_kind,
                name: &n.name,
                op: n.op_name(),
                start_ns: gpu.start_ns,
                end_ns: gpu.start_ns + gpu.dur_ns,
            })
        })
        .collect();
    let mut kinds: Vec<u32> = slices.iter().map(|g| g.backend_kind).collect();
    kinds.sort_unstable();
    kinds.dedup();
    GpuLanes { kinds, slices }
}

/// The process id a timeline gives backend `kind`'s track group: the target's for the
/// CPU, an id above any real pid for the others (Linux pids stay below 2^22).
pub fn backend_group_pid(target_pid: u32, kind: u32) -> u32 {
    if kind == 0 {
        target_pid
    } else {
        target_pid.wrapping_add(kind.wrapping_mul(10_000_000))
    }
}

/// The CPU's waits for the accel: `(start, end, name)` of every `BACKEND_SYNC` node.
pub fn sync_waits(model: &TraceModel) -> Vec<(u64, u64, &str)> {
    let nodes = model.nodes();
    let sync = OpType::BackendSync as u32;
    model
        .node_spans()
        .iter()
        .filter(|s| nodes[s.node as usize].op == sync)
        .map(|s| (s.start_ns, s.end_ns, nodes[s.node as usize].name.as_str()))
        .collect()
}

/// The shape key of a node: its shape, plus the row count of a tensor-split band.
fn shape_key(n: &NodeInfo) -> String {
    let shape = n.shape();
    if n.op == OpType::MulMat as u32 && n.has_op_params {
        let (b, e) = (
            n.op_params[MUL_MAT_ROW_BEGIN_PARAM],
            n.op_params[MUL_MAT_ROW_END_PARAM],
        );
        if e > b {
            return format!("{shape}, {} rows", e - b);
        }
    }
    shape
}

fn add(into: &mut TokenSplit, from: &TokenSplit) {
    for (k, v) in &from.splits {
        *into.splits.entry(k.clone()).or_default() += v;
    }
    for (k, v) in &from.compute_ns {
        *into.compute_ns.entry(k.clone()).or_default() += v;
    }
    into.copy_ns += from.copy_ns;
    into.copies += from.copies;
    into.sync_ns += from.sync_ns;
    into.syncs += from.syncs;
    into.copy_bytes += from.copy_bytes;
    into.gpu_submits += from.gpu_submits;
    into.gpu_submit_ns += from.gpu_submit_ns;
    into.fence_wait_ns += from.fence_wait_ns;
    into.record_ns += from.record_ns;
    into.recorded_nodes += from.recorded_nodes;
    into.gpu_node_ns += from.gpu_node_ns;
    into.gpu_timed_nodes += from.gpu_timed_nodes;
    into.fence_waits += from.fence_waits;
    into.host_io_ns += from.host_io_ns;
    into.host_io_bytes += from.host_io_bytes;
    into.kv_io_ns += from.kv_io_ns;
    into.kv_bytes_out += from.kv_bytes_out;
    into.kv_bytes_in += from.kv_bytes_in;
}

/// Adds graph `g`'s node spans to `t` (and to the per-op table, if given).
fn add_graph(
    model: &TraceModel,
    g: &GraphSpan,
    t: Option<&mut TokenSplit>,
    mut ops: Option<&mut BTreeMap<(String, String, String), BackendOpRow>>,
) {
    let nodes = model.nodes();
    let backend = g.backend_name();
    // A GPU of llama.cpp: its nodes' spans are the CPU recording them (the split's time
    // is the CPU's call), their GPU time comes from timestamps.
    let records = is_recorded_for_device(g.backend_kind);
    let mut t = t;
    if let Some(t) = t.as_deref_mut() {
        *t.splits.entry(backend.clone()).or_default() += 1;
        // A backend whose nodes are not computed by the CPU (llama.cpp's GPU splits): the
        // CPU's whole call for the split (recording, submitting and any fence wait in it).
        if g.backend_kind != 0 && (records || g.nodes.is_empty()) {
            *t.compute_ns.entry(backend.clone()).or_default() += g.dur_ns();
        }
    }
    for span in model.graph_node_spans(g) {
        let n = &nodes[span.node as usize];
        let dur = span.dur_ns();
        if let Some(ops) = ops.as_deref_mut() {
            let row = ops
                .entry((n.op_name(), shape_key(n), backend.clone()))
                .or_insert_with(|| BackendOpRow {
                    op: n.op_name(),
                    shape: shape_key(n),
                    backend: backend.clone(),
                    ..BackendOpRow::default()
                });
            row.count += 1;
            if records {
                row.record_ns += dur;
                if let Some(gpu) = span.gpu {
                    row.timed += 1;
                    row.total_ns += gpu.dur_ns;
                }
            } else {
                row.timed += 1;
                row.total_ns += dur;
            }
        }
        let Some(t) = t.as_deref_mut() else {
            continue;
        };
        if records {
            t.record_ns += dur;
            t.recorded_nodes += 1;
            if let Some(gpu) = span.gpu {
                t.gpu_node_ns += gpu.dur_ns;
                t.gpu_timed_nodes += 1;
            }
            continue;
        }
        match OpType::from_u32(n.op) {
            Some(OpType::BackendCopy) => {
                t.copy_ns += dur;
                t.copies += 1;
            }
            Some(OpType::BackendSync) => {
                t.sync_ns += dur;
                t.syncs += 1;
            }
            // KV management: its I/O is counted from the phases.
            Some(OpType::KvFetch) => {}
            _ => *t.compute_ns.entry(backend.clone()).or_default() += dur,
        }
    }
}

/// Whether backend `kind`'s nodes are computed away from the CPU, which only records
/// them (llama.cpp's GPU backends), as opposed to the CPU and the engine's accel.
pub fn is_recorded_for_device(kind: u32) -> bool {
    matches!(
        BackendKind::from_u32(kind),
        Some(
            BackendKind::Gpu
                | BackendKind::Vulkan
                | BackendKind::OpenCl
                | BackendKind::Cuda
                | BackendKind::Metal
        )
    )
}

/// Adds a backend call (llama.cpp's copies, waits, submissions) to `t`.
fn add_backend_call(t: &mut TokenSplit, c: &BackendCall) {
    let dur = c.dur_ns();
    match c.kind {
        BackendSpanKind::Sync | BackendSpanKind::EventSync => {
            t.sync_ns += dur;
            t.syncs += 1;
        }
        BackendSpanKind::Copy => {
            t.copy_ns += dur;
            t.copies += 1;
            t.copy_bytes += c.bytes;
        }
        BackendSpanKind::Upload | BackendSpanKind::Download => {
            t.host_io_ns += dur;
            t.host_io_bytes += c.bytes;
        }
        BackendSpanKind::VkSubmit => {
            t.gpu_submit_ns += dur;
            t.gpu_submits += 1;
        }
        BackendSpanKind::VkFenceWait => {
            t.fence_wait_ns += dur;
            t.fence_waits += 1;
        }
    }
}

/// Adds a KV phase to `t`.
fn add_kv_phase(t: &mut TokenSplit, p: &crate::model::PhaseSpan) {
    t.kv_io_ns += p.end_ns.saturating_sub(p.start_ns);
    match p.kind {
        PhaseKind::KvSwapOut => t.kv_bytes_out += u64::from(p.arg),
        PhaseKind::KvSwapIn => t.kv_bytes_in += u64::from(p.arg),
        _ => {}
    }
}

/// The split of one decode call (cheap: its graphs and the phases from the end; for
/// the live view's latest token).
pub fn token_split(model: &TraceModel, token: u32) -> TokenSplit {
    let mut t = TokenSplit {
        token,
        ..TokenSplit::default()
    };
    for g in model.token_graphs(token) {
        add_graph(model, g, Some(&mut t), None);
    }
    for c in model.backend_calls().iter().rev() {
        match c.token {
            Some(x) if x == token => add_backend_call(&mut t, c),
            Some(x) if x < token => break,
            _ => {}
        }
    }
    for p in model.phases().iter().rev() {
        match p.token {
            Some(x) if x == token && p.kind.is_kv() => add_kv_phase(&mut t, p),
            Some(x) if x < token => break,
            _ => {}
        }
    }
    t
}

/// Computes the backend view.
pub fn compute(model: &TraceModel) -> BackendStats {
    let mut table = BackendTable::default();
    for g in model.graphs() {
        table.add_graph(model, g);
    }
    table.finish(model)
}

/// The backend view built graph by graph as graphs close: what it keeps grows with the
/// decode calls (one row each), or not at all ([`BackendTable::totals_only`]).
#[derive(Clone, Debug)]
pub struct BackendTable {
    kinds: Vec<u32>,
    ops: BTreeMap<(String, String, String), BackendOpRow>,
    call: CallCapture,
    keep_rows: bool,
    /// Per decode call (when rows are kept).
    rows: Vec<TokenSplit>,
    /// The latest decode call's split (when they are not).
    open: Option<TokenSplit>,
    /// The closed calls' sum (when rows are not kept).
    closed: TokenSplit,
    split_calls: usize,
}

impl Default for BackendTable {
    fn default() -> Self {
        BackendTable {
            kinds: Vec::new(),
            ops: BTreeMap::new(),
            call: CallCapture::default(),
            keep_rows: true,
            rows: Vec::new(),
            open: None,
            closed: TokenSplit {
                token: u32::MAX,
                ..TokenSplit::default()
            },
            split_calls: 0,
        }
    }
}

impl BackendTable {
    /// A table that sums decode calls as they complete instead of keeping a row for
    /// each (for reading a recording of any length in bounded memory).
    pub fn totals_only() -> BackendTable {
        BackendTable {
            keep_rows: false,
            ..BackendTable::default()
        }
    }

    /// Adds closed graph `g` of `model`.
    pub fn add_graph(&mut self, model: &TraceModel, g: &GraphSpan) {
        if !self.kinds.contains(&g.backend_kind) {
            self.kinds.push(g.backend_kind);
        }
        // Before the graph's call takes the place of the last one (without rows, the
        // last call's split is only held until then).
        self.capture(model, g);
        let mut ops = std::mem::take(&mut self.ops);
        let t = g.token.map(|t| self.row(t));
        add_graph(model, g, t, Some(&mut ops));
        self.ops = ops;
    }

    /// The split of decode call `t`, for adding a graph of it.
    fn row(&mut self, t: u32) -> &mut TokenSplit {
        if self.keep_rows {
            if self.rows.len() <= t as usize {
                self.rows.resize(t as usize + 1, TokenSplit::default());
            }
            return &mut self.rows[t as usize];
        }
        if self.open.as_ref().is_some_and(|o| o.token != t) {
            self.close_open();
        }
        self.open.get_or_insert_with(|| TokenSplit {
            token: t,
            ..TokenSplit::default()
        })
    }

    /// Adds the open decode call into the closed calls' sum.
    fn close_open(&mut self) {
        if let Some(o) = self.open.take() {
            self.split_calls += usize::from(!o.splits.is_empty());
            add(&mut self.closed, &o);
        }
    }

    /// The split of decode call `t`, if still held.
    fn split_of(&self, t: u32) -> Option<&TokenSplit> {
        if self.keep_rows {
            self.rows.get(t as usize)
        } else {
            self.open.as_ref().filter(|o| o.token == t)
        }
    }

    /// Keeps graph `g`'s bars while its decode step may be the one the call timeline
    /// shows.
    fn capture(&mut self, model: &TraceModel, g: &GraphSpan) {
        let Some(t) = g.token else {
            return;
        };
        if self.call.frozen {
            return;
        }
        if self.call.token != Some(t) {
            if let Some(prev) = self.call.token
                && qualifies(model, self.split_of(prev), prev)
            {
                self.call.frozen = true;
                return;
            }
            let decode = model
                .tokens()
                .get(t as usize)
                .is_some_and(|tok| tok.phase == crate::model::TokenPhase::Decode);
            self.call.bars.clear();
            self.call.token = decode.then_some(t);
            if !decode {
                return;
            }
        }
        graph_bars(model, g, &mut self.call.bars);
    }

    /// The backend view, once every graph was added (phases and backend calls are read
    /// from `model`).
    pub fn finish(mut self, model: &TraceModel) -> BackendStats {
        self.kinds.sort_unstable();
        let call = self
            .call
            .token
            .filter(|&t| self.call.frozen || qualifies(model, self.split_of(t), t))
            .and_then(|t| model.tokens().get(t as usize))
            .filter(|tok| tok.end_ns.is_some())
            .and_then(|tok| call_timeline(model, tok, &self.call.bars));
        let (tokens, total, split_calls) = if self.keep_rows {
            let mut rows = std::mem::take(&mut self.rows);
            rows.resize(model.tokens().len().max(rows.len()), TokenSplit::default());
            for (i, t) in rows.iter_mut().enumerate() {
                t.token = i as u32;
            }
            add_token_records(model, &mut Rows::PerCall(&mut rows));
            let mut total = self.closed.clone();
            for t in &rows {
                add(&mut total, t);
            }
            let split_calls = rows.iter().filter(|t| !t.splits.is_empty()).count();
            (rows, total, split_calls)
        } else {
            self.close_open();
            let mut total = std::mem::take(&mut self.closed);
            add_token_records(model, &mut Rows::Sum(&mut total));
            (Vec::new(), total, self.split_calls)
        };
        BackendStats {
            backends: self.kinds.into_iter().map(backend_name).collect(),
            call,
            tokens,
            total,
            split_calls,
            ops: self.ops.into_values().collect(),
        }
    }
}

/// Where a decode call's records are added: its own row, or one sum for every call.
enum Rows<'a> {
    PerCall(&'a mut [TokenSplit]),
    Sum(&'a mut TokenSplit),
}

impl Rows<'_> {
    fn get(&mut self, t: u32) -> Option<&mut TokenSplit> {
        match self {
            Rows::PerCall(rows) => rows.get_mut(t as usize),
            Rows::Sum(total) => Some(total),
        }
    }
}

/// Adds the KV phases and backend calls of each decode call to its row.
fn add_token_records(model: &TraceModel, rows: &mut Rows<'_>) {
    for p in model.phases().iter().filter(|p| p.kind.is_kv()) {
        if let Some(t) = p.token.and_then(|t| rows.get(t)) {
            add_kv_phase(t, p);
        }
    }
    for c in model.backend_calls() {
        if let Some(t) = c.token.and_then(|t| rows.get(t)) {
            add_backend_call(t, c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{
        SPLIT_COPY_NS, SPLIT_MATMUL_NS, SPLIT_SYNC_NS, SynthSpec, model, split_model,
    };

    /// llama.cpp records on thread [`TID`] of process 1.
    mod llama {
        use common::event::{DecodeEvent, EVENT_FLAG_EXIT, EventHeader, EventKind, GraphEvent};
        use trace_format::Event;

        /// The thread.
        pub const TID: u32 = 7;

        /// A header of `kind` at `ts` (an exit with `exit`).
        pub fn h(kind: EventKind, exit: bool, ts: u64) -> EventHeader {
            EventHeader {
                kind: kind as u32,
                flags: if exit { EVENT_FLAG_EXIT } else { 0 },
                ts_ns: ts,
                pid: 1,
                tid: TID,
                cpu: 0,
                _pad: 0,
            }
        }

        /// A split's entry or exit on backend `kind` with `n` nodes.
        pub fn graph(exit: bool, ts: u64, kind: common::BackendKind, n: u32) -> Event {
            Event::Graph(GraphEvent {
                header: h(EventKind::GraphCompute, exit, ts),
                graph_addr: 0x100 + kind as u64,
                n_nodes: n,
                backend_kind: kind as u32,
                n_tokens: 1,
                ..GraphEvent::default()
            })
        }

        /// A one-token decode call's entry or exit.
        pub fn decode(exit: bool, ts: u64) -> Event {
            Event::Decode(DecodeEvent {
                header: h(EventKind::Decode, exit, ts),
                n_tokens: 1,
                pos: 5,
                ..DecodeEvent::default()
            })
        }
    }

    /// llama.cpp on a GPU backend: a decode call with a CPU split and a Vulkan split
    /// (no node spans: its time is the CPU's call), the submissions and fence waits in
    /// it, a sync with its own fence wait, a copy: each lands in its field, and the
    /// Vulkan split gets its own lane in the picture.
    #[test]
    fn a_gpu_split_of_llama_cpp_counts_its_calls() {
        use common::event::{BackendSpanEvent, EventKind};
        use llama::{decode, graph, h};
        use trace_format::Event;
        let call = |what: BackendSpanKind, start: u64, end: u64, kind: u32, bytes: u64| {
            Event::BackendSpan(BackendSpanEvent {
                header: h(EventKind::BackendSpan, false, end),
                start_ns: start,
                what: what as u32,
                backend_kind: kind,
                bytes,
                object: 0,
            })
        };
        let vk = common::BackendKind::Vulkan as u32;
        let mut m = TraceModel::new(&crate::synthetic::synth_header());
        for e in [
            decode(false, 1_000),
            graph(false, 1_100, common::BackendKind::Cpu, 1),
            graph(true, 1_200, common::BackendKind::Cpu, 1),
            call(BackendSpanKind::Copy, 1_300, 1_400, u32::MAX, 4096),
            graph(false, 1_500, common::BackendKind::Vulkan, 1055),
            call(BackendSpanKind::VkSubmit, 1_600, 1_650, vk, 1),
            call(BackendSpanKind::VkFenceWait, 1_700, 5_700, vk, 1),
            graph(true, 6_000, common::BackendKind::Vulkan, 1055),
            call(BackendSpanKind::VkFenceWait, 6_100, 6_200, vk, 1),
            call(BackendSpanKind::Sync, 6_050, 6_300, vk, 0),
            call(BackendSpanKind::Download, 6_400, 6_500, vk, 196_608),
            decode(true, 7_000),
        ] {
            m.apply(&e);
        }
        let st = compute(&m);
        assert_eq!(st.backends, ["cpu", "vulkan"]);
        assert!(st.is_interesting());
        let t = &st.tokens[0];
        assert_eq!(t.splits.get("vulkan"), Some(&1));
        assert_eq!(t.compute_ns.get("vulkan"), Some(&4_500), "the split call");
        assert_eq!((t.gpu_submits, t.gpu_submit_ns), (1, 50));
        assert_eq!((t.fence_waits, t.fence_wait_ns), (2, 4_100));
        assert_eq!((t.syncs, t.sync_ns), (1, 250));
        assert_eq!((t.copies, t.copy_ns, t.copy_bytes), (1, 100, 4096));
        assert_eq!((t.host_io_ns, t.host_io_bytes), (100, 196_608));
        assert_eq!(&token_split(&m, 0), t, "the live view's split");
        let call = st.call.as_ref().expect("a split decode step");
        assert_eq!(call.lanes.len(), 2, "{:?}", call.lanes);
        assert_eq!(call.lanes[1].1, "vulkan");
        let on_vulkan: Vec<&CallBar> = call.bars.iter().filter(|b| b.lane == 1).collect();
        assert_eq!(on_vulkan.len(), 1);
        assert_eq!(on_vulkan[0].kind, BarKind::Split);
        assert!(
            call.bars
                .iter()
                .any(|b| b.lane == 0 && b.kind == BarKind::Sync && b.end_ns - b.start_ns == 4_000)
        );
    }

    /// A split synthetic trace: per call, the CPU's and the accel's compute, the copies
    /// and the sync add up to what the generator put in (with a CPU split and the accel
    /// split open at the same time), and the same product shows on both backends side
    /// by side.
    /// llama.cpp's Vulkan split at the operator level with its GPU timestamps: the
    /// nodes the CPU records carry their GPU time (a fused second node's within the
    /// first's), the token split counts both, the op rows take the GPU's time, the
    /// main thread (which also computes a CPU split) stays the CPU's, and both timeline
    /// encoders get the GPU's lane.
    #[test]
    fn gpu_timestamps_time_the_nodes_of_a_vulkan_split() {
        let vk = common::BackendKind::Vulkan as u32;
        let mut m = TraceModel::new(&crate::synthetic::synth_header());
        for e in crate::synthetic::vulkan_split_events() {
            m.apply(&e);
        }
        m.finish(Some(5_000));
        let g = m
            .graphs()
            .iter()
            .find(|g| g.backend_kind == vk)
            .expect("split");
        let gpu: Vec<Option<u64>> = m
            .graph_node_spans(g)
            .iter()
            .map(|s| s.gpu.map(|t| t.dur_ns))
            .collect();
        assert_eq!(gpu, [Some(300), Some(300), Some(1_000)]);
        let st = compute(&m);
        let t = &st.tokens[0];
        assert_eq!((t.recorded_nodes, t.record_ns), (3, 50));
        assert_eq!((t.gpu_timed_nodes, t.gpu_node_ns), (3, 1_600));
        assert_eq!(t.compute_ns.get("vulkan"), Some(&2_500), "the split call");
        assert_eq!(t.compute_ns.get("cpu"), Some(&80));
        let mm: Vec<&BackendOpRow> = st.ops.iter().filter(|r| r.op == "MUL_MAT").collect();
        assert_eq!(mm.len(), 2, "{mm:?}");
        let on_vk = mm
            .iter()
            .find(|r| r.backend == "vulkan")
            .expect("vulkan row");
        assert_eq!(
            (on_vk.timed, on_vk.total_ns, on_vk.record_ns),
            (1, 1_000, 20)
        );
        assert!(
            thread_backends(&m).is_empty(),
            "the main thread stays the CPU's"
        );
        let lanes = gpu_lanes(&m);
        assert_eq!(lanes.kinds, [vk]);
        let lane = &lanes.slices;
        assert_eq!(lane.len(), 3);
        assert_eq!(
            (lane[2].name, lane[2].start_ns, lane[2].end_ns),
            ("ffn_up-1", 2_600, 3_600)
        );
        let mut chrome = Vec::new();
        crate::export::chrome::write(&m, &Default::default(), &mut chrome).expect("chrome");
        let chrome = String::from_utf8(chrome).expect("utf-8");
        assert!(chrome.contains("GPU (node timestamps)") && chrome.contains(r#""cat":"gpu""#));
    }

    #[test]
    fn a_split_trace_splits_time_by_backend() {
        let m = split_model(3);
        let st = compute(&m);
        assert_eq!(st.backends, ["cpu", "accel"]);
        assert!(st.is_interesting());
        assert_eq!(st.tokens.len(), 3);
        for t in &st.tokens {
            assert_eq!(t.splits.get("accel"), Some(&1), "{t:?}");
            assert_eq!(t.splits.get("cpu"), Some(&2), "{t:?}");
            assert_eq!((t.sync_ns, t.syncs), (SPLIT_SYNC_NS, 1), "{t:?}");
            assert_eq!((t.copy_ns, t.copies), (2 * SPLIT_COPY_NS, 2), "{t:?}");
            assert_eq!(t.compute_ns.get("accel"), Some(&SPLIT_MATMUL_NS));
            assert_eq!(t.compute_ns.get("cpu"), Some(&SPLIT_MATMUL_NS));
        }
        assert_eq!(st.total.sync_ns, 3 * SPLIT_SYNC_NS);
        let both = st.side_by_side();
        assert_eq!(both.len(), 2, "{both:?}"); // MUL_MAT and BACKEND_COPY, 64 wide
        let (op, shape, rows) = &both[1];
        assert_eq!((*op, *shape), ("MUL_MAT", "64"));
        assert_eq!(
            rows.iter()
                .map(|r| (r.backend.as_str(), r.count))
                .collect::<Vec<_>>(),
            [("accel", 3), ("cpu", 3)]
        );
        assert_eq!(m.unpaired().graph_enter, 0, "no graph was closed early");
        for t in &st.tokens {
            assert_eq!(
                &token_split(&m, t.token),
                t,
                "the live view's split of one call"
            );
        }
        // The picture's call: two lanes (decode thread, accel driver), the sync bar as
        // long as the generator's wait, the accel's bars on the accel lane.
        let call = st.call.as_ref().expect("a split decode step");
        assert_eq!(call.lanes.len(), 2);
        assert_eq!(call.lanes[1].1, "accel");
        let sync: Vec<&CallBar> = call
            .bars
            .iter()
            .filter(|b| b.kind == BarKind::Sync)
            .collect();
        assert_eq!(sync.len(), 1);
        assert_eq!(sync[0].end_ns - sync[0].start_ns, SPLIT_SYNC_NS);
        assert_eq!(sync[0].lane, 0);
        assert!(
            call.bars
                .iter()
                .any(|b| b.lane == 1 && b.kind == BarKind::Compute)
        );
    }

    /// A single-backend trace has one backend and nothing to split.
    #[test]
    fn a_cpu_trace_is_not_split() {
        let m = model(&SynthSpec::default(), None);
        let st = compute(&m);
        assert_eq!(st.backends, ["cpu"]);
        assert!(!st.is_interesting());
        assert!(st.side_by_side().is_empty());
        assert_eq!((st.total.copy_ns, st.total.sync_ns), (0, 0));
    }
}
