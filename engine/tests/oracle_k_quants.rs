//! The engine against llama.cpp on K-quant files (Q2_K … Q6_K and llama.cpp's mixes), on
//! the presets whose widths are multiples of 256 (`tiny-kq`: untied output, GQA 2;
//! `tiny-kq-tied`: tied embeddings, GQA 4), from two sources:
//!
//! - files written by `engine gen-model` (`--dtype q4_K` = every matrix Q4_K, `--ftype
//!   Q4_K_M` = llama.cpp's mix);
//! - files made by llama.cpp's own quantizer (`llama_model_quantize`, the oracle's
//!   `quantize`) from gen-model's f32 file of the same preset and seed.
//!
//! For each: last-position logits within [`TOLERANCE`] of llama.cpp's with the same
//! argmax, and identical greedy 32-token continuations (up to llama.cpp's own near-ties).
//! Also: the tensors gen-model writes are byte for byte those llama.cpp's quantizer writes
//! from the same f32 values, with the same per-tensor types.
//!
//! Without the oracle venv these tests print a loud banner and pass, unless
//! `PROFINFER_REQUIRE_ORACLE=1`.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use common::compare::{Tolerance, check_greedy, check_logits};
use common::{model, model_with, oracle, oracle_ready, run_json};

/// Threads used by both implementations.
const THREADS: &str = "2";
/// Tokens generated in the greedy comparison.
const GREEDY_TOKENS: usize = 32;

/// Allowed logit difference: `abs + rel * max |llama.cpp logit|`.
///
/// Weights are identical on both sides (same file) and the engine quantizes activations
/// to Q8_K exactly like ggml-cpu (`quantize_row_q8_K_ref`, checked bit for bit in
/// `k_quant_blocks.rs`). Batches below 8 rows round exactly like ggml's AVX2
/// `ggml_vec_dot_q*_K_q8_K`; batches of 8 or more like ggml-cpu's "tiled" K-quant matmul
/// (see `engine_kernels::k_quants::tiles`); Q4_K matrices with rows in groups of 8 are
/// repacked at load like llama.cpp does and round like its `q4_K_8x8_q8_K` gemv/gemm
/// (`engine_kernels::packed::q4_k`). Not reproduced: a batch-size-dependent difference of
/// the tiled kernel on some types (Q5_K at 20 rows, Q6_K at 8..16 rows). On these random
/// 2-layer models the re-quantization of the next layer's activations amplifies such
/// last-bit differences. Measured (2026-11-23): identical logits everywhere except
/// tiny-kq Q4_K_M (1.9e-6) and tiny-kq-tied Q4_K_M (0.73 on logits of 198, 3.7e-3 of the
/// largest; the same with Q4_K left unpacked). Before Q4_K was repacked, tiny-kq Q4_K was
/// off by up to 1.8e-2 of the largest logit.
/// With `GGML_CPU_TILED_MM=0` and prompts under 8 tokens the logits are identical. The 3%
/// bound is the one the 32-element quantized types use in `oracle.rs`; real bugs (wrong
/// scales, nibble order, mins) give differences of the order of the logits themselves.
const TOLERANCE: Tolerance = Tolerance {
    abs: 1e-3,
    rel: 3e-2,
};

/// BOS and 19 ids spread over the vocabulary (prompt of 20 tokens: batches of ≥ 8 rows,
/// so llama.cpp's prefill kernels run, then single-row decode for the greedy tokens).
fn input_tokens(n_vocab: u32, bos: u32) -> Vec<u32> {
    let mut t = vec![bos];
    t.extend((0..19u32).map(|i| 3 + (i * 7919 + 101) % (n_vocab - 3)));
    t
}

/// (vocabulary size, BOS id) of a file, from its metadata.
fn vocab_of(path: &Path) -> (u32, u32) {
    let f = engine_gguf::GgufFile::open(path).expect("read the test model");
    let m = f.metadata();
    let n_vocab = m
        .get_str_array("tokenizer.ggml.tokens")
        .expect("tokens")
        .len();
    let bos = m
        .opt_u32("tokenizer.ggml.bos_token_id")
        .expect("bos id")
        .unwrap_or(1);
    (u32::try_from(n_vocab).expect("vocabulary fits u32"), bos)
}

/// The file llama.cpp's quantizer makes from gen-model's f32 file of `preset`, with
/// preset `ftype` (`--pure` for a pure type), once per test run.
fn llama_quantized(preset: &str, ftype: &str, pure: bool) -> PathBuf {
    type Slot = Arc<OnceLock<PathBuf>>;
    static FILES: OnceLock<Mutex<HashMap<String, Slot>>> = OnceLock::new();
    let key = format!("{preset}-llama-{ftype}{}", if pure { "-pure" } else { "" });
    let slot: Slot = {
        let mut map = FILES
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(map.entry(key.clone()).or_default())
    };
    slot.get_or_init(|| {
        let f32_file = model(preset, "f32");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("oracle-models");
        let out = dir.join(format!("{key}.gguf"));
        let mut cmd = oracle("quantize");
        cmd.arg("--model")
            .arg(&f32_file)
            .arg("--out")
            .arg(&out)
            .args(["--ftype", ftype]);
        if pure {
            cmd.arg("--pure");
        }
        run_json(&mut cmd);
        out
    })
    .clone()
}

/// A file of one source: gen-model or llama.cpp's quantizer.
fn file(preset: &str, source: &str, format: &str) -> PathBuf {
    // A format in lower case with a K (q4_K) is a pure ggml type, in upper case
    // (Q4_K_M, Q6_K) a llama-quantize preset.
    let pure = format.starts_with('q');
    match (source, pure) {
        ("gen-model", true) => model_with(preset, "--dtype", format),
        ("gen-model", false) => model_with(preset, "--ftype", format),
        // llama-quantize has no preset named Q3_K, Q4_K or Q5_K: a pure type is the preset
        // with that base type, with --pure.
        ("llama.cpp", true) => {
            let ftype = match format {
                "q3_K" => "Q3_K_M",
                "q4_K" => "Q4_K_M",
                "q5_K" => "Q5_K_M",
                other => &other.to_uppercase(),
            };
            llama_quantized(preset, ftype, true)
        }
        ("llama.cpp", false) => llama_quantized(preset, format, false),
        _ => unreachable!("sources are gen-model and llama.cpp"),
    }
}

fn check_logits_of(preset: &str, source: &str, format: &str) {
    if !oracle_ready() {
        return;
    }
    let path = file(preset, source, format);
    let (n_vocab, bos) = vocab_of(&path);
    let label = format!("{preset} {format} ({source})");
    check_logits(
        &label,
        &path,
        &input_tokens(n_vocab, bos),
        THREADS,
        TOLERANCE,
    );
}

fn check_greedy_of(preset: &str, source: &str, format: &str) {
    if !oracle_ready() {
        return;
    }
    let path = file(preset, source, format);
    let (n_vocab, bos) = vocab_of(&path);
    let label = format!("{preset} {format} ({source})");
    check_greedy(
        &label,
        &path,
        &input_tokens(n_vocab, bos),
        GREEDY_TOKENS,
        THREADS,
    );
}

/// gen-model's tensors (types and bytes) equal those of llama.cpp's quantizer on the same
/// f32 values.
fn check_same_tensors_as_llama_quantizer(preset: &str, format: &str) {
    if !oracle_ready() {
        return;
    }
    let ours = engine_gguf::GgufFile::open(file(preset, "gen-model", format)).unwrap();
    let theirs = engine_gguf::GgufFile::open(file(preset, "llama.cpp", format)).unwrap();
    assert_eq!(ours.tensors().len(), theirs.tensors().len());
    for t in theirs.tensors() {
        let o = ours
            .tensor(&t.name)
            .unwrap_or_else(|| panic!("{preset} {format}: gen-model has no {}", t.name));
        assert_eq!(
            o.ggml_type, t.ggml_type,
            "{preset} {format}: type of {}",
            t.name
        );
        assert!(
            ours.tensor_data(o) == theirs.tensor_data(t),
            "{preset} {format}: bytes of {} differ from llama.cpp's quantizer",
            t.name
        );
    }
}

/// One module per preset and format.
macro_rules! k_quant_tests {
    ($($module:ident: $preset:literal, $format:literal;)*) => {$(
        mod $module {
            #[test]
            fn gen_model_logits_match_llama_cpp() {
                super::check_logits_of($preset, "gen-model", $format);
            }

            #[test]
            fn gen_model_greedy_matches_llama_cpp() {
                super::check_greedy_of($preset, "gen-model", $format);
            }

            #[test]
            fn llama_quantized_logits_match_llama_cpp() {
                super::check_logits_of($preset, "llama.cpp", $format);
            }

            #[test]
            fn llama_quantized_greedy_matches_llama_cpp() {
                super::check_greedy_of($preset, "llama.cpp", $format);
            }

            #[test]
            fn gen_model_tensors_equal_llama_quantizer() {
                super::check_same_tensors_as_llama_quantizer($preset, $format);
            }
        }
    )*};
}

k_quant_tests! {
    tiny_kq_q2_k: "tiny-kq", "q2_K";
    tiny_kq_q3_k: "tiny-kq", "q3_K";
    tiny_kq_q4_k: "tiny-kq", "q4_K";
    tiny_kq_q5_k: "tiny-kq", "q5_K";
    tiny_kq_q6_k: "tiny-kq", "q6_K";
    tiny_kq_mix_q2_k: "tiny-kq", "Q2_K";
    tiny_kq_mix_q3_k_m: "tiny-kq", "Q3_K_M";
    tiny_kq_mix_q4_k_m: "tiny-kq", "Q4_K_M";
    tiny_kq_mix_q5_k_m: "tiny-kq", "Q5_K_M";
    tiny_kq_mix_q6_k: "tiny-kq", "Q6_K";
    tiny_kq_tied_mix_q2_k: "tiny-kq-tied", "Q2_K";
    tiny_kq_tied_mix_q3_k_m: "tiny-kq-tied", "Q3_K_M";
    tiny_kq_tied_mix_q4_k_m: "tiny-kq-tied", "Q4_K_M";
    tiny_kq_tied_mix_q5_k_m: "tiny-kq-tied", "Q5_K_M";
    tiny_kq_tied_mix_q6_k: "tiny-kq-tied", "Q6_K";
}
