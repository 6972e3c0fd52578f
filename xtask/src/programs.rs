//! The workspace's programs built with cargo: `engine`, and `profinfer` with its eBPF
//! probes (built by `tracer-user`'s build script).

use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::paths;
use crate::process;

/// `(package, binary)` of the engine.
pub const ENGINE: (&str, &str) = ("engine", "engine");

/// `(package, binary)` of the tracer.
pub const PROFINFER: (&str, &str) = ("tracer-user", "profinfer");

/// Builds the packages of `programs` (`(package, binary)`) in the cargo profile
/// `profile` with one `cargo build` (their binaries and libraries only: no tests, no
/// dev-dependencies) and returns the binaries' paths, in order.
pub fn build(profile: &str, programs: &[(&str, &str)]) -> Result<Vec<PathBuf>> {
    let mut cmd = process::in_dir("cargo", &paths::repo_root());
    cmd.args(["build", "--profile", profile]);
    for (package, _) in programs {
        cmd.args(["-p", package]);
    }
    process::run(&mut cmd)?;
    let dir = paths::target_dir().join(profile);
    programs
        .iter()
        .map(|(_, bin)| {
            let binary = dir.join(bin);
            if !binary.is_file() {
                bail!(
                    "`{}` did not produce {}",
                    process::display(&cmd),
                    binary.display()
                );
            }
            Ok(binary)
        })
        .collect()
}

/// Builds the release `engine` binary and returns its path.
pub fn engine() -> Result<PathBuf> {
    Ok(build("release", &[ENGINE])?.remove(0))
}

/// Builds the release `profinfer` binary (and its eBPF programs) and returns its path.
pub fn profinfer() -> Result<PathBuf> {
    Ok(build("release", &[PROFINFER])?.remove(0))
}
