//! `KV_FETCH`: under a KV budget, thread 0 makes the layer's KV-cache chunks resident
//! before its attention (swapping other layers' chunks out and its own in, through the
//! KV phase probe points); the other threads wait at the barrier after the node.

use common::engine_abi::EngineNode;

use super::ComputeParams;
use crate::kv_cache::swap::KvSwap;

pub(super) fn compute(node: &EngineNode, p: &ComputeParams) {
    if p.ith != 0 || node.data == 0 || node.layer < 0 {
        return;
    }
    // SAFETY: a KV_FETCH node's data is the swap state of the context's KV cache,
    // which outlives the graphs built over it.
    let swap = unsafe { &*(node.data as *const KvSwap) };
    swap.fetch(node.layer as usize, node.op_params[0] as usize);
}
