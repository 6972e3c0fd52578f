//! Event wire records: what the eBPF probes (and the collector) put into the ring
//! buffer and what the trace file stores, byte for byte.
//!
//! Every record is an [`EventHeader`] followed by a payload whose type is fixed by
//! [`EventKind`]; [`EventKind::record_size`] gives the record's total size. All records are
//! `#[repr(C)]`, little-endian on the wire, built from fixed-width integers with explicit
//! padding, and 8-byte aligned. A layout never changes within a trace format version; a
//! change bumps the format version (`docs/trace-format.md`) and the reader keeps
//! converting the old layout (the only change so far: [`OpEvent`] of format 1, 432 bytes
//! without `op_params`, see [`OP_EVENT_V1_SIZE`]).

use core::mem::{offset_of, size_of};

use crate::engine_abi::{MAX_DIMS, MAX_OP_PARAMS, MAX_SRC, NODE_NAME_LEN};

mod backend_span;
mod cpu_sample;
mod gpu_timestamps;
mod op_span;
pub use backend_span::{BACKEND_UNKNOWN, BackendSpanEvent, BackendSpanKind};
pub use cpu_sample::{
    CpuSampleEvent, SAMPLE_COUNT_ENTRIES, SAMPLE_FRAMES, SAMPLE_OP_OTHER, SAMPLE_OP_WAIT,
    SAMPLE_PHASE_DECODE, SAMPLE_PHASE_IDLE, SAMPLE_PHASE_PREFILL, SAMPLE_STACK_WORDS,
    SampleCountsEvent,
};
pub use gpu_timestamps::{GPU_TIMESTAMPS_MAX, GPU_TIMESTAMPS_PER_EVENT, GpuTimestampsEvent};
pub use op_span::{
    NodeDescEvent, OP_SPAN_BACKEND_SHIFT, OP_SPAN_DUR_US, OP_SPAN_END_APPROX, OP_SPAN_FUSED,
    OP_SPAN_ITH_MASK, OP_SPAN_START_AT_RELEASE, OpSpanEvent, OpSpanPmcEvent,
};

/// [`EventHeader::flags`]: the record is the exit (return) side of a probe.
pub const EVENT_FLAG_EXIT: u32 = 1 << 0;

/// Maximum number of performance counters read per operator event.
pub const MAX_PMC: usize = 8;
/// Bytes of a task `comm` (the kernel's `TASK_COMM_LEN`).
pub const COMM_LEN: usize = 16;

/// What an event is. Numbers are stable: each probe level owns a range (token 1..,
/// graph 10.., operator 20.., phase 30.., scheduler 40.., collector 60..); retired values
/// stay holes, nothing is ever renumbered.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// `engine_decode` entry/exit ([`DecodeEvent`]).
    Decode = 1,
    /// `engine_graph_compute` entry/exit ([`GraphEvent`]).
    GraphCompute = 10,
    /// A thread begins its walk over a graph ([`GraphThreadEvent`], `engine_graph_thread`).
    GraphThread = 11,
    /// A copy, wait, submission or fence wait between the CPU and another backend
    /// ([`BackendSpanEvent`], llama.cpp's `ggml-backend` and the Vulkan loader).
    BackendSpan = 12,
    /// `engine_op_compute` entry ([`OpEvent`]); in traces of format 1 and 2 also the
    /// exit (with `EVENT_FLAG_EXIT`), which readers convert to [`OpExitEvent`].
    OpCompute = 20,
    /// `engine_op_compute` exit ([`OpExitEvent`], trace format 3 on).
    OpComputeExit = 21,
    /// The experts an expert-indexed product (`MUL_MAT_ID`) uses, read at its entry
    /// ([`ExpertRouteEvent`]).
    ExpertRoute = 22,
    /// One thread's execution of one node, recorded at its end ([`OpSpanEvent`], trace
    /// format 4 on).
    OpSpan = 23,
    /// A node's description, sent when it changed ([`NodeDescEvent`], format 4 on).
    NodeDesc = 24,
    /// An [`OpSpanEvent`] with counter deltas ([`OpSpanPmcEvent`], format 4 on).
    OpSpanPmc = 25,
    /// Timestamps a GPU wrote between a split's nodes, as the target read them back
    /// ([`GpuTimestampsEvent`], format 4 on, additive).
    GpuTimestamps = 26,
    /// `engine_phase_embed` entry/exit ([`PhaseEvent`]).
    PhaseEmbed = 30,
    /// `engine_phase_copy_logits` entry/exit ([`PhaseEvent`]).
    PhaseCopyLogits = 31,
    /// `engine_phase_softmax` entry/exit ([`PhaseEvent`]).
    PhaseSoftmax = 32,
    /// `engine_phase_sample` entry/exit ([`PhaseEvent`]).
    PhaseSample = 33,
    /// `engine_phase_kv_compress` entry/exit ([`PhaseEvent`], `arg` = bytes produced).
    PhaseKvCompress = 34,
    /// `engine_phase_kv_swap_out` entry/exit ([`PhaseEvent`], `arg` = bytes written).
    PhaseKvSwapOut = 35,
    /// `engine_phase_kv_swap_in` entry/exit ([`PhaseEvent`], `arg` = bytes read).
    PhaseKvSwapIn = 36,
    /// `engine_phase_kv_decompress` entry/exit ([`PhaseEvent`], `arg` = bytes restored).
    PhaseKvDecompress = 37,
    /// `sched:sched_switch` involving a target thread ([`SchedSwitchEvent`]).
    SchedSwitch = 40,
    /// `sched:sched_wakeup` of a target thread ([`SchedWakeupEvent`]).
    SchedWakeup = 41,
    /// `sched:sched_wakeup_new` of a target thread ([`SchedWakeupEvent`]).
    SchedWakeupNew = 42,
    /// A target thread created a thread of the target (`task:task_newtask` with
    /// `CLONE_THREAD`, [`TaskEvent`]); child processes are not followed.
    TaskNew = 43,
    /// A target thread exited (`sched:sched_process_exit`, [`TaskEvent`]).
    TaskExit = 44,
    /// A CPU-clock sample of a target thread, its user stack (`--sample`,
    /// [`CpuSampleEvent`]); the collector folds these into [`EventKind::SampleCounts`]
    /// and never writes them.
    CpuSample = 45,
    /// Collector: QoS controller switched probe levels ([`QosSwitchEvent`]).
    QosSwitch = 60,
    /// Collector: events lost on one CPU up to this point ([`LossEvent`]).
    Loss = 61,
    /// Collector: per-thread counters opened for a thread ([`PmcOpenEvent`]).
    PmcOpen = 62,
    /// Collector: a source node that is not a computed node (weight, KV-cache view,
    /// graph input), read from the target's memory ([`LeafNodeEvent`]).
    LeafNode = 63,
    /// Collector: a sampled window of operator recording began or ended
    /// ([`OpWindowEvent`]).
    OpWindow = 64,
    /// Collector: CPU-clock samples of one thread in one phase and interval, per
    /// operator ([`SampleCountsEvent`]).
    SampleCounts = 65,
}

/// The pattern of every phase kind (`PHASE_*`, all carried by a [`PhaseEvent`]), for
/// `match` arms: `phase_event_kinds!() => ...`.
#[macro_export]
macro_rules! phase_event_kinds {
    () => {
        $crate::event::EventKind::PhaseEmbed
            | $crate::event::EventKind::PhaseCopyLogits
            | $crate::event::EventKind::PhaseSoftmax
            | $crate::event::EventKind::PhaseSample
            | $crate::event::EventKind::PhaseKvCompress
            | $crate::event::EventKind::PhaseKvSwapOut
            | $crate::event::EventKind::PhaseKvSwapIn
            | $crate::event::EventKind::PhaseKvDecompress
    };
}

impl EventKind {
    /// Every kind, in number order.
    pub const ALL: [EventKind; 31] = [
        EventKind::Decode,
        EventKind::GraphCompute,
        EventKind::GraphThread,
        EventKind::BackendSpan,
        EventKind::OpCompute,
        EventKind::OpComputeExit,
        EventKind::ExpertRoute,
        EventKind::OpSpan,
        EventKind::NodeDesc,
        EventKind::OpSpanPmc,
        EventKind::GpuTimestamps,
        EventKind::PhaseEmbed,
        EventKind::PhaseCopyLogits,
        EventKind::PhaseSoftmax,
        EventKind::PhaseSample,
        EventKind::PhaseKvCompress,
        EventKind::PhaseKvSwapOut,
        EventKind::PhaseKvSwapIn,
        EventKind::PhaseKvDecompress,
        EventKind::SchedSwitch,
        EventKind::SchedWakeup,
        EventKind::SchedWakeupNew,
        EventKind::TaskNew,
        EventKind::TaskExit,
        EventKind::CpuSample,
        EventKind::QosSwitch,
        EventKind::Loss,
        EventKind::PmcOpen,
        EventKind::LeafNode,
        EventKind::OpWindow,
        EventKind::SampleCounts,
    ];

    /// The kind for a stored number.
    pub const fn from_u32(v: u32) -> Option<EventKind> {
        Some(match v {
            1 => EventKind::Decode,
            10 => EventKind::GraphCompute,
            11 => EventKind::GraphThread,
            12 => EventKind::BackendSpan,
            20 => EventKind::OpCompute,
            21 => EventKind::OpComputeExit,
            22 => EventKind::ExpertRoute,
            23 => EventKind::OpSpan,
            24 => EventKind::NodeDesc,
            25 => EventKind::OpSpanPmc,
            26 => EventKind::GpuTimestamps,
            30 => EventKind::PhaseEmbed,
            31 => EventKind::PhaseCopyLogits,
            32 => EventKind::PhaseSoftmax,
            33 => EventKind::PhaseSample,
            34 => EventKind::PhaseKvCompress,
            35 => EventKind::PhaseKvSwapOut,
            36 => EventKind::PhaseKvSwapIn,
            37 => EventKind::PhaseKvDecompress,
            40 => EventKind::SchedSwitch,
            41 => EventKind::SchedWakeup,
            42 => EventKind::SchedWakeupNew,
            43 => EventKind::TaskNew,
            44 => EventKind::TaskExit,
            45 => EventKind::CpuSample,
            60 => EventKind::QosSwitch,
            61 => EventKind::Loss,
            62 => EventKind::PmcOpen,
            63 => EventKind::LeafNode,
            64 => EventKind::OpWindow,
            65 => EventKind::SampleCounts,
            _ => return None,
        })
    }

    /// Total size in bytes of a record of this kind (header included).
    pub const fn record_size(self) -> usize {
        match self {
            EventKind::Decode => size_of::<DecodeEvent>(),
            EventKind::GraphCompute => size_of::<GraphEvent>(),
            EventKind::GraphThread => size_of::<GraphThreadEvent>(),
            EventKind::BackendSpan => size_of::<BackendSpanEvent>(),
            EventKind::OpCompute => size_of::<OpEvent>(),
            EventKind::OpComputeExit => size_of::<OpExitEvent>(),
            EventKind::ExpertRoute => size_of::<ExpertRouteEvent>(),
            EventKind::OpSpan => size_of::<OpSpanEvent>(),
            EventKind::NodeDesc => size_of::<NodeDescEvent>(),
            EventKind::OpSpanPmc => size_of::<OpSpanPmcEvent>(),
            EventKind::GpuTimestamps => size_of::<GpuTimestampsEvent>(),
            phase_event_kinds!() => size_of::<PhaseEvent>(),
            EventKind::SchedSwitch => size_of::<SchedSwitchEvent>(),
            EventKind::SchedWakeup | EventKind::SchedWakeupNew => size_of::<SchedWakeupEvent>(),
            EventKind::TaskNew | EventKind::TaskExit => size_of::<TaskEvent>(),
            EventKind::QosSwitch => size_of::<QosSwitchEvent>(),
            EventKind::Loss => size_of::<LossEvent>(),
            EventKind::PmcOpen => size_of::<PmcOpenEvent>(),
            EventKind::LeafNode => size_of::<LeafNodeEvent>(),
            EventKind::OpWindow => size_of::<OpWindowEvent>(),
            EventKind::CpuSample => size_of::<CpuSampleEvent>(),
            EventKind::SampleCounts => size_of::<SampleCountsEvent>(),
        }
    }

    /// Stable snake_case name (used in the trace header's event table).
    pub const fn name(self) -> &'static str {
        match self {
            EventKind::Decode => "decode",
            EventKind::GraphCompute => "graph_compute",
            EventKind::GraphThread => "graph_thread",
            EventKind::BackendSpan => "backend_span",
            EventKind::OpCompute => "op_compute",
            EventKind::OpComputeExit => "op_compute_exit",
            EventKind::ExpertRoute => "expert_route",
            EventKind::OpSpan => "op_span",
            EventKind::NodeDesc => "node_desc",
            EventKind::OpSpanPmc => "op_span_pmc",
            EventKind::GpuTimestamps => "gpu_timestamps",
            EventKind::PhaseEmbed => "phase_embed",
            EventKind::PhaseCopyLogits => "phase_copy_logits",
            EventKind::PhaseSoftmax => "phase_softmax",
            EventKind::PhaseSample => "phase_sample",
            EventKind::PhaseKvCompress => "phase_kv_compress",
            EventKind::PhaseKvSwapOut => "phase_kv_swap_out",
            EventKind::PhaseKvSwapIn => "phase_kv_swap_in",
            EventKind::PhaseKvDecompress => "phase_kv_decompress",
            EventKind::SchedSwitch => "sched_switch",
            EventKind::SchedWakeup => "sched_wakeup",
            EventKind::SchedWakeupNew => "sched_wakeup_new",
            EventKind::TaskNew => "task_new",
            EventKind::TaskExit => "task_exit",
            EventKind::QosSwitch => "qos_switch",
            EventKind::Loss => "loss",
            EventKind::PmcOpen => "pmc_open",
            EventKind::LeafNode => "leaf_node",
            EventKind::OpWindow => "op_window",
            EventKind::CpuSample => "cpu_sample",
            EventKind::SampleCounts => "sample_counts",
        }
    }
}

/// A NUL-padded node name up to its first NUL ("" if not UTF-8).
pub fn name_str(name: &[u8; NODE_NAME_LEN]) -> &str {
    let len = name.iter().position(|&b| b == 0).unwrap_or(NODE_NAME_LEN);
    core::str::from_utf8(&name[..len]).unwrap_or("")
}

/// Size of the largest record of any kind: the size of a ring-buffer scratch slot.
pub const fn max_event_size() -> usize {
    let mut max = 0;
    let mut i = 0;
    while i < EventKind::ALL.len() {
        let s = EventKind::ALL[i].record_size();
        if s > max {
            max = s;
        }
        i += 1;
    }
    max
}

/// Largest record size (see [`max_event_size`]).
pub const MAX_EVENT_SIZE: usize = max_event_size();

/// Common first part of every record. Decoders rely on it being at offset 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventHeader {
    /// [`EventKind`] value.
    pub kind: u32,
    /// `EVENT_FLAG_*` bits.
    pub flags: u32,
    /// `bpf_ktime_get_ns()` (CLOCK_MONOTONIC) when the event happened.
    pub ts_ns: u64,
    /// Process (thread-group) id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// CPU the event was recorded on.
    pub cpu: u32,
    /// Zero.
    pub _pad: u32,
}
const _: () = assert!(size_of::<EventHeader>() == 32);
const _: () = assert!(offset_of!(EventHeader, kind) == 0);
const _: () = assert!(offset_of!(EventHeader, flags) == 4);
const _: () = assert!(offset_of!(EventHeader, ts_ns) == 8);
const _: () = assert!(offset_of!(EventHeader, pid) == 16);
const _: () = assert!(offset_of!(EventHeader, tid) == 20);
const _: () = assert!(offset_of!(EventHeader, cpu) == 24);

impl EventHeader {
    /// All zero (the start of a record's `zeroed()`).
    pub const ZERO: EventHeader = EventHeader {
        kind: 0,
        flags: 0,
        ts_ns: 0,
        pid: 0,
        tid: 0,
        cpu: 0,
        _pad: 0,
    };

    /// True on the exit side of a probe.
    pub const fn is_exit(&self) -> bool {
        self.flags & EVENT_FLAG_EXIT != 0
    }
}

/// Token level: `engine_decode(ctx, n_tokens, pos, tokens)` entry and exit.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeEvent {
    /// Common header.
    pub header: EventHeader,
    /// Tokens in the batch (the entry's argument, repeated on exit).
    pub n_tokens: u32,
    /// Position of the first token (repeated on exit).
    pub pos: u32,
    /// Return value on exit, 0 on entry.
    pub ret: i32,
    /// Distinct sequences the batch's tokens belong to (repeated on exit); 0 = not
    /// recorded (traces before sequences were read, the padding byte was zero). Counted
    /// by each token's first sequence id over the first [`DECODE_SEQ_SCAN_MAX`] tokens:
    /// ids 0..64 exactly, every id outside that range together as one
    /// ([`DECODE_SEQ_OTHER_IDS`]).
    pub n_seqs: u8,
    /// `DECODE_SEQ_*` flags saying how far [`DecodeEvent::n_seqs`] is exact.
    pub seq_flags: u8,
    /// Bit `s`: sequence `s` (0..8) has a token in the batch.
    pub seq_mask: u8,
    /// Bit `s`: sequence `s` (0..8) has more than one token in the batch (it is
    /// prefilling; a sequence with one token is at a decode step, or has a one-token
    /// prompt).
    pub seq_multi: u8,
}
const _: () = assert!(size_of::<DecodeEvent>() == 48);
const _: () = assert!(offset_of!(DecodeEvent, n_tokens) == 32);
const _: () = assert!(offset_of!(DecodeEvent, n_seqs) == 44);
const _: () = assert!(offset_of!(DecodeEvent, seq_multi) == 47);

/// Most tokens of one batch whose sequence ids the probes read (`llama_decode`'s batch;
/// llama-server's default `--batch-size` is 2048). Past it, [`DECODE_SEQ_TRUNCATED`].
pub const DECODE_SEQ_SCAN_MAX: u32 = 4096;
/// [`DecodeEvent::seq_flags`]: the batch had more than [`DECODE_SEQ_SCAN_MAX`] tokens;
/// the sequences were counted over the first ones only (a lower bound).
pub const DECODE_SEQ_TRUNCATED: u8 = 1 << 0;
/// [`DecodeEvent::seq_flags`]: some token's sequence id was negative or 64 or more;
/// all such ids were counted as one sequence (a lower bound).
pub const DECODE_SEQ_OTHER_IDS: u8 = 1 << 1;
/// [`DecodeEvent::seq_flags`]: some sequence ids could not be read (the count is over
/// the tokens read before).
pub const DECODE_SEQ_UNREAD: u8 = 1 << 2;
/// Sequences the per-sequence masks ([`DecodeEvent::seq_mask`], `seq_multi`) cover.
pub const DECODE_SEQ_MASK_BITS: u32 = 8;

/// Graph level: `engine_graph_compute(graph, backend_id, backend_kind, n_nodes, backend)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraphEvent {
    /// Common header.
    pub header: EventHeader,
    /// Address of the `EngineGraph`.
    pub graph_addr: u64,
    /// `EngineGraph::graph_id` (read from the graph at entry; repeated on exit).
    pub graph_id: u64,
    /// Number of computed nodes.
    pub n_nodes: u32,
    /// Backend id.
    pub backend_id: u32,
    /// `BackendKind` value.
    pub backend_kind: u32,
    /// Tokens in the batch (`EngineGraph::n_tokens`).
    pub n_tokens: u32,
    /// Position of the batch's first token.
    pub pos: u32,
    /// Return value on exit, 0 on entry.
    pub ret: i32,
}
const _: () = assert!(size_of::<GraphEvent>() == 72);
const _: () = assert!(offset_of!(GraphEvent, graph_addr) == 32);

/// Graph level, per thread: thread `ith` of `nth` begins its walk over the graph at
/// `graph_addr` (`engine_graph_thread`): where its first node starts when only nodes'
/// ends are probed (`OP_SPAN_START_AT_RELEASE`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraphThreadEvent {
    /// Common header.
    pub header: EventHeader,
    /// Address of the `EngineGraph`.
    pub graph_addr: u64,
    /// The thread's index among the graph's workers.
    pub ith: u32,
    /// Number of workers.
    pub nth: u32,
}
const _: () = assert!(size_of::<GraphThreadEvent>() == 48);
const _: () = assert!(offset_of!(GraphThreadEvent, graph_addr) == 32);

/// [`OpEvent::detail`]: `name` is filled.
pub const OP_DETAIL_NAME: u32 = 1 << 0;
/// [`OpEvent::detail`]: `structure` is filled (structure parsing was on).
pub const OP_DETAIL_STRUCTURE: u32 = 1 << 1;
/// [`OpEvent::detail`]: `pmc` holds counter readings (see `pmc_ok`).
pub const OP_DETAIL_PMC: u32 = 1 << 2;
/// [`OpEvent::detail`]: the node's `abi_version` was not
/// [`crate::engine_abi::ENGINE_ABI_VERSION`]; only the probe arguments (`ith`, `nth`,
/// `node_addr`) and the timestamp are valid, `op`/`index` are `u32::MAX`, `layer` -1.
pub const OP_DETAIL_ABI_MISMATCH: u32 = 1 << 3;
/// [`OpEvent::detail`]: `structure.op_params` is filled (set with
/// [`OP_DETAIL_STRUCTURE`] from trace format 2 on; format-1 records never have it and
/// read with `op_params` all zero, meaning unknown).
pub const OP_DETAIL_OP_PARAMS: u32 = 1 << 4;
/// [`OpEvent::detail`]: the node ran fused into the node before it on this thread
/// (llama.cpp's `rms_norm_mul_fused` computes RMS_NORM and the MUL after it in one call):
/// its entry and exit are the end of that call, so it has no time of its own.
pub const OP_DETAIL_FUSED: u32 = 1 << 5;
/// [`OpEvent::detail`] bits 8..11 (with [`OP_DETAIL_STRUCTURE`]): one plus the source
/// slot whose tensor the node is a view of (ggml's `view_src`). For a node that
/// computes — ggml's `SET_ROWS` and `CPY` (the KV-cache stores), in-place ops — that
/// is the tensor it stores into, so a later reader of the tensor reads what the node
/// wrote; a view op (`VIEW`, `PERMUTE`…) dispatched as a node stores nothing. 0: none,
/// or not recorded (the engine's probes; traces before this bit). See
/// [`op_detail_store_slot`].
pub const OP_DETAIL_STORE_SHIFT: u32 = 8;
/// The bits of [`OP_DETAIL_STORE_SHIFT`].
pub const OP_DETAIL_STORE_MASK: u32 = 0x7 << OP_DETAIL_STORE_SHIFT;

/// The source slot a node stores into, from its `detail` bits
/// ([`OP_DETAIL_STORE_SHIFT`]).
pub const fn op_detail_store_slot(detail: u32) -> Option<usize> {
    match (detail & OP_DETAIL_STORE_MASK) >> OP_DETAIL_STORE_SHIFT {
        0 => None,
        n => Some(n as usize - 1),
    }
}

/// The tensor structure of an operator's node, read from the `EngineNode`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpStructure {
    /// `DType` value.
    pub dtype: u32,
    /// `NODE_FLAG_*` bits of the node.
    pub node_flags: u32,
    /// Elements per dimension.
    pub ne: [i64; MAX_DIMS],
    /// Stride in bytes per dimension.
    pub nb: [u64; MAX_DIMS],
    /// Source node addresses (0 where unused).
    pub src: [u64; MAX_SRC],
    /// The node's `op_params` (meaning per op type, `docs/probe-abi.md`; `MUL_MAT`:
    /// src1 layout, dst layout, M, H, K). All zero = unknown (format-1 traces, see
    /// [`OP_DETAIL_OP_PARAMS`]).
    pub op_params: [u32; MAX_OP_PARAMS],
}
const _: () = assert!(size_of::<OpStructure>() == 136);
const _: () = assert!(offset_of!(OpStructure, dtype) == 0);
const _: () = assert!(offset_of!(OpStructure, node_flags) == 4);
const _: () = assert!(offset_of!(OpStructure, ne) == 8);
const _: () = assert!(offset_of!(OpStructure, nb) == 40);
const _: () = assert!(offset_of!(OpStructure, src) == 72);
const _: () = assert!(offset_of!(OpStructure, op_params) == 104);

impl OpStructure {
    /// All zero.
    pub const ZERO: OpStructure = OpStructure {
        dtype: 0,
        node_flags: 0,
        ne: [0; MAX_DIMS],
        nb: [0; MAX_DIMS],
        src: [0; MAX_SRC],
        op_params: [0; MAX_OP_PARAMS],
    };
}

/// One counter reading: the layout of the kernel's `struct bpf_perf_event_value`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PmcReading {
    /// Counter value.
    pub counter: u64,
    /// Time the event was enabled, ns.
    pub enabled: u64,
    /// Time the event was running, ns.
    pub running: u64,
}
const _: () = assert!(size_of::<PmcReading>() == 24);

impl PmcReading {
    /// No reading.
    pub const ZERO: PmcReading = PmcReading {
        counter: 0,
        enabled: 0,
        running: 0,
    };
}

/// Operator level: `engine_op_compute(node, ith, nth, params)` entry.
///
/// The exit is an [`OpExitEvent`] on the same thread (operators do not nest on a thread,
/// so an exit closes the thread's last entry). Counter readings are raw values; the
/// per-thread delta of an operator is exit minus entry. Traces of format 1 and 2 also
/// stored exits as `OpEvent`s (with `EVENT_FLAG_EXIT`, repeating the entry's fixed
/// fields); readers convert those with [`OpExitEvent::from_op_exit`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpEvent {
    /// Common header.
    pub header: EventHeader,
    /// Address of the `EngineNode`.
    pub node_addr: u64,
    /// `OpType` value.
    pub op: u32,
    /// Index of this thread among the node's workers.
    pub ith: u32,
    /// Number of workers.
    pub nth: u32,
    /// Position of the node in the graph's execution order.
    pub index: u32,
    /// Transformer layer, or -1.
    pub layer: i32,
    /// `OP_DETAIL_*` bits: which optional parts are filled.
    pub detail: u32,
    /// Bit `i` set when `pmc[i]` was read successfully.
    pub pmc_ok: u32,
    /// `BackendKind` of the probe point that recorded the entry: 0 (CPU) for
    /// `engine_op_compute` and llama.cpp's dispatch, 3 (accel) for
    /// `engine_accel_op_compute`. Traces before the accel backend hold 0 here.
    pub backend_kind: u32,
    /// NUL-padded node name (entry only).
    pub name: [u8; NODE_NAME_LEN],
    /// Tensor structure (entry only, when structure parsing is on).
    pub structure: OpStructure,
    /// Counter readings in the order of the trace header's counter list.
    pub pmc: [PmcReading; MAX_PMC],
}
const _: () = assert!(size_of::<OpEvent>() == 464);
const _: () = assert!(offset_of!(OpEvent, node_addr) == 32);
const _: () = assert!(offset_of!(OpEvent, name) == 72);
const _: () = assert!(offset_of!(OpEvent, structure) == 136);
const _: () = assert!(offset_of!(OpEvent, pmc) == 272);

/// Size of an operator record in trace format 1: the same fields as [`OpEvent`] without
/// `structure.op_params` (the structure was 104 bytes, so `pmc` started at
/// [`OP_EVENT_V1_PMC_OFFSET`]). Readers convert such records, zero-filling `op_params`.
pub const OP_EVENT_V1_SIZE: usize = 432;
/// Offset of `pmc` in a format-1 operator record; bytes before it are laid out as in
/// [`OpEvent`].
pub const OP_EVENT_V1_PMC_OFFSET: usize = 240;
const _: () = assert!(
    OP_EVENT_V1_PMC_OFFSET == offset_of!(OpEvent, structure) + offset_of!(OpStructure, op_params)
);
const _: () = assert!(
    OP_EVENT_V1_SIZE - OP_EVENT_V1_PMC_OFFSET == size_of::<OpEvent>() - offset_of!(OpEvent, pmc)
);

impl OpEvent {
    /// An all-zero event.
    pub const fn zeroed() -> OpEvent {
        OpEvent {
            header: EventHeader::ZERO,
            node_addr: 0,
            op: 0,
            ith: 0,
            nth: 0,
            index: 0,
            layer: 0,
            detail: 0,
            pmc_ok: 0,
            backend_kind: 0,
            name: [0; NODE_NAME_LEN],
            structure: OpStructure::ZERO,
            pmc: [PmcReading::ZERO; MAX_PMC],
        }
    }

    /// The name up to its first NUL ("" if not UTF-8).
    pub fn name_str(&self) -> &str {
        name_str(&self.name)
    }
}

/// Operator level: `engine_op_compute` exit. Only what changes between entry and exit:
/// the time (header) and the counters; the entry on the same thread says which node.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpExitEvent {
    /// Common header (`EVENT_FLAG_EXIT` set).
    pub header: EventHeader,
    /// `OP_DETAIL_PMC` when `pmc` holds readings, else 0.
    pub detail: u32,
    /// Bit `i` set when `pmc[i]` was read successfully.
    pub pmc_ok: u32,
    /// Counter readings in the order of the trace header's counter list.
    pub pmc: [PmcReading; MAX_PMC],
}
const _: () = assert!(size_of::<OpExitEvent>() == 232);
const _: () = assert!(offset_of!(OpExitEvent, detail) == 32);
const _: () = assert!(offset_of!(OpExitEvent, pmc) == 40);

impl OpExitEvent {
    /// An all-zero event.
    pub const fn zeroed() -> OpExitEvent {
        OpExitEvent {
            header: EventHeader::ZERO,
            detail: 0,
            pmc_ok: 0,
            pmc: [PmcReading::ZERO; MAX_PMC],
        }
    }

    /// The exit part of an operator exit stored as an [`OpEvent`] (trace formats 1 and
    /// 2): header (kind becomes [`EventKind::OpComputeExit`]), counter readings, and
    /// `OP_DETAIL_PMC`.
    pub fn from_op_exit(op: &OpEvent) -> OpExitEvent {
        let mut header = op.header;
        header.kind = EventKind::OpComputeExit as u32;
        OpExitEvent {
            header,
            detail: op.detail & OP_DETAIL_PMC,
            pmc_ok: op.pmc_ok,
            pmc: op.pmc,
        }
    }
}

/// Phase level: one of the `engine_phase_*` entry points (the kind says which).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseEvent {
    /// Common header.
    pub header: EventHeader,
    /// Size argument at entry: tokens (embed), floats (copy_logits), vocabulary (softmax,
    /// sample), bytes (the KV swap phases); 0 on exit.
    pub arg: u32,
    /// Return value on exit (the sampled token for sample), 0 otherwise.
    pub ret: i32,
}
const _: () = assert!(size_of::<PhaseEvent>() == 40);

/// `sched:sched_switch` where the previous or the next task is a target thread.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedSwitchEvent {
    /// Common header (pid/tid are the task running the probe: `prev`).
    pub header: EventHeader,
    /// Thread switched out.
    pub prev_tid: u32,
    /// Thread switched in.
    pub next_tid: u32,
    /// Priority of `prev`.
    pub prev_prio: i32,
    /// Priority of `next`.
    pub next_prio: i32,
    /// `prev`'s state: 0 = runnable (preempted), otherwise `TASK_*` bits (1 = sleeping, ...).
    pub prev_state: u64,
    /// `prev`'s comm.
    pub prev_comm: [u8; COMM_LEN],
    /// `next`'s comm.
    pub next_comm: [u8; COMM_LEN],
}
const _: () = assert!(size_of::<SchedSwitchEvent>() == 88);
const _: () = assert!(offset_of!(SchedSwitchEvent, prev_comm) == 56);

/// `sched:sched_wakeup` / `sched_wakeup_new` of a target thread.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedWakeupEvent {
    /// Common header (pid/tid are the waker).
    pub header: EventHeader,
    /// The woken thread.
    pub target_tid: u32,
    /// Its priority.
    pub prio: i32,
    /// CPU it will run on.
    pub target_cpu: u32,
    /// Zero.
    pub _pad: u32,
}
const _: () = assert!(size_of::<SchedWakeupEvent>() == 48);

/// A target thread started a new task, or a target thread exited.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskEvent {
    /// Common header.
    pub header: EventHeader,
    /// `TaskNew`: the creating thread; `TaskExit`: the exiting thread.
    pub parent_tid: u32,
    /// `TaskNew`: the new thread; `TaskExit`: the exiting thread.
    pub child_tid: u32,
}
const _: () = assert!(size_of::<TaskEvent>() == 40);

/// Collector-made: the QoS controller changed the enabled probe levels.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QosSwitchEvent {
    /// Common header (pid = target, tid = 0, cpu = u32::MAX).
    pub header: EventHeader,
    /// `LEVEL_*` bits before.
    pub levels_before: u32,
    /// `LEVEL_*` bits after.
    pub levels_after: u32,
    /// Measured decode rate, milli-tokens per second.
    pub tps_milli: u64,
    /// Configured minimum, milli-tokens per second.
    pub min_tps_milli: u64,
}
const _: () = assert!(size_of::<QosSwitchEvent>() == 56);

/// Collector-made: a sampled window of operator recording (`--op-windows`) began
/// (`traced` 1: the operator probes were attached from `settled_ns` on, then switched on
/// at `ts_ns`) or ended (`traced` 0: they were switched off at `ts_ns` and were detached
/// at `settled_ns`). Between the two they trapped without recording. A window begins and
/// ends on its own schedule: while the QoS controller holds the operator level off
/// (`QosSwitchEvent`), a window's start attaches nothing and records nothing.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpWindowEvent {
    /// Common header (pid = target, tid = 0, cpu = u32::MAX).
    pub header: EventHeader,
    /// 1: a window begins (operators are recorded from here on, with the QoS
    /// controller's level on); 0: it ends.
    pub traced: u32,
    /// Decode steps the collector had seen at the switch.
    pub decode_steps: u32,
    /// When the probes began to be attached (window start, before `ts_ns`) or were
    /// detached (window end, after `ts_ns`).
    pub settled_ns: u64,
}
const _: () = assert!(size_of::<OpWindowEvent>() == 48);

/// Collector-made: events lost on one CPU (cumulative, at the time of the record).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LossEvent {
    /// Common header (cpu = the CPU the losses happened on).
    pub header: EventHeader,
    /// Events lost on that CPU so far.
    pub lost: u64,
}
const _: () = assert!(size_of::<LossEvent>() == 40);

/// Collector-made: counters were opened for a thread and stored at a slot.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PmcOpenEvent {
    /// Common header (tid = the thread).
    pub header: EventHeader,
    /// Slot of the thread in the counter map.
    pub slot: u32,
    /// Bit `i` set when counter `i` of the header's list was opened.
    pub opened_mask: u32,
}
const _: () = assert!(size_of::<PmcOpenEvent>() == 40);

/// Collector-made: a source node of an operator that is not itself a computed node (a
/// weight, a KV-cache view, a graph input), read once per address from the target's
/// memory while it runs (the `EngineNode` at `node_addr`, `abi_version` checked).
///
/// Shapes of graph-local leaves (KV-cache views, inputs) are those of the graph that was
/// current when the node was read; weights' shapes never change.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafNodeEvent {
    /// Common header (ts = when read, pid = target, tid = 0, cpu = u32::MAX).
    pub header: EventHeader,
    /// Address of the `EngineNode` (as it appears in operators' `src`).
    pub node_addr: u64,
    /// `DType` value.
    pub dtype: u32,
    /// `NODE_FLAG_*` bits (weight, input, KV cache...).
    pub node_flags: u32,
    /// The node's `layer` field (-1 for none).
    pub layer: i32,
    /// The node's `op` (`NONE` or `VIEW`: never computed).
    pub op: u32,
    /// Elements per dimension.
    pub ne: [i64; MAX_DIMS],
    /// NUL-padded name (`blk.3.attn_q.weight`, `cache_k_l3`, `inp_pos`).
    pub name: [u8; NODE_NAME_LEN],
}
const _: () = assert!(size_of::<LeafNodeEvent>() == 152);
const _: () = assert!(offset_of!(LeafNodeEvent, node_addr) == 32);
const _: () = assert!(offset_of!(LeafNodeEvent, dtype) == 40);
const _: () = assert!(offset_of!(LeafNodeEvent, node_flags) == 44);
const _: () = assert!(offset_of!(LeafNodeEvent, layer) == 48);
const _: () = assert!(offset_of!(LeafNodeEvent, op) == 52);
const _: () = assert!(offset_of!(LeafNodeEvent, ne) == 56);
const _: () = assert!(offset_of!(LeafNodeEvent, name) == 88);

impl LeafNodeEvent {
    /// The name up to its first NUL ("" if not UTF-8).
    pub fn name_str(&self) -> &str {
        name_str(&self.name)
    }
}

/// Expert ids (and weights) one [`ExpertRouteEvent`] carries.
pub const MAX_ROUTE_IDS: usize = 32;
/// Most [`ExpertRouteEvent`]s one node's entry emits (so a prefill batch of up to
/// `16 · MAX_ROUTE_IDS / k` tokens is recorded whole).
pub const MAX_ROUTE_RECORDS: u32 = 16;
/// [`ExpertRouteEvent::flags`]: `weights` holds the routing weights.
pub const ROUTE_FLAG_WEIGHTS: u32 = 1 << 0;
/// [`ExpertRouteEvent::flags`]: the node's batch had more tokens than the probe records
/// per node; tokens from `token0 + n_ids / n_used` on are missing.
pub const ROUTE_FLAG_TRUNCATED: u32 = 1 << 1;

/// Operator level: which experts an expert-indexed product (`MUL_MAT_ID`) computes, read
/// by the probe at the node's entry on one thread (the engine's: thread 0; llama.cpp's:
/// the thread that describes the node) from its ids source (the router's top-k,
/// `src[2]`, read row by row when it is a view) and, where the engine passes them
/// (`src[3]`), the routing weights —
/// as seed 002 reads `ggml_compute_forward_mul_mat_id`'s third source. A batch of `T`
/// tokens takes `ceil(T·k / MAX_ROUTE_IDS)` records (tokens are never split).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExpertRouteEvent {
    /// Common header (the time and thread of the node's entry where it was read).
    pub header: EventHeader,
    /// Address of the node.
    pub node_addr: u64,
    /// Address of the ids tensor (one per layer: the gate, up and down products of a
    /// layer share it).
    pub ids_addr: u64,
    /// The node's layer, or -1 (llama.cpp: the analyzer reads it from the node's name).
    pub layer: i32,
    /// The node's index in its graph.
    pub index: u32,
    /// Experts used per token (`k`).
    pub n_used: u32,
    /// Experts the weights tensor holds.
    pub n_expert: u32,
    /// Tokens in the node's batch.
    pub n_tokens: u32,
    /// First token (of the batch) this record covers.
    pub token0: u32,
    /// Valid entries of `ids` (a multiple of `n_used`).
    pub n_ids: u32,
    /// `ROUTE_FLAG_*` bits.
    pub flags: u32,
    /// Expert ids, token by token, `n_used` each.
    pub ids: [i32; MAX_ROUTE_IDS],
    /// The matching routing weights (with [`ROUTE_FLAG_WEIGHTS`]), f32 bits.
    pub weights: [u32; MAX_ROUTE_IDS],
}
const _: () = assert!(size_of::<ExpertRouteEvent>() == 336);
const _: () = assert!(offset_of!(ExpertRouteEvent, node_addr) == 32);
const _: () = assert!(offset_of!(ExpertRouteEvent, ids_addr) == 40);
const _: () = assert!(offset_of!(ExpertRouteEvent, layer) == 48);
const _: () = assert!(offset_of!(ExpertRouteEvent, n_used) == 56);
const _: () = assert!(offset_of!(ExpertRouteEvent, n_ids) == 72);
const _: () = assert!(offset_of!(ExpertRouteEvent, ids) == 80);
const _: () = assert!(offset_of!(ExpertRouteEvent, weights) == 208);

impl ExpertRouteEvent {
    /// An all-zero record.
    pub const fn zeroed() -> ExpertRouteEvent {
        ExpertRouteEvent {
            header: EventHeader::ZERO,
            node_addr: 0,
            ids_addr: 0,
            layer: 0,
            index: 0,
            n_used: 0,
            n_expert: 0,
            n_tokens: 0,
            token0: 0,
            n_ids: 0,
            flags: 0,
            ids: [0; MAX_ROUTE_IDS],
            weights: [0; MAX_ROUTE_IDS],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_and_are_ranged_by_level() {
        for k in EventKind::ALL {
            assert_eq!(EventKind::from_u32(k as u32), Some(k));
            let v = k as u32;
            let level_ok = match k {
                EventKind::Decode => (1..10).contains(&v),
                EventKind::GraphCompute | EventKind::GraphThread | EventKind::BackendSpan => {
                    (10..20).contains(&v)
                }
                EventKind::OpCompute
                | EventKind::OpComputeExit
                | EventKind::ExpertRoute
                | EventKind::OpSpan
                | EventKind::NodeDesc
                | EventKind::OpSpanPmc
                | EventKind::GpuTimestamps => (20..30).contains(&v),
                phase_event_kinds!() => (30..40).contains(&v),
                EventKind::SchedSwitch
                | EventKind::SchedWakeup
                | EventKind::SchedWakeupNew
                | EventKind::TaskNew
                | EventKind::TaskExit
                | EventKind::CpuSample => (40..50).contains(&v),
                EventKind::QosSwitch
                | EventKind::Loss
                | EventKind::PmcOpen
                | EventKind::LeafNode
                | EventKind::OpWindow
                | EventKind::SampleCounts => (60..80).contains(&v),
            };
            assert!(level_ok, "{k:?}");
        }
        assert_eq!(EventKind::from_u32(0), None);
        assert_eq!(EventKind::from_u32(2), None);
    }

    #[test]
    fn record_sizes_are_8_byte_multiples_and_max_is_op() {
        for k in EventKind::ALL {
            assert_eq!(k.record_size() % 8, 0, "{k:?}");
            assert!(k.record_size() >= size_of::<EventHeader>());
        }
        assert_eq!(MAX_EVENT_SIZE, size_of::<OpEvent>());
    }
}
