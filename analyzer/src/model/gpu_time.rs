//! GPU time per node of a GPU split, from the timestamps the GPU wrote between its nodes
//! and the target read back ([`GpuTimestampsEvent`]): llama.cpp's Vulkan backend with
//! `GGML_VK_PERF_LOGGER` writes value 0 before the split's first node and value `i + 1`
//! after node `i`.
//!
//! The values are device ticks. They are taken as nanoseconds (Mesa's lavapipe: a
//! `timestampPeriod` of 1, read from `CLOCK_MONOTONIC`, the trace's clock). When they lie
//! inside the split on the trace's clock they are used as they are; otherwise (a GPU
//! with its own clock) the split's last value is placed where the target read them, so
//! durations stay exact and placement is at most the read's latency late.

use common::event::{GPU_TIMESTAMPS_MAX, GpuTimestampsEvent};

use super::op::GpuTime;

/// The timestamps of the last read during one split.
#[derive(Clone, Debug, Default)]
pub(super) struct SplitTimestamps {
    /// Values by query index (0 where a chunk was lost).
    ticks: Vec<u64>,
    /// When the last chunk was read (the call's return), trace clock.
    read_ns: u64,
}

impl SplitTimestamps {
    /// Adds one chunk; a call's first chunk replaces an earlier call's values.
    pub(super) fn add(&mut self, e: &GpuTimestampsEvent) {
        if e.chunk == 0 {
            self.ticks.clear();
        }
        let total = e.total.min(GPU_TIMESTAMPS_MAX) as usize;
        if self.ticks.len() < total {
            self.ticks.resize(total, 0);
        }
        let first = e.first as usize;
        for (i, &v) in e.valid().iter().enumerate() {
            if let Some(slot) = self.ticks.get_mut(first + i) {
                *slot = v;
            }
        }
        self.read_ns = e.header.ts_ns;
    }

    /// Whether any values were read.
    pub(super) fn is_empty(&self) -> bool {
        self.ticks.len() < 2
    }

    /// What to add to a value to put it on the trace's clock (see the module docs), for
    /// a split that began at `split_start_ns`.
    fn offset(&self, split_start_ns: u64) -> i128 {
        let (first, last) = (self.ticks[0], self.ticks[self.ticks.len() - 1]);
        if first >= split_start_ns && last <= self.read_ns {
            0
        } else {
            i128::from(self.read_ns) - i128::from(last)
        }
    }

    /// The GPU times of a split's recorded nodes, given their indices in graph order
    /// (ascending): node `indices[k]` runs from its value to the next recorded node's
    /// (nodes recorded with it, a fused pair's second, count as its time), the last one
    /// to the split's last value. `None` where a value is missing.
    pub(super) fn node_times(&self, split_start_ns: u64, indices: &[u32]) -> Vec<Option<GpuTime>> {
        if self.is_empty() {
            return vec![None; indices.len()];
        }
        let off = self.offset(split_start_ns);
        let last = self.ticks.len() - 1;
        indices
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                let i = i as usize;
                let end = indices.get(k + 1).map_or(last, |&n| (n as usize).min(last));
                let (a, b) = (*self.ticks.get(i)?, *self.ticks.get(end)?);
                if i >= end || a == 0 || b < a {
                    return None;
                }
                Some(GpuTime {
                    start_ns: u64::try_from(i128::from(a) + off).ok()?,
                    dur_ns: b - a,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::event::{EventHeader, EventKind, GPU_TIMESTAMPS_PER_EVENT};

    fn chunk(first: u32, values: &[u64], total: u32, chunk: u32, read: u64) -> GpuTimestampsEvent {
        let mut e = GpuTimestampsEvent {
            header: EventHeader {
                kind: EventKind::GpuTimestamps as u32,
                ts_ns: read,
                ..EventHeader::default()
            },
            first,
            count: values.len() as u32,
            total,
            chunk,
            ticks: [0; GPU_TIMESTAMPS_PER_EVENT],
        };
        e.ticks[..values.len()].copy_from_slice(values);
        e
    }

    /// Four nodes, the third fused into the second (not recorded): each recorded node
    /// runs to the next recorded one, on the trace's clock when the values are on it.
    #[test]
    fn node_times_span_to_the_next_recorded_node() {
        let mut s = SplitTimestamps::default();
        s.add(&chunk(0, &[1000, 1100, 1300], 5, 0, 2000));
        s.add(&chunk(3, &[1350, 1600], 5, 1, 2000));
        let t = s.node_times(900, &[0, 1, 3]);
        assert_eq!(
            t[0],
            Some(GpuTime {
                start_ns: 1000,
                dur_ns: 100
            })
        );
        assert_eq!(
            t[1],
            Some(GpuTime {
                start_ns: 1100,
                dur_ns: 250
            })
        );
        assert_eq!(
            t[2],
            Some(GpuTime {
                start_ns: 1350,
                dur_ns: 250
            })
        );
    }

    /// A GPU clock of its own: the last value lands where the values were read.
    #[test]
    fn a_foreign_clock_is_placed_at_the_read() {
        let mut s = SplitTimestamps::default();
        s.add(&chunk(0, &[10, 30, 60], 3, 0, 5000));
        let t = s.node_times(4000, &[0, 1]);
        assert_eq!(
            t[0],
            Some(GpuTime {
                start_ns: 4950,
                dur_ns: 20
            })
        );
        assert_eq!(
            t[1],
            Some(GpuTime {
                start_ns: 4970,
                dur_ns: 30
            })
        );
    }

    /// A lost chunk leaves its nodes without a time, not with a wrong one.
    #[test]
    fn a_lost_chunk_gives_no_time() {
        let mut s = SplitTimestamps::default();
        s.add(&chunk(0, &[100, 200], 4, 0, 1000));
        let t = s.node_times(50, &[0, 1, 2]);
        assert_eq!(
            t[0],
            Some(GpuTime {
                start_ns: 100,
                dur_ns: 100
            })
        );
        assert_eq!(t[1], None);
        assert_eq!(t[2], None);
    }
}
