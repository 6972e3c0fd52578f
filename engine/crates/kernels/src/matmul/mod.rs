//! The matrix product `Y = X · Wᵀ` of a weight matrix with converted activations, split by
//! weight rows so several threads can fill disjoint column ranges of one output.
//!
//! Rounding follows what llama.cpp's CPU backend does on x86 with AVX2: quantized weights
//! round like `ggml_vec_dot_*_q8_0` for every `m`; F16/F32 weights round like
//! `ggml_vec_dot_f16`/`_f32` for a single activation row (decode) and like tinyBLAS
//! (`llamafile_sgemm`, one FMA accumulator per output) for two or more rows when `k` is a
//! multiple of 8.

pub(crate) mod args;
#[cfg(target_arch = "x86_64")]
mod x86;

use std::ops::Range;

use common::engine_abi::DType;

use crate::backend::Backend;
#[cfg(target_arch = "x86_64")]
use crate::dot::vec_dot_unchecked;
use crate::dot::{generic, generic_dot, vec_dot_type};
use crate::error::KernelError;
#[cfg(target_arch = "x86_64")]
use crate::legacy::block32::QK;
use crate::shape::check_matrix;
pub use args::MatMulArgs;

/// Weight rows [`split_rows`] hands out at a time: a whole packed group
/// ([`crate::packed::PACK_ROWS`]), which is also a whole number of register tiles.
pub const ROW_BLOCK: usize = crate::packed::PACK_ROWS;

/// Weight rows per register tile of the row-major quantized products (4 x 2 accumulators).
#[cfg(target_arch = "x86_64")]
const QUANT_TILE_ROWS: usize = 4;

/// F16 rows one `vec_dot`-order call computes together when `k < 32`, where the whole
/// dot is ggml's scalar f64 tail (attention over a short KV cache): independent chains.
/// Longer rows go one at a time: two rows per call gave 8.1 against 13.1–16.2 tok/s for
/// one (llama3.2-1b f16, `engine bench -t 2 -p 0 -n 32`, builds alternated, same session).
#[cfg(target_arch = "x86_64")]
const F16_SHORT_DOT_ROWS: usize = 4;

/// Activation rows per register tile of the quantized products (4 x 2 accumulators).
#[cfg(target_arch = "x86_64")]
const QUANT_TILE_COLS: usize = 2;

/// Register tile of the 5-bit types (Q5_0, Q5_1): one weight row against 4 activation
/// rows, so the dearest part of the block, spreading the fifth bits to bytes, is paid once
/// per 4 products rather than 2. Measured against 4 x 2 on llama3.2-1b's shapes (`engine
/// bench -t 2 -p 512 -n 0`, alternated): Q5_0 68.2 against 57.8 tok/s, Q5_1 62.9–64.2
/// against 56.8–57.2; Q8_0 and Q4_1, whose unpacking is cheap, are faster at 4 x 2 (Q8_0
/// 90.3–92.5 against 82.3–85.4). Each output's sum runs over the blocks in the same order
/// whatever the tile, so the shape changes no result.
#[cfg(target_arch = "x86_64")]
const FIVE_BIT_TILE: (usize, usize) = (1, 4);
/// Weight rows per register tile of the float products.
#[cfg(target_arch = "x86_64")]
const FLOAT_TILE_ROWS: usize = 3;
/// Activation rows per register tile of the float products: 3 x 4 accumulators, 3
/// weight vectors and one activation vector fill the 16 AVX2 registers exactly.
#[cfg(target_arch = "x86_64")]
const FLOAT_TILE_COLS: usize = 4;

/// Target size in bytes of the slice of activation rows kept hot in the L2 cache while all
/// weight rows of the range stream past it.
#[cfg(target_arch = "x86_64")]
const ACTIVATION_CHUNK_BYTES: usize = 256 * 1024;

/// The weight rows thread `ith` of `nth` computes out of `n`: contiguous, in multiples of
/// [`ROW_BLOCK`] (except the tail), covering `0..n` exactly once over all threads.
pub fn split_rows(n: usize, ith: usize, nth: usize) -> Range<usize> {
    let nth = nth.max(1);
    let blocks = n.div_ceil(ROW_BLOCK);
    let start = (ith * blocks / nth * ROW_BLOCK).min(n);
    let end = ((ith + 1) * blocks / nth * ROW_BLOCK).min(n);
    start..end
}

/// Weight rows per quantized register tile for `m` activation rows: with one activation
/// row (decoding) nothing is shared between weight rows, and reading them one after the
/// other keeps a single sequential stream through memory (what `vec_dot` per row does)
/// instead of [`QUANT_TILE_ROWS`] interleaved ones.
#[cfg(target_arch = "x86_64")]
const fn quant_tile_rows(m: usize) -> usize {
    if m == 1 { 1 } else { QUANT_TILE_ROWS }
}

/// Whether the F16/F32 product of `m` rows rounds like tinyBLAS rather than like `vec_dot`.
const fn uses_tinyblas_order(m: usize, k: usize) -> bool {
    m >= 2 && k.is_multiple_of(8)
}

/// `y[i * y_stride + n] = dot(w row n, x row i)` for `n` in `n_range` and `i` in `0..m`, with
/// the detected backend; the operands and their layout are described at [`MatMulArgs`].
/// Buffer lengths are checked; the output is not.
///
/// # Safety
/// `args.y` is valid for writes at every index above, and no other thread reads or writes
/// those indices during the call.
pub unsafe fn matmul(args: MatMulArgs<'_>, n_range: Range<usize>) -> Result<(), KernelError> {
    // SAFETY: forwarded caller contract.
    unsafe { matmul_with(Backend::detect(), args, n_range) }
}

/// [`matmul`] with an explicit backend (an unsupported one falls back to
/// [`Backend::Generic`]).
///
/// # Safety
/// As [`matmul`].
pub unsafe fn matmul_with(
    backend: Backend,
    args: MatMulArgs<'_>,
    n_range: Range<usize>,
) -> Result<(), KernelError> {
    let MatMulArgs {
        wtype,
        w,
        w_stride,
        k,
        m,
        ..
    } = args;
    if wtype == DType::I32 {
        return Err(KernelError::UnsupportedType {
            dtype: wtype,
            op: "matmul",
        });
    }
    if n_range.is_empty() || m == 0 {
        return Ok(());
    }
    check_matrix("matmul weights", wtype, k, w, w_stride, n_range.end)?;
    args.check_activations()?;
    let backend = backend.supported_or_generic();
    if crate::k_quants::is_k_weight(wtype) && m >= crate::k_quants::tiles::MIN_ROWS {
        // SAFETY: buffers checked above, backend supported, output contract from the caller.
        unsafe { crate::k_quants::tiles::matmul(backend, &args, n_range) };
        return Ok(());
    }
    match backend {
        #[cfg(target_arch = "x86_64")]
        Backend::Avx2 => {
            // SAFETY: buffers checked above, AVX2 supported, output contract from the caller.
            unsafe { matmul_avx2(&args, n_range) }
        }
        #[cfg(target_arch = "aarch64")]
        Backend::Neon | Backend::NeonDotprod | Backend::NeonI8mm => {
            // SAFETY: buffers checked above, NEON supported, output contract from the caller.
            unsafe { matmul_neon(backend, &args, n_range) }
        }
        _ => {
            // SAFETY: output contract from the caller; buffers checked above.
            unsafe { matmul_generic(&args, n_range) }
        }
    }
}

/// Scalar product, one output at a time.
///
/// # Safety
/// Buffers checked by [`matmul_with`]; output contract of [`matmul`].
unsafe fn matmul_generic(args: &MatMulArgs<'_>, n_range: Range<usize>) -> Result<(), KernelError> {
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
    let wrow = wtype.row_bytes(k).unwrap_or(0);
    let xrow = vec_dot_type(wtype).row_bytes(k).unwrap_or(0);
    let tinyblas = uses_tinyblas_order(m, k);
    for i in 0..m {
        let xr = &x[i * x_stride..i * x_stride + xrow];
        for n in n_range.clone() {
            let wr = &w[n * w_stride..n * w_stride + wrow];
            let v = match wtype {
                DType::F32 if tinyblas => generic::dot_f32_single_acc(k, wr, xr),
                DType::F16 if tinyblas => generic::dot_f16_single_acc(k, wr, xr),
                DType::BF16 if tinyblas => generic::dot_bf16_single_acc(k, wr, xr),
                _ => generic_dot(wtype, k, wr, xr).ok_or(KernelError::UnsupportedType {
                    dtype: wtype,
                    op: "matmul",
                })?,
            };
            // SAFETY: the caller owns output (i, n).
            unsafe { *y.add(i * y_stride + n) = v };
        }
    }
    Ok(())
}

/// NEON product, one output at a time: tinyBLAS's order for float weights and two or
/// more rows, `vec_dot` otherwise (the NEON kernels where there are some, else the
/// portable ones).
///
/// # Safety
/// `backend` is a supported NEON backend; buffers checked by [`matmul_with`]; output
/// contract of [`matmul`].
#[cfg(target_arch = "aarch64")]
unsafe fn matmul_neon(
    backend: Backend,
    args: &MatMulArgs<'_>,
    n_range: Range<usize>,
) -> Result<(), KernelError> {
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
    use crate::dot::aarch64 as neon;
    type Single = unsafe fn(usize, *const u8, *const u8) -> f32;
    let single: Option<Single> = match wtype {
        DType::F32 if uses_tinyblas_order(m, k) => Some(neon::dot_f32_single_acc),
        DType::F16 if uses_tinyblas_order(m, k) => Some(neon::dot_f16_single_acc),
        DType::BF16 if uses_tinyblas_order(m, k) => Some(neon::dot_bf16_single_acc),
        _ => None,
    };
    for i in 0..m {
        for n in n_range.clone() {
            // SAFETY: rows n of w and i of x were checked by matmul_with; the backend is
            // supported (caller); k % 8 == 0 for the tinyBLAS order; output (i, n) owned.
            unsafe {
                let (wr, xr) = (w.as_ptr().add(n * w_stride), x.as_ptr().add(i * x_stride));
                let v = match single {
                    Some(f) => f(k, wr, xr),
                    None => crate::dot::vec_dot_unchecked(backend, wtype, k, wr, xr)?,
                };
                *y.add(i * y_stride + n) = v;
            }
        }
    }
    Ok(())
}

/// AVX2 product: register tiles of [`QUANT_TILE_ROWS`] x [`QUANT_TILE_COLS`] (quantized) or
/// [`FLOAT_TILE_ROWS`] x [`FLOAT_TILE_COLS`]
/// (float) activation rows, over slices of activation rows that fit the L2 cache.
///
/// # Safety
/// AVX2/FMA/F16C available; buffers checked by [`matmul_with`]; output contract of [`matmul`].
#[cfg(target_arch = "x86_64")]
unsafe fn matmul_avx2(args: &MatMulArgs<'_>, n_range: Range<usize>) -> Result<(), KernelError> {
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
    let tinyblas = uses_tinyblas_order(m, k);
    match wtype {
        DType::Q8_0 | DType::Q4_0 => {
            let table = if wtype == DType::Q8_0 {
                x86::tile_q8_0
            } else {
                x86::tile_q4_0
            };
            let tiling = Tiling {
                table,
                rm_max: quant_tile_rows(m),
                rn_max: QUANT_TILE_COLS,
                add: false,
                kk: k / QK,
                x_row_bytes: k / QK * 34,
            };
            // SAFETY: forwarded.
            unsafe { run_tiles(&tiling, args, n_range) };
        }
        DType::Q4_1 | DType::Q5_0 | DType::Q5_1 => {
            use crate::legacy::{q4_1::Q4_1, q5_0::Q5_0, q5_1::Q5_1};
            let table = match wtype {
                DType::Q4_1 => x86::tile_block_table::<Q4_1>,
                DType::Q5_0 => x86::tile_block_table::<Q5_0>,
                _ => x86::tile_block_table::<Q5_1>,
            };
            let (rows, cols) = if wtype == DType::Q4_1 {
                (quant_tile_rows(m), QUANT_TILE_COLS)
            } else {
                FIVE_BIT_TILE
            };
            let tiling = Tiling {
                table,
                rm_max: rows,
                rn_max: cols,
                add: false,
                kk: k / QK,
                x_row_bytes: vec_dot_type(wtype).row_bytes(k).unwrap_or(0),
            };
            // SAFETY: forwarded.
            unsafe { run_tiles(&tiling, args, n_range) };
        }
        DType::F16 | DType::BF16 | DType::F32 if tinyblas => {
            // SAFETY: forwarded.
            unsafe { float_tiles(args, n_range) };
        }
        DType::F16 if k < 32 => {
            // ggml_vec_dot_f16 with k < 32 is all scalar f64 tail (attention over a short
            // KV cache): four rows at a time give four independent dependency chains, each
            // rounded exactly like its own vec_dot.
            for i in 0..m {
                let xi = x.as_ptr().wrapping_add(i * x_stride);
                for n0 in n_range.clone().step_by(F16_SHORT_DOT_ROWS) {
                    let rows = (n_range.end - n0).min(F16_SHORT_DOT_ROWS);
                    let w_row =
                        |r: usize| w.as_ptr().wrapping_add((n0 + r.min(rows - 1)) * w_stride);
                    // SAFETY: rows n0..n0 + rows of w and row i of x were checked by
                    // matmul_with (a short tail repeats its last row, whose result is
                    // dropped); AVX2 supported; outputs (i, n0..n0 + rows) are the caller's.
                    unsafe {
                        let v = crate::dot::x86::dot_f16_rows::<F16_SHORT_DOT_ROWS>(
                            k,
                            std::array::from_fn(w_row),
                            xi,
                        );
                        for (r, v) in v.into_iter().take(rows).enumerate() {
                            *y.add(i * y_stride + n0 + r) = v;
                        }
                    }
                }
            }
        }
        DType::Q2_K | DType::Q3_K | DType::Q4_K | DType::Q5_K | DType::Q6_K => {
            use crate::k_quants::x86 as kx;
            let dot: RowDot = match wtype {
                DType::Q2_K => kx::dot_q2_k,
                DType::Q3_K => kx::dot_q3_k,
                DType::Q4_K => kx::dot_q4_k,
                DType::Q5_K => kx::dot_q5_k,
                _ => kx::dot_q6_k,
            };
            // SAFETY: rows checked by matmul_with; AVX2 supported; output owned.
            unsafe { rows_with(dot, k / crate::k_quants::QK_K, args, n_range) };
        }
        _ => {
            for i in 0..m {
                for n in n_range.clone() {
                    // SAFETY: rows checked by matmul_with; AVX2 supported; output owned.
                    unsafe {
                        let v = vec_dot_unchecked(
                            Backend::Avx2,
                            wtype,
                            k,
                            w.as_ptr().add(n * w_stride),
                            x.as_ptr().add(i * x_stride),
                        )?;
                        *y.add(i * y_stride + n) = v;
                    }
                }
            }
        }
    }
    Ok(())
}

/// A dot-product kernel over `nb` blocks of one weight row and one activation row.
#[cfg(target_arch = "x86_64")]
type RowDot = unsafe fn(usize, *const u8, *const u8) -> f32;

/// Every output `y[i·y_stride + n]` as `dot` of weight row `n` and activation row `i`,
/// with the kernel chosen once (batches too small for tiles: decoding).
///
/// # Safety
/// The CPU supports `dot`; rows `n_range` of `w` (stride `w_stride`) and `m` rows of `x`
/// (stride `x_stride`) hold `nb` blocks each; the caller owns the outputs.
#[cfg(target_arch = "x86_64")]
unsafe fn rows_with(dot: RowDot, nb: usize, args: &MatMulArgs<'_>, n_range: Range<usize>) {
    let MatMulArgs {
        w,
        w_stride,
        x,
        x_stride,
        m,
        y,
        y_stride,
        ..
    } = *args;
    let (w, x) = (w.as_ptr(), x.as_ptr());
    for i in 0..m {
        for n in n_range.clone() {
            // SAFETY: rows n of w and i of x hold nb blocks; the kernel is supported; output
            // owned (all from the caller).
            unsafe {
                *y.add(i * y_stride + n) = dot(nb, w.add(n * w_stride), x.add(i * x_stride));
            }
        }
    }
}

/// Float product in tinyBLAS's tile order: for each block of
/// [`K_BLOCK`](crate::order::K_BLOCK) elements (all of K, as llama.cpp's tinyBLAS sums
/// the whole of K in one accumulator) and each slice of activation rows that fits the L2
/// cache, the slice (widened from f16/bf16 to f32 for f16/bf16 weights, as tinyBLAS loads
/// them) meets every weight row of the range. With a K of 8192 (an FFN down-projection)
/// only 8 activation rows share one pass over the weights; blocking K would share more
/// but round differently from llama.cpp (issue 25).
///
/// # Safety
/// As [`matmul_avx2`]; `k % 8 == 0`.
#[cfg(target_arch = "x86_64")]
unsafe fn float_tiles(args: &MatMulArgs<'_>, n_range: Range<usize>) {
    let MatMulArgs {
        wtype,
        w,
        k,
        x,
        x_stride,
        m,
        y,
        y_stride,
        ..
    } = *args;
    let (table, elt): (fn(usize, usize) -> x86::TileFn, usize) = match wtype {
        DType::F16 => (x86::tile_f16, 2),
        DType::BF16 => (x86::tile_bf16, 2),
        _ => (x86::tile_f32, 4),
    };
    let widen = match wtype {
        DType::F16 => Some(x86::f16_row_to_f32 as unsafe fn(usize, *const u8, *mut f32)),
        DType::BF16 => Some(x86::bf16_row_to_f32 as unsafe fn(usize, *const u8, *mut f32)),
        _ => None,
    };
    let mut buf = Vec::new();
    let mut k0 = 0;
    while k0 < k {
        // One block: llama.cpp's tinyBLAS sums all of K at once (crate::order::K_BLOCK).
        let kl = k - k0;
        let mc = (ACTIVATION_CHUNK_BYTES / (4 * kl) / FLOAT_TILE_COLS * FLOAT_TILE_COLS)
            .max(FLOAT_TILE_COLS);
        let mut m0 = 0;
        while m0 < m {
            let rows = (m - m0).min(mc);
            let (xs, xs_stride): (&[u8], usize) = if let Some(widen) = widen {
                buf.resize(rows * kl, 0f32);
                for r in 0..rows {
                    // SAFETY: row m0 + r of x holds k halves (checked), k0 + kl <= k; buf
                    // row r holds kl floats.
                    unsafe {
                        widen(
                            kl,
                            x.as_ptr().add((m0 + r) * x_stride + 2 * k0),
                            buf.as_mut_ptr().add(r * kl),
                        )
                    };
                }
                // SAFETY: the bytes of buf's initialized floats (f32 has no padding, u8 no
                // alignment), borrowed only while buf is not written.
                let bytes =
                    unsafe { std::slice::from_raw_parts(buf.as_ptr().cast(), 4 * buf.len()) };
                (bytes, 4 * kl)
            } else {
                (&x[m0 * x_stride + 4 * k0..], x_stride)
            };
            // The same product restricted to rows m0..m0 + rows and elements k0..k0 + kl.
            let part = MatMulArgs {
                w: &w[elt * k0..],
                k: kl,
                x: xs,
                x_stride: xs_stride,
                m: rows,
                y: y.wrapping_add(m0 * y_stride),
                ..*args
            };
            let tiling = Tiling {
                table,
                rm_max: FLOAT_TILE_ROWS,
                rn_max: FLOAT_TILE_COLS,
                add: k0 > 0,
                kk: kl,
                x_row_bytes: 4 * kl,
            };
            // SAFETY: weight rows of the range from element k0 on, `rows` activation rows of
            // kl floats in xs, outputs of rows m0.. (caller's); k0 > 0 adds.
            unsafe { run_tiles(&tiling, &part, n_range.clone()) };
            m0 += rows;
        }
        k0 += kl;
    }
}

/// How [`run_tiles`] covers a product with register tiles.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Tiling {
    /// The tile kernel for `rm` weight rows by `rn` activation rows.
    table: fn(usize, usize) -> x86::TileFn,
    /// Weight rows of the largest tile.
    rm_max: usize,
    /// Activation rows of the largest tile.
    rn_max: usize,
    /// Whether the tiles add to the outputs instead of storing them.
    add: bool,
    /// The length every tile is called with (blocks or elements per row).
    kk: usize,
    /// Bytes the tiles read of each activation row (sizes the slices kept in L2).
    x_row_bytes: usize,
}

/// Walks the output in tiles: slices of activation rows sized for the L2 cache, then every
/// `rm_max` weight rows of the range, then `rn_max` activation rows at a time. Reads
/// `w`, `x`, `m`, `y` and their strides of `args` (the tiles know the types).
///
/// # Safety
/// As [`matmul_avx2`]; `x` covers `m` rows at `x_stride` of what the tiles read.
#[cfg(target_arch = "x86_64")]
unsafe fn run_tiles(tiling: &Tiling, args: &MatMulArgs<'_>, n_range: Range<usize>) {
    let Tiling {
        table,
        rm_max,
        rn_max,
        add,
        kk,
        x_row_bytes,
    } = *tiling;
    let MatMulArgs {
        w,
        w_stride,
        x,
        x_stride,
        m,
        y,
        y_stride,
        ..
    } = *args;
    let x = x.as_ptr();
    let mc = (ACTIVATION_CHUNK_BYTES / x_row_bytes.max(1) / rn_max * rn_max).max(rn_max);
    let mut m0 = 0;
    while m0 < m {
        let m1 = (m0 + mc).min(m);
        let mut n0 = n_range.start;
        while n0 < n_range.end {
            let rm = (n_range.end - n0).min(rm_max);
            let mut j0 = m0;
            while j0 < m1 {
                let rn = (m1 - j0).min(rn_max);
                let tile = table(rm, rn);
                // SAFETY: rows n0..n0+rm of w and j0..j0+rn of x are in bounds; the outputs
                // (j0.., n0..) belong to the caller's range.
                unsafe {
                    tile(
                        kk,
                        w.as_ptr().add(n0 * w_stride),
                        w_stride,
                        x.add(j0 * x_stride),
                        x_stride,
                        y.add(j0 * y_stride + n0),
                        y_stride,
                        add,
                    )
                };
                j0 += rn;
            }
            n0 += rm;
        }
        m0 = m1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_rows_covers_everything_once_in_blocks() {
        for n in [0usize, 1, 3, 4, 5, 17, 64, 2050] {
            for nth in 1..=5 {
                let mut next = 0;
                for ith in 0..nth {
                    let r = split_rows(n, ith, nth);
                    assert_eq!(r.start, next, "n={n} nth={nth} ith={ith}");
                    assert!(r.start.is_multiple_of(ROW_BLOCK) || r.is_empty());
                    next = r.end;
                }
                assert_eq!(next, n);
            }
        }
    }

    #[test]
    fn rejects_short_buffers() {
        let w = vec![0u8; 34 * 2];
        let x = vec![0u8; 34];
        let mut y = [0f32; 4];
        let args = |k: usize, m: usize, y: *mut f32| MatMulArgs {
            wtype: DType::Q8_0,
            w: &w,
            w_stride: 34,
            k,
            x: &x,
            x_stride: 34,
            m,
            y,
            y_stride: 4,
        };
        // SAFETY: y has room for outputs 0..2 of one row.
        let ok = unsafe { matmul(args(32, 1, y.as_mut_ptr()), 0..2) };
        assert!(ok.is_ok());
        // SAFETY: the call fails before writing.
        let err = unsafe { matmul(args(32, 1, y.as_mut_ptr()), 0..3) };
        assert!(matches!(err, Err(KernelError::BufferTooSmall { .. })));
        // SAFETY: as above.
        let err = unsafe { matmul(args(32, 2, y.as_mut_ptr()), 0..2) };
        assert!(matches!(err, Err(KernelError::BufferTooSmall { .. })));
        // SAFETY: as above.
        let err = unsafe { matmul(args(31, 1, y.as_mut_ptr()), 0..1) };
        assert!(matches!(err, Err(KernelError::RowNotBlockAligned { .. })));
    }
}
