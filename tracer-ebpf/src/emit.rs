//! Filtering, headers and output shared by all probes.

use core::ffi::c_void;

use aya_ebpf::maps::RingBuf;

use aya_ebpf::{
    EbpfContext,
    bindings::{
        BPF_F_CURRENT_CPU, BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP,
        BPF_RB_RING_SIZE, bpf_perf_event_value,
    },
    helpers::{
        bpf_get_current_pid_tgid, bpf_get_smp_processor_id, bpf_ktime_get_ns,
        generated::{bpf_perf_event_output, bpf_perf_event_read, bpf_perf_event_read_value},
    },
};
use common::{
    control::{
        CONTROL_INDEX, OUTPUT_PERF_BUF, STAT_ABI_MISMATCH, STAT_ABI_SEEN, STAT_LOST, STAT_PRODUCED,
        STAT_SAMPLES, STAT_SAMPLES_LOST, TracerControl,
    },
    engine_abi::ENGINE_ABI_VERSION,
    event::{EventHeader, EventKind, PmcReading},
};

use crate::maps::{
    CONTROL, COUNTERS, LARGE_BLOCK_BYTES, LARGE_SCRATCH, LARGE_ZERO, PERF_EVENTS, PMC_SLOTS, STATS,
};

/// Failure of a probe body (an errno-style code; the probe just returns).
pub type ProbeResult = Result<(), i64>;

/// The current thread's tid.
#[inline(always)]
pub fn current_tid() -> u32 {
    bpf_get_current_pid_tgid() as u32
}

/// The control record, if the current task belongs to the target and `level` is on.
#[inline(always)]
pub fn enabled_for_target(level: u32) -> Option<TracerControl> {
    let c = *CONTROL.get(CONTROL_INDEX)?;
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if c.target_tgid == 0 || c.target_tgid != tgid || c.levels & level == 0 {
        return None;
    }
    Some(c)
}

/// The control record regardless of target (for scheduler tracepoints), if `level` is on.
#[inline(always)]
pub fn enabled_any(level: u32) -> Option<TracerControl> {
    let c = *CONTROL.get(CONTROL_INDEX)?;
    if c.target_tgid == 0 || c.levels & level == 0 {
        return None;
    }
    Some(c)
}

/// A header for an event of `kind` happening now on the current task.
#[inline(always)]
pub fn header(kind: EventKind, flags: u32) -> EventHeader {
    let pid_tgid = bpf_get_current_pid_tgid();
    EventHeader {
        kind: kind as u32,
        flags,
        // SAFETY: helper without preconditions.
        ts_ns: unsafe { bpf_ktime_get_ns() },
        pid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
        // SAFETY: helper without preconditions.
        cpu: unsafe { bpf_get_smp_processor_id() },
        _pad: 0,
    }
}

/// Adds one to this CPU's statistics slot `slot`, atomically: programs are not migrated
/// while they run, but on a preemptible kernel a uprobe program can be preempted by
/// another task's program on the same CPU, and a plain `+= 1` would then lose a count
/// (breaking produced = written + lost).
#[inline(always)]
pub fn bump(slot: u32) {
    add_stat(slot, 1);
}

/// Takes one from this CPU's statistics slot `slot`, atomically, as [`bump`] adds one.
#[inline(always)]
fn unbump(slot: u32) {
    // Adding 2^64 − 1 wraps to a subtraction.
    add_stat(slot, u64::MAX);
}

/// Adds `v` to this CPU's statistics slot `slot` with BPF's atomic add.
#[inline(always)]
fn add_stat(slot: u32, v: u64) {
    if let Some(p) = STATS.get_ptr_mut(slot) {
        // `AtomicU64::fetch_add` does not exist on the BPF target (no CAS), but the
        // add itself is BPF's `lock xadd` (BPF_ATOMIC | BPF_ADD, the result unused).
        // SAFETY: `p` is a valid, 8-byte aligned `u64` in this CPU's value of a per-CPU
        // array map, which lives as long as the program; every writer uses atomics.
        unsafe {
            core::intrinsics::atomic_xadd::<u64, u64, { core::intrinsics::AtomicOrdering::Relaxed }>(
                p, v,
            )
        };
    }
}

/// Whether a structure's leading `abi_version` is the layout these probes were built
/// for; if not, counts the hit in `STAT_ABI_MISMATCH` and remembers the version in
/// `STAT_ABI_SEEN` (the collector reports both once).
#[inline(always)]
pub fn abi_ok(abi_version: u32) -> bool {
    if abi_version == ENGINE_ABI_VERSION {
        return true;
    }
    bump(STAT_ABI_MISMATCH);
    if let Some(p) = STATS.get_ptr_mut(STAT_ABI_SEEN) {
        // SAFETY: `p` points into this CPU's value of a per-CPU array; a plain store of
        // a version number (any interleaving leaves one of the written versions).
        unsafe { *p = u64::from(abi_version) };
    }
    false
}

/// Ring-buffer submit flags: no wake-up of the collector, which drains on its own 50 ms
/// tick, unless the ring holds more than `wake_bytes` unread bytes (a quarter of it,
/// `TracerControl::ring_wake_bytes`) — then a forced one.
///
/// Waking the collector on every record (the default) makes it preempt the traced
/// threads on a small machine for every record, and each preemption is itself a
/// scheduler event that wakes the collector again: on a 2-core board that loop cost the
/// engine more than half its decode speed.
#[inline(always)]
fn ring_wakeup_flags(ring: &RingBuf, wake_bytes: u32) -> u64 {
    let avail = ring.query(BPF_RB_AVAIL_DATA as u64);
    let threshold = if wake_bytes != 0 {
        u64::from(wake_bytes)
    } else {
        ring.query(BPF_RB_RING_SIZE as u64) / 4
    };
    if avail > threshold {
        BPF_RB_FORCE_WAKEUP as u64
    } else {
        BPF_RB_NO_WAKEUP as u64
    }
}

/// Where records go, from the control map: the output kind and the wake-up threshold.
#[derive(Clone, Copy)]
struct Output {
    perf: bool,
    wake_bytes: u32,
    flags: u32,
}

#[inline(always)]
fn output() -> Output {
    match CONTROL.get(CONTROL_INDEX) {
        Some(c) => Output {
            perf: c.output == OUTPUT_PERF_BUF,
            wake_bytes: c.ring_wake_bytes,
            flags: c.flags,
        },
        None => Output {
            perf: false,
            wake_bytes: 0,
            flags: 0,
        },
    }
}

/// Runs `$body` with `$ring` bound to this CPU's ring buffer (`maps::EVENTS_*`): one arm
/// per ring, since a helper's map argument must be a constant the verifier knows.
macro_rules! on_ring {
    (|$ring:ident| $body:expr) => {{
        // SAFETY: helper without preconditions.
        let cpu = unsafe { bpf_get_smp_processor_id() };
        match cpu % common::control::RINGS {
            0 => {
                let $ring = &crate::maps::EVENTS_0;
                $body
            }
            1 => {
                let $ring = &crate::maps::EVENTS_1;
                $body
            }
            2 => {
                let $ring = &crate::maps::EVENTS_2;
                $body
            }
            3 => {
                let $ring = &crate::maps::EVENTS_3;
                $body
            }
            4 => {
                let $ring = &crate::maps::EVENTS_4;
                $body
            }
            5 => {
                let $ring = &crate::maps::EVENTS_5;
                $body
            }
            6 => {
                let $ring = &crate::maps::EVENTS_6;
                $body
            }
            _ => {
                let $ring = &crate::maps::EVENTS_7;
                $body
            }
        }
    }};
}

/// Emits `ev` (a whole record) to the configured output and counts it as produced, or as
/// lost when the buffer is full.
#[inline(always)]
pub fn emit<C: EbpfContext, T>(ctx: &C, ev: &T) {
    emit_with(ctx, ev, 0, STAT_PRODUCED, STAT_LOST);
}

/// Like [`emit`], and wakes the collector at once when the control map's `flags` has
/// `flag` (a `CONTROL_FLAG_WAKE_*`): at decode exits for the QoS controller or the live
/// view, at graph exits while leaf nodes wait to be read. At most one per decode call or
/// graph, so it cannot feed back the way per-record wake-ups did; a forced wake-up costs
/// ~20 µs inside the probe (measured with `BPF_ENABLE_STATS`, `docs/tracer.md`).
#[inline(always)]
pub fn emit_waking_if<C: EbpfContext, T>(ctx: &C, ev: &T, flag: u32) {
    emit_with(ctx, ev, flag, STAT_PRODUCED, STAT_LOST);
}

/// Emits `ev`, forcing a wake-up when the control flags have one of `wake_flag`'s bits;
/// counts it in the statistics slot `produced`, and in `lost` when it did not fit.
#[inline(always)]
fn emit_with<C: EbpfContext, T>(ctx: &C, ev: &T, wake_flag: u32, produced: u32, lost: u32) {
    bump(produced);
    let out = output();
    let ok = if out.perf {
        // SAFETY: `PERF_EVENTS` is a perf event array map (its address is the map
        // definition, `PerfEventArray` is `repr(transparent)` over it); `ev` is a valid
        // record of `size_of::<T>()` bytes.
        unsafe {
            bpf_perf_event_output(
                ctx.as_ptr(),
                core::ptr::addr_of!(PERF_EVENTS).cast_mut().cast::<c_void>(),
                BPF_F_CURRENT_CPU,
                core::ptr::from_ref(ev).cast_mut().cast::<c_void>(),
                size_of::<T>() as u64,
            ) == 0
        }
    } else {
        on_ring!(|ring| {
            let flags = if out.flags & wake_flag != 0 {
                BPF_RB_FORCE_WAKEUP as u64
            } else {
                ring_wakeup_flags(ring, out.wake_bytes)
            };
            ring.output::<T>(ev, flags).is_ok()
        })
    };
    if !ok {
        bump(lost);
    }
}

/// Emits a record too large for the 512-byte BPF stack next to a probe's other locals:
/// reserved in place in the ring buffer, or, for the perf buffer, built in the calling
/// thread's `LARGE_SCRATCH` block. Either way it starts all zero; `fill` writes it and
/// says whether to send it (`false`: what it read changed under it; the reservation is
/// discarded and nothing is counted).
#[inline(always)]
pub fn emit_large<C: EbpfContext, T: 'static, F: FnOnce(&mut T) -> bool>(ctx: &C, fill: F) {
    const { assert!(size_of::<T>() <= LARGE_BLOCK_BYTES && align_of::<T>() <= 8) };
    bump(STAT_PRODUCED);
    let out = output();
    // Two separate paths, each with its own `fill`: when one path chose where the record
    // is built and a second test after `fill` chose how to send it, the compiler tested
    // the reservation's pointer for the second choice, and verifiers before Linux ~6.2
    // (6.1's, found in the arm64 board test) do not know that a reserved, non-null
    // pointer is not 0 there: they walked a path that never submits and refused the
    // program ("Unreleased reference").
    if out.perf {
        emit_large_perf(ctx, fill);
    } else {
        emit_large_ring(out.wake_bytes, fill);
    }
}

/// [`emit_large`] where no probe context is at hand (a `bpf_loop` callback, whose
/// context pointer the verifier would not take back as one): the ring buffer only; with
/// the perf-buffer output (kernels before 5.8, which have no `bpf_loop` either) the
/// record is counted lost.
#[inline(always)]
pub fn emit_large_to_ring<T: 'static, F: FnOnce(&mut T) -> bool>(fill: F) {
    emit_large_to_ring_counted(STAT_PRODUCED, STAT_LOST, fill);
}

/// [`emit_large_to_ring`] for a CPU-clock sample: counted in `STAT_SAMPLES` and
/// `STAT_SAMPLES_LOST`, apart from the probes' records (the collector folds samples into
/// histograms). The ring buffer only: the perf-buffer path builds records in a
/// per-thread scratch block, which a timer interrupt could find half-filled by the same
/// thread's probe; with that output (kernels before 5.8) every sample counts as lost.
#[inline(always)]
pub fn emit_sample_to_ring<T: 'static, F: FnOnce(&mut T) -> bool>(fill: F) {
    emit_large_to_ring_counted(STAT_SAMPLES, STAT_SAMPLES_LOST, fill);
}

#[inline(always)]
fn emit_large_to_ring_counted<T: 'static, F: FnOnce(&mut T) -> bool>(
    produced: u32,
    lost: u32,
    fill: F,
) {
    const { assert!(size_of::<T>() <= LARGE_BLOCK_BYTES && align_of::<T>() <= 8) };
    bump(produced);
    let out = output();
    if out.perf {
        bump(lost);
        return;
    }
    emit_large_ring_counted(out.wake_bytes, produced, lost, fill);
}

/// [`emit_large`] into this CPU's ring buffer: reserved in place, submitted or discarded.
#[inline(always)]
fn emit_large_ring<T: 'static, F: FnOnce(&mut T) -> bool>(wake_bytes: u32, fill: F) {
    emit_large_ring_counted(wake_bytes, STAT_PRODUCED, STAT_LOST, fill);
}

/// [`emit_large_ring`] counting in the statistics slots `produced` and `lost`.
#[inline(always)]
fn emit_large_ring_counted<T: 'static, F: FnOnce(&mut T) -> bool>(
    wake_bytes: u32,
    produced: u32,
    lost: u32,
    fill: F,
) {
    // (The submit flags are taken at the submit, from the same CPU's ring: computed here
    // in each of the eight arms, they multiplied the verifier's states past its budget in
    // the programs that emit in a loop.)
    let Some(mut entry) = on_ring!(|ring| ring.reserve::<T>(0)) else {
        bump(lost);
        return;
    };
    let p = entry.as_mut_ptr();
    // SAFETY: `p` is a ring-buffer reservation of `size_of::<T>()` bytes, 8-byte aligned
    // (asserted in `emit_large`). All-zero bytes are a valid wire record.
    let ev = unsafe {
        zero_words(p.cast::<u64>(), size_of::<T>() / 8);
        &mut *p
    };
    if fill(ev) {
        entry.submit(on_ring!(|ring| ring_wakeup_flags(ring, wake_bytes)));
    } else {
        // Not produced after all.
        unbump(produced);
        entry.discard(BPF_RB_NO_WAKEUP as u64);
    }
}

/// [`emit_large`] into the perf buffer: built in the calling thread's `LARGE_SCRATCH`
/// block, then copied out.
#[inline(always)]
fn emit_large_perf<C: EbpfContext, T: 'static, F: FnOnce(&mut T) -> bool>(ctx: &C, fill: F) {
    let tid = current_tid();
    let p = match LARGE_SCRATCH.get_ptr_mut(tid) {
        Some(p) => Some(p),
        None => LARGE_ZERO
            .get(0)
            .and_then(|z| LARGE_SCRATCH.insert(tid, z, 0).ok())
            .and_then(|()| LARGE_SCRATCH.get_ptr_mut(tid)),
    };
    let Some(p) = p.map(|p| p.cast::<T>()) else {
        bump(STAT_LOST);
        return;
    };
    // SAFETY: this thread's scratch block, 8-byte aligned and large enough for a `T`
    // (asserted in `emit_large`; only this thread uses it, one probe at a time).
    let ev = unsafe {
        zero_words(p.cast::<u64>(), size_of::<T>() / 8);
        &mut *p
    };
    if !fill(ev) {
        // Not produced after all.
        unbump(STAT_PRODUCED);
        return;
    }
    // SAFETY: as in `emit`.
    let ret = unsafe {
        bpf_perf_event_output(
            ctx.as_ptr(),
            core::ptr::addr_of!(PERF_EVENTS).cast_mut().cast::<c_void>(),
            BPF_F_CURRENT_CPU,
            p.cast::<c_void>(),
            size_of::<T>() as u64,
        )
    };
    if ret != 0 {
        bump(STAT_LOST);
    }
}

/// Zeroes `n` words at `p` with one store each. Volatile stores: plain ones become a
/// `memset` call, which bpf-linker emits as a byte loop that the verifier walks byte by
/// byte at every call site (a program with a few large records exceeded its budget of a
/// million instructions).
///
/// # Safety
/// `p` must be valid for writes of `n` aligned words.
#[inline(always)]
unsafe fn zero_words(p: *mut u64, n: usize) {
    for i in 0..n {
        // SAFETY: the caller guarantees `p..p + n` is writable and aligned.
        unsafe { core::ptr::write_volatile(p.add(i), 0) };
    }
}

/// The counter slot of thread `tid` (`PMC_SLOTS`), if counters were opened for it.
#[inline(always)]
pub fn pmc_slot(tid: u32) -> Option<u32> {
    // SAFETY: plain lookup; the value is copied out.
    unsafe { PMC_SLOTS.get(tid) }.copied()
}

/// Reads counter `i` of the thread at counter slot `slot`. Counters in
/// `control.pmc_scaled` (hardware, may be multiplexed) are read with their enabled/running
/// times; the others as a bare count, which is cheaper.
#[inline(always)]
pub fn read_pmc(i: u32, control: &TracerControl, slot: u32) -> Option<PmcReading> {
    let map = core::ptr::addr_of!(COUNTERS).cast_mut().cast::<c_void>();
    let index = u64::from(slot * control.n_pmc + i);
    // No zeroed `PmcReading` first: bpf-linker made that a call of a byte-wise memset,
    // which the verifier walks 24 times per call and per path, and Linux 6.1's verifier
    // then gave up on the programs that read counters ("BPF program is too large").
    if control.pmc_scaled & (1 << i) != 0 {
        let mut reading = core::mem::MaybeUninit::<PmcReading>::uninit();
        // SAFETY: `COUNTERS` is a perf event array map; the destination is 24 writable
        // bytes with the layout of `bpf_perf_event_value` (the helper writes all of them,
        // zeros on failure).
        let read = unsafe {
            bpf_perf_event_read_value(
                map,
                index,
                reading.as_mut_ptr().cast::<bpf_perf_event_value>(),
                size_of::<bpf_perf_event_value>() as u32,
            ) == 0
        };
        // SAFETY: written by the helper (above).
        read.then(|| unsafe { reading.assume_init() })
    } else {
        // SAFETY: `COUNTERS` is a perf event array map. The helper returns the count,
        // or a negative errno in the same word (a count never reaches 2^63).
        let v = unsafe { bpf_perf_event_read(map, index) };
        ((v as i64) >= 0).then_some(PmcReading {
            counter: v,
            enabled: 0,
            running: 0,
        })
    }
}
