//! Errors of the analyzer.

use std::path::PathBuf;

/// Why an analysis failed.
#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    /// The trace could not be opened or is not a valid profinfer trace.
    #[error("cannot read trace `{path}`")]
    Trace {
        /// The trace file.
        path: PathBuf,
        /// The reader's error.
        #[source]
        source: trace_format::TraceError,
    },
    /// The DAG of the selected iteration could not be built.
    #[error(transparent)]
    Dag(#[from] crate::dag::DagError),
    /// An output file could not be written.
    #[error("cannot write `{path}`")]
    Write {
        /// The output file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A JSON output could not be serialised.
    #[error("cannot serialise `{path}`")]
    Json {
        /// The output file.
        path: PathBuf,
        /// The serialiser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A plot could not be drawn.
    #[error("cannot draw plot `{path}`: {message}")]
    Plot {
        /// The output file.
        path: PathBuf,
        /// The plotting library's message.
        message: String,
    },
}
