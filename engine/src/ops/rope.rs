//! `ROPE`: rotary position embedding, computed like ggml's `rope_f32` without YaRN,
//! rounded like the oracle's AVX2 + FMA build (GCC fuses one product of each rotation).
//!
//! `src0` is `[head_dim, n_head, n_tokens]`, `src1` the I32 positions `[n_tokens]`.
//! Op params: 0 = mode ([`ROPE_MODE_NORMAL`] rotates adjacent pairs, [`ROPE_MODE_NEOX`]
//! rotates element `i` with `i + n_dims/2`), 1 = n_dims, 2 = freq_base (f32 bits),
//! 3 = freq_scale (f32 bits).

use common::engine_abi::EngineNode;

use super::{n_rows, row, row_mut, rows_for, src};
use crate::ops::ComputeParams;

/// Rotate adjacent pairs (LLaMA).
pub const ROPE_MODE_NORMAL: u32 = 0;
/// Rotate element `i` with `i + n_dims/2` (GPT-NeoX, Qwen2). ggml's value.
pub const ROPE_MODE_NEOX: u32 = 2;

pub(super) fn compute(node: &EngineNode, p: &ComputeParams) {
    let mode = node.op_params[0];
    let n_dims = node.op_params[1] as usize;
    let freq_base = f32::from_bits(node.op_params[2]);
    let freq_scale = f32::from_bits(node.op_params[3]);
    let n_head = node.ne[1] as usize;
    let theta_scale = freq_base.powf(-2.0 / n_dims as f32);
    // SAFETY: sources of a node of the graph being computed.
    let (a, positions) = unsafe { (src(node.src[0]), src(node.src[1])) };
    let mut cache = vec![0f32; n_dims];
    let mut cached_pos = None;
    for r in rows_for(n_rows(node), p.ith, p.nth) {
        let t = r / n_head;
        // SAFETY: positions is an I32 vector of n_tokens entries.
        let pos = unsafe { *(positions.data as *const i32).add(t) };
        if cached_pos != Some(pos) {
            let mut theta = pos as f32;
            for i0 in (0..n_dims).step_by(2) {
                let th = freq_scale * theta;
                cache[i0] = th.cos();
                cache[i0 + 1] = th.sin();
                theta *= theta_scale;
            }
            cached_pos = Some(pos);
        }
        // SAFETY: f32 rows of validated shapes; this thread owns row `r` of dst.
        let (x, out) = unsafe { (row(a, r, node.ne[0] as usize), row_mut(node, r)) };
        if mode == ROPE_MODE_NEOX {
            let half = n_dims / 2;
            for i0 in (0..n_dims).step_by(2) {
                let (c, s) = (cache[i0], cache[i0 + 1]);
                let ic = i0 / 2;
                let (x0, x1) = (x[ic], x[ic + half]);
                // ggml's `rotate_pairs` as GCC contracts it (vfmsub231ss/vfmadd132ss in
                // the oracle's libggml-cpu.so; checked against its outputs).
                out[ic] = x0.mul_add(c, -(x1 * s));
                out[ic + half] = x0.mul_add(s, x1 * c);
            }
        } else {
            for i0 in (0..n_dims).step_by(2) {
                let (c, s) = (cache[i0], cache[i0 + 1]);
                let (x0, x1) = (x[i0], x[i0 + 1]);
                // As above (the same `rotate_pairs`).
                out[i0] = x0.mul_add(c, -(x1 * s));
                out[i0 + 1] = x0.mul_add(s, x1 * c);
            }
        }
        out[n_dims..].copy_from_slice(&x[n_dims..]);
    }
}
