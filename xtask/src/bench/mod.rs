//! `cargo xtask bench ...`: benchmarks that compare A against B in one run (interleaved
//! repetitions on the same machine), reported as Markdown tables under `out/bench/`.

pub mod llama_cpp;
pub mod overhead;
pub mod probes;
