//! ProfTime in Perfetto's native format: a protobuf `Trace` of `TrackEvent` packets
//! (`timeline.perfetto-trace`), an encoder of the [`crate::timeline`] walk (the same
//! tracks, slices, counters and instants as the Chrome JSON of
//! [`crate::export::chrome`], which Perfetto calls a legacy format, plus the flows):
//!
//! - each process track is a `ProcessDescriptor`, each thread track a
//!   `ThreadDescriptor` (pid, tid, the thread's name), the `sched`, GPU-lane, sync,
//!   counter (`CounterDescriptor`) and instant tracks named children;
//! - slices are `TYPE_SLICE_BEGIN`/`TYPE_SLICE_END` pairs with their args as debug
//!   annotations, flows as `flow_ids` / `terminating_flow_ids`;
//! - timestamps in ns relative to the first event (as the Chrome JSON's µs).
//!
//! Encoding: each track's events are written on their own packet sequence
//! (`trusted_packet_sequence_id`), which opens with `SEQ_INCREMENTAL_STATE_CLEARED` and
//! the track as `TrackEventDefaults::track_uuid`; event names that repeat (nodes,
//! phases, states), categories, annotation names and annotation strings are interned
//! on the sequence (`interned_data` on the first packet that uses them,
//! `SEQ_NEEDS_INCREMENTAL_STATE` on every packet that relies on them); names unique to
//! one slice (decode calls, graph computations, backend calls, marks) are written
//! inline.
//!
//! Memory: packets are encoded one at a time into the writer (the `Trace` message is
//! never built), so the encoder holds one packet and the interning tables of the
//! current sequence (bounded by the distinct node names, op types and counter names,
//! not by the trace's length); the walk adds its per-track state (see
//! [`crate::timeline`]). What is *not* bounded is the input: the [`TraceModel`] holds
//! every slice of the trace (32 bytes per operator slice, see [`crate::model`]).

use std::{
    collections::HashMap,
    io::{self, Write},
};

use protobuf::{CodedOutputStream, rt::WireType};

use crate::{
    export::perfetto_schema::{
        CounterDescriptor, DebugAnnotation, DebugAnnotationName, EventCategory, EventName,
        InternedData, InternedString, ProcessDescriptor, ThreadDescriptor, TracePacket,
        TracePacketDefaults, TrackDescriptor, TrackEvent, TrackEventDefaults,
        trace_packet::SequenceFlags, track_event::Type as EventType,
    },
    model::TraceModel,
    timeline::{
        self, Arg, ArgValue, Instant, Layout, Slice, SliceName, TimeRange, TimelineOptions,
        TimelineSink, Track, TrackId,
    },
};

/// Options of the Perfetto export.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PerfettoOptions {
    /// Emit operator slices (the bulk of the file).
    pub ops: bool,
    /// Emit thread-state slices.
    pub states: bool,
    /// Emit flows from graphs to their operators.
    pub flows: bool,
    /// Emit a slice per layer of each graph (the overview of a long run).
    pub layers: bool,
    /// Only what begins in this range (a part of a long run's timeline).
    pub range: Option<TimeRange>,
}

impl Default for PerfettoOptions {
    fn default() -> Self {
        PerfettoOptions {
            ops: true,
            states: true,
            flows: true,
            layers: false,
            range: None,
        }
    }
}

impl PerfettoOptions {
    /// The full detail of `range`.
    pub fn part(range: TimeRange) -> PerfettoOptions {
        PerfettoOptions {
            range: Some(range),
            ..PerfettoOptions::default()
        }
    }

    /// The overview of a long run (of `range`): tokens, graphs, layers, phases, backend
    /// calls, counters and marks, without operators or scheduler states.
    pub fn overview(range: Option<TimeRange>) -> PerfettoOptions {
        PerfettoOptions {
            ops: false,
            states: false,
            flows: false,
            layers: true,
            range,
        }
    }
}

/// What [`write`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PerfettoStats {
    /// Trace packets written.
    pub packets: u64,
    /// Slices written.
    pub slices: u64,
    /// Slices cut at the end of their enclosing slice (see [`crate::timeline`]).
    pub clamped: u64,
    /// Flows started (each ends at one operator slice).
    pub flows: u64,
}

/// Track uuid of the process.
pub const PROCESS_UUID: u64 = 1;
/// Track uuid of the QoS/loss instants.
pub const INSTANTS_UUID: u64 = 2;
/// Track uuid of the tokens/s counter.
pub const TOKENS_PER_S_UUID: u64 = 3;
/// Track uuid of the CPU's waits for the accel (a split pass).
pub const SYNC_UUID: u64 = 4;

/// Track uuid of the process of backend `kind`'s track group (a split pass).
pub fn backend_process_uuid(kind: u32) -> u64 {
    0x80 + u64::from(kind)
}

/// Track uuid of backend `kind`'s GPU lane (its nodes' execution from its timestamps).
pub fn gpu_uuid(kind: u32) -> u64 {
    (3 << 32) | u64::from(kind)
}

/// Track uuid of counter `i`'s rate.
pub fn counter_uuid(i: usize) -> u64 {
    0x100 + i as u64
}

/// Track uuid of thread `tid`'s slices.
pub fn thread_uuid(tid: u32) -> u64 {
    (1 << 32) | u64::from(tid)
}

/// Track uuid of thread `tid`'s scheduler states.
pub fn state_uuid(tid: u32) -> u64 {
    (2 << 32) | u64::from(tid)
}

/// One interning table (iids from 1).
#[derive(Default)]
struct Interner {
    ids: HashMap<String, u64>,
}

impl Interner {
    /// The iid of `s` and whether it is new on this sequence.
    fn get(&mut self, s: &str) -> (u64, bool) {
        if let Some(&id) = self.ids.get(s) {
            return (id, false);
        }
        let id = self.ids.len() as u64 + 1;
        self.ids.insert(s.to_owned(), id);
        (id, true)
    }
}

/// The interned ids one node's slices share on the current sequence: name, category,
/// and per argument the (name, string value) iids, each kept with the address of the
/// text it was looked up for (a different text at that place is looked up anew).
struct NodeIids {
    name: u64,
    cat: u64,
    args: Vec<ArgIids>,
}

/// One argument's iids and the texts they stand for.
#[derive(Clone, Copy)]
struct ArgIids {
    name: (*const u8, usize, u64),
    value: (*const u8, usize, u64),
}

/// The address and length of `s`, to recognise the same text.
fn text_key(s: &str) -> (*const u8, usize) {
    (s.as_ptr(), s.len())
}

/// The packet writer: one sequence at a time.
struct Writer<'w> {
    os: CodedOutputStream<'w>,
    base: u64,
    seq: u32,
    /// Whether the current sequence has had its first packet.
    started: bool,
    track: u64,
    names: Interner,
    cats: Interner,
    ann_names: Interner,
    strings: Interner,
    pending: InternedData,
    has_pending: bool,
    packet: TracePacket,
    /// Scratch annotations of the next event.
    anns: Vec<DebugAnnotation>,
    /// The iids of the nodes seen on the current sequence.
    nodes: HashMap<u32, NodeIids>,
    stats: PerfettoStats,
}

impl<'w> Writer<'w> {
    /// Starts a new packet sequence whose events default to `track`.
    fn sequence(&mut self, track: u64) {
        self.seq += 1;
        self.started = false;
        self.track = track;
        self.names = Interner::default();
        self.cats = Interner::default();
        self.ann_names = Interner::default();
        self.strings = Interner::default();
        self.nodes.clear();
        self.pending = InternedData::new();
        self.has_pending = false;
    }

    fn rel(&self, ns: u64) -> u64 {
        ns.saturating_sub(self.base)
    }

    /// Writes one packet as a `Trace.packet` field (1, length-delimited).
    fn put(&mut self, p: &TracePacket) -> io::Result<()> {
        self.os
            .write_tag(1, WireType::LengthDelimited)
            .and_then(|()| self.os.write_message_no_tag(p))
            .map_err(io::Error::from)?;
        self.stats.packets += 1;
        Ok(())
    }

    /// Writes a packet outside any track sequence (descriptors).
    fn descriptor(&mut self, d: TrackDescriptor) -> io::Result<()> {
        let mut p = TracePacket::new();
        p.set_trusted_packet_sequence_id(self.seq);
        p.set_track_descriptor(d);
        self.put(&p)
    }

    /// The packet's track event, emptied of what the previous event set.
    fn fresh_event(&mut self) -> &mut TrackEvent {
        let e = self.packet.mut_track_event();
        e.type_ = None;
        e.track_uuid = None;
        e.name_field = None;
        e.counter_value_field = None;
        e.category_iids.clear();
        e.debug_annotations.clear();
        e.flow_ids.clear();
        e.terminating_flow_ids.clear();
        e
    }

    /// Writes the packet's track event (filled in place after [`Writer::fresh_event`]) on
    /// the current sequence, with the interned data it introduced and the sequence's
    /// opening flags and defaults on its first packet.
    fn event(&mut self, ts: u64) -> io::Result<()> {
        let ts = self.rel(ts);
        // One packet reused for every event: a TracePacket is large to build and move.
        let p = &mut self.packet;
        p.interned_data.clear();
        p.trace_packet_defaults.clear();
        p.clear_first_packet_on_sequence();
        p.set_timestamp(ts);
        p.set_trusted_packet_sequence_id(self.seq);
        let mut flags = SequenceFlags::SEQ_NEEDS_INCREMENTAL_STATE as u32;
        if !self.started {
            self.started = true;
            flags |= SequenceFlags::SEQ_INCREMENTAL_STATE_CLEARED as u32;
            p.set_first_packet_on_sequence(true);
            let mut d = TrackEventDefaults::new();
            d.set_track_uuid(self.track);
            let mut defaults = TracePacketDefaults::new();
            defaults.track_event_defaults = Some(d).into();
            p.trace_packet_defaults = Some(defaults).into();
        }
        p.set_sequence_flags(flags);
        if self.has_pending {
            self.has_pending = false;
            p.interned_data = Some(std::mem::take(&mut self.pending)).into();
        }
        self.os
            .write_tag(1, WireType::LengthDelimited)
            .and_then(|()| self.os.write_message_no_tag(&self.packet))
            .map_err(io::Error::from)?;
        self.stats.packets += 1;
        Ok(())
    }

    fn name_iid(&mut self, s: &str) -> u64 {
        let (id, new) = self.names.get(s);
        if new {
            let mut n = EventName::new();
            n.set_iid(id);
            n.set_name(s.to_owned());
            self.has_pending = true;
            self.pending.event_names.push(n);
        }
        id
    }

    fn cat_iid(&mut self, s: &str) -> u64 {
        let (id, new) = self.cats.get(s);
        if new {
            let mut c = EventCategory::new();
            c.set_iid(id);
            c.set_name(s.to_owned());
            self.has_pending = true;
            self.pending.event_categories.push(c);
        }
        id
    }

    /// The iid of annotation name `name`.
    fn ann_name_iid(&mut self, name: &str) -> u64 {
        let (id, new) = self.ann_names.get(name);
        if new {
            let mut n = DebugAnnotationName::new();
            n.set_iid(id);
            n.set_name(name.to_owned());
            self.has_pending = true;
            self.pending.debug_annotation_names.push(n);
        }
        id
    }

    /// A debug annotation named `name` (interned), value unset.
    fn ann(&mut self, name: &str) -> DebugAnnotation {
        let mut a = DebugAnnotation::new();
        a.set_name_iid(self.ann_name_iid(name));
        a
    }

    /// The iid of an annotation string value.
    fn string_iid(&mut self, v: &str) -> u64 {
        let (id, new) = self.strings.get(v);
        if new {
            let mut s = InternedString::new();
            s.set_iid(id);
            s.set_str(v.as_bytes().to_vec());
            self.has_pending = true;
            self.pending.debug_annotation_string_values.push(s);
        }
        id
    }

    /// `args` as debug annotations into the scratch list (names and string values
    /// interned: the strings of slice args repeat across slices).
    fn annotations(&mut self, args: &[Arg<'_>]) {
        let mut anns = std::mem::take(&mut self.anns);
        anns.clear();
        for arg in args {
            let mut a = self.ann(&arg.name);
            match arg.value {
                ArgValue::Uint(v) => a.set_uint_value(v),
                ArgValue::Int(v) => a.set_int_value(v),
                ArgValue::Double(v) => a.set_double_value(v),
                ArgValue::Str(v) => a.set_string_value_iid(self.string_iid(v)),
            }
            anns.push(a);
        }
        self.anns = anns;
    }

    /// [`Writer::annotations`] for a slice of node `node`, through the node's cached
    /// iids; returns the slice's name and category iids.
    fn node_annotations(&mut self, node: u32, s: &Slice<'_>) -> (u64, u64) {
        // The texts are the walk's, alive until it ends: an address seen again is the
        // same text (an owned name, which could be freed, is never cached).
        let mut ids = match self.nodes.remove(&node) {
            Some(ids) => ids,
            None => NodeIids {
                name: self.name_iid(s.name.as_str()),
                cat: self.cat_iid(s.category),
                args: Vec::new(),
            },
        };
        let mut anns = std::mem::take(&mut self.anns);
        anns.clear();
        for (k, arg) in s.args.iter().enumerate() {
            let cached = ids
                .args
                .get(k)
                .copied()
                .filter(|_| matches!(arg.name, std::borrow::Cow::Borrowed(_)));
            let name_iid = match cached {
                Some(c) if (c.name.0, c.name.1) == text_key(&arg.name) => c.name.2,
                _ => self.ann_name_iid(&arg.name),
            };
            let mut a = DebugAnnotation::new();
            a.set_name_iid(name_iid);
            let mut value = (std::ptr::null(), 0, 0);
            match arg.value {
                ArgValue::Uint(v) => a.set_uint_value(v),
                ArgValue::Int(v) => a.set_int_value(v),
                ArgValue::Double(v) => a.set_double_value(v),
                ArgValue::Str(v) => {
                    let iid = match cached {
                        Some(c) if (c.value.0, c.value.1) == text_key(v) => c.value.2,
                        _ => self.string_iid(v),
                    };
                    value = (v.as_ptr(), v.len(), iid);
                    a.set_string_value_iid(iid);
                }
            }
            let (p, l) = text_key(&arg.name);
            let entry = ArgIids {
                name: (p, l, name_iid),
                value,
            };
            match ids.args.get_mut(k) {
                Some(slot) => *slot = entry,
                None => ids.args.push(entry),
            }
            anns.push(a);
        }
        self.anns = anns;
        let out = (ids.name, ids.cat);
        self.nodes.insert(node, ids);
        out
    }

    /// Moves the scratch annotations into the packet's event (keeping both lists'
    /// capacity).
    fn take_annotations(&mut self) {
        let e = self.packet.mut_track_event();
        std::mem::swap(&mut e.debug_annotations, &mut self.anns);
    }

    fn slice_begin(&mut self, s: &Slice<'_>) -> io::Result<()> {
        let (name, cat) = match s.node {
            Some(node) => {
                let (name, cat) = self.node_annotations(node, s);
                (Some(name), cat)
            }
            None => {
                self.annotations(s.args);
                let name = match &s.name {
                    SliceName::Shared(n) => Some(self.name_iid(n)),
                    SliceName::Unique(_) => None,
                };
                (name, self.cat_iid(s.category))
            }
        };
        let e = self.fresh_event();
        e.set_type(EventType::TYPE_SLICE_BEGIN);
        match (name, &s.name) {
            (Some(id), _) => e.set_name_iid(id),
            (None, n) => e.set_name(n.as_str().to_owned()),
        }
        e.category_iids.push(cat);
        e.flow_ids.extend_from_slice(s.flows);
        e.terminating_flow_ids
            .extend_from_slice(s.terminating_flows);
        self.take_annotations();
        self.stats.slices += 1;
        self.event(s.start_ns)
    }

    fn slice_end(&mut self, ts: u64) -> io::Result<()> {
        self.fresh_event().set_type(EventType::TYPE_SLICE_END);
        self.event(ts)
    }

    fn instant(&mut self, i: &Instant<'_>) -> io::Result<()> {
        self.annotations(i.args);
        let cat = self.cat_iid(i.category);
        let e = self.fresh_event();
        e.set_type(EventType::TYPE_INSTANT);
        e.set_name(i.name.clone());
        e.category_iids.push(cat);
        self.take_annotations();
        self.event(i.ts_ns)
    }

    fn counter(&mut self, ts: u64, track: u64, v: f64) -> io::Result<()> {
        let default = self.track;
        let e = self.fresh_event();
        e.set_type(EventType::TYPE_COUNTER);
        if track != default {
            e.set_track_uuid(track);
        }
        e.set_double_counter_value(v);
        self.event(ts)
    }
}

/// The track uuid of `track`.
fn uuid(track: TrackId) -> u64 {
    match track {
        TrackId::Process => PROCESS_UUID,
        TrackId::BackendProcess(kind) => backend_process_uuid(kind),
        TrackId::Thread(tid) => thread_uuid(tid),
        TrackId::Sched(tid) => state_uuid(tid),
        TrackId::GpuLane(kind) => gpu_uuid(kind),
        TrackId::SyncWaits => SYNC_UUID,
        TrackId::TokensPerSecond => TOKENS_PER_S_UUID,
        TrackId::Counter(i) => counter_uuid(i),
        TrackId::Instants => INSTANTS_UUID,
    }
}

/// The descriptor of `t`.
fn descriptor(t: &Track) -> TrackDescriptor {
    let mut d = TrackDescriptor::new();
    d.set_uuid(uuid(t.id));
    if let Some(parent) = t.parent {
        d.set_parent_uuid(uuid(parent));
    }
    match t.id {
        TrackId::Process | TrackId::BackendProcess(_) => {
            let mut pd = ProcessDescriptor::new();
            pd.set_pid(t.pid as i32);
            pd.set_process_name(t.name.clone());
            d.process = Some(pd).into();
        }
        TrackId::Thread(tid) => {
            let mut td = ThreadDescriptor::new();
            td.set_pid(t.pid as i32);
            td.set_tid(tid as i32);
            td.set_thread_name(t.name.clone());
            d.thread = Some(td).into();
        }
        _ => {
            d.set_name(t.name.clone());
            if let Some(unit) = t.counter_unit {
                let mut c = CounterDescriptor::new();
                c.set_unit_name(unit.to_owned());
                d.counter = Some(c).into();
            }
        }
    }
    d
}

impl TimelineSink for Writer<'_> {
    fn tracks(&mut self, layout: &Layout) -> io::Result<()> {
        // Track descriptors, on a sequence of their own.
        self.sequence(0);
        for t in &layout.tracks {
            self.descriptor(descriptor(t))?;
        }
        Ok(())
    }

    fn sequence(&mut self, track: TrackId) -> io::Result<()> {
        Writer::sequence(self, uuid(track));
        Ok(())
    }

    fn begin(&mut self, slice: &Slice<'_>) -> io::Result<()> {
        self.slice_begin(slice)
    }

    fn end(&mut self, ts_ns: u64) -> io::Result<()> {
        self.slice_end(ts_ns)
    }

    fn counter(&mut self, track: TrackId, ts_ns: u64, value: f64) -> io::Result<()> {
        Writer::counter(self, ts_ns, uuid(track), value)
    }

    fn instant(&mut self, instant: &Instant<'_>) -> io::Result<()> {
        Writer::instant(self, instant)
    }
}

/// Writes the timeline as a Perfetto protobuf trace.
///
/// # Errors
/// I/O errors of `w`.
pub fn write(
    model: &TraceModel,
    opts: &PerfettoOptions,
    mut w: impl Write,
) -> io::Result<PerfettoStats> {
    let stats = {
        let mut wr = Writer {
            os: CodedOutputStream::new(&mut w),
            base: model.first_ns().unwrap_or(0),
            seq: 0,
            started: false,
            track: 0,
            names: Interner::default(),
            cats: Interner::default(),
            ann_names: Interner::default(),
            strings: Interner::default(),
            pending: InternedData::new(),
            has_pending: false,
            packet: TracePacket::new(),
            anns: Vec::new(),
            nodes: HashMap::new(),
            stats: PerfettoStats::default(),
        };
        let opts = TimelineOptions::new(opts.ops, opts.states, opts.flows)
            .with_layers(opts.layers)
            .with_range(opts.range);
        let walked = timeline::walk(model, &opts, &mut wr)?;
        wr.os.flush().map_err(io::Error::from)?;
        PerfettoStats {
            clamped: walked.clamped,
            flows: walked.flows,
            ..wr.stats
        }
    };
    w.flush()?;
    Ok(stats)
}
