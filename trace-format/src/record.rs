//! Records borrowed from an event chunk: one chunk's payload ([`EventChunk`]) and the
//! records in it ([`RecordRef`]), read without a heap allocation per record.

use std::collections::HashMap;

use common::event::{EventHeader, EventKind, OP_EVENT_V1_SIZE, OpEvent, OpExitEvent};

use crate::{
    Event, TraceError,
    event::{decode_op_v1, decode_record, op_event, peek_header, read},
};

/// Kind numbers below this are looked up in an array (every known kind is).
const DIRECT_KINDS: usize = 256;

/// Record size of every kind a trace may hold: the header's table, then this build's
/// kinds for those the table leaves out.
#[derive(Clone, Debug)]
pub(crate) struct KindSizes {
    /// Size by kind number; 0 = not in the table.
    direct: [u32; DIRECT_KINDS],
    /// Sizes of kinds numbered `DIRECT_KINDS` and above.
    other: HashMap<u32, usize>,
}

impl KindSizes {
    /// The table of a trace whose header lists `(kind, size)` pairs.
    pub(crate) fn new(table: impl IntoIterator<Item = (u32, usize)>) -> KindSizes {
        let mut sizes = KindSizes {
            direct: [0; DIRECT_KINDS],
            other: HashMap::new(),
        };
        for (kind, size) in table {
            sizes.insert(kind, size, true);
        }
        for k in EventKind::ALL {
            sizes.insert(k as u32, k.record_size(), false);
        }
        sizes
    }

    fn insert(&mut self, kind: u32, size: usize, replace: bool) {
        let size32 = u32::try_from(size).unwrap_or(u32::MAX);
        match self.direct.get_mut(kind as usize) {
            Some(slot) if replace || *slot == 0 => *slot = size32,
            Some(_) => {}
            None if replace => {
                self.other.insert(kind, size);
            }
            None => {
                self.other.entry(kind).or_insert(size);
            }
        }
    }

    /// Record size of `kind`, if the trace declares it.
    pub(crate) fn get(&self, kind: u32) -> Option<usize> {
        match self.direct.get(kind as usize) {
            Some(0) => None,
            Some(&s) => Some(s as usize),
            None => self.other.get(&kind).copied(),
        }
    }
}

/// One record of an event chunk, borrowed from the chunk.
#[derive(Clone, Copy, Debug)]
pub struct RecordRef<'a> {
    header: EventHeader,
    kind: Option<EventKind>,
    /// A format-1 operator record (converted when decoded).
    op_v1: bool,
    pos: usize,
    bytes: &'a [u8],
}

impl<'a> RecordRef<'a> {
    /// The common header.
    pub fn header(&self) -> &EventHeader {
        &self.header
    }

    /// The kind, if this reader knows it and the record has this build's size for it
    /// or is a format-1 operator record (otherwise the record decodes as
    /// [`Event::Unknown`]).
    pub fn kind(&self) -> Option<EventKind> {
        self.kind
    }

    /// Whether this is a format-1 operator record ([`OP_EVENT_V1_SIZE`] bytes), which
    /// [`RecordRef::op`] and [`RecordRef::to_event`] convert (`op_params` zero).
    pub fn is_op_v1(&self) -> bool {
        self.op_v1
    }

    /// Position of the record in its chunk's payload.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// The whole record (header included), as stored (a format-1 operator record keeps
    /// its old layout here).
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The operator record as stored by formats 1 and 2 (entries and exits) or 3
    /// (entries only), format-1 records converted.
    fn op_any(&self) -> Option<OpEvent> {
        if self.kind != Some(EventKind::OpCompute) {
            return None;
        }
        if self.op_v1 {
            decode_op_v1(self.bytes)
        } else {
            read(self.bytes)
        }
    }

    /// The operator span (format 4), if this is one without counters: a copy on the
    /// stack.
    pub fn op_span(&self) -> Option<common::event::OpSpanEvent> {
        if self.kind != Some(EventKind::OpSpan) {
            return None;
        }
        read(self.bytes)
    }

    /// The operator entry record, if this is one: a copy on the stack, no heap
    /// allocation (format-1 records converted).
    pub fn op(&self) -> Option<OpEvent> {
        if self.header.is_exit() {
            return None;
        }
        self.op_any()
    }

    /// The operator exit record, if this is one (format-1 and 2 exits converted).
    pub fn op_exit(&self) -> Option<OpExitEvent> {
        match self.kind {
            Some(EventKind::OpComputeExit) => read(self.bytes),
            Some(EventKind::OpCompute) if self.header.is_exit() => {
                self.op_any().map(|op| OpExitEvent::from_op_exit(&op))
            }
            _ => None,
        }
    }

    /// The owned event (allocates for operator entries and unknown kinds).
    pub fn to_event(&self) -> Event {
        let decoded = if self.op_v1 {
            self.op_any().map(op_event)
        } else {
            self.kind.and_then(|k| decode_record(k, self.bytes))
        };
        decoded.unwrap_or_else(|| Event::Unknown {
            header: self.header,
            bytes: self.bytes.to_vec(),
        })
    }
}

/// The record at `pos` of a chunk payload that starts at byte `base` of the file.
///
/// # Errors
/// [`TraceError::BadRecord`] if the header is cut short, its kind has no known size, or
/// the record does not fit in the payload.
pub(crate) fn record_at<'a>(
    payload: &'a [u8],
    pos: usize,
    base: u64,
    sizes: &KindSizes,
) -> Result<RecordRef<'a>, TraceError> {
    let rest = payload.get(pos..).unwrap_or_default();
    let bad = |kind| TraceError::BadRecord {
        offset: base + pos as u64,
        kind,
        remaining: rest.len(),
    };
    let header = peek_header(rest).ok_or_else(|| bad(0))?;
    let size = sizes.get(header.kind).ok_or_else(|| bad(header.kind))?;
    if size < size_of::<EventHeader>() || rest.len() < size {
        return Err(bad(header.kind));
    }
    let (kind, op_v1) = match EventKind::from_u32(header.kind) {
        Some(k) if k.record_size() == size => (Some(k), false),
        Some(EventKind::OpCompute) if size == OP_EVENT_V1_SIZE => {
            (Some(EventKind::OpCompute), true)
        }
        _ => (None, false),
    };
    Ok(RecordRef {
        header,
        kind,
        op_v1,
        pos,
        bytes: &rest[..size],
    })
}

/// The payload of one valid event chunk (CRC checked), owned, with the records in it.
#[derive(Clone, Debug)]
pub struct EventChunk<'r> {
    offset: u64,
    payload: Vec<u8>,
    sizes: &'r KindSizes,
}

impl<'r> EventChunk<'r> {
    pub(crate) fn new(offset: u64, payload: Vec<u8>, sizes: &'r KindSizes) -> EventChunk<'r> {
        EventChunk {
            offset,
            payload,
            sizes,
        }
    }

    /// Byte offset of the chunk (its header) in the file.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Byte offset of the payload in the file.
    fn payload_offset(&self) -> u64 {
        self.offset + crate::CHUNK_HEADER_LEN as u64
    }

    /// The record bytes.
    pub fn payload(&self) -> &[u8] {
        &self.payload
    }

    /// The records in payload order; a bad record is the last item.
    pub fn records(&self) -> Records<'_> {
        Records {
            chunk: self,
            pos: 0,
            failed: false,
        }
    }

    /// The record starting at `pos` (a [`RecordRef::pos`] of this chunk).
    ///
    /// # Errors
    /// [`TraceError::BadRecord`] if no valid record starts there.
    pub fn record_at(&self, pos: usize) -> Result<RecordRef<'_>, TraceError> {
        record_at(&self.payload, pos, self.payload_offset(), self.sizes)
    }

    /// The payload buffer, for reuse (see [`crate::Chunks::recycle`]).
    pub fn into_buffer(self) -> Vec<u8> {
        self.payload
    }
}

/// Iterator over the records of an [`EventChunk`].
#[derive(Debug)]
pub struct Records<'c> {
    chunk: &'c EventChunk<'c>,
    pos: usize,
    failed: bool,
}

impl<'c> Iterator for Records<'c> {
    type Item = Result<RecordRef<'c>, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.chunk.payload.len() {
            return None;
        }
        let r = self.chunk.record_at(self.pos);
        match &r {
            Ok(rec) => self.pos += rec.bytes.len(),
            Err(_) => self.failed = true,
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use common::event::{DecodeEvent, EventKind};

    use super::*;
    use crate::record_bytes;

    fn decode(ts: u64) -> DecodeEvent {
        DecodeEvent {
            header: EventHeader {
                kind: EventKind::Decode as u32,
                ts_ns: ts,
                ..EventHeader::default()
            },
            ..DecodeEvent::default()
        }
    }

    #[test]
    fn sizes_prefer_the_header_table_and_fill_in_known_kinds() {
        let s = KindSizes::new([(EventKind::Decode as u32, 99), (300, 40), (7, 48)]);
        assert_eq!(s.get(EventKind::Decode as u32), Some(99));
        assert_eq!(s.get(300), Some(40));
        assert_eq!(s.get(7), Some(48));
        assert_eq!(
            s.get(EventKind::OpCompute as u32),
            Some(size_of::<OpEvent>())
        );
        assert_eq!(s.get(8), None);
        assert_eq!(s.get(u32::MAX), None);
    }

    #[test]
    fn records_walk_the_payload_and_stop_at_a_bad_record() {
        let sizes = KindSizes::new([]);
        let mut op = OpEvent::zeroed();
        op.header.kind = EventKind::OpCompute as u32;
        op.header.ts_ns = 5;
        op.node_addr = 0xABC;
        let mut payload = Vec::new();
        payload.extend_from_slice(record_bytes(&decode(1)));
        payload.extend_from_slice(record_bytes(&op));
        payload.extend_from_slice(record_bytes(&decode(9)));
        let whole = payload.len();
        payload.extend_from_slice(&[0xFF; 4]); // a cut-short header
        let chunk = EventChunk::new(100, payload, &sizes);
        let recs: Vec<_> = chunk.records().collect();
        assert_eq!(recs.len(), 4);
        let ok: Vec<_> = recs[..3].iter().map(|r| r.as_ref().expect("ok")).collect();
        assert_eq!(
            ok.iter().map(|r| r.header().ts_ns).collect::<Vec<_>>(),
            vec![1, 5, 9]
        );
        assert_eq!(ok[1].op().map(|o| o.node_addr), Some(0xABC));
        assert_eq!(ok[0].op(), None);
        assert_eq!(ok[1].to_event(), Event::Op(Box::new(op)));
        assert_eq!(ok[2].to_event(), Event::Decode(decode(9)));
        // Positions lead back to the same records.
        for r in &ok {
            let again = chunk.record_at(r.pos()).expect("record at pos");
            assert_eq!(again.bytes(), r.bytes());
        }
        let Err(TraceError::BadRecord {
            offset, remaining, ..
        }) = &recs[3]
        else {
            panic!("bad tail not reported");
        };
        assert_eq!(
            (*offset, *remaining),
            (100 + crate::CHUNK_HEADER_LEN as u64 + whole as u64, 4)
        );
    }

    #[test]
    fn unknown_kind_and_size_mismatch_decode_as_unknown() {
        // Kind 300 declared with 40 bytes; Decode declared larger than this build's.
        let big = size_of::<DecodeEvent>() + 8;
        let sizes = KindSizes::new([(300, 40), (EventKind::Decode as u32, big)]);
        let mut payload = vec![0u8; 40];
        payload[..4].copy_from_slice(&300u32.to_le_bytes());
        let mut d = record_bytes(&decode(3)).to_vec();
        d.resize(big, 0);
        payload.extend_from_slice(&d);
        let chunk = EventChunk::new(0, payload, &sizes);
        let recs: Vec<_> = chunk.records().map(|r| r.expect("ok")).collect();
        assert_eq!(recs.len(), 2);
        for r in &recs {
            assert_eq!(r.kind(), None);
            assert!(matches!(r.to_event(), Event::Unknown { ref bytes, .. } if bytes == r.bytes()));
        }
    }
}
