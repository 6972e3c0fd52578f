//! Truncated, corrupt, wrong-version and non-trace files; unpaired enter/exit records.

mod support;

use analyzer::{
    AnalyzeOptions,
    synthetic::{SYNTH_MAIN_TID, SynthSpec, synth_header, write_trace},
};
use common::event::{DecodeEvent, EVENT_FLAG_EXIT, EventHeader, EventKind, OpEvent, OpExitEvent};
use support::{analyze, data, write};
use trace_format::{Event, TraceReader};

fn run_err(path: &std::path::Path) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    match analyzer::run(
        path,
        dir.path(),
        &AnalyzeOptions::default().with_graphics(false),
    ) {
        Ok(_) => panic!("{} analyzed without error", path.display()),
        // The whole chain, as the CLI prints it (`{:#}` of anyhow).
        Err(e) => {
            let mut msg = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                msg.push_str(&format!(": {s}"));
                src = s.source();
            }
            msg
        }
    }
}

#[test]
fn not_a_trace_is_one_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("x.pftrace");
    std::fs::write(&p, b"hello, I am not a trace at all").expect("write");
    let e = run_err(&p);
    assert!(e.contains("not a profinfer trace"), "{e}");
    assert!(!e.contains('\n'));
    let e = run_err(&dir.path().join("missing.pftrace"));
    assert!(e.contains("missing.pftrace"), "{e}");
}

#[test]
fn wrong_version_is_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("v.pftrace");
    let mut bytes = std::fs::read(data("tiny_t1.pftrace")).expect("read");
    bytes[8..12].copy_from_slice(&99u32.to_le_bytes());
    std::fs::write(&p, bytes).expect("write");
    let e = run_err(&p);
    assert!(e.contains("version 99"), "{e}");
}

#[test]
fn truncated_trace_analyzes_the_prefix_and_warns_with_the_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("t.pftrace");
    let spec = SynthSpec::sized(6, 40, 2);
    let full = dir.path().join("full.pftrace");
    write_trace(&full, &spec).expect("synthetic trace");
    let bytes = std::fs::read(&full).expect("read");
    std::fs::write(&p, &bytes[..bytes.len() * 2 / 3]).expect("write");
    let offset = TraceReader::open(&p)
        .expect("opens")
        .truncated_at()
        .expect("truncated");
    let (_, report) = analyze(&p);
    let w = report.warnings.join("\n");
    assert!(w.contains(&format!("truncated at byte {offset}")), "{w}");
    assert_eq!(report.summary.trace.truncated_at, Some(offset));
    assert!(report.summary.events.read > 0);
    assert!(report.summary.events.read < spec.event_count());
    // A corrupt byte in the middle: the same, at that chunk.
    let mut bytes = bytes;
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xFF;
    std::fs::write(&p, &bytes).expect("write");
    let (_, report) = analyze(&p);
    assert!(report.summary.trace.truncated_at.is_some());
}

#[test]
fn unpaired_records_are_counted_not_fatal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("u.pftrace");
    let h = |kind: EventKind, exit: bool, ts: u64, tid: u32| EventHeader {
        kind: kind as u32,
        flags: if exit { EVENT_FLAG_EXIT } else { 0 },
        ts_ns: ts,
        pid: 1000,
        tid,
        ..EventHeader::default()
    };
    let op = |ts: u64, tid: u32, addr: u64| {
        let mut o = OpEvent::zeroed();
        o.header = h(EventKind::OpCompute, false, ts, tid);
        o.node_addr = addr;
        Event::Op(Box::new(o))
    };
    let exit = |ts: u64, tid: u32| {
        let mut o = OpExitEvent::zeroed();
        o.header = h(EventKind::OpComputeExit, true, ts, tid);
        Event::OpExit(o)
    };
    // An exit the way trace formats 1 and 2 stored it: a whole `OpEvent` with the exit
    // flag, which the reader converts.
    let old_exit = |ts: u64, tid: u32, addr: u64| {
        let mut o = OpEvent::zeroed();
        o.header = h(EventKind::OpCompute, true, ts, tid);
        o.node_addr = addr;
        Event::Op(Box::new(o))
    };
    let main = SYNTH_MAIN_TID;
    let events = vec![
        Event::Decode(DecodeEvent {
            header: h(EventKind::Decode, false, 100, main),
            n_tokens: 1,
            pos: 5,
            ..DecodeEvent::default()
        }),
        // Thread killed mid-op: an entry with no exit.
        op(200, main + 1, 0x10),
        // An exit with no entry.
        exit(300, main + 2),
        // An entry whose exit was not recorded (operator level switched off mid-op):
        // the thread's next entry finds it still open.
        op(400, main, 0x30),
        // A complete op, and one with an old-format exit.
        op(600, main, 0x50),
        exit(700, main),
        op(800, main, 0x60),
        old_exit(900, main, 0x60),
        // The decode call never returns.
    ];
    write(&p, &synth_header(), None, &events);
    let (_, report) = analyze(&p);
    let u = report.summary.unpaired;
    assert_eq!(u.op_enter, 2, "{u:?}");
    assert_eq!(u.op_exit, 1, "{u:?}");
    assert_eq!(u.token_enter, 1, "{u:?}");
    assert_eq!(u.total(), 4);
    assert!(report.warnings.iter().any(|w| w.contains("4 unpaired")));
    assert!(report.warnings.iter().any(|w| w.contains("no footer")));
}
