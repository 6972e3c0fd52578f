//! The timeline's tracks: which exist, what each is called, which process (track group)
//! holds it, and the per-run facts the slices need (the backend split of each decode
//! call, the GPU lanes, the CPU's waits for an accel).

use std::collections::HashMap;

use crate::{
    backends::{self, GpuLanes, TokenSplit},
    model::{ThreadInfo, TraceModel, backend_name},
};

use super::TimelineOptions;

/// A track, as both encoders know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TrackId {
    /// The target's process (in a split pass: its CPU backend's group).
    Process,
    /// The track group of backend kind `.0` (a split pass).
    BackendProcess(u32),
    /// Thread `.0`'s slices.
    Thread(u32),
    /// Thread `.0`'s scheduler states.
    Sched(u32),
    /// Backend kind `.0`'s GPU lane (its nodes' execution from its timestamps).
    GpuLane(u32),
    /// The CPU's waits for an accel (a split pass).
    SyncWaits,
    /// Decode tokens per second.
    TokensPerSecond,
    /// Counter `.0`'s rate (index into [`TraceModel::counter_names`]).
    Counter(usize),
    /// QoS switches, loss records and recording marks.
    Instants,
}

/// One track.
#[derive(Clone, Debug, PartialEq)]
pub struct Track {
    /// Which.
    pub id: TrackId,
    /// Its name as a person reads it.
    pub name: String,
    /// The process (track group) it is drawn in: the target's pid, a backend group's
    /// pid ([`backends::backend_group_pid`]) or, for another process's thread, its own.
    pub pid: u32,
    /// The track it is drawn under (none for processes and threads).
    pub parent: Option<TrackId>,
    /// Its place among its siblings, where the order is not by id.
    pub sort_index: Option<i64>,
    /// A counter track's unit.
    pub counter_unit: Option<&'static str>,
}

/// A thread that has a track.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadTrack {
    /// Its index in [`TraceModel::threads`].
    pub index: u32,
    /// Its tid.
    pub tid: u32,
}

/// The tracks of a model's timeline and what the walk needs of the run.
#[derive(Debug)]
pub struct Layout<'m> {
    /// The target's pid.
    pub pid: u32,
    /// Every track, parents first, in the encoders' output order.
    pub tracks: Vec<Track>,
    /// The threads with a track, by tid.
    pub threads: Vec<ThreadTrack>,
    /// The GPU lanes.
    pub gpu: GpuLanes<'m>,
    /// The CPU's waits for an accel: `(start, end, node name)`.
    pub waits: Vec<(u64, u64, &'m str)>,
    /// Each decode call's time split, in a split pass (empty otherwise).
    pub token_splits: Vec<TokenSplit>,
    /// Whether the run splits its graphs over backends (the views show the split).
    pub split_pass: bool,
}

/// The label of a thread's track: `comm (tid)` or `tid N`, `main` for the main thread.
pub fn thread_label(th: &ThreadInfo) -> String {
    let label = if th.comm.is_empty() {
        format!("tid {}", th.tid)
    } else {
        format!("{} ({})", th.comm, th.tid)
    };
    if th.is_main {
        format!("{label} main")
    } else {
        label
    }
}

/// The threads that get a track: the target's, and any other that ran a decode call,
/// graph, phase or backend call.
fn track_threads(model: &TraceModel) -> Vec<(usize, &ThreadInfo)> {
    let mut with_spans: Vec<u32> = model
        .tokens()
        .iter()
        .map(|t| t.tid)
        .chain(model.graphs().iter().map(|g| g.tid))
        .chain(model.phases().iter().map(|p| p.tid))
        .chain(model.backend_calls().iter().map(|c| c.tid))
        .collect();
    with_spans.sort_unstable();
    with_spans.dedup();
    let mut v: Vec<(usize, &ThreadInfo)> = model
        .threads()
        .iter()
        .enumerate()
        .filter(|(_, th)| model.is_target_thread(th) || with_spans.binary_search(&th.tid).is_ok())
        .collect();
    v.sort_by_key(|(_, th)| th.tid);
    v
}

fn track(id: TrackId, name: String, pid: u32, parent: Option<TrackId>) -> Track {
    Track {
        id,
        name,
        pid,
        parent,
        sort_index: None,
        counter_unit: None,
    }
}

impl<'m> Layout<'m> {
    /// The layout of `model`'s timeline.
    pub fn new(model: &'m TraceModel, opts: &TimelineOptions) -> Layout<'m> {
        let pid = model.target_pid();
        let backend_of = backends::thread_backends(model);
        let gpu = backends::gpu_lanes(model);
        let waits = backends::sync_waits(model);
        let split = Some(backends::compute(model)).filter(|b| b.is_interesting());
        let threads = track_threads(model);
        let mut layout = Layout {
            pid,
            tracks: Vec::new(),
            threads: threads
                .iter()
                .map(|&(i, th)| ThreadTrack {
                    index: i as u32,
                    tid: th.tid,
                })
                .collect(),
            gpu,
            waits,
            split_pass: split.is_some(),
            token_splits: split.map(|b| b.tokens).unwrap_or_default(),
        };
        layout.processes(&backend_of);
        layout.thread_tracks(model, &threads, &backend_of, opts);
        layout.run_tracks(model);
        layout
    }

    /// The target's process and, in a split pass, one per backend with its GPU lane.
    fn processes(&mut self, backend_of: &HashMap<u32, u32>) {
        let pid = self.pid;
        let mut kinds: Vec<u32> = backend_of
            .values()
            .copied()
            .chain(self.gpu.kinds.iter().copied())
            .collect();
        kinds.sort_unstable();
        kinds.dedup();
        let own = if kinds.is_empty() {
            format!("engine (pid {pid})")
        } else {
            format!("engine (pid {pid}): cpu backend")
        };
        self.tracks.push(track(TrackId::Process, own, pid, None));
        for (i, &kind) in kinds.iter().enumerate() {
            let name = format!("engine (pid {pid}): {} backend", backend_name(kind));
            let gpid = backends::backend_group_pid(pid, kind);
            let mut t = track(TrackId::BackendProcess(kind), name, gpid, None);
            t.sort_index = Some(i as i64 + 1);
            self.tracks.push(t);
        }
        for &kind in &self.gpu.kinds {
            self.tracks.push(track(
                TrackId::GpuLane(kind),
                "GPU (node timestamps)".to_owned(),
                backends::backend_group_pid(pid, kind),
                Some(TrackId::BackendProcess(kind)),
            ));
        }
    }

    /// One track per thread, and its `sched` track under it.
    fn thread_tracks(
        &mut self,
        model: &TraceModel,
        threads: &[(usize, &ThreadInfo)],
        backend_of: &HashMap<u32, u32>,
        opts: &TimelineOptions,
    ) {
        for (i, (_, th)) in threads.iter().enumerate() {
            let label = thread_label(th);
            let tpid = match backend_of.get(&th.tid) {
                Some(&kind) => backends::backend_group_pid(self.pid, kind),
                None => th.pid.unwrap_or(self.pid),
            };
            let mut t = track(TrackId::Thread(th.tid), label.clone(), tpid, None);
            t.sort_index = Some(2 * i as i64);
            self.tracks.push(t);
            if opts.states && model.is_target_thread(th) {
                let mut t = track(
                    TrackId::Sched(th.tid),
                    format!("{label} sched"),
                    tpid,
                    Some(TrackId::Thread(th.tid)),
                );
                t.sort_index = Some(2 * i as i64 + 1);
                self.tracks.push(t);
            }
        }
    }

    /// The counter tracks, the instant track and the CPU's waits.
    fn run_tracks(&mut self, model: &TraceModel) {
        let pid = self.pid;
        let counter = |id, name: String, unit| {
            let mut t = track(id, name, pid, Some(TrackId::Process));
            t.counter_unit = Some(unit);
            t
        };
        self.tracks.push(counter(
            TrackId::TokensPerSecond,
            "tokens/s".to_owned(),
            "tokens/s",
        ));
        for (i, name) in model.counter_names().iter().enumerate() {
            self.tracks
                .push(counter(TrackId::Counter(i), format!("{name}/s"), "1/s"));
        }
        self.tracks.push(track(
            TrackId::Instants,
            "QoS and losses".to_owned(),
            pid,
            Some(TrackId::Process),
        ));
        if !self.waits.is_empty() {
            let total: u64 = self.waits.iter().map(|w| w.1.saturating_sub(w.0)).sum();
            let name = format!(
                "CPU waits for accel ({} syncs, {} in all)",
                self.waits.len(),
                crate::export::dot::fmt_ns(total)
            );
            let mut t = track(TrackId::SyncWaits, name, pid, Some(TrackId::Process));
            t.sort_index = Some(-1);
            self.tracks.push(t);
        }
    }

    /// The track `id`, if the timeline has it.
    pub fn track(&self, id: TrackId) -> Option<&Track> {
        self.tracks.iter().find(|t| t.id == id)
    }
}
