//! The collector's half of `--sample HZ`: each CPU-clock sample the perf-event program
//! sends ([`CpuSampleEvent`]) is named (its frames' functions, classified by the target's
//! room into an operator id), placed in its phase (the decode call around its time) and
//! counted; once a second of samples, the counts leave as [`SampleCountsEvent`]s, one
//! per thread and phase (more when a thread ran more than 16 kinds of code). The samples
//! themselves are never written.

mod frames;

use std::collections::{BTreeMap, HashMap, VecDeque};

use common::event::{
    CpuSampleEvent, EVENT_FLAG_EXIT, EventHeader, EventKind, SAMPLE_COUNT_ENTRIES, SAMPLE_FRAMES,
    SAMPLE_OP_OTHER, SAMPLE_PHASE_DECODE, SAMPLE_PHASE_IDLE, SAMPLE_PHASE_PREFILL,
    SampleCountsEvent,
};

pub use frames::{Frame, FrameNames};

/// How long one histogram covers.
pub const INTERVAL_NS: u64 = 1_000_000_000;

/// Decode calls remembered for placing late samples.
const CALLS_KEPT: usize = 256;

/// Names an operator (an `OP_NAMES` id or `SAMPLE_OP_WAIT`) from the functions at one
/// address (innermost, inlined, first), or `None` when they are none of the target's
/// operators or waits.
pub type SampleClassifier = fn(&[Frame]) -> Option<u16>;

/// One decode call as the token probes saw it.
#[derive(Clone, Copy)]
struct Call {
    start: u64,
    end: Option<u64>,
    phase: u16,
}

/// Counts CPU-clock samples per thread, phase and operator.
pub struct CpuSampler {
    hz: u32,
    pid: u32,
    names: FrameNames,
    classify: SampleClassifier,
    /// Operator of each address seen (`None`: none at that frame).
    by_ip: HashMap<u64, Option<u16>>,
    /// Samples of the current drain: (time, thread, operator).
    pending: Vec<(u64, u32, u16)>,
    calls: VecDeque<Call>,
    /// (thread, phase, operator) → samples, since `interval_start`.
    counts: BTreeMap<(u32, u16, u16), u32>,
    interval: Option<(u64, u64)>,
    /// Samples counted in all.
    pub counted: u64,
}

impl CpuSampler {
    /// A sampler for the target `pid` sampled at `hz`, naming operators with `classify`.
    pub fn new(pid: u32, hz: u32, classify: SampleClassifier) -> CpuSampler {
        CpuSampler {
            hz,
            pid,
            names: FrameNames::new(pid),
            classify,
            by_ip: HashMap::new(),
            pending: Vec::new(),
            calls: VecDeque::new(),
            counts: BTreeMap::new(),
            interval: None,
            counted: 0,
        }
    }

    /// A [`CpuSampleEvent`]'s bytes: named now, placed in its phase at [`Self::settle`].
    pub fn observe_sample(&mut self, record: &[u8]) {
        let Some(ev) = read::<CpuSampleEvent>(record) else {
            return;
        };
        let n = (ev.n_frames as usize).min(SAMPLE_FRAMES);
        let op = ev.ips[..n]
            .iter()
            .find_map(|&ip| self.op_at(ip))
            .unwrap_or(SAMPLE_OP_OTHER);
        self.pending.push((ev.header.ts_ns, ev.header.tid, op));
    }

    /// A decode entry or exit (`DecodeEvent` bytes): the phases samples fall in.
    pub fn observe_decode(&mut self, record: &[u8]) {
        let Some(h) = read::<EventHeader>(record) else {
            return;
        };
        let word = |o: usize| {
            record
                .get(o..o + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        if h.flags & EVENT_FLAG_EXIT == 0 {
            let phase = match word(32) {
                Some(1) => SAMPLE_PHASE_DECODE,
                _ => SAMPLE_PHASE_PREFILL,
            };
            if self.calls.len() == CALLS_KEPT {
                self.calls.pop_front();
            }
            self.calls.push_back(Call {
                start: h.ts_ns,
                end: None,
                phase,
            });
        } else if let Some(c) = self.calls.iter_mut().rev().find(|c| c.end.is_none()) {
            c.end = Some(h.ts_ns);
        }
    }

    /// Places the drain's samples in their phases and counts them.
    pub fn settle(&mut self) {
        for (ts, tid, op) in std::mem::take(&mut self.pending) {
            let phase = self
                .calls
                .iter()
                .rev()
                .find(|c| c.start <= ts && c.end.is_none_or(|e| ts <= e))
                .map_or(SAMPLE_PHASE_IDLE, |c| c.phase);
            *self.counts.entry((tid, phase, op)).or_insert(0) += 1;
            self.counted += 1;
            let (start, end) = self.interval.get_or_insert((ts, ts));
            *start = (*start).min(ts);
            *end = (*end).max(ts);
        }
    }

    /// The histograms of the interval, when it spans a second (or always, with `force`,
    /// at the end of a recording or of a series file); the counts start again.
    pub fn take_due(&mut self, force: bool) -> Vec<SampleCountsEvent> {
        let Some((start, end)) = self.interval else {
            return Vec::new();
        };
        if !force && end - start < INTERVAL_NS {
            return Vec::new();
        }
        self.interval = None;
        let mut out: Vec<SampleCountsEvent> = Vec::new();
        for ((tid, phase, op), n) in std::mem::take(&mut self.counts) {
            let fresh = out.last().is_none_or(|e| {
                e.header.tid != tid || e.phase != phase || e.n as usize == SAMPLE_COUNT_ENTRIES
            });
            if fresh {
                out.push(SampleCountsEvent {
                    header: EventHeader {
                        kind: EventKind::SampleCounts as u32,
                        ts_ns: end,
                        pid: self.pid,
                        tid,
                        cpu: u32::MAX,
                        ..EventHeader::ZERO
                    },
                    start_ns: start,
                    hz: self.hz,
                    phase,
                    ..SampleCountsEvent::default()
                });
            }
            if let Some(e) = out.last_mut() {
                e.ops[e.n as usize] = op;
                e.counts[e.n as usize] = n;
                e.n += 1;
            }
        }
        out
    }

    fn op_at(&mut self, ip: u64) -> Option<u16> {
        if let Some(&op) = self.by_ip.get(&ip) {
            return op;
        }
        let classify = self.classify;
        let op = classify(&self.names.functions(ip));
        self.by_ip.insert(ip, op);
        op
    }
}

/// A record of type `T` from the front of `bytes`.
fn read<T: Copy>(bytes: &[u8]) -> Option<T> {
    if bytes.len() < size_of::<T>() {
        return None;
    }
    // SAFETY: `T` is one of `common::event`'s `#[repr(C)]` records of plain integers (any
    // bit pattern is valid); the length was checked and the read is unaligned.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::event::{DecodeEvent, SAMPLE_OP_WAIT};

    fn bytes<T>(v: &T) -> Vec<u8> {
        // SAFETY: a `#[repr(C)]` record of plain integers, read as its bytes.
        unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }.to_vec()
    }

    fn sample(ts: u64, tid: u32) -> Vec<u8> {
        bytes(&CpuSampleEvent {
            header: EventHeader {
                kind: EventKind::CpuSample as u32,
                ts_ns: ts,
                tid,
                ..EventHeader::ZERO
            },
            n_frames: 1,
            // Address 0 is in no mapping: named by no function.
            ..CpuSampleEvent::default()
        })
    }

    fn decode(ts: u64, n_tokens: u32, exit: bool) -> Vec<u8> {
        bytes(&DecodeEvent {
            header: EventHeader {
                kind: EventKind::Decode as u32,
                flags: if exit { EVENT_FLAG_EXIT } else { 0 },
                ts_ns: ts,
                ..EventHeader::ZERO
            },
            n_tokens,
            ..DecodeEvent::default()
        })
    }

    #[test]
    fn samples_fall_in_the_decode_call_around_them_and_leave_once_a_second() {
        // Address 0 has no function: its samples are nobody's, whatever the classifier says.
        let mut s = CpuSampler::new(std::process::id(), 997, |f| {
            (!f.is_empty()).then_some(SAMPLE_OP_WAIT)
        });
        s.observe_decode(&decode(100, 7, false));
        s.observe_decode(&decode(1_000, 7, true));
        s.observe_decode(&decode(2_000, 1, false));
        for (ts, tid) in [(50, 1), (500, 1), (500, 2), (1_500, 1), (2_500, 2)] {
            s.observe_sample(&sample(ts, tid));
        }
        s.settle();
        assert!(
            s.take_due(false).is_empty(),
            "less than a second of samples"
        );
        let out = s.take_due(true);
        type Row = (u32, u16, Vec<(u16, u32)>);
        let got: Vec<Row> = out
            .iter()
            .map(|e| (e.header.tid, e.phase, e.entries().collect()))
            .collect();
        let other = SAMPLE_OP_OTHER;
        assert_eq!(
            got,
            vec![
                (1, SAMPLE_PHASE_IDLE, vec![(other, 2)]),
                (1, SAMPLE_PHASE_PREFILL, vec![(other, 1)]),
                (2, SAMPLE_PHASE_PREFILL, vec![(other, 1)]),
                (2, SAMPLE_PHASE_DECODE, vec![(other, 1)]),
            ]
        );
        assert!(
            out.iter()
                .all(|e| e.start_ns == 50 && e.header.ts_ns == 2_500 && e.hz == 997)
        );
        assert_eq!(s.counted, 5);
        assert!(s.take_due(true).is_empty(), "counts start again");
    }

    #[test]
    fn many_kinds_of_code_take_several_records() {
        let mut s = CpuSampler::new(std::process::id(), 99, |_| None);
        for op in 0..20u16 {
            s.counts.insert((1, SAMPLE_PHASE_DECODE, op), 1);
        }
        s.interval = Some((0, INTERVAL_NS));
        let out = s.take_due(false);
        assert_eq!(out.iter().map(|e| e.n).collect::<Vec<_>>(), vec![16, 4]);
    }
}
