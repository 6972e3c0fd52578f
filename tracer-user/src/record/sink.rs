//! Where a recording's records go: the trace file, and the observer (the live view)
//! that sees every record written. Counts what it wrote; target-independent.

use std::path::{Path, PathBuf};

use common::event::EventKind;
use trace_format::{TraceError, TraceFooter, TraceHeader, TraceWriter, WireRecord, record_bytes};

use super::error::RecordError;
use crate::observe::RecordObserver;

/// The trace writer and the observer, with the counts the footer needs.
pub struct TraceSink<'o> {
    writer: TraceWriter,
    path: PathBuf,
    observer: &'o mut dyn RecordObserver,
    /// Probe records written.
    pub written: u64,
    /// Bytes of probe records written.
    pub bytes_drained: u64,
    /// Records the collector made itself (counters opened, leaves, QoS switches, losses).
    pub collector_events: u64,
    /// The first write error while draining (reported after the drain).
    write_error: Option<TraceError>,
}

/// The record at the start of `bytes` and its kind: as long as its kind says (a buffer
/// entry may be padded), or all of `bytes` for a kind this build does not know. `None`
/// for an entry too short to hold its record.
pub fn split_record(bytes: &[u8]) -> Option<(u32, &[u8])> {
    let kind = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
    let size = EventKind::from_u32(kind).map_or(bytes.len(), |k| k.record_size());
    Some((kind, bytes.get(..size)?))
}

impl<'o> TraceSink<'o> {
    /// Creates the trace file with `header` and tells the observer the recording began.
    ///
    /// # Errors
    /// [`RecordError::Write`] if the file cannot be created.
    pub fn create(
        path: &Path,
        header: &TraceHeader,
        chunk_bytes: usize,
        observer: &'o mut dyn RecordObserver,
    ) -> Result<TraceSink<'o>, RecordError> {
        let mut writer =
            TraceWriter::create(path, header).map_err(|source| RecordError::Write {
                path: path.to_path_buf(),
                source,
            })?;
        writer.set_chunk_bytes(chunk_bytes);
        observer.on_start(header);
        Ok(TraceSink {
            writer,
            path: path.to_path_buf(),
            observer,
            written: 0,
            bytes_drained: 0,
            collector_events: 0,
            write_error: None,
        })
    }

    fn write_err(&self, source: TraceError) -> RecordError {
        RecordError::Write {
            path: self.path.clone(),
            source,
        }
    }

    /// Writes one record drained from the probes (a write error is kept for
    /// [`TraceSink::check`]: the drain callback cannot fail).
    pub fn probe_record(&mut self, record: &[u8]) {
        if let Err(e) = self.writer.push_raw(record) {
            self.write_error.get_or_insert(e);
        }
        self.written += 1;
        self.bytes_drained += record.len() as u64;
        self.observer.on_record(record);
    }

    /// Writes one record the collector made.
    ///
    /// # Errors
    /// [`RecordError::Write`].
    pub fn collector_record<T: WireRecord>(&mut self, record: &T) -> Result<(), RecordError> {
        self.writer.push(record).map_err(|e| self.write_err(e))?;
        self.observer.on_record(record_bytes(record));
        self.collector_events += 1;
        Ok(())
    }

    /// The first write error of the probe records since the last check.
    ///
    /// # Errors
    /// [`RecordError::Write`].
    pub fn check(&mut self) -> Result<(), RecordError> {
        match self.write_error.take() {
            Some(e) => Err(self.write_err(e)),
            None => Ok(()),
        }
    }

    /// Writes the pending chunk out (the file is readable up to here).
    ///
    /// # Errors
    /// [`RecordError::Write`].
    pub fn flush_chunk(&mut self) -> Result<(), RecordError> {
        self.writer.flush_chunk().map_err(|e| self.write_err(e))
    }

    /// The observer (live view), for status and replies.
    pub fn observer(&mut self) -> &mut dyn RecordObserver {
        &mut *self.observer
    }

    /// Writes the footer and closes the file.
    ///
    /// # Errors
    /// [`RecordError::Write`].
    pub fn finish(mut self, footer: &TraceFooter) -> Result<(), RecordError> {
        self.check()?;
        let path = self.path.clone();
        self.writer
            .finish(footer)
            .map_err(|source| RecordError::Write { path, source })
    }
}
