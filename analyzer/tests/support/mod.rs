//! Helpers shared by the integration tests.
#![allow(dead_code, reason = "each test file uses a different subset")]

use std::path::{Path, PathBuf};

use analyzer::{AnalyzeOptions, AnalyzeReport};
use trace_format::{Event, TraceFooter, TraceHeader, TraceReader, TraceWriter};

/// A checked-in test file.
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Header, footer and every event of a trace, in file order.
pub fn read_all(path: &Path) -> (TraceHeader, Option<TraceFooter>, Vec<Event>) {
    let r = TraceReader::open(path).expect("trace opens");
    let events = r.events().map(|e| e.expect("event decodes")).collect();
    (r.header().clone(), r.footer().cloned(), events)
}

/// The wire bytes of an event.
pub fn event_bytes(e: &Event) -> Vec<u8> {
    e.to_bytes()
}

/// Writes a trace with these events (small chunks, so chunk boundaries fall inside).
pub fn write(path: &Path, header: &TraceHeader, footer: Option<&TraceFooter>, events: &[Event]) {
    let mut w = TraceWriter::create(path, header).expect("create trace");
    w.set_chunk_bytes(4096);
    for e in events {
        w.push_raw(&event_bytes(e)).expect("push");
    }
    match footer {
        Some(f) => w.finish(f).expect("finish"),
        None => w.flush_chunk().expect("flush"),
    }
}

/// Analyzes a trace into a fresh directory, without graphics.
pub fn analyze(trace: &Path) -> (tempfile::TempDir, AnalyzeReport) {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = analyzer::run(
        trace,
        dir.path(),
        &AnalyzeOptions::default().with_graphics(false),
    )
    .expect("analysis succeeds");
    (dir, report)
}

/// Reads an output file as a string.
pub fn output(dir: &tempfile::TempDir, name: &str) -> String {
    std::fs::read_to_string(dir.path().join(name)).expect("output exists")
}
