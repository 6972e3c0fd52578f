//! ggml's `block_q5_K`: 8 sub-blocks of 32 values, `x = d·sc·q − dmin·m` with 5-bit
//! quants and 6-bit sub-block scales and mins (5.5 bits per weight).
//!
//! Element `64j + 32h + t`: low four bits are nibble `h` of `qs[32j + t]`, the fifth bit
//! is bit `2j + h` of `qh[t]`. Scales and mins are packed like `Q4_K`'s.

use bytemuck::{Pod, Zeroable};
use half::f16;

use super::block::{KBlock, KWeight, dequantize_k4};
use super::fit::{AffineSearch, fit_affine_k4};
use super::scales::{K_SCALE_SIZE, QK_K};
use super::unpacked::{GroupScales, k4_group_scales};

/// One ggml `block_q5_K` (176 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ5K {
    /// Super-block scale of the sub-block scales.
    pub d: f16,
    /// Super-block scale of the sub-block mins.
    pub dmin: f16,
    /// Packed 6-bit scales and mins.
    pub scales: [u8; K_SCALE_SIZE],
    /// Fifth bits of the quants.
    pub qh: [u8; QK_K / 8],
    /// Low four bits of the quants, two per byte.
    pub qs: [u8; QK_K / 2],
}

/// Bytes of one block.
pub const BLOCK_BYTES: usize = 176;
const _: () = assert!(size_of::<BlockQ5K>() == BLOCK_BYTES);

impl KBlock for BlockQ5K {
    const BYTES: usize = BLOCK_BYTES;

    /// `quantize_row_q5_K_ref` for one block of 256 values.
    fn quantize(x: &[f32]) -> Self {
        let search = AffineSearch {
            nmax: 31,
            rmin: -0.5,
            rdelta: 0.1,
            nstep: 15,
            use_mad: false,
        };
        let fit = fit_affine_k4(search, x);
        let mut b = BlockQ5K {
            d: fit.d,
            dmin: fit.dmin,
            scales: fit.scales,
            qh: [0; QK_K / 8],
            qs: [0; QK_K / 2],
        };
        for (j, ql) in b.qs.chunks_exact_mut(32).enumerate() {
            let lj = &fit.l[64 * j..];
            for (t, q) in ql.iter_mut().enumerate() {
                let (mut l1, mut l2) = (lj[t], lj[t + 32]);
                if l1 > 15 {
                    l1 -= 16;
                    b.qh[t] |= 1 << (2 * j);
                }
                if l2 > 15 {
                    l2 -= 16;
                    b.qh[t] |= 2 << (2 * j);
                }
                *q = l1 | (l2 << 4);
            }
        }
        b
    }

    /// `dequantize_row_q5_K` (see [`dequantize_k4`]).
    #[inline]
    fn dequantize(&self, out: &mut [f32; QK_K]) {
        let header = (self.d.to_f32(), self.dmin.to_f32());
        dequantize_k4(self, header, &self.scales, out);
    }
}

impl KWeight for BlockQ5K {
    /// The 5-bit quant of element `e`, with the fifth bit (`0..32`).
    #[inline]
    fn quant(&self, e: usize) -> u8 {
        let (j, h, t) = (e / 64, (e % 64) / 32, e % 32);
        let low = (self.qs[32 * j + t] >> (4 * h)) & 0xf;
        let high = (self.qh[t] >> (2 * j + h)) & 1;
        low | (high << 4)
    }

    fn group_scales(&self) -> GroupScales {
        k4_group_scales(self.d.to_f32(), self.dmin.to_f32(), &self.scales)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k_quants::block::dequantize_row;
    use crate::k_quants::scales::pack_scale_min_k4;

    #[test]
    fn dequantize_by_hand() {
        let mut b = BlockQ5K::zeroed();
        b.d = f16::from_f32(0.25);
        b.dmin = f16::from_f32(0.5);
        b.scales = pack_scale_min_k4(&[4; 8], &[2; 8]); // x = q - 1
        b.qs[0] = 0x3 | (0x1 << 4); // element 0 low 3, element 32 low 1
        b.qh[0] = 0b10; // element 32 gets bit 4 -> 17
        b.qh[5] = 1 << 6; // element 3*64 + 5 = 197 gets bit 4 -> 16
        let mut y = [0f32; QK_K];
        dequantize_row::<BlockQ5K>(bytemuck::bytes_of(&b), &mut y);
        assert_eq!((y[0], y[32], y[197], y[1]), (2.0, 16.0, 15.0, -1.0));
    }

    #[test]
    fn quantize_round_trip_is_close() {
        let x: Vec<f32> = (0..QK_K)
            .map(|i| ((i * 31 % 89) as f32 / 44.0 - 1.0) * 1.5)
            .collect();
        let b = BlockQ5K::quantize(&x);
        let mut y = [0f32; QK_K];
        dequantize_row::<BlockQ5K>(bytemuck::bytes_of(&b), &mut y);
        for (a, b) in x.iter().zip(&y) {
            // 32 levels over a range of 3: half a step is ~0.05, plus scale rounding.
            assert!((a - b).abs() <= 0.08, "{a} vs {b}");
        }
    }
}
