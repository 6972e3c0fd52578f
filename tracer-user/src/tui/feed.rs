//! From the collector to the screen: [`LiveFeed`] is the collector's
//! [`RecordObserver`]; it decodes records into batches and sends them, with the
//! collector's status, over a bounded channel to [`aggregate`], which owns the
//! analyzer's reordering window and [`TraceModel`] and sends a [`LiveSnapshot`] a few
//! times a second over a second bounded channel to the render loop. Nothing is shared:
//! no lock is taken while rendering.
//!
//! When a channel is full the collector does not wait (it must keep draining the ring
//! buffer): the batch is skipped and counted; the trace file still has every record.

use std::time::{Duration, Instant};

use analyzer::{TraceModel, ingest::Reorder};
use common::event::EventKind;
use tokio::sync::mpsc::{self, error::TrySendError};
use trace_format::{Event, TraceHeader, decode_record};

use super::snapshot::{LiveSnapshot, rate};
use crate::{
    observe::{CollectorStatus, ObserverReply, RecordObserver},
    record::RecordSummary,
    target::TargetEnd,
};

/// Messages buffered between the collector and the aggregator.
pub const FEED_CAPACITY: usize = 1024;
/// Snapshots buffered between the aggregator and the render loop.
pub const SNAPSHOT_CAPACITY: usize = 4;
/// Requests buffered from the render loop to the collector.
pub const CONTROL_CAPACITY: usize = 64;
/// Events per batch before it is sent without waiting for the tick.
pub const BATCH_EVENTS: usize = 4096;
/// Time between two snapshots.
pub const SNAPSHOT_EVERY: Duration = Duration::from_millis(250);

/// Collector → aggregator.
#[derive(Debug)]
pub enum FeedMsg {
    /// The trace header (first message).
    Start(Box<TraceHeader>),
    /// Decoded records in drain order.
    Events(Vec<Event>),
    /// The collector's status and the events skipped so far by the feed.
    Status(CollectorStatus, u64),
    /// Recording ended: its totals, or the error.
    Done(Result<RecordingEnd, String>),
}

/// How a recording ended, as the final screen shows it: the footer's totals (the last
/// tick's status misses what the collector drained after the target exited) and why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordingEnd {
    /// Why recording ended, the footer's `end_reason` (`target exited with status 0`,
    /// `target killed by signal 9`, `stopped from the live view; ...`).
    pub reason: String,
    /// How the target ended, when profinfer started it and saw it end.
    pub target_end: Option<TargetEnd>,
    /// Records the probes tried to emit.
    pub produced: u64,
    /// Probe records written (the footer's `events_written`).
    pub written: u64,
    /// Records lost (buffer full).
    pub lost: u64,
}

impl RecordingEnd {
    /// The end of the recording `summary` describes.
    pub fn of(summary: &RecordSummary) -> RecordingEnd {
        RecordingEnd {
            reason: summary.end_reason.clone(),
            target_end: summary.target_end,
            produced: summary.produced,
            written: summary.written,
            lost: summary.lost,
        }
    }
}

/// Render loop → collector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// Levels the user wants on.
    SetLevels(u32),
    /// Stop recording (detach; the target keeps running).
    Stop,
}

/// Aggregator → render loop.
#[derive(Clone, Debug, PartialEq)]
pub enum LiveUpdate {
    /// The target's pid, as soon as the trace header is known (the render loop watches
    /// it to say at once that the target exited).
    Started {
        /// Target pid.
        pid: u32,
    },
    /// A new frame.
    Snapshot(Box<LiveSnapshot>),
    /// The last frame, with every record applied and the footer's totals, and how the
    /// recording ended.
    Finished(Box<LiveSnapshot>, Result<RecordingEnd, String>),
}

/// The collector side: a [`RecordObserver`] that feeds the aggregator.
#[derive(Debug)]
pub struct LiveFeed {
    tx: mpsc::Sender<FeedMsg>,
    control: mpsc::Receiver<Control>,
    batch: Vec<Event>,
    skipped: u64,
}

impl LiveFeed {
    /// A feed sending to `tx` and taking requests from `control`.
    pub fn new(tx: mpsc::Sender<FeedMsg>, control: mpsc::Receiver<Control>) -> LiveFeed {
        LiveFeed {
            tx,
            control,
            batch: Vec::new(),
            skipped: 0,
        }
    }

    /// Events skipped because the aggregator fell behind.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    fn send(&mut self, msg: FeedMsg) {
        if let Err(
            TrySendError::Full(FeedMsg::Events(v)) | TrySendError::Closed(FeedMsg::Events(v)),
        ) = self.tx.try_send(msg)
        {
            self.skipped += v.len() as u64;
        }
    }

    fn flush(&mut self) {
        if !self.batch.is_empty() {
            let batch = std::mem::take(&mut self.batch);
            self.send(FeedMsg::Events(batch));
        }
    }

    /// Sends what is left and the outcome, waiting for room (call outside the runtime,
    /// after recording ended).
    pub fn finish(mut self, outcome: Result<RecordingEnd, String>) {
        if !self.batch.is_empty() {
            let batch = std::mem::take(&mut self.batch);
            let _ = self.tx.blocking_send(FeedMsg::Events(batch));
        }
        let _ = self.tx.blocking_send(FeedMsg::Done(outcome));
    }
}

/// Decodes one raw record (as the collector writes it); `None` for unknown kinds or
/// short records.
pub fn decode(record: &[u8]) -> Option<Event> {
    let kind = u32::from_le_bytes(record.get(..4)?.try_into().ok()?);
    decode_record(EventKind::from_u32(kind)?, record)
}

impl RecordObserver for LiveFeed {
    fn on_start(&mut self, header: &TraceHeader) {
        self.send(FeedMsg::Start(Box::new(header.clone())));
    }

    fn on_record(&mut self, record: &[u8]) {
        if let Some(e) = decode(record) {
            self.batch.push(e);
            if self.batch.len() >= BATCH_EVENTS {
                self.flush();
            }
        }
    }

    fn on_tick(&mut self, status: &CollectorStatus) -> ObserverReply {
        self.flush();
        self.send(FeedMsg::Status(status.clone(), self.skipped));
        let mut reply = ObserverReply::default();
        while let Ok(c) = self.control.try_recv() {
            match c {
                Control::SetLevels(l) => reply.user_levels = Some(l),
                Control::Stop => reply.stop = true,
            }
        }
        reply
    }
}

/// The aggregator: applies the feed to the model and sends snapshots until the feed
/// ends. Runs on its own thread (blocking receive).
pub fn aggregate(mut rx: mpsc::Receiver<FeedMsg>, out: mpsc::Sender<LiveUpdate>) {
    let mut model: Option<TraceModel> = None;
    let mut target = String::new();
    let mut window = Reorder::default();
    let mut status = CollectorStatus::default();
    let mut skipped = 0;
    let mut last = Instant::now();
    let mut last_written = 0u64;
    let mut drained_per_s = 0.0;
    // Whether records came since the last status tick.
    let mut fresh = false;
    let snapshot = |model: &Option<TraceModel>, status: &CollectorStatus, target: &str| {
        let mut s = model
            .as_ref()
            .map_or_else(LiveSnapshot::default, |m| LiveSnapshot::build(m, status));
        s.target = target.to_owned();
        s.status = status.clone();
        s
    };
    while let Some(msg) = rx.blocking_recv() {
        match msg {
            FeedMsg::Start(h) => {
                target = h.target.path.clone();
                model = Some(TraceModel::new(&h));
                // Waits for room: the render loop drains the channel, and must not miss it.
                let _ = out.blocking_send(LiveUpdate::Started { pid: h.target.pid });
            }
            FeedMsg::Events(events) => {
                if let Some(m) = model.as_mut() {
                    let mut apply = |e: &Event| m.apply(e);
                    for e in events {
                        window.push(e, &mut apply);
                    }
                }
                fresh = true;
            }
            FeedMsg::Status(s, n) => {
                // A tick that brought no records: the collector's drains found the
                // buffers empty, so whatever comes later was recorded after what the
                // window holds. Release it, or an idle target (a chat waiting for its
                // next message, a server between requests) would never show its last
                // records.
                if !fresh && let Some(m) = model.as_mut() {
                    window.finish(&mut |e: &Event| m.apply(e));
                }
                fresh = false;
                status = s;
                skipped = n;
                let elapsed = last.elapsed();
                if elapsed >= SNAPSHOT_EVERY {
                    let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
                    drained_per_s = rate(
                        usize::try_from(status.written.saturating_sub(last_written))
                            .unwrap_or(usize::MAX),
                        ns,
                    );
                    last_written = status.written;
                    last = Instant::now();
                    let mut s = snapshot(&model, &status, &target);
                    s.drained_per_s = drained_per_s;
                    s.view_dropped = skipped;
                    // A full channel means the screen is behind: it gets the next one.
                    let _ = out.try_send(LiveUpdate::Snapshot(Box::new(s)));
                }
            }
            FeedMsg::Done(outcome) => {
                if let Some(m) = model.as_mut() {
                    let mut apply = |e: &Event| m.apply(e);
                    window.finish(&mut apply);
                    m.finish(None);
                }
                // The last tick came before the final drain: the footer's totals replace
                // its counts, so the final frame says what the trace holds.
                if let Ok(end) = &outcome {
                    status.produced = end.produced;
                    status.written = end.written;
                    status.lost = end.lost;
                }
                let mut s = snapshot(&model, &status, &target);
                s.drained_per_s = drained_per_s;
                s.view_dropped = skipped;
                let _ = out.blocking_send(LiveUpdate::Finished(Box::new(s), outcome));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use analyzer::synthetic::{SynthSpec, generate, synth_header};

    use super::*;

    /// The synthetic run through the feed and the aggregator gives the same rows as the
    /// model built directly from the same records, including the records drained after
    /// the last tick (after the target exited); the final frame counts the footer's
    /// events, not the last tick's.
    /// A feed started on the synthetic header with its aggregator thread, and the run
    /// `spec` generates: its records and the model built from them directly.
    struct LiveRig {
        feed: LiveFeed,
        ctl_tx: mpsc::Sender<Control>,
        out_rx: mpsc::Receiver<LiveUpdate>,
        agg: std::thread::JoinHandle<()>,
        direct: TraceModel,
        records: Vec<Vec<u8>>,
    }

    fn live_rig(spec: &SynthSpec) -> LiveRig {
        let (tx, rx) = mpsc::channel(FEED_CAPACITY);
        let (ctl_tx, ctl_rx) = mpsc::channel(CONTROL_CAPACITY);
        let (out_tx, out_rx) = mpsc::channel(SNAPSHOT_CAPACITY);
        let agg = std::thread::spawn(move || aggregate(rx, out_tx));
        let mut feed = LiveFeed::new(tx, ctl_rx);
        let header = synth_header();
        feed.on_start(&header);
        let mut direct = TraceModel::new(&header);
        let mut records = Vec::new();
        generate(spec, |rec| {
            records.push(rec.to_vec());
            direct.apply(&decode(rec).expect("decodes"));
        });
        direct.finish(None);
        LiveRig {
            feed,
            ctl_tx,
            out_rx,
            agg,
            direct,
            records,
        }
    }

    #[test]
    fn feed_and_aggregator_reproduce_the_model() {
        let LiveRig {
            mut feed,
            ctl_tx,
            mut out_rx,
            agg,
            direct,
            records,
        } = live_rig(&SynthSpec::sized(5, 4, 2));
        let (before, after) = records.split_at(records.len() / 2);
        for r in before {
            feed.on_record(r);
        }
        ctl_tx.try_send(Control::SetLevels(3)).expect("room");
        ctl_tx.try_send(Control::Stop).expect("room");
        let last_tick = CollectorStatus {
            written: before.len() as u64,
            produced: before.len() as u64,
            ..CollectorStatus::default()
        };
        let reply = feed.on_tick(&last_tick);
        assert_eq!(
            reply,
            ObserverReply {
                user_levels: Some(3),
                stop: true
            }
        );
        // The final drain: no tick follows.
        for r in after {
            feed.on_record(r);
        }
        assert_eq!(feed.skipped(), 0);
        let end = RecordingEnd {
            reason: "target exited with status 3".to_owned(),
            target_end: Some(TargetEnd::Exited(3)),
            produced: records.len() as u64 + 2,
            written: records.len() as u64,
            lost: 2,
        };
        feed.finish(Ok(end.clone()));
        let mut updates = Vec::new();
        while let Some(u) = out_rx.blocking_recv() {
            updates.push(u);
        }
        agg.join().expect("aggregator");
        assert_eq!(
            updates.first(),
            Some(&LiveUpdate::Started {
                pid: synth_header().target.pid
            })
        );
        let Some(LiveUpdate::Finished(snap, outcome)) = updates.last() else {
            panic!("no final update: {updates:?}");
        };
        assert_eq!(outcome, &Ok(end));
        let expect = LiveSnapshot::build(&direct, &CollectorStatus::default());
        assert_eq!(snap.by_type, expect.by_type);
        assert_eq!(snap.by_class, expect.by_class);
        assert_eq!(snap.tps_series, expect.tps_series);
        assert_eq!(snap.decode_steps, expect.decode_steps);
        assert_eq!(snap.prefill_tokens, expect.prefill_tokens);
        assert_eq!(snap.latest, expect.latest);
        assert_eq!(snap.target, "synthetic-engine");
        assert_eq!(
            (snap.status.written, snap.status.produced, snap.status.lost),
            (records.len() as u64, records.len() as u64 + 2, 2),
            "the footer's totals, not the last tick's"
        );
    }

    /// A target that goes idle (a chat waiting for its next message) still shows its
    /// last records: a tick that brings none releases what the reordering window holds,
    /// before the recording ends.
    #[test]
    fn an_idle_target_shows_its_last_records_before_the_end() {
        let LiveRig {
            mut feed,
            ctl_tx: _ctl_tx,
            mut out_rx,
            agg,
            direct,
            records,
        } = live_rig(&SynthSpec::sized(3, 4, 2));
        for r in &records {
            feed.on_record(r);
        }
        // The tick after the records, then idle ticks, each after a snapshot period.
        for _ in 0..3 {
            std::thread::sleep(SNAPSHOT_EVERY);
            feed.on_tick(&CollectorStatus::default());
        }
        feed.finish(Err("stopped".into()));
        let mut updates = Vec::new();
        while let Some(u) = out_rx.blocking_recv() {
            updates.push(u);
        }
        let expect = LiveSnapshot::build(&direct, &CollectorStatus::default());
        let live: Vec<u64> = updates
            .iter()
            .filter_map(|u| match u {
                LiveUpdate::Snapshot(s) => Some(s.events),
                _ => None,
            })
            .collect();
        assert!(
            live.contains(&expect.events),
            "no snapshot before the end showed all {} records: {live:?}",
            expect.events
        );
        agg.join().expect("aggregator");
    }

    #[test]
    fn a_full_channel_skips_batches_without_blocking() {
        let (tx, _rx) = mpsc::channel(1);
        let (_ctl_tx, ctl_rx) = mpsc::channel(1);
        let mut feed = LiveFeed::new(tx, ctl_rx);
        let mut records = Vec::new();
        generate(&SynthSpec::sized(2, 2, 1), |rec| records.push(rec.to_vec()));
        for r in &records {
            feed.on_record(r);
        }
        // First tick: the batch fits; the status message finds the channel full.
        feed.on_tick(&CollectorStatus::default());
        assert_eq!(feed.skipped(), 0);
        for r in &records {
            feed.on_record(r);
        }
        feed.on_tick(&CollectorStatus::default());
        assert_eq!(feed.skipped(), records.len() as u64);
    }

    #[test]
    fn short_or_unknown_records_are_not_decoded() {
        assert!(decode(&[1, 0]).is_none());
        assert!(decode(&[0xff; 64]).is_none());
    }
}
