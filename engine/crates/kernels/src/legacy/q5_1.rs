//! ggml's Q5_1 block (`block_q5_1`, 24 bytes): f16 scale `d`, f16 minimum `m`, 4 bytes
//! `qh` of fifth bits, then 16 bytes of nibbles; `x = d * q + m`. Multiplied with Q8_1
//! activations.

use common::engine_abi::DType;
use half::f16;

use super::block32::{Block32, QK, five_bit_quants, min_max, pack_five_bit};

/// Marker of the Q5_1 block layout.
pub(crate) struct Q5_1;

impl Block32 for Q5_1 {
    const DTYPE: DType = DType::Q5_1;
    const HAS_MIN: bool = true;

    /// `quantize_row_q5_1_ref`: `d = (max - min) / 31`, `q = trunc((x - min) / d + 0.5)`.
    fn quantize(x: &[f32], out: &mut [u8]) {
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        out[0..2].copy_from_slice(&f16::from_f32(d).to_le_bytes());
        out[2..4].copy_from_slice(&f16::from_f32(min).to_le_bytes());
        let mut q = [0u8; QK];
        for (q, &v) in q.iter_mut().zip(x) {
            // C `(uint8_t)(v + 0.5f)` truncates; the value stays within 0..=31.
            *q = ((v - min) * id + 0.5) as u8;
        }
        let (qh, qs) = out[4..24].split_at_mut(4);
        pack_five_bit(&q, qh, qs);
    }

    fn quants(block: &[u8]) -> [i8; QK] {
        five_bit_quants(&block[4..8], &block[8..24]).map(|q| q as i8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dot::generic::dot_block32 as dot;
    use crate::legacy::block32::{dequantize_row, quantize_row};

    #[test]
    fn block_bytes_by_hand() {
        // min = 0, max = 31 -> d = 1; q = trunc(x + 0.5).
        let mut x = [0.0f32; 32];
        x[1] = 31.0; // 31: nibble 15, fifth bit
        x[2] = 16.4; // 16: nibble 0, fifth bit
        x[20] = 7.6; // 8: high nibble of byte 4
        let mut b = [0u8; 24];
        quantize_row::<Q5_1>(&x, &mut b);
        assert_eq!(&b[0..2], &[0x00, 0x3c]);
        assert_eq!(&b[2..4], &[0, 0]);
        assert_eq!(u32::from_le_bytes([b[4], b[5], b[6], b[7]]), 0b110);
        assert_eq!(b[9] & 0x0f, 15);
        assert_eq!(b[10] & 0x0f, 0);
        assert_eq!(b[12] >> 4, 8);
        let mut y = [0f32; 32];
        dequantize_row::<Q5_1>(&b, &mut y);
        assert_eq!((y[0], y[1], y[2], y[20]), (0.0, 31.0, 16.0, 8.0));
    }

    #[test]
    fn dot_by_hand() {
        // q = 20 everywhere (nibble 4 + bit), d = 0.5, m = -1 -> w = 9; x: d = 1, q = 2,
        // s = 64. Lanes: 32 * 20 * 2 * 0.5 = 640; m * s = -64.
        let mut w = [0x44u8; 24];
        w[0..2].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        w[2..4].copy_from_slice(&f16::from_f32(-1.0).to_le_bytes());
        w[4..8].copy_from_slice(&[0xff; 4]);
        let mut x = [2u8; 36];
        x[0..2].copy_from_slice(&f16::from_f32(1.0).to_le_bytes());
        x[2..4].copy_from_slice(&f16::from_f32(64.0).to_le_bytes());
        assert_eq!(dot::<Q5_1>(1, &w, &x), 576.0);
    }
}
