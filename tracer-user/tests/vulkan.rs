//! End-to-end (root): unmodified llama.cpp with its Vulkan backend, on Mesa's lavapipe (a
//! real Vulkan 1.3 driver that runs on the CPU), built by `cargo xtask setup --oracle`
//! into `.venv/llama-builds/vulkan-<version>/` (`xtask/src/llama_vulkan.rs`).
//!
//! The real SmolLM2-135M with `-ngl 0`, some and all layers offloaded. The ground truth is
//! llama.cpp's own split of its graph, printed by its scheduler with `GGML_SCHED_DEBUG=2`
//! (`## SPLIT #k: <backend> # <n> inputs`, then one `node #<i>` line per non-view node):
//! the trace's splits per decode call must be llama.cpp's, backend by backend and with
//! their node counts; copies and waits are present exactly when layers are split; the
//! greedy tokens are the CPU's; nothing is lost.

#[macro_use]
mod support;

use std::path::{Path, PathBuf};

use common::{
    BackendKind,
    event::{BackendSpanKind, EventKind},
};
use support::{events, profinfer, trace_path};
use trace_format::{Event, TraceReader};

/// The Vulkan build's `llama-cli`, or `None` after a loud banner (fatal with
/// `PROFINFER_REQUIRE_ORACLE=1`).
fn llama_cli() -> Option<PathBuf> {
    let dir = support::workspace().join(".venv/llama-builds");
    let found = std::fs::read_dir(&dir).ok().and_then(|d| {
        d.filter_map(Result::ok)
            .map(|e| e.path().join("bin/llama-cli"))
            .find(|p| {
                p.is_file()
                    && p.parent()
                        .and_then(Path::parent)
                        .and_then(Path::file_name)
                        .is_some_and(|n| n.to_string_lossy().starts_with("vulkan-"))
            })
    });
    if found.is_none() {
        support::skip_unless_required(
            support::REQUIRE_ORACLE_ENV,
            &format!("no Vulkan llama.cpp build in {}", dir.display()),
            "run `cargo xtask setup --oracle`",
        );
    }
    found
}

/// One split as llama.cpp's scheduler printed it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PrintedSplit {
    /// `CPU`, `Vulkan0`.
    backend: String,
    /// Inputs copied in.
    inputs: u32,
    /// Node indices of the split's non-view nodes, in order.
    node_indices: Vec<u32>,
}

/// The graphs' split assignments in `GGML_SCHED_DEBUG=2` output, one list per printed
/// graph.
fn printed_assignments(log: &str) -> Vec<Vec<PrintedSplit>> {
    let mut graphs: Vec<Vec<PrintedSplit>> = Vec::new();
    for line in log.lines() {
        if let Some(rest) = line.strip_prefix("## SPLIT #") {
            let (num, rest) = rest.split_once(": ").expect("split line");
            let (backend, rest) = rest.split_once(" # ").expect("backend");
            let inputs: u32 = rest
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .expect("inputs");
            if num == "0" {
                graphs.push(Vec::new());
            }
            graphs.last_mut().expect("a graph").push(PrintedSplit {
                backend: backend.to_owned(),
                inputs,
                node_indices: Vec::new(),
            });
        } else if let Some(rest) = line.strip_prefix("node #") {
            let i: u32 = rest
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .expect("node index");
            if let Some(s) = graphs.last_mut().and_then(|g| g.last_mut()) {
                s.node_indices.push(i);
            }
        }
    }
    graphs
}

/// Node counts per split of a printed graph: from each split's first node to the next
/// split's (the last ends after the graph's last node, its output, never a view).
fn printed_node_counts(splits: &[PrintedSplit]) -> Vec<u32> {
    let starts: Vec<u32> = splits
        .iter()
        .map(|s| *s.node_indices.first().expect("a split has a node"))
        .collect();
    let end = splits
        .last()
        .and_then(|s| s.node_indices.last())
        .map_or(0, |i| i + 1);
    starts
        .iter()
        .enumerate()
        .map(|(k, &s)| starts.get(k + 1).copied().unwrap_or(end) - s)
        .collect()
}

/// One recorded run.
struct Run {
    trace: PathBuf,
    evs: Vec<Event>,
    /// The generated text.
    text: String,
    /// llama.cpp's log (stderr).
    log: String,
}

/// `profinfer record -- llama-cli -ngl <ngl> ...` on `model`, greedy, with the
/// scheduler's assignments printed.
fn record(cli: &Path, model: &Path, ngl: u32) -> Run {
    record_with(cli, model, ngl, &[("GGML_SCHED_DEBUG", "2")])
}

/// [`record`] with `env` set for llama.cpp.
fn record_with(cli: &Path, model: &Path, ngl: u32, env: &[(&str, &str)]) -> Run {
    let trace = trace_path(&format!("vulkan-ngl{ngl}-{}", env.len()));
    let out = profinfer()
        .envs(env.iter().copied())
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(cli)
        .arg("-m")
        .arg(model)
        .args(["-p", "The capital of France is", "-n", "8", "-t", "2"])
        .args(["--temp", "0", "-no-cnv", "-v", "-ngl"])
        .arg(ngl.to_string())
        // ggml-vulkan skips CPU-type devices unless they are named (lavapipe is one).
        .env("GGML_VK_VISIBLE_DEVICES", "0")
        .output()
        .expect("profinfer runs");
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "ngl {ngl}: {log}");
    let reader = TraceReader::open(&trace).expect("trace");
    assert_eq!(
        reader.footer().expect("complete").events_lost,
        0,
        "ngl {ngl}"
    );
    Run {
        trace,
        evs: events(&reader),
        text: String::from_utf8_lossy(&out.stdout).into_owned(),
        log,
    }
}

/// Per decode call (decode entries in order): the graphs it computed, as (backend kind,
/// node count), in order.
fn traced_splits(evs: &[Event]) -> Vec<Vec<(u32, u32)>> {
    let mut calls: Vec<Vec<(u32, u32)>> = Vec::new();
    for e in evs {
        match e {
            Event::Decode(d) if !d.header.is_exit() => calls.push(Vec::new()),
            Event::Graph(g) if !g.header.is_exit() => {
                if let Some(c) = calls.last_mut() {
                    c.push((g.backend_kind, g.n_nodes));
                }
            }
            _ => {}
        }
    }
    calls
}

/// The backend calls of kind `kind`.
fn calls_of(evs: &[Event], kind: BackendSpanKind) -> Vec<&common::event::BackendSpanEvent> {
    evs.iter()
        .filter_map(|e| match e {
            Event::BackendSpan(s) if s.kind() == Some(kind) => Some(s),
            _ => None,
        })
        .collect()
}

/// SmolLM2 with 0, 15 and all 30 layers on the Vulkan device: the trace's splits are
/// llama.cpp's, copies and waits appear when the graph is split, and the tokens are the
/// CPU's.
#[test]
fn llama_cpp_on_vulkan_is_traced_split_by_split() {
    require_root!();
    let Some(cli) = llama_cli() else { return };
    let Some(model) = support::smollm2() else {
        return;
    };
    let mut texts = Vec::new();
    for ngl in [0u32, 15, 99] {
        let run = record(&cli, &model, ngl);
        let printed = printed_assignments(&run.log);
        assert!(!printed.is_empty(), "ngl {ngl}: no GGML_SCHED_DEBUG output");
        let traced = traced_splits(&run.evs);
        assert!(
            traced.len() >= 8,
            "ngl {ngl}: {} decode calls",
            traced.len()
        );
        // The last printed assignment is the decode graph's (one token): every decode
        // call after the prompt computed exactly its splits.
        let last = printed.last().expect("an assignment");
        let expected: Vec<(u32, u32)> = last
            .iter()
            .zip(printed_node_counts(last))
            .map(|(s, n)| {
                let kind = if s.backend.starts_with("Vulkan") {
                    BackendKind::Vulkan
                } else {
                    BackendKind::Cpu
                };
                (kind as u32, n)
            })
            .collect();
        let decode = traced.last().expect("a decode call");
        assert_eq!(
            decode, &expected,
            "ngl {ngl}: the last decode call's splits (backend kind, nodes) against llama.cpp's {last:?}"
        );
        let vulkan_splits = expected
            .iter()
            .filter(|(k, _)| *k == BackendKind::Vulkan as u32)
            .count();
        let copies = calls_of(&run.evs, BackendSpanKind::Copy);
        let syncs = calls_of(&run.evs, BackendSpanKind::Sync);
        let fences = calls_of(&run.evs, BackendSpanKind::VkFenceWait);
        let submits = calls_of(&run.evs, BackendSpanKind::VkSubmit);
        if ngl == 0 {
            assert_eq!(vulkan_splits, 0, "ngl 0 computes on the CPU: {expected:?}");
            assert!(copies.is_empty(), "ngl 0: {} copies", copies.len());
        } else {
            assert!(vulkan_splits >= 1, "ngl {ngl}: {expected:?}");
            assert!(!submits.is_empty(), "ngl {ngl}: no vkQueueSubmit");
            assert!(!fences.is_empty(), "ngl {ngl}: no vkWaitForFences");
            assert!(!syncs.is_empty(), "ngl {ngl}: no ggml_backend_synchronize");
            // llama.cpp's inputs per decode call are the scheduler's copies (user inputs
            // and activations crossing backends).
            let inputs: u32 = last.iter().map(|s| s.inputs).sum();
            assert!(inputs > 0, "ngl {ngl}: {last:?}");
            assert!(
                copies.len() as u32 >= inputs,
                "ngl {ngl}: {} copies for {inputs} inputs per call",
                copies.len()
            );
            assert!(copies.iter().all(|c| c.bytes > 0), "ngl {ngl}");
        }
        if ngl == 15 {
            assert!(
                expected.len() >= 2 && vulkan_splits >= 1,
                "15 of 30 layers: the graph is split: {expected:?}"
            );
        }
        // Every recorded call ends after it starts, on a target thread.
        for e in &run.evs {
            if let Event::BackendSpan(s) = e {
                assert!(s.start_ns <= s.header.ts_ns && s.start_ns > 0, "{s:?}");
                assert_eq!(s.header.kind, EventKind::BackendSpan as u32);
            }
        }
        check_views(&run.trace, ngl);
        texts.push(
            run.text
                .split("The capital of France is")
                .nth(1)
                .unwrap_or(&run.text)
                .trim()
                .to_owned(),
        );
        let _ = std::fs::remove_file(&run.trace);
    }
    // Greedy tokens: the CPU's answer on every split; after it the all-Vulkan run may
    // leave the CPU's tokens at a near-tie (measured: "Paris.  The answer is:" against
    // "Paris.  The United States has", docs/llama-cpp.md).
    for (ngl, text) in [0, 15, 99].iter().zip(&texts) {
        assert!(text.starts_with("Paris."), "ngl {ngl}: {text}");
    }
    assert_eq!(
        texts[1], texts[0],
        "15 layers on Vulkan: the CPU's 8 tokens"
    );
}

/// llama.cpp's own per-op GPU times of its last Vulkan graph (`GGML_VK_PERF_LOGGER`'s
/// last `Vulkan Timings:` block): op (the name's first word, `MUL_MAT_VEC` as
/// `MUL_MAT`) → (nodes, total µs), and the block's `Total time`.
fn printed_gpu_timings(log: &str) -> (std::collections::BTreeMap<String, (u64, f64)>, f64) {
    let block = log.rsplit("Vulkan Timings:").next().unwrap_or("");
    let mut ops = std::collections::BTreeMap::new();
    let mut total = 0.0;
    for line in block.lines() {
        if let Some(t) = line.strip_prefix("Total time: ") {
            total = t.trim_end_matches(" us.").parse().expect("total");
            break;
        }
        let Some((name, rest)) = line.split_once(": ") else {
            continue;
        };
        let Some((n, mean)) = rest.split_once(" x ") else {
            continue;
        };
        let n: u64 = n.parse().expect("count");
        let mean: f64 = mean
            .split_whitespace()
            .next()
            .and_then(|m| m.parse().ok())
            .expect("mean");
        let op = name.split_whitespace().next().unwrap_or(name);
        let op = if op == "MUL_MAT_VEC" { "MUL_MAT" } else { op };
        let e = ops.entry(op.to_owned()).or_insert((0u64, 0.0f64));
        e.0 += n;
        e.1 += n as f64 * mean;
    }
    (ops, total)
}

/// SmolLM2 with 15 layers on Vulkan and llama.cpp's own GPU timing on
/// (`GGML_VK_PERF_LOGGER`): every node the CPU records for the GPU is in the trace with
/// its GPU time, and the last Vulkan split's times per op are those llama.cpp prints
/// from the same timestamps (same nodes, same totals).
#[test]
fn gpu_node_times_are_llama_cpps_own() {
    require_root!();
    let Some(cli) = llama_cli() else { return };
    let Some(model) = support::smollm2() else {
        return;
    };
    let run = record_with(&cli, &model, 15, &[("GGML_VK_PERF_LOGGER", "1")]);
    let (printed, printed_total_us) = printed_gpu_timings(&run.log);
    assert!(
        printed.len() >= 5 && printed_total_us > 0.0,
        "no Vulkan Timings block: {}",
        &run.log[run.log.len().saturating_sub(3000)..]
    );
    let (m, _, _) = analyzer::ingest::load(&run.trace, &analyzer::NoProgress).expect("loads");
    let g = m
        .graphs()
        .iter()
        .rev()
        .find(|g| g.backend_kind == BackendKind::Vulkan as u32)
        .expect("a Vulkan split");
    let spans = m.graph_node_spans(g);
    assert!(spans.len() > 100, "{} recorded nodes", spans.len());
    let mut ours: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    let mut ours_total = 0u64;
    for s in spans {
        let gpu = s.gpu.unwrap_or_else(|| panic!("no GPU time: {s:?}"));
        assert!(
            gpu.start_ns >= g.start_ns && gpu.start_ns <= g.end_ns.unwrap_or(u64::MAX),
            "lavapipe's timestamps are on the trace's clock, inside the split: {gpu:?} {g:?}"
        );
        let e = ours
            .entry(m.nodes()[s.node as usize].op_name())
            .or_default();
        e.0 += 1;
        e.1 += gpu.dur_ns;
        ours_total += gpu.dur_ns;
    }
    eprintln!(
        "llama.cpp: {printed:?} total {printed_total_us} us\nprofinfer: {ours:?} total {ours_total} ns"
    );
    // RMS_NORM with the MUL after it is one fused dispatch: llama.cpp times the pair's
    // second node apart (its timestamp written right after the first's), profinfer
    // within the first. Every other op: the same nodes and time.
    for (op, &(n, us)) in &printed {
        let (n_ours, ns_ours) = ours.get(op).copied().unwrap_or_default();
        let (n, us) = if op == "RMS_NORM" {
            let mul = printed.get("MUL").copied().unwrap_or_default();
            (n, us + mul.1)
        } else if op == "MUL" {
            continue;
        } else {
            (n, us)
        };
        assert_eq!(n_ours, n, "{op}: nodes timed");
        let ours_us = ns_ours as f64 / 1e3;
        // llama.cpp prints the mean with six significant digits.
        assert!(
            (ours_us - us).abs() <= us * 1e-4 + 1.0,
            "{op}: {ours_us:.1} µs against llama.cpp's {us:.1} µs"
        );
    }
    // The same total over the ops llama.cpp prints; the rest of the split is views,
    // which llama.cpp leaves out (how long lavapipe takes between their timestamps
    // depends on the machine, so it is reported, not bounded).
    let printed_ns: u64 = printed
        .keys()
        .filter_map(|op| ours.get(op))
        .map(|&(_, ns)| ns)
        .sum();
    let ours_us = printed_ns as f64 / 1e3;
    assert!(
        (ours_us - printed_total_us).abs() <= printed_total_us * 1e-4 + printed.len() as f64,
        "total of the printed ops {ours_us:.0} µs against llama.cpp's {printed_total_us:.0} µs"
    );
    eprintln!(
        "views and other unprinted nodes: {:.0} µs of the split's {:.0} µs",
        (ours_total - printed_ns) as f64 / 1e3,
        ours_total as f64 / 1e3
    );
    let _ = std::fs::remove_file(&run.trace);
}

/// `profinfer analyze`: backends.csv has a vulkan column when layers are offloaded.
fn check_views(trace: &Path, ngl: u32) {
    let out_dir = trace.with_extension("views");
    let _ = std::fs::remove_dir_all(&out_dir);
    let out = profinfer()
        .arg("analyze")
        .arg(trace)
        .arg("-o")
        .arg(&out_dir)
        .output()
        .expect("analyze");
    support::assert_success(&out);
    let split = std::fs::read_to_string(out_dir.join("token_split.csv")).unwrap_or_default();
    if ngl > 0 {
        let header = split.lines().next().unwrap_or("");
        assert!(
            header.contains("vulkan_splits") && header.contains("fence_wait_ns"),
            "ngl {ngl}: {header}"
        );
    }
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn sched_debug_output_is_parsed() {
    let log = "\n## SPLIT #0: CPU # 0 inputs\nnode #  0 (  GET_ROWS):           inp_embd (  1K) [  CPU    input] use=1:\n\n## SPLIT #1: Vulkan0 # 1 inputs: [inp_embd (  1K)] \nnode #  2 (  RMS_NORM):             norm-0 (  1K) [Vulkan0  ...] use=1:\nnode #  5 (   MUL_MAT):             Qcur-0 (  1K) [Vulkan0  ...] use=1:\n";
    let g = printed_assignments(log);
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].len(), 2);
    assert_eq!(g[0][1].backend, "Vulkan0");
    assert_eq!(g[0][1].inputs, 1);
    assert_eq!(printed_node_counts(&g[0]), vec![2, 4]);
}
