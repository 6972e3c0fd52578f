//! A part of the timeline in time: the walk of a token range (`profinfer analyze
//! --tokens A..B`, `--time A..B`, and the files a long recording's timeline is cut into)
//! keeps the slices that begin inside it, each with everything it nests (a slice that
//! began before it is dropped, its children inside the range kept), so slices still nest
//! and every begin has its end; counters and instants are kept by their time.
//!
//! Ranges cut at token starts keep each decode call with its graphs, phases and operators
//! (and the flows between them) in one part.

use std::io;

use super::{Instant, Layout, Slice, TimelineSink, TrackId};

/// A half-open interval of trace time, ns (absolute, as the model's timestamps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeRange {
    /// First ns inside.
    pub start_ns: u64,
    /// First ns after.
    pub end_ns: u64,
}

impl TimeRange {
    /// The whole of time.
    pub const ALL: TimeRange = TimeRange {
        start_ns: 0,
        end_ns: u64::MAX,
    };

    /// Whether `ts_ns` is inside.
    pub fn contains(&self, ts_ns: u64) -> bool {
        (self.start_ns..self.end_ns).contains(&ts_ns)
    }
}

/// The decode calls' starts, in time order (the order ranges count calls in).
pub fn call_starts(model: &crate::TraceModel) -> Vec<u64> {
    let mut starts: Vec<u64> = model.tokens().iter().map(|t| t.start_ns).collect();
    starts.sort_unstable();
    starts
}

/// A part of a run as a person names it: decode calls `A..B` (by start, from 0; `B`
/// not included) or seconds `A..B` from the first event.
#[derive(Clone, Debug, PartialEq)]
pub enum RangeSpec {
    /// Decode calls.
    Tokens(std::ops::Range<usize>),
    /// Seconds from the first event.
    Seconds(std::ops::Range<f64>),
}

impl RangeSpec {
    /// `A..B`, `A..` or `..B` as decode calls (`tokens`) or seconds (with an optional
    /// `s`/`ms` unit on each end); `None` when it does not read as one.
    pub fn parse(s: &str, tokens: bool) -> Option<RangeSpec> {
        let (a, b) = s.split_once("..")?;
        if tokens {
            let a = if a.is_empty() {
                0
            } else {
                a.trim().parse().ok()?
            };
            let b = if b.is_empty() {
                usize::MAX
            } else {
                b.trim().parse().ok()?
            };
            return (a < b).then_some(RangeSpec::Tokens(a..b));
        }
        let secs = |v: &str, open: f64| -> Option<f64> {
            let v = v.trim();
            if v.is_empty() {
                return Some(open);
            }
            let (n, scale) = match v.strip_suffix("ms") {
                Some(n) => (n, 1e-3),
                None => (v.strip_suffix('s').unwrap_or(v), 1.0),
            };
            let x: f64 = n.trim().parse().ok()?;
            (x.is_finite() && x >= 0.0).then_some(x * scale)
        };
        let (a, b) = (secs(a, 0.0)?, secs(b, f64::INFINITY)?);
        (a < b).then_some(RangeSpec::Seconds(a..b))
    }

    /// The trace time it stands for in `model`: decode calls from call `A`'s start to
    /// call `B`'s (the end of the run past the last); seconds from the first event.
    pub fn resolve(&self, model: &crate::TraceModel) -> TimeRange {
        match self {
            RangeSpec::Tokens(r) => {
                let starts = call_starts(model);
                TimeRange {
                    start_ns: starts.get(r.start).copied().unwrap_or(u64::MAX),
                    end_ns: starts.get(r.end).copied().unwrap_or(u64::MAX),
                }
            }
            RangeSpec::Seconds(r) => {
                let first = model.first_ns().unwrap_or(0);
                let at = |s: f64| {
                    if s.is_finite() {
                        first.saturating_add((s * 1e9) as u64)
                    } else {
                        u64::MAX
                    }
                };
                TimeRange {
                    start_ns: at(r.start),
                    end_ns: at(r.end),
                }
            }
        }
    }
}

impl std::fmt::Display for RangeSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RangeSpec::Tokens(r) if r.end == usize::MAX => write!(f, "decode calls {}..", r.start),
            RangeSpec::Tokens(r) => write!(f, "decode calls {}..{}", r.start, r.end),
            RangeSpec::Seconds(r) if r.end.is_infinite() => write!(f, "{} s..", r.start),
            RangeSpec::Seconds(r) => write!(f, "{} s..{} s", r.start, r.end),
        }
    }
}

/// A sink that passes on what begins inside its range.
pub struct RangeFilter<'s, S> {
    inner: &'s mut S,
    range: TimeRange,
    /// For each open slice: whether it was passed on.
    open: Vec<bool>,
}

impl<'s, S: TimelineSink> RangeFilter<'s, S> {
    /// Filters what reaches `inner` to `range`.
    pub fn new(inner: &'s mut S, range: TimeRange) -> RangeFilter<'s, S> {
        RangeFilter {
            inner,
            range,
            open: Vec::new(),
        }
    }
}

impl<S: TimelineSink> TimelineSink for RangeFilter<'_, S> {
    fn tracks(&mut self, layout: &Layout) -> io::Result<()> {
        self.inner.tracks(layout)
    }

    fn sequence(&mut self, track: TrackId) -> io::Result<()> {
        self.inner.sequence(track)
    }

    fn begin(&mut self, slice: &Slice<'_>) -> io::Result<()> {
        let in_kept = self.open.last().copied().unwrap_or(false);
        let keep = in_kept || self.range.contains(slice.start_ns);
        self.open.push(keep);
        if keep {
            self.inner.begin(slice)
        } else {
            Ok(())
        }
    }

    fn end(&mut self, ts_ns: u64) -> io::Result<()> {
        if self.open.pop() == Some(true) {
            self.inner.end(ts_ns)
        } else {
            Ok(())
        }
    }

    fn counter(&mut self, track: TrackId, ts_ns: u64, value: f64) -> io::Result<()> {
        if self.range.contains(ts_ns) {
            self.inner.counter(track, ts_ns, value)
        } else {
            Ok(())
        }
    }

    fn instant(&mut self, instant: &Instant<'_>) -> io::Result<()> {
        if self.range.contains(instant.ts_ns) {
            self.inner.instant(instant)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::SliceName;

    /// Records what reaches it: `b<start>`, `e<ts>`, `c<ts>`.
    #[derive(Default)]
    struct Log(Vec<String>);

    impl TimelineSink for Log {
        fn tracks(&mut self, _: &Layout) -> io::Result<()> {
            Ok(())
        }
        fn sequence(&mut self, _: TrackId) -> io::Result<()> {
            Ok(())
        }
        fn begin(&mut self, s: &Slice<'_>) -> io::Result<()> {
            self.0.push(format!("b{}", s.start_ns));
            Ok(())
        }
        fn end(&mut self, ts: u64) -> io::Result<()> {
            self.0.push(format!("e{ts}"));
            Ok(())
        }
        fn counter(&mut self, _: TrackId, ts: u64, _: f64) -> io::Result<()> {
            self.0.push(format!("c{ts}"));
            Ok(())
        }
        fn instant(&mut self, i: &Instant<'_>) -> io::Result<()> {
            self.0.push(format!("i{}", i.ts_ns));
            Ok(())
        }
    }

    fn slice(start_ns: u64) -> Slice<'static> {
        Slice {
            start_ns,
            end_ns: start_ns + 1,
            name: SliceName::Shared("s"),
            category: "op",
            args: &[],
            flows: &[],
            terminating_flows: &[],
            node: None,
        }
    }

    #[test]
    fn ranges_read_as_people_write_them() {
        assert_eq!(
            RangeSpec::parse("10..20", true),
            Some(RangeSpec::Tokens(10..20))
        );
        assert_eq!(
            RangeSpec::parse("5..", true),
            Some(RangeSpec::Tokens(5..usize::MAX))
        );
        assert_eq!(RangeSpec::parse("20..10", true), None);
        assert_eq!(
            RangeSpec::parse("1.5..3s", false),
            Some(RangeSpec::Seconds(1.5..3.0))
        );
        assert_eq!(
            RangeSpec::parse("500ms..", false),
            Some(RangeSpec::Seconds(0.5..f64::INFINITY))
        );
        assert_eq!(RangeSpec::parse("x..2", false), None);
        assert_eq!(RangeSpec::parse("12", true), None);
    }

    #[test]
    fn keeps_slices_that_begin_inside_with_what_they_nest() {
        let mut log = Log::default();
        let mut f = RangeFilter::new(
            &mut log,
            TimeRange {
                start_ns: 10,
                end_ns: 20,
            },
        );
        // A slice from before the range with a child inside: the child is kept.
        f.begin(&slice(5)).unwrap();
        f.begin(&slice(12)).unwrap();
        f.end(13).unwrap();
        f.end(14).unwrap();
        // Inside, with a child after the range: the child goes with its parent's part.
        f.begin(&slice(15)).unwrap();
        f.begin(&slice(25)).unwrap();
        f.end(26).unwrap();
        f.end(27).unwrap();
        // After: dropped with its child.
        f.begin(&slice(30)).unwrap();
        f.begin(&slice(31)).unwrap();
        f.end(32).unwrap();
        f.end(33).unwrap();
        f.counter(TrackId::TokensPerSecond, 9, 1.0).unwrap();
        f.counter(TrackId::TokensPerSecond, 19, 1.0).unwrap();
        assert_eq!(log.0, ["b12", "e13", "b15", "b25", "e26", "e27", "c19"]);
    }
}
