//! Architectures as data: each is a small table of the switches in which it differs from
//! the LLaMA block the graph builder implements.

mod llama;
mod qwen2;

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
}

/// Every supported architecture.
pub const ARCHITECTURES: &[&ArchSpec] = &[&llama::LLAMA, &qwen2::QWEN2];

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
