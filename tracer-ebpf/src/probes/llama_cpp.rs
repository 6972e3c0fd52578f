//! Probes on unmodified llama.cpp (ggml's CPU backend). They emit the engine's records
//! (`DecodeEvent`, `GraphEvent`, `OpSpanEvent`/`NodeDescEvent`), so the trace and every
//! view are shared; what differs is where the fields come from: `struct ggml_tensor` and
//! friends, read at the offsets of the detected build (`GGML_LAYOUT`), op numbers
//! translated by name into profinfer's (`GGML_OPS`).
//!
//! Targets (exported by `libllama`/`libggml-cpu` in every build seen, `docs/llama-cpp.md`):
//! - `int32_t llama_decode(ctx, struct llama_batch batch)` and
//!   `int32_t llama_process(ctx, type, struct llama_batch_ext *)`: token level;
//! - `enum ggml_status ggml_graph_compute(struct ggml_cgraph *, struct ggml_cplan *)`:
//!   graph level, on the thread that runs the graph (it is also worker 0);
//! - operator level, per thread, two uprobes and no uretprobe: every node's dispatch
//!   starts with `bool ggml_cpu_extra_compute_forward(params, tensor)` (fused pairs with
//!   `ggml_compute_forward_rms_norm_mul_fused(params, rms_norm, mul)` instead), and every
//!   thread meets the others at `void ggml_barrier(threadpool)` after each node (and
//!   inside some ops, `MUL_MAT` among them). A node's span on a thread runs from its
//!   dispatch to the last barrier the thread reached before its next node, so it is
//!   closed at that next node's dispatch, or, for a graph's last nodes, when the graph
//!   returns on thread 0 (`GGML_WORKERS`).
//! - expert routing: a `MUL_MAT_ID` node's dispatch on the thread that describes it
//!   tail-calls `ggml_expert_route` (`GGML_ROUTE`), which reads the ids the node uses
//!   (`expert.rs`); the check costs the other nodes a word of the node already read.

use core::ffi::c_void;

use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_probe_read_user, bpf_probe_read_user_buf, generated::bpf_loop},
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};
use common::{
    OpType,
    control::{DETAIL_STRUCTURE, LEVEL_GRAPH, LEVEL_OP, LEVEL_TOKEN, TracerControl},
    engine_abi::{BackendKind, MAX_OP_PARAMS},
    event::{
        DECODE_SEQ_OTHER_IDS, DECODE_SEQ_SCAN_MAX, DECODE_SEQ_TRUNCATED, DECODE_SEQ_UNREAD,
        EventKind, GraphEvent, OP_DETAIL_FUSED, OP_DETAIL_NAME, OP_DETAIL_OP_PARAMS,
        OP_DETAIL_STORE_MASK, OP_DETAIL_STORE_SHIFT, OP_DETAIL_STRUCTURE, OP_SPAN_END_APPROX,
        OpSpanEvent,
    },
    ggml_abi::{
        BATCH_BY_REFERENCE, BATCH_EXT_SEQ_NODE_VALUE, GgmlLayout, MAX_GGML_OPS, MAX_GGML_WORKERS,
    },
    op_catalog::OP_UNKNOWN_BASE,
    op_thread::OpThread,
};

use super::expert::{TensorFields, emit_expert_route};
use super::op_span::{
    PmcEnd, blob_still_mine, close, description_changed, emit_description, fingerprint,
    is_describer, node_blob, now_ns, open, read_wait_pmcs, state_of, thread_state,
};
use super::token::Seqs;
use crate::{
    emit::{ProbeResult, current_tid, emit, enabled_for_target, header},
    maps::{
        DECODE_STASH, GGML_GRAPH_SEQ, GGML_LAYOUT, GGML_OPS, GGML_ROUTE, GGML_SEQS, GGML_WORKERS,
        GRAPH_STASH, NODE_BLOB_WORDS,
    },
};

/// The detected build's layout (written by the collector before anything runs).
#[inline(always)]
pub(super) fn layout() -> Option<&'static GgmlLayout> {
    GGML_LAYOUT.get(0)
}

/// Reads a `T` at `base + off` in the target's memory.
#[inline(always)]
pub(super) fn read_at<T>(base: u64, off: u32) -> Result<T, i64> {
    // SAFETY: the helper checks the user address; a failed read returns Err.
    unsafe { bpf_probe_read_user((base + u64::from(off)) as *const T) }.map_err(i64::from)
}

/// Reads `size_of::<T>()` bytes at `base + off` in the target's memory into `dst`.
#[inline(always)]
fn read_into<T>(dst: &mut T, base: u64, off: u32) -> bool {
    // SAFETY: `dst` is a plain-integer field of a wire record: any bytes are valid.
    let bytes = unsafe {
        core::slice::from_raw_parts_mut(core::ptr::from_mut(dst).cast::<u8>(), size_of::<T>())
    };
    // SAFETY: the helper checks the user address and writes at most the slice.
    unsafe { bpf_probe_read_user_buf((base + u64::from(off)) as *const u8, bytes) }.is_ok()
}

/// The next node index of this thread in the current graph; at a graph's first node the
/// thread also enters itself as worker `ith` of the graph.
#[inline(always)]
fn next_index(st: &mut OpThread, ith: u32) -> u32 {
    let seq = GGML_GRAPH_SEQ.get(0).copied().unwrap_or(0);
    if st.graph_seq != seq {
        st.graph_seq = seq;
        st.index = 0;
        if ith < MAX_GGML_WORKERS
            && let Some(slot) = GGML_WORKERS.get_ptr_mut(ith)
        {
            // SAFETY: one array slot; the thread computing as `ith` in this graph writes it.
            unsafe { *slot = current_tid() };
        }
    }
    let i = st.index;
    st.index += 1;
    i
}

/// Closes the calling thread `tid`'s open span at the last barrier it reached (with the
/// counter readings taken there), or, if it reached none since the span opened, at `now`
/// (flagged approximate, counters read now).
#[inline(always)]
fn close_at_wait<C: EbpfContext>(
    ctx: &C,
    st: &mut OpThread,
    tid: u32,
    now: u64,
    control: &TracerControl,
) {
    if st.wait_ns != 0 && st.wait_ns >= st.start_ns {
        close(ctx, st, tid, st.wait_ns, 0, PmcEnd::AtWait, control);
    } else {
        close(
            ctx,
            st,
            tid,
            now,
            OP_SPAN_END_APPROX,
            PmcEnd::ReadNow,
            control,
        );
    }
}

/// Sends the description of `tensor` (node `index` of the graph, computed by `nth`
/// threads) if it changed since it was last sent; `flags`: `OP_DETAIL_STRUCTURE` to read
/// its shape, sources and op params, `OP_DETAIL_FUSED` for the second node of a fused
/// pair. Returns the node's ggml op number (read with the node, described or not), or a
/// negative error.
/// `backend_kind`: the `BackendKind` the node runs on (the CPU's, or a GPU's for a node
/// the CPU records for it, `gpu_node.rs`).
/// Not inlined: a fused pair describes two nodes, and two inlined copies overflow the
/// 512-byte stack (BPF functions take five arguments: `index` and `nth` share one).
#[inline(never)]
pub(super) fn describe<C: EbpfContext>(
    ctx: &C,
    tensor: u64,
    index_nth: u64,
    flags: u32,
    backend_kind: u32,
) -> i64 {
    match try_describe(ctx, tensor, index_nth, flags, backend_kind) {
        Ok(op) => i64::from(op),
        Err(e) => e,
    }
}

/// The `u32` at byte `off` (4-aligned) of a node read into `words`, or `u32::MAX`.
#[inline(always)]
fn u32_in(words: &[u64; NODE_BLOB_WORDS], off: u32) -> u32 {
    // Bounded on the byte offset, not only the word index: the verifier does not narrow
    // the range of `off & !7` (the index times 8) to whole words.
    let off = off as usize;
    if off > (NODE_BLOB_WORDS - 1) * 8 {
        return u32::MAX;
    }
    match words.get(off / 8) {
        Some(w) => (w >> ((off & 4) * 8)) as u32,
        None => u32::MAX,
    }
}

#[inline(always)]
fn try_describe<C: EbpfContext>(
    ctx: &C,
    tensor: u64,
    index_nth: u64,
    flags: u32,
    backend_kind: u32,
) -> Result<u32, i64> {
    let (index, nth) = (index_nth as u32, (index_nth >> 32) as u32);
    let l = layout().ok_or(-1i64)?;
    let len = l.tensor_read_len as usize;
    if len == 0 || len > NODE_BLOB_WORDS * 8 {
        return Err(-1);
    }
    let blob = node_blob().ok_or(-1i64)?;
    // SAFETY: the first `len` ≤ `NODE_BLOB_WORDS * 8` bytes of the blob, plain integers.
    let bytes =
        unsafe { core::slice::from_raw_parts_mut(blob.words.as_mut_ptr().cast::<u8>(), len) };
    // SAFETY: the helper checks the user address and writes at most the slice.
    unsafe { bpf_probe_read_user_buf(tensor as *const u8, bytes) }.map_err(i64::from)?;
    let print = fingerprint(
        &blob.words,
        (len / 8) as u64,
        u64::from(l.tensor_skip_lo) | u64::from(l.tensor_skip_hi) << 32,
        index_nth ^ u64::from(flags) << 48,
    );
    if !blob_still_mine(blob) {
        return Ok(u32::MAX);
    }
    let ggml_op = u32_in(&blob.words, l.tensor_op);
    // A GPU split's positions are remembered apart from the CPU graph's, so alternating
    // splits do not describe each other's nodes anew every time.
    let seen = if backend_kind == BackendKind::Cpu as u32 {
        index
    } else {
        index | 1 << 15
    };
    if !description_changed(seen, print ^ tensor) {
        return Ok(ggml_op);
    }
    let op = if ggml_op < MAX_GGML_OPS {
        GGML_OPS
            .get(ggml_op)
            .copied()
            .unwrap_or(OP_UNKNOWN_BASE | ggml_op)
    } else {
        u32::MAX
    };
    emit_description(ctx, tensor, |d| {
        d.op = op;
        d.index = index;
        d.nth = nth;
        d.backend_kind = backend_kind;
        // ggml keeps the layer in the name (`ffn_up-3`); the analyzer reads it there.
        d.layer = -1;
        let mut detail = flags & OP_DETAIL_FUSED;
        // SAFETY: the helper checks the user address and writes at most the slice.
        let name = unsafe {
            bpf_probe_read_user_buf(
                (tensor + u64::from(l.tensor_name)) as *const u8,
                &mut d.name,
            )
        };
        if name.is_ok() {
            detail |= OP_DETAIL_NAME;
        }
        if flags & OP_DETAIL_STRUCTURE == 0 {
            d.detail = detail;
            return true;
        }
        let st = &mut d.structure;
        let read = read_into(&mut st.dtype, tensor, l.tensor_type)
            && read_into(&mut st.ne, tensor, l.tensor_ne)
            && read_into(&mut st.nb, tensor, l.tensor_nb)
            && read_into(&mut st.src, tensor, l.tensor_src)
            && read_into(&mut st.op_params, tensor, l.tensor_op_params);
        if read {
            // A source that is a view (`Qcur-0 (permuted)`, a KV-cache slice) is never
            // computed: record the tensor it views, so the DAG's edges reach the node
            // that wrote the data. MUL_MAT's K is the row length of its first source as
            // the product reads it (the view's).
            let k = if op == OpType::MulMat as u32 {
                read_at::<i64>(st.src[0], l.tensor_ne).unwrap_or(0)
            } else {
                0
            };
            // A computed node that is itself a view (a KV-cache store, an in-place op)
            // writes into the tensor it views: name the source slot that is that
            // tensor, so the reader's edge can start at the store.
            let own_base = read_at::<u64>(tensor, l.tensor_view_src).unwrap_or(0);
            for (slot, s) in st.src.iter_mut().enumerate() {
                if *s != 0
                    && let Ok(base) = read_at::<u64>(*s, l.tensor_view_src)
                    && base != 0
                {
                    *s = base;
                }
                if own_base != 0 && *s == own_base && detail & OP_DETAIL_STORE_MASK == 0 {
                    detail |= ((slot as u32) + 1) << OP_DETAIL_STORE_SHIFT;
                }
            }
            detail |= OP_DETAIL_STRUCTURE | OP_DETAIL_OP_PARAMS;
            if op == OpType::MulMat as u32 {
                // ggml's MUL_MAT has no op params; give it the engine's (`M`, `H`, `K` in
                // 2..5, `docs/probe-abi.md`) so sizes and complexity work alike.
                st.op_params = [0; MAX_OP_PARAMS];
                st.op_params[2] = st.ne[1] as u32;
                st.op_params[3] = (st.ne[2] * st.ne[3]) as u32;
                st.op_params[4] = k as u32;
            }
        }
        d.detail = detail;
        true
    });
    Ok(ggml_op)
}

/// Whether the ggml op number `op` (or a negative error) is this build's expert-indexed
/// product (`GGML_OPS` translates it: no op number of its own to keep).
#[inline(always)]
fn is_expert_product(op: i64) -> bool {
    (0..i64::from(MAX_GGML_OPS)).contains(&op)
        && GGML_OPS.get(op as u32).copied() == Some(OpType::MulMatId as u32)
}

/// A node's dispatch on this thread: closes the thread's previous span, sends the
/// node's (and a fused second node's) description from the thread that describes it,
/// opens the span; on that thread, an expert-indexed product's routing is then read
/// (with the structure detail) by a tail call, which does not return.
#[inline(always)]
fn start_node<C: EbpfContext>(ctx: &C, params: u64, tensor: u64, fused: u64) -> ProbeResult {
    let now = now_ns();
    let Some(control) = enabled_for_target(LEVEL_OP) else {
        return Ok(());
    };
    let l = layout().ok_or(-1i64)?;
    let tid = current_tid();
    let st = thread_state(tid).ok_or(-1i64)?;
    close_at_wait(ctx, st, tid, now, &control);
    let [ith, nth]: [u32; 2] = read_at(params, l.params_ith).unwrap_or([u32::MAX, u32::MAX]);
    let index = next_index(st, ith);
    let second_index = if fused != 0 { next_index(st, ith) } else { 0 };
    let want = wanted_detail(&control);
    let op = if is_describer(tensor, ith, nth) {
        describe(
            ctx,
            tensor,
            u64::from(index) | u64::from(nth) << 32,
            want,
            BackendKind::Cpu as u32,
        )
    } else {
        -1
    };
    if fused != 0 && is_describer(fused, ith, nth) {
        describe(
            ctx,
            fused,
            u64::from(second_index) | u64::from(nth) << 32,
            want | OP_DETAIL_FUSED,
            BackendKind::Cpu as u32,
        );
    }
    st.nth = nth;
    open(
        st,
        tensor,
        OpSpanEvent::flags_for(ith, BackendKind::Cpu as u32),
        &control,
    );
    st.fused = fused;
    if fused == 0 && want != 0 && is_expert_product(op) {
        // SAFETY: `ggml_expert_route` is a uprobe program like this one and reads its
        // arguments (`params`, `tensor`) from the same registers; on failure (slot empty:
        // the collector did not load it) the call returns and nothing happens.
        unsafe { GGML_ROUTE.tail_call(ctx, ROUTE_SLOT) };
    }
    Ok(())
}

/// The description detail the control map asks for: `OP_DETAIL_STRUCTURE` when the
/// structure is recorded, else the name only.
#[inline(always)]
pub(super) fn wanted_detail(control: &TracerControl) -> u32 {
    if control.op_detail & DETAIL_STRUCTURE != 0 {
        OP_DETAIL_STRUCTURE
    } else {
        0
    }
}

/// `GGML_ROUTE`'s slot of [`ggml_expert_route`].
const ROUTE_SLOT: u32 = 0;

/// Tail-called from a `MUL_MAT_ID` node's dispatch (`ggml_cpu_extra_compute_forward(params,
/// tensor)`, after its span opened): emits the ids the node routes its tokens to. Its own
/// program, so the dispatch program's stack and instruction budget stay its own.
#[uprobe]
pub fn ggml_expert_route(ctx: ProbeContext) -> u32 {
    let _ = try_expert_route(&ctx);
    0
}

#[inline(always)]
fn try_expert_route(ctx: &ProbeContext) -> ProbeResult {
    let tensor: u64 = ctx.arg(1).ok_or(-1i64)?;
    let l = layout().ok_or(-1i64)?;
    // The dispatch just numbered the node.
    let index = state_of(current_tid()).map_or(u32::MAX, |st| st.index.wrapping_sub(1));
    // ggml keeps the layer in the node's name; the analyzer reads it there.
    emit_expert_route(ctx, tensor, TensorFields::ggml(l), -1, index)
}

/// `ggml_cpu_extra_compute_forward(params, tensor)` entry: a node's dispatch starts here.
#[uprobe]
pub fn ggml_extra_forward(ctx: ProbeContext) -> u32 {
    let _ = try_extra_enter(&ctx);
    0
}

#[inline(always)]
fn try_extra_enter(ctx: &ProbeContext) -> ProbeResult {
    let params: u64 = ctx.arg(0).ok_or(-1i64)?;
    let tensor: u64 = ctx.arg(1).ok_or(-1i64)?;
    start_node(ctx, params, tensor, 0)
}

/// `ggml_compute_forward_rms_norm_mul_fused(params, rms_norm, mul)` entry: two nodes in
/// one call, straight from the node loop (no dispatcher, no extra hook). The second is
/// recorded as a zero-length span at the pair's end (so node counts match the graph).
#[uprobe]
pub fn ggml_fused_forward(ctx: ProbeContext) -> u32 {
    let _ = try_fused_enter(&ctx);
    0
}

#[inline(always)]
fn try_fused_enter(ctx: &ProbeContext) -> ProbeResult {
    let params: u64 = ctx.arg(0).ok_or(-1i64)?;
    let first: u64 = ctx.arg(1).ok_or(-1i64)?;
    let second: u64 = ctx.arg(2).ok_or(-1i64)?;
    start_node(ctx, params, first, second)
}

/// `ggml_barrier(threadpool)`: the thread begins to wait for the others (after a node,
/// or inside one). Attached past the function's first instructions where those would be
/// single-stepped (`tracer-user/src/probe_points.rs`); it needs no argument.
#[uprobe]
pub fn ggml_barrier(ctx: ProbeContext) -> u32 {
    let now = now_ns();
    let _ = try_barrier(&ctx, now);
    0
}

#[inline(always)]
fn try_barrier(_ctx: &ProbeContext, now: u64) -> ProbeResult {
    let Some(control) = enabled_for_target(LEVEL_OP) else {
        return Ok(());
    };
    let st = state_of(current_tid()).ok_or(-1i64)?;
    if st.node != 0 {
        st.wait_ns = now;
        read_wait_pmcs(st, &control);
    }
    Ok(())
}

/// At a graph's end on thread 0: closes the last span of every thread of the graph (each
/// at the barrier it then reached), which no later dispatch would close in time. Without
/// counter deltas (thread 0 cannot read another thread's counters; with the readings of
/// the wait, the loop exceeds the verifier's budget).
#[inline(always)]
fn flush_workers<C: EbpfContext>(ctx: &C) {
    let Some(control) = enabled_for_target(LEVEL_OP) else {
        return;
    };
    let now = now_ns();
    let nth = state_of(current_tid()).map_or(0, |st| st.nth);
    for ith in 0..MAX_GGML_WORKERS {
        if ith >= nth {
            break;
        }
        let Some(tid) = GGML_WORKERS.get(ith).copied() else {
            continue;
        };
        if tid != 0
            && let Some(st) = state_of(tid)
        {
            let (end, flags) = if st.wait_ns != 0 && st.wait_ns >= st.start_ns {
                (st.wait_ns, 0)
            } else {
                (now, OP_SPAN_END_APPROX)
            };
            close(ctx, st, tid, end, flags, PmcEnd::Missing, &control);
        }
    }
}

/// `ggml_graph_compute` entry: a graph starts (a new node-index generation).
#[uprobe]
pub fn ggml_graph_compute(ctx: ProbeContext) -> u32 {
    let _ = try_graph_enter(&ctx);
    0
}

fn try_graph_enter(ctx: &ProbeContext) -> ProbeResult {
    let seq = next_graph_seq();
    if enabled_for_target(LEVEL_GRAPH).is_none() {
        return Ok(());
    }
    let cgraph: u64 = ctx.arg(0).ok_or(-1i64)?;
    open_graph(ctx, cgraph, seq, BackendKind::Cpu as u32)
}

/// Numbers the graph starting now (the node index restarts with each).
#[inline(always)]
pub(super) fn next_graph_seq() -> u64 {
    match GGML_GRAPH_SEQ.get_ptr_mut(0) {
        Some(p) => {
            // SAFETY: one array slot; only graph entries write it, one graph at a time.
            unsafe {
                *p += 1;
                *p
            }
        }
        None => 0,
    }
}

/// Records the start of graph number `seq` at `cgraph` on a backend of `backend_kind`
/// (its node count read from the graph, its batch from the thread's decode call) and
/// stashes it for the return.
#[inline(always)]
pub(super) fn open_graph<C: EbpfContext>(
    ctx: &C,
    cgraph: u64,
    seq: u64,
    backend_kind: u32,
) -> ProbeResult {
    let l = layout().ok_or(-1i64)?;
    let n_nodes: i32 = read_at(cgraph, l.cgraph_n_nodes).unwrap_or(0);
    let tid = current_tid();
    // SAFETY: the value is copied out.
    let decode = unsafe { DECODE_STASH.get(tid) }.copied();
    let ev = GraphEvent {
        header: header(EventKind::GraphCompute, 0),
        graph_addr: cgraph,
        graph_id: seq,
        n_nodes: n_nodes as u32,
        backend_id: 0,
        backend_kind,
        n_tokens: decode.map_or(0, |d| d.n_tokens),
        pos: decode.map_or(0, |d| d.pos),
        ret: 0,
    };
    GRAPH_STASH.insert(tid, ev, 0)?;
    emit(ctx, &ev);
    Ok(())
}

/// `ggml_graph_compute` return: every thread's last span ends, then the graph.
#[uretprobe]
pub fn ggml_graph_compute_ret(ctx: RetProbeContext) -> u32 {
    flush_workers(&ctx);
    let _ = super::graph::graph_exit(&ctx);
    0
}

/// The address of `llama_decode`'s `llama_batch` argument.
#[inline(always)]
fn batch_address(ctx: &ProbeContext, l: &GgmlLayout) -> Option<u64> {
    if l.batch_passing == BATCH_BY_REFERENCE {
        return ctx.arg(1);
    }
    // x86-64: in memory just above the return address.
    // SAFETY: `regs` is the probed task's saved registers, valid for the program's run.
    #[cfg(bpf_target_arch = "x86_64")]
    let sp = unsafe { (*ctx.regs).rsp };
    #[cfg(not(bpf_target_arch = "x86_64"))]
    let sp = 0u64;
    (sp != 0).then_some(sp + 8)
}

/// `GGML_SEQS`'s slot of [`llama_decode_seqs`].
const SEQS_DECODE_SLOT: u32 = 0;
/// `GGML_SEQS`'s slot of [`llama_process_seqs`].
const SEQS_PROCESS_SLOT: u32 = 1;

/// `llama_decode(ctx, batch)` entry: a token batch. Tail-calls [`llama_decode_seqs`],
/// which also counts the batch's sequences; where that program is not loaded (a kernel
/// without `bpf_loop`, before Linux 5.17) the call falls through and the batch is
/// recorded without them.
#[uprobe]
pub fn llama_decode(ctx: ProbeContext) -> u32 {
    // SAFETY: `llama_decode_seqs` is a uprobe program of the same function and reads the
    // same registers; on failure (slot empty) the call returns and this program goes on.
    unsafe { GGML_SEQS.tail_call(&ctx, SEQS_DECODE_SLOT) };
    let _ = try_decode_enter::<false>(&ctx);
    0
}

/// [`llama_decode`] with the batch's sequences counted (tail-called, attached nowhere).
#[uprobe]
pub fn llama_decode_seqs(ctx: ProbeContext) -> u32 {
    let _ = try_decode_enter::<true>(&ctx);
    0
}

/// A `llama_decode` entry; with `SCAN`, the batch's sequences counted (`bpf_loop`).
#[inline(always)]
fn try_decode_enter<const SCAN: bool>(ctx: &ProbeContext) -> ProbeResult {
    if enabled_for_target(LEVEL_TOKEN).is_none() {
        return Ok(());
    }
    let l = layout().ok_or(-1i64)?;
    let batch = batch_address(ctx, l).ok_or(-1i64)?;
    let n_tokens: i32 = read_at(batch, l.batch_n_tokens)?;
    let pos_ptr: u64 = read_at(batch, l.batch_pos)?;
    // A NULL `pos` (`llama_batch_get_one`) lets llama.cpp continue from the KV cache.
    let pos: u32 = if pos_ptr == 0 {
        u32::MAX
    } else {
        read_at(pos_ptr, 0).unwrap_or(u32::MAX)
    };
    let seqs = match read_at::<u64>(batch, l.batch_seq_id()) {
        // `llama_batch_get_one`: llama.cpp puts every token in sequence 0.
        Ok(0) => Seqs {
            n: 1,
            flags: 0,
            mask: 1,
            multi: u8::from(n_tokens > 1),
        },
        Ok(seq_id) if SCAN => scan_sequences(seq_id, n_tokens, 0, 0, 0),
        _ => Seqs::default(),
    };
    super::token::decode_enter(ctx, n_tokens as u32, pos, seqs)
}

/// What the sequence scan of a batch reads and finds (on the program's stack, shared
/// with the `bpf_loop` callback).
#[repr(C)]
struct SeqScan {
    /// `llama_batch`: the `seq_id` array (`llama_seq_id *` per token); `llama_batch_ext`:
    /// its first token.
    base: u64,
    /// Bytes from one token to the next in `base` (8: a pointer array).
    stride: u64,
    /// Where, in a token's entry, the pointer to its (first) sequence id is.
    ptr_off: u64,
    /// Where, from that pointer, the id is.
    id_off: u64,
    /// Tokens to read.
    n: u32,
    /// `DECODE_SEQ_*`.
    flags: u32,
    /// Bit `s`: sequence `s` (0..64) has a token.
    mask: u64,
    /// Bit `s`: sequence `s` has more than one token.
    multi: u64,
}

/// Counts the distinct sequences of a batch's first `min(n_tokens,
/// DECODE_SEQ_SCAN_MAX)` tokens by each token's first sequence id: two user-memory reads
/// per token (the pointer, the id), in a `bpf_loop` (one verification for any count).
/// Ids 0..64 are told apart in a bitmask; ids outside count as one more sequence
/// (`DECODE_SEQ_OTHER_IDS`); a token whose id cannot be read ends the scan
/// (`DECODE_SEQ_UNREAD`); tokens past the bound are not read (`DECODE_SEQ_TRUNCATED`).
/// A token of several sequences (`n_seq_id > 1`, a prompt shared by slots) counts under
/// its first only.
#[inline(always)]
fn scan_sequences(base: u64, n_tokens: i32, stride: u64, ptr_off: u64, id_off: u64) -> Seqs {
    if n_tokens <= 0 {
        return Seqs::default();
    }
    let n_tokens = n_tokens as u32;
    let mut sc = SeqScan {
        base,
        stride: if stride == 0 { 8 } else { stride },
        ptr_off,
        id_off,
        n: n_tokens.min(DECODE_SEQ_SCAN_MAX),
        flags: if n_tokens > DECODE_SEQ_SCAN_MAX {
            u32::from(DECODE_SEQ_TRUNCATED)
        } else {
            0
        },
        mask: 0,
        multi: 0,
    };
    // SAFETY: the callback has the helper's signature and reads `sc` only, which outlives
    // the call.
    unsafe {
        bpf_loop(
            sc.n,
            scan_token as *mut c_void,
            core::ptr::from_mut(&mut sc).cast::<c_void>(),
            0,
        )
    };
    let other = u8::from(sc.flags & u32::from(DECODE_SEQ_OTHER_IDS) != 0);
    Seqs {
        n: popcount(sc.mask) + other,
        flags: sc.flags as u8,
        mask: sc.mask as u8,
        multi: sc.multi as u8,
    }
}

/// `bpf_loop` callback: token `i`'s first sequence id into the scan's masks.
extern "C" fn scan_token(i: u32, sc: *mut c_void) -> i64 {
    // SAFETY: `bpf_loop` passes the `SeqScan` on the caller's stack.
    let sc = unsafe { &mut *sc.cast::<SeqScan>() };
    if i >= sc.n {
        return 1;
    }
    let at = sc.base + u64::from(i) * sc.stride + sc.ptr_off;
    // SAFETY: the helper checks the user address.
    let ptr = unsafe { bpf_probe_read_user(at as *const u64) }.unwrap_or(0);
    // SAFETY: as above.
    let id =
        match (ptr != 0).then(|| unsafe { bpf_probe_read_user((ptr + sc.id_off) as *const i32) }) {
            Some(Ok(id)) => id,
            _ => {
                sc.flags |= u32::from(DECODE_SEQ_UNREAD);
                return 1;
            }
        };
    if (0..64).contains(&id) {
        let bit = 1u64 << id;
        if sc.mask & bit != 0 {
            sc.multi |= bit;
        }
        sc.mask |= bit;
    } else {
        sc.flags |= u32::from(DECODE_SEQ_OTHER_IDS);
    }
    0
}

/// Set bits of `x` (BPF has no population count instruction).
#[inline(always)]
fn popcount(x: u64) -> u8 {
    let x = x - ((x >> 1) & 0x5555_5555_5555_5555);
    let x = (x & 0x3333_3333_3333_3333) + ((x >> 2) & 0x3333_3333_3333_3333);
    let x = (x + (x >> 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    (x.wrapping_mul(0x0101_0101_0101_0101) >> 56) as u8
}

/// `llama_process(ctx, type, llama_batch_ext *)` entry: a token batch (decode only; the
/// entry point newer llama.cpp tools use instead of `llama_decode`).
/// Tail-calls [`llama_process_seqs`] as [`llama_decode`] does.
#[uprobe]
pub fn llama_process(ctx: ProbeContext) -> u32 {
    // SAFETY: as in `llama_decode`: same function, same registers; an empty slot returns.
    unsafe { GGML_SEQS.tail_call(&ctx, SEQS_PROCESS_SLOT) };
    let _ = try_process_enter::<false>(&ctx);
    0
}

/// [`llama_process`] with the batch's sequences counted (tail-called, attached nowhere).
#[uprobe]
pub fn llama_process_seqs(ctx: ProbeContext) -> u32 {
    let _ = try_process_enter::<true>(&ctx);
    0
}

/// `LLAMA_PROCESS_TYPE_DECODE`.
const PROCESS_TYPE_DECODE: u32 = 1;

/// A `llama_process` entry; with `SCAN`, the batch's sequences counted (`bpf_loop`).
#[inline(always)]
fn try_process_enter<const SCAN: bool>(ctx: &ProbeContext) -> ProbeResult {
    if enabled_for_target(LEVEL_TOKEN).is_none() {
        return Ok(());
    }
    let kind: u32 = ctx.arg(1).ok_or(-1i64)?;
    if kind != PROCESS_TYPE_DECODE {
        return Ok(());
    }
    let l = layout().ok_or(-1i64)?;
    let batch: u64 = ctx.arg(2).ok_or(-1i64)?;
    let [begin, end]: [u64; 2] = read_at(batch, l.batch_ext_tokens)?;
    let size = u64::from(l.batch_ext_token_size);
    if size == 0 || end < begin {
        return Err(-1);
    }
    let n_tokens = (end - begin) / size;
    let pos: u32 = if n_tokens == 0 {
        u32::MAX
    } else {
        read_at(begin, l.batch_ext_token_pos).unwrap_or(u32::MAX)
    };
    let seqs = match l.batch_ext_token_seq_node() {
        Some(node) if SCAN => scan_sequences(
            begin,
            n_tokens.min(i32::MAX as u64) as i32,
            size,
            u64::from(node),
            BATCH_EXT_SEQ_NODE_VALUE,
        ),
        _ => Seqs::default(),
    };
    super::token::decode_enter(ctx, n_tokens as u32, pos, seqs)
}

/// `llama_process` return.
#[uretprobe]
pub fn llama_process_ret(ctx: RetProbeContext) -> u32 {
    let _ = super::token::decode_exit(&ctx);
    0
}

/// `llama_decode` return.
#[uretprobe]
pub fn llama_decode_ret(ctx: RetProbeContext) -> u32 {
    let _ = super::token::decode_exit(&ctx);
    0
}
