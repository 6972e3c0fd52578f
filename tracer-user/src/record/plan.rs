//! The per-target half of a recording: which probe points a target binary has, and how
//! the probes are attached to it. Everything else (maps, counters, the drain loop, the
//! trace file) is the same for every target and lives in [`super::collector`].
//!
//! Today there is one target, profinfer's own engine, whose probe points are exported
//! C-ABI symbols and whose structures the eBPF programs decode with the layout in
//! `common::engine_abi`. A second target (llama.cpp) adds a plan of its own: other
//! symbols, and the layout of its structures written to the probes' maps.

use std::path::{Path, PathBuf};

use aya::Ebpf;
use trace_format::ProbeInfo;

use crate::{
    load::{self, LoadError, OpProbes, UprobeScope},
    probe_points::{self, ProbePointError, ProbePoints},
};

/// What a kind of target needs probed and how.
pub trait ProbePlan {
    /// The binary the probes go on.
    fn binary(&self) -> &Path;

    /// The binary's GNU build-id (hex), for the trace header.
    fn build_id(&self) -> Option<String>;

    /// Attaches the probes of `levels` for the process `pid` (0: every process mapping
    /// the binary). Returns the probe table for the trace header and, when the operator
    /// level is attached, the handle that switches it off and on (QoS, live view).
    ///
    /// # Errors
    /// [`LoadError`] when a program cannot be attached.
    fn attach(
        &self,
        ebpf: &mut Ebpf,
        levels: u32,
        pid: u32,
    ) -> Result<(Vec<ProbeInfo>, Option<OpProbes>), LoadError>;
}

/// The plan for profinfer's engine: its exported probe symbols (`probe_points`).
#[derive(Clone, Debug)]
pub struct EnginePlan {
    exe: PathBuf,
    points: ProbePoints,
}

impl EnginePlan {
    /// Resolves the engine's probe points in `exe`.
    ///
    /// # Errors
    /// [`ProbePointError`] when the binary cannot be read or has no probe symbols (one
    /// line naming the binary and what is missing).
    pub fn resolve(exe: &Path) -> Result<EnginePlan, ProbePointError> {
        Ok(EnginePlan {
            exe: exe.to_path_buf(),
            points: probe_points::resolve(exe)?,
        })
    }
}

impl ProbePlan for EnginePlan {
    fn binary(&self) -> &Path {
        &self.exe
    }

    fn build_id(&self) -> Option<String> {
        self.points.build_id.clone()
    }

    fn attach(
        &self,
        ebpf: &mut Ebpf,
        levels: u32,
        pid: u32,
    ) -> Result<(Vec<ProbeInfo>, Option<OpProbes>), LoadError> {
        // Only the target traps (a held child keeps its per-task events across exec);
        // the in-program tgid filter stays as the second guard.
        load::attach(
            ebpf,
            &self.exe,
            &self.points,
            levels,
            UprobeScope::OneProcess(pid),
        )
    }
}
