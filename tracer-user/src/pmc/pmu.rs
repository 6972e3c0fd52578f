//! The CPU PMUs of this machine, read from sysfs.
//!
//! Every PMU the kernel registered is a directory under
//! `/sys/bus/event_source/devices/<pmu>/`: `type` is the number to put in
//! `perf_event_attr.type`, `events/` names the events it offers (an arm64 PMU lists only
//! the common events its core's `PMCEID` registers say are implemented, so an event
//! missing there would count zero), and a CPU PMU has a `cpus` file with the CPUs it
//! counts on (`drivers/perf/arm_pmu.c`, and Intel's hybrid `cpu_core`/`cpu_atom`).
//! Uncore PMUs have `cpumask` instead and software PMUs neither, so "has `cpus`" is the
//! test for a CPU PMU. A big.LITTLE board has one per core type (`armv8_cortex_a55`
//! with `cpus` 0-3, `armv8_cortex_a76` with 4-7); a plain arm64 machine or the qemu
//! guest one (`armv8_pmuv3` or `armv8_pmuv3_0`); a non-hybrid x86-64 machine none (its
//! `cpu` PMU has no `cpus` file).
//!
//! Both roots are parameters ([`Sysfs`]), so the tests run on a fake tree.

use std::{
    collections::BTreeSet,
    io,
    path::{Path, PathBuf},
};

/// Largest CPU number a CPU list may name (a corrupt `0-4294967295` would otherwise
/// allocate gigabytes).
pub const MAX_CPU: u32 = 4095;
/// Most PMU directories read (a machine has a few dozen).
pub const MAX_PMU_DIRS: usize = 1024;

/// Where to read PMUs and CPU capacities.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sysfs {
    /// `/sys/bus/event_source` (the PMUs are in its `devices/`).
    pub event_source: PathBuf,
    /// `/sys/devices/system/cpu` (`cpuN/cpu_capacity`).
    pub cpu: PathBuf,
}

impl Sysfs {
    /// The running kernel's sysfs.
    pub fn real() -> Sysfs {
        Sysfs {
            event_source: PathBuf::from("/sys/bus/event_source"),
            cpu: PathBuf::from("/sys/devices/system/cpu"),
        }
    }

    /// A fake tree under `root` (`root/bus/event_source`, `root/devices/system/cpu`).
    pub fn under(root: &Path) -> Sysfs {
        Sysfs {
            event_source: root.join("bus/event_source"),
            cpu: root.join("devices/system/cpu"),
        }
    }
}

/// One CPU PMU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuPmu {
    /// Directory name (`armv8_cortex_a76`, `armv8_pmuv3_0`, `cpu_core`).
    pub name: String,
    /// `perf_event_attr.type` of its events.
    pub perf_type: u32,
    /// CPUs it counts on, ascending.
    pub cpus: Vec<u32>,
    /// Names in its `events/` directory; `None` when it has none (then nothing is known
    /// about what it implements).
    pub events: Option<BTreeSet<String>>,
    /// Largest `cpu_capacity` of its CPUs (1024 = the fastest core of the system), when
    /// the kernel exposes capacities.
    pub capacity: Option<u32>,
}

impl CpuPmu {
    /// Whether it offers the event named `sysfs_name` in `events/` (`l2d_cache_refill`);
    /// true when the PMU lists no events at all.
    pub fn implements(&self, sysfs_name: &str) -> bool {
        self.events
            .as_ref()
            .is_none_or(|events| events.contains(sysfs_name))
    }

    /// Its CPUs as a CPU list (`0-3,6`).
    pub fn cpu_list(&self) -> String {
        format_cpu_list(&self.cpus)
    }
}

/// Errors of PMU discovery.
#[derive(Debug, thiserror::Error)]
pub enum PmuError {
    /// A sysfs file or directory could not be read.
    #[error("reading {}", path.display())]
    Read {
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A sysfs file did not hold what its kind of file holds.
    #[error("{}: cannot parse `{text}`", path.display())]
    Parse {
        /// The path.
        path: PathBuf,
        /// Its content (trimmed).
        text: String,
    },
}

fn read_text(path: &Path) -> Result<String, PmuError> {
    std::fs::read_to_string(path).map_err(|source| PmuError::Read {
        path: path.to_owned(),
        source,
    })
}

/// The CPU PMUs under `sysfs`, by name. No `devices/` directory (sysfs not mounted, a
/// kernel without perf events): none.
///
/// # Errors
/// A PMU directory with a `cpus` file whose `type` or `cpus` cannot be read or parsed.
pub fn discover(sysfs: &Sysfs) -> Result<Vec<CpuPmu>, PmuError> {
    let devices = sysfs.event_source.join("devices");
    let entries = match std::fs::read_dir(&devices) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(PmuError::Read {
                path: devices,
                source,
            });
        }
    };
    let mut pmus = Vec::new();
    for entry in entries.take(MAX_PMU_DIRS) {
        let entry = entry.map_err(|source| PmuError::Read {
            path: devices.clone(),
            source,
        })?;
        let dir = entry.path();
        let cpus_path = dir.join("cpus");
        if !cpus_path.is_file() {
            continue;
        }
        let type_path = dir.join("type");
        let type_text = read_text(&type_path)?;
        let perf_type = type_text.trim().parse().map_err(|_| PmuError::Parse {
            path: type_path.clone(),
            text: type_text.trim().to_owned(),
        })?;
        let cpus_text = read_text(&cpus_path)?;
        let cpus = parse_cpu_list(&cpus_text).ok_or_else(|| PmuError::Parse {
            path: cpus_path.clone(),
            text: cpus_text.trim().to_owned(),
        })?;
        let events = std::fs::read_dir(dir.join("events")).ok().map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .collect::<BTreeSet<_>>()
        });
        let capacity = cpus
            .iter()
            .filter_map(|c| {
                std::fs::read_to_string(sysfs.cpu.join(format!("cpu{c}/cpu_capacity")))
                    .ok()?
                    .trim()
                    .parse::<u32>()
                    .ok()
            })
            .max();
        pmus.push(CpuPmu {
            name: entry.file_name().to_string_lossy().into_owned(),
            perf_type,
            cpus,
            events,
            capacity,
        });
    }
    pmus.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(pmus)
}

/// Parses a kernel CPU list (`0-3,6,8-9`, maybe with a newline; empty = no CPU).
/// `None` if malformed or naming a CPU above [`MAX_CPU`].
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut cpus = BTreeSet::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo.trim().parse().ok()?, hi.trim().parse().ok()?),
            None => {
                let c: u32 = part.trim().parse().ok()?;
                (c, c)
            }
        };
        if lo > hi || hi > MAX_CPU {
            return None;
        }
        cpus.extend(lo..=hi);
    }
    Some(cpus.into_iter().collect())
}

/// Formats ascending CPU numbers as a kernel CPU list (`0-3,6`).
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// The CPUs thread `tid` may run on (`sched_getaffinity`); `None` if it cannot be read
/// (the thread is gone).
pub fn thread_affinity(tid: i32) -> Option<Vec<u32>> {
    // SAFETY: `cpu_set_t` is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live `cpu_set_t` of the size passed.
    if unsafe { libc::sched_getaffinity(tid, size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return None;
    }
    let max = (8 * size_of::<libc::cpu_set_t>()).min(MAX_CPU as usize + 1);
    Some(
        (0..max)
            // SAFETY: `c` is below the set's bit count.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .map(|c| c as u32)
            .collect(),
    )
}

/// The PMU to count thread `allowed`'s events on when only one can be used: the one
/// covering most of the CPUs the thread may run on; ties go to the faster cores (higher
/// `cpu_capacity`, else higher CPU numbers, which are the big cores on the usual boards:
/// RK3588 numbers its A55s 0-3 and A76s 4-7). `None` without PMUs.
pub fn pmu_for_cpus<'a>(pmus: &'a [CpuPmu], allowed: &[u32]) -> Option<&'a CpuPmu> {
    pmus.iter().max_by_key(|p| {
        let covered = p.cpus.iter().filter(|c| allowed.contains(c)).count();
        (
            covered,
            p.capacity.unwrap_or(0),
            p.cpus.last().copied().unwrap_or(0),
        )
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Writes a fake PMU directory `devices/<name>` under `root`.
    pub(crate) fn fake_pmu(
        root: &Path,
        name: &str,
        perf_type: u32,
        cpus: Option<&str>,
        events: &[&str],
    ) {
        let dir = root.join("bus/event_source/devices").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("type"), format!("{perf_type}\n")).unwrap();
        if let Some(cpus) = cpus {
            std::fs::write(dir.join("cpus"), format!("{cpus}\n")).unwrap();
        }
        if !events.is_empty() {
            std::fs::create_dir_all(dir.join("events")).unwrap();
            for e in events {
                std::fs::write(dir.join("events").join(e), "event=0x0011\n").unwrap();
            }
        }
    }

    fn fake_capacity(root: &Path, cpu: u32, capacity: u32) {
        let dir = root.join(format!("devices/system/cpu/cpu{cpu}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cpu_capacity"), format!("{capacity}\n")).unwrap();
    }

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(
            parse_cpu_list("0-3,6,8-9\n"),
            Some(vec![0, 1, 2, 3, 6, 8, 9])
        );
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("0-4294967295"), None);
        assert_eq!(parse_cpu_list("a"), None);
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn big_little_board_has_two_cpu_pmus() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fake_pmu(
            root,
            "armv8_cortex_a55",
            8,
            Some("0-3"),
            &["cpu_cycles", "inst_retired"],
        );
        fake_pmu(
            root,
            "armv8_cortex_a76",
            9,
            Some("4-7"),
            &["cpu_cycles", "inst_retired", "l3d_cache_refill"],
        );
        // Not CPU PMUs: software (no `cpus`), an uncore PMU (`cpumask`).
        fake_pmu(root, "software", 1, None, &[]);
        fake_pmu(root, "dmc620_0", 10, None, &[]);
        std::fs::write(
            root.join("bus/event_source/devices/dmc620_0/cpumask"),
            "0\n",
        )
        .unwrap();
        for c in 0..4 {
            fake_capacity(root, c, 414);
        }
        for c in 4..8 {
            fake_capacity(root, c, 1024);
        }
        let pmus = discover(&Sysfs::under(root)).unwrap();
        let names: Vec<_> = pmus.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["armv8_cortex_a55", "armv8_cortex_a76"]);
        let (little, big) = (&pmus[0], &pmus[1]);
        assert_eq!((little.perf_type, little.cpu_list()), (8, "0-3".to_owned()));
        assert_eq!((big.perf_type, big.cpu_list()), (9, "4-7".to_owned()));
        assert_eq!((little.capacity, big.capacity), (Some(414), Some(1024)));
        assert!(big.implements("l3d_cache_refill"));
        assert!(!little.implements("l3d_cache_refill"));

        // Unpinned thread: tie on coverage, the big cores win.
        let all: Vec<u32> = (0..8).collect();
        assert_eq!(pmu_for_cpus(&pmus, &all).unwrap().name, "armv8_cortex_a76");
        // Pinned to the little cores (`taskset -c 0-3`).
        assert_eq!(
            pmu_for_cpus(&pmus, &[0, 1, 2, 3]).unwrap().name,
            "armv8_cortex_a55"
        );
    }

    #[test]
    fn single_pmu_without_events_dir_implements_everything() {
        let dir = tempfile::tempdir().unwrap();
        fake_pmu(dir.path(), "armv8_pmuv3_0", 8, Some("0-1"), &[]);
        let pmus = discover(&Sysfs::under(dir.path())).unwrap();
        assert_eq!(pmus.len(), 1);
        assert_eq!(pmus[0].events, None);
        assert!(pmus[0].implements("ll_cache_miss_rd"));
        assert_eq!(pmus[0].capacity, None);
    }

    #[test]
    fn missing_sysfs_is_no_pmu_and_bad_type_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(discover(&Sysfs::under(dir.path())).unwrap(), vec![]);
        fake_pmu(dir.path(), "armv8_pmuv3", 8, Some("0"), &[]);
        std::fs::write(
            dir.path().join("bus/event_source/devices/armv8_pmuv3/type"),
            "eight\n",
        )
        .unwrap();
        assert!(matches!(
            discover(&Sysfs::under(dir.path())),
            Err(PmuError::Parse { .. })
        ));
    }

    #[test]
    fn own_affinity_is_readable() {
        let cpus = thread_affinity(0).unwrap();
        assert!(!cpus.is_empty());
    }
}
