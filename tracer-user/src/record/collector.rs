//! The target-independent half of a recording: drain the event buffer into the trace,
//! open counters on new threads, read leaf nodes, run the QoS controller and the live
//! view's requests, and stop when the target exits, on Ctrl-C or after the duration.
//! Whatever the target, its probes speak the same event records ([`common::event`]).

use std::time::{Duration, Instant};

use common::{
    control::{
        CONTROL_FLAG_WAKE_ON_GRAPH, LEVEL_OP, STAT_ABI_MISMATCH, STAT_ABI_SEEN, STAT_LOST,
        STAT_PRODUCED, TracerControl,
    },
    event::{EVENT_FLAG_EXIT, EventHeader, EventKind, OpWindowEvent, QosSwitchEvent},
};
use tokio::io::unix::AsyncFd;

use super::clock::{clocks, collector_header};
use super::error::RecordError;
use super::probe_maps::ProbeMaps;
use super::sink::{TraceSink, split_record};
use crate::{
    config::{BufferKind, TracerConfig},
    drain::EventSource,
    leaves::LeafResolver,
    load::OpProbes,
    observe::{CollectorStatus, effective_levels},
    pmc::PmcSet,
    qos::{QosController, QosDecision},
    samples::CpuSampler,
    target::{self, TargetEnd},
    targets::plan::{ProbePlan, RecordCheck, RecordsRejected},
    windows::OpWindows,
};

/// How often the collector drains without being woken (the ring forces a wake-up when
/// it is a quarter full, and decode exits do when tokens must be seen at once). Every
/// wake-up on a small board preempts a thread of the target, so it is kept long: a 10 ms
/// tick cost ~0.7 % of one CPU while recording 400 token/graph records.
const DRAIN_TICK: Duration = Duration::from_millis(50);

/// What one drain saw that the collector acts on.
#[derive(Default)]
struct Drained {
    /// Threads the target created.
    new_tids: Vec<u32>,
    /// Exit times of single-token decode calls (the QoS controller's input).
    decode_steps: Vec<u64>,
    /// A graph or decode exit was drained: every source of that graph is known.
    boundary: bool,
    /// What the target's check of the first records found wrong, if anything.
    rejected: Option<RecordsRejected>,
}

/// How the collection ended.
pub struct Ending {
    /// Why, in words (the footer's `end_reason`).
    pub reason: String,
    /// The target exited while recording.
    pub target_exited: bool,
    /// Its exit status, when profinfer started it.
    pub target_end: Option<TargetEnd>,
    /// The CPU time (user + system, all threads) it used, when profinfer started and
    /// reaped it.
    pub target_cpu: Option<Duration>,
}

/// What woke the collector.
enum Wake {
    Readable,
    Tick,
    TargetExited,
    CtrlC,
    Deadline,
}

/// A running collection.
pub struct Collector<'c, 'o> {
    cfg: &'c TracerConfig,
    plan: &'c dyn ProbePlan,
    pid: u32,
    /// The maps and the eBPF object.
    pub maps: ProbeMaps,
    /// The trace and the observer.
    pub sink: TraceSink<'o>,
    source: EventSource,
    pmcs: PmcSet,
    op_probes: Option<OpProbes>,
    /// Leaf-node reader, when structure is recorded.
    pub leaves: Option<LeafResolver>,
    qos: Option<QosController>,
    windows: Option<OpWindows>,
    control: TracerControl,
    /// Levels the user wants on (live view); starts as the attached levels.
    user_levels: u32,
    qos_op_on: bool,
    /// QoS switches made.
    pub qos_switches: u32,
    /// An ABI mismatch was reported already.
    pub abi_reported: bool,
    /// Switches the kernel's eBPF statistics on and off (sampled windows).
    pub cost_meter: Option<crate::probe_cost::ProbeCostMeter>,
    /// The target's check of the first records, until they are confirmed.
    record_check: Option<Box<dyn RecordCheck>>,
    /// CPU-clock samples counted into histograms (`--sample`).
    pub sampler: Option<CpuSampler>,
    /// The sampler's timers, which sampled windows switch when operators are not
    /// recorded (`--sample` with `--op-windows`).
    pub sample_probes: Option<crate::load::SampleProbes>,
}

impl<'c, 'o> Collector<'c, 'o> {
    /// A collection over set-up maps, sink and source for the target of `plan`;
    /// `control` is what the control map will hold once the target runs.
    #[allow(clippy::too_many_arguments, reason = "the parts of one recording")]
    pub fn new(
        cfg: &'c TracerConfig,
        plan: &'c dyn ProbePlan,
        pid: u32,
        maps: ProbeMaps,
        sink: TraceSink<'o>,
        source: EventSource,
        pmcs: PmcSet,
        op_probes: Option<OpProbes>,
        leaves: Option<LeafResolver>,
        control: TracerControl,
    ) -> Collector<'c, 'o> {
        Collector {
            cfg,
            plan,
            pid,
            maps,
            sink,
            source,
            pmcs,
            op_probes,
            leaves,
            qos: cfg.qos.clone().map(QosController::new),
            windows: cfg.op_windows.map(OpWindows::new),
            control,
            user_levels: cfg.levels,
            qos_op_on: true,
            qos_switches: 0,
            abi_reported: false,
            cost_meter: None,
            record_check: plan.record_check(),
            sampler: cfg
                .sample_hz
                .map(|hz| CpuSampler::new(pid, hz, plan.sample_classifier())),
            sample_probes: None,
        }
    }

    /// Starts the probes on the target: writes the control map.
    ///
    /// # Errors
    /// The map update failed.
    pub fn start(&mut self) -> Result<(), RecordError> {
        self.maps.write_control(self.control)?;
        Ok(())
    }

    /// Collects until the target exits (watched through `pidfd`), Ctrl-C, the
    /// configured duration, or a stop from the live view; then stops the probes and
    /// drains what is left.
    ///
    /// # Errors
    /// A map, counter or write error.
    pub async fn run(
        &mut self,
        pidfd: std::os::fd::OwnedFd,
        is_child: bool,
    ) -> Result<Ending, RecordError> {
        // SAFETY: the pidfd is owned by the `AsyncFd` and stays open until it is dropped.
        let pid_ready = unsafe { AsyncFd::register(pidfd) }.map_err(|e| RecordError::Runtime {
            what: "watching the target's pidfd",
            source: std::io::Error::from(e),
        })?;
        let duration = self.cfg.duration;
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
        let ending = loop {
            let drained = self.drain();
            self.after_drain(drained)?;
            if let Some(stop) = self.sink.stopped() {
                break Ending {
                    reason: stop.end_reason(),
                    target_exited: false,
                    target_end: None,
                    target_cpu: None,
                };
            }
            let wake = tokio::select! {
                _ = self.source.readable() => Wake::Readable,
                _ = tick.tick() => Wake::Tick,
                r = pid_ready.readable() => {
                    if let Ok(mut g) = r { g.clear_ready(); }
                    Wake::TargetExited
                }
                _ = &mut ctrl_c => Wake::CtrlC,
                _ = &mut deadline => Wake::Deadline,
            };
            let reason = match wake {
                Wake::Readable => continue,
                Wake::Tick => match self.on_tick()? {
                    Some(reason) => reason,
                    None => continue,
                },
                Wake::TargetExited => {
                    let reaped = if is_child {
                        target::reap(self.pid)
                    } else {
                        None
                    };
                    let target_end = reaped.map(|(end, _)| end);
                    break Ending {
                        reason: target_end
                            .map_or_else(|| "target exited".to_owned(), |e| e.to_string()),
                        target_exited: true,
                        target_end,
                        target_cpu: reaped.map(|(_, cpu)| cpu),
                    };
                }
                Wake::CtrlC => "interrupted (Ctrl-C); target left running".to_owned(),
                Wake::Deadline => "duration elapsed; target left running".to_owned(),
            };
            break Ending {
                reason,
                target_exited: false,
                target_end: None,
                target_cpu: None,
            };
        };
        // Stop producing, let in-flight programs finish, then drain what is left.
        self.control.target_tgid = 0;
        self.maps.write_control(self.control)?;
        tokio::time::sleep(Duration::from_millis(50)).await;
        // A short target can end before any periodic drain: the record check then sees
        // its first records only here, and a wrong layout must still stop the recording.
        if let Some(rejected) = self.drain().rejected {
            return Err(rejected.into());
        }
        self.write_samples(true)?;
        Ok(ending)
    }

    /// Writes every record waiting in the buffer and notes what the collector acts on.
    fn drain(&mut self) -> Drained {
        let mut d = Drained::default();
        let drained_at = Instant::now();
        let (sink, leaves, check, maps, sampler) = (
            &mut self.sink,
            &mut self.leaves,
            &mut self.record_check,
            &self.maps,
            &mut self.sampler,
        );
        self.source.drain(|bytes| {
            let Some((kind, record)) = split_record(bytes) else {
                return;
            };
            if let Some(s) = sampler.as_mut() {
                if kind == EventKind::CpuSample as u32 {
                    s.observe_sample(record);
                    return;
                }
                if kind == EventKind::Decode as u32 {
                    s.observe_decode(record);
                }
            }
            if let Some(c) = check.as_mut()
                && d.rejected.is_none()
                && let Err(rejected) = c.observe(kind, record)
            {
                d.rejected = Some(rejected);
            }
            sink.probe_record(kind, record, maps);
            let word = |o: usize| {
                u32::from_le_bytes([record[o], record[o + 1], record[o + 2], record[o + 3]])
            };
            if kind == EventKind::NodeDesc as u32 {
                if let Some(l) = leaves.as_mut() {
                    l.observe(record, drained_at);
                }
            } else if kind == EventKind::TaskNew as u32 {
                d.new_tids.push(word(36));
            } else if (kind == EventKind::Decode as u32 || kind == EventKind::GraphCompute as u32)
                && word(4) & EVENT_FLAG_EXIT != 0
            {
                d.boundary = true;
                if kind == EventKind::Decode as u32 && word(32) == 1 {
                    let ts = u64::from(word(8)) | (u64::from(word(12)) << 32);
                    d.decode_steps.push(ts);
                }
            }
        });
        if let Some(s) = self.sampler.as_mut() {
            s.settle();
        }
        d
    }

    /// Writes the sample histograms that are due (all of them with `force`).
    fn write_samples(&mut self, force: bool) -> Result<(), RecordError> {
        let Some(s) = self.sampler.as_mut() else {
            return Ok(());
        };
        for ev in s.take_due(force) {
            self.sink.collector_record(&ev)?;
        }
        Ok(())
    }

    /// Counters on new threads, leaf nodes when due, the QoS controller.
    fn after_drain(&mut self, d: Drained) -> Result<(), RecordError> {
        if let Some(rejected) = d.rejected {
            return Err(rejected.into());
        }
        if self.record_check.as_ref().is_some_and(|c| c.confirmed()) {
            self.record_check = None;
        }
        for tid in d.new_tids {
            if let Some(ev) = self.maps.open_counters(&mut self.pmcs, self.pid, tid)? {
                self.sink.collector_record(&ev)?;
            }
        }
        self.read_leaves(d.boundary)?;
        self.run_qos(&d.decode_steps)?;
        self.run_windows(d.decode_steps.len())?;
        self.write_samples(false)?;
        Ok(())
    }

    /// The levels the probes should have now: those recorded, as the live view's user
    /// left them, the operator level only while the QoS controller and the sampled
    /// window (if any) both want it.
    fn wanted_levels(&self) -> u32 {
        let window_on = self.windows.as_ref().is_none_or(OpWindows::traced);
        effective_levels(
            self.cfg.levels,
            self.user_levels,
            self.qos_op_on && window_on,
        )
    }

    /// Writes [`Self::wanted_levels`] to the control map and attaches or detaches the
    /// operator probes to match; returns when the switch was written and when the
    /// probes were settled (`ProbeMaps::apply_levels`).
    fn apply_op_state(&mut self) -> Result<(u64, u64), RecordError> {
        self.control.levels = self.wanted_levels();
        self.maps
            .apply_levels(self.control, self.op_probes.as_mut())
    }

    /// Sampled windows: attaches or detaches the operator probes when a window begins or
    /// ends, and records the switch.
    fn run_windows(&mut self, decode_steps: usize) -> Result<(), RecordError> {
        let Some(w) = self.windows.as_mut() else {
            return Ok(());
        };
        let was_on = w.traced();
        for _ in 0..decode_steps {
            w.on_decode_step();
        }
        // Several switches in one drain (a long tick): only the state reached counts. The
        // window's own state, not the levels: the QoS controller may hold the operator
        // level off, and a window's start and end are marked all the same.
        let on = w.traced();
        if on == was_on {
            return Ok(());
        }
        let steps = w.steps() as u32;
        let (switched_at, settled_at) = match self.sample_probes.as_mut() {
            // A sampled recording without operators: the windows switch the sampler's
            // timers, for the in-process measure of what sampling costs.
            Some(p) if self.cfg.levels & LEVEL_OP == 0 => {
                let switched = clocks().0;
                p.set_attached(&mut self.maps.ebpf, on)?;
                (switched, clocks().0)
            }
            _ => self.apply_op_state()?,
        };
        let ev = OpWindowEvent {
            header: EventHeader {
                ts_ns: switched_at,
                ..collector_header(EventKind::OpWindow, self.pid, 0, u32::MAX)
            },
            traced: u32::from(on),
            decode_steps: steps,
            settled_ns: settled_at,
        };
        self.sink.collector_record(&ev)?;
        Ok(())
    }

    fn read_leaves(&mut self, boundary: bool) -> Result<(), RecordError> {
        let Some(l) = self.leaves.as_mut() else {
            return Ok(());
        };
        let now = Instant::now();
        let pid = self.pid;
        if l.due(now, boundary) {
            let header = || collector_header(EventKind::LeafNode, pid, 0, u32::MAX);
            for ev in l.resolve(now, header) {
                self.sink.collector_record(&ev)?;
            }
        }
        let flags = if l.wants_wakeup(now) {
            self.control.flags | CONTROL_FLAG_WAKE_ON_GRAPH
        } else {
            self.control.flags & !CONTROL_FLAG_WAKE_ON_GRAPH
        };
        if flags != self.control.flags {
            self.control.flags = flags;
            self.maps.write_control(self.control)?;
        }
        Ok(())
    }

    fn run_qos(&mut self, decode_steps: &[u64]) -> Result<(), RecordError> {
        if self.qos.is_none() {
            return Ok(());
        }
        let min_tps = q_min(self.cfg);
        for &ts in decode_steps {
            let Some(decision) = self.qos.as_mut().map(|q| q.on_decode_step(ts)) else {
                break;
            };
            let (tps, on) = match decision {
                QosDecision::Keep => continue,
                QosDecision::SwitchOff { tps } => (tps, false),
                QosDecision::SwitchOn { tps } => (tps, true),
            };
            let before = self.control.levels;
            self.qos_op_on = on;
            let (switched_at, _) = self.apply_op_state()?;
            self.qos_switches += 1;
            eprintln!(
                "profinfer: QoS: {:.1} tokens/s {} {:.1}: operator probes {}",
                tps,
                if on { "above" } else { "below" },
                min_tps,
                if on { "on" } else { "off" }
            );
            let switch = QosSwitchEvent {
                header: EventHeader {
                    ts_ns: switched_at,
                    ..collector_header(EventKind::QosSwitch, self.pid, 0, u32::MAX)
                },
                levels_before: before,
                levels_after: self.control.levels,
                tps_milli: (tps * 1000.0) as u64,
                min_tps_milli: (min_tps * 1000.0) as u64,
            };
            self.sink.collector_record(&switch)?;
        }
        Ok(())
    }

    /// The periodic work: flush a chunk, report an ABI mismatch once, give the live view
    /// its status and apply its reply. Returns why to stop, if the view asked.
    fn on_tick(&mut self) -> Result<Option<String>, RecordError> {
        if let Some(m) = self.cost_meter.as_mut() {
            m.tick(Instant::now());
        }
        self.sink.on_tick(&self.maps);
        if !self.abi_reported && self.maps.stat_sum(STAT_ABI_MISMATCH) > 0 {
            let seen = self
                .maps
                .stat_per_cpu(STAT_ABI_SEEN)
                .map_or(0, |v| v.iter().copied().max().unwrap_or(0));
            if let Some(message) = self.plan.abi_mismatch(seen as u32) {
                eprintln!("profinfer: {message}");
            }
            self.abi_reported = true;
        }
        if !self.sink.observer().is_live() {
            return Ok(None);
        }
        let status = CollectorStatus {
            attached_levels: self.cfg.levels,
            user_levels: self.user_levels,
            effective_levels: self.control.levels,
            qos_enabled: self.qos.is_some(),
            qos_op_on: self.qos_op_on,
            qos_switches: self.qos_switches,
            produced: self.maps.stat_sum(STAT_PRODUCED),
            lost: self.maps.stat_sum(STAT_LOST),
            written: self.sink.written,
            bytes_drained: self.sink.bytes_drained,
            ring_bytes: match self.cfg.buffer {
                BufferKind::Ring { bytes } => Some(u64::from(bytes)),
                BufferKind::Perf { .. } => None,
            },
        };
        let reply = self.sink.observer().on_tick(&status);
        if let Some(wanted) = reply.user_levels {
            self.user_levels = wanted & self.cfg.levels;
            if self.wanted_levels() != self.control.levels {
                self.apply_op_state()?;
            }
        }
        Ok(reply
            .stop
            .then(|| "stopped from the live view; target left running".to_owned()))
    }
}

fn q_min(cfg: &TracerConfig) -> f64 {
    cfg.qos.as_ref().map_or(0.0, |q| q.min_tps)
}
