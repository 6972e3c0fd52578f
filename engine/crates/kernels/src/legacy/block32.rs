//! What the 32-element block types share: the block size, the [`Block32`] description a
//! weight type gives of its layout, and the reference quantizer's helpers. Types and
//! blocks only; the dot products over [`Block32`] types are in [`crate::dot`].

use common::engine_abi::DType;

use crate::f16::read_f16;

/// Elements per block of every type here (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q8_1).
pub const QK: usize = 32;

/// One ggml weight block of [`QK`] elements whose value is `d * q (+ m)`, multiplied with
/// Q8_0 blocks (no minimum) or Q8_1 blocks (with a minimum).
pub(crate) trait Block32 {
    /// The ggml type.
    const DTYPE: DType;
    /// Bytes of one block (`d` is always the f16 at bytes 0..2).
    const BYTES: usize = Self::DTYPE.block_bytes();
    /// Whether the block carries a minimum `m` (f16 at bytes 2..4); its quants are then
    /// unsigned and its activations Q8_1, else signed and Q8_0.
    const HAS_MIN: bool;
    /// Bytes of one activation block (Q8_1: 36, Q8_0: 34); its 32 quants are the last 32.
    const X_BYTES: usize = if Self::HAS_MIN { 36 } else { 34 };

    /// ggml's reference quantizer (`quantize_row_*_ref`) for one block of `x`.
    fn quantize(x: &[f32], out: &mut [u8]);

    /// The block's integer quants in element order (unsigned `0..32` with a minimum,
    /// signed `-16..16` / `-8..8` without).
    fn quants(block: &[u8]) -> [i8; QK];
}

/// Quantizes a row of whole blocks with the reference quantizer of `B`.
pub(crate) fn quantize_row<B: Block32>(src: &[f32], dst: &mut [u8]) {
    for (x, out) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(B::BYTES)) {
        B::quantize(x, out);
    }
}

/// Dequantizes a row of whole blocks of `B` as ggml's `dequantize_row_*`: `q * d (+ m)`,
/// each product rounded to `f32` before the minimum is added (no FMA in `libggml-base`).
pub(crate) fn dequantize_row<B: Block32>(src: &[u8], dst: &mut [f32]) {
    for (b, out) in src.chunks_exact(B::BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = read_f16(b, 0);
        let q = B::quants(b);
        if B::HAS_MIN {
            let m = read_f16(b, 2);
            for (o, &q) in out.iter_mut().zip(&q) {
                *o = f32::from(q) * d + m;
            }
        } else {
            for (o, &q) in out.iter_mut().zip(&q) {
                *o = f32::from(q) * d;
            }
        }
    }
}

/// The fifth bits of a Q5 block (`qh`, little-endian u32 at `qh`) and its nibbles as the
/// 5-bit values `0..32` in element order.
pub(crate) fn five_bit_quants(qh: &[u8], qs: &[u8]) -> [u8; QK] {
    let qh = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
    let mut q = [0u8; QK];
    for j in 0..QK / 2 {
        let h0 = (((qh >> j) << 4) & 0x10) as u8;
        let h1 = ((qh >> (j + 12)) & 0x10) as u8;
        q[j] = (qs[j] & 0x0f) | h0;
        q[j + QK / 2] = (qs[j] >> 4) | h1;
    }
    q
}

/// Packs 5-bit values (element order) into a Q5 block's `qh` (little-endian) and `qs`.
pub(crate) fn pack_five_bit(q: &[u8; QK], qh: &mut [u8], qs: &mut [u8]) {
    let mut h = 0u32;
    for j in 0..QK / 2 {
        let (x0, x1) = (q[j], q[j + QK / 2]);
        qs[j] = (x0 & 0x0f) | ((x1 & 0x0f) << 4);
        h |= u32::from((x0 & 0x10) >> 4) << j;
        h |= u32::from((x1 & 0x10) >> 4) << (j + QK / 2);
    }
    qh.copy_from_slice(&h.to_le_bytes());
}

/// Minimum and maximum of a block as ggml's `_1` quantizers find them (from
/// `FLT_MAX` / `-FLT_MAX`).
pub(crate) fn min_max(x: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

/// The value of largest magnitude (the first of equal magnitudes), as ggml's `_0`
/// quantizers find it.
pub(crate) fn signed_abs_max(x: &[f32]) -> f32 {
    let (mut amax, mut max) = (0f32, 0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}
