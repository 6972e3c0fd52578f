//! One thread's track: its decode calls, graphs, phases, backend calls and operators
//! merged into time order (outer slices first at equal starts), nested with an
//! open-slice stack, and the flows from each graph to the operators it ran there.

use std::io;

use crate::model::{NONE_U32, TraceModel};

use super::{
    Arg, Slice, SliceName, TimelineOptions, TimelineSink, WalkStats,
    layout::Layout,
    slice_args::{self, NodeTexts},
};

/// What a slice of a thread track is (an index into the model's list of that kind).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Item {
    Token(u32),
    Graph(u32),
    Phase(u32),
    Backend(u32),
    /// A layer of graph `.0`: its node spans `.1` (a range of
    /// [`TraceModel::graph_node_spans`]).
    Layer(u32, std::ops::Range<u32>),
    Op(u32),
}

/// A slice to write: its interval and, at equal intervals, its depth (outer first).
#[derive(Clone, Debug)]
struct Span {
    start: u64,
    end: u64,
    rank: u8,
    item: Item,
}

impl Span {
    fn key(&self) -> (u64, std::cmp::Reverse<u64>, u8) {
        (self.start, std::cmp::Reverse(self.end), self.rank)
    }
}

/// Flow id from graph `graph` to its operators on thread index `thread`.
fn flow_id(graph: u32, thread: u32) -> u64 {
    ((u64::from(graph) + 1) << 16) | u64::from(thread)
}

/// The thread indices that ran operators of graph `g` (in its node spans), if the
/// graph's slice is written (it ended).
fn graph_threads(model: &TraceModel, g: u32) -> Vec<u32> {
    let Some(graph) = model.graphs().get(g as usize) else {
        return Vec::new();
    };
    if graph.end_ns.is_none() {
        return Vec::new();
    }
    let mut v: Vec<u32> = model
        .graph_node_spans(graph)
        .iter()
        .flat_map(|span| model.span_slices(span).map(|s| s.thread))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The indices `0..len` whose item runs on `tid`, by (start, longest first, index):
/// phases and backend calls are kept in exit order.
fn by_start(
    len: usize,
    on_tid: impl Fn(usize) -> bool,
    key: impl Fn(usize) -> (u64, u64),
) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..len as u32).filter(|&i| on_tid(i as usize)).collect();
    ids.sort_by_key(|&i| {
        let (start, end) = key(i as usize);
        (start, std::cmp::Reverse(end), i)
    });
    ids
}

/// The walk of thread tracks (one at a time).
pub struct ThreadWalk<'a> {
    model: &'a TraceModel,
    opts: &'a TimelineOptions,
    layout: &'a Layout<'a>,
    texts: &'a NodeTexts,
}

impl<'a> ThreadWalk<'a> {
    /// A walk over `model`'s thread tracks.
    pub fn new(
        model: &'a TraceModel,
        opts: &'a TimelineOptions,
        layout: &'a Layout<'a>,
        texts: &'a NodeTexts,
    ) -> ThreadWalk<'a> {
        ThreadWalk {
            model,
            opts,
            layout,
            texts,
        }
    }

    /// The layers of each graph of `tid`: runs of node spans of one layer (>= 0).
    fn layers(&self, tid: u32) -> Vec<Span> {
        let m = self.model;
        let mut out = Vec::new();
        if !self.opts.layers {
            return out;
        }
        for g in m
            .graphs()
            .iter()
            .filter(|g| g.tid == tid && g.end_ns.is_some())
        {
            let spans = m.graph_node_spans(g);
            let layer_of = |i: usize| m.nodes()[spans[i].node as usize].layer;
            let mut i = 0;
            while i < spans.len() {
                let layer = layer_of(i);
                let mut j = i + 1;
                while j < spans.len() && layer_of(j) == layer {
                    j += 1;
                }
                if layer >= 0 {
                    let run = &spans[i..j];
                    out.push(Span {
                        start: run.iter().map(|s| s.start_ns).min().unwrap_or(0),
                        end: run.iter().map(|s| s.end_ns).max().unwrap_or(0),
                        rank: 2,
                        item: Item::Layer(g.index, i as u32..j as u32),
                    });
                }
                i = j;
            }
        }
        out.sort_by_key(|s| (s.start, std::cmp::Reverse(s.end)));
        out
    }

    /// The slices of thread `tid` (index `thread`), each kind in its own time order,
    /// those that cannot be in the walk's range left out.
    fn spans(&self, thread: u32, tid: u32) -> [Vec<Span>; 6] {
        let mut lists = self.all_spans(thread, tid);
        if let Some(range) = self.opts.range {
            // Kept: what begins in the range, and what nests in it (which ends before
            // the outer slices that begin in the range end).
            let horizon = lists[..5]
                .iter()
                .flatten()
                .filter(|s| range.contains(s.start))
                .map(|s| s.end)
                .max()
                .unwrap_or(0)
                .max(range.end_ns);
            for list in &mut lists {
                list.retain(|s| s.start >= range.start_ns && s.start < horizon);
            }
        }
        lists
    }

    /// Every slice of thread `tid` (index `thread`), each kind in its own time order.
    fn all_spans(&self, thread: u32, tid: u32) -> [Vec<Span>; 6] {
        let m = self.model;
        let tokens = m
            .tokens()
            .iter()
            .filter(|t| t.tid == tid)
            .filter_map(|t| {
                Some(Span {
                    start: t.start_ns,
                    end: t.end_ns?,
                    rank: 0,
                    item: Item::Token(t.index),
                })
            })
            .collect();
        let graphs = m
            .graphs()
            .iter()
            .filter(|g| g.tid == tid)
            .filter_map(|g| {
                Some(Span {
                    start: g.start_ns,
                    end: g.end_ns?,
                    rank: 1,
                    item: Item::Graph(g.index),
                })
            })
            .collect();
        let ph = m.phases();
        let phases = by_start(
            ph.len(),
            |i| ph[i].tid == tid,
            |i| (ph[i].start_ns, ph[i].end_ns),
        )
        .into_iter()
        .map(|i| {
            let p = &ph[i as usize];
            Span {
                start: p.start_ns,
                end: p.end_ns.max(p.start_ns),
                rank: 1,
                item: Item::Phase(i),
            }
        })
        .collect();
        // Backend calls too (a fence wait returns inside its sync).
        let calls = m.backend_calls();
        let backend = by_start(
            calls.len(),
            |i| calls[i].tid == tid,
            |i| (calls[i].start_ns, calls[i].end_ns),
        )
        .into_iter()
        .map(|i| {
            let c = &calls[i as usize];
            Span {
                start: c.start_ns,
                end: c.end_ns,
                rank: 2,
                item: Item::Backend(i),
            }
        })
        .collect();
        // Operators do not nest on a thread: exit order is start order.
        let ops = m
            .slices()
            .iter()
            .enumerate()
            // A span without a node (dropped over a limit) is not drawn.
            .filter(|(_, s)| self.opts.ops && s.thread == thread && s.node != NONE_U32)
            .map(|(i, s)| Span {
                start: s.start_ns,
                end: s.end_ns,
                rank: 2,
                item: Item::Op(i as u32),
            })
            .collect();
        [tokens, graphs, phases, backend, self.layers(tid), ops]
    }

    /// Writes thread `tid`'s track (thread index `thread`) to `sink`.
    ///
    /// # Errors
    /// The sink's I/O errors.
    pub fn write(
        &mut self,
        thread: u32,
        tid: u32,
        sink: &mut impl TimelineSink,
        stats: &mut WalkStats,
    ) -> io::Result<()> {
        let mut lists = self.spans(thread, tid).map(|v| v.into_iter().peekable());
        sink.sequence(super::TrackId::Thread(tid))?;
        // Open slices: their (clamped) ends.
        let mut stack: Vec<u64> = Vec::new();
        let mut flows = FlowState::default();
        let mut args: Vec<Arg<'a>> = Vec::new();
        loop {
            let mut best: Option<(Span, usize)> = None;
            for (k, list) in lists.iter_mut().enumerate() {
                if let Some(s) = list.peek()
                    && best.as_ref().is_none_or(|(b, _)| s.key() < b.key())
                {
                    best = Some((s.clone(), k));
                }
            }
            let Some((mut span, k)) = best else { break };
            lists[k].next();
            while let Some(&end) = stack.last()
                && end <= span.start
            {
                sink.end(end)?;
                stack.pop();
            }
            if let Some(&end) = stack.last()
                && span.end > end
            {
                span.end = end;
                stats.clamped += 1;
            }
            args.clear();
            let next_op = lists[5].peek().cloned();
            self.begin(&span, thread, next_op, &mut flows, &mut args, sink, stats)?;
            stack.push(span.end);
        }
        while let Some(end) = stack.pop() {
            sink.end(end)?;
        }
        Ok(())
    }

    /// Begins `span`'s slice; `next_op` is the thread's next operator (flows continue
    /// to it when it belongs to the same graph).
    #[allow(
        clippy::too_many_arguments,
        reason = "the walk's state, passed down once"
    )]
    fn begin(
        &self,
        span: &Span,
        thread: u32,
        next_op: Option<Span>,
        flows: &mut FlowState,
        args: &mut Vec<Arg<'a>>,
        sink: &mut impl TimelineSink,
        stats: &mut WalkStats,
    ) -> io::Result<()> {
        let m = self.model;
        let texts = self.texts;
        let node = match span.item {
            Item::Op(i) => Some(m.slices()[i as usize].node),
            _ => None,
        };
        let (name, category, flow_ids, terminating): (SliceName<'a>, &str, Vec<u64>, Vec<u64>) =
            match span.item.clone() {
                Item::Token(i) => {
                    let t = &m.tokens()[i as usize];
                    let split = self.layout.token_splits.get(t.index as usize);
                    (
                        slice_args::token(t, split, args),
                        "token",
                        Vec::new(),
                        Vec::new(),
                    )
                }
                Item::Graph(i) => {
                    let g = &m.graphs()[i as usize];
                    let name = slice_args::graph(g, texts, self.layout.split_pass, args);
                    let ids: Vec<u64> = if self.opts.flows && self.opts.ops {
                        graph_threads(m, i)
                            .into_iter()
                            .map(|t| flow_id(i, t))
                            .collect()
                    } else {
                        Vec::new()
                    };
                    stats.flows += ids.len() as u64;
                    (name, "graph", ids, Vec::new())
                }
                Item::Phase(i) => {
                    let p = &m.phases()[i as usize];
                    (slice_args::phase(p, args), "phase", Vec::new(), Vec::new())
                }
                Item::Backend(i) => {
                    let c = &m.backend_calls()[i as usize];
                    (
                        slice_args::backend_call(c, texts, args),
                        "backend",
                        Vec::new(),
                        Vec::new(),
                    )
                }
                Item::Layer(g, spans) => {
                    let graph = &m.graphs()[g as usize];
                    let run = &m.graph_node_spans(graph)[spans.start as usize..spans.end as usize];
                    (
                        slice_args::layer(m, texts, run, args),
                        "layer",
                        Vec::new(),
                        Vec::new(),
                    )
                }
                Item::Op(i) => {
                    let s = &m.slices()[i as usize];
                    let (name, cat) = slice_args::op(m, texts, s, args);
                    let (f, t) = if self.opts.flows && s.graph != NONE_U32 {
                        let next_same = next_op.is_some_and(|next| {
                            matches!(next.item, Item::Op(j)
                                if m.slices()[j as usize].graph == s.graph)
                        });
                        flows.op_flows(m, s.graph, thread, next_same)
                    } else {
                        (Vec::new(), Vec::new())
                    };
                    (name, cat, f, t)
                }
            };
        sink.begin(&Slice {
            start_ns: span.start,
            end_ns: span.end,
            name,
            category,
            args,
            flows: &flow_ids,
            terminating_flows: &terminating,
            node,
        })
    }
}

/// The graph whose thread set is cached, for the operators' flows.
#[derive(Default)]
struct FlowState {
    graph: Option<(u32, Vec<u32>)>,
}

impl FlowState {
    /// The flows of an operator of graph `graph` on thread index `thread`: it continues
    /// its graph's flow when the thread's next operator is of the same graph, else ends
    /// it.
    fn op_flows(
        &mut self,
        model: &TraceModel,
        graph: u32,
        thread: u32,
        next_same: bool,
    ) -> (Vec<u64>, Vec<u64>) {
        if self.graph.as_ref().is_none_or(|(g, _)| *g != graph) {
            self.graph = Some((graph, graph_threads(model, graph)));
        }
        let in_flow = self
            .graph
            .as_ref()
            .is_some_and(|(_, ts)| ts.binary_search(&thread).is_ok());
        if !in_flow {
            return (Vec::new(), Vec::new());
        }
        let id = flow_id(graph, thread);
        if next_same {
            (vec![id], Vec::new())
        } else {
            (Vec::new(), vec![id])
        }
    }
}
