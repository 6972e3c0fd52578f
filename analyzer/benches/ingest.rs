//! Placeholder: replaced by the ingest benchmark.

fn main() {}
