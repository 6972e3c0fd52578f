//! ggml's Q4_1 block (`block_q4_1`, 20 bytes): f16 scale `d`, f16 minimum `m`, then 16
//! bytes holding element `j` in the low nibble of byte `j` and element `j + 16` in its
//! high nibble; `x = d * q + m`. Multiplied with Q8_1 activations.

use common::engine_abi::DType;
use half::f16;

use super::block32::{Block32, QK, min_max};

/// Marker of the Q4_1 block layout.
pub(crate) struct Q4_1;

impl Block32 for Q4_1 {
    const DTYPE: DType = DType::Q4_1;
    const HAS_MIN: bool = true;

    /// `quantize_row_q4_1_ref`: `d = (max - min) / 15`, `q = min(15, trunc((x - min) / d + 0.5))`.
    fn quantize(x: &[f32], out: &mut [u8]) {
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        out[0..2].copy_from_slice(&f16::from_f32(d).to_le_bytes());
        out[2..4].copy_from_slice(&f16::from_f32(min).to_le_bytes());
        for j in 0..QK / 2 {
            let x0 = (x[j] - min) * id;
            let x1 = (x[QK / 2 + j] - min) * id;
            // C `(int8_t)(v + 0.5f)` truncates toward zero; then MIN(15, ...).
            let q0 = ((x0 + 0.5) as i8).min(15) as u8;
            let q1 = ((x1 + 0.5) as i8).min(15) as u8;
            out[4 + j] = q0 | (q1 << 4);
        }
    }

    fn quants(block: &[u8]) -> [i8; QK] {
        let mut q = [0i8; QK];
        for j in 0..QK / 2 {
            q[j] = (block[4 + j] & 0x0f) as i8;
            q[j + QK / 2] = (block[4 + j] >> 4) as i8;
        }
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dot::generic::dot_block32 as dot;
    use crate::legacy::block32::{dequantize_row, quantize_row};

    #[test]
    fn block_bytes_by_hand() {
        // min = -1, max = 2 -> d = 0.2, id = 5; q = trunc(5 (x + 1) + 0.5).
        let mut x = [0.0f32; 32];
        x[0] = -1.0; // 0
        x[1] = 2.0; // 15
        x[2] = 0.5; // trunc(8.0) = 8  (7.5 + 0.5)
        x[16] = 0.0; // trunc(5.5) = 5 (high nibble of byte 0)
        let mut b = [0u8; 20];
        quantize_row::<Q4_1>(&x, &mut b);
        assert_eq!(&b[0..2], &f16::from_f32(3.0 / 15.0).to_le_bytes());
        assert_eq!(&b[2..4], &f16::from_f32(-1.0).to_le_bytes());
        assert_eq!(b[4], 5 << 4);
        assert_eq!(b[5] & 0x0f, 15);
        assert_eq!(b[6] & 0x0f, 8);
        let mut y = [0f32; 32];
        dequantize_row::<Q4_1>(&b, &mut y);
        let d = f16::from_f32(0.2).to_f32();
        assert_eq!(y[0], -1.0);
        assert_eq!(y[1], 15.0 * d - 1.0);
        assert_eq!(y[16], 5.0 * d - 1.0);
    }

    #[test]
    fn constant_block_is_its_minimum() {
        let x = [0.75f32; 32];
        let mut b = [0u8; 20];
        quantize_row::<Q4_1>(&x, &mut b);
        let mut y = [0f32; 32];
        dequantize_row::<Q4_1>(&b, &mut y);
        assert_eq!(y, [0.75f32; 32]);
    }

    #[test]
    fn dot_by_hand() {
        // weights: d = 1, m = 0.5, all nibbles 2 -> w = 2.5; activations: d = 0.25,
        // q = 4 (x = 1), s = d * Σq = 32. Lanes: 32 * 2 * 4 * 0.25 = 64; m * s = 16.
        let mut w = [0x22u8; 20];
        w[0..2].copy_from_slice(&f16::from_f32(1.0).to_le_bytes());
        w[2..4].copy_from_slice(&f16::from_f32(0.5).to_le_bytes());
        let mut x = [4u8; 36];
        x[0..2].copy_from_slice(&f16::from_f32(0.25).to_le_bytes());
        x[2..4].copy_from_slice(&f16::from_f32(32.0).to_le_bytes());
        assert_eq!(dot::<Q4_1>(1, &w, &x), 80.0);
    }
}
