//! The probe plan for profinfer's own engine: its exported probe symbols
//! ([`super::points`]), attached as [`super::uprobes`] says; its structures are decoded
//! by the eBPF programs with the layout in `common::engine_abi`, fixed at compile time.

use std::path::{Path, PathBuf};

use aya::Ebpf;
use common::{control::DETAIL_EXACT_SPANS, engine_abi::symbols};
use trace_format::{NodeEnds, ProbeInfo, RecordingSettings};

use super::points::{self, EngineError, ProbePoints};
use super::uprobes;
use crate::{
    load::{LoadError, UprobeScope},
    targets::plan::{AttachRequest, Attached, ProbePlan},
};

/// The plan for profinfer's engine: its exported probe symbols.
#[derive(Clone, Debug)]
pub struct EnginePlan {
    exe: PathBuf,
    points: ProbePoints,
}

impl EnginePlan {
    /// Resolves the engine's probe points in `exe`.
    ///
    /// # Errors
    /// [`EngineError`] when the binary cannot be read or has no probe symbols (one line
    /// naming the binary and what is missing).
    pub fn resolve(exe: &Path) -> Result<EnginePlan, EngineError> {
        Ok(EnginePlan {
            exe: exe.to_path_buf(),
            points: points::resolve(exe)?,
        })
    }
}

/// How the engine's node ends were recorded, as the attached probes say: `batched`
/// (`engine_op_times`) or `per-node` (`engine_op_done`); `None` without either (no
/// operator level).
fn node_ends(probes: &[ProbeInfo]) -> Option<NodeEnds> {
    let has = |symbol: &str| probes.iter().any(|p| p.point == symbol);
    if has(symbols::OP_TIMES) {
        Some(NodeEnds::Batched)
    } else if has(symbols::OP_DONE) {
        Some(NodeEnds::PerNode)
    } else {
        None
    }
}

impl ProbePlan for EnginePlan {
    fn sample_classifier(&self) -> crate::samples::SampleClassifier {
        super::sample_ops::classify
    }

    fn binary(&self) -> &Path {
        &self.exe
    }

    fn build_id(&self) -> Option<String> {
        self.points.build_id.clone()
    }

    fn attach(&self, ebpf: &mut Ebpf, request: AttachRequest) -> Result<Attached, LoadError> {
        // Only the target traps (a held child keeps its per-task events across exec);
        // the in-program tgid filter stays as the second guard.
        uprobes::attach(
            ebpf,
            &self.exe,
            &self.points,
            request.levels,
            request.op_detail,
            UprobeScope::OneProcess(request.pid),
        )
    }

    fn op_detail(&self, wanted: u32) -> u32 {
        if self.points.get(symbols::OP_DONE).is_some() {
            wanted
        } else {
            wanted | DETAIL_EXACT_SPANS
        }
    }

    fn settings(&self, probes: &[ProbeInfo], settings: &mut RecordingSettings) {
        settings.target = Some("engine".into());
        settings.node_ends = node_ends(probes);
    }

    fn abi_mismatch(&self, seen: u32) -> Option<String> {
        Some(format!(
            "engine ABI version {seen}, expected {}: structure fields not recorded",
            common::engine_abi::ENGINE_ABI_VERSION
        ))
    }
}
