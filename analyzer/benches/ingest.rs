//! Ingest throughput: events/s of reading a large synthetic trace alone (A) against
//! reading it into the model through the reordering window (B), in one run.
//!
//! `cargo bench -p analyzer --bench ingest`; `INGEST_EVENTS` sets the trace size
//! (default 500,000 events, ~200 MB in the temp directory, removed afterwards).

#![expect(
    missing_docs,
    reason = "criterion_group! generates an undocumented pub fn"
)]

use std::hint::black_box;

use analyzer::{
    NoProgress,
    ingest::load,
    synthetic::{SynthSpec, write_trace},
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use trace_format::TraceReader;

/// Default number of events of the generated trace.
const DEFAULT_EVENTS: u64 = 500_000;

fn ingest(c: &mut Criterion) {
    let target: u64 = std::env::var("INGEST_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_EVENTS);
    // 100 nodes × 2 threads × 2 records + 6 per token.
    let per_token = SynthSpec::sized(1, 100, 2).event_count();
    let spec = SynthSpec::sized((target / per_token).max(1) as u32, 100, 2);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("large.pftrace");
    let n = write_trace(&path, &spec).expect("write synthetic trace");
    let mut g = c.benchmark_group("ingest");
    g.sample_size(10);
    g.throughput(Throughput::Elements(n));
    g.bench_function("A_read_only", |b| {
        b.iter(|| {
            let r = TraceReader::open(&path).expect("open");
            let mut k = 0u64;
            for e in r.events() {
                k += black_box(e.expect("event")).header().ts_ns & 1;
            }
            k
        });
    });
    g.bench_function("B_read_and_model", |b| {
        b.iter(|| {
            let (m, _, _) = load(&path, &NoProgress).expect("load");
            black_box(m.node_spans().len())
        });
    });
    g.finish();
}

criterion_group!(benches, ingest);
criterion_main!(benches);
