//! ggml's Q8_0 and Q4_0 blocks: layout, quantization and dequantization.
//!
//! Both block types are byte-compatible with ggml (`block_q8_0`, `block_q4_0`): a
//! little-endian f16 scale followed by the quantized values. The byte-level functions
//! accept rows at any alignment (GGUF only guarantees 32-byte alignment of a tensor, and
//! rows of 34- or 18-byte blocks are not even 4-byte aligned).

use bytemuck::{Pod, Zeroable};
use common::engine_abi::DType;
use half::f16;

use crate::error::KernelError;
use crate::f16::{f16_bytes_to_f32_row, f32_row_to_f16_bytes, read_f16};
use crate::legacy::block32;
pub use crate::legacy::block32::QK;
use crate::legacy::{bf16, q4_1::Q4_1, q5_0::Q5_0, q5_1::Q5_1, q8_1};
use crate::shape::check_row;

/// One ggml Q8_0 block: `x[i] = d * qs[i]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ8_0 {
    /// Scale.
    pub d: f16,
    /// Quantized values.
    pub qs: [i8; QK],
}

/// One ggml Q4_0 block: byte `j` holds element `j` in its low nibble and element `j + 16`
/// in its high nibble; `x[i] = d * (nibble - 8)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct BlockQ4_0 {
    /// Scale.
    pub d: f16,
    /// Packed 4-bit values.
    pub qs: [u8; QK / 2],
}

const _: () = assert!(size_of::<BlockQ8_0>() == DType::Q8_0.block_bytes());
const _: () = assert!(size_of::<BlockQ4_0>() == DType::Q4_0.block_bytes());

/// Number of blocks in a row of `n` elements, or an error if `n` is not a multiple of [`QK`].
fn block_count(dtype: DType, n: usize) -> Result<usize, KernelError> {
    if !n.is_multiple_of(QK) {
        return Err(KernelError::RowNotBlockAligned { dtype, k: n });
    }
    Ok(n / QK)
}

fn check_blocks(what: &'static str, have: usize, need: usize) -> Result<(), KernelError> {
    if have != need {
        return Err(KernelError::LengthMismatch {
            what,
            left: have,
            right: need,
        });
    }
    Ok(())
}

/// Quantizes one block of 32 values with ggml's reference Q8_0 algorithm.
fn quantize_block_q8_0_ref(x: &[f32]) -> BlockQ8_0 {
    let mut amax = 0.0f32;
    for &v in x {
        let a = v.abs();
        amax = if amax > a { amax } else { a };
    }
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut qs = [0i8; QK];
    for (q, &v) in qs.iter_mut().zip(x) {
        // C `roundf`: half-way cases away from zero.
        *q = (v * id).round() as i8;
    }
    BlockQ8_0 {
        d: f16::from_f32(d),
        qs,
    }
}

/// Quantizes one block of 32 values like ggml's x86 AVX2 `quantize_row_q8_0` (the code
/// llama.cpp's CPU backend runs on activations): scale `127 / amax` and ties-to-even.
pub(crate) fn quantize_block_q8_0_avx2_semantics(x: &[f32], out: &mut [u8]) {
    let mut amax = 0.0f32;
    for &v in x {
        // maxps returns its second operand when the first is not greater; amax starts at the
        // first lane in ggml, but for finite input max is order-independent.
        amax = amax.max(v.abs());
    }
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    out[0..2].copy_from_slice(&f16::from_f32(d).to_le_bytes());
    for (q, &v) in out[2..2 + QK].iter_mut().zip(x) {
        *q = (v * id).round_ties_even() as i8 as u8;
    }
}

/// Quantizes one block of 32 values with ggml's reference Q4_0 algorithm.
fn quantize_block_q4_0_ref(x: &[f32]) -> BlockQ4_0 {
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    let d = max / -8.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut qs = [0u8; QK / 2];
    for (j, q) in qs.iter_mut().enumerate() {
        let x0 = x[j] * id;
        let x1 = x[QK / 2 + j] * id;
        // C `(int8_t)(x + 8.5f)` truncates toward zero; then MIN(15, ...).
        let xi0 = ((x0 + 8.5) as i8).min(15) as u8;
        let xi1 = ((x1 + 8.5) as i8).min(15) as u8;
        *q = xi0 | (xi1 << 4);
    }
    BlockQ4_0 {
        d: f16::from_f32(d),
        qs,
    }
}

/// Quantizes `x` into `y` with ggml's `quantize_row_q8_0_ref` (how GGUF files are made).
pub fn quantize_row_q8_0(x: &[f32], y: &mut [BlockQ8_0]) -> Result<(), KernelError> {
    check_blocks(
        "quantize_row_q8_0 blocks",
        y.len(),
        block_count(DType::Q8_0, x.len())?,
    )?;
    for (block, chunk) in y.iter_mut().zip(x.chunks_exact(QK)) {
        *block = quantize_block_q8_0_ref(chunk);
    }
    Ok(())
}

/// Quantizes `x` into `y` with ggml's `quantize_row_q4_0_ref`.
pub fn quantize_row_q4_0(x: &[f32], y: &mut [BlockQ4_0]) -> Result<(), KernelError> {
    check_blocks(
        "quantize_row_q4_0 blocks",
        y.len(),
        block_count(DType::Q4_0, x.len())?,
    )?;
    for (block, chunk) in y.iter_mut().zip(x.chunks_exact(QK)) {
        *block = quantize_block_q4_0_ref(chunk);
    }
    Ok(())
}

/// Dequantizes Q8_0 blocks into `y` (`32 * x.len()` values).
pub fn dequantize_row_q8_0(x: &[BlockQ8_0], y: &mut [f32]) -> Result<(), KernelError> {
    check_blocks("dequantize_row_q8_0 values", y.len(), x.len() * QK)?;
    for (block, out) in x.iter().zip(y.chunks_exact_mut(QK)) {
        let d = block.d.to_f32();
        for (o, &q) in out.iter_mut().zip(&block.qs) {
            *o = f32::from(q) * d;
        }
    }
    Ok(())
}

/// Dequantizes Q4_0 blocks into `y` (`32 * x.len()` values).
pub fn dequantize_row_q4_0(x: &[BlockQ4_0], y: &mut [f32]) -> Result<(), KernelError> {
    check_blocks("dequantize_row_q4_0 values", y.len(), x.len() * QK)?;
    for (block, out) in x.iter().zip(y.chunks_exact_mut(QK)) {
        dequantize_q4_0_bytes_block(block.d.to_f32(), &block.qs, out);
    }
    Ok(())
}

fn dequantize_q4_0_bytes_block(d: f32, qs: &[u8], out: &mut [f32]) {
    for j in 0..QK / 2 {
        let x0 = i32::from(qs[j] & 0x0f) - 8;
        let x1 = i32::from(qs[j] >> 4) - 8;
        out[j] = x0 as f32 * d;
        out[j + QK / 2] = x1 as f32 * d;
    }
}

/// Views blocks as their ggml bytes.
pub fn q8_0_as_bytes(blocks: &[BlockQ8_0]) -> &[u8] {
    bytemuck::cast_slice(blocks)
}

/// Views blocks as their ggml bytes.
pub fn q4_0_as_bytes(blocks: &[BlockQ4_0]) -> &[u8] {
    bytemuck::cast_slice(blocks)
}

/// Copies ggml bytes (any alignment) into blocks; `bytes.len()` must be a multiple of 34.
pub fn q8_0_from_bytes(bytes: &[u8]) -> Result<Vec<BlockQ8_0>, KernelError> {
    blocks_from_bytes(bytes, DType::Q8_0)
}

/// Copies ggml bytes (any alignment) into blocks; `bytes.len()` must be a multiple of 18.
pub fn q4_0_from_bytes(bytes: &[u8]) -> Result<Vec<BlockQ4_0>, KernelError> {
    blocks_from_bytes(bytes, DType::Q4_0)
}

fn blocks_from_bytes<T: Pod>(bytes: &[u8], dtype: DType) -> Result<Vec<T>, KernelError> {
    let size = size_of::<T>();
    if !bytes.len().is_multiple_of(size) {
        return Err(KernelError::RowNotBlockAligned {
            dtype,
            k: bytes.len(),
        });
    }
    Ok(bytes
        .chunks_exact(size)
        .map(bytemuck::pod_read_unaligned)
        .collect())
}

/// Converts one row of `dst.len()` elements of type `dtype`, stored as ggml bytes at any
/// alignment, into `f32` (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q8_1 and the
/// K-quants).
pub fn dequantize_row(dtype: DType, src: &[u8], dst: &mut [f32]) -> Result<(), KernelError> {
    let k = dst.len();
    check_row("dequantize_row source", dtype, k, src)?;
    match dtype {
        DType::F32 => {
            for (o, b) in dst.iter_mut().zip(src.chunks_exact(4)) {
                *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        DType::F16 => f16_bytes_to_f32_row(src, dst),
        DType::Q8_0 => {
            for (b, out) in src.chunks_exact(34).zip(dst.chunks_exact_mut(QK)) {
                let d = read_f16(b, 0);
                for (o, &q) in out.iter_mut().zip(&b[2..34]) {
                    *o = f32::from(q as i8) * d;
                }
            }
        }
        DType::Q4_0 => {
            for (b, out) in src.chunks_exact(18).zip(dst.chunks_exact_mut(QK)) {
                dequantize_q4_0_bytes_block(read_f16(b, 0), &b[2..18], out);
            }
        }
        DType::Q2_K | DType::Q3_K | DType::Q4_K | DType::Q5_K | DType::Q6_K | DType::Q8_K => {
            crate::k_quants::dequantize_row(dtype, src, dst);
        }
        DType::Q4_1 => block32::dequantize_row::<Q4_1>(src, dst),
        DType::Q5_0 => block32::dequantize_row::<Q5_0>(src, dst),
        DType::Q5_1 => block32::dequantize_row::<Q5_1>(src, dst),
        DType::Q8_1 => q8_1::dequantize_row(src, dst),
        DType::BF16 => bf16::bytes_to_f32_row(src, dst),
        _ => {
            return Err(KernelError::UnsupportedType {
                dtype,
                op: "dequantize_row",
            });
        }
    }
    Ok(())
}

/// Converts one row of `f32` values into ggml bytes of `dtype` (F32, F16, BF16, and Q8_0,
/// Q4_0, Q4_1, Q5_0, Q5_1 and the K-quants with ggml's reference quantizers) — e.g. for
/// writing a KV cache or a quantized file.
pub fn quantize_row(dtype: DType, src: &[f32], dst: &mut [u8]) -> Result<(), KernelError> {
    let k = src.len();
    check_row("quantize_row destination", dtype, k, dst)?;
    match dtype {
        DType::F32 => {
            for (x, o) in src.iter().zip(dst.chunks_exact_mut(4)) {
                o.copy_from_slice(&x.to_le_bytes());
            }
        }
        DType::F16 => f32_row_to_f16_bytes(src, dst),
        DType::Q8_0 => {
            for (x, o) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(34)) {
                o.copy_from_slice(bytemuck::bytes_of(&quantize_block_q8_0_ref(x)));
            }
        }
        DType::Q4_0 => {
            for (x, o) in src.chunks_exact(QK).zip(dst.chunks_exact_mut(18)) {
                o.copy_from_slice(bytemuck::bytes_of(&quantize_block_q4_0_ref(x)));
            }
        }
        DType::Q2_K | DType::Q3_K | DType::Q4_K | DType::Q5_K | DType::Q6_K | DType::Q8_K => {
            crate::k_quants::quantize_row(dtype, src, dst);
        }
        DType::Q4_1 => block32::quantize_row::<Q4_1>(src, dst),
        DType::Q5_0 => block32::quantize_row::<Q5_0>(src, dst),
        DType::Q5_1 => block32::quantize_row::<Q5_1>(src, dst),
        DType::BF16 => bf16::f32_row_to_bytes(src, dst),
        _ => {
            return Err(KernelError::UnsupportedType {
                dtype,
                op: "quantize_row",
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q8_0_block_bytes_by_hand() {
        // x[i] = i - 16 for i in 0..32: amax = 16, d = 16/127, id = 127/16 = 7.9375 (exact).
        // q[i] = roundf((i - 16) * 7.9375); e.g. i=0 -> -127, i=1 -> roundf(-119.0625) = -119,
        // i=17 -> roundf(7.9375) = 8, i=31 -> roundf(119.0625) = 119.
        let x: Vec<f32> = (0..32).map(|i| i as f32 - 16.0).collect();
        let mut y = [BlockQ8_0::zeroed()];
        quantize_row_q8_0(&x, &mut y).unwrap();
        let bytes = q8_0_as_bytes(&y);
        assert_eq!(bytes.len(), 34);
        let d = f16::from_f32(16.0 / 127.0);
        assert_eq!(&bytes[0..2], &d.to_le_bytes());
        let expected: Vec<i8> = (0..32)
            .map(|i| {
                let v = (i as f64 - 16.0) * 7.9375;
                (v.signum() * (v.abs() + 0.5).floor()) as i8
            })
            .collect();
        assert_eq!(y[0].qs.to_vec(), expected);
        assert_eq!(y[0].qs[0], -127);
        assert_eq!(y[0].qs[1], -119);
        assert_eq!(y[0].qs[17], 8);
        assert_eq!(bytes[2], (-127i8) as u8);
    }

    #[test]
    fn q8_0_ties_differ_between_reference_and_avx2_semantics() {
        // amax = 127 gives id = 1 in both quantizers; 2.5 is a tie.
        let mut x = [0.0f32; 32];
        x[0] = 127.0;
        x[1] = 2.5;
        x[2] = -3.5;
        let mut r = [BlockQ8_0::zeroed()];
        quantize_row_q8_0(&x, &mut r).unwrap();
        assert_eq!((r[0].qs[1], r[0].qs[2]), (3, -4)); // roundf: away from zero
        let mut a = [0u8; 34];
        quantize_block_q8_0_avx2_semantics(&x, &mut a);
        assert_eq!((a[3] as i8, a[4] as i8), (2, -4)); // ties to even
        assert_eq!(a[2] as i8, 127);
    }

    #[test]
    fn q4_0_block_bytes_by_hand() {
        // max-magnitude value is -8 -> d = -8 / -8 = 1, id = 1; q = min(15, trunc(x + 8.5)).
        let mut x = [0.0f32; 32];
        x[0] = -8.0; // -> 0
        x[1] = 7.0; // -> 15
        x[2] = 1.4; // trunc(9.9) = 9
        x[16] = 3.0; // high nibble of byte 0: trunc(11.5) = 11
        x[17] = -0.6; // trunc(7.9) = 7
        let mut y = [BlockQ4_0::zeroed()];
        quantize_row_q4_0(&x, &mut y).unwrap();
        let bytes = q4_0_as_bytes(&y);
        assert_eq!(&bytes[0..2], &[0x00, 0x3c]); // f16 1.0
        assert_eq!(bytes[2], 11 << 4); // low nibble 0, high nibble 11
        assert_eq!(bytes[3], 15 | (7 << 4));
        assert_eq!(bytes[4], 9 | (8 << 4)); // x[18] = 0 -> trunc(8.5) = 8
        let mut back = [0f32; 32];
        dequantize_row_q4_0(&y, &mut back).unwrap();
        assert_eq!(&back[0..3], &[-8.0, 7.0, 1.0]);
        assert_eq!(&back[16..18], &[3.0, -1.0]);
    }

    #[test]
    fn q4_0_positive_max_clamps_to_15() {
        // max-magnitude value is +8 -> d = -1, so +8 maps to trunc(-8 + 8.5) = 0 and
        // -8 maps to trunc(16.5) = 16, clamped to 15.
        let mut x = [0.0f32; 32];
        x[0] = 8.0;
        x[1] = -8.0;
        let mut y = [BlockQ4_0::zeroed()];
        quantize_row_q4_0(&x, &mut y).unwrap();
        assert_eq!(y[0].d.to_f32(), -1.0);
        assert_eq!(y[0].qs[0] & 0x0f, 0);
        assert_eq!(y[0].qs[1] & 0x0f, 15);
    }

    #[test]
    fn zero_block_quantizes_to_zero() {
        let x = [0.0f32; 32];
        let mut y8 = [BlockQ8_0::zeroed()];
        quantize_row_q8_0(&x, &mut y8).unwrap();
        assert_eq!(y8[0], BlockQ8_0::zeroed());
        let mut y4 = [BlockQ4_0::zeroed()];
        quantize_row_q4_0(&x, &mut y4).unwrap();
        assert_eq!(y4[0].qs, [0x88; 16]);
    }

    #[test]
    fn byte_functions_accept_unaligned_rows() {
        let x: Vec<f32> = (0..64)
            .map(|i| ((i * 37 % 19) as f32 - 9.0) * 0.25)
            .collect();
        let mut storage = [0u8; 1 + 68];
        let row = &mut storage[1..];
        quantize_row(DType::Q8_0, &x, row).unwrap();
        let blocks = q8_0_from_bytes(row).unwrap();
        let mut y1 = vec![0f32; 64];
        let mut y2 = vec![0f32; 64];
        dequantize_row(DType::Q8_0, row, &mut y1).unwrap();
        dequantize_row_q8_0(&blocks, &mut y2).unwrap();
        assert_eq!(y1, y2);
    }

    #[test]
    fn length_errors() {
        let mut y = [BlockQ8_0::zeroed()];
        assert!(matches!(
            quantize_row_q8_0(&[0.0; 33], &mut y),
            Err(KernelError::RowNotBlockAligned { .. })
        ));
        assert!(matches!(
            quantize_row_q8_0(&[0.0; 64], &mut y),
            Err(KernelError::LengthMismatch { .. })
        ));
        let mut out = [0f32; 32];
        assert!(matches!(
            dequantize_row(DType::Q4_0, &[0u8; 17], &mut out),
            Err(KernelError::BufferTooSmall { .. })
        ));
        assert!(q4_0_from_bytes(&[0u8; 19]).is_err());
    }
}
