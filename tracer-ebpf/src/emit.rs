//! Filtering, headers and output shared by all probes.

use core::ffi::c_void;

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
    maps::{Array, HashMap},
};
use common::{
    control::{
        CONTROL_INDEX, OUTPUT_PERF_BUF, STAT_ABI_MISMATCH, STAT_ABI_SEEN, STAT_LOST, STAT_PRODUCED,
        TracerControl,
    },
    engine_abi::ENGINE_ABI_VERSION,
    event::{EventHeader, EventKind, MAX_PMC, OpEvent, PmcReading},
};

use crate::maps::{CONTROL, COUNTERS, EVENTS, PERF_EVENTS, PMC_SLOTS, STATS};

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

/// The output kind currently configured.
#[inline(always)]
pub fn output_kind() -> u32 {
    CONTROL.get(CONTROL_INDEX).map_or(0, |c| c.output)
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
    if let Some(p) = STATS.get_ptr_mut(slot) {
        // `AtomicU64::fetch_add` does not exist on the BPF target (no CAS), but the
        // add itself is BPF's `lock xadd` (BPF_ATOMIC | BPF_ADD, the result unused).
        // SAFETY: `p` is a valid, 8-byte aligned `u64` in this CPU's value of a per-CPU
        // array map, which lives as long as the program; every writer uses atomics.
        unsafe {
            core::intrinsics::atomic_xadd::<u64, u64, { core::intrinsics::AtomicOrdering::Relaxed }>(
                p, 1,
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
/// tick, unless the ring is more than a quarter full — then a forced one.
///
/// Waking the collector on every record (the default) makes it preempt the traced
/// threads on a small machine for every record, and each preemption is itself a
/// scheduler event that wakes the collector again: on a 2-core board that loop cost the
/// engine more than half its decode speed.
#[inline(always)]
fn ring_wakeup_flags() -> u64 {
    let avail = EVENTS.query(BPF_RB_AVAIL_DATA as u64);
    let size = EVENTS.query(BPF_RB_RING_SIZE as u64);
    if avail > size / 4 {
        BPF_RB_FORCE_WAKEUP as u64
    } else {
        BPF_RB_NO_WAKEUP as u64
    }
}

/// Emits `ev` (a whole record) to the configured output and counts it as produced, or as
/// lost when the buffer is full.
#[inline(always)]
pub fn emit<C: EbpfContext, T>(ctx: &C, ev: &T) {
    emit_with(ctx, ev, ring_wakeup_flags());
}

/// Like [`emit`], and wakes the collector at once when the control map's `flags` has
/// `flag` (a `CONTROL_FLAG_WAKE_*`): at decode exits for the QoS controller or the live
/// view, at graph exits while leaf nodes wait to be read. At most one per decode call or
/// graph, so it cannot feed back the way per-record wake-ups did; a forced wake-up costs
/// ~20 µs inside the probe (measured with `BPF_ENABLE_STATS`, `docs/tracer.md`).
#[inline(always)]
pub fn emit_waking_if<C: EbpfContext, T>(ctx: &C, ev: &T, flag: u32) {
    let wake = CONTROL
        .get(CONTROL_INDEX)
        .is_some_and(|c| c.flags & flag != 0);
    let ring_flags = if wake {
        BPF_RB_FORCE_WAKEUP as u64
    } else {
        ring_wakeup_flags()
    };
    emit_with(ctx, ev, ring_flags);
}

#[inline(always)]
fn emit_with<C: EbpfContext, T>(ctx: &C, ev: &T, ring_flags: u64) {
    bump(STAT_PRODUCED);
    let ok = if output_kind() == OUTPUT_PERF_BUF {
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
        EVENTS.output::<T>(ev, ring_flags).is_ok()
    };
    if !ok {
        bump(STAT_LOST);
    }
}

/// Emits an operator record: reserved in place in the ring buffer, or built in the
/// calling thread's scratch slot (`OP_SCRATCH`) for the perf buffer. `fill` writes the
/// record.
#[inline(always)]
pub fn emit_op<C: EbpfContext, F: FnOnce(&mut OpEvent)>(ctx: &C, fill: F) {
    emit_large(
        ctx,
        &crate::maps::OP_ZERO,
        &crate::maps::OP_SCRATCH,
        OpEvent::zeroed,
        fill,
    );
}

/// Emits a record too large for the 512-byte BPF stack next to a probe's other locals:
/// reserved in place in the ring buffer, or, for the perf buffer, built in the calling
/// thread's slot of `scratch` (reset from the all-zero `zero` template first). `zeroed`
/// makes the ring-buffer record's starting value; `fill` writes the record.
#[inline(always)]
pub fn emit_large<C: EbpfContext, T: 'static, F: FnOnce(&mut T)>(
    ctx: &C,
    zero: &Array<T>,
    scratch: &HashMap<u32, T>,
    zeroed: fn() -> T,
    fill: F,
) {
    bump(STAT_PRODUCED);
    if output_kind() == OUTPUT_PERF_BUF {
        let tid = current_tid();
        // Reset (or create) this thread's slot from the zero template, then fill it.
        let reset = zero.get(0).map(|z| scratch.insert(tid, z, 0));
        let p = match reset {
            Some(Ok(())) => scratch.get_ptr_mut(tid),
            _ => None,
        };
        let Some(p) = p else {
            bump(STAT_LOST);
            return;
        };
        // SAFETY: `p` is this thread's slot, valid and aligned for a `T`; only this
        // thread uses it, and it runs one probe at a time.
        let ev = unsafe { &mut *p };
        fill(ev);
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
        return;
    }
    let Some(mut entry) = EVENTS.reserve::<T>(0) else {
        bump(STAT_LOST);
        return;
    };
    let ev = entry.write(zeroed());
    fill(ev);
    entry.submit(ring_wakeup_flags());
}

/// Reads this thread's counters into `pmc` and returns the mask of successful reads.
/// Counters in `control.pmc_scaled` (hardware, may be multiplexed) are read with their
/// enabled/running times; the others as a bare count, which is cheaper.
#[inline(always)]
pub fn read_pmcs(pmc: &mut [PmcReading; MAX_PMC], control: &TracerControl, tid: u32) -> u32 {
    // SAFETY: plain lookup; the value is copied out.
    let Some(slot) = (unsafe { PMC_SLOTS.get(tid) }).copied() else {
        return 0;
    };
    let map = core::ptr::addr_of!(COUNTERS).cast_mut().cast::<c_void>();
    let mut ok = 0u32;
    for (i, reading) in pmc.iter_mut().enumerate() {
        if i as u32 >= control.n_pmc {
            break;
        }
        let index = u64::from(slot * control.n_pmc + i as u32);
        let read = if control.pmc_scaled & (1 << i) != 0 {
            // SAFETY: `COUNTERS` is a perf event array map; the destination is a
            // `PmcReading`, which has the layout of `bpf_perf_event_value` (24 bytes).
            unsafe {
                bpf_perf_event_read_value(
                    map,
                    index,
                    core::ptr::from_mut(reading).cast::<bpf_perf_event_value>(),
                    size_of::<bpf_perf_event_value>() as u32,
                ) == 0
            }
        } else {
            // SAFETY: `COUNTERS` is a perf event array map. The helper returns the count,
            // or a negative errno in the same word (a count never reaches 2^63).
            let v = unsafe { bpf_perf_event_read(map, index) };
            reading.counter = v;
            (v as i64) >= 0
        };
        if read {
            ok |= 1 << i;
        }
    }
    ok
}
