//! ggml's `block_q4_K`: 8 sub-blocks of 32 values, `x = d·sc·q − dmin·m` with 4-bit
//! quants and 6-bit sub-block scales `sc` and mins `m` (4.5 bits per weight).
//!
//! Element `64j + 32h + t` is the low (`h = 0`) or high (`h = 1`) nibble of
//! `qs[32j + t]`; sub-block `2j + h`'s scale and min are packed in `scales` as
//! [`super::scales::scale_min_k4`] reads them.

use bytemuck::{Pod, Zeroable};
use half::f16;

use super::block::{KBlock, KWeight, dequantize_k4};
use super::fit::{AffineSearch, fit_affine_k4};
use super::scales::{K_SCALE_SIZE, QK_K, scale_min_k4};
use super::unpacked::{GroupScales, k4_group_scales};

/// One ggml `block_q4_K` (144 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ4K {
    /// Super-block scale of the sub-block scales.
    pub d: f16,
    /// Super-block scale of the sub-block mins.
    pub dmin: f16,
    /// Packed 6-bit scales and mins.
    pub scales: [u8; K_SCALE_SIZE],
    /// 4-bit quants, two per byte.
    pub qs: [u8; QK_K / 2],
}

/// Bytes of one block.
pub const BLOCK_BYTES: usize = 144;
const _: () = assert!(size_of::<BlockQ4K>() == BLOCK_BYTES);

impl KBlock for BlockQ4K {
    const BYTES: usize = BLOCK_BYTES;

    /// `quantize_row_q4_K_ref` for one block of 256 values.
    fn quantize(x: &[f32]) -> Self {
        let search = AffineSearch {
            nmax: 15,
            rmin: -1.0,
            rdelta: 0.1,
            nstep: 20,
            use_mad: false,
        };
        let fit = fit_affine_k4(search, x);
        let mut qs = [0u8; QK_K / 2];
        for (j, q) in qs.chunks_exact_mut(32).enumerate() {
            let lj = &fit.l[64 * j..];
            for (t, q) in q.iter_mut().enumerate() {
                *q = lj[t] | (lj[t + 32] << 4);
            }
        }
        BlockQ4K {
            d: fit.d,
            dmin: fit.dmin,
            scales: fit.scales,
            qs,
        }
    }

    /// `dequantize_row_q4_K` (see [`dequantize_k4`]).
    #[inline]
    fn dequantize(&self, out: &mut [f32; QK_K]) {
        let header = (self.d.to_f32(), self.dmin.to_f32());
        dequantize_k4(self, header, &self.scales, out);
    }
}

impl KWeight for BlockQ4K {
    /// The 4-bit quant of element `e` (`0..16`).
    #[inline]
    fn quant(&self, e: usize) -> u8 {
        let (j, h, t) = (e / 64, (e % 64) / 32, e % 32);
        (self.qs[32 * j + t] >> (4 * h)) & 0xf
    }

    fn group_scales(&self) -> GroupScales {
        k4_group_scales(self.d.to_f32(), self.dmin.to_f32(), &self.scales)
    }
}

/// The 8 sub-block scales and the 8 mins of a block.
#[inline]
pub(crate) fn scales_and_mins(b: &BlockQ4K) -> ([i32; 8], [i32; 8]) {
    let mut sc = [0i32; 8];
    let mut m = [0i32; 8];
    for j in 0..8 {
        let (s, mm) = scale_min_k4(j, &b.scales);
        sc[j] = i32::from(s);
        m[j] = i32::from(mm);
    }
    (sc, m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k_quants::block::dequantize_row;
    use crate::k_quants::generic::dot_q4_k as dot;
    use crate::k_quants::q8_k;
    use crate::k_quants::scales::pack_scale_min_k4;

    #[test]
    fn dequantize_by_hand() {
        let mut b = BlockQ4K::zeroed();
        b.d = f16::from_f32(0.5);
        b.dmin = f16::from_f32(1.0);
        // Sub-block 0: scale 2, min 3; sub-block 1: scale 1, min 0; sub-block 5: 40, 33.
        let mut ls = [0u8; 8];
        let mut lm = [0u8; 8];
        (ls[0], lm[0], ls[1], lm[1], ls[5], lm[5]) = (2, 3, 1, 0, 40, 33);
        b.scales = pack_scale_min_k4(&ls, &lm);
        b.qs[0] = 0x7 | (0xf << 4); // element 0 = 7, element 32 = 15
        b.qs[64 + 1] = 0x2 << 4; // element 128 + 32 + 1 (sub-block 5) = 2
        let mut y = [0f32; QK_K];
        dequantize_row::<BlockQ4K>(bytemuck::bytes_of(&b), &mut y);
        assert_eq!(y[0], 0.5 * 2.0 * 7.0 - 3.0);
        assert_eq!(y[1], -3.0);
        assert_eq!(y[32], 0.5 * 15.0);
        assert_eq!(y[161], 0.5 * 40.0 * 2.0 - 33.0);
    }

    #[test]
    fn quantize_round_trip_is_close() {
        let x: Vec<f32> = (0..QK_K)
            .map(|i| ((i * 29 % 83) as f32 / 41.0 - 1.0) * 0.7 + 0.1)
            .collect();
        let b = BlockQ4K::quantize(&x);
        let mut y = [0f32; QK_K];
        dequantize_row::<BlockQ4K>(bytemuck::bytes_of(&b), &mut y);
        for (a, b) in x.iter().zip(&y) {
            // 16 levels over a range of 1.4: half a step is ~0.05, plus 6-bit scale error.
            assert!((a - b).abs() <= 0.08, "{a} vs {b}");
        }
    }

    #[test]
    fn dot_by_hand() {
        // All scales 1, mins 1, d = dmin = 1, quants 3 -> weights 2; activations 1 (d = 1):
        // 256 * 2 = 512.
        let mut b = BlockQ4K::zeroed();
        b.d = f16::from_f32(1.0);
        b.dmin = f16::from_f32(1.0);
        b.scales = pack_scale_min_k4(&[1; 8], &[1; 8]);
        b.qs = [0x33; 128];
        let mut y = q8_k::BlockQ8K::zeroed();
        y.d = 1.0;
        y.qs = [1; QK_K];
        y.bsums = [16; 16];
        assert_eq!(
            dot(1, bytemuck::bytes_of(&b), bytemuck::bytes_of(&y)),
            512.0
        );
    }
}
