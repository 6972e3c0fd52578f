//! Golden tests on traces recorded from the engine (`tests/data/README.md`): independent
//! checks against the raw events and the run's known shape, then `summary.json` and the
//! canonical DAG JSON against checked-in expected files (regression pins; regenerate
//! deliberately with `UPDATE_GOLDEN=1`).

mod support;

use std::collections::{HashMap, HashSet};

use analyzer::{IterSelector, dag, export::json::dag_json};
use common::event::{EventKind, PhaseEvent};
use pretty_assertions::assert_eq;
use support::{analyze, data, output, read_all};
use trace_format::Event;

/// Both traces: `engine run -p hello -n 3 --ignore-eos` (5 prompt tokens, 3 sampled).
const TRACES: [&str; 2] = ["tiny_t2.pftrace", "tiny_t1.pftrace"];

/// Whether to rewrite the golden files instead of comparing: only `UPDATE_GOLDEN=1`. Any
/// other value (`0`, `false`, empty) is a mistake that must not silently rewrite them.
fn update_golden() -> bool {
    match std::env::var_os("UPDATE_GOLDEN") {
        None => false,
        Some(v) if v == "1" => true,
        Some(v) => panic!(
            "UPDATE_GOLDEN={}: use UPDATE_GOLDEN=1 to rewrite the golden files, \
             or unset it to compare with them",
            v.to_string_lossy()
        ),
    }
}

fn golden(name: &str, actual: &str) {
    let path = data(name);
    if update_golden() {
        std::fs::write(&path, actual).expect("write golden");
        return;
    }
    let expected = std::fs::read_to_string(&path).expect("golden file exists");
    assert_eq!(expected, actual, "{name}");
}

#[test]
fn summaries_match_the_run_and_the_raw_events() {
    for t in TRACES {
        let (_, _, events) = read_all(&data(t));
        let (dir, report) = analyze(&data(t));
        let s = &report.summary;
        // The engine printed: prompt 5 tokens, generated 3.
        assert_eq!(s.tokens.prefill, 5, "{t}");
        assert_eq!(s.tokens.sampled, Some(3), "{t}");
        assert_eq!(s.tokens.decode, 2, "{t}");
        assert_eq!(s.events.lost, 0);
        assert_eq!(s.unpaired.total(), 0, "{t}");
        // TTFT from the raw records: first decode entry → first sample exit.
        let first = events
            .iter()
            .find(|e| matches!(e, Event::Decode(_)))
            .map(|e| e.header().ts_ns)
            .expect("a decode event");
        let sample_exit = events
            .iter()
            .filter_map(|e| match e {
                Event::Phase(PhaseEvent { header, .. })
                    if header.kind == EventKind::PhaseSample as u32 && header.is_exit() =>
                {
                    Some(header.ts_ns)
                }
                _ => None,
            })
            .min()
            .expect("a sample exit");
        let ttft = (sample_exit - first) as f64 / 1e6;
        assert!((s.ttft_ms.expect("ttft") - ttft).abs() < 1e-9, "{t}");
        // Threads with op events = the -t setting.
        let tids: HashSet<u32> = events
            .iter()
            .filter_map(|e| match e {
                Event::Op(o) => Some(o.header.tid),
                _ => None,
            })
            .collect();
        assert_eq!(s.threads, tids.len(), "{t}");
        golden(
            &t.replace(".pftrace", ".summary.json"),
            &output(&dir, "summary.json"),
        );
    }
}

#[test]
fn dag_matches_the_raw_events() {
    for t in TRACES {
        let (header, _, events) = read_all(&data(t));
        let model = {
            let (m, _, _) = analyzer::ingest::load(&data(t), &analyzer::NoProgress).expect("load");
            m
        };
        let d = dag::build(&model, IterSelector::FirstDecode).expect("dag");
        // The graph's announced node count (from its own event) = computed DAG nodes.
        let graph_events: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                Event::Graph(g) if !g.header.is_exit() => Some(*g),
                _ => None,
            })
            .collect();
        let g = graph_events[d.graph as usize];
        assert_eq!(g.pos, d.pos);
        assert_eq!(d.computed_nodes(), g.n_nodes as usize, "{t}");
        // Edges = the source addresses in the graph's op entry records.
        let (start, end) = (
            g.header.ts_ns,
            events
                .iter()
                .find_map(|e| match e {
                    Event::Graph(x) if x.header.is_exit() && x.header.ts_ns > g.header.ts_ns => {
                        Some(x.header.ts_ns)
                    }
                    _ => None,
                })
                .expect("graph exit"),
        );
        let mut want: HashSet<(u64, u64, u8)> = HashSet::new();
        let mut names: HashMap<u64, String> = HashMap::new();
        for e in &events {
            if let Event::Op(o) = e
                && !o.header.is_exit()
                && (start..end).contains(&o.header.ts_ns)
            {
                names.insert(o.node_addr, o.name_str().to_owned());
                for (slot, &s) in o.structure.src.iter().enumerate() {
                    if s != 0 {
                        want.insert((s, o.node_addr, slot as u8));
                    }
                }
            }
        }
        let got: HashSet<(u64, u64, u8)> = d
            .dag
            .edge_indices()
            .map(|e| {
                let (a, b) = d.dag.edge_endpoints(e).expect("edge");
                (d.dag[a].addr, d.dag[b].addr, d.dag[e].slot)
            })
            .collect();
        assert_eq!(got, want, "{t}");
        // Relations the engine's graph builder makes (engine/src/model/build.rs).
        let by_name: HashMap<&str, u64> = names.iter().map(|(a, n)| (n.as_str(), *a)).collect();
        for (src, dst, slot) in [
            ("kq-0", "kq_soft_max-0", 0),
            ("ffn_gate-0", "ffn_swiglu-0", 0),
            ("ffn_up-0", "ffn_swiglu-0", 1),
            ("Qcur_rope-0", "kq-0", 1),
        ] {
            assert!(
                want.contains(&(by_name[src], by_name[dst], slot)),
                "{t}: {src} → {dst}"
            );
        }
        let _ = header;
        golden(
            &t.replace(".pftrace", ".dag.json"),
            &(serde_json::to_string_pretty(&dag_json(&d, false)).expect("json") + "\n"),
        );
    }
}

#[test]
fn leaves_get_the_llama_cpp_tensor_names() {
    for t in TRACES {
        let (m, _, _) = analyzer::ingest::load(&data(t), &analyzer::NoProgress).expect("load");
        let d = dag::build(&m, IterSelector::FirstDecode).expect("dag");
        let leaves: Vec<&str> = d
            .dag
            .node_weights()
            .filter(|n| n.is_leaf())
            .map(|n| n.name.as_str())
            .collect();
        let layers = d
            .dag
            .node_weights()
            .filter_map(|n| u32::try_from(n.layer).ok())
            .max();
        let n_layers = layers.map_or(0, |l| l as usize + 1);
        // A llama block reads 9 weights (attn_norm, q, k, v, output, ffn_norm, gate, up,
        // down) and one K and one V cache view; the graph reads inp_embd, inp_pos,
        // output_norm and output. Each leaf is a different tensor: no name twice, none
        // left to the `src<slot> of` fallback.
        let unique: HashSet<&str> = leaves.iter().copied().collect();
        assert_eq!(unique.len(), leaves.len(), "{t}: {leaves:?}");
        assert!(
            !leaves.iter().any(|n| n.starts_with("src")),
            "{t}: {leaves:?}"
        );
        let weights = leaves
            .iter()
            .filter(|n| n.starts_with("blk.") && n.ends_with(".weight"))
            .count();
        assert_eq!(weights, 9 * n_layers, "{t}");
        assert_eq!(leaves.len(), 11 * n_layers + 4, "{t}: {leaves:?}");
        for l in 0..n_layers {
            for name in [
                format!("cache_k_l{l}"),
                format!("cache_v_l{l}"),
                format!("blk.{l}.attn_q.weight"),
            ] {
                assert!(unique.contains(name.as_str()), "{t}: {name}");
            }
        }
    }
}

/// `profinfer report`: every node span in exactly one group whichever the grouping, the
/// same spans as the summary counts, and the text pinned per grouping.
#[test]
fn reports_partition_the_operators_and_match_golden() {
    use analyzer::op_groups::GroupBy;
    for t in TRACES {
        let (_, report) = analyze(&data(t));
        let s = &report.summary;
        let spans = (s.nodes_per_graph * s.graphs as f64).round() as u64;
        let stem = t.trim_end_matches(".pftrace");
        for by in [GroupBy::OpType, GroupBy::Node, GroupBy::Layer] {
            let r = analyzer::report::report(&data(t), by, usize::MAX, &analyzer::NoProgress)
                .expect("report");
            assert_eq!(r.omitted, 0);
            assert_eq!(
                r.top.iter().map(|g| g.count).sum::<u64>(),
                spans,
                "{t} {by:?}"
            );
            let total: f64 = r.top.iter().map(|g| g.total_ms).sum();
            assert!((total - r.op_total_ms).abs() < 1e-9, "{t} {by:?}");
            let mut text = Vec::new();
            analyzer::export::terminal::write(&r, &mut text).expect("write");
            let text = String::from_utf8(text).expect("UTF-8");
            // The path is the machine's; the rest is the trace's.
            let text = text.replacen(&data(t).display().to_string(), t, 1);
            golden(&format!("{stem}.report-{}.txt", by.name()), &text);
        }
    }
}

/// `profinfer diff`: a run against itself changes nothing; 1 thread against 2 is pinned as
/// text, and its rows are the groups of both reports.
#[test]
fn diffs_match_the_reports_and_golden() {
    use analyzer::diff::{DiffPhase, Significance, diff_traces};
    use analyzer::op_groups::GroupBy;
    let (t1, t2) = (data("tiny_t1.pftrace"), data("tiny_t2.pftrace"));
    let same = diff_traces(&t2, &t2, GroupBy::Node, DiffPhase::Decode).expect("diff");
    assert!(same.only_a.is_empty() && same.only_b.is_empty());
    assert!(
        same.rows
            .iter()
            .all(|r| r.delta_ms == 0.0 && r.significance == Significance::WithinNoise)
    );
    for by in [GroupBy::OpType, GroupBy::Layer] {
        let d = diff_traces(&t1, &t2, by, DiffPhase::Decode).expect("diff");
        // Both runs have the same graph: every group is in both.
        assert!(d.only_a.is_empty() && d.only_b.is_empty(), "{by:?}");
        assert_eq!(d.a.calls, 2);
        let sum_a: f64 = d
            .rows
            .iter()
            .filter_map(|r| r.a.as_ref())
            .map(|s| s.ms_per_call)
            .sum();
        assert!((sum_a - d.a.op_ms_per_call).abs() < 1e-9);
        let mut text = Vec::new();
        analyzer::export::terminal::write_diff(&d, usize::MAX, &mut text).expect("write");
        let text = String::from_utf8(text)
            .expect("UTF-8")
            .replacen(&t1.display().to_string(), "tiny_t1.pftrace", 1)
            .replacen(&t2.display().to_string(), "tiny_t2.pftrace", 1);
        golden(&format!("tiny_t1_t2.diff-{}.txt", by.name()), &text);
    }
}
