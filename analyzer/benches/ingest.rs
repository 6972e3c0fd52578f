//! Ingest throughput, in one run, on a large synthetic trace:
//! - `A_read_owned`: the reader's owned events (`TraceReader::events`, one `Box` per
//!   operator record);
//! - `A_read_borrowed`: the reader's chunks with borrowed records (`TraceReader::chunks`);
//! - `B_model_owned`: owned events through `Reorder<Event>` into `TraceModel::apply`
//!   (the analyzer's path before borrowed records);
//! - `B_model_borrowed`: `ingest::load`, what `profinfer analyze` does before exporting.
//!
//! `cargo bench -p analyzer --bench ingest`; `INGEST_EVENTS` sets the trace size
//! (default 500,000 events, ~200 MB in the temp directory, removed afterwards).

#![expect(
    missing_docs,
    reason = "criterion_group! generates an undocumented pub fn"
)]

use std::hint::black_box;

use analyzer::{
    NoProgress, TraceModel,
    ingest::{Reorder, load},
    synthetic::{SynthSpec, write_trace},
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use trace_format::{Event, TraceReader};

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
    g.bench_function("A_read_owned", |b| {
        b.iter(|| {
            let r = TraceReader::open(&path).expect("open");
            let mut k = 0u64;
            for e in r.events() {
                k += black_box(e.expect("event")).header().ts_ns & 1;
            }
            k
        });
    });
    g.bench_function("A_read_borrowed", |b| {
        b.iter(|| {
            let r = TraceReader::open(&path).expect("open");
            let mut k = 0u64;
            let mut chunks = r.chunks();
            while let Some(chunk) = chunks.next() {
                let chunk = chunk.expect("chunk");
                for rec in chunk.records() {
                    k += black_box(rec.expect("record")).header().ts_ns & 1;
                }
                chunks.recycle(chunk);
            }
            k
        });
    });
    g.bench_function("B_model_owned", |b| {
        b.iter(|| {
            let r = TraceReader::open(&path).expect("open");
            let mut m = TraceModel::new(r.header());
            let mut window: Reorder<Event> = Reorder::default();
            let mut apply = |e: &Event| m.apply(e);
            for e in r.events() {
                window.push(e.expect("event"), &mut apply);
            }
            window.finish(&mut apply);
            m.finish(None);
            black_box(m.node_spans().len())
        });
    });
    g.bench_function("B_model_borrowed", |b| {
        b.iter(|| {
            let (m, _, _) = load(&path, &NoProgress).expect("load");
            black_box(m.node_spans().len())
        });
    });
    g.finish();
}

criterion_group!(benches, ingest);
criterion_main!(benches);
