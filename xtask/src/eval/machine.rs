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
    /// Whether a hardware cycles counter counts (`perf stat`); `None` without `perf`.
    pub hardware_counters: Option<bool>,
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

/// Whether a hardware cycles counter counts here, as `perf stat -e cycles` (Debian's
/// linux-perf, installed by `cargo xtask setup`) finds it; `None` without `perf`.
fn cycles_counter() -> Option<bool> {
    let out = Command::new("perf")
        .args(["stat", "-x,", "-e", "cycles", "true"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stderr);
    let line = text.lines().find(|l| l.contains("cycles"))?;
    Some(!line.starts_with('<'))
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
            hardware_counters: cycles_counter(),
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
            match self.hardware_counters {
                Some(true) => "yes (`perf stat -e cycles` counts)",
                Some(false) =>
                    "none (`perf stat -e cycles`: not supported; software counters only)",
                None => "unknown (no `perf` to ask)",
            },
            self.date,
            self.commit
        )
    }
}
