//! The collector's half of `--sample HZ`: each CPU-clock sample the perf-event program
//! sends ([`CpuSampleEvent`]) is named (its frames' functions, classified by the target's
//! room into an operator id), placed in its phase (the decode call around its time) and
//! counted; once a second of samples, the counts leave as [`SampleCountsEvent`]s, one
//! per thread and phase (more when a thread ran more than 16 kinds of code). The samples
//! themselves are never written.

mod frames;

use std::collections::{BTreeMap, HashMap, VecDeque};

use common::event::{
    EVENT_FLAG_EXIT, EventHeader, EventKind, SAMPLE_COUNT_ENTRIES, SAMPLE_FRAMES, SAMPLE_OP_OTHER,
    SAMPLE_OP_WAIT, SAMPLE_PHASE_DECODE, SAMPLE_PHASE_IDLE, SAMPLE_PHASE_PREFILL,
    SAMPLE_STACK_WORDS, SampleCountsEvent,
};

use trace_format::{Event, decode_record};

pub use frames::{Frame, FrameNames};

/// How long one histogram covers.
pub const INTERVAL_NS: u64 = 1_000_000_000;

/// Decode calls remembered for placing late samples.
const CALLS_KEPT: usize = 256;

/// What a target's room makes of the functions at one code address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Named {
    /// An operator's own code (an `OP_NAMES` id): it decides the sample.
    Op(u16),
    /// The thread pool waiting for work or for the other threads: it decides the sample.
    Wait,
    /// A kernel that only some operators call (the id of the one that usually does):
    /// the sample's operator when no address further out names an operator or a wait.
    Kernel(u16),
}

/// Names the functions at one address (innermost, inlined, first), or `None` when they
/// are none of the target's operators, kernels or waits.
pub type SampleClassifier = fn(&[Frame]) -> Option<Named>;

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
    /// What each code address seen names (`None`: nothing).
    by_ip: HashMap<u64, Option<Named>>,
    /// Samples of the current drain: (time, thread, operator).
    pending: Vec<(u64, u32, u16)>,
    calls: VecDeque<Call>,
    /// (thread, phase, operator) → samples, since `interval_start`.
    counts: BTreeMap<(u32, u16, u16), u32>,
    interval: Option<(u64, u64)>,
    /// Samples counted in all.
    pub counted: u64,
    /// Samples that named no operator, by the function they were sampled in (`?`: in no
    /// function the target's files name), to say what a classifier is missing.
    unnamed: HashMap<String, u64>,
    /// The function name of each sampled instruction that named no operator.
    unnamed_at: HashMap<u64, String>,
}

/// Most functions [`CpuSampler::unnamed_note`] lists.
const UNNAMED_LISTED: usize = 4;

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
            unnamed: HashMap::new(),
            unnamed_at: HashMap::new(),
        }
    }

    /// A [`CpuSampleEvent`]'s bytes: named now, placed in its phase at [`Self::settle`].
    pub fn observe_sample(&mut self, record: &[u8]) {
        let Some(Event::CpuSample(ev)) = decode_record(EventKind::CpuSample, record) else {
            return;
        };
        let n = (ev.n_frames as usize).min(SAMPLE_FRAMES);
        let words = (ev.stack_words as usize).min(SAMPLE_STACK_WORDS);
        // The sampled instruction, then the stack's words from the stack pointer up
        // (return addresses of callers without frame pointers), then the frame-pointer
        // walk's frames: the first operator or wait decides; else the first kernel.
        let (pc, walked) = ev.ips[..n].split_at(n.min(1));
        let addrs = pc.iter().chain(&ev.stack[..words]).chain(walked);
        let op = decide(addrs.enumerate().map(|(i, &a)| self.named_at(a, i == 0)));
        let op = op.unwrap_or_else(|| {
            let at = ev.ips[..n.min(1)]
                .iter()
                .find_map(|&ip| self.function_at(ip));
            *self
                .unnamed
                .entry(at.unwrap_or_else(|| "?".into()))
                .or_insert(0) += 1;
            SAMPLE_OP_OTHER
        });
        self.pending.push((ev.header.ts_ns, ev.header.tid, op));
    }

    /// A decode entry or exit (`DecodeEvent` bytes): the phases samples fall in.
    pub fn observe_decode(&mut self, record: &[u8]) {
        let Some(Event::Decode(d)) = decode_record(EventKind::Decode, record) else {
            return;
        };
        let h = d.header;
        if h.flags & EVENT_FLAG_EXIT == 0 {
            let phase = match d.n_tokens {
                1 => SAMPLE_PHASE_DECODE,
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
    /// at the end of the recording); the counts start again.
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

    /// One line on the samples that named no operator, when they are more than 2 % of
    /// all: their share and the functions most of them were in.
    pub fn unnamed_note(&self) -> Option<String> {
        let unnamed: u64 = self.unnamed.values().sum();
        if self.counted == 0 || unnamed * 50 <= self.counted {
            return None;
        }
        let mut top: Vec<(&String, &u64)> = self.unnamed.iter().collect();
        top.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
        let listed: Vec<String> = top
            .iter()
            .take(UNNAMED_LISTED)
            .map(|&(f, &n)| format!("{f} {:.1} %", 100.0 * n as f64 / self.counted as f64))
            .collect();
        Some(format!(
            "{:.1} % of the CPU samples named no operator (shown as `(no operator)`); most \
             were in {}",
            100.0 * unnamed as f64 / self.counted as f64,
            listed.join(", ")
        ))
    }

    /// The name of the function at `ip`: its symbol (the outermost name), or DWARF's;
    /// `FILE (no symbol)` where its file names none.
    fn function_at(&mut self, ip: u64) -> Option<String> {
        if let Some(name) = self.unnamed_at.get(&ip) {
            return Some(name.clone());
        }
        let name = self.names.functions(ip, true).pop().map(|f| {
            if f.function.is_empty() {
                format!("{} (no symbol)", f.object)
            } else {
                f.function
            }
        })?;
        self.unnamed_at.insert(ip, name.clone());
        Some(name)
    }

    /// What the code at `addr` names; `None` for an address in no code (most stack
    /// words: data, heap pointers), which is not remembered. `is_pc`: the sampled
    /// instruction itself.
    fn named_at(&mut self, addr: u64, is_pc: bool) -> Option<Named> {
        if !self.names.in_code(addr, is_pc) {
            return None;
        }
        if let Some(&named) = self.by_ip.get(&addr) {
            return named;
        }
        let frames = self.names.functions(addr, is_pc);
        if frames.is_empty() {
            return None;
        }
        let named = (self.classify)(&frames);
        self.by_ip.insert(addr, named);
        named
    }
}

/// The operator of a sample from what its addresses name, in the order they are tried:
/// the first operator or wait decides; without one, the first kernel; else none.
fn decide(named: impl IntoIterator<Item = Option<Named>>) -> Option<u16> {
    let mut kernel = None;
    for n in named {
        match n {
            Some(Named::Op(id)) => return Some(id),
            Some(Named::Wait) => return Some(SAMPLE_OP_WAIT),
            Some(Named::Kernel(id)) => kernel = kernel.or(Some(id)),
            None => {}
        }
    }
    kernel
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::event::{CpuSampleEvent, DecodeEvent};

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
            (!f.is_empty()).then_some(Named::Wait)
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
    fn an_operator_further_out_decides_over_the_kernel_it_called() {
        use Named::{Kernel, Op, Wait};
        assert_eq!(
            decide([Some(Kernel(5)), None, Some(Op(42)), Some(Op(7))]),
            Some(42)
        );
        assert_eq!(decide([Some(Kernel(5)), None, Some(Kernel(9))]), Some(5));
        assert_eq!(
            decide([None, Some(Wait), Some(Op(7))]),
            Some(SAMPLE_OP_WAIT)
        );
        assert_eq!(decide([None, None]), None);
    }

    #[test]
    fn unnamed_samples_are_listed_by_function_above_two_percent() {
        let mut s = CpuSampler::new(std::process::id(), 99, |_| None);
        s.counted = 1000;
        s.unnamed.insert("memcpy".into(), 15);
        assert_eq!(s.unnamed_note(), None, "1.5 % is not worth a line");
        s.unnamed.insert("?".into(), 30);
        let note = s.unnamed_note().expect("4.5 %");
        assert!(
            note.starts_with("4.5 % of the CPU samples named no operator"),
            "{note}"
        );
        assert!(
            note.ends_with("most were in ? 3.0 %, memcpy 1.5 %"),
            "{note}"
        );
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
