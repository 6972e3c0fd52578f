//! Root-only end-to-end tests of `profinfer record` on the in-repo engine (issue 3).
//! Not root → each test prints a loud banner and returns.

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use common::{
    engine_abi::{OP_TIMES_CHUNK, symbols},
    event::{EventKind, OP_DETAIL_STRUCTURE, OP_SPAN_START_AT_RELEASE, OpSpanEvent},
};
use trace_format::{Event, TraceReader};

#[macro_use]
mod support;

use support::{
    engine_and_model, events, last_descs, node_descs, op_spans, profinfer, record, trace_path,
};

#[test]
fn record_tiny_model_two_threads() {
    require_root!();
    let out = trace_path("basic");
    // Enough decode steps that the collector reads the leaf nodes (at the end of the
    // prefill graph) while the engine still runs, even on a busy machine. Statistics on
    // throughout: exact program run counts.
    let tokens = 32;
    // The engine's own op spans too (`--self-profile`): the truth the analyzer's
    // inferred starts are checked against below.
    let self_profile = out.with_extension("selfprofile.jsonl");
    let (_, model_file) = engine_and_model();
    let n = tokens.to_string();
    support::record_engine_with(
        "basic",
        model_file,
        &["--probe-stats-always"],
        &[
            "--self-profile",
            self_profile.to_str().expect("temp paths are UTF-8"),
            "-p",
            "hello world",
            "-n",
            &n,
            "-t",
            "2",
            "--ignore-eos",
        ],
    );
    let r = TraceReader::open(&out).expect("trace opens");
    assert_eq!(r.truncated_at(), None);
    let footer = r.footer().expect("clean end has a footer").clone();
    assert_eq!(footer.events_lost, 0);
    assert_eq!(footer.events_produced, footer.events_written);
    let pid = r.header().target.pid;
    assert!(r.header().counters.is_empty(), "counters only where asked");
    let settings = &r.header().settings;
    assert_eq!(
        settings.get("exact_spans").map(String::as_str),
        Some("false")
    );
    let evs = events(&r);

    // Token level: entries and exits pair up; prefill batches cover the prompt; decode
    // steps are one token each and, with the first token sampled from prefill, N - 1.
    let decodes: Vec<_> = evs
        .iter()
        .filter_map(|e| {
            if let Event::Decode(d) = e {
                Some(*d)
            } else {
                None
            }
        })
        .collect();
    let enters = decodes.iter().filter(|d| !d.header.is_exit()).count();
    let exits: Vec<_> = decodes.iter().filter(|d| d.header.is_exit()).collect();
    assert_eq!(enters, exits.len());

    // Probe cost: the kernel's run counts of the programs match the records they wrote
    // (nothing lost), and the collector's CPU time was measured. One probe hit per table
    // of up to 32 node ends (the engine takes them itself while traced) and one per graph
    // and thread; neither the entry point nor each node's end is probed.
    let cost = &footer.cost;
    assert!(
        cost.stats_enabled,
        "root can enable BPF run-time statistics"
    );
    assert_eq!(cost.stats_permille, Some(1000), "statistics on throughout");
    let runs = |name: &str| support::program_runs(&footer, name);
    assert_eq!(runs("engine_decode") as usize, enters, "{cost:?}");
    assert_eq!(runs("engine_decode_ret") as usize, exits.len(), "{cost:?}");
    let spans = op_spans(&evs);
    let graph_threads = evs
        .iter()
        .filter(|e| matches!(e, Event::GraphThread(_)))
        .count();
    assert_eq!(
        runs("engine_op_done"),
        0,
        "node ends come batched: {cost:?}"
    );
    let tables = runs("engine_op_times") as usize;
    assert!(
        tables * OP_TIMES_CHUNK >= spans.len() && tables < spans.len() / 4,
        "{tables} tables for {} spans: {cost:?}",
        spans.len()
    );
    assert_eq!(
        runs("engine_graph_thread") as usize,
        graph_threads,
        "{cost:?}"
    );
    assert_eq!(
        runs("engine_op_compute"),
        0,
        "the entry point is not probed"
    );
    assert!(cost.run_ns() > 0 && cost.collector_cpu_ns > 0 && cost.wall_ns > 0);
    assert!(
        cost.target_cpu_ns.is_some_and(|ns| ns > 0),
        "the target's CPU time"
    );
    let steps = exits.iter().filter(|d| d.n_tokens == 1).count();
    let prefill = exits.iter().filter(|d| d.n_tokens > 1).count();
    assert!(prefill >= 1, "a prefill batch");
    assert!(
        steps == tokens as usize - 1 || steps == tokens as usize,
        "decode steps {steps} for {tokens} generated tokens"
    );
    assert!(exits.iter().all(|d| d.ret == 0));

    // Graph and operator level: within each graph computation, every computed node ends
    // once on each of the two threads (one 32-byte span each, its start left to the
    // barrier before it), and each thread begins the graph once.
    let descs = last_descs(&evs);
    let mut graphs = 0;
    let mut current: Option<u32> = None; // n_nodes
    let mut spans_in_graph: Vec<OpSpanEvent> = Vec::new();
    let mut begins_in_graph: HashSet<u32> = HashSet::new();
    let mut engine_tids: HashSet<u32> = HashSet::new();
    for e in &evs {
        match e {
            Event::Graph(g) if !g.header.is_exit() => {
                current = Some(g.n_nodes);
                spans_in_graph.clear();
                begins_in_graph.clear();
            }
            Event::Graph(g) => {
                let n_nodes = current.take().expect("graph exit after entry");
                assert_eq!(
                    spans_in_graph.len(),
                    n_nodes as usize * 2,
                    "spans = nodes × threads in graph {}",
                    g.graph_id
                );
                let mut per_thread: HashMap<u32, usize> = HashMap::new();
                for s in &spans_in_graph {
                    *per_thread.entry(s.tid).or_default() += 1;
                }
                assert!(
                    per_thread.values().all(|&n| n == n_nodes as usize),
                    "every thread ends every node once: {per_thread:?}"
                );
                let iths: HashSet<u32> = spans_in_graph.iter().map(OpSpanEvent::ith).collect();
                assert_eq!(iths, HashSet::from([0, 1]), "two worker threads");
                assert_eq!(
                    begins_in_graph,
                    per_thread.keys().copied().collect(),
                    "each thread begins the graph"
                );
                graphs += 1;
            }
            Event::GraphThread(t) => {
                assert!(current.is_some(), "a thread begins inside a graph");
                assert_eq!(t.header.pid, pid);
                assert!(begins_in_graph.insert(t.header.tid), "once per graph");
            }
            Event::OpSpan(s) => {
                engine_tids.insert(s.tid);
                assert!(current.is_some(), "op inside a graph computation");
                assert_ne!(s.flags & OP_SPAN_START_AT_RELEASE, 0, "end probed only");
                let d = descs.get(&s.node_addr).expect("every node is described");
                assert!(!d.name_str().is_empty(), "node has a name");
                assert_ne!(d.detail & OP_DETAIL_STRUCTURE, 0, "structure on");
                spans_in_graph.push(*s);
            }
            _ => {}
        }
    }
    assert_eq!(graphs, exits.len(), "one graph per decode call");
    // Descriptions go out once per graph shape: the prefill graph's and the first decode
    // graph's, not again for every step.
    let n_descs = node_descs(&evs).len();
    let nodes_per_step = spans.len() / 2 / graphs;
    assert!(
        n_descs <= 3 * nodes_per_step,
        "{n_descs} descriptions for {graphs} graphs of ~{nodes_per_step} nodes"
    );

    // The analyzer's slices and node spans against the engine's own op spans.
    let (model, _, _) = analyzer::ingest::load(&out, &analyzer::NoProgress).expect("loads");
    check_slices_against_self_profile(&model, &self_profile);

    // Scheduler level: only the engine's threads.
    let mut thread_set: HashSet<u32> = HashSet::from([pid]);
    let mut switches = 0;
    for e in &evs {
        match e {
            Event::Task(t) if t.header.kind == EventKind::TaskNew as u32 => {
                thread_set.insert(t.child_tid);
            }
            Event::SchedSwitch(s) => {
                assert!(
                    thread_set.contains(&s.prev_tid) || thread_set.contains(&s.next_tid),
                    "switch {} → {} involves no engine thread",
                    s.prev_tid,
                    s.next_tid
                );
                switches += 1;
            }
            Event::SchedWakeup(w) => assert!(thread_set.contains(&w.target_tid)),
            _ => {}
        }
    }
    assert!(switches > 0, "scheduler events recorded");
    assert!(
        engine_tids.is_subset(&thread_set),
        "op threads are in the thread set"
    );
    check_op_params_and_leaves(&evs, &out);
    std::fs::remove_file(&out).ok();
    std::fs::remove_file(&self_profile).ok();
}

/// The engine's op spans of a run (`--self-profile`, the trace's clock) by graph: the
/// graph's own (start, end) and, per computed node in execution order, its index and
/// each thread's body (tid → (start, end)).
type EngineGraphs = HashMap<u64, ((u64, u64), BTreeMap<u32, HashMap<u32, (u64, u64)>>)>;

/// Reads [`EngineGraphs`] from a self-profile; also returns its count of op records.
fn engine_graphs(self_profile: &Path) -> (EngineGraphs, usize) {
    let text = std::fs::read_to_string(self_profile).expect("self-profile written");
    let mut graphs: EngineGraphs = HashMap::new();
    let mut n_ops = 0;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let num = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("`{k}` in {v}"));
        let span = (num("start_ns"), num("end_ns"));
        match v["level"].as_str() {
            Some("graph") => graphs.entry(num("graph")).or_default().0 = span,
            Some("op") => {
                let nodes = &mut graphs.entry(num("graph")).or_default().1;
                let threads = nodes.entry(num("node") as u32).or_default();
                assert!(
                    threads.insert(num("tid") as u32, span).is_none(),
                    "one record per node and thread: {v}"
                );
                n_ops += 1;
            }
            _ => {}
        }
    }
    (graphs, n_ops)
}

/// The analyzer's slices and node spans of a two-thread run against the engine's own
/// spans (`--self-profile`). Only the nodes' ends are probed, so every slice's start is
/// the analyzer's inference: the barrier's release after the node before (that node's
/// latest end), or where the thread began the graph. The engine times each thread's
/// body inside the node's entry point, takes the node's end after it, and its threads
/// meet at a barrier between nodes. So each slice and each node span (first start to
/// last end of its slices), per graph in node order:
/// - contains the engine's body on its thread (every thread's, for the node span);
/// - starts no earlier than the latest body end of the node before it on any thread (for
///   a graph's first node, the engine's start of the graph): a start inferred from a node
///   too early — the release before the previous node — fails here;
/// - ends no later than the earliest body start of the node after it on any thread (for
///   the last node, the engine's end of the graph): an end taken one node late fails
///   here, a start inferred one node late fails the containment.
///
/// One slice per engine record, none left over either way.
fn check_slices_against_self_profile(model: &analyzer::TraceModel, self_profile: &Path) {
    let (engine, n_ops) = engine_graphs(self_profile);
    let nodes = model.nodes();
    let threads = model.threads();
    let mut n_slices = 0;
    for g in model.graphs() {
        let node_spans = model.graph_node_spans(g);
        assert_eq!(node_spans.len(), g.n_nodes as usize, "graph {}", g.graph_id);
        let (graph_span, engine_nodes) = engine
            .get(&g.graph_id)
            .unwrap_or_else(|| panic!("graph {} is not in the self-profile", g.graph_id));
        assert!(
            graph_span.1 > 0,
            "graph {}: the engine's graph record",
            g.graph_id
        );
        assert_eq!(engine_nodes.len(), node_spans.len(), "graph {}", g.graph_id);
        let order: Vec<_> = engine_nodes.iter().collect();
        let latest_end = |k: usize| order[k].1.values().map(|s| s.1).max().unwrap_or(0);
        let earliest_start = |k: usize| order[k].1.values().map(|s| s.0).min().unwrap_or(0);
        for ns in node_spans {
            let n = &nodes[ns.node as usize];
            let what = format!("graph {} node {} ({})", g.graph_id, n.index, n.name);
            let k = order
                .binary_search_by_key(&n.index, |(i, _)| **i)
                .unwrap_or_else(|_| panic!("{what}: not in the self-profile"));
            let (before, before_is) = match k.checked_sub(1) {
                Some(prev) => (latest_end(prev), "end of the node before"),
                None => (graph_span.0, "start of the graph"),
            };
            let (after, after_is) = if k + 1 < order.len() {
                (earliest_start(k + 1), "start of the node after")
            } else {
                (graph_span.1, "end of the graph")
            };
            assert_eq!(ns.n_threads, 2, "{what}");
            let within = |label: String, (start, end): (u64, u64), body: (u64, u64)| {
                assert!(
                    before <= start,
                    "{label}: starts at {start}, before the engine's {before_is} ({before})"
                );
                assert!(
                    start <= body.0 && body.1 <= end,
                    "{label}: [{start}, {end}] does not contain the engine's [{}, {}]",
                    body.0,
                    body.1
                );
                assert!(
                    end <= after,
                    "{label}: ends at {end}, after the engine's {after_is} ({after})"
                );
            };
            within(
                format!("{what}, node span"),
                (ns.start_ns, ns.end_ns),
                (earliest_start(k), latest_end(k)),
            );
            for sl in model.span_slices(ns) {
                let tid = threads[sl.thread as usize].tid;
                let body = *order[k]
                    .1
                    .get(&tid)
                    .unwrap_or_else(|| panic!("{what}: no engine record on thread {tid}"));
                within(
                    format!("{what}, thread {tid}"),
                    (sl.start_ns, sl.end_ns),
                    body,
                );
                n_slices += 1;
            }
        }
    }
    assert_eq!(
        n_slices, n_ops,
        "one analyzer slice per op record of the engine"
    );
}

/// `--pmc`: counters read at both bounds of every span (the entry point is probed too),
/// each span carrying its thread's counter deltas. A thread's task-clock over a span
/// cannot exceed the span's wall time.
#[test]
fn counters_are_read_at_both_ends_of_every_span() {
    require_root!();
    let out = trace_path("pmc");
    record(&out, &["--pmc", "--probe-stats-always"], 16);
    let r = TraceReader::open(&out).expect("trace opens");
    let footer = r.footer().expect("footer").clone();
    assert_eq!(footer.events_lost, 0);
    assert_eq!(
        r.header().settings.get("exact_spans").map(String::as_str),
        Some("true"),
        "--pmc implies exact spans"
    );
    let task_clock = r
        .header()
        .counters
        .iter()
        .position(|c| c.name == "task-clock")
        .expect("task-clock recorded");
    let evs = events(&r);
    let runs = |name: &str| support::program_runs(&footer, name);
    let spans: Vec<_> = evs
        .iter()
        .filter_map(|e| match e {
            Event::OpSpanPmc(s) => Some(*s),
            _ => None,
        })
        .collect();
    let plain = evs.iter().filter(|e| matches!(e, Event::OpSpan(_))).count();
    assert!(spans.len() > 100, "spans with counters ({})", spans.len());
    assert_eq!(runs("engine_op_compute") as usize, spans.len() + plain);
    assert_eq!(runs("engine_op_done_exact") as usize, spans.len() + plain);
    let mut checked = 0;
    let mut over = 0;
    for s in &spans {
        assert_eq!(s.span.flags & OP_SPAN_START_AT_RELEASE, 0, "start probed");
        if s.pmc_ok & (1 << task_clock) == 0 {
            continue;
        }
        let cpu_ns = s.delta[task_clock];
        let wall_ns = s.span.dur_ns();
        // Thread CPU time cannot exceed wall time. Allowance: the timestamp and the
        // counter reads are separate steps of the probe (a preemptible uprobe program
        // can be interrupted between them). Rarely (a few ops in a thousand, on this VM)
        // the task-clock delta runs 10-75 µs ahead of the timestamps with no context
        // switch in between; those are counted, not failed one by one. Time from another
        // thread would show on many ops.
        const READ_SKEW_NS: u64 = 10_000;
        if cpu_ns > wall_ns + READ_SKEW_NS {
            assert!(
                cpu_ns <= wall_ns + 200_000,
                "task-clock {cpu_ns} far over wall {wall_ns}"
            );
            over += 1;
        }
        checked += 1;
    }
    assert!(checked > 100, "counter deltas present ({checked})");
    assert!(
        over * 200 <= checked.max(200),
        "{over} of {checked} operators with task-clock over wall time"
    );
    std::fs::remove_file(&out).ok();
}

/// On a real run: every `MUL_MAT` description carries its op params, and its
/// `K` (`op_params[4]`) is the inner dimension `ne[0]` of the weight it reads — as the
/// collector read that weight's node from the engine's memory (`leaf_node` records,
/// which also name the weights as the engine does, `engine/src/model/weights.rs`). The
/// analyzer's DAG then labels the weight leaves with those recorded names.
fn check_op_params_and_leaves(evs: &[Event], trace: &std::path::Path) {
    use common::{
        engine_abi::{NODE_FLAG_WEIGHT, OpType},
        event::OP_DETAIL_OP_PARAMS,
    };
    let leaves = support::leaves(evs);
    let computed: HashSet<u64> = op_spans(evs).iter().map(|s| s.node_addr).collect();
    assert!(
        leaves.keys().all(|a| !computed.contains(a)),
        "no computed node is recorded as a leaf"
    );
    // tiny-llama: n_embd 128, n_ff 352 (engine/src/presets.rs), 2 layers.
    const N_EMBD: i64 = 128;
    const N_FF: i64 = 352;
    const N_LAYER: usize = 2;
    let mut checked = 0;
    let mut weight_names: HashSet<&str> = HashSet::new();
    for op in node_descs(evs) {
        if op.op != OpType::MulMat as u32 {
            continue;
        }
        assert_ne!(
            op.detail & OP_DETAIL_OP_PARAMS,
            0,
            "{}: op params recorded",
            op.name_str()
        );
        let k = i64::from(op.structure.op_params[4]);
        let (m, h) = (op.structure.op_params[2], op.structure.op_params[3]);
        assert!(m >= 1 && h >= 1, "{}: M {m}, H {h}", op.name_str());
        let w = op.structure.src[0];
        let leaf = leaves
            .get(&w)
            .unwrap_or_else(|| panic!("{}: src0 {w:#x} has no leaf record", op.name_str()));
        if leaf.node_flags & NODE_FLAG_WEIGHT != 0 {
            assert_eq!(k, leaf.ne[0], "{}: K = the weight's ne[0]", op.name_str());
            assert!(k == N_EMBD || k == N_FF, "{}: K {k}", op.name_str());
            weight_names.insert(leaf.name_str());
            checked += 1;
        }
    }
    assert!(checked > 0, "matrix products of weights recorded");
    for l in 0..N_LAYER {
        for t in [
            "attn_q",
            "attn_k",
            "attn_v",
            "attn_output",
            "ffn_gate",
            "ffn_up",
            "ffn_down",
        ] {
            let name = format!("blk.{l}.{t}.weight");
            assert!(
                weight_names.contains(name.as_str()),
                "{name} among {weight_names:?}"
            );
        }
    }

    // The analyzer names the DAG's weight leaves from the records, not by guessing.
    let (model, _, _) = analyzer::ingest::load(trace, &analyzer::NoProgress).expect("trace loads");
    let d = analyzer::dag::build(&model, analyzer::IterSelector::FirstDecode).expect("dag");
    let mut named = 0;
    for e in d.dag.edge_indices() {
        let (a, b) = d.dag.edge_endpoints(e).expect("edge");
        let (src, n) = (&d.dag[a], &d.dag[b]);
        if n.op != "MUL_MAT" || !src.is_leaf() || d.dag[e].slot != 0 {
            continue;
        }
        let rec = model.leaf(src.addr).expect("the leaf was recorded");
        assert_eq!(src.name, rec.name, "{}: recorded name", n.name);
        if rec.is_weight() {
            assert!(
                src.name.starts_with(&format!("blk.{}.", n.layer)) || n.layer < 0,
                "{} reads {}",
                n.name,
                src.name
            );
            assert_eq!(src.dtype.as_deref(), Some("q8_0"), "{}", src.name);
            named += 1;
        }
    }
    // 7 weight products per layer and the output projection.
    assert_eq!(named, 7 * N_LAYER + 1, "weight leaves of the DAG");
}

#[test]
fn small_ring_buffer_overflows_and_every_loss_is_counted() {
    require_root!();
    let out = trace_path("stress");
    // Counters per operator make every span a ~100-byte record and both bounds probed: the
    // tiny model's ~400 operators per ms fill a 4 KiB ring in well under the collector's
    // wake-up, even when it is woken at a quarter full (32-byte spans alone could be
    // drained in time on an idle machine).
    record(&out, &["--ring-bytes", "4096", "--pmc"], 64);
    let r = TraceReader::open(&out).expect("trace opens");
    let f = r.footer().expect("footer").clone();
    assert!(f.events_lost > 0, "a 4 KiB ring must overflow");
    assert_eq!(f.events_produced, f.events_written + f.events_lost);
    assert_eq!(f.lost_per_cpu.iter().sum::<u64>(), f.events_lost);
    let probe_records = events(&r).iter().filter(|e| e.header().kind < 60).count() as u64;
    assert_eq!(probe_records, f.events_written, "footer matches the file");
    let loss_records: u64 = events(&r)
        .iter()
        .filter_map(|e| {
            if let Event::Loss(l) = e {
                Some(l.lost)
            } else {
                None
            }
        })
        .sum();
    assert_eq!(loss_records, f.events_lost);
    std::fs::remove_file(&out).ok();
}

#[test]
fn qos_switches_operator_probes_off_and_detaches_them() {
    require_root!();
    let out = trace_path("qos");
    // Node ends probed one by one (a program per operator end, whose detach is the same
    // drop of the probe's fd as the tracer's death: `the_engine_takes_node_ends_only_
    // while_traced_even_if_the_tracer_dies`). What the switch saves is a speed claim,
    // measured in `cargo xtask bench` (docs/performance.md), not here: on 2 vCPUs the
    // steps around the detach (the kernel rewriting the probed pages) were once 30×
    // slower than those before the switch.
    record(
        &out,
        &[
            "--qos-min-tps",
            "1000000",
            "--probe-stats-always",
            "--per-node-ends",
        ],
        64,
    );
    let r = TraceReader::open(&out).expect("trace opens");
    let evs = events(&r);
    let switch_idx = evs
        .iter()
        .position(|e| matches!(e, Event::QosSwitch(_)))
        .expect("a QoS switch is in the trace");
    let Event::QosSwitch(q) = &evs[switch_idx] else {
        unreachable!()
    };
    assert_ne!(q.levels_before & common::control::LEVEL_OP, 0);
    assert_eq!(q.levels_after & common::control::LEVEL_OP, 0);
    // Promptly, in steps: the trace holds the records in the order the collector drained
    // them, its switch written right after the drain that brought the deciding step.
    // Replaying the controller (same settings as `--qos-min-tps`) on the trace's decode
    // steps in that order, its first decision comes at the READY_STEPS-th step (window
    // and hold full, any rate below 10^6 tokens/s), and the recorded switch is that
    // decision: the same rate, written after that step. So the collector switched at the
    // first step it could, not later. How long that takes in wall time is the collector's
    // drain latency (scheduling, on 2 busy vCPUs several ms), not asserted here; what the
    // switch saves in speed is measured in `cargo xtask bench` (docs/performance.md).
    const READY_STEPS: usize = 4;
    let mut replay = tracer_user::qos::QosController::new(tracer_user::qos::QosSettings {
        min_tps: 1_000_000.0,
        ..Default::default()
    });
    let mut steps_seen = 0;
    let (decided_at, decision) = evs
        .iter()
        .enumerate()
        .find_map(|(i, e)| match e {
            Event::Decode(d) if d.header.is_exit() && d.n_tokens == 1 => {
                steps_seen += 1;
                match replay.on_decode_step(d.header.ts_ns) {
                    tracer_user::qos::QosDecision::Keep => None,
                    decision => Some((i, decision)),
                }
            }
            _ => None,
        })
        .expect("the replayed controller decides within the run");
    let tracer_user::qos::QosDecision::SwitchOff { tps } = decision else {
        panic!("the first decision switches off: {decision:?}")
    };
    assert_eq!(steps_seen, READY_STEPS, "decided at step {steps_seen}");
    assert!(
        decided_at < switch_idx,
        "the switch (record {switch_idx}) follows the deciding step (record {decided_at})"
    );
    assert_eq!(
        q.tps_milli,
        (tps * 1000.0) as u64,
        "the recorded switch is the decision at step {READY_STEPS} ({tps:.1} tokens/s)"
    );
    let steps_before = evs[..switch_idx]
        .iter()
        .filter(|e| matches!(e, Event::Decode(d) if d.header.is_exit() && d.n_tokens == 1))
        .count();
    eprintln!(
        "QoS switch after {steps_before} decode steps in the trace ({} drained with the deciding one)",
        steps_before - READY_STEPS
    );
    // Durations of decode steps fully before vs after the switch.
    let mut enter_ts = None;
    let (mut with_ops, mut without_ops) = (Vec::new(), Vec::new());
    let switch_ts = q.header.ts_ns;
    for e in &evs {
        if let Event::Decode(d) = e {
            if d.n_tokens != 1 {
                continue;
            }
            if !d.header.is_exit() {
                enter_ts = Some(d.header.ts_ns);
            } else if let Some(t0) = enter_ts.take() {
                let dur = d.header.ts_ns - t0;
                if d.header.ts_ns < switch_ts {
                    with_ops.push(dur);
                } else if t0 > switch_ts {
                    without_ops.push(dur);
                }
            }
        }
    }
    // The control map is updated before the switch event is stamped, so no operator
    // span can end after it.
    let spans = op_spans(&evs);
    let late_ops = spans.iter().filter(|s| s.end_ns > switch_ts).count();
    assert_eq!(late_ops, 0, "operator probes are off");
    // And off the target: the collector detaches them, so their programs stop running
    // (in the control map alone they would still run, and trap, on every operator). A
    // few run in the moment between the control map update and the detach.
    let footer = r.footer().expect("footer");
    let op_runs = support::program_runs(footer, "engine_op_done");
    let op_entries = spans.len() as u64;
    let per_step = op_entries / (with_ops.len() as u64 + 1).max(1);
    let would_run = per_step * without_ops.len() as u64;
    assert!(
        op_runs.saturating_sub(op_entries) * 4 < would_run,
        "operator probes detached: {op_runs} program runs, {op_entries} entries recorded, \
         {would_run} runs expected if still attached"
    );
    assert!(
        !with_ops.is_empty() && !without_ops.is_empty(),
        "decode steps before ({}) and after ({}) the switch",
        with_ops.len(),
        without_ops.len()
    );
    std::fs::remove_file(&out).ok();
}

#[test]
fn sigkill_leaves_engine_running_and_trace_readable() {
    require_root!();
    let (engine, _) = engine_and_model();
    // A model that decodes for about a second (the tiny one is done in 30 ms, before
    // the tracer could be killed mid-run): 4 layers of experts, ~16 KB of trace a token.
    let model = support::gen_model("small-moe", "q4_0");
    let out = trace_path("kill");
    let mut child = profinfer()
        .arg("record")
        .arg("-o")
        .arg(&out)
        .arg("--")
        .arg(engine)
        .args(["run", "-m"])
        .arg(&model)
        .args(["-p", "hello", "-n", "400", "-t", "2", "--ignore-eos"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("profinfer starts");
    // Wait until some event chunks are on disk.
    let start = Instant::now();
    while std::fs::metadata(&out).map_or(0, |m| m.len()) < 512 << 10 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "trace never grew"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let target_pid = TraceReader::open(&out)
        .expect("header readable")
        .header()
        .target
        .pid;
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    // The engine keeps running and finishes on its own.
    let proc_dir = PathBuf::from(format!("/proc/{target_pid}"));
    assert!(
        proc_dir.exists(),
        "engine still running after the tracer died"
    );
    let start = Instant::now();
    while proc_dir.exists() {
        let state = std::fs::read_to_string(proc_dir.join("stat")).unwrap_or_default();
        if state.contains(") Z") {
            break; // finished; a zombie until init reaps it
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "engine did not finish"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = TraceReader::open(&out).expect("killed trace opens");
    assert!(r.footer().is_none());
    let n = events(&r).len();
    assert!(n > 0, "events up to the last complete chunk");
    std::fs::remove_file(&out).ok();
}

/// The engine's node ends handed over in tables (the default) and probed one by one
/// (`--per-node-ends`) give the same spans: per graph, the same nodes on the same
/// threads, each inside its graph, and the analyzer's node spans start where the node
/// before ended either way.
#[test]
fn batched_node_ends_give_the_spans_of_per_node_ends() {
    require_root!();
    let tokens = 12;
    let spans_per_graph = |extra: &[&str], name: &str| {
        let out = trace_path(name);
        record(&out, extra, tokens);
        let r = TraceReader::open(&out).expect("trace opens");
        let footer = r.footer().expect("footer").clone();
        assert_eq!(footer.events_lost, 0);
        let runs = |prog: &str| support::program_runs(&footer, prog);
        let batched = runs("engine_op_times") > 0;
        assert_eq!(
            r.header().settings.get("node_ends").map(String::as_str),
            Some(if batched { "batched" } else { "per-node" }),
            "the header says how the ends were recorded"
        );
        assert!(
            batched != (runs("engine_op_done") > 0),
            "one kind of end probe: {:?}",
            footer.cost
        );
        let evs = events(&r);
        let descs = last_descs(&evs);
        // (graph ordinal) -> sorted (node index, op, ith); spans outside a graph fail.
        let mut graphs: Vec<Vec<(u32, u32, u32)>> = Vec::new();
        let mut open: Option<(u64, u64)> = None; // (start, graph id)
        for e in &evs {
            match e {
                Event::Graph(g) if !g.header.is_exit() => {
                    open = Some((g.header.ts_ns, g.graph_id));
                    graphs.push(Vec::new());
                }
                Event::Graph(g) => {
                    let (start, _) = open.take().expect("exit after entry");
                    assert!(g.header.ts_ns >= start);
                    graphs.last_mut().expect("open").sort_unstable();
                }
                // The analyzer resolves a graph's spans when it ends: their nodes'
                // descriptions must come before.
                Event::NodeDesc(_) => {
                    assert!(open.is_some(), "{name}: a description after its graph")
                }
                Event::OpSpan(s) => {
                    assert!(open.is_some(), "{name}: a span outside its graph");
                    let d = descs.get(&s.node_addr).expect("described");
                    graphs
                        .last_mut()
                        .expect("open")
                        .push((d.index, d.op, s.ith()));
                }
                _ => {}
            }
        }
        let (model, _, _) = analyzer::ingest::load(&out, &analyzer::NoProgress).expect("loads");
        for g in model.graphs() {
            let node_spans = model.graph_node_spans(g);
            assert_eq!(node_spans.len(), g.n_nodes as usize, "{name}");
            for w in node_spans.windows(2) {
                assert_eq!(w[1].start_ns, w[0].end_ns, "{name}: starts at the release");
            }
        }
        let per_type: Vec<u64> = model.op_type_aggregates().iter().map(|a| a.count).collect();
        std::fs::remove_file(&out).ok();
        (batched, graphs, per_type)
    };
    let (batched, a, a_types) = spans_per_graph(&[], "ends-batched");
    assert!(batched, "the engine's node ends come batched by default");
    let (batched, b, b_types) = spans_per_graph(&["--per-node-ends"], "ends-per-node");
    assert!(!batched, "--per-node-ends probes each end");
    assert_eq!(a_types, b_types, "node executions per op type");
    assert_eq!(a.len(), b.len(), "graphs");
    for (i, (a, b)) in a.iter().zip(&b).enumerate() {
        assert!(!a.is_empty(), "graph {i} has spans");
        assert_eq!(a, b, "graph {i}: the same nodes on the same threads");
    }
}

/// The engine takes node ends only while a tracer has `engine_op_times` attached: its
/// semaphore is 0 before, counted up while recording, and back to 0 when the tracer is
/// killed (the kernel drops the probe with the dead tracer's fds), the engine running on.
#[test]
fn the_engine_takes_node_ends_only_while_traced_even_if_the_tracer_dies() {
    require_root!();
    let (engine, _) = engine_and_model();
    let mut guard = KillOnDrop(long_engine("1000000").spawn().expect("engine starts"));
    let pid = guard.0.id();
    wait_for_exec(pid, engine);
    assert_eq!(semaphore_in(pid, engine), 0, "untraced");
    let out = trace_path("semaphore");
    let mut tracer = KillOnDrop(
        profinfer()
            .args(["record", "-o"])
            .arg(&out)
            .args(["--pid", &pid.to_string()])
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("profinfer starts"),
    );
    let start = Instant::now();
    while semaphore_in(pid, engine) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the semaphore never went up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(semaphore_in(pid, engine), 1, "one tracer");
    // Records flow (the tables reach the trace).
    while std::fs::metadata(&out).map_or(0, |m| m.len()) < 256 << 10 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "trace never grew"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    tracer.0.kill().expect("SIGKILL");
    tracer.0.wait().expect("reaped");
    let killed = Instant::now();
    while semaphore_in(pid, engine) != 0 {
        assert!(
            killed.elapsed() < Duration::from_secs(10),
            "the semaphore stayed up after the tracer died"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        guard.0.try_wait().expect("waitable").is_none(),
        "engine still running"
    );
    let r = TraceReader::open(&out).expect("killed trace opens");
    assert!(
        events(&r).iter().any(|e| matches!(e, Event::OpSpan(_))),
        "spans recorded before the kill"
    );
    std::fs::remove_file(&out).ok();
}

#[test]
fn clear_errors_for_bad_targets() {
    require_root!();
    let out = trace_path("err");
    let o = profinfer()
        .args(["record", "-o"])
        .arg(&out)
        .args(["--pid", "999999999"])
        .output()
        .expect("runs");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no process with pid 999999999"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    let o = profinfer()
        .args(["record", "-o"])
        .arg(&out)
        .args(["--", "/bin/true"])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    // Neither the engine nor llama.cpp: one line saying what is missing for each.
    assert!(
        err.contains("neither profinfer's engine") && err.contains("nor llama.cpp"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    // A target that exits early with an error: the trace is complete and readable, and
    // profinfer exits with the target's status so a script sees the failure.
    let (engine, _) = engine_and_model();
    let o = profinfer()
        .args(["record", "-o"])
        .arg(&out)
        .arg("--")
        .arg(engine)
        .args(["run", "--no-such-option"])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "the engine's usage error: {err}");
    assert!(err.contains("target exited with status 2"), "{err}");
    let r = TraceReader::open(&out).expect("the early exit's trace opens");
    assert!(r.footer().is_some(), "recording ended cleanly");
    std::fs::remove_file(&out).ok();
}

/// The stand-in engine of `examples/abi_mismatch_target.rs`, built once.
fn abi_mismatch_target() -> PathBuf {
    let ws = support::workspace();
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "--release",
            "-p",
            "tracer-user",
            "--example",
            "abi_mismatch_target",
        ])
        .current_dir(&ws)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the example failed");
    ws.join("target/release/examples/abi_mismatch_target")
}

#[test]
fn foreign_engine_abi_version_is_counted_and_its_fields_are_not_recorded() {
    require_root!();
    let target = abi_mismatch_target();
    let out = trace_path("abi");
    let o = profinfer()
        .args(["record", "-o"])
        .arg(&out)
        .args(["--levels", "token,graph,op", "--no-pmc", "--"])
        .arg(&target)
        .output()
        .expect("profinfer runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let expected = format!(
        "engine ABI version {}, expected {}: structure fields not recorded",
        common::engine_abi::ENGINE_ABI_VERSION + 1,
        common::engine_abi::ENGINE_ABI_VERSION
    );
    assert_eq!(err.matches(&expected).count(), 1, "reported once: {err}");
    // The example makes 4 decodes of layout N+1, then 1 of layout N; each decode
    // computes one graph of 3 nodes on one thread: 4 × (1 graph + 3 ops) foreign hits.
    assert!(
        err.contains("16 probe hits with engine ABI version"),
        "{err}"
    );
    let r = TraceReader::open(&out).expect("trace opens");
    let evs = events(&r);
    let graphs: Vec<_> = evs
        .iter()
        .filter_map(|e| match e {
            Event::Graph(g) if !g.header.is_exit() => Some(*g),
            _ => None,
        })
        .collect();
    assert_eq!(graphs.len(), 5, "every call is still recorded");
    // Foreign layout: the graph's own fields are left out (graph_id 0), the probe's
    // arguments (n_nodes) are kept. Current layout: graph_id = pos + 1 as the example sets.
    for g in &graphs[..4] {
        assert_eq!((g.graph_id, g.n_tokens, g.n_nodes), (0, 0, 3));
    }
    assert_eq!((graphs[4].graph_id, graphs[4].n_tokens), (5, 1));
    // An engine without `engine_op_done` (this stand-in): each span opens at the entry
    // point and closes at its return, with its exact duration.
    let spans = op_spans(&evs);
    assert_eq!(spans.len(), 5 * 3, "a span of every op");
    assert!(
        spans
            .iter()
            .all(|s| s.flags & OP_SPAN_START_AT_RELEASE == 0),
        "both bounds probed"
    );
    // Each node position is described in the foreign layout (nothing but the call), then
    // in the current one.
    let descs = node_descs(&evs);
    assert_eq!(descs.len(), 2 * 3, "{descs:?}");
    let mismatch = common::event::OP_DETAIL_ABI_MISMATCH;
    for (i, d) in descs.iter().enumerate() {
        let foreign = i < 3;
        assert_eq!(d.detail & mismatch != 0, foreign, "description {i}");
        if foreign {
            assert_eq!((d.op, d.index, d.layer), (u32::MAX, u32::MAX, -1));
            assert!(d.name_str().is_empty());
            assert_eq!(d.detail & OP_DETAIL_STRUCTURE, 0);
        } else {
            assert_eq!(d.op, common::engine_abi::OpType::Add as u32);
            assert_eq!(d.index as usize, i - 3);
            assert_eq!(d.name_str(), format!("node-{}", i - 3));
        }
    }
    std::fs::remove_file(&out).ok();
}

/// Address of `symbol`'s first byte in process `pid`, from its file offset in `exe` and
/// the process's mapping of that offset (`/proc/PID/maps`).
fn symbol_address_in(pid: u32, exe: &std::path::Path, symbol: &str) -> u64 {
    let [file_off] =
        tracer_user::counted_uprobe::symbol_file_offsets(exe, [symbol]).expect("engine readable");
    let file_off = file_off.expect("symbol defined in the file");
    let canon = std::fs::canonicalize(exe).expect("canonical");
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps readable");
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || std::path::Path::new(f[5]) != canon {
            continue;
        }
        let (lo, hi) = f[0].split_once('-').expect("range");
        let lo = u64::from_str_radix(lo, 16).expect("hex");
        let hi = u64::from_str_radix(hi, 16).expect("hex");
        let off = u64::from_str_radix(f[2], 16).expect("hex");
        if (off..off + (hi - lo)).contains(&file_off) {
            return lo + (file_off - off);
        }
    }
    panic!(
        "{symbol} (file offset {file_off:#x}) of {} not mapped in {pid}; its maps:\n{maps}",
        canon.display()
    );
}

/// The first `N` bytes of `symbol` as process `pid` sees them.
fn bytes_in<const N: usize>(pid: u32, exe: &std::path::Path, symbol: &str) -> [u8; N] {
    use std::os::unix::fs::FileExt as _;
    let addr = symbol_address_in(pid, exe, symbol);
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).expect("mem readable as root");
    let mut b = [0u8; N];
    mem.read_exact_at(&mut b, addr).expect("bytes readable");
    b
}

/// The first byte of `symbol` as process `pid` sees it: 0xCC where a uprobe is installed.
fn first_byte_in(pid: u32, exe: &std::path::Path, symbol: &str) -> u8 {
    bytes_in::<1>(pid, exe, symbol)[0]
}

/// The engine's `engine_op_times_semaphore` in process `pid`: how many tracers have
/// `engine_op_times` attached (the kernel counts it).
fn semaphore_in(pid: u32, exe: &std::path::Path) -> u16 {
    u16::from_ne_bytes(bytes_in(pid, exe, symbols::OP_TIMES_SEMAPHORE))
}

/// A child that lives until killed, waited for on drop.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.0.kill().ok();
        self.0.wait().ok();
    }
}

/// With a single target, only the target's address space gets the breakpoints: another
/// engine process running the same binary keeps the original first instruction.
#[test]
fn uprobes_trap_only_in_the_target_process() {
    require_root!();
    let (engine, model) = engine_and_model();
    let engine_cmd = |n: &str| {
        let mut c = Command::new(engine);
        c.args(["run", "-m"])
            .arg(model)
            .args(["-p", "hello", "-n", n, "-t", "1", "--ignore-eos"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        c
    };
    let bystander = KillOnDrop(engine_cmd("400").spawn().expect("engine starts"));
    let by_pid = bystander.0.id();
    // Once it has exec'd (its maps show the engine), stop it so it outlives the check.
    let engine_abs = std::fs::canonicalize(engine).expect("engine path");
    let start = Instant::now();
    while !std::fs::read_to_string(format!("/proc/{by_pid}/maps"))
        .unwrap_or_default()
        .contains(engine_abs.to_str().expect("UTF-8 path"))
    {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "bystander never ran"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: plain kill(2) of our own child.
    unsafe { libc::kill(by_pid as i32, libc::SIGSTOP) };
    let out = trace_path("scope");
    let mut rec = profinfer();
    rec.arg("record")
        .arg("-o")
        .arg(&out)
        .args(["--levels", "token,graph,op", "--"])
        .arg(engine)
        .args(["run", "-m"])
        .arg(model)
        .args(["-p", "hello", "-n", "400", "-t", "1", "--ignore-eos"])
        .stdout(std::process::Stdio::null());
    let recorder = KillOnDrop(rec.spawn().expect("profinfer starts"));
    let start = Instant::now();
    // The header is written after the probes are attached: from then on the target's
    // breakpoints are in place. Stop the target so it outlives the check too.
    let target = loop {
        if let Ok(r) = TraceReader::open(&out) {
            break r.header().target.pid;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no trace header");
        std::thread::sleep(Duration::from_millis(2));
    };
    // The header may be written while profinfer's child still waits to exec the engine
    // (probes attach to the file, before exec): wait for the exec.
    while std::fs::read_link(format!("/proc/{target}/exe")).ok() != Some(engine_abs.clone()) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "target never exec'd the engine"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // SAFETY: plain kill(2) of the engine this test started (through profinfer).
    unsafe { libc::kill(target as i32, libc::SIGSTOP) };
    // The engine takes node ends only where the probe is: the kernel counts the
    // semaphore up in the target alone.
    assert_eq!(
        semaphore_in(target, &engine_abs),
        1,
        "the target's semaphore"
    );
    assert_eq!(
        semaphore_in(by_pid, &engine_abs),
        0,
        "the bystander's semaphore"
    );
    for sym in ["engine_decode", "engine_op_times"] {
        // int3 (0xCC), or on kernels that optimize uprobes on a 5-byte nop (6.18+ x86-64)
        // a call (0xE8) into the uprobe trampoline.
        let probed = first_byte_in(target, &engine_abs, sym);
        assert!(
            probed == 0xCC || probed == 0xE8,
            "{sym} probed in the target: first byte {probed:#x}"
        );
        assert_eq!(
            first_byte_in(by_pid, &engine_abs, sym),
            0x0F,
            "{sym} untouched in the bystander (first byte of the 5-byte nop)"
        );
    }
    drop(recorder); // SIGKILL: the target would run on; end it too.
    // SAFETY: plain kill(2) of the engine this test started (through profinfer).
    unsafe { libc::kill(target as i32, libc::SIGKILL) };
    drop(bystander);
    std::fs::remove_file(&out).ok();
}

/// The thread set follows the target's threads (CLONE_THREAD), not its child processes.
#[test]
fn thread_set_has_the_targets_threads_but_not_its_child_processes() {
    require_root!();
    let ws = support::workspace();
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release", "-p", "tracer-user", "--example"])
        .arg("thread_and_fork_target")
        .current_dir(&ws)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the example failed");
    let target = ws.join("target/release/examples/thread_and_fork_target");
    let out = trace_path("threads");
    let o = profinfer()
        .args(["record", "-o"])
        .arg(&out)
        .args(["--levels", "token,sched", "--no-pmc", "--"])
        .arg(&target)
        .output()
        .expect("profinfer runs");
    support::assert_success(&o);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let id = |label: &str| -> u32 {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(label)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("`{label}` in {stdout}"))
    };
    let (thread, child) = (id("thread "), id("child "));
    let r = TraceReader::open(&out).expect("trace opens");
    let pid = r.header().target.pid;
    let evs = events(&r);
    let new_tasks: Vec<u32> = evs
        .iter()
        .filter_map(|e| match e {
            Event::Task(t) if t.header.kind == EventKind::TaskNew as u32 => Some(t.child_tid),
            _ => None,
        })
        .collect();
    assert!(
        new_tasks.contains(&thread),
        "thread {thread} in {new_tasks:?}"
    );
    assert!(
        !new_tasks.contains(&child),
        "child process {child} followed"
    );
    let mut thread_switches = 0;
    for e in &evs {
        match e {
            Event::SchedSwitch(s) => {
                // A switch is recorded when a target thread is on either side; the
                // child may be the other side, never the only reason.
                let target = |t: u32| t == pid || t == thread;
                assert!(
                    target(s.prev_tid) || target(s.next_tid),
                    "switch {} -> {} has no target thread",
                    s.prev_tid,
                    s.next_tid
                );
                thread_switches += usize::from(s.prev_tid == thread);
            }
            Event::SchedWakeup(w) => assert_ne!(w.target_tid, child, "child woken"),
            _ => {}
        }
    }
    assert!(
        thread_switches >= 5,
        "the thread's 5 sleeps are switches ({thread_switches})"
    );
    std::fs::remove_file(&out).ok();
}

/// Every span names a described node and the spans of one thread do not overlap (no
/// torn or mixed records). Perf buffers are drained CPU by CPU, so spans are put in time
/// order first. Returns the number of spans.
fn assert_spans_whole(evs: &[Event]) -> usize {
    let descs = last_descs(evs);
    let mut spans = op_spans(evs);
    spans.sort_by_key(|s| s.end_ns);
    let mut last_end: HashMap<u32, u64> = HashMap::new();
    for s in &spans {
        let d = descs
            .get(&s.node_addr)
            .expect("the span's node is described");
        assert!(!d.name_str().is_empty(), "description has its name");
        assert!(s.ith() < 2, "ith {}", s.ith());
        if let Some(prev) = last_end.insert(s.tid, s.end_ns) {
            assert!(s.start_ns() >= prev, "spans of one thread do not overlap");
        }
    }
    spans.len()
}

#[test]
fn perf_buffer_mode_writes_every_event_with_room() {
    require_root!();
    let out = trace_path("perf-big");
    record(&out, &["--buffer", "perf", "--perf-pages", "256"], 8);
    let r = TraceReader::open(&out).expect("trace opens");
    let f = r.footer().expect("footer").clone();
    assert_eq!(f.events_lost, 0, "256 pages per CPU hold the run");
    assert_eq!(f.events_produced, f.events_written);
    let evs = events(&r);
    let probe_records = evs.iter().filter(|e| e.header().kind < 60).count() as u64;
    assert_eq!(probe_records, f.events_written, "footer matches the file");
    assert!(
        assert_spans_whole(&evs) > 100,
        "spans and descriptions (built in the per-thread scratch)"
    );
    std::fs::remove_file(&out).ok();
}

#[test]
fn perf_buffer_of_one_page_overflows_and_every_loss_is_counted() {
    require_root!();
    let out = trace_path("perf-small");
    record(&out, &["--buffer", "perf", "--perf-pages", "1"], 16);
    let r = TraceReader::open(&out).expect("trace opens");
    let f = r.footer().expect("footer").clone();
    assert!(f.events_lost > 0, "one 4 KiB page per CPU must overflow");
    assert_eq!(f.events_produced, f.events_written + f.events_lost);
    assert_eq!(f.lost_per_cpu.iter().sum::<u64>(), f.events_lost);
    let evs = events(&r);
    let probe_records = evs.iter().filter(|e| e.header().kind < 60).count() as u64;
    assert_eq!(probe_records, f.events_written, "footer matches the file");
    std::fs::remove_file(&out).ok();
}

/// `engine bench` on the tiny model: runs for seconds (`reps` × 256 decode steps).
fn long_engine(reps: &str) -> Command {
    let (engine, model) = engine_and_model();
    let mut c = Command::new(engine);
    c.args(["bench", "-m"])
        .arg(model)
        .args(["-p", "16", "-n", "256", "-r", reps, "-t", "2"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    c
}

/// Waits until `pid` has exec'd `exe` (its maps show it).
fn wait_for_exec(pid: u32, exe: &std::path::Path) {
    let exe = std::fs::canonicalize(exe).expect("exe path");
    let start = Instant::now();
    while !std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap_or_default()
        .contains(exe.to_str().expect("UTF-8 path"))
    {
        assert!(start.elapsed() < Duration::from_secs(10), "{pid} never ran");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn pid_attach_records_for_the_duration_and_leaves_the_engine_running() {
    require_root!();
    let (engine, _) = engine_and_model();
    // Effectively endless (the engine got fast enough to finish 150 reps within the
    // recording); the test stops it itself once it has seen it survive the detach.
    // Killed on drop: a failed assertion must not leave an endless engine behind.
    let mut guard = KillOnDrop(long_engine("1000000").spawn().expect("engine starts"));
    let target = &mut guard.0;
    let pid = target.id();
    wait_for_exec(pid, engine);
    let out = trace_path("pid");
    // Recorded for a second, and again for longer (3, 9, 17 s: 30 s in all) while the
    // trace holds 10 decode steps or fewer: the claim is that attaching records the
    // running target's steps, not how many fit in a second on a busy machine (decode
    // speed under the probes is measured in `cargo xtask bench`). Each recording stops
    // at its duration and leaves the target running.
    let mut evs = Vec::new();
    let mut decode_exits = 0;
    for secs in [1, 3, 9, 17] {
        let o = profinfer()
            .args(["record", "-o"])
            .arg(&out)
            .args(["--pid", &pid.to_string(), "--duration", &secs.to_string()])
            .output()
            .expect("profinfer runs");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        assert!(
            err.contains("duration elapsed; target left running"),
            "{err}"
        );
        assert!(
            target.try_wait().expect("waitable").is_none(),
            "engine still running after the recorder stopped"
        );
        let r = TraceReader::open(&out).expect("trace opens");
        assert_eq!(r.header().target.pid, pid);
        let f = r.footer().expect("footer").clone();
        assert_eq!(f.events_produced, f.events_written + f.events_lost);
        evs = events(&r);
        decode_exits = evs
            .iter()
            .filter(|e| matches!(e, Event::Decode(d) if d.header.is_exit()))
            .count();
        if decode_exits > 10 {
            break;
        }
        eprintln!("{decode_exits} decode steps in {secs} s: recording longer");
    }
    assert!(decode_exits > 10, "decode steps recorded ({decode_exits})");
    // Probe-ABI records (kinds below 40) come from the target only; scheduler records
    // are stamped with whatever task ran the tracepoint. Operator spans carry no pid
    // (the trace header names the target), only their thread.
    assert!(evs.iter().all(|e| e.header().kind >= 40
        || e.header().pid == pid
        || matches!(e, Event::OpSpan(_) | Event::OpSpanPmc(_))));
    // Both engine threads (attached while running: seeded from /proc/PID/task).
    let op_tids = support::op_threads(&evs);
    assert_eq!(op_tids.len(), 2, "ops of both worker threads");
    let task_dir = format!("/proc/{pid}/task");
    let live_tids: HashSet<u32> = std::fs::read_dir(&task_dir)
        .expect("task dir")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    assert!(
        op_tids.is_subset(&live_tids),
        "spans of the target's threads"
    );
    // Still decoding unharmed a while after the probes were detached (a uprobe left
    // behind, or a trap in a detached probe, would kill it), then stopped by us: it must
    // die of our SIGTERM, not of anything else.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        target.try_wait().expect("waitable").is_none(),
        "engine died after the recorder detached"
    );
    // SAFETY: kill(2) on the child this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
    let status = target.wait().expect("engine reaped");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGTERM),
        "engine ended by our SIGTERM, not by a crash: {status}"
    );
    std::fs::remove_file(&out).ok();
}

#[test]
fn sigint_stops_the_recorder_and_the_target_runs_to_completion() {
    require_root!();
    let (engine, _) = engine_and_model();
    // Orphans (the target, once profinfer exits) are reparented to this process, so
    // the target's exit status can be collected.
    support::become_subreaper();
    let out = trace_path("sigint");
    let bench = long_engine("20");
    let mut rec = profinfer();
    rec.args(["record", "-o"])
        .arg(&out)
        .arg("--")
        .arg(bench.get_program())
        .args(bench.get_args())
        .stdout(std::process::Stdio::null());
    let mut recorder = rec.spawn().expect("profinfer starts");
    let start = Instant::now();
    while std::fs::metadata(&out).map_or(0, |m| m.len()) < 1 << 20 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "trace never grew"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let target = TraceReader::open(&out).expect("header").header().target.pid;
    wait_for_exec(target, engine);
    // What Ctrl-C sends to the terminal's foreground group reaches only the recorder:
    // the target is in its own process group.
    // SAFETY: getpgid/kill on pids this test started.
    unsafe {
        assert_eq!(libc::getpgid(target as i32), target as i32, "own group");
        assert_eq!(libc::kill(recorder.id() as i32, libc::SIGINT), 0);
    }
    let status = recorder.wait().expect("recorder reaped");
    assert!(
        status.success(),
        "recorder exits cleanly on SIGINT: {status}"
    );
    let r = TraceReader::open(&out).expect("trace opens");
    let f = r.footer().expect("footer written on SIGINT").clone();
    assert!(f.end_reason.contains("interrupted"), "{}", f.end_reason);
    assert_eq!(f.events_produced, f.events_written + f.events_lost);
    // The target is now our (sub-reaped) orphan and runs to completion.
    support::assert_target_completes(target);
    std::fs::remove_file(&out).ok();
}
