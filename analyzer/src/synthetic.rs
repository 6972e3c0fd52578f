//! Synthetic traces with a known shape, for tests and benchmarks: `tokens` decode calls
//! (the first a prefill of 4 tokens), each with one graph of `nodes` chained nodes run
//! by `threads` threads, every operator `op_ns` long on thread 0 and shorter on the
//! others, plus a sample phase per call.
//!
//! The operators are recorded as entry/exit pairs (trace formats 1 to 3, the default) or
//! as the compact records of format 4 ([`SynthRecords`]): one span per node and thread at
//! its end, and a node description whenever a node address's description changes.

use std::{collections::HashMap, path::Path};

use common::{
    engine_abi::OpType,
    event::{
        DecodeEvent, EVENT_FLAG_EXIT, EventHeader, EventKind, GraphEvent, GraphThreadEvent,
        NodeDescEvent, OP_DETAIL_NAME, OP_DETAIL_STRUCTURE, OP_SPAN_START_AT_RELEASE, OpEvent,
        OpExitEvent, OpSpanEvent, PhaseEvent,
    },
};
use trace_format::{TraceError, TraceFooter, TraceHeader, TraceWriter, event_kind_table};

use crate::ingest::OrderKey;
use crate::model::{GraphSpan, Retention};

/// How a synthetic run records its operators.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SynthRecords {
    /// An [`OpEvent`] at each thread's entry of each node and an [`OpExitEvent`] at its
    /// exit (trace formats 1 to 3).
    #[default]
    Entries,
    /// Trace format 4 with both ends probed: one [`OpSpanEvent`] (end and duration) per
    /// node and thread, at its end, and a [`NodeDescEvent`] (at thread 0's start of the
    /// node) whenever the description of the node's address changed.
    Spans,
    /// Trace format 4 with only the ends probed: [`OpSpanEvent`]s with
    /// `OP_SPAN_START_AT_RELEASE` and no duration, the same [`NodeDescEvent`]s, and one
    /// [`GraphThreadEvent`] per thread and graph where the thread starts its first node.
    /// Threads start every later node where the barrier before it releases (see
    /// [`SynthSpec::starts_at_release`]), so the starts the analyzer infers are exact.
    Ends,
}

/// Shape of a synthetic run.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct SynthSpec {
    /// Decode calls (the first is a prefill).
    pub tokens: u32,
    /// Nodes per graph.
    pub nodes: u32,
    /// Worker threads (tid 1001 is the main thread).
    pub threads: u32,
    /// Operator duration on thread 0, ns.
    pub op_ns: u64,
    /// How operators are recorded.
    pub records: SynthRecords,
    /// Threads start each node after a graph's first where the barrier after the node
    /// before releases (the latest end among its threads), as ggml's workers do, and
    /// thread `k` computes for `op_ns · (1 − k / 2·threads)`. Otherwise (the default)
    /// thread `k` starts every node `50·k` ns after thread 0, which starts it 200 ns after
    /// its end of the node before, and ends it `1000·k` ns before thread 0. Always on
    /// with [`SynthRecords::Ends`].
    pub at_release: bool,
}

impl Default for SynthSpec {
    fn default() -> Self {
        SynthSpec {
            tokens: 4,
            nodes: 8,
            threads: 2,
            op_ns: 10_000,
            records: SynthRecords::Entries,
            at_release: false,
        }
    }
}

impl SynthSpec {
    /// Sets the size.
    pub fn sized(tokens: u32, nodes: u32, threads: u32) -> SynthSpec {
        SynthSpec {
            tokens,
            nodes,
            threads: threads.max(1),
            ..SynthSpec::default()
        }
    }

    /// The same run with its operators recorded as `records`.
    pub fn with_records(self, records: SynthRecords) -> SynthSpec {
        SynthSpec { records, ..self }
    }

    /// The same run with threads starting nodes at barrier releases (`at` true) or
    /// staggered (see [`SynthSpec::at_release`]).
    pub fn with_starts_at_release(self, at: bool) -> SynthSpec {
        SynthSpec {
            at_release: at,
            ..self
        }
    }

    /// Whether threads start each node after the first at the barrier's release (set,
    /// or implied by [`SynthRecords::Ends`]).
    pub fn starts_at_release(&self) -> bool {
        self.at_release || self.records == SynthRecords::Ends
    }

    /// Thread `th`'s start and end of a node whose thread 0 starts at `t`; `first`: the
    /// graph's first node (threads begin the graph staggered, whatever the timing).
    /// Staggered, a thread `k > op_ns / 1050` ends before it starts: its exit record
    /// keeps that (the model clamps it), its span ends where it starts.
    fn thread_times(&self, t: u64, th: u32, first: bool) -> (u64, u64) {
        let th = u64::from(th);
        let release = self.starts_at_release();
        let start = if release && !first { t } else { t + th * 50 };
        let end = if release {
            let threads = u64::from(self.threads.max(1));
            start + self.op_ns - self.op_ns * th / (2 * threads)
        } else {
            t + self.op_ns - th * 1000
        };
        (start, end)
    }

    /// Number of events [`write_trace`] writes.
    pub fn event_count(&self) -> u64 {
        let (tokens, nodes, threads) = (
            u64::from(self.tokens),
            u64::from(self.nodes),
            u64::from(self.threads),
        );
        // Decode, graph and sample phase entries and exits.
        let fixed = tokens * 6;
        // Nodes are described in the prefill's graph and again (a new shape) in the first
        // decode step's.
        let descs = nodes * tokens.min(2);
        match self.records {
            SynthRecords::Entries => fixed + tokens * nodes * threads * 2,
            SynthRecords::Spans => fixed + tokens * nodes * threads + descs,
            SynthRecords::Ends => fixed + tokens * (nodes + 1) * threads + descs,
        }
    }
}

/// Process id of synthetic traces.
pub const SYNTH_PID: u32 = 1000;
/// Main thread id of synthetic traces (workers follow).
pub const SYNTH_MAIN_TID: u32 = 1001;
/// Event bytes per chunk of synthetic traces (small, so truncation tests find chunks).
pub const SYNTH_CHUNK_BYTES: usize = 64 << 10;
/// Address of node 0 (node `i` is at `+ 224·i`).
pub const SYNTH_NODE_BASE: u64 = 0x10_0000;
/// Address of the weight leaf every node reads as `src1`.
pub const SYNTH_WEIGHT: u64 = 0x90_0000;
/// Address of the graph of synthetic traces.
const SYNTH_GRAPH: u64 = 0xABC;

fn header(kind: EventKind, exit: bool, ts: u64, tid: u32) -> EventHeader {
    EventHeader {
        kind: kind as u32,
        flags: if exit { EVENT_FLAG_EXIT } else { 0 },
        ts_ns: ts,
        pid: SYNTH_PID,
        tid,
        cpu: tid - SYNTH_MAIN_TID,
        _pad: 0,
    }
}

/// The place of a record with this header in the analyzer's total order (as
/// [`crate::ingest::Ordered`] gives it).
fn order_key(h: &EventHeader) -> OrderKey {
    (h.ts_ns, h.tid, h.kind, h.flags, h.cpu)
}

/// The report (top 5 op groups) of `llama-bench -p pp -n tg -r reps`'s decode calls,
/// each 1 ms and 0.5 ms apart ([`records::llama_bench_calls`]): a trace of several runs.
#[cfg(test)]
pub(crate) fn llama_bench_report(pp: u32, tg: u32, reps: u32) -> crate::report::Report {
    let calls = records::llama_bench_calls(pp, tg, reps);
    let m = records::build(&records::decode_calls(&calls, 1_000_000, 500_000));
    report_of(&m, "lb.pftrace")
}

/// The report (top 5 op groups) of the model `m` of a trace named `name`.
#[cfg(test)]
fn report_of(m: &crate::TraceModel, name: &str) -> crate::report::Report {
    let s = crate::export::summary::summarize(
        m,
        &synth_header(),
        None,
        &crate::ingest::IngestInfo::default(),
        Vec::new(),
    );
    crate::report::build(m, s, name.into(), Default::default(), 5)
}

/// The report of llama-server's calls for two requests at once (`-np 2`), as recorded
/// in `tests/llama_cpp.rs`: slot 1's 15-token prompt alone, slot 1's step with slot 0's
/// 5-token prompt, 14 steps of both, slot 0's last step alone (each call 1 ms, 0.5 ms
/// apart).
#[cfg(test)]
pub(crate) fn llama_server_report() -> crate::report::Report {
    let mut calls = vec![(15, 0, 1, 0b10, 0b10), (6, 15, 2, 0b11, 0b01)];
    calls.extend((0..14).map(|i| (2, 16 + i, 2, 0b11, 0)));
    calls.push((1, 19, 1, 0b01, 0));
    let m = records::build(&records::decode_calls_with_seqs(&calls, 1_000_000, 500_000));
    report_of(&m, "server.pftrace")
}

/// The trace header of synthetic traces.
pub fn synth_header() -> TraceHeader {
    TraceHeader {
        format_version: trace_format::FORMAT_VERSION,
        clock: "synthetic".to_owned(),
        target: trace_format::TargetInfo {
            path: "synthetic-engine".to_owned(),
            pid: SYNTH_PID,
            ..Default::default()
        },
        event_kinds: event_kind_table(),
        cpus: 8,
        ..TraceHeader::default()
    }
}

/// The model of a synthetic run, built in memory (no file); with `upto`, of its first
/// `upto` events only.
pub fn model(spec: &SynthSpec, upto: Option<usize>) -> crate::TraceModel {
    let mut m = crate::TraceModel::new(&synth_header());
    let mut n = 0;
    generate(spec, |rec| {
        if upto.is_some_and(|u| n >= u) {
            return;
        }
        n += 1;
        let kind = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]);
        let ev = EventKind::from_u32(kind)
            .and_then(|k| trace_format::decode_record(k, rec))
            .expect("synthetic records decode");
        m.apply(&ev);
    });
    m
}

/// Writes the run's events to `push`: in timestamp order, except that with
/// [`SynthRecords::Entries`] each node's exits follow all its entries, thread by thread
/// (records of one thread are always in order). Format-4 records of a graph come in the
/// order the analyzer sorts them in (time, thread, kind).
pub fn generate(spec: &SynthSpec, mut push: impl FnMut(&[u8])) {
    use trace_format::record_bytes;
    let mut t = 1_000_000u64;
    let main = SYNTH_MAIN_TID;
    let mut op = OpEvent::zeroed();
    // Format 4: the description last sent for each node address (header zeroed), and the
    // records of the graph being generated, sorted before they go out.
    let mut sent: HashMap<u64, NodeDescEvent> = HashMap::new();
    let mut graph_records: Vec<(OrderKey, Vec<u8>)> = Vec::new();
    for tok in 0..spec.tokens {
        let (n_tokens, pos) = if tok == 0 { (4, 0) } else { (1, 3 + tok) };
        let d = |exit, ts| DecodeEvent {
            header: header(EventKind::Decode, exit, ts, main),
            n_tokens,
            pos,
            ret: 0,
            ..DecodeEvent::default()
        };
        push(record_bytes(&d(false, t)));
        t += 100;
        let g = |exit, ts| GraphEvent {
            header: header(EventKind::GraphCompute, exit, ts, main),
            graph_addr: SYNTH_GRAPH,
            graph_id: u64::from(tok) + 1,
            n_nodes: spec.nodes,
            backend_id: 0,
            backend_kind: 0,
            n_tokens,
            pos,
            ret: 0,
        };
        push(record_bytes(&g(false, t)));
        t += 100;
        if spec.records == SynthRecords::Ends {
            for th in 0..spec.threads {
                let (begin, _) = spec.thread_times(t, th, true);
                let e = GraphThreadEvent {
                    header: header(EventKind::GraphThread, false, begin, main + th),
                    graph_addr: SYNTH_GRAPH,
                    ith: th,
                    nth: spec.threads,
                };
                graph_records.push((order_key(&e.header), record_bytes(&e).to_vec()));
            }
        }
        for i in 0..spec.nodes {
            let addr = SYNTH_NODE_BASE + 224 * u64::from(i);
            let layer = i32::try_from(i / 4).unwrap_or(0);
            op.node_addr = addr;
            op.op = if i % 2 == 0 {
                OpType::MulMat as u32
            } else {
                OpType::Add as u32
            };
            op.nth = spec.threads;
            op.index = i;
            op.layer = layer;
            op.detail = OP_DETAIL_NAME | OP_DETAIL_STRUCTURE;
            op.name = [0; 64];
            let name = format!("node{}-{layer}", i % 4);
            op.name[..name.len()].copy_from_slice(name.as_bytes());
            op.structure.dtype = 0;
            op.structure.ne = [64, i64::from(n_tokens), 1, 1];
            op.structure.src = [if i == 0 { 0 } else { addr - 224 }, SYNTH_WEIGHT, 0, 0];
            let times = |th| spec.thread_times(t, th, i == 0);
            match spec.records {
                SynthRecords::Entries => {
                    for th in 0..spec.threads {
                        op.header = header(EventKind::OpCompute, false, times(th).0, main + th);
                        op.ith = th;
                        push(record_bytes(&op));
                    }
                    for th in 0..spec.threads {
                        let mut exit = OpExitEvent::zeroed();
                        exit.header =
                            header(EventKind::OpComputeExit, true, times(th).1, main + th);
                        push(record_bytes(&exit));
                    }
                }
                SynthRecords::Spans | SynthRecords::Ends => {
                    let desc = node_desc(&op, addr);
                    if sent.get(&addr) != Some(&desc) {
                        sent.insert(addr, desc);
                        let mut d = desc;
                        d.header = header(EventKind::NodeDesc, false, times(0).0, main);
                        graph_records.push((order_key(&d.header), record_bytes(&d).to_vec()));
                    }
                    for th in 0..spec.threads {
                        let (start, end) = times(th);
                        let end = end.max(start);
                        let flags = OpSpanEvent::flags_for(th, 0);
                        let s = if spec.records == SynthRecords::Ends {
                            OpSpanEvent::new(
                                main + th,
                                addr,
                                end,
                                0,
                                flags | OP_SPAN_START_AT_RELEASE,
                            )
                        } else {
                            OpSpanEvent::new(main + th, addr, end, end - start, flags)
                        };
                        let key = order_key(&trace_format::Event::OpSpan(s).header());
                        graph_records.push((key, record_bytes(&s).to_vec()));
                    }
                }
            }
            t = if spec.starts_at_release() {
                // The barrier after the node releases when its last thread arrives.
                (0..spec.threads).map(|th| times(th).1).max().unwrap_or(t)
            } else {
                t + spec.op_ns + 200
            };
        }
        if spec.starts_at_release() && spec.nodes > 0 {
            t += 200;
        }
        graph_records.sort_by_key(|(k, _)| *k);
        for (_, rec) in graph_records.drain(..) {
            push(&rec);
        }
        push(record_bytes(&g(true, t)));
        t += 100;
        push(record_bytes(&d(true, t)));
        t += 100;
        let p = |exit, ts| PhaseEvent {
            header: header(EventKind::PhaseSample, exit, ts, main),
            arg: 32,
            ret: 7,
        };
        push(record_bytes(&p(false, t)));
        t += 500;
        push(record_bytes(&p(true, t)));
        t += 1000;
    }
}

/// The description an operator entry carries, as a format-4 node description (header
/// zeroed: the caller stamps it).
fn node_desc(op: &OpEvent, addr: u64) -> NodeDescEvent {
    NodeDescEvent {
        node_addr: addr,
        op: op.op,
        index: op.index,
        layer: op.layer,
        detail: op.detail,
        nth: op.nth,
        backend_kind: op.backend_kind,
        name: op.name,
        structure: op.structure,
        ..NodeDescEvent::zeroed()
    }
}

/// Thread id of the accel backend's driver in [`split_model`] traces.
pub const SYNTH_ACCEL_TID: u32 = 2001;
/// Operator time of a product in [`split_model`] traces, ns.
pub const SPLIT_MATMUL_NS: u64 = 10_000;
/// Time of one copy in [`split_model`] traces, ns.
pub const SPLIT_COPY_NS: u64 = 2_000;
/// Time the CPU waits at the sync in [`split_model`] traces, ns.
pub const SPLIT_SYNC_NS: u64 = 13_000;

/// The model of a run whose every decode call is split like a layer split: a CPU split
/// (`ffn_up-0`), an accel split on the accel driver thread (`to_accel.ffn_up-0`
/// copy, `ffn_up-1`, same shape as `ffn_up-0`), and a CPU split that starts while the
/// accel split still runs (`sync.ffn_up-1`, [`SPLIT_SYNC_NS`] long, then
/// `to_cpu.ffn_up-1`). One thread per backend.
pub fn split_model(calls: u32) -> crate::TraceModel {
    split_model_with(calls, Retention::All, &mut |_, _| {})
}

/// [`split_model`] keeping `retention` of each graph, calling `on_graph` as each closes
/// (as [`crate::ingest::load_with`] does).
pub fn split_model_with(
    calls: u32,
    retention: Retention,
    on_graph: &mut dyn FnMut(&crate::TraceModel, &GraphSpan),
) -> crate::TraceModel {
    use trace_format::record_bytes;
    let mut events: Vec<(u64, Vec<u8>)> = Vec::new();
    let main = SYNTH_MAIN_TID;
    let mut t = 1_000_000u64;
    let mut graph_id = 0u64;
    for call in 0..calls {
        let pos = 3 + call;
        let d = |exit, ts| DecodeEvent {
            header: header(EventKind::Decode, exit, ts, main),
            n_tokens: 1,
            pos,
            ret: 0,
            ..DecodeEvent::default()
        };
        events.push((t, record_bytes(&d(false, t)).to_vec()));
        let mut graph = |events: &mut Vec<(u64, Vec<u8>)>, tid, kind, n_nodes, start, end| {
            graph_id += 1;
            for (exit, ts) in [(false, start), (true, end)] {
                let g = GraphEvent {
                    header: header(EventKind::GraphCompute, exit, ts, tid),
                    graph_addr: 0xABC,
                    graph_id,
                    n_nodes,
                    backend_id: u32::from(kind != 0),
                    backend_kind: kind,
                    n_tokens: 1,
                    pos,
                    ret: 0,
                };
                events.push((ts, record_bytes(&g).to_vec()));
            }
        };
        let op = |events: &mut Vec<(u64, Vec<u8>)>,
                  tid,
                  kind,
                  index,
                  ty: OpType,
                  name: &str,
                  start,
                  end| {
            let mut e = OpEvent::zeroed();
            e.header = header(EventKind::OpCompute, false, start, tid);
            e.node_addr = SYNTH_NODE_BASE + 224 * u64::from(index);
            e.op = ty as u32;
            e.nth = 1;
            e.index = index;
            e.layer = if name.ends_with("-1") { 1 } else { 0 };
            e.backend_kind = kind;
            e.detail = OP_DETAIL_NAME | OP_DETAIL_STRUCTURE;
            e.name[..name.len()].copy_from_slice(name.as_bytes());
            e.structure.ne = [64, 1, 1, 1];
            events.push((start, record_bytes(&e).to_vec()));
            let mut x = OpExitEvent::zeroed();
            x.header = header(EventKind::OpComputeExit, true, end, tid);
            events.push((end, record_bytes(&x).to_vec()));
        };
        let accel = SYNTH_ACCEL_TID;
        // CPU split 1.
        let a0 = t + 100;
        op(
            &mut events,
            main,
            0,
            0,
            OpType::MulMat,
            "ffn_up-0",
            a0 + 10,
            a0 + 10 + SPLIT_MATMUL_NS,
        );
        let a1 = a0 + 20 + SPLIT_MATMUL_NS;
        graph(&mut events, main, 0, 1, a0, a1);
        // The accel split, submitted at a1, runs on the driver from b0.
        let b0 = a1 + 500;
        op(
            &mut events,
            accel,
            3,
            1,
            OpType::BackendCopy,
            "to_accel.ffn_up-0",
            b0 + 10,
            b0 + 10 + SPLIT_COPY_NS,
        );
        let m0 = b0 + 20 + SPLIT_COPY_NS;
        op(
            &mut events,
            accel,
            3,
            2,
            OpType::MulMat,
            "ffn_up-1",
            m0,
            m0 + SPLIT_MATMUL_NS,
        );
        let b1 = m0 + SPLIT_MATMUL_NS + 10;
        graph(&mut events, accel, 3, 2, b0, b1);
        // CPU split 2 begins at once with the sync, which returns after the accel.
        let c0 = a1 + 100;
        let s0 = c0 + 10;
        op(
            &mut events,
            main,
            0,
            3,
            OpType::BackendSync,
            "sync.ffn_up-1",
            s0,
            s0 + SPLIT_SYNC_NS,
        );
        assert!(s0 + SPLIT_SYNC_NS > b1, "the sync outlasts the accel split");
        let k0 = s0 + SPLIT_SYNC_NS + 10;
        op(
            &mut events,
            main,
            0,
            4,
            OpType::BackendCopy,
            "to_cpu.ffn_up-1",
            k0,
            k0 + SPLIT_COPY_NS,
        );
        let c1 = k0 + SPLIT_COPY_NS + 10;
        graph(&mut events, main, 0, 2, c0, c1);
        events.push((c1 + 10, record_bytes(&d(true, c1 + 10)).to_vec()));
        t = c1 + 1000;
    }
    events.sort_by_key(|(ts, _)| *ts);
    let mut m = crate::TraceModel::with_retention(&synth_header(), retention);
    for (_, rec) in &events {
        let kind = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]);
        let ev = EventKind::from_u32(kind)
            .and_then(|k| trace_format::decode_record(k, rec))
            .expect("synthetic records decode");
        m.apply(&ev);
        m.release_closed(&mut *on_graph);
    }
    m.finish(None);
    m.release_closed(&mut *on_graph);
    m
}

/// The events of one llama.cpp-like decode call with a CPU split (`ffn_up-0`) and a
/// Vulkan split of 4 nodes whose 3 recorded nodes (`l_out-0`, `norm-1` with a fused
/// node after it, `ffn_up-1`) carry GPU timestamps (2000–2300, 2300–2500 of which the
/// fused node takes 2500–2600 within the first's, 2600–3600): decode 1000–5000, the
/// CPU split 1100–1200, the Vulkan split 1500–4000.
pub fn vulkan_split_events() -> Vec<trace_format::Event> {
    use common::event::{GPU_TIMESTAMPS_PER_EVENT, GpuTimestampsEvent};
    use trace_format::Event;
    let main = SYNTH_MAIN_TID;
    let h = |kind, exit, ts| header(kind, exit, ts, main);
    let vk = common::BackendKind::Vulkan as u32;
    let cpu = common::BackendKind::Cpu as u32;
    let decode = |exit, ts| {
        Event::Decode(DecodeEvent {
            header: h(EventKind::Decode, exit, ts),
            n_tokens: 1,
            pos: 5,
            ..DecodeEvent::default()
        })
    };
    let graph = |exit, ts, kind: u32, n_nodes| {
        Event::Graph(GraphEvent {
            header: h(EventKind::GraphCompute, exit, ts),
            graph_addr: 0x100 + u64::from(kind),
            n_nodes,
            backend_kind: kind,
            n_tokens: 1,
            ..GraphEvent::default()
        })
    };
    let desc = |addr: u64, index: u32, op: OpType, name: &str, kind: u32| {
        let mut d = NodeDescEvent {
            header: h(EventKind::NodeDesc, false, 0),
            node_addr: addr,
            op: op as u32,
            index,
            layer: -1,
            nth: 1,
            backend_kind: kind,
            ..NodeDescEvent::zeroed()
        };
        d.name[..name.len()].copy_from_slice(name.as_bytes());
        Event::NodeDesc(Box::new(d))
    };
    let span = |addr: u64, start: u64, end: u64, kind: u32| {
        Event::OpSpan(OpSpanEvent::new(
            main,
            addr,
            end,
            end - start,
            OpSpanEvent::flags_for(0, kind),
        ))
    };
    let mut ticks = [0u64; GPU_TIMESTAMPS_PER_EVENT];
    ticks[..5].copy_from_slice(&[2_000, 2_300, 2_500, 2_600, 3_600]);
    let stamps = Event::GpuTimestamps(Box::new(GpuTimestampsEvent {
        header: h(EventKind::GpuTimestamps, false, 3_900),
        first: 0,
        count: 5,
        total: 5,
        chunk: 0,
        ticks,
    }));
    vec![
        decode(false, 1_000),
        graph(false, 1_100, cpu, 1),
        desc(0xc0, 0, OpType::MulMat, "ffn_up-0", cpu),
        span(0xc0, 1_110, 1_190, cpu),
        graph(true, 1_200, cpu, 1),
        graph(false, 1_500, vk, 4),
        desc(0xa0, 0, OpType::Add, "l_out-0", vk),
        span(0xa0, 1_510, 1_520, vk),
        desc(0xa1, 1, OpType::RmsNorm, "norm-1", vk),
        span(0xa1, 1_520, 1_540, vk),
        desc(0xa3, 3, OpType::MulMat, "ffn_up-1", vk),
        span(0xa3, 1_540, 1_560, vk),
        stamps,
        graph(true, 4_000, vk, 4),
        decode(true, 5_000),
    ]
}

/// A model with every kind of element the timeline draws that [`model`] and
/// [`split_model`] leave out: the call of [`vulkan_split_events`] (a GPU lane) with the
/// backend calls in it (copy, submission, fence waits, a fence wait inside a sync,
/// download), a QoS switch, a loss record and a sampled window's two ends. For the
/// encoders' agreement tests.
pub fn timeline_kinds_model() -> crate::TraceModel {
    use common::event::{
        BackendSpanEvent, BackendSpanKind, LossEvent, OpWindowEvent, QosSwitchEvent,
    };
    use trace_format::Event;
    let h = |kind, ts| header(kind, false, ts, SYNTH_MAIN_TID);
    let vk = common::BackendKind::Vulkan as u32;
    let call = |what: BackendSpanKind, start: u64, end: u64, kind: u32, bytes: u64| {
        Event::BackendSpan(BackendSpanEvent {
            header: h(EventKind::BackendSpan, end),
            start_ns: start,
            what: what as u32,
            backend_kind: kind,
            bytes,
            object: 0,
        })
    };
    let window = |ts, traced| {
        Event::OpWindow(OpWindowEvent {
            header: h(EventKind::OpWindow, ts),
            traced: u32::from(traced),
            decode_steps: 1,
            settled_ns: ts,
        })
    };
    let mut events = vulkan_split_events();
    // Inside the decode call, before its exit.
    let exit = events.pop().expect("the decode call's exit");
    events.extend([
        call(BackendSpanKind::Copy, 1_300, 1_400, u32::MAX, 4096),
        call(BackendSpanKind::VkSubmit, 1_600, 1_650, vk, 1),
        call(BackendSpanKind::VkFenceWait, 1_700, 3_700, vk, 1),
        Event::QosSwitch(QosSwitchEvent {
            header: h(EventKind::QosSwitch, 4_200),
            levels_before: 0xf,
            levels_after: 0x7,
            tps_milli: 12_500,
            min_tps_milli: 20_000,
        }),
        call(BackendSpanKind::Sync, 4_050, 4_300, vk, 0),
        call(BackendSpanKind::VkFenceWait, 4_100, 4_200, vk, 1),
        call(BackendSpanKind::Download, 4_400, 4_500, vk, 196_608),
        exit,
        window(5_500, false),
        window(6_500, true),
        Event::Loss(LossEvent {
            header: h(EventKind::Loss, 6_800),
            lost: 17,
        }),
    ]);
    let mut m = crate::TraceModel::new(&synth_header());
    for e in &events {
        m.apply(e);
    }
    m.finish(Some(7_000));
    m
}

/// Writes a synthetic trace file; returns the number of events.
///
/// # Errors
/// Writer errors.
pub fn write_trace(path: &Path, spec: &SynthSpec) -> Result<u64, TraceError> {
    let mut w = TraceWriter::create(path, &synth_header())?;
    w.set_chunk_bytes(SYNTH_CHUNK_BYTES);
    let mut err = None;
    generate(spec, |rec| {
        if err.is_none()
            && let Err(e) = w.push_raw(rec)
        {
            err = Some(e);
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    let n = w.records();
    w.finish(&TraceFooter {
        events_produced: n,
        events_written: n,
        end_reason: "synthetic".to_owned(),
        ..TraceFooter::default()
    })?;
    Ok(n)
}

/// Single records for hand-made test traces (synthetic pid and thread ids).
#[cfg(test)]
pub(crate) mod records {
    use common::event::{
        DecodeEvent, EventKind, GraphEvent, GraphThreadEvent, NodeDescEvent, OP_DETAIL_NAME,
        OpSpanEvent, OpWindowEvent,
    };
    use trace_format::Event;

    use super::{SYNTH_GRAPH, SYNTH_MAIN_TID, header, synth_header};
    use crate::TraceModel;

    /// Decode call entry (`exit` false) or exit of `n_tokens` at `pos` on the main thread.
    pub fn decode(ts: u64, exit: bool, n_tokens: u32, pos: u32) -> Event {
        Event::Decode(DecodeEvent {
            header: header(EventKind::Decode, exit, ts, SYNTH_MAIN_TID),
            n_tokens,
            pos,
            ret: 0,
            ..DecodeEvent::default()
        })
    }

    /// Decode calls one after another, as `(n_tokens, pos, n_seqs, seq_mask,
    /// seq_multi)`, each `dur_ns` long and `gap_ns` after the one before (as
    /// [`decode_calls_timed`]), with the sequences the probe counted.
    pub fn decode_calls_with_seqs(
        calls: &[(u32, u32, u8, u8, u8)],
        dur_ns: u64,
        gap_ns: u64,
    ) -> Vec<Event> {
        let timed: Vec<(u32, u32, u64)> = calls.iter().map(|&(n, p, ..)| (n, p, dur_ns)).collect();
        let mut out = decode_calls_timed(&timed, gap_ns);
        for (e, &(_, _, n_seqs, mask, multi)) in
            out.iter_mut().zip(calls.iter().flat_map(|c| [c, c]))
        {
            if let Event::Decode(d) = e {
                d.n_seqs = n_seqs;
                d.seq_mask = mask;
                d.seq_multi = multi;
            }
        }
        out
    }

    /// Decode calls one after another, as `(n_tokens, pos, duration ns)`: the first enters
    /// at 1000 ns, each next one `gap_ns` after the exit of the one before (no graphs, no
    /// phases: a token-level trace, whose tokens are produced at the calls' exits).
    pub fn decode_calls_timed(calls: &[(u32, u32, u64)], gap_ns: u64) -> Vec<Event> {
        let mut ts = 1_000;
        let mut out = Vec::with_capacity(2 * calls.len());
        for &(n, pos, dur) in calls {
            out.push(decode(ts, false, n, pos));
            ts += dur;
            out.push(decode(ts, true, n, pos));
            ts += gap_ns;
        }
        out
    }

    /// [`decode_calls_timed`] with every call `dur_ns` long.
    pub fn decode_calls(calls: &[(u32, u32)], dur_ns: u64, gap_ns: u64) -> Vec<Event> {
        let timed: Vec<(u32, u32, u64)> = calls.iter().map(|&(n, p)| (n, p, dur_ns)).collect();
        decode_calls_timed(&timed, gap_ns)
    }

    /// The decode calls `(n_tokens, pos)` of `llama-bench -p pp -n tg -r reps` (batch
    /// size at least `pp`), in its order: pp's warm-up (the prompt once) and `reps`
    /// repetitions of one `pp`-token batch at position 0; tg's warm-up (one token at 0)
    /// and `reps` repetitions of `tg` single-token calls from position 0. Each test
    /// begins with a cleared KV cache.
    pub fn llama_bench_calls(pp: u32, tg: u32, reps: u32) -> Vec<(u32, u32)> {
        let mut calls = Vec::new();
        if pp > 0 {
            calls.extend(std::iter::repeat_n((pp, 0), 1 + reps as usize));
        }
        if tg > 0 {
            calls.push((1, 0));
            for _ in 0..reps {
                calls.extend((0..tg).map(|p| (1, p)));
            }
        }
        calls
    }

    /// CPU graph entry or exit on the main thread.
    pub fn graph(ts: u64, exit: bool) -> Event {
        Event::Graph(GraphEvent {
            header: header(EventKind::GraphCompute, exit, ts, SYNTH_MAIN_TID),
            graph_addr: SYNTH_GRAPH,
            n_tokens: 1,
            ..GraphEvent::default()
        })
    }

    /// Thread `tid` begins its walk over the graph.
    pub fn graph_thread(tid: u32, ts: u64) -> Event {
        Event::GraphThread(GraphThreadEvent {
            header: header(EventKind::GraphThread, false, ts, tid),
            graph_addr: SYNTH_GRAPH,
            ith: tid - SYNTH_MAIN_TID,
            nth: 2,
        })
    }

    /// The description of node `addr` (op `op`, graph index `index`, no layer), sent by
    /// the main thread.
    pub fn desc(ts: u64, addr: u64, index: u32, op: u32, name: &str) -> Event {
        let mut d = NodeDescEvent {
            header: header(EventKind::NodeDesc, false, ts, SYNTH_MAIN_TID),
            node_addr: addr,
            op,
            index,
            layer: -1,
            detail: OP_DETAIL_NAME,
            nth: 2,
            ..NodeDescEvent::zeroed()
        };
        d.name[..name.len()].copy_from_slice(name.as_bytes());
        Event::NodeDesc(Box::new(d))
    }

    /// Thread `tid`'s span of node `addr` ending at `end` (`flags`: `OP_SPAN_*` bits).
    pub fn span(tid: u32, addr: u64, end: u64, dur: u64, flags: u32) -> Event {
        let flags = flags | OpSpanEvent::flags_for(tid - SYNTH_MAIN_TID, 0);
        Event::OpSpan(OpSpanEvent::new(tid, addr, end, dur, flags))
    }

    /// A sampled window began (`traced`) or ended at `ts`, settled at `settled`.
    pub fn op_window(ts: u64, traced: bool, settled: u64) -> Event {
        Event::OpWindow(OpWindowEvent {
            header: header(EventKind::OpWindow, false, ts, SYNTH_MAIN_TID),
            traced: u32::from(traced),
            decode_steps: 0,
            settled_ns: settled,
        })
    }

    /// The finished model of these events, applied in the order given.
    pub fn build(events: &[Event]) -> TraceModel {
        let mut m = TraceModel::new(&synth_header());
        for e in events {
            m.apply(e);
        }
        m.finish(None);
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [SynthRecords; 3] = [
        SynthRecords::Entries,
        SynthRecords::Spans,
        SynthRecords::Ends,
    ];

    fn records(spec: &SynthSpec) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        generate(spec, |rec| v.push(rec.to_vec()));
        v
    }

    fn kind_of(rec: &[u8]) -> Option<EventKind> {
        EventKind::from_u32(u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]))
    }

    #[test]
    fn event_count_matches_generate() {
        for records in ALL {
            for at_release in [false, true] {
                for (tokens, nodes, threads) in [(3, 5, 3), (1, 4, 2), (4, 0, 2), (0, 3, 2)] {
                    let spec = SynthSpec::sized(tokens, nodes, threads)
                        .with_records(records)
                        .with_starts_at_release(at_release);
                    let mut n = 0;
                    generate(&spec, |_| n += 1);
                    assert_eq!(n, spec.event_count(), "{spec:?}");
                }
            }
        }
    }

    /// The default records stay the entry/exit pairs: every operator record is one.
    #[test]
    fn entries_are_the_default() {
        let spec = SynthSpec::sized(2, 3, 2);
        assert_eq!(spec.records, SynthRecords::Entries);
        assert!(!spec.starts_at_release());
        let kinds: Vec<_> = records(&spec).iter().filter_map(|r| kind_of(r)).collect();
        assert_eq!(
            kinds.iter().filter(|&&k| k == EventKind::OpCompute).count(),
            12
        );
        assert_eq!(
            kinds
                .iter()
                .filter(|&&k| k == EventKind::OpComputeExit)
                .count(),
            12
        );
        assert!(!kinds.iter().any(|k| matches!(
            k,
            EventKind::OpSpan | EventKind::NodeDesc | EventKind::GraphThread
        )));
    }

    /// Format-4 records come in the analyzer's order (time, thread, kind, ...), and a
    /// node is described in the prefill's graph and again (a new shape) in the first
    /// decode step's, never after.
    #[test]
    fn span_records_are_ordered_and_described_on_change() {
        for records in [SynthRecords::Spans, SynthRecords::Ends] {
            let spec = SynthSpec::sized(4, 6, 3).with_records(records);
            let events: Vec<_> = self::records(&spec)
                .iter()
                .map(|r| {
                    kind_of(r)
                        .and_then(|k| trace_format::decode_record(k, r))
                        .expect("record decodes")
                })
                .collect();
            let keys: Vec<OrderKey> = events.iter().map(|e| order_key(&e.header())).collect();
            assert!(keys.is_sorted(), "{records:?}");
            let mut graphs = 0;
            let mut descs_per_graph = Vec::new();
            for e in &events {
                match e {
                    trace_format::Event::Graph(g) if !g.header.is_exit() => {
                        graphs += 1;
                        descs_per_graph.push(0);
                    }
                    trace_format::Event::NodeDesc(_) => {
                        *descs_per_graph.last_mut().expect("inside a graph") += 1;
                    }
                    trace_format::Event::OpSpan(s) => {
                        let release = s.flags & OP_SPAN_START_AT_RELEASE != 0;
                        assert_eq!(release, records == SynthRecords::Ends);
                        assert_eq!(s.dur == 0, release);
                    }
                    _ => {}
                }
            }
            assert_eq!(graphs, 4);
            assert_eq!(descs_per_graph, [6, 6, 0, 0]);
        }
    }
}
