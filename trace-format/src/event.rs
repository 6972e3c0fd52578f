//! Typed view of the packed event records.

use common::event::{
    BackendSpanEvent, CpuSampleEvent, DecodeEvent, EventHeader, EventKind, ExpertRouteEvent,
    GpuTimestampsEvent, GraphEvent, GraphThreadEvent, LeafNodeEvent, LossEvent, NodeDescEvent,
    OP_EVENT_V1_PMC_OFFSET, OP_EVENT_V1_SIZE, OpEvent, OpExitEvent, OpSpanEvent, OpSpanPmcEvent,
    OpWindowEvent, PhaseEvent, PmcOpenEvent, QosSwitchEvent, SampleCountsEvent, SchedSwitchEvent,
    SchedWakeupEvent, TaskEvent,
};

/// One event of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Token level (`engine_decode`).
    Decode(DecodeEvent),
    /// Graph level (`engine_graph_compute`).
    Graph(GraphEvent),
    /// A thread begins its walk over a graph (`engine_graph_thread`).
    GraphThread(GraphThreadEvent),
    /// A copy, wait, submission or fence wait between the CPU and another backend.
    BackendSpan(BackendSpanEvent),
    /// Operator entry (`engine_op_compute`); boxed, it is large.
    Op(Box<OpEvent>),
    /// Operator exit: closes the last [`Event::Op`] entry on the same thread (format-1
    /// and 2 exits, stored as `OpEvent`s, are converted to this).
    OpExit(OpExitEvent),
    /// The experts an expert-indexed product uses.
    ExpertRoute(ExpertRouteEvent),
    /// One thread's execution of one node (format 4 on).
    OpSpan(OpSpanEvent),
    /// An [`Event::OpSpan`] with counter deltas (format 4 on).
    OpSpanPmc(OpSpanPmcEvent),
    /// GPU timestamps between a split's nodes (format 4 on, additive); boxed, it is large.
    GpuTimestamps(Box<GpuTimestampsEvent>),
    /// A node's description (format 4 on); boxed, it is large.
    NodeDesc(Box<NodeDescEvent>),
    /// A phase; `header.kind` says which one.
    Phase(PhaseEvent),
    /// A context switch involving a target thread.
    SchedSwitch(SchedSwitchEvent),
    /// A wake-up of a target thread (`header.kind` tells wakeup from wakeup_new).
    SchedWakeup(SchedWakeupEvent),
    /// A target thread started or exited (`header.kind` says which).
    Task(TaskEvent),
    /// The QoS controller switched levels.
    QosSwitch(QosSwitchEvent),
    /// Losses on one CPU.
    Loss(LossEvent),
    /// Counters opened for a thread.
    PmcOpen(PmcOpenEvent),
    /// A leaf node (weight, KV-cache view, input) read from the target's memory.
    LeafNode(LeafNodeEvent),
    /// A sampled window of operator recording began or ended.
    OpWindow(OpWindowEvent),
    /// One CPU-clock sample (the collector folds these into [`Event::SampleCounts`]; a
    /// trace holds none).
    CpuSample(CpuSampleEvent),
    /// CPU-clock samples of one thread, phase and interval, per operator (`--sample`).
    SampleCounts(SampleCountsEvent),
    /// A kind this reader does not know, skipped by the size in the header's table.
    Unknown {
        /// Its header.
        header: EventHeader,
        /// The whole record.
        bytes: Vec<u8>,
    },
}

impl Event {
    /// The common header (an operator span's made from its fields: see
    /// [`span_header`]).
    pub fn header(&self) -> EventHeader {
        match self {
            Event::Decode(e) => e.header,
            Event::Graph(e) => e.header,
            Event::GraphThread(e) => e.header,
            Event::BackendSpan(e) => e.header,
            Event::GpuTimestamps(e) => e.header,
            Event::Op(e) => e.header,
            Event::OpExit(e) => e.header,
            Event::ExpertRoute(e) => e.header,
            Event::OpSpan(e) => span_header(e),
            Event::OpSpanPmc(e) => span_header(&e.span),
            Event::NodeDesc(e) => e.header,
            Event::Phase(e) => e.header,
            Event::SchedSwitch(e) => e.header,
            Event::SchedWakeup(e) => e.header,
            Event::Task(e) => e.header,
            Event::QosSwitch(e) => e.header,
            Event::Loss(e) => e.header,
            Event::PmcOpen(e) => e.header,
            Event::LeafNode(e) => e.header,
            Event::OpWindow(e) => e.header,
            Event::CpuSample(e) => e.header,
            Event::SampleCounts(e) => e.header,
            Event::Unknown { header, .. } => *header,
        }
    }

    /// The event's kind, if known.
    pub fn kind(&self) -> Option<EventKind> {
        EventKind::from_u32(self.header().kind)
    }

    /// The record's wire bytes (as written to a trace).
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Event::Decode(x) => record_bytes(x).to_vec(),
            Event::Graph(x) => record_bytes(x).to_vec(),
            Event::GraphThread(x) => record_bytes(x).to_vec(),
            Event::BackendSpan(x) => record_bytes(x).to_vec(),
            Event::GpuTimestamps(x) => record_bytes(x.as_ref()).to_vec(),
            Event::Op(x) => record_bytes(x.as_ref()).to_vec(),
            Event::OpExit(x) => record_bytes(x).to_vec(),
            Event::ExpertRoute(x) => record_bytes(x).to_vec(),
            Event::OpSpan(x) => record_bytes(x).to_vec(),
            Event::OpSpanPmc(x) => record_bytes(x).to_vec(),
            Event::NodeDesc(x) => record_bytes(x.as_ref()).to_vec(),
            Event::Phase(x) => record_bytes(x).to_vec(),
            Event::SchedSwitch(x) => record_bytes(x).to_vec(),
            Event::SchedWakeup(x) => record_bytes(x).to_vec(),
            Event::Task(x) => record_bytes(x).to_vec(),
            Event::QosSwitch(x) => record_bytes(x).to_vec(),
            Event::Loss(x) => record_bytes(x).to_vec(),
            Event::PmcOpen(x) => record_bytes(x).to_vec(),
            Event::LeafNode(x) => record_bytes(x).to_vec(),
            Event::OpWindow(x) => record_bytes(x).to_vec(),
            Event::CpuSample(x) => record_bytes(x).to_vec(),
            Event::SampleCounts(x) => record_bytes(x).to_vec(),
            Event::Unknown { bytes, .. } => bytes.clone(),
        }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// Plain-old-data wire records: `#[repr(C)]`, fixed-width integers only, no implicit
/// padding, every bit pattern valid (guarded by the size asserts in `common::event`).
/// Sealed: implemented for the `common::event` records only.
pub trait WireRecord: sealed::Sealed + Copy {}

macro_rules! wire_records {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl WireRecord for $t {}
    )*};
}
wire_records!(
    EventHeader,
    DecodeEvent,
    GraphEvent,
    GraphThreadEvent,
    BackendSpanEvent,
    GpuTimestampsEvent,
    OpEvent,
    OpExitEvent,
    ExpertRouteEvent,
    PhaseEvent,
    SchedSwitchEvent,
    SchedWakeupEvent,
    TaskEvent,
    QosSwitchEvent,
    LossEvent,
    PmcOpenEvent,
    LeafNodeEvent,
    OpWindowEvent,
    CpuSampleEvent,
    SampleCountsEvent,
    OpSpanEvent,
    OpSpanPmcEvent,
    NodeDescEvent
);

/// The header an operator span stands for (it has none of its own): its kind, flags,
/// end time and thread; `pid` 0 (the trace header names the target) and `cpu`
/// `u32::MAX` (not recorded).
pub fn span_header(span: &OpSpanEvent) -> EventHeader {
    EventHeader {
        kind: span.kind,
        flags: span.flags,
        ts_ns: span.end_ns,
        pid: 0,
        tid: span.tid,
        cpu: u32::MAX,
        _pad: 0,
    }
}

/// Reads a `T` from the start of `bytes`, or `None` if too short.
pub(crate) fn read<T: WireRecord>(bytes: &[u8]) -> Option<T> {
    if bytes.len() < size_of::<T>() {
        return None;
    }
    // SAFETY: `bytes` holds at least `size_of::<T>()` bytes; `read_unaligned` has no
    // alignment requirement; `T` is a `WireRecord`, for which every bit pattern is valid.
    Some(unsafe { bytes.as_ptr().cast::<T>().read_unaligned() })
}

/// Views a wire record as its bytes (for writing).
pub fn record_bytes<T: WireRecord>(rec: &T) -> &[u8] {
    // SAFETY: wire records have no padding bytes, so all `size_of::<T>()` bytes are
    // initialised; the slice borrows `rec`.
    unsafe { core::slice::from_raw_parts(core::ptr::from_ref(rec).cast::<u8>(), size_of::<T>()) }
}

/// Decodes one record of known kind from the start of `bytes` (exactly
/// `kind.record_size()` bytes are used). Returns `None` if `bytes` is too short. An
/// operator exit stored as an `OpEvent` (formats 1 and 2) becomes [`Event::OpExit`].
pub fn decode_record(kind: EventKind, bytes: &[u8]) -> Option<Event> {
    Some(match kind {
        EventKind::Decode => Event::Decode(read(bytes)?),
        EventKind::GraphCompute => Event::Graph(read(bytes)?),
        EventKind::GraphThread => Event::GraphThread(read(bytes)?),
        EventKind::BackendSpan => Event::BackendSpan(read(bytes)?),
        EventKind::GpuTimestamps => Event::GpuTimestamps(Box::new(read(bytes)?)),
        EventKind::OpCompute => op_event(read(bytes)?),
        EventKind::OpComputeExit => Event::OpExit(read(bytes)?),
        EventKind::ExpertRoute => Event::ExpertRoute(read(bytes)?),
        EventKind::OpSpan => Event::OpSpan(read(bytes)?),
        EventKind::OpSpanPmc => Event::OpSpanPmc(read(bytes)?),
        EventKind::NodeDesc => Event::NodeDesc(Box::new(read(bytes)?)),
        common::phase_event_kinds!() => Event::Phase(read(bytes)?),
        EventKind::SchedSwitch => Event::SchedSwitch(read(bytes)?),
        EventKind::SchedWakeup | EventKind::SchedWakeupNew => Event::SchedWakeup(read(bytes)?),
        EventKind::TaskNew | EventKind::TaskExit => Event::Task(read(bytes)?),
        EventKind::QosSwitch => Event::QosSwitch(read(bytes)?),
        EventKind::Loss => Event::Loss(read(bytes)?),
        EventKind::PmcOpen => Event::PmcOpen(read(bytes)?),
        EventKind::LeafNode => Event::LeafNode(read(bytes)?),
        EventKind::OpWindow => Event::OpWindow(read(bytes)?),
        EventKind::CpuSample => Event::CpuSample(read(bytes)?),
        EventKind::SampleCounts => Event::SampleCounts(read(bytes)?),
    })
}

/// Converts an operator record of trace format 1 ([`OP_EVENT_V1_SIZE`] bytes, no
/// `structure.op_params`) at the start of `bytes` into this build's [`OpEvent`], with
/// `op_params` zero (unknown) and `OP_DETAIL_OP_PARAMS` clear. `None` if too short.
pub fn decode_op_v1(bytes: &[u8]) -> Option<OpEvent> {
    let old = bytes.get(..OP_EVENT_V1_SIZE)?;
    let mut buf = [0u8; size_of::<OpEvent>()];
    // Header, fixed fields, name and the structure up to `src`: same offsets.
    buf[..OP_EVENT_V1_PMC_OFFSET].copy_from_slice(&old[..OP_EVENT_V1_PMC_OFFSET]);
    // The counter readings moved behind the new `op_params`.
    let pmc_at = core::mem::offset_of!(OpEvent, pmc);
    buf[pmc_at..].copy_from_slice(&old[OP_EVENT_V1_PMC_OFFSET..]);
    let mut op: OpEvent = read(&buf)?;
    op.detail &= !common::event::OP_DETAIL_OP_PARAMS;
    Some(op)
}

/// An operator record as an event: an entry, or (formats 1 and 2) an exit converted to
/// [`OpExitEvent`].
pub(crate) fn op_event(op: OpEvent) -> Event {
    if op.header.is_exit() {
        Event::OpExit(OpExitEvent::from_op_exit(&op))
    } else {
        Event::Op(Box::new(op))
    }
}

/// The header at the start of `bytes`, if there are enough bytes (for an operator span,
/// the one it stands for: [`span_header`]).
pub(crate) fn peek_header(bytes: &[u8]) -> Option<EventHeader> {
    let h: EventHeader = read(bytes)?;
    if h.kind == EventKind::OpSpan as u32 || h.kind == EventKind::OpSpanPmc as u32 {
        return read::<OpSpanEvent>(bytes).map(|s| span_header(&s));
    }
    Some(h)
}
