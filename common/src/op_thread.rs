//! Per-thread state of the operator probes ([`OpThread`], the `OP_THREADS` map, keyed by
//! tid): the node a thread has open, when it started it and, for llama.cpp, when the
//! thread last began to wait at a barrier since. The probes keep it between a node's
//! start and its end so that one 32-byte record per node and thread
//! (`event::OpSpanEvent`) leaves the kernel, at the node's end.

use core::mem::{offset_of, size_of};

use crate::event::{MAX_PMC, PmcReading};

/// One thread's operator-probe state.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpThread {
    /// The node open on this thread (0: none).
    pub node: u64,
    /// When this thread started it (`bpf_ktime_get_ns`).
    pub start_ns: u64,
    /// When this thread last began to wait at a barrier after `start_ns` (llama.cpp, whose
    /// nodes end at the last barrier before the next node starts: ops such as `MUL_MAT`
    /// meet at a barrier inside too); 0 if it has not.
    pub wait_ns: u64,
    /// llama.cpp: the second node of a fused pair (`rms_norm_mul_fused`'s MUL), recorded
    /// as a zero-length span when the pair ends; 0 if none.
    pub fused: u64,
    /// llama.cpp: the graph generation `index` counts in.
    pub graph_seq: u64,
    /// llama.cpp: nodes this thread started in the current graph (the next node's index).
    pub index: u32,
    /// The open span's `OpSpanEvent::flags` (ith, backend kind).
    pub flags: u32,
    /// Threads computing the open node (`nth`).
    pub nth: u32,
    /// Bit `i` set when counter `i` was read at the start.
    pub pmc_ok: u32,
    /// Counter readings at the start (when counters are read).
    pub pmc: [PmcReading; MAX_PMC],
    /// Counter readings when the thread began to wait at `wait_ns` (llama.cpp).
    pub pmc_wait: [PmcReading; MAX_PMC],
}
const _: () = assert!(size_of::<OpThread>() == 440);
const _: () = assert!(offset_of!(OpThread, index) == 40);
const _: () = assert!(offset_of!(OpThread, pmc) == 56);
const _: () = assert!(offset_of!(OpThread, pmc_wait) == 248);

impl OpThread {
    /// No node open, nothing counted.
    pub const ZERO: OpThread = OpThread {
        node: 0,
        start_ns: 0,
        wait_ns: 0,
        fused: 0,
        graph_seq: 0,
        index: 0,
        flags: 0,
        nth: 0,
        pmc_ok: 0,
        pmc: [PmcReading::ZERO; MAX_PMC],
        pmc_wait: [PmcReading::ZERO; MAX_PMC],
    };
}

#[cfg(feature = "user")]
// SAFETY: `#[repr(C)]`, fixed-width integers only, no implicit padding (size asserted).
unsafe impl aya::Pod for OpThread {}
