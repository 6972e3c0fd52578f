//! Reading a trace: the file is scanned once at open (every chunk's CRC checked, the
//! footer found, the first broken chunk noted); events are then streamed chunk by chunk,
//! either as owned [`Event`]s ([`TraceReader::events`]) or, without an allocation per
//! record, as whole chunks whose records are borrowed ([`TraceReader::chunks`]).

use std::{
    fs::File,
    io::{Read, Seek, SeekFrom},
    path::{Path, PathBuf},
};

use crate::{
    Event, TraceError, TraceFooter, TraceHeader,
    chunk::{
        CHUNK_HEADER_LEN, ChunkKind, ChunkRead, FILE_MAGIC, FORMAT_VERSION, PREAMBLE_LEN,
        read_chunk,
    },
    record::{EventChunk, KindSizes, record_at},
};

/// Payload buffers [`Chunks`] keeps for reuse (a consumer that holds chunks, like a
/// reordering window, frees them in bursts).
const SPARE_BUFFERS: usize = 64;

/// Location of one valid event chunk.
#[derive(Clone, Copy, Debug)]
struct ChunkLoc {
    offset: u64,
    len: u32,
}

/// An open trace file.
#[derive(Debug)]
pub struct TraceReader {
    path: PathBuf,
    header: TraceHeader,
    footer: Option<TraceFooter>,
    chunks: Vec<ChunkLoc>,
    truncated_at: Option<u64>,
    sizes: KindSizes,
}

impl TraceReader {
    /// Opens and validates `path`: preamble, header, every chunk up to the first broken
    /// one (see [`TraceReader::truncated_at`]).
    pub fn open(path: impl AsRef<Path>) -> Result<TraceReader, TraceError> {
        let path = path.as_ref().to_path_buf();
        let io = |source| TraceError::Io {
            path: path.clone(),
            source,
        };
        // Unbuffered: every chunk is read whole into `payload` with two `read` calls.
        let mut r = File::open(&path).map_err(io)?;
        let mut preamble = [0u8; PREAMBLE_LEN];
        r.read_exact(&mut preamble)
            .map_err(|_| TraceError::BadMagic { path: path.clone() })?;
        if preamble[..8] != FILE_MAGIC {
            return Err(TraceError::BadMagic { path });
        }
        let version = u32::from_le_bytes([preamble[8], preamble[9], preamble[10], preamble[11]]);
        if version != FORMAT_VERSION {
            return Err(TraceError::UnsupportedVersion {
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let mut offset = PREAMBLE_LEN as u64;
        let mut payload = Vec::new();
        let header = match read_chunk(&mut r, &mut payload).map_err(io)? {
            ChunkRead::Chunk(h) if h.kind == ChunkKind::Header => serde_json::from_slice::<
                TraceHeader,
            >(&payload)
            .map_err(|source| TraceError::Json {
                what: "header",
                offset,
                source,
            })?,
            _ => return Err(TraceError::BadHeader { offset }),
        };
        let sizes = KindSizes::new(header.event_kinds.iter().map(|k| (k.kind, k.size as usize)));
        let mut reader = TraceReader {
            path: path.clone(),
            header,
            footer: None,
            chunks: Vec::new(),
            truncated_at: None,
            sizes,
        };
        offset = r.stream_position().map_err(io)?;
        loop {
            match read_chunk(&mut r, &mut payload).map_err(io)? {
                ChunkRead::End => break,
                ChunkRead::Broken => {
                    reader.truncated_at = Some(offset);
                    break;
                }
                ChunkRead::Chunk(h) => {
                    match h.kind {
                        ChunkKind::Events => reader.chunks.push(ChunkLoc { offset, len: h.len }),
                        ChunkKind::Footer => {
                            reader.footer =
                                Some(serde_json::from_slice(&payload).map_err(|source| {
                                    TraceError::Json {
                                        what: "footer",
                                        offset,
                                        source,
                                    }
                                })?);
                        }
                        ChunkKind::Header | ChunkKind::Other(_) => {}
                    }
                    offset += (CHUNK_HEADER_LEN + payload.len()) as u64;
                }
            }
        }
        Ok(reader)
    }

    /// The header.
    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    /// The footer, present when recording ended cleanly.
    pub fn footer(&self) -> Option<&TraceFooter> {
        self.footer.as_ref()
    }

    /// Byte offset of the first incomplete or corrupt chunk, if the file has one (the
    /// tracer was killed, or the file is damaged); everything before it is readable.
    pub fn truncated_at(&self) -> Option<u64> {
        self.truncated_at
    }

    /// Number of valid event chunks.
    pub fn event_chunks(&self) -> usize {
        self.chunks.len()
    }

    /// Streams the events of every valid chunk, in file order.
    pub fn events(&self) -> Events<'_> {
        Events {
            chunks: self.chunks(),
            current: None,
            pos: 0,
            failed: false,
        }
    }

    /// Streams the valid event chunks in file order; their records are read in place
    /// ([`EventChunk::records`]), without an allocation per record.
    pub fn chunks(&self) -> Chunks<'_> {
        Chunks {
            reader: self,
            file: None,
            next_chunk: 0,
            spare: Vec::new(),
        }
    }
}

/// Iterator over the event chunks of a trace (see [`TraceReader::chunks`]).
#[derive(Debug)]
pub struct Chunks<'r> {
    reader: &'r TraceReader,
    /// The file (unbuffered: a chunk is read with two `read` calls into its buffer) and
    /// the position it is at.
    file: Option<(File, u64)>,
    next_chunk: usize,
    spare: Vec<Vec<u8>>,
}

impl<'r> Chunks<'r> {
    /// Gives a chunk's buffer back for the next chunks to be read into.
    pub fn recycle(&mut self, chunk: EventChunk<'_>) {
        if self.spare.len() < SPARE_BUFFERS {
            self.spare.push(chunk.into_buffer());
        }
    }

    fn load(&mut self, loc: ChunkLoc) -> Result<EventChunk<'r>, TraceError> {
        let path = &self.reader.path;
        let io = |source| TraceError::Io {
            path: path.clone(),
            source,
        };
        let (file, at) = match &mut self.file {
            Some(f) => f,
            None => self.file.insert((File::open(path).map_err(io)?, 0)),
        };
        // Chunks are usually read in file order: seek only when skipping.
        if *at != loc.offset {
            file.seek(SeekFrom::Start(loc.offset)).map_err(io)?;
        }
        *at = loc.offset + CHUNK_HEADER_LEN as u64 + u64::from(loc.len);
        let mut payload = self.spare.pop().unwrap_or_default();
        let read = read_chunk(file, &mut payload);
        if !matches!(read, Ok(ChunkRead::Chunk(_))) {
            // Unknown position after a failed read.
            *at = u64::MAX;
        }
        match read.map_err(io)? {
            ChunkRead::Chunk(_) => Ok(EventChunk::new(loc.offset, payload, &self.reader.sizes)),
            // The file changed since it was scanned.
            ChunkRead::End | ChunkRead::Broken => Err(TraceError::BadRecord {
                offset: loc.offset,
                kind: 0,
                remaining: loc.len as usize,
            }),
        }
    }
}

impl<'r> Iterator for Chunks<'r> {
    type Item = Result<EventChunk<'r>, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        let loc = self.reader.chunks.get(self.next_chunk).copied()?;
        self.next_chunk += 1;
        let r = self.load(loc);
        if r.is_err() {
            // Nothing after a chunk that cannot be read again.
            self.next_chunk = self.reader.chunks.len();
        }
        Some(r)
    }
}

/// Iterator over the events of a trace (see [`TraceReader::events`]).
#[derive(Debug)]
pub struct Events<'r> {
    chunks: Chunks<'r>,
    current: Option<EventChunk<'r>>,
    pos: usize,
    failed: bool,
}

impl Iterator for Events<'_> {
    type Item = Result<Event, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.failed {
                return None;
            }
            if let Some(chunk) = &self.current {
                if self.pos < chunk.payload().len() {
                    let r = record_at(
                        chunk.payload(),
                        self.pos,
                        chunk.offset() + CHUNK_HEADER_LEN as u64,
                        &self.chunks.reader.sizes,
                    );
                    return Some(match r {
                        Ok(rec) => {
                            self.pos += rec.bytes().len();
                            Ok(rec.to_event())
                        }
                        Err(e) => {
                            // The rest of a chunk with a bad record is skipped.
                            self.pos = chunk.payload().len();
                            Err(e)
                        }
                    });
                }
                if let Some(done) = self.current.take() {
                    self.chunks.recycle(done);
                }
            }
            match self.chunks.next()? {
                Ok(chunk) => {
                    self.current = Some(chunk);
                    self.pos = 0;
                }
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}
