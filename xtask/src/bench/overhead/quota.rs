//! A CPU quota for the measured runs (the constrained condition): a cgroup whose CPU
//! bandwidth is limited to a number of CPUs, which the whole measured command (the
//! program, and under `profinfer record` the collector too) joins before it starts, as
//! on a board where inference gets a share of the cores.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail};

/// CFS period of the quota, µs.
const PERIOD_US: u64 = 100_000;

/// A cgroup with a CPU quota, removed on drop.
#[derive(Debug)]
pub struct CpuQuota {
    dir: PathBuf,
    cpus: f64,
}

impl CpuQuota {
    /// Creates the cgroup `name` limited to `cpus` CPUs: cgroup v2's `cpu.max` where the
    /// `cpu` controller is enabled, else v1's `cpu.cfs_quota_us`.
    pub fn create(name: &str, cpus: f64) -> Result<CpuQuota> {
        if cpus.is_nan() || cpus <= 0.0 {
            bail!("a CPU quota must be positive, not {cpus}");
        }
        let quota_us = (cpus * PERIOD_US as f64).round() as u64;
        let v2 = Path::new("/sys/fs/cgroup");
        let v2_cpu = std::fs::read_to_string(v2.join("cgroup.subtree_control"))
            .is_ok_and(|c| c.split_whitespace().any(|c| c == "cpu"));
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        let (dir, files): (PathBuf, Vec<(&str, String)>) = if v2_cpu {
            (
                v2.join(name),
                vec![("cpu.max", format!("{quota_us} {PERIOD_US}"))],
            )
        } else if v1.join("cpu.cfs_quota_us").is_file() {
            (
                v1.join(name),
                vec![
                    ("cpu.cfs_period_us", PERIOD_US.to_string()),
                    ("cpu.cfs_quota_us", quota_us.to_string()),
                ],
            )
        } else {
            bail!(
                "no cgroup CPU controller to set a quota with (neither cgroup v2's cpu.max \
                 nor v1's /sys/fs/cgroup/cpu)"
            );
        };
        if !dir.is_dir() {
            std::fs::create_dir(&dir)
                .with_context(|| format!("creating the cgroup {} (root needed)", dir.display()))?;
        }
        for (file, value) in files {
            std::fs::write(dir.join(file), &value)
                .with_context(|| format!("writing {value} to {}", dir.join(file).display()))?;
        }
        Ok(CpuQuota { dir, cpus })
    }

    /// The quota in CPUs.
    pub fn cpus(&self) -> f64 {
        self.cpus
    }

    /// `cmd` wrapped so that it joins the cgroup and then executes itself (same pid, so
    /// `wait4` measures it as before).
    pub fn wrap(&self, cmd: &Command) -> Command {
        let procs = self.dir.join("cgroup.procs");
        let mut w = Command::new("sh");
        w.arg("-c")
            .arg("echo $$ > \"$0\" && exec \"$@\"")
            .arg(procs)
            .arg(cmd.get_program())
            .args(cmd.get_args());
        if let Some(d) = cmd.get_current_dir() {
            w.current_dir(d);
        }
        w
    }
}

impl Drop for CpuQuota {
    fn drop(&mut self) {
        // Only empty cgroups can be removed: every measured run has exited by now.
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As root: a busy child under a quota of 0.2 CPU gets about that share of the wall
    /// time (the kernel enforces it, so the bound holds however fast the machine is). Not
    /// as root the test says so and passes, unless `PROFINFER_REQUIRE_ROOT=1` (set by
    /// `cargo xtask test`); as root, a machine without a CPU controller fails it, since
    /// the evaluation's constrained rows need one.
    #[test]
    fn a_quota_limits_a_busy_child() {
        if !crate::process::is_root() {
            assert!(
                std::env::var_os("PROFINFER_REQUIRE_ROOT").is_none_or(|v| v != "1"),
                "the CPU quota test needs root, and PROFINFER_REQUIRE_ROOT=1"
            );
            eprintln!("!!! SKIPPED: the CPU quota test needs root");
            return;
        }
        let q = CpuQuota::create("profinfer-quota-test", 0.2).expect("a CPU quota as root");
        let mut busy = Command::new("sh");
        busy.args(["-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"]);
        let s = super::super::measure::run(&mut q.wrap(&busy)).unwrap();
        assert!(
            s.cpu_s < 0.5 * s.wall_s,
            "0.2 CPU of quota: {:.3} s CPU in {:.3} s",
            s.cpu_s,
            s.wall_s
        );
    }
}
