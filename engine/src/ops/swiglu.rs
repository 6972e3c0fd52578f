//! `SWIGLU`: `silu(src0) * src1`, the gated FFN activation.

use common::engine_abi::EngineNode;

use super::{n_rows, row, row_mut, rows_for, src};
use crate::backend::cpu::ComputeParams;

pub(super) fn compute(node: &EngineNode, p: &ComputeParams) {
    // SAFETY: sources of a node of the graph being computed.
    let (g, u) = unsafe { (src(node.src[0]), src(node.src[1])) };
    for r in rows_for(n_rows(node), p.ith, p.nth) {
        let len = node.ne[0] as usize;
        // SAFETY: f32 rows of validated shapes; this thread owns row `r` of dst.
        let (g, u, out) = unsafe { (row(g, r, len), row(u, r, len), row_mut(node, r)) };
        for ((o, &g), &u) in out.iter_mut().zip(g).zip(u) {
            *o = g / (1.0 + (-g).exp()) * u;
        }
    }
}
