//! Errors of reading and writing traces.

use std::path::PathBuf;

/// Why a trace could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be opened, read or written.
    #[error("I/O error on trace `{path}`")]
    Io {
        /// The trace file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with the profinfer magic.
    #[error("`{path}` is not a profinfer trace (bad magic)")]
    BadMagic {
        /// The file.
        path: PathBuf,
    },
    /// The file was written by a format version this reader does not read.
    #[error(
        "trace format version {found} is not supported (this reader reads versions {oldest} to {supported})"
    )]
    UnsupportedVersion {
        /// Version in the file.
        found: u32,
        /// Newest version this reader reads (the one it writes).
        supported: u32,
        /// Oldest version this reader reads.
        oldest: u32,
    },
    /// The header chunk is missing, truncated or corrupt.
    #[error("trace header is missing or corrupt at byte {offset}")]
    BadHeader {
        /// Byte offset of the header chunk.
        offset: u64,
    },
    /// A header or footer chunk's JSON does not parse.
    #[error("trace {what} at byte {offset} is not valid JSON")]
    Json {
        /// `header` or `footer`.
        what: &'static str,
        /// Byte offset of the chunk.
        offset: u64,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A record inside an event chunk is cut short or names a kind of unknown size.
    #[error("bad event record at byte {offset} (kind {kind}, {remaining} bytes left in chunk)")]
    BadRecord {
        /// Byte offset of the record in the file.
        offset: u64,
        /// Its kind number.
        kind: u32,
        /// Bytes left in the chunk.
        remaining: usize,
    },
    /// Serialising the header or footer failed.
    #[error("could not serialise the trace {what}")]
    Serialize {
        /// `header` or `footer`.
        what: &'static str,
        /// The serialiser's error.
        #[source]
        source: serde_json::Error,
    },
}
