//! A stand-in engine for the tracer's ABI-version test: exports `engine_decode`,
//! `engine_graph_compute` and `engine_op_compute` with the probe ABI's signatures and
//! calls them with structures whose `abi_version` is `ENGINE_ABI_VERSION + 1` (a newer
//! engine), then once more with the current version. `profinfer record` must record the
//! calls, leave the fields of the foreign layout out, and report the mismatch.

use std::{ffi::c_void, hint::black_box};

use common::engine_abi::{ENGINE_ABI_VERSION, EngineGraph, EngineNode, OpType};

/// Number of nodes per graph (and op calls per graph).
const NODES: u32 = 3;

/// Operator level stand-in.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn engine_op_compute(
    node: *const EngineNode,
    ith: u32,
    nth: u32,
    params: *mut c_void,
) {
    black_box((node, ith, nth, params));
}

/// Graph level stand-in: runs every node on thread 0 of 1.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn engine_graph_compute(
    graph: *const EngineGraph,
    backend_id: u32,
    backend_kind: u32,
    n_nodes: u32,
    backend: *const c_void,
) -> i32 {
    black_box((backend_id, backend_kind, backend));
    // SAFETY: `graph` is the live graph built by `decode_once`.
    let g = unsafe { &*black_box(graph) };
    let nodes = g.nodes as *const EngineNode;
    for i in 0..n_nodes as usize {
        // SAFETY: `nodes` points at `n_nodes` nodes owned by `decode_once`.
        black_box(engine_op_compute)(unsafe { nodes.add(i) }, 0, 1, std::ptr::null_mut());
    }
    0
}

/// Token level stand-in: builds one graph of `NODES` nodes of layout `version`.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn engine_decode(
    ctx: *mut c_void,
    n_tokens: u32,
    pos: u32,
    tokens: *const i32,
) -> i32 {
    // SAFETY: `ctx` is the version number passed by `main`.
    let version = unsafe { *(ctx as *const u32) };
    black_box(tokens);
    let mut nodes = [EngineNode::empty(); NODES as usize];
    for (i, n) in nodes.iter_mut().enumerate() {
        n.abi_version = version;
        n.op = OpType::Add as u32;
        n.index = i as u32;
        n.layer = 0;
        n.set_name(&format!("node-{i}"));
    }
    let graph = EngineGraph {
        abi_version: version,
        n_nodes: NODES,
        nodes: nodes.as_ptr() as u64,
        graph_id: u64::from(pos) + 1,
        backend_id: 0,
        backend_kind: 0,
        n_tokens,
        pos,
    };
    black_box(engine_graph_compute)(&graph, 0, 0, NODES, std::ptr::null())
}

fn main() {
    let tokens = [1i32];
    let newer = ENGINE_ABI_VERSION + 1;
    for pos in 0..4 {
        black_box(engine_decode)(
            (&raw const newer).cast_mut().cast(),
            1,
            pos,
            tokens.as_ptr(),
        );
    }
    let current = ENGINE_ABI_VERSION;
    black_box(engine_decode)(
        (&raw const current).cast_mut().cast(),
        1,
        4,
        tokens.as_ptr(),
    );
}
