//! GGUF v3 reader and writer.
//!
//! [`GgufFile`] memory-maps (or takes) a GGUF file, validates its header against the
//! limits in [`limits`] — the file may be hostile — and hands out tensor data as
//! borrowed byte slices. [`GgufWriter`] writes GGUF v3 files that llama.cpp loads,
//! streaming tensor data one tensor at a time.

mod cursor;
pub mod error;
pub mod limits;
pub mod metadata;
pub mod reader;
pub mod tensor;
pub mod value;
pub mod writer;

pub use common::ggml_type::GgmlType;
pub use error::GgufError;
pub use metadata::Metadata;
pub use reader::{GgufFile, GgufHeader, parse_header};
pub use tensor::TensorInfo;
pub use value::{Array, Value, ValueType};
pub use writer::GgufWriter;
