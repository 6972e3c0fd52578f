//! `RMS_NORM`: `y = x / sqrt(mean(x²) + eps)` per row; eps in op param 0 (f32 bits).

use common::engine_abi::EngineNode;

use super::{n_rows, row, row_mut, rows_for, src};
use crate::ops::ComputeParams;

pub(super) fn compute(node: &EngineNode, p: &ComputeParams) {
    let eps = f32::from_bits(node.op_params[0]);
    // SAFETY: source of a node of the graph being computed.
    let a = unsafe { src(node.src[0]) };
    for r in rows_for(n_rows(node), p.ith, p.nth) {
        // SAFETY: f32 rows of validated shapes; this thread owns row `r` of dst.
        let (x, out) = unsafe { (row(a, r, node.ne[0] as usize), row_mut(node, r)) };
        // ggml squares in f32 and sums in double precision: `sum += (ggml_float)(x*x)`.
        let sum: f64 = x.iter().map(|&v| f64::from(v * v)).sum();
        let mean = (sum / x.len() as f64) as f32;
        let scale = 1.0 / (mean + eps).sqrt();
        for (o, &v) in out.iter_mut().zip(x) {
            *o = v * scale;
        }
    }
}
