//! `cargo xtask dist --target aarch64|x86_64`: one tarball a board user copies over and
//! runs: the static `engine` and `profinfer`, the eBPF object they were built with (also
//! embedded in `profinfer`; shipped for inspection with `bpftool`/`llvm-objdump`), and
//! the board guide (`docs/boards.md`) as its README.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};

use crate::cross::{self, Arch};
use crate::paths;
use crate::process;
use crate::steps::Steps;

/// Builds the tarball for `arch`; returns its path (`out/dist/`).
pub fn run(steps: &mut Steps, arch: Arch) -> Result<PathBuf> {
    steps.run(&format!("rust target {}", arch.musl_triple()), || {
        cross::ensure_target(arch)
    })?;
    let build = steps.run(&format!("static build ({})", arch.musl_triple()), || {
        cross::build(arch)
    })?;
    steps.run("tarball", || {
        let root = paths::repo_root();
        let name = format!(
            "profinfer-{}-{}-linux-musl",
            env!("CARGO_PKG_VERSION"),
            arch.name()
        );
        let dist = paths::out_dir().join("dist");
        let stage = dist.join(&name);
        let _ = std::fs::remove_dir_all(&stage);
        paths::create_dir(&stage.join("bin"))?;
        paths::create_dir(&stage.join("lib"))?;
        for bin in ["engine", "profinfer"] {
            std::fs::copy(build.bin_dir.join(bin), stage.join("bin").join(bin))
                .with_context(|| format!("copy {bin}"))?;
        }
        std::fs::copy(&build.ebpf_object, stage.join("lib").join("tracer-ebpf.o"))
            .context("copy the eBPF object")?;
        std::fs::copy(root.join("docs/boards.md"), stage.join("README.md"))
            .context("copy docs/boards.md")?;
        std::fs::copy(
            root.join("tracer.example.toml"),
            stage.join("tracer.example.toml"),
        )?;
        let tarball = dist.join(format!("{name}.tar.gz"));
        process::run(
            Command::new("tar")
                .arg("-czf")
                .arg(&tarball)
                .arg("-C")
                .arg(&dist)
                .arg(&name),
        )?;
        std::fs::remove_dir_all(&stage)?;
        eprintln!("    {}", tarball.display());
        Ok(tarball)
    })
}
