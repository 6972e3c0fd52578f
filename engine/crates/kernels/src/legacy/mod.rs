//! ggml's other 32-element block types — Q4_1, Q5_0, Q5_1 weights and the Q8_1
//! activations they meet — and BF16, one small file per type.
//!
//! The three weight types share one shape of dot product with their activation block
//! (ggml-cpu `arch/x86/quants.c`, `ggml_vec_dot_{q4_1_q8_1,q5_0_q8_0,q5_1_q8_1}`): per
//! block, 8 integer lane sums of `q_w * q_x` (`maddubs` + `madd`), multiplied by
//! `d_w * d_x` and accumulated with one FMA into 8 lanes; types with a minimum `m` also
//! accumulate `m * s_x` (Q8_1's `s = d * Σ q`) in a scalar that GCC fuses into an FMA
//! (checked in the oracle's `libggml-cpu.so`: `vfmadd231ss`). The result is
//! `hsum_float_8(acc) (+ summs)`. A type only describes its block ([`Block32`]); the
//! generic and AVX2 dot products and the tiles of [`crate::matmul`] are written once.

pub(crate) mod bf16;
pub(crate) mod q4_1;
pub(crate) mod q5_0;
pub(crate) mod q5_1;
pub(crate) mod q8_1;

use common::engine_abi::DType;

use crate::dot::generic::{LANES, block_lane_sums, hsum8};
use crate::f16::read_f16;
use crate::quant::QK;

/// One ggml weight block of [`QK`] elements whose value is `d * q (+ m)`, multiplied with
/// Q8_0 blocks (no minimum) or Q8_1 blocks (with a minimum).
pub(crate) trait Block32 {
    /// The ggml type.
    const DTYPE: DType;
    /// Bytes of one block (`d` is always the f16 at bytes 0..2).
    const BYTES: usize = Self::DTYPE.block_bytes();
    /// Whether the block carries a minimum `m` (f16 at bytes 2..4); its quants are then
    /// unsigned and its activations Q8_1, else signed and Q8_0.
    const HAS_MIN: bool;
    /// Bytes of one activation block (Q8_1: 36, Q8_0: 34); its 32 quants are the last 32.
    const X_BYTES: usize = if Self::HAS_MIN { 36 } else { 34 };

    /// ggml's reference quantizer (`quantize_row_*_ref`) for one block of `x`.
    fn quantize(x: &[f32], out: &mut [u8]);

    /// The block's integer quants in element order (unsigned `0..32` with a minimum,
    /// signed `-16..16` / `-8..8` without).
    fn quants(block: &[u8]) -> [i8; QK];

    /// [`Block32::quants`] as 32 bytes in one AVX2 register, as ggml builds them.
    ///
    /// # Safety
    /// AVX2 available; `p` readable for [`Block32::BYTES`] bytes.
    #[cfg(target_arch = "x86_64")]
    unsafe fn quants_avx2(p: *const u8) -> std::arch::x86_64::__m256i;
}

/// Quantizes a row of whole blocks with the reference quantizer of `B`.
pub(crate) fn quantize_row<B: Block32>(src: &[f32], dst: &mut [u8]) {
    for (x, out) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(B::BYTES)) {
        B::quantize(x, out);
    }
}

/// Dequantizes a row of whole blocks of `B` as ggml's `dequantize_row_*`: `q * d (+ m)`,
/// each product rounded to `f32` before the minimum is added (no FMA in `libggml-base`).
pub(crate) fn dequantize_row<B: Block32>(src: &[u8], dst: &mut [f32]) {
    for (b, out) in src.chunks_exact(B::BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = read_f16(b, 0);
        let q = B::quants(b);
        if B::HAS_MIN {
            let m = read_f16(b, 2);
            for (o, &q) in out.iter_mut().zip(&q) {
                *o = f32::from(q) * d + m;
            }
        } else {
            for (o, &q) in out.iter_mut().zip(&q) {
                *o = f32::from(q) * d;
            }
        }
    }
}

/// The dot product of `nb` blocks of `B` with activation blocks, rounded exactly like
/// the AVX2 code ([`dot_avx2`]).
pub(crate) fn dot<B: Block32>(nb: usize, w: &[u8], x: &[u8]) -> f32 {
    let mut acc = [0f32; LANES];
    let mut summs = 0f32;
    for b in 0..nb {
        let wb = &w[B::BYTES * b..B::BYTES * (b + 1)];
        let xb = &x[B::X_BYTES * b..B::X_BYTES * (b + 1)];
        if B::HAS_MIN {
            summs = read_f16(wb, 2).mul_add(read_f16(xb, 2), summs);
        }
        let d = read_f16(wb, 0) * read_f16(xb, 0);
        let lanes = block_lane_sums(&B::quants(wb), &xb[B::X_BYTES - QK..]);
        for (a, l) in acc.iter_mut().zip(lanes) {
            *a = d.mul_add(l, *a);
        }
    }
    if B::HAS_MIN {
        hsum8(acc) + summs
    } else {
        hsum8(acc)
    }
}

/// AVX2 form of [`dot`], after ggml's x86 `ggml_vec_dot_*`.
///
/// # Safety
/// AVX2/FMA/F16C available; `w` readable for `nb` blocks of `B`, `x` for `nb` activation
/// blocks.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_avx2<B: Block32>(nb: usize, w: *const u8, x: *const u8) -> f32 {
    use std::arch::x86_64::*;

    use crate::dot::x86::{hsum8, load_f16_scalar};
    let mut acc = _mm256_setzero_ps();
    let mut summs = 0f32;
    for b in 0..nb {
        // SAFETY: block b of both rows is readable (caller).
        unsafe {
            let (wb, xb) = (w.add(B::BYTES * b), x.add(B::X_BYTES * b));
            if B::HAS_MIN {
                summs = load_f16_scalar(wb.add(2)).mul_add(load_f16_scalar(xb.add(2)), summs);
            }
            let d = _mm256_set1_ps(load_f16_scalar(wb) * load_f16_scalar(xb));
            let q = mul_sum_avx2::<B>(B::quants_avx2(wb), xb.add(B::X_BYTES - QK));
            acc = _mm256_fmadd_ps(d, q, acc);
        }
    }
    if B::HAS_MIN {
        hsum8(acc) + summs
    } else {
        hsum8(acc)
    }
}

/// Lane sums of one block pair: `mul_sum_us8_pairs_float` for unsigned weight quants,
/// `mul_sum_i8_pairs_float` for signed ones.
///
/// # Safety
/// AVX2 available; `xq` readable for 32 bytes.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn mul_sum_avx2<B: Block32>(
    wq: std::arch::x86_64::__m256i,
    xq: *const u8,
) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    // SAFETY: 32 readable bytes at xq (caller).
    let xq = unsafe { _mm256_loadu_si256(xq.cast()) };
    if B::HAS_MIN {
        let dot = _mm256_maddubs_epi16(wq, xq);
        _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_set1_epi16(1), dot))
    } else {
        crate::dot::x86::mul_sum_i8_pairs(wq, xq)
    }
}

/// ggml's `bytes_from_nibbles_32`: 16 packed bytes at `p` as 32 bytes, low nibbles first.
///
/// # Safety
/// AVX2 available; `p` readable for 16 bytes.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn nibbles_avx2(p: *const u8) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    // SAFETY: 16 readable bytes at p (caller).
    let tmp = unsafe { _mm_loadu_si128(p.cast()) };
    let bytes = _mm256_set_m128i(_mm_srli_epi16::<4>(tmp), tmp);
    _mm256_and_si256(bytes, _mm256_set1_epi8(0x0f))
}

/// ggml's `bytes_from_bits_32`: byte `i` is `0xff` where bit `i` of the 32 bits at `p` is
/// set, else 0.
///
/// # Safety
/// AVX2 available; `p` readable for 4 bytes.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn bits_avx2(p: *const u8) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    // SAFETY: 4 readable bytes at p (caller); read_unaligned needs no alignment.
    let x32 = unsafe { p.cast::<u32>().read_unaligned() };
    let shuf = _mm256_set_epi64x(
        0x0303_0303_0303_0303,
        0x0202_0202_0202_0202,
        0x0101_0101_0101_0101,
        0,
    );
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(x32 as i32), shuf);
    let bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe));
    _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1))
}

/// The fifth bits of a Q5 block (`qh`, little-endian u32 at `qh`) and its nibbles as the
/// 5-bit values `0..32` in element order.
pub(crate) fn five_bit_quants(qh: &[u8], qs: &[u8]) -> [u8; QK] {
    let qh = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
    let mut q = [0u8; QK];
    for j in 0..QK / 2 {
        let h0 = (((qh >> j) << 4) & 0x10) as u8;
        let h1 = ((qh >> (j + 12)) & 0x10) as u8;
        q[j] = (qs[j] & 0x0f) | h0;
        q[j + QK / 2] = (qs[j] >> 4) | h1;
    }
    q
}

/// Packs 5-bit values (element order) into a Q5 block's `qh` (little-endian) and `qs`.
pub(crate) fn pack_five_bit(q: &[u8; QK], qh: &mut [u8], qs: &mut [u8]) {
    let mut h = 0u32;
    for j in 0..QK / 2 {
        let (x0, x1) = (q[j], q[j + QK / 2]);
        qs[j] = (x0 & 0x0f) | ((x1 & 0x0f) << 4);
        h |= u32::from((x0 & 0x10) >> 4) << j;
        h |= u32::from((x1 & 0x10) >> 4) << (j + QK / 2);
    }
    qh.copy_from_slice(&h.to_le_bytes());
}

/// Minimum and maximum of a block as ggml's `_1` quantizers find them (from
/// `FLT_MAX` / `-FLT_MAX`).
pub(crate) fn min_max(x: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

/// The value of largest magnitude (the first of equal magnitudes), as ggml's `_0`
/// quantizers find it.
pub(crate) fn signed_abs_max(x: &[f32]) -> f32 {
    let (mut amax, mut max) = (0f32, 0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}
