//! An independent reading of a trace: its raw records through
//! [`trace_format::TraceReader`], paired here by the rules the probe ABI documents
//! (`common::event`, `docs/probe-abi.md`), without the analyzer's model: decode calls,
//! graphs and operators by thread, format-4 spans with their node descriptions and
//! barrier-release starts, counter readings at both bounds of an operator, scheduler
//! switches. The export tests compare the Parquet tables with this reading.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use common::event::{
    EventKind, MAX_PMC, OP_DETAIL_OP_PARAMS, OP_DETAIL_PMC, OP_DETAIL_STRUCTURE,
    OP_SPAN_START_AT_RELEASE, OpStructure, PmcReading, SchedSwitchEvent,
};
use trace_format::{Event, TraceFooter, TraceHeader, TraceReader};

/// One `engine_decode` call: its entry and exit records on one thread.
#[derive(Clone, Debug)]
pub struct Call {
    /// The calling thread.
    pub tid: u32,
    /// Tokens in the batch (entry record).
    pub n_tokens: u32,
    /// Position of the batch's first token (entry record).
    pub pos: u32,
    /// Entry time.
    pub start_ns: u64,
    /// Exit time.
    pub end_ns: Option<u64>,
    /// The exit record's return value.
    pub ret: i32,
    /// End of the first `engine_phase_sample` after the call's entry.
    pub sampled_ns: Option<u64>,
}

/// One graph computation: its entry and exit records.
#[derive(Clone, Debug)]
pub struct Graph {
    /// The thread that computed it.
    pub tid: u32,
    /// The engine's graph id.
    pub graph_id: u64,
    /// Nodes in the graph.
    pub n_nodes: u32,
    /// `BackendKind` value.
    pub backend_kind: u32,
    /// Tokens in the batch.
    pub n_tokens: u32,
    /// Position of the batch.
    pub pos: u32,
    /// Entry time.
    pub start_ns: u64,
    /// Exit time.
    pub end_ns: Option<u64>,
}

/// What an operator record (or a format-4 node description) says a node is.
#[derive(Clone, Debug)]
pub struct Desc {
    /// Position in the graph's execution order.
    pub index: u32,
    /// `OpType` value.
    pub op: u32,
    /// Transformer layer.
    pub layer: i32,
    /// The name up to its first NUL.
    pub name: String,
    /// The tensor structure, when `OP_DETAIL_STRUCTURE` says it was read.
    pub structure: Option<OpStructure>,
    /// Whether `OP_DETAIL_OP_PARAMS` says `structure.op_params` was read.
    pub has_op_params: bool,
}

impl Desc {
    /// The description an operator record or a node description carries: its name up
    /// to the first NUL, its structure and op params where `detail` says they were read.
    fn read(
        index: u32,
        op: u32,
        layer: i32,
        name: &[u8],
        detail: u32,
        structure: OpStructure,
    ) -> Desc {
        Desc {
            index,
            op,
            layer,
            name: name_of(name),
            structure: (detail & OP_DETAIL_STRUCTURE != 0).then_some(structure),
            has_op_params: detail & OP_DETAIL_OP_PARAMS != 0,
        }
    }
}

/// One thread's share of one node in one graph computation.
#[derive(Clone, Debug)]
pub struct Op {
    /// Index in [`Raw::graphs`] of the graph open when it ran.
    pub graph: usize,
    /// The node.
    pub desc: Desc,
    /// The thread.
    pub tid: u32,
    /// Start: the entry record, `end - dur` of a span, or the barrier release.
    pub start_ns: u64,
    /// End: the exit record (never before the start) or the span's end.
    pub end_ns: u64,
    /// Per counter of the header: the delta between the readings at both bounds, where
    /// both readings succeeded.
    pub pmc: Vec<Option<u64>>,
}

/// A thread the trace's records name, with its scheduler state times.
#[derive(Clone, Debug, Default)]
pub struct Thread {
    /// Thread id.
    pub tid: u32,
    /// Process id of its own records (the header's target pid for format-4 spans, whose
    /// records carry none).
    pub pid: Option<u32>,
    /// The last non-empty comm a scheduler switch gave it.
    pub comm: String,
    /// Whether it made a decode call.
    pub is_main: bool,
    /// Time switched in, ns.
    pub running_ns: u64,
    /// Time switched out while runnable (`prev_state` 0), ns.
    pub runnable_ns: u64,
    /// Time switched out blocked, ns.
    pub sleeping_ns: u64,
    /// The open interval: state (0 running, 1 runnable, 2 sleeping) and since when.
    open: Option<(usize, u64)>,
}

impl Thread {
    /// Closes the open interval at `ts` and opens `state` there.
    fn switch(&mut self, ts: u64, state: Option<usize>) {
        if let Some((s, since)) = self.open.take() {
            let d = ts.saturating_sub(since);
            *[
                &mut self.running_ns,
                &mut self.runnable_ns,
                &mut self.sleeping_ns,
            ][s] += d;
        }
        self.open = state.map(|s| (s, ts));
    }
}

/// The raw reading of one trace.
#[derive(Debug)]
pub struct Raw {
    /// The header, as the reader gives it.
    pub header: TraceHeader,
    /// The footer.
    pub footer: Option<TraceFooter>,
    /// Earliest record time.
    pub first_ns: u64,
    /// Latest record time.
    pub last_ns: u64,
    /// Decode calls in entry order.
    pub calls: Vec<Call>,
    /// Graph computations in entry order.
    pub graphs: Vec<Graph>,
    /// Operator slices.
    pub ops: Vec<Op>,
    /// Threads by tid.
    pub threads: BTreeMap<u32, Thread>,
    /// Leaf nodes recorded (`LeafNodeEvent`): name and `DType` value by address.
    pub leaves: HashMap<u64, (String, u32)>,
    /// Expert-routing records.
    pub expert_routes: usize,
}

/// A NUL-padded name.
fn name_of(bytes: &[u8]) -> String {
    let len = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..len]).into_owned()
}

/// The counter deltas of an operator from its readings at entry and exit (`ok`: the
/// bits read at both), for `n` counters. The test traces do not multiplex (running =
/// enabled), so a delta is the counter's difference.
fn deltas(
    n: usize,
    ok: u32,
    entry: &[PmcReading; MAX_PMC],
    exit: &[PmcReading; MAX_PMC],
) -> Vec<Option<u64>> {
    (0..n.min(MAX_PMC))
        .map(|i| {
            assert_eq!(
                exit[i].enabled - entry[i].enabled,
                exit[i].running - entry[i].running,
                "test traces do not multiplex"
            );
            (ok & (1 << i) != 0).then(|| exit[i].counter - entry[i].counter)
        })
        .collect()
}

/// An operator entry still open on its thread.
struct OpenOp {
    graph: usize,
    desc: Desc,
    start_ns: u64,
    pmc_ok: u32,
    pmc: [PmcReading; MAX_PMC],
}

/// A format-4 span waiting for its start (barrier release): its index in [`Raw::ops`].
struct Span {
    op: usize,
}

/// Reads `path`'s records in time order (file order within one time) and pairs them.
pub fn read(path: &Path) -> Raw {
    let reader = TraceReader::open(path).expect("the trace opens");
    let mut events: Vec<Event> = reader
        .events()
        .map(|e| e.expect("every record reads"))
        .collect();
    events.sort_by_key(|e| e.header().ts_ns);
    let mut raw = Raw {
        header: reader.header().clone(),
        footer: reader.footer().cloned(),
        first_ns: events.iter().map(|e| e.header().ts_ns).min().unwrap_or(0),
        last_ns: events.iter().map(|e| e.header().ts_ns).max().unwrap_or(0),
        calls: Vec::new(),
        graphs: Vec::new(),
        ops: Vec::new(),
        threads: BTreeMap::new(),
        leaves: HashMap::new(),
        expert_routes: 0,
    };
    let mut pairing = Pairing::default();
    for e in &events {
        pairing.apply(&mut raw, e);
    }
    pairing.release_starts(&mut raw);
    let end = raw
        .footer
        .as_ref()
        .map_or(0, |f| f.end_ts_ns)
        .max(raw.last_ns);
    for th in raw.threads.values_mut() {
        th.switch(end, None);
    }
    raw
}

/// What is open while the records are walked.
#[derive(Default)]
struct Pairing {
    call: HashMap<u32, usize>,
    graph: Option<usize>,
    op: HashMap<u32, OpenOp>,
    descs: HashMap<u64, Desc>,
    /// Where each thread began each graph (`GraphThreadEvent`).
    begins: HashMap<(usize, u32), u64>,
    spans: Vec<Span>,
}

impl Pairing {
    /// The thread `tid`, created at its first record; `pid` when its own records give one.
    fn thread(raw: &mut Raw, tid: u32, pid: Option<u32>) -> &mut Thread {
        let th = raw.threads.entry(tid).or_insert_with(|| Thread {
            tid,
            ..Thread::default()
        });
        if th.pid.is_none() {
            th.pid = pid;
        }
        th
    }

    /// One record, in time order.
    fn apply(&mut self, raw: &mut Raw, e: &Event) {
        let h = e.header();
        let exit = h.is_exit();
        match e {
            Event::Decode(d) => {
                Self::thread(raw, h.tid, Some(h.pid)).is_main = true;
                if exit {
                    let i = self
                        .call
                        .remove(&h.tid)
                        .expect("a decode exit follows its entry");
                    raw.calls[i].end_ns = Some(h.ts_ns);
                    raw.calls[i].ret = d.ret;
                } else {
                    self.call.insert(h.tid, raw.calls.len());
                    raw.calls.push(Call {
                        tid: h.tid,
                        n_tokens: d.n_tokens,
                        pos: d.pos,
                        start_ns: h.ts_ns,
                        end_ns: None,
                        ret: 0,
                        sampled_ns: None,
                    });
                }
            }
            Event::Graph(g) => {
                Self::thread(raw, h.tid, Some(h.pid));
                if exit {
                    let i = self.graph.take().expect("a graph exit follows its entry");
                    raw.graphs[i].end_ns = Some(h.ts_ns);
                } else {
                    self.graph = Some(raw.graphs.len());
                    raw.graphs.push(Graph {
                        tid: h.tid,
                        graph_id: g.graph_id,
                        n_nodes: g.n_nodes,
                        backend_kind: g.backend_kind,
                        n_tokens: g.n_tokens,
                        pos: g.pos,
                        start_ns: h.ts_ns,
                        end_ns: None,
                    });
                }
            }
            Event::Phase(_) => {
                Self::thread(raw, h.tid, Some(h.pid));
                if exit
                    && h.kind == EventKind::PhaseSample as u32
                    && let Some(c) = raw.calls.last_mut()
                    && c.sampled_ns.is_none()
                {
                    c.sampled_ns = Some(h.ts_ns);
                }
            }
            Event::Op(_)
            | Event::OpExit(_)
            | Event::NodeDesc(_)
            | Event::GraphThread(_)
            | Event::OpSpan(_) => self.apply_operator(raw, e),
            Event::SchedSwitch(s) => Self::apply_switch(raw, h.ts_ns, h.pid, s),
            Event::LeafNode(l) => {
                raw.leaves.insert(l.node_addr, (name_of(&l.name), l.dtype));
            }
            Event::ExpertRoute(_) => raw.expert_routes += 1,
            other => panic!("the test traces hold no {other:?}"),
        }
    }

    /// An operator record: an entry or exit (formats 1 to 3), a node description, a
    /// thread's start of a graph or a span (format 4).
    fn apply_operator(&mut self, raw: &mut Raw, e: &Event) {
        let h = e.header();
        let n_counters = raw.header.counters.len();
        match e {
            Event::Op(o) => {
                Self::thread(raw, h.tid, Some(h.pid));
                let desc = Desc::read(o.index, o.op, o.layer, &o.name, o.detail, o.structure);
                let open = OpenOp {
                    graph: self.graph.expect("operators run inside a graph"),
                    desc,
                    start_ns: h.ts_ns,
                    pmc_ok: if o.detail & OP_DETAIL_PMC != 0 {
                        o.pmc_ok
                    } else {
                        0
                    },
                    pmc: o.pmc,
                };
                assert!(
                    self.op.insert(h.tid, open).is_none(),
                    "operators do not nest"
                );
            }
            Event::OpExit(x) => {
                Self::thread(raw, h.tid, Some(h.pid));
                let open = self.op.remove(&h.tid).expect("an exit follows its entry");
                let ok = if x.detail & OP_DETAIL_PMC != 0 {
                    open.pmc_ok & x.pmc_ok
                } else {
                    0
                };
                raw.ops.push(Op {
                    graph: open.graph,
                    desc: open.desc,
                    tid: h.tid,
                    start_ns: open.start_ns,
                    // A thread whose exit was stamped before its entry did nothing.
                    end_ns: h.ts_ns.max(open.start_ns),
                    pmc: deltas(n_counters, ok, &open.pmc, &x.pmc),
                });
            }
            Event::NodeDesc(d) => {
                Self::thread(raw, h.tid, Some(h.pid));
                self.descs.insert(
                    d.node_addr,
                    Desc::read(d.index, d.op, d.layer, &d.name, d.detail, d.structure),
                );
            }
            Event::GraphThread(_) => {
                Self::thread(raw, h.tid, Some(h.pid));
                let g = self.graph.expect("a thread begins an open graph");
                self.begins.insert((g, h.tid), h.ts_ns);
            }
            Event::OpSpan(s) => {
                let pid = raw.header.target.pid;
                Self::thread(raw, s.tid, Some(pid));
                let desc = self
                    .descs
                    .get(&s.node_addr)
                    .cloned()
                    .expect("a span's node was described before it ended");
                let release = s.flags & OP_SPAN_START_AT_RELEASE != 0;
                if release {
                    self.spans.push(Span { op: raw.ops.len() });
                }
                raw.ops.push(Op {
                    graph: self.graph.expect("spans end inside a graph"),
                    desc,
                    tid: s.tid,
                    start_ns: if release { 0 } else { s.start_ns() },
                    end_ns: s.end_ns,
                    pmc: Vec::new(),
                });
            }
            other => unreachable!("not an operator record: {other:?}"),
        }
    }

    /// A scheduler switch at `ts` (`pid`: the switched-out task's): the thread switched
    /// out becomes runnable (`prev_state` 0, preempted) or sleeping (it blocked), the one
    /// switched in running.
    fn apply_switch(raw: &mut Raw, ts: u64, pid: u32, s: &SchedSwitchEvent) {
        if s.prev_tid != 0 {
            let th = Self::thread(raw, s.prev_tid, Some(pid));
            th.switch(ts, Some(if s.prev_state == 0 { 1 } else { 2 }));
            let comm = name_of(&s.prev_comm);
            if !comm.is_empty() {
                th.comm = comm;
            }
        }
        if s.next_tid != 0 {
            let th = Self::thread(raw, s.next_tid, None);
            th.switch(ts, Some(0));
            let comm = name_of(&s.next_comm);
            if !comm.is_empty() {
                th.comm = comm;
            }
        }
    }

    /// Gives each span recorded without a start (`OP_SPAN_START_AT_RELEASE`) the start
    /// the ABI defines: the latest end among the spans of the thread's previous node in
    /// the graph, or where the thread began the graph for its first node.
    fn release_starts(&self, raw: &mut Raw) {
        for s in &self.spans {
            let (graph, tid, end) = {
                let o = &raw.ops[s.op];
                (o.graph, o.tid, o.end_ns)
            };
            // The thread's previous span in the graph (the latest ending before this one).
            let previous = raw
                .ops
                .iter()
                .filter(|o| o.graph == graph && o.tid == tid && o.end_ns < end)
                .max_by_key(|o| o.end_ns)
                .map(|o| o.desc.index);
            let start = match previous {
                Some(index) => raw
                    .ops
                    .iter()
                    .filter(|o| o.graph == graph && o.desc.index == index)
                    .map(|o| o.end_ns)
                    .max()
                    .expect("the previous node has spans"),
                None => *self
                    .begins
                    .get(&(graph, tid))
                    .expect("the thread began the graph"),
            };
            raw.ops[s.op].start_ns = start;
        }
    }
}
