//! The profinfer tracer: loads the eBPF probes, attaches them to an engine process,
//! collects events into a trace file (`trace-format`), and adapts probe levels to the
//! target's decode speed (QoS). `main.rs` is a thin CLI over [`cli::run`]. What is
//! particular to a traced program (profinfer's engine, llama.cpp) is in [`targets`];
//! [`record`] is the same for every target.

/// The compiled eBPF object (built by `build.rs`).
pub static EBPF_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer-ebpf"));

pub mod a64_uprobe;
pub mod analyze;
pub mod cli;
pub mod config;
pub mod counted_uprobe;
pub mod diff;
pub mod drain;
pub mod export;
pub mod leaves;
pub mod load;
pub mod observe;
pub mod output_limits;
pub mod perf_event;
pub mod pmc;
pub mod privileges;
pub mod probe_cost;
pub mod probe_points;
pub mod proc_maps;
pub mod qos;
pub mod record;
pub mod report;
pub mod samples;
pub mod target;
pub mod targets;
pub mod tui;
pub mod uprobe_cost_class;
pub mod windows;

/// An error and its sources on one line (only the first line of each: a verifier's log
/// follows its error's first line).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = String::new();
    let mut cur = Some(e);
    while let Some(c) = cur {
        if !s.is_empty() {
            s.push_str(": ");
        }
        s.push_str(c.to_string().lines().next().unwrap_or(""));
        cur = c.source();
    }
    s
}
