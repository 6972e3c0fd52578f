//! Limits on values read from (and written to) a GGUF file.
//!
//! A GGUF file may be hostile: every count and length in it is checked against these
//! limits before it is used, and no allocation is ever sized by a count alone.

/// Magic bytes at the start of every GGUF file.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// The version this crate writes.
pub const GGUF_VERSION: u32 = 3;
/// Oldest version this crate reads (version 1 used 32-bit counts and is not supported).
pub const MIN_READ_VERSION: u32 = 2;
/// Alignment of tensor data when the file has no `general.alignment` key.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The metadata key holding the tensor data alignment.
pub const ALIGNMENT_KEY: &str = "general.alignment";

/// Largest metadata string (key or value) in bytes. Chat templates are the longest
/// strings in real files and stay far below this.
pub const MAX_STRING_LEN: u64 = 16 << 20;
/// Largest tensor name in bytes: ggml's `GGML_MAX_NAME` is 64 including the NUL, and
/// llama.cpp rejects names of 64 bytes or more.
pub const MAX_TENSOR_NAME_LEN: u64 = 63;
/// Largest number of elements of one metadata array (vocabularies have ~10^5..10^6).
pub const MAX_ARRAY_LEN: u64 = 1 << 24;
/// Deepest nesting of arrays inside arrays (1 = a plain array of scalars or strings).
pub const MAX_ARRAY_DEPTH: u32 = 4;
/// Largest number of tensors in one file.
pub const MAX_TENSORS: u64 = 1 << 20;
/// Largest number of metadata key/value pairs in one file.
pub const MAX_KV_PAIRS: u64 = 1 << 16;
/// Largest number of dimensions of a tensor (ggml's `GGML_MAX_DIMS`).
pub const MAX_DIMS: u32 = 4;
/// Largest accepted `general.alignment`.
pub const MAX_ALIGNMENT: u64 = 1 << 20;
/// Largest element count of one tensor (ggml counts elements in an `int64_t`).
pub const MAX_TENSOR_ELEMENTS: u64 = i64::MAX as u64;
