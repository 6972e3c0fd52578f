//! The rows of each table, from one trace's model. Every row carries `run_id`, so the
//! files of many runs read as one table (`read_parquet('DIR/operators/*.parquet')`).

use analyzer::experts::ExpertIteration;
use analyzer::model::{PMC_MISSING, TraceModel};
use trace_format::{TraceFooter, TraceHeader};

use crate::columns::Columns;

/// What a run is, for the `runs` table: the trace's header and footer, and the label
/// the exporter was given.
pub struct RunInfo<'a> {
    /// The run's key in every table.
    pub run_id: &'a str,
    /// A free label (`smollm2/default`), empty if none.
    pub label: &'a str,
    /// The trace file, as given.
    pub trace: &'a str,
    /// The trace's header.
    pub header: &'a TraceHeader,
    /// The trace's footer (absent in a truncated trace).
    pub footer: Option<&'a TraceFooter>,
}

/// `runs`: one row per trace.
pub fn runs(info: &RunInfo<'_>, m: &TraceModel) -> Columns {
    let h = info.header;
    let count = |phase: &str| {
        m.tokens()
            .iter()
            .filter(|t| t.phase.name() == phase)
            .count() as u64
    };
    let settings = serde_json::to_string(&h.settings).unwrap_or_default();
    let first = m.first_ns().unwrap_or(0);
    Columns::default()
        .str("run_id", [info.run_id])
        .str("label", [info.label])
        .str("trace", [info.trace])
        .str("host", [&h.host])
        .str("kernel", [&h.kernel])
        .u32("cpus", [h.cpus])
        .str("target", [&h.target.path])
        .str("target_args", [h.target.args.join(" ")])
        .opt_str("build_id", [h.target.build_id.clone()])
        .u32("pid", [h.target.pid])
        .str("settings", [settings])
        .str("counters", [m.counter_names().join(",")])
        .u64("first_ns", [first])
        .u64("last_ns", [m.last_ns()])
        .i64(
            "start_unix_ns",
            [(first as i64).saturating_add(h.monotonic_to_wall_offset_ns)],
        )
        .u64("calls", [m.tokens().len() as u64])
        .u64("prefill_calls", [count("prefill")])
        .u64("decode_calls", [count("decode")])
        .opt_u64("events_produced", [info.footer.map(|f| f.events_produced)])
        .opt_u64("events_lost", [info.footer.map(|f| f.events_lost)])
        .opt_str("end_reason", [info.footer.map(|f| f.end_reason.clone())])
}

/// `tokens`: one row per decode call (a prefill chunk or a decode step).
pub fn tokens(run_id: &str, m: &TraceModel) -> Columns {
    let t = m.tokens();
    Columns::default()
        .str("run_id", t.iter().map(|_| run_id))
        .u32("call", t.iter().map(|t| t.index))
        .u32("tid", t.iter().map(|t| t.tid))
        .str("phase", t.iter().map(|t| t.phase.name()))
        .u32("n_tokens", t.iter().map(|t| t.n_tokens))
        .u32("pos", t.iter().map(|t| t.pos))
        .u32("sequence_run", t.iter().map(|t| t.run))
        .opt_u32("chunk", t.iter().map(|t| t.chunk))
        .u64("start_ns", t.iter().map(|t| t.start_ns))
        .opt_u64("end_ns", t.iter().map(|t| t.end_ns))
        .u64("dur_ns", t.iter().map(|t| t.dur_ns()))
        .opt_u64("sampled_ns", t.iter().map(|t| t.sampled_ns))
        .i32("ret", t.iter().map(|t| t.ret))
}

/// `graphs`: one row per graph computation.
pub fn graphs(run_id: &str, m: &TraceModel) -> Columns {
    let g = m.graphs();
    Columns::default()
        .str("run_id", g.iter().map(|_| run_id))
        .u32("graph", g.iter().map(|g| g.index))
        .u64("graph_id", g.iter().map(|g| g.graph_id))
        .opt_u32("call", g.iter().map(|g| g.token))
        .u32("tid", g.iter().map(|g| g.tid))
        .u32("n_nodes", g.iter().map(|g| g.n_nodes))
        .str("backend", g.iter().map(|g| g.backend_name()))
        .u32("n_tokens", g.iter().map(|g| g.n_tokens))
        .u32("pos", g.iter().map(|g| g.pos))
        .u64("start_ns", g.iter().map(|g| g.start_ns))
        .opt_u64("end_ns", g.iter().map(|g| g.end_ns))
        .u64("dur_ns", g.iter().map(|g| g.dur_ns()))
}

/// One operator slice: a node on one thread in one graph computation.
struct OpRow {
    graph: u32,
    graph_id: u64,
    call: Option<u32>,
    node: u32,
    tid: u32,
    start_ns: u64,
    end_ns: u64,
    node_start_ns: u64,
    node_end_ns: u64,
    n_threads: u32,
    slice: u32,
}

fn op_rows(m: &TraceModel) -> Vec<OpRow> {
    let mut rows = Vec::new();
    for g in m.graphs() {
        for ns in m.graph_node_spans(g) {
            let ids = &m.node_slice_ids()[ns.slices.start as usize..ns.slices.end as usize];
            for &slice in ids {
                let sl = &m.slices()[slice as usize];
                rows.push(OpRow {
                    graph: g.index,
                    graph_id: g.graph_id,
                    call: g.token,
                    node: ns.node,
                    tid: m.threads()[sl.thread as usize].tid,
                    start_ns: sl.start_ns,
                    end_ns: sl.end_ns,
                    node_start_ns: ns.start_ns,
                    node_end_ns: ns.end_ns,
                    n_threads: ns.n_threads,
                    slice,
                });
            }
        }
    }
    rows
}

/// `operators`: one row per node, thread and graph computation, with the node's shape,
/// its first source when that is a recorded leaf (a weight: name and type), and, where
/// the node is a matrix product, its dimensions.
pub fn operators(run_id: &str, m: &TraceModel) -> Columns {
    let rows = op_rows(m);
    let node = |r: &OpRow| &m.nodes()[r.node as usize];
    let dims = |r: &OpRow| node(r).mul_mat_dims();
    let dtype = |r: &OpRow| {
        let n = node(r);
        n.has_structure
            .then(|| common::engine_abi::DType::from_u32(n.dtype))
            .flatten()
            .map(|d| d.name().to_owned())
    };
    let weight = |r: &OpRow| m.leaf(node(r).src[0]);
    let dtype_name = |t: u32| common::engine_abi::DType::from_u32(t).map(|d| d.name().to_owned());
    let ne = |i: usize| {
        move |r: &OpRow| {
            let n = node(r);
            n.has_structure.then(|| n.ne[i] as u64)
        }
    };
    Columns::default()
        .str("run_id", rows.iter().map(|_| run_id))
        .u32("graph", rows.iter().map(|r| r.graph))
        .u64("graph_id", rows.iter().map(|r| r.graph_id))
        .opt_u32("call", rows.iter().map(|r| r.call))
        .u32("node", rows.iter().map(|r| node(r).index))
        .str("name", rows.iter().map(|r| node(r).name.as_str()))
        .str("op", rows.iter().map(|r| node(r).op_name()))
        .str(
            "class",
            rows.iter().map(|r| {
                m.classes()
                    .get(node(r).class as usize)
                    .map_or("", String::as_str)
            }),
        )
        .i32("layer", rows.iter().map(|r| node(r).layer))
        .opt_str("dtype", rows.iter().map(dtype))
        .opt_str(
            "src0",
            rows.iter().map(|r| weight(r).map(|l| l.name.clone())),
        )
        .opt_str(
            "src0_dtype",
            rows.iter()
                .map(|r| weight(r).and_then(|l| dtype_name(l.dtype))),
        )
        .opt_u64("ne0", rows.iter().map(ne(0)))
        .opt_u64("ne1", rows.iter().map(ne(1)))
        .opt_u64("ne2", rows.iter().map(ne(2)))
        .opt_u64("ne3", rows.iter().map(ne(3)))
        .opt_u64("mm_n", rows.iter().map(|r| dims(r).map(|d| d.n)))
        .opt_u64("mm_m", rows.iter().map(|r| dims(r).map(|d| d.m)))
        .opt_u64("mm_k", rows.iter().map(|r| dims(r).map(|d| d.k)))
        .opt_u64("mm_h", rows.iter().map(|r| dims(r).map(|d| d.h)))
        .u32("tid", rows.iter().map(|r| r.tid))
        .u64("start_ns", rows.iter().map(|r| r.start_ns))
        .u64("end_ns", rows.iter().map(|r| r.end_ns))
        .u64(
            "dur_ns",
            rows.iter().map(|r| r.end_ns.saturating_sub(r.start_ns)),
        )
        .u64("node_start_ns", rows.iter().map(|r| r.node_start_ns))
        .u64("node_end_ns", rows.iter().map(|r| r.node_end_ns))
        .u32("node_threads", rows.iter().map(|r| r.n_threads))
}

/// `operator_counters`: one row per operator slice and counter read on both of its
/// bounds (long form, so runs with different counters share the table).
pub fn operator_counters(run_id: &str, m: &TraceModel) -> Columns {
    let names = m.counter_names();
    let (mut graph, mut node, mut tid, mut counter, mut value) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in op_rows(m) {
        let Some(pmc) = m.slice_pmc(&m.slices()[r.slice as usize]) else {
            continue;
        };
        for (name, &v) in names.iter().zip(pmc) {
            if v == PMC_MISSING {
                continue;
            }
            graph.push(r.graph);
            node.push(m.nodes()[r.node as usize].index);
            tid.push(r.tid);
            counter.push(name.as_str());
            value.push(v);
        }
    }
    Columns::default()
        .str("run_id", graph.iter().map(|_| run_id))
        .u32("graph", graph)
        .u32("node", node)
        .u32("tid", tid)
        .str("counter", counter)
        .u64("value", value)
}

/// `threads`: one row per thread the trace saw, with its time per scheduler state.
pub fn threads(run_id: &str, m: &TraceModel) -> Columns {
    let th = m.threads();
    let states: Vec<[u64; 3]> = th.iter().map(|t| t.states.time_by_state()).collect();
    Columns::default()
        .str("run_id", th.iter().map(|_| run_id))
        .u32("tid", th.iter().map(|t| t.tid))
        .opt_u32("pid", th.iter().map(|t| t.pid))
        .str("comm", th.iter().map(|t| t.comm.as_str()))
        .bool("is_main", th.iter().map(|t| t.is_main))
        .bool("is_target", th.iter().map(|t| m.is_target_thread(t)))
        .u64("op_slices", th.iter().map(|t| t.op_slices))
        .u64("op_busy_ns", th.iter().map(|t| t.op_busy_ns))
        .u64("running_ns", states.iter().map(|s| s[0]))
        .u64("runnable_ns", states.iter().map(|s| s[1]))
        .u64("sleeping_ns", states.iter().map(|s| s[2]))
}

/// `counters`: the counters a run opened, in the order of `operator_counters`.
pub fn counters(run_id: &str, header: &TraceHeader) -> Columns {
    let c = &header.counters;
    Columns::default()
        .str("run_id", c.iter().map(|_| run_id))
        .u32("slot", (0..c.len() as u32).collect::<Vec<_>>())
        .str("counter", c.iter().map(|c| c.name.as_str()))
        .str("source", c.iter().map(|c| c.source.as_str()))
        .u32("perf_type", c.iter().map(|c| c.perf_type))
        .u64("perf_config", c.iter().map(|c| c.perf_config))
}

/// `experts`: for a mixture-of-experts model, one row per layer and iteration (a prefill
/// chunk or a decode step, seed 002 Fig 13): the experts the router picked, how many
/// decode steps ago each was last active (its reuse distance), and the time and major
/// page faults of the layer's expert products. Empty for a dense model.
pub fn experts(run_id: &str, m: &TraceModel) -> Columns {
    let stats = analyzer::experts::compute(m).unwrap_or_default();
    let rows: Vec<(i32, &ExpertIteration)> = stats
        .layers
        .iter()
        .flat_map(|l| l.iterations.iter().map(move |i| (l.layer, i)))
        .collect();
    let join = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<_>>().join(",");
    Columns::default()
        .str("run_id", rows.iter().map(|_| run_id))
        .u32("graph", rows.iter().map(|(_, i)| i.graph))
        .u64("graph_id", rows.iter().map(|(_, i)| i.graph_id))
        .i32("layer", rows.iter().map(|(l, _)| *l))
        .u32("n_tokens", rows.iter().map(|(_, i)| i.n_tokens))
        .opt_u32("decode_step", rows.iter().map(|(_, i)| i.decode_step))
        .str(
            "expert_ids",
            rows.iter()
                .map(|(_, i)| join(&mut i.ids.iter().map(i32::to_string))),
        )
        .str(
            "reuse_distances",
            rows.iter().map(|(_, i)| {
                join(
                    &mut i
                        .reuse_distance
                        .iter()
                        .map(|d| d.map_or_else(|| "new".to_owned(), |d| d.to_string())),
                )
            }),
        )
        .u32(
            "new_experts",
            rows.iter()
                .map(|(_, i)| i.reuse_distance.iter().filter(|d| d.is_none()).count() as u32),
        )
        .opt_f64("mean_distance", rows.iter().map(|(_, i)| i.mean_distance))
        .u64("time_ns", rows.iter().map(|(_, i)| i.time_ns))
        .opt_u64("major_faults", rows.iter().map(|(_, i)| i.major_faults))
}
