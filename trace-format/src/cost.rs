//! What tracing cost while recording (stored in the footer): the kernel's run-time
//! statistics of every eBPF program and the collector's CPU time. The uprobe trap itself
//! (~0.35 µs per hit on a 5-byte nop) is not inside a program's run time;
//! [`ProbeCost::hits`] lets a reader add it.

use serde::{Deserialize, Serialize};

/// Run count and run time of one eBPF program over the recording.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramCost {
    /// Program name (the probe function in `tracer-ebpf`).
    pub program: String,
    /// Times it ran.
    pub hits: u64,
    /// Total nanoseconds inside the program.
    pub run_ns: u64,
}

/// Cost of one recording.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeCost {
    /// Whether the kernel kept run-time statistics (false: program costs are unknown).
    pub stats_enabled: bool,
    /// Per program, those that ran at least once.
    pub programs: Vec<ProgramCost>,
    /// CPU time (user + system) the collector process used while recording, ns.
    pub collector_cpu_ns: u64,
    /// Wall time of the recording, ns.
    pub wall_ns: u64,
    /// CPU time (user + system, all threads) of the target over its whole life, ns, when
    /// the recorder started it and saw it end; absent otherwise and in older traces.
    #[serde(default)]
    pub target_cpu_ns: Option<u64>,
    /// Share of the recording (‰) the kernel's statistics were on: program counts and
    /// times are scaled up from it; absent (older traces) means always on.
    #[serde(default)]
    pub stats_permille: Option<u32>,
}

impl ProbeCost {
    /// Program runs, all programs.
    pub fn hits(&self) -> u64 {
        self.programs.iter().map(|p| p.hits).sum()
    }

    /// Nanoseconds inside programs, all programs.
    pub fn run_ns(&self) -> u64 {
        self.programs.iter().map(|p| p.run_ns).sum()
    }

    /// The collector's CPU time as a share of one CPU over the recording, in %.
    pub fn collector_cpu_percent(&self) -> f64 {
        100.0 * self.collector_cpu_ns as f64 / self.wall_ns.max(1) as f64
    }
}

impl std::fmt::Display for ProbeCost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.stats_enabled {
            let hits = self.hits();
            write!(
                f,
                "probes ran {hits} times, {:.1} ms in eBPF programs ({:.2} µs per run); ",
                self.run_ns() as f64 / 1e6,
                self.run_ns() as f64 / 1e3 / hits.max(1) as f64
            )?;
            for (i, p) in self.programs.iter().take(4).enumerate() {
                write!(
                    f,
                    "{}{} {:.2} µs × {}",
                    if i == 0 { "[" } else { ", " },
                    p.program,
                    p.run_ns as f64 / 1e3 / p.hits.max(1) as f64,
                    p.hits
                )?;
            }
            if !self.programs.is_empty() {
                write!(f, "]; ")?;
            }
            if let Some(p) = self.stats_permille.filter(|&p| p < 1000) {
                write!(
                    f,
                    "(statistics on for {:.1} % of the recording, counts scaled); ",
                    f64::from(p) / 10.0
                )?;
            }
        } else {
            write!(
                f,
                "probe run time unknown (kernel statistics unavailable); "
            )?;
        }
        write!(
            f,
            "collector {:.1} ms CPU ({:.2} % of one CPU over {:.2} s)",
            self.collector_cpu_ns as f64 / 1e6,
            self.collector_cpu_percent(),
            self.wall_ns as f64 / 1e9
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_and_display() {
        let c = ProbeCost {
            stats_enabled: true,
            programs: vec![
                ProgramCost {
                    program: "engine_op_compute".into(),
                    hits: 1000,
                    run_ns: 300_000,
                },
                ProgramCost {
                    program: "engine_decode".into(),
                    hits: 10,
                    run_ns: 2_000,
                },
            ],
            collector_cpu_ns: 50_000_000,
            wall_ns: 2_000_000_000,
            target_cpu_ns: None,
            stats_permille: None,
        };
        assert_eq!(c.hits(), 1010);
        assert_eq!(c.run_ns(), 302_000);
        assert!((c.collector_cpu_percent() - 2.5).abs() < 1e-9);
        let s = c.to_string();
        assert!(s.contains("probes ran 1010 times"), "{s}");
        assert!(s.contains("2.50 % of one CPU"), "{s}");
    }
}
