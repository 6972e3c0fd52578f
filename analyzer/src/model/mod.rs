//! The incremental trace model: [`TraceModel::apply`] takes events in timestamp order
//! (see [`crate::ingest::Reorder`]) and keeps tokens, graphs, operator slices and spans,
//! thread states, QoS switches and losses. Exporters and the live view read it through
//! the query methods; per-op-type and per-class aggregates are kept up to date as node
//! spans complete (at each graph's exit), so a snapshot is cheap.
//!
//! Memory, with [`Retention::All`]: 32 bytes per operator slice (+ 8 bytes per counter
//! when counters were read), ~100 bytes per node span, plus the (small)
//! token/graph/phase/state records. With [`Retention::Aggregates`] a closed graph's
//! slices and spans are handed to the reader ([`TraceModel::release_closed`]) and
//! dropped, and scheduler intervals are summed, not kept: what remains grows with decode
//! calls and graphs (`profinfer report` of 240 000 calls peaks at 64 MB), not with
//! operator or scheduler events. Node
//! descriptions are interned; their number is bounded by the model's distinct nodes
//! and shapes.

mod backend_call;
pub mod cpu_samples;
mod expert;
mod gpu_time;
mod graph;
mod latency;
mod leaf;
mod marks;
pub mod node_name;
mod op;
mod requests;
mod runs;
mod span;
mod thread;
mod token;

use std::collections::HashMap;

pub use backend_call::BackendCall;
use common::event::{
    BackendSpanEvent, DecodeEvent, EventHeader, EventKind, ExpertRouteEvent, GpuTimestampsEvent,
    GraphEvent, LeafNodeEvent, MAX_PMC, NodeDescEvent, OP_DETAIL_PMC, OP_DETAIL_STRUCTURE, OpEvent,
    OpExitEvent, PhaseEvent, PmcReading, SchedSwitchEvent, TaskEvent,
};
pub use cpu_samples::{CpuSamples, SampledReport, SampledShare};
pub use expert::LayerRoute;
pub use graph::{GraphSpan, backend_name};
pub use leaf::LeafInfo;
pub use marks::{EventCounts, LossMark, QosMark, Unpaired, WindowMark};
pub use node_name::class_of;
pub use op::{
    GpuTime, MatMulDims, NONE_U32, NodeInfo, NodeSpan, OpAggregate, OpSlice, PMC_MISSING, op_name,
};
pub use requests::{SeqRequest, is_batched};
pub use runs::SequenceRun;
pub use thread::{SchedState, StateSlice, StateTimeline, ThreadInfo};
pub use token::{PhaseKind, PhaseSpan, SeqCount, TokenPhase, TokenSpan};
use trace_format::{Event, RecordRef, TraceHeader};

/// Most threads the model tracks (further threads are counted in `over_limit`).
pub const MAX_THREADS: usize = 1 << 16;
/// Most distinct node descriptions (address × name × shape × sources).
pub const MAX_NODE_INFOS: usize = 1 << 20;
/// Most distinct node classes (names without the layer suffix).
pub const MAX_CLASSES: usize = 1 << 12;
/// Op-type slots: every op of `common::op_catalog` plus one for unknown values.
pub const OP_TYPE_SLOTS: usize = common::op_catalog::OP_NAMES.len() + 1;

/// The op-type slot of an op value (unknown values share the last slot).
pub fn op_slot(op: u32) -> usize {
    (op as usize).min(OP_TYPE_SLOTS - 1)
}

/// An operator entry waiting for its exit.
#[derive(Clone, Copy, Debug)]
struct OpenOp {
    start_ns: u64,
    node: u32,
    graph: u32,
    pmc_ok: u32,
    pmc: [PmcReading; MAX_PMC],
}

/// A counter's change between two readings. A multiplexed (hardware) counter, read
/// with its enabled and running times, is scaled by enabled / running over the interval,
/// as `perf stat` does; software counters carry no times and are taken as counted.
fn counter_delta(entry: &PmcReading, exit: &PmcReading) -> u64 {
    let delta = exit.counter.wrapping_sub(entry.counter);
    let enabled = exit.enabled.wrapping_sub(entry.enabled);
    let running = exit.running.wrapping_sub(entry.running);
    if running == 0 || running >= enabled {
        return delta;
    }
    (u128::from(delta) * u128::from(enabled) / u128::from(running)).min(u128::from(u64::MAX)) as u64
}

/// A graph computation whose exit has not been seen, with the operator slices that ran
/// in it. One per backend kind at a time: a CPU split and an accel split can run at
/// once, and each operator event names the kind of its probe point.
#[derive(Clone, Debug, Default)]
struct OpenGraph {
    backend_kind: u32,
    graph: u32,
    slices: Vec<u32>,
    /// Its spans (format 4) whose node is resolved when it closes.
    pending: Vec<span::PendingSpan>,
    /// The GPU timestamps read back during it (a GPU split), if any.
    gpu: gpu_time::SplitTimestamps,
}

/// Per-thread pairing state.
#[derive(Clone, Debug, Default)]
struct Pairing {
    op: Option<OpenOp>,
    /// Layer of the last node with a layer this thread entered.
    last_layer: Option<i32>,
    token: Option<u32>,
    graph: Option<u32>,
    phase: [Option<(u64, u32)>; PhaseKind::COUNT],
    /// When the thread last began a graph (`engine_graph_thread`): where its first node
    /// of that graph starts when only nodes' ends were probed.
    graph_begin: Option<u64>,
}

/// The model of one trace.
#[derive(Clone, Debug, Default)]
pub struct TraceModel {
    counter_names: Vec<String>,
    target_pid: u32,
    first_ns: Option<u64>,
    last_ns: u64,
    tokens: Vec<TokenSpan>,
    runs: runs::Runs,
    graphs: Vec<GraphSpan>,
    backend_calls: Vec<BackendCall>,
    phases: Vec<PhaseSpan>,
    nodes: Vec<NodeInfo>,
    node_by_addr: HashMap<u64, Vec<u32>>,
    classes: Vec<String>,
    class_ids: HashMap<String, u32>,
    slices: Vec<OpSlice>,
    slice_pmc: Vec<u64>,
    node_spans: Vec<NodeSpan>,
    node_slice_ids: Vec<u32>,
    op_types: Vec<OpAggregate>,
    class_aggs: Vec<OpAggregate>,
    threads: Vec<ThreadInfo>,
    pairing: Vec<Pairing>,
    thread_idx: HashMap<u32, u32>,
    forked: Vec<u32>,
    open_graphs: Vec<OpenGraph>,
    /// Slice buffers of closed graphs, reused.
    spare_slices: Vec<Vec<u32>>,
    qos: Vec<QosMark>,
    windows: Vec<WindowMark>,
    samples: CpuSamples,
    losses: Vec<LossMark>,
    leaves: HashMap<u64, LeafInfo>,
    /// The latest description of each node address (format 4).
    descs: HashMap<u64, Box<NodeDescEvent>>,
    routes: Vec<LayerRoute>,
    route_index: HashMap<(u32, u64), u32>,
    unpaired: Unpaired,
    counts: EventCounts,
    finished: bool,
    retention: Retention,
    /// Graphs closed since the last [`TraceModel::release_closed`] (only when the model
    /// keeps aggregates).
    closed: Vec<u32>,
    /// Graphs below this index have had their operator detail released.
    detail_from_graph: u32,
}

/// What the model keeps of a graph's operators once the graph has closed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Retention {
    /// Every operator slice, node span and scheduler interval: what the timeline, the
    /// DAG and the live view draw. Memory grows with the recording (see the module doc).
    #[default]
    All,
    /// Only what does not grow with operator events: aggregates, tokens, graphs, phases
    /// and per-thread state totals. Operator detail is handed to the caller of
    /// [`TraceModel::release_closed`] graph by graph and then dropped, so a recording of
    /// any length is read in memory bounded by its tokens and graphs (`docs/performance.md`).
    Aggregates,
}

impl TraceModel {
    /// An empty model for a trace with this header (counter names, target pid).
    pub fn new(header: &TraceHeader) -> TraceModel {
        TraceModel {
            counter_names: header
                .counters
                .iter()
                .take(MAX_PMC)
                .map(|c| c.name.clone())
                .collect(),
            target_pid: header.target.pid,
            op_types: vec![OpAggregate::default(); OP_TYPE_SLOTS],
            ..TraceModel::default()
        }
    }

    /// An empty model that keeps `retention` of each closed graph.
    pub fn with_retention(header: &TraceHeader, retention: Retention) -> TraceModel {
        TraceModel {
            retention,
            ..TraceModel::new(header)
        }
    }

    /// What the model keeps of closed graphs.
    pub fn retention(&self) -> Retention {
        self.retention
    }

    /// With [`Retention::Aggregates`]: calls `each` with every graph closed since the last
    /// call, while its node spans and slices can still be read, then drops the operator
    /// detail of every closed graph once no graph is open (slices of an open graph are
    /// kept until it closes). Does nothing with [`Retention::All`].
    pub fn release_closed(&mut self, mut each: impl FnMut(&TraceModel, &GraphSpan)) {
        if self.closed.is_empty() {
            return;
        }
        let closed = std::mem::take(&mut self.closed);
        for &g in &closed {
            each(self, &self.graphs[g as usize]);
        }
        self.closed = closed;
        self.closed.clear();
        if self.open_graphs.is_empty() {
            self.detail_from_graph = self.graphs.len() as u32;
            self.slices.clear();
            self.slice_pmc.clear();
            self.node_spans.clear();
            self.node_slice_ids.clear();
        }
    }

    /// The CPU-clock samples of a `--sample` recording (empty otherwise).
    pub fn cpu_samples(&self) -> &CpuSamples {
        &self.samples
    }

    /// Whether graph `g`'s node spans and slices are still held (always with
    /// [`Retention::All`]).
    pub fn has_detail(&self, g: &GraphSpan) -> bool {
        g.index >= self.detail_from_graph
    }

    /// Applies one event. Events must come in timestamp order (per thread at least;
    /// across threads for correct graph assignment), as [`crate::ingest::Reorder`]
    /// delivers them.
    pub fn apply(&mut self, event: &Event) {
        let h = event.header();
        self.note_time(h.ts_ns);
        match event {
            Event::Decode(e) => self.apply_decode(&h, e),
            Event::Graph(e) => self.apply_graph(&h, e),
            Event::Op(e) => {
                self.counts.op += 1;
                // An exit built the format-1/2 way (readers convert those on reading).
                if e.header.is_exit() {
                    self.apply_op_exit(&OpExitEvent::from_op_exit(e));
                } else {
                    self.apply_op(e);
                }
            }
            Event::OpExit(e) => {
                self.counts.op += 1;
                self.apply_op_exit(e);
            }
            Event::GraphThread(_) => {
                self.counts.op += 1;
                if let Some(t) = self.thread(h.tid, Some(h.pid)) {
                    self.pairing[t].graph_begin = Some(h.ts_ns);
                }
            }
            Event::BackendSpan(e) => self.apply_backend_span(&h, e),
            Event::GpuTimestamps(e) => self.apply_gpu_timestamps(&h, e),
            Event::OpSpan(e) => self.apply_op_span(e, None),
            Event::OpSpanPmc(e) => self.apply_op_span(&e.span, Some((e.pmc_ok, &e.delta))),
            Event::NodeDesc(d) => self.apply_node_desc(d),
            Event::ExpertRoute(e) => self.apply_expert_route(e),
            Event::Phase(e) => self.apply_phase(&h, e),
            Event::SchedSwitch(e) => self.apply_sched_switch(&h, e),
            Event::SchedWakeup(e) => {
                self.counts.sched += 1;
                if let Some(t) = self.thread(e.target_tid, None) {
                    self.threads[t].states.wakeup(h.ts_ns, e.target_cpu);
                }
            }
            Event::Task(e) => self.apply_task(&h, e),
            Event::QosSwitch(e) => {
                self.counts.collector += 1;
                self.qos.push(QosMark {
                    ts_ns: h.ts_ns,
                    levels_before: e.levels_before,
                    levels_after: e.levels_after,
                    tps_milli: e.tps_milli,
                    min_tps_milli: e.min_tps_milli,
                });
            }
            Event::OpWindow(e) => {
                self.counts.collector += 1;
                self.windows.push(WindowMark {
                    ts_ns: h.ts_ns,
                    traced: e.traced != 0,
                    decode_steps: e.decode_steps,
                    settled_ns: e.settled_ns,
                });
            }
            Event::Loss(e) => {
                self.counts.collector += 1;
                self.losses.push(LossMark {
                    ts_ns: h.ts_ns,
                    cpu: h.cpu,
                    lost: e.lost,
                });
            }
            Event::SampleCounts(e) => {
                self.counts.collector += 1;
                self.samples.add(e);
            }
            // Samples are folded by the collector; a trace holds none.
            Event::CpuSample(_) => self.counts.unknown += 1,
            Event::PmcOpen(_) => self.counts.collector += 1,
            Event::LeafNode(e) => self.apply_leaf_node(e),
            Event::Unknown { .. } => self.counts.unknown += 1,
        }
    }

    /// A decode call's entry (a new token span) or exit.
    fn apply_decode(&mut self, h: &EventHeader, e: &DecodeEvent) {
        self.counts.decode += 1;
        let Some(t) = self.thread(h.tid, Some(h.pid)) else {
            return;
        };
        self.threads[t].is_main = true;
        if self.target_pid == 0 {
            self.target_pid = h.pid;
        }
        if !h.is_exit() {
            if self.pairing[t].token.take().is_some() {
                self.unpaired.token_enter += 1;
            }
            let index = self.tokens.len() as u32;
            let seqs = SeqCount::of(e);
            let phase = TokenPhase::of(e.n_tokens, e.pos, seqs.n);
            let (run, new_run) = self.runs.push_call(index, e.pos);
            // A prefill call right after another one of its run continues its
            // prompt.
            let chunk = (phase == TokenPhase::Prefill).then(|| {
                self.tokens
                    .last()
                    .filter(|_| !new_run)
                    .and_then(|p| p.chunk.map(|c| c + 1))
                    .unwrap_or(0)
            });
            self.tokens.push(TokenSpan {
                index,
                tid: h.tid,
                n_tokens: e.n_tokens,
                pos: e.pos,
                run,
                phase,
                chunk,
                start_ns: h.ts_ns,
                end_ns: None,
                ret: 0,
                seqs,
                sampled_ns: None,
                op_ns: 0,
            });
            self.pairing[t].token = Some(index);
        } else if let Some(i) = self.pairing[t].token.take() {
            let tok = &mut self.tokens[i as usize];
            tok.end_ns = Some(h.ts_ns);
            tok.ret = e.ret;
        } else {
            self.unpaired.token_exit += 1;
        }
    }
    /// A graph computation's entry (a new graph span, closing any left open) or exit.
    fn apply_graph(&mut self, h: &EventHeader, e: &GraphEvent) {
        self.counts.graph += 1;
        let Some(t) = self.thread(h.tid, Some(h.pid)) else {
            return;
        };
        if !h.is_exit() {
            if let Some(open) = self.pairing[t].graph.take() {
                self.unpaired.graph_enter += 1;
                self.finish_graph(open, None);
            }
            let index = self.graphs.len() as u32;
            let at = self.node_spans.len() as u32;
            // An accel split runs on the accel's driver thread, inside the decode
            // call open on the decode thread.
            let token = self.pairing[t].token.or_else(|| {
                self.tokens
                    .last()
                    .filter(|tok| tok.end_ns.is_none())
                    .map(|tok| tok.index)
            });
            self.graphs.push(GraphSpan {
                index,
                token,
                tid: h.tid,
                graph_id: e.graph_id,
                graph_addr: e.graph_addr,
                n_nodes: e.n_nodes,
                backend_id: e.backend_id,
                backend_kind: e.backend_kind,
                n_tokens: e.n_tokens,
                pos: e.pos,
                start_ns: h.ts_ns,
                end_ns: None,
                nodes: at..at,
            });
            self.pairing[t].graph = Some(index);
            if let Some(prev) = self.open_graph(e.backend_kind) {
                // Another thread's graph of this backend is still open: close it
                // (one graph at a time per backend in this engine).
                self.unpaired.graph_enter += 1;
                self.finish_graph(prev, None);
            }
            let slices = self.spare_slices.pop().unwrap_or_default();
            self.open_graphs.push(OpenGraph {
                backend_kind: e.backend_kind,
                graph: index,
                slices,
                pending: Vec::new(),
                gpu: gpu_time::SplitTimestamps::default(),
            });
        } else if let Some(i) = self.pairing[t].graph.take() {
            self.finish_graph(i, Some(h.ts_ns));
        } else {
            self.unpaired.graph_exit += 1;
        }
    }
    /// A backend call (sync, copy, transfer, GPU submission, fence wait).
    fn apply_backend_span(&mut self, h: &EventHeader, e: &BackendSpanEvent) {
        self.counts.graph += 1;
        let Some(t) = self.thread(h.tid, Some(h.pid)) else {
            return;
        };
        let token = self.pairing[t].token.or_else(|| {
            self.tokens
                .last()
                .filter(|tok| tok.end_ns.is_none())
                .map(|tok| tok.index)
        });
        if let Some(call) = BackendCall::from_event(e, token) {
            self.backend_calls.push(call);
        }
    }
    /// GPU timestamps of the open split on the recording thread.
    fn apply_gpu_timestamps(&mut self, h: &EventHeader, e: &GpuTimestampsEvent) {
        self.counts.op += 1;
        let Some(t) = self.thread(h.tid, Some(h.pid)) else {
            return;
        };
        let graph = self.pairing[t].graph;
        match self.open_graphs.iter_mut().find(|g| Some(g.graph) == graph) {
            Some(g) => g.gpu.add(e),
            None => self.counts.gpu_timestamps_outside_graph += 1,
        }
    }
    /// An MoE layer's expert routing, merged per graph and ids tensor.
    fn apply_expert_route(&mut self, e: &ExpertRouteEvent) {
        self.counts.op += 1;
        // Routes are read at CPU operator entries.
        let graph = self.open_graph(0).unwrap_or(NONE_U32);
        match self.route_index.entry((graph, e.ids_addr)) {
            std::collections::hash_map::Entry::Occupied(o) => {
                self.routes[*o.get() as usize].add(e);
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(self.routes.len() as u32);
                self.routes.push(LayerRoute::from_event(e, graph));
            }
        }
    }
    /// A phase's entry or exit (a phase span at the exit).
    fn apply_phase(&mut self, h: &EventHeader, e: &PhaseEvent) {
        self.counts.phase += 1;
        let Some(kind) = EventKind::from_u32(h.kind).and_then(PhaseKind::from_event_kind) else {
            return;
        };
        let Some(t) = self.thread(h.tid, Some(h.pid)) else {
            return;
        };
        let slot = &mut self.pairing[t].phase[kind as usize];
        if !h.is_exit() {
            if slot.replace((h.ts_ns, e.arg)).is_some() {
                self.unpaired.phase_enter += 1;
            }
        } else if let Some((start, arg)) = slot.take() {
            let token = self.pairing[t]
                .token
                .or_else(|| self.tokens.len().checked_sub(1).map(|i| i as u32));
            if kind == PhaseKind::Sample
                && let Some(tok) = token.and_then(|i| self.tokens.get_mut(i as usize))
                && tok.sampled_ns.is_none()
            {
                tok.sampled_ns = Some(h.ts_ns);
            }
            self.phases.push(PhaseSpan {
                kind,
                tid: h.tid,
                start_ns: start,
                end_ns: h.ts_ns,
                arg,
                ret: e.ret,
                token,
            });
        } else {
            self.unpaired.phase_exit += 1;
        }
    }
    /// A context switch: the previous thread's state and the next one running.
    fn apply_sched_switch(&mut self, h: &EventHeader, e: &SchedSwitchEvent) {
        self.counts.sched += 1;
        if e.prev_tid != 0
            && let Some(t) = self.thread(e.prev_tid, Some(h.pid))
        {
            let state = if e.prev_state == 0 {
                SchedState::Runnable
            } else {
                SchedState::Sleeping
            };
            let th = &mut self.threads[t];
            th.states.transition(h.ts_ns, state, h.cpu);
            set_comm(&mut th.comm, &e.prev_comm);
        }
        if e.next_tid != 0
            && let Some(t) = self.thread(e.next_tid, None)
        {
            let th = &mut self.threads[t];
            th.states.transition(h.ts_ns, SchedState::Running, h.cpu);
            set_comm(&mut th.comm, &e.next_comm);
        }
    }
    /// A thread forked or exited.
    fn apply_task(&mut self, h: &EventHeader, e: &TaskEvent) {
        self.counts.sched += 1;
        if h.kind == EventKind::TaskNew as u32 {
            self.forked.push(e.child_tid);
            let _ = self.thread(e.child_tid, None);
        } else if let Some(&t) = self.thread_idx.get(&e.child_tid) {
            self.threads[t as usize].states.close(h.ts_ns);
        }
    }
    /// A graph leaf (weight) read from the target's memory.
    fn apply_leaf_node(&mut self, e: &LeafNodeEvent) {
        self.counts.collector += 1;
        let leaf = LeafInfo::from_event(e);
        // One record per address is expected; of several, the earliest read
        // (then the smaller name) wins, whatever order they arrive in.
        match self.leaves.entry(e.node_addr) {
            std::collections::hash_map::Entry::Occupied(mut o) => {
                if (leaf.ts_ns, &leaf.name) < (o.get().ts_ns, &o.get().name) {
                    o.insert(leaf);
                }
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(leaf);
            }
        }
    }

    /// Applies one record borrowed from its chunk, as [`TraceModel::apply`] does; an
    /// operator record is read onto the stack, not boxed.
    pub fn apply_record(&mut self, record: &RecordRef<'_>) {
        if let Some(span) = record.op_span() {
            self.note_time(span.end_ns);
            self.apply_op_span(&span, None);
        } else if let Some(op) = record.op() {
            self.note_time(op.header.ts_ns);
            self.counts.op += 1;
            self.apply_op(&op);
        } else if let Some(exit) = record.op_exit() {
            self.note_time(exit.header.ts_ns);
            self.counts.op += 1;
            self.apply_op_exit(&exit);
        } else {
            self.apply(&record.to_event());
        }
    }

    /// Counts an event and widens the trace's time range to include it.
    fn note_time(&mut self, ts_ns: u64) {
        self.counts.total += 1;
        self.first_ns = Some(self.first_ns.map_or(ts_ns, |f| f.min(ts_ns)));
        self.last_ns = self.last_ns.max(ts_ns);
    }

    /// The experts every layer of a mixture-of-experts model used, per graph, in the
    /// order their products ran.
    pub fn expert_routes(&self) -> &[LayerRoute] {
        &self.routes
    }

    /// Ends the trace at `end_ns` (footer end time or last event): closes thread state
    /// timelines and counts entries still open as unpaired. Idempotent.
    pub fn finish(&mut self, end_ns: Option<u64>) {
        if self.finished {
            return;
        }
        self.finished = true;
        let end = end_ns.unwrap_or(self.last_ns).max(self.last_ns);
        while let Some(g) = self.open_graphs.first().map(|o| o.graph) {
            self.unpaired.graph_enter += 1;
            self.finish_graph(g, None);
        }
        for p in &mut self.pairing {
            self.unpaired.op_enter += u64::from(p.op.take().is_some());
            self.unpaired.token_enter += u64::from(p.token.take().is_some());
            self.unpaired.graph_enter += u64::from(p.graph.take().is_some());
            for ph in &mut p.phase {
                self.unpaired.phase_enter += u64::from(ph.take().is_some());
            }
        }
        for th in &mut self.threads {
            th.states.close(end);
        }
    }

    /// An operator entry: opens an operator on its thread.
    fn apply_op(&mut self, e: &OpEvent) {
        self.counts.op_entries += 1;
        let h = &e.header;
        let Some(t) = self.thread(h.tid, Some(h.pid)) else {
            return;
        };
        let Some(node) = self.intern_node(e, self.pairing[t].last_layer) else {
            return;
        };
        let layer = self.nodes[node as usize].layer;
        if layer >= 0 {
            self.pairing[t].last_layer = Some(layer);
        }
        let open = OpenOp {
            start_ns: h.ts_ns,
            node,
            graph: self.open_graph(e.backend_kind).unwrap_or(NONE_U32),
            pmc_ok: if e.detail & OP_DETAIL_PMC != 0 {
                e.pmc_ok
            } else {
                0
            },
            pmc: e.pmc,
        };
        if self.pairing[t].op.replace(open).is_some() {
            self.unpaired.op_enter += 1;
        }
    }

    /// An operator exit: closes the operator open on its thread (operators do not nest
    /// on a thread, so the exit belongs to the thread's last entry).
    fn apply_op_exit(&mut self, e: &OpExitEvent) {
        let h = &e.header;
        let Some(t) = self.thread(h.tid, Some(h.pid)) else {
            return;
        };
        let Some(open) = self.pairing[t].op.take() else {
            self.unpaired.op_exit += 1;
            return;
        };
        let n = self.counter_names.len();
        let ok = if e.detail & OP_DETAIL_PMC != 0 {
            open.pmc_ok & e.pmc_ok
        } else {
            0
        };
        let pmc = if ok != 0 && n > 0 {
            let at = self.slice_pmc.len() as u32;
            for i in 0..n.min(MAX_PMC) {
                self.slice_pmc.push(if ok & (1 << i) != 0 {
                    counter_delta(&open.pmc[i], &e.pmc[i])
                } else {
                    PMC_MISSING
                });
            }
            at
        } else {
            NONE_U32
        };
        let slice = OpSlice {
            start_ns: open.start_ns,
            end_ns: h.ts_ns.max(open.start_ns),
            node: open.node,
            graph: open.graph,
            thread: t as u32,
            pmc,
        };
        let id = self.slices.len() as u32;
        self.slices.push(slice);
        let th = &mut self.threads[t];
        th.op_slices += 1;
        th.op_busy_ns += slice.dur_ns();
        if open.graph == NONE_U32 {
            self.counts.ops_outside_graph += 1;
        } else if let Some(g) = self.open_graphs.iter_mut().find(|g| g.graph == open.graph) {
            g.slices.push(id);
        } else {
            self.counts.ops_after_graph += 1;
        }
    }

    /// The open graph of a backend kind, if any.
    fn open_graph(&self, backend_kind: u32) -> Option<u32> {
        self.open_graphs
            .iter()
            .find(|g| g.backend_kind == backend_kind)
            .map(|g| g.graph)
    }

    /// Closes graph `g` (at `end_ns`, if its exit was seen) and turns its operator
    /// slices into node spans (Algorithm 1).
    fn finish_graph(&mut self, g: u32, end_ns: Option<u64>) {
        let mut gpu = gpu_time::SplitTimestamps::default();
        let mut ids = match self.open_graphs.iter().position(|o| o.graph == g) {
            Some(i) => {
                let mut open = self.open_graphs.swap_remove(i);
                gpu = std::mem::take(&mut open.gpu);
                for p in &open.pending {
                    self.resolve_span(*p);
                }
                self.infer_starts(g, &open.slices, &open.pending);
                open.slices
            }
            None => Vec::new(),
        };
        self.route_layers(g);
        let nodes = &self.nodes;
        let slices = &self.slices;
        // A format-4 span whose node could not be interned (a limit was reached) has none.
        ids.retain(|&i| slices[i as usize].node != NONE_U32);
        ids.sort_by_key(|&i| {
            let s = &slices[i as usize];
            let n = &nodes[s.node as usize];
            (n.index, n.addr, s.start_ns, s.thread)
        });
        let first_span = self.node_spans.len() as u32;
        let n_counters = self.counter_names.len();
        let token = self.graphs[g as usize].token;
        let mut i = 0;
        while i < ids.len() {
            let s0 = self.slices[ids[i] as usize];
            let key = {
                let n = &self.nodes[s0.node as usize];
                (n.index, n.addr)
            };
            let mut j = i;
            let mut span = NodeSpan {
                graph: g,
                node: s0.node,
                start_ns: u64::MAX,
                end_ns: 0,
                busy_ns: 0,
                n_threads: 0,
                slices: 0..0,
                pmc: vec![PMC_MISSING; n_counters],
                gpu: None,
            };
            while j < ids.len() {
                let s = self.slices[ids[j] as usize];
                let n = &self.nodes[s.node as usize];
                if (n.index, n.addr) != key {
                    break;
                }
                span.start_ns = span.start_ns.min(s.start_ns);
                span.end_ns = span.end_ns.max(s.end_ns);
                span.busy_ns += s.dur_ns();
                span.n_threads += 1;
                if s.pmc != NONE_U32 {
                    let at = s.pmc as usize;
                    for (c, sum) in span.pmc.iter_mut().enumerate() {
                        let v = self.slice_pmc[at + c];
                        if v != PMC_MISSING {
                            *sum = if *sum == PMC_MISSING {
                                v
                            } else {
                                sum.saturating_add(v)
                            };
                        }
                    }
                }
                j += 1;
            }
            let at = self.node_slice_ids.len() as u32;
            self.node_slice_ids.extend_from_slice(&ids[i..j]);
            span.slices = at..at + (j - i) as u32;
            let info = &self.nodes[span.node as usize];
            let (slot, class) = (op_slot(info.op), info.class as usize);
            self.op_types[slot].add(&span);
            if self.class_aggs.len() <= class {
                self.class_aggs.resize(class + 1, OpAggregate::default());
            }
            self.class_aggs[class].add(&span);
            if let Some(tok) = token.and_then(|t| self.tokens.get_mut(t as usize)) {
                tok.op_ns += span.dur_ns();
            }
            self.node_spans.push(span);
            i = j;
        }
        ids.clear();
        self.spare_slices.push(ids);
        if !gpu.is_empty() {
            let spans = &mut self.node_spans[first_span as usize..];
            let indices: Vec<u32> = spans
                .iter()
                .map(|s| self.nodes[s.node as usize].index)
                .collect();
            let times = gpu.node_times(self.graphs[g as usize].start_ns, &indices);
            for (span, t) in spans.iter_mut().zip(times) {
                span.gpu = t;
            }
        }
        let graph = &mut self.graphs[g as usize];
        graph.end_ns = end_ns;
        graph.nodes = first_span..self.node_spans.len() as u32;
        if self.retention == Retention::Aggregates {
            self.closed.push(g);
        }
    }

    /// Gives the routes of graph `g` recorded without a layer (llama.cpp keeps it in the
    /// node's name: `ffn_moe_up-3`) the layer of their first product's description.
    fn route_layers(&mut self, g: u32) {
        // Routes are in graph order (those outside a graph, `NONE_U32`, in between).
        for r in self.routes.iter_mut().rev().take_while(|r| r.graph >= g) {
            if r.graph == g
                && r.layer < 0
                && let Some(d) = r.nodes.first().and_then(|a| self.descs.get(a))
            {
                r.layer = node_name::parse(d.name_str()).layer.unwrap_or(-1);
            }
        }
    }

    /// The description of the node `e` enters (interned on first sight); `prev_layer` is
    /// the layer of the last node its thread entered, where an unnamed node may sit.
    fn intern_node(&mut self, e: &OpEvent, prev_layer: Option<i32>) -> Option<u32> {
        if let Some(ids) = self.node_by_addr.get(&e.node_addr) {
            for &id in ids.iter().rev() {
                if self.nodes[id as usize].matches(e) {
                    return Some(id);
                }
            }
        }
        if self.nodes.len() >= MAX_NODE_INFOS {
            self.counts.over_limit += 1;
            return None;
        }
        let parts = node_name::parse(e.name_str());
        let class_name = if parts.unnamed {
            // ggml's `node_<n>`: one class per op (`flash_attn_ext`).
            std::borrow::Cow::Owned(op_name(e.op).to_ascii_lowercase())
        } else {
            parts.class
        };
        let class = match self.class_ids.get(class_name.as_ref()) {
            Some(&c) => c,
            None if self.classes.len() < MAX_CLASSES => {
                let c = self.classes.len() as u32;
                self.classes.push(class_name.clone().into_owned());
                self.class_ids.insert(class_name.into_owned(), c);
                c
            }
            None => {
                self.counts.over_limit += 1;
                return None;
            }
        };
        let layer = if e.layer >= 0 {
            e.layer
        } else if let Some(l) = parts.layer {
            l
        } else if parts.unnamed {
            // Inside a block if it reads one, and then in the block being computed: the
            // last layer's `get_rows` of the residual reads the layer before's output.
            self.layer_of_sources(e)
                .map_or(-1, |l| l.max(prev_layer.unwrap_or(-1)))
        } else {
            -1
        };
        let id = self.nodes.len() as u32;
        self.nodes.push(NodeInfo::from_event(e, class, layer));
        self.node_by_addr.entry(e.node_addr).or_default().push(id);
        Some(id)
    }

    /// The deepest layer among the computed nodes `e` reads (sources recorded with the
    /// structure; each address's latest description): where an unnamed node sits.
    fn layer_of_sources(&self, e: &OpEvent) -> Option<i32> {
        if OP_DETAIL_STRUCTURE & e.detail == 0 {
            return None;
        }
        e.structure
            .src
            .iter()
            .filter(|&&a| a != 0)
            .filter_map(|a| self.node_by_addr.get(a)?.last())
            .map(|&id| self.nodes[id as usize].layer)
            .filter(|&l| l >= 0)
            .max()
    }

    /// Index of thread `tid`, created on first sight (`None` over [`MAX_THREADS`]).
    fn thread(&mut self, tid: u32, pid: Option<u32>) -> Option<usize> {
        let idx = match self.thread_idx.get(&tid) {
            Some(&i) => i as usize,
            None => {
                if self.threads.len() >= MAX_THREADS {
                    self.counts.over_limit += 1;
                    return None;
                }
                let i = self.threads.len();
                self.threads.push(ThreadInfo {
                    tid,
                    states: StateTimeline::new(self.retention == Retention::All),
                    ..ThreadInfo::default()
                });
                self.pairing.push(Pairing::default());
                self.thread_idx.insert(tid, i as u32);
                i
            }
        };
        if let Some(p) = pid
            && self.threads[idx].pid.is_none()
        {
            self.threads[idx].pid = Some(p);
        }
        Some(idx)
    }

    // ---- queries ----

    /// Counter names, in `OpEvent::pmc` order.
    pub fn counter_names(&self) -> &[String] {
        &self.counter_names
    }

    /// The target's process id (from the header, else the first decode event).
    pub fn target_pid(&self) -> u32 {
        self.target_pid
    }

    /// Earliest event time, ns.
    pub fn first_ns(&self) -> Option<u64> {
        self.first_ns
    }

    /// Latest event time, ns.
    pub fn last_ns(&self) -> u64 {
        self.last_ns
    }

    /// Decode calls in order.
    pub fn tokens(&self) -> &[TokenSpan] {
        &self.tokens
    }

    /// Graph computations in order.
    pub fn graphs(&self) -> &[GraphSpan] {
        &self.graphs
    }

    /// Copies, waits, submissions and fence waits for other backends, in return order.
    pub fn backend_calls(&self) -> &[BackendCall] {
        &self.backend_calls
    }

    /// Completed phase calls in exit order.
    pub fn phases(&self) -> &[PhaseSpan] {
        &self.phases
    }

    /// Interned node descriptions.
    pub fn nodes(&self) -> &[NodeInfo] {
        &self.nodes
    }

    /// Node classes (names without the layer suffix), by class id.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// Every operator slice, in exit order.
    pub fn slices(&self) -> &[OpSlice] {
        &self.slices
    }

    /// The counter deltas of a slice (one per counter, [`PMC_MISSING`] where absent).
    pub fn slice_pmc(&self, slice: &OpSlice) -> Option<&[u64]> {
        if slice.pmc == NONE_U32 {
            return None;
        }
        let at = slice.pmc as usize;
        self.slice_pmc.get(at..at + self.counter_names.len())
    }

    /// Node spans (one per node per graph computation), graph by graph.
    pub fn node_spans(&self) -> &[NodeSpan] {
        &self.node_spans
    }

    /// Slice ids of node spans (see [`NodeSpan::slices`]).
    pub fn node_slice_ids(&self) -> &[u32] {
        &self.node_slice_ids
    }

    /// The slices of one node span.
    pub fn span_slices<'a>(&'a self, span: &NodeSpan) -> impl Iterator<Item = &'a OpSlice> + 'a {
        self.node_slice_ids[span.slices.start as usize..span.slices.end as usize]
            .iter()
            .map(|&i| &self.slices[i as usize])
    }

    /// The node spans of one graph (none once its detail was released, see
    /// [`TraceModel::release_closed`]).
    pub fn graph_node_spans(&self, graph: &GraphSpan) -> &[NodeSpan] {
        if !self.has_detail(graph) {
            return &[];
        }
        &self.node_spans[graph.nodes.start as usize..graph.nodes.end as usize]
    }

    /// Aggregates per op type, indexed by [`op_slot`] (last slot: unknown ops).
    pub fn op_type_aggregates(&self) -> &[OpAggregate] {
        &self.op_types
    }

    /// Aggregates per node class, by class id.
    pub fn class_aggregates(&self) -> &[OpAggregate] {
        &self.class_aggs
    }

    /// Every thread seen, in order of first sight.
    pub fn threads(&self) -> &[ThreadInfo] {
        &self.threads
    }

    /// Whether a thread belongs to the target: it ran engine code, carried the target's
    /// pid in its own events, or was forked by a target thread.
    pub fn is_target_thread(&self, th: &ThreadInfo) -> bool {
        th.is_main
            || th.op_slices > 0
            || (self.target_pid != 0 && th.pid == Some(self.target_pid))
            || self.forked.contains(&th.tid)
    }

    /// The target's threads, by tid.
    pub fn target_threads(&self) -> Vec<&ThreadInfo> {
        let mut v: Vec<&ThreadInfo> = self
            .threads
            .iter()
            .filter(|t| self.is_target_thread(t))
            .collect();
        v.sort_by_key(|t| t.tid);
        v
    }

    /// The engine's main thread (the first that called `engine_decode`).
    pub fn main_tid(&self) -> Option<u32> {
        self.tokens.first().map(|t| t.tid)
    }

    /// QoS switches.
    pub fn qos_switches(&self) -> &[QosMark] {
        &self.qos
    }

    /// Sampled-window switches (`--op-windows`), in time order.
    pub fn op_windows(&self) -> &[WindowMark] {
        &self.windows
    }

    /// Loss records.
    pub fn losses(&self) -> &[LossMark] {
        &self.losses
    }

    /// The leaf node the collector recorded at `addr` (weights, KV-cache views, inputs;
    /// traces of format 2 recorded from a live target), if any.
    pub fn leaf(&self, addr: u64) -> Option<&LeafInfo> {
        self.leaves.get(&addr)
    }

    /// Number of recorded leaf nodes.
    pub fn recorded_leaves(&self) -> usize {
        self.leaves.len()
    }

    /// Events lost per the loss records (the latest cumulative count per CPU, summed).
    pub fn lost_from_records(&self) -> u64 {
        let mut per_cpu: HashMap<u32, u64> = HashMap::new();
        for l in &self.losses {
            let e = per_cpu.entry(l.cpu).or_default();
            *e = (*e).max(l.lost);
        }
        per_cpu.values().sum()
    }

    /// Unpaired enter/exit counts.
    pub fn unpaired(&self) -> &Unpaired {
        &self.unpaired
    }

    /// Event counts.
    pub fn counts(&self) -> &EventCounts {
        &self.counts
    }

    /// The n-th decode step (0-based), if any.
    pub fn decode_step(&self, n: usize) -> Option<&TokenSpan> {
        self.tokens
            .iter()
            .filter(|t| t.phase == TokenPhase::Decode)
            .nth(n)
    }

    /// The graphs run inside decode call `token`.
    pub fn token_graphs(&self, token: u32) -> impl Iterator<Item = &GraphSpan> {
        self.graphs.iter().filter(move |g| g.token == Some(token))
    }
}

fn set_comm(dst: &mut String, comm: &[u8]) {
    let len = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
    if len > 0 {
        let s = String::from_utf8_lossy(&comm[..len]);
        if *dst != s {
            *dst = s.into_owned();
        }
    }
}
