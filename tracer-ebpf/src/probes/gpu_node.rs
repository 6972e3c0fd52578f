//! Operator level on llama.cpp's Vulkan backend: the CPU recording each node of a
//! Vulkan split, and the GPU's own time per node where llama.cpp measures it.
//!
//! Targets:
//! - `static bool ggml_vk_build_graph(ggml_backend_vk_context *, ggml_cgraph *, int
//!   node_idx, ggml_tensor * node_begin, int node_idx_begin, bool dryrun, ...)`
//!   (`libggml-vulkan`'s symbol table): the CPU records node `node_idx`'s commands (and,
//!   at the end of a batch, submits them). Its dry run (`dryrun`, first pass over the
//!   split, sizing buffers) is skipped. The node's span on the thread runs from its
//!   recording's start to the next node's, or to the split's return
//!   ([`close_recording`]); its description is the CPU nodes' (`llama_cpp::describe`)
//!   with the Vulkan kind.
//! - `VkResult vkGetQueryPoolResults(device, queryPool, firstQuery, queryCount, dataSize,
//!   pData, stride, flags)` (the loader's export): with `GGML_VK_PERF_LOGGER` set,
//!   ggml-vulkan writes a timestamp before a split's first node and after each node and
//!   reads them back with one call of 64-bit values; at its return the values leave the
//!   kernel as [`GpuTimestampsEvent`]s (a `bpf_loop` over chunks; ring-buffer output).
//!   Calls that are not packed 64-bit values (`dataSize != queryCount * 8`) are not read.

use core::ffi::c_void;

use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_probe_read_user_buf, generated::bpf_loop},
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};
use common::{
    BackendKind,
    control::LEVEL_OP,
    event::{
        EventKind, GPU_TIMESTAMPS_MAX, GPU_TIMESTAMPS_PER_EVENT, GpuTimestampsEvent,
        OP_SPAN_BACKEND_SHIFT, OpSpanEvent,
    },
};

use super::llama_cpp::{describe, layout, read_at, wanted_detail};
use super::op_span::{PmcEnd, close, now_ns, open, state_of, thread_state};
use crate::{
    emit::{ProbeResult, current_tid, emit_large_to_ring, enabled_for_target, header},
    maps::{GPU_QUERY_READS, GpuQueryRead},
};

/// `ggml_vk_build_graph` entry: node `node_idx` of the split is recorded now.
#[uprobe]
pub fn ggml_vk_node(ctx: ProbeContext) -> u32 {
    let _ = try_vk_node(&ctx);
    0
}

fn try_vk_node(ctx: &ProbeContext) -> ProbeResult {
    let now = now_ns();
    let Some(control) = enabled_for_target(LEVEL_OP) else {
        return Ok(());
    };
    let dryrun: u64 = ctx.arg(5).ok_or(-1i64)?;
    if dryrun & 0xff != 0 {
        return Ok(());
    }
    let cgraph: u64 = ctx.arg(1).ok_or(-1i64)?;
    let index: u64 = ctx.arg(2).ok_or(-1i64)?;
    let index = index as u32;
    let l = layout().ok_or(-1i64)?;
    let tid = current_tid();
    let st = thread_state(tid).ok_or(-1i64)?;
    close(ctx, st, tid, now, 0, PmcEnd::ReadNow, &control);
    let nodes: u64 = read_at(cgraph, l.cgraph_nodes())?;
    let tensor: u64 = read_at(nodes, index.wrapping_mul(8))?;
    describe(
        ctx,
        tensor,
        u64::from(index) | 1 << 32,
        wanted_detail(&control),
        BackendKind::Vulkan as u32,
    );
    open(
        st,
        tensor,
        OpSpanEvent::flags_for(0, BackendKind::Vulkan as u32),
        &control,
    );
    Ok(())
}

/// At a GPU split's return or a fence wait: closes the calling thread's span of the
/// node it was recording for the GPU, if one is open (a CPU node's span is left alone;
/// a CPU split closed its spans at `ggml_graph_compute`'s return).
#[inline(always)]
pub(super) fn close_recording<C: EbpfContext>(ctx: &C) {
    let now = now_ns();
    let Some(control) = enabled_for_target(LEVEL_OP) else {
        return;
    };
    let tid = current_tid();
    if let Some(st) = state_of(tid)
        && (st.flags >> OP_SPAN_BACKEND_SHIFT) & 0xf == BackendKind::Vulkan as u32
    {
        close(ctx, st, tid, now, 0, PmcEnd::ReadNow, &control);
    }
}

/// `vkGetQueryPoolResults` entry: remembers where the values go.
#[uprobe]
pub fn vk_query_results(ctx: ProbeContext) -> u32 {
    let _ = try_query_enter(&ctx);
    0
}

fn try_query_enter(ctx: &ProbeContext) -> ProbeResult {
    if enabled_for_target(LEVEL_OP).is_none() {
        return Ok(());
    }
    let count: u64 = ctx.arg(3).ok_or(-1i64)?;
    let size: u64 = ctx.arg(4).ok_or(-1i64)?;
    let data: u64 = ctx.arg(5).ok_or(-1i64)?;
    let count = count & 0xffff_ffff;
    if count == 0 || size != count * 8 || data == 0 {
        return Ok(());
    }
    let read = GpuQueryRead {
        data,
        total: count as u32,
        _pad: 0,
    };
    GPU_QUERY_READS.insert(&current_tid(), &read, 0)?;
    Ok(())
}

/// `vkGetQueryPoolResults` return: on success, the values as [`GpuTimestampsEvent`]s.
#[uretprobe]
pub fn vk_query_results_ret(ctx: RetProbeContext) -> u32 {
    let tid = current_tid();
    // SAFETY: the value is copied out before the entry is removed.
    let Some(read) = (unsafe { GPU_QUERY_READS.get(&tid) }).copied() else {
        return 0;
    };
    let _ = GPU_QUERY_READS.remove(&tid);
    // VK_SUCCESS is 0; VK_NOT_READY (1) leaves the values unwritten.
    if ctx.ret::<i32>() != 0 {
        return 0;
    }
    let total = read.total.min(GPU_TIMESTAMPS_MAX);
    let mut walk = ChunkWalk {
        data: read.data,
        total,
        asked: read.total,
    };
    // SAFETY: `bpf_loop` calls `emit_chunk` with a pointer to `walk`, on this stack, once
    // per chunk; the callback only reads it.
    unsafe {
        bpf_loop(
            total.div_ceil(GPU_TIMESTAMPS_PER_EVENT as u32),
            emit_chunk as *mut c_void,
            core::ptr::from_mut(&mut walk).cast(),
            0,
        )
    };
    0
}

/// What [`emit_chunk`] walks over.
#[repr(C)]
struct ChunkWalk {
    /// The values in the target's memory.
    data: u64,
    /// Values to send (at most `GPU_TIMESTAMPS_MAX`).
    total: u32,
    /// Values the call returned.
    asked: u32,
}

/// `bpf_loop` callback: chunk `i` of the values into one record (one callback verified
/// once, where a counted loop had the verifier walk every chunk's emit apart and pass
/// its budget).
extern "C" fn emit_chunk(i: u32, walk: *mut c_void) -> i64 {
    // SAFETY: `bpf_loop` passes the `ChunkWalk` on the caller's stack.
    let walk = unsafe { &*walk.cast::<ChunkWalk>() };
    let per = GPU_TIMESTAMPS_PER_EVENT as u32;
    let first = i.wrapping_mul(per);
    if first >= walk.total {
        return 1;
    }
    let count = (walk.total - first).min(per);
    let src = walk.data + u64::from(first) * 8;
    let asked = walk.asked;
    emit_large_to_ring(|ev: &mut GpuTimestampsEvent| {
        ev.header = header(EventKind::GpuTimestamps, 0);
        ev.first = first;
        ev.count = count;
        ev.total = asked;
        ev.chunk = i;
        let n = (count as usize).min(GPU_TIMESTAMPS_PER_EVENT);
        // SAFETY: `ticks` is plain integers; any bytes are valid.
        let bytes =
            unsafe { core::slice::from_raw_parts_mut(ev.ticks.as_mut_ptr().cast::<u8>(), n * 8) };
        // SAFETY: the helper checks the user address and writes at most the slice.
        unsafe { bpf_probe_read_user_buf(src as *const u8, bytes) }.is_ok()
    });
    0
}
