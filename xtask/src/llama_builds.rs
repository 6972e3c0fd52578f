//! Older llama.cpp builds the tracer is tested on, libraries only: the llama.cpp that
//! llama-cpp-python 0.3.2 (Nov 2024) and 0.3.9 (May 2025) vendor, built from their sdists
//! with CMake and Ninja (`ninja llama`: libllama and the ggml libraries, no programs),
//! cached per user in `~/.cache/profinfer/llama-builds/` (keyed by version and build flags
//! like the oracle's wheels) and installed into the venv as
//! `.venv/llama-builds/llama-cpp-python-<version>/`:
//! - `lib/`: every `libllama*.so*` and `libggml*.so*` of the build (with its symlinks),
//!   built with RUNPATH `$ORIGIN` as llama-cpp-python's own wheel build does, so their
//!   `DT_NEEDED` names resolve without `LD_LIBRARY_PATH`;
//! - `python/llama_cpp/`: that version's pure-Python binding from the sdist.
//!
//! To run that version's binding: `PYTHONPATH=<dir>/python LLAMA_CPP_LIB_PATH=<dir>/lib
//! .venv/bin/python ...` — [`LIB_PATH_ENV`] makes the binding load
//! `$LLAMA_CPP_LIB_PATH/libllama.so` instead of `llama_cpp/lib/libllama.so` (absent here),
//! and `PYTHONPATH` puts that `llama_cpp` before the venv's 0.3.36.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::build_cache::{self, BUILD_INFO, BUILD_LOG, copy_tree, remove_if_present};
use crate::llama_libs::{self, LIBLLAMA};
use crate::oracle_env::llama_cmake_args;
use crate::paths;
use crate::process;
use crate::sdist::{self, BuildTools, CmakeProject, Sdist};

/// The environment variable llama-cpp-python (0.3.2 to 0.3.36, `llama_cpp/llama_cpp.py`)
/// loads `libllama.so` from when it is set.
pub const LIB_PATH_ENV: &str = "LLAMA_CPP_LIB_PATH";

/// One older llama.cpp, as vendored by a llama-cpp-python release.
#[derive(Debug)]
struct OlderBuild {
    /// The llama-cpp-python version.
    version: &'static str,
    /// SHA-256 of its sdist (as PyPI's index lists it).
    sdist_sha256: &'static str,
    /// The llama.cpp commit it vendors (its CHANGELOG.md).
    llama_cpp_commit: &'static str,
}

/// The older builds, oldest first.
const OLDER_BUILDS: [OlderBuild; 2] = [
    OlderBuild {
        version: "0.3.2",
        sdist_sha256: "8fbf246a55a999f45015ed0d48f91b4ae04ae959827fac1cd6ac6ec65aed2e2f",
        llama_cpp_commit: "74d73dc85cc2057446bf63cc37ff649ae7cebd80",
    },
    OlderBuild {
        version: "0.3.9",
        sdist_sha256: "a3a985f558385e2f5de5b663f4e9b0817506d6af98122450142cd98e79216370",
        llama_cpp_commit: "8733e0cf6eefc7c7752297cc22d0836706f4222c",
    },
];

/// CMake flags before [`crate::oracle_env::LLAMA_CMAKE_ARGS`]: a shared release build without the server and
/// curl (nothing that wants the network), and RUNPATH `$ORIGIN` from the start
/// (llama-cpp-python's CMakeLists sets the same on its libraries), so the libraries find
/// each other once copied into one directory. OpenMP stays at llama.cpp's default (on).
const EXTRA_CMAKE_ARGS: &[&str] = &[
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=ON",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_CURL=OFF",
    "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
    "-DCMAKE_INSTALL_RPATH=$ORIGIN",
];

/// The Ninja target: libllama, which depends on every ggml library.
const NINJA_TARGET: &str = "llama";

impl OlderBuild {
    /// `llama-cpp-python-0.3.2`: the install directory's name and the cache entry's prefix.
    fn name(&self) -> String {
        format!("llama-cpp-python-{}", self.version)
    }

    /// The sdist's file name.
    fn sdist_file(&self) -> String {
        format!("llama_cpp_python-{}.tar.gz", self.version)
    }

    /// Everything that determines the build's content, one item per line.
    fn build_info(&self) -> String {
        format!(
            "llama-cpp-python=={} (sdist sha256 {}, llama.cpp {})\nCMAKE_ARGS={}\nninja target={NINJA_TARGET}\n",
            self.version,
            self.sdist_sha256,
            self.llama_cpp_commit,
            llama_cmake_args(EXTRA_CMAKE_ARGS).join(" ")
        )
    }

    /// The cache entry of the build described by `build_info`.
    fn cache_entry(&self, build_info: &str) -> Result<PathBuf> {
        let cache = paths::user_cache_dir()?.join("llama-builds");
        Ok(build_cache::entry(&cache, &self.name(), build_info))
    }
}

/// The installed build of llama-cpp-python `version` (`.venv/llama-builds/
/// llama-cpp-python-<version>/`, after [`ensure`]): run its binding with
/// `PYTHONPATH=<dir>/python` and `LLAMA_CPP_LIB_PATH=<dir>/lib` ([`LIB_PATH_ENV`]).
pub fn install_dir(version: &str) -> PathBuf {
    paths::venv_dir()
        .join("llama-builds")
        .join(format!("llama-cpp-python-{version}"))
}

/// Builds the older llama.cpp libraries the cache does not have (0.5 to 3 minutes each on
/// 2 cores, docs/llama-cpp.md) and installs them into the venv (which
/// [`crate::oracle_env::ensure`] made). Fast when everything is present.
pub fn ensure() -> Result<()> {
    if !paths::venv_python().exists() {
        bail!(
            "{} is missing: the older llama.cpp builds are installed into the oracle venv, set \
             up first (`cargo xtask setup --oracle`)",
            paths::venv_python().display()
        );
    }
    let scratch = paths::user_cache_dir()?
        .join("llama-builds")
        .join("scratch");
    let mut tools = None;
    for build in &OLDER_BUILDS {
        let build_info = build.build_info();
        let entry = ensure_build(build, &build_info, &scratch, &mut tools)?;
        install(build, &build_info, &entry)?;
    }
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch)
            .with_context(|| format!("cannot remove {}", scratch.display()))?;
    }
    Ok(())
}

/// Returns the cache entry of `build`, building it if it is missing.
fn ensure_build(
    build: &OlderBuild,
    build_info: &str,
    scratch: &Path,
    tools: &mut Option<BuildTools>,
) -> Result<PathBuf> {
    let entry = build.cache_entry(build_info)?;
    if build_cache::built_with(&entry, build_info) && entry.join("lib").join(LIBLLAMA).is_file() {
        eprintln!("    cached: {}", entry.display());
        return Ok(entry);
    }
    let partial = build_cache::start(&entry)?;
    let tools = match tools {
        Some(tools) => tools,
        None => {
            remove_if_present(scratch)?;
            paths::create_dir(scratch)?;
            tools.insert(sdist::build_tools(&scratch.join("tools"))?)
        }
    };
    let work = partial.join("work");
    paths::create_dir(&work)?;
    let log_path = partial.join(BUILD_LOG);
    eprintln!(
        "    building llama-cpp-python {}'s llama.cpp libraries from source (0.5 to 3 \
         minutes on 2 cores; once per machine; cached in {})",
        build.version,
        entry.display()
    );
    eprintln!("    build log: {}", log_path.display());
    let file = build.sdist_file();
    let project = CmakeProject {
        sdist: Sdist {
            project: "llama-cpp-python",
            file: &file,
            sha256: build.sdist_sha256,
        },
        members: &["vendor/llama.cpp", "llama_cpp"],
        dir: "vendor/llama.cpp",
        cmake_args: &llama_cmake_args(EXTRA_CMAKE_ARGS),
        targets: &[NINJA_TARGET],
        log: Some(&log_path),
        ninja_on_path: false,
    };
    let build_dir = project.build(&work, tools)?;
    let src = work.join(project.sdist.top_dir());
    let lib = partial.join("lib");
    paths::create_dir(&lib)?;
    let copied = llama_libs::collect_libraries(&build_dir, &lib)?;
    eprintln!("    libraries: {}", copied.join(", "));
    llama_libs::check_libraries(&lib)?;
    copy_tree(
        &src.join("llama_cpp"),
        &partial.join("python").join("llama_cpp"),
    )?;
    build_cache::finish(&partial, &entry, build_info)?;
    Ok(entry)
}

/// Installs the cached `entry` of `build` into the venv unless the installed copy records
/// the same build, then checks that its binding loads its libraries.
fn install(build: &OlderBuild, build_info: &str, entry: &Path) -> Result<()> {
    let dest = install_dir(build.version);
    if build_cache::built_with(&dest, build_info) && dest.join("lib").join(LIBLLAMA).is_file() {
        eprintln!("    {} is up to date", dest.display());
        return Ok(());
    }
    remove_if_present(&dest)?;
    copy_tree(&entry.join("lib"), &dest.join("lib"))?;
    copy_tree(&entry.join("python"), &dest.join("python"))?;
    std::fs::write(dest.join("README"), readme(build, &dest))
        .with_context(|| format!("cannot write {}", dest.join("README").display()))?;
    check_binding(build, &dest)?;
    // Written last: a half-finished install has no build-info and is redone.
    std::fs::write(dest.join(BUILD_INFO), build_info)
        .with_context(|| format!("cannot write {}", dest.join(BUILD_INFO).display()))
}

/// The README of an installed build: what it is and which environment runs its binding.
fn readme(build: &OlderBuild, dest: &Path) -> String {
    format!(
        "llama-cpp-python {} (llama.cpp {}): llama.cpp's libraries only (lib/) and the \
         pure-Python binding (python/llama_cpp/), built by `cargo xtask setup --oracle`.\n\
         Run the binding with: PYTHONPATH={dir}/python {LIB_PATH_ENV}={dir}/lib .venv/bin/python ...\n\
         ({LIB_PATH_ENV} makes it load lib/{LIBLLAMA}; the ggml libraries are found through its RUNPATH $ORIGIN.)\n",
        build.version,
        build.llama_cpp_commit,
        dir = dest.display()
    )
}

/// Imports the installed binding with the venv's Python and checks that it is this
/// version's and that every llama.cpp library mapped comes from its `lib/`.
fn check_binding(build: &OlderBuild, dest: &Path) -> Result<()> {
    let script = format!(
        "import os, llama_cpp\n\
         from llama_cpp import llama_cpp as C\n\
         lib = os.path.realpath(os.environ['{LIB_PATH_ENV}'])\n\
         python = os.path.realpath(os.environ['PYTHONPATH'])\n\
         assert llama_cpp.__version__ == '{version}', f'imported llama_cpp {{llama_cpp.__version__}}'\n\
         assert os.path.realpath(llama_cpp.__file__).startswith(python + '/'), f'imported {{llama_cpp.__file__}}'\n\
         mapped = {{l.split(maxsplit=5)[5].strip() for l in open('/proc/self/maps') if len(l.split(maxsplit=5)) == 6}}\n\
         ours = sorted(p for p in mapped if os.path.basename(p).startswith(('libllama', 'libggml')))\n\
         stray = [p for p in ours if os.path.dirname(os.path.realpath(p)) != lib]\n\
         assert not stray, f'libraries from elsewhere: {{stray}}'\n\
         assert os.path.dirname(os.path.realpath(C._lib._name)) == lib, C._lib._name\n\
         print('    llama_cpp', llama_cpp.__version__, 'loads', ', '.join(os.path.basename(p) for p in ours))\n",
        version = build.version
    );
    process::run(
        Command::new(paths::venv_python())
            .arg("-c")
            .arg(script)
            .env("PYTHONPATH", dest.join("python"))
            .env(LIB_PATH_ENV, dest.join("lib"))
            .env_remove("LD_LIBRARY_PATH"),
    )
    .with_context(|| {
        format!(
            "the llama-cpp-python {} binding in {} does not load its own libraries",
            build.version,
            dest.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_entry_depends_on_version_and_flags() {
        let [old, newer] = &OLDER_BUILDS;
        let info = old.build_info();
        assert!(
            info.contains("-DGGML_AVX2=ON") && info.contains("$ORIGIN"),
            "{info}"
        );
        let a = old.cache_entry(&info).expect("dir");
        let b = old
            .cache_entry(&info.replace("-DGGML_AVX2=ON", "-DGGML_AVX2=OFF"))
            .expect("dir");
        assert_ne!(a, b);
        assert!(
            a.to_string_lossy()
                .contains("llama-builds/llama-cpp-python-0.3.2-")
        );
        assert_ne!(a, newer.cache_entry(&newer.build_info()).expect("dir"));
    }
}
