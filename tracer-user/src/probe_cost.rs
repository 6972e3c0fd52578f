//! Measures what tracing costs while recording, rather than guessing: turns on the
//! kernel's run-time statistics of eBPF programs (`BPF_ENABLE_STATS`, what `bpftool prog`
//! shows — seed 002 measured its probes the same way) and reads the collector's CPU time;
//! the result ([`ProbeCost`]) goes into the summary and the trace footer.

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use aya::Ebpf;
use trace_format::{ProbeCost, ProgramCost};

/// Started before the probes attach, finished after the drain: holds the statistics file
/// descriptor (the kernel keeps counting while it is open).
pub struct ProbeCostMeter {
    _stats: Option<OwnedFd>,
    note: Option<String>,
    start: Instant,
    cpu_start: Duration,
}

impl ProbeCostMeter {
    /// Turns on the kernel's run-time statistics (needs CAP_SYS_ADMIN; without it the
    /// cost of programs stays unknown and [`ProbeCostMeter::take_note`] says so).
    pub fn start() -> ProbeCostMeter {
        let (stats, note) = match aya::sys::enable_stats(aya::sys::Stats::RunTime) {
            Ok(fd) => (Some(fd), None),
            Err(e) => (
                None,
                Some(format!(
                    "eBPF run-time statistics unavailable ({e}); probe cost not measured"
                )),
            ),
        };
        ProbeCostMeter {
            _stats: stats,
            note,
            start: Instant::now(),
            cpu_start: process_cpu_time(),
        }
    }

    /// Restarts the wall and CPU clocks: called when the target starts running traced, so
    /// loading and attaching (done once, before the target runs) are not counted.
    pub fn target_running(&mut self) {
        self.start = Instant::now();
        self.cpu_start = process_cpu_time();
    }

    /// A one-line note to print once, if statistics could not be enabled.
    pub fn take_note(&mut self) -> Option<String> {
        self.note.take()
    }

    /// Reads every program's statistics and the collector's CPU time.
    pub fn finish(&self, ebpf: &Ebpf) -> ProbeCost {
        let stats_enabled = self._stats.is_some();
        let mut programs: Vec<ProgramCost> = if stats_enabled {
            ebpf.programs()
                .filter_map(|(name, prog)| {
                    let info = prog.info().ok()?;
                    (info.run_count() > 0).then(|| ProgramCost {
                        program: name.to_owned(),
                        hits: info.run_count(),
                        run_ns: info.run_time().as_nanos() as u64,
                    })
                })
                .collect()
        } else {
            Vec::new()
        };
        programs.sort_by_key(|p| std::cmp::Reverse(p.run_ns));
        ProbeCost {
            stats_enabled,
            programs,
            collector_cpu_ns: process_cpu_time().saturating_sub(self.cpu_start).as_nanos() as u64,
            wall_ns: self.start.elapsed().as_nanos() as u64,
        }
    }
}

/// User + system CPU time of this process (all its threads).
fn process_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_PROCESS_CPUTIME_ID always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_advances_with_work() {
        let a = process_cpu_time();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(process_cpu_time() > a);
    }
}
