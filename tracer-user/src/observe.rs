//! Watching a recording while it runs: the collector hands every record it writes to a
//! [`RecordObserver`] (the live view's feed), reports its state on every tick, and takes
//! back requests (probe levels the user switched, stop). [`NoObserver`] is the plain
//! `profinfer record`.
//!
//! Probe levels have three sources, combined by [`effective_levels`]: the levels that
//! were attached (the configuration), the levels the user wants on (live view keys) and
//! the QoS controller's operator switch. The user's choice wins: a level the user
//! switched off stays off; QoS only switches the operator level off and on while the
//! user has it on.

use common::control::LEVEL_OP;
use trace_format::TraceHeader;

/// The collector's state at one tick.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CollectorStatus {
    /// Levels whose probes are attached (the configuration).
    pub attached_levels: u32,
    /// Levels the user wants on (starts as `attached_levels`).
    pub user_levels: u32,
    /// Levels in the control map now ([`effective_levels`]).
    pub effective_levels: u32,
    /// Whether a QoS controller runs.
    pub qos_enabled: bool,
    /// Whether the QoS controller currently allows operator probes.
    pub qos_op_on: bool,
    /// QoS switches so far.
    pub qos_switches: u32,
    /// Records the probes tried to emit (sum over CPUs).
    pub produced: u64,
    /// Records lost because the buffer was full (sum over CPUs).
    pub lost: u64,
    /// Probe records drained and written.
    pub written: u64,
    /// Bytes of probe records drained.
    pub bytes_drained: u64,
    /// Ring buffer size in bytes (`None` in perf-buffer mode).
    pub ring_bytes: Option<u64>,
}

impl CollectorStatus {
    /// Records produced but neither drained nor lost: waiting in the buffer.
    pub fn backlog(&self) -> u64 {
        self.produced
            .saturating_sub(self.lost)
            .saturating_sub(self.written)
    }

    /// Estimated ring buffer fill in `[0, 1]`: backlog × mean drained record size over
    /// the ring size. `None` in perf-buffer mode or before any record was drained.
    pub fn ring_fill(&self) -> Option<f64> {
        let ring = self.ring_bytes.filter(|&b| b > 0)?;
        if self.written == 0 {
            return None;
        }
        let mean_record = self.bytes_drained as f64 / self.written as f64;
        Some((self.backlog() as f64 * mean_record / ring as f64).clamp(0.0, 1.0))
    }
}

/// What an observer asks the collector to do after a tick.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObserverReply {
    /// New user levels (bits outside the attached levels are ignored).
    pub user_levels: Option<u32>,
    /// Stop recording: detach the probes, finish the trace, leave the target running.
    pub stop: bool,
}

/// Receives what the collector records.
pub trait RecordObserver {
    /// Whether the collector should compute a [`CollectorStatus`] on every tick (it reads
    /// the per-CPU statistics map). `false` for [`NoObserver`].
    fn is_live(&self) -> bool {
        true
    }

    /// The trace header, before any record.
    fn on_start(&mut self, header: &TraceHeader);

    /// One record as written to the trace (probe records and the collector's own).
    fn on_record(&mut self, record: &[u8]);

    /// A collector tick (every few milliseconds while recording).
    fn on_tick(&mut self, status: &CollectorStatus) -> ObserverReply;
}

/// The observer of a plain recording: ignores everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoObserver;

impl RecordObserver for NoObserver {
    fn is_live(&self) -> bool {
        false
    }

    fn on_start(&mut self, _header: &TraceHeader) {}

    fn on_record(&mut self, _record: &[u8]) {}

    fn on_tick(&mut self, _status: &CollectorStatus) -> ObserverReply {
        ObserverReply::default()
    }
}

/// The levels to write into the control map: attached ∩ user-wanted, minus the operator
/// level while QoS has it off. A user-disabled level stays off whatever QoS decides.
pub fn effective_levels(attached: u32, user: u32, qos_op_on: bool) -> u32 {
    let mut levels = attached & user;
    if !qos_op_on {
        levels &= !LEVEL_OP;
    }
    levels
}

#[cfg(test)]
mod tests {
    use common::control::{LEVEL_ALL, LEVEL_GRAPH, LEVEL_PHASE, LEVEL_SCHED, LEVEL_TOKEN};

    use super::*;

    #[test]
    fn user_off_wins_over_qos_on() {
        assert_eq!(
            effective_levels(LEVEL_ALL, LEVEL_ALL & !LEVEL_OP, true) & LEVEL_OP,
            0
        );
    }

    #[test]
    fn qos_off_removes_only_the_op_level() {
        assert_eq!(
            effective_levels(LEVEL_ALL, LEVEL_ALL, false),
            LEVEL_TOKEN | LEVEL_GRAPH | LEVEL_PHASE | LEVEL_SCHED
        );
        // Both on: everything attached.
        assert_eq!(effective_levels(LEVEL_ALL, LEVEL_ALL, true), LEVEL_ALL);
    }

    #[test]
    fn user_cannot_switch_on_an_unattached_level() {
        let attached = LEVEL_TOKEN | LEVEL_GRAPH;
        assert_eq!(effective_levels(attached, LEVEL_ALL, true), attached);
    }

    #[test]
    fn ring_fill_is_backlog_times_mean_size_over_ring() {
        let s = CollectorStatus {
            produced: 1_100,
            lost: 50,
            written: 1_000,
            bytes_drained: 64_000, // 64 B per record
            ring_bytes: Some(64 * 200),
            ..CollectorStatus::default()
        };
        assert_eq!(s.backlog(), 50);
        // 50 records × 64 B of 12 800 B.
        let fill = s.ring_fill().expect("ring mode");
        assert!((fill - 0.25).abs() < 1e-12, "{fill}");
        let perf = CollectorStatus {
            ring_bytes: None,
            ..s.clone()
        };
        assert_eq!(perf.ring_fill(), None);
        let nothing_yet = CollectorStatus { written: 0, ..s };
        assert_eq!(nothing_yet.ring_fill(), None);
    }
}
