//! The control map: one [`TracerControl`] record the collector writes and every probe
//! reads first, to filter by target and to switch levels on and off at run time (QoS).

use core::mem::{offset_of, size_of};

/// [`TracerControl::levels`]: token level (`engine_decode`).
pub const LEVEL_TOKEN: u32 = 1 << 0;
/// [`TracerControl::levels`]: graph level (`engine_graph_compute`).
pub const LEVEL_GRAPH: u32 = 1 << 1;
/// [`TracerControl::levels`]: operator level (`engine_op_compute`).
pub const LEVEL_OP: u32 = 1 << 2;
/// [`TracerControl::levels`]: phase level (`engine_phase_*`).
pub const LEVEL_PHASE: u32 = 1 << 3;
/// [`TracerControl::levels`]: scheduler tracepoints for the target's threads.
pub const LEVEL_SCHED: u32 = 1 << 4;
/// [`TracerControl::levels`]: CPU-clock samples of the target's threads (`--sample`):
/// the perf-event program sends them only while this is on. Not part of [`LEVEL_ALL`]:
/// sampling is asked for with its frequency.
pub const LEVEL_SAMPLE: u32 = 1 << 5;
/// Every level.
pub const LEVEL_ALL: u32 = LEVEL_TOKEN | LEVEL_GRAPH | LEVEL_OP | LEVEL_PHASE | LEVEL_SCHED;

/// [`TracerControl::op_detail`]: read the node's structure (dtype, shape, strides, sources).
pub const DETAIL_STRUCTURE: u32 = 1 << 0;
/// [`TracerControl::op_detail`]: read the per-thread counters at operator entry and exit.
pub const DETAIL_PMC: u32 = 1 << 1;
/// [`TracerControl::op_detail`]: both bounds of every operator span are probed on each
/// thread: the engine's node starts (`engine_op_compute`, besides its ends at
/// `engine_op_done`), llama.cpp's barrier waits (`ggml_barrier`, besides its nodes'
/// dispatches). Without it, one bound is probed and the other is where the barrier
/// between two nodes released: an engine node starts there, a llama.cpp node's span
/// runs to the thread's next node (its wait at the barrier included).
pub const DETAIL_EXACT_SPANS: u32 = 1 << 2;
/// [`TracerControl::op_detail`], read by the collector only: probe the engine's node ends
/// one at a time (`engine_op_done`, one probe hit per node and thread) even where the
/// engine can hand them over batched (`engine_op_times`, one hit per table of nodes).
pub const DETAIL_PER_NODE_ENDS: u32 = 1 << 3;

/// [`TracerControl::output`]: events go to the BPF ring buffer.
pub const OUTPUT_RING_BUF: u32 = 0;
/// [`TracerControl::output`]: events go to the per-CPU perf buffers.
pub const OUTPUT_PERF_BUF: u32 = 1;

/// Index of the single record in the control array map.
pub const CONTROL_INDEX: u32 = 0;

/// Per-CPU statistics slot: events the probes tried to emit.
pub const STAT_PRODUCED: u32 = 0;
/// Per-CPU statistics slot: events that did not fit in the buffer.
pub const STAT_LOST: u32 = 1;
/// Per-CPU statistics slot: probe hits whose `EngineNode`/`EngineGraph` carried an
/// `abi_version` other than `engine_abi::ENGINE_ABI_VERSION` (structure not recorded).
pub const STAT_ABI_MISMATCH: u32 = 2;
/// Per-CPU statistics slot: the last mismatching `abi_version` seen on that CPU (0 if
/// none), for the collector's message.
pub const STAT_ABI_SEEN: u32 = 3;
/// Per-CPU statistics slot: CPU-clock samples the perf-event program tried to send
/// (counted apart from the probes' records: the collector folds samples into histograms,
/// so they are never written one by one).
pub const STAT_SAMPLES: u32 = 4;
/// Per-CPU statistics slot: samples that did not fit in the buffer.
pub const STAT_SAMPLES_LOST: u32 = 5;
/// Number of per-CPU statistics slots.
pub const STAT_COUNT: u32 = 6;

/// Ring buffers the probes write (`EVENTS_0` ...): CPU `c` writes ring `c % RINGS`, so on
/// machines with up to `RINGS` CPUs no two CPUs share a ring's lock and producer line.
pub const RINGS: u32 = 8;

/// Maximum number of target threads with their own counters.
pub const MAX_PMC_THREADS: u32 = 256;
/// Maximum number of threads in the scheduler thread set.
pub const MAX_TRACED_THREADS: u32 = 4096;
/// Node addresses whose last description the probes remember (an LRU map): a graph has
/// a few thousand nodes.
pub const MAX_DESCRIBED_NODES: u32 = 1 << 16;

/// What the probes should record; written by the collector, read by every probe.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TracerControl {
    /// Thread-group id of the target; 0 means nothing is traced.
    pub target_tgid: u32,
    /// `LEVEL_*` bits currently on.
    pub levels: u32,
    /// `DETAIL_*` bits currently on (only meaningful with `LEVEL_OP`).
    pub op_detail: u32,
    /// Number of counters per thread (≤ `MAX_PMC`); slot `s` counter `c` is at map index
    /// `s * n_pmc + c`.
    pub n_pmc: u32,
    /// `OUTPUT_*` value.
    pub output: u32,
    /// Offset of `pid` (the new task's tid) in the `task:task_newtask` tracepoint record.
    pub newtask_pid_offset: u32,
    /// Offset of `clone_flags` (u64) in the `task:task_newtask` tracepoint record.
    pub newtask_clone_flags_offset: u32,
    /// `CONTROL_FLAG_*` bits.
    pub flags: u32,
    /// Bit `c` set: counter `c` is a hardware counter, which the kernel may multiplex, so
    /// the probes read it with its enabled and running times (`bpf_perf_event_read_value`)
    /// for scaling. Other counters (software ones never multiplex) are read as a bare
    /// count (`bpf_perf_event_read`), `enabled`/`running` 0: with four software counters
    /// that took the entry program from 1.58 to ~1.3 µs and the exit from 1.04 to 0.82 µs
    /// (`profinfer record -o T --levels op --structure --pmc -- engine probe-bench
    /// --calls 300000 --json`, the `cost:` line, before and after).
    pub pmc_scaled: u32,
    /// Unread bytes above which a ring-buffer record forces a wake-up of the collector
    /// (a quarter of each ring); 0: the probes ask the ring for its size.
    pub ring_wake_bytes: u32,
}
const _: () = assert!(size_of::<TracerControl>() == 40);
const _: () = assert!(offset_of!(TracerControl, flags) == 28);
const _: () = assert!(offset_of!(TracerControl, pmc_scaled) == 32);
const _: () = assert!(offset_of!(TracerControl, ring_wake_bytes) == 36);

/// [`TracerControl::flags`]: wake the collector at every decode exit (someone reacts to
/// tokens at once: the QoS controller or the live view). Off, the collector sees tokens
/// on its periodic drain; a forced wake-up costs ~20 µs inside the probe.
pub const CONTROL_FLAG_WAKE_ON_DECODE: u32 = 1 << 0;
/// [`TracerControl::flags`]: wake the collector at every graph exit. Set while leaf
/// nodes wait to be read from the target's memory (`tracer-user/src/leaves.rs`): a short
/// run could otherwise exit before the collector's next periodic drain, and its memory
/// with it.
pub const CONTROL_FLAG_WAKE_ON_GRAPH: u32 = 1 << 1;
const _: () = assert!(offset_of!(TracerControl, target_tgid) == 0);
const _: () = assert!(offset_of!(TracerControl, levels) == 4);
const _: () = assert!(offset_of!(TracerControl, newtask_clone_flags_offset) == 24);

#[cfg(feature = "user")]
// SAFETY: `#[repr(C)]`, only `u32` fields, no implicit padding (size asserted above), so
// every bit pattern is a valid value.
unsafe impl aya::Pod for TracerControl {}
