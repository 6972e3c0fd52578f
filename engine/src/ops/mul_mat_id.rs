//! `MUL_MAT_ID`: the expert-indexed matrix product of a mixture-of-experts FFN (ggml's
//! `mul_mat_id`). One node computes, for every token, the products with the `k` experts
//! the router selected for it.
//!
//! Shapes (ne, innermost first): `src0` `[K, N, E]` — `E` weight matrices, left in the
//! memory-mapped file (never repacked: a model larger than memory pages cold experts in
//! on demand); `src1` `[K, S, T]` f32 contiguous with `S` = 1 (every slot reads the
//! token's row: gate and up projections) or `S = k` (one row per slot: the down
//! projection); `src2` `[k, T]` I32, the selected expert of slot `j` of token `t`;
//! `src3` (optional) the `[k, T]` routing weights, only for probes. `dst` `[N, k, T]`.
//! Op params: 0 = `S`, 1 = `k`, 2 = `T`, 3 = `E`, 4 = `K`.
//!
//! Like ggml: the activations are converted to the weights' dot-product type first,
//! then each expert's rows are multiplied the way llama.cpp multiplies them (repacked
//! gemv, tiled K-quant product, or one `vec_dot` per element: [`ExpertPath`]).
//! Rows are gathered by expert (in order of first use), so each expert's rows are read
//! once per chunk of output rows for all the tokens that selected it.

use std::ops::Range;

use common::DType;
use common::engine_abi::{EngineNode, NODE_FLAG_PACKED_ORDER};
use engine_kernels::MatMulArgs;

use super::{rows_for, src};
use crate::ops::ComputeParams;

/// Output rows computed per pass over the gathered activations: weights of one chunk
/// stay in cache while every token of the expert group uses them.
const N_CHUNK: usize = 64;

/// The sizes of one `MUL_MAT_ID` node, from its op params and sources.
#[derive(Clone, Copy, Debug)]
struct Dims {
    /// Inner dimension.
    k: usize,
    /// Output rows per expert.
    n: usize,
    /// Experts in `src0`.
    experts: usize,
    /// Experts used per token.
    used: usize,
    /// Tokens.
    t: usize,
    /// `src1` rows per token (1 or `used`).
    s: usize,
}

fn dims(node: &EngineNode) -> Dims {
    // SAFETY: source of a node of the graph being built or computed.
    let w = unsafe { src(node.src[0]) };
    Dims {
        k: w.ne[0] as usize,
        n: w.ne[1] as usize,
        experts: w.ne[2] as usize,
        used: node.op_params[1] as usize,
        t: node.op_params[2] as usize,
        s: node.op_params[0].max(1) as usize,
    }
}

/// Bytes of one converted activation row, and the weights' type.
fn converted_row(node: &EngineNode, d: &Dims) -> (DType, usize) {
    // SAFETY: source of a node of the graph.
    let wtype = unsafe { src(node.src[0]) }.dtype().unwrap_or(DType::F32);
    let vdt = engine_kernels::vec_dot_type(wtype);
    (wtype, vdt.row_bytes(d.k).unwrap_or(0).next_multiple_of(64))
}

/// Scratch: one converted activation row per (slot, token), gathered by expert, and one
/// f32 output row for each.
pub(super) fn work_size(node: &EngineNode) -> usize {
    let d = dims(node);
    let (_, xrow) = converted_row(node, &d);
    let pairs = d.used * d.t;
    pairs * xrow + pairs * d.n * size_of::<f32>()
}

/// The (slot, token) pairs ordered by expert, experts in order of first use, pairs of an
/// expert in token order: `(expert, pair index j + t·k)`. Every thread computes the same
/// order from the ids.
fn gathered_order(ids: &[i32], experts: usize) -> Vec<(usize, usize)> {
    let mut order: Vec<(usize, usize)> = ids
        .iter()
        .enumerate()
        .map(|(pair, &e)| ((e.max(0) as usize).min(experts.saturating_sub(1)), pair))
        .collect();
    let mut first_use = vec![usize::MAX; experts];
    for &(e, pair) in &order {
        first_use[e] = first_use[e].min(pair);
    }
    order.sort_by_key(|&(e, pair)| (first_use[e], pair));
    order
}

/// How llama.cpp (0.3.36, CPU backend) multiplies the rows routed to one expert, and so
/// how the engine does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ExpertPath {
    /// The expert tensor is in llama.cpp's repack buffer (Q4_0/Q4_K with rows in groups
    /// of 8, weights loaded with the extra buffer types): `forward_mul_mat_id` in
    /// ggml-cpu/repack.cpp, one repacked gemv per row. The engine repacks the rows it
    /// multiplies on the fly ([`NODE_FLAG_PACKED_ORDER`]) and uses its packed product,
    /// which rounds like that gemv for every row.
    Repacked,
    /// K-quant weights and at least 8 rows: `ggml_compute_forward_mul_mat_id_tiled`
    /// (ggml-cpu/tiled), the product of the tiled K-quant kernel.
    Tiled,
    /// Everything else: one `vec_dot` per output element.
    VecDot,
}

impl ExpertPath {
    fn of(wtype: DType, packed_order: bool, rows: usize) -> ExpertPath {
        if packed_order {
            ExpertPath::Repacked
        } else if engine_kernels::k_quants::is_k_weight(wtype)
            && rows >= engine_kernels::k_quants::tiles::MIN_ROWS
        {
            ExpertPath::Tiled
        } else {
            ExpertPath::VecDot
        }
    }
}

/// Computes thread `p.ith`'s share of the node: converts its share of the gathered
/// activation rows, then, after the barrier, its output rows of every expert group.
pub(super) fn compute(node: &EngineNode, p: &ComputeParams) {
    // SAFETY: sources of a node of the graph being computed.
    let (w, x, ids_node) = unsafe { (src(node.src[0]), src(node.src[1]), src(node.src[2])) };
    let d = dims(node);
    let (wtype, xrow) = converted_row(node, &d);
    let pairs = d.used * d.t;
    // SAFETY: the ids node holds `used × t` I32s, written by the TOP_K node before this
    // one (graph order, barrier in between); nobody writes it meanwhile.
    let ids = unsafe { std::slice::from_raw_parts(ids_node.data as *const i32, pairs) };
    if p.ith == 0 && crate::self_profile::enabled() {
        let weights = if node.src[3] != 0 {
            // SAFETY: src3 is the `[k, T]` f32 routing weights, computed before this node.
            unsafe { std::slice::from_raw_parts(src(node.src[3]).data as *const f32, pairs) }
        } else {
            &[]
        };
        crate::self_profile::record_experts(node, p.graph_id, d.used as u32, ids, weights);
    }
    let order = gathered_order(ids, d.experts);
    let out_base = pairs * xrow;
    debug_assert!(out_base + pairs * d.n * 4 <= p.wsize);

    // 1. Convert the activation row of every gathered pair, split across threads.
    let vdt = engine_kernels::vec_dot_type(wtype);
    convert_gathered(x, &d, &order, vdt, xrow, p);
    p.sync();

    // 2. This thread's output rows of every expert group, computed as llama.cpp computes
    //    that expert (see `ExpertPath`), then the scatter of those rows into dst.
    let packed_order = w.flags & NODE_FLAG_PACKED_ORDER != 0;
    let mine = if packed_order {
        // Whole groups of 8 rows, to be repacked.
        engine_kernels::split_rows(d.n, p.ith as usize, p.nth as usize)
    } else {
        rows_for(d.n, p.ith, p.nth)
    };
    let products = Products {
        d,
        w,
        wtype,
        w_stride: w.nb[1] as usize,
        w_row_bytes: wtype.row_bytes(d.k).unwrap_or(0),
        packed_order,
        xrow,
        mine,
        wdata: p.wdata,
        out_base,
    };
    let mut repacked = Vec::new();
    let mut g = 0;
    while g < order.len() {
        let e = order[g].0;
        let end = g + order[g..].iter().take_while(|o| o.0 == e).count();
        products.group(e, g, end - g, &mut repacked);
        products.scatter(node, &order, g, end);
        g = end;
    }
}

/// Converts the activation row of each of this thread's gathered pairs into the scratch
/// (row `r` for `order[r]`), in the weights' dot-product type `vdt`.
fn convert_gathered(
    x: &EngineNode,
    d: &Dims,
    order: &[(usize, usize)],
    vdt: DType,
    xrow: usize,
    p: &ComputeParams,
) {
    for r in rows_for(order.len(), p.ith, p.nth) {
        let pair = order[r].1;
        let (j, t) = (pair % d.used, pair / d.used);
        let xr = t * d.s + j % d.s;
        // SAFETY: src1 is contiguous f32 `[K, S, T]`, so row `xr` holds K floats; scratch
        // row `r` lies inside `wdata` (sized by `work_size`) and only this thread writes it.
        unsafe {
            let xs = std::slice::from_raw_parts((x.data as *const f32).add(xr * d.k), d.k);
            let dst = std::slice::from_raw_parts_mut(p.wdata.add(r * xrow), xrow);
            engine_kernels::convert_activations(vdt, xs, dst)
                .expect("row sizes match by construction");
        }
    }
}

/// What every expert group's product reads: the weights, the sizes, this thread's output
/// rows and where the scratch holds the converted activations and the outputs.
struct Products<'a> {
    d: Dims,
    w: &'a EngineNode,
    wtype: DType,
    /// Bytes between two weight rows, and of one.
    w_stride: usize,
    w_row_bytes: usize,
    /// Whether the weights are multiplied as repacked ([`NODE_FLAG_PACKED_ORDER`]).
    packed_order: bool,
    /// Bytes of one converted activation row.
    xrow: usize,
    /// This thread's output rows (of every expert).
    mine: Range<usize>,
    /// The scratch: converted activation rows, then at `out_base` one f32 output row per
    /// gathered pair.
    wdata: *mut u8,
    out_base: usize,
}

impl Products<'_> {
    /// This thread's output rows of expert `e` for the `rows` gathered pairs from `g` on,
    /// into the scratch, `N_CHUNK` output rows at a time.
    fn group(&self, e: usize, g: usize, rows: usize, repacked: &mut Vec<u8>) {
        let (d, xrow) = (&self.d, self.xrow);
        let path = ExpertPath::of(self.wtype, self.packed_order, rows);
        let w_expert = (self.w.data + e as u64 * self.w.nb[2]) as *const u8;
        let w_len = (d.n - 1) * self.w_stride + self.w_row_bytes;
        let x_rows = self.wdata.wrapping_add(g * xrow);
        let group = Group {
            // SAFETY: expert `e` (< E) of src0 spans `w_len` bytes from `w_expert` (the
            // mapped tensor, validated at load).
            w_bytes: unsafe { std::slice::from_raw_parts(w_expert, w_len) },
            // SAFETY: scratch rows g..g + rows were written in step 1 (barrier passed) and
            // are only read from here on.
            x_group: unsafe { std::slice::from_raw_parts(x_rows, rows * xrow) },
            rows,
            y_group: self
                .wdata
                .wrapping_add(self.out_base)
                .cast::<f32>()
                .wrapping_add(g * d.n),
        };
        let mut n0 = self.mine.start;
        while n0 < self.mine.end {
            let n1 = (n0 + N_CHUNK).min(self.mine.end);
            let done = match path {
                ExpertPath::Repacked => self.repacked(&group, n0..n1, repacked),
                // SAFETY: output rows g..g + rows of the scratch are written only at
                // columns n0..n1 by this thread; buffer sizes are checked by the kernel.
                ExpertPath::Tiled => unsafe {
                    self.matmul(&group, group.x_group, rows, n0..n1, group.y_group)
                },
                ExpertPath::VecDot => (0..rows).try_for_each(|r| {
                    let x = &group.x_group[r * xrow..(r + 1) * xrow];
                    // SAFETY: as for the tiled product, one output row at a time.
                    unsafe { self.matmul(&group, x, 1, n0..n1, group.y_group.add(r * d.n)) }
                }),
            };
            done.expect("buffer sizes match by construction");
            n0 = n1;
        }
    }

    /// Output rows `cols` of the group through the packed product: the weight rows
    /// repacked on the fly into `repacked`, then llama.cpp's gemv for every row, one at a
    /// time (a call with 4 or more rows would round like its gemm).
    fn repacked(
        &self,
        group: &Group<'_>,
        cols: Range<usize>,
        repacked: &mut Vec<u8>,
    ) -> Result<(), engine_kernels::KernelError> {
        let (d, xrow, n) = (&self.d, self.xrow, cols.len());
        let len = engine_kernels::packed::packed_len(self.wtype, d.k, n)
            .expect("flagged at load time, so packable");
        repacked.resize(len, 0u8);
        engine_kernels::packed::pack(
            self.wtype,
            d.k,
            n,
            &group.w_bytes[cols.start * self.w_stride..],
            self.w_stride,
            repacked,
        )
        .expect("flagged at load time, so packable");
        (0..group.rows).try_for_each(|r| {
            // SAFETY: output row g + r of the scratch is written only at columns `cols` by
            // this thread; sizes are checked by the kernel.
            unsafe {
                let args = MatMulArgs {
                    wtype: self.wtype,
                    w: repacked,
                    // Not read for packed weights.
                    w_stride: self.w_stride,
                    k: d.k,
                    x: &group.x_group[r * xrow..(r + 1) * xrow],
                    x_stride: xrow,
                    m: 1,
                    y: group.y_group.add(r * d.n + cols.start),
                    y_stride: d.n,
                };
                engine_kernels::packed::matmul_packed(args, 0..n)
            }
        })
    }

    /// The row-major product of `m` converted activation rows `x` of the group with its
    /// expert's weight rows `cols`, into `y` (rows of `N` floats).
    ///
    /// # Safety
    /// As [`engine_kernels::matmul::matmul`]: `y` must be valid for the written rows and
    /// columns, written by nobody else meanwhile.
    unsafe fn matmul(
        &self,
        group: &Group<'_>,
        x: &[u8],
        m: usize,
        cols: Range<usize>,
        y: *mut f32,
    ) -> Result<(), engine_kernels::KernelError> {
        let d = &self.d;
        let args = MatMulArgs {
            wtype: self.wtype,
            w: group.w_bytes,
            w_stride: self.w_stride,
            k: d.k,
            x,
            x_stride: self.xrow,
            m,
            y,
            y_stride: d.n,
        };
        // SAFETY: forwarded caller contract.
        unsafe { engine_kernels::matmul::matmul(args, cols) }
    }

    /// Copies this thread's columns of the output rows of pairs `order[g..end]` from the
    /// scratch into dst.
    fn scatter(&self, node: &EngineNode, order: &[(usize, usize)], g: usize, end: usize) {
        let (n, mine) = (self.d.n, &self.mine);
        for (r, &(_, pair)) in order.iter().enumerate().take(end).skip(g) {
            // SAFETY: dst is contiguous `[N, k, T]`: row `pair` holds N floats, of which
            // this thread alone writes `mine`; scratch output row `r` was written above
            // by this thread at the same columns.
            unsafe {
                let from = (self.wdata.add(self.out_base) as *const f32).add(r * n + mine.start);
                let to = (node.data as *mut f32).add(pair * n + mine.start);
                std::ptr::copy_nonoverlapping(from, to, mine.len());
            }
        }
    }
}

/// One expert group's operands: the expert's weights, the group's converted activation
/// rows and its output rows in the scratch.
struct Group<'a> {
    w_bytes: &'a [u8],
    x_group: &'a [u8],
    rows: usize,
    y_group: *mut f32,
}

#[cfg(test)]
mod tests {
    use super::gathered_order;

    #[test]
    fn pairs_are_grouped_by_expert_in_order_of_first_use() {
        // Two tokens, two slots: token 0 uses experts 3 and 1, token 1 uses 1 and 0.
        let order = gathered_order(&[3, 1, 1, 0], 4);
        assert_eq!(order, vec![(3, 0), (1, 1), (1, 2), (0, 3)]);
    }

    #[test]
    fn out_of_range_ids_are_clamped_not_trusted() {
        let order = gathered_order(&[-1, 9], 4);
        assert_eq!(order, vec![(0, 0), (3, 1)]);
    }
}
