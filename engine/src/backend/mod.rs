//! Compute backends: the CPU thread pool and the `accel` stand-in for an NPU/GPU. Both
//! compute graph splits through the `engine_graph_compute` probe point, declared here
//! and handed to each backend when it is made (the graph ABI carries the backend id and
//! kind, seed 002 §3.3.2); each has its own operator entry point.

pub mod accel;
pub mod cpu;
pub mod node_ends;
pub mod pool;

use core::ffi::c_void;

use common::engine_abi::{BackendKind, EngineGraph};

use crate::probe::probe_entry;

probe_entry! {
    /// Graph level: compute `graph` (of `n_nodes` nodes) on backend `backend_id` of kind
    /// `backend_kind`; `backend` is the backend object. Returns 0 on success.
    fn engine_graph_compute(graph: *const EngineGraph, backend_id: u32, backend_kind: u32, n_nodes: u32, backend: *const c_void) -> i32
        => graph_compute_entry
}

/// Body of `engine_graph_compute`: hands the graph to the backend of its kind.
pub(crate) extern "C" fn graph_compute_entry(
    graph: *const EngineGraph,
    _backend_id: u32,
    backend_kind: u32,
    _n_nodes: u32,
    backend: *const c_void,
) -> i32 {
    if graph.is_null() || backend.is_null() {
        return -1;
    }
    // SAFETY: `graph` is the live graph the backend's `compute` passed in (non-null).
    let _span = crate::self_profile::Span::graph(unsafe { &*graph });
    match BackendKind::from_u32(backend_kind) {
        Some(BackendKind::Cpu) => {
            // SAFETY: CPU graphs come with the `CpuBackend` that `compute` passed in.
            unsafe { &*(backend as *const cpu::CpuBackend) }.run(graph);
            0
        }
        Some(BackendKind::Accel) => {
            // SAFETY: accel graphs come with the accel driver's state.
            unsafe { &*(backend as *const accel::AccelShared) }.run(graph);
            0
        }
        _ => -1,
    }
}
