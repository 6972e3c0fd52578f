//! Hyper-parameters read from a GGUF file's metadata (`{arch}.block_count`, ...).

use engine_gguf::{GgufError, GgufFile};

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
        let name = file
            .get_str("general.architecture")
            .map_err(|source| gguf_error(path, source))?;
        let arch = arch::lookup(name).ok_or_else(|| EngineError::UnknownArchitecture {
            arch: name.to_owned(),
            supported: arch::supported(),
        })?;
        let keys = Keys { file, path, arch };
        let n_layer = keys.bounded("block_count", MAX_LAYERS)?;
        let n_embd = keys.bounded("embedding_length", MAX_EMBD)?;
        let n_head = keys.bounded("attention.head_count", MAX_HEADS)?;
        let n_head_kv = match keys.opt_u32("attention.head_count_kv")? {
            Some(_) => keys.bounded("attention.head_count_kv", MAX_HEADS)?,
            None => n_head,
        };
        let n_ff = keys.bounded("feed_forward_length", MAX_EMBD * 8)?;
        let n_ctx_train = keys.bounded("context_length", u32::MAX)?;
        let (head_dim, rope_dims) = keys.head_dims(n_embd, n_head, n_head_kv)?;
        let rms_eps = keys
            .opt_f32("attention.layer_norm_rms_epsilon")?
            .unwrap_or(arch.default_rms_eps);
        let rope_base = keys
            .opt_f32("rope.freq_base")?
            .unwrap_or(arch.default_rope_base);
        let experts = keys.experts(n_ff)?;
        let gemma = keys.gemma(n_layer, n_embd / n_head, head_dim)?;
        let n_vocab = keys.n_vocab()?;
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

/// `source` as the error of reading `path`.
fn gguf_error(path: &std::path::Path, source: GgufError) -> EngineError {
    EngineError::Gguf {
        path: path.to_owned(),
        source,
    }
}

/// The `{arch}.*` keys of one file, read with the errors [`ModelConfig::from_gguf`]
/// reports.
struct Keys<'a> {
    file: &'a GgufFile,
    path: &'a std::path::Path,
    arch: &'static ArchSpec,
}

impl Keys<'_> {
    /// The full name of key `k` (`llama.block_count`).
    fn key(&self, k: &str) -> String {
        format!("{}.{k}", self.arch.name)
    }

    fn opt_u32(&self, k: &str) -> Result<Option<u32>, EngineError> {
        self.file
            .opt_u32(&self.key(k))
            .map_err(|source| gguf_error(self.path, source))
    }

    fn opt_f32(&self, k: &str) -> Result<Option<f32>, EngineError> {
        self.file
            .opt_f32(&self.key(k))
            .map_err(|source| gguf_error(self.path, source))
    }

    /// Key `k`, which must be in `1..=max`.
    fn bounded(&self, k: &str, max: u32) -> Result<usize, EngineError> {
        let v = self
            .file
            .get_u32(&self.key(k))
            .map_err(|source| gguf_error(self.path, source))?;
        if v == 0 || v > max {
            return Err(EngineError::HyperParameter {
                key: self.key(k),
                why: format!("{v} is not in 1..={max}"),
            });
        }
        Ok(v as usize)
    }

    /// The size of one head (`attention.key_length`, else `n_embd / n_head`; the value
    /// length must equal it) and the dimensions of it that RoPE rotates.
    fn head_dims(
        &self,
        n_embd: usize,
        n_head: usize,
        n_head_kv: usize,
    ) -> Result<(usize, usize), EngineError> {
        let key_length = self.opt_u32("attention.key_length")?.map(|v| v as usize);
        if (key_length.is_none() && !n_embd.is_multiple_of(n_head))
            || !n_head.is_multiple_of(n_head_kv)
        {
            return Err(EngineError::HyperParameter {
                key: self.key("attention.head_count"),
                why: format!(
                    "{n_embd} hidden, {n_head} heads and {n_head_kv} KV heads do not divide evenly"
                ),
            });
        }
        let head_dim = key_length.unwrap_or(n_embd / n_head);
        if head_dim == 0 || head_dim > MAX_EMBD as usize {
            return Err(EngineError::HyperParameter {
                key: self.key("attention.key_length"),
                why: format!("{head_dim} is not in 1..={MAX_EMBD}"),
            });
        }
        if let Some(v) = self
            .opt_u32("attention.value_length")?
            .filter(|&v| v as usize != head_dim)
        {
            return Err(EngineError::HyperParameter {
                key: self.key("attention.value_length"),
                why: format!("{v} differs from the key length {head_dim} (not supported)"),
            });
        }
        let rope_dims = self
            .opt_u32("rope.dimension_count")?
            .map_or(head_dim, |v| v as usize);
        if rope_dims > head_dim || rope_dims % 2 != 0 {
            return Err(EngineError::HyperParameter {
                key: self.key("rope.dimension_count"),
                why: format!("{rope_dims} must be even and at most the head size {head_dim}"),
            });
        }
        Ok((head_dim, rope_dims))
    }

    /// The mixture of experts, for an architecture that may have one and a file that
    /// has it (`n_ff` is the default expert size).
    fn experts(&self, n_ff: usize) -> Result<Option<ExpertConfig>, EngineError> {
        let Some(moe) = self.arch.moe.as_ref() else {
            return Ok(None);
        };
        if let None | Some(0) = self.opt_u32("expert_count")?
            && !moe.required
        {
            return Ok(None);
        }
        let n_expert = self.bounded("expert_count", MAX_EXPERTS as u32)?;
        let n_used = self.bounded("expert_used_count", n_expert as u32)?;
        let n_ff_exp = self
            .opt_u32("expert_feed_forward_length")?
            .map_or(n_ff, |v| v as usize);
        let n_ff_shexp = if moe.shared_expert {
            self.opt_u32("expert_shared_feed_forward_length")?
                .map_or(n_ff, |v| v as usize)
        } else {
            0
        };
        Ok(Some(ExpertConfig {
            n_expert,
            n_used,
            n_ff_exp,
            n_ff_shexp,
            normalize_weights: moe.normalize_weights,
        }))
    }

    /// Gemma 2's settings, for that architecture; `embd_per_head` is `n_embd / n_head`.
    fn gemma(
        &self,
        n_layer: usize,
        embd_per_head: usize,
        head_dim: usize,
    ) -> Result<Option<GemmaConfig>, EngineError> {
        let Some(g) = self.arch.gemma.as_ref() else {
            return Ok(None);
        };
        let positive = |k: &str, default: f32| -> Result<f32, EngineError> {
            let v = self.opt_f32(k)?.unwrap_or(default);
            if !(v.is_finite() && v > 0.0) {
                return Err(EngineError::HyperParameter {
                    key: self.key(k),
                    why: format!("{v} must be positive"),
                });
            }
            Ok(v)
        };
        let sliding_window = match self.opt_u32("attention.sliding_window")? {
            Some(0) => {
                return Err(EngineError::HyperParameter {
                    key: self.key("attention.sliding_window"),
                    why: "0 would mask every key".into(),
                });
            }
            Some(v) => v,
            None => g.sliding_window,
        };
        let scale_dim = if n_layer == 46 {
            embd_per_head
        } else {
            head_dim
        };
        Ok(Some(GemmaConfig {
            attn_softcap: positive("attn_logit_softcapping", g.attn_softcap)?,
            final_softcap: positive("final_logit_softcapping", g.final_softcap)?,
            sliding_window,
            q_scale: 1.0f32 / (scale_dim as f32).sqrt(),
        }))
    }

    /// The vocabulary size: `vocab_size`, else the number of tokens.
    fn n_vocab(&self) -> Result<usize, EngineError> {
        Ok(match self.opt_u32("vocab_size")? {
            Some(v) => v as usize,
            None => self
                .file
                .get_str_array("tokenizer.ggml.tokens")
                .map_err(|source| gguf_error(self.path, source))?
                .len(),
        })
    }
}
