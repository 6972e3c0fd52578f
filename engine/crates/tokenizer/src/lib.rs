//! Tokenizers for GGUF models that produce exactly llama.cpp's token ids.
//!
//! * [`Vocab`] is the plain tokenizer metadata of a GGUF file
//!   (`tokenizer.ggml.*`, see [`keys`]).
//! * [`Tokenizer`] turns text into ids and back: SentencePiece-style
//!   (`"llama"`) and byte-level BPE (`"gpt2"`, pre-tokenizers `"default"`,
//!   `"llama-bpe"`, `"qwen2"`, ...).
//! * [`synth`] generates complete, consistent vocabularies of any size for
//!   synthetic test models.

mod bpe;
mod error;
mod pretokenize;
mod special;
mod spm;
mod symbols;
pub mod synth;
mod tokenizer;
mod unicode;
mod vocab;

pub use error::TokenizerError;
pub use pretokenize::PreTokenizer;
pub use tokenizer::{MAX_VOCAB_TOKENS, Model, Tokenizer};
pub use vocab::{TokenType, Vocab, keys};

/// Varied strings for comparing this crate against llama.cpp on real GGUF
/// files: sentences, whitespace runs, digits, punctuation, contractions,
/// non-ASCII text, emoji and special-token texts.
pub const ORACLE_STRINGS: &[&str] = &[
    "",
    " ",
    "Hello world",
    " Hello world",
    "Hello  world  ",
    "   leading and trailing   ",
    "The quick brown fox jumps over the lazy dog.",
    "tabs\tand\nnewlines\n\n\r\nend",
    "\n\n\n",
    "1234567 3.14 -42 1,000,000",
    "2024-01-01T12:00:00Z",
    "Hello, world! How are you? (fine); [ok] {yes} <no>",
    "don't I'll we're they've she'd it's I'M YOU'LL",
    "héllo wörld, ça va? Über naïve façade",
    "你好世界",
    "こんにちは、世界！",
    "Привет, мир!",
    "🦀🚀 emoji 👍🏽 mixed",
    "fn main() {\n    println!(\"hi {}\", 1 + 2);\n}\n",
    "def f(x):\n\treturn x ** 2  # square",
    "a\u{00A0}b\u{3000}c",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "<s>x</s>",
    "<s> [INST] hello [/INST]",
    "<|endoftext|>after",
    "$$$ %%% ^^^ ~~~ ``` |||",
];
