//! Reading a trace: the file is scanned once at open (every chunk's CRC checked, the
//! footer found, the first broken chunk noted); events are then streamed chunk by chunk.

use std::{
    collections::{HashMap, VecDeque},
    fs::File,
    io::{BufReader, Read, Seek, SeekFrom},
    path::{Path, PathBuf},
};

use common::event::{EventHeader, EventKind};

use crate::{
    Event, TraceError, TraceFooter, TraceHeader,
    chunk::{
        CHUNK_HEADER_LEN, ChunkKind, ChunkRead, FILE_MAGIC, FORMAT_VERSION, PREAMBLE_LEN,
        read_chunk,
    },
    event::{decode_record, peek_header},
};

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
    sizes: HashMap<u32, usize>,
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
        let mut r = BufReader::new(File::open(&path).map_err(io)?);
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
        let header = match read_chunk(&mut r).map_err(io)? {
            ChunkRead::Chunk(h, payload) if h.kind == ChunkKind::Header => {
                serde_json::from_slice::<TraceHeader>(&payload).map_err(|source| {
                    TraceError::Json {
                        what: "header",
                        offset,
                        source,
                    }
                })?
            }
            _ => return Err(TraceError::BadHeader { offset }),
        };
        let mut sizes: HashMap<u32, usize> = header
            .event_kinds
            .iter()
            .map(|k| (k.kind, k.size as usize))
            .collect();
        for k in EventKind::ALL {
            sizes.entry(k as u32).or_insert(k.record_size());
        }
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
            match read_chunk(&mut r).map_err(io)? {
                ChunkRead::End => break,
                ChunkRead::Broken => {
                    reader.truncated_at = Some(offset);
                    break;
                }
                ChunkRead::Chunk(h, payload) => {
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
            reader: self,
            file: None,
            next_chunk: 0,
            pending: VecDeque::new(),
            failed: false,
        }
    }
}

/// Iterator over the events of a trace (see [`TraceReader::events`]).
pub struct Events<'a> {
    reader: &'a TraceReader,
    file: Option<BufReader<File>>,
    next_chunk: usize,
    pending: VecDeque<Result<Event, TraceError>>,
    failed: bool,
}

impl Events<'_> {
    fn load_next_chunk(&mut self) -> Result<bool, TraceError> {
        let Some(loc) = self.reader.chunks.get(self.next_chunk).copied() else {
            return Ok(false);
        };
        self.next_chunk += 1;
        let path = &self.reader.path;
        let io = |source| TraceError::Io {
            path: path.clone(),
            source,
        };
        if self.file.is_none() {
            self.file = Some(BufReader::new(File::open(path).map_err(io)?));
        }
        let Some(file) = self.file.as_mut() else {
            return Ok(false);
        };
        file.seek(SeekFrom::Start(loc.offset)).map_err(io)?;
        let payload = match read_chunk(file).map_err(io)? {
            ChunkRead::Chunk(_, payload) => payload,
            // The file changed since it was scanned.
            ChunkRead::End | ChunkRead::Broken => {
                return Err(TraceError::BadRecord {
                    offset: loc.offset,
                    kind: 0,
                    remaining: loc.len as usize,
                });
            }
        };
        let base = loc.offset + CHUNK_HEADER_LEN as u64;
        let mut pos = 0usize;
        while pos < payload.len() {
            let rest = &payload[pos..];
            let bad = |kind| TraceError::BadRecord {
                offset: base + pos as u64,
                kind,
                remaining: rest.len(),
            };
            let Some(h): Option<EventHeader> = peek_header(rest) else {
                self.pending.push_back(Err(bad(0)));
                break;
            };
            let Some(&size) = self.reader.sizes.get(&h.kind) else {
                self.pending.push_back(Err(bad(h.kind)));
                break;
            };
            if size < size_of::<EventHeader>() || rest.len() < size {
                self.pending.push_back(Err(bad(h.kind)));
                break;
            }
            let event = match EventKind::from_u32(h.kind) {
                Some(kind) if kind.record_size() == size => decode_record(kind, rest),
                _ => Some(Event::Unknown {
                    header: h,
                    bytes: rest[..size].to_vec(),
                }),
            };
            match event {
                Some(e) => self.pending.push_back(Ok(e)),
                None => {
                    self.pending.push_back(Err(bad(h.kind)));
                    break;
                }
            }
            pos += size;
        }
        Ok(true)
    }
}

impl Iterator for Events<'_> {
    type Item = Result<Event, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(e);
            }
            if self.failed {
                return None;
            }
            match self.load_next_chunk() {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}
