//! Tokenizers for GGUF models that produce exactly llama.cpp's token ids.
//!
//! * [`Vocab`] is the plain tokenizer metadata of a GGUF file
//!   (`tokenizer.ggml.*`, see [`keys`]).
//! * [`Tokenizer`] turns text into ids and back: SentencePiece-style
//!   (`"llama"`) and byte-level BPE (`"gpt2"`) with every pre-tokenizer
//!   family llama.cpp has ([`PreTokenizer`], named by
//!   [`supported_pre_tokenizers`]: `"llama-bpe"`, `"qwen2"`, `"smollm"`, ...).
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
pub use pretokenize::{PreTokenizer, supported_pre_tokenizers};
pub use tokenizer::{MAX_VOCAB_TOKENS, Model, Tokenizer};
pub use vocab::{TokenType, Vocab, keys};

/// Varied strings for comparing this crate against llama.cpp on real and
/// synthetic GGUF files: sentences, whitespace runs, digits, punctuation,
/// contractions, non-ASCII text, emoji and special-token texts, plus what
/// tells the pre-tokenizer families apart (digit groups, case changes,
/// combining marks, CJK/Hangul/Thai runs, fullwidth and Indic punctuation,
/// long whitespace runs, Chameleon's sentinel and image tokens, symbols and
/// non-decimal numbers, curly quotes, Unicode line separators, title-case
/// letters, lone carriage returns).
pub const ORACLE_STRINGS: &[&str] = &[
    "",
    " ",
    "   ",
    "Hello world",
    " Hello world",
    "Hello  world  ",
    "hello World! How are you?",
    "  two leading spaces",
    "trailing spaces   ",
    "   leading and trailing   ",
    "multiple   spaces\tand\ttabs",
    "The quick brown fox jumps over the lazy dog.",
    "tabs\tand\nnewlines\n\n\r\nend",
    "new\nlines\n\nand\r\nCRLF",
    "\n\n\n",
    "1234567890",
    "1234567 3.14 -42 1,000,000",
    "3.14159 and 2,718,281",
    "mixed123numbers456x7",
    "2024-01-01T12:00:00Z",
    "x=1;y=22;z=333;w=4444;v=55555;u=123456789012",
    "Hello, world! How are you? (fine); [ok] {yes} <no>",
    "punctuation!?.,;:'\"()[]{}<>@#$%^&*",
    "don't I'll we're they've she'd it's I'M YOU'LL",
    "don't won't it's I'm we'll they've",
    "'s 'T 'Re 'VE 'm 'LL 'd ''x '",
    "snake_case, camelCase and kebab-case",
    "HTTPServer getURLPath iPhone McDonald's ABCdef XMLHttpRequest",
    "héllo wörld, ça va? Über naïve façade",
    "UTF-8: café, naïve, Zürich, façade",
    "cafe\u{301} nai\u{308}ve a\u{30a}\u{301}b",
    "Ελληνικά γράμματα",
    "Русский текст",
    "Привет, мир!",
    "你好世界",
    "中文字符和标点。",
    "日本語のテキスト",
    "こんにちは、世界！",
    "カタカナとひらがなと漢字",
    "한국어 텍스트입니다",
    "ภาษาไทยสวัสดี",
    "हिन्दी पाठ। अगला वाक्य۔ عربي، نص",
    "你好world世界test 123中文",
    "fullwidth：ＡＢＣ！１２３…「引用」",
    "🦀🚀 emoji 👍🏽 mixed",
    "emoji 🦀🚀 end",
    "fn main() {\n    println!(\"hi {}\", 1 + 2);\n}\n",
    "def f(x):\n\treturn x ** 2  # square",
    "    four\n        eight\n                sixteen spaces\n",
    "a                                     b",
    "a\u{00A0}b\u{3000}c",
    "\u{a0}no-break space and zero\u{200b}width",
    "<sentinel:12> IMGIMGABZ IMGIMGAAAAAZ",
    "<s>",
    "</s>",
    "<s>x</s>",
    "<s> hello </s>",
    "<s> [INST] hello [/INST]",
    "<|im_start|>user\nhi<|im_end|>",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|>Hello<|end_of_text|>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "<|endoftext|>",
    "<|endoftext|>after",
    "$$$ %%% ^^^ ~~~ ``` |||",
    "supercalifragilisticexpialidocious",
    "price 100€ © ±5 ½ ²³ ٣٤٥ ۱۲ ⅷ",
    "don’t “quoted” — dash… ellipsis",
    "tab\t\tend\u{2003}em\u{2028}line\u{85}nel",
    "ÀÉÎõü ǅ ǈ ᾈ Σσς",
    "x\r\ny\r\rz\n\r",
];
