//! ProfTime in Perfetto's native format: a protobuf `Trace` of `TrackEvent` packets
//! (`timeline.perfetto-trace`), with the same content as the Chrome JSON of
//! [`crate::export::chrome`], which Perfetto calls a legacy format:
//!
//! - a process track (`engine (pid N)`) and one track per thread (a `ThreadDescriptor`
//!   with pid, tid and the thread's name): token, graph and phase slices on the thread
//!   that ran them (the main thread), operator slices on every thread, nested
//!   op ⊂ graph ⊂ token, with their args as debug annotations (node name, op type,
//!   layer, shape, index, graph, backend, counter deltas);
//! - a `sched` track under each thread track with its scheduler states (`running cpu N`,
//!   `runnable`, `sleeping`);
//! - counter tracks (`CounterDescriptor`): decode tokens/s and each counter's rate per
//!   decode call;
//! - an instant track with QoS switches and loss records;
//! - flows: from each graph slice to the first operator slice it ran on every thread,
//!   then from operator to operator on that thread, ending at the thread's last
//!   operator of the graph (`flow_ids`, `terminating_flow_ids`);
//! - timestamps in ns relative to the first event (as the Chrome JSON's µs).
//!
//! Encoding: each track's events are written on their own packet sequence
//! (`trusted_packet_sequence_id`), which opens with `SEQ_INCREMENTAL_STATE_CLEARED` and
//! the track as `TrackEventDefaults::track_uuid`; event names that repeat (nodes,
//! phases, states), categories, annotation names and repeated annotation strings are
//! interned on the sequence (`interned_data` on the first packet that uses them,
//! `SEQ_NEEDS_INCREMENTAL_STATE` on every packet that relies on them); names unique to
//! one slice (decode calls, graph computations, marks) are written inline. A track's events are written in time order, ends before begins
//! at equal times, so slices nest however the reader orders equal timestamps.
//!
//! Memory: packets are encoded one at a time into the writer (the `Trace` message is
//! never built), so the encoder holds one packet, the interning tables of the current
//! sequence (bounded by the distinct node names, op types and counter names, not by the
//! trace's length) and, per track, the open-slice stack (a few entries) and the order of
//! its phase calls (4 bytes per phase call). What is *not* bounded is the input: the
//! [`TraceModel`] holds every slice of the trace (32 bytes per operator slice, see
//! [`crate::model`]), so the analyzer as a whole is linear in the trace's length; the
//! exporter adds nothing that grows with it except that phase order.
//!
//! A slice that overlaps the end of the slice it starts in (which the recorded events
//! never produce: ops do not nest, graphs run inside decode calls) is cut at that end so
//! the track still nests; [`PerfettoStats::clamped`] counts them.

use std::{
    collections::HashMap,
    io::{self, Write},
};

use perfetto_protos::{
    counter_descriptor::CounterDescriptor,
    debug_annotation::DebugAnnotation,
    debug_annotation::DebugAnnotationName,
    interned_data::InternedData,
    process_descriptor::ProcessDescriptor,
    profile_common::InternedString,
    thread_descriptor::ThreadDescriptor,
    trace_packet::{TracePacket, trace_packet::SequenceFlags},
    trace_packet_defaults::TracePacketDefaults,
    track_descriptor::TrackDescriptor,
    track_event::{
        EventCategory, EventName, TrackEvent, TrackEventDefaults, track_event::Type as EventType,
    },
};
use protobuf::{CodedOutputStream, rt::WireType};

use crate::model::{NONE_U32, PMC_MISSING, SchedState, ThreadInfo, TokenPhase, TraceModel};

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
}

impl Default for PerfettoOptions {
    fn default() -> Self {
        PerfettoOptions {
            ops: true,
            states: true,
            flows: true,
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
    /// Slices cut at the end of their enclosing slice (see the module doc).
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

/// Flow id from graph `graph` to its operators on thread index `thread`.
fn flow_id(graph: u32, thread: u32) -> u64 {
    ((u64::from(graph) + 1) << 16) | u64::from(thread)
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

/// Event name: interned (names that repeat) or inline (names unique to one slice).
enum Name<'a> {
    Interned(&'a str),
    Iid(u64),
    Inline(String),
}

/// The interned ids of one node on the current sequence: event name, category, and the
/// string values of its `op`, `name` and `shape` args.
#[derive(Clone, Copy)]
struct NodeIids {
    name: u64,
    cat: u64,
    op: u64,
    node_name: u64,
    shape: u64,
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
    nodes: HashMap<u32, NodeIids>,
    pending: InternedData,
    has_pending: bool,
    packet: TracePacket,
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

    /// The interned ids of node `node` (interned on first use on the sequence).
    fn node_iids(&mut self, model: &TraceModel, node: u32) -> NodeIids {
        if let Some(&ids) = self.nodes.get(&node) {
            return ids;
        }
        let n = &model.nodes()[node as usize];
        let op = n.op_name();
        let ids = NodeIids {
            name: self.name_iid(&n.name),
            cat: self.cat_iid(&op),
            op: self.string_iid(&op),
            node_name: self.string_iid(&n.name),
            shape: self.string_iid(&n.shape()),
        };
        self.nodes.insert(node, ids);
        ids
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

    /// Writes an event on the current sequence, with the interned data it introduced and
    /// the sequence's opening flags and defaults on its first packet.
    /// The packet's track event, emptied of what the previous event set.
    fn fresh_event(&mut self) -> &mut TrackEvent {
        let e = self.packet.mut_track_event();
        e.type_ = None;
        e.track_uuid = None;
        e.name_field = None;
        e.counter_value_field = None;
        e.category_iids.clear();
        e.categories.clear();
        e.debug_annotations.clear();
        e.flow_ids.clear();
        e.terminating_flow_ids.clear();
        e
    }

    /// Writes the packet's track event (filled in place after [`Writer::fresh_event`]).
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

    /// A debug annotation named `name` (interned), value unset.
    fn ann(&mut self, name: &str) -> DebugAnnotation {
        let (id, new) = self.ann_names.get(name);
        if new {
            let mut n = DebugAnnotationName::new();
            n.set_iid(id);
            n.set_name(name.to_owned());
            self.has_pending = true;
            self.pending.debug_annotation_names.push(n);
        }
        let mut a = DebugAnnotation::new();
        a.set_name_iid(id);
        a
    }

    fn ann_int(&mut self, name: &str, v: i64) -> DebugAnnotation {
        let mut a = self.ann(name);
        a.set_int_value(v);
        a
    }

    fn ann_uint(&mut self, name: &str, v: u64) -> DebugAnnotation {
        let mut a = self.ann(name);
        a.set_uint_value(v);
        a
    }

    fn ann_double(&mut self, name: &str, v: f64) -> DebugAnnotation {
        let mut a = self.ann(name);
        a.set_double_value(v);
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

    /// A string annotation whose value repeats across slices (interned).
    fn ann_str(&mut self, name: &str, v: &str) -> DebugAnnotation {
        let id = self.string_iid(v);
        self.ann_str_iid(name, id)
    }

    /// A string annotation with an interned value.
    fn ann_str_iid(&mut self, name: &str, iid: u64) -> DebugAnnotation {
        let mut a = self.ann(name);
        a.set_string_value_iid(iid);
        a
    }

    fn slice_begin(
        &mut self,
        ts: u64,
        name: Name<'_>,
        cat: Name<'_>,
        args: Vec<DebugAnnotation>,
        flows: (Vec<u64>, Vec<u64>),
    ) -> io::Result<()> {
        let name = match name {
            Name::Interned(n) => Name::Iid(self.name_iid(n)),
            other => other,
        };
        let cat = match cat {
            Name::Interned(c) => Name::Iid(self.cat_iid(c)),
            other => other,
        };
        let e = self.fresh_event();
        e.set_type(EventType::TYPE_SLICE_BEGIN);
        match name {
            Name::Iid(id) => e.set_name_iid(id),
            Name::Inline(n) => e.set_name(n),
            Name::Interned(_) => {}
        }
        match cat {
            Name::Iid(id) => e.category_iids.push(id),
            Name::Inline(c) => e.categories.push(c),
            Name::Interned(_) => {}
        }
        e.debug_annotations = args;
        e.flow_ids = flows.0;
        e.terminating_flow_ids = flows.1;
        self.stats.slices += 1;
        self.event(ts)
    }

    fn slice_end(&mut self, ts: u64) -> io::Result<()> {
        self.fresh_event().set_type(EventType::TYPE_SLICE_END);
        self.event(ts)
    }

    fn instant(
        &mut self,
        ts: u64,
        name: String,
        cat: &str,
        args: Vec<DebugAnnotation>,
    ) -> io::Result<()> {
        let cat = self.cat_iid(cat);
        let e = self.fresh_event();
        e.set_type(EventType::TYPE_INSTANT);
        e.set_name(name);
        e.category_iids.push(cat);
        e.debug_annotations = args;
        self.event(ts)
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

/// What a slice of a thread track is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Item {
    Token(u32),
    Graph(u32),
    Phase(u32),
    Backend(u32),
    Op(u32),
}

/// A slice to write: its interval and, at equal intervals, its depth (outer first).
#[derive(Clone, Copy, Debug)]
struct Span {
    start: u64,
    end: u64,
    rank: u8,
    item: Item,
}

impl Span {
    fn key(&self) -> (u64, std::cmp::Reverse<u64>, u8) {
        (self.start, std::cmp::Reverse(self.end), self.rank)
    }
}

/// The thread label the Chrome JSON uses too.
fn thread_label(th: &ThreadInfo) -> String {
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
            nodes: HashMap::new(),
            pending: InternedData::new(),
            has_pending: false,
            packet: TracePacket::new(),
            stats: PerfettoStats::default(),
        };
        write_all(model, opts, &mut wr)?;
        wr.os.flush().map_err(io::Error::from)?;
        wr.stats
    };
    w.flush()?;
    Ok(stats)
}

/// The threads that get a track: the target's, and any other that ran a decode call,
/// graph or phase.
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

fn write_all(model: &TraceModel, opts: &PerfettoOptions, wr: &mut Writer<'_>) -> io::Result<()> {
    let pid = model.target_pid();
    let threads = track_threads(model);
    let counters = model.counter_names();
    // Track descriptors, on a sequence of their own.
    wr.sequence(0);
    // A split pass: one track group (process) per backend.
    let backend_of = crate::backends::thread_backends(model);
    let gpu = crate::backends::gpu_lanes(model);
    let mut kinds: Vec<u32> = backend_of
        .values()
        .copied()
        .chain(gpu.kinds.iter().copied())
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    let mut d = TrackDescriptor::new();
    d.set_uuid(PROCESS_UUID);
    let mut pd = ProcessDescriptor::new();
    pd.set_pid(pid as i32);
    pd.set_process_name(if kinds.is_empty() {
        format!("engine (pid {pid})")
    } else {
        format!("engine (pid {pid}): cpu backend")
    });
    d.process = Some(pd).into();
    wr.descriptor(d)?;
    for &kind in &kinds {
        let mut d = TrackDescriptor::new();
        d.set_uuid(backend_process_uuid(kind));
        let mut pd = ProcessDescriptor::new();
        pd.set_pid(crate::backends::backend_group_pid(pid, kind) as i32);
        pd.set_process_name(format!(
            "engine (pid {pid}): {} backend",
            crate::model::backend_name(kind)
        ));
        d.process = Some(pd).into();
        wr.descriptor(d)?;
    }
    for &kind in &gpu.kinds {
        let mut d = TrackDescriptor::new();
        d.set_uuid(gpu_uuid(kind));
        d.set_parent_uuid(backend_process_uuid(kind));
        d.set_name("GPU (node timestamps)".to_owned());
        wr.descriptor(d)?;
    }
    for (_, th) in &threads {
        let label = thread_label(th);
        let mut d = TrackDescriptor::new();
        d.set_uuid(thread_uuid(th.tid));
        let mut td = ThreadDescriptor::new();
        let tpid = match backend_of.get(&th.tid) {
            Some(&kind) => crate::backends::backend_group_pid(pid, kind),
            None => th.pid.unwrap_or(pid),
        };
        td.set_pid(tpid as i32);
        td.set_tid(th.tid as i32);
        td.set_thread_name(label.clone());
        d.thread = Some(td).into();
        wr.descriptor(d)?;
        if opts.states && model.is_target_thread(th) {
            let mut d = TrackDescriptor::new();
            d.set_uuid(state_uuid(th.tid));
            d.set_parent_uuid(thread_uuid(th.tid));
            d.set_name(format!("{label} sched"));
            wr.descriptor(d)?;
        }
    }
    let counter_track = |uuid: u64, name: String, unit: &str| {
        let mut d = TrackDescriptor::new();
        d.set_uuid(uuid);
        d.set_parent_uuid(PROCESS_UUID);
        d.set_name(name);
        let mut c = CounterDescriptor::new();
        c.set_unit_name(unit.to_owned());
        d.counter = Some(c).into();
        d
    };
    wr.descriptor(counter_track(
        TOKENS_PER_S_UUID,
        "tokens/s".to_owned(),
        "tokens/s",
    ))?;
    for (i, name) in counters.iter().enumerate() {
        wr.descriptor(counter_track(counter_uuid(i), format!("{name}/s"), "1/s"))?;
    }
    let mut d = TrackDescriptor::new();
    d.set_uuid(INSTANTS_UUID);
    d.set_parent_uuid(PROCESS_UUID);
    d.set_name("QoS and losses".to_owned());
    wr.descriptor(d)?;
    let waits = crate::backends::sync_waits(model);
    if !waits.is_empty() {
        let total: u64 = waits.iter().map(|w| w.1.saturating_sub(w.0)).sum();
        let mut d = TrackDescriptor::new();
        d.set_uuid(SYNC_UUID);
        d.set_parent_uuid(PROCESS_UUID);
        d.set_name(format!(
            "CPU waits for accel ({} syncs, {} in all)",
            waits.len(),
            crate::export::dot::fmt_ns(total)
        ));
        wr.descriptor(d)?;
    }

    // A split pass: each token slice carries its time split (as in the Chrome JSON).
    let split = Some(crate::backends::compute(model)).filter(|b| b.is_interesting());
    let token_splits = split.as_ref().map_or(&[][..], |b| &b.tokens[..]);
    for &(t, th) in &threads {
        write_thread(model, opts, wr, t as u32, th.tid, token_splits)?;
    }
    if opts.states {
        for (_, th) in &threads {
            if !model.is_target_thread(th) {
                continue;
            }
            wr.sequence(state_uuid(th.tid));
            for s in th.states.slices() {
                let name = match s.state {
                    SchedState::Running => format!("running cpu {}", s.cpu),
                    st => st.name().to_owned(),
                };
                let args = vec![wr.ann_int("cpu", i64::from(s.cpu as i32))];
                wr.slice_begin(
                    s.start_ns,
                    Name::Interned(&name),
                    Name::Interned("sched"),
                    args,
                    Default::default(),
                )?;
                wr.slice_end(s.end_ns.max(s.start_ns))?;
            }
        }
    }
    for &kind in &gpu.kinds {
        wr.sequence(gpu_uuid(kind));
        for g in gpu.slices.iter().filter(|g| g.backend_kind == kind) {
            let args = vec![wr.ann_str("op", &g.op)];
            wr.slice_begin(
                g.start_ns,
                Name::Interned(g.name),
                Name::Interned("gpu"),
                args,
                Default::default(),
            )?;
            wr.slice_end(g.end_ns)?;
        }
    }
    if !waits.is_empty() {
        wr.sequence(SYNC_UUID);
        for &(start, end, name) in &waits {
            let args = vec![wr.ann_str("node", name)];
            wr.slice_begin(
                start,
                Name::Interned("wait for accel"),
                Name::Interned("sync"),
                args,
                Default::default(),
            )?;
            wr.slice_end(end.max(start))?;
        }
    }
    // Counter tracks.
    wr.sequence(TOKENS_PER_S_UUID);
    let mut prev_produced: Option<u64> = None;
    for t in model.tokens() {
        let p = t.produced_ns();
        if t.phase == TokenPhase::Decode
            && let (Some(a), Some(b)) = (prev_produced, p)
            && b > a
        {
            wr.counter(b, TOKENS_PER_S_UUID, 1e9 / (b - a) as f64)?;
        }
        prev_produced = p;
    }
    if !counters.is_empty() {
        wr.sequence(counter_uuid(0));
        for (start, rates) in crate::export::counter_rates_per_call(model) {
            for (i, rate) in rates.into_iter().enumerate() {
                if let Some(rate) = rate {
                    wr.counter(start, counter_uuid(i), rate)?;
                }
            }
        }
    }
    // Instants.
    wr.sequence(INSTANTS_UUID);
    for q in model.qos_switches() {
        let args = vec![
            wr.ann_double("tps", q.tps_milli as f64 / 1e3),
            wr.ann_double("min_tps", q.min_tps_milli as f64 / 1e3),
        ];
        wr.instant(
            q.ts_ns,
            format!("QoS levels {:#x} -> {:#x}", q.levels_before, q.levels_after),
            "qos",
            args,
        )?;
    }
    for l in model.losses() {
        let args = vec![
            wr.ann_uint("cpu", u64::from(l.cpu)),
            wr.ann_uint("lost", l.lost),
        ];
        wr.instant(
            l.ts_ns,
            format!("lost {} events on cpu {}", l.lost, l.cpu),
            "loss",
            args,
        )?;
    }
    for (ts_ns, name) in crate::recording_mode::timeline_marks(model) {
        wr.instant(ts_ns, name, "recording", Vec::new())?;
    }
    Ok(())
}

/// The thread indices that ran operators of graph `g` (in its node spans), if the
/// graph's slice is written (it ended).
fn graph_threads(model: &TraceModel, g: u32) -> Vec<u32> {
    let Some(graph) = model.graphs().get(g as usize) else {
        return Vec::new();
    };
    if graph.end_ns.is_none() {
        return Vec::new();
    }
    let mut v: Vec<u32> = model
        .graph_node_spans(graph)
        .iter()
        .flat_map(|span| model.span_slices(span).map(|s| s.thread))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// Writes the slices of one thread's track, in time order, on a sequence of its own;
/// token slices get the time split of `token_splits` (empty for a one-backend run).
fn write_thread(
    model: &TraceModel,
    opts: &PerfettoOptions,
    wr: &mut Writer<'_>,
    thread: u32,
    tid: u32,
    token_splits: &[crate::backends::TokenSplit],
) -> io::Result<()> {
    let mut tokens = model
        .tokens()
        .iter()
        .filter(move |t| t.tid == tid)
        .filter_map(|t| {
            Some(Span {
                start: t.start_ns,
                end: t.end_ns?,
                rank: 0,
                item: Item::Token(t.index),
            })
        })
        .peekable();
    let mut graphs = model
        .graphs()
        .iter()
        .filter(move |g| g.tid == tid)
        .filter_map(|g| {
            Some(Span {
                start: g.start_ns,
                end: g.end_ns?,
                rank: 1,
                item: Item::Graph(g.index),
            })
        })
        .peekable();
    // Phases are kept in exit order: sort this thread's by start.
    let mut phase_ids: Vec<u32> = (0..model.phases().len() as u32)
        .filter(|&i| model.phases()[i as usize].tid == tid)
        .collect();
    phase_ids.sort_by_key(|&i| {
        let p = &model.phases()[i as usize];
        (p.start_ns, std::cmp::Reverse(p.end_ns), i)
    });
    let mut phases = phase_ids
        .iter()
        .map(|&i| {
            let p = &model.phases()[i as usize];
            Span {
                start: p.start_ns,
                end: p.end_ns.max(p.start_ns),
                rank: 1,
                item: Item::Phase(i),
            }
        })
        .peekable();
    // Backend calls too (a fence wait returns inside its sync).
    let calls = model.backend_calls();
    let mut call_ids: Vec<u32> = (0..calls.len() as u32)
        .filter(|&i| calls[i as usize].tid == tid)
        .collect();
    call_ids.sort_by_key(|&i| {
        let c = &calls[i as usize];
        (c.start_ns, std::cmp::Reverse(c.end_ns), i)
    });
    let mut backend_calls = call_ids
        .iter()
        .map(|&i| {
            let c = &calls[i as usize];
            Span {
                start: c.start_ns,
                end: c.end_ns,
                rank: 2,
                item: Item::Backend(i),
            }
        })
        .peekable();
    // Operators do not nest on a thread: exit order is start order.
    let mut ops = model
        .slices()
        .iter()
        .enumerate()
        // A span without a node (dropped over a limit) is not drawn.
        .filter(move |(_, s)| opts.ops && s.thread == thread && s.node != NONE_U32)
        .map(|(i, s)| Span {
            start: s.start_ns,
            end: s.end_ns,
            rank: 2,
            item: Item::Op(i as u32),
        })
        .peekable();

    wr.sequence(thread_uuid(tid));
    let nodes = model.nodes();
    let split_pass = model.graphs().iter().any(|g| g.backend_kind != 0);
    // Open slices: their (clamped) ends.
    let mut stack: Vec<u64> = Vec::new();
    // Flow bookkeeping: the graph whose thread set is cached.
    let mut flow_graph: Option<(u32, Vec<u32>)> = None;
    // The interned backend name of the last graph seen.
    let mut backend: Option<(u32, u64)> = None;
    loop {
        let mut best: Option<(Span, u8)> = None;
        for (k, s) in [
            (0u8, tokens.peek()),
            (1, graphs.peek()),
            (2, phases.peek()),
            (3, backend_calls.peek()),
            (4, ops.peek()),
        ] {
            if let Some(s) = s
                && best.is_none_or(|(b, _)| s.key() < b.key())
            {
                best = Some((*s, k));
            }
        }
        let Some((mut span, k)) = best else { break };
        match k {
            0 => tokens.next(),
            1 => graphs.next(),
            2 => phases.next(),
            3 => backend_calls.next(),
            _ => ops.next(),
        };
        while let Some(&end) = stack.last()
            && end <= span.start
        {
            wr.slice_end(end)?;
            stack.pop();
        }
        if let Some(&end) = stack.last()
            && span.end > end
        {
            span.end = end;
            wr.stats.clamped += 1;
        }
        match span.item {
            Item::Token(i) => {
                let t = &model.tokens()[i as usize];
                let name = t.label();
                let mut args = vec![
                    wr.ann_uint("index", u64::from(t.index)),
                    wr.ann_uint("n_tokens", u64::from(t.n_tokens)),
                    wr.ann_uint("pos", u64::from(t.pos)),
                    wr.ann_str("phase", t.phase.name()),
                    wr.ann_int("ret", i64::from(t.ret)),
                ];
                if t.seqs.known() {
                    // How many sequences the batch carries (llama-server's slots), and
                    // which of ids 0..8.
                    args.extend([
                        wr.ann_uint("n_seqs", u64::from(t.seqs.n)),
                        wr.ann_uint("seq_mask", u64::from(t.seqs.mask)),
                    ]);
                    if t.seqs.lower_bound {
                        args.push(wr.ann_uint("n_seqs_lower_bound", 1));
                    }
                }
                if let Some(ts) = token_splits.get(t.index as usize) {
                    args.extend([
                        wr.ann_uint("sync_wait_ns", ts.sync_ns),
                        wr.ann_uint("copy_ns", ts.copy_ns),
                        wr.ann_uint("kv_io_ns", ts.kv_io_ns),
                        wr.ann_uint("kv_bytes_out", ts.kv_bytes_out),
                        wr.ann_uint("kv_bytes_in", ts.kv_bytes_in),
                    ]);
                    for (b, &ns) in &ts.compute_ns {
                        args.push(wr.ann_uint(&format!("{b}_compute_ns"), ns));
                    }
                }
                wr.slice_begin(
                    span.start,
                    Name::Inline(name),
                    Name::Interned("token"),
                    args,
                    Default::default(),
                )?;
            }
            Item::Graph(i) => {
                let g = &model.graphs()[i as usize];
                let backend = g.backend_name();
                let args = vec![
                    wr.ann_uint("graph_id", g.graph_id),
                    wr.ann_uint("n_nodes", u64::from(g.n_nodes)),
                    wr.ann_str("backend", &backend),
                    wr.ann_int("backend_id", i64::from(g.backend_id)),
                    wr.ann_uint("n_tokens", u64::from(g.n_tokens)),
                    wr.ann_uint("pos", u64::from(g.pos)),
                ];
                let name = if split_pass {
                    format!(
                        "graph {} ({backend} split, {} nodes)",
                        g.graph_id, g.n_nodes
                    )
                } else {
                    format!("graph {} ({backend})", g.graph_id)
                };
                let flows = if opts.flows && opts.ops {
                    let ids: Vec<u64> = graph_threads(model, i)
                        .into_iter()
                        .map(|t| flow_id(i, t))
                        .collect();
                    wr.stats.flows += ids.len() as u64;
                    (ids, Vec::new())
                } else {
                    Default::default()
                };
                // Graph ids number the computations: the name is unique, not interned.
                wr.slice_begin(
                    span.start,
                    Name::Inline(name),
                    Name::Interned("graph"),
                    args,
                    flows,
                )?;
            }
            Item::Phase(i) => {
                let p = &model.phases()[i as usize];
                let args = vec![
                    wr.ann_uint("arg", u64::from(p.arg)),
                    wr.ann_int("ret", i64::from(p.ret)),
                ];
                wr.slice_begin(
                    span.start,
                    Name::Interned(p.kind.name()),
                    Name::Interned("phase"),
                    args,
                    Default::default(),
                )?;
            }
            Item::Backend(i) => {
                let c = &calls[i as usize];
                let args = vec![
                    wr.ann_uint("bytes", c.bytes),
                    wr.ann_uint(
                        "backend_kind",
                        u64::from(c.backend_kind.unwrap_or(u32::MAX)),
                    ),
                ];
                wr.slice_begin(
                    span.start,
                    Name::Inline(c.label()),
                    Name::Interned("backend"),
                    args,
                    Default::default(),
                )?;
            }
            Item::Op(i) => {
                let s = &model.slices()[i as usize];
                let n = &nodes[s.node as usize];
                let ids = wr.node_iids(model, s.node);
                let mut args = vec![
                    wr.ann_str_iid("op", ids.op),
                    wr.ann_str_iid("name", ids.node_name),
                    wr.ann_int("layer", i64::from(n.layer)),
                    wr.ann_str_iid("shape", ids.shape),
                    wr.ann_uint("index", u64::from(n.index)),
                ];
                if s.graph != NONE_U32 {
                    args.push(wr.ann_uint("graph", u64::from(s.graph)));
                    if backend.is_none_or(|(g, _)| g != s.graph) {
                        let name = model
                            .graphs()
                            .get(s.graph as usize)
                            .map_or_else(|| "?".to_owned(), |g| g.backend_name());
                        backend = Some((s.graph, wr.string_iid(&name)));
                    }
                    if let Some((_, iid)) = backend {
                        args.push(wr.ann_str_iid("backend", iid));
                    }
                }
                if let Some(deltas) = model.slice_pmc(s) {
                    for (name, &v) in model.counter_names().iter().zip(deltas) {
                        if v != PMC_MISSING {
                            args.push(wr.ann_uint(name, v));
                        }
                    }
                }
                let flows = if opts.flows && s.graph != NONE_U32 {
                    if flow_graph.as_ref().is_none_or(|(g, _)| *g != s.graph) {
                        flow_graph = Some((s.graph, graph_threads(model, s.graph)));
                    }
                    let in_flow = flow_graph
                        .as_ref()
                        .is_some_and(|(_, ts)| ts.binary_search(&thread).is_ok());
                    if in_flow {
                        let id = flow_id(s.graph, thread);
                        let next_same = ops.peek().is_some_and(|next| {
                            matches!(next.item, Item::Op(j)
                                if model.slices()[j as usize].graph == s.graph)
                        });
                        if next_same {
                            (vec![id], Vec::new())
                        } else {
                            (Vec::new(), vec![id])
                        }
                    } else {
                        Default::default()
                    }
                } else {
                    Default::default()
                };
                wr.slice_begin(
                    span.start,
                    Name::Iid(ids.name),
                    Name::Iid(ids.cat),
                    args,
                    flows,
                )?;
            }
        }
        stack.push(span.end);
    }
    while let Some(end) = stack.pop() {
        wr.slice_end(end)?;
    }
    Ok(())
}
