//! Qwen1.5-MoE / Qwen2-MoE: the Qwen2 block whose FFN is a mixture of experts (softmax
//! router, top-k, weights not renormalised) plus a shared expert behind a sigmoid gate.

use super::{ArchSpec, MoeSpec};
use crate::ops::rope::ROPE_MODE_NEOX;

/// The `qwen2moe` architecture.
pub const QWEN2MOE: ArchSpec = ArchSpec {
    name: "qwen2moe",
    rope_mode: ROPE_MODE_NEOX,
    qkv_bias: true,
    default_rms_eps: 1e-6,
    default_rope_base: 1_000_000.0,
    moe: Some(MoeSpec {
        required: true,
        normalize_weights: false,
        shared_expert: true,
    }),
    gemma: None,
};
