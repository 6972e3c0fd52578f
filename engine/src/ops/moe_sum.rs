//! `MOE_SUM`: `dst[:, t] = Σ_j src0[:, j, t]` over the `k = src0.ne[1]` weighted expert
//! outputs of each token, added in slot order (`((e0 + e1) + e2) + …`), which rounds
//! exactly like llama.cpp's chain of `k − 1` `ADD`s of views.

use common::engine_abi::EngineNode;

use super::{row, row_mut, rows_for, src};
use crate::ops::ComputeParams;

pub(super) fn compute(node: &EngineNode, p: &ComputeParams) {
    // SAFETY: source of a node of the graph being computed.
    let a = unsafe { src(node.src[0]) };
    let (n, k) = (node.ne[0] as usize, a.ne[1] as usize);
    for t in rows_for(node.ne[1] as usize, p.ith, p.nth) {
        // SAFETY: src0 is contiguous `[n, k, T]` f32; this thread owns row `t` of dst.
        let out = unsafe { row_mut(node, t) };
        // SAFETY: as above.
        out.copy_from_slice(unsafe { row(a, t * k, n) });
        for j in 1..k {
            // SAFETY: as above.
            let x = unsafe { row(a, t * k + j, n) };
            for (o, &v) in out.iter_mut().zip(x) {
                *o += v;
            }
        }
    }
}
