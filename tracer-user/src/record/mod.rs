//! `profinfer record`: start or attach to the target, attach the probes, collect every
//! event into a trace file, adapt levels to the decode rate, and account for every loss.
//!
//! The same for every target: the target's part is its [`ProbePlan`] (`crate::targets`:
//! which probe points the binary has, how they are attached, what checks the first
//! records), and this module talks to that trait only. The rest: [`header`] (the control
//! map's first content, the trace header), [`probe_maps`] (the eBPF object's maps),
//! [`sink`] (trace file and observer), [`collector`] (the drain loop, counters on new
//! threads, leaf nodes, QoS, the live view's requests), [`clock`] and [`error`]. This
//! module wires them together and writes the footer.

mod clock;
mod collector;
pub mod error;
mod head;
mod header;
mod probe_maps;
mod sink;

use std::{path::PathBuf, time::Instant};

use common::{
    control::{
        LEVEL_OP, STAT_ABI_MISMATCH, STAT_ABI_SEEN, STAT_LOST, STAT_PRODUCED, STAT_SAMPLES,
        STAT_SAMPLES_LOST,
    },
    event::{EventKind, PmcOpenEvent},
};
use trace_format::ProbeCost;

pub use self::error::RecordError;
use self::{
    clock::{clocks, collector_header},
    collector::{Collector, Ending},
    header::{initial_control, trace_header},
    probe_maps::ProbeMaps,
    sink::{RingCounts, TraceSink},
};
use crate::{
    config::TracerConfig,
    leaves::LeafResolver,
    observe::{NoObserver, RecordObserver},
    pmc::PmcSet,
    privileges,
    probe_cost::ProbeCostMeter,
    samples::CpuSampler,
    target::{self, HeldChild},
    targets::{
        TargetChoice,
        plan::{AttachRequest, ProbePlan},
    },
};

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
    /// What kind of program the target is, and where to look for its parts.
    pub choice: TargetChoice,
}

/// Totals of a finished recording.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordSummary {
    /// The trace file asked for (a series' base name with `--switch-output`).
    pub output: PathBuf,
    /// The trace files written and kept, in series order (just `output` without
    /// `--switch-output`).
    pub files: Vec<PathBuf>,
    /// A series' oldest files removed to stay within `--max-size`.
    pub files_removed: u32,
    /// Why writing stopped before the recording's end (size cap, full disk), on one line.
    pub output_stop: Option<String>,
    /// Whether writing failed (a full disk): `profinfer record` then exits with 1.
    pub output_failed: bool,
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
    /// CPU-clock samples sent and lost (`--sample`).
    pub samples: Option<(u64, u64)>,
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
        if let Some((taken, lost)) = self.samples {
            write!(
                f,
                "; {taken} CPU samples counted into histograms, {lost} lost"
            )?;
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
        // A stopped output's reason is the line below, with what it cost.
        if self.output_stop.is_none() {
            write!(f, "; {}", self.end_reason)?;
        }
        if self.files.len() > 1 || self.files_removed > 0 {
            let name =
                |p: Option<&PathBuf>| p.map_or_else(String::new, |p| p.display().to_string());
            write!(
                f,
                "\nprofinfer: series of {} files, {} .. {}",
                self.files.len(),
                name(self.files.first()),
                name(self.files.last())
            )?;
            if self.files_removed > 0 {
                write!(f, " ({} oldest removed by --max-size)", self.files_removed)?;
            }
            write!(
                f,
                "; `profinfer report {}` reads them as one",
                self.output.display()
            )?;
        }
        if let Some(stop) = &self.output_stop {
            write!(f, "\nprofinfer: {stop}")?;
        }
        write!(f, "\nprofinfer: cost: {}", self.cost)
    }
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
            let plan = req.choice.plan_for(&exe, None)?;
            let child = HeldChild::spawn(argv)?;
            let pid = child.pid();
            (plan, argv.clone(), Some(child), pid)
        }
        TargetSpec::Pid(pid) => {
            target::check_pid(*pid)?;
            let plan = req.choice.plan_for(&target::exe_of(*pid)?, Some(*pid))?;
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
    if let Err(RecordError::Rejected(_)) = &result {
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

/// The counters to open on the target's threads: none without the operator level (they
/// are read per operator span).
fn choose_counters(cfg: &TracerConfig) -> Result<PmcSet, RecordError> {
    let pmcs = if cfg.pmc && cfg.levels & LEVEL_OP != 0 {
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
    Ok(pmcs)
}

/// Adds the threads of `pid` that exist now (just `pid` for a `held` child, which has no
/// other yet) to the traced set and opens their counters; returns the records saying
/// which opened.
fn threads_now(
    maps: &mut ProbeMaps,
    pmcs: &mut PmcSet,
    pid: u32,
    held: bool,
) -> Result<Vec<PmcOpenEvent>, RecordError> {
    let tids = if held {
        vec![pid]
    } else {
        target::threads_of(pid)
    };
    maps.add_threads(&tids)?;
    let mut pmc_events = Vec::new();
    for &t in &tids {
        pmc_events.extend(maps.open_counters(pmcs, pid, t)?);
    }
    Ok(pmc_events)
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
    let mut pmcs = choose_counters(cfg)?;
    // Leaf nodes are named from the target's memory when operator records carry sources.
    let leaves_wanted = cfg.structure && cfg.levels & LEVEL_OP != 0 && plan.reads_leaves();
    let control = initial_control(cfg, plan, pid, &pmcs, observer.is_live(), leaves_wanted)?;
    let pmc_events = threads_now(&mut maps, &mut pmcs, pid, held.is_some())?;
    let request = AttachRequest {
        levels: cfg.levels,
        op_detail: control.op_detail,
        pid,
    };
    let (mut probes, op_probes) = plan.attach(&mut maps.ebpf, request)?;
    let sample_probes = match cfg.sample_hz {
        Some(hz) => {
            let (info, sampler) = crate::load::SampleProbes::attach(&mut maps.ebpf, hz)?;
            probes.extend(info);
            Some(sampler)
        }
        None => None,
    };
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
    let mut sink = TraceSink::create(&req.output, &header, cfg.chunk_bytes, cfg.output, observer)?;
    for ev in &pmc_events {
        sink.collector_record(ev)?;
    }
    let leaves = leaves_wanted.then(|| LeafResolver::new(pid));
    let mut collector = Collector::new(
        cfg, plan, pid, maps, sink, source, pmcs, op_probes, leaves, control,
    );
    collector.start()?;
    let pidfd = target::pidfd_open(pid)?;
    let is_child = held.is_some();
    if let Some(child) = held {
        child.release()?;
    }
    cost_meter.target_running();
    collector.cost_meter = Some(cost_meter);
    collector.sample_probes = sample_probes;
    let ending = rt.block_on(collector.run(pidfd, is_child))?;
    finish(req, plan, pid, collector, ending)
}

/// The leaves still pending at the end: read if the target still runs (Ctrl-C,
/// --duration, live stop), given up if it exited.
fn last_leaves(
    leaves: Option<&mut LeafResolver>,
    ending: &Ending,
    sink: &mut TraceSink<'_>,
    pid: u32,
) -> Result<(), RecordError> {
    let Some(l) = leaves else {
        return Ok(());
    };
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
    Ok(())
}

/// After the collection: the last leaves, the losses per CPU, the footer; the totals.
fn finish(
    req: &RecordRequest,
    plan: &dyn ProbePlan,
    pid: u32,
    mut collector: Collector<'_, '_>,
    ending: Ending,
) -> Result<RecordSummary, RecordError> {
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
        sampler,
        ..
    } = collector;
    if let Some(note) = sampler.as_ref().and_then(CpuSampler::unnamed_note) {
        eprintln!("profinfer: {note}");
    }
    last_leaves(leaves.as_mut(), &ending, &mut sink, pid)?;
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
    if abi_mismatches > 0
        && !abi_reported
        && let Some(message) = plan.abi_mismatch(abi_seen)
    {
        eprintln!("profinfer: {message}");
    }
    let produced: u64 = produced_per_cpu.iter().sum();
    let lost: u64 = lost_per_cpu.iter().sum();
    let sum = |slot| maps.stat_per_cpu(slot).map(|v| v.iter().sum::<u64>());
    let samples = (sum(STAT_SAMPLES)?, sum(STAT_SAMPLES_LOST)?);
    sink.samples = samples;
    let cost = ProbeCost {
        target_cpu_ns: ending.target_cpu.map(|d| d.as_nanos() as u64),
        ..cost_meter.finish(&maps.ebpf)
    };
    let written = sink.written;
    let counts = RingCounts {
        produced: produced_per_cpu,
        lost: lost_per_cpu.clone(),
    };
    let out = sink.finish(&counts, ending.reason.clone(), clocks().0, cost.clone())?;
    drop(maps);
    Ok(RecordSummary {
        output: req.output.clone(),
        output_stop: out.stop_line(),
        output_failed: matches!(out.stop, Some(sink::OutputStop::Failed { .. })),
        files: out.files,
        files_removed: out.removed,
        pid,
        produced,
        written,
        lost,
        lost_per_cpu,
        samples: req.config.sample_hz.map(|_| samples),
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
