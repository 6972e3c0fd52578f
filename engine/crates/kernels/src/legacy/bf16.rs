//! bfloat16 (`ggml_bf16_t`): the upper 16 bits of an IEEE `f32`. BF16 weights are
//! multiplied with BF16 activations (ggml's `vec_dot_type`), converted with ggml's
//! `GGML_FP32_TO_BF16` (round to nearest even, NaNs kept quiet).
//!
//! Products: `ggml_vec_dot_bf16` (AVX2 build, `vec.cpp`) for one activation row — four
//! 8-lane accumulators over 32-element steps, FMA-fused by GCC (checked in the oracle's
//! `libggml-cpu.so`), summed `(c1 + c3) + (c2 + c4)`, `hsum_float_8`, then the leftover
//! elements added in `f64` — and tinyBLAS (like F16) for two or more rows.

use crate::dot::generic::{LANES, hsum8};

/// `ggml_compute_fp32_to_bf16`: round to nearest even; a NaN keeps its upper bits, made
/// quiet.
#[inline]
pub(crate) fn from_f32(x: f32) -> u16 {
    let u = x.to_bits();
    if u & 0x7fff_ffff > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    ((u + (0x7fff + ((u >> 16) & 1))) >> 16) as u16
}

/// Widens a bfloat16 to `f32` (exact).
#[inline]
pub(crate) fn to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// Reads the little-endian bfloat16 at `bytes[at..at + 2]` as `f32`.
#[inline]
pub(crate) fn read(bytes: &[u8], at: usize) -> f32 {
    to_f32(u16::from_le_bytes([bytes[at], bytes[at + 1]]))
}

/// Converts `src` into little-endian bfloat16 bytes (`2 * src.len()` bytes of `dst`).
pub(crate) fn f32_row_to_bytes(src: &[f32], dst: &mut [u8]) {
    for (x, out) in src.iter().zip(dst.chunks_exact_mut(2)) {
        out.copy_from_slice(&from_f32(*x).to_le_bytes());
    }
}

/// Converts little-endian bfloat16 bytes into `dst.len()` `f32` values.
pub(crate) fn bytes_to_f32_row(src: &[u8], dst: &mut [f32]) {
    for (i, out) in dst.iter_mut().enumerate() {
        *out = read(src, 2 * i);
    }
}

/// `ggml_vec_dot_bf16` rounded like the AVX2 build (see the module documentation).
pub(crate) fn dot(k: usize, w: &[u8], x: &[u8]) -> f32 {
    let np = k & !31;
    let mut c = [[0f32; LANES]; 4];
    for i in (0..np).step_by(32) {
        for (j, cj) in c.iter_mut().enumerate() {
            for (l, lane) in cj.iter_mut().enumerate() {
                let e = i + j * LANES + l;
                *lane = read(w, 2 * e).mul_add(read(x, 2 * e), *lane);
            }
        }
    }
    let mut v = [0f32; LANES];
    for (l, out) in v.iter_mut().enumerate() {
        *out = (c[0][l] + c[2][l]) + (c[1][l] + c[3][l]);
    }
    // ggml adds the vector sum to `ggml_float sumf = 0` (so -0.0 becomes +0.0).
    let mut sum = 0f64;
    sum += f64::from(hsum8(v));
    for e in np..k {
        sum += f64::from(read(w, 2 * e) * read(x, 2 * e));
    }
    sum as f32
}

/// tinyBLAS's order for one output ([`crate::dot::generic::dot_single_acc`]) on bfloat16
/// rows stored as bytes.
pub(crate) fn dot_single_acc(k: usize, w: &[u8], x: &[u8]) -> f32 {
    crate::dot::generic::dot_single_acc(k, |e| read(w, 2 * e), |e| read(x, 2 * e))
}

/// Loads 8 bfloat16 values at `p` (any alignment) widened to `f32`.
///
/// # Safety
/// AVX2 available; `p` readable for 16 bytes.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn load8_avx2(p: *const u8) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    // SAFETY: 16 readable bytes at p (caller); loadu has no alignment requirement.
    let h = unsafe { _mm_loadu_si128(p.cast()) };
    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
}

/// AVX2 `ggml_vec_dot_bf16`.
///
/// # Safety
/// AVX2/FMA/F16C available; `w` and `x` readable for `2 * k` bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn dot_avx2(k: usize, w: *const u8, x: *const u8) -> f32 {
    use std::arch::x86_64::*;
    let np = k & !31;
    let mut c = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i < np {
        for (j, cj) in c.iter_mut().enumerate() {
            let off = 2 * (i + 8 * j);
            // SAFETY: elements i + 8j .. i + 8j + 8 < np <= k are readable (caller).
            let (a, b) = unsafe { (load8_avx2(w.add(off)), load8_avx2(x.add(off))) };
            *cj = _mm256_fmadd_ps(a, b, *cj);
        }
        i += 32;
    }
    let v = _mm256_add_ps(_mm256_add_ps(c[0], c[2]), _mm256_add_ps(c[1], c[3]));
    let mut sum = 0f64;
    sum += f64::from(crate::dot::x86::hsum8(v));
    for e in np..k {
        // SAFETY: e < k.
        let (a, b) = unsafe {
            (
                to_f32(w.add(2 * e).cast::<u16>().read_unaligned()),
                to_f32(x.add(2 * e).cast::<u16>().read_unaligned()),
            )
        };
        sum += f64::from(a * b);
    }
    sum as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_like_ggml() {
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
        assert_eq!(from_f32(1.0 + f32::powi(2.0, -8)), 0x3f80);
        // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up.
        assert_eq!(from_f32(1.0 + 3.0 * f32::powi(2.0, -8)), 0x3f82);
        assert_eq!(to_f32(from_f32(-2.5)), -2.5);
        assert_eq!(from_f32(f32::from_bits(0x7f80_0001)), 0x7fc0);
        assert_eq!(from_f32(f32::INFINITY), 0x7f80);
    }

    #[test]
    fn dot_by_hand() {
        // k = 35: 32 through the vector lanes, 3 in the f64 tail. w = 1.5, x = -2 -> -105.
        let w: Vec<u8> = (0..35).flat_map(|_| from_f32(1.5).to_le_bytes()).collect();
        let x: Vec<u8> = (0..35).flat_map(|_| from_f32(-2.0).to_le_bytes()).collect();
        assert_eq!(dot(35, &w, &x), -105.0);
    }
}
