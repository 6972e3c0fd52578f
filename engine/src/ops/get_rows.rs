//! `GET_ROWS`: `dst[:, i] = src0[:, ids[i]]`, dequantized to f32. `src1` holds the I32 ids.

use common::engine_abi::EngineNode;

use super::{row_mut, rows_for, src};
use crate::backend::cpu::ComputeParams;

pub(super) fn compute(node: &EngineNode, p: &ComputeParams) {
    // SAFETY: sources of a node of the graph being computed.
    let (table, ids) = unsafe { (src(node.src[0]), src(node.src[1])) };
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
