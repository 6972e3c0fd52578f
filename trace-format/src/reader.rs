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
        CHUNK_HEADER_LEN, ChunkKind, ChunkRead, FILE_MAGIC, FORMAT_VERSION, MIN_FORMAT_VERSION,
        PREAMBLE_LEN, read_chunk,
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
    /// one (see [`TraceReader::truncated_at`]). Formats [`MIN_FORMAT_VERSION`] to
    /// [`FORMAT_VERSION`] are read; operator records of format 1 (432 bytes, as the
    /// header's kind table declares) are converted with `op_params` zero-filled.
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
        if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(TraceError::UnsupportedVersion {
                found: version,
                supported: FORMAT_VERSION,
                oldest: MIN_FORMAT_VERSION,
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

#[cfg(test)]
mod tests {
    use common::event::{
        EVENT_FLAG_EXIT, EventKind, OP_DETAIL_NAME, OP_DETAIL_OP_PARAMS, OP_DETAIL_PMC,
        OP_DETAIL_STRUCTURE, OP_EVENT_V1_SIZE,
    };

    use super::*;
    use crate::{EventKindInfo, chunk::encode_chunk};

    fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
        buf[at..at + bytes.len()].copy_from_slice(bytes);
    }

    /// A format-1 operator record, byte by byte from the format-1 layout
    /// (docs/trace-format.md, version 1): name at 72, structure {dtype 136, node_flags 140,
    /// ne 144, nb 176, src 208}, pmc at 240 (8 × {counter, enabled, running}).
    fn op_v1(ts: u64, exit: bool) -> Vec<u8> {
        let mut b = vec![0u8; OP_EVENT_V1_SIZE];
        put(&mut b, 0, &(EventKind::OpCompute as u32).to_le_bytes());
        put(&mut b, 4, &u32::from(exit).to_le_bytes());
        put(&mut b, 8, &ts.to_le_bytes());
        put(&mut b, 16, &7u32.to_le_bytes()); // pid
        put(&mut b, 20, &8u32.to_le_bytes()); // tid
        put(&mut b, 32, &0xABCD_u64.to_le_bytes()); // node_addr
        put(&mut b, 40, &5u32.to_le_bytes()); // op MUL_MAT
        put(&mut b, 44, &1u32.to_le_bytes()); // ith
        put(&mut b, 48, &2u32.to_le_bytes()); // nth
        put(&mut b, 52, &17u32.to_le_bytes()); // index
        put(&mut b, 56, &3i32.to_le_bytes()); // layer
        let detail = OP_DETAIL_NAME | OP_DETAIL_STRUCTURE | OP_DETAIL_PMC;
        put(&mut b, 60, &detail.to_le_bytes());
        put(&mut b, 64, &0b11u32.to_le_bytes()); // pmc_ok
        put(&mut b, 72, b"Qcur-3");
        put(&mut b, 136, &8u32.to_le_bytes()); // dtype
        put(&mut b, 140, &4u32.to_le_bytes()); // node_flags
        for (i, d) in [128i64, 5, 1, 1].iter().enumerate() {
            put(&mut b, 144 + 8 * i, &d.to_le_bytes());
        }
        for (i, s) in [0x1000u64, 0x2000, 0, 0].iter().enumerate() {
            put(&mut b, 208 + 8 * i, &s.to_le_bytes());
        }
        put(&mut b, 240, &111u64.to_le_bytes()); // pmc[0].counter
        put(&mut b, 248, &222u64.to_le_bytes()); // pmc[0].enabled
        put(&mut b, 256, &333u64.to_le_bytes()); // pmc[0].running
        put(&mut b, 264, &444u64.to_le_bytes()); // pmc[1].counter
        put(&mut b, 424, &999u64.to_le_bytes()); // pmc[7].running
        b
    }

    /// A whole format-1 file: preamble version 1, a header declaring 432-byte op records.
    fn write_v1(path: &Path, records: &[Vec<u8>]) {
        let header = TraceHeader {
            format_version: 1,
            event_kinds: EventKind::ALL
                .iter()
                .filter(|k| (**k as u32) < 63)
                .map(|k| EventKindInfo {
                    kind: *k as u32,
                    name: k.name().to_owned(),
                    size: if *k == EventKind::OpCompute {
                        OP_EVENT_V1_SIZE as u32
                    } else {
                        k.record_size() as u32
                    },
                })
                .collect(),
            ..TraceHeader::default()
        };
        let mut file = Vec::new();
        file.extend_from_slice(&FILE_MAGIC);
        file.extend_from_slice(&1u32.to_le_bytes());
        file.extend_from_slice(&0u32.to_le_bytes());
        let json = serde_json::to_vec(&header).expect("json");
        file.extend_from_slice(&encode_chunk(ChunkKind::Header, 0, &json));
        let payload: Vec<u8> = records.concat();
        file.extend_from_slice(&encode_chunk(ChunkKind::Events, 1, &payload));
        std::fs::write(path, file).expect("write");
    }

    #[test]
    fn format_1_operator_records_read_with_op_params_unknown() {
        let path = std::env::temp_dir().join(format!("trace-format-v1-{}", std::process::id()));
        let decode = {
            let mut d = vec![0u8; 48];
            put(&mut d, 0, &(EventKind::Decode as u32).to_le_bytes());
            put(&mut d, 8, &5u64.to_le_bytes());
            d
        };
        write_v1(&path, &[op_v1(10, false), decode, op_v1(20, true)]);
        let r = TraceReader::open(&path).expect("a format-1 trace opens");
        assert_eq!(r.header().format_version, 1);
        let events: Vec<Event> = r.events().map(|e| e.expect("decodes")).collect();
        assert_eq!(events.len(), 3);
        let Event::Op(op) = &events[0] else {
            panic!("not an op: {:?}", events[0]);
        };
        assert_eq!((op.header.ts_ns, op.header.pid, op.header.tid), (10, 7, 8));
        assert!(!op.header.is_exit());
        assert_eq!((op.node_addr, op.op, op.ith, op.nth), (0xABCD, 5, 1, 2));
        assert_eq!((op.index, op.layer, op.pmc_ok), (17, 3, 0b11));
        assert_eq!(op.name_str(), "Qcur-3");
        assert_eq!(op.detail & OP_DETAIL_OP_PARAMS, 0);
        assert_ne!(op.detail & OP_DETAIL_STRUCTURE, 0);
        assert_eq!((op.structure.dtype, op.structure.node_flags), (8, 4));
        assert_eq!(op.structure.ne, [128, 5, 1, 1]);
        assert_eq!(op.structure.src, [0x1000, 0x2000, 0, 0]);
        assert_eq!(op.structure.op_params, [0; 8], "unknown in format 1");
        assert_eq!(
            (op.pmc[0].counter, op.pmc[0].enabled, op.pmc[0].running),
            (111, 222, 333)
        );
        assert_eq!(op.pmc[1].counter, 444);
        assert_eq!(op.pmc[7].running, 999);
        assert!(matches!(&events[1], Event::Decode(d) if d.header.ts_ns == 5));
        // The exit, stored whole in format 1, reads as a compact exit record.
        let Event::OpExit(exit) = &events[2] else {
            panic!("not an op exit: {:?}", events[2]);
        };
        assert_eq!(exit.header.flags & EVENT_FLAG_EXIT, EVENT_FLAG_EXIT);
        assert_eq!(exit.header.kind, EventKind::OpComputeExit as u32);
        assert_eq!((exit.header.ts_ns, exit.pmc_ok), (20, 0b11));
        assert_eq!(exit.pmc[1].counter, 444);
        // The borrowed path converts the same way.
        let mut chunks = r.chunks();
        let chunk = chunks.next().expect("a chunk").expect("valid");
        let recs: Vec<_> = chunk.records().map(|r| r.expect("record")).collect();
        assert!(recs[0].is_op_v1() && !recs[1].is_op_v1());
        assert_eq!(recs[0].bytes().len(), OP_EVENT_V1_SIZE);
        assert_eq!(recs[0].op().as_ref(), Some(op.as_ref()));
        assert_eq!(recs[1].op(), None);
        assert_eq!(recs[2].op(), None, "an exit is not an entry");
        assert_eq!(recs[2].op_exit().as_ref(), Some(exit));
        std::fs::remove_file(&path).ok();
    }

    #[test]
    fn versions_outside_the_range_are_refused() {
        let path = std::env::temp_dir().join(format!("trace-format-v9-{}", std::process::id()));
        write_v1(&path, &[]);
        let mut bytes = std::fs::read(&path).expect("read");
        for v in [0u32, FORMAT_VERSION + 1] {
            bytes[8..12].copy_from_slice(&v.to_le_bytes());
            std::fs::write(&path, &bytes).expect("write");
            let e = TraceReader::open(&path).expect_err("refused");
            assert!(
                matches!(e, TraceError::UnsupportedVersion { found, .. } if found == v),
                "{e}"
            );
        }
        std::fs::remove_file(&path).ok();
    }
}
