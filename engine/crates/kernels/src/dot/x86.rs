//! AVX2 + FMA + F16C dot products, written after ggml's x86 code so they round identically.
//!
//! Every function is `unsafe`: callers must have checked that the CPU supports AVX2, FMA
//! and F16C ([`crate::Backend::Avx2`]) and that the pointers cover the stated rows.
//! All loads are unaligned loads, so rows may start at any address.

use std::arch::x86_64::*;

use crate::legacy::bf16;
use crate::legacy::block32::{Block32, QK};
use crate::legacy::{q4_1::Q4_1, q5_0::Q5_0, q5_1::Q5_1};

/// A [`Block32`] weight type whose quants AVX2 code loads into one register.
pub(crate) trait Avx2Block: Block32 {
    /// [`Block32::quants`] as 32 bytes in one AVX2 register, as ggml builds them.
    ///
    /// # Safety
    /// AVX2 available; `p` readable for [`Block32::BYTES`] bytes.
    unsafe fn quants_avx2(p: *const u8) -> __m256i;
}

impl Avx2Block for Q4_1 {
    #[inline]
    unsafe fn quants_avx2(p: *const u8) -> __m256i {
        // SAFETY: the nibbles are bytes 4..20 of the block (caller); AVX2 (caller).
        unsafe { nibbles_avx2(p.add(4)) }
    }
}

impl Avx2Block for Q5_0 {
    #[inline]
    unsafe fn quants_avx2(p: *const u8) -> __m256i {
        // SAFETY: qh is bytes 2..6 and the nibbles 6..22 of the block (caller); AVX2.
        unsafe {
            let qx = nibbles_avx2(p.add(6));
            // 0xf0 where the fifth bit is clear: `nibble | 0xf0` is `nibble - 16` as i8.
            let hi = _mm256_andnot_si256(bits_avx2(p.add(2)), _mm256_set1_epi8(-16));
            _mm256_or_si256(qx, hi)
        }
    }
}

impl Avx2Block for Q5_1 {
    #[inline]
    unsafe fn quants_avx2(p: *const u8) -> __m256i {
        // SAFETY: qh is bytes 4..8 and the nibbles 8..24 of the block (caller); AVX2.
        unsafe {
            let qx = nibbles_avx2(p.add(8));
            let hi = _mm256_and_si256(bits_avx2(p.add(4)), _mm256_set1_epi8(0x10));
            _mm256_or_si256(qx, hi)
        }
    }
}

/// Horizontal sum in ggml's `hsum_float_8` order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn hsum8(x: __m256) -> f32 {
    let mut r = _mm_add_ps(_mm256_extractf128_ps::<1>(x), _mm256_castps256_ps128(x));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    _mm_cvtss_f32(r)
}

/// ggml's `GGML_F32x8_REDUCE` of four accumulators.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn reduce4(s: [__m256; 4]) -> f32 {
    let a = _mm256_add_ps(s[0], s[2]);
    let b = _mm256_add_ps(s[1], s[3]);
    let c = _mm256_add_ps(a, b);
    let t0 = _mm_add_ps(_mm256_castps256_ps128(c), _mm256_extractf128_ps::<1>(c));
    let t1 = _mm_hadd_ps(t0, t0);
    _mm_cvtss_f32(_mm_hadd_ps(t1, t1))
}

/// Converts the little-endian half at `p` (any alignment) to `f32`.
///
/// Written in assembly because of what LLVM makes of the intrinsics: only lane 0 of
/// `vcvtph2ps` is used, so it drops the zero-extension of `_mm_cvtsi32_si128` and loads
/// the half with `vpinsrw` into whatever register it likes, which merges into that
/// register's old value. In the quantized dot products it picked the accumulator, so
/// every block's scale waited for the previous block's FMA: Q5_0 decoding ran 1.3× slower
/// (perf annotate of `tile_block`). `vmovd` writes the whole register.
///
/// # Safety
/// `p` is valid for reading two bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn load_f16_scalar(p: *const u8) -> f32 {
    // SAFETY: the caller guarantees two readable bytes at `p`; read_unaligned needs no alignment.
    let bits = u32::from(unsafe { p.cast::<u16>().read_unaligned() });
    let v: __m128;
    // SAFETY: register-only instructions of F16C/AVX (enabled on this function); no memory,
    // stack or flags touched.
    unsafe {
        std::arch::asm!(
            "vmovd {v}, {b:e}",
            "vcvtph2ps {v}, {v}",
            b = in(reg) bits,
            v = out(xmm_reg) v,
            options(pure, nomem, nostack, preserves_flags),
        );
    }
    _mm_cvtss_f32(v)
}

/// Loads 8 halves at `p` (any alignment) converted to `f32`.
///
/// # Safety
/// `p` is valid for reading 16 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn load_f16x8(p: *const u8) -> __m256 {
    // SAFETY: 16 readable bytes at `p` (caller); loadu has no alignment requirement.
    _mm256_cvtph_ps(unsafe { _mm_loadu_si128(p.cast()) })
}

/// Loads the 32 signed quants of the Q8_0 block at `p`.
///
/// # Safety
/// `p` is valid for reading 34 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn load_q8_0_quants(p: *const u8) -> __m256i {
    // SAFETY: the quants are bytes 2..34 of the block, readable by the caller's guarantee.
    unsafe { _mm256_loadu_si256(p.add(2).cast()) }
}

/// Loads the 32 quants of the Q4_0 block at `p` as signed bytes `nibble - 8` (low nibbles
/// in bytes 0..16, high nibbles in 16..32, like ggml's `bytes_from_nibbles_32`).
///
/// # Safety
/// `p` is valid for reading 18 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn load_q4_0_quants(p: *const u8) -> __m256i {
    // SAFETY: the packed quants are bytes 2..18 of the block, readable by the caller's guarantee.
    let tmp = unsafe { _mm_loadu_si128(p.add(2).cast()) };
    let bytes = _mm256_set_m128i(_mm_srli_epi16::<4>(tmp), tmp);
    let nibbles = _mm256_and_si256(bytes, _mm256_set1_epi8(0x0f));
    _mm256_sub_epi8(nibbles, _mm256_set1_epi8(8))
}

/// Lane sums of `w * x` for signed bytes as ggml's `mul_sum_i8_pairs_float` computes them.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn mul_sum_i8_pairs(w: __m256i, x: __m256i) -> __m256 {
    let aw = _mm256_sign_epi8(w, w);
    let sx = _mm256_sign_epi8(x, w);
    let dot = _mm256_maddubs_epi16(aw, sx);
    _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_set1_epi16(1), dot))
}

/// `ggml_vec_dot_f32`.
///
/// # Safety
/// AVX2/FMA/F16C available; `w` and `x` valid for `4 * k` bytes.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_f32(k: usize, w: *const u8, x: *const u8) -> f32 {
    let np = k & !31;
    let mut s = [_mm256_setzero_ps(); 4];
    let (w, x) = (w.cast::<f32>(), x.cast::<f32>());
    let mut i = 0;
    while i < np {
        for (j, acc) in s.iter_mut().enumerate() {
            // SAFETY: i + 8j + 8 <= np <= k elements are readable (caller).
            let (a, b) = unsafe {
                (
                    _mm256_loadu_ps(w.add(i + 8 * j)),
                    _mm256_loadu_ps(x.add(i + 8 * j)),
                )
            };
            *acc = _mm256_fmadd_ps(a, b, *acc);
        }
        i += 32;
    }
    let mut sum = reduce4(s);
    for e in np..k {
        // SAFETY: e < k.
        sum += unsafe { w.add(e).read_unaligned() * x.add(e).read_unaligned() };
    }
    sum
}

/// `ggml_vec_dot_f16`.
///
/// # Safety
/// AVX2/FMA/F16C available; `w` and `x` valid for `2 * k` bytes.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_f16(k: usize, w: *const u8, x: *const u8) -> f32 {
    // SAFETY: forwarded.
    unsafe { dot_f16_rows::<1>(k, [w], x)[0] }
}

/// `ggml_vec_dot_f16` of `R` weight rows with one activation row, each rounded exactly
/// like its own [`dot_f16`]: interleaving the rows only adds independent dependency
/// chains (and memory streams) per activation load.
///
/// # Safety
/// AVX2/FMA/F16C available; every `w[r]` and `x` valid for `2 * k` bytes.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_f16_rows<const R: usize>(
    k: usize,
    w: [*const u8; R],
    x: *const u8,
) -> [f32; R] {
    let np = k & !31;
    let mut s = [[_mm256_setzero_ps(); 4]; R];
    let mut i = 0;
    while i < np {
        for j in 0..4 {
            let off = 2 * (i + 8 * j);
            // SAFETY: elements i + 8j .. i + 8j + 8 are below np <= k (caller).
            let b = unsafe { load_f16x8(x.add(off)) };
            for (sr, wr) in s.iter_mut().zip(&w) {
                // SAFETY: as above, for weight row r.
                let a = unsafe { load_f16x8(wr.add(off)) };
                sr[j] = _mm256_fmadd_ps(a, b, sr[j]);
            }
        }
        i += 32;
    }
    let mut sums = [0f64; R];
    for (sum, sr) in sums.iter_mut().zip(&s) {
        *sum = f64::from(reduce4(*sr));
    }
    for e in np..k {
        // SAFETY: e < k.
        let b = unsafe { load_f16_scalar(x.add(2 * e)) };
        for (sum, wr) in sums.iter_mut().zip(&w) {
            // SAFETY: e < k.
            let a = unsafe { load_f16_scalar(wr.add(2 * e)) };
            *sum += f64::from(a * b);
        }
    }
    sums.map(|v| v as f32)
}

/// `ggml_vec_dot_q8_0_q8_0` over `nb` blocks.
///
/// # Safety
/// AVX2/FMA/F16C available; `w` and `x` valid for `34 * nb` bytes.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q8_0(nb: usize, w: *const u8, x: *const u8) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for b in 0..nb {
        // SAFETY: block b lies within the 34 * nb readable bytes of each row.
        unsafe {
            let (wb, xb) = (w.add(34 * b), x.add(34 * b));
            let d = _mm256_set1_ps(load_f16_scalar(wb) * load_f16_scalar(xb));
            let q = mul_sum_i8_pairs(load_q8_0_quants(wb), load_q8_0_quants(xb));
            acc = _mm256_fmadd_ps(d, q, acc);
        }
    }
    hsum8(acc)
}

/// `ggml_vec_dot_q4_0_q8_0` over `nb` blocks.
///
/// # Safety
/// AVX2/FMA/F16C available; `w` valid for `18 * nb` bytes and `x` for `34 * nb`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_q4_0(nb: usize, w: *const u8, x: *const u8) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for b in 0..nb {
        // SAFETY: block b lies within the readable bytes of each row.
        unsafe {
            let (wb, xb) = (w.add(18 * b), x.add(34 * b));
            let d = _mm256_set1_ps(load_f16_scalar(wb) * load_f16_scalar(xb));
            let q = mul_sum_i8_pairs(load_q4_0_quants(wb), load_q8_0_quants(xb));
            acc = _mm256_fmadd_ps(d, q, acc);
        }
    }
    hsum8(acc)
}

/// AVX2 form of [`generic::dot_block32`](super::generic::dot_block32), after ggml's x86 `ggml_vec_dot_*`.
///
/// # Safety
/// AVX2/FMA/F16C available; `w` readable for `nb` blocks of `B`, `x` for `nb` activation
/// blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_block32<B: Avx2Block>(nb: usize, w: *const u8, x: *const u8) -> f32 {
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
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn mul_sum_avx2<B: Avx2Block>(wq: __m256i, xq: *const u8) -> __m256 {
    // SAFETY: 32 readable bytes at xq (caller).
    let xq = unsafe { _mm256_loadu_si256(xq.cast()) };
    if B::HAS_MIN {
        let dot = _mm256_maddubs_epi16(wq, xq);
        _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_set1_epi16(1), dot))
    } else {
        mul_sum_i8_pairs(wq, xq)
    }
}

/// ggml's `bytes_from_nibbles_32`: 16 packed bytes at `p` as 32 bytes, low nibbles first.
///
/// # Safety
/// AVX2 available; `p` readable for 16 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn nibbles_avx2(p: *const u8) -> __m256i {
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
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn bits_avx2(p: *const u8) -> __m256i {
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

/// Loads 8 bfloat16 values at `p` (any alignment) widened to `f32`.
///
/// # Safety
/// AVX2 available; `p` readable for 16 bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn load_bf16x8(p: *const u8) -> __m256 {
    // SAFETY: 16 readable bytes at p (caller); loadu has no alignment requirement.
    let h = unsafe { _mm_loadu_si128(p.cast()) };
    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
}

/// AVX2 `ggml_vec_dot_bf16` (see [`crate::legacy::bf16`]).
///
/// # Safety
/// AVX2/FMA/F16C available; `w` and `x` readable for `2 * k` bytes.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_bf16(k: usize, w: *const u8, x: *const u8) -> f32 {
    let np = k & !31;
    let mut c = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i < np {
        for (j, cj) in c.iter_mut().enumerate() {
            let off = 2 * (i + 8 * j);
            // SAFETY: elements i + 8j .. i + 8j + 8 < np <= k are readable (caller).
            let (a, b) = unsafe { (load_bf16x8(w.add(off)), load_bf16x8(x.add(off))) };
            *cj = _mm256_fmadd_ps(a, b, *cj);
        }
        i += 32;
    }
    let v = _mm256_add_ps(_mm256_add_ps(c[0], c[2]), _mm256_add_ps(c[1], c[3]));
    let mut sum = 0f64;
    sum += f64::from(hsum8(v));
    for e in np..k {
        // SAFETY: e < k.
        let (a, b) = unsafe {
            (
                bf16::to_f32(w.add(2 * e).cast::<u16>().read_unaligned()),
                bf16::to_f32(x.add(2 * e).cast::<u16>().read_unaligned()),
            )
        };
        sum += f64::from(a * b);
    }
    sum as f32
}
