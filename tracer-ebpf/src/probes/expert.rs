//! Expert routing, read at the entry of an expert-indexed product (`MUL_MAT_ID`) on
//! thread 0: the ids tensor (`src[2]`, `[k, T]` I32, written by the router's top-k just
//! before) and, when the engine passes it, the routing weights (`src[3]`), as
//! [`ExpertRouteEvent`]s of up to `MAX_ROUTE_IDS` ids — seed 002 §3.5's two-level read
//! of `ggml_compute_forward_mul_mat_id`'s third source.

use core::mem::offset_of;

use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_probe_read_user, bpf_probe_read_user_buf},
};
use common::{
    engine_abi::{EngineNode, MAX_DIMS, MAX_SRC},
    event::{
        EventKind, ExpertRouteEvent, MAX_ROUTE_IDS, MAX_ROUTE_RECORDS, ROUTE_FLAG_TRUNCATED,
        ROUTE_FLAG_WEIGHTS,
    },
};

use crate::emit::{ProbeResult, emit_large, header};

/// Bytes of the ids (or weights) of one record.
const ROUTE_BYTES: usize = MAX_ROUTE_IDS * 4;

/// Reads a `T` at `addr` in the target.
#[inline(always)]
fn read_at<T>(addr: u64) -> Result<T, i64> {
    // SAFETY: the helper validates the user address; a failed read returns Err.
    unsafe { bpf_probe_read_user((addr as *const u8).cast::<T>()) }.map_err(i64::from)
}

/// Copies `len` (≤ [`ROUTE_BYTES`]) bytes at `addr` in the target into `dst`.
#[inline(always)]
fn read_into(addr: u64, dst: &mut [u32; MAX_ROUTE_IDS], len: usize) -> bool {
    if len == 0 || len > ROUTE_BYTES {
        return false;
    }
    // SAFETY: `dst` holds `ROUTE_BYTES` ≥ `len` bytes of plain integers; viewing them
    // as bytes is valid for any content. (No slice indexing: its panic path would leave
    // the program ending in an unreachable instruction, which the verifier refuses.)
    let bytes = unsafe { core::slice::from_raw_parts_mut(dst.as_mut_ptr().cast::<u8>(), len) };
    // SAFETY: the helper validates the user address and writes at most the slice.
    unsafe { bpf_probe_read_user_buf(addr as *const u8, bytes) }.is_ok()
}

/// Emits the routing records of the `MUL_MAT_ID` node at `node` (an `EngineNode`).
#[inline(always)]
pub(super) fn emit_expert_route<C: EbpfContext>(
    ctx: &C,
    node: *const u8,
    layer: i32,
    index: u32,
) -> ProbeResult {
    let node = node as u64;
    let src: [u64; MAX_SRC] = read_at(node + offset_of!(EngineNode, src) as u64)?;
    let (weights_node, ids_node, ids_weights) = (src[0], src[2], src[3]);
    if ids_node == 0 || weights_node == 0 {
        return Ok(());
    }
    let ids_ne: [i64; MAX_DIMS] = read_at(ids_node + offset_of!(EngineNode, ne) as u64)?;
    let ids_data: u64 = read_at(ids_node + offset_of!(EngineNode, data) as u64)?;
    let w_ne: [i64; MAX_DIMS] = read_at(weights_node + offset_of!(EngineNode, ne) as u64)?;
    let routing: u64 = if ids_weights != 0 {
        read_at(ids_weights + offset_of!(EngineNode, data) as u64)?
    } else {
        0
    };
    let (k, n_tokens) = (ids_ne[0], ids_ne[1]);
    if k <= 0 || k > MAX_ROUTE_IDS as i64 || n_tokens <= 0 {
        return Ok(());
    }
    let (k, n_tokens) = (k as u32, n_tokens as u32);
    let per_record = (MAX_ROUTE_IDS as u32).checked_div(k).unwrap_or(1);
    for r in 0..MAX_ROUTE_RECORDS {
        let token0 = r * per_record;
        if token0 >= n_tokens {
            break;
        }
        let n_tok = per_record.min(n_tokens - token0);
        let n_ids = n_tok * k;
        let truncated = r + 1 == MAX_ROUTE_RECORDS && token0 + n_tok < n_tokens;
        let offset = u64::from(token0 * k) * 4;
        emit_large(ctx, |ev: &mut ExpertRouteEvent| {
            ev.header = header(EventKind::ExpertRoute, 0);
            ev.node_addr = node;
            ev.ids_addr = ids_node;
            ev.layer = layer;
            ev.index = index;
            ev.n_used = k;
            ev.n_expert = w_ne[2].clamp(0, i64::from(u32::MAX)) as u32;
            ev.n_tokens = n_tokens;
            ev.token0 = token0;
            let len = (n_ids as usize * 4) & (2 * ROUTE_BYTES - 1);
            // SAFETY: `[i32; N]` and `[u32; N]` have the same layout.
            let ids = unsafe { &mut *(&raw mut ev.ids).cast::<[u32; MAX_ROUTE_IDS]>() };
            if read_into(ids_data + offset, ids, len) {
                ev.n_ids = n_ids;
            }
            let mut flags = if truncated { ROUTE_FLAG_TRUNCATED } else { 0 };
            if routing != 0 && read_into(routing + offset, &mut ev.weights, len) {
                flags |= ROUTE_FLAG_WEIGHTS;
            }
            ev.flags = flags;
            true
        });
    }
    Ok(())
}
