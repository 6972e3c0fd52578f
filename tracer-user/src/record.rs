//! `profinfer record`: start or attach to the target, attach the probes, collect every
//! event into a trace file, adapt levels to the decode rate, and account for every loss.

use std::{
    os::fd::{AsFd, OwnedFd},
    path::PathBuf,
    time::{Duration, Instant},
};

use aya::maps::{
    Array, HashMap as BpfHashMap, Map, MapData, MapError, PerCpuArray, PerfEventArray, RingBuf,
};
use common::{
    control::{
        CONTROL_FLAG_WAKE_ON_DECODE, CONTROL_FLAG_WAKE_ON_GRAPH, CONTROL_INDEX, DETAIL_PMC,
        DETAIL_STRUCTURE, LEVEL_OP, OUTPUT_PERF_BUF, OUTPUT_RING_BUF, STAT_ABI_MISMATCH,
        STAT_ABI_SEEN, STAT_LOST, STAT_PRODUCED, TracerControl,
    },
    event::{EVENT_FLAG_EXIT, EventHeader, EventKind, LossEvent, PmcOpenEvent, QosSwitchEvent},
};
use tokio::io::unix::AsyncFd;
use trace_format::{
    ProbeCost, TargetInfo, TraceError, TraceFooter, TraceHeader, TraceWriter, event_kind_table,
};

use crate::{
    config::{BufferKind, TracerConfig},
    drain::{DrainError, EventSource},
    leaves::LeafResolver,
    load::LoadError,
    observe::{CollectorStatus, NoObserver, RecordObserver, effective_levels},
    pmc::{PmcError, PmcSet},
    privileges::{self, EnvError},
    probe_cost::ProbeCostMeter,
    probe_points::{self, ProbePointError},
    qos::{QosController, QosDecision},
    target::{self, HeldChild, TargetError},
};

/// Why a recording could not start or did not finish cleanly. Each message is one line;
/// the `#[source]` chain adds the OS or library detail.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Missing privileges or tracefs (see [`EnvError`]).
    #[error(transparent)]
    Env(#[from] EnvError),
    /// `TargetSpec::Command` with an empty argv.
    #[error("no command given after --")]
    NoCommand,
    /// The target could not be started or found.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The target binary has no usable probe points.
    #[error(transparent)]
    ProbePoints(#[from] ProbePointError),
    /// The probes could not be loaded or attached.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// Counter setup failed.
    #[error(transparent)]
    Pmc(#[from] PmcError),
    /// The event source could not be opened.
    #[error(transparent)]
    Drain(#[from] DrainError),
    /// A field of a tracepoint's format file could not be found in tracefs.
    #[error("cannot read field {field} of tracepoint {tracepoint} from tracefs")]
    TracepointFormat {
        /// `category:name`.
        tracepoint: &'static str,
        /// The field.
        field: &'static str,
    },
    /// The eBPF object lacks a map the collector expects.
    #[error("map {name} is missing from the eBPF object")]
    MapMissing {
        /// The map name.
        name: &'static str,
    },
    /// A map has another type than the collector expects.
    #[error("map {name} is not a {expected}")]
    MapType {
        /// The map name.
        name: &'static str,
        /// The expected type.
        expected: &'static str,
    },
    /// A map operation (type check, read, update) failed.
    #[error("map {name}: operation failed")]
    Map {
        /// The map name.
        name: &'static str,
        /// aya's error.
        #[source]
        source: MapError,
    },
    /// The async runtime or the target watch could not be set up.
    #[error("{what} failed")]
    Runtime {
        /// What was being set up.
        what: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Writing the trace file failed.
    #[error("writing the trace {} failed", path.display())]
    Write {
        /// The trace file.
        path: PathBuf,
        /// The writer's error.
        #[source]
        source: TraceError,
    },
}

fn map_err(name: &'static str) -> impl FnOnce(MapError) -> RecordError {
    move |source| RecordError::Map { name, source }
}

/// Writes `control` to the control map and attaches or detaches the operator probes to
/// match its levels: off, the control map first (programs in flight stop recording),
/// then the probes come off the target; on, the probes first. Returns the collector
/// time (trace clock) of the control map write, when the switch took effect: detaching
/// waits for the kernel's uprobe grace period (~0.2 s here), attaching for breakpoint
/// installation.
fn apply_levels(
    control_map: &mut Array<MapData, TracerControl>,
    control: TracerControl,
    op_probes: Option<&mut crate::load::OpProbes>,
    ebpf: &mut aya::Ebpf,
) -> Result<u64, RecordError> {
    let op_on = control.levels & LEVEL_OP != 0;
    let mut write = || write_control(control_map, control);
    Ok(match op_probes {
        Some(p) if op_on => {
            p.set_attached(ebpf, true)?;
            write()?
        }
        Some(p) => {
            let at = write()?;
            p.set_attached(ebpf, false)?;
            at
        }
        None => write()?,
    })
}

/// Writes `control` to the control map; returns the collector time (trace clock) of the
/// write.
fn write_control(
    control_map: &mut Array<MapData, TracerControl>,
    control: TracerControl,
) -> Result<u64, RecordError> {
    control_map
        .set(CONTROL_INDEX, control, 0)
        .map_err(map_err("CONTROL"))?;
    Ok(clocks().0)
}

fn take_map(ebpf: &mut aya::Ebpf, name: &'static str) -> Result<Map, RecordError> {
    ebpf.take_map(name).ok_or(RecordError::MapMissing { name })
}

fn map_mut<'a>(ebpf: &'a mut aya::Ebpf, name: &'static str) -> Result<&'a mut Map, RecordError> {
    ebpf.map_mut(name).ok_or(RecordError::MapMissing { name })
}

/// What to trace.
#[derive(Clone, Debug)]
pub enum TargetSpec {
    /// Start this command (argv) with the probes attached before it runs.
    Command(Vec<String>),
    /// Attach to this running process.
    Pid(u32),
}

/// One recording request.
#[derive(Clone, Debug)]
pub struct RecordRequest {
    /// Trace file to write.
    pub output: PathBuf,
    /// Validated settings.
    pub config: TracerConfig,
    /// The target.
    pub target: TargetSpec,
}

/// Totals of a finished recording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordSummary {
    /// The trace file.
    pub output: PathBuf,
    /// Target pid.
    pub pid: u32,
    /// Records the probes tried to emit.
    pub produced: u64,
    /// Probe records written.
    pub written: u64,
    /// Records lost (buffer full).
    pub lost: u64,
    /// Lost per CPU.
    pub lost_per_cpu: Vec<u64>,
    /// QoS switches made.
    pub qos_switches: u32,
    /// Probe hits whose engine structure had another ABI version (fields not recorded).
    pub abi_mismatches: u64,
    /// The mismatching ABI version seen (0 if none).
    pub abi_seen: u32,
    /// Leaf nodes (weights, KV-cache views, inputs) read from the target and recorded.
    pub leaves_recorded: u64,
    /// Leaf candidates that could not be read (the target had exited): the analyzer
    /// guesses their names.
    pub leaves_unread: u64,
    /// Why recording ended.
    pub end_reason: String,
    /// How the target ended, when `profinfer record` started it and saw it end.
    pub target_end: Option<target::TargetEnd>,
    /// What tracing cost (eBPF program run time, collector CPU).
    pub cost: ProbeCost,
}

impl std::fmt::Display for RecordSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "profinfer: {}: {} events produced, {} written, {} lost",
            self.output.display(),
            self.produced,
            self.written,
            self.lost
        )?;
        if self.lost > 0 {
            write!(f, " (per CPU: {:?})", self.lost_per_cpu)?;
        }
        if self.qos_switches > 0 {
            write!(f, "; {} QoS switches", self.qos_switches)?;
        }
        if self.abi_mismatches > 0 {
            write!(
                f,
                "; {} probe hits with engine ABI version {}",
                self.abi_mismatches, self.abi_seen
            )?;
        }
        if self.leaves_unread > 0 {
            write!(
                f,
                "; {} leaf nodes not read (target gone), {} read",
                self.leaves_unread, self.leaves_recorded
            )?;
        }
        write!(f, "; {}", self.end_reason)?;
        write!(f, "\nprofinfer: cost: {}", self.cost)
    }
}

/// How often the collector drains without being woken (the ring forces a wake-up when
/// it is a quarter full, and decode exits do when tokens must be seen at once). Every
/// wake-up on a small board preempts an engine thread, so it is kept long: a 10 ms tick
/// cost ~0.7 % of one CPU while recording 400 token/graph records.
const DRAIN_TICK: Duration = Duration::from_millis(50);

/// `CLOCK_MONOTONIC` and `CLOCK_REALTIME` now, ns.
fn clocks() -> (u64, i64) {
    let mut mono = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let mut real = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointers.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut mono);
        libc::clock_gettime(libc::CLOCK_REALTIME, &mut real);
    }
    let m = mono.tv_sec as u64 * 1_000_000_000 + mono.tv_nsec as u64;
    let r = real.tv_sec * 1_000_000_000 + real.tv_nsec;
    (m, r)
}

fn collector_header(kind: EventKind, pid: u32, tid: u32, cpu: u32) -> EventHeader {
    EventHeader {
        kind: kind as u32,
        flags: 0,
        ts_ns: clocks().0,
        pid,
        tid,
        cpu,
        _pad: 0,
    }
}

fn uname() -> (String, String) {
    // SAFETY: `utsname` is plain data; `uname` fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-pointer.
    unsafe { libc::uname(&mut u) };
    let s = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (s(&u.nodename), s(&u.release))
}

/// Records until the target exits, Ctrl-C, or the configured duration.
pub fn record(req: RecordRequest) -> Result<RecordSummary, RecordError> {
    record_observed(req, &mut NoObserver)
}

/// [`record`], handing every record, and a status on every tick, to `observer` (the live
/// view), which can switch probe levels and stop the recording.
pub fn record_observed(
    req: RecordRequest,
    observer: &mut dyn RecordObserver,
) -> Result<RecordSummary, RecordError> {
    privileges::check_capabilities()?;
    privileges::ensure_tracefs()?;
    let (exe, args, mut held, pid) = match &req.target {
        TargetSpec::Command(argv) => {
            let cmd = argv.first().ok_or(RecordError::NoCommand)?;
            let exe = target::which(cmd).ok_or_else(|| target::TargetError::NotFound {
                command: cmd.clone(),
            })?;
            let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
            // Refuse a binary without probe symbols before starting anything.
            probe_points::resolve(&exe)?;
            let child = HeldChild::spawn(argv)?;
            let pid = child.pid();
            (exe, argv.clone(), Some(child), pid)
        }
        TargetSpec::Pid(pid) => {
            target::check_pid(*pid)?;
            (target::exe_of(*pid)?, Vec::new(), None, *pid)
        }
    };
    let result = record_inner(&req, exe, args, held.as_mut(), pid, observer);
    if result.is_err()
        && let Some(child) = held.as_mut()
    {
        child.abort();
    }
    result
}

fn record_inner(
    req: &RecordRequest,
    exe: PathBuf,
    args: Vec<String>,
    held: Option<&mut HeldChild>,
    pid: u32,
    observer: &mut dyn RecordObserver,
) -> Result<RecordSummary, RecordError> {
    let cfg = &req.config;
    let write_err = |source| RecordError::Write {
        path: req.output.clone(),
        source,
    };
    let points = probe_points::resolve(&exe)?;
    let mut ebpf = crate::load::load(cfg.buffer)?;
    let mut cost_meter = ProbeCostMeter::start();
    if let Some(note) = cost_meter.take_note() {
        eprintln!("profinfer: {note}");
    }
    let mut pmcs = if cfg.pmc && cfg.levels & LEVEL_OP != 0 {
        PmcSet::choose(&cfg.counters)?
    } else {
        PmcSet::none()
    };
    for note in pmcs.notes() {
        eprintln!("profinfer: {note}");
    }
    let newtask_field = |field: &'static str| {
        privileges::tracepoint_field_offset("task", "task_newtask", field).ok_or(
            RecordError::TracepointFormat {
                tracepoint: "task:task_newtask",
                field,
            },
        )
    };
    let newtask_pid = newtask_field("pid")?;
    let newtask_clone_flags = newtask_field("clone_flags")?;
    let mut op_detail = 0;
    if cfg.structure {
        op_detail |= DETAIL_STRUCTURE;
    }
    if !pmcs.is_empty() {
        op_detail |= DETAIL_PMC;
    }
    // Leaf nodes are named from the target's memory when operator records carry sources.
    let leaves_wanted = cfg.structure && cfg.levels & LEVEL_OP != 0;
    let mut control = TracerControl {
        target_tgid: pid,
        levels: cfg.levels,
        op_detail,
        n_pmc: pmcs.len() as u32,
        output: match cfg.buffer {
            BufferKind::Ring { .. } => OUTPUT_RING_BUF,
            BufferKind::Perf { .. } => OUTPUT_PERF_BUF,
        },
        newtask_pid_offset: newtask_pid,
        newtask_clone_flags_offset: newtask_clone_flags,
        // Tokens must reach the QoS controller or the live view at once; a plain recording
        // reads them on its next drain and spares the probe the wake-up.
        flags: if cfg.qos.is_some() || observer.is_live() {
            CONTROL_FLAG_WAKE_ON_DECODE
        } else {
            0
        } | if leaves_wanted {
            // Until the first leaves are read (see `LeafResolver::wants_wakeup`).
            CONTROL_FLAG_WAKE_ON_GRAPH
        } else {
            0
        },
        pmc_scaled: pmcs.scaled_mask(),
        _reserved: 0,
    };

    // Thread set and counters of the threads that exist now.
    let tids = if held.is_some() {
        vec![pid]
    } else {
        target::threads_of(pid)
    };
    {
        let mut set: BpfHashMap<_, u32, u32> =
            BpfHashMap::try_from(map_mut(&mut ebpf, "TIDS")?).map_err(map_err("TIDS"))?;
        for &t in &tids {
            set.insert(t, 1, 0).map_err(map_err("TIDS"))?;
        }
    }
    let counters_fd: OwnedFd = match ebpf
        .map("COUNTERS")
        .ok_or(RecordError::MapMissing { name: "COUNTERS" })?
    {
        Map::PerfEventArray(data) => {
            data.fd()
                .as_fd()
                .try_clone_to_owned()
                .map_err(|source| RecordError::Runtime {
                    what: "duplicating the COUNTERS map fd",
                    source,
                })?
        }
        _ => {
            return Err(RecordError::MapType {
                name: "COUNTERS",
                expected: "perf event array",
            });
        }
    };
    let mut pmc_events = Vec::new();
    let open_pmcs = |pmcs: &mut PmcSet,
                     ebpf: &mut aya::Ebpf,
                     tid: u32,
                     out: &mut Vec<PmcOpenEvent>|
     -> Result<(), RecordError> {
        if let Some((slot, mask)) = pmcs.open_thread(tid, counters_fd.as_fd())? {
            let mut slots: BpfHashMap<_, u32, u32> =
                BpfHashMap::try_from(map_mut(ebpf, "PMC_SLOTS")?).map_err(map_err("PMC_SLOTS"))?;
            slots.insert(tid, slot, 0).map_err(map_err("PMC_SLOTS"))?;
            out.push(PmcOpenEvent {
                header: collector_header(EventKind::PmcOpen, pid, tid, u32::MAX),
                slot,
                opened_mask: mask,
            });
        }
        Ok(())
    };
    for &t in &tids {
        open_pmcs(&mut pmcs, &mut ebpf, t, &mut pmc_events)?;
    }

    let (probes, mut op_probes) = crate::load::attach(
        &mut ebpf,
        &exe,
        &points,
        cfg.levels,
        // Only the target traps (the held child keeps its per-task events across exec);
        // the in-program tgid filter stays as the second guard.
        crate::load::UprobeScope::OneProcess(pid),
    )?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| RecordError::Runtime {
            what: "starting the tokio runtime",
            source,
        })?;
    let _rt_guard = rt.enter();
    let mut source = match cfg.buffer {
        BufferKind::Ring { .. } => EventSource::ring(
            RingBuf::try_from(take_map(&mut ebpf, "EVENTS")?).map_err(map_err("EVENTS"))?,
        ),
        BufferKind::Perf { pages } => EventSource::perf(
            PerfEventArray::try_from(take_map(&mut ebpf, "PERF_EVENTS")?)
                .map_err(map_err("PERF_EVENTS"))?,
            pages,
        ),
    }?;
    let mut control_map: Array<MapData, TracerControl> =
        Array::try_from(take_map(&mut ebpf, "CONTROL")?).map_err(map_err("CONTROL"))?;
    let stats: PerCpuArray<MapData, u64> =
        PerCpuArray::try_from(take_map(&mut ebpf, "STATS")?).map_err(map_err("STATS"))?;

    let (host, kernel) = uname();
    let (mono, real) = clocks();
    let header = TraceHeader {
        format_version: trace_format::FORMAT_VERSION,
        clock: "CLOCK_MONOTONIC (bpf_ktime_get_ns)".into(),
        monotonic_to_wall_offset_ns: real - mono as i64,
        host,
        kernel,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        target: TargetInfo {
            path: exe.display().to_string(),
            build_id: points.build_id.clone(),
            pid,
            args,
        },
        probes,
        counters: pmcs.infos(),
        counter_notes: pmcs.notes().to_vec(),
        event_kinds: event_kind_table(),
        settings: cfg.settings(),
        strings: Vec::new(),
    };
    let mut writer = TraceWriter::create(&req.output, &header).map_err(write_err)?;
    writer.set_chunk_bytes(cfg.chunk_bytes);
    observer.on_start(&header);
    for ev in &pmc_events {
        writer.push(ev).map_err(write_err)?;
        observer.on_record(trace_format::record_bytes(ev));
    }
    let mut collector_events = pmc_events.len() as u64;
    pmc_events.clear();

    write_control(&mut control_map, control)?;
    let pidfd = target::pidfd_open(pid)?;
    let is_child = held.is_some();
    if let Some(child) = held {
        child.release()?;
    }
    cost_meter.target_running();

    let mut qos = cfg.qos.clone().map(QosController::new);
    let mut qos_switches = 0u32;
    // Levels: attached (cfg.levels) ∩ wanted by the user (live view) − op while QoS has
    // it off (see `observe::effective_levels`).
    let mut user_levels = cfg.levels;
    let mut qos_op_on = true;
    let mut bytes_drained = 0u64;
    let mut abi_reported = false;
    let mut written = 0u64;
    let mut write_error: Option<TraceError> = None;
    let mut leaves = leaves_wanted.then(|| LeafResolver::new(pid));
    let leaf_header = || collector_header(EventKind::LeafNode, pid, 0, u32::MAX);
    let mut target_exited = false;
    let mut target_end = None;
    let duration = cfg.duration;
    let end_reason = rt.block_on(async {
        // SAFETY: the pidfd is owned by the `AsyncFd` and stays open until it is dropped.
        let pid_ready = unsafe { AsyncFd::register(pidfd) }.map_err(|e| RecordError::Runtime {
            what: "watching the target's pidfd",
            source: std::io::Error::from(e),
        })?;
        let deadline = async {
            match duration {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(deadline);
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        let mut tick = tokio::time::interval(DRAIN_TICK);
        let reason = loop {
            let mut new_tids = Vec::new();
            let mut decode_steps = Vec::new();
            // A graph or decode exit was drained: every source of that graph is known.
            let mut boundary = false;
            let drained_at = Instant::now();
            source.drain(|bytes| {
                let Some(kind_word) = bytes.get(..4) else {
                    return;
                };
                let kind =
                    u32::from_le_bytes([kind_word[0], kind_word[1], kind_word[2], kind_word[3]]);
                let size = EventKind::from_u32(kind).map_or(bytes.len(), |k| k.record_size());
                let Some(record) = bytes.get(..size) else {
                    return;
                };
                if let Err(e) = writer.push_raw(record) {
                    write_error.get_or_insert(e);
                }
                written += 1;
                bytes_drained += record.len() as u64;
                observer.on_record(record);
                let word = |o: usize| {
                    u32::from_le_bytes([record[o], record[o + 1], record[o + 2], record[o + 3]])
                };
                if kind == EventKind::OpCompute as u32 {
                    if let Some(l) = leaves.as_mut() {
                        l.observe(record, drained_at);
                    }
                } else if kind == EventKind::TaskNew as u32 {
                    new_tids.push(word(36));
                } else if (kind == EventKind::Decode as u32
                    || kind == EventKind::GraphCompute as u32)
                    && word(4) & EVENT_FLAG_EXIT != 0
                {
                    boundary = true;
                    if kind == EventKind::Decode as u32 && word(32) == 1 {
                        let ts = u64::from(word(8)) | (u64::from(word(12)) << 32);
                        decode_steps.push(ts);
                    }
                }
            });
            for tid in new_tids {
                open_pmcs(&mut pmcs, &mut ebpf, tid, &mut pmc_events)?;
            }
            for ev in pmc_events.drain(..) {
                writer.push(&ev).map_err(write_err)?;
                observer.on_record(trace_format::record_bytes(&ev));
                collector_events += 1;
            }
            if let Some(l) = leaves.as_mut() {
                let now = Instant::now();
                if l.due(now, boundary) {
                    for ev in l.resolve(now, leaf_header) {
                        writer.push(&ev).map_err(write_err)?;
                        observer.on_record(trace_format::record_bytes(&ev));
                        collector_events += 1;
                    }
                }
                let flags = if l.wants_wakeup(now) {
                    control.flags | CONTROL_FLAG_WAKE_ON_GRAPH
                } else {
                    control.flags & !CONTROL_FLAG_WAKE_ON_GRAPH
                };
                if flags != control.flags {
                    control.flags = flags;
                    write_control(&mut control_map, control)?;
                }
            }
            if let Some(q) = qos.as_mut() {
                for ts in decode_steps {
                    let decision = q.on_decode_step(ts);
                    let (tps, on) = match decision {
                        QosDecision::Keep => continue,
                        QosDecision::SwitchOff { tps } => (tps, false),
                        QosDecision::SwitchOn { tps } => (tps, true),
                    };
                    let before = control.levels;
                    qos_op_on = on;
                    control.levels = effective_levels(cfg.levels, user_levels, qos_op_on);
                    let switched_at =
                        apply_levels(&mut control_map, control, op_probes.as_mut(), &mut ebpf)?;
                    qos_switches += 1;
                    eprintln!(
                        "profinfer: QoS: {:.1} tokens/s {} {:.1}: operator probes {}",
                        tps,
                        if on { "above" } else { "below" },
                        q_min(cfg),
                        if on { "on" } else { "off" }
                    );
                    let switch = QosSwitchEvent {
                        header: EventHeader {
                            ts_ns: switched_at,
                            ..collector_header(EventKind::QosSwitch, pid, 0, u32::MAX)
                        },
                        levels_before: before,
                        levels_after: control.levels,
                        tps_milli: (tps * 1000.0) as u64,
                        min_tps_milli: (q_min(cfg) * 1000.0) as u64,
                    };
                    writer.push(&switch).map_err(write_err)?;
                    observer.on_record(trace_format::record_bytes(&switch));
                    collector_events += 1;
                }
            }
            if let Some(e) = write_error.take() {
                return Err(write_err(e));
            }
            tokio::select! {
                _ = source.readable() => {}
                _ = tick.tick() => {
                    writer.flush_chunk().map_err(write_err)?;
                    if !abi_reported
                        && let Ok(hits) = stats.get(&STAT_ABI_MISMATCH, 0)
                        && hits.iter().any(|&n| n > 0)
                    {
                        let seen = stats
                            .get(&STAT_ABI_SEEN, 0)
                            .map_or(0, |v| v.iter().copied().max().unwrap_or(0));
                        eprintln!("profinfer: {}", abi_mismatch_message(seen as u32));
                        abi_reported = true;
                    }
                    if observer.is_live() {
                        let sum = |slot: u32| {
                            stats.get(&slot, 0).map_or(0, |v| v.iter().sum::<u64>())
                        };
                        let status = CollectorStatus {
                            attached_levels: cfg.levels,
                            user_levels,
                            effective_levels: control.levels,
                            qos_enabled: qos.is_some(),
                            qos_op_on,
                            qos_switches,
                            produced: sum(STAT_PRODUCED),
                            lost: sum(STAT_LOST),
                            written,
                            bytes_drained,
                            ring_bytes: match cfg.buffer {
                                BufferKind::Ring { bytes } => Some(u64::from(bytes)),
                                BufferKind::Perf { .. } => None,
                            },
                        };
                        let reply = observer.on_tick(&status);
                        if let Some(wanted) = reply.user_levels {
                            user_levels = wanted & cfg.levels;
                            let levels = effective_levels(cfg.levels, user_levels, qos_op_on);
                            if levels != control.levels {
                                control.levels = levels;
                                apply_levels(
                                    &mut control_map,
                                    control,
                                    op_probes.as_mut(),
                                    &mut ebpf,
                                )?;
                            }
                        }
                        if reply.stop {
                            break "stopped from the live view; target left running".to_owned();
                        }
                    }
                }
                r = pid_ready.readable() => {
                    if let Ok(mut g) = r { g.clear_ready(); }
                    target_exited = true;
                    target_end = if is_child { target::reap(pid) } else { None };
                    break target_end.map_or_else(|| "target exited".to_owned(), |e| e.to_string());
                }
                _ = &mut ctrl_c => break "interrupted (Ctrl-C); target left running".to_owned(),
                _ = &mut deadline => break "duration elapsed; target left running".to_owned(),
            }
        };
        // Stop producing, let in-flight programs finish, then drain what is left.
        control.target_tgid = 0;
        write_control(&mut control_map, control)?;
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok::<_, RecordError>(reason)
    })?;
    let drained_at = Instant::now();
    source.drain(|bytes| {
        let kind = bytes
            .get(..4)
            .map_or(0, |k| u32::from_le_bytes([k[0], k[1], k[2], k[3]]));
        let size = EventKind::from_u32(kind).map_or(bytes.len(), |k| k.record_size());
        if let Some(record) = bytes.get(..size) {
            if let Err(e) = writer.push_raw(record) {
                write_error.get_or_insert(e);
            }
            written += 1;
            observer.on_record(record);
            if let Some(l) = leaves.as_mut() {
                l.observe(record, drained_at);
            }
        }
    });
    if let Some(e) = write_error {
        return Err(write_err(e));
    }
    // Last leaves: readable if the target still runs (Ctrl-C, --duration, live stop).
    if let Some(l) = leaves.as_mut() {
        if target_exited {
            l.abandon();
        } else if l.pending() > 0 {
            for ev in l.resolve(Instant::now(), leaf_header) {
                writer.push(&ev).map_err(write_err)?;
                observer.on_record(trace_format::record_bytes(&ev));
                collector_events += 1;
            }
        }
        if let Some(note) = l.take_note() {
            eprintln!("profinfer: {note}");
        }
    }
    let leaf_stats = leaves.as_ref().map(LeafResolver::stats).unwrap_or_default();
    let per_cpu = |slot: u32| -> Result<Vec<u64>, RecordError> {
        Ok(stats
            .get(&slot, 0)
            .map_err(map_err("STATS"))?
            .iter()
            .copied()
            .collect())
    };
    let produced_per_cpu = per_cpu(STAT_PRODUCED)?;
    let lost_per_cpu = per_cpu(STAT_LOST)?;
    let abi_mismatches: u64 = per_cpu(STAT_ABI_MISMATCH)?.iter().sum();
    let abi_seen = per_cpu(STAT_ABI_SEEN)?.iter().copied().max().unwrap_or(0) as u32;
    if abi_mismatches > 0 && !abi_reported {
        eprintln!("profinfer: {}", abi_mismatch_message(abi_seen));
    }
    for (cpu, &lost) in lost_per_cpu.iter().enumerate() {
        if lost > 0 {
            let loss = LossEvent {
                header: collector_header(EventKind::Loss, pid, 0, cpu as u32),
                lost,
            };
            writer.push(&loss).map_err(write_err)?;
            observer.on_record(trace_format::record_bytes(&loss));
            collector_events += 1;
        }
    }
    let produced: u64 = produced_per_cpu.iter().sum();
    let lost: u64 = lost_per_cpu.iter().sum();
    let cost = cost_meter.finish(&ebpf);
    writer
        .finish(&TraceFooter {
            events_produced: produced,
            events_written: written,
            events_lost: lost,
            produced_per_cpu,
            lost_per_cpu: lost_per_cpu.clone(),
            collector_events,
            end_reason: end_reason.clone(),
            end_ts_ns: clocks().0,
            cost: cost.clone(),
        })
        .map_err(write_err)?;
    drop(ebpf);
    Ok(RecordSummary {
        output: req.output.clone(),
        pid,
        produced,
        written,
        lost,
        lost_per_cpu,
        qos_switches,
        abi_mismatches,
        abi_seen,
        leaves_recorded: leaf_stats.recorded,
        leaves_unread: leaf_stats.unread,
        end_reason,
        target_end,
        cost,
    })
}

/// The one-line report of structures of another engine ABI version.
pub fn abi_mismatch_message(seen: u32) -> String {
    format!(
        "engine ABI version {seen}, expected {}: structure fields not recorded",
        common::engine_abi::ENGINE_ABI_VERSION
    )
}

fn q_min(cfg: &TracerConfig) -> f64 {
    cfg.qos.as_ref().map_or(0.0, |q| q.min_tps)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every message and its whole `source` chain stays on one line.
    #[test]
    fn error_chains_are_one_line() {
        let errors = [
            RecordError::NoCommand,
            RecordError::from(TargetError::NoSuchProcess { pid: 42 }),
            RecordError::from(TargetError::ExeUnreadable {
                pid: 42,
                source: std::io::Error::from_raw_os_error(libc::EACCES),
            }),
            RecordError::TracepointFormat {
                tracepoint: "task:task_newtask",
                field: "child_pid",
            },
            RecordError::MapMissing { name: "STATS" },
            RecordError::Runtime {
                what: "starting the tokio runtime",
                source: std::io::Error::from_raw_os_error(libc::EMFILE),
            },
            RecordError::from(EnvError::TracefsMissing {
                source: std::io::Error::from_raw_os_error(libc::EPERM),
            }),
        ];
        for e in &errors {
            let mut line = e.to_string();
            let mut cur: Option<&dyn std::error::Error> = std::error::Error::source(e);
            while let Some(s) = cur {
                line.push_str(": ");
                line.push_str(&s.to_string());
                cur = s.source();
            }
            assert!(!line.contains('\n'), "{line}");
            assert!(!line.is_empty());
        }
        assert_eq!(errors[1].to_string(), "no process with pid 42");
        // `transparent` keeps the inner error's source (EACCES) in the chain.
        let src = std::error::Error::source(&errors[2]).map(ToString::to_string);
        assert_eq!(
            src,
            Some(std::io::Error::from_raw_os_error(libc::EACCES).to_string())
        );
    }
}
