//! The compact operator records of trace format 4: one [`OpSpanEvent`] (32 bytes) per
//! node and thread, recorded once at the node's end, and one [`NodeDescEvent`] per node
//! whose description (name, op, shape, sources, op params) changed since it was last
//! sent, so the description of a decode graph goes out once per graph shape instead of
//! with every operator record.
//!
//! An operator span does not start with an [`EventHeader`]: it keeps the header's `kind`
//! (offset 0), `flags` (4), `ts_ns` (8, the span's end) and `tid` (20) where every record
//! has them, and puts the duration and the node where other records have `pid`, `cpu`
//! and padding (the target's pid is in the trace header).

use core::mem::{offset_of, size_of};

use super::{EventHeader, EventKind, MAX_PMC, OpStructure};
use crate::engine_abi::NODE_NAME_LEN;

/// [`OpSpanEvent::flags`]: bits of the thread's index among the node's workers (`ith`).
pub const OP_SPAN_ITH_MASK: u32 = 0xffff;
/// [`OpSpanEvent::flags`]: shift of the `BackendKind` of the probe point that started
/// the span (4 bits).
pub const OP_SPAN_BACKEND_SHIFT: u32 = 16;
/// [`OpSpanEvent::flags`]: the node ran fused into the node before it on this thread
/// (llama.cpp's `rms_norm_mul_fused`): a zero-length span at the end of that call.
pub const OP_SPAN_FUSED: u32 = 1 << 20;
/// [`OpSpanEvent::flags`]: `dur` counts microseconds, not nanoseconds (the span was
/// longer than `u32::MAX` ns, 4.3 s).
pub const OP_SPAN_DUR_US: u32 = 1 << 21;
/// [`OpSpanEvent::flags`]: the span's end is not where the thread began to wait but where
/// it was seen next (the thread's next node started, or the graph ended, without a
/// barrier probe in between: a build whose barrier cannot be probed).
pub const OP_SPAN_END_APPROX: u32 = 1 << 22;
/// [`OpSpanEvent::flags`]: only the node's end was probed (`dur` is 0): the span starts
/// where the barrier after the thread's previous node released, i.e. at the latest end
/// among the threads of that node, or, for the thread's first node of its graph, at its
/// [`super::GraphThreadEvent`]. Exact up to the time a waiting thread takes to leave the
/// barrier (spinning: well under a microsecond; a thread that slept: its wake-up).
pub const OP_SPAN_START_AT_RELEASE: u32 = 1 << 23;

/// Operator level (trace format 4 on): thread `tid` computed its share of the node at
/// `node_addr` from `end_ns - dur` to `end_ns` and then waited at the barrier. The
/// node's description is the [`NodeDescEvent`] of `node_addr` last sent before the end
/// of the graph the span belongs to.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpSpanEvent {
    /// [`EventKind::OpSpan`].
    pub kind: u32,
    /// `ith` (bits 0..16), backend kind (16..20) and `OP_SPAN_*` bits.
    pub flags: u32,
    /// When the thread finished the node (`bpf_ktime_get_ns`): the record's time.
    pub end_ns: u64,
    /// Duration, ns (µs with [`OP_SPAN_DUR_US`]).
    pub dur: u32,
    /// Thread id.
    pub tid: u32,
    /// Address of the node (`EngineNode`, or llama.cpp's `ggml_tensor`).
    pub node_addr: u64,
}
const _: () = assert!(size_of::<OpSpanEvent>() == 32);
const _: () = assert!(offset_of!(OpSpanEvent, kind) == offset_of!(EventHeader, kind));
const _: () = assert!(offset_of!(OpSpanEvent, flags) == offset_of!(EventHeader, flags));
const _: () = assert!(offset_of!(OpSpanEvent, end_ns) == offset_of!(EventHeader, ts_ns));
const _: () = assert!(offset_of!(OpSpanEvent, tid) == offset_of!(EventHeader, tid));
const _: () = assert!(offset_of!(OpSpanEvent, node_addr) == 24);

impl OpSpanEvent {
    /// A span of `dur_ns` ending at `end_ns` (durations over 4.3 s in µs).
    pub const fn new(tid: u32, node_addr: u64, end_ns: u64, dur_ns: u64, flags: u32) -> Self {
        let (dur, flags) = if dur_ns > u32::MAX as u64 {
            let us = dur_ns / 1000;
            (
                if us > u32::MAX as u64 {
                    u32::MAX
                } else {
                    us as u32
                },
                flags | OP_SPAN_DUR_US,
            )
        } else {
            (dur_ns as u32, flags)
        };
        OpSpanEvent {
            kind: EventKind::OpSpan as u32,
            flags,
            end_ns,
            dur,
            tid,
            node_addr,
        }
    }

    /// The flags word of a span by thread `ith` on a backend of kind `backend_kind`.
    pub const fn flags_for(ith: u32, backend_kind: u32) -> u32 {
        (ith & OP_SPAN_ITH_MASK) | ((backend_kind & 0xf) << OP_SPAN_BACKEND_SHIFT)
    }

    /// Duration in ns.
    pub const fn dur_ns(&self) -> u64 {
        if self.flags & OP_SPAN_DUR_US != 0 {
            self.dur as u64 * 1000
        } else {
            self.dur as u64
        }
    }

    /// Start in ns.
    pub const fn start_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.dur_ns())
    }

    /// The thread's index among the node's workers.
    pub const fn ith(&self) -> u32 {
        self.flags & OP_SPAN_ITH_MASK
    }

    /// `BackendKind` value of the probe point that started the span.
    pub const fn backend_kind(&self) -> u32 {
        (self.flags >> OP_SPAN_BACKEND_SHIFT) & 0xf
    }
}

/// An [`OpSpanEvent`] with the thread's counter deltas over the span (recorded when
/// counters are read at the operator level).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpSpanPmcEvent {
    /// The span ([`EventKind::OpSpanPmc`] in its `kind`).
    pub span: OpSpanEvent,
    /// Bit `i` set when counter `i` was read at both ends.
    pub pmc_ok: u32,
    /// Zero.
    pub _pad: u32,
    /// Counter deltas in the order of the trace header's counter list; a multiplexed
    /// hardware counter already scaled by its enabled/running times over the span.
    pub delta: [u64; MAX_PMC],
}
const _: () = assert!(size_of::<OpSpanPmcEvent>() == 104);
const _: () = assert!(offset_of!(OpSpanPmcEvent, delta) == 40);

/// Operator level (trace format 4 on): what a node is — sent by one of the node's
/// workers (chosen by the node's address) whenever the node's description differs from
/// the one last sent for its position in the graph (a new graph shape: the first graph,
/// a longer KV cache, a prefill after decode steps). Fields as in [`super::OpEvent`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeDescEvent {
    /// Common header (the time and thread of the read).
    pub header: EventHeader,
    /// Address of the node.
    pub node_addr: u64,
    /// `OpType` value (`u32::MAX` with `OP_DETAIL_ABI_MISMATCH`).
    pub op: u32,
    /// Position of the node in its graph's execution order.
    pub index: u32,
    /// Transformer layer, or -1.
    pub layer: i32,
    /// `OP_DETAIL_*` bits: which parts are filled.
    pub detail: u32,
    /// Threads that compute the node (`nth`).
    pub nth: u32,
    /// `BackendKind` value.
    pub backend_kind: u32,
    /// NUL-padded node name.
    pub name: [u8; NODE_NAME_LEN],
    /// Tensor structure (with `OP_DETAIL_STRUCTURE`).
    pub structure: OpStructure,
}
const _: () = assert!(size_of::<NodeDescEvent>() == 264);
const _: () = assert!(offset_of!(NodeDescEvent, node_addr) == 32);
const _: () = assert!(offset_of!(NodeDescEvent, name) == 64);
const _: () = assert!(offset_of!(NodeDescEvent, structure) == 128);

impl NodeDescEvent {
    /// The name up to its first NUL ("" if not UTF-8).
    pub fn name_str(&self) -> &str {
        super::name_str(&self.name)
    }

    /// An all-zero record.
    pub const fn zeroed() -> NodeDescEvent {
        NodeDescEvent {
            header: EventHeader::ZERO,
            node_addr: 0,
            op: 0,
            index: 0,
            layer: 0,
            detail: 0,
            nth: 0,
            backend_kind: 0,
            name: [0; NODE_NAME_LEN],
            structure: OpStructure::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_keeps_nanoseconds_up_to_u32_and_switches_to_microseconds_beyond() {
        let s = OpSpanEvent::new(7, 0x1000, 10_000, 2_500, OpSpanEvent::flags_for(1, 3));
        assert_eq!(
            (s.dur_ns(), s.start_ns(), s.ith(), s.backend_kind()),
            (2_500, 7_500, 1, 3)
        );
        let long = 5_000_000_123u64;
        let s = OpSpanEvent::new(7, 0x1000, long + 1, long, 0);
        assert_ne!(s.flags & OP_SPAN_DUR_US, 0);
        assert_eq!(s.dur_ns(), 5_000_000_000);
    }
}
