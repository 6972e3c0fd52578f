//! Element-wise ops of one source: `SILU`, `TANH`, `SCALE` (op param 0, f32 bits) and
//! `CLAMP` (op params 0 and 1: min and max, f32 bits).

use common::engine_abi::{EngineNode, OpType};

use super::{n_rows, row, row_mut, rows_for, src};
use crate::ops::ComputeParams;

pub(super) fn compute(node: &EngineNode, p: &ComputeParams, op: OpType) {
    // SAFETY: source of a node of the graph being computed.
    let a = unsafe { src(node.src[0]) };
    let len = node.ne[0] as usize;
    let (p0, p1) = (
        f32::from_bits(node.op_params[0]),
        f32::from_bits(node.op_params[1]),
    );
    for r in rows_for(n_rows(node), p.ith, p.nth) {
        // SAFETY: f32 rows of validated shapes; this thread owns row `r` of dst.
        let (x, out) = unsafe { (row(a, r, len), row_mut(node, r)) };
        match op {
            // ggml's `ggml_vec_silu_f32`: the vector exp in 8-element steps, the C
            // library's for the tail.
            OpType::Silu => {
                for (col, (o, &v)) in out.iter_mut().zip(x).enumerate() {
                    *o = engine_kernels::vec::silu_at(v, col, len);
                }
            }
            // ggml: the C library's tanhf per element.
            OpType::Tanh => {
                for (o, &v) in out.iter_mut().zip(x) {
                    *o = v.tanh();
                }
            }
            OpType::Scale => {
                for (o, &v) in out.iter_mut().zip(x) {
                    *o = v * p0;
                }
            }
            // ggml: `MAX(MIN(x, max), min)`.
            OpType::Clamp => {
                for (o, &v) in out.iter_mut().zip(x) {
                    *o = v.min(p1).max(p0);
                }
            }
            _ => unreachable!("unary::compute takes SILU, TANH, SCALE and CLAMP"),
        }
    }
}
