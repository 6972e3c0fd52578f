//! Loading the eBPF object and attaching its programs: uprobe sites on any ELF file, the
//! tail-called programs, the scheduler tracepoints, and the operator probes switched off
//! and on at run time. Which sites a target gets is its plan's (`crate::targets`).

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

use aya::{
    Ebpf, EbpfError, EbpfLoader,
    programs::{
        ProgramError, TracePoint, UProbe,
        uprobe::{UProbeAttachLocation, UProbeLinkId, UProbeScope},
    },
};
use common::{
    control::{LEVEL_SCHED, MAX_PMC_THREADS, RINGS},
    event::{EventKind, MAX_PMC},
};
use trace_format::ProbeInfo;

use crate::{config::BufferKind, counted_uprobe};

/// Why the probes could not be loaded or attached.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The pinned per-thread counter map could not be created (bpffs missing?).
    #[error(
        "creating the per-thread counter map at {} failed (needs bpffs: mount -t bpf bpf /sys/fs/bpf)",
        pin.display()
    )]
    CounterMap {
        /// Where it was to be pinned.
        pin: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The kernel refused the eBPF object (maps or programs).
    #[error(
        "loading the eBPF probes failed (is this kernel built with BPF, uprobes and ring buffers?)"
    )]
    Object {
        /// aya's error (boxed: it is large).
        #[source]
        source: Box<EbpfError>,
    },
    /// The object lacks a program the loader expects (tracer-ebpf and tracer-user disagree).
    #[error("program {program} is missing from the eBPF object")]
    ProgramMissing {
        /// The program name.
        program: &'static str,
    },
    /// A program could not be verified/loaded, or is not of the expected type.
    #[error("loading program {program} failed")]
    ProgramLoad {
        /// The program name.
        program: &'static str,
        /// aya's error (the verifier log for a rejected program).
        #[source]
        source: Box<ProgramError>,
    },
    /// A uprobe or uretprobe could not be attached to the target binary.
    #[error("attaching {attach} to {}:{symbol} failed", exe.display())]
    UprobeAttach {
        /// `uprobe` or `uretprobe`.
        attach: &'static str,
        /// The target binary.
        exe: PathBuf,
        /// The probed symbol.
        symbol: String,
        /// aya's error, or the kernel's for a uprobe with a reference counter.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A uprobe or uretprobe could not be detached.
    #[error("detaching {program} failed")]
    UprobeDetach {
        /// Program name.
        program: &'static str,
        /// Why.
        #[source]
        source: Box<ProgramError>,
    },
    /// A map the probes read could not be written.
    #[error("writing the probes' map {name} failed")]
    MapWrite {
        /// The map.
        name: &'static str,
        /// aya's error.
        #[source]
        source: Box<aya::maps::MapError>,
    },
    /// The CPU-clock sampling program could not be attached to a CPU's timer.
    #[error(
        "attaching the CPU-clock sampler (--sample {hz}) to CPU {cpu} failed (the kernel's \
         perf_event_max_sample_rate below {hz}? perf events not allowed?)"
    )]
    SampleAttach {
        /// The CPU.
        cpu: u32,
        /// The frequency asked for.
        hz: u32,
        /// aya's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A tracepoint could not be attached (tracefs not mounted?).
    #[error("attaching tracepoint {category}:{name} failed")]
    TracepointAttach {
        /// Tracepoint category.
        category: &'static str,
        /// Tracepoint name.
        name: &'static str,
        /// aya's error.
        #[source]
        source: Box<ProgramError>,
    },
}

/// Tracepoints: (program, category, name, event kind). New-thread/exit are always attached
/// (they keep the thread set and counters current).
const TRACEPOINTS: [(&str, &str, &str, EventKind, bool); 5] = [
    (
        "sched_switch",
        "sched",
        "sched_switch",
        EventKind::SchedSwitch,
        true,
    ),
    (
        "sched_wakeup",
        "sched",
        "sched_wakeup",
        EventKind::SchedWakeup,
        true,
    ),
    (
        "sched_wakeup_new",
        "sched",
        "sched_wakeup_new",
        EventKind::SchedWakeupNew,
        true,
    ),
    (
        "task_newtask",
        "task",
        "task_newtask",
        EventKind::TaskNew,
        false,
    ),
    (
        "sched_process_exit",
        "sched",
        "sched_process_exit",
        EventKind::TaskExit,
        false,
    ),
];

/// Loads the probes with the buffer sizes of `buffer`. The per-thread counter map is
/// created and pinned first (see [`crate::pmc::create_pinned_counter_map`]), reused by
/// the loader, and unpinned again.
pub fn load(buffer: BufferKind) -> Result<Ebpf, LoadError> {
    let pin =
        PathBuf::from(crate::pmc::BPFFS).join(format!("profinfer-counters-{}", std::process::id()));
    let _ = std::fs::remove_file(&pin);
    let _counters = crate::pmc::create_pinned_counter_map(MAX_PMC_THREADS * MAX_PMC as u32, &pin)
        .map_err(|source| LoadError::CounterMap {
        pin: pin.clone(),
        source,
    })?;
    let mut loader = EbpfLoader::new();
    loader.map_pin_path("COUNTERS", pin.as_path());
    let sizes = ring_sizes(buffer, &online_cpus());
    for (name, size) in RING_NAMES.iter().zip(sizes) {
        loader.map_max_entries(name, size);
    }
    let ebpf = loader
        .load(crate::EBPF_OBJECT)
        .map_err(|source| LoadError::Object {
            source: Box::new(source),
        });
    let _ = std::fs::remove_file(&pin);
    ebpf
}

/// The ring-buffer maps, ring `i` written by CPUs `i + k·RINGS`.
pub const RING_NAMES: [&str; RINGS as usize] = [
    "EVENTS_0", "EVENTS_1", "EVENTS_2", "EVENTS_3", "EVENTS_4", "EVENTS_5", "EVENTS_6", "EVENTS_7",
];

/// Smallest ring (one page).
const MIN_RING: u32 = 4096;

/// Online CPU ids (just CPU 0 if they cannot be listed).
pub fn online_cpus() -> Vec<u32> {
    aya::util::online_cpus().unwrap_or_else(|_| vec![0])
}

/// Bytes of each ring: `buffer`'s total shared by the rings the online CPUs write, each
/// a power of two of at least one page; the rings no CPU writes get one page.
pub fn ring_sizes(buffer: BufferKind, cpus: &[u32]) -> [u32; RINGS as usize] {
    let mut used = [false; RINGS as usize];
    for &c in cpus {
        used[(c % RINGS) as usize] = true;
    }
    let total = match buffer {
        BufferKind::Ring { bytes } => bytes,
        BufferKind::Perf { .. } => MIN_RING,
    };
    let n = used.iter().filter(|&&u| u).count().max(1) as u32;
    let share = (total / n).max(MIN_RING);
    // The largest power of two not above the share.
    let each = 1u32 << (31 - share.leading_zeros());
    used.map(|u| if u { each } else { MIN_RING })
}

/// Which processes the uprobes trap in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UprobeScope {
    /// Every process that maps the binary (the programs filter by tgid).
    AllProcesses,
    /// Only this process (a per-task perf event; the kernel installs the breakpoints
    /// only in its address space, so other processes of the same binary run untrapped).
    /// Pid 0 means every process.
    OneProcess(u32),
}

impl UprobeScope {
    fn to_aya(self) -> UProbeScope {
        match self {
            UprobeScope::AllProcesses => UProbeScope::AllProcesses,
            UprobeScope::OneProcess(pid) => std::num::NonZeroU32::new(pid)
                .map_or(UProbeScope::AllProcesses, UProbeScope::OneProcess),
        }
    }
}

fn program<'a>(
    ebpf: &'a mut Ebpf,
    name: &'static str,
) -> Result<&'a mut aya::programs::Program, LoadError> {
    ebpf.program_mut(name)
        .ok_or(LoadError::ProgramMissing { program: name })
}

/// One uprobe or uretprobe to attach: which program, on which file, where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UprobeSite {
    /// The eBPF program (a name ending in `_ret` is a uretprobe).
    pub prog: &'static str,
    /// The ELF file (executable or library) probed.
    pub file: PathBuf,
    /// The probed function.
    pub symbol: String,
    /// Offset from the symbol (past an `endbr64`, say); 0 for uretprobes.
    pub offset: u64,
    /// Attached with a reference counter (`counted_uprobe`), if set.
    pub counted: Option<CountedAt>,
}

/// Where a uprobe with a reference counter goes, as file offsets in its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CountedAt {
    /// The probed instruction.
    pub probe: u64,
    /// The 16-bit reference counter.
    pub counter: u64,
}

/// One attached uprobe: an aya link, or the perf event of a uprobe with a reference
/// counter (attached while the fd is open).
#[derive(Debug)]
enum UprobeLink {
    Aya(UProbeLinkId),
    Counted(OwnedFd),
}

impl UprobeSite {
    /// `uprobe` or `uretprobe`.
    pub fn attach_kind(&self) -> &'static str {
        if self.prog.ends_with("_ret") {
            "uretprobe"
        } else {
            "uprobe"
        }
    }
}

/// The operator level's uprobes and uretprobes, which the collector detaches while the
/// operator level is off (QoS or the live view) and attaches again when it comes back:
/// switched off in the control map only, they would still cost the target the kernel's
/// trap (~0.9 µs per operator and thread, `docs/probe-abi.md`) for nothing recorded.
#[derive(Debug)]
pub struct OpProbes {
    sites: Vec<UprobeSite>,
    scope: UprobeScope,
    links: Option<Vec<UprobeLink>>,
}

impl OpProbes {
    /// Takes `other`'s sites (and links) into this set, to switch them together. Both
    /// must be attached, or both detached.
    pub fn absorb(&mut self, other: OpProbes) {
        self.sites.extend(other.sites);
        match (&mut self.links, other.links) {
            (Some(mine), Some(theirs)) => mine.extend(theirs),
            (None, None) => {}
            (mine, theirs) => {
                debug_assert!(false, "absorbing op probes in another attach state");
                *mine = mine.take().or(theirs);
            }
        }
    }

    /// Whether the probes are attached now.
    pub fn attached(&self) -> bool {
        self.links.is_some()
    }

    /// Attaches (`on`) or detaches the operator probes; nothing to do if they already are.
    /// A detached uretprobe whose function is still running just does not fire: that
    /// operator's entry stays unpaired in the trace.
    pub fn set_attached(&mut self, ebpf: &mut Ebpf, on: bool) -> Result<(), LoadError> {
        match (on, self.links.take()) {
            (true, None) => {
                let mut links = Vec::with_capacity(self.sites.len());
                for site in &self.sites {
                    links.push(attach_site(ebpf, site, &mut self.scope)?);
                }
                self.links = Some(links);
            }
            (false, Some(links)) => {
                for (site, link) in self.sites.iter().zip(links) {
                    let link = match link {
                        UprobeLink::Aya(link) => link,
                        // Closing the event detaches it and counts the counter down.
                        UprobeLink::Counted(fd) => {
                            drop(fd);
                            continue;
                        }
                    };
                    let prog = site.prog;
                    let p: &mut UProbe = program(ebpf, prog)?.try_into().map_err(|source| {
                        LoadError::ProgramLoad {
                            program: prog,
                            source: Box::new(source),
                        }
                    })?;
                    p.detach(link).map_err(|source| LoadError::UprobeDetach {
                        program: prog,
                        source: Box::new(source),
                    })?;
                }
            }
            (_, links) => self.links = links,
        }
        Ok(())
    }
}

/// Loads the uprobe program `prog` into the kernel unless it already is.
///
/// # Errors
/// [`LoadError`]: the object has no such program, or the kernel refuses it.
pub fn ensure_loaded(ebpf: &mut Ebpf, prog: &'static str) -> Result<(), LoadError> {
    let load_err = |source| LoadError::ProgramLoad {
        program: prog,
        source: Box::new(source),
    };
    let p: &mut UProbe = program(ebpf, prog)?.try_into().map_err(load_err)?;
    if p.fd().is_err() {
        p.load().map_err(load_err)?;
    }
    Ok(())
}

/// Loads the uprobe program `prog` and puts it into slot `slot` of the program array
/// `map`, for the programs that tail-call it (it is attached nowhere itself).
pub fn set_tail_call(
    ebpf: &mut Ebpf,
    map: &'static str,
    slot: u32,
    prog: &'static str,
) -> Result<(), LoadError> {
    ensure_loaded(ebpf, prog)?;
    let load_err = |source| LoadError::ProgramLoad {
        program: prog,
        source: Box::new(source),
    };
    let fd = program(ebpf, prog)?
        .fd()
        .map_err(load_err)?
        .try_clone()
        .map_err(|e| load_err(ProgramError::IOError(e)))?;
    let map_err = |source| LoadError::MapWrite {
        name: map,
        source: Box::new(source),
    };
    let mut array = aya::maps::ProgramArray::try_from(
        ebpf.map_mut(map)
            .ok_or(LoadError::ProgramMissing { program: map })?,
    )
    .map_err(map_err)?;
    array.set(slot, &fd, 0).map_err(map_err)
}

/// Attaches the loaded program of `site` in the processes `scope` says. A per-process
/// attachment the kernel refuses falls back to every process (`scope` becomes
/// [`UprobeScope::AllProcesses`], with a note on stderr): the probes filter by the
/// target's tgid anyway, only other processes of the same binary then pay the trap.
fn attach_site(
    ebpf: &mut Ebpf,
    site: &UprobeSite,
    scope: &mut UprobeScope,
) -> Result<UprobeLink, LoadError> {
    ensure_loaded(ebpf, site.prog)?;
    let p: &mut UProbe =
        program(ebpf, site.prog)?
            .try_into()
            .map_err(|source| LoadError::ProgramLoad {
                program: site.prog,
                source: Box::new(source),
            })?;
    let attach_err = |source: Box<dyn std::error::Error + Send + Sync>| LoadError::UprobeAttach {
        attach: site.attach_kind(),
        exe: site.file.clone(),
        symbol: site.symbol.clone(),
        source,
    };
    if let Some(at) = site.counted {
        let fd = p.fd().map_err(|source| LoadError::ProgramLoad {
            program: site.prog,
            source: Box::new(source),
        })?;
        // No fallback to every process here: the caller falls back to the per-node
        // probes, which have their own.
        let pid = match *scope {
            UprobeScope::OneProcess(pid) if pid != 0 => Some(pid),
            _ => None,
        };
        let attached = counted_uprobe::attach(fd.as_fd(), &site.file, at.probe, at.counter, pid);
        return attached
            .map(UprobeLink::Counted)
            .map_err(|e| attach_err(Box::new(e)));
    }
    let location = || {
        if site.offset == 0 {
            UProbeAttachLocation::Symbol(&site.symbol)
        } else {
            UProbeAttachLocation::SymbolOffset(&site.symbol, site.offset)
        }
    };
    let attached = match p.attach(location(), &site.file, scope.to_aya()) {
        Err(e) if *scope != UprobeScope::AllProcesses => {
            eprintln!(
                "profinfer: note: per-process uprobes failed ({e}); probing every process that runs {} (filtered by pid in the probes)",
                site.file.display()
            );
            *scope = UprobeScope::AllProcesses;
            p.attach(location(), &site.file, UProbeScope::AllProcesses)
        }
        r => r,
    };
    attached
        .map(UprobeLink::Aya)
        .map_err(|e| attach_err(Box::new(e)))
}

/// Attaches `sites` (in the processes `scope` says) and, when they are the operator
/// level's, returns them as [`OpProbes`] to switch off and on at run time.
pub fn attach_sites(
    ebpf: &mut Ebpf,
    sites: Vec<UprobeSite>,
    scope: &mut UprobeScope,
) -> Result<OpProbes, LoadError> {
    let mut links = Vec::with_capacity(sites.len());
    for site in &sites {
        links.push(attach_site(ebpf, site, scope)?);
    }
    Ok(OpProbes {
        sites,
        scope: *scope,
        links: Some(links),
    })
}

/// The trace header's line for `site` at `point` (probe id `kind`, level `level`).
pub fn probe_info(
    kind: EventKind,
    level: &str,
    site: &UprobeSite,
    point: &crate::probe_points::ProbePoint,
) -> ProbeInfo {
    let entry = site.attach_kind() == "uprobe";
    ProbeInfo {
        id: kind as u32,
        attach: site.attach_kind().into(),
        point: site.symbol.clone(),
        level: level.into(),
        offset: site.offset,
        first_insn: if entry {
            point.attach_insn.clone()
        } else {
            String::new()
        },
        cost_class: if entry {
            point.attach_cost.name().to_owned()
        } else {
            "uretprobe".to_owned()
        },
    }
}

/// The CPU-clock sampler's perf events (`--sample HZ`): the `cpu_sample` program on a
/// `cpu-clock` timer of every online CPU at `hz` (a frequency, as `perf record -F`), for
/// every process; the program keeps the target's samples only. Detached, no timer fires
/// (sampled windows switch them, `--op-windows` with `--sample`).
pub struct SampleProbes {
    hz: u32,
    links: Vec<aya::programs::perf_event::PerfEventLinkId>,
}

/// The `cpu_sample` program's name in the eBPF object.
const SAMPLE_PROG: &str = "cpu_sample";

impl SampleProbes {
    /// Loads the program and attaches it on every online CPU at `hz`.
    ///
    /// # Errors
    /// [`LoadError::ProgramLoad`] or [`LoadError::SampleAttach`].
    pub fn attach(ebpf: &mut Ebpf, hz: u32) -> Result<(Vec<ProbeInfo>, SampleProbes), LoadError> {
        let load_err = |source| LoadError::ProgramLoad {
            program: SAMPLE_PROG,
            source: Box::new(source),
        };
        let p: &mut aya::programs::PerfEvent =
            program(ebpf, SAMPLE_PROG)?.try_into().map_err(load_err)?;
        p.load().map_err(load_err)?;
        let mut probes = SampleProbes {
            hz,
            links: Vec::new(),
        };
        probes.set_attached(ebpf, true)?;
        let info = ProbeInfo {
            id: EventKind::CpuSample as u32,
            attach: "perf_event".into(),
            point: format!("cpu-clock@{hz}Hz"),
            level: "sample".into(),
            offset: 0,
            first_insn: String::new(),
            cost_class: "n/a".into(),
        };
        Ok((vec![info], probes))
    }

    /// Whether the timers are attached now.
    pub fn attached(&self) -> bool {
        !self.links.is_empty()
    }

    /// Attaches (one timer per online CPU) or detaches every timer.
    ///
    /// # Errors
    /// [`LoadError::SampleAttach`] when a CPU's timer cannot be attached.
    pub fn set_attached(&mut self, ebpf: &mut Ebpf, on: bool) -> Result<(), LoadError> {
        use aya::programs::{
            PerfEvent,
            perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
        };
        if on == self.attached() {
            return Ok(());
        }
        let load_err = |source| LoadError::ProgramLoad {
            program: SAMPLE_PROG,
            source: Box::new(source),
        };
        let p: &mut PerfEvent = program(ebpf, SAMPLE_PROG)?.try_into().map_err(load_err)?;
        if !on {
            for link in self.links.drain(..) {
                p.detach(link).map_err(load_err)?;
            }
            return Ok(());
        }
        for cpu in online_cpus() {
            let link = p
                .attach(
                    PerfEventConfig::Software(SoftwareEvent::CpuClock),
                    PerfEventScope::AllProcessesOneCpu { cpu },
                    SamplePolicy::Frequency(u64::from(self.hz)),
                    false,
                )
                .map_err(|source| LoadError::SampleAttach {
                    cpu,
                    hz: self.hz,
                    source: Box::new(source),
                })?;
            self.links.push(link);
        }
        Ok(())
    }
}

/// Attaches the scheduler tracepoints of `levels` and the thread-set ones (every target).
pub fn attach_tracepoints(ebpf: &mut Ebpf, levels: u32) -> Result<Vec<ProbeInfo>, LoadError> {
    let mut table = Vec::new();
    for (prog, category, name, kind, is_sched_level) in TRACEPOINTS {
        if is_sched_level && levels & LEVEL_SCHED == 0 {
            continue;
        }
        let load_err = |source| LoadError::ProgramLoad {
            program: prog,
            source: Box::new(source),
        };
        let p: &mut TracePoint = program(ebpf, prog)?.try_into().map_err(load_err)?;
        p.load().map_err(load_err)?;
        p.attach(category, name)
            .map_err(|source| LoadError::TracepointAttach {
                category,
                name,
                source: Box::new(source),
            })?;
        table.push(ProbeInfo {
            id: kind as u32,
            attach: "tracepoint".into(),
            point: format!("{category}:{name}"),
            level: if is_sched_level {
                "sched"
            } else {
                "thread-set"
            }
            .into(),
            offset: 0,
            first_insn: String::new(),
            cost_class: "n/a".into(),
        });
    }
    Ok(table)
}
