//! Prints the number of records of each kind in a trace, and per thread for the
//! scheduler kinds: `cargo run --release -p trace-format --example trace_stats -- TRACE`.

use std::collections::BTreeMap;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: trace_stats TRACE")?;
    let reader = trace_format::TraceReader::open(&path)?;
    let mut by_kind: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_tid: BTreeMap<(String, u32), u64> = BTreeMap::new();
    for event in reader.events() {
        let event = event?;
        let kind = format!("{:?}", event.kind());
        *by_kind.entry(kind.clone()).or_default() += 1;
        *by_tid.entry((kind, event.header().tid)).or_default() += 1;
    }
    for (k, n) in &by_kind {
        println!("{k:<24} {n:>10}");
    }
    println!("-- per thread");
    for ((k, tid), n) in &by_tid {
        println!("{k:<24} tid {tid:<8} {n:>10}");
    }
    Ok(())
}
