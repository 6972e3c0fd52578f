//! Agreement tests: the SIMD backends (AVX2; NEON, NEON + dotprod) against the portable
//! implementation (bit for bit), both against a
//! dequantize-then-f64 reference (within the rounding error of an `f32` sum), quantization
//! error bounds, and strided/unaligned/partial-range matrix products.

mod backends;
mod matrix;

use common::engine_abi::DType;
use engine_kernels::quant::{
    BlockQ4_0, BlockQ8_0, dequantize_row_q4_0, dequantize_row_q8_0, quantize_row_q4_0,
    quantize_row_q8_0,
};
use engine_kernels::{
    Backend, MatMulArgs, convert_activations, convert_activations_with, matmul_with, quant,
    vec_dot_type, vec_dot_with,
};
use matrix::{Matrix, dequant, make_matrix, random_row};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const WEIGHT_TYPES: [DType; 8] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::Q8_0,
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
];

/// [`dequant`] widened to `f64` for the references.
fn dequant_f64(dtype: DType, row: &[u8], k: usize) -> Vec<f64> {
    dequant(dtype, row, k).into_iter().map(f64::from).collect()
}

/// Reference dot product in f64 and the sum of |products| that bounds its rounding error.
///
/// Against Q8_1 activations, ggml multiplies a weight block's minimum `m` with the
/// block's stored `s = f16(d * Σ q)`, not with `d * Σ q`: the reference does the same, so
/// it adds `m * (s - d * Σ q)` per block to the dequantized product.
fn reference(wtype: DType, w: &[u8], x: &[u8], k: usize) -> (f64, f64) {
    let a = dequant_f64(wtype, w, k);
    let b = dequant_f64(vec_dot_type(wtype), x, k);
    let mut dot: f64 = a.iter().zip(&b).map(|(p, q)| p * q).sum();
    let mut abs: f64 = a.iter().zip(&b).map(|(p, q)| (p * q).abs()).sum();
    if vec_dot_type(wtype) == DType::Q8_1 {
        let f16_at = |bytes: &[u8], at: usize| {
            f64::from(half::f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32())
        };
        let wb = wtype.block_bytes();
        for blk in 0..k / 32 {
            let (wblock, xblock) = (&w[blk * wb..], &x[blk * 36..(blk + 1) * 36]);
            let m = f16_at(wblock, 2);
            let (d, s) = (f16_at(xblock, 0), f16_at(xblock, 2));
            let sum_q: f64 = xblock[4..].iter().map(|&q| f64::from(q as i8)).sum();
            dot += m * (s - d * sum_q);
            abs += (m * s).abs();
        }
    }
    (dot, abs)
}

/// Rounding error bound of an `f32` sum of `k` products (plus the f32 product of two f16
/// block scales for quantized types): a generous `(k + 8) * 2^-23` relative to sum |products|.
fn tolerance(k: usize, abs: f64) -> f64 {
    (k as f64 + 8.0) * f64::powi(2.0, -23) * abs + 1e-30
}

#[test]
fn quantization_error_bounds() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for _ in 0..50 {
        let x = random_row(&mut rng, 128);
        let mut q8 = vec![
            BlockQ8_0 {
                d: half::f16::ZERO,
                qs: [0; 32]
            };
            4
        ];
        quantize_row_q8_0(&x, &mut q8).unwrap();
        let mut y = vec![0f32; 128];
        dequantize_row_q8_0(&q8, &mut y).unwrap();
        for (b, chunk) in x.chunks(32).enumerate() {
            let amax = chunk.iter().fold(0f32, |m, v| m.max(v.abs()));
            // half a quantization step, plus the f16 rounding of the scale (2^-11 relative).
            let bound = amax / 127.0 * 0.5 + amax * 2f32.powi(-10);
            for j in 0..32 {
                assert!(
                    (x[32 * b + j] - y[32 * b + j]).abs() <= bound,
                    "q8_0 block {b} elem {j}"
                );
            }
        }
        let mut q4 = vec![
            BlockQ4_0 {
                d: half::f16::ZERO,
                qs: [0; 16]
            };
            4
        ];
        quantize_row_q4_0(&x, &mut q4).unwrap();
        dequantize_row_q4_0(&q4, &mut y).unwrap();
        for (b, chunk) in x.chunks(32).enumerate() {
            let amax = chunk.iter().fold(0f32, |m, v| m.max(v.abs()));
            // one step of amax / 8 (the clamped end of the range), plus scale rounding.
            let bound = amax / 8.0 + amax * 2f32.powi(-9);
            for j in 0..32 {
                assert!(
                    (x[32 * b + j] - y[32 * b + j]).abs() <= bound,
                    "q4_0 block {b} elem {j}"
                );
            }
        }
    }
}

/// Largest |x - dequant(quant(x))| of a block of `dtype` quantized with its reference
/// quantizer: half a step for the rounding quantizers (`_1`: `(max - min) / levels`,
/// `_0` with `d = max / -half`: a full step at the clamped end), plus the f16 rounding of
/// the scale and the minimum.
fn block_error_bound(dtype: DType, chunk: &[f32]) -> f32 {
    let amax = chunk.iter().fold(0f32, |m, v| m.max(v.abs()));
    let (min, max) = chunk
        .iter()
        .fold((f32::MAX, f32::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let f16_rel = 2f32.powi(-10);
    match dtype {
        DType::Q4_1 => (max - min) / 15.0 * (0.5 + 16.0 * f16_rel) + min.abs() * f16_rel,
        DType::Q5_1 => (max - min) / 31.0 * (0.5 + 32.0 * f16_rel) + min.abs() * f16_rel,
        DType::Q5_0 => amax / 16.0 + amax * 2.0 * f16_rel,
        DType::BF16 => amax * 2f32.powi(-8),
        other => panic!("no bound for {other:?}"),
    }
}

#[test]
fn legacy_quantization_error_bounds() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for dtype in [DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::BF16] {
        for _ in 0..50 {
            let mut x = random_row(&mut rng, 128);
            // a constant block and an all-positive block
            x[32..64].fill(0.3);
            for v in &mut x[64..96] {
                *v = v.abs() + 2.0;
            }
            let mut bytes = vec![0u8; dtype.row_bytes(128).unwrap()];
            quant::quantize_row(dtype, &x, &mut bytes).unwrap();
            let y = dequant_f64(dtype, &bytes, 128);
            for (b, chunk) in x.chunks(32).enumerate() {
                let bound = f64::from(block_error_bound(dtype, chunk));
                for j in 0..32 {
                    let e = (f64::from(x[32 * b + j]) - y[32 * b + j]).abs();
                    assert!(
                        e <= bound,
                        "{dtype:?} block {b} elem {j}: error {e} > {bound}"
                    );
                }
            }
        }
    }
}

#[test]
fn q8_1_activations_carry_their_scaled_sum() {
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let x = random_row(&mut rng, 256);
    let mut bytes = vec![0u8; 8 * 36];
    convert_activations(DType::Q8_1, &x, &mut bytes).unwrap();
    let y = dequant_f64(DType::Q8_1, &bytes, 256);
    for (b, chunk) in x.chunks(32).enumerate() {
        let block = &bytes[36 * b..36 * (b + 1)];
        let amax = chunk.iter().fold(0f32, |m, v| m.max(v.abs()));
        let bound = f64::from(amax / 127.0 * 0.5 + amax * 2f32.powi(-10));
        for j in 0..32 {
            assert!((f64::from(x[32 * b + j]) - y[32 * b + j]).abs() <= bound);
        }
        // s = f16(d * Σ q): within f16 rounding of the sum of the dequantized values.
        let s = f64::from(half::f16::from_le_bytes([block[2], block[3]]).to_f32());
        let sum: f64 = y[32 * b..32 * (b + 1)].iter().sum();
        assert!(
            (s - sum).abs() <= sum.abs() * 2f64.powi(-10) + 1e-30,
            "block {b}"
        );
        // the same quants as Q8_0's activation quantizer
        let mut q8_0 = [0u8; 34];
        convert_activations(DType::Q8_0, chunk, &mut q8_0).unwrap();
        assert_eq!(&q8_0[2..], &block[4..]);
        assert_eq!(&q8_0[..2], &block[..2]);
    }
}

#[test]
fn activation_quantization_round_trip() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let x = random_row(&mut rng, 256);
    let mut bytes = vec![0u8; 8 * 34];
    convert_activations(DType::Q8_0, &x, &mut bytes).unwrap();
    let y = dequant_f64(DType::Q8_0, &bytes, 256);
    for (b, chunk) in x.chunks(32).enumerate() {
        let amax = chunk.iter().fold(0f32, |m, v| m.max(v.abs()));
        let bound = f64::from(amax / 127.0 * 0.5 + amax * 2f32.powi(-10));
        for j in 0..32 {
            assert!((f64::from(x[32 * b + j]) - y[32 * b + j]).abs() <= bound);
        }
        // the largest magnitude maps to +-127
        assert!(
            bytes[34 * b + 2..34 * b + 34]
                .iter()
                .any(|&q| (q as i8).abs() == 127)
        );
    }
}

#[test]
fn dots_agree_across_backends_and_with_reference() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for wtype in WEIGHT_TYPES {
        let ks: &[usize] = if wtype.block_len() == 32 {
            &[32, 64, 96, 2048]
        } else {
            &[1, 7, 32, 40, 33, 100, 2048]
        };
        for &k in ks {
            for trial in 0..5 {
                let w = make_matrix(&mut rng, wtype, true, 1, k, 0, trial % 3);
                let x = make_matrix(&mut rng, vec_dot_type(wtype), false, 1, k, 0, trial % 2);
                let wr = w.row(0, wtype.row_bytes(k).unwrap());
                let xr = x.row(0, vec_dot_type(wtype).row_bytes(k).unwrap());
                let g = vec_dot_with(Backend::Generic, wtype, k, wr, xr).unwrap();
                let (want, abs) = reference(wtype, wr, xr, k);
                assert!(
                    (f64::from(g) - want).abs() <= tolerance(k, abs),
                    "{wtype:?} k={k}: {g} vs {want}"
                );
                for b in backends::simd() {
                    let v = vec_dot_with(b, wtype, k, wr, xr).unwrap();
                    assert_eq!(
                        v.to_bits(),
                        g.to_bits(),
                        "{wtype:?} k={k} {b:?}: {v} vs generic {g}"
                    );
                }
            }
        }
    }
}

/// The product, as rows `m` × `y_stride` of outputs, for one weight layout.
struct Product<'a> {
    wtype: DType,
    /// Weights in row-major layout (for the reference).
    w: &'a Matrix,
    /// Activations (`vec_dot_type(wtype)` rows).
    x: &'a Matrix,
    k: usize,
    m: usize,
    n_range: std::ops::Range<usize>,
    y_stride: usize,
}

impl Product<'_> {
    /// Runs `compute(backend, y)` for every supported backend into an output filled with
    /// `sentinel` and checks: nothing written outside `n_range`, every output within
    /// tolerance of the f64 reference, and all backends bit-identical. Returns the first
    /// backend's output.
    fn check_backends(&self, sentinel: f32, compute: impl Fn(Backend, *mut f32)) -> Vec<f32> {
        let Product {
            wtype,
            w,
            x,
            k,
            m,
            ref n_range,
            y_stride,
        } = *self;
        let outs: Vec<(Backend, Vec<f32>)> = backends::all()
            .into_iter()
            .map(|b| {
                let mut y = vec![sentinel; m * y_stride];
                compute(b, y.as_mut_ptr());
                (b, y)
            })
            .collect();
        let (_, first) = &outs[0];
        for i in 0..m {
            for n in 0..y_stride {
                let v = first[i * y_stride + n];
                if !n_range.contains(&n) {
                    assert_eq!(
                        v, sentinel,
                        "{wtype:?} wrote outside its range at ({i},{n})"
                    );
                    continue;
                }
                let wr = w.row(n, wtype.row_bytes(k).unwrap());
                let xr = x.row(i, vec_dot_type(wtype).row_bytes(k).unwrap());
                let (want, abs) = reference(wtype, wr, xr, k);
                assert!(
                    (f64::from(v) - want).abs() <= tolerance(k, abs),
                    "{wtype:?} k={k} m={m} ({i},{n}): {v} vs {want}"
                );
                for (b, other) in &outs[1..] {
                    let o = other[i * y_stride + n];
                    assert_eq!(
                        o.to_bits(),
                        v.to_bits(),
                        "{wtype:?} k={k} m={m} ({i},{n}) {b:?}: {o} vs {v}"
                    );
                }
            }
        }
        outs.into_iter().next().map(|(_, y)| y).unwrap_or_default()
    }
}

#[test]
fn matmul_agrees_across_backends_and_with_reference() {
    const SENTINEL: f32 = 12345.5;
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let n_total = 19;
    let n_range = 3..14;
    for wtype in WEIGHT_TYPES {
        // k % 8 != 0 exercises the vec_dot fallback of the float paths.
        // 24: four short rows at a time (m = 1); 2048 + 64 crosses the float tiles' K
        // block (sums of two blocks added).
        let ks: &[usize] = if wtype.block_len() == 32 {
            &[64, 160]
        } else {
            &[64, 72, 36, 24, 2112]
        };
        for &k in ks {
            for m in [1usize, 2, 3, 5, 8, 33] {
                let w = make_matrix(&mut rng, wtype, true, n_total, k, 6, 1);
                let x = make_matrix(&mut rng, vec_dot_type(wtype), false, m, k, 2, 3);
                let y_stride = n_total + 3;
                let product = Product {
                    wtype,
                    w: &w,
                    x: &x,
                    k,
                    m,
                    n_range: n_range.clone(),
                    y_stride,
                };
                let y = product.check_backends(SENTINEL, |b, y| {
                    let args = MatMulArgs {
                        wtype,
                        w: w.data(),
                        w_stride: w.stride,
                        k,
                        x: x.data(),
                        x_stride: x.stride,
                        m,
                        y,
                        y_stride,
                    };
                    // SAFETY: y holds m rows of y_stride >= n_range.end outputs; one caller.
                    unsafe {
                        matmul_with(b, args, n_range.clone()).unwrap();
                    }
                });
                // Quantized products round exactly like vec_dot for every m; float ones
                // do for a single row.
                if wtype.block_len() == 32 || m == 1 {
                    for i in 0..m {
                        for n in n_range.clone() {
                            let v = y[i * y_stride + n];
                            let wr = w.row(n, wtype.row_bytes(k).unwrap());
                            let xr = x.row(i, vec_dot_type(wtype).row_bytes(k).unwrap());
                            let d = vec_dot_with(Backend::Generic, wtype, k, wr, xr).unwrap();
                            assert_eq!(
                                d.to_bits(),
                                v.to_bits(),
                                "{wtype:?} k={k} m={m} vs vec_dot"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn matmul_split_across_threads_equals_whole() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let (n, k, m) = (37, 128, 7);
    for wtype in WEIGHT_TYPES {
        let w = make_matrix(&mut rng, wtype, true, n, k, 0, 0);
        let x = make_matrix(&mut rng, vec_dot_type(wtype), false, m, k, 0, 0);
        let mut whole = vec![0f32; m * n];
        let mut parts = vec![0f32; m * n];
        let args = |y| MatMulArgs {
            wtype,
            w: w.data(),
            w_stride: w.stride,
            k,
            x: x.data(),
            x_stride: x.stride,
            m,
            y,
            y_stride: n,
        };
        // SAFETY: whole holds m * n outputs; one call.
        unsafe { engine_kernels::matmul(args(whole.as_mut_ptr()), 0..n).unwrap() };
        for ith in 0..3 {
            let r = engine_kernels::split_rows(n, ith, 3);
            // SAFETY: disjoint column ranges of parts, one call at a time.
            unsafe { engine_kernels::matmul(args(parts.as_mut_ptr()), r).unwrap() };
        }
        assert_eq!(whole, parts, "{wtype:?}");
    }
}

#[test]
fn packed_matmul_agrees_across_backends_and_with_reference() {
    use engine_kernels::packed::{PACK_ROWS, matmul_packed_with, pack, packed_len};
    const SENTINEL: f32 = -777.25;
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    let n_total = 32;
    for wtype in [DType::Q8_0, DType::Q4_0] {
        for k in [32usize, 96, 256] {
            let w = make_matrix(&mut rng, wtype, true, n_total, k, 5, 3);
            let mut packed = vec![0u8; packed_len(wtype, k, n_total).unwrap()];
            pack(wtype, k, n_total, w.data(), w.stride, &mut packed).unwrap();
            for m in [1usize, 2, 3, 4, 5, 9] {
                let x = make_matrix(&mut rng, DType::Q8_0, false, m, k, 2, 1);
                let n_range = PACK_ROWS..3 * PACK_ROWS;
                let y_stride = n_total + 1;
                let product = Product {
                    wtype,
                    w: &w,
                    x: &x,
                    k,
                    m,
                    n_range: n_range.clone(),
                    y_stride,
                };
                product.check_backends(SENTINEL, |b, y| {
                    let args = MatMulArgs {
                        wtype,
                        w: &packed,
                        w_stride: 0,
                        k,
                        x: x.data(),
                        x_stride: x.stride,
                        m,
                        y,
                        y_stride,
                    };
                    // SAFETY: y holds m rows of y_stride > n_range.end outputs; one caller.
                    unsafe {
                        matmul_packed_with(b, args, n_range.clone()).unwrap();
                    }
                });
            }
            // A range that does not start on a group is refused.
            let x = make_matrix(&mut rng, DType::Q8_0, false, 1, k, 0, 0);
            let mut y = vec![0f32; n_total];
            let args = MatMulArgs {
                wtype,
                w: &packed,
                w_stride: 0,
                k,
                x: x.data(),
                x_stride: x.stride,
                m: 1,
                y: y.as_mut_ptr(),
                y_stride: n_total,
            };
            // SAFETY: the call fails before writing.
            let err = unsafe { engine_kernels::packed::matmul_packed(args, 4..16) };
            assert!(err.is_err());
        }
    }
}

#[test]
fn activation_conversion_agrees_across_backends() {
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    for dtype in [
        DType::Q8_0,
        DType::Q8_1,
        DType::Q8_K,
        DType::F16,
        DType::BF16,
        DType::F32,
    ] {
        for k in [256usize, 1024] {
            let mut x = random_row(&mut rng, k);
            // A zero block, a block with amax 127 (id = 1) holding ties, a constant block.
            x[0..32].fill(0.0);
            x[32] = 127.0;
            x[33] = 2.5;
            x[34] = -3.5;
            x[35] = -0.5;
            x[64..96].fill(-0.75);
            if dtype == DType::F16 {
                // Overflow, a subnormal half, a tie, a quiet NaN with payload, -0.
                x[100] = 65520.0;
                x[101] = 1e-6;
                x[102] = 1.0 + f32::powi(2.0, -11);
                x[103] = f32::from_bits(0x7fc1_2345);
                x[104] = -0.0;
            }
            let row = dtype.row_bytes(k).unwrap();
            let mut want = vec![0u8; row];
            convert_activations_with(Backend::Generic, dtype, &x, &mut want).unwrap();
            for b in backends::simd() {
                let mut got = vec![0xa5u8; row];
                convert_activations_with(b, dtype, &x, &mut got).unwrap();
                let first = got.iter().zip(&want).position(|(g, w)| g != w);
                assert_eq!(first, None, "{dtype:?} k={k} {b:?}: first differing byte");
            }
        }
    }
}
