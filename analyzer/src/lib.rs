//! profinfer's analyzer: turns a trace into the three views of seed 002 §4.
//!
//! Parse → model → export: [`ingest`] streams the trace through a reordering window
//! into the incremental [`TraceModel`] (tokens, graphs, operator slices and spans,
//! thread states, QoS switches, losses); [`dag`] rebuilds the ProfDAG of one iteration,
//! [`stats`] computes the ProfStat tables, and the [`export`] modules write Chrome
//! Trace Event JSON (ProfTime), DOT/SVG/JSON (ProfDAG), CSV/JSON/SVG (ProfStat),
//! `summary.json` and `index.html`. Views are described in `docs/views.md`.
//!
//! ```no_run
//! use analyzer::{AnalyzeOptions, run};
//! let report = run("run.pftrace".as_ref(), "out".as_ref(), &AnalyzeOptions::default())?;
//! for w in &report.warnings {
//!     eprintln!("warning: {w}");
//! }
//! # Ok::<(), analyzer::AnalyzeError>(())
//! ```

pub mod backends;
pub mod dag;
pub mod diff;
mod error;
pub mod experts;
pub mod export;
pub mod ingest;
pub mod leaf;
pub mod model;
pub mod op_groups;
pub mod recording_mode;
pub mod report;
mod run;
pub mod run_timings;
pub mod stats;
pub mod streaming_stats;
pub mod synthetic;
pub mod timeline;
pub mod trace_files;
pub mod windows;

pub use common::engine_abi::OpType;
pub use dag::IterSelector;
pub use error::AnalyzeError;
pub use ingest::{NoProgress, Progress};
pub use model::TraceModel;
pub use run::{AnalyzeOptions, AnalyzeReport, ColorBy, TimelineFormat, run, run_with_progress};
