//! Each K-quant type's unpacked form, chosen by its [`DType`]: the by-type entry points
//! of the type modules' `unpacked_quants` and `group_scales` for the batched products
//! ([`super::tiles`] and its per-architecture kernels).

use common::engine_abi::DType;

use super::unpacked::{GroupScales, Unpacked};

/// Whether the type's blocks have mins (`s2` subtracted in float) rather than an offset
/// folded into the integer sum.
pub(crate) const fn has_min(t: DType) -> bool {
    matches!(t, DType::Q2_K | DType::Q4_K | DType::Q5_K)
}

/// Unpacks one super-block of `wtype` at `bytes`.
pub(crate) fn unpack(wtype: DType, bytes: &[u8]) -> Unpacked {
    let q = match wtype {
        DType::Q2_K => super::q2_k::unpacked_quants(bytes),
        DType::Q3_K => super::q3_k::unpacked_quants(bytes),
        DType::Q4_K => super::q4_k::unpacked_quants(bytes),
        DType::Q5_K => super::q5_k::unpacked_quants(bytes),
        _ => super::q6_k::unpacked_quants(bytes),
    };
    Unpacked::new(q, group_scales(wtype, bytes))
}

/// The group scales of one super-block of `wtype` at `bytes`.
pub(crate) fn group_scales(wtype: DType, bytes: &[u8]) -> GroupScales {
    match wtype {
        DType::Q2_K => super::q2_k::group_scales(bytes),
        DType::Q3_K => super::q3_k::group_scales(bytes),
        DType::Q4_K => super::q4_k::group_scales(bytes),
        DType::Q5_K => super::q5_k::group_scales(bytes),
        _ => super::q6_k::group_scales(bytes),
    }
}
