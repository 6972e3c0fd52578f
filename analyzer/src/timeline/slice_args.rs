//! What each slice of the timeline says: its name, category and arguments, once for
//! both encoders.

use std::borrow::Cow;

use crate::{
    backends::{GpuSlice, TokenSplit},
    model::{
        BackendCall, GraphSpan, NONE_U32, NodeSpan, OpSlice, PMC_MISSING, PhaseSpan, SchedState,
        StateSlice, TokenSpan, TraceModel, backend_name,
    },
};

use super::{Arg, ArgValue, SliceName};

/// The texts slices repeat, made once: each node's op name and shape, each backend's
/// name. Bounded by the distinct nodes and backends, not by the trace's length.
#[derive(Debug)]
pub struct NodeTexts {
    ops: Vec<String>,
    shapes: Vec<String>,
    backends: Vec<(u32, String)>,
    /// `layer 0`, `layer 1`, ... up to the model's last layer.
    layers: Vec<String>,
}

impl NodeTexts {
    /// The texts of `model`'s nodes and backends.
    pub fn new(model: &TraceModel) -> NodeTexts {
        let mut kinds: Vec<u32> = model
            .graphs()
            .iter()
            .map(|g| g.backend_kind)
            .chain(model.backend_calls().iter().filter_map(|c| c.backend_kind))
            .collect();
        kinds.sort_unstable();
        kinds.dedup();
        NodeTexts {
            ops: model.nodes().iter().map(|n| n.op_name()).collect(),
            shapes: model.nodes().iter().map(|n| n.shape()).collect(),
            backends: kinds.into_iter().map(|k| (k, backend_name(k))).collect(),
            layers: (0..=model.nodes().iter().map(|n| n.layer).max().unwrap_or(-1))
                .map(|l| format!("layer {l}"))
                .collect(),
        }
    }

    /// Node `node`'s op name.
    pub fn op(&self, node: u32) -> &str {
        self.ops.get(node as usize).map_or("?", String::as_str)
    }

    /// Node `node`'s shape.
    pub fn shape(&self, node: u32) -> &str {
        self.shapes.get(node as usize).map_or("?", String::as_str)
    }

    /// The name of backend kind `kind` (of a graph or backend call of the model).
    pub fn backend(&self, kind: u32) -> &str {
        self.backends
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or("?", |(_, n)| n.as_str())
    }
}

/// A decode call's slice: name and args (with its time split in a split pass).
pub fn token<'a>(
    t: &'a TokenSpan,
    split: Option<&'a TokenSplit>,
    args: &mut Vec<Arg<'a>>,
) -> SliceName<'a> {
    args.extend([
        Arg::uint("index", u64::from(t.index)),
        Arg::uint("n_tokens", u64::from(t.n_tokens)),
        Arg::uint("pos", u64::from(t.pos)),
        Arg::str("phase", t.phase.name()),
        Arg::int("ret", i64::from(t.ret)),
    ]);
    if t.seqs.known() {
        // How many sequences the batch carries (llama-server's slots), and which of ids
        // 0..8.
        args.extend([
            Arg::uint("n_seqs", u64::from(t.seqs.n)),
            Arg::uint("seq_mask", u64::from(t.seqs.mask)),
        ]);
        if t.seqs.lower_bound {
            args.push(Arg::uint("n_seqs_lower_bound", 1));
        }
    }
    if let Some(ts) = split {
        args.extend([
            Arg::uint("sync_wait_ns", ts.sync_ns),
            Arg::uint("copy_ns", ts.copy_ns),
            Arg::uint("kv_io_ns", ts.kv_io_ns),
            Arg::uint("kv_bytes_out", ts.kv_bytes_out),
            Arg::uint("kv_bytes_in", ts.kv_bytes_in),
        ]);
        for (b, &ns) in &ts.compute_ns {
            args.push(Arg {
                name: Cow::Owned(format!("{b}_compute_ns")),
                value: ArgValue::Uint(ns),
            });
        }
    }
    SliceName::Unique(t.label())
}

/// A graph computation's slice; `split_pass` names its backend split and size.
pub fn graph<'a>(
    g: &'a GraphSpan,
    texts: &'a NodeTexts,
    split_pass: bool,
    args: &mut Vec<Arg<'a>>,
) -> SliceName<'a> {
    let backend = texts.backend(g.backend_kind);
    args.extend([
        Arg::uint("graph_id", g.graph_id),
        Arg::uint("n_nodes", u64::from(g.n_nodes)),
        Arg::str("backend", backend),
        Arg::int("backend_id", i64::from(g.backend_id)),
        Arg::uint("n_tokens", u64::from(g.n_tokens)),
        Arg::uint("pos", u64::from(g.pos)),
    ]);
    // Graph ids number the computations: the name is unique.
    SliceName::Unique(if split_pass {
        format!(
            "graph {} ({backend} split, {} nodes)",
            g.graph_id, g.n_nodes
        )
    } else {
        format!("graph {} ({backend})", g.graph_id)
    })
}

/// A phase call's slice.
pub fn phase<'a>(p: &'a PhaseSpan, args: &mut Vec<Arg<'a>>) -> SliceName<'a> {
    args.extend([
        Arg::uint("arg", u64::from(p.arg)),
        Arg::int("ret", i64::from(p.ret)),
    ]);
    SliceName::Shared(p.kind.name())
}

/// A backend call's slice (a sync, copy, transfer, GPU submission or fence wait).
pub fn backend_call<'a>(
    c: &'a BackendCall,
    texts: &'a NodeTexts,
    args: &mut Vec<Arg<'a>>,
) -> SliceName<'a> {
    args.extend([
        Arg::str("kind", c.kind.name()),
        Arg::str("backend", c.backend_kind.map_or("", |k| texts.backend(k))),
        Arg::uint("bytes", c.bytes),
    ]);
    SliceName::Unique(c.label())
}

/// An operator slice: the node's name, its op type as category, and its args (node,
/// graph, backend, counter deltas).
pub fn op<'a>(
    model: &'a TraceModel,
    texts: &'a NodeTexts,
    s: &OpSlice,
    args: &mut Vec<Arg<'a>>,
) -> (SliceName<'a>, &'a str) {
    let n = &model.nodes()[s.node as usize];
    args.extend([
        Arg::str("op", texts.op(s.node)),
        Arg::str("name", &n.name),
        Arg::int("layer", i64::from(n.layer)),
        Arg::str("shape", texts.shape(s.node)),
        Arg::uint("index", u64::from(n.index)),
    ]);
    if s.graph != NONE_U32 {
        args.push(Arg::uint("graph", u64::from(s.graph)));
        let backend = model
            .graphs()
            .get(s.graph as usize)
            .map_or("?", |g| texts.backend(g.backend_kind));
        args.push(Arg::str("backend", backend));
    }
    if let Some(deltas) = model.slice_pmc(s) {
        for (name, &v) in model.counter_names().iter().zip(deltas) {
            if v != PMC_MISSING {
                args.push(Arg {
                    name: Cow::Borrowed(name),
                    value: ArgValue::Uint(v),
                });
            }
        }
    }
    (SliceName::Shared(&n.name), texts.op(s.node))
}

/// A layer's slice: the node spans `run` of one layer of a graph (all threads).
pub fn layer<'a>(
    model: &TraceModel,
    texts: &'a NodeTexts,
    run: &[NodeSpan],
    args: &mut Vec<Arg<'a>>,
) -> SliceName<'a> {
    let layer = run
        .first()
        .map_or(-1, |s| model.nodes()[s.node as usize].layer);
    args.extend([
        Arg::int("layer", i64::from(layer)),
        Arg::uint("nodes", run.len() as u64),
        Arg::uint("busy_ns", run.iter().map(|s| s.busy_ns).sum()),
    ]);
    let name = usize::try_from(layer)
        .ok()
        .and_then(|l| texts.layers.get(l))
        .map_or("layer ?", String::as_str);
    SliceName::Shared(name)
}

/// A scheduler-state slice: `running cpu N`, `runnable`, `sleeping`.
pub fn sched_state<'a>(s: &StateSlice, args: &mut Vec<Arg<'a>>) -> String {
    args.push(Arg::int("cpu", i64::from(s.cpu as i32)));
    match s.state {
        SchedState::Running => format!("running cpu {}", s.cpu),
        st => st.name().to_owned(),
    }
}

/// A node's execution on a GPU lane.
pub fn gpu<'a>(g: &'a GpuSlice<'a>, args: &mut Vec<Arg<'a>>) -> SliceName<'a> {
    args.push(Arg::str("op", &g.op));
    SliceName::Shared(g.name)
}

/// One of the CPU's waits for an accel (the `BACKEND_SYNC` node `node`).
pub fn sync_wait<'a>(node: &'a str, args: &mut Vec<Arg<'a>>) -> SliceName<'a> {
    args.push(Arg::str("node", node));
    SliceName::Shared("wait for accel")
}
