//! Graph level, llama.cpp with more than one backend: what the CPU does for a backend
//! other than its own compute, through functions `libggml-base` exports in every build
//! with backends (2024 on), and the Vulkan loader (`libvulkan.so.1`) under them.
//!
//! Targets:
//! - `enum ggml_status ggml_backend_graph_compute_async(ggml_backend_t, struct ggml_cgraph *)`:
//!   a split of the scheduler's graph on its backend. A split on the CPU backend is left
//!   to `ggml_graph_compute` (called inside it, `llama_cpp.rs`); any other becomes a
//!   [`GraphEvent`] of its backend's kind: the CPU's time to record and submit it (the
//!   backend computes it asynchronously).
//! - `void ggml_backend_synchronize(ggml_backend_t)`, `void
//!   ggml_backend_event_synchronize(ggml_backend_event_t)`: the CPU waits for a backend
//!   (not recorded for the CPU backend, whose synchronize is empty);
//! - `void ggml_backend_tensor_copy(src, dst)`: the scheduler's copy of a split's input
//!   from another backend; `ggml_backend_tensor_set(tensor, data, offset, size)`,
//!   `ggml_backend_tensor_get(tensor, data, offset, size)` and `ggml_backend_tensor_get_async(
//!   backend, tensor, data, offset, size)`: graph inputs in, results out;
//! - `VkResult vkQueueSubmit(queue, submitCount, pSubmits, fence)` and `VkResult
//!   vkWaitForFences(device, fenceCount, pFences, waitAll, timeout)`: the Vulkan calls
//!   under them (ggml-vulkan calls the loader's exported entry points).
//!
//! Each becomes one [`BackendSpanEvent`] at its return. A call entered inside another of
//! the same family on the same thread (the `tensor_set` a `tensor_copy` makes) is part of
//! the outer one; the Vulkan family is recorded apart, so a sync shows its fence wait.

use aya_ebpf::{
    EbpfContext,
    helpers::bpf_probe_read_user,
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};
use common::{
    BackendKind,
    control::LEVEL_GRAPH,
    event::{BACKEND_UNKNOWN, BackendSpanEvent, BackendSpanKind, EventKind},
};

use crate::{
    emit::{ProbeResult, current_tid, emit, enabled_for_target, header},
    maps::{BACKEND_CALLS, BackendCallStash, GGML_BACKEND_GUIDS, GGML_LAYOUT},
};

/// [`BACKEND_CALLS`] family of the `ggml_backend_*` calls.
const FAMILY_GGML: u64 = 0;
/// [`BACKEND_CALLS`] family of the Vulkan calls.
const FAMILY_VULKAN: u64 = 1;

/// The `BackendKind` of the `ggml_backend_t` at `backend`: its GUID (the struct's first
/// field points to it) looked up in [`GGML_BACKEND_GUIDS`]; a GUID not there is a GPU,
/// an unreadable one unknown.
#[inline(always)]
fn backend_kind(backend: u64) -> u32 {
    // SAFETY: reads user memory through the helper, which checks the address.
    let Ok(guid_ptr) = (unsafe { bpf_probe_read_user(backend as *const u64) }) else {
        return BACKEND_UNKNOWN;
    };
    // SAFETY: as above.
    let Ok(guid) = (unsafe { bpf_probe_read_user(guid_ptr as *const [u64; 2]) }) else {
        return BACKEND_UNKNOWN;
    };
    // SAFETY: the value is copied out.
    match unsafe { GGML_BACKEND_GUIDS.get(&guid) } {
        Some(k) => *k,
        None => BackendKind::Gpu as u32,
    }
}

/// Opens a call of `family` on this thread, or counts one more nested call.
#[inline(always)]
fn enter(family: u64, what: BackendSpanKind, backend_kind: u32, bytes: u64, object: u64) {
    let key = (u64::from(current_tid()) << 1) | family;
    if let Some(open) = BACKEND_CALLS.get_ptr_mut(&key) {
        // SAFETY: this thread's own entry; only this thread's programs touch it.
        unsafe { (*open).depth += 1 };
        return;
    }
    let stash = BackendCallStash {
        span: BackendSpanEvent {
            // Its time becomes the start; the return writes the header anew.
            header: header(EventKind::BackendSpan, 0),
            start_ns: 0,
            what: what as u32,
            backend_kind,
            bytes,
            object,
        },
        depth: 0,
        _pad: 0,
    };
    let _ = BACKEND_CALLS.insert(&key, &stash, 0);
}

/// Closes this thread's call of `family` (or one nested in it) and records it.
#[inline(always)]
fn exit<C: EbpfContext>(ctx: &C, family: u64) {
    let key = (u64::from(current_tid()) << 1) | family;
    let Some(open) = BACKEND_CALLS.get_ptr_mut(&key) else {
        return;
    };
    // SAFETY: this thread's own entry; only this thread's programs touch it.
    let stash = unsafe { &mut *open };
    if stash.depth > 0 {
        stash.depth -= 1;
        return;
    }
    let mut ev = stash.span;
    let _ = BACKEND_CALLS.remove(&key);
    ev.start_ns = ev.header.ts_ns;
    ev.header = header(EventKind::BackendSpan, 0);
    emit(ctx, &ev);
}

/// `ggml_nbytes` of a contiguous tensor: `ne[3] * nb[3]` (0 if unreadable).
#[inline(always)]
fn tensor_bytes(tensor: u64) -> u64 {
    let Some(l) = GGML_LAYOUT.get(0) else {
        return 0;
    };
    // SAFETY: reads user memory through the helper, which checks the address.
    let ne3 = unsafe { bpf_probe_read_user((tensor + u64::from(l.tensor_ne) + 24) as *const i64) };
    // SAFETY: as above.
    let nb3 = unsafe { bpf_probe_read_user((tensor + u64::from(l.tensor_nb) + 24) as *const u64) };
    match (ne3, nb3) {
        // Bounded so the product fits (no 128-bit multiply in BPF).
        (Ok(ne), Ok(nb)) if ne > 0 && ne < 1 << 24 && nb < 1 << 38 => ne as u64 * nb,
        _ => 0,
    }
}

/// `ggml_backend_graph_compute_async(backend, cgraph)` entry: a split on a backend other
/// than the CPU opens a graph of its kind.
#[uprobe]
pub fn ggml_backend_compute(ctx: ProbeContext) -> u32 {
    let _ = try_split_enter(&ctx);
    0
}

fn try_split_enter(ctx: &ProbeContext) -> ProbeResult {
    if enabled_for_target(LEVEL_GRAPH).is_none() {
        return Ok(());
    }
    let backend: u64 = ctx.arg(0).ok_or(-1i64)?;
    let cgraph: u64 = ctx.arg(1).ok_or(-1i64)?;
    let kind = backend_kind(backend);
    if kind == BackendKind::Cpu as u32 {
        return Ok(());
    }
    let seq = super::llama_cpp::next_graph_seq();
    super::llama_cpp::open_graph(ctx, cgraph, seq, kind)
}

/// `ggml_backend_graph_compute_async` return: closes the split's graph (a CPU split's
/// was closed by `ggml_graph_compute`'s return, so nothing is open then).
#[uretprobe]
pub fn ggml_backend_compute_ret(ctx: RetProbeContext) -> u32 {
    super::gpu_node::close_recording(&ctx);
    let _ = super::graph::graph_exit(&ctx);
    0
}

/// `ggml_backend_synchronize(backend)` entry (the CPU backend's is empty: not recorded).
#[uprobe]
pub fn ggml_backend_sync(ctx: ProbeContext) -> u32 {
    if enabled_for_target(LEVEL_GRAPH).is_some()
        && let Some(backend) = ctx.arg::<u64>(0)
    {
        let kind = backend_kind(backend);
        if kind != BackendKind::Cpu as u32 {
            enter(FAMILY_GGML, BackendSpanKind::Sync, kind, 0, backend);
        }
    }
    0
}

/// `ggml_backend_event_synchronize(event)` entry.
#[uprobe]
pub fn ggml_backend_event_sync(ctx: ProbeContext) -> u32 {
    if enabled_for_target(LEVEL_GRAPH).is_some() {
        let event = ctx.arg::<u64>(0).unwrap_or(0);
        enter(
            FAMILY_GGML,
            BackendSpanKind::EventSync,
            BACKEND_UNKNOWN,
            0,
            event,
        );
    }
    0
}

/// `ggml_backend_tensor_copy(src, dst)` entry.
#[uprobe]
pub fn ggml_backend_copy(ctx: ProbeContext) -> u32 {
    if enabled_for_target(LEVEL_GRAPH).is_some() {
        let src = ctx.arg::<u64>(0).unwrap_or(0);
        enter(
            FAMILY_GGML,
            BackendSpanKind::Copy,
            BACKEND_UNKNOWN,
            tensor_bytes(src),
            src,
        );
    }
    0
}

/// `ggml_backend_tensor_set(tensor, data, offset, size)` entry.
#[uprobe]
pub fn ggml_backend_upload(ctx: ProbeContext) -> u32 {
    if enabled_for_target(LEVEL_GRAPH).is_some() {
        enter(
            FAMILY_GGML,
            BackendSpanKind::Upload,
            BACKEND_UNKNOWN,
            ctx.arg::<u64>(3).unwrap_or(0),
            ctx.arg::<u64>(0).unwrap_or(0),
        );
    }
    0
}

/// `ggml_backend_tensor_get(tensor, data, offset, size)` entry.
#[uprobe]
pub fn ggml_backend_download(ctx: ProbeContext) -> u32 {
    if enabled_for_target(LEVEL_GRAPH).is_some() {
        enter(
            FAMILY_GGML,
            BackendSpanKind::Download,
            BACKEND_UNKNOWN,
            ctx.arg::<u64>(3).unwrap_or(0),
            ctx.arg::<u64>(0).unwrap_or(0),
        );
    }
    0
}

/// `ggml_backend_tensor_get_async(backend, tensor, data, offset, size)` entry.
#[uprobe]
pub fn ggml_backend_download_async(ctx: ProbeContext) -> u32 {
    if enabled_for_target(LEVEL_GRAPH).is_some() {
        let backend = ctx.arg::<u64>(0).unwrap_or(0);
        enter(
            FAMILY_GGML,
            BackendSpanKind::Download,
            backend_kind(backend),
            ctx.arg::<u64>(4).unwrap_or(0),
            ctx.arg::<u64>(1).unwrap_or(0),
        );
    }
    0
}

/// The return of any `ggml_backend_*` call above but the split.
#[uretprobe]
pub fn ggml_backend_call_ret(ctx: RetProbeContext) -> u32 {
    exit(&ctx, FAMILY_GGML);
    0
}

/// `vkQueueSubmit(queue, submitCount, pSubmits, fence)` entry.
#[uprobe]
pub fn vk_queue_submit(ctx: ProbeContext) -> u32 {
    if enabled_for_target(LEVEL_GRAPH).is_some() {
        enter(
            FAMILY_VULKAN,
            BackendSpanKind::VkSubmit,
            BackendKind::Vulkan as u32,
            u64::from(ctx.arg::<u32>(1).unwrap_or(0)),
            ctx.arg::<u64>(0).unwrap_or(0),
        );
    }
    0
}

/// `vkWaitForFences(device, fenceCount, pFences, waitAll, timeout)` entry; closes the
/// node the thread was recording for the GPU.
#[uprobe]
pub fn vk_wait_for_fences(ctx: ProbeContext) -> u32 {
    // Recording ends where the CPU starts to wait (ggml-vulkan with
    // `GGML_VK_PERF_LOGGER` submits and waits for a split after its last node).
    super::gpu_node::close_recording(&ctx);
    if enabled_for_target(LEVEL_GRAPH).is_some() {
        enter(
            FAMILY_VULKAN,
            BackendSpanKind::VkFenceWait,
            BackendKind::Vulkan as u32,
            u64::from(ctx.arg::<u32>(1).unwrap_or(0)),
            ctx.arg::<u64>(0).unwrap_or(0),
        );
    }
    0
}

/// The return of either Vulkan call.
#[uretprobe]
pub fn vk_call_ret(ctx: RetProbeContext) -> u32 {
    exit(&ctx, FAMILY_VULKAN);
    0
}
