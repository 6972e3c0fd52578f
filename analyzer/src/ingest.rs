//! Streaming ingestion: records from the trace reader go through a bounded reordering
//! window ([`Reorder`]) into the [`TraceModel`], so the model sees every event in
//! timestamp order whatever order the CPUs' records reached the file in.
//!
//! Records are not copied out of the file's chunks: the window holds 32-byte slots
//! (order key, chunk, position) and a [`ChunkArena`] keeps each chunk's bytes until its
//! last record has been applied.

use std::{collections::VecDeque, path::Path};

use trace_format::{Chunks, Event, EventChunk, RecordRef};

use crate::{
    AnalyzeError, TraceModel,
    model::{GraphSpan, Retention},
    trace_files::TraceFiles,
};

/// Events are held back until the newest event seen is this much later (ns): the
/// largest out-of-order distance tolerated between records of different CPUs.
pub const REORDER_WINDOW_NS: u64 = 50_000_000;
/// Most events held in the window; beyond, the oldest are released early (and events
/// older than those already released are counted as late).
pub const REORDER_MAX_EVENTS: usize = 1 << 20;
/// Most chunk bytes held for records still in the window; beyond, the window is
/// released whole (a record far in the future would otherwise pin every later chunk).
pub const MAX_HELD_CHUNK_BYTES: usize = 256 << 20;

/// Out-of-order events this close to the end of the window are inserted in place.
const INSERT_DISTANCE: usize = 64;

/// The total order events are applied in: time, then thread, kind, side, CPU — a key
/// that does not depend on file order.
pub type OrderKey = (u64, u32, u32, u32, u32);

/// Something the reordering window can hold: it has an [`OrderKey`].
pub trait Ordered {
    /// Its place in the total order.
    fn order_key(&self) -> OrderKey;
}

impl Ordered for Event {
    fn order_key(&self) -> OrderKey {
        let h = self.header();
        (h.ts_ns, h.tid, h.kind, h.flags, h.cpu)
    }
}

/// A bounded reordering window.
#[derive(Debug)]
pub struct Reorder<T = Event> {
    buf: Vec<T>,
    window_ns: u64,
    max_events: usize,
    newest_ns: u64,
    released_ns: u64,
    late: u64,
    /// Whether `buf` is sorted (events arrived in order since the last sort).
    sorted: bool,
}

impl<T: Ordered> Default for Reorder<T> {
    fn default() -> Self {
        Reorder::new(REORDER_WINDOW_NS, REORDER_MAX_EVENTS)
    }
}

impl<T: Ordered> Reorder<T> {
    /// A window of `window_ns` holding at most `max_events`.
    pub fn new(window_ns: u64, max_events: usize) -> Reorder<T> {
        Reorder {
            buf: Vec::new(),
            window_ns,
            max_events: max_events.max(2),
            newest_ns: 0,
            released_ns: 0,
            late: 0,
            sorted: true,
        }
    }

    /// Adds an event; releases (to `out`, in order) the events that can no longer be
    /// overtaken.
    pub fn push(&mut self, event: T, out: &mut impl FnMut(&T)) {
        let key = event.order_key();
        let ts = key.0;
        if ts < self.released_ns {
            self.late += 1;
        }
        self.newest_ns = self.newest_ns.max(ts);
        match self.buf.last() {
            Some(last) if self.sorted && last.order_key() > key => {
                // Slightly out of order (another CPU's record): insert it in place if
                // it belongs among the last few; otherwise sort at the next release.
                let from = self.buf.len().saturating_sub(INSERT_DISTANCE);
                let at = from + self.buf[from..].partition_point(|e| e.order_key() <= key);
                if at > from || from == 0 {
                    self.buf.insert(at, event);
                } else {
                    self.sorted = false;
                    self.buf.push(event);
                }
            }
            _ => self.buf.push(event),
        }
        let oldest = self.buf.first().map_or(0, |e| e.order_key().0);
        if self.buf.len() >= self.max_events
            || self.newest_ns.saturating_sub(oldest) >= 2 * self.window_ns
        {
            self.release(self.newest_ns.saturating_sub(self.window_ns), out);
        }
    }

    /// Releases everything still held.
    pub fn finish(&mut self, out: &mut impl FnMut(&T)) {
        self.release(u64::MAX, out);
    }

    /// Events that arrived after later events had already been released.
    pub fn late_events(&self) -> u64 {
        self.late
    }

    /// Events held.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether no event is held.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    fn release(&mut self, upto_ns: u64, out: &mut impl FnMut(&T)) {
        // The key is a total order (ties are identical records), so an unstable sort
        // gives the same result whatever the arrival order.
        if !self.sorted {
            self.buf.sort_unstable_by_key(Ordered::order_key);
            self.sorted = true;
        }
        let mut cut = self.buf.partition_point(|e| e.order_key().0 <= upto_ns);
        if cut == 0 && self.buf.len() >= self.max_events {
            cut = self.buf.len() / 2;
        }
        for e in &self.buf[..cut] {
            out(e);
        }
        if let Some(last) = cut.checked_sub(1).and_then(|i| self.buf.get(i)) {
            self.released_ns = self.released_ns.max(last.order_key().0);
        }
        self.buf.drain(..cut);
    }
}

/// A record held in the window: its order key and where its bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    key: OrderKey,
    /// Chunk id in the [`ChunkArena`].
    chunk: u32,
    /// Position of the record in the chunk.
    pos: u32,
}

impl Ordered for Slot {
    fn order_key(&self) -> OrderKey {
        self.key
    }
}

/// Chunks whose records are (partly) still in the reordering window, oldest first.
#[derive(Debug, Default)]
pub struct ChunkArena<'r> {
    /// Chunks and the number of their records not yet applied.
    chunks: VecDeque<(EventChunk<'r>, u32)>,
    /// Id of `chunks[0]` (ids count every chunk ever added, wrapping).
    first_id: u32,
    /// Payload bytes held.
    bytes: usize,
}

impl<'r> ChunkArena<'r> {
    /// Adds a chunk; returns the window slots of its records (up to the first bad one)
    /// and the error that stopped them, if any.
    pub fn add(
        &mut self,
        chunk: EventChunk<'r>,
        slots: &mut Vec<Slot>,
    ) -> Option<trace_format::TraceError> {
        let id = self.first_id.wrapping_add(self.chunks.len() as u32);
        let start = slots.len();
        let mut error = None;
        for rec in chunk.records() {
            match rec {
                Ok(r) => {
                    let h = r.header();
                    slots.push(Slot {
                        key: (h.ts_ns, h.tid, h.kind, h.flags, h.cpu),
                        chunk: id,
                        pos: u32::try_from(r.pos()).unwrap_or(u32::MAX),
                    });
                }
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        self.bytes += chunk.payload().len();
        self.chunks.push_back((
            chunk,
            u32::try_from(slots.len() - start).unwrap_or(u32::MAX),
        ));
        error
    }

    /// The record of a slot.
    pub fn record(&self, slot: &Slot) -> Option<RecordRef<'_>> {
        let (chunk, _) = self
            .chunks
            .get(slot.chunk.wrapping_sub(self.first_id) as usize)?;
        chunk.record_at(slot.pos as usize).ok()
    }

    /// Marks a slot's record as applied.
    pub fn done(&mut self, slot: &Slot) {
        if let Some((_, live)) = self
            .chunks
            .get_mut(slot.chunk.wrapping_sub(self.first_id) as usize)
        {
            *live = live.saturating_sub(1);
        }
    }

    /// Hands the oldest chunks whose records have all been applied to `free`.
    pub fn drop_applied(&mut self, mut free: impl FnMut(EventChunk<'r>)) {
        while let Some((_, 0)) = self.chunks.front() {
            if let Some((chunk, _)) = self.chunks.pop_front() {
                self.bytes -= chunk.payload().len();
                self.first_id = self.first_id.wrapping_add(1);
                free(chunk);
            }
        }
    }

    /// Payload bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// What reading a trace found besides the model.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct IngestInfo {
    /// Events read from the file.
    pub events_read: u64,
    /// Byte offset of the first broken chunk, if the trace is truncated.
    pub truncated_at: Option<u64>,
    /// The file of a series that is truncated there (`None` for one file).
    pub truncated_file: Option<String>,
    /// Files read: 1, or a `--switch-output` series' members.
    pub files: usize,
    /// A record error that stopped reading early (message), if any.
    pub read_error: Option<String>,
    /// Events that came later than the reordering window allowed.
    pub late_events: u64,
}

/// Reports ingestion progress: events read so far, expected total if known.
pub trait Progress {
    /// Called every few thousand events.
    fn update(&self, events: u64, expected: Option<u64>);
}

/// A [`Progress`] that ignores updates.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn update(&self, _events: u64, _expected: Option<u64>) {}
}

/// Events between progress updates.
const PROGRESS_EVERY: u64 = 1 << 16;

/// Reads a whole trace into a model: the file at `path`, or the series a recording to
/// `path` wrote ([`TraceFiles`]), read as one (the state records that begin each member
/// after the first are skipped; the reordering window spans the members' seams).
///
/// # Errors
/// [`AnalyzeError::Trace`] when a file cannot be opened or is not a valid trace.
/// A truncated trace or a bad record is not an error: the readable part is analyzed and
/// [`IngestInfo`] says where reading stopped (a series goes on with its next member).
pub fn load(
    path: &Path,
    progress: &dyn Progress,
) -> Result<(TraceModel, TraceFiles, IngestInfo), AnalyzeError> {
    load_with(path, progress, Retention::All, &mut |_, _| {})
}

/// [`load`] into a model that keeps `retention` of each closed graph, calling
/// `on_graph` with every graph once it has closed, while its operator detail can still
/// be read (with [`Retention::Aggregates`] it is dropped afterwards: the way to read a
/// recording of any length in bounded memory).
///
/// # Errors
/// As [`load`].
pub fn load_with(
    path: &Path,
    progress: &dyn Progress,
    retention: Retention,
    on_graph: &mut dyn FnMut(&TraceModel, &GraphSpan),
) -> Result<(TraceModel, TraceFiles, IngestInfo), AnalyzeError> {
    let files = TraceFiles::open(path)?;
    let mut model = TraceModel::with_retention(files.header(), retention);
    let mut info = IngestInfo {
        files: files.readers().len(),
        ..IngestInfo::default()
    };
    let expected = files
        .footer()
        .map(|f| f.events_written + f.collector_events);
    let mut window: Reorder<Slot> = Reorder::default();
    let mut arena = ChunkArena::default();
    let mut slots = Vec::new();
    let mut apply = |arena: &mut ChunkArena<'_>, s: &Slot| {
        if let Some(r) = arena.record(s) {
            model.apply_record(&r);
            model.release_closed(&mut *on_graph);
        }
        arena.done(s);
    };
    let many = files.readers().len() > 1;
    for (i, reader) in files.readers().iter().enumerate() {
        let name = |e: &dyn std::fmt::Display| {
            if many {
                format!("{}: {e}", files.paths()[i].display())
            } else {
                e.to_string()
            }
        };
        if info.truncated_at.is_none() {
            info.truncated_at = reader.truncated_at();
            if many && info.truncated_at.is_some() {
                info.truncated_file = Some(files.paths()[i].display().to_string());
            }
        }
        let mut skip = files.head_records(i);
        let mut chunks: Chunks<'_> = reader.chunks();
        while let Some(chunk) = chunks.next() {
            let chunk = match chunk {
                Ok(c) => c,
                Err(e) => {
                    info.read_error.get_or_insert_with(|| name(&e));
                    break;
                }
            };
            slots.clear();
            let error = arena.add(chunk, &mut slots);
            for &slot in &slots {
                if skip > 0 {
                    skip -= 1;
                    arena.done(&slot);
                    continue;
                }
                info.events_read += 1;
                if info.events_read.is_multiple_of(PROGRESS_EVERY) {
                    progress.update(info.events_read, expected);
                }
                window.push(slot, &mut |s: &Slot| apply(&mut arena, s));
            }
            if arena.bytes() > MAX_HELD_CHUNK_BYTES {
                window.finish(&mut |s: &Slot| apply(&mut arena, s));
            }
            arena.drop_applied(|c| chunks.recycle(c));
            if let Some(e) = error {
                info.read_error.get_or_insert_with(|| name(&e));
                break;
            }
        }
        // Chunks of this member still in the window stay in the arena: it frees them
        // once applied.
    }
    window.finish(&mut |s: &Slot| apply(&mut arena, s));
    // The arena borrows the files, which are returned.
    drop(arena);
    progress.update(info.events_read, expected);
    info.late_events = window.late_events();
    model.finish(files.footer().map(|f| f.end_ts_ns).filter(|&t| t > 0));
    model.release_closed(&mut *on_graph);
    Ok((model, files, info))
}

#[cfg(test)]
mod tests {
    use common::event::{DecodeEvent, EventHeader};

    use super::*;

    fn ev(ts: u64, tid: u32) -> Event {
        Event::Decode(DecodeEvent {
            header: EventHeader {
                kind: 1,
                ts_ns: ts,
                tid,
                ..EventHeader::default()
            },
            ..DecodeEvent::default()
        })
    }

    #[test]
    fn releases_in_time_order_within_the_window() {
        let mut r = Reorder::new(10, 1000);
        let mut got = Vec::new();
        let mut out = |e: &Event| got.push(e.header().ts_ns);
        for ts in [5, 3, 9, 1, 30, 25, 60, 41, 100, 99] {
            r.push(ev(ts, 1), &mut out);
        }
        r.finish(&mut out);
        assert_eq!(got, vec![1, 3, 5, 9, 25, 30, 41, 60, 99, 100]);
        assert_eq!(r.late_events(), 0);
    }

    #[test]
    fn too_late_events_are_counted_not_lost() {
        let mut r = Reorder::new(10, 1000);
        let mut got = Vec::new();
        let mut out = |e: &Event| got.push(e.header().ts_ns);
        for ts in [0, 100, 200, 1] {
            r.push(ev(ts, 1), &mut out);
        }
        r.finish(&mut out);
        assert_eq!(got.len(), 4);
        assert_eq!(r.late_events(), 1);
    }

    #[test]
    fn arena_frees_chunks_oldest_first_once_applied() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.pftrace");
        crate::synthetic::write_trace(&path, &crate::synthetic::SynthSpec::sized(2, 100, 2))
            .expect("write");
        let reader = trace_format::TraceReader::open(&path).expect("open");
        let mut chunks = reader.chunks();
        let mut arena = ChunkArena::default();
        let (mut first, mut second) = (Vec::new(), Vec::new());
        let c0 = chunks.next().expect("chunk 0").expect("ok");
        let c1 = chunks.next().expect("chunk 1").expect("ok");
        let bytes = c0.payload().len() + c1.payload().len();
        assert!(arena.add(c0, &mut first).is_none());
        assert!(arena.add(c1, &mut second).is_none());
        assert_eq!(arena.bytes(), bytes);
        // Slots lead back to their records.
        for s in first.iter().chain(&second) {
            let r = arena.record(s).expect("record");
            assert_eq!(r.header().ts_ns, s.key.0);
        }
        let mut freed = 0;
        for s in &second {
            arena.done(s);
        }
        arena.drop_applied(|_| freed += 1);
        assert_eq!(freed, 0, "the older chunk still has records in the window");
        for s in &first {
            arena.done(s);
        }
        arena.drop_applied(|_| freed += 1);
        assert_eq!((freed, arena.bytes()), (2, 0));
    }

    #[test]
    fn capacity_bounds_the_buffer() {
        let mut r = Reorder::new(u64::MAX / 4, 8);
        let mut n = 0;
        let mut out = |_: &Event| n += 1;
        for ts in 0..100 {
            r.push(ev(ts, 1), &mut out);
            assert!(r.buf.len() <= 8);
        }
        r.finish(&mut out);
        assert_eq!(n, 100);
    }
}
