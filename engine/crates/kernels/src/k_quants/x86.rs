//! AVX2 + FMA + F16C dot products of K-quant weight rows with `Q8_K` activation rows,
//! ported from ggml's `ggml_vec_dot_q*_K_q8_K` (`ggml-cpu/arch/x86/quants.c`) so they
//! round identically (and so identically to the portable functions of the type modules).
//!
//! Every function is `unsafe`: callers must have checked that the CPU supports AVX2, FMA
//! and F16C and that `w` and `x` cover `nb` blocks of their types. All loads are
//! unaligned, so rows may start at any address.

use std::arch::x86_64::*;

use super::{q2_k, q3_k, q4_k, q5_k, q6_k, q8_k};
use crate::dot::x86::load_f16_scalar;

/// ggml's `hsum_float_8`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn hsum8(x: __m256) -> f32 {
    let mut r = _mm_add_ps(_mm256_extractf128_ps::<1>(x), _mm256_castps256_ps128(x));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    _mm_cvtss_f32(r)
}

/// The `f32` scale of the `Q8_K` block at `p`.
///
/// # Safety
/// `p` is readable for four bytes.
#[inline]
pub(crate) unsafe fn q8k_d(p: *const u8) -> f32 {
    // SAFETY: four readable bytes at p (caller).
    unsafe { p.cast::<f32>().read_unaligned() }
}

/// 32 bytes at `p`.
///
/// # Safety
/// `p` is readable for 32 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn load256(p: *const u8) -> __m256i {
    // SAFETY: 32 readable bytes at p (caller); loadu has no alignment needs.
    unsafe { _mm256_loadu_si256(p.cast()) }
}

/// 16 bytes at `p`.
///
/// # Safety
/// `p` is readable for 16 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load128(p: *const u8) -> __m128i {
    // SAFETY: 16 readable bytes at p (caller).
    unsafe { _mm_loadu_si128(p.cast()) }
}

/// ggml's `get_scale_shuffle_q3k(i)`: 16-bit element `2i` of each 128-bit half in the low
/// half, element `2i + 1` in the high half (the scales of two 16-value groups).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn shuffle_q3k(i: usize) -> __m256i {
    let (a, b) = (4 * i as i8, 4 * i as i8 + 2);
    _mm256_setr_epi8(
        a,
        a + 1,
        a,
        a + 1,
        a,
        a + 1,
        a,
        a + 1,
        a,
        a + 1,
        a,
        a + 1,
        a,
        a + 1,
        a,
        a + 1,
        b,
        b + 1,
        b,
        b + 1,
        b,
        b + 1,
        b,
        b + 1,
        b,
        b + 1,
        b,
        b + 1,
        b,
        b + 1,
        b,
        b + 1,
    )
}

/// ggml's `get_scale_shuffle_k4(i)`: 16-bit element `i` broadcast within each 128-bit half.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn shuffle_k4(i: usize) -> __m256i {
    let a = 2 * i as i16;
    _mm256_set1_epi16(a | ((a + 1) << 8))
}

/// ggml's `get_scale_shuffle(i)`: byte `2i` eight times, then byte `2i + 1` eight times.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn shuffle_q6k(i: usize) -> __m128i {
    let (a, b) = (2 * i as i8, 2 * i as i8 + 1);
    _mm_setr_epi8(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b)
}

/// The 6-bit scales (bytes 0..8) and mins (bytes 8..16) of a `Q4_K`/`Q5_K` block whose
/// 12 packed bytes are at `p` (ggml's `utmp` shuffle).
///
/// # Safety
/// `p` is readable for 12 bytes.
#[inline]
unsafe fn k4_scales_mins(p: *const u8) -> [u32; 4] {
    const KMASK1: u32 = 0x3f3f_3f3f;
    const KMASK2: u32 = 0x0f0f_0f0f;
    const KMASK3: u32 = 0x0303_0303;
    // SAFETY: 12 readable bytes at p (caller).
    let u: [u32; 3] =
        unsafe { std::array::from_fn(|i| p.add(4 * i).cast::<u32>().read_unaligned()) };
    [
        u[0] & KMASK1,
        (u[2] & KMASK2) | (((u[0] >> 6) & KMASK3) << 4),
        u[1] & KMASK1,
        ((u[2] >> 4) & KMASK2) | (((u[1] >> 6) & KMASK3) << 4),
    ]
}

/// `ggml_vec_dot_q2_K_q8_K`.
///
/// # Safety
/// AVX2/FMA/F16C available; `w` holds `nb` `Q2_K` blocks and `x` `nb` `Q8_K` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q2_k(nb: usize, w: *const u8, x: *const u8) -> f32 {
    let m3 = _mm256_set1_epi8(3);
    let m4 = _mm_set1_epi8(0xf);
    let mut acc = _mm256_setzero_ps();
    for i in 0..nb {
        // SAFETY: block i of both rows is readable (caller).
        unsafe {
            let (wb, xb) = (w.add(i * q2_k::BLOCK_BYTES), x.add(i * q8_k::BLOCK_BYTES));
            let yd = q8k_d(xb);
            let d = yd * load_f16_scalar(wb.add(80));
            let dmin = -yd * load_f16_scalar(wb.add(82));
            let mins_and_scales = load128(wb);
            let scales8 = _mm_and_si128(mins_and_scales, m4);
            let mins8 = _mm_and_si128(_mm_srli_epi16::<4>(mins_and_scales), m4);
            let mins = _mm256_cvtepi8_epi16(mins8);
            let prod = _mm256_madd_epi16(mins, load256(xb.add(q8_k::BSUMS)));
            acc = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod), acc);
            let all_scales = _mm256_cvtepi8_epi16(scales8);
            let lo = _mm256_extracti128_si256::<0>(all_scales);
            let hi = _mm256_extracti128_si256::<1>(all_scales);
            let scales = [_mm256_set_m128i(lo, lo), _mm256_set_m128i(hi, hi)];
            let mut sumi = _mm256_setzero_si256();
            for (j, sc) in scales.iter().enumerate() {
                let q2bits = load256(wb.add(16 + 32 * j));
                let q8 = xb.add(q8_k::QS + 128 * j);
                let mut p = [_mm256_setzero_si256(); 4];
                for (s, ps) in p.iter_mut().enumerate() {
                    let q2 = _mm256_and_si256(
                        _mm256_srl_epi16(q2bits, _mm_cvtsi32_si128(2 * s as i32)),
                        m3,
                    );
                    let prod = _mm256_maddubs_epi16(q2, load256(q8.add(32 * s)));
                    *ps = _mm256_madd_epi16(_mm256_shuffle_epi8(*sc, shuffle_q3k(s)), prod);
                }
                let p01 = _mm256_add_epi32(p[0], p[1]);
                let p23 = _mm256_add_epi32(p[2], p[3]);
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p01, p23));
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    hsum8(acc)
}

/// `ggml_vec_dot_q3_K_q8_K`.
///
/// # Safety
/// AVX2/FMA/F16C available; `w` holds `nb` `Q3_K` blocks and `x` `nb` `Q8_K` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q3_k(nb: usize, w: *const u8, x: *const u8) -> f32 {
    const KMASK1: u32 = 0x0303_0303;
    const KMASK2: u32 = 0x0f0f_0f0f;
    let m3 = _mm256_set1_epi8(3);
    let mone = _mm256_set1_epi8(1);
    let m32 = _mm_set1_epi8(32);
    let mut acc = _mm256_setzero_ps();
    for i in 0..nb {
        // SAFETY: block i of both rows is readable (caller).
        unsafe {
            let (wb, xb) = (w.add(i * q3_k::BLOCK_BYTES), x.add(i * q8_k::BLOCK_BYTES));
            let d = q8k_d(xb) * load_f16_scalar(wb.add(108));
            let sp = wb.add(96);
            let aux: [u32; 3] =
                std::array::from_fn(|k| sp.add(4 * k).cast::<u32>().read_unaligned());
            let mut scales128 = _mm_set_epi32(
                (((aux[1] >> 4) & KMASK2) | (((aux[2] >> 6) & KMASK1) << 4)) as i32,
                (((aux[0] >> 4) & KMASK2) | (((aux[2] >> 4) & KMASK1) << 4)) as i32,
                ((aux[1] & KMASK2) | (((aux[2] >> 2) & KMASK1) << 4)) as i32,
                ((aux[0] & KMASK2) | ((aux[2] & KMASK1) << 4)) as i32,
            );
            scales128 = _mm_sub_epi8(scales128, m32);
            let all_scales = _mm256_cvtepi8_epi16(scales128);
            let lo = _mm256_extracti128_si256::<0>(all_scales);
            let hi = _mm256_extracti128_si256::<1>(all_scales);
            let scales = [_mm256_set_m128i(lo, lo), _mm256_set_m128i(hi, hi)];
            let hbits = load256(wb);
            let mut sumi = _mm256_setzero_si256();
            for (j, sc) in scales.iter().enumerate() {
                let q3bits = load256(wb.add(32 + 32 * j));
                let q8 = xb.add(q8_k::QS + 128 * j);
                let mut p = [_mm256_setzero_si256(); 4];
                for (s, ps) in p.iter_mut().enumerate() {
                    let bit = _mm_cvtsi32_si128((4 * j + s) as i32);
                    let q3l = _mm256_and_si256(
                        _mm256_srl_epi16(q3bits, _mm_cvtsi32_si128(2 * s as i32)),
                        m3,
                    );
                    // 4 where the high bit is clear, 0 where it is set.
                    let q3h = _mm256_slli_epi16::<2>(_mm256_srl_epi16(
                        _mm256_andnot_si256(hbits, _mm256_sll_epi16(mone, bit)),
                        bit,
                    ));
                    let q8s = load256(q8.add(32 * s));
                    let p16 = _mm256_sub_epi16(
                        _mm256_maddubs_epi16(q3l, q8s),
                        _mm256_maddubs_epi16(q3h, q8s),
                    );
                    *ps = _mm256_madd_epi16(_mm256_shuffle_epi8(*sc, shuffle_q3k(s)), p16);
                }
                let p01 = _mm256_add_epi32(p[0], p[1]);
                let p23 = _mm256_add_epi32(p[2], p[3]);
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p01, p23));
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    hsum8(acc)
}

/// The integer lane sums `Σ sc·q·q_x` of one `Q4_K` (`HIGH = false`) or `Q5_K` block
/// against one `Q8_K` block.
///
/// # Safety
/// AVX2 available; `qs` (and `qh` for Q5_K) are the block's quants, `q8` the activation
/// quants, `sc128` the 8 scales as bytes in the low half.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn k4_block_sums<const HIGH: bool>(
    qs: *const u8,
    qh: *const u8,
    q8: *const u8,
    sc128: __m128i,
) -> __m256i {
    let m4 = _mm256_set1_epi8(0xf);
    let scales = _mm256_set_m128i(sc128, sc128);
    let hbits = if HIGH {
        // SAFETY: 32 readable bytes of qh for Q5_K (caller).
        unsafe { load256(qh) }
    } else {
        _mm256_setzero_si256()
    };
    let mut sumi = _mm256_setzero_si256();
    for j in 0..4 {
        // SAFETY: quant chunk j (32 bytes) and activation chunks 2j, 2j+1 are readable.
        let (bits, q8l, q8h) = unsafe {
            (
                load256(qs.add(32 * j)),
                load256(q8.add(64 * j)),
                load256(q8.add(64 * j + 32)),
            )
        };
        let mut ql = _mm256_and_si256(bits, m4);
        let mut qhi = _mm256_and_si256(_mm256_srli_epi16::<4>(bits), m4);
        if HIGH {
            let b0 = _mm_cvtsi32_si128(2 * j as i32);
            let b1 = _mm_cvtsi32_si128(2 * j as i32 + 1);
            let h0 = _mm256_and_si256(hbits, _mm256_sll_epi16(_mm256_set1_epi8(1), b0));
            let h1 = _mm256_and_si256(hbits, _mm256_sll_epi16(_mm256_set1_epi8(1), b1));
            ql = _mm256_add_epi8(ql, _mm256_slli_epi16::<4>(_mm256_srl_epi16(h0, b0)));
            qhi = _mm256_add_epi8(qhi, _mm256_slli_epi16::<4>(_mm256_srl_epi16(h1, b1)));
        }
        let pl = _mm256_madd_epi16(
            _mm256_shuffle_epi8(scales, shuffle_k4(2 * j)),
            _mm256_maddubs_epi16(ql, q8l),
        );
        let ph = _mm256_madd_epi16(
            _mm256_shuffle_epi8(scales, shuffle_k4(2 * j + 1)),
            _mm256_maddubs_epi16(qhi, q8h),
        );
        sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
    }
    sumi
}

/// `ggml_vec_dot_q4_K_q8_K`.
///
/// # Safety
/// AVX2/FMA/F16C available; `w` holds `nb` `Q4_K` blocks and `x` `nb` `Q8_K` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q4_k(nb: usize, w: *const u8, x: *const u8) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut acc_m = _mm_setzero_ps();
    for i in 0..nb {
        // SAFETY: block i of both rows is readable (caller).
        unsafe {
            let (wb, xb) = (w.add(i * q4_k::BLOCK_BYTES), x.add(i * q8_k::BLOCK_BYTES));
            let yd = q8k_d(xb);
            let d = yd * load_f16_scalar(wb);
            let dmin = -yd * load_f16_scalar(wb.add(2));
            let u = k4_scales_mins(wb.add(4));
            let mins_and_scales = _mm256_cvtepu8_epi16(_mm_set_epi32(
                u[3] as i32,
                u[2] as i32,
                u[1] as i32,
                u[0] as i32,
            ));
            let q8sums = load256(xb.add(q8_k::BSUMS));
            let q8s = _mm_hadd_epi16(
                _mm256_extracti128_si256::<0>(q8sums),
                _mm256_extracti128_si256::<1>(q8sums),
            );
            let prod = _mm_madd_epi16(_mm256_extracti128_si256::<1>(mins_and_scales), q8s);
            acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc_m);
            let sumi = k4_block_sums::<false>(
                wb.add(16),
                wb,
                xb.add(q8_k::QS),
                _mm256_extracti128_si256::<0>(mins_and_scales),
            );
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    acc_m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
    acc_m = _mm_add_ss(acc_m, _mm_movehdup_ps(acc_m));
    hsum8(acc) + _mm_cvtss_f32(acc_m)
}

/// `ggml_vec_dot_q5_K_q8_K`.
///
/// # Safety
/// AVX2/FMA/F16C available; `w` holds `nb` `Q5_K` blocks and `x` `nb` `Q8_K` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q5_k(nb: usize, w: *const u8, x: *const u8) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut summs = 0f32;
    for i in 0..nb {
        // SAFETY: block i of both rows is readable (caller).
        unsafe {
            let (wb, xb) = (w.add(i * q5_k::BLOCK_BYTES), x.add(i * q8_k::BLOCK_BYTES));
            let yd = q8k_d(xb);
            let d = yd * load_f16_scalar(wb);
            let dmin = -yd * load_f16_scalar(wb.add(2));
            let u = k4_scales_mins(wb.add(4));
            let mins_and_scales = _mm256_cvtepu8_epi16(_mm_set_epi32(
                u[3] as i32,
                u[2] as i32,
                u[1] as i32,
                u[0] as i32,
            ));
            let q8sums = load256(xb.add(q8_k::BSUMS));
            let q8s = _mm_hadd_epi16(
                _mm256_extracti128_si256::<0>(q8sums),
                _mm256_extracti128_si256::<1>(q8sums),
            );
            let prod = _mm_madd_epi16(_mm256_extracti128_si256::<1>(mins_and_scales), q8s);
            let zero = _mm_setzero_si128();
            let hsum = _mm_hadd_epi32(_mm_hadd_epi32(prod, zero), zero);
            summs = dmin.mul_add(_mm_cvtsi128_si32(hsum) as f32, summs);
            let sumi = k4_block_sums::<true>(
                wb.add(48),
                wb.add(16),
                xb.add(q8_k::QS),
                _mm256_extracti128_si256::<0>(mins_and_scales),
            );
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    hsum8(acc) + summs
}

/// `ggml_vec_dot_q6_K_q8_K`.
///
/// # Safety
/// AVX2/FMA/F16C available; `w` holds `nb` `Q6_K` blocks and `x` `nb` `Q8_K` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q6_k(nb: usize, w: *const u8, x: *const u8) -> f32 {
    let m3 = _mm256_set1_epi8(3);
    let m15 = _mm256_set1_epi8(15);
    let mut acc = _mm256_setzero_ps();
    for i in 0..nb {
        // SAFETY: block i of both rows is readable (caller).
        unsafe {
            let (wb, xb) = (w.add(i * q6_k::BLOCK_BYTES), x.add(i * q8_k::BLOCK_BYTES));
            let d = q8k_d(xb) * load_f16_scalar(wb.add(208));
            let q8sums = load256(xb.add(q8_k::BSUMS));
            let scales = load128(wb.add(192));
            let scales_16 = _mm256_cvtepi8_epi16(scales);
            let q8sclsub = _mm256_slli_epi32::<5>(_mm256_madd_epi16(q8sums, scales_16));
            let mut sumi = _mm256_setzero_si256();
            for j in 0..2 {
                let q4bits1 = load256(wb.add(64 * j));
                let q4bits2 = load256(wb.add(64 * j + 32));
                let q4bits_h = load256(wb.add(128 + 32 * j));
                let q4h0 = _mm256_slli_epi16::<4>(_mm256_and_si256(q4bits_h, m3));
                let q4h1 = _mm256_slli_epi16::<2>(_mm256_and_si256(q4bits_h, _mm256_set1_epi8(12)));
                let q4h2 = _mm256_and_si256(q4bits_h, _mm256_set1_epi8(48));
                let q4h3 =
                    _mm256_srli_epi16::<2>(_mm256_and_si256(q4bits_h, _mm256_set1_epi8(-64)));
                let q = [
                    _mm256_or_si256(_mm256_and_si256(q4bits1, m15), q4h0),
                    _mm256_or_si256(_mm256_and_si256(q4bits2, m15), q4h1),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(q4bits1), m15), q4h2),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(q4bits2), m15), q4h3),
                ];
                let q8 = xb.add(q8_k::QS + 128 * j);
                let mut p = [_mm256_setzero_si256(); 4];
                for (s, ps) in p.iter_mut().enumerate() {
                    let p16 = _mm256_maddubs_epi16(q[s], load256(q8.add(32 * s)));
                    let sc = _mm_shuffle_epi8(scales, shuffle_q6k(4 * j + s));
                    *ps = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc), p16);
                }
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p[0], p[1]));
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p[2], p[3]));
            }
            sumi = _mm256_sub_epi32(sumi, q8sclsub);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    hsum8(acc)
}

/// The 4 bytes at `p` broadcast to every 32-bit lane.
///
/// # Safety
/// `p` is readable for 4 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn bcast4(p: *const u8) -> __m256i {
    // SAFETY: 4 readable bytes at p (caller).
    _mm256_set1_epi32(unsafe { p.cast::<i32>().read_unaligned() })
}
