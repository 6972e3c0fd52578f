//! The profinfer trace file: a preamble, then checksummed chunks (a JSON header, packed
//! event records as defined in `common::event`, a JSON footer). Written incrementally so
//! that a tracer killed at any moment leaves a file readable up to its last complete chunk.
//!
//! The format is specified in `docs/trace-format.md`. Reading:
//!
//! ```no_run
//! use trace_format::{Event, TraceReader};
//! let reader = TraceReader::open("run.pftrace")?;
//! println!("target: {}", reader.header().target.path);
//! for event in reader.events() {
//!     if let Event::Op(op) = event? {
//!         println!("{} {}", op.header.ts_ns, op.name_str());
//!     }
//! }
//! if let Some(offset) = reader.truncated_at() {
//!     eprintln!("trace truncated at byte {offset}");
//! }
//! # Ok::<(), trace_format::TraceError>(())
//! ```
//!
//! [`TraceReader::chunks`] reads the same records without a heap allocation per record:
//! each [`EventChunk`] owns one chunk's bytes and lends out its records ([`RecordRef`]).
//!
//! Traces of format 1 read too: their 432-byte operator records come out as this
//! build's [`common::event::OpEvent`] with `op_params` zero (unknown).

mod chunk;
mod cost;
mod error;
mod event;
mod header;
mod reader;
mod record;
mod series;
mod settings;
mod writer;

pub use chunk::{
    CHUNK_HEADER_LEN, CHUNK_MAGIC, ChunkKind, FILE_MAGIC, FORMAT_VERSION, MAX_CHUNK_LEN,
    MIN_FORMAT_VERSION, PREAMBLE_LEN,
};
pub use cost::{ProbeCost, ProgramCost};
pub use error::TraceError;
pub use event::{Event, WireRecord, decode_op_v1, decode_record, record_bytes, span_header};
pub use header::{
    CounterInfo, EventKindInfo, ProbeInfo, TargetInfo, TraceFooter, TraceHeader, event_kind_table,
};
pub use reader::{Chunks, Events, TraceReader};
pub use record::{EventChunk, RecordRef, Records};
pub use series::{SeriesMember, member_path, members, trace_files};
pub use settings::{NodeEnds, OpWindowsSetting, RecordingSettings};
pub use writer::{DEFAULT_CHUNK_BYTES, TraceWriter};
