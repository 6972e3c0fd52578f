//! `ADD`, `MUL` and `DIV`: element-wise, with `src1` broadcast like ggml: over rows when
//! it has fewer rows, and over a row when it holds one value per row of `src0` (ggml's
//! `[1, rows]` shape; the engine also takes the routing weights as they come, `[k, T]`
//! against the `[N, k, T]` expert outputs): the shared expert's gate, the routing
//! weights, the sum that normalises them.

use common::engine_abi::EngineNode;

use super::{n_rows, row, row_mut, rows_for, src};
use crate::ops::ComputeParams;

/// `ADD`: one function per op, so a sampled frame names its op (`engine::ops::binary::add`).
pub(super) fn add(node: &EngineNode, p: &ComputeParams) {
    compute(node, p, |a, b| a + b);
}

/// `MUL`.
pub(super) fn mul(node: &EngineNode, p: &ComputeParams) {
    compute(node, p, |a, b| a * b);
}

/// `DIV`.
pub(super) fn div(node: &EngineNode, p: &ComputeParams) {
    compute(node, p, |a, b| a / b);
}

/// `dst[i, r] = f(src0[i, r], src1[i mod ne1₀, r mod rows(src1)])`.
fn compute(node: &EngineNode, p: &ComputeParams, f: impl Fn(f32, f32) -> f32) {
    // SAFETY: sources of a node of the graph being computed.
    let (a, b) = unsafe { (src(node.src[0]), src(node.src[1])) };
    let len = node.ne[0] as usize;
    let b_len = b.ne[0] as usize;
    let b_rows = (b.n_elements() as usize / b_len.max(1)).max(1);
    let rows = n_rows(node);
    let per_row = len > 1 && (b_len == 1 || (b_len != len && b.n_elements() as usize == rows));
    for r in rows_for(rows, p.ith, p.nth) {
        // SAFETY: f32 rows of validated shapes; this thread owns row `r` of dst.
        let (x, out) = unsafe { (row(a, r, len), row_mut(node, r)) };
        if per_row {
            // SAFETY: src1 holds one f32 per row of dst.
            let y = unsafe { row(b, r % rows, 1) }[0];
            for (o, &x) in out.iter_mut().zip(x) {
                *o = f(x, y);
            }
            continue;
        }
        // SAFETY: as above.
        let y = unsafe { row(b, r % b_rows, len) };
        for ((o, &x), &y) in out.iter_mut().zip(x).zip(y) {
            *o = f(x, y);
        }
    }
}
