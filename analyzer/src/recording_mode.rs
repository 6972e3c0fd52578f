//! What a recording gives, in words, for the head of every view: how its operator spans
//! were bounded (both ends probed, the start taken at the barrier's release, or the end
//! at the thread's next node), whether operators were recorded in sampled windows only,
//! and whether counters were read. Taken from the trace header's settings and from the
//! records themselves (which are the truth when the two disagree, e.g. a QoS switch).

use serde::Serialize;

use trace_format::{NodeEnds, RecordingSettings};

use crate::model::{TraceModel, WindowMark};

/// How a recording's operator spans were made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpanBounds {
    /// No operator records.
    None,
    /// Both ends probed on every thread: exact.
    Exact,
    /// The end probed, the start at the barrier's release: exact up to a waiting
    /// thread's leaving the barrier.
    StartAtRelease,
    /// The start probed, the end where the thread was next seen: each span includes
    /// the thread's wait at the barrier after it.
    EndAtNextNode,
    /// Formats 1–3: an entry and an exit probe per node and thread.
    EntryExit,
    /// More than one of the above.
    Mixed,
}

/// What the recording gives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RecordingMode {
    /// How operator spans were bounded.
    pub spans: SpanBounds,
    /// `ON/PERIOD` of sampled windows, when operators were recorded in windows.
    pub windows: Option<String>,
    /// Decode steps with operators recorded, and all decode steps (with windows).
    pub traced_steps: Option<(usize, usize)>,
    /// Whether per-operator counters were read.
    pub counters: bool,
    /// One line for a view's head.
    pub text: String,
    /// A few words for a narrow head (the live view's table title).
    pub short: String,
}

/// The recording mode of `model`, whose trace header had `settings`.
pub fn recording_mode(settings: &RecordingSettings, model: &TraceModel) -> RecordingMode {
    let c = model.counts();
    let kinds = [
        (c.spans_exact, SpanBounds::Exact),
        (c.spans_start_at_release, SpanBounds::StartAtRelease),
        (c.spans_end_approx, SpanBounds::EndAtNextNode),
        (c.op_entries, SpanBounds::EntryExit),
    ];
    let present: Vec<SpanBounds> = kinds
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|&(_, k)| k)
        .collect();
    let spans = match present[..] {
        [] => SpanBounds::None,
        [one] => one,
        _ => SpanBounds::Mixed,
    };
    // From the settings, or from the switches themselves (the live view has no header).
    let windows = settings
        .op_windows
        .flatten()
        .map(|w| format!("{}/{}", w.on, w.period))
        // A value this version could not read is shown as it was written.
        .or_else(|| {
            settings
                .other
                .get("op_windows")
                .filter(|w| !w.is_empty())
                .cloned()
        })
        .or_else(|| (!model.op_windows().is_empty()).then(|| "on".to_owned()));
    let traced_steps = windows.as_ref().map(|_| {
        let decode = model
            .tokens()
            .iter()
            .filter(|t| t.phase == crate::model::TokenPhase::Decode && t.end_ns.is_some());
        let (mut traced, mut all) = (0, 0);
        for t in decode {
            all += 1;
            if t.op_ns > 0 {
                traced += 1;
            }
        }
        (traced, all)
    });
    let counters = !model.counter_names().is_empty();
    let mut text = match spans {
        SpanBounds::None => "no operator level".to_owned(),
        SpanBounds::Exact => "exact operator spans (both ends probed on every thread)".to_owned(),
        // The engine's node ends taken by the engine itself and handed over in tables
        // (the header's `node_ends`), or probed one by one.
        SpanBounds::StartAtRelease if settings.node_ends == Some(NodeEnds::Batched) => {
            "operator spans: ends taken by the engine and handed over in batches, starts \
             at the barrier's release (exact to a waiting thread's wake-up)"
                .to_owned()
        }
        SpanBounds::StartAtRelease => "operator spans: ends probed, starts at the barrier's \
                                       release (exact to a waiting thread's wake-up)"
            .to_owned(),
        SpanBounds::EndAtNextNode => "operator spans: starts probed, each ends at the \
                                      thread's next node (barrier waits included; \
                                      --exact-spans to split them off)"
            .to_owned(),
        SpanBounds::EntryExit => {
            "operator spans: entry and exit probed (trace format 1–3)".to_owned()
        }
        SpanBounds::Mixed => "operator spans of more than one kind (exact and inferred \
                              bounds)"
            .to_owned(),
    };
    let sampled_only = spans == SpanBounds::None && !model.cpu_samples().is_empty();
    if let (Some(w), true) = (&windows, sampled_only) {
        // The windows switched the sampler's timers (`--sample` with `--op-windows`).
        text.push_str(&format!(
            "; sampled windows {w} switch the CPU-clock sampler"
        ));
    } else if let (Some(w), Some((traced, all))) = (&windows, traced_steps) {
        // `on`: the switches were seen, the ON/PERIOD setting was not (no header at hand).
        let w = if w == "on" {
            String::new()
        } else {
            format!(" {w}")
        };
        text.push_str(&format!(
            "; sampled windows{w}: operators of {traced} of {all} decode steps"
        ));
    }
    if counters {
        text.push_str("; counters per operator");
    }
    // `--sample HZ`: from the samples themselves, else the setting.
    let samples = model.cpu_samples();
    let sample_hz = (!samples.is_empty()).then(|| samples.hz()).or_else(|| {
        settings
            .other
            .get("sample_hz")
            .and_then(|v| v.parse::<u32>().ok())
    });
    if let Some(hz) = sample_hz {
        text.push_str(&format!(
            "; CPU-clock samples at {hz} Hz: operator shares estimated from {} samples",
            samples.total()
        ));
    }
    let mut short = match spans {
        SpanBounds::None => "no operators",
        SpanBounds::Exact => "exact spans",
        SpanBounds::StartAtRelease => "starts at barrier release",
        SpanBounds::EndAtNextNode => "waits included",
        SpanBounds::EntryExit => "entry/exit spans",
        SpanBounds::Mixed => "mixed spans",
    }
    .to_owned();
    if let Some((traced, all)) = traced_steps.filter(|_| !sampled_only) {
        short.push_str(&format!(", windows: {traced}/{all} steps"));
    }
    if let Some(hz) = sample_hz {
        short.push_str(&format!(", sampled at {hz} Hz"));
    }
    RecordingMode {
        spans,
        windows,
        traced_steps,
        counters,
        text,
        short,
    }
}

/// The timeline's marks of what the recording gives: the recording mode at the trace's
/// start, then each sampled-window switch, in time order (`(ts_ns, name)`).
pub fn timeline_marks(model: &TraceModel) -> Vec<(u64, String)> {
    let mut marks = Vec::new();
    if let Some(first) = model.first_ns() {
        let mode = recording_mode(&RecordingSettings::default(), model);
        marks.push((first, format!("recording: {}", mode.text)));
    }
    marks.extend(
        model
            .op_windows()
            .iter()
            .map(|w| (w.ts_ns, window_label(w))),
    );
    marks
}

/// What a sampled-window switch means for the steps after it.
pub fn window_label(w: &WindowMark) -> String {
    if w.traced {
        format!(
            "window on: operators recorded from decode step {}",
            w.decode_steps
        )
    } else {
        format!(
            "window off: operators not recorded from decode step {}",
            w.decode_steps
        )
    }
}

#[cfg(test)]
mod tests {
    use common::engine_abi::OpType;
    use common::event::{OP_SPAN_END_APPROX, OP_SPAN_START_AT_RELEASE, OpSpanEvent};
    use trace_format::Event;

    use super::*;
    use crate::synthetic::{
        SYNTH_MAIN_TID,
        records::{build, decode, desc, graph, op_window},
    };

    fn spans(flags: &[u32]) -> TraceModel {
        // A prompt, then one decode step with the spans.
        let mut events = vec![decode(0, false, 4, 0), decode(5, true, 4, 0)];
        events.extend([decode(8, false, 1, 4), graph(10, false)]);
        events.push(desc(20, 0x1000, 0, OpType::MulMat as u32, "ffn_up-0"));
        for (i, &f) in flags.iter().enumerate() {
            let end = 100 + 100 * i as u64;
            let dur = if f & OP_SPAN_START_AT_RELEASE != 0 {
                0
            } else {
                50
            };
            events.push(Event::OpSpan(OpSpanEvent::new(
                SYNTH_MAIN_TID,
                0x1000,
                end,
                dur,
                f,
            )));
        }
        events.push(graph(1000, true));
        events.push(decode(1100, true, 1, 4));
        build(&events)
    }

    /// The settings of a header table with one key.
    fn table(k: &str, v: &str) -> RecordingSettings {
        RecordingSettings::from_table(&std::collections::BTreeMap::from([(
            k.to_owned(),
            v.to_owned(),
        )]))
    }

    #[test]
    fn the_mode_follows_the_records() {
        let none = RecordingSettings::default();
        assert_eq!(recording_mode(&none, &spans(&[])).spans, SpanBounds::None);
        let m = recording_mode(&none, &spans(&[OP_SPAN_START_AT_RELEASE]));
        assert_eq!(m.spans, SpanBounds::StartAtRelease);
        assert!(m.text.contains("barrier's release"), "{}", m.text);
        assert!(m.text.contains("ends probed"), "{}", m.text);
        let batched = table("node_ends", "batched");
        let m = recording_mode(&batched, &spans(&[OP_SPAN_START_AT_RELEASE]));
        assert_eq!(m.spans, SpanBounds::StartAtRelease);
        assert!(
            m.text.contains("handed over in batches") && m.text.contains("barrier's release"),
            "{}",
            m.text
        );
        assert_eq!(recording_mode(&none, &spans(&[0])).spans, SpanBounds::Exact);
        assert_eq!(
            recording_mode(&none, &spans(&[OP_SPAN_END_APPROX])).spans,
            SpanBounds::EndAtNextNode
        );
        assert_eq!(
            recording_mode(&none, &spans(&[0, OP_SPAN_END_APPROX])).spans,
            SpanBounds::Mixed
        );
    }

    #[test]
    fn windows_say_how_many_steps_were_traced() {
        let settings = table("op_windows", "8/32");
        let m = recording_mode(&settings, &spans(&[0]));
        assert_eq!(m.windows.as_deref(), Some("8/32"));
        assert_eq!(m.traced_steps, Some((1, 1)));
        assert!(m.text.contains("sampled windows 8/32"), "{}", m.text);
        let off = table("op_windows", "off");
        assert_eq!(recording_mode(&off, &spans(&[0])).windows, None);
    }

    #[test]
    fn the_timeline_is_marked_with_the_mode_and_every_switch() {
        let mut events = vec![decode(0, false, 1, 0), op_window(2, true, 1)];
        events.extend([graph(10, false), graph(20, true), op_window(30, false, 40)]);
        events.push(decode(50, true, 1, 0));
        let marks = timeline_marks(&build(&events));
        let names: Vec<&str> = marks.iter().map(|(_, n)| n.as_str()).collect();
        assert_eq!(marks.len(), 3, "{names:?}");
        assert!(
            names[0].starts_with("recording: no operator level; sampled windows: operators of")
        );
        assert!(names[1].starts_with("window on: operators recorded"));
        assert!(names[2].starts_with("window off: operators not recorded"));
        assert_eq!((marks[1].0, marks[2].0), (2, 30));
    }
}
