//! The maps shared by all probes. Names are part of the loader contract
//! (`tracer-user/src/load.rs` looks them up by name).

use aya_ebpf::{
    macros::map,
    maps::{Array, HashMap, PerCpuArray, PerfEventArray, ProgramArray, RingBuf},
};
use common::{
    control::{
        MAX_DESCRIBED_NODES, MAX_PMC_THREADS, MAX_TRACED_THREADS, STAT_COUNT, TracerControl,
    },
    event::{DecodeEvent, GraphEvent, MAX_PMC},
    ggml_abi::{GgmlLayout, MAX_GGML_OPS, MAX_GGML_WORKERS},
    op_thread::OpThread,
};

/// The single control record (target tgid, levels on, details on, output kind).
#[map]
pub static CONTROL: Array<TracerControl> = Array::with_max_entries(1, 0);

/// Ring-buffer output, one ring per CPU (`control::RINGS`; CPU `c` writes ring
/// `c % RINGS`, see `emit::on_ring`): two CPUs recording at once would otherwise bounce
/// one ring's lock and producer position between them on every record. The loader sizes
/// the rings of the online CPUs and gives the others one page.
#[map]
pub static EVENTS_0: RingBuf = RingBuf::with_byte_size(4096, 0);
/// Ring of CPUs `1 + k·RINGS`.
#[map]
pub static EVENTS_1: RingBuf = RingBuf::with_byte_size(4096, 0);
/// Ring of CPUs `2 + k·RINGS`.
#[map]
pub static EVENTS_2: RingBuf = RingBuf::with_byte_size(4096, 0);
/// Ring of CPUs `3 + k·RINGS`.
#[map]
pub static EVENTS_3: RingBuf = RingBuf::with_byte_size(4096, 0);
/// Ring of CPUs `4 + k·RINGS`.
#[map]
pub static EVENTS_4: RingBuf = RingBuf::with_byte_size(4096, 0);
/// Ring of CPUs `5 + k·RINGS`.
#[map]
pub static EVENTS_5: RingBuf = RingBuf::with_byte_size(4096, 0);
/// Ring of CPUs `6 + k·RINGS`.
#[map]
pub static EVENTS_6: RingBuf = RingBuf::with_byte_size(4096, 0);
/// Ring of CPUs `7 + k·RINGS`.
#[map]
pub static EVENTS_7: RingBuf = RingBuf::with_byte_size(4096, 0);
const _: () = assert!(common::control::RINGS == 8);

/// Perf-buffer output (one buffer per CPU, opened by the collector).
#[map]
pub static PERF_EVENTS: PerfEventArray<u8> = PerfEventArray::new(0);

/// Per-CPU counters: `STAT_PRODUCED`, `STAT_LOST`.
#[map]
pub static STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(STAT_COUNT, 0);

/// Bytes of the largest record built outside the ring buffer ([`LargeBlock`]).
pub const LARGE_BLOCK_BYTES: usize = 512;

/// Room for any record too large for the 512-byte BPF stack next to a probe's other
/// locals (operator descriptions, expert routes, spans with counters).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct LargeBlock {
    /// The bytes, as words (8-byte aligned).
    pub words: [u64; LARGE_BLOCK_BYTES / 8],
}

/// One all-zero block (never written): the value `LARGE_SCRATCH` slots are created from.
#[map]
pub static LARGE_ZERO: Array<LargeBlock> = Array::with_max_entries(1, 0);

/// tid → scratch block for large records in perf-buffer mode (the ring buffer reserves
/// them in place). Per *thread*, not per CPU: uprobe programs run with migration
/// disabled but, on a preemptible kernel, not with preemption disabled
/// (`bpf_prog_run_array_uprobe` only calls `migrate_disable()`), so a per-CPU slot could
/// be overwritten by another thread's probe on the same CPU while the first is still
/// filling it. One thread never runs two probes at once, so a per-thread slot cannot
/// race.
#[map]
pub static LARGE_SCRATCH: HashMap<u32, LargeBlock> =
    HashMap::with_max_entries(MAX_TRACED_THREADS, 0);

/// tid → the thread's operator-probe state: the node it has open and since when.
#[map]
pub static OP_THREADS: HashMap<u32, OpThread> = HashMap::with_max_entries(MAX_TRACED_THREADS, 0);

/// Fingerprint of the description last sent for the node at each position of a graph
/// (slot `index % MAX_DESCRIBED_NODES`; the fingerprint covers the node's address too):
/// `NodeDescEvent`s go out only when it changes. An array indexed by position, not a
/// hash map keyed by address: the checks of a graph walk it in order, one inlined lookup
/// each (a hash lookup of a cold table cost more than the rest of the probe).
#[map]
pub static DESC_SEEN: Array<u64> = Array::with_max_entries(MAX_DESCRIBED_NODES, 0);

/// Per-CPU scratch: a node read in one piece to fingerprint it. The first word holds the
/// reading thread's tid, checked after the read (another thread's program could run on
/// the same CPU in between on a preemptible kernel; its read then wins and this one
/// skips the description, which the node's next start sends).
#[map]
pub static NODE_BLOB: PerCpuArray<NodeBlob> = PerCpuArray::with_max_entries(1, 0);

/// Words of [`NodeBlob`] after its tid word.
pub const NODE_BLOB_WORDS: usize = 48;

/// A node's bytes as read from the target.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct NodeBlob {
    /// Tid of the thread that filled it.
    pub tid: u64,
    /// The node.
    pub words: [u64; NODE_BLOB_WORDS],
}

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

/// llama.cpp targets: graphs started so far (the node index restarts with each).
#[map]
pub static GGML_GRAPH_SEQ: Array<u64> = Array::with_max_entries(1, 0);

/// llama.cpp targets: `ith` → tid of the threads computing the current graph, so that
/// the graph's end (on thread 0) can close every thread's last span: nothing on a worker
/// marks its last node's end but the barrier it then waits at.
#[map]
pub static GGML_WORKERS: Array<u32> = Array::with_max_entries(MAX_GGML_WORKERS, 0);

/// llama.cpp targets: slot 0 holds `ggml_expert_route`, tail-called from the dispatch of
/// an expert-indexed product (`probes/llama_cpp.rs`); empty when the collector did not
/// load it (then the tail call falls through).
#[map]
pub static GGML_ROUTE: ProgramArray = ProgramArray::with_max_entries(1, 0);

/// llama.cpp targets: slot 0 holds `llama_decode_seqs`, slot 1 `llama_process_seqs`,
/// tail-called from the token probes to count a batch's sequences (they need
/// `bpf_loop`, Linux 5.17); empty where the kernel refused them (the token probes then
/// record batches without sequences).
#[map]
pub static GGML_SEQS: ProgramArray = ProgramArray::with_max_entries(2, 0);

/// llama.cpp targets: a ggml backend's 16-byte GUID (two little-endian words) → its
/// `BackendKind` (`common::ggml_backends`, written by the collector). A backend not in it
/// is recorded as a GPU.
#[map]
pub static GGML_BACKEND_GUIDS: HashMap<[u64; 2], u32> = HashMap::with_max_entries(16, 0);

/// llama.cpp targets: the backend call each thread is in, per family (`tid << 1 |
/// family`: 0 ggml-backend, 1 Vulkan), closed at its return (`probes/ggml_backend.rs`).
#[map]
pub static BACKEND_CALLS: HashMap<u64, BackendCallStash> =
    HashMap::with_max_entries(2 * MAX_TRACED_THREADS, 0);

/// An open backend call ([`BACKEND_CALLS`]).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct BackendCallStash {
    /// The span so far (its start, kind, backend, bytes and object).
    pub span: common::event::BackendSpanEvent,
    /// Calls of the same family entered inside it and not yet returned (recorded as
    /// part of it).
    pub depth: u32,
    /// Zero.
    pub _pad: u32,
}

/// llama.cpp's Vulkan backend: where each thread's `vkGetQueryPoolResults` call writes its
/// values, read at its return (`probes/gpu_node.rs`).
#[map]
pub static GPU_QUERY_READS: HashMap<u32, GpuQueryRead> =
    HashMap::with_max_entries(MAX_TRACED_THREADS, 0);

/// An open `vkGetQueryPoolResults` call ([`GPU_QUERY_READS`]).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GpuQueryRead {
    /// `pData`.
    pub data: u64,
    /// `queryCount` (values of 8 bytes each).
    pub total: u32,
    /// Zero.
    pub _pad: u32,
}
