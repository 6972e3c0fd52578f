//! The self-describing header and the footer of a trace (JSON chunks).

use std::collections::BTreeMap;

use common::event::EventKind;
use serde::{Deserialize, Serialize};

/// The traced program.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetInfo {
    /// Path of the executable.
    pub path: String,
    /// GNU build-id of the executable, hex, if it has one.
    pub build_id: Option<String>,
    /// Process id.
    pub pid: u32,
    /// Command line when `record` started it (empty for `--pid`).
    pub args: Vec<String>,
}

/// One attached probe.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeInfo {
    /// Probe id: the [`EventKind`] number its events carry (exit side: same kind with the
    /// exit flag).
    pub id: u32,
    /// `uprobe`, `uretprobe` or `tracepoint`.
    pub attach: String,
    /// Symbol or `category:name` of the tracepoint.
    pub point: String,
    /// Level (`token`, `graph`, `op`, `phase`, `sched`).
    pub level: String,
    /// Offset from the symbol the uprobe was attached at (past an `endbr64`, say).
    pub offset: u64,
    /// First instruction at the attach point, as disassembled.
    pub first_insn: String,
    /// Expected cost class (`nop`, `emulated`, `single-step`, `n/a`).
    pub cost_class: String,
}

/// A performance counter the probes read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterInfo {
    /// Name (`task-clock`, `cycles`, ...); index in this list = index in `OpEvent::pmc`.
    pub name: String,
    /// `hardware` or `software`.
    pub source: String,
    /// `perf_event_attr.type`.
    pub perf_type: u32,
    /// `perf_event_attr.config`.
    pub perf_config: u64,
}

/// Size and name of one event kind, so readers can skip kinds they do not know.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventKindInfo {
    /// Kind number.
    pub kind: u32,
    /// Name.
    pub name: String,
    /// Record size in bytes (header included).
    pub size: u32,
}

/// The event kind table of this build of `common`.
pub fn event_kind_table() -> Vec<EventKindInfo> {
    EventKind::ALL
        .iter()
        .map(|k| EventKindInfo {
            kind: *k as u32,
            name: k.name().to_owned(),
            size: k.record_size() as u32,
        })
        .collect()
}

/// Everything needed to interpret the events of a trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceHeader {
    /// Format version (same as the preamble's).
    pub format_version: u32,
    /// Clock of the event timestamps (`CLOCK_MONOTONIC`, from `bpf_ktime_get_ns`).
    pub clock: String,
    /// Add to an event timestamp to get nanoseconds since the Unix epoch.
    pub monotonic_to_wall_offset_ns: i64,
    /// Host name.
    pub host: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Online CPUs.
    pub cpus: u32,
    /// The traced program.
    pub target: TargetInfo,
    /// Attached probes.
    pub probes: Vec<ProbeInfo>,
    /// Counters in `OpEvent::pmc` order.
    pub counters: Vec<CounterInfo>,
    /// Notes about counters (e.g. the hardware fallback), empty if none.
    pub counter_notes: Vec<String>,
    /// Record sizes of every event kind the writer knew.
    pub event_kinds: Vec<EventKindInfo>,
    /// Recording settings (levels, structure, buffer kind and size, QoS...) as stored:
    /// write and read them through [`TraceHeader::recording_settings`] and
    /// [`TraceHeader::set_recording_settings`].
    pub settings: BTreeMap<String, String>,
    /// String table: strings events refer to by index (node names, by first appearance).
    pub strings: Vec<String>,
}

impl TraceHeader {
    /// The recording settings, typed.
    pub fn recording_settings(&self) -> crate::RecordingSettings {
        crate::RecordingSettings::from_table(&self.settings)
    }

    /// Stores `settings` as the header's recording settings.
    pub fn set_recording_settings(&mut self, settings: &crate::RecordingSettings) {
        self.settings = settings.to_table();
    }
}

/// Totals written when recording ends cleanly.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceFooter {
    /// Records the probes tried to emit (all CPUs).
    pub events_produced: u64,
    /// Records written to this file (probe records only, not collector-made ones).
    pub events_written: u64,
    /// Records lost because the buffer was full (all CPUs).
    pub events_lost: u64,
    /// Records produced, per CPU.
    pub produced_per_cpu: Vec<u64>,
    /// Records lost, per CPU.
    pub lost_per_cpu: Vec<u64>,
    /// Records the collector made (QoS switches, loss records, counter openings).
    pub collector_events: u64,
    /// Why recording ended (`target exited with ...`, `interrupted`, `duration elapsed`).
    pub end_reason: String,
    /// Monotonic time recording ended, ns.
    pub end_ts_ns: u64,
    /// What tracing cost (eBPF program run time, collector CPU); absent in traces
    /// written before it was recorded.
    #[serde(default)]
    pub cost: crate::ProbeCost,
    /// CPU-clock samples the sampler sent (`record --sample`; counted apart from
    /// `events_produced`: they are folded into `SampleCounts` records, never written one
    /// by one). A series has the recording's totals in its last file.
    #[serde(default)]
    pub samples_taken: u64,
    /// Samples that did not fit in the buffer (not in any histogram).
    #[serde(default)]
    pub samples_lost: u64,
}
