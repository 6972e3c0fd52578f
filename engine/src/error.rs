//! The engine's error type.

use std::path::PathBuf;

/// Everything that can go wrong loading a model or running it.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    // === Model files ===
    /// The GGUF file could not be read or is malformed (the cause follows in the chain).
    #[error("{path}")]
    Gguf {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: engine_gguf::GgufError,
    },
    /// The file's architecture is not one this engine implements.
    #[error("unknown architecture `{arch}` (supported: {supported})")]
    UnknownArchitecture {
        /// `general.architecture` of the file.
        arch: String,
        /// Comma-separated list of supported architectures.
        supported: String,
    },
    /// A required tensor is absent.
    #[error("missing tensor `{name}`")]
    MissingTensor {
        /// Tensor name.
        name: String,
    },
    /// A weight matrix could not be repacked for the CPU backend.
    #[error("tensor `{name}` cannot be repacked: {why}")]
    Repack {
        /// Tensor name.
        name: String,
        /// What the kernel reported.
        why: String,
    },
    /// A tensor has a type this engine cannot compute with.
    #[error("tensor `{name}` has type {ty}, which this engine does not support ({supported})")]
    UnsupportedTensorType {
        /// Tensor name.
        name: String,
        /// ggml type name.
        ty: String,
        /// The types it could have, comma-separated.
        supported: String,
    },
    /// A tensor's shape does not match the hyper-parameters.
    #[error("tensor `{name}` has shape {found:?}, expected {expected:?}")]
    TensorShape {
        /// Tensor name.
        name: String,
        /// Shape in the file.
        found: Vec<u64>,
        /// Shape the hyper-parameters call for.
        expected: Vec<u64>,
    },
    /// The hyper-parameters are inconsistent or out of range.
    #[error("invalid hyper-parameter {key}: {why}")]
    HyperParameter {
        /// Metadata key.
        key: String,
        /// What is wrong.
        why: String,
    },
    /// The tokenizer metadata is unusable.
    #[error("tokenizer")]
    Tokenizer(#[from] engine_tokenizer::TokenizerError),

    // === Running ===
    /// The prompt plus the tokens to generate do not fit the context.
    #[error(
        "{n_tokens} tokens do not fit the context of {n_ctx} (use -c to enlarge it, up to the model's {n_ctx_train})"
    )]
    ContextFull {
        /// Tokens that were to be processed in total.
        n_tokens: usize,
        /// Context size in use.
        n_ctx: usize,
        /// Context length the model was trained with.
        n_ctx_train: usize,
    },
    /// A token id is outside the vocabulary.
    #[error("token id {id} is outside the vocabulary of {n_vocab}")]
    TokenOutOfRange {
        /// The id.
        id: i64,
        /// Vocabulary size.
        n_vocab: usize,
    },
    /// The prompt is empty.
    #[error("the prompt is empty")]
    EmptyPrompt,
    /// A graph outgrew its reserved node capacity (an engine bug).
    #[error("graph has more {what} than its capacity of {capacity}")]
    GraphFull {
        /// `nodes` or `leaves`.
        what: &'static str,
        /// Reserved capacity.
        capacity: usize,
    },
    /// A decode call failed.
    #[error("decode failed with code {code}")]
    Decode {
        /// Return code of `engine_decode`.
        code: i32,
    },
    /// The KV budget cannot hold what one layer's attention needs.
    #[error(
        "the KV budget of {budget} bytes cannot hold layer {layer}'s cache at {n_kv} tokens ({needed} bytes); raise --kv-budget"
    )]
    KvBudget {
        /// The budget.
        budget: u64,
        /// The layer.
        layer: usize,
        /// Positions attended.
        n_kv: usize,
        /// Bytes that layer needs resident.
        needed: u64,
    },
    /// `--mem-limit` cannot be set up.
    #[error("cannot limit the memory: {why}")]
    MemLimit {
        /// Why.
        why: String,
    },
    /// An I/O error (the cause follows in the chain).
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// `e` and its causes on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}
