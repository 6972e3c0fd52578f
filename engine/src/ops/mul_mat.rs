//! `MUL_MAT`: `dst = src0ᵀ·src1` in ggml's convention, batched over heads.
//!
//! Shapes (ne, innermost first): `src0` `[K, N, H0]` (weights, or a KV-cache view with
//! its own row and head strides), `src1` `[K, M, H1]` f32 with `H1` a multiple of `H0`
//! (grouped-query attention: head `h` of `src1` uses head `h / (H1/H0)` of `src0`).
//! `src1` and `dst` are contiguous; how their rows are ordered is given by op params:
//! 0 = src1 layout (0: rows `[K, M, H1]`; 1: stored `[K, H1, M]`, the Q of attention
//! straight out of RoPE), 1 = dst layout (0: `[N, M, H1]`; 1: stored `[N, H1, M]`, KQV
//! straight into the `[head_dim, n_head, n_tokens]` layout), 2 = M, 3 = H1, 4 = K (the
//! inner dimension, so a trace of the node alone gives the product's size), 5..6 = a band
//! of output rows `[begin, end)` this node computes (`end` 0: all rows; a tensor split
//! gives each backend a band of the same output, 2-D weights only). A `src[2]`, if set,
//! is an ordering dependency (the KV-cache store an attention product reads).
//!
//! Like ggml, `src1` is first converted to the weights' dot-product type (q8_0 for
//! quantized weights, f16 for f16) into the backend's scratch, split across threads;
//! after a barrier each thread computes its share of the (head, row) pairs.

use common::DType;
use common::engine_abi::{
    EngineNode, MUL_MAT_ROW_BEGIN_PARAM, MUL_MAT_ROW_END_PARAM, NODE_FLAG_PACKED,
};
use engine_kernels::MatMulArgs;

use super::{rows_for, src};
use crate::ops::ComputeParams;

/// src1/dst layout op-param value: rows in the natural `[K, M, H]` order.
pub const LAYOUT_ROWS: u32 = 0;
/// src1/dst layout op-param value: stored `[K, H, M]` (heads inner).
pub const LAYOUT_HEADS_INNER: u32 = 1;

struct Dims {
    k: usize,
    n: usize,
    h0: usize,
    m: usize,
    h1: usize,
}

fn dims(node: &EngineNode) -> Dims {
    // SAFETY: sources of a node of the graph being built or computed.
    let w = unsafe { src(node.src[0]) };
    debug_assert_eq!(node.op_params[4] as i64, w.ne[0], "op param 4 is K");
    Dims {
        k: w.ne[0] as usize,
        n: w.ne[1] as usize,
        h0: w.ne[2] as usize,
        m: node.op_params[2] as usize,
        h1: node.op_params[3] as usize,
    }
}

/// Scratch for the converted activations.
pub(super) fn work_size(node: &EngineNode) -> usize {
    let d = dims(node);
    // SAFETY: source of a node of the graph.
    let wtype = unsafe { src(node.src[0]) }.dtype().unwrap_or(DType::F32);
    let vdt = engine_kernels::vec_dot_type(wtype);
    d.m * d.h1 * vdt.row_bytes(d.k).unwrap_or(0)
}

/// The band of output rows `[begin, end)` the node computes (op params 5..6).
fn row_band(node: &EngineNode, n: usize) -> (usize, usize) {
    let end = node.op_params[MUL_MAT_ROW_END_PARAM] as usize;
    if end == 0 {
        return (0, n);
    }
    let begin = node.op_params[MUL_MAT_ROW_BEGIN_PARAM] as usize;
    (begin.min(n), end.min(n).max(begin.min(n)))
}

/// Address of row `(m, h)` of the contiguous src1.
fn src1_row(x: &EngineNode, d: &Dims, layout: u32, m: usize, h: usize) -> *const f32 {
    let r = if layout == LAYOUT_HEADS_INNER {
        m * d.h1 + h
    } else {
        h * d.m + m
    };
    (x.data as *const f32).wrapping_add(r * d.k)
}

/// Whether llama.cpp multiplies float weights of `n` rows with `vec_dot` whatever the
/// batch: its tinyBLAS (`llamafile_sgemm`, AVX2) takes float matrices only when the row
/// count is a multiple of 4 (`tinyBLAS::matmul` returns false otherwise, and ggml falls
/// back to `vec_dot`), e.g. qwen2moe's one-row shared-expert gate.
fn float_vec_dot_only(wtype: DType, n: usize) -> bool {
    matches!(wtype, DType::F32 | DType::F16 | DType::BF16) && !n.is_multiple_of(4)
}

pub(super) fn compute(node: &EngineNode, p: &ComputeParams) {
    // SAFETY: sources of a node of the graph being computed.
    let (w, x) = unsafe { (src(node.src[0]), src(node.src[1])) };
    let d = dims(node);
    let (x_layout, y_layout) = (node.op_params[0], node.op_params[1]);
    let wtype = w.dtype().expect("validated when the graph was built");
    let vdt = engine_kernels::vec_dot_type(wtype);
    let x_row_bytes = vdt
        .row_bytes(d.k)
        .expect("validated when the graph was built");

    // 1. Convert the activations, rows (h, m) in h-major order, split across threads.
    let rows = d.m * d.h1;
    debug_assert!(rows * x_row_bytes <= p.wsize);
    for r in rows_for(rows, p.ith, p.nth) {
        let (h, m) = (r / d.m, r % d.m);
        // SAFETY: src1 row (m, h) holds K f32s; scratch row r lies inside `wdata` (sized
        // by `work_size`) and only this thread writes it.
        unsafe {
            let xs = std::slice::from_raw_parts(src1_row(x, &d, x_layout, m, h), d.k);
            let dst = std::slice::from_raw_parts_mut(p.wdata.add(r * x_row_bytes), x_row_bytes);
            engine_kernels::convert_activations(vdt, xs, dst)
                .expect("row sizes match by construction");
        }
    }
    p.sync();

    // 2. This thread's share of the (head, weight row) pairs.
    let group = d.h1 / d.h0.max(1);
    let total = d.h1 * d.n;
    let (band_begin, band_end) = row_band(node, d.n);
    let mine = if d.h1 == 1 {
        let r = engine_kernels::matmul::split_rows(
            band_end - band_begin,
            p.ith as usize,
            p.nth as usize,
        );
        r.start + band_begin..r.end + band_begin
    } else {
        debug_assert_eq!(
            (band_begin, band_end),
            (0, d.n),
            "bands are for 2-D products"
        );
        rows_for(total, p.ith, p.nth)
    };
    let mut i = mine.start;
    while i < mine.end {
        let h = i / d.n;
        let n_start = i % d.n;
        let n_end = (d.n).min(n_start + (mine.end - i));
        let (y, y_stride) = if y_layout == LAYOUT_HEADS_INNER {
            ((node.data as *mut f32).wrapping_add(h * d.n), d.n * d.h1)
        } else {
            ((node.data as *mut f32).wrapping_add(h * d.m * d.n), d.n)
        };
        let packed = w.flags & NODE_FLAG_PACKED != 0;
        // Packed weights are 2-D (h0 == 1) and this thread's rows are whole groups
        // (split_rows hands out multiples of PACK_ROWS).
        let (w_head, w_len) = if packed {
            let len = engine_kernels::packed::packed_len(wtype, d.k, d.n)
                .expect("packed at load time, so packable");
            (w.data as *const u8, len)
        } else {
            (
                (w.data + (h / group) as u64 * w.nb[2]) as *const u8,
                (d.n - 1) * w.nb[1] as usize + wtype.row_bytes(d.k).unwrap_or(0),
            )
        };
        // SAFETY: the weight head spans `w_len` bytes of src0's data (the packed copy the
        // model owns, or the mapped tensor); scratch rows of head h were written in step 1
        // (barrier passed); `y` covers rows n_start..n_end of every m for this head, which
        // no other thread writes.
        unsafe {
            let w_bytes = std::slice::from_raw_parts(w_head, w_len);
            let x_bytes =
                std::slice::from_raw_parts(p.wdata.add(h * d.m * x_row_bytes), d.m * x_row_bytes);
            let args = MatMulArgs {
                wtype,
                w: w_bytes,
                // Not read for packed weights.
                w_stride: w.nb[1] as usize,
                k: d.k,
                x: x_bytes,
                x_stride: x_row_bytes,
                m: d.m,
                y,
                y_stride,
            };
            let rows = n_start..n_end;
            if packed {
                engine_kernels::packed::matmul_packed(args, rows)
            } else if float_vec_dot_only(wtype, d.n) {
                // One activation row per call: `vec_dot` order for every row.
                let xs = x_row_bytes;
                (0..d.m).try_for_each(|i| {
                    let row = MatMulArgs {
                        x: &x_bytes[i * xs..(i + 1) * xs],
                        m: 1,
                        y: y.wrapping_add(i * y_stride),
                        ..args
                    };
                    engine_kernels::matmul::matmul(row, rows.clone())
                })
            } else {
                engine_kernels::matmul::matmul(args, rows)
            }
            .expect("buffer sizes match by construction");
        }
        i += n_end - n_start;
    }
}
