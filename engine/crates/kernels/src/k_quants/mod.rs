//! ggml's K-quants: weights in super-blocks of 256 values (`Q2_K` … `Q6_K`) and their
//! activation type `Q8_K`, byte-compatible with `ggml-common.h`.
//!
//! Each type module holds the block layout, ggml's reference quantizer
//! (`quantize_row_q*_K_ref`, what llama.cpp writes into GGUF files when no importance
//! matrix is given), the row dequantizer and the portable dot product with `Q8_K`
//! activations; [`x86`] holds the AVX2 dot products.
//!
//! # Rounding of the dot products
//! ggml's AVX2 `ggml_vec_dot_q*_K_q8_K` compute, per super-block, exact integer sums in
//! eight 32-bit lanes (lane `l` collects elements `4l..4l+4` of every 32-element chunk,
//! weighted by the group scales), convert them to `f32` and accumulate them with one FMA
//! by `d_x · d_w` into eight `f32` lanes; the min or offset terms go through the block's
//! `bsums`. The portable functions compute the same lane sums ([`lane_sums`]) and apply
//! the same float operations in the same order, so both backends agree bit for bit.

pub(crate) mod fit;
pub mod q2_k;
pub mod q3_k;
pub mod q4_k;
pub mod q5_k;
pub mod q6_k;
#[cfg(target_arch = "x86_64")]
mod q6_k_tiles;
pub mod q8_k;
pub mod tiles;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

use common::engine_abi::DType;

use crate::backend::Backend;

/// Values per super-block.
pub const QK_K: usize = 256;

/// Bytes of the packed 6-bit scales and mins of `Q4_K`/`Q5_K` (and of `Q3_K`'s scales).
pub const K_SCALE_SIZE: usize = 12;

/// Lanes of one AVX2 `f32` or `i32` vector.
pub(crate) const LANES: usize = 8;

/// ggml's `hsum_float_8`: `(lo + hi)`, then `movehl` add, then `movehdup`.
#[inline]
pub(crate) fn hsum8(v: [f32; LANES]) -> f32 {
    let r = [v[4] + v[0], v[5] + v[1], v[6] + v[2], v[7] + v[3]];
    (r[0] + r[2]) + (r[1] + r[3])
}

/// The eight integer lanes of one super-block: lane `l` sums `term(e)` over the elements
/// `e` with `(e % 32) / 4 == l`, as `maddubs`/`madd` leave them (exact: no term or lane
/// sum of a valid block overflows `i32`).
#[inline]
pub(crate) fn lane_sums(term: impl Fn(usize) -> i32) -> [i32; LANES] {
    let mut lanes = [0i32; LANES];
    for e in 0..QK_K {
        let l = (e % 32) / 4;
        lanes[l] = lanes[l].wrapping_add(term(e));
    }
    lanes
}

/// Unpacks the 6-bit scale and min of sub-block `j` (0..8) from `Q4_K`/`Q5_K` `scales`
/// (ggml's `get_scale_min_k4`): sub-blocks 0..4 in the low 6 bits of bytes `j` and
/// `j + 4`, sub-blocks 4..8 in the nibbles of byte `j + 4` with their top two bits in the
/// high bits of bytes `j − 4` and `j`.
#[inline]
pub(crate) fn scale_min_k4(j: usize, q: &[u8; K_SCALE_SIZE]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Packs 6-bit scales and mins of the 8 sub-blocks the way [`scale_min_k4`] reads them
/// (the packing loop of `quantize_row_q4_K_ref`).
pub(crate) fn pack_scale_min_k4(ls: &[u8; 8], lm: &[u8; 8]) -> [u8; K_SCALE_SIZE] {
    let mut s = [0u8; K_SCALE_SIZE];
    for j in 0..8 {
        if j < 4 {
            s[j] = ls[j];
            s[j + 4] = lm[j];
        } else {
            s[j + 4] = (ls[j] & 0xf) | ((lm[j] & 0xf) << 4);
            s[j - 4] |= (ls[j] >> 4) << 6;
            s[j] |= (lm[j] >> 4) << 6;
        }
    }
    s
}

/// Whether `t` is one of the K-quant weight types (`Q2_K` … `Q6_K`) handled here.
pub const fn is_k_weight(t: DType) -> bool {
    matches!(
        t,
        DType::Q2_K | DType::Q3_K | DType::Q4_K | DType::Q5_K | DType::Q6_K
    )
}

/// `quantize_row_q*_K_ref` of `dtype` (a K-quant weight type or `Q8_K`): `src` is a
/// multiple of 256 values and `dst` holds exactly its blocks (checked by the caller).
/// Returns `false` for other types.
pub(crate) fn quantize_row(dtype: DType, src: &[f32], dst: &mut [u8]) -> bool {
    match dtype {
        DType::Q2_K => q2_k::quantize_row(src, dst),
        DType::Q3_K => q3_k::quantize_row(src, dst),
        DType::Q4_K => q4_k::quantize_row(src, dst),
        DType::Q5_K => q5_k::quantize_row(src, dst),
        DType::Q6_K => q6_k::quantize_row(src, dst),
        DType::Q8_K => q8_k::quantize_row(src, dst),
        _ => return false,
    }
    true
}

/// `dequantize_row_q*_K` of `dtype`; `src` holds exactly the blocks of `dst` (checked by
/// the caller). Returns `false` for other types.
pub(crate) fn dequantize_row(dtype: DType, src: &[u8], dst: &mut [f32]) -> bool {
    match dtype {
        DType::Q2_K => q2_k::dequantize_row(src, dst),
        DType::Q3_K => q3_k::dequantize_row(src, dst),
        DType::Q4_K => q4_k::dequantize_row(src, dst),
        DType::Q5_K => q5_k::dequantize_row(src, dst),
        DType::Q6_K => q6_k::dequantize_row(src, dst),
        DType::Q8_K => q8_k::dequantize_row(src, dst),
        _ => return false,
    }
    true
}

/// Dot product of `nb` super-blocks of a K-quant weight row with a `Q8_K` row, or `None`
/// if `wtype` is not a K-quant weight type.
///
/// # Safety
/// `backend` is supported by this CPU; `w` and `x` point at `nb` readable blocks of
/// `wtype` and `Q8_K`.
#[inline]
pub(crate) unsafe fn vec_dot(
    backend: Backend,
    wtype: DType,
    nb: usize,
    w: *const u8,
    x: *const u8,
) -> Option<f32> {
    #[cfg(target_arch = "x86_64")]
    if backend == Backend::Avx2 {
        // SAFETY: AVX2/FMA/F16C supported and nb blocks readable (caller).
        return unsafe {
            Some(match wtype {
                DType::Q2_K => x86::dot_q2_k(nb, w, x),
                DType::Q3_K => x86::dot_q3_k(nb, w, x),
                DType::Q4_K => x86::dot_q4_k(nb, w, x),
                DType::Q5_K => x86::dot_q5_k(nb, w, x),
                DType::Q6_K => x86::dot_q6_k(nb, w, x),
                _ => return None,
            })
        };
    }
    let _ = backend;
    let wbytes = nb * wtype.block_bytes();
    // SAFETY: nb blocks of each row are readable (caller); only read when wtype is a
    // K-quant, whose block size block_bytes() is.
    let (w, x) = unsafe {
        (
            std::slice::from_raw_parts(w, wbytes),
            std::slice::from_raw_parts(x, nb * q8_k::BLOCK_BYTES),
        )
    };
    Some(match wtype {
        DType::Q2_K => q2_k::dot(nb, w, x),
        DType::Q3_K => q3_k::dot(nb, w, x),
        DType::Q4_K => q4_k::dot(nb, w, x),
        DType::Q5_K => q5_k::dot(nb, w, x),
        DType::Q6_K => q6_k::dot(nb, w, x),
        _ => return None,
    })
}

/// Batches of fewer than [`tiles::MIN_ROWS`] rows (decoding): every output
/// `y[i·y_stride + n]` is the AVX2 `vec_dot` of weight row `n` and activation row `i`, with
/// the type's kernel chosen once.
///
/// # Safety
/// AVX2/FMA/F16C available; rows `n_range` of `w` (stride `w_stride`) and `m` rows of `x`
/// (stride `x_stride`) hold `k` elements of `wtype` / `Q8_K`; the caller owns the outputs.
#[cfg(target_arch = "x86_64")]
#[expect(clippy::too_many_arguments, reason = "internal form of matmul")]
pub(crate) unsafe fn matmul_rows_avx2(
    wtype: DType,
    k: usize,
    w: *const u8,
    w_stride: usize,
    x: *const u8,
    x_stride: usize,
    m: usize,
    n_range: std::ops::Range<usize>,
    y: *mut f32,
    y_stride: usize,
) {
    type Dot = unsafe fn(usize, *const u8, *const u8) -> f32;
    let dot: Dot = match wtype {
        DType::Q2_K => x86::dot_q2_k,
        DType::Q3_K => x86::dot_q3_k,
        DType::Q4_K => x86::dot_q4_k,
        DType::Q5_K => x86::dot_q5_k,
        _ => x86::dot_q6_k,
    };
    let nb = k / QK_K;
    for i in 0..m {
        for n in n_range.clone() {
            // SAFETY: rows n of w and i of x hold nb blocks; AVX2 available; output owned
            // (all from the caller).
            unsafe {
                *y.add(i * y_stride + n) = dot(nb, w.add(n * w_stride), x.add(i * x_stride));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_min_packing_round_trips() {
        let ls = [0, 1, 17, 63, 32, 5, 48, 63];
        let lm = [63, 2, 33, 0, 15, 16, 62, 1];
        let packed = pack_scale_min_k4(&ls, &lm);
        for j in 0..8 {
            assert_eq!(scale_min_k4(j, &packed), (ls[j], lm[j]), "sub-block {j}");
        }
    }

    #[test]
    fn lanes_group_elements_by_four_within_32() {
        let lanes = lane_sums(|e| if e == 5 || e == 37 || e == 255 { 1 } else { 0 });
        assert_eq!(lanes, [0, 2, 0, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn hsum_order() {
        let w = [1e8, 1.0, 0.0, 0.0, -1e8, 1.0, 0.0, 0.0];
        assert_eq!(hsum8(w), 2.0);
    }
}
