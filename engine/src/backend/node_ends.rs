//! Batched node ends: while a tracer has `engine_op_times` attached (its semaphore is
//! nonzero), each compute thread takes the time at the end of its share of every node
//! and hands the times over in tables ([`EngineOpTimes`]) instead of making one probe
//! call per node that a tracer must trap. One trap per table instead of one per node:
//! the operator level's cost on a small model's decode (~45 ns per node and thread here
//! against ~3 µs for a trapped call, `docs/performance.md`).
//!
//! A table is handed over when it is full, when its oldest entry is
//! [`HAND_OVER_AFTER_NS`] old (a tracer's view of a long prefill stays close behind),
//! after an expert-indexed product (`MUL_MAT_ID`: its routing is part of its recorded
//! structure and is read at the hand-over, while the node's sources still hold it), and
//! at the end of the thread's walk over a graph.

use std::sync::atomic::{AtomicU16, Ordering};

use common::engine_abi::{
    ENGINE_ABI_VERSION, EngineNode, EngineOpTime, EngineOpTimes, OP_TIMES_CHUNK, OpType,
};

use crate::probe::probe_entry;

/// Is-enabled flag of `engine_op_times` (a USDT-style semaphore: a tracer that attaches
/// to `engine_op_times` with this variable's file offset as the uprobe's reference
/// counter makes the kernel count it up while attached, and down when the tracer's
/// probe goes, even if the tracer dies). Nonzero: threads record node ends.
#[unsafe(no_mangle)]
#[unsafe(link_section = ".probes")]
#[allow(
    non_upper_case_globals,
    reason = "the symbol name is the probe ABI's (USDT semaphores are named after their probe)"
)]
pub static engine_op_times_semaphore: AtomicU16 = AtomicU16::new(0);

/// A held table is handed over once its oldest entry is this old (ns), at the next
/// node's end.
pub const HAND_OVER_AFTER_NS: u64 = 2_000_000;

/// Whether a tracer wants node ends now (read once per graph and thread).
pub fn wanted() -> bool {
    engine_op_times_semaphore.load(Ordering::Relaxed) != 0
}

/// `CLOCK_MONOTONIC` now, ns (the clock of the tracer's `bpf_ktime_get_ns`; read through
/// the vDSO: no system call).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// One thread's node ends not yet handed over.
pub struct NodeEnds {
    table: EngineOpTimes,
    ith: u32,
    nth: u32,
    backend_kind: u32,
}

impl NodeEnds {
    /// An empty table for thread `ith` of `nth` of a backend of kind `backend_kind`.
    pub fn new(ith: u32, nth: u32, backend_kind: u32) -> NodeEnds {
        NodeEnds {
            table: EngineOpTimes {
                abi_version: ENGINE_ABI_VERSION,
                n: 0,
                entries: [EngineOpTime::default(); OP_TIMES_CHUNK],
            },
            ith,
            nth,
            backend_kind,
        }
    }

    /// Records that this thread's share of `node` (of op `op`) ended now; hands the
    /// table over if one of the module's rules says so.
    pub fn node_done(&mut self, node: *const EngineNode, op: u32) {
        self.node_done_at(node, op, monotonic_ns());
    }

    /// [`Self::node_done`] at `end_ns`.
    fn node_done_at(&mut self, node: *const EngineNode, op: u32, end_ns: u64) {
        let n = self.table.n as usize;
        self.table.entries[n] = EngineOpTime {
            node: node as u64,
            end_ns,
        };
        self.table.n += 1;
        if n + 1 == OP_TIMES_CHUNK
            || op == OpType::MulMatId as u32
            || end_ns.saturating_sub(self.table.entries[0].end_ns) >= HAND_OVER_AFTER_NS
        {
            self.hand_over();
        }
    }

    /// Hands the held entries to `engine_op_times` (nothing if none).
    pub fn hand_over(&mut self) {
        if self.table.n == 0 {
            return;
        }
        // SAFETY: the probe point's body reads nothing; a tracer reads the table during
        // the call, while it is alive.
        unsafe { engine_op_times(&self.table, self.ith, self.nth, self.backend_kind) };
        self.table.n = 0;
    }
}

probe_entry! {
    /// Operator level, batched: thread `ith` of `nth` of a backend of kind `backend_kind`
    /// hands over when its share of each of up to 32 nodes ended (`times`, in execution
    /// order; `backend::node_ends` says when). Called only while
    /// `engine_op_times_semaphore` is nonzero, i.e. while a tracer attached here with it
    /// as the uprobe's reference counter.
    fn engine_op_times(times: *const EngineOpTimes, ith: u32, nth: u32, backend_kind: u32)
        => op_times_entry
}

/// Body of `engine_op_times`: nothing to do; the call hands a tracer a table of a
/// thread's node ends (this module's [`NodeEnds`]).
pub(crate) extern "C" fn op_times_entry(
    _times: *const EngineOpTimes,
    _ith: u32,
    _nth: u32,
    _backend_kind: u32,
) {
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untraced_the_semaphore_is_zero() {
        assert!(!wanted());
    }

    #[test]
    fn a_table_is_handed_over_when_full_old_or_after_an_expert_product() {
        let mut ends = NodeEnds::new(0, 1, 0);
        let node = 0x1000 as *const EngineNode;
        let add = OpType::Add as u32;
        for i in 0..OP_TIMES_CHUNK - 1 {
            ends.node_done_at(node.wrapping_add(i), add, 1_000 + i as u64);
        }
        assert_eq!(
            ends.table.n as usize,
            OP_TIMES_CHUNK - 1,
            "held while young"
        );
        assert_eq!(ends.table.entries[3].node, node.wrapping_add(3) as u64);
        ends.node_done_at(node, add, 2_000);
        assert_eq!(ends.table.n, 0, "a full table was held");
        ends.node_done_at(node, add, 10_000);
        ends.node_done_at(node, add, 10_000 + HAND_OVER_AFTER_NS - 1);
        assert_eq!(ends.table.n, 2);
        ends.node_done_at(node, add, 10_000 + HAND_OVER_AFTER_NS);
        assert_eq!(ends.table.n, 0, "an old table was held");
        ends.node_done_at(node, OpType::MulMatId as u32, 20_000_000);
        assert_eq!(ends.table.n, 0, "an expert product's table was held");
        ends.node_done_at(node, add, 30_000_000);
        ends.hand_over();
        assert_eq!(ends.table.n, 0);
    }
}
