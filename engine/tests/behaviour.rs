//! End-to-end behaviour of the engine binary: results do not depend on the thread
//! count, repacked weights compute what the file's layout computes, chunked prefill equals
//! one-batch prefill (and the bench compares chunk sizes), and `--self-profile` records
//! every level of the probe ABI.

mod common;

use serde_json::Value;

fn logits(model: &std::path::Path, tokens: &str, threads: &str, batch: &str) -> Vec<f32> {
    let v = common::run_json(
        common::engine("eval")
            .arg("-m")
            .arg(model)
            .args(["--tokens", tokens, "-t", threads, "-b", batch, "--json"]),
    );
    common::floats_of(&v["logits"], "logits")
}

const PROMPT: &str = "1,17,29,300,45,46,47,100,101,102,7,8,9,10,11,12,13,250,251,252";

#[test]
fn logits_do_not_depend_on_the_thread_count() {
    for (preset, dtype) in [
        ("tiny-llama", "q4_0"),
        ("tiny-qwen2", "f16"),
        ("tiny-llama3", "q8_0"),
    ] {
        let model = common::model(preset, dtype);
        let one = logits(&model, PROMPT, "1", "512");
        for threads in ["2", "3"] {
            // Row splits change which thread computes a row, never how: bit-identical.
            assert_eq!(
                one,
                logits(&model, PROMPT, threads, "512"),
                "{preset} {dtype} at {threads} threads"
            );
        }
    }
}

#[test]
fn repacked_weights_match_the_file_layout() {
    for (preset, dtype) in [("tiny-llama", "q4_0"), ("tiny-llama3", "q8_0")] {
        let model = common::model(preset, dtype);
        let eval = |extra: &[&str]| {
            let v = common::run_json(
                common::engine("eval")
                    .arg("-m")
                    .arg(&model)
                    .args(["--tokens", PROMPT, "-t", "2", "--json"])
                    .args(extra),
            );
            common::floats_of(&v["logits"], "logits")
        };
        let (packed, plain) = (eval(&[]), eval(&["--no-repack"]));
        // Same integer block sums, accumulated per row in f32 instead of per lane:
        // equal to rounding, never bit-identical by construction.
        let max_abs = plain.iter().fold(0f32, |m, v| m.max(v.abs()));
        for (i, (a, b)) in packed.iter().zip(&plain).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 * max_abs.max(1.0),
                "{preset} {dtype} logit {i}: packed {a} vs plain {b}"
            );
        }
        assert_ne!(
            packed,
            vec![0f32; packed.len()],
            "{preset} {dtype}: logits are zero"
        );
    }
}

#[test]
fn chunked_prefill_matches_one_batch() {
    let model = common::model("tiny-llama", "f32");
    let whole = logits(&model, PROMPT, "2", "512");
    for batch in ["1", "3", "7"] {
        let chunked = logits(&model, PROMPT, "2", batch);
        let max_diff = whole
            .iter()
            .zip(&chunked)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        // Same math, different batching of the same f16 cache: equal to rounding.
        assert!(max_diff < 1e-3, "batch {batch}: max |Δ| {max_diff}");
    }
}

/// `engine bench --prefill-chunk`: one result per chunk size, in the order given, with
/// the chunk count each size implies and a latency per chunk no larger than the largest.
#[test]
fn bench_compares_prefill_chunk_sizes() {
    let model = common::model("tiny-llama", "q8_0");
    let v = common::run_json(common::engine("bench").arg("-m").arg(&model).args([
        "-p",
        "40",
        "-n",
        "0",
        "-r",
        "1",
        "--prefill-chunk",
        "8,16,40",
        "--json",
    ]));
    let chunks = v["chunks"].as_array().expect("chunks");
    let got: Vec<(u64, u64)> = chunks
        .iter()
        .map(|c| {
            (
                c["chunk"].as_u64().unwrap(),
                c["n_chunks"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, [(8, 5), (16, 3), (40, 1)]);
    for c in chunks {
        let (mean, max) = (
            c["chunk_ms"].as_f64().unwrap(),
            c["max_chunk_ms"].as_f64().unwrap(),
        );
        assert!(mean > 0.0 && mean <= max * 1.000_001, "{c}");
        assert!(c["prefill_tokens_per_s"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn self_profile_records_every_level() {
    let model = common::model("tiny-llama", "q8_0");
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("self-profile.jsonl");
    let run = common::run_json(
        common::engine("run")
            .arg("-m")
            .arg(&model)
            .args([
                "--tokens",
                PROMPT,
                "-n",
                "5",
                "-t",
                "2",
                "--ignore-eos",
                "--json",
                "--self-profile",
            ])
            .arg(&out),
    );
    assert_eq!(run["generated_tokens"].as_array().map(Vec::len), Some(5));
    let text = std::fs::read_to_string(&out).expect("self-profile written");
    let spans: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    let count = |level: &str| spans.iter().filter(|s| s["level"] == level).count();
    // One prefill batch + 4 decode steps.
    assert_eq!(count("token"), 5);
    assert_eq!(count("graph"), 5);
    let graphs: Vec<&Value> = spans.iter().filter(|s| s["level"] == "graph").collect();
    let nodes: u64 = graphs
        .iter()
        .map(|g| g["n_nodes"].as_u64().expect("n_nodes"))
        .sum();
    // Every node that computes something is run by both threads; empty ops are skipped.
    assert!(
        count("op") as u64 <= nodes * 2 && count("op") as u64 >= nodes,
        "{} ops for {nodes} nodes",
        count("op")
    );
    assert_eq!(count("op") % 2, 0, "each op is run by both threads");
    for phase in ["embed", "copy_logits", "softmax", "sample"] {
        let n = spans
            .iter()
            .filter(|s| s["level"] == "phase" && s["name"] == phase)
            .count();
        // embed and copy_logits once per decode call, softmax and sample once per token.
        assert_eq!(n, 5, "phase {phase}");
    }
    for s in &spans {
        let (a, b) = (
            s["start_ns"].as_u64().expect("start"),
            s["end_ns"].as_u64().expect("end"),
        );
        assert!(b >= a, "span ends before it starts: {s}");
    }
    // Ops nest inside their graph in time.
    for g in graphs {
        let id = &g["graph"];
        let (gs, ge) = (
            g["start_ns"].as_u64().unwrap_or(0),
            g["end_ns"].as_u64().unwrap_or(0),
        );
        for op in spans
            .iter()
            .filter(|s| s["level"] == "op" && &s["graph"] == id)
        {
            assert!(
                op["start_ns"].as_u64().unwrap_or(0) >= gs
                    && op["end_ns"].as_u64().unwrap_or(0) <= ge
            );
        }
    }
}
