//! Streaming ingestion: events from the trace reader go through a bounded reordering
//! window ([`Reorder`]) into the [`TraceModel`], so the model sees every event in
//! timestamp order whatever order the CPUs' records reached the file in.

use std::path::Path;

use trace_format::{Event, TraceReader};

use crate::{AnalyzeError, TraceModel};

/// Events are held back until the newest event seen is this much later (ns): the
/// largest out-of-order distance tolerated between records of different CPUs.
pub const REORDER_WINDOW_NS: u64 = 50_000_000;
/// Most events held in the window; beyond, the oldest are released early (and events
/// older than those already released are counted as late).
pub const REORDER_MAX_EVENTS: usize = 1 << 20;

/// Out-of-order events this close to the end of the window are inserted in place.
const INSERT_DISTANCE: usize = 64;

/// The total order events are applied in: time, then thread, kind, side, CPU — a key
/// that does not depend on file order.
fn order_key(e: &Event) -> (u64, u32, u32, u32, u32) {
    let h = e.header();
    (h.ts_ns, h.tid, h.kind, h.flags, h.cpu)
}

/// A bounded reordering window.
#[derive(Debug)]
pub struct Reorder {
    buf: Vec<Event>,
    window_ns: u64,
    max_events: usize,
    newest_ns: u64,
    released_ns: u64,
    late: u64,
    /// Whether `buf` is sorted (events arrived in order since the last sort).
    sorted: bool,
}

impl Default for Reorder {
    fn default() -> Self {
        Reorder::new(REORDER_WINDOW_NS, REORDER_MAX_EVENTS)
    }
}

impl Reorder {
    /// A window of `window_ns` holding at most `max_events`.
    pub fn new(window_ns: u64, max_events: usize) -> Reorder {
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
    pub fn push(&mut self, event: Event, out: &mut impl FnMut(&Event)) {
        let ts = event.header().ts_ns;
        if ts < self.released_ns {
            self.late += 1;
        }
        self.newest_ns = self.newest_ns.max(ts);
        let key = order_key(&event);
        match self.buf.last() {
            Some(last) if self.sorted && order_key(last) > key => {
                // Slightly out of order (another CPU's record): insert it in place if
                // it belongs among the last few; otherwise sort at the next release.
                let from = self.buf.len().saturating_sub(INSERT_DISTANCE);
                let at = from + self.buf[from..].partition_point(|e| order_key(e) <= key);
                if at > from || from == 0 {
                    self.buf.insert(at, event);
                } else {
                    self.sorted = false;
                    self.buf.push(event);
                }
            }
            _ => self.buf.push(event),
        }
        let oldest = self.buf.first().map_or(0, |e| e.header().ts_ns);
        if self.buf.len() >= self.max_events
            || self.newest_ns.saturating_sub(oldest) >= 2 * self.window_ns
        {
            self.release(self.newest_ns.saturating_sub(self.window_ns), out);
        }
    }

    /// Releases everything still held.
    pub fn finish(&mut self, out: &mut impl FnMut(&Event)) {
        self.release(u64::MAX, out);
    }

    /// Events that arrived after later events had already been released.
    pub fn late_events(&self) -> u64 {
        self.late
    }

    fn release(&mut self, upto_ns: u64, out: &mut impl FnMut(&Event)) {
        // The key is a total order (ties are identical records), so an unstable sort
        // gives the same result whatever the arrival order.
        if !self.sorted {
            self.buf.sort_unstable_by_key(order_key);
            self.sorted = true;
        }
        let mut cut = self.buf.partition_point(|e| e.header().ts_ns <= upto_ns);
        if cut == 0 && self.buf.len() >= self.max_events {
            cut = self.buf.len() / 2;
        }
        for e in &self.buf[..cut] {
            out(e);
        }
        if let Some(last) = cut.checked_sub(1).and_then(|i| self.buf.get(i)) {
            self.released_ns = self.released_ns.max(last.header().ts_ns);
        }
        self.buf.drain(..cut);
    }
}

/// What reading a trace found besides the model.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct IngestInfo {
    /// Events read from the file.
    pub events_read: u64,
    /// Byte offset of the first broken chunk, if the trace is truncated.
    pub truncated_at: Option<u64>,
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

/// Reads a whole trace into a model.
///
/// # Errors
/// [`AnalyzeError::Trace`] when the file cannot be opened or is not a valid trace.
/// A truncated trace or a bad record is not an error: the prefix is analyzed and
/// [`IngestInfo`] says where reading stopped.
pub fn load(
    path: &Path,
    progress: &dyn Progress,
) -> Result<(TraceModel, TraceReader, IngestInfo), AnalyzeError> {
    let reader = TraceReader::open(path).map_err(|source| AnalyzeError::Trace {
        path: path.to_path_buf(),
        source,
    })?;
    let mut model = TraceModel::new(reader.header());
    let mut info = IngestInfo {
        truncated_at: reader.truncated_at(),
        ..IngestInfo::default()
    };
    let expected = reader
        .footer()
        .map(|f| f.events_written + f.collector_events);
    let mut window = Reorder::default();
    let mut apply = |e: &Event| model.apply(e);
    for event in reader.events() {
        match event {
            Ok(e) => {
                info.events_read += 1;
                if info.events_read.is_multiple_of(PROGRESS_EVERY) {
                    progress.update(info.events_read, expected);
                }
                window.push(e, &mut apply);
            }
            Err(e) => {
                info.read_error = Some(e.to_string());
                break;
            }
        }
    }
    window.finish(&mut apply);
    progress.update(info.events_read, expected);
    info.late_events = window.late_events();
    model.finish(reader.footer().map(|f| f.end_ts_ns).filter(|&t| t > 0));
    Ok((model, reader, info))
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
