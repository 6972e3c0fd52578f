//! Which recorded counters feed the derived metrics, per architecture (seed 002 Table 3,
//! Fig 11).
//!
//! | metric | x86-64 trace | arm64 trace |
//! |---|---|---|
//! | IPC | `instructions / cycles` | the same names (INST_RETIRED / CPU_CYCLES) |
//! | memory traffic (GB/s) and MPKI | `cache-misses` (last-level misses) × 64 B | the lowest-level refill recorded that counted: `ll-cache-miss-rd`, else `l3d-cache-refill`, else `l2d-cache-refill`, × 64 B |
//! | backend stall share | `stalled-cycles-backend / cycles` | the same name (STALL_BACKEND) |
//!
//! The tracer records Arm PMUv3 events under perf's generic name where the kernel maps
//! the generic event to exactly that event (`cycles`, `instructions`,
//! `stalled-cycles-backend`), so one lookup serves both architectures. It never records
//! `cache-misses` on arm64: the kernel maps that to L1D refills, which are recorded as
//! `l1d-cache-refill` and are not memory traffic, so they feed no metric. Names are
//! compared lower-case with `_` read as `-` (`STALL_BACKEND` = `stall-backend`).

use super::CACHE_LINE_BYTES;

/// Counters that count cache lines coming from memory (or the level before it), in the
/// order they are preferred: x86-64's last-level misses, then arm64's refills from the
/// lowest level down.
pub const MISS_COUNTERS: [&str; 4] = [
    "cache-misses",
    "ll-cache-miss-rd",
    "l3d-cache-refill",
    "l2d-cache-refill",
];
/// Counters of cycles the back end stalled.
pub const BACKEND_STALL_COUNTERS: [&str; 2] = ["stalled-cycles-backend", "stall-backend"];
/// Counters of core cycles.
pub const CYCLE_COUNTERS: [&str; 2] = ["cycles", "cpu-cycles"];
/// Counters of instructions retired.
pub const INSTRUCTION_COUNTERS: [&str; 2] = ["instructions", "inst-retired"];

/// Positions in a trace's counter table of the counters each metric reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MetricCounters {
    /// Core cycles.
    pub cycles: Option<usize>,
    /// Instructions retired.
    pub instructions: Option<usize>,
    /// Cache lines from memory ([`MISS_COUNTERS`]).
    pub misses: Option<usize>,
    /// Backend stall cycles.
    pub backend_stalls: Option<usize>,
}

fn normalize(name: &str) -> String {
    name.trim().to_ascii_lowercase().replace('_', "-")
}

impl MetricCounters {
    /// Picks the counters from the trace's `names`; `counted(i)` tells whether counter
    /// `i` counted anything over the run (an event a core does not implement reads 0),
    /// which decides between several recorded miss counters.
    pub fn pick(names: &[String], counted: impl Fn(usize) -> bool) -> MetricCounters {
        let names: Vec<String> = names.iter().map(|n| normalize(n)).collect();
        let find = |wanted: &[&str]| {
            wanted
                .iter()
                .find_map(|w| names.iter().position(|n| n == w))
        };
        let recorded: Vec<usize> = MISS_COUNTERS
            .iter()
            .filter_map(|w| names.iter().position(|n| n == w))
            .collect();
        MetricCounters {
            cycles: find(&CYCLE_COUNTERS),
            instructions: find(&INSTRUCTION_COUNTERS),
            misses: recorded
                .iter()
                .copied()
                .find(|&i| counted(i))
                .or(recorded.first().copied()),
            backend_stalls: find(&BACKEND_STALL_COUNTERS),
        }
    }
}

/// The metrics of one group of operator runs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Derived {
    /// Instructions per cycle.
    pub ipc: Option<f64>,
    /// Miss counter × 64 B per ns of op time = GB/s.
    pub miss_bandwidth_gbps: Option<f64>,
    /// Miss counter per 1000 instructions.
    pub mpki: Option<f64>,
    /// Backend stall cycles / cycles.
    pub stall_ratio: Option<f64>,
}

impl Derived {
    /// The metrics from `value(i)` (counter `i` summed over the group, `None` if it was
    /// not read there) and the group's time `total_ns`. A ratio whose denominator is 0
    /// is `None`.
    pub fn compute(
        counters: &MetricCounters,
        value: impl Fn(usize) -> Option<u64>,
        total_ns: u64,
    ) -> Derived {
        let get = |i: Option<usize>| i.and_then(&value);
        let ratio = |num: Option<u64>, den: Option<u64>, scale: f64| match (num, den) {
            (Some(n), Some(d)) if d > 0 => Some(n as f64 * scale / d as f64),
            _ => None,
        };
        let (cycles, instructions) = (get(counters.cycles), get(counters.instructions));
        let misses = get(counters.misses);
        Derived {
            ipc: ratio(instructions, cycles, 1.0),
            miss_bandwidth_gbps: ratio(misses, Some(total_ns), CACHE_LINE_BYTES as f64),
            mpki: ratio(misses, instructions, 1000.0),
            stall_ratio: ratio(get(counters.backend_stalls), cycles, 1.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn x86_set_uses_cache_misses() {
        let n = names(&[
            "cycles",
            "instructions",
            "cache-misses",
            "stalled-cycles-backend",
            "task-clock",
        ]);
        let m = MetricCounters::pick(&n, |_| true);
        assert_eq!(
            m,
            MetricCounters {
                cycles: Some(0),
                instructions: Some(1),
                misses: Some(2),
                backend_stalls: Some(3),
            }
        );
    }

    #[test]
    fn arm_set_uses_the_lowest_refill_that_counted() {
        let n = names(&[
            "cycles",
            "instructions",
            "l1d-cache-refill",
            "l2d-cache-refill",
            "stalled-cycles-backend",
            "ll-cache-miss-rd",
        ]);
        // LL_CACHE_MISS_RD recorded but 0 all run (no external last-level cache): L2D.
        let m = MetricCounters::pick(&n, |i| i != 5);
        assert_eq!(m.misses, Some(3));
        let m = MetricCounters::pick(&n, |_| true);
        assert_eq!(m.misses, Some(5));
        // Nothing counted: still the preferred one (its metrics are then 0).
        let m = MetricCounters::pick(&n, |_| false);
        assert_eq!(m.misses, Some(5));
        assert_eq!(
            (m.cycles, m.instructions, m.backend_stalls),
            (Some(0), Some(1), Some(4))
        );
        // L1D refills alone are no memory traffic.
        let m = MetricCounters::pick(&names(&["cycles", "l1d-cache-refill"]), |_| true);
        assert_eq!(m.misses, None);
        // Arm names as another tool writes them.
        let m = MetricCounters::pick(&names(&["CPU_CYCLES", "STALL_BACKEND"]), |_| true);
        assert_eq!((m.cycles, m.backend_stalls), (Some(0), Some(1)));
    }

    #[test]
    fn metrics_from_sums() {
        let m = MetricCounters {
            cycles: Some(0),
            instructions: Some(1),
            misses: Some(2),
            backend_stalls: Some(3),
        };
        let sums = [4000u64, 6000, 30, 1000];
        let d = Derived::compute(&m, |i| sums.get(i).copied(), 1920);
        assert_eq!(d.ipc, Some(1.5));
        assert_eq!(d.miss_bandwidth_gbps, Some(1.0)); // 30 × 64 B / 1920 ns
        assert_eq!(d.mpki, Some(5.0));
        assert_eq!(d.stall_ratio, Some(0.25));
        let none = Derived::compute(&m, |_| None, 1920);
        assert_eq!(none, Derived::default());
        let zero = Derived::compute(&m, |_| Some(0), 0);
        assert_eq!(zero, Derived::default());
    }
}
