//! Architectures as data: each is a small table of the switches in which it differs from
//! the LLaMA block the graph builder implements.

mod gemma2;
mod llama;
mod qwen2;
mod qwen2moe;

use crate::ops::rope::{ROPE_MODE_NEOX, ROPE_MODE_NORMAL};

/// How an architecture differs from the common pre-norm transformer block.
#[derive(Debug)]
pub struct ArchSpec {
    /// `general.architecture` value, also the prefix of its hyper-parameter keys.
    pub name: &'static str,
    /// RoPE mode (ggml's numbering).
    pub rope_mode: u32,
    /// Whether Q, K and V projections have biases (`blk.N.attn_{q,k,v}.bias`).
    pub qkv_bias: bool,
    /// Default RMSNorm epsilon when the file does not give one.
    pub default_rms_eps: f32,
    /// Default RoPE base frequency when the file does not give one.
    pub default_rope_base: f32,
    /// How the FFN may be a mixture of experts (`None`: always dense).
    pub moe: Option<MoeSpec>,
    /// Gemma 2's block (`None`: the LLaMA block).
    pub gemma: Option<GemmaSpec>,
}

/// Gemma 2's differences from the LLaMA block, with the defaults llama.cpp uses when a
/// file leaves the keys out.
#[derive(Debug)]
pub struct GemmaSpec {
    /// Attention logit soft-cap (`{arch}.attn_logit_softcapping`).
    pub attn_softcap: f32,
    /// Final logit soft-cap (`{arch}.final_logit_softcapping`).
    pub final_softcap: f32,
    /// Sliding window of the even layers (`{arch}.attention.sliding_window`).
    pub sliding_window: u32,
}

/// A mixture-of-experts FFN: a softmax router picks `expert_used_count` of
/// `expert_count` experts per token (llama.cpp's `build_moe_ffn`).
#[derive(Debug)]
pub struct MoeSpec {
    /// Whether every file of the architecture has experts (else only those with
    /// `{arch}.expert_count`, like Mixtral among `llama` files).
    pub required: bool,
    /// Whether the selected experts' weights are divided by their sum (Mixtral).
    pub normalize_weights: bool,
    /// Whether a shared expert runs for every token beside the routed ones, scaled by a
    /// sigmoid gate (`ffn_*_shexp`, Qwen-MoE).
    pub shared_expert: bool,
}

/// Every supported architecture.
pub const ARCHITECTURES: &[&ArchSpec] = &[
    &llama::LLAMA,
    &qwen2::QWEN2,
    &qwen2moe::QWEN2MOE,
    &gemma2::GEMMA2,
];

/// The architecture called `name`.
pub fn lookup(name: &str) -> Option<&'static ArchSpec> {
    ARCHITECTURES.iter().copied().find(|a| a.name == name)
}

/// Names of the supported architectures, comma-separated.
pub fn supported() -> String {
    ARCHITECTURES
        .iter()
        .map(|a| a.name)
        .collect::<Vec<_>>()
        .join(", ")
}

const _: () = assert!(ROPE_MODE_NORMAL != ROPE_MODE_NEOX);
