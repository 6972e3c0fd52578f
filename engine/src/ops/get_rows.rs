//! `GET_ROWS`: `dst[:, i] = src0[:, ids[i]]`, dequantized to f32. `src1` holds the I32 ids.
//! With op param 0 = [`GET_ROWS_PER_TOKEN`], `src0` is an f32 `[E, T]` matrix and `src1`
//! `[k, T]` ids: `dst[j, t] = src0[ids[j, t], t]` (the routing weights of a token's
//! selected experts: ggml's `get_rows` of the probabilities viewed as `[1, E, T]`).

use common::engine_abi::{EngineNode, GET_ROWS_PER_TOKEN};

use super::{row_mut, rows_for, src};
use crate::ops::ComputeParams;

pub(super) fn compute(node: &EngineNode, p: &ComputeParams) {
    // SAFETY: sources of a node of the graph being computed.
    let (table, ids) = unsafe { (src(node.src[0]), src(node.src[1])) };
    if node.op_params[0] == GET_ROWS_PER_TOKEN {
        per_token(node, table, ids, p);
        return;
    }
    let dtype = table.dtype().expect("validated when the graph was built");
    let k = table.ne[0] as usize;
    let row_bytes = dtype
        .row_bytes(k)
        .expect("validated when the graph was built");
    for r in rows_for(node.ne[1] as usize, p.ith, p.nth) {
        // SAFETY: ids is an I32 vector with one entry per dst row; ids were checked
        // against the table's row count when they were written.
        let id = unsafe { *(ids.data as *const i32).add(r) } as u64;
        // SAFETY: row `id` of the table lies inside its data.
        let row = unsafe {
            std::slice::from_raw_parts((table.data + id * table.nb[1]) as *const u8, row_bytes)
        };
        // SAFETY: this thread owns row `r` of dst.
        let out = unsafe { row_mut(node, r) };
        engine_kernels::quant::dequantize_row(dtype, row, out)
            .expect("row sizes match by construction");
    }
}

fn per_token(node: &EngineNode, table: &EngineNode, ids: &EngineNode, p: &ComputeParams) {
    let (e, k) = (table.ne[0] as usize, node.ne[0] as usize);
    for t in rows_for(node.ne[1] as usize, p.ith, p.nth) {
        // SAFETY: ids is I32 `[k, T]`, table f32 `[E, T]`; ids were produced by TOP_K over
        // the same E columns, so they are in range (clamped anyway); this thread owns
        // row `t` of dst.
        unsafe {
            let ids = std::slice::from_raw_parts((ids.data as *const i32).add(t * k), k);
            let probs = std::slice::from_raw_parts((table.data as *const f32).add(t * e), e);
            let out = row_mut(node, t);
            for (o, &id) in out.iter_mut().zip(ids) {
                *o = probs[(id.max(0) as usize).min(e - 1)];
            }
        }
    }
}
