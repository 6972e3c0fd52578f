//! bfloat16 (`ggml_bf16_t`): the upper 16 bits of an IEEE `f32`. BF16 weights are
//! multiplied with BF16 activations (ggml's `vec_dot_type`), converted with ggml's
//! `GGML_FP32_TO_BF16` (round to nearest even, NaNs kept quiet).
//!
//! Products: `ggml_vec_dot_bf16` (AVX2 build, `vec.cpp`) for one activation row — four
//! 8-lane accumulators over 32-element steps, FMA-fused by GCC (checked in the oracle's
//! `libggml-cpu.so`), summed `(c1 + c3) + (c2 + c4)`, `hsum_float_8`, then the leftover
//! elements added in `f64` — and tinyBLAS (like F16) for two or more rows.

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dot::generic::dot_bf16 as dot;

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
