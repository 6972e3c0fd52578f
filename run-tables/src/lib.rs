//! Every recorded run as rows: `profinfer export TRACE... --parquet DIR` writes one
//! Parquet file per table and run, `DIR/<table>/<run_id>.parquet`, so a directory holds
//! any number of runs (boards × models × builds) and each table reads as one:
//!
//! ```sql
//! SELECT r.label, o.op, median(o.dur_ns) / 1e3 AS median_us
//! FROM read_parquet('runs/operators/*.parquet') o
//! JOIN read_parquet('runs/runs/*.parquet') r USING (run_id)
//! GROUP BY ALL;
//! ```
//!
//! Exporting the same trace again rewrites its files (same `run_id`); exporting another
//! adds files beside them. The schema is in `docs/evaluation.md#run-tables`.

mod columns;
pub mod tables;

use std::path::{Path, PathBuf};

use analyzer::{NoProgress, Progress, TraceModel};
use thiserror::Error;

pub use columns::Columns;

/// Why an export failed.
#[derive(Debug, Error)]
pub enum ExportError {
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] analyzer::AnalyzeError),
    /// A file or directory could not be written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Arrow or Parquet refused a table.
    #[error("{}: {message}", path.display())]
    Parquet {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// The tables, in the order they are written.
pub const TABLES: &[&str] = &[
    "runs",
    "tokens",
    "graphs",
    "operators",
    "operator_counters",
    "threads",
    "counters",
    "experts",
];

/// One exported trace.
#[derive(Clone, Debug)]
pub struct ExportedRun {
    /// Its key in every table.
    pub run_id: String,
    /// Rows written per table, in [`TABLES`] order.
    pub rows: Vec<(&'static str, usize)>,
}

/// The key of a run: host, target pid and the wall-clock time of its first event
/// (`host-pid-unixns`, file-name safe), stable across exports of the same trace and
/// distinct for any two recordings on a fleet.
pub fn run_id(header: &trace_format::TraceHeader, model: &TraceModel) -> String {
    let first = model.first_ns().unwrap_or(0) as i64;
    let wall = first.saturating_add(header.monotonic_to_wall_offset_ns);
    let host: String = header
        .host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{host}-{}-{wall}", header.target.pid)
}

/// Reads `trace` and writes its rows to `dir` (created if missing) under `label`.
///
/// # Errors
/// [`ExportError`] when the trace cannot be read or a table cannot be written. A
/// truncated trace is exported up to where it stops, as `profinfer analyze` reads it.
pub fn export_trace(
    trace: &Path,
    dir: &Path,
    label: &str,
    progress: &dyn Progress,
) -> Result<ExportedRun, ExportError> {
    let (model, reader, _) = analyzer::ingest::load(trace, progress)?;
    let header = reader.header();
    let run_id = run_id(header, &model);
    let info = tables::RunInfo {
        run_id: &run_id,
        label,
        trace: &trace.display().to_string(),
        header,
        footer: reader.footer(),
    };
    let mut rows = Vec::new();
    for &table in TABLES {
        let columns = match table {
            "runs" => tables::runs(&info, &model),
            "tokens" => tables::tokens(&run_id, &model),
            "graphs" => tables::graphs(&run_id, &model),
            "operators" => tables::operators(&run_id, &model),
            "operator_counters" => tables::operator_counters(&run_id, &model),
            "threads" => tables::threads(&run_id, &model),
            "counters" => tables::counters(&run_id, header),
            _ => tables::experts(&run_id, &model),
        };
        let sub = dir.join(table);
        std::fs::create_dir_all(&sub).map_err(|source| ExportError::Io {
            path: sub.clone(),
            source,
        })?;
        let n = columns.write(&sub.join(format!("{run_id}.parquet")))?;
        rows.push((table, n));
    }
    Ok(ExportedRun { run_id, rows })
}

/// [`export_trace`] without progress.
///
/// # Errors
/// As [`export_trace`].
pub fn export_quietly(trace: &Path, dir: &Path, label: &str) -> Result<ExportedRun, ExportError> {
    export_trace(trace, dir, label, &NoProgress)
}
