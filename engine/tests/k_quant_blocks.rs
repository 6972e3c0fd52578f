//! The engine's K-quant row functions against ggml's own, called in the oracle's libggml
//! (`llama_oracle.py block-ref`): for each of `Q2_K` … `Q6_K` and `Q8_K`, on rows of
//! Gaussian values, rows with zero / constant / one-sided / tiny super-blocks,
//!
//! - `quantize_row_q*_K_ref` produces the same bytes (the engine writes what llama.cpp's
//!   quantizer writes without an importance matrix);
//! - `dequantize_row_q*_K` gives the same floats, bit for bit;
//! - the activations converted to `Q8_K` are the same bytes as ggml-cpu's `from_float`;
//! - `vec_dot` gives exactly ggml-cpu's `ggml_vec_dot_q*_K_q8_K` (the AVX2 path of the
//!   oracle's build) on the portable backend and every SIMD backend of the target (one
//!   this CPU lacks is a loud skip, a failure with `PROFINFER_REQUIRE_SIMD=1`).
//!
//! Without the oracle venv these tests print a loud banner and pass, unless
//! `PROFINFER_REQUIRE_ORACLE=1`.

mod common;
// The backends to compare, with a loud skip (fatal with PROFINFER_REQUIRE_SIMD=1) for a SIMD
// backend this CPU lacks.
#[path = "../crates/kernels/tests/backends/mod.rs"]
mod backends;

use ::common::engine_abi::DType;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use serde_json::{Value, json};

use crate::common::{oracle, oracle_ready, run_json};

/// Super-blocks per test row.
const BLOCKS: usize = 8;
const QK_K: usize = 256;

/// A row of `BLOCKS` super-blocks: Gaussian blocks plus the edge cases ggml's fitting
/// treats specially.
fn weights(seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let normal = Normal::new(0.0f32, 1.0).unwrap();
    let mut x: Vec<f32> = (0..BLOCKS * QK_K)
        .map(|_| normal.sample(&mut rng))
        .collect();
    // Block 1: all zero. Block 2: constant. Block 3: positive only (min 0 in the affine
    // types). Block 4: tiny values. Block 5: one outlier. Block 6: a zero 16-group.
    x[QK_K..2 * QK_K].fill(0.0);
    x[2 * QK_K..3 * QK_K].fill(0.75);
    for v in &mut x[3 * QK_K..4 * QK_K] {
        *v = v.abs() + 0.1;
    }
    for v in &mut x[4 * QK_K..5 * QK_K] {
        *v *= 1e-6;
    }
    x[5 * QK_K + 77] = 40.0;
    x[6 * QK_K + 32..6 * QK_K + 48].fill(0.0);
    for v in &mut x[7 * QK_K..] {
        *v = rng.random_range(-3.0..1.0);
    }
    x
}

fn hex_bytes(v: &Value) -> Vec<u8> {
    let s = v.as_str().expect("hex string");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn check_type(dtype: DType, seed: u64) {
    let x = weights(seed);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    let normal = Normal::new(0.0f32, 1.0).unwrap();
    let a: Vec<f32> = (0..x.len()).map(|_| normal.sample(&mut rng)).collect();
    let with_dot = dtype != DType::Q8_K;
    let input = if with_dot {
        json!({"weights": x, "activations": a})
    } else {
        json!({"weights": x})
    };
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("k-quant-{}-{seed}.json", dtype.name()));
    std::fs::write(&path, input.to_string()).unwrap();
    let mut cmd = oracle("block-ref");
    cmd.args(["--type", dtype.name(), "--input-json"])
        .arg(&path);
    let reference = run_json(&mut cmd);

    let n = x.len();
    let mut q = vec![0u8; dtype.row_bytes(n).unwrap()];
    engine_kernels::quant::quantize_row(dtype, &x, &mut q).unwrap();
    let want = hex_bytes(&reference["quantized"]);
    if q != want {
        let bb = dtype.block_bytes();
        let block = (0..BLOCKS)
            .find(|&b| q[b * bb..(b + 1) * bb] != want[b * bb..(b + 1) * bb])
            .unwrap();
        panic!(
            "{}: quantized bytes differ from quantize_row_{}_ref in super-block {block}:\n ours {:?}\n ggml {:?}",
            dtype.name(),
            dtype.name(),
            &q[block * bb..(block + 1) * bb],
            &want[block * bb..(block + 1) * bb]
        );
    }

    let mut back = vec![0f32; n];
    engine_kernels::quant::dequantize_row(dtype, &want, &mut back).unwrap();
    let ggml_back = reference["dequantized"].as_array().unwrap();
    for (i, (ours, theirs)) in back.iter().zip(ggml_back).enumerate() {
        let theirs = theirs.as_f64().unwrap() as f32;
        assert_eq!(
            ours.to_bits(),
            theirs.to_bits(),
            "{}: dequantized element {i}: {ours} vs ggml {theirs}",
            dtype.name()
        );
    }

    if !with_dot {
        return;
    }
    let mut qa = vec![0u8; DType::Q8_K.row_bytes(n).unwrap()];
    engine_kernels::convert_activations(DType::Q8_K, &a, &mut qa).unwrap();
    assert!(
        qa == hex_bytes(&reference["activations_converted"]),
        "{}: Q8_K activations differ from ggml-cpu's",
        dtype.name()
    );
    let ggml_dot = reference["vec_dot"].as_f64().unwrap() as f32;
    for backend in backends::all() {
        let ours = engine_kernels::vec_dot_with(backend, dtype, n, &want, &qa).unwrap();
        assert_eq!(
            ours.to_bits(),
            ggml_dot.to_bits(),
            "{} vec_dot on {}: {ours} vs ggml {ggml_dot}",
            dtype.name(),
            backend.name()
        );
    }
}

fn check_all_seeds(dtype: DType) {
    if !oracle_ready() {
        return;
    }
    for seed in [1, 2, 3] {
        check_type(dtype, seed);
    }
}

#[test]
fn q2_k_matches_ggml() {
    check_all_seeds(DType::Q2_K);
}

#[test]
fn q3_k_matches_ggml() {
    check_all_seeds(DType::Q3_K);
}

#[test]
fn q4_k_matches_ggml() {
    check_all_seeds(DType::Q4_K);
}

#[test]
fn q5_k_matches_ggml() {
    check_all_seeds(DType::Q5_K);
}

#[test]
fn q6_k_matches_ggml() {
    check_all_seeds(DType::Q6_K);
}

#[test]
fn q8_k_matches_ggml() {
    check_all_seeds(DType::Q8_K);
}
