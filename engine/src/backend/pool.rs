//! A persistent pool of threads that compute a graph the way ggml does: every thread
//! walks all nodes, computes its share of each (split by `ith`/`nth`) through the
//! backend's operator entry point, and meets the others at a barrier before the next
//! node. The thread that calls [`ThreadPool::run`] is thread 0. Between graphs the
//! workers poll briefly, then sleep on a condition variable, so the scheduler sees them
//! idle between tokens.

use core::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::engine_abi::{EngineGraph, EngineNode, OpType};

use super::node_ends::{self, NodeEnds};
use crate::ops::ComputeParams;
use crate::probe::probe_entry;
use crate::sync::{Fence, SpinBarrier};

/// How long idle workers poll for the next graph before they sleep.
const POLL_BEFORE_SLEEP: Duration = Duration::from_micros(200);

/// A backend's operator entry point (a probe point: `crate::ops::engine_op_compute`, or
/// the accel's `engine_accel_op_compute`).
pub type OpEntry = unsafe extern "C" fn(*const EngineNode, u32, u32, *mut c_void);

/// A backend's graph entry point, `crate::backend::engine_graph_compute` (graph,
/// backend id, backend kind, node count, backend object), handed to a backend when it is
/// made: the module that declares it dispatches to the backends, so they do not name it.
pub type GraphEntry = unsafe extern "C" fn(*const EngineGraph, u32, u32, u32, *const c_void) -> i32;

/// How a pool computes: its entry point and what its threads share.
#[derive(Clone, Copy, Debug)]
pub struct PoolConfig {
    /// Number of threads, the caller of `run` included.
    pub n_threads: u32,
    /// Worker thread names are `{name}-worker-{ith}`.
    pub name: &'static str,
    /// The operator entry point every thread calls for every node.
    pub op_entry: OpEntry,
    /// Each op takes this many times its compute time (1: no throttle).
    pub slowdown: f32,
}

/// State shared between the calling thread and the workers.
struct Shared {
    config: PoolConfig,
    barrier: SpinBarrier,
    /// Incremented (under `lock`) for every new graph; workers compute when it changes.
    generation: AtomicU64,
    graph: AtomicPtr<EngineGraph>,
    wdata: AtomicPtr<u8>,
    wsize: AtomicU64,
    fence: AtomicPtr<Fence>,
    shutdown: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

/// The threads of one backend.
pub struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadPool")
            .field("name", &self.shared.config.name)
            .field("n_threads", &self.shared.config.n_threads)
            .finish()
    }
}

impl ThreadPool {
    /// Starts `config.n_threads - 1` workers (with the calling thread's CPU affinity).
    pub fn new(config: PoolConfig) -> std::io::Result<ThreadPool> {
        let config = PoolConfig {
            n_threads: config.n_threads.max(1),
            ..config
        };
        let shared = Arc::new(Shared {
            config,
            barrier: SpinBarrier::new(config.n_threads),
            generation: AtomicU64::new(0),
            graph: AtomicPtr::new(std::ptr::null_mut()),
            wdata: AtomicPtr::new(std::ptr::null_mut()),
            wsize: AtomicU64::new(0),
            fence: AtomicPtr::new(std::ptr::null_mut()),
            shutdown: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        });
        let mut workers = Vec::new();
        for ith in 1..config.n_threads {
            let s = shared.clone();
            let handle = std::thread::Builder::new()
                .name(format!("{}-worker-{ith}", config.name))
                .spawn(move || worker_loop(&s, ith))?;
            workers.push(handle);
        }
        Ok(ThreadPool { shared, workers })
    }

    /// Number of threads.
    pub fn n_threads(&self) -> u32 {
        self.shared.config.n_threads
    }

    /// Computes `graph` on all threads, the caller as thread 0; `wdata` is `wsize`
    /// bytes of scratch; `fence` is the other backend's (null if none).
    pub fn run(
        &self,
        graph: *const EngineGraph,
        wdata: *mut u8,
        wsize: usize,
        fence: *const Fence,
    ) {
        let s = &self.shared;
        {
            let _guard = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.graph.store(graph as *mut EngineGraph, Ordering::Relaxed);
            s.wdata.store(wdata, Ordering::Relaxed);
            s.wsize.store(wsize as u64, Ordering::Relaxed);
            s.fence.store(fence as *mut Fence, Ordering::Relaxed);
            // Release: publishes the job fields above to workers that Acquire-load it.
            s.generation.fetch_add(1, Ordering::Release);
            s.wake.notify_all();
        }
        compute_thread(s, graph, 0, wdata, wsize, fence);
    }
}

impl Drop for ThreadPool {
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
            // Acquire: pairs with the Release increment in `ThreadPool::run`.
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
        let fence = s.fence.load(Ordering::Relaxed);
        compute_thread(s, graph, ith, wdata, wsize, fence);
    }
}

probe_entry! {
    /// Operator level: thread `ith` of `nth` of a backend of kind `backend_kind` has
    /// finished its share of `node` and goes on to wait at the barrier for the others.
    /// A tracer takes the node's end on this thread here (one uprobe on a 5-byte nop),
    /// and its next node's start where the last thread arrives.
    fn engine_op_done(node: *const EngineNode, ith: u32, nth: u32, backend_kind: u32)
        => op_done_entry
}

/// Body of `engine_op_done`: nothing to do; the call marks where a thread's share of a
/// node ends and its wait at the barrier begins.
pub(crate) extern "C" fn op_done_entry(
    _node: *const EngineNode,
    _ith: u32,
    _nth: u32,
    _backend_kind: u32,
) {
}

probe_entry! {
    /// Operator level: thread `ith` of `nth` begins its walk over `graph` (a worker that
    /// slept between graphs starts here, after its wake-up): the start of its first
    /// node. Every later node starts when the barrier after the one before releases.
    fn engine_graph_thread(graph: *const EngineGraph, ith: u32, nth: u32)
        => graph_thread_entry
}

/// Body of `engine_graph_thread`: nothing to do; the call marks where a thread begins
/// its walk over a graph.
pub(crate) extern "C" fn graph_thread_entry(_graph: *const EngineGraph, _ith: u32, _nth: u32) {}

/// Thread `ith`'s walk over the graph: its share of every node, a barrier after each.
fn compute_thread(
    s: &Shared,
    graph: *const EngineGraph,
    ith: u32,
    wdata: *mut u8,
    wsize: usize,
    fence: *const Fence,
) {
    // SAFETY: the graph stays alive and unmodified until every thread has passed the
    // barrier after the last node (the caller of `run` waits for that).
    let graph = unsafe { &*graph };
    let params = ComputeParams {
        ith,
        nth: s.config.n_threads,
        wdata,
        wsize,
        barrier: &s.barrier,
        graph_id: graph.graph_id,
        fence,
        slowdown: s.config.slowdown,
    };
    let backend_kind = graph.backend_kind;
    // SAFETY: the probe point's body reads nothing.
    unsafe { engine_graph_thread(graph, ith, s.config.n_threads) };
    let nodes = graph.nodes as *const EngineNode;
    // Nothing to compute, like ggml's empty ops.
    let empty = |i: usize| {
        // SAFETY: `nodes` points to `n_nodes` contiguous nodes (EngineGraph contract).
        let op = unsafe { (*nodes.add(i)).op };
        op == OpType::None as u32 || op == OpType::View as u32
    };
    // Node ends for a tracer that attached `engine_op_times` (else per node only the
    // `engine_op_done` probe point), all handed over before the graph's last barrier:
    // a tracer has a graph's spans and descriptions before the graph ends.
    let mut ends =
        node_ends::wanted().then(|| NodeEnds::new(ith, s.config.n_threads, backend_kind));
    let last = (0..graph.n_nodes as usize).rev().find(|&i| !empty(i));
    for i in 0..graph.n_nodes as usize {
        if empty(i) {
            continue;
        }
        // SAFETY: `nodes` points to `n_nodes` contiguous nodes (EngineGraph contract).
        let node = unsafe { nodes.add(i) };
        // SAFETY: as above.
        let op = unsafe { (*node).op };
        // SAFETY: node and params are valid for the call; the op reads its sources and
        // writes only its share of the node's data.
        unsafe {
            (s.config.op_entry)(
                node,
                ith,
                s.config.n_threads,
                &params as *const ComputeParams as *mut c_void,
            )
        };
        // SAFETY: the probe point's body reads nothing.
        unsafe { engine_op_done(node, ith, s.config.n_threads, backend_kind) };
        if let Some(ends) = ends.as_mut() {
            ends.node_done(node, op);
            if Some(i) == last {
                ends.hand_over();
            }
        }
        s.barrier.wait();
    }
}
