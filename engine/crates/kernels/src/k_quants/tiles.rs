//! The product of K-quant weights with batches of 8 or more `Q8_K` activation rows
//! (prompt processing), rounding like llama.cpp's CPU backend does there.
//!
//! # What llama.cpp computes
//! For `src1` batches of at least 8 rows, ggml-cpu multiplies K-quant weights through its
//! "tiled" matmul (`ggml-cpu/tiled/tiled.cpp`, `tiled_run_microtile_avx2`) instead of
//! `ggml_vec_dot_q*_K_q8_K`. Per output and super-block it forms the exact integer sums
//! `s1 = Σ sc·(q − offset)·q_x` and (types with mins) `s2 = Σ m·bsum`, then
//! `res = fma(−dmin, f32(s2), d·f32(s1))` (`res = d·f32(s1)` without mins) and accumulates
//! `y = fma(res, d_x, y)` super-block after super-block. This module computes the same
//! integers and the same float operations in the same order, so the portable and AVX2
//! paths agree bit for bit with each other and with that kernel. (For `Q4_K` matrices
//! whose row count is a multiple of 8, llama.cpp uses its repacked `q4_K_8x8_q8_K` gemm
//! instead; so does the engine when it packs them at load, see [`crate::packed::q4_k`].)
//!
//! # How
//! Each weight row is first unpacked into [`Unpacked`] super-blocks (unsigned quants in
//! element order, group scales widened to one `i16` per `maddubs` lane, the min or offset
//! coefficients per 16-group), once per slice of activation rows. On AVX2 every type goes
//! through one kernel (`interleaved_x86`): 8 weight rows unpacked into one interleaved
//! block, one row per 32-bit lane, so no horizontal sums are needed; same integers and
//! float steps, so same results. On AArch64 `tiles_aarch64` forms the same integers with
//! NEON (`sdot` where the CPU has it), one output at a time.

use std::ops::Range;

use common::engine_abi::DType;

use super::q8_k;
use super::scales::QK_K;
use super::unpacked::Unpacked;
use super::unpacking::{has_min, unpack};
use crate::backend::Backend;
use crate::matmul::args::MatMulArgs;

/// Batches of at least this many activation rows go through this module (llama.cpp's
/// `ggml_tiled_min_batch`).
pub const MIN_ROWS: usize = 8;

/// Weight rows unpacked and multiplied together.
const ROWS: usize = 4;

/// Activation bytes per slice that the unpacked rows meet before the next rows are
/// unpacked: an eighth of the 32 MiB L3, so that the unpacking (scalar, per weight
/// row and slice) stays small next to the products.
const SLICE_BYTES: usize = 4 * 1024 * 1024;

/// The f32 step of one super-block: `res` from the integer sums.
#[inline]
fn block_result(min: bool, s1: i32, s2: i32, d: f32, dmin: f32) -> f32 {
    if min {
        (-dmin).mul_add(s2 as f32, d * s1 as f32)
    } else {
        d * s1.wrapping_sub(s2) as f32
    }
}

/// Portable product of one unpacked row with one `Q8_K` row.
fn dot_unpacked(min: bool, w: &[Unpacked], x: &[u8]) -> f32 {
    let mut y = 0f32;
    for (b, xb) in w.iter().zip(x.chunks_exact(q8_k::BLOCK_BYTES)) {
        let xq = &xb[q8_k::QS..q8_k::QS + QK_K];
        let mut s1 = 0i32;
        for (e, (&q, &qx)) in b.q.iter().zip(xq).enumerate() {
            s1 += i32::from(b.sc[e / 2]) * i32::from(q) * i32::from(qx as i8);
        }
        let mut s2 = 0i32;
        for (g, &c) in b.c.iter().enumerate() {
            let at = q8_k::BSUMS + 2 * g;
            s2 += i32::from(c) * i32::from(i16::from_le_bytes([xb[at], xb[at + 1]]));
        }
        let dx = f32::from_le_bytes([xb[0], xb[1], xb[2], xb[3]]);
        y = block_result(min, s1, s2, b.d, b.dmin).mul_add(dx, y);
    }
    y
}

/// The product of weight rows `n_range` (row `n` at `w + n·w_stride`, `k` elements of the
/// K-quant `wtype`) with `m` `Q8_K` activation rows (row `i` at `x + i·x_stride`) into
/// `y[i·y_stride + n]`.
///
/// # Safety
/// `backend` is supported; `w` and `x` hold those rows (checked by `matmul_with`); the
/// caller owns outputs `(i, n)` for `i < m`, `n ∈ n_range`.
pub(crate) unsafe fn matmul(backend: Backend, args: &MatMulArgs<'_>, n_range: Range<usize>) {
    #[cfg(target_arch = "x86_64")]
    if backend == Backend::Avx2 {
        // SAFETY: forwarded caller contract (AVX2 supported, rows readable, outputs owned).
        unsafe { super::interleaved_x86::matmul(args, n_range) };
        return;
    }
    let MatMulArgs {
        wtype,
        w,
        w_stride,
        k,
        x,
        x_stride,
        m,
        y,
        y_stride,
    } = *args;
    let nb = k / QK_K;
    let wb = wtype.block_bytes();
    let min = has_min(wtype);
    let x_row = nb * q8_k::BLOCK_BYTES;
    let slice = (SLICE_BYTES / x_row.max(1)).clamp(2, m.max(2));
    let mut scratch = vec![Unpacked::ZERO; ROWS * nb];
    for i0 in (0..m).step_by(slice) {
        let i1 = (i0 + slice).min(m);
        for n0 in n_range.clone().step_by(ROWS) {
            let rows = (n_range.end - n0).min(ROWS);
            for r in 0..ROWS {
                // A short group repeats its last row (results dropped).
                let n = n0 + r.min(rows - 1);
                let row = &w[n * w_stride..n * w_stride + nb * wb];
                for (b, u) in scratch[r * nb..(r + 1) * nb].iter_mut().enumerate() {
                    *u = unpack(wtype, &row[b * wb..(b + 1) * wb]);
                }
            }
            match backend {
                #[cfg(target_arch = "aarch64")]
                Backend::Neon | Backend::NeonDotprod | Backend::NeonI8mm => {
                    let f = if backend.has_dotprod() {
                        super::tiles_aarch64::tiles_rows::<true>
                    } else {
                        super::tiles_aarch64::tiles_rows::<false>
                    };
                    // SAFETY: NEON (and dotprod for NeonDotprod and NeonI8mm) supported (caller);
                    // scratch holds ROWS rows of nb blocks; activation rows i0..i1 are
                    // readable; outputs owned.
                    unsafe { f(min, &scratch, args, i0..i1, n0, rows) };
                }
                _ => {
                    for i in i0..i1 {
                        let xr = &x[i * x_stride..i * x_stride + x_row];
                        for r in 0..rows {
                            let v = dot_unpacked(min, &scratch[r * nb..(r + 1) * nb], xr);
                            // SAFETY: the caller owns output (i, n0 + r).
                            unsafe { *y.add(i * y_stride + n0 + r) = v };
                        }
                    }
                }
            }
        }
    }
}

/// One output of the batched product as this module (and llama.cpp's tiled kernel) rounds
/// it: weight row `w` (`k` elements of the K-quant `wtype`, whole super-blocks) times the
/// `Q8_K` row `x`. Portable; for tests and references.
pub fn dot_tiled(wtype: DType, k: usize, w: &[u8], x: &[u8]) -> f32 {
    let wb = wtype.block_bytes();
    let blocks: Vec<Unpacked> = (0..k / QK_K)
        .map(|b| unpack(wtype, &w[b * wb..(b + 1) * wb]))
        .collect();
    dot_unpacked(has_min(wtype), &blocks, x)
}
