//! End-to-end (root) on a real model: record SmolLM2-135M-Instruct (30 layers, GQA 9/3
//! heads, Q4_1 weights, output tied to the Q8_0 token embedding) with `profinfer
//! record`, analyze it, and check the trace against the model's real structure and the
//! engine's own account of the run.
//!
//! The model file comes from `PROFINFER_SMOLLM2` (`cargo xtask test` fetches it and sets
//! the variable). Without it the test prints a loud banner and passes, unless
//! `PROFINFER_REQUIRE_ORACLE=1` (as in `cargo xtask test`), where it fails.

#[macro_use]
mod support;

use std::collections::HashMap;
use std::path::PathBuf;

use common::engine_abi::{NODE_FLAG_WEIGHT, OpType};
use common::event::OP_SPAN_START_AT_RELEASE;
use support::{events, profinfer, smollm2, trace_path};
use trace_format::{Event, TraceReader};

/// SmolLM2-135M's shapes (`engine info`, or the file's metadata).
const N_LAYER: usize = 30;
const N_EMBD: i64 = 576;
const N_EMBD_KV: i64 = 192; // 3 KV heads of 64
const N_FF: i64 = 1536;
const N_VOCAB: i64 = 49152;
/// Tokens generated in the traced run.
const N_GEN: u64 = 8;

#[test]
fn record_and_analyze_smollm2() {
    require_root!();
    let Some(model) = smollm2() else { return };
    let self_profile = trace_path("smollm2-self.jsonl");
    let self_profile_arg = self_profile.to_string_lossy().into_owned();
    let (trace, out) = record_smollm2(
        &model,
        "smollm2",
        "The capital of France is",
        2,
        N_GEN,
        &["--self-profile", &self_profile_arg],
    );
    // The real model says something sensible (greedy): SmolLM2 knows this one.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Paris"), "generated: {text}");

    let reader = TraceReader::open(&trace).expect("trace opens");
    let evs = events(&reader);
    assert_eq!(reader.footer().expect("complete").events_lost, 0);

    // Every weight product of the 30 layers and the tied output read a recorded leaf
    // with the real name, type and shape.
    let leaves = support::leaves(&evs);
    let mut weights: HashMap<String, (String, [i64; 2])> = HashMap::new();
    for op in support::node_descs(&evs) {
        if op.op != OpType::MulMat as u32 {
            continue;
        }
        let Some(leaf) = leaves.get(&op.structure.src[0]) else {
            continue;
        };
        if leaf.node_flags & NODE_FLAG_WEIGHT == 0 {
            continue;
        }
        let dtype = common::DType::from_u32(leaf.dtype)
            .map_or_else(|| format!("type {}", leaf.dtype), |t| t.name().to_owned());
        weights.insert(
            leaf.name_str().to_owned(),
            (dtype, [leaf.ne[0], leaf.ne[1]]),
        );
    }
    for l in 0..N_LAYER {
        for (t, ne) in [
            ("attn_q", [N_EMBD, N_EMBD]),
            ("attn_k", [N_EMBD, N_EMBD_KV]),
            ("attn_v", [N_EMBD, N_EMBD_KV]),
            ("attn_output", [N_EMBD, N_EMBD]),
            ("ffn_gate", [N_EMBD, N_FF]),
            ("ffn_up", [N_EMBD, N_FF]),
            ("ffn_down", [N_FF, N_EMBD]),
        ] {
            let name = format!("blk.{l}.{t}.weight");
            let (dtype, got) = weights
                .get(&name)
                .unwrap_or_else(|| panic!("{name} read by a recorded product"));
            assert_eq!(dtype, "q4_1", "{name}");
            assert_eq!(*got, ne, "{name} shape");
        }
    }
    // Tied output: the logits product reads the Q8_0 token embedding.
    let (dtype, ne) = weights
        .get("token_embd.weight")
        .expect("the output product reads token_embd.weight (tied embeddings)");
    assert_eq!((dtype.as_str(), *ne), ("q8_0", [N_EMBD, N_VOCAB]));
    assert_eq!(weights.len(), 7 * N_LAYER + 1, "{:?}", weights.keys());

    // Operators pair up per thread, on both worker threads.
    let op_tids = support::op_threads(&evs);
    assert_eq!(op_tids.len(), 2, "operators on both threads");

    // The analysis agrees with the engine: token counts, and the first decode step's DAG
    // has exactly the nodes the engine computed in that graph.
    let views = trace_path("smollm2-views");
    let report =
        analyzer::run(&trace, &views, &analyzer::AnalyzeOptions::default()).expect("analyze");
    assert_eq!(report.summary.tokens.sampled, Some(N_GEN));
    assert_eq!(report.summary.tokens.decode, N_GEN - 1);
    let model = analyzer::ingest::load(&trace, &analyzer::NoProgress)
        .expect("load")
        .0;
    let d = analyzer::dag::build(&model, analyzer::IterSelector::FirstDecode).expect("dag");
    let graph_id = model.graphs()[d.graph as usize].graph_id;
    let engine_nodes = support::self_profile_graph_nodes(&self_profile, graph_id);
    assert_eq!(d.computed_nodes() as u64, engine_nodes);
    // 30 layers: one RMS norm before attention and one before the FFN per layer, and
    // the final norm.
    let norms = d.dag.node_weights().filter(|n| n.op == "RMS_NORM").count();
    assert_eq!(norms, 2 * N_LAYER + 1, "RMS norms of the decode DAG");

    std::fs::remove_file(&trace).ok();
    std::fs::remove_file(&self_profile).ok();
    std::fs::remove_dir_all(&views).ok();
}

/// Records SmolLM2 greedily continuing `prompt` for `n` tokens with
/// `threads` threads (`extra` appended to the engine's arguments); returns the trace
/// and profinfer's output, after checking that it succeeded.
fn record_smollm2(
    model: &std::path::Path,
    name: &str,
    prompt: &str,
    threads: u32,
    n: u64,
    extra: &[&str],
) -> (PathBuf, std::process::Output) {
    let (n, threads) = (n.to_string(), threads.to_string());
    let mut args = vec!["-p", prompt, "-n", &n, "-t", &threads];
    args.extend(["--temp", "0", "--ignore-eos"]);
    args.extend(extra);
    support::record_engine(name, model, &args)
}

/// Prompt tokens of the chunk-size diff: a multiple of both chunk sizes, so every
/// prefill call of either run has exactly its chunk size.
const DIFF_PROMPT_TOKENS: u32 = 256;
/// Chunk sizes (`engine run -b`) of the diff's two runs: B's chunks carry 8 times A's
/// tokens through every weight product.
const DIFF_CHUNKS: (u32, u32) = (8, 64);

/// `profinfer diff` of prefill in 8-token chunks (A) against 64-token chunks (B), the
/// same 256 prompt tokens, on a real model: the diff's MUL_MAT time per prefill call is
/// what the two traces' raw events say, it grew with the 8 times larger products, and
/// the diff calls that a change beyond the noise; the HTML page is written with both
/// pictures; a run against itself shows no change.
///
/// The cause of the change is one the test sets, the work per call: each weight product
/// of a B chunk multiplies 64 rows of activations instead of 8. The check is that
/// MUL_MAT per call more than doubled (relative change > +1.0): 8 times the work, with
/// room for A's run to be slowed up to 4 times as much as B's by whatever else runs on
/// the machine. One engine thread: on a 2-CPU machine shared with the collector, two
/// threads would meet at a barrier after every operator, and a preempted thread then
/// stalls the other (what made the earlier form of this test, 1 thread against 2, lose
/// most of its speed-up to load: changes of -0.38 in a quiet pair and -0.13 in a noisy
/// one). The thread speed-up itself is a performance claim and belongs to a benchmark
/// (`cargo xtask bench` has none for it yet).
#[test]
fn diff_of_small_against_large_prefill_chunks_shows_the_matmul_work() {
    require_root!();
    let Some(model) = smollm2() else { return };
    // Token ids as given (no BOS): the prompt length is exactly DIFF_PROMPT_TOKENS.
    let prompt: Vec<String> = (1000..1000 + DIFF_PROMPT_TOKENS)
        .map(|t| t.to_string())
        .collect();
    let prompt = prompt.join(",");
    let record = |run: &str, chunk: u32| {
        let chunk = chunk.to_string();
        support::record_engine(
            &format!("smollm2-diff-{run}-b{chunk}"),
            &model,
            &["--tokens", &prompt, "-n", "2", "-t", "1", "-b", &chunk],
        )
        .0
    };
    let (ta, tb) = (record("a", DIFF_CHUNKS.0), record("b", DIFF_CHUNKS.1));
    let html = std::env::temp_dir().join(format!(
        "profinfer-test-{}-smollm2-diff.html",
        std::process::id()
    ));
    let out = profinfer()
        .arg("diff")
        .arg(&ta)
        .arg(&tb)
        .args(["--by", "type", "--phase", "prefill", "--json", "--html"])
        .arg(&html)
        .output()
        .expect("profinfer runs");
    // --json and --html conflict: one clear line, no output file.
    assert!(!out.status.success());
    assert!(!html.exists());
    let out = profinfer()
        .arg("diff")
        .arg(&ta)
        .arg(&tb)
        .args(["--by", "type", "--phase", "prefill", "--html"])
        .arg(&html)
        .output()
        .expect("profinfer runs");
    let text = String::from_utf8_lossy(&out.stdout);
    support::assert_success(&out);
    eprintln!("{text}");
    let d = analyzer::diff::diff_traces(
        &ta,
        &tb,
        analyzer::op_groups::GroupBy::OpType,
        analyzer::diff::DiffPhase::Prefill,
    )
    .expect("diff");
    let mm = d
        .rows
        .iter()
        .find(|r| r.key == "MUL_MAT")
        .expect("MUL_MAT row");
    // The diff's numbers are the traces': each side's MUL_MAT per prefill call and its
    // prefill calls as read from the raw events.
    for (side, trace, chunk) in [(&mm.a, &ta, DIFF_CHUNKS.0), (&mm.b, &tb, DIFF_CHUNKS.1)] {
        let side = side.as_ref().expect("MUL_MAT in both runs");
        let raw = RawPrefillMatmul::read(trace);
        let raw_ms = raw.ms_per_call();
        assert!(
            (side.ms_per_call - raw_ms).abs() <= 1e-9 * raw_ms.max(1.0),
            "-b {chunk}: the diff says {} ms of MUL_MAT per prefill call, the raw events {raw_ms} ms",
            side.ms_per_call
        );
        assert_eq!(
            (side.calls, raw.calls),
            (
                (DIFF_PROMPT_TOKENS / chunk) as usize,
                (DIFF_PROMPT_TOKENS / chunk) as usize
            ),
            "-b {chunk}: prefill calls with MUL_MAT (diff, raw events)"
        );
    }
    let rel = mm.relative.expect("MUL_MAT in both runs");
    assert!(
        rel > 1.0,
        "8 times the tokens per chunk should more than double MUL_MAT's time per \
         prefill call: {rel:+.2}\n{text}"
    );
    assert_eq!(
        mm.significance,
        analyzer::diff::Significance::Changed,
        "{text}"
    );
    assert_eq!(
        (d.a.calls, d.b.calls),
        (
            (DIFF_PROMPT_TOKENS / DIFF_CHUNKS.0) as usize,
            (DIFF_PROMPT_TOKENS / DIFF_CHUNKS.1) as usize
        ),
        "prefill calls compared"
    );
    assert!(text.contains("MUL_MAT"));
    assert!(d.only_a.is_empty() && d.only_b.is_empty(), "{d:?}");
    let page = std::fs::read_to_string(&html).expect("HTML written");
    assert_eq!(page.matches("data:image/svg+xml;base64,").count(), 2);
    // And a run against itself: nothing changed.
    let same = analyzer::diff::diff_traces(
        &tb,
        &tb,
        analyzer::op_groups::GroupBy::Node,
        analyzer::diff::DiffPhase::Prefill,
    )
    .expect("diff");
    assert!(
        same.rows
            .iter()
            .all(|r| r.significance == analyzer::diff::Significance::WithinNoise)
    );
    for p in [ta, tb, html] {
        let _ = std::fs::remove_file(p);
    }
}

/// MUL_MAT time in the prefill calls of a one-thread engine trace, read from the raw
/// events without the analyzer: a prefill call is an entry of the engine's decode probe
/// with more than one token (it decodes one sequence), up to its exit; a node's op type
/// is the description last recorded for its address (the probes describe a node before
/// its span, in the thread's order); a span that only has its end
/// (`OP_SPAN_START_AT_RELEASE`) starts where the thread's previous node ended, or for
/// the first node of a graph where the thread began its walk (`GraphThread`): with one
/// thread there is no barrier to wait at, so that is exact.
struct RawPrefillMatmul {
    /// Prefill calls in which MUL_MAT ran.
    calls: usize,
    /// Their MUL_MAT time, ns.
    total_ns: u64,
}

impl RawPrefillMatmul {
    fn read(trace: &std::path::Path) -> RawPrefillMatmul {
        let reader = TraceReader::open(trace).expect("trace opens");
        assert_eq!(reader.footer().expect("complete").events_lost, 0);
        let mut op_of: HashMap<u64, u32> = HashMap::new();
        // Where the thread's next span starts if only its end was probed.
        let mut release: Option<u64> = None;
        let mut thread: Option<u32> = None;
        // The open prefill call's MUL_MAT time, if a prefill call is open.
        let mut open: Option<u64> = None;
        let (mut calls, mut total_ns) = (0, 0);
        for e in events(&reader) {
            match &e {
                Event::Decode(d) if !d.header.is_exit() => {
                    assert!(open.is_none(), "a decode call inside another");
                    open = (d.n_tokens > 1).then_some(0);
                }
                Event::Decode(_) => {
                    if let Some(ns) = open.take().filter(|&ns| ns > 0) {
                        calls += 1;
                        total_ns += ns;
                    }
                }
                Event::GraphThread(g) => release = Some(g.header.ts_ns),
                Event::NodeDesc(n) => {
                    op_of.insert(n.node_addr, n.op);
                }
                Event::OpSpan(_) | Event::OpSpanPmc(_) => {
                    let s = support::op_spans(std::slice::from_ref(&e))[0];
                    assert_eq!(
                        *thread.get_or_insert(s.tid),
                        s.tid,
                        "operators on one thread"
                    );
                    let start = if s.flags & OP_SPAN_START_AT_RELEASE != 0 {
                        release.expect("the thread's walk began")
                    } else {
                        s.start_ns()
                    };
                    assert!(s.end_ns >= start, "the thread's spans in order");
                    release = Some(s.end_ns);
                    let is_mul_mat = op_of.get(&s.node_addr) == Some(&(OpType::MulMat as u32));
                    if let (true, Some(ns)) = (is_mul_mat, open.as_mut()) {
                        *ns += s.end_ns - start;
                    }
                }
                _ => {}
            }
        }
        RawPrefillMatmul { calls, total_ns }
    }

    /// MUL_MAT time per prefill call, ms.
    fn ms_per_call(&self) -> f64 {
        self.total_ns as f64 / 1e6 / self.calls as f64
    }
}

/// Tokens of the long run: the one-file timeline of this run at 2 threads would be about
/// 250 MB, past what the plan puts in one file (80 % of 256 MB).
const LONG_RUN_TOKENS: u64 = 2000;

/// A long run recorded as a `--switch-output` series and analyzed as one gives Perfetto
/// files the UI opens: full-detail parts of at most 256 MB and an overview, each decoded
/// by Perfetto's own Python schema (`analyzer/tests/perfetto_check.py`), and no JSON.
#[test]
fn a_long_run_gives_perfetto_parts_of_at_most_256_mb_and_an_overview() {
    require_root!();
    let Some(model) = smollm2() else { return };
    let python = support::workspace().join(".venv/bin/python");
    if !python.exists() {
        support::skip_unless_required(
            support::REQUIRE_ORACLE_ENV,
            "no .venv for Perfetto's Python schema",
            "run `cargo xtask setup --oracle`",
        );
        return;
    }
    let n = LONG_RUN_TOKENS.to_string();
    let (trace, _) = support::record_engine_with(
        "long",
        &model,
        &["--switch-output", "32M"],
        &[
            "-p",
            "Tell me a long story",
            "-n",
            &n,
            "-c",
            "4096",
            "-t",
            "2",
            "--temp",
            "0",
            "--ignore-eos",
        ],
    );
    let members = trace_format::members(&trace).expect("folder lists");
    assert!(members.len() >= 2, "a series: {members:?}");
    let out = tempfile::tempdir().expect("tempdir");
    let analyzed = profinfer()
        .arg("analyze")
        .arg(&trace)
        .arg("-o")
        .arg(out.path())
        .arg("--no-graphics")
        .output()
        .expect("profinfer runs");
    support::assert_success(&analyzed);
    let mut files: Vec<(String, u64)> = std::fs::read_dir(out.path())
        .expect("out dir")
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, e.metadata().expect("metadata").len())
        })
        .filter(|(n, _)| n.ends_with(".perfetto-trace"))
        .collect();
    files.sort();
    eprintln!("{files:?}");
    assert!(
        files
            .iter()
            .any(|(n, _)| n == "timeline.overview.perfetto-trace"),
        "an overview: {files:?}"
    );
    let parts = files
        .iter()
        .filter(|(n, _)| n.starts_with("timeline.tokens-"))
        .count();
    assert!(parts >= 2, "the full detail in parts: {files:?}");
    assert!(
        !out.path().join("timeline.json").exists(),
        "no JSON for a run this long"
    );
    for (name, bytes) in &files {
        assert!(*bytes <= 256 << 20, "{name}: {bytes} bytes");
        let check = std::process::Command::new(&python)
            .arg(support::workspace().join("analyzer/tests/perfetto_check.py"))
            .arg(out.path().join(name))
            .output()
            .expect("python runs");
        let text = String::from_utf8_lossy(&check.stdout);
        assert!(
            check.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        assert!(text.contains("every flow ends: True"), "{name}: {text}");
    }
    for (_, m) in members {
        std::fs::remove_file(m).ok();
    }
}
