//! Operator spans, for every target: a thread's span of a node opens at the node's start
//! (kept in the thread's `OP_THREADS` slot, nothing emitted) and leaves the kernel as one
//! 32-byte `OpSpanEvent` when it closes; one of a node's workers (`is_describer`, by the
//! node's address, so the reads spread over the threads) sends the node's description
//! (`NodeDescEvent`) only when its fingerprint differs from the one last sent for the
//! node's position in the graph (`DESC_SEEN`), so a decode graph is described once per
//! shape.
//!
//! Timestamps: a span opens at the end of the start probe and closes at the beginning of
//! the closing one, so the probes' own work stays outside the node's time.

use aya_ebpf::{EbpfContext, helpers::bpf_ktime_get_ns};
use common::{
    control::{DETAIL_PMC, MAX_DESCRIBED_NODES, TracerControl},
    event::{
        EventKind, MAX_PMC, NodeDescEvent, OP_SPAN_END_APPROX, OP_SPAN_FUSED, OpSpanEvent,
        OpSpanPmcEvent, PmcReading,
    },
    op_thread::OpThread,
};

use crate::{
    emit::{current_tid, emit, emit_large, header, pmc_slot, read_pmc},
    maps::{
        DESC_SEEN, LARGE_BLOCK_BYTES, LARGE_ZERO, NODE_BLOB, NODE_BLOB_WORDS, NodeBlob, OP_THREADS,
    },
};

/// Now, `CLOCK_MONOTONIC` ns.
#[inline(always)]
pub fn now_ns() -> u64 {
    // SAFETY: helper without preconditions.
    unsafe { bpf_ktime_get_ns() }
}

/// The state of the calling thread `tid`, created on first use.
#[inline(always)]
pub fn thread_state(tid: u32) -> Option<&'static mut OpThread> {
    let p = match OP_THREADS.get_ptr_mut(tid) {
        Some(p) => p,
        None => {
            // Created from the all-zero block (an `OpThread` is too large for the stack).
            const { assert!(size_of::<OpThread>() <= LARGE_BLOCK_BYTES) };
            let zero = LARGE_ZERO.get_ptr(0)?.cast::<OpThread>();
            // SAFETY: the zero block is 8-byte aligned, at least as large as an
            // `OpThread` and all zero, which is `OpThread::ZERO`.
            OP_THREADS.insert(tid, unsafe { &*zero }, 0).ok()?;
            OP_THREADS.get_ptr_mut(tid)?
        }
    };
    // SAFETY: this thread's slot of a hash map, valid while the program runs; only this
    // thread writes it while its node is open (llama.cpp's graph end closes the idle
    // workers' spans, see `llama_cpp::flush_workers`).
    Some(unsafe { &mut *p })
}

/// The state of thread `tid` (the calling thread, or a worker of the graph that thread
/// 0 ends), if it has one.
#[inline(always)]
pub fn state_of(tid: u32) -> Option<&'static mut OpThread> {
    // SAFETY: a slot of a hash map, valid while the program runs. Its own thread writes it
    // while a node is open; another thread writes it only to close a worker's last span
    // at a llama.cpp graph's end (`llama_cpp::flush_workers`), when every worker has met
    // the graph's final barrier and none writes its slot until the next graph.
    OP_THREADS.get_ptr_mut(tid).map(|p| unsafe { &mut *p })
}

/// Opens a span of `node` on this thread (`flags`: `OpSpanEvent::flags_for(ith, kind)`),
/// starting now; reads the thread's counters first when they are recorded.
#[inline(always)]
pub fn open(st: &mut OpThread, node: u64, flags: u32, control: &TracerControl) {
    st.node = node;
    st.flags = flags;
    st.wait_ns = 0;
    st.fused = 0;
    st.pmc_ok = 0;
    if control.op_detail & DETAIL_PMC != 0 {
        read_pmcs(&mut st.pmc, control, |i| {
            set_bit_in_memory(&mut st.pmc_ok, i)
        });
    }
    st.start_ns = now_ns();
}

/// Reads the calling thread's counters into `into`, calling `read(i)` for each counter
/// `i` read.
///
/// Callers gather the read counters' mask in map memory, not in a register or on the
/// stack: there it is a constant the verifier tracks exactly, so each combination of
/// counters read or not was another state to walk (2^8 at the end of the loop), and
/// Linux 6.1's verifier gave up on the programs that read counters ("BPF program is too
/// large", found in the arm64 board test).
#[inline(always)]
fn read_pmcs(
    into: &mut [PmcReading; MAX_PMC],
    control: &TracerControl,
    mut read: impl FnMut(usize),
) {
    let Some(slot) = pmc_slot(current_tid()) else {
        return;
    };
    let live = (1u32 << control.n_pmc.min(MAX_PMC as u32)) - 1;
    for (i, reading) in into.iter_mut().enumerate() {
        if live & (1 << i) != 0
            && let Some(r) = read_pmc(i as u32, control, slot)
        {
            *reading = r;
            read(i);
        }
    }
}

/// `*mask |= 1 << bit` as a load and a store the compiler keeps (`mask` in map memory;
/// see [`read_pmcs`]).
#[inline(always)]
fn set_bit_in_memory(mask: &mut u32, bit: usize) {
    let p = core::ptr::from_mut(mask);
    // SAFETY: `p` comes from a live `&mut u32`: valid, aligned, not aliased.
    unsafe { core::ptr::write_volatile(p, core::ptr::read_volatile(p) | 1 << bit) };
}

/// Where a closing span's counter readings come from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum PmcEnd {
    /// Read them now (the closing probe runs on the span's own thread).
    ReadNow,
    /// The readings taken when the thread began to wait (`OpThread::pmc_wait`).
    AtWait,
    /// None (another thread closes the span and it has no readings at its end).
    Missing,
}

/// Closes thread `tid`'s open span at `end_ns` (with `extra` span flags) and emits its
/// record, with counter deltas when counters were read at its start; then a zero-length
/// span for the second node of a fused pair. Nothing open: nothing to do.
#[inline(always)]
pub fn close<C: EbpfContext>(
    ctx: &C,
    st: &mut OpThread,
    tid: u32,
    end_ns: u64,
    extra: u32,
    pmc_end: PmcEnd,
    control: &TracerControl,
) {
    if st.node == 0 {
        return;
    }
    let end = end_ns.max(st.start_ns);
    let span = OpSpanEvent::new(tid, st.node, end, end - st.start_ns, st.flags | extra);
    if st.pmc_ok != 0 && control.op_detail & DETAIL_PMC != 0 && pmc_end != PmcEnd::Missing {
        let slot = pmc_slot(tid).unwrap_or(u32::MAX);
        emit_large(ctx, |ev: &mut OpSpanPmcEvent| {
            ev.span = span;
            ev.span.kind = EventKind::OpSpanPmc as u32;
            // The counters to read, as a mask: a `break`/`continue` in this loop let LLVM
            // lay it out with its latch falling through into its header, a loop Linux
            // before ~6.3 refuses ("back-edge from insn N to N+1": its CFG check allows
            // a back-edge only on a jump), found in the arm64 board test on 6.1. The
            // mask of deltas taken is gathered in the record itself (see `read_pmcs`).
            let live = st.pmc_ok & ((1u32 << control.n_pmc.min(MAX_PMC as u32)) - 1);
            for i in 0..MAX_PMC {
                if live & (1 << i) != 0 {
                    let end = match pmc_end {
                        PmcEnd::ReadNow if slot != u32::MAX => read_pmc(i as u32, control, slot),
                        PmcEnd::ReadNow => None,
                        _ => Some(st.pmc_wait[i]),
                    };
                    if let Some(r) = end {
                        ev.delta[i] = scaled_delta(&st.pmc[i], &r);
                        set_bit_in_memory(&mut ev.pmc_ok, i);
                    }
                }
            }
            true
        });
    } else {
        emit(ctx, &span);
    }
    if st.fused != 0 {
        let second = OpSpanEvent::new(tid, st.fused, end, 0, st.flags | extra | OP_SPAN_FUSED);
        emit(ctx, &second);
        st.fused = 0;
    }
    st.node = 0;
}

/// Reads this thread's counters into `st.pmc_wait` (when counters are recorded): the
/// readings of a llama.cpp node's end, taken at each barrier it meets.
#[inline(always)]
pub fn read_wait_pmcs(st: &mut OpThread, control: &TracerControl) {
    if control.op_detail & DETAIL_PMC != 0 {
        read_pmcs(&mut st.pmc_wait, control, |_| {});
    }
}

/// A counter's change between two readings; a multiplexed (hardware) counter, read with
/// its enabled and running times, scaled by enabled / running over the interval as
/// `perf stat` does (software counters carry no times and are taken as counted).
#[inline(always)]
fn scaled_delta(start: &PmcReading, end: &PmcReading) -> u64 {
    let delta = end.counter.wrapping_sub(start.counter);
    let enabled = end.enabled.wrapping_sub(start.enabled);
    let running = end.running.wrapping_sub(start.running);
    if running == 0 || running >= enabled {
        return delta;
    }
    if delta < (1 << 32) && enabled < (1 << 32) {
        delta * enabled / running
    } else {
        delta / running * enabled
    }
}

/// FNV-1a over the first `n` (≤ [`NODE_BLOB_WORDS`]) 64-bit words but those whose bit
/// is set in `skip` (per-step values, not part of a description): the fingerprint of a
/// node's description. A function of its own with a loop (an unrolled one kept every
/// word live and spilled them onto the 512-byte stack).
#[inline(never)]
pub fn fingerprint(words: &[u64; NODE_BLOB_WORDS], n: u64, skip: u64, seed: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for (i, w) in words.iter().enumerate() {
        if i as u64 >= n {
            break;
        }
        if skip & (1 << i) == 0 {
            h = (h ^ *w).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// Ends thread `tid`'s open span at `end_ns` without counters and flagged approximate:
/// a span whose end probe was not seen (detached meanwhile, or a build without one).
#[inline(always)]
pub fn close_unseen<C: EbpfContext>(
    ctx: &C,
    st: &mut OpThread,
    tid: u32,
    end_ns: u64,
    control: &TracerControl,
) {
    close(
        ctx,
        st,
        tid,
        end_ns,
        OP_SPAN_END_APPROX,
        PmcEnd::Missing,
        control,
    );
}

/// This CPU's scratch for reading a node in one piece, stamped with the calling thread.
#[inline(always)]
pub fn node_blob() -> Option<&'static mut NodeBlob> {
    let p = NODE_BLOB.get_ptr_mut(0)?;
    // SAFETY: this CPU's value of a per-CPU array, valid while the program runs; the
    // tid stamp (`blob_still_mine`) detects another program's use in between.
    let blob = unsafe { &mut *p };
    blob.tid = u64::from(current_tid());
    Some(blob)
}

/// Whether `blob` still holds what the calling thread read into it.
#[inline(always)]
pub fn blob_still_mine(blob: &NodeBlob) -> bool {
    blob.tid == u64::from(current_tid())
}

/// Whether thread `ith` of the `nth` computing the node at `addr` is the one that
/// describes it. Every thread computes every node, so the checks are spread over them by
/// a hash of the address: on thread 0 alone they would delay it at every node, and every
/// other thread would wait for it at the barrier.
#[inline(always)]
pub fn is_describer(addr: u64, ith: u32, nth: u32) -> bool {
    nth <= 1 || ((addr.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32) % nth == ith
}

/// Whether the description with fingerprint `print` of the node at position `index` of
/// its graph differs from the one last sent for that position (and remembers it as sent).
#[inline(always)]
pub fn description_changed(index: u32, print: u64) -> bool {
    let Some(p) = DESC_SEEN.get_ptr_mut(index & (MAX_DESCRIBED_NODES - 1)) else {
        return true;
    };
    // SAFETY: one slot of an array map, valid while the program runs; the describer of a
    // graph position writes it (other threads describe other positions).
    let seen = unsafe { &mut *p };
    if *seen == print {
        return false;
    }
    *seen = print;
    true
}

/// Forgets the description last sent for graph position `index`, so that the next check
/// sends it again (one that could not be sent whole).
#[inline(always)]
pub fn forget_description(index: u32) {
    if let Some(p) = DESC_SEEN.get_ptr_mut(index & (MAX_DESCRIBED_NODES - 1)) {
        // SAFETY: as in `description_changed`.
        unsafe { *p = 0 };
    }
}

/// Emits the description of the node at `addr`; `fill` writes everything but the header
/// and the address, and says whether to send it (as in [`emit_large`]).
#[inline(always)]
pub fn emit_description<C: EbpfContext, F: FnOnce(&mut NodeDescEvent) -> bool>(
    ctx: &C,
    addr: u64,
    fill: F,
) {
    emit_large(ctx, |d: &mut NodeDescEvent| {
        d.header = header(EventKind::NodeDesc, 0);
        d.node_addr = addr;
        fill(d)
    });
}
