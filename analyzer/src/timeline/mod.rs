//! ProfTime (seed 002 §4.2), written once: a single walk of the [`TraceModel`] into a
//! timeline of tracks, slices, instants, flows and counters, which each encoder (the
//! Chrome JSON of [`crate::export::chrome`], the Perfetto protobuf of
//! [`crate::export::perfetto`]) turns into its own bytes through [`TimelineSink`].
//!
//! What the timeline holds:
//!
//! - a process track for the target (`engine (pid N)`), and in a split pass one more per
//!   backend, grouping the threads that ran that backend's splits ([`layout`]);
//! - one track per thread (the target's, and any other that ran a decode call, graph,
//!   phase or backend call): token, graph and phase slices on the thread that ran them,
//!   backend calls, operator slices on every thread, nested op ⊂ graph ⊂ token
//!   ([`thread_track`]); each slice's name, category and args come from [`slice_args`];
//! - a `sched` track under each target thread with its scheduler states, a GPU lane per
//!   backend with node timestamps, a track of the CPU's waits for an accel ([`lanes`]);
//! - counter tracks (decode tokens/s, each counter's rate per decode call) and an
//!   instant track (QoS switches, loss records, recording marks) ([`lanes`]);
//! - flows from each graph slice to the first operator slice it ran on every thread,
//!   then from operator to operator on that thread, ending at the thread's last
//!   operator of the graph.
//!
//! Each track's events come in time order, ends before begins at equal times, so slices
//! nest however a reader orders equal timestamps. A slice that overlaps the end of the
//! slice it starts in (which recorded events never produce) is cut at that end;
//! [`WalkStats::clamped`] counts them.
//!
//! Memory: the walk holds, per track, its open-slice stack and the order of its phase
//! and backend calls (4 bytes each), plus one op name and shape string per node; the
//! events go to the sink one at a time.

mod lanes;
pub mod layout;
pub mod range;
pub mod slice_args;
mod thread_track;

use std::{borrow::Cow, io};

use crate::model::TraceModel;

pub use layout::{Layout, Track, TrackId};
pub use range::{RangeSpec, TimeRange};

/// What the walk emits.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct TimelineOptions {
    /// Operator slices (the bulk of a timeline).
    pub ops: bool,
    /// Scheduler-state slices (and their tracks).
    pub states: bool,
    /// Flows from graphs to their operators.
    pub flows: bool,
    /// A slice per layer of each graph, on the graph's thread (from its first node's
    /// start to its last node's end over all threads): the overview of a long run.
    pub layers: bool,
    /// Only what begins in this range ([`range`]).
    pub range: Option<TimeRange>,
}

impl Default for TimelineOptions {
    fn default() -> Self {
        TimelineOptions::new(true, true, true)
    }
}

impl TimelineOptions {
    /// The options with operator slices, states and flows as given (no layer slices, the
    /// whole run).
    pub fn new(ops: bool, states: bool, flows: bool) -> TimelineOptions {
        TimelineOptions {
            ops,
            states,
            flows,
            layers: false,
            range: None,
        }
    }

    /// With layer slices or without.
    pub fn with_layers(mut self, layers: bool) -> TimelineOptions {
        self.layers = layers;
        self
    }

    /// Only what begins in `range` (`None`: the whole run).
    pub fn with_range(mut self, range: Option<TimeRange>) -> TimelineOptions {
        self.range = range;
        self
    }
}

/// A slice argument's value.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgValue<'a> {
    /// An unsigned integer.
    Uint(u64),
    /// A signed integer.
    Int(i64),
    /// A float.
    Double(f64),
    /// A string (one of few values that repeat: op types, backends, phases).
    Str(&'a str),
}

/// A named argument of a slice or instant.
#[derive(Clone, Debug, PartialEq)]
pub struct Arg<'a> {
    /// Its name.
    pub name: Cow<'a, str>,
    /// Its value.
    pub value: ArgValue<'a>,
}

impl<'a> Arg<'a> {
    /// An unsigned argument.
    pub fn uint(name: &'a str, v: u64) -> Arg<'a> {
        Arg {
            name: Cow::Borrowed(name),
            value: ArgValue::Uint(v),
        }
    }

    /// A signed argument.
    pub fn int(name: &'a str, v: i64) -> Arg<'a> {
        Arg {
            name: Cow::Borrowed(name),
            value: ArgValue::Int(v),
        }
    }

    /// A float argument.
    pub fn double(name: &'a str, v: f64) -> Arg<'a> {
        Arg {
            name: Cow::Borrowed(name),
            value: ArgValue::Double(v),
        }
    }

    /// A string argument.
    pub fn str(name: &'a str, v: &'a str) -> Arg<'a> {
        Arg {
            name: Cow::Borrowed(name),
            value: ArgValue::Str(v),
        }
    }
}

/// A slice's name.
#[derive(Clone, Debug, PartialEq)]
pub enum SliceName<'a> {
    /// A name many slices share (an operator's node, a phase, a state): worth interning.
    Shared(&'a str),
    /// A name unique to one slice (a decode call, a graph computation, a backend call).
    Unique(String),
}

impl SliceName<'_> {
    /// The name's text.
    pub fn as_str(&self) -> &str {
        match self {
            SliceName::Shared(s) => s,
            SliceName::Unique(s) => s,
        }
    }
}

/// A slice beginning on the current track (see [`TimelineSink::sequence`]).
#[derive(Debug)]
pub struct Slice<'a> {
    /// Start, ns (absolute: encoders subtract [`TraceModel::first_ns`]).
    pub start_ns: u64,
    /// End, ns (cut at the enclosing slice's end if it overlapped it).
    pub end_ns: u64,
    /// Its name.
    pub name: SliceName<'a>,
    /// Its category (`token`, `graph`, `phase`, `backend`, an op type, `sched`, `gpu`,
    /// `sync`).
    pub category: &'a str,
    /// Its arguments, in order.
    pub args: &'a [Arg<'a>],
    /// Flows it starts or continues.
    pub flows: &'a [u64],
    /// Flows it ends.
    pub terminating_flows: &'a [u64],
    /// The node an operator slice shows: slices of one node have the same name,
    /// category and argument names and strings, which an encoder may look up once.
    pub node: Option<u32>,
}

/// A point event on the instant track.
#[derive(Debug)]
pub struct Instant<'a> {
    /// When, ns.
    pub ts_ns: u64,
    /// What happened.
    pub name: String,
    /// `qos`, `loss` or `recording`.
    pub category: &'static str,
    /// Its arguments.
    pub args: &'a [Arg<'a>],
}

/// An encoder of the timeline. The walk calls [`TimelineSink::tracks`] once, then, track
/// by track, [`TimelineSink::sequence`] followed by that track's events in time order.
pub trait TimelineSink {
    /// Every track, parents before children.
    ///
    /// # Errors
    /// The encoder's I/O errors.
    fn tracks(&mut self, layout: &Layout) -> io::Result<()>;

    /// The events that follow belong to `track` (counters may name their own track).
    ///
    /// # Errors
    /// The encoder's I/O errors.
    fn sequence(&mut self, track: TrackId) -> io::Result<()>;

    /// A slice begins; it ends at the [`TimelineSink::end`] that closes it (at
    /// `slice.end_ns`).
    ///
    /// # Errors
    /// The encoder's I/O errors.
    fn begin(&mut self, slice: &Slice<'_>) -> io::Result<()>;

    /// The innermost open slice ends at `ts_ns`.
    ///
    /// # Errors
    /// The encoder's I/O errors.
    fn end(&mut self, ts_ns: u64) -> io::Result<()>;

    /// A sample of counter track `track`.
    ///
    /// # Errors
    /// The encoder's I/O errors.
    fn counter(&mut self, track: TrackId, ts_ns: u64, value: f64) -> io::Result<()>;

    /// An instant on the instant track.
    ///
    /// # Errors
    /// The encoder's I/O errors.
    fn instant(&mut self, instant: &Instant<'_>) -> io::Result<()>;
}

/// What the walk did besides emitting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WalkStats {
    /// Slices cut at the end of their enclosing slice.
    pub clamped: u64,
    /// Flows started (each ends at one operator slice).
    pub flows: u64,
}

/// Walks `model` into `sink`: the tracks, then each track's events.
///
/// # Errors
/// The sink's I/O errors.
pub fn walk(
    model: &TraceModel,
    opts: &TimelineOptions,
    sink: &mut impl TimelineSink,
) -> io::Result<WalkStats> {
    match opts.range {
        Some(range) => walk_all(model, opts, &mut range::RangeFilter::new(sink, range)),
        None => walk_all(model, opts, sink),
    }
}

fn walk_all(
    model: &TraceModel,
    opts: &TimelineOptions,
    sink: &mut impl TimelineSink,
) -> io::Result<WalkStats> {
    let layout = Layout::new(model, opts);
    sink.tracks(&layout)?;
    let mut stats = WalkStats::default();
    let names = slice_args::NodeTexts::new(model);
    let mut walker = thread_track::ThreadWalk::new(model, opts, &layout, &names);
    for th in &layout.threads {
        walker.write(th.index, th.tid, sink, &mut stats)?;
    }
    lanes::write_states(model, &layout, sink)?;
    lanes::write_gpu(&layout, sink)?;
    lanes::write_sync_waits(&layout, sink)?;
    lanes::write_counters(model, sink)?;
    lanes::write_instants(model, sink)?;
    Ok(stats)
}
