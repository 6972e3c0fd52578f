//! Write → read round trips, truncation at every byte, corruption, unknown kinds.

use std::path::PathBuf;

use common::event::{
    DecodeEvent, EVENT_FLAG_EXIT, EventHeader, EventKind, OpEvent, QosSwitchEvent,
};
use trace_format::{
    Event, FILE_MAGIC, TraceError, TraceFooter, TraceHeader, TraceReader, TraceWriter,
    event_kind_table,
};

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("trace-format-{}-{name}", std::process::id()))
}

fn header() -> TraceHeader {
    TraceHeader {
        format_version: trace_format::FORMAT_VERSION,
        clock: "CLOCK_MONOTONIC".into(),
        host: "h".into(),
        cpus: 2,
        event_kinds: event_kind_table(),
        strings: vec!["attn_q-0".into()],
        ..TraceHeader::default()
    }
}

fn hdr(kind: EventKind, flags: u32, ts: u64) -> EventHeader {
    EventHeader {
        kind: kind as u32,
        flags,
        ts_ns: ts,
        pid: 10,
        tid: 11,
        cpu: 1,
        _pad: 0,
    }
}

/// 3 events per chunk index `i`: decode enter, op enter with a name, decode exit.
fn sample_events(n: u64) -> Vec<Event> {
    let mut out = Vec::new();
    for i in 0..n {
        out.push(Event::Decode(DecodeEvent {
            header: hdr(EventKind::Decode, 0, 3 * i),
            n_tokens: 1,
            pos: i as u32,
            ret: 0,
            // Two sequences, the second prefilling (llama-server's slots).
            n_seqs: 2,
            seq_flags: 0,
            seq_mask: 0b11,
            seq_multi: 0b10,
        }));
        let mut op = OpEvent::zeroed();
        op.header = hdr(EventKind::OpCompute, 0, 3 * i + 1);
        op.node_addr = 0x1000 + i;
        op.name[..8].copy_from_slice(b"attn_q-0");
        op.structure.ne = [4, 3, 2, 1];
        out.push(Event::Op(Box::new(op)));
        out.push(Event::Decode(DecodeEvent {
            header: hdr(EventKind::Decode, EVENT_FLAG_EXIT, 3 * i + 2),
            n_tokens: 1,
            pos: i as u32,
            ret: -(i as i32),
            ..DecodeEvent::default()
        }));
    }
    out
}

fn write(path: &PathBuf, events: &[Event], chunk_bytes: usize, footer: bool) {
    let mut w = TraceWriter::create(path, &header()).expect("create");
    w.set_chunk_bytes(chunk_bytes);
    for e in events {
        match e {
            Event::Decode(d) => w.push(d).expect("push"),
            Event::Op(o) => w.push(o.as_ref()).expect("push"),
            _ => unreachable!(),
        }
    }
    if footer {
        w.finish(&TraceFooter {
            events_produced: events.len() as u64,
            events_written: events.len() as u64,
            end_reason: "test".into(),
            ..TraceFooter::default()
        })
        .expect("finish");
    } else {
        w.flush_chunk().expect("flush");
    }
}

fn read_all(r: &TraceReader) -> Vec<Event> {
    r.events().collect::<Result<Vec<_>, _>>().expect("events")
}

#[test]
fn round_trip_preserves_header_events_and_footer() {
    let path = tmp("rt");
    let events = sample_events(50);
    write(&path, &events, 1000, true);
    let r = TraceReader::open(&path).expect("open");
    assert_eq!(r.header(), &header());
    assert_eq!(read_all(&r), events);
    assert_eq!(r.footer().map(|f| f.events_written), Some(150));
    assert_eq!(r.truncated_at(), None);
    assert!(
        r.event_chunks() > 1,
        "small chunk size gives several chunks"
    );
    if let Event::Op(op) = &events[1] {
        assert_eq!(op.name_str(), "attn_q-0");
    }
    std::fs::remove_file(&path).ok();
}

#[test]
fn chunk_records_are_the_written_events_with_recycled_buffers() {
    let path = tmp("chunks");
    let events = sample_events(50);
    write(&path, &events, 1000, true);
    let r = TraceReader::open(&path).expect("open");
    let mut chunks = r.chunks();
    let mut got = Vec::new();
    let mut n_chunks = 0;
    while let Some(chunk) = chunks.next() {
        let chunk = chunk.expect("chunk");
        n_chunks += 1;
        for rec in chunk.records() {
            let rec = rec.expect("record");
            // The stack copy of an operator record equals the boxed decoding.
            if let Some(op) = rec.op() {
                assert_eq!(rec.to_event(), Event::Op(Box::new(op)));
            }
            got.push(rec.to_event());
        }
        chunks.recycle(chunk);
    }
    assert_eq!(n_chunks, r.event_chunks());
    assert_eq!(got, events);
    std::fs::remove_file(&path).ok();
}

#[test]
fn every_truncation_reads_a_prefix_of_whole_chunks() {
    let path = tmp("cut");
    let events = sample_events(6);
    write(&path, &events, 600, true);
    let full = std::fs::read(&path).expect("read");
    let cut_path = tmp("cut2");
    let header_end = {
        let r = TraceReader::open(&path).expect("open");
        assert!(r.event_chunks() >= 3);
        // Smallest valid file: preamble + header chunk; find it by truncating.
        (16..full.len())
            .find(|&n| {
                std::fs::write(&cut_path, &full[..n]).ok();
                TraceReader::open(&cut_path).is_ok()
            })
            .expect("some prefix opens")
    };
    let mut last_count = 0;
    for n in header_end..full.len() {
        std::fs::write(&cut_path, &full[..n]).expect("write");
        let r = TraceReader::open(&cut_path).expect("prefix opens");
        let got = read_all(&r);
        // A prefix of the original events, never a partial or invented one.
        assert_eq!(&events[..got.len()], &got[..], "cut at {n}");
        assert!(got.len() >= last_count, "monotone in the cut");
        last_count = got.len();
        assert!(r.footer().is_none());
        let clean_boundary = r.truncated_at().is_none();
        if !clean_boundary {
            assert!(r.truncated_at().expect("set") <= n as u64);
        }
    }
    std::fs::remove_file(&path).ok();
    std::fs::remove_file(&cut_path).ok();
}

#[test]
fn corruption_stops_at_the_damaged_chunk() {
    let path = tmp("corrupt");
    let events = sample_events(20);
    write(&path, &events, 500, true);
    let mut bytes = std::fs::read(&path).expect("read");
    let last = bytes.len() - 10;
    bytes[last] ^= 0xff; // inside the footer chunk
    std::fs::write(&path, &bytes).expect("write");
    let r = TraceReader::open(&path).expect("open");
    assert_eq!(read_all(&r), events, "all event chunks precede the damage");
    assert!(r.footer().is_none());
    assert!(r.truncated_at().is_some());
    std::fs::remove_file(&path).ok();
}

#[test]
fn bad_magic_and_unknown_kinds() {
    let path = tmp("magic");
    std::fs::write(&path, b"not a trace at all, really").expect("write");
    assert!(matches!(
        TraceReader::open(&path),
        Err(TraceError::BadMagic { .. })
    ));

    // A kind this reader does not know is skipped using the header's size table.
    let mut h = header();
    h.event_kinds.push(trace_format::EventKindInfo {
        kind: 999,
        name: "future".into(),
        size: 40,
    });
    let mut w = TraceWriter::create(&path, &h).expect("create");
    let mut future = [0u8; 40];
    future[..4].copy_from_slice(&999u32.to_le_bytes());
    w.push_raw(&future).expect("push");
    let q = QosSwitchEvent {
        header: hdr(EventKind::QosSwitch, 0, 5),
        levels_before: 31,
        levels_after: 27,
        tps_milli: 1500,
        min_tps_milli: 2000,
    };
    w.push(&q).expect("push");
    w.finish(&TraceFooter::default()).expect("finish");
    let r = TraceReader::open(&path).expect("open");
    let got = read_all(&r);
    assert!(
        matches!(&got[0], Event::Unknown { header, bytes } if header.kind == 999 && bytes.len() == 40)
    );
    assert_eq!(got[1], Event::QosSwitch(q));
    assert_eq!(&std::fs::read(&path).expect("read")[..8], &FILE_MAGIC);
    std::fs::remove_file(&path).ok();
}

#[test]
fn a_header_from_an_older_trace_is_written_with_this_builds_layouts() {
    // Rewriting the events of a format-1 trace with its header (as tools that filter or
    // reorder a trace do): the records are this build's, so must the header's table be.
    let path = tmp("old-header");
    let mut h = header();
    h.format_version = 1;
    for k in &mut h.event_kinds {
        if k.kind == EventKind::OpCompute as u32 {
            k.size = common::event::OP_EVENT_V1_SIZE as u32;
        }
    }
    h.event_kinds.push(trace_format::EventKindInfo {
        kind: 999,
        name: "future".into(),
        size: 40,
    });
    let mut w = TraceWriter::create(&path, &h).expect("create");
    let events = sample_events(3);
    for e in &events {
        match e {
            Event::Decode(d) => w.push(d).expect("push"),
            Event::Op(o) => w.push(o.as_ref()).expect("push"),
            _ => unreachable!(),
        }
    }
    let leaf = {
        let mut l = common::event::LeafNodeEvent {
            header: hdr(EventKind::LeafNode, 0, 99),
            node_addr: 0x5000,
            dtype: 8,
            node_flags: 1,
            layer: 3,
            op: 0,
            ne: [128, 128, 1, 1],
            name: [0; 64],
        };
        l.name[..19].copy_from_slice(b"blk.3.attn_q.weight");
        l
    };
    w.push(&leaf).expect("push");
    w.finish(&TraceFooter::default()).expect("finish");
    let r = TraceReader::open(&path).expect("open");
    assert_eq!(r.header().format_version, trace_format::FORMAT_VERSION);
    let size_of_kind = |kind: u32| {
        r.header()
            .event_kinds
            .iter()
            .find(|k| k.kind == kind)
            .map(|k| k.size)
    };
    assert_eq!(
        size_of_kind(EventKind::OpCompute as u32),
        Some(size_of::<OpEvent>() as u32)
    );
    assert_eq!(size_of_kind(999), Some(40), "unknown kinds are kept");
    let got = read_all(&r);
    assert_eq!(&got[..events.len()], &events[..]);
    let Event::LeafNode(l) = &got[events.len()] else {
        panic!("leaf record: {:?}", got.last());
    };
    assert_eq!(l, &leaf);
    assert_eq!(l.name_str(), "blk.3.attn_q.weight");
    std::fs::remove_file(&path).ok();
}
