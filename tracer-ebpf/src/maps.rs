//! The maps shared by all probes. Names are part of the loader contract
//! (`tracer-user/src/load.rs` looks them up by name).

use aya_ebpf::{
    macros::map,
    maps::{Array, HashMap, PerCpuArray, PerfEventArray, RingBuf},
};
use common::{
    control::{MAX_PMC_THREADS, MAX_TRACED_THREADS, STAT_COUNT, TracerControl},
    event::{DecodeEvent, ExpertRouteEvent, GraphEvent, MAX_PMC, OpEvent},
    ggml_abi::{GgmlLayout, GgmlThread, MAX_GGML_OPS},
};

/// The single control record (target tgid, levels on, details on, output kind).
#[map]
pub static CONTROL: Array<TracerControl> = Array::with_max_entries(1, 0);

/// Ring buffer output; the loader sets its size.
#[map]
pub static EVENTS: RingBuf = RingBuf::with_byte_size(1 << 22, 0);

/// Perf-buffer output (one buffer per CPU, opened by the collector).
#[map]
pub static PERF_EVENTS: PerfEventArray<u8> = PerfEventArray::new(0);

/// Per-CPU counters: `STAT_PRODUCED`, `STAT_LOST`.
#[map]
pub static STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(STAT_COUNT, 0);

/// One all-zero operator record (never written): the template `OP_SCRATCH` entries are
/// reset from (an `OpEvent` is too large for the 512-byte BPF stack next to the rest).
#[map]
pub static OP_ZERO: Array<OpEvent> = Array::with_max_entries(1, 0);

/// tid → scratch record for operator events in perf-buffer mode. Per *thread*, not per
/// CPU: uprobe programs run with migration disabled but, on a preemptible kernel, not
/// with preemption disabled (`bpf_prog_run_array_uprobe` only calls
/// `migrate_disable()`), so a per-CPU slot could be overwritten by another thread's op
/// probe on the same CPU while the first is still filling it. One thread never runs two
/// op probes at once, so a per-thread slot cannot race.
#[map]
pub static OP_SCRATCH: HashMap<u32, OpEvent> = HashMap::with_max_entries(MAX_TRACED_THREADS, 0);

/// One all-zero expert-route record, the template `ROUTE_SCRATCH` entries are reset from.
#[map]
pub static ROUTE_ZERO: Array<ExpertRouteEvent> = Array::with_max_entries(1, 0);

/// tid → scratch record for expert-route events in perf-buffer mode (per thread, like
/// `OP_SCRATCH`).
#[map]
pub static ROUTE_SCRATCH: HashMap<u32, ExpertRouteEvent> =
    HashMap::with_max_entries(MAX_TRACED_THREADS, 0);

/// tid → the entry record of the decode call in flight on that thread.
#[map]
pub static DECODE_STASH: HashMap<u32, DecodeEvent> =
    HashMap::with_max_entries(MAX_TRACED_THREADS, 0);

/// tid → the entry record of the graph computation in flight on that thread.
#[map]
pub static GRAPH_STASH: HashMap<u32, GraphEvent> = HashMap::with_max_entries(MAX_TRACED_THREADS, 0);

/// The target's threads (tid → 1), for the scheduler probes. Seeded by the collector,
/// extended in-kernel on fork/clone, pruned on exit.
#[map]
pub static TIDS: HashMap<u32, u32> = HashMap::with_max_entries(MAX_TRACED_THREADS, 0);

/// tid → counter slot; counter `c` of slot `s` is `COUNTERS[s * n_pmc + c]`.
#[map]
pub static PMC_SLOTS: HashMap<u32, u32> = HashMap::with_max_entries(MAX_PMC_THREADS, 0);

/// Per-thread perf-event counters stored by the collector (the loader sets the size to
/// `MAX_PMC_THREADS * MAX_PMC`).
#[map]
pub static COUNTERS: PerfEventArray<u32> = PerfEventArray::new(0);

/// Size the loader gives `COUNTERS`.
#[expect(
    dead_code,
    reason = "documents the loader contract; the loader sets the size"
)]
pub const COUNTERS_LEN: u32 = MAX_PMC_THREADS * MAX_PMC as u32;

/// llama.cpp targets: the detected build's field offsets (one record).
#[map]
pub static GGML_LAYOUT: Array<GgmlLayout> = Array::with_max_entries(1, 0);

/// llama.cpp targets: the build's op number → profinfer's op id, by name (the collector
/// fills every slot; an op profinfer does not know maps to `OP_UNKNOWN_BASE | op`).
#[map]
pub static GGML_OPS: Array<u32> = Array::with_max_entries(MAX_GGML_OPS, 0);

/// llama.cpp targets: tid → operator-probe state (open node, nesting depth, node index).
#[map]
pub static GGML_THREADS: HashMap<u32, GgmlThread> =
    HashMap::with_max_entries(MAX_TRACED_THREADS, 0);

/// llama.cpp targets: graphs started so far (the node index restarts with each).
#[map]
pub static GGML_GRAPH_SEQ: Array<u64> = Array::with_max_entries(1, 0);
