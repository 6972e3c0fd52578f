//! `ADD` and `MUL`: element-wise with `src1` broadcast over rows when it has one row.

use common::engine_abi::EngineNode;

use super::{n_rows, row, row_mut, rows_for, src};
use crate::backend::cpu::ComputeParams;

/// `dst[i, r] = f(src0[i, r], src1[i, r mod rows(src1)])`.
pub(super) fn compute(node: &EngineNode, p: &ComputeParams, f: impl Fn(f32, f32) -> f32) {
    // SAFETY: sources of a node of the graph being computed.
    let (a, b) = unsafe { (src(node.src[0]), src(node.src[1])) };
    let len = node.ne[0] as usize;
    let b_rows = (b.n_elements() as usize / len).max(1);
    for r in rows_for(n_rows(node), p.ith, p.nth) {
        // SAFETY: f32 rows of validated shapes; this thread owns row `r` of dst.
        let (x, y, out) = unsafe { (row(a, r, len), row(b, r % b_rows, len), row_mut(node, r)) };
        for ((o, &x), &y) in out.iter_mut().zip(x).zip(y) {
            *o = f(x, y);
        }
    }
}
