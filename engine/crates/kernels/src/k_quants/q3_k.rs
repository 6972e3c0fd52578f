//! ggml's `block_q3_K`: 16 groups of 16 values, `x = d·sc·q` with 3-bit quants `q` in
//! `-4..=3` and signed 6-bit group scales `sc` (3.4375 bits per weight).
//!
//! Element `128j + 32s + t`: low two bits are bits `2s..2s+2` of `qs[32j + t]`, the high
//! bit is bit `4j + s` of `hmask[t]`; a *clear* high bit subtracts 4. Group `g`'s scale is
//! 4 low bits (nibble `g / 8` of `scales[g % 8]`) and 2 high bits (bits `2(g/4)..` of
//! `scales[8 + g % 4]`), minus 32.

use bytemuck::{Pod, Zeroable};
use half::f16;

use super::block::{KBlock, KWeight};
use super::fit::{make_q3_quants, nearest_int};
use super::scales::{K_SCALE_SIZE, QK_K};
use super::unpacked::GroupScales;

/// One ggml `block_q3_K` (110 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ3K {
    /// High bits of the quants.
    pub hmask: [u8; QK_K / 8],
    /// Low two bits of the quants, four per byte.
    pub qs: [u8; QK_K / 4],
    /// Packed 6-bit group scales.
    pub scales: [u8; K_SCALE_SIZE],
    /// Super-block scale.
    pub d: f16,
}

/// Bytes of one block.
pub const BLOCK_BYTES: usize = 110;
const _: () = assert!(size_of::<BlockQ3K>() == BLOCK_BYTES);

/// The signed 6-bit scale of group `g` (0..16).
#[inline]
pub(crate) fn group_scale(scales: &[u8; K_SCALE_SIZE], g: usize) -> i8 {
    let low = if g < 8 {
        scales[g] & 0xf
    } else {
        scales[g - 8] >> 4
    };
    let high = (scales[8 + g % 4] >> (2 * (g / 4))) & 3;
    (low | (high << 4)) as i8 - 32
}

impl BlockQ3K {
    /// The quant (`-4..=3`) of element `e`.
    #[inline]
    pub(crate) fn signed_quant(&self, e: usize) -> i8 {
        let (j, s, t) = (e / 128, (e % 128) / 32, e % 32);
        let low = ((self.qs[32 * j + t] >> (2 * s)) & 3) as i8;
        let high_set = self.hmask[t] & (1 << (4 * j + s)) != 0;
        if high_set { low } else { low - 4 }
    }
}

impl KBlock for BlockQ3K {
    const BYTES: usize = BLOCK_BYTES;

    /// `quantize_row_q3_K_ref` for one block of 256 values.
    fn quantize(x: &[f32]) -> Self {
        let mut b = BlockQ3K::zeroed();
        let mut l = [0i8; QK_K];
        let mut scales = [0f32; QK_K / 16];
        let (mut amax, mut max_scale) = (0f32, 0f32);
        for (g, xg) in x.chunks_exact(16).enumerate() {
            scales[g] = make_q3_quants(4, xg, &mut l[16 * g..16 * g + 16]);
            if scales[g].abs() > amax {
                amax = scales[g].abs();
                max_scale = scales[g];
            }
        }
        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for (g, &sc) in scales.iter().enumerate() {
                // C stores the int in an int8_t before clamping it to 6 bits.
                let q = ((nearest_int(iscale * sc) as i8).clamp(-32, 31) + 32) as u8;
                if g < 8 {
                    b.scales[g] = q & 0xf;
                } else {
                    b.scales[g - 8] |= (q & 0xf) << 4;
                }
                b.scales[8 + g % 4] |= (q >> 4) << (2 * (g / 4));
            }
            b.d = f16::from_f32(1.0 / iscale);
        }
        for (g, xg) in x.chunks_exact(16).enumerate() {
            let d = b.d.to_f32() * f32::from(group_scale(&b.scales, g));
            if d == 0.0 {
                continue;
            }
            for (q, &v) in l[16 * g..].iter_mut().zip(xg) {
                *q = nearest_int(v / d).clamp(-4, 3) as i8 + 4;
            }
        }
        for (e, q) in l.iter_mut().enumerate() {
            if *q > 3 {
                b.hmask[e % 32] |= 1 << (e / 32);
                *q -= 4;
            }
        }
        for (j, qs) in b.qs.chunks_exact_mut(32).enumerate() {
            let lj = &l[128 * j..];
            for (t, q) in qs.iter_mut().enumerate() {
                *q = (lj[t] | (lj[t + 32] << 2) | (lj[t + 64] << 4) | (lj[t + 96] << 6)) as u8;
            }
        }
        b
    }

    /// `dequantize_row_q3_K`: `d·sc·q`.
    #[inline]
    fn dequantize(&self, out: &mut [f32; QK_K]) {
        let d_all = self.d.to_f32();
        for (e, o) in out.iter_mut().enumerate() {
            let dl = d_all * f32::from(group_scale(&self.scales, e / 16));
            *o = dl * f32::from(self.signed_quant(e));
        }
    }
}

impl KWeight for BlockQ3K {
    /// `q + 4` (`0..8`, the three bits as stored; the offset 4 is in the coefficients
    /// `4·sc` of the group scales).
    #[inline]
    fn quant(&self, e: usize) -> u8 {
        (self.signed_quant(e) + 4) as u8
    }

    fn group_scales(&self) -> GroupScales {
        let sc: [i16; 16] = std::array::from_fn(|g| i16::from(group_scale(&self.scales, g)));
        GroupScales {
            sc,
            c: sc.map(|s| 4 * s),
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
    fn scales_by_hand() {
        let mut s = [0u8; K_SCALE_SIZE];
        // group 0: low 0x5, high 0b10 -> 0x25 - 32 = 5; group 9: low nibble of byte 1 high
        // half = 0xa, high bits 2..4 of byte 9 = 0b01 -> 0x1a - 32 = -6.
        s[0] = 0x05;
        s[8] = 0b10;
        s[1] = 0xa0;
        s[9] = 0b01 << 4;
        assert_eq!(group_scale(&s, 0), 5);
        assert_eq!(group_scale(&s, 9), -6);
        assert_eq!(group_scale(&s, 3), -32);
    }

    #[test]
    fn quants_by_hand() {
        let mut b = BlockQ3K::zeroed();
        b.scales[0] = 0x1; // group 0: 1 - 32 + 32 (high bits 0b10) = 1
        b.scales[8] = 0b10;
        b.d = f16::from_f32(0.5);
        b.qs[0] = 0b11; // element 0 low bits 3
        b.hmask[0] = 0b1; // element 0 high bit set -> q = 3
        b.qs[1] = 0b10; // element 1 low bits 2, high bit clear -> q = -2
        let mut y = [0f32; QK_K];
        dequantize_row::<BlockQ3K>(bytemuck::bytes_of(&b), &mut y);
        assert_eq!((y[0], y[1], y[2]), (1.5, -1.0, -2.0));
    }

    #[test]
    fn quantize_round_trip_is_close() {
        let x: Vec<f32> = (0..QK_K)
            .map(|i| ((i * 53 % 97) as f32 / 48.0 - 1.0) * 2.0)
            .collect();
        let b = BlockQ3K::quantize(&x);
        let mut y = [0f32; QK_K];
        dequantize_row::<BlockQ3K>(bytemuck::bytes_of(&b), &mut y);
        for (a, b) in x.iter().zip(&y) {
            // 8 levels over ±2 per group: about half a step (0.29) plus scale rounding.
            assert!((a - b).abs() <= 0.45, "{a} vs {b}");
        }
    }
}
