//! Agreement tests of the K-quants (`Q2_K` … `Q6_K` weights, `Q8_K` activations), like
//! `agreement.rs` for the 32-element types: AVX2 against the portable implementation (bit
//! for bit), both against a dequantize-then-f64 reference, quantization error bounds, and
//! strided/unaligned/partial-range matrix products that round exactly like `vec_dot`.
//! (Bit-exactness against ggml itself is checked by `engine/tests/k_quant_blocks.rs`.)

mod backends;
mod matrix;

use common::engine_abi::DType;
use engine_kernels::k_quants::tiles;
use engine_kernels::{
    Backend, MatMulArgs, convert_activations, matmul_with, quant, vec_dot_type, vec_dot_with,
};
use matrix::{dequant, make_matrix, random_row};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const K_TYPES: [DType; 5] = [
    DType::Q2_K,
    DType::Q3_K,
    DType::Q4_K,
    DType::Q5_K,
    DType::Q6_K,
];
const QK_K: usize = 256;

/// Reference dot product in f64 of the dequantized rows, and the magnitude its `f32`
/// rounding error scales with. The kernels sum exact integer products per super-block and
/// apply the scale and the min separately, so the cancellation between `d·sc·q` and
/// `dmin·m` is not in the products: bound each weight's two terms by 4 × the largest
/// magnitude of its super-block.
fn reference(wtype: DType, w: &[u8], x: &[u8], k: usize) -> (f64, f64) {
    let a = dequant(wtype, w, k);
    let b = dequant(vec_dot_type(wtype), x, k);
    let dot = a
        .iter()
        .zip(&b)
        .map(|(p, q)| f64::from(*p) * f64::from(*q))
        .sum();
    let mut mag = 0f64;
    for (wa, xb) in a.chunks(QK_K).zip(b.chunks(QK_K)) {
        let wmax = wa.iter().fold(0f32, |m, v| m.max(v.abs()));
        mag += 4.0 * f64::from(wmax) * xb.iter().map(|v| f64::from(v.abs())).sum::<f64>();
    }
    (dot, mag)
}

/// `(k + 8) · 2^-23` relative to the magnitude: f32 rounding of the scale products, of
/// the per-super-block conversion of exact integer sums, and of the accumulation.
fn tolerance(k: usize, mag: f64) -> f64 {
    (k as f64 + 8.0) * f64::powi(2.0, -23) * mag + 1e-30
}

#[test]
fn quantization_error_bounds() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for dtype in K_TYPES {
        // Bits per quant: a super-block's range 2·amax over 2^bits levels is one step of
        // about amax / 2^(bits-1); the fitted sub-block scales and mins (themselves
        // quantized to 4 or 6 bits) stay within one such step of every value.
        let bits = match dtype {
            DType::Q2_K => 2,
            DType::Q3_K => 3,
            DType::Q4_K => 4,
            DType::Q5_K => 5,
            _ => 6,
        };
        for _ in 0..20 {
            let x = random_row(&mut rng, 4 * QK_K);
            let mut q = vec![0u8; dtype.row_bytes(x.len()).unwrap()];
            quant::quantize_row(dtype, &x, &mut q).unwrap();
            let y = dequant(dtype, &q, x.len());
            for (b, (xs, ys)) in x.chunks(QK_K).zip(y.chunks(QK_K)).enumerate() {
                let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
                let bound = amax / (1 << (bits - 1)) as f32;
                for (j, (a, c)) in xs.iter().zip(ys).enumerate() {
                    assert!(
                        (a - c).abs() <= bound,
                        "{dtype:?} super-block {b} elem {j}: {a} -> {c} (bound {bound})"
                    );
                }
            }
        }
    }
}

#[test]
fn q8_k_activation_round_trip() {
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let x = random_row(&mut rng, 4 * QK_K);
    let mut bytes = vec![0u8; DType::Q8_K.row_bytes(x.len()).unwrap()];
    convert_activations(DType::Q8_K, &x, &mut bytes).unwrap();
    let y = dequant(DType::Q8_K, &bytes, x.len());
    for (b, (xs, ys)) in x.chunks(QK_K).zip(y.chunks(QK_K)).enumerate() {
        let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
        // half a step of amax / 127, plus f32 rounding of the scale.
        let bound = amax / 127.0 * 0.5 + amax * 2f32.powi(-20);
        for (a, c) in xs.iter().zip(ys) {
            assert!((a - c).abs() <= bound, "block {b}: {a} -> {c}");
        }
        // bsums are the sums of the quants of each 16-group.
        let block = &bytes[292 * b..292 * (b + 1)];
        for g in 0..16 {
            let sum: i32 = block[4 + 16 * g..4 + 16 * (g + 1)]
                .iter()
                .map(|&q| i32::from(q as i8))
                .sum();
            let bsum = i16::from_le_bytes([block[260 + 2 * g], block[261 + 2 * g]]);
            assert_eq!(i32::from(bsum), sum, "block {b} group {g}");
        }
    }
}

#[test]
fn dots_agree_across_backends_and_with_reference() {
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    for wtype in K_TYPES {
        for k in [256usize, 512, 2048, 2304] {
            for trial in 0..5 {
                let w = make_matrix(&mut rng, wtype, true, 1, k, 0, trial % 3);
                let x = make_matrix(&mut rng, vec_dot_type(wtype), false, 1, k, 0, trial % 2);
                let wr = w.row(0, wtype.row_bytes(k).unwrap());
                let xr = x.row(0, vec_dot_type(wtype).row_bytes(k).unwrap());
                let g = vec_dot_with(Backend::Generic, wtype, k, wr, xr).unwrap();
                let (want, mag) = reference(wtype, wr, xr, k);
                assert!(
                    (f64::from(g) - want).abs() <= tolerance(k, mag),
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
        // Rows that are not whole super-blocks are refused.
        let w = vec![0u8; wtype.block_bytes() * 2];
        let x = vec![0u8; 292 * 2];
        assert!(vec_dot_with(Backend::Generic, wtype, 300, &w, &x).is_err());
    }
}

#[test]
fn matmul_agrees_across_backends_with_reference_and_vec_dot() {
    const SENTINEL: f32 = 4321.25;
    let mut rng = ChaCha8Rng::seed_from_u64(14);
    let n_total = 19;
    let n_range = 3..14;
    for wtype in K_TYPES {
        for k in [256usize, 768] {
            for m in [1usize, 2, 3, 5, 7, 8, 9, 33] {
                let w = make_matrix(&mut rng, wtype, true, n_total, k, 6, 1);
                let x = make_matrix(&mut rng, vec_dot_type(wtype), false, m, k, 2, 3);
                let y_stride = n_total + 3;
                let wrow = wtype.row_bytes(k).unwrap();
                let xrow = vec_dot_type(wtype).row_bytes(k).unwrap();
                let mut first: Option<Vec<f32>> = None;
                for b in backends::all() {
                    let mut y = vec![SENTINEL; m * y_stride];
                    let args = MatMulArgs {
                        wtype,
                        w: w.data(),
                        w_stride: w.stride,
                        k,
                        x: x.data(),
                        x_stride: x.stride,
                        m,
                        y: y.as_mut_ptr(),
                        y_stride,
                    };
                    // SAFETY: y holds m rows of y_stride >= n_range.end outputs; one caller.
                    unsafe {
                        matmul_with(b, args, n_range.clone()).unwrap();
                    }
                    for i in 0..m {
                        for n in 0..y_stride {
                            let v = y[i * y_stride + n];
                            if !n_range.contains(&n) {
                                assert_eq!(v, SENTINEL, "{wtype:?} {b:?} wrote at ({i},{n})");
                                continue;
                            }
                            let (wr, xr) = (w.row(n, wrow), x.row(i, xrow));
                            let (want, mag) = reference(wtype, wr, xr, k);
                            assert!(
                                (f64::from(v) - want).abs() <= tolerance(k, mag),
                                "{wtype:?} {b:?} k={k} m={m} ({i},{n}): {v} vs {want}"
                            );
                            // Batches of MIN_ROWS or more round like llama.cpp's tiled
                            // kernel, smaller ones like vec_dot.
                            let d = if m >= tiles::MIN_ROWS {
                                tiles::dot_tiled(wtype, k, wr, xr)
                            } else {
                                vec_dot_with(Backend::Generic, wtype, k, wr, xr).unwrap()
                            };
                            assert_eq!(
                                v.to_bits(),
                                d.to_bits(),
                                "{wtype:?} {b:?} k={k} m={m} ({i},{n}) vs vec_dot/dot_tiled"
                            );
                        }
                    }
                    match &first {
                        None => first = Some(y),
                        Some(f) => assert_eq!(f, &y, "{wtype:?} k={k} m={m} {b:?}"),
                    }
                }
            }
        }
    }
}

#[test]
fn packed_q4_k_agrees_across_backends_and_with_reference() {
    use engine_kernels::packed::{PACK_ROWS, matmul_packed_with, pack, packed_len, unpack_row};
    const SENTINEL: f32 = -555.5;
    let mut rng = ChaCha8Rng::seed_from_u64(15);
    let wtype = DType::Q4_K;
    let n_total = 32;
    for k in [256usize, 768] {
        let w = make_matrix(&mut rng, wtype, true, n_total, k, 6, 1);
        let mut packed = vec![0u8; packed_len(wtype, k, n_total).unwrap()];
        pack(wtype, k, n_total, w.data(), w.stride, &mut packed).unwrap();
        let wrow = wtype.row_bytes(k).unwrap();
        let mut back = vec![0u8; wrow];
        for r in 0..n_total {
            unpack_row(wtype, k, &packed, r, &mut back).unwrap();
            assert_eq!(back, w.row(r, wrow), "row {r} restored");
        }
        for m in [1usize, 2, 3, 4, 5, 8, 9] {
            let x = make_matrix(&mut rng, DType::Q8_K, false, m, k, 2, 3);
            let xrow = DType::Q8_K.row_bytes(k).unwrap();
            let n_range = PACK_ROWS..3 * PACK_ROWS;
            let y_stride = n_total + 1;
            let mut first: Option<Vec<f32>> = None;
            for b in backends::all() {
                let mut y = vec![SENTINEL; m * y_stride];
                let args = MatMulArgs {
                    wtype,
                    w: &packed,
                    w_stride: 0,
                    k,
                    x: x.data(),
                    x_stride: x.stride,
                    m,
                    y: y.as_mut_ptr(),
                    y_stride,
                };
                // SAFETY: y holds m rows of y_stride > n_range.end outputs; one caller.
                unsafe {
                    matmul_packed_with(b, args, n_range.clone()).unwrap();
                }
                for i in 0..m {
                    for n in 0..y_stride {
                        let v = y[i * y_stride + n];
                        if !n_range.contains(&n) {
                            assert_eq!(v, SENTINEL, "{b:?} wrote at ({i},{n})");
                            continue;
                        }
                        let (want, mag) = reference(wtype, w.row(n, wrow), x.row(i, xrow), k);
                        assert!(
                            (f64::from(v) - want).abs() <= tolerance(k, mag),
                            "{b:?} k={k} m={m} ({i},{n}): {v} vs {want}"
                        );
                    }
                }
                match &first {
                    None => first = Some(y),
                    Some(f) => {
                        for (a, c) in f.iter().zip(&y) {
                            assert_eq!(a.to_bits(), c.to_bits(), "k={k} m={m} {b:?}");
                        }
                    }
                }
            }
        }
    }
}
