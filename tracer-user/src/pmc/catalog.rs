//! Counter names per architecture (the names `--counters` takes and the trace header's
//! counter table carries).
//!
//! - **x86-64** (and any other architecture but arm64): perf's generic hardware events
//!   (`PERF_TYPE_HARDWARE`), which the CPU's PMU driver maps: `cycles`, `instructions`,
//!   `cache-misses` (last-level cache misses on Intel and AMD), `stalled-cycles-backend`.
//! - **arm64**: Arm PMUv3 common events by number (Arm ARM D17.11 "Common event numbers",
//!   Linux `include/linux/perf/arm_pmuv3.h`), opened with the CPU PMU's own
//!   `perf_event_attr.type` from sysfs (`PERF_TYPE_RAW` when sysfs names none). An event
//!   keeps perf's generic name where the kernel maps the generic event to exactly that
//!   PMUv3 event (`cycles` = CPU_CYCLES, `instructions` = INST_RETIRED,
//!   `stalled-cycles-frontend` / `-backend` = STALL_FRONTEND / STALL_BACKEND), so a trace
//!   from a board and one from a PC compare by name; the others are the Arm name in
//!   lower case with dashes (`l2d-cache-refill`). The Arm name itself (`L2D_CACHE_REFILL`,
//!   any case, `_` or `-`) is accepted too. `cache-misses` is accepted and recorded as
//!   `l1d-cache-refill`: that is what the kernel maps the generic event to on arm64
//!   (`armv8_pmuv3_perf_map`), and it is not the x86 last-level miss.
//! - **Software** counters (`PERF_TYPE_SOFTWARE`), on every architecture: `task-clock`,
//!   `page-faults`, `major-faults`, `context-switches`.

/// `perf_event_attr.type` of perf's generic hardware events.
pub const PERF_TYPE_HARDWARE: u32 = 0;
/// `perf_event_attr.type` of software events.
pub const PERF_TYPE_SOFTWARE: u32 = 1;
/// `perf_event_attr.type` of a raw event of "the" CPU PMU (the first one that accepts it
/// on a machine with several).
pub const PERF_TYPE_RAW: u32 = 4;

/// The architecture whose counter names apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// x86-64: generic hardware events.
    X86_64,
    /// arm64: Arm PMUv3 common events.
    Aarch64,
    /// Anything else: generic hardware events, as on x86-64.
    Other,
}

impl Arch {
    /// The architecture this build runs on.
    pub const BUILD: Arch = if cfg!(target_arch = "x86_64") {
        Arch::X86_64
    } else if cfg!(target_arch = "aarch64") {
        Arch::Aarch64
    } else {
        Arch::Other
    };

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86-64",
            Arch::Aarch64 => "arm64",
            Arch::Other => std::env::consts::ARCH,
        }
    }
}

/// What a counter counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A generic hardware event (`PERF_TYPE_HARDWARE`, `config`).
    Generic(u64),
    /// A software event (`PERF_TYPE_SOFTWARE`, `config`).
    Software(u64),
    /// An Arm PMUv3 common event.
    ArmV8 {
        /// Event number (`config`).
        number: u16,
        /// Architectural name (`L2D_CACHE_REFILL`).
        arm_name: &'static str,
    },
}

/// One counter the user can ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterSpec {
    /// Name in the trace (lower case with dashes).
    pub name: &'static str,
    /// The event.
    pub event: Event,
    /// Other names accepted for it on `--counters` (besides the Arm name).
    pub aliases: &'static [&'static str],
}

impl CounterSpec {
    /// Whether it is a hardware (PMU) counter, which the kernel may multiplex.
    pub fn is_hardware(&self) -> bool {
        !matches!(self.event, Event::Software(_))
    }

    /// The event's name in an arm64 PMU's sysfs `events/` directory (`l2d_cache_refill`).
    pub fn sysfs_name(&self) -> Option<String> {
        match self.event {
            Event::ArmV8 { arm_name, .. } => Some(arm_name.to_ascii_lowercase()),
            _ => None,
        }
    }

    /// `perf_event_attr.config`.
    pub fn config(&self) -> u64 {
        match self.event {
            Event::Generic(c) | Event::Software(c) => c,
            Event::ArmV8 { number, .. } => u64::from(number),
        }
    }

    fn matches(&self, normalized: &str) -> bool {
        self.name == normalized
            || self.aliases.contains(&normalized)
            || matches!(self.event, Event::ArmV8 { arm_name, .. }
                if normalize(arm_name) == normalized)
    }
}

const fn generic(name: &'static str, config: u64) -> CounterSpec {
    CounterSpec {
        name,
        event: Event::Generic(config),
        aliases: &[],
    }
}

const fn software(name: &'static str, config: u64) -> CounterSpec {
    CounterSpec {
        name,
        event: Event::Software(config),
        aliases: &[],
    }
}

const fn arm(
    name: &'static str,
    number: u16,
    arm_name: &'static str,
    aliases: &'static [&'static str],
) -> CounterSpec {
    CounterSpec {
        name,
        event: Event::ArmV8 { number, arm_name },
        aliases,
    }
}

/// Generic hardware counters (x86-64 and architectures other than arm64).
pub const GENERIC: [CounterSpec; 4] = [
    generic("cycles", 0),
    generic("instructions", 1),
    generic("cache-misses", 3),
    generic("stalled-cycles-backend", 8),
];

/// Arm PMUv3 common events (arm64). Numbers: Linux `include/linux/perf/arm_pmuv3.h`.
pub const ARMV8: [CounterSpec; 12] = [
    arm("cycles", 0x11, "CPU_CYCLES", &[]),
    arm("instructions", 0x08, "INST_RETIRED", &[]),
    arm(
        "l1d-cache-refill",
        0x03,
        "L1D_CACHE_REFILL",
        &["cache-misses"],
    ),
    arm("l1d-cache", 0x04, "L1D_CACHE", &[]),
    arm("l2d-cache-refill", 0x17, "L2D_CACHE_REFILL", &[]),
    arm("l2d-cache", 0x16, "L2D_CACHE", &[]),
    arm("l3d-cache-refill", 0x2A, "L3D_CACHE_REFILL", &[]),
    arm("ll-cache-miss-rd", 0x37, "LL_CACHE_MISS_RD", &[]),
    arm("stalled-cycles-frontend", 0x23, "STALL_FRONTEND", &[]),
    arm("stalled-cycles-backend", 0x24, "STALL_BACKEND", &[]),
    arm("mem-access", 0x13, "MEM_ACCESS", &[]),
    arm("bus-access", 0x19, "BUS_ACCESS", &[]),
];

/// Software counters (every architecture).
pub const SOFTWARE: [CounterSpec; 4] = [
    software("task-clock", 1),
    software("page-faults", 2),
    software("major-faults", 6),
    software("context-switches", 3),
];

/// The arm64 default: the cycle counter plus six events, as many as the event counters
/// of a Cortex-A55 or A76 (so nothing multiplexes), then software counters.
const ARM_DEFAULT: [&str; 11] = [
    "cycles",
    "instructions",
    "l1d-cache-refill",
    "l2d-cache-refill",
    "stalled-cycles-backend",
    "stalled-cycles-frontend",
    "mem-access",
    // Major faults first: the analyzer's expert table reads them (weights paged in).
    "major-faults",
    "task-clock",
    "page-faults",
    "context-switches",
];

/// Lower case, `_` → `-`: `L2D_CACHE_REFILL` → `l2d-cache-refill`.
pub fn normalize(name: &str) -> String {
    name.trim().to_ascii_lowercase().replace('_', "-")
}

/// The hardware counters of `arch`.
pub fn hardware(arch: Arch) -> &'static [CounterSpec] {
    match arch {
        Arch::Aarch64 => &ARMV8,
        Arch::X86_64 | Arch::Other => &GENERIC,
    }
}

/// Looks a counter of `arch` up by any of its names.
pub fn lookup(arch: Arch, name: &str) -> Option<CounterSpec> {
    let n = normalize(name);
    hardware(arch)
        .iter()
        .chain(SOFTWARE.iter())
        .find(|c| c.matches(&n))
        .copied()
}

/// Every name `arch` knows, for the unknown-name message: each counter's name, with the
/// Arm name and aliases in parentheses.
pub fn known_names(arch: Arch) -> String {
    hardware(arch)
        .iter()
        .chain(SOFTWARE.iter())
        .map(|c| {
            let mut other: Vec<&str> = Vec::new();
            if let Event::ArmV8 { arm_name, .. } = c.event {
                other.push(arm_name);
            }
            other.extend(c.aliases);
            if other.is_empty() {
                c.name.to_owned()
            } else {
                format!("{} ({})", c.name, other.join(", "))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The counters recorded when none are named, best first (the caller drops those the
/// machine cannot open and keeps at most `MAX_PMC`).
pub fn defaults(arch: Arch) -> Vec<CounterSpec> {
    match arch {
        Arch::Aarch64 => ARM_DEFAULT.iter().filter_map(|n| lookup(arch, n)).collect(),
        Arch::X86_64 | Arch::Other => GENERIC.iter().chain(SOFTWARE.iter()).copied().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arm_names_and_aliases_resolve() {
        let a = Arch::Aarch64;
        for name in ["cycles", "CPU_CYCLES", "cpu-cycles", "cpu_cycles"] {
            let c = lookup(a, name).unwrap();
            assert_eq!((c.name, c.config()), ("cycles", 0x11), "{name}");
        }
        assert_eq!(lookup(a, "INST_RETIRED").unwrap().name, "instructions");
        assert_eq!(
            lookup(a, "STALL_BACKEND").unwrap().name,
            "stalled-cycles-backend"
        );
        assert_eq!(lookup(a, "stalled-cycles-backend").unwrap().config(), 0x24);
        assert_eq!(lookup(a, "cache-misses").unwrap().name, "l1d-cache-refill");
        assert_eq!(lookup(a, "L2D_CACHE_REFILL").unwrap().config(), 0x17);
        assert_eq!(lookup(a, "ll-cache-miss-rd").unwrap().config(), 0x37);
        assert_eq!(lookup(a, "l3d-cache-refill").unwrap().config(), 0x2A);
        assert_eq!(
            lookup(a, "l2d-cache-refill")
                .unwrap()
                .sysfs_name()
                .as_deref(),
            Some("l2d_cache_refill")
        );
        assert_eq!(lookup(a, "major-faults").unwrap().config(), 6);
        assert!(lookup(a, "bogus").is_none());
    }

    #[test]
    fn x86_knows_generic_names_only() {
        let x = Arch::X86_64;
        assert_eq!(lookup(x, "cache-misses").unwrap().event, Event::Generic(3));
        assert_eq!(lookup(x, "cycles").unwrap().event, Event::Generic(0));
        assert!(lookup(x, "l2d-cache-refill").is_none());
        assert!(lookup(x, "STALL_BACKEND").is_none());
        assert!(!known_names(x).contains("l1d"));
        assert!(known_names(Arch::Aarch64).contains("l2d-cache-refill (L2D_CACHE_REFILL)"));
    }

    #[test]
    fn arm_numbers_are_distinct_and_defaults_fit() {
        let mut numbers: Vec<u64> = ARMV8.iter().map(CounterSpec::config).collect();
        numbers.sort_unstable();
        numbers.dedup();
        assert_eq!(numbers.len(), ARMV8.len());
        let d = defaults(Arch::Aarch64);
        assert_eq!(d.len(), ARM_DEFAULT.len());
        // Cycle counter + 6 event counters, then software.
        assert_eq!(d.iter().filter(|c| c.is_hardware()).count(), 7);
        assert_eq!(d[7].name, "major-faults");
        let x: Vec<_> = defaults(Arch::X86_64).iter().map(|c| c.name).collect();
        assert_eq!(
            x,
            [
                "cycles",
                "instructions",
                "cache-misses",
                "stalled-cycles-backend",
                "task-clock",
                "page-faults",
                "major-faults",
                "context-switches"
            ]
        );
    }
}
