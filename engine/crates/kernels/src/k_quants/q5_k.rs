//! ggml's `block_q5_K`: 8 sub-blocks of 32 values, `x = d·sc·q − dmin·m` with 5-bit
//! quants and 6-bit sub-block scales and mins (5.5 bits per weight).
//!
//! Element `64j + 32h + t`: low four bits are nibble `h` of `qs[32j + t]`, the fifth bit
//! is bit `2j + h` of `qh[t]`. Scales and mins are packed like `Q4_K`'s.

use bytemuck::{Pod, Zeroable};
use half::f16;

use super::fit::{AffineSearch, fit_affine_k4};
use super::scales::{K_SCALE_SIZE, QK_K, scale_min_k4};
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

/// The 5-bit quant of element `e`.
#[inline]
pub(crate) fn quant(b: &BlockQ5K, e: usize) -> u8 {
    let (j, h, t) = (e / 64, (e % 64) / 32, e % 32);
    let low = (b.qs[32 * j + t] >> (4 * h)) & 0xf;
    let high = (b.qh[t] >> (2 * j + h)) & 1;
    low | (high << 4)
}

/// The group scales of the block at `bytes` (see [`GroupScales`]).
pub(crate) fn group_scales(bytes: &[u8]) -> GroupScales {
    let b: BlockQ5K = bytemuck::pod_read_unaligned(&bytes[..BLOCK_BYTES]);
    k4_group_scales(b.d.to_f32(), b.dmin.to_f32(), &b.scales)
}

/// The quants of the block at `bytes` in element order, with the fifth bit (`0..32`), as
/// [`super::tiles`](crate::k_quants::tiles) multiplies them.
pub(crate) fn unpacked_quants(bytes: &[u8]) -> [u8; QK_K] {
    let b: BlockQ5K = bytemuck::pod_read_unaligned(&bytes[..BLOCK_BYTES]);
    std::array::from_fn(|e| quant(&b, e))
}

/// `quantize_row_q5_K_ref` for one block of 256 values.
pub(crate) fn quantize_block(x: &[f32]) -> BlockQ5K {
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

/// Quantizes `x` (a multiple of 256 values) into `out` (176 bytes per block).
pub(crate) fn quantize_row(x: &[f32], out: &mut [u8]) {
    for (xb, ob) in x.chunks_exact(QK_K).zip(out.chunks_exact_mut(BLOCK_BYTES)) {
        ob.copy_from_slice(bytemuck::bytes_of(&quantize_block(xb)));
    }
}

/// `dequantize_row_q5_K`.
pub(crate) fn dequantize_row(src: &[u8], dst: &mut [f32]) {
    for (bytes, out) in src
        .chunks_exact(BLOCK_BYTES)
        .zip(dst.chunks_exact_mut(QK_K))
    {
        let b: BlockQ5K = bytemuck::pod_read_unaligned(bytes);
        let (d, min) = (b.d.to_f32(), b.dmin.to_f32());
        for (j, out) in out.chunks_exact_mut(32).enumerate() {
            let (sc, m) = scale_min_k4(j, &b.scales);
            let (dj, mj) = (d * f32::from(sc), min * f32::from(m));
            for (t, o) in out.iter_mut().enumerate() {
                *o = dj * f32::from(quant(&b, 32 * j + t)) - mj;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        dequantize_row(bytemuck::bytes_of(&b), &mut y);
        assert_eq!((y[0], y[32], y[197], y[1]), (2.0, 16.0, 15.0, -1.0));
    }

    #[test]
    fn quantize_round_trip_is_close() {
        let x: Vec<f32> = (0..QK_K)
            .map(|i| ((i * 31 % 89) as f32 / 44.0 - 1.0) * 1.5)
            .collect();
        let b = quantize_block(&x);
        let mut y = [0f32; QK_K];
        dequantize_row(bytemuck::bytes_of(&b), &mut y);
        for (a, b) in x.iter().zip(&y) {
            // 32 levels over a range of 3: half a step is ~0.05, plus scale rounding.
            assert!((a - b).abs() <= 0.08, "{a} vs {b}");
        }
    }
}
