//! A fence between two backends: the submitting side counts the jobs it hands to the
//! other backend, the other side counts the ones it has finished, and a wait returns
//! once every submitted job is finished — what `ggml_backend_synchronize` does for a
//! GPU stream. The wait spins or sleeps on a futex ([`WaitMode`]), so the cost of each
//! way of waiting can be measured.

use std::sync::atomic::{AtomicU32, Ordering};

use super::barrier::futex;

/// How a wait on a [`Fence`] passes the time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WaitMode {
    /// Spin on the counter: lowest latency, burns the waiting CPU.
    #[default]
    Spin,
    /// Sleep on a futex until woken: frees the CPU, pays a wake-up.
    Block,
}

impl WaitMode {
    /// The op-param value of a `BACKEND_SYNC` node (`common::engine_abi::SYNC_*`).
    pub fn op_param(self) -> u32 {
        match self {
            WaitMode::Spin => common::engine_abi::SYNC_SPIN,
            WaitMode::Block => common::engine_abi::SYNC_BLOCK,
        }
    }

    /// The mode an op-param value stands for.
    pub fn from_op_param(v: u32) -> WaitMode {
        if v == common::engine_abi::SYNC_BLOCK {
            WaitMode::Block
        } else {
            WaitMode::Spin
        }
    }
}

impl std::str::FromStr for WaitMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "spin" => Ok(WaitMode::Spin),
            "block" => Ok(WaitMode::Block),
            other => Err(format!("`{other}`: the sync mode is `spin` or `block`")),
        }
    }
}

/// Submitted and completed job counts of one backend.
#[derive(Debug, Default)]
pub struct Fence {
    submitted: AtomicU32,
    completed: AtomicU32,
    sleepers: AtomicU32,
}

impl Fence {
    /// A fence with nothing submitted.
    pub fn new() -> Fence {
        Fence::default()
    }

    /// Counts one more submitted job (called by the submitting thread before it hands
    /// the job over).
    pub fn submit(&self) {
        self.submitted.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether a submitted job is not finished yet.
    pub fn pending(&self) -> bool {
        self.completed.load(Ordering::Acquire) != self.submitted.load(Ordering::Relaxed)
    }

    /// Counts one finished job and wakes the waiters (called by the backend that ran
    /// it, after its last write).
    pub fn complete(&self) {
        // SeqCst pairs with the waiter's sleepers increment (see `SpinBarrier::wait`):
        // either this sees the sleeper, or the sleeper's futex_wait sees the new count.
        self.completed.fetch_add(1, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            futex::wake_all(&self.completed);
        }
    }

    /// Waits until every job submitted so far is finished. Only the submitting thread
    /// calls this (it alone increments `submitted`).
    pub fn wait_all(&self, mode: WaitMode) {
        let target = self.submitted.load(Ordering::Relaxed);
        loop {
            // Acquire: pairs with `complete`, so the waiter sees every write of the job.
            let done = self.completed.load(Ordering::Acquire);
            if done == target {
                return;
            }
            match mode {
                WaitMode::Spin => std::hint::spin_loop(),
                WaitMode::Block => {
                    self.sleepers.fetch_add(1, Ordering::SeqCst);
                    if self.completed.load(Ordering::SeqCst) == done {
                        futex::wait(&self.completed, done);
                    }
                    self.sleepers.fetch_sub(1, Ordering::SeqCst);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;

    /// A waiter sees the writes of every job finished before its wait returns, in both
    /// modes, with the finishing thread sometimes slower than the waiter.
    #[test]
    fn wait_returns_after_every_submitted_job_with_its_writes() {
        for mode in [WaitMode::Spin, WaitMode::Block] {
            let fence = Arc::new(Fence::new());
            let data = Arc::new(AtomicU64::new(0));
            let (tx, rx) = std::sync::mpsc::channel::<u64>();
            let worker = {
                let (fence, data) = (fence.clone(), data.clone());
                std::thread::spawn(move || {
                    for v in rx {
                        if v % 7 == 0 {
                            std::thread::sleep(std::time::Duration::from_millis(1));
                        }
                        data.store(v, Ordering::Relaxed);
                        fence.complete();
                    }
                })
            };
            for v in 1..=100u64 {
                fence.submit();
                tx.send(v).expect("worker alive");
                fence.wait_all(mode);
                assert!(!fence.pending());
                assert_eq!(data.load(Ordering::Relaxed), v, "{mode:?}");
            }
            drop(tx);
            worker.join().expect("worker");
        }
    }
}
