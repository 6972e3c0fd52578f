//! Static builds for boards: `engine` and `profinfer` for `<arch>-unknown-linux-musl`,
//! linked by rust-lld (shipped with the Rust toolchain: no cross compiler, no libc of
//! the board needed), with the eBPF programs built for the same architecture (aya-build
//! passes `bpf_target_arch` from the user-space target: the arm64 programs read arm64's
//! `pt_regs`).
//!
//! OpenHarmony is the same route: its libc is musl and its kernel is Linux, and the
//! `aarch64-unknown-linux-ohos` standard library cannot be downloaded here
//! (`docs/boards.md`).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

use crate::paths;
use crate::process;

/// A board architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// 64-bit Arm (Cortex-A55/A76 boards, OpenHarmony devices).
    Aarch64,
    /// x86-64.
    X86_64,
}

impl Arch {
    /// Parses `aarch64`/`arm64` or `x86_64`/`amd64`.
    pub fn parse(s: &str) -> Result<Arch> {
        match s {
            "aarch64" | "arm64" => Ok(Arch::Aarch64),
            "x86_64" | "x86-64" | "amd64" => Ok(Arch::X86_64),
            _ => bail!("unknown target `{s}` (known: aarch64, x86_64)"),
        }
    }

    /// The architecture's name in file names (`aarch64`).
    pub fn name(self) -> &'static str {
        match self {
            Arch::Aarch64 => "aarch64",
            Arch::X86_64 => "x86_64",
        }
    }

    /// The static Rust target.
    pub fn musl_triple(self) -> &'static str {
        match self {
            Arch::Aarch64 => "aarch64-unknown-linux-musl",
            Arch::X86_64 => "x86_64-unknown-linux-musl",
        }
    }
}

/// Adds the static target's standard library with rustup (fast when present).
pub fn ensure_target(arch: Arch) -> Result<()> {
    let installed = process::stdout(std::process::Command::new("rustup").args([
        "target",
        "list",
        "--installed",
    ]))?;
    if installed.lines().any(|l| l.trim() == arch.musl_triple()) {
        eprintln!("    {} already installed", arch.musl_triple());
        return Ok(());
    }
    process::run(std::process::Command::new("rustup").args(["target", "add", arch.musl_triple()]))
}

/// The static binaries of one build.
#[derive(Clone, Debug)]
pub struct StaticBuild {
    /// Directory holding `engine` and `profinfer`.
    pub bin_dir: PathBuf,
    /// The eBPF object the `profinfer` binary embeds (built for `arch`).
    pub ebpf_object: PathBuf,
}

/// Largest size of [`target_dir`] before it is emptied: dependencies that a lockfile no
/// longer names stay in it otherwise, build after build.
const TARGET_DIR_LIMIT_BYTES: u64 = 8 << 30;

/// Cargo's target directory of the static builds and of the tests under QEMU:
/// `$CARGO_TARGET_DIR` when set, else one per checkout path under `cross-target` in the
/// user cache, so a clean clone made again at the same path (as CI makes them) compiles
/// only the workspace's own crates (its files are newer than the artifacts) and reuses
/// the compiled dependencies. Not one directory for every checkout: cargo judges a path
/// crate fresh by file times, and a build from /work/main after one from /tmp/ci
/// recompiled only one crate, so an older tree could get another tree's binaries.
pub fn target_dir() -> Result<PathBuf> {
    if std::env::var_os("CARGO_TARGET_DIR").is_some() {
        return Ok(paths::target_dir());
    }
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    paths::repo_root().hash(&mut h);
    Ok(cross_cache()?.join(format!("{:016x}", h.finish())))
}

/// The parent of every checkout's [`target_dir`].
fn cross_cache() -> Result<PathBuf> {
    Ok(paths::user_cache_dir()?.join("cross-target"))
}

/// [`target_dir`], with every checkout's directory emptied first when together they have
/// grown past [`TARGET_DIR_LIMIT_BYTES`]: only before a build, never between a build and
/// the tests that use its binaries.
fn target_dir_for_build() -> Result<PathBuf> {
    let target = target_dir()?;
    if std::env::var_os("CARGO_TARGET_DIR").is_some() {
        return Ok(target);
    }
    let dir = cross_cache()?;
    let size = dir_bytes(&dir);
    if size > TARGET_DIR_LIMIT_BYTES {
        eprintln!(
            "    {} holds {} MiB: emptied (dependencies are compiled again)",
            dir.display(),
            size >> 20
        );
        std::fs::remove_dir_all(&dir).with_context(|| format!("emptying {}", dir.display()))?;
    }
    Ok(target)
}

/// Bytes of the files under `dir` (0 if it does not exist).
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// Builds `engine` and `profinfer` statically for `arch` (release profile; without LTO
/// under `cargo xtask test`, which turns it off for every build it starts, see
/// [`crate::test::build_tests_without_lto`]).
pub fn build(arch: Arch) -> Result<StaticBuild> {
    let triple = arch.musl_triple();
    let target_dir = target_dir_for_build()?;
    process::run(
        process::in_dir("cargo", &paths::repo_root())
            .args(["build", "--release", "-p", "engine", "-p", "tracer-user"])
            .args(["--target", triple])
            .arg("--target-dir")
            .arg(&target_dir)
            // rust-lld links the musl targets on their own (self-contained crt objects
            // and libc come with the target's standard library).
            .args(["--config", &format!("target.{triple}.linker=\"rust-lld\"")]),
    )?;
    let bin_dir = target_dir.join(triple).join("release");
    for bin in ["engine", "profinfer"] {
        if !bin_dir.join(bin).is_file() {
            bail!(
                "the {triple} build did not produce {}",
                bin_dir.join(bin).display()
            );
        }
    }
    let ebpf_object = ebpf_object(&bin_dir)?;
    Ok(StaticBuild {
        bin_dir,
        ebpf_object,
    })
}

/// The eBPF object aya-build wrote for this build (`build/tracer-user-*/out/tracer-ebpf`,
/// the newest if several).
fn ebpf_object(bin_dir: &std::path::Path) -> Result<PathBuf> {
    let build = bin_dir.join("build");
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(&build)?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("tracer-user-"))
        .map(|e| e.path().join("out").join("tracer-ebpf"))
        .filter(|p| p.is_file())
        .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
        .collect();
    found.sort();
    match found.pop() {
        Some((_, p)) => Ok(p),
        None => bail!("no eBPF object (tracer-ebpf) under {}", build.display()),
    }
}

/// One run of tests built for `arch` (static musl) under QEMU's user-mode emulation of
/// `cpu` (`qemu-aarch64-static -cpu max`: NEON, dotprod, i8mm): `selection` is what
/// follows `cargo test --release --target T` (`-p engine-kernels`, or `-p engine --test
/// oracle -- greedy`), `env` what the tests read. Programs the tests start (the engine
/// binary) go through `PROFINFER_ENGINE_RUNNER`: no binfmt handler runs them here.
pub fn test_under_qemu(
    arch: Arch,
    selection: &[&str],
    cpu: &str,
    env: &[(&str, &str)],
) -> Result<()> {
    let triple = arch.musl_triple();
    let var = triple.to_uppercase().replace('-', "_");
    let runner = format!("qemu-{}-static -cpu {cpu}", arch.name());
    let mut cmd = process::in_dir("cargo", &paths::repo_root());
    cmd.args(["test", "--release", "--target", triple])
        .arg("--target-dir")
        .arg(target_dir()?)
        .args(selection)
        .env(format!("CARGO_TARGET_{var}_LINKER"), "rust-lld")
        .env(format!("CARGO_TARGET_{var}_RUNNER"), &runner)
        .env("PROFINFER_ENGINE_RUNNER", &runner)
        .envs(env.iter().copied());
    process::run(&mut cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_names_parse() {
        assert_eq!(Arch::parse("arm64").unwrap(), Arch::Aarch64);
        assert_eq!(
            Arch::parse("x86_64").unwrap().musl_triple(),
            "x86_64-unknown-linux-musl"
        );
        assert!(Arch::parse("riscv64").is_err());
    }
}
