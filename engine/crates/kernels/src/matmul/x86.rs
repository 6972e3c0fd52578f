//! AVX2 register-blocked tiles of the matrix product.
//!
//! A tile computes `RM` consecutive weight rows against `RN` consecutive activation rows,
//! keeping one 8-lane accumulator per output in registers. Each output is rounded exactly
//! as ggml's kernels round it: the Q8_0/Q4_0 tiles follow `ggml_vec_dot_*_q8_0` (which is
//! also what tinyBLAS computes), the f32 tiles follow tinyBLAS (`llamafile_sgemm`): one FMA
//! accumulator over 8-element steps, then `hsum`.

use std::arch::x86_64::*;

use crate::dot::x86::{Avx2Block, load_bf16x8, mul_sum_avx2};
use crate::dot::x86::{
    hsum8, load_f16_scalar, load_f16x8, load_q4_0_quants, load_q8_0_quants, mul_sum_i8_pairs,
};
use crate::legacy::bf16;

/// Signature shared by every tile: `(k_or_blocks, w, w_stride, x, x_stride, y, y_stride,
/// add)`; with `add` the tile adds its sums to `y` (a later block of K) instead of
/// storing them.
pub(crate) type TileFn =
    unsafe fn(usize, *const u8, usize, *const u8, usize, *mut f32, usize, bool);

/// Quantized tile: `nb` blocks, weights Q8_0 (`Q4 = false`) or Q4_0 (`Q4 = true`),
/// activations Q8_0.
///
/// # Safety
/// AVX2/FMA/F16C available; `RM` weight rows of `nb` blocks at `w + i * w_stride`, `RN`
/// activation rows at `x + j * x_stride`, and `y + j * y_stride + i` writable.
#[target_feature(enable = "avx2,fma,f16c")]
#[expect(clippy::too_many_arguments, reason = "the shared TileFn signature")]
unsafe fn tile_q<const Q4: bool, const RM: usize, const RN: usize>(
    nb: usize,
    w: *const u8,
    w_stride: usize,
    x: *const u8,
    x_stride: usize,
    y: *mut f32,
    y_stride: usize,
    add: bool,
) {
    let wblk = if Q4 { 18 } else { 34 };
    let mut acc = [[_mm256_setzero_ps(); RM]; RN];
    for b in 0..nb {
        let mut dx = [0f32; RN];
        for (j, d) in dx.iter_mut().enumerate() {
            // SAFETY: block b of activation row j is readable (caller).
            *d = unsafe { load_f16_scalar(x.add(j * x_stride + b * 34)) };
        }
        // One weight row at a time against every activation row (see `tile_block`).
        for i in 0..RM {
            // SAFETY: block b of weight row i is readable (caller).
            let (wq, dw) = unsafe {
                let p = w.add(i * w_stride + b * wblk);
                let q = if Q4 {
                    load_q4_0_quants(p)
                } else {
                    load_q8_0_quants(p)
                };
                (q, load_f16_scalar(p))
            };
            for (j, acc_j) in acc.iter_mut().enumerate() {
                // SAFETY: block b of activation row j is readable (caller).
                let xq = unsafe { load_q8_0_quants(x.add(j * x_stride + b * 34)) };
                let q = mul_sum_i8_pairs(wq, xq);
                acc_j[i] = _mm256_fmadd_ps(_mm256_set1_ps(dw * dx[j]), q, acc_j[i]);
            }
        }
    }
    // SAFETY: the outputs are writable and owned by this call (caller).
    unsafe { write_tile(&acc, y, y_stride, add) };
}

/// Floating-point tile in tinyBLAS's order: weights F32 (`W = WEIGHT_F32`), F16
/// (`WEIGHT_F16`) or BF16 (`WEIGHT_BF16`), activations F32; `k` a multiple of 8.
///
/// # Safety
/// As [`tile_q`], with rows of `k` elements.
#[target_feature(enable = "avx2,fma,f16c")]
#[expect(clippy::too_many_arguments, reason = "the shared TileFn signature")]
unsafe fn tile_f<const W: u8, const RM: usize, const RN: usize>(
    k: usize,
    w: *const u8,
    w_stride: usize,
    x: *const u8,
    x_stride: usize,
    y: *mut f32,
    y_stride: usize,
    add: bool,
) {
    let mut acc = [[_mm256_setzero_ps(); RM]; RN];
    let mut l = 0;
    while l < k {
        let mut a = [_mm256_setzero_ps(); RM];
        for (i, ai) in a.iter_mut().enumerate() {
            // SAFETY: elements l..l + 8 of weight row i are readable (caller, k % 8 == 0).
            *ai = unsafe {
                match W {
                    WEIGHT_F16 => load_f16x8(w.add(i * w_stride + 2 * l)),
                    WEIGHT_BF16 => load_bf16x8(w.add(i * w_stride + 2 * l)),
                    _ => _mm256_loadu_ps(w.add(i * w_stride + 4 * l).cast()),
                }
            };
        }
        for (j, acc_j) in acc.iter_mut().enumerate() {
            // SAFETY: elements l..l + 8 of activation row j are readable (caller).
            let b = unsafe { _mm256_loadu_ps(x.add(j * x_stride + 4 * l).cast()) };
            for i in 0..RM {
                acc_j[i] = _mm256_fmadd_ps(a[i], b, acc_j[i]);
            }
        }
        l += 8;
    }
    // SAFETY: the outputs are writable and owned by this call (caller).
    unsafe { write_tile(&acc, y, y_stride, add) };
}

/// Stores (or adds, for a later block of K) the horizontal sums of a tile's accumulators.
///
/// # Safety
/// `y + j * y_stride + i` writable for every accumulator `(j, i)`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn write_tile<const RM: usize, const RN: usize>(
    acc: &[[__m256; RM]; RN],
    y: *mut f32,
    y_stride: usize,
    add: bool,
) {
    for (j, acc_j) in acc.iter().enumerate() {
        for (i, a) in acc_j.iter().enumerate() {
            // SAFETY: output (j, i) is writable (caller).
            unsafe {
                let out = y.add(j * y_stride + i);
                *out = if add { *out + hsum8(*a) } else { hsum8(*a) };
            }
        }
    }
}

macro_rules! tile_table {
    ($name:ident, $kernel:ident, $flag:expr) => {
        /// The tile for `rm` weight rows (1..=4) by `rn` activation rows (1..=4).
        pub(crate) fn $name(rm: usize, rn: usize) -> TileFn {
            match (rm, rn) {
                (1, 1) => $kernel::<$flag, 1, 1>,
                (1, 2) => $kernel::<$flag, 1, 2>,
                (1, 3) => $kernel::<$flag, 1, 3>,
                (1, _) => $kernel::<$flag, 1, 4>,
                (2, 1) => $kernel::<$flag, 2, 1>,
                (2, 2) => $kernel::<$flag, 2, 2>,
                (2, 3) => $kernel::<$flag, 2, 3>,
                (2, _) => $kernel::<$flag, 2, 4>,
                (3, 1) => $kernel::<$flag, 3, 1>,
                (3, 2) => $kernel::<$flag, 3, 2>,
                (3, 3) => $kernel::<$flag, 3, 3>,
                (3, _) => $kernel::<$flag, 3, 4>,
                (_, 1) => $kernel::<$flag, 4, 1>,
                (_, 2) => $kernel::<$flag, 4, 2>,
                (_, 3) => $kernel::<$flag, 4, 3>,
                (_, _) => $kernel::<$flag, 4, 4>,
            }
        }
    };
}

tile_table!(tile_q8_0, tile_q, false);
tile_table!(tile_q4_0, tile_q, true);
tile_table!(tile_f16, tile_f, WEIGHT_F16);
tile_table!(tile_bf16, tile_f, WEIGHT_BF16);
tile_table!(tile_f32, tile_f, WEIGHT_F32);

/// Weight element types of [`tile_f`].
const WEIGHT_F32: u8 = 0;
const WEIGHT_F16: u8 = 1;
const WEIGHT_BF16: u8 = 2;

/// Quantized tile of a [`Block32`] weight type (Q4_1, Q5_0, Q5_1) against its activation
/// blocks, each output rounded like [`crate::dot::x86::dot_block32`] (llama.cpp runs `vec_dot`
/// per output for Q4_1/Q5_1, and tinyBLAS for Q5_0, which rounds the same way).
///
/// # Safety
/// As [`tile_q`], with blocks of `B` and its activation type.
#[target_feature(enable = "avx2,fma,f16c")]
#[expect(clippy::too_many_arguments, reason = "the shared TileFn signature")]
unsafe fn tile_block<B: Avx2Block, const RM: usize, const RN: usize>(
    nb: usize,
    w: *const u8,
    w_stride: usize,
    x: *const u8,
    x_stride: usize,
    y: *mut f32,
    y_stride: usize,
    add: bool,
) {
    let mut acc = [[_mm256_setzero_ps(); RM]; RN];
    let mut summs = [[0f32; RM]; RN];
    for b in 0..nb {
        let mut dx = [0f32; RN];
        let mut sx = [0f32; RN];
        for j in 0..RN {
            // SAFETY: block b of activation row j is readable (caller).
            unsafe {
                let p = x.add(j * x_stride + b * B::X_BYTES);
                dx[j] = load_f16_scalar(p);
                if B::HAS_MIN {
                    sx[j] = load_f16_scalar(p.add(2));
                }
            }
        }
        // One weight row at a time against every activation row: its quants and the
        // accumulators are all that is live (holding all RM rows' quants, and for Q5_0
        // their absolute values, spilled registers in the 4 x 2 tile).
        for i in 0..RM {
            // SAFETY: block b of weight row i is readable (caller).
            let (wq, dw, mw) = unsafe {
                let p = w.add(i * w_stride + b * B::BYTES);
                let mw = if B::HAS_MIN {
                    load_f16_scalar(p.add(2))
                } else {
                    0.0
                };
                (B::quants_avx2(p), load_f16_scalar(p), mw)
            };
            for j in 0..RN {
                if B::HAS_MIN {
                    summs[j][i] = mw.mul_add(sx[j], summs[j][i]);
                }
                // SAFETY: the 32 quants of block b of activation row j (caller).
                let q = unsafe {
                    let xp = x.add(j * x_stride + b * B::X_BYTES + B::X_BYTES - 32);
                    mul_sum_avx2::<B>(wq, xp)
                };
                acc[j][i] = _mm256_fmadd_ps(_mm256_set1_ps(dw * dx[j]), q, acc[j][i]);
            }
        }
    }
    for (j, (acc_j, summs_j)) in acc.iter().zip(&summs).enumerate() {
        for (i, (a, s)) in acc_j.iter().zip(summs_j).enumerate() {
            let v = if B::HAS_MIN { hsum8(*a) + s } else { hsum8(*a) };
            // SAFETY: output (j, i) is writable (caller).
            unsafe {
                let out = y.add(j * y_stride + i);
                *out = if add { *out + v } else { v };
            }
        }
    }
}

/// The [`tile_block`] of `B` for `rm` weight rows (1..=4) by `rn` activation rows (1..=4).
pub(crate) fn tile_block_table<B: Avx2Block>(rm: usize, rn: usize) -> TileFn {
    match (rm, rn) {
        (1, 1) => tile_block::<B, 1, 1>,
        (1, 2) => tile_block::<B, 1, 2>,
        (1, 3) => tile_block::<B, 1, 3>,
        (1, _) => tile_block::<B, 1, 4>,
        (2, 1) => tile_block::<B, 2, 1>,
        (2, 2) => tile_block::<B, 2, 2>,
        (2, 3) => tile_block::<B, 2, 3>,
        (2, _) => tile_block::<B, 2, 4>,
        (3, 1) => tile_block::<B, 3, 1>,
        (3, 2) => tile_block::<B, 3, 2>,
        (3, 3) => tile_block::<B, 3, 3>,
        (3, _) => tile_block::<B, 3, 4>,
        (_, 1) => tile_block::<B, 4, 1>,
        (_, 2) => tile_block::<B, 4, 2>,
        (_, 3) => tile_block::<B, 4, 3>,
        (_, _) => tile_block::<B, 4, 4>,
    }
}

/// Converts `k` bfloat16 values at `src` (any alignment) to `f32` at `dst`.
///
/// # Safety
/// AVX2 available; `src` readable for `2 * k` bytes, `dst` writable for `k` floats.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn bf16_row_to_f32(k: usize, src: *const u8, dst: *mut f32) {
    let mut i = 0;
    while i + 8 <= k {
        // SAFETY: elements i..i + 8 are in bounds of both rows (caller).
        unsafe { _mm256_storeu_ps(dst.add(i), load_bf16x8(src.add(2 * i))) };
        i += 8;
    }
    while i < k {
        // SAFETY: element i is in bounds (caller).
        unsafe { *dst.add(i) = bf16::to_f32(src.add(2 * i).cast::<u16>().read_unaligned()) };
        i += 1;
    }
}

/// Converts `k` halves at `src` (any alignment) to `f32` at `dst`.
///
/// # Safety
/// AVX2/FMA/F16C available; `src` readable for `2 * k` bytes, `dst` writable for `k` floats.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn f16_row_to_f32(k: usize, src: *const u8, dst: *mut f32) {
    let mut i = 0;
    while i + 8 <= k {
        // SAFETY: elements i..i + 8 are in bounds of both rows (caller).
        unsafe { _mm256_storeu_ps(dst.add(i), load_f16x8(src.add(2 * i))) };
        i += 8;
    }
    while i < k {
        // SAFETY: element i is in bounds (caller).
        unsafe { *dst.add(i) = load_f16_scalar(src.add(2 * i)) };
        i += 1;
    }
}
