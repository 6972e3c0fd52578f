//! `SWIGLU`: `silu(src0) * src1`, the gated FFN activation.

use common::engine_abi::EngineNode;

use super::{n_rows, row, rows_for, src};
use crate::ops::ComputeParams;

pub(super) fn compute(node: &EngineNode, p: &ComputeParams) {
    // SAFETY: sources of a node of the graph being computed.
    let (g, u) = unsafe { (src(node.src[0]), src(node.src[1])) };
    // All three are contiguous, so the elements are split flat: a single decode row is
    // shared by every thread instead of leaving all but one idle.
    let total = n_rows(node) * node.ne[0] as usize;
    let mine = rows_for(total.div_ceil(CHUNK), p.ith, p.nth);
    let (start, end) = (
        (mine.start * CHUNK).min(total),
        (mine.end * CHUNK).min(total),
    );
    // SAFETY: f32 tensors of `total` elements (validated shapes); this thread alone
    // writes (and holds a slice of) elements start..end of dst.
    let (g, u, out) = unsafe {
        (
            &row(g, 0, total)[start..end],
            &row(u, 0, total)[start..end],
            std::slice::from_raw_parts_mut((node.data as *mut f32).add(start), end - start),
        )
    };
    // ggml runs `ggml_vec_swiglu_f32` per row: the vector exp in 8-element steps from
    // the row start, the C library's for the last n % 8 (`silu_at`).
    engine_kernels::vec::swiglu_span(g, u, out, start, node.ne[0] as usize);
}

/// Elements handed out at a time (16 cache lines of f32).
const CHUNK: usize = 256;
