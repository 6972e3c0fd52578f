//! Writing a trace: preamble and header first, then event chunks as records arrive, the
//! footer last. Each chunk goes to the file with one `write_all`, so a killed writer
//! leaves at most one incomplete chunk at the end.

use std::{
    fs::File,
    io::Write,
    path::{Path, PathBuf},
};

use common::event::EventKind;

use crate::{
    TraceError, TraceFooter, TraceHeader,
    chunk::{ChunkKind, FILE_MAGIC, FORMAT_VERSION, encode_chunk},
    event::{WireRecord, record_bytes},
};

/// Event bytes buffered before a chunk is written.
pub const DEFAULT_CHUNK_BYTES: usize = 256 << 10;

/// `header` with this build's format version and record sizes of the kinds it knows.
fn current_layouts(header: &TraceHeader) -> TraceHeader {
    let mut h = header.clone();
    h.format_version = FORMAT_VERSION;
    for k in &mut h.event_kinds {
        if let Some(known) = EventKind::from_u32(k.kind) {
            k.size = known.record_size() as u32;
        }
    }
    h
}

/// Writes one trace file.
pub struct TraceWriter {
    path: PathBuf,
    file: File,
    seq: u32,
    pending: Vec<u8>,
    chunk_bytes: usize,
    records: u64,
    /// Bytes written to the file so far.
    written: u64,
}

impl TraceWriter {
    /// Creates (truncates) `path` and writes the preamble and `header`.
    ///
    /// The file is always of [`FORMAT_VERSION`] with this build's record layouts, so the
    /// header is written with that `format_version` and, for every kind this build
    /// knows, this build's record size (a header taken from an older trace would
    /// otherwise declare, say, format-1 operator records); entries of kinds it does not
    /// know are kept, with their records passed through [`TraceWriter::push_raw`].
    pub fn create(path: impl AsRef<Path>, header: &TraceHeader) -> Result<TraceWriter, TraceError> {
        let path = path.as_ref().to_path_buf();
        let header = current_layouts(header);
        let io = |source| TraceError::Io {
            path: path.clone(),
            source,
        };
        let mut file = File::create(&path).map_err(io)?;
        let mut preamble = Vec::with_capacity(16);
        preamble.extend_from_slice(&FILE_MAGIC);
        preamble.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        preamble.extend_from_slice(&0u32.to_le_bytes());
        let json = serde_json::to_vec(&header).map_err(|source| TraceError::Serialize {
            what: "header",
            source,
        })?;
        preamble.extend_from_slice(&encode_chunk(ChunkKind::Header, 0, &json));
        file.write_all(&preamble).map_err(io)?;
        let written = preamble.len() as u64;
        Ok(TraceWriter {
            written,
            path,
            file,
            seq: 1,
            pending: Vec::with_capacity(DEFAULT_CHUNK_BYTES),
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            records: 0,
        })
    }

    /// Sets how many event bytes are buffered before a chunk is written.
    pub fn set_chunk_bytes(&mut self, bytes: usize) {
        self.chunk_bytes = bytes.max(1);
    }

    /// Appends one raw record (as it came out of the ring buffer); writes a chunk when
    /// enough bytes are buffered.
    pub fn push_raw(&mut self, record: &[u8]) -> Result<(), TraceError> {
        self.pending.extend_from_slice(record);
        self.records += 1;
        if self.pending.len() >= self.chunk_bytes {
            self.flush_chunk()?;
        }
        Ok(())
    }

    /// Appends one typed record.
    pub fn push<T: WireRecord>(&mut self, record: &T) -> Result<(), TraceError> {
        self.push_raw(record_bytes(record))
    }

    /// Records appended so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The file's length once the buffered records are written (without the footer).
    pub fn len(&self) -> u64 {
        let pending = if self.pending.is_empty() {
            0
        } else {
            (crate::CHUNK_HEADER_LEN + self.pending.len()) as u64
        };
        self.written + pending
    }

    /// Whether nothing but the preamble and header was written or buffered.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the buffered records as one chunk (nothing if none are buffered).
    pub fn flush_chunk(&mut self) -> Result<(), TraceError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let chunk = encode_chunk(ChunkKind::Events, self.seq, &self.pending);
        self.seq += 1;
        self.pending.clear();
        self.written += chunk.len() as u64;
        self.file
            .write_all(&chunk)
            .map_err(|source| TraceError::Io {
                path: self.path.clone(),
                source,
            })
    }

    /// Flushes pending records, writes the footer and syncs the file.
    pub fn finish(mut self, footer: &TraceFooter) -> Result<(), TraceError> {
        self.flush_chunk()?;
        let json = serde_json::to_vec(footer).map_err(|source| TraceError::Serialize {
            what: "footer",
            source,
        })?;
        let chunk = encode_chunk(ChunkKind::Footer, self.seq, &json);
        let io = |source| TraceError::Io {
            path: self.path.clone(),
            source,
        };
        self.file.write_all(&chunk).map_err(io)?;
        self.file.sync_all().map_err(io)
    }
}
