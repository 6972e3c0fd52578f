//! Sampled windows (`profinfer record --op-windows ON/PERIOD`): which decode steps had
//! their operators recorded, and what recording them cost, measured inside the run: the
//! traced steps' time per token against the untraced steps' of the same process, the
//! same cache and KV state and the same minutes of the machine. In a sampled recording
//! without operators (`--sample` with `--op-windows`) the windows switch the CPU-clock
//! sampler instead, and the same comparison measures what sampling costs.

use serde::Serialize;

use crate::model::{TokenPhase, TraceModel};

/// Traced against untraced decode steps of a recording with sampled windows.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowStats {
    /// Decode steps with operators recorded.
    pub traced_steps: usize,
    /// Decode steps without (their probes were detached).
    pub untraced_steps: usize,
    /// Steps left out of both: a window began or ended during them (from the switch to
    /// the probes' detachment, which takes a few hundred ms).
    pub switch_steps: usize,
    /// Median time per decode step of the traced steps, ms.
    pub traced_p50_ms: f64,
    /// Median time per decode step of the untraced steps, ms.
    pub untraced_p50_ms: f64,
    /// `traced_p50 / untraced_p50 - 1`: what recording operators (or sampling) cost the
    /// decode steps.
    pub slowdown: f64,
    /// What the windows switched: `operators`, or `sampler` (a `--sample` recording
    /// without the operator level).
    pub switched: &'static str,
}

/// The windows of `model`, if the recording had any (a window switch and steps of both
/// kinds).
pub fn window_stats(model: &TraceModel) -> Option<WindowStats> {
    let switches: Vec<(u64, u64)> = model
        .op_windows()
        .iter()
        .map(|w| (w.ts_ns.min(w.settled_ns), w.ts_ns.max(w.settled_ns)))
        .collect();
    if switches.is_empty() {
        return None;
    }
    // Operators recorded are seen in each step; the sampler's state only in the switches
    // (windows start on: the first steps are traced).
    let c = model.counts();
    let spans = c.op_entries + c.spans_exact + c.spans_start_at_release + c.spans_end_approx;
    let sampler = !model.cpu_samples().is_empty() && spans == 0;
    let on_at = |ts: u64| {
        model
            .op_windows()
            .iter()
            .rev()
            .find(|w| w.ts_ns.max(w.settled_ns) <= ts)
            .is_none_or(|w| w.traced)
    };
    let (mut traced, mut untraced) = (Vec::new(), Vec::new());
    let mut switch_steps = 0;
    for t in model.tokens() {
        let Some(end) = t.end_ns else { continue };
        if t.phase != TokenPhase::Decode {
            continue;
        }
        if switches.iter().any(|&(s, e)| s <= end && e >= t.start_ns) {
            switch_steps += 1;
            continue;
        }
        let ms = (end - t.start_ns) as f64 / 1e6;
        let on = if sampler {
            on_at(t.start_ns)
        } else {
            t.op_ns > 0
        };
        if on {
            traced.push(ms);
        } else {
            untraced.push(ms);
        }
    }
    if traced.is_empty() || untraced.is_empty() {
        return None;
    }
    let (traced_p50_ms, untraced_p50_ms) = (median(&mut traced), median(&mut untraced));
    Some(WindowStats {
        traced_steps: traced.len(),
        untraced_steps: untraced.len(),
        switch_steps,
        traced_p50_ms,
        untraced_p50_ms,
        slowdown: traced_p50_ms / untraced_p50_ms.max(f64::MIN_POSITIVE) - 1.0,
        switched: if sampler { "sampler" } else { "operators" },
    })
}

/// The p50 of `v` (not empty) as the summary's distributions take it: the nearest rank
/// (of an even number of values, the lower middle one).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    crate::stats::percentile(v, 50.0).unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use common::engine_abi::OpType;
    use trace_format::Event;

    use super::*;
    use crate::synthetic::{
        SYNTH_MAIN_TID,
        records::{build, decode, desc, graph, op_window, span},
    };

    const MS: u64 = 1_000_000;
    const NODE: u64 = 0x1000;

    /// A decode step at `start` lasting `ms` (in µs resolution), with one operator span
    /// when `traced`.
    fn step(events: &mut Vec<Event>, start: u64, ms: f64, pos: u32, traced: bool) -> u64 {
        let end = start + (ms * 1000.0) as u64 * 1000;
        events.push(decode(start, false, 1, pos));
        events.push(graph(start + 100, false));
        if traced {
            events.push(desc(
                start + 200,
                NODE,
                0,
                OpType::MulMat as u32,
                "ffn_up-0",
            ));
            events.push(span(SYNTH_MAIN_TID, NODE, end - 300, 1000, 0));
        }
        events.push(graph(end - 200, true));
        events.push(decode(end, true, 1, pos));
        end
    }

    /// Steps of the kinds and lengths given, 1 ms apart after a prefill, with the window
    /// switches `switch(index of the step, its start, its end)` adds.
    fn trace(
        steps: &[(bool, f64)],
        mut switch: impl FnMut(usize, u64, u64) -> Vec<Event>,
    ) -> Vec<Event> {
        let mut events = vec![decode(0, false, 4, 0), decode(2 * MS, true, 4, 0)];
        let mut t = 3 * MS;
        for (i, &(traced, ms)) in steps.iter().enumerate() {
            let end = step(&mut events, t, ms, 4 + i as u32, traced);
            events.extend(switch(i, t, end));
            t = end + MS;
        }
        // A step still running when the recording ended: no time, left out.
        events.push(decode(t, false, 1, 99));
        events.sort_by_key(|e| {
            let h = e.header();
            (h.ts_ns, h.tid, h.kind, h.flags, h.cpu)
        });
        events
    }

    /// Traced steps (11–15 ms), a window's end during a traced step with the probes
    /// detached during the next (both left out), untraced steps (9–10.5 ms), a window's
    /// start between two steps (nothing left out), traced steps again.
    #[test]
    fn traced_and_untraced_steps_are_compared_without_the_switches() {
        let steps = [
            (true, 11.0),
            (true, 12.0),
            (true, 13.0),
            (true, 30.0),  // the window ends during it
            (false, 40.0), // the probes are detached during it
            (false, 10.0),
            (false, 10.5),
            (false, 9.0),
            (false, 9.5),
            (true, 15.0),
            (true, 14.0),
        ];
        let events = trace(&steps, |i, start, end| {
            let mut v = Vec::new();
            match i {
                3 => {
                    // Detached 2 ms into the next step (which starts 1 ms after).
                    v.push(op_window(start + 5 * MS, false, end + 3 * MS));
                }
                8 => v.push(op_window(end + MS / 2, true, end + MS / 2)),
                _ => {}
            }
            v
        });
        let m = build(&events);
        assert_eq!(m.op_windows().len(), 2);
        let w = window_stats(&m).expect("windows");
        assert_eq!(
            (w.traced_steps, w.untraced_steps, w.switch_steps),
            (5, 4, 2)
        );
        // Nearest-rank p50, as the summary's: 13 of 11..15; 9.5 of 9, 9.5, 10, 10.5.
        assert!((w.traced_p50_ms - 13.0).abs() < 1e-9, "{w:?}");
        assert!((w.untraced_p50_ms - 9.5).abs() < 1e-9, "{w:?}");
        assert!((w.slowdown - (13.0 / 9.5 - 1.0)).abs() < 1e-9, "{w:?}");
    }

    /// A window's start: its probes began to be attached during an untraced step and
    /// the control write came after it (`settled_ns` before `ts_ns`); that step
    /// trapped without recording and is left out.
    #[test]
    fn attachment_before_a_window_start_is_left_out() {
        let steps = [
            (false, 9.0),
            (false, 10.0),
            (false, 30.0), // the probes are attached during it
            (true, 12.0),
            (true, 13.0),
        ];
        let m = build(&trace(&steps, |i, start, end| {
            if i == 2 {
                vec![op_window(end + MS / 2, true, start + MS)]
            } else {
                Vec::new()
            }
        }));
        let w = window_stats(&m).expect("windows");
        assert_eq!(
            (w.traced_steps, w.untraced_steps, w.switch_steps),
            (2, 2, 1)
        );
        assert!((w.untraced_p50_ms - 9.0).abs() < 1e-9, "{w:?}");
    }

    /// A sampled recording without operators (`--sample` with `--op-windows`): the
    /// switches alone say which steps had the sampler on.
    #[test]
    fn sampler_windows_are_told_by_their_switches() {
        use common::event::{EventHeader, EventKind, SAMPLE_PHASE_DECODE, SampleCountsEvent};
        let steps = [
            (false, 10.5), // on: windows start on
            (false, 10.0),
            (false, 30.0), // the sampler is switched off during it
            (false, 9.0),
            (false, 9.5),
        ];
        let mut events = trace(&steps, |i, start, _| {
            if i == 2 {
                vec![op_window(start + MS, false, start + 2 * MS)]
            } else {
                Vec::new()
            }
        });
        let mut counts = SampleCountsEvent {
            header: EventHeader {
                kind: EventKind::SampleCounts as u32,
                ts_ns: 4 * MS,
                tid: SYNTH_MAIN_TID,
                ..EventHeader::ZERO
            },
            hz: 997,
            phase: SAMPLE_PHASE_DECODE,
            n: 1,
            ..SampleCountsEvent::default()
        };
        counts.ops[0] = 5;
        counts.counts[0] = 20;
        events.push(Event::SampleCounts(counts));
        events.sort_by_key(|e| e.header().ts_ns);
        let w = window_stats(&build(&events)).expect("windows");
        assert_eq!(w.switched, "sampler");
        assert_eq!(
            (w.traced_steps, w.untraced_steps, w.switch_steps),
            (2, 2, 1)
        );
        assert!((w.traced_p50_ms - 10.0).abs() < 1e-9, "{w:?}");
        assert!((w.untraced_p50_ms - 9.0).abs() < 1e-9, "{w:?}");
    }

    /// No switch, or steps of one kind only: nothing to compare.
    #[test]
    fn no_windows_no_stats() {
        let steps = [(true, 11.0), (false, 9.0), (false, 9.0)];
        assert_eq!(
            window_stats(&build(&trace(&steps, |_, _, _| Vec::new()))),
            None
        );
        let traced_only = [(true, 11.0), (true, 12.0)];
        let m = build(&trace(&traced_only, |i, _, end| {
            if i == 1 {
                vec![op_window(end + MS / 2, false, end + MS)]
            } else {
                Vec::new()
            }
        }));
        assert_eq!(m.op_windows().len(), 1);
        assert_eq!(window_stats(&m), None);
    }
}
