//! The per-target half of a recording: which probe points a target binary has, and how
//! the probes are attached to it ([`ProbePlan`]), and what checks its first records
//! ([`RecordCheck`]). Everything else (maps, counters, the drain loop, the trace file) is
//! the same for every target and lives in `crate::record`, which knows the targets only
//! through this trait. The targets themselves are `super::engine` and
//! `super::llama_cpp`; `super` chooses one.

use std::path::Path;

use aya::Ebpf;
use trace_format::{ProbeInfo, RecordingSettings};

use crate::load::{LoadError, OpProbes};

/// The probes a recording asks a target for.
#[derive(Clone, Copy, Debug)]
pub struct AttachRequest {
    /// Probe levels (`LEVEL_*`).
    pub levels: u32,
    /// Operator details (`DETAIL_*`).
    pub op_detail: u32,
    /// The process probed (0: every process mapping the binary).
    pub pid: u32,
}

/// What attaching gave: the probe table for the trace header and, when the operator
/// level is attached, the handle that switches it off and on (QoS, live view).
pub type Attached = (Vec<ProbeInfo>, Option<OpProbes>);

/// What a kind of target needs probed and how.
pub trait ProbePlan {
    /// The binary the probes go on.
    fn binary(&self) -> &Path;

    /// The binary's GNU build-id (hex), for the trace header.
    fn build_id(&self) -> Option<String>;

    /// Attaches the probes `request` asks for.
    ///
    /// # Errors
    /// [`LoadError`] when a program cannot be attached.
    fn attach(&self, ebpf: &mut Ebpf, request: AttachRequest) -> Result<Attached, LoadError>;

    /// The operator details (`DETAIL_*`) this target is recorded with when `wanted` are
    /// asked for (an engine built before `engine_op_done` has both bounds probed
    /// whatever is asked: its spans close at `engine_op_compute`'s return).
    fn op_detail(&self, wanted: u32) -> u32 {
        wanted
    }

    /// The probe levels (`LEVEL_*`) this target is recorded with when `wanted` are asked
    /// for, and, when some cannot be, one line saying which and why.
    fn levels(&self, wanted: u32) -> (u32, Option<String>) {
        (wanted, None)
    }

    /// The check of the first records, for a target whose struct layout is not fixed at
    /// compile time.
    fn record_check(&self) -> Option<Box<dyn RecordCheck>> {
        None
    }

    /// Fills in the target's recording settings (`target`, the detected build, how
    /// node ends are taken), given the probes attached (`probes`, the probe table
    /// [`ProbePlan::attach`] returned).
    fn settings(&self, probes: &[ProbeInfo], settings: &mut RecordingSettings);

    /// Whether operator sources can be read from the target's memory as leaf nodes
    /// (`crate::leaves`, which knows the engine's node layout only).
    fn reads_leaves(&self) -> bool {
        true
    }

    /// The one-line report of probe hits whose target structure had another ABI version
    /// (`seen`) than the probes were built for, for a target whose probes check one.
    fn abi_mismatch(&self, seen: u32) -> Option<String> {
        let _ = seen;
        None
    }

    /// How a CPU-clock sample's function names the operator the thread was in (`--sample`):
    /// this target's operator functions and thread-pool waits.
    fn sample_classifier(&self) -> crate::samples::SampleClassifier;
}

/// A check of a recording's first raw records against what the target's probes must
/// produce; once [`RecordCheck::confirmed`], the collector drops it.
pub trait RecordCheck {
    /// Checks one raw record of event kind `kind`.
    ///
    /// # Errors
    /// [`RecordsRejected`]: the record shows the probes read the target wrongly.
    fn observe(&mut self, kind: u32, record: &[u8]) -> Result<(), RecordsRejected>;

    /// Whether enough records have passed.
    fn confirmed(&self) -> bool;
}

/// Why the first records do not fit the target (the target's own error, one line): the
/// recording stops and its trace is removed.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct RecordsRejected(Box<dyn std::error::Error + Send + Sync>);

impl RecordsRejected {
    /// Wraps the target's error `why`.
    pub fn new(why: impl std::error::Error + Send + Sync + 'static) -> RecordsRejected {
        RecordsRejected(Box::new(why))
    }
}
