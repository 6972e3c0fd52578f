//! The tokenizer vocabulary as stored in GGUF metadata (plain data).

/// GGUF metadata keys of the tokenizer fields.
pub mod keys {
    /// `tokenizer.ggml.model`: `"llama"` (SentencePiece-style) or `"gpt2"` (byte-level BPE).
    pub const MODEL: &str = "tokenizer.ggml.model";
    /// `tokenizer.ggml.pre`: pre-tokenizer name of a `"gpt2"` vocabulary.
    pub const PRE: &str = "tokenizer.ggml.pre";
    /// `tokenizer.ggml.tokens`: string array, one entry per token id.
    pub const TOKENS: &str = "tokenizer.ggml.tokens";
    /// `tokenizer.ggml.scores`: f32 array, one score per token (SPM).
    pub const SCORES: &str = "tokenizer.ggml.scores";
    /// `tokenizer.ggml.token_type`: i32 array, one [`TokenType`](super::TokenType) per token.
    pub const TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
    /// `tokenizer.ggml.merges`: string array of `"left right"` BPE merges, by rank.
    pub const MERGES: &str = "tokenizer.ggml.merges";
    /// `tokenizer.ggml.bos_token_id` (u32).
    pub const BOS_ID: &str = "tokenizer.ggml.bos_token_id";
    /// `tokenizer.ggml.eos_token_id` (u32).
    pub const EOS_ID: &str = "tokenizer.ggml.eos_token_id";
    /// `tokenizer.ggml.eot_token_id` (u32).
    pub const EOT_ID: &str = "tokenizer.ggml.eot_token_id";
    /// `tokenizer.ggml.unknown_token_id` (u32).
    pub const UNKNOWN_ID: &str = "tokenizer.ggml.unknown_token_id";
    /// `tokenizer.ggml.padding_token_id` (u32).
    pub const PADDING_ID: &str = "tokenizer.ggml.padding_token_id";
    /// `tokenizer.ggml.add_bos_token` (bool).
    pub const ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
    /// `tokenizer.ggml.add_eos_token` (bool).
    pub const ADD_EOS: &str = "tokenizer.ggml.add_eos_token";
    /// `tokenizer.ggml.add_space_prefix` (bool).
    pub const ADD_SPACE_PREFIX: &str = "tokenizer.ggml.add_space_prefix";
}

/// Token type ids of `tokenizer.ggml.token_type` (llama.cpp `llama_token_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum TokenType {
    /// 0: undefined.
    Undefined = 0,
    /// 1: an ordinary piece of text.
    Normal = 1,
    /// 2: the unknown token.
    Unknown = 2,
    /// 3: a control token (BOS, EOS, chat markers); never produced from text
    /// unless special tokens are parsed.
    Control = 3,
    /// 4: user-defined; always split out of text before tokenizing.
    UserDefined = 4,
    /// 5: unused placeholder.
    Unused = 5,
    /// 6: a raw byte `<0xXX>` (SPM byte fallback).
    Byte = 6,
}

impl TokenType {
    /// The GGUF integer of this type.
    pub const fn as_i32(self) -> i32 {
        self as i32
    }

    /// Decode a GGUF integer; unknown values are `None`.
    pub const fn from_i32(value: i32) -> Option<Self> {
        Some(match value {
            0 => TokenType::Undefined,
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => return None,
        })
    }
}

/// Tokenizer vocabulary mapped 1:1 from GGUF metadata keys.
///
/// Optional fields are `None` when the key is absent; the tokenizer then
/// applies llama.cpp's defaults for the model type.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Vocab {
    /// `tokenizer.ggml.model`: `"llama"` or `"gpt2"`.
    pub model: String,
    /// `tokenizer.ggml.pre`: pre-tokenizer name (`"llama-bpe"`, `"qwen2"`, `"default"`, ...).
    pub pre: Option<String>,
    /// `tokenizer.ggml.tokens`: token text by id.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.scores`: per-token score (SPM merge priority).
    pub scores: Option<Vec<f32>>,
    /// `tokenizer.ggml.token_type`: per-token [`TokenType`] as i32.
    pub token_types: Option<Vec<i32>>,
    /// `tokenizer.ggml.merges`: `"left right"` merges, rank = index (BPE).
    pub merges: Option<Vec<String>>,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos_token_id: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos_token_id: Option<u32>,
    /// `tokenizer.ggml.eot_token_id`.
    pub eot_token_id: Option<u32>,
    /// `tokenizer.ggml.unknown_token_id`.
    pub unknown_token_id: Option<u32>,
    /// `tokenizer.ggml.padding_token_id`.
    pub padding_token_id: Option<u32>,
    /// `tokenizer.ggml.add_bos_token`.
    pub add_bos_token: Option<bool>,
    /// `tokenizer.ggml.add_eos_token`.
    pub add_eos_token: Option<bool>,
    /// `tokenizer.ggml.add_space_prefix`.
    pub add_space_prefix: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_type_round_trips() {
        for v in 0..=6 {
            assert_eq!(TokenType::from_i32(v).map(TokenType::as_i32), Some(v));
        }
        assert_eq!(TokenType::from_i32(7), None);
        assert_eq!(TokenType::from_i32(-1), None);
    }
}
