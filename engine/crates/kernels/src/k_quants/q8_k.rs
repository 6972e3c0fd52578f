//! ggml's `block_q8_K`: the activation type every K-quant weight is multiplied with.
//!
//! A super-block of 256 values is `x[i] = d · qs[i]` with an `f32` scale and the sums of
//! each group of 16 quants (`bsums`), which the weight types with an offset or a min use
//! to apply it once per group instead of once per value.
//!
//! llama.cpp's x86 CPU backend quantizes activations with `quantize_row_q8_K_ref` itself
//! (ggml-cpu's `quantize_row_q8_K` on x86 forwards to it), so one quantizer serves both
//! files and activations here.

use bytemuck::{Pod, Zeroable};

use super::block::KBlock;
use super::fit::nearest_int;
use super::scales::QK_K;

/// One ggml `block_q8_K` (292 bytes, 4-byte aligned as a struct).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ8K {
    /// Scale (negative when the largest magnitude of the block is positive: ggml quantizes
    /// with `-127 / max`).
    pub d: f32,
    /// Quantized values.
    pub qs: [i8; QK_K],
    /// Sum of each group of 16 quants.
    pub bsums: [i16; QK_K / 16],
}

/// Bytes of one block.
pub const BLOCK_BYTES: usize = 292;
const _: () = assert!(size_of::<BlockQ8K>() == BLOCK_BYTES);

/// Byte offsets inside a block.
pub(crate) const QS: usize = 4;
pub(crate) const BSUMS: usize = 4 + QK_K;

impl KBlock for BlockQ8K {
    const BYTES: usize = BLOCK_BYTES;

    /// `quantize_row_q8_K_ref` for one block of 256 values.
    fn quantize(x: &[f32]) -> Self {
        let mut b = BlockQ8K::zeroed();
        let (amax, max) = super::fit::signed_max(x);
        if amax == 0.0 {
            // ggml leaves bsums untouched here; zero is what a fresh buffer holds.
            return b;
        }
        let iscale = -127.0 / max;
        for (q, &v) in b.qs.iter_mut().zip(x) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (s, g) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
            *s = g.iter().map(|&q| i32::from(q)).sum::<i32>() as i16;
        }
        b.d = 1.0 / iscale;
        b
    }

    /// `dequantize_row_q8_K`: `d · qs[i]`.
    #[inline]
    fn dequantize(&self, out: &mut [f32; QK_K]) {
        for (o, &q) in out.iter_mut().zip(&self.qs) {
            *o = self.d * f32::from(q);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k_quants::block::{dequantize_row, quantize_row, read};

    #[test]
    fn block_by_hand() {
        // max = +2 at index 3 -> iscale = -63.5, d = 1 / -63.5; x = 1 -> -63.5 -> -64 (even).
        let mut x = [0f32; QK_K];
        x[3] = 2.0;
        x[4] = 1.0;
        x[20] = -0.5; // -> 31.75 -> 32
        let b = BlockQ8K::quantize(&x);
        assert_eq!(b.d, 1.0 / -63.5);
        assert_eq!((b.qs[3], b.qs[4], b.qs[20]), (-127, -64, 32));
        assert_eq!(b.bsums[0], -191);
        assert_eq!(b.bsums[1], 32);
        assert!(b.bsums[2..].iter().all(|&s| s == 0));
        let mut bytes = [0u8; BLOCK_BYTES];
        quantize_row::<BlockQ8K>(&x, &mut bytes);
        assert_eq!(&bytes[0..4], &(1.0f32 / -63.5).to_le_bytes());
        assert_eq!(read::<BlockQ8K>(&bytes), b);
        let mut back = [0f32; QK_K];
        dequantize_row::<BlockQ8K>(&bytes, &mut back);
        assert_eq!(back[3], 2.0);
        assert_eq!(back[4], -64.0 / -63.5);
    }

    #[test]
    fn first_of_equal_magnitudes_sets_the_sign() {
        let mut x = [0f32; QK_K];
        x[0] = -1.0;
        x[1] = 1.0;
        let b = BlockQ8K::quantize(&x);
        assert_eq!(b.d, 1.0 / 127.0);
        assert_eq!((b.qs[0], b.qs[1]), (-127, 127));
    }

    #[test]
    fn zero_block() {
        let b = BlockQ8K::quantize(&[0f32; QK_K]);
        assert_eq!(b, BlockQ8K::zeroed());
    }
}
