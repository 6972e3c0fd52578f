//! `engine gen-model`: GGUF files with seeded random weights in the real shapes of known
//! models, plus tiny presets for tests. The files carry complete tokenizer metadata
//! (a synthetic vocabulary of the model's real size) and a chat template matching it, and
//! load in llama.cpp too.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use common::DType;
use engine_gguf::{Array, GgmlType, GgufWriter, Value};
use engine_tokenizer::Vocab;
use engine_tokenizer::synth::{SynthKind, synth_vocab};
use indicatif::{ProgressBar, ProgressStyle};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use crate::chat::known_templates;
use crate::chat::template::TEMPLATE_KEY;
use crate::error::EngineError;
use crate::model::tensors::{ExpertShapes, TensorKind, TensorShapes, tensor_specs};
use crate::quant_mix::{Mix, MixModel};

/// The types of a generated file's weight matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightFormat {
    /// Every matrix in one type.
    Pure(DType),
    /// llama.cpp's per-tensor types of a `llama-quantize` preset ([`crate::quant_mix`]).
    Mix(Mix),
}

impl WeightFormat {
    /// `q4_K` or `Q4_K_M`.
    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::Pure(t) => t.name(),
            WeightFormat::Mix(m) => m.name(),
        }
    }

    /// The type of matrix `name` with rows of `ne0` elements in preset `p`.
    fn matrix_type(self, p: &Preset, name: &str, ne0: u64) -> DType {
        match self {
            WeightFormat::Pure(t) => t,
            WeightFormat::Mix(m) => {
                let model = MixModel {
                    n_layer: p.n_layer,
                    n_gqa: p.n_head / p.n_head_kv,
                    tied_embeddings: p.tied_embeddings,
                };
                crate::quant_mix::tensor_type(m, model, name, ne0)
            }
        }
    }

    /// `general.file_type`.
    fn file_type(self) -> Option<u32> {
        match self {
            WeightFormat::Pure(t) => file_type(t),
            WeightFormat::Mix(m) => Some(m.file_type()),
        }
    }
}

/// Hyper-parameters and tokenizer of a preset.
#[derive(Clone, Debug)]
pub struct Preset {
    /// Preset name (`llama3.2-1b`, ...).
    pub name: &'static str,
    /// `general.architecture`.
    pub arch: &'static str,
    /// Transformer blocks.
    pub n_layer: u32,
    /// Hidden size.
    pub n_embd: u32,
    /// Query heads.
    pub n_head: u32,
    /// KV heads.
    pub n_head_kv: u32,
    /// FFN size.
    pub n_ff: u32,
    /// Vocabulary size.
    pub n_vocab: u32,
    /// Trained context length.
    pub n_ctx: u32,
    /// RoPE base.
    pub rope_base: f32,
    /// RMSNorm epsilon.
    pub rms_eps: f32,
    /// Tokenizer kind.
    pub tokenizer: SynthKind,
    /// Whether the output projection reuses `token_embd` (no `output.weight`).
    pub tied_embeddings: bool,
    /// Size of one attention head when it is not `n_embd / n_head`
    /// (`{arch}.attention.key_length`).
    pub head_dim: Option<u32>,
    /// Sliding window of Gemma 2's even layers (`{arch}.attention.sliding_window`).
    pub sliding_window: Option<u32>,
    /// A mixture of experts instead of the dense FFN.
    pub experts: Option<PresetExperts>,
}

impl Preset {
    /// Size of one attention head.
    pub fn head_dim(&self) -> u32 {
        self.head_dim.unwrap_or(self.n_embd / self.n_head)
    }
}

/// The mixture of experts of a preset.
#[derive(Clone, Copy, Debug)]
pub struct PresetExperts {
    /// Experts per layer.
    pub n_expert: u32,
    /// Experts per token.
    pub n_used: u32,
    /// FFN size of one expert.
    pub n_ff_exp: u32,
    /// FFN size of the shared expert (0: none).
    pub n_ff_shexp: u32,
}

/// A family's architecture, RoPE base, norm epsilon, tokenizer and embedding tying; each
/// preset names its sizes and takes the rest from its family.
const fn family(
    arch: &'static str,
    rope_base: f32,
    rms_eps: f32,
    tokenizer: SynthKind,
    tied_embeddings: bool,
) -> Preset {
    Preset {
        name: "",
        arch,
        n_layer: 0,
        n_embd: 0,
        n_head: 0,
        n_head_kv: 0,
        n_ff: 0,
        n_vocab: 0,
        n_ctx: 0,
        rope_base,
        rms_eps,
        tokenizer,
        tied_embeddings,
        head_dim: None,
        sliding_window: None,
        experts: None,
    }
}

/// Llama 2 style: SentencePiece vocabulary, untied output.
const LLAMA_SPM: Preset = family("llama", 10_000.0, 1e-5, SynthKind::Spm, false);
/// Llama 3 style: byte-level BPE, tied output.
const LLAMA3: Preset = family("llama", 500_000.0, 1e-5, SynthKind::Llama3Bpe, true);
/// Qwen 2.
const QWEN2: Preset = family("qwen2", 1_000_000.0, 1e-6, SynthKind::Qwen2Bpe, true);
/// Qwen 2 MoE.
const QWEN2_MOE: Preset = family("qwen2moe", 1_000_000.0, 1e-6, SynthKind::Qwen2Bpe, false);
/// Mixtral (llama architecture with experts).
const MIXTRAL: Preset = family("llama", 1_000_000.0, 1e-5, SynthKind::Spm, false);
/// Gemma 2.
const GEMMA2: Preset = family("gemma2", 10_000.0, 1e-6, SynthKind::Spm, true);

/// Every preset. The large ones have the real models' hyper-parameters.
#[rustfmt::skip]
pub const PRESETS: &[Preset] = &[
    Preset { name: "tiny-llama", n_layer: 2, n_embd: 128, n_head: 4, n_head_kv: 2, n_ff: 352, n_vocab: 512, n_ctx: 512, ..LLAMA_SPM },
    Preset { name: "tiny-llama3", n_layer: 2, n_embd: 128, n_head: 4, n_head_kv: 1, n_ff: 384, n_vocab: 640, n_ctx: 1024, ..LLAMA3 },
    Preset { name: "tiny-qwen2", n_layer: 2, n_embd: 128, n_head: 2, n_head_kv: 1, n_ff: 320, n_vocab: 640, n_ctx: 1024, ..QWEN2 },
    // Widths that are multiples of 256, so every matrix can hold K-quant super-blocks
    // (llama.cpp's mixes fall back to 32-element types otherwise). Untied with GQA 2, and
    // tied with GQA 4: the mixes treat the output, token_embd and attn_v differently.
    Preset { name: "tiny-kq", n_layer: 2, n_embd: 256, n_head: 4, n_head_kv: 2, n_ff: 768, n_vocab: 512, n_ctx: 512, ..LLAMA_SPM },
    Preset { name: "tiny-kq-tied", n_layer: 2, n_embd: 256, n_head: 4, n_head_kv: 1, n_ff: 512, n_vocab: 640, n_ctx: 1024, ..LLAMA3 },
    Preset { name: "llama3.2-1b", n_layer: 16, n_embd: 2048, n_head: 32, n_head_kv: 8, n_ff: 8192, n_vocab: 128_256, n_ctx: 131_072, ..LLAMA3 },
    Preset { name: "qwen2.5-1.5b", n_layer: 28, n_embd: 1536, n_head: 12, n_head_kv: 2, n_ff: 8960, n_vocab: 151_936, n_ctx: 32_768, ..QWEN2 },
    // Mixtures of experts. Widths are multiples of 256 so K-quants apply.
    Preset { name: "tiny-moe", n_layer: 2, n_embd: 256, n_head: 4, n_head_kv: 2, n_ff: 512, n_vocab: 640, n_ctx: 1024,
        experts: Some(PresetExperts { n_expert: 8, n_used: 2, n_ff_exp: 256, n_ff_shexp: 512 }), ..QWEN2_MOE },
    Preset { name: "tiny-mixtral", n_layer: 2, n_embd: 256, n_head: 4, n_head_kv: 2, n_ff: 512, n_vocab: 512, n_ctx: 512,
        experts: Some(PresetExperts { n_expert: 4, n_used: 2, n_ff_exp: 512, n_ff_shexp: 0 }), ..MIXTRAL },
    // Gemma 2: head size apart from n_embd / n_head (as gemma2-2b's 256 vs 2304 / 8), and
    // a sliding window short enough that the tests' prompts and continuations cross it.
    Preset { name: "tiny-gemma2", n_layer: 2, n_embd: 256, n_head: 4, n_head_kv: 2, n_ff: 512, n_vocab: 512, n_ctx: 512,
        head_dim: Some(128), sliding_window: Some(16), ..GEMMA2 },
    Preset { name: "gemma2-2b", n_layer: 26, n_embd: 2304, n_head: 8, n_head_kv: 4, n_ff: 9216, n_vocab: 256_000, n_ctx: 8192,
        head_dim: Some(256), sliding_window: Some(4096), ..GEMMA2 },
    // A mixture of experts whose experts (~110 MB in q4_0) dwarf the rest: the test and
    // demo of expert paging under a memory limit of a few tens of MB.
    Preset { name: "small-moe", n_layer: 4, n_embd: 512, n_head: 8, n_head_kv: 8, n_ff: 1024, n_vocab: 640, n_ctx: 1024,
        experts: Some(PresetExperts { n_expert: 32, n_used: 4, n_ff_exp: 1024, n_ff_shexp: 1024 }), ..QWEN2_MOE },
    // Qwen1.5-MoE-A2.7B (seed 002's Fig 13): 60 routed experts, 4 used, a shared expert;
    // 14.3 B weights, ~8 GB in q4_0.
    Preset { name: "qwen1.5-moe-a2.7b", n_layer: 24, n_embd: 2048, n_head: 16, n_head_kv: 16, n_ff: 5632, n_vocab: 151_936, n_ctx: 8192,
        experts: Some(PresetExperts { n_expert: 60, n_used: 4, n_ff_exp: 1408, n_ff_shexp: 5632 }), ..QWEN2_MOE },
    // Mixtral-8x7B's shape, and a small variant of it (8 experts, 2 used, a quarter of
    // the width and depth) that fits a board.
    Preset { name: "mixtral-8x7b", n_layer: 32, n_embd: 4096, n_head: 32, n_head_kv: 8, n_ff: 14_336, n_vocab: 32_000, n_ctx: 32_768,
        experts: Some(PresetExperts { n_expert: 8, n_used: 2, n_ff_exp: 14_336, n_ff_shexp: 0 }), ..MIXTRAL },
    Preset { name: "mixtral-small", n_layer: 8, n_embd: 1024, n_head: 8, n_head_kv: 2, n_ff: 3584, n_vocab: 32_000, n_ctx: 32_768,
        experts: Some(PresetExperts { n_expert: 8, n_used: 2, n_ff_exp: 3584, n_ff_shexp: 0 }), ..MIXTRAL },
];

/// The preset called `name`.
pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// How a tensor's random values are drawn.
#[derive(Clone, Copy, Debug)]
enum Init {
    /// `N(0, std²)`.
    Normal { std: f32 },
    /// `1 + N(0, std²)` (norm weights).
    One { std: f32 },
}

struct TensorPlan {
    name: String,
    dims: Vec<u64>,
    dtype: DType,
    init: Init,
}

/// The file's tensors ([`tensor_specs`]) with their stored type and random values: matrices
/// in `format` with std 1/√fan-in, vectors f32 (norms around 1, biases around 0).
fn plan(p: &Preset, format: WeightFormat) -> Vec<TensorPlan> {
    let arch = crate::model::arch::lookup(p.arch).expect("presets use supported architectures");
    let shapes = TensorShapes {
        n_embd: u64::from(p.n_embd),
        n_embd_q: u64::from(p.head_dim() * p.n_head),
        n_embd_kv: u64::from(p.head_dim() * p.n_head_kv),
        n_ff: u64::from(p.n_ff),
        n_vocab: u64::from(p.n_vocab),
        n_layer: p.n_layer,
        experts: p.experts.map(|x| ExpertShapes {
            n_expert: u64::from(x.n_expert),
            n_ff_exp: u64::from(x.n_ff_exp),
            n_ff_shexp: u64::from(x.n_ff_shexp),
        }),
    };
    let inv = |fan_in: u64| 1.0 / (fan_in as f32).sqrt();
    tensor_specs(arch, shapes)
        .into_iter()
        .filter(|t| !(t.optional && p.tied_embeddings))
        .map(|t| {
            let init = match (t.kind, t.name.as_str()) {
                (TensorKind::Vector, n) if n.ends_with(".bias") => Init::Normal { std: 0.1 },
                (TensorKind::Vector, _) => Init::One { std: 0.1 },
                (TensorKind::Matrix, "token_embd.weight") => Init::Normal { std: 1.0 },
                // Logits with a standard deviation of ~3 after the final norm: clear
                // winners, as trained models have, rather than a near-uniform distribution.
                (TensorKind::Matrix, "output.weight") => Init::Normal {
                    std: 3.0 * inv(t.dims[0]),
                },
                (TensorKind::Matrix | TensorKind::Router, _) => Init::Normal {
                    std: inv(t.dims[0]),
                },
            };
            TensorPlan {
                dtype: match t.kind {
                    TensorKind::Matrix => format.matrix_type(p, &t.name, t.dims[0]),
                    TensorKind::Vector | TensorKind::Router => DType::F32,
                },
                name: t.name,
                dims: t.dims,
                init,
            }
        })
        .collect()
}

/// `general.file_type` of llama.cpp (`enum llama_ftype`) for a weight type; K-quants map to
/// the `_M` mixes that llama.cpp names after them. `None` for types that are no file type
/// (Q8_1, Q8_K, I32): the key is then left out.
fn file_type(dtype: DType) -> Option<u32> {
    Some(match dtype {
        DType::F32 => 0,
        DType::F16 => 1,
        DType::Q4_0 => 2,
        DType::Q4_1 => 3,
        DType::Q8_0 => 7,
        DType::Q5_0 => 8,
        DType::Q5_1 => 9,
        DType::Q2_K => 10,
        DType::Q3_K => 12,
        DType::Q4_K => 15,
        DType::Q5_K => 17,
        DType::Q6_K => 18,
        DType::BF16 => 32,
        DType::Q8_1 | DType::Q8_K | DType::I32 => return None,
    })
}

/// Adds the `tokenizer.ggml.*` keys of `vocab`.
fn add_vocab(w: &mut GgufWriter, vocab: &Vocab) -> Result<(), engine_gguf::GgufError> {
    let k = |s: &str| format!("tokenizer.ggml.{s}");
    w.add_kv(k("model"), vocab.model.as_str())?;
    if let Some(pre) = &vocab.pre {
        w.add_kv(k("pre"), pre.as_str())?;
    }
    w.add_kv(k("tokens"), Array::Str(vocab.tokens.clone()))?;
    if let Some(s) = &vocab.scores {
        w.add_kv(k("scores"), Array::F32(s.clone()))?;
    }
    if let Some(t) = &vocab.token_types {
        w.add_kv(k("token_type"), Array::I32(t.clone()))?;
    }
    if let Some(m) = &vocab.merges {
        w.add_kv(k("merges"), Array::Str(m.clone()))?;
    }
    let ids = [
        ("bos_token_id", vocab.bos_token_id),
        ("eos_token_id", vocab.eos_token_id),
        ("eot_token_id", vocab.eot_token_id),
        ("unknown_token_id", vocab.unknown_token_id),
        ("padding_token_id", vocab.padding_token_id),
    ];
    for (key, id) in ids {
        if let Some(id) = id {
            w.add_kv(k(key), id)?;
        }
    }
    let flags = [
        ("add_bos_token", vocab.add_bos_token),
        ("add_eos_token", vocab.add_eos_token),
        ("add_space_prefix", vocab.add_space_prefix),
    ];
    for (key, flag) in flags {
        if let Some(flag) = flag {
            w.add_kv(k(key), flag)?;
        }
    }
    Ok(())
}

/// The published chat template whose special tokens the vocabulary kind has: Llama 2's
/// `[INST]` for SentencePiece, Llama 3's headers for Llama 3 BPE, ChatML for Qwen2 BPE
/// (Qwen2.5's own template is ChatML with a default system message and tool calls).
fn chat_template(kind: SynthKind) -> &'static str {
    match kind {
        SynthKind::Spm => known_templates::LLAMA2,
        SynthKind::Llama3Bpe => known_templates::LLAMA3,
        SynthKind::Qwen2Bpe => known_templates::CHATML,
    }
}

/// Writes preset `p` with weight matrices in `format` and random seed `seed` to `path`.
pub fn write_model(
    p: &Preset,
    format: WeightFormat,
    seed: u64,
    path: &Path,
    progress: bool,
) -> Result<(), EngineError> {
    let gguf = |source| EngineError::Gguf {
        path: path.to_owned(),
        source,
    };
    let mut w = GgufWriter::new();
    let a = p.arch;
    let kvs: Vec<(String, Value)> = vec![
        ("general.architecture".into(), a.into()),
        (
            "general.name".into(),
            format!("profinfer synthetic {}", p.name).into(),
        ),
        ("general.quantization_version".into(), 2u32.into()),
        (format!("{a}.context_length"), p.n_ctx.into()),
        (format!("{a}.embedding_length"), p.n_embd.into()),
        (format!("{a}.block_count"), p.n_layer.into()),
        (format!("{a}.feed_forward_length"), p.n_ff.into()),
        (format!("{a}.attention.head_count"), p.n_head.into()),
        (format!("{a}.attention.head_count_kv"), p.n_head_kv.into()),
        (
            format!("{a}.attention.layer_norm_rms_epsilon"),
            p.rms_eps.into(),
        ),
        (format!("{a}.rope.freq_base"), p.rope_base.into()),
        (format!("{a}.rope.dimension_count"), p.head_dim().into()),
        (format!("{a}.vocab_size"), p.n_vocab.into()),
    ];
    let mut kvs = kvs;
    if let Some(hd) = p.head_dim {
        kvs.push((format!("{a}.attention.key_length"), hd.into()));
        kvs.push((format!("{a}.attention.value_length"), hd.into()));
    }
    if a == "gemma2" {
        kvs.push((format!("{a}.attn_logit_softcapping"), 50.0f32.into()));
        kvs.push((format!("{a}.final_logit_softcapping"), 30.0f32.into()));
        kvs.push((
            format!("{a}.attention.sliding_window"),
            p.sliding_window.unwrap_or(4096).into(),
        ));
    }
    if let Some(x) = p.experts {
        kvs.push((format!("{a}.expert_count"), x.n_expert.into()));
        kvs.push((format!("{a}.expert_used_count"), x.n_used.into()));
        if a != "llama" {
            kvs.push((format!("{a}.expert_feed_forward_length"), x.n_ff_exp.into()));
        }
        if x.n_ff_shexp > 0 {
            kvs.push((
                format!("{a}.expert_shared_feed_forward_length"),
                x.n_ff_shexp.into(),
            ));
        }
    }
    for (k, v) in kvs {
        w.add_kv(k, v).map_err(gguf)?;
    }
    if let Some(ft) = format.file_type() {
        w.add_kv("general.file_type", ft).map_err(gguf)?;
    }
    let vocab = synth_vocab(p.tokenizer, p.n_vocab as usize, seed).map_err(|e| {
        EngineError::HyperParameter {
            key: "tokenizer.ggml.tokens".into(),
            why: e.to_string(),
        }
    })?;
    add_vocab(&mut w, &vocab).map_err(gguf)?;
    w.add_kv(TEMPLATE_KEY, chat_template(p.tokenizer))
        .map_err(gguf)?;

    let tensors = plan(p, format);
    for t in &tensors {
        let ty = GgmlType::from_id(t.dtype as u32).expect("engine dtypes are ggml types");
        w.add_tensor(t.name.clone(), &t.dims, ty).map_err(gguf)?;
    }
    let io = |what: &str| {
        let what = format!("{what} {}", path.display());
        move |source| EngineError::Io { what, source }
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io("creating the folder of"))?;
    }
    let tmp = path.with_extension("gguf.partial");
    let mut out = BufWriter::with_capacity(1 << 20, File::create(&tmp).map_err(io("creating"))?);
    w.write_header(&mut out).map_err(gguf)?;

    let total: u64 = tensors.iter().map(|t| t.dims.iter().product::<u64>()).sum();
    let bar = if progress {
        ProgressBar::new(total)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:>24} [{bar:40}] {percent:>3}% {elapsed_precise} eta {eta}",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    let mut row = Vec::new();
    let mut data = Vec::new();
    for (i, t) in tensors.iter().enumerate() {
        bar.set_message(t.name.clone());
        let k = t.dims[0] as usize;
        let n_rows: u64 = t.dims[1..].iter().product();
        let row_bytes = t.dtype.row_bytes(k).expect("preset sizes are whole blocks");
        let mut rng =
            ChaCha8Rng::seed_from_u64(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        data.clear();
        data.resize(row_bytes * n_rows as usize, 0u8);
        row.resize(k, 0f32);
        for r in 0..n_rows as usize {
            for x in row.iter_mut() {
                let z: f32 = StandardNormal.sample(&mut rng);
                *x = match t.init {
                    Init::Normal { std } => z * std,
                    Init::One { std } => 1.0 + z * std,
                };
            }
            engine_kernels::quant::quantize_row(
                t.dtype,
                &row,
                &mut data[r * row_bytes..(r + 1) * row_bytes],
            )
            .map_err(|e| EngineError::HyperParameter {
                key: t.name.clone(),
                why: format!("cannot write it as {}: {e}", t.dtype.name()),
            })?;
            bar.inc(k as u64);
        }
        w.write_tensor_data(&mut out, &t.name, &data)
            .map_err(gguf)?;
    }
    w.finish(&mut out).map_err(gguf)?;
    drop(out);
    std::fs::rename(&tmp, path).map_err(io("renaming the finished file to"))?;
    bar.finish_and_clear();
    Ok(())
}

/// Writes a GGUF file holding only `vocab` (and `general.architecture` = `llama`, which
/// llama.cpp needs to read it): for tokenizer tests, which llama.cpp loads with
/// `vocab_only` (as `llama-tokenize` does).
pub fn write_vocab_only(vocab: &Vocab, path: &Path) -> Result<(), EngineError> {
    let gguf = |source| EngineError::Gguf {
        path: path.to_owned(),
        source,
    };
    let mut w = GgufWriter::new();
    w.add_kv("general.architecture", "llama").map_err(gguf)?;
    add_vocab(&mut w, vocab).map_err(gguf)?;
    w.write_to_path(path, &[]).map_err(gguf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_have_consistent_shapes() {
        for p in PRESETS {
            assert_eq!(p.n_embd % p.n_head, 0, "{}", p.name);
            assert_eq!(p.n_head % p.n_head_kv, 0, "{}", p.name);
            for d in [DType::Q4_0, DType::Q8_0] {
                for t in plan(p, WeightFormat::Pure(d)) {
                    assert!(
                        t.dtype.row_bytes(t.dims[0] as usize).is_some(),
                        "{} {}",
                        p.name,
                        t.name
                    );
                }
            }
        }
    }

    #[test]
    fn real_presets_match_the_published_models() {
        let l = preset("llama3.2-1b").expect("preset");
        assert_eq!(
            (
                l.n_layer,
                l.n_embd,
                l.n_head,
                l.n_head_kv,
                l.n_ff,
                l.n_vocab
            ),
            (16, 2048, 32, 8, 8192, 128_256)
        );
        let q = preset("qwen2.5-1.5b").expect("preset");
        assert_eq!(
            (
                q.n_layer,
                q.n_embd,
                q.n_head,
                q.n_head_kv,
                q.n_ff,
                q.n_vocab
            ),
            (28, 1536, 12, 2, 8960, 151_936)
        );
    }
}
