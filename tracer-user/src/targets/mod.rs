//! The traced programs, one room each: profinfer's own engine ([`engine`]) and unmodified
//! llama.cpp ([`llama_cpp`]), each a [`plan::ProbePlan`] (which probe points the binary
//! has and how the probes are attached). The recording path (`crate::record`) talks to
//! that trait only; this module chooses the target ([`TargetChoice::plan_for`]).

pub mod engine;
pub mod llama_cpp;
pub mod plan;

use std::path::{Path, PathBuf};

use self::engine::{plan::EnginePlan, points::EngineError};
use self::llama_cpp::{
    build::{GgmlBuild, GgmlBuildError},
    layout::offsets::GivenOffset,
    libraries,
    plan::LlamaCppPlan,
};
use self::plan::ProbePlan;

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

/// Why no probe plan could be made for a binary. Each message is one line.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The binary is not the engine (asked for with [`TargetKind::Engine`]), or cannot be
    /// read.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The llama.cpp build could not be used.
    #[error(transparent)]
    LlamaCpp(#[from] GgmlBuildError),
    /// The binary is neither the engine nor llama.cpp.
    #[error("`{}` is neither profinfer's engine (no engine_* probe symbols) nor llama.cpp: {llama}", exe.display())]
    NotATarget {
        /// The target binary.
        exe: PathBuf,
        /// Why it is not llama.cpp.
        llama: GgmlBuildError,
    },
}

/// What the user said about the target: its kind and, for llama.cpp, where else to look
/// for its libraries and which struct offsets to take as given.
#[derive(Clone, Debug, Default)]
pub struct TargetChoice {
    /// What kind of program the target is.
    pub kind: TargetKind,
    /// Extra files to look for llama.cpp's libraries in (`--lib`).
    pub libs: Vec<PathBuf>,
    /// llama.cpp struct offsets given by the user (`--ggml-offset`).
    pub ggml_offsets: Vec<GivenOffset>,
}

impl TargetChoice {
    /// The plan for `exe` (running as `pid`, if it runs already).
    ///
    /// # Errors
    /// The binary is not of the kind asked for (or, for [`TargetKind::Auto`], of
    /// neither): one line naming it and what is missing.
    pub fn plan_for(&self, exe: &Path, pid: Option<u32>) -> Result<Box<dyn ProbePlan>, PlanError> {
        let llama = || -> Result<Box<dyn ProbePlan>, GgmlBuildError> {
            let files = libraries::candidate_files(exe, pid, &self.libs);
            Ok(Box::new(LlamaCppPlan::new(
                exe,
                GgmlBuild::detect(&files, &self.ggml_offsets)?,
            )))
        };
        match self.kind {
            TargetKind::Engine => Ok(Box::new(EnginePlan::resolve(exe)?)),
            TargetKind::LlamaCpp => Ok(llama()?),
            TargetKind::Auto => match EnginePlan::resolve(exe) {
                Ok(plan) => Ok(Box::new(plan)),
                Err(EngineError::NoProbeSymbols { .. }) => {
                    llama().map_err(|llama| PlanError::NotATarget {
                        exe: exe.to_path_buf(),
                        llama,
                    })
                }
                Err(e) => Err(e.into()),
            },
        }
    }
}
