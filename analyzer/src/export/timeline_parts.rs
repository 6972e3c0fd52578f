//! A long recording's timeline cut into files Perfetto's UI opens: its trace processor
//! runs inside the browser tab with about 2 GB, so each full-detail file holds at most
//! [`DEFAULT_PART_BYTES`] (256 MiB) of a range of decode calls, beside one overview file
//! of the whole session (tokens, graphs, layers, phases, backend calls, counters, marks;
//! no operators or scheduler states).
//!
//! The parts are planned from the model before anything is encoded: each decode call's
//! events (its operators and the scheduler states that begin in it) at a measured size
//! per event, packed greedily into parts; parts are cut at decode call starts, so a call
//! and all it nests are in one file. A part that still comes out too large is written
//! again as two halves ([`write_parts`]).

use std::ops::Range;

use crate::{
    model::TraceModel,
    timeline::{TimeRange, range::call_starts},
};

/// The largest full-detail timeline file written by default.
pub const DEFAULT_PART_BYTES: u64 = 256 << 20;

/// Protobuf bytes per operator slice or scheduler state, as the estimate takes it, rounded
/// up from what was seen: 82 in issue 43's 2000-token SmolLM2 run (401 MB for 4.9 M
/// records), 95 in this change's (2.6 M records, parts adding up to 247 MB;
/// docs/performance.md has the command).
pub const BYTES_PER_EVENT: u64 = 100;

/// Share of the part size the plan fills (the rest is the estimate's margin).
const FILL: f64 = 0.8;

/// One planned file of the timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimelinePart {
    /// The decode calls it holds (indices into [`TraceModel::tokens`] by start).
    pub tokens: Range<usize>,
    /// The time it covers.
    pub range: TimeRange,
    /// Its estimated size, bytes.
    pub est_bytes: u64,
    /// Digits of the decode call numbers in its file name (those of the run's last call,
    /// so the names sort in order).
    pub digits: usize,
}

impl TimelinePart {
    /// Its file name: `timeline.tokens-0000-0999.perfetto-trace` (first and last decode
    /// call).
    pub fn file_name(&self) -> String {
        let w = self.digits;
        format!(
            "timeline.tokens-{:0w$}-{:0w$}.perfetto-trace",
            self.tokens.start,
            self.tokens.end.saturating_sub(1).max(self.tokens.start)
        )
    }
}

/// Digits of the run's last decode call number.
fn digits(calls: usize) -> usize {
    calls.saturating_sub(1).max(1).to_string().len()
}

/// The events (operator slices, scheduler states) that begin in each window of `range`
/// between decode call starts `starts`: window 0 is before the first call, window `i`
/// from call `i - 1`'s start.
fn events_per_window(model: &TraceModel, starts: &[u64], range: TimeRange) -> Vec<u64> {
    let mut counts = vec![0u64; starts.len() + 1];
    let mut count = |ts: u64| {
        if range.contains(ts) {
            counts[starts.partition_point(|&s| s <= ts)] += 1;
        }
    };
    for s in model.slices() {
        count(s.start_ns);
    }
    for th in model.threads() {
        for st in th.states.slices() {
            count(st.start_ns);
        }
    }
    counts
}

/// The files of `range`'s full-detail timeline: as few as hold it with each planned at
/// most `FILL` of `max_bytes`, of about equal size (one part when it all fits; a decode
/// call larger than that is a part of its own).
pub fn plan(model: &TraceModel, range: TimeRange, max_bytes: u64) -> Vec<TimelinePart> {
    let starts = call_starts(model);
    let per_window = events_per_window(model, &starts, range);
    let budget = ((max_bytes as f64 * FILL) as u64).max(BYTES_PER_EVENT);
    // The windows the range touches: window w covers [bound(w), bound(w + 1)).
    let w_lo = starts.partition_point(|&s| s <= range.start_ns);
    let w_hi = starts.partition_point(|&s| s < range.end_ns);
    let bound = |w: usize| -> u64 {
        if w <= w_lo {
            range.start_ns
        } else if w > w_hi {
            range.end_ns
        } else {
            starts[w - 1]
        }
    };
    // As many parts as the budget needs, of about equal size.
    let window_bytes = |w: usize| (per_window[w] + 4) * BYTES_PER_EVENT;
    let total: u64 = (w_lo..=w_hi).map(window_bytes).sum();
    let target = total / total.div_ceil(budget).max(1);
    let mut parts = Vec::new();
    let mut first = w_lo;
    let mut bytes = 0u64;
    for w in w_lo..=w_hi {
        let b = window_bytes(w);
        if w > first && (bytes + b > budget || bytes + b / 2 > target) {
            parts.push(part(
                first,
                w,
                bound(first),
                bound(w),
                bytes,
                digits(starts.len()),
            ));
            first = w;
            bytes = 0;
        }
        bytes += b;
    }
    parts.push(part(
        first,
        w_hi + 1,
        bound(first),
        range.end_ns,
        bytes,
        digits(starts.len()),
    ));
    parts
}

/// The part of windows `first..end`: decode calls `first - 1 .. end - 1` (window 0 holds
/// what comes before the first call).
fn part(
    first: usize,
    end: usize,
    start_ns: u64,
    end_ns: u64,
    est_bytes: u64,
    digits: usize,
) -> TimelinePart {
    TimelinePart {
        tokens: first.saturating_sub(1)..end.saturating_sub(1).max(first.saturating_sub(1)),
        range: TimeRange { start_ns, end_ns },
        est_bytes,
        digits,
    }
}

/// Whether the overview of `range` can have a slice per layer within `max_bytes`
/// (a run of hours has too many: its overview keeps tokens, graphs and phases).
pub fn overview_has_layers(model: &TraceModel, range: TimeRange, max_bytes: u64) -> bool {
    let layers = model.nodes().iter().map(|n| n.layer).max().unwrap_or(-1) + 1;
    let graphs = model
        .graphs()
        .iter()
        .filter(|g| range.contains(g.start_ns))
        .count() as u64;
    let per_graph = u64::try_from(layers).unwrap_or(0) + 4;
    (graphs * per_graph + model.tokens().len() as u64 * 4) * BYTES_PER_EVENT
        <= (max_bytes as f64 * FILL) as u64
}

/// Halves of `part` at its middle decode call (`None` for a part of one call).
pub fn halves(model: &TraceModel, part: &TimelinePart) -> Option<(TimelinePart, TimelinePart)> {
    let starts = call_starts(model);
    let (a, b) = (part.tokens.start, part.tokens.end);
    if b <= a + 1 {
        return None;
    }
    let mid = a + (b - a) / 2;
    let cut = starts.get(mid).copied()?;
    let half = part.est_bytes / 2;
    Some((
        TimelinePart {
            tokens: a..mid,
            range: TimeRange {
                start_ns: part.range.start_ns,
                end_ns: cut,
            },
            est_bytes: half,
            digits: part.digits,
        },
        TimelinePart {
            tokens: mid..b,
            range: TimeRange {
                start_ns: cut,
                end_ns: part.range.end_ns,
            },
            est_bytes: half,
            digits: part.digits,
        },
    ))
}

/// Writes each planned part with `write` (which returns the bytes it wrote), writing a
/// part that came out larger than `max_bytes` again as two halves; returns the parts
/// written with their sizes.
///
/// # Errors
/// `write`'s errors.
pub fn write_parts<E>(
    model: &TraceModel,
    planned: Vec<TimelinePart>,
    max_bytes: u64,
    mut write: impl FnMut(&TimelinePart) -> Result<u64, E>,
    mut discard: impl FnMut(&TimelinePart),
) -> Result<Vec<(TimelinePart, u64)>, E> {
    let mut todo: Vec<TimelinePart> = planned.into_iter().rev().collect();
    let mut done = Vec::new();
    while let Some(p) = todo.pop() {
        let bytes = write(&p)?;
        match (bytes > max_bytes).then(|| halves(model, &p)).flatten() {
            Some((a, b)) => {
                discard(&p);
                todo.push(b);
                todo.push(a);
            }
            None => done.push((p, bytes)),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{SynthSpec, model};

    /// The estimated size of the full-detail timeline of `range`, bytes.
    fn estimate_bytes(model: &TraceModel, range: TimeRange) -> u64 {
        let starts = call_starts(model);
        let events: u64 = events_per_window(model, &starts, range).iter().sum();
        (events + model.tokens().len() as u64 * 4) * BYTES_PER_EVENT
    }

    #[test]
    fn parts_cover_every_call_once_in_order_within_the_budget() {
        let m = model(&SynthSpec::sized(40, 50, 2), None);
        let whole = estimate_bytes(&m, TimeRange::ALL);
        let parts = plan(&m, TimeRange::ALL, whole / 3);
        assert!(parts.len() >= 3, "{parts:?}");
        assert_eq!(parts[0].tokens.start, 0);
        assert_eq!(parts.last().expect("parts").tokens.end, 40);
        for w in parts.windows(2) {
            assert_eq!(w[0].tokens.end, w[1].tokens.start, "consecutive calls");
            assert_eq!(w[0].range.end_ns, w[1].range.start_ns, "no gap in time");
        }
        for p in &parts {
            assert!(p.est_bytes <= whole / 3, "{p:?} within the budget");
        }
        assert_eq!(
            plan(&m, TimeRange::ALL, whole * 2).len(),
            1,
            "all fits in one"
        );
    }

    #[test]
    fn a_part_too_large_is_written_again_as_halves() {
        let m = model(&SynthSpec::sized(8, 10, 2), None);
        let planned = plan(&m, TimeRange::ALL, u64::MAX);
        assert_eq!(planned.len(), 1);
        let mut discarded = 0;
        // Writing "costs" 10 bytes per decode call: more than 20 is too large.
        let done = write_parts(
            &m,
            planned,
            20,
            |p| Ok::<u64, ()>(p.tokens.len() as u64 * 10),
            |_| discarded += 1,
        )
        .expect("writes");
        assert!(done.iter().all(|(_, b)| *b <= 20), "{done:?}");
        let calls: usize = done.iter().map(|(p, _)| p.tokens.len()).sum();
        assert_eq!(calls, 8, "every call once");
        assert_eq!(discarded, 3, "8 -> 4+4 -> 2+2+2+2");
    }
}
