//! Gemma 2: embeddings scaled by √n_embd, Q scaled by 1/√head_dim after RoPE, attention
//! and final logits soft-capped (`cap·tanh(x/cap)`), sliding-window attention on even
//! layers, post-attention and post-FFN norms, a GEGLU FFN, output tied to the embeddings.

use super::{ArchSpec, GemmaSpec};
use crate::ops::rope::ROPE_MODE_NEOX;

/// The `gemma2` architecture.
pub const GEMMA2: ArchSpec = ArchSpec {
    name: "gemma2",
    rope_mode: ROPE_MODE_NEOX,
    qkv_bias: false,
    default_rms_eps: 1e-6,
    default_rope_base: 10_000.0,
    moe: None,
    gemma: Some(GemmaSpec {
        attn_softcap: 50.0,
        final_softcap: 30.0,
        sliding_window: 4096,
    }),
};
