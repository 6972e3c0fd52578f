//! The emulated arm64 board of the tests: stock Debian arm64 kernels and busybox-static,
//! downloaded once with `apt-get download` (the foreign architecture added to dpkg) and
//! cached, the static aarch64 engine and profinfer, and llama.cpp cross-built for
//! aarch64 (`llama_cross`, cached); booted by the tests with `qemu-system-aarch64` (`tracer-user/tests/board.rs`).
//!
//! Two kernel lines, both in Debian 12: 6.1 (bookworm's own) and 6.12 (bookworm's newer
//! kernel): the oldest and the newest verifier, ring buffer and uprobe code the tests
//! meet. The newest package of each line is taken the first time and then reused from
//! the cache (no network needed afterwards).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::apt;
use crate::cross::{self, Arch};
use crate::llama_cross;
use crate::paths;
use crate::process;

/// Debian packages the board tests need on the host: the emulator, `cpio` for the
/// initramfs, and qemu-user for the aarch64 unit tests.
pub const HOST_PACKAGES: &[&str] = &["qemu-system-arm", "cpio", "qemu-user-static"];

/// A kernel line: the package name pattern (an `apt-cache search` regex) and a name.
struct KernelLine {
    name: &'static str,
    pattern: &'static str,
}

/// The kernels the board tests boot.
const KERNELS: [KernelLine; 2] = [
    KernelLine {
        name: "6.1",
        pattern: r"^linux-image-6\.1\.0-[0-9]+-arm64$",
    },
    KernelLine {
        name: "6.12",
        pattern: r"^linux-image-6\.12\.[0-9]+\+deb12-arm64$",
    },
];

/// What a guest boots with: the static aarch64 programs, busybox and the kernels.
#[derive(Clone, Debug)]
pub struct GuestKit {
    /// Directory with the static aarch64 `engine` and `profinfer`.
    pub bin_dir: PathBuf,
    /// busybox for arm64.
    pub busybox: PathBuf,
    /// One `vmlinuz` per kernel line, oldest line first.
    pub kernels: Vec<PathBuf>,
}

impl GuestKit {
    /// The newest kernel line's image.
    pub fn newest_kernel(&self) -> Result<&Path> {
        self.kernels
            .last()
            .map(PathBuf::as_path)
            .context("the board kit has no kernel")
    }
}

/// What the board tests get (as `PROFINFER_BOARD_*`).
#[derive(Clone, Debug)]
pub struct BoardKit {
    /// The guest's programs and kernels.
    pub guest: GuestKit,
    /// llama.cpp's `llama-bench` cross-built for aarch64, with its libraries.
    pub llama: PathBuf,
}

impl BoardKit {
    /// The environment the board tests read.
    pub fn env(&self) -> Result<Vec<(&'static str, std::ffi::OsString)>> {
        Ok(vec![
            (
                "PROFINFER_BOARD_BIN",
                self.guest.bin_dir.clone().into_os_string(),
            ),
            (
                "PROFINFER_BOARD_BUSYBOX",
                self.guest.busybox.clone().into_os_string(),
            ),
            (
                "PROFINFER_BOARD_KERNELS",
                std::env::join_paths(&self.guest.kernels).context("kernel paths")?,
            ),
            ("PROFINFER_BOARD_LLAMA", self.llama.clone().into_os_string()),
            (
                "PROFINFER_BOARD_SYSROOT",
                llama_cross::AARCH64_SYSROOT_LIB.into(),
            ),
            ("PROFINFER_REQUIRE_BOARD", "1".into()),
        ])
    }
}

/// `cargo xtask board`: prepares the kit and runs the board tests alone.
pub fn run_tests(steps: &mut crate::steps::Steps) -> Result<()> {
    let kit = steps.run("arm64 board kit", prepare)?;
    let smollm2 = steps.run("real-model fixture", || crate::real_model::SMOLLM2.ensure())?;
    steps.run("board tests", || {
        process::run(
            process::in_dir("cargo", &paths::repo_root())
                .args(["test", "--release", "-p", "tracer-user", "--test", "board"])
                .env(crate::real_model::SMOLLM2_ENV, &smollm2)
                // The board tests are root tests: not being root fails them.
                .env("PROFINFER_REQUIRE_ROOT", "1")
                .envs(kit.env()?),
        )
    })
}

/// Installs the host packages, builds the aarch64 binaries, fetches the guest's kernels
/// and busybox and cross-builds llama-bench (all cached).
pub fn prepare() -> Result<BoardKit> {
    let guest = prepare_guest()?;
    let llama = llama_cross::ensure_llama_bench()?;
    Ok(BoardKit { guest, llama })
}

/// Installs the host packages, builds the aarch64 binaries and fetches the guest's
/// kernels and busybox (cached): what a guest that runs the engine needs.
pub fn prepare_guest() -> Result<GuestKit> {
    apt::install(HOST_PACKAGES)?;
    cross::ensure_target(Arch::Aarch64)?;
    let build = cross::build(Arch::Aarch64)?;
    let cache = paths::user_cache_dir()?.join("board");
    paths::create_dir(&cache)?;
    let mut kernels = Vec::new();
    for line in &KERNELS {
        kernels.push(cached_file(&cache, line.name, "./boot/vmlinuz-*", || {
            newest_package(line.pattern)
        })?);
    }
    let busybox = cached_file(&cache, "busybox", "./bin/busybox", || {
        Ok("busybox-static".to_owned())
    })?;
    Ok(GuestKit {
        bin_dir: build.bin_dir,
        busybox,
        kernels,
    })
}

/// The file `member` (a tar pattern) of an arm64 package, extracted into
/// `cache/<name>/` the first time (the package from `package()`), reused afterwards.
fn cached_file(
    cache: &Path,
    name: &str,
    member: &str,
    package: impl FnOnce() -> Result<String>,
) -> Result<PathBuf> {
    let dir = cache.join(name);
    if let Some(found) = find_member(&dir, member)? {
        eprintln!("    cached: {}", found.display());
        return Ok(found);
    }
    ensure_arm64_dpkg()?;
    let package = package()?;
    let scratch = cache.join(format!("{name}.download"));
    let _ = std::fs::remove_dir_all(&scratch);
    paths::create_dir(&scratch)?;
    process::run(process::in_dir("apt-get", &scratch).args([
        "download",
        "-q",
        &format!("{package}:arm64"),
    ]))?;
    let deb = std::fs::read_dir(&scratch)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "deb"))
        .with_context(|| format!("apt-get download {package}:arm64 gave no .deb"))?;
    let extracted = scratch.join("x");
    paths::create_dir(&extracted)?;
    // Only the one member: a kernel package unpacks to ~400 MB of modules otherwise.
    process::run(Command::new("sh").arg("-c").arg(format!(
        "dpkg-deb --fsys-tarfile '{}' | tar -x -C '{}' --wildcards '{member}'",
        deb.display(),
        extracted.display()
    )))?;
    let got = find_member(&extracted, member)?
        .with_context(|| format!("{} has no {member}", deb.display()))?;
    paths::create_dir(&dir)?;
    let to = dir.join(got.file_name().context("a file name")?);
    std::fs::rename(&got, &to)?;
    std::fs::remove_dir_all(&scratch)?;
    Ok(to)
}

/// The file matching `member` (`./boot/vmlinuz-*`: directory, then a name prefix) in
/// `dir` or its member directory.
fn find_member(dir: &Path, member: &str) -> Result<Option<PathBuf>> {
    let member = member.trim_start_matches("./");
    let (sub, file) = member.rsplit_once('/').unwrap_or(("", member));
    let prefix = file.trim_end_matches('*');
    for d in [dir.to_path_buf(), dir.join(sub)] {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut hits: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.is_file()
                    && p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
            })
            .collect();
        hits.sort();
        if let Some(h) = hits.pop() {
            return Ok(Some(h));
        }
    }
    Ok(None)
}

/// Makes dpkg/apt know arm64 packages (`dpkg --add-architecture arm64`, `apt-get
/// update`) unless they already do.
fn ensure_arm64_dpkg() -> Result<()> {
    let foreign = process::stdout(Command::new("dpkg").arg("--print-foreign-architectures"))?;
    let policy =
        process::stdout(Command::new("apt-cache").args(["policy", "busybox-static:arm64"]))
            .unwrap_or_default();
    if foreign.lines().any(|l| l.trim() == "arm64")
        && policy.contains("Candidate:")
        && !policy.contains("Candidate: (none)")
    {
        return Ok(());
    }
    if !process::is_root() {
        bail!(
            "adding the arm64 package architecture needs root: run `sudo dpkg --add-architecture arm64 && sudo apt-get update`"
        );
    }
    process::run(Command::new("dpkg").args(["--add-architecture", "arm64"]))?;
    process::run(Command::new("apt-get").args(["update", "-q"]))
}

/// The newest package whose name matches `pattern` (by Debian version order).
fn newest_package(pattern: &str) -> Result<String> {
    let found =
        process::stdout(Command::new("apt-cache").args(["search", "--names-only", pattern]))?;
    let mut names: Vec<String> = found
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    if names.is_empty() {
        bail!("no package matches {pattern} (is arm64 in dpkg's architectures?)");
    }
    let older = |a: &str, b: &str| {
        Command::new("dpkg")
            .args(["--compare-versions", &version_of(a), "lt", &version_of(b)])
            .status()
            .is_ok_and(|s| s.success())
    };
    let mut newest = names.swap_remove(0);
    for n in names {
        if older(&newest, &n) {
            newest = n;
        }
    }
    Ok(newest)
}

/// The version part of a kernel package name (`linux-image-6.1.0-56-arm64` → `6.1.0-56`).
fn version_of(package: &str) -> String {
    package
        .trim_start_matches("linux-image-")
        .trim_end_matches("-arm64")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_found_in_the_cache_and_in_an_extraction() {
        let dir = std::env::temp_dir().join(format!("xtask-board-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("boot")).unwrap();
        assert!(find_member(&dir, "./boot/vmlinuz-*").unwrap().is_none());
        std::fs::write(dir.join("boot/vmlinuz-6.1.0-56-arm64"), b"k").unwrap();
        let hit = find_member(&dir, "./boot/vmlinuz-*").unwrap().unwrap();
        assert!(hit.ends_with("boot/vmlinuz-6.1.0-56-arm64"));
        std::fs::write(dir.join("vmlinuz-6.1.0-57-arm64"), b"k").unwrap();
        let cached = find_member(&dir, "./boot/vmlinuz-*").unwrap().unwrap();
        assert_eq!(cached, dir.join("vmlinuz-6.1.0-57-arm64"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn kernel_versions_come_from_package_names() {
        assert_eq!(version_of("linux-image-6.1.0-56-arm64"), "6.1.0-56");
        assert_eq!(
            version_of("linux-image-6.12.117+deb12-arm64"),
            "6.12.117+deb12"
        );
    }
}
