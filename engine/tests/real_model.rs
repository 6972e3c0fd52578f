//! The engine against llama.cpp on a real model people download: SmolLM2-135M-Instruct
//! (Q4_1 weights, Q8_0 tied embedding, 30 layers, GQA 9/3, `smollm` BPE tokenizer).
//!
//! - last-position logits of one forward pass over real prompts agree within tolerance;
//! - greedy 32-token continuations of several prompts are identical (a divergence is
//!   accepted only at a near-tie of llama.cpp's own top two logits).
//!
//! The model comes from `PROFINFER_SMOLLM2` (fetched by `cargo xtask test`); without it,
//! or without the oracle venv, the tests skip loudly unless `PROFINFER_REQUIRE_ORACLE=1`.

mod common;

use common::compare::{Tolerance, check_greedy, check_logits};
use common::{oracle, oracle_ready, run_json, smollm2, tokens_of};

/// Threads used by both implementations.
const THREADS: &str = "2";
/// Tokens generated in the greedy comparison.
const GREEDY_TOKENS: usize = 32;

/// Both sides quantize activations the way ggml does for each weight type (Q8_1 blocks
/// for Q4_1, Q8_0 for the Q8_0 output) and keep an f16 KV cache, so what remains is
/// summation order over 30 layers.
const TOLERANCE: Tolerance = Tolerance {
    abs: 1e-3,
    rel: 2e-2,
};

/// Plain prompts: prose, code, a list, a non-English sentence.
const PROMPTS: &[&str] = &[
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Here are three tips for staying healthy:\n1.",
    "La tour Eiffel est situ\u{e9}e \u{e0}",
];

/// llama.cpp's tokens of `text` with the model's own special-token rules (SmolLM2 adds no
/// BOS).
fn oracle_tokens(model: &std::path::Path, text: &str) -> Vec<u32> {
    let v = run_json(
        oracle("tokenize")
            .arg("--model")
            .arg(model)
            .args(["--text", text]),
    );
    tokens_of(&v["tokens"], "llama.cpp tokens")
}

/// The SmolLM2 file when both it and the oracle are available.
fn fixture() -> Option<std::path::PathBuf> {
    let model = smollm2()?;
    oracle_ready().then_some(model)
}

#[test]
fn smollm2_logits_match_llama_cpp() {
    let Some(model) = fixture() else { return };
    for prompt in PROMPTS {
        let tokens = oracle_tokens(&model, prompt);
        check_logits(
            &format!("SmolLM2 {prompt:?}"),
            &model,
            &tokens,
            THREADS,
            TOLERANCE,
        );
    }
}

#[test]
fn smollm2_greedy_continuations_match_llama_cpp() {
    let Some(model) = fixture() else { return };
    for prompt in PROMPTS {
        let tokens = oracle_tokens(&model, prompt);
        let label = format!("SmolLM2 {prompt:?}");
        check_greedy(&label, &model, &tokens, GREEDY_TOKENS, THREADS);
    }
}
