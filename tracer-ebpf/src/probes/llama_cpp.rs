//! Probes on unmodified llama.cpp (ggml's CPU backend). They emit the engine's records
//! (`DecodeEvent`, `GraphEvent`, `OpEvent`/`OpExitEvent`), so the trace and every view are
//! shared; what differs is where the fields come from: `struct ggml_tensor` and friends,
//! read at the offsets of the detected build (`GGML_LAYOUT`), op numbers translated by
//! name into profinfer's (`GGML_OPS`).
//!
//! Targets (exported by `libllama`/`libggml-cpu` in every build seen, `docs/llama-cpp.md`):
//! - `int32_t llama_decode(ctx, struct llama_batch batch)` and
//!   `int32_t llama_process(ctx, type, struct llama_batch_ext *)`: token level;
//! - `enum ggml_status ggml_graph_compute(struct ggml_cgraph *, struct ggml_cplan *)`:
//!   graph level, on the thread that runs the graph (it is also worker 0);
//! - operator level, per thread: every node's dispatch starts with
//!   `bool ggml_cpu_extra_compute_forward(params, tensor)` (which computes the node itself
//!   and returns true for weights in an extra buffer, e.g. repacked Q4_0), then calls the
//!   op's `ggml_compute_forward_<op>(params, tensor)`; fused pairs skip both and call
//!   `ggml_compute_forward_rms_norm_mul_fused(params, rms_norm, mul)`. A node's span is
//!   from its first probe to the return of the outermost probed function
//!   (`GgmlThread::depth`), so nested forward functions fold into their caller.

use aya_ebpf::{
    helpers::{bpf_probe_read_user, bpf_probe_read_user_buf},
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};
use common::{
    OpType,
    control::{DETAIL_PMC, DETAIL_STRUCTURE, LEVEL_GRAPH, LEVEL_OP, LEVEL_TOKEN, TracerControl},
    engine_abi::{BackendKind, MAX_DIMS, MAX_OP_PARAMS, MAX_SRC},
    event::{
        EventKind, GraphEvent, OP_DETAIL_FUSED, OP_DETAIL_NAME, OP_DETAIL_OP_PARAMS, OP_DETAIL_PMC,
        OP_DETAIL_STRUCTURE,
    },
    ggml_abi::{BATCH_BY_REFERENCE, GgmlLayout, GgmlThread, MAX_GGML_OPS},
    op_catalog::OP_UNKNOWN_BASE,
};

use super::op::emit_op_exit;
use crate::{
    emit::{ProbeResult, current_tid, emit, emit_op, enabled_for_target, header, read_pmcs},
    maps::{DECODE_STASH, GGML_GRAPH_SEQ, GGML_LAYOUT, GGML_OPS, GGML_THREADS, GRAPH_STASH},
};

/// The detected build's layout (written by the collector before anything runs).
#[inline(always)]
fn layout() -> Option<GgmlLayout> {
    GGML_LAYOUT.get(0).copied()
}

/// Reads a `T` at `base + off` in the target's memory.
#[inline(always)]
fn read_at<T>(base: u64, off: u32) -> Result<T, i64> {
    // SAFETY: the helper checks the user address; a failed read returns Err.
    unsafe { bpf_probe_read_user((base + u64::from(off)) as *const T) }.map_err(i64::from)
}

/// This thread's operator state, created on first use.
#[inline(always)]
fn thread_state() -> Option<*mut GgmlThread> {
    let tid = current_tid();
    if let Some(p) = GGML_THREADS.get_ptr_mut(tid) {
        return Some(p);
    }
    GGML_THREADS.insert(tid, GgmlThread::default(), 0).ok()?;
    GGML_THREADS.get_ptr_mut(tid)
}

/// The next node index of this thread in the current graph.
#[inline(always)]
fn next_index(st: &mut GgmlThread) -> u32 {
    let seq = GGML_GRAPH_SEQ.get(0).copied().unwrap_or(0);
    if st.graph_seq != seq {
        st.graph_seq = seq;
        st.index = 0;
    }
    let i = st.index;
    st.index += 1;
    i
}

/// Emits the operator entry record of `tensor` computed by this thread.
#[inline(always)]
fn emit_node_entry<C: aya_ebpf::EbpfContext>(
    ctx: &C,
    control: &TracerControl,
    l: &GgmlLayout,
    params: u64,
    tensor: u64,
    index: u32,
    extra_detail: u32,
) {
    let ith_nth: [u32; 2] = read_at(params, l.params_ith).unwrap_or([u32::MAX, u32::MAX]);
    let ggml_op: u32 = read_at(tensor, l.tensor_op).unwrap_or(u32::MAX);
    let op = if ggml_op < MAX_GGML_OPS {
        GGML_OPS
            .get(ggml_op)
            .copied()
            .unwrap_or(OP_UNKNOWN_BASE | ggml_op)
    } else {
        u32::MAX
    };
    emit_op(ctx, |ev| {
        ev.header = header(EventKind::OpCompute, 0);
        ev.node_addr = tensor;
        ev.op = op;
        ev.ith = ith_nth[0];
        ev.nth = ith_nth[1];
        ev.index = index;
        // ggml keeps the layer in the name (`ffn_up-3`); the analyzer reads it there.
        ev.layer = -1;
        let mut detail = extra_detail;
        // SAFETY: the helper checks the user address and writes at most the slice.
        let name = unsafe {
            bpf_probe_read_user_buf(
                (tensor + u64::from(l.tensor_name)) as *const u8,
                &mut ev.name,
            )
        };
        if name.is_ok() {
            detail |= OP_DETAIL_NAME;
        }
        if control.op_detail & DETAIL_STRUCTURE != 0 {
            let dtype = read_at::<u32>(tensor, l.tensor_type);
            let ne = read_at::<[i64; MAX_DIMS]>(tensor, l.tensor_ne);
            let nb = read_at::<[u64; MAX_DIMS]>(tensor, l.tensor_nb);
            let src = read_at::<[u64; MAX_SRC]>(tensor, l.tensor_src);
            let params = read_at::<[u32; MAX_OP_PARAMS]>(tensor, l.tensor_op_params);
            if let (Ok(dtype), Ok(ne), Ok(nb), Ok(src), Ok(params)) = (dtype, ne, nb, src, params) {
                ev.structure.dtype = dtype;
                ev.structure.ne = ne;
                ev.structure.nb = nb;
                // A source that is a view (`Qcur-0 (permuted)`, a KV-cache slice) is
                // never computed: record the tensor it views, so the DAG's edges reach
                // the node that wrote the data. (`src` keeps the views: MUL_MAT's K
                // below is the view's row length.)
                ev.structure.src = src;
                for s in ev.structure.src.iter_mut() {
                    if *s != 0
                        && let Ok(base) = read_at::<u64>(*s, l.tensor_view_src)
                        && base != 0
                    {
                        *s = base;
                    }
                }
                ev.structure.op_params = params;
                detail |= OP_DETAIL_STRUCTURE;
                if op == OpType::MulMat as u32 {
                    // ggml's MUL_MAT has no op params; give it the engine's (`M`, `H`,
                    // `K` in 2..5, `docs/probe-abi.md`) so sizes and complexity work
                    // alike: K is src0's row length.
                    let k = read_at::<i64>(src[0], l.tensor_ne).unwrap_or(0);
                    ev.structure.op_params = [0; MAX_OP_PARAMS];
                    ev.structure.op_params[2] = ne[1] as u32;
                    ev.structure.op_params[3] = (ne[2] * ne[3]) as u32;
                    ev.structure.op_params[4] = k as u32;
                }
                detail |= OP_DETAIL_OP_PARAMS;
            }
        }
        if control.op_detail & DETAIL_PMC != 0 {
            ev.pmc_ok = read_pmcs(&mut ev.pmc, control, ev.header.tid);
            detail |= OP_DETAIL_PMC;
        }
        ev.detail = detail;
    });
}

/// Opens the span of `tensor` on this thread, closing a stale open one first.
#[inline(always)]
fn open_node<C: aya_ebpf::EbpfContext>(
    ctx: &C,
    control: &TracerControl,
    st: &mut GgmlThread,
    params: u64,
    tensor: u64,
) -> ProbeResult {
    let l = layout().ok_or(-1i64)?;
    if st.open != 0 {
        emit_op_exit(ctx, control);
    }
    let index = next_index(st);
    emit_node_entry(ctx, control, &l, params, tensor, index, 0);
    st.open = 1;
    st.node = tensor;
    Ok(())
}

/// `ggml_cpu_extra_compute_forward` entry: a node's dispatch starts here.
#[uprobe]
pub fn ggml_extra_forward(ctx: ProbeContext) -> u32 {
    let _ = try_extra_enter(&ctx);
    0
}

fn try_extra_enter(ctx: &ProbeContext) -> ProbeResult {
    let Some(control) = enabled_for_target(LEVEL_OP) else {
        return Ok(());
    };
    let params: u64 = ctx.arg(0).ok_or(-1i64)?;
    let tensor: u64 = ctx.arg(1).ok_or(-1i64)?;
    let st = thread_state().ok_or(-1i64)?;
    // SAFETY: this thread's slot; only this thread uses it, one probe at a time.
    let st = unsafe { &mut *st };
    // Called only from the top of the dispatcher: whatever depth a detached probe left
    // behind, a new node starts at depth 0.
    st.depth = 0;
    open_node(ctx, &control, st, params, tensor)?;
    st.depth = 1;
    Ok(())
}

/// `ggml_cpu_extra_compute_forward` return: true means the extra buffer computed the node
/// (its span ends); false means the op's forward function follows (it stays open).
#[uretprobe]
pub fn ggml_extra_forward_ret(ctx: RetProbeContext) -> u32 {
    let _ = try_extra_exit(&ctx);
    0
}

fn try_extra_exit(ctx: &RetProbeContext) -> ProbeResult {
    let handled = ctx.ret::<u64>() & 0xff != 0;
    close_if_outermost(ctx, handled)
}

/// A probed function returns: one level less on this thread and, when it was the
/// outermost and `end` says the node is done, the node's exit record.
fn close_if_outermost(ctx: &RetProbeContext, end: bool) -> ProbeResult {
    let Some(control) = enabled_for_target(LEVEL_OP) else {
        return Ok(());
    };
    let st = GGML_THREADS.get_ptr_mut(current_tid()).ok_or(-1i64)?;
    // SAFETY: as in `try_extra_enter`.
    let st = unsafe { &mut *st };
    st.depth = st.depth.saturating_sub(1);
    if st.depth == 0 && st.open != 0 && end {
        emit_op_exit(ctx, &control);
        st.open = 0;
    }
    Ok(())
}

/// Entry of any `ggml_compute_forward_<op>`.
#[uprobe]
pub fn ggml_op_forward(ctx: ProbeContext) -> u32 {
    let _ = try_forward_enter(&ctx);
    0
}

fn try_forward_enter(ctx: &ProbeContext) -> ProbeResult {
    let Some(control) = enabled_for_target(LEVEL_OP) else {
        return Ok(());
    };
    let st = thread_state().ok_or(-1i64)?;
    // SAFETY: as in `try_extra_enter`.
    let st = unsafe { &mut *st };
    if st.depth == 0 {
        let params: u64 = ctx.arg(0).ok_or(-1i64)?;
        let tensor: u64 = ctx.arg(1).ok_or(-1i64)?;
        // The dispatcher's call after the extra hook declined: the span is open already.
        if st.open == 0 || st.node != tensor {
            open_node(ctx, &control, st, params, tensor)?;
        }
    }
    st.depth += 1;
    Ok(())
}

/// Return of any `ggml_compute_forward_<op>`: the outermost one ends the node's span.
#[uretprobe]
pub fn ggml_op_forward_ret(ctx: RetProbeContext) -> u32 {
    let _ = try_forward_exit(&ctx);
    0
}

fn try_forward_exit(ctx: &RetProbeContext) -> ProbeResult {
    close_if_outermost(ctx, true)
}

/// `ggml_compute_forward_rms_norm_mul_fused(params, rms_norm, mul)` entry: two nodes in
/// one call, straight from the node loop (no dispatcher, no extra hook).
#[uprobe]
pub fn ggml_fused_forward(ctx: ProbeContext) -> u32 {
    let _ = try_fused_enter(&ctx);
    0
}

fn try_fused_enter(ctx: &ProbeContext) -> ProbeResult {
    let Some(control) = enabled_for_target(LEVEL_OP) else {
        return Ok(());
    };
    let params: u64 = ctx.arg(0).ok_or(-1i64)?;
    let first: u64 = ctx.arg(1).ok_or(-1i64)?;
    let second: u64 = ctx.arg(2).ok_or(-1i64)?;
    let st = thread_state().ok_or(-1i64)?;
    // SAFETY: as in `try_extra_enter`.
    let st = unsafe { &mut *st };
    st.depth = 0;
    open_node(ctx, &control, st, params, first)?;
    st.fused = second;
    st.fused_params = params;
    st.depth = 1;
    Ok(())
}

/// Return of the fused call: the first node ends, and the second is recorded as a
/// zero-length node flagged `OP_DETAIL_FUSED` (so node counts match the graph).
#[uretprobe]
pub fn ggml_fused_forward_ret(ctx: RetProbeContext) -> u32 {
    let _ = try_fused_exit(&ctx);
    0
}

fn try_fused_exit(ctx: &RetProbeContext) -> ProbeResult {
    let Some(control) = enabled_for_target(LEVEL_OP) else {
        return Ok(());
    };
    let st = GGML_THREADS.get_ptr_mut(current_tid()).ok_or(-1i64)?;
    // SAFETY: as in `try_extra_enter`.
    let st = unsafe { &mut *st };
    st.depth = st.depth.saturating_sub(1);
    if st.depth != 0 || st.open == 0 {
        return Ok(());
    }
    emit_op_exit(ctx, &control);
    st.open = 0;
    let second = st.fused;
    st.fused = 0;
    if second != 0 {
        let l = layout().ok_or(-1i64)?;
        let index = next_index(st);
        emit_node_entry(
            ctx,
            &control,
            &l,
            st.fused_params,
            second,
            index,
            OP_DETAIL_FUSED,
        );
        emit_op_exit(ctx, &control);
    }
    Ok(())
}

/// `ggml_graph_compute` entry: a graph starts (a new node-index generation).
#[uprobe]
pub fn ggml_graph_compute(ctx: ProbeContext) -> u32 {
    let _ = try_graph_enter(&ctx);
    0
}

fn try_graph_enter(ctx: &ProbeContext) -> ProbeResult {
    let seq = match GGML_GRAPH_SEQ.get_ptr_mut(0) {
        Some(p) => {
            // SAFETY: one array slot; only graph entries write it, one graph at a time.
            unsafe {
                *p += 1;
                *p
            }
        }
        None => 0,
    };
    if enabled_for_target(LEVEL_GRAPH).is_none() {
        return Ok(());
    }
    let l = layout().ok_or(-1i64)?;
    let cgraph: u64 = ctx.arg(0).ok_or(-1i64)?;
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
        backend_kind: BackendKind::Cpu as u32,
        n_tokens: decode.map_or(0, |d| d.n_tokens),
        pos: decode.map_or(0, |d| d.pos),
        ret: 0,
    };
    GRAPH_STASH.insert(tid, ev, 0)?;
    emit(ctx, &ev);
    Ok(())
}

/// `ggml_graph_compute` return.
#[uretprobe]
pub fn ggml_graph_compute_ret(ctx: RetProbeContext) -> u32 {
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

/// `llama_decode(ctx, batch)` entry: a token batch.
#[uprobe]
pub fn llama_decode(ctx: ProbeContext) -> u32 {
    let _ = try_decode_enter(&ctx);
    0
}

fn try_decode_enter(ctx: &ProbeContext) -> ProbeResult {
    if enabled_for_target(LEVEL_TOKEN).is_none() {
        return Ok(());
    }
    let l = layout().ok_or(-1i64)?;
    let batch = batch_address(ctx, &l).ok_or(-1i64)?;
    let n_tokens: i32 = read_at(batch, l.batch_n_tokens)?;
    let pos_ptr: u64 = read_at(batch, l.batch_pos)?;
    // A NULL `pos` (`llama_batch_get_one`) lets llama.cpp continue from the KV cache.
    let pos: u32 = if pos_ptr == 0 {
        u32::MAX
    } else {
        read_at(pos_ptr, 0).unwrap_or(u32::MAX)
    };
    super::token::decode_enter(ctx, n_tokens as u32, pos)
}

/// `llama_process(ctx, type, llama_batch_ext *)` entry: a token batch (decode only; the
/// entry point newer llama.cpp tools use instead of `llama_decode`).
#[uprobe]
pub fn llama_process(ctx: ProbeContext) -> u32 {
    let _ = try_process_enter(&ctx);
    0
}

/// `LLAMA_PROCESS_TYPE_DECODE`.
const PROCESS_TYPE_DECODE: u32 = 1;

fn try_process_enter(ctx: &ProbeContext) -> ProbeResult {
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
    super::token::decode_enter(ctx, n_tokens as u32, pos)
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
