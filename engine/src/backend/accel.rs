//! The `accel` backend: a stand-in for the NPU or GPU of seeds 001/003, built so that
//! what those systems do can be traced on any machine. It has
//! - its own threads: a driver thread that takes submitted graph splits in order and
//!   computes each through `engine_graph_compute` (backend kind `Accel`) with its own
//!   [`ThreadPool`] (the driver is thread 0), optionally pinned to a CPU set;
//! - its own operator entry point, `engine_accel_op_compute` (like ggml's per-backend
//!   forward functions, seed 002 Table 2), and its own scratch buffer;
//! - a subset of op types ([`supports`]); the others fall back to the CPU;
//! - an optional throttle (`speed` < 1: each op is stretched to `1/speed` times its
//!   compute time by spinning), since it runs on the same CPUs as the CPU backend.
//!
//! Work is asynchronous: [`AccelBackend::submit`] returns at once and the CPU goes on;
//! the [`Fence`] counts finished splits, and a `BACKEND_SYNC` node waits on it.

use core::ffi::c_void;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::engine_abi::{BackendKind, EngineGraph, EngineNode, OpType};

use super::pool::{GraphEntry, PoolConfig, ThreadPool};
use crate::ops::ComputeParams;
use crate::probe::probe_entry;
use crate::sync::{Fence, WaitMode};

/// How long the idle driver polls for the next split before it sleeps: a launch soon
/// after the last one starts within microseconds, as on a GPU stream (a condition
/// variable wake-up alone costs tens of microseconds, more than a small product).
const POLL_BEFORE_SLEEP: Duration = Duration::from_micros(200);

/// Whether the accel backend computes `op`. Like an NPU, it runs the dense linear
/// algebra, element-wise ops, norms, RoPE and KV stores; the attention softmax (kept in
/// floating point on the CPU by llm.npu, seed 001 §3.3), the expert routing (TOP_K,
/// MUL_MAT_ID, SUM_ROWS, DIV, CLAMP, MOE_SUM) and row gathers fall back to the CPU.
pub fn supports(op: OpType) -> bool {
    matches!(
        op,
        OpType::MulMat
            | OpType::Add
            | OpType::Mul
            | OpType::RmsNorm
            | OpType::Rope
            | OpType::Cpy
            | OpType::SwiGlu
            | OpType::GeGlu
            | OpType::Silu
            | OpType::Scale
            | OpType::Tanh
            | OpType::BackendCopy
    )
}

/// How to set up the accel backend.
#[derive(Clone, Debug, PartialEq)]
pub struct AccelConfig {
    /// Threads, the driver included.
    pub n_threads: u32,
    /// CPUs its threads are pinned to (`None`: not pinned).
    pub cpus: Option<Vec<usize>>,
    /// Relative speed in (0, 1]: each op takes `1/speed` times its compute time.
    pub speed: f32,
}

impl Default for AccelConfig {
    fn default() -> Self {
        AccelConfig {
            n_threads: 1,
            cpus: None,
            speed: 1.0,
        }
    }
}

/// What the submitting thread, the driver and the graph probe share.
pub struct AccelShared {
    id: u32,
    pool: ThreadPool,
    /// The graph entry point the driver computes splits through.
    graph_entry: GraphEntry,
    /// Submitted splits (addresses of `EngineGraph`s), oldest first.
    queue: Mutex<VecDeque<usize>>,
    /// Splits submitted so far (what the idle driver polls).
    queued: AtomicU64,
    ready: Condvar,
    fence: Arc<Fence>,
    /// The backend's own scratch (as u64s for alignment).
    work: Mutex<Vec<u64>>,
    shutdown: AtomicBool,
}

impl std::fmt::Debug for AccelShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccelShared")
            .field("id", &self.id)
            .field("pool", &self.pool)
            .finish()
    }
}

impl AccelShared {
    /// Body of the graph probe for this backend: the pool computes the split.
    pub(super) fn run(&self, graph: *const EngineGraph) {
        let work = self.work.lock().unwrap_or_else(|e| e.into_inner());
        self.pool.run(
            graph,
            work.as_ptr() as *mut u8,
            work.len() * 8,
            std::ptr::null(),
        );
    }
}

/// The accel backend.
#[derive(Debug)]
pub struct AccelBackend {
    shared: Arc<AccelShared>,
    driver: Option<JoinHandle<()>>,
}

impl AccelBackend {
    /// Starts the backend (its driver and pool threads) with backend id `id`; the driver
    /// computes splits through `graph_entry`.
    pub fn new(
        id: u32,
        config: &AccelConfig,
        graph_entry: GraphEntry,
    ) -> std::io::Result<AccelBackend> {
        // The accel's threads inherit the pinning from their birth on.
        let _pinned = config.cpus.as_deref().map(InheritedAffinity::set);
        let speed = if config.speed.is_finite() && config.speed > 0.0 {
            config.speed.min(1.0)
        } else {
            1.0
        };
        let pool = ThreadPool::new(PoolConfig {
            n_threads: config.n_threads,
            name: "accel",
            op_entry: engine_accel_op_compute,
            slowdown: 1.0 / speed,
        })?;
        let shared = Arc::new(AccelShared {
            id,
            pool,
            graph_entry,
            queue: Mutex::new(VecDeque::new()),
            queued: AtomicU64::new(0),
            ready: Condvar::new(),
            fence: Arc::new(Fence::new()),
            work: Mutex::new(Vec::new()),
            shutdown: AtomicBool::new(false),
        });
        let driver = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("accel-driver".into())
                .spawn(move || driver_loop(&shared))?
        };
        Ok(AccelBackend {
            shared,
            driver: Some(driver),
        })
    }

    /// Backend id as reported in the graph probe.
    pub fn id(&self) -> u32 {
        self.shared.id
    }

    /// Threads, the driver included.
    pub fn n_threads(&self) -> u32 {
        self.shared.pool.n_threads()
    }

    /// The fence counting finished splits.
    pub fn fence(&self) -> Arc<Fence> {
        self.shared.fence.clone()
    }

    /// Makes the scratch at least `work_bytes`. Only between graphs (nothing pending).
    pub fn reserve(&mut self, work_bytes: usize) {
        debug_assert!(!self.shared.fence.pending(), "resizing scratch in use");
        let words = work_bytes.div_ceil(8) + 8;
        let mut work = self.shared.work.lock().unwrap_or_else(|e| e.into_inner());
        if work.len() < words {
            work.resize(words, 0);
        }
    }

    /// Hands `graph` to the driver and returns at once.
    ///
    /// # Safety
    /// `graph` and its nodes must stay alive and unchanged until the fence shows the
    /// split finished ([`AccelBackend::wait`] or a `BACKEND_SYNC` node).
    pub unsafe fn submit(&self, graph: &EngineGraph) {
        self.shared.fence.submit();
        let mut q = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.push_back(graph as *const EngineGraph as usize);
        self.shared.queued.fetch_add(1, Ordering::Release);
        self.shared.ready.notify_one();
    }

    /// Waits until every submitted split is finished.
    pub fn wait(&self, mode: WaitMode) {
        self.shared.fence.wait_all(mode);
    }
}

impl Drop for AccelBackend {
    fn drop(&mut self) {
        {
            let _q = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.shutdown.store(true, Ordering::Release);
            self.shared.ready.notify_all();
        }
        if let Some(d) = self.driver.take() {
            let _ = d.join();
        }
    }
}

/// The driver: takes submitted splits in order, computes each through the graph probe,
/// then counts it finished.
fn driver_loop(s: &Arc<AccelShared>) {
    let mut taken = 0u64;
    loop {
        let idle_since = Instant::now();
        while s.queued.load(Ordering::Acquire) == taken
            && !s.shutdown.load(Ordering::Acquire)
            && idle_since.elapsed() < POLL_BEFORE_SLEEP
        {
            std::hint::spin_loop();
        }
        let graph = {
            let mut q = s.queue.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(g) = q.pop_front() {
                    break g as *const EngineGraph;
                }
                if s.shutdown.load(Ordering::Acquire) {
                    return;
                }
                q = s.ready.wait(q).unwrap_or_else(|e| e.into_inner());
            }
        };
        taken += 1;
        // SAFETY: `submit`'s contract keeps the graph alive until the fence completes.
        let n_nodes = unsafe { (*graph).n_nodes };
        // SAFETY: as above; `s` is the live shared state the dispatcher casts back.
        unsafe {
            (s.graph_entry)(
                graph,
                s.id,
                BackendKind::Accel as u32,
                n_nodes,
                Arc::as_ptr(s) as *const c_void,
            )
        };
        s.fence.complete();
    }
}

probe_entry! {
    /// Operator level on the accel backend: thread `ith` of `nth` of the accel's pool
    /// computes its share of `node`. `params` is the accel's per-thread compute state.
    fn engine_accel_op_compute(node: *const EngineNode, ith: u32, nth: u32, params: *mut c_void)
        => op_compute_entry
}

/// Body of `engine_accel_op_compute`: the op (as at the CPU's entry point), stretched
/// by the throttle: with slowdown `k` the thread spins until it has used `k` times the
/// CPU time the op took. CPU time, not wall time, so a thread preempted mid-op is not
/// stretched for the time it did not run.
pub(crate) extern "C" fn op_compute_entry(
    node: *const EngineNode,
    ith: u32,
    nth: u32,
    params: *mut c_void,
) {
    // SAFETY: the accel pool passes its own live params.
    let slowdown = unsafe { (*(params as *const ComputeParams)).slowdown };
    if slowdown <= 1.0 {
        crate::ops::op_compute_entry(node, ith, nth, params);
        return;
    }
    let started = thread_cpu_time();
    crate::ops::op_compute_entry(node, ith, nth, params);
    let target = started + (thread_cpu_time().saturating_sub(started)).mul_f32(slowdown);
    while thread_cpu_time() < target {
        std::hint::spin_loop();
    }
}

/// CPU time the calling thread has used.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for clock_gettime to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The calling thread's CPU affinity, set to a CPU list until dropped. Threads spawned
/// meanwhile inherit the set at creation, so they never run elsewhere, not even before
/// their first instruction (a thread that pins itself can be scheduled on another CPU
/// first). Best effort: an invalid set leaves the affinity as it was.
struct InheritedAffinity {
    saved: Option<libc::cpu_set_t>,
}

impl InheritedAffinity {
    fn set(cpus: &[usize]) -> InheritedAffinity {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it for
        // indices below CPU_SETSIZE (checked); sched_{get,set}affinity(0, ...) read or
        // write only the calling thread's mask and the given set.
        unsafe {
            let size = size_of::<libc::cpu_set_t>();
            let mut saved: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, size, &mut saved) != 0 {
                return InheritedAffinity { saved: None };
            }
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &c in cpus {
                if c < libc::CPU_SETSIZE as usize {
                    libc::CPU_SET(c, &mut set);
                }
            }
            let ok = libc::sched_setaffinity(0, size, &set) == 0;
            InheritedAffinity {
                saved: ok.then_some(saved),
            }
        }
    }
}

impl Drop for InheritedAffinity {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            // SAFETY: restores the calling thread's own mask from a set the kernel
            // filled.
            unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), saved) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fall-backs named in the docs really are unsupported, the dense ops supported.
    #[test]
    fn supported_op_subset() {
        for op in [
            OpType::MulMat,
            OpType::RmsNorm,
            OpType::Rope,
            OpType::SwiGlu,
        ] {
            assert!(supports(op), "{op:?}");
        }
        for op in [
            OpType::SoftMax,
            OpType::TopK,
            OpType::MulMatId,
            OpType::GetRows,
            OpType::BackendSync,
        ] {
            assert!(!supports(op), "{op:?}");
        }
    }
}
