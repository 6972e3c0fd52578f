//! Draining the probes' output: the BPF ring buffer (default) or the per-CPU perf
//! buffers (seed 002 Table 5's "P-buf." mode).

use std::os::fd::{AsFd, AsRawFd};

use anyhow::Context as _;
use aya::maps::{
    MapData, PerfEventArray, RingBuf,
    perf::{PerfEvent, PerfEventArrayBuffer},
};
use tokio::io::unix::AsyncFd;

/// Where events come from.
pub enum EventSource {
    /// The BPF ring buffer, woken through its fd.
    Ring(Box<AsyncFd<RingBuf<MapData>>>),
    /// One perf buffer per CPU, polled.
    Perf(Vec<PerfEventArrayBuffer<MapData>>),
}

impl EventSource {
    /// Wraps the ring buffer map (call inside a tokio runtime context).
    pub fn ring(ring: RingBuf<MapData>) -> anyhow::Result<EventSource> {
        // SAFETY: the ring buffer owns its map fd, which stays open and unchanged until the
        // `RingBuf` (owned by the `AsyncFd`) is dropped.
        let fd = unsafe { AsyncFd::register(ring) }
            .map_err(std::io::Error::from)
            .context("registering the ring buffer with tokio")?;
        Ok(EventSource::Ring(Box::new(fd)))
    }

    /// Opens a perf buffer of `pages` pages on every online CPU.
    pub fn perf(mut array: PerfEventArray<MapData>, pages: u32) -> anyhow::Result<EventSource> {
        let cpus = aya::util::online_cpus()
            .map_err(|(_, e)| e)
            .context("listing online CPUs")?;
        let mut bufs = Vec::new();
        for cpu in cpus {
            bufs.push(
                array
                    .open(cpu, Some(pages as usize))
                    .with_context(|| format!("opening the perf buffer of CPU {cpu}"))?,
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
