//! Preamble and chunk framing.

use std::io::{self, Read};

/// First 8 bytes of every trace file.
pub const FILE_MAGIC: [u8; 8] = *b"PFTRACE\0";
/// Current format version (preamble bytes 8..12, little-endian). Version 2 added
/// `op_params` to operator records (464 bytes instead of 432) and the `leaf_node` kind;
/// version 3 records operator exits as compact `op_compute_exit` records (232 bytes)
/// instead of full `op_compute` records with the exit flag; version 4 records each
/// operator run as one 32-byte `op_span` (its end and duration), the node's description
/// as a `node_desc` only when the node changes, and adds `graph_thread`, `op_span_pmc`
/// and `op_window` (earlier versions' records are still read).
pub const FORMAT_VERSION: u32 = 4;
/// Oldest format version this reader reads (format-1 operator records are converted,
/// their `op_params` zero-filled).
pub const MIN_FORMAT_VERSION: u32 = 1;
/// Bytes before the first chunk: magic, version, 4 reserved bytes.
pub const PREAMBLE_LEN: usize = 16;
/// First 4 bytes of every chunk header (`"CHNK"` little-endian).
pub const CHUNK_MAGIC: u32 = u32::from_le_bytes(*b"CHNK");
/// Size of a chunk header: magic, kind, sequence, length, CRC32, reserved.
pub const CHUNK_HEADER_LEN: usize = 24;
/// Largest chunk payload a reader accepts (untrusted input limit).
pub const MAX_CHUNK_LEN: u32 = 64 << 20;

/// What a chunk holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkKind {
    /// The JSON [`crate::TraceHeader`]; always the first chunk.
    Header,
    /// Packed event records.
    Events,
    /// The JSON [`crate::TraceFooter`]; the last chunk of a cleanly finished trace.
    Footer,
    /// A kind this reader does not know (skipped).
    Other(u32),
}

impl ChunkKind {
    /// Stored value.
    pub fn to_u32(self) -> u32 {
        match self {
            ChunkKind::Header => 1,
            ChunkKind::Events => 2,
            ChunkKind::Footer => 3,
            ChunkKind::Other(v) => v,
        }
    }

    /// Kind of a stored value.
    pub fn from_u32(v: u32) -> ChunkKind {
        match v {
            1 => ChunkKind::Header,
            2 => ChunkKind::Events,
            3 => ChunkKind::Footer,
            v => ChunkKind::Other(v),
        }
    }
}

/// A parsed chunk header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChunkHeader {
    pub kind: ChunkKind,
    pub seq: u32,
    pub len: u32,
    pub crc: u32,
}

/// CRC32 over the kind, sequence and length fields and the payload.
pub(crate) fn chunk_crc(kind: u32, seq: u32, len: u32, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&kind.to_le_bytes());
    h.update(&seq.to_le_bytes());
    h.update(&len.to_le_bytes());
    h.update(payload);
    h.finalize()
}

/// Encodes a whole chunk (header and payload).
pub(crate) fn encode_chunk(kind: ChunkKind, seq: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let kind = kind.to_u32();
    let crc = chunk_crc(kind, seq, len, payload);
    let mut out = Vec::with_capacity(CHUNK_HEADER_LEN + payload.len());
    for v in [CHUNK_MAGIC, kind, seq, len, crc, 0] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(payload);
    out
}

/// Outcome of reading one chunk.
pub(crate) enum ChunkRead {
    /// A complete, valid chunk (its payload is in the caller's buffer).
    Chunk(ChunkHeader),
    /// Clean end of file exactly at a chunk boundary.
    End,
    /// Incomplete or corrupt chunk: the file is readable only up to here.
    Broken,
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match r.read(&mut buf[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Reads and validates the next chunk; its payload replaces the contents of `payload`
/// (a buffer the caller reuses from chunk to chunk, so reading allocates only when a
/// chunk is larger than any before).
pub(crate) fn read_chunk(r: &mut impl Read, payload: &mut Vec<u8>) -> io::Result<ChunkRead> {
    let mut head = [0u8; CHUNK_HEADER_LEN];
    match read_up_to(r, &mut head)? {
        0 => return Ok(ChunkRead::End),
        CHUNK_HEADER_LEN => {}
        _ => return Ok(ChunkRead::Broken),
    }
    let word = |i: usize| u32::from_le_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
    let (magic, kind, seq, len, crc) = (word(0), word(4), word(8), word(12), word(16));
    if magic != CHUNK_MAGIC || len > MAX_CHUNK_LEN {
        return Ok(ChunkRead::Broken);
    }
    // Read into the buffer's spare capacity: no zero-filling of reused or new memory.
    payload.clear();
    payload.reserve(len as usize);
    if r.take(u64::from(len)).read_to_end(payload)? != len as usize {
        return Ok(ChunkRead::Broken);
    }
    if chunk_crc(kind, seq, len, payload) != crc {
        return Ok(ChunkRead::Broken);
    }
    Ok(ChunkRead::Chunk(ChunkHeader {
        kind: ChunkKind::from_u32(kind),
        seq,
        len,
        crc,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_round_trips_and_detects_damage() {
        let bytes = encode_chunk(ChunkKind::Events, 7, b"hello");
        // A reused buffer longer than the payload is cut to the payload.
        let mut p = b"previous chunk".to_vec();
        let Ok(ChunkRead::Chunk(h)) = read_chunk(&mut &bytes[..], &mut p) else {
            panic!("valid chunk not read");
        };
        assert_eq!((h.kind, h.seq, h.len), (ChunkKind::Events, 7, 5));
        assert_eq!(p, b"hello");
        // Any flipped payload bit breaks the CRC.
        for i in CHUNK_HEADER_LEN..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(matches!(
                read_chunk(&mut &bad[..], &mut p),
                Ok(ChunkRead::Broken)
            ));
        }
        // Every truncation is detected.
        for cut in 1..bytes.len() {
            assert!(matches!(
                read_chunk(&mut &bytes[..cut], &mut p),
                Ok(ChunkRead::Broken)
            ));
        }
        assert!(matches!(
            read_chunk(&mut &bytes[..0], &mut p),
            Ok(ChunkRead::End)
        ));
    }

    #[test]
    fn crc_matches_crc32_of_concatenation() {
        // Independent: crc32fast over the concatenated bytes equals the streamed hash.
        let payload = b"abc";
        let mut all = Vec::new();
        all.extend_from_slice(&2u32.to_le_bytes());
        all.extend_from_slice(&9u32.to_le_bytes());
        all.extend_from_slice(&3u32.to_le_bytes());
        all.extend_from_slice(payload);
        assert_eq!(chunk_crc(2, 9, 3, payload), crc32fast::hash(&all));
    }
}
