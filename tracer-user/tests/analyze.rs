//! End-to-end (root): record a tiny model with `profinfer record`, analyze with
//! `profinfer analyze` and the `analyzer` library, and check the views against the
//! engine's own account of the run (`--self-profile`, its printed token counts).
//! Not root → a loud banner and the test returns.

#[macro_use]
mod support;

use std::{
    collections::{HashMap, HashSet},
    process::Command,
};

use trace_format::{Event, TraceReader};

#[test]
fn record_then_analyze_matches_the_engine() {
    require_root!();
    let (engine, model) = support::engine_and_model();
    let dir = tempfile::tempdir().expect("tempdir");
    let trace = dir.path().join("t.pftrace");
    let selfprof = dir.path().join("self.jsonl");
    let n_gen = 6u64;
    let out = Command::new(env!("CARGO_BIN_EXE_profinfer"))
        .arg("record")
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .arg(engine)
        .args(["run", "-m"])
        .arg(model)
        .args([
            "-p",
            "hello world",
            "-n",
            &n_gen.to_string(),
            "-t",
            "2",
            "--ignore-eos",
        ])
        .arg("--self-profile")
        .arg(&selfprof)
        .output()
        .expect("profinfer runs");
    support::assert_success(&out);
    let stdout = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // "prompt N tokens, generated M | ..."
    let prompt: u64 = stdout
        .split("prompt ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .expect("engine prints the prompt length");

    // The CLI writes every view.
    let views = dir.path().join("views");
    let st = Command::new(env!("CARGO_BIN_EXE_profinfer"))
        .arg("analyze")
        .arg(&trace)
        .arg("-o")
        .arg(&views)
        .status()
        .expect("profinfer analyze runs");
    assert!(st.success());
    for f in [
        "summary.json",
        "timeline.json",
        "dag.dot",
        "dag.json",
        "stats.json",
        "index.html",
    ] {
        assert!(views.join(f).exists(), "{f} missing");
    }

    // Library: summary token counts match the run.
    let lib_out = dir.path().join("lib");
    let report =
        analyzer::run(&trace, &lib_out, &analyzer::AnalyzeOptions::default()).expect("analyze");
    assert_eq!(report.summary.tokens.prefill, prompt);
    assert_eq!(report.summary.tokens.sampled, Some(n_gen));
    assert_eq!(report.summary.tokens.decode, n_gen - 1);
    assert_eq!(report.summary.events.lost, 0);

    // DAG node count = the engine's own graph node count (self-profile), for the
    // graph of the first decode step.
    let model = analyzer::ingest::load(&trace, &analyzer::NoProgress)
        .expect("load")
        .0;
    let d = analyzer::dag::build(&model, analyzer::IterSelector::FirstDecode).expect("dag");
    let graph_id = model.graphs()[d.graph as usize].graph_id;
    let engine_nodes = support::self_profile_graph_nodes(&selfprof, graph_id);
    assert_eq!(d.computed_nodes() as u64, engine_nodes);

    // Every edge is a source relation the node descriptions in force during that graph
    // reported (each address's last description before the graph ended).
    let reader = TraceReader::open(&trace).expect("open");
    let g = &model.graphs()[d.graph as usize];
    let end = g.end_ns.expect("graph ended");
    let mut descs: HashMap<u64, common::event::NodeDescEvent> = HashMap::new();
    for e in reader.events() {
        if let Ok(Event::NodeDesc(n)) = e
            && n.header.ts_ns < end
        {
            descs.insert(n.node_addr, *n);
        }
    }
    let mut real: HashSet<(u64, u64)> = HashSet::new();
    for n in descs.values() {
        for &s in n.structure.src.iter().filter(|&&s| s != 0) {
            real.insert((s, n.node_addr));
        }
    }
    for e in d.dag.edge_indices() {
        let (a, b) = d.dag.edge_endpoints(e).expect("edge");
        assert!(real.contains(&(d.dag[a].addr, d.dag[b].addr)));
    }

    // The Chrome JSON parses and slices nest per track.
    let doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(lib_out.join("timeline.json")).expect("read"),
    )
    .expect("timeline JSON");
    let mut tracks: HashMap<i64, Vec<(u64, u64)>> = HashMap::new();
    for e in doc["traceEvents"].as_array().expect("events") {
        if e["ph"] == "X" {
            let ns = |v: &serde_json::Value| (v.as_f64().unwrap_or(0.0) * 1000.0).round() as u64;
            let ts = ns(&e["ts"]);
            tracks
                .entry(e["tid"].as_i64().unwrap_or(0))
                .or_default()
                .push((ts, ts + ns(&e["dur"])));
        }
    }
    for (tid, mut v) in tracks {
        v.sort_by_key(|s| (s.0, std::cmp::Reverse(s.1)));
        let mut stack: Vec<(u64, u64)> = Vec::new();
        for s in v {
            while stack.last().is_some_and(|t| t.1 <= s.0) {
                stack.pop();
            }
            if let Some(t) = stack.last() {
                assert!(s.1 <= t.1, "tid {tid}: {s:?} overlaps {t:?}");
            }
            stack.push(s);
        }
    }
}
