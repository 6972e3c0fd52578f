//! Graph level.
//!
//! Target: `i32 engine_graph_compute(const EngineGraph *, u32 backend_id, u32 backend_kind,
//! u32 n_nodes, backend *)`.

use aya_ebpf::{
    helpers::bpf_probe_read_user,
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};
use common::{
    control::{CONTROL_FLAG_WAKE_ON_GRAPH, LEVEL_GRAPH},
    engine_abi::EngineGraph,
    event::{EVENT_FLAG_EXIT, EventKind, GraphEvent},
};

use crate::{
    emit::{ProbeResult, abi_ok, current_tid, emit, emit_waking_if, enabled_for_target, header},
    maps::GRAPH_STASH,
};

/// `engine_graph_compute` entry.
#[uprobe]
pub fn engine_graph_compute(ctx: ProbeContext) -> u32 {
    let _ = try_graph_enter(&ctx);
    0
}

fn try_graph_enter(ctx: &ProbeContext) -> ProbeResult {
    if enabled_for_target(LEVEL_GRAPH).is_none() {
        return Ok(());
    }
    let graph: *const EngineGraph = ctx.arg(0).ok_or(-1i64)?;
    let unknown = EngineGraph::zeroed();
    // SAFETY: reads user memory through the helper, which checks the address.
    let g = unsafe { bpf_probe_read_user(graph) }.unwrap_or(unknown);
    // Another layout: only the probe arguments are trustworthy, not the fields.
    let g = if abi_ok(g.abi_version) { g } else { unknown };
    let ev = GraphEvent {
        header: header(EventKind::GraphCompute, 0),
        graph_addr: graph as u64,
        graph_id: g.graph_id,
        n_nodes: ctx.arg::<u32>(3).ok_or(-1i64)?,
        backend_id: ctx.arg::<u32>(1).ok_or(-1i64)?,
        backend_kind: ctx.arg::<u32>(2).ok_or(-1i64)?,
        n_tokens: g.n_tokens,
        pos: g.pos,
        ret: 0,
    };
    GRAPH_STASH.insert(current_tid(), ev, 0)?;
    emit(ctx, &ev);
    Ok(())
}

/// `engine_graph_compute` return.
#[uretprobe]
pub fn engine_graph_compute_ret(ctx: RetProbeContext) -> u32 {
    let _ = graph_exit(&ctx);
    0
}

/// A graph computation's return, for every target: closes the thread's stashed entry.
pub(super) fn graph_exit(ctx: &RetProbeContext) -> ProbeResult {
    let tid = current_tid();
    // SAFETY: the value is copied out before the entry is removed.
    let Some(mut ev) = (unsafe { GRAPH_STASH.get(tid) }).copied() else {
        return Ok(());
    };
    GRAPH_STASH.remove(tid)?;
    ev.header = header(EventKind::GraphCompute, EVENT_FLAG_EXIT);
    ev.ret = ctx.ret::<i32>();
    // Wake the collector while leaf nodes wait to be read from the target's memory.
    emit_waking_if(ctx, &ev, CONTROL_FLAG_WAKE_ON_GRAPH);
    Ok(())
}
