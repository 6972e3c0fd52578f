//! Qwen2/Qwen2.5: the LLaMA block with Q/K/V biases and NeoX-style RoPE.

use super::ArchSpec;
use crate::ops::rope::ROPE_MODE_NEOX;

/// The `qwen2` architecture.
pub const QWEN2: ArchSpec = ArchSpec {
    name: "qwen2",
    rope_mode: ROPE_MODE_NEOX,
    qkv_bias: true,
    default_rms_eps: 1e-6,
    default_rope_base: 1_000_000.0,
    moe: None,
    gemma: None,
};
