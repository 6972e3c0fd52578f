//! The operator records of trace format 4: [`OpSpanEvent`]s (one per node and thread,
//! at the node's end) and [`NodeDescEvent`]s (a node's description, sent when it
//! changed). A span names its node by address only; it takes the description last sent
//! for that address before its graph ends, so a span is resolved when its graph closes
//! (another thread's span can end before thread 0's description of the same node is
//! recorded, and a node address is reused by the next graph shape).

use common::event::{
    EventHeader, EventKind, MAX_PMC, NodeDescEvent, OP_SPAN_END_APPROX, OP_SPAN_FUSED,
    OP_SPAN_START_AT_RELEASE, OpEvent, OpSpanEvent,
};

use super::{NONE_U32, OpSlice, PMC_MISSING, TraceModel};

/// A span whose node is resolved when its graph closes.
#[derive(Clone, Copy, Debug)]
pub(super) struct PendingSpan {
    /// Slice id.
    pub slice: u32,
    /// Node address.
    pub addr: u64,
    /// Only its end was probed: it starts where the barrier before it released
    /// (`OP_SPAN_START_AT_RELEASE`).
    pub start_at_release: bool,
}

impl TraceModel {
    /// A node's description: the latest for its address from here on.
    pub(super) fn apply_node_desc(&mut self, d: &NodeDescEvent) {
        self.counts.op += 1;
        self.descs.insert(d.node_addr, Box::new(*d));
    }

    /// One thread's span of one node, with its counter deltas (`pmc_ok` bits of `delta`)
    /// when they were recorded.
    pub(super) fn apply_op_span(
        &mut self,
        s: &OpSpanEvent,
        counters: Option<(u32, &[u64; MAX_PMC])>,
    ) {
        self.counts.op += 1;
        let pid = (self.target_pid != 0).then_some(self.target_pid);
        let Some(t) = self.thread(s.tid, pid) else {
            return;
        };
        let n = self.counter_names.len();
        let pmc = match counters {
            Some((ok, delta)) if ok != 0 && n > 0 => {
                let at = self.slice_pmc.len() as u32;
                for (i, &d) in delta.iter().enumerate().take(n.min(MAX_PMC)) {
                    self.slice_pmc
                        .push(if ok & (1 << i) != 0 { d } else { PMC_MISSING });
                }
                at
            }
            _ => NONE_U32,
        };
        let graph = self.open_graph(s.backend_kind()).unwrap_or(NONE_U32);
        let slice = OpSlice {
            start_ns: s.start_ns(),
            end_ns: s.end_ns,
            node: NONE_U32,
            graph,
            thread: t as u32,
            pmc,
        };
        let id = self.slices.len() as u32;
        self.slices.push(slice);
        let start_at_release = s.flags & OP_SPAN_START_AT_RELEASE != 0;
        let th = &mut self.threads[t];
        th.op_slices += 1;
        if !start_at_release {
            th.op_busy_ns += slice.dur_ns();
        }
        if s.flags & OP_SPAN_FUSED != 0 {
            self.counts.fused_spans += 1;
        }
        if start_at_release {
            self.counts.spans_start_at_release += 1;
        } else if s.flags & OP_SPAN_END_APPROX != 0 {
            self.counts.spans_end_approx += 1;
        } else {
            self.counts.spans_exact += 1;
        }
        let pending = PendingSpan {
            slice: id,
            addr: s.node_addr,
            start_at_release,
        };
        match self.open_graphs.iter_mut().find(|g| g.graph == graph) {
            Some(g) if graph != NONE_U32 => {
                g.slices.push(id);
                g.pending.push(pending);
            }
            _ => {
                // No graph to find the barrier in: the span keeps its end only.
                self.counts.ops_outside_graph += 1;
                self.resolve_span(pending);
            }
        }
    }

    /// Gives the spans of graph `g` recorded without a start (`start_at_release`) their
    /// start: the release of the barrier after the graph's previous node — the latest end
    /// among that node's spans, since every thread computes every node and meets the
    /// others at a barrier after each — or, for a thread's first node of the graph, where
    /// it began the graph (`engine_graph_thread`), else the graph's start.
    pub(super) fn infer_starts(&mut self, g: u32, slices: &[u32], pending: &[PendingSpan]) {
        if !pending.iter().any(|p| p.start_at_release) {
            return;
        }
        let graph_start = self.graphs[g as usize].start_ns;
        // (node index, end, slice id), in graph order; spans dropped over a limit (no
        // node) are left out.
        let mut order: Vec<(u32, u64, u32)> = slices
            .iter()
            .filter_map(|&id| {
                let s = &self.slices[id as usize];
                let index = self.nodes.get(s.node as usize)?.index;
                Some((index, s.end_ns, id))
            })
            .collect();
        order.sort_unstable();
        let inferred: std::collections::HashSet<u32> = pending
            .iter()
            .filter(|p| p.start_at_release)
            .map(|p| p.slice)
            .collect();
        // The latest end of the node before the one being walked.
        let mut release: Option<u64> = None;
        let mut i = 0;
        while i < order.len() {
            let index = order[i].0;
            let mut j = i;
            let mut latest = 0;
            while j < order.len() && order[j].0 == index {
                let id = order[j].2;
                let s = self.slices[id as usize];
                latest = latest.max(s.end_ns);
                if inferred.contains(&id) {
                    let t = s.thread as usize;
                    let begin = self.pairing[t]
                        .graph_begin
                        .filter(|&b| b >= graph_start && b <= s.end_ns)
                        .unwrap_or(graph_start);
                    let start = release.unwrap_or(begin).max(begin).min(s.end_ns);
                    self.slices[id as usize].start_ns = start;
                    self.threads[t].op_busy_ns += s.end_ns - start;
                }
                j += 1;
            }
            release = Some(latest);
            i = j;
        }
    }

    /// Gives a pending span its node: the description last recorded for its address (or
    /// a bare one naming the address only, if none was).
    pub(super) fn resolve_span(&mut self, p: PendingSpan) {
        let t = self.slices[p.slice as usize].thread as usize;
        let op = match self.descs.get(&p.addr) {
            Some(d) => op_event_of(d),
            None => {
                self.counts.undescribed_spans += 1;
                let mut op = OpEvent::zeroed();
                op.node_addr = p.addr;
                op.op = u32::MAX;
                op.index = u32::MAX;
                op.layer = -1;
                op
            }
        };
        let Some(node) = self.intern_node(&op, self.pairing[t].last_layer) else {
            // Over a limit (counted): the span is dropped, as an operator entry over it
            // is. Its slice stays without a node ([`NONE_U32`]) and in no node span.
            let dur = self.slices[p.slice as usize].dur_ns();
            let th = &mut self.threads[t];
            th.op_slices = th.op_slices.saturating_sub(1);
            if !p.start_at_release {
                th.op_busy_ns = th.op_busy_ns.saturating_sub(dur);
            }
            return;
        };
        let layer = self.nodes[node as usize].layer;
        if layer >= 0 {
            self.pairing[t].last_layer = Some(layer);
        }
        self.slices[p.slice as usize].node = node;
    }
}

/// A description as the operator entry record of formats 1 to 3, which node interning
/// reads.
fn op_event_of(d: &NodeDescEvent) -> OpEvent {
    let mut op = OpEvent::zeroed();
    op.header = EventHeader {
        kind: EventKind::OpCompute as u32,
        ..d.header
    };
    op.node_addr = d.node_addr;
    op.op = d.op;
    op.nth = d.nth;
    op.index = d.index;
    op.layer = d.layer;
    op.detail = d.detail;
    op.backend_kind = d.backend_kind;
    op.name = d.name;
    op.structure = d.structure;
    op
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use common::{engine_abi::OpType, event::OP_SPAN_START_AT_RELEASE};

    use super::super::{MAX_CLASSES, OpAggregate, op_slot};
    use crate::{
        TraceModel,
        synthetic::{
            self, SYNTH_MAIN_TID, SynthRecords, SynthSpec,
            records::{build, desc, graph, graph_thread, span},
        },
    };

    const MAIN: u32 = SYNTH_MAIN_TID;
    const WORKER: u32 = SYNTH_MAIN_TID + 1;
    const RELEASE: u32 = OP_SPAN_START_AT_RELEASE;
    const ADD: u32 = OpType::Add as u32;
    const MUL_MAT: u32 = OpType::MulMat as u32;

    /// A node span as the views see it: node by description (ids depend on the order
    /// nodes were interned in), its slices as (tid, start, end) by thread.
    #[derive(Debug, PartialEq)]
    struct SpanView {
        graph: u32,
        name: String,
        addr: u64,
        op: u32,
        index: u32,
        layer: i32,
        ne: [i64; 4],
        src: [u64; 4],
        start: u64,
        end: u64,
        busy: u64,
        n_threads: u32,
        slices: Vec<(u32, u64, u64)>,
    }

    /// Everything the views read of a model's operators.
    #[derive(Debug, PartialEq)]
    struct Views {
        spans: Vec<SpanView>,
        op_types: Vec<OpAggregate>,
        classes: BTreeMap<String, OpAggregate>,
        /// Per token: time per op type.
        tokens: Vec<u64>,
        /// Per thread: tid, slices, busy time.
        threads: Vec<(u32, u64, u64)>,
        /// Per graph: start, end, node spans.
        graphs: Vec<(u64, Option<u64>, u32)>,
    }

    fn views(m: &TraceModel) -> Views {
        let threads = m.threads();
        let spans = m
            .node_spans()
            .iter()
            .map(|s| {
                let n = &m.nodes()[s.node as usize];
                let mut slices: Vec<_> = m
                    .span_slices(s)
                    .map(|x| (threads[x.thread as usize].tid, x.start_ns, x.end_ns))
                    .collect();
                slices.sort_unstable();
                SpanView {
                    graph: s.graph,
                    name: n.name.clone(),
                    addr: n.addr,
                    op: n.op,
                    index: n.index,
                    layer: n.layer,
                    ne: n.ne,
                    src: n.src,
                    start: s.start_ns,
                    end: s.end_ns,
                    busy: s.busy_ns,
                    n_threads: s.n_threads,
                    slices,
                }
            })
            .collect();
        let classes = m
            .class_aggregates()
            .iter()
            .enumerate()
            .map(|(c, a)| (m.classes()[c].clone(), a.clone()))
            .collect();
        let mut threads: Vec<_> = threads
            .iter()
            .map(|t| (t.tid, t.op_slices, t.op_busy_ns))
            .collect();
        threads.sort_unstable();
        Views {
            spans,
            op_types: m.op_type_aggregates().to_vec(),
            classes,
            tokens: m.tokens().iter().map(|t| t.op_ns).collect(),
            threads,
            graphs: m
                .graphs()
                .iter()
                .map(|g| (g.start_ns, g.end_ns, g.nodes.end - g.nodes.start))
                .collect(),
        }
    }

    fn model(spec: &SynthSpec) -> TraceModel {
        let mut m = synthetic::model(spec, None);
        m.finish(None);
        m
    }

    /// The same run recorded as entry/exit pairs, as exact spans and as ends only gives
    /// the same node spans, slices and aggregates, when threads start nodes at barrier
    /// releases (where inferred starts are exact); exact spans also when they do not.
    #[test]
    fn views_do_not_depend_on_the_record_format() {
        let spec = SynthSpec::sized(4, 9, 3).with_starts_at_release(true);
        let entries = model(&spec);
        let exact = views(&entries);
        assert_eq!(exact.spans.len(), 4 * 9);
        assert_eq!(exact.threads.len(), 3);
        // Threads wait at the barriers: the test would not see wrong starts otherwise.
        assert!(
            exact
                .spans
                .iter()
                .all(|s| s.busy < u64::from(s.n_threads) * (s.end - s.start))
        );
        assert!(exact.spans.iter().all(|s| s.n_threads == 3));
        for records in [SynthRecords::Spans, SynthRecords::Ends] {
            let m = model(&spec.with_records(records));
            pretty_assertions::assert_eq!(views(&m), exact, "{records:?}");
            assert_eq!(m.counts().undescribed_spans, 0);
            assert_eq!(m.counts().ops_outside_graph, 0);
            assert_eq!(m.unpaired().total(), 0);
        }
        // `Ends` always starts nodes at releases.
        let staggered = SynthSpec::sized(4, 9, 3);
        assert_eq!(
            views(&model(&staggered.with_records(SynthRecords::Ends))),
            exact
        );
        // Staggered starts (a 200 ns gap, threads 50 ns apart): exact spans still match.
        let entries = views(&model(&staggered));
        assert_ne!(entries, exact);
        assert_eq!(
            views(&model(&staggered.with_records(SynthRecords::Spans))),
            entries
        );
    }

    /// Ends only: a thread's slice of node n > 0 starts at the latest end among node
    /// n − 1's slices; its first slice of a graph where it began the graph.
    #[test]
    fn inferred_starts_are_barrier_releases() {
        let spec = SynthSpec::sized(3, 7, 3).with_records(SynthRecords::Ends);
        let m = model(&spec);
        let mut checked = 0;
        for g in m.graphs() {
            let spans = m.graph_node_spans(g);
            assert_eq!(spans.len(), 7);
            for (n, s) in spans.iter().enumerate() {
                assert_eq!(m.nodes()[s.node as usize].index as usize, n);
                for x in m.span_slices(s) {
                    let k = u64::from(m.threads()[x.thread as usize].tid - MAIN);
                    let expected = match n {
                        // The generator's graph_thread: 100 ns after the graph's entry,
                        // threads 50 ns apart.
                        0 => g.start_ns + 100 + 50 * k,
                        _ => m
                            .span_slices(&spans[n - 1])
                            .map(|p| p.end_ns)
                            .max()
                            .expect("previous node has slices"),
                    };
                    assert_eq!(
                        x.start_ns, expected,
                        "graph {} node {n} thread {k}",
                        g.index
                    );
                    assert!(x.start_ns < x.end_ns);
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 3 * 7 * 3);
    }

    /// Hand-made: the release is the latest end whichever thread it is; a thread without
    /// a begin in the graph (a stale one from the graph before) starts at the graph's
    /// start; busy times count the inferred starts.
    #[test]
    fn inferred_starts_by_hand() {
        let (a, b, c) = (0x1000, 0x2000, 0x3000);
        let events = [
            graph(1000, false),
            graph_thread(MAIN, 1100),
            desc(1100, a, 0, MUL_MAT, "a"),
            graph_thread(WORKER, 1150),
            span(WORKER, a, 1800, 0, RELEASE),
            span(MAIN, a, 2000, 0, RELEASE),
            desc(2000, b, 1, ADD, "b"),
            span(MAIN, b, 2500, 0, RELEASE),
            span(WORKER, b, 2900, 0, RELEASE),
            desc(2900, c, 2, ADD, "c"),
            span(WORKER, c, 3100, 0, RELEASE),
            span(MAIN, c, 3500, 0, RELEASE),
            graph(3600, true),
            // Second graph: the worker's begin is lost; descriptions are not resent.
            graph(5000, false),
            graph_thread(MAIN, 5100),
            span(WORKER, a, 5900, 0, RELEASE),
            span(MAIN, a, 6000, 0, RELEASE),
            span(MAIN, b, 6300, 0, RELEASE),
            span(WORKER, b, 6400, 0, RELEASE),
            graph(6500, true),
        ];
        let m = build(&events);
        let v = views(&m);
        let got: Vec<_> = v
            .spans
            .iter()
            .map(|s| {
                (
                    s.graph,
                    s.name.as_str(),
                    s.start,
                    s.end,
                    s.busy,
                    s.slices.clone(),
                )
            })
            .collect();
        // (graph, name, start, end, busy, per-thread slices)
        #[rustfmt::skip]
        let want = [
            (0, "a", 1100, 2000, 900 + 650, vec![(MAIN, 1100, 2000), (WORKER, 1150, 1800)]),
            (0, "b", 2000, 2900, 500 + 900, vec![(MAIN, 2000, 2500), (WORKER, 2000, 2900)]),
            (0, "c", 2900, 3500, 600 + 200, vec![(MAIN, 2900, 3500), (WORKER, 2900, 3100)]),
            (1, "a", 5000, 6000, 900 + 900, vec![(MAIN, 5100, 6000), (WORKER, 5000, 5900)]),
            (1, "b", 6000, 6400, 300 + 400, vec![(MAIN, 6000, 6300), (WORKER, 6000, 6400)]),
        ];
        assert_eq!(got, want);
        assert_eq!(
            v.threads,
            [
                (MAIN, 5, 900 + 500 + 600 + 900 + 300),
                (WORKER, 5, 650 + 900 + 200 + 900 + 400)
            ]
        );
        assert_eq!(m.counts().undescribed_spans, 0);
    }

    /// A description recorded after another thread's span of its node, before the graph
    /// exits, names that span; an address re-described in a later graph keeps the old
    /// description for the earlier graph's spans.
    #[test]
    fn descriptions_resolve_at_graph_exit() {
        let x = 0x4000;
        let events = [
            graph(1000, false),
            span(WORKER, x, 1500, 300, 0),
            desc(1600, x, 0, MUL_MAT, "attn_q-0"),
            span(MAIN, x, 2000, 400, 0),
            graph(2100, true),
            graph(3000, false),
            desc(3100, x, 0, ADD, "ffn_out-0"),
            span(WORKER, x, 3400, 250, 0),
            span(MAIN, x, 3500, 400, 0),
            graph(3600, true),
        ];
        let m = build(&events);
        let v = views(&m);
        let got: Vec<_> = v
            .spans
            .iter()
            .map(|s| {
                (
                    s.graph,
                    s.name.as_str(),
                    s.op,
                    s.layer,
                    s.start,
                    s.end,
                    s.busy,
                    s.n_threads,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (0, "attn_q-0", MUL_MAT, 0, 1200, 2000, 700, 2),
                (1, "ffn_out-0", ADD, 0, 3100, 3500, 650, 2),
            ]
        );
        assert_eq!(m.nodes().len(), 2);
        assert!(m.slices().iter().all(|s| s.node != u32::MAX));
        assert_eq!(m.counts().undescribed_spans, 0);
        assert_eq!(v.op_types[op_slot(MUL_MAT)].count, 1);
        assert_eq!(v.op_types[op_slot(ADD)].count, 1);
        assert_eq!(v.classes.keys().collect::<Vec<_>>(), ["attn_q", "ffn_out"]);
    }

    /// A span of an address never described is counted and still becomes a slice (and
    /// a node span) of an unknown op.
    #[test]
    fn undescribed_spans_are_counted_and_kept() {
        let (a, y) = (0x1000, 0x9000);
        let events = [
            graph(1000, false),
            desc(1100, a, 0, ADD, "a"),
            span(MAIN, a, 1500, 400, 0),
            span(MAIN, y, 1900, 300, 0),
            graph(2000, true),
        ];
        let m = build(&events);
        assert_eq!(m.counts().undescribed_spans, 1);
        assert_eq!(m.slices().len(), 2);
        let s = m.slices()[1];
        assert_eq!((s.start_ns, s.end_ns), (1600, 1900));
        let n = &m.nodes()[s.node as usize];
        assert_eq!(
            (n.addr, n.op, n.index, n.layer),
            (y, u32::MAX, u32::MAX, -1)
        );
        assert_eq!(m.node_spans().len(), 2);
        assert_eq!(m.op_type_aggregates()[op_slot(u32::MAX)].count, 1);
        assert_eq!(m.op_type_aggregates()[op_slot(u32::MAX)].total_ns, 300);
        assert_eq!(m.threads()[0].op_slices, 2);
    }

    /// Spans whose node cannot be interned (over the class limit) are dropped as
    /// entries over it are: no panic, not in any node span, not in the thread's busy
    /// time, and the timelines skip their slices.
    #[test]
    fn spans_over_a_limit_are_dropped() {
        let over = 3;
        let n = MAX_CLASSES + over;
        let mut events = vec![graph(1000, false), graph_thread(MAIN, 1000)];
        for i in 0..n {
            let addr = 0x10_0000 + 64 * i as u64;
            let t = 1000 + 100 * i as u64;
            events.push(desc(t, addr, i as u32, ADD, &format!("k{i}x")));
            events.push(span(MAIN, addr, t + 100, 0, RELEASE));
        }
        events.push(graph(1000 + 100 * n as u64 + 100, true));
        let m = build(&events);
        assert_eq!(m.counts().over_limit, over as u64);
        assert_eq!(m.node_spans().len(), MAX_CLASSES);
        assert_eq!(m.slices().len(), n);
        let th = &m.threads()[0];
        assert_eq!(th.op_slices, MAX_CLASSES as u64);
        assert_eq!(th.op_busy_ns, 100 * MAX_CLASSES as u64);
        let mut chrome = Vec::new();
        crate::export::chrome::write(&m, &Default::default(), &mut chrome).expect("chrome");
        let mut perfetto = Vec::new();
        crate::export::perfetto::write(&m, &Default::default(), &mut perfetto).expect("perfetto");
    }

    /// A `Spans` trace written to a file and read back through the ingest path (the
    /// reordering window, borrowed records) gives the model built in memory.
    #[test]
    fn span_traces_round_trip_through_a_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        for records in [SynthRecords::Spans, SynthRecords::Ends] {
            let spec = SynthSpec::sized(5, 11, 3).with_records(records);
            let path = dir.path().join(format!("{records:?}.pftrace"));
            let n = synthetic::write_trace(&path, &spec).expect("write");
            assert_eq!(n, spec.event_count());
            let (loaded, _, info) = crate::ingest::load(&path, &crate::NoProgress).expect("load");
            assert_eq!((info.events_read, info.late_events), (n, 0));
            let direct = model(&spec);
            assert_eq!(views(&loaded), views(&direct), "{records:?}");
            assert_eq!(loaded.nodes(), direct.nodes());
            assert_eq!(loaded.slices(), direct.slices());
            assert_eq!(loaded.node_spans(), direct.node_spans());
            assert_eq!(loaded.tokens(), direct.tokens());
            assert_eq!(loaded.graphs(), direct.graphs());
            assert_eq!(loaded.threads(), direct.threads());
            assert_eq!(loaded.counts(), direct.counts());
            assert_eq!(loaded.unpaired(), direct.unpaired());
            assert_eq!(
                (loaded.first_ns(), loaded.last_ns()),
                (direct.first_ns(), direct.last_ns())
            );
            assert_eq!(loaded.counts().total, n);
        }
    }
}
