//! Driving the tracer binary `profinfer`.

use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::paths;
use crate::process;

/// Builds the release `profinfer` binary (and its eBPF programs) and returns its path.
pub fn build_release() -> Result<PathBuf> {
    process::run(process::in_dir("cargo", &paths::repo_root()).args([
        "build",
        "--release",
        "-p",
        "tracer-user",
    ]))?;
    let binary = paths::target_dir().join("release").join("profinfer");
    if !binary.is_file() {
        bail!(
            "`cargo build --release -p tracer-user` did not produce {}",
            binary.display()
        );
    }
    Ok(binary)
}
