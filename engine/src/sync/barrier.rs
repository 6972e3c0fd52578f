//! A reusable barrier between the threads of the CPU backend, the equivalent of
//! `ggml_barrier`: threads meet between graph nodes (and inside nodes that need a
//! hand-off, like the activation conversion of a matrix product).
//!
//! Waiters spin first (a barrier wait between two nodes is usually microseconds), then
//! sleep on a futex until the last thread arrives — like OpenMP's spin-then-block, and
//! unlike a `sched_yield` loop, which on an oversubscribed machine turns every wait into
//! a storm of context switches (and of scheduler events in a trace).

use std::sync::atomic::{AtomicU32, Ordering};

/// Spins this many times before sleeping while waiting at a barrier.
const SPINS_BEFORE_SLEEP: u32 = 1 << 12;

/// A sense-reversing counter barrier for a fixed number of threads.
#[derive(Debug)]
pub struct SpinBarrier {
    n_threads: u32,
    arrived: AtomicU32,
    phase: AtomicU32,
    /// Threads asleep (or about to sleep) on `phase`.
    sleepers: AtomicU32,
}

impl SpinBarrier {
    /// A barrier for `n_threads` threads.
    pub fn new(n_threads: u32) -> SpinBarrier {
        SpinBarrier {
            n_threads: n_threads.max(1),
            arrived: AtomicU32::new(0),
            phase: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
        }
    }

    /// Waits until all threads have called `wait` for the current phase.
    pub fn wait(&self) {
        if self.n_threads == 1 {
            return;
        }
        // Acquire: pairs with the phase increment of the last thread of the previous
        // phase, so this thread sees every write made before it.
        let phase = self.phase.load(Ordering::Acquire);
        // AcqRel: the last arriving thread must see the writes of all others (Acquire)
        // and publish its own (Release).
        if self.arrived.fetch_add(1, Ordering::AcqRel) == self.n_threads - 1 {
            self.arrived.store(0, Ordering::Relaxed);
            // SeqCst on both sides of the phase/sleepers handshake (Dekker): either this
            // thread sees a sleeper and wakes it, or the sleeper's futex_wait sees the
            // new phase and does not sleep.
            self.phase.fetch_add(1, Ordering::SeqCst);
            if self.sleepers.load(Ordering::SeqCst) > 0 {
                futex::wake_all(&self.phase);
            }
            return;
        }
        let mut spins = 0u32;
        while self.phase.load(Ordering::Acquire) == phase {
            if spins < SPINS_BEFORE_SLEEP {
                std::hint::spin_loop();
                spins += 1;
                continue;
            }
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            // The kernel re-checks `phase == phase` atomically before sleeping.
            futex::wait(&self.phase, phase);
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// The two futex operations the barrier and the fence need.
#[cfg(target_os = "linux")]
pub(crate) mod futex {
    use std::sync::atomic::AtomicU32;

    /// Sleeps while `*word == expected` (returns at once otherwise, or on a wake-up).
    pub fn wait(word: &AtomicU32, expected: u32) {
        // SAFETY: FUTEX_WAIT_PRIVATE on a live, aligned u32 that outlives the call; a null
        // timeout means no timeout. Spurious returns are handled by the caller's loop.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                std::ptr::null::<libc::timespec>(),
            );
        }
    }

    /// Wakes every thread sleeping on `word`.
    pub fn wake_all(word: &AtomicU32) {
        // SAFETY: FUTEX_WAKE_PRIVATE on a live, aligned u32; no memory is written.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                i32::MAX,
            );
        }
    }
}

/// Without futexes: yield instead of sleeping.
#[cfg(not(target_os = "linux"))]
pub(crate) mod futex {
    use std::sync::atomic::AtomicU32;

    pub fn wait(_word: &AtomicU32, _expected: u32) {
        std::thread::yield_now();
    }

    pub fn wake_all(_word: &AtomicU32) {}
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
            .map(|i| {
                let b = barrier.clone();
                let c = counter.clone();
                std::thread::spawn(move || {
                    for round in 1..=200u64 {
                        // Uneven work so that some threads spin out and sleep.
                        if round % 50 == u64::from(i) {
                            std::thread::sleep(std::time::Duration::from_millis(2));
                        }
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
