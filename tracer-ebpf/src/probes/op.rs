//! Operator level.
//!
//! Targets: `void engine_op_compute(const EngineNode *node, u32 ith, u32 nth, void *params)`
//! and the accel backend's `engine_accel_op_compute` (same signature); each entry
//! records the kind of backend its probe point belongs to. One return program serves
//! both.
//! The node is read with `bpf_probe_read_user` using the `common::engine_abi::EngineNode`
//! layout: the fixed fields always, the structure (dtype, shape, strides, sources, op
//! params — one read of the contiguous `ne..op_params` span) when `DETAIL_STRUCTURE` is
//! on; the per-thread counters when `DETAIL_PMC` is on. The exit records only its time
//! and counters ([`OpExitEvent`]).

use core::mem::offset_of;

use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_probe_read_user, bpf_probe_read_user_buf},
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
};
use common::{
    control::{DETAIL_PMC, DETAIL_STRUCTURE, LEVEL_OP, TracerControl},
    engine_abi::{BackendKind, EngineNode, MAX_DIMS, MAX_OP_PARAMS, MAX_SRC, OpType},
    event::{
        EVENT_FLAG_EXIT, EventKind, OP_DETAIL_ABI_MISMATCH, OP_DETAIL_NAME, OP_DETAIL_OP_PARAMS,
        OP_DETAIL_PMC, OP_DETAIL_STRUCTURE, OpExitEvent,
    },
};

use crate::emit::{ProbeResult, abi_ok, emit, emit_op, enabled_for_target, header, read_pmcs};

/// The leading fields of `EngineNode`: `abi_version`, `op`, `dtype`, `flags`.
const NODE_HEAD_WORDS: usize = 4;

/// `EngineNode` fields from `ne` to the end of `op_params`, contiguous in the node:
/// everything the structure needs in one `bpf_probe_read_user` (136 bytes; `data` comes
/// along because it sits between `src` and `op_params`).
#[repr(C)]
#[derive(Clone, Copy)]
struct NodeShape {
    ne: [i64; MAX_DIMS],
    nb: [u64; MAX_DIMS],
    src: [u64; MAX_SRC],
    data: u64,
    op_params: [u32; MAX_OP_PARAMS],
}
const _: () = assert!(
    offset_of!(EngineNode, ne) + offset_of!(NodeShape, nb) == offset_of!(EngineNode, nb)
        && offset_of!(EngineNode, ne) + offset_of!(NodeShape, src) == offset_of!(EngineNode, src)
        && offset_of!(EngineNode, ne) + offset_of!(NodeShape, data) == offset_of!(EngineNode, data)
        && offset_of!(EngineNode, ne) + offset_of!(NodeShape, op_params)
            == offset_of!(EngineNode, op_params)
);

/// `engine_op_compute` entry.
#[uprobe]
pub fn engine_op_compute(ctx: ProbeContext) -> u32 {
    let _ = try_op_enter(&ctx, BackendKind::Cpu);
    0
}

/// `engine_accel_op_compute` entry (the accel backend's operator entry point).
#[uprobe]
pub fn engine_accel_op_compute(ctx: ProbeContext) -> u32 {
    let _ = try_op_enter(&ctx, BackendKind::Accel);
    0
}

#[inline(always)]
fn try_op_enter(ctx: &ProbeContext, backend: BackendKind) -> ProbeResult {
    let Some(control) = enabled_for_target(LEVEL_OP) else {
        return Ok(());
    };
    let node: *const u8 = ctx.arg(0).ok_or(-1i64)?;
    let ith: u32 = ctx.arg(1).ok_or(-1i64)?;
    let nth: u32 = ctx.arg(2).ok_or(-1i64)?;
    // SAFETY: the helper validates the user address; a failed read returns Err.
    let head = unsafe { bpf_probe_read_user(node.cast::<[u32; NODE_HEAD_WORDS]>()) }?;
    // Another layout: record the call (timing, thread) but no field of the node.
    let layout_ok = abi_ok(head[0]);
    let tail = if layout_ok {
        // SAFETY: as above.
        unsafe {
            bpf_probe_read_user(
                node.wrapping_add(offset_of!(EngineNode, layer))
                    .cast::<[u32; 2]>(),
            )
        }?
    } else {
        [u32::MAX, u32::MAX]
    };
    emit_op(ctx, |ev| {
        ev.header = header(EventKind::OpCompute, 0);
        ev.node_addr = node as u64;
        ev.op = if layout_ok { head[1] } else { u32::MAX };
        ev.ith = ith;
        ev.nth = nth;
        ev.index = tail[1];
        ev.layer = tail[0] as i32;
        ev.backend_kind = backend as u32;
        let mut detail = 0;
        if layout_ok {
            // SAFETY: the helper validates the user address and writes at most the slice.
            let name = unsafe {
                bpf_probe_read_user_buf(
                    node.wrapping_add(offset_of!(EngineNode, name)),
                    &mut ev.name,
                )
            };
            if name.is_ok() {
                detail |= OP_DETAIL_NAME;
            }
        } else {
            detail |= OP_DETAIL_ABI_MISMATCH;
        }
        if layout_ok && control.op_detail & DETAIL_STRUCTURE != 0 {
            // SAFETY: as above.
            let shape = unsafe {
                bpf_probe_read_user(
                    node.wrapping_add(offset_of!(EngineNode, ne))
                        .cast::<NodeShape>(),
                )
            };
            if let Ok(shape) = shape {
                ev.structure.dtype = head[2];
                ev.structure.node_flags = head[3];
                ev.structure.ne = shape.ne;
                ev.structure.nb = shape.nb;
                ev.structure.src = shape.src;
                ev.structure.op_params = shape.op_params;
                detail |= OP_DETAIL_STRUCTURE | OP_DETAIL_OP_PARAMS;
            }
        }
        if control.op_detail & DETAIL_PMC != 0 {
            ev.pmc_ok = read_pmcs(&mut ev.pmc, &control, ev.header.tid);
            detail |= OP_DETAIL_PMC;
        }
        ev.detail = detail;
    });
    // The experts a MUL_MAT_ID uses are part of its structure: its third source's data.
    if layout_ok
        && head[1] == OpType::MulMatId as u32
        && ith == 0
        && control.op_detail & DETAIL_STRUCTURE != 0
    {
        super::expert::emit_expert_route(ctx, node, tail[0] as i32, tail[1])?;
    }
    Ok(())
}

/// `engine_op_compute` return.
#[uretprobe]
pub fn engine_op_compute_ret(ctx: RetProbeContext) -> u32 {
    let _ = try_op_exit(&ctx);
    0
}

/// A compact record: time and counters. No per-thread stash of the entry — the analyzer
/// pairs an exit with the last entry on its thread (operators do not nest), which saves
/// a hash-map insert at entry and a lookup and delete here.
fn try_op_exit(ctx: &RetProbeContext) -> ProbeResult {
    let Some(control) = enabled_for_target(LEVEL_OP) else {
        return Ok(());
    };
    emit_op_exit(ctx, &control);
    Ok(())
}

/// Emits an operator exit record (time and counters) for the current thread, for every
/// target.
#[inline(always)]
pub(super) fn emit_op_exit<C: EbpfContext>(ctx: &C, control: &TracerControl) {
    let mut ev = OpExitEvent::zeroed();
    ev.header = header(EventKind::OpComputeExit, EVENT_FLAG_EXIT);
    if control.op_detail & DETAIL_PMC != 0 {
        ev.pmc_ok = read_pmcs(&mut ev.pmc, control, ev.header.tid);
        ev.detail = OP_DETAIL_PMC;
    }
    emit(ctx, &ev);
}
