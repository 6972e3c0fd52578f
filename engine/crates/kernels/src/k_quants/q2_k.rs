//! ggml's `block_q2_K`: 16 groups of 16 values, `x = d·sc·q − dmin·m` with 2-bit quants
//! `q` and 4-bit group scales `sc` and mins `m` (2.625 bits per weight).
//!
//! Quants: element `128j + 32s + t` is bits `2s..2s+2` of `qs[32j + t]`. Group `g`'s
//! scale is the low nibble of `scales[g]`, its min the high nibble.

use bytemuck::{Pod, Zeroable};
use half::f16;

use super::block::{KBlock, KWeight};
use super::fit::{AffineSearch, make_qkx2_quants, nearest_int};
use super::scales::QK_K;
use super::unpacked::GroupScales;

/// One ggml `block_q2_K` (84 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ2K {
    /// Group scales (low nibble) and mins (high nibble).
    pub scales: [u8; QK_K / 16],
    /// 2-bit quants, four per byte.
    pub qs: [u8; QK_K / 4],
    /// Super-block scale of the group scales.
    pub d: f16,
    /// Super-block scale of the group mins.
    pub dmin: f16,
}

/// Bytes of one block.
pub const BLOCK_BYTES: usize = 84;
const _: () = assert!(size_of::<BlockQ2K>() == BLOCK_BYTES);

impl KBlock for BlockQ2K {
    const BYTES: usize = BLOCK_BYTES;

    /// `quantize_row_q2_K_ref` for one block of 256 values.
    fn quantize(x: &[f32]) -> Self {
        const Q4SCALE: f32 = 15.0;
        let search = AffineSearch {
            nmax: 3,
            rmin: -0.5,
            rdelta: 0.1,
            nstep: 15,
            use_mad: true,
        };
        let mut b = BlockQ2K::zeroed();
        let mut l = [0u8; QK_K];
        let mut scales = [0f32; QK_K / 16];
        let mut mins = [0f32; QK_K / 16];
        let (mut max_scale, mut max_min) = (0f32, 0f32);
        for (g, xg) in x.chunks_exact(16).enumerate() {
            let mut weights = [0f32; 16];
            for (w, v) in weights.iter_mut().zip(xg) {
                *w = v.abs();
            }
            (scales[g], mins[g]) =
                make_qkx2_quants(search, xg, &weights, &mut l[16 * g..16 * g + 16]);
            if scales[g] > max_scale {
                max_scale = scales[g];
            }
            if mins[g] > max_min {
                max_min = mins[g];
            }
        }
        if max_scale > 0.0 {
            let iscale = Q4SCALE / max_scale;
            for (s, &sc) in b.scales.iter_mut().zip(&scales) {
                *s = nearest_int(iscale * sc) as u8;
            }
            b.d = f16::from_f32(max_scale / Q4SCALE);
        }
        if max_min > 0.0 {
            let iscale = Q4SCALE / max_min;
            for (s, &m) in b.scales.iter_mut().zip(&mins) {
                *s |= (nearest_int(iscale * m) << 4) as u8;
            }
            b.dmin = f16::from_f32(max_min / Q4SCALE);
        }
        for (g, xg) in x.chunks_exact(16).enumerate() {
            let d = b.d.to_f32() * f32::from(b.scales[g] & 0xf);
            if d == 0.0 {
                continue;
            }
            let dm = b.dmin.to_f32() * f32::from(b.scales[g] >> 4);
            for (q, &v) in l[16 * g..].iter_mut().zip(xg) {
                *q = nearest_int((v + dm) / d).clamp(0, 3) as u8;
            }
        }
        for (j, qs) in b.qs.chunks_exact_mut(32).enumerate() {
            let lj = &l[128 * j..];
            for (t, q) in qs.iter_mut().enumerate() {
                *q = lj[t] | (lj[t + 32] << 2) | (lj[t + 64] << 4) | (lj[t + 96] << 6);
            }
        }
        b
    }

    /// `dequantize_row_q2_K`: `d·sc·q − dmin·m`.
    #[inline]
    fn dequantize(&self, out: &mut [f32; QK_K]) {
        let (d, min) = (self.d.to_f32(), self.dmin.to_f32());
        for (e, o) in out.iter_mut().enumerate() {
            let sc = self.scales[e / 16];
            let dl = d * f32::from(sc & 0xf);
            let ml = min * f32::from(sc >> 4);
            *o = dl * f32::from(self.quant(e)) - ml;
        }
    }
}

impl KWeight for BlockQ2K {
    /// The 2-bit quant of element `e` (`0..4`).
    #[inline]
    fn quant(&self, e: usize) -> u8 {
        let (j, s, t) = (e / 128, (e % 128) / 32, e % 32);
        (self.qs[32 * j + t] >> (2 * s)) & 3
    }

    fn group_scales(&self) -> GroupScales {
        GroupScales {
            sc: std::array::from_fn(|g| i16::from(self.scales[g] & 0xf)),
            c: std::array::from_fn(|g| i16::from(self.scales[g] >> 4)),
            d: self.d.to_f32(),
            dmin: self.dmin.to_f32(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k_quants::block::dequantize_row;
    use crate::k_quants::generic::dot_q2_k as dot;
    use crate::k_quants::q8_k;

    #[test]
    fn block_layout_by_hand() {
        // Every group: scale nibble 1, min nibble 2; d = 0.5, dmin = 0.25 -> x = 0.5 q - 0.5.
        let mut b = BlockQ2K::zeroed();
        b.scales = [0x21; 16];
        b.d = f16::from_f32(0.5);
        b.dmin = f16::from_f32(0.25);
        // qs[0] = 0b11_10_01_00: elements 0, 32, 64, 96 get quants 0, 1, 2, 3.
        b.qs[0] = 0b1110_0100;
        b.qs[33] = 3 << 6; // element 128 + 96 + 1 = 225
        let mut y = [0f32; QK_K];
        dequantize_row::<BlockQ2K>(bytemuck::bytes_of(&b), &mut y);
        assert_eq!([y[0], y[32], y[64], y[96]], [-0.5, 0.0, 0.5, 1.0]);
        assert_eq!(y[225], 1.0);
        assert_eq!(y[1], -0.5);
    }

    #[test]
    fn quantize_round_trip_is_close() {
        let x: Vec<f32> = (0..QK_K)
            .map(|i| ((i * 37 % 101) as f32 / 50.0 - 1.0) * 0.3)
            .collect();
        let b = BlockQ2K::quantize(&x);
        let mut y = [0f32; QK_K];
        dequantize_row::<BlockQ2K>(bytemuck::bytes_of(&b), &mut y);
        // 2-bit quants over a range of 0.6: a step is at most ~0.6 / 3 plus scale rounding.
        for (a, b) in x.iter().zip(&y) {
            assert!((a - b).abs() <= 0.16, "{a} vs {b}");
        }
    }

    #[test]
    fn dot_by_hand() {
        // Weights: scale 1, min 1, d = 1, dmin = 1, all quants 2 -> every weight 1.
        let mut b = BlockQ2K::zeroed();
        b.scales = [0x11; 16];
        b.d = f16::from_f32(1.0);
        b.dmin = f16::from_f32(1.0);
        b.qs = [0xaa; 64];
        // Activations: all quants 3 with d = 0.5 -> each 1.5; dot = 256 * 1.5 = 384.
        let mut y = q8_k::BlockQ8K::zeroed();
        y.d = 0.5;
        y.qs = [3; QK_K];
        y.bsums = [48; 16];
        let got = dot(1, bytemuck::bytes_of(&b), bytemuck::bytes_of(&y));
        assert_eq!(got, 384.0);
    }
}
