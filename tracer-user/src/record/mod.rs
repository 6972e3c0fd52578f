//! `profinfer record`: start or attach to the target, attach the probes, collect every
//! event into a trace file, adapt levels to the decode rate, and account for every loss.
//!
//! Two halves: the per-target [`plan::ProbePlan`] (which probe points the binary has and
//! how they are attached) and the target-independent rest — [`probe_maps`] (the eBPF
//! object's maps), [`sink`] (trace file and observer), [`collector`] (the drain loop,
//! counters on new threads, leaf nodes, QoS, the live view's requests). This module
//! wires them together and writes the footer.

mod collector;
pub mod layout_check;
pub mod llama_plan;
pub mod plan;
mod probe_maps;
mod sink;

use std::{path::PathBuf, time::Instant};

use aya::maps::MapError;
use common::{
    control::{
        CONTROL_FLAG_WAKE_ON_DECODE, CONTROL_FLAG_WAKE_ON_GRAPH, DETAIL_EXACT_SPANS,
        DETAIL_PER_NODE_ENDS, DETAIL_PMC, DETAIL_STRUCTURE, LEVEL_OP, OUTPUT_PERF_BUF,
        OUTPUT_RING_BUF, STAT_ABI_MISMATCH, STAT_ABI_SEEN, STAT_LOST, STAT_PRODUCED, TracerControl,
    },
    engine_abi::symbols,
    event::{EventHeader, EventKind, LossEvent},
};
use trace_format::{ProbeCost, TargetInfo, TraceError, TraceFooter, TraceHeader, event_kind_table};

use self::{
    collector::Collector,
    plan::{ProbePlan, TargetKind, plan_for},
    probe_maps::ProbeMaps,
    sink::TraceSink,
};
use crate::{
    config::{BufferKind, TracerConfig},
    drain::DrainError,
    leaves::LeafResolver,
    load::LoadError,
    observe::{NoObserver, RecordObserver},
    pmc::{PmcError, PmcSet},
    privileges::{self, EnvError},
    probe_cost::ProbeCostMeter,
    probe_points::ProbePointError,
    target::{self, HeldChild, TargetError},
};

/// Why a recording could not start or did not finish cleanly. Each message is one line;
/// the `#[source]` chain adds the OS or library detail.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Missing privileges or tracefs (see [`EnvError`]).
    #[error(transparent)]
    Env(#[from] EnvError),
    /// The first records read through a llama.cpp build's struct layout are not ggml
    /// nodes: the layout is wrong for this process.
    #[error(
        "the first records read through this llama.cpp build's struct layout show {found}: the layout (see `profinfer probes`) does not fit this process; recording stopped, trace removed, target left running unprobed"
    )]
    LayoutWrong {
        /// What was read.
        found: String,
    },
    /// `TargetSpec::Command` with an empty argv.
    #[error("no command given after --")]
    NoCommand,
    /// The target could not be started or found.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The target binary has no usable probe points.
    #[error(transparent)]
    ProbePoints(#[from] ProbePointError),
    /// The llama.cpp build could not be used.
    #[error(transparent)]
    Ggml(#[from] crate::ggml_build::GgmlBuildError),
    /// The binary is neither the engine nor llama.cpp.
    #[error("`{}` is neither profinfer's engine (no engine_* probe symbols) nor llama.cpp: {llama}", exe.display())]
    NotATarget {
        /// The target binary.
        exe: PathBuf,
        /// Why it is not llama.cpp.
        llama: crate::ggml_build::GgmlBuildError,
    },
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
    /// What kind of program the target is.
    pub kind: TargetKind,
    /// Extra files to look for llama.cpp's libraries in (`--lib`).
    pub libs: Vec<PathBuf>,
    /// llama.cpp struct offsets given by the user (`--ggml-offset`).
    pub ggml_offsets: Vec<crate::ggml_layout::GivenOffset>,
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
    let (plan, args, mut held, pid) = match &req.target {
        TargetSpec::Command(argv) => {
            let cmd = argv.first().ok_or(RecordError::NoCommand)?;
            let exe = target::which(cmd).ok_or_else(|| target::TargetError::NotFound {
                command: cmd.clone(),
            })?;
            let exe = std::fs::canonicalize(&exe).unwrap_or(exe);
            // Refuse a binary without probe points before starting anything.
            let plan = plan_for(req.kind, &exe, None, &req.libs, &req.ggml_offsets)?;
            let child = HeldChild::spawn(argv)?;
            let pid = child.pid();
            (plan, argv.clone(), Some(child), pid)
        }
        TargetSpec::Pid(pid) => {
            target::check_pid(*pid)?;
            let plan = plan_for(
                req.kind,
                &target::exe_of(*pid)?,
                Some(*pid),
                &req.libs,
                &req.ggml_offsets,
            )?;
            (plan, Vec::new(), None, *pid)
        }
    };
    let mut req = req;
    let (levels, note) = plan.levels(req.config.levels);
    if let Some(note) = note {
        eprintln!("profinfer: {note}");
    }
    req.config.levels = levels;
    let result = record_with(&req, plan.as_ref(), args, held.as_mut(), pid, observer);
    if let Err(RecordError::LayoutWrong { .. }) = &result {
        // Nothing read through a wrong layout is kept.
        let _ = std::fs::remove_file(&req.output);
    }
    if result.is_err()
        && let Some(child) = held.as_mut()
    {
        child.abort();
    }
    result
}

/// The control map's content for this recording (before the target runs).
fn initial_control(
    cfg: &TracerConfig,
    plan: &dyn ProbePlan,
    pid: u32,
    pmcs: &PmcSet,
    live: bool,
    leaves_wanted: bool,
) -> Result<TracerControl, RecordError> {
    let newtask_field = |field: &'static str| {
        privileges::tracepoint_field_offset("task", "task_newtask", field).ok_or(
            RecordError::TracepointFormat {
                tracepoint: "task:task_newtask",
                field,
            },
        )
    };
    let mut op_detail = 0;
    if cfg.structure {
        op_detail |= DETAIL_STRUCTURE;
    }
    if !pmcs.is_empty() {
        op_detail |= DETAIL_PMC;
    }
    if cfg.exact_spans || !pmcs.is_empty() {
        op_detail |= DETAIL_EXACT_SPANS;
    }
    if cfg.per_node_ends {
        op_detail |= DETAIL_PER_NODE_ENDS;
    }
    Ok(TracerControl {
        target_tgid: pid,
        levels: cfg.levels,
        op_detail: plan.op_detail(op_detail),
        n_pmc: pmcs.len() as u32,
        output: match cfg.buffer {
            BufferKind::Ring { .. } => OUTPUT_RING_BUF,
            BufferKind::Perf { .. } => OUTPUT_PERF_BUF,
        },
        newtask_pid_offset: newtask_field("pid")?,
        newtask_clone_flags_offset: newtask_field("clone_flags")?,
        // Tokens must reach the QoS controller or the live view at once; a plain recording
        // reads them on its next drain and spares the probe the wake-up.
        flags: if cfg.qos.is_some() || live {
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
        ring_wake_bytes: crate::load::ring_sizes(cfg.buffer, &crate::load::online_cpus())
            .into_iter()
            .max()
            .unwrap_or(0)
            / 4,
    })
}

/// How the engine's node ends were recorded, as the attached probes say: `batched`
/// (`engine_op_times`) or `per-node` (`engine_op_done`); `None` without either (no
/// operator level, or llama.cpp).
fn node_ends(probes: &[trace_format::ProbeInfo]) -> Option<&'static str> {
    let has = |symbol: &str| probes.iter().any(|p| p.point == symbol);
    if has(symbols::OP_TIMES) {
        Some("batched")
    } else if has(symbols::OP_DONE) {
        Some("per-node")
    } else {
        None
    }
}

/// The trace header: host, clocks, target, probes, counters, settings.
fn trace_header(
    cfg: &TracerConfig,
    plan: &dyn ProbePlan,
    pid: u32,
    args: Vec<String>,
    probes: Vec<trace_format::ProbeInfo>,
    pmcs: &PmcSet,
) -> TraceHeader {
    let (host, kernel) = uname();
    let (mono, real) = clocks();
    let ends = node_ends(&probes);
    TraceHeader {
        format_version: trace_format::FORMAT_VERSION,
        clock: "CLOCK_MONOTONIC (bpf_ktime_get_ns)".into(),
        monotonic_to_wall_offset_ns: real - mono as i64,
        host,
        kernel,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        target: TargetInfo {
            path: plan.binary().display().to_string(),
            build_id: plan.build_id(),
            pid,
            args,
        },
        probes,
        counters: pmcs.infos(),
        counter_notes: pmcs.notes().to_vec(),
        event_kinds: event_kind_table(),
        settings: {
            let mut settings = cfg.settings();
            settings.extend(plan.settings());
            if let Some(ends) = ends {
                settings.insert("node_ends".into(), ends.into());
            }
            settings
        },
        strings: Vec::new(),
    }
}

/// Sets up the probes of `plan` on the target, collects until the end, and writes the
/// footer.
fn record_with(
    req: &RecordRequest,
    plan: &dyn ProbePlan,
    args: Vec<String>,
    held: Option<&mut HeldChild>,
    pid: u32,
    observer: &mut dyn RecordObserver,
) -> Result<RecordSummary, RecordError> {
    let cfg = &req.config;
    let mut maps = ProbeMaps::new(crate::load::load(cfg.buffer)?)?;
    let mut cost_meter = ProbeCostMeter::start(cfg.stats_always);
    if let Some(note) = cost_meter.take_note() {
        eprintln!("profinfer: {note}");
    }
    let mut pmcs = if cfg.pmc && cfg.levels & LEVEL_OP != 0 {
        PmcSet::choose(&cfg.counters)?
    } else {
        if cfg.pmc {
            // Per-thread counters cost every context switch of the target's threads:
            // none are opened where nothing would read them.
            eprintln!(
                "profinfer: counters are read per operator span: without the op level none \
                 are opened"
            );
        }
        PmcSet::none()
    };
    for note in pmcs.notes() {
        eprintln!("profinfer: {note}");
    }
    // Leaf nodes are named from the target's memory when operator records carry sources.
    let leaves_wanted = cfg.structure && cfg.levels & LEVEL_OP != 0 && plan.reads_leaves();
    let control = initial_control(cfg, plan, pid, &pmcs, observer.is_live(), leaves_wanted)?;

    // Thread set and counters of the threads that exist now.
    let tids = if held.is_some() {
        vec![pid]
    } else {
        target::threads_of(pid)
    };
    maps.add_threads(&tids)?;
    let mut pmc_events = Vec::new();
    for &t in &tids {
        pmc_events.extend(maps.open_counters(&mut pmcs, pid, t)?);
    }
    let (probes, op_probes) = plan.attach(&mut maps.ebpf, cfg.levels, control.op_detail, pid)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| RecordError::Runtime {
            what: "starting the tokio runtime",
            source,
        })?;
    let _rt_guard = rt.enter();
    let source = maps.event_source(cfg.buffer)?;
    let header = trace_header(cfg, plan, pid, args, probes, &pmcs);
    let mut sink = TraceSink::create(&req.output, &header, cfg.chunk_bytes, observer)?;
    for ev in &pmc_events {
        sink.collector_record(ev)?;
    }
    let leaves = leaves_wanted.then(|| LeafResolver::new(pid));
    let mut collector = Collector::new(
        cfg, pid, maps, sink, source, pmcs, op_probes, leaves, control,
    );
    collector.layout_check = plan.layout_check();
    collector.start()?;
    let pidfd = target::pidfd_open(pid)?;
    let is_child = held.is_some();
    if let Some(child) = held {
        child.release()?;
    }
    cost_meter.target_running();
    collector.cost_meter = Some(cost_meter);
    let ending = rt.block_on(collector.run(pidfd, is_child))?;
    let mut cost_meter = collector
        .cost_meter
        .take()
        .expect("the meter stays with the collector");
    let Collector {
        maps,
        mut sink,
        mut leaves,
        qos_switches,
        abi_reported,
        ..
    } = collector;
    // Last leaves: readable if the target still runs (Ctrl-C, --duration, live stop).
    if let Some(l) = leaves.as_mut() {
        if ending.target_exited {
            l.abandon();
        } else if l.pending() > 0 {
            let header = || collector_header(EventKind::LeafNode, pid, 0, u32::MAX);
            for ev in l.resolve(Instant::now(), header) {
                sink.collector_record(&ev)?;
            }
        }
        if let Some(note) = l.take_note() {
            eprintln!("profinfer: {note}");
        }
    }
    let leaf_stats = leaves.as_ref().map(LeafResolver::stats).unwrap_or_default();
    let produced_per_cpu = maps.stat_per_cpu(STAT_PRODUCED)?;
    let lost_per_cpu = maps.stat_per_cpu(STAT_LOST)?;
    let abi_mismatches: u64 = maps.stat_per_cpu(STAT_ABI_MISMATCH)?.iter().sum();
    let abi_seen = maps
        .stat_per_cpu(STAT_ABI_SEEN)?
        .iter()
        .copied()
        .max()
        .unwrap_or(0) as u32;
    if abi_mismatches > 0 && !abi_reported {
        eprintln!("profinfer: {}", abi_mismatch_message(abi_seen));
    }
    for (cpu, &lost) in lost_per_cpu.iter().enumerate() {
        if lost > 0 {
            sink.collector_record(&LossEvent {
                header: collector_header(EventKind::Loss, pid, 0, cpu as u32),
                lost,
            })?;
        }
    }
    let produced: u64 = produced_per_cpu.iter().sum();
    let lost: u64 = lost_per_cpu.iter().sum();
    let cost = trace_format::ProbeCost {
        target_cpu_ns: ending.target_cpu.map(|d| d.as_nanos() as u64),
        ..cost_meter.finish(&maps.ebpf)
    };
    let (written, collector_events) = (sink.written, sink.collector_events);
    sink.finish(&TraceFooter {
        events_produced: produced,
        events_written: written,
        events_lost: lost,
        produced_per_cpu,
        lost_per_cpu: lost_per_cpu.clone(),
        collector_events,
        end_reason: ending.reason.clone(),
        end_ts_ns: clocks().0,
        cost: cost.clone(),
    })?;
    drop(maps);
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
        end_reason: ending.reason,
        target_end: ending.target_end,
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
