//! Why a recording could not start or did not finish cleanly ([`RecordError`]).

use std::path::PathBuf;

use aya::maps::MapError;
use trace_format::TraceError;

use crate::{
    drain::DrainError,
    load::LoadError,
    pmc::PmcError,
    privileges::EnvError,
    target::TargetError,
    targets::{PlanError, plan::RecordsRejected},
};

/// Why a recording could not start or did not finish cleanly. Each message is one line;
/// the `#[source]` chain adds the OS or library detail.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Missing privileges or tracefs (see [`EnvError`]).
    #[error(transparent)]
    Env(#[from] EnvError),
    /// The first records do not fit the target (its plan's [`RecordCheck`]): recording
    /// stopped, trace removed.
    ///
    /// [`RecordCheck`]: crate::targets::plan::RecordCheck
    #[error(transparent)]
    Rejected(#[from] RecordsRejected),
    /// `TargetSpec::Command` with an empty argv.
    #[error("no command given after --")]
    NoCommand,
    /// The target could not be started or found.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// No probe plan for the target binary (not of the kind asked for, or of none).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The probes could not be loaded or attached.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// Counter setup failed.
    #[error(transparent)]
    Pmc(#[from] PmcError),
    /// The event source could not be opened.
    #[error(transparent)]
    Drain(#[from] DrainError),
    /// A field of a tracepoint's format file could not be found in tracefs.
    #[error("cannot read field {field} of tracepoint {tracepoint} from tracefs")]
    TracepointFormat {
        /// `category:name`.
        tracepoint: &'static str,
        /// The field.
        field: &'static str,
    },
    /// The eBPF object lacks a map the collector expects.
    #[error("map {name} is missing from the eBPF object")]
    MapMissing {
        /// The map name.
        name: &'static str,
    },
    /// A map has another type than the collector expects.
    #[error("map {name} is not a {expected}")]
    MapType {
        /// The map name.
        name: &'static str,
        /// The expected type.
        expected: &'static str,
    },
    /// A map operation (type check, read, update) failed.
    #[error("map {name}: operation failed")]
    Map {
        /// The map name.
        name: &'static str,
        /// aya's error.
        #[source]
        source: MapError,
    },
    /// The async runtime or the target watch could not be set up.
    #[error("{what} failed")]
    Runtime {
        /// What was being set up.
        what: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Writing the trace file failed.
    #[error("writing the trace {} failed", path.display())]
    Write {
        /// The trace file.
        path: PathBuf,
        /// The writer's error.
        #[source]
        source: TraceError,
    },
}

/// The [`RecordError::Map`] of map `name`.
pub fn map_err(name: &'static str) -> impl FnOnce(MapError) -> RecordError {
    move |source| RecordError::Map { name, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every message and its whole `source` chain stays on one line.
    #[test]
    fn error_chains_are_one_line() {
        let errors = [
            RecordError::NoCommand,
            RecordError::from(TargetError::NoSuchProcess { pid: 42 }),
            RecordError::from(TargetError::ExeUnreadable {
                pid: 42,
                source: std::io::Error::from_raw_os_error(libc::EACCES),
            }),
            RecordError::TracepointFormat {
                tracepoint: "task:task_newtask",
                field: "child_pid",
            },
            RecordError::MapMissing { name: "STATS" },
            RecordError::Runtime {
                what: "starting the tokio runtime",
                source: std::io::Error::from_raw_os_error(libc::EMFILE),
            },
            RecordError::from(EnvError::TracefsMissing {
                source: std::io::Error::from_raw_os_error(libc::EPERM),
            }),
        ];
        for e in &errors {
            let mut line = e.to_string();
            let mut cur: Option<&dyn std::error::Error> = std::error::Error::source(e);
            while let Some(s) = cur {
                line.push_str(": ");
                line.push_str(&s.to_string());
                cur = s.source();
            }
            assert!(!line.contains('\n'), "{line}");
            assert!(!line.is_empty());
        }
        assert_eq!(errors[1].to_string(), "no process with pid 42");
        // `transparent` keeps the inner error's source (EACCES) in the chain.
        let src = std::error::Error::source(&errors[2]).map(ToString::to_string);
        assert_eq!(
            src,
            Some(std::io::Error::from_raw_os_error(libc::EACCES).to_string())
        );
    }
}
