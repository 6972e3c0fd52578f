//! An emulated arm64 board: a stock Debian arm64 kernel booted by `qemu-system-aarch64`
//! (TCG, `-M virt`) with a busybox initramfs that runs a list of commands and sends the
//! files they wrote back over the serial console (base64 between markers).
//!
//! QEMU's exit code says nothing about the guest (0 even after a kernel panic): every
//! outcome is read from markers the guest's `/init` prints, under a time limit.

use std::{
    collections::HashMap,
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use base64::Engine as _;

/// What `cargo xtask test` prepared for the board tests (`PROFINFER_BOARD_*`).
pub struct BoardKit {
    /// The aarch64 `engine` and `profinfer` (static musl builds).
    pub engine: PathBuf,
    /// See `engine`.
    pub profinfer: PathBuf,
    /// busybox-static for arm64.
    pub busybox: PathBuf,
    /// Kernel images (`vmlinuz-*`), one boot each.
    pub kernels: Vec<PathBuf>,
    /// llama.cpp's `llama-bench` for aarch64 and its libraries (one directory), and the
    /// aarch64 glibc/libstdc++ directory it runs with.
    pub llama: Option<(PathBuf, PathBuf)>,
}

impl BoardKit {
    /// The kit from the environment, or `None` after a loud banner (fatal with
    /// `PROFINFER_REQUIRE_BOARD=1`, which `cargo xtask test` sets).
    pub fn from_env() -> Option<BoardKit> {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let (Some(bin), Some(busybox), Some(kernels)) = (
            var("PROFINFER_BOARD_BIN"),
            var("PROFINFER_BOARD_BUSYBOX"),
            var("PROFINFER_BOARD_KERNELS"),
        ) else {
            crate::support::skip_unless_required(
                "PROFINFER_REQUIRE_BOARD",
                "the arm64 board kit is not prepared (PROFINFER_BOARD_BIN/_BUSYBOX/_KERNELS)",
                "run `cargo xtask test` or `cargo xtask board`, which prepare it",
            );
            return None;
        };
        let bin = PathBuf::from(bin);
        let llama = var("PROFINFER_BOARD_LLAMA")
            .zip(var("PROFINFER_BOARD_SYSROOT"))
            .map(|(l, s)| (PathBuf::from(l), PathBuf::from(s)));
        Some(BoardKit {
            engine: bin.join("engine"),
            profinfer: bin.join("profinfer"),
            busybox: PathBuf::from(busybox),
            kernels: std::env::split_paths(&kernels).collect(),
            llama,
        })
    }
}

/// One command the guest runs, and the files it writes that come back.
pub struct GuestStep {
    /// Name in markers and messages.
    pub name: String,
    /// Shell command line (run by busybox `sh` in `/tmp`).
    pub command: String,
    /// Files (guest paths) sent back after the step.
    pub outputs: Vec<String>,
}

/// What came back from one boot.
pub struct GuestRun {
    /// The whole serial console.
    pub console: String,
    /// Exit code per step name (absent: the step never finished).
    pub exit_codes: HashMap<String, i32>,
    /// Files sent back, by guest path.
    pub files: HashMap<String, Vec<u8>>,
    /// Wall time of the boot.
    pub elapsed: Duration,
}

impl GuestRun {
    /// Asserts that `step` finished with exit code 0, showing the console otherwise.
    pub fn assert_step_ok(&self, step: &str) {
        match self.exit_codes.get(step) {
            Some(0) => {}
            other => panic!(
                "guest step `{step}` ended with {other:?}; console:\n{}",
                self.console
            ),
        }
    }

    /// The file the guest wrote at `guest_path`, written to `host_path`.
    pub fn save(&self, guest_path: &str, host_path: &Path) -> PathBuf {
        let data = self.files.get(guest_path).unwrap_or_else(|| {
            panic!("the guest sent no {guest_path}; console:\n{}", self.console)
        });
        std::fs::write(host_path, data).expect("write a guest file");
        host_path.to_path_buf()
    }
}

/// Console markers.
const STEP: &str = "BOARD-STEP";
const RC: &str = "BOARD-RC";
const FILE_BEGIN: &str = "BOARD-FILE-BEGIN";
const FILE_END: &str = "BOARD-FILE-END";
const DONE: &str = "BOARD-DONE";

/// The guest's `/init`: mounts what tracing needs, runs the steps, sends their files
/// back, powers off.
fn init_script(steps: &[GuestStep]) -> String {
    let mut s = String::from(
        "#!/bin/busybox sh\n\
         /bin/busybox --install -s /bin\n\
         mkdir -p /proc /sys /dev /tmp\n\
         mount -t proc proc /proc\n\
         mount -t sysfs sys /sys\n\
         mount -t devtmpfs dev /dev\n\
         mount -t tracefs tracefs /sys/kernel/tracing\n\
         mount -t bpf bpf /sys/fs/bpf\n\
         echo 1 > /proc/sys/kernel/printk\n\
         cd /tmp\n\
         echo \"BOARD-KERNEL $(uname -r) $(uname -m) $(ls /sys/bus/event_source/devices | tr '\\n' ' ')\"\n",
    );
    for step in steps {
        s += &format!(
            "echo '{STEP} {name}'\n{command}\necho \"{RC} {name} $?\"\n",
            name = step.name,
            command = step.command
        );
        for out in &step.outputs {
            s += &format!("echo '{FILE_BEGIN} {out}'\nbase64 {out}\necho '{FILE_END} {out}'\n");
        }
    }
    s += &format!("echo {DONE}\npoweroff -f\n");
    s
}

/// Writes a newc initramfs holding busybox, `/init` for `steps` and `files` (guest path,
/// host path) into `dir`; returns its path. Uses the `cpio` tool.
pub fn initramfs(
    dir: &Path,
    busybox: &Path,
    files: &[(&str, &Path)],
    steps: &[GuestStep],
) -> PathBuf {
    let root = dir.join("root");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("bin")).expect("initramfs root");
    let place = |guest: &str, host: &Path| {
        let to = root.join(guest.trim_start_matches('/'));
        std::fs::create_dir_all(to.parent().expect("a parent")).expect("mkdir");
        // A hard link where possible (the model is 100 MB); a copy across file systems.
        if std::fs::hard_link(host, &to).is_err() {
            std::fs::copy(host, &to)
                .unwrap_or_else(|e| panic!("copy {} into the initramfs: {e}", host.display()));
        }
    };
    place("/bin/busybox", busybox);
    for (guest, host) in files {
        place(guest, host);
    }
    let init = root.join("init");
    std::fs::write(&init, init_script(steps)).expect("write /init");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&init, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let list = Command::new("find")
        .arg(".")
        .current_dir(&root)
        .output()
        .expect("find runs");
    let cpio_path = dir.join("initrd.cpio");
    let mut cpio = Command::new("cpio")
        .args(["-o", "-H", "newc", "--quiet"])
        .current_dir(&root)
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&cpio_path).expect("create initrd"))
        .spawn()
        .expect("cpio runs (apt package cpio; cargo xtask test installs it)");
    cpio.stdin
        .take()
        .expect("stdin")
        .write_all(&list.stdout)
        .expect("feed cpio");
    assert!(cpio.wait().expect("cpio").success(), "cpio failed");
    cpio_path
}

/// Boots `kernel` with `initrd` on a 2-CPU, 2 GiB `virt` machine and returns what the
/// guest reported, within `limit`.
pub fn boot(kernel: &Path, initrd: &Path, limit: Duration) -> GuestRun {
    let start = Instant::now();
    let out = Command::new("timeout")
        .arg(format!("{}", limit.as_secs()))
        .arg("qemu-system-aarch64")
        // `pauth-impdef`: pointer authentication with QEMU's cheap algorithm (the
        // architected one triples the boot time under TCG). `-nic none`: the default NIC
        // wants a ROM file Debian's package does not have.
        .args([
            "-M",
            "virt",
            "-cpu",
            "max,pauth-impdef=on",
            "-smp",
            "2",
            "-m",
            "2048",
            "-nographic",
            "-nic",
            "none",
            "-no-reboot",
            "-kernel",
        ])
        .arg(kernel)
        .arg("-initrd")
        .arg(initrd)
        .args([
            "-append",
            "console=ttyAMA0 rdinit=/init panic=-1 quiet loglevel=1",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("qemu-system-aarch64 runs (apt package qemu-system-arm)");
    let console = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    let mut run = GuestRun {
        console,
        exit_codes: HashMap::new(),
        files: HashMap::new(),
        elapsed: start.elapsed(),
    };
    parse_console(&mut run);
    assert!(
        run.console.lines().any(|l| l.trim() == DONE),
        "the guest did not finish within {limit:?} (exit status {}); console:\n{}",
        out.status,
        run.console
    );
    run
}

/// Fills `run`'s exit codes and files from its console.
fn parse_console(run: &mut GuestRun) {
    let mut lines = run.console.lines();
    while let Some(line) = lines.next() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix(RC) {
            let mut it = rest.split_whitespace();
            if let (Some(name), Some(Ok(code))) = (it.next(), it.next().map(str::parse)) {
                run.exit_codes.insert(name.to_owned(), code);
            }
        } else if let Some(path) = line.strip_prefix(FILE_BEGIN) {
            let path = path.trim().to_owned();
            let mut b64 = String::new();
            for l in lines.by_ref() {
                let l = l.trim();
                if l.starts_with(FILE_END) {
                    break;
                }
                b64 += l;
            }
            // A file the step did not write: busybox's error line is not base64.
            if let Ok(data) = base64::engine::general_purpose::STANDARD.decode(&b64) {
                run.files.insert(path, data);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_markers_give_exit_codes_and_files() {
        let mut run = GuestRun {
            console: "noise\nBOARD-STEP a\nBOARD-RC a 0\nBOARD-FILE-BEGIN /tmp/x\naGVs\nbG8=\n\
                      BOARD-FILE-END /tmp/x\nBOARD-RC b 2\nBOARD-FILE-BEGIN /tmp/y\n\
                      base64: /tmp/y: No such file\nBOARD-FILE-END /tmp/y\nBOARD-DONE\n"
                .into(),
            exit_codes: HashMap::new(),
            files: HashMap::new(),
            elapsed: Duration::ZERO,
        };
        parse_console(&mut run);
        assert_eq!(run.exit_codes["a"], 0);
        assert_eq!(run.exit_codes["b"], 2);
        assert_eq!(run.files["/tmp/x"], b"hello");
        assert!(!run.files.contains_key("/tmp/y"));
    }

    #[test]
    fn init_runs_each_step_and_sends_its_files() {
        let s = init_script(&[GuestStep {
            name: "rec".into(),
            command: "/profinfer record -o /tmp/t -- /engine run".into(),
            outputs: vec!["/tmp/t".into()],
        }]);
        let rec = s.find("/profinfer record").expect("the command");
        let rc = s.find("BOARD-RC rec $?").expect("its exit code");
        let send = s.find("base64 /tmp/t").expect("its file");
        assert!(rec < rc && rc < send && send < s.find("poweroff").expect("power off"));
    }
}
