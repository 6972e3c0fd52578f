//! Measures what tracing costs while recording, rather than guessing: the kernel's
//! run-time statistics of eBPF programs (`BPF_ENABLE_STATS`, what `bpftool prog` shows —
//! seed 002 measured its probes the same way) and the collector's CPU time; the result
//! ([`ProbeCost`]) goes into the summary and the trace footer.
//!
//! The statistics themselves cost every program run two clock reads (~45 ns on the
//! project's VMs, ~10 % of an operator probe), so they are on in sampled windows only —
//! [`STATS_ON`] out of every [`STATS_PERIOD`] while the target runs — and the totals are
//! scaled up from the sampled share (per-run means need no scaling).

use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use aya::Ebpf;
use trace_format::{ProbeCost, ProgramCost};

/// How long the statistics stay on in each period.
pub const STATS_ON: Duration = Duration::from_millis(500);
/// The sampling period of the statistics.
pub const STATS_PERIOD: Duration = Duration::from_secs(5);

/// Started before the probes attach, finished after the drain: switches the kernel's
/// statistics on and off (they count while the file descriptor is open).
pub struct ProbeCostMeter {
    stats: Option<OwnedFd>,
    /// Statistics on for the whole recording instead of in sampled windows.
    always: bool,
    /// Statistics could be enabled at all.
    available: bool,
    note: Option<String>,
    start: Instant,
    cpu_start: Duration,
    /// When the current statistics window opened (if one is open).
    window_start: Option<Instant>,
    /// Statistics time of closed windows.
    sampled: Duration,
}

/// Turns the kernel's run-time statistics on (the returned descriptor keeps them on).
fn enable() -> Result<OwnedFd, String> {
    aya::sys::enable_stats(aya::sys::Stats::RunTime).map_err(|e| e.to_string())
}

impl ProbeCostMeter {
    /// Checks that the kernel's run-time statistics can be enabled (needs
    /// CAP_SYS_ADMIN; without it the cost of programs stays unknown and
    /// [`ProbeCostMeter::take_note`] says so). They are switched on once the target runs.
    pub fn start(always: bool) -> ProbeCostMeter {
        let (available, note) = match enable() {
            Ok(_fd) => (true, None),
            Err(e) => (
                false,
                Some(format!(
                    "eBPF run-time statistics unavailable ({e}); probe cost not measured"
                )),
            ),
        };
        ProbeCostMeter {
            stats: None,
            always,
            available,
            note,
            start: Instant::now(),
            cpu_start: process_cpu_time(),
            window_start: None,
            sampled: Duration::ZERO,
        }
    }

    /// Restarts the wall and CPU clocks and opens the first statistics window: called
    /// when the target starts running traced, so loading and attaching (done once,
    /// before the target runs) are not counted.
    pub fn target_running(&mut self) {
        self.start = Instant::now();
        self.cpu_start = process_cpu_time();
        self.tick(self.start);
    }

    /// Opens or closes the statistics window due at `now` (call it every drain tick).
    pub fn tick(&mut self, now: Instant) {
        if !self.available {
            return;
        }
        let phase = now.saturating_duration_since(self.start).as_nanos() % STATS_PERIOD.as_nanos();
        let want = self.always || phase < STATS_ON.as_nanos();
        match (want, self.window_start) {
            (true, None) => {
                self.stats = enable().ok();
                self.window_start = self.stats.as_ref().map(|_| now);
            }
            (false, Some(at)) => {
                self.stats = None;
                self.sampled += now.saturating_duration_since(at);
                self.window_start = None;
            }
            _ => {}
        }
    }

    /// A one-line note to print once, if statistics could not be enabled.
    pub fn take_note(&mut self) -> Option<String> {
        self.note.take()
    }

    /// Reads every program's statistics (scaled from the sampled windows to the whole
    /// recording) and the collector's CPU time.
    pub fn finish(&mut self, ebpf: &Ebpf) -> ProbeCost {
        let now = Instant::now();
        if let Some(at) = self.window_start.take() {
            self.sampled += now.saturating_duration_since(at);
        }
        self.stats = None;
        let wall = now.saturating_duration_since(self.start);
        let share = if wall.is_zero() {
            1.0
        } else {
            (self.sampled.as_secs_f64() / wall.as_secs_f64()).clamp(0.0, 1.0)
        };
        let scale = if share > 0.0 { 1.0 / share } else { 0.0 };
        let stats_enabled = self.available && share > 0.0;
        let mut programs: Vec<ProgramCost> = if stats_enabled {
            ebpf.programs()
                .filter_map(|(name, prog)| {
                    let info = prog.info().ok()?;
                    (info.run_count() > 0).then(|| ProgramCost {
                        program: name.to_owned(),
                        hits: (info.run_count() as f64 * scale).round() as u64,
                        run_ns: (info.run_time().as_nanos() as f64 * scale).round() as u64,
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
            wall_ns: wall.as_nanos() as u64,
            target_cpu_ns: None,
            stats_permille: Some((share * 1000.0).round() as u32),
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
