//! The per-target half of a recording: which probe points a target binary has, and how
//! the probes are attached to it. Everything else (maps, counters, the drain loop, the
//! trace file) is the same for every target and lives in [`super::collector`].
//!
//! Two targets: profinfer's own engine ([`EnginePlan`]), whose probe points are exported
//! C-ABI symbols and whose structures the eBPF programs decode with the layout in
//! `common::engine_abi`; and unmodified llama.cpp ([`LlamaCppPlan`]), whose build is
//! detected and whose struct layout and op numbering are written to the probes' maps.

use std::path::{Path, PathBuf};

use aya::Ebpf;
use common::{control::DETAIL_EXACT_SPANS, engine_abi::symbols};
use trace_format::ProbeInfo;

use super::llama_plan::LlamaCppPlan;
use crate::{
    ggml_build::{self, GgmlBuild, GgmlBuildError},
    ggml_layout::GivenOffset,
    load::{self, LoadError, OpProbes, UprobeScope},
    probe_points::{self, ProbePointError, ProbePoints},
};

/// What a kind of target needs probed and how.
pub trait ProbePlan {
    /// The binary the probes go on.
    fn binary(&self) -> &Path;

    /// The binary's GNU build-id (hex), for the trace header.
    fn build_id(&self) -> Option<String>;

    /// Attaches the probes of `levels` (operator details `op_detail`, `DETAIL_*`) for the
    /// process `pid` (0: every process mapping the binary). Returns the probe table for
    /// the trace header and, when the operator level is attached, the handle that
    /// switches it off and on (QoS, live view).
    ///
    /// # Errors
    /// [`LoadError`] when a program cannot be attached.
    fn attach(
        &self,
        ebpf: &mut Ebpf,
        levels: u32,
        op_detail: u32,
        pid: u32,
    ) -> Result<(Vec<ProbeInfo>, Option<OpProbes>), LoadError>;

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

    /// The check of the first records against the target's struct layout, for a target
    /// whose layout is not fixed at compile time.
    fn layout_check(&self) -> Option<super::layout_check::LayoutCheck> {
        None
    }

    /// Extra settings for the trace header (`target`, the detected build).
    fn settings(&self) -> Vec<(String, String)> {
        vec![("target".into(), "engine".into())]
    }

    /// Whether operator sources can be read from the target's memory as leaf nodes
    /// (`crate::leaves`, which knows the engine's node layout only).
    fn reads_leaves(&self) -> bool {
        true
    }
}

/// Which kind of program a recording targets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TargetKind {
    /// The engine if the executable has its probe symbols, else llama.cpp if it (or a
    /// library it loads) has ggml's CPU backend.
    #[default]
    Auto,
    /// profinfer's engine.
    Engine,
    /// Unmodified llama.cpp (or any program on ggml's CPU backend).
    LlamaCpp,
}

/// The plan for `exe` (running as `pid`, if it runs already), with `libs` named by the
/// user as extra files to look for llama.cpp in and `given` struct offsets.
///
/// # Errors
/// The binary is not of the kind asked for (or, for [`TargetKind::Auto`], of neither):
/// one line naming it and what is missing.
pub fn plan_for(
    kind: TargetKind,
    exe: &Path,
    pid: Option<u32>,
    libs: &[PathBuf],
    given: &[GivenOffset],
) -> Result<Box<dyn ProbePlan>, super::RecordError> {
    let llama = || -> Result<Box<dyn ProbePlan>, GgmlBuildError> {
        let files = ggml_build::candidate_files(exe, pid, libs);
        Ok(Box::new(LlamaCppPlan::new(
            exe,
            GgmlBuild::detect(&files, given)?,
        )))
    };
    match kind {
        TargetKind::Engine => Ok(Box::new(EnginePlan::resolve(exe)?)),
        TargetKind::LlamaCpp => Ok(llama()?),
        TargetKind::Auto => match EnginePlan::resolve(exe) {
            Ok(plan) => Ok(Box::new(plan)),
            Err(ProbePointError::NoProbeSymbols { .. }) => {
                llama().map_err(|llama| super::RecordError::NotATarget {
                    exe: exe.to_path_buf(),
                    llama,
                })
            }
            Err(e) => Err(e.into()),
        },
    }
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
        op_detail: u32,
        pid: u32,
    ) -> Result<(Vec<ProbeInfo>, Option<OpProbes>), LoadError> {
        // Only the target traps (a held child keeps its per-task events across exec);
        // the in-program tgid filter stays as the second guard.
        load::attach(
            ebpf,
            &self.exe,
            &self.points,
            levels,
            op_detail,
            UprobeScope::OneProcess(pid),
        )
    }

    fn op_detail(&self, wanted: u32) -> u32 {
        if self.points.get(symbols::OP_DONE).is_some() {
            wanted
        } else {
            wanted | DETAIL_EXACT_SPANS
        }
    }
}
