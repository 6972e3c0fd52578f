//! Operators: `engine_op_compute` dispatches a node to its op's function, which computes
//! thread `ith`'s share of the node from the node alone (its op, sources, shape, strides,
//! op params and data pointer), the way `ggml_compute_forward` does.

mod backend_copy;
mod backend_sync;
mod binary;
mod cpy;
mod geglu;
mod get_rows;
mod kv_fetch;
mod moe_sum;
pub(crate) mod mul_mat;
mod mul_mat_id;
mod params;
mod rms_norm;
pub(crate) mod rope;
mod soft_max;
mod sum_rows;
mod swiglu;
mod top_k;
mod unary;

use core::ffi::c_void;
use std::ops::Range;

use common::engine_abi::{EngineNode, OpType};

pub use params::ComputeParams;

use crate::probe::probe_entry;

/// Scratch bytes `node` needs from the backend (0 for most ops).
pub fn work_size(node: &EngineNode) -> usize {
    match node.op_type() {
        Some(OpType::MulMat) => mul_mat::work_size(node),
        Some(OpType::MulMatId) => mul_mat_id::work_size(node),
        _ => 0,
    }
}

probe_entry! {
    /// Operator level: thread `ith` of `nth` computes its share of `node`. `params` is the
    /// backend's per-thread compute state.
    fn engine_op_compute(node: *const EngineNode, ith: u32, nth: u32, params: *mut c_void)
        => op_compute_entry
}

/// Body of `engine_op_compute`.
pub(crate) extern "C" fn op_compute_entry(
    node: *const EngineNode,
    ith: u32,
    nth: u32,
    params: *mut c_void,
) {
    // SAFETY: the backend passes a node of the graph it computes and its own params.
    let (node, params) = unsafe { (&*node, &*(params as *const ComputeParams)) };
    debug_assert_eq!((params.ith, params.nth), (ith, nth));
    let _span = crate::self_profile::Span::op(node, ith, params.graph_id);
    compute(node, params);
}

/// Computes thread `p.ith`'s share of `node` (every backend's op entry point ends here).
pub(crate) fn compute(node: &EngineNode, p: &ComputeParams) {
    match node.op_type() {
        Some(OpType::GetRows) => get_rows::compute(node, p),
        Some(OpType::RmsNorm) => rms_norm::compute(node, p),
        Some(OpType::Mul) => binary::mul(node, p),
        Some(OpType::Add) => binary::add(node, p),
        Some(OpType::MulMat) => mul_mat::compute(node, p),
        Some(OpType::Rope) => rope::compute(node, p),
        Some(OpType::Cpy) => cpy::compute(node, p),
        Some(OpType::SoftMax) => soft_max::compute(node, p),
        Some(OpType::SwiGlu) => swiglu::compute(node, p),
        Some(OpType::Div) => binary::div(node, p),
        Some(OpType::SumRows) => sum_rows::compute(node, p),
        Some(OpType::MulMatId) => mul_mat_id::compute(node, p),
        Some(op @ (OpType::Scale | OpType::Clamp | OpType::Silu | OpType::Tanh)) => {
            unary::compute(node, p, op)
        }
        Some(OpType::GeGlu) => geglu::compute(node, p),
        Some(OpType::TopK) => top_k::compute(node, p),
        Some(OpType::MoeSum) => moe_sum::compute(node, p),
        Some(OpType::BackendCopy) => backend_copy::compute(node, p),
        Some(OpType::BackendSync) => backend_sync::compute(node, p),
        Some(OpType::KvFetch) => kv_fetch::compute(node, p),
        Some(OpType::None) | Some(OpType::View) | None => {}
    }
}

/// Thread `ith`'s share of `n` rows: contiguous, sizes differing by at most one.
pub(crate) fn rows_for(n: usize, ith: u32, nth: u32) -> Range<usize> {
    let (ith, nth) = (ith as usize, nth as usize);
    let per = n / nth;
    let extra = n % nth;
    let start = ith * per + ith.min(extra);
    start..start + per + usize::from(ith < extra)
}

/// The node a source address points at.
///
/// # Safety
/// `addr` must be a source address of a node of the graph being computed.
pub(crate) unsafe fn src<'a>(addr: u64) -> &'a EngineNode {
    // SAFETY: the caller guarantees `addr` is a live node of the graph.
    unsafe { &*(addr as *const EngineNode) }
}

/// Number of rows of `ne[0]` elements in a node.
pub(crate) fn n_rows(n: &EngineNode) -> usize {
    (n.n_elements() / n.ne[0].max(1)) as usize
}

/// Row `r` of `len` f32s of a contiguous node. Activations are always contiguous, so a
/// source is read with the row length of the node that consumes it (a reshape is free).
///
/// # Safety
/// The node's data must hold at least `(r + 1) * len` f32s.
pub(crate) unsafe fn row<'a>(n: &EngineNode, r: usize, len: usize) -> &'a [f32] {
    // SAFETY: the caller guarantees the size.
    unsafe { std::slice::from_raw_parts((n.data as *const f32).add(r * len), len) }
}

/// Row `r` of a contiguous f32 node, writable, `ne[0]` long.
///
/// # Safety
/// As [`row`], and no other thread reads or writes this row meanwhile.
pub(crate) unsafe fn row_mut<'a>(n: &EngineNode, r: usize) -> &'a mut [f32] {
    let len = n.ne[0] as usize;
    // SAFETY: the caller guarantees the size and exclusive access.
    unsafe { std::slice::from_raw_parts_mut((n.data as *mut f32).add(r * len), len) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_split_covers_every_row_once() {
        for n in [0usize, 1, 5, 64, 127] {
            for nth in 1..5u32 {
                let mut next = 0;
                for ith in 0..nth {
                    let r = rows_for(n, ith, nth);
                    assert_eq!(r.start, next);
                    next = r.end;
                }
                assert_eq!(next, n);
            }
        }
    }
}
