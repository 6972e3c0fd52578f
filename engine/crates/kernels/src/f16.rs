//! IEEE half-precision conversions (round-to-nearest-even, like F16C's `vcvtps2ph` with
//! ggml's rounding mode 0 and like ggml's scalar `GGML_FP32_TO_FP16`).

use half::f16;

/// Converts one `f32` to half precision, rounding to nearest even.
#[inline]
pub fn f32_to_f16(x: f32) -> f16 {
    f16::from_f32(x)
}

/// Converts one half-precision value to `f32` (exact).
#[inline]
pub fn f16_to_f32(x: f16) -> f32 {
    x.to_f32()
}

/// Reads the little-endian half at `bytes[0..2]` as `f32`.
#[inline]
pub(crate) fn read_f16(bytes: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

/// Converts `src` into little-endian half-precision bytes in `dst` (`2 * src.len()` bytes).
pub(crate) fn f32_row_to_f16_bytes(src: &[f32], dst: &mut [u8]) {
    for (x, out) in src.iter().zip(dst.chunks_exact_mut(2)) {
        out.copy_from_slice(&f16::from_f32(*x).to_le_bytes());
    }
}

/// Converts little-endian half-precision bytes into `f32` values (`dst.len()` values).
pub(crate) fn f16_bytes_to_f32_row(src: &[u8], dst: &mut [f32]) {
    for (out, h) in dst.iter_mut().zip(src.chunks_exact(2)) {
        *out = f16::from_le_bytes([h[0], h[1]]).to_f32();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_to_nearest_even() {
        // 1 + 2^-11 lies exactly between 1 and the next half (1 + 2^-10): ties go to the even 1.
        assert_eq!(f32_to_f16(1.0 + f32::powi(2.0, -11)).to_f32(), 1.0);
        // 1 + 3 * 2^-11 lies between 1 + 2^-10 (odd mantissa) and 1 + 2^-9: goes up.
        assert_eq!(
            f32_to_f16(1.0 + 3.0 * f32::powi(2.0, -11)).to_f32(),
            1.0 + f32::powi(2.0, -9)
        );
        assert_eq!(f16_to_f32(f16::from_bits(0x3c00)), 1.0);
    }

    #[test]
    fn byte_row_round_trip() {
        let src = [0.5f32, -2.0, 65504.0, 0.0];
        let mut bytes = [0u8; 8];
        f32_row_to_f16_bytes(&src, &mut bytes);
        assert_eq!(&bytes[0..2], &[0x00, 0x38]); // 0.5 = 0x3800 little-endian
        let mut back = [0f32; 4];
        f16_bytes_to_f32_row(&bytes, &mut back);
        assert_eq!(back, src);
    }
}
