//! Each K-quant type's unpacked form, chosen by its [`DType`]: the by-type entry points
//! of [`super::block`]'s `unpacked_quants` and `group_scales` for the batched products
//! ([`super::tiles`] and its per-architecture kernels).

use common::engine_abi::DType;

use super::block;
use super::q2_k::BlockQ2K;
use super::q3_k::BlockQ3K;
use super::q4_k::BlockQ4K;
use super::q5_k::BlockQ5K;
use super::q6_k::BlockQ6K;
use super::unpacked::{GroupScales, Unpacked};

/// Whether the type's blocks have mins (`s2` subtracted in float) rather than an offset
/// folded into the integer sum.
pub(crate) const fn has_min(t: DType) -> bool {
    matches!(t, DType::Q2_K | DType::Q4_K | DType::Q5_K)
}

/// Unpacks one super-block of `wtype` at `bytes`.
pub(crate) fn unpack(wtype: DType, bytes: &[u8]) -> Unpacked {
    let q = match wtype {
        DType::Q2_K => block::unpacked_quants::<BlockQ2K>(bytes),
        DType::Q3_K => block::unpacked_quants::<BlockQ3K>(bytes),
        DType::Q4_K => block::unpacked_quants::<BlockQ4K>(bytes),
        DType::Q5_K => block::unpacked_quants::<BlockQ5K>(bytes),
        _ => block::unpacked_quants::<BlockQ6K>(bytes),
    };
    Unpacked::new(q, group_scales(wtype, bytes))
}

/// The group scales of one super-block of `wtype` at `bytes`.
pub(crate) fn group_scales(wtype: DType, bytes: &[u8]) -> GroupScales {
    match wtype {
        DType::Q2_K => block::group_scales::<BlockQ2K>(bytes),
        DType::Q3_K => block::group_scales::<BlockQ3K>(bytes),
        DType::Q4_K => block::group_scales::<BlockQ4K>(bytes),
        DType::Q5_K => block::group_scales::<BlockQ5K>(bytes),
        _ => block::group_scales::<BlockQ6K>(bytes),
    }
}
