//! The CPU backend: a [`ThreadPool`] of N threads whose thread 0 is the calling
//! (decode) thread, computing splits through the `engine_op_compute` probe point.

use core::ffi::c_void;
use std::sync::Arc;

use common::engine_abi::{BackendKind, EngineGraph};

use super::pool::{GraphEntry, PoolConfig, ThreadPool};
use crate::sync::Fence;

/// The CPU thread-pool backend.
#[derive(Debug)]
pub struct CpuBackend {
    id: u32,
    pool: ThreadPool,
    /// The graph entry point `compute` goes through.
    graph_entry: GraphEntry,
    /// Scratch buffer shared by the threads (as u64s for alignment).
    work: Vec<u64>,
    /// The accel backend's fence, which `BACKEND_SYNC` nodes wait on.
    fence: Option<Arc<Fence>>,
    graphs_computed: u64,
}

impl CpuBackend {
    /// Starts a backend with `n_threads` threads (the caller's thread counts as one) that
    /// computes its graphs through `graph_entry`.
    pub fn new(id: u32, n_threads: u32, graph_entry: GraphEntry) -> std::io::Result<CpuBackend> {
        let pool = ThreadPool::new(PoolConfig {
            n_threads,
            name: "engine",
            op_entry: crate::ops::engine_op_compute,
            slowdown: 1.0,
        })?;
        Ok(CpuBackend {
            id,
            pool,
            graph_entry,
            work: Vec::new(),
            fence: None,
            graphs_computed: 0,
        })
    }

    /// Lets `BACKEND_SYNC` nodes wait on the accel backend's `fence`.
    pub fn set_fence(&mut self, fence: Option<Arc<Fence>>) {
        self.fence = fence;
    }

    /// Backend id as reported in the graph probe.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Number of threads.
    pub fn n_threads(&self) -> u32 {
        self.pool.n_threads()
    }

    /// Number of graphs computed so far.
    pub fn graphs_computed(&self) -> u64 {
        self.graphs_computed
    }

    /// Computes `graph` through the `engine_graph_compute` probe point. `work_bytes` is
    /// the scratch the graph's nodes need.
    pub fn compute(&mut self, graph: &EngineGraph, work_bytes: usize) -> i32 {
        let words = work_bytes.div_ceil(8) + 8;
        if self.work.len() < words {
            self.work.resize(words, 0);
        }
        self.graphs_computed += 1;
        // SAFETY: `graph` and its nodes are valid for the call; `self` is a live backend,
        // what `graph_entry` (`engine_graph_compute`) takes for a CPU graph.
        unsafe {
            (self.graph_entry)(
                graph,
                self.id,
                BackendKind::Cpu as u32,
                graph.n_nodes,
                self as *const CpuBackend as *const c_void,
            )
        }
    }

    /// Body of the graph probe for this backend: all threads compute the graph.
    pub(super) fn run(&self, graph: *const EngineGraph) {
        let fence = self.fence.as_ref().map_or(std::ptr::null(), Arc::as_ptr);
        self.pool.run(
            graph,
            self.work.as_ptr() as *mut u8,
            self.work.len() * 8,
            fence,
        );
    }
}
