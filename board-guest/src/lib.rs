//! An emulated arm64 board: a stock Debian arm64 kernel booted by `qemu-system-aarch64`
//! (TCG, `-M virt`) with a busybox initramfs that runs a list of commands and sends the
//! files they wrote back over the serial console (base64 between markers).
//!
//! QEMU's exit code says nothing about the guest (0 even after a kernel panic): every
//! outcome is read from markers the guest's `/init` prints, under a time limit.
//!
//! The board tests (`tracer-user/tests/board.rs`) and the evaluation's counters on arm64
//! (`cargo xtask eval`) both boot through here.

use std::{
    collections::HashMap,
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use base64::Engine as _;

/// Why a boot, or what it should have produced, failed.
#[derive(Debug, thiserror::Error)]
pub enum GuestError {
    /// A host file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with the path.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// A host tool could not be started.
    #[error("{tool} does not run ({hint}): {source}")]
    Tool {
        /// The program.
        tool: &'static str,
        /// Where it comes from.
        hint: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// `cpio` failed to write the initramfs.
    #[error("cpio failed to write the initramfs ({0})")]
    Cpio(std::process::ExitStatus),
    /// The guest never printed its last marker.
    #[error(
        "the guest did not finish within {limit:?} (exit status {status}); console:\n{console}"
    )]
    Unfinished {
        /// The time limit.
        limit: Duration,
        /// `timeout`'s exit status (124: the limit).
        status: std::process::ExitStatus,
        /// The console, files left out.
        console: String,
    },
    /// A step did not end with exit code 0.
    #[error("guest step `{step}` ended with {code:?}; console:\n{console}")]
    Step {
        /// The step's name.
        step: String,
        /// Its exit code (`None`: it never finished).
        code: Option<i32>,
        /// The console, files left out.
        console: String,
    },
    /// The guest sent no such file.
    #[error("the guest sent no {path}; console:\n{console}")]
    NoFile {
        /// The guest path.
        path: String,
        /// The console, files left out.
        console: String,
    },
}

/// One command the guest runs, and the files it writes that come back.
#[derive(Clone, Debug)]
pub struct GuestStep {
    /// Name in markers and messages (no spaces).
    pub name: String,
    /// Shell command line (run by busybox `sh` in `/tmp`).
    pub command: String,
    /// Files (guest paths) sent back after the step.
    pub outputs: Vec<String>,
}

/// The emulated machine.
#[derive(Clone, Copy, Debug)]
pub struct Machine {
    /// Virtual CPUs.
    pub cpus: u32,
    /// Memory in MiB.
    pub memory_mib: u32,
    /// `-icount shift=0`: one virtual nanosecond per guest instruction, so the PMU's
    /// `INST_RETIRED` counts (QEMU counts it only then), at the price of one host thread
    /// for all virtual CPUs.
    pub icount: bool,
}

impl Machine {
    /// The `qemu-system-aarch64` options of this machine, as a person would type them
    /// (without the kernel, the initramfs and the console options).
    pub fn describe(&self) -> String {
        let args = qemu_args(self, Path::new("K"), Path::new("I"));
        let kernel = args
            .iter()
            .position(|a| a == "-kernel")
            .unwrap_or(args.len());
        let mut line = String::from("qemu-system-aarch64");
        for a in &args[..kernel] {
            line.push(' ');
            line.push_str(&a.to_string_lossy());
        }
        line
    }
}

impl Default for Machine {
    /// The board tests' machine: 2 CPUs, 2 GiB, no instruction counting.
    fn default() -> Machine {
        Machine {
            cpus: 2,
            memory_mib: 2048,
            icount: false,
        }
    }
}

/// What came back from one boot.
#[derive(Debug)]
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
    /// Whether `step` finished with exit code 0.
    pub fn step_ok(&self, step: &str) -> Result<(), GuestError> {
        match self.exit_codes.get(step) {
            Some(0) => Ok(()),
            code => Err(GuestError::Step {
                step: step.to_owned(),
                code: code.copied(),
                console: self.console_without_files(),
            }),
        }
    }

    /// Writes the file the guest wrote at `guest_path` to `host_path`; returns
    /// `host_path`.
    pub fn save(&self, guest_path: &str, host_path: &Path) -> Result<PathBuf, GuestError> {
        let data = self
            .files
            .get(guest_path)
            .ok_or_else(|| GuestError::NoFile {
                path: guest_path.to_owned(),
                console: self.console_without_files(),
            })?;
        std::fs::write(host_path, data).map_err(|source| GuestError::Io {
            what: format!("writing {}", host_path.display()),
            source,
        })?;
        Ok(host_path.to_path_buf())
    }

    /// The console with the files' base64 lines left out (what a person reads).
    pub fn console_without_files(&self) -> String {
        without_files(&self.console)
    }

    /// The kernel's line: release, machine and PMU devices, as `/init` printed it.
    pub fn kernel_line(&self) -> Option<&str> {
        self.console
            .lines()
            .find_map(|l| l.trim().strip_prefix(KERNEL))
            .map(str::trim)
    }
}

/// Console markers.
const KERNEL: &str = "BOARD-KERNEL";
const STEP: &str = "BOARD-STEP";
const RC: &str = "BOARD-RC";
const FILE_BEGIN: &str = "BOARD-FILE-BEGIN";
const FILE_END: &str = "BOARD-FILE-END";
const DONE: &str = "BOARD-DONE";

/// The guest's `/init`: mounts what tracing needs, runs the steps, sends their files
/// back, powers off.
fn init_script(steps: &[GuestStep]) -> String {
    let mut s = format!(
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
         echo \"{KERNEL} $(uname -r) $(uname -m) $(ls /sys/bus/event_source/devices | tr '\\n' ' ')\"\n",
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
) -> Result<PathBuf, GuestError> {
    let io = |what: String| move |source| GuestError::Io { what, source };
    let root = dir.join("root");
    if root.exists() {
        std::fs::remove_dir_all(&root).map_err(io(format!("clearing {}", root.display())))?;
    }
    let place = |guest: &str, host: &Path| -> Result<(), GuestError> {
        let to = root.join(guest.trim_start_matches('/'));
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .map_err(io(format!("creating {}", parent.display())))?;
        }
        // A hard link where possible (the model is 100 MB); a copy across file systems.
        if std::fs::hard_link(host, &to).is_err() {
            std::fs::copy(host, &to)
                .map_err(io(format!("copying {} into the initramfs", host.display())))?;
        }
        Ok(())
    };
    place("/bin/busybox", busybox)?;
    for (guest, host) in files {
        place(guest, host)?;
    }
    let init = root.join("init");
    std::fs::write(&init, init_script(steps)).map_err(io(format!("writing {}", init.display())))?;
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&init, std::fs::Permissions::from_mode(0o755))
        .map_err(io(format!("chmod {}", init.display())))?;
    let list = Command::new("find")
        .arg(".")
        .current_dir(&root)
        .output()
        .map_err(|source| GuestError::Tool {
            tool: "find",
            hint: "findutils",
            source,
        })?;
    let cpio_path = dir.join("initrd.cpio");
    let out = std::fs::File::create(&cpio_path)
        .map_err(io(format!("creating {}", cpio_path.display())))?;
    let mut cpio = Command::new("cpio")
        .args(["-o", "-H", "newc", "--quiet"])
        .current_dir(&root)
        .stdin(Stdio::piped())
        .stdout(out)
        .spawn()
        .map_err(|source| GuestError::Tool {
            tool: "cpio",
            hint: "apt package cpio; cargo xtask test installs it",
            source,
        })?;
    if let Some(mut stdin) = cpio.stdin.take() {
        stdin
            .write_all(&list.stdout)
            .map_err(io("feeding cpio".to_owned()))?;
    }
    let status = cpio.wait().map_err(io("waiting for cpio".to_owned()))?;
    if !status.success() {
        return Err(GuestError::Cpio(status));
    }
    Ok(cpio_path)
}

/// The `qemu-system-aarch64` arguments of `machine` booting `kernel` with `initrd`.
fn qemu_args(machine: &Machine, kernel: &Path, initrd: &Path) -> Vec<std::ffi::OsString> {
    // `pauth-impdef`: pointer authentication with QEMU's cheap algorithm (the architected
    // one triples the boot time under TCG). `-nic none`: the default NIC wants a ROM file
    // Debian's package does not have.
    let mut a: Vec<std::ffi::OsString> = [
        "-M",
        "virt",
        "-cpu",
        "max,pauth-impdef=on",
        "-smp",
        &machine.cpus.to_string(),
        "-m",
        &machine.memory_mib.to_string(),
        "-nographic",
        "-nic",
        "none",
        "-no-reboot",
    ]
    .iter()
    .map(Into::into)
    .collect();
    if machine.icount {
        a.extend(["-icount".into(), "shift=0".into()]);
    }
    a.extend([
        "-kernel".into(),
        kernel.into(),
        "-initrd".into(),
        initrd.into(),
        "-append".into(),
        "console=ttyAMA0 rdinit=/init panic=-1 quiet loglevel=1".into(),
    ]);
    a
}

/// Boots `kernel` with `initrd` on `machine` and returns what the guest reported, within
/// `limit`.
pub fn boot(
    kernel: &Path,
    initrd: &Path,
    machine: &Machine,
    limit: Duration,
) -> Result<GuestRun, GuestError> {
    let start = Instant::now();
    let out = Command::new("timeout")
        .arg(format!("{}", limit.as_secs()))
        .arg("qemu-system-aarch64")
        .args(qemu_args(machine, kernel, initrd))
        .stdin(Stdio::null())
        .output()
        .map_err(|source| GuestError::Tool {
            tool: "qemu-system-aarch64",
            hint: "apt package qemu-system-arm",
            source,
        })?;
    let console = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    let mut run = GuestRun {
        console,
        exit_codes: HashMap::new(),
        files: HashMap::new(),
        elapsed: start.elapsed(),
    };
    parse_console(&mut run);
    if !run.console.lines().any(|l| l.trim() == DONE) {
        return Err(GuestError::Unfinished {
            limit,
            status: out.status,
            console: run.console_without_files(),
        });
    }
    Ok(run)
}

/// `console` without the lines between file markers.
fn without_files(console: &str) -> String {
    let mut out = String::new();
    let mut in_file = false;
    for line in console.lines() {
        let t = line.trim();
        if t.starts_with(FILE_END) {
            in_file = false;
        }
        if !in_file {
            out += line;
            out.push('\n');
        }
        if t.starts_with(FILE_BEGIN) {
            in_file = true;
        }
    }
    out
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

    fn run_of(console: &str) -> GuestRun {
        let mut run = GuestRun {
            console: console.into(),
            exit_codes: HashMap::new(),
            files: HashMap::new(),
            elapsed: Duration::ZERO,
        };
        parse_console(&mut run);
        run
    }

    const CONSOLE: &str = "noise\nBOARD-KERNEL 6.12.9 aarch64 armv8_pmuv3_0 \nBOARD-STEP a\n\
                           BOARD-RC a 0\nBOARD-FILE-BEGIN /tmp/x\naGVs\nbG8=\n\
                           BOARD-FILE-END /tmp/x\nBOARD-RC b 2\nBOARD-FILE-BEGIN /tmp/y\n\
                           base64: /tmp/y: No such file\nBOARD-FILE-END /tmp/y\nBOARD-DONE\n";

    #[test]
    fn console_markers_give_exit_codes_and_files() {
        let run = run_of(CONSOLE);
        assert_eq!(run.exit_codes["a"], 0);
        assert_eq!(run.exit_codes["b"], 2);
        assert_eq!(run.files["/tmp/x"], b"hello");
        assert!(!run.files.contains_key("/tmp/y"));
        assert!(run.step_ok("a").is_ok());
        assert!(matches!(
            run.step_ok("b"),
            Err(GuestError::Step { code: Some(2), .. })
        ));
        assert!(matches!(
            run.step_ok("c"),
            Err(GuestError::Step { code: None, .. })
        ));
        assert_eq!(run.kernel_line(), Some("6.12.9 aarch64 armv8_pmuv3_0"));
    }

    #[test]
    fn errors_show_the_console_without_the_files() {
        let run = run_of(CONSOLE);
        let text = run.console_without_files();
        assert!(text.contains("BOARD-RC b 2") && text.contains("BOARD-FILE-END /tmp/x"));
        assert!(!text.contains("aGVs") && !text.contains("No such file"));
        let err = run.save("/tmp/z", Path::new("/nonexistent/z")).unwrap_err();
        assert!(matches!(err, GuestError::NoFile { .. }), "{err}");
        assert!(!err.to_string().contains("bG8="));
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

    #[test]
    fn instruction_counting_is_asked_of_qemu_only_when_wanted() {
        let args = |icount| {
            qemu_args(
                &Machine {
                    icount,
                    cpus: 1,
                    ..Machine::default()
                },
                Path::new("/k"),
                Path::new("/i"),
            )
            .join(std::ffi::OsStr::new(" "))
            .to_string_lossy()
            .into_owned()
        };
        assert!(args(true).contains("-smp 1 -m 2048") && args(true).contains("-icount shift=0"));
        assert!(!args(false).contains("icount"));
        let line = Machine {
            icount: true,
            cpus: 1,
            ..Machine::default()
        }
        .describe();
        assert!(
            line.starts_with("qemu-system-aarch64 -M virt -cpu max,pauth-impdef=on -smp 1"),
            "{line}"
        );
        assert!(line.ends_with("-icount shift=0"), "{line}");
    }
}
