//! Writes a synthetic trace of about `EVENTS` events (format 4, operator ends probed, 100
//! nodes × 2 threads per graph: the shape of a small model's decode), for measuring the
//! analyzer on recordings longer than a test would make (`docs/performance.md`).
//!
//! `cargo run --release -p analyzer --example synth_trace -- OUT.pftrace 50000000`

use analyzer::synthetic::{SynthRecords, SynthSpec, write_trace};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(out), Some(events)) = (args.next(), args.next()) else {
        return Err("usage: synth_trace OUT.pftrace EVENTS".into());
    };
    let events: u64 = events.parse()?;
    let shape = |tokens| SynthSpec::sized(tokens, 100, 2).with_records(SynthRecords::Ends);
    // Events per decode call, from a small trace of the same shape.
    let probe = std::env::temp_dir().join(format!("synth-probe-{}.pftrace", std::process::id()));
    let per_token = (write_trace(&probe, &shape(100))? / 100).max(1);
    std::fs::remove_file(&probe)?;
    let spec = shape(u32::try_from(events / per_token)?.max(1));
    let n = write_trace(std::path::Path::new(&out), &spec)?;
    println!("{out}: {n} events, {} decode calls", spec.tokens);
    Ok(())
}
