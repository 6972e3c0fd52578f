//! Per-thread performance counters read by the operator probes (seed 002 §3.4).
//!
//! For each target thread the collector opens one perf event per counter with
//! `pid = tid, cpu = -1, inherit = 0` (exact per-thread attribution; `shared/reference.md`)
//! and stores the fds into the `COUNTERS` perf-event array at `slot * n + i` with a raw
//! `BPF_MAP_UPDATE_ELEM` (aya 0.14 cannot store foreign fds); `PMC_SLOTS` maps the tid
//! to its slot. New threads get counters when the collector sees their `TaskNew` event:
//! operators they run before that (microseconds) carry no counter readings.
//!
//! Counter names are per architecture ([`catalog`]: perf's generic events on x86-64, Arm
//! PMUv3 common events on arm64, software counters everywhere). Without names the
//! default set of the build's architecture is tried, and what this machine cannot open
//! (no PMU in a VM, an event the core does not implement) is dropped with one note.
//!
//! # big.LITTLE
//!
//! A board with two or three core types has one CPU PMU per type
//! (`armv8_cortex_a55` with `cpus` 0-3, `armv8_cortex_a76` with 4-7; [`pmu`]). A
//! per-thread event of one of them counts only while the thread runs on that PMU's
//! cores: on the others arm_pmu filters it out (`armpmu_filter`), and its *enabled* time
//! keeps growing while its *running* time does not, so perf's enabled / running scaling
//! would extrapolate the big cores' rate over time spent on the little ones.
//!
//! The design: every hardware counter is opened once per CPU PMU, with that PMU's own
//! `type` and the same event number, and the probes sum the copies of a counter — counts
//! and running times summed, the enabled time of one copy — so the scaled delta is exact
//! when nothing multiplexes (a thread runs on one core at a time, so the running times of
//! the copies add up to the enabled time) and perf's usual estimate when something does.
//! Copy `p` of counter `i` of slot `s` is at `COUNTERS[s * n * pmus + p * n + i]`
//! ([`PmcSet::map_index`], [`PmcSet::pmu_copies`]); software counters have copy 0 only.
//! That needs the probes to read the copies ([`BPF_SUMS_PMU_COPIES`]).
//!
//! Until they do, each thread's hardware counters are opened on one PMU: the one covering
//! most of the CPUs the thread's affinity allows (ties: the faster cores), read without
//! scaling, so an operator's counts are exactly what it did on those cores and nothing
//! of what it did on the others; the trace says so in one note. Pinning the target to
//! one core type (`taskset -c 4-7 profinfer record ...`) makes the counts complete
//! either way. The alternative of choosing the PMU from the CPU a thread is on when its
//! counters are opened was rejected: the scheduler moves threads between clusters at
//! will, so it would be the same partial count, chosen by chance.

pub mod catalog;
mod map;
pub mod pmu;

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

use common::{control::MAX_PMC_THREADS, event::MAX_PMC};
use trace_format::CounterInfo;

pub use catalog::{Arch, CounterSpec, Event};
use catalog::{PERF_TYPE_HARDWARE, PERF_TYPE_RAW, PERF_TYPE_SOFTWARE};
use pmu::{CpuPmu, Sysfs};

use map::map_store_fd;
pub use map::{BPFFS, create_pinned_counter_map};

use crate::perf_event::PerfEventAttr;

/// Whether the probes sum a hardware counter's copies on several CPU PMUs (see
/// [big.LITTLE](self#biglittle)). Off until `tracer-ebpf` reads `pmc_pmus` copies; while
/// off, a machine with several CPU PMUs gets one PMU per thread.
pub const BPF_SUMS_PMU_COPIES: bool = false;

/// Entries of the `COUNTERS` perf-event array the loader creates.
pub const COUNTERS_MAP_LEN: u32 = MAX_PMC_THREADS * MAX_PMC as u32;

/// Looks a counter of this build's architecture up by name.
pub fn counter_by_name(name: &str) -> Option<CounterSpec> {
    catalog::lookup(Arch::BUILD, name)
}

/// Errors of counter setup.
#[derive(Debug, thiserror::Error)]
pub enum PmcError {
    /// An unknown counter name.
    #[error("unknown counter `{name}`; counters on {arch}: {known}")]
    Unknown {
        /// The name.
        name: String,
        /// The architecture whose names were searched.
        arch: &'static str,
        /// Every name it knows.
        known: String,
    },
    /// Too many counters.
    #[error("at most {MAX_PMC} counters can be read per operator, {count} asked")]
    TooMany {
        /// Number asked for.
        count: usize,
    },
    /// Storing a counter fd into the BPF map failed.
    #[error("storing counter fd in the BPF map failed")]
    MapUpdate {
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// How hardware counters are spread over the CPU PMUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PmuSpread {
    /// One CPU PMU, or none known (x86-64): one event per counter.
    One,
    /// Several: each hardware counter once per PMU, summed by the probes.
    Summed,
    /// Several, the probes read one event per counter: each thread's hardware counters
    /// on the PMU of its cores ([`pmu::pmu_for_cpus`]), read unscaled.
    PerThread,
}

/// One event opened for a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    /// Index of its CPU PMU in [`PmcSet::pmus`] (`None`: generic, raw or software).
    pub pmu: Option<usize>,
    /// `perf_event_attr.type`.
    pub perf_type: u32,
    /// `perf_event_attr.config`.
    pub config: u64,
}

/// A counter as this machine opens it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counter {
    /// What it is.
    pub spec: CounterSpec,
    /// Where it is opened: one target, or one per CPU PMU implementing the event.
    pub targets: Vec<Target>,
}

/// `perf_event_open(attr, pid = tid, cpu = -1)`: counts the thread on any CPU (of the
/// target's PMU), no inherit.
pub fn open_target(target: Target, tid: i32) -> std::io::Result<OwnedFd> {
    crate::perf_event::open(
        &PerfEventAttr::new(target.perf_type, target.config),
        tid,
        -1,
    )
}

/// The counters chosen for a recording, and the fds opened per thread.
#[derive(Debug)]
pub struct PmcSet {
    counters: Vec<Counter>,
    pmus: Vec<CpuPmu>,
    spread: PmuSpread,
    notes: Vec<String>,
    next_slot: u32,
    slots: std::collections::HashMap<u32, u32>,
    fds: Vec<OwnedFd>,
}

/// Counters that could not be opened, grouped by why (for the one note).
#[derive(Default)]
struct Missing(Vec<(String, Vec<&'static str>)>);

impl Missing {
    fn add(&mut self, name: &'static str, why: String) {
        match self.0.iter_mut().find(|(w, _)| *w == why) {
            Some((_, names)) => names.push(name),
            None => self.0.push((why, vec![name])),
        }
    }

    fn note(&self, kept: &[Counter]) -> Option<String> {
        if self.0.is_empty() {
            return None;
        }
        let groups: Vec<String> = self
            .0
            .iter()
            .map(|(why, names)| format!("{} ({why})", names.join(", ")))
            .collect();
        let kept: Vec<&str> = kept.iter().map(|c| c.spec.name).collect();
        Some(format!(
            "counters unavailable on this machine: {}; recording {}",
            groups.join("; "),
            if kept.is_empty() {
                "no counters".to_owned()
            } else {
                kept.join(", ")
            }
        ))
    }
}

impl PmcSet {
    /// Chooses counters: `requested` names, or (empty) the default set of this build's
    /// architecture ([`catalog::defaults`]), on this machine's CPU PMUs (sysfs). Counters
    /// that cannot be opened here are dropped with one note.
    ///
    /// # Errors
    /// An unknown name, or more than `MAX_PMC` names.
    pub fn choose(requested: &[String]) -> Result<PmcSet, PmcError> {
        let mut notes = Vec::new();
        let pmus = if Arch::BUILD == Arch::Aarch64 {
            pmu::discover(&Sysfs::real()).unwrap_or_else(|e| {
                notes.push(format!(
                    "the CPU PMUs could not be read from sysfs ({e}): events go to the \
                     default CPU PMU (PERF_TYPE_RAW)"
                ));
                Vec::new()
            })
        } else {
            Vec::new()
        };
        let me = gettid();
        let mut set = PmcSet::choose_in(
            requested,
            Arch::BUILD,
            pmus,
            BPF_SUMS_PMU_COPIES,
            &mut |t| open_target(t, me).map(drop),
        )?;
        notes.append(&mut set.notes);
        set.notes = notes;
        Ok(set)
    }

    /// [`PmcSet::choose`] for `arch` on `pmus`, with `try_open` telling whether an event
    /// opens (on the collector's own thread) and `sums_copies` whether the probes sum
    /// copies on several PMUs.
    ///
    /// # Errors
    /// An unknown name, or more than `MAX_PMC` names.
    pub fn choose_in(
        requested: &[String],
        arch: Arch,
        pmus: Vec<CpuPmu>,
        sums_copies: bool,
        try_open: &mut dyn FnMut(Target) -> std::io::Result<()>,
    ) -> Result<PmcSet, PmcError> {
        let mut notes = Vec::new();
        let wanted: Vec<CounterSpec> = if requested.is_empty() {
            catalog::defaults(arch)
        } else {
            let mut wanted = Vec::new();
            for name in requested {
                let c = catalog::lookup(arch, name).ok_or_else(|| PmcError::Unknown {
                    name: name.clone(),
                    arch: arch.name(),
                    known: catalog::known_names(arch),
                })?;
                if c.name == "l1d-cache-refill" && catalog::normalize(name) == "cache-misses" {
                    notes.push(
                        "`cache-misses` on arm64 is L1D_CACHE_REFILL (the kernel's mapping of \
                         the generic event), recorded as l1d-cache-refill; last-level misses \
                         are l2d-cache-refill, l3d-cache-refill or ll-cache-miss-rd"
                            .to_owned(),
                    );
                }
                if !wanted.contains(&c) {
                    wanted.push(c);
                }
            }
            if wanted.len() > MAX_PMC {
                return Err(PmcError::TooMany {
                    count: wanted.len(),
                });
            }
            wanted
        };
        let spread = match (arch, pmus.len()) {
            (Arch::Aarch64, n) if n > 1 && sums_copies => PmuSpread::Summed,
            (Arch::Aarch64, n) if n > 1 => PmuSpread::PerThread,
            _ => PmuSpread::One,
        };
        let mut counters: Vec<Counter> = Vec::new();
        let mut missing = Missing::default();
        for spec in wanted {
            if counters.len() == MAX_PMC {
                break;
            }
            let candidates: Vec<Target> = match spec.event {
                Event::Generic(config) => vec![Target {
                    pmu: None,
                    perf_type: PERF_TYPE_HARDWARE,
                    config,
                }],
                Event::Software(config) => vec![Target {
                    pmu: None,
                    perf_type: PERF_TYPE_SOFTWARE,
                    config,
                }],
                Event::ArmV8 { .. } if pmus.is_empty() => vec![Target {
                    pmu: None,
                    perf_type: PERF_TYPE_RAW,
                    config: spec.config(),
                }],
                Event::ArmV8 { .. } => {
                    let sysfs = spec.sysfs_name().unwrap_or_default();
                    pmus.iter()
                        .enumerate()
                        .filter(|(_, p)| p.implements(&sysfs))
                        .map(|(i, p)| Target {
                            pmu: Some(i),
                            perf_type: p.perf_type,
                            config: spec.config(),
                        })
                        .collect()
                }
            };
            if candidates.is_empty() {
                let names: Vec<&str> = pmus.iter().map(|p| p.name.as_str()).collect();
                missing.add(
                    spec.name,
                    format!("not implemented by {}", names.join(", ")),
                );
                continue;
            }
            let mut targets = Vec::new();
            let mut error = None;
            for t in candidates {
                match try_open(t) {
                    Ok(()) => targets.push(t),
                    Err(e) => error = Some(e),
                }
            }
            match error {
                Some(e) if targets.is_empty() => missing.add(spec.name, e.to_string()),
                _ => counters.push(Counter { spec, targets }),
            }
        }
        notes.extend(missing.note(&counters));
        if spread != PmuSpread::One && counters.iter().any(|c| c.spec.is_hardware()) {
            let list: Vec<String> = pmus
                .iter()
                .map(|p| format!("{}: cpus {}", p.name, p.cpu_list()))
                .collect();
            notes.push(match spread {
                PmuSpread::Summed => format!(
                    "{} CPU PMUs ({}): each hardware counter is opened on every one and the \
                     probes sum them",
                    pmus.len(),
                    list.join(", ")
                ),
                _ => format!(
                    "{} CPU PMUs ({}): each thread's hardware counters are opened on one, the \
                     PMU of most of the CPUs its affinity allows (ties: the faster cores), and \
                     count only while the thread runs on its cores (unscaled); pin the target \
                     to one core type (taskset -c <cpus>) for complete counts",
                    pmus.len(),
                    list.join(", ")
                ),
            });
        }
        Ok(PmcSet {
            counters,
            pmus,
            spread,
            notes,
            next_slot: 0,
            slots: Default::default(),
            fds: Vec::new(),
        })
    }

    /// No counters at all (counters switched off).
    pub fn none() -> PmcSet {
        PmcSet {
            counters: Vec::new(),
            pmus: Vec::new(),
            spread: PmuSpread::One,
            notes: Vec::new(),
            next_slot: 0,
            slots: Default::default(),
            fds: Vec::new(),
        }
    }

    /// Number of counters per thread.
    pub fn len(&self) -> usize {
        self.counters.len()
    }

    /// True when no counter is recorded.
    pub fn is_empty(&self) -> bool {
        self.counters.is_empty()
    }

    /// The counters, in trace order.
    pub fn counters(&self) -> &[Counter] {
        &self.counters
    }

    /// The CPU PMUs found (arm64; empty elsewhere).
    pub fn pmus(&self) -> &[CpuPmu] {
        &self.pmus
    }

    /// How hardware counters are spread over the CPU PMUs.
    pub fn spread(&self) -> PmuSpread {
        self.spread
    }

    /// Copies of each hardware counter per thread: the number of CPU PMUs when the
    /// probes sum them ([`PmuSpread::Summed`]), else 1. The probes' `pmc_pmus`.
    pub fn pmu_copies(&self) -> u32 {
        match self.spread {
            PmuSpread::Summed => self.pmus.len() as u32,
            PmuSpread::One | PmuSpread::PerThread => 1,
        }
    }

    /// Index in `COUNTERS` of copy `copy` of counter `i` of slot `slot`:
    /// `slot * n * copies + copy * n + i` (`slot * n + i` with one copy, as before).
    pub fn map_index(&self, slot: u32, copy: u32, i: u32) -> u32 {
        let n = self.counters.len() as u32;
        slot * n * self.pmu_copies() + copy * n + i
    }

    /// Threads that fit in the `COUNTERS` map.
    fn max_slots(&self) -> u32 {
        let per_slot = (self.counters.len() as u32 * self.pmu_copies()).max(1);
        MAX_PMC_THREADS.min(COUNTERS_MAP_LEN / per_slot)
    }

    /// Bit `c` set for each counter read with enabled/running times for multiplexing
    /// (see `TracerControl::pmc_scaled`): the hardware counters, unless each thread's
    /// count on one PMU of several ([`PmuSpread::PerThread`]) is read as counted.
    pub fn scaled_mask(&self) -> u32 {
        if self.spread == PmuSpread::PerThread {
            return 0;
        }
        self.counters
            .iter()
            .enumerate()
            .filter(|(_, c)| c.spec.is_hardware())
            .fold(0, |m, (i, _)| m | 1 << i)
    }

    /// Notes to print once and store in the trace (fallbacks).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The counter table for the trace header: the name, and in `source` which event it
    /// really is (`hardware (armv8_cortex_a55 type 8 + armv8_cortex_a76 type 9, summed:
    /// raw 0x17 L2D_CACHE_REFILL)`); `perf_type` is the first event's.
    pub fn infos(&self) -> Vec<CounterInfo> {
        self.counters
            .iter()
            .map(|c| CounterInfo {
                name: c.spec.name.to_owned(),
                source: self.source(c),
                perf_type: c.targets.first().map_or(0, |t| t.perf_type),
                perf_config: c.spec.config(),
            })
            .collect()
    }

    fn source(&self, c: &Counter) -> String {
        match c.spec.event {
            Event::Software(config) => format!("software (PERF_TYPE_SOFTWARE {config})"),
            Event::Generic(config) => {
                format!("hardware (PERF_TYPE_HARDWARE {config}, the CPU PMU's mapping)")
            }
            Event::ArmV8 { number, arm_name } => {
                let pmus: Vec<String> = c
                    .targets
                    .iter()
                    .map(|t| match t.pmu.and_then(|p| self.pmus.get(p)) {
                        Some(p) => format!("{} type {}", p.name, p.perf_type),
                        None => "PERF_TYPE_RAW".to_owned(),
                    })
                    .collect();
                let how = match (self.spread, pmus.len()) {
                    (_, 1) => String::new(),
                    (PmuSpread::Summed, _) => ", summed".to_owned(),
                    _ => ", one per thread".to_owned(),
                };
                format!(
                    "hardware ({}{how}: raw {number:#04x} {arm_name})",
                    pmus.join(if how.is_empty() { "" } else { " + " })
                )
            }
        }
    }

    /// The events to open for a thread whose affinity is `affinity` (`None`: unknown):
    /// `(copy, counter index, target)`. With [`PmuSpread::PerThread`] the hardware
    /// counters go to one PMU ([`pmu::pmu_for_cpus`]) and the second value is that PMU.
    fn plan_thread(&self, affinity: Option<&[u32]>) -> (Vec<(u32, u32, Target)>, Option<usize>) {
        let chosen = match (self.spread, affinity) {
            (PmuSpread::PerThread, Some(cpus)) => pmu::pmu_for_cpus(&self.pmus, cpus),
            (PmuSpread::PerThread, None) => pmu::pmu_for_cpus(&self.pmus, &[]),
            _ => None,
        }
        .and_then(|p| self.pmus.iter().position(|q| q == p));
        let mut plan = Vec::new();
        for (i, c) in self.counters.iter().enumerate() {
            for t in &c.targets {
                let copy = match (self.spread, t.pmu) {
                    (PmuSpread::Summed, Some(p)) => p as u32,
                    (PmuSpread::PerThread, Some(p)) if Some(p) != chosen => continue,
                    _ => 0,
                };
                plan.push((copy, i as u32, *t));
            }
        }
        (plan, chosen)
    }

    /// Opens the counters of `tid` and stores them at a new slot of `counters_map`.
    /// Returns `(slot, opened mask)`, or `None` when the thread already has a slot or
    /// the slots are exhausted. Bit `i` of the mask: at least one copy of counter `i`
    /// opened.
    ///
    /// # Errors
    /// Storing an fd in the map failed.
    pub fn open_thread(
        &mut self,
        tid: u32,
        counters_map: BorrowedFd<'_>,
    ) -> Result<Option<(u32, u32)>, PmcError> {
        if self.counters.is_empty()
            || self.slots.contains_key(&tid)
            || self.next_slot >= self.max_slots()
        {
            return Ok(None);
        }
        let slot = self.next_slot;
        self.next_slot += 1;
        let affinity = match self.spread {
            PmuSpread::PerThread => pmu::thread_affinity(tid as i32),
            _ => None,
        };
        let (plan, chosen) = self.plan_thread(affinity.as_deref());
        if let (Some(cpus), Some(p)) = (&affinity, chosen.and_then(|p| self.pmus.get(p))) {
            let elsewhere: Vec<u32> = cpus
                .iter()
                .copied()
                .filter(|c| !p.cpus.contains(c))
                .collect();
            if !elsewhere.is_empty() {
                let note = format!(
                    "hardware counters count on {} (cpus {}) only: the target's threads may \
                     also run on cpus {}, where their operators count nothing",
                    p.name,
                    p.cpu_list(),
                    pmu::format_cpu_list(&elsewhere)
                );
                if !self.notes.contains(&note) {
                    self.notes.push(note);
                }
            }
        }
        let mut mask = 0u32;
        for (copy, i, target) in plan {
            if let Ok(fd) = open_target(target, tid as i32) {
                map_store_fd(counters_map, self.map_index(slot, copy, i), fd.as_raw_fd())?;
                self.fds.push(fd);
                mask |= 1 << i;
            }
        }
        self.slots.insert(tid, slot);
        Ok(Some((slot, mask)))
    }
}

/// The calling thread's id.
pub fn gettid() -> i32 {
    // SAFETY: no preconditions.
    unsafe { libc::gettid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pmu(name: &str, perf_type: u32, cpus: std::ops::Range<u32>, missing: &[&str]) -> CpuPmu {
        let events = catalog::ARMV8
            .iter()
            .filter_map(CounterSpec::sysfs_name)
            .filter(|e| !missing.contains(&e.as_str()))
            .collect();
        CpuPmu {
            name: name.to_owned(),
            perf_type,
            cpus: cpus.collect(),
            events: Some(events),
            capacity: None,
        }
    }

    fn names(set: &PmcSet) -> Vec<&'static str> {
        set.counters().iter().map(|c| c.spec.name).collect()
    }

    #[test]
    fn names_resolve_and_unknown_is_refused() {
        assert_eq!(counter_by_name("task-clock").map(|c| c.config()), Some(1));
        assert!(counter_by_name("cycles").is_some_and(|c| c.is_hardware()));
        let err = PmcSet::choose(&["bogus".into()]).unwrap_err();
        assert!(matches!(err, PmcError::Unknown { .. }));
        // One line listing every name of this architecture.
        let text = err.to_string();
        assert!(!text.contains('\n'));
        assert!(text.contains("cycles") && text.contains("context-switches"));
        let arm = PmcSet::choose_in(
            &["L9_CACHE".into()],
            Arch::Aarch64,
            vec![],
            false,
            &mut |_| Ok(()),
        )
        .unwrap_err()
        .to_string();
        assert!(arm.contains("on arm64") && arm.contains("ll-cache-miss-rd (LL_CACHE_MISS_RD)"));
        let nine: Vec<String> = catalog::ARMV8[..9].iter().map(|c| c.name.into()).collect();
        assert!(matches!(
            PmcSet::choose_in(&nine, Arch::Aarch64, vec![], false, &mut |_| Ok(())),
            Err(PmcError::TooMany { count: 9 })
        ));
    }

    /// This machine: an x86-64 VM without a PMU (perf_event_open gives ENOENT for
    /// hardware events).
    #[test]
    fn x86_without_pmu_records_software_with_one_note() {
        let set = PmcSet::choose_in(&[], Arch::X86_64, vec![], false, &mut |t| {
            if t.perf_type == PERF_TYPE_HARDWARE {
                Err(std::io::Error::from_raw_os_error(libc::ENOENT))
            } else {
                Ok(())
            }
        })
        .unwrap();
        assert_eq!(
            names(&set),
            [
                "task-clock",
                "page-faults",
                "major-faults",
                "context-switches"
            ]
        );
        assert_eq!(set.notes().len(), 1);
        assert!(set.notes()[0].starts_with(
            "counters unavailable on this machine: cycles, instructions, cache-misses, \
             stalled-cycles-backend (No such file or directory"
        ));
        assert_eq!(set.scaled_mask(), 0);
        assert_eq!(set.infos()[0].source, "software (PERF_TYPE_SOFTWARE 1)");
    }

    #[test]
    fn x86_with_pmu_keeps_todays_set() {
        let set = PmcSet::choose_in(&[], Arch::X86_64, vec![], false, &mut |_| Ok(())).unwrap();
        assert_eq!(set.len(), MAX_PMC);
        assert_eq!(set.scaled_mask(), 0b1111);
        let info = &set.infos()[2];
        assert_eq!(
            (info.name.as_str(), info.perf_type, info.perf_config),
            ("cache-misses", 0, 3)
        );
    }

    /// The qemu arm64 guest: one `armv8_pmuv3` PMU whose PMCEID lacks INST_RETIRED
    /// unless qemu runs with `-icount`.
    #[test]
    fn arm_single_pmu_default_set() {
        let qemu = vec![pmu("armv8_pmuv3", 8, 0..2, &["inst_retired"])];
        let set = PmcSet::choose_in(&[], Arch::Aarch64, qemu, false, &mut |_| Ok(())).unwrap();
        assert_eq!(
            names(&set),
            [
                "cycles",
                "l1d-cache-refill",
                "l2d-cache-refill",
                "stalled-cycles-backend",
                "stalled-cycles-frontend",
                "mem-access",
                "major-faults",
                "task-clock"
            ]
        );
        assert_eq!(
            set.notes(),
            [
                "counters unavailable on this machine: instructions (not implemented by \
              armv8_pmuv3); recording cycles, l1d-cache-refill, l2d-cache-refill, \
              stalled-cycles-backend, stalled-cycles-frontend, mem-access, major-faults, \
              task-clock"
            ]
        );
        assert_eq!(set.spread(), PmuSpread::One);
        assert_eq!(set.scaled_mask(), 0b11_1111);
        let info = &set.infos()[2];
        assert_eq!(info.name, "l2d-cache-refill");
        assert_eq!(
            info.source,
            "hardware (armv8_pmuv3 type 8: raw 0x17 L2D_CACHE_REFILL)"
        );
        assert_eq!((info.perf_type, info.perf_config), (8, 0x17));
        // With -icount and every event: 7 hardware counters, then major faults.
        let full = vec![pmu("armv8_pmuv3", 8, 0..2, &[])];
        let set = PmcSet::choose_in(&[], Arch::Aarch64, full, false, &mut |_| Ok(())).unwrap();
        assert_eq!(set.len(), MAX_PMC);
        assert_eq!(names(&set)[1], "instructions");
        assert_eq!(names(&set)[7], "major-faults");
        assert!(set.notes().is_empty());
    }

    #[test]
    fn arm_without_sysfs_uses_raw_and_cache_misses_says_what_it_is() {
        let set = PmcSet::choose_in(
            &[
                "cycles".into(),
                "cache-misses".into(),
                "STALL_BACKEND".into(),
            ],
            Arch::Aarch64,
            vec![],
            false,
            &mut |_| Ok(()),
        )
        .unwrap();
        assert_eq!(
            names(&set),
            ["cycles", "l1d-cache-refill", "stalled-cycles-backend"]
        );
        assert!(set.notes()[0].starts_with("`cache-misses` on arm64 is L1D_CACHE_REFILL"));
        let info = &set.infos()[1];
        assert_eq!(
            info.source,
            "hardware (PERF_TYPE_RAW: raw 0x03 L1D_CACHE_REFILL)"
        );
        assert_eq!((info.perf_type, info.perf_config), (PERF_TYPE_RAW, 3));
    }

    fn rk3588() -> Vec<CpuPmu> {
        vec![
            pmu("armv8_cortex_a55", 8, 0..4, &["l3d_cache_refill"]),
            pmu("armv8_cortex_a76", 9, 4..8, &[]),
        ]
    }

    #[test]
    fn big_little_one_pmu_per_thread_until_the_probes_sum() {
        let asked: Vec<String> = ["cycles", "l3d-cache-refill", "task-clock"]
            .map(String::from)
            .to_vec();
        let set =
            PmcSet::choose_in(&asked, Arch::Aarch64, rk3588(), false, &mut |_| Ok(())).unwrap();
        assert_eq!(set.spread(), PmuSpread::PerThread);
        assert_eq!(set.pmu_copies(), 1);
        assert_eq!(set.scaled_mask(), 0, "one PMU's count is read as counted");
        assert_eq!(set.notes().len(), 1);
        assert!(
            set.notes()[0]
                .starts_with("2 CPU PMUs (armv8_cortex_a55: cpus 0-3, armv8_cortex_a76: cpus 4-7)")
        );
        assert_eq!(
            set.infos()[0].source,
            "hardware (armv8_cortex_a55 type 8 + armv8_cortex_a76 type 9, one per thread: \
             raw 0x11 CPU_CYCLES)"
        );
        // A thread pinned to the little cores: cycles on the A55 PMU, no L3 refills
        // there, task-clock.
        let (plan, chosen) = set.plan_thread(Some(&[0, 1, 2, 3]));
        assert_eq!(chosen, Some(0));
        let opened: Vec<(u32, u32, u32)> =
            plan.iter().map(|(c, i, t)| (*c, *i, t.perf_type)).collect();
        assert_eq!(opened, [(0, 0, 8), (0, 2, PERF_TYPE_SOFTWARE)]);
        // An unpinned thread: the big cores.
        let all: Vec<u32> = (0..8).collect();
        let (plan, chosen) = set.plan_thread(Some(&all));
        assert_eq!(chosen, Some(1));
        assert_eq!(plan.len(), 3);
        assert!(plan.iter().all(|(c, _, t)| *c == 0 && t.pmu != Some(0)));
        assert_eq!(set.map_index(3, 0, 2), 3 * 3 + 2);
    }

    #[test]
    fn big_little_copies_per_pmu_when_the_probes_sum() {
        let set = PmcSet::choose_in(&[], Arch::Aarch64, rk3588(), true, &mut |_| Ok(())).unwrap();
        assert_eq!(set.spread(), PmuSpread::Summed);
        assert_eq!(set.pmu_copies(), 2);
        assert_eq!(set.len(), MAX_PMC);
        assert_eq!(set.scaled_mask(), 0b111_1111);
        assert_eq!(set.max_slots(), 128);
        assert_eq!(
            set.infos()[0].source,
            "hardware (armv8_cortex_a55 type 8 + armv8_cortex_a76 type 9, summed: raw 0x11 \
             CPU_CYCLES)"
        );
        let (plan, chosen) = set.plan_thread(None);
        assert_eq!(chosen, None);
        // 7 hardware counters × 2 PMUs + 1 software counter at copy 0.
        assert_eq!(plan.len(), 15);
        assert!(plan.contains(&(
            1,
            0,
            Target {
                pmu: Some(1),
                perf_type: 9,
                config: 0x11
            }
        )));
        assert!(
            plan.iter()
                .filter(|(_, i, _)| *i == 7)
                .all(|(c, ..)| *c == 0)
        );
        // Slot 2, copy 1, counter 3 of 8: 2·16 + 8 + 3.
        assert_eq!(set.map_index(2, 1, 3), 43);
    }

    #[test]
    fn a_counter_no_pmu_opens_is_dropped() {
        let set = PmcSet::choose_in(
            &["cycles".into(), "bus-access".into()],
            Arch::Aarch64,
            rk3588(),
            true,
            &mut |t| {
                if t.config == 0x19 {
                    Err(std::io::Error::from_raw_os_error(libc::EOPNOTSUPP))
                } else {
                    Ok(())
                }
            },
        )
        .unwrap();
        assert_eq!(names(&set), ["cycles"]);
        assert!(set.notes()[0].starts_with("counters unavailable on this machine: bus-access ("));
    }
}
