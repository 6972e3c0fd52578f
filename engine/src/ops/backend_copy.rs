//! `BACKEND_COPY`: an activation moved from one backend's buffer into the other's, the
//! explicit transfer at a graph-split boundary. Both tensors are contiguous with the
//! same type and shape; the threads of the destination backend copy a share each.

use common::engine_abi::EngineNode;

use super::{ComputeParams, rows_for, src};
use crate::graph::node_bytes;

pub(super) fn compute(node: &EngineNode, p: &ComputeParams) {
    // SAFETY: source of a node of the graph being computed.
    let s = unsafe { src(node.src[0]) };
    let bytes = node_bytes(node);
    debug_assert_eq!(bytes, node_bytes(s), "a copy keeps type and shape");
    let mine = rows_for(bytes.div_ceil(64), p.ith, p.nth);
    let (start, end) = ((mine.start * 64).min(bytes), (mine.end * 64).min(bytes));
    // SAFETY: both tensors are contiguous and `bytes` long; this thread copies its own
    // disjoint byte range; source and destination are different buffers.
    unsafe {
        std::ptr::copy_nonoverlapping(
            (s.data as *const u8).add(start),
            (node.data as *mut u8).add(start),
            end - start,
        );
    }
}
