//! A reusable spinning barrier between the threads of the CPU backend, the equivalent of
//! `ggml_barrier`: threads meet between graph nodes (and inside nodes that need a
//! hand-off, like the activation conversion of a matrix product).

use std::sync::atomic::{AtomicU32, Ordering};

/// Spins this many times before yielding the CPU while waiting at a barrier.
const SPINS_BEFORE_YIELD: u32 = 1 << 12;

/// A sense-reversing counter barrier for a fixed number of threads.
#[derive(Debug)]
pub struct SpinBarrier {
    n_threads: u32,
    arrived: AtomicU32,
    phase: AtomicU32,
}

impl SpinBarrier {
    /// A barrier for `n_threads` threads.
    pub fn new(n_threads: u32) -> SpinBarrier {
        SpinBarrier {
            n_threads: n_threads.max(1),
            arrived: AtomicU32::new(0),
            phase: AtomicU32::new(0),
        }
    }

    /// Waits until all threads have called `wait` for the current phase.
    pub fn wait(&self) {
        if self.n_threads == 1 {
            return;
        }
        // Acquire: pairs with the Release increment of `phase` by the last thread of the
        // previous phase, so this thread sees every write made before it.
        let phase = self.phase.load(Ordering::Acquire);
        // AcqRel: the last arriving thread must see the writes of all others (Acquire)
        // and publish its own (Release).
        if self.arrived.fetch_add(1, Ordering::AcqRel) == self.n_threads - 1 {
            self.arrived.store(0, Ordering::Relaxed);
            // Release: publishes all writes of this phase to the waiting threads.
            self.phase.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.phase.load(Ordering::Acquire) == phase {
            if spins < SPINS_BEFORE_YIELD {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn every_thread_sees_all_writes_of_the_previous_phase() {
        let n = 4;
        let barrier = Arc::new(SpinBarrier::new(n));
        let counter = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let b = barrier.clone();
                let c = counter.clone();
                std::thread::spawn(move || {
                    for round in 1..=200u64 {
                        c.fetch_add(1, Ordering::Relaxed);
                        b.wait();
                        assert_eq!(c.load(Ordering::Relaxed), round * n as u64);
                        b.wait();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("thread panicked");
        }
    }
}
