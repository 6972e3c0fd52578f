//! Dot products of one weight row with one activation row, as ggml's `vec_dot` computes them,
//! and the conversion of `f32` activations to the type each weight type is multiplied with.

pub(crate) mod generic;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

use common::engine_abi::DType;

use crate::backend::Backend;
use crate::error::KernelError;
use crate::f16::f32_row_to_f16_bytes;
use crate::legacy::q4_1::Q4_1;
use crate::legacy::q5_0::Q5_0;
use crate::legacy::q5_1::Q5_1;
use crate::legacy::{self, bf16, q8_1};
use crate::quant::{QK, check_row, quantize_block_q8_0_avx2_semantics};

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
    let k = src.len();
    check_row("convert_activations destination", dst_type, k, dst)?;
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
        DType::Q8_K => crate::k_quants::q8_k::quantize_row(src, dst),
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
    let backend = if backend.is_supported() {
        backend
    } else {
        Backend::Generic
    };
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
    let wbytes = wtype
        .row_bytes(k)
        .ok_or(KernelError::RowNotBlockAligned { dtype: wtype, k })?;
    let xbytes = vec_dot_type(wtype)
        .row_bytes(k)
        .ok_or(KernelError::RowNotBlockAligned { dtype: wtype, k })?;
    if crate::k_quants::is_k_weight(wtype) {
        // SAFETY: rows of k elements (whole super-blocks) and a supported backend (caller).
        let v =
            unsafe { crate::k_quants::vec_dot(backend, wtype, wbytes / wtype.block_bytes(), w, x) };
        return v.ok_or(KernelError::UnsupportedType {
            dtype: wtype,
            op: "vec_dot",
        });
    }
    match backend {
        #[cfg(target_arch = "x86_64")]
        Backend::Avx2 => {
            // SAFETY: the caller guarantees AVX2/FMA/F16C and rows of k elements.
            unsafe {
                Ok(match wtype {
                    DType::F32 => x86::dot_f32(k, w, x),
                    DType::F16 => x86::dot_f16(k, w, x),
                    DType::Q8_0 => x86::dot_q8_0(k / QK, w, x),
                    DType::Q4_0 => x86::dot_q4_0(k / QK, w, x),
                    DType::Q4_1 => legacy::dot_avx2::<Q4_1>(k / QK, w, x),
                    DType::Q5_0 => legacy::dot_avx2::<Q5_0>(k / QK, w, x),
                    DType::Q5_1 => legacy::dot_avx2::<Q5_1>(k / QK, w, x),
                    DType::BF16 => bf16::dot_avx2(k, w, x),
                    _ => {
                        return Err(KernelError::UnsupportedType {
                            dtype: wtype,
                            op: "vec_dot",
                        });
                    }
                })
            }
        }
        _ => {
            // SAFETY: the caller guarantees wbytes / xbytes readable bytes at w / x.
            let (w, x) = unsafe {
                (
                    std::slice::from_raw_parts(w, wbytes),
                    std::slice::from_raw_parts(x, xbytes),
                )
            };
            Ok(match wtype {
                DType::F32 => generic::dot_f32(k, w, x),
                DType::F16 => generic::dot_f16(k, w, x),
                DType::Q8_0 => generic::dot_q8_0(k / QK, w, x),
                DType::Q4_0 => generic::dot_q4_0(k / QK, w, x),
                DType::Q4_1 => legacy::dot::<Q4_1>(k / QK, w, x),
                DType::Q5_0 => legacy::dot::<Q5_0>(k / QK, w, x),
                DType::Q5_1 => legacy::dot::<Q5_1>(k / QK, w, x),
                DType::BF16 => bf16::dot(k, w, x),
                _ => {
                    return Err(KernelError::UnsupportedType {
                        dtype: wtype,
                        op: "vec_dot",
                    });
                }
            })
        }
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
