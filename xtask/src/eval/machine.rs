//! What the evaluation ran on: CPU, cores, kernel, frequency governor, hardware counters,
//! the date and the commit, for the head of `docs/evaluation.md`.

use std::process::Command;

use crate::paths;
use crate::process;

/// The machine and the source of one evaluation.
#[derive(Clone, Debug)]
pub struct Machine {
    /// CPU model (`/proc/cpuinfo`).
    pub cpu: String,
    /// Cores this process may use.
    pub cores: usize,
    /// Kernel release.
    pub kernel: String,
    /// Frequency governor of CPU 0, or why there is none.
    pub governor: String,
    /// Whether a hardware cycle counter opens (`perf_event_open`).
    pub hardware_counters: bool,
    /// UTC date and time.
    pub date: String,
    /// `git describe`-like commit, `+dirty` when the tree has changes.
    pub commit: String,
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

fn cpu_model() -> String {
    let info = read("/proc/cpuinfo").unwrap_or_default();
    for key in ["model name", "Hardware", "CPU part"] {
        if let Some(v) = info
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_once(':'))
        {
            return v.1.trim().to_owned();
        }
    }
    std::env::consts::ARCH.to_owned()
}

/// Whether `perf_event_open` gives a CPU-cycles counter for this process.
fn cycles_counter_opens() -> bool {
    // PERF_TYPE_HARDWARE = 0, PERF_COUNT_HW_CPU_CYCLES = 0; exclude_kernel (bit 5 of
    // the flags word) so a paranoid setting of 2 still allows it.
    #[repr(C)]
    struct Attr {
        kind: u32,
        size: u32,
        config: u64,
        rest: [u64; 14],
    }
    let mut attr = Attr {
        kind: 0,
        size: std::mem::size_of::<Attr>() as u32,
        config: 0,
        rest: [0; 14],
    };
    // After `config`: sample_period, sample_type, read_format, then the flags word.
    attr.rest[3] = (1 << 0) | (1 << 5); // disabled, exclude_kernel
    // SAFETY: a valid `perf_event_attr` prefix of `size` bytes (the kernel accepts any
    // published size and zero-fills the rest); pid 0 = this process, cpu -1 = any.
    let fd = unsafe { libc::syscall(libc::SYS_perf_event_open, &attr, 0, -1, -1, 0) };
    if fd < 0 {
        return false;
    }
    // SAFETY: `fd` was just returned by the kernel and is closed once.
    unsafe { libc::close(fd as i32) };
    true
}

fn git(args: &[&str]) -> String {
    process::stdout(
        Command::new("git")
            .arg("-C")
            .arg(paths::repo_root())
            .args(args),
    )
    .map(|s| s.trim().to_owned())
    .unwrap_or_default()
}

impl Machine {
    /// Reads this machine.
    pub fn read() -> Machine {
        let governor = read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
            .unwrap_or_else(|| "none (no cpufreq: a VM, or a fixed clock)".into());
        let dirty = !git(&["status", "--porcelain", "--untracked-files=no"]).is_empty();
        let commit = format!(
            "{}{}",
            git(&["rev-parse", "--short=10", "HEAD"]),
            if dirty { "+dirty" } else { "" }
        );
        let date = process::stdout(Command::new("date").args(["-u", "+%Y-%m-%d %H:%M UTC"]))
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        Machine {
            cpu: cpu_model(),
            cores: process::available_cores(),
            kernel: read("/proc/sys/kernel/osrelease").unwrap_or_default(),
            governor,
            hardware_counters: cycles_counter_opens(),
            date,
            commit,
        }
    }

    /// The Markdown table.
    pub fn markdown(&self) -> String {
        format!(
            "| | |\n|---|---|\n| CPU | {} ({} cores usable, {}) |\n| kernel | {} |\n\
             | frequency governor | {} |\n| hardware counters | {} |\n| date | {} |\n\
             | commit | `{}` |\n",
            self.cpu,
            self.cores,
            std::env::consts::ARCH,
            self.kernel,
            self.governor,
            if self.hardware_counters {
                "yes (a cycles counter opens)"
            } else {
                "none (`perf_event_open` of cycles fails: software counters only)"
            },
            self.date,
            self.commit
        )
    }
}
