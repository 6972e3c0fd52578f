//! Point events and bookkeeping: QoS switches, losses, unpaired enter/exit counts.

use serde::Serialize;

/// The QoS controller changed the enabled probe levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct QosMark {
    /// When, ns.
    pub ts_ns: u64,
    /// `LEVEL_*` bits before.
    pub levels_before: u32,
    /// `LEVEL_*` bits after.
    pub levels_after: u32,
    /// Measured decode rate, milli-tokens/s.
    pub tps_milli: u64,
    /// Configured minimum, milli-tokens/s.
    pub min_tps_milli: u64,
}

/// A sampled window of operator recording began (`traced`) or ended (`--op-windows`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct WindowMark {
    /// When the operator probes were attached (or switched off), ns.
    pub ts_ns: u64,
    /// Whether operators are recorded from here on.
    pub traced: bool,
    /// Decode steps the collector had seen.
    pub decode_steps: u32,
    /// The other end of the time the probes trapped without recording: when they began
    /// to be attached (a window's start, before `ts_ns`) or were detached (its end,
    /// after), ns.
    pub settled_ns: u64,
}

/// Events lost on one CPU (cumulative at `ts_ns`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct LossMark {
    /// When the collector noted it, ns.
    pub ts_ns: u64,
    /// The CPU.
    pub cpu: u32,
    /// Events lost on it so far.
    pub lost: u64,
}

/// Enter/exit records that did not pair up (a thread killed mid-op, losses, a probe
/// level switched on or off in the middle of a call).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Unpaired {
    /// Decode entries without an exit.
    pub token_enter: u64,
    /// Decode exits without an entry.
    pub token_exit: u64,
    /// Graph entries without an exit.
    pub graph_enter: u64,
    /// Graph exits without an entry.
    pub graph_exit: u64,
    /// Operator entries without an exit.
    pub op_enter: u64,
    /// Operator exits without an entry (or for another node).
    pub op_exit: u64,
    /// Phase entries without an exit.
    pub phase_enter: u64,
    /// Phase exits without an entry.
    pub phase_exit: u64,
}

impl Unpaired {
    /// Sum of all counts.
    pub fn total(&self) -> u64 {
        self.token_enter
            + self.token_exit
            + self.graph_enter
            + self.graph_exit
            + self.op_enter
            + self.op_exit
            + self.phase_enter
            + self.phase_exit
    }
}

/// How many events of each level the model applied.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EventCounts {
    /// All events.
    pub total: u64,
    /// Decode records.
    pub decode: u64,
    /// Graph records.
    pub graph: u64,
    /// Operator records.
    pub op: u64,
    /// Phase records.
    pub phase: u64,
    /// Scheduler records (switch, wakeup, task).
    pub sched: u64,
    /// Collector records (QoS, loss, counter openings).
    pub collector: u64,
    /// Records of kinds this analyzer does not know.
    pub unknown: u64,
    /// Operator slices that ran while no graph was open.
    pub ops_outside_graph: u64,
    /// Operator exits after their graph had ended.
    pub ops_after_graph: u64,
    /// GPU timestamps read while no graph was open on the reading thread.
    pub gpu_timestamps_outside_graph: u64,
    /// Threads or nodes ignored because a limit was reached.
    pub over_limit: u64,
    /// Zero-length spans of nodes fused into the node before them (format 4).
    pub fused_spans: u64,
    /// Spans whose node was never described (its description was lost; format 4).
    pub undescribed_spans: u64,
    /// Operator entries of formats 1–3 (an entry and an exit probe per node and thread).
    pub op_entries: u64,
    /// Spans with both bounds probed (format 4, `--exact-spans`).
    pub spans_exact: u64,
    /// Spans whose start is the barrier's release (format 4, the engine's default).
    pub spans_start_at_release: u64,
    /// Spans that end where the thread was seen next (format 4, llama.cpp's default).
    pub spans_end_approx: u64,
}
