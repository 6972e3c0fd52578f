//! Expert routing, read at the entry of an expert-indexed product (`MUL_MAT_ID`): the ids
//! tensor (`src[2]`, `[k, T]` I32, written by the router's top-k just before) and, when
//! the target passes them, the routing weights (`src[3]`), as [`ExpertRouteEvent`]s of up
//! to `MAX_ROUTE_IDS` ids — seed 002 §3.5's two-level read of
//! `ggml_compute_forward_mul_mat_id`'s third source. Shared by the engine (its
//! `EngineNode`, fixed offsets) and llama.cpp (a `ggml_tensor` at the detected build's
//! offsets, `llama_cpp::ggml_expert_route`): [`TensorFields`] says where the fields are.

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
    ggml_abi::GgmlLayout,
};

use crate::emit::{ProbeResult, emit_large, header};

/// Where the fields the routing is read from sit in a node of the target, and what the
/// target's expert products look like.
#[derive(Clone, Copy)]
pub(super) struct TensorFields {
    /// The source pointers (`MAX_SRC` or more).
    pub src: u32,
    /// `ne` (`int64_t[4]`).
    pub ne: u32,
    /// `nb` (byte strides, 8 bytes each).
    pub nb: u32,
    /// The data pointer.
    pub data: u32,
    /// Whether `src[3]` holds the routing weights (the engine's expert products; ggml's
    /// `MUL_MAT_ID` has three sources).
    pub weights_src: bool,
    /// Whether the ids may be a view with rows further apart than `k` ids (ggml's top-k
    /// is a view of its argsort, `nb[1] = n_expert · 4`): then they are read row by row
    /// at `nb[1]`. The engine's are contiguous, and its programs keep the one-piece read.
    pub strided: bool,
}

impl TensorFields {
    /// The engine's `EngineNode` (`common::engine_abi`).
    pub const ENGINE: TensorFields = TensorFields {
        src: offset_of!(EngineNode, src) as u32,
        ne: offset_of!(EngineNode, ne) as u32,
        nb: offset_of!(EngineNode, nb) as u32,
        data: offset_of!(EngineNode, data) as u32,
        weights_src: true,
        strided: false,
    };

    /// A `struct ggml_tensor` of the build whose layout is `l`.
    #[inline(always)]
    pub fn ggml(l: &GgmlLayout) -> TensorFields {
        TensorFields {
            src: l.tensor_src,
            ne: l.tensor_ne,
            nb: l.tensor_nb,
            data: l.tensor_data,
            weights_src: false,
            strided: true,
        }
    }
}

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

/// Copies `k` ids (`k · 4` ≤ [`ROUTE_BYTES`] bytes) at `addr` in the target into `ev.ids`
/// from id `at` on (`at + k` ≤ `MAX_ROUTE_IDS`, which the caller ensures).
#[inline(always)]
fn read_row(addr: u64, ev: &mut ExpertRouteEvent, at: u32, k: u32) -> bool {
    // The masks change nothing for the values the caller passes; they bound the write
    // for the verifier (byte offset < 128, length ≤ 128, both within the record).
    let off = (at as usize * 4) & (ROUTE_BYTES - 1);
    let len = k as usize * 4;
    if len == 0 || len > ROUTE_BYTES {
        return false;
    }
    let base = core::ptr::from_mut(ev).cast::<u8>();
    // SAFETY: `ids` starts `offset_of!(ExpertRouteEvent, ids)` bytes into `ev`, and
    // `off + len` ≤ `MAX_ROUTE_IDS · 4` bytes is inside it (see above); its plain
    // integers are valid for any bytes.
    let bytes = unsafe {
        core::slice::from_raw_parts_mut(base.add(offset_of!(ExpertRouteEvent, ids) + off), len)
    };
    // SAFETY: the helper validates the user address and writes at most the slice.
    unsafe { bpf_probe_read_user_buf(addr as *const u8, bytes) }.is_ok()
}

/// Emits the routing records of the `MUL_MAT_ID` node at `node`, whose fields are where
/// `f` says; `layer` as the target knows it (-1: the analyzer takes it from the node's
/// name), `index` its position in the graph.
#[inline(always)]
pub(super) fn emit_expert_route<C: EbpfContext>(
    ctx: &C,
    node: u64,
    f: TensorFields,
    layer: i32,
    index: u32,
) -> ProbeResult {
    let src: [u64; MAX_SRC] = read_at(node + u64::from(f.src))?;
    let (weights_node, ids_node) = (src[0], src[2]);
    let ids_weights = if f.weights_src { src[3] } else { 0 };
    if ids_node == 0 || weights_node == 0 {
        return Ok(());
    }
    let ids_ne: [i64; MAX_DIMS] = read_at(ids_node + u64::from(f.ne))?;
    let ids_data: u64 = read_at(ids_node + u64::from(f.data))?;
    let w_ne: [i64; MAX_DIMS] = read_at(weights_node + u64::from(f.ne))?;
    let routing: u64 = if ids_weights != 0 {
        read_at(ids_weights + u64::from(f.data))?
    } else {
        0
    };
    let (k, n_tokens) = (ids_ne[0], ids_ne[1]);
    if k <= 0 || k > MAX_ROUTE_IDS as i64 || n_tokens <= 0 || ids_data == 0 {
        return Ok(());
    }
    let (k, n_tokens) = (k as u32, n_tokens as u32);
    // Bytes from one token's ids to the next's.
    let row = if f.strided {
        read_at::<u64>(ids_node + u64::from(f.nb) + 8)?
    } else {
        u64::from(k) * 4
    };
    let contiguous = row == u64::from(k) * 4;
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
            let read = if contiguous {
                // SAFETY: `[i32; N]` and `[u32; N]` have the same layout.
                let ids = unsafe { &mut *(&raw mut ev.ids).cast::<[u32; MAX_ROUTE_IDS]>() };
                read_into(ids_data + offset, ids, len)
            } else {
                // A view: token `t`'s ids start `t · row` bytes in.
                let mut ok = true;
                for t in 0..MAX_ROUTE_IDS as u32 {
                    if t >= n_tok || !ok {
                        break;
                    }
                    let at = u64::from(token0 + t).wrapping_mul(row);
                    ok = read_row(ids_data.wrapping_add(at), ev, t * k, k);
                }
                ok
            };
            if read {
                ev.n_ids = n_ids;
            }
            let mut flags = if truncated { ROUTE_FLAG_TRUNCATED } else { 0 };
            if contiguous && routing != 0 && read_into(routing + offset, &mut ev.weights, len) {
                flags |= ROUTE_FLAG_WEIGHTS;
            }
            ev.flags = flags;
            true
        });
    }
    Ok(())
}
