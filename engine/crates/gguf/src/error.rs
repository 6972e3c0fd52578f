//! The error type of this crate.

use std::io;
use std::path::PathBuf;

use crate::GgmlType;

/// Everything that can go wrong reading, querying or writing a GGUF file. Offsets are
/// byte offsets from the start of the file.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The file could not be opened, inspected or mapped.
    #[error("cannot read GGUF file {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// Writing the output failed.
    #[error("cannot write GGUF output: {source}")]
    Write {
        /// The underlying error.
        source: io::Error,
    },
    /// The file does not start with `GGUF`.
    #[error("not a GGUF file: magic at byte 0 is {found:02x?}, expected \"GGUF\"")]
    BadMagic {
        /// The first four bytes of the file.
        found: [u8; 4],
    },
    /// The version field is not one this crate reads.
    #[error("unsupported GGUF version {version} at byte 4 (supported: 2 and 3)")]
    UnsupportedVersion {
        /// The version read (little-endian).
        version: u32,
    },
    /// The file is a big-endian GGUF file.
    #[error(
        "big-endian GGUF file (version {version} read byte-swapped); only little-endian is supported"
    )]
    BigEndian {
        /// The byte-swapped version number.
        version: u32,
    },
    /// The file ends before a field that the header says is there.
    #[error(
        "file truncated: {what} at byte {offset} needs {needed} bytes but only {available} remain"
    )]
    Truncated {
        /// Where the field starts.
        offset: u64,
        /// Bytes the field needs.
        needed: u64,
        /// Bytes left in the file from `offset`.
        available: u64,
        /// What was being read.
        what: &'static str,
    },
    /// A string is longer than the limit.
    #[error("{what} at byte {offset} has length {len}, more than the limit of {max} bytes")]
    StringTooLong {
        /// Where the length field is.
        offset: u64,
        /// The length read.
        len: u64,
        /// The limit.
        max: u64,
        /// What kind of string.
        what: &'static str,
    },
    /// A string is not valid UTF-8.
    #[error("{what} at byte {offset} is not valid UTF-8")]
    InvalidUtf8 {
        /// Where the string's bytes start.
        offset: u64,
        /// What kind of string.
        what: &'static str,
    },
    /// A count in the file exceeds its limit.
    #[error("too many {what} at byte {offset}: {count}, the limit is {max}")]
    TooMany {
        /// What is being counted.
        what: &'static str,
        /// The count read.
        count: u64,
        /// The limit.
        max: u64,
        /// Where the count is.
        offset: u64,
    },
    /// Arrays are nested deeper than the limit.
    #[error("array at byte {offset} is nested more than {max} levels deep")]
    ArrayTooDeep {
        /// Where the innermost offending array starts.
        offset: u64,
        /// The limit.
        max: u32,
    },
    /// A metadata value type id is unknown.
    #[error("unknown metadata value type {type_id} at byte {offset}")]
    UnknownValueType {
        /// Where the type id is.
        offset: u64,
        /// The id read.
        type_id: u32,
    },
    /// A boolean byte is neither 0 nor 1.
    #[error("invalid boolean value {value} at byte {offset} (must be 0 or 1)")]
    InvalidBool {
        /// Where the byte is.
        offset: u64,
        /// The byte read.
        value: u8,
    },
    /// A metadata key occurs twice.
    #[error("duplicate metadata key {key:?} at byte {offset}")]
    DuplicateKey {
        /// The key.
        key: String,
        /// Where the second occurrence starts (0 when writing).
        offset: u64,
    },
    /// A tensor name occurs twice.
    #[error("duplicate tensor name {name:?} at byte {offset}")]
    DuplicateTensor {
        /// The name.
        name: String,
        /// Where the second tensor info starts (0 when writing).
        offset: u64,
    },
    /// A tensor has more dimensions than ggml supports.
    #[error("tensor {name} has {n_dims} dimensions, more than the limit of {max}")]
    TooManyDims {
        /// The tensor.
        name: String,
        /// Its number of dimensions.
        n_dims: u32,
        /// The limit.
        max: u32,
    },
    /// A tensor's element count or byte size overflows.
    #[error("tensor {name} has dimensions {dims:?} whose element count or byte size overflows")]
    ShapeOverflow {
        /// The tensor.
        name: String,
        /// Its dimensions.
        dims: Vec<u64>,
    },
    /// A tensor's rows are not a whole number of blocks of its type.
    #[error(
        "tensor {name} has ne[0] = {ne0}, not a multiple of the block size {block_len} of {ggml_type}"
    )]
    PartialBlock {
        /// The tensor.
        name: String,
        /// Its first (innermost) dimension.
        ne0: u64,
        /// Its type.
        ggml_type: GgmlType,
        /// The type's block size.
        block_len: u64,
    },
    /// A tensor type id is not a known ggml type.
    #[error("tensor {name} at byte {offset} has unknown ggml type id {type_id}")]
    UnknownTensorType {
        /// The tensor.
        name: String,
        /// The id read.
        type_id: u32,
        /// Where the type id is.
        offset: u64,
    },
    /// A known ggml type that the caller does not support.
    #[error("tensor {name} has type {ggml_type}, which this engine does not support")]
    UnsupportedTensorType {
        /// The tensor.
        name: String,
        /// Its type.
        ggml_type: GgmlType,
    },
    /// A tensor's data does not lie inside the file.
    #[error(
        "tensor {name} data at byte {offset} with size {size} extends past the end of the file ({file_size} bytes)"
    )]
    TensorOutOfBounds {
        /// The tensor.
        name: String,
        /// Absolute offset of its data (saturated at `u64::MAX` if it overflows).
        offset: u64,
        /// Its size in bytes.
        size: u64,
        /// The file size.
        file_size: u64,
    },
    /// A tensor's data offset is not a multiple of the alignment.
    #[error(
        "tensor {name} has data offset {offset} (relative to the data section), not a multiple of the alignment {alignment}"
    )]
    Misaligned {
        /// The tensor.
        name: String,
        /// Its offset relative to the data section.
        offset: u64,
        /// The alignment.
        alignment: u64,
    },
    /// `general.alignment` is zero, not a power of two, or too large.
    #[error("general.alignment = {alignment} is not a power of two between 1 and {max}")]
    BadAlignment {
        /// The value given.
        alignment: u64,
        /// The limit.
        max: u64,
    },
    /// A tensor name is longer than ggml accepts.
    #[error("tensor name {name:?} is {len} bytes long, more than the limit of {max}")]
    TensorNameTooLong {
        /// The name.
        name: String,
        /// Its length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// A metadata value (when writing) breaks a limit.
    #[error("metadata value of {key:?} breaks a limit: {limit}")]
    ValueTooLarge {
        /// The key.
        key: String,
        /// The limit broken.
        limit: &'static str,
    },
    /// A required metadata key is missing.
    #[error("metadata key {key:?} is missing")]
    KeyMissing {
        /// The key.
        key: String,
    },
    /// A metadata key has a different type than required.
    #[error("metadata key {key:?} has type {found}, expected {expected}")]
    KeyType {
        /// The key.
        key: String,
        /// The type required.
        expected: &'static str,
        /// The type found.
        found: String,
    },
    /// An integer metadata value does not fit the requested type.
    #[error("metadata key {key:?} has value {value}, which does not fit in {target}")]
    KeyOutOfRange {
        /// The key.
        key: String,
        /// The value.
        value: i128,
        /// The requested type.
        target: &'static str,
    },
    /// A required tensor is missing.
    #[error("tensor {name} is missing")]
    TensorMissing {
        /// The tensor name.
        name: String,
    },
    /// The writer was used in the wrong order.
    #[error("GGUF writer misuse: {problem}")]
    WriterState {
        /// What was wrong.
        problem: &'static str,
    },
    /// Tensor data was written in a different order than declared.
    #[error("tensor data for {got} written out of order, expected {expected}")]
    TensorOutOfOrder {
        /// The tensor whose data was given.
        got: String,
        /// The tensor whose data is due.
        expected: String,
    },
    /// Tensor data has the wrong size.
    #[error("tensor {name} needs {expected} bytes of data, got {got}")]
    TensorSizeMismatch {
        /// The tensor.
        name: String,
        /// Its size in bytes.
        expected: u64,
        /// The number of bytes given.
        got: u64,
    },
    /// `finish` was called before every tensor's data was written.
    #[error("only {written} of {declared} tensors had their data written")]
    TensorsNotWritten {
        /// Tensors written.
        written: usize,
        /// Tensors declared.
        declared: usize,
    },
}
