//! Test matrices shared by the agreement tests: random rows like real weights and
//! activations, quantized into strided, unaligned rows with garbage padding.

use common::engine_abi::DType;
use engine_kernels::{convert_activations, quant};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// `k` values like real weights and activations: mixed magnitudes and signs, an occasional
/// outlier, and some one-sided rows (the affine types' min is then 0).
pub fn random_row(rng: &mut ChaCha8Rng, k: usize) -> Vec<f32> {
    let shift: f32 = if rng.random_range(0..3) == 0 {
        1.0
    } else {
        0.0
    };
    (0..k)
        .map(|_| {
            let v: f32 = rng.random_range(-1.0..1.0) + shift;
            if rng.random_range(0..50) == 0 {
                v * 20.0
            } else {
                v
            }
        })
        .collect()
}

/// Rows of `dtype` at byte `offset + r * stride`, padding bytes garbage.
pub struct Matrix {
    bytes: Vec<u8>,
    offset: usize,
    /// Bytes from one row to the next.
    pub stride: usize,
}

impl Matrix {
    /// The bytes from the first row on.
    pub fn data(&self) -> &[u8] {
        &self.bytes[self.offset..]
    }
    /// The first `len` bytes of row `r`.
    pub fn row(&self, r: usize, len: usize) -> &[u8] {
        &self.data()[r * self.stride..r * self.stride + len]
    }
}

/// `rows` random rows of `k` elements, quantized as weights (`weights`) or converted as
/// activations of `dtype`, each `pad` garbage bytes apart, starting `offset` bytes into
/// the buffer (so rows are unaligned).
pub fn make_matrix(
    rng: &mut ChaCha8Rng,
    dtype: DType,
    weights: bool,
    rows: usize,
    k: usize,
    pad: usize,
    offset: usize,
) -> Matrix {
    let row = dtype.row_bytes(k).unwrap();
    let stride = row + pad;
    let mut bytes: Vec<u8> = (0..offset + rows * stride).map(|_| rng.random()).collect();
    for r in 0..rows {
        let vals = random_row(rng, k);
        let dst = &mut bytes[offset + r * stride..offset + r * stride + row];
        if weights {
            quant::quantize_row(dtype, &vals, dst).unwrap();
        } else {
            convert_activations(dtype, &vals, dst).unwrap();
        }
    }
    Matrix {
        bytes,
        offset,
        stride,
    }
}

/// Row `row` of `dtype` dequantized to `k` floats.
pub fn dequant(dtype: DType, row: &[u8], k: usize) -> Vec<f32> {
    let mut out = vec![0f32; k];
    quant::dequantize_row(dtype, row, &mut out).unwrap();
    out
}
