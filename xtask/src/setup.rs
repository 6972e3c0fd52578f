//! `cargo xtask setup`: installs what building, testing and tracing need on a Debian
//! machine: apt packages, the nightly `rust-src` component, bpf-linker, cargo-fuzz and
//! (with `--oracle`) the llama.cpp oracle venv and the older llama.cpp builds in it.
//!
//! `cargo xtask demo` and `cargo xtask test` install what they need themselves through
//! [`install`] with their own component lists ([`DEMO`], [`TEST`]), so each works on a
//! machine where `cargo xtask setup` never ran.

use std::process::Command;

use anyhow::{Result, bail};

use crate::apt;
use crate::llama_builds;
use crate::llama_vulkan;
use crate::oracle_env;
use crate::process;
use crate::steps::Steps;

/// Debian packages the project needs: graphviz (graph renderings), bpftrace (ad-hoc probes),
/// linux-perf (cross-checking the tracer against `perf`), tmux (the live view's end-to-end test),
/// chromium (analyzer/tests/report_page.rs screenshots `index.html` headless to check the
/// one-page report really renders; `cargo xtask test` requires it).
pub const APT_PACKAGES: &[&str] = &["graphviz", "bpftrace", "linux-perf", "tmux", "chromium"];

/// Debian packages the demo needs: graphviz renders the analysis' DAGs.
pub const DEMO_APT_PACKAGES: &[&str] = &["graphviz"];

/// One thing a task needs installed.
#[derive(Clone, Copy, Debug)]
pub enum Component {
    /// Debian packages (installed with apt-get, through sudo when not root).
    Apt(&'static [&'static str]),
    /// The nightly toolchain's `rust-src` (the eBPF crate builds `core` from source).
    NightlyRustSrc,
    /// bpf-linker (links the eBPF programs).
    BpfLinker,
    /// cargo-fuzz (the GGUF parser's fuzz smoke run).
    CargoFuzz,
    /// The llama.cpp oracle's Python venv.
    OracleVenv,
    /// Older llama.cpp builds (libraries and binding) in the oracle venv, for the tracer's
    /// tests (after [`Component::OracleVenv`]).
    OlderLlamaBuilds,
    /// llama.cpp with its Vulkan backend and Mesa's lavapipe driver, for the tracer's
    /// accelerator tests (after [`Component::OracleVenv`]).
    VulkanLlamaBuild,
}

/// What `cargo xtask demo` needs: the eBPF toolchain to build `profinfer`, graphviz for
/// the analysis' pictures.
pub const DEMO: &[Component] = &[
    Component::Apt(DEMO_APT_PACKAGES),
    Component::NightlyRustSrc,
    Component::BpfLinker,
];

/// What `cargo xtask test` needs: everything.
pub const TEST: &[Component] = &[
    Component::Apt(APT_PACKAGES),
    Component::NightlyRustSrc,
    Component::BpfLinker,
    Component::CargoFuzz,
    Component::OracleVenv,
    Component::OlderLlamaBuilds,
    Component::VulkanLlamaBuild,
];

/// What `cargo xtask setup` installs (the oracle only with `--oracle`).
pub fn run(steps: &mut Steps, oracle: bool) -> Result<()> {
    let wanted: Vec<Component> = TEST
        .iter()
        .copied()
        .filter(|c| {
            oracle
                || !matches!(
                    c,
                    Component::OracleVenv
                        | Component::OlderLlamaBuilds
                        | Component::VulkanLlamaBuild
                )
        })
        .collect();
    install(steps, &wanted)
}

/// Installs every component that is missing, one step each; fast when all are present.
pub fn install(steps: &mut Steps, components: &[Component]) -> Result<()> {
    for component in components {
        match *component {
            Component::Apt(packages) => steps.run("apt packages", || apt::install(packages))?,
            Component::NightlyRustSrc => steps.run("nightly rust-src", nightly_rust_src)?,
            Component::BpfLinker => steps.run("bpf-linker", bpf_linker)?,
            Component::CargoFuzz => steps.run("cargo-fuzz", cargo_fuzz)?,
            Component::OracleVenv => steps.run("llama.cpp oracle venv", oracle_env::ensure)?,
            Component::OlderLlamaBuilds => {
                steps.run("older llama.cpp builds", llama_builds::ensure)?;
            }
            Component::VulkanLlamaBuild => {
                steps.run("llama.cpp with Vulkan (lavapipe)", llama_vulkan::ensure)?;
            }
        }
    }
    Ok(())
}

/// Adds `rust-src` to the nightly toolchain (the eBPF crate builds `core` from source),
/// installing a minimal nightly toolchain first if there is none.
fn nightly_rust_src() -> Result<()> {
    let installed = Command::new("rustup")
        .args(["component", "list", "--installed", "--toolchain", "nightly"])
        .output();
    match installed {
        Err(e) => bail!("cannot run rustup ({e}); the eBPF build needs rustup's nightly toolchain"),
        Ok(o) if !o.status.success() => {
            eprintln!("    no nightly toolchain: installing one (minimal profile, with rust-src)");
            process::run(Command::new("rustup").args([
                "toolchain",
                "install",
                "nightly",
                "--profile",
                "minimal",
                "--component",
                "rust-src",
            ]))
        }
        Ok(o)
            if String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.starts_with("rust-src")) =>
        {
            eprintln!("    rust-src already installed for nightly");
            Ok(())
        }
        Ok(_) => process::run(Command::new("rustup").args([
            "component",
            "add",
            "rust-src",
            "--toolchain",
            "nightly",
        ])),
    }
}

/// Installs cargo-fuzz unless `cargo fuzz --version` already works.
fn cargo_fuzz() -> Result<()> {
    if process::succeeds(Command::new("cargo").args(["fuzz", "--version"])) {
        eprintln!("    cargo-fuzz already installed");
        return Ok(());
    }
    eprintln!("    installing cargo-fuzz (compiles from source, a few minutes)");
    process::run(Command::new("cargo").args(["install", "cargo-fuzz", "--locked"]))
}

/// bpf-linker version that builds here: it links against rustc's own LLVM. Newer
/// versions want a system libLLVM that Debian 12 does not ship (`shared/reference.md`).
pub const BPF_LINKER_VERSION: &str = "0.10.4";

/// Installs bpf-linker (links the eBPF programs of `tracer-ebpf`) unless the pinned
/// version is already on the PATH.
fn bpf_linker() -> Result<()> {
    if let Ok(v) = process::stdout(Command::new("bpf-linker").arg("--version"))
        && v.contains(BPF_LINKER_VERSION)
    {
        eprintln!("    bpf-linker {BPF_LINKER_VERSION} already installed");
        return Ok(());
    }
    eprintln!(
        "    installing bpf-linker {BPF_LINKER_VERSION} (compiles from source, about 1.5 minutes)"
    );
    // bpf-linker's release profile asks for full debug info, which only slows its own
    // build (about 82 s without it on 2 cores; docs/performance.md).
    process::run(
        Command::new("cargo")
            .args(["install", "bpf-linker", "--version", BPF_LINKER_VERSION])
            .env("CARGO_PROFILE_RELEASE_DEBUG", "0"),
    )
}
