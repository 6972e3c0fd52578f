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
    /// The BPF ring buffers (one per CPU, `common::control::RINGS`), each woken through
    /// its fd.
    Rings(RingSet),
    /// One perf buffer per CPU, polled.
    Perf(Vec<PerfEventArrayBuffer<MapData>>),
}

/// The per-CPU ring buffers and the buffers their records are merged in.
pub struct RingSet {
    fds: Vec<AsyncFd<RingBuf<MapData>>>,
    /// Each ring's records of one drain, back to back.
    bytes: Vec<Vec<u8>>,
    /// Each ring's records of one drain: (time, offset, length) into `bytes`.
    records: Vec<Vec<(u64, u32, u32)>>,
}

/// Offset of every record's time (`EventHeader::ts_ns`, `OpSpanEvent::end_ns`).
const TS_OFFSET: usize = core::mem::offset_of!(common::event::EventHeader, ts_ns);
const _: () = assert!(core::mem::offset_of!(common::event::OpSpanEvent, end_ns) == TS_OFFSET);

impl RingSet {
    /// Hands every available record to `f`, in time order across the rings: each ring is
    /// read out first (its records are in the order its CPU wrote them), then the rings'
    /// records are merged. Drained ring by ring, one CPU's records would otherwise reach
    /// the file a whole drain interval after another's of the same moment, beyond the
    /// analyzer's reordering window whenever the collector was held up (attaching or
    /// detaching probes takes a few hundred ms).
    fn drain(&mut self, f: &mut impl FnMut(&[u8])) -> u64 {
        for ((fd, bytes), records) in self
            .fds
            .iter_mut()
            .zip(&mut self.bytes)
            .zip(&mut self.records)
        {
            bytes.clear();
            records.clear();
            let ring = fd.get_mut();
            while let Some(item) = ring.next() {
                let ts = item
                    .get(TS_OFFSET..TS_OFFSET + 8)
                    .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
                records.push((ts, bytes.len() as u32, item.len() as u32));
                bytes.extend_from_slice(&item);
            }
        }
        // Only the rings that had records take part (on a 2-CPU machine, 2 of the 8).
        let live: Vec<usize> = (0..self.records.len())
            .filter(|&r| !self.records[r].is_empty())
            .collect();
        let mut next = vec![0usize; self.records.len()];
        let mut n = 0;
        loop {
            let mut pick: Option<(usize, u64)> = None;
            for &r in &live {
                if let Some(&(ts, _, _)) = self.records[r].get(next[r])
                    && pick.is_none_or(|(_, best)| ts < best)
                {
                    pick = Some((r, ts));
                }
            }
            let Some((r, _)) = pick else { break };
            let (_, at, len) = self.records[r][next[r]];
            f(&self.bytes[r][at as usize..(at + len) as usize]);
            next[r] += 1;
            n += 1;
        }
        n
    }
}

impl EventSource {
    /// Wraps the ring buffer maps (call inside a tokio runtime context).
    pub fn rings(rings: Vec<RingBuf<MapData>>) -> Result<EventSource, DrainError> {
        let mut fds = Vec::with_capacity(rings.len());
        for ring in rings {
            // SAFETY: the ring buffer owns its map fd, which stays open and unchanged
            // until the `RingBuf` (owned by the `AsyncFd`) is dropped.
            let fd = unsafe { AsyncFd::register(ring) }.map_err(|e| DrainError::RegisterRing {
                source: std::io::Error::from(e),
            })?;
            fds.push(fd);
        }
        let n = fds.len();
        Ok(EventSource::Rings(RingSet {
            fds,
            bytes: vec![Vec::new(); n],
            records: vec![Vec::new(); n],
        }))
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
            EventSource::Rings(set) => {
                std::future::poll_fn(|cx| {
                    for fd in set.fds.iter_mut() {
                        if let std::task::Poll::Ready(r) = fd.poll_read_ready_mut(cx) {
                            if let Ok(mut guard) = r {
                                guard.clear_ready();
                            }
                            return std::task::Poll::Ready(());
                        }
                    }
                    std::task::Poll::Pending
                })
                .await;
            }
            EventSource::Perf(_) => std::future::pending::<()>().await,
        }
    }

    /// Hands every available record to `f`; returns how many.
    pub fn drain(&mut self, mut f: impl FnMut(&[u8])) -> u64 {
        let mut n = 0;
        match self {
            EventSource::Rings(set) => n = set.drain(&mut f),
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
            EventSource::Rings(set) => set
                .fds
                .first()
                .map_or(-1, |fd| fd.get_ref().as_fd().as_raw_fd()),
            EventSource::Perf(b) => b.first().map_or(-1, |b| b.as_raw_fd()),
        }
    }
}
