//! The Chrome Trace JSON parses, names every thread, and its slices nest per track.

mod support;

use std::collections::HashMap;

use serde_json::Value;
use support::{analyze, data, output};

/// Checks that the `X` slices of each (pid, tid) nest: sorted by start (longer first),
/// each slice ends before the enclosing open slice ends.
/// A slice: start ns, end ns, name.
type Slice = (u64, u64, String);

fn check_nesting(events: &[Value]) -> usize {
    let mut tracks: HashMap<(i64, i64), Vec<Slice>> = HashMap::new();
    for e in events.iter().filter(|e| e["ph"] == "X") {
        // ts/dur are µs with 3 decimals: back to integer ns exactly.
        let ns = |v: &Value| (v.as_f64().expect("number") * 1000.0).round() as u64;
        let (ts, dur) = (ns(&e["ts"]), ns(&e["dur"]));
        tracks
            .entry((
                e["pid"].as_i64().unwrap_or(0),
                e["tid"].as_i64().unwrap_or(0),
            ))
            .or_default()
            .push((ts, ts + dur, e["name"].as_str().unwrap_or("").to_owned()));
    }
    let mut n = 0;
    for (track, mut slices) in tracks {
        slices.sort_by_key(|s| (s.0, std::cmp::Reverse(s.1)));
        let mut stack: Vec<Slice> = Vec::new();
        for s in slices {
            while stack.last().is_some_and(|top| top.1 <= s.0) {
                stack.pop();
            }
            if let Some(top) = stack.last() {
                assert!(
                    s.1 <= top.1,
                    "track {track:?}: {} [{}, {}] overlaps {} [{}, {}]",
                    s.2,
                    s.0,
                    s.1,
                    top.2,
                    top.0,
                    top.1
                );
            }
            stack.push(s);
            n += 1;
        }
    }
    n
}

#[test]
fn chrome_json_parses_and_slices_nest() {
    for t in ["tiny_t2.pftrace", "tiny_t1.pftrace"] {
        let (dir, report) = analyze(&data(t));
        let doc: Value = serde_json::from_str(&output(&dir, "timeline.json")).expect("valid JSON");
        let events = doc["traceEvents"].as_array().expect("traceEvents");
        let n = check_nesting(events);
        assert!(n > 100, "{t}: only {n} slices");
        // Every op slice is named and carries its op type.
        let ops: Vec<_> = events
            .iter()
            .filter(|e| e["args"]["op"].is_string())
            .collect();
        assert!(!ops.is_empty());
        assert!(
            ops.iter()
                .all(|e| e["name"].as_str().is_some_and(|n| !n.is_empty()))
        );
        // Every target thread has a name, and so does its state track.
        let named: Vec<i64> = events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
            .filter_map(|e| e["tid"].as_i64())
            .collect();
        assert_eq!(named.len(), 2 * report.summary.threads, "{t}");
        // Token slices = decode calls; state slices exist (sched level was on).
        let tokens = events.iter().filter(|e| e["cat"] == "token").count() as u64;
        assert_eq!(
            tokens,
            report.summary.tokens.decode + report.summary.tokens.prefill_calls
        );
        assert!(
            events.iter().any(|e| e["cat"] == "sched"),
            "{t}: no thread states"
        );
    }
}

#[test]
fn nesting_check_catches_overlaps() {
    let bad: Vec<Value> = serde_json::from_str(
        r#"[{"ph":"X","pid":1,"tid":1,"ts":0.0,"dur":10.0,"name":"a"},
            {"ph":"X","pid":1,"tid":1,"ts":5.0,"dur":10.0,"name":"b"}]"#,
    )
    .expect("json");
    assert!(std::panic::catch_unwind(|| check_nesting(&bad)).is_err());
}
