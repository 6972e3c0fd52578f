//! ggml's `block_q6_K`: 16 groups of 16 values, `x = d·sc·(q − 32)` with 6-bit quants
//! `q` and signed 8-bit group scales `sc` (6.5625 bits per weight).
//!
//! Element `128j + 32s + t`: low four bits are the low (`s` < 2) or high nibble of
//! `ql[64j + 32(s % 2) + t]`, the top two bits are bits `2s..2s+2` of `qh[32j + t]`.

use bytemuck::{Pod, Zeroable};
use half::f16;

use super::block::{KBlock, KWeight};
use super::fit::{GROUP_MAX_EPS, make_qx_quants, nearest_int};
use super::scales::QK_K;
use super::unpacked::GroupScales;

/// One ggml `block_q6_K` (210 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ6K {
    /// Low four bits of the quants, two per byte.
    pub ql: [u8; QK_K / 2],
    /// Top two bits of the quants, four per byte.
    pub qh: [u8; QK_K / 4],
    /// Group scales.
    pub scales: [i8; QK_K / 16],
    /// Super-block scale.
    pub d: f16,
}

/// Bytes of one block.
pub const BLOCK_BYTES: usize = 210;
const _: () = assert!(size_of::<BlockQ6K>() == BLOCK_BYTES);

impl KBlock for BlockQ6K {
    const BYTES: usize = BLOCK_BYTES;

    /// `quantize_row_q6_K_ref` for one block of 256 values.
    fn quantize(x: &[f32]) -> Self {
        let mut l = [0i8; QK_K];
        let mut scales = [0f32; QK_K / 16];
        let (mut max_abs, mut max_scale) = (0f32, 0f32);
        for (g, xg) in x.chunks_exact(16).enumerate() {
            scales[g] = make_qx_quants(32, xg, &mut l[16 * g..16 * g + 16]);
            if scales[g].abs() > max_abs {
                max_abs = scales[g].abs();
                max_scale = scales[g];
            }
        }
        let mut b = BlockQ6K::zeroed();
        if max_abs < GROUP_MAX_EPS {
            return b;
        }
        let iscale = -128.0 / max_scale;
        b.d = f16::from_f32(1.0 / iscale);
        for (s, &sc) in b.scales.iter_mut().zip(&scales) {
            *s = nearest_int(iscale * sc).min(127) as i8;
        }
        for (g, xg) in x.chunks_exact(16).enumerate() {
            let d = b.d.to_f32() * f32::from(b.scales[g]);
            if d == 0.0 {
                continue;
            }
            for (q, &v) in l[16 * g..].iter_mut().zip(xg) {
                *q = nearest_int(v / d).clamp(-32, 31) as i8 + 32;
            }
        }
        let l = l.map(|q| q as u8);
        for j in 0..QK_K / 128 {
            let lj = &l[128 * j..];
            for t in 0..32 {
                let (q1, q2, q3, q4) = (lj[t], lj[t + 32], lj[t + 64], lj[t + 96]);
                b.ql[64 * j + t] = (q1 & 0xf) | ((q3 & 0xf) << 4);
                b.ql[64 * j + t + 32] = (q2 & 0xf) | ((q4 & 0xf) << 4);
                b.qh[32 * j + t] =
                    (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
            }
        }
        b
    }

    /// `dequantize_row_q6_K`: `(d·sc)·(q − 32)`.
    #[inline]
    fn dequantize(&self, out: &mut [f32; QK_K]) {
        let d = self.d.to_f32();
        for (e, o) in out.iter_mut().enumerate() {
            let q = i32::from(self.quant(e)) - 32;
            *o = d * f32::from(self.scales[e / 16]) * q as f32;
        }
    }
}

impl KWeight for BlockQ6K {
    /// The unsigned 6-bit quant (`0..64`; the offset 32 is in the coefficients `32·sc` of
    /// the group scales) of element `e`.
    #[inline]
    fn quant(&self, e: usize) -> u8 {
        let (j, s, t) = (e / 128, (e % 128) / 32, e % 32);
        let low = (self.ql[64 * j + 32 * (s % 2) + t] >> (4 * (s / 2))) & 0xf;
        let high = (self.qh[32 * j + t] >> (2 * s)) & 3;
        low | (high << 4)
    }

    fn group_scales(&self) -> GroupScales {
        let sc: [i16; 16] = self.scales.map(i16::from);
        GroupScales {
            sc,
            c: sc.map(|s| 32 * s),
            d: self.d.to_f32(),
            dmin: 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k_quants::block::dequantize_row;

    #[test]
    fn dequantize_by_hand() {
        let mut b = BlockQ6K::zeroed();
        b.d = f16::from_f32(0.5);
        b.scales = [2; 16];
        b.scales[12] = -4;
        // element 0: low 0x1, top bits 0b10 -> 33 -> 1; element 64 (s = 2): high nibble of
        // ql[0] = 0xf, top bits 4..6 of qh[0] = 0b01 -> 31 -> -1.
        b.ql[0] = 0x1 | (0xf << 4);
        b.qh[0] = 0b10 | (0b01 << 4);
        // element 128 + 64 + 3 = 195 (group 12, s = 2, t = 3): high nibble 5, top bits 3.
        b.ql[64 + 3] = 0x5 << 4;
        b.qh[32 + 3] = 0b11 << 4;
        let mut y = [0f32; QK_K];
        dequantize_row::<BlockQ6K>(bytemuck::bytes_of(&b), &mut y);
        assert_eq!(y[0], 1.0);
        assert_eq!(y[64], -1.0);
        assert_eq!(y[1], -32.0);
        assert_eq!(y[195], 0.5 * -4.0 * (53.0 - 32.0));
    }

    #[test]
    fn quantize_round_trip_is_close() {
        let x: Vec<f32> = (0..QK_K)
            .map(|i| ((i * 43 % 113) as f32 / 56.0 - 1.0) * 0.02)
            .collect();
        let b = BlockQ6K::quantize(&x);
        let mut y = [0f32; QK_K];
        dequantize_row::<BlockQ6K>(bytemuck::bytes_of(&b), &mut y);
        for (a, b) in x.iter().zip(&y) {
            assert!((a - b).abs() <= 0.0004, "{a} vs {b}");
        }
    }

    #[test]
    fn zero_block_is_all_zero_bytes() {
        let b = BlockQ6K::quantize(&[0f32; QK_K]);
        assert!(bytemuck::bytes_of(&b).iter().all(|&x| x == 0));
    }
}
