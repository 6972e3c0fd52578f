//! ggml's Q8_1 block (`block_q8_1`, 36 bytes): f16 scale `d`, f16 `s = d * Σ q`, then 32
//! signed bytes; `x = d * q`. Only an activation type here: what Q4_1 and Q5_1 weights
//! are multiplied with (the `s` term carries their minimum).

use half::f16;

use super::block32::QK;

/// Bytes of one Q8_1 block.
pub(crate) const BYTES: usize = 36;

/// Quantizes one block of activations like ggml's x86 AVX2 `quantize_row_q8_1` (what
/// llama.cpp's CPU backend runs; not `quantize_row_q8_1_ref`): scale `127 / amax`,
/// ties-to-even rounding (`_mm256_round_ps`), `s = f16(d * Σ q)` with the sum in integers.
pub(crate) fn quantize_block_avx2_semantics(x: &[f32], out: &mut [u8]) {
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    let mut sum = 0i32;
    for (q, &v) in out[4..4 + QK].iter_mut().zip(x) {
        let r = (v * id).round_ties_even() as i32;
        sum += r;
        *q = r as i8 as u8;
    }
    out[0..2].copy_from_slice(&f16::from_f32(d).to_le_bytes());
    out[2..4].copy_from_slice(&f16::from_f32(d * sum as f32).to_le_bytes());
}

/// Dequantizes one row of Q8_1 blocks: `d * q` (`s` is redundant).
pub(crate) fn dequantize_row(src: &[u8], dst: &mut [f32]) {
    for (b, out) in src.chunks_exact(BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = crate::f16::read_f16(b, 0);
        for (o, &q) in out.iter_mut().zip(&b[4..BYTES]) {
            *o = f32::from(q as i8) * d;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_by_hand() {
        // amax = 127 -> d = 1, id = 1: q = x rounded to even; s = Σ q = 127 + 2 - 4 = 125.
        let mut x = [0f32; 32];
        x[0] = 127.0;
        x[1] = 2.5; // tie -> 2
        x[2] = -3.5; // tie -> -4
        let mut b = [0u8; 36];
        quantize_block_avx2_semantics(&x, &mut b);
        assert_eq!(&b[0..2], &[0x00, 0x3c]);
        assert_eq!(f16::from_le_bytes([b[2], b[3]]).to_f32(), 125.0);
        assert_eq!((b[4] as i8, b[5] as i8, b[6] as i8), (127, 2, -4));
        let mut y = [0f32; 32];
        dequantize_row(&b, &mut y);
        assert_eq!(&y[0..3], &[127.0, 2.0, -4.0]);
    }

    #[test]
    fn zero_block() {
        let mut b = [0xffu8; 36];
        quantize_block_avx2_semantics(&[0f32; 32], &mut b);
        assert_eq!(b, [0u8; 36]);
    }
}
