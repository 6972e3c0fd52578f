//! Operator level of the engine: one span per node and thread (`op_span`).
//!
//! Targets (uprobes on 5-byte nops, which kernels with optimized uprobes turn into a call:
//! no trap, no uretprobe):
//! - `void engine_op_done(const EngineNode *node, u32 ith, u32 nth, u32 backend_kind)`:
//!   thread `ith` is done with its share and goes on to wait at the barrier: the span's
//!   end, and by default its only probe. The span then starts where the barrier before
//!   the node released (`OP_SPAN_START_AT_RELEASE`): one hit per node and thread.
//! - `void engine_op_times(const EngineOpTimes *, u32 ith, u32 nth, u32 backend_kind)`:
//!   the same ends, taken by the engine itself while this probe is attached with the
//!   reference counter `engine_op_times_semaphore` and handed over in tables of up to 32:
//!   one hit per table instead of one per node (the default where the engine has it).
//! - `void engine_graph_thread(const EngineGraph *, u32 ith, u32 nth)`: the thread begins
//!   a graph (its first node's start), one hit per graph and thread.
//! - `void engine_op_compute(const EngineNode *node, u32 ith, u32 nth, void *params)` and
//!   the accel backend's `engine_accel_op_compute` (same signature), attached with
//!   `DETAIL_EXACT_SPANS` (exact starts, counters): the span opens there and closes at
//!   `engine_op_done` (program `engine_op_done_exact`). An engine without `engine_op_done` (older builds) is closed by a
//!   uretprobe on `engine_op_compute` instead (`engine_op_compute_ret`).
//!
//! One thread per node (`is_describer`) reads the whole `EngineNode` (224 bytes, one
//! `bpf_probe_read_user`) and sends its description when it changed.

use core::{
    ffi::c_void,
    mem::{offset_of, size_of},
};

use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_probe_read_user, bpf_probe_read_user_buf, generated::bpf_loop},
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};
use common::{
    control::{DETAIL_STRUCTURE, LEVEL_OP, TracerControl},
    engine_abi::{
        BackendKind, ENGINE_ABI_VERSION, EngineNode, EngineOpTime, EngineOpTimes, OP_TIMES_CHUNK,
        OpType,
    },
    event::{
        EventKind, GraphThreadEvent, OP_DETAIL_ABI_MISMATCH, OP_DETAIL_NAME, OP_DETAIL_OP_PARAMS,
        OP_DETAIL_STRUCTURE, OP_SPAN_START_AT_RELEASE, OpSpanEvent,
    },
};

use super::expert::TensorFields;
use super::op_span::{
    PmcEnd, blob_still_mine, close, close_unseen, description_changed, emit_description,
    fingerprint, forget_description, is_describer, node_blob, now_ns, open, state_of, thread_state,
};
use crate::{
    emit::{ProbeResult, abi_ok, current_tid, emit, enabled_for_target, header},
    maps::NODE_BLOB_WORDS,
};

/// Words of an `EngineNode`.
const NODE_WORDS: usize = size_of::<EngineNode>() / 8;
/// The word of `EngineNode::data`.
const DATA_WORD: usize = offset_of!(EngineNode, data) / 8;
/// The word of a `SOFT_MAX`'s `op_params[0..2]` (scale, the batch's first position).
const SOFTMAX_POS_WORD: usize = offset_of!(EngineNode, op_params) / 8;
const _: () = assert!(offset_of!(EngineNode, op_params) % 8 == 0);
const _: () = assert!(NODE_WORDS <= NODE_BLOB_WORDS && size_of::<EngineNode>() % 8 == 0);

/// `engine_op_compute` entry.
#[uprobe]
pub fn engine_op_compute(ctx: ProbeContext) -> u32 {
    let _ = try_op_start(&ctx, BackendKind::Cpu);
    0
}

/// `engine_accel_op_compute` entry (the accel backend's operator entry point).
#[uprobe]
pub fn engine_accel_op_compute(ctx: ProbeContext) -> u32 {
    let _ = try_op_start(&ctx, BackendKind::Accel);
    0
}

#[inline(always)]
fn try_op_start(ctx: &ProbeContext, backend: BackendKind) -> ProbeResult {
    let Some(control) = enabled_for_target(LEVEL_OP) else {
        return Ok(());
    };
    let node: u64 = ctx.arg(0).ok_or(-1i64)?;
    let ith: u32 = ctx.arg(1).ok_or(-1i64)?;
    let nth: u32 = ctx.arg(2).ok_or(-1i64)?;
    let tid = current_tid();
    let st = thread_state(tid).ok_or(-1i64)?;
    // The last span's end was not seen (its probe was detached meanwhile).
    close_unseen(ctx, st, tid, now_ns(), &control);
    describe_if_mine(ctx, node, ith, nth, backend, &control)?;
    st.nth = nth;
    open(
        st,
        node,
        OpSpanEvent::flags_for(ith, backend as u32),
        &control,
    );
    Ok(())
}

/// `engine_graph_thread(graph, ith, nth)` entry: the thread begins a graph.
#[uprobe]
pub fn engine_graph_thread(ctx: ProbeContext) -> u32 {
    let now = now_ns();
    let _ = try_graph_thread(&ctx, now);
    0
}

#[inline(always)]
fn try_graph_thread(ctx: &ProbeContext, now: u64) -> ProbeResult {
    if enabled_for_target(LEVEL_OP).is_none() {
        return Ok(());
    }
    let mut header = header(EventKind::GraphThread, 0);
    header.ts_ns = now;
    let ev = GraphThreadEvent {
        header,
        graph_addr: ctx.arg(0).ok_or(-1i64)?,
        ith: ctx.arg(1).ok_or(-1i64)?,
        nth: ctx.arg(2).ok_or(-1i64)?,
    };
    emit(ctx, &ev);
    Ok(())
}

/// On the one thread that describes `node` ([`is_describer`]), sends its description if it
/// changed.
#[inline(always)]
fn describe_if_mine(
    ctx: &ProbeContext,
    node: u64,
    ith: u32,
    nth: u32,
    backend: BackendKind,
    control: &TracerControl,
) -> ProbeResult {
    if is_describer(node, ith, nth) {
        describe(
            ctx,
            node,
            nth,
            backend,
            control.op_detail & DETAIL_STRUCTURE != 0,
        )?;
    }
    Ok(())
}

/// Sends the description of the `EngineNode` at `node` if it changed (its shape, sources
/// and op params with `structure`); for an expert-indexed product also which experts it
/// uses.
#[inline(always)]
fn describe(
    ctx: &ProbeContext,
    node: u64,
    nth: u32,
    backend: BackendKind,
    structure: bool,
) -> ProbeResult {
    describe_with(ctx, node, nth, backend, structure, true)
}

/// [`describe`], with the experts of an expert-indexed product when `routes`.
#[inline(always)]
fn describe_with(
    ctx: &ProbeContext,
    node: u64,
    nth: u32,
    backend: BackendKind,
    structure: bool,
    routes: bool,
) -> ProbeResult {
    let blob = node_blob().ok_or(-1i64)?;
    // SAFETY: the first `NODE_WORDS` words of the blob, plain integers, as bytes.
    let bytes = unsafe {
        core::slice::from_raw_parts_mut(blob.words.as_mut_ptr().cast::<u8>(), NODE_WORDS * 8)
    };
    // SAFETY: the helper checks the user address and writes at most the slice.
    unsafe { bpf_probe_read_user_buf(node as *const u8, bytes) }.map_err(i64::from)?;
    // SAFETY: the blob holds an `EngineNode`'s bytes (every bit pattern is valid: plain
    // integers and arrays of them), 8-byte aligned.
    let n = unsafe { &*blob.words.as_ptr().cast::<EngineNode>() };
    let (op, layer, index) = (n.op, n.layer, n.index);
    // Per-step values are not part of a description: the data address (a KV-cache
    // store's destination moves every step) and a softmax's causal position.
    let mut skip = 1u64 << DATA_WORD;
    if op == OpType::SoftMax as u32 {
        skip |= 1 << SOFTMAX_POS_WORD;
    }
    let print = fingerprint(
        &blob.words,
        NODE_WORDS as u64,
        skip,
        u64::from(nth) | (backend as u64) << 32 | u64::from(structure) << 40,
    );
    if !blob_still_mine(blob) {
        return Ok(());
    }
    let layout_ok = n.abi_version == ENGINE_ABI_VERSION;
    if !layout_ok {
        abi_ok(n.abi_version);
    }
    // A foreign layout has no index to go by: its address stands in.
    let slot = if layout_ok { index } else { node as u32 };
    if description_changed(slot, print ^ node) {
        emit_description(ctx, node, |d| {
            d.nth = nth;
            d.backend_kind = backend as u32;
            if !layout_ok {
                d.op = u32::MAX;
                d.index = u32::MAX;
                d.layer = -1;
                d.detail = OP_DETAIL_ABI_MISMATCH;
                return true;
            }
            d.op = n.op;
            d.index = n.index;
            d.layer = n.layer;
            d.name = n.name;
            d.detail = OP_DETAIL_NAME;
            if structure {
                d.structure.dtype = n.dtype;
                d.structure.node_flags = n.flags;
                d.structure.ne = n.ne;
                d.structure.nb = n.nb;
                d.structure.src = n.src;
                d.structure.op_params = n.op_params;
                d.detail |= OP_DETAIL_STRUCTURE | OP_DETAIL_OP_PARAMS;
            }
            // The copy came from this CPU's blob: another program that ran here meanwhile
            // (this one was preempted) may have overwritten it. Then send nothing and
            // forget the fingerprint, so the next visit describes the node again.
            if blob_still_mine(blob) {
                return true;
            }
            forget_description(slot);
            false
        });
    }
    // The experts a MUL_MAT_ID uses are part of its structure: its third source's data.
    if routes && layout_ok && structure && op == OpType::MulMatId as u32 {
        super::expert::emit_expert_route(ctx, node, TensorFields::ENGINE, layer, index)?;
    }
    Ok(())
}

/// The backend of a `backend_kind` argument (anything but the accel is the CPU pool).
#[inline(always)]
fn backend_of(kind: u32) -> BackendKind {
    if kind == BackendKind::Accel as u32 {
        BackendKind::Accel
    } else {
        BackendKind::Cpu
    }
}

/// The arguments of the node-end probe points, `engine_op_done(node, ...)` and
/// `engine_op_times(table, ...)`: the pointer, `ith`, `nth` and the backend.
#[inline(always)]
fn end_args(ctx: &ProbeContext) -> Result<(u64, u32, u32, BackendKind), i64> {
    let ptr: u64 = ctx.arg(0).ok_or(-1i64)?;
    let ith: u32 = ctx.arg(1).ok_or(-1i64)?;
    let nth: u32 = ctx.arg(2).ok_or(-1i64)?;
    let kind: u32 = ctx.arg(3).ok_or(-1i64)?;
    Ok((ptr, ith, nth, backend_of(kind)))
}

/// `engine_op_done(node, ith, nth, backend_kind)` entry: the thread's share of the node
/// is done; its span started where the barrier before it released.
#[uprobe]
pub fn engine_op_done(ctx: ProbeContext) -> u32 {
    let end = now_ns();
    let _ = try_op_done(&ctx, end);
    0
}

#[inline(always)]
fn try_op_done(ctx: &ProbeContext, end: u64) -> ProbeResult {
    let Some(control) = enabled_for_target(LEVEL_OP) else {
        return Ok(());
    };
    let tid = current_tid();
    let (node, ith, nth, backend) = end_args(ctx)?;
    describe_if_mine(ctx, node, ith, nth, backend, &control)?;
    let flags = OpSpanEvent::flags_for(ith, backend as u32) | OP_SPAN_START_AT_RELEASE;
    emit(ctx, &OpSpanEvent::new(tid, node, end, 0, flags));
    Ok(())
}

/// `engine_op_done` entry with `DETAIL_EXACT_SPANS` (exact starts, counters): closes the
/// span its thread opened at the node's start, reading the counters. A program of its
/// own (the collector attaches one of the two): as one program with both paths, Linux
/// 6.1's verifier walked more than its million instructions (the arm64 board test).
#[uprobe]
pub fn engine_op_done_exact(ctx: ProbeContext) -> u32 {
    close_own_span(&ctx, now_ns());
    0
}

/// Closes the span the calling thread opened at its node's start, ending at `end`, with
/// its counters read now.
#[inline(always)]
fn close_own_span<C: EbpfContext>(ctx: &C, end: u64) {
    if let Some(control) = enabled_for_target(LEVEL_OP) {
        let tid = current_tid();
        if let Some(st) = state_of(tid) {
            close(ctx, st, tid, end, 0, PmcEnd::ReadNow, &control);
        }
    }
}

/// `engine_op_times(times, ith, nth, backend_kind)` entry: a table of a thread's node
/// ends (`EngineOpTimes`), sent as the spans `engine_op_done` would have sent one by one.
/// The descriptions of the nodes this thread describes are checked in a `bpf_loop`
/// callback (verified once: inlined in the table's loop, the checks exceeded the
/// verifier's budget); the routing of an expert-indexed product, which can only be the
/// table's last entry (the engine hands a table over after one), after it.
#[uprobe]
pub fn engine_op_times(ctx: ProbeContext) -> u32 {
    let _ = try_op_times(&ctx);
    0
}

/// What the description loop's callback needs (on the program's stack).
#[repr(C)]
struct DescribeLoop {
    /// The probe's context (for the perf-buffer output).
    ctx: *const ProbeContext,
    /// The entries' address in the target.
    entries: u64,
    /// The description's seed: `nth`, the backend kind in bits 32.., `structure` in bit 40.
    seed: u64,
    /// Entries in the table.
    n: u32,
    /// This thread's `ith`.
    ith: u32,
}

/// Bit of [`DescribeLoop::seed`] that says `structure`.
const SEED_STRUCTURE: u64 = 1 << 40;

/// The address of entry `i` of a table whose entries start at `entries`.
#[inline(always)]
fn entry_at(entries: u64, i: u32) -> u64 {
    entries + u64::from(i) * size_of::<EngineOpTime>() as u64
}

#[inline(always)]
fn try_op_times(ctx: &ProbeContext) -> ProbeResult {
    let Some(control) = enabled_for_target(LEVEL_OP) else {
        return Ok(());
    };
    let (table, ith, nth, backend) = end_args(ctx)?;
    // SAFETY: the helper checks the user address.
    let [abi, n]: [u32; 2] = unsafe { bpf_probe_read_user(table as *const [u32; 2]) }?;
    if !abi_ok(abi) || n == 0 {
        return Ok(());
    }
    let n = n.min(OP_TIMES_CHUNK as u32);
    let entries = table + offset_of!(EngineOpTimes, entries) as u64;
    let structure = control.op_detail & DETAIL_STRUCTURE != 0;
    let mut lp = DescribeLoop {
        ctx: core::ptr::from_ref(ctx),
        entries,
        seed: u64::from(nth) | (backend as u64) << 32 | if structure { SEED_STRUCTURE } else { 0 },
        n,
        ith,
    };
    // SAFETY: the callback has the helper's signature and reads `lp` only, which outlives
    // the call.
    unsafe {
        bpf_loop(
            n,
            describe_entry as *mut c_void,
            core::ptr::from_mut(&mut lp).cast::<c_void>(),
            0,
        )
    };
    let tid = current_tid();
    let flags = OpSpanEvent::flags_for(ith, backend as u32) | OP_SPAN_START_AT_RELEASE;
    let mut last = 0u64;
    for i in 0..OP_TIMES_CHUNK as u32 {
        if i >= n {
            break;
        }
        // SAFETY: the helper checks the user address.
        let Ok(e) = (unsafe { bpf_probe_read_user(entry_at(entries, i) as *const EngineOpTime) })
        else {
            break;
        };
        emit(ctx, &OpSpanEvent::new(tid, e.node, e.end_ns, 0, flags));
        last = e.node;
    }
    if structure && last != 0 && is_describer(last, ith, nth) {
        route_if_expert_product(ctx, last)?;
    }
    Ok(())
}

/// Emits the routing of the node at `node` if it is an expert-indexed product of this
/// build's layout.
#[inline(always)]
fn route_if_expert_product(ctx: &ProbeContext, node: u64) -> ProbeResult {
    // SAFETY: the helper checks the user address.
    let [abi, op]: [u32; 2] = unsafe { bpf_probe_read_user(node as *const [u32; 2]) }?;
    if abi != ENGINE_ABI_VERSION || op != OpType::MulMatId as u32 {
        return Ok(());
    }
    // SAFETY: as above.
    let [layer, index]: [u32; 2] = unsafe {
        bpf_probe_read_user((node + offset_of!(EngineNode, layer) as u64) as *const [u32; 2])
    }?;
    super::expert::emit_expert_route(ctx, node, TensorFields::ENGINE, layer as i32, index)
}

/// `bpf_loop` callback: entry `i` of the table, described if this thread is the node's
/// describer and its description changed.
extern "C" fn describe_entry(i: u32, lp: *mut c_void) -> i64 {
    // SAFETY: `bpf_loop` passes the `DescribeLoop` on the caller's stack.
    let lp = unsafe { &*lp.cast::<DescribeLoop>() };
    if i >= lp.n {
        return 1;
    }
    // SAFETY: the helper checks the user address.
    let Ok(node) = (unsafe { bpf_probe_read_user(entry_at(lp.entries, i) as *const u64) }) else {
        return 1;
    };
    let nth = lp.seed as u32;
    if is_describer(node, lp.ith, nth) {
        let backend = backend_of((lp.seed >> 32) as u32 & 0xff);
        // SAFETY: the context is the calling program's, alive during the loop.
        let ctx = unsafe { &*lp.ctx };
        let structure = lp.seed & SEED_STRUCTURE != 0;
        let _ = describe_with(ctx, node, nth, backend, structure, false);
    }
    0
}

/// `engine_op_compute` return, for engines without `engine_op_done`.
#[uretprobe]
pub fn engine_op_compute_ret(ctx: RetProbeContext) -> u32 {
    close_own_span(&ctx, now_ns());
    0
}
