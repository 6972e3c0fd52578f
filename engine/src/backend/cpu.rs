//! The CPU backend: a persistent pool of N threads that compute a graph the way ggml
//! does — every thread walks all nodes, computes its share of each (split by `ith`/`nth`)
//! and meets the others at a barrier before the next node. The calling thread is thread 0.
//! Between graphs the workers poll briefly, then sleep on a condition variable, so the
//! scheduler sees them idle between tokens.

use core::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::engine_abi::{BackendKind, EngineGraph, EngineNode, OpType};

use super::barrier::SpinBarrier;
use crate::probe;

/// How long idle workers poll for the next graph before they sleep.
const POLL_BEFORE_SLEEP: Duration = Duration::from_micros(200);

/// What one thread needs to compute its share of a node: passed as the `params`
/// argument of `engine_op_compute`.
#[derive(Debug)]
#[repr(C)]
pub struct ComputeParams {
    /// This thread's index, 0-based.
    pub ith: u32,
    /// Number of threads.
    pub nth: u32,
    /// Shared scratch buffer (activation conversions), `wsize` bytes, 64-byte aligned.
    pub wdata: *mut u8,
    /// Size of `wdata` in bytes.
    pub wsize: usize,
    /// The barrier all threads of this graph computation meet at.
    pub barrier: *const SpinBarrier,
    /// Id of the graph being computed.
    pub graph_id: u64,
}

impl ComputeParams {
    /// Waits for the other threads (a barrier inside an op).
    pub fn sync(&self) {
        // SAFETY: `barrier` points into the backend's `Shared`, which outlives every graph
        // computation (the backend joins its workers before dropping it).
        unsafe { &*self.barrier }.wait();
    }
}

/// State shared between the calling thread and the workers.
struct Shared {
    n_threads: u32,
    barrier: SpinBarrier,
    /// Incremented (under `lock`) for every new graph; workers compute when it changes.
    generation: AtomicU64,
    graph: AtomicPtr<EngineGraph>,
    wdata: AtomicPtr<u8>,
    wsize: AtomicU64,
    shutdown: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

/// The CPU thread-pool backend.
pub struct CpuBackend {
    id: u32,
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Scratch buffer shared by the threads (as u64s for alignment).
    work: Vec<u64>,
    graphs_computed: u64,
}

impl std::fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuBackend")
            .field("id", &self.id)
            .field("n_threads", &self.shared.n_threads)
            .finish()
    }
}

impl CpuBackend {
    /// Starts a backend with `n_threads` threads (the caller's thread counts as one).
    pub fn new(id: u32, n_threads: u32) -> std::io::Result<CpuBackend> {
        let n_threads = n_threads.max(1);
        let shared = Arc::new(Shared {
            n_threads,
            barrier: SpinBarrier::new(n_threads),
            generation: AtomicU64::new(0),
            graph: AtomicPtr::new(std::ptr::null_mut()),
            wdata: AtomicPtr::new(std::ptr::null_mut()),
            wsize: AtomicU64::new(0),
            shutdown: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        });
        let mut workers = Vec::new();
        for ith in 1..n_threads {
            let s = shared.clone();
            let handle = std::thread::Builder::new()
                .name(format!("engine-worker-{ith}"))
                .spawn(move || worker_loop(&s, ith))?;
            workers.push(handle);
        }
        Ok(CpuBackend {
            id,
            shared,
            workers,
            work: Vec::new(),
            graphs_computed: 0,
        })
    }

    /// Backend id as reported in the graph probe.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Number of threads.
    pub fn n_threads(&self) -> u32 {
        self.shared.n_threads
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
        // SAFETY: `graph` and its nodes are valid for the call; `self` is a live backend.
        unsafe {
            probe::engine_graph_compute(
                graph,
                self.id,
                BackendKind::Cpu as u32,
                graph.n_nodes,
                self as *const CpuBackend as *const c_void,
            )
        }
    }

    fn run(&self, graph: *const EngineGraph) {
        let s = &self.shared;
        let wdata = self.work.as_ptr() as *mut u8;
        {
            let _guard = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.graph.store(graph as *mut EngineGraph, Ordering::Relaxed);
            s.wdata.store(wdata, Ordering::Relaxed);
            s.wsize
                .store((self.work.len() * 8) as u64, Ordering::Relaxed);
            // Release: publishes the job fields above to workers that Acquire-load it.
            s.generation.fetch_add(1, Ordering::Release);
            s.wake.notify_all();
        }
        compute_thread(s, graph, 0, wdata, self.work.len() * 8);
    }
}

impl Drop for CpuBackend {
    fn drop(&mut self) {
        {
            let _guard = self.shared.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.shutdown.store(true, Ordering::Release);
            self.shared.wake.notify_all();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

fn worker_loop(s: &Shared, ith: u32) {
    let mut seen = 0u64;
    loop {
        let started = Instant::now();
        let mut spins = 0u32;
        loop {
            // Acquire: pairs with the Release increment in `CpuBackend::run`.
            let g = s.generation.load(Ordering::Acquire);
            if g != seen {
                seen = g;
                break;
            }
            if s.shutdown.load(Ordering::Acquire) {
                return;
            }
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(256) || started.elapsed() < POLL_BEFORE_SLEEP {
                std::hint::spin_loop();
                continue;
            }
            let mut guard = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            while s.generation.load(Ordering::Acquire) == seen
                && !s.shutdown.load(Ordering::Acquire)
            {
                guard = s.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
            }
        }
        let graph = s.graph.load(Ordering::Relaxed);
        let wdata = s.wdata.load(Ordering::Relaxed);
        let wsize = s.wsize.load(Ordering::Relaxed) as usize;
        compute_thread(s, graph, ith, wdata, wsize);
    }
}

/// Thread `ith`'s walk over the graph: its share of every node, a barrier after each.
fn compute_thread(s: &Shared, graph: *const EngineGraph, ith: u32, wdata: *mut u8, wsize: usize) {
    // SAFETY: the graph stays alive and unmodified until every thread has passed the
    // barrier after the last node (the caller of `run` waits for that).
    let graph = unsafe { &*graph };
    let params = ComputeParams {
        ith,
        nth: s.n_threads,
        wdata,
        wsize,
        barrier: &s.barrier,
        graph_id: graph.graph_id,
    };
    let nodes = graph.nodes as *const EngineNode;
    for i in 0..graph.n_nodes as usize {
        // SAFETY: `nodes` points to `n_nodes` contiguous nodes (EngineGraph contract).
        let node = unsafe { nodes.add(i) };
        // SAFETY: as above.
        let op = unsafe { (*node).op };
        if op == OpType::None as u32 || op == OpType::View as u32 {
            continue; // nothing to compute, like ggml's empty ops
        }
        // SAFETY: node and params are valid for the call; the op reads its sources and
        // writes only its share of the node's data.
        unsafe {
            probe::engine_op_compute(
                node,
                ith,
                s.n_threads,
                &params as *const ComputeParams as *mut c_void,
            )
        };
        s.barrier.wait();
    }
}

/// Body of `engine_graph_compute`.
pub(crate) extern "C" fn graph_compute_entry(
    graph: *const EngineGraph,
    _backend_id: u32,
    backend_kind: u32,
    _n_nodes: u32,
    backend: *const c_void,
) -> i32 {
    if graph.is_null() || backend.is_null() || backend_kind != BackendKind::Cpu as u32 {
        return -1;
    }
    // SAFETY: `graph` is the live graph `CpuBackend::compute` passed in (checked non-null).
    let _span = crate::self_profile::Span::graph(unsafe { &*graph });
    // SAFETY: `backend` is the `CpuBackend` that `CpuBackend::compute` passed in.
    let backend = unsafe { &*(backend as *const CpuBackend) };
    backend.run(graph);
    0
}
