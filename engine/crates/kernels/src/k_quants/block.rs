//! The skeleton every K-quant block type shares, written once: a type implements
//! [`KBlock`] (its size, its one-block quantizer and dequantizer) and, for the weight types,
//! [`KWeight`] (its quants and group scales as the integer products use them); the row
//! functions here read blocks at any alignment and loop over them. Generic, so each type's
//! loops stay monomorphic. Also the per-block dequantizer `Q4_K` and `Q5_K` share. Imports
//! only the block scales and [`GroupScales`].

use bytemuck::Pod;

use super::scales::{K_SCALE_SIZE, QK_K, scale_min_k4};
use super::unpacked::GroupScales;

/// One K-quant super-block type (256 values): its layout and its per-block arithmetic.
pub(crate) trait KBlock: Pod {
    /// Bytes of one block (ggml's `sizeof(block_qN_K)`).
    const BYTES: usize;

    /// ggml's `quantize_row_qN_K_ref` for one block: `x` holds 256 values.
    fn quantize(x: &[f32]) -> Self;

    /// ggml's `dequantize_row_qN_K` for one block.
    fn dequantize(&self, out: &mut [f32; QK_K]);
}

/// A K-quant weight type (`Q2_K` … `Q6_K`): what [`super::tiles`] multiplies.
pub(crate) trait KWeight: KBlock {
    /// The quant of element `e` as stored, unsigned (`0..2^bits`; an offset, where the type
    /// has one, is in the coefficients of [`KWeight::group_scales`]).
    fn quant(&self, e: usize) -> u8;

    /// The block's group scales (see [`GroupScales`]).
    fn group_scales(&self) -> GroupScales;
}

/// The block at the start of `bytes`, read at any alignment.
#[inline]
pub(crate) fn read<B: KBlock>(bytes: &[u8]) -> B {
    bytemuck::pod_read_unaligned(&bytes[..B::BYTES])
}

/// The group scales of the block at `bytes` (see [`GroupScales`]).
pub(crate) fn group_scales<B: KWeight>(bytes: &[u8]) -> GroupScales {
    read::<B>(bytes).group_scales()
}

/// The quants of the block at `bytes` in element order ([`KWeight::quant`]), as
/// [`super::tiles`] multiplies them.
pub(crate) fn unpacked_quants<B: KWeight>(bytes: &[u8]) -> [u8; QK_K] {
    let b = read::<B>(bytes);
    std::array::from_fn(|e| b.quant(e))
}

/// Quantizes `x` (a multiple of 256 values) into `out` (`B::BYTES` per block).
pub(crate) fn quantize_row<B: KBlock>(x: &[f32], out: &mut [u8]) {
    for (xb, ob) in x.chunks_exact(QK_K).zip(out.chunks_exact_mut(B::BYTES)) {
        ob.copy_from_slice(bytemuck::bytes_of(&B::quantize(xb)));
    }
}

/// Dequantizes every block of `src` into `dst` (256 values per block).
pub(crate) fn dequantize_row<B: KBlock>(src: &[u8], dst: &mut [f32]) {
    for (bytes, out) in src
        .chunks_exact(B::BYTES)
        .zip(dst.as_chunks_mut::<QK_K>().0)
    {
        bytemuck::pod_read_unaligned::<B>(bytes).dequantize(out);
    }
}

/// The per-block formula of `dequantize_row_q4_K` and `dequantize_row_q5_K` (the two share
/// the header `d`, `dmin` and the packed 6-bit scales and mins): `d·sc·q − dmin·m` per
/// sub-block of 32, with `b`'s quants.
#[inline]
pub(crate) fn dequantize_k4<B: KWeight>(
    b: &B,
    (d, min): (f32, f32),
    scales: &[u8; K_SCALE_SIZE],
    out: &mut [f32; QK_K],
) {
    for (j, out) in out.chunks_exact_mut(32).enumerate() {
        let (sc, m) = scale_min_k4(j, scales);
        let (dj, mj) = (d * f32::from(sc), min * f32::from(m));
        for (t, o) in out.iter_mut().enumerate() {
            *o = dj * f32::from(b.quant(32 * j + t)) - mj;
        }
    }
}
