//! ggml's K-quants: weights in super-blocks of 256 values (`Q2_K` … `Q6_K`) and their
//! activation type `Q8_K`, byte-compatible with `ggml-common.h`.
//!
//! Each type module holds the block layout and its `block::KBlock` impl: ggml's reference
//! quantizer of one block (`quantize_row_q*_K_ref`, what llama.cpp writes into GGUF files
//! when no importance matrix is given) and its dequantizer, and for the weight types
//! `block::KWeight` (the quants and group scales the batched products multiply);
//! `block` holds the row loops over blocks, written once for every type; [`generic`],
//! [`x86`] and `aarch64` hold the portable, AVX2 and NEON dot products with `Q8_K`
//! activations.
//!
//! # Rounding of the dot products
//! ggml's AVX2 `ggml_vec_dot_q*_K_q8_K` compute, per super-block, exact integer sums in
//! eight 32-bit lanes (lane `l` collects elements `4l..4l+4` of every 32-element chunk,
//! weighted by the group scales), convert them to `f32` and accumulate them with one FMA
//! by `d_x · d_w` into eight `f32` lanes; the min or offset terms go through the block's
//! `bsums`. The portable functions compute the same lane sums ([`generic::lane_sums`]) and apply
//! the same float operations in the same order, so both backends agree bit for bit.

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
pub(crate) mod block;
pub(crate) mod fit;
pub(crate) mod generic;
#[cfg(target_arch = "x86_64")]
mod interleaved_x86;
pub mod q2_k;
pub mod q3_k;
pub mod q4_k;
pub mod q5_k;
pub mod q6_k;
pub mod q8_k;
pub(crate) mod scales;
pub mod tiles;
#[cfg(target_arch = "aarch64")]
mod tiles_aarch64;
pub(crate) mod unpacked;
pub(crate) mod unpacking;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

use common::engine_abi::DType;

pub use scales::{K_SCALE_SIZE, QK_K};

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
        DType::Q2_K => block::quantize_row::<q2_k::BlockQ2K>(src, dst),
        DType::Q3_K => block::quantize_row::<q3_k::BlockQ3K>(src, dst),
        DType::Q4_K => block::quantize_row::<q4_k::BlockQ4K>(src, dst),
        DType::Q5_K => block::quantize_row::<q5_k::BlockQ5K>(src, dst),
        DType::Q6_K => block::quantize_row::<q6_k::BlockQ6K>(src, dst),
        DType::Q8_K => block::quantize_row::<q8_k::BlockQ8K>(src, dst),
        _ => return false,
    }
    true
}

/// `dequantize_row_q*_K` of `dtype`; `src` holds exactly the blocks of `dst` (checked by
/// the caller). Returns `false` for other types.
pub(crate) fn dequantize_row(dtype: DType, src: &[u8], dst: &mut [f32]) -> bool {
    match dtype {
        DType::Q2_K => block::dequantize_row::<q2_k::BlockQ2K>(src, dst),
        DType::Q3_K => block::dequantize_row::<q3_k::BlockQ3K>(src, dst),
        DType::Q4_K => block::dequantize_row::<q4_k::BlockQ4K>(src, dst),
        DType::Q5_K => block::dequantize_row::<q5_k::BlockQ5K>(src, dst),
        DType::Q6_K => block::dequantize_row::<q6_k::BlockQ6K>(src, dst),
        DType::Q8_K => block::dequantize_row::<q8_k::BlockQ8K>(src, dst),
        _ => return false,
    }
    true
}
