//! ggml's Q5_0 block (`block_q5_0`, 22 bytes): f16 scale `d`, 4 bytes `qh` of fifth bits
//! (bit `i` belongs to element `i`), then 16 bytes of nibbles as in Q4_0;
//! `x = d * (q - 16)`. Multiplied with Q8_0 activations.

use common::engine_abi::DType;
use half::f16;

use super::block32::{Block32, QK, five_bit_quants, pack_five_bit, signed_abs_max};

/// Marker of the Q5_0 block layout.
pub(crate) struct Q5_0;

impl Block32 for Q5_0 {
    const DTYPE: DType = DType::Q5_0;
    const HAS_MIN: bool = false;

    /// `quantize_row_q5_0_ref`: `d = max / -16` for the value of largest magnitude,
    /// `q = min(31, trunc(x / d + 16.5))`.
    fn quantize(x: &[f32], out: &mut [u8]) {
        let d = signed_abs_max(x) / -16.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        out[0..2].copy_from_slice(&f16::from_f32(d).to_le_bytes());
        let mut q = [0u8; QK];
        for (q, &v) in q.iter_mut().zip(x) {
            // C `(int8_t)(v + 16.5f)` truncates toward zero; then MIN(31, ...).
            *q = ((v * id + 16.5) as i8).min(31) as u8;
        }
        let (qh, qs) = out[2..22].split_at_mut(4);
        pack_five_bit(&q, qh, qs);
    }

    fn quants(block: &[u8]) -> [i8; QK] {
        five_bit_quants(&block[2..6], &block[6..22]).map(|q| q as i8 - 16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dot::generic::dot_block32 as dot;
    use crate::legacy::block32::{dequantize_row, quantize_row};

    #[test]
    fn block_bytes_by_hand() {
        // max-magnitude value -16 -> d = 1, id = 1; q = trunc(x + 16.5).
        let mut x = [0.0f32; 32];
        x[0] = -16.0; // 0
        x[1] = 15.0; // 31
        x[2] = 1.4; // trunc(17.9) = 17 = 0x11: nibble 1, fifth bit set
        x[17] = -0.6; // trunc(15.9) = 15: high nibble of byte 1, bit 17 clear
        let mut b = [0u8; 22];
        quantize_row::<Q5_0>(&x, &mut b);
        assert_eq!(&b[0..2], &[0x00, 0x3c]); // f16 1.0
        let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
        // element 0 (q 0) clear, 1 (31) set, 2 (17) set, 3..16 (16) set, 16.. (16) set but 17.
        assert_eq!(qh, !0b1 & !(1 << 17));
        assert_eq!(b[6] & 0x0f, 0);
        assert_eq!(b[7], 0x0f | (15 << 4));
        assert_eq!(b[8] & 0x0f, 1);
        let mut y = [0f32; 32];
        dequantize_row::<Q5_0>(&b, &mut y);
        assert_eq!(&y[0..3], &[-16.0, 15.0, 1.0]);
        assert_eq!(y[17], -1.0);
    }

    #[test]
    fn positive_max_clamps_to_31() {
        let mut x = [0.0f32; 32];
        x[0] = 16.0; // d = -1: 16 -> trunc(0.5) = 0, -16 -> trunc(32.5) = 32 -> 31
        x[1] = -16.0;
        let mut b = [0u8; 22];
        quantize_row::<Q5_0>(&x, &mut b);
        let q = Q5_0::quants(&b);
        assert_eq!((q[0], q[1]), (-16, 15));
    }

    #[test]
    fn dot_by_hand() {
        // all q = 17 (nibble 1, fifth bit set) -> w = 1 * d(2); x = 3 with d = 1 -> 192.
        let mut w = [0x11u8; 22];
        w[0..2].copy_from_slice(&f16::from_f32(2.0).to_le_bytes());
        w[2..6].copy_from_slice(&[0xff; 4]);
        let mut x = [3u8; 34];
        x[0..2].copy_from_slice(&f16::from_f32(1.0).to_le_bytes());
        assert_eq!(dot::<Q5_0>(1, &w, &x), 192.0);
    }
}
