//! Root-only end-to-end tests of issue 14's on-device behaviours: a layer split and a
//! tensor split between the CPU and the accel backend (seed 002 Fig 7 and 12, seed 003),
//! recorded from a real engine run and checked against what the engine did (its graph
//! record per split) and against the run without a split (same tokens); and chunked
//! prefill as named graphs in the timeline (seed 001).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

#[macro_use]
mod support;

use common::engine_abi::{BackendKind, MUL_MAT_ROW_BEGIN_PARAM, MUL_MAT_ROW_END_PARAM, OpType};
use support::{EngineRun, events};
use trace_format::{Event, TraceReader};

/// One graph computation (a split) as traced.
#[derive(Debug)]
struct Split {
    graph_id: u64,
    kind: u32,
    n_nodes: u32,
    tid: u32,
    start: u64,
    end: u64,
}

/// One operator execution on one thread as traced.
#[derive(Debug, Clone)]
struct OpRun {
    tid: u32,
    backend_kind: u32,
    /// `EngineGraph::graph_id` of the split it ran in.
    graph_id: u64,
    /// Position of its node in the split's execution order.
    index: u32,
    node: u64,
    op: u32,
    name: String,
    layer: i32,
    ith: u32,
    src: [u64; 4],
    op_params: [u32; 8],
    ne0: i64,
    start: u64,
    end: u64,
}

fn splits(evs: &[Event]) -> Vec<Split> {
    let mut open: HashMap<u32, (u64, u64, u32, u32)> = HashMap::new();
    let mut out = Vec::new();
    for e in evs {
        if let Event::Graph(g) = e {
            let h = &g.header;
            if h.is_exit() {
                if let Some((id, start, kind, n)) = open.remove(&h.tid) {
                    out.push(Split {
                        graph_id: id,
                        kind,
                        n_nodes: n,
                        tid: h.tid,
                        start,
                        end: h.ts_ns,
                    });
                }
            } else {
                open.insert(h.tid, (g.graph_id, h.ts_ns, g.backend_kind, g.n_nodes));
            }
        }
    }
    out.sort_by_key(|s| s.start);
    out
}

/// Every operator span of the trace as the analyzer makes it (its start inferred from
/// the barrier where only its end was probed), with its node's description and the
/// thread's index and backend from the raw span.
///
/// Analyzer-derived, because the trace alone has no operator starts: by default only a
/// node's end is probed and its start is the analyzer's barrier inference. The split
/// tests use these runs for what only the trace shows (which thread and backend ran a
/// band, the order of the bands and the sync); [`check_op_runs`] first holds every run
/// against the engine's own span of it, and the views are checked against the engine's
/// self-profile directly ([`check_backend_views`]).
fn op_runs(trace: &Path, evs: &[Event]) -> Vec<OpRun> {
    let raw: HashMap<(u32, u64), (u32, u32)> = support::op_spans(evs)
        .iter()
        .map(|s| ((s.tid, s.end_ns), (s.ith(), s.backend_kind())))
        .collect();
    let (model, _, _) = analyzer::ingest::load(trace, &analyzer::NoProgress).expect("loads");
    let mut out: Vec<OpRun> = model
        .slices()
        .iter()
        .map(|sl| {
            let n = &model.nodes()[sl.node as usize];
            let tid = model.threads()[sl.thread as usize].tid;
            let (ith, backend_kind) = raw[&(tid, sl.end_ns)];
            OpRun {
                tid,
                backend_kind,
                graph_id: model
                    .graphs()
                    .get(sl.graph as usize)
                    .map_or(u64::MAX, |g| g.graph_id),
                index: n.index,
                node: n.addr,
                op: n.op,
                name: n.name.clone(),
                layer: n.layer,
                ith,
                src: n.src,
                op_params: n.op_params,
                ne0: n.ne[0],
                start: sl.start_ns,
                end: sl.end_ns,
            }
        })
        .collect();
    out.sort_by_key(|o| (o.start, o.tid));
    out
}

/// The greedy tokens of `engine run` without tracing (`--json`).
fn plain_tokens(model: &Path, args: &[&str]) -> Vec<u64> {
    let (engine, _) = support::engine_and_model();
    let out = std::process::Command::new(engine)
        .args(["run", "-m"])
        .arg(model)
        .args(args)
        .arg("--json")
        .output()
        .expect("engine runs");
    assert!(out.status.success(), "engine run {args:?}");
    json_tokens(&out.stdout)
}

fn json_tokens(stdout: &[u8]) -> Vec<u64> {
    let text = String::from_utf8_lossy(stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .expect("a JSON line");
    let v: serde_json::Value = serde_json::from_str(line).expect("JSON");
    v["generated_tokens"]
        .as_array()
        .expect("generated_tokens")
        .iter()
        .map(|t| t.as_u64().expect("token id"))
        .collect()
}

/// One thread's share of one node as the engine timed it around the node's body
/// (`--self-profile`, level `op`).
#[derive(Debug, Clone)]
struct EngineOp {
    /// Graph id.
    graph: u64,
    /// Position of the node in its graph's execution order.
    node: u32,
    tid: u32,
    ith: u32,
    /// Op type name (`MUL_MAT`).
    op: String,
    start: u64,
    end: u64,
}

/// One graph computation as the engine timed it.
#[derive(Debug, Clone, Copy)]
struct EngineGraphRun {
    n_nodes: u64,
    start: u64,
    end: u64,
}

/// The engine's own record of a run (`engine run --self-profile FILE`, its ground
/// truth), with the trace's clock (`CLOCK_MONOTONIC`).
struct SelfProfile {
    /// Decode calls (entry, exit), in order.
    tokens: Vec<(u64, u64)>,
    /// Graph computations by graph id.
    graphs: BTreeMap<u64, EngineGraphRun>,
    /// One record per node execution and thread.
    ops: Vec<EngineOp>,
}

impl SelfProfile {
    /// Reads the self-profile at `path` (its token, graph and op records).
    fn read(path: &Path) -> SelfProfile {
        let text = std::fs::read_to_string(path).expect("self-profile");
        let mut out = SelfProfile {
            tokens: Vec::new(),
            graphs: BTreeMap::new(),
            ops: Vec::new(),
        };
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            let num = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("`{k}` in {v}"));
            let (start, end) = (num("start_ns"), num("end_ns"));
            match v["level"].as_str() {
                Some("token") => out.tokens.push((start, end)),
                Some("graph") => {
                    let g = EngineGraphRun {
                        n_nodes: num("n_nodes"),
                        start,
                        end,
                    };
                    assert!(
                        out.graphs.insert(num("graph"), g).is_none(),
                        "graph ids are unique: {v}"
                    );
                }
                Some("op") => out.ops.push(EngineOp {
                    graph: num("graph"),
                    node: num("node") as u32,
                    tid: num("tid") as u32,
                    ith: num("ith") as u32,
                    op: v["op"].as_str().expect("op").to_owned(),
                    start,
                    end,
                }),
                _ => {}
            }
        }
        out.tokens.sort_unstable();
        out
    }
}

const ACCEL: u32 = BackendKind::Accel as u32;
const CPU: u32 = BackendKind::Cpu as u32;

/// Records `args` with the accel backend and checks what every split test shares:
/// the same tokens as without a split, both backends' graphs traced as the engine
/// computed them, each backend's operators on its own threads and in its own graphs.
fn record_split(
    name: &str,
    model: &Path,
    base: &[&str],
    split: &[&str],
) -> (EngineRun, Vec<Split>, Vec<OpRun>) {
    let args: Vec<&str> = base.iter().chain(split).copied().collect();
    let mut json_args = args.clone();
    json_args.push("--json");
    let run = support::record_run(name, model, &json_args);
    assert_eq!(
        json_tokens(&run.output.stdout),
        plain_tokens(model, base),
        "a split changed the generated tokens"
    );
    let reader = TraceReader::open(&run.trace).expect("trace opens");
    let evs = events(&reader);
    assert_eq!(reader.footer().expect("complete").events_lost, 0);
    let splits = splits(&evs);
    let ops = op_runs(&run.trace, &evs);

    // Every split the engine computed is in the trace with its backend and node count.
    let engine = SelfProfile::read(&run.self_profile);
    let truth: BTreeMap<u64, u64> = engine
        .graphs
        .iter()
        .map(|(&id, g)| (id, g.n_nodes))
        .collect();
    let traced: BTreeMap<u64, u64> = splits
        .iter()
        .map(|s| (s.graph_id, u64::from(s.n_nodes)))
        .collect();
    assert_eq!(
        traced, truth,
        "traced splits differ from the engine's graphs"
    );
    let kinds: HashSet<u32> = splits.iter().map(|s| s.kind).collect();
    assert_eq!(
        kinds,
        HashSet::from([CPU, ACCEL]),
        "both backends compute splits"
    );
    // The operator runs the checks below and the tests rely on, against the engine's.
    check_op_runs(&ops, &engine);

    // Thread 0 of each split (the thread of its graph probe) runs every one of its
    // nodes once, recorded at the entry point of the split's backend; accel splits run
    // on the accel's own threads.
    let decode_tids: HashSet<u32> = evs
        .iter()
        .filter_map(|e| match e {
            Event::Decode(d) => Some(d.header.tid),
            _ => None,
        })
        .collect();
    for s in &splits {
        let inside: Vec<&OpRun> = ops
            .iter()
            .filter(|o| o.tid == s.tid && o.backend_kind == s.kind)
            .filter(|o| o.start >= s.start && o.end <= s.end)
            .collect();
        assert_eq!(
            inside.len() as u32,
            s.n_nodes,
            "split {} ({}) ran {} of its {} nodes at its backend's entry point",
            s.graph_id,
            s.kind,
            inside.len(),
            s.n_nodes
        );
        if s.kind == ACCEL {
            assert!(
                !decode_tids.contains(&s.tid),
                "accel splits run on the accel driver"
            );
        } else {
            assert!(
                decode_tids.contains(&s.tid),
                "CPU splits run on the decode thread"
            );
        }
    }
    let threads = |kind: u32| -> HashSet<u32> {
        ops.iter()
            .filter(|o| o.backend_kind == kind)
            .map(|o| o.tid)
            .collect()
    };
    assert!(
        threads(CPU).is_disjoint(&threads(ACCEL)),
        "each backend computes on its own threads"
    );
    (run, splits, ops)
}

/// (entry, exit) of every decode call of the trace.
fn decode_calls(run: &EngineRun) -> Vec<(u64, u64)> {
    let reader = TraceReader::open(&run.trace).expect("trace opens");
    let mut open = None;
    let mut out = Vec::new();
    for e in events(&reader) {
        if let Event::Decode(d) = e {
            if d.header.is_exit() {
                if let Some(s) = open.take() {
                    out.push((s, d.header.ts_ns));
                }
            } else {
                open = Some(d.header.ts_ns);
            }
        }
    }
    out
}

/// `engine run` arguments of the split tests: 12 greedy tokens on `threads` CPU threads.
fn split_run_args(threads: &str) -> [&str; 7] {
    [
        "-p",
        "hello world, this is a test of the split",
        "-n",
        "12",
        "-t",
        threads,
        "--ignore-eos",
    ]
}

fn op_is(o: &OpRun, op: OpType) -> bool {
    o.op == op as u32
}

#[test]
fn layer_split_runs_the_offloaded_layer_on_the_accel_with_copies_and_syncs() {
    require_root!();
    let model = support::gen_model("tiny-llama", "q8_0");
    let base = split_run_args("2");
    let (run, splits, ops) = record_split(
        "layer-split",
        &model,
        &base,
        &["--offload-layers", "1..2", "--accel-cpus", "1"],
    );
    // --accel-cpus 1: the accel's threads run on CPU 1 only (every switch to them).
    let accel_tids: HashSet<u32> = ops
        .iter()
        .filter(|o| o.backend_kind == ACCEL)
        .map(|o| o.tid)
        .collect();
    let reader = TraceReader::open(&run.trace).expect("trace opens");
    let on_cpus: HashSet<u32> = events(&reader)
        .iter()
        .filter_map(|e| match e {
            Event::SchedSwitch(s) if accel_tids.contains(&s.next_tid) => Some(s.header.cpu),
            _ => None,
        })
        .collect();
    assert_eq!(
        on_cpus,
        HashSet::from([1]),
        "accel threads ran on {on_cpus:?}"
    );

    // Layer 0 and the output stay on the CPU; layer 1's supported ops run on the accel,
    // its attention softmax falls back to the CPU.
    for o in &ops {
        if o.layer != 1 {
            assert_eq!(
                o.backend_kind, CPU,
                "{} (layer {}) left the CPU",
                o.name, o.layer
            );
        }
        if o.layer == 1 && (op_is(o, OpType::MulMat) || op_is(o, OpType::RmsNorm)) {
            assert_eq!(o.backend_kind, ACCEL, "{} stayed on the CPU", o.name);
        }
        if op_is(o, OpType::SoftMax) || op_is(o, OpType::BackendSync) {
            assert_eq!(o.backend_kind, CPU, "{} is a CPU op", o.name);
        }
    }
    // Copies at both boundaries, a sync before the CPU reads accel results: per decode
    // call CPU → accel → CPU (softmax) → accel → CPU (output).
    let count = |op: OpType, kind: u32| {
        ops.iter()
            .filter(|o| o.ith == 0 && op_is(o, op) && o.backend_kind == kind)
            .count()
    };
    assert!(count(OpType::BackendCopy, ACCEL) > 0 && count(OpType::BackendCopy, CPU) > 0);
    assert!(count(OpType::BackendSync, CPU) > 0);
    // Within each decode call, splits alternate between the backends, CPU first and
    // last (the embeddings in, the logits out).
    let calls = decode_calls(&run);
    assert!(!calls.is_empty());
    for (start, end) in calls {
        // In graph-id order: an accel split may start after the CPU split that follows
        // it has begun waiting for it.
        let mut call: Vec<&Split> = splits
            .iter()
            .filter(|s| s.start >= start && s.start <= end)
            .collect();
        call.sort_by_key(|s| s.graph_id);
        let kinds: Vec<u32> = call.iter().map(|s| s.kind).collect();
        assert!(kinds.len() >= 3, "a call with splits {kinds:?}");
        assert_eq!((kinds[0], kinds[kinds.len() - 1]), (CPU, CPU), "{kinds:?}");
        assert!(kinds.windows(2).all(|w| w[0] != w[1]), "{kinds:?}");
    }

    // The analyzer shows both backends (ProfTime groups, the per-backend table).
    let dir = run.trace.with_extension("out");
    support::analyze_into(&run.trace, &dir);
    check_backend_views(&dir, &SelfProfile::read(&run.self_profile), &splits);
}

#[test]
fn tensor_split_computes_each_product_on_both_backends_then_syncs() {
    require_root!();
    let model = support::gen_model("tiny-kq", "q8_0");
    let base = split_run_args("1");
    let (run, splits, ops) = record_split(
        "tensor-split",
        &model,
        &base,
        &["--split-matmul", "0.5", "--sync", "block"],
    );
    // Node addresses repeat in every forward pass: a source's run is the latest one of
    // its node on thread 0 that started before the consumer.
    let run_before = |node: u64, at: u64| -> &OpRun {
        ops.iter()
            .filter(|o| o.node == node && o.ith == 0 && o.start <= at)
            .max_by_key(|o| o.start)
            .expect("the source ran before its consumer")
    };
    let syncs: Vec<&OpRun> = ops
        .iter()
        .filter(|o| op_is(o, OpType::BackendSync) && o.src[1] != 0 && o.ith == 0)
        .collect();
    assert!(!syncs.is_empty(), "no tensor-split sync");
    let mut overlapped = 0;
    for s in &syncs {
        // A split product: the CPU's band [0, b) and the accel's band [b, n) of one
        // output, then the sync on the CPU.
        let (cpu, accel) = (run_before(s.src[0], s.end), run_before(s.src[1], s.end));
        assert!(op_is(cpu, OpType::MulMat) && op_is(accel, OpType::MulMat));
        assert_eq!(
            (cpu.backend_kind, accel.backend_kind, s.backend_kind),
            (CPU, ACCEL, CPU)
        );
        assert_eq!(cpu.name, accel.name, "both halves are the same product");
        let b = cpu.op_params[MUL_MAT_ROW_END_PARAM];
        assert_eq!(cpu.op_params[MUL_MAT_ROW_BEGIN_PARAM], 0);
        assert_eq!(accel.op_params[MUL_MAT_ROW_BEGIN_PARAM], b);
        assert_eq!(i64::from(accel.op_params[MUL_MAT_ROW_END_PARAM]), accel.ne0);
        assert!(b > 0 && i64::from(b) < cpu.ne0, "both bands are non-empty");
        assert!(s.start >= cpu.end, "the sync follows the CPU's band");
        // The accel's band (all its threads) finished before the sync returned.
        let accel_end = ops
            .iter()
            .filter(|o| o.node == accel.node && o.backend_kind == ACCEL)
            .filter(|o| o.start >= accel.start && o.start <= s.end)
            .map(|o| o.end)
            .max()
            .expect("accel band");
        assert!(
            accel_end <= s.end,
            "{}: the sync returned before the accel finished",
            s.name
        );
        // The accel's band was handed over before the CPU started its own: its split
        // comes first in graph order. Whether the two then run at the same time depends
        // on a free core (two vCPUs here, shared with the collector), so it is counted,
        // not required.
        let split_of = |r: &OpRun| {
            splits
                .iter()
                .find(|sp| sp.tid == r.tid && sp.start <= r.start && r.end <= sp.end)
                .map(|sp| sp.graph_id)
                .expect("a band runs inside a split")
        };
        assert!(
            split_of(accel) < split_of(cpu),
            "{}: accel band submitted after the CPU's",
            s.name
        );
        if accel.start < cpu.end && cpu.start < accel.end {
            overlapped += 1;
        }
    }
    // Only the weight products of the blocks split (2-D weights, large enough).
    let weight_products: HashSet<&str> = syncs
        .iter()
        .map(|s| run_before(s.src[0], s.end).name.as_str())
        .collect();
    assert!(weight_products.iter().any(|n| n.starts_with("ffn_up")));
    assert!(
        !weight_products.iter().any(|n| n.starts_with("kq")),
        "attention products do not split"
    );
    eprintln!(
        "{overlapped} of {} split products ran both bands at the same time",
        syncs.len()
    );
    let dir = run.trace.with_extension("out");
    support::analyze_into(&run.trace, &dir);
    check_backend_views(&dir, &SelfProfile::read(&run.self_profile), &splits);
}

#[test]
fn chunked_prefill_is_one_named_graph_per_chunk() {
    require_root!();
    let model = support::gen_model("tiny-llama", "q8_0");
    let prompt = "one two three four five six seven eight nine ten eleven twelve thirteen";
    let run = support::record_run(
        "chunks",
        &model,
        &[
            "-p",
            prompt,
            "-n",
            "4",
            "-t",
            "2",
            "-b",
            "8",
            "--ignore-eos",
        ],
    );
    let reader = TraceReader::open(&run.trace).expect("trace opens");
    let evs = events(&reader);
    let prefill: Vec<(u32, u32)> = evs
        .iter()
        .filter_map(|e| match e {
            Event::Decode(d) if !d.header.is_exit() && d.n_tokens > 1 => Some((d.n_tokens, d.pos)),
            _ => None,
        })
        .collect();
    assert!(
        prefill.len() >= 2,
        "the prompt was not chunked: {prefill:?}"
    );
    assert!(prefill.iter().all(|&(n, _)| n <= 8));
    let dir = run.trace.with_extension("out");
    support::analyze_into(&run.trace, &dir);
    let timeline = std::fs::read_to_string(dir.join("timeline.json")).expect("timeline.json");
    for (i, (n, pos)) in prefill.iter().enumerate() {
        let label = format!("prefill chunk {i}: {n} tokens @{pos}");
        assert!(timeline.contains(&label), "timeline lacks `{label}`");
    }
    // Each chunk's DAG can be picked.
    let last = prefill.len() - 1;
    let out = support::profinfer()
        .arg("analyze")
        .arg(&run.trace)
        .arg("-o")
        .arg(dir.join("chunk"))
        .args(["--iter", &format!("prefill:{last}")])
        .output()
        .expect("profinfer runs");
    support::assert_success(&out);
}

/// The analyzer's views of a two-backend trace against the engine's own record of the
/// run (its self-profile) and the graphs' backends as the trace's graph probe recorded
/// them (`splits`, held against the self-profile's graphs in [`record_split`]): the
/// timeline's two backend groups and one sync slice per sync the engine ran,
/// `backends.csv`'s counts per op and backend, `token_split.csv`'s syncs and their time
/// per decode call, the ProfDAG's backends and copy edges.
fn check_backend_views(dir: &Path, engine: &SelfProfile, splits: &[Split]) {
    // ProfTime: one process per backend, the sync track with every wait.
    let timeline: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("timeline.json")).expect("timeline"),
    )
    .expect("timeline.json is JSON");
    let events = timeline["traceEvents"].as_array().expect("events");
    let process_names: Vec<&str> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    assert!(
        process_names.iter().any(|n| n.ends_with("cpu backend")),
        "{process_names:?}"
    );
    assert!(
        process_names.iter().any(|n| n.ends_with("accel backend")),
        "{process_names:?}"
    );
    let sync = OpType::BackendSync.name();
    // Thread 0 of a node computes its share of every execution of it: one record each.
    let engine_syncs = engine
        .ops
        .iter()
        .filter(|o| o.op == sync && o.ith == 0)
        .count();
    let sync_slices = events.iter().filter(|e| e["cat"] == "sync").count();
    assert_eq!(
        sync_slices, engine_syncs,
        "one wait slice per sync the engine ran"
    );
    check_backend_counts(dir, engine, splits);
    check_sync_split(dir, engine);

    // ProfDAG: the decode step holds both backends' nodes, and copies are marked.
    let dag: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("dag.json")).expect("dag.json"))
            .expect("dag.json is JSON");
    let backends: HashSet<&str> = dag["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|n| n["backend"].as_str())
        .filter(|b| !b.is_empty())
        .collect();
    assert_eq!(backends, HashSet::from(["cpu", "accel"]));
    let dot = std::fs::read_to_string(dir.join("dag.dot")).expect("dag.dot");
    assert!(
        dot.contains("cluster_split1") && dot.contains("#f28e2b"),
        "splits and copy edges in the DOT"
    );
    for f in ["backends.svg", "backend_timeline.svg"] {
        assert!(dir.join(f).exists(), "{f}");
    }
}

/// `backends.csv` (one row per op type, shape and backend, `count` node executions)
/// against the engine: per op type and backend, as many executions as the engine's
/// thread-0 operator records in graphs of that backend (each node execution has one
/// thread 0); every row timed.
fn check_backend_counts(dir: &Path, engine: &SelfProfile, splits: &[Split]) {
    let csv = std::fs::read_to_string(dir.join("backends.csv")).expect("backends.csv");
    assert_eq!(
        csv.lines().next(),
        Some("op,shape,backend,count,timed,total_ns,mean_ns,record_ns")
    );
    let mut from_csv: BTreeMap<(String, String), u64> = BTreeMap::new();
    for line in csv.lines().skip(1) {
        // The shape may hold a quoted comma: the numbers are taken from the right.
        let f: Vec<&str> = line.rsplitn(6, ',').collect(); // record, mean, total, timed, count, rest
        let count: u64 = f[4].parse().expect("count");
        let timed: u64 = f[3].parse().expect("timed");
        assert_eq!(
            timed, count,
            "the CPU and the accel time every node: {line}"
        );
        let rest: Vec<&str> = f[5].splitn(2, ',').collect();
        let backend = rest[1].rsplit(',').next().expect("backend").to_owned();
        *from_csv.entry((rest[0].to_owned(), backend)).or_default() += count;
    }
    let kind_of: HashMap<u64, u32> = splits.iter().map(|s| (s.graph_id, s.kind)).collect();
    let mut from_engine: BTreeMap<(String, String), u64> = BTreeMap::new();
    for o in engine.ops.iter().filter(|o| o.ith == 0) {
        let kind = *kind_of
            .get(&o.graph)
            .unwrap_or_else(|| panic!("graph {} of {o:?} was not traced", o.graph));
        let backend = BackendKind::from_u32(kind).map_or("?", BackendKind::name);
        *from_engine
            .entry((o.op.clone(), backend.to_owned()))
            .or_default() += 1;
    }
    assert_eq!(
        from_csv, from_engine,
        "backends.csv's executions per (op, backend) against the engine's self-profile"
    );
}

/// What the engine's timestamps allow the traced `BACKEND_SYNC` nodes of each decode
/// call to add up to: (syncs, least ns, most ns). A node's traced time runs from the
/// first thread's start to the last thread's end. It contains the engine's own span of
/// the node (its threads' earliest body start to latest body end: the least), and lies
/// within the gap the neighbouring nodes leave (from the latest body end of the node
/// before, to the earliest body start of the node after, the graph's own bounds at its
/// ends: the most), since threads meet at a barrier between nodes. A start inferred one
/// node too early or an end one node too late leaves that gap.
fn engine_sync_bounds(engine: &SelfProfile) -> Vec<(u32, u64, u64)> {
    let sync = OpType::BackendSync.name();
    // (graph, node) → (op, earliest start, latest end), in node order per graph.
    let mut nodes: BTreeMap<(u64, u32), (&str, u64, u64)> = BTreeMap::new();
    for o in &engine.ops {
        let n = nodes
            .entry((o.graph, o.node))
            .or_insert((o.op.as_str(), u64::MAX, 0));
        n.1 = n.1.min(o.start);
        n.2 = n.2.max(o.end);
    }
    let order: Vec<_> = nodes.iter().collect();
    let mut per_call = vec![(0u32, 0u64, 0u64); engine.tokens.len()];
    for (i, ((graph, _), (op, start, end))) in order.iter().enumerate() {
        if *op != sync {
            continue;
        }
        let g = &engine.graphs[graph];
        let before = match i.checked_sub(1).map(|j| order[j]) {
            Some(((pg, _), (_, _, prev_end))) if pg == graph => *prev_end,
            _ => g.start,
        };
        let after = match order.get(i + 1) {
            Some(((ng, _), (_, next_start, _))) if ng == graph => *next_start,
            _ => g.end,
        };
        let call = engine
            .tokens
            .iter()
            .position(|&(t0, t1)| t0 <= g.start && g.end <= t1)
            .unwrap_or_else(|| panic!("graph {graph} ran outside every decode call"));
        let c = &mut per_call[call];
        c.0 += 1;
        c.1 += end - start;
        c.2 += after - before;
    }
    per_call
}

/// `token_split.csv` against the engine: per decode call, as many syncs as the engine
/// ran in that call's graphs, and their time within [`engine_sync_bounds`].
fn check_sync_split(dir: &Path, engine: &SelfProfile) {
    let split = std::fs::read_to_string(dir.join("token_split.csv")).expect("token_split.csv");
    let header: Vec<&str> = split.lines().next().expect("header").split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("{name} column"))
    };
    let (token, syncs, sync_ns) = (col("token"), col("syncs"), col("sync_ns"));
    let rows: Vec<Vec<u64>> = split
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            [token, syncs, sync_ns]
                .iter()
                .map(|&c| f[c].parse().unwrap_or_else(|_| panic!("a number: {l}")))
                .collect()
        })
        .collect();
    let bounds = engine_sync_bounds(engine);
    assert_eq!(
        rows.len(),
        bounds.len(),
        "token_split.csv has one row per decode call of the engine"
    );
    assert!(
        bounds.iter().any(|b| b.0 > 0),
        "the engine ran syncs: {bounds:?}"
    );
    let sum = |f: fn(&(u32, u64, u64)) -> u64| bounds.iter().map(f).sum::<u64>();
    eprintln!(
        "token_split.csv: {} ns of syncs; the engine's timestamps allow [{}, {}] ns",
        rows.iter().map(|r| r[2]).sum::<u64>(),
        sum(|b| b.1),
        sum(|b| b.2)
    );
    for (row, (call, &(n, least, most))) in rows.iter().zip(bounds.iter().enumerate()) {
        assert_eq!(row[0], call as u64, "rows in decode-call order");
        assert_eq!(
            row[1],
            u64::from(n),
            "decode call {call}: syncs in token_split.csv against the engine's"
        );
        assert!(
            (least..=most).contains(&row[2]),
            "decode call {call}: sync time {} ns outside what the engine's timestamps \
             allow, [{least}, {most}] ns",
            row[2]
        );
    }
}

/// The analyzer's operator runs against the engine's own spans (`--self-profile`): one
/// run per engine record of a thread's share of a node (same graph, node position and
/// thread, none left over either way), with that record's thread index and op, and
/// containing its body (the engine times the body inside the probed entry point and
/// takes the node's end after it; a start is the barrier release before it).
fn check_op_runs(ops: &[OpRun], engine: &SelfProfile) {
    let mut by_key: HashMap<(u64, u32, u32), &EngineOp> = HashMap::new();
    for o in &engine.ops {
        assert!(
            by_key.insert((o.graph, o.node, o.tid), o).is_none(),
            "one engine record per (graph, node, thread): {o:?}"
        );
    }
    for r in ops {
        let e = by_key
            .get(&(r.graph_id, r.index, r.tid))
            .unwrap_or_else(|| panic!("no engine record for the traced run {r:?}"));
        assert_eq!(
            (r.ith, OpType::from_u32(r.op).map_or("?", OpType::name)),
            (e.ith, e.op.as_str()),
            "{}: thread index and op",
            r.name
        );
        assert!(
            r.start <= e.start && e.end <= r.end,
            "{}: traced [{}, {}] does not contain the engine's [{}, {}] on thread {}",
            r.name,
            r.start,
            r.end,
            e.start,
            e.end,
            r.tid
        );
    }
    assert_eq!(
        ops.len(),
        engine.ops.len(),
        "as many traced operator runs as the engine recorded"
    );
}

/// The KV budget's totals as `engine run` prints them: (chunks out, bytes out, chunks
/// in, bytes in).
fn kv_totals(stderr: &[u8]) -> (u64, u64, u64, u64) {
    let text = String::from_utf8_lossy(stderr);
    let line = text
        .lines()
        .find(|l| l.starts_with("kv budget:"))
        .expect("engine run prints the KV budget's totals");
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect();
    (nums[0], nums[1], nums[2], nums[3])
}

/// Phase spans of one kind: (thread, entry, exit, bytes).
fn phase_spans(evs: &[Event], kind: common::event::EventKind) -> Vec<(u32, u64, u64, u32)> {
    let mut open: HashMap<u32, (u64, u32)> = HashMap::new();
    let mut out = Vec::new();
    for e in evs {
        if let Event::Phase(p) = e
            && p.header.kind == kind as u32
        {
            if p.header.is_exit() {
                if let Some((start, bytes)) = open.remove(&p.header.tid) {
                    out.push((p.header.tid, start, p.header.ts_ns, bytes));
                }
            } else {
                open.insert(p.header.tid, (p.header.ts_ns, p.arg));
            }
        }
    }
    out
}

#[test]
fn kv_budget_moves_chunks_in_phase_spans_that_add_up() {
    require_root!();
    use common::event::EventKind;
    // tiny-kq: 2 layers, n_embd_kv 128, so a chunk of 64 positions is 2·64·128·2 bytes;
    // ~120 positions need 2 chunks per layer, and the budget holds one layer's.
    let model = support::gen_model("tiny-kq", "q8_0");
    let chunk = 2 * 64 * 128 * 2u64;
    let base = [
        "-p",
        "a long prompt so that the cache holds more than one chunk of positions per layer",
        "-n",
        "100",
        "-t",
        "2",
        "--ignore-eos",
    ];
    let plain = plain_tokens(&model, &base);
    for (name, compress) in [("kv-budget", None), ("kv-budget-q8", Some("8"))] {
        let budget = (3 * chunk).to_string();
        let mut args: Vec<&str> = base.to_vec();
        args.extend(["--kv-budget", &budget, "--json"]);
        if let Some(c) = compress {
            args.extend(["--kv-compress", c]);
        }
        let run = support::record_run(name, &model, &args);
        if compress.is_none() {
            assert_eq!(
                json_tokens(&run.output.stdout),
                plain,
                "the budget changed the tokens"
            );
        }
        let (chunks_out, bytes_out, chunks_in, bytes_in) = kv_totals(&run.output.stderr);
        assert!(chunks_out > 0 && chunks_in > 0, "nothing was swapped");
        let reader = TraceReader::open(&run.trace).expect("trace opens");
        let evs = events(&reader);
        assert_eq!(reader.footer().expect("complete").events_lost, 0);
        let outs = phase_spans(&evs, EventKind::PhaseKvSwapOut);
        let ins = phase_spans(&evs, EventKind::PhaseKvSwapIn);
        // Every chunk moved is one span, and the spans' bytes add up to the engine's.
        assert_eq!(outs.len() as u64, chunks_out);
        assert_eq!(ins.len() as u64, chunks_in);
        assert_eq!(outs.iter().map(|s| u64::from(s.3)).sum::<u64>(), bytes_out);
        assert_eq!(ins.iter().map(|s| u64::from(s.3)).sum::<u64>(), bytes_in);
        let stored = match compress {
            None => chunk,
            // q8_0: 34 bytes per 32 values of 2 bytes.
            Some(_) => chunk / 2 / 32 * 34,
        };
        assert!(
            outs.iter().all(|s| u64::from(s.3) == stored),
            "a chunk is {stored} bytes stored"
        );
        let compresses = phase_spans(&evs, EventKind::PhaseKvCompress);
        let decompresses = phase_spans(&evs, EventKind::PhaseKvDecompress);
        if compress.is_some() {
            assert_eq!(compresses.len(), outs.len());
            assert_eq!(decompresses.len(), ins.len());
            assert!(decompresses.iter().all(|s| u64::from(s.3) == chunk));
        } else {
            assert!(compresses.is_empty() && decompresses.is_empty());
        }
        // The swaps happen inside KV_FETCH nodes, on the thread that runs them.
        let ops = op_runs(&run.trace, &evs);
        check_op_runs(&ops, &SelfProfile::read(&run.self_profile));
        let fetches: Vec<OpRun> = ops
            .into_iter()
            .filter(|o| op_is(o, OpType::KvFetch) && o.ith == 0)
            .collect();
        for (tid, start, end, _) in outs.iter().chain(&ins) {
            assert!(
                fetches
                    .iter()
                    .any(|f| f.tid == *tid && f.start <= *start && *end <= f.end),
                "a swap outside a KV_FETCH node"
            );
        }
        // ProfStat's KV I/O per call adds up to the engine's totals.
        let dir = run.trace.with_extension("out");
        support::analyze_into(&run.trace, &dir);
        let split = std::fs::read_to_string(dir.join("token_split.csv")).expect("token_split.csv");
        let header: Vec<&str> = split.lines().next().expect("header").split(',').collect();
        let sum = |name: &str| -> u64 {
            let col = header.iter().position(|h| *h == name).expect("column");
            split
                .lines()
                .skip(1)
                .filter_map(|l| l.split(',').nth(col)?.parse::<u64>().ok())
                .sum()
        };
        assert_eq!(
            (sum("kv_bytes_out"), sum("kv_bytes_in")),
            (bytes_out, bytes_in)
        );
        assert!(sum("kv_io_ns") > 0);
        assert!(dir.join("backend_timeline.svg").exists());
    }
}
