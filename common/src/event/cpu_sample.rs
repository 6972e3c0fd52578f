//! CPU-clock sampling (`profinfer record --sample HZ`): what the perf-event program
//! sends for each sample of a target thread ([`CpuSampleEvent`], ring buffer only) and
//! what the collector writes to the trace instead, one histogram per thread, phase and
//! interval ([`SampleCountsEvent`]). The trace holds the histograms, never the samples:
//! an hour sampled at 997 Hz on two threads is ~7 M samples but ~3 600 × a few records.

use core::mem::{offset_of, size_of};

use super::EventHeader;

/// User-stack frames a [`CpuSampleEvent`] carries (innermost first).
pub const SAMPLE_FRAMES: usize = 8;
/// Words of the raw user stack a [`CpuSampleEvent`] carries, from the stack pointer up.
pub const SAMPLE_STACK_WORDS: usize = 44;

/// One CPU-clock sample of a target thread: the thread's user stack when the timer
/// fired: `ips[0]` the instruction it was at, the rest by frame pointers as far as the
/// code keeps them, and the stack's first words, where the return addresses of code
/// without frame pointers (llama.cpp's release builds) are found by scanning.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuSampleEvent {
    /// Common header ([`super::EventKind::CpuSample`]; tid = the sampled thread).
    pub header: EventHeader,
    /// Valid entries of `ips`.
    pub n_frames: u32,
    /// Valid entries of `stack` (0: the sample interrupted the kernel, or the stack could
    /// not be read).
    pub stack_words: u32,
    /// User-space instruction addresses, innermost first.
    pub ips: [u64; SAMPLE_FRAMES],
    /// The user stack from the stack pointer up.
    pub stack: [u64; SAMPLE_STACK_WORDS],
}
const _: () =
    assert!(size_of::<CpuSampleEvent>() == 32 + 8 + 8 * SAMPLE_FRAMES + 8 * SAMPLE_STACK_WORDS);
const _: () = assert!(offset_of!(CpuSampleEvent, n_frames) == 32);
const _: () = assert!(offset_of!(CpuSampleEvent, stack_words) == 36);
const _: () = assert!(offset_of!(CpuSampleEvent, ips) == 40);
const _: () = assert!(offset_of!(CpuSampleEvent, stack) == 104);
// No larger than an operator record, the largest kind (`MAX_EVENT_SIZE`).
const _: () = assert!(size_of::<CpuSampleEvent>() <= size_of::<super::OpEvent>());

impl Default for CpuSampleEvent {
    fn default() -> Self {
        CpuSampleEvent {
            header: EventHeader::ZERO,
            n_frames: 0,
            stack_words: 0,
            ips: [0; SAMPLE_FRAMES],
            stack: [0; SAMPLE_STACK_WORDS],
        }
    }
}

/// Operator entries in one [`SampleCountsEvent`] (a thread's phase with more operator
/// kinds in one interval takes several records).
pub const SAMPLE_COUNT_ENTRIES: usize = 16;

/// [`SampleCountsEvent::ops`]: samples in the target's thread pool waiting for work or
/// for the other threads (a barrier, a spin, a futex), inside no operator.
pub const SAMPLE_OP_WAIT: u16 = 0xFFFE;
/// [`SampleCountsEvent::ops`]: samples in no operator and no thread-pool wait
/// (tokenizer, sampler, the main loop, code without symbols).
pub const SAMPLE_OP_OTHER: u16 = 0xFFFF;

/// [`SampleCountsEvent::phase`]: outside every decode call.
pub const SAMPLE_PHASE_IDLE: u16 = 0;
/// [`SampleCountsEvent::phase`]: inside a decode call of more than one token (prefill).
pub const SAMPLE_PHASE_PREFILL: u16 = 1;
/// [`SampleCountsEvent::phase`]: inside a decode call of one token.
pub const SAMPLE_PHASE_DECODE: u16 = 2;

/// Collector-made: the CPU-clock samples of thread `header.tid` in phase `phase` between
/// `start_ns` and `header.ts_ns`, counted per operator (`ops[i]` an
/// [`crate::op_catalog::OP_NAMES`] id or `SAMPLE_OP_*`, `counts[i]` its samples).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleCountsEvent {
    /// Common header (ts = the interval's end, pid = target, tid = the thread,
    /// cpu = `u32::MAX`).
    pub header: EventHeader,
    /// The interval's start.
    pub start_ns: u64,
    /// The sampling frequency asked for, Hz.
    pub hz: u32,
    /// `SAMPLE_PHASE_*`.
    pub phase: u16,
    /// Valid entries of `ops` and `counts`.
    pub n: u16,
    /// Operator ids.
    pub ops: [u16; SAMPLE_COUNT_ENTRIES],
    /// Samples per operator.
    pub counts: [u32; SAMPLE_COUNT_ENTRIES],
}
const _: () = assert!(size_of::<SampleCountsEvent>() == 48 + 2 * 16 + 4 * 16);
const _: () = assert!(offset_of!(SampleCountsEvent, start_ns) == 32);
const _: () = assert!(offset_of!(SampleCountsEvent, hz) == 40);
const _: () = assert!(offset_of!(SampleCountsEvent, phase) == 44);
const _: () = assert!(offset_of!(SampleCountsEvent, n) == 46);
const _: () = assert!(offset_of!(SampleCountsEvent, ops) == 48);
const _: () = assert!(offset_of!(SampleCountsEvent, counts) == 80);

impl SampleCountsEvent {
    /// The valid (operator id, samples) pairs.
    pub fn entries(&self) -> impl Iterator<Item = (u16, u32)> + '_ {
        let n = (self.n as usize).min(SAMPLE_COUNT_ENTRIES);
        self.ops[..n]
            .iter()
            .copied()
            .zip(self.counts[..n].iter().copied())
    }
}
