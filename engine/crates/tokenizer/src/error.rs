//! Errors building a tokenizer from a vocabulary.

/// Why a [`Vocab`](crate::Vocab) cannot be turned into a [`Tokenizer`](crate::Tokenizer).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TokenizerError {
    /// `tokenizer.ggml.model` is not one of the supported models.
    #[error("unknown tokenizer model {model:?} (supported: \"llama\", \"gpt2\")")]
    UnknownModel {
        /// The model name found.
        model: String,
    },
    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not implement.
    #[error(
        "unsupported pre-tokenizer {pre:?} (tokenizer.ggml.pre){}; supported: {supported}",
        reason.map(|r| format!(": {r}")).unwrap_or_default()
    )]
    UnsupportedPreTokenizer {
        /// The pre-tokenizer name found.
        pre: String,
        /// Why, when llama.cpp knows the name but this crate refuses it.
        reason: Option<&'static str>,
        /// The supported names, comma-separated.
        supported: String,
    },
    /// The vocabulary has no tokens.
    #[error("the vocabulary has no tokens")]
    EmptyVocab,
    /// More tokens than token ids can address.
    #[error("{count} tokens exceed the limit of {limit}")]
    TooManyTokens {
        /// Number of tokens found.
        count: usize,
        /// Largest supported vocabulary.
        limit: usize,
    },
    /// A per-token array does not have one entry per token.
    #[error("{array} has {len} entries but there are {n_tokens} tokens")]
    InconsistentArrays {
        /// Which array (`"scores"` or `"token_types"`).
        array: &'static str,
        /// Its length.
        len: usize,
        /// Number of tokens.
        n_tokens: usize,
    },
    /// Two token ids share the same text.
    #[error("token text {text:?} appears as id {first} and id {second}")]
    DuplicateToken {
        /// The text.
        text: String,
        /// First id with that text.
        first: u32,
        /// Second id with that text.
        second: u32,
    },
    /// A special-token id points outside the vocabulary.
    #[error("{field} = {id} is out of range for {n_tokens} tokens")]
    TokenIdOutOfRange {
        /// The vocabulary field (`"bos_token_id"`, ...).
        field: &'static str,
        /// The id.
        id: u32,
        /// Number of tokens.
        n_tokens: usize,
    },
    /// `add_bos_token`/`add_eos_token` is set but the token is not.
    #[error("{flag} is true but the vocabulary has no {token} token")]
    MissingSpecialToken {
        /// The flag (`"add_bos_token"` or `"add_eos_token"`).
        flag: &'static str,
        /// The token kind (`"BOS"` or `"EOS"`).
        token: &'static str,
    },
    /// An SPM vocabulary lacks a byte-fallback token.
    #[error("SPM vocabulary has no byte token for 0x{byte:02X} (<0x{byte:02X}>)")]
    MissingByteToken {
        /// The byte without a token.
        byte: u8,
    },
    /// A BPE vocabulary has no `tokenizer.ggml.merges`.
    #[error("the BPE vocabulary has no merges (tokenizer.ggml.merges)")]
    MissingMerges,
    /// A merge line is not two space-separated parts.
    #[error("merge {rank} {line:?} is not of the form \"left right\"")]
    BadMerge {
        /// Index (rank) of the merge.
        rank: usize,
        /// The line.
        line: String,
    },
}
