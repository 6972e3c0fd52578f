//! Dot products of one weight row with one activation row, as ggml's `vec_dot` computes them,
//! and the conversion of `f32` activations to the type each weight type is multiplied with.

#[cfg(target_arch = "aarch64")]
pub(crate) mod aarch64;
pub(crate) mod generic;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

use common::engine_abi::DType;

use crate::backend::Backend;
use crate::error::KernelError;
use crate::f16::f32_row_to_f16_bytes;
use crate::k_quants::QK_K;
use crate::legacy::block32::QK;
use crate::legacy::q4_1::Q4_1;
use crate::legacy::q5_0::Q5_0;
use crate::legacy::q5_1::Q5_1;
use crate::legacy::{bf16, q8_1};
use crate::quant::quantize_block_q8_0_avx2_semantics;
use crate::shape::check_row;

/// Whether weight matrices of type `w` have dot-product and matrix-product kernels here.
/// The loader refuses other types by name before anything runs.
pub const fn has_kernels(w: DType) -> bool {
    matches!(
        w,
        DType::F32
            | DType::F16
            | DType::BF16
            | DType::Q8_0
            | DType::Q4_0
            | DType::Q4_1
            | DType::Q5_0
            | DType::Q5_1
    ) || crate::k_quants::is_k_weight(w)
}

/// Weight types with kernels ([`has_kernels`]), in ggml id order.
pub fn weight_types() -> impl Iterator<Item = DType> {
    DType::ALL.iter().copied().filter(|&t| has_kernels(t))
}

/// The type activations are converted to before they meet weights of type `w` (ggml's
/// `vec_dot_type`): Q8_0 for Q8_0, Q4_0 and Q5_0 weights, Q8_1 for Q4_1 and Q5_1, Q8_K for
/// the K-quants, F16 for F16, BF16 for BF16, F32 otherwise.
pub const fn vec_dot_type(w: DType) -> DType {
    match w {
        DType::Q8_0 | DType::Q4_0 | DType::Q5_0 => DType::Q8_0,
        DType::Q4_1 | DType::Q5_1 | DType::Q8_1 => DType::Q8_1,
        DType::Q2_K | DType::Q3_K | DType::Q4_K | DType::Q5_K | DType::Q6_K | DType::Q8_K => {
            DType::Q8_K
        }
        DType::F16 => DType::F16,
        DType::BF16 => DType::BF16,
        DType::F32 | DType::I32 => DType::F32,
    }
}

/// Converts one row of `f32` activations to `dst_type` bytes as llama.cpp's CPU backend
/// does on x86 with AVX2: Q8_0 with scale `127 / amax` and ties-to-even rounding (not the
/// reference quantizer), Q8_1 likewise with `s = f16(d * Σ q)`, Q8_K with ggml's reference
/// quantizer (what the x86 CPU backend calls), F16 and BF16 with round-to-nearest-even, F32
/// as a copy.
pub fn convert_activations(
    dst_type: DType,
    src: &[f32],
    dst: &mut [u8],
) -> Result<(), KernelError> {
    convert_activations_with(Backend::detect(), dst_type, src, dst)
}

/// [`convert_activations`] with an explicit backend (an unsupported one falls back to
/// [`Backend::Generic`]); every backend writes the same bytes.
pub fn convert_activations_with(
    backend: Backend,
    dst_type: DType,
    src: &[f32],
    dst: &mut [u8],
) -> Result<(), KernelError> {
    let k = src.len();
    check_row("convert_activations destination", dst_type, k, dst)?;
    #[cfg(target_arch = "aarch64")]
    if matches!(
        backend,
        Backend::Neon | Backend::NeonDotprod | Backend::NeonI8mm
    ) && backend.is_supported()
        && matches!(dst_type, DType::Q8_0 | DType::Q8_1 | DType::F16)
    {
        // SAFETY: NEON supported; dst holds the row (checked above).
        unsafe {
            match dst_type {
                DType::Q8_0 => aarch64::quantize_row_q8_0(src, dst),
                DType::Q8_1 => aarch64::quantize_row_q8_1(src, dst),
                _ => aarch64::f32_row_to_f16_bytes(src, dst),
            }
        }
        return Ok(());
    }
    let _ = backend;
    match dst_type {
        DType::Q8_0 => {
            for (x, out) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(34)) {
                quantize_block_q8_0_avx2_semantics(x, out);
            }
        }
        DType::Q8_1 => {
            for (x, out) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(q8_1::BYTES)) {
                q8_1::quantize_block_avx2_semantics(x, out);
            }
        }
        DType::F16 => f32_row_to_f16_bytes(src, dst),
        DType::Q8_K => {
            crate::k_quants::block::quantize_row::<crate::k_quants::q8_k::BlockQ8K>(src, dst)
        }
        DType::BF16 => bf16::f32_row_to_bytes(src, dst),
        DType::F32 => {
            for (x, out) in src.iter().zip(dst.chunks_exact_mut(4)) {
                out.copy_from_slice(&x.to_le_bytes());
            }
        }
        _ => {
            return Err(KernelError::UnsupportedType {
                dtype: dst_type,
                op: "convert_activations",
            });
        }
    }
    Ok(())
}

/// Dot product of a weight row `w` (`k` elements of `wtype`) and an activation row `x`
/// (`k` elements of `vec_dot_type(wtype)`), with the detected backend.
pub fn vec_dot(wtype: DType, k: usize, w: &[u8], x: &[u8]) -> Result<f32, KernelError> {
    vec_dot_with(Backend::detect(), wtype, k, w, x)
}

/// [`vec_dot`] with an explicit backend (must be supported by this CPU, see
/// [`Backend::is_supported`]; an unsupported one falls back to [`Backend::Generic`]).
pub fn vec_dot_with(
    backend: Backend,
    wtype: DType,
    k: usize,
    w: &[u8],
    x: &[u8],
) -> Result<f32, KernelError> {
    check_row("vec_dot weights", wtype, k, w)?;
    check_row("vec_dot activations", vec_dot_type(wtype), k, x)?;
    let backend = backend.supported_or_generic();
    // SAFETY: both rows were checked to hold k elements; the backend is supported.
    unsafe { vec_dot_unchecked(backend, wtype, k, w.as_ptr(), x.as_ptr()) }
}

/// [`vec_dot_with`] without checks.
///
/// # Safety
/// `backend` is supported by this CPU; `w` and `x` point at whole rows of `k` elements of
/// `wtype` and `vec_dot_type(wtype)`.
pub(crate) unsafe fn vec_dot_unchecked(
    backend: Backend,
    wtype: DType,
    k: usize,
    w: *const u8,
    x: *const u8,
) -> Result<f32, KernelError> {
    let unsupported = KernelError::UnsupportedType {
        dtype: wtype,
        op: "vec_dot",
    };
    if !has_kernels(wtype) {
        return Err(unsupported);
    }
    let (Some(wbytes), Some(xbytes)) = (wtype.row_bytes(k), vec_dot_type(wtype).row_bytes(k))
    else {
        return Err(KernelError::RowNotBlockAligned { dtype: wtype, k });
    };
    let simd = match backend {
        // SAFETY: the caller guarantees AVX2/FMA/F16C and whole rows of k elements.
        #[cfg(target_arch = "x86_64")]
        Backend::Avx2 => unsafe { x86_dot(wtype, k, w, x) },
        // SAFETY: the caller guarantees NEON (and dotprod for NeonDotprod and NeonI8mm) and whole rows.
        #[cfg(target_arch = "aarch64")]
        Backend::Neon | Backend::NeonDotprod | Backend::NeonI8mm => unsafe {
            neon_dot(backend.has_dotprod(), wtype, k, w, x)
        },
        _ => None,
    };
    if let Some(v) = simd {
        return Ok(v);
    }
    // SAFETY: the caller guarantees wbytes / xbytes readable bytes at w / x.
    let (w, x) = unsafe {
        (
            std::slice::from_raw_parts(w, wbytes),
            std::slice::from_raw_parts(x, xbytes),
        )
    };
    generic_dot(wtype, k, w, x).ok_or(unsupported)
}

/// The portable dot product of whole rows of `k` elements, or `None` for a type without
/// kernels.
pub(crate) fn generic_dot(wtype: DType, k: usize, w: &[u8], x: &[u8]) -> Option<f32> {
    use crate::k_quants::generic as kg;
    let nb = k / QK;
    let nk = k / QK_K;
    Some(match wtype {
        DType::F32 => generic::dot_f32(k, w, x),
        DType::F16 => generic::dot_f16(k, w, x),
        DType::BF16 => generic::dot_bf16(k, w, x),
        DType::Q8_0 => generic::dot_q8_0(nb, w, x),
        DType::Q4_0 => generic::dot_q4_0(nb, w, x),
        DType::Q4_1 => generic::dot_block32::<Q4_1>(nb, w, x),
        DType::Q5_0 => generic::dot_block32::<Q5_0>(nb, w, x),
        DType::Q5_1 => generic::dot_block32::<Q5_1>(nb, w, x),
        DType::Q2_K => kg::dot_q2_k(nk, w, x),
        DType::Q3_K => kg::dot_q3_k(nk, w, x),
        DType::Q4_K => kg::dot_q4_k(nk, w, x),
        DType::Q5_K => kg::dot_q5_k(nk, w, x),
        DType::Q6_K => kg::dot_q6_k(nk, w, x),
        _ => return None,
    })
}

/// The AVX2 dot product of whole rows of `k` elements, or `None` for a type without
/// kernels.
///
/// # Safety
/// AVX2/FMA/F16C available; `w` and `x` point at whole rows of `k` elements of `wtype` and
/// `vec_dot_type(wtype)`.
#[cfg(target_arch = "x86_64")]
unsafe fn x86_dot(wtype: DType, k: usize, w: *const u8, x: *const u8) -> Option<f32> {
    use crate::k_quants::x86 as kx;
    let nb = k / QK;
    let nk = k / QK_K;
    // SAFETY: forwarded caller contract.
    unsafe {
        Some(match wtype {
            DType::F32 => x86::dot_f32(k, w, x),
            DType::F16 => x86::dot_f16(k, w, x),
            DType::BF16 => x86::dot_bf16(k, w, x),
            DType::Q8_0 => x86::dot_q8_0(nb, w, x),
            DType::Q4_0 => x86::dot_q4_0(nb, w, x),
            DType::Q4_1 => x86::dot_block32::<Q4_1>(nb, w, x),
            DType::Q5_0 => x86::dot_block32::<Q5_0>(nb, w, x),
            DType::Q5_1 => x86::dot_block32::<Q5_1>(nb, w, x),
            DType::Q2_K => kx::dot_q2_k(nk, w, x),
            DType::Q3_K => kx::dot_q3_k(nk, w, x),
            DType::Q4_K => kx::dot_q4_k(nk, w, x),
            DType::Q5_K => kx::dot_q5_k(nk, w, x),
            DType::Q6_K => kx::dot_q6_k(nk, w, x),
            _ => return None,
        })
    }
}

/// The NEON dot product of whole rows of `k` elements for the types with NEON kernels (`None` for the others,
/// which take the portable path). `dot` selects the `sdot` kernels.
///
/// # Safety
/// NEON (and dotprod if `dot`) available; `w` and `x` point at whole rows of `k` elements
/// of `wtype` and `vec_dot_type(wtype)`.
#[cfg(target_arch = "aarch64")]
unsafe fn neon_dot(dot: bool, wtype: DType, k: usize, w: *const u8, x: *const u8) -> Option<f32> {
    if dot {
        // SAFETY: forwarded; dotprod checked by the caller.
        unsafe { vec_dot_impl::<true>(wtype, k, w, x) }
    } else {
        // SAFETY: forwarded.
        unsafe { vec_dot_impl::<false>(wtype, k, w, x) }
    }
}

/// [`neon_dot`] for one choice of integer product.
///
/// # Safety
/// As [`neon_dot`].
#[inline]
#[cfg(target_arch = "aarch64")]
unsafe fn vec_dot_impl<const DOT: bool>(
    wtype: DType,
    k: usize,
    w: *const u8,
    x: *const u8,
) -> Option<f32> {
    use crate::k_quants::aarch64 as kn;

    use self::aarch64::{dot_bf16, dot_block32, dot_f16, dot_f32, dot_q4_0, dot_q8_0};
    let nb = k / QK;
    let nk = k / crate::k_quants::QK_K;
    // SAFETY: forwarded caller contract.
    unsafe {
        Some(match wtype {
            DType::F32 => dot_f32(k, w, x),
            DType::F16 => dot_f16(k, w, x),
            DType::BF16 => dot_bf16(k, w, x),
            DType::Q8_0 => dot_q8_0::<DOT>(nb, w, x),
            DType::Q4_0 => dot_q4_0::<DOT>(nb, w, x),
            DType::Q4_1 => dot_block32::<Q4_1, DOT>(nb, w, x),
            DType::Q5_0 => dot_block32::<Q5_0, DOT>(nb, w, x),
            DType::Q5_1 => dot_block32::<Q5_1, DOT>(nb, w, x),
            DType::Q2_K => kn::dot_q2_k::<DOT>(nk, w, x),
            DType::Q3_K => kn::dot_q3_k::<DOT>(nk, w, x),
            DType::Q4_K => kn::dot_q4_k::<DOT>(nk, w, x),
            DType::Q5_K => kn::dot_q5_k::<DOT>(nk, w, x),
            DType::Q6_K => kn::dot_q6_k::<DOT>(nk, w, x),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vec_dot_types_follow_ggml() {
        assert_eq!(vec_dot_type(DType::Q4_0), DType::Q8_0);
        assert_eq!(vec_dot_type(DType::Q8_0), DType::Q8_0);
        assert_eq!(vec_dot_type(DType::F16), DType::F16);
        assert_eq!(vec_dot_type(DType::F32), DType::F32);
        assert_eq!(vec_dot_type(DType::Q4_1), DType::Q8_1);
        assert_eq!(vec_dot_type(DType::Q5_0), DType::Q8_0);
        assert_eq!(vec_dot_type(DType::Q5_1), DType::Q8_1);
        assert_eq!(vec_dot_type(DType::BF16), DType::BF16);
    }

    #[test]
    fn convert_checks_lengths() {
        let mut dst = [0u8; 33];
        assert!(convert_activations(DType::Q8_0, &[0.0; 32], &mut dst).is_err());
        assert!(convert_activations(DType::Q8_0, &[0.0; 31], &mut [0u8; 34]).is_err());
        assert!(convert_activations(DType::Q4_0, &[0.0; 32], &mut [0u8; 34]).is_err());
    }

    #[test]
    fn f16_dot_by_hand() {
        // k = 35: 32 elements through the vector path, 3 leftovers. w = 1, x = 0.5 -> 17.5.
        let w: Vec<u8> = (0..35)
            .flat_map(|_| half::f16::from_f32(1.0).to_le_bytes())
            .collect();
        let x: Vec<u8> = (0..35)
            .flat_map(|_| half::f16::from_f32(0.5).to_le_bytes())
            .collect();
        for b in Backend::supported() {
            assert_eq!(vec_dot_with(b, DType::F16, 35, &w, &x).unwrap(), 17.5);
        }
    }
}
