//! Draining the probes' output: the BPF ring buffer (default) or the per-CPU perf
//! buffers (seed 002 Table 5's "P-buf." mode).

use std::os::fd::{AsFd, AsRawFd};

use aya::maps::{
    MapData, PerfEventArray, RingBuf,
    perf::{PerfBufferError, PerfEvent, PerfEventArrayBuffer},
};
use tokio::io::unix::AsyncFd;

/// Why an event source could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum DrainError {
    /// The ring buffer's fd could not be registered with the tokio reactor.
    #[error("registering the ring buffer with tokio failed")]
    RegisterRing {
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// `/sys/devices/system/cpu/online` could not be read or parsed.
    #[error("listing online CPUs failed")]
    OnlineCpus {
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The perf buffer of one CPU could not be opened (size or memory limit).
    #[error("opening the perf buffer of CPU {cpu} ({pages} pages) failed")]
    OpenPerfBuffer {
        /// The CPU.
        cpu: u32,
        /// Pages asked for.
        pages: u32,
        /// aya's error.
        #[source]
        source: PerfBufferError,
    },
}

/// Where events come from.
pub enum EventSource {
    /// The BPF ring buffer, woken through its fd.
    Ring(Box<AsyncFd<RingBuf<MapData>>>),
    /// One perf buffer per CPU, polled.
    Perf(Vec<PerfEventArrayBuffer<MapData>>),
}

impl EventSource {
    /// Wraps the ring buffer map (call inside a tokio runtime context).
    pub fn ring(ring: RingBuf<MapData>) -> Result<EventSource, DrainError> {
        // SAFETY: the ring buffer owns its map fd, which stays open and unchanged until the
        // `RingBuf` (owned by the `AsyncFd`) is dropped.
        let fd = unsafe { AsyncFd::register(ring) }.map_err(|e| DrainError::RegisterRing {
            source: std::io::Error::from(e),
        })?;
        Ok(EventSource::Ring(Box::new(fd)))
    }

    /// Opens a perf buffer of `pages` pages on every online CPU.
    pub fn perf(mut array: PerfEventArray<MapData>, pages: u32) -> Result<EventSource, DrainError> {
        let cpus =
            aya::util::online_cpus().map_err(|(_, source)| DrainError::OnlineCpus { source })?;
        let mut bufs = Vec::new();
        for cpu in cpus {
            bufs.push(
                array
                    .open(cpu, Some(pages as usize))
                    .map_err(|source| DrainError::OpenPerfBuffer { cpu, pages, source })?,
            );
        }
        Ok(EventSource::Perf(bufs))
    }

    /// Waits until the ring buffer may have data (perf mode: returns at once; the caller
    /// polls on its tick).
    pub async fn readable(&mut self) {
        match self {
            EventSource::Ring(fd) => {
                if let Ok(mut guard) = fd.readable_mut().await {
                    guard.clear_ready();
                }
            }
            EventSource::Perf(_) => std::future::pending::<()>().await,
        }
    }

    /// Hands every available record to `f`; returns how many.
    pub fn drain(&mut self, mut f: impl FnMut(&[u8])) -> u64 {
        let mut n = 0;
        match self {
            EventSource::Ring(fd) => {
                let ring = fd.get_mut();
                while let Some(item) = ring.next() {
                    f(&item);
                    n += 1;
                }
            }
            EventSource::Perf(bufs) => {
                let mut joined = Vec::new();
                for buf in bufs.iter_mut() {
                    buf.for_each(|ev| {
                        if let PerfEvent::Sample { head, tail } = ev {
                            if tail.is_empty() {
                                f(head);
                            } else {
                                joined.clear();
                                joined.extend_from_slice(head);
                                joined.extend_from_slice(tail);
                                f(&joined);
                            }
                            n += 1;
                        }
                    });
                }
            }
        }
        n
    }

    /// Raw fd (for diagnostics).
    pub fn raw_fd(&self) -> i32 {
        match self {
            EventSource::Ring(fd) => fd.get_ref().as_fd().as_raw_fd(),
            EventSource::Perf(b) => b.first().map_or(-1, |b| b.as_raw_fd()),
        }
    }
}
