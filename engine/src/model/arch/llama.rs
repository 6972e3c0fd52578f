//! LLaMA 2/3: RMSNorm, RoPE on adjacent pairs, grouped-query attention, SwiGLU FFN; with
//! `llama.expert_count` a Mixtral-style mixture of experts (weights renormalised).

use super::{ArchSpec, MoeSpec};
use crate::ops::rope::ROPE_MODE_NORMAL;

/// The `llama` architecture.
pub const LLAMA: ArchSpec = ArchSpec {
    name: "llama",
    rope_mode: ROPE_MODE_NORMAL,
    qkv_bias: false,
    default_rms_eps: 1e-5,
    default_rope_base: 10_000.0,
    moe: Some(MoeSpec {
        required: false,
        normalize_weights: true,
        shared_expert: false,
    }),
    gemma: None,
};
