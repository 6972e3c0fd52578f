//! Timeline export, Chrome JSON against Perfetto protobuf: file size and write time for a
//! synthetic model shaped like one minute of llama3.2-1b decode on 2 threads (~340
//! operator nodes per token, ~20 tokens/s: 1200 decode calls, 816,000 operator slices;
//! no scheduler events and no counters, which the synthetic trace does not have).
//!
//! `cargo bench -p analyzer --bench timeline`; `TIMELINE_TOKENS`, `TIMELINE_NODES`,
//! `TIMELINE_THREADS` change the shape, `TIMELINE_RUNS` the runs per format (best kept).
//! `TIMELINE_TRACE=path` measures a recorded trace instead (e.g. the checked-in
//! `analyzer/tests/data/tiny_t2.pftrace`, which has scheduler events and counters).
//! Each run writes through a `BufWriter` to a file in a temporary directory;
//! `TIMELINE_KEEP=dir` copies the two files there.

use std::{
    fs::File,
    io::BufWriter,
    time::{Duration, Instant},
};

use analyzer::{
    export::{chrome, perfetto},
    synthetic::{self, SynthSpec},
};

fn env(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument is a filter we do not have.
    let tokens = env("TIMELINE_TOKENS", 1200);
    let nodes = env("TIMELINE_NODES", 340);
    let threads = env("TIMELINE_THREADS", 2);
    let runs = env("TIMELINE_RUNS", 3).max(1);
    let mut spec = SynthSpec::sized(tokens, nodes, threads);
    // ~50 ms per decode call, as llama3.2-1b q8_0 on this machine's 2 threads.
    spec.op_ns = 145_000;
    let t0 = Instant::now();
    let model = match std::env::var_os("TIMELINE_TRACE") {
        Some(path) => {
            println!("model: {}", std::path::Path::new(&path).display());
            analyzer::ingest::load(std::path::Path::new(&path), &analyzer::NoProgress)
                .expect("load trace")
                .0
        }
        None => {
            println!("model: {tokens} decode calls × {nodes} nodes × {threads} threads");
            synthetic::model(&spec, None)
        }
    };
    println!(
        "{} operator slices, {:.1} s of trace, built in {:.2} s",
        model.slices().len(),
        (model.last_ns() - model.first_ns().unwrap_or(0)) as f64 / 1e9,
        t0.elapsed().as_secs_f64()
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut results = Vec::new();
    for (label, file) in [
        ("chrome json", "timeline.json"),
        ("perfetto pb", "timeline.perfetto-trace"),
    ] {
        let path = dir.path().join(file);
        let mut best = Duration::MAX;
        for _ in 0..runs {
            let w = BufWriter::new(File::create(&path).expect("create"));
            let t = Instant::now();
            if file.ends_with("json") {
                chrome::write(&model, &chrome::ChromeOptions::default(), w).expect("write");
            } else {
                perfetto::write(&model, &perfetto::PerfettoOptions::default(), w).expect("write");
            }
            best = best.min(t.elapsed());
        }
        let size = std::fs::metadata(&path).expect("metadata").len();
        if let Some(keep) = std::env::var_os("TIMELINE_KEEP") {
            std::fs::create_dir_all(&keep).expect("create TIMELINE_KEEP");
            std::fs::copy(&path, std::path::Path::new(&keep).join(file)).expect("copy");
        }
        results.push((label, size, best));
    }
    println!(
        "| format | size | bytes/op slice | write time (best of {runs}) | MB/s | op slices/s |"
    );
    println!("|---|---|---|---|---|---|");
    let n = model.slices().len() as f64;
    for (label, size, best) in &results {
        let s = best.as_secs_f64();
        println!(
            "| {label} | {size} B | {:.1} | {:.3} s | {:.0} | {:.2} M |",
            *size as f64 / n,
            s,
            *size as f64 / 1e6 / s,
            n / s / 1e6
        );
    }
    let (j, p) = (&results[0], &results[1]);
    println!(
        "protobuf / json: size {:.3}, write time {:.3}",
        p.1 as f64 / j.1 as f64,
        p.2.as_secs_f64() / j.2.as_secs_f64()
    );
}
