//! `SOFT_MAX`: scaled, causally masked softmax over the rows of `KQ`.
//!
//! `src0` is `[n_kv, n_tokens, n_head]`; op params: 0 = scale (f32 bits), 1 = position of
//! the batch's first token, 2 = [`SOFT_MAX_UNMASKED`] for a plain softmax of every row
//! (the router's probabilities over experts). Token `t` sees cache positions
//! `0..=pos + t`.

use common::engine_abi::{EngineNode, SOFT_MAX_UNMASKED, SOFT_MAX_WINDOW_PARAM};

use super::{n_rows, row, row_mut, rows_for, src};
use crate::ops::ComputeParams;

pub(super) fn compute(node: &EngineNode, p: &ComputeParams) {
    let scale = f32::from_bits(node.op_params[0]);
    let pos = node.op_params[1] as usize;
    let n_tokens = node.ne[1] as usize;
    // SAFETY: source of a node of the graph being computed.
    let a = unsafe { src(node.src[0]) };
    for r in rows_for(n_rows(node), p.ith, p.nth) {
        let visible = if node.op_params[2] == SOFT_MAX_UNMASKED {
            node.ne[0] as usize
        } else {
            (pos + r % n_tokens + 1).min(node.ne[0] as usize)
        };
        // Keys before a sliding window are masked like the future ones (-inf before the
        // exp, so 0 in ggml's lane sums: the same rounding).
        let window = node.op_params[SOFT_MAX_WINDOW_PARAM] as usize;
        let first = if window > 0 {
            (pos + r % n_tokens + 1).saturating_sub(window)
        } else {
            0
        };
        // SAFETY: f32 rows of validated shapes; this thread owns row `r` of dst.
        let (x, out) = unsafe { (row(a, r, node.ne[0] as usize), row_mut(node, r)) };
        let mut max = f32::NEG_INFINITY;
        for (o, &v) in out[..visible].iter_mut().zip(x) {
            *o = v * scale;
            max = max.max(*o);
        }
        if first > 0 {
            let first = first.min(visible);
            out[..first].fill(f32::NEG_INFINITY);
            max = out[first..visible]
                .iter()
                .fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        }
        // ggml's row continues with masked entries up to the padded KV length. Its vector
        // exp covers the row's whole groups of 8 (`ggml_vec_soft_max_f32`); the last
        // `ne0 % 8` entries take libm's `expf`, each added to the f64 sum on its own (a
        // router over 4 experts is all tail: issue 25, Mixtral-style tiny model).
        let vec_end = (node.ne[0] as usize) & !(engine_kernels::vec::VECTOR_LANES - 1);
        let split = visible.min(vec_end);
        let mut sum = engine_kernels::vec::exp_sum_masked_row(&mut out[..split], max);
        for o in &mut out[split..visible] {
            *o = (*o - max).exp();
            sum += f64::from(*o);
        }
        let inv = (1.0 / sum) as f32;
        for o in &mut out[..visible] {
            *o *= inv;
        }
        out[visible..].fill(0.0);
    }
}
