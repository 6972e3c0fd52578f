//! `SUM_ROWS`: `dst[0, r] = Σ src0[:, r]`, summed in double precision like ggml's
//! `ggml_vec_sum_f32`.

use common::engine_abi::EngineNode;

use super::{row, rows_for, src};
use crate::ops::ComputeParams;

pub(super) fn compute(node: &EngineNode, p: &ComputeParams) {
    // SAFETY: source of a node of the graph being computed.
    let a = unsafe { src(node.src[0]) };
    let len = a.ne[0] as usize;
    for r in rows_for(node.ne[1] as usize, p.ith, p.nth) {
        // SAFETY: f32 row `r` of src0; dst is `[1, rows]` and this thread owns entry `r`.
        unsafe {
            let sum: f64 = row(a, r, len).iter().map(|&v| f64::from(v)).sum();
            *(node.data as *mut f32).add(r) = sum as f32;
        }
    }
}
