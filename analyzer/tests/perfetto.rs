//! The Perfetto protobuf timeline decodes as a `Trace` message (the analyzer's generated
//! subset of Perfetto's schema; `perfettos_own_python_schema_decodes_the_file` decodes it
//! with Perfetto's own generated schema, independent of the encoder), every interned id it uses was
//! defined earlier on its sequence, slices nest per track, flows are paired, and it
//! holds the same slices (track, name, category, start, duration, args) and counter
//! values as the Chrome JSON of the same model.

mod support;

use std::collections::{BTreeMap, HashMap};

use analyzer::export::perfetto_schema::{
    DebugAnnotation, Trace, debug_annotation,
    trace_packet::{Data, SequenceFlags},
    track_event::{self, Type as EventType},
};
use analyzer::{
    TraceModel,
    export::{
        chrome::{self, GPU_TID_BASE, STATE_TID_BASE, SYNC_TID},
        perfetto::{self, PerfettoOptions},
    },
    synthetic::{self, SynthSpec},
};
use protobuf::Message;
use serde_json::{Value, json};
use support::{analyze, data};

/// A slice as both formats describe it: track key (tid, or `STATE_TID_BASE` + tid for
/// scheduler states), name, category, start and duration (ns from the first event), args.
#[derive(Clone, Debug, PartialEq, PartialOrd)]
struct Slice {
    tid: u64,
    name: String,
    cat: String,
    start: u64,
    dur: u64,
    args: String,
}

/// An instant: name, category, time, args.
type Mark = (String, String, u64, String);

/// A counter sample: track name, time, value.
type Sample = (String, u64, f64);

/// What the protobuf trace holds, decoded and checked.
#[derive(Debug, Default)]
struct Decoded {
    slices: Vec<Slice>,
    counters: Vec<Sample>,
    instants: Vec<Mark>,
    flows_started: usize,
    thread_names: BTreeMap<u64, String>,
}

/// Per-sequence incremental state.
#[derive(Default)]
struct SeqState {
    cleared: bool,
    default_track: Option<u64>,
    names: HashMap<u64, String>,
    cats: HashMap<u64, String>,
    ann_names: HashMap<u64, String>,
    strings: HashMap<u64, String>,
}

/// One track event in file order.
struct Ev {
    ts: u64,
    kind: EventType,
    name: String,
    cat: String,
    args: String,
    flows: Vec<u64>,
    terminating: Vec<u64>,
}

fn ann_value(st: &SeqState, a: &DebugAnnotation) -> (String, Value) {
    let name = match &a.name_field {
        Some(debug_annotation::Name_field::NameIid(iid)) => st
            .ann_names
            .get(iid)
            .unwrap_or_else(|| panic!("annotation name iid {iid} not defined on its sequence"))
            .clone(),
        Some(debug_annotation::Name_field::Name(n)) => n.clone(),
        _ => panic!("annotation without a name"),
    };
    let v = match &a.value {
        Some(debug_annotation::Value::IntValue(v)) => json!(v),
        Some(debug_annotation::Value::UintValue(v)) => json!(v),
        Some(debug_annotation::Value::DoubleValue(v)) => json!(v),
        Some(debug_annotation::Value::StringValue(v)) => json!(v),
        Some(debug_annotation::Value::StringValueIid(iid)) => json!(
            st.strings
                .get(iid)
                .unwrap_or_else(|| panic!("string iid {iid} not defined on its sequence"))
        ),
        other => panic!("unexpected annotation value {other:?}"),
    };
    (name, v)
}

/// Decodes `bytes` with the schema and checks interning, nesting and flows.
fn decode(bytes: &[u8]) -> Decoded {
    let trace = Trace::parse_from_bytes(bytes).expect("the file is a Perfetto Trace message");
    let mut seqs: HashMap<u32, SeqState> = HashMap::new();
    // Track uuid -> (tid key, name).
    let mut thread_tracks: HashMap<u64, u64> = HashMap::new();
    let mut named_tracks: HashMap<u64, String> = HashMap::new();
    let mut parents: HashMap<u64, u64> = HashMap::new();
    let mut events: BTreeMap<u64, Vec<Ev>> = BTreeMap::new();
    let mut out = Decoded::default();
    for p in &trace.packet {
        let seq_id = p.trusted_packet_sequence_id();
        assert!(seq_id != 0, "every packet is on a sequence");
        let st = seqs.entry(seq_id).or_default();
        let flags = p.sequence_flags();
        if flags & SequenceFlags::SEQ_INCREMENTAL_STATE_CLEARED as u32 != 0 {
            *st = SeqState {
                cleared: true,
                ..SeqState::default()
            };
        }
        if let Some(d) = p.trace_packet_defaults.as_ref() {
            assert!(st.cleared, "defaults on a sequence that was not cleared");
            st.default_track = d.track_event_defaults.as_ref().map(|d| d.track_uuid());
        }
        if let Some(i) = p.interned_data.as_ref() {
            assert!(st.cleared, "interned data before the state was cleared");
            for n in &i.event_names {
                assert!(st.names.insert(n.iid(), n.name().to_owned()).is_none());
            }
            for n in &i.event_categories {
                assert!(st.cats.insert(n.iid(), n.name().to_owned()).is_none());
            }
            for n in &i.debug_annotation_names {
                assert!(st.ann_names.insert(n.iid(), n.name().to_owned()).is_none());
            }
            for n in &i.debug_annotation_string_values {
                let s = String::from_utf8(n.str().to_vec()).expect("utf-8");
                assert!(st.strings.insert(n.iid(), s).is_none());
            }
        }
        match &p.data {
            Some(Data::TrackDescriptor(d)) => {
                if let Some(t) = d.thread.as_ref() {
                    thread_tracks.insert(d.uuid(), t.tid() as u64);
                    out.thread_names
                        .insert(t.tid() as u64, t.thread_name().to_owned());
                }
                if d.has_parent_uuid() {
                    parents.insert(d.uuid(), d.parent_uuid());
                }
                named_tracks.insert(d.uuid(), d.name().to_owned());
            }
            Some(Data::TrackEvent(e)) => {
                assert!(
                    flags & SequenceFlags::SEQ_NEEDS_INCREMENTAL_STATE as u32 != 0,
                    "track events rely on interned state"
                );
                assert!(
                    st.cleared,
                    "event on a sequence whose state was never cleared"
                );
                let track = if e.has_track_uuid() {
                    e.track_uuid()
                } else {
                    st.default_track.expect("a default track")
                };
                let name = match &e.name_field {
                    Some(track_event::Name_field::NameIid(iid)) => st
                        .names
                        .get(iid)
                        .unwrap_or_else(|| panic!("name iid {iid} not defined on its sequence"))
                        .clone(),
                    Some(track_event::Name_field::Name(n)) => n.clone(),
                    _ => String::new(),
                };
                let cats: Vec<String> = e
                    .category_iids
                    .iter()
                    .map(|iid| {
                        st.cats
                            .get(iid)
                            .unwrap_or_else(|| panic!("category iid {iid} not defined"))
                            .clone()
                    })
                    .collect();
                let args: serde_json::Map<String, Value> = e
                    .debug_annotations
                    .iter()
                    .map(|a| ann_value(st, a))
                    .collect();
                let ts = p.timestamp();
                match e.type_() {
                    EventType::TYPE_COUNTER => {
                        out.counters.push((
                            named_tracks.get(&track).cloned().unwrap_or_default(),
                            ts,
                            e.double_counter_value(),
                        ));
                    }
                    EventType::TYPE_INSTANT => out.instants.push((
                        name,
                        cats.join(","),
                        ts,
                        Value::Object(args).to_string(),
                    )),
                    kind => events.entry(track).or_default().push(Ev {
                        ts,
                        kind,
                        name,
                        cat: cats.join(","),
                        args: Value::Object(args).to_string(),
                        flows: e.flow_ids.clone(),
                        terminating: e.terminating_flow_ids.clone(),
                    }),
                }
            }
            _ => {}
        }
    }
    // Replay each track as trace_processor does: sorted by time (stable), an end closes
    // the innermost open slice.
    let mut flow_events: Vec<(u64, usize, Vec<u64>, Vec<u64>)> = Vec::new();
    for (track, evs) in events {
        let tid = match (thread_tracks.get(&track), parents.get(&track)) {
            (Some(&tid), _) => tid,
            // The CPU's waits for the accel: Chrome's pseudo-thread for them.
            (None, _) if track == perfetto::SYNC_UUID => SYNC_TID,
            // A GPU lane: Chrome's pseudo-thread for the backend kind.
            (None, _) if track == perfetto::gpu_uuid(track as u32) => {
                GPU_TID_BASE + u64::from(track as u32)
            }
            (None, Some(parent)) => {
                STATE_TID_BASE + thread_tracks.get(parent).copied().expect("thread parent")
            }
            _ => panic!("slices on track {track} that is not a thread's"),
        };
        assert!(
            evs.windows(2).all(|w| w[0].ts <= w[1].ts),
            "track {track}: events written in time order"
        );
        let mut stack: Vec<(usize, u64)> = Vec::new();
        for e in evs {
            match e.kind {
                EventType::TYPE_SLICE_BEGIN => {
                    let i = out.slices.len();
                    out.slices.push(Slice {
                        tid,
                        name: e.name,
                        cat: e.cat,
                        start: e.ts,
                        dur: 0,
                        args: e.args,
                    });
                    if !e.flows.is_empty() || !e.terminating.is_empty() {
                        flow_events.push((e.ts, i, e.flows, e.terminating));
                    }
                    stack.push((i, e.ts));
                }
                EventType::TYPE_SLICE_END => {
                    let (i, start) = stack.pop().expect("an end closes an open slice");
                    out.slices[i].dur = e.ts - start;
                }
                other => panic!("unexpected event type {other:?}"),
            }
        }
        assert!(stack.is_empty(), "track {track}: slices left open");
    }
    // Flows in time order across tracks (graphs first at equal times).
    flow_events.sort_by_key(|f| (f.0, out.slices[f.1].cat != "graph"));
    let mut flows: HashMap<u64, (usize, bool)> = HashMap::new();
    for (ts, i, ids, terminating) in flow_events {
        for id in ids {
            match flows.get_mut(&id) {
                Some((at, done)) => {
                    assert!(!*done, "flow {id} continued after its end");
                    assert!(out.slices[*at].start <= ts, "flow {id} goes back");
                    *at = i;
                }
                None => {
                    assert_eq!(out.slices[i].cat, "graph", "flows start at graphs");
                    out.flows_started += 1;
                    flows.insert(id, (i, false));
                }
            }
        }
        for id in terminating {
            let (at, done) = flows
                .get_mut(&id)
                .unwrap_or_else(|| panic!("flow {id} ends without a start"));
            assert!(!*done, "flow {id} ends twice");
            assert!(out.slices[*at].start <= ts, "flow {id} goes back");
            assert_ne!(out.slices[i].cat, "graph", "flows end at operators");
            *done = true;
        }
    }
    for (id, (_, done)) in flows {
        assert!(done, "flow {id} never ends");
    }
    out
}

/// The `X` slices, `C` samples and `i` instants of the Chrome JSON.
fn chrome_events(model: &TraceModel) -> (Vec<Slice>, Vec<Sample>, Vec<Mark>) {
    let mut buf = Vec::new();
    chrome::write(model, &chrome::ChromeOptions::default(), &mut buf).expect("write json");
    let doc: Value = serde_json::from_slice(&buf).expect("json");
    let ns = |v: &Value| (v.as_f64().expect("number") * 1000.0).round() as u64;
    let mut slices = Vec::new();
    let mut counters = Vec::new();
    let mut instants = Vec::new();
    for e in doc["traceEvents"].as_array().expect("events") {
        match e["ph"].as_str() {
            Some("X") => slices.push(Slice {
                tid: e["tid"].as_u64().expect("tid"),
                name: e["name"].as_str().expect("name").to_owned(),
                cat: e["cat"].as_str().expect("cat").to_owned(),
                start: ns(&e["ts"]),
                dur: ns(&e["dur"]),
                args: e["args"].to_string(),
            }),
            Some("C") => {
                let name = e["name"].as_str().expect("name").to_owned();
                let v = e["args"]
                    .as_object()
                    .and_then(|o| o.values().next())
                    .and_then(Value::as_f64)
                    .expect("value");
                counters.push((name, ns(&e["ts"]), v));
            }
            Some("i") => instants.push((
                e["name"].as_str().expect("name").to_owned(),
                e["cat"].as_str().expect("cat").to_owned(),
                ns(&e["ts"]),
                e.get("args")
                    .cloned()
                    .unwrap_or_else(|| json!({}))
                    .to_string(),
            )),
            _ => {}
        }
    }
    (slices, counters, instants)
}

fn sorted<T: PartialOrd>(mut v: Vec<T>) -> Vec<T> {
    v.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
    v
}

/// Writes both formats of `model` and checks they agree.
fn check_same_as_chrome(model: &TraceModel, what: &str) -> Decoded {
    let mut buf = Vec::new();
    let stats = perfetto::write(model, &PerfettoOptions::default(), &mut buf).expect("write");
    let d = decode(&buf);
    assert_eq!(stats.clamped, 0, "{what}: recorded slices nest");
    assert_eq!(stats.slices as usize, d.slices.len(), "{what}");
    assert_eq!(stats.flows as usize, d.flows_started, "{what}");
    let (json_slices, json_counters, json_instants) = chrome_events(model);
    assert!(!json_slices.is_empty(), "{what}: slices to compare");
    let (a, b) = (sorted(json_slices), sorted(d.slices.clone()));
    assert_eq!(a.len(), b.len(), "{what}: slice count");
    for (x, y) in a.iter().zip(&b) {
        // The JSON prints args with serde_json too, so the texts match key for key.
        let (xa, ya): (Value, Value) = (
            serde_json::from_str(&x.args).expect("json args"),
            serde_json::from_str(&y.args).expect("pb args"),
        );
        assert_eq!(
            (x.tid, &x.name, &x.cat, x.start, x.dur, xa),
            (y.tid, &y.name, &y.cat, y.start, y.dur, ya),
            "{what}: slices differ"
        );
    }
    let (a, b) = (sorted(json_instants), sorted(d.instants.clone()));
    assert_eq!(a.len(), b.len(), "{what}: instants");
    for (x, y) in a.iter().zip(&b) {
        let (xa, ya): (Value, Value) = (
            serde_json::from_str(&x.3).expect("json args"),
            serde_json::from_str(&y.3).expect("pb args"),
        );
        assert_eq!(
            (&x.0, &x.1, x.2, xa),
            (&y.0, &y.1, y.2, ya),
            "{what}: instants differ"
        );
    }
    let (a, b) = (sorted(json_counters), sorted(d.counters.clone()));
    assert_eq!(a.len(), b.len(), "{what}: counter samples");
    for (x, y) in a.iter().zip(&b) {
        assert_eq!((&x.0, x.1), (&y.0, y.1), "{what}: counter sample");
        assert!(
            (x.2 - y.2).abs() <= 1e-3 + 1e-9 * x.2.abs(),
            "{what}: {x:?} vs {y:?}"
        );
    }
    d
}

#[test]
fn synthetic_model_matches_chrome_json() {
    let spec = SynthSpec::sized(5, 12, 3);
    let model = synthetic::model(&spec, None);
    let d = check_same_as_chrome(&model, "synthetic");
    // Three threads with ops: one flow per graph and thread.
    assert_eq!(d.flows_started, 5 * 3);
    assert_eq!(
        d.slices.iter().filter(|s| s.cat == "token").count(),
        5,
        "every decode call"
    );
    assert_eq!(d.thread_names.len(), 3);
}

/// A split pass: the same slices in both formats (graph splits per backend, the CPU's
/// waits for the accel), and each token slice carries its time split.
#[test]
fn split_model_matches_chrome_json() {
    let model = synthetic::split_model(3);
    let d = check_same_as_chrome(&model, "split");
    let tokens: Vec<&Slice> = d.slices.iter().filter(|s| s.cat == "token").collect();
    assert_eq!(tokens.len(), 3, "every decode call");
    for t in tokens {
        let args: Value = serde_json::from_str(&t.args).expect("args");
        assert_eq!(
            args["sync_wait_ns"].as_u64(),
            Some(synthetic::SPLIT_SYNC_NS),
            "{args}"
        );
        for key in ["cpu_compute_ns", "accel_compute_ns", "copy_ns"] {
            assert!(args[key].as_u64().is_some_and(|v| v > 0), "{key}: {args}");
        }
    }
}

/// Every kind of element: a GPU lane, backend calls nested in a sync, QoS switches,
/// loss records and sampled-window marks, the same in both formats.
#[test]
fn every_kind_of_element_matches_chrome_json() {
    let model = synthetic::timeline_kinds_model();
    let d = check_same_as_chrome(&model, "kinds");
    let cats = |c: &str| d.slices.iter().filter(|s| s.cat == c).count();
    assert_eq!(cats("gpu"), 3, "the GPU lane's nodes");
    assert_eq!(cats("backend"), 6, "every backend call");
    let marks: Vec<&str> = d.instants.iter().map(|i| i.1.as_str()).collect();
    for cat in ["qos", "loss", "recording"] {
        assert!(marks.contains(&cat), "{cat}: {marks:?}");
    }
    assert_eq!(
        d.instants.len(),
        5,
        "a QoS switch, a loss, the mode and two windows"
    );
    let call: Value = serde_json::from_str(
        &d.slices
            .iter()
            .find(|s| s.name == "download vulkan 196608 B")
            .expect("the download")
            .args,
    )
    .expect("args");
    assert_eq!(
        call,
        json!({"kind": "download", "backend": "vulkan", "bytes": 196_608})
    );
}

#[test]
fn cut_synthetic_models_match_chrome_json() {
    // Cut anywhere: open decode calls, graphs and operators are left out of both.
    let spec = SynthSpec::sized(3, 5, 2);
    let total = spec.event_count() as usize;
    for upto in [1, 3, 7, total / 2, total - 3] {
        let model = synthetic::model(&spec, Some(upto));
        let mut buf = Vec::new();
        perfetto::write(&model, &PerfettoOptions::default(), &mut buf).expect("write");
        let d = decode(&buf);
        let (json, _, _) = chrome_events(&model);
        assert_eq!(
            sorted(json).len(),
            d.slices.len(),
            "cut at {upto}: slice count"
        );
    }
}

#[test]
fn recorded_traces_match_chrome_json() {
    for t in ["tiny_t1.pftrace", "tiny_t2.pftrace"] {
        let (model, _, _) = analyzer::ingest::load(&data(t), &analyzer::NoProgress).expect("load");
        let d = check_same_as_chrome(&model, t);
        // One flow per graph and thread that ran its operators.
        let flows: usize = model
            .graphs()
            .iter()
            .filter(|g| g.end_ns.is_some())
            .map(|g| {
                let mut th: Vec<u32> = model
                    .graph_node_spans(g)
                    .iter()
                    .flat_map(|s| model.span_slices(s).map(|x| x.thread))
                    .collect();
                th.sort_unstable();
                th.dedup();
                th.len()
            })
            .sum();
        assert_eq!(d.flows_started, flows, "{t}: flows");
        assert!(!d.counters.is_empty(), "{t}: counter samples");
        assert_eq!(d.thread_names.len(), model.target_threads().len(), "{t}");
        assert!(d.flows_started > 0, "{t}: flows");
        assert!(
            d.slices.iter().any(|s| s.tid >= STATE_TID_BASE),
            "{t}: thread states"
        );
        assert!(
            d.slices.iter().any(|s| s.cat == "phase"),
            "{t}: phase slices"
        );
    }
}

#[test]
fn analyze_writes_both_timelines_by_default() {
    let (dir, report) = analyze(&data("tiny_t2.pftrace"));
    let pb =
        std::fs::read(dir.path().join("timeline.perfetto-trace")).expect("timeline.perfetto-trace");
    assert!(!decode(&pb).slices.is_empty());
    assert!(dir.path().join("timeline.json").exists());
    assert!(
        report
            .files
            .iter()
            .any(|f| f.file == "timeline.perfetto-trace")
    );
}

/// The oracle venv's Python (`cargo xtask setup --oracle`), or `None` after a loud
/// banner (a failure when `PROFINFER_REQUIRE_ORACLE=1`, as in `cargo xtask test`).
fn venv_python() -> Option<std::path::PathBuf> {
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    if python.exists() {
        return Some(python);
    }
    assert!(
        std::env::var_os("PROFINFER_REQUIRE_ORACLE").is_none_or(|v| v != "1"),
        "{} is missing but PROFINFER_REQUIRE_ORACLE=1: run `cargo xtask setup --oracle`",
        python.display()
    );
    eprintln!(
        "\n!!! SKIPPED: no .venv (cargo xtask setup --oracle) for Perfetto's Python schema\n"
    );
    None
}

/// The file decodes with Perfetto's own generated schema (the `perfetto` PyPI package,
/// an implementation independent of the encoder): interned names defined, slices
/// closed, flows ended (`analyzer/tests/perfetto_check.py`).
#[test]
fn perfettos_own_python_schema_decodes_the_file() {
    let Some(python) = venv_python() else { return };
    let (dir, _) = analyze(&data("tiny_t2.pftrace"));
    let out = std::process::Command::new(&python)
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/perfetto_check.py"))
        .arg(dir.path().join("timeline.perfetto-trace"))
        .output()
        .expect("python runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("every flow ends: True"), "{text}");
}

/// A long run's timeline cut into parts: an overview of the whole run (tokens, graphs,
/// layers; no operators) and full-detail files of decode call ranges, each within the
/// part size, which together hold every slice of the one-file timeline once.
#[test]
fn a_long_timeline_is_cut_into_parts_that_hold_every_slice_once_beside_an_overview() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let trace = tmp.path().join("long.pftrace");
    let spec = SynthSpec::sized(60, 80, 2);
    synthetic::write_trace(&trace, &spec).expect("write");
    let one = tmp.path().join("one");
    analyzer::run(
        &trace,
        &one,
        &analyzer::AnalyzeOptions::default().with_graphics(false),
    )
    .expect("one-file analysis");
    let whole = std::fs::read(one.join("timeline.perfetto-trace")).expect("one file");
    assert!(
        one.join("timeline.json").exists(),
        "a short run keeps its JSON"
    );
    let part_bytes = (whole.len() / 4) as u64;

    let out = tmp.path().join("parts");
    // A folder an earlier analysis wrote into: its single timeline must go.
    std::fs::create_dir_all(&out).expect("dir");
    std::fs::write(out.join("timeline.perfetto-trace"), b"old").expect("old file");
    let opts = analyzer::AnalyzeOptions::default()
        .with_graphics(false)
        .with_part_bytes(part_bytes);
    let report = analyzer::run(&trace, &out, &opts).expect("split analysis");
    assert!(
        !out.join("timeline.perfetto-trace").exists(),
        "no stale one-file timeline"
    );
    assert!(
        !out.join("timeline.json").exists(),
        "auto: no JSON for a split timeline"
    );
    let mut parts: Vec<String> = report
        .files
        .iter()
        .map(|f| f.file.clone())
        .filter(|f| f.starts_with("timeline.tokens-"))
        .collect();
    parts.sort_by_key(|f| {
        f.trim_start_matches("timeline.tokens-")
            .split('-')
            .next()
            .and_then(|n| n.parse::<u32>().ok())
    });
    assert!(parts.len() >= 4, "{parts:?}");
    let mut slices = Vec::new();
    for p in &parts {
        let bytes = std::fs::read(out.join(p)).expect("part");
        assert!(
            bytes.len() as u64 <= part_bytes,
            "{p}: {} > {part_bytes}",
            bytes.len()
        );
        let d = decode(&bytes);
        assert!(d.flows_started > 0, "{p}: flows within the part");
        slices.extend(d.slices);
    }
    let one_file = decode(&whole);
    assert_eq!(
        sorted(slices),
        sorted(one_file.slices.clone()),
        "the parts hold the one file's slices, each once"
    );
    let overview =
        decode(&std::fs::read(out.join("timeline.overview.perfetto-trace")).expect("overview"));
    let count = |d: &Decoded, cat: &str| d.slices.iter().filter(|s| s.cat == cat).count();
    assert_eq!(
        count(&overview, "token"),
        count(&one_file, "token"),
        "every token"
    );
    assert_eq!(
        count(&overview, "graph"),
        count(&one_file, "graph"),
        "every graph"
    );
    assert!(count(&overview, "layer") > 0, "layer slices");
    assert!(
        overview
            .slices
            .iter()
            .all(|s| s.cat != "sched" && s.tid < STATE_TID_BASE),
        "no thread states"
    );
    assert_eq!(
        overview.slices.len(),
        count(&overview, "token")
            + count(&overview, "graph")
            + count(&overview, "layer")
            + count(&overview, "phase"),
        "no operators"
    );
    let page = std::fs::read_to_string(out.join("index.html")).expect("index.html");
    for p in &parts {
        assert!(page.contains(p.as_str()), "index.html links {p}");
    }
    if let Some(python) = venv_python() {
        for f in parts
            .iter()
            .map(String::as_str)
            .chain(["timeline.overview.perfetto-trace"])
        {
            let out = std::process::Command::new(&python)
                .arg(
                    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join("tests/perfetto_check.py"),
                )
                .arg(out.join(f))
                .output()
                .expect("python runs");
            assert!(
                out.status.success(),
                "{f}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// `--tokens A..B`: the timeline of those decode calls, with their operators.
#[test]
fn a_token_range_gives_the_timeline_of_those_calls() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let trace = tmp.path().join("t.pftrace");
    synthetic::write_trace(&trace, &SynthSpec::sized(12, 20, 2)).expect("write");
    let range = analyzer::timeline::RangeSpec::parse("3..5", true);
    let opts = analyzer::AnalyzeOptions::default()
        .with_graphics(false)
        .with_timeline_range(range);
    analyzer::run(&trace, tmp.path().join("out").as_path(), &opts).expect("analysis");
    let d = decode(&std::fs::read(tmp.path().join("out/timeline.perfetto-trace")).expect("file"));
    let tokens = d.slices.iter().filter(|s| s.cat == "token").count();
    assert_eq!(tokens, 2, "decode calls 3 and 4");
    let ops = d
        .slices
        .iter()
        .filter(|s| !["token", "graph", "phase"].contains(&s.cat.as_str()) && s.cat != "sched")
        .count();
    assert_eq!(ops, 2 * 20 * 2, "their operators on both threads");
}
