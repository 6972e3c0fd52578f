//! Hyper-parameters read from a GGUF file's metadata (`{arch}.block_count`, ...).

use engine_gguf::GgufFile;

use super::arch::{self, ArchSpec};
use crate::error::EngineError;

/// Largest values accepted for sizes read from a file (guards against absurd headers).
const MAX_LAYERS: u32 = 1024;
const MAX_EMBD: u32 = 1 << 16;
const MAX_HEADS: u32 = 1024;

/// A model's hyper-parameters.
#[derive(Clone, Debug)]
pub struct ModelConfig {
    /// The architecture.
    pub arch: &'static ArchSpec,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Hidden size.
    pub n_embd: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (grouped-query attention).
    pub n_head_kv: usize,
    /// Size of one head.
    pub head_dim: usize,
    /// FFN inner size.
    pub n_ff: usize,
    /// Vocabulary size.
    pub n_vocab: usize,
    /// Context length the model was trained with.
    pub n_ctx_train: usize,
    /// RMSNorm epsilon.
    pub rms_eps: f32,
    /// RoPE base frequency.
    pub rope_base: f32,
    /// Dimensions of each head that RoPE rotates.
    pub rope_dims: usize,
    /// The mixture of experts, if the FFN is one.
    pub experts: Option<ExpertConfig>,
    /// Gemma 2's settings, for that architecture.
    pub gemma: Option<GemmaConfig>,
}

/// Gemma 2's block settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmaConfig {
    /// Attention logit soft-cap.
    pub attn_softcap: f32,
    /// Final logit soft-cap.
    pub final_softcap: f32,
    /// Sliding window of the even layers, in positions.
    pub sliding_window: u32,
    /// Factor on Q after RoPE: `1/√head_dim` (llama.cpp: `1/√(n_embd/n_head)` for the
    /// 46-layer 27B model).
    pub q_scale: f32,
}

/// Sizes of a mixture-of-experts FFN.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExpertConfig {
    /// Experts per layer (`{arch}.expert_count`).
    pub n_expert: usize,
    /// Experts each token uses (`{arch}.expert_used_count`).
    pub n_used: usize,
    /// FFN size of one expert (`{arch}.expert_feed_forward_length`, else `n_ff`).
    pub n_ff_exp: usize,
    /// FFN size of the shared expert (`{arch}.expert_shared_feed_forward_length`,
    /// else `n_ff`), 0 without one.
    pub n_ff_shexp: usize,
    /// Whether the weights are divided by their sum.
    pub normalize_weights: bool,
}

/// Most experts per layer accepted (llama.cpp's `LLAMA_MAX_EXPERTS`).
pub const MAX_EXPERTS: usize = 512;

impl ModelConfig {
    /// Width of K and V rows (all KV heads).
    pub fn n_embd_kv(&self) -> usize {
        self.n_head_kv * self.head_dim
    }

    /// Width of Q rows (all query heads): `n_embd` unless the file sets a head size.
    pub fn n_embd_q(&self) -> usize {
        self.n_head * self.head_dim
    }

    /// Reads the hyper-parameters of `file`.
    pub fn from_gguf(file: &GgufFile, path: &std::path::Path) -> Result<ModelConfig, EngineError> {
        let gguf = |source| EngineError::Gguf {
            path: path.to_owned(),
            source,
        };
        let name = file.get_str("general.architecture").map_err(gguf)?;
        let arch = arch::lookup(name).ok_or_else(|| EngineError::UnknownArchitecture {
            arch: name.to_owned(),
            supported: arch::supported(),
        })?;
        let key = |k: &str| format!("{}.{k}", arch.name);
        let bounded = |k: &str, max: u32| -> Result<usize, EngineError> {
            let v = file.get_u32(&key(k)).map_err(gguf)?;
            if v == 0 || v > max {
                return Err(EngineError::HyperParameter {
                    key: key(k),
                    why: format!("{v} is not in 1..={max}"),
                });
            }
            Ok(v as usize)
        };
        let n_layer = bounded("block_count", MAX_LAYERS)?;
        let n_embd = bounded("embedding_length", MAX_EMBD)?;
        let n_head = bounded("attention.head_count", MAX_HEADS)?;
        let n_head_kv = match file
            .opt_u32(&key("attention.head_count_kv"))
            .map_err(gguf)?
        {
            Some(_) => bounded("attention.head_count_kv", MAX_HEADS)?,
            None => n_head,
        };
        let n_ff = bounded("feed_forward_length", MAX_EMBD * 8)?;
        let n_ctx_train = bounded("context_length", u32::MAX)?;
        let key_length = file
            .opt_u32(&key("attention.key_length"))
            .map_err(gguf)?
            .map(|v| v as usize);
        if (key_length.is_none() && n_embd % n_head != 0) || n_head % n_head_kv != 0 {
            return Err(EngineError::HyperParameter {
                key: key("attention.head_count"),
                why: format!(
                    "{n_embd} hidden, {n_head} heads and {n_head_kv} KV heads do not divide evenly"
                ),
            });
        }
        let head_dim = key_length.unwrap_or(n_embd / n_head);
        if head_dim == 0 || head_dim > MAX_EMBD as usize {
            return Err(EngineError::HyperParameter {
                key: key("attention.key_length"),
                why: format!("{head_dim} is not in 1..={MAX_EMBD}"),
            });
        }
        if let Some(v) = file
            .opt_u32(&key("attention.value_length"))
            .map_err(gguf)?
            .filter(|&v| v as usize != head_dim)
        {
            return Err(EngineError::HyperParameter {
                key: key("attention.value_length"),
                why: format!("{v} differs from the key length {head_dim} (not supported)"),
            });
        }
        let rope_dims = file
            .opt_u32(&key("rope.dimension_count"))
            .map_err(gguf)?
            .map_or(head_dim, |v| v as usize);
        if rope_dims > head_dim || rope_dims % 2 != 0 {
            return Err(EngineError::HyperParameter {
                key: key("rope.dimension_count"),
                why: format!("{rope_dims} must be even and at most the head size {head_dim}"),
            });
        }
        let rms_eps = file
            .opt_f32(&key("attention.layer_norm_rms_epsilon"))
            .map_err(gguf)?
            .unwrap_or(arch.default_rms_eps);
        let rope_base = file
            .opt_f32(&key("rope.freq_base"))
            .map_err(gguf)?
            .unwrap_or(arch.default_rope_base);
        let experts = match arch.moe.as_ref() {
            None => None,
            Some(moe) => {
                let count = file.opt_u32(&key("expert_count")).map_err(gguf)?;
                match count {
                    None | Some(0) if !moe.required => None,
                    _ => {
                        let n_expert = bounded("expert_count", MAX_EXPERTS as u32)?;
                        let n_used = bounded("expert_used_count", n_expert as u32)?;
                        let opt = |k: &str| file.opt_u32(&key(k)).map_err(gguf);
                        let n_ff_exp =
                            opt("expert_feed_forward_length")?.map_or(n_ff, |v| v as usize);
                        let n_ff_shexp = if moe.shared_expert {
                            opt("expert_shared_feed_forward_length")?.map_or(n_ff, |v| v as usize)
                        } else {
                            0
                        };
                        Some(ExpertConfig {
                            n_expert,
                            n_used,
                            n_ff_exp,
                            n_ff_shexp,
                            normalize_weights: moe.normalize_weights,
                        })
                    }
                }
            }
        };
        let gemma = match arch.gemma.as_ref() {
            None => None,
            Some(g) => {
                let f32_key = |k: &str, default: f32| -> Result<f32, EngineError> {
                    let v = file.opt_f32(&key(k)).map_err(gguf)?.unwrap_or(default);
                    if !(v.is_finite() && v > 0.0) {
                        return Err(EngineError::HyperParameter {
                            key: key(k),
                            why: format!("{v} must be positive"),
                        });
                    }
                    Ok(v)
                };
                let sliding_window = match file
                    .opt_u32(&key("attention.sliding_window"))
                    .map_err(gguf)?
                {
                    Some(0) => {
                        return Err(EngineError::HyperParameter {
                            key: key("attention.sliding_window"),
                            why: "0 would mask every key".into(),
                        });
                    }
                    Some(v) => v,
                    None => g.sliding_window,
                };
                let scale_dim = if n_layer == 46 {
                    n_embd / n_head
                } else {
                    head_dim
                };
                Some(GemmaConfig {
                    attn_softcap: f32_key("attn_logit_softcapping", g.attn_softcap)?,
                    final_softcap: f32_key("final_logit_softcapping", g.final_softcap)?,
                    sliding_window,
                    q_scale: 1.0f32 / (scale_dim as f32).sqrt(),
                })
            }
        };
        let n_vocab = match file.opt_u32(&key("vocab_size")).map_err(gguf)? {
            Some(v) => v as usize,
            None => file
                .get_str_array("tokenizer.ggml.tokens")
                .map_err(gguf)?
                .len(),
        };
        Ok(ModelConfig {
            arch,
            n_layer,
            n_embd,
            n_head,
            n_head_kv,
            head_dim,
            n_ff,
            n_vocab,
            n_ctx_train,
            rms_eps,
            rope_base,
            rope_dims,
            experts,
            gemma,
        })
    }
}
